//! The live session's own statements: SELECT and SUBSCRIBE for subscribers, CREATE
//! ... AS, INSERT, COPY, DROP, EXPLAIN and SHOW QUERIES.

use super::{columns, plan_error, LiveSession, Outcome};
use crate::error::{Error, Result};
use crate::live::ingest::{self, Format, Ingest};
use crate::live::log::StreamLog;
use crate::live::subscription::Subscription;
use braid_plan::batch::Scalar;
use braid_plan::plan::SourceSpec;
use braid_sql::catalog::{Listing, StreamDef};
use braid_sql::parse::{CreateAs, Drop, DropKind, Insert, Located, Query, Statement, Subscribe};
use std::sync::Arc;

impl LiveSession {
    /// A bare SELECT: a private query whose rows go to this subscriber only.
    pub(super) fn select(&mut self, text: &str, q: &Query) -> Result<Subscription> {
        let (sql, plan, schema) = self.compile_query(text, q)?;
        let n = self.queries.len() + 1;
        let log = StreamLog::create(&format!("select{n}"), schema.clone(), None)?;
        let status = self.install(sql, plan, "subscriber".into(), Some(log.clone()), false)?;
        let (senders, id) = (self.engine.dropper(), self.queries[n - 1].id);
        log.subscriber(true);
        Ok(Subscription {
            columns: columns(&schema),
            log,
            offset: 0,
            read: 0,
            hold: None,
            status: Some(status),
            filter: None,
            tap: None,
            fault: None,
            drop: Some(Box::new(move || senders(id))),
        })
    }

    /// `SUBSCRIBE [TO] name [WHERE predicate]`: the stream from its start (later rows
    /// as they come), the predicate applied as the subscriber reads (a postfilter).
    pub(super) fn subscribe_to(&mut self, text: &str, s: &Subscribe) -> Result<Subscription> {
        let mut sub = self.subscribe(&s.name)?;
        if let Some(f) = &s.filter {
            let expr = braid_sql::expr::compile_expr(text, f, sub.log.schema())?;
            sub.set_filter(crate::live::subscription::Filter::new(expr, &f.to_string()));
        }
        Ok(sub)
    }

    pub(super) fn subscribe(&mut self, name: &str) -> Result<Subscription> {
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
        log.subscriber(true);
        // From the stream's first row kept (its retention may have trimmed earlier
        // ones), held until read.
        let hold = log.hold(log.first_row());
        Ok(Subscription {
            columns: columns(log.schema()),
            offset: log.first_batch(),
            read: hold.get(),
            hold: Some(hold),
            log,
            status,
            filter: None,
            tap: None,
            fault: None,
            drop: None,
        })
    }

    /// `CREATE STREAM name AS query` / `CREATE MATERIALIZED VIEW name AS query`.
    pub(super) fn create_as(&mut self, text: &str, c: &CreateAs) -> Result<Outcome> {
        let name = c.name.clone();
        if self.script.catalog.kind_of(&name).is_some() {
            return Err(plan_error(&format!(
                "`{name}` is already declared; DROP it first"
            )));
        }
        let (sql, plan, mut schema) = self.compile_query(text, &c.query)?;
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
        let log = match self.recovering() {
            true => StreamLog::open(&name, schema.clone(), self.dir.as_deref())?,
            false => StreamLog::create(&name, schema.clone(), self.dir.as_deref())?,
        };
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
                shed: None,
            },
            lateness: 0,
            time_unit: time.and(time_unit),
            feeds: Default::default(),
        };
        if self.replaying_stopped() {
            // Its query was stopped before the restart: the stream keeps its rows and
            // ends.
            self.add_log(name.clone(), &def, log.clone());
            log.close();
        } else {
            self.install(sql, plan, format!("stream {name}"), Some(log.clone()), true)?;
            self.made_by.insert(name.clone(), self.queries.len() - 1);
            self.add_log(name.clone(), &def, log);
        }
        if c.view {
            self.views.insert(name.clone());
        }
        self.script.catalog.streams.insert(name, def);
        Ok(Outcome::Done(
            Statement::CreateAs(Box::new(c.clone())).tag(),
        ))
    }

    /// `INSERT INTO stream VALUES (...), ...` or `INSERT INTO stream SELECT ...`.
    pub(super) fn insert(
        &mut self,
        text: &str,
        st: &Located<Statement>,
        ins: &Insert,
        log: Arc<StreamLog>,
    ) -> Result<Outcome> {
        // VALUES, with or without a column list: every value a constant evaluated and
        // typed as its column (`braid_sql::values`).
        if st.statement.inserts_values() {
            let rows = values_of(text, ins, &log)?;
            let seqs = ingest::insert(&log, &rows)
                .map_err(|e| plan_error(&format!("INSERT INTO {}: {e}", log.name())))?;
            let n = seqs.end - seqs.start;
            self.appended.add(log.name(), seqs);
            return Ok(Outcome::Done(format!("INSERT 0 {n}")));
        }
        if self.recovering() {
            return Err(plan_error(&format!(
                "a query appending to stream {}, which other producers may write too, cannot resume where it stopped (its output cannot be cut back); run it again, or make its rows a stream of its own with CREATE STREAM ... AS",
                log.name()
            )));
        }
        // A query appending to the stream, running until dropped.
        let Some(source) = &ins.source else {
            return Err(plan_error("INSERT needs VALUES (...) or a query"));
        };
        if !ins.columns.is_empty() {
            return Err(Error::Plan(braid_plan::error::Error::NotSupported(format!(
                "INSERT INTO {} (columns) SELECT ...: a query appends whole rows; write INSERT INTO {} SELECT ... with every column",
                log.name(),
                log.name()
            ))));
        }
        let (sql, plan, schema) = self.compile_query(text, source)?;
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
            st.text(text).trim().to_string(),
            plan,
            format!("stream {}", log.name()),
            Some(log),
            false,
        )?;
        Ok(Outcome::Done("INSERT 0 0".into()))
    }

    /// `COPY stream FROM STDIN [WITH (FORMAT csv, HEADER)]`: its options read by
    /// sqlparser (`braid_sql::copy`), any that would read the data otherwise than the
    /// format does refused by name.
    pub(super) fn copy_in(&mut self, asked: &braid_sql::copy::CopyIn) -> Result<Outcome> {
        let name = &asked.stream;
        let log = self.log(name).cloned().ok_or_else(|| {
            plan_error(&format!(
                "COPY {name}: no stream named `{name}` lives in Braid"
            ))
        })?;
        let format = match asked.format {
            braid_sql::copy::CopyFormat::Csv => Format::Csv,
            braid_sql::copy::CopyFormat::Text => Format::Text,
        };
        Ok(Outcome::CopyIn(Ingest::new(log, format, asked.header)))
    }

    /// `DROP STREAM | VIEW | MATERIALIZED VIEW name` of a stream living in Braid.
    pub(super) fn drop_live(&mut self, d: &Drop) -> Result<Option<Outcome>> {
        if !matches!(
            d.kind,
            DropKind::Stream | DropKind::View | DropKind::MaterializedView
        ) {
            return Ok(None);
        }
        let [name] = d.names.as_slice() else {
            return match d.kind {
                DropKind::MaterializedView => Err(plan_error(
                    "DROP MATERIALIZED VIEW drops one view at a time",
                )),
                _ => Ok(None),
            };
        };
        let name = name.to_string().to_ascii_lowercase();
        let Some(log) = self.logs.get(&name).cloned() else {
            if d.if_exists {
                return Ok(Some(Outcome::Done("DROP".into())));
            }
            return match d.kind {
                DropKind::MaterializedView => {
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
        self.views.remove(&name);
        log.close();
        self.logs.remove(&name);
        self.script.catalog.streams.remove(&name);
        Ok(Some(Outcome::Done(
            match d.kind {
                DropKind::MaterializedView => "DROP MATERIALIZED VIEW",
                _ => "DROP STREAM",
            }
            .into(),
        )))
    }

    /// `DROP QUERY n`: stops query n (what it made stays, and ends).
    pub(super) fn drop_query(&mut self, n: usize) -> Result<Outcome> {
        let Some(q) = self.queries.get_mut(n.wrapping_sub(1)) else {
            return Err(plan_error(
                "DROP QUERY n: n is a query's number in SHOW QUERIES",
            ));
        };
        q.dropped = true;
        self.engine.drop_query(q.id)?;
        Ok(Outcome::Done("DROP QUERY".into()))
    }

    /// `EXPLAIN ANALYZE QUERY n`: running query n's physical plan, each node with what
    /// it has measured so far (rows, activations, time, busy share since it started).
    pub(super) fn explain_analyze(&mut self, n: usize) -> Result<Outcome> {
        let Some(q) = self.queries.get(n.wrapping_sub(1)) else {
            return Err(plan_error(
                "EXPLAIN ANALYZE QUERY n: n is a query's number in SHOW QUERIES",
            ));
        };
        let (plan, registry) = &q.plan;
        let profile = q.status.shared.profiler.snapshot();
        let text = crate::profile::annotate(plan, registry, self.engine.workers(), &profile);
        // Under a latency constraint: what its stamps measured so far, per operator.
        let latency = q
            .status
            .row_latency()
            .map(|l| l.lines())
            .unwrap_or_default();
        Ok(Outcome::Listing(Listing {
            header: vec!["QUERY PLAN".into()],
            rows: text
                .lines()
                .map(String::from)
                .chain(latency)
                .map(|l| vec![l])
                .collect(),
        }))
    }

    /// `EXPLAIN query`: its stages and physical plan.
    pub(super) fn explain(
        &mut self,
        text: &str,
        st: &Located<Statement>,
        inner: &Statement,
    ) -> Result<Outcome> {
        let jobs = self.script.jobs.len();
        let inner = Located {
            statement: inner.clone(),
            range: st.range.clone(),
            span: st.span,
            bound: None,
        };
        let r = braid_sql::run_statement(&mut self.script, text, &self.base, &inner);
        if let Err(e) = r {
            self.script.jobs.truncate(jobs);
            return Err(e.into());
        }
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
    /// `SHOW VIEWS`: the views of the catalog (`CREATE VIEW`) and the materialized
    /// views (`CREATE MATERIALIZED VIEW`: streams a query makes), by name.
    pub(super) fn views_listing(&self) -> Listing {
        let mut l = self.script.catalog.show_views();
        for name in &self.views {
            let sql = self.made_by.get(name).map(|&q| self.queries[q].sql.clone());
            l.rows.push(vec![name.clone(), sql.unwrap_or_default()]);
        }
        l.rows.sort();
        l
    }

    pub(super) fn queries_listing(&self) -> Listing {
        let rows = self
            .queries
            .iter()
            .map(|q| {
                let state = match q.state() {
                    (_, Some(e)) => format!("failed: {e}"),
                    (s, None) => s.to_string(),
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

/// The rows of `INSERT INTO stream [(columns)] VALUES ...` (of `text`), typed as
/// `log`'s columns, not appended (`braid_sql::values`); `INSERT INTO stream (columns)
/// SELECT` is refused by name.
pub(super) fn values_of(text: &str, ins: &Insert, log: &StreamLog) -> Result<Vec<Vec<Scalar>>> {
    braid_sql::values::insert_rows(text, ins, log.schema())
        .map_err(Error::Plan)?
        .ok_or_else(|| {
            Error::Plan(braid_plan::error::Error::NotSupported(format!(
                "INSERT INTO {} (columns) SELECT ...: a query appends whole rows; write INSERT INTO {} SELECT ... with every column",
                log.name(),
                log.name()
            )))
        })
}
