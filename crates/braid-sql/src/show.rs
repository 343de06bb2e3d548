//! `SHOW STREAMS | SINKS | TABLES | QUERIES` and `DESCRIBE name`: what they list is
//! kept in [`Script::shown`], after the queries before them, for the caller to print.

use crate::located::At;
use crate::script::{Script, Show, Shown};
use braid_plan::error::{Error, Result};
use sqlparser::ast::{self, Spanned};

/// What SHOW takes, for errors.
const SHOWN: &str = "SHOW takes STREAMS, SINKS, TABLES, VIEWS or QUERIES";

/// Runs a SHOW or DESCRIBE statement.
pub(crate) fn statement(script: &mut Script, text: &str, st: &ast::Statement) -> Result<()> {
    let catalog = &script.catalog;
    let what = match st {
        ast::Statement::ShowTables { .. } if st.to_string() == "SHOW TABLES" => {
            Show::Listings(vec![catalog.show_tables()])
        }
        ast::Statement::ShowViews {
            terse: false,
            materialized: false,
            ..
        } if st.to_string() == "SHOW VIEWS" => Show::Listings(vec![catalog.show_views()]),
        ast::Statement::ShowVariable { variable } => match variable.as_slice() {
            [one] => match one.value.to_ascii_uppercase().as_str() {
                "STREAMS" => Show::Listings(vec![catalog.show_streams()]),
                "SINKS" => Show::Listings(vec![catalog.show_sinks()]),
                "QUERIES" => Show::Queries,
                _ => {
                    return Err(Error::NotSupported(format!("SHOW {}; {SHOWN}", one.value))
                        .at(text, one.span))
                }
            },
            more => {
                let span = more.iter().fold(more[0].span, |s, i| s.union(&i.span));
                return Err(Error::NotSupported(format!("`{st}`; {SHOWN}")).at(text, span));
            }
        },
        ast::Statement::ExplainTable {
            describe_alias: ast::DescribeAlias::Describe | ast::DescribeAlias::Desc,
            hive_format: None,
            has_table_keyword: false,
            table_name,
        } => {
            let name = table_name.to_string();
            let listings = match catalog.views.get(&name.to_ascii_lowercase()) {
                Some(v) => crate::view::describe(script, v),
                None => catalog.describe(&name),
            };
            Show::Listings(listings.map_err(|e| e.at(text, table_name.span()))?)
        }
        ast::Statement::ExplainTable {
            describe_alias: ast::DescribeAlias::Explain,
            ..
        } => {
            return Err(Error::NotSupported(format!(
            "`{st}`: EXPLAIN takes a query; DESCRIBE name describes a stream, table, sink or view"
        )))
        }
        _ => {
            return Err(Error::NotSupported(format!(
                "`{st}`; {SHOWN}, and DESCRIBE a name"
            )))
        }
    };
    script.shown.push(Shown {
        after_jobs: script.jobs.len(),
        what,
    });
    Ok(())
}
