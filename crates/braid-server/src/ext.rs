//! The extended query protocol (Parse, Bind, Describe, Execute), which psycopg, JDBC
//! and most drivers use. A statement is its text; `$n` parameters are bound by
//! writing each value into the text as a literal of its type (a string quoted), so
//! what runs is an ordinary statement of the live session. Results are text; a client
//! asking for binary results is refused with a message.

use crate::pg::{fields, listing_response, pg_error, push_rows, row_response, Conn, Shared};
use async_trait::async_trait;
use braid_exec::live::Outcome;
use braid_sql::split::{statements, Lead};
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

/// The `$n` placeholders of `sql`: (byte range, n).
fn placeholders(sql: &str) -> Vec<(std::ops::Range<usize>, usize)> {
    let Some(pieces) = statements(sql) else {
        return Vec::new();
    };
    pieces
        .iter()
        .flat_map(|p| p.tokens.iter())
        .filter_map(|(t, at)| match t {
            Lead::Symbol(s) if s.starts_with('$') => {
                let n = s[1..].parse::<usize>().ok()?;
                Some((*at..*at + s.len(), n))
            }
            _ => None,
        })
        .collect()
}

/// `sql` with each `$n` replaced by `values[n - 1]`.
fn bind(sql: &str, values: &[String]) -> PgWireResult<String> {
    let mut out = String::with_capacity(sql.len());
    let mut last = 0;
    for (range, n) in placeholders(sql) {
        let v = values.get(n.wrapping_sub(1)).ok_or_else(|| {
            user_error(
                "08P01",
                format!("${n} has no value ({} were bound)", values.len()),
            )
        })?;
        out.push_str(&sql[last..range.start]);
        out.push_str(v);
        last = range.end;
    }
    out.push_str(&sql[last..]);
    Ok(out)
}

/// Parameter `i` of `portal` as an SQL literal.
fn literal(portal: &Portal<String>, i: usize) -> PgWireResult<String> {
    let declared = portal
        .statement
        .parameter_types
        .get(i)
        .cloned()
        .flatten()
        .unwrap_or(Type::UNKNOWN);
    let Some(raw) = portal.parameters.get(i).cloned().flatten() else {
        return Ok("NULL".into());
    };
    let number = |v: String| -> PgWireResult<String> {
        if let Ok(n) = v.trim().parse::<i64>() {
            return Ok(int_literal(n));
        }
        match v.trim().parse::<f64>() {
            Ok(f) => Ok(float_literal(f)),
            Err(_) => Err(user_error(
                "22P02",
                format!("parameter ${}: {v:?} is not a number", i + 1),
            )),
        }
    };
    if portal.parameter_format.is_binary(i) {
        return Ok(match declared {
            Type::INT2 => int_literal(portal.parameter::<i16>(i, &declared)?.unwrap_or(0).into()),
            Type::INT4 => int_literal(portal.parameter::<i32>(i, &declared)?.unwrap_or(0).into()),
            Type::INT8 => int_literal(portal.parameter::<i64>(i, &declared)?.unwrap_or(0)),
            Type::FLOAT4 => {
                float_literal(portal.parameter::<f32>(i, &declared)?.unwrap_or(0.0).into())
            }
            Type::FLOAT8 => float_literal(portal.parameter::<f64>(i, &declared)?.unwrap_or(0.0)),
            Type::BOOL => match portal.parameter::<bool>(i, &declared)?.unwrap_or(false) {
                true => "TRUE".into(),
                false => "FALSE".into(),
            },
            Type::TEXT | Type::VARCHAR | Type::UNKNOWN => {
                quote(&String::from_utf8(raw.to_vec()).map_err(|_| {
                    user_error("22021", format!("parameter ${} is not UTF-8", i + 1))
                })?)
            }
            other => {
                return Err(user_error(
                    "0A000",
                    format!(
                        "parameter ${} in binary as {}: send it as text",
                        i + 1,
                        other.name()
                    ),
                ))
            }
        });
    }
    let text = String::from_utf8(raw.to_vec())
        .map_err(|_| user_error("22021", format!("parameter ${} is not UTF-8", i + 1)))?;
    Ok(match declared {
        Type::INT2 | Type::INT4 | Type::INT8 | Type::FLOAT4 | Type::FLOAT8 | Type::NUMERIC => {
            number(text)?
        }
        Type::BOOL => match text.as_str() {
            "t" | "true" | "TRUE" => "TRUE".into(),
            "f" | "false" | "FALSE" => "FALSE".into(),
            _ => {
                return Err(user_error(
                    "22P02",
                    format!("parameter ${}: {text:?} is not a boolean", i + 1),
                ))
            }
        },
        Type::TIMESTAMP => format!("TIMESTAMP {}", quote(&text)),
        Type::TIMESTAMPTZ => format!("TIMESTAMPTZ {}", quote(&text)),
        Type::DATE => format!("DATE {}", quote(&text)),
        _ => quote(&text),
    })
}

/// An int as a literal that reads as that value wherever `$n` stood: a negative one in
/// parentheses (after a `-`, `-5` would start a comment: `a --5`).
fn int_literal(n: i64) -> String {
    match n < 0 {
        true => format!("({n})"),
        false => n.to_string(),
    }
}

/// A float as a literal that reads back to the same value: shortest round-trip digits,
/// a negative one in parentheses, NaN and the infinities as a cast of their text.
fn float_literal(f: f64) -> String {
    if !f.is_finite() {
        return format!("CAST('{f}' AS DOUBLE PRECISION)");
    }
    let digits = format!("{f:?}");
    match f.is_sign_negative() {
        true => format!("({digits})"),
        false => digits,
    }
}

/// `s` as a quoted SQL string.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The bound text of `portal`'s statement.
fn bound(portal: &Portal<String>) -> PgWireResult<String> {
    let values = (0..portal.parameter_len())
        .map(|i| literal(portal, i))
        .collect::<PgWireResult<Vec<String>>>()?;
    bind(&portal.statement.statement, &values)
}

impl Parser {
    /// The result columns of `sql` (parameters bound), in text format.
    fn schema(&self, sql: &str, format: Option<&Format>) -> PgWireResult<Vec<FieldInfo>> {
        let described = {
            let mut session = self.session.lock().unwrap_or_else(|p| p.into_inner());
            session.describe(sql)
        };
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
        let n = placeholders(stmt).iter().map(|p| p.1).max().unwrap_or(0);
        Ok(vec![Type::UNKNOWN; n])
    }

    fn get_result_schema(
        &self,
        stmt: &String,
        format: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        // Before Bind, parameters are unknown: described as NULL.
        let n = placeholders(stmt).iter().map(|p| p.1).max().unwrap_or(0);
        let sql = bind(stmt, &vec!["NULL".to_string(); n])?;
        self.schema(&sql, format)
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
        let n = placeholders(&target.statement)
            .iter()
            .map(|p| p.1)
            .max()
            .unwrap_or(0);
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
        let sql = bound(target)?;
        let fields = self
            .query_parser()
            .schema(&sql, Some(&target.result_column_format))?;
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
        let sql = bound(portal)?;
        let mut outcomes = self.execute(client, &sql).await?;
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
            Err(e) => Response::Error(Box::new(pg_error(&e, &sql))),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_bound_outside_strings() {
        let sql = "INSERT INTO s VALUES ($1, '$2', $2)";
        assert_eq!(
            bind(sql, &["1".into(), "'a''b'".into()]).unwrap(),
            "INSERT INTO s VALUES (1, '$2', 'a''b')"
        );
        assert!(bind("SELECT $3", &["1".into()]).is_err());
    }

    /// A bound number reads as its value wherever it stands: after a `-` a negative
    /// one does not start a comment, NaN is not a column name.
    #[test]
    fn bound_numbers_keep_their_value() {
        let sql = "SELECT a -$1, $2, $3 FROM t";
        let values = [
            int_literal(-5),
            float_literal(-2.5),
            float_literal(f64::NAN),
        ];
        assert_eq!(
            bind(sql, &values).unwrap(),
            "SELECT a -(-5), (-2.5), CAST('NaN' AS DOUBLE PRECISION) FROM t"
        );
        assert_eq!(float_literal(1e300), "1e300");
        assert_eq!(
            float_literal(f64::NEG_INFINITY),
            "CAST('-inf' AS DOUBLE PRECISION)"
        );
    }
}
