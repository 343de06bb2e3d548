//! What the CLI says on standard error after a run: the library returns reports as data,
//! and these functions word them.

use braid_exec::calibrate::Calibration;
use braid_exec::runtime::RunReport;
use braid_exec::session::QueryReport;

/// A calibration's measurement and placement.
pub fn calibration(c: Option<&Calibration>) {
    if let Some(c) = c {
        eprint!("braid: {c}");
    }
}

/// Malformed records of every source that had any, and rows skipped on runtime faults.
pub fn rejects(report: &RunReport) {
    for r in report.rejects.iter().filter(|r| r.count > 0) {
        eprint!("{r}");
    }
    for f in &report.faults {
        eprint!("braid: {f}");
    }
}

/// Checkpoints: where the run resumed from, how many it took, their size and time.
pub fn checkpoints(r: &RunReport) {
    if let Some(e) = r.resumed_from {
        eprintln!("braid: resumed from the checkpoint after epoch {e}");
    }
    if r.checkpoints.is_empty() {
        return;
    }
    let n = r.checkpoints.len();
    let bytes: u64 = r.checkpoints.iter().map(|c| c.bytes).sum();
    let mut ms: Vec<f64> = r
        .checkpoints
        .iter()
        .map(|c| c.duration.as_secs_f64() * 1000.0)
        .collect();
    ms.sort_by(f64::total_cmp);
    let last = &r.checkpoints[n - 1];
    eprintln!(
        "braid: {n} checkpoint(s), the last after epoch {} ({:.1} MB); {:.1} MB in all, median {:.0} ms, max {:.0} ms from barrier to commit",
        last.epoch,
        last.bytes as f64 / 1e6,
        bytes as f64 / 1e6,
        ms[n / 2],
        ms[n - 1]
    );
}

/// Live rescales: at which epoch, to what partition counts, and the pause.
pub fn rescales(r: &RunReport) {
    for d in &r.rescales {
        eprintln!(
            "braid: rescaled live after epoch {} ({}) to {:?} partition(s) per stage on {} worker(s), paused {:.1} ms",
            d.epoch,
            d.request,
            d.partitions,
            d.workers,
            d.pause.as_secs_f64() * 1000.0
        );
    }
}

/// One job of a script: rows, time, partitioning, late rows, malformed records.
pub fn query(r: &QueryReport) {
    if r.run.finished_before {
        eprintln!(
            "braid: query {} had finished before the checkpoint directory's run stopped: not run again",
            r.query + 1
        );
        return;
    }
    calibration(r.calibration.as_ref());
    if let Some(t) = &r.window {
        eprintln!("braid: {}", braid_exec::session::window_text(t));
    }
    let secs = r.run.elapsed.as_secs_f64();
    eprintln!(
        "braid: {} rows in, {} rows out in {:.3} s ({:.0} rows/s); partitioning: {}",
        r.run.rows_in,
        r.run.rows_out,
        secs,
        r.run.rows_in as f64 / secs.max(1e-9),
        r.partitioning
    );
    if r.run.granule > 1 {
        eprintln!(
            "braid: {} epochs per timely time (`--granule 1` for one)",
            r.run.granule
        );
    }
    latency(&r.run);
    shed(&r.run);
    for l in &r.late {
        let query = match l.shared_job {
            true => format!(" of query {}", l.query + 1),
            false => String::new(),
        };
        let read = match l.read_as_stream {
            true => " (read by LATE(...))",
            false => "",
        };
        match &l.path {
            Some(p) => eprintln!(
                "braid: {} late row(s){query}{read}, written to {}",
                l.rows,
                p.display()
            ),
            None => eprintln!("braid: {} late row(s){query}{read}", l.rows),
        }
    }
    checkpoints(&r.run);
    rejects(&r.run);
}

/// The latency a run under a constraint measured, and whether it met it.
pub fn latency(r: &braid_exec::runtime::RunReport) {
    let Some(l) = r.latency.as_ref() else {
        return;
    };
    for line in l.lines() {
        eprintln!("braid: {line}");
    }
}

/// The rows load shedding dropped, per source and second of its schedule.
pub fn shed(r: &braid_exec::runtime::RunReport) {
    if r.shed.is_empty() {
        return;
    }
    let total: u64 = r.shed.iter().map(|s| s.2).sum();
    let per: Vec<String> = r
        .shed
        .iter()
        .take(20)
        .map(|(source, second, rows)| format!("{source} at {second} s: {rows}"))
        .collect();
    let more = if r.shed.len() > 20 { ", ..." } else { "" };
    eprintln!(
        "braid: load shedding dropped {total} row(s) behind schedule ({}{more})",
        per.join(", ")
    );
}
