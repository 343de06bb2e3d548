//! The SQL logic test corpus: every `tests/slt/*.slt` file (sqllogictest format) run
//! through the library [`Session`], four times: serially (`SET parallel = 'off'`, one
//! worker) and automatically parallelized on 1, 2 and 4 workers. Each run must give the
//! rows the file expects, so the four give the same rows.
//!
//! `statement ok` compiles declarations (and `INSERT INTO` queries, which run with the
//! next `query`); `query <types>` compiles a `SELECT` into a collecting sink, runs every
//! pending query and returns the rows of this one (a query over `LATE(sink)` runs in
//! the job of the query writing to `sink`). Types are `I` (BIGINT), `R` (DOUBLE), `T`
//! (TEXT), `B` (BOOLEAN), checked against the query's schema. Values print as Braid's
//! CSV output prints them, null as `NULL`, an empty string as `(empty)`. A failing
//! record is reported with its file and line.
//!
//! `SLT=windows,joins cargo test -p braid-exec --test slt` runs only those files;
//! libtest's own filter works on the trial names (`windows.slt serial`, `... 2 workers`).

use braid_exec::error::Error;
use braid_exec::runtime::RunConfig;
use braid_exec::session::Session;
use braid_plan::batch::Scalar;
use braid_plan::function::Registry;
use braid_plan::types::DataType;
use sqllogictest::harness::{run, Arguments, Failed, Trial};
use sqllogictest::{ColumnType, DBOutput, Runner, DB};
use std::path::{Path, PathBuf};

/// A result column's type, as a query record names it.
#[derive(Debug, PartialEq, Eq, Clone)]
enum Type {
    Int,
    Float,
    Text,
    Bool,
}

impl ColumnType for Type {
    fn from_char(c: char) -> Option<Type> {
        match c {
            'I' => Some(Type::Int),
            'R' => Some(Type::Float),
            'T' => Some(Type::Text),
            'B' => Some(Type::Bool),
            _ => None,
        }
    }

    fn to_char(&self) -> char {
        match self {
            Type::Int => 'I',
            Type::Float => 'R',
            Type::Text => 'T',
            Type::Bool => 'B',
        }
    }
}

/// How a file is run.
#[derive(Debug, Clone, Copy)]
enum Mode {
    /// `SET parallel = 'off'`: every query in one partition, on one worker.
    Serial,
    /// Parallelized automatically, on this many workers.
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

/// A session over one .slt file; paths in it are relative to the file.
struct Braid {
    session: Session,
    base: PathBuf,
    sinks: usize,
}

impl Braid {
    fn new(mode: Mode, base: &Path) -> Result<Braid, Error> {
        let workers = match mode {
            Mode::Serial => 1,
            Mode::Workers(n) => n,
        };
        // `--on-error fail`: a runtime fault or malformed record is the query's error
        // (`query error <regex>`), never a row quietly missing.
        let config = RunConfig {
            workers,
            read: braid_exec::source::ReadOptions {
                strict: true,
                ..RunConfig::default().read
            },
            ..RunConfig::default()
        };
        let mut session = Session::new(&Registry::with_builtins(), config);
        if let Mode::Serial = mode {
            session.compile("SET parallel = 'off';", base)?;
        }
        Ok(Braid {
            session,
            base: base.to_path_buf(),
            sinks: 0,
        })
    }

    /// Compiles `sql` into a fresh collecting sink, runs every pending query and returns
    /// this query's rows and column types.
    fn query(&mut self, sql: &str) -> Result<DBOutput<Type>, Error> {
        // Refusals are reported at the line and column of the text as written.
        self.session.explain_statements(sql, &self.base, false)?;
        self.sinks += 1;
        let sink = format!("slt_out_{}", self.sinks);
        let declare = format!("CREATE SINK {sink} WITH (sink = 'collect');");
        self.session.compile(&declare, &self.base)?;
        let added = self
            .session
            .compile(&format!("INSERT INTO {sink} {sql}"), &self.base)?;
        let &[index] = added.as_slice() else {
            return Err(Error::Internal(format!("{sql}: not one query")));
        };
        let reports = self.session.run_pending()?;
        let job = &self.session.script().jobs[index];
        let (owner, plan) = job.runs_in.unwrap_or((index, 0));
        let report = reports
            .iter()
            .find(|r| r.query == owner)
            .ok_or_else(|| Error::Internal(format!("query {index} did not run")))?;
        let rows = match plan {
            0 => &report.run.collected,
            p => &report.run.collected_late[p - 1],
        };
        let schema = job.logical.as_ref().map(|l| l.schema().clone());
        let tys: Vec<DataType> = schema
            .map(|s| s.fields.iter().map(|f| f.ty).collect())
            .unwrap_or_default();
        let types = tys.iter().map(|t| type_of(*t)).collect();
        let rows = rows
            .iter()
            .map(|r| {
                r.values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| text(v, tys.get(i).copied()))
                    .collect()
            })
            .collect();
        Ok(DBOutput::Rows { types, rows })
    }
}

fn type_of(ty: DataType) -> Type {
    match ty {
        DataType::Int64 => Type::Int,
        DataType::Float64 => Type::Float,
        DataType::String
        | DataType::Timestamp
        | DataType::TimestampTz
        | DataType::Date
        | DataType::Float64Array
        | DataType::Int64Array => Type::Text,
        DataType::Bool => Type::Bool,
    }
}

/// A value as the CSV sink writes it (times as ISO text); null as `NULL`, the empty
/// string as `(empty)`.
fn text(v: &Scalar, ty: Option<DataType>) -> String {
    match (v, ty) {
        (Scalar::Null, _) => "NULL".into(),
        (Scalar::Str(s), _) if s.is_empty() => "(empty)".into(),
        (Scalar::Int(i), Some(t)) if t.is_time() => braid_plan::time::format(*i, t),
        (v, _) => v.to_string(),
    }
}

fn is_query(sql: &str) -> bool {
    let head = sql.trim_start().to_ascii_lowercase();
    head.starts_with("select") || head.starts_with("with") || head.starts_with('(')
}

impl DB for Braid {
    type Error = Error;
    type ColumnType = Type;

    fn run(&mut self, sql: &str) -> Result<DBOutput<Type>, Error> {
        if is_query(sql) {
            return self.query(sql);
        }
        self.session.compile(sql, &self.base)?;
        Ok(DBOutput::StatementComplete(0))
    }

    fn engine_name(&self) -> &str {
        "braid"
    }
}

fn run_file(path: &Path, mode: Mode) -> Result<(), Failed> {
    let base = path.parent().expect("a file in tests/slt").to_path_buf();
    let mut runner = Runner::new(move || {
        let base = base.clone();
        async move { Braid::new(mode, &base) }
    });
    runner.with_column_validator(sqllogictest::strict_column_validator);
    runner
        .run_file(path)
        .map_err(|e| Failed::from(format!("{mode}: {}", e.display(false))))
}

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/slt");
    let only: Option<Vec<String>> = std::env::var("SLT")
        .ok()
        .map(|s| s.split(',').map(|n| n.trim().to_string()).collect());
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/slt")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "slt"))
        .collect();
    files.sort();
    let mut trials = Vec::new();
    for path in files {
        let stem = path.file_stem().unwrap().to_string_lossy().to_string();
        if only.as_ref().is_some_and(|o| !o.contains(&stem)) {
            continue;
        }
        for mode in [
            Mode::Serial,
            Mode::Workers(1),
            Mode::Workers(2),
            Mode::Workers(4),
        ] {
            let path = path.clone();
            trials.push(Trial::test(format!("{stem}.slt {mode}"), move || {
                run_file(&path, mode)
            }));
        }
    }
    assert!(
        !trials.is_empty(),
        "no .slt file under {} matches SLT",
        dir.display()
    );
    run(&Arguments::from_args(), trials).exit();
}
