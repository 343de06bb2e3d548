//! What a worker's `Map` runs next among its partitions with rows ready
//! ([`Scheduler`], after StreamAPAS's operator scheduling and Babcock et al.'s Chain).
//!
//! A Map takes one complete time (an epoch, or a tick under a latency constraint) at a
//! time. Its rows wait in per-partition lists; the policy picks which partition runs a
//! slice of them next. A partition's rows always run in serial order, its end of epoch
//! after them, and a time's work all before the next time's, so every policy gives the
//! same output and checkpoints hold the same state; what changes is which rows wait,
//! and how long. Every quantum of work the Map hands on what it made and yields, so the
//! operators after it (merges, sinks, later stages) run in between.

use braid_plan::plan::Scheduler;
use std::time::Duration;

/// Rows of one partition run at most in one go (a slice), so the policy is asked
/// again at least this often.
pub(crate) const SLICE: usize = 64;

/// How long a Map runs before it yields: none (it runs all it has, today's
/// throughput-first way) for FIFO without a latency constraint; under one, a tenth of
/// it (within 100 us and 5 ms); otherwise 1 ms.
pub(crate) fn quantum(policy: Scheduler, constraint: Option<Duration>) -> Option<Duration> {
    match (policy, constraint) {
        (Scheduler::Fifo, None) => None,
        (_, Some(c)) => Some((c / 10).clamp(Duration::from_micros(100), Duration::from_millis(5))),
        (_, None) => Some(Duration::from_millis(1)),
    }
}

/// Chain-flush's threshold: oldest row first once the oldest waiting row is older
/// than half the constraint (half of 100 ms without one).
pub(crate) fn flush_after(constraint: Option<Duration>) -> u64 {
    constraint.unwrap_or(Duration::from_millis(100)).as_nanos() as u64 / 2
}

/// Each partition's measured cost per row and selectivity (rows out per row in), as
/// moving averages over its slices: Chain's priorities.
#[derive(Default)]
pub(crate) struct Rates {
    /// Per local partition: (ns per row, rows out per row), once measured.
    of: Vec<Option<(f64, f64)>>,
}

/// Weight of the newest slice in a moving average.
const NEWEST: f64 = 0.25;

impl Rates {
    pub(crate) fn new(partitions: usize) -> Rates {
        Rates {
            of: vec![None; partitions],
        }
    }

    /// Notes a slice of partition `k`: `rows` in, `made` out, in `ns`.
    pub(crate) fn note(&mut self, k: usize, rows: usize, made: usize, ns: u64) {
        if rows == 0 {
            return;
        }
        let (c, s) = (ns as f64 / rows as f64, made as f64 / rows as f64);
        self.of[k] = Some(match self.of[k] {
            None => (c, s),
            Some((c0, s0)) => (c0 + NEWEST * (c - c0), s0 + NEWEST * (s - s0)),
        });
    }

    /// Chain's priority of partition `k`: rows it removes per ns, `(1 - selectivity) /
    /// cost` (the slope of its progress chart); unmeasured partitions first, so that
    /// they are measured.
    pub(crate) fn priority(&self, k: usize) -> f64 {
        match self.of[k] {
            None => f64::INFINITY,
            Some((c, s)) => (1.0 - s) / c.max(1.0),
        }
    }
}

/// One partition's work left in the time being run, as the policy sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Waiting {
    /// Sequence number of its next row (`u64::MAX`: only its end of epoch is left).
    pub next_seq: u64,
    /// When its next row came in (`qos::UNSTAMPED` when unknown).
    pub next_born: u64,
    /// Rows left.
    pub rows: usize,
}

/// The rows of a slice for a quantum: [`SLICE`], one with a zero quantum (a test's: it
/// yields after every row).
pub(crate) fn slice(quantum: Option<Duration>) -> usize {
    match quantum {
        Some(q) if q.is_zero() => 1,
        _ => SLICE,
    }
}

/// The policy's choice: partition `k` (an index into `waiting`) runs its next `n`
/// rows (at most `slice`; 0: only its end of epoch), or None when nothing waits.
pub(crate) fn pick(
    policy: Scheduler,
    slice: usize,
    waiting: &[Option<Waiting>],
    rr: &mut usize,
    rates: &Rates,
    now_ns: u64,
    flush_after_ns: u64,
) -> Option<(usize, usize)> {
    let live = || {
        waiting
            .iter()
            .enumerate()
            .filter_map(|(k, w)| w.map(|w| (k, w)))
    };
    // Oldest row first: the smallest next sequence number (the caller bounds the slice
    // by [`fifo_bound`]).
    let fifo = || live().min_by_key(|(k, w)| (w.next_seq, *k));
    let (k, w) = match policy {
        Scheduler::Fifo => fifo()?,
        Scheduler::RoundRobin => {
            let n = waiting.len();
            let k = (0..n)
                .map(|i| (*rr + i) % n)
                .find(|&k| waiting[k].is_some())?;
            *rr = (k + 1) % n;
            (k, waiting[k]?)
        }
        Scheduler::Chain | Scheduler::ChainFlush => {
            let oldest = live()
                .map(|(_, w)| w.next_born)
                .filter(|&b| b != crate::qos::UNSTAMPED)
                .min();
            let flush = policy == Scheduler::ChainFlush
                && oldest.is_some_and(|b| now_ns.saturating_sub(b) > flush_after_ns);
            match flush {
                true => fifo()?,
                false => live().max_by(|(a, wa), (b, wb)| {
                    rates
                        .priority(*a)
                        .total_cmp(&rates.priority(*b))
                        // Ties: the older row first.
                        .then(wb.next_seq.cmp(&wa.next_seq))
                        .then(b.cmp(a))
                })?,
            }
        }
    };
    Some((k, w.rows.min(slice)))
}

/// FIFO's bound on a slice: the smallest next sequence number of the partitions other
/// than `k` (rows of `k` up to it may run before any of theirs).
pub(crate) fn fifo_bound(policy: Scheduler, waiting: &[Option<Waiting>], k: usize) -> u64 {
    match policy {
        Scheduler::Fifo => waiting
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != k)
            .filter_map(|(_, w)| w.map(|w| w.next_seq))
            .min()
            .unwrap_or(u64::MAX),
        _ => u64::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(next_seq: u64, next_born: u64, rows: usize) -> Option<Waiting> {
        Some(Waiting {
            next_seq,
            next_born,
            rows,
        })
    }

    #[test]
    fn fifo_runs_the_oldest_row_first() {
        let waiting = [w(9, 0, 3), None, w(4, 0, 500), w(7, 0, 1)];
        let rates = Rates::new(4);
        let (k, n) = pick(Scheduler::Fifo, SLICE, &waiting, &mut 0, &rates, 0, 0).unwrap();
        assert_eq!((k, n), (2, SLICE));
        assert_eq!(fifo_bound(Scheduler::Fifo, &waiting, 2), 7);
        assert_eq!(fifo_bound(Scheduler::RoundRobin, &waiting, 2), u64::MAX);
    }

    #[test]
    fn round_robin_takes_partitions_in_turn() {
        let waiting = [w(9, 0, 3), None, w(4, 0, 5), w(7, 0, 1)];
        let rates = Rates::new(4);
        let mut rr = 0;
        let order: Vec<usize> = (0..5)
            .map(|_| {
                pick(
                    Scheduler::RoundRobin,
                    SLICE,
                    &waiting,
                    &mut rr,
                    &rates,
                    0,
                    0,
                )
                .unwrap()
                .0
            })
            .collect();
        assert_eq!(order, [0, 2, 3, 0, 2]);
        assert!(pick(
            Scheduler::RoundRobin,
            SLICE,
            &[None, None],
            &mut rr,
            &rates,
            0,
            0
        )
        .is_none());
    }

    #[test]
    fn chain_runs_what_removes_rows_fastest_and_measures_the_unmeasured_first() {
        let waiting = [w(1, 0, 10), w(2, 0, 10), w(3, 0, 10)];
        let mut rates = Rates::new(3);
        // Partition 0: keeps every row (selectivity 1): no progress at all.
        rates.note(0, 100, 100, 1_000);
        // Partition 1: drops 90% at 100 ns a row.
        rates.note(1, 100, 10, 10_000);
        let (k, _) = pick(Scheduler::Chain, SLICE, &waiting, &mut 0, &rates, 0, 0).unwrap();
        assert_eq!(k, 2, "unmeasured first");
        rates.note(2, 100, 50, 100_000);
        // 1: 0.9 / 100 ns; 2: 0.5 / 1000 ns; 0: 0.
        let (k, _) = pick(Scheduler::Chain, SLICE, &waiting, &mut 0, &rates, 0, 0).unwrap();
        assert_eq!(k, 1);
        let (k, _) = pick(
            Scheduler::Chain,
            SLICE,
            &[w(1, 0, 1), None, w(3, 0, 1)],
            &mut 0,
            &rates,
            0,
            0,
        )
        .unwrap();
        assert_eq!(k, 2);
    }

    #[test]
    fn chain_flush_turns_to_the_oldest_row_when_it_waits_too_long() {
        let mut rates = Rates::new(2);
        rates.note(0, 100, 100, 1_000);
        rates.note(1, 100, 0, 1_000);
        // Partition 0 holds the oldest row, born at 1_000 ns.
        let waiting = [w(1, 1_000, 10), w(2, 5_000, 10)];
        let pick_at = |now| {
            pick(
                Scheduler::ChainFlush,
                SLICE,
                &waiting,
                &mut 0,
                &rates,
                now,
                10_000,
            )
        };
        assert_eq!(pick_at(6_000).unwrap().0, 1, "within the threshold: Chain");
        assert_eq!(pick_at(20_000).unwrap().0, 0, "beyond it: oldest first");
        let unstamped = [
            w(1, crate::qos::UNSTAMPED, 10),
            w(2, crate::qos::UNSTAMPED, 10),
        ];
        assert_eq!(
            pick(
                Scheduler::ChainFlush,
                SLICE,
                &unstamped,
                &mut 0,
                &rates,
                u64::MAX,
                0
            )
            .unwrap()
            .0,
            1
        );
    }

    #[test]
    fn quanta() {
        assert_eq!(quantum(Scheduler::Fifo, None), None);
        assert_eq!(
            quantum(Scheduler::Fifo, Some(Duration::from_millis(10))),
            Some(Duration::from_millis(1))
        );
        assert_eq!(
            quantum(Scheduler::Chain, Some(Duration::from_micros(50))),
            Some(Duration::from_micros(100))
        );
        assert_eq!(
            quantum(Scheduler::RoundRobin, None),
            Some(Duration::from_millis(1))
        );
    }
}
