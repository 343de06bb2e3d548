//! The live dashboard and Prometheus `/metrics`, on the HTTP listener.
//!
//! A sampler takes a [`Snapshot`] of the session every second (holding the session
//! only to copy counters) and keeps the last [`KEEP`] samples' counters for the
//! timeline. The page (`assets/dashboard.*`, with Cytoscape.js for plan graphs and
//! uPlot for the timeline, bundled into the binary) loads `/api/history`, then follows
//! `/api/events`, a server-sent event per sample carrying the whole snapshot.

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use braid_exec::live::snapshot::Snapshot;
use braid_exec::live::LiveSession;
use braid_exec::rescale::{Request, Rescaler};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::broadcast;

/// Samples kept for the timeline (one a second: the last five minutes).
pub const KEEP: usize = 300;

/// Where the figures come from: the live session, or a one-shot run (`braid run
/// --dashboard`).
pub type Source = Box<dyn Fn() -> Snapshot + Send + Sync>;

/// The sampler's state, shared by the HTTP handlers.
pub struct Board {
    source: Source,
    start: Instant,
    history: Mutex<VecDeque<Sample>>,
    latest: Mutex<Option<Arc<String>>>,
    events: broadcast::Sender<Arc<String>>,
}

/// One sample's counters: rows of each stream, rows in and out of each query.
#[derive(Clone, Serialize)]
struct Sample {
    /// Seconds since the server started.
    t: f64,
    streams: BTreeMap<String, u64>,
    queries: BTreeMap<usize, [u64; 2]>,
    /// The highest p99 latency (ms) of the running queries.
    latency: Option<f64>,
}

/// What a server-sent event carries.
#[derive(Serialize)]
struct Update<'a> {
    t: f64,
    snapshot: &'a Snapshot,
}

impl Board {
    /// A board over the live `session`, its sampler running on the current tokio
    /// runtime.
    pub fn live(session: Arc<Mutex<LiveSession>>) -> Arc<Board> {
        Board::start(Box::new(move || {
            session.lock().unwrap_or_else(|p| p.into_inner()).snapshot()
        }))
    }

    /// A board over `source`, its sampler running on the current tokio runtime.
    pub fn start(source: Source) -> Arc<Board> {
        let (events, _) = broadcast::channel(16);
        let board = Arc::new(Board {
            source,
            start: Instant::now(),
            history: Mutex::new(VecDeque::new()),
            latest: Mutex::new(None),
            events,
        });
        let b = board.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                let s = b.clone();
                if tokio::task::spawn_blocking(move || s.sample())
                    .await
                    .is_err()
                {
                    return;
                }
            }
        });
        board
    }

    fn snapshot(&self) -> Snapshot {
        (self.source)()
    }

    /// Takes a sample: keeps its counters, sends the snapshot to the pages.
    fn sample(&self) {
        let snapshot = self.snapshot();
        let t = self.start.elapsed().as_secs_f64();
        let sample = Sample {
            t,
            streams: snapshot
                .streams
                .iter()
                .map(|s| (s.name.clone(), s.rows))
                .collect(),
            queries: snapshot
                .queries
                .iter()
                .map(|q| (q.number, [q.rows_in, q.rows_out]))
                .collect(),
            latency: snapshot
                .queries
                .iter()
                .filter(|q| q.state == "running")
                .filter_map(|q| q.latency.p99_ms)
                .reduce(f64::max),
        };
        {
            let mut h = self.history.lock().unwrap_or_else(|p| p.into_inner());
            if h.len() == KEEP {
                h.pop_front();
            }
            h.push_back(sample);
        }
        let update = Update {
            t,
            snapshot: &snapshot,
        };
        if let Ok(text) = serde_json::to_string(&update) {
            let text = Arc::new(text);
            *self.latest.lock().unwrap_or_else(|p| p.into_inner()) = Some(text.clone());
            let _ = self.events.send(text);
        }
    }
}

type Shared = Arc<Board>;

/// The dashboard's routes over `board`.
pub fn routes(board: Shared) -> axum::Router {
    use axum::routing::get;
    axum::Router::new()
        .route("/", get(page))
        .route("/favicon.ico", get(|| async { StatusCode::NO_CONTENT }))
        .route("/assets/{file}", get(asset))
        .route("/api/history", get(history))
        .route("/api/snapshot", get(snapshot))
        .route("/api/events", get(events))
        .route("/metrics", get(metrics))
        .with_state(board)
}

/// Serves the dashboard of `source` alone (a one-shot run's) on `listener`, on a
/// thread of its own with its own runtime, for as long as the process lives; with
/// `rescaler`, `POST /api/rescale` rescales the running query live (see
/// [`rescale_routes`]).
pub fn serve_alone(
    listener: std::net::TcpListener,
    source: Source,
    rescaler: Option<Rescaler>,
) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    std::thread::Builder::new()
        .name("braid-dashboard".into())
        .spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                    return;
                };
                let board = Board::start(source);
                let mut app = routes(board);
                if let Some(r) = rescaler {
                    app = app.merge(rescale_routes(r));
                }
                let _ = axum::serve(listener, app).await;
            });
        })?;
    Ok(())
}

/// `POST /api/rescale?partitions=Q` asks the running query to go to `Q` partitions
/// (every stage that can), `POST /api/rescale?stage=S&partition=P&worker=W` to move
/// partition `P` of stage `S` (from 1) onto worker `W`: 202 once asked (the run takes
/// it up at its next epoch), 400 naming what is wrong. `GET /api/rescale`: the
/// rescales done and the requests refused, as JSON.
pub fn rescale_routes(rescaler: Rescaler) -> axum::Router {
    use axum::extract::RawQuery;
    use axum::routing::get;
    async fn ask(State(r): State<Rescaler>, RawQuery(raw): RawQuery) -> Response {
        let q: BTreeMap<String, String> = raw
            .unwrap_or_default()
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| match p.split_once('=') {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => (p.to_string(), String::new()),
            })
            .collect();
        let num = |k: &str| -> Result<Option<u64>, String> {
            q.get(k)
                .map(|v| {
                    v.parse::<u64>()
                        .map_err(|_| format!("{k} = `{v}`: expected a whole number"))
                })
                .transpose()
        };
        let request = (|| -> Result<Request, String> {
            let unknown: Vec<&String> = q
                .keys()
                .filter(|k| {
                    !["partitions", "stage", "partition", "worker", "workers"].contains(&k.as_str())
                })
                .collect();
            if !unknown.is_empty() {
                return Err(format!(
                    "unknown parameter(s) {unknown:?}; expected partitions=Q, workers=N, or stage=S&partition=P&worker=W"
                ));
            }
            match (
                num("partitions")?,
                num("stage")?,
                num("partition")?,
                num("worker")?,
                num("workers")?,
            ) {
                (Some(p), None, None, None, None) => Ok(Request::Partitions(
                    u32::try_from(p).map_err(|_| format!("partitions = {p}: too many"))?,
                )),
                (None, None, None, None, Some(n)) => Ok(Request::Workers(
                    u32::try_from(n).map_err(|_| format!("workers = {n}: too many"))?,
                )),
                (None, Some(s), Some(p), Some(w), None) => Ok(Request::Move {
                    stage: s as usize,
                    partition: u32::try_from(p).map_err(|_| format!("partition = {p}"))?,
                    worker: u32::try_from(w).map_err(|_| format!("worker = {w}"))?,
                }),
                _ => {
                    Err("expected partitions=Q, workers=N, or stage=S&partition=P&worker=W".into())
                }
            }
        })();
        match request {
            Ok(req) => {
                let text = format!("asked: {req:?} (taken up at the next epoch the run closes)\n");
                r.request(req);
                (StatusCode::ACCEPTED, text).into_response()
            }
            Err(why) => (StatusCode::BAD_REQUEST, format!("{why}\n")).into_response(),
        }
    }
    async fn status(State(r): State<Rescaler>) -> Response {
        #[derive(Serialize)]
        struct Done {
            request: String,
            epoch: u64,
            partitions: Vec<u32>,
            workers: usize,
            pause_ms: f64,
        }
        #[derive(Serialize)]
        struct Status {
            done: Vec<Done>,
            refused: Vec<String>,
        }
        let s = Status {
            done: r
                .done()
                .into_iter()
                .map(|d| Done {
                    request: d.request.to_string(),
                    epoch: d.epoch,
                    partitions: d.partitions,
                    workers: d.workers,
                    pause_ms: d.pause.as_secs_f64() * 1000.0,
                })
                .collect(),
            refused: r.refused(),
        };
        match serde_json::to_string(&s) {
            Ok(text) => ([(header::CONTENT_TYPE, "application/json")], text).into_response(),
            Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
        }
    }
    axum::Router::new()
        .route("/api/rescale", get(status).post(ask))
        .with_state(rescaler)
}

/// `GET /`: the page.
pub async fn page() -> Response {
    asset_response("dashboard.html")
}

/// `GET /assets/<file>`: the page's scripts and styles.
pub async fn asset(Path(file): Path<String>) -> Response {
    asset_response(&file)
}

fn asset_response(file: &str) -> Response {
    let (body, kind): (&'static str, &str) = match file {
        "dashboard.html" => (include_str!("../assets/dashboard.html"), "text/html"),
        "dashboard.js" => (include_str!("../assets/dashboard.js"), "text/javascript"),
        "dashboard.css" => (include_str!("../assets/dashboard.css"), "text/css"),
        "cytoscape.min.js" => (
            include_str!("../assets/vendor/cytoscape.min.js"),
            "text/javascript",
        ),
        "uPlot.iife.min.js" => (
            include_str!("../assets/vendor/uPlot.iife.min.js"),
            "text/javascript",
        ),
        "uPlot.min.css" => (include_str!("../assets/vendor/uPlot.min.css"), "text/css"),
        _ => return (StatusCode::NOT_FOUND, "no such file\n").into_response(),
    };
    let kind = format!("{kind}; charset=utf-8");
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

/// `GET /api/history`: the kept samples, oldest first.
pub async fn history(State(board): State<Shared>) -> Response {
    let h: Vec<Sample> = board
        .history
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .cloned()
        .collect();
    json(serde_json::to_string(&h).unwrap_or_default())
}

/// `GET /api/snapshot`: the session now.
pub async fn snapshot(State(board): State<Shared>) -> Response {
    let b = board.clone();
    match tokio::task::spawn_blocking(move || b.snapshot()).await {
        Ok(s) => json(serde_json::to_string(&s).unwrap_or_default()),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

fn json(body: String) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// `GET /api/events`: a server-sent event per sample (the latest one first).
pub async fn events(State(board): State<Shared>) -> impl IntoResponse {
    let first = board
        .latest
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let rx = board.events.subscribe();
    let stream = futures::stream::unfold((first, rx), |(first, mut rx)| async move {
        if let Some(text) = first {
            return Some((Ok(Event::default().data(text.as_str())), (None, rx)));
        }
        loop {
            match rx.recv().await {
                Ok(text) => return Some((Ok(Event::default().data(text.as_str())), (None, rx))),
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    let stream: std::pin::Pin<
        Box<dyn futures::Stream<Item = Result<Event, std::convert::Infallible>> + Send>,
    > = Box::pin(stream);
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// `GET /metrics`: the session's figures in Prometheus's text format.
pub async fn metrics(State(board): State<Shared>) -> Response {
    let b = board.clone();
    match tokio::task::spawn_blocking(move || b.snapshot()).await {
        Ok(s) => (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            crate::metrics::render(&s),
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}
