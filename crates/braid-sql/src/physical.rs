//! The physical plan of an automatically parallelized query: its input source, and per
//! stage `Split -> Map(query) -> Merge`, then the sink. The optimizer rules decide the
//! stages and each stage's [`Partitioning`]; this module turns those decisions into
//! [`Plan`] nodes.
//!
//! A [`Partitioning`] becomes a split: one partition with route 0, any partition (the
//! splitting worker keeps the window), a hash route, or a grid of [`grid_sides`]`(q)`
//! partitions. A filter moved into the balancer becomes the route's `when` (rows it
//! rejects never leave the splitter). Between stages the merge is a union; the last
//! stage's follows `SET merge`.

use crate::catalog::{MergeMode, Settings, SinkDef, StreamDef};
use crate::logical::Logical;
use crate::run::Layout;
use braid_plan::error::{Error, Result};
use braid_plan::expr::Expr;
use braid_plan::plan::{MergeKind, Plan, Route, Sink, Source, SourceSpec, Strategy};

/// How the input of a query is spread over partitions.
#[derive(Clone, Debug, PartialEq)]
pub enum Partitioning {
    /// One partition; the reason.
    Single(String),
    /// No operator keeps state: each window whole to a partition of the worker that
    /// splits it (`Route::Any`), so rows stay where they were read or made (dealt by
    /// window over the workers when one worker reads them all).
    Stateless,
    /// Partial aggregates (of a two-phase aggregate), routed as `Stateless` is: a
    /// group's partials may be in any partition.
    Partial,
    /// A hash of key expressions over the physical row; what the keys are for.
    Hash {
        /// Partition expression.
        route: Expr,
        /// Why these keys.
        why: String,
    },
    /// A join without equality keys over a `rows x cols` grid of partitions (sides
    /// chosen from q by [`grid_sides`]): left rows are dealt over the grid rows and
    /// copied along theirs, right rows over the columns, so every pair meets in one
    /// partition and each row is copied about sqrt(q) times, not q.
    Grid {
        /// Rows of the left input (the others are the right input's).
        left: Expr,
        /// Why.
        why: String,
    },
}

/// The sides `(rows, cols)` of the grid over at most `q` partitions: coprime (so that
/// residue classes address the cells) and with the fewest copies per cell,
/// `1/rows + 1/cols` smallest; ties go to more partitions.
pub fn grid_sides(q: u32) -> (u32, u32) {
    let mut best = (1u32, q.max(1));
    let score = |(r, c): (u32, u32)| (r + c) as f64 / (r as f64 * c as f64);
    for r in 1..=q.max(1) {
        for c in r..=q.max(1) / r {
            if braid_plan::classes::gcd(r as u64, c as u64) != 1 {
                continue;
            }
            let (s, b) = (score((r, c)), score(best));
            if s < b - 1e-12 || ((s - b).abs() <= 1e-12 && r * c > best.0 * best.1) {
                best = (r, c);
            }
        }
    }
    best
}

impl std::fmt::Display for Partitioning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Partitioning::Single(why) => write!(f, "single partition: {why}"),
            Partitioning::Stateless => f.write_str(
                "any partition (no operator keeps state: each window whole on the worker that splits it)",
            ),
            Partitioning::Partial => {
                f.write_str(
                    "any partition (partial aggregates: each window whole on the worker that splits it; a group's partials in any partition)",
                )
            }
            Partitioning::Hash { route, why } => write!(f, "hash {route} ({why})"),
            Partitioning::Grid { left, why } => {
                write!(f, "grid, left rows where {left} ({why})")
            }
        }
    }
}

/// The physical input of a query: one stream's source, or several interleaved.
pub(crate) fn input_source(defs: &[&StreamDef]) -> Result<(Source, Layout, i64)> {
    let lateness = defs.iter().map(|d| d.lateness).max().unwrap_or(0);
    if let [one] = defs {
        let layout = match &one.source.spec {
            // A stream of several files: the shared columns follow `_stream, _time`.
            SourceSpec::Interleave(_) => Layout {
                tag: None,
                inputs: vec![(0, braid_plan::interleave::TIME_COLUMN + 1)],
            },
            _ => Layout::single(),
        };
        return Ok((one.source.clone(), layout, lateness));
    }
    let first = &defs[0].source;
    let mut kids = Vec::new();
    for d in defs {
        if matches!(d.source.spec, SourceSpec::Interleave(_)) {
            return Err(Error::NotSupported(format!(
                "joining or unioning stream `{}`, which reads several files, with another stream",
                d.name
            )));
        }
        if d.source.epoch != first.epoch {
            return Err(Error::Plan(format!(
                "streams in one query need the same epoch length: `{}` has {}, `{}` has {}",
                defs[0].name, first.epoch, d.name, d.source.epoch
            )));
        }
        let mut s = d.source.clone();
        s.name = d.name.clone();
        kids.push(s);
    }
    let schema = braid_plan::interleave::schema(&kids)?;
    let inputs = defs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let first_col = &d.source.schema.fields[0].name;
            let at = schema
                .index_of(&format!("{}.{first_col}", d.name))
                .unwrap_or(braid_plan::interleave::TIME_COLUMN + 1);
            (i as i64, at)
        })
        .collect();
    let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
    let source = Source {
        name: names.join("+"),
        spec: SourceSpec::Interleave(kids),
        schema,
        epoch: first.epoch,
        window: first.window,
        pace: first.pace,
        out_of_order: defs.iter().any(|d| d.source.out_of_order),
        shed: None,
    };
    let layout = Layout {
        tag: Some(braid_plan::interleave::STREAM_COLUMN),
        inputs,
    };
    Ok((source, layout, lateness))
}

/// How stage `stage` reads the previous stage's output: one stream, or, when it scans
/// several inputs of it (a join over the wide union the stage cut makes), the tagged wide stream.
pub fn stage_layout(stage: &Logical) -> Layout {
    fn scans(l: &Logical, out: &mut Vec<(usize, usize)>) {
        if let Logical::Scan { input, schema, .. } = l {
            out.push((*input, schema.arity()));
        }
        for c in l.children() {
            scans(c, out);
        }
    }
    let mut seen = Vec::new();
    scans(stage, &mut seen);
    seen.sort_unstable();
    seen.dedup();
    if seen.len() < 2 {
        return Layout::single();
    }
    let mut next = 2;
    let inputs = seen
        .iter()
        .map(|&(i, arity)| {
            let at = next;
            next += arity;
            (i as i64, at)
        })
        .collect();
    Layout {
        tag: Some(braid_plan::interleave::STREAM_COLUMN),
        inputs,
    }
}

/// One stage: `input -> Split -> Map(function) -> Merge`. Between stages the merge is a
/// union (the next stage keys rows by a hash of their values, so arrival order does not
/// matter); the last stage's merge follows the setting.
pub fn stage(
    input: Plan,
    part: &Partitioning,
    when: Option<Expr>,
    function: &str,
    settings: &Settings,
    last: bool,
) -> Plan {
    let q = settings.partitions;
    let (q, route, broadcast, strategy) = match part {
        Partitioning::Single(_) => (
            1,
            Route::Expr {
                expr: Expr::int(0),
                when,
            },
            None,
            Strategy::Fsplit,
        ),
        Partitioning::Stateless | Partitioning::Partial => (q, Route::Any, None, settings.strategy),
        Partitioning::Hash { route, .. } => (
            q,
            Route::Expr {
                expr: route.clone(),
                when,
            },
            None,
            settings.strategy,
        ),
        Partitioning::Grid { left, .. } => {
            let (rows, cols) = grid_sides(q);
            (
                rows * cols,
                Route::Grid {
                    left: left.clone(),
                    rows,
                    cols,
                },
                None,
                settings.strategy,
            )
        }
    };
    let merge = match settings.merge {
        MergeMode::Transparent if last => MergeKind::TimeOrdered,
        _ => MergeKind::Union,
    };
    input
        .split(q, route, broadcast, strategy)
        .map(function)
        .merge(merge)
}

/// Writes `plan` to `sink`.
pub fn sink(plan: Plan, sink: &SinkDef) -> Plan {
    Plan::Sink(Sink {
        input: Box::new(plan),
        spec: sink.spec.clone(),
        stamp_emit: sink.stamp_emit,
        max_latency: sink.max_latency,
        latency_to: sink.latency_to.clone(),
        latency_from: sink.latency_from.clone(),
        header: sink.header,
        limit: None,
    })
}

/// The rule that lowers the steps at the top of a query's logical plan onto its
/// physical plan: [`Logical::Limit`] becomes the sink's limit (it stops the query
/// after n rows), [`Logical::Sort`] the query's last merge, sorted
/// ([`MergeKind::Sorted`]: each epoch's closed windows by the keys). The stages were
/// built from the plan under them.
pub fn lower_top(top: &Logical, plan: &mut Plan) -> Result<()> {
    let mut step = top;
    loop {
        step = match step {
            Logical::Limit { input, n } => {
                limit(plan, *n)?;
                input
            }
            Logical::Sort { input, keys } => {
                let Plan::Sink(s) = plan else {
                    return Err(Error::Internal(
                        "a query's plan does not end in its sink".into(),
                    ));
                };
                let Plan::Merge(m) = s.input.as_mut() else {
                    return Err(Error::Internal(
                        "a query's sink does not read a merge".into(),
                    ));
                };
                m.kind = MergeKind::Sorted(keys.clone());
                input
            }
            _ => return Ok(()),
        };
    }
}

/// The query stops after `n` rows (its sink's limit).
pub fn limit(plan: &mut Plan, n: u64) -> Result<()> {
    match plan {
        Plan::Sink(s) => {
            s.limit = Some(n);
            Ok(())
        }
        _ => Err(Error::Internal(
            "a query's plan does not end in its sink".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::grid_sides;

    #[test]
    fn grid_sides_are_coprime_and_near_square() {
        assert_eq!(grid_sides(1), (1, 1));
        assert_eq!(grid_sides(2), (1, 2));
        assert_eq!(grid_sides(8), (2, 3));
        assert_eq!(grid_sides(16), (3, 5));
        assert_eq!(grid_sides(64), (7, 9));
        for q in 1..200 {
            let (r, c) = grid_sides(q);
            assert!(
                r * c <= q && braid_plan::classes::gcd(r as u64, c as u64) == 1,
                "{q}"
            );
        }
    }
}
