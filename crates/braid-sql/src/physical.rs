//! Automatic parallelization (the StreamCloud approach): where the query keeps state,
//! how its input is balanced over partitions, and the physical plan
//! `Source -> Split -> Map(query) -> Merge -> Sink` that runs it.
//!
//! The balancer follows the stateful operator: round robin when there is none, a hash
//! of the group-by keys for an aggregate, a hash of the equi-join keys for a keyed
//! stream join, and a sqrt(N) x sqrt(N) grid of partitions for a join without keys.
//! Queries whose state cannot be partitioned (aggregates without keys, count-window
//! joins, several stateful operators keyed differently) run in one partition, and
//! EXPLAIN says why. A filter right above the scan of a hashed query moves into the
//! balancer (rows it rejects never leave the splitter).

use crate::catalog::{Cut, MergeMode, Settings, SinkDef, StreamDef};
use crate::logical::{JoinWindow, Logical};
use crate::run::Layout;
use braid_plan::batch::Scalar;
use braid_plan::error::{Error, Result};
use braid_plan::expr::{Expr, Func};
use braid_plan::plan::{MergeKind, Plan, Route, Sink, Source, SourceSpec, Strategy};
use braid_plan::types::{DataType, Schema};

/// How the input of a query is spread over partitions.
#[derive(Clone, Debug, PartialEq)]
pub enum Partitioning {
    /// One partition; the reason.
    Single(String),
    /// Row `seq` to partition `seq % q`.
    RoundRobin,
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
            if braid_plan::placement::gcd(r as u64, c as u64) != 1 {
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
            Partitioning::RoundRobin => f.write_str("round robin (no operator keeps state)"),
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
    };
    let layout = Layout {
        tag: Some(braid_plan::interleave::STREAM_COLUMN),
        inputs,
    };
    Ok((source, layout, lateness))
}

/// Where expression `e` over the output of `l` comes from in the physical row, per
/// input stream; None if it depends on state (an aggregate or join) or a table.
fn trace(l: &Logical, e: &Expr, layout: &Layout, phys: &Schema) -> Option<Vec<(usize, Expr)>> {
    match l {
        Logical::Scan { input, .. } => {
            let off = layout.inputs.get(*input)?.1;
            Some(vec![(
                *input,
                e.map_columns(&|i, _| Expr::Column(off + i, phys.fields[off + i].name.clone())),
            )])
        }
        Logical::Filter { input, .. } => trace(input, e, layout, phys),
        Logical::Project { input, exprs, .. } => {
            let sub = e.map_columns(&|i, _| exprs[i].clone());
            trace(input, &sub, layout, phys)
        }
        Logical::Union { inputs, .. } => {
            let mut all = Vec::new();
            for c in inputs {
                all.extend(trace(c, e, layout, phys)?);
            }
            Some(all)
        }
        Logical::Lookup { input, .. } => {
            let arity = input.schema().arity();
            if e.columns().iter().all(|&c| c < arity) {
                trace(input, e, layout, phys)
            } else {
                None
            }
        }
        // Rows of one group stay in one partition, and so do the aggregate's rows for
        // it: an expression over group-key columns traces to the keys' inputs.
        Logical::Aggregate { input, keys, .. } => {
            let cols = e.columns();
            if cols.is_empty() || !cols.iter().all(|&c| (2..2 + keys.len()).contains(&c)) {
                return None;
            }
            trace(
                input,
                &e.map_columns(&|c, _| keys[c - 2].clone()),
                layout,
                phys,
            )
        }
        // A keyed join's output rows live where their left (and right) rows do: an
        // expression over one side's columns traces into that side. (A join without
        // keys copies rows over a grid, so nothing traces through it; `partitioning`
        // never combines a grid with another operator.)
        Logical::Join {
            left, right, equi, ..
        } if !equi.is_empty() => {
            let cols = e.columns();
            let la = left.schema().arity();
            if cols.is_empty() {
                None
            } else if cols.iter().all(|&c| c < la) {
                trace(left, e, layout, phys)
            } else if cols.iter().all(|&c| c >= la) {
                let shifted = e.map_columns(&|c, _| {
                    Expr::Column(c - la, right.schema().fields[c - la].name.clone())
                });
                trace(right, &shifted, layout, phys)
            } else {
                None
            }
        }
        Logical::Join { .. } => None,
    }
}

/// Key expressions an input's rows must be hashed by, with which of them are floats.
type Keys = (usize, Vec<Expr>, Vec<bool>);

/// Per input, the one key requirement of all of `needs`; None if an input has two.
fn merge_keys(needs: Vec<Keys>) -> Option<Vec<Keys>> {
    let mut merged: Vec<Keys> = Vec::new();
    for (i, ks, fl) in needs {
        match merged.iter().find(|(j, _, _)| *j == i) {
            Some((_, prev, pf)) if *prev != ks || *pf != fl => return None,
            Some(_) => {}
            None => merged.push((i, ks, fl)),
        }
    }
    Some(merged)
}

/// One route expression from per-input key requirements: `hash(k...)`, or a CASE on
/// the input tag when inputs differ.
fn route_of_keys(merged: Vec<Keys>, layout: &Layout) -> Option<Expr> {
    let hash = |ks: &[Expr], float: &[bool]| {
        let args = ks
            .iter()
            .zip(float)
            .map(|(k, &f)| {
                if f {
                    Expr::Cast(Box::new(k.clone()), DataType::Float64)
                } else {
                    k.clone()
                }
            })
            .collect();
        Expr::Call(Func::Hash, args)
    };
    match (layout.tag, merged.as_slice()) {
        (_, []) => None,
        (None, [(_, ks, fl), ..]) => Some(hash(ks, fl)),
        (Some(_), [(_, ks, fl)]) if layout.inputs.len() == 1 => Some(hash(ks, fl)),
        (Some(tag), _) => {
            let arms = merged
                .iter()
                .map(|(i, ks, fl)| {
                    let cond =
                        Expr::Column(tag, "_stream".into()).eq(Expr::int(layout.inputs[*i].0));
                    (cond, hash(ks, fl))
                })
                .collect();
            // Rows of streams no stateful operator keys (a stateless branch of a union)
            // may go anywhere: spread them by time. Without this arm the CASE is null
            // for them and the split would omit them.
            let spread = (merged.len() < layout.inputs.len()).then(|| {
                let t = braid_plan::interleave::TIME_COLUMN;
                Box::new(Expr::Call(
                    Func::Hash,
                    vec![Expr::Column(t, "_time".into())],
                ))
            });
            Some(Expr::Case(arms, spread))
        }
    }
}

fn trace_keys(
    l: &Logical,
    keys: &[Expr],
    layout: &Layout,
    phys: &Schema,
) -> Option<Vec<(usize, Vec<Expr>)>> {
    let mut per: Vec<(usize, Vec<Expr>)> = Vec::new();
    for k in keys {
        let t = trace(l, k, layout, phys)?;
        for (i, e) in t {
            match per
                .iter_mut()
                .find(|(j, v)| *j == i && v.len() < keys.len())
            {
                Some((_, v)) => v.push(e),
                None => per.push((i, vec![e])),
            }
        }
    }
    per.iter()
        .all(|(_, v)| v.len() == keys.len())
        .then_some(per)
}

/// What one stateful operator needs of the balancer.
enum Need {
    /// Rows of each input hashed by these keys.
    Keys(Vec<Keys>, &'static str),
    /// A grid, or one partition: nothing else can be combined with it.
    Only(Partitioning),
}

/// What stateful operator `l` needs.
fn need(l: &Logical, layout: &Layout, phys: &Schema) -> Need {
    let keyed = |per: Option<Vec<(usize, Vec<Expr>)>>, float: Vec<bool>| {
        per.map(|p| {
            p.into_iter()
                .map(|(i, ks)| (i, ks, float.clone()))
                .collect::<Vec<Keys>>()
        })
    };
    match l {
        Logical::Aggregate { keys, input, .. } => {
            if keys.is_empty() {
                return Need::Only(Partitioning::Single(
                    "an aggregate without GROUP BY keys sees every row".into(),
                ));
            }
            let float: Vec<bool> = keys
                .iter()
                .map(|k| k.data_type(input.schema()) == Ok(DataType::Float64))
                .collect();
            match keyed(trace_keys(input, keys, layout, phys), float) {
                Some(k) => Need::Keys(k, "group-by keys"),
                None => Need::Only(Partitioning::Single(
                    "the group-by keys are computed from a table, a join without keys or an aggregate's results".into(),
                )),
            }
        }
        Logical::Join {
            left,
            right,
            equi,
            window,
            ..
        } => {
            if let JoinWindow::Count { .. } = window {
                return Need::Only(Partitioning::Single(
                    "count windows (LAST) hold each stream's last rows in arrival order".into(),
                ));
            }
            let (li, ri) = (left.inputs(), right.inputs());
            if li.iter().any(|i| ri.contains(i)) {
                return Need::Only(Partitioning::Single("a stream joined with itself".into()));
            }
            if equi.is_empty() {
                return Need::Only(match (layout.tag, ri.as_slice()) {
                    (Some(tag), [r]) => Partitioning::Grid {
                        left: Expr::Column(tag, "_stream".into())
                            .bin(braid_plan::expr::BinOp::NotEq, Expr::int(layout.inputs[*r].0)),
                        why: "a join without equality keys must meet every pair of rows: sqrt(N) x sqrt(N) grid".into(),
                    },
                    _ => Partitioning::Single(
                        "a join without keys whose right side reads several streams".into(),
                    ),
                });
            }
            let lk: Vec<Expr> = equi.iter().map(|e| e.0.clone()).collect();
            let rk: Vec<Expr> = equi.iter().map(|e| e.1.clone()).collect();
            let float: Vec<bool> = equi
                .iter()
                .map(|(a, b)| {
                    a.data_type(left.schema()) == Ok(DataType::Float64)
                        || b.data_type(right.schema()) == Ok(DataType::Float64)
                })
                .collect();
            let per = trace_keys(left, &lk, layout, phys).and_then(|mut l| {
                l.extend(trace_keys(right, &rk, layout, phys)?);
                Some(l)
            });
            match keyed(per, float) {
                Some(k) => Need::Keys(k, "equi-join keys"),
                None => Need::Only(Partitioning::Single(
                    "the join keys are computed from an aggregate's results or a join without keys"
                        .into(),
                )),
            }
        }
        _ => Need::Only(Partitioning::RoundRobin),
    }
}

/// Decides the partitioning of `root`: round robin without state; otherwise every
/// stateful operator's key requirement per input stream, merged. Operators whose keys
/// trace to the same input columns (an aggregate over a join by the join key, a join
/// of aggregates on their group keys, two aggregates by one key) share one
/// partitioning; when requirements conflict the query needs stages (see [`cut`]).
pub fn partitioning(root: &Logical, layout: &Layout, phys: &Schema) -> Partitioning {
    let mut stateful = Vec::new();
    collect_stateful(root, &mut stateful);
    if stateful.is_empty() {
        return Partitioning::RoundRobin;
    }
    let needs: Vec<Need> = stateful.iter().map(|l| need(l, layout, phys)).collect();
    let conflict = || {
        Partitioning::Single(format!(
            "{} stateful operators need different partitionings",
            stateful.len()
        ))
    };
    let mut all = Vec::new();
    let mut whys: Vec<&str> = Vec::new();
    for n in needs {
        match n {
            Need::Only(p) if stateful.len() == 1 => return p,
            Need::Only(_) => return conflict(),
            Need::Keys(k, why) => {
                all.extend(k);
                if !whys.contains(&why) {
                    whys.push(why);
                }
            }
        }
    }
    match merge_keys(all).and_then(|m| route_of_keys(m, layout)) {
        Some(route) => Partitioning::Hash {
            route,
            why: whys.join(", "),
        },
        None => conflict(),
    }
}

fn collect_stateful<'a>(l: &'a Logical, out: &mut Vec<&'a Logical>) {
    if l.is_stateful() {
        out.push(l);
    }
    for c in l.children() {
        collect_stateful(c, out);
    }
}

/// Moves filters down towards the scans: below a projection (rewritten over its input)
/// and below a table lookup when they read only stream columns. A filter that reaches a
/// scan can then move into the balancer ([`pull_scan_filter`]).
pub fn push_filters_down(l: Logical) -> Logical {
    match l {
        Logical::Filter { input, predicate } => match *input {
            Logical::Project {
                input: inner,
                exprs,
                schema,
            } => {
                let p = predicate.map_columns(&|i, _| exprs[i].clone());
                Logical::Project {
                    input: Box::new(push_filters_down(Logical::Filter {
                        input: inner,
                        predicate: p,
                    })),
                    exprs,
                    schema,
                }
            }
            Logical::Lookup {
                input: inner,
                table,
                keys,
                residual,
                schema,
            } => {
                // Conditions on stream columns go below the lookup; the rest stay above.
                let arity = inner.schema().arity();
                let (below, above): (Vec<Expr>, Vec<Expr>) = crate::expr::conjuncts(predicate)
                    .into_iter()
                    .partition(|c| c.columns().iter().all(|&i| i < arity));
                let inner = match crate::expr::and_all(below) {
                    Some(p) => push_filters_down(Logical::Filter {
                        input: inner,
                        predicate: p,
                    }),
                    None => push_filters_down(*inner),
                };
                let lookup = Logical::Lookup {
                    input: Box::new(inner),
                    table,
                    keys,
                    residual,
                    schema,
                };
                match crate::expr::and_all(above) {
                    Some(p) => Logical::Filter {
                        input: Box::new(lookup),
                        predicate: p,
                    },
                    None => lookup,
                }
            }
            other => Logical::Filter {
                input: Box::new(push_filters_down(other)),
                predicate,
            },
        },
        other => other.map_inputs(&mut push_filters_down),
    }
}

/// Moves a filter that sits right above the (only) scan into the balancer: returns the
/// predicate over the physical row and removes the filter from the plan.
pub fn pull_scan_filter(l: &mut Logical, layout: &Layout, phys: &Schema) -> Option<Expr> {
    match l {
        Logical::Filter { input, predicate } => {
            if let Logical::Scan { .. } = input.as_ref() {
                let traced = trace(input, predicate, layout, phys)?;
                let [(_, pred)] = traced.as_slice() else {
                    return None;
                };
                let pred = pred.clone();
                let scan = std::mem::replace(input.as_mut(), placeholder());
                *l = scan;
                return Some(pred);
            }
            pull_scan_filter(input, layout, phys)
        }
        Logical::Project { input, .. }
        | Logical::Aggregate { input, .. }
        | Logical::Lookup { input, .. } => pull_scan_filter(input, layout, phys),
        _ => None,
    }
}

fn placeholder() -> Logical {
    Logical::Union {
        inputs: vec![],
        schema: Schema::default(),
    }
}

/// The name of the stream stage `k` (from 1) reads: the previous stage's output.
pub fn stage_stream(k: usize) -> String {
    format!("stage{k}")
}

fn stage_scan(k: usize, schema: &Schema) -> Logical {
    Logical::Scan {
        stream: stage_stream(k),
        input: 0,
        schema: schema.clone(),
    }
}

fn contains_stateful(l: &Logical) -> bool {
    l.is_stateful() || l.children().iter().any(|c| contains_stateful(c))
}

/// Cuts `root` into stages, lowest first. Stage `k + 1` reads stage `k`'s output through
/// a scan of [`stage_stream`]`(k)`; only single-input operators are cut below (a join
/// keeps both inputs in its stage).
pub fn cut(root: Logical, how: Cut, layout: &Layout, phys: &Schema) -> Vec<Logical> {
    let mut stages = Vec::new();
    let top = match how {
        Cut::Query => root,
        Cut::Operator => cut_every(root, &mut stages),
        Cut::Subquery => {
            let mut stateful = Vec::new();
            collect_stateful(&root, &mut stateful);
            let conflict = stateful.len() > 1
                && matches!(partitioning(&root, layout, phys), Partitioning::Single(_));
            if conflict {
                cut_stateful(root, &mut stages, layout, phys)
            } else {
                root
            }
        }
    };
    stages.push(top);
    stages
}

/// At each aggregate with state below it, the part below becomes a stage of its own.
/// A join with state in its inputs whose keys cannot share their partitioning (a join
/// of two aggregates on their counts) gets its inputs computed in a stage of their own
/// ([`wide_union`]), then joins them in the next. `layout` and `phys` describe the
/// source (the first stage's input).
fn cut_stateful(l: Logical, stages: &mut Vec<Logical>, layout: &Layout, phys: &Schema) -> Logical {
    match l {
        Logical::Aggregate {
            input,
            window,
            keys,
            aggs,
            schema,
        } if contains_stateful(&input) => {
            let below = cut_stateful(*input, stages, layout, phys);
            let s = below.schema().clone();
            stages.push(below);
            Logical::Aggregate {
                input: Box::new(stage_scan(stages.len(), &s)),
                window,
                keys,
                aggs,
                schema,
            }
        }
        Logical::Join { .. } if stages.is_empty() => match cut_join(&l, layout, phys) {
            Some((below, join)) => {
                stages.push(below);
                join(stages.len())
            }
            None => l,
        },
        // Any other join keeps both its inputs in its stage.
        other if other.has_single_input() => {
            other.map_inputs(&mut |i| cut_stateful(i, stages, layout, phys))
        }
        other => other,
    }
}

/// A join stage over the two stage inputs, given the stage number it reads.
type JoinOver = Box<dyn FnOnce(usize) -> Logical>;

/// For a join whose inputs hold state its keys cannot share a partitioning with: the
/// stage computing both inputs ([`wide_union`]) and the join over that stage's output.
/// None when the join needs no cut (its subtree partitions as one stage), has no keys,
/// an input has no event time, or the inputs cannot be one stage either.
fn cut_join(l: &Logical, layout: &Layout, phys: &Schema) -> Option<(Logical, JoinOver)> {
    let fits = |x: &Logical| !matches!(partitioning(x, layout, phys), Partitioning::Single(_));
    let Logical::Join {
        left,
        right,
        equi,
        residual,
        window,
        schema,
    } = l
    else {
        return None;
    };
    if equi.is_empty() || !(contains_stateful(left) || contains_stateful(right)) || fits(l) {
        return None;
    }
    let below = wide_union(left, right).filter(|b| fits(b))?;
    let (ls, rs) = (left.schema().clone(), right.schema().clone());
    let (equi, residual, window, schema) = (
        equi.clone(),
        residual.clone(),
        window.clone(),
        schema.clone(),
    );
    let join: JoinOver = Box::new(move |k| {
        let scan = |input, schema: &Schema| {
            Box::new(Logical::Scan {
                stream: stage_stream(k),
                input,
                schema: schema.clone(),
            })
        };
        Logical::Join {
            left: scan(0, &ls),
            right: scan(1, &rs),
            equi,
            residual,
            window,
            schema,
        }
    });
    Some((below, join))
}

/// Both inputs of a join as one stream, tagged like an interleave of two sources (see
/// `braid_plan::interleave`): `_stream` (0 left, 1 right), `_time` (the row's event time),
/// the left columns, then the right columns, the other side's null. The next stage
/// reads it with [`stage_layout`]. None if an input has no event time.
fn wide_union(left: &Logical, right: &Logical) -> Option<Logical> {
    let (ls, rs) = (left.schema(), right.schema());
    let (lt, rt) = (ls.event_time?, rs.event_time?);
    let wide = braid_plan::interleave::wide(&[("left", ls), ("right", rs)]);
    let null = |ty| Expr::Cast(Box::new(Expr::Literal(Scalar::Null)), ty);
    let side = |input: &Logical, tag: i64, time: usize, before: &Schema, after: &Schema| {
        let own = input.schema();
        let mut exprs = vec![
            Expr::int(tag),
            Expr::Column(time, own.fields[time].name.clone()),
        ];
        exprs.extend(before.fields.iter().map(|f| null(f.ty)));
        exprs.extend(
            own.fields
                .iter()
                .enumerate()
                .map(|(i, f)| Expr::Column(i, f.name.clone())),
        );
        exprs.extend(after.fields.iter().map(|f| null(f.ty)));
        Logical::Project {
            input: Box::new(input.clone()),
            exprs,
            schema: wide.clone(),
        }
    };
    let empty = Schema::new(Vec::new());
    Some(Logical::Union {
        inputs: vec![
            side(left, 0, lt, &empty, rs),
            side(right, 1, rt, ls, &empty),
        ],
        schema: wide.clone(),
    })
}

/// How stage `stage` reads the previous stage's output: one stream, or, when it scans
/// several inputs of it (a join over a [`wide_union`]), the tagged wide stream.
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

/// Every single-input operator becomes a stage of its own.
fn cut_every(l: Logical, stages: &mut Vec<Logical>) -> Logical {
    if !l.has_single_input() {
        return l;
    }
    l.map_inputs(&mut |input| {
        let inner = cut_every(input, stages);
        if matches!(inner, Logical::Scan { .. }) {
            return inner;
        }
        let s = inner.schema().clone();
        stages.push(inner);
        stage_scan(stages.len(), &s)
    })
}

/// How much later than its event time a stage's output row can appear: an interval
/// join emits a pair when its later row arrives.
pub fn delay(l: &Logical) -> i64 {
    let own = match l {
        Logical::Join {
            window: JoinWindow::Interval { lo, hi },
            ..
        } => (*hi.max(&0)).saturating_sub(*lo.min(&0)),
        _ => 0,
    };
    own.saturating_add(l.children().iter().map(|c| delay(c)).max().unwrap_or(0))
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
        Partitioning::RoundRobin => (q, Route::RoundRobin, None, settings.strategy),
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
    })
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
                r * c <= q && braid_plan::placement::gcd(r as u64, c as u64) == 1,
                "{q}"
            );
        }
    }
}
