//! The physical plan as boxes and edges, for pictures of it (the server's dashboard):
//! the nodes EXPLAIN prints, with a `Map`'s partitions grouped by worker, one box per
//! worker. Labels are EXPLAIN's first line of each node, without its schema.

use crate::explain::node_text_single;
use crate::function::Registry;
use crate::placement::Hosts;
use crate::plan::Plan;
use serde::Serialize;

/// One box.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct GraphNode {
    /// Its index in the graph.
    pub id: usize,
    /// `Source`, `Split`, `Map`, `Merge`, `Sink` or `Together`.
    pub kind: &'static str,
    /// What EXPLAIN says of it (first line, no schema); a `Map` box adds its worker's
    /// partitions.
    pub label: String,
    /// The worker a `Map` box stands for.
    pub worker: Option<usize>,
    /// How far from the plan's root (0) its plan node is, as EXPLAIN nests them.
    pub depth: usize,
    /// The boxes it reads from.
    pub inputs: Vec<usize>,
    /// Nanoseconds its operators have run so far, when measured (filled in by who
    /// measured them: the live session's profiler).
    pub nanos: Option<u64>,
    /// Rows it has put out so far, when counted.
    pub rows_out: Option<u64>,
    /// Workers it has operators on (its time spreads over them).
    pub on_workers: usize,
    /// How long after the source closed an epoch this node was done with it (its output
    /// frontier passed it), median and 99th percentile over recent epochs, in ms.
    pub latency_ms: Option<[f64; 2]>,
    /// Its output frontier now (the epochs before it are done), when known: epochs done
    /// at an edge's start and not at its end wait on that edge.
    pub frontier: Option<u64>,
}

/// `plan` on `workers` workers as a graph; the root is the last node.
pub fn graph(plan: &Plan, registry: &Registry, workers: usize) -> Vec<GraphNode> {
    let mut nodes = Vec::new();
    add(plan, registry, workers, 0, &mut nodes);
    nodes
}

/// Adds `plan` and what it reads; the ids of its boxes.
fn add(
    plan: &Plan,
    registry: &Registry,
    workers: usize,
    depth: usize,
    nodes: &mut Vec<GraphNode>,
) -> Vec<usize> {
    let inputs: Vec<usize> = match plan {
        Plan::Together(plans) => plans
            .iter()
            .flat_map(|p| add(p, registry, workers, depth + 1, nodes))
            .collect(),
        _ => plan
            .input()
            .map(|p| add(p, registry, workers, depth + 1, nodes))
            .unwrap_or_default(),
    };
    let mut text = String::new();
    node_text_single(plan, registry, workers, &mut text);
    let first = text.lines().next().unwrap_or("").trim();
    let label = first.split("  -> ").next().unwrap_or(first).to_string();
    let kind = match plan {
        Plan::Source(_) => "Source",
        Plan::Split(_) => "Split",
        Plan::Map(_) => "Map",
        Plan::Merge(_) => "Merge",
        Plan::Sink(_) => "Sink",
        Plan::Together(_) => "Together",
    };
    if let (Plan::Map(m), Plan::Split(split)) = (plan, plan.input().unwrap_or(plan)) {
        let hosts = Hosts::of(split, workers);
        return (0..workers)
            .map(|w| {
                let parts = hosts.partitions(split.q, w);
                let id = nodes.len();
                nodes.push(GraphNode {
                    id,
                    kind,
                    label: format!(
                        "Map: {}\nworker {w}: {} partitions",
                        m.function,
                        parts.len()
                    ),
                    worker: Some(w),
                    depth,
                    inputs: inputs.clone(),
                    nanos: None,
                    rows_out: None,
                    on_workers: 1,
                    latency_ms: None,
                    frontier: None,
                });
                id
            })
            .collect();
    }
    let id = nodes.len();
    nodes.push(GraphNode {
        id,
        kind,
        label,
        worker: None,
        depth,
        inputs,
        nanos: None,
        rows_out: None,
        on_workers: 0,
        latency_ms: None,
        frontier: None,
    });
    vec![id]
}
