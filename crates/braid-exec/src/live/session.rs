//! The live session: a catalog whose streams live in Braid, and queries that run on
//! the [`Engine`] until dropped. The server's front ends are thin clients of it: they
//! hand it statements and carry out what comes back ([`Outcome`]: a tag, a listing, rows
//! to push to a subscriber, or a COPY to feed).
//!
//! Statements beyond the script language: `INSERT INTO stream VALUES ...`, `COPY
//! stream FROM STDIN`, `CREATE STREAM name AS SELECT ...` and `CREATE MATERIALIZED VIEW
//! name AS SELECT ...` (a running query whose output is a stream others read),
//! `SUBSCRIBE [TO] name`, a bare `SELECT` (a query whose rows go to the client only),
//! `COPY (SELECT | SUBSCRIBE ...) TO STDOUT`, `DROP STREAM | VIEW | MATERIALIZED VIEW`,
//! `SHOW QUERIES`, `SHOW FEEDS` (the TCP and file producers of streams, see
//! [`super::feeds`]), `EXPLAIN`.

use super::engine::{Cluster, Engine, Replicated, Status};
use super::feeds::Feed;
use super::ingest::Ingest;
pub use super::subscription::Subscription;

mod alter;
mod durable;
mod late;
mod postgres;
mod statements;
mod transaction;
use super::io::{Heartbeat, LogSink, LogSource};
use super::log::StreamLog;
use crate::error::{Error, Result};
use braid_plan::function::Registry;
use braid_plan::plan::{Plan, SinkSpec, SourceSpec};
use braid_plan::types::{DataType, Schema};
use braid_sql::catalog::{Listing, StreamDef};
use braid_sql::parse::{parse, Located, Show as ShowWhat, Statement};
use braid_sql::{Script, Show};
pub use durable::Recovered;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::Duration;
pub use transaction::Client;

/// What a statement did, for the front end to carry out.
pub enum Outcome {
    /// Done; the command tag (`CREATE STREAM`, `INSERT 0 3`, ...).
    Done(String),
    /// Rows to show (SHOW, DESCRIBE, EXPLAIN).
    Listing(Listing),
    /// One row of typed values (`SELECT 1`, `SELECT version()`): the columns and the
    /// values.
    Row(Vec<(String, DataType)>, braid_plan::batch::Batch),
    /// Rows pushed as they come (SUBSCRIBE, a streaming SELECT); asked for as `COPY
    /// (...) TO STDOUT` in this format, with a header line or not.
    Rows(Subscription, Option<(braid_sql::copy::CopyFormat, bool)>),
    /// A COPY into a stream: the front end feeds the producer's data to it.
    CopyIn(Ingest),
    /// A transaction block began (`BEGIN`): the front end reports the client in one.
    Begin,
    /// A transaction block ended; the command tag (`COMMIT`, or `ROLLBACK` for one that
    /// was rolled back).
    End(String),
}

/// A query the session installed.
pub struct LiveQuery {
    /// Its number (1-based, as SHOW QUERIES lists it).
    pub number: usize,
    /// The engine's id.
    id: u64,
    /// Its text.
    pub sql: String,
    /// What it writes: a stream, a sink, or a subscriber.
    pub writes: String,
    /// The streams it reads (lower case).
    pub reads: Vec<String>,
    /// Its counters and state.
    pub status: Arc<Status>,
    /// Dropped by a statement (or its subscriber left).
    pub dropped: bool,
    /// Its physical plan (shapes resolved) as boxes and edges.
    pub graph: Vec<braid_plan::graph::GraphNode>,
    /// Its physical plan as installed (shapes resolved), and the registry it names.
    plan: (Plan, Registry),
    /// Where it takes checkpoints, if it does.
    checkpoint: Option<crate::checkpoint::CheckpointConfig>,
    /// The stream it writes, if it writes one.
    out: Option<Arc<StreamLog>>,
}

impl LiveQuery {
    /// Its state word (`running`, `ended`, `dropped`, `failed`) and error.
    pub fn state(&self) -> (&'static str, Option<String>) {
        match (self.status.error(), self.dropped, self.status.ended()) {
            (Some(e), _, _) => ("failed", Some(e)),
            (None, true, _) => ("dropped", None),
            (None, false, true) => ("ended", None),
            (None, false, false) => ("running", None),
        }
    }
}

/// Streams that live in Braid and the queries running over them.
pub struct LiveSession {
    script: Script,
    engine: Engine,
    logs: BTreeMap<String, Arc<StreamLog>>,
    /// The TCP and file producers of streams (stopped when dropped).
    feeds: BTreeMap<String, Feed>,
    /// Streams made by a query: stream -> index in `queries`.
    made_by: BTreeMap<String, usize>,
    /// The streams of `made_by` declared as materialized views.
    views: std::collections::BTreeSet<String>,
    queries: Vec<LiveQuery>,
    dir: Option<PathBuf>,
    base: PathBuf,
    /// How long a stream may be idle before its time moves with the clock.
    pub idle: Duration,
    /// Runtime faults fail a query (else they are counted skips).
    pub strict: bool,
    /// The late-row counter of the query compiled last (its install counts with it).
    late: Option<Arc<braid_sql::run::LateRows>>,
    /// Rows the statement being run appended (`INSERT ... VALUES`), handed to its
    /// client when it ends ([`Client`]).
    appended: super::ingest::Sent,
    /// Whether the query compiled last judges lateness (a window or a join): its
    /// streams' time of unknown unit then moves with rows only ([`Heartbeat`]).
    judges_time: bool,
    /// The catalog kept on disk, and checkpoints ([`LiveSession::recover`]).
    durable: Option<durable::Durable>,
    /// A follower: where the leader's statement being run takes checkpoints.
    replicated: Option<super::engine::Checkpoints>,
    /// Where the queries' checkpoints go instead of the data directory's
    /// `checkpoints/` (object storage: every process of a cluster writes its parts
    /// there, so the processes need no shared file system); each query's under
    /// `q<id>/`. Set on every process before [`LiveSession::recover`] or
    /// [`LiveSession::follow`].
    pub checkpoint_store: Option<Arc<dyn crate::checkpoint::CheckpointBackend>>,
}

impl LiveSession {
    /// A session on `workers` worker threads; logs under `dir` (in memory only when
    /// `None`); relative paths in statements are relative to `base`.
    pub fn new(
        registry: &Registry,
        workers: usize,
        dir: Option<&Path>,
        base: &Path,
    ) -> Result<LiveSession> {
        Self::with_engine(registry, Engine::start(workers)?, dir, base)
    }

    /// A session on `workers` worker threads of this process, one of `cluster`'s.
    /// Process 0 leads: clients talk to its session, which replicates what changes the
    /// catalog or the queries. Every other process follows: it gets the receiver of
    /// those commands, to hand to [`LiveSession::follow`]; its streams hold no rows
    /// (sources and sinks run on worker 0, which is the leader's) and it starts no
    /// producers.
    pub fn in_cluster(
        registry: &Registry,
        workers: usize,
        cluster: &Cluster,
        dir: Option<&Path>,
        base: &Path,
    ) -> Result<(LiveSession, Option<Receiver<Replicated>>)> {
        let (engine, follow) = Engine::start_in(workers, Some(cluster))?;
        let dir = if follow.is_some() { None } else { dir };
        Ok((Self::with_engine(registry, engine, dir, base)?, follow))
    }

    /// Applies the leader's commands as they come, until the leader goes away. A
    /// statement that found this session in another state than the leader's (its
    /// query ids differ) is an error: the cluster cannot go on.
    pub fn follow(&mut self, commands: Receiver<Replicated>) -> Result<()> {
        for c in commands {
            self.replay(c)?;
        }
        Ok(())
    }

    /// Applies one of the leader's commands.
    pub fn replay(&mut self, command: Replicated) -> Result<()> {
        match command {
            Replicated::Drop(id) => self.engine.drop_query(id),
            Replicated::Statement {
                text,
                first_id,
                checkpoints,
            } => {
                if self.engine.next_id() != first_id {
                    return Err(Error::Internal(format!(
                        "this process's queries differ from the leader's (next id {} here, {first_id} there) before `{}`",
                        self.engine.next_id(),
                        text.trim()
                    )));
                }
                if checkpoints.as_ref().is_some_and(|c| c.object.is_some())
                    && self.checkpoint_store.is_none()
                {
                    return Err(Error::Internal(format!(
                        "the leader keeps its checkpoints in object storage and this process was given none (before `{}`): start every process of the cluster with the same --checkpoints",
                        text.trim()
                    )));
                }
                // Its outcome was the leader's to report; a subscription made here
                // (a SELECT's) ends when the leader's drop comes.
                self.replicated = checkpoints;
                let outcomes = self.execute(&text);
                self.replicated = None;
                for outcome in outcomes.into_iter().flatten() {
                    if let Outcome::Rows(mut sub, _) = outcome {
                        sub.drop = None;
                    }
                }
                Ok(())
            }
        }
    }

    fn with_engine(
        registry: &Registry,
        engine: Engine,
        dir: Option<&Path>,
        base: &Path,
    ) -> Result<LiveSession> {
        let mut script = Script {
            catalog: Default::default(),
            jobs: Vec::new(),
            registry: registry.clone(),
            shown: Vec::new(),
        };
        script.catalog.live = true;
        Ok(LiveSession {
            script,
            engine,
            logs: BTreeMap::new(),
            feeds: BTreeMap::new(),
            made_by: BTreeMap::new(),
            views: Default::default(),
            queries: Vec::new(),
            dir: dir.map(|d| d.join("streams")),
            base: base.to_path_buf(),
            idle: Duration::from_millis(50),
            strict: false,
            late: None,
            appended: Default::default(),
            judges_time: false,
            durable: None,
            replicated: None,
            checkpoint_store: None,
        })
    }

    /// The queries installed so far.
    pub fn queries(&self) -> &[LiveQuery] {
        &self.queries
    }

    /// The streams living in Braid, by name.
    pub fn streams(&self) -> impl Iterator<Item = (&String, &Arc<StreamLog>)> {
        self.logs.iter()
    }

    /// The number of the query making stream `name`, if a query makes it.
    pub fn made_by(&self, name: &str) -> Option<usize> {
        self.made_by
            .get(&name.to_ascii_lowercase())
            .map(|&q| self.queries[q].number)
    }

    /// Worker threads over all processes.
    pub fn workers(&self) -> usize {
        self.engine.workers()
    }

    /// The log of stream `name`.
    pub fn log(&self, name: &str) -> Option<&Arc<StreamLog>> {
        self.logs.get(&name.to_ascii_lowercase())
    }

    /// The TCP and file producers of stream `name`, if it has any.
    pub fn feed(&self, name: &str) -> Option<&Feed> {
        self.feeds.get(&name.to_ascii_lowercase())
    }

    /// Runs the statements of `text` in order; stops at the first that fails (its
    /// error is the last item).
    pub fn execute(&mut self, text: &str) -> Vec<Result<Outcome>> {
        self.execute_in(text, &mut Client::default())
    }

    /// [`LiveSession::execute`] for `client` (its transaction block, if it has one
    /// open, and the rows it sent: see [`Client`]).
    pub fn execute_in(&mut self, text: &str, client: &mut Client) -> Vec<Result<Outcome>> {
        match parse(text) {
            Ok(statements) => self.run_in(text, statements, client),
            Err(e) => {
                client.fail();
                vec![Err(e.into())]
            }
        }
    }

    /// Runs parsed `statements` (of `text`, which their positions point into) for
    /// `client`, in order; stops at the first that fails (its error is the last item).
    pub fn run_in(
        &mut self,
        text: &str,
        statements: Vec<Located<Statement>>,
        client: &mut Client,
    ) -> Vec<Result<Outcome>> {
        let mut out = Vec::new();
        for st in statements {
            let r = match self.in_transaction(text, &st, client) {
                Some(r) => r,
                None => match self.postgres(text, &st, client) {
                    Some(r) => r,
                    None => {
                        let first_id = self.engine.next_id();
                        self.durable_begin(text, &st);
                        let mut r = self.statement(text, &st);
                        client.sent.extend(std::mem::take(&mut self.appended));
                        let checkpoints = self.replicated_checkpoints();
                        if let Err(e) = self.durable_end(&st, r.is_ok()) {
                            r = Err(e);
                        }
                        if let Err(e) = self.replicate(text, &st, first_id, r.is_ok(), checkpoints)
                        {
                            out.push(Err(e));
                            break;
                        }
                        r
                    }
                },
            };
            let failed = r.is_err();
            out.push(r);
            if failed {
                client.fail();
                break;
            }
        }
        out
    }

    /// The followers of a cluster run what changed the catalog or the queries (also a
    /// failed statement that installed a query before failing), its query taking
    /// checkpoints where the leader's does.
    fn replicate(
        &mut self,
        text: &str,
        st: &Located<Statement>,
        first_id: u64,
        ok: bool,
        checkpoints: Option<super::engine::Checkpoints>,
    ) -> Result<()> {
        if self.engine.leads()
            && replicates(&st.statement)
            && (ok || self.engine.next_id() != first_id)
        {
            let text = st.text(text);
            self.engine.replicate(Replicated::Statement {
                text,
                first_id,
                checkpoints,
            })?;
        }
        Ok(())
    }

    /// The columns a statement's result will have, without running it (what a client's
    /// `Describe` asks before `Execute`): the query's output for SELECT, the stream's
    /// columns for SUBSCRIBE, the listing's header for SHOW, DESCRIBE and EXPLAIN (run:
    /// they change nothing); `None` for a statement that returns no rows (COPY among
    /// them: it has its own response).
    pub fn describe(&mut self, text: &str) -> Result<Option<Vec<(String, DataType)>>> {
        let Some(st) = parse(text)?.into_iter().next() else {
            return Ok(None);
        };
        self.describe_parsed(text, &st)
    }

    /// [`LiveSession::describe`] of a parsed statement (parameters bound).
    pub fn describe_parsed(
        &mut self,
        text: &str,
        st: &Located<Statement>,
    ) -> Result<Option<Vec<(String, DataType)>>> {
        // PostgreSQL's own (SELECT 1, SHOW server_version): run, they change nothing
        // (a SET goes to a client of its own, thrown away).
        if let Some(r) = self.postgres(text, st, &mut Client::default()) {
            return Ok(match r? {
                Outcome::Listing(l) => Some(columns_of(l)),
                Outcome::Row(columns, _) => Some(columns),
                _ => None,
            });
        }
        match &st.statement {
            Statement::Subscribe(s) => Ok(Some(self.subscribe_to(text, s)?.columns.clone())),
            Statement::Query(q) => {
                let jobs = self.script.jobs.len();
                let compiled = self.compile_query(text, q);
                self.script.jobs.truncate(jobs);
                Ok(Some(columns(&compiled?.2)))
            }
            Statement::Show(_)
            | Statement::Describe(_)
            | Statement::Explain(_)
            | Statement::ExplainAnalyze(_) => match self.statement(text, st)? {
                Outcome::Listing(l) => Ok(Some(columns_of(l))),
                _ => Ok(None),
            },
            _ => Ok(None),
        }
    }

    /// One statement: the server's own here, the script language's by
    /// [`LiveSession::script_statement`].
    fn statement(&mut self, text: &str, st: &Located<Statement>) -> Result<Outcome> {
        match &st.statement {
            Statement::Subscribe(s) => self.subscribe_to(text, s).map(|s| Outcome::Rows(s, None)),
            Statement::CopyOut(c) => {
                let sub = match &c.inner {
                    Statement::Subscribe(s) => self.subscribe_to(text, s)?,
                    Statement::Query(q) => self.select(text, q)?,
                    _ => return Err(plan_error("COPY (query) TO STDOUT takes a query")),
                };
                Ok(Outcome::Rows(sub, Some((c.format, c.header))))
            }
            Statement::CopyIn(c) => self.copy_in(c),
            Statement::Query(q) => self.select(text, q).map(|s| Outcome::Rows(s, None)),
            Statement::CreateAs(c) => self.create_as(text, c),
            Statement::Insert(ins) => match self.log(&ins.table.to_string()).cloned() {
                Some(log) => self.insert(text, st, ins, log),
                None => self.script_statement(text, st),
            },
            Statement::Drop(d) => match self.drop_live(d)? {
                Some(o) => Ok(o),
                None => self.script_statement(text, st),
            },
            Statement::DropQuery(n) => self.drop_query(*n),
            Statement::Alter(a) => self.alter(a),
            Statement::Show(ShowWhat::Feeds) => {
                Ok(Outcome::Listing(super::feeds::listing(&self.feeds)))
            }
            Statement::Show(ShowWhat::Queries) => Ok(Outcome::Listing(self.queries_listing())),
            Statement::Show(ShowWhat::Views) => Ok(Outcome::Listing(self.views_listing())),
            Statement::ExplainAnalyze(n) => self.explain_analyze(*n),
            Statement::Explain(inner) => self.explain(text, st, inner),
            _ => self.script_statement(text, st),
        }
    }

    /// A statement of the script language: declarations, SET, SHOW, DESCRIBE, DROP,
    /// `INSERT INTO sink SELECT` (installed, running until dropped).
    fn script_statement(&mut self, text: &str, st: &Located<Statement>) -> Result<Outcome> {
        let (jobs, shown) = (self.script.jobs.len(), self.script.shown.len());
        let before: Vec<String> = self.script.catalog.streams.keys().cloned().collect();
        braid_sql::run_statement(&mut self.script, text, &self.base, st)?;
        if self.script.catalog.settings.tune_window {
            self.script.catalog.settings.tune_window = false;
            return Err(Error::Plan(braid_plan::error::Error::NotSupported(
                "SET window = 'auto' in the server: W is chosen by trial runs that read the \
                 input again, and a live stream's rows are read once; give a stream its \
                 window (CREATE STREAM ... WITH (window = ...))"
                    .into(),
            )));
        }
        if let Some(s) = self.script.shown.get(shown) {
            return Ok(Outcome::Listing(match &s.what {
                Show::Listings(l) => l.first().cloned().unwrap_or(Listing {
                    header: Vec::new(),
                    rows: Vec::new(),
                }),
                Show::Queries => self.queries_listing(),
            }));
        }
        if self.script.jobs.len() > jobs {
            self.late = Some(self.script.jobs[jobs].late.clone());
            let job = self.script.jobs[jobs].clone_parts();
            // `INSERT INTO sink ...`: the sink by name, as SHOW SINKS lists it.
            let sink = match &st.statement {
                Statement::Insert(i) if matches!(job.1, Plan::Sink(_)) => {
                    Some(format!("sink {}", i.table.to_string().to_ascii_lowercase()))
                }
                _ => None,
            };
            let writes = sink.unwrap_or_else(|| "sinks".into());
            self.install(job.0, job.1, writes, None, true)?;
            return Ok(Outcome::Done("INSERT 0 0".into()));
        }
        // New streams that live in Braid get their logs.
        let new: Vec<String> = self
            .script
            .catalog
            .streams
            .keys()
            .filter(|k| !before.contains(k))
            .cloned()
            .collect();
        for name in new {
            let def = self.script.catalog.streams[&name].clone();
            if matches!(&def.source.spec, SourceSpec::Native(n) if n.starts_with("log:")) {
                let schema = def.source.schema.clone();
                let log = match self.recovering() {
                    true => StreamLog::open(&name, schema, self.dir.as_deref())?,
                    false => StreamLog::create(&name, schema, self.dir.as_deref())?,
                };
                // A follower's streams hold no rows: the leader runs the producers.
                let feeds = match self.engine.follows() {
                    true => Default::default(),
                    false => def.feeds.clone(),
                };
                // A tailed file is read on from where the tail stood when the
                // stream's last append from it was written.
                let tail_from = match (self.recovering(), &feeds.tail) {
                    (true, Some(_)) => match super::feeds::tail_resume(&log) {
                        Ok(at) => Some(at),
                        Err(e) => {
                            self.script.catalog.streams.remove(&name);
                            log.close();
                            return Err(e);
                        }
                    },
                    _ => None,
                };
                match Feed::start(&feeds, &log, tail_from) {
                    Ok(None) => {}
                    Ok(Some(feed)) => {
                        self.feeds.insert(name.clone(), feed);
                    }
                    Err(e) => {
                        self.script.catalog.streams.remove(&name);
                        log.close();
                        return Err(e);
                    }
                }
                log.set_retention(def.feeds.retention);
                self.add_log(name, &def, log);
            }
        }
        Ok(Outcome::Done(st.statement.tag()))
    }

    /// Installs `plan` (its sink retargeted to `out` when given) as query `sql`;
    /// `durable`: it runs until dropped and writes what no one else writes, so it
    /// takes checkpoints when the session keeps its catalog.
    fn install(
        &mut self,
        sql: String,
        mut plan: Plan,
        writes: String,
        out: Option<Arc<StreamLog>>,
        durable: bool,
    ) -> Result<Arc<Status>> {
        let mut registry = self.script.registry.clone();
        let reads = reads(&plan);
        if let Some(log) = &out {
            let Plan::Sink(sink) = &mut plan else {
                return Err(Error::Plan(braid_plan::error::Error::NotSupported(
                    "a query with several outputs (LATE) in the server".into(),
                )));
            };
            let name = format!("out:{}", log.name());
            registry.add_sink(&name, Arc::new(LogSink { log: log.clone() }));
            sink.spec = SinkSpec::Native(name);
            sink.header = false;
        }
        let closes: Vec<Arc<StreamLog>> = out.iter().cloned().collect();
        let mut checkpoint = durable.then(|| self.durable_checkpoint()).flatten();
        // The parallelism an ALTER set before a restart.
        if let Some(q) = checkpoint.as_ref().and_then(|_| self.durable_partitions()) {
            let asked = crate::rescale::Request::Partitions(q);
            if let Ok(shape) = crate::rescale::spec(
                &plan,
                &registry,
                (self.engine.workers(), self.engine.workers()),
                &asked,
            ) {
                plan = crate::rescale::apply(&plan, &shape);
            }
        }
        // Readers of its own: a checkpointed query's journal the epochs they close for
        // want of rows (a follower's sources read nothing: worker 0, the leader's, reads
        // the streams; so only the leader makes the directory), and where it judges
        // lateness, time of unknown unit moves with rows only.
        let judges_time = std::mem::take(&mut self.judges_time);
        if let Some(cfg) = &checkpoint {
            if !self.engine.follows() {
                std::fs::create_dir_all(&cfg.dir)
                    .map_err(|e| Error::io(format!("creating {}", cfg.dir.display()), e))?;
            }
        }
        if checkpoint.is_some() || judges_time {
            for stream in &reads {
                if let Some(log) = self.logs.get(stream) {
                    let def = &self.script.catalog.streams[stream];
                    let ticks = checkpoint
                        .as_ref()
                        .map(|cfg| cfg.dir.join(format!("ticks-{stream}.log")));
                    let source = self.log_source(def, log, ticks, !judges_time);
                    registry.add_source(&format!("log:{stream}"), source);
                }
            }
        }
        let installed = match &checkpoint {
            Some(cfg) => {
                match self
                    .engine
                    .install(&plan, &registry, self.strict, closes.clone(), Some(cfg))
                {
                    // Never a declared object dropped for it: the query starts over
                    // from its inputs' start, its output stream emptied first (it is
                    // made again), and the note says so loudly.
                    Err(Error::UnusableCheckpoint(why)) if cfg.recover => {
                        self.durable_note(format!(
                            "`{}` could not resume: {why}; it was started over from its inputs' start and its output made again",
                            sql.trim()
                        ));
                        for log in &closes {
                            log.truncate(log.first_row())?;
                        }
                        let mut fresh = cfg.clone();
                        fresh.recover = false;
                        let r = self.engine.install(
                            &plan,
                            &registry,
                            self.strict,
                            closes.clone(),
                            Some(&fresh),
                        );
                        checkpoint = Some(fresh);
                        r
                    }
                    Err(Error::Plan(braid_plan::error::Error::NotSupported(why))) => {
                        self.durable_note(format!(
                        "`{}` takes no checkpoints ({why}): after a restart it starts again from its input's start",
                        sql.trim()
                    ));
                        checkpoint = None;
                        self.engine
                            .install(&plan, &registry, self.strict, closes, None)
                    }
                    r => r,
                }
            }
            None => self
                .engine
                .install(&plan, &registry, self.strict, closes, None),
        };
        let (id, status, prepared) = installed?;
        if let Some(late) = self.late.take() {
            let c = &status.shared.counters;
            c.late_rows
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(late);
        }
        let graph = braid_plan::graph::graph(&prepared, &registry, self.engine.workers());
        self.durable_installed(self.queries.len() + 1);
        self.queries.push(LiveQuery {
            number: self.queries.len() + 1,
            id,
            sql,
            writes,
            reads,
            status: status.clone(),
            dropped: false,
            graph,
            plan: (prepared, registry),
            checkpoint,
            out,
        });
        Ok(status)
    }

    /// Keeps `log` as stream `name` (declared as `def`): queries read it through the
    /// source `log:<name>`.
    fn add_log(&mut self, name: String, def: &StreamDef, log: Arc<StreamLog>) {
        let source = self.log_source(def, &log, None, true);
        self.script
            .registry
            .add_source(&format!("log:{name}"), source);
        self.logs.insert(name, log);
    }

    /// The reader of stream `def`'s `log` a query's source opens; journaling the
    /// epochs it closes in `ticks` (a checkpointed query's).
    fn log_source(
        &self,
        def: &StreamDef,
        log: &Arc<StreamLog>,
        ticks: Option<PathBuf>,
        close_unknown: bool,
    ) -> Arc<LogSource> {
        // A checkpointed query's readers share one hold, kept across them.
        let hold = ticks.as_ref().map(|_| log.hold(log.first_row()));
        Arc::new(LogSource {
            log: log.clone(),
            source: def.source.clone(),
            heartbeat: Some(heartbeat(def, self.idle, close_unknown)),
            ticks,
            hold,
        })
    }

    /// Compiles a query (`SELECT ...`) on its own into a job; returns its text, plan and
    /// output columns. The job is not kept in the script.
    fn compile_query(
        &mut self,
        text: &str,
        q: &braid_sql::parse::Query,
    ) -> Result<(String, Plan, Schema)> {
        let jobs = self.script.jobs.len();
        braid_sql::add_query(&mut self.script, text, q)?;
        if self.script.jobs.len() != jobs + 1 {
            self.script.jobs.truncate(jobs);
            return Err(Error::Plan(braid_plan::error::Error::Plan(
                "expected one query".into(),
            )));
        }
        if let Some(why) = self.script.jobs[jobs]
            .logical
            .as_ref()
            .and_then(|l| self.never_answers(l))
        {
            self.script.jobs.truncate(jobs);
            return Err(Error::Plan(braid_plan::error::Error::NotSupported(why)));
        }
        self.late = Some(self.script.jobs[jobs].late.clone());
        self.judges_time = self.script.jobs[jobs]
            .logical
            .as_ref()
            .is_some_and(judges_time);
        let job = self.script.jobs[jobs].clone_parts();
        let job = (job.0, job.1);
        let schema = match &job.1 {
            Plan::Sink(s) => s.input.schema(&self.script.registry)?,
            _ => {
                return Err(Error::Plan(braid_plan::error::Error::NotSupported(
                    "a query with several outputs (LATE) in the server".into(),
                )))
            }
        };
        Ok((job.0, job.1, schema))
    }
}

impl LiveSession {
    /// Why query `l` would never answer, if it would: an aggregate without a window
    /// (`GROUP BY k` alone, `SELECT DISTINCT`, a global `count(*)`) gives one result per
    /// key when its input ends, and a stream that lives in the server does not end until
    /// it is dropped.
    fn never_answers(&self, l: &braid_sql::logical::Logical) -> Option<String> {
        use braid_sql::logical::{Logical, WindowSpec};
        fn scans<'a>(l: &'a Logical, out: &mut Vec<&'a str>) {
            if let Logical::Scan { stream, .. } = l {
                out.push(stream);
            }
            for c in l.children() {
                scans(c, out);
            }
        }
        fn unbounded(l: &Logical) -> bool {
            matches!(
                l,
                Logical::Aggregate {
                    window: WindowSpec::Unbounded,
                    ..
                }
            ) || l.children().into_iter().any(unbounded)
        }
        if !unbounded(l) {
            return None;
        }
        let mut names = Vec::new();
        scans(l, &mut names);
        let live = names
            .into_iter()
            .find(|n| self.log(n).is_some_and(|log| !log.is_closed()))?;
        Some(format!(
            "an aggregate without a window (GROUP BY keys alone, SELECT DISTINCT, or an aggregate of the whole input) over stream `{live}`, which lives in the server and does not end: it would give one result per key when its input ends, so never. Group by a window of event time instead: GROUP BY TUMBLE(time, size), keys (or HOP, CUMULATE, SESSION, or ROWS(n) for windows of rows). Results that update as rows arrive are not built yet"
        ))
    }
}

/// Whether the followers of a cluster run statement `st` too: all but those that only
/// read, and those that only add rows (rows live on the leader). A SELECT installs a
/// query (`COPY (query) TO STDOUT` too), so it is run everywhere.
fn replicates(st: &Statement) -> bool {
    !(st.reads()
        || st.inserts_values()
        || matches!(
            st,
            Statement::CopyIn(_) | Statement::Begin | Statement::Commit | Statement::Rollback
        ))
}

/// A job's text and plan.
trait CloneParts {
    fn clone_parts(&self) -> (String, Plan);
}

impl CloneParts for braid_sql::Job {
    fn clone_parts(&self) -> (String, Plan) {
        (self.sql.clone(), self.plan.clone())
    }
}

/// The streams living in Braid that `plan` reads (lower case).
fn reads(plan: &Plan) -> Vec<String> {
    let source = plan.leaf_source();
    let all: Vec<&braid_plan::plan::Source> = match &source.spec {
        SourceSpec::Interleave(kids) => kids.iter().collect(),
        _ => vec![source],
    };
    all.iter()
        .filter_map(|s| match &s.spec {
            SourceSpec::Native(n) => n.strip_prefix("log:").map(String::from),
            _ => None,
        })
        .collect()
}

/// How time moves on `def` when idle.
fn heartbeat(def: &StreamDef, idle: Duration, close_unknown: bool) -> Heartbeat {
    Heartbeat {
        idle,
        units_per_second: def.time_unit.map(|u| u.per_second()),
        close_unknown,
    }
}

/// Whether query `l` judges lateness: an aggregate over a window of event time, or a
/// join of two streams (their state closes with event time).
fn judges_time(l: &braid_sql::logical::Logical) -> bool {
    use braid_sql::logical::{Logical, WindowSpec};
    let own = match l {
        Logical::Aggregate { window, .. } => {
            !matches!(window, WindowSpec::Unbounded | WindowSpec::Count { .. })
        }
        Logical::Join { .. } => true,
        _ => false,
    };
    own || l.children().into_iter().any(judges_time)
}

fn columns(schema: &Schema) -> Vec<(String, DataType)> {
    schema
        .fields
        .iter()
        .map(|f| (f.name.clone(), f.ty))
        .collect()
}

fn plan_error(message: &str) -> Error {
    Error::Plan(braid_plan::error::Error::Plan(message.to_string()))
}

/// A listing's columns: text, as its rows are.
fn columns_of(l: Listing) -> Vec<(String, DataType)> {
    l.header
        .into_iter()
        .map(|h| (h, DataType::String))
        .collect()
}
