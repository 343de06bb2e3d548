//! The HTTP listener: the dashboard and `/metrics` ([`crate::dashboard`]), and batches: `POST /streams/<name>` with a CSV body (`Content-Type: text/csv`,
//! `text/csv; header=present` when its first line is a header) or JSON lines
//! (`application/x-ndjson`). The answer comes once the rows are in the stream's log
//! (written and synced): `200 {"rows": n, "rejected": m, "rejects": [{"line": l,
//! "column": c, "reason": "..."}]}` (the first ten malformed lines; column 0: the whole
//! line). `404` for a stream that does not live in Braid, `415` for another content
//! type, `400` for a body that is not UTF-8, `413` for one over [`MAX_BODY`].

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use braid_exec::live::ingest::{Format, Ingest};
use braid_exec::live::LiveSession;
use serde_json::json;
use std::sync::{Arc, Mutex};

type Shared = Arc<Mutex<LiveSession>>;

/// The largest body taken.
pub const MAX_BODY: usize = 64 << 20;

/// Serves the dashboard, `/metrics` and HTTP producers on `listener` (until the
/// runtime ends).
pub async fn serve(listener: std::net::TcpListener, session: Shared) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let dashboard = crate::dashboard::routes(crate::dashboard::Board::live(session.clone()));
    let app = Router::new()
        .route("/streams/{name}", post(append))
        .fallback(|| async {
            answer(
                StatusCode::NOT_FOUND,
                json!({"error": "not found: / is the dashboard, /metrics the figures, POST /streams/<name> appends a batch to a stream"}),
            )
        })
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(session)
        .merge(dashboard);
    let _ = axum::serve(listener, app).await;
}

fn answer(status: StatusCode, body: serde_json::Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        format!("{body}\n"),
    )
        .into_response()
}

fn error(status: StatusCode, message: String) -> Response {
    answer(status, json!({ "error": message }))
}

/// `POST /streams/<name>`: the body's lines appended to the stream.
async fn append(
    State(session): State<Shared>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let mut parts = content_type.split(';').map(str::trim);
    let format = match parts.next().unwrap_or("") {
        "text/csv" => Format::Csv,
        "application/x-ndjson" | "application/jsonl" | "application/json-lines" => Format::Json,
        other => {
            return error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!(
                "Content-Type {other:?}: a batch is text/csv or application/x-ndjson (JSON lines)"
            ),
            )
        }
    };
    let header_line = parts.any(|p| p.replace(' ', "") == "header=present");
    if let Err(e) = std::str::from_utf8(&body) {
        return error(
            StatusCode::BAD_REQUEST,
            format!("the body is not UTF-8 (byte {})", e.valid_up_to()),
        );
    }
    // The session lock and the synced append may wait: off the async threads.
    let done = tokio::task::spawn_blocking(move || {
        let log = session
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .log(&name)
            .cloned();
        let Some(log) = log else {
            return Err((
                StatusCode::NOT_FOUND,
                format!("no stream named `{name}` lives in Braid (SHOW STREAMS lists them)"),
            ));
        };
        let mut ingest = Ingest::new(log, format, header_line);
        ingest
            .push(&body)
            .and_then(|()| ingest.finish())
            .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
        Ok(ingest)
    })
    .await;
    let ingest = match done {
        Ok(Ok(ingest)) => ingest,
        Ok(Err((status, message))) => return error(status, message),
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let rejects: Vec<serde_json::Value> = ingest
        .rejects
        .iter()
        .map(|r| json!({"line": r.line, "column": r.column, "reason": r.reason}))
        .collect();
    answer(
        StatusCode::OK,
        json!({"rows": ingest.rows, "rejected": ingest.rejected, "rejects": rejects}),
    )
}
