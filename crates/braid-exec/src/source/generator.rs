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

impl Feed for GeneratorFeed {
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
