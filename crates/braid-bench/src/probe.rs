//! Braid's own pieces timed without the engine: making the generator's windows and one
//! splitter's work on them. The split benchmark turns these per-tuple costs into the
//! efficiency `η` of Paper V eq. 7 and a "generate + split, no engine" rate.

use anyhow::Result;
use braid_exec::render::{Window, WindowSplitter};
use braid_exec::source::generator::GeneratorFeed;
use braid_exec::source::{Feed, Next};
use braid_plan::function::Registry;
use braid_plan::plan::{GeneratorSpec, Plan, SourceSpec, Split};
use std::collections::HashMap;
use std::time::Instant;

/// Per-tuple costs in seconds (wall time of this one thread; the kernel's per-thread
/// CPU counters advance in scheduler ticks, too coarse here): making the generator's
/// windows as the engine's source does, and one splitter's work on them for each worker
/// count in `workers` (the engine's own `WindowSplitter`, as worker 0 of a process
/// holding all workers: the window is shared with the workers that have enough rows in
/// it, the others get copies, exactly as in a run). Every window is split right after
/// it is made, while it is in cache, as in the engine; the split's cost is the time of
/// a generate-and-split pass minus that of a generate-only pass. The least of `reps`
/// passes (the least disturbed) is kept.
pub fn probe_costs(
    spec: GeneratorSpec,
    window: usize,
    split: &Split,
    registry: &Registry,
    workers: &[usize],
    reps: usize,
) -> Result<(f64, Vec<f64>)> {
    let mut splitters = workers
        .iter()
        .map(|&w| Ok((w, WindowSplitter::new(split, registry, w, 0..w)?)))
        .collect::<Result<HashMap<usize, WindowSplitter>>>()?;
    let Plan::Source(mut source) =
        Plan::source("gen", SourceSpec::Generator(spec), GeneratorSpec::schema())
    else {
        unreachable!("Plan::source makes a source")
    };
    source.window = window;
    let n = spec.tuples.max(1) as f64;
    // One pass only generates; one pass per worker count generates and splits each
    // window at once; the split's cost is the difference (no per-window timers).
    let mut pass = |split_for: Option<usize>| -> Result<f64> {
        let mut feed = GeneratorFeed::new(spec, &source, 0, 1);
        let mut keep = Vec::new();
        let t = Instant::now();
        loop {
            match feed.next()? {
                Next::Window(_, batch) => match split_for.and_then(|w| splitters.get_mut(&w)) {
                    Some(s) => s.split(Window::new(0, 0, batch), &mut |w| keep.push(w)),
                    None => keep.push(Window::new(0, 0, batch)),
                },
                Next::Wait => {}
                Next::Done => break,
            }
        }
        let secs = t.elapsed().as_secs_f64();
        drop(keep);
        Ok(secs / n)
    };
    let mut best_gen = f64::INFINITY;
    let mut best_total = vec![f64::INFINITY; workers.len()];
    for _ in 0..reps.max(1) {
        best_gen = best_gen.min(pass(None)?);
        for (k, &w) in workers.iter().enumerate() {
            best_total[k] = best_total[k].min(pass(Some(w))?);
        }
    }
    let best_split = best_total.iter().map(|t| (t - best_gen).max(0.0)).collect();
    Ok((best_gen, best_split))
}
