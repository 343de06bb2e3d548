//! Plan resolution: picks the concrete shape of every split from its strategy, the
//! cost model and what is known about the input.

use crate::cost::{
    exptree, fsplit_cost, maxtree, parasplit_p, tree_levels, tree_total_cost, Mix, SplitCosts,
    TreeShape,
};
use crate::plan::{Plan, Split, SplitShape, Strategy};

/// What resolution knows about where the plan runs.
#[derive(Clone, Copy, Debug)]
pub struct Env {
    /// Total workers (threads over all processes).
    pub workers: usize,
    /// Under a latency constraint ([`crate::plan::Sink::max_latency`]; `resolve` sets
    /// it from the sinks): a file is then read by one worker, and the controller may
    /// chain only stages fed by one splitter, so `autosplit` keeps one.
    pub constrained: bool,
}

impl Env {
    /// `workers` workers, no latency constraint known yet.
    pub fn workers(workers: usize) -> Env {
        Env {
            workers,
            constrained: false,
        }
    }
}

/// Sets `shape` on every split that has none.
pub fn resolve(plan: &mut Plan, env: Env) {
    match plan {
        Plan::Source(_) => {}
        Plan::Split(s) => {
            if s.shape.is_none() {
                let (shape, why) = shape_for(s, env);
                s.shape = Some(shape);
                s.why = why;
            }
            resolve(&mut s.input, env);
        }
        Plan::Map(m) => resolve(&mut m.input, env),
        Plan::Merge(m) => resolve(&mut m.input, env),
        Plan::Sink(s) => {
            let constrained = env.constrained || s.max_latency.is_some();
            resolve(&mut s.input, Env { constrained, ..env })
        }
        Plan::Together(plans) => plans.iter_mut().for_each(|p| resolve(p, env)),
    }
}

/// Parasplit with `p` splitters; more than 16 splitters get a two-level router tree of
/// about sqrt(p) sub-routers (Paper V section 4.1).
pub fn parasplit(p: u32) -> SplitShape {
    let p = p.max(1);
    let router_fanout = (p > 16).then(|| (p as f64).sqrt().ceil() as u32);
    SplitShape::Parasplit { p, router_fanout }
}

/// A split's shape by its strategy; `autosplit` also says why.
fn shape_for(s: &Split, env: Env) -> (SplitShape, Option<String>) {
    let b = s.broadcast_share();
    let mix = Mix { r: 1.0 - b, b };
    let shape = match s.strategy {
        Strategy::Fsplit => SplitShape::Fsplit,
        Strategy::Maxtree => tree_or_fsplit(maxtree(s.q, mix, s.hints.cost_ratio).fanouts),
        Strategy::Exptree => tree_or_fsplit(exptree(s.q).fanouts),
        Strategy::Parasplit => parasplit(parasplit_count(s, env)),
        Strategy::Autosplit => {
            let (shape, why) = autosplit(s, env);
            return (shape, Some(why));
        }
    };
    (shape, None)
}

/// Parasplit's window splitters: `p` from Paper V eq. 6 when the desired rate and one
/// splitter's measured rate are known, else one per worker. At most as many as there
/// are partitions or workers, whichever is more: a splitter beyond both adds no thread
/// and no destination, only an input for every partition to merge (a rate out of reach,
/// `SET desired_rate = '1e12'`, asks eq. 6 for millions).
fn parasplit_count(s: &Split, env: Env) -> u32 {
    match (s.hints.desired_rate, s.hints.splitter_rate) {
        (Some(d), Some(one)) => parasplit_p(d, one, s.q, s.broadcast_share().max(0.01))
            .min(s.q.max(env.workers as u32).max(1)),
        _ => env.workers as u32,
    }
}

/// What `autosplit` weighs for one candidate shape, per input row, in units of one
/// splitter's cost per row.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// The shape.
    pub shape: SplitShape,
    /// Work of all its splitters per input row.
    pub total: f64,
    /// Work per input row of its busiest splitter (its throughput is one splitter's
    /// measured rate over this).
    pub bottleneck: f64,
}

/// The candidate shapes of a split under Braid's splitters, and their costs: the cost
/// model of Paper IV eq. 1 and 4-8 (trees) and Paper V eq. 2-4 (parasplit), with the one
/// difference that a Braid splitter emits a broadcast row once per destination worker,
/// not once per partition (the `Map` of each worker makes the partitions' copies): a
/// node's `q` in eq. 1 is the number of workers its outputs are on. `a` (the split's
/// `cost_ratio`) weighs consuming a row against processing and emitting it.
pub fn split_candidates(s: &Split, env: Env) -> Vec<Candidate> {
    let b = s.broadcast_share();
    let mix = Mix { r: 1.0 - b, b };
    let workers = env.workers.max(1) as u32;
    let a = s.hints.cost_ratio.max(0.0);
    // cc = a, cp + ce = 1, the consume cost of one row's share of a whole window
    // (parasplit's router) negligible.
    let costs = SplitCosts {
        cc: a,
        cp: 0.5,
        ce: 0.5,
    };
    let one = fsplit_cost(s.q.min(workers), mix, &costs);
    // Each partition (or, for one splitter, the splitter) merges its inputs in serial
    // order: about one emit per row and input (Paper V eq. 4's poll and merge).
    let merge = |inputs: u32| f64::from(inputs) * costs.ce / one;
    // A source read on every worker (a file in shares, the generator): one splitter, or
    // a tree's root, first gathers every worker's windows (rows cross cores and are
    // merged there); parasplit deals each worker's windows to its own splitters.
    let readers = match s.input.as_ref() {
        Plan::Source(src)
            if !env.constrained && crate::placement::read_on_every_worker(src, env.workers) =>
        {
            workers
        }
        _ => 1,
    };
    let gather = match readers {
        1 => 0.0,
        r => merge(r) + f64::from(r - 1) / f64::from(r) * costs.ce / one,
    };
    let mut out = vec![Candidate {
        shape: SplitShape::Fsplit,
        total: 1.0 + gather,
        bottleneck: 1.0 + gather,
    }];
    for shape in [
        tree_or_fsplit(exptree(s.q).fanouts),
        tree_or_fsplit(maxtree(s.q, mix, s.hints.cost_ratio).fanouts),
    ] {
        let SplitShape::Tree(t) = &shape else {
            continue;
        };
        if out.iter().any(|c| c.shape == shape) {
            continue;
        }
        // Every level passes every routed row again; its nodes' outputs are on at most
        // `workers` workers.
        let capped = TreeShape {
            fanouts: t.fanouts.iter().map(|&f| f.min(workers)).collect(),
        };
        let levels = tree_levels(&capped, mix, &costs);
        let per_node = |l: &crate::cost::LevelEstimate| {
            // A level's nodes share its rows: spread over the workers, at most one each.
            l.cost_per_node * l.nodes as f64 / (l.nodes.min(u64::from(workers))) as f64
        };
        out.push(Candidate {
            shape,
            total: tree_total_cost(&levels) / one + gather,
            bottleneck: levels.iter().map(per_node).fold(0.0, f64::max) / one + gather,
        });
    }
    // p window splitters share the rows; each partition merges p inputs.
    let p = parasplit_count(s, env).max(2);
    out.push(Candidate {
        shape: parasplit(p),
        total: 1.0 + merge(p),
        bottleneck: 1.0 / f64::from(p).min(f64::from(workers)),
    });
    out
}

/// `autosplit`: the candidate of least total work whose busiest splitter keeps up with
/// the desired rate (one splitter's measured rate over its bottleneck), or, when none
/// keeps up, the fastest; without a desired rate and a measured splitter rate, the least
/// work. Returns the shape and the reason EXPLAIN prints.
pub fn autosplit(s: &Split, env: Env) -> (SplitShape, String) {
    let candidates = split_candidates(s, env);
    let listed = candidates
        .iter()
        .map(|c| {
            format!(
                "{} work {:.2} busiest {:.2}",
                shape_name(&c.shape),
                c.total,
                c.bottleneck
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let least = |cs: &mut dyn Iterator<Item = &Candidate>| {
        cs.min_by(|x, y| x.total.total_cmp(&y.total))
            .map(|c| c.shape.clone())
    };
    let (shape, why) = match (s.hints.desired_rate, s.hints.splitter_rate) {
        (Some(d), Some(one)) if one > 0.0 => {
            let keeps_up = |c: &&Candidate| one / c.bottleneck >= d;
            match least(&mut candidates.iter().filter(keeps_up)) {
                Some(shape) => (
                    shape,
                    format!("the least work that keeps up with {d:.0} rows/s (one splitter: {one:.0} rows/s)"),
                ),
                None => {
                    let fastest = candidates
                        .iter()
                        .min_by(|x, y| x.bottleneck.total_cmp(&y.bottleneck))
                        .map(|c| c.shape.clone())
                        .unwrap_or(SplitShape::Fsplit);
                    (
                        fastest,
                        format!("none keeps up with {d:.0} rows/s (one splitter: {one:.0} rows/s): the fastest"),
                    )
                }
            }
        }
        _ => (
            least(&mut candidates.iter()).unwrap_or(SplitShape::Fsplit),
            "no desired rate: the least work".to_string(),
        ),
    };
    (
        shape.clone(),
        format!(
            "{} ({why}; per row, in one splitter's work: {listed})",
            shape_name(&shape)
        ),
    )
}

/// A shape in a word and its parameters.
fn shape_name(shape: &SplitShape) -> String {
    match shape {
        SplitShape::Fsplit => "fsplit".into(),
        SplitShape::Tree(t) => format!("tree {:?}", t.fanouts),
        SplitShape::Parasplit { p, .. } => format!("parasplit p = {p}"),
    }
}

fn tree_or_fsplit(fanouts: Vec<u32>) -> SplitShape {
    if fanouts.len() <= 1 {
        SplitShape::Fsplit
    } else {
        SplitShape::Tree(crate::cost::TreeShape { fanouts })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::Expr;
    use crate::plan::{Route, SourceSpec};
    use crate::types::{DataType, Field, Schema};

    fn split(q: u32, broadcast: bool, rates: Option<(f64, f64)>) -> Split {
        let schema = Schema::new(vec![Field::new("k", DataType::Int64)]);
        let source = Plan::source("s", SourceSpec::Native("s".into()), schema);
        let route = Route::Expr {
            expr: Expr::Column(0, "k".into()),
            when: None,
        };
        let bcast = broadcast.then(|| Expr::Column(0, "k".into()).eq(Expr::int(0)));
        let Plan::Split(mut s) = source.split(q, route, bcast, Strategy::Autosplit) else {
            unreachable!()
        };
        if let Some((desired, one)) = rates {
            s.hints.desired_rate = Some(desired);
            s.hints.splitter_rate = Some(one);
        }
        s
    }

    /// [`split`] over a CSV file, which every worker reads a share of.
    fn csv_split(q: u32, broadcast: bool) -> Split {
        let mut s = split(q, broadcast, None);
        let Plan::Source(src) = s.input.as_mut() else {
            unreachable!()
        };
        src.spec = SourceSpec::Csv {
            path: "calls.csv".into(),
            header: true,
        };
        s
    }

    /// A file read in shares on every worker: one splitter would first gather every
    /// worker's windows, so parasplit (each worker's windows split where read) is less
    /// work and faster; on one worker, one splitter.
    #[test]
    fn a_source_read_on_every_worker_is_split_where_it_is_read() {
        let csv = |q: u32| csv_split(q, false);
        for q in [2, 16, 64] {
            let (shape, why) = autosplit(&csv(q), Env::workers(2));
            assert_eq!(shape, parasplit(2), "q = {q}: {why}");
            let (shape, why) = autosplit(&csv(q), Env::workers(1));
            assert_eq!(shape, SplitShape::Fsplit, "q = {q}: {why}");
        }
        // Read by one worker (stdin-like, here a native source): one splitter.
        let (shape, why) = autosplit(&split(16, false, None), Env::workers(2));
        assert_eq!(shape, SplitShape::Fsplit, "{why}");
        // Under a latency constraint, where stages fed by one splitter may be chained.
        let constrained = Env {
            constrained: true,
            ..Env::workers(2)
        };
        let (shape, why) = autosplit(&csv(16), constrained);
        assert_eq!(shape, SplitShape::Fsplit, "{why}");
    }

    /// One splitter unless the desired rate needs more: then parasplit, with p from
    /// eq. 6; a tree never (its root alone does one splitter's work); when nothing
    /// keeps up, the fastest candidate. EXPLAIN's reason says which case it was.
    #[test]
    fn autosplit_is_one_splitter_unless_a_desired_rate_needs_more() {
        let env = Env::workers(2);
        for (q, b) in [(8, false), (64, true), (512, true)] {
            let (shape, why) = autosplit(&split(q, b, None), env);
            assert_eq!(shape, SplitShape::Fsplit, "q = {q}: {why}");
            assert!(why.contains("no desired rate"), "{why}");
            let (shape, why) = autosplit(&split(q, b, Some((1e6, 2e6))), env);
            assert_eq!(shape, SplitShape::Fsplit, "q = {q}: {why}");
            assert!(why.contains("keeps up with 1000000"), "{why}");
            let (shape, why) = autosplit(&split(q, b, Some((3e6, 2e6))), env);
            assert!(
                matches!(shape, SplitShape::Parasplit { p, .. } if p >= 2),
                "{why}"
            );
            // Ten times one splitter's rate on two workers: nothing keeps up.
            let (shape, why) = autosplit(&split(q, b, Some((2e7, 2e6))), env);
            assert!(matches!(shape, SplitShape::Parasplit { .. }), "{why}");
            assert!(why.contains("none keeps up"), "{why}");
            for c in split_candidates(&split(q, b, None), env) {
                if let SplitShape::Tree(_) = c.shape {
                    assert!(c.total > 1.0 && c.bottleneck >= 1.0 - 1e-9, "{c:?}");
                }
            }
        }
    }

    /// Without a desired rate autosplit takes the least work, and which shape that is
    /// does not depend on the costs a split's measurement would give (the broadcast
    /// fraction b, a = cc / (cp + ce)): a tree passes every row at two levels or more,
    /// parasplit over a source read on every worker spares the gather, one splitter
    /// spares the merge. So the costs are measured only with a desired rate
    /// (`braid_exec::tune::measure_split_costs`), where they move the choice.
    #[test]
    fn without_a_desired_rate_the_choice_does_not_depend_on_the_costs() {
        for workers in [1, 2, 3, 4, 8] {
            for q in [2, 3, 8, 16, 64, 100, 512] {
                for broadcast in [false, true] {
                    for mut s in [split(q, broadcast, None), csv_split(q, broadcast)] {
                        let env = Env::workers(workers);
                        let (hinted, _) = autosplit(&s, env);
                        for b in [0.0, 0.001, 0.01, 0.1, 0.5, 1.0] {
                            for a in [0.0, 0.1, 0.5, 1.0, 2.0, 10.0] {
                                s.hints.broadcast_fraction = b;
                                s.hints.cost_ratio = a;
                                let (shape, why) = autosplit(&s, env);
                                assert_eq!(
                                    shape, hinted,
                                    "{workers} workers, q = {q}, b = {b}, a = {a}: {why}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
