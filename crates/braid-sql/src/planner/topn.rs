//! Window top-N, Flink's form: `SELECT ... FROM (SELECT *, ROW_NUMBER() OVER (PARTITION
//! BY window_start, window_end [, keys] ORDER BY col [DESC], ...) AS rownum FROM
//! (<windowed aggregate>)) WHERE rownum <= N [AND ...]` becomes a [`Logical::TopN`]
//! over the aggregate. Any other use of ROW_NUMBER (or another OVER call) is left to
//! the usual planning, which refuses it at `OVER`.

use super::scope::Scope;
use super::{const_int, Planner};
use crate::located::At;
use crate::logical::Logical;
use braid_plan::error::{Error, Result};
use braid_plan::expr::Expr;
use braid_plan::types::{DataType, Field};
use sqlparser::ast::{self, Spanned};

impl Planner<'_> {
    /// The window top-N `s` spells, if it is one.
    pub(super) fn window_top_n(&mut self, s: &ast::Select) -> Result<Option<(Logical, Scope)>> {
        let Some((inner, sub, alias, ialias)) = derived(s) else {
            return Ok(None);
        };
        let Some((over, rownum)) = row_number(inner) else {
            return Ok(None);
        };
        let Some((n, rest)) = s.selection.as_ref().and_then(|w| rank_limit(w, &rownum)) else {
            return Ok(None);
        };
        let refuse = |what: &str, span| {
            Err(Error::NotSupported(format!("{what} in a window top-N")).at(self.text, span))
        };
        if !matches!(s.group_by, ast::GroupByExpr::Expressions(ref g, _) if g.is_empty())
            || s.having.is_some()
        {
            return refuse("GROUP BY or HAVING over the ranked rows", s.span());
        }
        if over.window_frame.is_some() || over.window_name.is_some() || over.order_by.is_empty() {
            return refuse("ROW_NUMBER() needs OVER (PARTITION BY ... ORDER BY ...) without a frame or a named window, and", inner.projection[1].span());
        }
        let (plan, _) = self.query(sub)?;
        let scope = Scope::of(plan.schema(), ialias.as_deref());
        let col = |e: &ast::Expr| -> Result<usize> {
            match self.expr(e, &scope, plan.schema())? {
                Expr::Column(c, _) => Ok(c),
                _ => Err(Error::NotSupported(
                    "an expression in OVER (PARTITION BY / ORDER BY) of a window top-N; name a column".into(),
                )
                .at(self.text, e.span())),
            }
        };
        let partition = over
            .partition_by
            .iter()
            .map(col)
            .collect::<Result<Vec<_>>>()?;
        let mut order = Vec::new();
        for o in &over.order_by {
            let desc = match &o.options.sort {
                None | Some(ast::OrderBySort::Asc) => false,
                Some(ast::OrderBySort::Desc) => true,
                Some(ast::OrderBySort::Using(_)) => return refuse("ORDER BY ... USING", o.span()),
            };
            if o.options.nulls_first.is_some() || o.with_fill.is_some() {
                return refuse("NULLS FIRST / LAST or WITH FILL", o.span());
            }
            order.push((col(&o.expr)?, desc));
        }
        // The window's bounds, as the aggregate made them, must be among PARTITION BY.
        let window = match window_bounds(&plan) {
            [Some(s), Some(e)] if partition.contains(&s) && partition.contains(&e) => [s, e],
            _ => {
            return Err(Error::NotSupported(
                "a window top-N needs a windowed aggregate (TUMBLE, HOP, CUMULATE or SESSION) below and PARTITION BY window_start, window_end of it (a top-N over a whole stream never ends)".into(),
            )
            .at(self.text, inner.projection[1].span()))
            }
        };
        let mut schema = plan.schema().clone();
        schema.fields.push(Field::new(&rownum, DataType::Int64));
        let top = Logical::TopN {
            input: Box::new(plan),
            partition,
            window,
            order,
            limit: n,
            schema,
        };
        let scope = Scope::of(top.schema(), alias.as_deref());
        let mut plan = top;
        if let Some(w) = rest {
            let predicate = self.bool_expr(&w, &scope, plan.schema(), "WHERE")?;
            plan = Logical::Filter {
                input: Box::new(plan),
                predicate,
            };
        }
        self.project(s, plan, scope).map(Some)
    }
}

type Derived<'s> = (
    &'s ast::Select,
    &'s ast::Query,
    Option<String>,
    Option<String>,
);

/// `FROM (SELECT ... FROM (subquery) [inner alias]) [alias]`: the inner SELECT, its
/// subquery, the alias and the inner alias.
fn derived(s: &ast::Select) -> Option<Derived<'_>> {
    let [from] = s.from.as_slice() else {
        return None;
    };
    let ast::TableFactor::Derived {
        subquery, alias, ..
    } = &from.relation
    else {
        return None;
    };
    let plain = |q: &ast::Query| {
        q.with.is_none() && q.order_by.is_none() && q.limit_clause.is_none() && q.fetch.is_none()
    };
    let ast::SetExpr::Select(inner) = subquery.body.as_ref() else {
        return None;
    };
    let [ifrom] = inner.from.as_slice() else {
        return None;
    };
    let ast::TableFactor::Derived {
        subquery: sub,
        alias: ialias,
        ..
    } = &ifrom.relation
    else {
        return None;
    };
    let simple = from.joins.is_empty()
        && ifrom.joins.is_empty()
        && plain(subquery)
        && inner.selection.is_none()
        && inner.having.is_none()
        && inner.distinct.is_none()
        && matches!(&inner.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty())
        && alias.as_ref().is_none_or(|a| a.columns.is_empty())
        && ialias.as_ref().is_none_or(|a| a.columns.is_empty());
    simple.then(|| {
        (
            inner.as_ref(),
            sub.as_ref(),
            alias.as_ref().map(|a| a.name.value.clone()),
            ialias.as_ref().map(|a| a.name.value.clone()),
        )
    })
}

/// `SELECT *, ROW_NUMBER() OVER (...) AS name`: the window and the name.
fn row_number(inner: &ast::Select) -> Option<(&ast::WindowSpec, String)> {
    let [ast::SelectItem::Wildcard(opts), ast::SelectItem::ExprWithAlias { expr, alias }] =
        inner.projection.as_slice()
    else {
        return None;
    };
    if opts.opt_ilike.is_some()
        || opts.opt_exclude.is_some()
        || opts.opt_except.is_some()
        || opts.opt_replace.is_some()
        || opts.opt_rename.is_some()
        || opts.opt_alias.is_some()
    {
        return None;
    }
    let ast::Expr::Function(f) = expr else {
        return None;
    };
    let no_args = match &f.args {
        ast::FunctionArguments::None => true,
        ast::FunctionArguments::List(l) => l.args.is_empty() && l.clauses.is_empty(),
        ast::FunctionArguments::Subquery(_) => false,
    };
    let plain = no_args
        && f.name.to_string().eq_ignore_ascii_case("row_number")
        && matches!(f.parameters, ast::FunctionArguments::None)
        && f.filter.is_none()
        && f.null_treatment.is_none()
        && f.within_group.is_empty();
    match &f.over {
        Some(ast::WindowType::WindowSpec(w)) if plain => Some((w, alias.value.clone())),
        _ => None,
    }
}

/// The `rownum <= N` (or `rownum < N`, `N >= rownum`) conjunct of `w`: N, and the
/// other conjuncts.
fn rank_limit(w: &ast::Expr, rownum: &str) -> Option<(u64, Option<ast::Expr>)> {
    let mut conj = Vec::new();
    flatten(w, &mut conj);
    let is_rownum = |e: &ast::Expr| match e {
        ast::Expr::Identifier(i) => i.value.eq_ignore_ascii_case(rownum),
        ast::Expr::CompoundIdentifier(p) => p
            .last()
            .is_some_and(|i| i.value.eq_ignore_ascii_case(rownum)),
        _ => false,
    };
    use ast::BinaryOperator as B;
    let limit = |e: &ast::Expr| -> Option<u64> {
        let ast::Expr::BinaryOp { left, op, right } = e else {
            return None;
        };
        let n = match op {
            B::LtEq if is_rownum(left) => const_int(right)?,
            B::Lt if is_rownum(left) => const_int(right)? - 1,
            B::GtEq if is_rownum(right) => const_int(left)?,
            B::Gt if is_rownum(right) => const_int(left)? - 1,
            _ => return None,
        };
        u64::try_from(n).ok()
    };
    let i = conj.iter().position(|e| limit(e).is_some())?;
    let n = limit(conj[i])?;
    let rest = conj
        .iter()
        .enumerate()
        .filter(|(j, _)| *j != i)
        .map(|(_, e)| (*e).clone())
        .reduce(|a, b| ast::Expr::BinaryOp {
            left: Box::new(a),
            op: B::And,
            right: Box::new(b),
        });
    Some((n, rest))
}

fn flatten<'e>(e: &'e ast::Expr, out: &mut Vec<&'e ast::Expr>) {
    match e {
        ast::Expr::BinaryOp {
            left,
            op: ast::BinaryOperator::And,
            right,
        } => {
            flatten(left, out);
            flatten(right, out);
        }
        ast::Expr::Nested(inner) => flatten(inner, out),
        other => out.push(other),
    }
}

/// The columns of `l`'s output that are `window_start` and `window_end` of a time
/// window aggregate below (through projections and filters).
fn window_bounds(l: &Logical) -> [Option<usize>; 2] {
    fn source(l: &Logical, c: usize) -> Option<usize> {
        match l {
            Logical::Aggregate { window, .. } if window.is_timed() && c < 2 => Some(c),
            Logical::Filter { input, .. } => source(input, c),
            Logical::Project { input, exprs, .. } => match exprs.get(c)? {
                Expr::Column(i, _) => source(input, *i),
                _ => None,
            },
            _ => None,
        }
    }
    let find = |b: usize| (0..l.schema().arity()).find(|&c| source(l, c) == Some(b));
    [find(0), find(1)]
}
