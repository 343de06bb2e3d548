//! The logical plan of a continuous query: what the query computes, before Braid
//! decides how to partition it.

use braid_plan::expr::Expr;
use braid_plan::plan::SortKey;
use braid_plan::types::{DataType, Field, Schema};
use std::fmt;
use std::sync::Arc;

use crate::catalog::TableDef;

/// A window of a grouped aggregate.
#[derive(Clone, Debug, PartialEq)]
pub enum WindowSpec {
    /// `TUMBLE(time, size)`: windows `[k*size, (k+1)*size)`.
    Tumble {
        /// Width in event-time units.
        size: i64,
    },
    /// `HOP(time, slide, size)` (Flink's order): windows `[k*slide, k*slide + size)`,
    /// `slide <= size`.
    Hop {
        /// Width.
        size: i64,
        /// Distance between window starts.
        slide: i64,
    },
    /// `CUMULATE(time, step, size)` (Flink's window table function): windows
    /// `[s, s + k*step)` for `k = 1..=size/step`, `s` a multiple of `size`.
    Cumulate {
        /// The growth of the windows.
        step: i64,
        /// The largest window (a multiple of `step`).
        size: i64,
    },
    /// `SESSION(time, gap)`: per key, rows closer than `gap` share a window.
    Session {
        /// Largest gap inside a session.
        gap: i64,
    },
    /// `ROWS(n)`: per key, tumbling windows of `n` rows.
    Count {
        /// Rows per window.
        rows: u64,
    },
    /// No window: one result per key when the input ends.
    Unbounded,
}

impl WindowSpec {
    /// Whether the window is defined by event time.
    pub fn is_timed(&self) -> bool {
        matches!(
            self,
            WindowSpec::Tumble { .. }
                | WindowSpec::Hop { .. }
                | WindowSpec::Cumulate { .. }
                | WindowSpec::Session { .. }
        )
    }
}

impl fmt::Display for WindowSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WindowSpec::Tumble { size } => write!(f, "TUMBLE({size})"),
            WindowSpec::Hop { size, slide } => write!(f, "HOP(slide {slide}, size {size})"),
            WindowSpec::Cumulate { step, size } => {
                write!(f, "CUMULATE(step {step}, size {size})")
            }
            WindowSpec::Session { gap } => write!(f, "SESSION({gap})"),
            WindowSpec::Count { rows } => write!(f, "ROWS({rows})"),
            WindowSpec::Unbounded => f.write_str("UNBOUNDED"),
        }
    }
}

/// An aggregate function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggFunc {
    /// `count(*)`.
    CountStar,
    /// `count(x)`: non-null values.
    Count,
    /// `count(DISTINCT x)`.
    CountDistinct,
    /// `sum(x)`.
    Sum,
    /// `avg(x)`.
    Avg,
    /// `min(x)`.
    Min,
    /// `max(x)`.
    Max,
}

impl AggFunc {
    /// The aggregate function called `name` (any case), if it is one; `count` is
    /// [`AggFunc::Count`] whatever its argument.
    pub fn by_name(name: &str) -> Option<AggFunc> {
        Some(match name.to_ascii_lowercase().as_str() {
            "count" => AggFunc::Count,
            "sum" => AggFunc::Sum,
            "avg" => AggFunc::Avg,
            "min" => AggFunc::Min,
            "max" => AggFunc::Max,
            _ => return None,
        })
    }

    /// The function's SQL name.
    pub fn name(&self) -> &'static str {
        match self {
            AggFunc::CountStar | AggFunc::Count | AggFunc::CountDistinct => "count",
            AggFunc::Sum => "sum",
            AggFunc::Avg => "avg",
            AggFunc::Min => "min",
            AggFunc::Max => "max",
        }
    }
}

/// Which part of an aggregation a [`Logical::Aggregate`] does. A two-phase aggregate
/// (optimizer rule `two_phase`) is a partial aggregate in every partition of one stage,
/// wherever its rows are, and a final one that combines the partials of each group in
/// the next stage, hashed by window and group keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggPhase {
    /// The whole aggregation: each group's rows all come to one partition.
    Whole,
    /// Rows to partial accumulators, emitted per window, group and partition as
    /// `window_start, window_end, keys..., partials...` (per aggregate: `count` one
    /// int64; an int64 `sum` its 128-bit sum as two int64 halves, high then low, null
    /// when it summed no value; an int64 `avg` those two and the count; `min` and
    /// `max` the value). Exact: combining partials gives what one aggregate would.
    Partial,
    /// The partial rows of each window and group combined, then emitted as the whole
    /// aggregate would. `keys` are the partial rows' key columns, `aggs` the whole
    /// aggregate's (for their functions and result types).
    Final,
}

/// One aggregate of an [`Logical::Aggregate`].
#[derive(Clone, Debug, PartialEq)]
pub struct AggCall {
    /// Function.
    pub func: AggFunc,
    /// Argument (None for `count(*)`).
    pub arg: Option<Expr>,
    /// `FILTER (WHERE condition)`: only rows where the condition is true count.
    pub filter: Option<Expr>,
    /// Result type.
    pub ty: DataType,
}

impl fmt::Display for AggCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.func, &self.arg) {
            (AggFunc::CountDistinct, Some(a)) => write!(f, "count(DISTINCT {a})")?,
            (func, Some(a)) => write!(f, "{}({a})", func.name())?,
            (func, None) => write!(f, "{}(*)", func.name())?,
        }
        match &self.filter {
            Some(c) => write!(f, " FILTER (WHERE {c})"),
            None => Ok(()),
        }
    }
}

/// How a stream-stream join bounds the rows it keeps.
#[derive(Clone, Debug, PartialEq)]
pub enum JoinWindow {
    /// Rows match when `right.time - left.time` lies in `lo..=hi`.
    Interval {
        /// Lower bound of the time difference.
        lo: i64,
        /// Upper bound.
        hi: i64,
    },
    /// `LAST(left, n) JOIN LAST(right, m)`: each new row meets the other side's last
    /// rows (sliding count windows).
    Count {
        /// Rows kept of the left side.
        left: u64,
        /// Rows kept of the right side.
        right: u64,
    },
}

/// Which rows of a join come out without a partner: none (inner), those of the left
/// input, of the right input, or of both, with nulls for the other side's columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JoinKind {
    /// `[INNER] JOIN`: only joined rows.
    Inner,
    /// `LEFT [OUTER] JOIN`.
    Left,
    /// `RIGHT [OUTER] JOIN`.
    Right,
    /// `FULL [OUTER] JOIN`.
    Full,
}

impl JoinKind {
    /// Whether a row of input `side` (0 left, 1 right) without a partner comes out.
    pub fn keeps(self, side: usize) -> bool {
        match self {
            JoinKind::Inner => false,
            JoinKind::Left => side == 0,
            JoinKind::Right => side == 1,
            JoinKind::Full => true,
        }
    }

    /// How EXPLAIN names it before the join (nothing for an inner join).
    fn label(self) -> &'static str {
        match self {
            JoinKind::Inner => "",
            JoinKind::Left => " (left outer)",
            JoinKind::Right => " (right outer)",
            JoinKind::Full => " (full outer)",
        }
    }
}

/// A logical operator. Every node knows its output schema; `event_time` of the schema
/// is the column windows and joins use.
#[derive(Clone, Debug)]
pub enum Logical {
    /// Rows of a declared stream (`input` numbers the query's streams from 0).
    Scan {
        /// Stream name.
        stream: String,
        /// Index among the query's input streams.
        input: usize,
        /// Columns (qualified by the alias in EXPLAIN only).
        schema: Schema,
    },
    /// Rows where `predicate` is true.
    Filter {
        /// Input.
        input: Box<Logical>,
        /// Predicate over the input.
        predicate: Expr,
    },
    /// Computed columns.
    Project {
        /// Input.
        input: Box<Logical>,
        /// One expression per output column.
        exprs: Vec<Expr>,
        /// Output columns.
        schema: Schema,
    },
    /// Grouped aggregation over windows. Output: `window_start, window_end, keys...,
    /// aggregates...`, event time `window_end` (a partial aggregate's: partial
    /// accumulators instead of aggregates, see [`AggPhase`]).
    Aggregate {
        /// Whole, or one of the two phases of a two-phase aggregate.
        phase: AggPhase,
        /// Input.
        input: Box<Logical>,
        /// Window.
        window: WindowSpec,
        /// Group keys.
        keys: Vec<Expr>,
        /// Aggregates.
        aggs: Vec<AggCall>,
        /// Output columns.
        schema: Schema,
    },
    /// A join of two streams. Output: left columns, then right columns.
    Join {
        /// Left input.
        left: Box<Logical>,
        /// Right input.
        right: Box<Logical>,
        /// Equality keys: (expression over left, expression over right).
        equi: Vec<(Expr, Expr)>,
        /// Other conditions, over the output columns.
        residual: Option<Expr>,
        /// What bounds the state.
        window: JoinWindow,
        /// Inner or outer.
        kind: JoinKind,
        /// Output columns.
        schema: Schema,
    },
    /// A stream joined with a table held in memory (replicated to every partition).
    /// Output: stream columns, then table columns.
    Lookup {
        /// The stream.
        input: Box<Logical>,
        /// The table.
        table: Arc<TableDef>,
        /// Equality keys: (expression over the stream, table column).
        keys: Vec<(Expr, usize)>,
        /// Other conditions, over the output columns.
        residual: Option<Expr>,
        /// Inner, or left outer: a stream row without a table row comes out with nulls.
        kind: JoinKind,
        /// Output columns.
        schema: Schema,
    },
    /// Window top-N (Flink's `ROW_NUMBER() OVER (PARTITION BY window_start, window_end,
    /// ... ORDER BY ...) AS rownum` filtered by `rownum <= n`) over a windowed
    /// aggregate's output: per value of the `partition` columns, the `limit` rows first
    /// by `order` (column, descending), ties by every column in order, numbered from 1,
    /// emitted when their window closes. Output: the input columns, then `rownum`.
    TopN {
        /// Input (a windowed aggregate's rows, made when windows close).
        input: Box<Logical>,
        /// PARTITION BY columns (the window's bounds among them).
        partition: Vec<usize>,
        /// The columns that are the window's `window_start` and `window_end`.
        window: [usize; 2],
        /// ORDER BY columns, each with whether it is descending.
        order: Vec<(usize, bool)>,
        /// Rows kept per partition.
        limit: u64,
        /// Output columns.
        schema: Schema,
    },
    /// `UNION ALL` of inputs with the same column types.
    Union {
        /// Inputs.
        inputs: Vec<Logical>,
        /// Output columns (the first input's names).
        schema: Schema,
    },
    /// A whole query's `ORDER BY`: the rows of the windows that close together (one
    /// epoch's), sorted by `keys` (see [`crate::order`], which checks that this is the
    /// order of the whole output). Only at the top of a query's plan, where the rule
    /// [`crate::physical::lower_top`] makes it the query's last merge, sorted.
    Sort {
        /// Input.
        input: Box<Logical>,
        /// Output columns, each ascending or descending, nulls first or last.
        keys: Vec<SortKey>,
    },
    /// A whole query's `LIMIT n`: its first `n` rows, then it ends. Only at the top of a
    /// query's plan, where [`crate::physical::lower_top`] makes it the sink's limit.
    Limit {
        /// Input.
        input: Box<Logical>,
        /// Rows.
        n: u64,
    },
}

impl Logical {
    /// Output columns.
    pub fn schema(&self) -> &Schema {
        match self {
            Logical::Scan { schema, .. }
            | Logical::Project { schema, .. }
            | Logical::Aggregate { schema, .. }
            | Logical::Join { schema, .. }
            | Logical::Lookup { schema, .. }
            | Logical::TopN { schema, .. }
            | Logical::Union { schema, .. } => schema,
            Logical::Filter { input, .. }
            | Logical::Sort { input, .. }
            | Logical::Limit { input, .. } => input.schema(),
        }
    }

    /// How far below the input's watermark the event times of the rows this node hands
    /// on may lie: an interval join makes a pair when its later row arrives, so a pair
    /// carrying the left row's time can come `hi` after that time (a padded row too,
    /// when its interval closes). An operator above it judges lateness and closes
    /// windows that much later, so no window is emitted before every row it holds has
    /// come (Flink's interval join holds back the watermark so). What sits above such an
    /// operator inherits its hold.
    pub fn time_hold(&self) -> i64 {
        let below = self
            .children()
            .iter()
            .map(|c| c.time_hold())
            .max()
            .unwrap_or(0);
        let own = match self {
            Logical::Join {
                window: JoinWindow::Interval { lo, hi },
                kind,
                ..
            } => match kind {
                JoinKind::Inner | JoinKind::Left => (*hi).max(0),
                JoinKind::Right => lo.saturating_neg().max(0),
                JoinKind::Full => (*hi).max(lo.saturating_neg()).max(0),
            },
            _ => 0,
        };
        below.saturating_add(own)
    }

    /// Inputs of this node.
    pub fn children(&self) -> Vec<&Logical> {
        match self {
            Logical::Scan { .. } => vec![],
            Logical::Filter { input, .. }
            | Logical::Project { input, .. }
            | Logical::Aggregate { input, .. }
            | Logical::Lookup { input, .. }
            | Logical::TopN { input, .. }
            | Logical::Sort { input, .. }
            | Logical::Limit { input, .. } => vec![input],
            Logical::Join { left, right, .. } => vec![left, right],
            Logical::Union { inputs, .. } => inputs.iter().collect(),
        }
    }

    /// Whether the node has exactly one input (Filter, Project, Aggregate, Lookup).
    pub fn has_single_input(&self) -> bool {
        matches!(
            self,
            Logical::Filter { .. }
                | Logical::Project { .. }
                | Logical::Aggregate { .. }
                | Logical::Lookup { .. }
                | Logical::TopN { .. }
        )
    }

    /// The node with each input replaced by `f(input)`, in order (a join's left, then
    /// right; a union's inputs); a scan is returned as it is.
    pub fn map_inputs(self, f: &mut dyn FnMut(Logical) -> Logical) -> Logical {
        let mut one = |b: Box<Logical>| Box::new(f(*b));
        match self {
            scan @ Logical::Scan { .. } => scan,
            Logical::Filter { input, predicate } => Logical::Filter {
                input: one(input),
                predicate,
            },
            Logical::Project {
                input,
                exprs,
                schema,
            } => Logical::Project {
                input: one(input),
                exprs,
                schema,
            },
            Logical::Aggregate {
                phase,
                input,
                window,
                keys,
                aggs,
                schema,
            } => Logical::Aggregate {
                phase,
                input: one(input),
                window,
                keys,
                aggs,
                schema,
            },
            Logical::Lookup {
                input,
                table,
                keys,
                residual,
                kind,
                schema,
            } => Logical::Lookup {
                input: one(input),
                table,
                keys,
                residual,
                kind,
                schema,
            },
            Logical::Join {
                left,
                right,
                equi,
                residual,
                window,
                kind,
                schema,
            } => {
                let left = one(left);
                Logical::Join {
                    left,
                    right: one(right),
                    equi,
                    residual,
                    window,
                    kind,
                    schema,
                }
            }
            Logical::TopN {
                input,
                partition,
                window,
                order,
                limit,
                schema,
            } => Logical::TopN {
                input: one(input),
                partition,
                window,
                order,
                limit,
                schema,
            },
            Logical::Union { inputs, schema } => Logical::Union {
                inputs: inputs.into_iter().map(f).collect(),
                schema,
            },
            Logical::Sort { input, keys } => Logical::Sort {
                input: one(input),
                keys,
            },
            Logical::Limit { input, n } => Logical::Limit {
                input: one(input),
                n,
            },
        }
    }

    /// The input streams this subtree reads (indexes), ascending, without repeats.
    pub fn inputs(&self) -> Vec<usize> {
        let mut v = Vec::new();
        self.collect_inputs(&mut v);
        v.sort_unstable();
        v.dedup();
        v
    }

    fn collect_inputs(&self, v: &mut Vec<usize>) {
        if let Logical::Scan { input, .. } = self {
            v.push(*input);
        }
        for c in self.children() {
            c.collect_inputs(v);
        }
    }

    /// Whether the node keeps state across rows (an aggregate or a stream join).
    pub fn is_stateful(&self) -> bool {
        matches!(
            self,
            Logical::Aggregate { .. } | Logical::Join { .. } | Logical::TopN { .. }
        )
    }

    /// The stateful operators of the tree under (and including) this node, in
    /// pre-order.
    pub fn stateful(&self) -> Vec<&Logical> {
        fn walk<'a>(l: &'a Logical, out: &mut Vec<&'a Logical>) {
            if l.is_stateful() {
                out.push(l);
            }
            for c in l.children() {
                walk(c, out);
            }
        }
        let mut out = Vec::new();
        walk(self, &mut out);
        out
    }

    /// One line describing the node (without its inputs).
    pub fn describe(&self) -> String {
        let list = |v: &[Expr]| {
            v.iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            Logical::Scan { stream, schema, .. } => format!("Scan {stream} {schema}"),
            Logical::Filter { predicate, .. } => format!("Filter {predicate}"),
            Logical::Project { exprs, schema, .. } => {
                let cols: Vec<String> = exprs
                    .iter()
                    .zip(&schema.fields)
                    .map(|(e, f)| {
                        let t = e.to_string();
                        if t == f.name {
                            t
                        } else {
                            format!("{t} AS {}", f.name)
                        }
                    })
                    .collect();
                format!("Project {}", cols.join(", "))
            }
            Logical::Aggregate {
                phase,
                window,
                keys,
                aggs,
                ..
            } => {
                let aggs: Vec<String> = aggs.iter().map(|a| a.to_string()).collect();
                let phase = match phase {
                    AggPhase::Whole => "",
                    AggPhase::Partial => " (partial)",
                    AggPhase::Final => " (final)",
                };
                format!(
                    "Aggregate{phase} window={window} keys=[{}] aggs=[{}]",
                    list(keys),
                    aggs.join(", ")
                )
            }
            Logical::Join {
                equi,
                residual,
                window,
                kind,
                ..
            } => {
                let eq: Vec<String> = equi.iter().map(|(l, r)| format!("{l} = {r}")).collect();
                let w = match window {
                    JoinWindow::Interval { lo, hi } => {
                        format!("right.time - left.time in [{lo}, {hi}]")
                    }
                    JoinWindow::Count { left, right } => format!("last {left} x last {right} rows"),
                };
                let mut s = format!("Join{} {w}", kind.label());
                if !eq.is_empty() {
                    s += &format!(" on [{}]", eq.join(", "));
                }
                if let Some(r) = residual {
                    s += &format!(" where {r}");
                }
                s
            }
            Logical::Lookup {
                table,
                keys,
                residual,
                kind,
                ..
            } => {
                let eq: Vec<String> = keys
                    .iter()
                    .map(|(e, c)| format!("{e} = {}.{}", table.name, table.schema.fields[*c].name))
                    .collect();
                let mut s = format!(
                    "Lookup{} table {} ({} rows) on [{}]",
                    kind.label(),
                    table.name,
                    table.rows.len(),
                    eq.join(", ")
                );
                if let Some(r) = residual {
                    s += &format!(" where {r}");
                }
                s
            }
            Logical::TopN {
                partition,
                order,
                limit,
                input,
                ..
            } => {
                let name = |c: &usize| input.schema().fields[*c].name.clone();
                let by: Vec<String> = order
                    .iter()
                    .map(|(c, desc)| name(c) + if *desc { " DESC" } else { "" })
                    .collect();
                format!(
                    "TopN {limit} per [{}] by [{}]",
                    partition.iter().map(name).collect::<Vec<_>>().join(", "),
                    by.join(", ")
                )
            }
            Logical::Union { inputs, .. } => format!("Union all ({} inputs)", inputs.len()),
            Logical::Sort { input, keys } => {
                let by: Vec<String> = keys
                    .iter()
                    .map(|k| {
                        let name = &input.schema().fields[k.column].name;
                        match (k.descending, k.nulls_first) {
                            (false, true) => name.clone(),
                            (true, false) => format!("{name} DESC"),
                            (false, false) => format!("{name} NULLS LAST"),
                            (true, true) => format!("{name} DESC NULLS FIRST"),
                        }
                    })
                    .collect();
                format!("Sort {} (the windows closed together)", by.join(", "))
            }
            Logical::Limit { n, .. } => format!("Limit {n}"),
        }
    }

    /// Writes the tree, one node per line, inputs indented.
    pub fn write_tree(&self, out: &mut String, depth: usize) {
        out.push_str(&"  ".repeat(depth));
        out.push_str(&self.describe());
        out.push('\n');
        for c in self.children() {
            c.write_tree(out, depth + 1);
        }
    }
}

impl Logical {
    /// The tree as a Graphviz digraph named `name`.
    pub fn dot(&self, name: &str) -> String {
        fn walk(l: &Logical, out: &mut String, next: &mut usize) -> usize {
            let me = *next;
            *next += 1;
            let label = l.describe().replace('\\', "\\\\").replace('"', "\\\"");
            out.push_str(&format!("  l{me} [shape=box, label=\"{label}\"];\n"));
            for c in l.children() {
                let k = walk(c, out, next);
                out.push_str(&format!("  l{k} -> l{me};\n"));
            }
            me
        }
        let mut out = format!("digraph {name} {{\n  rankdir=BT;\n");
        walk(self, &mut out, &mut 0);
        out.push_str("}\n");
        out
    }
}

impl fmt::Display for Logical {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        self.write_tree(&mut s, 0);
        f.write_str(&s)
    }
}

/// The schema of an aggregate's output.
pub fn aggregate_schema(keys: &[(String, DataType)], aggs: &[(String, DataType)]) -> Schema {
    windowed_schema(DataType::Int64, keys, aggs)
}

/// [`aggregate_schema`] with window bounds of type `time` (a timestamp event time's).
pub fn windowed_schema(
    time: DataType,
    keys: &[(String, DataType)],
    aggs: &[(String, DataType)],
) -> Schema {
    let mut fields = vec![
        Field::new("window_start", time),
        Field::new("window_end", time),
    ];
    for (n, t) in keys {
        fields.push(Field::nullable(n, *t));
    }
    for (n, t) in aggs {
        fields.push(Field::nullable(n, *t));
    }
    Schema {
        fields,
        event_time: Some(1),
    }
}
