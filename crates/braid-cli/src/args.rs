//! The flags shared by `run`, `explain`, `shell` and `convert`, the plan built from them,
//! and the check that every flag given applies to what is run.

use crate::Usage;
use anyhow::{bail, Context, Result};
use braid_exec::runtime::RunConfig;
use braid_exec::source::ReadOptions;
use braid_plan::plan::{
    GeneratorSpec, MergeKind, Pace, Plan, Route, SinkSpec, SourceSpec, Strategy,
};
use braid_plan::types::Schema;
use braid_sql::expr::parse_expr;
use clap::parser::ValueSource;
use clap::{ArgMatches, Args};
use std::path::{Path, PathBuf};

/// A query given on the command line: source, split, stream function, merge, sink; or
/// a script in Braid's query language.
/// What a malformed record or a runtime fault does (`--on-error`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OnError {
    /// Count it, report it after the run, skip the row.
    Skip,
    /// Stop the run with an error naming it.
    Fail,
}

/// Who parses a worker's share of a CSV file read in shares (`--reader-threads`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ReaderThreads {
    /// A reader thread each when the process has more cores than workers.
    Auto,
    /// A reader thread each.
    On,
    /// The worker itself.
    Off,
}

#[derive(Args, Clone)]
pub struct QueryArgs {
    /// A script in Braid's query language (CREATE STREAM ..., INSERT INTO ... SELECT ...);
    /// without it the query is built from the flags below.
    #[arg(value_name = "QUERY.sql")]
    pub script: Option<PathBuf>,
    /// For scripts that name Linear Road's functions (examples/linear_road.sql): the
    /// directory with toll-history.csv (and segment-history.csv, if present).
    #[arg(long)]
    pub lrb_history: Option<PathBuf>,
    /// Where Linear Road's `lr_output` sink writes (default: standard output).
    #[arg(long)]
    pub lrb_output: Option<PathBuf>,
    /// For scripts that split trip requests by a static spatial partitioner (`spq`,
    /// `skd`): a CSV file of past requests (`braid trips generate`) they learn from.
    #[arg(long)]
    pub trips_history: Option<PathBuf>,
    /// Use the built-in generator with this many tuples (default source).
    #[arg(long, default_value_t = 1_000_000)]
    pub tuples: u64,
    /// Generator: keys (expressways).
    #[arg(long, default_value_t = 64)]
    pub keys: u32,
    /// Generator: fraction of broadcast (type 2) tuples.
    #[arg(long, default_value_t = 0.005)]
    pub broadcast_fraction: f64,
    /// Generator: tuples per event-time second.
    #[arg(long, default_value_t = 100_000.0)]
    pub rate: f64,
    /// Generator seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Read CSV from this file ("-" for stdin) instead of the generator.
    #[arg(long)]
    pub csv: Option<String>,
    /// Listen for line-delimited CSV on this address (e.g. 127.0.0.1:7000).
    #[arg(long)]
    pub tcp: Option<String>,
    /// Read a Braid binary batch file.
    #[arg(long)]
    pub binary: Option<PathBuf>,
    /// Schema of CSV input: "name type, ..." (types int64, float64, bool, string; `?` = nullable).
    #[arg(long)]
    pub schema: Option<String>,
    /// The CSV input starts with a header line.
    #[arg(long)]
    pub header: bool,
    /// Event-time column of CSV input.
    #[arg(long)]
    pub event_time: Option<String>,
    /// Epoch length in event-time units.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub epoch: u64,
    /// Physical window size W (rows per batch).
    #[arg(long, default_value_t = 1024, value_parser = positive_usize)]
    pub window: usize,
    /// Replay by event time at this speed factor (default: as fast as possible).
    #[arg(long)]
    pub speed: Option<f64>,
    /// Number of logical partitions q.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub parts: u32,
    /// Routing expression (int64, taken modulo q).
    #[arg(long, default_value = "xway")]
    pub route: String,
    /// Route only rows where this holds.
    #[arg(long)]
    pub when: Option<String>,
    /// Broadcast rows where this holds.
    #[arg(long)]
    pub broadcast: Option<String>,
    /// Split strategy: fsplit, maxtree, exptree, parasplit, autosplit.
    #[arg(long, default_value = "autosplit")]
    pub strategy: String,
    /// Stream function run on every partition (built-ins: count, identity).
    #[arg(long, default_value = "count")]
    pub function: String,
    /// Merge: union or ordered.
    #[arg(long, default_value = "union")]
    pub merge: String,
    /// Output: a file, "-" for stdout, "tcp:HOST:PORT", or "discard".
    #[arg(long, default_value = "-")]
    pub output: String,
    /// Append each output line's emit time (ms since start).
    #[arg(long)]
    pub stamp: bool,
    /// Worker threads per process.
    #[arg(long, default_value_t = 1, value_parser = positive_usize)]
    pub workers: usize,
    /// Processes (timely cluster mode).
    #[arg(long, default_value_t = 1, value_parser = positive_usize)]
    pub processes: usize,
    /// This process's index.
    #[arg(long, default_value_t = 0)]
    pub process_index: usize,
    /// File with one host:port per process.
    #[arg(long)]
    pub hosts: Option<PathBuf>,
    /// What a malformed record or a runtime fault (integer overflow, division by zero,
    /// a failed cast) does: `skip` counts, reports and skips the row; `fail` stops the
    /// run with an error naming it.
    #[arg(long, value_enum, default_value_t = OnError::Skip)]
    pub on_error: OnError,
    /// Same as --on-error fail.
    #[arg(long)]
    pub strict: bool,
    /// Write malformed records to this file.
    #[arg(long)]
    pub rejects: Option<PathBuf>,
    /// Bytes per chunk when the workers read a CSV file in shares (0: 64 KiB, or 1 MiB when several processes read the file).
    #[arg(long, default_value_t = 0)]
    pub chunk_bytes: usize,
    /// Who parses a worker's share of a CSV file read in shares: a reader thread of its
    /// own (`on`: the worker queries one chunk while its reader parses the next), the
    /// worker itself (`off`), or `auto`: reader threads when this process has more
    /// cores than workers.
    #[arg(long, value_enum, default_value_t = ReaderThreads::Auto)]
    pub reader_threads: ReaderThreads,
    /// Epochs per timely time: `auto` (about 64 physical windows of rows, at most 1,024
    /// epochs, where the run allows several epochs per time: a file or rows in memory
    /// read as fast as possible, no latency constraint, checkpoints or live rescaling)
    /// or a number (1: one epoch per time). The output is the same either way; progress tracking is
    /// paid per time.
    #[arg(long, default_value = "auto", value_parser = parse_granule)]
    pub granule: Granule,
    /// Draw the progress line (rows in and out, rate, lag behind a paced source's
    /// schedule, malformed and late rows) even when standard error is not a terminal
    /// (then a line a second). Without it, `run` draws it only on a terminal, and only
    /// when the query's output does not go to the same screen; the shell only with it.
    #[arg(long)]
    pub progress: bool,
    /// Profile each query: at its end, print the time of every operator on every
    /// worker, the workers' busy time and the partitions that took the most time.
    #[arg(long)]
    pub profile: bool,
    /// Serve the live dashboard of the run here (e.g. 127.0.0.1:6876) while it runs:
    /// each query's plan coloured by how busy its operators are, rates, a timeline, and
    /// `/metrics`. The queries are profiled.
    #[arg(long)]
    pub dashboard: Option<std::net::SocketAddr>,
    /// Rescale live on its own: when a worker's partitions take more than this share of
    /// a core (0.9: 90%) twice in a row (every 500 ms), the partition whose move evens
    /// the load best goes to the least busy worker (docs/recovery.md). A cluster:
    /// give it, and --checkpoint, to every process.
    #[arg(long, value_name = "SHARE")]
    pub auto_rescale: Option<f64>,
    /// Desired input rate in rows/s (Paper V's Phi_D): the single-splitter rate is
    /// measured (or taken from --splitter-rate) and parasplit/autosplit choose p by eq. 6.
    #[arg(long)]
    pub desired_rate: Option<f64>,
    /// Rows/s of one splitter (fsplit, q = 1, 1 worker), instead of measuring it;
    /// required with --desired-rate for stdin/TCP input and for several processes.
    #[arg(long)]
    pub splitter_rate: Option<f64>,
    /// Tuples of the single-splitter measurement (generator input; a file is read for at
    /// most 300 ms a run).
    #[arg(long, default_value_t = 500_000)]
    pub splitter_sample: u64,
    /// Place partitions by measured cost: first run the query on this many input rows
    /// (output discarded), measure each partition's stream-function time, and spread
    /// the partitions of all stages so the workers' loads are even (see `braid explain
    /// --calibrate`). Needs a file or generator input and one process.
    #[arg(long, value_name = "ROWS")]
    pub calibrate: Option<u64>,
    /// Take checkpoints into this directory while the queries run (state after an
    /// epoch, committed atomically; a file output is committed with them): a run killed
    /// at any moment resumes with --recover DIR, with output identical to a run that
    /// was never interrupted. Earlier checkpoints in DIR are removed. DIR may be
    /// s3://bucket/prefix: S3-compatible object storage, for processes on several
    /// machines, configured by the AWS environment variables (AWS_ACCESS_KEY_ID,
    /// AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL, AWS_ALLOW_HTTP).
    #[arg(long, value_name = "DIR", conflicts_with = "recover")]
    pub checkpoint: Option<PathBuf>,
    /// Resume from the last checkpoint committed in DIR (a directory or
    /// s3://bucket/prefix; a fresh start when there is none), and go on taking
    /// checkpoints there.
    #[arg(long, value_name = "DIR")]
    pub recover: Option<PathBuf>,
    /// Wall time between checkpoints (e.g. 500ms, 2s, 1m).
    #[arg(long, default_value = "2s", value_parser = duration)]
    pub checkpoint_interval: std::time::Duration,
    /// Cluster mode: how long a process waits for the others to connect before it stops
    /// with an error (e.g. 20s).
    #[arg(long, default_value = "20s", value_parser = duration)]
    pub connect_timeout: std::time::Duration,
    /// Start N processes of this run on this machine (a cluster on loopback ports,
    /// the hosts file printed), each with the same arguments, and wait for them.
    #[arg(long, value_name = "N", value_parser = positive_usize, conflicts_with = "launch_with")]
    pub launch: Option<usize>,
    /// Start one process of this run on every host of the --hosts file with this
    /// command, given the host name and the braid command line (e.g. `ssh`), and wait
    /// for them. Each host needs braid and the files at the same paths.
    #[arg(long, value_name = "CMD")]
    pub launch_with: Option<String>,
    /// With --launch or --launch-with and checkpoints: when a process fails, start all
    /// of them again from the last checkpoint, up to this many times.
    #[arg(long, default_value_t = 0)]
    pub restarts: u32,
}

/// A duration: a number and a unit (ms, s or m).
pub(crate) fn duration(s: &str) -> Result<std::time::Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: f64 = n
        .parse()
        .map_err(|_| format!("`{s}`: expected a number and a unit, e.g. 500ms or 2s"))?;
    let secs = match unit.trim() {
        "ms" => n / 1000.0,
        "s" | "" => n,
        "m" | "min" => n * 60.0,
        u => return Err(format!("`{s}`: unknown unit `{u}` (expected ms, s or m)")),
    };
    if !(secs > 0.0 && secs.is_finite()) {
        return Err(format!("`{s}`: must be more than 0"));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

pub(crate) fn positive_usize(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// Flags that describe a query built from flags: its input, split, function, merge and
/// output. A script declares all of that in SQL.
const QUERY_FLAGS: &[&str] = &[
    "tuples",
    "keys",
    "broadcast_fraction",
    "rate",
    "seed",
    "csv",
    "tcp",
    "binary",
    "schema",
    "header",
    "event_time",
    "epoch",
    "window",
    "speed",
    "parts",
    "route",
    "when",
    "broadcast",
    "strategy",
    "function",
    "merge",
    "output",
    "stamp",
    "desired_rate",
    "splitter_rate",
    "splitter_sample",
];

/// Flags of how queries run: workers, processes, input errors, progress, placement.
const RUN_FLAGS: &[&str] = &[
    "workers",
    "processes",
    "process_index",
    "hosts",
    "strict",
    "on_error",
    "rejects",
    "progress",
    "profile",
    "dashboard",
    "auto_rescale",
    "calibrate",
    "checkpoint",
    "recover",
    "checkpoint_interval",
    "connect_timeout",
    "launch",
    "launch_with",
    "restarts",
];

/// Flags for scripts that name Linear Road's functions.
const LRB_FLAGS: &[&str] = &["lrb_history", "lrb_output", "trips_history"];

/// What the flags are used for; each says which flags apply.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// `braid run script.sql`.
    RunScript,
    /// `braid run` with a query built from flags.
    RunFlags,
    /// `braid explain script.sql`.
    ExplainScript,
    /// `braid explain` of a query built from flags.
    ExplainFlags,
    /// `braid shell`.
    Shell,
    /// `braid convert`.
    Convert,
}

impl Use {
    /// Whether flag `id` applies, and if not, why.
    fn why_not(self, id: &str) -> Option<&'static str> {
        let query = QUERY_FLAGS.contains(&id);
        let run = RUN_FLAGS.contains(&id);
        let lrb = LRB_FLAGS.contains(&id);
        const SQL: &str = "a script declares its input, split, merge and sinks in SQL \
                           (CREATE STREAM, CREATE SINK, SET, PARALLEL(...))";
        const NO_LRB: &str = "it registers an application's functions (Linear Road's, trip \
                              grouping's) for a script that names them; give a script";
        const RATE: &str = "a script states it in SQL: SET desired_rate = ... (and SET \
                            splitter_rate = ..., else one splitter's rate is measured)";
        match self {
            Use::RunScript | Use::Shell | Use::ExplainScript
                if matches!(id, "desired_rate" | "splitter_rate" | "splitter_sample") =>
            {
                Some(RATE)
            }
            Use::RunScript | Use::Shell if query => Some(SQL),
            Use::RunFlags if lrb => Some(NO_LRB),
            Use::ExplainScript if query => Some(SQL),
            Use::ExplainScript | Use::ExplainFlags if id == "progress" => {
                Some("explain runs no query (a calibration run reports its own numbers)")
            }
            Use::ExplainScript | Use::ExplainFlags if id == "profile" => {
                Some("braid explain --analyze runs the queries and shows the plan with what each node measured")
            }
            Use::ExplainScript | Use::ExplainFlags | Use::Shell if id == "dashboard" => {
                Some("the dashboard shows a run: braid run --dashboard, or braid server")
            }
            Use::ExplainScript | Use::ExplainFlags | Use::Shell
                if matches!(
                    id,
                    "checkpoint"
                        | "recover"
                        | "checkpoint_interval"
                        | "launch"
                        | "launch_with"
                        | "restarts"
                ) =>
            {
                Some("checkpoints and launching processes are for braid run")
            }
            Use::Shell if id == "profile" => {
                Some("in the shell, EXPLAIN ANALYZE <query>; runs it and shows what each node measured")
            }
            Use::ExplainFlags if lrb => Some(NO_LRB),
            Use::Convert
                if !matches!(
                    id,
                    "csv" | "schema" | "header" | "event_time" | "epoch" | "window" | "strict"
                        | "on_error" | "rejects"
                ) && (query || run || lrb) =>
            {
                Some("convert reads a CSV file (--csv, --schema, --header, --event-time, --epoch, --window, --on-error, --rejects) and writes a binary batch file")
            }
            _ => None,
        }
    }
}

/// Refuses every flag given in `matches` that does not apply to `what`, naming it and
/// saying why.
pub fn check(matches: &ArgMatches, what: Use) -> Result<()> {
    let given = |id: &str| matches.value_source(id) == Some(ValueSource::CommandLine);
    let refuse = |id: &str, why: &str| -> Result<()> {
        let flag = format!("--{}", id.replace('_', "-"));
        Err(Usage(format!("{flag} does not apply here: {why}")).into())
    };
    for id in matches.ids() {
        let id = id.as_str();
        if !given(id) {
            continue;
        }
        if let Some(why) = what.why_not(id) {
            return refuse(id, why);
        }
    }
    if matches!(what, Use::RunFlags | Use::ExplainFlags) {
        let input = ["csv", "tcp", "binary"].into_iter().find(|i| given(i));
        for id in ["tuples", "keys", "rate", "seed"] {
            if let (true, Some(input)) = (given(id), input) {
                let why = format!("it sets up the built-in generator, and the input is --{input}");
                return refuse(id, &why);
            }
        }
        for id in ["splitter_rate", "splitter_sample"] {
            if given(id) && !given("desired_rate") {
                return refuse(id, "it serves --desired-rate, which is not given");
            }
        }
    }
    Ok(())
}

/// Parses `--schema` (see `Schema`'s `FromStr`); a wrong schema is a usage error.
pub fn parse_schema(text: &str) -> Result<Schema> {
    text.parse()
        .map_err(|e| Usage(format!("--schema: {e}")).into())
}

/// The addresses of a hosts file: one `host:port` a line, blank lines skipped.
pub(crate) fn read_hosts(path: &std::path::Path) -> Result<Vec<String>> {
    Ok(std::fs::read_to_string(path)
        .with_context(|| format!("reading hosts file {}", path.display()))?
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect())
}

/// `--process-index` must be below `--processes`.
fn check_process_index(process: usize, processes: usize) -> Result<()> {
    if process >= processes {
        bail!(Usage(format!(
            "--process-index {process} is not below --processes {processes}"
        )));
    }
    Ok(())
}

/// A server's place in a cluster of `processes` (`None` for one process).
pub fn cluster(
    processes: usize,
    process: usize,
    hosts: Option<PathBuf>,
    connect_timeout: std::time::Duration,
) -> Result<Option<braid_exec::live::engine::Cluster>> {
    check_process_index(process, processes)?;
    if processes == 1 {
        return Ok(None);
    }
    let hosts = match &hosts {
        Some(p) => read_hosts(p)?,
        None => braid_exec::runtime::default_hosts(processes),
    };
    if hosts.len() != processes {
        bail!(Usage(format!(
            "the hosts file has {} addresses for --processes {processes}",
            hosts.len()
        )));
    }
    Ok(Some(braid_exec::live::engine::Cluster {
        process,
        hosts,
        connect_timeout,
    }))
}

/// The object store a `--checkpoint`/`--recover` location names (`s3://...`), or None
/// for a directory.
fn checkpoint_backend(
    location: &Path,
) -> Result<Option<std::sync::Arc<dyn braid_exec::checkpoint::CheckpointBackend>>> {
    match location.to_str() {
        Some(url) if braid_objstore::is_url(url) => Ok(Some(std::sync::Arc::new(
            braid_objstore::S3Backend::from_env(url)?,
        ))),
        _ => Ok(None),
    }
}

/// The object store `braid server --checkpoints URL` names; a location that is not
/// an object-storage URL is a usage error (the default, the data directory, needs
/// no flag).
pub fn server_checkpoints(
    url: Option<&str>,
) -> Result<Option<std::sync::Arc<dyn braid_exec::checkpoint::CheckpointBackend>>> {
    let Some(url) = url else {
        return Ok(None);
    };
    match checkpoint_backend(Path::new(url))? {
        Some(store) => Ok(Some(store)),
        None => bail!(Usage(format!(
            "--checkpoints {url}: expected an object-storage URL (s3://bucket/prefix); without the flag the checkpoints are in the data directory"
        ))),
    }
}

impl QueryArgs {
    /// The run configuration of these flags.
    pub fn run_config(&self) -> Result<RunConfig> {
        let hosts = match &self.hosts {
            Some(p) => read_hosts(p)?,
            None => Vec::new(),
        };
        check_process_index(self.process_index, self.processes)?;
        let checkpoint = match (&self.checkpoint, &self.recover) {
            (Some(dir), _) | (None, Some(dir)) => {
                if self.calibrate.is_some() {
                    return Err(Usage(
                        "--calibrate does not apply with checkpoints: its trial run would be checkpointed too".into(),
                    )
                    .into());
                }
                Some(braid_exec::checkpoint::CheckpointConfig {
                    dir: dir.clone(),
                    interval: self.checkpoint_interval,
                    recover: self.recover.is_some(),
                    backend: checkpoint_backend(dir)?,
                })
            }
            (None, None) => None,
        };
        if let Some(s) = self.auto_rescale {
            if !(s > 0.0 && s <= 1.0) {
                return Err(Usage(format!(
                    "--auto-rescale {s}: expected a share of a core, above 0 and at most 1"
                ))
                .into());
            }
        }
        Ok(RunConfig {
            auto_rescale: self.auto_rescale.map(braid_exec::rescale::Auto::above),
            checkpoint,
            connect_timeout: self.connect_timeout,
            workers: self.workers,
            processes: self.processes,
            process: self.process_index,
            hosts,
            read: ReadOptions {
                strict: self.strict || self.on_error == OnError::Fail,
                reject_file: self.rejects.clone(),
                tcp_clients: 1,
                chunk_bytes: self.chunk_bytes,
                reader_threads: match self.reader_threads {
                    ReaderThreads::Auto => None,
                    ReaderThreads::On => Some(true),
                    ReaderThreads::Off => Some(false),
                },
            },
            granule: self.granule.0,
            ..RunConfig::default()
        })
    }

    /// The total number of workers over all processes.
    pub fn total_workers(&self) -> usize {
        self.workers * self.processes
    }

    /// The input these flags describe, as a plan of one source (epoch, window, pace and
    /// event time set).
    pub fn source_plan(&self) -> Result<Plan> {
        let (spec, mut schema) = self.source()?;
        if let Some(t) = &self.event_time {
            schema = schema.with_event_time(t)?;
        }
        let mut plan = Plan::source("input", spec, schema);
        let source = plan.leaf_source_mut();
        source.epoch = self.epoch;
        source.window = self.window;
        if let Some(speed) = self.speed {
            source.pace = Pace::EventTime {
                units_per_second: 1.0,
                speed,
            };
        }
        Ok(plan)
    }

    /// The split/map/merge query these flags describe.
    pub fn plan(&self) -> Result<Plan> {
        let plan = self.source_plan()?;
        let schema = plan.leaf_source().schema.clone();
        let route = Route::Expr {
            expr: parse_expr(&self.route, &schema).context("--route")?,
            when: self
                .when
                .as_deref()
                .map(|w| parse_expr(w, &schema).context("--when"))
                .transpose()?,
        };
        let broadcast = self
            .broadcast
            .as_deref()
            .map(|b| parse_expr(b, &schema).context("--broadcast"))
            .transpose()?;
        let strategy: Strategy = self.strategy.parse().map_err(|e| Usage(format!("{e}")))?;
        let merge = match self.merge.as_str() {
            "union" => MergeKind::Union,
            "ordered" | "time-ordered" => MergeKind::TimeOrdered,
            other => bail!(Usage(format!(
                "unknown merge `{other}`; merges are union, ordered"
            ))),
        };
        let sink = match self.output.as_str() {
            "-" => SinkSpec::Stdout,
            "discard" => SinkSpec::Discard,
            o if o.starts_with("tcp:") => SinkSpec::Tcp(o["tcp:".len()..].to_string()),
            path => SinkSpec::File(path.into()),
        };
        let mut plan = plan
            .split(self.parts, route, broadcast, strategy)
            .map(&self.function)
            .merge(merge)
            .sink(sink);
        if let Plan::Sink(s) = &mut plan {
            s.stamp_emit = self.stamp;
            if let Plan::Merge(m) = s.input.as_mut() {
                if let Plan::Map(mp) = m.input.as_mut() {
                    if let Plan::Split(sp) = mp.input.as_mut() {
                        sp.hints.broadcast_fraction = self.broadcast_fraction;
                    }
                }
            }
        }
        Ok(plan)
    }

    /// The schema `--schema` gives, which input `flag` needs.
    fn required_schema(&self, flag: &str) -> Result<Schema> {
        match &self.schema {
            Some(s) => parse_schema(s),
            None => bail!(Usage(format!("{flag} needs --schema"))),
        }
    }

    /// The source of a query built from flags, and its schema.
    fn source(&self) -> Result<(SourceSpec, Schema)> {
        let given = [
            self.csv.is_some(),
            self.tcp.is_some(),
            self.binary.is_some(),
        ];
        if given.iter().filter(|g| **g).count() > 1 {
            bail!(Usage(
                "give one input: --csv, --tcp or --binary (or none for the generator)".into()
            ));
        }
        if let Some(path) = &self.csv {
            let schema = self.required_schema("--csv")?;
            let spec = match path.as_str() {
                "-" if self.header => bail!(Usage(
                    "--header: standard input is read as CSV without a header line".into()
                )),
                "-" => SourceSpec::Stdin,
                _ => SourceSpec::Csv {
                    path: path.into(),
                    header: self.header,
                },
            };
            return Ok((spec, schema));
        }
        if self.header {
            bail!(Usage(
                "--header applies to CSV files (--csv FILE) only".into()
            ));
        }
        if let Some(addr) = &self.tcp {
            let schema = self.required_schema("--tcp")?;
            return Ok((SourceSpec::Tcp { addr: addr.clone() }, schema));
        }
        if let Some(path) = &self.binary {
            let schema = match &self.schema {
                Some(s) => parse_schema(s)?,
                None => GeneratorSpec::schema(),
            };
            return Ok((SourceSpec::Binary { path: path.clone() }, schema));
        }
        if self.schema.is_some() {
            bail!(Usage(
                "--schema describes --csv, --tcp or --binary input; the generator has its own"
                    .into()
            ));
        }
        let g = GeneratorSpec {
            tuples: self.tuples,
            rate: self.rate,
            keys: self.keys,
            broadcast: self.broadcast_fraction,
            seed: self.seed,
        };
        Ok((SourceSpec::Generator(g), GeneratorSpec::schema()))
    }
}

/// `--granule`: epochs per timely time, None for `auto`.
#[derive(Clone, Copy, Debug)]
pub struct Granule(pub Option<u64>);

/// `--granule`: `auto` or a number of epochs, at least 1.
fn parse_granule(s: &str) -> std::result::Result<Granule, String> {
    match s {
        "auto" => Ok(Granule(None)),
        n => match n.parse::<u64>() {
            Ok(g) if g >= 1 => Ok(Granule(Some(g))),
            _ => Err(format!(
                "expected `auto` or a number of epochs (1 or more), found `{n}`"
            )),
        },
    }
}
