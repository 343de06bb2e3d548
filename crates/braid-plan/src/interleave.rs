//! Several sources merged into one stream.
//!
//! An interleave of children `c0, c1, ...` is one wide stream (see [`schema`]): a row of
//! child `c` carries `_stream = c`, `_time` (the child's event time, or, for a child
//! without an event-time column, the row's index within that child), then every child's
//! columns, null except for child `c`'s. The parent's epoch length applies to every
//! child; a child's epochs are clamped so that they never go back within that child. The
//! serial order is (clamped epoch, clamped event time, child index, order within the
//! child) when every child has an event-time column ([`by_time`]: the children's rows
//! merged by time, as they happened; a child's times are clamped like its epochs, so a
//! row earlier than one before it in the same child keeps its place), and (clamped
//! epoch, child index, order within the child) otherwise. Sequence numbers count rows in
//! that order. [`rows`] builds that stream for the reference interpreter; `braid-exec`
//! merges the children's feeds into the same order ([`Key`]).

use crate::batch::{Batch, Row, RowKey, Value};
use crate::error::{Error, Result};
use crate::plan::Source;
use crate::types::{DataType, Field, Schema};
use std::collections::HashSet;

/// Index of the `_stream` column (the child index).
pub const STREAM_COLUMN: usize = 0;
/// Index of the `_time` column (the event-time column of the wide schema).
pub const TIME_COLUMN: usize = 1;

/// Whether all children have the same columns (names and types): then they share one
/// set of columns instead of each having its own (several files of one stream).
pub fn shared(children: &[Source]) -> bool {
    let cols = |s: &Source| -> Vec<(String, DataType)> {
        s.schema
            .fields
            .iter()
            .map(|f| (f.name.to_ascii_lowercase(), f.ty))
            .collect()
    };
    children.len() > 1 && children.iter().all(|c| cols(c) == cols(&children[0]))
}

/// The wide schema of an interleave: `_stream`, `_time` (the event time), then each
/// child's columns as nullable `{child.name}.{column}` — or, when the children have the
/// same columns ([`shared`]), those columns once, under their own names.
pub fn schema(children: &[Source]) -> Result<Schema> {
    if children.is_empty() {
        return Err(Error::Plan(
            "an interleave needs at least one source".into(),
        ));
    }
    if shared(children) {
        let mut fields = vec![
            Field::new("_stream", DataType::Int64),
            Field::new("_time", DataType::Int64),
        ];
        fields.extend(children[0].schema.fields.iter().cloned());
        return Ok(Schema {
            fields,
            event_time: Some(TIME_COLUMN),
        });
    }
    let parts: Vec<(&str, &Schema)> = children
        .iter()
        .map(|c| (c.name.as_str(), &c.schema))
        .collect();
    let schema = wide(&parts);
    let mut seen = HashSet::new();
    for f in &schema.fields {
        if !seen.insert(f.name.to_ascii_lowercase()) {
            return Err(Error::Plan(format!(
                "interleaved sources make the column `{}` twice; give the sources distinct names",
                f.name
            )));
        }
    }
    Ok(schema)
}

/// The wide schema of several tagged streams, unchecked: `_stream`, `_time` (the event
/// time), then each part's columns as nullable `{name}.{column}`. Interleaved sources
/// and the tagged stream a query stage makes of a join's two inputs share it.
pub fn wide(parts: &[(&str, &Schema)]) -> Schema {
    let mut fields = vec![
        Field::new("_stream", DataType::Int64),
        Field::new("_time", DataType::Int64),
    ];
    for (name, schema) in parts {
        for f in &schema.fields {
            fields.push(Field::nullable(&format!("{name}.{}", f.name), f.ty));
        }
    }
    Schema {
        fields,
        event_time: Some(TIME_COLUMN),
    }
}

/// The `_time` of row `index` (within its child) of `child`: its event time, or the
/// index when the child has no event-time column (or the time is null).
pub fn time_of(child: &Source, row: Row<'_>, index: u64) -> i64 {
    child
        .schema
        .event_time
        .and_then(|c| row.int(c))
        .unwrap_or(index as i64)
}

/// Largest `children x epoch length` for which an interleave of children without an
/// event time numbers its rows by file ([`numbered_by_file`]).
pub const BY_FILE_LIMIT: u64 = 1 << 40;

/// Whether an interleave's rows are numbered by file: every child is a file (or rows in
/// memory) without an event-time column, so a child's row `i` is in epoch `i / L`
/// whatever the other children hold, and the serial order (epoch, child, row) gives
/// that row the sequence number [`seq_by_file`] without counting any other child's
/// rows. Such an interleave of files can be read a whole file per worker
/// (`braid-exec`); the numbers have gaps only after a child has ended. Other
/// interleaves (streams living in Braid, standard input, Kafka, the generator, nested
/// interleaves) count their rows.
pub fn numbered_by_file(children: &[Source], epoch: u64) -> bool {
    use crate::plan::SourceSpec;
    !children.is_empty()
        && children.iter().all(|c| {
            c.schema.event_time.is_none()
                && matches!(
                    c.spec,
                    SourceSpec::Csv { .. }
                        | SourceSpec::JsonLines { .. }
                        | SourceSpec::Columnar { .. }
                        | SourceSpec::Binary { .. }
                        | SourceSpec::Memory(_)
                )
        })
        && (children.len() as u64)
            .checked_mul(epoch.max(1))
            .is_some_and(|x| x <= BY_FILE_LIMIT)
}

/// The sequence number of row `index` of child `child` of an interleave of `children`
/// children numbered by file with epochs of `epoch` rows: `e * n * L + child * L + j`
/// for `index = e * L + j` (its epoch, then the children before it in that epoch, then
/// its place in it). None when it does not fit below [`crate::batch::RowKey::AT_END`].
pub fn seq_by_file(children: usize, epoch: u64, child: usize, index: u64) -> Option<u64> {
    let l = epoch.max(1);
    (index / l)
        .checked_mul(children as u64 * l)?
        .checked_add(child as u64 * l + index % l)
        .filter(|&s| s < crate::batch::RowKey::AT_END)
}

/// Where the row with sequence number `seq` of an interleave numbered by file is: its
/// child and its index within the child (the inverse of [`seq_by_file`]).
pub fn place_by_file(children: usize, epoch: u64, seq: u64) -> (usize, u64) {
    let l = epoch.max(1);
    let n = children.max(1) as u64;
    let (e, within) = (seq / (n * l), seq % (n * l));
    ((within / l) as usize, e * l + within % l)
}

/// Whether the children's rows merge by event time within an epoch: every child has
/// an event-time column.
pub fn by_time(children: &[Source]) -> bool {
    children.iter().all(|c| c.schema.event_time.is_some())
}

/// A child's place in the serial order as its rows come: the sort key of each next row
/// (clamped epoch, clamped time or 0, child index), compared as a tuple.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    /// Clamped epoch.
    pub epoch: u64,
    /// Clamped event time when the interleave merges by time, else 0.
    pub time: u64,
    /// The child's index.
    pub child: usize,
}

/// The key of a child's next row from its `_time` ([`time_of`]) and the key of its
/// previous row (`last`, zero before the first), given the parent's epoch length and
/// whether the interleave merges by time.
pub fn key_of(child: usize, time: i64, last: Key, epoch: u64, by_time: bool) -> Key {
    let t = time.max(0) as u64;
    Key {
        epoch: last.epoch.max(t / epoch.max(1)),
        time: match by_time {
            true => last.time.max(t),
            false => 0,
        },
        child,
    }
}

/// Where each child's columns sit in the wide layout.
#[derive(Clone, Debug)]
pub struct Layout {
    /// Per child: first column and number of columns.
    spans: Vec<(usize, usize)>,
    arity: usize,
}

impl Layout {
    /// The layout of an interleave of `children`.
    pub fn new<'a>(children: impl IntoIterator<Item = &'a Source>) -> Layout {
        let children: Vec<Source> = children.into_iter().cloned().collect();
        let mut spans = Vec::new();
        let mut at = 2;
        if shared(&children) {
            let n = children[0].schema.arity();
            return Layout {
                spans: vec![(2, n); children.len()],
                arity: 2 + n,
            };
        }
        for child in &children {
            let n = child.schema.arity();
            spans.push((at, n));
            at += n;
        }
        Layout { spans, arity: at }
    }

    /// Columns of the wide rows.
    pub fn arity(&self) -> usize {
        self.arity
    }

    /// Appends `row` of child `child` to `out` in the wide layout, under `key`.
    /// Allocates nothing once `out` has grown to its working size.
    pub fn push(&self, out: &mut Batch, key: RowKey, child: usize, time: i64, row: Row<'_>) {
        let (start, n) = self.spans[child];
        debug_assert_eq!(row.arity(), n, "row arity of interleaved source {child}");
        out.start_row(key);
        out.push_value(Value::Int(child as i64));
        out.push_value(Value::Int(time));
        for _ in 2..start {
            out.push_value(Value::Null);
        }
        for c in 0..n {
            out.push_value(row.get(c));
        }
        for _ in start + n..self.arity {
            out.push_value(Value::Null);
        }
    }
}

/// The serial interleaved stream of `children` (each with all its rows in order), for
/// the reference interpreter: rows in the serial order (see the module), in the wide
/// layout of [`schema`], keyed by their sequence numbers. `epoch` is the parent's epoch
/// length.
pub fn rows(children: &[(&Source, &Batch)], epoch: u64) -> Batch {
    let epoch = epoch.max(1);
    let layout = Layout::new(children.iter().map(|(s, _)| *s));
    let timed = children.iter().all(|(s, _)| s.schema.event_time.is_some());
    // (clamped epoch, clamped time or 0, child, row, _time): sorted, the serial order.
    let mut order: Vec<(u64, u64, usize, usize, i64)> = Vec::new();
    for (c, (source, batch)) in children.iter().enumerate() {
        let (mut last_epoch, mut last_time) = (0u64, 0u64);
        for i in 0..batch.len() {
            let t = time_of(source, batch.row(i), i as u64);
            let u = t.max(0) as u64;
            last_epoch = last_epoch.max(u / epoch);
            if timed {
                last_time = last_time.max(u);
            }
            order.push((last_epoch, last_time, c, i, t));
        }
    }
    order.sort_unstable();
    let sources: Vec<Source> = children.iter().map(|(s, _)| (*s).clone()).collect();
    let by_file = numbered_by_file(&sources, epoch);
    let mut out = Batch::with_capacity(layout.arity(), order.len());
    for (seq, &(_, _, c, i, t)) in order.iter().enumerate() {
        // Numbered by file: the rows of earlier epochs of every child (full epochs, as
        // if no child ended), then those of earlier children in this epoch. Written out
        // here, not through `seq_by_file`, so that the feed's numbering is checked.
        let n = children.len() as u64;
        let (row, c64) = (i as u64, c as u64);
        let seq = match by_file {
            true => (row / epoch) * n * epoch + c64 * epoch + row % epoch,
            false => seq as u64,
        };
        let key = RowKey { seq, lane: 0 };
        layout.push(&mut out, key, c, t, children[c].1.row(i));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::Scalar;
    use crate::plan::{Plan, SourceSpec};
    use std::sync::Arc;

    fn source(name: &str, schema: Schema, rows: &Batch) -> Source {
        match Plan::source(name, SourceSpec::Memory(Arc::new(rows.clone())), schema) {
            Plan::Source(s) => s,
            _ => unreachable!("Plan::source makes a source"),
        }
    }

    fn batch(arity: usize, rows: &[Vec<Value<'_>>]) -> Batch {
        let mut b = Batch::new(arity);
        for r in rows {
            b.push(RowKey::default(), r);
        }
        b
    }

    #[test]
    fn schema_is_wide_nullable_and_timed() {
        let a_schema = Schema::ints(&["t", "x"]).with_event_time("t").expect("t");
        let b_schema = Schema::new(vec![Field::new("name", DataType::String)]);
        let a = source("a", a_schema, &Batch::new(2));
        let b = source("b", b_schema, &Batch::new(1));
        let s = schema(&[a.clone(), b.clone()]).expect("schema");
        assert_eq!(s.column_list(), "_stream, _time, a.t, a.x, b.name");
        assert_eq!(s.event_time, Some(TIME_COLUMN));
        assert!(s.fields[2..].iter().all(|f| f.nullable));
        assert!(!s.fields[0].nullable && !s.fields[1].nullable);
        assert_eq!(s.fields[4].ty, DataType::String);
        assert!(schema(&[]).is_err());
        // Children with the same columns (files of one stream) share them.
        let shared = schema(&[a.clone(), a.clone()]).expect("shared");
        assert_eq!(shared.column_list(), "_stream, _time, t, x");
        assert_eq!(Layout::new([&a, &a]).arity(), 4);
        assert_eq!(Layout::new([&b]).arity(), 3);
    }

    #[test]
    fn rows_interleave_by_clamped_epoch_then_child() {
        let a_schema = Schema::ints(&["t", "x"]).with_event_time("t").expect("t");
        // Child a: times 5, 1 (epoch 2 clamped to 2), 9.
        let a_rows = batch(
            2,
            &[
                vec![Value::Int(5), Value::Int(10)],
                vec![Value::Int(1), Value::Int(11)],
                vec![Value::Int(9), Value::Int(12)],
            ],
        );
        // Child b has no event time: row i has _time i.
        let b_schema = Schema::new(vec![Field::new("name", DataType::String)]);
        let b_rows = batch(
            1,
            &[
                vec![Value::Str("p")],
                vec![Value::Str("q")],
                vec![Value::Str("r")],
                vec![Value::Str("s")],
                vec![Value::Str("t")],
                vec![Value::Str("u")],
            ],
        );
        let a = source("a", a_schema, &a_rows);
        let b = source("b", b_schema, &b_rows);
        let out = rows(&[(&a, &a_rows), (&b, &b_rows)], 2);
        assert_eq!(out.arity(), 5);
        let got: Vec<(u64, Vec<Scalar>)> =
            out.rows().map(|r| (r.key().seq, r.to_scalars())).collect();
        let i = Scalar::Int;
        let s = |x: &str| Scalar::Str(x.into());
        let n = || Scalar::Null;
        // Epochs (length 2): a: 2, 2 (clamped from 0), 4; b: 0, 0, 1, 1, 2, 2.
        let expected = vec![
            vec![i(1), i(0), n(), n(), s("p")],
            vec![i(1), i(1), n(), n(), s("q")],
            vec![i(1), i(2), n(), n(), s("r")],
            vec![i(1), i(3), n(), n(), s("s")],
            vec![i(0), i(5), i(5), i(10), n()],
            vec![i(0), i(1), i(1), i(11), n()],
            vec![i(1), i(4), n(), n(), s("t")],
            vec![i(1), i(5), n(), n(), s("u")],
            vec![i(0), i(9), i(9), i(12), n()],
        ];
        assert_eq!(got.len(), expected.len());
        for (k, ((seq, row), want)) in got.iter().zip(&expected).enumerate() {
            assert_eq!(*seq, k as u64);
            assert_eq!(row, want, "row {k}");
        }
    }

    #[test]
    fn children_without_event_time_are_numbered_by_file() {
        let schema = Schema::ints(&["x"]);
        let rows_of = |n: i64, base: i64| {
            let v: Vec<Vec<Value<'_>>> = (0..n).map(|i| vec![Value::Int(base + i)]).collect();
            batch(1, &v)
        };
        // Three files of 5, 1 and 4 rows, epochs of 2 rows.
        let (a_rows, b_rows, c_rows) = (rows_of(5, 0), rows_of(1, 100), rows_of(4, 200));
        let a = source("a", schema.clone(), &a_rows);
        let b = source("b", schema.clone(), &b_rows);
        let c = source("c", schema.clone(), &c_rows);
        let kids = [a.clone(), b.clone(), c.clone()];
        assert!(numbered_by_file(&kids, 2));
        let out = rows(&[(&a, &a_rows), (&b, &b_rows), (&c, &c_rows)], 2);
        let got: Vec<(u64, i64)> = out
            .rows()
            .map(|r| (r.key().seq, r.int(2).unwrap()))
            .collect();
        // Epoch 0: a0 a1 b0 c0 c1 (seq 0..6 less b's missing second row), epoch 1: a2 a3
        // (b ended) c2 c3, epoch 2: a4.
        let want = [
            (0, 0),
            (1, 1),
            (2, 100),
            (4, 200),
            (5, 201),
            (6, 2),
            (7, 3),
            (10, 202),
            (11, 203),
            (12, 4),
        ];
        assert_eq!(got, want);
        for &(seq, v) in &want {
            let (child, index) = place_by_file(3, 2, seq);
            assert_eq!(
                (child as i64, index as i64),
                (v / 100, v % 100),
                "seq {seq}"
            );
            assert_eq!(seq_by_file(3, 2, child, index), Some(seq));
        }
        // A timed child, a nested interleave or a too large epoch: counted as before.
        let timed = source(
            "t",
            Schema::ints(&["t"]).with_event_time("t").expect("t"),
            &a_rows,
        );
        assert!(!numbered_by_file(&[a.clone(), timed], 2));
        assert!(!numbered_by_file(&kids, BY_FILE_LIMIT));
        assert_eq!(seq_by_file(2, 1 << 20, 1, u64::MAX / 2), None);
    }

    #[test]
    fn timed_children_merge_by_time_within_the_epoch() {
        let a_schema = Schema::ints(&["t", "x"]).with_event_time("t").expect("t");
        let b_schema = Schema::ints(&["t", "y"]).with_event_time("t").expect("t");
        let row = |t: i64, v: i64| vec![Value::Int(t), Value::Int(v)];
        // a: 1, 4, 3 (clamped to 4), 12; b: 2, 4, 5, 11. Epoch length 10.
        let a_rows = batch(2, &[row(1, 10), row(4, 11), row(3, 12), row(12, 13)]);
        let b_rows = batch(2, &[row(2, 20), row(4, 21), row(5, 22), row(11, 23)]);
        let a = source("a", a_schema, &a_rows);
        let b = source("b", b_schema, &b_rows);
        assert!(by_time(&[a.clone(), b.clone()]));
        let out = rows(&[(&a, &a_rows), (&b, &b_rows)], 10);
        let got: Vec<(i64, i64)> = out
            .rows()
            .map(|r| (r.int(STREAM_COLUMN).unwrap(), r.int(TIME_COLUMN).unwrap()))
            .collect();
        // Ties of clamped time go by child; a's late 3 stays after its 4.
        let want = [
            (0, 1),
            (1, 2),
            (0, 4),
            (0, 3),
            (1, 4),
            (1, 5),
            (1, 11),
            (0, 12),
        ];
        assert_eq!(got, want);
        // The key the executor merges by gives the same order.
        let mut last = [Key::default(), Key::default()];
        let mut keys = Vec::new();
        for (c, r) in want {
            let c = c as usize;
            let k = key_of(c, r, last[c], 10, true);
            last[c] = k;
            keys.push(k);
        }
        assert!(keys.windows(2).all(|w| w[0] <= w[1]), "{keys:?}");
    }

    #[test]
    fn explain_shows_the_sources_and_round_robin() {
        let a = source("a", Schema::ints(&["t"]), &Batch::new(1));
        let b = source("b", Schema::ints(&["u"]), &Batch::new(1));
        let plan = Plan::source(
            "mix",
            SourceSpec::Interleave(vec![a.clone(), b.clone()]),
            schema(&[a, b]).expect("schema"),
        )
        .split(
            4,
            crate::plan::Route::RoundRobin,
            None,
            crate::plan::Strategy::Fsplit,
        );
        let text = crate::explain::text(&plan, &crate::function::Registry::new(), 2);
        assert!(text.contains("route round robin"), "{text}");
        assert!(
            text.contains("Source: mix = interleave of 2 source(s)"),
            "{text}"
        );
        assert!(text.contains("_stream 0: a = memory (0 rows)"), "{text}");
        assert!(text.contains("_stream 1: b = memory (0 rows)"), "{text}");
    }

    #[test]
    fn reference_clamps_interleaved_epochs() {
        // The reference reads `_time` of the wide rows and clamps: the late row of `a`
        // (time 1) stays in epoch 2 like the row before it.
        let a_schema = Schema::ints(&["t"]).with_event_time("t").expect("t");
        let a_rows = batch(1, &[vec![Value::Int(4)], vec![Value::Int(1)]]);
        let a = source("a", a_schema, &a_rows);
        let wide = rows(&[(&a, &a_rows)], 2);
        let mut plan = Plan::source(
            "i",
            SourceSpec::Interleave(vec![a.clone()]),
            schema(&[a]).expect("schema"),
        );
        plan.leaf_source_mut().epoch = 2;
        let out = crate::reference::run(&plan, &crate::function::Registry::new(), &wide)
            .expect("reference");
        assert_eq!(out.iter().map(|r| r.epoch).collect::<Vec<_>>(), vec![2, 2]);
    }
}
