//! The built-in synthetic generator: LRB-shaped tuples, any rate, key count and
//! broadcast fraction. Tuple `i` is a pure function of `(seed, i)`, and window `k`
//! (tuples `k*W .. (k+1)*W`, cut at epoch boundaries) is made by worker `k % peers`,
//! so every worker count produces the same stream.

use super::{Feed, Next, Rejects};
use crate::error::Result;
use braid_plan::batch::{Batch, RowKey};
use braid_plan::plan::{GeneratorSpec, Source};

/// Mixes 64 bits (splitmix64's finaliser).
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Writes the 15 fields of tuple `i` into `f`.
#[inline]
pub fn tuple(spec: &GeneratorSpec, i: u64, f: &mut [i64; 15]) {
    let h = mix64(spec.seed ^ mix64(i));
    let time = (i as f64 / spec.rate) as i64;
    let u = (h >> 11) as f64 / (1u64 << 53) as f64;
    let keys = spec.keys.max(1) as u64;
    let vid = ((h >> 7) % (keys * 1000)) as i64;
    if u < spec.broadcast {
        *f = [
            2, time, vid, -1, -1, -1, -1, -1, -1, i as i64, -1, -1, -1, -1, -1,
        ];
    } else {
        let h2 = mix64(h);
        let xway = (h2 % keys) as i64;
        let pos = ((h2 >> 20) % 528_000) as i64;
        let lane = ((h2 >> 40) % 5) as i64;
        let dir = ((h2 >> 45) & 1) as i64;
        let spd = ((h2 >> 50) % 101) as i64;
        *f = [
            0,
            time,
            vid,
            spd,
            xway,
            lane,
            dir,
            pos / 5280,
            pos,
            -1,
            -1,
            -1,
            -1,
            -1,
            -1,
        ];
    }
}

/// Generates the windows of one worker.
pub struct GeneratorFeed {
    spec: GeneratorSpec,
    window: u64,
    epoch_len: u64,
    name: String,
    /// Next window index this worker makes.
    k: u64,
    /// Next tuple within the current window (for windows cut at epoch boundaries).
    i: u64,
    peers: u64,
}

impl GeneratorFeed {
    /// The feed of worker `index` of `peers`.
    pub fn new(spec: GeneratorSpec, source: &Source, index: usize, peers: usize) -> GeneratorFeed {
        let window = source.window as u64;
        GeneratorFeed {
            spec,
            window,
            epoch_len: source.epoch,
            name: source.name.clone(),
            k: index as u64,
            i: index as u64 * window,
            peers: peers as u64,
        }
    }
}

impl GeneratorFeed {
    /// [`GeneratorFeed::new`], going on after epoch `after` (the resume point of a
    /// checkpoint): the tuples up to it, a prefix since times only grow, are not made
    /// again, and worker 0 counts them as read.
    pub fn resumed(
        spec: GeneratorSpec,
        source: &Source,
        index: usize,
        peers: usize,
        after: u64,
        counters: &super::Counters,
    ) -> GeneratorFeed {
        let mut g = GeneratorFeed::new(spec, source, index, peers);
        let epoch_len = g.epoch_len.max(1);
        let epoch_of = |i: u64| {
            let mut f = [0i64; 15];
            tuple(&spec, i, &mut f);
            f[1].max(0) as u64 / epoch_len
        };
        // The first tuple of an epoch after `after`.
        let (mut lo, mut hi) = (0, spec.tuples);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match epoch_of(mid) <= after {
                true => lo = mid + 1,
                false => hi = mid,
            }
        }
        // This worker's first window that holds a tuple from there on.
        let window = g.window.max(1);
        let j0 = lo / window;
        g.k = j0 + (g.k + g.peers - j0 % g.peers) % g.peers;
        g.i = (g.k * window).max(lo);
        if index == 0 {
            super::Counters::add(&counters.rows_in, lo);
        }
        g
    }
}

/// A generator's resume point: the epoch it resumes after.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct After {
    pub after: u64,
}

impl Feed for GeneratorFeed {
    fn resume_after(&self, closing: u64) -> Option<Vec<u8>> {
        serde_json::to_vec(&After { after: closing }).ok()
    }

    fn next(&mut self) -> Result<Next> {
        let end = ((self.k + 1) * self.window).min(self.spec.tuples);
        if self.i >= end {
            self.k += self.peers;
            self.i = self.k * self.window;
            if self.i >= self.spec.tuples {
                return Ok(Next::Done);
            }
            return self.next();
        }
        let mut f = [0i64; 15];
        tuple(&self.spec, self.i, &mut f);
        let epoch = f[1] as u64 / self.epoch_len;
        // Times of this epoch lie in [start, next): compared, not divided, per row.
        let (start, next) = (epoch * self.epoch_len, (epoch + 1) * self.epoch_len);
        let mut out = Batch::with_capacity(15, (end - self.i) as usize);
        while self.i < end {
            tuple(&self.spec, self.i, &mut f);
            if !(start..next).contains(&(f[1] as u64)) {
                break;
            }
            out.push_ints(
                RowKey {
                    seq: self.i,
                    lane: 0,
                },
                &f,
            );
            self.i += 1;
        }
        Ok(Next::Window(epoch, out))
    }

    fn rejects(&mut self) -> Rejects {
        Rejects {
            source: self.name.clone(),
            ..Rejects::default()
        }
    }
}

/// All tuples of a generator spec as one batch (for the reference interpreter).
pub fn materialize(spec: &GeneratorSpec) -> Batch {
    let mut out = Batch::with_capacity(15, spec.tuples as usize);
    let mut f = [0i64; 15];
    for i in 0..spec.tuples {
        tuple(spec, i, &mut f);
        out.push_ints(RowKey { seq: i, lane: 0 }, &f);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Counters;
    use braid_plan::plan::{Plan, SourceSpec};
    use std::sync::atomic::Ordering;

    /// Every tuple `(seq, epoch)` the feeds of `peers` workers make.
    fn made(mut feeds: Vec<GeneratorFeed>) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        for f in &mut feeds {
            while let Next::Window(e, b) = f.next().expect("generator") {
                out.extend((0..b.len()).map(|i| (b.key(i).seq, e)));
            }
        }
        out.sort_unstable();
        out
    }

    #[test]
    fn a_resumed_generator_makes_exactly_the_tuples_after_its_epoch() {
        for (tuples, rate, epoch, window, peers) in [
            (5000, 100.0, 1, 64, 1),
            (5000, 100.0, 1, 64, 3),
            (4321, 7.5, 4, 10, 2),
            (999, 1000.0, 1, 1000, 4),
            (1000, 3.0, 10, 7, 5),
        ] {
            let spec = GeneratorSpec {
                tuples,
                rate,
                keys: 4,
                broadcast: 0.1,
                seed: 7,
            };
            let mut source =
                Plan::source("g", SourceSpec::Generator(spec), GeneratorSpec::schema())
                    .leaf_source()
                    .clone();
            source.epoch = epoch;
            source.window = window;
            let all = made(
                (0..peers)
                    .map(|i| GeneratorFeed::new(spec, &source, i, peers))
                    .collect(),
            );
            assert_eq!(all.len() as u64, tuples);
            let last = all.last().map_or(0, |t| t.1);
            for after in [
                0,
                1,
                last / 3,
                last / 2,
                last.saturating_sub(1),
                last,
                last + 1,
            ] {
                let counters = Counters::default();
                let again = made(
                    (0..peers)
                        .map(|i| GeneratorFeed::resumed(spec, &source, i, peers, after, &counters))
                        .collect(),
                );
                let want: Vec<(u64, u64)> = all.iter().copied().filter(|t| t.1 > after).collect();
                assert_eq!(
                    again, want,
                    "{tuples} tuples, {peers} workers, after {after}"
                );
                assert_eq!(
                    counters.rows_in.load(Ordering::Relaxed),
                    tuples - want.len() as u64,
                    "the tuples before are counted once"
                );
            }
        }
    }
}
