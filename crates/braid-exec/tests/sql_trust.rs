//! SQL whose answers a Flink or RisingWave user can trust, checked against plain loops:
//! aggregate `FILTER (WHERE ...)` counts only the rows it keeps (every aggregate
//! function), `HOP(time, slide, size)` takes Flink's order (windows `size` long,
//! `slide` apart, no row called late), and windows closed together come in window order.

use crate::sql::{int_rows, scratch, script, write_calls, Call};
use braid_exec::runtime::{run, RunConfig};
use braid_plan::batch::Scalar;
use std::collections::{BTreeMap, BTreeSet};

/// Every aggregate function with a FILTER, per tumbling window, equals a loop over the
/// rows that pass each filter.
#[test]
fn sql_aggregate_filter_matches_a_loop() {
    let calls: Vec<Call> = (0..400)
        .map(|i| (i % 3, i % 7, i / 2, (i * 37) % 200))
        .collect();
    let got = int_rows(
        "filter",
        &calls,
        "SELECT window_start, count(*) FILTER (WHERE dur > 100) AS long, count(*) AS n, \
         sum(dur) FILTER (WHERE callee > 2) AS s, min(dur) FILTER (WHERE callee = 1) AS lo, \
         max(dur) FILTER (WHERE callee = 1) AS hi, count(callee) FILTER (WHERE dur < 50) AS c, \
         count(DISTINCT callee) FILTER (WHERE dur > 150) AS d \
         FROM calls GROUP BY TUMBLE(start, 100)",
    );
    let mut windows: BTreeMap<i64, Vec<Call>> = BTreeMap::new();
    for c in &calls {
        windows.entry(c.2 - c.2 % 100).or_default().push(*c);
    }
    let mut want = Vec::new();
    for (w, rows) in windows {
        let long = rows.iter().filter(|c| c.3 > 100).count() as i64;
        let s = rows.iter().filter(|c| c.1 > 2).map(|c| c.3).sum::<i64>();
        let ones: Vec<i64> = rows.iter().filter(|c| c.1 == 1).map(|c| c.3).collect();
        let lo = *ones.iter().min().expect("callee 1 in every window");
        let hi = *ones.iter().max().expect("callee 1 in every window");
        let c = rows.iter().filter(|c| c.3 < 50).count() as i64;
        let d = rows
            .iter()
            .filter(|c| c.3 > 150)
            .map(|c| c.1)
            .collect::<BTreeSet<_>>()
            .len() as i64;
        want.push(vec![w, long, rows.len() as i64, s, lo, hi, c, d]);
    }
    assert_eq!(got, want);
    // The filter changes the answer: not every call is long.
    assert!(want.iter().all(|r| r[1] < r[2]), "{want:?}");
}

/// `HOP(start, 20, 60)`: windows 60 long whose starts are 20 apart, each counting the
/// rows inside it; in-order rows are never late (a gap between windows would lose them).
#[test]
fn sql_hop_takes_the_slide_then_the_size() {
    let calls: Vec<Call> = (0..100).map(|i| (i % 4, 0, i * 3, 1)).collect();
    let got = int_rows(
        "hop",
        &calls,
        "SELECT window_start, window_end, count(*) AS n FROM calls GROUP BY HOP(start, 20, 60)",
    );
    let mut want: BTreeMap<i64, i64> = BTreeMap::new();
    for c in &calls {
        let t = c.2;
        let mut s = t - t.rem_euclid(20);
        while s > t - 60 {
            *want.entry(s).or_default() += 1;
            s -= 20;
        }
    }
    let want: Vec<Vec<i64>> = want.into_iter().map(|(s, n)| vec![s, s + 60, n]).collect();
    assert_eq!(got, want);
    // Every row is in three windows.
    assert_eq!(
        want.iter().map(|r| r[2]).sum::<i64>(),
        3 * calls.len() as i64
    );
}

/// The windows that close together (at the end of an epoch, or of the input) come in
/// order of window_end, then window_start, then key, in a serial run and a parallel
/// one, with either merge (the best-effort one only on one partition).
#[test]
fn sql_windows_closed_together_come_in_window_order() {
    let calls: Vec<Call> = (0..300).map(|i| (i % 5, 0, i, 1)).collect();
    let dir = scratch("order");
    write_calls(&dir.0.join("calls.csv"), &calls);
    write_calls(&dir.0.join("texts.csv"), &calls);
    std::fs::write(dir.0.join("watch.csv"), "number,risk\n").expect("watch");
    let queries = [
        "SELECT window_start, window_end, caller, count(*) AS n FROM calls GROUP BY HOP(start, 20, 60), caller",
        "SELECT window_start, window_end, caller % 3 AS k, count(*) AS n FROM calls GROUP BY SESSION(start, 7), caller % 3",
    ];
    let settings = [
        "SET parallel = 'off'; SET merge = 'best_effort';",
        "SET parallel = 'off';",
        "SET partitions = 4;",
    ];
    for (q, settings) in queries
        .iter()
        .flat_map(|q| settings.iter().map(move |s| (q, s)))
    {
        let s = script(&dir.0, settings, q);
        for workers in [1, 2] {
            let cfg = RunConfig {
                workers,
                ..RunConfig::default()
            };
            let rows = run(&s.jobs[0].plan, &s.registry, &cfg)
                .expect("run")
                .collected;
            let mut by_epoch: BTreeMap<u64, Vec<Vec<Scalar>>> = BTreeMap::new();
            for r in &rows {
                by_epoch.entry(r.epoch).or_default().push(r.values.clone());
            }
            assert!(by_epoch.contains_key(&u64::MAX), "windows left at the end");
            for (epoch, got) in by_epoch {
                let key = |v: &Vec<Scalar>| (v[1].clone(), v[0].clone(), v[2].clone());
                let mut want = got.clone();
                want.sort_by_key(key);
                assert_eq!(
                    got, want,
                    "{q}, {settings} {workers} workers, epoch {epoch}"
                );
            }
        }
    }
}
