//! Runs a [`Logical`] plan incrementally, as the stream function of one partition.
//!
//! The operator tree mirrors the logical plan. A row enters at the scan of its input
//! stream and flows up; every node writes its output rows into a batch its parent reads
//! (reused, so stateless chains allocate nothing per row). Stateful nodes keep windows
//! and join state and emit when event time passes their end.
//!
//! Time is decided by epochs, never by what one partition happens to see, so results do
//! not depend on the partitioning:
//! - a row processed in epoch `e` is late if its event time is below
//!   `e * epoch - lateness` (late rows are counted, written to a file if asked, and
//!   written to the late stream when a later query reads `LATE(sink)`, see [`LateLayout`]);
//! - at the end of epoch `e` (every partition hears of every epoch, see
//!   `StreamFunctionFactory::every_epoch`) windows ending at or before
//!   `(e + 1) * epoch - lateness` are emitted.
//!
//! Output rows carry a lane that is a hash of their values, so the transparent merge
//! orders them the same way whatever partition made them.

use crate::catalog::TableDef;
use crate::logical::{AggCall, AggFunc, JoinWindow, Logical, WindowSpec};
use braid_plan::batch::{Batch, Row, RowKey, Scalar, Value};
use braid_plan::error::Result;
use braid_plan::expr::Expr;
use braid_plan::function::{Emitter, StreamFunction, StreamFunctionFactory};
use braid_plan::types::{DataType, Field, Schema};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Where each input stream's columns sit in the physical row.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    /// Column holding the input index (`_stream` of an interleaved source), if several.
    pub tag: Option<usize>,
    /// Per input stream: the value of the tag column and the first column.
    pub inputs: Vec<(i64, usize)>,
}

impl Layout {
    /// One input stream whose columns start at 0.
    pub fn single() -> Layout {
        Layout {
            tag: None,
            inputs: vec![(0, 0)],
        }
    }

    fn input_of(&self, row: &Row<'_>) -> Option<usize> {
        match self.tag {
            None => Some(0),
            Some(c) => {
                let t = row.int(c)?;
                self.inputs.iter().position(|(v, _)| *v == t)
            }
        }
    }
}

/// Late rows of a query: counted, and written to a CSV file when one is given.
#[derive(Debug, Default)]
pub struct LateRows {
    /// Rows that arrived after their window or join state had closed.
    pub count: AtomicU64,
    file: Option<(std::path::PathBuf, Mutex<csv::Writer<std::fs::File>>)>,
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
        })
    }

    fn create(path: &std::path::Path) -> std::io::Result<csv::Writer<std::fs::File>> {
        Ok(csv::WriterBuilder::new()
            .flexible(true)
            .from_writer(std::fs::File::create(path)?))
    }

    fn add(&self, what: &str, row: &Row<'_>) {
        self.count.fetch_add(1, Ordering::Relaxed);
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
    arity: usize,
    ops: Vec<LateColumns>,
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
        Logical::Aggregate { input, window, .. } if window_refuses(window) => {
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
        WindowSpec::Tumble { .. } | WindowSpec::Hop { .. } | WindowSpec::Session { .. }
    )
}

/// A partition instance's late rows in the late stream's layout, written by its refusing
/// operators and handed on by [`QueryFn`] after each input row.
type LateBuf = Rc<RefCell<Batch>>;

/// For every late-stream column after the first two, the refusing operator's input
/// column holding it (None: null).
type LateColumns = Vec<Option<usize>>;

/// Where one operator puts the rows it refuses: the query's counter and file, and the
/// instance's late stream when the query has one.
struct LateOut {
    rows: Arc<LateRows>,
    what: &'static str,
    stream: Option<(LateBuf, LateColumns)>,
}

impl LateOut {
    fn refuse(&self, row: &Row<'_>, cx: &Cx) {
        self.rows.add(self.what, row);
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
    fn count_only(rows: &Arc<LateRows>) -> LateOut {
        LateOut {
            rows: rows.clone(),
            what: "join",
            stream: None,
        }
    }
}

/// What building a partition's operator tree needs for late rows.
struct LateBuild<'a> {
    rows: &'a Arc<LateRows>,
    stream: Option<(&'a LateBuf, std::slice::Iter<'a, LateColumns>)>,
}

impl LateBuild<'_> {
    fn out(&mut self, what: &'static str) -> LateOut {
        LateOut {
            rows: self.rows.clone(),
            what,
            stream: self.stream.as_mut().map(|(buf, ops)| {
                let cols = ops.next().cloned().unwrap_or_default();
                (Rc::clone(buf), cols)
            }),
        }
    }
}

/// Makes the per-partition instances of a compiled query.
pub struct QueryFactory {
    root: Logical,
    layout: Layout,
    epoch: u64,
    lateness: i64,
    late: Arc<LateRows>,
    late_stage: Option<(Schema, LateStage)>,
    tables: Vec<Arc<TableIndex>>,
}

impl QueryFactory {
    /// A factory for `root` reading physical rows laid out as `layout`, with epochs of
    /// `epoch` event-time units and `lateness` allowed.
    pub fn new(
        root: Logical,
        layout: Layout,
        epoch: u64,
        lateness: i64,
        late: Arc<LateRows>,
    ) -> QueryFactory {
        let mut tables = Vec::new();
        collect_tables(&root, &mut tables);
        QueryFactory {
            root,
            layout,
            epoch: epoch.max(1),
            lateness,
            late,
            late_stage: None,
            tables,
        }
    }

    /// Also writes the rows this stage refuses to the query's late stream, laid out as
    /// `layout` says for stage `k`.
    pub fn with_late_stream(mut self, layout: &LateLayout, k: usize) -> QueryFactory {
        self.late_stage = Some((layout.schema.clone(), layout.stage(k)));
        self
    }

    /// The late-row counter.
    pub fn late(&self) -> &Arc<LateRows> {
        &self.late
    }
}

fn collect_tables(l: &Logical, out: &mut Vec<Arc<TableIndex>>) {
    if let Logical::Lookup { table, keys, .. } = l {
        out.push(Arc::new(TableIndex::new(
            table.clone(),
            keys.iter().map(|k| k.1).collect(),
        )));
    }
    for c in l.children() {
        collect_tables(c, out);
    }
}

impl StreamFunctionFactory for QueryFactory {
    fn output_schema(&self, _input: &Schema) -> Result<Schema> {
        Ok(self.root.schema().clone())
    }

    fn create(&self, _partition: u32, _partitions: u32) -> Box<dyn StreamFunction> {
        let mut tables = self.tables.iter();
        let late_buf = self
            .late_stage
            .as_ref()
            .map(|(_, st)| Rc::new(RefCell::new(Batch::new(st.arity))));
        let mut late = LateBuild {
            rows: &self.late,
            stream: late_buf
                .as_ref()
                .zip(self.late_stage.as_ref())
                .map(|(buf, (_, st))| (buf, st.ops.iter())),
        };
        let root = Node::build(&self.root, &self.layout, &mut tables, &mut late);
        Box::new(QueryFn {
            root,
            layout: self.layout.clone(),
            epoch: self.epoch,
            lateness: self.lateness,
            buf: Batch::new(self.root.schema().arity()),
            late_buf,
        })
    }

    fn every_epoch(&self) -> bool {
        true
    }

    fn late_schema(&self) -> Option<Schema> {
        self.late_stage.as_ref().map(|(schema, _)| schema.clone())
    }
}

struct QueryFn {
    root: Node,
    layout: Layout,
    epoch: u64,
    lateness: i64,
    buf: Batch,
    /// Rows the operators refused, in the late stream's layout (when it has one).
    late_buf: Option<LateBuf>,
}

impl QueryFn {
    fn flush(&mut self, out: &mut Emitter<'_>) {
        for i in 0..self.buf.len() {
            let row = self.buf.row(i);
            out.emit_row_with_lane(row_hash(&row), row);
        }
        self.buf.clear();
        if let Some(buf) = &self.late_buf {
            let mut late = buf.borrow_mut();
            if let Some(to) = out.late_rows() {
                for i in 0..late.len() {
                    to.push_row_of(&late, i, RowKey::default());
                }
            }
            late.clear();
        }
    }
}

pub use braid_plan::expr::row_hash;

impl StreamFunction for QueryFn {
    fn process(&mut self, row: Row<'_>, out: &mut Emitter<'_>) {
        let Some(input) = self.layout.input_of(&row) else {
            return;
        };
        // Rows made when the input ended (an earlier stage's final results) are never late.
        let (wm, at) = if out.epoch() == u64::MAX {
            (i64::MIN, i64::MAX)
        } else {
            let at = (out.epoch().saturating_mul(self.epoch)).min(i64::MAX as u64) as i64;
            (at - self.lateness, at)
        };
        let cx = Cx { wm, at };
        self.root.push(input, row, &cx, &mut self.buf);
        self.flush(out);
    }

    fn end_of_epoch(&mut self, epoch: u64, out: &mut Emitter<'_>) {
        let end = (epoch.saturating_add(1))
            .saturating_mul(self.epoch)
            .min(i64::MAX as u64) as i64;
        self.root.advance(end - self.lateness, &mut self.buf);
        self.flush(out);
    }

    fn finish(&mut self, out: &mut Emitter<'_>) {
        self.root.finish(&mut self.buf);
        self.flush(out);
    }
}

/// What every node needs to know about the row being processed.
struct Cx {
    /// Event times below this are late.
    wm: i64,
    /// The start of the epoch being processed (a late row's `_refused_at`).
    at: i64,
}

struct Node {
    op: Op,
    kids: Vec<Node>,
    bufs: Vec<Batch>,
}

enum Op {
    Scan {
        input: usize,
        offset: usize,
        arity: usize,
    },
    Filter(Expr),
    Project(Vec<Expr>),
    Agg(Box<AggState>),
    Join(Box<JoinState>),
    /// Table, key expressions, residual predicate, the current row's key (reused).
    Lookup(Arc<TableIndex>, Vec<Expr>, Option<Expr>, Vec<Scalar>),
    Union,
}

impl Node {
    fn build(
        l: &Logical,
        layout: &Layout,
        tables: &mut std::slice::Iter<'_, Arc<TableIndex>>,
        late: &mut LateBuild<'_>,
    ) -> Node {
        let op = match l {
            Logical::Scan { input, schema, .. } => Op::Scan {
                input: *input,
                offset: layout.inputs.get(*input).map_or(0, |i| i.1),
                arity: schema.arity(),
            },
            Logical::Filter { predicate, .. } => Op::Filter(predicate.clone()),
            Logical::Project { exprs, .. } => Op::Project(exprs.clone()),
            Logical::Aggregate {
                input,
                window,
                keys,
                aggs,
                ..
            } => Op::Agg(Box::new(AggState {
                window: window.clone(),
                keys: keys.clone(),
                aggs: aggs.clone(),
                time: input.schema().event_time,
                groups: BTreeMap::new(),
                key: Vec::new(),
                sessions: BTreeMap::new(),
                counts: BTreeMap::new(),
                late: late.out("aggregate"),
            })),
            Logical::Join {
                left,
                right,
                equi,
                residual,
                window,
                ..
            } => Op::Join(Box::new(JoinState {
                keys: [
                    equi.iter().map(|e| e.0.clone()).collect(),
                    equi.iter().map(|e| e.1.clone()).collect(),
                ],
                residual: residual.clone(),
                window: window.clone(),
                time: [left.schema().event_time, right.schema().event_time],
                sides: [
                    Side::new(left.schema().arity()),
                    Side::new(right.schema().arity()),
                ],
                late: match window {
                    JoinWindow::Interval { .. } => [late.out("join"), late.out("join")],
                    _ => [
                        LateOut::count_only(late.rows),
                        LateOut::count_only(late.rows),
                    ],
                },
            })),
            Logical::Lookup { keys, residual, .. } => {
                let t = tables.next().cloned().expect("one index per lookup");
                Op::Lookup(
                    t,
                    keys.iter().map(|k| k.0.clone()).collect(),
                    residual.clone(),
                    Vec::new(),
                )
            }
            Logical::Union { .. } => Op::Union,
        };
        let kids: Vec<Node> = l
            .children()
            .into_iter()
            .map(|c| Node::build(c, layout, tables, late))
            .collect();
        let bufs = l
            .children()
            .iter()
            .map(|c| Batch::new(c.schema().arity()))
            .collect();
        Node { op, kids, bufs }
    }

    fn push(&mut self, input: usize, row: Row<'_>, cx: &Cx, out: &mut Batch) {
        let Node { op, kids, bufs } = self;
        if let Op::Scan {
            input: mine,
            offset,
            arity,
        } = op
        {
            if *mine == input {
                out.start_row(RowKey::default());
                for c in *offset..*offset + *arity {
                    out.push_value(row.get(c));
                }
            }
            return;
        }
        for (k, kid) in kids.iter_mut().enumerate() {
            kid.push(input, row, cx, &mut bufs[k]);
            for i in 0..bufs[k].len() {
                op.push(k, bufs[k].row(i), cx, out);
            }
            bufs[k].clear();
        }
    }

    fn advance(&mut self, wm: i64, out: &mut Batch) {
        let Node { op, kids, bufs } = self;
        let cx = Cx {
            wm: i64::MIN,
            at: i64::MIN,
        };
        for (k, kid) in kids.iter_mut().enumerate() {
            kid.advance(wm, &mut bufs[k]);
            for i in 0..bufs[k].len() {
                op.push(k, bufs[k].row(i), &cx, out);
            }
            bufs[k].clear();
        }
        op.advance(wm, out);
    }

    fn finish(&mut self, out: &mut Batch) {
        let Node { op, kids, bufs } = self;
        let cx = Cx {
            wm: i64::MIN,
            at: i64::MAX,
        };
        for (k, kid) in kids.iter_mut().enumerate() {
            kid.finish(&mut bufs[k]);
            for i in 0..bufs[k].len() {
                op.push(k, bufs[k].row(i), &cx, out);
            }
            bufs[k].clear();
        }
        op.advance(i64::MAX, out);
    }
}

impl Op {
    fn push(&mut self, side: usize, row: Row<'_>, cx: &Cx, out: &mut Batch) {
        match self {
            Op::Scan { .. } => {}
            Op::Filter(p) => {
                if p.eval(&row).is_true() {
                    let (b, i) = row.location();
                    out.push_row_of(b, i, RowKey::default());
                }
            }
            Op::Project(exprs) => {
                out.start_row(RowKey::default());
                for e in exprs.iter() {
                    out.push_value(e.eval(&row));
                }
            }
            Op::Union => {
                let (b, i) = row.location();
                out.push_row_of(b, i, RowKey::default());
            }
            Op::Agg(a) => a.push(row, cx, out),
            Op::Join(j) => j.push(side, row, cx, out),
            Op::Lookup(t, keys, residual, key) => {
                key.clear();
                key.extend(keys.iter().map(|k| k.eval(&row).to_scalar()));
                if key.iter().any(|k| matches!(k, Scalar::Null)) {
                    return;
                }
                let Some(hits) = t.index.get(key.as_slice()) else {
                    return;
                };
                for &j in hits {
                    out.start_row(RowKey::default());
                    for c in 0..row.arity() {
                        out.push_value(row.get(c));
                    }
                    let tr = t.table.rows.row(j as usize);
                    for c in 0..tr.arity() {
                        out.push_value(tr.get(c));
                    }
                    if let Some(r) = residual {
                        if !r.eval(&out.row(out.len() - 1)).is_true() {
                            out.abandon_row();
                        }
                    }
                }
            }
        }
    }

    fn advance(&mut self, wm: i64, out: &mut Batch) {
        match self {
            Op::Agg(a) => a.advance(wm, out),
            Op::Join(j) => j.advance(wm),
            _ => {}
        }
    }
}

/// The value of `key` in `map`, made by `make` (with a copy of the key) if absent: no
/// allocation for a key that is already there.
fn get_or_insert<'m, V>(
    map: &'m mut BTreeMap<Vec<Scalar>, V>,
    key: &[Scalar],
    make: impl FnOnce() -> V,
) -> &'m mut V {
    if !map.contains_key(key) {
        map.insert(key.to_vec(), make());
    }
    map.get_mut(key).expect("key just inserted")
}

/// A table's rows indexed by key columns.
struct TableIndex {
    table: Arc<TableDef>,
    index: BTreeMap<Vec<Scalar>, Vec<u32>>,
}

impl TableIndex {
    fn new(table: Arc<TableDef>, cols: Vec<usize>) -> TableIndex {
        let mut index: BTreeMap<Vec<Scalar>, Vec<u32>> = BTreeMap::new();
        for j in 0..table.rows.len() {
            let r = table.rows.row(j);
            let key: Vec<Scalar> = cols.iter().map(|&c| r.get(c).to_scalar()).collect();
            index.entry(key).or_default().push(j as u32);
        }
        TableIndex { table, index }
    }
}

/// An aggregate's running state.
#[derive(Clone, Debug)]
enum Acc {
    Count(i64),
    Sum {
        int: i64,
        float: f64,
        any: bool,
        is_float: bool,
    },
    Avg {
        sum: f64,
        n: i64,
    },
    Min(Option<Scalar>),
    Max(Option<Scalar>),
    Distinct(BTreeSet<Scalar>),
}

impl Acc {
    fn new(call: &AggCall) -> Acc {
        match call.func {
            AggFunc::CountStar | AggFunc::Count => Acc::Count(0),
            AggFunc::CountDistinct => Acc::Distinct(BTreeSet::new()),
            AggFunc::Sum => Acc::Sum {
                int: 0,
                float: 0.0,
                any: false,
                is_float: call.ty == braid_plan::types::DataType::Float64,
            },
            AggFunc::Avg => Acc::Avg { sum: 0.0, n: 0 },
            AggFunc::Min => Acc::Min(None),
            AggFunc::Max => Acc::Max(None),
        }
    }

    fn update(&mut self, call: &AggCall, row: &Row<'_>) {
        let v = call.arg.as_ref().map(|a| a.eval(row));
        if call.func == AggFunc::CountStar {
            if let Acc::Count(n) = self {
                *n += 1;
            }
            return;
        }
        let Some(v) = v else { return };
        if matches!(v, Value::Null) {
            return;
        }
        match self {
            Acc::Count(n) => *n += 1,
            Acc::Distinct(s) => {
                s.insert(v.to_scalar());
            }
            Acc::Sum {
                int, float, any, ..
            } => {
                *any = true;
                match v {
                    Value::Int(i) => *int = int.wrapping_add(i),
                    Value::Float(f) => *float += f,
                    _ => {}
                }
            }
            Acc::Avg { sum, n } => {
                *n += 1;
                *sum += match v {
                    Value::Int(i) => i as f64,
                    Value::Float(f) => f,
                    _ => 0.0,
                };
            }
            Acc::Min(m) => {
                let s = v.to_scalar();
                if m.as_ref().is_none_or(|x| s < *x) {
                    *m = Some(s);
                }
            }
            Acc::Max(m) => {
                let s = v.to_scalar();
                if m.as_ref().is_none_or(|x| s > *x) {
                    *m = Some(s);
                }
            }
        }
    }

    fn merge(&mut self, other: Acc) {
        match (self, other) {
            (Acc::Count(a), Acc::Count(b)) => *a += b,
            (Acc::Distinct(a), Acc::Distinct(b)) => a.extend(b),
            (
                Acc::Sum {
                    int, float, any, ..
                },
                Acc::Sum {
                    int: i2,
                    float: f2,
                    any: a2,
                    ..
                },
            ) => {
                *int = int.wrapping_add(i2);
                *float += f2;
                *any |= a2;
            }
            (Acc::Avg { sum, n }, Acc::Avg { sum: s2, n: n2 }) => {
                *sum += s2;
                *n += n2;
            }
            (Acc::Min(a), Acc::Min(Some(b))) if a.as_ref().is_none_or(|x| b < *x) => *a = Some(b),
            (Acc::Max(a), Acc::Max(Some(b))) if a.as_ref().is_none_or(|x| b > *x) => *a = Some(b),
            _ => {}
        }
    }

    fn value(&self) -> Scalar {
        match self {
            Acc::Count(n) => Scalar::Int(*n),
            Acc::Distinct(s) => Scalar::Int(s.len() as i64),
            Acc::Sum { any: false, .. } => Scalar::Null,
            Acc::Sum {
                int,
                float,
                is_float,
                ..
            } => {
                if *is_float {
                    Scalar::Float(*float + *int as f64)
                } else {
                    Scalar::Int(*int)
                }
            }
            Acc::Avg { n: 0, .. } => Scalar::Null,
            Acc::Avg { sum, n } => Scalar::Float(sum / *n as f64),
            Acc::Min(m) | Acc::Max(m) => m.clone().unwrap_or(Scalar::Null),
        }
    }
}

struct Session {
    start: i64,
    last: i64,
    accs: Vec<Acc>,
}

/// Windows by (end, start), then groups by key.
type TimeGroups = BTreeMap<(i64, i64), BTreeMap<Vec<Scalar>, Vec<Acc>>>;

struct AggState {
    window: WindowSpec,
    keys: Vec<Expr>,
    aggs: Vec<AggCall>,
    time: Option<usize>,
    /// Time windows and the unbounded window: (end, start) -> key -> accumulators.
    groups: TimeGroups,
    /// The current row's key (reused: no allocation per row once a group exists).
    key: Vec<Scalar>,
    sessions: BTreeMap<Vec<Scalar>, Vec<Session>>,
    /// Count windows: key -> (window number, rows in it, accumulators).
    counts: BTreeMap<Vec<Scalar>, (i64, u64, Vec<Acc>)>,
    late: LateOut,
}

impl AggState {
    /// New accumulators for `aggs`.
    fn fresh(aggs: &[AggCall]) -> Vec<Acc> {
        aggs.iter().map(Acc::new).collect()
    }

    fn update(aggs: &[AggCall], accs: &mut [Acc], row: &Row<'_>) {
        for (a, call) in accs.iter_mut().zip(aggs) {
            a.update(call, row);
        }
    }

    /// The accumulators of group `key` in window `(end, start)`, created if new.
    fn group<'s>(
        groups: &'s mut TimeGroups,
        aggs: &[AggCall],
        end: i64,
        start: i64,
        key: &[Scalar],
    ) -> &'s mut Vec<Acc> {
        let inner = groups.entry((end, start)).or_default();
        get_or_insert(inner, key, || Self::fresh(aggs))
    }

    fn push(&mut self, row: Row<'_>, cx: &Cx, out: &mut Batch) {
        self.key.clear();
        for k in &self.keys {
            self.key.push(k.eval(&row).to_scalar());
        }
        let t = self.time.and_then(|c| row.int(c)).unwrap_or(0);
        match self.window {
            WindowSpec::Tumble { size } => {
                // Saturating: event times are data, and may lie at the ends of i64.
                let start = t.saturating_sub(t.rem_euclid(size));
                let end = start.saturating_add(size);
                if end <= cx.wm {
                    self.late.refuse(&row, cx);
                    return;
                }
                let accs = Self::group(&mut self.groups, &self.aggs, end, start, &self.key);
                Self::update(&self.aggs, accs, &row);
            }
            WindowSpec::Hop { size, slide } => {
                // Windows [s, s + size) with s = k * slide and s <= t < s + size.
                let last = t.saturating_sub(t.rem_euclid(slide));
                let mut s = last;
                let mut any = false;
                while s > t.saturating_sub(size) {
                    let end = s.saturating_add(size);
                    if end > cx.wm {
                        any = true;
                        let accs = Self::group(&mut self.groups, &self.aggs, end, s, &self.key);
                        Self::update(&self.aggs, accs, &row);
                    }
                    if s == i64::MIN {
                        break;
                    }
                    s = s.saturating_sub(slide);
                }
                if !any {
                    self.late.refuse(&row, cx);
                }
            }
            WindowSpec::Session { gap } => {
                if t.saturating_add(gap) <= cx.wm {
                    self.late.refuse(&row, cx);
                    return;
                }
                match self.sessions.get_mut(self.key.as_slice()) {
                    Some(list) => Self::add_to_sessions(list, &self.aggs, gap, t, &row),
                    None => {
                        let mut list = Vec::new();
                        Self::add_to_sessions(&mut list, &self.aggs, gap, t, &row);
                        self.sessions.insert(self.key.clone(), list);
                    }
                }
            }
            WindowSpec::Count { rows } => {
                let aggs = &self.aggs;
                let key = &self.key;
                let e = get_or_insert(&mut self.counts, key, || (0, 0, Self::fresh(aggs)));
                Self::update(&self.aggs, &mut e.2, &row);
                e.1 += 1;
                if e.1 == rows {
                    let n = rows as i64;
                    let accs = std::mem::replace(&mut e.2, Self::fresh(&self.aggs));
                    let w = e.0;
                    e.0 += 1;
                    e.1 = 0;
                    emit(out, w * n, (w + 1) * n, key, &accs);
                }
            }
            WindowSpec::Unbounded => {
                let accs = Self::group(&mut self.groups, &self.aggs, i64::MAX, i64::MIN, &self.key);
                Self::update(&self.aggs, accs, &row);
            }
        }
    }

    /// Adds a row at time `t` to a key's sessions: into the one session it falls in
    /// (in place), or as a new session merged with every session it touches.
    fn add_to_sessions(list: &mut Vec<Session>, aggs: &[AggCall], gap: i64, t: i64, row: &Row<'_>) {
        let touches =
            |s: &Session| t > s.start.saturating_sub(gap) && t < s.last.saturating_add(gap);
        let mut hits = list.iter().enumerate().filter(|(_, s)| touches(s));
        if let (Some((i, _)), None) = (hits.next(), hits.next()) {
            let s = &mut list[i];
            s.start = s.start.min(t);
            s.last = s.last.max(t);
            Self::update(aggs, &mut s.accs, row);
            return;
        }
        let mut accs = Self::fresh(aggs);
        Self::update(aggs, &mut accs, row);
        let mut merged = Session {
            start: t,
            last: t,
            accs,
        };
        let mut i = 0;
        while i < list.len() {
            if touches(&list[i]) {
                let s = list.swap_remove(i);
                merged.start = merged.start.min(s.start);
                merged.last = merged.last.max(s.last);
                for (a, b) in merged.accs.iter_mut().zip(s.accs) {
                    a.merge(b);
                }
            } else {
                i += 1;
            }
        }
        list.push(merged);
    }

    fn advance(&mut self, wm: i64, out: &mut Batch) {
        while let Some(entry) = self.groups.first_entry() {
            if entry.key().0 > wm {
                break;
            }
            let ((end, start), groups) = entry.remove_entry();
            // The unbounded window shows as (0, 0); a time window whose end saturated
            // at i64::MAX keeps its bounds.
            let (s, e) = if self.window == WindowSpec::Unbounded {
                (0, 0)
            } else {
                (start, end)
            };
            for (key, accs) in groups {
                emit(out, s, e, &key, &accs);
            }
        }
        if let WindowSpec::Session { gap } = self.window {
            let mut done: Vec<(i64, i64, Vec<Scalar>, Vec<Acc>)> = Vec::new();
            for (key, list) in self.sessions.iter_mut() {
                let mut i = 0;
                while i < list.len() {
                    if list[i].last.saturating_add(gap) <= wm {
                        let s = list.swap_remove(i);
                        done.push((s.last.saturating_add(gap), s.start, key.clone(), s.accs));
                    } else {
                        i += 1;
                    }
                }
            }
            self.sessions.retain(|_, l| !l.is_empty());
            done.sort_by(|a, b| (a.0, a.1, &a.2).cmp(&(b.0, b.1, &b.2)));
            for (end, start, key, accs) in done {
                emit(out, start, end, &key, &accs);
            }
        }
        if wm == i64::MAX {
            // End of input: partial count windows too.
            for (key, (w, n, accs)) in std::mem::take(&mut self.counts) {
                if n > 0 {
                    if let WindowSpec::Count { rows } = self.window {
                        let r = rows as i64;
                        emit(out, w * r, w * r + n as i64, &key, &accs);
                    }
                }
            }
        }
    }
}

fn emit(out: &mut Batch, start: i64, end: i64, key: &[Scalar], accs: &[Acc]) {
    out.start_row(RowKey::default());
    out.push_value(Value::Int(start));
    out.push_value(Value::Int(end));
    for k in key {
        out.push_value(k.as_value());
    }
    for a in accs {
        out.push_value(a.value().as_value());
    }
}

/// Rows kept by one side of a join.
struct Side {
    rows: Batch,
    times: Vec<i64>,
    index: BTreeMap<Vec<Scalar>, Vec<u32>>,
    /// First live row (count windows drop from the front).
    start: usize,
}

impl Side {
    fn new(arity: usize) -> Side {
        Side {
            rows: Batch::new(arity),
            times: Vec::new(),
            index: BTreeMap::new(),
            start: 0,
        }
    }

    fn insert(&mut self, row: &Row<'_>, t: i64, key: Vec<Scalar>, keyed: bool) {
        let (b, i) = row.location();
        let at = self.rows.len() as u32;
        self.rows.push_row_of(b, i, RowKey::default());
        self.times.push(t);
        if keyed {
            self.index.entry(key).or_default().push(at);
        }
    }

    /// Keeps rows `i >= from` with `keep(time)`; rebuilds the index.
    fn retain(&mut self, from: usize, keep: impl Fn(i64) -> bool, keys: &[Expr]) {
        let live = (from..self.rows.len())
            .filter(|&i| keep(self.times[i]))
            .count();
        if live == self.rows.len() {
            return;
        }
        let mut rows = Batch::new(self.rows.arity());
        let mut times = Vec::with_capacity(live);
        for i in from..self.rows.len() {
            if keep(self.times[i]) {
                rows.push_row_of(&self.rows, i, RowKey::default());
                times.push(self.times[i]);
            }
        }
        self.rows = rows;
        self.times = times;
        self.start = 0;
        self.index.clear();
        if !keys.is_empty() {
            for i in 0..self.rows.len() {
                let r = self.rows.row(i);
                let key: Vec<Scalar> = keys.iter().map(|k| k.eval(&r).to_scalar()).collect();
                self.index.entry(key).or_default().push(i as u32);
            }
        }
    }
}

struct JoinState {
    keys: [Vec<Expr>; 2],
    residual: Option<Expr>,
    window: JoinWindow,
    time: [Option<usize>; 2],
    sides: [Side; 2],
    /// Per side.
    late: [LateOut; 2],
}

impl JoinState {
    fn push(&mut self, side: usize, row: Row<'_>, cx: &Cx, out: &mut Batch) {
        let t = self.time[side].and_then(|c| row.int(c)).unwrap_or(0);
        let keyed = !self.keys[side].is_empty();
        let key: Vec<Scalar> = self.keys[side]
            .iter()
            .map(|k| k.eval(&row).to_scalar())
            .collect();
        if let JoinWindow::Interval { .. } = self.window {
            if t < cx.wm {
                self.late[side].refuse(&row, cx);
                return;
            }
        }
        let other = &self.sides[1 - side];
        let null_key = key.iter().any(|k| matches!(k, Scalar::Null));
        let mut matches = |j: usize| {
            let ot = other.times[j];
            if let JoinWindow::Interval { lo, hi } = self.window {
                let d = if side == 0 {
                    i128::from(ot) - i128::from(t)
                } else {
                    i128::from(t) - i128::from(ot)
                };
                if d < i128::from(lo) || d > i128::from(hi) {
                    return;
                }
            }
            let orow = other.rows.row(j);
            let (l, r) = if side == 0 { (row, orow) } else { (orow, row) };
            out.start_row(RowKey::default());
            for c in 0..l.arity() {
                out.push_value(l.get(c));
            }
            for c in 0..r.arity() {
                out.push_value(r.get(c));
            }
            if let Some(p) = &self.residual {
                if !p.eval(&out.row(out.len() - 1)).is_true() {
                    out.abandon_row();
                }
            }
        };
        if keyed {
            if !null_key {
                if let Some(hits) = other.index.get(&key) {
                    for &j in hits {
                        matches(j as usize);
                    }
                }
            }
        } else {
            for j in other.start..other.rows.len() {
                matches(j);
            }
        }
        if keyed && null_key {
            return;
        }
        self.sides[side].insert(&row, t, key, keyed);
        if let JoinWindow::Count { left, right } = self.window {
            let n = if side == 0 { left } else { right } as usize;
            let s = &mut self.sides[side];
            if s.rows.len() - s.start > n {
                s.start = s.rows.len() - n;
            }
            if s.start > n.max(1024) {
                let from = s.start;
                s.retain(from, |_| true, &[]);
            }
        }
    }

    fn advance(&mut self, wm: i64) {
        if let JoinWindow::Interval { lo, hi } = self.window {
            // A left row can still meet right rows with time >= wm if t + hi >= wm; a
            // right row can meet left rows with time >= wm if t - lo >= wm.
            let [l, r] = &mut self.sides;
            l.retain(0, |t| t.saturating_add(hi) >= wm, &self.keys[0]);
            r.retain(0, |t| t.saturating_sub(lo) >= wm, &self.keys[1]);
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
        late.add("aggregate", &b.row(0));
        late.add("join", &b.row(0));
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
        assert_eq!(
            rows,
            vec![
                vec!["aggregate", "7", "a,\"b\"\nc", ""],
                vec!["join", "7", "a,\"b\"\nc", ""],
            ]
        );
    }
}
