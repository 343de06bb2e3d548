//! SHOW and DESCRIBE listings laid out as aligned tables on standard output.

use anyhow::Result;
use braid_exec::session::Session;
use braid_sql::catalog::Listing;
use comfy_table::{presets, Table};

/// Prints every listing the session has due (see [`Session::next_shown`]).
pub fn print_due(session: &mut Session) -> Result<()> {
    while let Some(listings) = session.next_shown() {
        for l in &listings {
            outln!("{}", table(l))?;
        }
    }
    Ok(())
}

/// `l` as a table: a header, a rule, then the rows, columns padded to align.
pub fn table(l: &Listing) -> String {
    let mut t = Table::new();
    t.load_preset(presets::ASCII_MARKDOWN);
    t.set_header(&l.header);
    for r in &l.rows {
        t.add_row(r);
    }
    t.to_string()
}
