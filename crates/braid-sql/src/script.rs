//! A compiled script: its catalog, its jobs (one per query) and the registry their
//! plans name.

use crate::catalog::{Catalog, LateStream, Listing, StreamDef};
use crate::logical::Logical;
use crate::run::LateRows;
use braid_plan::error::{Error, Result};
use braid_plan::function::Registry;
use braid_plan::plan::{Plan, Source, SourceSpec};
use std::sync::Arc;

/// A compiled query, ready to run.
#[derive(Clone)]
pub struct Job {
    /// The statement's text.
    pub sql: String,
    /// The plan as written (None for an explicit PARALLEL).
    pub logical: Option<Logical>,
    /// The optimized stages, lowest first, each with its partitioning (filters moved
    /// into the balancer; stage k + 1 reads `stagek`). Empty for an explicit PARALLEL.
    pub stages: Vec<(Logical, String)>,
    /// How the input is partitioned, and why.
    pub partitioning: String,
    /// The physical plan.
    pub plan: Plan,
    /// Late rows of the query.
    pub late: Arc<LateRows>,
    /// The stream of the query's late rows, when it can refuse any: a source reading
    /// them from plan 0 of a `Together`.
    pub late_source: Option<Source>,
    /// Set for a query over `LATE(sink)`: it runs in the dataflow of that job, as this
    /// plan of its `Together`.
    pub runs_in: Option<(usize, usize)>,
    /// The time unit of the query's input, when its streams declare one (that of its
    /// `LATE(sink)` stream).
    pub time_unit: Option<crate::time::TimeUnit>,
    /// `SET window = 'auto'`: the physical window W is chosen by doubling before the
    /// query runs (by the session: trial runs).
    pub tune_window: bool,
}

/// A compiled script: its declarations and its queries in order.
pub struct Script {
    /// Declared streams, tables, sinks and settings.
    pub catalog: Catalog,
    /// The queries.
    pub jobs: Vec<Job>,
    /// The registry the plans name (the caller's plus one function per query).
    pub registry: Registry,
    /// What SHOW and DESCRIBE statements list, in order, each after the queries before it.
    pub shown: Vec<Shown>,
}

/// What one SHOW or DESCRIBE statement lists.
#[derive(Clone, Debug)]
pub struct Shown {
    /// The statement came after this many queries (a caller running the queries shows
    /// it once they have run).
    pub after_jobs: usize,
    /// What it lists.
    pub what: Show,
}

/// What SHOW or DESCRIBE lists.
#[derive(Clone, Debug)]
pub enum Show {
    /// Tables of the catalog as it was at the statement (`SHOW STREAMS`, `DESCRIBE x`).
    Listings(Vec<Listing>),
    /// `SHOW QUERIES`: the queries and their state when it is shown; the caller that
    /// runs them knows it.
    Queries,
}

impl Script {
    /// Adds a compiled query to the script. A query over `LATE(x)` joins the dataflow of
    /// the job making those rows, as a later plan of its `Together`. A query with late rows
    /// that writes to `sink` makes `LATE(sink)` readable by later queries.
    pub(crate) fn add_job(&mut self, mut job: Job, sink: Option<&str>) -> Result<()> {
        let leaf = job.plan.leaf_source().clone();
        let index = self.jobs.len();
        let (owner, plan) = match &leaf.spec {
            SourceSpec::Late { .. } => {
                let of = leaf
                    .name
                    .strip_prefix("late(")
                    .and_then(|n| n.strip_suffix(')'))
                    .ok_or_else(|| Error::Internal(format!("late source named {}", leaf.name)))?;
                let owner = self.catalog.late_stream(of)?.job;
                let mut plans = match &self.jobs[owner].plan {
                    Plan::Together(p) => p.clone(),
                    one => vec![one.clone()],
                };
                plans.push(job.plan.clone());
                let plan = plans.len() - 1;
                // Checked before it replaces the owner's plan: a refused query leaves it be.
                let together = Plan::Together(plans);
                together.schema(&self.registry)?;
                self.jobs[owner].plan = together;
                job.runs_in = Some((owner, plan));
                (owner, plan)
            }
            _ => (index, 0),
        };
        if let (Some(sink), Some(source)) = (sink, &job.late_source) {
            let key = sink.to_ascii_lowercase();
            let name = format!("late({key})");
            let ambiguous = self.catalog.late.contains_key(&key);
            self.catalog.late.insert(
                key,
                LateStream {
                    def: StreamDef {
                        name: name.clone(),
                        source: Source {
                            name,
                            spec: SourceSpec::Late { of: plan },
                            ..source.clone()
                        },
                        lateness: 0,
                        time_unit: job.time_unit,
                        feeds: Default::default(),
                    },
                    job: owner,
                    ambiguous,
                },
            );
        }
        self.jobs.push(job);
        Ok(())
    }
}
