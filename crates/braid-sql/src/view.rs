//! `CREATE [OR REPLACE] VIEW name AS query` and `DESCRIBE view`: a view is a named query
//! in the catalog, planned where a query names it in FROM as that query written there
//! as a subquery (`planner/named.rs`). Its query is planned when it is created, so an
//! error in it is reported then, at its line and column.

use crate::catalog::{self, Kind, Listing, ViewDef};
use crate::located::At;
use crate::planner::Planner;
use crate::script::Script;
use braid_plan::error::{Error, Result};
use sqlparser::ast::{self, Spanned};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;

/// `CREATE [OR REPLACE] VIEW [IF NOT EXISTS] name AS query`.
pub(crate) fn create(script: &mut Script, text: &str, cv: &ast::CreateView) -> Result<()> {
    let name = cv.name.to_string();
    let at = |e: Error| e.at(text, cv.name.span());
    let extra = [
        (cv.materialized, "CREATE MATERIALIZED VIEW"),
        (cv.or_alter, "CREATE OR ALTER VIEW"),
        (cv.secure, "SECURE views"),
        (cv.temporary, "TEMPORARY views"),
        (!cv.columns.is_empty(), "column names after the view's name"),
        (
            !matches!(cv.options, ast::CreateTableOptions::None),
            "options of a view",
        ),
        (!cv.cluster_by.is_empty(), "CLUSTER BY"),
        (cv.with_no_schema_binding, "WITH NO SCHEMA BINDING"),
        (cv.to.is_some(), "TO (a view writing to a table)"),
        (cv.params.is_some(), "ALGORITHM, DEFINER and SQL SECURITY"),
    ];
    if let Some((_, what)) = extra.iter().find(|(on, _)| *on) {
        return Err(at(Error::NotSupported(format!(
            "{what}; Braid's views are CREATE [OR REPLACE] VIEW name AS query"
        ))));
    }
    match script.catalog.kind_of(&name) {
        None => {}
        Some(Kind::View) if cv.if_not_exists => return Ok(()),
        Some(Kind::View) if cv.or_replace => {}
        Some(k) => {
            return Err(at(Error::Plan(format!(
                "`{name}` is already declared (a {}); {}",
                k.word(),
                if k == Kind::View {
                    "write CREATE OR REPLACE VIEW to replace it, or DROP VIEW it first".to_string()
                } else {
                    format!("DROP {} {name} first", k.word().to_ascii_uppercase())
                }
            ))))
        }
    }
    // Checked where it is written: planned as a query would plan it.
    let mut planner = Planner::new(&script.catalog, &script.registry, text);
    planner.view_query(&name, &cv.query)?;
    // Kept as text and parsed again, so an error found where it is used (something it
    // reads has changed) points into this text.
    let sql = cv.query.to_string();
    let query = match Parser::parse_sql(&GenericDialect {}, &sql).as_deref() {
        Ok([ast::Statement::Query(q)]) => (**q).clone(),
        _ => {
            return Err(Error::Internal(format!(
                "the view's query does not read back: {sql}"
            )))
        }
    };
    let key = name.to_ascii_lowercase();
    script
        .catalog
        .views
        .insert(key, ViewDef { name, sql, query });
    Ok(())
}

/// `DESCRIBE view`: its columns (as its query plans now) and its query.
pub(crate) fn describe(script: &Script, v: &ViewDef) -> Result<Vec<Listing>> {
    let mut planner = Planner::new(&script.catalog, &script.registry, &v.sql);
    let (plan, _) = planner.view_query(&v.name, &v.query)?;
    let mut query = Listing {
        header: vec!["option".into(), "value".into()],
        rows: Vec::new(),
    };
    query.rows.push(vec!["query".into(), v.sql.clone()]);
    Ok(vec![catalog::columns(plan.schema()), query])
}
