//! User code that plans name: stream functions (run once per partition), routing
//! functions and combiners for keyed merges, kept in a [`Registry`].

use crate::batch::{Batch, Datum, Row, RowKey, Value};
use crate::error::{Error, Result};
use crate::expr::Fault;
use crate::types::Schema;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A runtime fault of a stream function's operator on one row (see [`Emitter::fault`]).
#[derive(Clone, Debug, PartialEq)]
pub struct RowFault {
    /// The sequence number of the row being processed when it happened (with the
    /// [`RowKey::AT_END`] bit for results made at the end of an epoch or the input).
    pub seq: u64,
    /// The operator: `filter`, `project`, `aggregate`, `join`, `lookup`, ...
    pub operator: &'static str,
    /// What went wrong.
    pub fault: Fault,
}

/// Where a stream function writes its output rows.
///
/// Each row gets the [`RowKey`] that places it in the serial order: the sequence number
/// of the input row being processed (or [`RowKey::END_OF_EPOCH`] / [`RowKey::FINISH`]),
/// and the lane `partition << 32 | n`, `n` counting this call's outputs.
pub struct Emitter<'a> {
    out: &'a mut Batch,
    late: Option<&'a mut Batch>,
    faults: Option<&'a mut Vec<RowFault>>,
    seq: u64,
    partition: u32,
    sub: u32,
    epoch: u64,
}

impl<'a> Emitter<'a> {
    /// An emitter writing rows caused by input `seq` of `partition` into `out`.
    pub fn new(out: &'a mut Batch, seq: u64, partition: u32) -> Emitter<'a> {
        Emitter {
            out,
            late: None,
            faults: None,
            seq,
            partition,
            sub: 0,
            epoch: 0,
        }
    }

    /// Moves on to the outputs of input `seq` of `partition` (an engine's one emitter
    /// then serves many rows).
    #[inline]
    pub fn restart(&mut self, seq: u64, partition: u32) {
        self.seq = seq;
        self.partition = partition;
        self.sub = 0;
    }

    /// Also takes the function's late rows (see [`StreamFunctionFactory::late_schema`])
    /// into `late`, when a plan reads them.
    pub fn with_late(mut self, late: Option<&'a mut Batch>) -> Emitter<'a> {
        self.late = late;
        self
    }

    /// Takes the function's runtime faults (see [`Emitter::fault`]) into `faults`.
    pub fn with_faults(mut self, faults: &'a mut Vec<RowFault>) -> Emitter<'a> {
        self.faults = Some(faults);
        self
    }

    /// Reports that `operator` could not compute a value for the row being processed
    /// (or, at the end of an epoch or of the input, for a result): the row is skipped
    /// and the fault counted and reported, or the run fails, as the run's `on_error`
    /// says. Never lost: an emitter without a place for faults panics with it (the
    /// engine then fails the run naming the function).
    pub fn fault(&mut self, operator: &'static str, fault: Fault) {
        let f = RowFault {
            seq: self.seq,
            operator,
            fault,
        };
        match self.faults.as_deref_mut() {
            Some(v) => v.push(f),
            None => panic!("{}: {}", f.operator, f.fault),
        }
    }

    /// Where late rows go (rows of [`StreamFunctionFactory::late_schema`]), if a plan
    /// reads them; None when nobody does.
    pub fn late_rows(&mut self) -> Option<&mut Batch> {
        self.late.as_deref_mut()
    }

    /// Sets the epoch being processed (see [`Emitter::epoch`]).
    pub fn at_epoch(mut self, epoch: u64) -> Emitter<'a> {
        self.epoch = epoch;
        self
    }

    /// The epoch of the row being processed (for `end_of_epoch`, the epoch ending; for
    /// `finish`, `u64::MAX`). Epochs never go back within a partition.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The sequence number of the row being processed: its key's (for `end_of_epoch`
    /// and `finish`, [`RowKey::END_OF_EPOCH`] and [`RowKey::FINISH`]).
    /// [`RowKey::made_at_end`] tells whether an earlier stage made the row at the end of
    /// an epoch or of the input.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Emits a row under a lane of the caller's choosing instead of
    /// `partition << 32 | n`: a stream function whose output order must not depend on
    /// the partitioning (SQL queries) uses a hash of the row. `lane` must not have the
    /// [`RowKey::BROADCAST`] bit set.
    pub fn emit_with_lane(&mut self, lane: u64, values: &[Value<'_>]) {
        let key = self.lane_key(lane);
        self.out.push(key, values);
    }

    /// The key of a row emitted under `lane` (see [`Emitter::emit_with_lane`]).
    fn lane_key(&self, lane: u64) -> RowKey {
        debug_assert!(lane & RowKey::BROADCAST == 0);
        RowKey {
            seq: self.seq,
            lane: lane & !RowKey::BROADCAST,
        }
    }

    fn next_key(&mut self) -> RowKey {
        let key = RowKey {
            seq: self.seq,
            lane: RowKey::output_lane(self.partition, self.sub),
        };
        self.sub += 1;
        key
    }

    /// Emits a row of int64 values under a lane of the caller's choosing (see
    /// [`Emitter::emit_with_lane`]).
    pub fn emit_ints_with_lane(&mut self, lane: u64, values: &[i64]) {
        let key = self.lane_key(lane);
        self.out.push_ints(key, values);
    }

    /// Emits a row.
    pub fn emit(&mut self, values: &[Value<'_>]) {
        let key = self.next_key();
        self.out.push(key, values);
    }

    /// Emits a row of int64 values.
    pub fn emit_ints(&mut self, values: &[i64]) {
        let key = self.next_key();
        self.out.push_ints(key, values);
    }

    /// Emits a copy of an input row.
    pub fn emit_row(&mut self, row: Row<'_>) {
        let key = self.next_key();
        let (batch, i) = row.location();
        self.out.push_row_of(batch, i, key);
    }

    /// Emits a copy of an input row with `extra` values appended (a function whose
    /// output schema is its input's and more columns).
    pub fn emit_row_and(&mut self, row: Row<'_>, extra: &[Value<'_>]) {
        let key = self.next_key();
        self.out.start_row(key);
        for c in 0..row.arity() {
            self.out.push_value(row.get(c));
        }
        for v in extra {
            self.out.push_value(*v);
        }
    }

    /// Emits a copy of `row` under a lane of the caller's choosing (see
    /// [`Emitter::emit_with_lane`]).
    pub fn emit_row_with_lane(&mut self, lane: u64, row: Row<'_>) {
        let (batch, i) = row.location();
        let key = self.lane_key(lane);
        self.out.push_row_of(batch, i, key);
    }

    /// The partition this emitter writes for.
    pub fn partition(&self) -> u32 {
        self.partition
    }
}

/// A stateful function over one partition's sub-stream. One instance runs per logical
/// partition; it sees that partition's rows in serial order (event time, then source
/// order) and may emit any number of rows for each.
pub trait StreamFunction {
    /// Processes one input row.
    fn process(&mut self, row: Row<'_>, out: &mut Emitter<'_>);

    /// Processes rows `rows` of `batch` (ascending, all of this partition, in serial
    /// order), each as [`StreamFunction::process`] would with the emitter restarted at
    /// the row's sequence number, which is what it does unless a function overrides it
    /// to compute a window at a time.
    fn process_rows(&mut self, batch: &Batch, rows: &[u32], out: &mut Emitter<'_>) {
        process_each(self, batch, rows, out);
    }

    /// Called after the last row of `epoch` delivered to this partition, if there was one.
    fn end_of_epoch(&mut self, _epoch: u64, _out: &mut Emitter<'_>) {}

    /// Called once when the input has ended.
    fn finish(&mut self, _out: &mut Emitter<'_>) {}

    /// Called after the rows the engine hands over at once (the windows of one epoch,
    /// or of one tick under a latency constraint, or a slice of a partition's rows of
    /// them), when the factory's
    /// [`StreamFunctionFactory::holds_rows`] is true: a function that keeps rows to run
    /// them together (calling Python once for them) runs and emits them all here,
    /// each under its own key ([`Emitter::restart`]), so nothing waits for a later
    /// batch. It must also have done so by the end of every `end_of_epoch` and
    /// `finish`, where an engine that never calls this leaves it to.
    fn end_of_batch(&mut self, _out: &mut Emitter<'_>) {}

    /// Appends the instance's whole state to `out` (a checkpoint: called between
    /// epochs, after `end_of_epoch` of the checkpoint's epoch and before any row of a
    /// later one). Only called when the factory's
    /// [`StreamFunctionFactory::checkpoints`] is true.
    fn save(&self, _out: &mut Vec<u8>) -> Result<()> {
        Err(Error::NotSupported(
            "checkpoints of this stream function".into(),
        ))
    }

    /// Replaces the state of a fresh instance (`create(p, q)` with the same `p` and `q`)
    /// by what [`StreamFunction::save`] wrote; the instance then goes on as the saved one
    /// would have. Bytes it cannot read are an error, never a silently different state.
    fn restore(&mut self, _bytes: &[u8]) -> Result<()> {
        Err(Error::NotSupported(
            "checkpoints of this stream function".into(),
        ))
    }

    /// Replaces the state of a fresh instance by what [`StreamFunction::save`] wrote on
    /// another worker of the same run (run-time chaining hands partitions over so,
    /// between epochs): as [`StreamFunction::restore`], except that what the run has
    /// counted already (rows refused as late, say) must not be counted again. By default
    /// `restore`, for a function whose restore counts nothing run-wide.
    fn take_over(&mut self, bytes: &[u8]) -> Result<()> {
        self.restore(bytes)
    }

    /// Rescaling (a checkpoint restored with another partition count): adds to this
    /// instance the share of a state [`StreamFunction::save`] wrote for a partition of
    /// the old count that belongs here: every entry whose rows' route value `v` has
    /// `keep(v)` (the split sends a row of route value `v` to partition `v mod q`).
    /// Called on a fresh instance once per old partition that can hold such entries;
    /// the instance then goes on as one that had seen exactly the rows routed to it.
    /// Only called when the factory's [`StreamFunctionFactory::rescales`] is true.
    fn restore_share(&mut self, _bytes: &[u8], _keep: &dyn Fn(i64) -> bool) -> Result<()> {
        Err(Error::NotSupported(
            "restoring this stream function's state with another partition count".into(),
        ))
    }
}

/// [`StreamFunction::process`] of rows `rows` of `batch` in turn, the emitter restarted
/// at each row's sequence number: what [`StreamFunction::process_rows`] does by default,
/// and where a function that overrides it goes when its window-at-a-time path does not
/// apply.
pub fn process_each<F: StreamFunction + ?Sized>(
    f: &mut F,
    batch: &Batch,
    rows: &[u32],
    out: &mut Emitter<'_>,
) {
    let p = out.partition();
    for &i in rows {
        let i = i as usize;
        out.restart(batch.key(i).seq, p);
        f.process(batch.row(i), out);
    }
}

/// Makes the stream function instances of a `Map`.
pub trait StreamFunctionFactory: Send + Sync {
    /// The schema of the rows the function emits, given its input schema.
    fn output_schema(&self, input: &Schema) -> Result<Schema>;

    /// A new instance for logical partition `partition` of `partitions`.
    fn create(&self, partition: u32, partitions: u32) -> Box<dyn StreamFunction>;

    /// When true, every instance already created gets `end_of_epoch(e)` for every epoch
    /// `e` in which the source had rows (partitions in order), not only for epochs in
    /// which it received rows itself: windows then close at the same epoch whatever the
    /// partitioning.
    fn every_epoch(&self) -> bool {
        false
    }

    /// Whether instances keep nothing from one row to the next (no state, nothing at the
    /// end of an epoch or of the input): a row's output then depends on the row alone,
    /// whichever instance takes it. Under a latency constraint the run may then chain
    /// the stage onto the worker that reads the source at run time (its rows go to that
    /// worker's partitions, not across an exchange), and split it again.
    fn stateless(&self) -> bool {
        false
    }

    /// Whether instances keep rows to run them together and want
    /// [`StreamFunction::end_of_batch`] after each batch of rows.
    fn holds_rows(&self) -> bool {
        false
    }

    /// Whether instances implement [`StreamFunction::save`] and
    /// [`StreamFunction::restore`]: a run that takes checkpoints refuses a plan with a
    /// function that does not, by name.
    fn checkpoints(&self) -> bool {
        false
    }

    /// Whether instances implement [`StreamFunction::restore_share`]: their state is
    /// kept by key and each entry's route value can be told from it (keyed SQL
    /// state under a hash partitioning), or they hold none. A checkpoint restored with
    /// another partition count (`q`) is refused, by name, for a function that does not.
    fn rescales(&self) -> bool {
        false
    }

    /// Whether an entry of an instance's state may be in any partition, not only the
    /// one its route value names (partial aggregates under round robin, which combine
    /// later): a checkpoint restored with another partition count then gives each new
    /// partition the entries routed to it from every old one (with
    /// [`StreamFunction::restore_share`], which combines entries of equal keys).
    fn state_anywhere(&self) -> bool {
        false
    }

    /// The schema of the rows the function refuses as late, when it can refuse any
    /// (SQL queries with windows or stream joins). A plan can read them as a stream
    /// (`SourceSpec::Late`); the function writes them to [`Emitter::late_rows`].
    fn late_schema(&self) -> Option<Schema> {
        None
    }
}

/// One instance of a stateful routing function (see [`crate::router`]), for a split into
/// `partitions`
/// ([`RouterFactory::create`]). It sees every row of the stream in serial order.
pub trait Router: Send {
    /// The partition (taken modulo the split's q) of a row whose arguments evaluate to
    /// `args`, `None` to omit the row, or an error saying why there is none (the row is
    /// skipped, and the fault counted and reported, or the run fails).
    fn route(&mut self, args: &[Value<'_>]) -> std::result::Result<Option<u64>, String>;

    /// Appends the router's whole state to `out` (a checkpoint).
    fn save(&self, _out: &mut Vec<u8>) -> Result<()> {
        Err(Error::NotSupported("checkpoints of this router".into()))
    }

    /// Replaces a fresh instance's state by what [`Router::save`] wrote; bytes it cannot
    /// read are an error.
    fn restore(&mut self, _bytes: &[u8]) -> Result<()> {
        Err(Error::NotSupported("checkpoints of this router".into()))
    }
}

/// Makes the instances of a stateful routing function; registered by name
/// ([`Registry::add_router`]) and callable as a `route` of PARALLEL.
pub trait RouterFactory: Send + Sync {
    /// Checks the arguments' types: an error naming what it takes.
    fn check_args(&self, args: &[crate::types::DataType]) -> Result<()>;
    /// A new instance for a split into `partitions`.
    fn create(&self, partitions: u32) -> Box<dyn Router>;
    /// Whether instances implement [`Router::save`] and [`Router::restore`].
    fn checkpoints(&self) -> bool {
        false
    }
}

/// A routing function written in Rust: a partition for the row (taken modulo q), or
/// `None` to omit it.
pub type RouteFn = Arc<dyn Fn(Row<'_>) -> Option<u64> + Send + Sync>;

/// An associative combination of partial rows with equal keys (a keyed merge).
///
/// `combine` folds `row` into the accumulator `acc` (initially a copy of the first
/// partial row); `finish` turns the accumulator into the output row. Combiners work
/// on non-string columns.
pub trait Combiner: Send + Sync {
    /// The output schema, given the schema of partial rows.
    fn output_schema(&self, input: &Schema) -> Result<Schema>;
    /// Folds `row` into `acc`.
    fn combine(&self, acc: &mut [Datum], row: &[Datum]);
    /// Writes the final values for an accumulator.
    fn finish(&self, acc: &[Datum], out: &mut Vec<Datum>);
}

/// What a native source has next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceNext {
    /// The batch holds a window of this epoch.
    Window(u64),
    /// Nothing yet.
    Wait,
    /// The input has ended.
    Done,
}

/// One worker's share of a source written in Rust.
pub trait NativeSource {
    /// Fills `out` (empty on entry) with the next window: rows of one epoch, keyed by
    /// their sequence numbers in the serial order of the whole source.
    fn next(&mut self, out: &mut Batch) -> std::io::Result<SourceNext>;
    /// Where to start reading again to get the window [`NativeSource::next`] returned
    /// last and everything after it, exactly as this reader would have (a checkpoint
    /// keeps it); `None` when it cannot start anywhere but at its beginning.
    fn resume_point(&self) -> Option<Vec<u8>> {
        None
    }
    /// Closes the current epoch now, without data, as time moving would (a query
    /// that is to stop at the end of an epoch and has no rows coming); the new epoch,
    /// or `None` when it cannot.
    fn close_epoch(&mut self) -> std::io::Result<Option<u64>> {
        Ok(None)
    }
    /// A checkpoint holding `resume` (a [`NativeSource::resume_point`] this reader
    /// gave) has committed: a recovery reads from there on, so what comes before may
    /// go (a stream log trims it).
    fn committed(&mut self, _resume: &[u8]) {}
}

/// Makes the per-worker readers of a source written in Rust.
pub trait SourceFactory: Send + Sync {
    /// The rows' schema.
    fn schema(&self) -> Schema;
    /// The reader of global worker `worker` of `peers`, or None if it reads nothing.
    fn open(&self, worker: usize, peers: usize) -> Option<Box<dyn NativeSource>>;
    /// [`SourceFactory::open`], starting at a [`NativeSource::resume_point`] of a
    /// reader of the same source (recovery from a checkpoint). Sources that cannot be
    /// read again refuse.
    fn open_at(
        &self,
        worker: usize,
        peers: usize,
        _resume: &[u8],
    ) -> std::io::Result<Option<Box<dyn NativeSource>>> {
        let _ = (worker, peers);
        Err(std::io::Error::other(
            "this source cannot start again where a checkpoint left it",
        ))
    }
    /// Whether its readers give resume points and can be opened at them (a run with
    /// checkpoints may read it).
    fn replayable(&self) -> bool {
        false
    }
}

/// An output written by Rust code, called on worker 0 with the time since the run
/// started and the input clock (the largest epoch handed to the dataflow so far), for
/// emit stamps.
pub trait SinkFn: Send + Sync {
    /// Writes a batch of final rows.
    fn write(
        &self,
        rows: &Batch,
        since_start: std::time::Duration,
        input_epoch: u64,
    ) -> std::io::Result<()>;
    /// Flushes buffered output.
    fn flush(&self) -> std::io::Result<()>;
    /// The rows it has durably written, when it can be cut back to a count of them
    /// ([`SinkFn::truncate`]): then a run with checkpoints records the count with each
    /// checkpoint and recovery cuts the output back to it (exactly-once output).
    fn committed_rows(&self) -> Option<u64> {
        None
    }
    /// Takes back every row after the first `rows` (recovery from a checkpoint).
    fn truncate(&self, rows: u64) -> std::io::Result<()> {
        let _ = rows;
        Err(std::io::Error::other("this sink cannot take rows back"))
    }
}

/// Named user code.
#[derive(Clone, Default)]
pub struct Registry {
    functions: BTreeMap<String, Arc<dyn StreamFunctionFactory>>,
    sinks: BTreeMap<String, Arc<dyn SinkFn>>,
    sources: BTreeMap<String, Arc<dyn SourceFactory>>,
    routes: BTreeMap<String, RouteFn>,
    combiners: BTreeMap<String, Arc<dyn Combiner>>,
    routers: BTreeMap<String, Arc<dyn RouterFactory>>,
    scalars: BTreeMap<String, Arc<dyn crate::expr::ScalarUdf>>,
    languages: BTreeMap<String, Arc<dyn FunctionLanguage>>,
}

/// A scalar function declared in SQL: `CREATE FUNCTION name(arg type, ...) RETURNS type
/// LANGUAGE language AS $$ body $$`.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionDef {
    /// The function's name (lower case).
    pub name: String,
    /// Its arguments' names and types.
    pub args: Vec<(String, crate::types::DataType)>,
    /// Its result type.
    pub returns: crate::types::DataType,
    /// The language, lower case (`python`).
    pub language: String,
    /// The body, as written between the dollar quotes.
    pub body: String,
}

/// A language scalar functions can be written in from SQL (`CREATE FUNCTION ...
/// LANGUAGE name`), registered by whoever embeds Braid ([`Registry::add_language`]):
/// the `braid` command registers `python`.
pub trait FunctionLanguage: Send + Sync {
    /// The function `def` declares, or an error naming what is wrong with its body.
    fn scalar(&self, def: &FunctionDef) -> Result<Arc<dyn crate::expr::ScalarUdf>>;
}

fn unknown(kind: &str, name: &str, names: impl Iterator<Item = String>) -> Error {
    let list: Vec<String> = names.collect();
    let known = if list.is_empty() {
        "none are registered".to_string()
    } else {
        list.join(", ")
    };
    Error::Plan(format!("no {kind} named `{name}`; registered: {known}"))
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Registers a stream function.
    pub fn add_function(&mut self, name: &str, f: Arc<dyn StreamFunctionFactory>) -> &mut Self {
        self.functions.insert(name.to_ascii_lowercase(), f);
        self
    }

    /// Registers a routing function.
    pub fn add_route(&mut self, name: &str, f: RouteFn) -> &mut Self {
        self.routes.insert(name.to_ascii_lowercase(), f);
        self
    }

    /// Registers a stateful routing function (see [`crate::router`]).
    pub fn add_router(&mut self, name: &str, f: Arc<dyn RouterFactory>) -> &mut Self {
        self.routers.insert(name.to_ascii_lowercase(), f);
        self
    }

    /// A stateful routing function by name, if registered.
    pub fn router(&self, name: &str) -> Option<&Arc<dyn RouterFactory>> {
        self.routers.get(&name.to_ascii_lowercase())
    }

    /// Registers a combiner.
    pub fn add_combiner(&mut self, name: &str, c: Arc<dyn Combiner>) -> &mut Self {
        self.combiners.insert(name.to_ascii_lowercase(), c);
        self
    }

    /// Registers a sink.
    pub fn add_sink(&mut self, name: &str, s: Arc<dyn SinkFn>) -> &mut Self {
        self.sinks.insert(name.to_ascii_lowercase(), s);
        self
    }

    /// A sink by name.
    pub fn sink(&self, name: &str) -> Result<&Arc<dyn SinkFn>> {
        self.sinks
            .get(&name.to_ascii_lowercase())
            .ok_or_else(|| unknown("sink", name, self.sinks.keys().cloned()))
    }

    /// Registers a source.
    pub fn add_source(&mut self, name: &str, s: Arc<dyn SourceFactory>) -> &mut Self {
        self.sources.insert(name.to_ascii_lowercase(), s);
        self
    }

    /// A source by name.
    pub fn source(&self, name: &str) -> Result<&Arc<dyn SourceFactory>> {
        self.sources
            .get(&name.to_ascii_lowercase())
            .ok_or_else(|| unknown("source", name, self.sources.keys().cloned()))
    }

    /// A stream function by name; the error lists what exists.
    pub fn function(&self, name: &str) -> Result<&Arc<dyn StreamFunctionFactory>> {
        self.functions
            .get(&name.to_ascii_lowercase())
            .ok_or_else(|| unknown("stream function", name, self.functions.keys().cloned()))
    }

    /// A routing function by name.
    pub fn route(&self, name: &str) -> Result<&RouteFn> {
        self.routes
            .get(&name.to_ascii_lowercase())
            .ok_or_else(|| unknown("routing function", name, self.routes.keys().cloned()))
    }

    /// Registers a scalar function (callable from queries by `name`).
    pub fn add_scalar(&mut self, name: &str, f: Arc<dyn crate::expr::ScalarUdf>) -> &mut Self {
        self.scalars.insert(name.to_ascii_lowercase(), f);
        self
    }

    /// Removes a scalar function; it, if it was registered.
    pub fn remove_scalar(&mut self, name: &str) -> Option<Arc<dyn crate::expr::ScalarUdf>> {
        self.scalars.remove(&name.to_ascii_lowercase())
    }

    /// A scalar function by name, if registered.
    pub fn scalar(&self, name: &str) -> Option<&Arc<dyn crate::expr::ScalarUdf>> {
        self.scalars.get(&name.to_ascii_lowercase())
    }

    /// Names of the registered scalar functions.
    pub fn scalar_names(&self) -> Vec<String> {
        self.scalars.keys().cloned().collect()
    }

    /// Registers a language for `CREATE FUNCTION ... LANGUAGE name`.
    pub fn add_language(&mut self, name: &str, l: Arc<dyn FunctionLanguage>) -> &mut Self {
        self.languages.insert(name.to_ascii_lowercase(), l);
        self
    }

    /// A language by name; the error lists those registered.
    pub fn language(&self, name: &str) -> Result<&Arc<dyn FunctionLanguage>> {
        self.languages
            .get(&name.to_ascii_lowercase())
            .ok_or_else(|| {
                let list: Vec<String> = self.languages.keys().cloned().collect();
                Error::NotSupported(format!(
                    "LANGUAGE {name}: this build of Braid runs functions in {}",
                    match list.is_empty() {
                        true => "no language (it was built without Python)".to_string(),
                        false => list.join(", "),
                    }
                ))
            })
    }

    /// A combiner by name.
    pub fn combiner(&self, name: &str) -> Result<&Arc<dyn Combiner>> {
        self.combiners
            .get(&name.to_ascii_lowercase())
            .ok_or_else(|| unknown("combiner", name, self.combiners.keys().cloned()))
    }
}

/// Stream function `identity`: emits every input row unchanged.
pub struct Identity;

impl StreamFunctionFactory for Identity {
    fn output_schema(&self, input: &Schema) -> Result<Schema> {
        Ok(input.clone())
    }
    fn create(&self, _: u32, _: u32) -> Box<dyn StreamFunction> {
        Box::new(Identity)
    }
    fn checkpoints(&self) -> bool {
        true
    }
    fn rescales(&self) -> bool {
        true
    }
}

impl StreamFunction for Identity {
    fn process(&mut self, row: Row<'_>, out: &mut Emitter<'_>) {
        out.emit_row(row);
    }
    fn save(&self, _: &mut Vec<u8>) -> Result<()> {
        Ok(())
    }
    fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        words::<0>(bytes, "identity").map(|_| ())
    }
    fn restore_share(&mut self, bytes: &[u8], _: &dyn Fn(i64) -> bool) -> Result<()> {
        self.restore(bytes)
    }
}

/// The `N` little-endian 64-bit words a built-in function saved, or an error naming
/// `function` when `bytes` are not that.
fn words<const N: usize>(bytes: &[u8], function: &str) -> Result<[u64; N]> {
    if bytes.len() != 8 * N {
        return Err(Error::Plan(format!(
            "the saved state of `{function}` has {} bytes, not the {} it writes",
            bytes.len(),
            8 * N
        )));
    }
    let mut out = [0u64; N];
    for (i, w) in out.iter_mut().enumerate() {
        let mut b = [0u8; 8];
        b.copy_from_slice(&bytes[8 * i..8 * i + 8]);
        *w = u64::from_le_bytes(b);
    }
    Ok(out)
}

/// A stand-in for an expensive continuous query, for benchmarks and tests (not
/// registered by default; register it with the rounds wanted): `rounds` rounds of a
/// 64-bit mix per row, seeded by column 2 when it is an int64. Emits
/// `(partition, epoch, rows so far, digest)` at each epoch's end and
/// `(partition, -1, total, digest)` when input ends.
pub struct Spin(pub u32);

struct SpinState {
    rounds: u32,
    partition: i64,
    n: i64,
    acc: u64,
}

impl StreamFunctionFactory for Spin {
    fn output_schema(&self, _: &Schema) -> Result<Schema> {
        Ok(Schema::ints(&["partition", "epoch", "count", "digest"]))
    }
    fn checkpoints(&self) -> bool {
        true
    }
    fn create(&self, partition: u32, _: u32) -> Box<dyn StreamFunction> {
        Box::new(SpinState {
            rounds: self.0,
            partition: i64::from(partition),
            n: 0,
            acc: 0,
        })
    }
}

impl StreamFunction for SpinState {
    fn process(&mut self, row: Row<'_>, _: &mut Emitter<'_>) {
        let mut x = row.int(2).unwrap_or(0) as u64 ^ self.acc;
        for _ in 0..self.rounds {
            // splitmix64's finalizer.
            x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            x ^= x >> 31;
        }
        self.acc = x;
        self.n += 1;
    }
    fn end_of_epoch(&mut self, epoch: u64, out: &mut Emitter<'_>) {
        out.emit_ints(&[self.partition, epoch as i64, self.n, (self.acc >> 1) as i64]);
    }
    fn finish(&mut self, out: &mut Emitter<'_>) {
        out.emit_ints(&[self.partition, -1, self.n, (self.acc >> 1) as i64]);
    }
    fn save(&self, out: &mut Vec<u8>) -> Result<()> {
        out.extend((self.n as u64).to_le_bytes());
        out.extend(self.acc.to_le_bytes());
        Ok(())
    }
    fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        let [n, acc] = words::<2>(bytes, "spin")?;
        (self.n, self.acc) = (n as i64, acc);
        Ok(())
    }
}

/// Stream function `count`: counts its partition's rows; at each epoch's end emits
/// `(partition, epoch, rows so far)`, and `(partition, -1, total)` when input ends.
pub struct Count;

struct CountState {
    partition: i64,
    n: i64,
}

impl StreamFunctionFactory for Count {
    fn output_schema(&self, _: &Schema) -> Result<Schema> {
        Ok(Schema::ints(&["partition", "epoch", "count"]))
    }
    fn checkpoints(&self) -> bool {
        true
    }
    fn create(&self, partition: u32, _: u32) -> Box<dyn StreamFunction> {
        Box::new(CountState {
            partition: partition as i64,
            n: 0,
        })
    }
}

impl StreamFunction for CountState {
    fn process(&mut self, _: Row<'_>, _: &mut Emitter<'_>) {
        self.n += 1;
    }
    fn end_of_epoch(&mut self, epoch: u64, out: &mut Emitter<'_>) {
        out.emit_ints(&[self.partition, epoch as i64, self.n]);
    }
    fn finish(&mut self, out: &mut Emitter<'_>) {
        out.emit_ints(&[self.partition, -1, self.n]);
    }
    fn save(&self, out: &mut Vec<u8>) -> Result<()> {
        out.extend((self.n as u64).to_le_bytes());
        Ok(())
    }
    fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        let [n] = words::<1>(bytes, "count")?;
        self.n = n as i64;
        Ok(())
    }
}

impl Registry {
    /// A registry with Braid's built-in stream functions `identity` and `count`.
    pub fn with_builtins() -> Registry {
        let mut r = Registry::new();
        r.add_function("identity", Arc::new(Identity));
        r.add_function("count", Arc::new(Count));
        r
    }
}
