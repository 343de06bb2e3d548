//! Aggregate queries: GROUP BY (a window and key expressions), the aggregate calls in
//! the SELECT list and HAVING, and the SELECT list over the aggregate's output
//! (`window_start, window_end, keys..., aggregates...`).

use super::rewrite::{agg_func, rewrite};
use super::scope::{Names, Scope};
use super::Planner;
use crate::expr::{check_call, convert, Call};
use crate::located::At;
use crate::logical::{windowed_schema, AggCall, AggFunc, Logical, WindowSpec};
use braid_plan::error::{Error, Result};
use braid_plan::expr::Expr;
use braid_plan::types::{DataType, Field, Schema};
use sqlparser::ast::{self, Spanned};

/// What GROUP BY says.
struct Group {
    /// The window (unbounded without one).
    window: WindowSpec,
    /// Key expressions over the input.
    keys: Vec<Expr>,
    /// The keys as written (a group expression in the SELECT list is found by its text).
    written: Vec<ast::Expr>,
    /// Key columns of the output: name and type.
    names: Vec<(String, DataType)>,
    /// Key columns of the output: qualifier and name.
    scope: Vec<(Option<String>, String)>,
}

/// The SELECT list and HAVING with aggregate calls replaced by `__agg{i}` and group
/// expressions by `__key{k}`, columns of the aggregate's output.
struct Rewritten {
    projection: Vec<ast::SelectItem>,
    having: Option<ast::Expr>,
    aggs: Vec<AggCall>,
}

impl Planner<'_> {
    /// Plans an aggregate query over `plan`: the aggregate, HAVING as a filter over its
    /// output, and the SELECT list as a projection of it.
    pub(super) fn aggregate(
        &self,
        s: &ast::Select,
        plan: Logical,
        scope: Scope,
        group: &[ast::Expr],
        tvf: Option<WindowSpec>,
    ) -> Result<(Logical, Scope)> {
        let in_schema = plan.schema().clone();
        // GROUP BY: the window and the keys.
        let group = self.group(group, &scope, &in_schema, tvf, s)?;
        // Aggregate calls in the SELECT list and HAVING.
        let r = self.rewrite_aggregates(s, &group.written, &scope, &in_schema)?;
        // The aggregate, and the names its output answers to.
        let agg_fields: Vec<(String, DataType)> = r
            .aggs
            .iter()
            .enumerate()
            .map(|(i, a)| (format!("__agg{i}"), a.ty))
            .collect();
        // Time windows over a timestamp event time have timestamp bounds.
        let time = match in_schema.event_time.map(|i| in_schema.fields[i].ty) {
            Some(t) if t.is_time() && group.window.is_timed() => t,
            _ => DataType::Int64,
        };
        let schema = windowed_schema(time, &group.names, &agg_fields);
        let named_scope = output_scope(&group, r.aggs.len());
        let mut plan = Logical::Aggregate {
            phase: crate::logical::AggPhase::Whole,
            input: Box::new(plan),
            window: group.window,
            keys: group.keys,
            aggs: r.aggs,
            schema: schema.clone(),
        };
        let hint = |name: &str| -> Option<String> {
            scope
                .cols
                .iter()
                .any(|(_, n)| n.eq_ignore_ascii_case(name))
                .then(|| format!("column `{name}` must appear in GROUP BY or inside an aggregate"))
        };
        let names = self.names(&named_scope, &schema, Some(&hint));
        // HAVING.
        if let Some(h) = &r.having {
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
        // The SELECT list over the aggregate's output.
        self.project_aggregate(&r.projection, plan, &names, &schema)
    }

    /// The window and keys of GROUP BY. Over a window table function (`tvf`), GROUP BY
    /// lists `window_start` and `window_end`, which are the window, not keys.
    fn group(
        &self,
        group: &[ast::Expr],
        scope: &Scope,
        in_schema: &Schema,
        tvf: Option<WindowSpec>,
        s: &ast::Select,
    ) -> Result<Group> {
        let mut bounds = [false, false];
        let mut g = Group {
            window: tvf.clone().unwrap_or(WindowSpec::Unbounded),
            keys: Vec::new(),
            written: Vec::new(),
            names: Vec::new(),
            scope: Vec::new(),
        };
        for e in group {
            if let (Some(_), Some(b)) = (&tvf, window_bound(e)) {
                bounds[b] = true;
                continue;
            }
            if let Some(w) = self.window(e, scope, in_schema)? {
                if g.window != WindowSpec::Unbounded {
                    return Err(
                        Error::Plan("GROUP BY has two windows".into()).at(self.text, e.span())
                    );
                }
                g.window = w;
                continue;
            }
            if let Some(WindowSpec::Session { .. }) = tvf {
                // Flink's sessions without PARTITION BY span every key (GROUP BY's keys
                // split each session); Braid's sessions are per key.
                return Err(Error::NotSupported(
                    "GROUP BY keys over the SESSION window table function: without PARTITION BY its sessions span the whole stream and the keys would split each one; for sessions per key write GROUP BY SESSION(time, gap), keys".into(),
                )
                .at(self.text, e.span()));
            }
            self.refuse_aggregates(e, "GROUP BY")?;
            let x = self.expr(e, scope, in_schema)?;
            let ty = x.data_type(in_schema)?;
            let (q, name) = match &x {
                Expr::Column(i, _) => scope.cols[*i].clone(),
                _ => (None, format!("key{}", g.keys.len() + 1)),
            };
            g.names.push((name.clone(), ty));
            g.scope.push((q, name));
            g.keys.push(x);
            g.written.push(e.clone());
        }
        if tvf.is_some() && bounds != [true, true] {
            return Err(Error::Plan(
                "an aggregate over a window table function groups by its window: GROUP BY window_start, window_end, keys".into(),
            )
            .at(self.text, s.span()));
        }
        Ok(g)
    }

    /// Replaces aggregate calls and group expressions in the SELECT list and HAVING by
    /// placeholders over the aggregate's output; unnamed items keep their visible name.
    fn rewrite_aggregates(
        &self,
        s: &ast::Select,
        key_ast: &[ast::Expr],
        scope: &Scope,
        in_schema: &Schema,
    ) -> Result<Rewritten> {
        let mut aggs: Vec<AggCall> = Vec::new();
        let mut agg_text: Vec<String> = Vec::new();
        let mut rewrite_err: Option<Error> = None;
        let mut replace = |e: &ast::Expr| -> Option<ast::Expr> {
            if let Some(k) = key_ast.iter().position(|g| g.to_string() == e.to_string()) {
                if !is_name(e) {
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
            match self.agg_call(f, func, scope, in_schema) {
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
        Ok(Rewritten {
            projection,
            having,
            aggs,
        })
    }

    /// The (rewritten) SELECT list over the aggregate's output; `*` shows every column
    /// but the placeholders. The event time is `window_end` when the list keeps it.
    fn project_aggregate(
        &self,
        projection: &[ast::SelectItem],
        plan: Logical,
        names: &Names<'_>,
        schema: &Schema,
    ) -> Result<(Logical, Scope)> {
        let mut exprs = Vec::new();
        let mut fields = Vec::new();
        let mut scope_out = Scope::default();
        for item in projection {
            match item {
                ast::SelectItem::ExprWithAlias { expr, alias } => {
                    let x = convert(expr, names).at(self.text, expr.span())?;
                    let ty = x
                        .data_type(schema)
                        .map(|_| x.clone())
                        .at(self.text, expr.span())?
                        .data_type(schema)?;
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

    /// One aggregate call: its function, argument and result type.
    fn agg_call(
        &self,
        f: &ast::Function,
        func: AggFunc,
        scope: &Scope,
        schema: &Schema,
    ) -> Result<AggCall> {
        check_call(f, Call::Aggregate)?;
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
        // FILTER (WHERE c): a bool condition over the input rows.
        let filter = match &f.filter {
            None => None,
            Some(c) => {
                let x = self.expr(c, scope, schema)?;
                match x.data_type(schema)? {
                    DataType::Bool => Some(x),
                    t => {
                        return Err(Error::Plan(format!(
                            "FILTER (WHERE ...) needs a bool condition, found {t}"
                        ))
                        .at(self.text, c.span()))
                    }
                }
            }
        };
        Ok(AggCall {
            func,
            arg,
            filter,
            ty,
        })
    }
}

/// The names the aggregate's output answers to: the window bounds, the keys (a key that
/// is not a plain column as `__key{k}`), the aggregates as `__agg{i}`.
fn output_scope(group: &Group, aggs: usize) -> Scope {
    let mut scope = Scope {
        cols: vec![(None, "window_start".into()), (None, "window_end".into())],
    };
    scope.cols.extend(group.scope.iter().cloned());
    for i in 0..aggs {
        scope.cols.push((None, format!("__agg{i}")));
    }
    for (k, g) in group.written.iter().enumerate() {
        if !is_name(g) {
            scope.cols[2 + k] = (None, format!("__key{k}"));
        }
    }
    scope
}

/// 0 for `window_start`, 1 for `window_end` (possibly qualified).
fn window_bound(e: &ast::Expr) -> Option<usize> {
    let name = match e {
        ast::Expr::Identifier(id) => id,
        ast::Expr::CompoundIdentifier(ids) => ids.last()?,
        _ => return None,
    };
    ["window_start", "window_end"]
        .iter()
        .position(|b| name.value.eq_ignore_ascii_case(b))
}

/// Whether `e` is a column name (`x` or `a.x`).
fn is_name(e: &ast::Expr) -> bool {
    matches!(
        e,
        ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_)
    )
}

fn show(t: Option<DataType>) -> String {
    t.map_or("*".into(), |t| t.to_string())
}

fn ident(name: &str) -> ast::Expr {
    ast::Expr::Identifier(ast::Ident::new(name))
}
