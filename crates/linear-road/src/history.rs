//! The embedded historical stores of Linear Road (`docs/linear-road.md` section 2):
//! the toll history `VID,Day,XWay,Toll` (type-3 answers, doc 6.6) and Braid's segment
//! history `XWay,Dir,Seg,DOW,Bucket,AvgSpeed,AvgToll` (type-4 answers, doc 6.7).
//!
//! Both are loaded once, are read-only afterwards and are shared by every partition
//! through an `Arc`; lookups sit on the query path of the stream function.
//!
//! # Choice of store
//!
//! * [`TollHistory`] is a **sorted columnar array**: one packed `u64` key per row
//!   (`VID << 24 | Day << 16 | XWay`) in ascending order, and a parallel `i32` toll column,
//!   12 bytes per row. A lookup is one binary search (about 26 probes for 69 M rows, the
//!   first ones shared by all lookups and cache resident). A hash map would cost 2-3x the
//!   memory (load factor, control bytes, 16-byte entries) for a speed-up that does not
//!   matter: type-3 requests are 0.1 % of the input. The file is normally written in key
//!   order, so loading appends without sorting; an unsorted file is sorted once. Tolls that
//!   do not fit an `i32` (never in generated data) go to a small sorted side table.
//! * [`SegmentHistory`] is a **dense array** per expressway, indexed by
//!   `(Dir, Seg, DOW, Bucket)` (2 x 100 x 7 x 96 = 134,400 slots, 8 bytes each), because
//!   the generator writes every slot: a lookup is one multiply-add and one memory access,
//!   and a type-4 walk does up to 100 of them. A missing row is a sentinel speed.
//!
//! Loading never fails on a bad line: it is counted in the [`LoadReport`], the first
//! few are kept with line number and reason, and the line is skipped. Only I/O errors
//! fail a load. A duplicated key keeps the first row (in file order) and counts the
//! others as bad lines.

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::Path;

/// How many bad lines a [`LoadReport`] keeps verbatim.
const MAX_REPORTED: usize = 10;

/// What a load saw: rows kept, bad lines skipped and the first few reasons.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// Rows stored.
    pub rows: u64,
    /// Lines skipped (wrong field count, not integers, out of range, duplicate key).
    pub bad_lines: u64,
    /// The first bad lines: 1-based line number (0 when unknown, for a duplicate found
    /// after sorting an unsorted file) and the reason.
    pub first_bad: Vec<(u64, String)>,
}

impl LoadReport {
    fn bad(&mut self, line: u64, reason: String) {
        self.bad_lines += 1;
        if self.first_bad.len() < MAX_REPORTED {
            self.first_bad.push((line, reason));
        }
    }
}

/// Parses a line of exactly `N` comma-separated integers (spaces around fields and a
/// trailing `\r` are accepted).
fn parse_ints<const N: usize>(line: &[u8]) -> Result<[i64; N], String> {
    let mut out = [0i64; N];
    let mut n = 0;
    for field in line.split(|&b| b == b',') {
        if n >= N {
            return Err(format!("more than {N} fields, expected {N}"));
        }
        let f = field.trim_ascii();
        let (neg, digits) = match f.first() {
            Some(b'-') => (true, &f[1..]),
            Some(b'+') => (false, &f[1..]),
            _ => (false, f),
        };
        if digits.is_empty() || digits.len() > 18 || !digits.iter().all(u8::is_ascii_digit) {
            let shown: String = String::from_utf8_lossy(field).chars().take(30).collect();
            return Err(format!("field {} is {shown:?}, expected an integer", n + 1));
        }
        let v = digits
            .iter()
            .fold(0i64, |acc, &d| acc * 10 + i64::from(d - b'0'));
        out[n] = if neg { -v } else { v };
        n += 1;
    }
    if n != N {
        return Err(format!("{n} fields, expected {N}"));
    }
    Ok(out)
}

/// Calls `row(line_number, fields)` for every non-empty line of `path`; lines that do
/// not parse are recorded in the report.
fn read_rows<const N: usize>(
    path: &Path,
    report: &mut LoadReport,
    mut row: impl FnMut(u64, [i64; N], &mut LoadReport),
) -> io::Result<()> {
    let mut reader = BufReader::with_capacity(1 << 20, File::open(path)?);
    let mut buf = Vec::with_capacity(128);
    let mut line_no = 0u64;
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf)? == 0 {
            return Ok(());
        }
        line_no += 1;
        let line = buf.trim_ascii();
        if line.is_empty() {
            continue;
        }
        match parse_ints::<N>(line) {
            Ok(f) => row(line_no, f, report),
            Err(reason) => report.bad(line_no, reason),
        }
    }
}

/// Sentinel toll meaning "look in the wide table".
const WIDE: i32 = i32::MIN;

/// The toll history `(VID, Day, XWay) -> Toll`: a sorted columnar array (see the module
/// doc). VID must be in 0..2^40, Day in 0..255 and XWay in 0..65535; other rows are bad
/// lines and other lookups find nothing.
#[derive(Clone, Default)]
pub struct TollHistory {
    /// Packed keys, strictly ascending.
    keys: Vec<u64>,
    /// Toll of `keys[i]`, or [`WIDE`] when it is in `wide`.
    tolls: Vec<i32>,
    /// `(row index, toll)` for tolls outside the `i32` range (minus the sentinel).
    wide: Vec<(u64, i64)>,
    /// Rows computed from the generator instead of stored (see [`TollHistory::generated`]).
    computed: Option<Replicas>,
}

/// The toll history of generated data replicated into copies: copy `c` has vehicle ids
/// `c * vid_stride ..` and expressways `c * base_xways ..`; each row is
/// [`crate::generate::toll_row`] of the base vehicle, moved to the copy's expressway.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Replicas {
    /// Generator seed.
    pub seed: u64,
    /// Expressways of the generated base.
    pub base_xways: u32,
    /// Number of copies.
    pub copies: u32,
    /// Vehicle-id offset between copies (above every base vehicle id).
    pub vid_stride: i64,
}

/// Packs a toll-history key, or `None` when a field is out of the packable range.
fn toll_key(vid: i64, day: i64, xway: i64) -> Option<u64> {
    if !(0..1 << 40).contains(&vid) || !(0..=255).contains(&day) || !(0..=65535).contains(&xway) {
        return None;
    }
    Some((vid as u64) << 24 | (day as u64) << 16 | xway as u64)
}

impl TollHistory {
    /// Loads a `VID,Day,XWay,Toll` file. Bad lines are counted and skipped.
    pub fn load(path: &Path) -> io::Result<(TollHistory, LoadReport)> {
        let mut report = LoadReport::default();
        // Rows are appended to the columns while the file is in key order (the normal
        // case: no extra memory); from the first out-of-order row on, they go to `rows`
        // and are sorted at the end.
        let mut h = TollHistory::default();
        let mut rows: Vec<(u64, i64)> = Vec::new();
        let mut sorted = true;
        read_rows::<4>(path, &mut report, |line, [vid, day, xway, toll], report| {
            let Some(key) = toll_key(vid, day, xway) else {
                report.bad(
                    line,
                    format!("VID {vid}, Day {day} or XWay {xway} out of range"),
                );
                return;
            };
            if sorted {
                match h.keys.last() {
                    Some(&last) if last == key => {
                        report.bad(
                            line,
                            format!(
                                "duplicate row for VID {vid} Day {day} XWay {xway}; first row kept"
                            ),
                        );
                        return;
                    }
                    Some(&last) if last > key => {
                        sorted = false;
                        rows = (0..h.len()).map(|i| (h.keys[i], h.toll_at(i))).collect();
                        h = TollHistory::default();
                    }
                    _ => {
                        h.push(key, toll);
                        return;
                    }
                }
            }
            rows.push((key, toll));
        })?;
        if !sorted {
            // Stable sort: among duplicates the first row in file order comes first.
            rows.sort_by_key(|r| r.0);
            let before = rows.len();
            rows.dedup_by_key(|r| r.0);
            for _ in rows.len()..before {
                report.bad(
                    0,
                    "duplicate (VID, Day, XWay) row; first row kept".to_string(),
                );
            }
            h = TollHistory::from_sorted(rows);
        }
        h.keys.shrink_to_fit();
        h.tolls.shrink_to_fit();
        report.rows = h.len() as u64;
        Ok((h, report))
    }

    /// Builds the store from `(VID, Day, XWay, Toll)` rows in any order. Rows out of the
    /// packable range are dropped; of duplicated keys the first row is kept.
    pub fn from_rows(rows: impl IntoIterator<Item = (i64, i64, i64, i64)>) -> TollHistory {
        let mut v: Vec<(u64, i64)> = rows
            .into_iter()
            .filter_map(|(vid, day, xway, toll)| toll_key(vid, day, xway).map(|k| (k, toll)))
            .collect();
        v.sort_by_key(|r| r.0);
        v.dedup_by_key(|r| r.0);
        TollHistory::from_sorted(v)
    }

    /// A history that stores nothing and computes each row from the generator: for
    /// rating runs over many replicated expressways, whose stored history would not fit
    /// in memory.
    pub fn generated(replicas: Replicas) -> TollHistory {
        TollHistory {
            keys: Vec::new(),
            tolls: Vec::new(),
            wide: Vec::new(),
            computed: Some(replicas),
        }
    }

    /// From rows with strictly ascending keys.
    fn from_sorted(rows: Vec<(u64, i64)>) -> TollHistory {
        let mut h = TollHistory {
            keys: Vec::with_capacity(rows.len()),
            tolls: Vec::with_capacity(rows.len()),
            wide: Vec::new(),
            computed: None,
        };
        for (key, toll) in rows {
            h.push(key, toll);
        }
        h
    }

    /// Appends a row whose key is larger than all keys so far.
    fn push(&mut self, key: u64, toll: i64) {
        match i32::try_from(toll) {
            Ok(t) if t != WIDE => self.tolls.push(t),
            _ => {
                self.wide.push((self.keys.len() as u64, toll));
                self.tolls.push(WIDE);
            }
        }
        self.keys.push(key);
    }

    /// The toll of row `i`.
    fn toll_at(&self, i: usize) -> i64 {
        match self.tolls[i] {
            WIDE => self
                .wide
                .binary_search_by_key(&(i as u64), |w| w.0)
                .map_or(0, |j| self.wide[j].1),
            t => i64::from(t),
        }
    }

    /// The toll of vehicle `vid` on expressway `xway` on day `day`, if there is a row.
    pub fn get(&self, vid: i64, day: i64, xway: i64) -> Option<i64> {
        if let Some(r) = &self.computed {
            if vid < 0 || !(1..=69).contains(&day) || r.vid_stride <= 0 {
                return None;
            }
            let (copy, base) = (vid / r.vid_stride, vid % r.vid_stride);
            if copy >= i64::from(r.copies) {
                return None;
            }
            let (bx, toll) = crate::generate::toll_row(r.seed, r.base_xways, base, day);
            return (bx + copy * i64::from(r.base_xways) == xway).then_some(toll);
        }
        let key = toll_key(vid, day, xway)?;
        let i = self.keys.binary_search(&key).ok()?;
        Some(self.toll_at(i))
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Approximate heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.keys.capacity() * 8 + self.tolls.capacity() * 4 + self.wide.capacity() * 16
    }
}

impl fmt::Debug for TollHistory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TollHistory")
            .field("rows", &self.len())
            .field("wide_tolls", &self.wide.len())
            .finish()
    }
}

/// Slots per expressway: Dir (2) x Seg (100) x DOW (7) x Bucket (96).
const SLOTS_PER_XWAY: usize = 2 * 100 * 7 * 96;
/// Largest expressway number the segment history accepts.
const MAX_SEGMENT_XWAY: i64 = 1 << 16;
/// Sentinel speed of an empty slot.
const NO_ROW: i32 = i32::MIN;

/// One slot of the segment history.
#[derive(Clone, Copy, Debug)]
struct SegRow {
    speed: i32,
    toll: i32,
}

const EMPTY_ROW: SegRow = SegRow {
    speed: NO_ROW,
    toll: 0,
};

/// The segment history `(XWay, Dir, Seg, DOW, Bucket) -> (AvgSpeed, AvgToll)`: a dense
/// array per expressway (see the module doc). XWay must be in 0..65536, Dir 0..1,
/// Seg 0..99, DOW 1..7, Bucket 0..95, AvgSpeed and AvgToll within `i32`; other rows are
/// bad lines, other lookups find nothing.
#[derive(Clone, Default)]
pub struct SegmentHistory {
    /// Indexed by XWay; `None` for an expressway without rows.
    xways: Vec<Option<Box<[SegRow]>>>,
    rows: usize,
    /// Expressway `x` reads the rows of `x % m` (replicated expressways).
    modulus: Option<u32>,
}

/// Slot index within an expressway block, or `None` when out of range.
fn seg_slot(dir: i64, seg: i64, dow: i64, bucket: i64) -> Option<usize> {
    if !(0..=1).contains(&dir)
        || !(0..=99).contains(&seg)
        || !(1..=7).contains(&dow)
        || !(0..=95).contains(&bucket)
    {
        return None;
    }
    Some((((dir * 100 + seg) * 7 + dow - 1) * 96 + bucket) as usize)
}

impl SegmentHistory {
    /// A store without rows: no segment history file was given (type 4 is then not
    /// answered, see `expressway`).
    pub fn empty() -> SegmentHistory {
        SegmentHistory::default()
    }

    /// Serves expressway `x` from the rows of `x % base_xways` (replicated copies).
    pub fn replicated(mut self, base_xways: u32) -> SegmentHistory {
        self.modulus = Some(base_xways);
        self
    }

    /// Inserts a row; `Err` says why it was refused.
    fn insert(&mut self, r: [i64; 7]) -> Result<(), String> {
        let [xway, dir, seg, dow, bucket, speed, toll] = r;
        let slot = seg_slot(dir, seg, dow, bucket).ok_or_else(|| {
            format!("Dir {dir}, Seg {seg}, DOW {dow} or Bucket {bucket} out of range")
        })?;
        if !(0..MAX_SEGMENT_XWAY).contains(&xway) {
            return Err(format!("XWay {xway} out of range 0..{MAX_SEGMENT_XWAY}"));
        }
        let (Ok(speed), Ok(toll)) = (i32::try_from(speed), i32::try_from(toll)) else {
            return Err(format!("AvgSpeed {speed} or AvgToll {toll} too large"));
        };
        if speed == NO_ROW {
            return Err(format!("AvgSpeed {speed} too small"));
        }
        let x = xway as usize;
        if self.xways.len() <= x {
            self.xways.resize_with(x + 1, || None);
        }
        let block =
            self.xways[x].get_or_insert_with(|| vec![EMPTY_ROW; SLOTS_PER_XWAY].into_boxed_slice());
        if block[slot].speed != NO_ROW {
            return Err(format!(
                "duplicate row for XWay {xway} Dir {dir} Seg {seg} DOW {dow} Bucket {bucket}; first row kept"
            ));
        }
        block[slot] = SegRow { speed, toll };
        self.rows += 1;
        Ok(())
    }

    /// Loads a `XWay,Dir,Seg,DOW,Bucket,AvgSpeed,AvgToll` file. Bad lines are counted and
    /// skipped.
    pub fn load(path: &Path) -> io::Result<(SegmentHistory, LoadReport)> {
        let mut report = LoadReport::default();
        let mut h = SegmentHistory::empty();
        read_rows::<7>(path, &mut report, |line, r, report| {
            if let Err(reason) = h.insert(r) {
                report.bad(line, reason);
            }
        })?;
        report.rows = h.rows as u64;
        Ok((h, report))
    }

    /// Builds the store from `(XWay, Dir, Seg, DOW, Bucket, AvgSpeed, AvgToll)` rows.
    /// Rows out of range are dropped; of duplicated keys the first row is kept.
    pub fn from_rows(
        rows: impl IntoIterator<Item = (i64, i64, i64, i64, i64, i64, i64)>,
    ) -> SegmentHistory {
        let mut h = SegmentHistory::empty();
        for (a, b, c, d, e, f, g) in rows {
            let _refused = h.insert([a, b, c, d, e, f, g]);
        }
        h
    }

    /// `(AvgSpeed, AvgToll)` of the row, if there is one.
    #[inline]
    pub fn get(&self, xway: i64, dir: i64, seg: i64, dow: i64, bucket: i64) -> Option<(i64, i64)> {
        let slot = seg_slot(dir, seg, dow, bucket)?;
        let xway = match self.modulus {
            Some(m) if xway >= 0 => xway % i64::from(m.max(1)),
            _ => xway,
        };
        let block = self.xways.get(usize::try_from(xway).ok()?)?.as_ref()?;
        let r = block[slot];
        (r.speed != NO_ROW).then_some((i64::from(r.speed), i64::from(r.toll)))
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// True when there are no rows (no segment history was given).
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Approximate heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.xways.capacity() * 8
            + self.xways.iter().flatten().count() * SLOTS_PER_XWAY * std::mem::size_of::<SegRow>()
    }
}

impl fmt::Debug for SegmentHistory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SegmentHistory")
            .field("rows", &self.rows)
            .field("xways", &self.xways.iter().flatten().count())
            .finish()
    }
}

/// The toll and segment histories of a run generated with `cfg` whose vehicle ids go up
/// to `max_vid` ([`crate::generate::toll_history`] and
/// [`crate::generate::segment_history`]), in memory as the stream function reads them.
pub fn histories(
    cfg: &crate::generate::GenConfig,
    max_vid: i64,
) -> (std::sync::Arc<TollHistory>, std::sync::Arc<SegmentHistory>) {
    let mut rows = Vec::new();
    crate::generate::toll_history(cfg, max_vid, &mut |a, b, c, d| rows.push((a, b, c, d)));
    let mut seg_rows = Vec::new();
    crate::generate::segment_history(cfg, &mut |r| {
        seg_rows.push((r[0], r[1], r[2], r[3], r[4], r[5], r[6]))
    });
    (
        std::sync::Arc::new(TollHistory::from_rows(rows)),
        std::sync::Arc::new(SegmentHistory::from_rows(seg_rows)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
        let path =
            std::env::temp_dir().join(format!("braid-history-{}-{name}", std::process::id()));
        let mut f = File::create(&path).expect("create temp file");
        f.write_all(text.as_bytes()).expect("write temp file");
        path
    }

    #[test]
    fn toll_history_lookup_and_missing_row() {
        let h = TollHistory::from_rows([
            (7, 1, 0, 12),
            (7, 2, 0, 30),
            (3, 1, 1, 5),
            (9, 69, 2, 1 << 40),
        ]);
        assert_eq!(h.len(), 4);
        assert_eq!(h.get(7, 1, 0), Some(12));
        assert_eq!(h.get(7, 2, 0), Some(30));
        assert_eq!(h.get(3, 1, 1), Some(5));
        assert_eq!(h.get(9, 69, 2), Some(1 << 40));
        assert_eq!(h.get(7, 3, 0), None);
        assert_eq!(h.get(7, 1, 1), None);
        assert_eq!(h.get(-1, 1, 0), None);
        assert_eq!(h.get(7, 0, 0), None);
    }

    #[test]
    fn toll_history_load_counts_bad_lines() {
        let path = temp_file(
            "tolls.csv",
            "1,1,0,10\n1,2,0,11\n1,2,0,99\nx,1,0,1\n2,1,0\n\n2,1,0,7\r\n-5,1,0,1\n",
        );
        let (h, report) = TollHistory::load(&path).expect("load");
        std::fs::remove_file(&path).ok();
        assert_eq!(report.rows, 3);
        assert_eq!(report.bad_lines, 4);
        assert_eq!(report.first_bad[0].0, 3); // duplicate
        assert_eq!(report.first_bad[1].0, 4); // not an integer
        assert_eq!(h.get(1, 2, 0), Some(11));
        assert_eq!(h.get(2, 1, 0), Some(7));
    }

    #[test]
    fn toll_history_load_unsorted() {
        let path = temp_file("unsorted.csv", "5,1,0,50\n1,1,0,10\n5,1,0,99\n3,4,1,30\n");
        let (h, report) = TollHistory::load(&path).expect("load");
        std::fs::remove_file(&path).ok();
        assert_eq!(report.rows, 3);
        assert_eq!(report.bad_lines, 1);
        assert_eq!(h.get(5, 1, 0), Some(50));
        assert_eq!(h.get(1, 1, 0), Some(10));
        assert_eq!(h.get(3, 4, 1), Some(30));
    }

    #[test]
    fn segment_history_lookup_and_load() {
        let h = SegmentHistory::from_rows([(0, 0, 5, 1, 0, 60, 3), (2, 1, 99, 7, 95, 4, 1)]);
        assert_eq!(h.len(), 2);
        assert_eq!(h.get(0, 0, 5, 1, 0), Some((60, 3)));
        assert_eq!(h.get(2, 1, 99, 7, 95), Some((4, 1)));
        assert_eq!(h.get(1, 0, 5, 1, 0), None);
        assert_eq!(h.get(0, 0, 5, 1, 1), None);
        assert_eq!(h.get(0, 0, 5, 8, 0), None);
        assert!(SegmentHistory::empty().is_empty());

        let path = temp_file(
            "segs.csv",
            "0,0,0,1,0,55,2\n0,0,0,1,96,55,2\n0,2,0,1,0,1,1\n1,1,1,1,1,1\n",
        );
        let (h, report) = SegmentHistory::load(&path).expect("load");
        std::fs::remove_file(&path).ok();
        assert_eq!(report.rows, 1);
        assert_eq!(report.bad_lines, 3);
        assert_eq!(h.get(0, 0, 0, 1, 0), Some((55, 2)));
    }
}
