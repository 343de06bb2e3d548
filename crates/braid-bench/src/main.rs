//! `braid-bench`: Braid's benchmarks (see the library's documentation for each one).
//!
//! ```text
//! cargo run --release -p braid-bench -- split --quick
//! ```

use anyhow::Result;
use braid_bench::{
    checkpoints, latency, parse, peer, placement, rate, retention, server, split, sql, trips, tune,
    udf, vectors,
};
use clap::{Parser, Subcommand};

/// mimalloc, as in the `braid` binary, so that the numbers are those of the shipped
/// allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's option number of `purge_delay` (`mi_option_purge_delay` in the
/// `mi_option_e` enum of mimalloc v3's `mimalloc.h`, which `libmimalloc-sys` builds but
/// does not name).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// mimalloc's option number of `arena_eager_commit` (as [`MI_OPTION_PURGE_DELAY`]).
const MI_OPTION_ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// Keeps freed memory 10 s before giving it back to the kernel (mimalloc's default is
/// 1 s), unless `MIMALLOC_PURGE_DELAY` says otherwise. Windows of rows are made on one
/// thread and freed on another all the time; pages given back after a second were
/// faulted in and zeroed again (`clear_page_erms`, a tenth of a Linear Road rating's
/// samples). Measured on the L = 512 rating: 54 -> 46 CPU s, peak RSS +5%.
///
/// And commits arena memory as it is used, not eagerly in large (transparent huge page)
/// runs, unless `MIMALLOC_ARENA_EAGER_COMMIT` says otherwise: on this kind of VM a
/// fresh huge page is zeroed (and backed by the host) whole. The L = 512 rating at
/// speed 1000 (one pair each, kernel CPU s): 26 -> 7, 24 -> 6 in one hour, 26 -> 17
/// and 18 in a slower one; the peer benchmark's `hop` on 2 workers 0.63 -> 0.48 s
/// (medians of 7), peak RSS 66 -> 48 MB.
fn keep_freed_memory() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one of mimalloc's options (a plain integer it reads when it
        // next purges); any value is valid.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 10_000) };
    }
}

/// Sets `arena_eager_commit` (see [`keep_freed_memory`]) before anything is allocated:
/// mimalloc reserves its first arena at the first allocation, before `main`.
#[used]
#[link_section = ".init_array"]
static COMMIT_AS_USED: extern "C" fn() = commit_as_used;

extern "C" fn commit_as_used() {
    unsafe extern "C" {
        fn getenv(name: *const std::ffi::c_char) -> *mut std::ffi::c_char;
    }
    // SAFETY: getenv reads the environment (nothing writes it yet) and allocates
    // nothing; the option is a plain integer mimalloc reads when it makes an arena.
    unsafe {
        if getenv(c"MIMALLOC_ARENA_EAGER_COMMIT".as_ptr()).is_null() {
            libmimalloc_sys::mi_option_set(MI_OPTION_ARENA_EAGER_COMMIT, 0);
        }
    }
}

#[derive(Parser)]
#[command(
    name = "braid-bench",
    version,
    about = "Braid's benchmarks: write CSV, markdown and SVG plots under docs/benchmarks/"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Split strategies vs. q and broadcast fraction, 1 and 2 workers, vs. a baseline loop.
    Split(split::SplitArgs),
    /// The query-language examples at scale and the StreamAPAS latencies.
    Sql(sql::SqlArgs),
    /// Partitions placed by measured cost (`--calibrate`) vs. `p % workers`.
    Placement(placement::PlacementArgs),
    /// Paper V heuristics: W by doubling, the single-splitter rate and p (eq. 6).
    Tune(tune::TuneArgs),
    /// Linear Road sustained-peak rating: candidate L values at peak load in real time.
    Rate(rate::RateArgs),
    /// Raw CSV parse speed of a file: Braid's CSV reader alone, no dataflow.
    Parse(parse::ParseArgs),
    /// The running system: ingest, fan-out to subscribers, latency, memory per query.
    Server(server::ServerArgs),
    /// Latency constraints: latency and throughput vs rate, a rising load, StreamAPAS.
    Latency(latency::LatencyArgs),
    /// A stream's retention: ingest rate, memory and file size with and without it.
    Retention(retention::RetentionArgs),
    /// Checkpoint size and time against state size (Linear Road, 1-8 expressways).
    Checkpoints(checkpoints::CheckpointsArgs),
    /// The same windowed queries on Braid and on Apache Flink (PyFlink), side by side.
    Peer(peer::PeerArgs),
    /// A scalar function's cost per row: Rust against Python (row by row, batched,
    /// vectorized).
    Udf(udf::UdfArgs),
    /// Trip grouping (Paper III): savings, throughput and balance per partitioner and q.
    Trips(trips::TripsArgs),
    /// Numeric vector streams (LOFAR-like): FFT queries against a loop over the same FFT.
    Vectors(vectors::VectorsArgs),
}

fn main() {
    keep_freed_memory();
    if let Err(e) = run() {
        eprintln!("braid-bench: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    match Cli::parse().command {
        Command::Split(a) => split::run(a),
        Command::Sql(a) => sql::run(a),
        Command::Placement(a) => placement::run(a),
        Command::Tune(a) => tune::run(a),
        Command::Rate(a) => rate::run(a),
        Command::Parse(a) => parse::run(a),
        Command::Server(a) => server::run(a),
        Command::Latency(a) => latency::run(a),
        Command::Retention(a) => retention::run(a),
        Command::Checkpoints(a) => checkpoints::run(a),
        Command::Peer(a) => peer::run(a),
        Command::Udf(a) => udf::run(a),
        Command::Trips(a) => trips::run(a),
        Command::Vectors(a) => vectors::run(a),
    }
}
