//! Transactions of one client: `BEGIN` (or `START TRANSACTION`) ... `COMMIT` (`END`)
//! or `ROLLBACK` (`ABORT`), as PostgreSQL's clients expect (psycopg sends `BEGIN` before
//! a connection's first statement unless it is in autocommit mode).
//!
//! Inside a transaction, `INSERT ... VALUES` is checked and typed when it is sent (an
//! error names the row and column then) but its rows are held; `COMMIT` appends them,
//! each stream's rows of the transaction in one append, so a reader never sees part of
//! them; `ROLLBACK` discards them. Reads (`SELECT`, `SUBSCRIBE`, `SHOW`, `DESCRIBE`,
//! `EXPLAIN`) run as they come and see what is committed. Anything else (declarations,
//! `COPY`, `INSERT ... SELECT`, `DROP`, `ALTER`, `SET`) is refused inside a transaction
//! block, by name; as in PostgreSQL, a failed statement fails the transaction, whose
//! later statements are refused until `COMMIT` or `ROLLBACK` ends it (`COMMIT` then
//! rolls back).

use super::{plan_error, LiveSession, Outcome};
use crate::error::{Error, Result};
use crate::live::ingest::{self, Sent};
use crate::live::log::StreamLog;
use braid_plan::batch::Scalar;
use braid_sql::parse::{Located, Statement};
use std::sync::Arc;

/// What the session keeps for one client between its statements: its transaction
/// (none: each statement commits on its own; open with the rows it holds; or failed),
/// and the rows it sent, so that it can be told which of them were late
/// ([`LiveSession::late_notices`]).
#[derive(Default)]
pub struct Client {
    state: State,
    /// The rows it appended to streams.
    pub sent: Sent,
    /// Per query's late-row counter (keyed by `late.rs`), how many of its late rows
    /// were matched against `sent` already.
    pub(super) late_seen: std::collections::HashMap<u64, u64>,
    /// PostgreSQL settings it set (`application_name`, ...: see `postgres.rs`).
    pub settings: std::collections::BTreeMap<String, String>,
}

#[derive(Default)]
enum State {
    #[default]
    None,
    /// The rows each INSERT of the transaction holds, in order.
    Open(Vec<(Arc<StreamLog>, Vec<Vec<Scalar>>)>),
    Failed,
}

impl Client {
    /// Whether a transaction block is open (failed or not).
    pub fn is_open(&self) -> bool {
        !matches!(self.state, State::None)
    }

    /// A statement of the open transaction failed: the rest is refused until it ends.
    pub fn fail(&mut self) {
        if self.is_open() {
            self.state = State::Failed;
        }
    }
}

/// What a statement is to a transaction.
enum Word {
    Begin,
    Commit,
    Rollback,
    Read,
    Insert,
    Other,
}

fn word(st: &Statement) -> Word {
    match st {
        Statement::Begin => Word::Begin,
        Statement::Commit => Word::Commit,
        Statement::Rollback => Word::Rollback,
        Statement::Query(_) => Word::Read,
        s if s.reads() => Word::Read,
        s if s.inserts_values() => Word::Insert,
        _ => Word::Other,
    }
}

impl LiveSession {
    /// Statement `p` if it is a transaction's business: BEGIN, COMMIT, ROLLBACK, a
    /// statement of an open or failed transaction; None for the session to run it.
    pub(super) fn in_transaction(
        &mut self,
        text: &str,
        st: &Located<Statement>,
        client: &mut Client,
    ) -> Option<Result<Outcome>> {
        let w = word(&st.statement);
        let Client { state, sent, .. } = client;
        Some(match (&mut *state, w) {
            (State::None, Word::Begin) => {
                *state = State::Open(Vec::new());
                Ok(Outcome::Begin)
            }
            // PostgreSQL warns and goes on.
            (_, Word::Begin) => Ok(Outcome::Done("BEGIN".into())),
            (State::None, Word::Commit) => Ok(Outcome::Done("COMMIT".into())),
            (State::None, Word::Rollback) => Ok(Outcome::Done("ROLLBACK".into())),
            (State::None, _) => return None,
            (State::Failed, Word::Commit | Word::Rollback) => {
                *state = State::None;
                Ok(Outcome::End("ROLLBACK".into()))
            }
            (State::Failed, _) => Err(Error::Plan(braid_plan::error::Error::Plan(
                "current transaction is aborted, commands ignored until end of transaction block (ROLLBACK or COMMIT ends it)".into(),
            ))),
            (State::Open(_), Word::Rollback) => {
                *state = State::None;
                Ok(Outcome::End("ROLLBACK".into()))
            }
            (State::Open(held), Word::Commit) => {
                let held = std::mem::take(held);
                *state = State::None;
                commit(held, sent).map(|()| Outcome::End("COMMIT".into()))
            }
            (State::Open(_), Word::Read) => return None,
            (State::Open(held), Word::Insert) => self.held_insert(text, st).map(|(log, rows)| {
                let n = rows.len();
                held.push((log, rows));
                Outcome::Done(format!("INSERT 0 {n}"))
            }),
            (State::Open(_), Word::Other) => Err(Error::Plan(
                braid_plan::error::Error::NotSupported(format!(
                    "`{}` inside a transaction block: Braid's transactions hold INSERT ... VALUES (appended at COMMIT) and reads; run it outside BEGIN ... COMMIT (psycopg: autocommit = True)",
                    st.statement.tag()
                )),
            )),
        })
    }

    /// The stream and typed rows of `INSERT INTO stream VALUES ...`, not appended.
    fn held_insert(
        &self,
        text: &str,
        st: &Located<Statement>,
    ) -> Result<(Arc<StreamLog>, Vec<Vec<Scalar>>)> {
        let Statement::Insert(ins) = &st.statement else {
            return Err(plan_error("expected INSERT INTO stream VALUES ..."));
        };
        let name = ins.table.to_string();
        let log = self
            .log(&name)
            .cloned()
            .ok_or_else(|| plan_error(&format!("INSERT INTO {name}: no such stream")))?;
        let rows = super::statements::values_of(text, ins, &log)?;
        Ok((log, rows))
    }
}

/// Appends what a transaction holds: each stream's rows in one append, streams in the
/// order the transaction first wrote them.
fn commit(held: Vec<(Arc<StreamLog>, Vec<Vec<Scalar>>)>, sent: &mut Sent) -> Result<()> {
    let mut by_stream: Vec<(Arc<StreamLog>, Vec<Vec<Scalar>>)> = Vec::new();
    for (log, rows) in held {
        match by_stream.iter_mut().find(|(l, _)| Arc::ptr_eq(l, &log)) {
            Some((_, all)) => all.extend(rows),
            None => by_stream.push((log, rows)),
        }
    }
    for (log, rows) in by_stream {
        let seqs = ingest::insert(&log, &rows)
            .map_err(|e| plan_error(&format!("COMMIT: INSERT INTO {}: {e}", log.name())))?;
        sent.add(log.name(), seqs);
    }
    Ok(())
}
