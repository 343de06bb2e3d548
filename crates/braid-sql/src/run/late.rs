//! Late rows: what a refusing operator (a time window, an interval join) does with a row
//! that arrives after its state has closed. Every late row is counted ([`LateRows`]),
//! written to a CSV file when `SET late_path` asks, and written to the query's late
//! stream when a later query reads `LATE(sink)` ([`LateLayout`]).

use crate::logical::{JoinWindow, Logical, WindowSpec};
use braid_plan::batch::{Batch, Row, RowKey, Value};
use braid_plan::types::{DataType, Field, Schema};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// When the row being processed is: what every operator needs to tell late rows.
pub(super) struct Cx {
    /// Event times below this are late.
    pub wm: i64,
    /// The start of the epoch being processed (a late row's `_refused_at`).
    pub at: i64,
    /// The sequence number of the source row being processed ([`RowKey::AT_END`]: none,
    /// a row made at the end of an epoch, or one of an earlier stage).
    pub seq: u64,
}

/// How many refused rows' sequence numbers a query keeps for the clients that sent
/// them ([`LateRows::refused_since`]).
const KEPT_SEQS: usize = 1 << 16;

/// Late rows of a query: counted, and written to a CSV file when one is given.
#[derive(Debug, Default)]
pub struct LateRows {
    /// Rows that arrived after their window or join state had closed.
    pub count: AtomicU64,
    file: Option<(std::path::PathBuf, Mutex<csv::Writer<std::fs::File>>)>,
    /// The sequence numbers of the most recent late source rows, and how many were
    /// refused before the first kept ([`LateRows::refused_since`]).
    seqs: Mutex<(u64, std::collections::VecDeque<u64>)>,
}

impl LateRows {
    /// Counting only, or also writing to `path`.
    pub fn new(path: Option<&std::path::Path>) -> std::io::Result<LateRows> {
        let file = match path {
            Some(p) => Some((p.to_path_buf(), Mutex::new(Self::create(p)?))),
            None => None,
        };
        Ok(LateRows {
            count: AtomicU64::new(0),
            file,
            seqs: Mutex::default(),
        })
    }

    /// The late source rows refused since the `from`-th one (counted from the query's
    /// start, or from the oldest kept when earlier ones were forgotten): their
    /// sequence numbers, and the position to ask from next time. For a query reading
    /// one stream they are the stream's, so a producer can be told which of the rows
    /// it sent were late.
    pub fn refused_since(&self, from: u64) -> (Vec<u64>, u64) {
        let (dropped, kept) = &*self.seqs.lock().unwrap_or_else(|p| p.into_inner());
        let skip = from.saturating_sub(*dropped) as usize;
        let new: Vec<u64> = kept.iter().skip(skip).copied().collect();
        (new, dropped + kept.len() as u64)
    }

    fn create(path: &std::path::Path) -> std::io::Result<csv::Writer<std::fs::File>> {
        Ok(csv::WriterBuilder::new()
            .flexible(true)
            .from_writer(std::fs::File::create(path)?))
    }

    fn add(&self, what: &str, row: &Row<'_>, seq: u64) {
        self.count.fetch_add(1, Ordering::Relaxed);
        if !RowKey::made_at_end(seq) {
            let (dropped, kept) = &mut *self.seqs.lock().unwrap_or_else(|p| p.into_inner());
            if kept.len() == KEPT_SEQS {
                kept.pop_front();
                *dropped += 1;
            }
            kept.push_back(seq);
        }
        if let Some((_, f)) = &self.file {
            if let Ok(mut w) = f.lock() {
                // Quoted as CSV needs (a string value may hold a comma or a quote).
                let _ = w.write_field(what);
                for c in 0..row.arity() {
                    let _ = w.write_field(row.get(c).to_string());
                }
                let _ = w.write_record(None::<&[u8]>);
            }
        }
    }

    /// Adds `n` late rows a checkpoint counted (a partition restored from it).
    pub fn restored(&self, n: u64) {
        self.count.fetch_add(n, Ordering::Relaxed);
    }

    /// Forgets the count (a live rescale: the partitions restored from its checkpoint
    /// count their late rows again).
    pub fn recount(&self) {
        self.count.store(0, Ordering::Relaxed);
    }

    /// Forgets the rows seen so far: zeroes the count and empties the file (after a
    /// calibration run on a prefix of the input, before the real run).
    pub fn reset(&self) -> std::io::Result<()> {
        self.count.store(0, Ordering::Relaxed);
        if let Some((path, f)) = &self.file {
            let mut w = f
                .lock()
                .map_err(|_| std::io::Error::other("late-row file lock poisoned"))?;
            // Flushed first: dropping the old writer must not write into the new file.
            w.flush()?;
            *w = Self::create(path)?;
        }
        Ok(())
    }

    /// The file late rows are written to, if any.
    pub fn path(&self) -> Option<&std::path::Path> {
        self.file.as_ref().map(|(p, _)| p.as_path())
    }

    /// Flushes the file.
    pub fn flush(&self) {
        if let Some((_, f)) = &self.file {
            if let Ok(mut w) = f.lock() {
                let _ = w.flush();
            }
        }
    }
}

/// The stream of a query's late rows (`LATE(sink)` in SQL): its columns, and how the
/// rows each refusing operator sees map onto them.
///
/// Columns: `_operator` (`aggregate` or `join`: what refused the row), `_refused_at`
/// (the start of the epoch in which it was refused, `epoch * epoch length`: the
/// stream's event time, so windows over late rows close as epochs pass), then the
/// refusing operators' input columns united by name: a name repeated within one
/// operator's row becomes `name_2`, `name_3`...; a name another operator gives another
/// type gets the type appended (`start_string`). A column an operator's rows lack is
/// null in them.
#[derive(Clone, Debug, PartialEq)]
pub struct LateLayout {
    /// The stream's columns (event time: `_refused_at`).
    pub schema: Schema,
    /// Per stage, per refusing operator in pre-order (a join: left side, then right):
    /// for every column after the first two, the operator's input column holding it.
    stages: Vec<Vec<LateColumns>>,
}

/// What a stage's operators need to write the late stream (see [`LateLayout`]).
#[derive(Clone, Debug)]
pub struct LateStage {
    pub(super) arity: usize,
    pub(super) ops: Vec<LateColumns>,
}

impl LateLayout {
    /// The late stream of a query cut into `stages`; None when no operator of it can
    /// refuse a row (no time window, no stream join).
    pub fn of(stages: &[&Logical]) -> Option<LateLayout> {
        let per_stage: Vec<Vec<&Schema>> = stages
            .iter()
            .map(|l| {
                let mut v = Vec::new();
                refusing_inputs(l, &mut v);
                v
            })
            .collect();
        if per_stage.iter().all(|v| v.is_empty()) {
            return None;
        }
        let mut fields = vec![
            Field::new("_operator", DataType::String),
            Field::new("_refused_at", DataType::Int64),
        ];
        let mut stages_out = Vec::new();
        for schemas in &per_stage {
            let mut ops = Vec::new();
            for input in schemas {
                let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
                let mut at = Vec::new();
                for f in &input.fields {
                    let n = seen.entry(f.name.as_str()).or_insert(0);
                    *n += 1;
                    let base = if *n == 1 {
                        f.name.clone()
                    } else {
                        format!("{}_{}", f.name, n)
                    };
                    let typed = format!("{base}_{}", f.ty);
                    // Never the first two: a late query's own late rows keep theirs apart.
                    let found = fields
                        .iter()
                        .skip(2)
                        .position(|x| (x.name == base || x.name == typed) && x.ty == f.ty)
                        .map(|j| j + 2);
                    let j = match found {
                        Some(j) => j,
                        None => {
                            let taken = fields.iter().any(|x| x.name == base);
                            let name = if taken { typed } else { base };
                            fields.push(Field::nullable(&name, f.ty));
                            fields.len() - 1
                        }
                    };
                    at.push(j);
                }
                ops.push(at);
            }
            stages_out.push(ops);
        }
        // Every united column may be null (an operator lacking it, or a nullable input).
        let width = fields.len() - 2;
        let stages = stages_out
            .into_iter()
            .map(|ops| {
                ops.into_iter()
                    .map(|at| {
                        let mut by_col = vec![None; width];
                        for (c, j) in at.into_iter().enumerate() {
                            by_col[j - 2] = Some(c);
                        }
                        by_col
                    })
                    .collect()
            })
            .collect();
        let mut schema = Schema::new(fields);
        schema.event_time = Some(1);
        Some(LateLayout { schema, stages })
    }

    /// What stage `k`'s operators need.
    pub fn stage(&self, k: usize) -> LateStage {
        LateStage {
            arity: self.schema.arity(),
            ops: self.stages.get(k).cloned().unwrap_or_default(),
        }
    }
}

/// The input schemas of the operators of `l` that refuse late rows, in pre-order.
fn refusing_inputs<'l>(l: &'l Logical, out: &mut Vec<&'l Schema>) {
    match l {
        // A final aggregate reads partial rows, which are never late.
        Logical::Aggregate {
            input,
            window,
            phase,
            ..
        } if window_refuses(window) && *phase != crate::logical::AggPhase::Final => {
            out.push(input.schema())
        }
        Logical::Join {
            left,
            right,
            window: JoinWindow::Interval { .. },
            ..
        } => {
            out.push(left.schema());
            out.push(right.schema());
        }
        _ => {}
    }
    for c in l.children() {
        refusing_inputs(c, out);
    }
}

/// Whether an aggregate over `w` refuses late rows (time windows do; count windows and
/// the unbounded window take every row).
fn window_refuses(w: &WindowSpec) -> bool {
    matches!(
        w,
        WindowSpec::Tumble { .. }
            | WindowSpec::Hop { .. }
            | WindowSpec::Cumulate { .. }
            | WindowSpec::Session { .. }
    )
}

/// A partition instance's late rows in the late stream's layout, written by its refusing
/// operators and handed on by the partition's driver after each input row.
pub(super) type LateBuf = Rc<RefCell<Batch>>;

/// For every late-stream column after the first two, the refusing operator's input
/// column holding it (None: null).
pub(super) type LateColumns = Vec<Option<usize>>;

/// Where one operator puts the rows it refuses: the query's counter and file, and the
/// instance's late stream when the query has one.
pub(super) struct LateOut {
    rows: Arc<LateRows>,
    what: &'static str,
    stream: Option<(LateBuf, LateColumns)>,
    /// The partition's own count (its checkpoints keep it).
    local: Rc<std::cell::Cell<u64>>,
}

impl LateOut {
    pub(super) fn refuse(&self, row: &Row<'_>, cx: &Cx) {
        self.rows.add(self.what, row, cx.seq);
        self.local.set(self.local.get() + 1);
        if let Some((buf, cols)) = &self.stream {
            let mut b = buf.borrow_mut();
            b.start_row(RowKey::default());
            b.push_value(Value::Str(self.what));
            b.push_value(Value::Int(cx.at));
            for c in cols {
                b.push_value(c.map_or(Value::Null, |c| row.get(c)));
            }
        }
    }

    /// For an operator that never refuses rows.
    pub(super) fn count_only(rows: &Arc<LateRows>) -> LateOut {
        LateOut {
            rows: rows.clone(),
            what: "join",
            stream: None,
            local: Rc::default(),
        }
    }
}

/// What building a partition's operator tree needs for late rows.
pub(super) struct LateBuild<'a> {
    pub rows: &'a Arc<LateRows>,
    pub stream: Option<(&'a LateBuf, std::slice::Iter<'a, LateColumns>)>,
    /// The late rows the partition refused (counted with `rows`).
    pub local: Rc<std::cell::Cell<u64>>,
}

impl LateBuild<'_> {
    pub(super) fn out(&mut self, what: &'static str) -> LateOut {
        LateOut {
            rows: self.rows.clone(),
            local: self.local.clone(),
            what,
            stream: self.stream.as_mut().map(|(buf, ops)| {
                let cols = ops.next().cloned().unwrap_or_default();
                (Rc::clone(buf), cols)
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The late-rows file is CSV a reader gets the values back from, even for strings
    /// holding commas, quotes and newlines.
    #[test]
    fn late_rows_are_quoted_csv() {
        let path = std::env::temp_dir().join(format!("braid-late-{}.csv", std::process::id()));
        let late = LateRows::new(Some(&path)).expect("create");
        let mut b = Batch::new(3);
        b.push(
            RowKey::default(),
            &[Value::Int(7), Value::Str("a,\"b\"\nc"), Value::Null],
        );
        late.add("aggregate", &b.row(0), 0);
        late.add("join", &b.row(0), 1);
        late.flush();
        let mut r = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_path(&path)
            .expect("open");
        let rows: Vec<Vec<String>> = r
            .records()
            .map(|rec| rec.expect("record").iter().map(String::from).collect())
            .collect();
        let _ = std::fs::remove_file(&path);
        assert_eq!(late.count.load(Ordering::Relaxed), 2);
        assert_eq!(late.refused_since(0), (vec![0, 1], 2));
        assert_eq!(late.refused_since(1), (vec![1], 2));
        assert_eq!(late.refused_since(2), (vec![], 2));
        assert_eq!(
            rows,
            vec![
                vec!["aggregate", "7", "a,\"b\"\nc", ""],
                vec!["join", "7", "a,\"b\"\nc", ""],
            ]
        );
    }
}
