//! Crash and recovery of `braid run` with checkpoints: real processes killed with
//! SIGKILL at random moments (during checkpoint writes too), resumed with `--recover`,
//! on 1, 2 and 4 workers and on 1 and 2 processes (loopback cluster); the final output
//! file must be byte for byte the output of a run that was never interrupted (nothing
//! missing, nothing twice), and it is also checked against rows computed here.
//! Restores onto another worker or process count than the checkpoint was taken with
//! are part of the mix, and so is the fail-stop of a cluster that loses a process.

use crate::free_port;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A scratch directory, removed on drop.
pub(crate) struct Scratch(pub(crate) PathBuf);

impl Scratch {
    pub(crate) fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("braid-recovery-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// xorshift64*: the kill moments, reproducible from the seed printed on failure.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// How a job runs: its arguments to `braid run` (workers, processes and checkpoint
/// flags are added) and the output file it writes.
pub(crate) struct Job {
    pub(crate) name: &'static str,
    pub(crate) args: Vec<String>,
    pub(crate) output: PathBuf,
    /// The output's order is the same on any worker count (a transparent or ordered
    /// merge): compared byte for byte; otherwise as a multiset of lines (a row twice or
    /// missing still shows).
    pub(crate) ordered: bool,
}

/// The output as compared: itself, or its lines sorted.
pub(crate) fn canonical(job: &Job, out: Vec<u8>) -> Vec<u8> {
    if job.ordered {
        return out;
    }
    let mut lines: Vec<&[u8]> = out.split(|&b| b == b'\n').collect();
    lines.sort();
    lines.join(&b'\n')
}

/// The processes of one run, killed on drop (a failing test leaves none behind).
pub(crate) struct Kids(pub(crate) Vec<Child>);

impl Drop for Kids {
    fn drop(&mut self) {
        for k in &mut self.0 {
            let _ = k.kill();
            let _ = k.wait();
        }
    }
}

impl std::ops::Deref for Kids {
    type Target = Vec<Child>;
    fn deref(&self) -> &Vec<Child> {
        &self.0
    }
}

impl std::ops::DerefMut for Kids {
    fn deref_mut(&mut self) -> &mut Vec<Child> {
        &mut self.0
    }
}

/// One `braid run` of `job` on `workers` x `processes`, with `extra` flags.
fn start(job: &Job, workers: usize, processes: usize, extra: &[String], dir: &Path) -> Kids {
    start_with_env(job, workers, processes, extra, dir, &[])
}

/// [`start`] with the environment variables `env` set for every process.
pub(crate) fn start_with_env(
    job: &Job,
    workers: usize,
    processes: usize,
    extra: &[String],
    dir: &Path,
    env: &[(String, String)],
) -> Kids {
    let hosts = dir.join("hosts");
    if processes > 1 {
        let lines: Vec<String> = (0..processes)
            .map(|_| format!("127.0.0.1:{}", free_port()))
            .collect();
        std::fs::write(&hosts, lines.join("\n") + "\n").expect("hosts file");
    }
    let kids = (0..processes)
        .map(|p| {
            let mut c = Command::new(env!("CARGO_BIN_EXE_braid"));
            c.arg("run")
                .args(&job.args)
                .args(["--workers", &workers.to_string()]);
            if processes > 1 {
                c.args([
                    "--processes",
                    &processes.to_string(),
                    "--process-index",
                    &p.to_string(),
                ]);
                c.arg("--hosts").arg(&hosts);
                c.args(["--connect-timeout", "3s"]);
            }
            c.args(extra)
                .envs(env.iter().map(|(k, v)| (k, v)))
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.join(format!("err-{p}"))).expect("stderr file"));
            c.spawn().expect("braid runs")
        })
        .collect::<Vec<_>>();
    Kids(kids)
}

/// Waits for every child until `deadline`; true when all exited (status 0 asserted).
pub(crate) fn wait_all(kids: &mut [Child], deadline: Instant, dir: &Path) -> bool {
    loop {
        let mut all = true;
        for (p, k) in kids.iter_mut().enumerate() {
            match k.try_wait().expect("wait") {
                Some(status) => assert!(
                    status.success(),
                    "process {p} failed ({status}): {}",
                    std::fs::read_to_string(dir.join(format!("err-{p}"))).unwrap_or_default()
                ),
                None => all = false,
            }
        }
        if all {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// What the kills hit.
#[derive(Default, Debug)]
pub(crate) struct Kills {
    pub(crate) total: usize,
    /// Kills that left a checkpoint written in part (a `chk-*` directory newer than
    /// the committed one).
    during_checkpoint: usize,
    /// Recoveries that resumed from a checkpoint (the others started over).
    pub(crate) resumed: usize,
}

/// Runs `job` on `workers` x `processes` with checkpoints and kills it at random
/// moments until it was killed `kills` times, resuming after each kill (on a worker
/// count from `rescale`, when given); a run that ends before its kill is a finished
/// episode, and the next starts over. Returns every finished episode's output.
#[allow(clippy::too_many_arguments)]
pub(crate) fn crash_until_done(
    job: &Job,
    workers: usize,
    processes: usize,
    kills: usize,
    span: Duration,
    rng: &mut Rng,
    tally: &mut Kills,
    rescale: &[usize],
) -> Vec<Vec<u8>> {
    let scratch = job.output.parent().expect("output dir").to_path_buf();
    let dir = scratch.join(format!("ck-{workers}x{processes}"));
    let mut outputs = Vec::new();
    let (mut killed, mut first, mut w) = (0, true, workers);
    loop {
        if first {
            let _ = std::fs::remove_dir_all(&dir);
            let _ = std::fs::remove_file(&job.output);
            w = workers;
        }
        let mut extra = vec![
            if first { "--checkpoint" } else { "--recover" }.to_string(),
            dir.display().to_string(),
        ];
        extra.extend(["--checkpoint-interval".to_string(), "30ms".to_string()]);
        let mut kids = start(job, w, processes, &extra, &scratch);
        // Every other kill comes a random moment after a checkpoint is committed (or
        // the run ends first): drawn from the start alone, on a machine slower than
        // when the uninterrupted run was timed, all could fall before the first one.
        let mut ended = false;
        if killed < kills && killed % 2 == 1 {
            let give_up = Instant::now() + Duration::from_secs(60);
            while latest_checkpoint(&dir).is_none() && Instant::now() < give_up {
                if wait_all(
                    &mut kids,
                    Instant::now() + Duration::from_millis(2),
                    &scratch,
                ) {
                    ended = true;
                    break;
                }
            }
        }
        let until = match killed < kills {
            true => Instant::now() + Duration::from_micros(rng.below(span.as_micros() as u64)),
            false => Instant::now() + Duration::from_secs(300),
        };
        if ended || wait_all(&mut kids, until, &scratch) {
            outputs.push(std::fs::read(&job.output).expect("output"));
            first = true;
            if killed >= kills {
                return outputs;
            }
            continue;
        }
        assert!(killed < kills, "{}: the last run did not finish", job.name);
        let victim = rng.below(processes as u64) as usize;
        kids[victim].kill().expect("kill -9");
        kids[victim].wait().expect("reap");
        killed += 1;
        tally.total += 1;
        first = false;
        // Fail-stop: the others stop within seconds, naming the lost process.
        for (p, k) in kids.iter_mut().enumerate() {
            if p == victim {
                continue;
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            let status = loop {
                if let Some(s) = k.try_wait().expect("wait") {
                    break s;
                }
                assert!(
                    Instant::now() < deadline,
                    "process {p} still runs 10 s after process {victim} was killed"
                );
                std::thread::sleep(Duration::from_millis(5));
            };
            if !status.success() {
                let err =
                    std::fs::read_to_string(scratch.join(format!("err-{p}"))).unwrap_or_default();
                assert!(
                    err.contains(&format!("lost process {victim}"))
                        || err.contains("could not connect to every process"),
                    "process {p} stopped ({status}) without naming process {victim}: {err}"
                );
            }
        }
        let at = checkpoints_of(&dir);
        let latest = latest_checkpoint(&dir);
        let partial = std::fs::read_dir(&at)
            .map(|d| {
                d.flatten().any(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(|n| n.strip_prefix("chk-"))
                        .and_then(|n| n.parse::<u64>().ok())
                        .is_some_and(|c| Some(c) > latest)
                })
            })
            .unwrap_or(false);
        tally.during_checkpoint += usize::from(partial);
        tally.resumed += usize::from(latest.is_some());
        if !rescale.is_empty() {
            w = rescale[rng.below(rescale.len() as u64) as usize];
        }
    }
}

/// Where a run's checkpoints into `dir` are: a script's query checkpoints into
/// `dir/query-N`.
fn checkpoints_of(dir: &Path) -> PathBuf {
    match dir.join("query-0").exists() {
        true => dir.join("query-0"),
        false => dir.to_path_buf(),
    }
}

/// The epoch of the latest committed checkpoint in `dir`, if any.
fn latest_checkpoint(dir: &Path) -> Option<u64> {
    std::fs::read_to_string(checkpoints_of(dir).join("LATEST"))
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
}

/// The uninterrupted run's output and how long it took.
pub(crate) fn reference(job: &Job, scratch: &Path) -> (Vec<u8>, Duration) {
    let t = Instant::now();
    let mut kids = start(job, 1, 1, &[], scratch);
    assert!(wait_all(
        &mut kids,
        Instant::now() + Duration::from_secs(300),
        scratch
    ));
    (std::fs::read(&job.output).expect("output"), t.elapsed())
}

/// Kills per configuration: 4, or `BRAID_KILLS` (the 20-kill sweep is run by hand:
/// `BRAID_KILLS=20 cargo test -p braid-cli --test tests survives_kills`).
fn kills() -> usize {
    std::env::var("BRAID_KILLS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(4)
}

/// Runs the crash harness for `job` over the worker and process counts, with
/// `kills` kills per configuration.
fn harness(job: &Job, scratch: &Path, kills: usize, seed: u64, expect: impl Fn(&[u8])) {
    let (want, took) = reference(job, scratch);
    expect(&want);
    let want = canonical(job, want);
    let mut rng = Rng(seed);
    let mut tally = Kills::default();
    for (workers, processes, rescale) in [
        (1, 1, &[][..]),
        (2, 1, &[1, 4][..]),
        (4, 1, &[][..]),
        (1, 2, &[][..]),
        (2, 2, &[1, 2][..]),
    ] {
        let span = took + Duration::from_millis(100);
        let outputs = crash_until_done(
            job, workers, processes, kills, span, &mut rng, &mut tally, rescale,
        );
        for got in outputs {
            let got = canonical(job, got);
            assert!(
                got == want,
                "{}: {workers} worker(s) x {processes} process(es), seed {seed}: the recovered output ({} bytes, {} lines) differs from the uninterrupted run's ({} bytes, {} lines); first difference at byte {}",
                job.name,
                got.len(),
                got.iter().filter(|&&b| b == b'\n').count(),
                want.len(),
                want.iter().filter(|&&b| b == b'\n').count(),
                got.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()))
            );
        }
    }
    eprintln!("{}: {tally:?} (uninterrupted run {took:?})", job.name);
    assert!(tally.total >= 5 * kills, "{}: {tally:?}", job.name);
    assert!(
        tally.resumed > 0,
        "{}: no kill came after a checkpoint: {tally:?}",
        job.name
    );
}

/// Per-partition row counts at each epoch's end, from the generator: `count` over
/// hash-routed keys, merged in serial order.
/// The built-in count function over generated tuples (`generator`: its flags), merged
/// in order into `output`.
fn count_job(output: PathBuf, generator: &[&str]) -> Job {
    Job {
        name: "count",
        args: generator
            .iter()
            .chain(&["--function", "count", "--merge", "ordered", "--output"])
            .map(|s| s.to_string())
            .chain([output.display().to_string()])
            .collect(),
        output,
        ordered: true,
    }
}

#[test]
fn count_survives_kills() {
    let dir = Scratch::new("count");
    let job = count_job(
        dir.0.join("out.csv"),
        &[
            "--tuples", "10000000", "--keys", "1000", "--parts", "8", "--rate", "20000",
        ],
    );
    let seed = 0x5eed_0001 ^ u64::from(std::process::id());
    harness(&job, &dir.0, kills(), seed, |out| {
        // Each partition's last count is its share of the tuples: they add up to all.
        let text = std::str::from_utf8(out).expect("utf-8");
        let total: i64 = text
            .lines()
            .filter_map(|l| {
                let f: Vec<i64> = l.split(',').map(|x| x.parse().expect("int")).collect();
                (f[1] == -1).then_some(f[2])
            })
            .sum();
        assert_eq!(total, 10_000_000, "final counts: {text}");
    });
}

/// A run that finishes leaves one checkpoint: the one `LATEST` names. With a checkpoint
/// every millisecond the last barriers go out just before the input ends; those commit
/// when the dataflow is done rather than stay, uncommitted, beside an older `LATEST`
/// (before they did, about half of these runs on 4 workers left such checkpoints).
#[test]
fn a_finished_run_leaves_only_its_last_checkpoint() {
    let dir = Scratch::new("finished");
    for (run, workers) in [1, 2, 4, 4, 2, 4, 4].into_iter().enumerate() {
        let job = count_job(
            dir.0.join(format!("out-{run}.csv")),
            &["--tuples", "3000000", "--keys", "100000", "--parts", "64"],
        );
        let ck = dir.0.join(format!("ck-{run}"));
        let extra = [
            "--checkpoint".to_string(),
            ck.display().to_string(),
            "--checkpoint-interval".to_string(),
            "1ms".to_string(),
        ];
        let mut kids = start(&job, workers, 1, &extra, &dir.0);
        assert!(wait_all(
            &mut kids,
            Instant::now() + Duration::from_secs(300),
            &dir.0
        ));
        let latest = last_checkpoint(&ck).expect("LATEST");
        let mut kept: Vec<String> = std::fs::read_dir(&ck)
            .expect("checkpoint dir")
            .flatten()
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .filter(|n| n.starts_with("chk-"))
            .collect();
        kept.sort();
        assert_eq!(
            kept,
            [format!("chk-{latest:020}")],
            "{workers} worker(s): the checkpoints a finished run leaves"
        );
    }
}

/// Calls and texts over `minutes` minutes: `(caller, callee, start, dur)` and
/// `(sender, receiver, start)`, event times nondecreasing.
pub(crate) fn write_calls_and_texts(dir: &Path, rows: u64) {
    let mut rng = Rng(0x00ca_11ed);
    let mut calls = String::from("caller,callee,start,dur\n");
    let mut texts = String::from("sender,receiver,start\n");
    let mut t = 0u64;
    for _ in 0..rows {
        t += rng.below(3);
        let a = rng.below(5000);
        calls += &format!("{a},{},{t},{}\n", rng.below(5000), rng.below(900));
        if rng.below(2) == 0 {
            let s = if rng.below(3) == 0 {
                a
            } else {
                rng.below(5000)
            };
            texts += &format!("{s},{},{}\n", rng.below(5000), t + rng.below(20));
        }
    }
    std::fs::write(dir.join("calls.csv"), calls).expect("calls");
    std::fs::write(dir.join("texts.csv"), texts).expect("texts");
}

/// The streams of the SQL jobs, and their sink.
fn sql_head(dir: &Path) -> String {
    let d = dir.display();
    format!(
        "SET partitions = 8;
CREATE STREAM calls (caller BIGINT NOT NULL, callee BIGINT, start BIGINT NOT NULL, dur BIGINT)
  WITH (path = '{d}/calls.csv', event_time = 'start', epoch = 60);
CREATE STREAM texts (sender BIGINT NOT NULL, receiver BIGINT, start BIGINT NOT NULL)
  WITH (path = '{d}/texts.csv', event_time = 'start', epoch = 60);
CREATE SINK out WITH (sink = 'csv', path = '{d}/out.csv');
"
    )
}

/// A tumbling aggregate per key (one stage, keyed by the group).
pub(crate) const WINDOWED: &str =
    "INSERT INTO out SELECT window_end, caller % 100 AS k, count(*) AS n, sum(dur) AS total
FROM calls GROUP BY TUMBLE(start, 600), caller % 100;";

/// An interval join keyed by the subscriber, then an aggregate keyed by the call length
/// band: two stages with their own partitioning, the second reading the first's output.
pub(crate) const TWO_STAGE_JOIN: &str = "INSERT INTO out
SELECT window_end, c.dur / 60 AS minutes, count(*) AS pairs, count(DISTINCT c.caller) AS callers
FROM calls AS c JOIN texts AS t
  ON c.caller = t.sender AND t.start BETWEEN c.start - 60 AND c.start + 60
GROUP BY TUMBLE(c.start, 3600), c.dur / 60;";

/// A job running `query` (after [`sql_head`]'s streams and sink) from a script in `dir`,
/// its output compared byte for byte.
pub(crate) fn sql_job(dir: &Path, name: &'static str, query: &str) -> Job {
    let script = dir.join("q.sql");
    std::fs::write(&script, sql_head(dir) + query).expect("script");
    Job {
        name,
        args: vec![script.display().to_string()],
        output: dir.join("out.csv"),
        ordered: true,
    }
}

/// The output's rows as integers (a header line, if any, skipped), sorted.
pub(crate) fn int_rows(out: &[u8]) -> Vec<Vec<i64>> {
    let mut rows: Vec<Vec<i64>> = std::str::from_utf8(out)
        .expect("utf-8")
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit() || c == '-'))
        .map(|l| {
            l.split(',')
                .map(|x| x.parse().unwrap_or(i64::MIN))
                .collect()
        })
        .collect();
    rows.sort();
    rows
}

/// A tumbling aggregate per key (one stage, keyed by the group).
#[test]
fn windowed_sql_survives_kills() {
    let dir = Scratch::new("window");
    write_calls_and_texts(&dir.0, 300_000);
    let job = sql_job(&dir.0, "windowed SQL", WINDOWED);
    // The windows, computed here from the input.
    let calls = std::fs::read_to_string(dir.0.join("calls.csv")).expect("calls");
    let mut want: std::collections::BTreeMap<(i64, i64), (i64, i64)> = Default::default();
    for l in calls.lines().skip(1) {
        let f: Vec<i64> = l.split(',').map(|x| x.parse().expect("int")).collect();
        let e = want
            .entry((f[2] / 600 * 600 + 600, f[0] % 100))
            .or_default();
        e.0 += 1;
        e.1 += f[3];
    }
    let want: Vec<Vec<i64>> = want
        .into_iter()
        .map(|((w, k), (n, s))| vec![w, k, n, s])
        .collect();
    let seed = 0x5eed_0002 ^ u64::from(std::process::id());
    harness(&job, &dir.0, kills(), seed, |out| {
        assert_eq!(int_rows(out), want)
    });
}

/// An interval join keyed by the subscriber, then an aggregate keyed by the call length
/// band: two stages with their own partitioning, the second reading the first's output.
#[test]
fn two_stage_join_survives_kills() {
    let dir = Scratch::new("join");
    write_calls_and_texts(&dir.0, 150_000);
    let job = sql_job(&dir.0, "two-stage join", TWO_STAGE_JOIN);
    let seed = 0x5eed_0003 ^ u64::from(std::process::id());
    harness(&job, &dir.0, kills(), seed, |out| {
        assert!(int_rows(out).len() > 100, "too few rows to test anything");
    });
}

/// Linear Road input of `xways` expressways and `minutes` minutes generated into
/// `dir/lrb`, and the parallel plan of examples/linear_road.sql at `partitions`
/// partitions reading it, its answers to `dir/out.csv`: the job of script
/// `dir/lr-<partitions>.sql`.
fn linear_road_job(dir: &Path, xways: u32, minutes: u32, partitions: &[u32]) -> Vec<Job> {
    let lrb = dir.join("lrb");
    let braid = env!("CARGO_BIN_EXE_braid");
    let gen = Command::new(braid)
        .args(["lrb", "generate", "--xways", &xways.to_string()])
        .args([
            "--minutes",
            &minutes.to_string(),
            "--profile",
            "steady",
            "--out",
        ])
        .arg(&lrb)
        .output()
        .expect("braid lrb generate");
    assert!(
        gen.status.success(),
        "{}",
        String::from_utf8_lossy(&gen.stderr)
    );
    let out = dir.join("out.csv");
    let text = linear_road::app::example_script(&lrb.join("input.csv"), &out)
        .expect("the example's script");
    assert!(
        text.contains("partitions => 8,"),
        "the example's partitions changed"
    );
    partitions
        .iter()
        .map(|q| {
            let script = dir.join(format!("lr-{q}.sql"));
            let text = text.replace("partitions => 8,", &format!("partitions => {q},"));
            std::fs::write(&script, text).expect("script");
            Job {
                name: "Linear Road",
                args: vec![
                    script.display().to_string(),
                    "--lrb-history".into(),
                    lrb.display().to_string(),
                ],
                output: out.clone(),
                ordered: false,
            }
        })
        .collect()
}

/// Checks Linear Road answers (the rows of the CSV sink) with `braid lrb validate`
/// against the input and histories in `dir/lrb` (emit time = the answer's time:
/// validated without deadlines, as a run as fast as possible is).
fn validate_linear_road(dir: &Path, answers: &[u8]) {
    let lrb = dir.join("lrb");
    let mut lines = String::new();
    for r in int_rows(answers) {
        let r: [i64; 7] = r.try_into().expect("7 columns");
        if let Some(o) = linear_road::app::to_output(&r, r[1]) {
            lines += &format!("{o}\n");
        }
    }
    let path = dir.join("answers.csv");
    std::fs::write(&path, lines).expect("answers");
    let v = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(["lrb", "validate", "--no-deadlines", "--input"])
        .arg(lrb.join("input.csv"))
        .arg("--history")
        .arg(lrb.join("toll-history.csv"))
        .arg("--segment-history")
        .arg(lrb.join("segment-history.csv"))
        .arg("--output")
        .arg(&path)
        .output()
        .expect("braid lrb validate");
    assert!(
        v.status.success(),
        "{}{}",
        String::from_utf8_lossy(&v.stdout),
        String::from_utf8_lossy(&v.stderr)
    );
}

/// Linear Road (the parallel plan of examples/linear_road.sql, its answers to a CSV
/// file): the recovered answers equal the uninterrupted run's, and pass the validator.
#[test]
fn linear_road_survives_kills() {
    let dir = Scratch::new("lr");
    let job = linear_road_job(&dir.0, 1, 8, &[8]).remove(0);
    let seed = 0x5eed_0004 ^ u64::from(std::process::id());
    harness(&job, &dir.0, kills(), seed, |answers| {
        validate_linear_road(&dir.0, answers)
    });
}

/// Linear Road over 4 expressways checkpointed at 2 partitions (two expressways each)
/// on 2 workers, killed (kill -9) once a checkpoint is committed, resumes at 4
/// partitions on 4 workers, at 3 (coprime) on 1 and at 1 on 2: each partition's state
/// is split or joined by expressway (`Partition::absorb`), and the answers are the
/// uninterrupted run's and pass the validator.
#[test]
fn linear_road_resumes_at_other_partition_counts() {
    let dir = Scratch::new("lr-q");
    let jobs = linear_road_job(&dir.0, 4, 5, &[2, 4, 3, 1]);
    let (want, _) = reference(&jobs[0], &dir.0);
    validate_linear_road(&dir.0, &want);
    let want = canonical(&jobs[0], want);
    let ck = dir.0.join("ck");
    let extra = [
        "--checkpoint".to_string(),
        ck.display().to_string(),
        "--checkpoint-interval".to_string(),
        "30ms".to_string(),
    ];
    let mut kids = start(&jobs[0], 2, 1, &extra, &dir.0);
    // Killed once a checkpoint of second 100 or later (of 300) is committed: the
    // state holds every expressway's vehicles and segments by then.
    let latest = ck.join("query-0").join("LATEST");
    let committed = || {
        std::fs::read_to_string(&latest)
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
    };
    while committed().is_none_or(|c| c < 100) {
        assert!(
            kids[0].try_wait().expect("wait").is_none(),
            "the run ended before it was killed: {}",
            std::fs::read_to_string(dir.0.join("err-0")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    kids[0].kill().expect("kill -9");
    kids[0].wait().expect("reap");
    let partial = std::fs::read(&jobs[0].output).expect("partial answers");
    for (job, q, workers) in [(&jobs[1], 4, 4), (&jobs[2], 3, 1), (&jobs[3], 1, 2)] {
        let at = dir.0.join(format!("ck-{q}"));
        let copied = Command::new("cp")
            .arg("-r")
            .arg(&ck)
            .arg(&at)
            .status()
            .expect("cp");
        assert!(copied.success());
        std::fs::write(&job.output, &partial).expect("partial answers back");
        let mut kids = start(
            job,
            workers,
            1,
            &["--recover".into(), at.display().to_string()],
            &dir.0,
        );
        assert!(
            wait_all(&mut kids, Instant::now() + Duration::from_secs(300), &dir.0),
            "the resumed run did not end"
        );
        let err = std::fs::read_to_string(dir.0.join("err-0")).unwrap_or_default();
        assert!(
            err.contains("resumed from the checkpoint after epoch"),
            "{err}"
        );
        let got = std::fs::read(&job.output).expect("answers");
        validate_linear_road(&dir.0, &got);
        let got = canonical(job, got);
        assert!(
            got == want,
            "resumed at {q} partitions on {workers} workers: {} bytes, the uninterrupted run {}\n{err}",
            got.len(),
            want.len()
        );
    }
}

/// `--launch N` starts a local cluster of N processes, and `--launch-with CMD` starts a
/// process per host of a hosts file through CMD (here a stand-in for ssh that runs the
/// command line it is given locally); both give the output of one process.
#[test]
fn launch_starts_every_process() {
    let dir = Scratch::new("launch");
    let braid = env!("CARGO_BIN_EXE_braid");
    let run = |out: &Path, extra: &[&str]| {
        let o = Command::new(braid)
            .args([
                "run",
                "--tuples",
                "400000",
                "--keys",
                "100",
                "--parts",
                "6",
                "--function",
                "count",
                "--merge",
                "ordered",
                "--workers",
                "2",
                "--output",
            ])
            .arg(out)
            .args(extra)
            .output()
            .expect("braid run");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stderr).to_string()
    };
    run(&dir.0.join("one.csv"), &[]);
    let want = std::fs::read(dir.0.join("one.csv")).expect("output");
    let said = run(&dir.0.join("local.csv"), &["--launch", "3"]);
    assert!(said.contains("launching 3 processes"), "{said}");
    assert_eq!(
        std::fs::read(dir.0.join("local.csv")).expect("output"),
        want
    );
    // The stand-in for ssh: drops the host, runs the command line.
    let ssh = dir.0.join("fake-ssh");
    std::fs::write(
        &ssh,
        "#!/bin/sh\necho \"$1\" >> \"$(dirname \"$0\")/hosts-seen\"\nshift\nexec sh -c \"$1\"\n",
    )
    .expect("fake ssh");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&ssh, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let hosts = dir.0.join("hosts");
    std::fs::write(
        &hosts,
        format!("127.0.0.1:{}\nlocalhost:{}\n", free_port(), free_port()),
    )
    .expect("hosts");
    let ssh_cmd = ssh.display().to_string();
    let hosts_arg = hosts.display().to_string();
    run(
        &dir.0.join("remote.csv"),
        &["--launch-with", &ssh_cmd, "--hosts", &hosts_arg],
    );
    assert_eq!(
        std::fs::read(dir.0.join("remote.csv")).expect("output"),
        want
    );
    let seen = std::fs::read_to_string(dir.0.join("hosts-seen")).expect("hosts seen");
    let mut seen: Vec<&str> = seen.lines().collect();
    seen.sort();
    assert_eq!(seen, ["127.0.0.1", "localhost"]);
}

/// `braid run` of a count over 20 M generated rows on 2 workers, long enough to be
/// killed after a checkpoint, writing to `out`: its arguments, and the output and time
/// of its uninterrupted run.
fn long_count(out: &Path) -> (Vec<String>, Vec<u8>, Duration) {
    let args: Vec<String> = [
        "run",
        "--tuples",
        "20000000",
        "--keys",
        "1000",
        "--parts",
        "8",
        "--rate",
        "20000",
        "--function",
        "count",
        "--merge",
        "ordered",
        "--workers",
        "2",
        "--output",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([out.display().to_string()])
    .collect();
    let t = Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(&args)
        .output()
        .expect("braid run");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let took = t.elapsed();
    (args, std::fs::read(out).expect("output"), took)
}

/// Network namespaces on one bridge: "hosts" with their own addresses, each joined
/// to the bridge (in the test's own namespace) by a veth pair; made by the test and
/// removed on drop.
struct Hosts {
    names: Vec<String>,
    addrs: Vec<String>,
    bridge: String,
}

impl Hosts {
    fn new(n: usize) -> Result<Hosts, String> {
        // Tests of one process make hosts at once: each set has names of its own.
        static SETS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let set = SETS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 10;
        let id = std::process::id() % 100_000;
        let net = format!("10.213.{}", id % 250);
        let hosts = Hosts {
            names: (0..n).map(|i| format!("braid{id}s{set}h{i}")).collect(),
            addrs: (0..n).map(|i| format!("{net}.{}", i + 1)).collect(),
            bridge: format!("br{id}s{set}"),
        };
        let ip = |args: &[&str]| -> Result<(), String> {
            let o = Command::new("ip")
                .args(args)
                .output()
                .map_err(|e| format!("ip: {e}"))?;
            match o.status.success() {
                true => Ok(()),
                false => Err(format!(
                    "ip {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&o.stderr)
                )),
            }
        };
        let br = hosts.bridge.clone();
        ip(&["link", "add", &br, "type", "bridge"])?;
        ip(&["link", "set", &br, "up"])?;
        for i in 0..n {
            let (ns, addr) = (hosts.names[i].clone(), hosts.addrs[i].clone());
            let (inner, outer) = (format!("v{id}s{set}i{i}"), format!("v{id}s{set}o{i}"));
            ip(&["netns", "add", &ns])?;
            ip(&[
                "link", "add", &inner, "type", "veth", "peer", "name", &outer,
            ])?;
            ip(&["link", "set", &inner, "netns", &ns])?;
            ip(&["link", "set", &outer, "master", &br])?;
            ip(&["link", "set", &outer, "up"])?;
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                &inner,
            ])?;
            ip(&["-n", &ns, "link", "set", &inner, "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        Ok(hosts)
    }

    /// Whether this test may make namespaces (root, with `ip`); says why not if not.
    fn possible(test: &str) -> bool {
        let root = Command::new("id")
            .arg("-u")
            .output()
            .map(|o| o.stdout.starts_with(b"0\n"));
        if !root.unwrap_or(false) {
            eprintln!("{test}: not root, network namespaces cannot be made: skipped");
            return false;
        }
        true
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = Command::new("ip").args(["netns", "del", n]).output();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge])
            .output();
    }
}

/// A cluster of two processes on two hosts (network namespaces): one killed with
/// SIGKILL, the other stops naming it; both started again with --recover; the output
/// equals one process's uninterrupted output. Killed twice (each process once).
#[test]
fn hosts_in_network_namespaces_survive_a_killed_process() {
    if !Hosts::possible("hosts_in_network_namespaces") {
        return;
    }
    let net = Hosts::new(2).expect("network namespaces (as root)");
    let dir = Scratch::new("netns");
    let braid = env!("CARGO_BIN_EXE_braid");
    let out = dir.0.join("out.csv");
    let (args, want, took) = long_count(&out);
    let hosts = dir.0.join("hosts");
    std::fs::write(
        &hosts,
        format!(
            "{}:{}\n{}:{}\n",
            net.addrs[0],
            free_port(),
            net.addrs[1],
            free_port()
        ),
    )
    .expect("hosts");
    let ck = dir.0.join("ck");
    let start = |first: bool| -> Kids {
        let kids = (0..2)
            .map(|p| {
                Command::new("ip")
                    .args(["netns", "exec", &net.names[p], braid])
                    .args(&args)
                    .args([
                        "--processes",
                        "2",
                        "--process-index",
                        &p.to_string(),
                        "--hosts",
                    ])
                    .arg(&hosts)
                    .arg(if first { "--checkpoint" } else { "--recover" })
                    .arg(&ck)
                    .args(["--checkpoint-interval", "30ms", "--connect-timeout", "5s"])
                    .stdout(Stdio::null())
                    .stderr(std::fs::File::create(dir.0.join(format!("err-{p}"))).expect("err"))
                    .spawn()
                    .expect("ip netns exec braid")
            })
            .collect();
        Kids(kids)
    };
    let _ = std::fs::remove_file(&out);
    for (round, victim) in [(0, 1usize), (1, 0)] {
        let seen = last_checkpoint(&ck);
        let mut kids = start(round == 0);
        // Killed once it has committed a checkpoint of its own, before it ends.
        let deadline = Instant::now() + took * 3 + Duration::from_secs(10);
        while last_checkpoint(&ck) <= seen {
            assert!(Instant::now() < deadline, "no checkpoint committed");
            std::thread::sleep(Duration::from_millis(2));
        }
        if kids
            .iter_mut()
            .any(|k| k.try_wait().expect("wait").is_some())
        {
            panic!("the run ended before the kill: give it more input");
        }
        kids[victim].kill().expect("kill -9");
        kids[victim].wait().expect("reap");
        assert!(
            others_stop(&mut kids, victim, &net.addrs[victim], &dir.0),
            "process {} did not name the killed process {victim}",
            1 - victim
        );
    }
    let mut kids = start(false);
    assert!(wait_all(
        &mut kids,
        Instant::now() + Duration::from_secs(300),
        &dir.0
    ));
    assert!(
        std::fs::read(&out).expect("output") == want,
        "the recovered output differs"
    );
}

/// Three processes on three hosts (network namespaces on a bridge), each reading its
/// share of a CSV file (chunks of 64 KB dealt in turn): a windowed SQL query with
/// checkpoints, one process killed with SIGKILL once a checkpoint has committed (each
/// in turn), the other two stopping on their own within seconds, naming a lost peer;
/// all three started again with --recover. The output equals one process's
/// uninterrupted run, byte for byte.
#[test]
fn three_hosts_read_their_shares_and_survive_kills() {
    if !Hosts::possible("three_hosts") {
        return;
    }
    let net = Hosts::new(3).expect("network namespaces (as root)");
    let dir = Scratch::new("netns3");
    write_calls_and_texts(&dir.0, 600_000);
    let job = sql_job(&dir.0, "windowed SQL on three hosts", WINDOWED);
    let (want, took) = reference(&job, &dir.0);
    assert!(int_rows(&want).len() > 1000, "too little output");
    let hosts = dir.0.join("hosts3");
    let lines: Vec<String> = net
        .addrs
        .iter()
        .map(|a| format!("{a}:{}", free_port()))
        .collect();
    std::fs::write(&hosts, lines.join("\n") + "\n").expect("hosts");
    let ck = dir.0.join("ck");
    let start = |first: bool| -> Kids {
        let kids = (0..3)
            .map(|p| {
                Command::new("ip")
                    .args([
                        "netns",
                        "exec",
                        &net.names[p],
                        env!("CARGO_BIN_EXE_braid"),
                        "run",
                    ])
                    .args(&job.args)
                    .args(["--workers", "1", "--processes", "3", "--process-index"])
                    .arg(p.to_string())
                    .arg("--hosts")
                    .arg(&hosts)
                    .arg(if first { "--checkpoint" } else { "--recover" })
                    .arg(&ck)
                    .args(["--checkpoint-interval", "30ms", "--connect-timeout", "5s"])
                    .args(["--chunk-bytes", "65536"])
                    .stdout(Stdio::null())
                    .stderr(std::fs::File::create(dir.0.join(format!("err-{p}"))).expect("err"))
                    .spawn()
                    .expect("ip netns exec braid")
            })
            .collect();
        Kids(kids)
    };
    let _ = std::fs::remove_file(&job.output);
    let mut killed = 0;
    for (round, victim) in [2usize, 0, 1].into_iter().enumerate() {
        let seen = last_checkpoint(&ck.join("query-0"));
        let mut kids = start(round == 0);
        let deadline = Instant::now() + took * 5 + Duration::from_secs(20);
        while last_checkpoint(&ck.join("query-0")) <= seen {
            if kids
                .iter_mut()
                .any(|k| k.try_wait().expect("wait").is_some())
            {
                break;
            }
            assert!(Instant::now() < deadline, "no checkpoint committed");
            std::thread::sleep(Duration::from_millis(2));
        }
        if kids
            .iter_mut()
            .any(|k| k.try_wait().expect("wait").is_some())
        {
            // It ended (or failed) before the kill: the last start checks the output.
            drop(kids);
            break;
        }
        kids[victim].kill().expect("kill -9");
        kids[victim].wait().expect("reap");
        killed += 1;
        assert!(
            others_stop(&mut kids, victim, &net.addrs[victim], &dir.0),
            "no process named the killed process {victim}"
        );
    }
    let mut kids = start(killed == 0);
    assert!(wait_all(
        &mut kids,
        Instant::now() + Duration::from_secs(300),
        &dir.0
    ));
    let got = std::fs::read(&job.output).expect("output");
    assert!(
        canonical(&job, got.clone()) == canonical(&job, want.clone()),
        "after {killed} kills the output ({} bytes) differs from the uninterrupted run's ({} bytes)",
        got.len(),
        want.len()
    );
    assert!(killed >= 2, "only {killed} kills: give it more input");
    eprintln!("three hosts: {killed} kills");
}

/// After process `victim` (at `addr`) was killed: every other process of `kids` stops
/// within 10 s with status 3, saying it lost a process (its standard error in
/// `dir/err-<p>`). Whether one of them named the victim and its address (another may
/// have lost a peer that stopped first).
fn others_stop(kids: &mut Kids, victim: usize, addr: &str, dir: &Path) -> bool {
    let mut named = false;
    for other in (0..kids.len()).filter(|&o| o != victim) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(s) = kids[other].try_wait().expect("wait") {
                break s;
            }
            assert!(
                Instant::now() < deadline,
                "process {other} still runs 10 s after {victim} was killed"
            );
            std::thread::sleep(Duration::from_millis(5));
        };
        let err = std::fs::read_to_string(dir.join(format!("err-{other}"))).unwrap_or_default();
        assert_eq!(status.code(), Some(3), "process {other}: {err}");
        assert!(err.contains("lost process"), "process {other}: {err}");
        named |= err.contains(&format!("lost process {victim} at {addr}"));
    }
    named
}

/// The epoch of the last checkpoint committed in `ck`.
fn last_checkpoint(ck: &Path) -> Option<u64> {
    std::fs::read_to_string(ck.join("LATEST"))
        .ok()
        .and_then(|t| t.trim().parse().ok())
}

/// `--launch 2 --restarts 2` with checkpoints: a process killed with SIGKILL makes the
/// launcher start both again from the last checkpoint, and the output is the
/// uninterrupted run's.
#[test]
fn launcher_restarts_from_the_last_checkpoint() {
    let dir = Scratch::new("restart");
    let braid = env!("CARGO_BIN_EXE_braid");
    let out = dir.0.join("out.csv");
    let (args, want, _) = long_count(&out);
    let _ = std::fs::remove_file(&out);
    let ck = dir.0.join("ck");
    let err = dir.0.join("err");
    let mut launcher = Kids(vec![Command::new(braid)
        .args(&args)
        .args([
            "--launch",
            "2",
            "--restarts",
            "2",
            "--checkpoint-interval",
            "30ms",
            "--checkpoint",
        ])
        .arg(&ck)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).expect("err"))
        .spawn()
        .expect("braid run --launch")]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while last_checkpoint(&ck).is_none() {
        assert!(Instant::now() < deadline, "no checkpoint committed");
        std::thread::sleep(Duration::from_millis(2));
    }
    // One of the launcher's processes, killed.
    let pid = launcher[0].id();
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .expect("the launcher's children");
    let victim = children.split_whitespace().last().expect("a child process");
    let k = Command::new("kill")
        .args(["-9", victim])
        .status()
        .expect("kill");
    assert!(k.success());
    assert!(
        wait_all(
            &mut launcher,
            Instant::now() + Duration::from_secs(120),
            &dir.0
        ) || {
            panic!(
                "the launcher did not finish: {}",
                std::fs::read_to_string(&err).unwrap_or_default()
            )
        }
    );
    let said = std::fs::read_to_string(&err).expect("err");
    assert!(
        said.contains("starting all 2 again from the last checkpoint (restart 1 of 2)"),
        "{said}"
    );
    assert!(
        said.contains("resumed from the checkpoint after epoch"),
        "{said}"
    );
    assert!(
        std::fs::read(&out).expect("output") == want,
        "the restarted output differs: {said}"
    );
}

/// One HTTP/1.1 request to `addr`: the status and the body.
fn http(addr: &str, method: &str, path: &str) -> std::io::Result<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|b| b.1).unwrap_or("");
    Ok((status, body.to_string()))
}

/// Live rescaling over the dashboard's HTTP endpoint: a two-stage join query running
/// on 2 processes x 2 workers goes to 3 worker threads per process (the processes
/// connect again), from 8 to 16 partitions per stage, to 3, and back to 2 threads, by
/// `POST /api/rescale` to process 0, without a restart; its output is byte for byte the
/// output of a run never rescaled. A request that cannot be had gets 400, naming why.
#[test]
fn live_rescale_over_http_on_a_cluster() {
    let dir = Scratch::new("live-rescale");
    write_calls_and_texts(&dir.0, 2_500_000);
    let job = sql_job(&dir.0, "two-stage join, rescaled live", TWO_STAGE_JOIN);
    let (want, _) = reference(&job, &dir.0);
    assert!(int_rows(&want).len() > 100, "too few rows to test anything");
    std::fs::remove_file(&job.output).expect("output removed");

    // A cluster's state moves through the checkpoint directory.
    let extra = [
        "--dashboard".to_string(),
        "127.0.0.1:0".to_string(),
        "--checkpoint".to_string(),
        dir.0.join("ck").display().to_string(),
    ];
    let mut kids = start(&job, 2, 2, &extra, &dir.0);
    // Each process says where its dashboard is.
    let dashboard = |p: usize| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let err = std::fs::read_to_string(dir.0.join(format!("err-{p}"))).unwrap_or_default();
            // The address counts only with the '/' after it: the file may be read
            // while the line is half written.
            if let Some((a, _)) = err
                .split("dashboard of this run at http://")
                .nth(1)
                .and_then(|r| r.split_once('/'))
            {
                break a.to_string();
            }
            assert!(Instant::now() < deadline, "no dashboard address: {err}");
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    let addr = dashboard(0);
    let (status, body) = http(&addr, "POST", "/api/rescale?partitions=x").expect("http");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("partitions = `x`"), "{body}");
    // Process 1 takes no request: it says to ask process 0.
    let (status, body) = http(&dashboard(1), "POST", "/api/rescale?partitions=5").expect("http");
    assert_eq!(status, 202, "{body}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, body) = http(&dashboard(1), "GET", "/api/rescale").expect("http");
        if body.contains("this is process 1 of a cluster: ask process 0") {
            break;
        }
        assert!(Instant::now() < deadline, "not refused: {body}");
        std::thread::sleep(Duration::from_millis(2));
    }
    // Every process to 3 worker threads (they end and connect again), then the
    // partitions, then back to 2 threads.
    let steps = [
        ("workers=3", "\"partitions\":[8,8],\"workers\":6"),
        ("partitions=16", "\"partitions\":[16,16],\"workers\":6"),
        ("partitions=3", "\"partitions\":[3,3],\"workers\":6"),
        ("workers=2", "\"partitions\":[3,3],\"workers\":4"),
    ];
    for (k, (ask, then)) in steps.into_iter().enumerate() {
        let (status, body) = http(&addr, "POST", &format!("/api/rescale?{ask}")).expect("http");
        assert_eq!(status, 202, "{body}");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (_, body) = http(&addr, "GET", "/api/rescale").expect("http");
            assert!(!body.contains("input ended"), "asked too late: {body}");
            assert!(!body.contains("\"refused\":[\""), "{ask} refused: {body}");
            if body.matches("\"epoch\"").count() > k {
                assert!(body.contains(then), "{ask}: {body}");
                break;
            }
            assert!(Instant::now() < deadline, "not rescaled: {body}");
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    assert!(
        wait_all(&mut kids, Instant::now() + Duration::from_secs(300), &dir.0),
        "the run did not end"
    );
    let err = std::fs::read_to_string(dir.0.join("err-0")).unwrap_or_default();
    assert_eq!(err.matches("rescaled live after epoch").count(), 4, "{err}");
    let got = std::fs::read(&job.output).expect("output");
    assert!(
        got == want,
        "{}: {} bytes, the run never rescaled {}\n{err}",
        job.name,
        got.len(),
        want.len()
    );
}

/// Automatic rescaling of a cluster: 2 processes of one worker each, every row routed
/// to partitions 1 and 3 of 4, both on process 1's worker. Process 0 runs none of
/// them, so only the costs process 1 sends it show the load: its rescaler moves one of
/// the two to process 0's worker, and the output holds the serial run's rows (a union
/// merge: in any order).
#[test]
fn a_cluster_moves_a_hot_partition_on_its_own() {
    let dir = Scratch::new("auto-rescale-cluster");
    let mut calls = String::from("caller,callee,start,dur\n");
    for i in 0..1_500_000u64 {
        // Callers 1 and 3 mod 4: partitions 1 and 3 (route => caller).
        let caller = 1 + 2 * (i % 2) + 4 * (i % 50);
        calls += &format!("{caller},{},{},{}\n", i % 13, i / 40, i % 1000);
    }
    std::fs::write(dir.0.join("calls.csv"), calls).expect("calls");
    let d = dir.0.display();
    // Replayed at 10x its event time (ms): about 3.7 s, 400 k rows/s.
    let script = format!(
        "CREATE STREAM calls (caller BIGINT NOT NULL, callee BIGINT, start BIGINT NOT NULL, dur BIGINT)
  WITH (path = '{d}/calls.csv', event_time = 'start', epoch = 100, time_unit = 'ms', speed = 10);
CREATE SINK out WITH (sink = 'csv', path = '{d}/out.csv');
INSERT INTO out SELECT * FROM PARALLEL(calls, partitions => 4, route => caller,
  apply => (SELECT window_end, caller, count(*) AS n, sum(dur) AS total
            FROM calls GROUP BY TUMBLE(start, 1000), caller));"
    );
    std::fs::write(dir.0.join("q.sql"), script).expect("script");
    let job = Job {
        name: "hot partitions on process 1",
        args: vec![dir.0.join("q.sql").display().to_string()],
        output: dir.0.join("out.csv"),
        ordered: false,
    };
    let (want, _) = reference(&job, &dir.0);
    assert!(
        int_rows(&want).len() > 1000,
        "too few rows to test anything"
    );
    std::fs::remove_file(&job.output).expect("output removed");
    let extra = [
        "--auto-rescale".to_string(),
        "0.02".to_string(),
        "--checkpoint".to_string(),
        dir.0.join("ck").display().to_string(),
    ];
    let mut kids = start(&job, 1, 2, &extra, &dir.0);
    assert!(
        wait_all(&mut kids, Instant::now() + Duration::from_secs(300), &dir.0),
        "the run did not end"
    );
    let err = std::fs::read_to_string(dir.0.join("err-0")).unwrap_or_default();
    let first = err
        .lines()
        .find(|l| l.contains("rescaled live after epoch"))
        .unwrap_or_else(|| panic!("process 0 rescaled nothing:\n{err}"));
    assert!(
        first.contains("(partition 1 of stage 1 to worker 0)")
            || first.contains("(partition 3 of stage 1 to worker 0)"),
        "{err}"
    );
    // A union merge: the rows of the serial run, in any order.
    let got = canonical(&job, std::fs::read(&job.output).expect("output"));
    assert!(
        got == canonical(&job, want),
        "{} bytes, the serial run's other rows\n{err}",
        got.len()
    );
}

/// `braid run script --workers w` with `extra` flags: whether it succeeded, and its
/// standard error.
pub(crate) fn run_script(script: &Path, workers: usize, extra: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_braid"))
        .arg("run")
        .arg(script)
        .args(["--workers", &workers.to_string()])
        .args(extra)
        .output()
        .expect("running braid");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `script` on 2 workers with checkpoints into `ck` every `interval`, killing it
/// with SIGKILL a third, a half and two thirds of `took` (an uninterrupted run's time)
/// into its first three runs and resuming with `--recover` after each kill, then lets
/// the last run finish (it must succeed). The kills made.
pub(crate) fn kill_and_recover(script: &Path, ck: &Path, took: Duration, interval: &str) -> usize {
    let mut kills = 0;
    for run in 0..4u32 {
        let mut c = Command::new(env!("CARGO_BIN_EXE_braid"));
        c.arg("run")
            .arg(script)
            .args(["--workers", "2", "--checkpoint-interval", interval]);
        c.arg(if run == 0 {
            "--checkpoint"
        } else {
            "--recover"
        })
        .arg(ck);
        let mut child = c
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("braid");
        std::thread::sleep(took * (run + 2) / 6);
        if run < 3 && child.try_wait().expect("wait").is_none() {
            child.kill().expect("kill -9");
            child.wait().expect("reap");
            kills += 1;
            continue;
        }
        assert!(child.wait().expect("wait").success());
        break;
    }
    kills
}
