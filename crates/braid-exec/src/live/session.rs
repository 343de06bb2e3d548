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

use super::engine::{Engine, Status};
use super::feeds::Feed;
use super::ingest::{self, Format, Ingest};
use super::io::{Heartbeat, LogSink, LogSource};
use super::log::StreamLog;
use crate::error::{Error, Result};
use braid_plan::function::Registry;
use braid_plan::plan::{Plan, SinkSpec, SourceSpec};
use braid_plan::types::{DataType, Schema};
use braid_sql::catalog::{Listing, StreamDef};
use braid_sql::split::{alone, statements, Lead, Piece};
use braid_sql::{add_statements, Script, Show};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// What a statement did, for the front end to carry out.
pub enum Outcome {
    /// Done; the command tag (`CREATE STREAM`, `INSERT 0 3`, ...).
    Done(String),
    /// Rows to show (SHOW, DESCRIBE, EXPLAIN).
    Listing(Listing),
    /// Rows pushed as they come (SUBSCRIBE, a streaming SELECT); `copy`: asked for as
    /// `COPY (...) TO STDOUT`.
    Rows(Subscription, bool),
    /// A COPY into a stream: the front end feeds the producer's data to it.
    CopyIn(Ingest),
}

/// A reader of a stream's log from an offset; a private query (a bare SELECT) is
/// dropped with it.
pub struct Subscription {
    /// Column names and types.
    pub columns: Vec<(String, DataType)>,
    /// The stream read.
    pub log: Arc<StreamLog>,
    /// The next batch to read.
    pub offset: usize,
    /// Rows read so far.
    pub read: u64,
    /// The query making the rows, when it is the subscriber's own.
    pub status: Option<Arc<Status>>,
    drop: Option<Box<dyn FnOnce() + Send>>,
}

impl Subscription {
    /// The next batch of rows, waking `cx` when one comes; `Ready(None)` once the
    /// stream has ended (dropped, or its query ended) and everything was read.
    pub fn poll_next(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Arc<braid_plan::batch::Batch>>> {
        let r = self.log.poll_read(self.offset, cx);
        if let std::task::Poll::Ready(Some(b)) = &r {
            self.offset += 1;
            self.read += b.len() as u64;
        }
        r
    }

    /// The next batch if there is one now; `Err(true)` once the stream has ended and
    /// everything was read, `Err(false)` when nothing is there yet.
    pub fn try_next(&mut self) -> std::result::Result<Arc<braid_plan::batch::Batch>, bool> {
        match self.log.read(self.offset) {
            super::log::Read::Batch(b) => {
                self.offset += 1;
                self.read += b.len() as u64;
                Ok(b)
            }
            super::log::Read::Closed => Err(true),
            super::log::Read::Idle(..) => Err(false),
        }
    }

    /// Rows in the stream this subscriber has not read yet.
    pub fn behind(&self) -> u64 {
        self.log.rows().saturating_sub(self.read)
    }

    /// The error the query making the rows failed with, if it did.
    pub fn error(&self) -> Option<String> {
        self.status.as_ref().and_then(|s| s.error())
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(d) = self.drop.take() {
            d();
        }
    }
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
    queries: Vec<LiveQuery>,
    dir: Option<PathBuf>,
    base: PathBuf,
    /// How long a stream may be idle before its time moves with the clock.
    pub idle: Duration,
    /// Runtime faults fail a query (else they are counted skips).
    pub strict: bool,
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
        let mut script = Script {
            catalog: Default::default(),
            jobs: Vec::new(),
            registry: registry.clone(),
            shown: Vec::new(),
        };
        script.catalog.live = true;
        Ok(LiveSession {
            script,
            engine: Engine::start(workers)?,
            logs: BTreeMap::new(),
            feeds: BTreeMap::new(),
            made_by: BTreeMap::new(),
            queries: Vec::new(),
            dir: dir.map(|d| d.join("streams")),
            base: base.to_path_buf(),
            idle: Duration::from_millis(50),
            strict: false,
        })
    }

    /// The queries installed so far.
    pub fn queries(&self) -> &[LiveQuery] {
        &self.queries
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
        let Some(pieces) = statements(text) else {
            // Text that does not tokenize: the parser words the error.
            return vec![self.script_statement(text)];
        };
        let mut out = Vec::new();
        for p in pieces {
            let r = self.statement(text, &p);
            let failed = r.is_err();
            out.push(r);
            if failed {
                break;
            }
        }
        out
    }

    /// The columns a statement's result will have, without running it (what a client's
    /// `Describe` asks before `Execute`): the query's output for SELECT, the stream's
    /// columns for SUBSCRIBE, the listing's header for SHOW, DESCRIBE and EXPLAIN (run:
    /// they change nothing); `None` for a statement that returns no rows (COPY among
    /// them: it has its own response).
    pub fn describe(&mut self, text: &str) -> Result<Option<Vec<(String, DataType)>>> {
        let Some(p) = statements(text).and_then(|v| v.into_iter().next()) else {
            return Ok(None);
        };
        let own = alone(text, p.range.clone());
        if p.starts_with(&["SUBSCRIBE"]) {
            let k = if p.word(1) == Some("TO") { 2 } else { 1 };
            let sub = self.subscribe(p.word(k).unwrap_or(""), false)?;
            return Ok(Some(sub.columns.clone()));
        }
        if p.starts_with(&["SELECT"]) || p.starts_with(&["WITH"]) {
            let jobs = self.script.jobs.len();
            let compiled = self.compile_query(&own);
            self.script.jobs.truncate(jobs);
            return Ok(Some(columns(&compiled?.2)));
        }
        let listing = ["SHOW", "DESCRIBE", "EXPLAIN"]
            .iter()
            .any(|w| p.starts_with(&[w]));
        if !listing {
            return Ok(None);
        }
        match self.statement(text, &p)? {
            Outcome::Listing(l) => Ok(Some(
                l.header
                    .into_iter()
                    .map(|h| (h, DataType::String))
                    .collect(),
            )),
            _ => Ok(None),
        }
    }

    fn statement(&mut self, text: &str, p: &Piece) -> Result<Outcome> {
        let own = alone(text, p.range.clone());
        if p.starts_with(&["SUBSCRIBE"]) {
            let k = if p.word(1) == Some("TO") { 2 } else { 1 };
            return self
                .subscribe(p.word(k).unwrap_or(""), false)
                .map(|s| Outcome::Rows(s, false));
        }
        if p.starts_with(&["COPY"]) {
            return self.copy(text, p);
        }
        if p.starts_with(&["SELECT"]) || p.starts_with(&["WITH"]) {
            return self.select(&own).map(|s| Outcome::Rows(s, false));
        }
        if p.starts_with(&["CREATE", "MATERIALIZED", "VIEW"]) {
            return self.create_as(&own, p, 3);
        }
        if p.starts_with(&["CREATE", "STREAM"])
            && p.tokens.iter().any(|(t, _)| *t == Lead::Word("AS".into()))
        {
            return self.create_as(&own, p, 2);
        }
        if p.starts_with(&["INSERT", "INTO"]) {
            if let Some(log) = p.word(2).and_then(|n| self.log(n)).cloned() {
                return self.insert(&own, p, log);
            }
        }
        if p.starts_with(&["DROP"]) {
            if let Some(o) = self.drop_live(p)? {
                return Ok(o);
            }
        }
        if p.starts_with(&["SHOW", "FEEDS"]) {
            return Ok(Outcome::Listing(super::feeds::listing(&self.feeds)));
        }
        if p.starts_with(&["SHOW", "QUERIES"]) {
            return Ok(Outcome::Listing(self.queries_listing()));
        }
        if p.starts_with(&["EXPLAIN"]) {
            return self.explain(&own, p);
        }
        self.script_statement(&own)
    }

    /// A statement of the script language: declarations, SET, SHOW, DESCRIBE, DROP,
    /// `INSERT INTO sink SELECT` (installed, running until dropped).
    fn script_statement(&mut self, text: &str) -> Result<Outcome> {
        let (jobs, shown) = (self.script.jobs.len(), self.script.shown.len());
        let before: Vec<String> = self.script.catalog.streams.keys().cloned().collect();
        add_statements(&mut self.script, text, &self.base)?;
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
            let job = self.script.jobs[jobs].clone_parts();
            let writes = match &job.1 {
                Plan::Sink(s) => format!("{:?}", s.spec),
                _ => "sinks".into(),
            };
            self.install(job.0, job.1, writes, None)?;
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
                let log = StreamLog::create(&name, def.source.schema.clone(), self.dir.as_deref())?;
                match Feed::start(&def.feeds, &log) {
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
                self.add_log(name, &def, log);
            }
        }
        Ok(Outcome::Done(tag_of(text)))
    }

    /// Installs `plan` (its sink retargeted to `out` when given) as query `sql`.
    fn install(
        &mut self,
        sql: String,
        mut plan: Plan,
        writes: String,
        out: Option<Arc<StreamLog>>,
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
        let closes: Vec<Arc<StreamLog>> = out.into_iter().collect();
        let (id, status) = self.engine.install(&plan, &registry, self.strict, closes)?;
        self.queries.push(LiveQuery {
            number: self.queries.len() + 1,
            id,
            sql,
            writes,
            reads,
            status: status.clone(),
            dropped: false,
        });
        Ok(status)
    }

    /// Keeps `log` as stream `name` (declared as `def`): queries read it through the
    /// source `log:<name>`.
    fn add_log(&mut self, name: String, def: &StreamDef, log: Arc<StreamLog>) {
        let source = Arc::new(LogSource {
            log: log.clone(),
            from: 0,
            source: def.source.clone(),
            heartbeat: Some(heartbeat(def, self.idle)),
        });
        self.script
            .registry
            .add_source(&format!("log:{name}"), source);
        self.logs.insert(name, log);
    }

    /// Compiles a query (`SELECT ...`) on its own into a job; returns its text, plan and
    /// output columns. The job is not kept in the script.
    fn compile_query(&mut self, text: &str) -> Result<(String, Plan, Schema)> {
        let jobs = self.script.jobs.len();
        add_statements(&mut self.script, text, &self.base)?;
        if self.script.jobs.len() != jobs + 1 {
            self.script.jobs.truncate(jobs);
            return Err(Error::Plan(braid_plan::error::Error::Plan(
                "expected one query".into(),
            )));
        }
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

    /// A bare SELECT: a private query whose rows go to this subscriber only.
    fn select(&mut self, text: &str) -> Result<Subscription> {
        let (sql, plan, schema) = self.compile_query(text)?;
        let n = self.queries.len() + 1;
        let log = StreamLog::create(&format!("select{n}"), schema.clone(), None)?;
        let status = self.install(sql, plan, "subscriber".into(), Some(log.clone()))?;
        let (senders, id) = (self.engine.dropper(), self.queries[n - 1].id);
        Ok(Subscription {
            columns: columns(&schema),
            log,
            offset: 0,
            read: 0,
            status: Some(status),
            drop: Some(Box::new(move || senders(id))),
        })
    }

    /// `SUBSCRIBE TO name`: the stream from its start (later rows as they come).
    fn subscribe(&mut self, name: &str, _copy: bool) -> Result<Subscription> {
        let key = name.to_ascii_lowercase();
        let log = self.logs.get(&key).cloned().ok_or_else(|| {
            Error::Plan(braid_plan::error::Error::Plan(format!(
                "no stream named `{key}` lives in Braid (SHOW STREAMS lists them)"
            )))
        })?;
        let status = self
            .made_by
            .get(&key)
            .map(|&q| self.queries[q].status.clone());
        Ok(Subscription {
            columns: columns(log.schema()),
            log,
            offset: 0,
            read: 0,
            status,
            drop: None,
        })
    }

    /// `CREATE STREAM name AS query` / `CREATE MATERIALIZED VIEW name AS query`.
    fn create_as(&mut self, text: &str, p: &Piece, name_at: usize) -> Result<Outcome> {
        let name = p.word(name_at).unwrap_or("").to_ascii_lowercase();
        let Some(as_at) = p
            .tokens
            .iter()
            .position(|(t, _)| *t == Lead::Word("AS".into()))
        else {
            return Err(plan_error("CREATE ... AS needs AS and a query"));
        };
        if as_at != name_at + 1 || name.is_empty() {
            return Err(plan_error(&format!(
                "CREATE {} name AS SELECT ...: options between the name and AS are not taken",
                if name_at == 3 {
                    "MATERIALIZED VIEW"
                } else {
                    "STREAM"
                }
            )));
        }
        if self.script.catalog.kind_of(&name).is_some() {
            return Err(plan_error(&format!(
                "`{name}` is already declared; DROP it first"
            )));
        }
        let query = alone(text, p.at(as_at + 1)..p.range.end);
        let (sql, plan, mut schema) = self.compile_query(&query)?;
        // The new stream's event time: the input's event-time column if the output
        // keeps it, else window_start.
        let input = plan.leaf_source().clone();
        let time = input
            .schema
            .event_time
            .map(|c| input.schema.fields[c].name.clone())
            .filter(|n| schema.index_of(n).is_ok())
            .or_else(|| {
                schema
                    .index_of("window_start")
                    .ok()
                    .map(|_| "window_start".to_string())
            });
        if let Some(t) = &time {
            schema = schema.with_event_time(t)?;
        }
        let log = StreamLog::create(&name, schema.clone(), self.dir.as_deref())?;
        let time_unit = self
            .script
            .catalog
            .streams
            .get(&input.name.to_ascii_lowercase())
            .and_then(|d| d.time_unit);
        let def = StreamDef {
            name: name.clone(),
            source: braid_plan::plan::Source {
                name: name.clone(),
                spec: SourceSpec::Native(format!("log:{name}")),
                schema,
                epoch: if time.is_some() { input.epoch } else { 1024 },
                window: 1024,
                pace: braid_plan::plan::Pace::Max,
                out_of_order: true,
            },
            lateness: 0,
            time_unit: time.and(time_unit),
            feeds: Default::default(),
        };
        self.install(sql, plan, format!("stream {name}"), Some(log.clone()))?;
        self.made_by.insert(name.clone(), self.queries.len() - 1);
        self.add_log(name.clone(), &def, log);
        self.script.catalog.streams.insert(name, def);
        Ok(Outcome::Done(match name_at {
            3 => "CREATE MATERIALIZED VIEW".into(),
            _ => "CREATE STREAM".into(),
        }))
    }

    /// `INSERT INTO stream VALUES (...), ...` or `INSERT INTO stream SELECT ...`.
    fn insert(&mut self, text: &str, p: &Piece, log: Arc<StreamLog>) -> Result<Outcome> {
        if p.word(3) != Some("VALUES") {
            // A query appending to the stream, running until dropped.
            let (sql, plan, schema) = self.compile_query(&alone(text, p.at(3)..p.range.end))?;
            let want = columns(log.schema());
            let got = columns(&schema);
            if want.iter().map(|c| c.1).ne(got.iter().map(|c| c.1)) {
                return Err(plan_error(&format!(
                    "INSERT INTO {}: the query makes ({}), the stream has ({})",
                    log.name(),
                    schema.column_list(),
                    log.schema().column_list()
                )));
            }
            let _ = sql;
            self.install(
                text[p.range.clone()].to_string(),
                plan,
                format!("stream {}", log.name()),
                Some(log),
            )?;
            return Ok(Outcome::Done("INSERT 0 0".into()));
        }
        let rows = values(p)?;
        let n = ingest::insert(&log, &rows)
            .map_err(|e| plan_error(&format!("INSERT INTO {}: {e}", log.name())))?;
        Ok(Outcome::Done(format!("INSERT 0 {n}")))
    }

    /// `COPY stream FROM STDIN [WITH (FORMAT csv, HEADER)]` or `COPY (query) TO STDOUT`.
    fn copy(&mut self, text: &str, p: &Piece) -> Result<Outcome> {
        if matches!(p.tokens.get(1), Some((Lead::Symbol(s), _)) if s == "(") {
            // The parenthesis that closes the one after COPY.
            let mut depth = 0i32;
            let close = p.tokens.iter().enumerate().skip(1).find_map(|(i, (t, _))| {
                match t {
                    Lead::Symbol(s) if s == "(" => depth += 1,
                    Lead::Symbol(s) if s == ")" => depth -= 1,
                    _ => {}
                }
                (depth == 0).then_some(i)
            });
            let Some(close) = close else {
                return Err(plan_error("COPY (query) TO STDOUT: no closing parenthesis"));
            };
            let inner = alone(text, p.at(2)..p.tokens[close].1);
            let inner_piece = statements(&inner).and_then(|v| v.into_iter().next());
            let Some(ip) = inner_piece else {
                return Err(plan_error("COPY (query) TO STDOUT: empty query"));
            };
            if ip.starts_with(&["SUBSCRIBE"]) {
                let k = if ip.word(1) == Some("TO") { 2 } else { 1 };
                return self
                    .subscribe(ip.word(k).unwrap_or(""), true)
                    .map(|s| Outcome::Rows(s, true));
            }
            return self.select(&inner).map(|s| Outcome::Rows(s, true));
        }
        let name = p.word(1).unwrap_or("");
        let log = self.log(name).cloned().ok_or_else(|| {
            plan_error(&format!(
                "COPY {name}: no stream named `{name}` lives in Braid"
            ))
        })?;
        if p.word(2) != Some("FROM") || p.word(3) != Some("STDIN") {
            return Err(plan_error("COPY stream FROM STDIN [WITH (FORMAT csv, HEADER true)] is the COPY a stream takes"));
        }
        let words: Vec<&str> = (4..p.tokens.len()).filter_map(|i| p.word(i)).collect();
        let format = if words.contains(&"CSV") {
            Format::Csv
        } else {
            Format::Text
        };
        let header = words.contains(&"HEADER");
        Ok(Outcome::CopyIn(Ingest::new(log, format, header)))
    }

    /// `DROP STREAM | VIEW | MATERIALIZED VIEW name` of a stream living in Braid.
    fn drop_live(&mut self, p: &Piece) -> Result<Option<Outcome>> {
        let k = match (p.word(1), p.word(2)) {
            (Some("MATERIALIZED"), Some("VIEW")) => 3,
            (Some("STREAM" | "VIEW"), _) => 2,
            (Some("QUERY"), _) => return self.drop_query(p).map(Some),
            _ => return Ok(None),
        };
        let (if_exists, k) = match (p.word(k), p.word(k + 1)) {
            (Some("IF"), Some("EXISTS")) => (true, k + 2),
            _ => (false, k),
        };
        let name = p.word(k).unwrap_or("").to_ascii_lowercase();
        let Some(log) = self.logs.get(&name).cloned() else {
            if if_exists {
                return Ok(Some(Outcome::Done("DROP".into())));
            }
            return match p.word(1) {
                Some("MATERIALIZED") => {
                    Err(plan_error(&format!("no materialized view named `{name}`")))
                }
                _ => Ok(None),
            };
        };
        let readers: Vec<String> = self
            .queries
            .iter()
            .filter(|q| !q.dropped && !q.status.ended() && q.reads.contains(&name))
            .map(|q| q.number.to_string())
            .collect();
        if !readers.is_empty() {
            return Err(plan_error(&format!(
                "stream `{name}` is read by running queries {} (DROP QUERY n, or DROP what they make, first)",
                readers.join(", ")
            )));
        }
        if let Some(q) = self.made_by.remove(&name) {
            self.queries[q].dropped = true;
            self.engine.drop_query(self.queries[q].id)?;
        }
        self.feeds.remove(&name);
        log.close();
        self.logs.remove(&name);
        self.script.catalog.streams.remove(&name);
        Ok(Some(Outcome::Done(format!(
            "DROP {}",
            if k >= 3 && p.word(1) == Some("MATERIALIZED") {
                "MATERIALIZED VIEW"
            } else {
                "STREAM"
            }
        ))))
    }

    /// `DROP QUERY n`: stops query n (what it made stays, and ends).
    fn drop_query(&mut self, p: &Piece) -> Result<Outcome> {
        let n = match p.tokens.get(2) {
            Some((Lead::Number(n), _)) => n.parse::<usize>().ok(),
            _ => None,
        };
        let Some(q) = n.and_then(|n| self.queries.get_mut(n.wrapping_sub(1))) else {
            return Err(plan_error(
                "DROP QUERY n: n is a query's number in SHOW QUERIES",
            ));
        };
        q.dropped = true;
        self.engine.drop_query(q.id)?;
        Ok(Outcome::Done("DROP QUERY".into()))
    }

    /// `EXPLAIN query`: its stages and physical plan.
    fn explain(&mut self, text: &str, p: &Piece) -> Result<Outcome> {
        let query = alone(text, p.at(1)..p.range.end);
        let jobs = self.script.jobs.len();
        add_statements(&mut self.script, &query, &self.base)?;
        let mut rows = Vec::new();
        for job in self.script.jobs.drain(jobs..) {
            let s = braid_sql::explain(&job, &self.script.registry, self.engine.workers());
            rows.extend(s.lines().map(|l| vec![l.to_string()]));
        }
        Ok(Outcome::Listing(Listing {
            header: vec!["QUERY PLAN".into()],
            rows,
        }))
    }

    /// `SHOW QUERIES`: number, state, rows in and out, what it writes, its text.
    fn queries_listing(&self) -> Listing {
        let rows = self
            .queries
            .iter()
            .map(|q| {
                let state = match (q.status.error(), q.dropped, q.status.ended()) {
                    (Some(e), _, _) => format!("failed: {e}"),
                    (None, true, _) => "dropped".into(),
                    (None, false, true) => "ended".into(),
                    (None, false, false) => "running".into(),
                };
                vec![
                    q.number.to_string(),
                    state,
                    q.status.rows_in().to_string(),
                    q.status.rows_out().to_string(),
                    q.status.faults().to_string(),
                    q.writes.clone(),
                    q.sql.clone(),
                ]
            })
            .collect();
        Listing {
            header: [
                "query", "state", "rows_in", "rows_out", "skipped", "writes", "sql",
            ]
            .map(String::from)
            .to_vec(),
            rows,
        }
    }
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
fn heartbeat(def: &StreamDef, idle: Duration) -> Heartbeat {
    Heartbeat {
        idle,
        units_per_second: def.time_unit.map(|u| u.per_second()),
    }
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

/// The command tag of a script statement (`CREATE STREAM`, `SET`, ...).
fn tag_of(text: &str) -> String {
    let words: Vec<String> = text
        .split_whitespace()
        .take(2)
        .map(|w| w.trim_end_matches(['(', ';']).to_ascii_uppercase())
        .collect();
    match words.first().map(String::as_str) {
        Some("CREATE" | "DROP") => words.join(" "),
        Some(w) => w.to_string(),
        None => String::new(),
    }
}

/// The rows of `INSERT INTO s VALUES (...), (...)`: literals as text (`None`: NULL).
fn values(p: &Piece) -> Result<Vec<Vec<Option<String>>>> {
    let mut rows = Vec::new();
    let mut row: Option<Vec<Option<String>>> = None;
    let mut negative = false;
    for (t, _) in &p.tokens[4..] {
        match (t, row.as_mut()) {
            (Lead::Symbol(s), None) if s == "(" => row = Some(Vec::new()),
            (Lead::Symbol(s), Some(_)) if s == ")" => rows.push(row.take().unwrap_or_default()),
            (Lead::Symbol(s), _) if s == "," => {}
            (Lead::Symbol(s), Some(_)) if s == "-" => negative = true,
            (Lead::Number(n), Some(r)) => {
                r.push(Some(if negative { format!("-{n}") } else { n.clone() }));
                negative = false;
            }
            (Lead::Str(s), Some(r)) => r.push(Some(s.clone())),
            (Lead::Word(w), Some(r)) if w == "NULL" => r.push(None),
            (Lead::Word(w), Some(r)) if w == "TRUE" || w == "FALSE" => r.push(Some(w.to_ascii_lowercase())),
            // TIMESTAMP '...', DATE '...': the string that follows is the value.
            (Lead::Word(w), Some(_)) if matches!(w.as_str(), "TIMESTAMP" | "TIMESTAMPTZ" | "DATE") => {}
            (other, _) => {
                return Err(plan_error(&format!(
                    "INSERT ... VALUES takes literals (numbers, 'strings', NULL, TRUE/FALSE, TIMESTAMP '...'); found {other:?}"
                )))
            }
        }
    }
    if row.is_some() {
        return Err(plan_error(
            "INSERT ... VALUES: a row is not closed with `)`",
        ));
    }
    Ok(rows)
}
