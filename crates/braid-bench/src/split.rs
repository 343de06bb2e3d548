//! `braid-bench split`: the thesis's split experiments on this machine.
//!
//! Measures throughput and process CPU seconds of every split strategy on the built-in
//! generator with the counting stream function (nearly free, so the split and the
//! engine dominate: "routing only"), for q = 2..512 at b = 0.5 % and for b = 0..100 %
//! at q = 64 (plus q = 512 at b = 10 %), on 1 and 2 workers, next to a single-threaded
//! baseline loop that generates the same tuples and routes them to per-partition
//! counters with no engine. Reports medians, the efficiency `η` of eq. 7 (measured from
//! CPU time), the target ratios of the spec and the load seen, and writes `split.csv`,
//! `split-targets.csv`, `split-results.md` and the SVG plots `split-q.svg`,
//! `split-q-1w.svg`, `split-cpu-q.svg` and `split-b.svg`.
//!
//! ```text
//! cargo run --release -p braid-bench -- split --quick
//! ```

use crate::host;
use crate::measure::{measure, median, Measured};
use crate::plot::{Chart, Series};
use crate::probe::probe_costs;
use crate::query::{gen_spec, pct, plan, KEYS};
use crate::report::{markdown_table, round, write_csv, Align};
use anyhow::{Context, Result};
use braid_exec::source::generator::tuple;
use braid_exec::tune::{describe, resolved_shape, split_ref};
use braid_plan::function::Registry;
use braid_plan::plan::{GeneratorSpec, Strategy};
use serde::Serialize;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

/// Options of `braid-bench split`.
#[derive(clap::Args)]
pub struct SplitArgs {
    /// Most tuples per measurement. Each point runs about --target-secs, with at least
    /// --min-tuples and at most this many tuples (a pilot run sets the count); the
    /// baseline loop runs this many.
    #[arg(long, default_value_t = 20_000_000)]
    tuples: u64,
    /// Fewest tuples per measurement.
    #[arg(long, default_value_t = 100_000)]
    min_tuples: u64,
    /// Aimed-for wall time of one measurement, in seconds.
    #[arg(long, default_value_t = 0.4)]
    target_secs: f64,
    /// Worker counts to measure (comma separated).
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    workers: Vec<usize>,
    /// Repetitions per point (the median is reported).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Physical window size W (rows).
    #[arg(long, default_value_t = 1024)]
    window: usize,
    /// Generator tuples per event-time second (= per epoch).
    #[arg(long, default_value_t = 20_000.0)]
    rate: f64,
    /// Smoke test: q in {2, 64, 512}, b in {0, 0.5, 10} %, one short run per point
    /// (a few seconds); writes to target/bench-quick unless --out is given.
    #[arg(long)]
    quick: bool,
    /// Output directory (default docs/benchmarks).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Only these q for the sweep at b = 0.5% (comma separated; e.g. for a focused
    /// 1-vs-2-worker check when the machine is quiet).
    #[arg(long, value_delimiter = ',')]
    qs: Option<Vec<u32>>,
    /// Only these broadcast fractions (0..1) for the sweep at q = 64.
    #[arg(long, value_delimiter = ',')]
    bs: Option<Vec<f64>>,
    /// Only these strategies (comma separated: fsplit, maxtree, exptree, parasplit).
    #[arg(long, value_delimiter = ',')]
    strategies: Option<Vec<String>>,
    /// Also run every strategy across this many processes of one worker each on this
    /// machine (as `braid run --launch N` does, with the `braid` binary beside this
    /// one) at q = 64 and 512 (or --qs), b = 0.5%; 0 or 1 leaves it out (as --quick
    /// does).
    #[arg(long, default_value_t = 2)]
    processes: usize,
    /// Tuples per run across processes.
    #[arg(long, default_value_t = 4_000_000)]
    process_tuples: u64,
}

const STRATEGIES: [Strategy; 4] = [
    Strategy::Fsplit,
    Strategy::Maxtree,
    Strategy::Exptree,
    Strategy::Parasplit,
];
/// Tuples of the no-engine probes (generation, one splitter) behind η.
const PROBE_TUPLES: u64 = 200_000;

/// Generation of whole tuples plus hand-written routing to per-partition counters (a
/// broadcast row counts on every partition, as `count` does), one thread, no engine:
/// the reference for overhead. Returns rows/s and seconds per tuple (one thread: CPU =
/// wall time).
fn baseline(spec: &GeneratorSpec, q: u32) -> (f64, f64) {
    let t = Instant::now();
    let mut counts = vec![0u64; q as usize];
    let mut f = [0i64; 15];
    for i in 0..spec.tuples {
        tuple(spec, i, &mut f);
        // The whole tuple is made, as a source would deliver it (without this the
        // compiler computes only the two fields the routing reads).
        std::hint::black_box(&mut f);
        if f[0] == 2 {
            for c in counts.iter_mut() {
                *c += 1;
            }
        } else {
            counts[(f[4].rem_euclid(i64::from(q))) as usize] += 1;
        }
    }
    std::hint::black_box(&counts);
    let secs = t.elapsed().as_secs_f64().max(1e-9);
    (spec.tuples as f64 / secs, secs / spec.tuples.max(1) as f64)
}

/// One measured configuration.
#[derive(Clone, Debug)]
struct Point {
    q: u32,
    b: f64,
    workers: usize,
    strategy: Strategy,
    /// Tuples per run.
    n: u64,
    runs: Vec<Measured>,
    /// What the optimizer made of the strategy.
    shape: String,
}

impl Point {
    fn rate(&self) -> f64 {
        median(self.runs.iter().map(|r| r.rate).collect())
    }
    /// Median CPU seconds per million input tuples.
    fn cpu_per_m(&self) -> f64 {
        median(
            self.runs
                .iter()
                .map(|r| r.cpu / r.rows.max(1) as f64 * 1e6)
                .collect(),
        )
    }
    fn cpu(&self) -> f64 {
        median(self.runs.iter().map(|r| r.cpu).collect())
    }
    fn others(&self) -> f64 {
        median(self.runs.iter().map(|r| r.others).collect())
    }
}

/// A line of `split.csv`: a measured point, a baseline loop or the no-engine components.
#[derive(Serialize)]
struct CsvRow {
    experiment: String,
    strategy: String,
    shape: String,
    q: u32,
    b: f64,
    workers: usize,
    tuples: u64,
    reps: usize,
    rows_per_s: u64,
    cpu_s: Option<f64>,
    cpu_s_per_mtuple: f64,
    eta: Option<f64>,
    baseline_rows_per_s: u64,
    ratio_to_baseline: f64,
    other_cores: Option<f64>,
}

/// A line of `split-targets.csv`.
#[derive(Serialize)]
struct TargetRow {
    target: String,
    value: f64,
    threshold: f64,
    met: &'static str,
    detail: String,
}

/// The strategies to measure: all, or those `--strategies` names.
fn chosen(a: &SplitArgs) -> Vec<Strategy> {
    STRATEGIES
        .into_iter()
        .filter(|s| {
            a.strategies.as_ref().is_none_or(|only| {
                only.iter()
                    .any(|o| o.eq_ignore_ascii_case(&format!("{s:?}")))
            })
        })
        .collect()
}

/// A line of `split-processes.csv`: one strategy across processes.
#[derive(Serialize)]
struct ProcessRow {
    q: u32,
    b: f64,
    processes: usize,
    workers_per_process: usize,
    strategy: String,
    tuples: u64,
    reps: usize,
    /// Median of the runs' elapsed time (the slowest process's own report).
    seconds: f64,
    rows_per_s: u64,
    ratio_to_parasplit: f64,
}

/// Every strategy across `a.processes` processes of one worker, launched by the `braid`
/// binary beside this one on the same generated stream and query as the points in one
/// process; `reps` rounds, strategies interleaved.
fn across_processes(a: &SplitArgs, qs: &[u32], reps: usize) -> Result<Vec<ProcessRow>> {
    let braid = std::env::current_exe()?.with_file_name("braid");
    anyhow::ensure!(
        braid.exists(),
        "{} not found: build it first (cargo build --release -p braid-cli), or give --processes 0",
        braid.display()
    );
    let b = 0.005;
    let mut times: HashMap<(u32, String), Vec<f64>> = HashMap::new();
    for round in 0..reps {
        for &q in qs {
            for s in chosen(a) {
                let t = launch(&braid, a, q, b, s)?;
                times.entry((q, s.to_string())).or_default().push(t);
            }
        }
        eprintln!(
            "bench split: across {} processes, round {}/{reps} (load {})",
            a.processes,
            round + 1,
            host::loadavg()
        );
    }
    let mut rows = Vec::new();
    for &q in qs {
        let secs = |s: Strategy| {
            times
                .get(&(q, s.to_string()))
                .map_or(f64::NAN, |t| median(t.clone()))
        };
        for s in chosen(a) {
            let t = secs(s);
            rows.push(ProcessRow {
                q,
                b,
                processes: a.processes,
                workers_per_process: 1,
                strategy: s.to_string(),
                tuples: a.process_tuples,
                reps,
                seconds: round(t, 3),
                rows_per_s: (a.process_tuples as f64 / t) as u64,
                ratio_to_parasplit: round(secs(Strategy::Parasplit) / t, 3),
            });
        }
    }
    Ok(rows)
}

/// One run of the split query across `a.processes` processes on this machine (as
/// `braid run --launch` starts them, each process's report read on its own); the
/// slowest process's elapsed seconds.
fn launch(braid: &std::path::Path, a: &SplitArgs, q: u32, b: f64, s: Strategy) -> Result<f64> {
    let n = a.processes;
    // Each port stays bound until all are found, so that no two are the same.
    let listeners = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()?;
    let hosts: Vec<String> = listeners
        .iter()
        .map(|l| Ok(format!("127.0.0.1:{}", l.local_addr()?.port())))
        .collect::<Result<_>>()?;
    drop(listeners);
    let file = std::env::temp_dir().join(format!("braid-bench-hosts-{}", std::process::id()));
    std::fs::write(&file, hosts.join("\n") + "\n")?;
    let kids = (0..n)
        .map(|i| {
            std::process::Command::new(braid)
                .args(["run", "--workers", "1", "--processes", &n.to_string()])
                .args(["--process-index", &i.to_string()])
                .args(["--hosts", &file.display().to_string()])
                .args(["--tuples", &a.process_tuples.to_string()])
                .args(["--keys", &KEYS.to_string(), "--rate", &a.rate.to_string()])
                .args(["--window", &a.window.to_string()])
                .args([
                    "--broadcast-fraction",
                    &b.to_string(),
                    "--parts",
                    &q.to_string(),
                ])
                .args([
                    "--route",
                    "xway",
                    "--broadcast",
                    "type = 2",
                    "--function",
                    "count",
                ])
                .args(["--merge", "union", "--output", "discard"])
                .args(["--strategy", &s.to_string().to_lowercase()])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .with_context(|| format!("running {}", braid.display()))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut slowest: f64 = 0.0;
    for (i, kid) in kids.into_iter().enumerate() {
        let out = kid.wait_with_output()?;
        let err = String::from_utf8_lossy(&out.stderr);
        anyhow::ensure!(out.status.success(), "braid process {i} failed: {err}");
        // "... rows out in 0.474 s (...)".
        let secs: f64 = err
            .rsplit_once(" rows out in ")
            .and_then(|(_, rest)| rest.split_once(" s")?.0.parse().ok())
            .with_context(|| format!("no elapsed time in process {i}'s report: {err}"))?;
        slowest = slowest.max(secs);
    }
    let _ = std::fs::remove_file(&file);
    Ok(slowest)
}

/// Key of a (q, b) pair (b in units of 0.1 %).
fn qb(q: u32, b: f64) -> (u32, u32) {
    (q, (b * 1000.0).round() as u32)
}

/// Rows/s in millions, two decimals; `-` when not measured.
fn mrows(r: f64) -> String {
    if r.is_finite() {
        format!("{:.2}", r / 1e6)
    } else {
        "-".into()
    }
}

/// `Some(v)` rounded when finite.
fn finite(v: f64, digits: i32) -> Option<f64> {
    v.is_finite().then(|| round(v, digits))
}

/// Runs the benchmark and writes its files.
pub fn run(a: SplitArgs) -> Result<()> {
    let (qs, bs, reps, max_n, min_n, target, out): (Vec<u32>, Vec<f64>, _, _, _, _, _) = if a.quick
    {
        (
            vec![2, 64, 512],
            vec![0.0, 0.005, 0.1],
            1,
            a.tuples.min(100_000),
            a.min_tuples.min(20_000),
            a.target_secs.min(0.02),
            a.out.clone().unwrap_or_else(|| "target/bench-quick".into()),
        )
    } else {
        (
            (1..=9).map(|k| 1u32 << k).collect(),
            vec![0.0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0],
            a.reps.max(1),
            a.tuples,
            a.min_tuples.min(a.tuples),
            a.target_secs,
            a.out.clone().unwrap_or_else(|| "docs/benchmarks".into()),
        )
    };
    let focused = a.qs.is_some() || a.bs.is_some();
    let qs = a.qs.clone().unwrap_or(qs);
    let bs = a.bs.clone().unwrap_or(bs);
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let registry = Registry::with_builtins();
    let started = Instant::now();
    let load_before = host::loadavg();
    let sys0 = host::system_busy();
    let cpu_start = host::process_cpu();
    eprintln!("bench split: load average before {load_before}");

    // (q, b) pairs: the q sweep at 0.5 %, the b sweep at 64, and q = 512 at 10 %.
    let mut pairs: Vec<(u32, f64)> = qs.iter().map(|&q| (q, 0.005)).collect();
    for &b in &bs {
        if !pairs.iter().any(|&(q, x)| q == 64 && qb(q, x) == qb(64, b)) {
            pairs.push((64, b));
        }
    }
    if !focused && !pairs.iter().any(|&(q, b)| qb(q, b) == qb(512, 0.1)) {
        pairs.push((512, 0.1));
    }

    // Baseline loop and the CPU probes for η, per (q, b).
    let mut base: HashMap<(u32, u32), (f64, f64)> = HashMap::new();
    let mut gen_cost: HashMap<u32, f64> = HashMap::new();
    let mut split_cost: HashMap<(u32, u32, usize), f64> = HashMap::new();
    for &(q, b) in &pairs {
        let spec = gen_spec(max_n, a.rate, b);
        let runs: Vec<(f64, f64)> = (0..reps).map(|_| baseline(&spec, q)).collect();
        // One thread, timed by the wall clock: the fastest repetition is the least
        // disturbed by other processes.
        let r = runs
            .iter()
            .copied()
            .max_by(|x, y| x.0.total_cmp(&y.0))
            .unwrap_or((f64::NAN, f64::NAN));
        base.insert(qb(q, b), r);
        let probe_spec = gen_spec(max_n.min(PROBE_TUPLES), a.rate, b);
        let key_b = qb(0, b).1;
        let p = braid_exec::runtime::prepare(
            &plan(probe_spec, q, Strategy::Fsplit, a.window)?,
            &registry,
            1,
        )?;
        let s = split_ref(&p).context("split")?;
        let (g, per_w) = probe_costs(probe_spec, a.window, s, &registry, &a.workers, reps)?;
        let gs = gen_cost.entry(key_b).or_insert(g);
        *gs = gs.min(g);
        for (&w, c) in a.workers.iter().zip(per_w) {
            split_cost.insert((q, key_b, w), c);
        }
        eprintln!(
            "baseline q={q:>3} b={:>5}%: {:>7} M rows/s",
            pct(b),
            mrows(r.0)
        );
    }

    // Pilot runs set each point's tuple count; a pilot at the minimum count is kept.
    let mut points: Vec<Point> = Vec::new();
    for &(q, b) in &pairs {
        for &w in &a.workers {
            for s in chosen(&a) {
                let p = plan(gen_spec(min_n, a.rate, b), q, s, a.window)?;
                let shape = describe(&resolved_shape(&p, &registry, w)?);
                let m = measure(&p, &registry, w)?;
                let n = ((m.rate * target) as u64).clamp(min_n, max_n.max(min_n));
                let runs = if n == min_n { vec![m] } else { Vec::new() };
                points.push(Point {
                    q,
                    b,
                    workers: w,
                    strategy: s,
                    n,
                    runs,
                    shape,
                });
            }
        }
    }
    eprintln!(
        "bench split: {} points, pilots done in {:.0} s",
        points.len(),
        started.elapsed().as_secs_f64()
    );
    // Repetitions interleaved over all points (rotated each round), so that drifting
    // load spreads over every configuration instead of hitting a few.
    let k = points.len();
    let bar = crate::report::bar((reps * k) as u64, "runs");
    for round in 0..reps {
        bar.set_message(format!("round {}/{reps}", round + 1));
        for j in 0..k {
            let i = (j + round * k / reps.max(1)) % k;
            let pt = &mut points[i];
            bar.inc(1);
            if pt.runs.len() > round {
                continue;
            }
            let p = plan(gen_spec(pt.n, a.rate, pt.b), pt.q, pt.strategy, a.window)?;
            pt.runs.push(measure(&p, &registry, pt.workers)?);
        }
        crate::report::say(
            &bar,
            &format!(
                "bench split: round {}/{reps} done at {:.0} s (load {})",
                round + 1,
                started.elapsed().as_secs_f64(),
                host::loadavg()
            ),
        );
    }
    bar.finish_and_clear();
    let elapsed = started.elapsed().as_secs_f64();
    let load_after = host::loadavg();
    let busy = host::system_busy() - sys0;
    let ours = host::process_cpu() - cpu_start;
    let others_all = ((busy - ours) / elapsed).max(0.0);

    let find = |q: u32, b: f64, w: usize, s: Strategy| {
        points
            .iter()
            .find(|p| qb(p.q, p.b) == qb(q, b) && p.workers == w && p.strategy == s)
    };
    let eta = |p: &Point| -> f64 {
        if !matches!(p.strategy, Strategy::Fsplit | Strategy::Parasplit) {
            return f64::NAN;
        }
        let kb = qb(0, p.b).1;
        let (Some(g), Some(sc)) = (gen_cost.get(&kb), split_cost.get(&(p.q, kb, p.workers))) else {
            return f64::NAN;
        };
        let net = p.cpu_per_m() / 1e6 - g;
        if net > 0.0 {
            (sc / net).min(1.0)
        } else {
            f64::NAN
        }
    };

    // Braid's own pieces without the engine: generating the windows plus one splitter
    // (route, copy into per-worker batches), one thread, in rows/s.
    let components = |q: u32, b: f64| -> f64 {
        let kb = qb(0, b).1;
        match (gen_cost.get(&kb), split_cost.get(&(q, kb, 1))) {
            (Some(g), Some(sc)) if g + sc > 0.0 => 1.0 / (g + sc),
            _ => f64::NAN,
        }
    };

    // CSV of every point and the baselines.
    let experiments = |p: &Point| -> Vec<&'static str> {
        let mut e = Vec::new();
        if qb(0, p.b) == qb(0, 0.005) && qs.contains(&p.q) {
            e.push("scale-q");
        }
        if p.q == 64 && bs.iter().any(|&b| qb(0, b) == qb(0, p.b)) {
            e.push("scale-b");
        }
        if qb(p.q, p.b) == qb(512, 0.1) {
            e.push("target-b10-q512");
        }
        e
    };
    let mut rows = Vec::new();
    for &(q, b) in &pairs {
        let (br, bc) = base[&qb(q, b)];
        rows.push(CsvRow {
            experiment: "baseline".into(),
            strategy: "baseline loop".into(),
            shape: "hand-written".into(),
            q,
            b,
            workers: 1,
            tuples: max_n,
            reps,
            rows_per_s: br as u64,
            cpu_s: Some(round(bc * max_n as f64, 3)),
            cpu_s_per_mtuple: round(bc * 1e6, 3),
            eta: None,
            baseline_rows_per_s: br as u64,
            ratio_to_baseline: 1.0,
            other_cores: None,
        });
        let kb = qb(0, b).1;
        if let (Some(g), Some(sc)) = (gen_cost.get(&kb), split_cost.get(&(q, kb, 1))) {
            let c = components(q, b);
            rows.push(CsvRow {
                experiment: "components".into(),
                strategy: "generate+split (no engine)".into(),
                shape: format!("gen {:.1} ns + split {:.1} ns per row", g * 1e9, sc * 1e9),
                q,
                b,
                workers: 1,
                tuples: max_n.min(PROBE_TUPLES),
                reps,
                rows_per_s: c as u64,
                cpu_s: None,
                cpu_s_per_mtuple: round((g + sc) * 1e6, 3),
                eta: None,
                baseline_rows_per_s: br as u64,
                ratio_to_baseline: round(c / br, 3),
                other_cores: None,
            });
        }
    }
    for p in &points {
        let (br, _) = base[&qb(p.q, p.b)];
        for ex in experiments(p) {
            rows.push(CsvRow {
                experiment: ex.into(),
                strategy: p.strategy.to_string(),
                shape: p.shape.clone(),
                q: p.q,
                b: p.b,
                workers: p.workers,
                tuples: p.n,
                reps: p.runs.len(),
                rows_per_s: p.rate() as u64,
                cpu_s: Some(round(p.cpu(), 3)),
                cpu_s_per_mtuple: round(p.cpu_per_m(), 3),
                eta: finite(eta(p), 3),
                baseline_rows_per_s: br as u64,
                ratio_to_baseline: round(p.rate() / br, 3),
                other_cores: Some(round(p.others(), 2)),
            });
        }
    }
    write_csv(&out.join("split.csv"), rows)?;

    // Targets, measured in this run.
    let mut targets: Vec<TargetRow> = Vec::new();
    let best = |q: u32, b: f64, ws: &[usize], ss: &[Strategy]| -> Option<&Point> {
        points
            .iter()
            .filter(|p| qb(p.q, p.b) == qb(q, b) && ws.contains(&p.workers))
            .filter(|p| ss.contains(&p.strategy))
            .max_by(|x, y| x.rate().total_cmp(&y.rate()))
    };
    let mut add_target = |name: &str, value: f64, threshold: f64, detail: String| {
        let met = if value >= threshold { "yes" } else { "no" };
        eprintln!("target {name}: {value:.3} (>= {threshold}: {met}) {detail}");
        targets.push(TargetRow {
            target: name.into(),
            value: round(value, 3),
            threshold,
            met,
            detail,
        });
    };
    if let Some(p) = best(512, 0.005, &a.workers, &STRATEGIES) {
        let (br, _) = base[&qb(512, 0.005)];
        add_target(
            "best strategy / baseline loop, q = 512, b = 0.5%",
            p.rate() / br,
            0.5,
            format!(
                "best: {} on {} worker(s), {} vs {} M rows/s",
                p.strategy,
                p.workers,
                mrows(p.rate()),
                mrows(br)
            ),
        );
    }
    for &w in a.workers.iter().rev() {
        let lattice = [Strategy::Maxtree, Strategy::Exptree, Strategy::Parasplit];
        if let (Some(p), Some(f)) = (
            best(512, 0.1, &[w], &lattice),
            find(512, 0.1, w, Strategy::Fsplit),
        ) {
            add_target(
                &format!("best of lattice/trees / fsplit, q = 512, b = 10%, {w} worker(s)"),
                p.rate() / f.rate(),
                1.0,
                format!(
                    "{} {} vs fsplit {} M rows/s",
                    p.strategy,
                    mrows(p.rate()),
                    mrows(f.rate())
                ),
            );
        }
    }
    if a.workers.contains(&1) && a.workers.contains(&2) {
        for (q, b) in [(64u32, 0.005), (512, 0.005)] {
            if let (Some(p2), Some(p1)) =
                (best(q, b, &[2], &STRATEGIES), best(q, b, &[1], &STRATEGIES))
            {
                add_target(
                    &format!("2 workers / 1 worker (best strategy each), q = {q}, b = 0.5%"),
                    p2.rate() / p1.rate(),
                    1.0,
                    format!(
                        "{} {} vs {} {} M rows/s; other processes used {:.2} / {:.2} cores during these runs",
                        p2.strategy,
                        mrows(p2.rate()),
                        p1.strategy,
                        mrows(p1.rate()),
                        p2.others(),
                        p1.others()
                    ),
                );
            }
        }
    }
    let targets_md = markdown_table(
        &[
            ("target", Align::Left),
            ("measured", Align::Right),
            ("threshold", Align::Left),
            ("met", Align::Left),
            ("detail", Align::Left),
        ],
        targets
            .iter()
            .map(|t| {
                vec![
                    t.target.clone(),
                    format!("{:.3}", t.value),
                    format!(">= {}", t.threshold),
                    t.met.into(),
                    t.detail.clone(),
                ]
            })
            .collect(),
    );
    write_csv(&out.join("split-targets.csv"), &targets)?;

    // Markdown summary of this run.
    let mut sum = String::new();
    let _ = writeln!(
        sum,
        "<!-- generated by `cargo run --release -p braid-bench -- split`; do not edit -->"
    );
    let _ = writeln!(
        sum,
        "Run: {} points x {reps} rep(s), {}..{} tuples per run (about {target} s each), W = {}, \
         generator {} keys, {} tuples per epoch; {elapsed:.0} s in all.  ",
        points.len(),
        min_n,
        max_n,
        a.window,
        KEYS,
        a.rate
    );
    let _ = writeln!(
        sum,
        "Load average before: {load_before}; after: {load_after}. Other processes used \
         {others_all:.2} of 2 cores on average during the run (system busy time minus Braid's).\n"
    );
    let _ = writeln!(sum, "### Targets\n\n{targets_md}");
    let strategy_columns = |first: &str, extra: &[&str]| {
        let mut c = vec![(first.to_string(), Align::Left)];
        c.extend(STRATEGIES.iter().map(|s| (s.to_string(), Align::Right)));
        c.extend(extra.iter().map(|e| (e.to_string(), Align::Right)));
        c
    };
    let mut section = |title: &str, rows: &[(u32, f64)], label: &dyn Fn(u32, f64) -> String| {
        for &w in &a.workers {
            let _ = writeln!(sum, "### {title}, {w} worker(s): M rows/s (median)\n");
            let table = rows
                .iter()
                .map(|&(q, b)| {
                    let mut r = vec![label(q, b)];
                    r.extend(
                        STRATEGIES
                            .iter()
                            .map(|&s| mrows(find(q, b, w, s).map_or(f64::NAN, Point::rate))),
                    );
                    r.push(mrows(base[&qb(q, b)].0));
                    r.push(mrows(components(q, b)));
                    r
                })
                .collect();
            sum.push_str(&markdown_table(
                &strategy_columns("point", &["baseline loop", "generate+split, no engine"]),
                table,
            ));
            let _ = writeln!(
                sum,
                "\n### {title}, {w} worker(s): CPU seconds per million tuples (median)\n"
            );
            let table = rows
                .iter()
                .map(|&(q, b)| {
                    let mut r = vec![label(q, b)];
                    r.extend(STRATEGIES.iter().map(|&s| {
                        format!("{:.3}", find(q, b, w, s).map_or(f64::NAN, Point::cpu_per_m))
                    }));
                    r.push(format!("{:.3}", base[&qb(q, b)].1 * 1e6));
                    r
                })
                .collect();
            sum.push_str(&markdown_table(
                &strategy_columns("point", &["baseline loop"]),
                table,
            ));
            let _ = writeln!(
                sum,
                "\n### {title}, {w} worker(s): efficiency η (fsplit, parasplit)\n"
            );
            let table = rows
                .iter()
                .map(|&(q, b)| {
                    let e = |s| find(q, b, w, s).map_or(f64::NAN, eta);
                    vec![
                        label(q, b),
                        format!("{:.2}", e(Strategy::Fsplit)),
                        format!("{:.2}", e(Strategy::Parasplit)),
                        find(q, b, w, Strategy::Parasplit)
                            .map_or(String::new(), |p| p.shape.clone()),
                    ]
                })
                .collect();
            sum.push_str(&markdown_table(
                &[
                    ("point", Align::Left),
                    ("fsplit", Align::Right),
                    ("parasplit", Align::Right),
                    ("parasplit shape", Align::Left),
                ],
                table,
            ));
            let _ = writeln!(sum);
        }
    };
    let q_rows: Vec<(u32, f64)> = qs.iter().map(|&q| (q, 0.005)).collect();
    section("Scale-up in q at b = 0.5%", &q_rows, &|q, _| {
        format!("q = {q}")
    });
    let b_rows: Vec<(u32, f64)> = bs.iter().map(|&b| (64, b)).collect();
    section("Broadcast fraction at q = 64", &b_rows, &|_, b| {
        format!("b = {}%", pct(b))
    });
    if base.contains_key(&qb(512, 0.1)) {
        section("q = 512, b = 10%", &[(512, 0.1)], &|_, _| {
            "q = 512, b = 10%".into()
        });
    }
    let _ = writeln!(sum, "### Shapes chosen by the optimizer\n");
    let mut shapes = Vec::new();
    for &(q, b) in &pairs {
        for &w in &a.workers {
            let sh = |s| find(q, b, w, s).map_or(String::new(), |p| p.shape.clone());
            shapes.push(vec![
                q.to_string(),
                format!("{}%", pct(b)),
                w.to_string(),
                sh(Strategy::Maxtree),
                sh(Strategy::Exptree),
                sh(Strategy::Parasplit),
            ]);
        }
    }
    sum.push_str(&markdown_table(
        &[
            ("q", Align::Right),
            ("b", Align::Right),
            ("workers", Align::Right),
            ("maxtree", Align::Left),
            ("exptree", Align::Left),
            ("parasplit", Align::Left),
        ],
        shapes,
    ));
    if a.processes > 1 && !a.quick {
        let qs: Vec<u32> = a.qs.clone().unwrap_or(vec![64, 512]);
        let rows = across_processes(&a, &qs, reps)?;
        let _ = writeln!(
            sum,
            "\n### Across {} processes of 1 worker (as `braid run --launch {}`), b = 0.5%: \
             median seconds of {} tuples (M rows/s; parasplit's time / this)\n",
            a.processes, a.processes, a.process_tuples
        );
        let table = qs
            .iter()
            .map(|&q| {
                let mut r = vec![format!("q = {q}")];
                // A column per strategy, as in the tables above ("-": not measured).
                r.extend(STRATEGIES.iter().map(|s| {
                    rows.iter()
                        .find(|x| x.q == q && x.strategy == s.to_string())
                        .map_or("-".into(), |x| {
                            format!(
                                "{:.3} s ({} M; {:.2})",
                                x.seconds,
                                mrows(x.rows_per_s as f64),
                                x.ratio_to_parasplit
                            )
                        })
                }));
                r
            })
            .collect();
        sum.push_str(&markdown_table(&strategy_columns("point", &[]), table));
        write_csv(&out.join("split-processes.csv"), rows)?;
    }
    std::fs::write(out.join("split-results.md"), &sum)?;

    // Plots.
    let series_vs =
        |w: usize, pairs: &[(u32, f64)], x: &dyn Fn(u32, f64) -> f64, y: &dyn Fn(&Point) -> f64| {
            STRATEGIES
                .iter()
                .map(|&s| {
                    let pts = pairs
                        .iter()
                        .filter_map(|&(q, b)| find(q, b, w, s).map(|p| (x(q, b), y(p))))
                        .collect();
                    Series::line(format!("{s} ({w}w)"), pts)
                })
                .collect::<Vec<_>>()
        };
    let base_series = |pairs: &[(u32, f64)], x: &dyn Fn(u32, f64) -> f64, cpu: bool| {
        Series::line(
            "baseline loop (1 thread)",
            pairs
                .iter()
                .map(|&(q, b)| {
                    let (r, c) = base[&qb(q, b)];
                    (x(q, b), if cpu { c * 1e6 } else { r })
                })
                .collect(),
        )
    };
    let wmax = a.workers.iter().copied().max().unwrap_or(1);
    let xq = |q: u32, _| f64::from(q);
    let xb = |_, b: f64| b * 100.0;
    let rate = |p: &Point| p.rate();
    let cpu = |p: &Point| p.cpu_per_m();
    let note = format!("load before {load_before}");
    for &w in &a.workers {
        let mut s = series_vs(w, &q_rows, &xq, &rate);
        s.push(base_series(&q_rows, &xq, false));
        let chart = Chart {
            title: format!("Throughput vs q (b = 0.5%, {w} worker(s); {note})"),
            x_label: "q (partitions)".into(),
            y_label: "input rows/s".into(),
            log_x: true,
            log_y: true,
            series: s,
            ..Chart::default()
        };
        let name = if w == wmax {
            "split-q.svg".to_string()
        } else {
            format!("split-q-{w}w.svg")
        };
        chart.write_svg(&out.join(name), 800, 450)?;
    }
    let mut s = series_vs(wmax, &q_rows, &xq, &cpu);
    if a.workers.len() > 1 {
        let w1 = a.workers.iter().copied().min().unwrap_or(1);
        s.extend(series_vs(w1, &q_rows, &xq, &cpu));
    }
    s.push(base_series(&q_rows, &xq, true));
    let chart = Chart {
        title: format!("Process CPU seconds per million input rows vs q (b = 0.5%; {note})"),
        x_label: "q (partitions)".into(),
        y_label: "CPU s per M rows".into(),
        log_x: true,
        log_y: true,
        series: s,
        ..Chart::default()
    };
    chart.write_svg(&out.join("split-cpu-q.svg"), 800, 450)?;
    let mut s = series_vs(wmax, &b_rows, &xb, &rate);
    s.push(base_series(&b_rows, &xb, false));
    let chart = Chart {
        title: format!(
            "Throughput vs broadcast (q = 64, {wmax} worker(s); b = 0 in the table; {note})"
        ),
        x_label: "b (% broadcast, log scale)".into(),
        y_label: "input rows/s".into(),
        log_x: true,
        log_y: true,
        series: s,
        ..Chart::default()
    };
    chart.write_svg(&out.join("split-b.svg"), 800, 450)?;
    eprintln!(
        "bench split: {elapsed:.0} s; load before {load_before}, after {load_after}; other processes {others_all:.2} cores; wrote {}/split.csv, split-targets.csv, split-results.md{} and SVGs",
        out.display(),
        match a.processes > 1 && !a.quick {
            true => ", split-processes.csv",
            false => "",
        }
    );
    Ok(())
}
