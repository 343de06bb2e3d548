//! `braid convert`: a CSV file to a Braid binary batch file.

use crate::args::{check, QueryArgs, Use};
use crate::Usage;
use anyhow::Result;
use braid_exec::source::ReadOptions;
use braid_plan::plan::Source;
use clap::ArgMatches;
use std::path::Path;

/// Converts the CSV input `q` describes to the binary file `to`.
pub fn convert(q: &QueryArgs, to: &Path, matches: &ArgMatches) -> Result<()> {
    check(matches, Use::Convert)?;
    if q.csv.is_none() {
        return Err(Usage("convert reads CSV: give --csv FILE (and --schema)".into()).into());
    }
    let plan = q.source_plan()?;
    write(plan.leaf_source(), to, &q.run_config()?.read)
}

/// Writes `source` to the binary batch file `to`, reporting malformed records and the
/// rows written.
pub fn write(source: &Source, to: &Path, read: &ReadOptions) -> Result<()> {
    let t = std::time::Instant::now();
    let registry = crate::registry();
    let (rows, rejects) = braid_exec::source::binary::convert(source, to, read, &registry)?;
    if rejects.count > 0 {
        eprint!("{rejects}");
    }
    eprintln!(
        "braid: wrote {rows} rows to {} in {:.2} s",
        to.display(),
        t.elapsed().as_secs_f64()
    );
    Ok(())
}
