//! `braid run --profile`: the run's profile as tables on standard error (the library
//! measures; this only lays the figures out), and `braid explain --analyze`.

use braid_exec::profile::{node_label, Profile};
use braid_exec::runtime::RunReport;
use comfy_table::{presets, CellAlignment, Table};
use std::fmt::Write;

/// How many partitions the table of the hottest lists.
const TOP_PARTITIONS: usize = 10;

/// The profile of `run` (empty if it was not profiled): every operator on every worker,
/// the workers' busy time, and the partitions that took the most time.
pub fn tables(run: &RunReport) -> String {
    let (Some(p), Some(plan)) = (&run.profile, &run.plan) else {
        return String::new();
    };
    let mut out = String::new();
    let wall = |w: usize| {
        p.workers
            .iter()
            .find(|x| x.worker == w)
            .map_or(0, |x| x.wall)
    };
    let mut ops = table(&[
        "operator",
        "timely operator",
        "worker",
        "activations",
        "ms",
        "busy %",
        "rows out",
    ]);
    // Plan order, as EXPLAIN prints it (the root first), then the others.
    let mut sorted: Vec<_> = p.operators.iter().collect();
    sorted.sort_by_key(|o| (o.node.is_none(), o.node, o.worker, o.id));
    for o in sorted {
        let figures = o.node.and_then(|at| p.node(at, Some(o.worker)));
        let rows = |r: Option<u64>| r.map_or(String::new(), |n| n.to_string());
        ops.add_row(vec![
            o.node
                .and_then(|at| node_label(plan, at))
                .unwrap_or_else(|| "-".into()),
            o.name.clone(),
            o.worker.to_string(),
            o.activations.to_string(),
            ms(o.nanos),
            percent(o.nanos, wall(o.worker)),
            rows(figures.as_ref().and_then(|f| f.rows_out)),
        ]);
    }
    let _ = writeln!(
        out,
        "braid: profile: time in each operator on each worker (rows: what the plan node put out there)\n{ops}"
    );
    let mut workers = table(&["worker", "wall ms", "busy ms", "busy %"]);
    for w in &p.workers {
        workers.add_row(vec![
            w.worker.to_string(),
            ms(w.wall),
            ms(w.busy),
            percent(w.busy, w.wall),
        ]);
    }
    let _ = writeln!(
        out,
        "braid: profile: workers (busy: running operators)\n{workers}"
    );
    out.push_str(&partitions(p));
    out
}

/// The partitions that took the most time in their stream function.
fn partitions(p: &Profile) -> String {
    let hottest = p.hottest_partitions();
    if hottest.is_empty() {
        return String::new();
    }
    let total: u64 = hottest.iter().map(|c| c.nanos).sum();
    let mut t = table(&["stage", "partition", "rows", "ms", "% of partitions' time"]);
    for c in hottest.iter().take(TOP_PARTITIONS) {
        t.add_row(vec![
            (c.stage + 1).to_string(),
            c.partition.to_string(),
            c.rows.to_string(),
            ms(c.nanos),
            percent(c.nanos, total),
        ]);
    }
    format!(
        "braid: profile: the {} partition(s) with the most time, of {}\n{t}\n",
        hottest.len().min(TOP_PARTITIONS),
        hottest.len()
    )
}

fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::ASCII_MARKDOWN);
    t.set_header(header.to_vec());
    for i in 2..header.len() {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

fn ms(nanos: u64) -> String {
    format!("{:.2}", nanos as f64 / 1e6)
}

fn percent(part: u64, whole: u64) -> String {
    format!("{:.1}", part as f64 * 100.0 / whole.max(1) as f64)
}
