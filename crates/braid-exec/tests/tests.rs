//! Oracle tests: parallel execution equals the reference interpreter, for every split
//! strategy and 1, 2 and 4 workers, on random streams and random routing.
//!
//! What each family catches: `union_*` (multiset equality) catches lost, duplicated or
//! misrouted rows; `time_ordered_*` (sequence equality) catches any deviation from the
//! serial order; the `running` stream function emits an order-sensitive fold, so a
//! partition that sees its rows out of order fails every merge kind; `keyed_*` checks
//! partial-result combination, per worker and through merge trees.

mod bad_input;

use braid_exec::runtime::{run, RunConfig};
use braid_plan::batch::{Batch, Row, RowKey, Scalar, Value};
use braid_plan::expr::{BinOp, Expr};
use braid_plan::function::{Emitter, Registry, StreamFunction, StreamFunctionFactory};
use braid_plan::plan::{
    Agg, Combine, MergeKind, Plan, Route, SinkSpec, SourceSpec, SplitShape, Strategy,
};
use braid_plan::reference::{self, OutRow};
use braid_plan::types::Schema;
use proptest::prelude::*;
use std::sync::Arc;

/// Emits (partition, time, running fold of v) for every row: order-sensitive.
struct Running;
struct RunningState {
    p: i64,
    acc: i64,
}
impl StreamFunctionFactory for Running {
    fn output_schema(&self, _: &Schema) -> braid_plan::error::Result<Schema> {
        Ok(Schema::ints(&["p", "time", "acc"]))
    }
    fn create(&self, p: u32, _: u32) -> Box<dyn StreamFunction> {
        Box::new(RunningState {
            p: p as i64,
            acc: 0,
        })
    }
}
impl StreamFunction for RunningState {
    fn process(&mut self, row: Row<'_>, out: &mut Emitter<'_>) {
        let v = row.int(2).unwrap_or(0);
        self.acc = self.acc.wrapping_mul(31).wrapping_add(v) % 1_000_003;
        out.emit_ints(&[self.p, row.int(0).unwrap_or(0), self.acc]);
    }
    fn end_of_epoch(&mut self, epoch: u64, out: &mut Emitter<'_>) {
        out.emit_ints(&[self.p, epoch as i64, -self.acc]);
    }
    fn finish(&mut self, out: &mut Emitter<'_>) {
        out.emit_ints(&[self.p, -1, self.acc]);
    }
}

fn registry() -> Registry {
    let mut r = Registry::with_builtins();
    r.add_function("running", Arc::new(Running));
    r.add_route(
        "by_key",
        Arc::new(|row: Row<'_>| row.int(1).map(|k| k as u64)),
    );
    r
}

fn schema() -> Schema {
    Schema::ints(&["time", "key", "v", "kind"])
        .with_event_time("time")
        .expect("int64 time")
}

/// Rows with non-decreasing time.
fn stream(rows: &[(u8, i64, i64, u8)]) -> Batch {
    let mut b = Batch::new(4);
    let mut t = 0i64;
    for (i, &(dt, key, v, kind)) in rows.iter().enumerate() {
        t += (dt % 3) as i64;
        b.push(
            RowKey {
                seq: i as u64,
                lane: 0,
            },
            &[
                Value::Int(t),
                Value::Int(key),
                Value::Int(v),
                Value::Int(kind as i64),
            ],
        );
    }
    b
}

#[derive(Clone, Copy, Debug)]
enum RouteKind {
    ByKey,
    KeyWhenKind0,
    Native,
    AllOmitted,
    Skewed,
}

#[allow(clippy::too_many_arguments)] // a test helper naming every knob of a plan
fn plan(
    input: Batch,
    q: u32,
    route: RouteKind,
    bcast: Option<i64>,
    strategy: Strategy,
    function: &str,
    merge: MergeKind,
    window: usize,
) -> Plan {
    let s = schema();
    let key = Expr::col(&s, "key").expect("key");
    let kind = Expr::col(&s, "kind").expect("kind");
    let route = match route {
        RouteKind::ByKey => Route::Expr {
            expr: key,
            when: None,
        },
        RouteKind::KeyWhenKind0 => Route::Expr {
            expr: key,
            when: Some(kind.clone().eq(Expr::int(0))),
        },
        RouteKind::Native => Route::Native("by_key".into()),
        RouteKind::AllOmitted => Route::Expr {
            expr: Expr::Literal(Scalar::Null).bin(BinOp::Add, Expr::int(1)),
            when: None,
        },
        RouteKind::Skewed => Route::Expr {
            expr: key.bin(BinOp::Mod, Expr::int(2)),
            when: None,
        },
    };
    // Broadcast: kind >= threshold (threshold 0: everything is broadcast).
    let broadcast = bcast.map(|t| kind.bin(BinOp::GtEq, Expr::int(t)));
    let mut p = Plan::source("s", SourceSpec::Memory(Arc::new(input)), schema());
    if let Plan::Source(src) = &mut p {
        src.window = window;
        src.epoch = 2;
    }
    p.split(q, route, broadcast, strategy)
        .map(function)
        .merge(merge)
        .sink(SinkSpec::Collect)
}

fn parallel(plan: &Plan, workers: usize) -> Vec<OutRow> {
    let cfg = RunConfig {
        workers,
        ..RunConfig::default()
    };
    run(plan, &registry(), &cfg)
        .expect("run succeeds")
        .collected
}

fn sorted(mut v: Vec<OutRow>) -> Vec<OutRow> {
    v.sort();
    v
}

const STRATEGIES: [Strategy; 5] = [
    Strategy::Fsplit,
    Strategy::Maxtree,
    Strategy::Exptree,
    Strategy::Parasplit,
    Strategy::Autosplit,
];

fn route_kind() -> impl proptest::strategy::Strategy<Value = RouteKind> {
    prop_oneof![
        Just(RouteKind::ByKey),
        Just(RouteKind::KeyWhenKind0),
        Just(RouteKind::Native),
        Just(RouteKind::AllOmitted),
        Just(RouteKind::Skewed)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, .. ProptestConfig::default() })]

    #[test]
    fn union_and_time_ordered_match_reference(
        rows in proptest::collection::vec((any::<u8>(), -5i64..40, -100i64..100, 0u8..4), 0..300),
        q in prop_oneof![Just(1u32), Just(2), Just(3), Just(7), Just(16), Just(64)],
        route in route_kind(),
        bcast in prop_oneof![Just(None), Just(Some(3i64)), Just(Some(2)), Just(Some(0))],
        window in 1usize..40,
    ) {
        let input = stream(&rows);
        for strategy in STRATEGIES {
            for (merge, ordered) in [(MergeKind::Union, false), (MergeKind::TimeOrdered, true)] {
                let p = plan(input.clone(), q, route, bcast, strategy, "running", merge, window);
                let expected = reference::run(&p, &registry(), &input).expect("reference runs");
                for workers in [1, 2, 4] {
                    let got = parallel(&p, workers);
                    if ordered {
                        prop_assert_eq!(&got, &expected, "{:?} {} workers, time-ordered", strategy, workers);
                    } else {
                        prop_assert_eq!(sorted(got), sorted(expected.clone()), "{:?} {} workers, union", strategy, workers);
                    }
                }
            }
        }
    }

    #[test]
    fn keyed_merge_matches_reference(
        rows in proptest::collection::vec((any::<u8>(), 0i64..40, -100i64..100, 0u8..4), 0..200),
        q in prop_oneof![Just(2u32), Just(5), Just(16)],
        fanin in prop_oneof![Just(None), Just(Some(2u32)), Just(Some(3))],
        filtered in any::<bool>(),
    ) {
        let input = stream(&rows);
        // count emits (partition, epoch, n) per epoch: sum n by epoch across partitions.
        // With a filter, only per-epoch rows are combined (sum and count keep the input's
        // three int64 columns); the end-of-input rows (epoch -1) pass through as a union.
        let (aggs, filter) = if filtered {
            let counts = Schema::ints(&["partition", "epoch", "count"]);
            let f = Expr::col(&counts, "epoch").expect("epoch").bin(BinOp::GtEq, Expr::int(0));
            (vec![Agg::Sum(2), Agg::Count], Some(f))
        } else {
            (vec![Agg::Sum(2), Agg::Count, Agg::Max(0)], None)
        };
        let merge = MergeKind::Keyed { key: vec![1], combine: Combine::Aggregates(aggs), fanin, filter };
        for strategy in [Strategy::Fsplit, Strategy::Exptree, Strategy::Parasplit] {
            let p = plan(input.clone(), q, RouteKind::ByKey, Some(3), strategy, "count", merge.clone(), 8);
            let expected: Vec<Vec<Scalar>> = {
                let mut v: Vec<_> = reference::run(&p, &registry(), &input).expect("reference").into_iter().map(|r| r.values).collect();
                v.sort();
                v
            };
            for workers in [1, 2, 4] {
                let mut got: Vec<Vec<Scalar>> = parallel(&p, workers).into_iter().map(|r| r.values).collect();
                got.sort();
                prop_assert_eq!(&got, &expected, "{:?} {} workers", strategy, workers);
            }
        }
    }
}

#[test]
fn strategies_resolve_to_their_shapes() {
    let input = stream(&[(1, 1, 1, 0)]);
    let reg = registry();
    let shape = |strategy, bcast: Option<i64>| {
        let p = plan(
            input.clone(),
            64,
            RouteKind::ByKey,
            bcast,
            strategy,
            "identity",
            MergeKind::Union,
            4,
        );
        let p = braid_exec::runtime::prepare(&p, &reg, 2).expect("plan resolves");
        fn find(p: &Plan) -> Option<SplitShape> {
            match p {
                Plan::Split(s) => s.shape.clone(),
                _ => p.input().and_then(find),
            }
        }
        find(&p).expect("a split")
    };
    assert_eq!(shape(Strategy::Fsplit, Some(3)), SplitShape::Fsplit);
    assert!(
        matches!(shape(Strategy::Exptree, Some(3)), SplitShape::Tree(t) if t.fanouts == vec![2, 4, 8])
    );
    assert!(
        matches!(shape(Strategy::Maxtree, Some(3)), SplitShape::Tree(t) if t.fanouts == vec![2, 32])
    );
    assert_eq!(shape(Strategy::Autosplit, None), SplitShape::Fsplit);
    assert!(matches!(
        shape(Strategy::Autosplit, Some(3)),
        SplitShape::Tree(_)
    ));
    assert!(matches!(
        shape(Strategy::Parasplit, Some(3)),
        SplitShape::Parasplit { p: 2, .. }
    ));
}

#[test]
fn keyed_merge_small_two_workers() {
    let input = stream(&[(1, 0, 1, 0), (1, 1, 1, 0), (1, 2, 1, 0), (1, 3, 1, 0)]);
    let merge = MergeKind::Keyed {
        key: vec![1],
        combine: Combine::Aggregates(vec![Agg::Sum(2), Agg::Count]),
        fanin: None,
        filter: None,
    };
    let p = plan(
        input.clone(),
        2,
        RouteKind::ByKey,
        None,
        Strategy::Fsplit,
        "count",
        merge,
        8,
    );
    let mut expected: Vec<Vec<Scalar>> = reference::run(&p, &registry(), &input)
        .expect("reference")
        .into_iter()
        .map(|r| r.values)
        .collect();
    expected.sort();
    let mut got: Vec<Vec<Scalar>> = parallel(&p, 2).into_iter().map(|r| r.values).collect();
    got.sort();
    assert_eq!(got, expected);
}
