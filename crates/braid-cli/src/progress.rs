//! The progress line, drawn with indicatif from the live counters the library exposes
//! (`braid_exec::session::Counters`); the library itself prints nothing.
//!
//! A bar when the number of input rows is known, a spinner otherwise: rows in and their
//! rate, rows out, how far a paced source is behind its schedule, malformed, late and
//! skipped rows. Drawn on a terminal; with `--progress` and standard error not a
//! terminal, a line a second instead.

use braid_exec::session::Counters;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A progress line drawn while it lives.
pub struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    /// Starts drawing `counters` on standard error, as a bar up to `total` input rows
    /// when known.
    pub fn start(counters: Arc<Counters>, total: Option<u64>) -> Progress {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || draw(&counters, total, &flag));
        Progress {
            stop,
            thread: Some(thread),
        }
    }

    /// Counters and a progress line over them: when `asked` (`--progress`), or when
    /// standard error is a terminal and the query's output does not go to the same
    /// screen (standard output is not a terminal).
    pub fn maybe(asked: bool, total: Option<u64>) -> (Option<Arc<Counters>>, Option<Progress>) {
        let auto = std::io::stderr().is_terminal() && !std::io::stdout().is_terminal();
        Progress::only_if(asked || auto, total)
    }

    /// Counters and a progress line over them when `on`.
    pub fn only_if(on: bool, total: Option<u64>) -> (Option<Arc<Counters>>, Option<Progress>) {
        if !on {
            return (None, None);
        }
        let counters = Arc::new(Counters::default());
        (
            Some(counters.clone()),
            Some(Progress::start(counters, total)),
        )
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The figures after the rows in: rate, rows out, latency of the last second, lag,
/// malformed, late, skipped, shed, and a Kafka source's consumer lag.
fn message(c: &Counters, rate: u64, latency: Option<&str>) -> String {
    let mut s = format!("{rate} rows/s, out {}", c.rows_out.load(Relaxed));
    if let Some(l) = latency {
        s.push_str(&format!(", latency {l}"));
    }
    if let Some(behind) = c.behind() {
        s.push_str(&format!(", {:.1} s behind schedule", behind.as_secs_f64()));
    }
    for (what, n) in [
        ("malformed", c.malformed.load(Relaxed)),
        ("late", c.late()),
        ("skipped on faults", c.faults.load(Relaxed)),
        ("shed (load shedding)", c.shed.load(Relaxed)),
        ("records behind in Kafka", c.kafka_lag.load(Relaxed)),
    ] {
        if n > 0 {
            s.push_str(&format!(", {n} {what}"));
        }
    }
    s
}

/// A latency as the progress line writes it.
fn short(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms < 10.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.0} ms")
    }
}

fn draw(c: &Counters, total: Option<u64>, stop: &AtomicBool) {
    let terminal = std::io::stderr().is_terminal();
    let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::stderr());
    let template = match total {
        Some(_) => "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} rows in, {msg}",
        None => "{spinner} [{elapsed_precise}] {pos} rows in, {msg}",
    };
    bar.set_style(
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let start = Instant::now();
    let (mut last_rows, mut last_at) = (0u64, Instant::now());
    let mut rate = 0;
    // End-to-end latency over the last second: the histogram's counts a second ago.
    let mut seen = None;
    let mut latency: Option<String> = None;
    while !stop.load(Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        let rows = c.rows_in.load(Relaxed);
        if last_at.elapsed() >= Duration::from_secs(1) {
            rate = ((rows - last_rows.min(rows)) as f64 / last_at.elapsed().as_secs_f64()) as u64;
            (last_rows, last_at) = (rows, Instant::now());
            if let Some(l) = c.latency.get() {
                let now = l.end_to_end.read();
                let last = now.since(seen.as_ref().unwrap_or(&Default::default()));
                latency = last.quantile(0.99).map(|p99| {
                    let p50 = last.quantile(0.5).unwrap_or(p99);
                    format!("p50 {} p99 {}", short(p50), short(p99))
                });
                seen = Some(now);
            }
            if !terminal {
                eprintln!(
                    "[{:>6.1}s] {rows} rows in, {}",
                    start.elapsed().as_secs_f64(),
                    message(c, rate, latency.as_deref())
                );
            }
        }
        if terminal {
            bar.set_position(rows);
            bar.set_message(message(c, rate, latency.as_deref()));
        }
    }
    bar.finish_and_clear();
}
