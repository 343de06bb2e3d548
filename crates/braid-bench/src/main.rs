//! `braid-bench`: Braid's benchmarks (see the library's documentation for each one).
//!
//! ```text
//! cargo run --release -p braid-bench -- split --quick
//! ```

use anyhow::Result;
use braid_bench::{
    checkpoints, fuzz, latency, parse, peer, placement, rate, retention, server, split, sql, trips,
    tune, udf, vectors,
};
use clap::{Parser, Subcommand};

/// The `braid` binary's allocator and its settings.
#[path = "../../braid-cli/src/allocator.rs"]
mod allocator;

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
    /// A differential query fuzzer: random data and queries on Braid and on DuckDB.
    Fuzz(fuzz::FuzzArgs),
}

fn main() {
    allocator::keep_freed_memory();
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
        Command::Fuzz(a) => fuzz::run(a),
    }
}
