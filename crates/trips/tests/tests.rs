//! Trip grouping run by Braid: every partitioner and partition count gives the
//! reference interpreter's output on 1, 2 and 4 workers; shares never cross
//! partitions; SQL builds the same plan's answers.

use braid_exec::runtime::{run, RunConfig};
use braid_plan::batch::Scalar;
use braid_plan::function::Registry;
use braid_plan::output::OutRow;
use braid_plan::plan::{SinkSpec, SourceSpec};
use braid_plan::reference;
use std::collections::BTreeMap;
use std::sync::Arc;
use trips::app::{self, Adapt, Partitioner};
use trips::generate::{generate, GenConfig};
use trips::partition::{Cuts, Method};
use trips::request::{self, Request};
use trips::tg::TgConfig;

/// A small, busy day: 3,000 requests in two hours.
fn day(seed: u64) -> Vec<Request> {
    generate(&GenConfig {
        requests: 3_000,
        seed,
        wait: 600,
        day: 7_200,
    })
}

/// The adaptive partitioners learn every 5 minutes from the last 10 here.
const ADAPT: Adapt = Adapt {
    window: 600,
    period: 300,
};

fn registry(history: &[Request]) -> Registry {
    let mut r = Registry::with_builtins();
    app::register(&mut r, TgConfig::default(), Some(history), ADAPT);
    r
}

fn values(rows: &[OutRow]) -> Vec<Vec<Scalar>> {
    rows.iter().map(|r| r.values.clone()).collect()
}

#[test]
fn every_partitioner_and_count_equals_the_reference_on_1_2_and_4_workers() {
    let history = day(11);
    let reqs = day(5);
    let input = request::batch(&reqs);
    for by in Partitioner::ALL {
        for q in [1u32, 3, 8] {
            let mut reg = registry(&history);
            let plan = app::plan(
                SourceSpec::Memory(Arc::new(input.clone())),
                q,
                by,
                &TgConfig::default(),
                SinkSpec::Collect,
                &mut reg,
            )
            .expect("plan");
            let want = values(&reference::run(&plan, &reg, &input).expect("reference"));
            // Every request is in exactly one share.
            let mut ids: Vec<i64> = want
                .iter()
                .map(|r| match r[2] {
                    Scalar::Int(i) => i,
                    _ => panic!("id"),
                })
                .collect();
            ids.sort_unstable();
            assert_eq!(
                ids,
                (0..reqs.len() as i64).collect::<Vec<_>>(),
                "{by:?} q={q}"
            );
            for workers in [1, 2, 4] {
                let cfg = RunConfig {
                    workers,
                    ..RunConfig::default()
                };
                let got = run(&plan, &reg, &cfg).expect("run").collected;
                assert_eq!(values(&got), want, "{by:?} q = {q}, {workers} workers");
            }
        }
    }
}

/// Leader and member ids of each share in TG output rows.
fn shares(rows: &[Vec<Scalar>]) -> BTreeMap<i64, Vec<i64>> {
    let mut m: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for r in rows {
        let (Scalar::Int(leader), Scalar::Int(id)) = (&r[1], &r[2]) else {
            panic!("ints")
        };
        m.entry(*leader).or_default().push(*id);
    }
    m
}

#[test]
fn shares_never_cross_the_partitions_a_spatial_partitioner_chose() {
    // The partition of each request, computed here without Braid: static cuts from
    // the history, adaptive ones by a plain loop over the day in order.
    let history = day(11);
    let reqs = day(5);
    let input = request::batch(&reqs);
    let q = 8u32;
    let mut hist: Vec<_> = history.iter().map(Request::point).collect();
    let skd = Cuts::fit(Method::Kd, &mut hist, q);
    let akd = {
        let mut part = Vec::new();
        let mut cuts: Option<Cuts> = None;
        let mut next = (reqs[0].t / ADAPT.period + 1) * ADAPT.period;
        for (i, r) in reqs.iter().enumerate() {
            if r.t >= next {
                let at = next + (r.t - next) / ADAPT.period * ADAPT.period;
                let mut pts: Vec<_> = reqs[..i]
                    .iter()
                    .filter(|x| x.t >= at - ADAPT.window)
                    .map(Request::point)
                    .collect();
                cuts = Some(Cuts::fit(Method::Kd, &mut pts, q));
                next = at + ADAPT.period;
            }
            part.push(match &cuts {
                Some(c) => c.cell(&r.point()),
                None => i as u64 % u64::from(q),
            });
        }
        part
    };
    for (by, part) in [
        (
            Partitioner::Skd,
            reqs.iter()
                .map(|r| skd.cell(&r.point()))
                .collect::<Vec<_>>(),
        ),
        (Partitioner::Akd, akd),
    ] {
        let mut reg = registry(&history);
        let plan = app::plan(
            SourceSpec::Memory(Arc::new(input.clone())),
            q,
            by,
            &TgConfig::default(),
            SinkSpec::Collect,
            &mut reg,
        )
        .unwrap();
        let out = values(
            &run(
                &plan,
                &reg,
                &RunConfig {
                    workers: 2,
                    ..RunConfig::default()
                },
            )
            .unwrap()
            .collected,
        );
        let s = shares(&out);
        let mut shared = 0;
        for (leader, members) in &s {
            for m in members {
                assert_eq!(
                    part[*m as usize], part[*leader as usize],
                    "{by:?}: share of {leader} holds {m} of another partition"
                );
            }
            shared += usize::from(members.len() > 1);
        }
        // The partitions are not empty shells: there are many shares, in every one.
        assert!(shared > 200, "{by:?}: {shared} shares");
        let used: std::collections::BTreeSet<u64> = part.iter().copied().collect();
        assert_eq!(used.len(), q as usize, "{by:?}");
    }
}

#[test]
fn spatial_partitioners_keep_savings_that_round_robin_loses() {
    let history = day(11);
    let reqs = day(5);
    let input = request::batch(&reqs);
    let savings = |by: Partitioner, q: u32| {
        let mut reg = registry(&history);
        let plan = app::plan(
            SourceSpec::Memory(Arc::new(input.clone())),
            q,
            by,
            &TgConfig::default(),
            SinkSpec::Collect,
            &mut reg,
        )
        .unwrap();
        let out = values(&reference::run(&plan, &reg, &input).unwrap());
        let pairs: Vec<(f64, f64)> = out
            .iter()
            .map(|r| match (&r[4], &r[5]) {
                (Scalar::Float(c), Scalar::Float(a)) => (*c, *a),
                _ => panic!("floats"),
            })
            .collect();
        trips::tg::savings(&pairs)
    };
    let serial = savings(Partitioner::RoundRobin, 1);
    assert!(serial > 0.1, "serial savings {serial}");
    let rr = savings(Partitioner::RoundRobin, 16) / serial;
    let akd = savings(Partitioner::Akd, 16) / serial;
    let skd = savings(Partitioner::Skd, 16) / serial;
    assert!(akd > rr + 0.1, "akd {akd} rr {rr}");
    assert!(skd > rr + 0.1, "skd {skd} rr {rr}");
}

#[test]
fn sql_parallel_with_a_router_gives_the_rust_plans_answers() {
    let dir = std::env::temp_dir().join(format!("braid-trips-sql-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let history = day(11);
    let reqs = day(5);
    let path = dir.join("requests.csv");
    request::write_csv(&reqs, &mut std::fs::File::create(&path).unwrap()).unwrap();
    for (by, route) in [
        (Partitioner::Akd, "akd(t, ox, oy, dx, dy)"),
        (Partitioner::Spq, "spq(ox, oy, dx, dy)"),
    ] {
        let mut reg = registry(&history);
        let plan = app::plan(
            SourceSpec::Memory(Arc::new(request::batch(&reqs))),
            4,
            by,
            &TgConfig::default(),
            SinkSpec::Collect,
            &mut reg,
        )
        .unwrap();
        let want = values(&run(&plan, &reg, &RunConfig::default()).unwrap().collected);
        let sql = format!(
            "CREATE STREAM requests (id BIGINT NOT NULL, t BIGINT NOT NULL, ox BIGINT NOT NULL,
               oy BIGINT NOT NULL, dx BIGINT NOT NULL, dy BIGINT NOT NULL,
               deadline BIGINT NOT NULL)
               WITH (path = '{}', header = true, event_time = 't', epoch = 60);
             CREATE SINK shares WITH (sink = 'collect');
             INSERT INTO shares SELECT * FROM PARALLEL(requests, partitions => 4,
               route => {route}, apply => tg, merge => 'time');",
            path.display()
        );
        for workers in [1, 2] {
            let mut s = braid_exec::session::Session::new(
                &reg,
                RunConfig {
                    workers,
                    ..RunConfig::default()
                },
            );
            s.compile(&sql, &dir).expect("compiles");
            let reports = s.run_pending().expect("runs");
            assert_eq!(
                values(&reports[0].run.collected),
                want,
                "{route} on {workers} workers"
            );
            let explained = s.explain(&[0], false).unwrap();
            assert!(
                explained.contains(&format!("Map: {}_assign1", by.name())),
                "{explained}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn sql_refuses_a_router_given_the_wrong_arguments_or_route_when() {
    let history = day(11);
    let reg = registry(&history);
    let base = "CREATE STREAM requests (id BIGINT NOT NULL, t BIGINT NOT NULL, ox BIGINT NOT NULL,
               oy BIGINT NOT NULL, dx BIGINT NOT NULL, dy BIGINT NOT NULL,
               deadline BIGINT NOT NULL) WITH (path = 'r.csv', event_time = 't', epoch = 60);
             CREATE SINK shares WITH (sink = 'collect');
             INSERT INTO shares SELECT * FROM PARALLEL(requests, partitions => 4, ";
    for (rest, says) in [
        ("route => akd(ox, oy, dx, dy), apply => tg)", "router `akd`"),
        (
            "route => akd(t, ox, oy, dx, dy), route_when => t > 0, apply => tg)",
            "`route_when` with router `akd`",
        ),
    ] {
        let mut s = braid_exec::session::Session::new(&reg, RunConfig::default());
        let err = s
            .compile(&format!("{base}{rest};"), std::path::Path::new("."))
            .expect_err("refused")
            .to_string();
        assert!(err.contains(says), "{err}");
        assert!(err.contains("line "), "names the place: {err}");
    }
}
