//! `braid trips generate` and examples/trips.sql: the same shares on 1 and 2 workers,
//! every request once; a static partitioner learns from `--trips-history`.

use std::path::Path;
use std::process::Command;

fn braid(args: &[&str], dir: &Path) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("braid runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_trips_example_groups_every_request_once_on_1_and_2_workers() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("data")).unwrap();
    let (ok, _, err) = braid(
        &[
            "trips",
            "generate",
            "--requests",
            "20000",
            "--out",
            "data/trips.csv",
        ],
        d,
    );
    assert!(ok, "{err}");
    let (ok, _, err) = braid(
        &[
            "trips",
            "generate",
            "--requests",
            "20000",
            "--seed",
            "2",
            "--out",
            "h.csv",
        ],
        d,
    );
    assert!(ok, "{err}");
    let example = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/trips.sql"),
    )
    .unwrap();
    let example = example.split("-- EXPECTED").next().unwrap().to_string();
    std::fs::write(d.join("trips.sql"), &example).unwrap();
    std::fs::write(
        d.join("skd.sql"),
        example.replace("akd(t, ox, oy, dx, dy)", "skd(ox, oy, dx, dy)"),
    )
    .unwrap();
    for (script, extra) in [("trips.sql", None), ("skd.sql", Some("h.csv"))] {
        let mut outs = Vec::new();
        for workers in ["1", "2"] {
            let mut args = vec!["run", "--workers", workers];
            if let Some(h) = extra {
                args.extend(["--trips-history", h]);
            }
            args.push(script);
            let (ok, out, err) = braid(&args, d);
            assert!(ok, "{script}: {err}");
            outs.push(out);
        }
        assert_eq!(outs[0], outs[1], "{script}: 1 and 2 workers differ");
        // A row per request: every id once.
        let mut ids: Vec<i64> = outs[0]
            .lines()
            .map(|l| l.split(',').nth(2).unwrap().parse().unwrap())
            .collect();
        ids.sort_unstable();
        assert_eq!(ids, (0..20_000).collect::<Vec<_>>(), "{script}");
        // Many requests share.
        let shared = outs[0]
            .lines()
            .filter(|l| l.split(',').nth(3) != Some("1"))
            .count();
        assert!(shared > 10_000, "{script}: {shared} shared");
    }
    // A static partitioner without a history is refused by name, with the place.
    let (ok, _, err) = braid(&["run", "skd.sql"], d);
    assert!(!ok);
    assert!(
        err.contains("router `skd`") && err.contains("--trips-history") && err.contains("line "),
        "{err}"
    );
}
