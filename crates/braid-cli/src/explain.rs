//! `braid explain`: the plans of a script's queries, or of a query built from flags.

use crate::args::{check, QueryArgs, Use};
use crate::{lrb, report, run};
use anyhow::Result;
use braid_exec::session::Session;
use braid_plan::function::Registry;
use clap::ArgMatches;
use std::io::Write;

/// Prints the plans `q` describes (Graphviz DOT with `dot`).
pub fn explain(q: &QueryArgs, dot: bool, matches: &ArgMatches) -> Result<()> {
    let mut registry = Registry::with_builtins();
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
