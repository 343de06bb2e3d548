//! The script language's statements run: each [`Statement`] of [`crate::parse`] in
//! order, declarations into the catalog, `SET` into the settings, queries into jobs
//! ([`crate::order`] takes a query's ORDER BY and LIMIT, [`crate::query`] plans it,
//! [`crate::parallel`] an explicit `PARALLEL(...)`).

use crate::catalog::{self, Kind, Options, SinkDef};
use crate::located::At;
use crate::parse::{Declare, DropKind, Located, Statement};
use crate::script::{Job, Script};
use crate::show;
use crate::watermark;
use braid_plan::batch::Scalar;
use braid_plan::error::{Error, Result};
use braid_plan::types::{Field, Schema};
use sqlparser::ast::{self, Spanned};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::Span;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// Parses `text` and runs its statements against `script`; returns the number of jobs
/// added.
pub(crate) fn add(script: &mut Script, text: &str, base: &Path) -> Result<usize> {
    let statements = crate::parse::parse(text)?;
    let before = script.jobs.len();
    for st in &statements {
        run(script, text, base, st)?;
    }
    Ok(script.jobs.len() - before)
}

/// Runs one statement of the script language; the server's own are refused by name.
pub(crate) fn run(
    script: &mut Script,
    text: &str,
    base: &Path,
    located: &Located<Statement>,
) -> Result<()> {
    let span = located.span;
    let at = |e: Error| e.at(text, span);
    match &located.statement {
        Statement::Declare(d) => create(script, text, base, d, span),
        Statement::CreateView(cv) => crate::view::create(script, text, cv),
        Statement::Set(s) => set(script, base, &s.name, &s.values).map_err(at),
        Statement::Insert(ins) => insert(script, text, ins).map_err(at),
        Statement::Query(q) => query(script, text, q).map_err(at),
        Statement::Drop(d) => {
            let kind = match d.kind {
                DropKind::Stream => Kind::Stream,
                DropKind::Sink => Kind::Sink,
                DropKind::Table => Kind::Table,
                DropKind::View => Kind::View,
                DropKind::MaterializedView => {
                    return Err(at(server_only("DROP MATERIALIZED VIEW")));
                }
            };
            for name in &d.names {
                let e = script.catalog.drop(kind, &name.to_string(), d.if_exists);
                e.map_err(|e| e.at(text, name.span()))?;
            }
            Ok(())
        }
        Statement::CreateFunction(cf) => crate::function::create(script, cf).map_err(at),
        Statement::DropFunction(df) => crate::function::drop(script, df).map_err(at),
        Statement::Show(what) => show::show(script, what).map_err(at),
        Statement::Describe(name) => show::describe(script, text, name),
        Statement::CreateAs(c) => Err(server_only(&located.statement.tag()).at(text, c.name_span)),
        other => Err(at(server_only(&other.tag()))),
    }
}

/// A statement of the server's (SUBSCRIBE, COPY, CREATE MATERIALIZED VIEW, ...) in a
/// script.
fn server_only(what: &str) -> Error {
    Error::NotSupported(format!(
        "{what} in a script: it is a statement of the server (braid serve, then psql); a script runs CREATE [OR REPLACE] STREAM/TABLE/SINK/VIEW/FUNCTION, DROP, SET, SHOW, DESCRIBE, INSERT INTO ... SELECT and SELECT"
    ))
}

/// `INSERT INTO sink SELECT ...`: a job writing the sink.
fn insert(script: &mut Script, text: &str, ins: &ast::Insert) -> Result<()> {
    let target = ins.table.to_string();
    let mut sink = script.catalog.sink(&target)?.clone();
    sink.max_latency = sink.max_latency.or(script.catalog.settings.max_latency);
    let Some(src) = &ins.source else {
        return Err(Error::NotSupported("INSERT without a query".into()));
    };
    let mut job = crate::order::job(script, text, src, &sink, &ins.to_string())?;
    job.plan.check_latency_parts()?;
    shed(&mut job.plan, script.catalog.settings.shed_load)?;
    job.plan.set_scheduler(script.catalog.settings.scheduler);
    tuned(&mut job, &script.catalog.settings)?;
    script.add_job(job, Some(&sink.name))
}

/// A query: a job writing its rows to standard output (the server's client).
pub(crate) fn query(script: &mut Script, text: &str, q: &ast::Query) -> Result<()> {
    let sink = SinkDef {
        name: "stdout".into(),
        spec: braid_plan::plan::SinkSpec::Stdout,
        stamp_emit: false,
        header: false,
        max_latency: script.catalog.settings.max_latency,
        latency_to: None,
        latency_from: None,
    };
    let mut job = crate::order::job(script, text, q, &sink, &q.to_string())?;
    shed(&mut job.plan, script.catalog.settings.shed_load)?;
    job.plan.set_scheduler(script.catalog.settings.scheduler);
    tuned(&mut job, &script.catalog.settings)?;
    script.add_job(job, None)
}

/// `CREATE STREAM`, `CREATE SINK` or `CREATE TABLE`: a declaration into the catalog.
/// Errors without a position get the statement's (`span`).
fn create(script: &mut Script, text: &str, base: &Path, d: &Declare, span: Span) -> Result<()> {
    let (ct, kind, watermark) = (&d.table, d.kind, d.watermark.as_ref());
    let name = ct.name.to_string();
    let opts = options(&ct.table_options, text)?;
    let schema = (!ct.columns.is_empty())
        .then(|| columns(&ct.columns, text))
        .transpose()?;
    let lower = name.to_ascii_lowercase();
    match script.catalog.kind_of(&name) {
        None => {}
        Some(k) if ct.or_replace && k == kind => {
            // Replaced only once the new declaration is good: an error keeps the old one.
        }
        Some(k) if ct.or_replace => {
            return Err(Error::Plan(format!(
                "`{name}` is a {}; CREATE OR REPLACE {} does not change what it is (DROP {} {name} first)",
                k.word(),
                kind.word().to_ascii_uppercase(),
                k.word().to_ascii_uppercase()
            ))
            .at(text, span))
        }
        Some(k) => {
            return Err(Error::Plan(format!(
                "`{name}` is already declared (a {}); write CREATE OR REPLACE to replace it, or DROP it first",
                k.word()
            ))
            .at(text, span))
        }
    }
    match kind {
        Kind::Stream => {
            let what = format!("stream `{name}`");
            let mut opts = watermark::options(&what, opts, watermark, text)?;
            if script.catalog.live {
                opts.default_to_log();
            }
            let def = catalog::stream(&name, schema, opts, base);
            script.catalog.streams.insert(lower, def.at(text, span)?);
        }
        Kind::Sink => {
            if schema.is_some() {
                return Err(Error::Plan(format!(
                    "sink `{name}` takes no columns; it writes what the query selects"
                ))
                .at(text, span));
            }
            let def = catalog::sink(&name, Options::new(&format!("sink `{name}`"), opts), base);
            let def = def.at(text, span)?;
            // A replaced sink's late rows are no longer LATE(name).
            script.catalog.late.remove(&lower);
            script.catalog.sinks.insert(lower, def);
        }
        Kind::Table | Kind::View => {
            let schema = schema.ok_or_else(|| {
                Error::Plan(format!("table `{name}` needs its columns")).at(text, span)
            })?;
            let what = format!("table `{name}`");
            let def = catalog::table(&name, schema, Options::new(&what, opts), base);
            script
                .catalog
                .tables
                .insert(lower, Arc::new(def.at(text, span)?));
        }
    }
    Ok(())
}

/// `SET desired_rate` (and `splitter_rate`) on the splits that read the query's streams.
fn rates(plan: &mut braid_plan::plan::Plan, settings: &crate::catalog::Settings) -> Result<()> {
    if settings.splitter_rate.is_some() && settings.desired_rate.is_none() {
        return Err(Error::Plan(
            "SET splitter_rate serves SET desired_rate, which is not set".into(),
        ));
    }
    if settings.desired_rate.is_some() {
        plan.set_rates(settings.desired_rate, settings.splitter_rate);
    }
    Ok(())
}

/// The settings that shape a query's physical plan before it runs: Paper V's rates
/// (`SET desired_rate`) and window (`SET window = 'auto'`).
fn tuned(job: &mut Job, settings: &crate::catalog::Settings) -> Result<()> {
    rates(&mut job.plan, settings)?;
    job.tune_window = settings.tune_window;
    Ok(())
}

/// `SET key = value` (a relative `late_path` is relative to `base`).
fn set(script: &mut Script, base: &Path, key: &str, values: &[ast::Expr]) -> Result<()> {
    let [v] = values else {
        return Err(Error::Plan(format!("SET {key} takes one value")));
    };
    let value = match v {
        ast::Expr::Value(x) => literal(&x.value),
        ast::Expr::Identifier(id) => Some(Scalar::Str(id.value.clone())),
        _ => None,
    }
    .ok_or_else(|| Error::Plan(format!("SET {key} needs a literal value")))?;
    let mut value = value;
    if key.eq_ignore_ascii_case("late_path") {
        if let Scalar::Str(p) = &value {
            value = Scalar::Str(base.join(p).to_string_lossy().to_string());
        }
    }
    catalog::set(&mut script.catalog.settings, key, &value)
}

/// The options of `WITH (key = value, ...)`.
fn options(list: &ast::CreateTableOptions, text: &str) -> Result<BTreeMap<String, Scalar>> {
    let mut out = BTreeMap::new();
    let items = match list {
        ast::CreateTableOptions::None => return Ok(out),
        ast::CreateTableOptions::With(v) => v,
        _ => {
            return Err(Error::NotSupported(
                "options other than WITH (key = value, ...)".into(),
            ))
        }
    };
    for o in items {
        match o {
            ast::SqlOption::KeyValue { key, value } => {
                let v = match value {
                    ast::Expr::Value(v) => literal(&v.value),
                    ast::Expr::UnaryOp {
                        op: ast::UnaryOperator::Minus,
                        expr,
                    } => match expr.as_ref() {
                        ast::Expr::Value(v) => match literal(&v.value) {
                            Some(Scalar::Int(i)) => Some(Scalar::Int(-i)),
                            Some(Scalar::Float(f)) => Some(Scalar::Float(-f)),
                            _ => None,
                        },
                        _ => None,
                    },
                    ast::Expr::Identifier(id) => Some(Scalar::Str(id.value.clone())),
                    _ => None,
                };
                let v = v.ok_or_else(|| {
                    Error::Plan(format!("option `{}` needs a literal value", key.value))
                        .at(text, value.span())
                })?;
                out.insert(key.value.to_ascii_lowercase(), v);
            }
            other => {
                return Err(
                    Error::NotSupported(format!("option `{other}`; write key = value"))
                        .at(text, other.span()),
                )
            }
        }
    }
    Ok(out)
}

/// The value of a literal option.
fn literal(v: &ast::Value) -> Option<Scalar> {
    Some(match v {
        ast::Value::Number(n, _) => match n.parse::<i64>() {
            Ok(i) => Scalar::Int(i),
            Err(_) => Scalar::Float(n.parse().ok()?),
        },
        ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => {
            Scalar::Str(s.clone())
        }
        ast::Value::Boolean(b) => Scalar::Bool(*b),
        _ => return None,
    })
}

/// The columns of `CREATE STREAM/TABLE name (columns)`.
fn columns(cols: &[ast::ColumnDef], text: &str) -> Result<Schema> {
    let mut fields = Vec::new();
    for c in cols {
        let (ty, len) = crate::expr::column_type(&c.data_type).map_err(|why| {
            Error::NotSupported(format!("column `{}` of type {why}", c.name.value))
                .at(text, c.name.span)
        })?;
        let not_null = c
            .options
            .iter()
            .any(|o| matches!(o.option, ast::ColumnOption::NotNull));
        let mut f = if not_null {
            Field::new(&c.name.value, ty)
        } else {
            Field::nullable(&c.name.value, ty)
        };
        f.len = len;
        fields.push(f);
    }
    Ok(Schema::new(fields))
}

/// A column list as `CREATE STREAM name (...)` takes it (`a BIGINT NOT NULL, b TEXT`):
/// how an embedding names the columns of a stream or a function's rows.
pub fn parse_columns(list: &str) -> Result<Schema> {
    let text = format!("CREATE TABLE t ({list})");
    let parsed = Parser::parse_sql(&GenericDialect {}, &text)
        .map_err(|e| Error::Plan(format!("the columns `{list}`: {e}")))?;
    match parsed.as_slice() {
        [ast::Statement::CreateTable(ct)] if !ct.columns.is_empty() => columns(&ct.columns, &text),
        _ => Err(Error::Plan(format!(
            "the columns `{list}`: expected name TYPE, name TYPE, ..."
        ))),
    }
}

/// `SET shed_load`: the query's source sheds load (it must be paced: a source read as
/// fast as possible has no schedule to fall behind).
fn shed(plan: &mut braid_plan::plan::Plan, after: Option<std::time::Duration>) -> Result<()> {
    let Some(d) = after else {
        return Ok(());
    };
    // The source the query reads (an interleave of several streams too) is paced as a
    // whole: its pace is what the source loop follows.
    let source = plan.leaf_source_mut();
    if source.pace == braid_plan::plan::Pace::Max {
        return Err(Error::Plan(format!(
            "shed_load: stream `{}` is read as fast as possible, so it has no schedule to fall behind; give it `speed` (and `units_per_second`) to replay it in real time",
            source.name
        )));
    }
    source.shed = Some(d);
    Ok(())
}
