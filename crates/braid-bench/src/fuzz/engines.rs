//! The two engines: Braid in this process through the library [`Session`] (on a thread
//! of its own, so that a run that hangs is cancelled and one that panics is a
//! recorded failure), and DuckDB in one long-lived `python3` child speaking JSON lines.

use super::data::{Dataset, Val};
use anyhow::{anyhow, bail, Context, Result};
use braid_exec::runtime::RunConfig;
use braid_exec::session::Session;
use braid_plan::batch::Scalar;
use braid_plan::function::Registry;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// How Braid runs a query.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    /// `SET parallel = 'off'`, one worker.
    Serial,
    /// Parallelized automatically on this many workers.
    Workers(usize),
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mode::Serial => write!(f, "serial"),
            Mode::Workers(1) => write!(f, "1 worker"),
            Mode::Workers(n) => write!(f, "{n} workers"),
        }
    }
}

/// What Braid made of a query.
#[derive(Clone, Debug)]
pub enum BraidOut {
    /// Its rows (in arrival order) and the rows refused as late.
    Rows {
        /// The rows.
        rows: Vec<Vec<Val>>,
        /// Late rows counted.
        late: u64,
    },
    /// An error (the message).
    Error(String),
    /// A panic (message and place).
    Panic(String),
    /// No answer within the time allowed (the run was cancelled).
    Hang,
}

struct Request {
    dir: PathBuf,
    decls: String,
    mode: Mode,
    pre: Option<String>,
    sql: String,
}

/// Braid, on a thread that owns its sessions.
pub struct Braid {
    tx: Sender<Request>,
    rx: Receiver<BraidOut>,
    cancel: Arc<Mutex<Option<braid_exec::cancel::Cancel>>>,
    timeout: Duration,
}

/// The last panic's message, kept by the fuzzer's panic hook (which prints nothing:
/// a panic of Braid is a finding, reported with its reproduction).
fn last_panic() -> &'static Mutex<Option<String>> {
    static LAST: OnceLock<Mutex<Option<String>>> = OnceLock::new();
    LAST.get_or_init(|| Mutex::new(None))
}

/// Installs the hook that records panics quietly (once).
pub fn quiet_panics() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        std::panic::set_hook(Box::new(|info| {
            let msg = match info.payload().downcast_ref::<&str>() {
                Some(s) => s.to_string(),
                None => match info.payload().downcast_ref::<String>() {
                    Some(s) => s.clone(),
                    None => "a panic".to_string(),
                },
            };
            let at = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()))
                .unwrap_or_default();
            if let Ok(mut last) = last_panic().lock() {
                if last.is_none() {
                    *last = Some(format!("{msg}{at}"));
                }
            }
        }));
    });
}

struct Open {
    key: (PathBuf, String, Mode),
    session: Session,
    sinks: usize,
}

fn open(dir: &Path, decls: &str, mode: Mode) -> Result<Session, String> {
    let workers = match mode {
        Mode::Serial => 1,
        Mode::Workers(n) => n,
    };
    // `--on-error fail`: a runtime fault or malformed record is the query's error.
    let config = RunConfig {
        workers,
        read: braid_exec::source::ReadOptions {
            strict: true,
            ..RunConfig::default().read
        },
        ..RunConfig::default()
    };
    let mut session = Session::new(&Registry::with_builtins(), config);
    if mode == Mode::Serial {
        session
            .compile("SET parallel = 'off';", dir)
            .map_err(|e| e.to_string())?;
    }
    session.compile(decls, dir).map_err(|e| e.to_string())?;
    Ok(session)
}

fn value(v: &Scalar) -> Val {
    match v {
        Scalar::Null => Val::Null,
        Scalar::Int(i) => Val::Int(*i),
        Scalar::Float(f) => Val::Float(*f),
        Scalar::Bool(b) => Val::Bool(*b),
        Scalar::Str(s) => Val::Str(s.clone()),
        other => Val::Str(format!("{other:?}")),
    }
}

fn query(open: &mut Open, req: &Request) -> BraidOut {
    let session = &mut open.session;
    if let Some(pre) = &req.pre {
        if let Err(e) = session.compile(pre, &req.dir) {
            return BraidOut::Error(e.to_string());
        }
    }
    open.sinks += 1;
    let sink = format!("fuzz_out_{}", open.sinks);
    if let Err(e) = session.compile(
        &format!("CREATE SINK {sink} WITH (sink = 'collect');"),
        &req.dir,
    ) {
        return BraidOut::Error(e.to_string());
    }
    let added = match session.compile(&format!("INSERT INTO {sink} {};", req.sql), &req.dir) {
        Ok(a) => a,
        Err(e) => return BraidOut::Error(e.to_string()),
    };
    let &[index] = added.as_slice() else {
        return BraidOut::Error(format!("{}: not one query", req.sql));
    };
    let reports = match session.run_pending() {
        Ok(r) => r,
        Err(e) => return BraidOut::Error(e.to_string()),
    };
    let Some(report) = reports.iter().find(|r| r.query == index) else {
        return BraidOut::Error(format!("query {index} did not run"));
    };
    let late = report.late.iter().map(|l| l.rows).sum();
    let rows = report
        .run
        .collected
        .iter()
        .map(|r| r.values.iter().map(value).collect())
        .collect();
    BraidOut::Rows { rows, late }
}

fn serve(
    rx: Receiver<Request>,
    tx: Sender<BraidOut>,
    cancel: Arc<Mutex<Option<braid_exec::cancel::Cancel>>>,
) {
    let mut current: Option<Open> = None;
    for req in rx {
        let key = (req.dir.clone(), req.decls.clone(), req.mode);
        // A fresh session for another dataset or mode, and every 40 queries (the
        // script keeps every query compiled).
        if current
            .as_ref()
            .is_none_or(|o| o.key != key || o.sinks >= 40)
        {
            current = None;
            match std::panic::catch_unwind(|| open(&req.dir, &req.decls, req.mode)) {
                Ok(Ok(session)) => {
                    current = Some(Open {
                        key,
                        session,
                        sinks: 0,
                    })
                }
                Ok(Err(e)) => {
                    if tx.send(BraidOut::Error(e)).is_err() {
                        return;
                    }
                    continue;
                }
                Err(_) => {
                    let msg = last_panic().lock().ok().and_then(|mut l| l.take());
                    if tx
                        .send(BraidOut::Panic(msg.unwrap_or_else(|| "a panic".into())))
                        .is_err()
                    {
                        return;
                    }
                    continue;
                }
            }
        }
        let Some(open) = current.as_mut() else {
            continue;
        };
        if let Ok(mut c) = cancel.lock() {
            *c = Some(open.session.cancel_handle());
        }
        if let Ok(mut l) = last_panic().lock() {
            *l = None;
        }
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| query(open, &req)));
        let out = match out {
            Ok(o) => o,
            Err(_) => {
                current = None;
                let msg = last_panic().lock().ok().and_then(|mut l| l.take());
                BraidOut::Panic(msg.unwrap_or_else(|| "a panic".into()))
            }
        };
        if tx.send(out).is_err() {
            return;
        }
    }
}

impl Braid {
    /// A Braid runner whose queries get `timeout` before they are cancelled.
    pub fn new(timeout: Duration) -> Braid {
        quiet_panics();
        let (tx, rx_req) = channel();
        let (tx_out, rx) = channel();
        let cancel = Arc::new(Mutex::new(None));
        let c = cancel.clone();
        std::thread::spawn(move || serve(rx_req, tx_out, c));
        Braid {
            tx,
            rx,
            cancel,
            timeout,
        }
    }

    /// Runs `sql` (after `pre`, a view) over the dataset declared by `decls` in `dir`.
    pub fn run(
        &mut self,
        dir: &Path,
        decls: &str,
        mode: Mode,
        pre: Option<&str>,
        sql: &str,
    ) -> BraidOut {
        let req = Request {
            dir: dir.to_path_buf(),
            decls: decls.to_string(),
            mode,
            pre: pre.map(str::to_string),
            sql: sql.to_string(),
        };
        if self.tx.send(req).is_err() {
            *self = Braid::new(self.timeout);
            return BraidOut::Error("the Braid runner thread has gone".into());
        }
        match self.rx.recv_timeout(self.timeout) {
            Ok(out) => out,
            Err(RecvTimeoutError::Disconnected) => {
                *self = Braid::new(self.timeout);
                BraidOut::Error("the Braid runner thread has gone".into())
            }
            Err(RecvTimeoutError::Timeout) => {
                if let Some(c) = self.cancel.lock().ok().and_then(|c| c.clone()) {
                    c.cancel();
                }
                // Give the cancel a moment; a thread that does not answer is left
                // behind and a new one takes over.
                if self.rx.recv_timeout(Duration::from_secs(5)).is_err() {
                    *self = Braid::new(self.timeout);
                } else {
                    // The cancelled session is not reused.
                    let fresh = Braid::new(self.timeout);
                    *self = fresh;
                }
                BraidOut::Hang
            }
        }
    }
}

/// DuckDB in a `python3` child.
pub struct Duck {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

const SCRIPT: &str = include_str!("duck.py");

/// DuckDB's answer to a query.
#[derive(Clone, Debug)]
pub enum DuckOut {
    /// Rows.
    Rows(Vec<Vec<Val>>),
    /// DuckDB's error.
    Error(String),
}

fn json_value(v: &serde_json::Value) -> Val {
    match v {
        serde_json::Value::Null => Val::Null,
        serde_json::Value::Bool(b) => Val::Bool(*b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Val::Int(i),
            None => Val::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        serde_json::Value::String(s) => Val::Str(s.clone()),
        serde_json::Value::Object(o) => match o.get("float").and_then(|f| f.as_str()) {
            Some("inf") => Val::Float(f64::INFINITY),
            Some("-inf") => Val::Float(f64::NEG_INFINITY),
            _ => Val::Float(f64::NAN),
        },
        serde_json::Value::Array(_) => Val::Str(v.to_string()),
    }
}

impl Duck {
    /// Starts `python3` with the DuckDB script; fails if duckdb cannot be imported.
    pub fn start(python: &str) -> Result<Duck> {
        let mut child = Command::new(python)
            .arg("-c")
            .arg(SCRIPT)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("cannot start `{python}` for DuckDB"))?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| anyhow!("no stdin of the DuckDB child"))?;
        let stdout = BufReader::new(
            child
                .stdout
                .take()
                .ok_or_else(|| anyhow!("no stdout of the DuckDB child"))?,
        );
        let mut d = Duck {
            child,
            stdin,
            stdout,
        };
        match d.query("SELECT 1")? {
            DuckOut::Rows(_) => Ok(d),
            DuckOut::Error(e) => {
                bail!("DuckDB does not answer: {e} (python3 -m pip install duckdb)")
            }
        }
    }

    fn request(&mut self, req: serde_json::Value) -> Result<serde_json::Value> {
        writeln!(self.stdin, "{req}").context("cannot write to the DuckDB child")?;
        self.stdin
            .flush()
            .context("cannot write to the DuckDB child")?;
        let mut line = String::new();
        let n = self
            .stdout
            .read_line(&mut line)
            .context("cannot read from the DuckDB child")?;
        if n == 0 {
            bail!("the DuckDB child ended (is the duckdb module installed? python3 -m pip install duckdb)");
        }
        serde_json::from_str(&line).with_context(|| format!("DuckDB's answer is not JSON: {line}"))
    }

    /// Loads the dataset's CSV files in `dir` as tables.
    pub fn load(&mut self, ds: &Dataset, dir: &Path) -> Result<()> {
        let tables: Vec<serde_json::Value> = ds
            .rels()
            .iter()
            .map(|r| {
                serde_json::json!({
                    "name": r.name,
                    "path": dir.join(format!("{}.csv", r.name)).to_string_lossy(),
                    "columns": r.duck_columns(),
                })
            })
            .collect();
        let out = self.request(serde_json::json!({"op": "load", "tables": tables}))?;
        if out["ok"].as_bool() != Some(true) {
            bail!("DuckDB cannot load {}: {}", dir.display(), out["error"]);
        }
        Ok(())
    }

    /// Runs a query.
    pub fn query(&mut self, sql: &str) -> Result<DuckOut> {
        let out = self.request(serde_json::json!({"op": "query", "sql": sql}))?;
        if out["ok"].as_bool() != Some(true) {
            return Ok(DuckOut::Error(
                out["error"].as_str().unwrap_or("an error").to_string(),
            ));
        }
        let rows = out["rows"]
            .as_array()
            .map(|rows| {
                rows.iter()
                    .map(|r| {
                        r.as_array()
                            .map(|vs| vs.iter().map(json_value).collect())
                            .unwrap_or_default()
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(DuckOut::Rows(rows))
    }
}

impl Drop for Duck {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
