//! Telling a client which of the rows it sent were late. A query refuses a row as late
//! while it processes it, after the statement that sent it has answered; so the rows a
//! client sent ([`Sent`]: streams and sequence numbers) are matched against the late
//! rows each query kept ([`braid_sql::run::LateRows::refused_since`]) before its next
//! statement, and the front end sends the matches as warnings (PostgreSQL's notices)
//! with that statement's answer.
//!
//! A query reading one stream keeps the stream's sequence numbers; a query over several
//! (a join of two streams) numbers the merged rows itself, so its late rows are counted
//! (`/metrics`, the late stream) but not matched to a sender.

use super::{Client, LiveSession};

/// Rows named in a warning, at most.
const NAMED: usize = 5;

impl LiveSession {
    /// Warnings for the rows `client` sent that queries refused as late since it last
    /// asked: one per query and stream, naming the first few rows (1-based positions in
    /// the stream). Each late row is told once.
    pub fn late_notices(&self, client: &mut Client) -> Vec<String> {
        let Client {
            sent, late_seen, ..
        } = client;
        if sent.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        for q in &self.queries {
            let [stream] = q.reads.as_slice() else {
                continue;
            };
            let late = q.status.shared.counters.late_rows.lock();
            let late = late.unwrap_or_else(|p| p.into_inner());
            let mut mine = Vec::new();
            for (i, rows) in late.iter().enumerate() {
                // Queries and their parts (a rescale's rows) keyed apart.
                let key = q.id.wrapping_mul(64).wrapping_add(i as u64);
                let from = late_seen.get(&key).copied().unwrap_or(0);
                let (seqs, next) = rows.refused_since(from);
                late_seen.insert(key, next);
                mine.extend(seqs.into_iter().filter(|&s| sent.holds(stream, s)));
            }
            if mine.is_empty() {
                continue;
            }
            mine.sort_unstable();
            let named: Vec<String> = mine
                .iter()
                .take(NAMED)
                .map(|s| (s + 1).to_string())
                .collect();
            let more = match mine.len() > NAMED {
                true => format!(" and {} more", mine.len() - NAMED),
                false => String::new(),
            };
            out.push(format!(
                "{} row(s) you sent to stream {stream} were late for query {} ({}): the window or join state they belonged to had closed, so they are counted as late (braid_query_late_rows_total), not in its results; rows {}{more} of the stream",
                mine.len(),
                q.number,
                q.writes,
                named.join(", "),
            ));
        }
        out
    }
}
