//! `braid run --launch N` and `--launch-with CMD`: one command starts every process of
//! a cluster run. Locally, N copies of this `braid` on loopback ports it picks (the
//! hosts file it wrote is printed); over the hosts of a `--hosts` file, each process is
//! started by the command the user names (e.g. `ssh`), given the host and the `braid`
//! command line. Every process gets the same arguments and its own `--process-index`.
//! The launcher waits for all of them and fails when any fails.

use crate::args::QueryArgs;
use crate::{Failed, Usage};
use anyhow::{Context, Result};
use std::process::{Child, Command};

/// Flags the launcher sets itself (with their value), taken out of the command line.
const OWN: &[&str] = &[
    "--launch",
    "--launch-with",
    "--restarts",
    "--processes",
    "--process-index",
    "--hosts",
];

/// The `braid` arguments after the program name, without the launcher's own flags.
fn passed_on() -> Vec<String> {
    let mut out = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if OWN.contains(&a.as_str()) {
            args.next();
            continue;
        }
        if OWN.iter().any(|f| a.starts_with(&format!("{f}="))) {
            continue;
        }
        out.push(a);
    }
    out
}

/// Quotes `s` for `sh`.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Starts every process of the run and waits for them.
pub fn launch(q: &QueryArgs) -> Result<()> {
    let me = std::env::current_exe().context("finding the braid executable")?;
    let args = passed_on();
    let (hosts_file, hosts) = match (&q.launch_with, q.launch, &q.hosts) {
        (Some(_), _, Some(file)) => (file.clone(), crate::args::read_hosts(file)?),
        (Some(_), _, None) => {
            return Err(Usage(
                "--launch-with starts a process on every host of a --hosts file: give --hosts"
                    .into(),
            )
            .into())
        }
        (None, Some(n), _) => {
            let hosts: Vec<String> = free_ports(n)?
                .into_iter()
                .map(|p| format!("127.0.0.1:{p}"))
                .collect();
            let file = std::env::temp_dir().join(format!("braid-hosts-{}", std::process::id()));
            std::fs::write(&file, hosts.join("\n") + "\n")
                .with_context(|| format!("writing {}", file.display()))?;
            eprintln!(
                "braid: launching {n} processes on this machine; hosts file {}:",
                file.display()
            );
            for h in &hosts {
                eprintln!("braid:   {h}");
            }
            (file, hosts)
        }
        (None, None, _) => return Ok(()),
    };
    let n = hosts.len();
    let restarts = match (q.restarts, &q.checkpoint, &q.recover) {
        (0, _, _) => 0,
        (r, Some(_), _) | (r, None, Some(_)) => r,
        (_, None, None) => {
            return Err(Usage(
                "--restarts resumes from checkpoints: give --checkpoint DIR or --recover DIR"
                    .into(),
            )
            .into())
        }
    };
    let mut args = args;
    for attempt in 0..=restarts {
        let mut kids = Vec::new();
        for (i, host) in hosts.iter().enumerate() {
            let mut own = args.clone();
            own.extend([
                "--processes".into(),
                n.to_string(),
                "--process-index".into(),
                i.to_string(),
                "--hosts".into(),
                hosts_file.display().to_string(),
            ]);
            let child = match &q.launch_with {
                None => Command::new(&me).args(&own).spawn(),
                Some(cmd) => {
                    let line: Vec<String> = std::iter::once(me.display().to_string())
                        .chain(own)
                        .map(|a| quote(&a))
                        .collect();
                    let name = host.rsplit_once(':').map_or(host.as_str(), |(h, _)| h);
                    let shell = format!("{cmd} {} {}", quote(name), quote(&line.join(" ")));
                    Command::new("sh").args(["-c", &shell]).spawn()
                }
            }
            .with_context(|| format!("starting process {i} ({host})"))?;
            kids.push(child);
        }
        let failed = supervise(&mut kids, &hosts)?;
        let Some(first) = failed else {
            return Ok(());
        };
        if attempt == restarts {
            break;
        }
        eprintln!(
            "braid: process {first} ({}) failed; starting all {n} again from the last checkpoint (restart {} of {restarts})",
            hosts[first],
            attempt + 1
        );
        // From now on every start resumes.
        args = resume(args);
    }
    Err(Failed.into())
}

/// Waits for the processes; when one fails, gives the others 10 s to stop (they stop
/// on their own when they lose it) and kills what is left. The first that failed, if
/// any.
fn supervise(kids: &mut [Child], hosts: &[String]) -> Result<Option<usize>> {
    let mut done = vec![false; kids.len()];
    let mut failed = None;
    let mut since: Option<std::time::Instant> = None;
    while done.iter().any(|d| !d) {
        for (i, k) in kids.iter_mut().enumerate() {
            if done[i] {
                continue;
            }
            if let Some(status) = k
                .try_wait()
                .with_context(|| format!("waiting for process {i}"))?
            {
                done[i] = true;
                if !status.success() {
                    eprintln!("braid: process {i} ({}) ended with {status}", hosts[i]);
                    failed.get_or_insert(i);
                    since.get_or_insert_with(std::time::Instant::now);
                }
            }
        }
        if since.is_some_and(|t| t.elapsed() > std::time::Duration::from_secs(10)) {
            for (i, k) in kids.iter_mut().enumerate() {
                if !done[i] {
                    let _ = k.kill();
                    let _ = k.wait();
                    done[i] = true;
                }
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Ok(failed)
}

/// The arguments with `--checkpoint DIR` turned into `--recover DIR`.
fn resume(args: Vec<String>) -> Vec<String> {
    args.into_iter()
        .map(|a| match a.as_str() {
            "--checkpoint" => "--recover".to_string(),
            _ => match a.strip_prefix("--checkpoint=") {
                Some(dir) => format!("--recover={dir}"),
                None => a,
            },
        })
        .collect()
}

/// `n` free ports of 127.0.0.1, all different: each stays bound until all are found.
fn free_ports(n: usize) -> Result<Vec<u16>> {
    let listeners = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()
        .context("finding a free port")?;
    listeners
        .iter()
        .map(|l| Ok(l.local_addr().context("finding a free port")?.port()))
        .collect()
}
