//! `braid run --dashboard`: the server's live dashboard over a one-shot run. Each query
//! of the run is shown as it runs (its plan as boxes coloured by busy share, its
//! counters), from the run's live counters and profiler.

use anyhow::{Context, Result};
use braid_exec::live::snapshot::{measure, QuerySnapshot, Snapshot, StreamSnapshot};
use braid_exec::profile::Profiler;
use braid_exec::source::Counters;
use braid_plan::function::Registry;
use braid_plan::graph::GraphNode;
use braid_plan::plan::Plan;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

/// The run's queries so far, as the dashboard shows them.
#[derive(Clone, Default)]
pub struct RunBoard {
    queries: Arc<Mutex<Vec<Query>>>,
    workers: usize,
    /// Takes `POST /api/rescale` to the running query.
    pub rescaler: braid_exec::rescale::Rescaler,
}

struct Query {
    sql: String,
    source: String,
    /// Its latency constraint (`max_latency`), if any.
    constraint: Option<std::time::Duration>,
    graph: Vec<GraphNode>,
    counters: Arc<Counters>,
    profiler: Arc<Profiler>,
    ended: bool,
}

impl RunBoard {
    /// Serves the dashboard at `at` for `workers` workers in all; says where.
    pub fn start(at: SocketAddr, workers: usize) -> Result<RunBoard> {
        let listener = std::net::TcpListener::bind(at)
            .with_context(|| format!("binding the dashboard's address {at}"))?;
        let addr = listener.local_addr()?;
        let board = RunBoard {
            queries: Arc::default(),
            workers,
            rescaler: Default::default(),
        };
        let b = board.clone();
        braid_server::dashboard::serve_alone(
            listener,
            Box::new(move || b.snapshot()),
            Some(board.rescaler.clone()),
        )?;
        eprintln!(
            "braid: dashboard of this run at http://{addr}/ (metrics at /metrics; POST /api/rescale?partitions=Q rescales the running query live)"
        );
        Ok(board)
    }

    /// Query `sql` with `plan` starts: counted in `counters`, profiled into the profiler
    /// returned.
    pub fn begin(
        &self,
        sql: &str,
        plan: &Plan,
        registry: &Registry,
        counters: Arc<Counters>,
    ) -> Arc<Profiler> {
        let profiler = Profiler::new();
        let graph = braid_exec::runtime::prepare(plan, registry, self.workers)
            .map(|p| braid_plan::graph::graph(&p, registry, self.workers))
            .unwrap_or_default();
        let mut q = self.queries.lock().unwrap_or_else(|p| p.into_inner());
        for old in q.iter_mut() {
            old.ended = true;
        }
        q.push(Query {
            sql: sql.to_string(),
            source: plan.leaf_source().name.clone(),
            constraint: plan.latency_constraint(),
            graph,
            counters,
            profiler: profiler.clone(),
            ended: false,
        });
        profiler
    }

    /// The last query ended.
    pub fn end(&self) {
        let mut q = self.queries.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(last) = q.last_mut() {
            last.ended = true;
        }
    }

    fn snapshot(&self) -> Snapshot {
        let q = self.queries.lock().unwrap_or_else(|p| p.into_inner());
        let queries: Vec<QuerySnapshot> = q
            .iter()
            .enumerate()
            .map(|(i, q)| {
                let c = &q.counters;
                QuerySnapshot {
                    number: i + 1,
                    state: if q.ended { "ended" } else { "running" },
                    error: None,
                    sql: q.sql.clone(),
                    writes: "its sinks".into(),
                    reads: vec![q.source.clone()],
                    rows_in: c.rows_in.load(Relaxed),
                    rows_out: c.rows_out.load(Relaxed),
                    faults: c.faults.load(Relaxed),
                    late: c.late(),
                    kafka_lag: c.kafka_lag.load(Relaxed),
                    epoch_in: c.epoch_in.load(Relaxed),
                    epoch_out: c.epoch_out.load(Relaxed),
                    graph: measure(&q.graph, &q.profiler),
                    latency: Default::default(),
                    // Under a constraint the run stamps its rows: their latencies so
                    // far, as the server shows a live query's.
                    constraint_ms: q.constraint.map(|d| d.as_secs_f64() * 1e3),
                    row_latency_ms: q
                        .constraint
                        .and_then(|d| c.latency.get().map(|l| l.summary(Some(d))))
                        .and_then(|l| {
                            Some([l.p50?.as_secs_f64() * 1e3, l.p99?.as_secs_f64() * 1e3])
                        }),
                }
            })
            .collect();
        let streams = q
            .iter()
            .enumerate()
            .filter(|(_, q)| !q.ended)
            .map(|(i, q)| StreamSnapshot {
                name: q.source.clone(),
                rows: q.counters.rows_in.load(Relaxed),
                malformed: q.counters.malformed.load(Relaxed),
                bytes: 0,
                subscribers: 0,
                filters: 0,
                producers: 0,
                made_by: None,
                read_by: vec![i + 1],
                queued: 0,
            })
            .collect();
        Snapshot {
            workers: self.workers,
            streams,
            queries,
        }
    }
}
