//! Sustained-peak rating (doc section 7): L expressways at peak load from the first
//! second, replayed in real time for `warmup + minutes` minutes; outputs of the warm-up
//! are produced but not scored; every later output must be on time, and the sampled
//! copies must validate answer by answer.
//!
//! The load is `base_xways` generated expressways replicated into `L / base_xways`
//! copies by renumbering: copy `c` has expressways `x + c * base_xways`, vehicle ids
//! `v + c * stride` (the stride a power of ten above the base's vehicle count, see
//! [`vid_stride`]) and query ids `q * copies + c`. Copies are independent worlds
//! (vehicles re-enter only within their copy), so the expected answers of copy `c` are
//! the base's expected answers renumbered: the independent validator computes them
//! once on the base and compares every sampled copy's outputs with them. The toll
//! history is computed, not stored ([`TollHistory::generated`]).

use crate::app::{self, LrOptions, OutputSink};
use crate::generate::{generate, segment_history, toll_row, GenConfig, Profile};
use crate::history::{Replicas, SegmentHistory, TollHistory};
use crate::record::{Input, Output};
use crate::validate::{compare, expected_outputs, Options, Report, SegmentTable, TollTable};
use braid_plan::batch::{Batch, RowKey};
use braid_plan::function::{NativeSource, Registry, SourceFactory, SourceNext};
use braid_plan::plan::{SourceSpec, Strategy};
use braid_plan::types::Schema;
use std::sync::mpsc::{sync_channel, Receiver, TryRecvError};
use std::sync::Arc;

/// Vehicle-id offset between copies for a base of `vehicles` vehicles (ids
/// `0..vehicles`): the least power of ten above the largest id, so a copy's ids read
/// as the copy's number and the base id, and stay within Linear Road's 32 bits as long
/// as `copies * stride` does (a fixed 10,000,000 put 14% of the vehicles of L = 2,000
/// beyond them, each an entry of the index's side map).
pub fn vid_stride(vehicles: u64) -> i64 {
    let mut s = 10i64;
    while (s as u64) < vehicles {
        s *= 10;
    }
    s
}

/// Name of the replicated generator source.
pub const SOURCE: &str = "lr_replicated";

/// What to rate with.
#[derive(Clone, Debug)]
pub struct RateConfig {
    /// Generated expressways that are replicated.
    pub base_xways: u32,
    /// Generator seed.
    pub seed: u64,
    /// Unscored warm-up minutes.
    pub warmup_minutes: u32,
    /// Scored minutes (W).
    pub minutes: u32,
    /// Worker threads.
    pub workers: usize,
    /// Split strategy.
    pub strategy: Strategy,
    /// Logical partitions (expressway x goes to x mod q); `None`: [`default_parts`].
    pub parts: Option<u32>,
    /// Balance merge fan-in.
    pub fanin: Option<u32>,
    /// Copies validated answer by answer (the first and the last are always among them).
    pub sample_copies: u32,
    /// Replay speed (1 = real time; other values only for trying the harness out).
    pub speed: f64,
    /// Reads this process's CPU seconds (all threads), for [`Candidate::cpu_seconds`]
    /// and the cores in [`Candidate::load`]. The harness reads no operating-system
    /// counters itself; the default reads 0.
    pub process_cpu: fn() -> f64,
    /// Reads this process's resident memory (MB), for [`Candidate::rss`]; the default
    /// reads 0.
    pub process_rss: fn() -> f64,
}

impl Default for RateConfig {
    fn default() -> RateConfig {
        RateConfig {
            base_xways: 4,
            seed: 1,
            warmup_minutes: 5,
            minutes: 5,
            workers: 2,
            strategy: Strategy::Autosplit,
            parts: None,
            fanin: None,
            sample_copies: 2,
            speed: 1.0,
            process_cpu: || 0.0,
            process_rss: || 0.0,
        }
    }
}

/// Partitions of a rating of L expressways when none are given: one per expressway up
/// to [`PARTS`]. More buy no parallelism on a few workers, and each costs every type-2
/// request (broadcast to all partitions) a vehicle lookup and a partial: at L = 512 on
/// 2 workers, 128 partitions took 60.3 CPU s for a 1 + 1 minute rating, 16 took 56.6.
pub fn default_parts(l: u32) -> u32 {
    l.clamp(1, PARTS)
}

/// The most partitions [`default_parts`] gives.
pub const PARTS: u32 = 16;

/// The result of one candidate L.
#[derive(Debug)]
pub struct Candidate {
    /// Expressways.
    pub l: u32,
    /// Input tuples handed to the engine.
    pub rows_in: u64,
    /// Wall seconds of the run.
    pub seconds: f64,
    /// Process CPU seconds during the run.
    pub cpu_seconds: f64,
    /// Outputs per type (all, warm-up included).
    pub counts: [u64; 5],
    /// Scored outputs later than their deadline, per type.
    pub late: [u64; 5],
    /// Response-time percentiles (ms): p50, p99, max, per type, scored outputs.
    pub millis: [[u64; 3]; 5],
    /// Max response time (ms) per simulation second, per type.
    pub series: [Vec<(i64, u64)>; 5],
    /// Per wall-clock second of the run: (seconds since start, input rows/s, CPU cores).
    pub load: Vec<(f64, f64, f64)>,
    /// Per wall-clock second of the run: (seconds since start, resident MB).
    pub rss: Vec<(f64, f64)>,
    /// Validation of the sampled copies.
    pub validation: Vec<(u32, Report)>,
    /// Everything on time and every sampled copy valid.
    pub passed: bool,
    /// Bytes the Linear Road partitions' state held at the end (their tables and
    /// lists at capacity).
    pub state_bytes: u64,
    /// Of those: records, index, left groups, segment records, the rest.
    pub state_parts: [u64; 5],
    /// Vehicle records in all partitions at the end.
    pub vehicles: u64,
    /// Most input rows sent into the dataflow and not yet through it at once (the
    /// windows in flight: 136 bytes a row in a batch).
    pub in_flight_peak: u64,
    /// Vehicle-id offset between copies ([`vid_stride`]).
    pub vid_stride: i64,
}

/// The replicated generator, read on worker 0 through a thread.
struct Replicated {
    gen: GenConfig,
    copies: u32,
    stride: i64,
    window: usize,
    /// Rows handed to the engine so far (for the throughput plot).
    handed: Arc<std::sync::atomic::AtomicU64>,
}

impl SourceFactory for Replicated {
    fn schema(&self) -> Schema {
        app::input_schema()
    }

    fn open(&self, worker: usize, _peers: usize) -> Option<Box<dyn NativeSource>> {
        if worker != 0 {
            return None;
        }
        let (tx, rx) = sync_channel::<(u64, Batch)>(256);
        let (gen, copies, stride, window) =
            (self.gen.clone(), self.copies, self.stride, self.window);
        std::thread::spawn(move || {
            let mut second: Vec<Input> = Vec::new();
            let mut seq = 0u64;
            let mut stop = false;
            let mut flush = |second: &mut Vec<Input>, stop: &mut bool| {
                let Some(t) = second.first().map(|i| i.time) else {
                    return;
                };
                let mut out = Batch::with_capacity(15, window);
                for c in 0..copies {
                    for i in second.iter() {
                        let r = replica(i, c, copies, gen.xways, stride);
                        out.push_ints(RowKey { seq, lane: 0 }, &r.fields());
                        seq += 1;
                        if out.len() >= window {
                            let full =
                                std::mem::replace(&mut out, Batch::with_capacity(15, window));
                            if tx.send((t as u64, full)).is_err() {
                                *stop = true;
                                return;
                            }
                        }
                    }
                }
                if !out.is_empty() && tx.send((t as u64, out)).is_err() {
                    *stop = true;
                }
                second.clear();
            };
            generate(
                &gen,
                &mut |i: &Input| {
                    if stop {
                        return;
                    }
                    if second.first().is_some_and(|f| f.time != i.time) {
                        flush(&mut second, &mut stop);
                    }
                    second.push(*i);
                },
                &mut |_| {},
            );
            flush(&mut second, &mut stop);
        });
        Some(Box::new(ChannelSource {
            rx,
            handed: self.handed.clone(),
        }))
    }
}

struct ChannelSource {
    rx: Receiver<(u64, Batch)>,
    handed: Arc<std::sync::atomic::AtomicU64>,
}

impl NativeSource for ChannelSource {
    fn next(&mut self, out: &mut Batch) -> std::io::Result<SourceNext> {
        match self.rx.try_recv() {
            Ok((epoch, b)) => {
                self.handed
                    .fetch_add(b.len() as u64, std::sync::atomic::Ordering::Relaxed);
                *out = b;
                Ok(SourceNext::Window(epoch))
            }
            Err(TryRecvError::Empty) => Ok(SourceNext::Wait),
            Err(TryRecvError::Disconnected) => Ok(SourceNext::Done),
        }
    }
}

/// Copy `c` of a base tuple.
pub fn replica(i: &Input, c: u32, copies: u32, base_xways: u32, stride: i64) -> Input {
    let mut r = *i;
    let c64 = i64::from(c);
    r.vid += c64 * stride;
    if r.xway >= 0 {
        r.xway += c64 * i64::from(base_xways);
    }
    if r.qid >= 0 {
        r.qid = r.qid * i64::from(copies) + c64;
    }
    r
}

/// Copy `c` of a base output.
pub fn replica_output(o: &Output, c: u32, copies: u32, stride: i64) -> Output {
    let c64 = i64::from(c);
    let q = |qid: i64| qid * i64::from(copies) + c64;
    match *o {
        Output::Toll {
            vid,
            time,
            emit,
            lav,
            toll,
        } => Output::Toll {
            vid: vid + c64 * stride,
            time,
            emit,
            lav,
            toll,
        },
        Output::Accident {
            time,
            emit,
            vid,
            seg,
        } => Output::Accident {
            time,
            emit,
            vid: vid + c64 * stride,
            seg,
        },
        Output::Balance {
            time,
            emit,
            result_time,
            qid,
            bal,
        } => Output::Balance {
            time,
            emit,
            result_time,
            qid: q(qid),
            bal,
        },
        Output::Daily {
            time,
            emit,
            qid,
            bal,
        } => Output::Daily {
            time,
            emit,
            qid: q(qid),
            bal,
        },
        Output::Travel {
            time,
            emit,
            qid,
            travel_time,
            toll,
        } => Output::Travel {
            time,
            emit,
            qid: q(qid),
            travel_time,
            toll,
        },
    }
}

/// The copy an output belongs to.
pub fn copy_of(o: &Output, copies: u32, stride: i64) -> u32 {
    match *o {
        Output::Toll { vid, .. } | Output::Accident { vid, .. } => (vid / stride) as u32,
        Output::Balance { qid, .. } | Output::Daily { qid, .. } | Output::Travel { qid, .. } => {
            (qid % i64::from(copies.max(1))) as u32
        }
    }
}

/// The copies validated for `copies` copies: the first, the last, and evenly spaced
/// ones in between, `sample` in all.
pub fn sampled(copies: u32, sample: u32) -> Vec<u32> {
    let n = sample.clamp(1, copies.max(1));
    let mut v: Vec<u32> = (0..n)
        .map(|k| {
            if n == 1 {
                0
            } else {
                k * (copies - 1) / (n - 1)
            }
        })
        .collect();
    v.dedup();
    v
}

/// Runs one candidate L (rounded up to a multiple of `base_xways`).
pub fn run_candidate(cfg: &RateConfig, l: u32) -> braid_exec::error::Result<Candidate> {
    let copies = l.div_ceil(cfg.base_xways.max(1)).max(1);
    let l = copies * cfg.base_xways;
    let gen = GenConfig {
        xways: cfg.base_xways,
        minutes: cfg.warmup_minutes + cfg.minutes,
        profile: Profile::Steady,
        seed: cfg.seed,
        ..GenConfig::default()
    };
    let score_from = i64::from(cfg.warmup_minutes) * 60;
    // The base's vehicles, for the id stride (generating it once more costs seconds).
    let stride = vid_stride(generate(&gen, &mut |_| {}, &mut |_| {}).vehicles);
    let samples = sampled(copies, cfg.sample_copies);
    let tolls = TollHistory::generated(Replicas {
        seed: cfg.seed,
        base_xways: cfg.base_xways,
        copies,
        vid_stride: stride,
    });
    // The segment history's rows are generated again for the validator after the run
    // (kept through it they were 59 MB of the process).
    let seg_rows = || {
        let mut rows = Vec::new();
        segment_history(&gen, &mut |r| {
            rows.push((r[0], r[1], r[2], r[3], r[4], r[5], r[6]))
        });
        rows
    };
    let segments = SegmentHistory::from_rows(seg_rows()).replicated(cfg.base_xways);
    let keep = samples.clone();
    let sink = Arc::new(OutputSink::for_rating(
        Some(cfg.speed),
        score_from,
        Box::new(move |o: &Output| keep.contains(&copy_of(o, copies, stride))),
    ));
    let mut registry = Registry::with_builtins();
    let ended = app::register(
        &mut registry,
        Arc::new(tolls),
        Arc::new(segments),
        sink.clone(),
    );
    let handed = Arc::new(std::sync::atomic::AtomicU64::new(0));
    registry.add_source(
        SOURCE,
        Arc::new(Replicated {
            gen: gen.clone(),
            copies,
            stride,
            window: 1024,
            handed: handed.clone(),
        }),
    );
    let opts = LrOptions {
        q: cfg.parts.unwrap_or_else(|| default_parts(l)),
        strategy: cfg.strategy,
        fanin: cfg.fanin,
        speed: Some(cfg.speed),
        window: 1024,
        max_latency: None,
    };
    let plan = app::plan(SourceSpec::Native(SOURCE.into()), &opts);
    let run_cfg = braid_exec::runtime::RunConfig {
        workers: cfg.workers,
        ..Default::default()
    };
    let (process_cpu, process_rss) = (cfg.process_cpu, cfg.process_rss);
    let cpu0 = process_cpu();
    // Once a second: input rows/s and CPU cores used, for the report's plots.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let (stop, handed) = (stop.clone(), handed.clone());
        std::thread::spawn(move || {
            use std::sync::atomic::Ordering::Relaxed;
            let start = std::time::Instant::now();
            let (mut rows, mut cpu, mut at) = (0u64, process_cpu(), 0.0);
            let (mut load, mut rss) = (Vec::new(), Vec::new());
            while !stop.load(Relaxed) {
                std::thread::sleep(std::time::Duration::from_secs(1));
                let (r, c, t) = (
                    handed.load(Relaxed),
                    process_cpu(),
                    start.elapsed().as_secs_f64(),
                );
                let dt = (t - at).max(1e-9);
                load.push((t, (r - rows) as f64 / dt, (c - cpu) / dt));
                rss.push((t, process_rss()));
                (rows, cpu, at) = (r, c, t);
            }
            (load, rss)
        })
    };
    let report = braid_exec::runtime::run(&plan, &registry, &run_cfg);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (load, rss) = sampler.join().unwrap_or_default();
    let report = report?;
    let cpu_seconds = process_cpu() - cpu0;
    let stats = std::mem::take(
        &mut *sink
            .stats
            .lock()
            .map_err(|_| braid_exec::error::Error::Internal("stats lock".into()))?,
    );
    let produced = std::mem::take(
        &mut *sink
            .kept
            .lock()
            .map_err(|_| braid_exec::error::Error::Internal("kept lock".into()))?,
    );
    let series = std::mem::take(
        &mut *sink
            .series
            .lock()
            .map_err(|_| braid_exec::error::Error::Internal("series lock".into()))?,
    );

    // The base's expected answers, recomputed independently, renumbered per copy.
    let mut base = Vec::new();
    generate(&gen, &mut |i: &Input| base.push(*i), &mut |_| {});
    let mut toll_table = TollTable::new();
    for i in base.iter().filter(|i| i.typ == 3) {
        if (1..=69).contains(&i.day) {
            let (x, t) = toll_row(cfg.seed, cfg.base_xways, i.vid, i.day);
            toll_table.insert(i.vid, i.day, x, t);
        }
    }
    let mut seg_table = SegmentTable::new();
    for r in seg_rows() {
        seg_table.insert((r.0, r.1, r.2, r.3, r.4), r.5, r.6);
    }
    let expected = expected_outputs(base, &toll_table, Some(&seg_table));
    let vopts = Options {
        score_from_time: score_from,
        ..Options::default()
    };
    let mut validation = Vec::new();
    for &c in &samples {
        let mut e = expected.clone();
        e.outputs = expected
            .outputs
            .iter()
            .map(|o| replica_output(o, c, copies, stride))
            .collect();
        let mine: Vec<Output> = produced
            .iter()
            .copied()
            .filter(|o| copy_of(o, copies, stride) == c)
            .collect();
        validation.push((c, compare(&e, &mine, &vopts)));
    }
    let q = |t: usize, p: f64| {
        let h = &stats.scored_millis[t];
        if h.is_empty() {
            0
        } else if p >= 1.0 {
            h.max()
        } else {
            h.value_at_quantile(p)
        }
    };
    let millis = std::array::from_fn(|t| [q(t, 0.5), q(t, 0.99), q(t, 1.0)]);
    let late = stats.late_scored;
    let passed = late.iter().sum::<u64>() == 0 && validation.iter().all(|(_, r)| r.passed());
    Ok(Candidate {
        l,
        rows_in: report.rows_in,
        seconds: report.elapsed.as_secs_f64(),
        cpu_seconds,
        counts: stats.counts,
        late,
        millis,
        series: series.map(|m| m.into_iter().collect()),
        load,
        rss,
        validation,
        passed,
        state_bytes: ended.state_bytes.load(std::sync::atomic::Ordering::Relaxed),
        state_parts: std::array::from_fn(|k| {
            ended.state_parts[k].load(std::sync::atomic::Ordering::Relaxed)
        }),
        vehicles: ended.vehicles.load(std::sync::atomic::Ordering::Relaxed),
        in_flight_peak: report.queued_peak,
        vid_stride: stride,
    })
}
