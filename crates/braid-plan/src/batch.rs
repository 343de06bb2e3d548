//! Tuples in batches ("physical windows").
//!
//! A [`Batch`] stores rows of [`Datum`]s row-major in one vector, strings in one arena
//! per batch, and for every row a [`RowKey`]: the row's sequence number in its source
//! (which fixes the serial order) and a lane (the destination partition while a row is
//! being split; the producing partition and output index after a stream function).
//! Appending a row copies fixed-size datums and, for strings, bytes into the arena:
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
}

/// A value being computed with, borrowing strings from a batch or an expression.
#[derive(Clone, Copy, Debug, PartialEq)]
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
        }
    }
}

impl fmt::Display for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => Ok(()),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Str(s) => f.write_str(s),
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
        }
    }

    fn rank(&self) -> u8 {
        match self {
            Scalar::Null => 0,
            Scalar::Bool(_) => 1,
            Scalar::Int(_) => 2,
            Scalar::Float(_) => 3,
            Scalar::Str(_) => 4,
        }
    }
}

impl PartialEq for Scalar {
    fn eq(&self, other: &Scalar) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Scalar {}
impl PartialOrd for Scalar {
    fn partial_cmp(&self, other: &Scalar) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scalar {
    fn cmp(&self, other: &Scalar) -> Ordering {
        match (self, other) {
            (Scalar::Int(a), Scalar::Int(b)) => a.cmp(b),
            (Scalar::Float(a), Scalar::Float(b)) => a.total_cmp(b),
            (Scalar::Bool(a), Scalar::Bool(b)) => a.cmp(b),
            (Scalar::Str(a), Scalar::Str(b)) => a.cmp(b),
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
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Batch {
    arity: usize,
    keys: Vec<RowKey>,
    data: Vec<Datum>,
    strings: String,
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
            strings: String::new(),
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
        self.strings.clear();
    }

    /// Appends a row; strings are copied into the arena.
    pub fn push(&mut self, key: RowKey, values: &[Value<'_>]) {
        debug_assert_eq!(values.len(), self.arity, "row arity");
        self.keys.push(key);
        for v in values {
            let d = self.datum_of(v);
            self.data.push(d);
        }
    }

    /// Appends a row of int64 values.
    #[inline]
    pub fn push_ints(&mut self, key: RowKey, values: &[i64]) {
        debug_assert_eq!(values.len(), self.arity, "row arity");
        self.keys.push(key);
        self.data.extend(values.iter().map(|&i| Datum::Int(i)));
    }

    /// Appends a row of string-free datums (a string datum would point into another
    /// batch's arena, so it is stored as null).
    pub fn push_datums(&mut self, key: RowKey, values: &[Datum]) {
        debug_assert_eq!(values.len(), self.arity, "row arity");
        self.keys.push(key);
        self.data.extend(values.iter().map(|d| match d {
            Datum::Str(..) => Datum::Null,
            d => *d,
        }));
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
        let d = self.datum_of(&v);
        self.data.push(d);
    }

    /// Removes the row started last (for a record that failed half way).
    pub fn abandon_row(&mut self) {
        if self.keys.pop().is_some() {
            let n = self.keys.len() * self.arity;
            self.data.truncate(n);
        }
    }

    #[inline]
    fn datum_of(&mut self, v: &Value<'_>) -> Datum {
        match *v {
            Value::Null => Datum::Null,
            Value::Int(i) => Datum::Int(i),
            Value::Float(f) => Datum::Float(f),
            Value::Bool(b) => Datum::Bool(b),
            Value::Str(s) => {
                let off = self.strings.len() as u32;
                self.strings.push_str(s);
                Datum::Str(off, s.len() as u32)
            }
        }
    }

    /// Appends row `i` of `other` with a new key.
    #[inline]
    pub fn push_row_of(&mut self, other: &Batch, i: usize, key: RowKey) {
        debug_assert_eq!(other.arity, self.arity, "row arity");
        self.keys.push(key);
        let row = &other.data[i * other.arity..(i + 1) * other.arity];
        if other.strings.is_empty() {
            self.data.extend_from_slice(row);
        } else {
            for d in row {
                let d = match *d {
                    Datum::Str(off, len) => {
                        let s = &other.strings[off as usize..(off + len) as usize];
                        let o = self.strings.len() as u32;
                        self.strings.push_str(s);
                        Datum::Str(o, len)
                    }
                    d => d,
                };
                self.data.push(d);
            }
        }
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

    /// Iterates over the rows.
    pub fn rows(&self) -> impl Iterator<Item = Row<'_>> + '_ {
        (0..self.len()).map(move |i| self.row(i))
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
        }
    }

    /// Approximate heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.keys.capacity() * std::mem::size_of::<RowKey>()
            + self.data.capacity() * std::mem::size_of::<Datum>()
            + self.strings.capacity()
    }

    /// All datums, row-major: `arity` per row (strings resolve through [`Batch::value`]).
    #[inline]
    pub fn data(&self) -> &[Datum] {
        &self.data
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
        if keys.len().checked_mul(arity) != Some(data.len()) {
            return Err(format!(
                "{} datums for {} rows of arity {arity}",
                data.len(),
                keys.len()
            ));
        }
        for (i, d) in data.iter().enumerate() {
            if let Datum::Str(off, len) = *d {
                let (start, end) = (off as usize, off as usize + len as usize);
                if end > strings.len()
                    || !strings.is_char_boundary(start)
                    || !strings.is_char_boundary(end)
                {
                    return Err(format!(
                        "string datum {i} (offset {off}, length {len}) is not on char \
                         boundaries inside the {}-byte arena",
                        strings.len()
                    ));
                }
            }
        }
        Ok(Batch {
            arity,
            keys,
            data,
            strings,
        })
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
        self.batch
            .value(self.batch.data[self.index * self.batch.arity + c])
    }

    /// Column `c` as an integer (None for null or another type).
    #[inline]
    pub fn int(&self, c: usize) -> Option<i64> {
        match self.batch.data[self.index * self.batch.arity + c] {
            Datum::Int(i) => Some(i),
            _ => None,
        }
    }

    /// The row's key.
    #[inline]
    pub fn key(&self) -> RowKey {
        self.batch.keys[self.index]
    }

    /// The raw datums (strings resolve through [`Row::get`]).
    #[inline]
    pub fn datums(&self) -> &'a [Datum] {
        &self.batch.data[self.index * self.batch.arity..(self.index + 1) * self.batch.arity]
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

    #[test]
    fn broadcast_lanes_round_trip() {
        let l = RowKey::broadcast_lane(8, 3);
        assert_eq!(RowKey::broadcast_target(l), Some((8, 3)));
        assert_eq!(RowKey::broadcast_target(5), None);
    }
}
