//! From sqlparser's syntax tree to a [`Logical`] plan: names resolved, types checked,
//! aggregates and windows recognised, join conditions analysed.

use crate::catalog::{Catalog, TableDef};
use crate::expr::{and_all, conjuncts, convert, Resolve};
use crate::located::At;
use crate::logical::{aggregate_schema, AggCall, AggFunc, JoinWindow, Logical, WindowSpec};
use braid_plan::batch::Scalar;
use braid_plan::error::{Error, Result};
use braid_plan::expr::{BinOp, Expr};
use braid_plan::types::{DataType, Field, Schema};
use sqlparser::ast::{self, Spanned};
use std::sync::Arc;

/// Who a column belongs to: the alias (or stream name) that qualifies it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Scope {
    /// Per column: qualifier (lower case) and name.
    pub cols: Vec<(Option<String>, String)>,
}

impl Scope {
    fn of(schema: &Schema, qualifier: Option<&str>) -> Scope {
        Scope {
            cols: schema
                .fields
                .iter()
                .map(|f| (qualifier.map(|q| q.to_ascii_lowercase()), f.name.clone()))
                .collect(),
        }
    }

    fn concat(&self, other: &Scope) -> Scope {
        let mut cols = self.cols.clone();
        cols.extend(other.cols.iter().cloned());
        Scope { cols }
    }

    fn names(&self) -> String {
        self.cols
            .iter()
            .map(|(q, n)| match q {
                Some(q) => format!("{q}.{n}"),
                None => n.clone(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Advice for a name that is not found.
type Hint<'a> = dyn Fn(&str) -> Option<String> + 'a;

/// Resolves identifiers against a scope.
struct Names<'a> {
    scope: &'a Scope,
    registry: Option<&'a braid_plan::function::Registry>,
    /// Extra advice when a name is not found (e.g. GROUP BY hints).
    hint: Option<&'a Hint<'a>>,
}

impl Resolve for Names<'_> {
    fn registry(&self) -> Option<&braid_plan::function::Registry> {
        self.registry
    }

    fn column(&self, parts: &[ast::Ident]) -> Result<Expr> {
        let (qual, name) = match parts {
            [n] => (None, n.value.as_str()),
            [q, n] => (Some(q.value.to_ascii_lowercase()), n.value.as_str()),
            _ => {
                let text: Vec<&str> = parts.iter().map(|p| p.value.as_str()).collect();
                return Err(Error::NotSupported(format!(
                    "name `{}` with more than two parts",
                    text.join(".")
                )));
            }
        };
        let hits: Vec<usize> = (0..self.scope.cols.len())
            .filter(|&i| {
                let (q, n) = &self.scope.cols[i];
                n.eq_ignore_ascii_case(name) && (qual.is_none() || q.as_ref() == qual.as_ref())
            })
            .collect();
        let shown = match &qual {
            Some(q) => format!("{q}.{name}"),
            None => name.to_string(),
        };
        match hits.as_slice() {
            [i] => Ok(Expr::Column(*i, shown)),
            [] => {
                if let Some(h) = self.hint.and_then(|h| h(name)) {
                    return Err(Error::Plan(h));
                }
                Err(Error::Plan(format!(
                    "no column `{shown}`; columns are {}",
                    self.scope.names()
                )))
            }
            many => {
                let opts: Vec<String> = many
                    .iter()
                    .map(|&i| match &self.scope.cols[i].0 {
                        Some(q) => format!("{q}.{name}"),
                        None => name.to_string(),
                    })
                    .collect();
                Err(Error::Plan(format!(
                    "column `{name}` is ambiguous: it could be {}",
                    opts.join(" or ")
                )))
            }
        }
    }
}

/// A relation in FROM.
enum Rel {
    Stream {
        plan: Logical,
        scope: Scope,
        last: Option<u64>,
    },
    Table(Arc<TableDef>, String),
}

/// Compiles queries against a catalog; collects the streams they read.
pub(crate) struct Compiler<'a> {
    pub catalog: &'a Catalog,
    pub registry: &'a braid_plan::function::Registry,
    pub text: &'a str,
    /// Input streams in order of first use.
    pub inputs: Vec<String>,
}

impl<'a> Compiler<'a> {
    pub fn new(
        catalog: &'a Catalog,
        registry: &'a braid_plan::function::Registry,
        text: &'a str,
    ) -> Compiler<'a> {
        Compiler {
            catalog,
            registry,
            text,
            inputs: Vec::new(),
        }
    }

    fn expr(&self, e: &ast::Expr, scope: &Scope, schema: &Schema) -> Result<Expr> {
        let names = Names {
            scope,
            registry: Some(self.registry),
            hint: None,
        };
        let x = convert(e, &names).at(self.text, e.span())?;
        x.data_type(schema)
            .map(|_| x.clone())
            .at(self.text, e.span())
    }

    fn bool_expr(&self, e: &ast::Expr, scope: &Scope, schema: &Schema, what: &str) -> Result<Expr> {
        let x = self.expr(e, scope, schema)?;
        match x.data_type(schema)? {
            DataType::Bool => Ok(x),
            t => Err(
                Error::Plan(format!("{what} must be a bool condition, found {t}"))
                    .at(self.text, e.span()),
            ),
        }
    }

    /// Compiles a query (SELECT or UNION ALL of SELECTs).
    pub fn query(&mut self, q: &ast::Query) -> Result<(Logical, Scope)> {
        if let Some(ob) = &q.order_by {
            return Err(Error::NotSupported(
                "ORDER BY on a stream; `SET merge = 'transparent'` gives event-time order".into(),
            )
            .at(self.text, ob.span()));
        }
        if q.limit_clause.is_some() || q.with.is_some() || q.fetch.is_some() {
            return Err(
                Error::NotSupported("WITH, LIMIT and FETCH on a stream".into())
                    .at(self.text, q.span()),
            );
        }
        self.set_expr(&q.body)
    }

    fn set_expr(&mut self, body: &ast::SetExpr) -> Result<(Logical, Scope)> {
        match body {
            ast::SetExpr::Select(s) => self.select(s),
            ast::SetExpr::Query(q) => self.query(q),
            ast::SetExpr::SetOperation {
                op: ast::SetOperator::Union,
                set_quantifier: ast::SetQuantifier::All,
                left,
                right,
            } => {
                let (l, ls) = self.set_expr(left)?;
                let (r, _) = self.set_expr(right)?;
                let (lt, rt) = (l.schema(), r.schema());
                let types = |s: &Schema| s.fields.iter().map(|f| f.ty).collect::<Vec<_>>();
                if types(lt) != types(rt) {
                    return Err(Error::Plan(format!(
                        "UNION ALL needs the same column types on both sides: {lt} vs {rt}"
                    ))
                    .at(self.text, body.span()));
                }
                let mut schema = lt.clone();
                for f in &mut schema.fields {
                    f.nullable = true;
                }
                if lt.event_time != rt.event_time {
                    schema.event_time = None;
                }
                let mut inputs = Vec::new();
                for side in [l, r] {
                    match side {
                        Logical::Union { inputs: i, .. } => inputs.extend(i),
                        other => inputs.push(other),
                    }
                }
                Ok((Logical::Union { inputs, schema }, ls))
            }
            other => Err(Error::NotSupported(
                "this set operation; streams combine with UNION ALL".into(),
            )
            .at(self.text, other.span())),
        }
    }

    fn input_index(&mut self, stream: &str) -> usize {
        let key = stream.to_ascii_lowercase();
        match self.inputs.iter().position(|s| *s == key) {
            Some(i) => i,
            None => {
                self.inputs.push(key);
                self.inputs.len() - 1
            }
        }
    }

    fn factor(&mut self, f: &ast::TableFactor) -> Result<Rel> {
        match f {
            ast::TableFactor::Table {
                name, alias, args, ..
            } => {
                let n = name.to_string();
                let alias_name = alias.as_ref().map(|a| a.name.value.clone());
                if let Some(args) = args {
                    if n.eq_ignore_ascii_case("late") {
                        let [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(
                            ast::Expr::Identifier(sink),
                        ))] = args.args.as_slice()
                        else {
                            return Err(Error::Plan(
                                "LATE takes the sink of an earlier query: LATE(alerts)".into(),
                            )
                            .at(self.text, f.span()));
                        };
                        let name = format!("late({})", sink.value);
                        let (plan, scope) = self.scan(&name, alias_name.as_deref(), f)?;
                        return Ok(Rel::Stream {
                            plan,
                            scope,
                            last: None,
                        });
                    }
                    if !n.eq_ignore_ascii_case("last") {
                        let what = if n.eq_ignore_ascii_case("parallel") {
                            "PARALLEL(...) as part of a query; write it alone: SELECT * FROM PARALLEL(...)".to_string()
                        } else {
                            format!("table function `{n}`; FROM takes a stream, LAST(stream, n), LATE(sink) or PARALLEL(...)")
                        };
                        return Err(Error::NotSupported(what).at(self.text, f.span()));
                    }
                    let (stream, rows) = match args.args.as_slice() {
                        [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(
                            ast::Expr::Identifier(s),
                        )), ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(n))] => {
                            (s.value.clone(), const_int(n).filter(|n| *n > 0))
                        }
                        _ => (String::new(), None),
                    };
                    let Some(rows) = rows else {
                        return Err(Error::Plan(
                            "LAST takes a stream and a positive row count: LAST(s, 500)".into(),
                        )
                        .at(self.text, f.span()));
                    };
                    let (plan, scope) = self.scan(&stream, alias_name.as_deref(), f)?;
                    return Ok(Rel::Stream {
                        plan,
                        scope,
                        last: Some(rows as u64),
                    });
                }
                if let Some(t) = self.catalog.tables.get(&n.to_ascii_lowercase()) {
                    return Ok(Rel::Table(t.clone(), alias_name.unwrap_or(n)));
                }
                let (plan, scope) = self.scan(&n, alias_name.as_deref(), f)?;
                Ok(Rel::Stream {
                    plan,
                    scope,
                    last: None,
                })
            }
            ast::TableFactor::Derived {
                subquery, alias, ..
            } => {
                let (plan, _) = self.query(subquery)?;
                let q = alias.as_ref().map(|a| a.name.value.clone());
                let scope = Scope::of(plan.schema(), q.as_deref());
                Ok(Rel::Stream {
                    plan,
                    scope,
                    last: None,
                })
            }
            other => {
                Err(Error::NotSupported(format!("`{other}` in FROM")).at(self.text, other.span()))
            }
        }
    }

    fn scan(
        &mut self,
        stream: &str,
        alias: Option<&str>,
        at: &impl Spanned,
    ) -> Result<(Logical, Scope)> {
        let def = self.catalog.stream(stream).at(self.text, at.span())?;
        let schema = plain_schema(&def.source);
        let input = self.input_index(&def.name);
        let scope = Scope::of(&schema, Some(alias.unwrap_or(&def.name)));
        Ok((
            Logical::Scan {
                stream: def.name.clone(),
                input,
                schema,
            },
            scope,
        ))
    }

    fn select(&mut self, s: &ast::Select) -> Result<(Logical, Scope)> {
        if s.distinct.is_some() {
            return Err(Error::NotSupported(
                "SELECT DISTINCT on a stream; use GROUP BY with a window".into(),
            )
            .at(self.text, s.span()));
        }
        let [from] = s.from.as_slice() else {
            return Err(
                Error::NotSupported("FROM with several relations; use JOIN ... ON".into())
                    .at(self.text, s.span()),
            );
        };
        let (mut plan, mut scope) = match self.factor(&from.relation)? {
            Rel::Stream {
                plan,
                scope,
                last: None,
            } => (plan, scope),
            Rel::Stream {
                last: Some(n),
                plan,
                scope,
            } => {
                let Some(j) = from.joins.first() else {
                    return Err(Error::Plan(
                        "LAST(stream, n) is a join window; join it with another LAST(...)".into(),
                    )
                    .at(self.text, from.relation.span()));
                };
                let right = self.factor(&j.relation)?;
                let r = self.join((plan, scope, Some(n)), right, j)?;
                if from.joins.len() > 1 {
                    return Err(
                        Error::NotSupported("more than one join after LAST(...)".into())
                            .at(self.text, from.joins[1].relation.span()),
                    );
                }
                (r.0, r.1)
            }
            Rel::Table(t, _) => {
                return Err(Error::Plan(format!(
                    "`{}` is a table; a query reads a stream (FROM stream JOIN {} ON ...)",
                    t.name, t.name
                ))
                .at(self.text, from.relation.span()))
            }
        };
        if !matches!(
            plan,
            Logical::Join {
                window: JoinWindow::Count { .. },
                ..
            }
        ) {
            for j in &from.joins {
                let right = self.factor(&j.relation)?;
                let r = self.join((plan, scope, None), right, j)?;
                plan = r.0;
                scope = r.1;
            }
        }
        if let Some(w) = &s.selection {
            let predicate = self.bool_expr(w, &scope, plan.schema(), "WHERE")?;
            plan = Logical::Filter {
                input: Box::new(plan),
                predicate,
            };
        }
        let group: Vec<ast::Expr> = match &s.group_by {
            ast::GroupByExpr::Expressions(exprs, mods) if mods.is_empty() => exprs.clone(),
            other => {
                return Err(Error::NotSupported(format!("GROUP BY {other}")).at(self.text, s.span()))
            }
        };
        let mut has_aggs = false;
        for item in &s.projection {
            if let ast::SelectItem::UnnamedExpr(e)
            | ast::SelectItem::ExprWithAlias { expr: e, .. } = item
            {
                has_aggs |= contains_agg(e);
            }
        }
        if let Some(h) = &s.having {
            has_aggs |= contains_agg(h);
        }
        if !group.is_empty() || has_aggs {
            return self.aggregate(s, plan, scope, &group);
        }
        if s.having.is_some() {
            return Err(
                Error::Plan("HAVING needs GROUP BY or an aggregate".into()).at(self.text, s.span())
            );
        }
        self.project(s, plan, scope, false)
    }

    /// SELECT list over `plan`; `post_agg` means names resolve in the aggregate's output.
    fn project(
        &self,
        s: &ast::Select,
        plan: Logical,
        scope: Scope,
        post_agg: bool,
    ) -> Result<(Logical, Scope)> {
        let schema = plan.schema().clone();
        let mut exprs = Vec::new();
        let mut fields = Vec::new();
        let mut out_scope = Scope::default();
        let mut star_only = true;
        for item in &s.projection {
            match item {
                ast::SelectItem::Wildcard(_) => {
                    for (i, f) in schema.fields.iter().enumerate() {
                        if post_agg && f.name.starts_with("__") {
                            continue;
                        }
                        exprs.push(Expr::Column(i, f.name.clone()));
                        fields.push(f.clone());
                        out_scope.cols.push(scope.cols[i].clone());
                    }
                }
                ast::SelectItem::QualifiedWildcard(kind, _) => {
                    star_only = false;
                    let q = kind.to_string().to_ascii_lowercase();
                    let before = exprs.len();
                    for (i, f) in schema.fields.iter().enumerate() {
                        if scope.cols[i].0.as_deref() == Some(q.as_str()) {
                            exprs.push(Expr::Column(i, format!("{q}.{}", f.name)));
                            fields.push(f.clone());
                            out_scope.cols.push(scope.cols[i].clone());
                        }
                    }
                    if exprs.len() == before {
                        return Err(Error::Plan(format!(
                            "no relation `{q}` in FROM; columns are {}",
                            scope.names()
                        ))
                        .at(self.text, item.span()));
                    }
                }
                ast::SelectItem::ExprWithAliases { .. } => {
                    return Err(Error::NotSupported("several aliases for one column".into())
                        .at(self.text, item.span()))
                }
                ast::SelectItem::UnnamedExpr(e)
                | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
                    star_only = false;
                    let x = self.expr(e, &scope, &schema)?;
                    let name = match item {
                        ast::SelectItem::ExprWithAlias { alias, .. } => alias.value.clone(),
                        _ => match e {
                            ast::Expr::Identifier(id) => id.value.clone(),
                            ast::Expr::CompoundIdentifier(ids) => {
                                ids.last().map(|i| i.value.clone()).unwrap_or_default()
                            }
                            _ => match &x {
                                Expr::Column(i, _) => schema.fields[*i].name.clone(),
                                _ => format!("col{}", exprs.len() + 1),
                            },
                        },
                    };
                    let ty = x.data_type(&schema)?;
                    fields.push(Field::nullable(&name, ty));
                    out_scope.cols.push((None, name));
                    exprs.push(x);
                }
            }
        }
        if star_only && !post_agg {
            return Ok((plan, scope));
        }
        let event_time = schema.event_time.and_then(|t| {
            exprs
                .iter()
                .position(|e| matches!(e, Expr::Column(i, _) if *i == t))
        });
        if let Some(t) = event_time {
            fields[t].nullable = false;
        }
        let out = Schema { fields, event_time };
        Ok((
            Logical::Project {
                input: Box::new(plan),
                exprs,
                schema: out,
            },
            out_scope,
        ))
    }

    fn aggregate(
        &self,
        s: &ast::Select,
        plan: Logical,
        scope: Scope,
        group: &[ast::Expr],
    ) -> Result<(Logical, Scope)> {
        let in_schema = plan.schema().clone();
        let mut window = WindowSpec::Unbounded;
        let mut keys: Vec<Expr> = Vec::new();
        let mut key_ast: Vec<ast::Expr> = Vec::new();
        let mut key_names: Vec<(String, DataType)> = Vec::new();
        let mut key_scope: Vec<(Option<String>, String)> = Vec::new();
        for g in group {
            if let Some(w) = self.window(g, &scope, &in_schema)? {
                if window != WindowSpec::Unbounded {
                    return Err(
                        Error::Plan("GROUP BY has two windows".into()).at(self.text, g.span())
                    );
                }
                window = w;
                continue;
            }
            let x = self.expr(g, &scope, &in_schema)?;
            let ty = x.data_type(&in_schema)?;
            let (q, name) = match &x {
                Expr::Column(i, _) => scope.cols[*i].clone(),
                _ => (None, format!("key{}", keys.len() + 1)),
            };
            key_names.push((name.clone(), ty));
            key_scope.push((q, name));
            keys.push(x);
            key_ast.push(g.clone());
        }
        // Replace aggregate calls and group expressions by placeholders over the output.
        let mut aggs: Vec<AggCall> = Vec::new();
        let mut agg_text: Vec<String> = Vec::new();
        let mut rewrite_err: Option<Error> = None;
        let mut replace = |e: &ast::Expr| -> Option<ast::Expr> {
            if let Some(k) = key_ast.iter().position(|g| g.to_string() == e.to_string()) {
                if !matches!(
                    e,
                    ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_)
                ) {
                    return Some(ident(&format!("__key{k}")));
                }
                return None;
            }
            let ast::Expr::Function(f) = e else {
                return None;
            };
            let func = agg_func(f)?;
            let text = e.to_string();
            if let Some(i) = agg_text.iter().position(|t| *t == text) {
                return Some(ident(&format!("__agg{i}")));
            }
            match self.agg_call(f, func, &scope, &in_schema) {
                Ok(call) => {
                    aggs.push(call);
                    agg_text.push(text);
                    Some(ident(&format!("__agg{}", aggs.len() - 1)))
                }
                Err(err) => {
                    rewrite_err.get_or_insert(err.at(self.text, e.span()));
                    Some(ident("__error"))
                }
            }
        };
        let mut projection = Vec::new();
        for item in &s.projection {
            projection.push(match item {
                ast::SelectItem::UnnamedExpr(e) => {
                    let r = rewrite(e, &mut replace);
                    // Keep the visible name of the original expression.
                    let name = match e {
                        ast::Expr::Identifier(id) => id.value.clone(),
                        ast::Expr::CompoundIdentifier(ids) => {
                            ids.last().map(|i| i.value.clone()).unwrap_or_default()
                        }
                        ast::Expr::Function(f) => f.name.to_string().to_ascii_lowercase(),
                        _ => format!("col{}", projection.len() + 1),
                    };
                    ast::SelectItem::ExprWithAlias {
                        expr: r,
                        alias: ast::Ident::new(name),
                    }
                }
                ast::SelectItem::ExprWithAlias { expr, alias } => ast::SelectItem::ExprWithAlias {
                    expr: rewrite(expr, &mut replace),
                    alias: alias.clone(),
                },
                other => other.clone(),
            });
        }
        let having = s.having.as_ref().map(|h| rewrite(h, &mut replace));
        if let Some(e) = rewrite_err {
            return Err(e);
        }
        let agg_fields: Vec<(String, DataType)> = aggs
            .iter()
            .enumerate()
            .map(|(i, a)| (format!("__agg{i}"), a.ty))
            .collect();
        let schema = aggregate_schema(&key_names, &agg_fields);
        let mut out_scope = Scope {
            cols: vec![(None, "window_start".into()), (None, "window_end".into())],
        };
        out_scope.cols.extend(key_scope.iter().cloned());
        for (i, _) in aggs.iter().enumerate() {
            out_scope.cols.push((None, format!("__agg{i}")));
        }
        // Group expressions that are not plain columns are reachable as __key{k}.
        let mut named_scope = out_scope.clone();
        for (k, g) in key_ast.iter().enumerate() {
            if !matches!(
                g,
                ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_)
            ) {
                named_scope.cols[2 + k] = (None, format!("__key{k}"));
            }
        }
        let agg = Logical::Aggregate {
            input: Box::new(plan),
            window,
            keys,
            aggs,
            schema: schema.clone(),
        };
        let hint = |name: &str| -> Option<String> {
            scope
                .cols
                .iter()
                .any(|(_, n)| n.eq_ignore_ascii_case(name))
                .then(|| format!("column `{name}` must appear in GROUP BY or inside an aggregate"))
        };
        let names = Names {
            scope: &named_scope,
            registry: Some(self.registry),
            hint: Some(&hint),
        };
        let mut plan = agg;
        if let Some(h) = &having {
            let x = convert(h, &names).at(self.text, h.span())?;
            match x.data_type(&schema)? {
                DataType::Bool => {}
                t => {
                    return Err(
                        Error::Plan(format!("HAVING must be a bool condition, found {t}"))
                            .at(self.text, h.span()),
                    )
                }
            }
            plan = Logical::Filter {
                input: Box::new(plan),
                predicate: x,
            };
        }
        // Project the SELECT list over the aggregate's output.
        let mut exprs = Vec::new();
        let mut fields = Vec::new();
        let mut scope_out = Scope::default();
        for item in &projection {
            match item {
                ast::SelectItem::ExprWithAlias { expr, alias } => {
                    let x = convert(expr, &names).at(self.text, expr.span())?;
                    let ty = x
                        .data_type(&schema)
                        .map(|_| x.clone())
                        .at(self.text, expr.span())?
                        .data_type(&schema)?;
                    fields.push(Field::nullable(&alias.value, ty));
                    scope_out.cols.push((None, alias.value.clone()));
                    exprs.push(x);
                }
                ast::SelectItem::Wildcard(_) => {
                    for (i, f) in schema.fields.iter().enumerate() {
                        if f.name.starts_with("__") {
                            continue;
                        }
                        exprs.push(Expr::Column(i, f.name.clone()));
                        fields.push(f.clone());
                        scope_out.cols.push((None, f.name.clone()));
                    }
                }
                other => {
                    return Err(
                        Error::NotSupported(format!("`{other}` in an aggregate query"))
                            .at(self.text, other.span()),
                    )
                }
            }
        }
        let event_time = exprs.iter().position(|e| matches!(e, Expr::Column(1, _)));
        if let Some(t) = event_time {
            fields[t].nullable = false;
        }
        Ok((
            Logical::Project {
                input: Box::new(plan),
                exprs,
                schema: Schema { fields, event_time },
            },
            scope_out,
        ))
    }

    fn agg_call(
        &self,
        f: &ast::Function,
        func: AggFunc,
        scope: &Scope,
        schema: &Schema,
    ) -> Result<AggCall> {
        let ast::FunctionArguments::List(list) = &f.args else {
            return Err(Error::Plan(format!("{} needs an argument", func.name())));
        };
        let distinct = matches!(
            list.duplicate_treatment,
            Some(ast::DuplicateTreatment::Distinct)
        );
        let arg = match list.args.as_slice() {
            [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard)] => None,
            [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e))] => {
                Some(self.expr(e, scope, schema)?)
            }
            _ => return Err(Error::Plan(format!("{} takes one argument", func.name()))),
        };
        let func = match (func, &arg, distinct) {
            (AggFunc::Count, None, false) => AggFunc::CountStar,
            (AggFunc::Count, Some(_), true) => AggFunc::CountDistinct,
            (_, _, true) => {
                return Err(Error::NotSupported(format!(
                    "DISTINCT in {}; only count(DISTINCT x)",
                    func.name()
                )))
            }
            (f, None, _) if f != AggFunc::Count => {
                return Err(Error::Plan(format!("{}(*) needs a column", f.name())))
            }
            (f, _, _) => f,
        };
        let at = arg.as_ref().map(|a| a.data_type(schema)).transpose()?;
        let ty = match func {
            AggFunc::CountStar | AggFunc::Count | AggFunc::CountDistinct => DataType::Int64,
            AggFunc::Avg => match at {
                Some(DataType::Int64 | DataType::Float64) => DataType::Float64,
                t => {
                    return Err(Error::Plan(format!(
                        "avg needs a number, found {}",
                        show(t)
                    )))
                }
            },
            AggFunc::Sum => match at {
                Some(t @ (DataType::Int64 | DataType::Float64)) => t,
                t => {
                    return Err(Error::Plan(format!(
                        "sum needs a number, found {}",
                        show(t)
                    )))
                }
            },
            AggFunc::Min | AggFunc::Max => at.unwrap_or(DataType::Int64),
        };
        Ok(AggCall { func, arg, ty })
    }

    /// A window function of GROUP BY, if `g` is one.
    fn window(&self, g: &ast::Expr, scope: &Scope, schema: &Schema) -> Result<Option<WindowSpec>> {
        let ast::Expr::Function(f) = g else {
            return Ok(None);
        };
        let name = f.name.to_string().to_ascii_lowercase();
        if !matches!(name.as_str(), "tumble" | "hop" | "session" | "rows") {
            return Ok(None);
        }
        let args: Vec<&ast::Expr> = match &f.args {
            ast::FunctionArguments::List(l) => l
                .args
                .iter()
                .filter_map(|a| match a {
                    ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => Some(e),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        let usage = match name.as_str() {
            "tumble" => "TUMBLE(time, size)",
            "hop" => "HOP(time, size, slide)",
            "session" => "SESSION(time, gap)",
            _ => "ROWS(n)",
        };
        let bad = |why: &str| Error::Plan(format!("{why}; write {usage}")).at(self.text, g.span());
        if name == "rows" {
            let n = args.first().and_then(|a| const_int(a)).filter(|n| *n > 0);
            return match (n, args.len()) {
                (Some(n), 1) => Ok(Some(WindowSpec::Count { rows: n as u64 })),
                _ => Err(bad("ROWS takes a positive row count")),
            };
        }
        let Some(time) = args.first() else {
            return Err(bad("the window needs the event-time column"));
        };
        let t = self.expr(time, scope, schema)?;
        let ok_time = matches!(t, Expr::Column(i, _) if Some(i) == schema.event_time);
        if !ok_time {
            let et = schema
                .event_time
                .map(|i| format!("`{}`", schema.fields[i].name))
                .unwrap_or_else(|| "none (declare event_time in CREATE STREAM)".into());
            return Err(Error::Plan(format!(
                "windows are over the stream's event time; its event-time column is {et}"
            ))
            .at(self.text, time.span()));
        }
        let nums: Vec<Option<i64>> = args[1..].iter().map(|a| const_int(a)).collect();
        let pos = |v: &Option<i64>| v.filter(|n| *n > 0);
        Ok(Some(match (name.as_str(), nums.as_slice()) {
            ("tumble", [s]) => WindowSpec::Tumble {
                size: pos(s).ok_or_else(|| bad("the size must be a positive integer"))?,
            },
            ("hop", [s, h]) => {
                let (size, slide) = (pos(s), pos(h));
                match (size, slide) {
                    (Some(size), Some(slide)) => WindowSpec::Hop { size, slide },
                    _ => return Err(bad("size and slide must be positive integers")),
                }
            }
            ("session", [gap]) => WindowSpec::Session {
                gap: pos(gap).ok_or_else(|| bad("the gap must be a positive integer"))?,
            },
            _ => return Err(bad("wrong number of arguments")),
        }))
    }

    fn join(
        &mut self,
        left: (Logical, Scope, Option<u64>),
        right: Rel,
        j: &ast::Join,
    ) -> Result<(Logical, Scope)> {
        let (lplan, lscope, llast) = left;
        let on = match &j.join_operator {
            ast::JoinOperator::Join(ast::JoinConstraint::On(e))
            | ast::JoinOperator::Inner(ast::JoinConstraint::On(e)) => e,
            other => {
                return Err(Error::NotSupported(format!(
                    "{}; Braid joins streams with [INNER] JOIN ... ON",
                    join_kind(other)
                ))
                .at(self.text, j.relation.span()))
            }
        };
        match right {
            Rel::Table(table, alias) => {
                if llast.is_some() {
                    return Err(Error::Plan(
                        "LAST(...) joins another LAST(...), not a table".into(),
                    )
                    .at(self.text, j.relation.span()));
                }
                let tscope = Scope::of(&table.schema, Some(&alias));
                let scope = lscope.concat(&tscope);
                let schema = concat_schema(lplan.schema(), &table.schema);
                let cond = self.bool_expr(on, &scope, &schema, "ON")?;
                let la = lplan.schema().arity();
                let mut keys = Vec::new();
                let mut rest = Vec::new();
                for c in conjuncts(cond) {
                    if let Expr::Binary(BinOp::Eq, a, b) = &c {
                        let side = |e: &Expr| {
                            let cols = e.columns();
                            if !cols.is_empty() && cols.iter().all(|&i| i < la) {
                                Some(0)
                            } else if cols.len() == 1
                                && cols[0] >= la
                                && matches!(e, Expr::Column(..))
                            {
                                Some(1)
                            } else {
                                None
                            }
                        };
                        match (side(a), side(b)) {
                            (Some(0), Some(1)) => {
                                keys.push((*a.clone(), b.columns()[0] - la));
                                continue;
                            }
                            (Some(1), Some(0)) => {
                                keys.push((*b.clone(), a.columns()[0] - la));
                                continue;
                            }
                            _ => {}
                        }
                    }
                    rest.push(c);
                }
                if keys.is_empty() {
                    return Err(Error::Plan(format!(
                            "a join with table `{}` needs an equality between a stream expression and a table column",
                            table.name
                        )).at(self.text, on.span()));
                }
                let mut schema = schema;
                for f in &mut schema.fields[la..] {
                    f.nullable = true;
                }
                Ok((
                    Logical::Lookup {
                        input: Box::new(lplan),
                        table,
                        keys,
                        residual: and_all(rest),
                        schema,
                    },
                    scope,
                ))
            }
            Rel::Stream {
                plan: rplan,
                scope: rscope,
                last: rlast,
            } => {
                let scope = lscope.concat(&rscope);
                let schema = concat_schema(lplan.schema(), rplan.schema());
                let cond = self.bool_expr(on, &scope, &schema, "ON")?;
                let la = lplan.schema().arity();
                let lt = lplan.schema().event_time;
                let rt = rplan.schema().event_time.map(|t| t + la);
                let mut equi = Vec::new();
                let mut lo: Option<i64> = None;
                let mut hi: Option<i64> = None;
                let mut rest = Vec::new();
                for c in conjuncts(cond) {
                    if let Expr::Binary(op, a, b) = &c {
                        if *op == BinOp::Eq {
                            let ca = a.columns();
                            let cb = b.columns();
                            let left_only =
                                |v: &[usize]| !v.is_empty() && v.iter().all(|&i| i < la);
                            let right_only =
                                |v: &[usize]| !v.is_empty() && v.iter().all(|&i| i >= la);
                            let shift = |e: &Expr| {
                                e.map_columns(&|i, n| Expr::Column(i - la, n.to_string()))
                            };
                            if left_only(&ca) && right_only(&cb) && llast.is_none() {
                                equi.push((*a.clone(), shift(b)));
                                continue;
                            }
                            if right_only(&ca) && left_only(&cb) && llast.is_none() {
                                equi.push((*b.clone(), shift(a)));
                                continue;
                            }
                        }
                        if let (Some(lt), Some(rt)) = (lt, rt) {
                            if let Some((l, h)) = time_bound(*op, a, b, lt, rt) {
                                if let Some(l) = l {
                                    lo = Some(lo.map_or(l, |x: i64| x.max(l)));
                                }
                                if let Some(h) = h {
                                    hi = Some(hi.map_or(h, |x: i64| x.min(h)));
                                }
                                continue;
                            }
                        }
                    }
                    rest.push(c);
                }
                let window = match (llast, rlast) {
                    (Some(l), Some(r)) => {
                        rest.extend(equi.drain(..).map(|(a, b)| {
                            a.eq(b.map_columns(&|i, n| Expr::Column(i + la, n.to_string())))
                        }));
                        if let (Some(l), Some(h)) = (lo, hi) {
                            // Keep the time bounds as plain conditions.
                            let (lt, rt) = (lt.unwrap_or(0), rt.unwrap_or(0));
                            let d = Expr::Column(rt, "right.time".into())
                                .bin(BinOp::Sub, Expr::Column(lt, "left.time".into()));
                            rest.push(d.clone().bin(BinOp::GtEq, Expr::int(l)));
                            rest.push(d.bin(BinOp::LtEq, Expr::int(h)));
                        }
                        JoinWindow::Count { left: l, right: r }
                    }
                    (None, None) => match (lo, hi) {
                        (Some(lo), Some(hi)) if lo <= hi => JoinWindow::Interval { lo, hi },
                        (Some(_), Some(_)) => {
                            return Err(Error::Plan("the join's time bounds admit no pair (lower bound above upper bound)".into()).at(self.text, on.span()))
                        }
                        _ => {
                            return Err(Error::Plan(
                                    "a join of two streams needs a window: bound the time difference both ways (`b.t BETWEEN a.t - 10 AND a.t + 10`) or join count windows LAST(a, n) JOIN LAST(b, m)".into(),
                                ).at(self.text, on.span()))
                        }
                    },
                    _ => {
                        return Err(Error::Plan("LAST(...) must be used on both sides of the join".into()).at(self.text, j.relation.span()))
                    }
                };
                let mut schema = schema;
                schema.event_time = lt;
                Ok((
                    Logical::Join {
                        left: Box::new(lplan),
                        right: Box::new(rplan),
                        equi,
                        residual: and_all(rest),
                        window,
                        schema,
                    },
                    scope,
                ))
            }
        }
    }
}

fn show(t: Option<DataType>) -> String {
    t.map_or("*".into(), |t| t.to_string())
}

fn join_kind(op: &ast::JoinOperator) -> &'static str {
    match op {
        ast::JoinOperator::LeftOuter(_) | ast::JoinOperator::Left(_) => "LEFT JOIN",
        ast::JoinOperator::RightOuter(_) | ast::JoinOperator::Right(_) => "RIGHT JOIN",
        ast::JoinOperator::FullOuter(_) => "FULL JOIN",
        ast::JoinOperator::CrossJoin(_) => "CROSS JOIN (give a condition with JOIN ... ON)",
        _ => "this join",
    }
}

/// The stream's columns as SQL sees them (an interleaved multi-file stream shows the
/// files' common columns).
pub(crate) fn plain_schema(source: &braid_plan::plan::Source) -> Schema {
    match &source.spec {
        braid_plan::plan::SourceSpec::Interleave(kids) if !kids.is_empty() => {
            kids[0].schema.clone()
        }
        _ => source.schema.clone(),
    }
}

fn concat_schema(a: &Schema, b: &Schema) -> Schema {
    let mut fields = a.fields.clone();
    fields.extend(b.fields.iter().cloned());
    Schema {
        fields,
        event_time: a.event_time,
    }
}

fn ident(name: &str) -> ast::Expr {
    ast::Expr::Identifier(ast::Ident::new(name))
}

fn const_int(e: &ast::Expr) -> Option<i64> {
    match e {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => n.parse().ok(),
            _ => None,
        },
        ast::Expr::UnaryOp {
            op: ast::UnaryOperator::Minus,
            expr,
        } => const_int(expr).map(|n| -n),
        ast::Expr::Nested(e) => const_int(e),
        _ => None,
    }
}

fn agg_func(f: &ast::Function) -> Option<AggFunc> {
    Some(match f.name.to_string().to_ascii_lowercase().as_str() {
        "count" => AggFunc::Count,
        "sum" => AggFunc::Sum,
        "avg" => AggFunc::Avg,
        "min" => AggFunc::Min,
        "max" => AggFunc::Max,
        _ => return None,
    })
}

fn contains_agg(e: &ast::Expr) -> bool {
    let mut found = false;
    let _ = rewrite(e, &mut |x| {
        if let ast::Expr::Function(f) = x {
            if agg_func(f).is_some() {
                found = true;
            }
        }
        None
    });
    found
}

/// Rebuilds `e`, replacing any sub-expression for which `f` returns a replacement.
fn rewrite(e: &ast::Expr, f: &mut dyn FnMut(&ast::Expr) -> Option<ast::Expr>) -> ast::Expr {
    if let Some(r) = f(e) {
        return r;
    }
    use ast::Expr as E;
    let mut b = |x: &ast::Expr| Box::new(rewrite(x, f));
    match e {
        E::BinaryOp { left, op, right } => E::BinaryOp {
            left: b(left),
            op: op.clone(),
            right: b(right),
        },
        E::UnaryOp { op, expr } => E::UnaryOp {
            op: *op,
            expr: b(expr),
        },
        E::Nested(x) => E::Nested(b(x)),
        E::IsNull(x) => E::IsNull(b(x)),
        E::IsNotNull(x) => E::IsNotNull(b(x)),
        E::Cast {
            kind,
            expr,
            data_type,
            format,
        } => E::Cast {
            kind: kind.clone(),
            expr: b(expr),
            data_type: data_type.clone(),
            format: format.clone(),
        },
        E::Between {
            expr,
            negated,
            low,
            high,
        } => E::Between {
            expr: b(expr),
            negated: *negated,
            low: b(low),
            high: b(high),
        },
        E::InList {
            expr,
            list,
            negated,
        } => E::InList {
            expr: b(expr),
            list: list.iter().map(|x| rewrite(x, f)).collect(),
            negated: *negated,
        },
        E::Case {
            case_token,
            end_token,
            operand,
            conditions,
            else_result,
        } => E::Case {
            case_token: case_token.clone(),
            end_token: end_token.clone(),
            operand: operand.as_ref().map(|o| Box::new(rewrite(o, f))),
            conditions: conditions
                .iter()
                .map(|w| ast::CaseWhen {
                    condition: rewrite(&w.condition, f),
                    result: rewrite(&w.result, f),
                })
                .collect(),
            else_result: else_result.as_ref().map(|x| Box::new(rewrite(x, f))),
        },
        E::Function(func) => {
            let mut func = func.clone();
            if let ast::FunctionArguments::List(list) = &mut func.args {
                for a in &mut list.args {
                    if let ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)) = a {
                        *x = rewrite(x, f);
                    }
                }
            }
            E::Function(func)
        }
        other => other.clone(),
    }
}

/// `side ± constant` for a time column: (is_right, constant).
fn linear(e: &Expr, lt: usize, rt: usize) -> Option<(bool, i64)> {
    match e {
        Expr::Column(i, _) if *i == lt => Some((false, 0)),
        Expr::Column(i, _) if *i == rt => Some((true, 0)),
        Expr::Binary(op @ (BinOp::Add | BinOp::Sub), a, b) => {
            let (side, c) = linear(a, lt, rt)?;
            let Expr::Literal(Scalar::Int(k)) = b.as_ref() else {
                return None;
            };
            Some((side, if *op == BinOp::Add { c + k } else { c - k }))
        }
        _ => None,
    }
}

/// Bounds on `d = right.time - left.time` implied by `a op b`, if it compares the two
/// time columns (plus constants).
fn time_bound(
    op: BinOp,
    a: &Expr,
    b: &Expr,
    lt: usize,
    rt: usize,
) -> Option<(Option<i64>, Option<i64>)> {
    let (sa, ca) = linear(a, lt, rt)?;
    let (sb, cb) = linear(b, lt, rt)?;
    if sa == sb {
        return None;
    }
    // Normalise to `d op k`.
    let (op, k) = if sa {
        // r + ca op l + cb  =>  d op cb - ca
        (op, cb - ca)
    } else {
        // l + ca op r + cb  =>  -d op cb - ca  =>  d flip(op) ca - cb
        let flipped = match op {
            BinOp::Lt => BinOp::Gt,
            BinOp::LtEq => BinOp::GtEq,
            BinOp::Gt => BinOp::Lt,
            BinOp::GtEq => BinOp::LtEq,
            other => other,
        };
        (flipped, ca - cb)
    };
    Some(match op {
        BinOp::GtEq => (Some(k), None),
        BinOp::Gt => (Some(k + 1), None),
        BinOp::LtEq => (None, Some(k)),
        BinOp::Lt => (None, Some(k - 1)),
        BinOp::Eq => (Some(k), Some(k)),
        _ => return None,
    })
}
