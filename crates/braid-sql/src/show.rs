//! `SHOW STREAMS | SINKS | TABLES | QUERIES` and `DESCRIBE name`: what they list is
//! kept in [`Script::shown`], after the queries before them, for the caller to print.

use crate::located::At;
use crate::script::{Script, Show, Shown};
use braid_plan::error::Result;
use sqlparser::ast::{self, Spanned};

/// Runs a SHOW statement.
pub(crate) fn show(script: &mut Script, what: &crate::parse::Show) -> Result<()> {
    use crate::parse::Show as S;
    let catalog = &script.catalog;
    let what = match what {
        S::Streams => Show::Listings(vec![catalog.show_streams()]),
        S::Sinks => Show::Listings(vec![catalog.show_sinks()]),
        S::Tables => Show::Listings(vec![catalog.show_tables()]),
        S::Views => Show::Listings(vec![catalog.show_views()]),
        S::Queries => Show::Queries,
        S::Feeds => return Err(crate::parse::show_unknown("FEEDS (the server's producers)")),
        S::Setting(name) => return Err(crate::parse::show_unknown(name)),
    };
    script.shown.push(Shown {
        after_jobs: script.jobs.len(),
        what,
    });
    Ok(())
}

/// Runs `DESCRIBE name`.
pub(crate) fn describe(script: &mut Script, text: &str, name: &ast::ObjectName) -> Result<()> {
    let catalog = &script.catalog;
    let key = name.to_string();
    let listings = match catalog.views.get(&key.to_ascii_lowercase()) {
        Some(v) => crate::view::describe(script, v),
        None => catalog.describe(&key),
    };
    let what = Show::Listings(listings.map_err(|e| e.at(text, name.span()))?);
    script.shown.push(Shown {
        after_jobs: script.jobs.len(),
        what,
    });
    Ok(())
}
