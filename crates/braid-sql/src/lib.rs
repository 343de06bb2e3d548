//! Braid's continuous query language: SQL for streams, parsed with `sqlparser`.
//!
//! A script declares streams, tables and sinks and runs queries:
//!
//! ```sql
//! CREATE STREAM calls (caller BIGINT, callee BIGINT, start BIGINT, dur BIGINT)
//!   WITH (source = 'csv', path = 'calls.csv', event_time = 'start', epoch = 60);
//! CREATE TABLE watch (number BIGINT, reason TEXT) WITH (path = 'watch.csv');
//! CREATE SINK alerts WITH (sink = 'csv', path = 'alerts.csv');
//! SET partitions = 8;
//! INSERT INTO alerts
//!   SELECT window_end, dur / 60 AS minutes, count(*) AS calls
//!   FROM calls JOIN watch ON calls.caller = watch.number
//!   GROUP BY TUMBLE(start, 3600), dur / 60;
//! ```
//!
//! Every query compiles to a [`Logical`] plan ([`compile`]), which automatic
//! parallelization ([`physical`]) turns into the same physical plan every other way of
//! running Braid builds: `Source -> Split -> Map -> Merge -> Sink`, the query running
//! as the stream function of each partition ([`run`]). `SELECT * FROM PARALLEL(...)`
//! states the split explicitly instead (see [`Script`]).
//!
//! `CREATE STREAM` and `CREATE SINK` are Braid's words: the text is handed to sqlparser
//! with them spelled `CREATE TABLE`, keeping every position the same, so parse errors
//! point at the user's text.

pub mod catalog;
pub mod expr;
mod located;
pub mod logical;
mod optimizer;
pub mod physical;
mod planner;
pub mod run;

use crate::expr::{convert, Resolve};
use crate::located::{parse_error, At};
use braid_plan::batch::Scalar;
use braid_plan::error::{Error, Result};
use braid_plan::expr::Expr;
use braid_plan::function::Registry;
use braid_plan::plan::{Combine, MergeKind, Pace, Plan, Route, Sink, Source, SourceSpec, Strategy};
use braid_plan::types::{DataType, Field, Schema};
use catalog::{Catalog, Options, SinkDef};
use logical::Logical;
use physical::Partitioning;
use planner::Planner;
use run::{LateLayout, LateRows, QueryFactory};
use sqlparser::ast::{self, Spanned};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, Tokenizer};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// A compiled query, ready to run.
#[derive(Clone)]
pub struct Job {
    /// The statement's text.
    pub sql: String,
    /// The plan as written (None for an explicit PARALLEL).
    pub logical: Option<Logical>,
    /// The optimized stages, lowest first, each with its partitioning (filters moved
    /// into the balancer; stage k + 1 reads `stagek`). Empty for an explicit PARALLEL.
    pub stages: Vec<(Logical, String)>,
    /// How the input is partitioned, and why.
    pub partitioning: String,
    /// The physical plan.
    pub plan: Plan,
    /// Late rows of the query.
    pub late: Arc<LateRows>,
    /// The stream of the query's late rows, when it can refuse any: a source reading
    /// them from plan 0 of a `Together`.
    pub late_source: Option<Source>,
    /// Set for a query over `LATE(sink)`: it runs in the dataflow of that job, as this
    /// plan of its `Together`.
    pub runs_in: Option<(usize, usize)>,
}

/// A compiled script: its declarations and its queries in order.
pub struct Script {
    /// Declared streams, tables, sinks and settings.
    pub catalog: Catalog,
    /// The queries.
    pub jobs: Vec<Job>,
    /// The registry the plans name (the caller's plus one function per query).
    pub registry: Registry,
}

/// Compiles a script. Relative paths are relative to `base`; `registry` holds the
/// stream functions, routes, combiners and sinks the script may name.
pub fn compile_script(text: &str, base: &Path, registry: &Registry) -> Result<Script> {
    let mut script = Script {
        catalog: Catalog::default(),
        jobs: Vec::new(),
        registry: registry.clone(),
    };
    add_statements(&mut script, text, base)?;
    Ok(script)
}

/// Compiles more statements into `script` (the shell adds one at a time); returns the
/// number of jobs added.
pub fn add_statements(script: &mut Script, text: &str, base: &Path) -> Result<usize> {
    let (patched, kinds) = braid_words(text);
    let statements = Parser::parse_sql(&GenericDialect {}, &patched)
        .map_err(|e| parse_error(text, &e.to_string()))?;
    let before = script.jobs.len();
    for (n, st) in statements.iter().enumerate() {
        statement(script, text, base, st, kinds.get(n).copied().flatten())?;
    }
    Ok(script.jobs.len() - before)
}

/// `CREATE STREAM`/`CREATE SINK` become `CREATE TABLE ` (same length for STREAM; SINK
/// gains one column). Returns the text and, per statement, which word it had.
fn braid_words(text: &str) -> (String, Vec<Option<Word>>) {
    let dialect = GenericDialect {};
    let Ok(tokens) = Tokenizer::new(&dialect, text).tokenize_with_location() else {
        return (text.to_string(), Vec::new());
    };
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let offset = |line: u64, col: u64| -> usize {
        let start = line_starts.get(line as usize - 1).copied().unwrap_or(0);
        text[start..]
            .char_indices()
            .nth(col as usize - 1)
            .map_or(text.len(), |(i, _)| start + i)
    };
    let mut edits: Vec<(usize, usize, &str)> = Vec::new();
    let mut kinds: Vec<Option<Word>> = vec![None];
    let mut after_create = false;
    for t in &tokens {
        match &t.token {
            Token::Whitespace(_) => continue,
            Token::SemiColon => {
                kinds.push(None);
                after_create = false;
                continue;
            }
            Token::Word(w) if after_create => {
                let kind = match w.value.to_ascii_uppercase().as_str() {
                    "STREAM" => Some(Word::Stream),
                    "SINK" => Some(Word::Sink),
                    _ => None,
                };
                if let Some(k) = kind {
                    let at = offset(t.span.start.line, t.span.start.column);
                    let len = w.value.len();
                    edits.push((at, len, if k == Word::Stream { "TABLE " } else { "TABLE" }));
                    if let Some(last) = kinds.last_mut() {
                        *last = Some(k);
                    }
                }
            }
            _ => {}
        }
        after_create = matches!(&t.token, Token::Word(w) if w.value.eq_ignore_ascii_case("create"));
    }
    let mut out = text.to_string();
    for (at, len, with) in edits.into_iter().rev() {
        out.replace_range(at..at + len, with);
    }
    // Statements sqlparser returns skip empty ones; drop empty slots the same way.
    let mut per = Vec::new();
    for (i, piece) in split_statements(&tokens).into_iter().enumerate() {
        if piece {
            per.push(kinds.get(i).copied().flatten());
        }
    }
    (out, per)
}

/// Per `;`-separated piece: whether it has any token (sqlparser skips empty ones).
fn split_statements(tokens: &[sqlparser::tokenizer::TokenWithSpan]) -> Vec<bool> {
    let mut v = vec![false];
    for t in tokens {
        match &t.token {
            Token::SemiColon => v.push(false),
            Token::Whitespace(_) | Token::EOF => {}
            _ => {
                if let Some(last) = v.last_mut() {
                    *last = true;
                }
            }
        }
    }
    v
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Word {
    Stream,
    Sink,
}

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

fn columns(cols: &[ast::ColumnDef], text: &str) -> Result<Schema> {
    let mut fields = Vec::new();
    for c in cols {
        let name = match &c.data_type {
            ast::DataType::Custom(n, _) => n.to_string(),
            other => other.to_string(),
        };
        let base = name.split('(').next().unwrap_or(&name).trim().to_string();
        let ty: DataType = match base.to_ascii_uppercase().as_str() {
            "INT" | "INTEGER" | "BIGINT" | "SMALLINT" | "INT64" | "TINYINT" => DataType::Int64,
            "DOUBLE" | "FLOAT" | "REAL" | "FLOAT64" | "DOUBLE PRECISION" | "DECIMAL"
            | "NUMERIC" => DataType::Float64,
            "BOOL" | "BOOLEAN" => DataType::Bool,
            "TEXT" | "VARCHAR" | "STRING" | "CHAR" | "CHARACTER VARYING" => DataType::String,
            _ => {
                return Err(Error::Plan(format!(
                    "column `{}` has type {name}; types are BIGINT, DOUBLE, BOOLEAN, TEXT",
                    c.name.value
                ))
                .at(text, c.name.span))
            }
        };
        let not_null = c
            .options
            .iter()
            .any(|o| matches!(o.option, ast::ColumnOption::NotNull));
        fields.push(if not_null {
            Field::new(&c.name.value, ty)
        } else {
            Field::nullable(&c.name.value, ty)
        });
    }
    Ok(Schema::new(fields))
}

fn statement(
    script: &mut Script,
    text: &str,
    base: &Path,
    st: &ast::Statement,
    word: Option<Word>,
) -> Result<()> {
    let at = |e: Error| e.at(text, st.span());
    match st {
        ast::Statement::CreateTable(ct) => {
            let name = ct.name.to_string();
            let opts = options(&ct.table_options, text)?;
            let schema = (!ct.columns.is_empty())
                .then(|| columns(&ct.columns, text))
                .transpose()?;
            let lower = name.to_ascii_lowercase();
            let taken = script.catalog.streams.contains_key(&lower)
                || script.catalog.tables.contains_key(&lower)
                || script.catalog.sinks.contains_key(&lower);
            if taken {
                return Err(at(Error::Plan(format!("`{name}` is already declared"))));
            }
            match word {
                Some(Word::Stream) => {
                    let def = catalog::stream(&name, schema, Options::new(&format!("stream `{name}`"), opts), base)
                        .map_err(at)?;
                    script.catalog.streams.insert(lower, def);
                }
                Some(Word::Sink) => {
                    if schema.is_some() {
                        return Err(at(Error::Plan(format!(
                            "sink `{name}` takes no columns; it writes what the query selects"
                        ))));
                    }
                    let def = catalog::sink(&name, Options::new(&format!("sink `{name}`"), opts), base)
                        .map_err(at)?;
                    script.catalog.sinks.insert(lower, def);
                }
                None => {
                    let schema = schema.ok_or_else(|| {
                        at(Error::Plan(format!("table `{name}` needs its columns")))
                    })?;
                    let def = catalog::table(&name, schema, Options::new(&format!("table `{name}`"), opts), base)
                        .map_err(at)?;
                    script.catalog.tables.insert(lower, Arc::new(def));
                }
            }
            Ok(())
        }
        ast::Statement::Set(ast::Set::SingleAssignment {
            variable, values, ..
        }) => {
            let key = variable.to_string();
            let [v] = values.as_slice() else {
                return Err(at(Error::Plan(format!("SET {key} takes one value"))));
            };
            let value = match v {
                ast::Expr::Value(x) => literal(&x.value),
                ast::Expr::Identifier(id) => Some(Scalar::Str(id.value.clone())),
                _ => None,
            }
            .ok_or_else(|| at(Error::Plan(format!("SET {key} needs a literal value"))))?;
            let mut value = value;
            if key.eq_ignore_ascii_case("late_path") {
                if let Scalar::Str(p) = &value {
                    value = Scalar::Str(base.join(p).to_string_lossy().to_string());
                }
            }
            catalog::set(&mut script.catalog.settings, &key, &value).map_err(at)
        }
        ast::Statement::Insert(ins) => {
            let target = ins.table.to_string();
            let sink = script.catalog.sink(&target).map_err(at)?.clone();
            let Some(src) = &ins.source else {
                return Err(at(Error::NotSupported("INSERT without a query".into())));
            };
            let job = query_job(script, text, src, &sink, &st.to_string())?;
            add_job(script, job, Some(&sink.name)).map_err(at)
        }
        ast::Statement::Query(q) => {
            let sink = SinkDef {
                name: "stdout".into(),
                spec: braid_plan::plan::SinkSpec::Stdout,
                stamp_emit: false,
            };
            let job = query_job(script, text, q, &sink, &st.to_string())?;
            add_job(script, job, None).map_err(at)
        }
        other => Err(at(Error::NotSupported(format!(
            "statement `{}`; Braid runs CREATE STREAM/TABLE/SINK, SET, INSERT INTO ... SELECT and SELECT",
            first_words(&other.to_string())
        )))),
    }
}

/// Adds a compiled query to the script. A query over `LATE(x)` joins the dataflow of
/// the job making those rows, as a later plan of its `Together`. A query with late rows
/// that writes to `sink` makes `LATE(sink)` readable by later queries.
fn add_job(script: &mut Script, mut job: Job, sink: Option<&str>) -> Result<()> {
    let leaf = job.plan.leaf_source().clone();
    let index = script.jobs.len();
    let (owner, plan) = match &leaf.spec {
        SourceSpec::Late { .. } => {
            let of = leaf
                .name
                .strip_prefix("late(")
                .and_then(|n| n.strip_suffix(')'))
                .ok_or_else(|| Error::Internal(format!("late source named {}", leaf.name)))?;
            let owner = script.catalog.late_stream(of)?.job;
            let mut plans = match &script.jobs[owner].plan {
                Plan::Together(p) => p.clone(),
                one => vec![one.clone()],
            };
            plans.push(job.plan.clone());
            let plan = plans.len() - 1;
            // Checked before it replaces the owner's plan: a refused query leaves it be.
            let together = Plan::Together(plans);
            together.schema(&script.registry)?;
            script.jobs[owner].plan = together;
            job.runs_in = Some((owner, plan));
            (owner, plan)
        }
        _ => (index, 0),
    };
    if let (Some(sink), Some(source)) = (sink, &job.late_source) {
        let key = sink.to_ascii_lowercase();
        let name = format!("late({key})");
        let ambiguous = script.catalog.late.contains_key(&key);
        script.catalog.late.insert(
            key,
            catalog::LateStream {
                def: catalog::StreamDef {
                    name: name.clone(),
                    source: Source {
                        name,
                        spec: SourceSpec::Late { of: plan },
                        ..source.clone()
                    },
                    lateness: 0,
                },
                job: owner,
                ambiguous,
            },
        );
    }
    script.jobs.push(job);
    Ok(())
}

fn first_words(s: &str) -> String {
    s.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

fn query_job(
    script: &mut Script,
    text: &str,
    q: &ast::Query,
    sink: &SinkDef,
    sql: &str,
) -> Result<Job> {
    if let Some(par) = parallel_call(q) {
        return explicit(script, text, q, par, sink, sql);
    }
    let n = script.jobs.len();
    let mut c = Planner::new(&script.catalog, &script.registry, text);
    let (logical, _) = c.query(q)?;
    let defs: Vec<&catalog::StreamDef> = c
        .inputs
        .iter()
        .map(|s| script.catalog.stream(s))
        .collect::<Result<_>>()?;
    if defs.len() > 1
        && defs
            .iter()
            .any(|d| matches!(d.source.spec, SourceSpec::Late { .. }))
    {
        return Err(Error::NotSupported(
            "a query over LATE(sink) that also reads another stream; read the late rows alone"
                .into(),
        )
        .at(text, q.span()));
    }
    let (source, layout, lateness) = physical::input_source(&defs).at(text, q.span())?;
    let settings = script.catalog.settings.clone();
    // The cut does not depend on `parallel`: a serial run has the same stages, each in
    // one partition.
    let pushed = optimizer::push_filters_down(logical.clone());
    let mut stages = optimizer::cut(pushed, settings.stages, &layout, &source.schema);
    let late = Arc::new(
        LateRows::new(settings.late_path.as_deref())
            .map_err(|e| Error::Plan(format!("cannot create the late-row file: {e}")))?,
    );
    let epoch = source.epoch;
    let n_stages = stages.len();
    let late_layout = LateLayout::of(&stages.iter().collect::<Vec<_>>());
    let mut plan = Plan::Source(source.clone());
    let mut described = Vec::new();
    let mut extra = 0;
    for (k, stage) in stages.iter_mut().enumerate() {
        // The first stage reads the source; later ones the previous stage's output.
        let (layout_k, phys) = if k == 0 {
            (layout.clone(), source.schema.clone())
        } else {
            (
                physical::stage_layout(stage),
                plan.schema(&script.registry)?,
            )
        };
        let mut part = if settings.auto {
            optimizer::partitioning(stage, &layout_k, &phys)
        } else {
            Partitioning::Single("SET parallel = 'off'".into())
        };
        let mut when = None;
        if k == 0
            && matches!(part, Partitioning::Hash { .. } | Partitioning::Single(_))
            && defs.len() == 1
        {
            when = optimizer::pull_scan_filter(stage, &layout_k, &phys);
            if when.is_some() && settings.auto {
                part = optimizer::partitioning(stage, &layout_k, &phys);
            }
        }
        let function = if n_stages == 1 {
            format!("query{}", n + 1)
        } else {
            format!("query{}_{}", n + 1, k + 1)
        };
        let mut factory = QueryFactory::new(
            stage.clone(),
            layout_k,
            epoch,
            lateness.saturating_add(extra),
            late.clone(),
        );
        if let Some(l) = &late_layout {
            factory = factory.with_late_stream(l, k);
        }
        extra = extra.saturating_add(physical::delay(stage));
        script.registry.add_function(&function, Arc::new(factory));
        plan = physical::stage(plan, &part, when, &function, &settings, k + 1 == n_stages);
        described.push((stage.clone(), part.to_string()));
    }
    let plan = physical::sink(plan, sink);
    plan.schema(&script.registry)?;
    let partitioning = if described.len() == 1 {
        described[0].1.clone()
    } else {
        described
            .iter()
            .enumerate()
            .map(|(k, (_, p))| format!("stage {}: {p}", k + 1))
            .collect::<Vec<_>>()
            .join("; ")
    };
    let late_source = late_layout.map(|l| Source {
        name: "late".into(),
        spec: SourceSpec::Late { of: 0 },
        schema: l.schema,
        epoch,
        window: source.window,
        pace: Pace::Max,
        out_of_order: true,
    });
    Ok(Job {
        sql: sql.to_string(),
        logical: Some(logical),
        stages: described,
        partitioning,
        plan,
        late,
        late_source,
        runs_in: None,
    })
}

/// The arguments of `SELECT * FROM PARALLEL(...)`, if the query is that.
fn parallel_call(q: &ast::Query) -> Option<&ast::TableFunctionArgs> {
    let ast::SetExpr::Select(s) = q.body.as_ref() else {
        return None;
    };
    let [from] = s.from.as_slice() else {
        return None;
    };
    match &from.relation {
        ast::TableFactor::Table {
            name,
            args: Some(args),
            ..
        } if name.to_string().eq_ignore_ascii_case("parallel") && from.joins.is_empty() => {
            Some(args)
        }
        _ => None,
    }
}

/// `SELECT * FROM PARALLEL(stream, partitions => q, route => expr, [route_when => expr,]
/// [broadcast => expr,] [strategy => 'name',] apply => function | (SELECT ... FROM stream),
/// [merge => 'union' | 'time' | 'keyed', merge_key => (columns), combine => 'name' |
/// 'sum(col)', merge_filter => expr, fanin => k])`.
fn explicit(
    script: &mut Script,
    text: &str,
    q: &ast::Query,
    args: &ast::TableFunctionArgs,
    sink: &SinkDef,
    sql: &str,
) -> Result<Job> {
    let ast::SetExpr::Select(s) = q.body.as_ref() else {
        return Err(Error::Internal("PARALLEL outside SELECT".into()));
    };
    if !matches!(s.projection.as_slice(), [ast::SelectItem::Wildcard(_)]) || s.selection.is_some() {
        return Err(Error::NotSupported(
            "a SELECT list or WHERE around PARALLEL(...); put them in its `apply` query".into(),
        )
        .at(text, s.span()));
    }
    let mut stream: Option<String> = None;
    let mut named: BTreeMap<String, &ast::Expr> = BTreeMap::new();
    for a in &args.args {
        match a {
            ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(ast::Expr::Identifier(id)))
                if stream.is_none() =>
            {
                stream = Some(id.value.clone())
            }
            ast::FunctionArg::Named {
                name,
                arg: ast::FunctionArgExpr::Expr(e),
                ..
            } => {
                named.insert(name.value.to_ascii_lowercase(), e);
            }
            other => {
                return Err(Error::Plan(
                    "PARALLEL takes a stream, then name => value arguments".into(),
                )
                .at(text, other.span()))
            }
        }
    }
    let stream = stream.ok_or_else(|| {
        Error::Plan("PARALLEL needs the stream to split as its first argument".into())
            .at(text, q.span())
    })?;
    const KNOWN: &[&str] = &[
        "partitions",
        "route",
        "route_when",
        "broadcast",
        "strategy",
        "apply",
        "merge",
        "merge_key",
        "combine",
        "merge_filter",
        "fanin",
    ];
    if let Some((k, e)) = named.iter().find(|(k, _)| !KNOWN.contains(&k.as_str())) {
        return Err(Error::Plan(format!(
            "unknown PARALLEL argument `{k}`; arguments are {}",
            KNOWN.join(", ")
        ))
        .at(text, e.span()));
    }
    let def = script.catalog.stream(&stream).at(text, q.span())?.clone();
    let schema = def.source.schema.clone();
    let scope_expr = |key: &str, e: &ast::Expr, want: DataType| -> Result<Expr> {
        let x = convert(e, &schema as &dyn Resolve).at(text, e.span())?;
        let t = x.data_type(&schema).at(text, e.span())?;
        if t != want {
            return Err(
                Error::Plan(format!("`{key}` must be {want}, found {t}")).at(text, e.span())
            );
        }
        Ok(x)
    };
    let int_arg = |key: &str| -> Result<Option<i64>> {
        match named.get(key) {
            None => Ok(None),
            Some(ast::Expr::Value(v)) => match &v.value {
                ast::Value::Number(n, _) => n.parse().map(Some).map_err(|_| {
                    Error::Plan(format!("`{key}` must be an integer")).at(text, v.span())
                }),
                _ => Err(Error::Plan(format!("`{key}` must be an integer")).at(text, v.span())),
            },
            Some(e) => Err(Error::Plan(format!("`{key}` must be an integer")).at(text, e.span())),
        }
    };
    let word_arg = |key: &str| -> Option<String> {
        match named.get(key)? {
            ast::Expr::Value(v) => match &v.value {
                ast::Value::SingleQuotedString(s) => Some(s.clone()),
                _ => None,
            },
            ast::Expr::Identifier(id) => Some(id.value.clone()),
            _ => None,
        }
    };
    let q_parts = int_arg("partitions")?.unwrap_or(script.catalog.settings.partitions as i64);
    if !(1..=1 << 20).contains(&q_parts) {
        return Err(
            Error::Plan(format!("partitions = {q_parts}; expected 1..=1048576")).at(text, q.span()),
        );
    }
    let route_e = named.get("route").ok_or_else(|| {
        Error::Plan("PARALLEL needs `route => expression` (an int64 partition)".into())
            .at(text, q.span())
    })?;
    let route = Route::Expr {
        expr: scope_expr("route", route_e, DataType::Int64)?,
        when: named
            .get("route_when")
            .map(|e| scope_expr("route_when", e, DataType::Bool))
            .transpose()?,
    };
    let broadcast = named
        .get("broadcast")
        .map(|e| scope_expr("broadcast", e, DataType::Bool))
        .transpose()?;
    let strategy: Strategy = match word_arg("strategy") {
        Some(s) => s.parse().at(text, named["strategy"].span())?,
        None => script.catalog.settings.strategy,
    };
    // What runs on each partition.
    let apply = named.get("apply").ok_or_else(|| {
        Error::Plan("PARALLEL needs `apply => function` or `apply => (SELECT ...)`".into())
            .at(text, q.span())
    })?;
    let n = script.jobs.len();
    let late = Arc::new(LateRows::default());
    let (function, logical) = match apply {
        ast::Expr::Subquery(sub) => {
            let mut c = Planner::new(&script.catalog, &script.registry, text);
            let (l, _) = c.query(sub)?;
            if c.inputs.len() != 1 || !c.inputs[0].eq_ignore_ascii_case(&def.name) {
                return Err(Error::Plan(format!(
                    "the `apply` query must read the split stream `{}` only",
                    def.name
                ))
                .at(text, sub.span()));
            }
            let name = format!("query{}", n + 1);
            let factory = QueryFactory::new(
                l.clone(),
                physical::input_source(&[&def]).at(text, sub.span())?.1,
                def.source.epoch,
                def.lateness,
                late.clone(),
            );
            script.registry.add_function(&name, Arc::new(factory));
            (name, Some(l))
        }
        _ => {
            let name = word_arg("apply").ok_or_else(|| {
                Error::Plan("`apply` takes a stream function name or a (SELECT ...)".into())
                    .at(text, apply.span())
            })?;
            script.registry.function(&name).at(text, apply.span())?;
            (name, None)
        }
    };
    let mapped = Plan::Source(def.source.clone())
        .split(q_parts as u32, route, broadcast, strategy)
        .map(&function);
    let out_schema = mapped.schema(&script.registry)?;
    let kind = match word_arg("merge")
        .as_deref()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        None | Some("union") | Some("best_effort") => MergeKind::Union,
        Some("time") | Some("transparent") | Some("ordered") => MergeKind::TimeOrdered,
        Some("keyed") => {
            let key_e = named.get("merge_key").ok_or_else(|| {
                Error::Plan(
                    "a keyed merge needs `merge_key => column` or `merge_key => (c1, c2)`".into(),
                )
                .at(text, q.span())
            })?;
            let items: Vec<&ast::Expr> = match key_e {
                ast::Expr::Tuple(v) => v.iter().collect(),
                ast::Expr::Nested(e) => vec![e.as_ref()],
                e => vec![e],
            };
            let mut key = Vec::new();
            for it in items {
                match convert(it, &out_schema as &dyn Resolve).at(text, it.span())? {
                    Expr::Column(i, _) => key.push(i),
                    _ => {
                        return Err(
                            Error::Plan("merge keys are output columns".into()).at(text, it.span())
                        )
                    }
                }
            }
            let combine = match named.get("combine") {
                Some(ast::Expr::Function(f)) => {
                    let fname = f.name.to_string().to_ascii_lowercase();
                    let col = match &f.args {
                        ast::FunctionArguments::List(l) => match l.args.as_slice() {
                            [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e))] => Some(e),
                            _ => None,
                        },
                        _ => None,
                    };
                    let idx = match col {
                        Some(e) => {
                            match convert(e, &out_schema as &dyn Resolve).at(text, e.span())? {
                                Expr::Column(i, _) => Some(i),
                                _ => None,
                            }
                        }
                        None => None,
                    };
                    let agg = match (fname.as_str(), idx) {
                        ("sum", Some(i)) => braid_plan::plan::Agg::Sum(i),
                        ("min", Some(i)) => braid_plan::plan::Agg::Min(i),
                        ("max", Some(i)) => braid_plan::plan::Agg::Max(i),
                        ("count", _) => braid_plan::plan::Agg::Count,
                        _ => {
                            return Err(Error::Plan("combine takes sum(col), min(col), max(col), count(*) or a registered combiner name".into()).at(text, f.span()))
                        }
                    };
                    Combine::Aggregates(vec![agg])
                }
                Some(ast::Expr::Tuple(items)) => {
                    let mut aggs = Vec::new();
                    for it in items {
                        let ast::Expr::Function(f) = it else {
                            return Err(Error::Plan(
                                "combine lists sum(col), min(col), max(col) or count(*)".into(),
                            )
                            .at(text, it.span()));
                        };
                        let fname = f.name.to_string().to_ascii_lowercase();
                        let col = match &f.args {
                            ast::FunctionArguments::List(l) => match l.args.as_slice() {
                                [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e))] => {
                                    match convert(e, &out_schema as &dyn Resolve)
                                        .at(text, e.span())?
                                    {
                                        Expr::Column(i, _) => Some(i),
                                        _ => None,
                                    }
                                }
                                _ => None,
                            },
                            _ => None,
                        };
                        aggs.push(match (fname.as_str(), col) {
                            ("sum", Some(i)) => braid_plan::plan::Agg::Sum(i),
                            ("min", Some(i)) => braid_plan::plan::Agg::Min(i),
                            ("max", Some(i)) => braid_plan::plan::Agg::Max(i),
                            ("count", _) => braid_plan::plan::Agg::Count,
                            _ => {
                                return Err(Error::Plan(
                                    "combine takes sum(col), min(col), max(col) or count(*)".into(),
                                )
                                .at(text, f.span()))
                            }
                        });
                    }
                    Combine::Aggregates(aggs)
                }
                Some(_) => {
                    let name = word_arg("combine").unwrap_or_default();
                    script
                        .registry
                        .combiner(&name)
                        .at(text, named["combine"].span())?;
                    Combine::Native(name)
                }
                None => {
                    return Err(Error::Plan(
                        "a keyed merge needs `combine => sum(col)` or a combiner name".into(),
                    )
                    .at(text, q.span()))
                }
            };
            let filter = named
                .get("merge_filter")
                .map(|e| {
                    let x = convert(e, &out_schema as &dyn Resolve).at(text, e.span())?;
                    match x.data_type(&out_schema).at(text, e.span())? {
                        DataType::Bool => Ok(x),
                        t => Err(Error::Plan(format!("merge_filter must be bool, found {t}"))
                            .at(text, e.span())),
                    }
                })
                .transpose()?;
            let fanin = int_arg("fanin")?.map(|k| k as u32);
            MergeKind::Keyed {
                key,
                combine,
                fanin,
                filter,
            }
        }
        Some(other) => {
            return Err(
                Error::Plan(format!("merge `{other}`; merges are union, time, keyed"))
                    .at(text, named["merge"].span()),
            )
        }
    };
    let plan = Plan::Sink(Sink {
        input: Box::new(mapped.merge(kind)),
        spec: sink.spec.clone(),
        stamp_emit: sink.stamp_emit,
    });
    plan.schema(&script.registry).at(text, q.span())?;
    Ok(Job {
        sql: sql.to_string(),
        logical,
        stages: Vec::new(),
        partitioning: "explicit (PARALLEL)".into(),
        plan,
        late,
        late_source: None,
        runs_in: None,
    })
}

/// EXPLAIN of a job: the logical plan, the optimized plan with its partitioning, and
/// the physical plan resolved for `workers` workers.
pub fn explain(job: &Job, registry: &Registry, workers: usize) -> String {
    let mut s = explain_stages(job);
    s.push_str("== physical plan ==\n");
    let mut plan = job.plan.clone();
    braid_plan::optimize::resolve(&mut plan, braid_plan::optimize::Env { workers });
    s.push_str(&braid_plan::explain::text(&plan, registry, workers));
    s
}

/// The logical and optimized plans of a job (EXPLAIN without the physical plan).
pub fn explain_stages(job: &Job) -> String {
    let mut s = String::new();
    s.push_str("== logical plan ==\n");
    match &job.logical {
        Some(l) => s.push_str(&l.to_string()),
        None => s.push_str("(explicit PARALLEL: the physical plan is as written)\n"),
    }
    s.push_str("== optimized plan ==\n");
    if job.stages.len() <= 1 {
        s.push_str(&format!("partitioning: {}\n", job.partitioning));
    }
    for (k, (l, part)) in job.stages.iter().enumerate() {
        if job.stages.len() > 1 {
            s.push_str(&format!("stage {}: {part}\n", k + 1));
        }
        s.push_str(&l.to_string());
    }
    s
}
