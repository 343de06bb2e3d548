//! Window top-N against plain loops: per tumbling window of 50, the calls per caller;
//! the 3 callers with the most calls (ties: the smaller caller first), numbered 1..3,
//! and per window and caller the 2 callees with the longest total duration. Inputs have
//! no late row; runs serially and on 1, 2 and 4 workers with both merges (`runs` in
//! sql_outer.rs). The transparent merge's order is checked against serial in sql.rs
//! (`top_n`, `top_n_per_key`).

use crate::sql::{scratch, write_calls, write_texts, Call};
use crate::sql_outer::{in_order, runs};
use braid_plan::batch::Scalar;
use proptest::prelude::*;
use std::collections::BTreeMap;

fn int(x: i64) -> Scalar {
    Scalar::Int(x)
}

fn check(calls: &[Call]) -> Result<(), TestCaseError> {
    let dir = scratch("topn");
    write_calls(&dir.0.join("calls.csv"), calls);
    write_texts(&dir.0.join("texts.csv"), &[]);
    std::fs::write(dir.0.join("watch.csv"), "number,risk\n").expect("watch");
    // Calls per (window, caller).
    let mut counts: BTreeMap<(i64, i64), i64> = BTreeMap::new();
    for &(caller, _, start, _) in calls {
        *counts.entry((start / 50 * 50, caller)).or_default() += 1;
    }
    let mut want = Vec::new();
    let mut windows: BTreeMap<i64, Vec<(i64, i64)>> = BTreeMap::new();
    for (&(w, caller), &n) in &counts {
        windows.entry(w).or_default().push((caller, n));
    }
    for (w, mut groups) in windows {
        groups.sort_by_key(|&(caller, n)| (-n, caller));
        for (k, (caller, n)) in groups.into_iter().take(3).enumerate() {
            want.push(vec![
                int(w),
                int(w + 50),
                int(caller),
                int(n),
                int(k as i64 + 1),
            ]);
        }
    }
    want.sort();
    let q = "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY n DESC) AS rownum FROM (SELECT window_start, window_end, caller, count(*) AS n FROM calls GROUP BY TUMBLE(start, 50), caller)) WHERE rownum <= 3";
    prop_assert_eq!(runs(&dir.0, q), want, "{}", q);

    // Total duration per (window, caller, callee); per window and caller the 2 largest
    // (ties: the smaller callee first).
    let mut sums: BTreeMap<(i64, i64), Vec<(i64, i64)>> = BTreeMap::new();
    let mut by: BTreeMap<(i64, i64, i64), i64> = BTreeMap::new();
    for &(caller, callee, start, dur) in calls {
        *by.entry((start / 50 * 50, caller, callee)).or_default() += dur;
    }
    for (&(w, caller, callee), &d) in &by {
        sums.entry((w, caller)).or_default().push((callee, d));
    }
    let mut want = Vec::new();
    for ((w, caller), mut v) in sums {
        v.sort_by_key(|&(callee, d)| (-d, callee));
        for (k, (callee, d)) in v.into_iter().take(2).enumerate() {
            want.push(vec![
                int(w + 50),
                int(caller),
                int(callee),
                int(d),
                int(k as i64 + 1),
            ]);
        }
    }
    want.sort();
    let q = "SELECT window_end, caller, callee, d, r FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, caller ORDER BY d DESC, callee ASC) AS r FROM (SELECT window_start, window_end, caller, callee, sum(dur) AS d FROM calls GROUP BY TUMBLE(start, 50), caller, callee)) WHERE r <= 2";
    prop_assert_eq!(runs(&dir.0, q), want, "{}", q);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4, ..ProptestConfig::default() })]

    #[test]
    fn sql_window_top_n_matches_a_loop(calls in in_order()) {
        check(&calls)?;
    }
}
