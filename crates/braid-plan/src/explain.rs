//! EXPLAIN: the physical plan as indented text and as Graphviz DOT, with each split's
//! strategy, shape, cost estimates and worker placement.

use crate::cost::{tree_levels, tree_throughput, tree_total_cost, Mix, SplitCosts};
use crate::function::Registry;
use crate::placement::{splitter_worker, tree_node_worker, Hosts, FSPLIT_WORKER};
use crate::plan::{Combine, MergeKind, Pace, Plan, Route, SinkSpec, SourceSpec, Split, SplitShape};
use std::fmt::Write;

/// The plan as indented text, one node per line with details below it.
pub fn text(plan: &Plan, registry: &Registry, workers: usize) -> String {
    text_with(plan, registry, workers, &|_| None)
}

/// Where a node is in a plan: in plan `plan` of a [`Plan::Together`] (0 in other plans),
/// `depth` nodes below that plan's root (its `Sink` is depth 0, the node it reads 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeAt {
    /// The plan of a `Together` (0 otherwise).
    pub plan: usize,
    /// Nodes between it and its plan's root.
    pub depth: usize,
}

/// [`text`] with a line of `note` below each node it has one for (EXPLAIN ANALYZE
/// annotates the plan with what each node measured).
pub fn text_with(
    plan: &Plan,
    registry: &Registry,
    workers: usize,
    note: &dyn Fn(NodeAt) -> Option<String>,
) -> String {
    let mut out = String::new();
    let mut cx = Cx {
        registry,
        workers,
        note,
        out: &mut out,
    };
    node_text(&mut cx, plan, NodeAt { plan: 0, depth: 0 }, 0, true);
    out
}

/// What writing the text of a plan needs.
struct Cx<'a> {
    registry: &'a Registry,
    workers: usize,
    note: &'a dyn Fn(NodeAt) -> Option<String>,
    out: &'a mut String,
}

fn list(items: &[u64]) -> String {
    list_of(items, items.len() as u64)
}

/// The first of `total` items (`items` holds at least the first 9 of them).
fn list_of(items: &[u64], total: u64) -> String {
    const SHOW: usize = 8;
    let mut s: Vec<String> = items.iter().take(SHOW).map(|x| x.to_string()).collect();
    if total > SHOW as u64 {
        s.push(format!("... ({total} in all)"));
    }
    s.join(",")
}

fn node_text(cx: &mut Cx<'_>, plan: &Plan, at: NodeAt, depth: usize, recurse: bool) {
    let (registry, workers) = (cx.registry, cx.workers);
    let out = &mut *cx.out;
    let pad = "  ".repeat(depth);
    let schema = plan
        .schema(registry)
        .map(|s| s.to_string())
        .unwrap_or_else(|e| format!("<{e}>"));
    match plan {
        Plan::Together(plans) => {
            let _ = writeln!(
                out,
                "{pad}Together: {} plans in one dataflow  -> {schema}",
                plans.len()
            );
            for (i, p) in plans.iter().enumerate() {
                let _ = writeln!(cx.out, "{pad}  plan {i}:");
                node_text(cx, p, NodeAt { plan: i, depth: 0 }, depth + 2, recurse);
            }
            return;
        }
        Plan::Sink(s) => {
            let _ = writeln!(
                out,
                "{pad}Sink: {}{}{}{}",
                match &s.spec {
                    SinkSpec::Kafka(k) => k.to_string(),
                    SinkSpec::Columnar(path, format) => format!("{format} {}", path.display()),
                    other => format!("{other:?}"),
                },
                if s.header { " (header row)" } else { "" },
                if s.stamp_emit {
                    " (emit time stamped)"
                } else {
                    ""
                },
                match s.limit {
                    Some(n) => format!(" (first {n} rows, then the query stops)"),
                    None => String::new(),
                }
            );
            if let Some(d) = s.max_latency {
                let to = match &s.latency_to {
                    Some(op) => format!("the input of {op}"),
                    None => "this sink".to_string(),
                };
                let from = match &s.latency_from {
                    Some(op) => format!("the input of {op}"),
                    None => format!("source {}", s.input.leaf_source().name),
                };
                let _ = writeln!(
                    out,
                    "{pad}  latency constraint: {} from {from} to {to}; {}",
                    crate::explain::duration_text(d),
                    LATENCY_BUDGET
                );
                let _ = match s.input.chainable_stages(registry) {
                    Some(c) if workers > 1 => {
                        let stages: Vec<String> = c
                            .stages
                            .iter()
                            .enumerate()
                            .map(|(i, st)| match (i, st.stateless) {
                                (0, true) => format!("{} (keeps no state: its rows go to worker 0's partitions)", st.function),
                                (_, true) => format!("{} (keeps no state)", st.function),
                                (_, false) => format!("{} (its partitions' state handed over)", st.function),
                            })
                            .collect();
                        writeln!(
                            out,
                            "{pad}  chaining: stages {} may run on worker 0, the reader, one splitter feeding each: \
                             the controller chains them (their rows then cross no exchange) when an interval run so \
                             has the lower p99, and splits them again when the reader falls behind",
                            stages.join(", ")
                        )
                    }
                    Some(_) => Ok(()),
                    None if workers > 1 => writeln!(
                        out,
                        "{pad}  chaining: none (the first stage keeps state it cannot hand over, or its split \
                         broadcasts to a stage that keeps none, or has several splitters): its partitions stay \
                         where they are placed"
                    ),
                    None => Ok(()),
                };
                let src = s.input.leaf_source();
                if let crate::plan::SourceSpec::Interleave(streams) = &src.spec {
                    if streams.len() > 1 && !crate::interleave::by_time(streams) {
                        let _ = writeln!(
                            out,
                            "{pad}  note: the source interleaves {} streams by (epoch, stream) (not every one has an \
                             event time to merge by): a row of a later stream comes after the epoch's rows of \
                             earlier ones, so a result can wait up to an epoch ({} event-time units); declare \
                             event times, or a shorter epoch, to meet the constraint",
                            streams.len(),
                            src.epoch
                        );
                    }
                }
            }
        }
        Plan::Merge(m) => {
            let kind = match &m.kind {
                MergeKind::Union => "union".to_string(),
                MergeKind::TimeOrdered => "time-ordered (serial order, on worker 0)".to_string(),
                MergeKind::Sorted(by) => {
                    let names = m
                        .input
                        .schema(registry)
                        .map(|s| s.fields)
                        .unwrap_or_default();
                    let cols: Vec<String> = by
                        .iter()
                        .map(|k| {
                            let name = names.get(k.column).map_or("?", |f| f.name.as_str());
                            let dir = if k.descending { " DESC" } else { "" };
                            let nulls = match (k.descending, k.nulls_first) {
                                (false, false) => " NULLS LAST",
                                (true, true) => " NULLS FIRST",
                                _ => "",
                            };
                            format!("{name}{dir}{nulls}")
                        })
                        .collect();
                    format!(
                        "time-ordered (serial order, on worker 0), the rows of windows closed together by {}",
                        cols.join(", ")
                    )
                }
                MergeKind::Keyed {
                    key,
                    combine,
                    fanin,
                    filter,
                } => format!(
                    "keyed on columns {key:?}{}, {}, {}",
                    filter
                        .as_ref()
                        .map_or(String::new(), |f| format!(" where {f} (other rows: union)")),
                    match combine {
                        Combine::Aggregates(a) => format!("aggregates {a:?}"),
                        Combine::Native(n) => format!("combiner `{n}`"),
                    },
                    match fanin {
                        Some(k) => format!("hierarchical fan-in {k}"),
                        None => "pre-combined per worker, then by key".to_string(),
                    }
                ),
            };
            let _ = writeln!(out, "{pad}Merge: {kind}  -> {schema}");
        }
        Plan::Map(m) => map_text(m, workers, &pad, &schema, out),
        Plan::Split(s) => split_text(s, workers, &pad, out),
        Plan::Source(s) => {
            let mut what = source_text(&s.spec);
            if let SourceSpec::Interleave(kids) = &s.spec {
                if crate::interleave::numbered_by_file(kids, s.epoch) {
                    what.push_str(", rows numbered by file");
                }
                what.push_str(&match crate::placement::read_on_every_worker(s, workers) {
                    true => format!(", file k read whole on worker k mod {workers}"),
                    false => ", on worker 0".to_string(),
                });
            }
            let pace = match s.pace {
                Pace::Max => "as fast as possible".to_string(),
                Pace::EventTime { speed, .. } => format!("paced by event time x{speed}"),
            };
            let pace = match s.shed {
                Some(d) => format!(
                    "{pace}; sheds load: drops (and counts) a window more than {} behind its schedule",
                    duration_text(d)
                ),
                None => pace,
            };
            let _ = writeln!(out, "{pad}Source: {} = {what}  -> {schema}", s.name);
            let _ = writeln!(
                out,
                "{pad}  epoch {} event-time units, physical window W = {} rows, {pace}",
                s.epoch, s.window
            );
            if let SourceSpec::Interleave(children) = &s.spec {
                interleave_text(children, &pad, out);
            }
        }
    }
    if let Some(note) = (cx.note)(at) {
        let _ = writeln!(cx.out, "{pad}  {note}");
    }
    if let (true, Some(input)) = (recurse, plan.input()) {
        let below = NodeAt {
            depth: at.depth + 1,
            ..at
        };
        node_text(cx, input, below, depth + 1, true);
    }
}

fn map_text(m: &crate::plan::Map, workers: usize, pad: &str, schema: &str, out: &mut String) {
    let Plan::Split(split) = m.input.as_ref() else {
        let _ = writeln!(out, "{pad}Map: {} over a non-split input", m.function);
        return;
    };
    let q = split.q;
    let hosts = Hosts::of(split, workers);
    let _ = writeln!(
        out,
        "{pad}Map: {} on each of {q} partitions{}  -> {schema}",
        m.function,
        if hosts.is_table() {
            ", placed by measured cost"
        } else {
            ""
        }
    );
    for w in 0..workers {
        let parts: Vec<u64> = hosts.partitions(q, w).into_iter().map(u64::from).collect();
        let _ = writeln!(out, "{pad}  worker {w}: partitions {}", list(&parts));
    }
    if m.scheduler != crate::plan::Scheduler::default() {
        let _ = writeln!(
            out,
            "{pad}  scheduler {}: {}",
            m.scheduler.name(),
            scheduler_text(m.scheduler)
        );
    }
}

/// What a scheduler does, in EXPLAIN's words.
fn scheduler_text(s: crate::plan::Scheduler) -> &'static str {
    match s {
        crate::plan::Scheduler::Fifo => "oldest row first",
        crate::plan::Scheduler::RoundRobin => {
            "a worker's partitions in turn, a slice of rows each, yielding every quantum"
        }
        crate::plan::Scheduler::Chain => {
            "the partition that removes rows fastest first (measured cost and selectivity), yielding every quantum"
        }
        crate::plan::Scheduler::ChainFlush => {
            "chain, oldest row first while the oldest waiting row is older than half the constraint, yielding every quantum"
        }
    }
}

/// `costs measured on the input's first N rows: b = ..., a = ... (per row: ...)`, as
/// EXPLAIN and the command line print it.
impl std::fmt::Display for crate::plan::MeasuredCosts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "costs measured on the input's first {} rows: b = {}, a = cc / (cp + ce) = {:.2} (per row: consume {:.1} ns, route {:.1} ns, emit {:.1} ns)",
            self.rows,
            fraction(self.broadcast),
            self.cost_ratio(),
            self.consume_ns,
            self.route_ns,
            self.emit_ns
        )
    }
}

/// A fraction with at most 4 decimals and no trailing zeros (`0`, `0.005`, `0.2143`).
fn fraction(x: f64) -> String {
    let s = format!("{x:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `json lines` and the paths given, as a Kafka source's format says them.
fn json_lines_text(paths: &[crate::connector::JsonPath]) -> String {
    let f = crate::connector::RecordFormat::Json {
        paths: paths.to_vec(),
    };
    f.to_string().replacen("json", "json lines", 1)
}

fn source_text(spec: &SourceSpec) -> String {
    match spec {
        SourceSpec::Csv { path, header } => format!(
            "csv {}{}",
            path.display(),
            if *header { " (header)" } else { "" }
        ),
        SourceSpec::Binary { path } => format!("binary {}", path.display()),
        SourceSpec::JsonLines { path, paths } => {
            format!("{} {}", json_lines_text(paths), path.display())
        }
        SourceSpec::Late { of } => format!("the late rows of plan {of}"),
        SourceSpec::Stdin => "stdin (csv)".to_string(),
        SourceSpec::Tcp { addr } => format!("tcp {addr} (csv lines)"),
        SourceSpec::Generator(g) => format!(
            "generator {} tuples, {} keys, {:.2}% type 2, {} tuples/s of event time, seed {}",
            g.tuples,
            g.keys,
            g.broadcast * 100.0,
            g.rate,
            g.seed
        ),
        SourceSpec::Memory(b) => format!("memory ({} rows)", b.len()),
        SourceSpec::Native(n) => format!("native source `{n}`"),
        SourceSpec::Kafka(k) => k.to_string(),
        SourceSpec::Columnar { path, format } => format!("{format} {}", path.display()),
        SourceSpec::Interleave(children) => format!(
            "interleave of {} source(s) in ({}, stream, source order)",
            children.len(),
            match crate::interleave::by_time(children) {
                true => "epoch, event time",
                false => "epoch",
            }
        ),
    }
}

/// One line per interleaved source (nested interleaves indented below their parent).
fn interleave_text(children: &[crate::plan::Source], pad: &str, out: &mut String) {
    for (i, c) in children.iter().enumerate() {
        let _ = writeln!(
            out,
            "{pad}  _stream {i}: {} = {}  -> {}",
            c.name,
            source_text(&c.spec),
            c.schema
        );
        if let SourceSpec::Interleave(inner) = &c.spec {
            interleave_text(inner, &format!("{pad}  "), out);
        }
    }
}

fn route_text(s: &Split) -> String {
    match &s.route {
        Route::Expr {
            expr,
            when: Some(w),
        } => format!("{expr} when {w}"),
        Route::Expr { expr, when: None } => expr.to_string(),
        Route::Native(n) => format!("native `{n}`"),
        Route::RoundRobin => "round robin".to_string(),
        Route::Any => "any partition (each window whole, to a partition of the worker that splits it)"
            .to_string(),
        Route::Grid { left, rows, cols } => format!(
            "{rows} x {cols} grid: rows where {left} to grid row seq % {rows}, others to grid column seq % {cols}"
        ),
    }
}

fn split_text(s: &Split, workers: usize, pad: &str, out: &mut String) {
    let bcast = s
        .broadcast
        .as_ref()
        .map_or("none".to_string(), |b| b.to_string());
    let _ = writeln!(
        out,
        "{pad}Split: q = {}, route {}, broadcast {bcast}, strategy {}",
        s.q,
        route_text(s),
        s.strategy
    );
    let b = s.broadcast_share();
    let mix = Mix { r: 1.0 - b, b };
    let costs = SplitCosts {
        cc: s.hints.cost_ratio,
        cp: 0.5,
        ce: 0.5,
    };
    if let Some(m) = &s.hints.measured {
        let _ = writeln!(out, "{pad}  {m}");
    }
    if let Some(why) = &s.why {
        let _ = writeln!(out, "{pad}  autosplit chose {why}");
    }
    match &s.shape {
        None => {
            let _ = writeln!(out, "{pad}  shape: unresolved");
        }
        Some(SplitShape::Fsplit) => {
            let est = crate::cost::fsplit_cost(s.q, mix, &costs);
            let at = if matches!(s.input.as_ref(), Plan::Source(_)) {
                format!("one splitter on worker {FSPLIT_WORKER}")
            } else {
                "one splitter on each worker, where the earlier stage's rows are".to_string()
            };
            let _ = writeln!(
                out,
                "{pad}  shape: fsplit, {at}; est. cost {est:.3} per input tuple (b = {}, a = {})",
                fraction(b),
                fraction(s.hints.cost_ratio)
            );
        }
        Some(SplitShape::Tree(shape)) => {
            let levels = tree_levels(shape, mix, &costs);
            let hosts = Hosts::of(s, workers);
            let _ = writeln!(
                out,
                "{pad}  shape: tree, fanouts {:?} ({} leaves for q = {})",
                shape.fanouts,
                shape.leaves(),
                s.q
            );
            for l in &levels {
                let ws: Vec<u64> = (0..l.nodes.min(9))
                    .map(|n| tree_node_worker(shape, l.level, n, s.q, &hosts) as u64)
                    .collect();
                let _ = writeln!(
                    out,
                    "{pad}  level {}: {} node(s) x fanout {}, r = {:.4}, b = {:.4}, est. cost/node {:.3}; workers {}",
                    l.level,
                    l.nodes,
                    l.fanout,
                    l.r,
                    l.b,
                    l.cost_per_node,
                    list_of(&ws, l.nodes)
                );
            }
            let _ = writeln!(
                out,
                "{pad}  est. throughput {:.3} x emit capacity, total cost {:.3} per input tuple",
                tree_throughput(&levels, 1.0),
                tree_total_cost(&levels)
            );
            let roots = match s.input.as_ref() {
                Plan::Source(src) if crate::placement::read_on_every_worker(src, workers) => {
                    "a root on each worker, where it reads its share of the source"
                }
                Plan::Source(_) => "one root, on the worker of partition 0",
                _ => "a root on each worker, where the earlier stage's rows are",
            };
            let _ = writeln!(
                out,
                "{pad}  {roots}; in one process the levels run fused (a root routes each row to its leaf's worker), across processes level by level, a node on the worker of its first partition; the first node below the root whose subtree lies in one process (or a root in that process) sends a row straight to its partition's worker, the levels below it left out"
            );
        }
        Some(SplitShape::Parasplit { p, router_fanout }) => {
            let ws: Vec<u64> = (0..u64::from(*p).min(9))
                .map(|j| splitter_worker(j, workers) as u64)
                .collect();
            let local = match s.input.as_ref() {
                crate::plan::Plan::Source(src) => {
                    crate::placement::deals_locally(src, *p, *router_fanout, workers)
                }
                _ => false,
            };
            let routers = match router_fanout {
                Some(f) => format!("two-level router tree with {f} sub-routers"),
                None if local => "one window router per source worker, dealing to the splitters on its own worker (every worker reads its own share of the source)".to_string(),
                None => "one window router per source worker".to_string(),
            };
            let _ = writeln!(
                out,
                "{pad}  shape: parasplit, p = {p} window splitters, {routers}"
            );
            let _ = writeln!(out, "{pad}  splitters on workers {}; each partition merges its p inputs in serial order", list_of(&ws, u64::from(*p)));
        }
    }
}

/// The plan as a Graphviz digraph (one box per plan node; splits show their shape).
pub fn dot(plan: &Plan, registry: &Registry, workers: usize) -> String {
    let mut out = String::from(
        "digraph braid {\n  rankdir=BT;\n  node [shape=box, fontname=\"monospace\"];\n",
    );
    let mut id = 0;
    dot_node(plan, registry, workers, &mut id, &mut out);
    out.push_str("}\n");
    out
}

fn esc(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\l")
}

fn dot_node(
    plan: &Plan,
    registry: &Registry,
    workers: usize,
    id: &mut usize,
    out: &mut String,
) -> usize {
    let me = *id;
    *id += 1;
    let mut label = String::new();
    node_text_single(plan, registry, workers, &mut label);
    let _ = writeln!(out, "  n{me} [label=\"{}\\l\"];", esc(label.trim_end()));
    if let Some(input) = plan.input() {
        let child = dot_node(input, registry, workers, id, out);
        let _ = writeln!(out, "  n{child} -> n{me};");
    }
    me
}

pub(crate) fn node_text_single(plan: &Plan, registry: &Registry, workers: usize, out: &mut String) {
    let mut cx = Cx {
        registry,
        workers,
        note: &|_| None,
        out,
    };
    node_text(&mut cx, plan, NodeAt { plan: 0, depth: 0 }, 0, false);
}

/// How a latency constraint's budget is spent, as EXPLAIN words it.
pub const LATENCY_BUDGET: &str = "budget per edge: the source's ticks (windows of at most W rows, \
W set at run time to the largest that meets it; a paced source's window also goes once \
its oldest row has waited the flush timeout, what the constraint leaves the source once \
the rest of the path took its share), exchanges and operators pass a tick on as soon as \
it is complete; stage boundaries, keyed merges and results at the end of an epoch wait \
for the epoch";

/// A duration as EXPLAIN and reports write it: `250us`, `10ms`, `1.5s`.
pub fn duration_text(d: std::time::Duration) -> String {
    let us = d.as_micros();
    if us < 1000 {
        format!("{us}us")
    } else if us < 1_000_000 && us.is_multiple_of(1000) {
        format!("{}ms", us / 1000)
    } else if us < 1_000_000 {
        format!("{:.3}ms", us as f64 / 1000.0)
    } else {
        format!("{}s", d.as_secs_f64())
    }
}
