//! `braid`: run, explain and convert parallel continuous queries, an interactive shell,
//! Linear Road tools. A thin client of the library session (`braid_exec::session`):
//! `main -> run -> ExitCode`, one file per subcommand.
//!
//! Exit codes: 0 when everything went well, 1 for an error of a query or its data (and
//! a Linear Road run or validation that failed), 2 for a usage error (a flag that does
//! not apply, a missing argument). A closed standard output (`braid explain x.sql |
//! head`) ends the program quietly with 0.

/// `println!` that returns the error instead of panicking: a closed standard output
/// then ends the program quietly (see `closed_pipe`).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}

/// `print!` that returns the error instead of panicking (see [`outln`]).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*)
    }};
}

mod allocator;
mod args;
mod convert;
mod dashboard;
mod explain;
mod launch;
mod listing;
mod lofar_cmd;
mod lrb;
mod profile;
mod progress;
mod report;
mod run;
mod shell;
mod trips_cmd;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

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
    Run(args::QueryArgs),
    /// Interactive shell: enter statements, results stream to the screen.
    Shell(args::QueryArgs),
    /// Convert a CSV input (flags as for `run`: --csv, --schema, --header, --event-time,
    /// --epoch, --window) to a Braid binary batch file.
    Convert {
        #[command(flatten)]
        query: args::QueryArgs,
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
        query: args::QueryArgs,
        /// Print Graphviz DOT instead of text.
        #[arg(long)]
        dot: bool,
        /// EXPLAIN ANALYZE: run the queries (their sinks write as with `braid run`),
        /// then print each physical plan with what each node measured: rows, time,
        /// busy share.
        #[arg(long, conflicts_with = "dot")]
        analyze: bool,
    },
    /// Run the server: streams live in Braid, queries come and go; clients connect
    /// with psql or any Postgres driver.
    Server {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:6875")]
        listen: std::net::SocketAddr,
        /// Worker threads.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
        workers: u64,
        /// Data directory: the stream logs, the catalog and the queries' checkpoints.
        /// A server started again on it brings back its streams and queries.
        #[arg(long, default_value = "braid-data")]
        data: PathBuf,
        /// Milliseconds between two checkpoints of a query that writes a stream or a
        /// sink.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
        checkpoint_interval_ms: u64,
        /// Where the queries' checkpoints go instead of DATA/checkpoints:
        /// s3://bucket/prefix, S3-compatible object storage configured by the AWS
        /// environment variables (as for `braid run --checkpoint`). Give every process
        /// of a cluster the same location: each writes its own parts there, so the
        /// processes need no shared file system.
        #[arg(long, value_name = "URL")]
        checkpoints: Option<String>,
        /// Milliseconds a stream may be idle before its time moves with the clock.
        #[arg(long, default_value_t = 50)]
        idle_ms: u64,
        /// Runtime faults (overflow, division by zero, bad casts) fail the query instead
        /// of being counted, reported skips.
        #[arg(long)]
        strict: bool,
        /// Clients must give this password (MD5 challenge); read from BRAID_PASSWORD
        /// when set. Without one, anyone who can reach the address may connect.
        #[arg(long, env = "BRAID_PASSWORD", hide_env_values = true)]
        password: Option<String>,
        /// A subscriber more rows than this behind its stream is disconnected.
        #[arg(long, default_value_t = 1_000_000)]
        max_subscriber_lag: u64,
        /// A subscriber that takes longer than this many milliseconds to take a batch
        /// of rows is disconnected.
        #[arg(long, default_value_t = 10_000)]
        slow_subscriber_ms: u64,
        /// The HTTP listener: the live dashboard (`/`), Prometheus metrics
        /// (`/metrics`) and batches from producers (`POST /streams/<name>`).
        #[arg(long, default_value = "127.0.0.1:6876")]
        http: std::net::SocketAddr,
        /// No HTTP listener (no dashboard, metrics or HTTP producers).
        #[arg(long)]
        no_http: bool,
        /// Processes of the server (timely's cluster mode): process 0 serves clients,
        /// the others take their share of every query.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
        processes: u64,
        /// This process's index among --processes.
        #[arg(long, default_value_t = 0)]
        process_index: u64,
        /// A file with one host:port per process (default localhost:2101, 2102, ...).
        #[arg(long)]
        hosts: Option<PathBuf>,
        /// Cluster mode: how long a process waits for the others to connect before it
        /// stops with an error naming them (e.g. 60s, 5m).
        #[arg(long, default_value = "60s", value_parser = args::duration)]
        connect_timeout: std::time::Duration,
    },
    /// Linear Road: generate data, run, explain, validate.
    Lrb {
        #[command(subcommand)]
        which: lrb::Lrb,
    },
    /// Trip grouping (ride sharing, thesis Paper III): generate requests.
    Trips {
        #[command(subcommand)]
        which: trips_cmd::Trips,
    },
    /// Numeric vector streams (LOFAR, thesis Papers I, II, VI): generate signals.
    Lofar {
        #[command(subcommand)]
        which: lofar_cmd::Lofar,
    },
}

/// A usage error: the command line asks for something that does not fit (exit code 2).
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// The run failed in a way already reported on the terminal (exit code 1, no message).
#[derive(Debug)]
pub struct Failed;

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("failed")
    }
}

impl std::error::Error for Failed {}

fn main() -> ExitCode {
    allocator::keep_freed_memory();
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if closed_pipe(&e) => ExitCode::SUCCESS,
        Err(e) if e.is::<Failed>() => ExitCode::from(1),
        Err(e) if e.is::<Usage>() => {
            say(&format!("braid: {e:#}\n"));
            ExitCode::from(2)
        }
        Err(e) => {
            say(&format!("braid: {e:#}\n"));
            ExitCode::from(1)
        }
    }
}

/// Writes `text` to standard error in one write: the processes of a launched cluster
/// share it, and their errors must not interleave.
fn say(text: &str) {
    use std::io::Write;
    let _ = std::io::stderr().write_all(text.as_bytes());
}

/// Whether `e` comes from writing to a closed pipe (the reader went away).
fn closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        let io = c
            .downcast_ref::<std::io::Error>()
            .or(match c.downcast_ref() {
                Some(braid_exec::error::Error::Io { error, .. }) => Some(error),
                _ => None,
            });
        io.is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn run() -> anyhow::Result<()> {
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches)?;
    let sub = matches
        .subcommand()
        .map(|(_, m)| m)
        .ok_or_else(|| Usage("give a subcommand (see braid --help)".into()))?;
    match cli.command {
        Command::Run(q) => run::run(&q, sub),
        Command::Explain {
            query,
            dot,
            analyze,
        } => match analyze {
            true => explain::analyze(&query, sub),
            false => explain::explain(&query, dot, sub),
        },
        Command::Shell(q) => shell::shell(&q, sub),
        Command::Convert { query, to } => convert::convert(&query, &to, sub),
        Command::ExamplesData {
            dir,
            rows,
            apas_rate,
            seed,
        } => {
            braid_sql::examples::write(&dir, rows, apas_rate, seed)?;
            eprintln!("braid: wrote the example inputs into {}", dir.display());
            Ok(())
        }
        Command::Lrb { which } => lrb::run(which),
        Command::Trips { which } => trips_cmd::run(which),
        Command::Lofar { which } => lofar_cmd::run(which),
        Command::Server {
            listen,
            workers,
            data,
            checkpoint_interval_ms,
            checkpoints,
            idle_ms,
            strict,
            max_subscriber_lag,
            slow_subscriber_ms,
            password,
            http,
            no_http,
            processes,
            process_index,
            hosts,
            connect_timeout,
        } => {
            let cluster = args::cluster(
                processes as usize,
                process_index as usize,
                hosts,
                connect_timeout,
            )?;
            let config = braid_server::ServerConfig {
                listen,
                workers: workers as usize,
                data: Some(data.clone()),
                idle: std::time::Duration::from_millis(idle_ms),
                strict,
                max_lag: max_subscriber_lag,
                password,
                slow: std::time::Duration::from_millis(slow_subscriber_ms),
                http: (!no_http).then_some(http),
                cluster,
                checkpoint_interval: Some(std::time::Duration::from_millis(checkpoint_interval_ms)),
                checkpoints: args::server_checkpoints(checkpoints.as_deref())?,
            };
            if config.cluster.as_ref().is_some_and(|c| c.process > 0) {
                eprintln!(
                    "braid server: process {process_index} of {processes}, following process 0"
                );
                braid_server::follow(&config, &crate::registry())?;
                return Ok(());
            }
            let running = braid_server::start(&config, &crate::registry())?;
            let r = &running.recovered;
            if r.statements > 0 {
                eprintln!(
                    "braid server: brought back {} statements and {} queries from {}",
                    r.statements,
                    r.queries,
                    data.display()
                );
            }
            for note in &r.notes {
                eprintln!("braid server: {note}");
            }
            eprintln!(
                "braid server listening on {} (psql -h {} -p {})",
                running.addr,
                running.addr.ip(),
                running.addr.port()
            );
            if let Some(at) = running.http {
                eprintln!(
                    "braid dashboard at http://{at}/ (metrics at /metrics, batches at POST /streams/<name>)"
                );
            }
            running.wait();
            Ok(())
        }
    }
}

/// The user code every command's statements may name: Braid's built-ins and, built with
/// the `python` feature (the default), the language of `CREATE FUNCTION ... LANGUAGE
/// python`.
pub(crate) fn registry() -> braid_plan::function::Registry {
    #[allow(unused_mut)]
    let mut r = braid_plan::function::Registry::with_builtins();
    #[cfg(feature = "python")]
    braid_python::register(&mut r);
    // Trip grouping's `tg` and the adaptive partitioners (`apq`, `akd`) need nothing
    // loaded; the static ones come with `--trips-history` (trips.rs).
    trips::app::register(
        &mut r,
        trips::tg::TgConfig::default(),
        None,
        trips::app::Adapt::default(),
    );
    r
}
