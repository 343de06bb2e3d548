//! The radix-2 plan's spectra equal a direct DFT to 1e-9 on 1, 2 and 4 workers; SQL's
//! transient detection, parallelized by receiver, finds exactly the transients the
//! source injected.

use braid_exec::runtime::{run, RunConfig};
use braid_plan::batch::Scalar;
use braid_plan::function::Registry;
use braid_plan::plan::{SinkSpec, SourceSpec};
use lofar::signal::{self, SignalConfig};
use std::sync::Arc;

/// The DFT from its definition, O(n^2), sharing no code with rustfft.
fn naive_dft(x: &[f64]) -> Vec<f64> {
    let n = x.len();
    let mut out = Vec::with_capacity(2 * n);
    for k in 0..n {
        let (mut re, mut im) = (0.0, 0.0);
        for (j, &v) in x.iter().enumerate() {
            let a = -std::f64::consts::TAU * ((k * j) % n) as f64 / n as f64;
            re += v * a.cos();
            im += v * a.sin();
        }
        out.extend([re, im]);
    }
    out
}

#[test]
fn radix2_spectra_equal_a_direct_dft_on_1_2_and_4_workers() {
    let cfg = SignalConfig {
        receivers: 3,
        steps: 4,
        samples: 256,
        ..SignalConfig::default()
    };
    let (input, _) = signal::batch(&cfg);
    let mut reg = Registry::with_builtins();
    lofar::radix2::register(&mut reg);
    let plan = lofar::radix2::plan(
        SourceSpec::Memory(Arc::new(input.clone())),
        3,
        SinkSpec::Collect,
    );
    let want = braid_plan::reference::run(&plan, &reg, &input).unwrap();
    assert_eq!(want.len(), 12);
    let mut x = Vec::new();
    let mut worst: f64 = 0.0;
    for row in &want {
        let (Scalar::Int(r), Scalar::Int(t), Scalar::Floats(spec)) =
            (&row.values[0], &row.values[1], &row.values[2])
        else {
            panic!("{:?}", row.values)
        };
        signal::vector(&cfg, *r as u32, *t as u32, &mut x);
        let direct = naive_dft(&x);
        assert_eq!(spec.len(), direct.len());
        for (a, b) in spec.iter().zip(&direct) {
            worst = worst.max((a - b).abs());
        }
    }
    assert!(worst < 1e-9, "largest difference {worst}");
    for workers in [1, 2, 4] {
        let got = run(
            &plan,
            &reg,
            &RunConfig {
                workers,
                ..RunConfig::default()
            },
        )
        .unwrap()
        .collected;
        let v = |rows: &[braid_plan::output::OutRow]| {
            rows.iter().map(|r| r.values.clone()).collect::<Vec<_>>()
        };
        assert_eq!(v(&got), v(&want), "{workers} workers");
    }
}

#[test]
fn a_butterfly_planted_wrong_is_caught_by_the_dft() {
    // The combination with the twiddle's sign flipped gives another spectrum.
    use rustfft::num_complex::Complex;
    let x: Vec<f64> = (0..8).map(|i| (i * i % 5) as f64).collect();
    let half = |s: usize| {
        let mut z: Vec<Complex<f64>> = x
            .iter()
            .skip(s)
            .step_by(2)
            .map(|&v| Complex::new(v, 0.0))
            .collect();
        lofar::radix2::dft(&mut z);
        z
    };
    let good = lofar::radix2::butterfly(&half(0), &half(1));
    let direct = naive_dft(&x);
    for (j, c) in good.iter().enumerate() {
        assert!((c.re - direct[2 * j]).abs() < 1e-9 && (c.im - direct[2 * j + 1]).abs() < 1e-9);
    }
    let swapped = lofar::radix2::butterfly(&half(1), &half(0));
    assert!(swapped
        .iter()
        .enumerate()
        .any(|(j, c)| (c.re - direct[2 * j]).abs() > 1e-6));
}

#[test]
fn sql_transient_detection_by_receiver_finds_the_injected_transients() {
    let cfg = SignalConfig {
        receivers: 8,
        steps: 40,
        samples: 512,
        transient_rate: 0.05,
        amplitude: 1.0,
        seed: 7,
    };
    let dir = std::env::temp_dir().join(format!("braid-lofar-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("signals.csv");
    let injected = signal::write_csv(&cfg, &mut std::fs::File::create(&path).unwrap()).unwrap();
    assert!(injected.len() >= 5, "{} transients", injected.len());
    let example = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/transients.sql"),
    )
    .unwrap();
    let sql = example
        .split("-- EXPECTED")
        .next()
        .unwrap()
        .replace("'data/signals.csv'", &format!("'{}'", path.display()))
        .replace("(sink = 'stdout')", "(sink = 'collect')");
    let mut want: Vec<(i64, i64, i64)> =
        injected.iter().map(|t| (t.receiver, t.t, t.bin)).collect();
    want.sort();
    for workers in [1, 2, 4] {
        let mut s = braid_exec::session::Session::new(
            &Registry::with_builtins(),
            RunConfig {
                workers,
                ..RunConfig::default()
            },
        );
        s.compile(&sql, &dir).unwrap();
        let reports = s.run_pending().unwrap();
        let mut got: Vec<(i64, i64, i64)> = reports[0]
            .run
            .collected
            .iter()
            .map(|r| match (&r.values[0], &r.values[1], &r.values[2]) {
                (Scalar::Int(a), Scalar::Int(b), Scalar::Int(c)) => (*a, *b, *c),
                v => panic!("{v:?}"),
            })
            .collect();
        got.sort();
        assert_eq!(got, want, "{workers} workers");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_declared_length_is_kept_whatever_reads_the_stream() {
    // A binary file holds vectors of 4, 3 and 4 samples; the stream declares 4. The
    // vector of 3 is a fault of the query's scan (counted and reported, the row
    // skipped), on 1 and 2 workers.
    let dir = std::env::temp_dir().join(format!("braid-fixed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("v.bin");
    let mut b = braid_plan::batch::Batch::new(3);
    for (i, x) in [vec![1.0; 4], vec![2.0; 3], vec![3.0; 4]]
        .iter()
        .enumerate()
    {
        b.push(
            braid_plan::batch::RowKey {
                seq: i as u64,
                lane: 0,
            },
            &[
                braid_plan::batch::Value::Int(i as i64),
                braid_plan::batch::Value::Int(i as i64),
                braid_plan::batch::Value::Floats(x),
            ],
        );
    }
    let mut w = braid_exec::source::binary::BinaryWriter::create(&path, 3).unwrap();
    w.write(0, &b).unwrap();
    w.finish().unwrap();
    let sql = format!(
        "CREATE STREAM v (receiver BIGINT NOT NULL, t BIGINT NOT NULL, x DOUBLE PRECISION[4])
           WITH (source = 'binary', path = '{}', event_time = 't');
         CREATE SINK out WITH (sink = 'collect');
         INSERT INTO out SELECT receiver, array_sum(x) FROM v;",
        path.display()
    );
    for workers in [1, 2] {
        let mut s = braid_exec::session::Session::new(
            &Registry::with_builtins(),
            RunConfig {
                workers,
                ..RunConfig::default()
            },
        );
        s.compile(&sql, &dir).unwrap();
        let r = s.run_pending().unwrap().remove(0).run;
        let got: Vec<Vec<Scalar>> = r.collected.iter().map(|o| o.values.clone()).collect();
        assert_eq!(
            got,
            vec![
                vec![Scalar::Int(0), Scalar::Float(4.0)],
                vec![Scalar::Int(2), Scalar::Float(12.0)]
            ],
            "{workers} workers"
        );
        let faults: u64 = r.faults.iter().map(|f| f.count).sum();
        assert_eq!(faults, 1);
        let text = format!("{:?}", r.faults);
        assert!(
            text.contains("column `x` holds 3 elements, declared DOUBLE[4]"),
            "{text}"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}
