//! Runs a [`Logical`] plan incrementally, as the stream function of one partition.
//!
//! The operator tree mirrors the logical plan. A row enters at the scan of its input
//! stream and flows up; every node writes its output rows into a batch its parent reads
//! (reused, so stateless chains allocate nothing per row). Stateful nodes keep windows
//! and join state and emit when event time passes their end.
//!
//! Time is decided by epochs, never by what one partition happens to see, so results do
//! not depend on the partitioning, nor on the cut into stages (every stage judges with
//! the input's lateness and hears of every epoch of the input, and a row an earlier
//! stage made at the end of an epoch is never late, as in one stage):
//! - a row processed in epoch `e` is late if its event time is below
//!   `e * epoch - lateness` (late rows are counted, written to a file if asked, and
//!   written to the late stream when a later query reads `LATE(sink)`, see [`LateLayout`]);
//! - at the end of epoch `e` (every partition hears of every epoch, see
//!   `StreamFunctionFactory::every_epoch`) windows ending at or before
//!   `(e + 1) * epoch - lateness` are emitted.
//!
//! One file per operator: `project` (scan, filter, project, union), `lookup` (a table
//! join), `aggregate` with `session` and `count_window` windows, `join` (stream joins),
//! and `late` (late rows); `checkpoint` saves and restores the operators' state, and
//! `route` computes where keyed state routes. This
//! module builds the tree and drives it.
//!
//! Output rows an input row caused carry a lane that is a hash of their values, so the
//! transparent merge orders them the same way whatever partition made them; rows made
//! at the end of an epoch or of the input carry lane 0, and the merge orders those by
//! event time, then values.

mod accumulate;
mod aggregate;
mod checkpoint;
mod count_window;
mod join;
mod late;
mod lookup;
mod prefetch;
mod project;
pub(crate) mod route;
mod session;
mod topn;

pub use late::{LateLayout, LateRows, LateStage};

use crate::logical::Logical;
use aggregate::AggState;
use braid_plan::batch::{Batch, Row, RowKey};
use braid_plan::error::{Error, Result};
use braid_plan::expr::{Arena, Compiled, Fault, IntRows};
use braid_plan::function::{Emitter, StreamFunction, StreamFunctionFactory};
use braid_plan::types::Schema;
use join::JoinState;
use late::{Cx, LateBuf, LateBuild};
use lookup::{Lookup, TableIndex};
use prefetch::Prefetch;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

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

/// Makes the per-partition instances of a compiled query.
pub struct QueryFactory {
    root: Logical,
    layout: Layout,
    epoch: u64,
    lateness: i64,
    late: Arc<LateRows>,
    late_stage: Option<(Schema, LateStage)>,
    tables: Vec<Arc<TableIndex>>,
    /// It reads an earlier stage's output (whose rows made at the end of an epoch are
    /// marked), not the query's input.
    after_cut: bool,
    /// What checkpoints of its instances are of (see [`checkpoint::fingerprint`]).
    plan: u64,
    /// Its stage is hash-partitioned by the keys of its stateful operators (or holds
    /// no state): see [`QueryFactory::rescalable`].
    rescales: bool,
    /// Its batched function calls (Python's), made once for a batch of rows.
    prefetch: Arc<Prefetch>,
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
        let epoch = epoch.max(1);
        let plan = checkpoint::fingerprint(&root, epoch, lateness);
        let prefetch = Arc::new(Prefetch::of(&root, &layout));
        QueryFactory {
            prefetch,
            root,
            layout,
            epoch,
            lateness,
            late,
            late_stage: None,
            tables,
            after_cut: false,
            plan,
            rescales: false,
        }
    }

    /// Its stage is partitioned by a hash of the keys its stateful operators keep state
    /// by (or it has none), so a checkpoint can be restored with another partition
    /// count: each entry's route value follows from its key.
    pub fn rescalable(mut self) -> QueryFactory {
        self.rescales = true;
        self
    }

    /// Reads the output of the stage before it: a row that stage made at the end of an
    /// epoch or of the input ([`RowKey::made_at_end`]) is never late here, as in one
    /// stage.
    pub fn after_cut(mut self) -> QueryFactory {
        self.after_cut = true;
        self
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

    fn create(&self, partition: u32, _partitions: u32) -> Box<dyn StreamFunction> {
        let mut tables = self.tables.iter();
        let late_buf = self
            .late_stage
            .as_ref()
            .map(|(_, st)| Rc::new(RefCell::new(Batch::new(st.arity))));
        let late_local = Rc::new(std::cell::Cell::new(0));
        let mut late = LateBuild {
            rows: &self.late,
            local: late_local.clone(),
            stream: late_buf
                .as_ref()
                .zip(self.late_stage.as_ref())
                .map(|(buf, (_, st))| (buf, st.ops.iter())),
        };
        let root = Node::build(&self.root, &self.layout, &mut tables, &mut late);
        let window = Windowed::of(&root, &self.layout, &self.prefetch, self.after_cut);
        Box::new(QueryFn {
            window,
            root,
            layout: self.layout.clone(),
            epoch: self.epoch,
            lateness: self.lateness,
            after_cut: self.after_cut,
            buf: Batch::new(self.root.schema().arity()),
            late_buf,
            faults: Vec::new(),
            plan: self.plan,
            late_rows: self.late.clone(),
            late_local,
            partition,
            prefetch: self.prefetch.clone(),
            held: None,
            held_keys: Vec::new(),
        })
    }

    fn holds_rows(&self) -> bool {
        self.prefetch.any()
    }

    fn every_epoch(&self) -> bool {
        // A final aggregate's windows close in the epoch its partials come in (the
        // partial aggregates closed them there): a stage whose only state it is needs
        // the end of only the epochs in which it has rows.
        !self.root.stateful().iter().all(|l| {
            matches!(
                l,
                Logical::Aggregate {
                    phase: crate::logical::AggPhase::Final,
                    ..
                }
            )
        })
    }

    fn checkpoints(&self) -> bool {
        true
    }

    fn rescales(&self) -> bool {
        self.rescales
    }

    fn state_anywhere(&self) -> bool {
        self.root.stateful().iter().any(|l| {
            matches!(
                l,
                Logical::Aggregate {
                    phase: crate::logical::AggPhase::Partial,
                    ..
                }
            )
        })
    }

    fn stateless(&self) -> bool {
        fn keeps_nothing(l: &Logical) -> bool {
            matches!(
                l,
                Logical::Scan { .. }
                    | Logical::Filter { .. }
                    | Logical::Project { .. }
                    | Logical::Lookup { .. }
                    | Logical::Union { .. }
            ) && l.children().into_iter().all(keeps_nothing)
        }
        !self.after_cut && self.late_stage.is_none() && keeps_nothing(&self.root)
    }

    fn late_schema(&self) -> Option<Schema> {
        self.late_stage.as_ref().map(|(schema, _)| schema.clone())
    }
}

struct QueryFn {
    /// The window-at-a-time path, for a query that only filters and projects, or whose
    /// stage is a tumbling or hopping partial aggregate over filters of a scan.
    window: Option<Windowed>,
    root: Node,
    layout: Layout,
    epoch: u64,
    lateness: i64,
    /// See [`QueryFactory::after_cut`].
    after_cut: bool,
    buf: Batch,
    /// Rows the operators refused, in the late stream's layout (when it has one).
    late_buf: Option<LateBuf>,
    /// The operators' runtime faults since the last flush.
    faults: Faults,
    /// See [`QueryFactory::plan`].
    plan: u64,
    /// The query's late-row counter, and what this partition added to it (kept by
    /// checkpoints, so a restored run counts what it refused before).
    late_rows: Arc<LateRows>,
    late_local: Rc<std::cell::Cell<u64>>,
    /// Which partition it is (a rescaled restore adds each old partition's count once).
    partition: u32,
    /// With batched function calls: the rows held to run together ([`HELD`] at most,
    /// run at the end of each batch the engine hands over, of each epoch and of the
    /// input), and each one's sequence number and epoch.
    prefetch: Arc<Prefetch>,
    held: Option<Batch>,
    held_keys: Vec<(u64, u64)>,
}

/// The window-at-a-time path of a query that only filters and projects its input
/// (filters, then a projection, a last filter or a partial aggregate ([`Tail`]), over a
/// scan of the whole row): on a window of all-int rows each expression is computed for
/// all rows in a tight loop ([`Compiled::select`], [`Compiled::eval_ints`]) instead of
/// up the operator tree row by row. Where an expression has no such path, or a row of the window has no value
/// there (an overflow, a division by zero), the window goes row by row as always,
/// faults and all: the same rows come out under the same keys either way.
struct Windowed {
    arity: usize,
    filters: Vec<Compiled>,
    tail: Tail,
    scratch: braid_plan::expr::Scratch,
    /// The rows left after each filter, and the projected columns.
    rows: Vec<u32>,
    kept: Vec<u32>,
    columns: Vec<Vec<i64>>,
    values: Vec<i64>,
}

/// What a [`Windowed`] query does with the rows its filters keep.
enum Tail {
    /// Emits them whole (a last filter), or the projection's values.
    Rows(Option<Vec<Compiled>>),
    /// Adds them to the root's tumbling or hopping aggregate
    /// ([`aggregate::AggState::push_window`]).
    Aggregate(aggregate::IntWindow),
}

impl Windowed {
    fn of(root: &Node, layout: &Layout, prefetch: &Prefetch, after_cut: bool) -> Option<Windowed> {
        let d = root.direct.as_ref()?;
        if layout.tag.is_some() || prefetch.any() || d.input != 0 {
            return None;
        }
        let mut filters = d.filters.clone();
        let tail = match &root.op {
            Op::Filter(p) => {
                filters.push(p.clone());
                Tail::Rows(None)
            }
            Op::Project(exprs) => Tail::Rows(Some(exprs.clone())),
            // (After a cut, a row's lateness depends on its sequence number.)
            Op::Agg(_) if !after_cut => Tail::Aggregate(Default::default()),
            _ => return None,
        };
        Some(Windowed {
            arity: d.arity,
            filters,
            tail,
            scratch: Default::default(),
            rows: Vec::new(),
            kept: Vec::new(),
            columns: Vec::new(),
            values: Vec::new(),
        })
    }

    /// Runs rows `rows` of `batch` (of epoch context `cx`) through `root`, as
    /// [`QueryFn::run`] would row by row; false (having changed and emitted nothing)
    /// where the window must go row by row.
    fn run(
        &mut self,
        root: &mut Node,
        batch: &Batch,
        rows: &[u32],
        cx: &Cx,
        out: &mut Emitter<'_>,
    ) -> bool {
        let Some(data) = batch.int_payloads().filter(|_| batch.arity() == self.arity) else {
            return false;
        };
        let arity = self.arity;
        fn at<'a>(data: &'a [u64], arity: usize, rows: &'a [u32]) -> IntRows<'a> {
            IntRows { data, arity, rows }
        }
        self.rows.clear();
        self.rows.extend_from_slice(rows);
        for f in &self.filters {
            if !f.select(
                at(data, arity, &self.rows),
                &mut self.kept,
                &mut self.scratch,
            ) {
                return false;
            }
            std::mem::swap(&mut self.rows, &mut self.kept);
        }
        let p = out.partition();
        let exprs = match (&mut self.tail, &mut root.op) {
            (Tail::Aggregate(w), Op::Agg(a)) => {
                return a.push_window(batch, at(data, arity, &self.rows), cx, w);
            }
            (Tail::Rows(exprs), _) => exprs,
            _ => return false,
        };
        let Some(exprs) = exprs else {
            for &i in &self.rows {
                let row = batch.row(i as usize);
                out.restart(batch.key(i as usize).seq, p);
                out.emit_row_with_lane(row_hash(&row), row);
            }
            return true;
        };
        self.columns.resize_with(exprs.len(), Vec::new);
        for (e, column) in exprs.iter().zip(&mut self.columns) {
            if !e.eval_ints(at(data, arity, &self.rows), column, &mut self.scratch) {
                return false;
            }
        }
        for (j, &i) in self.rows.iter().enumerate() {
            self.values.clear();
            self.values.extend(self.columns.iter().map(|c| c[j]));
            out.restart(batch.key(i as usize).seq, p);
            out.emit_ints_with_lane(braid_plan::expr::int_row_hash(&self.values), &self.values);
        }
        true
    }
}

/// Most rows a query function with batched function calls holds.
const HELD: usize = 1024;

/// Runtime faults of the operators (named) while a row goes up the tree or windows
/// close: each skipped what it could not compute, and the emitter reports them.
pub(crate) type Faults = Vec<(&'static str, Fault)>;

impl QueryFn {
    /// Counts `n` late rows a checkpoint holds as this partition's.
    fn count_restored(&mut self, n: u64) {
        self.late_local.set(self.late_local.get() + n);
        self.late_rows.restored(n);
    }

    /// Emits the rows made so far: those an input row caused under a hash of their
    /// values, those made at the end of an epoch or of the input (`at_end`) under lane
    /// 0, which the transparent merge orders by event time, then values (windows closed
    /// together come by `window_end`, whatever partition closed them).
    fn flush(&mut self, out: &mut Emitter<'_>, at_end: bool) {
        for i in 0..self.buf.len() {
            let row = self.buf.row(i);
            let lane = if at_end { 0 } else { row_hash(&row) };
            out.emit_row_with_lane(lane, row);
        }
        self.buf.clear();
        for (operator, fault) in self.faults.drain(..) {
            out.fault(operator, fault);
        }
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

impl QueryFn {
    /// When rows of input row `seq` of epoch `epoch` are late, and when the epoch began.
    fn cx(&self, epoch: u64, seq: u64) -> Cx {
        let (wm, at) = if epoch == u64::MAX {
            (i64::MIN, i64::MAX)
        } else if epoch == 0 {
            // Epoch 0 holds every time below one epoch's length, negative ones too
            // (`epoch_at`): none of its rows is late.
            (i64::MIN, 0)
        } else {
            let at = (epoch.saturating_mul(self.epoch)).min(i64::MAX as u64) as i64;
            match self.after_cut && RowKey::made_at_end(seq) {
                true => (i64::MIN, at),
                false => (at - self.lateness, at),
            }
        };
        // Only a first stage's rows carry their source's sequence numbers (a later
        // stage's are hashes, see `RowKey::stage_seq`).
        let seq = if self.after_cut { RowKey::AT_END } else { seq };
        Cx { wm, at, seq }
    }

    /// Runs input row `row`, sequence number `seq` of epoch `epoch`, up the tree.
    fn run(&mut self, row: Row<'_>, epoch: u64, seq: u64, out: &mut Emitter<'_>) {
        let Some(input) = self.layout.input_of(&row) else {
            return;
        };
        // A row an earlier stage made at the end of an epoch or of the input is never
        // late, as it is not in one stage (where it goes up the tree while windows close);
        // a row it made while processing an input row is judged by that row's epoch, the
        // one it comes in.
        let cx = self.cx(epoch, seq);
        self.root
            .push(input, row, &cx, &mut self.buf, &mut self.faults);
        self.flush(out, false);
    }

    /// Runs the held rows, each under its own key, after one call of each batched
    /// function for all of them; the emitter is left restarted for the last.
    fn run_held(&mut self, out: &mut Emitter<'_>) {
        let Some(mut held) = self.held.take() else {
            return;
        };
        if !held.is_empty() {
            self.prefetch.run(&held, &self.layout);
            let p = out.partition();
            let keys = std::mem::take(&mut self.held_keys);
            for (i, (row, &(seq, epoch))) in held.rows().zip(&keys).enumerate() {
                braid_plan::expr::prefetch::at_row(i);
                out.restart(seq, p);
                self.run(row, epoch, seq, out);
            }
            braid_plan::expr::prefetch::forget();
            self.held_keys = keys;
            self.held_keys.clear();
        }
        held.clear();
        self.held = Some(held);
    }

    /// `run_held`, the emitter then restarted as it came (for the end of an epoch or of
    /// the input).
    fn run_held_keep(&mut self, out: &mut Emitter<'_>) {
        if self.held.as_ref().is_some_and(|h| !h.is_empty()) {
            let (seq, p) = (out.seq(), out.partition());
            self.run_held(out);
            out.restart(seq, p);
        }
    }
}

impl StreamFunction for QueryFn {
    fn process(&mut self, row: Row<'_>, out: &mut Emitter<'_>) {
        if !self.prefetch.any() {
            return self.run(row, out.epoch(), out.seq(), out);
        }
        let held = self
            .held
            .get_or_insert_with(|| Batch::with_capacity(row.arity(), HELD));
        let (b, i) = row.location();
        held.push_row_of(b, i, RowKey::default());
        self.held_keys.push((out.seq(), out.epoch()));
        if held.len() >= HELD {
            self.run_held(out);
        }
    }

    fn end_of_batch(&mut self, out: &mut Emitter<'_>) {
        self.run_held(out);
    }

    fn process_rows(&mut self, batch: &Batch, rows: &[u32], out: &mut Emitter<'_>) {
        // (The window path is taken only where lateness is the epoch's alone; each row's
        // own sequence number goes in its `Cx` there.)
        let cx = self.cx(out.epoch(), 0);
        if let Some(w) = self.window.as_mut() {
            if w.run(&mut self.root, batch, rows, &cx, out) {
                // Rows an aggregate refused as late.
                self.flush(out, false);
                return;
            }
        }
        braid_plan::function::process_each(self, batch, rows, out);
    }

    fn end_of_epoch(&mut self, epoch: u64, out: &mut Emitter<'_>) {
        self.run_held_keep(out);
        let end = (epoch.saturating_add(1))
            .saturating_mul(self.epoch)
            .min(i64::MAX as u64) as i64;
        self.root
            .advance(end - self.lateness, &mut self.buf, &mut self.faults);
        self.flush(out, true);
    }

    fn finish(&mut self, out: &mut Emitter<'_>) {
        self.run_held_keep(out);
        // Rows made at the end of the input join those made at the end of the last
        // epoch in one run, ordered by event time then values. Whether a partition's
        // windows close at `end_of_epoch` of the final epoch (`u64::MAX`, when an
        // earlier stage's end-of-input rows reach it) or only here depends on where its
        // partners' rows went, so the two must not be told apart in the output order.
        let p = out.partition();
        out.restart(RowKey::END_OF_EPOCH, p);
        self.root.finish(&mut self.buf, &mut self.faults);
        self.flush(out, true);
    }

    fn save(&self, out: &mut Vec<u8>) -> Result<()> {
        // Every row made is handed on before `process` and `end_of_epoch` return.
        let late = self
            .late_buf
            .as_ref()
            .is_some_and(|b| !b.borrow().is_empty());
        let held = self.held.as_ref().is_some_and(|h| !h.is_empty());
        if !self.buf.is_empty() || !self.faults.is_empty() || late || held {
            return Err(Error::Internal(
                "a checkpoint of a query holding rows not yet emitted".into(),
            ));
        }
        let tally = checkpoint::Tally {
            late: self.late_local.get(),
            partition: self.partition,
        };
        checkpoint::save(&self.root, self.plan, tally, out)
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        let tally = checkpoint::restore(&mut self.root, self.plan, bytes)?;
        self.count_restored(tally.late);
        Ok(())
    }

    fn take_over(&mut self, bytes: &[u8]) -> Result<()> {
        // The run counted these late rows when they came: only this partition's tally
        // (what its next checkpoint holds) takes them.
        let tally = checkpoint::restore(&mut self.root, self.plan, bytes)?;
        self.late_local.set(self.late_local.get() + tally.late);
        Ok(())
    }

    fn restore_share(&mut self, bytes: &[u8], keep: &dyn Fn(i64) -> bool) -> Result<()> {
        let tally = checkpoint::restore_share(&mut self.root, self.plan, bytes, keep)?;
        // Each old partition's count goes to the one new partition its number routes
        // to, as a key equal to it would.
        if keep(i64::from(tally.partition)) {
            self.count_restored(tally.late);
        }
        Ok(())
    }
}

/// An operator and its inputs, each with the batch it writes for the operator to read.
struct Node {
    op: Op,
    kids: Vec<Node>,
    bufs: Vec<Batch>,
    /// The strings the operator's expressions make for one row (see [`Arena`]): reset
    /// after each row the operator takes, once what it made of the row is copied into
    /// its output batch or its state. Untouched, and free, without string functions.
    arena: Arena,
    /// How far below the watermark the times of rows its inputs hand on may lie
    /// ([`Logical::time_hold`]): the operator judges them, and closes state, that much
    /// later.
    hold: i64,
    /// An operator of one input over filters over a scan that copies its input row
    /// whole: run on the input row itself, with no copy per operator below it.
    direct: Option<Direct>,
}

/// The operators below a [`Node`] run on its input row itself: the scan's input and
/// arity (the row must have exactly its columns), and the filters between, lowest
/// first.
struct Direct {
    input: usize,
    arity: usize,
    filters: Vec<Compiled>,
}

impl Direct {
    /// The chain below an operator, if it is filters over a scan of a whole row.
    fn of(op: &Op, kids: &[Node]) -> Option<Direct> {
        // Operators of one input, which read its row only while they take it.
        if !matches!(
            op,
            Op::Filter(_) | Op::Project(_) | Op::Agg(_) | Op::Lookup(_) | Op::TopN(_)
        ) {
            return None;
        }
        let mut filters = Vec::new();
        let mut node = match kids {
            [only] => only,
            _ => return None,
        };
        loop {
            match (&node.op, node.kids.as_slice()) {
                (Op::Filter(p), [only]) => {
                    filters.push(p.clone());
                    node = only;
                }
                (
                    Op::Scan {
                        input,
                        offset: 0,
                        arity,
                        fixed,
                    },
                    [],
                ) if fixed.is_empty() => {
                    filters.reverse();
                    return Some(Direct {
                        input: *input,
                        arity: *arity,
                        filters,
                    });
                }
                _ => return None,
            }
        }
    }
}

/// One operator of the tree; stateful ones hold their state.
enum Op {
    Scan {
        input: usize,
        offset: usize,
        arity: usize,
        /// The input's columns with a declared array length (a row breaking one is
        /// skipped as a fault, whatever read it).
        fixed: Vec<(usize, braid_plan::types::Field)>,
    },
    Filter(Compiled),
    Project(Vec<Compiled>),
    Agg(Box<AggState>),
    Join(Box<JoinState>),
    Lookup(Box<Lookup>),
    TopN(Box<topn::TopN>),
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
                fixed: schema
                    .fields
                    .iter()
                    .enumerate()
                    .filter(|(_, f)| f.len.is_some())
                    .map(|(c, f)| (c, f.clone()))
                    .collect(),
            },
            Logical::Filter { predicate, .. } => Op::Filter(Compiled::new(predicate.clone())),
            Logical::Project { exprs, .. } => {
                Op::Project(exprs.iter().cloned().map(Compiled::new).collect())
            }
            Logical::Aggregate {
                phase,
                input,
                window,
                keys,
                aggs,
                ..
            } => Op::Agg(Box::new(AggState::new(
                window.clone(),
                keys.clone(),
                aggs.clone(),
                input.schema().event_time,
                late.out("aggregate"),
                *phase,
            ))),
            Logical::Join {
                left,
                right,
                equi,
                residual,
                window,
                kind,
                ..
            } => Op::Join(Box::new(JoinState::new(
                left,
                right,
                equi,
                residual.clone(),
                window.clone(),
                *kind,
                late,
            ))),
            Logical::Lookup {
                keys,
                residual,
                kind,
                ..
            } => {
                let t = tables.next().cloned().expect("one index per lookup");
                let keys = keys.iter().map(|k| k.0.clone()).collect();
                let outer = *kind != crate::logical::JoinKind::Inner;
                Op::Lookup(Box::new(Lookup::new(t, keys, residual.clone(), outer)))
            }
            Logical::TopN {
                partition,
                order,
                limit,
                ..
            } => Op::TopN(Box::new(topn::TopN::new(
                partition.clone(),
                order.clone(),
                *limit,
            ))),
            // A union passes its inputs' rows on; so do the steps lowered onto the
            // physical plan (the merge sorts, the sink limits), which a stage never holds.
            Logical::Union { .. } | Logical::Sort { .. } | Logical::Limit { .. } => Op::Union,
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
        let direct = Direct::of(&op, &kids);
        let hold = l
            .children()
            .iter()
            .map(|c| c.time_hold())
            .max()
            .unwrap_or(0);
        Node {
            op,
            kids,
            bufs,
            arena: Arena::new(),
            hold,
            direct,
        }
    }

    fn push(&mut self, input: usize, row: Row<'_>, cx: &Cx, out: &mut Batch, f: &mut Faults) {
        let Node {
            op,
            kids,
            bufs,
            arena,
            direct,
            hold,
        } = self;
        // Filters over a scan of the whole row: each in turn on the row itself, as each
        // would on its copy (a fault skips the row), then this operator.
        if let Some(d) = direct.as_ref().filter(|d| row.arity() == d.arity) {
            if d.input != input {
                return;
            }
            for p in &d.filters {
                let pass = match p.eval(&row, arena) {
                    Ok(v) => v.is_true(),
                    Err(fault) => {
                        f.push(("filter", fault));
                        false
                    }
                };
                arena.reset();
                if !pass {
                    return;
                }
            }
            op.push(0, row, cx, out, f, arena);
            arena.reset();
            return;
        }
        if let Op::Scan {
            input: mine,
            offset,
            arity,
            fixed,
        } = op
        {
            if *mine == input {
                for (c, field) in fixed.iter() {
                    let got = row.get(*offset + c).array_len();
                    if let Some(why) = got.and_then(|n| field.length_fault(n)) {
                        f.push(("scan", braid_plan::expr::Fault::new(why)));
                        return;
                    }
                }
                project::scan(&row, *offset, *arity, out);
            }
            return;
        }
        // Below an interval join, the watermark its hold lowers (most nodes have none).
        let lowered;
        let held = match *hold {
            0 => cx,
            h => {
                lowered = Cx {
                    wm: cx.wm.saturating_sub(h),
                    ..*cx
                };
                &lowered
            }
        };
        for (k, kid) in kids.iter_mut().enumerate() {
            kid.push(input, row, cx, &mut bufs[k], f);
            op.take(k, &mut bufs[k], held, out, f, arena);
        }
    }

    fn advance(&mut self, wm: i64, out: &mut Batch, f: &mut Faults) {
        let Node {
            op,
            kids,
            bufs,
            arena,
            hold,
            ..
        } = self;
        let cx = Cx {
            wm: i64::MIN,
            at: i64::MIN,
            seq: RowKey::AT_END,
        };
        for (k, kid) in kids.iter_mut().enumerate() {
            kid.advance(wm, &mut bufs[k], f);
            op.take(k, &mut bufs[k], &cx, out, f, arena);
        }
        // (`i64::MAX`: the input ended, everything closes.)
        let wm = match wm {
            i64::MAX => wm,
            _ => wm.saturating_sub(*hold),
        };
        op.advance(wm, out, f, arena);
    }

    fn finish(&mut self, out: &mut Batch, f: &mut Faults) {
        let Node {
            op,
            kids,
            bufs,
            arena,
            ..
        } = self;
        let cx = Cx {
            wm: i64::MIN,
            at: i64::MAX,
            seq: RowKey::AT_END,
        };
        for (k, kid) in kids.iter_mut().enumerate() {
            kid.finish(&mut bufs[k], f);
            op.take(k, &mut bufs[k], &cx, out, f, arena);
        }
        op.advance(i64::MAX, out, f, arena);
    }
}

impl Op {
    /// Takes every row input `side` made (in `rows`, emptied), resetting `arena` after
    /// each once what the operator made of it is copied out.
    fn take(
        &mut self,
        side: usize,
        rows: &mut Batch,
        cx: &Cx,
        out: &mut Batch,
        f: &mut Faults,
        arena: &mut Arena,
    ) {
        for i in 0..rows.len() {
            self.push(side, rows.row(i), cx, out, f, arena);
            arena.reset();
        }
        rows.clear();
    }

    /// Takes one row of input `side`; the strings its expressions make go to `arena`.
    fn push(
        &mut self,
        side: usize,
        row: Row<'_>,
        cx: &Cx,
        out: &mut Batch,
        f: &mut Faults,
        arena: &Arena,
    ) {
        match self {
            Op::Scan { .. } => {}
            Op::Filter(p) => project::filter(p, row, out, f, arena),
            Op::Project(exprs) => project::project(exprs, row, out, f, arena),
            Op::Union => project::union(row, out),
            Op::Agg(a) => a.push(row, cx, out, f, arena),
            Op::Join(j) => j.push(side, row, cx, out, f, arena),
            Op::Lookup(l) => l.push(row, out, f, arena),
            Op::TopN(t) => t.push(row),
        }
    }

    fn advance(&mut self, wm: i64, out: &mut Batch, f: &mut Faults, arena: &mut Arena) {
        match self {
            Op::Agg(a) => a.advance(wm, out, f),
            Op::Join(j) => j.advance(wm, out, arena),
            Op::TopN(t) => t.advance(out),
            _ => {}
        }
    }
}
