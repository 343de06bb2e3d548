//! Checkpoints on S3-compatible object storage, against a real server that each test
//! starts: s3proxy (https://github.com/gaul/s3proxy) over its filesystem backend, a
//! Java child process killed when the test ends, passed or not. The jar is found through
//! `BRAID_S3PROXY_JAR`, else at `target/s3proxy/s3proxy.jar` (`.ci/run` fetches it from
//! Maven Central with mvn); without it these tests fail, saying how to get it.
//!
//! - the backend's contract (put, get, list, delete, a missing key, LATEST and the
//!   manifest, errors that name the URL);
//! - `braid run --checkpoint s3://...` of a windowed SQL query killed with SIGKILL at
//!   random moments and resumed with `--recover s3://...`, on 2 workers and on 2
//!   processes: the output equals the uninterrupted run's, and the bucket holds
//!   `LATEST` and the last checkpoint's `MANIFEST`, older checkpoints deleted.

use crate::free_port;
use crate::recovery::{
    canonical, int_rows, reference, sql_job, start_with_env, wait_all, write_calls_and_texts, Rng,
    Scratch, WINDOWED,
};
use braid_exec::checkpoint::{latest_in, CheckpointBackend, LocalDir, Manifest};
use braid_objstore::S3Backend;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) const BUCKET: &str = "braid";
const IDENTITY: &str = "braid-test";
const SECRET: &str = "braid-test-secret";

/// The s3proxy jar: `BRAID_S3PROXY_JAR`, else `target/s3proxy/s3proxy.jar`.
fn jar() -> PathBuf {
    let jar = match std::env::var_os("BRAID_S3PROXY_JAR") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/s3proxy/s3proxy.jar"),
    };
    assert!(
        jar.is_file(),
        "the s3proxy jar is not at {} (the S3 tests run against a real S3-compatible server): \
         get it as .ci/run does, with `mvn dependency:copy \
         -Dartifact=org.gaul:s3proxy:4.1.0:jar:jar-with-dependencies -DoutputDirectory=target/s3proxy` \
         and rename it to target/s3proxy/s3proxy.jar, or point BRAID_S3PROXY_JAR at it; it runs \
         on Java 17 (`java` on the PATH)",
        jar.display()
    );
    jar
}

/// A running s3proxy with an empty bucket [`BUCKET`], killed on drop.
pub(crate) struct S3Proxy {
    child: Child,
    endpoint: String,
    data: Scratch,
}

impl S3Proxy {
    pub(crate) fn start(name: &str) -> S3Proxy {
        let jar = jar();
        let data = Scratch::new(&format!("s3proxy-{name}"));
        let base = data.0.join("buckets");
        // The filesystem backend's buckets are directories.
        std::fs::create_dir_all(base.join(BUCKET)).expect("bucket directory");
        let port = free_port();
        let endpoint = format!("http://127.0.0.1:{port}");
        let conf = data.0.join("s3proxy.conf");
        std::fs::write(
            &conf,
            format!(
                "s3proxy.endpoint={endpoint}\n\
                 s3proxy.authorization=aws-v2-or-v4\n\
                 s3proxy.identity={IDENTITY}\n\
                 s3proxy.credential={SECRET}\n\
                 jclouds.provider=filesystem\n\
                 jclouds.filesystem.basedir={}\n",
                base.display()
            ),
        )
        .expect("s3proxy configuration");
        let log = data.0.join("s3proxy.log");
        let child = Command::new("java")
            .arg("-jar")
            .arg(&jar)
            .arg("--properties")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).expect("log"))
            .stderr(std::fs::File::create(data.0.join("s3proxy.err")).expect("log"))
            .spawn()
            .unwrap_or_else(|e| panic!("starting `java -jar {}`: {e}", jar.display()));
        let mut proxy = S3Proxy {
            child,
            endpoint,
            data,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = proxy.child.try_wait().expect("wait") {
                panic!(
                    "s3proxy stopped ({status}): {}{}",
                    std::fs::read_to_string(&log).unwrap_or_default(),
                    std::fs::read_to_string(proxy.data.0.join("s3proxy.err")).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < deadline,
                "s3proxy did not listen within 60 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        proxy
    }

    /// The AWS environment of a `braid` that checkpoints here.
    pub(crate) fn env(&self) -> Vec<(String, String)> {
        [
            ("AWS_ACCESS_KEY_ID", IDENTITY),
            ("AWS_SECRET_ACCESS_KEY", SECRET),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ENDPOINT_URL", &self.endpoint),
            ("AWS_ALLOW_HTTP", "true"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    /// The store at `url`, configured like [`S3Proxy::env`] (without the environment).
    pub(crate) fn backend(&self, url: &str) -> S3Backend {
        let options: Vec<(String, String)> = self
            .env()
            .into_iter()
            .map(|(k, v)| (k.to_lowercase(), v))
            .collect();
        let options: Vec<(&str, &str)> = options
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        S3Backend::with_options(url, &options).expect("an S3 backend")
    }
}

impl Drop for S3Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// put, get, list, delete and the commit records, against the server; the same
/// contract holds for a local directory.
#[test]
fn s3_backend_contract() {
    let proxy = S3Proxy::start("contract");
    let url = format!("s3://{BUCKET}/runs/contract");
    let b = proxy.backend(&url);
    let sibling = proxy.backend(&format!("s3://{BUCKET}/runs/contract-2"));
    let (put, get) = contract(&b, &sibling, &url);
    eprintln!("s3 contract: one PUT {put:?}, one GET {get:?}");
    let local = Scratch::new("local-contract");
    let dir = local.0.join("runs/contract");
    let (put, get) = contract(
        &LocalDir::new(&dir),
        &LocalDir::new(local.0.join("runs/contract-2")),
        &dir.display().to_string(),
    );
    eprintln!("local contract: one PUT {put:?}, one GET {get:?}");

    // Errors name the URL and what failed.
    let e = S3Backend::from_env("s3:///x")
        .expect_err("no bucket")
        .to_string();
    assert!(e.contains("s3:///x") && e.contains("no bucket"), "{e}");
    let e = S3Backend::from_env("s3://b/a//c")
        .expect_err("an empty segment")
        .to_string();
    assert!(e.contains("s3://b/a//c"), "{e}");
    let nobucket = proxy.backend("s3://no-such-bucket/p");
    let e = nobucket.prepare().expect_err("no bucket").to_string();
    assert!(e.contains("listing s3://no-such-bucket/p"), "{e}");
    let e = nobucket.put("k", b"v").expect_err("no bucket").to_string();
    assert!(e.contains("writing s3://no-such-bucket/p/k"), "{e}");
    let wrong = S3Backend::with_options(
        &url,
        &[
            ("aws_access_key_id", IDENTITY),
            ("aws_secret_access_key", "wrong"),
            ("aws_endpoint", &proxy.endpoint),
            ("aws_allow_http", "true"),
        ],
    )
    .expect("backend");
    let e = wrong
        .get("chk-02/sink-0.json")
        .expect_err("refused")
        .to_string();
    assert!(
        e.contains(&format!("reading {url}/chk-02/sink-0.json")),
        "{e}"
    );
}

/// The contract of a backend `b` at `url` (empty), beside `sibling`: the times of
/// one PUT and one GET.
fn contract(
    b: &dyn CheckpointBackend,
    sibling: &dyn CheckpointBackend,
    url: &str,
) -> (Duration, Duration) {
    b.prepare().expect("the bucket is reachable");
    assert_eq!(b.location(), url);
    assert_eq!(
        b.get("missing").expect("get"),
        None,
        "a missing key is None"
    );
    assert_eq!(b.list("").expect("list"), Vec::<String>::new());

    // put and get, and a put replaces (timed after the first of each).
    b.put("chk-01/map-0-0.bin", b"zero").expect("put");
    assert_eq!(
        b.get("chk-01/map-0-0.bin").expect("get").as_deref(),
        Some(&b"zero"[..])
    );
    let t = Instant::now();
    for _ in 0..10 {
        b.put("chk-01/map-0-0.bin", b"zero").expect("put");
    }
    let put = t.elapsed() / 10;
    let t = Instant::now();
    for _ in 0..10 {
        b.get("chk-01/map-0-0.bin").expect("get");
    }
    let get = t.elapsed() / 10;
    b.put("chk-01/map-0-0.bin", b"0").expect("put again");
    assert_eq!(
        b.get("chk-01/map-0-0.bin").expect("get").as_deref(),
        Some(&b"0"[..])
    );
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    b.put("chk-01/map-0-1.bin", &big).expect("put 3 MB");
    assert_eq!(
        b.get("chk-01/map-0-1.bin").expect("get").as_deref(),
        Some(&big[..])
    );
    b.put("chk-02/sink-0.json", b"{}").expect("put");
    b.put("chk-x", b"").expect("an empty object");
    assert_eq!(b.get("chk-x").expect("get").as_deref(), Some(&b""[..]));
    b.put("other/chk-03/MANIFEST", b"m").expect("put");

    // A prefix matches keys as strings, part of a segment too.
    let all = |p: &str| b.list(p).expect("list");
    assert_eq!(
        all("chk-"),
        [
            "chk-01/map-0-0.bin",
            "chk-01/map-0-1.bin",
            "chk-02/sink-0.json",
            "chk-x"
        ]
    );
    assert_eq!(all("chk-01/"), ["chk-01/map-0-0.bin", "chk-01/map-0-1.bin"]);
    assert_eq!(all("other/"), ["other/chk-03/MANIFEST"]);
    assert_eq!(all("").len(), 5);
    assert_eq!(all("nothing"), Vec::<String>::new());
    // Nothing outside the store's prefix is listed or deleted.
    sibling.put("chk-01/MANIFEST", b"not mine").expect("put");
    assert_eq!(all("").len(), 5);

    // delete_prefix deletes exactly the prefix's keys; delete one key; deleting what
    // is not there is no error.
    b.delete_prefix("chk-01/").expect("delete_prefix");
    assert_eq!(all("chk-"), ["chk-02/sink-0.json", "chk-x"]);
    b.delete("chk-x").expect("delete");
    b.delete("chk-x").expect("delete a missing key");
    b.delete_prefix("nothing/").expect("delete an empty prefix");
    assert_eq!(all("chk-"), ["chk-02/sink-0.json"]);
    assert_eq!(
        sibling.get("chk-01/MANIFEST").expect("get").as_deref(),
        Some(&b"not mine"[..])
    );

    // A child is the keys under `name/`.
    let q = b.child("query-0");
    assert_eq!(q.location(), format!("{url}/query-0"));
    q.put("DONE", b"").expect("put");
    assert_eq!(all("query-0/"), ["query-0/DONE"]);
    assert_eq!(q.list("").expect("list"), ["DONE"]);

    // LATEST names the committed checkpoint; its manifest is read back.
    assert_eq!(latest_in(&*q).expect("latest"), None);
    let manifest = Manifest {
        epoch: 42,
        plan: 0xfeed,
        partitions: vec![8, 4],
        workers: 2,
        bytes: 1234,
        millis: 5,
    };
    q.put("chk-00000000000000000042/map-0-0.bin", b"state")
        .expect("part");
    q.sync("chk-00000000000000000042/").expect("sync");
    q.replace(
        "chk-00000000000000000042/MANIFEST",
        &serde_json::to_vec_pretty(&manifest).expect("json"),
    )
    .expect("manifest");
    q.replace("LATEST", b"42\n").expect("LATEST");
    assert_eq!(latest_in(&*q).expect("latest"), Some(manifest));
    // LATEST without its manifest is an error naming the object, not "no checkpoint".
    q.replace("LATEST", b"43\n").expect("LATEST");
    let e = latest_in(&*q).expect_err("no manifest").to_string();
    assert!(
        e.contains(&format!("{url}/query-0/chk-00000000000000000043/MANIFEST")),
        "{e}"
    );
    q.replace("LATEST", b"forty\n").expect("LATEST");
    let e = latest_in(&*q).expect_err("not an epoch").to_string();
    assert!(e.contains(&format!("{url}/query-0/LATEST")), "{e}");
    (put, get)
}

/// The store of `url`'s script query 0, as `braid run` lays it out.
fn query0(proxy: &S3Proxy, url: &str) -> std::sync::Arc<dyn CheckpointBackend> {
    proxy.backend(url).child("query-0")
}

/// The checkpoint epochs (`chk-*`) in `store`, and the one `LATEST` names.
fn checkpoints(store: &dyn CheckpointBackend) -> (Vec<u64>, Option<u64>) {
    let keys = store.list("chk-").expect("list");
    let mut epochs: Vec<u64> = keys
        .iter()
        .filter_map(|k| k.split('/').next()?.strip_prefix("chk-")?.parse().ok())
        .collect();
    epochs.dedup();
    let latest = store
        .get("LATEST")
        .expect("get LATEST")
        .and_then(|t| String::from_utf8_lossy(&t).trim().parse().ok());
    (epochs, latest)
}

/// A windowed SQL query with `--checkpoint s3://...`, killed with SIGKILL at random
/// moments and resumed with `--recover s3://...` until it finishes, on 2 workers in 1
/// process and on 2 processes of 2 workers: the output is the uninterrupted run's, and
/// a finished run leaves LATEST and the last checkpoint with its manifest.
#[test]
fn s3_checkpoints_survive_kills() {
    let proxy = S3Proxy::start("kills");
    let dir = Scratch::new("s3-window");
    write_calls_and_texts(&dir.0, 600_000);
    let job = sql_job(&dir.0, "windowed SQL on S3", WINDOWED);
    // A bucket that is not there stops the run, naming it.
    let o = Command::new(env!("CARGO_BIN_EXE_braid"))
        .arg("run")
        .args(&job.args)
        .args(["--checkpoint", "s3://no-such-bucket/ck"])
        .env_clear()
        .envs(proxy.env())
        .output()
        .expect("braid run");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("listing s3://no-such-bucket/ck"), "{err}");
    let (want, took) = reference(&job, &dir.0);
    assert!(int_rows(&want).len() > 1000, "too little output");
    let want = canonical(&job, want);
    let env = proxy.env();
    let seed = 0x5eed_0053 ^ u64::from(std::process::id());
    let mut rng = Rng(seed);
    let kills = 5;
    let (mut total, mut resumed, mut during) = (0, 0, 0);
    for (workers, processes) in [(2, 1), (2, 2)] {
        let url = format!("s3://{BUCKET}/ck-{workers}x{processes}");
        let _ = std::fs::remove_file(&job.output);
        let mut killed = 0;
        let mut first = true;
        loop {
            let flag = if first { "--checkpoint" } else { "--recover" };
            let extra: Vec<String> = [flag, &url, "--checkpoint-interval", "30ms"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            let mut kids = start_with_env(&job, workers, processes, &extra, &dir.0, &env);
            let span = took + Duration::from_millis(300);
            let until = match killed < kills {
                true => Instant::now() + Duration::from_micros(rng.below(span.as_micros() as u64)),
                false => Instant::now() + Duration::from_secs(300),
            };
            if wait_all(&mut kids, until, &dir.0) {
                let got = canonical(&job, std::fs::read(&job.output).expect("output"));
                assert!(
                    got == want,
                    "{workers} worker(s) x {processes} process(es), seed {seed}, after {killed} kill(s): the output ({} bytes) differs from the uninterrupted run's ({} bytes)",
                    got.len(),
                    want.len()
                );
                if killed >= kills {
                    break;
                }
                // It finished before its kill: start over, in the same place (a fresh
                // start forgets that the query had finished).
                first = true;
                let _ = std::fs::remove_file(&job.output);
                continue;
            }
            let victim = rng.below(processes as u64) as usize;
            kids[victim].kill().expect("kill -9");
            kids[victim].wait().expect("reap");
            // The others stop on their own (fail-stop); the harness kills what is left.
            let deadline = Instant::now() + Duration::from_secs(10);
            for k in kids.iter_mut() {
                while k.try_wait().expect("wait").is_none() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            drop(kids);
            killed += 1;
            total += 1;
            first = false;
            let (epochs, latest) = checkpoints(&*query0(&proxy, &url));
            resumed += usize::from(latest.is_some());
            during += usize::from(epochs.iter().any(|&e| Some(e) > latest));
        }
        // What a finished run leaves in the bucket: LATEST, the checkpoint it names
        // with its manifest, no other checkpoint, and the query's DONE.
        let q = query0(&proxy, &url);
        let (epochs, latest) = checkpoints(&*q);
        let latest = latest.expect("LATEST in the bucket");
        assert_eq!(epochs, [latest], "older checkpoints are deleted");
        let keys = q.list("").expect("list");
        let manifest = format!("chk-{latest:020}/MANIFEST");
        assert!(keys.contains(&manifest), "no {manifest}: {keys:?}");
        assert!(
            keys.iter().any(|k| k.contains("/map-")),
            "no parts: {keys:?}"
        );
        assert!(keys.contains(&"DONE".to_string()), "{keys:?}");
        let m = latest_in(&*q).expect("manifest").expect("a checkpoint");
        assert_eq!(m.epoch, latest);
    }
    eprintln!(
        "s3 kills: {total} kills, {resumed} resumed from a checkpoint, {during} during a checkpoint (uninterrupted run {took:?})"
    );
    assert!(resumed > 0, "no kill came after a checkpoint");
}
