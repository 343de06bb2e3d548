//! The fuzzer's queries: a small AST, generated at random over a [`Dataset`]'s
//! relations and rendered twice, as Braid SQL and as the DuckDB batch SQL that means
//! the same (windows become arithmetic on the event time, HOP and CUMULATE a join with
//! a series of windows, SESSION window functions; Braid's documented semantics where
//! the two differ: BIGINT division truncates, `least`/`greatest` are NULL when an
//! argument is, `CAST(DOUBLE AS BIGINT)` truncates, `round`/`floor`/`ceil` give a
//! DOUBLE, `substring` counts positions before 1 as PostgreSQL does).

use super::data::{Dataset, Rng, Ty, MAX_BOUND};
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// How an expression is written.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Style {
    /// Braid: `a.k`.
    Braid,
    /// DuckDB over the flattened base relation: `a_k`.
    Flat,
    /// DuckDB inside the base relation's FROM (join conditions): `a.k`.
    Qual,
}

/// A scalar expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A column: relation alias (none inside a CTE's own query), name, type.
    Col(Option<&'static str>, &'static str, Ty),
    /// A BIGINT literal.
    Int(i64),
    /// A DOUBLE literal.
    Float(f64),
    /// A TEXT literal.
    Str(String),
    /// A BOOLEAN literal.
    Bool(bool),
    /// A typed NULL.
    Null(Ty),
    /// Unary minus.
    Neg(Box<Expr>),
    /// `a op b`: `+ - * / %` (numbers).
    Arith(&'static str, Box<Expr>, Box<Expr>),
    /// `a op b`: `= <> < <= > >=`.
    Cmp(&'static str, Box<Expr>, Box<Expr>),
    /// `a AND b`.
    And(Box<Expr>, Box<Expr>),
    /// `a OR b`.
    Or(Box<Expr>, Box<Expr>),
    /// `NOT a`.
    Not(Box<Expr>),
    /// `a IS [NOT] NULL`.
    IsNull(Box<Expr>, bool),
    /// `a BETWEEN lo AND hi`.
    Between(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `a IN (...)`.
    In(Box<Expr>, Vec<Expr>),
    /// `a LIKE 'pattern'`.
    Like(Box<Expr>, String),
    /// `CASE WHEN c THEN v ... ELSE e END`.
    Case(Vec<(Expr, Expr)>, Box<Expr>),
    /// `coalesce(...)`.
    Coalesce(Vec<Expr>),
    /// A function with the same name and meaning in both: `length`, `upper`, `lower`,
    /// `abs`, `trim`, `ltrim`, `rtrim`, `replace`, `concat`, `strpos`, `sqrt`.
    Func(&'static str, Ty, Vec<Expr>),
    /// `substring(s, start[, len])` with literal bounds.
    Substr(Box<Expr>, i64, Option<i64>),
    /// `least` (false) or `greatest` (true).
    Extreme(bool, Vec<Expr>),
    /// `a || b`.
    Concat(Box<Expr>, Box<Expr>),
    /// `CAST(a AS t)`.
    Cast(Box<Expr>, Ty),
    /// `floor`, `ceil` or `round` (a DOUBLE).
    Round(&'static str, Box<Expr>),
}

fn b(e: Expr) -> Box<Expr> {
    Box::new(e)
}

impl Expr {
    /// The expression's type.
    pub fn ty(&self) -> Ty {
        match self {
            Expr::Col(_, _, t) | Expr::Null(t) | Expr::Func(_, t, _) | Expr::Cast(_, t) => *t,
            Expr::Int(_) => Ty::Int,
            Expr::Float(_) | Expr::Round(..) => Ty::Float,
            Expr::Str(_) | Expr::Substr(..) | Expr::Concat(..) => Ty::Text,
            Expr::Bool(_)
            | Expr::Cmp(..)
            | Expr::And(..)
            | Expr::Or(..)
            | Expr::Not(_)
            | Expr::IsNull(..)
            | Expr::Between(..)
            | Expr::In(..)
            | Expr::Like(..) => Ty::Bool,
            Expr::Neg(a) => a.ty(),
            Expr::Arith(_, a, c) => {
                if a.ty() == Ty::Float || c.ty() == Ty::Float {
                    Ty::Float
                } else {
                    Ty::Int
                }
            }
            Expr::Case(_, e) => e.ty(),
            Expr::Coalesce(v) | Expr::Extreme(_, v) => v[0].ty(),
        }
    }

    /// The expression's direct subexpressions.
    pub fn children_mut(&mut self) -> Vec<&mut Expr> {
        match self {
            Expr::Col(..)
            | Expr::Int(_)
            | Expr::Float(_)
            | Expr::Str(_)
            | Expr::Bool(_)
            | Expr::Null(_) => vec![],
            Expr::Neg(a)
            | Expr::Not(a)
            | Expr::IsNull(a, _)
            | Expr::Like(a, _)
            | Expr::Substr(a, ..)
            | Expr::Cast(a, _)
            | Expr::Round(_, a) => vec![a],
            Expr::Arith(_, a, c)
            | Expr::Cmp(_, a, c)
            | Expr::And(a, c)
            | Expr::Or(a, c)
            | Expr::Concat(a, c) => vec![a, c],
            Expr::Between(a, l, h) => vec![a, l, h],
            Expr::In(a, v) => {
                let mut out: Vec<&mut Expr> = vec![a];
                out.extend(v.iter_mut());
                out
            }
            Expr::Case(w, e) => {
                let mut out: Vec<&mut Expr> = Vec::new();
                for (c, v) in w.iter_mut() {
                    out.push(c);
                    out.push(v);
                }
                out.push(e);
                out
            }
            Expr::Coalesce(v) | Expr::Func(_, _, v) | Expr::Extreme(_, v) => v.iter_mut().collect(),
        }
    }

    /// The expression's direct subexpressions.
    pub fn children(&self) -> Vec<&Expr> {
        // Read-only twin of `children_mut`, by position.
        (0..self.arity()).map(|i| self.child(i)).collect()
    }

    fn arity(&self) -> usize {
        match self {
            Expr::Col(..)
            | Expr::Int(_)
            | Expr::Float(_)
            | Expr::Str(_)
            | Expr::Bool(_)
            | Expr::Null(_) => 0,
            Expr::Neg(_)
            | Expr::Not(_)
            | Expr::IsNull(..)
            | Expr::Like(..)
            | Expr::Substr(..)
            | Expr::Cast(..)
            | Expr::Round(..) => 1,
            Expr::Arith(..) | Expr::Cmp(..) | Expr::And(..) | Expr::Or(..) | Expr::Concat(..) => 2,
            Expr::Between(..) => 3,
            Expr::In(_, v) => 1 + v.len(),
            Expr::Case(w, _) => 2 * w.len() + 1,
            Expr::Coalesce(v) | Expr::Func(_, _, v) | Expr::Extreme(_, v) => v.len(),
        }
    }

    fn child(&self, i: usize) -> &Expr {
        match self {
            Expr::Neg(a)
            | Expr::Not(a)
            | Expr::IsNull(a, _)
            | Expr::Like(a, _)
            | Expr::Substr(a, ..)
            | Expr::Cast(a, _)
            | Expr::Round(_, a) => a,
            Expr::Arith(_, a, c)
            | Expr::Cmp(_, a, c)
            | Expr::And(a, c)
            | Expr::Or(a, c)
            | Expr::Concat(a, c) => {
                if i == 0 {
                    a
                } else {
                    c
                }
            }
            Expr::Between(a, l, h) => [a, l, h][i],
            Expr::In(a, v) => {
                if i == 0 {
                    a
                } else {
                    &v[i - 1]
                }
            }
            Expr::Case(w, e) => {
                if i == 2 * w.len() {
                    e
                } else if i.is_multiple_of(2) {
                    &w[i / 2].0
                } else {
                    &w[i / 2].1
                }
            }
            Expr::Coalesce(v) | Expr::Func(_, _, v) | Expr::Extreme(_, v) => &v[i],
            _ => self,
        }
    }

    /// The names of the constructs the expression uses.
    pub fn constructs(&self, out: &mut BTreeSet<String>) {
        let name = match self {
            Expr::Arith(op, ..) => Some(format!("arith {op}")),
            Expr::Neg(_) => Some("arith neg".into()),
            Expr::Cmp(..) => Some("compare".into()),
            Expr::And(..) | Expr::Or(..) | Expr::Not(_) => Some("and/or/not".into()),
            Expr::IsNull(..) => Some("is null".into()),
            Expr::Between(..) => Some("between".into()),
            Expr::In(..) => Some("in list".into()),
            Expr::Like(..) => Some("like".into()),
            Expr::Case(..) => Some("case".into()),
            Expr::Coalesce(..) => Some("coalesce".into()),
            Expr::Func(f, ..) => Some(format!("fn {f}")),
            Expr::Substr(..) => Some("fn substring".into()),
            Expr::Extreme(g, _) => Some(if *g { "fn greatest" } else { "fn least" }.into()),
            Expr::Concat(..) => Some("||".into()),
            Expr::Cast(a, t) => Some(format!("cast {:?}->{:?}", a.ty(), t)),
            Expr::Round(f, _) => Some(format!("fn {f}")),
            Expr::Null(_) => Some("null literal".into()),
            _ => None,
        };
        if let Some(n) = name {
            out.insert(n);
        }
        for c in self.children() {
            c.constructs(out);
        }
    }

    /// The expression as `style` writes it.
    pub fn render(&self, s: Style) -> String {
        let duck = s != Style::Braid;
        match self {
            Expr::Col(rel, name, _) => match (rel, s) {
                (None, _) => name.to_string(),
                (Some(r), Style::Flat) => format!("{r}_{name}"),
                (Some(r), _) => format!("{r}.{name}"),
            },
            Expr::Int(i) => {
                if duck {
                    format!("CAST({i} AS BIGINT)")
                } else if *i < 0 {
                    format!("({i})")
                } else {
                    i.to_string()
                }
            }
            Expr::Float(x) => {
                if duck {
                    format!("CAST({x:?} AS DOUBLE)")
                } else if *x < 0.0 {
                    format!("({x:?})")
                } else {
                    format!("{x:?}")
                }
            }
            Expr::Str(v) => format!("'{}'", v.replace('\'', "''")),
            Expr::Bool(v) => v.to_string().to_uppercase(),
            Expr::Null(t) => {
                format!("CAST(NULL AS {})", if duck { t.duck() } else { t.braid() })
            }
            Expr::Neg(a) => format!("(- {})", a.render(s)),
            Expr::Arith(op, a, c) => {
                let op = if *op == "/" && duck && self.ty() == Ty::Int {
                    "//"
                } else {
                    op
                };
                format!("({} {op} {})", a.render(s), c.render(s))
            }
            Expr::Cmp(op, a, c) => format!("({} {op} {})", a.render(s), c.render(s)),
            Expr::And(a, c) => format!("({} AND {})", a.render(s), c.render(s)),
            Expr::Or(a, c) => format!("({} OR {})", a.render(s), c.render(s)),
            Expr::Not(a) => format!("(NOT {})", a.render(s)),
            Expr::IsNull(a, not) => format!(
                "({} IS {}NULL)",
                a.render(s),
                if *not { "NOT " } else { "" }
            ),
            Expr::Between(a, l, h) => format!(
                "({} BETWEEN {} AND {})",
                a.render(s),
                l.render(s),
                h.render(s)
            ),
            Expr::In(a, v) => format!(
                "({} IN ({}))",
                a.render(s),
                v.iter().map(|e| e.render(s)).collect::<Vec<_>>().join(", ")
            ),
            Expr::Like(a, p) => format!("({} LIKE '{}')", a.render(s), p.replace('\'', "''")),
            Expr::Case(w, e) => {
                let mut out = "CASE".to_string();
                for (c, v) in w {
                    let _ = write!(out, " WHEN {} THEN {}", c.render(s), v.render(s));
                }
                let _ = write!(out, " ELSE {} END", e.render(s));
                out
            }
            Expr::Coalesce(v) => format!("coalesce({})", list(v, s)),
            Expr::Func(f, _, v) => format!("{f}({})", list(v, s)),
            Expr::Substr(a, start, len) => {
                if !duck {
                    return match len {
                        Some(l) => format!("substring({}, {start}, {l})", a.render(s)),
                        None => format!("substring({}, {start})", a.render(s)),
                    };
                }
                // PostgreSQL's positions before 1 count (and hold nothing); DuckDB
                // counts a negative start from the end.
                let (st, ln) = if *start < 1 {
                    (1, len.map(|l| (l + start - 1).max(0)))
                } else {
                    (*start, *len)
                };
                match ln {
                    Some(l) => format!("substring({}, {st}, {l})", a.render(s)),
                    None => format!("substring({}, {st})", a.render(s)),
                }
            }
            Expr::Extreme(g, v) => {
                let f = if *g { "greatest" } else { "least" };
                if duck {
                    // Braid: NULL when an argument is (DuckDB skips NULLs).
                    let nulls: Vec<String> = v
                        .iter()
                        .map(|e| format!("{} IS NULL", e.render(s)))
                        .collect();
                    format!(
                        "(CASE WHEN {} THEN NULL ELSE {f}({}) END)",
                        nulls.join(" OR "),
                        list(v, s)
                    )
                } else {
                    format!("{f}({})", list(v, s))
                }
            }
            Expr::Concat(a, c) => format!("({} || {})", a.render(s), c.render(s)),
            Expr::Cast(a, t) => {
                if duck && a.ty() == Ty::Float && *t == Ty::Int {
                    // Braid truncates; DuckDB rounds.
                    format!("CAST(trunc({}) AS BIGINT)", a.render(s))
                } else {
                    let name = if duck { t.duck() } else { t.braid() };
                    format!("CAST({} AS {name})", a.render(s))
                }
            }
            Expr::Round(f, a) => {
                if duck {
                    format!("{f}(CAST({} AS DOUBLE))", a.render(s))
                } else {
                    format!("{f}({})", a.render(s))
                }
            }
        }
    }
}

fn list(v: &[Expr], s: Style) -> String {
    v.iter().map(|e| e.render(s)).collect::<Vec<_>>().join(", ")
}

/// A column in scope: its relation's alias (None inside a CTE's query), name, type and
/// whether it holds extreme values (never computed with).
#[derive(Clone, Debug)]
pub struct Scoped {
    /// The relation's alias.
    pub rel: Option<&'static str>,
    /// The column's name.
    pub name: &'static str,
    /// Its type.
    pub ty: Ty,
    /// Extreme values.
    pub extreme: bool,
}

const LIKES: [&str; 7] = ["a%", "%b%", "_b%", "%", "", "x_z", "%o W%"];
const STRS: [&str; 8] = ["abc", "", " x ", "a,b", "b", "ABC", "Zz", "say \"hi\""];

/// Generates expressions over a scope.
pub struct Gen<'a> {
    rng: &'a mut Rng,
    scope: &'a [Scoped],
}

impl Gen<'_> {
    fn cols(&self, ty: Ty, computable: bool) -> Vec<Expr> {
        self.scope
            .iter()
            .filter(|c| c.ty == ty && !(computable && c.extreme))
            .map(|c| Expr::Col(c.rel, c.name, c.ty))
            .collect()
    }

    fn col(&mut self, ty: Ty, computable: bool) -> Option<Expr> {
        let cols = self.cols(ty, computable);
        (!cols.is_empty()).then(|| self.rng.pick(&cols).clone())
    }

    fn lit(&mut self, ty: Ty) -> Expr {
        match ty {
            Ty::Int => Expr::Int(self.rng.range(-10, 10)),
            Ty::Float => Expr::Float(self.rng.range(-40, 40) as f64 / 4.0),
            Ty::Text => Expr::Str(self.rng.pick(&STRS).to_string()),
            Ty::Bool => Expr::Bool(self.rng.chance(0.5)),
        }
    }

    /// An expression of type `ty`, `depth` levels at most; `computable` keeps extreme
    /// columns out (they would overflow arithmetic).
    pub fn expr(&mut self, ty: Ty, depth: u32, computable: bool) -> Expr {
        if depth == 0 || self.rng.chance(0.3) {
            if self.rng.chance(0.8) {
                if let Some(c) = self.col(ty, computable) {
                    return c;
                }
            }
            if self.rng.chance(0.05) {
                return Expr::Null(ty);
            }
            return self.lit(ty);
        }
        let d = depth - 1;
        match ty {
            Ty::Int => match self.rng.below(12) {
                0 | 1 => {
                    let op = *self.rng.pick(&["+", "-", "*"]);
                    Expr::Arith(
                        op,
                        b(self.expr(Ty::Int, d, true)),
                        b(self.expr(Ty::Int, d, true)),
                    )
                }
                2 => {
                    let op = *self.rng.pick(&["/", "%"]);
                    let mut k = self.rng.range(-5, 5);
                    if k == 0 {
                        k = 3;
                    }
                    Expr::Arith(op, b(self.expr(Ty::Int, d, true)), b(Expr::Int(k)))
                }
                3 => Expr::Neg(b(self.expr(Ty::Int, d, true))),
                4 => Expr::Func("abs", Ty::Int, vec![self.expr(Ty::Int, d, true)]),
                5 => self.case(ty, d, computable),
                6 => Expr::Coalesce(vec![self.expr(Ty::Int, d, computable), self.lit(Ty::Int)]),
                7 => Expr::Func("length", Ty::Int, vec![self.expr(Ty::Text, d, true)]),
                8 => Expr::Cast(b(self.expr(Ty::Float, d, true)), Ty::Int),
                9 => Expr::Extreme(
                    self.rng.chance(0.5),
                    vec![
                        self.expr(Ty::Int, d, computable),
                        self.expr(Ty::Int, d, computable),
                    ],
                ),
                10 => Expr::Func(
                    "strpos",
                    Ty::Int,
                    vec![
                        self.expr(Ty::Text, d, true),
                        Expr::Str(self.rng.pick(&["b", "c", " "]).to_string()),
                    ],
                ),
                _ => self.col(Ty::Int, computable).unwrap_or(Expr::Int(1)),
            },
            Ty::Float => match self.rng.below(8) {
                0 | 1 => {
                    let op = *self.rng.pick(&["+", "-", "*"]);
                    Expr::Arith(op, b(self.expr(Ty::Float, d, true)), b(self.lit(Ty::Float)))
                }
                2 => Expr::Cast(b(self.expr(Ty::Int, d, true)), Ty::Float),
                3 => {
                    let f = *self.rng.pick(&["floor", "ceil", "round"]);
                    let t = *self.rng.pick(&[Ty::Int, Ty::Float]);
                    Expr::Round(f, b(self.expr(t, d, true)))
                }
                4 => Expr::Func("abs", Ty::Float, vec![self.expr(Ty::Float, d, true)]),
                5 => Expr::Arith("/", b(self.expr(Ty::Int, d, true)), b(Expr::Float(2.0))),
                6 => self.case(ty, d, computable),
                _ => Expr::Func(
                    "sqrt",
                    Ty::Float,
                    vec![Expr::Func(
                        "abs",
                        Ty::Float,
                        vec![self.expr(Ty::Float, d, true)],
                    )],
                ),
            },
            Ty::Text => match self.rng.below(12) {
                0 => Expr::Func(
                    self.rng.word(&["upper", "lower"]),
                    Ty::Text,
                    vec![self.expr(Ty::Text, d, true)],
                ),
                1 => {
                    let start = self.rng.range(-1, 4);
                    let len = self.rng.chance(0.7).then(|| self.rng.range(0, 4));
                    Expr::Substr(b(self.expr(Ty::Text, d, true)), start, len)
                }
                2 => Expr::Func(
                    self.rng.word(&["trim", "ltrim", "rtrim"]),
                    Ty::Text,
                    vec![self.expr(Ty::Text, d, true)],
                ),
                3 => {
                    let t = *self.rng.pick(&[Ty::Text, Ty::Int]);
                    let first = self.expr(Ty::Text, d, true);
                    Expr::Func("concat", Ty::Text, vec![first, self.expr(t, d, false)])
                }
                4 => Expr::Concat(
                    b(self.expr(Ty::Text, d, true)),
                    b(self.expr(Ty::Text, d, true)),
                ),
                5 => Expr::Func(
                    "replace",
                    Ty::Text,
                    vec![
                        self.expr(Ty::Text, d, true),
                        Expr::Str(self.rng.pick(&["a", "b", " ", "bc"]).to_string()),
                        Expr::Str(self.rng.pick(&["", "Q", "--"]).to_string()),
                    ],
                ),
                6 => self.case(ty, d, computable),
                7 => Expr::Coalesce(vec![self.expr(Ty::Text, d, computable), self.lit(Ty::Text)]),
                8 => Expr::Cast(b(self.expr(Ty::Int, d, false)), Ty::Text),
                9 => Expr::Extreme(
                    self.rng.chance(0.5),
                    vec![self.expr(Ty::Text, d, true), self.lit(Ty::Text)],
                ),
                _ => self
                    .col(Ty::Text, computable)
                    .unwrap_or_else(|| self.lit(Ty::Text)),
            },
            Ty::Bool => self.pred(d),
        }
    }

    fn case(&mut self, ty: Ty, d: u32, computable: bool) -> Expr {
        let n = self.rng.range(1, 2) as usize;
        let whens = (0..n)
            .map(|_| (self.pred(d), self.expr(ty, d, computable)))
            .collect();
        Expr::Case(whens, b(self.expr(ty, d, computable)))
    }

    /// A predicate, `depth` levels at most.
    pub fn pred(&mut self, depth: u32) -> Expr {
        let d = depth.saturating_sub(1);
        let op = *self.rng.pick(&["=", "<>", "<", "<=", ">", ">="]);
        match self.rng.below(11) {
            0..=2 => {
                let l = self.expr(Ty::Int, d, false);
                let r = if self.rng.chance(0.5) {
                    self.lit(Ty::Int)
                } else {
                    self.expr(Ty::Int, d, false)
                };
                Expr::Cmp(op, b(l), b(r))
            }
            3 => Expr::Cmp(
                op,
                b(self.expr(Ty::Text, d, true)),
                b(self.expr(Ty::Text, d, true)),
            ),
            4 => Expr::Cmp(op, b(self.expr(Ty::Float, d, true)), b(self.lit(Ty::Float))),
            5 => {
                let ty = *self.rng.pick(&[Ty::Int, Ty::Text, Ty::Float]);
                Expr::IsNull(b(self.expr(ty, d, false)), self.rng.chance(0.5))
            }
            6 if depth > 0 => {
                let (l, r) = (self.pred(d), self.pred(d));
                if self.rng.chance(0.5) {
                    Expr::And(b(l), b(r))
                } else {
                    Expr::Or(b(l), b(r))
                }
            }
            7 if depth > 0 => Expr::Not(b(self.pred(d))),
            8 => {
                let lo = self.rng.range(-10, 5);
                Expr::Between(
                    b(self.expr(Ty::Int, d, true)),
                    b(Expr::Int(lo)),
                    b(Expr::Int(lo + self.rng.range(0, 10))),
                )
            }
            9 => {
                let n = self.rng.range(1, 3);
                let items = (0..n).map(|_| self.lit(Ty::Int)).collect();
                Expr::In(b(self.expr(Ty::Int, d, false)), items)
            }
            _ => Expr::Like(
                b(self.expr(Ty::Text, d, true)),
                self.rng.pick(&LIKES).to_string(),
            ),
        }
    }
}

/// The relations a query reads.
#[derive(Clone, Debug, PartialEq)]
pub enum From {
    /// One stream, aliased `a`.
    Stream,
    /// An interval join of `a` (s1) and `b` (s2): `b.ts BETWEEN a.ts + lo AND a.ts + hi`.
    Join {
        /// INNER, LEFT, RIGHT or FULL.
        kind: &'static str,
        /// With `a.k = b.k`.
        keyed: bool,
        /// Lower bound.
        lo: i64,
        /// Upper bound.
        hi: i64,
    },
    /// A lookup of `a` (s1) in table `t` on `a.k = t.k` (or `a.s = t.name`).
    Lookup {
        /// LEFT JOIN.
        left: bool,
        /// On the text columns.
        on_text: bool,
        /// An extra condition on the table's columns.
        extra: Option<Expr>,
    },
}

/// A window of an aggregate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Window {
    /// TUMBLE(time, size).
    Tumble(i64),
    /// HOP(time, slide, size).
    Hop(i64, i64),
    /// CUMULATE(time, step, size).
    Cumulate(i64, i64),
    /// SESSION(time, gap).
    Session(i64),
}

/// An aggregate call.
#[derive(Clone, Debug, PartialEq)]
pub struct Agg {
    /// count, count_distinct, sum, avg, min, max; `count` without an argument is
    /// `count(*)`.
    pub func: &'static str,
    /// Its argument.
    pub arg: Option<Expr>,
    /// FILTER (WHERE ...).
    pub filter: Option<Expr>,
}

impl Agg {
    fn ty(&self) -> Ty {
        match (self.func, &self.arg) {
            ("count" | "count_distinct", _) => Ty::Int,
            ("avg", _) => Ty::Float,
            (_, Some(a)) => a.ty(),
            _ => Ty::Int,
        }
    }

    fn render(&self, s: Style) -> String {
        let arg = self.arg.as_ref().map(|a| a.render(s));
        let mut out = match (self.func, arg) {
            ("count", None) => "count(*)".to_string(),
            ("count_distinct", Some(a)) => format!("count(DISTINCT {a})"),
            (f, Some(a)) => format!("{f}({a})"),
            (f, None) => format!("{f}(*)"),
        };
        if let Some(f) = &self.filter {
            let _ = write!(out, " FILTER (WHERE {})", f.render(s));
        }
        out
    }
}

/// An item of an aggregate's SELECT list.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// window_start.
    Start,
    /// window_end.
    End,
    /// Group key `i`.
    Key(usize),
    /// An aggregate.
    Agg(Agg),
}

/// What a query computes over its rows.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    /// SELECT [DISTINCT] expressions.
    Project {
        /// DISTINCT.
        distinct: bool,
        /// The list.
        items: Vec<Expr>,
    },
    /// An aggregate, windowed or not.
    Agg {
        /// The window.
        window: Option<Window>,
        /// GROUP BY keys.
        keys: Vec<Expr>,
        /// The SELECT list.
        items: Vec<Item>,
        /// HAVING: aggregates compared with literals, ANDed.
        having: Vec<(Agg, &'static str, Expr)>,
        /// ORDER BY every column, window_end first (and DESC per column), LIMIT.
        order: Option<(Vec<bool>, Option<usize>)>,
    },
}

/// How the first stream is read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Wrap {
    /// Directly.
    None,
    /// Through a CTE `c` filtering it.
    Cte,
    /// Through a view filtering it.
    View,
}

/// One SELECT.
#[derive(Clone, Debug, PartialEq)]
pub struct Select {
    /// The stream read as `a` (`s1`, or `s2` for a single stream).
    pub first: &'static str,
    /// How `a` is read.
    pub wrap: Wrap,
    /// The CTE's or view's filter (over bare column names).
    pub wrap_filter: Option<Expr>,
    /// The relations.
    pub from: From,
    /// WHERE.
    pub filter: Option<Expr>,
    /// SELECT ... [GROUP BY ...].
    pub body: Body,
}

/// A query: one SELECT, or two joined by UNION ALL.
#[derive(Clone, Debug, PartialEq)]
pub struct Query {
    /// The first SELECT.
    pub main: Select,
    /// UNION ALL this (a projection of the other stream, the same types).
    pub union: Option<Select>,
}

/// The columns of a relation of the dataset, as `alias`.
fn scope_of(ds: &Dataset, rel: &str, alias: Option<&'static str>) -> Vec<Scoped> {
    let r = match rel {
        "s1" => &ds.s1,
        "s2" => &ds.s2,
        _ => &ds.t,
    };
    r.cols
        .iter()
        .map(|c| Scoped {
            rel: alias,
            name: c.name,
            ty: c.ty,
            extreme: c.extreme,
        })
        .collect()
}

impl Select {
    /// The columns its expressions may name.
    pub fn scope(&self, ds: &Dataset) -> Vec<Scoped> {
        let mut s = scope_of(ds, self.first, Some("a"));
        match &self.from {
            From::Stream => {}
            From::Join { .. } => s.extend(scope_of(ds, "s2", Some("b"))),
            From::Lookup { .. } => s.extend(scope_of(ds, "t", Some("t"))),
        }
        s
    }

    /// The event-time column windows use.
    fn time(&self) -> Expr {
        match self.from {
            From::Join { kind: "RIGHT", .. } => Expr::Col(Some("b"), "ts", Ty::Int),
            _ => Expr::Col(Some("a"), "ts", Ty::Int),
        }
    }

    /// The output columns' types.
    pub fn types(&self) -> Vec<Ty> {
        match &self.body {
            Body::Project { items, .. } => items.iter().map(Expr::ty).collect(),
            Body::Agg { keys, items, .. } => items
                .iter()
                .map(|i| match i {
                    Item::Start | Item::End => Ty::Int,
                    Item::Key(k) => keys[*k].ty(),
                    Item::Agg(a) => a.ty(),
                })
                .collect(),
        }
    }

    fn constructs(&self, out: &mut BTreeSet<String>) {
        match self.wrap {
            Wrap::None => {}
            Wrap::Cte => {
                out.insert("cte".into());
            }
            Wrap::View => {
                out.insert("view".into());
            }
        }
        match &self.from {
            From::Stream => {}
            From::Join { kind, keyed, .. } => {
                out.insert(format!(
                    "join {} {}",
                    kind.to_lowercase(),
                    if *keyed { "keyed" } else { "unkeyed" }
                ));
            }
            From::Lookup { left, on_text, .. } => {
                out.insert(format!(
                    "lookup{}{}",
                    if *left { " left" } else { "" },
                    if *on_text { " on text" } else { "" }
                ));
            }
        }
        let mut exprs: Vec<&Expr> = Vec::new();
        if let Some(f) = &self.filter {
            out.insert("where".into());
            exprs.push(f);
        }
        if let Some(f) = &self.wrap_filter {
            exprs.push(f);
        }
        if let From::Lookup { extra: Some(e), .. } = &self.from {
            exprs.push(e);
        }
        if let (
            From::Join { kind, .. },
            Body::Agg {
                window: Some(_), ..
            },
        ) = (&self.from, &self.body)
        {
            if *kind != "INNER" {
                out.insert("window over outer join".into());
            }
        }
        match &self.body {
            Body::Project { distinct, items } => {
                out.insert(
                    if *distinct {
                        "select distinct"
                    } else {
                        "project"
                    }
                    .into(),
                );
                if *distinct
                    && items
                        .iter()
                        .enumerate()
                        .any(|(i, e)| items[..i].contains(e))
                {
                    out.insert("select distinct repeated column".into());
                }
                exprs.extend(items);
            }
            Body::Agg {
                window,
                keys,
                items,
                having,
                order,
            } => {
                out.insert(
                    match window {
                        None => "aggregate unbounded",
                        Some(Window::Tumble(_)) => "window tumble",
                        Some(Window::Hop(..)) => "window hop",
                        Some(Window::Cumulate(..)) => "window cumulate",
                        Some(Window::Session(_)) => "window session",
                    }
                    .into(),
                );
                if keys.is_empty() {
                    out.insert("aggregate no keys".into());
                    if window.is_none() {
                        out.insert("global aggregate".into());
                    }
                }
                exprs.extend(keys);
                let mut aggs: Vec<&Agg> = items
                    .iter()
                    .filter_map(|i| match i {
                        Item::Agg(a) => Some(a),
                        _ => None,
                    })
                    .collect();
                if !having.is_empty() {
                    out.insert("having".into());
                }
                aggs.extend(having.iter().map(|h| &h.0));
                for a in aggs {
                    out.insert(format!(
                        "agg {}{}",
                        a.func,
                        if a.arg.as_ref().is_some_and(|e| e.ty() == Ty::Float) {
                            " double"
                        } else {
                            ""
                        }
                    ));
                    if a.filter.is_some() {
                        out.insert("agg filter".into());
                    }
                    exprs.extend(a.arg.iter());
                    exprs.extend(a.filter.iter());
                }
                match order {
                    Some((_, Some(_))) => {
                        out.insert("order by limit".into());
                    }
                    Some((_, None)) => {
                        out.insert("order by".into());
                    }
                    None => {}
                }
            }
        }
        for e in exprs {
            e.constructs(out);
        }
    }
}

impl Query {
    /// The names of the constructs the query uses (for counts and refusals).
    pub fn constructs(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        self.main.constructs(&mut out);
        if let Some(u) = &self.union {
            out.insert("union all".into());
            u.constructs(&mut out);
        }
        out
    }

    /// Whether the result's order is part of the answer.
    pub fn ordered(&self) -> bool {
        matches!(self.main.body, Body::Agg { order: Some(_), .. }) && self.union.is_none()
    }
}

/// A random query over `ds`.
pub fn generate(rng: &mut Rng, ds: &Dataset) -> Query {
    let main = select(rng, ds, None);
    let union = (matches!(
        main.body,
        Body::Project {
            distinct: false,
            ..
        }
    ) && main.from == From::Stream
        && rng.chance(0.25))
    .then(|| select(rng, ds, Some(main.types())));
    Query { main, union }
}

/// A SELECT; with `types`, a projection of one stream with those column types (the
/// second branch of a UNION ALL).
fn select(rng: &mut Rng, ds: &Dataset, types: Option<Vec<Ty>>) -> Select {
    let from = if types.is_some() {
        From::Stream
    } else {
        match rng.below(10) {
            0..=4 => From::Stream,
            5..=7 => {
                let lo = rng.range(-MAX_BOUND, 0);
                From::Join {
                    kind: rng.word(&["INNER", "INNER", "LEFT", "LEFT", "RIGHT", "FULL"]),
                    keyed: rng.chance(0.7),
                    lo,
                    hi: rng.range(lo.max(0), MAX_BOUND),
                }
            }
            _ => From::Lookup {
                left: rng.chance(0.4),
                on_text: rng.chance(0.3),
                extra: None,
            },
        }
    };
    let first = match (&from, &types) {
        (From::Stream, Some(_)) => "s2",
        (From::Stream, None) if rng.chance(0.3) => "s2",
        _ => "s1",
    };
    let wrap = if from != From::Stream || types.is_some() {
        Wrap::None
    } else {
        *rng.pick(&[Wrap::None, Wrap::None, Wrap::None, Wrap::Cte, Wrap::View])
    };
    let mut sel = Select {
        first,
        wrap,
        wrap_filter: None,
        from,
        filter: None,
        body: Body::Project {
            distinct: false,
            items: vec![],
        },
    };
    let scope = sel.scope(ds);
    if wrap != Wrap::None {
        let bare: Vec<Scoped> = scope
            .iter()
            .map(|c| Scoped {
                rel: None,
                ..c.clone()
            })
            .collect();
        let mut g = Gen {
            rng: &mut *rng,
            scope: &bare,
        };
        sel.wrap_filter = Some(g.pred(2));
    }
    let mut g = Gen {
        rng: &mut *rng,
        scope: &scope,
    };
    if let From::Lookup { extra, .. } = &mut sel.from {
        if g.rng.chance(0.3) {
            let w = Expr::Col(Some("t"), "w", Ty::Int);
            *extra = Some(Expr::Cmp(">", b(w), b(Expr::Int(g.rng.range(-10, 10)))));
        }
    }
    if g.rng.chance(0.6) {
        sel.filter = Some(g.pred(2));
    }
    if let Some(types) = types {
        sel.body = Body::Project {
            distinct: false,
            items: types.iter().map(|t| g.expr(*t, 2, false)).collect(),
        };
        return sel;
    }
    let any_ty = |g: &mut Gen| {
        *g.rng
            .pick(&[Ty::Int, Ty::Int, Ty::Text, Ty::Float, Ty::Bool])
    };
    if g.rng.chance(0.3) {
        let n = g.rng.range(1, 4);
        let items = (0..n)
            .map(|_| {
                let t = any_ty(&mut g);
                g.expr(t, 3, false)
            })
            .collect();
        sel.body = Body::Project {
            distinct: g.rng.chance(0.2),
            items,
        };
        return sel;
    }
    // An aggregate.
    let full = matches!(sel.from, From::Join { kind: "FULL", .. });
    let window = if g.rng.chance(0.2) || (full && g.rng.chance(0.9)) {
        None
    } else {
        Some(match g.rng.below(4) {
            0 => Window::Tumble(*g.rng.pick(&[3, 5, 10, 20])),
            1 => {
                let slide = *g.rng.pick(&[2, 3, 5]);
                let size = *g.rng.pick(&[slide, 2 * slide, 3 * slide, slide + 2]);
                Window::Hop(slide, size)
            }
            2 => {
                let step = *g.rng.pick(&[2, 3, 5]);
                Window::Cumulate(step, step * g.rng.range(1, 3))
            }
            _ => Window::Session(*g.rng.pick(&[2, 5, 10])),
        })
    };
    let mut keys: Vec<Expr> = (0..g.rng.range(0, 2))
        .map(|_| {
            if g.rng.chance(0.6) {
                let t = *g.rng.pick(&[Ty::Int, Ty::Int, Ty::Text]);
                g.col(t, false).unwrap_or(Expr::Int(1))
            } else {
                let t = any_ty(&mut g);
                g.expr(t, 2, false)
            }
        })
        .collect();
    // A key named twice is refused with a misleading message (a finding of its own,
    // reported once: `GROUP BY a.s, a.s` says "`s` is ambiguous: a.s or a.s").
    keys.dedup();
    let nkeys = keys.len();
    let mut items = Vec::new();
    if window.is_some() {
        if g.rng.chance(0.4) {
            items.push(Item::Start);
        }
        if g.rng.chance(0.8) {
            items.push(Item::End);
        }
    }
    for k in 0..nkeys {
        if g.rng.chance(0.85) {
            items.push(Item::Key(k));
        }
    }
    let naggs = g.rng.range(1, 3);
    for _ in 0..naggs {
        let a = agg(&mut g);
        items.push(Item::Agg(a));
    }
    // Shuffle.
    for i in (1..items.len()).rev() {
        let j = g.rng.below(i + 1);
        items.swap(i, j);
    }
    let mut having = Vec::new();
    if g.rng.chance(0.25) {
        let a = agg(&mut g);
        let lit = match a.ty() {
            Ty::Int | Ty::Float | Ty::Bool => Expr::Int(g.rng.range(-5, 5)),
            Ty::Text => Expr::Str(g.rng.pick(&STRS).to_string()),
        };
        let op = *g.rng.pick(&[">", ">=", "<", "<>"]);
        having.push((a, op, lit));
    }
    let order = (items.contains(&Item::End) && g.rng.chance(0.3)).then(|| {
        let desc = items
            .iter()
            .map(|i| *i != Item::End && g.rng.chance(0.3))
            .collect();
        (desc, g.rng.chance(0.6).then(|| g.rng.range(1, 8) as usize))
    });
    sel.body = Body::Agg {
        window,
        keys,
        items,
        having,
        order,
    };
    sel
}

fn agg(g: &mut Gen) -> Agg {
    let func = *g.rng.pick(&[
        "count",
        "count",
        "count_distinct",
        "sum",
        "sum",
        "avg",
        "min",
        "max",
    ]);
    let arg = match func {
        "count" if g.rng.chance(0.4) => None,
        "count" | "count_distinct" => {
            let t = *g.rng.pick(&[Ty::Int, Ty::Text, Ty::Float]);
            Some(g.expr(t, 2, false))
        }
        "sum" | "avg" => {
            let t = if g.rng.chance(0.8) {
                Ty::Int
            } else {
                Ty::Float
            };
            Some(g.expr(t, 2, true))
        }
        _ => {
            let t = *g.rng.pick(&[Ty::Int, Ty::Text, Ty::Float]);
            Some(g.expr(t, 2, false))
        }
    };
    let filter = g.rng.chance(0.2).then(|| g.pred(1));
    Agg { func, arg, filter }
}

/// The Braid script of a query: statements to compile first (a view), and the query.
pub struct BraidSql {
    /// `CREATE OR REPLACE VIEW ...`, when the query reads one.
    pub pre: Option<String>,
    /// The query.
    pub sql: String,
}

/// The stream a query reads: a window over a join reads the same streams as any query
/// (the join holds back the windows above it by its bound, so no pair is late for them;
/// `s1w` and `s2w`, declared with a wider lateness, are left for hand-written checks).
fn stream_name(_sel: &Select, base: &str) -> String {
    base.to_string()
}

fn braid_from(sel: &Select) -> String {
    let first = match sel.wrap {
        Wrap::None => format!("{} a", stream_name(sel, sel.first)),
        Wrap::Cte => "c a".into(),
        Wrap::View => "fuzz_view a".into(),
    };
    match &sel.from {
        From::Stream => first,
        From::Join {
            kind,
            keyed,
            lo,
            hi,
        } => {
            let key = if *keyed { "a.k = b.k AND " } else { "" };
            format!(
                "{first} {kind} JOIN {} b ON {key}b.ts BETWEEN a.ts {} AND a.ts {}",
                stream_name(sel, "s2"),
                offset(*lo),
                offset(*hi)
            )
        }
        From::Lookup {
            left,
            on_text,
            extra,
        } => lookup_on(&first, *left, *on_text, extra, Style::Braid),
    }
}

fn lookup_on(first: &str, left: bool, on_text: bool, extra: &Option<Expr>, s: Style) -> String {
    let on = if on_text { "a.s = t.name" } else { "a.k = t.k" };
    let extra = extra
        .as_ref()
        .map(|e| format!(" AND {}", e.render(s)))
        .unwrap_or_default();
    format!(
        "{first} {}JOIN t t ON {on}{extra}",
        if left { "LEFT " } else { "" }
    )
}

fn offset(k: i64) -> String {
    if k < 0 {
        format!("- {}", -k)
    } else {
        format!("+ {k}")
    }
}

fn window_braid(w: Window, time: &str) -> String {
    match w {
        Window::Tumble(n) => format!("TUMBLE({time}, {n})"),
        Window::Hop(slide, size) => format!("HOP({time}, {slide}, {size})"),
        Window::Cumulate(step, size) => format!("CUMULATE({time}, {step}, {size})"),
        Window::Session(gap) => format!("SESSION({time}, {gap})"),
    }
}

fn select_braid(sel: &Select) -> String {
    let mut out = String::from("SELECT ");
    let from = braid_from(sel);
    let filter = sel
        .filter
        .as_ref()
        .map(|f| format!(" WHERE {}", f.render(Style::Braid)))
        .unwrap_or_default();
    match &sel.body {
        Body::Project { distinct, items } => {
            if *distinct {
                out.push_str("DISTINCT ");
            }
            out.push_str(&aliased(items.iter().map(|e| e.render(Style::Braid))));
            let _ = write!(out, " FROM {from}{filter}");
        }
        Body::Agg {
            window,
            keys,
            items,
            having,
            order,
        } => {
            let cols = items.iter().map(|i| match i {
                Item::Start => "window_start".to_string(),
                Item::End => "window_end".to_string(),
                Item::Key(k) => key_braid(&keys[*k]),
                Item::Agg(a) => a.render(Style::Braid),
            });
            out.push_str(&aliased(cols));
            let _ = write!(out, " FROM {from}{filter}");
            let mut group: Vec<String> = Vec::new();
            if let Some(w) = window {
                group.push(window_braid(*w, &sel.time().render(Style::Braid)));
            }
            group.extend(keys.iter().map(key_braid));
            if !group.is_empty() {
                let _ = write!(out, " GROUP BY {}", group.join(", "));
            }
            if !having.is_empty() {
                let h: Vec<String> = having
                    .iter()
                    .map(|(a, op, l)| {
                        format!("{} {op} {}", a.render(Style::Braid), l.render(Style::Braid))
                    })
                    .collect();
                let _ = write!(out, " HAVING {}", h.join(" AND "));
            }
            if let Some((desc, limit)) = order {
                let _ = write!(out, " ORDER BY {}", order_list(items, desc, false));
                if let Some(n) = limit {
                    let _ = write!(out, " LIMIT {n}");
                }
            }
        }
    }
    out
}

/// A GROUP BY key as Braid SQL: a bare integer would be a position (`GROUP BY 1`), so
/// a literal key is cast.
fn key_braid(k: &Expr) -> String {
    match k {
        Expr::Int(i) => format!("CAST({i} AS BIGINT)"),
        _ => k.render(Style::Braid),
    }
}

/// ORDER BY window_end first, then every other column by position.
fn order_list(items: &[Item], desc: &[bool], duck: bool) -> String {
    let end = items.iter().position(|i| *i == Item::End).unwrap_or(0);
    let mut cols = vec![format!(
        "{}{}",
        end + 1,
        if duck { " ASC NULLS FIRST" } else { "" }
    )];
    for (i, d) in desc.iter().enumerate() {
        if i == end {
            continue;
        }
        let dir = match (d, duck) {
            (true, true) => " DESC NULLS LAST",
            (true, false) => " DESC",
            (false, true) => " ASC NULLS FIRST",
            (false, false) => "",
        };
        cols.push(format!("{}{dir}", i + 1));
    }
    cols.join(", ")
}

fn aliased(cols: impl Iterator<Item = String>) -> String {
    cols.enumerate()
        .map(|(i, c)| format!("{c} AS c{i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn wrap_query(sel: &Select, s: Style) -> Option<String> {
    let f = sel.wrap_filter.as_ref()?;
    let name = if s == Style::Braid {
        stream_name(sel, sel.first)
    } else {
        sel.first.to_string()
    };
    Some(format!(
        "SELECT * FROM {name} WHERE {}",
        f.render(if s == Style::Braid {
            Style::Braid
        } else {
            Style::Qual
        })
    ))
}

/// The query as Braid SQL.
pub fn braid(q: &Query) -> BraidSql {
    let mut pre = None;
    let mut sql = String::new();
    match q.main.wrap {
        Wrap::None => {}
        Wrap::Cte => {
            if let Some(w) = wrap_query(&q.main, Style::Braid) {
                let _ = write!(sql, "WITH c AS ({w}) ");
            }
        }
        Wrap::View => {
            pre = wrap_query(&q.main, Style::Braid)
                .map(|w| format!("CREATE OR REPLACE VIEW fuzz_view AS {w};"));
        }
    }
    sql.push_str(&select_braid(&q.main));
    if let Some(u) = &q.union {
        let _ = write!(sql, " UNION ALL {}", select_braid(u));
    }
    BraidSql { pre, sql }
}

/// The DuckDB base relation of a SELECT: every column of its relations, flattened to
/// `alias_name`.
fn duck_base(sel: &Select, ds: &Dataset) -> String {
    let cols: Vec<String> = sel
        .scope(ds)
        .iter()
        .map(|c| {
            let r = c.rel.unwrap_or("a");
            format!("{r}.{} AS {r}_{}", c.name, c.name)
        })
        .collect();
    let first = match sel.wrap {
        Wrap::None => format!("{} a", sel.first),
        Wrap::Cte | Wrap::View => "c a".into(),
    };
    let from = match &sel.from {
        From::Stream => first,
        From::Join {
            kind,
            keyed,
            lo,
            hi,
        } => {
            let key = if *keyed { "a.k = b.k AND " } else { "" };
            format!(
                "{first} {kind} JOIN s2 b ON {key}b.ts BETWEEN a.ts {} AND a.ts {}",
                offset(*lo),
                offset(*hi)
            )
        }
        From::Lookup {
            left,
            on_text,
            extra,
        } => lookup_on(&first, *left, *on_text, extra, Style::Qual),
    };
    format!("SELECT {} FROM {from}", cols.join(", "))
}

/// The window of a row at time `t` (flat), as DuckDB SQL: extra FROM, window start,
/// window end, condition.
fn duck_window(w: Window, t: &str) -> (String, String, String, Option<String>) {
    let floor = |n: i64| format!("({t} - ((({t} % {n}) + {n}) % {n}))");
    match w {
        Window::Tumble(n) => (
            String::new(),
            floor(n),
            format!("({} + {n})", floor(n)),
            None,
        ),
        Window::Hop(slide, size) => {
            let count = (size + slide - 1) / slide;
            let start = format!("({} - __h.i * {slide})", floor(slide));
            (
                format!(" CROSS JOIN (SELECT range AS i FROM range(0, {count})) __h"),
                start.clone(),
                format!("({start} + {size})"),
                Some(format!("{start} + {size} > {t}")),
            )
        }
        Window::Cumulate(step, size) => {
            let end = format!("({} + __h.i * {step})", floor(size));
            (
                format!(
                    " CROSS JOIN (SELECT range AS i FROM range(1, {})) __h",
                    size / step + 1
                ),
                floor(size),
                end.clone(),
                Some(format!("{end} > {t}")),
            )
        }
        Window::Session(_) => (String::new(), String::new(), String::new(), None),
    }
}

fn select_duck(sel: &Select, ds: &Dataset, base: &str) -> String {
    let filter = sel.filter.as_ref().map(|f| f.render(Style::Flat));
    match &sel.body {
        Body::Project { distinct, items } => format!(
            "SELECT {}{} FROM {base}{}",
            if *distinct { "DISTINCT " } else { "" },
            aliased(items.iter().map(|e| e.render(Style::Flat))),
            filter.map(|f| format!(" WHERE {f}")).unwrap_or_default()
        ),
        Body::Agg {
            window: Some(Window::Session(gap)),
            keys,
            items,
            having,
            order,
        } => {
            let t = sel.time().render(Style::Flat);
            let _ = ds;
            let ks: Vec<String> = (0..keys.len()).map(|i| format!("__k{i}")).collect();
            let keyed: Vec<String> = keys
                .iter()
                .enumerate()
                .map(|(i, k)| format!(", {} AS __k{i}", k.render(Style::Flat)))
                .collect();
            let part = if ks.is_empty() {
                String::new()
            } else {
                format!("PARTITION BY {} ", ks.join(", "))
            };
            let inner = format!(
                "SELECT *, sum(__new) OVER ({part}ORDER BY __t) AS __sid FROM (\
                 SELECT *, CASE WHEN __t - lag(__t) OVER ({part}ORDER BY __t) < {gap} THEN 0 ELSE 1 END AS __new FROM (\
                 SELECT *{}, {t} AS __t FROM {base}{}) __k) __m",
                keyed.concat(),
                filter.map(|f| format!(" WHERE {f}")).unwrap_or_default()
            );
            let cols = items.iter().map(|i| match i {
                Item::Start => "min(__t)".to_string(),
                Item::End => format!("(max(__t) + {gap})"),
                Item::Key(k) => format!("__k{k}"),
                Item::Agg(a) => a.render(Style::Flat),
            });
            let mut out = format!("SELECT {} FROM ({inner}) __s", aliased(cols));
            let mut group = ks.clone();
            group.push("__sid".into());
            let _ = write!(out, " GROUP BY {}", group.join(", "));
            duck_tail(&mut out, having, order, items);
            out
        }
        Body::Agg {
            window,
            keys,
            items,
            having,
            order,
        } => {
            let t = sel.time().render(Style::Flat);
            let (extra, ws, we, cond) = match window {
                Some(w) => duck_window(*w, &t),
                None => Default::default(),
            };
            let cols = items.iter().map(|i| match i {
                Item::Start => ws.clone(),
                Item::End => we.clone(),
                Item::Key(k) => keys[*k].render(Style::Flat),
                Item::Agg(a) => a.render(Style::Flat),
            });
            let mut out = format!("SELECT {} FROM {base}{extra}", aliased(cols));
            let conds: Vec<String> = filter.into_iter().chain(cond).collect();
            if !conds.is_empty() {
                let _ = write!(out, " WHERE {}", conds.join(" AND "));
            }
            let mut group: Vec<String> = Vec::new();
            if window.is_some() {
                group.push(ws.clone());
                group.push(we.clone());
            }
            group.extend(keys.iter().map(|k| k.render(Style::Flat)));
            if !group.is_empty() {
                let _ = write!(out, " GROUP BY {}", group.join(", "));
            }
            duck_tail(&mut out, having, order, items);
            out
        }
    }
}

type Having = [(Agg, &'static str, Expr)];

fn duck_tail(
    out: &mut String,
    having: &Having,
    order: &Option<(Vec<bool>, Option<usize>)>,
    items: &[Item],
) {
    if !having.is_empty() {
        let h: Vec<String> = having
            .iter()
            .map(|(a, op, l)| format!("{} {op} {}", a.render(Style::Flat), l.render(Style::Flat)))
            .collect();
        let _ = write!(out, " HAVING {}", h.join(" AND "));
    }
    if let Some((desc, limit)) = order {
        let _ = write!(out, " ORDER BY {}", order_list(items, desc, true));
        if let Some(n) = limit {
            let _ = write!(out, " LIMIT {n}");
        }
    }
}

/// The query as DuckDB SQL over tables `s1`, `s2` and `t`.
pub fn duck(q: &Query, ds: &Dataset) -> String {
    let mut ctes = Vec::new();
    if let Some(w) = wrap_query(&q.main, Style::Qual) {
        ctes.push(format!("c AS ({w})"));
    }
    ctes.push(format!("__base1 AS ({})", duck_base(&q.main, ds)));
    let mut body = select_duck(&q.main, ds, "__base1");
    if let Some(u) = &q.union {
        ctes.push(format!("__base2 AS ({})", duck_base(u, ds)));
        body = format!("({body}) UNION ALL ({})", select_duck(u, ds, "__base2"));
    }
    format!("WITH {} {body}", ctes.join(", "))
}

/// Simpler queries than `q` (for shrinking): each drops or simplifies one part.
pub fn simplifications(q: &Query, ds: &Dataset) -> Vec<Query> {
    let mut out = Vec::new();
    if let Some(u) = &q.union {
        out.push(Query {
            main: q.main.clone(),
            union: None,
        });
        out.push(Query {
            main: u.clone(),
            union: None,
        });
    }
    for (i, sel) in std::iter::once(&q.main).chain(q.union.iter()).enumerate() {
        for s in simpler_selects(sel, ds, q.union.is_some()) {
            let mut c = q.clone();
            if i == 0 {
                c.main = s;
            } else {
                c.union = Some(s);
            }
            out.push(c);
        }
    }
    out
}

fn simpler_selects(sel: &Select, ds: &Dataset, in_union: bool) -> Vec<Select> {
    let mut out = Vec::new();
    let with = |f: &dyn Fn(&mut Select)| {
        let mut c = sel.clone();
        f(&mut c);
        c
    };
    if sel.wrap != Wrap::None {
        out.push(with(&|c| {
            c.wrap = Wrap::None;
            c.wrap_filter = None;
        }));
    }
    if sel.filter.is_some() {
        out.push(with(&|c| c.filter = None));
    }
    if sel.from != From::Stream {
        // Without the join (fails differently, and is not taken, if the query names
        // the other side's columns).
        out.push(with(&|c| c.from = From::Stream));
    }
    match &sel.from {
        From::Join {
            kind,
            keyed,
            lo,
            hi,
        } => {
            if *kind != "INNER" {
                out.push(with(&|c| {
                    if let From::Join { kind, .. } = &mut c.from {
                        *kind = "INNER";
                    }
                }));
            }
            if *keyed {
                out.push(with(&|c| {
                    if let From::Join { keyed, .. } = &mut c.from {
                        *keyed = false;
                    }
                }));
            }
            if (*lo, *hi) != (0, 0) {
                out.push(with(&|c| {
                    if let From::Join { lo, hi, .. } = &mut c.from {
                        (*lo, *hi) = (0, 0);
                    }
                }));
            }
        }
        From::Lookup { left, extra, .. } => {
            if *left {
                out.push(with(&|c| {
                    if let From::Lookup { left, .. } = &mut c.from {
                        *left = false;
                    }
                }));
            }
            if extra.is_some() {
                out.push(with(&|c| {
                    if let From::Lookup { extra, .. } = &mut c.from {
                        *extra = None;
                    }
                }));
            }
        }
        From::Stream => {}
    }
    match &sel.body {
        Body::Project { distinct, items } => {
            if *distinct {
                out.push(with(&|c| {
                    if let Body::Project { distinct, .. } = &mut c.body {
                        *distinct = false;
                    }
                }));
            }
            if items.len() > 1 && !in_union {
                for i in 0..items.len() {
                    out.push(with(&|c| {
                        if let Body::Project { items, .. } = &mut c.body {
                            items.remove(i);
                        }
                    }));
                }
            }
        }
        Body::Agg {
            window,
            keys,
            items,
            having,
            order,
        } => {
            if order.is_some() {
                out.push(with(&|c| {
                    if let Body::Agg { order, .. } = &mut c.body {
                        *order = None;
                    }
                }));
            }
            if !having.is_empty() {
                out.push(with(&|c| {
                    if let Body::Agg { having, .. } = &mut c.body {
                        having.clear();
                    }
                }));
            }
            if let Some(w) = window {
                if !matches!(w, Window::Tumble(_)) {
                    out.push(with(&|c| {
                        if let Body::Agg { window, .. } = &mut c.body {
                            *window = Some(Window::Tumble(10));
                        }
                    }));
                }
                if order.is_none() {
                    out.push(with(&|c| {
                        if let Body::Agg { window, items, .. } = &mut c.body {
                            *window = None;
                            items.retain(|i| !matches!(i, Item::Start | Item::End));
                        }
                    }));
                }
            }
            for k in 0..keys.len() {
                out.push(with(&|c| {
                    if let Body::Agg { keys, items, .. } = &mut c.body {
                        keys.remove(k);
                        items.retain(|i| *i != Item::Key(k));
                        for i in items.iter_mut() {
                            if let Item::Key(j) = i {
                                if *j > k {
                                    *j -= 1;
                                }
                            }
                        }
                    }
                }));
            }
            if items.len() > 1 && order.is_none() {
                for i in 0..items.len() {
                    out.push(with(&|c| {
                        if let Body::Agg { items, .. } = &mut c.body {
                            items.remove(i);
                        }
                    }));
                }
            }
            for (i, it) in items.iter().enumerate() {
                if let Item::Agg(a) = it {
                    if a.filter.is_some() {
                        out.push(with(&|c| {
                            if let Body::Agg { items, .. } = &mut c.body {
                                if let Item::Agg(a) = &mut items[i] {
                                    a.filter = None;
                                }
                            }
                        }));
                    }
                    if a.func != "count" || a.arg.is_some() {
                        out.push(with(&|c| {
                            if let Body::Agg { items, .. } = &mut c.body {
                                items[i] = Item::Agg(Agg {
                                    func: "count",
                                    arg: None,
                                    filter: None,
                                });
                            }
                        }));
                    }
                }
            }
        }
    }
    // Every expression slot, replaced by something simpler of its type.
    let scope = sel.scope(ds);
    for i in 0..count_slots(sel) {
        let Some(current) = slot(&mut sel.clone(), i).cloned() else {
            continue;
        };
        for simpler in simpler_exprs(&current, &scope) {
            let mut c = sel.clone();
            if let Some(e) = slot(&mut c, i) {
                *e = simpler;
            }
            out.push(c);
        }
    }
    out
}

/// The root expressions of a SELECT (each slot's subexpressions are reached by
/// [`nth`]).
fn roots(sel: &mut Select) -> Vec<&mut Expr> {
    let mut roots: Vec<&mut Expr> = Vec::new();
    if let Some(f) = &mut sel.filter {
        roots.push(f);
    }
    if let Some(f) = &mut sel.wrap_filter {
        roots.push(f);
    }
    match &mut sel.body {
        Body::Project { items, .. } => roots.extend(items.iter_mut()),
        Body::Agg {
            keys,
            items,
            having,
            ..
        } => {
            roots.extend(keys.iter_mut());
            for it in items.iter_mut() {
                if let Item::Agg(a) = it {
                    roots.extend(a.arg.iter_mut());
                    roots.extend(a.filter.iter_mut());
                }
            }
            for (a, _, _) in having.iter_mut() {
                roots.extend(a.arg.iter_mut());
                roots.extend(a.filter.iter_mut());
            }
        }
    }
    roots
}

/// How many expression nodes a SELECT has.
fn count_slots(sel: &Select) -> usize {
    fn count(e: &Expr) -> usize {
        1 + e.children().into_iter().map(count).sum::<usize>()
    }
    roots(&mut sel.clone()).into_iter().map(|e| count(e)).sum()
}

/// The `n`th expression node of a SELECT, in preorder.
fn slot(sel: &mut Select, mut n: usize) -> Option<&mut Expr> {
    for r in roots(sel) {
        match nth(r, &mut n) {
            Some(e) => return Some(e),
            None => continue,
        }
    }
    None
}

fn nth<'a>(e: &'a mut Expr, n: &mut usize) -> Option<&'a mut Expr> {
    if *n == 0 {
        return Some(e);
    }
    *n -= 1;
    for c in e.children_mut() {
        if let Some(found) = nth(c, n) {
            return Some(found);
        }
    }
    None
}

fn simpler_exprs(e: &Expr, scope: &[Scoped]) -> Vec<Expr> {
    let ty = e.ty();
    let mut out: Vec<Expr> = Vec::new();
    if matches!(e, Expr::Col(..))
        || matches!(
            e,
            Expr::Int(_) | Expr::Str(_) | Expr::Float(_) | Expr::Bool(_) | Expr::Null(_)
        )
    {
        return out;
    }
    for c in e.children() {
        if c.ty() == ty {
            out.push(c.clone());
        }
    }
    if let Some(c) = scope.iter().find(|c| c.ty == ty && c.rel == scope_rel(e)) {
        out.push(Expr::Col(c.rel, c.name, c.ty));
    }
    out.push(match ty {
        Ty::Int => Expr::Int(1),
        Ty::Float => Expr::Float(1.5),
        Ty::Text => Expr::Str("abc".into()),
        Ty::Bool => Expr::Bool(true),
    });
    out
}

/// The relation alias of the first column an expression names.
fn scope_rel(e: &Expr) -> Option<&'static str> {
    match e {
        Expr::Col(r, ..) => *r,
        _ => e.children().into_iter().find_map(|c| match c {
            Expr::Col(r, ..) => Some(*r),
            _ => None,
        })?,
    }
}
