//! Parquet files and Arrow IPC streams as sources and sinks: a stream written by a
//! Parquet (Arrow) sink and read back is the stream it came from, every type and NULL
//! included; the windowed query over it equals the query over the CSV file on 1, 2 and
//! 4 workers; a column the file lacks or holds in another type is refused by name, a
//! null in a NOT NULL column is a counted malformed record.

use crate::recovery::{int_rows, kill_and_recover, write_calls_and_texts, Scratch, WINDOWED};
use std::path::Path;
use std::process::Command;

fn braid(script: &str, dir: &Path, name: &str, workers: usize) -> (bool, String) {
    let path = dir.join(format!("{name}.sql"));
    std::fs::write(&path, script).expect("script");
    let out = Command::new(env!("CARGO_BIN_EXE_braid"))
        .arg("run")
        .arg(&path)
        .args(["--workers", &workers.to_string()])
        .output()
        .expect("running braid");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const ALL: &str = "CREATE STREAM s (i BIGINT NOT NULL, f DOUBLE, b BOOLEAN, t TEXT, ts TIMESTAMP, tz TIMESTAMP WITH TIME ZONE, d DATE)";

#[test]
fn every_type_round_trips_through_parquet_and_arrow() {
    let scratch = Scratch::new("columnar-types");
    let dir = &scratch.0;
    let d = dir.display();
    let mut csv = String::from("i,f,b,t,ts,tz,d\n");
    for i in 0..5000i64 {
        let null = i % 7 == 3;
        let cell = |s: String| if null { String::new() } else { s };
        csv += &format!(
            "{i},{},{},{},{},{},{}\n",
            cell(format!("{}", (i as f64) * 0.25 - 100.5)),
            cell(format!("{}", i % 2 == 0)),
            cell(format!("\"text, {i} \"\"q\"\"\"")),
            cell(format!(
                "2024-05-01 12:{:02}:{:02}.{:06}",
                (i / 60) % 60,
                i % 60,
                i * 7 % 1_000_000
            )),
            cell(format!("2024-05-01 12:00:{:02}+00", i % 60)),
            cell(format!("2024-{:02}-{:02}", 1 + i % 12, 1 + i % 28)),
        );
    }
    std::fs::write(dir.join("all.csv"), csv).expect("csv");
    let (ok, err) = braid(
        &format!("{ALL} WITH (path = '{d}/all.csv');\nCREATE SINK o WITH (sink = 'csv', path = '{d}/direct.csv');\nINSERT INTO o SELECT * FROM s;\n"),
        dir, "direct", 1,
    );
    assert!(ok, "{err}");
    let direct = std::fs::read(dir.join("direct.csv")).expect("output");
    for (sink, format, file) in [
        ("parquet", "parquet", "all.parquet"),
        ("arrow", "arrow", "all.arrows"),
    ] {
        let (ok, err) = braid(
            &format!("{ALL} WITH (path = '{d}/all.csv');\nCREATE SINK o WITH (sink = '{sink}', path = '{d}/{file}');\nINSERT INTO o SELECT * FROM s;\n"),
            dir, &format!("to-{sink}"), 2,
        );
        assert!(ok, "{err}");
        let (ok, err) = braid(
            &format!("{ALL} WITH (path = '{d}/{file}', format = '{format}');\nCREATE SINK o WITH (sink = 'csv', path = '{d}/back-{sink}.csv');\nINSERT INTO o SELECT * FROM s;\n"),
            dir, &format!("from-{sink}"), 1,
        );
        assert!(ok, "{err}");
        let back = std::fs::read(dir.join(format!("back-{sink}.csv"))).expect("output");
        assert!(
            back == direct,
            "{sink}: the rows read back differ from the CSV's ({} against {} bytes)",
            back.len(),
            direct.len()
        );
    }

    // A column the file lacks, one of another type, a null where NOT NULL is declared.
    let (ok, err) = braid(
        &format!("CREATE STREAM s (i BIGINT, nope BIGINT) WITH (path = '{d}/all.parquet', format = 'parquet');\nSELECT * FROM s;\n"),
        dir, "missing", 1,
    );
    assert!(
        !ok && err.contains("no column `nope`") && err.contains("i, f, b, t, ts, tz, d"),
        "{err}"
    );
    let (ok, err) = braid(
        &format!("CREATE STREAM s (i BIGINT, t BIGINT) WITH (path = '{d}/all.parquet', format = 'parquet');\nSELECT * FROM s;\n"),
        dir, "mistyped", 1,
    );
    assert!(
        !ok && err.contains("column `t` is Utf8 in the file, declared"),
        "{err}"
    );
    let (ok, err) = braid(
        &format!("CREATE STREAM s (i BIGINT, f DOUBLE NOT NULL) WITH (path = '{d}/all.arrows', format = 'arrow');\nCREATE SINK o WITH (sink = 'discard');\nINSERT INTO o SELECT * FROM s;\n"),
        dir, "nulls", 1,
    );
    let nulls = (0..5000).filter(|i| i % 7 == 3).count();
    assert!(
        ok && err.contains(&format!("{nulls} malformed record(s)"))
            && err.contains("line 4, column 2: column f: null, declared NOT NULL"),
        "{err}"
    );
}

#[test]
fn a_query_over_parquet_equals_the_query_over_csv() {
    let scratch = Scratch::new("columnar-query");
    let dir = &scratch.0;
    write_calls_and_texts(dir, 300_000);
    let d = dir.display();
    let calls = "CREATE STREAM calls (caller BIGINT NOT NULL, callee BIGINT, start BIGINT NOT NULL, dur BIGINT)";
    let (ok, err) = braid(
        &format!("{calls} WITH (path = '{d}/calls.csv');\nCREATE SINK p WITH (sink = 'parquet', path = '{d}/calls.parquet');\nINSERT INTO p SELECT * FROM calls;\n"),
        dir, "to-parquet", 1,
    );
    assert!(ok, "{err}");
    let query = |with: &str, out: &str| {
        format!("SET partitions = 8;\n{calls} WITH ({with}, event_time = 'start', epoch = 60);\nCREATE SINK out WITH (sink = 'csv', path = '{d}/{out}.csv');\n{WINDOWED}\n")
    };
    let (ok, err) = braid(
        &query(&format!("path = '{d}/calls.csv'"), "file"),
        dir,
        "file",
        1,
    );
    assert!(ok, "{err}");
    let expected = int_rows(&std::fs::read(dir.join("file.csv")).expect("output"));
    for workers in [1, 2, 4] {
        let out = format!("parquet{workers}");
        let (ok, err) = braid(
            &query(
                &format!("path = '{d}/calls.parquet', format = 'parquet'"),
                &out,
            ),
            dir,
            &out,
            workers,
        );
        assert!(ok, "{err}");
        let got = int_rows(&std::fs::read(dir.join(format!("{out}.csv"))).expect("output"));
        assert!(
            got == expected,
            "Parquet on {workers} workers: {} rows, the CSV's {}",
            got.len(),
            expected.len()
        );
    }

    // Killed while it runs, recovered from its checkpoints (a Parquet source resumes
    // at its row): the uninterrupted output.
    let with = format!("path = '{d}/calls.parquet', format = 'parquet'");
    let script = dir.join("recovered.sql");
    std::fs::write(&script, query(&with, "recovered")).expect("script");
    let t = std::time::Instant::now();
    let (ok, err) = braid(&query(&with, "timed"), dir, "timed", 2);
    assert!(ok, "{err}");
    let took = t.elapsed();
    let ck = dir.join("ck");
    let kills = kill_and_recover(&script, &ck, took, "10ms");
    assert!(
        kills > 0 && ck.join("query-0/LATEST").exists(),
        "{kills} kills"
    );
    let got = int_rows(&std::fs::read(dir.join("recovered.csv")).expect("output"));
    assert!(
        got == expected,
        "recovered after {kills} kills: {} rows, the CSV's {}",
        got.len(),
        expected.len()
    );
}
