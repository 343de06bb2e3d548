//! Plan resolution: picks the concrete shape of every split from its strategy, the
//! cost model and what is known about the input.

use crate::cost::{exptree, maxtree, parasplit_p, Mix};
use crate::plan::{Plan, Split, SplitShape, Strategy};

/// What resolution knows about where the plan runs.
#[derive(Clone, Copy, Debug)]
pub struct Env {
    /// Total workers (threads over all processes).
    pub workers: usize,
}

/// Sets `shape` on every split that has none.
pub fn resolve(plan: &mut Plan, env: Env) {
    match plan {
        Plan::Source(_) => {}
        Plan::Split(s) => {
            if s.shape.is_none() {
                s.shape = Some(shape_for(s, env));
            }
            resolve(&mut s.input, env);
        }
        Plan::Map(m) => resolve(&mut m.input, env),
        Plan::Merge(m) => resolve(&mut m.input, env),
        Plan::Sink(s) => resolve(&mut s.input, env),
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

fn shape_for(s: &Split, env: Env) -> SplitShape {
    let b = s.broadcast_share();
    let mix = Mix { r: 1.0 - b, b };
    let parasplit_default = || {
        let p = match (s.hints.desired_rate, s.hints.splitter_rate) {
            (Some(d), Some(one)) => parasplit_p(d, one, s.q, b.max(0.01)),
            _ => env.workers as u32,
        };
        parasplit(p)
    };
    match s.strategy {
        Strategy::Fsplit => SplitShape::Fsplit,
        Strategy::Maxtree => tree_or_fsplit(maxtree(s.q, mix, s.hints.cost_ratio).fanouts),
        Strategy::Exptree => tree_or_fsplit(exptree(s.q).fanouts),
        Strategy::Parasplit => parasplit_default(),
        Strategy::Autosplit => {
            let too_slow = matches!(
                (s.hints.desired_rate, s.hints.splitter_rate),
                (Some(d), Some(one)) if d > one
            );
            if too_slow {
                parasplit_default()
            } else if s.broadcast.is_some() {
                tree_or_fsplit(exptree(s.q).fanouts)
            } else {
                SplitShape::Fsplit
            }
        }
    }
}

fn tree_or_fsplit(fanouts: Vec<u32>) -> SplitShape {
    if fanouts.len() <= 1 {
        SplitShape::Fsplit
    } else {
        SplitShape::Tree(crate::cost::TreeShape { fanouts })
    }
}
