//! The extended query protocol (Parse, Bind, Describe, Execute), which psycopg, JDBC
//! and most drivers use. A statement is its text, parsed when described or run; `$n`
//! parameters are bound as typed values into the parsed statement
//! (`braid_sql::parse::bind`: each value a constant of its type where the placeholder
//! stood, never text parsed again). Results are text; a client asking for binary
//! results is refused with a message.

use crate::pg::{fields, listing_response, pg_error, push_rows, row_response, Conn, Shared};
use async_trait::async_trait;
use braid_exec::live::Outcome;
use braid_plan::batch::Scalar;
use braid_plan::types::DataType;
use braid_sql::parse::{bind, parameters, parse, Located, Param, SqlType, Statement, TimezoneInfo};
use futures::Sink;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::ExtendedQueryHandler;
use pgwire::api::results::{
    DescribePortalResponse, DescribeStatementResponse, FieldInfo, Response, Tag,
};
use pgwire::api::stmt::{QueryParser, StoredStatement};
use pgwire::api::store::PortalStore;
use pgwire::api::{ClientInfo, ClientPortalStore, Type};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::PgWireBackendMessage;
use std::fmt::Debug;
use std::sync::Arc;

/// Parses nothing ahead: a statement is its text, compiled when described or run.
pub(crate) struct Parser {
    session: Shared,
}

fn user_error(code: &str, message: String) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new(
        "ERROR".into(),
        code.into(),
        message,
    )))
}

/// Days from 1970-01-01 (Braid's epoch) to 2000-01-01 (PostgreSQL's).
const PG_EPOCH_DAYS: i64 = 10_957;

/// Parameter `i`, a TIMESTAMP, TIMESTAMPTZ or DATE in PostgreSQL's binary format, as
/// the text of that type (read as `TIMESTAMP '...'` is).
fn binary_time(declared: &Type, raw: &[u8], i: usize) -> PgWireResult<Param> {
    let bad = || {
        user_error(
            "22P03",
            format!("parameter ${}: not a binary {}", i + 1, declared.name()),
        )
    };
    let (ty, sql, v) = match *declared {
        Type::DATE => {
            let days = i32::from_be_bytes(raw.try_into().map_err(|_| bad())?);
            (
                DataType::Date,
                SqlType::Date,
                i64::from(days) + PG_EPOCH_DAYS,
            )
        }
        _ => {
            let us = i64::from_be_bytes(raw.try_into().map_err(|_| bad())?);
            let (ty, zone) = match *declared {
                Type::TIMESTAMPTZ => (DataType::TimestampTz, TimezoneInfo::WithTimeZone),
                _ => (DataType::Timestamp, TimezoneInfo::None),
            };
            let v = us
                .checked_add(PG_EPOCH_DAYS * 86_400_000_000)
                .ok_or_else(bad)?;
            (ty, SqlType::Timestamp(None, zone), v)
        }
    };
    Ok(Param::Typed(sql, braid_plan::time::format(v, ty)))
}

/// Parameter `i` of `portal` as a typed value.
fn param(portal: &Portal<String>, i: usize) -> PgWireResult<Param> {
    let declared = portal
        .statement
        .parameter_types
        .get(i)
        .cloned()
        .flatten()
        .unwrap_or(Type::UNKNOWN);
    let Some(raw) = portal.parameters.get(i).cloned().flatten() else {
        return Ok(Param::Value(Scalar::Null));
    };
    let value = |s: Scalar| Ok(Param::Value(s));
    if portal.parameter_format.is_binary(i) {
        return match declared {
            Type::INT2 => value(Scalar::Int(
                portal.parameter::<i16>(i, &declared)?.unwrap_or(0).into(),
            )),
            Type::INT4 => value(Scalar::Int(
                portal.parameter::<i32>(i, &declared)?.unwrap_or(0).into(),
            )),
            Type::INT8 => value(Scalar::Int(
                portal.parameter::<i64>(i, &declared)?.unwrap_or(0),
            )),
            Type::FLOAT4 => value(Scalar::Float(
                portal.parameter::<f32>(i, &declared)?.unwrap_or(0.0).into(),
            )),
            Type::FLOAT8 => value(Scalar::Float(
                portal.parameter::<f64>(i, &declared)?.unwrap_or(0.0),
            )),
            Type::BOOL => value(Scalar::Bool(
                portal.parameter::<bool>(i, &declared)?.unwrap_or(false),
            )),
            Type::TEXT | Type::VARCHAR | Type::UNKNOWN => {
                value(Scalar::Str(String::from_utf8(raw.to_vec()).map_err(
                    |_| user_error("22021", format!("parameter ${} is not UTF-8", i + 1)),
                )?))
            }
            // PostgreSQL's binary times: microseconds (a date: days) since 2000-01-01,
            // given as the text of the type Braid reads.
            Type::TIMESTAMP | Type::TIMESTAMPTZ | Type::DATE => binary_time(&declared, &raw, i),
            other => Err(user_error(
                "0A000",
                format!(
                    "parameter ${} in binary as {}: send it as text",
                    i + 1,
                    other.name()
                ),
            )),
        };
    }
    let text = String::from_utf8(raw.to_vec())
        .map_err(|_| user_error("22021", format!("parameter ${} is not UTF-8", i + 1)))?;
    let typed = |ty: braid_sql::parse::SqlType| Ok(Param::Typed(ty, text.clone()));
    match declared {
        Type::INT2 | Type::INT4 | Type::INT8 | Type::FLOAT4 | Type::FLOAT8 | Type::NUMERIC => {
            if let Ok(n) = text.trim().parse::<i64>() {
                return value(Scalar::Int(n));
            }
            match text.trim().parse::<f64>() {
                Ok(f) => value(Scalar::Float(f)),
                Err(_) => Err(user_error(
                    "22P02",
                    format!("parameter ${}: {text:?} is not a number", i + 1),
                )),
            }
        }
        Type::BOOL => match text.as_str() {
            "t" | "true" | "TRUE" => value(Scalar::Bool(true)),
            "f" | "false" | "FALSE" => value(Scalar::Bool(false)),
            _ => Err(user_error(
                "22P02",
                format!("parameter ${}: {text:?} is not a boolean", i + 1),
            )),
        },
        Type::TIMESTAMP => typed(SqlType::Timestamp(None, TimezoneInfo::None)),
        Type::TIMESTAMPTZ => typed(SqlType::Timestamp(None, TimezoneInfo::WithTimeZone)),
        Type::DATE => typed(SqlType::Date),
        _ => value(Scalar::Str(text)),
    }
}

/// `portal`'s statement parsed, its parameters bound.
fn bound(
    portal: &Portal<String>,
) -> PgWireResult<braid_exec::error::Result<Vec<Located<Statement>>>> {
    let values = (0..portal.parameter_len())
        .map(|i| param(portal, i))
        .collect::<PgWireResult<Vec<Param>>>()?;
    Ok(parsed_with(&portal.statement.statement, &values))
}

/// `sql` parsed, `values` bound to its parameters.
fn parsed_with(sql: &str, values: &[Param]) -> braid_exec::error::Result<Vec<Located<Statement>>> {
    let mut statements = parse(sql)?;
    bind(&mut statements, values)?;
    Ok(statements)
}

impl Parser {
    /// The result columns of `sql`'s first statement (`parsed`, parameters bound), in
    /// text format.
    fn schema(
        &self,
        sql: &str,
        parsed: braid_exec::error::Result<Vec<Located<Statement>>>,
        format: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        let described = parsed.and_then(|statements| {
            let Some(first) = statements.first() else {
                return Ok(None);
            };
            let mut session = self.session.lock().unwrap_or_else(|p| p.into_inner());
            session.describe_parsed(sql, first)
        });
        let columns = described.map_err(|e| PgWireError::UserError(Box::new(pg_error(&e, sql))))?;
        let Some(columns) = columns else {
            return Ok(Vec::new());
        };
        if let Some(f) = format {
            if (0..columns.len()).any(|i| f.is_binary(i)) {
                return Err(user_error(
                    "0A000",
                    "binary results: Braid sends results as text; ask for text".into(),
                ));
            }
        }
        Ok(fields(&columns).as_ref().clone())
    }
}

#[async_trait]
impl QueryParser for Parser {
    type Statement = String;

    async fn parse_sql<C>(
        &self,
        _client: &C,
        sql: &str,
        _types: &[Option<Type>],
    ) -> PgWireResult<Option<String>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        Ok(Some(sql.to_string()))
    }

    fn get_parameter_types(&self, stmt: &String) -> PgWireResult<Vec<Type>> {
        Ok(vec![Type::UNKNOWN; parameters(stmt)])
    }

    fn get_result_schema(
        &self,
        stmt: &String,
        format: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        // Before Bind, parameters are unknown: described as NULL.
        let nulls = vec![Param::Value(Scalar::Null); parameters(stmt)];
        self.schema(stmt, parsed_with(stmt, &nulls), format)
    }
}

#[async_trait]
impl ExtendedQueryHandler for Conn {
    type Statement = String;
    type QueryParser = Parser;

    fn query_parser(&self) -> Arc<Parser> {
        Arc::new(Parser {
            session: self.session.clone(),
        })
    }

    async fn do_describe_statement<C>(
        &self,
        _client: &mut C,
        target: &StoredStatement<String>,
    ) -> PgWireResult<DescribeStatementResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = String>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let parser = self.query_parser();
        let n = parameters(&target.statement);
        let params = (0..n)
            .map(|i| {
                target
                    .parameter_types
                    .get(i)
                    .cloned()
                    .flatten()
                    .unwrap_or(Type::UNKNOWN)
            })
            .collect();
        let fields = parser.get_result_schema(&target.statement, None)?;
        Ok(DescribeStatementResponse::new(params, fields))
    }

    async fn do_describe_portal<C>(
        &self,
        _client: &mut C,
        target: &Portal<String>,
    ) -> PgWireResult<DescribePortalResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = String>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let fields = self.query_parser().schema(
            &target.statement.statement,
            bound(target)?,
            Some(&target.result_column_format),
        )?;
        Ok(DescribePortalResponse::new(fields))
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<String>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = String>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let sql = &portal.statement.statement;
        let mut outcomes = self.run(client, sql, bound(portal)?).await?;
        if outcomes.len() > 1 {
            return Ok(Response::Error(Box::new(ErrorInfo::new(
                "ERROR".into(),
                "42601".into(),
                "several statements in one extended-protocol query: send them one by one".into(),
            ))));
        }
        let Some(outcome) = outcomes.pop() else {
            return Ok(Response::EmptyQuery);
        };
        Ok(match outcome {
            Err(e) => Response::Error(Box::new(pg_error(&e, sql))),
            Ok(Outcome::Done(tag)) => Response::Execution(Tag::new(&tag)),
            Ok(Outcome::Begin) => Response::TransactionStart(Tag::new("BEGIN")),
            Ok(Outcome::End(tag)) => Response::TransactionEnd(Tag::new(&tag)),
            Ok(Outcome::Listing(l)) => listing_response(&l)?,
            Ok(Outcome::Row(columns, row)) => row_response(&columns, &row)?,
            Ok(Outcome::CopyIn(ingest)) => self.copy_in(ingest),
            // Rows go out as they come; the command's tag (or its query's error) ends it.
            Ok(Outcome::Rows(sub, copy)) => {
                let cancel = self.cancel_signal(client).await;
                match push_rows(client, sub, copy, false, self.limits, cancel).await? {
                    Ok(tag) => Response::Execution(tag),
                    Err(info) => Response::Error(Box::new(info)),
                }
            }
        })
    }
}
