//! `braid server`: one long-running process where streams live and queries come and
//! go. Clients speak the PostgreSQL wire protocol (`psql` and every Postgres driver);
//! each connection is a thin client of one shared [`LiveSession`], which owns the
//! catalog, the stream logs and the engine's workers. Producers may also append
//! batches over HTTP ([`http`], when `ServerConfig::http` is given); TCP and file
//! producers of a stream are the session's (`braid_exec::live::feeds`).
//!
//! The front end lives in its own crate so that the execution crate never depends on
//! the web and wire stack.

mod auth;
pub mod dashboard;
mod ext;
pub mod http;
pub mod metrics;
mod pg;
mod text;

use braid_exec::live::engine::Cluster;
use braid_exec::live::LiveSession;
use braid_plan::function::Registry;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How to run the server.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Where clients connect (127.0.0.1 unless told otherwise).
    pub listen: SocketAddr,
    /// Worker threads of the engine.
    pub workers: usize,
    /// The data directory (stream logs under `streams/`); in memory when `None`.
    pub data: Option<PathBuf>,
    /// How long a stream may be idle before its time moves with the clock.
    pub idle: Duration,
    /// Runtime faults fail a query instead of being counted skips.
    pub strict: bool,
    /// A subscriber more rows than this behind its stream is disconnected.
    pub max_lag: u64,
    /// Clients must give this password (MD5 challenge); anyone may connect when `None`.
    pub password: Option<String>,
    /// A subscriber that takes longer than this to take a batch is disconnected.
    pub slow: Duration,
    /// Where HTTP producers POST batches (`POST /streams/<name>`); none when `None`.
    pub http: Option<SocketAddr>,
    /// This process's place among several (timely's cluster mode): process 0 serves
    /// clients, the others run [`follow`]. One process when `None`.
    pub cluster: Option<Cluster>,
    /// With a data directory: the catalog is kept there, the queries that write
    /// streams or sinks take a checkpoint this often, and a server started on the
    /// directory again brings everything back ([`LiveSession::recover`]). Over several
    /// processes, the checkpoints are in process 0's data directory, which every
    /// process must reach at the same path.
    pub checkpoint_interval: Option<Duration>,
    /// Where the queries' checkpoints go instead of the data directory (object
    /// storage: `braid_objstore::S3Backend`), each query's under `q<id>/`. Give every
    /// process of a cluster the same store: each writes its partitions' parts there
    /// itself, so the processes share no file system.
    pub checkpoints: Option<Arc<dyn braid_exec::checkpoint::CheckpointBackend>>,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 6875)),
            workers: 1,
            data: Some(PathBuf::from("braid-data")),
            idle: Duration::from_millis(50),
            strict: false,
            max_lag: 1_000_000,
            password: None,
            slow: Duration::from_secs(10),
            http: None,
            cluster: None,
            checkpoint_interval: Some(Duration::from_secs(1)),
            checkpoints: None,
        }
    }
}

/// A server error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Starting the session or its workers failed.
    #[error(transparent)]
    Exec(#[from] braid_exec::error::Error),
    /// The socket could not be opened.
    #[error("listening on {addr}: {why}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why (in the message: not a source, so a chain prints it once).
        why: std::io::Error,
    },
}

/// A running server: its address, and a handle that stops it.
pub struct Running {
    /// The address it listens on (the port is known once bound, also for port 0).
    pub addr: SocketAddr,
    /// The address of the HTTP listener, when there is one.
    pub http: Option<SocketAddr>,
    /// What was brought back from the data directory on start.
    pub recovered: braid_exec::live::Recovered,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    /// Stops accepting clients and ends the server (open connections end with it).
    pub fn stop(mut self) {
        self.halt();
    }

    /// Waits until the server ends (it runs until stopped).
    pub fn wait(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    fn halt(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Runs process `config.cluster.process` (> 0) of a cluster: its workers take their
/// share of every query process 0 runs, as process 0's session tells them. Returns
/// when process 0 goes away, or with an error if this process no longer agrees with it.
pub fn follow(config: &ServerConfig, registry: &Registry) -> Result<(), Error> {
    let base = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let internal = |m: String| Error::Exec(braid_exec::error::Error::Internal(m));
    let Some(cluster) = config.cluster.as_ref().filter(|c| c.process > 0) else {
        return Err(internal("only processes > 0 of a cluster follow".into()));
    };
    let (mut session, commands) =
        LiveSession::in_cluster(registry, config.workers, cluster, None, &base)?;
    session.idle = config.idle;
    session.strict = config.strict;
    use_checkpoint_store(&mut session, config)?;
    let commands = commands.ok_or_else(|| internal("no commands to follow".into()))?;
    if let Err(e) = session.follow(commands) {
        // Its workers are tied to the other processes' and would wait for them on a
        // join: this process stops now, without joining them (the others stop on
        // losing it: fail-stop).
        std::mem::forget(session);
        return Err(e.into());
    }
    Ok(())
}

/// Gives `session` the checkpoint store `config` names, if any; a bucket that cannot
/// be reached stops the server now, naming it.
fn use_checkpoint_store(session: &mut LiveSession, config: &ServerConfig) -> Result<(), Error> {
    if let Some(store) = &config.checkpoints {
        store.prepare()?;
    }
    session.checkpoint_store = config.checkpoints.clone();
    Ok(())
}

/// Starts a server with `registry`'s user code on a thread of its own; returns once it
/// listens.
pub fn start(config: &ServerConfig, registry: &Registry) -> Result<Running, Error> {
    let base = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    // The sockets first: a process 0 whose address is taken stops before it connects
    // to the other processes (after, its workers are tied to theirs).
    let listener = std::net::TcpListener::bind(config.listen).map_err(|why| Error::Listen {
        addr: config.listen,
        why,
    })?;
    let addr = listener.local_addr().map_err(|why| Error::Listen {
        addr: config.listen,
        why,
    })?;
    listener
        .set_nonblocking(true)
        .map_err(|source| Error::Listen { addr, why: source })?;
    let http = match config.http {
        Some(at) => {
            let io = |source| Error::Listen {
                addr: at,
                why: source,
            };
            let l = std::net::TcpListener::bind(at).map_err(io)?;
            l.set_nonblocking(true).map_err(io)?;
            Some(l)
        }
        None => None,
    };
    let mut session = match &config.cluster {
        Some(c) if c.process > 0 => {
            return Err(Error::Exec(braid_exec::error::Error::Internal(format!(
                "process {} of a cluster follows process 0: run it with `follow`",
                c.process
            ))))
        }
        Some(c) => {
            let dir = config.data.as_deref();
            LiveSession::in_cluster(registry, config.workers, c, dir, &base)?.0
        }
        None => LiveSession::new(registry, config.workers, config.data.as_deref(), &base)?,
    };
    session.idle = config.idle;
    session.strict = config.strict;
    let mut recovered = braid_exec::live::Recovered::default();
    let ready = use_checkpoint_store(&mut session, config).and_then(|()| {
        if let (Some(_), Some(every)) = (&config.data, config.checkpoint_interval) {
            recovered = session.recover(every)?;
        }
        Ok(())
    });
    if let Err(e) = ready {
        // A cluster's workers are tied to the other processes': this one stops
        // without waiting for them (they stop on losing it).
        if config.cluster.is_some() {
            std::mem::forget(session);
        }
        return Err(e);
    }
    let session = Arc::new(Mutex::new(session));
    let http_addr = http.as_ref().and_then(|l| l.local_addr().ok());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let limits = pg::Limits {
        max_lag: config.max_lag,
        slow: config.slow,
    };
    let startup = Arc::new(auth::Startup::new(config.password.as_deref()));
    let thread = std::thread::Builder::new()
        .name("braid-server".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a tokio runtime");
            if let Some(l) = http {
                runtime.spawn(http::serve(l, session.clone()));
            }
            runtime.block_on(pg::serve(listener, session, limits, startup, stopped));
            runtime.shutdown_timeout(Duration::from_millis(200));
        })
        .map_err(|source| Error::Listen { addr, why: source })?;
    Ok(Running {
        addr,
        http: http_addr,
        recovered,
        stop: Some(stop),
        thread: Some(thread),
    })
}
