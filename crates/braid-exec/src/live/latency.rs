//! End-to-end latency of a live query, epoch by epoch: from the moment its source
//! closed an epoch (every row of it read, or a heartbeat moved time past it) to the
//! moment the query's output frontier passed it (the query is done with it: every
//! result it makes from it is written). A window's result carries the time of the
//! window's end, so an epoch inside a window that is still open completes without
//! waiting for the window: this is how long the query takes with an epoch's rows, not
//! how long a row waits for its window.

use std::collections::VecDeque;
use std::time::Duration;

/// Upper bounds (seconds) of the histogram's buckets, as Prometheus's `le`.
pub const BOUNDS: [f64; 14] = [
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0,
];

/// How many recent latencies the quantiles are taken over.
const RECENT: usize = 1024;

/// A query's latencies so far.
#[derive(Clone, Debug, Default)]
pub struct Latency {
    /// Epochs counted in each bucket (the last: above every bound).
    pub buckets: [u64; BOUNDS.len() + 1],
    /// Epochs measured.
    pub count: u64,
    /// Their latencies added up, in seconds.
    pub sum: f64,
    recent: VecDeque<f64>,
}

impl Latency {
    /// Counts one epoch's latency.
    pub fn record(&mut self, d: Duration) {
        let s = d.as_secs_f64();
        let k = BOUNDS.iter().position(|&b| s <= b).unwrap_or(BOUNDS.len());
        self.buckets[k] += 1;
        self.count += 1;
        self.sum += s;
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(s);
    }

    /// The `q` quantile (0..1) of the recent latencies, in seconds.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.recent.is_empty() {
            return None;
        }
        let mut v: Vec<f64> = self.recent.iter().copied().collect();
        v.sort_by(f64::total_cmp);
        let k = ((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1;
        Some(v[k])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_and_quantiles() {
        let mut l = Latency::default();
        for ms in 1..=100 {
            l.record(Duration::from_millis(ms));
        }
        assert_eq!(l.count, 100);
        assert_eq!(l.buckets[0], 1); // 1 ms
        assert_eq!(l.buckets[3], 5); // 6..=10 ms
        assert_eq!(l.quantile(0.5), Some(0.05));
        assert_eq!(l.quantile(0.99), Some(0.099));
        assert!((l.sum - 5.05).abs() < 1e-9);
    }
}
