//! `braid run query.sql`, `braid explain query.sql` and `braid shell`: scripts in
//! Braid's query language (see `braid_sql`).

use anyhow::{anyhow, Context, Result};
use braid_exec::runtime::{run, RunConfig};
use braid_plan::function::Registry;
use braid_plan::plan::{Plan, SourceSpec};
use braid_sql::{add_statements, compile_script, Job, Script};
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
    index: usize,
    job: &Job,
    jobs: &[Job],
    registry: &Registry,
    cfg: &RunConfig,
    calibrate: Option<u64>,
) -> Result<Job> {
    let plan = calibrated(job.plan.clone(), registry, cfg, calibrate)?;
    for (_, j) in together(index, job, jobs) {
        j.late
            .reset()
            .context("emptying the late-row file after calibration")?;
    }
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
    for (i, job) in script.jobs.iter().enumerate() {
        if job.runs_in.is_some() {
            continue; // it runs in the dataflow of the query whose late rows it reads
        }
        let (jobs, registry) = (&script.jobs, &script.registry);
        match calibrate {
            Some(_) => run_job(
                i,
                &calibrated_job(i, job, jobs, registry, cfg, calibrate)?,
                jobs,
                registry,
                cfg,
            )?,
            None => run_job(i, job, jobs, registry, cfg)?,
        }
    }
    Ok(())
}

/// The jobs that run in the dataflow of `job`, query `index` of `jobs`: `job` itself, then the queries over its late
/// rows (and theirs), by their number in the script.
fn together<'a>(index: usize, job: &'a Job, jobs: &'a [Job]) -> Vec<(usize, &'a Job)> {
    let mut all = vec![(index, job)];
    all.extend(
        jobs.iter()
            .enumerate()
            .filter(|(_, j)| j.runs_in.map(|(o, _)| o) == Some(index)),
    );
    all
}

fn run_job(
    index: usize,
    job: &Job,
    jobs: &[Job],
    registry: &Registry,
    cfg: &RunConfig,
) -> Result<()> {
    let report = run(&job.plan, registry, cfg)?;
    let secs = report.elapsed.as_secs_f64();
    eprintln!(
        "braid: {} rows in, {} rows out in {:.3} s ({:.0} rows/s); partitioning: {}",
        report.rows_in,
        report.rows_out,
        secs,
        report.rows_in as f64 / secs.max(1e-9),
        job.partitioning
    );
    let members = together(index, job, jobs);
    for &(i, j) in &members {
        j.late.flush();
        let late = j.late.count.load(std::sync::atomic::Ordering::Relaxed);
        if late == 0 {
            continue;
        }
        let query = match members.len() {
            1 => String::new(),
            _ => format!(" of query {}", i + 1),
        };
        // Its plan in the dataflow, and whether another member reads that plan's rows.
        let plan = j.runs_in.map_or(0, |(_, p)| p);
        let read = match members.iter().any(
            |(_, r)| matches!(r.plan.leaf_source().spec, SourceSpec::Late { of } if of == plan),
        ) {
            true => " (read by LATE(...))",
            false => "",
        };
        match j.late.path() {
            Some(p) => eprintln!(
                "braid: {late} late row(s){query}{read}, written to {}",
                p.display()
            ),
            None => eprintln!("braid: {late} late row(s){query}{read}"),
        }
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
        if let Some((owner, plan)) = job.runs_in {
            let at = format!(
                "runs in the dataflow of query {}, as plan {plan} of its Together",
                owner + 1
            );
            if dot {
                println!("// query {}: {at}", i + 1);
            } else {
                println!("-- query {}: {}", i + 1, job.sql);
                print!("{}", braid_sql::explain_stages(job));
                println!("== physical plan ==\n{at}");
            }
            continue;
        }
        let placed;
        let job = match calibrate {
            Some(_) => {
                placed = calibrated_job(i, job, &script.jobs, &script.registry, cfg, calibrate)?;
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
            print!("{}", braid_sql::explain(job, &script.registry, workers));
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
        // A query over LATE(x) joins the plan of the query writing to x: kept to undo
        // that for EXPLAIN, or when that query has already run.
        let saved = (
            script.catalog.late.clone(),
            script
                .jobs
                .iter()
                .map(|j| j.plan.clone())
                .collect::<Vec<_>>(),
        );
        match add_statements(&mut script, stmt, Path::new(".")) {
            Err(e) => eprintln!("{e}"),
            Ok(_) => {
                let ran = script.jobs[before..]
                    .iter()
                    .find_map(|j| j.runs_in.filter(|(owner, _)| *owner < before));
                if let (false, Some((owner, _))) = (explain, ran) {
                    eprintln!(
                        "braid: query {} has already run, so its late rows cannot be read any more; \
                         enter a query over its LATE(...) together with it, on one line",
                        owner + 1
                    );
                }
                if !explain && ran.is_none() {
                    for (i, job) in script.jobs.iter().enumerate().skip(before) {
                        if job.runs_in.is_some() {
                            continue; // it runs in the dataflow of the query it reads
                        }
                        if let Err(e) = run_job(i, job, &script.jobs, &script.registry, cfg) {
                            eprintln!("braid: {e:#}");
                        }
                    }
                } else {
                    for job in script.jobs[before..].iter().filter(|_| explain) {
                        print!("{}", braid_sql::explain(job, &script.registry, cfg.workers));
                    }
                    script.jobs.truncate(before);
                    script.catalog.late = saved.0;
                    for (job, plan) in script.jobs.iter_mut().zip(saved.1) {
                        job.plan = plan;
                    }
                }
            }
        }
    }
    if let Some(h) = &history {
        let _ = ed.save_history(h);
    }
    Ok(())
}
