//! Trip grouping as a Braid plan: the request stream split q ways by a partitioner,
//! TG on every partition, the shares merged in time order.

use crate::partition::{Adaptive, Method, Point, Static};
use crate::request::{self, Request};
use crate::tg::{Loads, Tg, TgConfig};
use braid_plan::error::{Error, Result};
use braid_plan::expr::Expr;
use braid_plan::function::{Registry, StreamFunctionFactory};
use braid_plan::plan::{MergeKind, Plan, Route, SinkSpec, SourceSpec, Strategy};
use braid_plan::router::{self, Assign};
use std::sync::Arc;

/// The stream function's name.
pub const TG: &str = "tg";

/// How requests are split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Partitioner {
    /// Round robin: perfect balance, no regard for space (Paper III's reference).
    RoundRobin,
    /// Static point quad.
    Spq,
    /// Static KD.
    Skd,
    /// Adaptive point quad.
    Apq,
    /// Adaptive KD.
    Akd,
}

impl Partitioner {
    /// All five, in the paper's order.
    pub const ALL: [Partitioner; 5] = [
        Partitioner::RoundRobin,
        Partitioner::Spq,
        Partitioner::Skd,
        Partitioner::Apq,
        Partitioner::Akd,
    ];

    /// Its name (the router's, `rr` for round robin).
    pub fn name(self) -> &'static str {
        match self {
            Partitioner::RoundRobin => "rr",
            Partitioner::Spq => "spq",
            Partitioner::Skd => "skd",
            Partitioner::Apq => "apq",
            Partitioner::Akd => "akd",
        }
    }

    /// Whether it learns while it runs.
    pub fn adaptive(self) -> bool {
        matches!(self, Partitioner::Apq | Partitioner::Akd)
    }
}

impl std::str::FromStr for Partitioner {
    type Err = Error;
    fn from_str(s: &str) -> Result<Partitioner> {
        Partitioner::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                Error::Plan(format!(
                    "partitioner `{s}`; partitioners are rr, spq, skd, apq, akd"
                ))
            })
    }
}

/// The adaptive partitioners' window and period, seconds (Paper III: both 10 minutes).
#[derive(Clone, Copy, Debug)]
pub struct Adapt {
    /// The history they learn from.
    pub window: i64,
    /// How often they learn.
    pub period: i64,
}

impl Default for Adapt {
    fn default() -> Adapt {
        Adapt {
            window: 600,
            period: 600,
        }
    }
}

/// Registers `tg` (with `cfg`), the adaptive routers `apq` and `akd`, and, when a
/// history is given, the static routers `spq` and `skd` learned from it. The returned
/// loads fill as TG instances finish.
pub fn register(
    registry: &mut Registry,
    cfg: TgConfig,
    history: Option<&[Request]>,
    adapt: Adapt,
) -> Arc<Loads> {
    let loads = Arc::new(Loads::default());
    registry.add_function(
        TG,
        Arc::new(Tg {
            cfg,
            loads: loads.clone(),
        }),
    );
    for (name, method) in [("apq", Method::PointQuad), ("akd", Method::Kd)] {
        registry.add_router(
            name,
            Arc::new(Adaptive {
                method,
                window: adapt.window,
                period: adapt.period,
            }),
        );
    }
    match history {
        Some(h) => {
            let points: Arc<Vec<Point>> = Arc::new(h.iter().map(Request::point).collect());
            registry.add_router(
                "spq",
                Arc::new(Static::new(Method::PointQuad, points.clone())),
            );
            registry.add_router("skd", Arc::new(Static::new(Method::Kd, points)));
        }
        None => {
            for name in ["spq", "skd"] {
                if registry.router(name).is_none() {
                    registry.add_router(name, Arc::new(NeedsHistory));
                }
            }
        }
    }
    loads
}

/// The plan: `source` (requests, epoch = the TG cycle) split into `q` by `by`, TG on
/// each partition, the shares merged in time order into `sink`. Registers the
/// assigning stage's function of a spatial partitioner in `registry` (which must hold
/// what [`register`] put there).
pub fn plan(
    source: SourceSpec,
    q: u32,
    by: Partitioner,
    cfg: &TgConfig,
    sink: SinkSpec,
    registry: &mut Registry,
) -> Result<Plan> {
    let schema = request::schema();
    let mut p = Plan::source("requests", source, schema.clone());
    if let Plan::Source(s) = &mut p {
        s.epoch = cfg.cycle as u64;
    }
    let col = |n: &str| Expr::col(&schema, n).expect("a request column");
    let split = match by {
        Partitioner::RoundRobin => p.split(q, Route::RoundRobin, None, Strategy::Fsplit),
        _ => {
            let name = by.name();
            let factory = registry
                .router(name)
                .ok_or_else(|| match by {
                    Partitioner::Spq | Partitioner::Skd => Error::Plan(format!(
                        "{name} learns from a history: register one (trips::app::register)"
                    )),
                    _ => Error::Plan(format!("router `{name}` is not registered")),
                })?
                .clone();
            let mut args = Vec::new();
            if by.adaptive() {
                args.push(col("t"));
            }
            args.extend(["ox", "oy", "dx", "dy"].map(col));
            let assign = Assign::new(name, factory, args, q, &schema)?;
            let fname = format!("{name}_assign_q{q}");
            let assigned = assign.output_schema(&schema)?;
            registry.add_function(&fname, Arc::new(assign));
            router::assigned(p, &fname, &assigned, q, None, Strategy::Fsplit)?
        }
    };
    Ok(split.map(TG).merge(MergeKind::TimeOrdered).sink(sink))
}

/// A static partitioner registered without a history: refused wherever it is named.
struct NeedsHistory;

impl braid_plan::router::RouterFactory for NeedsHistory {
    fn check_args(&self, _: &[braid_plan::types::DataType]) -> Result<()> {
        Err(Error::Plan(
            "a static partitioner learns its cuts from past requests, and none were given \
             (braid run --trips-history FILE; braid trips generate writes such a file)"
                .into(),
        ))
    }
    fn create(&self, _: u32) -> Box<dyn braid_plan::router::Router> {
        unreachable!("refused when the plan is checked")
    }
}
