//! A server that comes back: the catalog kept on disk, and recovery on start.
//!
//! With a data directory, the session keeps `catalog.json`: the statements that made
//! what exists now (streams, tables, sinks, settings, the queries that run until
//! dropped), in the order they ran, rewritten by an atomic rename after each change
//! (a DROP takes out what made the dropped object). Every query that writes a stream
//! of its own (`CREATE STREAM ... AS`, `CREATE MATERIALIZED VIEW`) or a sink (`INSERT
//! INTO sink SELECT`) takes checkpoints into `checkpoints/q<id>` (see
//! [`crate::checkpoint`]): the positions of its readers in their streams, its state,
//! the rows its output holds.
//!
//! On start, [`LiveSession::recover`] runs the catalog's statements again: streams
//! open their files (rows durable before they were acknowledged), and each query
//! resumes from its last committed checkpoint, its output cut back to the rows that
//! checkpoint counted; the rows after it are made again, the same rows, because a
//! query's epochs depend only on its input and on the closes its readers journaled
//! (`ticks-*.log`, see [`crate::live::io::LogSource`]).

use super::{plan_error, LiveSession};
use crate::checkpoint::CheckpointConfig;
use crate::error::{Error, Result};
use braid_sql::parse::{parse, Located, Statement};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One statement of the catalog.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Entry {
    /// Its id (its checkpoints are in `checkpoints/q<id>`).
    id: u64,
    /// Its text.
    sql: String,
    /// What it made (lower case), if anything.
    object: Option<String>,
    /// The number of the query it installed, in this run.
    #[serde(skip)]
    query: Option<usize>,
    /// Its query was stopped (`DROP QUERY`): what it made stays, nothing writes it.
    stopped: bool,
    /// The partition count `ALTER ... SET PARALLELISM` gave its query.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    partitions: Option<u32>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Catalog {
    next: u64,
    entries: Vec<Entry>,
}

/// What a session keeps on disk.
pub(super) struct Durable {
    root: PathBuf,
    interval: Duration,
    catalog: Catalog,
    /// Running the catalog again on start.
    pub(super) recovering: bool,
    /// The entry of the statement running now.
    current: Option<Entry>,
    /// What a restart could not bring back, and why.
    notes: Vec<String>,
}

/// Removes query `id`'s checkpoints (its statement was dropped): its directory, and
/// its objects in the checkpoint store when there is one.
fn forget_checkpoints(
    d: &Durable,
    store: Option<&dyn crate::checkpoint::CheckpointBackend>,
    id: u64,
) {
    let _ = std::fs::remove_dir_all(d.checkpoints(id));
    if let Some(store) = store {
        let _ = store.delete_prefix(&format!("{}/", Durable::key(id)));
    }
}

/// What [`LiveSession::recover`] brought back.
#[derive(Debug, Default)]
pub struct Recovered {
    /// Statements run again.
    pub statements: usize,
    /// Queries restarted (from a checkpoint, or from their input's start when none
    /// had been committed).
    pub queries: usize,
    /// What could not be brought back, and why.
    pub notes: Vec<String>,
}

impl Durable {
    fn path(&self) -> PathBuf {
        self.root.join("catalog.json")
    }

    fn save(&self) -> Result<()> {
        let text =
            serde_json::to_vec_pretty(&self.catalog).map_err(|e| Error::Internal(e.to_string()))?;
        crate::checkpoint_store::replace_with(&self.path(), |w| w.write_all(&text))
    }

    /// Where query `id`'s checkpoints are (with a checkpoint store elsewhere, only
    /// its readers' journals are here).
    fn checkpoints(&self, id: u64) -> PathBuf {
        self.root.join("checkpoints").join(Durable::key(id))
    }

    /// Query `id`'s key in a checkpoint store.
    fn key(id: u64) -> String {
        format!("q{id}")
    }
}

impl LiveSession {
    /// Keeps the catalog in the data directory and checkpoints every query that
    /// writes a stream of its own or a sink, every `interval`; then brings back what
    /// the directory holds from an earlier run (nothing when it is new). Needs a data
    /// directory.
    pub fn recover(&mut self, interval: Duration) -> Result<Recovered> {
        let Some(root) = self
            .dir
            .as_deref()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
        else {
            return Err(plan_error("recovery needs a data directory"));
        };
        std::fs::create_dir_all(&root)
            .map_err(|e| Error::io(format!("creating {}", root.display()), e))?;
        // The followers of a cluster reach the checkpoints by this path.
        let root = std::fs::canonicalize(&root).unwrap_or(root);
        let mut durable = Durable {
            root,
            interval,
            catalog: Catalog::default(),
            recovering: true,
            current: None,
            notes: Vec::new(),
        };
        let path = durable.path();
        let old: Catalog = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| plan_error(&format!("{} does not read back: {e}", path.display())))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Catalog::default(),
            Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
        };
        durable.catalog.next = old.next;
        self.durable = Some(durable);
        let mut out = Recovered::default();
        let queries = self.queries.len();
        for entry in old.entries {
            if let Some(d) = self.durable.as_mut() {
                d.current = Some(entry.clone());
            }
            let text = entry.sql.clone();
            let first_id = self.engine.next_id();
            let r = match parse(&text).map(|v| v.into_iter().next()) {
                Ok(Some(st)) => {
                    let r = self.statement(&text, &st);
                    // The followers of a cluster run it again too.
                    let checkpoints = self.replicated_checkpoints();
                    self.replicate(&text, &st, first_id, r.is_ok(), checkpoints)?;
                    r
                }
                Ok(None) => Err(plan_error("the statement does not read back")),
                Err(e) => Err(e.into()),
            };
            let Some(d) = self.durable.as_mut() else {
                break;
            };
            let current = d.current.take();
            match r {
                Ok(_) => {
                    out.statements += 1;
                    if let Some(e) = current {
                        d.catalog.entries.push(e);
                    }
                }
                Err(e) => d
                    .notes
                    .push(format!("`{}` was not run again: {e}", entry.sql.trim())),
            }
        }
        out.queries = self.queries.len() - queries;
        if let Some(d) = self.durable.as_mut() {
            d.recovering = false;
            out.notes = std::mem::take(&mut d.notes);
            d.save()?;
        }
        Ok(out)
    }

    /// Before statement `p` runs: its catalog entry (the next id).
    pub(super) fn durable_begin(&mut self, text: &str, st: &Located<Statement>) {
        let Some(d) = self.durable.as_mut().filter(|d| !d.recovering) else {
            return;
        };
        d.current = Some(Entry {
            id: d.catalog.next,
            // Only what the catalog keeps needs its text (a client's text of many
            // INSERTs would otherwise be copied once per statement).
            sql: match persists(&st.statement) {
                true => st.text(text).trim().to_string(),
                false => String::new(),
            },
            object: st.statement.makes(),
            query: None,
            stopped: false,
            partitions: None,
        });
    }

    /// After statement `p` succeeded: the catalog notes what it made or dropped.
    pub(super) fn durable_end(&mut self, st: &Located<Statement>, ok: bool) -> Result<()> {
        let Some(d) = self.durable.as_mut().filter(|d| !d.recovering) else {
            return Ok(());
        };
        let Some(entry) = d.current.take() else {
            return Ok(());
        };
        if !ok {
            return Ok(());
        }
        if let Statement::DropQuery(n) = st.statement {
            let n = Some(n);
            let Some(k) = d
                .catalog
                .entries
                .iter()
                .position(|e| e.query.is_some() && e.query == n)
            else {
                return Ok(());
            };
            match d.catalog.entries[k].object.is_some() {
                true => d.catalog.entries[k].stopped = true,
                false => {
                    let e = d.catalog.entries.remove(k);
                    forget_checkpoints(d, self.checkpoint_store.as_deref(), e.id);
                }
            }
            return d.save();
        }
        if let Some(dropped) = dropped(&st.statement) {
            let Some(name) = dropped else {
                return Ok(());
            };
            let (gone, kept): (Vec<Entry>, Vec<Entry>) = std::mem::take(&mut d.catalog.entries)
                .into_iter()
                .partition(|e| e.object.as_deref() == Some(name.as_str()));
            d.catalog.entries = kept;
            for e in gone {
                forget_checkpoints(d, self.checkpoint_store.as_deref(), e.id);
            }
            return d.save();
        }
        if !persists(&st.statement) {
            return Ok(());
        }
        d.catalog.next = d.catalog.next.max(entry.id + 1);
        d.catalog.entries.push(entry);
        d.save()
    }

    /// The checkpoints of a query installed by the statement running now, when the
    /// session keeps its catalog (or, on a follower, when the leader's does).
    pub(super) fn durable_checkpoint(&self) -> Option<CheckpointConfig> {
        if let Some(c) = &self.replicated {
            return Some(CheckpointConfig {
                dir: c.dir.clone(),
                interval: Duration::from_millis(c.interval_ms),
                recover: c.recover,
                // The same key under this process's own store (a follower without
                // one stops at the statement: see `LiveSession::replay`).
                backend: c
                    .object
                    .as_ref()
                    .and_then(|key| Some(self.checkpoint_store.as_ref()?.child(key))),
            });
        }
        let d = self.durable.as_ref()?;
        let e = d.current.as_ref()?;
        Some(CheckpointConfig {
            dir: d.checkpoints(e.id),
            interval: d.interval,
            recover: d.recovering,
            backend: self
                .checkpoint_store
                .as_ref()
                .map(|s| s.child(&Durable::key(e.id))),
        })
    }

    /// Whether the catalog is being run again (streams open their files).
    pub(super) fn recovering(&self) -> bool {
        self.durable.as_ref().is_some_and(|d| d.recovering)
    }

    /// Whether the statement being run again made something its stopped query no
    /// longer writes.
    pub(super) fn replaying_stopped(&self) -> bool {
        self.durable
            .as_ref()
            .filter(|d| d.recovering)
            .and_then(|d| d.current.as_ref())
            .is_some_and(|e| e.stopped)
    }

    /// The partition count an ALTER gave the query of the entry being run again.
    pub(super) fn durable_partitions(&self) -> Option<u32> {
        if let Some(c) = &self.replicated {
            return c.partitions;
        }
        self.durable.as_ref()?.current.as_ref()?.partitions
    }

    /// What the followers of a cluster are told of the checkpoints of the query the
    /// statement running now installed.
    pub(super) fn replicated_checkpoints(&self) -> Option<crate::live::engine::Checkpoints> {
        let cfg = self.durable_checkpoint()?;
        let object = cfg.backend.as_ref().and_then(|_| {
            let e = self.durable.as_ref()?.current.as_ref()?;
            Some(Durable::key(e.id))
        });
        Some(crate::live::engine::Checkpoints {
            dir: cfg.dir,
            interval_ms: cfg.interval.as_millis() as u64,
            recover: cfg.recover,
            partitions: self.durable_partitions(),
            object,
        })
    }

    /// Query `number` now runs at `q` partitions: so it does after a restart.
    pub(super) fn durable_parallelism(&mut self, number: usize, q: u32) -> Result<()> {
        let Some(d) = self.durable.as_mut() else {
            return Ok(());
        };
        match d
            .catalog
            .entries
            .iter_mut()
            .find(|e| e.query == Some(number))
        {
            Some(e) => {
                e.partitions = Some(q);
                d.save()
            }
            None => Ok(()),
        }
    }

    /// Notes what a restart will not bring back.
    pub(super) fn durable_note(&mut self, note: String) {
        if let Some(d) = self.durable.as_mut() {
            d.notes.push(note);
        }
    }

    /// The number of the query the entry being run again installed.
    pub(super) fn durable_installed(&mut self, number: usize) {
        if let Some(e) = self.durable.as_mut().and_then(|d| d.current.as_mut()) {
            e.query = Some(number);
        }
    }
}

/// Whether statement `st` goes into the catalog: what declares, sets, or installs a
/// query that runs until dropped; not what reads (SHOW, SELECT, SUBSCRIBE, COPY TO),
/// adds rows (INSERT VALUES, COPY FROM), drops or alters (ALTER is kept as the query's
/// parallelism).
fn persists(st: &Statement) -> bool {
    match st {
        Statement::Declare(_)
        | Statement::CreateAs(_)
        | Statement::CreateView(_)
        | Statement::CreateFunction(_)
        | Statement::Set(_) => true,
        Statement::Insert(_) => !st.inserts_values(),
        _ => false,
    }
}

/// For a DROP: the name (lower case) of what it drops, if it names one.
fn dropped(st: &Statement) -> Option<Option<String>> {
    let name = match st {
        Statement::Drop(d) => d.names.first().map(ToString::to_string),
        Statement::DropFunction(f) => f.func_desc.first().map(|f| f.name.to_string()),
        _ => return None,
    };
    Some(name.map(|n| n.to_ascii_lowercase()))
}
