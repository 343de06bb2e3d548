//! End to end: generated Linear Road data through the parallel plan with 1, 2 and 4
//! workers and every split strategy; the independent validator must pass and the
//! outputs must be identical (as multisets, Emit aside) across configurations.

use braid_exec::runtime::RunConfig;
use braid_plan::plan::Strategy;
use linear_road::app::{run_files, LrOptions};
use linear_road::generate::{write_dir, GenConfig, Profile};
use linear_road::record::parse_output;
use linear_road::validate::{validate_files, Options};
use std::path::PathBuf;

mod checkpoint;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("braid-lr-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn outputs_without_emit(path: &std::path::Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).expect("output written");
    let mut v: Vec<String> = text
        .lines()
        .map(|l| {
            parse_output(l)
                .expect("well-formed output")
                .with_emit(0)
                .to_string()
        })
        .collect();
    v.sort();
    v
}

#[test]
fn generated_data_validates_across_workers_and_strategies() {
    let dir = scratch("e2e");
    for seed in [3u64, 11] {
        let cfg = GenConfig {
            xways: 2,
            minutes: 12,
            profile: Profile::Steady,
            seed,
            peak_vehicles_per_xway: 6000,
        };
        let stats = write_dir(&cfg, &dir, &mut |_| {}).expect("generate");
        assert!(stats.reentries > 0 && stats.accidents > 0, "{stats:?}");
        let (input, history, segs) = (
            dir.join("input.csv"),
            dir.join("toll-history.csv"),
            dir.join("segment-history.csv"),
        );
        let mut reference: Option<Vec<String>> = None;
        // The last two under a latency constraint: answers leave per tick.
        let held = Some(std::time::Duration::from_millis(20));
        for (strategy, workers, max_latency) in [
            (Strategy::Autosplit, 1, None),
            (Strategy::Fsplit, 2, None),
            (Strategy::Maxtree, 2, None),
            (Strategy::Exptree, 4, None),
            (Strategy::Parasplit, 4, None),
            (Strategy::Autosplit, 2, None),
            (Strategy::Fsplit, 1, held),
            (Strategy::Parasplit, 4, held),
        ] {
            let out = dir.join(format!(
                "out-{seed}-{strategy}-{workers}-{}.csv",
                max_latency.is_some()
            ));
            let opts = LrOptions {
                q: 8,
                strategy,
                fanin: Some(2),
                speed: None,
                window: 256,
                max_latency,
            };
            let cfg = RunConfig {
                workers,
                ..RunConfig::default()
            };
            let run = run_files(&input, &history, Some(&segs), Some(&out), &opts, &cfg)
                .expect("run succeeds");
            assert_eq!(run.report.rows_in, stats.tuples);
            // A run as fast as possible stamps Emit with the input clock, so deadlines are
            // not checked here (paced runs of `braid lrb run` report them); every answer
            // must be right and complete.
            let vopts = Options {
                check_deadlines: false,
                ..Options::default()
            };
            let report = validate_files(&input, &history, Some(&segs), &out, &vopts)
                .expect("validator runs");
            assert!(
                report.passed(),
                "seed {seed}, {strategy}, {workers} workers, {max_latency:?}:\n{report}"
            );
            assert!(
                report.types.iter().all(|t| t.expected > 0),
                "every output type occurs:\n{report}"
            );
            let got = outputs_without_emit(&out);
            match &reference {
                None => reference = Some(got),
                Some(r) => assert_eq!(
                    &got, r,
                    "outputs differ: seed {seed}, {strategy}, {workers} workers, {max_latency:?}"
                ),
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The third-party data set beside the repository (`../shared/data/lrb`), if present.
fn third_party() -> Option<PathBuf> {
    let d = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/lrb");
    d.join("lrb-1x-30min.dat.gz").exists().then_some(d)
}

fn gunzip(from: &std::path::Path, to: &std::path::Path) {
    let mut r = flate2::read::GzDecoder::new(std::io::BufReader::new(
        std::fs::File::open(from).expect("open gz"),
    ));
    let mut w = std::io::BufWriter::new(std::fs::File::create(to).expect("create"));
    std::io::copy(&mut r, &mut w).expect("decompress");
}

#[test]
fn third_party_data_validates_with_zero_mismatches() {
    let Some(src) = third_party() else {
        eprintln!("skipped: ../shared/data/lrb is not beside the repository");
        return;
    };
    let dir = scratch("third-party");
    let (input, history, out) = (
        dir.join("input.dat"),
        dir.join("tolls.dat"),
        dir.join("out.csv"),
    );
    gunzip(&src.join("lrb-1x-30min.dat.gz"), &input);
    gunzip(&src.join("lrb-1x-30min.tolls.dat.gz"), &history);
    let opts = LrOptions {
        q: 4,
        strategy: Strategy::Parasplit,
        fanin: None,
        speed: None,
        window: 1024,
        max_latency: None,
    };
    let run = run_files(
        &input,
        &history,
        None,
        Some(&out),
        &opts,
        &RunConfig {
            workers: 2,
            ..RunConfig::default()
        },
    )
    .expect("run succeeds");
    assert_eq!(run.report.rows_in, 1_571_711);
    let vopts = Options {
        check_deadlines: false,
        ..Options::default()
    };
    let report = validate_files(&input, &history, None, &out, &vopts).expect("validator runs");
    assert!(report.passed(), "{report}");
    assert_eq!(report.types[0].matching, 570_579, "{report}");
    assert_eq!(report.types[2].matching, 7_957, "{report}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The parallel Linear Road plan written as one query text (examples/linear_road.sql)
/// compiles to the plan `app::plan` builds and its answers validate.
#[test]
fn linear_road_is_one_query_text() {
    use braid_plan::function::Registry;
    use linear_road::app::{plan, register, OutputSink};
    use linear_road::history::{SegmentHistory, TollHistory};
    use std::sync::Arc;
    let dir = scratch("sql");
    let lrb = dir.join("lrb");
    std::fs::create_dir_all(&lrb).expect("dir");
    let cfg = GenConfig {
        xways: 2,
        minutes: 8,
        profile: Profile::Steady,
        seed: 5,
        peak_vehicles_per_xway: 4000,
    };
    write_dir(&cfg, &lrb, &mut |_| {}).expect("generate");
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/linear_road.sql"),
    )
    .expect("example");
    let out = dir.join("answers.csv");
    let (tolls, _) = TollHistory::load(&lrb.join("toll-history.csv")).expect("tolls");
    let (segs, _) = SegmentHistory::load(&lrb.join("segment-history.csv")).expect("segments");
    let sink = Arc::new(OutputSink::create(Some(&out), None).expect("sink"));
    let mut registry = Registry::with_builtins();
    register(&mut registry, Arc::new(tolls), Arc::new(segs), sink.clone());
    let script = braid_sql::compile_script(&text, &dir, &registry).expect("compiles");
    let job = &script.jobs[0];
    // The same physical plan as the Rust API builds.
    let opts = LrOptions {
        q: 8,
        strategy: Strategy::Autosplit,
        fanin: None,
        speed: None,
        window: 256,
        max_latency: None,
    };
    let api = plan(
        braid_plan::plan::SourceSpec::Csv {
            path: lrb.join("input.csv"),
            header: false,
        },
        &opts,
    );
    let show = |p: &braid_plan::plan::Plan| braid_plan::explain::text(p, &script.registry, 2);
    assert_eq!(show(&job.plan), show(&api));
    let report = braid_exec::runtime::run(
        &job.plan,
        &script.registry,
        &RunConfig {
            workers: 2,
            ..RunConfig::default()
        },
    )
    .expect("runs");
    assert!(report.rows_in > 0);
    braid_plan::function::SinkFn::flush(sink.as_ref()).expect("flush");
    let vopts = Options {
        check_deadlines: false,
        ..Options::default()
    };
    let v = validate_files(
        &lrb.join("input.csv"),
        &lrb.join("toll-history.csv"),
        Some(&lrb.join("segment-history.csv")),
        &out,
        &vopts,
    )
    .expect("validator runs");
    assert!(v.passed(), "{v}");
}
