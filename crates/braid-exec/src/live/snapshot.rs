//! What the live session looks like now, for the dashboard and `/metrics`: its streams
//! (rows, subscribers, producers, malformed rows) and its queries (state, counters, the
//! physical plan as a graph). Taking one holds the session only to copy counters.

use super::session::{LiveQuery, LiveSession};
use braid_plan::graph::GraphNode;
use serde::Serialize;
use std::sync::atomic::Ordering::Relaxed;

/// The session at one moment.
#[derive(Clone, Debug, Serialize)]
pub struct Snapshot {
    /// Worker threads over all processes.
    pub workers: usize,
    /// Streams living in Braid, by name.
    pub streams: Vec<StreamSnapshot>,
    /// Queries in the order they were installed (dropped and ended ones too).
    pub queries: Vec<QuerySnapshot>,
}

/// One stream.
#[derive(Clone, Debug, Serialize)]
pub struct StreamSnapshot {
    /// Its name.
    pub name: String,
    /// Rows appended so far.
    pub rows: u64,
    /// Malformed rows its producers skipped so far.
    pub malformed: u64,
    /// Bytes its producers sent so far.
    pub bytes: u64,
    /// Subscribers reading it now, and how many of them filter at the log.
    pub subscribers: usize,
    /// Subscribers whose filters run at the log.
    pub filters: usize,
    /// TCP producers connected now.
    pub producers: u64,
    /// The query making it (its number), for a stream made by one.
    pub made_by: Option<usize>,
    /// Queries reading it now (their numbers).
    pub read_by: Vec<usize>,
    /// Rows of it the slowest query reading it has not read yet (queued at the log).
    pub queued: u64,
}

/// One query.
#[derive(Clone, Debug, Serialize)]
pub struct QuerySnapshot {
    /// Its number (as SHOW QUERIES lists it).
    pub number: usize,
    /// `running`, `ended`, `dropped` or `failed`.
    pub state: &'static str,
    /// The error it failed with.
    pub error: Option<String>,
    /// Its text.
    pub sql: String,
    /// What it writes.
    pub writes: String,
    /// The streams it reads.
    pub reads: Vec<String>,
    /// Rows its source read, rows its sinks wrote, rows skipped on runtime faults.
    pub rows_in: u64,
    /// Rows its sinks wrote.
    pub rows_out: u64,
    /// Rows skipped on runtime faults.
    pub faults: u64,
    /// Rows refused as late (after their window or join state had closed).
    pub late: u64,
    /// Records of its Kafka sources not read yet (consumer lag; 0 without one).
    pub kafka_lag: u64,
    /// The latest epoch read, and the latest every sink has completed.
    pub epoch_in: u64,
    /// The latest epoch every sink has completed.
    pub epoch_out: u64,
    /// Its physical plan as boxes and edges.
    pub graph: Vec<GraphNode>,
    /// Its end-to-end latency, epoch by epoch (see [`super::latency`]).
    pub latency: LatencySnapshot,
    /// Under a latency constraint (`max_latency`): the constraint, in milliseconds.
    pub constraint_ms: Option<f64>,
    /// Under a latency constraint: the median and 99th percentile of its rows'
    /// latencies since it started (its stamps, see `crate::qos`), in milliseconds.
    pub row_latency_ms: Option<[f64; 2]>,
}

/// A query's latency figures.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LatencySnapshot {
    /// Median and 99th percentile of the recent epochs, in milliseconds.
    pub p50_ms: Option<f64>,
    /// The 99th percentile, in milliseconds.
    pub p99_ms: Option<f64>,
    /// Epochs in each bucket of [`super::latency::BOUNDS`] (and one above them all).
    pub buckets: Vec<u64>,
    /// Epochs measured.
    pub count: u64,
    /// Their latencies added up, in seconds.
    pub sum: f64,
}

impl LatencySnapshot {
    /// The figures of `l`.
    pub fn of(l: &super::latency::Latency) -> LatencySnapshot {
        LatencySnapshot {
            p50_ms: l.quantile(0.5).map(|s| s * 1e3),
            p99_ms: l.quantile(0.99).map(|s| s * 1e3),
            buckets: l.buckets.to_vec(),
            count: l.count,
            sum: l.sum,
        }
    }
}

/// A query's plan graph with what its profiler measured so far in each box.
fn measured(q: &LiveQuery) -> Vec<GraphNode> {
    measure(&q.graph, &q.status.shared.profiler)
}

/// `graph` with what `profiler` measured in each box (the time of its operators, on
/// the box's worker for a `Map` box, the rows it put out, how long it took with each
/// epoch).
pub fn measure(graph: &[GraphNode], profiler: &crate::profile::Profiler) -> Vec<GraphNode> {
    let profile = profiler.snapshot();
    let mut graph = graph.to_vec();
    for n in &mut graph {
        let at = braid_plan::explain::NodeAt {
            plan: 0,
            depth: n.depth,
        };
        let on = |w: usize| n.worker.is_none_or(|x| x == w);
        let mut workers = std::collections::BTreeSet::new();
        let mut nanos = None;
        for o in profile
            .operators
            .iter()
            .filter(|o| o.node == Some(at) && on(o.worker))
        {
            *nanos.get_or_insert(0) += o.nanos;
            workers.insert(o.worker);
        }
        let rows: Vec<u64> = profile
            .rows
            .iter()
            .filter(|r| r.0 == at && on(r.1))
            .map(|r| r.2)
            .collect();
        n.nanos = nanos;
        n.rows_out = (!rows.is_empty()).then(|| rows.iter().sum());
        n.on_workers = workers.len();
        let mut took: Vec<f64> = profiler
            .node_latencies(at, n.worker)
            .iter()
            .map(|d| d.as_secs_f64() * 1e3)
            .collect();
        took.sort_by(f64::total_cmp);
        let q = |f: f64| took[((took.len() as f64 * f).ceil() as usize).clamp(1, took.len()) - 1];
        n.latency_ms = (!took.is_empty()).then(|| [q(0.5), q(0.99)]);
        n.frontier = profiler.node_frontier(at, n.worker);
    }
    graph
}

impl LiveSession {
    /// The session now.
    pub fn snapshot(&self) -> Snapshot {
        let queries: Vec<QuerySnapshot> = self
            .queries()
            .iter()
            .map(|q| {
                let (state, error) = q.state();
                let c = &q.status.shared.counters;
                QuerySnapshot {
                    number: q.number,
                    state,
                    error,
                    sql: q.sql.clone(),
                    writes: q.writes.clone(),
                    reads: q.reads.clone(),
                    rows_in: q.status.rows_in(),
                    rows_out: q.status.rows_out(),
                    faults: q.status.faults(),
                    late: c.late(),
                    kafka_lag: c.kafka_lag.load(Relaxed),
                    epoch_in: c.epoch_in.load(Relaxed),
                    epoch_out: c.epoch_out.load(Relaxed),
                    graph: measured(q),
                    latency: LatencySnapshot::of(
                        &q.status.latency.lock().unwrap_or_else(|p| p.into_inner()),
                    ),
                    constraint_ms: q.status.shared.constraint.map(|d| d.as_secs_f64() * 1e3),
                    row_latency_ms: q
                        .status
                        .row_latency()
                        .filter(|_| q.status.shared.constraint.is_some())
                        .and_then(|l| {
                            Some([l.p50?.as_secs_f64() * 1e3, l.p99?.as_secs_f64() * 1e3])
                        }),
                }
            })
            .map(|mut q| {
                // The sink is done with an epoch when the query is: its end-to-end figure.
                if let (Some(p50), Some(p99)) = (q.latency.p50_ms, q.latency.p99_ms) {
                    for n in q.graph.iter_mut().filter(|n| n.kind == "Sink") {
                        n.latency_ms.get_or_insert([p50, p99]);
                    }
                }
                q
            })
            .collect();
        let streams = self
            .streams()
            .map(|(name, log)| StreamSnapshot {
                name: name.clone(),
                rows: log.rows(),
                malformed: log.rejected(),
                bytes: log.bytes(),
                subscribers: log.subscribers(),
                filters: log.filters(),
                producers: self
                    .feed(name)
                    .map_or(0, |f| f.stats.producers.load(Relaxed)),
                made_by: self.made_by(name),
                read_by: queries
                    .iter()
                    .filter(|q| q.state == "running" && q.reads.contains(name))
                    .map(|q| q.number)
                    .collect(),
                queued: queries
                    .iter()
                    .filter(|q| q.state == "running" && q.reads == [name.clone()])
                    .map(|q| log.rows().saturating_sub(q.rows_in))
                    .max()
                    .unwrap_or(0),
            })
            .collect();
        Snapshot {
            workers: self.workers(),
            streams,
            queries,
        }
    }
}
