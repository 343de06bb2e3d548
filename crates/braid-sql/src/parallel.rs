//! The explicit form: `SELECT * FROM PARALLEL(stream, partitions => q, route => expr,
//! [route_when => expr,] [broadcast => expr,] [strategy => 'name',] apply => function |
//! (SELECT ... FROM stream), [merge => 'union' | 'time' | 'keyed', merge_key =>
//! (columns), combine => 'name' | sum(col) | (sum(a), count(*)), merge_filter => expr,
//! fanin => k])` states the split, the function and the merge instead of leaving them to
//! the optimizer. The physical plan is as written.

use crate::catalog::{Settings, SinkDef, StreamDef};
use crate::expr::{check_call, convert, Call, Resolve};
use crate::located::At;
use crate::logical::Logical;
use crate::physical;
use crate::planner::Planner;
use crate::run::{LateRows, QueryFactory};
use crate::script::{Job, Script};
use braid_plan::error::{Error, Result};
use braid_plan::expr::Expr;
use braid_plan::function::{Registry, StreamFunctionFactory};
use braid_plan::plan::{Agg, Combine, MergeKind, Plan, Route, Sink, Strategy};
use braid_plan::router::{self, Assign};
use braid_plan::types::{DataType, Schema};
use sqlparser::ast::{self, Spanned};
use sqlparser::tokenizer::Span;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The named arguments PARALLEL takes.
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

/// The arguments of `SELECT * FROM PARALLEL(...)`, if the query is that.
pub(crate) fn call(q: &ast::Query) -> Option<&ast::TableFunctionArgs> {
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

/// The job of `SELECT * FROM PARALLEL(args)` (query `q`, text `sql`) writing to `sink`.
pub(crate) fn job(
    script: &mut Script,
    text: &str,
    q: &ast::Query,
    args: &ast::TableFunctionArgs,
    sink: &SinkDef,
    sql: &str,
) -> Result<Job> {
    // The arguments, and the stream they split.
    let a = Args::parse(text, q, args)?;
    let def = script.catalog.stream(&a.stream).at(text, q.span())?.clone();
    // The split.
    let (parts, route, broadcast, strategy) = split(
        &a,
        &def.source.schema,
        &script.catalog.settings,
        &script.registry,
    )?;
    // A stateful router runs as a stage of its own, before the split.
    let router = match &route {
        Routed::By(_) => None,
        Routed::Router(name, args) => {
            let assign = Assign::new(
                name,
                script.registry.router(name).expect("checked").clone(),
                args.clone(),
                parts,
                &def.source.schema,
            )
            .at(text, a.named["route"].span())?;
            let fname = format!("{name}_assign{}", script.jobs.len() + 1);
            let schema = assign.output_schema(&def.source.schema)?;
            script.registry.add_function(&fname, Arc::new(assign));
            Some((fname, schema))
        }
    };
    // What runs on each partition.
    let late = Arc::new(LateRows::default());
    let (function, logical) = apply(&a, script, &def, &late)?;
    let source = Plan::Source(def.source.clone());
    let mapped = match (route, router) {
        (Routed::By(route), _) => source.split(parts, route, broadcast, strategy),
        (Routed::Router(..), Some((fname, schema))) => {
            router::assigned(source, &fname, &schema, parts, broadcast, strategy)?
        }
        (Routed::Router(..), None) => unreachable!("a router has its stage"),
    }
    .map(&function);
    // The merge, and the sink.
    let out_schema = mapped.schema(&script.registry)?;
    let kind = merge(&a, &out_schema, &script.registry)?;
    let plan = Plan::Sink(Sink {
        input: Box::new(mapped.merge(kind)),
        spec: sink.spec.clone(),
        stamp_emit: sink.stamp_emit,
        max_latency: sink.max_latency,
        latency_to: sink.latency_to.clone(),
        latency_from: sink.latency_from.clone(),
        header: sink.header,
        limit: None,
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
        time_unit: None,
        tune_window: false,
    })
}

/// How rows find their partition.
enum Routed {
    /// A route of the split itself.
    By(Route),
    /// A stateful router (registered, see [`braid_plan::router`]) called with these
    /// arguments, run as a stage before the split.
    Router(String, Vec<Expr>),
}

/// The router `route => name(args)` calls, if `name` is a registered router.
fn router_call(
    a: &Args<'_>,
    e: &ast::Expr,
    schema: &Schema,
    registry: &Registry,
) -> Result<Option<Routed>> {
    let ast::Expr::Function(f) = e else {
        return Ok(None);
    };
    let name = f.name.to_string();
    if registry.router(&name).is_none() {
        return Ok(None);
    }
    let ast::FunctionArguments::List(list) = &f.args else {
        return Err(
            Error::Plan(format!("router `{name}` takes a list of arguments")).at(a.text, f.span()),
        );
    };
    if list.duplicate_treatment.is_some() || !list.clauses.is_empty() {
        return Err(Error::NotSupported(format!(
            "DISTINCT or clauses in a call of router `{name}`"
        ))
        .at(a.text, f.span()));
    }
    if f.filter.is_some() || f.over.is_some() || !f.within_group.is_empty() {
        return Err(Error::NotSupported(format!(
            "FILTER, OVER or WITHIN GROUP on router `{name}`"
        ))
        .at(a.text, f.span()));
    }
    let mut args = Vec::new();
    for arg in &list.args {
        let ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)) = arg else {
            return Err(Error::Plan(format!(
                "router `{name}` takes plain arguments (no names, no *)"
            ))
            .at(a.text, arg.span()));
        };
        args.push(convert(x, schema as &dyn Resolve).at(a.text, x.span())?);
    }
    if let Some(w) = a.named.get("route_when") {
        return Err(Error::NotSupported(format!(
            "`route_when` with router `{name}` (a router omits a row by returning no partition)"
        ))
        .at(a.text, w.span()));
    }
    Ok(Some(Routed::Router(name.to_ascii_lowercase(), args)))
}

/// The partitions, the route, the broadcast condition and the strategy.
fn split(
    a: &Args<'_>,
    schema: &Schema,
    settings: &Settings,
    registry: &Registry,
) -> Result<(u32, Routed, Option<Expr>, Strategy)> {
    let parts = a.int("partitions")?.unwrap_or(settings.partitions as i64);
    if !(1..=1 << 20).contains(&parts) {
        return Err(
            Error::Plan(format!("partitions = {parts}; expected 1..=1048576")).at(a.text, a.at),
        );
    }
    let route = a.required(
        "route",
        "PARALLEL needs `route => expression` (an int64 partition)",
    )?;
    let route = match router_call(a, route, schema, registry)? {
        Some(r) => r,
        None => Routed::By(Route::Expr {
            expr: a.expr("route", route, schema, DataType::Int64)?,
            when: a.typed("route_when", schema, DataType::Bool)?,
        }),
    };
    let broadcast = a.typed("broadcast", schema, DataType::Bool)?;
    let strategy: Strategy = match a.word("strategy") {
        Some(s) => s.parse().at(a.text, a.named["strategy"].span())?,
        None => settings.strategy,
    };
    Ok((parts as u32, route, broadcast, strategy))
}

/// The function each partition runs: a registered stream function, or a query over
/// the split stream (registered as `query{n}`), with its logical plan.
fn apply(
    a: &Args<'_>,
    script: &mut Script,
    def: &StreamDef,
    late: &Arc<LateRows>,
) -> Result<(String, Option<Logical>)> {
    let text = a.text;
    let apply = a.required(
        "apply",
        "PARALLEL needs `apply => function` or `apply => (SELECT ...)`",
    )?;
    let n = script.jobs.len();
    match apply {
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
                physical::input_source(&[def]).at(text, sub.span())?.1,
                def.source.epoch,
                def.lateness,
                late.clone(),
            );
            script.registry.add_function(&name, Arc::new(factory));
            Ok((name, Some(l)))
        }
        _ => {
            let name = a.word("apply").ok_or_else(|| {
                Error::Plan("`apply` takes a stream function name or a (SELECT ...)".into())
                    .at(text, apply.span())
            })?;
            script.registry.function(&name).at(text, apply.span())?;
            Ok((name, None))
        }
    }
}

/// How partition outputs are merged (over the function's output `out`).
fn merge(a: &Args<'_>, out: &Schema, registry: &Registry) -> Result<MergeKind> {
    let how = a.word("merge").map(|m| m.to_ascii_lowercase());
    Ok(match how.as_deref() {
        None | Some("union") | Some("best_effort") => MergeKind::Union,
        Some("time") | Some("transparent") | Some("ordered") => MergeKind::TimeOrdered,
        Some("keyed") => MergeKind::Keyed {
            key: merge_key(a, out)?,
            combine: combine(a, out, registry)?,
            filter: merge_filter(a, out)?,
            fanin: a.int("fanin")?.map(|k| k as u32),
        },
        Some(other) => {
            return Err(
                Error::Plan(format!("merge `{other}`; merges are union, time, keyed"))
                    .at(a.text, a.named["merge"].span()),
            )
        }
    })
}

/// The output columns a keyed merge groups by.
fn merge_key(a: &Args<'_>, out: &Schema) -> Result<Vec<usize>> {
    let key_e = a.required(
        "merge_key",
        "a keyed merge needs `merge_key => column` or `merge_key => (c1, c2)`",
    )?;
    let items: Vec<&ast::Expr> = match key_e {
        ast::Expr::Tuple(v) => v.iter().collect(),
        ast::Expr::Nested(e) => vec![e.as_ref()],
        e => vec![e],
    };
    let mut key = Vec::new();
    for it in items {
        match a.column(it, out)? {
            Some(i) => key.push(i),
            None => {
                return Err(
                    Error::Plan("merge keys are output columns".into()).at(a.text, it.span())
                )
            }
        }
    }
    Ok(key)
}

/// How a keyed merge combines rows of one key: aggregates of output columns, or a
/// registered combiner.
fn combine(a: &Args<'_>, out: &Schema, registry: &Registry) -> Result<Combine> {
    Ok(match a.named.get("combine") {
        Some(ast::Expr::Function(f)) => {
            Combine::Aggregates(vec![combine_agg(a,
            f,
            out,
            "combine takes sum(col), min(col), max(col), count(*) or a registered combiner name",
        )?])
        }
        Some(ast::Expr::Tuple(items)) => {
            let mut aggs = Vec::new();
            for it in items {
                let ast::Expr::Function(f) = it else {
                    return Err(Error::Plan(
                        "combine lists sum(col), min(col), max(col) or count(*)".into(),
                    )
                    .at(a.text, it.span()));
                };
                aggs.push(combine_agg(
                    a,
                    f,
                    out,
                    "combine takes sum(col), min(col), max(col) or count(*)",
                )?);
            }
            Combine::Aggregates(aggs)
        }
        Some(_) => {
            let name = a.word("combine").unwrap_or_default();
            registry
                .combiner(&name)
                .at(a.text, a.named["combine"].span())?;
            Combine::Native(name)
        }
        None => {
            return Err(Error::Plan(
                "a keyed merge needs `combine => sum(col)` or a combiner name".into(),
            )
            .at(a.text, a.at))
        }
    })
}

/// One aggregate of `combine`: `sum(col)`, `min(col)`, `max(col)` or `count(*)`
/// (`usage` says what is valid when it is none of these).
fn combine_agg(a: &Args<'_>, f: &ast::Function, out: &Schema, usage: &str) -> Result<Agg> {
    check_call(f, Call::Plain).at(a.text, f.span())?;
    let fname = f.name.to_string().to_ascii_lowercase();
    let col = match &f.args {
        ast::FunctionArguments::List(l) => match l.args.as_slice() {
            [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e))] => a.column(e, out)?,
            _ => None,
        },
        _ => None,
    };
    Ok(match (fname.as_str(), col) {
        ("sum", Some(i)) => Agg::Sum(i),
        ("min", Some(i)) => Agg::Min(i),
        ("max", Some(i)) => Agg::Max(i),
        ("count", _) => Agg::Count,
        _ => return Err(Error::Plan(usage.into()).at(a.text, f.span())),
    })
}

/// The condition a keyed merge's combined rows must meet.
fn merge_filter(a: &Args<'_>, out: &Schema) -> Result<Option<Expr>> {
    let Some(e) = a.named.get("merge_filter") else {
        return Ok(None);
    };
    let x = convert(e, out as &dyn Resolve).at(a.text, e.span())?;
    match x.data_type(out).at(a.text, e.span())? {
        DataType::Bool => Ok(Some(x)),
        t => Err(Error::Plan(format!("merge_filter must be bool, found {t}")).at(a.text, e.span())),
    }
}

/// PARALLEL's arguments: the stream, then `name => value`s.
struct Args<'a> {
    text: &'a str,
    /// Where the query is (for errors about a missing argument).
    at: Span,
    stream: String,
    named: BTreeMap<String, &'a ast::Expr>,
}

impl<'a> Args<'a> {
    /// Reads the arguments; refuses a SELECT list or WHERE around PARALLEL, a missing
    /// stream and unknown names.
    fn parse(text: &'a str, q: &ast::Query, args: &'a ast::TableFunctionArgs) -> Result<Args<'a>> {
        let ast::SetExpr::Select(s) = q.body.as_ref() else {
            return Err(Error::Internal("PARALLEL outside SELECT".into()));
        };
        if !matches!(s.projection.as_slice(), [ast::SelectItem::Wildcard(_)])
            || s.selection.is_some()
        {
            return Err(Error::NotSupported(
                "a SELECT list or WHERE around PARALLEL(...); put them in its `apply` query".into(),
            )
            .at(text, s.span()));
        }
        let mut stream: Option<String> = None;
        let mut named: BTreeMap<String, &ast::Expr> = BTreeMap::new();
        for a in &args.args {
            match a {
                ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(ast::Expr::Identifier(
                    id,
                ))) if stream.is_none() => stream = Some(id.value.clone()),
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
        if let Some((k, e)) = named.iter().find(|(k, _)| !KNOWN.contains(&k.as_str())) {
            return Err(Error::Plan(format!(
                "unknown PARALLEL argument `{k}`; arguments are {}",
                KNOWN.join(", ")
            ))
            .at(text, e.span()));
        }
        Ok(Args {
            text,
            at: q.span(),
            stream,
            named,
        })
    }

    /// Argument `key`, which must be there.
    fn required(&self, key: &str, missing: &str) -> Result<&'a ast::Expr> {
        self.named
            .get(key)
            .copied()
            .ok_or_else(|| Error::Plan(missing.into()).at(self.text, self.at))
    }

    /// Argument `key` as an expression of type `want` over `schema`, if given.
    fn typed(&self, key: &str, schema: &Schema, want: DataType) -> Result<Option<Expr>> {
        self.named
            .get(key)
            .map(|e| self.expr(key, e, schema, want))
            .transpose()
    }

    /// `e` (argument `key`) as an expression of type `want` over `schema`.
    fn expr(&self, key: &str, e: &ast::Expr, schema: &Schema, want: DataType) -> Result<Expr> {
        let x = convert(e, schema as &dyn Resolve).at(self.text, e.span())?;
        let t = x.data_type(schema).at(self.text, e.span())?;
        if t != want {
            return Err(
                Error::Plan(format!("`{key}` must be {want}, found {t}")).at(self.text, e.span())
            );
        }
        Ok(x)
    }

    /// The output column `e` names, if it is a plain column.
    fn column(&self, e: &ast::Expr, out: &Schema) -> Result<Option<usize>> {
        match convert(e, out as &dyn Resolve).at(self.text, e.span())? {
            Expr::Column(i, _) => Ok(Some(i)),
            _ => Ok(None),
        }
    }

    /// Argument `key` as an integer, if given.
    fn int(&self, key: &str) -> Result<Option<i64>> {
        let not_int =
            |span: Span| Error::Plan(format!("`{key}` must be an integer")).at(self.text, span);
        match self.named.get(key) {
            None => Ok(None),
            Some(ast::Expr::Value(v)) => match &v.value {
                ast::Value::Number(n, _) => n.parse().map(Some).map_err(|_| not_int(v.span())),
                _ => Err(not_int(v.span())),
            },
            Some(e) => Err(not_int(e.span())),
        }
    }

    /// Argument `key` as a word: a quoted string or a name, if given.
    fn word(&self, key: &str) -> Option<String> {
        match self.named.get(key)? {
            ast::Expr::Value(v) => match &v.value {
                ast::Value::SingleQuotedString(s) => Some(s.clone()),
                _ => None,
            },
            ast::Expr::Identifier(id) => Some(id.value.clone()),
            _ => None,
        }
    }
}
