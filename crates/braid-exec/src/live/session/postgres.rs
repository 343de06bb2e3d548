//! What PostgreSQL's clients and drivers send around their statements, answered as
//! PostgreSQL 16 would: `SELECT` without `FROM` (`SELECT 1` to check a connection,
//! `SELECT version()`, `current_database()`), `SHOW` of the server's settings
//! (`server_version`, `client_encoding`, `TimeZone`, ...), and `SET` of a client's own
//! (`application_name`, `extra_float_digits`, `search_path`, ...), kept per client. A
//! setting that would change what Braid's values mean (another `client_encoding`,
//! `DateStyle` or `TimeZone`) is refused by name; Braid's own settings (`SET partitions`)
//! are the session's, as before.

use super::{Client, LiveSession, Outcome};
use crate::error::Result;
use braid_plan::batch::{Batch, RowKey};
use braid_sql::catalog::Listing;
use braid_sql::parse::{Located, Show, Statement};

/// PostgreSQL's settings a client may read: name, and the value Braid gives.
const READ_ONLY: &[(&str, &str)] = &[
    ("server_version", "16.0"),
    ("server_version_num", "160000"),
    ("server_encoding", "UTF8"),
    ("integer_datetimes", "on"),
    ("standard_conforming_strings", "on"),
    ("max_identifier_length", "63"),
    ("transaction_isolation", "read committed"),
    ("default_transaction_isolation", "read committed"),
    ("transaction_read_only", "off"),
    ("is_superuser", "off"),
    ("lc_collate", "C"),
    ("lc_ctype", "C"),
    ("bytea_output", "hex"),
    ("intervalstyle", "postgres"),
];

/// Settings a client may set: name, default, and the only values Braid takes (empty:
/// any value, kept and shown back).
const SETTABLE: &[(&str, &str, &[&str])] = &[
    ("application_name", "", &[]),
    ("extra_float_digits", "1", &[]),
    ("search_path", "\"$user\", public", &[]),
    ("statement_timeout", "0", &["0"]),
    ("client_encoding", "UTF8", &["UTF8", "UTF-8", "UNICODE"]),
    ("datestyle", "ISO, MDY", &["ISO", "ISO, MDY", "ISO,MDY"]),
    ("timezone", "UTC", &["UTC", "GMT", "ETC/UTC", "Z"]),
];

impl LiveSession {
    /// Statement `p` if it is one of PostgreSQL's own a client sends (see the module
    /// doc); None for the session to run it.
    pub(super) fn postgres(
        &mut self,
        text: &str,
        st: &Located<Statement>,
        client: &mut Client,
    ) -> Option<Result<Outcome>> {
        match &st.statement {
            Statement::Query(q) => match braid_sql::values::constants(text, q) {
                Ok(None) => None,
                Ok(Some(items)) => {
                    let columns = items.iter().map(|(n, _, t)| (n.clone(), *t)).collect();
                    let values: Vec<_> = items.iter().map(|(_, v, _)| v.as_value()).collect();
                    let mut row = Batch::new(items.len());
                    row.push(RowKey::default(), &values);
                    Some(Ok(Outcome::Row(columns, row)))
                }
                Err(e) => Some(Err(e.into())),
            },
            Statement::Show(Show::Setting(name)) => {
                let value = READ_ONLY
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| v.to_string())
                    .or_else(|| {
                        let (n, default, _) = SETTABLE.iter().find(|(n, _, _)| n == name)?;
                        Some(
                            client
                                .settings
                                .get(*n)
                                .cloned()
                                .unwrap_or(default.to_string()),
                        )
                    })?;
                Some(Ok(Outcome::Listing(Listing {
                    header: vec![name.clone()],
                    rows: vec![vec![value]],
                })))
            }
            Statement::Set(set) => {
                let name = set.name.to_ascii_lowercase();
                let (n, _, taken) = SETTABLE.iter().find(|(n, _, _)| *n == name)?;
                let value = set.text();
                if !taken.is_empty() && !taken.iter().any(|t| t.eq_ignore_ascii_case(&value)) {
                    return Some(Err(super::plan_error(&format!(
                        "SET {n} = '{value}': Braid keeps {n} at {}",
                        taken[0]
                    ))));
                }
                client.settings.insert(n.to_string(), value);
                Some(Ok(Outcome::Done("SET".into())))
            }
            _ => None,
        }
    }
}
