//! Checkpoints of the `linear_road` stream function: an instance restored from a
//! checkpoint taken after `end_of_epoch(c)` and fed the epochs after c emits exactly
//! what the uninterrupted instance emits (rows, keys and order), and bytes that are not
//! such a checkpoint are an error, never a panic.
//!
//! The instances are driven as the engine's Map drives them: one partition's rows of an
//! epoch (position reports and type-3/4 requests of its expressways, every type-2
//! request), each under its sequence number in the whole input, then `end_of_epoch`
//! under `RowKey::END_OF_EPOCH`, only for epochs in which the partition had rows; at
//! the end `finish`.

use braid_plan::batch::{Batch, RowKey};
use braid_plan::function::{Emitter, Registry, StreamFunction, StreamFunctionFactory};
use linear_road::app::{register, OutputSink, FUNCTION};
use linear_road::generate::{accepted_input, GenConfig, Profile};
use linear_road::history::histories;
use linear_road::record::Input;
use std::sync::Arc;

/// Generated input with its histories, and the factory of `linear_road` over them.
struct Setup {
    factory: Arc<dyn StreamFunctionFactory>,
    input: Vec<Input>,
}

fn setup(cfg: &GenConfig) -> Setup {
    let input = accepted_input(cfg);
    let max_vid = input.iter().map(|t| t.vid).max().unwrap_or(0);
    let (tolls, segments) = histories(cfg, max_vid);
    let mut registry = Registry::with_builtins();
    let sink = Arc::new(OutputSink::create(None, None).expect("a sink without a file"));
    register(&mut registry, tolls, segments, sink);
    let factory = registry.function(FUNCTION).expect("registered").clone();
    assert!(factory.checkpoints(), "{FUNCTION} says it checkpoints");
    Setup { factory, input }
}

/// Partition `p` of `q`'s input, by epoch (= Time): the epochs in which it has rows,
/// each with a batch of its rows keyed by their sequence numbers in the whole input.
fn epochs(input: &[Input], p: u32, q: u32) -> Vec<(u64, Batch)> {
    let mut out: Vec<(u64, Batch)> = Vec::new();
    for (seq, t) in input.iter().enumerate() {
        if t.typ != 2 && t.xway.rem_euclid(i64::from(q)) != i64::from(p) {
            continue;
        }
        let epoch = t.time as u64;
        if !matches!(out.last(), Some((e, _)) if *e == epoch) {
            out.push((epoch, Batch::new(15)));
        }
        let key = RowKey {
            seq: seq as u64,
            lane: 0,
        };
        out.last_mut()
            .expect("pushed")
            .1
            .push_ints(key, &t.fields());
    }
    out
}

/// Feeds `epochs` to `f` (partition `p`), appending its outputs to `out`; after each
/// epoch's `end_of_epoch`, calls `after(index of the epoch, f, out)`.
fn run_epochs(
    f: &mut dyn StreamFunction,
    p: u32,
    epochs: &[(u64, Batch)],
    out: &mut Batch,
    mut after: impl FnMut(usize, &mut dyn StreamFunction, &Batch),
) {
    for (i, (epoch, rows)) in epochs.iter().enumerate() {
        {
            let mut emit = Emitter::new(out, 0, p).at_epoch(*epoch);
            for row in rows.rows() {
                emit.restart(row.key().seq, p);
                f.process(row, &mut emit);
            }
            emit.restart(RowKey::END_OF_EPOCH, p);
            f.end_of_epoch(*epoch, &mut emit);
        }
        after(i, f, out);
    }
}

fn finish(f: &mut dyn StreamFunction, p: u32, out: &mut Batch) {
    f.finish(&mut Emitter::new(out, RowKey::FINISH, p).at_epoch(u64::MAX));
}

/// The first `n` rows of `b`.
fn prefix(b: &Batch, n: usize) -> Batch {
    let mut out = Batch::new(b.arity());
    for i in 0..n {
        out.push_row_of(b, i, b.key(i));
    }
    out
}

fn row_text(b: &Batch, i: usize) -> String {
    match i < b.len() {
        true => {
            let r = b.row(i);
            let v: Vec<i64> = (0..b.arity()).map(|c| r.int(c).unwrap_or(-1)).collect();
            format!("{:?} {v:?}", b.key(i))
        }
        false => "(none)".into(),
    }
}

/// Asserts `got == want`, row for row, keys included; names the first difference.
fn assert_same(want: &Batch, got: &Batch, what: &str) {
    if want == got {
        return;
    }
    let first = (0..want.len().max(got.len()))
        .find(|&i| i >= want.len() || i >= got.len() || row_text(want, i) != row_text(got, i))
        .unwrap_or(0);
    panic!(
        "{what}: {} rows, the uninterrupted run has {}; first difference at row {first}:\n  \
         uninterrupted {}\n  restored      {}",
        got.len(),
        want.len(),
        row_text(want, first),
        row_text(got, first),
    );
}

/// The uninterrupted run: its output and the output length after each epoch.
fn reference(s: &Setup, p: u32, q: u32, epochs: &[(u64, Batch)]) -> (Batch, Vec<usize>) {
    let mut f = s.factory.create(p, q);
    let mut out = Batch::new(7);
    let mut ends = Vec::with_capacity(epochs.len());
    run_epochs(f.as_mut(), p, epochs, &mut out, |_, _, o| {
        ends.push(o.len())
    });
    finish(f.as_mut(), p, &mut out);
    (out, ends)
}

/// Checkpoint epochs (indices into the partition's epochs): the first, early ones, the
/// last of minute 1 (its groups not yet folded) and the first of minute 2, the middle,
/// one 45 s before the first accident notification, ones in which accident
/// notifications and charged tolls were emitted, and the last two (after the last, only
/// `finish` is left).
fn checkpoint_indices(epochs: &[(u64, Batch)], out: &Batch, ends: &[usize]) -> Vec<usize> {
    let n = epochs.len();
    let emitted_in = |i: usize, pred: &dyn Fn(&[i64]) -> bool| {
        let start = if i == 0 { 0 } else { ends[i - 1] };
        (start..ends[i]).any(|r| {
            let row = out.row(r);
            let v: Vec<i64> = (0..7).map(|c| row.int(c).unwrap_or(-1)).collect();
            pred(&v)
        })
    };
    let accidents: Vec<usize> = (0..n).filter(|&i| emitted_in(i, &|v| v[0] == 1)).collect();
    let tolls: Vec<usize> = (0..n)
        .filter(|&i| emitted_in(i, &|v| v[0] == 0 && v[5] > 0))
        .collect();
    assert!(
        !accidents.is_empty() && !tolls.is_empty(),
        "the input has accidents ({}) and charged tolls ({}) in this partition",
        accidents.len(),
        tolls.len()
    );
    let minute_end = epochs.iter().rposition(|(e, _)| *e < 60).expect("minute 1");
    let mut at = vec![
        0,
        3,
        epochs
            .iter()
            .position(|(e, _)| *e >= 30)
            .expect("second 30"),
        minute_end,
        minute_end + 1,
        n / 2,
        // Vehicles already stopped, the accident not yet notified.
        epochs
            .iter()
            .position(|(e, _)| *e + 45 >= epochs[accidents[0]].0)
            .expect("some"),
        accidents[0],
        accidents[accidents.len() / 2],
        tolls[0],
        tolls[tolls.len() / 2],
        *tolls.last().expect("some"),
        n - 2,
        n - 1,
    ];
    println!(
        "epochs with accident notifications: {} (first {}, middle {}); with charged tolls: \
         {} (first {}, middle {})",
        accidents.len(),
        epochs[accidents[0]].0,
        epochs[accidents[accidents.len() / 2]].0,
        tolls.len(),
        epochs[tolls[0]].0,
        epochs[tolls[tolls.len() / 2]].0,
    );
    at.sort_unstable();
    at.dedup();
    at
}

fn config(seed: u64) -> GenConfig {
    GenConfig {
        xways: 2,
        minutes: 8,
        profile: Profile::Steady,
        seed,
        peak_vehicles_per_xway: 30_000,
    }
}

/// For each partition of 2 and several checkpoint epochs: save after `end_of_epoch(c)`,
/// restore into a fresh instance of the same partition, feed it the epochs after c and
/// finish; the whole output (the uninterrupted run's up to c, then the restored
/// instance's) equals the uninterrupted run's. Taking the checkpoints does not change
/// the saving instance's own output either.
#[test]
fn restored_instances_continue_exactly() {
    let s = setup(&config(7));
    let q = 2;
    for p in 0..q {
        let epochs = epochs(&s.input, p, q);
        let (want, ends) = reference(&s, p, q, &epochs);
        let at = checkpoint_indices(&epochs, &want, &ends);

        let mut saves: Vec<(usize, Vec<u8>)> = Vec::new();
        let mut f = s.factory.create(p, q);
        let mut out = Batch::new(7);
        run_epochs(f.as_mut(), p, &epochs, &mut out, |i, f, _| {
            if at.contains(&i) {
                let mut bytes = Vec::new();
                f.save(&mut bytes).expect("save");
                saves.push((i, bytes));
            }
        });
        finish(f.as_mut(), p, &mut out);
        assert_same(&want, &out, &format!("partition {p}, taking checkpoints"));

        for (i, bytes) in &saves {
            let c = epochs[*i].0;
            let mut g = s.factory.create(p, q);
            g.restore(bytes)
                .unwrap_or_else(|e| panic!("partition {p}: restore at epoch {c}: {e}"));
            let mut out = prefix(&want, ends[*i]);
            run_epochs(g.as_mut(), p, &epochs[i + 1..], &mut out, |_, _, _| {});
            finish(g.as_mut(), p, &mut out);
            assert_same(
                &want,
                &out,
                &format!(
                    "partition {p} of {q}, restored after epoch {c} ({} bytes)",
                    bytes.len()
                ),
            );
        }
        println!(
            "partition {p} of {q}: {} epochs, {} output rows, checkpoints at epochs {:?}, sizes {:?}",
            epochs.len(),
            want.len(),
            saves.iter().map(|(i, _)| epochs[*i].0).collect::<Vec<_>>(),
            saves.iter().map(|(_, b)| b.len()).collect::<Vec<_>>()
        );
    }
}

/// A restored instance checkpoints again: run to c1, save, restore, run to c2, save,
/// restore, run to the end. One partition owning every expressway (q = 1).
#[test]
fn checkpoints_of_restored_instances_chain() {
    let s = setup(&config(11));
    let epochs = epochs(&s.input, 0, 1);
    let (want, ends) = reference(&s, 0, 1, &epochs);
    let cuts = [epochs.len() / 5, epochs.len() / 2, epochs.len() * 4 / 5];
    let mut f = s.factory.create(0, 1);
    let mut out = Batch::new(7);
    let mut from = 0;
    for &cut in &cuts {
        run_epochs(f.as_mut(), 0, &epochs[from..=cut], &mut out, |_, _, _| {});
        assert_eq!(out.len(), ends[cut]);
        let mut bytes = Vec::new();
        f.save(&mut bytes).expect("save");
        f = s.factory.create(0, 1);
        f.restore(&bytes).expect("restore");
        from = cut + 1;
    }
    run_epochs(f.as_mut(), 0, &epochs[from..], &mut out, |_, _, _| {});
    finish(f.as_mut(), 0, &mut out);
    assert_same(&want, &out, &format!("restored at epoch indices {cuts:?}"));
}

fn restore_err(f: &mut dyn StreamFunction, bytes: &[u8]) -> String {
    match f.restore(bytes) {
        Ok(()) => panic!(
            "{} bytes restored, but they are not the checkpoint",
            bytes.len()
        ),
        Err(e) => e.to_string(),
    }
}

/// Truncated, extended, corrupted or misplaced checkpoints are errors naming what did
/// not match, and a failed restore leaves the instance as it was.
#[test]
fn bad_checkpoints_are_errors() {
    let s = setup(&GenConfig {
        minutes: 3,
        ..config(5)
    });
    let (p, q) = (0, 2);
    let epochs = epochs(&s.input, p, q);
    let cut = epochs.len() * 2 / 3;
    let mut f = s.factory.create(p, q);
    let mut out = Batch::new(7);
    run_epochs(f.as_mut(), p, &epochs[..=cut], &mut out, |_, _, _| {});
    let mut good = Vec::new();
    f.save(&mut good).expect("save");
    let n = good.len();
    assert!(n > 1000, "{n} bytes");

    let mut g = s.factory.create(p, q);
    for len in [0, 1, 3, 4, 7, 8, 16, 31, 32, 33, n / 2, n - 8, n - 1] {
        let e = restore_err(g.as_mut(), &good[..len]);
        assert!(e.contains("truncated"), "{len} bytes: {e}");
    }
    let mut longer = good.clone();
    longer.push(0);
    let e = restore_err(g.as_mut(), &longer);
    assert!(e.contains("1 bytes after the"), "{e}");

    let flip = |at: usize| {
        let mut b = good.clone();
        b[at] ^= 0x10;
        b
    };
    for (at, what) in [
        (0, "magic"),
        (3, "magic"),
        (4, "version"),
        (8, "partition 16 of 2"),
        (12, "partition 0 of 18"),
        (23, "truncated"),
        (24, "checksum"),
        (31, "checksum"),
    ] {
        let e = restore_err(g.as_mut(), &flip(at));
        assert!(e.contains(what), "byte {at}: {e}");
    }
    // The state's length, a little more or a little less.
    let e = restore_err(g.as_mut(), &flip(16));
    assert!(
        e.contains("truncated") || e.contains("16 bytes after"),
        "{e}"
    );
    // Every flipped bit of the state (sampled) breaks the checksum.
    let step = ((n - 32) / 500).max(1);
    for at in (32..n).step_by(step).chain([n - 1]) {
        let e = restore_err(g.as_mut(), &flip(at));
        assert!(e.contains("checksum"), "byte {at}: {e}");
    }
    // Another partition's checkpoint.
    let e = restore_err(s.factory.create(1, q).as_mut(), &good);
    assert!(e.contains("taken of partition 0 of 2"), "{e}");
    assert!(e.contains("linear_road partition 1 of 2"), "{e}");
    let e = restore_err(s.factory.create(0, 4).as_mut(), &good);
    assert!(e.contains("taken of partition 0 of 2"), "{e}");

    // After all those failures, g is still a fresh instance: the good checkpoint
    // restores into it and the run goes on exactly.
    let (want, ends) = reference(&s, p, q, &epochs);
    g.restore(&good).expect("restore");
    let mut out = prefix(&want, ends[cut]);
    run_epochs(g.as_mut(), p, &epochs[cut + 1..], &mut out, |_, _, _| {});
    finish(g.as_mut(), p, &mut out);
    assert_same(&want, &out, "restored after failed restores");
}

/// A failed restore leaves the instance unchanged: one restored halfway, then given a
/// corrupt checkpoint, still finishes as the uninterrupted run.
#[test]
fn failed_restore_leaves_state_unchanged() {
    let s = setup(&GenConfig {
        minutes: 3,
        ..config(9)
    });
    let epochs = epochs(&s.input, 0, 1);
    let (want, _) = reference(&s, 0, 1, &epochs);
    let cut = epochs.len() / 2;
    let mut f = s.factory.create(0, 1);
    let mut out = Batch::new(7);
    run_epochs(f.as_mut(), 0, &epochs[..=cut], &mut out, |_, _, _| {});
    let mut bytes = Vec::new();
    f.save(&mut bytes).expect("save");
    restore_err(f.as_mut(), &bytes[..bytes.len() - 1]);
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    restore_err(f.as_mut(), &bytes);
    run_epochs(f.as_mut(), 0, &epochs[cut + 1..], &mut out, |_, _, _| {});
    finish(f.as_mut(), 0, &mut out);
    assert_same(&want, &out, "after failed restores");
}

/// The checkpoint size of one expressway at the sustained peak of L = 1 (54,000
/// vehicles, Steady profile), each simulated minute for 10 minutes. A measurement:
/// `cargo test -p linear-road --test tests checkpoint::checkpoint_size_per_expressway
/// -- --ignored --nocapture`.
#[test]
#[ignore]
fn checkpoint_size_per_expressway() {
    let s = setup(&GenConfig {
        xways: 1,
        minutes: 10,
        profile: Profile::Steady,
        seed: 1,
        peak_vehicles_per_xway: 54_000,
    });
    let epochs = epochs(&s.input, 0, 1);
    let mut f = s.factory.create(0, 1);
    let mut out = Batch::new(7);
    let start = std::time::Instant::now();
    let mut save_time = std::time::Duration::ZERO;
    let mut restore_time = std::time::Duration::ZERO;
    run_epochs(f.as_mut(), 0, &epochs, &mut out, |i, f, _| {
        let e = epochs[i].0;
        if e % 60 == 59 {
            let mut bytes = Vec::new();
            let t = std::time::Instant::now();
            f.save(&mut bytes).expect("save");
            save_time += t.elapsed();
            let t = std::time::Instant::now();
            s.factory.create(0, 1).restore(&bytes).expect("restore");
            restore_time += t.elapsed();
            println!(
                "after minute {}: {} bytes ({:.2} MB), {} tuples so far",
                e / 60 + 1,
                bytes.len(),
                bytes.len() as f64 / 1e6,
                epochs[..=i].iter().map(|(_, b)| b.len()).sum::<usize>()
            );
        }
    });
    println!(
        "{} tuples in {:.2} s, of which saving {:.3} s and restoring {:.3} s (10 each)",
        s.input.len(),
        start.elapsed().as_secs_f64(),
        save_time.as_secs_f64(),
        restore_time.as_secs_f64()
    );
}
