//! The PostgreSQL wire protocol front end (simple queries and COPY): each connection
//! hands its statements to the shared live session and carries out what comes back.
//! Rows of a SUBSCRIBE or a streaming SELECT are written and flushed batch by batch
//! as the query makes them, so a client sees them at once; `COPY (...) TO STDOUT`
//! streams them as COPY data (what `psql` prints as it arrives).

use crate::text::{cell, copy_line, pg_type};
use async_trait::async_trait;
use braid_exec::error::Error as ExecError;
use braid_exec::live::ingest::Ingest;
use braid_exec::live::{Client, LiveSession, Outcome, Subscription};
use braid_plan::types::DataType;
use braid_sql::catalog::Listing;
use braid_sql::copy::CopyFormat;
use braid_sql::parse::{Located, Statement};
use futures::{Sink, SinkExt};
use pgwire::api::cancel::DefaultCancelHandler;
use pgwire::api::copy::CopyHandler;
use pgwire::api::query::SimpleQueryHandler;
use pgwire::api::results::{DataRowEncoder, FieldFormat, FieldInfo, QueryResponse, Response, Tag};
use pgwire::api::store::PortalStore;
use pgwire::api::{ClientInfo, ClientPortalStore, PgWireServerHandlers};
use pgwire::api::{ConnectionGuard, ConnectionHandle, ConnectionManager};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::copy::{CopyData, CopyDone, CopyFail, CopyOutResponse};
use pgwire::messages::data::RowDescription;
use pgwire::messages::response::NoticeResponse;
use pgwire::messages::startup::ParameterStatus;
use pgwire::messages::PgWireBackendMessage;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

pub(crate) type Shared = Arc<Mutex<LiveSession>>;

/// What a subscriber may cost the server.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Rows a subscriber may be behind its stream.
    pub max_lag: u64,
    /// How long a subscriber may take to take one batch.
    pub slow: std::time::Duration,
}

/// How long a subscription may be idle before the server checks the client is there
/// (a status message it must take: a client gone makes the write fail).
const KEEPALIVE: std::time::Duration = std::time::Duration::from_secs(1);

/// Accepts clients until `stopped`.
pub async fn serve(
    listener: std::net::TcpListener,
    session: Shared,
    limits: Limits,
    startup: Arc<crate::auth::Startup>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    // Cancel requests (psql's Ctrl-C) find the connection by its process id and key.
    let cancels = Arc::new(ConnectionManager::new());
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => {
                let Ok((socket, _)) = accepted else { continue };
                let conn = Arc::new(Conn {
                    session: session.clone(),
                    copy: Mutex::new(None),
                    limits,
                    client: Mutex::new(Client::default()),
                    cancels: cancels.clone(),
                    cancel: Mutex::new(None),
                });
                let startup = startup.clone();
                tokio::spawn(async move {
                    let _ = pgwire::tokio::process_socket(socket, None, Handlers(conn, startup)).await;
                });
            }
        }
    }
}

/// One client's connection: the session, and the COPY it is feeding.
pub(crate) struct Conn {
    pub(crate) session: Shared,
    pub(crate) copy: Mutex<Option<Ingest>>,
    pub(crate) limits: Limits,
    /// The client's transaction block, if one is open, and the rows it sent.
    pub(crate) client: Mutex<Client>,
    /// Where cancel requests are registered, and this connection's registration (made
    /// when its first streaming statement starts).
    cancels: Arc<ConnectionManager>,
    cancel: Mutex<Option<(Arc<ConnectionHandle>, ConnectionGuard)>>,
}

impl Conn {
    /// What fires when the client asks to cancel the statement it is running now (a
    /// cancel request on another connection, with this one's process id and key).
    pub(crate) async fn cancel_signal<C: ClientInfo>(&self, client: &C) -> Cancel {
        let handle = {
            let mut cancel = self.cancel.lock().unwrap_or_else(|p| p.into_inner());
            let (handle, _) = cancel.get_or_insert_with(|| {
                let (pid, key) = client.pid_and_secret_key();
                self.cancels.register(pid, key)
            });
            handle.clone()
        };
        handle.start_query().await
    }

    /// Runs `query`'s statements for this client; first sends it, as warnings, which
    /// of the rows it sent before queries have since refused as late.
    pub(crate) async fn execute<C>(
        &self,
        client: &mut C,
        query: &str,
    ) -> PgWireResult<Vec<braid_exec::error::Result<Outcome>>>
    where
        C: Sink<PgWireBackendMessage> + Unpin + Send,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let parsed = braid_sql::parse::parse(query).map_err(ExecError::from);
        self.run(client, query, parsed).await
    }

    /// Runs `parsed`, the statements of `query` (or why it does not parse), for this
    /// client; first sends it, as warnings, which of the rows it sent before queries
    /// have since refused as late.
    pub(crate) async fn run<C>(
        &self,
        client: &mut C,
        query: &str,
        parsed: braid_exec::error::Result<Vec<Located<Statement>>>,
    ) -> PgWireResult<Vec<braid_exec::error::Result<Outcome>>>
    where
        C: Sink<PgWireBackendMessage> + Unpin + Send,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let (notices, outcomes) = {
            let mut session = self.session.lock().unwrap_or_else(|p| p.into_inner());
            let mut me = self.client.lock().unwrap_or_else(|p| p.into_inner());
            let notices = session.late_notices(&mut me);
            let outcomes = match parsed {
                Ok(statements) => session.run_in(query, statements, &mut me),
                Err(e) => {
                    me.fail();
                    vec![Err(e)]
                }
            };
            (notices, outcomes)
        };
        for text in notices {
            warn(client, "01000", text).await?;
        }
        Ok(outcomes)
    }
}

/// Sends a warning (a notice the client shows with the statement's answer).
async fn warn<C>(client: &mut C, code: &str, text: String) -> PgWireResult<()>
where
    C: Sink<PgWireBackendMessage> + Unpin + Send,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let notice = ErrorInfo::new("WARNING".into(), code.into(), text);
    client
        .send(PgWireBackendMessage::NoticeResponse(NoticeResponse::from(
            notice,
        )))
        .await?;
    Ok(())
}

struct Handlers(Arc<Conn>, Arc<crate::auth::Startup>);

impl PgWireServerHandlers for Handlers {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        self.0.clone()
    }

    fn copy_handler(&self) -> Arc<impl CopyHandler> {
        self.0.clone()
    }

    fn startup_handler(&self) -> Arc<impl pgwire::api::auth::StartupHandler> {
        self.1.clone()
    }

    fn extended_query_handler(&self) -> Arc<impl pgwire::api::query::ExtendedQueryHandler> {
        self.0.clone()
    }

    fn cancel_handler(&self) -> Arc<impl pgwire::api::cancel::CancelHandler> {
        Arc::new(DefaultCancelHandler::new(self.0.cancels.clone()))
    }
}

/// A Postgres error for a Braid error: SQLSTATE by kind, and the cursor position
/// when the message locates it (`line L, column C` in the statement's text).
pub(crate) fn pg_error(e: &ExecError, query: &str) -> ErrorInfo {
    let message = e.to_string();
    let code = match e {
        ExecError::Plan(braid_plan::error::Error::NotSupported(_)) => "0A000",
        ExecError::Plan(braid_plan::error::Error::Parse { .. }) => "42601",
        // invalid_text_representation: a value not of its column's type.
        ExecError::Plan(braid_plan::error::Error::Value(_)) => "22P02",
        ExecError::Plan(_) => "42000",
        ExecError::Fault { .. } => "22000",
        _ => "XX000",
    };
    let mut info = ErrorInfo::new("ERROR".into(), code.into(), message.clone());
    info.position = position(&message, query).map(|p| p.to_string());
    info
}

/// The 1-based character position of `line L, column C` of `message` in `query`.
fn position(message: &str, query: &str) -> Option<usize> {
    let at = message.find("line ")?;
    let rest = &message[at + 5..];
    let (line, rest) = rest.split_once(", column ")?;
    let line: usize = line.trim().parse().ok()?;
    let column: usize = rest
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    let before: usize = query
        .split('\n')
        .take(line.saturating_sub(1))
        .map(|l| l.chars().count() + 1)
        .sum();
    Some(before + column)
}

fn user_error(info: ErrorInfo) -> PgWireError {
    PgWireError::UserError(Box::new(info))
}

pub(crate) fn fields(columns: &[(String, DataType)]) -> Arc<Vec<FieldInfo>> {
    Arc::new(
        columns
            .iter()
            .map(|(n, t)| FieldInfo::new(n.clone(), None, None, pg_type(*t), FieldFormat::Text))
            .collect(),
    )
}

#[async_trait]
impl SimpleQueryHandler for Conn {
    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let outcomes = self.execute(client, query).await?;
        let mut responses = Vec::new();
        for outcome in outcomes {
            match outcome {
                Err(e) => responses.push(Response::Error(Box::new(pg_error(&e, query)))),
                Ok(Outcome::Done(tag)) => responses.push(Response::Execution(Tag::new(&tag))),
                Ok(Outcome::Begin) => responses.push(Response::TransactionStart(Tag::new("BEGIN"))),
                Ok(Outcome::End(tag)) => responses.push(Response::TransactionEnd(Tag::new(&tag))),
                Ok(Outcome::Listing(l)) => responses.push(listing_response(&l)?),
                Ok(Outcome::Row(columns, row)) => responses.push(row_response(&columns, &row)?),
                Ok(Outcome::CopyIn(ingest)) => responses.push(self.copy_in(ingest)),
                Ok(Outcome::Rows(sub, copy)) => {
                    // Earlier results go first; the rows stream until the query ends.
                    for r in responses.drain(..) {
                        send_response(client, r).await?;
                    }
                    let cancel = self.cancel_signal(client).await;
                    stream_rows(client, sub, copy, self.limits, cancel).await?;
                }
            }
        }
        Ok(responses)
    }
}

/// Sends a response the way pgwire would (used before a streaming result).
async fn send_response<C>(client: &mut C, r: Response) -> PgWireResult<()>
where
    C: Sink<PgWireBackendMessage> + Unpin + Send,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    match r {
        Response::Execution(tag) => {
            client
                .send(PgWireBackendMessage::CommandComplete(tag.into()))
                .await?
        }
        Response::Query(q) => pgwire::api::query::send_query_response(client, q, true).await?,
        Response::Error(e) => {
            client
                .send(PgWireBackendMessage::ErrorResponse((*e).into()))
                .await?
        }
        _ => {}
    }
    Ok(())
}

/// Pushes a subscription's rows to the client as they come, flushing each batch,
/// until the stream ends (or the client goes: the write fails, the subscription is
/// dropped with its private query); then ends the command (CommandComplete, or the
/// error its query failed with).
async fn stream_rows<C>(
    client: &mut C,
    sub: Subscription,
    copy: Option<(CopyFormat, bool)>,
    limits: Limits,
    cancel: Cancel,
) -> PgWireResult<()>
where
    C: Sink<PgWireBackendMessage> + Unpin + Send,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let message = match push_rows(client, sub, copy, true, limits, cancel).await? {
        Ok(tag) => PgWireBackendMessage::CommandComplete(tag.into()),
        Err(info) => PgWireBackendMessage::ErrorResponse(info.into()),
    };
    client.send(message).await?;
    Ok(())
}

/// What fires when the client cancels the running statement ([`Conn::cancel_signal`]).
pub(crate) type Cancel = futures::channel::oneshot::Receiver<()>;

/// Pushes a subscription's rows (with their row description first when `describe`;
/// the extended protocol sent it at Describe); the tag that ends the command, or the
/// error the query failed with, or that the client canceled it (`cancel`: dropping
/// the subscription ends its private query).
pub(crate) async fn push_rows<C>(
    client: &mut C,
    mut sub: Subscription,
    copy: Option<(CopyFormat, bool)>,
    describe: bool,
    limits: Limits,
    mut cancel: Cancel,
) -> PgWireResult<Result<Tag, ErrorInfo>>
where
    C: Sink<PgWireBackendMessage> + Unpin + Send,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let types: Vec<DataType> = sub.columns.iter().map(|c| c.1).collect();
    let schema = fields(&sub.columns);
    if let Some((format, header)) = copy {
        let response = CopyOutResponse::new(0, types.len() as i16, vec![0; types.len()]);
        client
            .send(PgWireBackendMessage::CopyOutResponse(response))
            .await?;
        if header && format == CopyFormat::Csv {
            let mut line = String::new();
            for (c, (name, _)) in sub.columns.iter().enumerate() {
                if c > 0 {
                    line.push(',');
                }
                crate::text::csv_field(name, &mut line);
            }
            line.push('\n');
            let data = CopyData::new(bytes::Bytes::copy_from_slice(line.as_bytes()));
            client.send(PgWireBackendMessage::CopyData(data)).await?;
        }
    } else if describe {
        let desc = RowDescription::new(schema.iter().map(Into::into).collect());
        client
            .send(PgWireBackendMessage::RowDescription(desc))
            .await?;
    }
    let mut encoder = DataRowEncoder::new(schema.clone());
    let mut rows = 0usize;
    let mut line = String::new();
    loop {
        let next = futures::future::poll_fn(|cx| sub.poll_next(cx));
        let waited = tokio::select! {
            waited = tokio::time::timeout(KEEPALIVE, next) => waited,
            // A sender dropped (a later statement replaced it) is no cancel.
            Ok(()) = &mut cancel => {
                return Ok(Err(ErrorInfo::new(
                    "ERROR".into(),
                    "57014".into(),
                    "canceling statement due to user request".into(),
                )));
            }
        };
        let batch = match waited {
            Ok(Some(batch)) => batch,
            Ok(None) => break,
            Err(_) => {
                // Idle: a status message the client must take (a client gone makes
                // the write fail, and the subscription ends with its query).
                let beat = ParameterStatus::new("braid_keepalive".into(), "on".into());
                within(
                    limits,
                    client.send(PgWireBackendMessage::ParameterStatus(beat)),
                )
                .await??;
                continue;
            }
        };
        if sub.behind() > limits.max_lag {
            return Err(too_slow(format!(
                "the subscriber fell {} rows behind its stream (at most {} allowed): it reads too slowly",
                sub.behind(),
                limits.max_lag
            )));
        }
        let send = async {
            for row in batch.rows() {
                rows += 1;
                if let Some((format, _)) = copy {
                    line.clear();
                    match format {
                        CopyFormat::Text => copy_line(&row, &types, &mut line),
                        CopyFormat::Csv => crate::text::csv_line(&row, &types, &mut line),
                    }
                    let data = CopyData::new(bytes::Bytes::copy_from_slice(line.as_bytes()));
                    client.feed(PgWireBackendMessage::CopyData(data)).await?;
                } else {
                    for (c, &ty) in types.iter().enumerate() {
                        encoder.encode_field(&cell(&row, c, ty))?;
                    }
                    client
                        .feed(PgWireBackendMessage::DataRow(encoder.take_row()))
                        .await?;
                }
            }
            client.flush().await?;
            PgWireResult::Ok(())
        };
        within(limits, send).await??;
    }
    if let Some(e) = sub.error() {
        if copy.is_some() {
            client
                .send(PgWireBackendMessage::CopyFail(CopyFail::new(e.clone())))
                .await?;
        }
        return Ok(Err(ErrorInfo::new("ERROR".into(), "22000".into(), e)));
    }
    Ok(Ok(match copy.is_some() {
        true => {
            client
                .feed(PgWireBackendMessage::CopyDone(CopyDone::new()))
                .await?;
            Tag::new("COPY").with_rows(rows)
        }
        false => Tag::new("SELECT").with_rows(rows),
    }))
}

/// `f`, unless the client takes longer than the limit to take what is sent: then the
/// subscriber is too slow and is disconnected.
async fn within<T>(limits: Limits, f: impl std::future::Future<Output = T>) -> PgWireResult<T> {
    tokio::time::timeout(limits.slow, f).await.map_err(|_| {
        too_slow(format!(
            "the subscriber took more than {:?} to take a batch of rows: it reads too slowly",
            limits.slow
        ))
    })
}

/// The FATAL error that disconnects a slow subscriber.
fn too_slow(message: String) -> PgWireError {
    user_error(ErrorInfo::new(
        pgwire::error::SEVERITY_FATAL.into(),
        "53400".into(),
        message,
    ))
}

/// A SHOW, DESCRIBE or EXPLAIN listing as rows of text columns.
/// A result of `columns` and rows of text cells (`None`: null), all at once.
fn query_response(
    columns: &[(String, DataType)],
    rows: impl Iterator<Item = Vec<Option<String>>>,
) -> PgWireResult<Response> {
    let schema = fields(columns);
    let mut encoder = DataRowEncoder::new(schema.clone());
    let mut encoded = Vec::new();
    for row in rows {
        for v in &row {
            encoder.encode_field(v)?;
        }
        encoded.push(Ok(encoder.take_row()));
    }
    Ok(Response::Query(QueryResponse::new(
        schema,
        futures::stream::iter(encoded),
    )))
}

/// Typed rows (`SELECT 1`), their columns typed as Postgres types.
pub(crate) fn row_response(
    columns: &[(String, DataType)],
    batch: &braid_plan::batch::Batch,
) -> PgWireResult<Response> {
    let rows = batch.rows().map(|r| {
        (columns.iter().enumerate())
            .map(|(c, (_, ty))| cell(&r, c, *ty))
            .collect()
    });
    query_response(columns, rows)
}

/// A listing (SHOW, DESCRIBE, EXPLAIN): text columns.
pub(crate) fn listing_response(l: &Listing) -> PgWireResult<Response> {
    let columns: Vec<(String, DataType)> = l
        .header
        .iter()
        .map(|h| (h.clone(), DataType::String))
        .collect();
    let rows = l.rows.iter().map(|r| r.iter().cloned().map(Some).collect());
    query_response(&columns, rows)
}

impl Conn {
    /// Starts a COPY into a stream: the connection keeps `ingest` for the data to come.
    pub(crate) fn copy_in(&self, ingest: Ingest) -> Response {
        let columns = ingest.columns();
        *self.copy.lock().unwrap_or_else(|p| p.into_inner()) = Some(ingest);
        Response::CopyIn(pgwire::api::results::CopyResponse::new(
            0,
            columns,
            futures::stream::empty(),
        ))
    }
}

#[async_trait]
impl CopyHandler for Conn {
    async fn on_copy_data<C>(&self, _client: &mut C, data: CopyData) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let mut copy = self.copy.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(ingest) = copy.as_mut() {
            ingest.push(&data.data).map_err(|e| {
                user_error(ErrorInfo::new(
                    "ERROR".into(),
                    "58030".into(),
                    e.to_string(),
                ))
            })?;
        }
        Ok(())
    }

    async fn on_copy_done<C>(&self, client: &mut C, _done: CopyDone) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let ingest = self.copy.lock().unwrap_or_else(|p| p.into_inner()).take();
        let Some(mut ingest) = ingest else {
            return Ok(());
        };
        ingest.finish().map_err(|e| {
            user_error(ErrorInfo::new(
                "ERROR".into(),
                "58030".into(),
                e.to_string(),
            ))
        })?;
        // The producer's acknowledgement: the rows taken, and the malformed ones.
        if ingest.rejected > 0 {
            let mut text = format!("{} malformed rows skipped", ingest.rejected);
            for r in &ingest.rejects {
                text.push_str(&format!(
                    "\nline {}, column {}: {}",
                    r.line, r.column, r.reason
                ));
            }
            warn(client, "22P04", text).await?;
        }
        let sent = std::mem::take(&mut ingest.sent);
        self.client
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .sent
            .extend(sent);
        let tag = Tag::new("COPY").with_rows(ingest.rows as usize);
        client
            .send(PgWireBackendMessage::CommandComplete(tag.into()))
            .await?;
        Ok(())
    }

    async fn on_copy_fail<C>(&self, _client: &mut C, fail: CopyFail) -> PgWireError
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        // Rows of complete lines before the failure are already in the stream.
        let ingest = self.copy.lock().unwrap_or_else(|p| p.into_inner()).take();
        let rows = ingest.map_or(0, |i| i.rows);
        user_error(ErrorInfo::new(
            "ERROR".into(),
            "57014".into(),
            format!(
                "COPY ended by the client: {} ({rows} rows were taken before)",
                fail.message
            ),
        ))
    }
}
