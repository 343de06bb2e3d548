//! Which worker hosts which logical node. Shared by the renderer and EXPLAIN so that
//! what EXPLAIN shows is what runs.

use crate::cost::TreeShape;

/// Worker of logical partition `p`: `p % workers` (timely's exchange maps a hash `h`
/// to worker `h % workers`).
pub fn partition_worker(p: u64, workers: usize) -> usize {
    (p % workers as u64) as usize
}

/// Breadth-first number of node `node` of tree level `level` (1-based).
pub fn tree_node_id(shape: &TreeShape, level: usize, node: u64) -> u64 {
    (1..level).map(|l| shape.nodes_at(l)).sum::<u64>() + node
}

/// Worker of node `node` of tree level `level`: nodes are dealt to workers
/// breadth-first, so every level is spread over all workers.
pub fn tree_node_worker(shape: &TreeShape, level: usize, node: u64, workers: usize) -> usize {
    (tree_node_id(shape, level, node) % workers as u64) as usize
}

/// Worker of parasplit window splitter `j`.
pub fn splitter_worker(j: u64, workers: usize) -> usize {
    (j % workers as u64) as usize
}

/// Worker of the single fsplit splitter.
pub const FSPLIT_WORKER: usize = 0;
