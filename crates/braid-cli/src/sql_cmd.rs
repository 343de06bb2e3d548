//! `braid run query.sql`, `braid explain query.sql` and `braid shell`: scripts in
//! Braid's query language (see `braid_plan::query`).

use anyhow::{anyhow, Context, Result};
use braid_exec::runtime::{run, RunConfig};
use braid_plan::function::Registry;
use braid_plan::plan::Plan;
use braid_plan::query::{self, add_statements, compile_script, Job, Script};
use std::path::Path;

fn base_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Compiles the script at `path` (relative paths in it are relative to its directory).
pub fn compile_file(path: &Path, registry: &Registry) -> Result<Script> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    compile_script(&text, base_of(path), registry).map_err(|e| anyhow!("{}: {e}", path.display()))
}

/// `plan` with its partitions placed by measured cost when `calibrate` gives a number
/// of rows (the measurement is printed to stderr), else `plan`.
pub fn calibrated(
    plan: Plan,
    registry: &Registry,
    cfg: &RunConfig,
    calibrate: Option<u64>,
) -> Result<Plan> {
    let Some(rows) = calibrate else {
        return Ok(plan);
    };
    let c = braid_exec::calibrate::calibrate(&plan, registry, cfg, rows)?;
    eprint!("braid: {c}");
    Ok(c.plan)
}

/// `job` with its plan placed by measured cost (see [`calibrated`]); the late rows of
/// the calibration run are forgotten.
fn calibrated_job(
    job: &Job,
    registry: &Registry,
    cfg: &RunConfig,
    calibrate: Option<u64>,
) -> Result<Job> {
    let plan = calibrated(job.plan.clone(), registry, cfg, calibrate)?;
    job.late
        .reset()
        .context("emptying the late-row file after calibration")?;
    Ok(Job {
        plan,
        ..job.clone()
    })
}

/// Runs every query of a script in order, each to the end of its input; with
/// `calibrate`, each query's partitions are first placed by measured cost.
pub fn run_file(
    path: &Path,
    cfg: &RunConfig,
    calibrate: Option<u64>,
    registry: &Registry,
) -> Result<()> {
    let script = compile_file(path, registry)?;
    if script.jobs.is_empty() {
        eprintln!(
            "braid: {} declares no query (INSERT INTO ... SELECT or SELECT)",
            path.display()
        );
    }
    for job in &script.jobs {
        match calibrate {
            Some(_) => run_job(
                &calibrated_job(job, &script.registry, cfg, calibrate)?,
                &script.registry,
                cfg,
            )?,
            None => run_job(job, &script.registry, cfg)?,
        }
    }
    Ok(())
}

fn run_job(job: &Job, registry: &Registry, cfg: &RunConfig) -> Result<()> {
    let report = run(&job.plan, registry, cfg)?;
    job.late.flush();
    let secs = report.elapsed.as_secs_f64();
    eprintln!(
        "braid: {} rows in, {} rows out in {:.3} s ({:.0} rows/s); partitioning: {}",
        report.rows_in,
        report.rows_out,
        secs,
        report.rows_in as f64 / secs.max(1e-9),
        job.partitioning
    );
    let late = job.late.count.load(std::sync::atomic::Ordering::Relaxed);
    if late > 0 {
        eprintln!("braid: {late} late row(s) went to the late side output");
    }
    for r in &report.rejects {
        if r.count > 0 {
            eprint!("{r}");
        }
    }
    Ok(())
}

/// Prints the logical, optimized and physical plans of every query (with `calibrate`,
/// placed by measured cost: each query runs on that many rows first).
pub fn explain_file(
    path: &Path,
    cfg: &RunConfig,
    calibrate: Option<u64>,
    dot: bool,
    registry: &Registry,
) -> Result<()> {
    let workers = cfg.workers * cfg.processes;
    let script = compile_file(path, registry)?;
    for (i, job) in script.jobs.iter().enumerate() {
        let placed;
        let job = match calibrate {
            Some(_) => {
                placed = calibrated_job(job, &script.registry, cfg, calibrate)?;
                &placed
            }
            None => job,
        };
        if dot {
            let mut plan = job.plan.clone();
            braid_plan::optimize::resolve(&mut plan, braid_plan::optimize::Env { workers });
            for (k, (l, _)) in job.stages.iter().enumerate() {
                print!("{}", l.dot(&format!("query{}_stage{}", i + 1, k + 1)));
            }
            print!(
                "{}",
                braid_plan::explain::dot(&plan, &script.registry, workers)
            );
        } else {
            println!("-- query {}: {}", i + 1, job.sql);
            print!("{}", query::explain(job, &script.registry, workers));
        }
    }
    Ok(())
}

/// The interactive shell: statements end with `;`; queries run as soon as they are
/// complete and their rows stream to the screen. `EXPLAIN <query>;` shows plans,
/// `\q` quits. History is kept in `~/.braid_history`.
pub fn shell(cfg: &RunConfig, registry: &Registry) -> Result<()> {
    let mut ed = rustyline::DefaultEditor::new()?;
    let history = std::env::var_os("HOME").map(|h| Path::new(&h).join(".braid_history"));
    if let Some(h) = &history {
        let _ = ed.load_history(h);
    }
    let mut script = compile_script("", Path::new("."), registry)?;
    let mut pending = String::new();
    eprintln!("Braid shell: end statements with `;`, `EXPLAIN <query>;` for plans, `\\q` to quit.");
    loop {
        let prompt = if pending.is_empty() {
            "braid> "
        } else {
            "   ... "
        };
        let line = match ed.readline(prompt) {
            Ok(l) => l,
            Err(rustyline::error::ReadlineError::Interrupted) => {
                pending.clear();
                continue;
            }
            Err(rustyline::error::ReadlineError::Eof) => break,
            Err(e) => return Err(e.into()),
        };
        if pending.is_empty() && line.trim() == "\\q" {
            break;
        }
        pending.push_str(&line);
        pending.push('\n');
        if !line.trim_end().ends_with(';') {
            continue;
        }
        let text = std::mem::take(&mut pending);
        let _ = ed.add_history_entry(text.trim());
        let trimmed = text.trim_start();
        let explain = trimmed.len() > 8 && trimmed[..8].eq_ignore_ascii_case("explain ");
        let stmt = if explain { &trimmed[8..] } else { &text[..] };
        let before = script.jobs.len();
        match add_statements(&mut script, stmt, Path::new(".")) {
            Err(e) => eprintln!("{e}"),
            Ok(_) => {
                let new: Vec<usize> = (before..script.jobs.len()).collect();
                for i in new {
                    let job = &script.jobs[i];
                    if explain {
                        print!("{}", query::explain(job, &script.registry, cfg.workers));
                    } else if let Err(e) = run_job(job, &script.registry, cfg) {
                        eprintln!("braid: {e:#}");
                    }
                }
                if explain {
                    script.jobs.truncate(before);
                }
            }
        }
    }
    if let Some(h) = &history {
        let _ = ed.save_history(h);
    }
    Ok(())
}
