//! The Linear Road stream function of one partition: segment statistics, stopped
//! vehicles and accidents, toll and accident notifications, account balances, daily
//! expenditures and travel-time estimates (`docs/linear-road.md` sections 4-8).
//!
//! This module is pure: it knows nothing of the engine. One [`Partition`] runs per
//! partition of the input and sees its sub-stream in input order (non-decreasing Time):
//! position reports of the expressways it owns, type-3 and type-4 requests about them,
//! and every type-2 request (they are broadcast). The engine calls
//! [`Partition::end_of_second`] after the last tuple of each second and
//! [`Partition::finish`] at the end; [`merge_balance`] combines the q
//! [`BalancePartial`]s of one type-2 request (doc 6.5).
//!
//! ```
//! use std::sync::Arc;
//! use linear_road::expressway::{Emitted, Partition};
//! use linear_road::history::{SegmentHistory, TollHistory};
//! use linear_road::record::{Input, Output};
//!
//! let mut p = Partition::new(Arc::new(TollHistory::default()), Arc::new(SegmentHistory::empty()));
//! let mut out = Vec::new();
//! p.process(&Input::position(0, 7, 55, 0, 0, 0, 5280 * 3), &mut out);
//! p.end_of_second(0, &mut out);
//! // The first report of a trip is a crossing: one toll notification (LAV -1, toll 0).
//! assert_eq!(
//!     out,
//!     vec![Emitted::Out(Output::Toll { vid: 7, time: 0, emit: -1, lav: -1, toll: 0 })]
//! );
//! ```
//!
//! # State and its bounds
//!
//! * Per vehicle that has reported in the partition: one 32-byte record (needed for
//!   balances, which span the run, and for the re-entry rules of doc 8): its account
//!   (latest report and notification times, latest toll, total), its trip while it is
//!   on one (location, consecutive reports there), and its group of the current minute
//!   (segment, speed sum, report count), kept in chunks that growing never copies. An
//!   index of 8-byte slots (the id beside the record's number, at most 4/5 full, grown
//!   by a quarter; the only place the id is kept) finds it: a position report looks up one
//!   record, where it once looked up an account, a trip slot and a (vehicle, segment)
//!   group in three hash maps.
//! * Per expressway: 200 segment records, each with the aggregates of the last five
//!   completed minutes (a ring), the answer cached for the current minute and the
//!   accidents that can still be active.
//! * For the current minute only: the groups vehicles left for another segment within
//!   it (12 bytes each, chained from the vehicle's record, so a vehicle that comes back
//!   to a segment in the same minute takes its group back). A minute's end reads the
//!   records once, in memory order, and these.
//!
//! # Checkpoints
//!
//! [`Partition::save_state`] writes all of the above but the index (bincode, varint
//! integers; the histories are not state, their owner supplies them again) between
//! two seconds, where no type-2 request is pending; [`Partition::restore_state`] reads
//! it back, checks the record, chain, segment-record and expressway references before
//! taking it, and rebuilds the index.
//!
//! A checkpoint restores at another partition count: [`Partition::absorb`] takes the
//! expressways of an old partition that route to a new one, with everything on them,
//! and shares out its vehicles' records and accounts (see there).
//!
//! # Segment statistics (doc 4)
//!
//! Reports arrive in time order, so when the first report of minute m arrives, minute
//! m-1 is complete: the accumulators of m-1 are folded into per-segment aggregates, and
//! NOV/LAV of any crossing at minute m read completed minutes m-5..m-1 only. A minute's
//! aggregate is exact: it holds the number of vehicles and the sum over vehicles of
//! `S_v * (L / c_v)` (an `i128`), where `S_v`, `c_v` are the vehicle's speed sum and
//! report count in that segment and minute, and L = lcm(1..60), which every count
//! divides (a vehicle has at most one report per second). LAV is then a mean of
//! rationals truncated exactly (toward zero), without floating point.
//!
//! # Known limit of partitioning
//!
//! Per-trip state lives in the partition of the expressway. A vehicle that is stopped
//! on one expressway and starts a new trip on an expressway of *another* partition does
//! not clear the accident it was part of (the first partition never sees that report),
//! and the re-entry rules of doc 8 (60 s since the previous report, after the exit-lane
//! report) look at the vehicle's reports in this partition only. Neither matters for a
//! vehicle that exits before re-entering elsewhere; with one partition the behaviour is
//! exactly the doc's (a test checks 1 vs 2 partitions on generated input). Accounts are exact across
//! partitions (doc 6.5, [`merge_balance`]).

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::Arc;

use bincode::Options as _;
use serde::{Deserialize, Serialize};

use crate::history::{SegmentHistory, TollHistory};
use crate::record::{Input, Output};

// ---------------------------------------------------------------------------------------
// Hashing

/// A tiny multiplicative hasher (the rustc "Fx" hash): keys here are integers chosen by
/// the input, and HashDoS resistance is not needed in a benchmark.
#[derive(Clone, Copy, Default)]
struct FxHasher {
    hash: u64,
}

const FX_SEED: u64 = 0xf135_7aea_2e62_a9c5;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash ^ word).wrapping_mul(FX_SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(b));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_i64(&mut self, i: i64) {
        self.add(i as u64);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        // The product's entropy is in the high bits; the table indexes with the low ones.
        self.hash.rotate_left(26)
    }
}

type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

// ---------------------------------------------------------------------------------------
// Public types

/// What a partition produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Emitted {
    /// A final output line; its `emit` field is -1 (the engine stamps it).
    Out(Output),
    /// This partition's share of a type-2 answer; combine the q shares of one request
    /// with [`merge_balance`].
    BalancePartial(BalancePartial),
}

/// One partition's contribution to a type-2 request (doc 6.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BalancePartial {
    /// Time of the request.
    pub time: i64,
    /// Query id of the request.
    pub qid: i64,
    /// The requesting vehicle.
    pub vid: i64,
    /// Time of the vehicle's latest toll notification in this partition with
    /// time <= `time`; -1 if none.
    pub latest: i64,
    /// Sum of this partition's tolls for the vehicle notified strictly before `latest`.
    pub sum_before: i64,
    /// Sum of all this partition's tolls for the vehicle notified at or before `time`.
    pub total: i64,
}

/// Combines the partials of one type-2 request from all q partitions (doc 6.5):
/// r = the largest `latest`; Bal = the owner's `sum_before` plus the other partitions'
/// `total`s (a partition whose `latest` equals r counts as an owner: a vehicle has at most
/// one notification per second). Without a notification anywhere the answer is
/// (ResultTime = Time, Bal = 0). The output's `emit` is -1. An empty slice yields an
/// answer with Time, QID and ResultTime -1.
pub fn merge_balance(partials: &[BalancePartial]) -> Output {
    let (time, qid) = partials.first().map_or((-1, -1), |p| (p.time, p.qid));
    let r = partials.iter().map(|p| p.latest).max().unwrap_or(-1);
    if r < 0 {
        return Output::Balance {
            time,
            emit: -1,
            result_time: time,
            qid,
            bal: 0,
        };
    }
    let bal = partials
        .iter()
        .map(|p| if p.latest == r { p.sum_before } else { p.total })
        .sum();
    Output::Balance {
        time,
        emit: -1,
        result_time: r,
        qid,
        bal,
    }
}

/// Sizes of a partition's state, for memory reporting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PartitionStats {
    /// Vehicles currently on a trip (trip records in use).
    pub vehicles_on_road: usize,
    /// Vehicles ever seen (account and re-entry records).
    pub vehicles_known: usize,
    /// Expressways seen.
    pub xways: usize,
    /// Segment records (200 per expressway).
    pub segments: usize,
    /// Locations with at least one stopped vehicle.
    pub stopped_locations: usize,
    /// Accidents kept because they may still be active.
    pub accidents: usize,
    /// (vehicle, segment) accumulators of the current minute.
    pub minute_groups: usize,
    /// Type-2 requests waiting for the end of their second.
    pub pending_balances: usize,
    /// Position reports ignored because Lane, Dir or Seg was out of range.
    pub ignored_reports: u64,
    /// Records ignored because their Type is not 0-4.
    pub ignored_types: u64,
    /// Approximate heap bytes held by the partition (histories excluded): the sum of
    /// `parts`.
    pub heap_bytes: usize,
    /// What `heap_bytes` holds: records, index, left groups, segment records and the rest.
    pub parts: StateBytes,
}

/// Heap bytes of a partition's state by what holds them (at capacity: a list's capacity
/// beyond its length is never touched, so it is not resident).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StateBytes {
    /// Vehicle records (in their chunks).
    pub records: usize,
    /// The vehicle id index (its slots, ids beyond 32 bits).
    pub index: usize,
    /// Groups left within the current minute (the list keeps the capacity of the
    /// busiest minute).
    pub left: usize,
    /// Segment records (minute aggregates, accidents) and stopped vehicles.
    pub road: usize,
    /// Tolls and totals beyond 32 bits, pending type-2 requests.
    pub other: usize,
}

impl StateBytes {
    /// Records, index, left groups, segment records, the rest: in that order.
    pub fn each(&self) -> [usize; 5] {
        [self.records, self.index, self.left, self.road, self.other]
    }
}

// ---------------------------------------------------------------------------------------
// Internal state

const NONE: u32 = u32::MAX;
/// Segment records per expressway: Dir (2) x Seg (100).
const SEGS_PER_XWAY: u32 = 200;
/// Completed minutes kept per segment: m-5..m-1.
const WINDOW: usize = 5;
/// Reports after which a vehicle at one location is stopped (doc 5).
const STOP_REPORTS: u8 = 4;

/// lcm(1..=60): every per-(vehicle, segment, minute) report count divides it.
const LCM_60: i128 = lcm_to(60);

const fn lcm_to(n: i128) -> i128 {
    let mut l = 1i128;
    let mut k = 2i128;
    while k <= n {
        let (mut a, mut b) = (l, k);
        while b != 0 {
            let r = a % b;
            a = b;
            b = r;
        }
        l = l / a * k;
        k += 1;
    }
    l
}

/// `LCM_60 / c`, so a vehicle's mean S/c enters a minute's sum as S * SCALE[c].
const SCALE: [i128; 61] = {
    let mut t = [0i128; 61];
    let mut c = 1;
    while c <= 60 {
        t[c] = LCM_60 / c as i128;
        c += 1;
    }
    t
};

#[inline]
fn scale(count: u32) -> i128 {
    match SCALE.get(count as usize) {
        Some(&s) => s,
        // More than 60 reports in a minute needs duplicate Times, which the input filter
        // rejects; stay total with a rounded scale.
        None => LCM_60 / i128::from(count),
    }
}

/// A location (doc 5): expressway (partition-local index), Dir, Lane, Pos.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Loc {
    xway: u32,
    pos: u32,
    dir: u8,
    lane: u8,
}

/// `Record::latest` of a vehicle that has had no toll notification.
const NO_LATEST: u32 = u32::MAX;

/// `Record::latest` of a latest notification that does not pack into 32 bits (a toll
/// beyond [`TOLL_BITS`], a time more than [`LATEST_AGO`] s before the latest report or
/// after it), kept in `Partition::big_latest`.
const BIG_LATEST: u32 = u32::MAX - 1;

/// Bits of `Record::latest` that hold the toll: up to 2,097,151 (2 (NOV - 50)^2 for a
/// NOV up to 1,073). 16 bits were too few: at the rating's peak load the tolls of
/// nearly half the vehicles went to the side map, which cost more memory and time than
/// the 4 bytes a record saved.
const TOLL_BITS: u32 = 21;

/// The most seconds `Record::latest` packs between the latest notification and the
/// latest report: 34 minutes (a trip notifies at each segment it enters, and a trip
/// that starts notifies; the next value up would make a `NO_LATEST` or `BIG_LATEST` of
/// some tolls).
const LATEST_AGO: u32 = (1 << (32 - TOLL_BITS)) - 2;

/// `Record::total` of a total beyond 32 bits, kept in `Partition::big_totals`.
const BIG_TOTAL: u32 = u32::MAX;

/// Bits of `Record::at` that hold Pos (the lane and the count of reports at the
/// location above them).
const POS_BITS: u32 = 26;
/// Bits of `Record::g_sum` that hold the speed sum (the report count above them).
const SPD_BITS: u32 = 24;
/// The speed sums `Record::g_sum` holds: 255 reports of any Spd in 16 bits.
const SPD_RANGE: std::ops::Range<i32> = -(1 << (SPD_BITS - 1))..1 << (SPD_BITS - 1);

/// Everything a partition keeps of one vehicle that has reported in it, in 32 bytes:
/// its account (balances span the run), its trip while it is on one, and its group of
/// the current minute (the segment it reported from, its speed sum and report count
/// there). One record a vehicle, so a position report looks up one thing. The
/// vehicle's id is in the index ([`VidIndex`]), not here; a group is always of the
/// partition's current minute (folding a minute empties them).
///
/// The fields are narrow: reports whose Time, Pos or Spd do not fit them (Time beyond
/// 32 bits, Pos beyond 26 bits, Spd beyond 16 bits signed, a negative Time or Pos) are
/// counted as ignored, never truncated, as is a report that would make a group of
/// more than 255 reports (one vehicle, segment and minute: repeated Times); a total
/// beyond 32 bits, and a latest notification whose toll or time does not pack into
/// [`TOLL_BITS`] and [`LATEST_AGO`], are kept exactly in side maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Record {
    /// Sum of all notified tolls ([`BIG_TOTAL`]: in `Partition::big_totals`).
    total: u32,
    /// Time of the latest position report (of any trip or none).
    last_time: u32,
    /// The latest toll notification: its toll (the low [`TOLL_BITS`]) and how many
    /// seconds before `last_time` it was (the bits above, at most [`LATEST_AGO`]);
    /// [`NO_LATEST`] if none, [`BIG_LATEST`]: in `Partition::big_latest`. Read and
    /// written through [`Record::latest`] and [`Record::set_latest`].
    latest: u32,
    /// Segment record of the trip's latest report, [`NONE`] when the vehicle is on no
    /// trip (never seen on one here, or after its exit-lane report). With Pos and the
    /// lane it gives the trip's location: the segment record names the expressway and
    /// the direction.
    trip_seg: u32,
    /// The trip's latest report's Pos (the low [`POS_BITS`]), its lane (3 bits above)
    /// and the consecutive reports of the trip at its location, saturating at
    /// [`STOP_REPORTS`] (the top 3 bits).
    at: u32,
    /// The group's segment record.
    g_seg: u32,
    /// The group's speed sum (the low [`SPD_BITS`], two's complement: at most 255
    /// reports of a 16-bit Spd each) and its report count (the top 8 bits; 0: no group).
    /// A group is of the partition's current minute: folding a minute empties them.
    g_sum: u32,
    /// The groups the vehicle left during the current minute (it reported from another
    /// segment after them): the first in the partition's `left` list, or [`NONE`]
    /// (always when it has no group).
    left: u32,
}

const _: () = assert!(std::mem::size_of::<Record>() == 32);

impl Record {
    fn new(time: u32) -> Record {
        Record {
            total: 0,
            last_time: time,
            latest: NO_LATEST,
            trip_seg: NONE,
            at: 0,
            g_seg: 0,
            g_sum: 0,
            left: NONE,
        }
    }

    /// Pos of the trip's latest report.
    #[inline]
    fn pos(&self) -> u32 {
        self.at & ((1 << POS_BITS) - 1)
    }

    /// Lane of the trip's latest report.
    #[inline]
    fn lane(&self) -> u8 {
        ((self.at >> POS_BITS) & 7) as u8
    }

    /// Consecutive reports of the trip at its location.
    #[inline]
    fn same(&self) -> u8 {
        (self.at >> (POS_BITS + 3)) as u8
    }

    /// Sets Pos (below 2^26), the lane (0-4) and the consecutive reports there (0-4).
    #[inline]
    fn set_at(&mut self, pos: u32, lane: u8, same: u8) {
        debug_assert!(pos < 1 << POS_BITS && lane <= 4 && same <= STOP_REPORTS);
        self.at = pos | u32::from(lane) << POS_BITS | u32::from(same) << (POS_BITS + 3);
    }

    /// The group's speed sum.
    #[inline]
    fn g_spd(&self) -> i32 {
        sum_spd(self.g_sum)
    }

    /// Reports in the group (0: none).
    #[inline]
    fn g_count(&self) -> u8 {
        sum_count(self.g_sum)
    }

    /// Sets the group's speed sum (-2^23 to 2^23 - 1) and report count.
    #[inline]
    fn set_group(&mut self, spd: i32, count: u8) {
        self.g_sum = group_sum(spd, count);
    }

    /// The trip's location (with `trip_seg != NONE`).
    fn loc(&self) -> Loc {
        let local = self.trip_seg % SEGS_PER_XWAY;
        Loc {
            xway: self.trip_seg / SEGS_PER_XWAY,
            pos: self.pos(),
            dir: (local / 100) as u8,
            lane: self.lane(),
        }
    }

    /// Ends the trip at minute `m`: a stopped vehicle leaves its location.
    fn end_trip(&mut self, road: &mut Road, m: i64) {
        if self.trip_seg != NONE && self.same() >= STOP_REPORTS {
            road.unstop(self.loc(), m);
        }
        self.trip_seg = NONE;
        self.set_at(self.pos(), self.lane(), 0);
    }

    /// The sum of the tolls of vehicle `vid` (this record's), beyond 32 bits from
    /// `big`.
    #[inline]
    fn total(&self, vid: i64, big: &FxMap<i64, i64>) -> i64 {
        wide(self.total, vid, big)
    }

    /// Sets the sum of its tolls, beyond 32 bits in `big`.
    #[inline]
    fn set_total(&mut self, vid: i64, total: i64, big: &mut FxMap<i64, i64>) {
        set_wide(&mut self.total, vid, total, big);
    }

    /// The latest toll notification of vehicle `vid` (this record's): (its Time, its
    /// toll), from `big` when it does not pack.
    #[inline]
    fn latest(&self, vid: i64, big: &FxMap<i64, (u32, i64)>) -> Option<(u32, i64)> {
        match self.latest {
            NO_LATEST => None,
            BIG_LATEST => big.get(&vid).copied(),
            v => Some((
                self.last_time - (v >> TOLL_BITS),
                i64::from(v & ((1 << TOLL_BITS) - 1)),
            )),
        }
    }

    /// Sets the latest toll notification (relative to `last_time`: set that first), in
    /// `big` when it does not pack (and out of `big` when it packs again).
    #[inline]
    fn set_latest(
        &mut self,
        vid: i64,
        latest: Option<(u32, i64)>,
        big: &mut FxMap<i64, (u32, i64)>,
    ) {
        let was_big = self.latest == BIG_LATEST;
        self.latest = match latest {
            None => NO_LATEST,
            Some((time, toll)) => {
                let ago = self
                    .last_time
                    .checked_sub(time)
                    .filter(|&a| a <= LATEST_AGO);
                match (
                    ago,
                    u32::try_from(toll).ok().filter(|&t| t < 1 << TOLL_BITS),
                ) {
                    (Some(ago), Some(toll)) => ago << TOLL_BITS | toll,
                    _ => {
                        big.insert(vid, (time, toll));
                        BIG_LATEST
                    }
                }
            }
        };
        if was_big && self.latest != BIG_LATEST {
            big.remove(&vid);
        }
    }

    /// Sets the time of the latest report, keeping the latest notification's time.
    #[inline]
    fn set_last_time(&mut self, vid: i64, time: u32, big: &mut FxMap<i64, (u32, i64)>) {
        if self.latest == NO_LATEST {
            self.last_time = time;
            return;
        }
        let latest = self.latest(vid, big);
        self.last_time = time;
        self.set_latest(vid, latest, big);
    }
}

/// The value of a vehicle's 32-bit field that holds values beyond 32 bits in a side
/// map: `u32::MAX` ([`BIG_TOTAL`]) says it is `big`'s entry for `vid`.
#[inline]
fn wide(field: u32, vid: i64, big: &FxMap<i64, i64>) -> i64 {
    match field {
        u32::MAX => big.get(&vid).copied().unwrap_or(0),
        v => i64::from(v),
    }
}

/// Sets such a field to `v`, in `big` when it does not fit below `u32::MAX` (and out of
/// `big` when it fits again).
#[inline]
fn set_wide(field: &mut u32, vid: i64, v: i64, big: &mut FxMap<i64, i64>) {
    match u32::try_from(v) {
        Ok(n) if n != u32::MAX => {
            if *field == u32::MAX {
                big.remove(&vid);
            }
            *field = n;
        }
        _ => {
            *field = u32::MAX;
            big.insert(vid, v);
        }
    }
}

/// The records of a partition, in the order their vehicles first reported: in chunks
/// of [`CHUNK`] records, so that growing never copies them (a vector doubling held the
/// old and the new copy at once: hundreds of MB a partition at L = 2,000) and no
/// capacity beyond the last chunk's is reserved. Serialized as a plain list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Records {
    chunks: Vec<Vec<Record>>,
    len: usize,
}

/// Records per chunk of [`Records`] (`1 << CHUNK_BITS`: 512 kB of 32-byte records).
const CHUNK_BITS: u32 = 14;
const CHUNK: usize = 1 << CHUNK_BITS;

impl Records {
    fn len(&self) -> usize {
        self.len
    }

    fn push(&mut self, r: Record) {
        match self.chunks.last_mut() {
            Some(c) if c.len() < CHUNK => c.push(r),
            _ => {
                let mut c = Vec::with_capacity(CHUNK);
                c.push(r);
                self.chunks.push(c);
            }
        }
        self.len += 1;
    }

    fn iter(&self) -> impl Iterator<Item = &Record> + '_ {
        self.chunks.iter().flatten()
    }

    /// Record `i`, if there is one.
    #[inline]
    fn get(&self, i: u32) -> Option<&Record> {
        let i = i as usize;
        self.chunks.get(i >> CHUNK_BITS)?.get(i & (CHUNK - 1))
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = &mut Record> + '_ {
        self.chunks.iter_mut().flatten()
    }

    /// Bytes held.
    fn capacity_bytes(&self) -> usize {
        self.chunks.iter().map(Vec::capacity).sum::<usize>() * std::mem::size_of::<Record>()
            + self.chunks.capacity() * std::mem::size_of::<Vec<Record>>()
    }
}

impl std::ops::Index<usize> for Records {
    type Output = Record;

    #[inline]
    fn index(&self, i: usize) -> &Record {
        &self.chunks[i >> CHUNK_BITS][i & (CHUNK - 1)]
    }
}

impl std::ops::IndexMut<usize> for Records {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut Record {
        &mut self.chunks[i >> CHUNK_BITS][i & (CHUNK - 1)]
    }
}

impl<'a> IntoIterator for &'a Records {
    type Item = &'a Record;
    type IntoIter = std::iter::Flatten<std::slice::Iter<'a, Vec<Record>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.chunks.iter().flatten()
    }
}

impl Serialize for Records {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.len))?;
        for r in self.iter() {
            seq.serialize_element(r)?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for Records {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Seq;
        impl<'de> serde::de::Visitor<'de> for Seq {
            type Value = Records;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list of vehicle records")
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<Records, A::Error> {
                let mut r = Records::default();
                while let Some(x) = a.next_element()? {
                    r.push(x);
                }
                Ok(r)
            }
        }
        d.deserialize_seq(Seq)
    }
}

/// A group's speed sum (-2^23 to 2^23 - 1) and report count in one word: the sum in
/// the low [`SPD_BITS`] (two's complement), the count above.
#[inline]
fn group_sum(spd: i32, count: u8) -> u32 {
    debug_assert!(SPD_RANGE.contains(&spd));
    (spd as u32 & ((1 << SPD_BITS) - 1)) | u32::from(count) << SPD_BITS
}

/// The speed sum of a [`group_sum`].
#[inline]
fn sum_spd(sum: u32) -> i32 {
    // Sign-extended from its 24 bits.
    ((sum << (32 - SPD_BITS)) as i32) >> (32 - SPD_BITS)
}

/// The report count of a [`group_sum`] (0: no group).
#[inline]
fn sum_count(sum: u32) -> u8 {
    (sum >> SPD_BITS) as u8
}

/// A group a vehicle left within the current minute: its segment record, its speed sum
/// and report count (packed as in the record, 12 bytes an entry where 16 were: the
/// list keeps the capacity of the busiest minute), and the next group the same vehicle
/// left. A count of 0: taken back (the vehicle came back to the segment within the
/// minute and its record holds the group again).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Left {
    seg: u32,
    /// [`group_sum`] of the speed sum and the count.
    sum: u32,
    next: u32,
}

const _: () = assert!(std::mem::size_of::<Left>() == 12);

impl Left {
    /// The group's speed sum.
    #[inline]
    fn spd(&self) -> i32 {
        sum_spd(self.sum)
    }

    /// Reports in the group (0: taken back).
    #[inline]
    fn count(&self) -> u16 {
        u16::from(sum_count(self.sum))
    }
}

/// Vehicle id -> its record's number: open addressing with linear probing, each slot
/// the low 32 bits of a vehicle id and its record number side by side (8 bytes), so a
/// lookup is one miss in the caches where a Swiss table's control bytes and slots
/// were two (with gigabytes of state, those misses were half the rating's CPU time).
/// The index is where a vehicle's id is kept: an id in `0..=u32::MAX` (every Linear
/// Road id) is its slot's key; any other is in `wide` by record number, and its slot's
/// record number has [`WIDE`] set. Records are never removed.
///
/// It is at most 4/5 full and grows by a quarter (a slot is found by the high bits of
/// a product with the table's size, so any size works): 10-12.5 bytes a vehicle (at
/// most 3/4 full and grown by half it held 10.7-16, 13.9 at the end of L = 2,000). A
/// lookup that finds its vehicle reads 3 slots on average (24 bytes, mostly one cache
/// line); one that does not (a new vehicle) about 13. With 4 KB pages this cost CPU
/// (L = 512, 1 + 1 min: 51.0 and 53.5 s against 34.5-44.5 for the old index); with
/// huge pages ([`Slots`]) 41.5 and 41.7 against 36.3 and 44.1 at 3/4 (one sitting,
/// alternating; the machine's noise is as large as the difference). The old table goes
/// back to the system as soon as the new one holds its slots.
///
/// Serialized as the ids in record order; decoding rebuilds the slots and rejects an
/// id given twice.
struct VidIndex {
    /// (low 32 bits of the id, record number + 1, with [`WIDE`] set for a wide id); an
    /// empty slot is (0, 0).
    slots: Slots,
    len: usize,
    /// Ids outside `0..=u32::MAX`, by record number.
    wide: FxMap<u32, i64>,
    /// The table grows when more than this many thousandths of it would be full
    /// ([`GROW_AT`] or less, see [`VidIndex::stagger`]).
    grow_at: usize,
}

/// The fullest an index gets, in thousandths.
const GROW_AT: usize = 800;
/// How much earlier than [`GROW_AT`] the most staggered index grows.
const STAGGER: usize = 75;

impl Default for VidIndex {
    fn default() -> VidIndex {
        VidIndex {
            slots: Slots::default(),
            len: 0,
            wide: FxMap::default(),
            grow_at: GROW_AT,
        }
    }
}

/// The slots of a [`VidIndex`]: zeroed memory that goes back to the operating system the
/// moment a grown-out table is dropped. Through the allocator it would not: mimalloc
/// keeps freed memory 10 s (`braid` and `braid-bench` ask it to, for the windows
/// made on one thread and freed on another), and the partitions, all of one size,
/// grow their tables within seconds of each other, so the old tables of all of them
/// stayed resident beside the new ones (at L = 2,000 a spike of 1.6 GB, the run's
/// peak). On Unix the table is its own anonymous mapping (also: pages never written
/// are never resident, and nothing writes the empty slots); elsewhere it is zeroed
/// memory from the allocator.
struct Slots {
    ptr: std::ptr::NonNull<(u32, u32)>,
    len: usize,
}

// SAFETY: `Slots` owns its memory exclusively, like a `Box<[(u32, u32)]>`.
unsafe impl Send for Slots {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for Slots {}

/// Tables this large ask for huge pages (see [`Slots::zeroed`]).
#[cfg(unix)]
const HUGE_PAGE: usize = 2 << 20;

impl Default for Slots {
    fn default() -> Slots {
        Slots {
            ptr: std::ptr::NonNull::dangling(),
            len: 0,
        }
    }
}

impl Slots {
    /// `len` empty slots.
    fn zeroed(len: usize) -> Slots {
        if len == 0 {
            return Slots::default();
        }
        let layout = Slots::layout(len);
        #[cfg(unix)]
        // SAFETY: a fresh private anonymous mapping of `layout.size()` bytes, read and
        // written only through this `Slots` and unmapped once in `drop`; the kernel
        // fills it with zeros, which is (0, 0), a valid `(u32, u32)`.
        let ptr = unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                layout.size(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if p == libc::MAP_FAILED {
                std::alloc::handle_alloc_error(layout);
            }
            // A lookup lands on a random slot: with 2 MB pages where the system gives
            // them for the asking, far fewer of those miss the TLB too (a hint; a
            // refusal changes nothing).
            if layout.size() >= HUGE_PAGE {
                libc::madvise(p, layout.size(), libc::MADV_HUGEPAGE);
            }
            p.cast::<(u32, u32)>()
        };
        #[cfg(not(unix))]
        // SAFETY: `layout` has a non-zero size; zeroed bytes are a valid `(u32, u32)`.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout).cast::<(u32, u32)>() };
        let ptr =
            std::ptr::NonNull::new(ptr).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        Slots { ptr, len }
    }

    fn layout(len: usize) -> std::alloc::Layout {
        std::alloc::Layout::array::<(u32, u32)>(len)
            .unwrap_or_else(|_| panic!("an index of {len} slots does not fit in memory"))
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        if self.len == 0 {
            return;
        }
        let layout = Slots::layout(self.len);
        #[cfg(unix)]
        // SAFETY: the mapping made in `zeroed`, of this size, unmapped once.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), layout.size());
        }
        #[cfg(not(unix))]
        // SAFETY: allocated in `zeroed` with this layout, freed once.
        unsafe {
            std::alloc::dealloc(self.ptr.as_ptr().cast(), layout);
        }
    }
}

impl std::ops::Deref for Slots {
    type Target = [(u32, u32)];
    fn deref(&self) -> &[(u32, u32)] {
        // SAFETY: `len` initialized slots at `ptr` (or dangling with `len` 0).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for Slots {
    fn deref_mut(&mut self) -> &mut [(u32, u32)] {
        // SAFETY: as in `deref`, and `&mut self` is the only access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

/// Asks the caches for the line holding `x` (a hint: nothing is read, nothing can
/// fault). A report reads a vehicle's index slot and then its record, each a miss in
/// the caches at a random place of gigabytes; asked for a few reports ahead, both
/// misses overlap the work of the reports before.
#[inline]
fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint on an address (here a valid reference's); it reads
    // nothing into the program and never faults.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((x as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

/// The bit of a slot's record number that says its id is in `VidIndex::wide`.
const WIDE: u32 = 1 << 31;
/// Records a partition can hold (a slot holds a record's number + 1 below [`WIDE`]).
const MAX_RECORDS: u32 = WIDE - 1;

impl VidIndex {
    /// The slot where a probe for an id with low bits `lo` starts: the high bits of a
    /// product (Fibonacci hashing, so ids that share low bits spread) scaled to the
    /// table's size.
    #[inline]
    fn start(&self, lo: u32) -> usize {
        let h = u64::from(lo).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        ((u128::from(h) * self.slots.len() as u128) >> 64) as usize
    }

    /// Asks the caches for the slot where a probe for `vid` starts.
    #[inline]
    fn prefetch(&self, vid: i64) {
        if let Some(slot) = self.slots.get(self.start(vid as u32)) {
            prefetch(slot);
        }
    }

    /// The record of `vid`.
    #[inline]
    fn find(&self, vid: i64) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        let lo = vid as u32;
        let narrow = u32::try_from(vid).is_ok();
        let n = self.slots.len();
        let mut i = self.start(lo);
        loop {
            let (key, slot) = self.slots[i];
            if slot == 0 {
                return None;
            }
            if key == lo {
                let record = (slot & !WIDE) - 1;
                if slot & WIDE == 0 {
                    if narrow {
                        return Some(record);
                    }
                } else if !narrow && self.wide.get(&record) == Some(&vid) {
                    return Some(record);
                }
            }
            i += 1;
            if i == n {
                i = 0;
            }
        }
    }

    /// Adds `record` (below [`MAX_RECORDS`]) for `vid` (not in the index), growing the
    /// table by a quarter to stay at most 4/5 full.
    fn insert(&mut self, vid: i64, record: u32) {
        debug_assert!(record < MAX_RECORDS);
        let slot = match u32::try_from(vid) {
            Ok(_) => record + 1,
            Err(_) => {
                self.wide.insert(record, vid);
                (record + 1) | WIDE
            }
        };
        if (self.len + 1) * 1000 > self.slots.len() * self.grow_at {
            let size = (self.slots.len() + self.slots.len() / 4).max(64);
            let old = std::mem::replace(&mut self.slots, Slots::zeroed(size));
            for &(key, s) in old.iter() {
                if s != 0 {
                    self.place(key, s);
                }
            }
        }
        self.place(vid as u32, slot);
        self.len += 1;
    }

    /// Index `k` of `of` grows when `GROW_AT - STAGGER * k / (of - 1)` thousandths full:
    /// the partitions of a run hold about as many vehicles each, so with one threshold
    /// they all grew within seconds, and a worker stalled rehashing each of its
    /// partitions' tables in turn (at L = 2,800, 8 tables of 13.5 M vehicles each: the
    /// one stretch of late answers of the run). Staggered, a worker's tables grow
    /// minutes apart.
    fn stagger(&mut self, k: u32, of: u32) {
        let (k, of) = (k as usize, of.max(2) as usize);
        self.grow_at = GROW_AT - STAGGER * k.min(of - 1) / (of - 1);
    }

    fn place(&mut self, lo: u32, slot: u32) {
        let n = self.slots.len();
        let mut i = self.start(lo);
        while self.slots[i].1 != 0 {
            i += 1;
            if i == n {
                i = 0;
            }
        }
        self.slots[i] = (lo, slot);
    }

    /// The ids of records `0..n`, in record order: an error unless the index holds
    /// each of them exactly once and nothing else.
    fn ids(&self, n: usize) -> Result<Vec<i64>, String> {
        if self.len != n {
            return Err(format!("{} vehicle ids for {n} records", self.len));
        }
        // `len` slots name records below `n`, none twice: each record has its id.
        let mut ids = vec![0i64; n];
        let mut seen = vec![0u64; n.div_ceil(64)];
        for &(key, slot) in self.slots.iter() {
            if slot == 0 {
                continue;
            }
            let r = ((slot & !WIDE) - 1) as usize;
            let id = match slot & WIDE {
                0 => i64::from(key),
                _ => match self.wide.get(&(r as u32)) {
                    Some(&v) => v,
                    None => return Err(format!("record {r}'s id is not kept")),
                },
            };
            let (word, bit) = (r / 64, 1u64 << (r % 64));
            if r >= n || seen[word] & bit != 0 {
                return Err(format!("record {r} of {n} has two ids or is out of range"));
            }
            seen[word] |= bit;
            ids[r] = id;
        }
        Ok(ids)
    }

    /// Bytes held.
    fn capacity_bytes(&self) -> usize {
        self.slots.len() * std::mem::size_of::<(u32, u32)>()
            + self.wide.capacity() * (std::mem::size_of::<(u32, i64)>() + 1)
    }
}

impl Serialize for VidIndex {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let ids = self.ids(self.len).map_err(serde::ser::Error::custom)?;
        ids.serialize(s)
    }
}

impl<'de> Deserialize<'de> for VidIndex {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let ids = Vec::<i64>::deserialize(d)?;
        let mut index = VidIndex::default();
        for (r, &vid) in ids.iter().enumerate() {
            if index.find(vid).is_some() {
                return Err(serde::de::Error::custom(format!(
                    "vehicle {vid} has two records"
                )));
            }
            let r = u32::try_from(r)
                .ok()
                .filter(|&r| r < MAX_RECORDS)
                .ok_or_else(|| serde::de::Error::custom(format!("{} records", ids.len())))?;
            index.insert(vid, r);
        }
        Ok(index)
    }
}

/// Aggregate of one completed minute of one segment.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct MinuteAgg {
    minute: i64,
    /// Distinct vehicles that reported.
    nov: u32,
    /// Sum over those vehicles of S_v * LCM_60 / c_v.
    sum: i128,
}

const NO_MINUTE: MinuteAgg = MinuteAgg {
    minute: i64::MIN,
    nov: 0,
    sum: 0,
};

/// An accident, stored in the record of its segment.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct Span {
    id: u32,
    /// Detection minute; active from the next minute.
    detect: i64,
    /// Clear minute (active through it); `i64::MAX` while not cleared.
    clear: i64,
}

/// The answer for crossings into a segment during one minute.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct SegAnswer {
    nov: i64,
    lav: i64,
    /// Nearest segment with an active accident downstream, -1 if none.
    accident: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct SegState {
    ring: [MinuteAgg; WINDOW],
    cache_minute: i64,
    cache: SegAnswer,
    accidents: Vec<Span>,
}

impl SegState {
    fn new() -> SegState {
        SegState {
            ring: [NO_MINUTE; WINDOW],
            cache_minute: i64::MIN,
            cache: SegAnswer {
                nov: 0,
                lav: -1,
                accident: -1,
            },
            accidents: Vec::new(),
        }
    }

    fn slot(minute: i64) -> usize {
        minute.rem_euclid(WINDOW as i64) as usize
    }
}

/// Vehicles stopped at one location.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct Stopped {
    count: u32,
    /// Id of the accident in progress here, or [`NONE`].
    accident: u32,
    /// Segment record holding that accident.
    seg_id: u32,
}

/// The state of the expressways of a partition: segments, stopped vehicles, accidents.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Road {
    xway_index: FxMap<i64, u32>,
    /// The last expressway looked up: (number, index).
    last_xway: Option<(i64, u32)>,
    segs: Vec<SegState>,
    stopped: FxMap<Loc, Stopped>,
    next_accident: u32,
}

impl Road {
    #[inline]
    fn xway(&mut self, xway: i64) -> u32 {
        if let Some((x, i)) = self.last_xway {
            if x == xway {
                return i;
            }
        }
        let next = self.xway_index.len() as u32;
        let i = *self.xway_index.entry(xway).or_insert(next);
        if i == next {
            self.segs
                .extend((0..SEGS_PER_XWAY).map(|_| SegState::new()));
        }
        self.last_xway = Some((xway, i));
        i
    }

    /// A vehicle became stopped at `loc` (its report in `seg_id` at minute `m`).
    fn stop(&mut self, loc: Loc, seg_id: u32, m: i64) {
        let e = self.stopped.entry(loc).or_insert(Stopped {
            count: 0,
            accident: NONE,
            seg_id,
        });
        e.count += 1;
        if e.count == 2 {
            let id = self.next_accident;
            self.next_accident = self.next_accident.wrapping_add(1);
            self.segs[seg_id as usize].accidents.push(Span {
                id,
                detect: m,
                clear: i64::MAX,
            });
            e.accident = id;
            e.seg_id = seg_id;
        }
    }

    /// A vehicle stopped at `loc` moved away or started a new trip at minute `m`.
    fn unstop(&mut self, loc: Loc, m: i64) {
        let Entry::Occupied(mut o) = self.stopped.entry(loc) else {
            return;
        };
        let e = o.get_mut();
        e.count -= 1;
        if e.count < 2 && e.accident != NONE {
            let id = e.accident;
            if let Some(span) = self.segs[e.seg_id as usize]
                .accidents
                .iter_mut()
                .find(|s| s.id == id)
            {
                span.clear = m;
            }
            e.accident = NONE;
        }
        if e.count == 0 {
            o.remove();
        }
    }

    /// Adds a vehicle's group of the completed `minute` (speed sum `spd` over `count`
    /// reports in segment record `seg_id`) to the segment's aggregate.
    fn add_group(&mut self, seg_id: u32, spd: i32, count: u16, minute: i64) {
        let agg = &mut self.segs[seg_id as usize].ring[SegState::slot(minute)];
        if agg.minute != minute {
            *agg = MinuteAgg {
                minute,
                nov: 0,
                sum: 0,
            };
        }
        agg.nov += 1;
        agg.sum = agg
            .sum
            .wrapping_add(i128::from(spd).wrapping_mul(scale(u32::from(count))));
    }

    /// NOV, LAV and the nearest active accident for a crossing into `seg_id` at minute
    /// `m`; computed once per segment and minute (all three are fixed once minute m-1
    /// has ended: an accident detected during m is not active in m, one cleared during m
    /// still is).
    fn answer(&mut self, seg_id: u32, m: i64) -> SegAnswer {
        let s = &self.segs[seg_id as usize];
        if s.cache_minute == m {
            return s.cache;
        }
        let prev = &s.ring[SegState::slot(m - 1)];
        let nov = if prev.minute == m - 1 {
            i64::from(prev.nov)
        } else {
            0
        };
        let lav = lav(&s.ring, m);
        let local = seg_id % SEGS_PER_XWAY;
        let base = seg_id - local;
        let (dir, seg) = (local / 100, local % 100);
        let mut accident = -1;
        for k in 0..5u32 {
            let s2 = if dir == 0 {
                seg + k
            } else if let Some(s2) = seg.checked_sub(k) {
                s2
            } else {
                break;
            };
            if s2 > 99 {
                break;
            }
            let spans = &mut self.segs[(base + dir * 100 + s2) as usize].accidents;
            if spans.is_empty() {
                continue;
            }
            spans.retain(|sp| sp.clear >= m);
            if spans.iter().any(|sp| sp.detect < m) {
                accident = i64::from(s2);
                break;
            }
        }
        let answer = SegAnswer { nov, lav, accident };
        let s = &mut self.segs[seg_id as usize];
        s.cache_minute = m;
        s.cache = answer;
        answer
    }
}

/// LAV at minute m (doc 4): the mean over minutes m-5..m-1 with reports of each
/// minute's mean of per-vehicle means, truncated toward zero; -1 without reports.
///
/// Minute k's value is `sum_k / (L * n_k)`, so LAV = trunc(T / (K * L)) with
/// T = sum_k sum_k / n_k. Writing sum_k = a_k * n_k + b_k (0 <= b_k < n_k),
/// T = I + F with I = sum a_k an integer and F = sum b_k / n_k in [0, 5); since K * L is
/// an integer, floor(T / (K L)) = floor((I + floor(F)) / (K L)), all in exact arithmetic.
fn lav(ring: &[MinuteAgg; WINDOW], m: i64) -> i64 {
    let mut k = 0i128;
    let mut int_part = 0i128;
    // F = p / q, kept reduced.
    let (mut p, mut q) = (0i128, 1i128);
    let mut exact = true;
    for minute in m - WINDOW as i64..m {
        let agg = &ring[SegState::slot(minute)];
        if agg.minute != minute || agg.nov == 0 {
            continue;
        }
        k += 1;
        let n = i128::from(agg.nov);
        int_part = int_part.wrapping_add(agg.sum.div_euclid(n));
        let b = agg.sum.rem_euclid(n);
        if exact {
            match add_fraction(p, q, b, n) {
                Some((p2, q2)) => (p, q) = (p2, q2),
                None => exact = false,
            }
        }
    }
    if k == 0 {
        return -1;
    }
    let denom = k * LCM_60;
    if !exact {
        // Denominators beyond i128 need thousands of vehicles per minute in five
        // co-prime counts; fall back to floating point (never seen in practice).
        let mean = ring
            .iter()
            .filter(|a| a.minute >= m - WINDOW as i64 && a.minute < m && a.nov > 0)
            .map(|a| a.sum as f64 / (LCM_60 as f64 * f64::from(a.nov)))
            .sum::<f64>()
            / k as f64;
        return mean.trunc() as i64;
    }
    let total = int_part + p / q;
    let floor = total.div_euclid(denom);
    let is_integer = p % q == 0 && total.rem_euclid(denom) == 0;
    let trunc = if total >= 0 || is_integer {
        floor
    } else {
        floor + 1
    };
    trunc as i64
}

/// p/q + b/n, reduced; `None` on overflow.
fn add_fraction(p: i128, q: i128, b: i128, n: i128) -> Option<(i128, i128)> {
    if b == 0 {
        return Some((p, q));
    }
    let g = gcd(q, n);
    let l = (q / g).checked_mul(n)?;
    let num = p.checked_mul(l / q)?.checked_add(b.checked_mul(l / n)?)?;
    let r = gcd(num, l);
    Some((num / r, l / r))
}

fn gcd(mut a: i128, mut b: i128) -> i128 {
    while b != 0 {
        let r = a % b;
        a = b;
        b = r;
    }
    a.abs().max(1)
}

/// A type-2 request waiting for the end of its second.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct BalanceRequest {
    time: i64,
    qid: i64,
    vid: i64,
}

/// The Linear Road state of one partition of the input (see the module doc).
///
/// Serialized (for checkpoints, [`Partition::save_state`]) field by field, except the
/// shared histories, which are static input the partition's creator supplies; the
/// index as the vehicles' ids in record order.
#[derive(Serialize, Deserialize)]
pub struct Partition {
    #[serde(skip)]
    tolls: Arc<TollHistory>,
    #[serde(skip)]
    segments: Arc<SegmentHistory>,
    road: Road,
    /// One record per vehicle that has reported here, in the order they first did.
    records: Records,
    /// Vehicle id -> its record's index in `records` (10.7-16 bytes a vehicle): the
    /// only place a vehicle's id is kept.
    index: VidIndex,
    /// Groups left within minute `group_minute` (see [`Record::left`]).
    left: Vec<Left>,
    /// The current minute of the groups (`i64::MIN` before the first report).
    group_minute: i64,
    /// Latest toll notifications that do not pack into a record (see [`Record::latest`]):
    /// (Time, toll) by vehicle.
    big_latest: FxMap<i64, (u32, i64)>,
    /// Totals beyond 32 bits, by vehicle.
    big_totals: FxMap<i64, i64>,
    pending: Vec<BalanceRequest>,
    ignored: u64,
    ignored_types: u64,
}

impl std::fmt::Debug for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Partition")
            .field("minute", &self.group_minute)
            .field("stats", &self.stats())
            .finish()
    }
}

impl Partition {
    /// A partition with the shared historical stores. With an empty `segments` store
    /// (no segment history was given) type-4 requests get no answer (doc 10).
    pub fn new(tolls: Arc<TollHistory>, segments: Arc<SegmentHistory>) -> Partition {
        Partition {
            tolls,
            segments,
            road: Road::default(),
            records: Records::default(),
            index: VidIndex::default(),
            left: Vec::new(),
            group_minute: i64::MIN,
            big_latest: FxMap::default(),
            big_totals: FxMap::default(),
            pending: Vec::new(),
            ignored: 0,
            ignored_types: 0,
        }
    }

    /// Asks the caches for what a report of vehicle `vid` reads first: its index slot.
    /// A hint for a report a few ahead of the next one processed.
    #[inline]
    pub fn prefetch_slot(&self, vid: i64) {
        self.index.prefetch(vid);
    }

    /// Asks the caches for the record of vehicle `vid`, finding it in the index (whose
    /// slot [`Partition::prefetch_slot`] should have brought in by then). A hint.
    #[inline]
    pub fn prefetch_record(&self, vid: i64) {
        if let Some(r) = self.index.find(vid).and_then(|i| self.records.get(i)) {
            prefetch(r);
        }
    }

    /// Processes one input tuple of this partition's sub-stream; outputs are appended to
    /// `out`. Type-2 requests are held until [`Partition::end_of_second`] (or until a
    /// tuple of a later second arrives).
    pub fn process(&mut self, t: &Input, out: &mut Vec<Emitted>) {
        if let Some(first) = self.pending.first() {
            if t.time > first.time {
                self.answer_balances(out);
            }
        }
        match t.typ {
            0 => self.position(t, out),
            2 => self.pending.push(BalanceRequest {
                time: t.time,
                qid: t.qid,
                vid: t.vid,
            }),
            3 => {
                if let Some(bal) = self.tolls.get(t.vid, t.day, t.xway) {
                    out.push(Emitted::Out(Output::Daily {
                        time: t.time,
                        emit: -1,
                        qid: t.qid,
                        bal,
                    }));
                }
            }
            4 => {
                if let Some((travel_time, toll)) = travel_time(&self.segments, t) {
                    out.push(Emitted::Out(Output::Travel {
                        time: t.time,
                        emit: -1,
                        qid: t.qid,
                        travel_time,
                        toll,
                    }));
                }
            }
            _ => self.ignored_types += 1,
        }
    }

    /// The last tuple with Time `time` has been delivered: answers the type-2 requests
    /// of that second (after all its position reports).
    pub fn end_of_second(&mut self, time: i64, out: &mut Vec<Emitted>) {
        if self.pending.first().is_some_and(|r| r.time <= time) {
            self.answer_balances(out);
        }
    }

    /// End of input: answers pending requests and folds the last minute.
    pub fn finish(&mut self, out: &mut Vec<Emitted>) {
        self.answer_balances(out);
        self.fold_minute();
    }

    /// Folds the groups of minute `group_minute` into the segment aggregates: a
    /// minute's end reads the records once, in memory order (a list of the records
    /// with a group, in the order they reported, sent each to a random place: at
    /// L = 2,000 that stalled a worker for seconds each minute), and empties the groups
    /// it folds (so a record needs no minute of its own).
    fn fold_minute(&mut self) {
        let minute = self.group_minute;
        if minute == i64::MIN {
            return;
        }
        for r in self.records.iter_mut() {
            if r.g_count() > 0 {
                self.road
                    .add_group(r.g_seg, r.g_spd(), u16::from(r.g_count()), minute);
                r.g_sum = 0;
                r.left = NONE;
            }
        }
        for l in &self.left {
            if l.count() > 0 {
                self.road.add_group(l.seg, l.spd(), l.count(), minute);
            }
        }
        self.left.clear();
    }

    /// The record of vehicle `vid`, if it has reported here.
    #[inline]
    fn record_of(&self, vid: i64) -> Option<u32> {
        self.index.find(vid)
    }

    /// Adds `record` of vehicle `vid` (which has none) and indexes it.
    fn add_record(&mut self, vid: i64, record: Record) -> u32 {
        let i = self.records.len() as u32;
        self.records.push(record);
        self.index.insert(vid, i);
        i
    }

    /// Appends the partition's whole state but the histories to `out` (bincode, varint
    /// integers): a checkpoint between two seconds, after [`Partition::end_of_second`]
    /// of the earlier one. Costs nothing per tuple; framing (versions, checksums) is the
    /// caller's.
    pub fn save_state(&self, out: &mut Vec<u8>) -> Result<(), String> {
        state_codec()
            .serialize_into(out, self)
            .map_err(|e| format!("encoding the partition state: {e}"))
    }

    /// Replaces the state by what [`Partition::save_state`] wrote, keeping this
    /// partition's histories (give it the same ones the saved partition had). Bytes
    /// that do not decode to exactly one state, or a state whose internal references
    /// do not hold (records, left groups, segment records, expressway indices), are an
    /// error naming what is wrong, and leave `self` unchanged.
    ///
    /// Outputs after a restore equal the saved partition's: the only iteration whose
    /// order a restore may change (folding a minute's groups) adds into per-segment
    /// sums, which does not depend on the order.
    pub fn restore_state(&mut self, bytes: &[u8]) -> Result<(), String> {
        let mut p: Partition = state_codec()
            .deserialize(bytes)
            .map_err(|e| format!("the partition state does not decode: {e}"))?;
        p.check_references()?;
        p.tolls = self.tolls.clone();
        p.segments = self.segments.clone();
        p.index.grow_at = self.index.grow_at;
        *self = p;
        Ok(())
    }

    /// Decodes what [`Partition::save_state`] wrote into a partition of its own (with
    /// this one's histories), checked as [`Partition::restore_state`] checks it.
    pub fn decode_state(&self, bytes: &[u8]) -> Result<Partition, String> {
        let mut p = Partition::new(self.tolls.clone(), self.segments.clone());
        p.restore_state(bytes)?;
        Ok(p)
    }

    /// Makes this partition `k` of `of` for when its vehicle index grows (partitions of
    /// one run then grow one after another; see `VidIndex::stagger`). Answers do not
    /// depend on it; a restore keeps it.
    pub fn stagger(&mut self, k: u32, of: u32) {
        self.index.stagger(k, of);
    }

    /// The groups `r` holds in the current minute: its own and those it left.
    fn groups_of(&self, r: &Record) -> Vec<Left> {
        let mut out = Vec::new();
        if r.g_count() > 0 {
            out.push(Left {
                seg: r.g_seg,
                sum: r.g_sum,
                next: NONE,
            });
        }
        let mut j = r.left;
        while j != NONE {
            let l = self.left[j as usize];
            if l.count() > 0 {
                out.push(l);
            }
            j = l.next;
        }
        out
    }

    /// Rescaling (a checkpoint restored with another partition count): adds to this
    /// partition the share of `other`, a partition of the old count, that routes here:
    /// the expressways `x` with `keep(x)`, with their segment records, accidents,
    /// stopped vehicles, the current minute's groups and the trips on them. Several old
    /// partitions may add to one new one (fewer partitions), one old partition to
    /// several (more).
    ///
    /// Vehicles: every partition that takes one of `other`'s expressways takes the
    /// record of each of its vehicles (the time of its last report: the re-entry rules
    /// see what the old partition saw, for reports on any of its expressways); the
    /// account (tolls notified, the latest) goes to one of them: the one that takes the
    /// vehicle's trip, or, for a vehicle on no trip, the one that takes `other`'s
    /// smallest expressway number. A balance is the merge of every partition's partial
    /// (doc 6.5), which only sums accounts and takes the latest: answers stay the same
    /// however the accounts are spread. Records met twice (fewer partitions) are
    /// joined: the later report time, the accounts summed, the groups of both kept; of
    /// two live trips the one of the later report goes on and the other ends, as a
    /// re-entry would end it. `counts`: this partition takes `other`'s counts of
    /// ignored records (exactly one does).
    ///
    /// `other` must have been saved between two seconds (no pending type-2 request). A
    /// minute whose groups one side holds and the other has passed is folded first, as
    /// the next report would fold it.
    pub fn absorb(
        &mut self,
        mut other: Partition,
        keep: &dyn Fn(i64) -> bool,
        counts: bool,
    ) -> Result<(), String> {
        if !other.pending.is_empty() {
            return Err(format!(
                "{} type-2 requests pending in the state: it was not saved between two seconds",
                other.pending.len()
            ));
        }
        if counts {
            self.ignored += other.ignored;
            self.ignored_types += other.ignored_types;
        }
        // Old expressway index -> (number, new index if it routes here).
        let mut xways: Vec<(i64, Option<u32>)> = vec![(0, None); other.road.xway_index.len()];
        for (&x, &i) in &other.road.xway_index {
            xways[i as usize].0 = x;
        }
        if !xways.iter().any(|&(x, _)| keep(x)) {
            return Ok(());
        }
        // One minute for the groups of both.
        let minute = self.group_minute.max(other.group_minute);
        if self.group_minute < minute {
            self.fold_minute();
        }
        if other.group_minute < minute {
            other.fold_minute();
            other.group_minute = minute;
        }
        self.group_minute = minute;
        // The expressways, their segment records, accidents renumbered after ours.
        let offset = self.road.next_accident;
        let renumber = |id: u32| match id {
            NONE => NONE,
            id => id.wrapping_add(offset),
        };
        for (old, (x, new)) in xways.iter_mut().enumerate() {
            if !keep(*x) {
                continue;
            }
            if self.road.xway_index.contains_key(x) {
                return Err(format!(
                    "expressway {x} is in two partitions of the checkpoint"
                ));
            }
            let i = self.road.xway(*x);
            *new = Some(i);
            for k in 0..SEGS_PER_XWAY {
                let from = (old as u32 * SEGS_PER_XWAY + k) as usize;
                let mut seg = std::mem::replace(&mut other.road.segs[from], SegState::new());
                for span in &mut seg.accidents {
                    span.id = renumber(span.id);
                }
                self.road.segs[(i * SEGS_PER_XWAY + k) as usize] = seg;
            }
        }
        self.road.next_accident = offset.wrapping_add(other.road.next_accident);
        let seg_here = |seg_id: u32| {
            xways[(seg_id / SEGS_PER_XWAY) as usize]
                .1
                .map(|i| i * SEGS_PER_XWAY + seg_id % SEGS_PER_XWAY)
        };
        let loc_here = |loc: Loc| xways[loc.xway as usize].1.map(|xway| Loc { xway, ..loc });
        for (loc, s) in other.road.stopped.drain() {
            if let (Some(loc), Some(seg_id)) = (loc_here(loc), seg_here(s.seg_id)) {
                let accident = renumber(s.accident);
                self.road.stopped.insert(
                    loc,
                    Stopped {
                        seg_id,
                        accident,
                        ..s
                    },
                );
            }
        }
        // The vehicles.
        let smallest = xways.iter().map(|&(x, _)| x).min();
        let rest_here = smallest.is_some_and(keep);
        let ids = other.index.ids(other.records.len())?;
        for (o, &vid) in other.records.iter().zip(&ids) {
            let trip_here = (o.trip_seg != NONE).then(|| seg_here(o.trip_seg)).flatten();
            let account = match o.trip_seg {
                NONE => rest_here,
                _ => trip_here.is_some(),
            };
            let groups: Vec<Left> = other
                .groups_of(o)
                .into_iter()
                .filter_map(|g| {
                    Some(Left {
                        seg: seg_here(g.seg)?,
                        ..g
                    })
                })
                .collect();
            let mut record = Record {
                trip_seg: trip_here.unwrap_or(NONE),
                total: 0,
                g_sum: 0,
                left: NONE,
                ..*o
            };
            let total = match account {
                true => o.total(vid, &other.big_totals),
                false => 0,
            };
            if trip_here.is_none() {
                record.set_at(o.pos(), o.lane(), 0);
            }
            let latest = match account {
                true => o.latest(vid, &other.big_latest),
                false => None,
            };
            // Packed against `other`'s map: set again against ours.
            record.latest = NO_LATEST;
            let i = match self.record_of(vid) {
                None => {
                    record.set_latest(vid, latest, &mut self.big_latest);
                    record.set_total(vid, total, &mut self.big_totals);
                    self.add_record(vid, record)
                }
                Some(i) => {
                    let mine = &mut self.records[i as usize];
                    // The later of two live trips goes on; the other ends.
                    if mine.trip_seg != NONE && record.trip_seg != NONE {
                        if record.last_time > mine.last_time {
                            mine.end_trip(&mut self.road, minute);
                            (mine.trip_seg, mine.at) = (record.trip_seg, record.at);
                        } else {
                            record.end_trip(&mut self.road, minute);
                        }
                    } else if record.trip_seg != NONE {
                        (mine.trip_seg, mine.at) = (record.trip_seg, record.at);
                    }
                    let last = mine.last_time.max(record.last_time);
                    mine.set_last_time(vid, last, &mut self.big_latest);
                    let sum = mine.total(vid, &self.big_totals) + total;
                    mine.set_total(vid, sum, &mut self.big_totals);
                    if let Some(l) = latest {
                        if mine.latest(vid, &self.big_latest).is_none_or(|m| l.0 > m.0) {
                            mine.set_latest(vid, Some(l), &mut self.big_latest);
                        }
                    }
                    i
                }
            };
            // Its groups of the minute: the record's own first (if it has none), the
            // rest left.
            for g in groups {
                let mine = &mut self.records[i as usize];
                if mine.g_count() == 0 {
                    // In range: `check_references` checked the groups of `other`.
                    mine.g_seg = g.seg;
                    mine.g_sum = g.sum;
                } else {
                    self.left.push(Left {
                        next: mine.left,
                        ..g
                    });
                    mine.left = (self.left.len() - 1) as u32;
                }
            }
        }
        self.check_references()
    }

    /// The invariants that indexing relies on, for a decoded state: what would otherwise
    /// panic later is an error now.
    fn check_references(&self) -> Result<(), String> {
        let road = &self.road;
        let xways = road.xway_index.len();
        let mut seen = vec![false; xways];
        for (&x, &i) in &road.xway_index {
            match seen.get_mut(i as usize) {
                Some(s) if !*s => *s = true,
                _ => return Err(format!("expressway {x} has index {i} of {xways}")),
            }
        }
        if let Some((x, i)) = road.last_xway {
            if road.xway_index.get(&x) != Some(&i) {
                return Err(format!("cached expressway {x} -> {i} is not in the index"));
            }
        }
        let segs = road.segs.len();
        if segs != xways * SEGS_PER_XWAY as usize {
            return Err(format!(
                "{segs} segment records for {xways} expressways (200 each)"
            ));
        }
        for (loc, s) in &road.stopped {
            if (s.seg_id as usize) >= segs || (loc.xway as usize) >= xways || s.count == 0 {
                return Err(format!("stopped vehicles {s:?} at {loc:?} out of range"));
            }
        }
        if self.records.len() >= MAX_RECORDS as usize {
            return Err(format!("{} records", self.records.len()));
        }
        let ids = self.index.ids(self.records.len())?;
        let minute = self.group_minute;
        if minute != i64::MIN && u32::try_from(minute).is_err() {
            return Err(format!("the groups' minute {minute} is out of range"));
        }
        // Each left group is on one vehicle's chain of the current minute.
        let mut on_chain = vec![false; self.left.len()];
        for (r, &vid) in self.records.iter().zip(&ids) {
            if r.trip_seg != NONE
                && ((r.trip_seg as usize) >= segs || r.lane() > 4 || r.same() > STOP_REPORTS)
            {
                return Err(format!(
                    "the trip of vehicle {vid}'s record {r:?} is out of range"
                ));
            }
            if (r.latest == BIG_LATEST) != self.big_latest.contains_key(&vid)
                || (r.total == BIG_TOTAL) != self.big_totals.contains_key(&vid)
            {
                return Err(format!(
                    "vehicle {vid}'s latest toll {r:?} does not hold together"
                ));
            }
            if r.g_count() == 0 {
                if r.left != NONE {
                    return Err(format!(
                        "vehicle {vid} has left groups {} but no group of its own",
                        r.left
                    ));
                }
                continue;
            }
            if minute == i64::MIN {
                return Err(format!(
                    "vehicle {vid} has a minute group before the first minute"
                ));
            }
            if (r.g_seg as usize) >= segs {
                return Err(format!(
                    "minute group of vehicle {vid} in segment record {} of {segs}",
                    r.g_seg
                ));
            }
            let mut j = r.left;
            while j != NONE {
                match on_chain.get_mut(j as usize) {
                    Some(s) if !*s => *s = true,
                    _ => {
                        return Err(format!(
                            "vehicle {vid}'s left group {j} of {} is shared or out of range",
                            self.left.len()
                        ))
                    }
                }
                let l = self.left[j as usize];
                if l.count() > 0 && (l.seg as usize) >= segs {
                    return Err(format!(
                        "minute group of vehicle {vid} in segment record {} of {segs}",
                        l.seg
                    ));
                }
                j = l.next;
            }
        }
        if let Some(j) = on_chain.iter().position(|s| !s) {
            return Err(format!("left group {j} is on no vehicle's chain"));
        }
        Ok(())
    }

    /// Sizes of the partition's state.
    pub fn stats(&self) -> PartitionStats {
        use std::mem::size_of;
        let accidents: usize = self.road.segs.iter().map(|s| s.accidents.len()).sum();
        let minute_groups = self.records.iter().filter(|r| r.g_count() > 0).count()
            + self.left.iter().filter(|l| l.count() > 0).count();
        let parts = StateBytes {
            records: self.records.capacity_bytes(),
            index: self.index.capacity_bytes(),
            left: self.left.capacity() * size_of::<Left>(),
            road: self.road.segs.capacity() * size_of::<SegState>()
                + accidents * size_of::<Span>()
                + self.road.stopped.capacity() * (size_of::<(Loc, Stopped)>() + 1),
            other: self.big_latest.capacity() * (size_of::<(i64, (u32, i64))>() + 1)
                + self.big_totals.capacity() * (size_of::<(i64, i64)>() + 1)
                + self.pending.capacity() * size_of::<BalanceRequest>(),
        };
        let heap_bytes = parts.each().iter().sum();
        PartitionStats {
            vehicles_on_road: self.records.iter().filter(|r| r.trip_seg != NONE).count(),
            vehicles_known: self.records.len(),
            xways: self.road.xway_index.len(),
            segments: self.road.segs.len(),
            stopped_locations: self.road.stopped.len(),
            accidents,
            minute_groups,
            pending_balances: self.pending.len(),
            ignored_reports: self.ignored,
            ignored_types: self.ignored_types,
            heap_bytes,
            parts,
        }
    }

    fn answer_balances(&mut self, out: &mut Vec<Emitted>) {
        for r in std::mem::take(&mut self.pending) {
            let record = self.record_of(r.vid).map(|i| self.records[i as usize]);
            let latest = record.and_then(|v| Some((v, v.latest(r.vid, &self.big_latest)?)));
            let partial = match latest {
                Some((v, (latest, toll))) if i64::from(latest) <= r.time => {
                    let total = v.total(r.vid, &self.big_totals);
                    BalancePartial {
                        time: r.time,
                        qid: r.qid,
                        vid: r.vid,
                        latest: i64::from(latest),
                        sum_before: total - toll,
                        total,
                    }
                }
                _ => BalancePartial {
                    time: r.time,
                    qid: r.qid,
                    vid: r.vid,
                    latest: -1,
                    sum_before: 0,
                    total: 0,
                },
            };
            out.push(Emitted::BalancePartial(partial));
        }
    }

    /// A position report (type 0).
    fn position(&mut self, r: &Input, out: &mut Vec<Emitted>) {
        let fits = |v: i64, max: u32| (0..=i64::from(max)).contains(&v);
        if !(0..=4).contains(&r.lane)
            || !(0..=1).contains(&r.dir)
            || !(0..=99).contains(&r.seg)
            || !fits(r.time, u32::MAX - 1)
            || !fits(r.pos, (1 << POS_BITS) - 1)
            || i16::try_from(r.spd).is_err()
        {
            self.ignored += 1;
            return;
        }
        let (time, pos, spd) = (r.time as u32, r.pos as u32, r.spd as i32);
        let m = r.time / 60 + 1;
        let x = self.road.xway(r.xway);
        let seg_id = x * SEGS_PER_XWAY + r.dir as u32 * 100 + r.seg as u32;
        let found = self.record_of(r.vid);
        // The group of this segment the vehicle left earlier in the minute, if any
        // (taken back below). A group that would overflow its count (255 reports of
        // one vehicle in one segment and minute: repeated Times) is ignored before
        // anything changes. A report of a later minute folds the minute below, but then
        // the record's group is of an earlier minute: `back` is found only when no
        // fold comes between.
        let mut back = None;
        if let Some(i) = found.filter(|_| m <= self.group_minute) {
            let rec = &self.records[i as usize];
            if rec.g_count() > 0 {
                let count = if rec.g_seg == seg_id {
                    u16::from(rec.g_count())
                } else {
                    back = Self::left_in(&self.left, rec.left, seg_id);
                    back.map_or(0, |j| self.left[j as usize].count())
                };
                if count >= u16::from(u8::MAX) {
                    self.ignored += 1;
                    return;
                }
            }
        }
        if m > self.group_minute {
            self.fold_minute();
            self.group_minute = m;
        }
        let (i, new) = match found {
            Some(i) => (i, false),
            None => (self.add_record(r.vid, Record::new(time)), true),
        };

        // Segment statistics: every report, trip or not.
        let rec = &mut self.records[i as usize];
        // Sums and counts stay in range: at most 255 reports (checked above) of a
        // 16-bit Spd.
        if rec.g_count() == 0 {
            (rec.g_seg, rec.left) = (seg_id, NONE);
            rec.set_group(spd, 1);
        } else if rec.g_seg == seg_id {
            rec.set_group(rec.g_spd() + spd, rec.g_count() + 1);
        } else {
            // Another segment: the open group is left, and the vehicle takes back its
            // group of this segment if it was here earlier in the minute (`back`).
            if rec.g_count() > 0 {
                self.left.push(Left {
                    seg: rec.g_seg,
                    sum: rec.g_sum,
                    next: rec.left,
                });
                rec.left = (self.left.len() - 1) as u32;
            }
            let (spd0, count0) = match back {
                Some(j) => {
                    let l = &mut self.left[j as usize];
                    let had = (l.spd(), l.count());
                    l.sum = 0;
                    had
                }
                None => (0, 0),
            };
            // `count0` is below 255 (checked above).
            rec.g_seg = seg_id;
            rec.set_group(spd0 + spd, count0 as u8 + 1);
        }

        // Which trip does the report belong to (doc 8)?
        let start = if new {
            true
        } else if rec.trip_seg == NONE {
            r.lane == 0
        } else if r.lane == 0 && r.time - i64::from(rec.last_time) > 60 {
            // Re-entry: the old trip ends here.
            rec.end_trip(&mut self.road, m);
            true
        } else {
            false
        };
        rec.set_last_time(r.vid, time, &mut self.big_latest);
        if rec.trip_seg == NONE && !start {
            return; // no trip: statistics only
        }
        let loc = Loc {
            xway: x,
            pos,
            dir: r.dir as u8,
            lane: r.lane as u8,
        };
        let crossing = if start {
            rec.trip_seg = seg_id;
            rec.set_at(pos, loc.lane, 1);
            true
        } else {
            let was = rec.loc();
            if was == loc {
                if rec.same() < STOP_REPORTS {
                    rec.set_at(pos, loc.lane, rec.same() + 1);
                    if rec.same() == STOP_REPORTS {
                        self.road.stop(loc, seg_id, m);
                    }
                }
            } else {
                if rec.same() >= STOP_REPORTS {
                    self.road.unstop(was, m);
                }
                rec.set_at(pos, loc.lane, 1);
            }
            let crossing = rec.trip_seg != seg_id;
            rec.trip_seg = seg_id;
            crossing
        };

        if r.lane == 4 {
            // Exit ramp: never notified; the trip ends (the report moved the vehicle to
            // a new location, so it is not stopped).
            rec.end_trip(&mut self.road, m);
            return;
        }
        if crossing {
            let a = self.road.answer(seg_id, m);
            let toll = if a.lav < 40 && a.nov > 50 && a.accident < 0 {
                2 * (a.nov - 50) * (a.nov - 50)
            } else {
                0
            };
            out.push(Emitted::Out(Output::Toll {
                vid: r.vid,
                time: r.time,
                emit: -1,
                lav: a.lav,
                toll,
            }));
            if a.accident >= 0 {
                out.push(Emitted::Out(Output::Accident {
                    time: r.time,
                    emit: -1,
                    vid: r.vid,
                    seg: a.accident,
                }));
            }
            let rec = &mut self.records[i as usize];
            rec.set_latest(r.vid, Some((time, toll)), &mut self.big_latest);
            let total = rec.total(r.vid, &self.big_totals) + toll;
            rec.set_total(r.vid, total, &mut self.big_totals);
        }
    }

    /// The group of segment record `seg` on the chain of left groups from `j`.
    fn left_in(left: &[Left], mut j: u32, seg: u32) -> Option<u32> {
        while j != NONE {
            let l = left[j as usize];
            if l.seg == seg && l.count() > 0 {
                return Some(j);
            }
            j = l.next;
        }
        None
    }
}

/// The bincode options of [`Partition::save_state`]: varint integers (most are small),
/// little endian, trailing bytes rejected.
fn state_codec() -> impl bincode::Options {
    bincode::DefaultOptions::new()
}

/// Type-4 answer (doc 6.7): (TravelTime in s, Toll), or `None` when there is no segment
/// history or a segment is outside 0..99.
fn travel_time(h: &SegmentHistory, t: &Input) -> Option<(i64, i64)> {
    if h.is_empty() || !(0..=99).contains(&t.s_init) || !(0..=99).contains(&t.s_end) {
        return None;
    }
    let (dir, step) = if t.s_end > t.s_init { (0, 1) } else { (1, -1) };
    let week_start = (t.dow - 1) * 1440 + (t.tod - 1);
    let mut elapsed_ms = 0i64;
    let mut toll = 0i64;
    let mut seg = t.s_init;
    loop {
        let minute = (week_start + elapsed_ms / 60_000).rem_euclid(10_080);
        let row = h.get(t.xway, dir, seg, minute / 1440 + 1, (minute % 1440) / 15);
        let speed = match row {
            Some((s, _)) if s >= 5 => s,
            _ => 5,
        };
        elapsed_ms += 3_600_000 / speed;
        toll += row.map_or(0, |r| r.1);
        if seg == t.s_end {
            break;
        }
        seg += step;
    }
    Some((elapsed_ms / 1000, toll))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_types_and_out_of_range_reports_are_counted() {
        let mut p = partition();
        let mut f = [0i64; 15];
        f[0] = 7; // no such type
        let mut out = Vec::new();
        p.process(&Input::from_fields(f), &mut out);
        p.process(&rep(30, 1, 50, 0, 9, 0, 10, 0), &mut out); // lane 9
        let s = p.stats();
        assert_eq!((s.ignored_types, s.ignored_reports), (1, 1));
        assert!(out.is_empty());
    }

    /// Pos and Spd at the edges of what a record holds: the largest (and the most
    /// negative Spd) are taken and kept exactly, one beyond is counted as ignored.
    #[test]
    fn pos_and_spd_beyond_the_record_fields_are_ignored() {
        let mut p = partition();
        let mut out = Vec::new();
        let top = (1i64 << POS_BITS) - 1;
        // A report at `pos` in segment 5 (Pos beyond the 100 segments' miles: only the
        // record's field limits it).
        let at = |time: i64, vid: i64, spd: i64, lane: i64, pos: i64| {
            let mut t = Input::position(time, vid, spd, 0, lane, 1, 0);
            (t.seg, t.pos) = (5, pos);
            t
        };
        p.process(&at(0, 1, 0, 1, top + 1), &mut out);
        p.process(&at(0, 2, -(1 << 15) - 1, 1, 5280), &mut out);
        p.process(&at(0, 3, 1 << 15, 1, 5280), &mut out);
        assert_eq!(p.stats().ignored_reports, 3);
        assert_eq!(p.stats().vehicles_known, 0);
        p.process(&at(0, 4, 32767, 3, top), &mut out);
        assert_eq!(p.stats().ignored_reports, 3);
        let r = p.records[p.record_of(4).expect("taken") as usize];
        assert_eq!((r.pos(), r.lane(), r.same()), (top as u32, 3, 1));
        assert_eq!((r.g_spd(), r.g_count()), (32767, 1));
        // The same place again, four times: stopped there, everything else kept.
        for t in [30, 60, 90] {
            p.process(&at(t, 4, 32767, 3, top), &mut out);
        }
        let r = p.records[p.record_of(4).expect("taken") as usize];
        assert_eq!((r.pos(), r.lane(), r.same()), (top as u32, 3, STOP_REPORTS));
        assert_eq!(p.stats().stopped_locations, 1);
        // A full group of the fastest reports (two of minute 2 so far): 255 x (2^15 - 1)
        // is the largest sum.
        for _ in 0..253 {
            p.process(&at(90, 4, 32767, 3, top), &mut out);
        }
        let r = p.records[p.record_of(4).expect("taken") as usize];
        assert_eq!((r.g_spd(), r.g_count()), (255 * 32767, 255));
        p.process(&at(90, 4, 32767, 3, top), &mut out);
        assert_eq!(p.stats().ignored_reports, 4);
        let r = p.records[p.record_of(4).expect("taken") as usize];
        assert_eq!((r.g_spd(), r.g_count()), (255 * 32767, 255));
        // And of the slowest: the smallest sum.
        for _ in 0..256 {
            p.process(&at(150, 9, -32768, 1, 5280), &mut out);
        }
        let r = p.records[p.record_of(9).expect("taken") as usize];
        assert_eq!((r.g_spd(), r.g_count()), (255 * -32768, 255));
        assert_eq!(p.stats().ignored_reports, 5);
    }

    fn partition() -> Partition {
        Partition::new(
            Arc::new(TollHistory::default()),
            Arc::new(SegmentHistory::empty()),
        )
    }

    /// Sorts `input` by Time (stably) and feeds it, calling `end_of_second` after the
    /// last tuple of each second, then `finish`.
    fn run(p: &mut Partition, mut input: Vec<Input>) -> Vec<Emitted> {
        input.sort_by_key(|t| t.time);
        let mut out = Vec::new();
        for (i, t) in input.iter().enumerate() {
            p.process(t, &mut out);
            if input.get(i + 1).map(|n| n.time) != Some(t.time) {
                p.end_of_second(t.time, &mut out);
            }
        }
        p.finish(&mut out);
        out
    }

    /// A report at `pos` feet into segment `seg`.
    #[allow(clippy::too_many_arguments)]
    fn rep(
        time: i64,
        vid: i64,
        spd: i64,
        xway: i64,
        lane: i64,
        dir: i64,
        seg: i64,
        pos: i64,
    ) -> Input {
        Input::position(time, vid, spd, xway, lane, dir, seg * 5280 + pos)
    }

    #[allow(clippy::too_many_arguments)]
    /// `n` vehicles `vid0..` reporting once at `time` from segment (xway, dir, seg).
    fn crowd(
        input: &mut Vec<Input>,
        time: i64,
        xway: i64,
        dir: i64,
        seg: i64,
        n: i64,
        spd: i64,
        vid0: i64,
    ) {
        for i in 0..n {
            input.push(rep(time, vid0 + i, spd, xway, 1, dir, seg, 1000 + i));
        }
    }

    fn request(typ: i64, time: i64, vid: i64, qid: i64) -> Input {
        let mut t = Input::from_fields([-1; 15]);
        t.typ = typ;
        t.time = time;
        t.vid = vid;
        t.qid = qid;
        t
    }

    /// (Time, LAV, Toll) of the toll notifications of `vid`.
    fn tolls(out: &[Emitted], vid: i64) -> Vec<(i64, i64, i64)> {
        out.iter()
            .filter_map(|e| match *e {
                Emitted::Out(Output::Toll {
                    vid: v,
                    time,
                    lav,
                    toll,
                    ..
                }) if v == vid => Some((time, lav, toll)),
                _ => None,
            })
            .collect()
    }

    /// (Time, Seg) of the accident notifications of `vid`.
    fn accidents(out: &[Emitted], vid: i64) -> Vec<(i64, i64)> {
        out.iter()
            .filter_map(|e| match *e {
                Emitted::Out(Output::Accident {
                    vid: v, time, seg, ..
                }) if v == vid => Some((time, seg)),
                _ => None,
            })
            .collect()
    }

    /// A vehicle that leaves a segment and comes back to it within a minute is one
    /// vehicle of the segment's NOV, with the mean of all its speeds there (its group
    /// is taken back from the list of left groups, not counted twice).
    #[test]
    fn a_vehicle_back_in_a_segment_within_a_minute_counts_once() {
        let mut input = Vec::new();
        input.push(rep(1, 9000, 10, 0, 1, 0, 5, 10));
        input.push(rep(2, 9000, 50, 0, 1, 0, 6, 10));
        input.push(rep(3, 9000, 20, 0, 1, 0, 5, 20));
        crowd(&mut input, 10, 0, 0, 5, 52, 30, 1000);
        input.push(rep(60, 1, 30, 0, 0, 0, 5, 100));
        let mut p = partition();
        let out = run(&mut p, input);
        // NOV 53, LAV trunc((52 * 30 + 15) / 53) = 29: toll 2 * 3^2. Counted twice it
        // would be NOV 54 and toll 32.
        assert_eq!(tolls(&out, 1), vec![(60, 29, 18)]);
    }

    /// A report that would overflow its group's count is ignored before it changes
    /// anything; the group's other reports count as before.
    #[test]
    fn a_group_that_would_overflow_ignores_the_report() {
        let mut p = partition();
        let mut out = Vec::new();
        for _ in 0..u8::MAX {
            p.process(&rep(0, 7, 0, 0, 1, 0, 5, 10), &mut out);
        }
        assert_eq!(p.stats().ignored_reports, 0);
        p.process(&rep(0, 7, 0, 0, 1, 0, 5, 10), &mut out);
        assert_eq!(p.stats().ignored_reports, 1);
        let mut input = Vec::new();
        crowd(&mut input, 10, 0, 0, 5, 51, 30, 1000);
        input.push(rep(60, 1, 30, 0, 0, 0, 5, 100));
        for t in &input {
            p.process(t, &mut out);
        }
        p.end_of_second(60, &mut out);
        // NOV 52 (vehicle 7 once, at speed 0), LAV trunc(51 * 30 / 52) = 29: toll
        // 2 * 2^2 (the report in a group of its own would make NOV 53, toll 18).
        assert_eq!(tolls(&out, 1), vec![(60, 29, 8)]);
    }

    #[test]
    fn nov_and_toll_formula() {
        let mut input = Vec::new();
        crowd(&mut input, 10, 0, 0, 5, 52, 30, 1000); // NOV 52, LAV 30 -> toll 8
        crowd(&mut input, 10, 0, 0, 8, 50, 30, 2000); // NOV 50: no toll
        crowd(&mut input, 10, 0, 0, 9, 51, 40, 3000); // LAV 40: no toll
        crowd(&mut input, 10, 0, 0, 10, 51, 39, 4000); // NOV 51, LAV 39 -> toll 2
        input.push(rep(60, 1, 30, 0, 0, 0, 5, 100));
        input.push(rep(60, 2, 30, 0, 0, 0, 6, 100)); // empty segment
        input.push(rep(60, 3, 30, 0, 0, 1, 5, 100)); // other direction
        input.push(rep(60, 4, 30, 0, 0, 0, 8, 100));
        input.push(rep(60, 5, 30, 0, 0, 0, 9, 100));
        input.push(rep(60, 6, 30, 0, 0, 0, 10, 100));
        input.push(rep(60, 7, 30, 1, 0, 0, 5, 100)); // other expressway
        let out = run(&mut partition(), input);
        assert_eq!(tolls(&out, 1000), vec![(10, -1, 0)]);
        assert_eq!(tolls(&out, 1), vec![(60, 30, 8)]);
        assert_eq!(tolls(&out, 2), vec![(60, -1, 0)]);
        assert_eq!(tolls(&out, 3), vec![(60, -1, 0)]);
        assert_eq!(tolls(&out, 4), vec![(60, 30, 0)]);
        assert_eq!(tolls(&out, 5), vec![(60, 40, 0)]);
        assert_eq!(tolls(&out, 6), vec![(60, 39, 2)]);
        assert_eq!(tolls(&out, 7), vec![(60, -1, 0)]);
        // One notification per crossing and nothing else.
        assert_eq!(out.len(), 52 + 50 + 51 + 51 + 7);
    }

    #[test]
    fn lav_skips_empty_minutes_and_truncates() {
        let input = vec![
            // Segment 10, minute 1: A means (20+40)/2 = 30, B 61 -> minute value 45.5.
            rep(0, 1, 20, 0, 1, 0, 10, 1),
            rep(5, 2, 61, 0, 1, 0, 10, 2),
            rep(30, 1, 40, 0, 1, 0, 10, 900),
            // Minute 2: nothing. Minute 3: C at 10.
            rep(130, 3, 10, 0, 1, 0, 10, 3),
            // Minute 4: D crosses: mean(45.5, 10) = 27.75 -> 27; NOV = minute 3's 1.
            rep(180, 4, 50, 0, 1, 0, 10, 4),
            // Minute 7: window 2..6 holds minutes 3 (10) and 4 (50) -> 30; NOV 0.
            rep(360, 5, 0, 0, 1, 0, 10, 5),
            // Minute 11: window 6..10 holds minute 7 (0).
            rep(600, 6, 22, 0, 1, 0, 10, 6),
            // Minute 16: window 11..15 holds minute 11 (22).
            rep(900, 7, 33, 0, 1, 0, 10, 7),
            // Minute 22: window 17..21 is empty -> -1.
            rep(1300, 8, 33, 0, 1, 0, 10, 8),
            // Segment 20: means -7 and -8 -> -7.5, truncated toward zero.
            rep(0, 11, -7, 0, 1, 0, 20, 1),
            rep(1, 12, -8, 0, 1, 0, 20, 2),
            rep(60, 13, 0, 0, 1, 0, 20, 3),
            // Segment 30: mean of per-vehicle means: (10+50)/2 = 30 and 90 -> 60
            // (the mean of the three reports would be 50).
            rep(0, 21, 10, 0, 1, 0, 30, 1),
            rep(1, 22, 90, 0, 1, 0, 30, 2),
            rep(30, 21, 50, 0, 1, 0, 30, 900),
            rep(60, 23, 0, 0, 1, 0, 30, 3),
        ];
        let out = run(&mut partition(), input);
        assert_eq!(tolls(&out, 4), vec![(180, 27, 0)]);
        assert_eq!(tolls(&out, 5), vec![(360, 30, 0)]);
        assert_eq!(tolls(&out, 6), vec![(600, 0, 0)]);
        assert_eq!(tolls(&out, 7), vec![(900, 22, 0)]);
        assert_eq!(tolls(&out, 8), vec![(1300, -1, 0)]);
        assert_eq!(tolls(&out, 13), vec![(60, -7, 0)]);
        assert_eq!(tolls(&out, 23), vec![(60, 60, 0)]);
        // A's second report is in the same segment: no second notification.
        assert_eq!(tolls(&out, 1), vec![(0, -1, 0)]);
    }

    #[test]
    fn lav_exact_fraction_arithmetic() {
        // Three minutes with values 1/3, 1/3 and 1/3 (as sums over L): the mean is
        // exactly 1/3, truncated to 0; 2 + 2/3 + 1/3 over two minutes is exactly 1.5.
        let mut ring = [NO_MINUTE; WINDOW];
        for (minute, nov, num) in [(1, 3, 1), (2, 3, 1), (3, 3, 1)] {
            ring[SegState::slot(minute)] = MinuteAgg {
                minute,
                nov,
                sum: num * LCM_60,
            };
        }
        assert_eq!(lav(&ring, 4), 0);
        let mut ring = [NO_MINUTE; WINDOW];
        ring[SegState::slot(1)] = MinuteAgg {
            minute: 1,
            nov: 3,
            sum: 8 * LCM_60,
        };
        ring[SegState::slot(2)] = MinuteAgg {
            minute: 2,
            nov: 3,
            sum: LCM_60,
        };
        assert_eq!(lav(&ring, 3), 1); // (8/3 + 1/3) / 2 = 1.5
        ring[SegState::slot(1)].sum = 9 * LCM_60; // (3 + 1/3) / 2 = 1.67
        assert_eq!(lav(&ring, 3), 1);
        ring[SegState::slot(1)].sum = 11 * LCM_60; // (11/3 + 1/3) / 2 = 2 exactly
        assert_eq!(lav(&ring, 3), 2);
        ring[SegState::slot(1)].sum = -11 * LCM_60; // (-11/3 + 1/3) / 2 = -5/3
        assert_eq!(lav(&ring, 3), -1);
        ring[SegState::slot(1)].sum = -13 * LCM_60; // (-13/3 + 1/3) / 2 = -2 exactly
        assert_eq!(lav(&ring, 3), -2);
        assert_eq!(lav(&ring, 9), -1);
    }

    #[test]
    fn accident_detection_clear_and_second_accident() {
        let p = 100; // feet into segment 20
        let mut input = vec![
            // Vehicles 1 and 2 stop at (0, 0, lane 1, 20*5280+100): 2 is stopped at t=100
            // (minute 2): accident detected in minute 2, active from minute 3.
            rep(0, 1, 0, 0, 1, 0, 20, p),
            rep(30, 1, 0, 0, 1, 0, 20, p),
            rep(60, 1, 0, 0, 1, 0, 20, p),
            rep(90, 1, 0, 0, 1, 0, 20, p),
            rep(10, 2, 0, 0, 1, 0, 20, p),
            rep(40, 2, 0, 0, 1, 0, 20, p),
            rep(70, 2, 0, 0, 1, 0, 20, p),
            rep(100, 2, 0, 0, 1, 0, 20, p),
            rep(110, 4, 50, 0, 1, 0, 17, 0), // minute 2: not yet active
            rep(170, 3, 50, 0, 1, 0, 17, 0), // minute 3: active, 3 segments ahead
            rep(120, 1, 0, 0, 1, 0, 20, p),
            rep(150, 1, 0, 0, 1, 0, 20, p),
            rep(180, 1, 0, 0, 1, 0, 20, p),
            rep(210, 1, 0, 0, 1, 0, 20, p),
            // Vehicle 1 moves at t=240 (minute 5): cleared, active through minute 5.
            rep(240, 1, 10, 0, 1, 0, 20, p + 2000),
            rep(250, 5, 50, 0, 1, 0, 19, 0), // minute 5: still active
            rep(300, 6, 50, 0, 1, 0, 19, 0), // minute 6: over
            // Vehicle 2 never reported again: still stopped. Vehicle 7 stops there at
            // t=390 (minute 7): a second accident, active from minute 8 to the end.
            rep(300, 7, 0, 0, 1, 0, 20, p),
            rep(330, 7, 0, 0, 1, 0, 20, p),
            rep(360, 7, 0, 0, 1, 0, 20, p),
            rep(390, 7, 0, 0, 1, 0, 20, p),
            rep(400, 8, 50, 0, 1, 0, 20, 0),  // minute 7: not yet
            rep(420, 9, 50, 0, 1, 0, 20, 0),  // minute 8: active, in the segment itself
            rep(420, 10, 50, 0, 1, 0, 16, 0), // 4 segments ahead: in range
            rep(420, 11, 50, 0, 1, 0, 15, 0), // 5 segments ahead: out of range
            rep(420, 12, 50, 0, 1, 1, 22, 0), // other direction
            rep(425, 14, 50, 0, 1, 0, 21, 0), // upstream of the crossing: no
            rep(10000, 13, 50, 0, 1, 0, 20, 0),
        ];
        // A lane change at the same Pos is a different location: no stop.
        input.extend((0..4).map(|i| rep(500 + i, 30, 0, 0, 1 + (i % 2), 0, 40, 7)));
        input.extend((0..4).map(|i| rep(500 + i, 31, 0, 0, 1, 0, 40, 7)));
        input.push(rep(700, 32, 50, 0, 1, 0, 40, 0));
        let out = run(&mut partition(), input);
        assert_eq!(accidents(&out, 4), vec![]);
        assert_eq!(accidents(&out, 3), vec![(170, 20)]);
        assert_eq!(tolls(&out, 3).len(), 1);
        assert_eq!(accidents(&out, 5), vec![(250, 20)]);
        assert_eq!(accidents(&out, 6), vec![]);
        assert_eq!(accidents(&out, 7), vec![]);
        assert_eq!(accidents(&out, 8), vec![]);
        assert_eq!(accidents(&out, 9), vec![(420, 20)]);
        assert_eq!(accidents(&out, 10), vec![(420, 20)]);
        assert_eq!(accidents(&out, 11), vec![]);
        assert_eq!(accidents(&out, 12), vec![]);
        assert_eq!(accidents(&out, 14), vec![]);
        assert_eq!(accidents(&out, 13), vec![(10000, 20)]);
        assert_eq!(accidents(&out, 32), vec![]);
        assert_eq!(accidents(&out, 1), vec![]);
    }

    #[test]
    fn nearest_accident_and_toll_suppression() {
        let mut input = Vec::new();
        // Accidents detected in minute 1 (reports one second apart) at segments 22 and
        // 24 in both directions.
        for (dir, seg, a, b) in [(0, 22, 1, 2), (0, 24, 3, 4), (1, 22, 5, 6), (1, 24, 7, 8)] {
            for t in 0..4 {
                input.push(rep(t, a, 0, 0, 2, dir, seg, 5));
                input.push(rep(t, b, 0, 0, 2, dir, seg, 5));
            }
        }
        crowd(&mut input, 10, 0, 0, 20, 52, 30, 1000);
        crowd(&mut input, 10, 0, 0, 40, 52, 30, 2000);
        input.push(rep(60, 20, 50, 0, 1, 0, 21, 0));
        input.push(rep(60, 21, 50, 0, 1, 0, 23, 0));
        input.push(rep(60, 22, 50, 0, 1, 1, 25, 0));
        input.push(rep(60, 23, 50, 0, 1, 1, 23, 0));
        input.push(rep(60, 24, 50, 0, 1, 0, 25, 0));
        input.push(rep(60, 25, 50, 0, 1, 0, 20, 0));
        input.push(rep(60, 26, 50, 0, 1, 0, 40, 0));
        let out = run(&mut partition(), input);
        assert_eq!(accidents(&out, 20), vec![(60, 22)]);
        assert_eq!(accidents(&out, 21), vec![(60, 24)]);
        assert_eq!(accidents(&out, 22), vec![(60, 24)]);
        assert_eq!(accidents(&out, 23), vec![(60, 22)]);
        assert_eq!(accidents(&out, 24), vec![]);
        assert_eq!(accidents(&out, 25), vec![(60, 22)]);
        assert_eq!(tolls(&out, 25), vec![(60, 30, 0)]);
        assert_eq!(accidents(&out, 26), vec![]);
        assert_eq!(tolls(&out, 26), vec![(60, 30, 8)]);
    }

    #[test]
    fn exit_lane_and_no_trip_reports() {
        let mut input = vec![
            rep(0, 1, 50, 0, 0, 0, 3, 0),   // entrance: notified
            rep(30, 1, 50, 0, 1, 0, 4, 0),  // crossing: notified
            rep(60, 1, 10, 0, 4, 0, 5, 0),  // exit ramp, new segment: not notified
            rep(90, 1, 20, 0, 1, 0, 5, 9),  // no trip
            rep(120, 1, 20, 0, 1, 0, 6, 0), // no trip, other segment: not a crossing
            rep(150, 1, 20, 0, 0, 0, 6, 9), // lane 0 after the exit: new trip
            // Vehicle 2 crosses into segment 5 in minute 3: NOV and LAV of minute 2 count
            // vehicle 1's exit and no-trip reports (one vehicle, mean 15).
            rep(150, 2, 50, 0, 1, 0, 5, 0),
        ];
        // No-trip reports never make a vehicle stopped: vehicle 3 exits, then reports 4
        // times beside the stopped vehicle 4: no accident.
        input.push(rep(0, 3, 0, 0, 4, 0, 50, 0));
        for t in 1..5 {
            input.push(rep(t, 3, 0, 0, 1, 0, 50, 77));
            input.push(rep(t, 4, 0, 0, 1, 0, 50, 77));
        }
        input.push(rep(120, 5, 50, 0, 1, 0, 49, 0));
        let mut p = partition();
        let out = run(&mut p, input);
        assert_eq!(tolls(&out, 1), vec![(0, -1, 0), (30, -1, 0), (150, -1, 0)]);
        assert_eq!(tolls(&out, 2), vec![(150, 15, 0)]);
        assert_eq!(tolls(&out, 3), vec![]);
        assert_eq!(accidents(&out, 5), vec![]);
        let stats = p.stats();
        assert_eq!(stats.vehicles_known, 5);
        assert_eq!(stats.vehicles_on_road, 4); // 1 (new trip), 2, 4, 5
        assert_eq!(stats.stopped_locations, 1);
    }

    #[test]
    fn re_entry_starts_new_trip_and_clears_accident() {
        let mut input = vec![
            rep(0, 1, 50, 0, 0, 0, 3, 0),   // notified
            rep(30, 1, 50, 0, 0, 0, 3, 0),  // same trip, same segment
            rep(120, 1, 50, 0, 0, 0, 3, 0), // lane 0, 90 s later: new trip, notified
            rep(150, 1, 50, 0, 1, 0, 3, 9), // same segment
            rep(400, 1, 50, 0, 1, 0, 3, 9), // long gap but lane 1: same trip
            rep(430, 1, 50, 0, 0, 0, 3, 9), // lane 0, 30 s later: same trip
        ];
        // Vehicles 2 and 3 stopped in segment 10 (accident detected minute 1); vehicle 2
        // starts a new trip at t=200 (minute 4): cleared, active through minute 4.
        for t in 0..4 {
            input.push(rep(t, 2, 0, 0, 1, 0, 10, 5));
            input.push(rep(t, 3, 0, 0, 1, 0, 10, 5));
        }
        input.push(rep(200, 2, 40, 0, 0, 0, 30, 0));
        input.push(rep(230, 5, 50, 0, 1, 0, 10, 0)); // minute 4: active
        input.push(rep(240, 4, 50, 0, 1, 0, 10, 0)); // minute 5: cleared
        let out = run(&mut partition(), input);
        assert_eq!(tolls(&out, 1), vec![(0, -1, 0), (120, 50, 0)]); // LAV: its own minute-1 reports
        assert_eq!(tolls(&out, 2).len(), 2);
        assert_eq!(accidents(&out, 5), vec![(230, 10)]);
        assert_eq!(accidents(&out, 4), vec![]);
    }

    fn partials(out: &[Emitted]) -> Vec<BalancePartial> {
        out.iter()
            .filter_map(|e| match *e {
                Emitted::BalancePartial(p) => Some(p),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn balance_partials_and_cross_partition_merge() {
        // Partition A holds expressway 0, partition B expressway 1; type-2 requests go to
        // both.
        let mut a_in = Vec::new();
        crowd(&mut a_in, 10, 0, 0, 5, 52, 30, 1000); // toll 8 in minute 2
        crowd(&mut a_in, 10, 0, 0, 6, 55, 30, 2000); // toll 50 in minute 2
        let requests = [
            request(2, 5, 1, 0),
            request(2, 60, 1, 1), // before the report of its second in input order
            request(2, 100, 1, 2),
            request(2, 230, 1, 3),
        ];
        a_in.extend(requests.iter().take(2).copied());
        a_in.push(rep(60, 1, 30, 0, 0, 0, 5, 0)); // toll 8
        a_in.push(rep(90, 1, 30, 0, 1, 0, 6, 0)); // toll 50
        a_in.push(rep(120, 1, 30, 0, 4, 0, 7, 0)); // exit
        a_in.extend(requests.iter().skip(2).copied());
        let mut b_in = Vec::new();
        crowd(&mut b_in, 130, 1, 0, 5, 53, 30, 3000); // toll 18 in minute 4
        b_in.extend(requests.iter().copied());
        b_in.push(rep(200, 1, 30, 1, 0, 0, 5, 0)); // re-entry on expressway 1: toll 18

        let a = partials(&run(&mut partition(), a_in));
        let b = partials(&run(&mut partition(), b_in));
        assert_eq!(a.len(), 4);
        assert_eq!(b.len(), 4);
        assert_eq!(
            a[3],
            BalancePartial {
                time: 230,
                qid: 3,
                vid: 1,
                latest: 90,
                sum_before: 8,
                total: 58
            }
        );
        assert_eq!(
            b[3],
            BalancePartial {
                time: 230,
                qid: 3,
                vid: 1,
                latest: 200,
                sum_before: 0,
                total: 18
            }
        );
        let answers: Vec<(i64, i64)> = a
            .iter()
            .zip(&b)
            .map(|(x, y)| match merge_balance(&[*x, *y]) {
                Output::Balance {
                    result_time,
                    bal,
                    emit: -1,
                    ..
                } => (result_time, bal),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(answers, vec![(5, 0), (60, 0), (90, 8), (200, 58)]);
        assert_eq!(
            merge_balance(&[b[1], a[1]]),
            Output::Balance {
                time: 60,
                emit: -1,
                result_time: 60,
                qid: 1,
                bal: 0
            }
        );
    }

    /// A total beyond the record's 32 bits is kept exactly (in the side map), answered
    /// exactly, and survives a checkpoint.
    /// The index keeps every id: ids that share their low 32 bits, and ids outside
    /// 0..=u32::MAX, are vehicles of their own, in answers and through a checkpoint.
    /// The index against a plain map, through every growth of its table: each id finds
    /// its record (narrow ids that share low bits, wide ones, record 0), an id never
    /// inserted finds none, the table is never more than 4/5 full, and the ids come
    /// back in record order.
    #[test]
    fn the_index_finds_every_vehicle_through_its_growths() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(19);
        let mut index = VidIndex::default();
        let mut truth: std::collections::HashMap<i64, u32> = Default::default();
        let mut ids = Vec::new();
        let mut sizes = Vec::new();
        while ids.len() < 20_000 {
            let vid = match rng.gen_range(0..4) {
                0 => ids.len() as i64,
                1 => rng.gen_range(0..=i64::from(u32::MAX)),
                2 => rng.gen_range(1..4i64) << 32 | rng.gen_range(0..64),
                _ => rng.gen::<i64>(),
            };
            if truth.contains_key(&vid) {
                continue;
            }
            let record = ids.len() as u32;
            assert_eq!(index.find(vid), None, "{vid} before its insert");
            index.insert(vid, record);
            truth.insert(vid, record);
            ids.push(vid);
            assert!(
                index.len * 5 <= index.slots.len() * 4,
                "{} in {}",
                index.len,
                index.slots.len()
            );
            if sizes.last() != Some(&index.slots.len()) {
                sizes.push(index.slots.len());
                for (&v, &r) in &truth {
                    assert_eq!(index.find(v), Some(r), "{v} at {} slots", index.slots.len());
                }
            }
        }
        assert!(sizes.len() > 10, "grew {} times", sizes.len());
        for k in 0..2_000 {
            let v = rng.gen::<i64>() ^ k;
            assert_eq!(index.find(v), truth.get(&v).copied(), "{v}");
        }
        assert_eq!(index.ids(ids.len()), Ok(ids));
    }

    /// Staggered indexes grow at different counts, never above 4/5 full.
    #[test]
    fn staggered_indexes_grow_apart() {
        let grown_at = |k: u32| {
            let mut index = VidIndex::default();
            index.stagger(k, 16);
            let mut at = Vec::new();
            for v in 0..100_000u32 {
                let before = index.slots.len();
                index.insert(i64::from(v), v);
                if index.slots.len() != before {
                    at.push(v);
                }
                assert!(index.len * 5 <= index.slots.len() * 4);
            }
            at
        };
        let (first, last) = (grown_at(0), grown_at(15));
        assert_eq!(first.len(), last.len());
        // The last grows at 72.5% where the first waits for 80%: 9% fewer vehicles.
        let (a, b) = (first[first.len() - 1], last[last.len() - 1]);
        assert!(b < a && b > a * 88 / 100, "{a} {b}");
    }

    #[test]
    fn ids_beyond_32_bits_are_vehicles_of_their_own() {
        let ids = [
            7,
            7 + (1 << 32),
            7 - (1 << 32),
            -1,
            i64::from(u32::MAX),
            i64::MAX,
            i64::MIN,
        ];
        let mut p = partition();
        let mut out = Vec::new();
        for (k, &vid) in ids.iter().enumerate() {
            // A trip starting at second 10 k: its notification's time is the vehicle's.
            p.process(&rep(10 * k as i64, vid, 30, 0, 0, 0, 4, 0), &mut out);
            p.end_of_second(10 * k as i64, &mut out);
        }
        assert_eq!(p.records.len(), ids.len());
        assert_eq!(p.index.ids(p.records.len()), Ok(ids.to_vec()));
        let mut bytes = Vec::new();
        p.save_state(&mut bytes).expect("save");
        let q = p.decode_state(&bytes).expect("restore");
        assert_same_state(&p, &q, "after a restore");
        for mut part in [p, q] {
            out.clear();
            for (k, &vid) in ids.iter().enumerate() {
                part.process(&request(2, 100, vid, k as i64), &mut out);
            }
            part.end_of_second(100, &mut out);
            let latest: Vec<(i64, i64)> =
                partials(&out).iter().map(|b| (b.vid, b.latest)).collect();
            let want: Vec<(i64, i64)> = ids
                .iter()
                .enumerate()
                .map(|(k, &vid)| (vid, 10 * k as i64))
                .collect();
            assert_eq!(latest, want);
        }
    }

    #[test]
    fn tolls_and_totals_beyond_the_record_fields_are_exact() {
        let mut p = partition();
        let mut input = Vec::new();
        // 1,100 vehicles in segment 5 in minute 1: NOV 1,100, LAV 30, toll 2 * 1,050^2
        // (beyond the 21 bits of a record's latest toll).
        crowd(&mut input, 10, 0, 0, 5, 1100, 30, 10_000);
        input.push(rep(50, 1, 30, 0, 0, 0, 4, 0)); // a trip starts in segment 4: toll 0
        let mut out = Vec::new();
        for t in &input {
            p.process(t, &mut out);
        }
        p.end_of_second(50, &mut out);
        let big = i64::from(u32::MAX) - 1_000;
        let i = p.record_of(1).expect("vehicle 1 reported") as usize;
        p.records[i].set_total(1, big, &mut p.big_totals);
        assert!(p.big_totals.is_empty(), "{big} fits 32 bits");
        out.clear();
        p.process(&rep(60, 1, 30, 0, 1, 0, 5, 0), &mut out); // crossing into segment 5
        p.process(&request(2, 61, 1, 9), &mut out);
        p.end_of_second(61, &mut out);
        let toll = 2 * 1050 * 1050;
        assert_eq!(tolls(&out, 1), vec![(60, 30, toll)]);
        let want = BalancePartial {
            time: 61,
            qid: 9,
            vid: 1,
            latest: 60,
            sum_before: big,
            total: big + toll,
        };
        assert_eq!(partials(&out), vec![want]);
        assert_eq!(p.records[i].total, BIG_TOTAL);
        assert_eq!(p.records[i].latest, BIG_LATEST, "a toll beyond 21 bits");
        let mut bytes = Vec::new();
        p.save_state(&mut bytes).expect("save");
        let q = p.decode_state(&bytes).expect("restore");
        assert_same_state(&p, &q, "after a restore");
        let mut q = q;
        let mut again = Vec::new();
        q.process(&request(2, 62, 1, 10), &mut again);
        q.end_of_second(62, &mut again);
        assert_eq!(
            partials(&again),
            vec![BalancePartial {
                time: 62,
                qid: 10,
                ..want
            }]
        );
    }

    /// A latest notification packs into the record while its toll fits 21 bits and it
    /// is at most 2,046 s before the latest report; otherwise it is exact in the side
    /// map, and back in the record once it packs again.
    #[test]
    fn latest_notifications_that_do_not_pack_are_exact() {
        let mut p = partition();
        let mut out = Vec::new();
        p.process(&rep(10, 1, 30, 0, 0, 0, 4, 0), &mut out); // a trip starts: toll 0 at 10
        p.end_of_second(10, &mut out);
        let i = p.record_of(1).expect("vehicle 1") as usize;
        assert_eq!(p.records[i].latest(1, &p.big_latest), Some((10, 0)));
        assert!(p.big_latest.is_empty());
        // The trip goes on in the same segment 70,000 s later: no notification, and the
        // one of second 10 is too far back to pack.
        p.process(&rep(70_010, 1, 30, 0, 1, 0, 4, 0), &mut out);
        p.end_of_second(70_010, &mut out);
        assert_eq!(p.records[i].latest, BIG_LATEST);
        assert_eq!(p.records[i].latest(1, &p.big_latest), Some((10, 0)));
        out.clear();
        p.process(&request(2, 70_011, 1, 7), &mut out);
        p.end_of_second(70_011, &mut out);
        let want = BalancePartial {
            time: 70_011,
            qid: 7,
            vid: 1,
            latest: 10,
            sum_before: 0,
            total: 0,
        };
        assert_eq!(partials(&out), vec![want]);
        let mut bytes = Vec::new();
        p.save_state(&mut bytes).expect("save");
        let mut q = p.decode_state(&bytes).expect("restore");
        assert_same_state(&p, &q, "after a restore");
        // A crossing notifies again: it packs, and the side map forgets the vehicle.
        q.process(&rep(70_040, 1, 30, 0, 1, 0, 5, 0), &mut out);
        q.end_of_second(70_040, &mut out);
        assert_eq!(q.records[i].latest(1, &q.big_latest), Some((70_040, 0)));
        assert!(q.big_latest.is_empty());
        // Times either way of the latest report, and tolls beyond 21 bits.
        let mut big = FxMap::default();
        let mut r = Record::new(100);
        for (last, latest, packs) in [
            (100, Some((150, 3)), false),
            (200, Some((150, 3)), true),
            (200, Some((150, 2_097_151)), true),
            (200, Some((150, 2_097_152)), false),
            (200, Some((150, -1)), false),
            (2_246, Some((200, 9)), true),
            (2_246, Some((200, 2_097_151)), true),
            (2_247, Some((200, 9)), false),
            (2_247, None, true),
        ] {
            r.set_last_time(5, last, &mut big);
            r.set_latest(5, latest, &mut big);
            assert_eq!(r.latest(5, &big), latest, "{last} {latest:?}");
            assert_eq!(r.latest != BIG_LATEST, packs, "{last} {latest:?}");
            assert_eq!(big.contains_key(&5), !packs, "{last} {latest:?}");
        }
    }

    #[test]
    fn daily_expenditure_and_missing_row() {
        let tolls_h = TollHistory::from_rows([(7, 3, 0, 42), (7, 4, 1, 5)]);
        let mut p = Partition::new(Arc::new(tolls_h), Arc::new(SegmentHistory::empty()));
        let q = |day: i64, xway: i64, qid: i64| {
            let mut t = request(3, 50, 7, qid);
            t.day = day;
            t.xway = xway;
            t
        };
        let input = vec![q(3, 0, 1), q(4, 0, 2), q(0, 0, 3), q(4, 1, 4)];
        let out = run(&mut p, input);
        assert_eq!(
            out,
            vec![
                Emitted::Out(Output::Daily {
                    time: 50,
                    emit: -1,
                    qid: 1,
                    bal: 42
                }),
                Emitted::Out(Output::Daily {
                    time: 50,
                    emit: -1,
                    qid: 4,
                    bal: 5
                }),
            ]
        );
    }

    fn travel(xway: i64, s_init: i64, s_end: i64, dow: i64, tod: i64, qid: i64) -> Input {
        let mut t = request(4, 70, 9, qid);
        t.xway = xway;
        t.s_init = s_init;
        t.s_end = s_end;
        t.dow = dow;
        t.tod = tod;
        t
    }

    #[test]
    fn travel_time_walk_with_week_wrap() {
        let h = SegmentHistory::from_rows([
            (0, 0, 2, 7, 95, 7, 3), // 3600000 / 7 = 514285 ms
            (0, 0, 3, 1, 0, 4, 7),  // speed < 5 -> 5 mph: 720000 ms
            (0, 0, 4, 1, 1, 50, 2), // 72000 ms
            (0, 1, 4, 1, 0, 60, 1), // 60000 ms
        ]);
        let mut p = Partition::new(Arc::new(TollHistory::default()), Arc::new(h));
        let input = vec![
            // Eastbound from the last minute of the week (M = 10079): segment 2 at
            // DOW 7 bucket 95; E = 514285 -> M = 7 (DOW 1, bucket 0); E = 1234285 ->
            // M = 19 (bucket 1); E = 1306285 ms -> 1306 s, toll 3 + 7 + 2.
            travel(0, 2, 4, 7, 1440, 1),
            // Westbound: segment 4 (60 mph), then segment 3 with no row (5 mph).
            travel(0, 4, 3, 1, 1, 2),
            // s_init = s_end is westbound.
            travel(0, 4, 4, 1, 1, 3),
            // Unknown expressway: every segment at 5 mph.
            travel(5, 0, 1, 1, 1, 4),
        ];
        let out = run(&mut p, input);
        let got: Vec<(i64, i64, i64)> = out
            .iter()
            .map(|e| match *e {
                Emitted::Out(Output::Travel {
                    qid,
                    travel_time,
                    toll,
                    ..
                }) => (qid, travel_time, toll),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(
            got,
            vec![(1, 1306, 12), (2, 780, 1), (3, 60, 1), (4, 1440, 0)]
        );

        // Without a segment history, type 4 gets no answer.
        let out = run(&mut partition(), vec![travel(0, 2, 4, 7, 1440, 1)]);
        assert!(out.is_empty());
    }

    #[test]
    fn state_is_evicted_at_exit() {
        let mut input = Vec::new();
        for v in 0..100 {
            input.push(rep(v, v, 50, 0, 0, 0, 1, 0));
            input.push(rep(v + 30, v, 50, 0, 4, 0, 2, 0));
        }
        let mut p = partition();
        let out = run(&mut p, input);
        assert_eq!(out.len(), 100);
        let s = p.stats();
        assert_eq!(s.vehicles_on_road, 0);
        assert_eq!(s.vehicles_known, 100);
        assert_eq!(s.xways, 1);
        assert_eq!(s.segments, 200);
    }

    /// Runs generated input through one partition and through `q` partitions (routed
    /// as Braid routes it) and returns the sorted outputs, type-2 answers merged.
    fn run_generated(cfg: &crate::generate::GenConfig, q: i64) -> Vec<Output> {
        run_rescaled(cfg, q, None)
    }

    /// [`run_generated`], the partitions saved after second `at` and restored onto
    /// `q2` partitions ([`Partition::absorb`]) when `rescale` is `Some((at, q2))`.
    fn run_rescaled(
        cfg: &crate::generate::GenConfig,
        q: i64,
        rescale: Option<(i64, i64)>,
    ) -> Vec<Output> {
        let input = crate::generate::accepted_input(cfg);
        let max_vid = input.iter().map(|t| t.vid).max().unwrap_or(0);
        let (tolls, segs) = crate::history::histories(cfg, max_vid);
        let mut parts: Vec<Partition> = (0..q)
            .map(|_| Partition::new(tolls.clone(), segs.clone()))
            .collect();
        let mut q = q;
        let mut out = Vec::new();
        for (i, t) in input.iter().enumerate() {
            if let Some((_, q2)) =
                rescale.filter(|&(at, _)| t.time > at && i > 0 && input[i - 1].time <= at)
            {
                let saved: Vec<Vec<u8>> = parts
                    .iter()
                    .map(|p| {
                        let mut b = Vec::new();
                        p.save_state(&mut b).expect("saves");
                        b
                    })
                    .collect();
                let mut fresh: Vec<Partition> = (0..q2)
                    .map(|_| Partition::new(tolls.clone(), segs.clone()))
                    .collect();
                for (n, f) in fresh.iter_mut().enumerate() {
                    for (old, bytes) in saved.iter().enumerate() {
                        let other = f.decode_state(bytes).expect("decodes");
                        let keep = |x: i64| x.rem_euclid(q2) == n as i64;
                        let counts = (old as i64).rem_euclid(q2) == n as i64;
                        f.absorb(other, &keep, counts).expect("absorbs");
                    }
                }
                let was: u64 = parts.iter().map(|p| p.stats().ignored_reports).sum();
                let now: u64 = fresh.iter().map(|p| p.stats().ignored_reports).sum();
                assert_eq!(was, now, "ignored reports kept");
                let cars = |ps: &[Partition]| -> usize {
                    ps.iter().map(|p| p.stats().vehicles_on_road).sum()
                };
                assert_eq!(cars(&parts), cars(&fresh), "trips kept");
                parts = fresh;
                q = q2;
            }
            if t.typ == 2 {
                for p in parts.iter_mut() {
                    p.process(t, &mut out);
                }
            } else {
                parts[t.xway.rem_euclid(q) as usize].process(t, &mut out);
            }
            if input.get(i + 1).map(|n| n.time) != Some(t.time) {
                for p in parts.iter_mut() {
                    p.end_of_second(t.time, &mut out);
                }
            }
        }
        for p in parts.iter_mut() {
            p.finish(&mut out);
        }
        let mut partials: HashMap<i64, Vec<BalancePartial>> = HashMap::new();
        let mut result = Vec::new();
        for e in out {
            match e {
                Emitted::Out(o) => result.push(o),
                Emitted::BalancePartial(b) => partials.entry(b.qid).or_default().push(b),
            }
        }
        for ps in partials.values() {
            assert!(ps.len() as i64 == q || rescale.is_some());
            result.push(merge_balance(ps));
        }
        result.sort();
        result
    }

    #[test]
    fn partitioning_does_not_change_answers() {
        let cfg = crate::generate::GenConfig {
            xways: 2,
            minutes: 7,
            profile: crate::generate::Profile::Steady,
            seed: 3,
            peak_vehicles_per_xway: 40_000,
        };
        let one = run_generated(&cfg, 1);
        let two = run_generated(&cfg, 2);
        let count = |typ: usize| one.iter().filter(|o| o.typ() == typ).count();
        let charged = one
            .iter()
            .filter(|o| matches!(o, Output::Toll { toll, .. } if *toll > 0))
            .count();
        println!(
            "outputs by type: {:?}, charged tolls {charged}",
            [count(0), count(1), count(2), count(3), count(4)]
        );
        assert!(count(0) > 1000 && count(2) > 10 && count(3) > 0 && count(4) > 10);
        assert!(count(1) > 0 && charged > 0);
        assert_eq!(one, two);
    }

    /// A checkpoint restored onto another partition count (more, fewer, coprime) goes on
    /// to the answers of the run never rescaled.
    #[test]
    fn a_rescaled_restore_keeps_the_answers() {
        let cfg = crate::generate::GenConfig {
            xways: 4,
            minutes: 6,
            profile: crate::generate::Profile::Steady,
            seed: 5,
            peak_vehicles_per_xway: 20_000,
        };
        let want = run_generated(&cfg, 1);
        assert_eq!(want, run_generated(&cfg, 4), "4 partitions");
        for (q, at, q2) in [
            (1, 200, 4),
            (4, 200, 1),
            (2, 130, 3),
            (3, 250, 8),
            (4, 310, 2),
        ] {
            let got = run_rescaled(&cfg, q, Some((at, q2)));
            let first = got.iter().zip(&want).position(|(a, b)| a != b);
            assert!(
                got == want,
                "{q} -> {q2} partitions after second {at}: {} answers, not {}; first differing: {:?} for {:?}",
                got.len(),
                want.len(),
                first.map(|i| &got[i]),
                first.map(|i| &want[i])
            );
        }
    }

    /// Every field of a partition's state but the histories, in an order that does not
    /// depend on hash-map layout. Destructured exhaustively: a new field does not
    /// compile here until it is added.
    fn canonical(p: &Partition) -> Vec<(&'static str, String)> {
        let Partition {
            tolls: _,
            segments: _,
            road,
            records,
            index,
            left,
            group_minute,
            big_latest,
            big_totals,
            pending,
            ignored,
            ignored_types,
        } = p;
        let Road {
            xway_index,
            last_xway,
            segs,
            stopped,
            next_accident,
        } = road;
        fn sorted<K: Ord + Copy, V: Copy>(m: impl Iterator<Item = (K, V)>) -> Vec<(K, V)> {
            let mut v: Vec<(K, V)> = m.collect();
            v.sort_by_key(|e| e.0);
            v
        }
        let stopped = sorted(
            stopped
                .iter()
                .map(|(l, s)| ((l.xway, l.pos, l.dir, l.lane), *s)),
        );
        let xway_index = sorted(xway_index.iter().map(|(k, v)| (*k, *v)));
        let big_latest = sorted(big_latest.iter().map(|(k, v)| (*k, *v)));
        let big_totals = sorted(big_totals.iter().map(|(k, v)| (*k, *v)));
        // The index and the open list are derived: what they say, in a fixed order.
        let ids = index.ids(records.len()).expect("an index of every record");
        let indexed = sorted(ids.iter().enumerate().map(|(i, &vid)| (vid, i)));
        vec![
            ("road.xway_index", format!("{xway_index:?}")),
            ("road.last_xway", format!("{last_xway:?}")),
            ("road.segs", format!("{segs:?}")),
            ("road.stopped", format!("{stopped:?}")),
            ("road.next_accident", format!("{next_accident}")),
            ("records", format!("{records:?}")),
            ("index", format!("{indexed:?}")),
            ("left", format!("{left:?}")),
            ("group_minute", format!("{group_minute}")),
            ("big_latest", format!("{big_latest:?}")),
            ("big_totals", format!("{big_totals:?}")),
            ("pending", format!("{pending:?}")),
            ("ignored", format!("{ignored} {ignored_types}")),
        ]
    }

    /// Asserts two partitions' [`canonical`] states are equal, naming the first field
    /// that differs and showing where.
    fn assert_same_state(want: &Partition, got: &Partition, what: &str) {
        for ((field, a), (_, b)) in canonical(want).iter().zip(canonical(got)) {
            if *a != b {
                let at = a
                    .bytes()
                    .zip(b.bytes())
                    .position(|(x, y)| x != y)
                    .unwrap_or(a.len().min(b.len()));
                let from = at.saturating_sub(60);
                let show = |s: &str| {
                    s.get(from..(at + 60).min(s.len()))
                        .unwrap_or("")
                        .to_string()
                };
                panic!(
                    "{what}: {field} differs at character {at}:\n  saved    ...{}...\n  restored ...{}...",
                    show(a),
                    show(&b)
                );
            }
        }
    }

    /// Generated input (2 expressways at a load with tolls and accidents), with two
    /// records the partition ignores at the start, and its histories.
    fn generated(minutes: u32) -> (Vec<Input>, Arc<TollHistory>, Arc<SegmentHistory>) {
        let cfg = crate::generate::GenConfig {
            xways: 2,
            minutes,
            profile: crate::generate::Profile::Steady,
            seed: 13,
            peak_vehicles_per_xway: 30_000,
        };
        let mut bad = [0i64; 15];
        bad[0] = 7;
        let mut input = vec![Input::from_fields(bad), rep(0, 1, 50, 0, 9, 0, 10, 0)];
        crate::generate::generate(&cfg, &mut |t| input.push(*t), &mut |_| {});
        let max_vid = input.iter().map(|t| t.vid).max().unwrap_or(0);
        let (tolls, segs) = crate::history::histories(&cfg, max_vid);
        (input, tolls, segs)
    }

    /// save_state then restore_state gives back every field (the outputs after it are
    /// the integration tests' business): at the end of many seconds, with stopped
    /// vehicles, accidents, minute groups and ignored records.
    #[test]
    fn saved_state_restores_every_field() {
        let (input, tolls, segs) = generated(5);
        let mut p = Partition::new(tolls.clone(), segs.clone());
        let mut out = Vec::new();
        let mut checked = 0;
        let (mut stopped, mut accidents) = (0, 0);
        for (i, t) in input.iter().enumerate() {
            p.process(t, &mut out);
            if input.get(i + 1).map(|n| n.time) == Some(t.time) {
                continue;
            }
            p.end_of_second(t.time, &mut out);
            if t.time % 17 != 0 && t.time % 60 != 59 {
                continue;
            }
            let mut bytes = Vec::new();
            p.save_state(&mut bytes).expect("save");
            let mut q = Partition::new(tolls.clone(), segs.clone());
            q.restore_state(&bytes).expect("restore");
            assert_same_state(&p, &q, &format!("second {}", t.time));
            let (a, b) = (p.stats(), q.stats());
            assert_eq!(
                PartitionStats {
                    heap_bytes: 0,
                    parts: StateBytes::default(),
                    ..a
                },
                PartitionStats {
                    heap_bytes: 0,
                    parts: StateBytes::default(),
                    ..b
                }
            );
            assert!(Arc::ptr_eq(&q.tolls, &tolls) && Arc::ptr_eq(&q.segments, &segs));
            stopped = stopped.max(a.stopped_locations);
            accidents = accidents.max(a.accidents);
            checked += 1;
        }
        let s = p.stats();
        assert!(checked > 20 && stopped > 0 && accidents > 0, "{s:?}");
        assert!(s.ignored_reports == 1 && s.ignored_types == 1, "{s:?}");
    }

    /// A decoded state whose slots, segment records or expressway indices do not hold
    /// together is an error, and the partition restored into is unchanged.
    #[test]
    fn restore_rejects_dangling_references_and_bad_bytes() {
        let (input, tolls, segs) = generated(2);
        let mut p = Partition::new(tolls.clone(), segs.clone());
        let mut out = Vec::new();
        for t in &input {
            p.process(t, &mut out);
        }
        let mut good = Vec::new();
        p.save_state(&mut good).expect("save");
        let fresh = Partition::new(tolls.clone(), segs.clone());
        let check = |bytes: &[u8], what: &str| {
            let mut q = Partition::new(tolls.clone(), segs.clone());
            match q.restore_state(bytes) {
                Ok(()) => panic!("restored, expected an error about {what}"),
                Err(e) => assert!(e.contains(what), "{e}"),
            }
            assert_same_state(&fresh, &q, "after a failed restore");
        };
        let corrupt = |f: &dyn Fn(&mut Partition)| {
            let mut q = Partition::new(tolls.clone(), segs.clone());
            q.restore_state(&good).expect("restore");
            f(&mut q);
            let mut bytes = Vec::new();
            q.save_state(&mut bytes).expect("save");
            bytes
        };
        check(
            &corrupt(&|q| {
                let r = q
                    .records
                    .iter_mut()
                    .find(|r| r.trip_seg != NONE)
                    .expect("one");
                r.trip_seg = 400;
            }),
            "is out of range",
        );
        check(
            &corrupt(&|q| {
                let r = Record {
                    left: NONE,
                    g_sum: 0,
                    ..q.records[1]
                };
                let vid = q.index.ids(q.records.len()).expect("ids")[1];
                q.records.push(r);
                q.index.insert(vid, (q.records.len() - 1) as u32);
            }),
            "has two records",
        );
        check(
            &corrupt(&|q| {
                let r = q.records.iter_mut().find(|r| r.g_count() > 0).expect("one");
                r.g_seg = 400;
            }),
            "segment record 400 of 400",
        );
        check(
            &corrupt(&|q| {
                let r = q.records.iter_mut().find(|r| r.left != NONE).expect("one");
                r.g_sum = 0;
            }),
            "but no group of its own",
        );
        let (with_left, chained) = {
            let mut q = Partition::new(tolls.clone(), segs.clone());
            q.restore_state(&good).expect("restore");
            let with: Vec<usize> = (0..q.records.len())
                .filter(|&i| q.records[i].left != NONE)
                .collect();
            (with, q.left.len())
        };
        assert!(
            with_left.len() >= 2 && chained >= 2,
            "no left groups to corrupt"
        );
        check(
            &corrupt(&|q| {
                let (a, b) = (with_left[0], with_left[1]);
                q.records[b].left = q.records[a].left;
            }),
            "is shared or out of range",
        );
        check(
            &corrupt(&|q| q.records[with_left[0]].left = chained as u32),
            "is shared or out of range",
        );
        check(
            &corrupt(&|q| {
                let j = q.records[with_left[0]].left as usize;
                q.left[j].seg = 400;
                q.left[j].sum = group_sum(30, 1);
            }),
            "segment record 400 of 400",
        );
        check(
            &corrupt(&|q| q.records[with_left[0]].left = NONE),
            "is on no vehicle's chain",
        );
        check(
            &corrupt(&|q| {
                q.road.xway_index.insert(99, 0);
            }),
            "index 0 of 3",
        );
        check(
            &corrupt(&|q| {
                q.road.segs.pop();
            }),
            "399 segment records",
        );
        // Truncated state: never a whole state (decoding is sequential, and trailing
        // bytes are refused).
        for len in (0..good.len()).step_by(good.len() / 300 + 1) {
            check(&good[..len], "does not decode");
        }
        let mut longer = good.clone();
        longer.push(0);
        check(&longer, "does not decode");
    }

    /// Benchmark on the generator's input: 1 expressway at the default peak (54,000
    /// vehicles), 20 minutes, about 2.2 M tuples. Run with
    /// `cargo test --release -p linear-road --lib expressway::tests::throughput_generated -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn throughput_generated() {
        let cfg = crate::generate::GenConfig {
            xways: 1,
            minutes: 20,
            profile: crate::generate::Profile::Steady,
            seed: 5,
            peak_vehicles_per_xway: 54_000,
        };
        let mut input = Vec::new();
        crate::generate::generate(&cfg, &mut |t| input.push(*t), &mut |_| {});
        let max_vid = input.iter().map(|t| t.vid).max().unwrap_or(0);
        let (tolls, segs) = crate::history::histories(&cfg, max_vid);
        let mut p = Partition::new(tolls, segs);
        let mut out = Vec::with_capacity(1 << 16);
        let mut by_type = [0usize; 6];
        let mut charged = 0usize;
        let start = std::time::Instant::now();
        for (i, t) in input.iter().enumerate() {
            p.process(t, &mut out);
            if input.get(i + 1).map(|n| n.time) != Some(t.time) {
                p.end_of_second(t.time, &mut out);
                for e in out.drain(..) {
                    match e {
                        Emitted::Out(Output::Toll { toll, .. }) if toll > 0 => charged += 1,
                        Emitted::Out(o) => by_type[o.typ()] += 1,
                        Emitted::BalancePartial(_) => by_type[5] += 1,
                    }
                }
            }
        }
        p.finish(&mut out);
        let secs = start.elapsed().as_secs_f64();
        println!(
            "{} tuples in {:.3} s: {:.2} M tuples/s; outputs by type (0 uncharged,1,3,4, partials) {:?}, {charged} charged tolls; {:?}",
            input.len(),
            secs,
            input.len() as f64 / secs / 1e6,
            [by_type[0], by_type[1], by_type[3], by_type[4], by_type[5]],
            p.stats()
        );
    }

    /// Micro-benchmark: ~2 M synthetic reports (plus 1 % requests) on two expressways.
    /// Run with
    /// `cargo test --release -p linear-road --lib expressway::tests::throughput -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn throughput() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        const XWAYS: i64 = 2;
        const PER_XWAY: i64 = 20_000; // vehicles on the road per expressway
        const SECONDS: i64 = 1_500;
        struct Car {
            vid: i64,
            xway: i64,
            dir: i64,
            pos: i64,
            spd: i64,
            left: i64,
        }
        let mut next_vid = 0;
        let mut new_car = |rng: &mut rand_chacha::ChaCha8Rng, xway: i64| {
            next_vid += 1;
            Car {
                vid: next_vid,
                xway,
                dir: rng.gen_range(0..2),
                pos: rng.gen_range(0..528_000),
                spd: rng.gen_range(10..70),
                left: rng.gen_range(5..60),
            }
        };
        let mut cars: Vec<Car> = (0..XWAYS * PER_XWAY)
            .map(|i| new_car(&mut rng, i % XWAYS))
            .collect();
        let mut input = Vec::with_capacity(2_100_000);
        let mut qid = 0;
        for t in 0..SECONDS {
            for c in cars.iter_mut().skip((t % 30) as usize).step_by(30) {
                let lane = if c.left == 0 { 4 } else { 1 + c.vid % 3 };
                let step = c.spd * 30 * 5280 / 3600;
                c.pos = if c.dir == 0 {
                    c.pos + step
                } else {
                    c.pos - step
                }
                .clamp(0, 527_999);
                input.push(Input::position(t, c.vid, c.spd, c.xway, lane, c.dir, c.pos));
                if rng.gen_range(0..100) == 0 {
                    qid += 1;
                    let k = rng.gen_range(0..10);
                    let mut r = request(
                        if k < 5 {
                            2
                        } else if k < 6 {
                            3
                        } else {
                            4
                        },
                        t,
                        c.vid,
                        qid,
                    );
                    r.xway = c.xway;
                    r.day = rng.gen_range(1..70);
                    r.s_init = rng.gen_range(0..100);
                    r.s_end = rng.gen_range(0..100);
                    r.dow = rng.gen_range(1..8);
                    r.tod = rng.gen_range(1..1441);
                    input.push(r);
                }
                if c.left == 0 {
                    let x = c.xway;
                    *c = new_car(&mut rng, x);
                } else {
                    c.left -= 1;
                }
            }
        }
        let tolls = TollHistory::from_rows(
            (1..next_vid).flat_map(|v| (1..70).map(move |d| (v, d, v % XWAYS, d))),
        );
        let segs = SegmentHistory::from_rows((0..XWAYS).flat_map(|x| {
            (0..2).flat_map(move |d| {
                (0..100).flat_map(move |s| {
                    (1..8).flat_map(move |w| {
                        (0..96).map(move |b| (x, d, s, w, b, 20 + (s + b) % 60, b % 7))
                    })
                })
            })
        }));
        let mut p = Partition::new(Arc::new(tolls), Arc::new(segs));
        let mut out = Vec::with_capacity(1 << 16);
        let (mut n_out, mut n_toll) = (0usize, 0usize);
        let start = std::time::Instant::now();
        for (i, t) in input.iter().enumerate() {
            p.process(t, &mut out);
            if input.get(i + 1).map(|n| n.time) != Some(t.time) {
                p.end_of_second(t.time, &mut out);
                n_out += out.len();
                n_toll += out
                    .iter()
                    .filter(|e| matches!(e, Emitted::Out(Output::Toll { toll, .. }) if *toll > 0))
                    .count();
                out.clear();
            }
        }
        p.finish(&mut out);
        let secs = start.elapsed().as_secs_f64();
        println!(
            "{} tuples in {:.3} s: {:.2} M tuples/s; {} outputs ({} charged tolls); {:?}",
            input.len(),
            secs,
            input.len() as f64 / secs / 1e6,
            n_out,
            n_toll,
            p.stats()
        );
    }
}
