//! The harness the server's test files share: a server on a loopback port of its own
//! with its data in a scratch directory, and `psql` connections to it.

use std::process::{Child, Command, Stdio};

/// A running server, stopped (and its data removed) when dropped.
pub struct Server {
    pub running: Option<braid_server::Running>,
    pub port: u16,
    /// The HTTP listener's address, when the configuration asked for one.
    #[allow(dead_code)] // only the dashboard's tests use it
    pub http: Option<std::net::SocketAddr>,
    pub dir: std::path::PathBuf,
}

impl Server {
    /// A server with `workers` workers and the default configuration.
    #[allow(dead_code)] // not every test file starts one without changes
    pub fn start(name: &str, workers: usize) -> Server {
        Server::with(name, workers, |_| {})
    }

    /// A server whose configuration `set` changes first.
    pub fn with(
        name: &str,
        workers: usize,
        set: impl FnOnce(&mut braid_server::ServerConfig),
    ) -> Server {
        let dir = std::env::temp_dir().join(format!("braid-server-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut config = braid_server::ServerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            workers,
            data: Some(dir.clone()),
            ..Default::default()
        };
        set(&mut config);
        let running =
            braid_server::start(&config, &braid_plan::function::Registry::with_builtins())
                .expect("the server starts");
        Server {
            port: running.addr.port(),
            http: running.http,
            running: Some(running),
            dir,
        }
    }

    /// A `psql` connection to the server, unaligned, `,`-separated, no headers.
    pub fn psql(&self) -> Command {
        let mut c = Command::new("psql");
        c.args([
            "-h",
            "127.0.0.1",
            "-p",
            &self.port.to_string(),
            "-U",
            "braid",
            "-X",
            "-A",
            "-t",
            "-F",
            ",",
        ])
        .env("PGCONNECT_TIMEOUT", "5")
        .stdin(Stdio::null());
        c
    }

    /// Runs `sql` in a `psql` connection of its own; its output, or a panic naming the
    /// statement and psql's error.
    #[allow(dead_code)] // not every test file runs statements this way
    pub fn psql_ok(&self, sql: &str) -> String {
        let out = self
            .psql()
            .args(["-v", "ON_ERROR_STOP=1", "-c", sql])
            .output()
            .expect("psql runs");
        assert!(
            out.status.success(),
            "{sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// Starts `sql` in a connection of its own, without waiting.
    #[allow(dead_code)] // not every test file subscribes
    pub fn spawn(&self, sql: &str) -> Child {
        self.psql()
            .args(["-v", "ON_ERROR_STOP=1", "-c", sql])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("psql runs (install postgresql-client)")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(r) = self.running.take() {
            r.stop();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
