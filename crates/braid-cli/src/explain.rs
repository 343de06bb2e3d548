//! `braid explain`: the plans of a script's queries, or of a query built from flags;
//! with `--analyze`, after running them, with what each node measured.

use crate::args::{check, QueryArgs, Use};
use crate::{lrb, report, run};
use anyhow::Result;
use braid_exec::profile::Profiler;
use braid_exec::session::Session;
use clap::ArgMatches;
use std::io::Write;

/// Prints the plans `q` describes (Graphviz DOT with `dot`).
pub fn explain(q: &QueryArgs, dot: bool, matches: &ArgMatches) -> Result<()> {
    let mut registry = crate::registry();
    let text = match &q.script {
        Some(path) => {
            check(matches, Use::ExplainScript)?;
            lrb::register_for_script(&mut registry, q)?;
            let mut session = Session::new(&registry, q.run_config()?);
            session.set_calibration(q.calibrate);
            let queries = session.compile_file(path)?;
            session.explain(&queries, dot)?
        }
        None => {
            check(matches, Use::ExplainFlags)?;
            let mut plan = q.plan()?;
            run::apply_rates(&mut plan, q, &registry)?;
            let mut session = Session::new(&registry, q.run_config()?);
            session.set_calibration(q.calibrate);
            let (text, calibration) = session.explain_plan(&plan, dot)?;
            report::calibration(calibration.as_ref());
            text
        }
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// `braid explain --analyze`: runs the queries `q` describes, each profiled, and prints
/// each one's physical plan with what its nodes measured.
pub fn analyze(q: &QueryArgs, matches: &ArgMatches) -> Result<()> {
    let mut registry = crate::registry();
    let mut out = String::new();
    match &q.script {
        Some(path) => {
            check(matches, Use::ExplainScript)?;
            let lr_sink = lrb::register_for_script(&mut registry, q)?;
            let mut session = Session::new(&registry, q.run_config()?);
            session.set_calibration(q.calibrate);
            session.compile_file(path)?;
            loop {
                session.set_profile(Some(Profiler::new()));
                let Some(next) = session.run_next() else {
                    break;
                };
                let next = next?;
                report::query(&next);
                out.push_str(&format!("-- query {}: {}\n", next.query + 1, next.sql));
                out.push_str(&session.analyze(&next.run).unwrap_or_default());
            }
            if let Some(sink) = lr_sink {
                braid_plan::function::SinkFn::flush(sink.as_ref())?;
            }
        }
        None => {
            check(matches, Use::ExplainFlags)?;
            let mut plan = q.plan()?;
            run::apply_rates(&mut plan, q, &registry)?;
            let mut session = Session::new(&registry, q.run_config()?);
            session.set_calibration(q.calibrate);
            session.set_profile(Some(Profiler::new()));
            let (report, calibration) = session.run_plan(&plan)?;
            report::calibration(calibration.as_ref());
            report::rejects(&report);
            out.push_str(&session.analyze(&report).unwrap_or_default());
        }
    }
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(out.as_bytes())?;
    stdout.flush()?;
    Ok(())
}
