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
            let hosts: Vec<String> = (0..n)
                .map(|_| free_port().map(|p| format!("127.0.0.1:{p}")))
                .collect::<Result<_>>()?;
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
    let mut kids: Vec<(usize, Child)> = Vec::new();
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
        kids.push((i, child));
    }
    let mut failed = false;
    for (i, mut k) in kids {
        let status = k
            .wait()
            .with_context(|| format!("waiting for process {i}"))?;
        if !status.success() {
            eprintln!("braid: process {i} ({}) ended with {status}", hosts[i]);
            failed = true;
        }
    }
    match failed {
        true => Err(Failed.into()),
        false => Ok(()),
    }
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .context("finding a free port")?
        .port())
}
