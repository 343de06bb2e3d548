//! The input files of the query examples in `examples/` (`braid examples-data DIR`),
//! deterministic for a seed, at any size (the small set in `examples/data` is made by
//! this with `--rows 400`; the query-language benchmark makes larger ones).

use std::io::{Result, Write};
use std::path::Path;

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn file(dir: &Path, name: &str) -> Result<std::io::BufWriter<std::fs::File>> {
    let p = dir.join(name);
    let f = std::fs::File::create(&p).map_err(|e| in_context(e, "creating", &p))?;
    Ok(std::io::BufWriter::new(f))
}

/// `error` with what was being done to which path.
fn in_context(error: std::io::Error, doing: &str, path: &Path) -> std::io::Error {
    std::io::Error::new(error.kind(), format!("{doing} {}: {error}", path.display()))
}

/// Writes every example's input into `dir`: `rows` call records (and half as many text
/// messages), as many StreamAPAS
/// tuples per generator (`apas_rate` tuples per minute, times in ms), samples, and four
/// log files of `rows / 4` lines.
pub fn write(dir: &Path, rows: u64, apas_rate: f64, seed: u64) -> Result<()> {
    std::fs::create_dir_all(dir.join("logs")).map_err(|e| in_context(e, "creating", dir))?;
    let mut rng = Rng(seed);
    // Call detail records: 2,000 subscribers, a few very active; durations skewed.
    let mut w = file(dir, "calls.csv")?;
    writeln!(w, "caller,callee,start,dur")?;
    let mut t = 0u64;
    for _ in 0..rows {
        t += rng.below(3);
        let caller = if rng.below(10) == 0 {
            rng.below(20)
        } else {
            rng.below(2000)
        };
        let callee = rng.below(2000);
        let dur = (rng.below(60) * rng.below(60)) / 4 + rng.below(30);
        writeln!(w, "{caller},{callee},{t},{dur}")?;
    }
    w.flush()?;
    // Text messages of the same subscribers over the same time span.
    let mut w = file(dir, "texts.csv")?;
    writeln!(w, "sender,receiver,start")?;
    let mut t = 0u64;
    for _ in 0..rows / 2 {
        t += rng.below(5);
        writeln!(w, "{},{},{t}", rng.below(2000), rng.below(2000))?;
    }
    w.flush()?;
    // The watch list: every 40th subscriber, with a risk score.
    let mut w = file(dir, "watchlist.csv")?;
    writeln!(w, "number,risk")?;
    for n in (0..2000).step_by(40) {
        writeln!(w, "{n},{}", 1 + n % 5)?;
    }
    w.flush()?;
    // StreamAPAS micro-benchmark: two generators, values uniform in [0, 100].
    for (name, col) in [("gen1.csv", "value1"), ("gen2.csv", "value2")] {
        let mut w = file(dir, name)?;
        writeln!(w, "time,{col}")?;
        for i in 0..rows {
            let time = (i as f64 * 60_000.0 / apas_rate.max(1.0)) as u64;
            writeln!(w, "{time},{}", rng.below(101))?;
        }
        w.flush()?;
    }
    // Samples for the FFT-shaped example: a sine of period 8 plus noise.
    let mut w = file(dir, "samples.csv")?;
    writeln!(w, "idx,t,x")?;
    for i in 0..rows {
        let x =
            (std::f64::consts::TAU * i as f64 / 8.0).cos() * 10.0 + rng.below(100) as f64 / 100.0;
        writeln!(w, "{i},{i},{x:.3}")?;
    }
    w.flush()?;
    // Logs for map-reduce grep.
    let levels = ["INFO", "INFO", "INFO", "WARN", "ERROR", "DEBUG"];
    for part in 0..4 {
        let mut w = file(dir, &format!("logs/part-{part}.log"))?;
        for i in 0..rows / 4 {
            let level = levels[rng.below(levels.len() as u64) as usize];
            writeln!(
                w,
                "{part}-{i} {level} request {} took {} ms",
                rng.below(100_000),
                rng.below(900)
            )?;
        }
        w.flush()?;
    }
    Ok(())
}
