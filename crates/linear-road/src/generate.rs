//! The Linear Road data generator: a small traffic simulator that writes the 15-field
//! input (doc section 2), the toll history and the segment history (Braid's extension
//! for type-4 queries).
//!
//! ```
//! use linear_road::generate::{generate, GenConfig, Profile};
//!
//! let cfg = GenConfig { minutes: 2, profile: Profile::Steady, peak_vehicles_per_xway: 600, ..GenConfig::default() };
//! let mut last = 0;
//! let stats = generate(&cfg, &mut |t| { assert!(t.time >= last); last = t.time; }, &mut |_| {});
//! assert!(stats.tuples > 2 * 600);
//! ```
//!
//! # Model
//!
//! Everything is driven by one `ChaCha8Rng` seeded with [`GenConfig::seed`], and every
//! step runs in a fixed order, so a seed always gives the same stream.
//!
//! - **Load.** Each expressway has a target number of vehicles on the road, `peak *
//!   shape(t)`: `ramp` is `(x + sin(pi x / 2)) / 2` with `x` the fraction of the run done
//!   (close to the official curve: rising fast, then levelling off at the peak at the
//!   end), `sine` is `sin(pi x)` (peak mid-run), `steady` is 1 with `peak` vehicles
//!   placed mid-trip at time 0, their first report at a random second 0..29. Every second,
//!   new vehicles enter until the target is met; while an expressway is above its target,
//!   driving vehicles take the exit ramp of their current segment. The input rate is
//!   a little over `vehicles / 30 * 1.01` tuples/s (an exiting vehicle and the one
//!   replacing it both report in the same second): the default peak, 54,000 vehicles
//!   per expressway, gives 1,820 (end of `ramp`) to 1,850 (`steady`) tuples/s per
//!   expressway, and a 3-hour `ramp` about 11.4 M tuples per expressway.
//! - **Trips.** A vehicle enters by the entrance ramp (lane 0) of a random segment, in a
//!   random direction, at the segment's upstream edge, and drives 1..40 segments
//!   downstream (uniformly, within the road). It reports every 30 s from its entry second
//!   on. Between reports it moves `44 * Spd` feet (the distance covered in 30 s at the
//!   reported speed), in a random travel lane 1..3. The first report in its exit
//!   segment is in lane 4 and is the trip's last. The entrance-ramp report has a speed
//!   of 10..30 mph. Vehicles already on the road at the start (`steady`) start their
//!   trip with a report in a travel lane where they stand.
//! - **Speed.** Each trip has a free-flow speed of 60..90 mph. Each segment and
//!   direction has a capacity `c` of 70..130 vehicles. With `n` vehicles in its segment
//!   and direction, a vehicle drives at `free * min(1, (c + 0.2 (n - c)) / n)` +- 4 mph,
//!   at least 5 mph: the flow `n * speed` keeps growing with `n`, so jams stay bounded.
//!   At the default peak the middle of the road carries 300..600 vehicles per segment
//!   and direction at 20..45 mph (NOV > 50 everywhere there, LAV < 40 in about half of
//!   the segments, mean speed 34 mph), while the ends of the road flow freely.
//! - **Accidents.** On each expressway the first accident is due 1..6 minutes into
//!   the run, then one every 15..25 minutes (at least a minute after the previous one
//!   cleared). When one is due, the next driving vehicle that is at least 3 segments
//!   from its exit stops where it is (Spd 0, same lane and position); the next vehicle
//!   that drives past that point in the same direction, and exits further on, stops
//!   there too. Both stay 10..20 minutes after the first stop (so each sends at least
//!   four identical reports), then drive on at 10..25 mph and finish their trips.
//!   While the accident lasts, traffic in its segment and the two segments upstream
//!   drives at 5..20 mph. An accident whose second vehicle never comes is not counted.
//! - **Re-entry.** 10% of the vehicles that exit come back 5..30 minutes later, with the
//!   same VID, on a random expressway, for a new trip from an entrance ramp.
//! - **Queries.** After each position report, with probability 1%, the same vehicle
//!   sends a request in the same second: 50% type 2 (XWay and position fields -1),
//!   10% type 3 (Day 1..69, XWay the expressway of the toll-history row of that VID and
//!   day, so every request has a row), 40% type 4 (the vehicle's expressway, S_init its
//!   segment, S_end a random segment downstream, or S_init at the road's end, DOW 1..7,
//!   TOD 1..1440). QIDs count up from 0.
//! - **History.** Toll history rows are a hash of (seed, VID, Day): one row per VID and
//!   day, on a hashed expressway, toll 0..99 (0 on about a fifth of the days). Segment
//!   history is a hash-perturbed daily pattern: weekdays (DOW 1..5) have a morning rush
//!   (peaking 8:00, heavier eastbound) and an evening one (17:30, heavier westbound), the
//!   middle of the road is busier than its ends; congested buckets are slow (down to
//!   ~15 mph) and tolled `2 (NOV - 50)^2` with an estimated NOV.

use std::fmt;
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::str::FromStr;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::record::Input;

/// Segments per expressway and direction.
const SEGMENTS: u32 = 100;
/// Feet per segment.
const SEG_FEET: i32 = 5280;
/// Seconds between two reports of a vehicle.
const REPORT_EVERY: u32 = 30;
/// Feet covered in 30 s at 1 mph.
const FEET_PER_MPH: i32 = 44;
/// Free-flow speed range of a trip, mph.
const FREE_FLOW: (u32, u32) = (60, 90);
/// Speed noise per report, +- mph.
const SPEED_NOISE: u32 = 4;
/// Slowest moving speed, mph (a moving vehicle never repeats its position).
const MIN_SPEED: u32 = 5;
/// Vehicles per segment and direction up to which traffic flows freely (the
/// segment's capacity), a random value per segment and direction.
const JAM_START: (u32, u32) = (70, 130);
/// Each vehicle beyond the capacity adds `JAM_FLOW / 100` of a free-flowing vehicle's flow.
const JAM_FLOW: u32 = 20;
/// Speed on the entrance ramp, mph.
const RAMP_SPEED: (u32, u32) = (10, 30);
/// Longest trip, segments.
const MAX_TRIP: u32 = 40;
/// Percentage of exiting vehicles that come back.
const REENTRY_PERCENT: u32 = 10;
/// Delay before a re-entry, seconds.
const REENTRY_DELAY: (u32, u32) = (5 * 60, 30 * 60);
/// Start of the first accident of each expressway, seconds.
const ACCIDENT_FIRST: (u32, u32) = (60, 6 * 60);
/// Time between the starts of two accidents of an expressway, seconds.
const ACCIDENT_EVERY: (u32, u32) = (15 * 60, 25 * 60);
/// How long the vehicles of an accident stay, seconds.
const ACCIDENT_DURATION: (u32, u32) = (10 * 60, 20 * 60);
/// Upstream segments slowed by an accident, besides its own.
const SLOWDOWN_SEGMENTS: u32 = 2;
/// Speed behind an accident, mph.
const SLOWDOWN_SPEED: (u32, u32) = (5, 20);
/// Speed of a vehicle driving off after an accident, mph.
const RESTART_SPEED: (u32, u32) = (10, 25);
/// Days of toll history.
const HISTORY_DAYS: i64 = 69;

/// The load curve of a run: how many vehicles are on each expressway over time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// The official shape: from empty, rising to the peak at the end of the run.
    Ramp,
    /// From empty up to the peak mid-run and back down (half a sine wave).
    Sine,
    /// At the peak from second 0, vehicles already on the road (sustained-peak rating).
    Steady,
}

impl Profile {
    /// Fraction of the peak wanted when fraction `x` (0..1) of the run is done.
    fn shape(self, x: f64) -> f64 {
        match self {
            Profile::Ramp => 0.5 * (x + sin_pi(0.5 * x)),
            Profile::Sine => sin_pi(x),
            Profile::Steady => 1.0,
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Profile::Ramp => "ramp",
            Profile::Sine => "sine",
            Profile::Steady => "steady",
        })
    }
}

/// A load profile name that is not `ramp`, `sine` or `steady`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseProfileError(String);

impl fmt::Display for ParseProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown load profile {:?}; expected ramp, sine or steady",
            self.0
        )
    }
}

impl std::error::Error for ParseProfileError {}

impl FromStr for Profile {
    type Err = ParseProfileError;

    fn from_str(s: &str) -> Result<Profile, ParseProfileError> {
        match s {
            "ramp" => Ok(Profile::Ramp),
            "sine" => Ok(Profile::Sine),
            "steady" => Ok(Profile::Steady),
            other => Err(ParseProfileError(other.to_string())),
        }
    }
}

/// What to generate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenConfig {
    /// Number of expressways, numbered 0..xways.
    pub xways: u32,
    /// Length of the run; Time goes from 0 to `minutes * 60 - 1`.
    pub minutes: u32,
    /// Load curve.
    pub profile: Profile,
    /// Seed of the whole run (input and histories).
    pub seed: u64,
    /// Vehicles on the road per expressway at the peak; the input rate is about
    /// `peak / 30 * 1.01` tuples/s per expressway.
    pub peak_vehicles_per_xway: u32,
}

impl Default for GenConfig {
    /// One expressway, 3 hours, `ramp`, seed 1, 54,000 vehicles at the peak
    /// (about 1,820 tuples/s).
    fn default() -> GenConfig {
        GenConfig {
            xways: 1,
            minutes: 180,
            profile: Profile::Ramp,
            seed: 1,
            peak_vehicles_per_xway: 54_000,
        }
    }
}

/// Counts of a generated run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GenStats {
    /// Input tuples emitted.
    pub tuples: u64,
    /// Tuples per type (index 0, 2, 3, 4; index 1 stays 0).
    pub by_type: [u64; 5],
    /// Distinct vehicles; their VIDs are `0..vehicles`.
    pub vehicles: u64,
    /// Trips that were re-entries of a vehicle that had exited.
    pub reentries: u64,
    /// Accidents (two vehicles stopped at one location).
    pub accidents: u64,
}

/// Streams the input in non-decreasing Time order to `emit`; calls
/// `progress(simulated_seconds_done)` once per simulated minute and at the end.
pub fn generate(
    cfg: &GenConfig,
    emit: &mut dyn FnMut(&Input),
    progress: &mut dyn FnMut(u64),
) -> GenStats {
    let seconds = cfg.minutes.saturating_mul(60);
    if cfg.xways == 0 || seconds == 0 {
        progress(0);
        return GenStats::default();
    }
    let mut sim = Sim::new(cfg, seconds);
    if cfg.profile == Profile::Steady {
        sim.populate();
    }
    for t in 0..seconds {
        sim.second(t, emit);
        if (t + 1) % 60 == 0 || t + 1 == seconds {
            progress(u64::from(t + 1));
        }
    }
    sim.stats
}

/// Toll history rows `(vid, day, xway, toll)` for VIDs `0..=max_vid` and Day 1..69,
/// one row per (VID, Day), in VID then Day order. Row values depend on (seed, VID, Day)
/// only, so they cover every type-3 request of [`generate`] with the same config.
pub fn toll_history(cfg: &GenConfig, max_vid: i64, emit: &mut dyn FnMut(i64, i64, i64, i64)) {
    if cfg.xways == 0 {
        return;
    }
    for vid in 0..=max_vid {
        for day in 1..=HISTORY_DAYS {
            let (xway, toll) = toll_row(cfg.seed, cfg.xways, vid, day);
            emit(vid, day, xway, toll);
        }
    }
}

/// The `(xway, toll)` of the toll-history row of `(vid, day)` for a run with `seed` and
/// `xways` expressways (see [`toll_history`]): computed, never stored.
pub fn toll_row(seed: u64, xways: u32, vid: i64, day: i64) -> (i64, i64) {
    let h = history_hash(seed, vid, day);
    let xway = (h % u64::from(xways.max(1))) as i64;
    // No toll on about a fifth of the days.
    let toll = match (h >> 24) % 5 {
        0 => 0,
        _ => ((h >> 32) % 100) as i64,
    };
    (xway, toll)
}

/// The records a run generated with `cfg` hands the stream function: those the input
/// filter accepts (the ones Braid's reader would not reject), in order.
pub fn accepted_input(cfg: &GenConfig) -> Vec<Input> {
    let mut input = Vec::new();
    let mut filter = crate::record::InputFilter::new();
    generate(
        cfg,
        &mut |t| {
            if filter.check(t).is_ok() {
                input.push(*t)
            }
        },
        &mut |_| {},
    );
    input
}

/// Segment history rows `[XWay, Dir, Seg, DOW, Bucket, AvgSpeed, AvgToll]` for every
/// expressway, direction, segment 0..99, day of week 1..7 and 15-minute bucket 0..95,
/// in that nesting order. Slow and tolled at weekday rush hours (see the module doc).
pub fn segment_history(cfg: &GenConfig, emit: &mut dyn FnMut([i64; 7])) {
    for xway in 0..i64::from(cfg.xways) {
        for dir in 0..2i64 {
            for seg in 0..i64::from(SEGMENTS) {
                // Middle segments are busier than the ends of the road.
                let off = (seg as f64 - 49.5) / 50.0;
                let place = 0.45 + 0.55 * (1.0 - off * off);
                for dow in 1..=7i64 {
                    for bucket in 0..96i64 {
                        let rush = rush_hour(dir, dow, bucket);
                        let h = mix(cfg.seed
                            ^ mix(
                                ((xway << 40) ^ (dir << 32) ^ (seg << 16) ^ (dow << 8) ^ bucket)
                                    as u64,
                            ));
                        let noise_a = (h & 0xffff) as f64 / 65536.0 - 0.5;
                        let noise_b = ((h >> 16) & 0xffff) as f64 / 65536.0 - 0.5;
                        let c = (rush * place + 0.12 * noise_a).clamp(0.0, 1.0);
                        let speed = (68.0 - 55.0 * c + 6.0 * noise_b).round().clamp(5.0, 100.0);
                        let nov = (25.0 + 160.0 * c).round() as i64;
                        let toll = if speed < 40.0 && nov > 50 {
                            2 * (nov - 50) * (nov - 50)
                        } else {
                            0
                        };
                        emit([xway, dir, seg, dow, bucket, speed as i64, toll]);
                    }
                }
            }
        }
    }
}

/// Writes `dir/input.csv`, `dir/toll-history.csv` (for VIDs `0..stats.vehicles`) and
/// `dir/segment-history.csv` (doc section 2, no header lines), creating `dir` if needed.
pub fn write_dir(
    cfg: &GenConfig,
    dir: &Path,
    progress: &mut dyn FnMut(u64),
) -> io::Result<GenStats> {
    fs::create_dir_all(dir)?;
    let mut line = Vec::with_capacity(128);

    let mut out = CsvOut::create(&dir.join("input.csv"))?;
    let stats = generate(cfg, &mut |t| out.row(&mut line, &t.fields()), progress);
    out.finish()?;

    let mut out = CsvOut::create(&dir.join("toll-history.csv"))?;
    let max_vid = stats.vehicles as i64 - 1;
    toll_history(cfg, max_vid, &mut |v, d, x, t| {
        out.row(&mut line, &[v, d, x, t])
    });
    out.finish()?;

    let mut out = CsvOut::create(&dir.join("segment-history.csv"))?;
    segment_history(cfg, &mut |r| out.row(&mut line, &r));
    out.finish()?;
    Ok(stats)
}

/// Renumbers tuple `t` of `xways` generated expressways for copy `copy`: XWay becomes
/// `xway + copy * xways` (unless it is -1) and VID `vid + copy * vid_stride`. QID is kept.
pub fn replicate_input(copy: u32, xways: u32, vid_stride: i64, t: &Input) -> Input {
    let mut c = *t;
    c.vid += i64::from(copy) * vid_stride;
    if c.xway >= 0 {
        c.xway += i64::from(copy) * i64::from(xways);
    }
    c
}

/// Emits the `copies` renumbered copies (copy 0 first) of one toll-history row
/// `(vid, day, xway, toll)`, matching [`replicate_input`]. Composes with
/// [`toll_history`]: `toll_history(cfg, max, &mut |v, d, x, t| replicate_toll_row(n, cfg.xways, stride, (v, d, x, t), out))`.
pub fn replicate_toll_row(
    copies: u32,
    xways: u32,
    vid_stride: i64,
    row: (i64, i64, i64, i64),
    emit: &mut dyn FnMut(i64, i64, i64, i64),
) {
    let (vid, day, xway, toll) = row;
    for copy in 0..i64::from(copies) {
        emit(
            vid + copy * vid_stride,
            day,
            xway + copy * i64::from(xways),
            toll,
        );
    }
}

/// Replicates the input of `xways` generated expressways into `copies * xways`
/// expressways, streaming: tuples are pushed in Time order, and each second is
/// emitted once complete, as copy 0's tuples, then copy 1's, and so on (each copy
/// renumbered by [`replicate_input`]). Requests get new QIDs, counting up from 0 in
/// output order, so QIDs stay unique and increasing. `vid_stride` must exceed every
/// generated VID (e.g. [`GenStats::vehicles`]). Buffers one second of input.
#[derive(Debug)]
pub struct Replicator {
    copies: u32,
    xways: u32,
    vid_stride: i64,
    second: Vec<Input>,
    next_qid: i64,
}

impl Replicator {
    /// A replicator making `copies` copies of `xways` expressways.
    pub fn new(copies: u32, xways: u32, vid_stride: i64) -> Replicator {
        Replicator {
            copies,
            xways,
            vid_stride,
            second: Vec::new(),
            next_qid: 0,
        }
    }

    /// Takes the next input tuple; emits the previous second when `t` starts a new one.
    pub fn push(&mut self, t: &Input, emit: &mut dyn FnMut(&Input)) {
        if self.second.first().is_some_and(|f| f.time != t.time) {
            self.flush(emit);
        }
        self.second.push(*t);
    }

    /// Emits the buffered last second; call once after the last `push`.
    pub fn finish(&mut self, emit: &mut dyn FnMut(&Input)) {
        self.flush(emit);
    }

    fn flush(&mut self, emit: &mut dyn FnMut(&Input)) {
        for copy in 0..self.copies {
            for t in &self.second {
                let mut c = replicate_input(copy, self.xways, self.vid_stride, t);
                if c.typ != 0 {
                    c.qid = self.next_qid;
                    self.next_qid += 1;
                }
                emit(&c);
            }
        }
        self.second.clear();
    }
}

/// [`Replicator`] over a whole input: `copies` copies of the tuples of `xways`
/// expressways, merged in Time order (same Time: copy order).
pub fn replicate(
    copies: u32,
    xways: u32,
    vid_stride: i64,
    input: impl IntoIterator<Item = Input>,
    emit: &mut dyn FnMut(&Input),
) {
    let mut r = Replicator::new(copies, xways, vid_stride);
    for t in input {
        r.push(&t, emit);
    }
    r.finish(emit);
}

// ---------------------------------------------------------------------------------
// The simulator.

/// Where a vehicle is in its trip.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Placed on the road at the start (`steady`): first report where it stands.
    Placed,
    /// Driving: moves `44 * spd` feet before each report.
    Driving,
    /// Stopped by an accident until `stop_until`.
    Stopped,
}

/// One vehicle; indexed by VID. Only meaningful while on the road.
#[derive(Clone, Copy, Debug)]
struct Vehicle {
    pos: i32,
    xway: u32,
    stop_until: u32,
    /// Speed of the latest report, mph.
    spd: u8,
    dir: u8,
    lane: u8,
    exit_seg: u8,
    /// Free-flow speed of the trip, mph.
    free: u8,
    state: State,
}

/// The accident state of one expressway.
#[derive(Clone, Copy, Debug, Default)]
struct Accident {
    /// When the next accident may start.
    next_at: u32,
    /// Vehicles are stopped (or one is, waiting for the second).
    active: bool,
    /// The second vehicle has stopped.
    partner: bool,
    dir: u8,
    lane: u8,
    pos: i32,
    seg: u32,
    start: u32,
    release: u32,
}

struct Sim {
    rng: ChaCha8Rng,
    seed: u64,
    xways: u32,
    seconds: u32,
    peak: f64,
    profile: Profile,
    vehicles: Vec<Vehicle>,
    /// Vehicles on the road by report phase (second mod 30).
    buckets: Vec<Vec<u32>>,
    /// Vehicles per (xway, dir, seg), as of their latest report.
    occ: Vec<u32>,
    /// Free-flow capacity per (xway, dir, seg).
    capacity: Vec<u32>,
    /// Vehicles on the road per expressway.
    active: Vec<u32>,
    /// Vehicles above target per expressway, this second.
    excess: Vec<i64>,
    accidents: Vec<Accident>,
    /// Re-entering vehicles by second.
    reentry: Vec<Vec<u32>>,
    next_qid: i64,
    stats: GenStats,
}

fn seg_of(pos: i32) -> u32 {
    (pos / SEG_FEET) as u32
}

fn cell(xway: u32, dir: u8, seg: u32) -> usize {
    ((xway as usize * 2 + dir as usize) * SEGMENTS as usize) + seg as usize
}

impl Sim {
    fn new(cfg: &GenConfig, seconds: u32) -> Sim {
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let xways = cfg.xways as usize;
        let accidents = (0..xways)
            .map(|_| Accident {
                next_at: rng.gen_range(ACCIDENT_FIRST.0..=ACCIDENT_FIRST.1),
                ..Accident::default()
            })
            .collect();
        let cells = xways * 2 * SEGMENTS as usize;
        let capacity = (0..cells)
            .map(|_| rng.gen_range(JAM_START.0..=JAM_START.1))
            .collect();
        Sim {
            rng,
            seed: cfg.seed,
            xways: cfg.xways,
            seconds,
            peak: f64::from(cfg.peak_vehicles_per_xway),
            profile: cfg.profile,
            vehicles: Vec::new(),
            buckets: vec![Vec::new(); REPORT_EVERY as usize],
            occ: vec![0; cells],
            capacity,
            active: vec![0; xways],
            excess: vec![0; xways],
            accidents,
            reentry: vec![Vec::new(); seconds as usize],
            next_qid: 0,
            stats: GenStats::default(),
        }
    }

    /// Vehicles wanted per expressway in second `t`.
    fn target(&self, t: u32) -> i64 {
        let x = f64::from(t + 1) / f64::from(self.seconds);
        (self.peak * self.profile.shape(x)) as i64
    }

    /// A new trip: direction, entry segment and exit segment.
    fn trip(&mut self) -> (u8, u32, u32) {
        let dir = self.rng.gen_range(0..2u8);
        let entry = self.rng.gen_range(0..SEGMENTS - 1);
        let exit = self
            .rng
            .gen_range(entry + 1..=(entry + MAX_TRIP).min(SEGMENTS - 1));
        if dir == 0 {
            (dir, entry, exit)
        } else {
            // The mirror image: westbound from segment 99 - entry.
            (dir, SEGMENTS - 1 - entry, SEGMENTS - 1 - exit)
        }
    }

    fn new_vid(&mut self) -> u32 {
        let vid = self.vehicles.len() as u32;
        self.vehicles.push(Vehicle {
            pos: 0,
            xway: 0,
            stop_until: 0,
            spd: 0,
            dir: 0,
            lane: 0,
            exit_seg: 0,
            free: 0,
            state: State::Driving,
        });
        self.stats.vehicles += 1;
        vid
    }

    /// `steady`: `peak` vehicles per expressway placed mid-trip, first report at a
    /// random second 0..29.
    fn populate(&mut self) {
        let n = self.peak as u32;
        for xway in 0..self.xways {
            for _ in 0..n {
                let vid = self.new_vid();
                let (dir, entry, exit) = self.trip();
                let pos = if dir == 0 {
                    self.rng
                        .gen_range(entry as i32 * SEG_FEET..exit as i32 * SEG_FEET)
                } else {
                    self.rng
                        .gen_range((exit as i32 + 1) * SEG_FEET..(entry as i32 + 1) * SEG_FEET)
                };
                let v = Vehicle {
                    pos,
                    xway,
                    stop_until: 0,
                    spd: 0,
                    dir,
                    lane: self.rng.gen_range(1..=3),
                    exit_seg: exit as u8,
                    free: self.rng.gen_range(FREE_FLOW.0..=FREE_FLOW.1) as u8,
                    state: State::Placed,
                };
                self.vehicles[vid as usize] = v;
                self.occ[cell(xway, dir, seg_of(pos))] += 1;
                self.active[xway as usize] += 1;
                let phase = self.rng.gen_range(0..REPORT_EVERY) as usize;
                self.buckets[phase].push(vid);
            }
        }
    }

    /// One simulated second.
    fn second(&mut self, t: u32, emit: &mut dyn FnMut(&Input)) {
        let target = self.target(t);
        for x in 0..self.xways as usize {
            let a = &mut self.accidents[x];
            if a.active && t >= a.release {
                a.active = false;
                let every = self.rng.gen_range(ACCIDENT_EVERY.0..=ACCIDENT_EVERY.1);
                a.next_at = (a.start + every).max(a.release + 60);
            }
            self.excess[x] = i64::from(self.active[x]) - target;
        }

        let phase = (t % REPORT_EVERY) as usize;
        let mut bucket = std::mem::take(&mut self.buckets[phase]);
        bucket.retain(|&vid| self.report(vid, t, emit));

        let due = std::mem::take(&mut self.reentry[t as usize]);
        for &vid in &due {
            let xway = self.rng.gen_range(0..self.xways);
            self.enter(vid, xway, t, emit);
            bucket.push(vid);
            self.stats.reentries += 1;
        }
        for xway in 0..self.xways {
            while i64::from(self.active[xway as usize]) < target {
                let vid = self.new_vid();
                self.enter(vid, xway, t, emit);
                bucket.push(vid);
            }
        }
        self.buckets[phase] = bucket;
    }

    /// Starts a trip of `vid` on `xway` with an entrance-ramp report at `t`.
    fn enter(&mut self, vid: u32, xway: u32, t: u32, emit: &mut dyn FnMut(&Input)) {
        let (dir, entry, exit) = self.trip();
        let pos = entry as i32 * SEG_FEET + if dir == 0 { 0 } else { SEG_FEET - 1 };
        let spd = self.rng.gen_range(RAMP_SPEED.0..=RAMP_SPEED.1) as u8;
        let v = Vehicle {
            pos,
            xway,
            stop_until: 0,
            spd,
            dir,
            lane: 0,
            exit_seg: exit as u8,
            free: self.rng.gen_range(FREE_FLOW.0..=FREE_FLOW.1) as u8,
            state: State::Driving,
        };
        self.vehicles[vid as usize] = v;
        self.occ[cell(xway, dir, entry)] += 1;
        self.active[xway as usize] += 1;
        self.emit_report(vid, t, &v, emit);
    }

    /// The report of `vid` at `t`; false when the vehicle left the road.
    fn report(&mut self, vid: u32, t: u32, emit: &mut dyn FnMut(&Input)) -> bool {
        let mut v = self.vehicles[vid as usize];
        let x = v.xway as usize;
        let old_seg = seg_of(v.pos);
        let from = v.pos;
        let step = if v.dir == 0 {
            FEET_PER_MPH
        } else {
            -FEET_PER_MPH
        };
        let mut moved = false;
        let mut restart = None;
        match v.state {
            State::Placed => v.state = State::Driving,
            State::Stopped if t < v.stop_until => {
                self.emit_report(vid, t, &v, emit);
                return true;
            }
            State::Stopped => {
                let s = self.rng.gen_range(RESTART_SPEED.0..=RESTART_SPEED.1);
                v.pos += step * s as i32;
                v.lane = self.rng.gen_range(1..=3);
                v.state = State::Driving;
                restart = Some(s);
            }
            State::Driving => {
                v.pos += step * i32::from(v.spd);
                v.lane = self.rng.gen_range(1..=3);
                moved = true;
            }
        }
        let mut seg = seg_of(v.pos);
        let exit = u32::from(v.exit_seg);
        let to_exit = if v.dir == 0 {
            exit as i64 - seg as i64
        } else {
            seg as i64 - exit as i64
        };
        let acc = self.accidents[x];
        let mut leaves = false;
        if moved
            && acc.active
            && !acc.partner
            && acc.dir == v.dir
            && t + 4 * REPORT_EVERY <= acc.release
            && passes(from, v.pos, acc.pos, v.dir)
            && if v.dir == 0 {
                exit > acc.seg
            } else {
                exit < acc.seg
            }
        {
            // Runs into the stopped vehicle: the second one of the accident.
            v.pos = acc.pos;
            v.lane = acc.lane;
            v.state = State::Stopped;
            v.stop_until = acc.release;
            seg = acc.seg;
            let a = &mut self.accidents[x];
            a.partner = true;
            self.stats.accidents += 1;
        } else if to_exit <= 0 {
            v.pos = if v.dir == 0 {
                v.pos.min(exit as i32 * SEG_FEET + SEG_FEET - 1)
            } else {
                v.pos.max(exit as i32 * SEG_FEET)
            };
            seg = exit;
            v.lane = 4;
            leaves = true;
        } else if self.excess[x] > 0 && restart.is_none() {
            // Above target: take the exit ramp of this segment.
            self.excess[x] -= 1;
            v.lane = 4;
            leaves = true;
        } else if !acc.active && t >= acc.next_at && to_exit >= 3 && restart.is_none() {
            // This vehicle stops: the first one of an accident.
            let release = t + self
                .rng
                .gen_range(ACCIDENT_DURATION.0..=ACCIDENT_DURATION.1);
            v.state = State::Stopped;
            v.stop_until = release;
            self.accidents[x] = Accident {
                next_at: acc.next_at,
                active: true,
                partner: false,
                dir: v.dir,
                lane: v.lane,
                pos: v.pos,
                seg,
                start: t,
                release,
            };
        }

        v.spd = if v.state == State::Stopped {
            0
        } else if let Some(s) = restart {
            s as u8
        } else {
            let c = cell(v.xway, v.dir, seg);
            let mut s = congested_speed(u32::from(v.free), self.occ[c], self.capacity[c]);
            s = (s + self.rng.gen_range(0..=2 * SPEED_NOISE)).saturating_sub(SPEED_NOISE);
            let acc = &self.accidents[x];
            if acc.active && acc.dir == v.dir && t < acc.release {
                let behind = if v.dir == 0 {
                    seg <= acc.seg && seg + SLOWDOWN_SEGMENTS >= acc.seg
                } else {
                    seg >= acc.seg && seg <= acc.seg + SLOWDOWN_SEGMENTS
                };
                if behind {
                    s = s.min(self.rng.gen_range(SLOWDOWN_SPEED.0..=SLOWDOWN_SPEED.1));
                }
            }
            s.clamp(MIN_SPEED, 100) as u8
        };

        self.occ[cell(v.xway, v.dir, old_seg)] -= 1;
        if !leaves {
            self.occ[cell(v.xway, v.dir, seg)] += 1;
        }
        self.vehicles[vid as usize] = v;
        self.emit_report(vid, t, &v, emit);
        if leaves {
            self.active[x] -= 1;
            if self.rng.gen_range(0..100) < REENTRY_PERCENT {
                let back = t + self.rng.gen_range(REENTRY_DELAY.0..=REENTRY_DELAY.1);
                if back < self.seconds {
                    self.reentry[back as usize].push(vid);
                }
            }
        }
        !leaves
    }

    /// Emits the position report of `v` and, with probability 1%, a request after it.
    fn emit_report(&mut self, vid: u32, t: u32, v: &Vehicle, emit: &mut dyn FnMut(&Input)) {
        let (time, vid_i) = (i64::from(t), i64::from(vid));
        emit(&Input::position(
            time,
            vid_i,
            i64::from(v.spd),
            i64::from(v.xway),
            i64::from(v.lane),
            i64::from(v.dir),
            i64::from(v.pos),
        ));
        self.stats.tuples += 1;
        self.stats.by_type[0] += 1;
        if self.rng.gen_range(0..100u32) != 0 {
            return;
        }
        let mut q = Input {
            typ: 2,
            time,
            vid: vid_i,
            spd: -1,
            xway: -1,
            lane: -1,
            dir: -1,
            seg: -1,
            pos: -1,
            qid: self.next_qid,
            s_init: -1,
            s_end: -1,
            dow: -1,
            tod: -1,
            day: -1,
        };
        self.next_qid += 1;
        let kind = self.rng.gen_range(0..10u32);
        if kind == 5 {
            q.typ = 3;
            q.day = self.rng.gen_range(1..=HISTORY_DAYS);
            q.xway = (history_hash(self.seed, vid_i, q.day) % u64::from(self.xways)) as i64;
        } else if kind > 5 {
            let seg = i64::from(seg_of(v.pos));
            q.typ = 4;
            q.xway = i64::from(v.xway);
            q.s_init = seg;
            q.s_end = if v.dir == 0 && seg < 99 {
                self.rng.gen_range(seg + 1..=99)
            } else if v.dir == 1 && seg > 0 {
                self.rng.gen_range(0..seg)
            } else {
                seg
            };
            q.dow = self.rng.gen_range(1..=7);
            q.tod = self.rng.gen_range(1..=1440);
        }
        emit(&q);
        self.stats.tuples += 1;
        self.stats.by_type[q.typ as usize] += 1;
    }
}

/// Whether a move from `from` to `to` in direction `dir` reaches `at`.
fn passes(from: i32, to: i32, at: i32, dir: u8) -> bool {
    if dir == 0 {
        from < at && to >= at
    } else {
        from > at && to <= at
    }
}

/// Speed with `n` vehicles in a segment of capacity `cap`: free flow up to `cap`,
/// then each further vehicle adds only `JAM_FLOW`% of a free-flowing one's flow.
fn congested_speed(free: u32, n: u32, cap: u32) -> u32 {
    if n <= cap {
        free
    } else {
        let flow = cap * 100 + JAM_FLOW * (n - cap);
        (u64::from(free) * u64::from(flow) / (u64::from(n) * 100)) as u32
    }
}

/// sin(pi x) for x in 0..1, by a Taylor polynomial: the same bits on every platform.
fn sin_pi(x: f64) -> f64 {
    let y = std::f64::consts::PI * x.min(1.0 - x).max(0.0);
    let y2 = y * y;
    y * (1.0
        - y2 / 6.0
            * (1.0
                - y2 / 20.0
                    * (1.0
                        - y2 / 42.0 * (1.0 - y2 / 72.0 * (1.0 - y2 / 110.0 * (1.0 - y2 / 156.0))))))
}

/// How busy a 15-minute bucket is, 0..1, before the segment's own factor.
fn rush_hour(dir: i64, dow: i64, bucket: i64) -> f64 {
    let bump = |center: f64, width: f64| {
        let d = (bucket as f64 + 0.5 - center) / width;
        (1.0 - d * d).max(0.0)
    };
    let base = 0.15 * bump(52.0, 44.0); // daytime traffic
    let rush = if dow <= 5 {
        let morning = bump(32.0, 10.0);
        let evening = bump(70.0, 12.0);
        if dir == 0 {
            morning.max(0.7 * evening)
        } else {
            (0.7 * morning).max(evening)
        }
    } else {
        0.5 * bump(56.0, 20.0)
    };
    base.max(rush)
}

/// SplitMix64's finalizer.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The hash behind a toll-history row.
fn history_hash(seed: u64, vid: i64, day: i64) -> u64 {
    mix(seed ^ mix(vid.wrapping_mul(HISTORY_DAYS + 1).wrapping_add(day) as u64))
}

/// A buffered CSV file of integer rows that keeps the first write error.
struct CsvOut {
    w: BufWriter<File>,
    err: Option<io::Error>,
}

impl CsvOut {
    fn create(path: &Path) -> io::Result<CsvOut> {
        Ok(CsvOut {
            w: BufWriter::with_capacity(1 << 20, File::create(path)?),
            err: None,
        })
    }

    fn row(&mut self, line: &mut Vec<u8>, fields: &[i64]) {
        if self.err.is_some() {
            return;
        }
        line.clear();
        for (i, &f) in fields.iter().enumerate() {
            if i > 0 {
                line.push(b',');
            }
            push_int(line, f);
        }
        line.push(b'\n');
        if let Err(e) = self.w.write_all(line) {
            self.err = Some(e);
        }
    }

    fn finish(mut self) -> io::Result<()> {
        match self.err.take() {
            Some(e) => Err(e),
            None => self.w.flush(),
        }
    }
}

/// Appends the decimal form of `v`.
fn push_int(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    let mut n = v.unsigned_abs();
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::InputFilter;
    use std::collections::hash_map::DefaultHasher;
    use std::collections::{HashMap, HashSet};
    use std::hash::{Hash, Hasher};
    use std::time::Instant;

    /// (XWay, Dir, Lane, Pos) or (XWay, Dir, Seg, minute).
    type Key = (i64, i64, i64, i64);

    /// A vehicle's latest position report, as the checker saw it.
    #[derive(Clone, Copy)]
    struct Last {
        time: i64,
        loc: Key,
        cell_minute: Key,
        /// Identical consecutive reports ending with the latest.
        run: u32,
    }

    /// Streaming checks over a generated input (the input itself is not kept).
    #[derive(Default)]
    struct Checker {
        hash: DefaultHasher,
        filter: InputFilter,
        prev: Option<Input>,
        by_type: [u64; 5],
        last: Vec<Option<Last>>,
        gap_errors: Vec<String>,
        reentries: u64,
        /// Vehicles stopped (4 identical reports) per location.
        stopped: HashMap<Key, HashSet<i64>>,
        /// Per (xway, dir, seg, minute): distinct vehicles, sum of speeds, reports.
        nov: HashMap<Key, (u32, i64, i64)>,
        type3: Vec<(i64, i64, i64)>,
        per_minute: Vec<u64>,
        last_qid: i64,
    }

    impl Checker {
        fn see(&mut self, t: &Input) {
            t.fields().hash(&mut self.hash);
            if let Err(e) = self.filter.check(t) {
                panic!("{t} rejected: {e}");
            }
            let minute = (t.time / 60) as usize;
            if self.per_minute.len() <= minute {
                self.per_minute.resize(minute + 1, 0);
            }
            self.per_minute[minute] += 1;
            self.by_type[t.typ as usize] += 1;
            if t.typ != 0 {
                let p = self.prev.expect("a request follows a report");
                assert!(
                    p.typ == 0 && p.vid == t.vid && p.time == t.time,
                    "{t} after {p}"
                );
                assert!(t.qid > self.last_qid || (self.last_qid == 0 && t.qid == 0));
                self.last_qid = t.qid;
                if t.typ == 3 {
                    assert!((1..=69).contains(&t.day));
                    self.type3.push((t.vid, t.day, t.xway));
                }
                if t.typ == 4 {
                    assert!((0..100).contains(&t.s_init) && (0..100).contains(&t.s_end));
                    assert!((1..=7).contains(&t.dow) && (1..=1440).contains(&t.tod));
                }
                self.prev = Some(*t);
                return;
            }
            self.prev = Some(*t);
            let vid = t.vid as usize;
            if self.last.len() <= vid {
                self.last.resize(vid + 1, None);
            }
            let loc = (t.xway, t.dir, t.lane, t.pos);
            let cm = (t.xway, t.dir, t.seg, t.time / 60);
            let mut run = 1;
            let mut new_cell = true;
            match self.last[vid] {
                Some(l) if l.loc.2 == 4 => {
                    // New trip after an exit.
                    if t.lane != 0 || t.time - l.time < 60 {
                        self.gap_errors
                            .push(format!("{t} after exit at {}", l.time));
                    }
                    self.reentries += 1;
                }
                Some(l) => {
                    if t.time - l.time != 30 {
                        self.gap_errors
                            .push(format!("{t} after report at {}", l.time));
                    }
                    if l.loc == loc {
                        run = l.run + 1;
                    }
                    new_cell = l.cell_minute != cm;
                }
                None => {}
            }
            if run == 4 {
                self.stopped.entry(loc).or_default().insert(t.vid);
            }
            let e = self.nov.entry(cm).or_default();
            e.0 += u32::from(new_cell);
            e.1 += t.spd;
            e.2 += 1;
            self.last[vid] = Some(Last {
                time: t.time,
                loc,
                cell_minute: cm,
                run,
            });
        }
    }

    fn check(cfg: &GenConfig) -> (Checker, GenStats) {
        let mut c = Checker::default();
        let mut progress = 0;
        let stats = generate(cfg, &mut |t| c.see(t), &mut |s| {
            assert!(s >= progress);
            progress = s;
        });
        assert_eq!(progress, u64::from(cfg.minutes) * 60);
        (c, stats)
    }

    #[test]
    fn generate_two_xways_has_the_claimed_properties() {
        let cfg = GenConfig {
            xways: 2,
            minutes: 10,
            profile: Profile::Steady,
            seed: 7,
            ..GenConfig::default()
        };
        let (c, stats) = check(&cfg);
        assert_eq!(stats.tuples, c.by_type.iter().sum::<u64>());
        assert_eq!(stats.by_type, c.by_type);
        assert_eq!(c.per_minute.len(), 10, "Time stays in 0..600");

        // Deterministic per seed, different across seeds.
        let mut again = DefaultHasher::new();
        generate(&cfg, &mut |t| t.fields().hash(&mut again), &mut |_| {});
        assert_eq!(c.hash.finish(), again.finish());
        let mut other = DefaultHasher::new();
        let cfg8 = GenConfig {
            seed: 8,
            ..cfg.clone()
        };
        generate(&cfg8, &mut |t| t.fields().hash(&mut other), &mut |_| {});
        assert_ne!(c.hash.finish(), other.finish());

        // Query shares: 1% of reports, split 50/10/40.
        let reports = c.by_type[0] as f64;
        let queries = (c.by_type[2] + c.by_type[3] + c.by_type[4]) as f64;
        assert!((queries / reports - 0.01).abs() < 0.001, "{:?}", c.by_type);
        for (typ, share) in [(2, 0.5), (3, 0.1), (4, 0.4)] {
            let got = c.by_type[typ] as f64 / queries;
            assert!((got - share).abs() < 0.03, "type {typ}: {got}");
        }

        // Reports every 30 s within a trip; re-entries start in lane 0.
        assert!(
            c.gap_errors.is_empty(),
            "{:?}",
            &c.gap_errors[..5.min(c.gap_errors.len())]
        );
        assert!(
            c.reentries > 0 && c.reentries == stats.reentries,
            "{stats:?}"
        );

        // Accidents: two vehicles with >= 4 identical reports at one location.
        let accidents = c.stopped.values().filter(|v| v.len() >= 2).count();
        assert!(accidents >= 2, "{accidents} accidents, {stats:?}");
        assert!(
            c.stopped.values().all(|v| v.len() == 2),
            "no lone stopped vehicles"
        );
        assert_eq!(accidents as u64, stats.accidents);

        // Congestion: some segment-minutes have NOV > 50 with mean speed < 40.
        let jammed = c
            .nov
            .values()
            .filter(|&&(nov, sum, n)| nov > 50 && sum / n < 40)
            .count();
        let cells = c.nov.len();
        assert!(
            jammed * 10 > cells,
            "{jammed} of {cells} segment-minutes jammed"
        );
        let mean = c.nov.values().map(|v| v.1).sum::<i64>() / c.by_type[0] as i64;
        assert!((25..=60).contains(&mean), "mean speed {mean}");

        // Steady: the first minute is as busy as the last.
        let (first, last) = (c.per_minute[0] as f64, c.per_minute[9] as f64);
        assert!((first / last - 1.0).abs() < 0.05, "{first} vs {last}");
        let rate = last / 60.0 / 2.0;
        assert!(
            (1_700.0..=2_000.0).contains(&rate),
            "{rate} tuples/s per xway"
        );

        // Every type-3 request has its toll-history row.
        let wanted: HashMap<(i64, i64), i64> =
            c.type3.iter().map(|&(v, d, x)| ((v, d), x)).collect();
        let mut found = 0;
        let mut rows = 0u64;
        toll_history(&cfg, stats.vehicles as i64 - 1, &mut |v, d, x, toll| {
            rows += 1;
            assert!((0..100).contains(&toll) && (0..2).contains(&x));
            if let Some(&want) = wanted.get(&(v, d)) {
                assert_eq!(x, want, "vid {v} day {d}");
                found += 1;
            }
        });
        assert_eq!(found, wanted.len());
        assert!(!wanted.is_empty());
        assert_eq!(rows, stats.vehicles * 69);
    }

    fn per_minute(profile: Profile) -> Vec<u64> {
        let cfg = GenConfig {
            xways: 1,
            minutes: 30,
            profile,
            seed: 3,
            peak_vehicles_per_xway: 3_000,
        };
        let (c, _) = check(&cfg);
        assert!(
            c.gap_errors.is_empty(),
            "{profile}: {:?}",
            &c.gap_errors[..1]
        );
        c.per_minute
    }

    #[test]
    fn generate_profiles_have_their_shape() {
        // Steady: every minute at the peak rate (reports of 3,000 vehicles twice a
        // minute, 1% requests, plus the extra report of each exit-and-replace).
        let steady = per_minute(Profile::Steady);
        let peak = steady.iter().sum::<u64>() as f64 / steady.len() as f64;
        assert!(
            (peak / (3_000.0 * 2.0 * 1.01) - 1.0).abs() < 0.06,
            "{steady:?}"
        );
        let near_peak = |m: u64| (m as f64 / peak - 1.0).abs() < 0.05;
        assert!(steady.iter().all(|&m| near_peak(m)), "{steady:?}");

        let ramp = per_minute(Profile::Ramp);
        assert!(ramp.windows(2).all(|w| w[1] + 100 >= w[0]), "{ramp:?}");
        assert!((ramp[0] as f64) < 0.1 * peak, "{ramp:?}");
        assert!(near_peak(ramp[29]), "{ramp:?}");
        assert!(ramp[14] as f64 > 0.55 * peak, "{ramp:?}");

        let sine = per_minute(Profile::Sine);
        assert!(near_peak(sine[14]) && near_peak(sine[15]), "{sine:?}");
        assert!((sine[0] as f64) < 0.15 * peak, "{sine:?}");
        assert!((sine[29] as f64) < 0.15 * peak, "{sine:?}");
    }

    #[test]
    fn generate_profile_parses() {
        assert_eq!("steady".parse::<Profile>(), Ok(Profile::Steady));
        assert_eq!(
            "ramp".parse::<Profile>().map(|p| p.to_string()),
            Ok("ramp".into())
        );
        let e = "flat".parse::<Profile>().expect_err("not a profile");
        assert_eq!(
            e.to_string(),
            "unknown load profile \"flat\"; expected ramp, sine or steady"
        );
    }

    #[test]
    fn generate_replicate_renumbers_and_merges() {
        let cfg = GenConfig {
            xways: 2,
            minutes: 3,
            profile: Profile::Steady,
            seed: 5,
            peak_vehicles_per_xway: 2_000,
        };
        let mut input = Vec::new();
        let stats = generate(&cfg, &mut |t| input.push(*t), &mut |_| {});
        let stride = stats.vehicles as i64;
        let mut out = Vec::new();
        replicate(3, 2, stride, input.iter().copied(), &mut |t| out.push(*t));
        assert_eq!(out.len(), 3 * input.len());
        let mut filter = InputFilter::new();
        let mut qid = -1;
        for t in &out {
            filter.check(t).expect("valid replicated tuple");
            if t.typ != 0 {
                assert_eq!(t.qid, qid + 1);
                qid = t.qid;
            }
            let copy = t.vid / stride;
            assert!(t.xway == -1 || t.xway / 2 == copy, "{t}");
        }
        // Same Time: copy order.
        let first_second: Vec<i64> = out
            .iter()
            .take_while(|t| t.time == 0)
            .map(|t| t.vid / stride)
            .collect();
        assert!(first_second.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(first_second.last(), Some(&2));

        // Type-3 requests of every copy find their renumbered history row.
        let mut rows = HashMap::new();
        toll_history(&cfg, stride - 1, &mut |v, d, x, toll| {
            replicate_toll_row(3, 2, stride, (v, d, x, toll), &mut |v, d, x, _| {
                rows.insert((v, d), x);
            })
        });
        for t in out.iter().filter(|t| t.typ == 3) {
            assert_eq!(rows.get(&(t.vid, t.day)), Some(&t.xway), "{t}");
        }
    }

    #[test]
    fn generate_segment_history_is_complete_and_plausible() {
        let cfg = GenConfig {
            xways: 2,
            ..GenConfig::default()
        };
        let mut rows = 0;
        let mut keys = HashSet::new();
        let (mut rush, mut night) = ((0, 0, 0), (0, 0, 0));
        segment_history(&cfg, &mut |r| {
            rows += 1;
            keys.insert((r[0], r[1], r[2], r[3], r[4]));
            assert!((5..=100).contains(&r[5]) && r[6] >= 0, "{r:?}");
            // Weekday 8:00-8:15 in the middle of the road, eastbound.
            let acc = match (r[1], r[3], r[4], r[2]) {
                (0, 1..=5, 32, 30..=70) => &mut rush,
                (_, _, 8, _) => &mut night,
                _ => return,
            };
            acc.0 += r[5];
            acc.1 += r[6];
            acc.2 += 1;
        });
        assert_eq!(rows, 2 * 2 * 100 * 7 * 96);
        assert_eq!(keys.len(), rows);
        assert!(rush.0 / rush.2 < 35 && rush.1 / rush.2 > 1_000, "{rush:?}");
        assert!(night.0 / night.2 > 55 && night.1 == 0, "{night:?}");
    }

    #[test]
    fn generate_write_dir_writes_three_files() {
        let dir = std::env::temp_dir().join(format!("braid-lr-gen-{}", std::process::id()));
        let cfg = GenConfig {
            minutes: 2,
            profile: Profile::Steady,
            peak_vehicles_per_xway: 500,
            ..GenConfig::default()
        };
        let stats = write_dir(&cfg, &dir, &mut |_| {}).expect("write to a temp dir");
        let input = fs::read_to_string(dir.join("input.csv")).expect("input written");
        let mut lines = 0;
        let mut expected = Vec::new();
        generate(&cfg, &mut |t| expected.push(t.to_string()), &mut |_| {});
        for (line, want) in input.lines().zip(&expected) {
            assert_eq!(line, want);
            lines += 1;
        }
        assert_eq!(lines as u64, stats.tuples);
        let tolls = fs::read_to_string(dir.join("toll-history.csv")).expect("tolls written");
        assert_eq!(tolls.lines().count() as u64, stats.vehicles * 69);
        let segs = fs::read_to_string(dir.join("segment-history.csv")).expect("written");
        assert_eq!(segs.lines().count(), 2 * 100 * 7 * 96);
        assert_eq!(segs.lines().next().map(|l| l.split(',').count()), Some(7));
        fs::remove_dir_all(&dir).expect("clean up");
    }

    /// Throughput: run with `--release -- --nocapture` to see the generator's speed.
    #[test]
    fn generate_speed() {
        let cfg = GenConfig {
            xways: 2,
            minutes: if cfg!(debug_assertions) { 2 } else { 20 },
            profile: Profile::Steady,
            ..GenConfig::default()
        };
        let start = Instant::now();
        let mut sum = 0i64;
        let stats = generate(&cfg, &mut |t| sum += t.pos, &mut |_| {});
        let secs = start.elapsed().as_secs_f64();
        println!(
            "generated {} tuples in {secs:.2} s: {:.0} tuples/s ({} vehicles, {} re-entries, {} accidents)",
            stats.tuples,
            stats.tuples as f64 / secs,
            stats.vehicles,
            stats.reentries,
            stats.accidents
        );
        assert!(sum != 0);
    }
}
