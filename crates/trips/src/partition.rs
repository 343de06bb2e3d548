//! The spatial partitioners of Paper III over the 4-dimensional request space (origin
//! x, y, destination x, y), for any number of partitions q:
//!
//! - **point quad** (PQ): each dimension is cut at quantiles of the history, the same
//!   cuts everywhere (the paper's 16 regions are q = 16: every dimension at its
//!   median). q is factored into per-dimension counts whose product is q (64 = 4 x 4 x
//!   2 x 2), and a point's partition is its cell's number in the grid;
//! - **KD**: dimensions one after the other, each cell cut at the *local* quantile of
//!   the history rows in it, so that both sides get their share (q = 16: the paper's
//!   four levels of medians). A cell of q partitions is cut into q / 2 and q - q / 2.
//!
//! Static versions (SPQ, SKD) learn their cuts once from a history (say yesterday's
//! requests). Adaptive ones (APQ, AKD) learn them again every `period` seconds from the
//! requests of the last `window` seconds, and route the requests that come after by
//! the new cuts; an assigned request never moves. Until their first cuts they deal
//! requests round robin.
//!
//! All of them are [`braid_plan::router::Router`]s: a plan runs them in a stage of
//! their own that sees the requests in serial order (see [`braid_plan::router`]).

use braid_plan::batch::Value;
use braid_plan::error::{Error, Result};
use braid_plan::router::{Router, RouterFactory};
use braid_plan::types::DataType;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

/// A point of the request space.
pub type Point = [f64; 4];

/// How a partitioner cuts the space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Method {
    /// Point quad: the same quantile cuts per dimension everywhere.
    PointQuad,
    /// KD: each cell cut at its own local quantile, dimension after dimension.
    Kd,
}

/// Cuts learned from a set of points, for q partitions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Cuts {
    /// Per dimension: the sorted cut values (one fewer than its count) and the stride
    /// of its digit in the cell number.
    Grid {
        /// Cuts of each dimension.
        cuts: [Vec<f64>; 4],
        /// Cell-number stride of each dimension.
        stride: [u64; 4],
    },
    /// A KD tree: nodes, the root first.
    Kd(Vec<KdNode>),
}

/// A node of a KD tree.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum KdNode {
    /// A partition.
    Leaf(u64),
    /// Points with `p[dim] < cut` go to node `left`, the others to `right`.
    Cut {
        /// The dimension.
        dim: usize,
        /// The cut value.
        cut: f64,
        /// Index of the lower side's node.
        left: usize,
        /// Index of the upper side's node.
        right: usize,
    },
}

/// The per-dimension counts of a point-quad grid of `q` cells: q's prime factors,
/// largest first, each to the dimension with the fewest cells so far.
pub fn grid_counts(q: u32) -> [u32; 4] {
    let mut counts = [1u32; 4];
    let mut primes = Vec::new();
    let (mut n, mut p) = (q.max(1), 2);
    while n > 1 {
        if n % p == 0 {
            primes.push(p);
            n /= p;
        } else {
            p += 1;
        }
    }
    primes.reverse();
    for p in primes {
        let d = (0..4).min_by_key(|&d| (counts[d], d)).expect("four");
        counts[d] *= p;
    }
    counts
}

impl Cuts {
    /// The cuts of `method` for `q` partitions learned from `points` (reordered).
    pub fn fit(method: Method, points: &mut [Point], q: u32) -> Cuts {
        match method {
            Method::PointQuad => {
                let counts = grid_counts(q);
                let mut cuts: [Vec<f64>; 4] = Default::default();
                let mut stride = [0u64; 4];
                let mut s = 1u64;
                for d in 0..4 {
                    stride[d] = s;
                    s *= u64::from(counts[d]);
                    let mut v: Vec<f64> = points.iter().map(|p| p[d]).collect();
                    v.sort_unstable_by(f64::total_cmp);
                    let c = counts[d] as usize;
                    cuts[d] = (1..c)
                        .map(|i| v.get(i * v.len() / c).copied().unwrap_or(0.0))
                        .collect();
                }
                Cuts::Grid { cuts, stride }
            }
            Method::Kd => {
                let mut nodes = Vec::new();
                let mut next_leaf = 0;
                kd(points, q.max(1), 0, &mut nodes, &mut next_leaf);
                Cuts::Kd(nodes)
            }
        }
    }

    /// The partition of point `p`.
    pub fn cell(&self, p: &Point) -> u64 {
        match self {
            Cuts::Grid { cuts, stride } => (0..4)
                .map(|d| cuts[d].partition_point(|&c| c <= p[d]) as u64 * stride[d])
                .sum(),
            Cuts::Kd(nodes) => {
                let mut i = 0;
                loop {
                    match nodes[i] {
                        KdNode::Leaf(l) => return l,
                        KdNode::Cut {
                            dim,
                            cut,
                            left,
                            right,
                        } => i = if p[dim] < cut { left } else { right },
                    }
                }
            }
        }
    }
}

/// Builds the KD subtree of a cell of `q` partitions over `points`; its index.
fn kd(
    points: &mut [Point],
    q: u32,
    depth: usize,
    nodes: &mut Vec<KdNode>,
    leaf: &mut u64,
) -> usize {
    let at = nodes.len();
    if q == 1 {
        nodes.push(KdNode::Leaf(*leaf));
        *leaf += 1;
        return at;
    }
    let dim = depth % 4;
    let lo = q / 2;
    // The local quantile: the first point of the upper side, after sorting by `dim`.
    let k = points.len() * lo as usize / q as usize;
    points.sort_unstable_by(|a, b| a[dim].total_cmp(&b[dim]));
    let cut = points.get(k).map_or(0.0, |p| p[dim]);
    // Equal values all go up, as `cell` sends them.
    let split = points.partition_point(|p| p[dim] < cut);
    nodes.push(KdNode::Leaf(0)); // replaced below
    let (l, r) = points.split_at_mut(split);
    let left = kd(l, lo, depth + 1, nodes, leaf);
    let right = kd(r, q - lo, depth + 1, nodes, leaf);
    nodes[at] = KdNode::Cut {
        dim,
        cut,
        left,
        right,
    };
    at
}

/// The four coordinates of a router call's arguments `from`..`from + 4`.
fn point(args: &[Value<'_>], from: usize) -> std::result::Result<Point, String> {
    let mut p = [0.0; 4];
    for (d, x) in p.iter_mut().enumerate() {
        *x = match args[from + d] {
            Value::Int(i) => i as f64,
            Value::Float(f) if f.is_finite() => f,
            Value::Null => return Err("a coordinate is null".into()),
            v => return Err(format!("coordinate {v:?} is not a finite number")),
        };
    }
    Ok(p)
}

fn numeric(t: DataType) -> bool {
    matches!(t, DataType::Int64 | DataType::Float64)
}

/// SPQ or SKD: cuts learned once from a history, per partition count.
pub struct Static {
    method: Method,
    history: Arc<Vec<Point>>,
    fitted: Mutex<BTreeMap<u32, Arc<Cuts>>>,
}

impl Static {
    /// The static partitioner of `method` learning from `history`.
    pub fn new(method: Method, history: Arc<Vec<Point>>) -> Static {
        Static {
            method,
            history,
            fitted: Mutex::new(BTreeMap::new()),
        }
    }

    /// The cuts for q partitions (learned once per q).
    pub fn cuts(&self, q: u32) -> Arc<Cuts> {
        let mut m = self.fitted.lock().unwrap_or_else(|e| e.into_inner());
        m.entry(q)
            .or_insert_with(|| {
                let mut pts = self.history.as_ref().clone();
                Arc::new(Cuts::fit(self.method, &mut pts, q))
            })
            .clone()
    }
}

struct StaticRouter(Arc<Cuts>);

impl Router for StaticRouter {
    fn route(&mut self, args: &[Value<'_>]) -> std::result::Result<Option<u64>, String> {
        Ok(Some(self.0.cell(&point(args, 0)?)))
    }
    fn save(&self, _: &mut Vec<u8>) -> Result<()> {
        Ok(()) // nothing changes while it runs
    }
    fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        match bytes.is_empty() {
            true => Ok(()),
            false => Err(Error::Plan(
                "a static partitioner saves nothing; this state is another's".into(),
            )),
        }
    }
}

impl RouterFactory for Static {
    fn check_args(&self, args: &[DataType]) -> Result<()> {
        match args.len() == 4 && args.iter().all(|&t| numeric(t)) {
            true => Ok(()),
            false => Err(Error::Plan(
                "takes the four coordinates (origin x, y, destination x, y) as numbers".into(),
            )),
        }
    }
    fn create(&self, partitions: u32) -> Box<dyn Router> {
        Box::new(StaticRouter(self.cuts(partitions)))
    }
    fn checkpoints(&self) -> bool {
        true
    }
}

/// APQ or AKD: cuts learned again every `period` seconds from the last `window`
/// seconds of requests.
#[derive(Clone, Copy, Debug)]
pub struct Adaptive {
    /// How it cuts.
    pub method: Method,
    /// The history it learns from, seconds (Paper III: 600).
    pub window: i64,
    /// How often it learns again, seconds (Paper III: 600).
    pub period: i64,
}

/// An adaptive router's state.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct AdaptiveRouter {
    method: Method,
    window: i64,
    period: i64,
    q: u32,
    /// Requests of the recent past: time and point.
    history: VecDeque<(i64, Point)>,
    cuts: Option<Cuts>,
    /// When it learns next (set by the first request).
    next: Option<i64>,
    /// Requests dealt round robin before the first cuts.
    dealt: u64,
    /// How many times it learned.
    fits: u64,
}

impl AdaptiveRouter {
    fn learn(&mut self, at: i64) {
        while self
            .history
            .front()
            .is_some_and(|&(t, _)| t < at - self.window)
        {
            self.history.pop_front();
        }
        // At least one point per partition, or it keeps the cuts it had.
        if self.history.len() >= self.q as usize {
            let mut pts: Vec<Point> = self.history.iter().map(|&(_, p)| p).collect();
            self.cuts = Some(Cuts::fit(self.method, &mut pts, self.q));
            self.fits += 1;
        }
    }
}

impl Router for AdaptiveRouter {
    fn route(&mut self, args: &[Value<'_>]) -> std::result::Result<Option<u64>, String> {
        let t = match args[0] {
            Value::Int(t) => t,
            v => return Err(format!("the request time {v:?} is not an integer")),
        };
        let p = point(args, 1)?;
        let next = *self
            .next
            .get_or_insert((t.div_euclid(self.period) + 1) * self.period);
        if t >= next {
            // Learn at the last boundary passed (the ones before it would be
            // replaced at once), from what came before it.
            let at = next + (t - next).div_euclid(self.period) * self.period;
            self.learn(at);
            self.next = Some(at + self.period);
        }
        self.history.push_back((t, p));
        Ok(Some(match &self.cuts {
            Some(c) => c.cell(&p),
            None => {
                self.dealt += 1;
                (self.dealt - 1) % u64::from(self.q.max(1))
            }
        }))
    }

    fn save(&self, out: &mut Vec<u8>) -> Result<()> {
        bincode::serialize_into(out, self)
            .map_err(|e| Error::Plan(format!("saving an adaptive partitioner: {e}")))
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        let s: AdaptiveRouter = bincode::deserialize(bytes).map_err(|e| {
            Error::Plan(format!(
                "the saved state is not an adaptive partitioner's: {e}"
            ))
        })?;
        if (s.method, s.window, s.period, s.q) != (self.method, self.window, self.period, self.q) {
            return Err(Error::Plan(
                "the saved adaptive partitioner had other parameters".into(),
            ));
        }
        *self = s;
        Ok(())
    }
}

impl RouterFactory for Adaptive {
    fn check_args(&self, args: &[DataType]) -> Result<()> {
        match args.len() == 5 && args[0] == DataType::Int64 && args[1..].iter().all(|&t| numeric(t)) {
            true => Ok(()),
            false => Err(Error::Plan(
                "takes the request time (BIGINT) and the four coordinates (origin x, y, destination x, y) as numbers".into(),
            )),
        }
    }
    fn create(&self, partitions: u32) -> Box<dyn Router> {
        Box::new(AdaptiveRouter {
            method: self.method,
            window: self.window.max(1),
            period: self.period.max(1),
            q: partitions.max(1),
            history: VecDeque::new(),
            cuts: None,
            next: None,
            dealt: 0,
            fits: 0,
        })
    }
    fn checkpoints(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cloud(n: usize, seed: u64) -> Vec<Point> {
        // A skewed cloud: squares of uniform numbers, so medians are not in the middle.
        let mut x = seed | 1;
        let mut u = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64
        };
        (0..n)
            .map(|_| {
                let a = u();
                [
                    a * a * 40_000.0,
                    u() * 10_000.0,
                    u().sqrt() * 5_000.0,
                    u() * u() * 1e6,
                ]
            })
            .collect()
    }

    #[test]
    fn grid_counts_multiply_to_q() {
        assert_eq!(grid_counts(16), [2, 2, 2, 2]);
        assert_eq!(grid_counts(64), [4, 4, 2, 2]);
        assert_eq!(grid_counts(8), [2, 2, 2, 1]);
        assert_eq!(grid_counts(1), [1, 1, 1, 1]);
        for q in 1..200u32 {
            assert_eq!(grid_counts(q).iter().product::<u32>(), q);
        }
    }

    #[test]
    fn kd_balances_its_history_exactly_and_pq_by_dimension() {
        let pts = cloud(64_000, 7);
        for q in [2u32, 3, 4, 7, 16, 64] {
            let cuts = Cuts::fit(Method::Kd, &mut pts.clone(), q);
            let mut n = vec![0usize; q as usize];
            for p in &pts {
                n[cuts.cell(p) as usize] += 1;
            }
            let (lo, hi) = (*n.iter().min().unwrap(), *n.iter().max().unwrap());
            // Every leaf holds its share of the history to a point or two per level.
            let share = pts.len() / q as usize;
            assert!(hi - lo <= 8, "q = {q}: {n:?}");
            assert!(lo + 8 >= share, "q = {q}: {n:?}");
        }
        // Point quad with q = 16: each dimension's median halves the history.
        let cuts = Cuts::fit(Method::PointQuad, &mut pts.clone(), 16);
        let Cuts::Grid { cuts: c, .. } = &cuts else {
            panic!("a grid")
        };
        for d in 0..4 {
            let below = pts.iter().filter(|p| p[d] < c[d][0]).count();
            assert!((below as i64 - 32_000).abs() <= 1, "dim {d}: {below}");
        }
        // Every point has a cell below q.
        assert!(pts.iter().all(|p| cuts.cell(p) < 16));
    }

    #[test]
    fn an_adaptive_router_learns_at_period_boundaries_and_never_moves_a_request() {
        let f = Adaptive {
            method: Method::Kd,
            window: 600,
            period: 600,
        };
        let mut r = f.create(4);
        let pts = cloud(3_000, 3);
        let mut first = Vec::new();
        for (i, p) in pts.iter().enumerate() {
            let t = i as i64; // one a second: boundaries at 600, 1200, ...
            let args = [
                Value::Int(t),
                Value::Float(p[0]),
                Value::Float(p[1]),
                Value::Float(p[2]),
                Value::Float(p[3]),
            ];
            first.push(r.route(&args).unwrap().unwrap());
        }
        // Before the first boundary: round robin.
        assert!(first[..600]
            .iter()
            .enumerate()
            .all(|(i, &c)| c == i as u64 % 4));
        // After it, the cuts of the 600 requests before each boundary: they balance
        // the next period's requests (the same distribution) roughly.
        let mut n = [0usize; 4];
        for &c in &first[600..1200] {
            n[c as usize] += 1;
        }
        assert!(n.iter().all(|&x| (100..=200).contains(&x)), "{n:?}");
        // What it decided is a function of the requests before: a router restored
        // from a save at row 1500 goes on deciding exactly as the first did.
        let mut a = f.create(4);
        let mut saved = Vec::new();
        let args = |i: usize| {
            let p = pts[i];
            [
                Value::Int(i as i64),
                Value::Float(p[0]),
                Value::Float(p[1]),
                Value::Float(p[2]),
                Value::Float(p[3]),
            ]
        };
        for i in 0..1500 {
            a.route(&args(i)).unwrap();
        }
        a.save(&mut saved).unwrap();
        let mut b = f.create(4);
        b.restore(&saved).unwrap();
        for (i, &want) in first.iter().enumerate().skip(1500) {
            assert_eq!(b.route(&args(i)).unwrap(), Some(want), "row {i}");
        }
        // Another partition count's state is refused.
        assert!(f.create(8).restore(&saved).is_err());
    }
}
