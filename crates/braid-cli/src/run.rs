//! `braid run`: a script to the end of its input, query by query, or a split/map/merge
//! query built from flags.

use crate::args::{check, QueryArgs, Use};
use crate::dashboard::RunBoard;
use crate::progress::Progress;
use crate::{listing, lrb, profile, report};
use anyhow::Result;
use braid_exec::profile::Profiler;
use braid_exec::runtime::RunConfig;
use braid_exec::session::Session;
use braid_plan::function::Registry;
use braid_plan::plan::Plan;
use clap::ArgMatches;
use std::path::Path;
use std::sync::Arc;

/// Runs what `q` says.
pub fn run(q: &QueryArgs, matches: &ArgMatches) -> Result<()> {
    if q.restarts > 0 && q.launch.is_none() && q.launch_with.is_none() {
        return Err(crate::Usage(
            "--restarts applies to the processes --launch or --launch-with starts".into(),
        )
        .into());
    }
    if q.launch.is_some() || q.launch_with.is_some() {
        check(
            matches,
            match q.script {
                Some(_) => Use::RunScript,
                None => Use::RunFlags,
            },
        )?;
        return crate::launch::launch(q);
    }
    match &q.script {
        Some(path) => {
            check(matches, Use::RunScript)?;
            script(q, path)
        }
        None => {
            check(matches, Use::RunFlags)?;
            flags(q)
        }
    }
}

/// Runs every query of the script at `path` in order, each to the end of its input,
/// reporting each on standard error as it ends.
fn script(q: &QueryArgs, path: &Path) -> Result<()> {
    let mut registry = crate::registry();
    let lr_sink = lrb::register_for_script(&mut registry, q)?;
    let mut session = Session::new(&registry, q.run_config()?);
    session.set_calibration(q.calibrate);
    if session.compile_file(path)?.is_empty() {
        eprintln!(
            "braid: {} declares no query (INSERT INTO ... SELECT or SELECT)",
            path.display()
        );
    }
    let board = board(q)?;
    if let Some(b) = &board {
        session.set_rescale(Some(b.rescaler.clone()));
    }
    loop {
        // SHOW and DESCRIBE print where they are in the script, between the queries.
        listing::print_due(&mut session)?;
        let (counters, progress) = Progress::maybe(q.progress, None);
        let counters = counters.or_else(|| board.as_ref().map(|_| Arc::default()));
        session.set_counters(counters.clone());
        let mut profiler = q.profile.then(Profiler::new);
        if let (Some(b), Some(job), Some(c)) = (&board, session.next_job(), &counters) {
            profiler = Some(b.begin(&job.sql, &job.plan, session.registry(), c.clone()));
        }
        session.set_profile(profiler);
        let Some(next) = session.run_next() else {
            break;
        };
        drop(progress);
        if let Some(b) = &board {
            b.end();
        }
        let next = next?;
        report::query(&next);
        report::rescales(&next.run);
        if q.profile {
            eprint!("{}", profile::tables(&next.run));
        }
    }
    listing::print_due(&mut session)?;
    if let Some(sink) = lr_sink {
        braid_plan::function::SinkFn::flush(sink.as_ref())?;
    }
    Ok(())
}

/// The run's dashboard, when `--dashboard` asks for one.
fn board(q: &QueryArgs) -> Result<Option<RunBoard>> {
    q.dashboard
        .map(|at| RunBoard::start(at, q.workers * q.processes.max(1)))
        .transpose()
}

/// Runs the split/map/merge query the flags describe.
fn flags(q: &QueryArgs) -> Result<()> {
    let registry = crate::registry();
    let mut plan = q.plan()?;
    apply_rates(&mut plan, q, &registry)?;
    // The generator's rows are known: a bar.
    let input_given = q.csv.is_some() || q.tcp.is_some() || q.binary.is_some();
    let total = (!input_given).then_some(q.tuples);
    let (counters, progress) = Progress::maybe(q.progress, total);
    let board = board(q)?;
    let counters = counters.or_else(|| board.as_ref().map(|_| Arc::default()));
    let profile = match (&board, &counters) {
        (Some(b), Some(c)) => {
            Some(b.begin("(a query built from flags)", &plan, &registry, c.clone()))
        }
        _ => q.profile.then(Profiler::new),
    };
    let mut session = Session::new(
        &registry,
        RunConfig {
            counters,
            profile,
            rescale: board.as_ref().map(|b| b.rescaler.clone()),
            ..q.run_config()?
        },
    );
    session.set_calibration(q.calibrate);
    let (report, calibration) = session.run_plan(&plan)?;
    drop(progress);
    if let Some(b) = &board {
        b.end();
    }
    report::calibration(calibration.as_ref());
    let secs = report.elapsed.as_secs_f64();
    eprintln!(
        "braid: {} rows in, {} rows out in {:.3} s ({:.0} rows/s) with {} worker(s) x {} process(es)",
        report.rows_in,
        report.rows_out,
        secs,
        report.rows_in as f64 / secs.max(1e-9),
        q.workers,
        q.processes
    );
    report::checkpoints(&report);
    report::rescales(&report);
    report::rejects(&report);
    if q.profile {
        eprint!("{}", profile::tables(&report));
    }
    Ok(())
}

/// With --desired-rate: puts the desired and the single-splitter rate (measured, or
/// --splitter-rate) into the split's hints, so that eq. 6 picks p.
pub fn apply_rates(plan: &mut Plan, q: &QueryArgs, registry: &Registry) -> Result<()> {
    let Some(desired) = q.desired_rate else {
        return Ok(());
    };
    let one = match q.splitter_rate {
        Some(r) => r,
        None => {
            if q.processes > 1 {
                anyhow::bail!(crate::Usage(
                    "with --processes > 1 give --splitter-rate too, so that every process picks the same p".into()
                ));
            }
            let r = braid_exec::tune::single_splitter_rate(plan, registry, q.splitter_sample, 3)?;
            eprintln!(
                "braid: single-splitter rate {r:.0} rows/s (fsplit, q = 1, 1 worker, median of 3 runs on up to {} rows)",
                q.splitter_sample
            );
            r
        }
    };
    braid_exec::tune::set_rates(plan, desired, one)?;
    // In one process the split's costs are measured as well (b, a): every process of
    // several would measure its own.
    if q.processes <= 1 {
        if let Some(split) = braid_exec::tune::split_mut(plan) {
            if let Some(m) = braid_exec::tune::measure_costs(split, registry)? {
                eprintln!("braid: split {m}");
            }
        }
    }
    let shape = braid_exec::tune::resolved_shape(plan, registry, q.total_workers())?;
    eprintln!(
        "braid: desired {desired:.0} rows/s, one splitter {one:.0} rows/s -> split shape {}",
        braid_exec::tune::describe(&shape)
    );
    Ok(())
}
