//! Tuples in batches ("physical windows").
//!
//! A [`Batch`] stores its rows' values row-major in one vector of 8-byte payloads (with
//! a vector of 1-byte type tags once a value is not an int), strings in one arena per
//! batch, and for every row a [`RowKey`]: the row's sequence number in its source
//! (which fixes the serial order) and a lane (the destination partition while a row is
//! being split; the producing partition and output index after a stream function).
//! Appending a row copies fixed-size payloads and, for strings, bytes into the arena:
//! nothing is allocated per row once the batch has grown to its working size.

use crate::types::DataType;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::fmt;

/// One stored value. Strings point into their batch's arena.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, Default)]
pub enum Datum {
    /// SQL null.
    #[default]
    Null,
    /// An int64.
    Int(i64),
    /// A float64.
    Float(f64),
    /// A bool.
    Bool(bool),
    /// A string: byte offset and length in the batch's arena.
    Str(u32, u32),
    /// An array of float64: element offset and length in the batch's float arena.
    Floats(u32, u32),
    /// An array of int64: element offset and length in the batch's int arena.
    Ints(u32, u32),
}

/// A value being computed with, borrowing strings from a batch or an expression.
///
/// The tag is a whole word: a value then moves as three aligned words. With a one-byte
/// tag, a move copied the bool payload and padding at odd offsets, and reading back a
/// value just written stalled store forwarding (measured: aggregates 20% slower).
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(u64)]
pub enum Value<'a> {
    /// SQL null.
    Null,
    /// An int64.
    Int(i64),
    /// A float64.
    Float(f64),
    /// A bool.
    Bool(bool),
    /// A string.
    Str(&'a str),
    /// An array of float64 (`DOUBLE PRECISION[]`).
    Floats(&'a [f64]),
    /// An array of int64 (`BIGINT[]`).
    Ints(&'a [i64]),
}

impl<'a> Value<'a> {
    /// The integer, if this is an int64.
    #[inline]
    pub fn as_int(&self) -> Option<i64> {
        match *self {
            Value::Int(i) => Some(i),
            _ => None,
        }
    }

    /// True only for a true bool (null and false are not true).
    #[inline]
    pub fn is_true(&self) -> bool {
        matches!(self, Value::Bool(true))
    }

    /// An owned copy.
    pub fn to_scalar(&self) -> Scalar {
        match *self {
            Value::Null => Scalar::Null,
            Value::Int(i) => Scalar::Int(i),
            Value::Float(f) => Scalar::Float(f),
            Value::Bool(b) => Scalar::Bool(b),
            Value::Str(s) => Scalar::Str(s.to_string()),
            Value::Floats(a) => Scalar::Floats(a.to_vec()),
            Value::Ints(a) => Scalar::Ints(a.to_vec()),
        }
    }

    /// An array's element count (None for any other value).
    pub fn array_len(&self) -> Option<usize> {
        match self {
            Value::Floats(a) => Some(a.len()),
            Value::Ints(a) => Some(a.len()),
            _ => None,
        }
    }

    /// The type of a non-null value.
    pub fn data_type(&self) -> Option<DataType> {
        match self {
            Value::Null => None,
            Value::Int(_) => Some(DataType::Int64),
            Value::Float(_) => Some(DataType::Float64),
            Value::Bool(_) => Some(DataType::Bool),
            Value::Str(_) => Some(DataType::String),
            Value::Floats(_) => Some(DataType::Float64Array),
            Value::Ints(_) => Some(DataType::Int64Array),
        }
    }
}

/// Why an array of `n` elements breaks a declared length `len`, if it does.
fn wrong_len(n: usize, len: Option<u32>, ty: DataType) -> Option<String> {
    let want = len?;
    (n != want as usize).then(|| {
        let name = match ty {
            DataType::Int64Array => "BIGINT",
            _ => "DOUBLE",
        };
        format!("{n} elements, expected {want} (declared {name}[{want}])")
    })
}

/// An array of type `ty` read from SQL array text (see [`Batch::push_array_text`]);
/// empty text is null when `nullable`; `len`, a declared length.
pub fn parse_array(
    text: &str,
    ty: DataType,
    nullable: bool,
    len: Option<u32>,
) -> Result<Scalar, String> {
    let mut b = Batch::new(1);
    b.start_row(RowKey::default());
    b.push_array_text(ty, text, nullable, len)?;
    Ok(b.row(0).get(0).to_scalar())
}

/// Writes an array as SQL's array text: `{1,2.5,-3}` (Postgres' form, which Braid's
/// CSV reads back; floats in Rust's shortest form that reads back to the same bits).
pub fn write_array<T: fmt::Display>(f: &mut dyn fmt::Write, a: &[T]) -> fmt::Result {
    f.write_char('{')?;
    for (i, x) in a.iter().enumerate() {
        if i > 0 {
            f.write_char(',')?;
        }
        write!(f, "{x}")?;
    }
    f.write_char('}')
}

impl fmt::Display for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => Ok(()),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Str(s) => f.write_str(s),
            Value::Floats(a) => write_array(f, a),
            Value::Ints(a) => write_array(f, a),
        }
    }
}

/// An owned value (literals, test expectations). Totally ordered: floats by `total_cmp`,
/// null first.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Scalar {
    /// SQL null.
    Null,
    /// An int64.
    Int(i64),
    /// A float64.
    Float(f64),
    /// A bool.
    Bool(bool),
    /// A string.
    Str(String),
    /// An array of float64.
    Floats(Vec<f64>),
    /// An array of int64.
    Ints(Vec<i64>),
}

impl Scalar {
    /// A borrowed view.
    pub fn as_value(&self) -> Value<'_> {
        match self {
            Scalar::Null => Value::Null,
            Scalar::Int(i) => Value::Int(*i),
            Scalar::Float(f) => Value::Float(*f),
            Scalar::Bool(b) => Value::Bool(*b),
            Scalar::Str(s) => Value::Str(s),
            Scalar::Floats(a) => Value::Floats(a),
            Scalar::Ints(a) => Value::Ints(a),
        }
    }

    fn rank(&self) -> u8 {
        match self {
            Scalar::Null => 0,
            Scalar::Bool(_) => 1,
            Scalar::Int(_) => 2,
            Scalar::Float(_) => 3,
            Scalar::Str(_) => 4,
            Scalar::Floats(_) => 5,
            Scalar::Ints(_) => 6,
        }
    }
}

/// A float as a key: SQL's equality, where `-0.0 = 0.0` and every NaN is the same value
/// (greater than every other, as in PostgreSQL). Grouping, DISTINCT, joins' keys and the
/// hashes that place rows compare floats through this.
#[inline]
pub fn float_key(f: f64) -> f64 {
    if f == 0.0 {
        0.0
    } else if f.is_nan() {
        f64::NAN
    } else {
        f
    }
}

impl PartialEq for Scalar {
    fn eq(&self, other: &Scalar) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Scalar {}

/// Consistent with `Eq`: values of different types are never equal, and floats are
/// equal exactly when their keys' bits are ([`float_key`], then `total_cmp`).
impl std::hash::Hash for Scalar {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        match self {
            Scalar::Null => h.write_u8(0),
            Scalar::Int(i) => {
                h.write_u8(1);
                h.write_i64(*i);
            }
            Scalar::Float(f) => {
                h.write_u8(2);
                h.write_u64(float_key(*f).to_bits());
            }
            Scalar::Bool(b) => {
                h.write_u8(3);
                h.write_u8(u8::from(*b));
            }
            Scalar::Str(s) => {
                h.write_u8(4);
                s.hash(h);
            }
            Scalar::Floats(a) => {
                h.write_u8(5);
                h.write_usize(a.len());
                for x in a {
                    h.write_u64(float_key(*x).to_bits());
                }
            }
            Scalar::Ints(a) => {
                h.write_u8(6);
                a.hash(h);
            }
        }
    }
}
impl PartialOrd for Scalar {
    fn partial_cmp(&self, other: &Scalar) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scalar {
    fn cmp(&self, other: &Scalar) -> Ordering {
        match (self, other) {
            (Scalar::Int(a), Scalar::Int(b)) => a.cmp(b),
            (Scalar::Float(a), Scalar::Float(b)) => float_key(*a).total_cmp(&float_key(*b)),
            (Scalar::Bool(a), Scalar::Bool(b)) => a.cmp(b),
            (Scalar::Str(a), Scalar::Str(b)) => a.cmp(b),
            (Scalar::Floats(a), Scalar::Floats(b)) => a
                .iter()
                .zip(b)
                .map(|(x, y)| float_key(*x).total_cmp(&float_key(*y)))
                .find(|o| o.is_ne())
                .unwrap_or_else(|| a.len().cmp(&b.len())),
            (Scalar::Ints(a), Scalar::Ints(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_value().fmt(f)
    }
}

/// A row's place in the serial order and its lane.
///
/// `seq` numbers the rows of a source (or of all sources) in the order a serial
/// execution reads them. `lane` is the destination partition during a split
/// ([`RowKey::BROADCAST`] bit set for a broadcast row) and
/// `partition << 32 | output index` for rows a stream function produced.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
pub struct RowKey {
    /// Sequence number of the input row (or of the input row that caused an output).
    pub seq: u64,
    /// Destination or origin, see the type's doc.
    pub lane: u64,
}

impl RowKey {
    /// Bit set in `lane` for a row to be copied to several partitions.
    pub const BROADCAST: u64 = 1 << 63;
    /// Lane of a row a split left in its window for no partition of this worker (the
    /// row was omitted, or copied to the batch of another worker): `Map` skips it.
    pub const OMIT: u64 = !RowKey::BROADCAST;
    /// Sequence number of outputs made at the end of an epoch (after all its inputs).
    pub const END_OF_EPOCH: u64 = u64::MAX - 1;
    /// Sequence number of outputs made when the input has ended.
    pub const FINISH: u64 = u64::MAX;
    /// Bit set in the `seq` of a row made at the end of an epoch or of the input, not
    /// while an input row was processed ([`RowKey::END_OF_EPOCH`], [`RowKey::FINISH`],
    /// and, between stages, [`RowKey::stage_seq`]). Sources number rows below it.
    pub const AT_END: u64 = 1 << 63;

    /// Whether a row with sequence number `seq` was made at the end of an epoch or of
    /// the input (see [`RowKey::AT_END`]).
    #[inline]
    pub fn made_at_end(seq: u64) -> bool {
        seq & RowKey::AT_END != 0
    }

    /// The sequence number of a row of an earlier stage's output (key `seq`) as the
    /// next stage reads it: `hash`, a 63-bit hash of its values, with the
    /// [`RowKey::AT_END`] bit kept. The next stage then processes an epoch's rows made
    /// while input rows were processed before those made at the end of the epoch, as
    /// one stage would.
    #[inline]
    pub fn stage_seq(seq: u64, hash: u64) -> u64 {
        (hash & !RowKey::AT_END) | (seq & RowKey::AT_END)
    }

    /// A broadcast lane: the row goes to every partition `p` with `p % modulus == residue`.
    #[inline]
    pub fn broadcast_lane(modulus: u64, residue: u64) -> u64 {
        debug_assert!(modulus < (1 << 31) && residue < (1 << 32));
        RowKey::BROADCAST | (modulus << 32) | residue
    }

    /// For a broadcast lane, `(modulus, residue)`.
    #[inline]
    pub fn broadcast_target(lane: u64) -> Option<(u64, u64)> {
        (lane & RowKey::BROADCAST != 0).then_some(((lane >> 32) & 0x7fff_ffff, lane & 0xffff_ffff))
    }

    /// The lane of output `sub` of partition `part`.
    #[inline]
    pub fn output_lane(part: u32, sub: u32) -> u64 {
        ((part as u64) << 32) | sub as u64
    }
}

/// A batch of rows with the same arity.
///
/// Every value takes 8 bytes of payload plus, once the batch holds anything but int64
/// values, a 1-byte tag: a 15-int row is 120 bytes (and a 16-byte key), half of what a
/// row of [`Datum`]s takes. Windows are written once and read a few times, so their
/// width is memory traffic on every core they visit.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Batch {
    arity: usize,
    keys: Vec<RowKey>,
    /// Every value's payload, row-major: an int's or a float's bits, a bool as 0 or 1, a
    /// string's `offset << 32 | length` in `strings`, 0 for null.
    data: Vec<u64>,
    /// Every value's [`Tag`], row-major; empty while every value is an int.
    tags: Vec<u8>,
    strings: String,
    /// The elements of the float64 arrays, one after another.
    floats: Vec<f64>,
    /// The elements of the int64 arrays, one after another.
    ints: Vec<i64>,
}

/// The type of a stored value.
struct Tag;

impl Tag {
    const INT: u8 = 0;
    const NULL: u8 = 1;
    const FLOAT: u8 = 2;
    const BOOL: u8 = 3;
    const STR: u8 = 4;
    const FLOATS: u8 = 5;
    const INTS: u8 = 6;
}

/// A datum as (tag, payload).
#[inline]
fn encode(d: Datum) -> (u8, u64) {
    match d {
        Datum::Int(i) => (Tag::INT, i as u64),
        Datum::Null => (Tag::NULL, 0),
        Datum::Float(f) => (Tag::FLOAT, f.to_bits()),
        Datum::Bool(b) => (Tag::BOOL, u64::from(b)),
        Datum::Str(off, len) => (Tag::STR, (u64::from(off) << 32) | u64::from(len)),
        Datum::Floats(off, len) => (Tag::FLOATS, (u64::from(off) << 32) | u64::from(len)),
        Datum::Ints(off, len) => (Tag::INTS, (u64::from(off) << 32) | u64::from(len)),
    }
}

/// The datum of (tag, payload).
#[inline]
fn decode(tag: u8, x: u64) -> Datum {
    match tag {
        Tag::INT => Datum::Int(x as i64),
        Tag::FLOAT => Datum::Float(f64::from_bits(x)),
        Tag::BOOL => Datum::Bool(x != 0),
        Tag::STR => Datum::Str((x >> 32) as u32, x as u32),
        Tag::FLOATS => Datum::Floats((x >> 32) as u32, x as u32),
        Tag::INTS => Datum::Ints((x >> 32) as u32, x as u32),
        _ => Datum::Null,
    }
}

impl Batch {
    /// An empty batch of rows with `arity` columns.
    pub fn new(arity: usize) -> Batch {
        Batch {
            arity,
            ..Batch::default()
        }
    }

    /// An empty batch with room for `rows` rows.
    pub fn with_capacity(arity: usize, rows: usize) -> Batch {
        Batch {
            arity,
            keys: Vec::with_capacity(rows),
            data: Vec::with_capacity(rows * arity),
            tags: Vec::new(),
            strings: String::new(),
            floats: Vec::new(),
            ints: Vec::new(),
        }
    }

    /// Columns per row.
    #[inline]
    pub fn arity(&self) -> usize {
        self.arity
    }

    /// Number of rows.
    #[inline]
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// No rows.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Removes all rows, keeping the allocations.
    pub fn clear(&mut self) {
        self.keys.clear();
        self.data.clear();
        self.tags.clear();
        self.strings.clear();
        self.floats.clear();
        self.ints.clear();
    }

    /// Whether any value lives in an arena (strings, arrays): rows then cannot be
    /// copied payload by payload.
    #[inline]
    fn has_arenas(&self) -> bool {
        !(self.strings.is_empty() && self.floats.is_empty() && self.ints.is_empty())
    }

    /// An array's `offset << 32 | length` payload, or None when the arena would pass
    /// the 2^32 elements a payload can address.
    fn array_payload(off: usize, len: usize) -> u64 {
        assert!(
            off + len <= u32::MAX as usize,
            "a batch holds at most 2^32 array elements"
        );
        ((off as u64) << 32) | len as u64
    }

    /// Appends one value's tag and payload.
    #[inline]
    fn push_encoded(&mut self, tag: u8, x: u64) {
        if self.tags.is_empty() {
            if tag == Tag::INT {
                self.data.push(x);
                return;
            }
            // The first value that is not an int: from now on every value has a tag.
            self.tags.resize(self.data.len(), Tag::INT);
        }
        self.tags.push(tag);
        self.data.push(x);
    }

    /// Appends a row; strings are copied into the arena.
    pub fn push(&mut self, key: RowKey, values: &[Value<'_>]) {
        debug_assert_eq!(values.len(), self.arity, "row arity");
        self.keys.push(key);
        for v in values {
            self.push_value(*v);
        }
    }

    /// Appends a row of int64 values.
    #[inline]
    pub fn push_ints(&mut self, key: RowKey, values: &[i64]) {
        debug_assert_eq!(values.len(), self.arity, "row arity");
        self.keys.push(key);
        self.data.extend(values.iter().map(|&i| i as u64));
        if !self.tags.is_empty() {
            self.tags.resize(self.data.len(), Tag::INT);
        }
    }

    /// Appends a row of string-free datums (a string datum would point into another
    /// batch's arena, so it is stored as null).
    pub fn push_datums(&mut self, key: RowKey, values: &[Datum]) {
        debug_assert_eq!(values.len(), self.arity, "row arity");
        self.keys.push(key);
        for d in values {
            let (tag, x) = match d {
                Datum::Str(..) => (Tag::NULL, 0),
                d => encode(*d),
            };
            self.push_encoded(tag, x);
        }
    }

    /// Starts a row to be filled with [`Batch::push_value`]; the caller pushes exactly
    /// `arity` values.
    #[inline]
    pub fn start_row(&mut self, key: RowKey) {
        self.keys.push(key);
    }

    /// Appends one value of the row started with [`Batch::start_row`].
    #[inline]
    pub fn push_value(&mut self, v: Value<'_>) {
        let (tag, x) = match v {
            Value::Null => (Tag::NULL, 0),
            Value::Int(i) => (Tag::INT, i as u64),
            Value::Float(f) => (Tag::FLOAT, f.to_bits()),
            Value::Bool(b) => (Tag::BOOL, u64::from(b)),
            Value::Str(s) => {
                let off = self.strings.len() as u64;
                self.strings.push_str(s);
                (Tag::STR, (off << 32) | s.len() as u64)
            }
            Value::Floats(a) => {
                let x = Batch::array_payload(self.floats.len(), a.len());
                self.floats.extend_from_slice(a);
                (Tag::FLOATS, x)
            }
            Value::Ints(a) => {
                let x = Batch::array_payload(self.ints.len(), a.len());
                self.ints.extend_from_slice(a);
                (Tag::INTS, x)
            }
        };
        self.push_encoded(tag, x);
    }

    /// Appends one value of the row started with [`Batch::start_row`]: the array of
    /// type `ty` written as SQL array text (`{1,2.5,-3}`, spaces allowed around
    /// elements, `{}` empty), parsed straight into the batch's arena (no allocation of
    /// its own); empty text is null when `nullable`; with `len`, an array of another
    /// length is an error. On an error nothing is appended.
    pub fn push_array_text(
        &mut self,
        ty: DataType,
        text: &str,
        nullable: bool,
        len: Option<u32>,
    ) -> Result<(), String> {
        let t = text.trim();
        if t.is_empty() {
            return match nullable {
                true => {
                    self.push_value(Value::Null);
                    Ok(())
                }
                false => Err(format!("empty, expected {ty}")),
            };
        }
        let shown = || t.chars().take(40).collect::<String>();
        let inner = t
            .strip_prefix('{')
            .and_then(|x| x.strip_suffix('}'))
            .ok_or_else(|| format!("{:?} is not an array: expected {{x,y,...}}", shown()))?;
        let elements = || {
            inner
                .split(',')
                .map(str::trim)
                .filter(|_| !inner.trim().is_empty())
        };
        let bad = |i: usize, e: &str| {
            let why = match e.eq_ignore_ascii_case("null") {
                true => "a NULL element (arrays hold numbers only)".to_string(),
                false => format!("{e:?} is not a {}", ty.element()),
            };
            format!("element {} of the array: {why}", i + 1)
        };
        match ty {
            DataType::Float64Array => {
                let start = self.floats.len();
                for (i, e) in elements().enumerate() {
                    match e.parse::<f64>() {
                        Ok(x) => self.floats.push(x),
                        Err(_) => {
                            self.floats.truncate(start);
                            return Err(bad(i, e));
                        }
                    }
                }
                let n = self.floats.len() - start;
                if let Some(e) = wrong_len(n, len, ty) {
                    self.floats.truncate(start);
                    return Err(e);
                }
                let x = Batch::array_payload(start, n);
                self.push_encoded(Tag::FLOATS, x);
            }
            DataType::Int64Array => {
                let start = self.ints.len();
                for (i, e) in elements().enumerate() {
                    match e.parse::<i64>() {
                        Ok(x) => self.ints.push(x),
                        Err(_) => {
                            self.ints.truncate(start);
                            return Err(bad(i, e));
                        }
                    }
                }
                let n = self.ints.len() - start;
                if let Some(e) = wrong_len(n, len, ty) {
                    self.ints.truncate(start);
                    return Err(e);
                }
                let x = Batch::array_payload(start, n);
                self.push_encoded(Tag::INTS, x);
            }
            other => return Err(format!("{other} is not an array type")),
        }
        Ok(())
    }

    /// Removes the row started last (for a record that failed half way).
    pub fn abandon_row(&mut self) {
        if self.keys.pop().is_some() {
            let n = self.keys.len() * self.arity;
            self.data.truncate(n);
            if !self.tags.is_empty() {
                self.tags.truncate(n);
            }
        }
    }

    /// Appends row `i` of `other` with a new key.
    #[inline]
    pub fn push_row_of(&mut self, other: &Batch, i: usize, key: RowKey) {
        debug_assert_eq!(other.arity, self.arity, "row arity");
        self.keys.push(key);
        let cells = i * other.arity..(i + 1) * other.arity;
        if other.tags.is_empty() {
            // Ints only: the payloads are the values.
            self.data.extend_from_slice(&other.data[cells]);
            if !self.tags.is_empty() {
                self.tags.resize(self.data.len(), Tag::INT);
            }
            return;
        }
        if self.tags.is_empty() {
            self.tags.resize(self.data.len(), Tag::INT);
        }
        let tags = &other.tags[cells.clone()];
        self.tags.extend_from_slice(tags);
        if !other.has_arenas() {
            self.data.extend_from_slice(&other.data[cells]);
            return;
        }
        for (&tag, &x) in tags.iter().zip(&other.data[cells]) {
            let (off, len) = ((x >> 32) as usize, x as u32 as usize);
            let x = match tag {
                Tag::STR => {
                    let o = self.strings.len() as u64;
                    self.strings.push_str(&other.strings[off..off + len]);
                    (o << 32) | len as u64
                }
                Tag::FLOATS => {
                    let x = Batch::array_payload(self.floats.len(), len);
                    self.floats.extend_from_slice(&other.floats[off..off + len]);
                    x
                }
                Tag::INTS => {
                    let x = Batch::array_payload(self.ints.len(), len);
                    self.ints.extend_from_slice(&other.ints[off..off + len]);
                    x
                }
                _ => x,
            };
            self.data.push(x);
        }
    }

    /// Appends every row of `other`, in order: whole columns at once where both are
    /// ints only, and each string moved to its new place in the arena.
    pub fn append(&mut self, other: &Batch) {
        debug_assert_eq!(other.arity, self.arity, "row arity");
        self.keys.extend_from_slice(&other.keys);
        if other.tags.is_empty() {
            self.data.extend_from_slice(&other.data);
            if !self.tags.is_empty() {
                self.tags.resize(self.data.len(), Tag::INT);
            }
            return;
        }
        if self.tags.is_empty() {
            self.tags.resize(self.data.len(), Tag::INT);
        }
        self.tags.extend_from_slice(&other.tags);
        if !other.has_arenas() {
            self.data.extend_from_slice(&other.data);
            return;
        }
        let shift = (self.strings.len() as u64) << 32;
        let fshift = Batch::array_payload(self.floats.len(), other.floats.len()) & !0xffff_ffff;
        let ishift = Batch::array_payload(self.ints.len(), other.ints.len()) & !0xffff_ffff;
        self.strings.push_str(&other.strings);
        self.floats.extend_from_slice(&other.floats);
        self.ints.extend_from_slice(&other.ints);
        self.data.extend(
            other
                .tags
                .iter()
                .zip(&other.data)
                .map(|(&tag, &x)| match tag {
                    Tag::STR => x + shift,
                    Tag::FLOATS => x + fshift,
                    Tag::INTS => x + ishift,
                    _ => x,
                }),
        );
    }

    /// The key of row `i`.
    #[inline]
    pub fn key(&self, i: usize) -> RowKey {
        self.keys[i]
    }

    /// All row keys.
    #[inline]
    pub fn keys(&self) -> &[RowKey] {
        &self.keys
    }

    /// Row keys, mutable (to set lanes in place).
    #[inline]
    pub fn keys_mut(&mut self) -> &mut [RowKey] {
        &mut self.keys
    }

    /// Row `i`.
    #[inline]
    pub fn row(&self, i: usize) -> Row<'_> {
        Row {
            batch: self,
            index: i,
        }
    }

    /// Every value's payload, row-major, when every value is an int (the
    /// window-at-a-time path of expressions reads them in place); None otherwise.
    #[inline]
    pub fn int_payloads(&self) -> Option<&[u64]> {
        self.tags.is_empty().then_some(self.data.as_slice())
    }

    /// Iterates over the rows.
    pub fn rows(&self) -> impl Iterator<Item = Row<'_>> + '_ {
        (0..self.len()).map(move |i| self.row(i))
    }

    /// The datum in cell `cell` (row-major).
    #[inline]
    fn datum_at(&self, cell: usize) -> Datum {
        let x = self.data[cell];
        match self.tags.get(cell) {
            None => Datum::Int(x as i64),
            Some(&tag) => decode(tag, x),
        }
    }

    /// Resolves a datum of this batch.
    #[inline]
    pub fn value(&self, d: Datum) -> Value<'_> {
        match d {
            Datum::Null => Value::Null,
            Datum::Int(i) => Value::Int(i),
            Datum::Float(f) => Value::Float(f),
            Datum::Bool(b) => Value::Bool(b),
            Datum::Str(off, len) => Value::Str(&self.strings[off as usize..(off + len) as usize]),
            Datum::Floats(off, len) => {
                Value::Floats(&self.floats[off as usize..off as usize + len as usize])
            }
            Datum::Ints(off, len) => {
                Value::Ints(&self.ints[off as usize..off as usize + len as usize])
            }
        }
    }

    /// Approximate heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.keys.capacity() * std::mem::size_of::<RowKey>()
            + self.data.capacity() * 8
            + self.tags.capacity()
            + self.strings.capacity()
            + self.floats.capacity() * 8
            + self.ints.capacity() * 8
    }

    /// The array arenas (floats, ints), for writers of batches (the binary format).
    pub fn arrays(&self) -> (&[f64], &[i64]) {
        (&self.floats, &self.ints)
    }

    /// The datums of column `c`, top to bottom (strings resolve through
    /// [`Batch::value`]).
    pub fn column(&self, c: usize) -> impl Iterator<Item = Datum> + '_ {
        (0..self.len()).map(move |i| self.datum_at(i * self.arity + c))
    }

    /// A batch from its parts, checked: `data` holds `arity` datums per key and every
    /// string datum lies inside `strings` on char boundaries. The error says which part
    /// is wrong.
    pub fn from_parts(
        arity: usize,
        keys: Vec<RowKey>,
        data: Vec<Datum>,
        strings: String,
    ) -> Result<Batch, String> {
        Batch::from_parts_with_arrays(arity, keys, data, strings, Vec::new(), Vec::new())
    }

    /// [`Batch::from_parts`] with the array arenas: every array datum must lie inside
    /// its arena.
    pub fn from_parts_with_arrays(
        arity: usize,
        keys: Vec<RowKey>,
        data: Vec<Datum>,
        strings: String,
        floats: Vec<f64>,
        ints: Vec<i64>,
    ) -> Result<Batch, String> {
        if keys.len().checked_mul(arity) != Some(data.len()) {
            return Err(format!(
                "{} datums for {} rows of arity {arity}",
                data.len(),
                keys.len()
            ));
        }
        let mut batch = Batch {
            arity,
            keys,
            data: Vec::with_capacity(data.len()),
            tags: Vec::new(),
            strings,
            floats,
            ints,
        };
        for (i, d) in data.into_iter().enumerate() {
            if let Datum::Str(off, len) = d {
                let (start, end) = (off as usize, off as usize + len as usize);
                if end > batch.strings.len()
                    || !batch.strings.is_char_boundary(start)
                    || !batch.strings.is_char_boundary(end)
                {
                    return Err(format!(
                        "string datum {i} (offset {off}, length {len}) is not on char \
                         boundaries inside the {}-byte arena",
                        batch.strings.len()
                    ));
                }
            }
            let array = match d {
                Datum::Floats(off, len) => Some(("float", off, len, batch.floats.len())),
                Datum::Ints(off, len) => Some(("int", off, len, batch.ints.len())),
                _ => None,
            };
            if let Some((what, off, len, n)) = array {
                if off as usize + len as usize > n {
                    return Err(format!(
                        "{what} array datum {i} (offset {off}, length {len}) is not inside \
                         the {n}-element arena"
                    ));
                }
            }
            let (tag, x) = encode(d);
            batch.push_encoded(tag, x);
        }
        Ok(batch)
    }
}

/// Batches are equal when their rows are: the same keys and values (strings compared
/// by content, wherever they lie in the arenas).
impl PartialEq for Batch {
    fn eq(&self, other: &Batch) -> bool {
        self.arity == other.arity
            && self.keys == other.keys
            && (0..self.data.len())
                .all(|cell| self.value(self.datum_at(cell)) == other.value(other.datum_at(cell)))
    }
}

/// A borrowed row of a batch.
#[derive(Clone, Copy)]
pub struct Row<'a> {
    batch: &'a Batch,
    index: usize,
}

impl<'a> Row<'a> {
    /// Column `c`.
    #[inline]
    pub fn get(&self, c: usize) -> Value<'a> {
        self.batch.value(self.datum(c))
    }

    /// Column `c` as an integer (None for null or another type).
    #[inline]
    pub fn int(&self, c: usize) -> Option<i64> {
        match self.datum(c) {
            Datum::Int(i) => Some(i),
            _ => None,
        }
    }

    /// The raw datum of column `c` (a string resolves through [`Row::get`]).
    #[inline]
    pub fn datum(&self, c: usize) -> Datum {
        debug_assert!(c < self.batch.arity, "column {c} of {}", self.batch.arity);
        self.batch.datum_at(self.index * self.batch.arity + c)
    }

    /// The raw datums, appended to `out` (strings resolve through [`Row::get`]).
    pub fn datums_into(&self, out: &mut Vec<Datum>) {
        out.extend((0..self.arity()).map(|c| self.datum(c)));
    }

    /// The row's key.
    #[inline]
    pub fn key(&self) -> RowKey {
        self.batch.keys[self.index]
    }

    /// Number of columns.
    #[inline]
    pub fn arity(&self) -> usize {
        self.batch.arity
    }

    /// The batch and index this row lives at.
    #[inline]
    pub fn location(&self) -> (&'a Batch, usize) {
        (self.batch, self.index)
    }

    /// An owned copy of the values.
    pub fn to_scalars(&self) -> Vec<Scalar> {
        (0..self.arity()).map(|c| self.get(c).to_scalar()).collect()
    }
}

impl fmt::Debug for Row<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries((0..self.arity()).map(|c| self.get(c)))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_copied_between_batches() {
        let mut a = Batch::new(2);
        a.push(
            RowKey { seq: 1, lane: 0 },
            &[Value::Str("abc"), Value::Int(3)],
        );
        a.push(RowKey { seq: 2, lane: 0 }, &[Value::Str("de"), Value::Null]);
        let mut b = Batch::new(2);
        b.push(RowKey::default(), &[Value::Str("zz"), Value::Int(1)]);
        b.push_row_of(&a, 1, RowKey { seq: 9, lane: 4 });
        assert_eq!(b.row(1).get(0), Value::Str("de"));
        assert_eq!(b.row(1).get(1), Value::Null);
        assert_eq!(b.key(1), RowKey { seq: 9, lane: 4 });
        b.abandon_row();
        assert_eq!(b.len(), 1);
    }

    /// Tags appear with the first value that is not an int, wherever it is, and every
    /// way of adding rows keeps values and types.
    #[test]
    fn values_keep_their_types_however_rows_are_added() {
        let rows: [[Value<'_>; 3]; 4] = [
            [Value::Int(-1), Value::Int(2), Value::Int(i64::MIN)],
            [Value::Str("x"), Value::Float(-0.5), Value::Bool(true)],
            [Value::Null, Value::Int(7), Value::Str("")],
            [Value::Bool(false), Value::Str("éa"), Value::Int(0)],
        ];
        for first in 0..rows.len() {
            let order: Vec<usize> = (first..rows.len()).chain(0..first).collect();
            let mut a = Batch::new(3);
            for &r in &order {
                a.push(RowKey::default(), &rows[r]);
            }
            let mut b = Batch::new(3);
            b.push_ints(RowKey::default(), &[5, 6, 7]);
            for i in 0..a.len() {
                b.push_row_of(&a, i, RowKey::default());
            }
            let mut c = Batch::new(3);
            for &r in &order {
                c.start_row(RowKey::default());
                for v in rows[r] {
                    c.push_value(v);
                }
            }
            c.start_row(RowKey::default());
            c.push_value(Value::Str("half"));
            c.abandon_row();
            for (k, &r) in order.iter().enumerate() {
                for (col, want) in rows[r].iter().enumerate() {
                    assert_eq!(a.row(k).get(col), *want, "row {r} first {first}");
                    assert_eq!(b.row(k + 1).get(col), *want);
                    assert_eq!(c.row(k).get(col), *want);
                }
            }
            assert_eq!(b.row(0).get(2), Value::Int(7));
            assert_eq!(a, c);
            let parts: Vec<Datum> = (0..a.len() * 3)
                .map(|cell| a.row(cell / 3).datum(cell % 3))
                .collect();
            let d = Batch::from_parts(3, a.keys().to_vec(), parts, a.strings.clone())
                .expect("parts of a batch");
            assert_eq!(d, a);
        }
    }

    /// A batch appended to another reads as if its rows had been pushed one by one,
    /// whichever of the two has tags or strings.
    #[test]
    fn appended_rows_read_as_pushed() {
        let ints = |n: i64| {
            let mut b = Batch::new(2);
            b.push_ints(
                RowKey {
                    seq: n as u64,
                    lane: 1,
                },
                &[n, -n],
            );
            b
        };
        let mixed = |s: &str| {
            let mut b = Batch::new(2);
            b.push(
                RowKey { seq: 7, lane: 2 },
                &[Value::Str(s), Value::Float(1.5)],
            );
            b.push(
                RowKey { seq: 8, lane: 3 },
                &[Value::Null, Value::Str("tail")],
            );
            b
        };
        let parts = [ints(1), mixed("ab"), ints(2), mixed("xyz"), mixed("")];
        for first in 0..parts.len() {
            let order: Vec<&Batch> = parts[first..].iter().chain(&parts[..first]).collect();
            let mut appended = Batch::new(2);
            let mut pushed = Batch::new(2);
            for b in &order {
                appended.append(b);
                for i in 0..b.len() {
                    pushed.push_row_of(b, i, b.key(i));
                }
            }
            assert_eq!(appended.len(), pushed.len());
            for i in 0..pushed.len() {
                assert_eq!(appended.key(i), pushed.key(i));
                assert_eq!(
                    appended.row(i).to_scalars(),
                    pushed.row(i).to_scalars(),
                    "row {i}"
                );
            }
        }
    }

    #[test]
    fn broadcast_lanes_round_trip() {
        let l = RowKey::broadcast_lane(8, 3);
        assert_eq!(RowKey::broadcast_target(l), Some((8, 3)));
        assert_eq!(RowKey::broadcast_target(5), None);
    }
}
