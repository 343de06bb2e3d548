//! The physical plan: a closed enum of nodes that every way of running a query builds
//! (Rust API, command line, Linear Road) and that `braid-exec` renders node by node.
//!
//! ```text
//! Sink <- Merge <- Map <- Split <- Source
//! ```
//! `Split` cuts a stream into `q` logical partitions by a routing expression and a
//! broadcast predicate; `Map` runs one stream-function instance per partition; `Merge`
//! brings the partitions' outputs back together. `Together` runs several such chains in
//! one dataflow: the first reads the input, the others the late rows of earlier ones
//! (`SourceSpec::Late`).

use crate::batch::Batch;
use crate::cost::TreeShape;
use crate::error::{Error, Result};
use crate::expr::Expr;
use crate::function::Registry;
use crate::types::{DataType, Field, Schema};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// A physical plan node.
#[derive(Clone, Debug)]
pub enum Plan {
    /// Reads a stream.
    Source(Source),
    /// Splits a stream into `q` logical partitions.
    Split(Split),
    /// Runs a stream function on every partition of a split.
    Map(Map),
    /// Merges the partitions' outputs.
    Merge(Merge),
    /// Writes the stream out.
    Sink(Sink),
    /// Plans run in one dataflow (only at the root): the first reads the input, each
    /// later one the late rows of an earlier one (its leaf is a [`SourceSpec::Late`]
    /// source). Its schema is the first plan's.
    Together(Vec<Plan>),
}

/// The name a `Map` of stream function `function` has in profiles and latency reports
/// (and in `latency_to`): `Map(function)`.
pub fn map_name(function: &str) -> String {
    format!("Map({function})")
}

/// The name a `Merge` has in latency reports (and in `latency_to`).
pub const MERGE_NAME: &str = "Merge";

/// Where a stream comes from, how it is cut into epochs and physical windows.
#[derive(Clone, Debug)]
pub struct Source {
    /// Name for EXPLAIN and reports.
    pub name: String,
    /// What to read.
    pub spec: SourceSpec,
    /// Row type (with its event-time column, if any).
    pub schema: Schema,
    /// Epoch length: rows with event time `t` belong to epoch `t / epoch` (without an
    /// event-time column: row `seq` belongs to epoch `seq / epoch`). An epoch is the unit
    /// of completeness: results for it are final once every worker has passed it.
    pub epoch: u64,
    /// Rows per physical window (batch) at most.
    pub window: usize,
    /// Replay pacing.
    pub pace: Pace,
    /// Accept rows whose event time goes back (they keep their time, their epoch is
    /// clamped to the current one, and queries judge their lateness); when false such
    /// rows are malformed.
    pub out_of_order: bool,
    /// Load shedding (`shed_load`), for a paced source: a window the schedule released
    /// more than this long before the source could send it is dropped, and its rows
    /// are counted per second of the schedule and reported; None: the source slows
    /// down instead (backpressure).
    pub shed: Option<std::time::Duration>,
}

/// How fast a source replays.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pace {
    /// As fast as possible.
    Max,
    /// By event time: event time `t` (in seconds of the event-time column, scaled by
    /// `units_per_second`) is released `t / speed` seconds after the start.
    EventTime {
        /// Event-time units per second (1 for seconds, 1000 for milliseconds).
        units_per_second: f64,
        /// Speed factor (1 = real time).
        speed: f64,
    },
}

/// What a source reads.
#[derive(Clone, Debug)]
pub enum SourceSpec {
    /// A CSV file.
    Csv {
        /// Path of the file.
        path: PathBuf,
        /// The first line is a header (checked against the schema).
        header: bool,
    },
    /// A file of JSON lines: one object per line (see
    /// [`crate::connector::RecordFormat::Json`]), read as a CSV file's lines are.
    JsonLines {
        /// Path of the file.
        path: PathBuf,
        /// Where each column is in a line's object.
        paths: Vec<crate::connector::JsonPath>,
    },
    /// A Parquet file or an Arrow IPC stream, read by record batches.
    Columnar {
        /// Path of the file.
        path: PathBuf,
        /// Which format.
        format: crate::connector::FileFormat,
    },
    /// Braid's binary batch file.
    Binary {
        /// Path of the file.
        path: PathBuf,
    },
    /// CSV lines on standard input.
    Stdin,
    /// Line-delimited CSV from TCP clients connecting to `addr`.
    Tcp {
        /// Listen address, `127.0.0.1:port` unless told otherwise.
        addr: String,
    },
    /// The built-in LRB-shaped generator.
    Generator(GeneratorSpec),
    /// Rows held in memory (tests, embedding). Keys are ignored: row i gets seq i.
    Memory(Arc<Batch>),
    /// A registered [`crate::function::SourceFactory`].
    Native(String),
    /// Several sources merged into one stream (see [`crate::interleave`]): rows in
    /// (epoch, source index, source order) order, each child's epochs clamped to never go
    /// back. The node's schema must be [`crate::interleave::schema`] of the children.
    Interleave(Vec<Source>),
    /// The rows that the stream functions of plan `of` of the enclosing
    /// [`Plan::Together`] refused as late (see
    /// [`crate::function::StreamFunctionFactory::late_schema`]), each in the epoch in
    /// which it was refused. Read where they are made: no input to open.
    Late {
        /// Index of the plan whose late rows these are (lower than the reader's).
        of: usize,
    },
    /// A Kafka topic, its partitions read by every worker in turn.
    Kafka(crate::connector::KafkaSource),
}

/// The synthetic generator: LRB-shaped 15-field tuples (see [`GeneratorSpec::schema`]).
/// Tuple `i` is a pure function of `(seed, i)`, so any number of workers generate the
/// same stream.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GeneratorSpec {
    /// Number of tuples.
    pub tuples: u64,
    /// Tuples per event-time second (the `time` column is in seconds).
    pub rate: f64,
    /// Distinct keys (expressways): type-0 tuples have `xway` uniform in `0..keys`.
    pub keys: u32,
    /// Fraction of type-2 tuples (the broadcast ones in LRB-style splits).
    pub broadcast: f64,
    /// Seed.
    pub seed: u64,
}

impl GeneratorSpec {
    /// The generator's 15 int64 columns, `time` being the event time.
    pub fn schema() -> Schema {
        Schema::ints(&[
            "type", "time", "vid", "spd", "xway", "lane", "dir", "seg", "pos", "qid", "sinit",
            "send", "dow", "tod", "day",
        ])
        .with_event_time("time")
        .expect("the generator schema has an int64 time column")
    }
}

/// How a split picks its destination partition.
#[derive(Clone, Debug)]
pub enum Route {
    /// `expr` (an int64, taken modulo q), applied when `when` holds (always if absent).
    /// Null, or `when` not true: the row is omitted (unless broadcast).
    Expr {
        /// Partition expression.
        expr: Expr,
        /// Guard.
        when: Option<Expr>,
    },
    /// A registered Rust routing function.
    Native(String),
    /// Row with source sequence number `seq` goes to partition `seq % q` (the balancer of
    /// stateless subqueries).
    RoundRobin,
    /// Any partition, for a split whose partitions all compute one function whose
    /// results combine exactly whichever rows meet (the partial stage of a two-phase
    /// aggregate). Braid keeps each window whole, in one partition of the worker that
    /// splits it (one partition per worker, taken in turn by a splitter that serves
    /// every worker), so a worker's rows make one set of partial groups, not one per
    /// partition, and stay where they were read.
    Any,
    /// The `rows x cols` grid of a join without equality keys (q = rows * cols, the two
    /// coprime): a row for which `left` holds goes to grid row `seq % rows`, the
    /// partitions `p` with `p % rows == seq % rows`; any other row to grid column
    /// `seq % cols`, the partitions with `p % cols == seq % cols`. Every left row meets
    /// every right row in exactly one partition (the Chinese remainder theorem), and each
    /// row is copied `cols` or `rows` times instead of q.
    Grid {
        /// Rows of the left input.
        left: Expr,
        /// Grid rows.
        rows: u32,
        /// Grid columns.
        cols: u32,
    },
}

/// The user's choice of split strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// One splitter.
    Fsplit,
    /// The optimal tree of the cost model (Paper IV eq. 9).
    Maxtree,
    /// Fanout doubling per level.
    Exptree,
    /// Window router -> p window splitters -> q partitions (Paper V).
    Parasplit,
    /// The cost model's choice among fsplit, the trees and parasplit
    /// ([`crate::optimize::autosplit`]).
    Autosplit,
}

impl std::str::FromStr for Strategy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Strategy> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "fsplit" => Strategy::Fsplit,
            "maxtree" => Strategy::Maxtree,
            "exptree" => Strategy::Exptree,
            "parasplit" => Strategy::Parasplit,
            "autosplit" => Strategy::Autosplit,
            other => {
                return Err(Error::Plan(format!(
                    "unknown split strategy `{other}`; strategies are fsplit, maxtree, exptree, parasplit, autosplit"
                )))
            }
        })
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Strategy::Fsplit => "fsplit",
            Strategy::Maxtree => "maxtree",
            Strategy::Exptree => "exptree",
            Strategy::Parasplit => "parasplit",
            Strategy::Autosplit => "autosplit",
        })
    }
}

/// The concrete shape a strategy resolves to (see `crate::optimize`).
#[derive(Clone, Debug, PartialEq)]
pub enum SplitShape {
    /// One splitter node sends to all q partitions.
    Fsplit,
    /// A splitstream tree: level l has lambda(l-1) nodes of fanout f_l.
    Tree(TreeShape),
    /// `p` window splitters fed whole windows by a router (a two-level router tree of
    /// `router_fanout` sub-routers when set).
    Parasplit {
        /// Window splitters.
        p: u32,
        /// Sub-routers of a two-level router tree.
        router_fanout: Option<u32>,
    },
}

/// What the planner knows about a split's input, for the cost model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SplitHints {
    /// Expected fraction of broadcast rows.
    pub broadcast_fraction: f64,
    /// a = cc / (cp + ce) of the cost model.
    pub cost_ratio: f64,
    /// Desired input rate in rows/s (parasplit's Phi_D), if known.
    pub desired_rate: Option<f64>,
    /// Measured rate of one splitter in rows/s, if known.
    pub splitter_rate: Option<f64>,
    /// The costs measured on a sample of the input, if they were
    /// (`braid_exec::tune::measure_split_costs`): then `broadcast_fraction` and
    /// `cost_ratio` are the measured ones.
    pub measured: Option<MeasuredCosts>,
}

/// A split's costs per row, measured on the first rows of its input with Braid's own
/// splitter: the cost model's consume `cc` (a window of copied rows received from
/// another process: deserialized), process `cp` (route and broadcast evaluated) and
/// emit `ce` (a row copied into its destination's batch), in nanoseconds, and the
/// broadcast fraction `b`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MeasuredCosts {
    /// Rows of the sample.
    pub rows: u64,
    /// Share of them the broadcast condition holds for.
    pub broadcast: f64,
    /// `cc`, per row received.
    pub consume_ns: f64,
    /// `cp`, per row routed.
    pub route_ns: f64,
    /// `ce`, per row emitted.
    pub emit_ns: f64,
}

impl MeasuredCosts {
    /// `a = cc / (cp + ce)`.
    pub fn cost_ratio(&self) -> f64 {
        self.consume_ns / (self.route_ns + self.emit_ns).max(1e-9)
    }
}

impl Default for SplitHints {
    fn default() -> SplitHints {
        SplitHints {
            broadcast_fraction: 0.005,
            cost_ratio: 1.0,
            desired_rate: None,
            splitter_rate: None,
            measured: None,
        }
    }
}

/// `Split(input, q, route, broadcast, strategy)`.
#[derive(Clone, Debug)]
pub struct Split {
    /// The stream to split.
    pub input: Box<Plan>,
    /// Number of logical partitions.
    pub q: u32,
    /// Routing.
    pub route: Route,
    /// Rows copied to every partition.
    pub broadcast: Option<Expr>,
    /// The user's strategy.
    pub strategy: Strategy,
    /// The resolved shape (set by the optimizer before rendering).
    pub shape: Option<SplitShape>,
    /// Why `autosplit` chose the shape (the cost model's estimates), for EXPLAIN.
    pub why: Option<String>,
    /// Cost-model inputs.
    pub hints: SplitHints,
    /// The worker of each partition (length q), set from measured costs (see
    /// `braid_exec::calibrate` and [`crate::placement::balance`]). None: partition `p`
    /// runs on worker `p % workers`.
    pub placement: Option<Arc<[u32]>>,
}

impl Split {
    /// The cost model's broadcast fraction b: the hinted share of broadcast rows (0
    /// without a broadcast), with a grid's copies counted as the broadcast share that
    /// makes as many copies. A grid row goes to `cols` (left) or `rows` (right)
    /// partitions; with as many left as right rows that is `(rows + cols) / 2` copies on
    /// average, and copies `1 + b (q - 1)` give `b`.
    pub fn broadcast_share(&self) -> f64 {
        let b = if self.broadcast.is_some() {
            self.hints.broadcast_fraction
        } else {
            0.0
        };
        match &self.route {
            Route::Grid { rows, cols, .. } if self.q > 1 => {
                let q = f64::from(self.q);
                let grid = (f64::from(*rows) + f64::from(*cols)) / 2.0;
                let copies = b * q + (1.0 - b) * grid;
                ((copies - 1.0) / (q - 1.0)).clamp(0.0, 1.0)
            }
            _ => b,
        }
    }
}

/// `Map(stream function, partitions)`.
#[derive(Clone, Debug)]
pub struct Map {
    /// Must be a [`Plan::Split`].
    pub input: Box<Plan>,
    /// Registered stream function.
    pub function: String,
    /// What a worker runs next among its partitions with rows ready (`SET scheduler`).
    pub scheduler: Scheduler,
}

/// What a worker's `Map` runs next among its partitions with rows ready, after
/// StreamAPAS's operator scheduling (`SET scheduler = ...`). Every policy keeps each
/// partition's rows in serial order and its epochs in order, so the output is the same
/// under each; they differ in which partition's rows wait, and how long. With a policy
/// other than FIFO, or under a latency constraint, a Map yields to the operators after
/// it (merges, sinks, later stages) every quantum of work, so what it has done goes on
/// while the rest waits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scheduler {
    /// Oldest row first: rows in arrival (serial) order, whatever their partition.
    #[default]
    Fifo,
    /// Partitions in turn, a slice of rows each.
    RoundRobin,
    /// Babcock et al.'s Chain (least memory): the partition that removes rows fastest
    /// first, by its measured cost per row and selectivity (rows out per row in).
    Chain,
    /// Chain, but oldest row first while the oldest waiting row is older than half the
    /// latency constraint (half of 100 ms without one).
    ChainFlush,
}

impl Scheduler {
    /// The policy's name as `SET scheduler` writes it.
    pub fn name(self) -> &'static str {
        match self {
            Scheduler::Fifo => "fifo",
            Scheduler::RoundRobin => "round_robin",
            Scheduler::Chain => "chain",
            Scheduler::ChainFlush => "chain_flush",
        }
    }
}

impl std::str::FromStr for Scheduler {
    type Err = crate::error::Error;
    fn from_str(s: &str) -> crate::error::Result<Scheduler> {
        Ok(
            match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
                "fifo" => Scheduler::Fifo,
                "round_robin" | "roundrobin" | "rr" => Scheduler::RoundRobin,
                "chain" => Scheduler::Chain,
                "chain_flush" | "chainflush" => Scheduler::ChainFlush,
                other => {
                    return Err(crate::error::Error::Plan(format!(
                    "scheduler `{other}`; expected 'fifo', 'round_robin', 'chain' or 'chain_flush'"
                )))
                }
            },
        )
    }
}

/// An aggregate of a keyed merge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Agg {
    /// Sum of an int64 or float64 column.
    Sum(usize),
    /// Minimum.
    Min(usize),
    /// Maximum.
    Max(usize),
    /// Number of partial rows.
    Count,
}

/// How a keyed merge combines partial rows with equal keys.
#[derive(Clone, Debug, PartialEq)]
pub enum Combine {
    /// Output: the key columns, then one column per aggregate.
    Aggregates(Vec<Agg>),
    /// A registered [`crate::function::Combiner`].
    Native(String),
}

/// A column of a sort: ascending or descending, nulls first or last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SortKey {
    /// Column index.
    pub column: usize,
    /// Largest first.
    pub descending: bool,
    /// Nulls before every value (else after every value).
    pub nulls_first: bool,
}

/// How partition outputs are merged.
#[derive(Clone, Debug, PartialEq)]
pub enum MergeKind {
    /// Union all, in no particular order.
    Union,
    /// Output in serial order (epoch, then source order, then partition).
    TimeOrdered,
    /// Output in serial order as [`MergeKind::TimeOrdered`], but rows with the same
    /// serial position (SQL's rows made at the end of an epoch: the windows that close
    /// together) sorted by these columns first (SQL's ORDER BY of a window's rows).
    Sorted(Vec<SortKey>),
    /// Partial rows with equal key columns (within an epoch) are combined.
    Keyed {
        /// Key column indexes.
        key: Vec<usize>,
        /// Combination.
        combine: Combine,
        /// Fan-in of a hierarchical merge tree (None: partial results are pre-combined
        /// per worker, then once globally).
        fanin: Option<u32>,
        /// Only rows where this holds are combined; the others pass through as in a
        /// union (then the combination must keep the input schema).
        filter: Option<Expr>,
    },
}

/// `Merge(kind)`.
#[derive(Clone, Debug)]
pub struct Merge {
    /// Must be a [`Plan::Map`].
    pub input: Box<Plan>,
    /// Merge kind.
    pub kind: MergeKind,
}

/// Where output goes.
#[derive(Clone, Debug, PartialEq)]
pub enum SinkSpec {
    /// CSV to standard output.
    Stdout,
    /// CSV to a file.
    File(PathBuf),
    /// CSV lines to a TCP server.
    Tcp(String),
    /// Counted and dropped (benchmarks).
    Discard,
    /// A registered [`crate::function::SinkFn`] (called on worker 0).
    Native(String),
    /// Kept in memory and returned by the run (tests, embedding).
    Collect,
    /// One message per row to a Kafka topic (written on worker 0).
    Kafka(crate::connector::KafkaSink),
    /// A Parquet file or an Arrow IPC stream (written on worker 0).
    Columnar(PathBuf, crate::connector::FileFormat),
}

/// `Sink(input, spec)`.
#[derive(Clone, Debug)]
pub struct Sink {
    /// What to write.
    pub input: Box<Plan>,
    /// Where.
    pub spec: SinkSpec,
    /// Append each line's emit time (ms since the sources started reading: when a paced
    /// source's event time 0 is due).
    pub stamp_emit: bool,
    /// Write the column names first, as a CSV line (text sinks).
    pub header: bool,
    /// SQL's `LIMIT n`: write the first `n` rows, then stop the run (its sources end
    /// their input as when cancelled, once every sink of the run has its rows).
    pub limit: Option<u64>,
    /// A latency constraint (`max_latency`): from a row's arrival at the source to its
    /// results written here. The run then hands time on in ticks within each epoch
    /// and sizes them at run time to meet it (see `braid_exec::qos`).
    pub max_latency: Option<std::time::Duration>,
    /// The part of the plan the constraint covers, when not all of it: from the source
    /// to the input of this operator (a name of the run's latency report, `Map(query1)`
    /// or `Merge`; SQL's `latency_to`). See [`Plan::check_latency_parts`].
    pub latency_to: Option<String>,
    /// Where the part of the plan the constraint covers begins, when not at the source:
    /// the input of this operator (a name as in `latency_to`, before it; SQL's
    /// `latency_from`). The part is then from this operator's input to `latency_to`'s
    /// (or to this sink).
    pub latency_from: Option<String>,
}

impl Plan {
    /// A source node.
    pub fn source(name: &str, spec: SourceSpec, schema: Schema) -> Plan {
        Plan::Source(Source {
            name: name.to_string(),
            spec,
            schema,
            epoch: 1,
            window: 1024,
            pace: Pace::Max,
            out_of_order: false,
            shed: None,
        })
    }

    /// Splits this stream.
    pub fn split(self, q: u32, route: Route, broadcast: Option<Expr>, strategy: Strategy) -> Plan {
        Plan::Split(Split {
            input: Box::new(self),
            q,
            route,
            broadcast,
            strategy,
            shape: None,
            why: None,
            hints: SplitHints::default(),
            placement: None,
        })
    }

    /// Number of `Map` nodes in this plan (a stage's index counts the Maps below it).
    pub fn maps(&self) -> usize {
        let below = match self {
            Plan::Source(_) => return 0,
            Plan::Together(plans) => return plans.iter().map(Plan::maps).sum(),
            Plan::Split(s) => &s.input,
            Plan::Map(m) => &m.input,
            Plan::Merge(m) => &m.input,
            Plan::Sink(s) => &s.input,
        };
        usize::from(matches!(self, Plan::Map(_))) + below.maps()
    }

    /// Maps a stream function over the partitions of this split.
    pub fn map(self, function: &str) -> Plan {
        Plan::Map(Map {
            input: Box::new(self),
            function: function.to_string(),
            scheduler: Scheduler::default(),
        })
    }

    /// Every `Map` of the plan runs its partitions as `scheduler` says; see
    /// [`Scheduler`].
    pub fn scheduler(mut self, scheduler: Scheduler) -> Plan {
        self.set_scheduler(scheduler);
        self
    }

    /// Paper V's rates for choosing a split's shape (`p` by eq. 6): the desired input
    /// rate and one splitter's rate (rows/s; None: to be measured) on every split that
    /// reads a source, the stage that takes the stream's rows as they come.
    pub fn set_rates(&mut self, desired: Option<f64>, splitter: Option<f64>) {
        match self {
            Plan::Source(_) => {}
            Plan::Split(s) => {
                if matches!(s.input.as_ref(), Plan::Source(_)) {
                    s.hints.desired_rate = desired;
                    s.hints.splitter_rate = splitter;
                }
                s.input.set_rates(desired, splitter);
            }
            Plan::Map(m) => m.input.set_rates(desired, splitter),
            Plan::Merge(m) => m.input.set_rates(desired, splitter),
            Plan::Sink(s) => s.input.set_rates(desired, splitter),
            Plan::Together(plans) => plans
                .iter_mut()
                .for_each(|p| p.set_rates(desired, splitter)),
        }
    }

    /// [`Plan::scheduler`] in place.
    pub fn set_scheduler(&mut self, scheduler: Scheduler) {
        match self {
            Plan::Source(_) => {}
            Plan::Split(s) => s.input.set_scheduler(scheduler),
            Plan::Map(m) => {
                m.scheduler = scheduler;
                m.input.set_scheduler(scheduler);
            }
            Plan::Merge(m) => m.input.set_scheduler(scheduler),
            Plan::Sink(s) => s.input.set_scheduler(scheduler),
            Plan::Together(plans) => plans.iter_mut().for_each(|p| p.set_scheduler(scheduler)),
        }
    }

    /// Merges the partitions' outputs.
    pub fn merge(self, kind: MergeKind) -> Plan {
        Plan::Merge(Merge {
            input: Box::new(self),
            kind,
        })
    }

    /// Writes the stream to a sink.
    pub fn sink(self, spec: SinkSpec) -> Plan {
        Plan::Sink(Sink {
            input: Box::new(self),
            spec,
            stamp_emit: false,
            header: false,
            limit: None,
            max_latency: None,
            latency_to: None,
            latency_from: None,
        })
    }

    /// Sets the latency constraint of this plan's sink (of every sink of a `Together`):
    /// see [`Sink::max_latency`].
    pub fn max_latency(mut self, d: std::time::Duration) -> Plan {
        for s in self.sinks_mut() {
            s.max_latency = Some(d);
        }
        self
    }

    /// This plan's sink, or every sink of a `Together`.
    fn sinks_mut(&mut self) -> Vec<&mut Sink> {
        match self {
            Plan::Sink(s) => vec![s],
            Plan::Together(plans) => plans
                .iter_mut()
                .filter_map(|p| match p {
                    Plan::Sink(s) => Some(s),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Names the part of the plan the latency constraint of this plan's sink (of every
    /// sink of a `Together`) covers: from the source to operator `to`'s input (see
    /// [`Sink::latency_to`]).
    pub fn latency_to(mut self, to: &str) -> Plan {
        for s in self.sinks_mut() {
            s.latency_to = Some(to.to_string());
        }
        self
    }

    /// Names where the part of the plan the latency constraint of this plan's sink (of
    /// every sink of a `Together`) covers begins: operator `from`'s input (see
    /// [`Sink::latency_from`]).
    pub fn latency_from(mut self, from: &str) -> Plan {
        for s in self.sinks_mut() {
            s.latency_from = Some(from.to_string());
        }
        self
    }

    /// The names latencies are measured under below this node, sources first: `Map(f)`
    /// for a map of stream function `f` ([`map_name`]), `Merge` for a merge.
    pub fn measured_operators(&self) -> Vec<String> {
        let mut out = match self.input() {
            Some(p) => p.measured_operators(),
            None => Vec::new(),
        };
        match self {
            Plan::Map(m) => out.push(map_name(&m.function)),
            Plan::Merge(_) => out.push(MERGE_NAME.to_string()),
            Plan::Together(plans) => {
                out.extend(plans.iter().flat_map(|p| p.measured_operators()));
            }
            _ => {}
        }
        let mut seen = std::collections::HashSet::new();
        out.retain(|n| seen.insert(n.clone()));
        out
    }

    /// Checks that every sink's [`Sink::latency_to`] and [`Sink::latency_from`] name
    /// operators below it (a bare stream function name `f` is taken as `Map(f)`), the
    /// first before the second, and writes the names in full.
    pub fn check_latency_parts(&mut self) -> Result<(), crate::error::Error> {
        match self {
            Plan::Sink(s) => {
                let known = s.input.measured_operators();
                let mut at = [None, None];
                for (i, (option, name)) in [
                    ("latency_from", &s.latency_from),
                    ("latency_to", &s.latency_to),
                ]
                .into_iter()
                .enumerate()
                {
                    let Some(name) = name.clone() else {
                        continue;
                    };
                    if s.max_latency.is_none() {
                        return Err(crate::error::Error::Plan(format!(
                            "`{option} = '{name}'` names the part of the plan a latency constraint covers, \
                             but its sink has no `max_latency`"
                        )));
                    }
                    let full = match known.contains(&name) {
                        true => name.clone(),
                        false => map_name(&name),
                    };
                    let Some(k) = known.iter().position(|n| *n == full) else {
                        return Err(crate::error::Error::Plan(format!(
                            "`{option} = '{name}'`: no operator of that name before the sink; its operators are {}",
                            known.join(", ")
                        )));
                    };
                    at[i] = Some((k, full));
                }
                if let [Some((f, from)), Some((t, to))] = &at {
                    if f >= t {
                        return Err(crate::error::Error::Plan(format!(
                            "`latency_from = '{from}'` must come before `latency_to = '{to}'` in the plan; \
                             its operators, sources first, are {}",
                            known.join(", ")
                        )));
                    }
                }
                let [from, to] = at;
                s.latency_from = from.map(|f| f.1);
                s.latency_to = to.map(|t| t.1);
                Ok(())
            }
            Plan::Together(plans) => plans.iter_mut().try_for_each(Plan::check_latency_parts),
            _ => Ok(()),
        }
    }

    /// The operator whose input begins the part of the plan the tightest constraint
    /// covers (None: the source). See [`Sink::latency_from`].
    pub fn latency_start(&self) -> Option<&str> {
        self.tightest_sink().and_then(|s| s.latency_from.as_deref())
    }

    /// The operator whose input ends the part of the plan the tightest constraint covers
    /// (None: the whole plan, to the sink). See [`Sink::latency_to`].
    pub fn latency_part(&self) -> Option<&str> {
        self.tightest_sink().and_then(|s| s.latency_to.as_deref())
    }

    /// The sink with the tightest latency constraint (of a `Together`'s), if any.
    fn tightest_sink(&self) -> Option<&Sink> {
        match self {
            Plan::Sink(s) => Some(s),
            Plan::Together(plans) => plans
                .iter()
                .filter(|p| p.latency_constraint().is_some())
                .min_by_key(|p| p.latency_constraint())
                .and_then(Plan::tightest_sink),
            _ => None,
        }
    }

    /// The stages a latency constraint's controller may chain at run time onto the
    /// worker that reads the source (worker 0), if the plan has any: the `Map`s of the
    /// plan (the first of a `Together`) from its source on, as long as each is fed by
    /// one splitter (fsplit, or its shape not chosen yet; a split tree or parasplit
    /// ends the run of stages) and its function either keeps no state
    /// ([`crate::function::StreamFunctionFactory::stateless`]) or can hand its state
    /// over ([`crate::function::StreamFunctionFactory::checkpoints`]). The first stage
    /// reads the source (not late rows); when it keeps no state its split must not
    /// broadcast (chained, its rows go to worker 0's own partitions: see
    /// [`ChainStage::stateless`]).
    pub fn chainable_stages(&self, registry: &crate::function::Registry) -> Option<Chainable> {
        let mut maps = Vec::new();
        let mut at = match self {
            Plan::Together(plans) => plans.first()?,
            p => p,
        };
        loop {
            if let Plan::Map(m) = at {
                maps.push(m);
            }
            match at.input() {
                Some(p) => at = p,
                None => break,
            }
        }
        let Plan::Source(src) = at else { return None };
        if matches!(src.spec, SourceSpec::Late { .. }) {
            return None;
        }
        let mut stages = Vec::new();
        for (i, m) in maps.iter().rev().enumerate() {
            let Plan::Split(s) = m.input.as_ref() else {
                break;
            };
            if !matches!(s.shape, None | Some(SplitShape::Fsplit)) {
                break;
            }
            let Ok(f) = registry.function(&m.function) else {
                break;
            };
            let stateless = f.stateless();
            if i == 0 && !matches!(s.input.as_ref(), Plan::Source(_)) {
                return None;
            }
            let ok = match i == 0 && stateless {
                true => s.broadcast.is_none(),
                false => stateless || f.checkpoints(),
            };
            if !ok {
                break;
            }
            stages.push(ChainStage {
                function: m.function.clone(),
                stateless,
            });
        }
        (!stages.is_empty()).then(|| Chainable {
            source: src.name.clone(),
            stages,
        })
    }

    /// The tightest latency constraint of the plan's sinks, if any has one.
    pub fn latency_constraint(&self) -> Option<std::time::Duration> {
        match self {
            Plan::Sink(s) => s.max_latency,
            Plan::Together(plans) => plans.iter().filter_map(|p| p.latency_constraint()).min(),
            _ => None,
        }
    }

    /// The node's name in EXPLAIN.
    pub fn name(&self) -> &'static str {
        match self {
            Plan::Source(_) => "Source",
            Plan::Split(_) => "Split",
            Plan::Map(_) => "Map",
            Plan::Merge(_) => "Merge",
            Plan::Sink(_) => "Sink",
            Plan::Together(_) => "Together",
        }
    }

    /// The node's input, if any.
    pub fn input(&self) -> Option<&Plan> {
        match self {
            Plan::Source(_) => None,
            Plan::Split(s) => Some(&s.input),
            Plan::Map(m) => Some(&m.input),
            Plan::Merge(m) => Some(&m.input),
            Plan::Sink(s) => Some(&s.input),
            Plan::Together(plans) => plans.first(),
        }
    }

    /// The source at the bottom of the plan.
    pub fn leaf_source(&self) -> &Source {
        match self {
            Plan::Source(s) => s,
            Plan::Split(s) => s.input.leaf_source(),
            Plan::Map(m) => m.input.leaf_source(),
            Plan::Merge(m) => m.input.leaf_source(),
            Plan::Sink(s) => s.input.leaf_source(),
            Plan::Together(plans) => plans[0].leaf_source(),
        }
    }

    /// The source at the bottom of the plan, mutable.
    pub fn leaf_source_mut(&mut self) -> &mut Source {
        match self {
            Plan::Source(s) => s,
            Plan::Split(s) => s.input.leaf_source_mut(),
            Plan::Map(m) => m.input.leaf_source_mut(),
            Plan::Merge(m) => m.input.leaf_source_mut(),
            Plan::Sink(s) => s.input.leaf_source_mut(),
            Plan::Together(plans) => plans[0].leaf_source_mut(),
        }
    }

    /// The schema of the late rows this plan's stream functions refuse, if any of them
    /// can refuse rows (they must agree on it).
    pub fn late_schema(&self, registry: &Registry) -> Result<Option<Schema>> {
        let mut found: Option<Schema> = None;
        let mut node = Some(self);
        while let Some(p) = node {
            if let Plan::Map(m) = p {
                if let Some(s) = registry.function(&m.function)?.late_schema() {
                    match &found {
                        Some(f) if *f != s => {
                            return Err(Error::Plan(format!(
                                "the late rows of one plan must have one schema; found {f} and {s}"
                            )))
                        }
                        _ => found = Some(s),
                    }
                }
            }
            node = match p {
                Plan::Together(_) => None,
                other => other.input(),
            };
        }
        Ok(found)
    }

    /// Checks the plan and returns its output schema. Errors say what would be valid.
    pub fn schema(&self, registry: &Registry) -> Result<Schema> {
        self.check(registry, false)
    }

    /// [`Plan::schema`], `within` a [`Plan::Together`] or not.
    fn check(&self, registry: &Registry, within: bool) -> Result<Schema> {
        match self {
            Plan::Together(plans) => {
                if within {
                    return Err(Error::Plan("a Together inside a Together".into()));
                }
                let Some(first) = plans.first() else {
                    return Err(Error::Plan("a Together of no plans".into()));
                };
                for (i, p) in plans.iter().enumerate() {
                    let leaf = p.leaf_source();
                    match (&leaf.spec, i) {
                        (SourceSpec::Late { .. }, 0) => {
                            return Err(Error::Plan(
                                "the first plan of a Together reads the input, not late rows"
                                    .into(),
                            ))
                        }
                        (SourceSpec::Late { of }, _) if *of >= i => {
                            return Err(Error::Plan(format!(
                                "plan {i} of a Together reads the late rows of plan {of}; it can read only an earlier plan's"
                            )))
                        }
                        (SourceSpec::Late { of }, _) => {
                            let Some(late) = plans[*of].late_schema(registry)? else {
                                return Err(Error::Plan(format!(
                                    "plan {i} of a Together reads the late rows of plan {of}, whose stream functions refuse none"
                                )));
                            };
                            let types = |s: &Schema| s.fields.iter().map(|f| f.ty).collect::<Vec<_>>();
                            if types(&late) != types(&leaf.schema) {
                                return Err(Error::Plan(format!(
                                    "plan {i} reads late rows as {}, but plan {of} refuses rows {late}",
                                    leaf.schema
                                )));
                            }
                        }
                        (_, 0) => {}
                        _ => {
                            return Err(Error::Plan(format!(
                                "plan {i} of a Together must read late rows (a Late source)"
                            )))
                        }
                    }
                    p.check(registry, true)?;
                }
                first.check(registry, true)
            }
            Plan::Source(s) => {
                // A Late source's schema is checked where it is read: in a Together.
                if let SourceSpec::Native(name) = &s.spec {
                    let native = registry.source(name)?.schema();
                    if native.arity() != s.schema.arity() {
                        return Err(Error::Plan(format!(
                            "source `{name}` makes rows {native}, but the plan declares {}",
                            s.schema
                        )));
                    }
                }
                if s.epoch == 0 {
                    return Err(Error::Plan("epoch length must be at least 1".into()));
                }
                if s.window == 0 {
                    return Err(Error::Plan(
                        "physical window must hold at least 1 row".into(),
                    ));
                }
                Ok(s.schema.clone())
            }
            Plan::Split(s) => {
                let schema = s.input.check(registry, within)?;
                if s.q == 0 || s.q > 1 << 20 {
                    return Err(Error::Plan(format!(
                        "q = {} partitions; expected 1..=1048576",
                        s.q
                    )));
                }
                if let Some(t) = &s.placement {
                    if t.len() != s.q as usize {
                        return Err(Error::Plan(format!(
                            "the placement table names {} partitions; the split has q = {}",
                            t.len(),
                            s.q
                        )));
                    }
                }
                match &s.route {
                    Route::Expr { expr, when } => {
                        let t = expr.data_type(&schema)?;
                        if t != DataType::Int64 {
                            return Err(Error::Plan(format!(
                                "routing expression `{expr}` has type {t}, expected int64"
                            )));
                        }
                        if let Some(w) = when {
                            expect_bool(w, &schema, "routing guard")?;
                        }
                    }
                    Route::Native(name) => {
                        registry.route(name)?;
                    }
                    Route::RoundRobin | Route::Any => {}
                    Route::Grid { left, rows, cols } => {
                        expect_bool(left, &schema, "grid side")?;
                        let (r, c) = (*rows as u64, *cols as u64);
                        if r * c != s.q as u64 || crate::classes::gcd(r, c) != 1 {
                            return Err(Error::Plan(format!(
                                "a {rows} x {cols} grid needs coprime sides and q = {}, found q = {}",
                                r * c,
                                s.q
                            )));
                        }
                    }
                }
                if let Some(b) = &s.broadcast {
                    expect_bool(b, &schema, "broadcast predicate")?;
                }
                Ok(schema)
            }
            Plan::Map(m) => {
                let Plan::Split(_) = m.input.as_ref() else {
                    return Err(Error::Plan(format!(
                        "Map({}) must read a Split, found {}",
                        m.function,
                        m.input.name()
                    )));
                };
                let input = m.input.check(registry, within)?;
                registry.function(&m.function)?.output_schema(&input)
            }
            Plan::Merge(m) => {
                let Plan::Map(_) = m.input.as_ref() else {
                    return Err(Error::Plan(format!(
                        "Merge must read a Map, found {}",
                        m.input.name()
                    )));
                };
                let input = m.input.check(registry, within)?;
                match &m.kind {
                    MergeKind::Union | MergeKind::TimeOrdered => Ok(input),
                    MergeKind::Sorted(by) => {
                        if let Some(k) = by.iter().find(|k| k.column >= input.arity()) {
                            return Err(Error::Plan(format!(
                                "a sorted merge by column {} of {} columns",
                                k.column,
                                input.arity()
                            )));
                        }
                        Ok(input)
                    }
                    MergeKind::Keyed {
                        key,
                        combine,
                        fanin,
                        filter,
                    } => {
                        if fanin.is_some_and(|k| k < 2) {
                            return Err(Error::Plan("merge fan-in must be at least 2".into()));
                        }
                        for &k in key {
                            if k >= input.arity() {
                                return Err(Error::Plan(format!(
                                    "merge key column #{k} is outside the input {input}"
                                )));
                            }
                        }
                        let out = match combine {
                            Combine::Native(name) => {
                                registry.combiner(name)?.output_schema(&input)?
                            }
                            Combine::Aggregates(aggs) => {
                                let mut fields: Vec<Field> =
                                    key.iter().map(|&k| input.fields[k].clone()).collect();
                                for a in aggs {
                                    fields.push(agg_field(a, &input)?);
                                }
                                Schema::new(fields)
                            }
                        };
                        if let Some(f) = filter {
                            expect_bool(f, &input, "keyed merge filter")?;
                            let types =
                                |s: &Schema| s.fields.iter().map(|f| f.ty).collect::<Vec<_>>();
                            if types(&out) != types(&input) {
                                return Err(Error::Plan(format!(
                                    "a filtered keyed merge passes other rows through unchanged, so its combined rows {out} must have the input's column types {input}"
                                )));
                            }
                        }
                        Ok(out)
                    }
                }
            }
            Plan::Sink(s) => {
                if let SinkSpec::Native(name) = &s.spec {
                    registry.sink(name)?;
                }
                s.input.check(registry, within)
            }
        }
    }
}

fn expect_bool(e: &Expr, schema: &Schema, what: &str) -> Result<()> {
    match e.data_type(schema)? {
        DataType::Bool => Ok(()),
        t => Err(Error::Plan(format!(
            "{what} `{e}` has type {t}, expected bool"
        ))),
    }
}

fn agg_field(a: &Agg, input: &Schema) -> Result<Field> {
    let col = |c: usize| {
        input.fields.get(c).ok_or_else(|| {
            Error::Plan(format!(
                "aggregate column #{c} is outside the input {input}"
            ))
        })
    };
    Ok(match *a {
        Agg::Count => Field::new("count", DataType::Int64),
        Agg::Sum(c) | Agg::Min(c) | Agg::Max(c) => {
            let f = col(c)?;
            if !matches!(f.ty, DataType::Int64 | DataType::Float64) {
                return Err(Error::Plan(format!(
                    "cannot aggregate column `{}` of type {}; expected int64 or float64",
                    f.name, f.ty
                )));
            }
            let prefix = match a {
                Agg::Sum(_) => "sum",
                Agg::Min(_) => "min",
                _ => "max",
            };
            Field::new(&format!("{prefix}_{}", f.name), f.ty)
        }
    })
}

/// The stages a run may chain onto the worker that reads the source
/// ([`Plan::chainable_stages`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chainable {
    /// The source the first stage reads.
    pub source: String,
    /// The stages from the source on (stage 0 first).
    pub stages: Vec<ChainStage>,
}

/// One stage a run may chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainStage {
    /// Its stream function.
    pub function: String,
    /// Its function keeps no state. Chained, the first stage's rows then go to worker
    /// 0's own partitions (instances of such a function are interchangeable); any other
    /// stage moves all its partitions to worker 0, with their state.
    pub stateless: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A grid's copies count as the broadcast share making as many copies; a plain
    /// split's share is its hint, and 0 without a broadcast.
    #[test]
    fn broadcast_share_counts_grid_copies() {
        let schema = GeneratorSpec::schema();
        let source = Plan::source(
            "g",
            SourceSpec::Generator(GeneratorSpec {
                tuples: 1,
                rate: 1.0,
                keys: 1,
                broadcast: 0.0,
                seed: 1,
            }),
            schema,
        );
        let split = |route: Route, broadcast: Option<Expr>| match source.clone().split(
            15,
            route,
            broadcast,
            Strategy::Fsplit,
        ) {
            Plan::Split(s) => s,
            _ => unreachable!("split makes a split"),
        };
        let grid = Route::Grid {
            left: Expr::int(1).eq(Expr::int(1)),
            rows: 3,
            cols: 5,
        };
        // (3 + 5) / 2 = 4 copies = 1 + b * 14.
        assert!((split(grid.clone(), None).broadcast_share() - 3.0 / 14.0).abs() < 1e-12);
        // Half the rows broadcast (15 copies), half on the grid (4): 9.5 = 1 + b * 14.
        let mut s = split(grid, Some(Expr::int(1).eq(Expr::int(1))));
        s.hints.broadcast_fraction = 0.5;
        assert!((s.broadcast_share() - 8.5 / 14.0).abs() < 1e-12);
        assert_eq!(split(Route::RoundRobin, None).broadcast_share(), 0.0);
        let mut s = split(Route::RoundRobin, Some(Expr::int(1).eq(Expr::int(1))));
        s.hints.broadcast_fraction = 0.1;
        assert_eq!(s.broadcast_share(), 0.1);
    }
}
