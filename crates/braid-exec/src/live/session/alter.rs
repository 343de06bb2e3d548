//! `ALTER MATERIALIZED VIEW | STREAM | QUERY ... SET PARALLELISM n`: a running query
//! goes to `n` partitions without losing or repeating a row.
//!
//! The query takes a checkpoint at the next epoch its source closes and reads nothing
//! after it ([`Status::pause`]), so its output holds exactly what that checkpoint
//! counted; once the checkpoint has committed it is dropped (its output stays open)
//! and installed again at `n` partitions, restoring from the checkpoint (each
//! aggregate group and join row goes to the partition its key routes to, see
//! [`crate::checkpoint`]). Its readers go on from the checkpoint's positions, so the
//! window read last is read again, by the new query. Needs a query that takes
//! checkpoints: one writing a stream of its own in a server with a data directory.
//!
//! [`Status::pause`]: crate::live::engine::Status

use super::{plan_error, LiveSession, Outcome};
use crate::checkpoint::CheckpointConfig;
use crate::error::Result;
use crate::rescale::{self, Request};
use braid_sql::parse::{Alter, AlterTarget};
use std::time::{Duration, Instant};

/// How long a query may take to reach its next epoch and commit its checkpoint.
const PAUSE: Duration = Duration::from_secs(10);

impl LiveSession {
    /// `ALTER ... SET PARALLELISM n`.
    pub(super) fn alter(&mut self, a: &Alter) -> Result<Outcome> {
        let index = match &a.target {
            AlterTarget::Query(k) => k
                .checked_sub(1)
                .filter(|&i| i < self.queries.len())
                .ok_or_else(|| {
                    plan_error("ALTER QUERY k: k is a query's number in SHOW QUERIES")
                })?,
            AlterTarget::Making(name, _) => *self.made_by.get(name).ok_or_else(|| {
                plan_error(&format!("no running query makes a stream named `{name}`"))
            })?,
        };
        self.rescale(index, a.partitions)?;
        Ok(Outcome::Done(a.tag().into()))
    }

    /// Query `index` to `q` partitions (see the module's text).
    fn rescale(&mut self, index: usize, q: u32) -> Result<()> {
        let workers = self.engine.workers();
        let query = &self.queries[index];
        if query.dropped || query.status.ended() {
            return Err(plan_error(&format!(
                "query {} is not running",
                query.number
            )));
        }
        let Some(cfg) = query.checkpoint.clone() else {
            return Err(plan_error(&format!(
                "query {} takes no checkpoints: a server with a data directory checkpoints the queries that write a stream of their own or a sink, and only those change their parallelism while running",
                query.number
            )));
        };
        let (plan, registry) = query.plan.clone();
        let shape = rescale::spec(
            &plan,
            &registry,
            (workers, workers),
            &Request::Partitions(q),
        )
        .map_err(|e| plan_error(&format!("query {}: {e}", query.number)))?;
        let plan = rescale::apply(&plan, &shape);
        let status = query.status.clone();
        let (old, number) = (query.id, query.number);
        // A follower of a cluster runs the leader's ALTER once the leader's pause has
        // committed: it only replaces its share of the dataflow.
        let follows = self.engine.follows();
        if !follows {
            status.pause();
        }
        let deadline = Instant::now() + PAUSE;
        while !follows && status.paused().is_none() {
            if let Some(e) = status.error() {
                return Err(plan_error(&format!("query {number} failed: {e}")));
            }
            if Instant::now() > deadline && status.unpause() {
                return Err(plan_error(&format!(
                    "query {number} did not reach the end of an epoch within {} s (its input is catching up after a restart?); it runs on as it was: retry",
                    PAUSE.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        status.keep_open();
        self.engine.drop_query(old)?;
        while !status.ended() {
            std::thread::sleep(Duration::from_millis(1));
        }
        let cfg = CheckpointConfig {
            recover: true,
            ..cfg
        };
        let closes = self.queries[index].out.iter().cloned().collect();
        let (id, status, prepared) =
            self.engine
                .install(&plan, &registry, self.strict, closes, Some(&cfg))?;
        let graph = braid_plan::graph::graph(&prepared, &registry, workers);
        let query = &mut self.queries[index];
        query.id = id;
        query.status = status;
        query.plan = (prepared, registry);
        query.graph = graph;
        self.durable_parallelism(number, q)
    }
}
