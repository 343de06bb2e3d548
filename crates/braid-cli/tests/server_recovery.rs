//! `braid server` killed with SIGKILL at random moments (checkpoints every 50 ms, so
//! during checkpoint writes too) while a producer inserts, and started again on the
//! same data directory: the streams, the views and the view over a view come back by
//! themselves, and when the input is all in, each view holds exactly the rows
//! computed here from the inserted values: nothing missing, nothing twice. Between
//! kills the views change their parallelism while running (`ALTER MATERIALIZED VIEW
//! ... SET PARALLELISM n`). On 1, 2 and 4 workers.

use crate::free_port;
use crate::recovery::{Rng, Scratch};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The server process, killed on drop.
pub(crate) struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn start(data: &Path, port: u16, workers: usize) -> Server {
    let child = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(["server", "--no-http", "--checkpoint-interval-ms", "50"])
        .args(["--workers", &workers.to_string()])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .arg("--data")
        .arg(data)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("braid server starts");
    let server = Server(child);
    await_psql(port);
    server
}

/// Waits (at most 30 s) until the server on `port` takes connections.
fn await_psql(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while psql(port, "SHOW QUERIES").is_err() {
        assert!(
            Instant::now() < deadline,
            "the server did not take connections within 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `sql` with the real psql; its output (unaligned, `,`-separated, no headers).
pub(crate) fn psql(port: u16, sql: &str) -> Result<String, String> {
    let out = Command::new("psql")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "braid"])
        .args([
            "-X",
            "-A",
            "-t",
            "-F",
            ",",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            sql,
        ])
        .output()
        .map_err(|e| format!("psql: {e}"))?;
    match out.status.success() {
        true => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
    }
}

/// The inserted rows, batch by batch: `(caller, t)`, every `t` inside one batch, in
/// time order.
fn batches(seed: u64) -> Vec<Vec<(i64, i64)>> {
    let mut rng = Rng(seed | 1);
    (0..40)
        .map(|b| {
            (0..50)
                .map(|j| (rng.below(7) as i64, b * 5 + j / 10))
                .collect()
        })
        .collect()
}

/// What the views must hold once every window of the input has closed, as sorted
/// lines: `per` (count per caller and 10-unit window) and `busy` (its rows with a count
/// above 14).
fn expected(batches: &[Vec<(i64, i64)>]) -> (Vec<String>, Vec<String>) {
    let mut counts: BTreeMap<(i64, i64), i64> = BTreeMap::new();
    for &(caller, t) in batches.iter().flatten() {
        *counts.entry((caller, t - t.rem_euclid(10))).or_default() += 1;
    }
    let line = |(&(caller, w), &n): (&(i64, i64), &i64)| format!("{caller},{n},{w}");
    let mut per: Vec<String> = counts.iter().map(line).collect();
    let mut busy: Vec<String> = counts.iter().filter(|(_, &n)| n > 14).map(line).collect();
    per.sort();
    busy.sort();
    (per, busy)
}

/// The stream both tests read and the two views over it.
const VIEWS: &str = "CREATE STREAM calls (caller BIGINT, t BIGINT) WITH (event_time = t);\
     CREATE MATERIALIZED VIEW per AS SELECT caller, count(*) AS n, window_start \
       FROM TUMBLE(TABLE calls, t, 10) GROUP BY window_start, window_end, caller;\
     CREATE MATERIALIZED VIEW busy AS SELECT caller, n, window_start FROM per WHERE n > 14;";

/// Inserts `batch` into `calls`.
fn insert(port: u16, batch: &[(i64, i64)]) -> Result<String, String> {
    let values: Vec<String> = batch.iter().map(|(c, t)| format!("({c}, {t})")).collect();
    psql(
        port,
        &format!("INSERT INTO calls VALUES {};", values.join(", ")),
    )
}

/// Closes every window of `input` (a row far ahead), waits (at most 60 s) for the
/// views' files in `streams` to have their rows, and holds them to the rows computed
/// from `input`; `label` says which run it was.
fn views_hold(port: u16, streams: &Path, input: &[Vec<(i64, i64)>], label: &str) {
    psql(port, "INSERT INTO calls VALUES (99, 100000);").expect("the last row");
    let (per, busy) = expected(input);
    views_are(port, streams, &per, &busy, label);
}

/// Waits (at most 60 s) for the views' files in `streams` to have `per` and `busy`'s
/// rows, then a little longer, and holds them to those rows.
fn views_are(port: u16, streams: &Path, per: &[String], busy: &[String], label: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline
        && (lines(&streams.join("per.csv")).len() < per.len()
            || lines(&streams.join("busy.csv")).len() < busy.len())
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    // Anything twice would come now.
    std::thread::sleep(Duration::from_millis(300));
    let queries = psql(port, "SHOW QUERIES").expect("SHOW QUERIES");
    same_lines(
        &lines(&streams.join("per.csv")),
        per,
        &format!("{label}: view per\n{queries}"),
    );
    same_lines(
        &lines(&streams.join("busy.csv")),
        busy,
        &format!("{label}: view busy\n{queries}"),
    );
}

fn lines(path: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect();
    v.sort();
    v
}

#[test]
fn server_views_survive_kills() {
    for workers in [1, 2, 4] {
        let seed = 0x5eed_0000 + workers as u64;
        let scratch = Scratch::new(&format!("server-{workers}"));
        let data = scratch.0.join("data");
        let port = free_port();
        let mut server = start(&data, port, workers);
        psql(port, VIEWS).expect("the stream and views are made");
        let input = batches(seed);
        let mut rng = Rng(seed);
        let mut kills = 0;
        let mut pauses = Vec::new();
        for (b, batch) in input.iter().enumerate() {
            insert(port, batch).unwrap_or_else(|e| panic!("seed {seed:#x}: {e}"));
            // The views change their parallelism while running (and keep it across
            // the kills that follow).
            let alter = match b {
                10 => Some("ALTER MATERIALIZED VIEW per SET PARALLELISM 5"),
                20 => Some("ALTER MATERIALIZED VIEW busy SET PARALLELISM 3"),
                30 => Some("ALTER MATERIALIZED VIEW per SET PARALLELISM 16"),
                _ => None,
            };
            if let Some(alter) = alter {
                let at = Instant::now();
                psql(port, alter).unwrap_or_else(|e| panic!("seed {seed:#x}: {alter}: {e}"));
                pauses.push(at.elapsed());
            }
            // Now and then the server dies, at a random moment after the insert (its
            // rows are durable once acknowledged), and is started again.
            if rng.below(4) == 0 {
                std::thread::sleep(Duration::from_millis(rng.below(120)));
                drop(server);
                kills += 1;
                server = start(&data, port, workers);
            }
        }
        let label = format!("{workers} workers, seed {seed:#x}, {kills} kills");
        views_hold(port, &data.join("streams"), &input, &label);
        assert!(kills >= 3, "seed {seed:#x}: only {kills} kills");
        eprintln!("{workers} workers: {kills} kills, ALTER ... SET PARALLELISM took {pauses:?}");
        drop(server);
    }
}

/// The processes of a server cluster (process 1 first, then process 0, which listens
/// on `port`), `workers` threads each, on fresh loopback ports; returns once process 0
/// takes connections.
/// Each process has the arguments `extra` and the environment `env` besides.
fn start_cluster_with(
    dir: &Path,
    port: u16,
    workers: usize,
    extra: &[&str],
    env: &[(String, String)],
) -> Vec<Server> {
    let hosts = dir.join("hosts");
    std::fs::write(
        &hosts,
        format!("127.0.0.1:{}\n127.0.0.1:{}\n", free_port(), free_port()),
    )
    .expect("hosts file");
    let mut kids = Vec::new();
    for process in [1, 0] {
        let child = Command::new(env!("CARGO_BIN_EXE_braid"))
            .args(["server", "--no-http", "--checkpoint-interval-ms", "50"])
            .args(["--workers", &workers.to_string(), "--processes", "2"])
            .args(["--process-index", &process.to_string()])
            .arg("--hosts")
            .arg(&hosts)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .arg("--data")
            .arg(dir.join(format!("data{process}")))
            .args(extra)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("braid server starts");
        kids.push(Server(child));
    }
    await_psql(port);
    kids
}

/// A server of two processes: one of them (either) killed with SIGKILL at random
/// moments, the other stops on its own within seconds (fail-stop), both are started
/// again, and process 0 brings back the streams and views, every process its share of
/// each view's partitions: the views end exact, also across an ALTER.
#[test]
fn a_server_cluster_comes_back_after_a_process_is_killed() {
    let scratch = Scratch::new("server-cluster");
    let kills = kill_a_cluster(&scratch.0, 0x005e_edc1, &[], &[]);
    eprintln!("2 processes x 2 workers: {kills} kills");
}

/// Runs a server of two processes in `dir` (with `extra` arguments and `env`), the
/// stream and views made, the batches of `seed` inserted, one process (either)
/// killed at random moments, the other stopping on its own, both started again; then
/// holds the views to the rows computed from the input. The kills.
fn kill_a_cluster(dir: &Path, seed: u64, extra: &[&str], env: &[(String, String)]) -> usize {
    let port = free_port();
    let mut cluster = start_cluster_with(dir, port, 2, extra, env);
    psql(port, VIEWS).expect("the stream and views are made");
    let input = batches(seed);
    let mut rng = Rng(seed);
    let mut kills = 0;
    for (b, batch) in input.iter().enumerate() {
        insert(port, batch).unwrap_or_else(|e| panic!("seed {seed:#x}: {e}"));
        if b == 15 {
            psql(port, "ALTER MATERIALIZED VIEW per SET PARALLELISM 6")
                .unwrap_or_else(|e| panic!("seed {seed:#x}: ALTER: {e}"));
        }
        if rng.below(5) == 0 {
            std::thread::sleep(Duration::from_millis(rng.below(120)));
            let victim = rng.below(2) as usize;
            let _ = cluster[victim].0.kill();
            let _ = cluster[victim].0.wait();
            // The other process stops by itself: it cannot go on without its peer.
            let other = &mut cluster[1 - victim].0;
            let deadline = Instant::now() + Duration::from_secs(10);
            while other.try_wait().expect("wait").is_none() {
                assert!(
                    Instant::now() < deadline,
                    "seed {seed:#x}: a process went on 10 s after its peer was killed"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            kills += 1;
            cluster = start_cluster_with(dir, port, 2, extra, env);
        }
    }
    let label = format!("seed {seed:#x}, {kills} kills");
    views_hold(port, &dir.join("data0").join("streams"), &input, &label);
    assert!(kills >= 3, "seed {seed:#x}: only {kills} kills");
    kills
}

/// The same cluster with its checkpoints on S3-compatible object storage (a real
/// s3proxy): `--checkpoints s3://...` on both processes, each writing its own parts
/// there, so neither reads or writes the other's data directory. Both views end exact
/// across the kills and the ALTER; the bucket holds each view's query's committed
/// checkpoint, and the data directories hold no checkpoint (process 0 only its
/// readers' journals). A location that is not a URL is refused.
#[test]
fn a_server_cluster_keeps_its_checkpoints_on_s3() {
    let proxy = crate::s3::S3Proxy::start("server");
    let scratch = Scratch::new("server-s3");
    let url = format!("s3://{}/server", crate::s3::BUCKET);
    let kills = kill_a_cluster(
        &scratch.0,
        0x005e_ed53,
        &["--checkpoints", &url],
        &proxy.env(),
    );
    let bucket = proxy.backend(&url);
    let keys = braid_exec::checkpoint::CheckpointBackend::list(&bucket, "").expect("list");
    let latest: Vec<&String> = keys.iter().filter(|k| k.ends_with("/LATEST")).collect();
    assert_eq!(latest.len(), 2, "a LATEST for each view's query: {keys:?}");
    assert!(
        keys.iter().any(|k| k.ends_with("/MANIFEST")),
        "no committed checkpoint in the bucket: {keys:?}"
    );
    // Parts of both processes' partitions (4 workers in all) are there.
    let parts: Vec<&String> = keys.iter().filter(|k| k.contains("/map-")).collect();
    assert!(parts.len() >= 4, "parts: {parts:?}");
    let local: Vec<String> = walk(&scratch.0.join("data0").join("checkpoints"))
        .into_iter()
        .chain(walk(&scratch.0.join("data1")))
        .filter(|p| {
            !p.ends_with(".log") && !p.contains("/streams/") && !p.ends_with("catalog.json")
        })
        .collect();
    assert!(local.is_empty(), "checkpoint files on disk: {local:?}");
    eprintln!("2 processes x 2 workers, checkpoints on s3: {kills} kills");

    // A follower started without the flag stops at the first checkpointed query,
    // saying why (and the leader with it), instead of running that query apart.
    let dir = scratch.0.join("no-flag");
    std::fs::create_dir_all(&dir).expect("dir");
    let hosts = dir.join("hosts");
    std::fs::write(
        &hosts,
        format!("127.0.0.1:{}\n127.0.0.1:{}\n", free_port(), free_port()),
    )
    .expect("hosts file");
    let port = free_port();
    let mut kids: Vec<Server> = [1, 0]
        .into_iter()
        .map(|process| {
            let mut c = Command::new(env!("CARGO_BIN_EXE_braid"));
            c.args(["server", "--no-http", "--processes", "2"])
                .args(["--process-index", &process.to_string()])
                .arg("--hosts")
                .arg(&hosts)
                .args(["--listen", &format!("127.0.0.1:{port}")])
                .arg("--data")
                .arg(dir.join(format!("data{process}")))
                .envs(proxy.env())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.join(format!("err{process}"))).expect("err"));
            if process == 0 {
                c.args(["--checkpoints", &url]);
            }
            Server(c.spawn().expect("braid server starts"))
        })
        .collect();
    await_psql(port);
    let made = psql(port, VIEWS);
    let deadline = Instant::now() + Duration::from_secs(20);
    while kids[0].0.try_wait().expect("wait").is_none() {
        assert!(
            Instant::now() < deadline,
            "a follower without --checkpoints went on for 20 s: {made:?} {} {}",
            std::fs::read_to_string(dir.join("err1")).unwrap_or_default(),
            std::fs::read_to_string(dir.join("err0")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let err = std::fs::read_to_string(dir.join("err1")).unwrap_or_default();
    assert!(
        err.contains("start every process of the cluster with the same --checkpoints"),
        "{err}"
    );

    let o = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(["server", "--no-http", "--checkpoints", "/tmp/ck"])
        .output()
        .expect("braid server");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("expected an object-storage URL"), "{err}");
}

/// Every file under `dir` (none when it is missing), as paths.
fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        match p.is_dir() {
            true => out.extend(walk(&p)),
            false => out.push(p.display().to_string()),
        }
    }
    out
}

/// A stream fed by a tailed file (`tail = ...`) while the server is killed with
/// SIGKILL at random moments, some batches inserted with psql in between: started
/// again, the tail reads on from where its last append to the stream left it, so the
/// stream's log holds every row of the file once (lines cut across two writes, and
/// malformed lines, included) with the inserted ones, and both views are exact.
#[test]
fn a_tailed_stream_is_read_on_after_kills() {
    let seed = 0x005e_edf1_u64;
    let scratch = Scratch::new("server-tail");
    let data = scratch.0.join("data");
    let file = scratch.0.join("calls-in.csv");
    std::fs::write(&file, "caller,t\n").expect("the tailed file");
    let port = free_port();
    let mut server = start(&data, port, 2);
    let (_, views) = VIEWS.split_once(';').expect("the views after the stream");
    psql(
        port,
        &format!(
            "CREATE STREAM calls (caller BIGINT, t BIGINT) WITH (event_time = t, tail = '{}', header = true);{views}",
            file.display()
        ),
    )
    .expect("the stream and views are made");
    let input = batches(seed);
    let mut rng = Rng(seed);
    let mut kills = 0;
    let append = |text: &str| {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .expect("the tailed file");
        f.write_all(text.as_bytes()).expect("append");
    };
    let mut bad = 0;
    for (b, batch) in input.iter().enumerate() {
        if b % 7 == 3 {
            insert(port, batch).unwrap_or_else(|e| panic!("seed {seed:#x}: {e}"));
        } else {
            let mut text: String = batch.iter().map(|(c, t)| format!("{c},{t}\n")).collect();
            if b % 5 == 0 {
                text += "oops,1\n";
                bad += 1;
            }
            // Written in two pieces, cut anywhere (inside a line too).
            let cut = rng.below(text.len() as u64) as usize;
            append(&text[..cut]);
            std::thread::sleep(Duration::from_millis(rng.below(30)));
            append(&text[cut..]);
        }
        if rng.below(4) == 0 {
            std::thread::sleep(Duration::from_millis(rng.below(120)));
            drop(server);
            kills += 1;
            server = start(&data, port, 2);
        }
    }
    // Every row of the input once in the stream's log.
    let mut want: Vec<String> = input
        .iter()
        .flatten()
        .map(|(c, t)| format!("{c},{t}"))
        .collect();
    want.sort();
    let log = data.join("streams").join("calls.csv");
    let deadline = Instant::now() + Duration::from_secs(60);
    while lines(&log).len() < want.len() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    let label = format!("seed {seed:#x}, {kills} kills");
    same_lines(&lines(&log), &want, &format!("{label}: the stream's log"));
    assert!(bad > 0);
    views_hold(port, &data.join("streams"), &input, &label);
    assert!(kills >= 3, "{label}: too few kills");
    eprintln!("a tailed stream: {kills} kills");
}

/// Holds sorted lines `got` to `want`, naming the first few lines one has more often
/// than the other (rows twice, or missing) when they differ.
fn same_lines(got: &[String], want: &[String], label: &str) {
    if got == want {
        return;
    }
    let mut count: BTreeMap<&str, i64> = BTreeMap::new();
    got.iter().for_each(|l| *count.entry(l).or_default() += 1);
    want.iter().for_each(|l| *count.entry(l).or_default() -= 1);
    let extra: Vec<_> = count.iter().filter(|(_, &n)| n > 0).take(5).collect();
    let missing: Vec<_> = count.iter().filter(|(_, &n)| n < 0).take(5).collect();
    panic!(
        "{label}: {} lines, expected {}; more often than expected: {extra:?}; missing: {missing:?}",
        got.len(),
        want.len()
    );
}

/// A stream that keeps only its newest 10 rows (`retention = 10`) while the views
/// over it are checkpointed and the server is killed at random moments: each view's
/// query holds the rows its last committed checkpoint would read again, so every
/// restart finds them and both views end exact; the stream's file is trimmed (it
/// starts at a later row and holds a fraction of what was inserted); a subscriber
/// that starts now reads from the first row kept.
#[test]
fn a_stream_with_a_retention_is_trimmed_and_its_views_survive_kills() {
    let seed = 0x005e_ed7e_u64;
    let scratch = Scratch::new("server-retention");
    let data = scratch.0.join("data");
    let port = free_port();
    let mut server = start(&data, port, 2);
    let views = VIEWS.replacen(
        "WITH (event_time = t)",
        "WITH (event_time = t, retention = 10)",
        1,
    );
    assert_ne!(views, VIEWS);
    psql(port, &views).expect("the stream and views are made");
    let input = batches(seed);
    let mut rng = Rng(seed);
    let mut kills = 0;
    for batch in &input {
        insert(port, batch).unwrap_or_else(|e| panic!("seed {seed:#x}: {e}"));
        if rng.below(4) == 0 {
            std::thread::sleep(Duration::from_millis(rng.below(120)));
            drop(server);
            kills += 1;
            server = start(&data, port, 2);
        }
    }
    let label = format!("seed {seed:#x}, {kills} kills");
    views_hold(port, &data.join("streams"), &input, &label);
    assert!(kills >= 3, "{label}: too few kills");
    let inserted: usize = input.iter().map(Vec::len).sum::<usize>() + 1;
    let text = std::fs::read_to_string(data.join("streams").join("calls.csv")).expect("log");
    let first: u64 = text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("#braid first="))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{label}: the stream's file was not trimmed"));
    let kept = text.lines().count() - 1;
    assert!(
        kept < inserted / 4 && first as usize + kept == inserted,
        "{label}: the file keeps rows {first}.. ({kept} of {inserted})"
    );
    // A subscriber starting now reads the rows kept, from the first.
    let rows = psql(port, "SELECT caller, t FROM calls LIMIT 50").expect("SELECT");
    let got: Vec<&str> = rows.lines().collect();
    assert_eq!(got.len(), 50, "{label}: {rows}");
    // ... which are the rows of the stream from one on, in order (the memory may keep
    // fewer than the file, which is rewritten less often).
    let file: Vec<&str> = text.lines().skip(1).collect();
    assert!(
        file.windows(got.len()).any(|w| w == got.as_slice()),
        "{label}: the new reader's rows are not a run of the stream's: {got:?}"
    );
    let t0: i64 = got[0]
        .split(',')
        .nth(1)
        .and_then(|t| t.parse().ok())
        .expect("a time");
    assert!(
        t0 >= 100,
        "{label}: a new reader starts at time {t0}, before the rows kept"
    );
    eprintln!("retention = 10: {kills} kills, file keeps rows {first}.. ({kept} of {inserted})");
}

/// The lines of every readers' journal (`ticks-*.log`) under `data`.
fn journal_lines(data: &Path) -> Vec<usize> {
    walk(&data.join("checkpoints"))
        .into_iter()
        .filter(|p| p.contains("ticks-"))
        .map(|p| {
            std::fs::read_to_string(p)
                .unwrap_or_default()
                .lines()
                .count()
        })
        .collect()
}

/// A stream whose time moves with the clock while it is idle (`time_unit = 'ms'`,
/// 10 ms epochs): its views' readers journal a close per heartbeat, and each commit
/// drops the closes a recovery would not replay, so after 1.5 s idle the journals are
/// short; killed and started again, the views are exact (the last row's window too:
/// time moves on after it).
#[test]
fn an_idle_streams_journal_is_compacted_at_each_commit() {
    let seed = 0x005e_ed1d_u64;
    let scratch = Scratch::new("server-journal");
    let data = scratch.0.join("data");
    let port = free_port();
    let server = start(&data, port, 2);
    let views = VIEWS.replacen(
        "WITH (event_time = t)",
        "WITH (event_time = t, time_unit = 'ms', epoch = 10)",
        1,
    );
    psql(port, &views).expect("the stream and views are made");
    let input = batches(seed);
    // In one statement: time moves with the clock between statements, and would make
    // later rows of these small times late.
    insert(port, &input.concat()).unwrap_or_else(|e| panic!("seed {seed:#x}: {e}"));
    // About 150 heartbeat closes per reader.
    std::thread::sleep(Duration::from_millis(1500));
    let journal = journal_lines(&data);
    assert!(
        !journal.is_empty() && journal.iter().all(|&n| n < 40),
        "journal lines per reader: {journal:?}"
    );
    drop(server);
    let server = start(&data, port, 2);
    // Every window has closed (time moved on), the last row's too once it is in.
    psql(port, "INSERT INTO calls VALUES (99, 100000);").expect("the last row");
    let (mut per, busy) = expected(&input);
    per.push("99,1,100000".into());
    per.sort();
    let label = format!("seed {seed:#x}, after a restart");
    views_are(port, &data.join("streams"), &per, &busy, &label);
    eprintln!("journal lines after 1.5 s idle: {journal:?}");
    drop(server);
}
