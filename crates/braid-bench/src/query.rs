//! The query of the split and tune benchmarks: the built-in generator (512 keys, so
//! every partition up to q = 512 gets rows) split by `xway` into q partitions with the
//! rows of `type = 2` broadcast, counted (nearly free: the split and the engine
//! dominate), merged by union and discarded.

use anyhow::Result;
use braid_plan::plan::{GeneratorSpec, MergeKind, Plan, Route, SinkSpec, SourceSpec, Strategy};
use braid_sql::expr::parse_expr;

/// Keys (expressways) of the generator.
pub const KEYS: u32 = 512;

/// The generator: `tuples` tuples, `rate` per event-time second, broadcast fraction `b`.
pub fn gen_spec(tuples: u64, rate: f64, b: f64) -> GeneratorSpec {
    GeneratorSpec {
        tuples,
        rate,
        keys: KEYS,
        broadcast: b,
        seed: 1,
    }
}

/// generator -> split(q, route xway, broadcast type = 2, strategy) -> count -> union
/// -> discard, with physical windows of `window` rows.
pub fn plan(spec: GeneratorSpec, q: u32, strategy: Strategy, window: usize) -> Result<Plan> {
    let schema = GeneratorSpec::schema();
    let route = Route::Expr {
        expr: parse_expr("xway", &schema)?,
        when: None,
    };
    let broadcast = Some(parse_expr("type = 2", &schema)?);
    let mut plan = Plan::source("gen", SourceSpec::Generator(spec), schema)
        .split(q, route, broadcast, strategy)
        .map("count")
        .merge(MergeKind::Union)
        .sink(SinkSpec::Discard);
    plan.leaf_source_mut().window = window;
    if let Some(s) = braid_exec::tune::split_mut(&mut plan) {
        s.hints.broadcast_fraction = spec.broadcast;
    }
    Ok(plan)
}

/// A broadcast fraction as a percentage without a trailing `.0` (`0.5`, `10`).
pub fn pct(b: f64) -> String {
    let s = format!("{:.1}", b * 100.0);
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}
