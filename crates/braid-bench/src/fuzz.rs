//! `braid-bench fuzz`: a differential query fuzzer (SQLancer / sqlsmith style) of
//! Braid against DuckDB.
//!
//! Random small CSV inputs (two streams and a table: [`data`]) and random queries
//! ([`ast`]: projections, filters, CASE, string functions, aggregates with FILTER and
//! HAVING, DISTINCT, every window kind, interval joins inner and outer, lookups, CTEs,
//! views, UNION ALL, ORDER BY ... LIMIT) rendered as Braid SQL and as the DuckDB batch
//! SQL that means the same. Each query runs on Braid in this process (serially and
//! parallelized on each worker count asked for) and on DuckDB (the PyPI package, in one
//! long-lived `python3` child: [`engines`]); results are compared as multisets (in
//! order under ORDER BY), doubles with a relative tolerance. A refusal by Braid (`not
//! supported: ...`) is an agreement, counted per construct; a panic, a hang, another
//! error, late rows (the data keeps the late-row rule) or another answer is a failure,
//! shrunk (rows dropped, the query simplified) while it fails the same way, and written
//! with its script and CSV files under `--out`.
//!
//! ```text
//! cargo run --release -p braid-bench -- fuzz --minutes 10 --seed 1 --out /tmp/braid-fuzz
//! ```

pub mod ast;
pub mod data;
pub mod engines;

use anyhow::{Context, Result};
use ast::Query;
use data::{Dataset, Features, Rng, Val};
use engines::{Braid, BraidOut, Duck, DuckOut, Mode};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Options of `braid-bench fuzz`.
#[derive(clap::Args, Clone, Debug)]
pub struct FuzzArgs {
    /// How long to generate queries (minutes; fractions allowed).
    #[arg(long, default_value_t = 5.0)]
    pub minutes: f64,
    /// Stop after this many queries instead (whichever comes first).
    #[arg(long)]
    pub queries: Option<usize>,
    /// The seed of every random choice.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Worker counts Braid runs each query on (besides the serial run).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    pub workers: Vec<usize>,
    /// Where the data, the failures and the summary go.
    #[arg(long, default_value = "/tmp/braid-fuzz")]
    pub out: PathBuf,
    /// Queries per generated dataset.
    #[arg(long, default_value_t = 20)]
    pub per_dataset: usize,
    /// Data features left out (known defects): empty_strings, negative_times,
    /// padded_table_text.
    #[arg(long, default_value = "")]
    pub without: String,
    /// Queries using any of these constructs (names as the summary counts them) are
    /// not generated.
    #[arg(long, value_delimiter = ',')]
    pub skip: Vec<String>,
    /// Failures shrunk at most (the others are written as found).
    #[arg(long, default_value_t = 12)]
    pub shrink_max: usize,
    /// Seconds one shrink may take.
    #[arg(long, default_value_t = 90)]
    pub shrink_seconds: u64,
    /// Failures written with their files at most (all are counted).
    #[arg(long, default_value_t = 200)]
    pub keep: usize,
    /// The Python with duckdb installed.
    #[arg(long, default_value = "python3")]
    pub python: String,
    /// Seconds a Braid run may take before it counts as a hang.
    #[arg(long, default_value_t = 20)]
    pub timeout: u64,
}

/// A failure: what went wrong, where, and its (shrunk) reproduction.
#[derive(Clone, Debug)]
pub struct Failure {
    /// `seed:dataset:query`.
    pub id: String,
    /// wrong answer, late rows, panic, hang, error, fault.
    pub kind: String,
    /// The run that failed.
    pub mode: Mode,
    /// What differed (rows, message).
    pub detail: String,
    /// The Braid query (and a view before it).
    pub braid_sql: String,
    /// The DuckDB query.
    pub duck_sql: String,
    /// Whether it was shrunk.
    pub shrunk: bool,
    /// The directory with its script and files.
    pub dir: PathBuf,
    /// The constructs the (shrunk) query uses.
    pub constructs: BTreeSet<String>,
}

/// What a fuzzing run found.
#[derive(Debug, Default)]
pub struct Summary {
    /// Queries generated and run.
    pub queries: usize,
    /// Wall time.
    pub elapsed: Duration,
    /// Queries per construct.
    pub constructs: BTreeMap<String, usize>,
    /// Refusals by Braid per construct, with an example message.
    pub refusals: BTreeMap<String, (usize, String)>,
    /// Queries both engines refused (an error each).
    pub both_errors: usize,
    /// Queries DuckDB refused but Braid ran (the generator's mistakes, not Braid's).
    pub oracle_errors: Vec<(String, String)>,
    /// Agreements.
    pub agreed: usize,
    /// Failures, the first `--keep` of them with their files.
    pub failures: Vec<Failure>,
    /// Failures per kind (all of them).
    pub failure_kinds: BTreeMap<String, usize>,
}

/// The outcome of one query.
#[derive(Clone, Debug)]
enum Verdict {
    Agree,
    Refused(String),
    BothError,
    OracleError(String),
    Fail {
        kind: String,
        mode: Mode,
        detail: String,
    },
}

impl Verdict {
    /// What makes two failures the same: the kind and, for an error or panic, its
    /// message without numbers.
    fn signature(&self) -> Option<String> {
        match self {
            Verdict::Fail { kind, detail, .. } => Some(match kind.as_str() {
                "error" | "panic" | "fault" => {
                    let m: String = detail
                        .chars()
                        .filter(|c| !c.is_ascii_digit())
                        .take(80)
                        .collect();
                    format!("{kind}: {m}")
                }
                _ => kind.clone(),
            }),
            _ => None,
        }
    }
}

fn num(v: &Val) -> Option<f64> {
    match v {
        Val::Int(i) => Some(*i as f64),
        Val::Float(f) => Some(*f),
        _ => None,
    }
}

fn close(a: f64, b: f64) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-300) || (a - b).abs() < 1e-12
}

fn same(a: &Val, b: &Val) -> bool {
    match (a, b) {
        (Val::Int(x), Val::Int(y)) => x == y,
        (Val::Null, Val::Null) => true,
        (Val::Str(x), Val::Str(y)) => x == y,
        (Val::Bool(x), Val::Bool(y)) => x == y,
        _ => match (num(a), num(b)) {
            (Some(x), Some(y)) => close(x, y),
            _ => false,
        },
    }
}

fn rank(v: &Val) -> u8 {
    match v {
        Val::Null => 0,
        Val::Bool(_) => 1,
        Val::Int(_) | Val::Float(_) => 2,
        Val::Str(_) => 3,
    }
}

fn order(a: &Val, b: &Val) -> std::cmp::Ordering {
    match (a, b) {
        (Val::Str(x), Val::Str(y)) => x.cmp(y),
        (Val::Bool(x), Val::Bool(y)) => x.cmp(y),
        (Val::Int(x), Val::Int(y)) => x.cmp(y),
        _ => match (num(a), num(b)) {
            // + 0.0 makes -0.0 0.0: they are equal (SQL), so they sort together.
            (Some(x), Some(y)) => (x + 0.0).total_cmp(&(y + 0.0)),
            _ => rank(a).cmp(&rank(b)),
        },
    }
}

fn row_order(a: &[Val], b: &[Val]) -> std::cmp::Ordering {
    for (x, y) in a.iter().zip(b) {
        let o = order(x, y);
        if o != std::cmp::Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

/// A row as the reports show it.
pub fn show(row: &[Val]) -> String {
    let vals: Vec<String> = row
        .iter()
        .map(|v| match v {
            Val::Null => "NULL".into(),
            Val::Int(i) => i.to_string(),
            Val::Float(f) => format!("{f:?}"),
            Val::Str(s) => format!("{s:?}"),
            Val::Bool(b) => b.to_string(),
        })
        .collect();
    format!("({})", vals.join(", "))
}

/// None when the rows agree; else what differs. Unordered results are compared as
/// multisets (both sorted); ordered ones row by row.
fn compare(braid: &[Vec<Val>], duck: &[Vec<Val>], ordered: bool) -> Option<String> {
    let (mut b, mut d) = (braid.to_vec(), duck.to_vec());
    if !ordered {
        b.sort_by(|x, y| row_order(x, y));
        d.sort_by(|x, y| row_order(x, y));
    }
    let equal = b.len() == d.len()
        && b.iter()
            .zip(&d)
            .all(|(x, y)| x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q)));
    if equal {
        return None;
    }
    let mut out = format!("Braid {} rows, DuckDB {} rows", b.len(), d.len());
    if ordered {
        let _ = write!(out, " (in order)\nBraid:");
        for r in b.iter().take(20) {
            let _ = write!(out, "\n  {}", show(r));
        }
        let _ = write!(out, "\nDuckDB:");
        for r in d.iter().take(20) {
            let _ = write!(out, "\n  {}", show(r));
        }
        return Some(out);
    }
    // The multiset differences.
    let mut only_d = d.clone();
    let mut only_b = Vec::new();
    for r in &b {
        match only_d
            .iter()
            .position(|x| x.len() == r.len() && x.iter().zip(r).all(|(p, q)| same(p, q)))
        {
            Some(i) => {
                only_d.remove(i);
            }
            None => only_b.push(r.clone()),
        }
    }
    if only_b.is_empty() && only_d.is_empty() {
        // Equal as multisets after all (values within the tolerance sorted apart).
        return None;
    }
    let _ = write!(out, "\nonly in Braid ({}):", only_b.len());
    for r in only_b.iter().take(15) {
        let _ = write!(out, "\n  {}", show(r));
    }
    let _ = write!(out, "\nonly in DuckDB ({}):", only_d.len());
    for r in only_d.iter().take(15) {
        let _ = write!(out, "\n  {}", show(r));
    }
    Some(out)
}

/// Runs queries on both engines over one dataset at a time.
struct Fuzzer {
    braid: Braid,
    duck: Duck,
    modes: Vec<Mode>,
    loaded: Option<PathBuf>,
}

impl Fuzzer {
    fn load(&mut self, ds: &Dataset, dir: &Path) -> Result<()> {
        if self.loaded.as_deref() != Some(dir) {
            ds.write(dir)?;
            self.duck.load(ds, dir)?;
            self.loaded = Some(dir.to_path_buf());
        }
        Ok(())
    }

    /// Runs `q` on DuckDB and on Braid in `modes`.
    fn check(&mut self, q: &Query, ds: &Dataset, dir: &Path, modes: &[Mode]) -> Result<Verdict> {
        let duck_sql = ast::duck(q, ds);
        let duck = self.duck.query(&duck_sql)?;
        let b = ast::braid(q);
        let decls = ds.declarations();
        for &mode in modes {
            let out = self.braid.run(dir, &decls, mode, b.pre.as_deref(), &b.sql);
            let fail = |kind: &str, detail: String| Verdict::Fail {
                kind: kind.into(),
                mode,
                detail,
            };
            match (out, &duck) {
                (BraidOut::Error(e), _) if refusal(&e) => return Ok(Verdict::Refused(e)),
                (BraidOut::Error(_), DuckOut::Error(_)) => return Ok(Verdict::BothError),
                (BraidOut::Error(e), DuckOut::Rows(_)) => {
                    let kind = if e.contains("--on-error skip") {
                        "fault"
                    } else {
                        "error"
                    };
                    return Ok(fail(kind, e));
                }
                (BraidOut::Panic(p), _) => return Ok(fail("panic", p)),
                (BraidOut::Hang, _) => return Ok(fail("hang", "no answer in time".into())),
                (BraidOut::Rows { .. }, DuckOut::Error(e)) => {
                    return Ok(Verdict::OracleError(e.clone()))
                }
                (BraidOut::Rows { rows, late }, DuckOut::Rows(d)) => {
                    if late > 0 {
                        return Ok(fail("late rows", format!("{late} row(s) refused as late")));
                    }
                    if let Some(diff) = compare(&rows, d, q.ordered()) {
                        // SQL's aggregate without GROUP BY has one row even over no
                        // rows; Braid's has none. Its own kind, so that it is told
                        // apart from other wrong answers (and can be known-failing).
                        let kind = if rows.is_empty()
                            && d.len() == 1
                            && q.constructs().contains("global aggregate")
                        {
                            "no row from a global aggregate of no rows"
                        } else {
                            "wrong answer"
                        };
                        return Ok(fail(kind, diff));
                    }
                }
            }
        }
        Ok(Verdict::Agree)
    }
}

/// Whether Braid's error refuses a construct by name (documented as not built, or
/// refused on purpose), which counts as an agreement.
fn refusal(e: &str) -> bool {
    e.contains("not supported")
        // A window over a FULL join: "a FULL join has none [event time]: a window
        // over it is refused" (query-language.md).
        || e.contains("its event-time column is none")
}

/// The seed of query `q` of dataset `d`.
fn rng_for(seed: u64, d: usize, q: Option<usize>) -> Rng {
    let mut r = Rng::new(seed);
    let a = r.next_u64() ^ (d as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let b = q.map_or(0, |q| (q as u64 + 1).wrapping_mul(0xC2B2_AE3D_27D4_EB4F));
    Rng::new(a ^ b)
}

/// Runs the fuzzer as `args` says and writes its summary under `args.out`.
pub fn fuzz(args: &FuzzArgs) -> Result<Summary> {
    let features = Features::without(&args.without)?;
    let work = args.out.join("work");
    let failures_dir = args.out.join("failures");
    std::fs::create_dir_all(&failures_dir)
        .with_context(|| format!("cannot create {}", failures_dir.display()))?;
    let mut modes = vec![Mode::Serial];
    modes.extend(args.workers.iter().map(|&w| Mode::Workers(w.max(1))));
    let mut fz = Fuzzer {
        braid: Braid::new(Duration::from_secs(args.timeout)),
        duck: Duck::start(&args.python)?,
        modes,
        loaded: None,
    };
    let skip: BTreeSet<String> = args.skip.iter().map(|s| s.trim().to_string()).collect();
    let mut summary = Summary::default();
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(args.minutes * 60.0);
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut shrunk = 0;
    'datasets: for d in 0.. {
        let ds = data::generate(&mut rng_for(args.seed, d, None), features);
        let dir = work.join(format!("d{d}"));
        fz.load(&ds, &dir)?;
        for qi in 0..args.per_dataset.max(1) {
            if Instant::now() >= deadline || args.queries.is_some_and(|n| summary.queries >= n) {
                break 'datasets;
            }
            let mut rng = rng_for(args.seed, d, Some(qi));
            let q = loop {
                let q = ast::generate(&mut rng, &ds);
                if q.constructs().is_disjoint(&skip) {
                    break q;
                }
            };
            summary.queries += 1;
            let constructs = q.constructs();
            for c in &constructs {
                *summary.constructs.entry(c.clone()).or_default() += 1;
            }
            let modes = fz.modes.clone();
            fz.load(&ds, &dir)?;
            let verdict = fz.check(&q, &ds, &dir, &modes)?;
            let id = format!("{}:{d}:{qi}", args.seed);
            match &verdict {
                Verdict::Agree => summary.agreed += 1,
                Verdict::BothError => summary.both_errors += 1,
                Verdict::Refused(msg) => {
                    for c in &constructs {
                        let e = summary
                            .refusals
                            .entry(c.clone())
                            .or_insert((0, msg.clone()));
                        e.0 += 1;
                    }
                }
                Verdict::OracleError(e) => {
                    summary.oracle_errors.push((ast::duck(&q, &ds), e.clone()))
                }
                Verdict::Fail { kind, mode, .. } => {
                    *summary.failure_kinds.entry(kind.clone()).or_default() += 1;
                    if summary.failures.len() >= args.keep {
                        continue;
                    }
                    let sig = verdict.signature().unwrap_or_default();
                    let first_of_kind = seen.insert(format!("{sig} {constructs:?}"));
                    let (q2, ds2, v2, did) = if first_of_kind && shrunk < args.shrink_max {
                        shrunk += 1;
                        eprintln!("fuzz: {id}: {kind} on {mode}; shrinking");
                        let dir2 = args.out.join("shrink");
                        let r = shrink(
                            &mut fz,
                            &q,
                            &ds,
                            &verdict,
                            *mode,
                            &dir2,
                            args.shrink_seconds,
                        )?;
                        fz.loaded = None;
                        fz.load(&ds, &dir)?;
                        (r.0, r.1, r.2, true)
                    } else {
                        (q.clone(), ds.clone(), verdict.clone(), false)
                    };
                    let n = summary.failures.len();
                    let fdir = failures_dir.join(format!("f{n:03}"));
                    let f = write_failure(&fdir, &id, &q2, &ds2, &v2, did)?;
                    eprintln!("fuzz: {id}: {} on {} -> {}", f.kind, f.mode, fdir.display());
                    summary.failures.push(f);
                }
            }
        }
    }
    summary.elapsed = start.elapsed();
    let md = summary_markdown(&summary, args);
    let path = args.out.join("summary.md");
    std::fs::write(&path, md).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(summary)
}

/// Shrinks a failure: rows dropped, then the query simplified, while it fails the same
/// way on `mode`; returns the smallest query and data found and their verdict.
fn shrink(
    fz: &mut Fuzzer,
    q: &Query,
    ds: &Dataset,
    verdict: &Verdict,
    mode: Mode,
    dir: &Path,
    seconds: u64,
) -> Result<(Query, Dataset, Verdict)> {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let sig = verdict.signature();
    let mut best = (q.clone(), ds.clone(), verdict.clone());
    let mut attempt = 0usize;
    let mut tries = |fz: &mut Fuzzer, q: &Query, ds: &Dataset| -> Result<Option<Verdict>> {
        attempt += 1;
        let d = dir.join(format!("a{attempt}"));
        fz.loaded = None;
        fz.load(ds, &d)?;
        let v = fz.check(q, ds, &d, &[mode])?;
        let _ = std::fs::remove_dir_all(&d);
        Ok((v.signature() == sig).then_some(v))
    };
    for round in 0..2 {
        // Rows: chunks of halving size, table last.
        for which in 0..3 {
            let len = best.1.rels()[which].rows.len();
            let mut chunk = len.div_ceil(2).max(1);
            loop {
                let mut i = 0;
                while i < best.1.rels()[which].rows.len() {
                    if Instant::now() >= deadline {
                        return Ok(best);
                    }
                    let n = best.1.rels()[which].rows.len();
                    let keep: Vec<bool> = (0..n).map(|j| j < i || j >= i + chunk).collect();
                    let mut cand = best.1.clone();
                    match which {
                        0 => cand.s1 = cand.s1.keep(&keep),
                        1 => cand.s2 = cand.s2.keep(&keep),
                        _ => cand.t = cand.t.keep(&keep),
                    }
                    if let Some(v) = tries(fz, &best.0, &cand)? {
                        best = (best.0.clone(), cand, v);
                    } else {
                        i += chunk;
                    }
                }
                if chunk == 1 {
                    break;
                }
                chunk = chunk.div_ceil(2);
            }
        }
        if round == 1 {
            break;
        }
        // The query: the first simplification that still fails, until none does.
        'simplify: loop {
            for cand in ast::simplifications(&best.0, &best.1) {
                if Instant::now() >= deadline {
                    return Ok(best);
                }
                if let Some(v) = tries(fz, &cand, &best.1)? {
                    best = (cand, best.1.clone(), v);
                    continue 'simplify;
                }
            }
            break;
        }
    }
    Ok(best)
}

fn write_failure(
    dir: &Path,
    id: &str,
    q: &Query,
    ds: &Dataset,
    v: &Verdict,
    shrunk: bool,
) -> Result<Failure> {
    ds.write(dir)?;
    let Verdict::Fail { kind, mode, detail } = v else {
        anyhow::bail!("{id}: not a failure");
    };
    let b = ast::braid(q);
    let duck_sql = ast::duck(q, ds);
    let mut script = String::new();
    let _ = writeln!(
        script,
        "-- braid-bench fuzz {id}: {kind} on {mode}{}\n-- braid run script.sql{}",
        if shrunk { " (shrunk)" } else { "" },
        match mode {
            Mode::Serial => String::new(),
            Mode::Workers(n) => format!(" --workers {n}"),
        }
    );
    if *mode == Mode::Serial {
        script.push_str("SET parallel = 'off';\n");
    }
    script.push_str(&ds.declarations());
    if let Some(pre) = &b.pre {
        let _ = writeln!(script, "{pre}");
    }
    let _ = writeln!(script, "{};", b.sql);
    let write = |name: &str, text: &str| -> Result<()> {
        let p = dir.join(name);
        std::fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))
    };
    write("script.sql", &script)?;
    write("duckdb.sql", &format!("{duck_sql};\n"))?;
    write("detail.txt", &format!("{kind} on {mode}\n{detail}\n"))?;
    let braid_sql = match &b.pre {
        Some(p) => format!("{p}\n{};", b.sql),
        None => format!("{};", b.sql),
    };
    Ok(Failure {
        id: id.to_string(),
        kind: kind.clone(),
        mode: *mode,
        detail: detail.clone(),
        braid_sql,
        duck_sql,
        shrunk,
        dir: dir.to_path_buf(),
        constructs: q.constructs(),
    })
}

/// The summary as markdown.
pub fn summary_markdown(s: &Summary, args: &FuzzArgs) -> String {
    let mut out = String::new();
    let minutes = s.elapsed.as_secs_f64() / 60.0;
    let _ = writeln!(out, "# braid-bench fuzz: seed {}\n", args.seed);
    let _ = writeln!(
        out,
        "{} queries in {:.1} min ({:.0} queries/min), each on DuckDB and on Braid serially and on {:?} workers: {} agreed, {} refused by Braid, {} refused by both, {} not valid DuckDB (generator), {} failures.\n",
        s.queries,
        minutes,
        s.queries as f64 / minutes.max(1e-9),
        args.workers,
        s.agreed,
        s.queries
            - s.agreed
            - s.both_errors
            - s.oracle_errors.len()
            - s.failure_kinds.values().sum::<usize>(),
        s.both_errors,
        s.oracle_errors.len(),
        s.failure_kinds.values().sum::<usize>()
    );
    for (k, n) in &s.failure_kinds {
        let _ = writeln!(out, "- {k}: {n}");
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "## Constructs\n\n| construct | queries | refused by Braid | example refusal |\n|---|---:|---:|---|");
    for (c, n) in &s.constructs {
        let (r, msg) = s
            .refusals
            .get(c)
            .map(|(r, m)| (*r, m.lines().next().unwrap_or("").replace('|', "\\|")))
            .unwrap_or((0, String::new()));
        let msg: String = msg.chars().take(120).collect();
        let _ = writeln!(out, "| {c} | {n} | {r} | {msg} |");
    }
    let _ = writeln!(out, "\n## Failures\n");
    if s.failures.is_empty() {
        let _ = writeln!(out, "None.");
    }
    for f in &s.failures {
        let _ = writeln!(
            out,
            "### {} {} on {}{} ({})\n\nFiles: `{}`\n\n```sql\n{}\n```\n\nDuckDB:\n\n```sql\n{}\n```\n\n```text\n{}\n```\n",
            f.id,
            f.kind,
            f.mode,
            if f.shrunk { ", shrunk" } else { "" },
            f.constructs.iter().cloned().collect::<Vec<_>>().join(", "),
            f.dir.display(),
            f.braid_sql,
            f.duck_sql,
            f.detail.chars().take(3000).collect::<String>()
        );
    }
    if !s.oracle_errors.is_empty() {
        let _ = writeln!(
            out,
            "\n## Queries DuckDB refused (the generator's mistakes)\n"
        );
        for (q, e) in s.oracle_errors.iter().take(10) {
            let _ = writeln!(
                out,
                "- `{}`: {}",
                q.replace('`', "'"),
                e.lines().next().unwrap_or("")
            );
        }
    }
    out
}

/// `braid-bench fuzz`.
pub fn run(args: FuzzArgs) -> Result<()> {
    let s = fuzz(&args)?;
    let minutes = s.elapsed.as_secs_f64() / 60.0;
    println!(
        "fuzz: {} queries in {:.1} min ({:.0}/min), {} failures; summary in {}",
        s.queries,
        minutes,
        s.queries as f64 / minutes.max(1e-9),
        s.failure_kinds.values().sum::<usize>(),
        args.out.join("summary.md").display()
    );
    Ok(())
}
