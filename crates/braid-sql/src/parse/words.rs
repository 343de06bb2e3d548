//! Braid's words patched into sqlparser's tokens before it parses: `CREATE STREAM`
//! and `CREATE SINK` handed to it as `TABLE`, a `WATERMARK` clause (read by
//! [`crate::watermark`]) and the `TABLE` of a window table function's argument blanked,
//! every token keeping its place in the user's text, so errors point at it.

use crate::catalog::Kind;
use crate::watermark::{self, Watermark};
use braid_plan::error::Error;
use sqlparser::dialect::GenericDialect;
use sqlparser::tokenizer::{Span, Token, TokenWithSpan, Tokenizer, Whitespace};

/// Flink's `PARTITION BY` in the SESSION window table function (which sqlparser does
/// not parse) is not built.
pub(crate) fn session_partition_by() -> Error {
    Error::NotSupported(
        "PARTITION BY in the SESSION window table function (TABLE(SESSION(TABLE t PARTITION BY k, DESCRIPTOR(time), gap))); sessions per key are written GROUP BY SESSION(time, gap), k".into(),
    )
}

/// Where `PARTITION` is when `tokens` (after SESSION's `TABLE`) start with a stream
/// name and `PARTITION BY` (Flink's form, or with a comma before it).
fn partition_by(tokens: &[TokenWithSpan]) -> Option<Span> {
    tokens
        .iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_)))
        .take(5)
        .take_while(|t| !matches!(t.token, Token::LParen | Token::RParen))
        .find(|t| {
            matches!(&t.token, Token::Word(w)
                if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("partition"))
        })
        .map(|t| t.span)
}

/// The tokens sqlparser reads, and per statement what Braid took out of them. Every
/// token keeps its place in the user's text, so errors point at it.
pub(crate) struct Patched {
    /// `STREAM` and `SINK` after `CREATE [OR REPLACE]` or `DROP` made the keyword
    /// `TABLE`; a WATERMARK clause, and `TABLE` before the stream of a window table
    /// function (`TUMBLE(TABLE calls, ...)`, which sqlparser does not parse), made
    /// whitespace.
    pub(crate) tokens: Vec<TokenWithSpan>,
    /// Per `;`-separated piece (empty ones too): Braid's word after CREATE (or DROP).
    pub(crate) kinds: Vec<Option<Kind>>,
    /// Where the PARTITION BY of a SESSION window table function is.
    pub(crate) session: Option<Span>,
    /// Per `;`-separated piece (empty ones too): its WATERMARK clause.
    pub(crate) watermarks: Vec<Option<Watermark>>,
}

/// Braid's words taken out of `text`'s tokens (see [`Patched`]); None if `text` does not
/// tokenize.
pub(crate) fn braid_words(text: &str) -> Option<Patched> {
    let mut tokens = Tokenizer::new(&GenericDialect {}, text)
        .tokenize_with_location()
        .ok()?;
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let offset = |line: u64, col: u64| -> usize {
        let start = line_starts.get(line as usize - 1).copied().unwrap_or(0);
        text[start..]
            .char_indices()
            .nth(col as usize - 1)
            .map_or(text.len(), |(i, _)| start + i)
    };
    // Token index ranges that become whitespace, and tokens that become TABLE.
    let mut blank: Vec<std::ops::Range<usize>> = Vec::new();
    let mut table: Vec<usize> = Vec::new();
    let mut watermarks: Vec<Option<Watermark>> = vec![None];
    let mut skip_to = 0;
    let mut kinds: Vec<Option<Kind>> = vec![None];
    // Just after CREATE [OR REPLACE] or DROP.
    let mut after_create = false;
    let mut session = None;
    // The two tokens before this one (whitespace skipped), and the last one's index.
    let mut before: [Option<&Token>; 2] = [None, None];
    let mut last_solid: Option<usize> = None;
    for (i, t) in tokens.iter().enumerate() {
        if i < skip_to {
            continue;
        }
        if let Token::Whitespace(_) = &t.token {
            continue;
        }
        let in_stream = kinds.last() == Some(&Some(Kind::Stream));
        // Looked for only in CREATE STREAM (looking at every token made a long INSERT
        // quadratic: the clause's reader lists the tokens after it).
        let clause = in_stream
            .then(|| watermark::clause(&tokens, i, text, &offset))
            .flatten();
        if let Some((w, _, end)) = clause {
            // With the comma before the clause, or (first in the list) the one after.
            match last_solid {
                Some(k) if tokens[k].token == Token::Comma => blank.push(k..end),
                _ if tokens.get(end).map(|t| &t.token) == Some(&Token::Comma) => {
                    blank.push(i..end + 1)
                }
                _ => blank.push(i..end),
            }
            if let Some(last) = watermarks.last_mut() {
                *last = Some(w);
            }
            skip_to = end;
            continue;
        }
        if let (Token::Word(w), Some(Token::LParen), Some(Token::Word(f))) =
            (&t.token, before[1], before[0])
        {
            let tvf = ["tumble", "hop", "cumulate", "session"]
                .iter()
                .any(|n| f.value.eq_ignore_ascii_case(n));
            if tvf && w.value.eq_ignore_ascii_case("table") && w.quote_style.is_none() {
                blank.push(i..i + 1);
                if f.value.eq_ignore_ascii_case("session") {
                    session = session.or_else(|| partition_by(&tokens[i + 1..]));
                }
            }
        }
        before = [before[1], Some(&t.token)];
        last_solid = Some(i);
        match &t.token {
            Token::SemiColon => {
                kinds.push(None);
                watermarks.push(None);
                after_create = false;
                continue;
            }
            Token::Word(w) if after_create => {
                let kind = match w.value.to_ascii_uppercase().as_str() {
                    "STREAM" => Some(Kind::Stream),
                    "SINK" => Some(Kind::Sink),
                    _ => None,
                };
                if let Some(k) = kind {
                    table.push(i);
                    if let Some(last) = kinds.last_mut() {
                        *last = Some(k);
                    }
                }
            }
            _ => {}
        }
        after_create = match &t.token {
            Token::Word(w) => {
                let w = w.value.to_ascii_uppercase();
                w == "CREATE" || w == "DROP" || (after_create && (w == "OR" || w == "REPLACE"))
            }
            _ => false,
        };
    }
    for k in table {
        tokens[k].token = Token::make_keyword("TABLE");
    }
    for k in blank.into_iter().flatten() {
        if !matches!(tokens[k].token, Token::EOF) {
            tokens[k].token = Token::Whitespace(Whitespace::Space);
        }
    }
    Some(Patched {
        tokens,
        kinds,
        session,
        watermarks,
    })
}
