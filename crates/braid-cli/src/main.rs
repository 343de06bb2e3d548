//! `braid`: run and explain parallel continuous queries; Linear Road tools.

mod sql_cmd;

use anyhow::{bail, Context, Result};
use braid_exec::runtime::{prepare, run, RunConfig};
use braid_exec::source::ReadOptions;
use braid_plan::explain;
use braid_plan::function::Registry;
use braid_plan::plan::{
    GeneratorSpec, MergeKind, Pace, Plan, Route, SinkSpec, SourceSpec, Strategy,
};
use braid_plan::types::{DataType, Field, Schema};
use braid_sql::expr::parse_expr;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// mimalloc instead of glibc's malloc: windows of rows are allocated on one worker
/// and freed on another, and glibc returned that memory to the kernel and faulted it
/// back in for every window (about 250 k page faults per 8 M rows on 2 workers).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "braid",
    version,
    about = "Braid: parallel continuous queries with declarative stream splitting"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a query script (`braid run query.sql`), or a split/map/merge query given by
    /// flags, to the end of its input.
    Run(QueryArgs),
    /// Interactive shell: enter statements, results stream to the screen.
    Shell(QueryArgs),
    /// Convert a CSV input (flags as for `run`: --csv, --schema, --header, --event-time,
    /// --epoch, --window) to a Braid binary batch file.
    Convert {
        #[command(flatten)]
        query: QueryArgs,
        /// The binary file to write.
        #[arg(long = "to")]
        to: PathBuf,
    },
    /// Write the input files of the query examples (examples/*.sql) into a directory.
    ExamplesData {
        /// Output directory.
        dir: PathBuf,
        /// Call records, StreamAPAS tuples per generator, samples; log lines in total.
        #[arg(long, default_value_t = 400)]
        rows: u64,
        /// StreamAPAS generator rate in tuples per minute (sets the time column, ms).
        #[arg(long, default_value_t = 1000.0)]
        apas_rate: f64,
        /// Seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Show the physical plan (text, or Graphviz DOT with --dot).
    Explain {
        #[command(flatten)]
        query: QueryArgs,
        /// Print Graphviz DOT instead of text.
        #[arg(long)]
        dot: bool,
    },
    /// Linear Road: generate data, validate outputs.
    Lrb {
        #[command(subcommand)]
        which: Lrb,
    },
}

#[derive(Subcommand)]
enum Lrb {
    /// Generate input, toll history and segment history into a directory.
    Generate {
        /// Expressways.
        #[arg(long, default_value_t = 1)]
        xways: u32,
        /// Simulated minutes.
        #[arg(long, default_value_t = 180)]
        minutes: u32,
        /// Load profile: ramp, sine or steady.
        #[arg(long, default_value = "ramp")]
        profile: String,
        /// Seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Output directory.
        #[arg(short = 'o', long)]
        out: PathBuf,
        /// Also write the input as a Braid binary batch file (input.bin), which
        /// `braid lrb run --input input.bin` replays without parsing.
        #[arg(long)]
        binary: bool,
    },
    /// Run Linear Road: replay the input by its Time field (real time by default), write
    /// the outputs with Emit stamped, report response times per type.
    Run {
        /// Input file (15-field lines).
        #[arg(long)]
        input: PathBuf,
        /// Toll history (VID,Day,XWay,Toll).
        #[arg(long)]
        history: PathBuf,
        /// Segment history (for type-4 answers).
        #[arg(long)]
        segment_history: Option<PathBuf>,
        /// Where to write the outputs.
        #[arg(long)]
        output: Option<PathBuf>,
        /// Replay speed factor (1 = real time).
        #[arg(long, default_value_t = 1.0)]
        speed: f64,
        /// Replay as fast as possible (Emit is then the input clock).
        #[arg(long)]
        max_speed: bool,
        /// Worker threads.
        #[arg(long, default_value_t = 1)]
        workers: usize,
        /// Logical partitions (expressway x goes to x mod q).
        #[arg(long, default_value_t = 64)]
        parts: u32,
        /// Split strategy: fsplit, maxtree, exptree, parasplit, autosplit.
        #[arg(long, default_value = "autosplit")]
        strategy: String,
        /// Fan-in of the balance merge tree (default: per worker, then global).
        #[arg(long)]
        fanin: Option<u32>,
        /// Print a progress line every second.
        #[arg(long)]
        progress: bool,
    },
    /// Show the Linear Road physical plan.
    Explain {
        /// Logical partitions.
        #[arg(long, default_value_t = 64)]
        parts: u32,
        /// Split strategy.
        #[arg(long, default_value = "autosplit")]
        strategy: String,
        /// Balance merge fan-in.
        #[arg(long)]
        fanin: Option<u32>,
        /// Workers in all.
        #[arg(long, default_value_t = 2)]
        workers: usize,
        /// Print Graphviz DOT instead of text.
        #[arg(long)]
        dot: bool,
    },
    /// The main job end to end: generate data, run the parallel plan, validate.
    Demo {
        /// Expressways.
        #[arg(long, default_value_t = 2)]
        xways: u32,
        /// Simulated minutes.
        #[arg(long, default_value_t = 10)]
        minutes: u32,
        /// Worker threads.
        #[arg(long, default_value_t = 2)]
        workers: usize,
        /// Replay speed factor (default: as fast as possible).
        #[arg(long)]
        speed: Option<f64>,
        /// Scratch directory for the data and outputs.
        #[arg(long, default_value = "scratch/lrb-demo")]
        dir: PathBuf,
    },
    /// Recompute the expected answers independently and compare with an output file.
    Validate {
        /// Input file (15-field lines).
        #[arg(long)]
        input: PathBuf,
        /// Toll history (VID,Day,XWay,Toll).
        #[arg(long)]
        history: PathBuf,
        /// Segment history (for type-4 answers).
        #[arg(long)]
        segment_history: Option<PathBuf>,
        /// The outputs to check.
        #[arg(long)]
        output: PathBuf,
        /// Outputs with Time below this are not scored (sustained-peak warm-up).
        #[arg(long, default_value_t = 0)]
        score_from: i64,
        /// Do not check deadlines (for outputs of a run as fast as possible).
        #[arg(long)]
        no_deadlines: bool,
    },
}

/// A query given on the command line: source, split, stream function, merge, sink.
#[derive(Args, Clone)]
struct QueryArgs {
    /// A script in Braid's query language (CREATE STREAM ..., INSERT INTO ... SELECT ...);
    /// without it the query is built from the flags below.
    #[arg(value_name = "QUERY.sql")]
    script: Option<PathBuf>,
    /// For scripts that name Linear Road's functions (examples/linear_road.sql): the
    /// directory with toll-history.csv (and segment-history.csv, if present).
    #[arg(long)]
    lrb_history: Option<PathBuf>,
    /// Where Linear Road's `lr_output` sink writes (default: standard output).
    #[arg(long)]
    lrb_output: Option<PathBuf>,
    /// Use the built-in generator with this many tuples (default source).
    #[arg(long, default_value_t = 1_000_000)]
    tuples: u64,
    /// Generator: keys (expressways).
    #[arg(long, default_value_t = 64)]
    keys: u32,
    /// Generator: fraction of broadcast (type 2) tuples.
    #[arg(long, default_value_t = 0.005)]
    broadcast_fraction: f64,
    /// Generator: tuples per event-time second.
    #[arg(long, default_value_t = 100_000.0)]
    rate: f64,
    /// Generator seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Read CSV from this file ("-" for stdin) instead of the generator.
    #[arg(long)]
    csv: Option<String>,
    /// Listen for line-delimited CSV on this address (e.g. 127.0.0.1:7000).
    #[arg(long)]
    tcp: Option<String>,
    /// Read a Braid binary batch file.
    #[arg(long)]
    binary: Option<PathBuf>,
    /// Schema of CSV input: "name type, ..." (types int64, float64, bool, string; `?` = nullable).
    #[arg(long)]
    schema: Option<String>,
    /// The CSV input starts with a header line.
    #[arg(long)]
    header: bool,
    /// Event-time column of CSV input.
    #[arg(long)]
    event_time: Option<String>,
    /// Epoch length in event-time units.
    #[arg(long, default_value_t = 1)]
    epoch: u64,
    /// Physical window size W (rows per batch).
    #[arg(long, default_value_t = 1024)]
    window: usize,
    /// Replay by event time at this speed factor (default: as fast as possible).
    #[arg(long)]
    speed: Option<f64>,
    /// Number of logical partitions q.
    #[arg(long, default_value_t = 64)]
    parts: u32,
    /// Routing expression (int64, taken modulo q).
    #[arg(long, default_value = "xway")]
    route: String,
    /// Route only rows where this holds.
    #[arg(long)]
    when: Option<String>,
    /// Broadcast rows where this holds.
    #[arg(long)]
    broadcast: Option<String>,
    /// Split strategy: fsplit, maxtree, exptree, parasplit, autosplit.
    #[arg(long, default_value = "autosplit")]
    strategy: String,
    /// Stream function run on every partition (built-ins: count, identity).
    #[arg(long, default_value = "count")]
    function: String,
    /// Merge: union or ordered.
    #[arg(long, default_value = "union")]
    merge: String,
    /// Output: a file, "-" for stdout, "tcp:HOST:PORT", or "discard".
    #[arg(long, default_value = "-")]
    output: String,
    /// Append each output line's emit time (ms since start).
    #[arg(long)]
    stamp: bool,
    /// Worker threads per process.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Processes (timely cluster mode).
    #[arg(long, default_value_t = 1)]
    processes: usize,
    /// This process's index.
    #[arg(long, default_value_t = 0)]
    process_index: usize,
    /// File with one host:port per process.
    #[arg(long)]
    hosts: Option<PathBuf>,
    /// Stop at the first malformed record.
    #[arg(long)]
    strict: bool,
    /// Write malformed records to this file.
    #[arg(long)]
    rejects: Option<PathBuf>,
    /// Print a progress line every second.
    #[arg(long)]
    progress: bool,
    /// Desired input rate in rows/s (Paper V's Phi_D): the single-splitter rate is
    /// measured (or taken from --splitter-rate) and parasplit/autosplit choose p by eq. 6.
    #[arg(long)]
    desired_rate: Option<f64>,
    /// Rows/s of one splitter (fsplit, q = 1, 1 worker), instead of measuring it;
    /// required with --desired-rate for stdin/TCP input and for several processes.
    #[arg(long)]
    splitter_rate: Option<f64>,
    /// Tuples of the single-splitter measurement (generator input).
    #[arg(long, default_value_t = 500_000)]
    splitter_sample: u64,
    /// Place partitions by measured cost: first run the query on this many input rows
    /// (output discarded), measure each partition's stream-function time, and spread
    /// the partitions of all stages so the workers' loads are even (see `braid explain
    /// --calibrate`). Needs a file or generator input and one process.
    #[arg(long, value_name = "ROWS")]
    calibrate: Option<u64>,
}

fn parse_schema(text: &str) -> Result<Schema> {
    let mut fields = Vec::new();
    for part in text.split(',') {
        let mut words = part.split_whitespace();
        let (Some(name), Some(ty)) = (words.next(), words.next()) else {
            bail!("schema entry {part:?}: expected `name type`");
        };
        let (ty, nullable) = match ty.strip_suffix('?') {
            Some(t) => (t, true),
            None => (ty, false),
        };
        let ty: DataType = ty.parse()?;
        fields.push(Field {
            name: name.to_string(),
            ty,
            nullable,
        });
    }
    Ok(Schema::new(fields))
}

/// Writes `source` to the binary batch file `to`, reporting malformed records and the
/// rows written.
fn convert(
    source: &braid_plan::plan::Source,
    to: &std::path::Path,
    read: &ReadOptions,
    registry: &Registry,
) -> Result<()> {
    let t = std::time::Instant::now();
    let (rows, rejects) = braid_exec::source::binary::convert(source, to, read, registry)?;
    if rejects.count > 0 {
        eprint!("{rejects}");
    }
    eprintln!(
        "braid: wrote {rows} rows to {} in {:.2} s",
        to.display(),
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

fn build(q: &QueryArgs) -> Result<Plan> {
    let (spec, mut schema) = if let Some(path) = &q.csv {
        let schema = parse_schema(q.schema.as_deref().context("--csv needs --schema")?)?;
        let spec = if path == "-" {
            SourceSpec::Stdin
        } else {
            SourceSpec::Csv {
                path: path.into(),
                header: q.header,
            }
        };
        (spec, schema)
    } else if let Some(addr) = &q.tcp {
        (
            SourceSpec::Tcp { addr: addr.clone() },
            parse_schema(q.schema.as_deref().context("--tcp needs --schema")?)?,
        )
    } else if let Some(path) = &q.binary {
        let schema = match &q.schema {
            Some(s) => parse_schema(s)?,
            None => GeneratorSpec::schema(),
        };
        (SourceSpec::Binary { path: path.clone() }, schema)
    } else {
        let g = GeneratorSpec {
            tuples: q.tuples,
            rate: q.rate,
            keys: q.keys,
            broadcast: q.broadcast_fraction,
            seed: q.seed,
        };
        (SourceSpec::Generator(g), GeneratorSpec::schema())
    };
    if let Some(t) = &q.event_time {
        schema = schema.with_event_time(t)?;
    }
    let route = Route::Expr {
        expr: parse_expr(&q.route, &schema)?,
        when: q
            .when
            .as_deref()
            .map(|w| parse_expr(w, &schema))
            .transpose()?,
    };
    let broadcast = q
        .broadcast
        .as_deref()
        .map(|b| parse_expr(b, &schema))
        .transpose()?;
    let strategy: Strategy = q.strategy.parse()?;
    let merge = match q.merge.as_str() {
        "union" => MergeKind::Union,
        "ordered" | "time-ordered" => MergeKind::TimeOrdered,
        other => bail!("unknown merge `{other}`; merges are union, ordered"),
    };
    let sink = match q.output.as_str() {
        "-" => SinkSpec::Stdout,
        "discard" => SinkSpec::Discard,
        o if o.starts_with("tcp:") => SinkSpec::Tcp(o["tcp:".len()..].to_string()),
        path => SinkSpec::File(path.into()),
    };
    let mut plan = Plan::source("input", spec, schema);
    if let Plan::Source(s) = &mut plan {
        s.epoch = q.epoch;
        s.window = q.window;
        if let Some(speed) = q.speed {
            s.pace = Pace::EventTime {
                units_per_second: 1.0,
                speed,
            };
        }
    }
    let mut plan = plan
        .split(q.parts, route, broadcast, strategy)
        .map(&q.function)
        .merge(merge)
        .sink(sink);
    if let Plan::Sink(s) = &mut plan {
        s.stamp_emit = q.stamp;
    }
    if let Plan::Sink(s) = &mut plan {
        if let Plan::Merge(m) = s.input.as_mut() {
            if let Plan::Map(mp) = m.input.as_mut() {
                if let Plan::Split(sp) = mp.input.as_mut() {
                    sp.hints.broadcast_fraction = q.broadcast_fraction;
                }
            }
        }
    }
    Ok(plan)
}

/// With --desired-rate: puts the desired and the single-splitter rate (measured, or
/// --splitter-rate) into the split's hints, so that eq. 6 picks p.
fn apply_rates(plan: &mut Plan, q: &QueryArgs, registry: &Registry) -> Result<()> {
    let Some(desired) = q.desired_rate else {
        return Ok(());
    };
    let one = match q.splitter_rate {
        Some(r) => r,
        None => {
            if q.processes > 1 {
                bail!("with --processes > 1 give --splitter-rate too, so that every process picks the same p");
            }
            let r = braid_exec::tune::single_splitter_rate(plan, registry, q.splitter_sample, 3)?;
            eprintln!(
                "braid: single-splitter rate {r:.0} rows/s (fsplit, q = 1, 1 worker, median of 3 runs on up to {} rows)",
                q.splitter_sample
            );
            r
        }
    };
    braid_exec::tune::set_rates(plan, desired, one)?;
    let shape = braid_exec::tune::resolved_shape(plan, registry, q.workers * q.processes)?;
    eprintln!(
        "braid: desired {desired:.0} rows/s, one splitter {one:.0} rows/s -> split shape {}",
        braid_exec::tune::describe(&shape)
    );
    Ok(())
}

/// Registers Linear Road's stream function, combiner and sink for a script, loading the
/// histories from `dir`.
fn register_lrb(
    registry: &mut Registry,
    dir: &std::path::Path,
    output: Option<&std::path::Path>,
) -> Result<std::sync::Arc<linear_road::app::OutputSink>> {
    use linear_road::history::{SegmentHistory, TollHistory};
    let tolls_path = dir.join("toll-history.csv");
    let (tolls, _) = TollHistory::load(&tolls_path)
        .with_context(|| format!("loading {}", tolls_path.display()))?;
    let seg_path = dir.join("segment-history.csv");
    let segments = if seg_path.exists() {
        SegmentHistory::load(&seg_path)
            .with_context(|| format!("loading {}", seg_path.display()))?
            .0
    } else {
        SegmentHistory::empty()
    };
    let sink = std::sync::Arc::new(
        linear_road::app::OutputSink::create(output, None).context("creating the output")?,
    );
    linear_road::app::register(
        registry,
        std::sync::Arc::new(tolls),
        std::sync::Arc::new(segments),
        sink.clone(),
    );
    Ok(sink)
}

fn run_config(q: &QueryArgs) -> Result<RunConfig> {
    let hosts = match &q.hosts {
        Some(p) => std::fs::read_to_string(p)
            .with_context(|| format!("reading hosts file {}", p.display()))?
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect(),
        None => Vec::new(),
    };
    Ok(RunConfig {
        workers: q.workers,
        processes: q.processes,
        process: q.process_index,
        hosts,
        read: ReadOptions {
            strict: q.strict,
            reject_file: q.rejects.clone(),
            tcp_clients: 1,
        },
        progress: q.progress,
        ..RunConfig::default()
    })
}

fn print_lr_run(run: &linear_road::app::LrRun, opts: &linear_road::app::LrOptions) {
    let secs = run.report.elapsed.as_secs_f64();
    println!(
        "histories loaded in {:.2} s ({} toll rows, {} bad lines)",
        run.load_seconds, run.history_rows.0, run.history_rows.1
    );
    println!(
        "{} input rows in {:.2} s ({:.0} rows/s), {} outputs",
        run.report.rows_in,
        secs,
        run.report.rows_in as f64 / secs.max(1e-9),
        run.report.rows_out
    );
    let names = [
        "toll notification",
        "accident notif.",
        "account balance",
        "daily expenditure",
        "travel time",
    ];
    let deadlines = [5, 5, 5, 10, 30];
    let clock = if opts.speed.is_some() {
        "driver time"
    } else {
        "input clock"
    };
    println!("type                   count   p50 ms   p95 ms   p99 ms   max ms   late (deadline)  [{clock}]");
    for t in 0..5 {
        let h = &run.stats.millis[t];
        let q = |p: f64| {
            if h.is_empty() {
                0
            } else {
                h.value_at_quantile(p)
            }
        };
        println!(
            "{t} {:<18} {:>8} {:>8} {:>8} {:>8} {:>8} {:>6} ({} s)",
            names[t],
            run.stats.counts[t],
            q(0.5),
            q(0.95),
            q(0.99),
            if h.is_empty() { 0 } else { h.max() },
            run.stats.late[t],
            deadlines[t]
        );
    }
    for r in &run.report.rejects {
        if r.count > 0 {
            print!("{r}");
        }
    }
    let (ir, it) = (
        run.ignored
            .reports
            .load(std::sync::atomic::Ordering::Relaxed),
        run.ignored.types.load(std::sync::atomic::Ordering::Relaxed),
    );
    if ir + it > 0 {
        println!(
            "ignored: {ir} position report(s) with Lane, Dir or Seg out of range, {it} record(s) of unknown Type"
        );
    }
    let late: u64 = run.stats.late.iter().sum();
    if opts.speed.is_some() {
        println!("deadlines: {}", if late == 0 { "PASS" } else { "FAIL" });
    } else {
        println!("deadlines: not applicable (as fast as possible; Emit is the input clock)");
    }
}

fn main() {
    if let Err(e) = real_main() {
        eprintln!("braid: {e:#}");
        std::process::exit(1);
    }
}

fn real_main() -> Result<()> {
    let cli = Cli::parse();
    let registry = Registry::with_builtins();
    match cli.command {
        Command::Run(q) if q.script.is_some() => {
            let cfg = run_config(&q)?;
            let path = q.script.as_deref().context("script")?;
            let mut registry = registry;
            let sink = match &q.lrb_history {
                Some(dir) => Some(register_lrb(&mut registry, dir, q.lrb_output.as_deref())?),
                None => None,
            };
            sql_cmd::run_file(path, &cfg, q.calibrate, &registry)?;
            if let Some(sink) = sink {
                braid_plan::function::SinkFn::flush(sink.as_ref())?;
            }
        }
        Command::Explain { query, dot } if query.script.is_some() => {
            let path = query.script.as_deref().context("script")?;
            let cfg = run_config(&query)?;
            sql_cmd::explain_file(path, &cfg, query.calibrate, dot, &registry)?;
        }
        Command::Convert { query, to } => {
            if query.csv.is_none() {
                bail!("convert reads CSV: give --csv FILE (and --schema)");
            }
            let plan = build(&query)?;
            convert(
                plan.leaf_source(),
                &to,
                &run_config(&query)?.read,
                &registry,
            )?;
        }
        Command::ExamplesData {
            dir,
            rows,
            apas_rate,
            seed,
        } => {
            braid_sql::examples::write(&dir, rows, apas_rate, seed)?;
            eprintln!("braid: wrote the example inputs into {}", dir.display());
        }
        Command::Shell(q) => {
            let cfg = run_config(&q)?;
            sql_cmd::shell(&cfg, &registry)?;
        }
        Command::Run(q) => {
            let mut plan = build(&q)?;
            apply_rates(&mut plan, &q, &registry)?;
            let cfg = run_config(&q)?;
            let plan = sql_cmd::calibrated(plan, &registry, &cfg, q.calibrate)?;
            let report = run(&plan, &registry, &cfg)?;
            let secs = report.elapsed.as_secs_f64();
            eprintln!(
                "braid: {} rows in, {} rows out in {:.3} s ({:.0} rows/s) with {} worker(s) x {} process(es)",
                report.rows_in,
                report.rows_out,
                secs,
                report.rows_in as f64 / secs.max(1e-9),
                q.workers,
                q.processes
            );
            for r in &report.rejects {
                if r.count > 0 {
                    eprint!("{r}");
                }
            }
        }
        Command::Explain { query, dot } => {
            let mut plan = build(&query)?;
            apply_rates(&mut plan, &query, &registry)?;
            let cfg = run_config(&query)?;
            let plan = sql_cmd::calibrated(plan, &registry, &cfg, query.calibrate)?;
            let plan = prepare(&plan, &registry, query.workers * query.processes)?;
            let workers = query.workers * query.processes;
            if dot {
                print!("{}", explain::dot(&plan, &registry, workers));
            } else {
                print!("{}", explain::text(&plan, &registry, workers));
            }
        }
        Command::Lrb { which } => match which {
            Lrb::Generate {
                xways,
                minutes,
                profile,
                seed,
                out,
                binary,
            } => {
                let profile = profile.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
                let cfg = linear_road::generate::GenConfig {
                    xways,
                    minutes,
                    profile,
                    seed,
                    ..Default::default()
                };
                std::fs::create_dir_all(&out)
                    .with_context(|| format!("creating {}", out.display()))?;
                let t = std::time::Instant::now();
                let bar = indicatif::ProgressBar::new(u64::from(minutes) * 60);
                bar.set_style(
                    indicatif::ProgressStyle::with_template(
                        "{bar:40} {pos}/{len} simulated s, {elapsed} ({eta} left)",
                    )
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                );
                let stats =
                    linear_road::generate::write_dir(&cfg, &out, &mut |s| bar.set_position(s))
                        .with_context(|| format!("writing into {}", out.display()))?;
                bar.finish_and_clear();
                let secs = t.elapsed().as_secs_f64();
                eprintln!(
                    "braid: {} tuples ({:?} by type), {} vehicles, {} re-entries, {} accidents in {:.2} s ({:.0} tuples/s)",
                    stats.tuples,
                    stats.by_type,
                    stats.vehicles,
                    stats.reentries,
                    stats.accidents,
                    secs,
                    stats.tuples as f64 / secs.max(1e-9)
                );
                if binary {
                    let mut plan = Plan::source(
                        "lrb",
                        SourceSpec::Csv {
                            path: out.join("input.csv"),
                            header: false,
                        },
                        linear_road::app::input_schema(),
                    );
                    plan.leaf_source_mut().window = 4096;
                    convert(
                        plan.leaf_source(),
                        &out.join("input.bin"),
                        &ReadOptions::default(),
                        &registry,
                    )?;
                }
            }
            Lrb::Run {
                input,
                history,
                segment_history,
                output,
                speed,
                max_speed,
                workers,
                parts,
                strategy,
                fanin,
                progress,
            } => {
                let opts = linear_road::app::LrOptions {
                    q: parts,
                    strategy: strategy.parse()?,
                    fanin,
                    speed: (!max_speed).then_some(speed),
                    ..Default::default()
                };
                let cfg = RunConfig {
                    workers,
                    progress,
                    ..RunConfig::default()
                };
                let run = linear_road::app::run_files(
                    &input,
                    &history,
                    segment_history.as_deref(),
                    output.as_deref(),
                    &opts,
                    &cfg,
                )?;
                print_lr_run(&run, &opts);
                if run.stats.late.iter().sum::<u64>() > 0 && !max_speed {
                    std::process::exit(2);
                }
            }
            Lrb::Explain {
                parts,
                strategy,
                fanin,
                workers,
                dot,
            } => {
                let opts = linear_road::app::LrOptions {
                    q: parts,
                    strategy: strategy.parse()?,
                    fanin,
                    ..Default::default()
                };
                let mut registry = Registry::with_builtins();
                let sink =
                    std::sync::Arc::new(linear_road::app::OutputSink::create(None, opts.speed)?);
                linear_road::app::register(
                    &mut registry,
                    std::sync::Arc::new(linear_road::history::TollHistory::from_rows(
                        std::iter::empty(),
                    )),
                    std::sync::Arc::new(linear_road::history::SegmentHistory::empty()),
                    sink,
                );
                let source = SourceSpec::Csv {
                    path: "input.csv".into(),
                    header: false,
                };
                let plan = prepare(&linear_road::app::plan(source, &opts), &registry, workers)?;
                if dot {
                    print!("{}", explain::dot(&plan, &registry, workers));
                } else {
                    print!("{}", explain::text(&plan, &registry, workers));
                }
            }
            Lrb::Demo {
                xways,
                minutes,
                workers,
                speed,
                dir,
            } => {
                let cfg = linear_road::generate::GenConfig {
                    xways,
                    minutes,
                    profile: linear_road::generate::Profile::Steady,
                    seed: 1,
                    ..Default::default()
                };
                std::fs::create_dir_all(&dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
                let t = std::time::Instant::now();
                let stats = linear_road::generate::write_dir(&cfg, &dir, &mut |_| {})
                    .with_context(|| format!("writing into {}", dir.display()))?;
                println!(
                    "generated {} tuples on {xways} expressway(s), {minutes} min, in {:.2} s ({})",
                    stats.tuples,
                    t.elapsed().as_secs_f64(),
                    dir.display()
                );
                let (input, history, segs, out) = (
                    dir.join("input.csv"),
                    dir.join("toll-history.csv"),
                    dir.join("segment-history.csv"),
                    dir.join("output.csv"),
                );
                let opts = linear_road::app::LrOptions {
                    q: xways.max(1) * 4,
                    speed,
                    ..Default::default()
                };
                let run_cfg = RunConfig {
                    workers,
                    ..RunConfig::default()
                };
                let run = linear_road::app::run_files(
                    &input,
                    &history,
                    Some(&segs),
                    Some(&out),
                    &opts,
                    &run_cfg,
                )?;
                print_lr_run(&run, &opts);
                let report = linear_road::validate::validate_files(
                    &input,
                    &history,
                    Some(&segs),
                    &out,
                    &linear_road::validate::Options {
                        check_deadlines: speed.is_some(),
                        ..Default::default()
                    },
                )
                .context("validating")?;
                print!("{report}");
                if !report.passed() {
                    std::process::exit(2);
                }
            }
            Lrb::Validate {
                input,
                history,
                segment_history,
                output,
                score_from,
                no_deadlines,
            } => {
                let opts = linear_road::validate::Options {
                    score_from_time: score_from,
                    check_deadlines: !no_deadlines,
                    ..Default::default()
                };
                let report = linear_road::validate::validate_files(
                    &input,
                    &history,
                    segment_history.as_deref(),
                    &output,
                    &opts,
                )
                .context("validating")?;
                print!("{report}");
                if !report.passed() {
                    std::process::exit(2);
                }
            }
        },
    }
    Ok(())
}
