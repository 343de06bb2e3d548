//! The progress line of `--progress`, drawn with indicatif from the live counters the
//! library exposes (`braid_exec::session::Counters`); the library itself prints nothing.

use braid_exec::session::Counters;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A progress line drawn while it lives (on a terminal: redrawn in place; otherwise a
/// line a second).
pub struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    /// Starts drawing `counters` on standard error.
    pub fn start(counters: Arc<Counters>) -> Progress {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || draw(&counters, &flag));
        Progress {
            stop,
            thread: Some(thread),
        }
    }

    /// Counters and a progress line over them when `on`.
    pub fn maybe(on: bool) -> (Option<Arc<Counters>>, Option<Progress>) {
        if !on {
            return (None, None);
        }
        let counters = Arc::new(Counters::default());
        (Some(counters.clone()), Some(Progress::start(counters)))
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

fn line(c: &Counters, rate: u64) -> String {
    let (ein, eout) = (c.epoch_in.load(Relaxed), c.epoch_out.load(Relaxed));
    format!(
        "in {} ({rate}/s) out {} malformed {} epoch in {ein} out {eout} (lag {} epochs)",
        c.rows_in.load(Relaxed),
        c.rows_out.load(Relaxed),
        c.malformed.load(Relaxed),
        ein.saturating_sub(eout)
    )
}

fn draw(c: &Counters, stop: &AtomicBool) {
    let terminal = std::io::stderr().is_terminal();
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    let start = Instant::now();
    let (mut last_rows, mut last_at) = (0u64, Instant::now());
    let mut rate = 0;
    while !stop.load(Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        if last_at.elapsed() >= Duration::from_secs(1) {
            let rows = c.rows_in.load(Relaxed);
            rate = ((rows - last_rows.min(rows)) as f64 / last_at.elapsed().as_secs_f64()) as u64;
            (last_rows, last_at) = (rows, Instant::now());
            if !terminal {
                eprintln!(
                    "[{:>6.1}s] {}",
                    start.elapsed().as_secs_f64(),
                    line(c, rate)
                );
            }
        }
        if terminal {
            bar.set_message(line(c, rate));
            bar.tick();
        }
    }
    bar.finish_and_clear();
}
