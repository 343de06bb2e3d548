//! Which worker hosts which logical node. Shared by the renderer and EXPLAIN so that
//! what EXPLAIN shows is what runs.

use crate::cost::TreeShape;
use crate::plan::Split;
use std::sync::Arc;

pub use crate::classes::{class_members, intersect};

/// Worker of logical partition `p` when the split has no placement table: `p % workers`
/// (timely's exchange maps a hash `h` to worker `h % workers`).
pub fn partition_worker(p: u64, workers: usize) -> usize {
    (p % workers as u64) as usize
}

/// `a % d` for a fixed 32-bit `d > 0` without a division: a mask for a power of two,
/// else two multiplications (Lemire, Kaser and Kurz, "Faster remainder by direct
/// computation", 2019).
#[derive(Clone, Copy, Debug)]
struct FastMod {
    d: u64,
    m: u64,
    mask: Option<u32>,
}

impl FastMod {
    fn new(d: u32) -> FastMod {
        let d = d.max(1);
        FastMod {
            d: u64::from(d),
            m: (u64::MAX / u64::from(d)).wrapping_add(1),
            mask: d.is_power_of_two().then_some(d - 1),
        }
    }

    #[inline]
    fn rem(self, a: u32) -> u32 {
        if let Some(mask) = self.mask {
            return a & mask;
        }
        let low = self.m.wrapping_mul(u64::from(a));
        ((u128::from(low) * u128::from(self.d)) >> 64) as u32
    }
}

/// Which worker hosts each logical partition of one split: the split's placement table
/// (set from measured costs, see [`balance`]) or, without one, [`partition_worker`].
#[derive(Clone, Debug)]
pub struct Hosts {
    table: Option<Arc<[u32]>>,
    workers: usize,
    modulo: FastMod,
}

impl Hosts {
    /// The hosts of `split`'s partitions among `workers` workers.
    pub fn of(split: &Split, workers: usize) -> Hosts {
        let workers = workers.max(1);
        Hosts {
            table: split.placement.clone(),
            workers,
            modulo: FastMod::new(workers as u32),
        }
    }

    /// Every one of `q` partitions on worker `w` of `workers`.
    pub fn on_one(w: u32, q: u32, workers: usize) -> Hosts {
        let workers = workers.max(1);
        Hosts {
            table: Some(vec![w; q as usize].into()),
            workers,
            modulo: FastMod::new(workers as u32),
        }
    }

    /// Worker of partition `p` (a table entry beyond the workers wraps around, so a
    /// table made for more workers still names a worker): [`partition_worker`] without
    /// a table. Called for every row a split routes, so it divides by multiplying.
    #[inline]
    pub fn worker(&self, p: u64) -> usize {
        let p = match &self.table {
            Some(t) => t[p as usize],
            None => p as u32,
        };
        self.modulo.rem(p) as usize
    }

    /// The partitions below `q` on worker `w`, ascending.
    pub fn partitions(&self, q: u32, w: usize) -> Vec<u32> {
        (0..q).filter(|&p| self.worker(p as u64) == w).collect()
    }

    /// Number of workers.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// Whether the partitions are placed by a table.
    pub fn is_table(&self) -> bool {
        self.table.is_some()
    }
}

/// Partition placement from measured costs: `costs[s][p]` is the measured cost of
/// partition `p` of split `s` (all splits of one plan share the workers). Partitions
/// are taken in decreasing cost, each to the worker with the least load so far (the
/// longest-processing-time rule: the busiest worker ends within 4/3 of the best
/// possible). Partitions with no measured cost keep `p % workers`: nothing says where
/// they should go, and that spreads them. Returns one table per split (the worker of
/// each partition) and the expected load per worker.
pub fn balance(costs: &[Vec<f64>], workers: usize) -> (Vec<Vec<u32>>, Vec<f64>) {
    let workers = workers.max(1);
    let mut tables: Vec<Vec<u32>> = costs
        .iter()
        .map(|c| {
            (0..c.len() as u64)
                .map(|p| partition_worker(p, workers) as u32)
                .collect()
        })
        .collect();
    let mut items: Vec<(f64, usize, usize)> = costs
        .iter()
        .enumerate()
        .flat_map(|(s, c)| c.iter().enumerate().map(move |(p, &x)| (x, s, p)))
        .filter(|&(x, _, _)| x > 0.0)
        .collect();
    // Decreasing cost; ties in (split, partition) order, so the result is reproducible.
    items.sort_by(|a, b| b.0.total_cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
    let mut load = vec![0.0f64; workers];
    for (x, s, p) in items {
        let w = (0..workers)
            .min_by(|&a, &b| load[a].total_cmp(&load[b]).then(a.cmp(&b)))
            .unwrap_or(0);
        load[w] += x;
        tables[s][p] = w as u32;
    }
    (tables, load)
}

/// The load per worker of placing `costs` (as in [`balance`]) by `p % workers`.
pub fn modulo_load(costs: &[Vec<f64>], workers: usize) -> Vec<f64> {
    let workers = workers.max(1);
    let mut load = vec![0.0f64; workers];
    for c in costs {
        for (p, &x) in c.iter().enumerate() {
            load[partition_worker(p as u64, workers)] += x;
        }
    }
    load
}

/// Breadth-first number of node `node` of tree level `level` (1-based).
pub fn tree_node_id(shape: &TreeShape, level: usize, node: u64) -> u64 {
    (1..level).map(|l| shape.nodes_at(l)).sum::<u64>() + node
}

/// Worker of node `node` of tree level `level` (1-based) of a split of `q` partitions
/// hosted by `hosts`: the worker of the first partition below it. A node of level `l`
/// holds the partitions `p = node mod λ_{l-1}` (the multi-level hash of Paper IV eq. 2),
/// so where they share a worker (or a process) the subtree stays there, and a row
/// crosses to another process at most where its subtree does. A node with no partition
/// below `q` (a branch of the last level left empty): breadth-first over the workers.
pub fn tree_node_worker(
    shape: &TreeShape,
    level: usize,
    node: u64,
    q: u32,
    hosts: &Hosts,
) -> usize {
    match node < u64::from(q) {
        true => hosts.worker(node),
        false => (tree_node_id(shape, level, node) % hosts.workers as u64) as usize,
    }
}

/// Worker of parasplit window splitter `j`.
pub fn splitter_worker(j: u64, workers: usize) -> usize {
    (j % workers as u64) as usize
}

/// Whether every worker reads its own share of a source's rows: the generator (window
/// `k` on worker `k % workers`), a CSV file (chunks dealt round-robin, read in shares
/// by every worker of every process; on one worker under a latency constraint, where
/// the dealing below then keeps every window on that worker), a Kafka topic
/// (partition `p` on worker `p % workers`) and an interleave of files numbered by file
/// (file `c` read whole on worker `c % workers`: [`files_per_worker`]).
pub fn read_on_every_worker(source: &crate::plan::Source, workers: usize) -> bool {
    use crate::plan::SourceSpec;
    workers > 1
        && (matches!(
            source.spec,
            SourceSpec::Generator(_) | SourceSpec::Csv { .. } | SourceSpec::Kafka(_)
        ) || files_per_worker(source))
}

/// Whether `source` is an interleave of files that several workers read a whole file
/// each (file `c` on worker `c % workers`): its rows are numbered by file
/// ([`crate::interleave::numbered_by_file`]: no file has an event time), so no worker
/// needs another's row counts, and every child is a file read from its start.
pub fn files_per_worker(source: &crate::plan::Source) -> bool {
    use crate::plan::SourceSpec;
    match &source.spec {
        SourceSpec::Interleave(kids) => {
            crate::interleave::numbered_by_file(kids, source.epoch)
                && kids.iter().all(|k| {
                    matches!(
                        k.spec,
                        SourceSpec::Csv { .. }
                            | SourceSpec::JsonLines { .. }
                            | SourceSpec::Columnar { .. }
                            | SourceSpec::Binary { .. }
                    )
                })
        }
        _ => false,
    }
}

/// The worker that reads file `child` of an interleave read a file per worker.
pub fn file_worker(child: usize, workers: usize) -> usize {
    child % workers.max(1)
}

/// Whether parasplit's window routers deal windows to the splitters on their own
/// worker: when every worker reads its own share of the source
/// ([`read_on_every_worker`]), there is one router level, and every worker hosts a
/// splitter (`p >= workers`). Per worker the load is then the same as dealing over all
/// splitters, and no window crosses to another core before it is split.
pub fn deals_locally(
    source: &crate::plan::Source,
    p: u32,
    router_fanout: Option<u32>,
    workers: usize,
) -> bool {
    read_on_every_worker(source, workers) && router_fanout.is_none() && p as usize >= workers
}

/// Worker of the single fsplit splitter.
pub const FSPLIT_WORKER: usize = 0;

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree node sits on the worker of the first partition below it: where the
    /// workers divide its level's modulus, every partition below it is on that worker,
    /// so nothing below it crosses to another worker; a placement table moves it with
    /// its first partition.
    #[test]
    fn a_tree_node_sits_with_the_partitions_below_it() {
        use crate::cost::exptree;
        let split = |placement: Option<Arc<[u32]>>| {
            let schema = crate::types::Schema::new(vec![crate::types::Field::new(
                "k",
                crate::types::DataType::Int64,
            )]);
            let crate::plan::Plan::Split(mut s) =
                crate::plan::Plan::source("s", crate::plan::SourceSpec::Native("s".into()), schema)
                    .split(
                        64,
                        crate::plan::Route::Any,
                        None,
                        crate::plan::Strategy::Exptree,
                    )
            else {
                unreachable!()
            };
            s.placement = placement;
            s
        };
        let shape = exptree(64);
        assert!(shape.depth() >= 3);
        for workers in [2usize, 4] {
            let hosts = Hosts::of(&split(None), workers);
            for level in 2..=shape.depth() {
                let m = shape.lambda(level - 1);
                if !m.is_multiple_of(workers as u64) {
                    continue;
                }
                for node in 0..m.min(64) {
                    let w = tree_node_worker(&shape, level, node, 64, &hosts);
                    for p in (node..64).step_by(m as usize) {
                        assert_eq!(
                            hosts.worker(p),
                            w,
                            "level {level} node {node}, partition {p}"
                        );
                    }
                }
            }
        }
        // Odd partitions on worker 0, even on worker 1: the nodes follow them.
        let table: Arc<[u32]> = (0..64u32).map(|p| 1 - p % 2).collect();
        let hosts = Hosts::of(&split(Some(table)), 2);
        assert_eq!(tree_node_worker(&shape, 2, 0, 64, &hosts), 1);
        assert_eq!(tree_node_worker(&shape, 2, 1, 64, &hosts), 0);
        assert_eq!(tree_node_worker(&shape, 3, 5, 64, &hosts), 0);
    }

    #[test]
    fn fast_remainder_equals_the_remainder() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for d in (1..=300u32).chain([1 << 20, (1 << 31) - 1, 1 << 31, u32::MAX]) {
            let m = FastMod::new(d);
            for a in [0, 1, d - 1, d, d.wrapping_add(1), u32::MAX, u32::MAX - 1] {
                assert_eq!(m.rem(a), a % d, "{a} % {d}");
            }
            for _ in 0..200 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let a = x as u32;
                assert_eq!(m.rem(a), a % d, "{a} % {d}");
            }
        }
    }

    /// The longest-processing-time rule: every measured partition placed, the busiest
    /// worker within 4/3 of the lower bound (the larger of the mean load and the
    /// costliest partition), a hot partition alone, unmeasured partitions on
    /// `p % workers`, and the same result every time.
    #[test]
    fn balance_spreads_measured_cost() {
        let mut x = 12345u64;
        for case in 0..200 {
            let workers = 1 + case % 5;
            let costs: Vec<Vec<f64>> = (0..1 + case % 3)
                .map(|s| {
                    (0..1 + (case * 7 + s) % 40)
                        .map(|_| {
                            x = x
                                .wrapping_mul(6364136223846793005)
                                .wrapping_add(1442695040888963407);
                            if (x >> 60) < 3 {
                                0.0
                            } else {
                                ((x >> 33) % 1000) as f64
                            }
                        })
                        .collect()
                })
                .collect();
            let (tables, load) = balance(&costs, workers);
            assert_eq!(balance(&costs, workers), (tables.clone(), load.clone()));
            let mut check = vec![0.0; workers];
            for (c, t) in costs.iter().zip(&tables) {
                assert_eq!(c.len(), t.len());
                for (p, (&x, &w)) in c.iter().zip(t).enumerate() {
                    assert!((w as usize) < workers);
                    if x == 0.0 {
                        assert_eq!(w as usize, p % workers, "unmeasured partition {p}");
                    }
                    check[w as usize] += x;
                }
            }
            assert_eq!(check, load);
            let total: f64 = load.iter().sum();
            let biggest = costs.iter().flatten().cloned().fold(0.0, f64::max);
            let bound = (total / workers as f64).max(biggest);
            let busiest = load.iter().cloned().fold(0.0, f64::max);
            assert!(busiest <= bound * 4.0 / 3.0 + 1e-9, "{busiest} vs {bound}");
        }
        // One hot partition: alone on its worker, the rest on the other.
        let (t, load) = balance(
            &[vec![10.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]],
            2,
        );
        assert!((1..10).all(|p| t[0][p] != t[0][0]), "{t:?}");
        assert_eq!(load.iter().cloned().fold(0.0, f64::max), 10.0);
        assert_eq!(
            modulo_load(&[vec![10.0, 1.0, 1.0, 1.0]], 2),
            vec![11.0, 2.0]
        );
    }

    /// Only a source every worker reads evenly, one router level and a splitter on
    /// every worker deal windows locally.
    #[test]
    fn local_dealing_needs_an_even_source() {
        use crate::plan::{GeneratorSpec, Plan, Source, SourceSpec};
        use crate::types::Schema;
        let of = |spec: SourceSpec| -> Source {
            match Plan::source("s", spec, Schema::ints(&["x"])) {
                Plan::Source(s) => s,
                _ => unreachable!("Plan::source makes a source"),
            }
        };
        let gen = of(SourceSpec::Generator(GeneratorSpec {
            tuples: 10,
            rate: 1.0,
            keys: 4,
            broadcast: 0.0,
            seed: 1,
        }));
        let stdin = of(SourceSpec::Stdin);
        assert!(deals_locally(&gen, 2, None, 2));
        assert!(deals_locally(&gen, 5, None, 4));
        assert!(
            !deals_locally(&gen, 1, None, 2),
            "a worker without a splitter"
        );
        assert!(!deals_locally(&gen, 32, Some(6), 2), "a router tree");
        assert!(!deals_locally(&stdin, 2, None, 2), "one reader");
        let csv = of(SourceSpec::Csv {
            path: "x.csv".into(),
            header: true,
        });
        assert!(deals_locally(&csv, 2, None, 2), "a file read in shares");
        assert!(
            !deals_locally(&csv, 4, None, 1),
            "one worker reads it whole"
        );
        // Files without an event time, a file per worker; with an event time (merged
        // by time) or beside standard input, on worker 0.
        let files = |timed: bool, other: SourceSpec| {
            let schema = match timed {
                true => Schema::ints(&["x"]).with_event_time("x").expect("x"),
                false => Schema::ints(&["x"]),
            };
            let mut kids = vec![csv.clone(), of(other)];
            for k in &mut kids {
                k.schema = schema.clone();
            }
            let wide = crate::interleave::schema(&kids).expect("schema");
            match Plan::source("many", SourceSpec::Interleave(kids), wide) {
                Plan::Source(s) => s,
                _ => unreachable!("Plan::source makes a source"),
            }
        };
        let json = || SourceSpec::JsonLines {
            path: "y.jsonl".into(),
            paths: Vec::new(),
        };
        assert!(files_per_worker(&files(false, json())));
        assert!(deals_locally(&files(false, json()), 2, None, 2));
        assert!(!files_per_worker(&files(true, json())), "merged by time");
        assert!(!files_per_worker(&files(false, SourceSpec::Stdin)), "stdin");
        assert!(!read_on_every_worker(&files(false, json()), 1));
    }
}
