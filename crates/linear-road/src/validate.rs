//! The independent Linear Road validator: a single-threaded recomputation of every
//! expected answer (`docs/linear-road.md` sections 4-6 and 8) and the comparison
//! with a system's output (section 9).
//!
//! This code path shares nothing with the stream function but the record types of
//! [`crate::record`]. It is written for clarity, not speed: one pass over the input in
//! time order, with plain hash maps for the per-vehicle, per-segment and per-location
//! state.
//!
//! The steps:
//! 1. [`expected_outputs`] filters the input ([`InputFilter`]) and recomputes every
//!    answer, with `Emit = -1`.
//! 2. [`compare`] matches the produced outputs against them and builds a [`Report`].
//! 3. [`validate_files`] does both from files.
//!
//! ```
//! use linear_road::record::{Input, Output};
//! use linear_road::validate::{compare, expected_outputs, Options, TollTable};
//!
//! // One vehicle enters segment 1 at second 0: a toll notification with LAV -1, toll 0.
//! let inputs = vec![Input::position(0, 7, 50, 0, 0, 0, 5280)];
//! let expected = expected_outputs(inputs, &TollTable::new(), None);
//! let produced: Vec<Output> = expected.outputs.iter().map(|o| o.with_emit(1)).collect();
//! assert!(compare(&expected, &produced, &Options::default()).passed());
//! ```

use crate::record::{parse_input, parse_output, Input, InputFilter, Output};
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::Path;

/// How many rejected or malformed lines are kept as examples.
const EXAMPLES: usize = 10;

// ---------------------------------------------------------------------------------------
// Historical data
// ---------------------------------------------------------------------------------------

/// Key of a toll-history row: (VID, Day, XWay).
pub type TollKey = (i64, i64, i64);

/// The toll history (doc section 2): `(VID, Day, XWay) -> Toll`, read from
/// `VID,Day,XWay,Toll` lines.
#[derive(Clone, Debug, Default)]
pub struct TollTable {
    rows: HashMap<TollKey, i64>,
    bad_lines: u64,
}

impl TollTable {
    /// An empty table.
    pub fn new() -> TollTable {
        TollTable::default()
    }

    /// Adds a row; an existing row for the same key is kept (the first row wins).
    pub fn insert(&mut self, vid: i64, day: i64, xway: i64, toll: i64) {
        self.rows.entry((vid, day, xway)).or_insert(toll);
    }

    /// The toll of `vid` on expressway `xway` on `day`, if the history has that row.
    pub fn get(&self, vid: i64, day: i64, xway: i64) -> Option<i64> {
        self.rows.get(&(vid, day, xway)).copied()
    }

    /// Number of rows kept.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True if no row is kept.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Lines that were not four integers, or repeated an earlier row's key.
    pub fn bad_lines(&self) -> u64 {
        self.bad_lines
    }

    /// Reads `VID,Day,XWay,Toll` lines. With `wanted`, only rows whose key is in it are
    /// kept (the validator asks only for the rows its type-3 requests need, which bounds
    /// memory on large histories). Empty lines are skipped; bad lines are counted.
    pub fn read(reader: impl BufRead, wanted: Option<&HashSet<TollKey>>) -> io::Result<TollTable> {
        let mut table = TollTable::new();
        for line in reader.lines() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            let Some([vid, day, xway, toll]) = parse_ints::<4>(&line) else {
                table.bad_lines += 1;
                continue;
            };
            let key = (vid, day, xway);
            if wanted.is_some_and(|w| !w.contains(&key)) {
                continue;
            }
            match table.rows.entry(key) {
                Entry::Occupied(_) => table.bad_lines += 1,
                Entry::Vacant(row) => {
                    row.insert(toll);
                }
            }
        }
        Ok(table)
    }

    /// [`TollTable::read`] from a file.
    pub fn load(path: &Path, wanted: Option<&HashSet<TollKey>>) -> io::Result<TollTable> {
        TollTable::read(BufReader::new(File::open(path)?), wanted)
    }
}

/// Key of a segment-history row: (XWay, Dir, Seg, DOW, Bucket).
pub type SegmentKey = (i64, i64, i64, i64, i64);

/// The segment history (doc section 2, Braid's extension for type 4):
/// `(XWay, Dir, Seg, DOW, Bucket) -> (AvgSpeed, AvgToll)`, read from
/// `XWay,Dir,Seg,DOW,Bucket,AvgSpeed,AvgToll` lines.
#[derive(Clone, Debug, Default)]
pub struct SegmentTable {
    rows: HashMap<SegmentKey, (i64, i64)>,
    bad_lines: u64,
}

impl SegmentTable {
    /// An empty table.
    pub fn new() -> SegmentTable {
        SegmentTable::default()
    }

    /// Adds a row; an existing row for the same key is kept (the first row wins).
    pub fn insert(&mut self, key: SegmentKey, avg_speed: i64, avg_toll: i64) {
        self.rows.entry(key).or_insert((avg_speed, avg_toll));
    }

    /// `(AvgSpeed, AvgToll)` of a row, if the history has it.
    pub fn get(&self, key: SegmentKey) -> Option<(i64, i64)> {
        self.rows.get(&key).copied()
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True if there is no row.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Lines that were not seven integers, or repeated an earlier row's key.
    pub fn bad_lines(&self) -> u64 {
        self.bad_lines
    }

    /// Reads `XWay,Dir,Seg,DOW,Bucket,AvgSpeed,AvgToll` lines. Empty lines are skipped;
    /// bad lines are counted.
    pub fn read(reader: impl BufRead) -> io::Result<SegmentTable> {
        let mut table = SegmentTable::new();
        for line in reader.lines() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            let Some([x, d, s, dow, bucket, speed, toll]) = parse_ints::<7>(&line) else {
                table.bad_lines += 1;
                continue;
            };
            let key = (x, d, s, dow, bucket);
            match table.rows.entry(key) {
                Entry::Occupied(_) => table.bad_lines += 1,
                Entry::Vacant(row) => {
                    row.insert((speed, toll));
                }
            }
        }
        Ok(table)
    }

    /// [`SegmentTable::read`] from a file.
    pub fn load(path: &Path) -> io::Result<SegmentTable> {
        SegmentTable::read(BufReader::new(File::open(path)?))
    }
}

/// Exactly `N` comma-separated integers, or `None`.
fn parse_ints<const N: usize>(line: &str) -> Option<[i64; N]> {
    let mut out = [0i64; N];
    let mut fields = line.trim_end_matches(['\r', '\n']).split(',');
    for slot in out.iter_mut() {
        *slot = fields.next()?.trim().parse().ok()?;
    }
    match fields.next() {
        Some(_) => None,
        None => Some(out),
    }
}

// ---------------------------------------------------------------------------------------
// Exact rational means (section 4: "the exact mean is truncated to an integer")
// ---------------------------------------------------------------------------------------

/// A reduced fraction with a positive denominator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ratio {
    num: i128,
    den: i128,
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Ratio {
    const ZERO: Ratio = Ratio { num: 0, den: 1 };

    /// `num / den` reduced; `den` must not be zero.
    fn new(num: i128, den: i128) -> Ratio {
        let g = gcd(num.unsigned_abs(), den.unsigned_abs()).max(1) as i128;
        let sign = if den < 0 { -1 } else { 1 };
        Ratio {
            num: sign * (num / g),
            den: sign * (den / g),
        }
    }

    fn checked_add(self, other: Ratio) -> Option<Ratio> {
        let g = gcd(self.den.unsigned_abs(), other.den.unsigned_abs()) as i128;
        let lcm = (self.den / g).checked_mul(other.den)?;
        let a = self.num.checked_mul(lcm / self.den)?;
        let b = other.num.checked_mul(lcm / other.den)?;
        Some(Ratio::new(a.checked_add(b)?, lcm))
    }

    /// `self / n` for a positive `n`.
    fn checked_div(self, n: i128) -> Option<Ratio> {
        Some(Ratio::new(self.num, self.den.checked_mul(n)?))
    }

    /// Truncated towards zero.
    fn trunc(self) -> i128 {
        self.num / self.den
    }
}

// ---------------------------------------------------------------------------------------
// Segment statistics (section 4)
// ---------------------------------------------------------------------------------------

/// (XWay, Dir, Seg).
type Segment = (i64, i64, i64);

/// Minute number m(t) = t / 60 + 1 (section 1).
fn minute(t: i64) -> i64 {
    t / 60 + 1
}

/// The statistics of one segment in one finished minute.
#[derive(Clone, Copy, Debug)]
struct MinuteStat {
    /// Distinct vehicles that reported.
    vehicles: i64,
    /// Mean over those vehicles of their mean Spd; `None` if it overflowed i128
    /// (only possible with absurd speeds).
    mean: Option<Ratio>,
    /// The same mean in floating point, used only when `mean` is `None`.
    approx: f64,
}

/// Per-segment, per-minute statistics. Reports arrive in time order, so a minute is
/// finished as soon as a report of a later minute arrives; its per-vehicle sums are then
/// reduced to a [`MinuteStat`].
#[derive(Debug, Default)]
struct SegmentStats {
    /// The minute being collected.
    minute: i64,
    /// For the minute being collected: segment -> vehicle -> (sum of Spd, reports).
    current: HashMap<Segment, HashMap<i64, (i128, i64)>>,
    /// Finished minutes.
    done: HashMap<(Segment, i64), MinuteStat>,
}

impl SegmentStats {
    /// Adds a position report of second `t` (any trip or none).
    fn add(&mut self, t: i64, seg: Segment, vid: i64, spd: i64) {
        let m = minute(t);
        if m != self.minute {
            self.finish_current();
            self.minute = m;
        }
        let v = self
            .current
            .entry(seg)
            .or_default()
            .entry(vid)
            .or_insert((0, 0));
        v.0 += i128::from(spd);
        v.1 += 1;
    }

    fn finish_current(&mut self) {
        for (seg, vehicles) in self.current.drain() {
            let n = vehicles.len() as i64;
            let mut exact = Some(Ratio::ZERO);
            let mut approx = 0.0;
            for &(sum, count) in vehicles.values() {
                let vehicle_mean = Ratio::new(sum, i128::from(count));
                exact = exact.and_then(|e| e.checked_add(vehicle_mean));
                approx += sum as f64 / count as f64;
            }
            let stat = MinuteStat {
                vehicles: n,
                mean: exact.and_then(|e| e.checked_div(i128::from(n))),
                approx: approx / n as f64,
            };
            self.done.insert((seg, self.minute), stat);
        }
    }

    /// NOV(seg, m): distinct vehicles of minute m - 1. Minute m - 1 must be finished.
    fn nov(&self, seg: Segment, m: i64) -> i64 {
        self.done.get(&(seg, m - 1)).map_or(0, |s| s.vehicles)
    }

    /// LAV(seg, m): the truncated mean of the per-minute means of the minutes
    /// m-5..m-1 that had reports; -1 if none had.
    fn lav(&self, seg: Segment, m: i64) -> i64 {
        let stats: Vec<&MinuteStat> = (m - 5..m)
            .filter_map(|k| self.done.get(&(seg, k)))
            .collect();
        if stats.is_empty() {
            return -1;
        }
        let k = stats.len() as i128;
        let exact = stats
            .iter()
            .try_fold(Ratio::ZERO, |acc, s| acc.checked_add(s.mean?))
            .and_then(|sum| sum.checked_div(k));
        match exact {
            Some(mean) => i64::try_from(mean.trunc()).unwrap_or(i64::MAX),
            None => (stats.iter().map(|s| s.approx).sum::<f64>() / k as f64).trunc() as i64,
        }
    }
}

// ---------------------------------------------------------------------------------------
// Stopped vehicles and accidents (section 5)
// ---------------------------------------------------------------------------------------

/// (XWay, Dir, Lane, Pos).
type Location = (i64, i64, i64, i64);

/// One accident: its detection and clearing minutes. Its segment (that of the report
/// that detected it) is its key in [`Accidents::by_segment`].
#[derive(Clone, Copy, Debug)]
struct Accident {
    detected: i64,
    cleared: Option<i64>,
}

impl Accident {
    /// Active from the minute after detection through the clearing minute.
    fn active_in(&self, m: i64) -> bool {
        match self.cleared {
            Some(cleared) => self.detected < m && m <= cleared,
            None => self.detected < m,
        }
    }
}

#[derive(Debug, Default)]
struct Accidents {
    /// Vehicles currently stopped at each location.
    stopped: HashMap<Location, HashSet<i64>>,
    /// The accident at a location that is not cleared yet.
    open: HashMap<Location, usize>,
    /// Every accident ever detected.
    all: Vec<Accident>,
    /// Accidents by (XWay, Dir, Seg).
    by_segment: HashMap<Segment, Vec<usize>>,
}

impl Accidents {
    /// Vehicle `vid` has become stopped at `loc` with a report from segment `seg` in
    /// minute `m`.
    fn stop(&mut self, loc: Location, seg: i64, vid: i64, m: i64) {
        let here = self.stopped.entry(loc).or_default();
        here.insert(vid);
        if here.len() >= 2 && !self.open.contains_key(&loc) {
            let id = self.all.len();
            self.all.push(Accident {
                detected: m,
                cleared: None,
            });
            self.open.insert(loc, id);
            self.by_segment
                .entry((loc.0, loc.1, seg))
                .or_default()
                .push(id);
        }
    }

    /// Vehicle `vid`, stopped at `loc`, is no longer stopped there (a report from
    /// elsewhere or a new trip) in minute `m`.
    fn leave(&mut self, loc: Location, vid: i64, m: i64) {
        let Some(here) = self.stopped.get_mut(&loc) else {
            return;
        };
        here.remove(&vid);
        let remaining = here.len();
        if remaining == 0 {
            self.stopped.remove(&loc);
        }
        if remaining < 2 {
            if let Some(id) = self.open.remove(&loc) {
                self.all[id].cleared = Some(m);
            }
        }
    }

    /// The segment of the nearest accident active in minute `m` in `seg` and the four
    /// segments downstream of it.
    fn nearest(&self, xway: i64, dir: i64, seg: i64, m: i64) -> Option<i64> {
        let step = if dir == 0 { 1 } else { -1 };
        (0..5).map(|i| seg + step * i).find(|&s| {
            self.by_segment
                .get(&(xway, dir, s))
                .is_some_and(|ids| ids.iter().any(|&id| self.all[id].active_in(m)))
        })
    }
}

// ---------------------------------------------------------------------------------------
// Vehicles: trips and accounts (sections 6.1, 6.4, 6.5, 8)
// ---------------------------------------------------------------------------------------

/// The per-trip state of a vehicle.
#[derive(Clone, Copy, Debug)]
struct Trip {
    /// Segment of the trip's latest report.
    seg: Segment,
    /// Location of the trip's latest report.
    loc: Location,
    /// Consecutive reports of this trip at `loc` (4 or more: stopped there).
    same: u32,
}

/// The account of a vehicle over the whole run: its toll notifications.
#[derive(Clone, Copy, Debug, Default)]
struct Account {
    /// Time and toll of the latest notification.
    latest: Option<(i64, i64)>,
    /// Sum of all notified tolls.
    total: i64,
}

#[derive(Clone, Copy, Debug)]
struct Vehicle {
    /// Time of the latest report (in a trip or not).
    last_time: i64,
    /// The current trip; `None` after an exit-lane report until a new entrance.
    trip: Option<Trip>,
    account: Account,
}

// ---------------------------------------------------------------------------------------
// Recomputation
// ---------------------------------------------------------------------------------------

/// Every expected output of an input sequence, and what the recomputation saw.
#[derive(Clone, Debug, Default)]
pub struct Expected {
    /// The expected outputs with `Emit = -1`, in the order they were produced.
    pub outputs: Vec<Output>,
    /// Accepted input tuples per input type (index 0: position reports; index 1 is
    /// always 0).
    pub requests_per_type: [u64; 5],
    /// Segment crossings that were notified (one toll notification each).
    pub crossings: u64,
    /// Accidents detected.
    pub accidents: u64,
    /// Position reports that belonged to no trip (section 8).
    pub no_trip_reports: u64,
    /// Input tuples rejected by [`InputFilter`].
    pub rejected: u64,
    /// The first few rejections, as text.
    pub reject_examples: Vec<String>,
    /// False when there was no segment history: type-4 requests are then not answered.
    pub type4_answered: bool,
    /// Type-4 requests not answered because S_init or S_end is outside 0..99, DOW
    /// outside 1..7 or TOD outside 1..1440.
    pub unanswerable_travel_requests: u64,
    /// Type-3 requests without a toll-history row (not answered, section 6.6).
    pub daily_without_row: u64,
}

impl Expected {
    /// Number of expected outputs of each output type.
    pub fn outputs_per_type(&self) -> [u64; 5] {
        let mut n = [0; 5];
        for o in &self.outputs {
            n[o.typ()] += 1;
        }
        n
    }
}

/// The state of the recomputation.
struct Recompute<'a> {
    tolls: &'a TollTable,
    segments: Option<&'a SegmentTable>,
    stats: SegmentStats,
    accidents: Accidents,
    vehicles: HashMap<i64, Vehicle>,
    out: Expected,
}

/// All expected outputs (`Emit = -1`) for an input sequence, in the order produced.
/// Applies [`InputFilter`] and counts rejected tuples. Without a segment history
/// (`segments` is `None`) type-4 requests are not answered.
pub fn expected_outputs(
    inputs: impl IntoIterator<Item = Input>,
    tolls: &TollTable,
    segments: Option<&SegmentTable>,
) -> Expected {
    let mut r = Recompute {
        tolls,
        segments,
        stats: SegmentStats::default(),
        accidents: Accidents::default(),
        vehicles: HashMap::new(),
        out: Expected {
            type4_answered: segments.is_some(),
            ..Expected::default()
        },
    };
    let mut filter = InputFilter::new();
    // Requests of the current second wait until all its position reports are processed.
    let mut requests: Vec<Input> = Vec::new();
    for (index, t) in inputs.into_iter().enumerate() {
        if let Err(why) = filter.check(&t) {
            r.out.rejected += 1;
            if r.out.reject_examples.len() < EXAMPLES {
                r.out
                    .reject_examples
                    .push(format!("input tuple {} ({t}): {why}", index + 1));
            }
            continue;
        }
        if requests.first().is_some_and(|q| q.time < t.time) {
            for q in requests.drain(..) {
                r.request(&q);
            }
        }
        r.out.requests_per_type[t.typ as usize] += 1;
        if t.typ == 0 {
            r.report(&t);
        } else {
            requests.push(t);
        }
    }
    for q in requests.drain(..) {
        r.request(&q);
    }
    r.out.accidents = r.accidents.all.len() as u64;
    r.out
}

impl Recompute<'_> {
    /// A position report (sections 4, 5, 6.1-6.4, 8).
    fn report(&mut self, p: &Input) {
        let m = minute(p.time);
        let seg: Segment = (p.xway, p.dir, p.seg);
        let loc: Location = (p.xway, p.dir, p.lane, p.pos);

        // Section 4: every report counts in the statistics, in a trip or not.
        self.stats.add(p.time, seg, p.vid, p.spd);

        // Section 8: which trip does the report belong to?
        let fresh = Trip { seg, loc, same: 1 };
        let crossing;
        match self.vehicles.get_mut(&p.vid) {
            None => {
                // The first report of a vehicle starts its first trip, in any lane.
                self.vehicles.insert(
                    p.vid,
                    Vehicle {
                        last_time: p.time,
                        trip: Some(fresh),
                        account: Account::default(),
                    },
                );
                crossing = true;
            }
            Some(v) => {
                let gap = p.time - v.last_time;
                v.last_time = p.time;
                match v.trip {
                    None if p.lane != 0 => {
                        // After the exit-lane report, before a new entrance: no trip.
                        self.out.no_trip_reports += 1;
                        return;
                    }
                    None => {
                        v.trip = Some(fresh);
                        crossing = true;
                    }
                    Some(old) if p.lane == 0 && gap > 60 => {
                        // Re-entry: a new trip; a stopped vehicle is no longer stopped.
                        if old.same >= 4 {
                            self.accidents.leave(old.loc, p.vid, m);
                        }
                        v.trip = Some(fresh);
                        crossing = true;
                    }
                    Some(mut trip) => {
                        crossing = trip.seg != seg;
                        if trip.loc == loc {
                            trip.same += 1;
                            if trip.same == 4 {
                                self.accidents.stop(loc, p.seg, p.vid, m);
                            }
                        } else {
                            if trip.same >= 4 {
                                self.accidents.leave(trip.loc, p.vid, m);
                            }
                            trip.loc = loc;
                            trip.same = 1;
                        }
                        trip.seg = seg;
                        v.trip = Some(trip);
                    }
                }
            }
        }

        if p.lane == 4 {
            // The exit-lane report ends the trip and never triggers a notification.
            if let Some(v) = self.vehicles.get_mut(&p.vid) {
                v.trip = None;
            }
            return;
        }
        if !crossing {
            return;
        }

        // Sections 6.2 and 6.3: notify the crossing.
        let nov = self.stats.nov(seg, m);
        let lav = self.stats.lav(seg, m);
        let accident = self.accidents.nearest(p.xway, p.dir, p.seg, m);
        let toll = if lav < 40 && nov > 50 && accident.is_none() {
            2 * (nov - 50) * (nov - 50)
        } else {
            0
        };
        self.out.crossings += 1;
        self.out.outputs.push(Output::Toll {
            vid: p.vid,
            time: p.time,
            emit: -1,
            lav,
            toll,
        });
        if let Some(accident_seg) = accident {
            self.out.outputs.push(Output::Accident {
                time: p.time,
                emit: -1,
                vid: p.vid,
                seg: accident_seg,
            });
        }
        // Section 6.5: the account records every notification.
        if let Some(v) = self.vehicles.get_mut(&p.vid) {
            v.account.latest = Some((p.time, toll));
            v.account.total += toll;
        }
    }

    /// A request of type 2, 3 or 4; all position reports of its second are processed.
    fn request(&mut self, q: &Input) {
        match q.typ {
            2 => {
                // Section 6.5: r = latest notification <= t (all notifications so far);
                // Bal = the tolls notified strictly before r.
                let account = self
                    .vehicles
                    .get(&q.vid)
                    .map(|v| v.account)
                    .unwrap_or_default();
                let (result_time, bal) = match account.latest {
                    Some((r, toll_at_r)) => (r, account.total - toll_at_r),
                    None => (q.time, 0),
                };
                self.out.outputs.push(Output::Balance {
                    time: q.time,
                    emit: -1,
                    result_time,
                    qid: q.qid,
                    bal,
                });
            }
            3 => match self.tolls.get(q.vid, q.day, q.xway) {
                Some(bal) => self.out.outputs.push(Output::Daily {
                    time: q.time,
                    emit: -1,
                    qid: q.qid,
                    bal,
                }),
                None => self.out.daily_without_row += 1,
            },
            4 => {
                let Some(table) = self.segments else {
                    return;
                };
                match travel_estimate(table, q) {
                    Some((travel_time, toll)) => self.out.outputs.push(Output::Travel {
                        time: q.time,
                        emit: -1,
                        qid: q.qid,
                        travel_time,
                        toll,
                    }),
                    None => self.out.unanswerable_travel_requests += 1,
                }
            }
            _ => {}
        }
    }
}

/// Section 6.7: (TravelTime in s, Toll) of a type-4 request, or `None` if its segments,
/// day of week or minute of day are out of range.
fn travel_estimate(table: &SegmentTable, q: &Input) -> Option<(i64, i64)> {
    let in_range = |v: i64, lo: i64, hi: i64| (lo..=hi).contains(&v);
    if !in_range(q.s_init, 0, 99)
        || !in_range(q.s_end, 0, 99)
        || !in_range(q.dow, 1, 7)
        || !in_range(q.tod, 1, 1440)
    {
        return None;
    }
    let (dir, step) = if q.s_end > q.s_init { (0, 1) } else { (1, -1) };
    let mut elapsed_ms: i64 = 0;
    let mut toll: i64 = 0;
    let mut seg = q.s_init;
    loop {
        let week_minute = ((q.dow - 1) * 1440 + (q.tod - 1) + elapsed_ms / 60_000) % 10_080;
        let dow = week_minute / 1440 + 1;
        let bucket = (week_minute % 1440) / 15;
        let row = table.get((q.xway, dir, seg, dow, bucket));
        let speed = match row {
            Some((avg_speed, _)) if avg_speed >= 5 => avg_speed,
            _ => 5,
        };
        elapsed_ms += 3_600_000 / speed;
        toll += row.map_or(0, |(_, avg_toll)| avg_toll);
        if seg == q.s_end {
            break;
        }
        seg += step;
    }
    Some((elapsed_ms / 1000, toll))
}

// ---------------------------------------------------------------------------------------
// Comparison (section 9)
// ---------------------------------------------------------------------------------------

/// Comparison options.
#[derive(Clone, Debug)]
pub struct Options {
    /// Outputs with `Time` below this are not scored, expected or produced
    /// (the sustained-peak warm-up, section 7); 0 scores everything.
    pub score_from_time: i64,
    /// How many problems to list in the report.
    pub show: usize,
    /// Check deadlines (Emit - Time). Off for runs as fast as possible, whose Emit is
    /// the input clock rather than the replay clock.
    pub check_deadlines: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            score_from_time: 0,
            show: 10,
            check_deadlines: true,
        }
    }
}

/// The comparison of one output type.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TypeReport {
    /// Expected outputs (scored).
    pub expected: u64,
    /// Produced outputs (scored).
    pub produced: u64,
    /// Produced outputs equal (all fields but Emit) to an expected one.
    pub matching: u64,
    /// Expected outputs with no produced answer for the same tuple.
    pub missing: u64,
    /// Produced outputs answering no expected tuple.
    pub extra: u64,
    /// Further produced outputs for a tuple that already has its answer.
    pub duplicates: u64,
    /// Produced outputs for an expected tuple (same VID and Time for types 0 and 1,
    /// same QID and Time for types 2-4) but with other values.
    pub wrong: u64,
    /// Produced outputs with `Emit - Time` above the deadline.
    pub late: u64,
    /// Produced outputs with `Emit < Time` (produced before their input existed).
    pub early: u64,
    /// Largest `Emit - Time` among the produced outputs.
    pub max_response: Option<i64>,
}

impl TypeReport {
    /// Missing, extra, duplicate, wrong, late and early outputs together.
    pub fn errors(&self) -> u64 {
        self.missing + self.extra + self.duplicates + self.wrong + self.late + self.early
    }
}

/// The result of a validation.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Per output type 0..4.
    pub types: [TypeReport; 5],
    /// Input lines that were malformed or rejected by the input checks (section 8).
    pub rejected_input_lines: u64,
    /// Examples of rejected input lines.
    pub rejected_input_examples: Vec<String>,
    /// Output lines that could not be parsed.
    pub bad_output_lines: u64,
    /// Malformed or repeated lines of the toll and segment histories.
    pub bad_history_lines: u64,
    /// The first problems (bad output lines, then by Time), as text.
    pub mismatches: Vec<String>,
    /// True when there was no segment history: type-4 outputs were not checked.
    pub type4_unchecked: bool,
    /// Whether Emit - Time was checked against the deadlines.
    pub deadlines_checked: bool,
    /// Produced outputs not scored (Time before `score_from_time`, or type 4 unchecked).
    pub unscored_outputs: u64,
    /// The `score_from_time` used.
    pub score_from_time: i64,
}

impl Report {
    /// True if every scored output is present, correct, unique and on time, and every
    /// output line could be parsed.
    pub fn passed(&self) -> bool {
        self.bad_output_lines == 0 && self.types.iter().all(|t| t.errors() == 0)
    }
}

/// The kinds of problems, in the order they are listed for one Time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Wrong,
    Missing,
    Extra,
    Duplicate,
    Late,
    Early,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Problem {
    time: i64,
    kind: Kind,
    line: Output,
    /// For `Wrong`: the produced line (`line` is the expected one).
    produced: Option<Output>,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.kind, self.produced) {
            (Kind::Wrong, Some(p)) => {
                write!(
                    f,
                    "wrong      expected {}  produced {p}",
                    without_emit(&self.line)
                )
            }
            (Kind::Missing, _) | (Kind::Wrong, None) => {
                write!(f, "missing    {}", without_emit(&self.line))
            }
            (Kind::Extra, _) => write!(f, "extra      {}", self.line),
            (Kind::Duplicate, _) => write!(f, "duplicate  {}", self.line),
            (Kind::Late, _) => write!(
                f,
                "late       {}  (response {} s > {} s)",
                self.line,
                self.line.emit() - self.line.time(),
                self.line.deadline()
            ),
            (Kind::Early, _) => write!(f, "early      {}  (Emit before Time)", self.line),
        }
    }
}

/// An output line with Emit shown as `_`.
fn without_emit(o: &Output) -> String {
    match *o {
        Output::Toll {
            vid,
            time,
            lav,
            toll,
            ..
        } => format!("0,{vid},{time},_,{lav},{toll}"),
        Output::Accident { time, vid, seg, .. } => format!("1,{time},_,{vid},{seg}"),
        Output::Balance {
            time,
            result_time,
            qid,
            bal,
            ..
        } => format!("2,{time},_,{result_time},{qid},{bal}"),
        Output::Daily { time, qid, bal, .. } => format!("3,{time},_,{qid},{bal}"),
        Output::Travel {
            time,
            qid,
            travel_time,
            toll,
            ..
        } => format!("4,{time},_,{qid},{travel_time},{toll}"),
    }
}

/// What one output answers: (type, VID, Time) for types 0 and 1 (one notification per
/// crossing), (type, QID, Time) for types 2-4 (one answer per request).
fn answers(o: &Output) -> (usize, i64, i64) {
    match *o {
        Output::Toll { vid, time, .. } | Output::Accident { vid, time, .. } => (o.typ(), vid, time),
        Output::Balance { qid, time, .. }
        | Output::Daily { qid, time, .. }
        | Output::Travel { qid, time, .. } => (o.typ(), qid, time),
    }
}

/// Outputs left over after exact matching, for one answered tuple.
#[derive(Default)]
struct Leftover {
    expected: u64,
    missing: Vec<Output>,
    surplus: Vec<Output>,
}

/// Compares produced outputs with the expected ones (section 9): for every type,
/// multiset equality on all fields but Emit (for type 2 this is equality of
/// (ResultTime, Bal) per QID), one answer per request and crossing, and the deadline
/// of every produced output.
pub fn compare(expected: &Expected, produced: &[Output], opts: &Options) -> Report {
    let mut report = Report {
        type4_unchecked: !expected.type4_answered,
        deadlines_checked: opts.check_deadlines,
        score_from_time: opts.score_from_time,
        rejected_input_lines: expected.rejected,
        rejected_input_examples: expected.reject_examples.clone(),
        ..Report::default()
    };
    let scored = |o: &Output| o.time() >= opts.score_from_time;
    let checked = |o: &Output| o.typ() != 4 || expected.type4_answered;
    let mut problems: Vec<Problem> = Vec::new();
    let problem = |kind: Kind, line: Output| Problem {
        time: line.time(),
        kind,
        line,
        produced: None,
    };

    // Every line with Emit cleared: (expected copies, the produced lines).
    let mut counts: HashMap<Output, (u64, Vec<Output>)> = HashMap::new();
    for o in expected.outputs.iter().filter(|o| scored(o) && checked(o)) {
        report.types[o.typ()].expected += 1;
        counts.entry(o.with_emit(-1)).or_default().0 += 1;
    }
    for o in produced {
        if !scored(o) || !checked(o) {
            report.unscored_outputs += 1;
            continue;
        }
        let t = &mut report.types[o.typ()];
        t.produced += 1;
        let response = o.emit() - o.time();
        t.max_response = Some(t.max_response.map_or(response, |m| m.max(response)));
        if opts.check_deadlines && response > o.deadline() {
            t.late += 1;
            problems.push(problem(Kind::Late, *o));
        } else if opts.check_deadlines && response < 0 {
            t.early += 1;
            problems.push(problem(Kind::Early, *o));
        }
        counts.entry(o.with_emit(-1)).or_default().1.push(*o);
    }

    // Exact matches (the earliest produced copies); the rest grouped by the tuple they
    // answer.
    let mut leftovers: HashMap<(usize, i64, i64), Leftover> = HashMap::new();
    for (line, (e, mut copies)) in counts {
        copies.sort();
        let matched = copies.len().min(e as usize);
        report.types[line.typ()].matching += matched as u64;
        let group = leftovers.entry(answers(&line)).or_default();
        group.expected += e;
        for _ in matched..e as usize {
            group.missing.push(line);
        }
        group.surplus.extend_from_slice(&copies[matched..]);
    }
    for (_, mut group) in leftovers {
        group.missing.sort();
        group.surplus.sort();
        let pairs = group.missing.len().min(group.surplus.len());
        for (e, p) in group.missing.iter().zip(&group.surplus) {
            report.types[e.typ()].wrong += 1;
            problems.push(Problem {
                time: e.time(),
                kind: Kind::Wrong,
                line: *e,
                produced: Some(*p),
            });
        }
        for e in &group.missing[pairs..] {
            report.types[e.typ()].missing += 1;
            problems.push(problem(Kind::Missing, *e));
        }
        for p in &group.surplus[pairs..] {
            if group.expected > 0 {
                report.types[p.typ()].duplicates += 1;
                problems.push(problem(Kind::Duplicate, *p));
            } else {
                report.types[p.typ()].extra += 1;
                problems.push(problem(Kind::Extra, *p));
            }
        }
    }
    problems.sort();
    report.mismatches = problems
        .iter()
        .take(opts.show)
        .map(|p| p.to_string())
        .collect();
    report
}

/// Names of the output types, for the report.
const TYPE_NAMES: [&str; 5] = [
    "0 toll notification",
    "1 accident notif.",
    "2 account balance",
    "3 daily expenditure",
    "4 travel time",
];

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Linear Road validation")?;
        if self.score_from_time > 0 {
            write!(
                f,
                " (outputs with Time < {} not scored)",
                self.score_from_time
            )?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "{:<20} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9}",
            "type",
            "expected",
            "produced",
            "matching",
            "missing",
            "extra",
            "dup",
            "wrong",
            "late",
            "early",
            "max resp"
        )?;
        for (name, t) in TYPE_NAMES.iter().zip(&self.types) {
            if name.starts_with('4') && self.type4_unchecked {
                writeln!(
                    f,
                    "{name:<20} unchecked: no segment history, type-4 requests are not answered"
                )?;
                continue;
            }
            let max = t.max_response.map_or("-".to_string(), |m| format!("{m} s"));
            writeln!(
                f,
                "{:<20} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9}",
                name,
                t.expected,
                t.produced,
                t.matching,
                t.missing,
                t.extra,
                t.duplicates,
                t.wrong,
                t.late,
                t.early,
                max
            )?;
        }
        writeln!(
            f,
            "input lines rejected: {}; output lines malformed: {}; history lines malformed: {}; \
             outputs not scored: {}",
            self.rejected_input_lines,
            self.bad_output_lines,
            self.bad_history_lines,
            self.unscored_outputs
        )?;
        if !self.rejected_input_examples.is_empty() {
            writeln!(f, "first rejected input lines:")?;
            for r in &self.rejected_input_examples {
                writeln!(f, "  {r}")?;
            }
        }
        if !self.mismatches.is_empty() {
            writeln!(f, "first problems (expected lines show Emit as _):")?;
            for m in &self.mismatches {
                writeln!(f, "  {m}")?;
            }
        }
        if !self.deadlines_checked {
            writeln!(f, "deadlines not checked (a run as fast as possible)")?;
        }
        writeln!(f, "{}", if self.passed() { "PASS" } else { "FAIL" })
    }
}

// ---------------------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------------------

/// Reads the input, the toll history, the optional segment history and the produced
/// output, recomputes the expected answers and compares. Bad input lines (parse errors
/// and [`InputFilter`] rejections), bad history lines and bad output lines are counted,
/// not fatal; only I/O errors are.
pub fn validate_files(
    input: &Path,
    history: &Path,
    segment_history: Option<&Path>,
    output: &Path,
    opts: &Options,
) -> io::Result<Report> {
    // First pass: the toll-history rows the type-3 requests need.
    let mut wanted: HashSet<TollKey> = HashSet::new();
    for line in BufReader::new(File::open(input)?).lines() {
        if let Ok(t) = parse_input(&line?) {
            if t.typ == 3 {
                wanted.insert((t.vid, t.day, t.xway));
            }
        }
    }
    let tolls = TollTable::load(history, Some(&wanted))?;
    let segments = segment_history.map(SegmentTable::load).transpose()?;

    // Second pass: recompute, streaming.
    let mut parse_errors = 0u64;
    let mut parse_examples: Vec<String> = Vec::new();
    let mut io_error: Option<io::Error> = None;
    let lines = BufReader::new(File::open(input)?)
        .lines()
        .map_while(|l| l.map_err(|e| io_error = Some(e)).ok())
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .filter_map(|(i, l)| match parse_input(&l) {
            Ok(t) => Some(t),
            Err(why) => {
                parse_errors += 1;
                if parse_examples.len() < EXAMPLES {
                    parse_examples.push(format!("input line {}: {why}", i + 1));
                }
                None
            }
        });
    let expected = expected_outputs(lines, &tolls, segments.as_ref());
    if let Some(e) = io_error {
        return Err(e);
    }

    // The produced output.
    let mut produced = Vec::new();
    let mut bad_output_lines = 0u64;
    let mut bad_output_examples = Vec::new();
    for (i, line) in BufReader::new(File::open(output)?).lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        match parse_output(&line) {
            Ok(o) => produced.push(o),
            Err(why) => {
                bad_output_lines += 1;
                if bad_output_examples.len() < opts.show {
                    bad_output_examples.push(format!("malformed  output line {}: {why}", i + 1));
                }
            }
        }
    }

    let mut report = compare(&expected, &produced, opts);
    report.rejected_input_lines += parse_errors;
    parse_examples.extend(report.rejected_input_examples);
    parse_examples.truncate(EXAMPLES);
    report.rejected_input_examples = parse_examples;
    report.bad_output_lines = bad_output_lines;
    report.bad_history_lines =
        tolls.bad_lines() + segments.as_ref().map_or(0, SegmentTable::bad_lines);
    bad_output_examples.extend(report.mismatches);
    bad_output_examples.truncate(opts.show);
    report.mismatches = bad_output_examples;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Positions in segment `s` of the eastbound (Dir 0) road: feet s * 5280 + offset.
    fn at(seg: i64, offset: i64) -> i64 {
        seg * 5280 + offset
    }

    fn report(time: i64, vid: i64, spd: i64, lane: i64, dir: i64, pos: i64) -> Input {
        Input::position(time, vid, spd, 0, lane, dir, pos)
    }

    fn balance(time: i64, vid: i64, qid: i64) -> Input {
        Input {
            typ: 2,
            time,
            vid,
            qid,
            ..Input::from_fields([-1; 15])
        }
    }

    fn daily(time: i64, vid: i64, xway: i64, qid: i64, day: i64) -> Input {
        Input {
            typ: 3,
            time,
            vid,
            xway,
            qid,
            day,
            ..Input::from_fields([-1; 15])
        }
    }

    fn travel(time: i64, qid: i64, s_init: i64, s_end: i64, dow: i64, tod: i64) -> Input {
        Input {
            typ: 4,
            time,
            vid: 1,
            xway: 0,
            qid,
            s_init,
            s_end,
            dow,
            tod,
            ..Input::from_fields([-1; 15])
        }
    }

    fn toll(vid: i64, time: i64, lav: i64, toll: i64) -> Output {
        Output::Toll {
            vid,
            time,
            emit: -1,
            lav,
            toll,
        }
    }

    fn accident(time: i64, vid: i64, seg: i64) -> Output {
        Output::Accident {
            time,
            emit: -1,
            vid,
            seg,
        }
    }

    fn run(mut inputs: Vec<Input>) -> Expected {
        // Input must be in time order; a stable sort keeps the order within a second.
        inputs.sort_by_key(|t| t.time);
        expected_outputs(inputs, &TollTable::new(), None)
    }

    fn outputs_of(e: &Expected, vid: i64) -> Vec<Output> {
        e.outputs
            .iter()
            .filter(|o| match **o {
                Output::Toll { vid: v, .. } | Output::Accident { vid: v, .. } => v == vid,
                _ => false,
            })
            .copied()
            .collect()
    }

    /// `n` vehicles (ids from `first`) reporting once at `time` from segment `seg`.
    fn crowd(first: i64, n: i64, time: i64, spd: i64, seg: i64) -> Vec<Input> {
        (0..n)
            .map(|i| report(time, first + i, spd, 2, 0, at(seg, 10 + i)))
            .collect()
    }

    /// Four reports, 30 s apart from `start`, at one location: stopped at the fourth.
    fn stop(vid: i64, start: i64, lane: i64, dir: i64, pos: i64) -> Vec<Input> {
        (0..4)
            .map(|i| report(start + 30 * i, vid, 0, lane, dir, pos))
            .collect()
    }

    #[test]
    fn nov_and_lav_skip_empty_minutes() {
        let inputs = vec![
            // Minute 1: vehicle 1 means 35.5, vehicle 2 means 50: minute mean 42.75.
            report(0, 1, 30, 1, 0, at(1, 0)),
            report(10, 2, 50, 1, 0, at(1, 5)),
            report(30, 1, 41, 1, 0, at(1, 900)),
            // Minute 2: nothing. Minute 3: 20.
            report(130, 3, 20, 1, 0, at(1, 7)),
            // Minute 4: 10.
            report(185, 4, 10, 1, 0, at(1, 9)),
            // Minute 7: 60.
            report(370, 5, 60, 1, 0, at(1, 11)),
            // Minute 14: minutes 9..13 had no reports.
            report(800, 6, 60, 1, 0, at(1, 11)),
        ];
        let e = run(inputs);
        assert_eq!(
            e.outputs,
            vec![
                toll(1, 0, -1, 0),
                toll(2, 10, -1, 0),
                toll(3, 130, 42, 0), // minutes 1..2: 42.75
                toll(4, 185, 31, 0), // minutes 1..3: (42.75 + 20) / 2 = 31.375
                toll(5, 370, 15, 0), // minutes 2..6: (20 + 10) / 2
                toll(6, 800, -1, 0), // minutes 9..13: none
            ]
        );
        assert_eq!(e.crossings, 6);
        assert_eq!(e.requests_per_type, [7, 0, 0, 0, 0]);
    }

    #[test]
    fn toll_from_nov_and_lav() {
        let mut inputs = crowd(1000, 52, 30, 30, 1);
        // Minute 2: NOV 52, LAV 30: toll 2 * 2^2.
        inputs.push(report(60, 7, 40, 0, 0, at(1, 100)));
        // Minute 3: minute 2 had one vehicle: NOV 1.
        inputs.push(report(120, 8, 40, 0, 0, at(1, 100)));
        let e = run(inputs);
        assert_eq!(outputs_of(&e, 7), vec![toll(7, 60, 30, 8)]);
        // LAV over minutes 1..2: (30 + 40) / 2.
        assert_eq!(outputs_of(&e, 8), vec![toll(8, 120, 35, 0)]);
        // NOV counts distinct vehicles: two reports of one vehicle are one.
        let mut inputs = crowd(1000, 51, 1, 30, 1);
        inputs.extend(crowd(1000, 1, 31, 30, 1));
        inputs.push(report(60, 7, 40, 0, 0, at(1, 100)));
        let e = run(inputs);
        assert_eq!(outputs_of(&e, 7), vec![toll(7, 60, 30, 2)]);
    }

    #[test]
    fn accident_detected_active_cleared() {
        let p = at(10, 100);
        let mut inputs = Vec::new();
        // Vehicle 1 stopped at second 90, vehicle 2 at second 100 (minute 2): detection.
        inputs.extend(stop(1, 0, 1, 0, p));
        inputs.extend(stop(2, 10, 1, 0, p));
        // Vehicle 1 moves at second 150 (minute 3): cleared in minute 3, active only then.
        inputs.push(report(150, 1, 10, 1, 0, p + 50));
        inputs.push(report(115, 4, 50, 1, 0, at(8, 0))); // minute 2: not yet active
        inputs.push(report(125, 3, 50, 1, 0, at(6, 0))); // minute 3, 4 upstream
        inputs.push(report(170, 6, 50, 1, 0, at(5, 0))); // minute 3, 5 upstream: out of range
        inputs.push(report(175, 7, 50, 1, 0, at(11, 0))); // minute 3, downstream: no
        inputs.push(report(178, 8, 50, 1, 1, at(12, 0))); // minute 3, other direction: no
        inputs.push(report(179, 9, 50, 0, 0, at(10, 9))); // minute 3, same segment
        inputs.push(report(185, 5, 50, 1, 0, at(8, 0))); // minute 4: over; LAV of vehicle 4
        let e = run(inputs);
        assert_eq!(e.accidents, 1);
        assert_eq!(outputs_of(&e, 4), vec![toll(4, 115, -1, 0)]);
        assert_eq!(
            outputs_of(&e, 3),
            vec![toll(3, 125, -1, 0), accident(125, 3, 10)]
        );
        assert_eq!(outputs_of(&e, 6), vec![toll(6, 170, -1, 0)]);
        assert_eq!(outputs_of(&e, 7), vec![toll(7, 175, -1, 0)]);
        assert_eq!(outputs_of(&e, 8), vec![toll(8, 178, -1, 0)]);
        assert_eq!(outputs_of(&e, 9).len(), 2);
        assert_eq!(outputs_of(&e, 5), vec![toll(5, 185, 50, 0)]);
        // The stopped vehicles themselves: one notification each, at entry.
        assert_eq!(outputs_of(&e, 1).len(), 1);
        assert_eq!(outputs_of(&e, 2).len(), 1);
    }

    #[test]
    fn accident_needs_same_lane_and_two_vehicles() {
        let p = at(10, 100);
        let mut inputs = Vec::new();
        inputs.extend(stop(1, 0, 1, 0, p));
        inputs.extend(stop(2, 10, 2, 0, p)); // other lane
        inputs.extend(stop(3, 20, 1, 0, p + 1)); // other position
        inputs.push(report(200, 4, 50, 1, 0, at(9, 0)));
        let e = run(inputs);
        assert_eq!(e.accidents, 0);
        assert_eq!(outputs_of(&e, 4), vec![toll(4, 200, -1, 0)]);
    }

    #[test]
    fn accident_cleared_by_new_trip_and_third_vehicle() {
        let p = at(10, 100);
        let mut inputs = Vec::new();
        inputs.extend(stop(1, 0, 1, 0, p));
        inputs.extend(stop(2, 10, 1, 0, p));
        inputs.extend(stop(3, 20, 1, 0, p)); // third stopped vehicle: same accident
        inputs.push(report(150, 1, 30, 1, 0, p + 40)); // two still stopped: not cleared
        inputs.push(report(175, 12, 50, 1, 0, at(9, 0))); // minute 3: active
                                                          // Vehicle 2 re-enters (lane 0, 85 s after its last report, same place): the new
                                                          // trip leaves one stopped vehicle: cleared in minute 4.
        inputs.push(report(185, 2, 0, 0, 0, p));
        inputs.push(report(230, 10, 50, 1, 0, at(9, 0))); // minute 4: still active
        inputs.push(report(245, 11, 50, 1, 0, at(9, 0))); // minute 5: not active
        let e = run(inputs);
        assert_eq!(e.accidents, 1);
        assert_eq!(outputs_of(&e, 12)[1], accident(175, 12, 10));
        assert_eq!(outputs_of(&e, 10)[1], accident(230, 10, 10));
        assert_eq!(outputs_of(&e, 11), vec![toll(11, 245, 50, 0)]);
        // Vehicle 2's new trip is a crossing (notified) though in the same segment, in
        // minute 4, while the accident is still active. LAV: minutes 1, 2 (all 0) and 3
        // (vehicle 1 at 30): 10.
        assert_eq!(
            outputs_of(&e, 2),
            vec![
                toll(2, 10, -1, 0),
                toll(2, 185, 10, 0),
                accident(185, 2, 10)
            ]
        );
    }

    #[test]
    fn second_accident_in_same_segment() {
        let mut inputs = Vec::new();
        // First accident: detected minute 2, cleared minute 3.
        inputs.extend(stop(1, 0, 1, 0, at(10, 100)));
        inputs.extend(stop(2, 10, 1, 0, at(10, 100)));
        inputs.push(report(150, 1, 10, 1, 0, at(10, 150)));
        // Second accident, other position, same segment: detected minute 7 (second 390).
        inputs.extend(stop(3, 300, 2, 0, at(10, 2000)));
        inputs.extend(stop(4, 301, 2, 0, at(10, 2000)));
        inputs.push(report(290, 5, 50, 1, 0, at(9, 0))); // minute 5: none active
        inputs.push(report(395, 6, 50, 1, 0, at(9, 0))); // minute 7: detected then
        inputs.push(report(425, 7, 50, 1, 0, at(9, 0))); // minute 8: active
        inputs.push(report(900, 8, 50, 1, 0, at(9, 0))); // never cleared: still active
        let e = run(inputs);
        assert_eq!(e.accidents, 2);
        assert_eq!(outputs_of(&e, 5).len(), 1);
        assert_eq!(outputs_of(&e, 6).len(), 1);
        assert_eq!(outputs_of(&e, 7)[1], accident(425, 7, 10));
        assert_eq!(outputs_of(&e, 8)[1], accident(900, 8, 10));
    }

    #[test]
    fn nearest_accident_in_travel_direction() {
        let mut inputs = Vec::new();
        // Eastbound accidents in 14 and 12, westbound in 10 and 12 (all detected minute 2).
        let mut vid = 100;
        for (dir, seg) in [(0, 14), (0, 12), (1, 10), (1, 12)] {
            inputs.extend(stop(vid, 0, 1, dir, at(seg, 50)));
            inputs.extend(stop(vid + 1, 1, 1, dir, at(seg, 50)));
            vid += 2;
        }
        inputs.push(report(200, 1, 50, 1, 0, at(11, 0))); // east into 11: 12 nearest
        inputs.push(report(200, 2, 50, 1, 1, at(13, 0))); // west into 13: 12 nearest
        inputs.push(report(200, 3, 50, 1, 1, at(11, 0))); // west into 11: 10
        inputs.push(report(200, 4, 50, 1, 0, at(13, 0))); // east into 13: 14
        let e = run(inputs);
        assert_eq!(e.accidents, 4);
        assert_eq!(outputs_of(&e, 1)[1], accident(200, 1, 12));
        assert_eq!(outputs_of(&e, 2)[1], accident(200, 2, 12));
        assert_eq!(outputs_of(&e, 3)[1], accident(200, 3, 10));
        assert_eq!(outputs_of(&e, 4)[1], accident(200, 4, 14));
    }

    #[test]
    fn exit_lane_and_no_trip_reports() {
        let inputs = vec![
            report(0, 1, 50, 0, 0, at(5, 0)),
            report(30, 1, 50, 2, 0, at(6, 0)),
            // Exit ramp in a new segment: no notification.
            report(60, 1, 50, 4, 0, at(7, 0)),
            // No trip: not notified, but counted in the statistics of segment 8.
            report(90, 1, 50, 2, 0, at(8, 0)),
            // New entrance 30 s later: a new trip.
            report(120, 1, 50, 0, 0, at(8, 10)),
            report(150, 1, 50, 1, 0, at(8, 20)),
            report(150, 2, 50, 1, 0, at(8, 20)),
        ];
        let e = run(inputs);
        assert_eq!(
            outputs_of(&e, 1),
            vec![toll(1, 0, -1, 0), toll(1, 30, -1, 0), toll(1, 120, 50, 0)]
        );
        assert_eq!(e.no_trip_reports, 1);
        // NOV of segment 8 for minute 3 counts vehicle 1 once (reports at 120 and 150).
        assert_eq!(outputs_of(&e, 2), vec![toll(2, 150, 50, 0)]);
    }

    #[test]
    fn re_entry_rules() {
        let inputs = vec![
            report(0, 1, 50, 2, 0, at(5, 0)),
            // Lane 0 more than 60 s later, same segment: a new trip, notified.
            report(61, 1, 50, 0, 0, at(5, 10)),
            // Lane 0 30 s later: same trip, same segment: nothing.
            report(91, 1, 50, 0, 0, at(5, 20)),
            // A 90 s gap in a travel lane: same trip, same segment: nothing.
            report(181, 1, 50, 2, 0, at(5, 30)),
            // Lane 0 exactly 60 s later: same trip.
            report(241, 1, 50, 0, 0, at(5, 40)),
            // Another expressway after a long gap, lane 0: a new trip.
            Input::position(400, 1, 50, 3, 0, 0, at(5, 40)),
        ];
        let e = run(inputs);
        let times: Vec<i64> = outputs_of(&e, 1).iter().map(Output::time).collect();
        assert_eq!(times, vec![0, 61, 400]);
    }

    #[test]
    fn balances_across_notifications() {
        let mut inputs = Vec::new();
        inputs.extend(crowd(1000, 52, 10, 30, 1));
        inputs.extend(crowd(2000, 52, 10, 30, 2));
        inputs.push(balance(50, 7, 1)); // no notification yet
        inputs.push(balance(60, 7, 2)); // same second as the first: after it
        inputs.push(report(60, 7, 40, 0, 0, at(1, 0))); // toll 8
        inputs.push(balance(75, 7, 3));
        inputs.push(report(90, 7, 40, 1, 0, at(2, 0))); // toll 8
        inputs.push(balance(90, 7, 4));
        inputs.push(report(120, 7, 40, 1, 0, at(3, 0))); // toll 0
        inputs.push(balance(125, 7, 5));
        // Exit and re-entry: the account is kept.
        inputs.push(report(150, 7, 40, 4, 0, at(4, 0)));
        inputs.push(report(170, 7, 40, 0, 0, at(1, 0))); // toll 0 (minute 3)
        inputs.push(balance(170, 7, 6));
        let e = run(inputs);
        let balances: Vec<Output> = e.outputs.iter().filter(|o| o.typ() == 2).copied().collect();
        let b = |time, result_time, qid, bal| Output::Balance {
            time,
            emit: -1,
            result_time,
            qid,
            bal,
        };
        assert_eq!(
            balances,
            vec![
                b(50, 50, 1, 0),
                b(60, 60, 2, 0),
                b(75, 60, 3, 0),
                b(90, 90, 4, 8),
                b(125, 120, 5, 16),
                b(170, 170, 6, 16),
            ]
        );
        assert_eq!(
            outputs_of(&e, 7),
            vec![
                toll(7, 60, 30, 8),
                toll(7, 90, 30, 8),
                toll(7, 120, -1, 0),
                toll(7, 170, 35, 0)
            ]
        );
    }

    #[test]
    fn daily_expenditure_needs_a_row() {
        let mut tolls = TollTable::new();
        tolls.insert(7, 3, 0, 42);
        let inputs = vec![
            daily(5, 7, 0, 1, 3),
            daily(5, 7, 0, 2, 0), // Day 0: no row
            daily(6, 7, 1, 3, 3), // other expressway: no row
        ];
        let e = expected_outputs(inputs, &tolls, None);
        assert_eq!(
            e.outputs,
            vec![Output::Daily {
                time: 5,
                emit: -1,
                qid: 1,
                bal: 42
            }]
        );
        assert_eq!(e.daily_without_row, 2);
    }

    #[test]
    fn toll_history_file_format() {
        let text = "7,3,0,42\n7,3,0,43\nbad\n8,1,0,5,9\n\n9,1,0,1\n";
        let t = TollTable::read(text.as_bytes(), None).expect("in memory");
        assert_eq!((t.get(7, 3, 0), t.len(), t.bad_lines()), (Some(42), 2, 3));
        let wanted: HashSet<TollKey> = [(9, 1, 0)].into_iter().collect();
        let t = TollTable::read(text.as_bytes(), Some(&wanted)).expect("in memory");
        assert_eq!(
            (t.get(7, 3, 0), t.get(9, 1, 0), t.len()),
            (None, Some(1), 1)
        );
        let s = SegmentTable::read("0,1,3,7,95,60,2\n0,1,3\n".as_bytes()).expect("in memory");
        assert_eq!((s.get((0, 1, 3, 7, 95)), s.bad_lines()), (Some((60, 2)), 1));
    }

    #[test]
    fn travel_time_walk_wraps_the_week() {
        let mut table = SegmentTable::new();
        table.insert((0, 1, 3, 7, 95), 60, 2); // Sunday 23:45-23:59
        table.insert((0, 1, 2, 1, 0), 4, 3); // below 5 mph: 5 mph, toll still counts
                                             // (0, 1, 1, 1, 0) missing: 5 mph, toll 0.
        table.insert((0, 0, 5, 1, 0), 7, 1);
        table.insert((0, 0, 6, 1, 0), 7, 1);
        table.insert((0, 1, 5, 1, 0), 60, 9);
        let inputs = vec![
            // Westbound 3 -> 1 from the last minute of the week.
            travel(1, 1, 3, 1, 7, 1440),
            // Eastbound 5 -> 6: 3600000 / 7 = 514285 ms twice = 1028570 ms.
            travel(1, 2, 5, 6, 1, 1),
            // s_init = s_end: westbound.
            travel(2, 3, 5, 5, 1, 1),
            // Out of range: not answered.
            travel(2, 4, 5, 100, 1, 1),
        ];
        let e = expected_outputs(inputs.clone(), &TollTable::new(), Some(&table));
        let t = |time, qid, travel_time, toll| Output::Travel {
            time,
            emit: -1,
            qid,
            travel_time,
            toll,
        };
        // 60000 ms (week minute 10079), then week minute 0 (720000 ms), then week
        // minute 13 (720000 ms): 1500000 ms.
        assert_eq!(
            e.outputs,
            vec![t(1, 1, 1500, 5), t(1, 2, 1028, 2), t(2, 3, 60, 9)]
        );
        assert!(e.type4_answered);
        assert_eq!(e.unanswerable_travel_requests, 1);
        // Without a segment history type 4 is not answered, and the report says so.
        let e = expected_outputs(inputs, &TollTable::new(), None);
        assert!(e.outputs.is_empty() && !e.type4_answered);
        let produced = vec![t(1, 1, 1500, 5).with_emit(2)];
        let report = compare(&e, &produced, &Options::default());
        assert!(report.type4_unchecked && report.passed());
        assert_eq!(report.unscored_outputs, 1);
        assert!(report.to_string().contains("unchecked"));
    }

    #[test]
    fn travel_time_crosses_buckets() {
        // 5 mph segments take 12 minutes each: the third segment is looked up 24
        // minutes later, in bucket 1.
        let mut table = SegmentTable::new();
        table.insert((0, 0, 12, 1, 1), 60, 100);
        table.insert((0, 0, 11, 1, 1), 60, 1000); // walked in bucket 0: not used
        let e = expected_outputs(
            vec![travel(0, 1, 10, 12, 1, 1)],
            &TollTable::new(),
            Some(&table),
        );
        assert_eq!(
            e.outputs,
            vec![Output::Travel {
                time: 0,
                emit: -1,
                qid: 1,
                travel_time: 720 + 720 + 60,
                toll: 100
            }]
        );
    }

    #[test]
    fn rejected_inputs_are_counted() {
        let inputs = vec![
            report(10, 1, 50, 1, 0, at(1, 0)),
            report(10, 1, 50, 1, 0, at(1, 0)), // same vehicle, same second
            report(9, 2, 50, 1, 0, at(1, 0)),  // decreasing time
            report(11, 3, 50, 5, 0, at(1, 0)), // lane 5
            report(11, 4, -3, 1, 0, at(1, 0)), // negative speed: kept
        ];
        let e = expected_outputs(inputs, &TollTable::new(), None);
        assert_eq!(e.rejected, 3);
        assert_eq!(e.reject_examples.len(), 3);
        assert_eq!(e.outputs.len(), 2);
    }

    #[test]
    fn lav_truncates_the_exact_mean() {
        // Minute 1: vehicle means 1/3... use three vehicles: 10, 10, 11 -> 31/3 = 10.33.
        let mut inputs = vec![
            report(0, 1, 10, 1, 0, at(1, 0)),
            report(1, 2, 10, 1, 0, at(1, 1)),
            report(2, 3, 11, 1, 0, at(1, 2)),
            // Minute 2: one vehicle with 2 reports: (20 + 21) / 2 = 20.5.
            report(60, 4, 20, 1, 0, at(1, 3)),
            report(90, 4, 21, 1, 0, at(1, 3)),
        ];
        // Minute 3: (31/3 + 41/2) / 2 = (62 + 123) / 12 = 15.41 -> 15.
        inputs.push(report(120, 5, 1, 1, 0, at(1, 4)));
        let e = run(inputs);
        assert_eq!(outputs_of(&e, 5), vec![toll(5, 120, 15, 0)]);
    }

    fn scenario() -> Expected {
        let mut tolls = TollTable::new();
        tolls.insert(7, 3, 0, 42);
        let mut inputs = crowd(1000, 52, 10, 30, 1);
        inputs.push(report(60, 7, 40, 0, 0, at(1, 0)));
        inputs.push(balance(61, 7, 1));
        inputs.push(report(90, 7, 40, 1, 0, at(2, 0)));
        inputs.push(balance(95, 7, 2));
        inputs.push(daily(95, 7, 0, 3, 3));
        expected_outputs(inputs, &tolls, None)
    }

    #[test]
    fn compare_accepts_correct_output() {
        let e = scenario();
        let produced: Vec<Output> = e
            .outputs
            .iter()
            .map(|o| o.with_emit(o.time() + 2))
            .collect();
        let report = compare(&e, &produced, &Options::default());
        assert!(report.passed(), "{report}");
        assert_eq!(report.types[0].matching, 54);
        assert_eq!(report.types[2].matching, 2);
        assert_eq!(report.types[3].matching, 1);
        assert_eq!(report.types[0].max_response, Some(2));
        assert!(report.to_string().ends_with("PASS\n"));
    }

    #[test]
    fn compare_finds_every_kind_of_error() {
        let e = scenario();
        let mut produced: Vec<Output> = Vec::new();
        for o in &e.outputs {
            match *o {
                // Missing: vehicle 1000's notification.
                Output::Toll { vid: 1000, .. } => {}
                // Duplicate: vehicle 1001's notification twice.
                Output::Toll { vid: 1001, .. } => {
                    produced.push(o.with_emit(11));
                    produced.push(o.with_emit(12));
                }
                // Late: vehicle 1002's notification after 6 s.
                Output::Toll { vid: 1002, .. } => produced.push(o.with_emit(16)),
                // Wrong balance.
                Output::Balance {
                    time,
                    result_time,
                    qid: 2,
                    bal,
                    ..
                } => produced.push(Output::Balance {
                    time,
                    emit: time,
                    result_time,
                    qid: 2,
                    bal: bal + 1,
                }),
                _ => produced.push(o.with_emit(o.time() + 1)),
            }
        }
        // Extra: an accident notification nobody expects; and a late daily expenditure.
        produced.push(Output::Accident {
            time: 90,
            emit: 90,
            vid: 7,
            seg: 3,
        });
        let mut report = compare(&e, &produced, &Options::default());
        let t = &report.types;
        assert_eq!((t[0].missing, t[0].duplicates, t[0].late), (1, 1, 1));
        assert_eq!((t[0].extra, t[0].wrong, t[0].matching), (0, 0, 53));
        assert_eq!((t[1].extra, t[1].expected), (1, 0));
        assert_eq!((t[2].wrong, t[2].matching), (1, 1));
        assert_eq!(t[3].errors(), 0);
        assert!(!report.passed());
        assert_eq!(report.mismatches.len(), 5);
        assert_eq!(
            report.mismatches,
            [
                "missing    0,1000,10,_,-1,0",
                "duplicate  0,1001,10,12,-1,0",
                "late       0,1002,10,16,-1,0  (response 6 s > 5 s)",
                "extra      1,90,90,7,3",
                "wrong      expected 2,95,_,90,2,8  produced 2,95,95,90,2,9",
            ]
        );
        let text = report.to_string();
        assert!(text.contains("wrong      expected 2,95,_,90,2,8  produced 2,95,95,90,2,9"));
        assert!(text.ends_with("FAIL\n"));
        // A second answer to a balance request is a duplicate.
        produced.retain(|o| o.typ() != 1 && o.time() != 10);
        produced.push(Output::Balance {
            time: 61,
            emit: 62,
            result_time: 61,
            qid: 1,
            bal: 0,
        });
        report = compare(&e, &produced, &Options::default());
        assert_eq!(report.types[2].duplicates, 1);
        // Outputs before score_from_time are not scored.
        let opts = Options {
            score_from_time: 96,
            ..Options::default()
        };
        report = compare(&e, &produced, &opts);
        assert!(report.passed(), "{report}");
    }

    #[test]
    fn validate_files_end_to_end() {
        let dir = std::env::temp_dir().join(format!("braid-validate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let input = dir.join("input.csv");
        let history = dir.join("tolls.csv");
        let output = dir.join("output.csv");
        let lines = [
            "0,0,7,50,0,0,0,1,5280,-1,-1,-1,-1,-1,-1",
            "0,0,7,50,0,0,0,1,5280,-1,-1,-1,-1,-1,-1",
            "garbage",
            "3,1,7,0,0,0,0,1,5280,5,-1,-1,-1,-1,3",
            "2,2,7,-1,-1,-1,-1,-1,-1,6,-1,-1,-1,-1,-1",
        ];
        std::fs::write(&input, lines.join("\n")).expect("write");
        std::fs::write(&history, "7,3,0,42\n7,4,0,1\n").expect("write");
        std::fs::write(&output, "0,7,0,1,-1,0\n3,1,2,5,42\n2,2,9,0,6,0\nnonsense\n")
            .expect("write");
        let report = validate_files(&input, &history, None, &output, &Options::default())
            .expect("files exist");
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(report.rejected_input_lines, 2);
        assert_eq!(report.bad_output_lines, 1);
        assert_eq!(report.types[2].late, 1);
        assert_eq!(report.types[0].matching + report.types[3].matching, 2);
        assert!(!report.passed());
        assert!(report.mismatches[0].starts_with("malformed"));
    }

    /// The third-party file (`gunzip -c` to /tmp/lrb first):
    /// `cargo test --release -p linear-road --lib validate -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn third_party_file() {
        let input = Path::new("/tmp/lrb/lrb-1x-30min.dat");
        let history = Path::new("/tmp/lrb/lrb-1x-30min.tolls.dat");
        if !input.exists() || !history.exists() {
            eprintln!("skipped: {} not found", input.display());
            return;
        }
        let start = std::time::Instant::now();
        let tolls = TollTable::load(history, None).expect("readable");
        let loaded = start.elapsed();
        let text = std::fs::read_to_string(input).expect("readable");
        let mut parse_errors = 0;
        let inputs: Vec<Input> = text
            .lines()
            .filter_map(|l| parse_input(l).map_err(|_| parse_errors += 1).ok())
            .collect();
        drop(text);
        let parsed = start.elapsed();
        let e = expected_outputs(inputs, &tolls, None);
        let done = start.elapsed();
        let per_type = e.outputs_per_type();
        eprintln!(
            "toll history {} rows ({} bad) loaded in {loaded:?}; input parsed by {parsed:?} \
             ({parse_errors} parse errors); recomputed in {:?}",
            tolls.len(),
            tolls.bad_lines(),
            done - parsed
        );
        eprintln!(
            "inputs per type {:?}; rejected {}; outputs per type {per_type:?}; crossings {}; \
             accidents {}; no-trip reports {}; type 3 without row {}",
            e.requests_per_type,
            e.rejected,
            e.crossings,
            e.accidents,
            e.no_trip_reports,
            e.daily_without_row
        );
        for ex in &e.reject_examples {
            eprintln!("  {ex}");
        }
        let charged = e
            .outputs
            .iter()
            .filter(|o| matches!(o, Output::Toll { toll, .. } if *toll > 0))
            .count();
        let max_toll = e
            .outputs
            .iter()
            .filter_map(|o| match o {
                Output::Toll { toll, .. } => Some(*toll),
                _ => None,
            })
            .max();
        eprintln!("tolls > 0: {charged}; largest toll {max_toll:?}");
        assert!(charged > 0 && e.accidents > 0 && per_type[1] > 0);
        // The whole file path: write the expected answers as a system would (Emit =
        // Time + 1) and validate them with validate_files.
        let output = Path::new("/tmp/lrb/validator-self-output.csv");
        let text: String = e
            .outputs
            .iter()
            .map(|o| format!("{}\n", o.with_emit(o.time() + 1)))
            .collect();
        std::fs::write(output, text).expect("writable /tmp/lrb");
        let start = std::time::Instant::now();
        let report = validate_files(input, history, None, output, &Options::default())
            .expect("readable files");
        eprintln!("{report}validate_files took {:?}", start.elapsed());
        std::fs::remove_file(output).ok();
        assert!(report.passed());
    }
}
