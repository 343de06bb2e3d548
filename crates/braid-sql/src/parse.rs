//! One way in: a text becomes its statements, each a [`Statement`] (one closed enum)
//! with its place in the text. sqlparser parses them all; Braid's words are patched into
//! its tokens first (`CREATE STREAM` and `CREATE SINK` read as `TABLE`, a `WATERMARK`
//! clause and the `TABLE` of a window table function cut out: `parse/words.rs`), and
//! Braid's own statements (`SUBSCRIBE`, `SHOW QUERIES`, `DROP QUERY n`, `ALTER ... SET
//! PARALLELISM n`, `EXPLAIN ANALYZE QUERY n`, `COPY (SUBSCRIBE ...) TO STDOUT`) are
//! read from the same tokens with sqlparser's parser for their parts.
//! Every token keeps its place in the user's text, so every error points at it.
//!
//! The library's scripts and the server's sessions both take these statements: each is
//! one `match` over [`Statement`] (`statement.rs` for the script language,
//! `braid-exec`'s live session for the server's own).

use crate::catalog::Kind;
use crate::copy::{CopyFormat, CopyIn};
use crate::located::{parse_error, At};
use crate::watermark::Watermark;

mod words;
use braid_plan::batch::Scalar;
use braid_plan::error::{Error, Result};
use sqlparser::ast::{self, Spanned, VisitMut, VisitorMut};
use sqlparser::dialect::{GenericDialect, PostgreSqlDialect};
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Span, Token, TokenWithSpan};
use std::ops::{ControlFlow, Range};

pub use sqlparser::ast::{DataType as SqlType, Insert, ObjectName, Query, TimezoneInfo};

/// A statement and where it is in the text it came from.
#[derive(Clone, Debug)]
pub struct Located<T> {
    pub statement: T,
    /// Byte range of the statement in the text (without its `;`).
    pub range: Range<usize>,
    /// Where it is (line and column), for errors about the statement as a whole.
    pub span: Span,
    /// The statement written out again with its `$n` parameters bound (what a cluster's
    /// followers and the durable catalog run), when some were.
    pub bound: Option<String>,
}

/// Every statement Braid takes, in scripts and in the server.
#[derive(Clone, Debug)]
pub enum Statement {
    /// `CREATE [OR REPLACE] STREAM | SINK | TABLE name ...`: a declaration.
    Declare(Box<Declare>),
    /// `CREATE STREAM name AS query` or `CREATE MATERIALIZED VIEW name AS query`: a
    /// running query whose output is a stream others read (the server's).
    CreateAs(Box<CreateAs>),
    /// `CREATE [OR REPLACE] VIEW name AS query`: a named query in the catalog.
    CreateView(Box<ast::CreateView>),
    /// `CREATE FUNCTION ... LANGUAGE python`.
    CreateFunction(Box<ast::CreateFunction>),
    /// `DROP FUNCTION name`.
    DropFunction(Box<ast::DropFunction>),
    /// `DROP STREAM | SINK | TABLE | VIEW | MATERIALIZED VIEW [IF EXISTS] name, ...`.
    Drop(Drop),
    /// `DROP QUERY n`: stops the server's query n.
    DropQuery(usize),
    /// `ALTER MATERIALIZED VIEW | STREAM | VIEW name | QUERY k SET PARALLELISM n`.
    Alter(Alter),
    /// `SET [SESSION | LOCAL] name { = | TO } value, ...`.
    Set(Set),
    /// `SHOW what`.
    Show(Show),
    /// `DESCRIBE name`.
    Describe(ast::ObjectName),
    /// A query (`SELECT ...`, `WITH ...`).
    Query(Box<ast::Query>),
    /// `INSERT INTO name [(columns)] VALUES ...` or `INSERT INTO name SELECT ...`.
    Insert(Box<ast::Insert>),
    /// `COPY stream FROM STDIN [WITH (...)]`.
    CopyIn(CopyIn),
    /// `COPY (query | SUBSCRIBE ...) TO STDOUT [WITH (FORMAT csv | text, HEADER)]`.
    CopyOut(Box<CopyOut>),
    /// `SUBSCRIBE [TO] name [WHERE predicate]`.
    Subscribe(Subscribe),
    /// `EXPLAIN query` (or `EXPLAIN INSERT INTO sink SELECT ...`).
    Explain(Box<Statement>),
    /// `EXPLAIN ANALYZE QUERY n`.
    ExplainAnalyze(usize),
    /// `BEGIN`, `START TRANSACTION`.
    Begin,
    /// `COMMIT`, `END`.
    Commit,
    /// `ROLLBACK`, `ABORT`.
    Rollback,
}

/// `CREATE STREAM | SINK | TABLE`: sqlparser's `CREATE TABLE` with Braid's word and
/// WATERMARK clause.
#[derive(Clone, Debug)]
pub struct Declare {
    pub kind: Kind,
    pub table: ast::CreateTable,
    pub(crate) watermark: Option<Watermark>,
}

/// `CREATE STREAM name AS query` (`view` false) or `CREATE MATERIALIZED VIEW name AS
/// query` (`view` true).
#[derive(Clone, Debug)]
pub struct CreateAs {
    /// Lower case.
    pub name: String,
    /// Where the name is.
    pub name_span: Span,
    pub view: bool,
    pub query: Box<ast::Query>,
}

/// What a DROP names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropKind {
    Stream,
    Sink,
    Table,
    View,
    MaterializedView,
}

/// `DROP kind [IF EXISTS] names`.
#[derive(Clone, Debug)]
pub struct Drop {
    pub kind: DropKind,
    pub names: Vec<ast::ObjectName>,
    pub if_exists: bool,
}

/// What `ALTER ... SET PARALLELISM n` changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AlterTarget {
    /// The query making stream (or materialized view) `name` (lower case); the
    /// statement's words (`ALTER STREAM`, ...) for its tag.
    Making(String, &'static str),
    /// Query `k` of SHOW QUERIES.
    Query(usize),
}

/// `ALTER ... SET PARALLELISM n`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alter {
    pub target: AlterTarget,
    pub partitions: u32,
}

impl Alter {
    /// The command tag.
    pub fn tag(&self) -> &'static str {
        match &self.target {
            AlterTarget::Making(_, tag) => tag,
            AlterTarget::Query(_) => "ALTER QUERY",
        }
    }
}

/// `SET name = values`.
#[derive(Clone, Debug)]
pub struct Set {
    /// As written (`partitions`, `application_name`).
    pub name: String,
    pub values: Vec<ast::Expr>,
}

impl Set {
    /// The value as a client setting keeps it: one string literal's text, or the
    /// values as written.
    pub fn text(&self) -> String {
        match self.values.as_slice() {
            [ast::Expr::Value(v)] => match &v.value {
                ast::Value::SingleQuotedString(s) => s.clone(),
                other => other.to_string(),
            },
            more => more
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
}

/// What SHOW lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Show {
    Streams,
    Sinks,
    Tables,
    Views,
    Queries,
    /// The server's TCP and file producers.
    Feeds,
    /// A setting (lower case): PostgreSQL's (`server_version`) or a client's.
    Setting(String),
}

/// `COPY (inner) TO STDOUT`: `inner` a query or a SUBSCRIBE.
#[derive(Clone, Debug)]
pub struct CopyOut {
    pub inner: Statement,
    pub format: CopyFormat,
    pub header: bool,
}

/// `SUBSCRIBE [TO] name [WHERE predicate]`.
#[derive(Clone, Debug)]
pub struct Subscribe {
    /// As written.
    pub name: String,
    pub filter: Option<Box<ast::Expr>>,
}

impl Statement {
    /// Whether it only reads (lists, explains, or sends rows to its client): a cluster's
    /// followers need not run it, and a transaction block takes it.
    pub fn reads(&self) -> bool {
        matches!(
            self,
            Statement::Show(_)
                | Statement::Describe(_)
                | Statement::Explain(_)
                | Statement::ExplainAnalyze(_)
                | Statement::Subscribe(_)
        )
    }

    /// Whether it is `INSERT ... VALUES` (rows, not a query).
    pub fn inserts_values(&self) -> bool {
        match self {
            Statement::Insert(i) => i
                .source
                .as_ref()
                .is_some_and(|q| matches!(q.body.as_ref(), ast::SetExpr::Values(_))),
            _ => false,
        }
    }

    /// The name (lower case) of what it declares or makes, if it does.
    pub fn makes(&self) -> Option<String> {
        let name = match self {
            Statement::Declare(d) => d.table.name.to_string(),
            Statement::CreateAs(c) => c.name.clone(),
            Statement::CreateView(v) => v.name.to_string(),
            Statement::CreateFunction(f) => f.name.to_string(),
            _ => return None,
        };
        Some(name.to_ascii_lowercase())
    }

    /// Its command tag's words (`CREATE STREAM`, `SET`, ...).
    pub fn tag(&self) -> String {
        match self {
            Statement::Declare(d) => format!("CREATE {}", d.kind.word().to_ascii_uppercase()),
            Statement::CreateAs(c) if c.view => "CREATE MATERIALIZED VIEW".into(),
            Statement::CreateAs(_) => "CREATE STREAM".into(),
            Statement::CreateView(_) => "CREATE VIEW".into(),
            Statement::CreateFunction(_) => "CREATE FUNCTION".into(),
            Statement::DropFunction(_) => "DROP FUNCTION".into(),
            Statement::Drop(d) => match d.kind {
                DropKind::Stream => "DROP STREAM",
                DropKind::Sink => "DROP SINK",
                DropKind::Table => "DROP TABLE",
                DropKind::View => "DROP VIEW",
                DropKind::MaterializedView => "DROP MATERIALIZED VIEW",
            }
            .into(),
            Statement::DropQuery(_) => "DROP QUERY".into(),
            Statement::Alter(a) => a.tag().into(),
            Statement::Set(_) => "SET".into(),
            Statement::Show(_) => "SHOW".into(),
            Statement::Describe(_) => "DESCRIBE".into(),
            Statement::Query(_) => "SELECT".into(),
            Statement::Insert(_) => "INSERT".into(),
            Statement::CopyIn(_) | Statement::CopyOut(_) => "COPY".into(),
            Statement::Subscribe(_) => "SUBSCRIBE".into(),
            Statement::Explain(_) | Statement::ExplainAnalyze(_) => "EXPLAIN".into(),
            Statement::Begin => "BEGIN".into(),
            Statement::Commit => "COMMIT".into(),
            Statement::Rollback => "ROLLBACK".into(),
        }
    }
}

impl Located<Statement> {
    /// The statement's own text: `whole` with everything else blanked (newlines kept),
    /// so that parsed again it reports the positions it has in `whole`; or, with bound
    /// parameters, the bound statement written out.
    pub fn text(&self, whole: &str) -> String {
        match &self.bound {
            Some(b) => b.clone(),
            None => alone(whole, self.range.clone()),
        }
    }
}

/// `text` with everything outside `range` blanked (newlines kept), so that a
/// statement parsed alone reports the positions it has in the whole text.
pub fn alone(text: &str, range: Range<usize>) -> String {
    text.char_indices()
        .map(|(i, c)| match range.contains(&i) || c == '\n' {
            true => c,
            false => ' ',
        })
        .collect()
}

/// The statements of `text`, in order (empty ones left out).
pub fn parse(text: &str) -> Result<Vec<Located<Statement>>> {
    let Some(mut patched) = words::braid_words(text) else {
        // Text that does not tokenize: sqlparser words the error.
        return Err(match Parser::parse_sql(&GenericDialect {}, text) {
            Err(e) => parse_error(text, &e.to_string()),
            Ok(_) => Error::Plan("the text does not tokenize".into()),
        });
    };
    if let Some(at) = patched.session {
        return Err(words::session_partition_by().at(text, at));
    }
    // The `;`-separated pieces, each with the `;` that ends it (the last may have none).
    let mut pieces: Vec<(Vec<TokenWithSpan>, Option<TokenWithSpan>)> = vec![Default::default()];
    for t in std::mem::take(&mut patched.tokens) {
        match t.token {
            Token::SemiColon => {
                if let Some(last) = pieces.last_mut() {
                    last.1 = Some(t);
                }
                pieces.push(Default::default());
            }
            Token::EOF => {}
            _ => {
                if let Some(last) = pieces.last_mut() {
                    last.0.push(t);
                }
            }
        }
    }
    let mut offsets = Offsets::new(text);
    let mut out = Vec::new();
    for (k, (tokens, end)) in pieces.into_iter().enumerate() {
        // Empty pieces (`;;`, a comment alone) are no statement.
        if tokens
            .iter()
            .all(|t| matches!(t.token, Token::Whitespace(_)))
        {
            continue;
        }
        let word = patched.kinds.get(k).copied().flatten();
        let watermark = patched.watermarks.get_mut(k).and_then(Option::take);
        out.push(located(text, &mut offsets, tokens, end, (word, watermark))?);
    }
    Ok(out)
}

/// One statement of `text` from its tokens.
fn located(
    text: &str,
    offsets: &mut Offsets,
    tokens: Vec<TokenWithSpan>,
    end: Option<TokenWithSpan>,
    (word, watermark): (Option<Kind>, Option<Watermark>),
) -> Result<Located<Statement>> {
    let solid: Vec<&TokenWithSpan> = tokens
        .iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_)))
        .collect();
    let (first, last) = match (solid.first(), solid.last()) {
        (Some(f), Some(l)) => (f.span, l.span),
        _ => return Err(Error::Internal("an empty statement".into())),
    };
    let mut span = first.union(&last);
    let range = offsets.at(first.start.line, first.start.column)
        ..offsets.at(last.end.line, last.end.column);
    let mut own = None;
    let statement = one(text, tokens, end, (word, watermark), &mut own)?;
    // A statement sqlparser parsed is where its tree says (a CREATE at its name).
    if let Some(s) = own {
        span = s;
    }
    Ok(Located {
        statement,
        range,
        span,
        bound: None,
    })
}

/// Byte offsets of (line, column) positions in a text, asked for in order: a cursor
/// moves forward from the last one (counting a line's characters from its start each
/// time made many statements on one long line quadratic).
struct Offsets<'a> {
    text: &'a str,
    /// The last position found: line, column, byte offset.
    cursor: (u64, u64, usize),
}

impl Offsets<'_> {
    fn new(text: &str) -> Offsets<'_> {
        Offsets {
            text,
            cursor: (1, 1, 0),
        }
    }

    fn at(&mut self, line: u64, column: u64) -> usize {
        let (mut l, mut c, mut at) = self.cursor;
        if (line, column) < (l, c) {
            (l, c, at) = (1, 1, 0);
        }
        let mut chars = self.text[at..].chars();
        while (l, c) < (line, column) {
            match chars.next() {
                Some('\n') => (l, c) = (l + 1, 1),
                Some(_) => c += 1,
                None => break,
            }
            at = self.text.len() - chars.as_str().len();
        }
        self.cursor = (l, c, at);
        at
    }
}

/// The upper-cased word of an unquoted word token.
fn word_of(t: &TokenWithSpan) -> Option<String> {
    match &t.token {
        Token::Word(w) if w.quote_style.is_none() => Some(w.value.to_ascii_uppercase()),
        _ => None,
    }
}

/// A parser over `tokens` (the statement's, or a part of them).
fn parser(tokens: &[TokenWithSpan]) -> Parser<'static> {
    Parser::new(&GenericDialect {}).with_tokens_with_locations(tokens.to_vec())
}

/// sqlparser's error, located in `text`.
fn located_error(text: &str) -> impl Fn(sqlparser::parser::ParserError) -> Error + '_ {
    move |e| parse_error(text, &e.to_string())
}

/// Index of the token after the `n`-th solid (not whitespace) token of `tokens`.
fn after_solid(tokens: &[TokenWithSpan], n: usize) -> usize {
    let mut seen = 0;
    for (i, t) in tokens.iter().enumerate() {
        if !matches!(t.token, Token::Whitespace(_)) {
            seen += 1;
            if seen == n {
                return i + 1;
            }
        }
    }
    tokens.len()
}

/// One statement from its tokens (Braid's words patched: see the module's text), and
/// the `;` that ends it, if one does (sqlparser's errors point at it). `own`: where
/// sqlparser's tree says the statement is, when sqlparser parsed it.
fn one(
    text: &str,
    tokens: Vec<TokenWithSpan>,
    end: Option<TokenWithSpan>,
    (word, watermark): (Option<Kind>, Option<Watermark>),
    own: &mut Option<Span>,
) -> Result<Statement> {
    let solid: Vec<&TokenWithSpan> = tokens
        .iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_)))
        .collect();
    let w = |i: usize| solid.get(i).and_then(|t| word_of(t));
    let number = |i: usize| match solid.get(i).map(|t| &t.token) {
        Some(Token::Number(n, _)) => n.parse::<u64>().ok(),
        _ => None,
    };
    let span = solid.first().map_or(Span::empty(), |f| {
        f.span.union(&solid[solid.len() - 1].span)
    });
    let refuse = |e: Error| Err(e.at(text, span));
    match (w(0).as_deref(), w(1).as_deref()) {
        (Some("SUBSCRIBE"), _) => subscribe(text, &tokens[after_solid(&tokens, 1)..]),
        (Some("BEGIN"), _) | (Some("START"), Some("TRANSACTION")) => Ok(Statement::Begin),
        (Some("COMMIT" | "END"), _) => Ok(Statement::Commit),
        (Some("ROLLBACK" | "ABORT"), _) => Ok(Statement::Rollback),
        (Some("SHOW"), _) => show(text, &solid),
        (Some("EXPLAIN"), Some("ANALYZE")) => match (w(2).as_deref(), number(3), solid.len()) {
            (Some("QUERY"), Some(n), 4) => Ok(Statement::ExplainAnalyze(n as usize)),
            _ => refuse(Error::NotSupported(
                "EXPLAIN ANALYZE of a query that is not running: in the server, start it \
                 (CREATE MATERIALIZED VIEW, SELECT) and EXPLAIN ANALYZE QUERY n, n from SHOW QUERIES"
                    .into(),
            )),
        },
        (Some("EXPLAIN"), _) => {
            let inner = one(text, tokens[after_solid(&tokens, 1)..].to_vec(), end, (word, watermark), own);
            match inner {
                Ok(s @ (Statement::Query(_) | Statement::Insert(_))) => {
                    Ok(Statement::Explain(Box::new(s)))
                }
                Ok(Statement::Describe(_)) | Err(Error::Parse { .. }) if solid.len() == 2 => {
                    refuse(Error::NotSupported(
                        "EXPLAIN takes a query; DESCRIBE name describes a stream, table, sink or view"
                            .into(),
                    ))
                }
                Ok(_) => refuse(Error::NotSupported(
                    "EXPLAIN of a statement that is not a query: EXPLAIN takes SELECT ... or INSERT INTO sink SELECT ..."
                        .into(),
                )),
                Err(e) => Err(e),
            }
        }
        (Some("DROP"), Some("QUERY")) => match (number(2), solid.len()) {
            (Some(n), 3) => Ok(Statement::DropQuery(n as usize)),
            _ => refuse(Error::Plan(
                "DROP QUERY n: n is a query's number in SHOW QUERIES".into(),
            )),
        },
        (Some("ALTER"), Some("MATERIALIZED" | "STREAM" | "VIEW" | "QUERY")) => alter(text, &solid, span),
        (Some("COPY"), _) if matches!(solid.get(1).map(|t| &t.token), Some(Token::LParen)) => {
            copy_out(text, &tokens)
        }
        (Some("COPY"), _) => {
            let st = Parser::new(&PostgreSqlDialect {})
                .with_tokens_with_locations(tokens)
                .parse_statement()
                .map_err(located_error(text))?;
            crate::copy::copy_in_of(&st).map(Statement::CopyIn).at(text, span)
        }
        (Some("DESCRIBE" | "DESC"), _) => {
            let mut p = parser(&tokens[after_solid(&tokens, 1)..]);
            let name = p.parse_object_name(false).map_err(located_error(text))?;
            p.expect_token(&Token::EOF).map_err(located_error(text))?;
            Ok(Statement::Describe(name))
        }
        _ => {
            let mut tokens = tokens;
            tokens.extend(end);
            let mut p = Parser::new(&GenericDialect {}).with_tokens_with_locations(tokens);
            let st = p.parse_statement().map_err(located_error(text))?;
            let _ = p.consume_token(&Token::SemiColon);
            p.expect_token(&Token::EOF).map_err(located_error(text))?;
            *own = Some(st.span()).filter(|s| *s != Span::empty());
            of_sqlparser(text, st, word, watermark, span)
        }
    }
}

/// A statement sqlparser parsed, as Braid takes it.
fn of_sqlparser(
    text: &str,
    st: ast::Statement,
    word: Option<Kind>,
    watermark: Option<Watermark>,
    span: Span,
) -> Result<Statement> {
    if let (Some(w), false) = (&watermark, matches!(st, ast::Statement::CreateTable(_))) {
        return Err(Error::Internal(format!(
            "a WATERMARK outside CREATE STREAM: {w:?}"
        )));
    }
    let refuse = |what: String| Err(Error::NotSupported(what).at(text, span));
    Ok(match st {
        ast::Statement::CreateTable(ct) if ct.query.is_some() && word == Some(Kind::Stream) => {
            let name = ct.name.to_string().to_ascii_lowercase();
            let plain = ct.columns.is_empty()
                && matches!(ct.table_options, ast::CreateTableOptions::None)
                && !ct.or_replace
                && !ct.if_not_exists;
            if !plain {
                return refuse(
                    "CREATE STREAM name AS SELECT ...: columns, options or OR REPLACE with AS are not taken".into(),
                );
            }
            let Some(query) = ct.query else {
                return refuse("CREATE STREAM ... AS without a query".into());
            };
            Statement::CreateAs(Box::new(CreateAs {
                name,
                name_span: ct.name.span(),
                view: false,
                query,
            }))
        }
        ast::Statement::CreateTable(ct) => Statement::Declare(Box::new(Declare {
            kind: word.unwrap_or(Kind::Table),
            table: ct,
            watermark,
        })),
        ast::Statement::CreateView(cv) if cv.materialized => {
            let plain = cv.columns.is_empty()
                && matches!(cv.options, ast::CreateTableOptions::None)
                && !cv.or_replace
                && !cv.if_not_exists;
            if !plain {
                return refuse(
                    "CREATE MATERIALIZED VIEW name AS SELECT ...: columns, options, IF NOT EXISTS or OR REPLACE are not taken".into(),
                );
            }
            Statement::CreateAs(Box::new(CreateAs {
                name: cv.name.to_string().to_ascii_lowercase(),
                name_span: cv.name.span(),
                view: true,
                query: cv.query,
            }))
        }
        ast::Statement::CreateView(cv) => Statement::CreateView(Box::new(cv)),
        ast::Statement::CreateFunction(cf) => Statement::CreateFunction(Box::new(cf)),
        ast::Statement::DropFunction(df) => Statement::DropFunction(Box::new(df)),
        ast::Statement::Set(ast::Set::SingleAssignment {
            variable,
            values,
            hivevar: false,
            ..
        }) => Statement::Set(Set {
            name: variable.to_string(),
            values,
        }),
        ast::Statement::Query(q) => Statement::Query(q),
        ast::Statement::Insert(i) => Statement::Insert(Box::new(i)),
        ast::Statement::Drop {
            object_type,
            if_exists,
            names,
            cascade: false,
            restrict: false,
            purge: false,
            temporary: false,
            table: None,
        } => {
            let kind = match (object_type, word) {
                (ast::ObjectType::Table, Some(Kind::Stream)) => DropKind::Stream,
                (ast::ObjectType::Table, Some(Kind::Sink)) => DropKind::Sink,
                (ast::ObjectType::Table, _) => DropKind::Table,
                (ast::ObjectType::View, _) => DropKind::View,
                (ast::ObjectType::MaterializedView, _) => DropKind::MaterializedView,
                (other, _) => return refuse(format!("DROP {other}; Braid drops STREAM, SINK, TABLE, VIEW, MATERIALIZED VIEW, FUNCTION and QUERY n")),
            };
            Statement::Drop(Drop {
                kind,
                names,
                if_exists,
            })
        }
        other => {
            return refuse(format!(
                "statement `{}`; Braid runs CREATE [OR REPLACE] STREAM/TABLE/SINK/VIEW/FUNCTION, DROP, SET, \
                 SHOW, DESCRIBE, INSERT INTO ... SELECT and SELECT",
                other
                    .to_string()
                    .split_whitespace()
                    .take(3)
                    .collect::<Vec<_>>()
                    .join(" ")
            ))
        }
    })
}

/// What SHOW takes, for errors.
const SHOWN: &str = "SHOW takes STREAMS, SINKS, TABLES, VIEWS or QUERIES";

/// `SHOW what`.
fn show(text: &str, solid: &[&TokenWithSpan]) -> Result<Statement> {
    let [_, what] = solid else {
        let span = solid
            .iter()
            .skip(1)
            .fold(solid[0].span, |s, t| s.union(&t.span));
        let words: Vec<String> = solid.iter().map(|t| t.token.to_string()).collect();
        return Err(Error::NotSupported(format!("`{}`; {SHOWN}", words.join(" "))).at(text, span));
    };
    let name = match &what.token {
        Token::Word(w) => w.value.clone(),
        other => {
            return Err(Error::NotSupported(format!("SHOW {other}; {SHOWN}")).at(text, what.span))
        }
    };
    Ok(Statement::Show(match name.to_ascii_uppercase().as_str() {
        "STREAMS" => Show::Streams,
        "SINKS" => Show::Sinks,
        "TABLES" => Show::Tables,
        "VIEWS" => Show::Views,
        "QUERIES" => Show::Queries,
        "FEEDS" => Show::Feeds,
        _ => Show::Setting(name.to_ascii_lowercase()),
    }))
}

/// The error for `SHOW name` of a setting the session does not keep.
pub fn show_unknown(name: &str) -> Error {
    Error::NotSupported(format!("SHOW {name}; {SHOWN}"))
}

/// `SUBSCRIBE [TO] name [WHERE predicate]` (`tokens`: after SUBSCRIBE).
fn subscribe(text: &str, tokens: &[TokenWithSpan]) -> Result<Statement> {
    let mut p = parser(tokens);
    let e = located_error(text);
    if word_of(&p.peek_token()).as_deref() == Some("TO") {
        p.next_token();
    }
    let name = p.parse_object_name(false).map_err(&e)?.to_string();
    let next = p.next_token();
    let filter = match (&next.token, word_of(&next).as_deref()) {
        (Token::EOF, _) => None,
        (_, Some("WHERE")) => {
            let f = p.parse_expr().map_err(&e)?;
            p.expect_token(&Token::EOF).map_err(&e)?;
            Some(Box::new(f))
        }
        (other, _) => {
            return Err(Error::Plan(format!(
                "SUBSCRIBE TO {name} takes WHERE predicate; found {other}"
            ))
            .at(text, next.span))
        }
    };
    Ok(Statement::Subscribe(Subscribe { name, filter }))
}

/// `ALTER {MATERIALIZED VIEW | STREAM | VIEW} name | QUERY k SET PARALLELISM [TO | =] n`.
fn alter(text: &str, solid: &[&TokenWithSpan], span: Span) -> Result<Statement> {
    let w = |i: usize| solid.get(i).and_then(|t| word_of(t));
    let (k, tag) = match (w(1).as_deref(), w(2).as_deref()) {
        (Some("MATERIALIZED"), Some("VIEW")) => (3, "ALTER MATERIALIZED VIEW"),
        (Some("STREAM"), _) => (2, "ALTER STREAM"),
        (Some("VIEW"), _) => (2, "ALTER VIEW"),
        _ => (2, "ALTER QUERY"),
    };
    let number = |i: usize| match solid.get(i).map(|t| &t.token) {
        Some(Token::Number(n, _)) => n.parse::<u64>().ok(),
        _ => None,
    };
    let usage = || {
        Error::Plan(format!(
            "{tag} {} SET PARALLELISM n: n partitions, 1 or more",
            if tag == "ALTER QUERY" { "k" } else { "name" }
        ))
        .at(text, span)
    };
    let mut at = k + 1;
    if w(at).as_deref() != Some("SET") || w(at + 1).as_deref() != Some("PARALLELISM") {
        return Err(usage());
    }
    at += 2;
    if w(at).as_deref() == Some("TO") || matches!(solid.get(at).map(|t| &t.token), Some(Token::Eq))
    {
        at += 1;
    }
    let partitions = number(at)
        .filter(|&n| (1..=1 << 20).contains(&n) && at + 1 == solid.len())
        .ok_or_else(usage)? as u32;
    let target = match tag {
        "ALTER QUERY" => AlterTarget::Query(number(k).ok_or_else(|| {
            Error::Plan("ALTER QUERY k: k is a query's number in SHOW QUERIES".into())
                .at(text, span)
        })? as usize),
        _ => match &solid.get(k).map(|t| &t.token) {
            Some(Token::Word(name)) => AlterTarget::Making(name.value.to_ascii_lowercase(), tag),
            _ => return Err(usage()),
        },
    };
    Ok(Statement::Alter(Alter { target, partitions }))
}

/// `COPY (query | SUBSCRIBE ...) TO STDOUT [WITH (FORMAT csv | text, HEADER ...)]`.
fn copy_out(text: &str, tokens: &[TokenWithSpan]) -> Result<Statement> {
    let open = after_solid(tokens, 2);
    let mut depth = 1i32;
    let close = tokens[open..].iter().position(|t| {
        match t.token {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            _ => {}
        }
        depth == 0
    });
    let Some(close) = close.map(|c| open + c) else {
        return Err(Error::Plan(
            "COPY (query) TO STDOUT: no closing parenthesis".into(),
        ));
    };
    let inner_tokens = tokens[open..close].to_vec();
    if inner_tokens
        .iter()
        .all(|t| matches!(t.token, Token::Whitespace(_)))
    {
        return Err(Error::Plan("COPY (query) TO STDOUT: empty query".into()));
    }
    let inner = one(text, inner_tokens, None, (None, None), &mut None)?;
    if !matches!(inner, Statement::Query(_) | Statement::Subscribe(_)) {
        return Err(Error::NotSupported(
            "COPY (statement) TO STDOUT of a statement that is not a query or SUBSCRIBE".into(),
        )
        .at(text, tokens[open].span));
    }
    // The options: sqlparser's COPY with a stand-in table where the parentheses were.
    let mut rest = vec![
        TokenWithSpan::wrap(Token::make_keyword("COPY")),
        TokenWithSpan::wrap(Token::Whitespace(sqlparser::tokenizer::Whitespace::Space)),
        TokenWithSpan::wrap(Token::make_word("inner", None)),
    ];
    rest.extend(tokens[close + 1..].iter().cloned());
    let st = Parser::new(&PostgreSqlDialect {})
        .with_tokens_with_locations(rest)
        .parse_statement()
        .map_err(located_error(text))?;
    let (format, header) = crate::copy::copy_out_options(&st)?;
    Ok(Statement::CopyOut(Box::new(CopyOut {
        inner,
        format,
        header,
    })))
}

/// Binds `$n` parameters: each placeholder in the statements' trees becomes the value
/// `values[n - 1]` as a typed constant (never text parsed again); a statement with one
/// keeps itself written out in [`Located::bound`]. A placeholder without a value, or in
/// a statement that does not take parameters (a declaration), is an error.
pub fn bind(statements: &mut [Located<Statement>], values: &[Param]) -> Result<()> {
    for st in statements {
        let mut binder = Binder {
            values,
            used: false,
            missing: None,
        };
        let Some(written) = bind_one(&mut st.statement, &mut binder) else {
            // Parameters only where a value can stand: a declaration's options are
            // literals.
            let mut found = Binder {
                values: &[],
                used: false,
                missing: None,
            };
            let _ = match &mut st.statement {
                Statement::Set(s) => s.values.visit(&mut found),
                Statement::CreateView(v) => v.query.visit(&mut found),
                _ => ControlFlow::Continue(()),
            };
            if found.missing.is_some() {
                return Err(Error::NotSupported(format!(
                    "parameters ($n) in {}: write its values in the statement",
                    st.statement.tag()
                )));
            }
            continue;
        };
        if let Some(n) = binder.missing {
            return Err(Error::Plan(format!(
                "${n} has no value ({} were bound)",
                values.len()
            )));
        }
        if binder.used {
            st.bound = Some(written);
        }
    }
    Ok(())
}

/// Binds the placeholders of `st` (a statement that takes parameters) with `binder`,
/// and returns it written out; None for a statement that takes none.
fn bind_one(st: &mut Statement, binder: &mut Binder) -> Option<String> {
    Some(match st {
        Statement::Query(q) => {
            let _ = q.visit(binder);
            q.to_string()
        }
        Statement::Insert(i) => {
            let _ = i.visit(binder);
            i.to_string()
        }
        Statement::Subscribe(s) => {
            if let Some(f) = &mut s.filter {
                let _ = f.visit(binder);
            }
            match &s.filter {
                Some(f) => format!("SUBSCRIBE TO {} WHERE {f}", s.name),
                None => format!("SUBSCRIBE TO {}", s.name),
            }
        }
        Statement::Explain(inner) => format!("EXPLAIN {}", bind_one(inner, binder)?),
        Statement::CreateAs(c) => {
            let _ = c.query.visit(binder);
            let what = if c.view {
                "MATERIALIZED VIEW"
            } else {
                "STREAM"
            };
            format!("CREATE {what} {} AS {}", c.name, c.query)
        }
        Statement::CopyOut(c) => format!(
            "COPY ({}) TO STDOUT WITH (FORMAT {}, HEADER {})",
            bind_one(&mut c.inner, binder)?,
            match c.format {
                CopyFormat::Csv => "csv",
                CopyFormat::Text => "text",
            },
            c.header
        ),
        _ => return None,
    })
}

/// A value bound to a `$n` parameter.
#[derive(Clone, Debug, PartialEq)]
pub enum Param {
    /// A value of its own type (`Scalar::Null` is NULL).
    Value(Scalar),
    /// Text a client sent as a value of a SQL type (`TIMESTAMP`, `DATE`): read as that
    /// type, as `TIMESTAMP '...'` is.
    Typed(ast::DataType, String),
}

impl Param {
    /// The constant expression standing where the placeholder was.
    fn expr(&self) -> ast::Expr {
        let value = |v: ast::Value| ast::Expr::Value(v.with_empty_span());
        match self {
            Param::Value(Scalar::Null) => value(ast::Value::Null),
            Param::Value(Scalar::Bool(b)) => value(ast::Value::Boolean(*b)),
            Param::Value(Scalar::Int(i)) => negated(i.unsigned_abs().to_string(), *i < 0),
            Param::Value(Scalar::Float(f)) if f.is_finite() => {
                negated(format!("{:?}", f.abs()), f.is_sign_negative())
            }
            Param::Value(Scalar::Float(f)) => ast::Expr::Cast {
                kind: ast::CastKind::Cast,
                expr: Box::new(value(ast::Value::SingleQuotedString(f.to_string()))),
                data_type: ast::DataType::DoublePrecision,
                format: None,
            },
            Param::Value(Scalar::Str(s)) => value(ast::Value::SingleQuotedString(s.clone())),
            Param::Value(other) => value(ast::Value::SingleQuotedString(other.to_string())),
            Param::Typed(ty, s) => ast::Expr::TypedString(ast::TypedString {
                data_type: ty.clone(),
                value: ast::Value::SingleQuotedString(s.clone()).with_empty_span(),
                uses_odbc_syntax: false,
            }),
        }
    }
}

/// A number, negated when `negative` (as `-5` is written: a unary minus of 5).
fn negated(digits: String, negative: bool) -> ast::Expr {
    let n = ast::Expr::Value(ast::Value::Number(digits, false).with_empty_span());
    match negative {
        true => ast::Expr::Nested(Box::new(ast::Expr::UnaryOp {
            op: ast::UnaryOperator::Minus,
            expr: Box::new(n),
        })),
        false => n,
    }
}

/// Replaces `$n` placeholders with their values.
struct Binder<'a> {
    values: &'a [Param],
    used: bool,
    /// A placeholder without a value.
    missing: Option<String>,
}

impl VisitorMut for Binder<'_> {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut ast::Expr) -> ControlFlow<()> {
        if let ast::Expr::Value(v) = expr {
            if let ast::Value::Placeholder(p) = &v.value {
                let n = p.strip_prefix('$').and_then(|n| n.parse::<usize>().ok());
                match n.and_then(|n| self.values.get(n.wrapping_sub(1))) {
                    Some(value) => {
                        *expr = value.expr();
                        self.used = true;
                    }
                    None => self.missing = Some(p.trim_start_matches('$').to_string()),
                }
            }
        }
        ControlFlow::Continue(())
    }
}

/// The largest `$n` of `text`'s statements (0 without parameters): how many values a
/// client binds.
pub fn parameters(text: &str) -> usize {
    let Ok(tokens) = sqlparser::tokenizer::Tokenizer::new(&GenericDialect {}, text).tokenize()
    else {
        return 0;
    };
    tokens
        .iter()
        .filter_map(|t| match t {
            Token::Placeholder(p) => p.strip_prefix('$')?.parse::<usize>().ok(),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_keep_their_places_and_braid_words() {
        let text = "SELECT 'a;b' FROM s;\n -- c;\nSUBSCRIBE TO v WHERE x > 1;;\
                    CREATE STREAM q (a BIGINT); DROP QUERY 3; SHOW QUERIES";
        let got = parse(text).expect("parses");
        assert_eq!(got.len(), 5);
        assert_eq!(&text[got[0].range.clone()], "SELECT 'a;b' FROM s");
        assert_eq!(&text[got[1].range.clone()], "SUBSCRIBE TO v WHERE x > 1");
        assert!(
            matches!(&got[1].statement, Statement::Subscribe(s) if s.name == "v" && s.filter.is_some())
        );
        assert!(matches!(&got[2].statement, Statement::Declare(d) if d.kind == Kind::Stream));
        assert!(matches!(got[3].statement, Statement::DropQuery(3)));
        assert!(matches!(got[4].statement, Statement::Show(Show::Queries)));
        let a = got[1].text(text);
        assert_eq!(a.find("SUBSCRIBE"), text.find("SUBSCRIBE"));
        // Multi-byte characters before a statement on its line.
        let text = "SELECT 'é'; SHOW QUERIES";
        let got = parse(text).expect("parses");
        assert_eq!(&text[got[1].range.clone()], "SHOW QUERIES");
        assert!(!a.contains("SELECT"));
    }

    #[test]
    fn braid_statements_are_read_whole() {
        let st = |t: &str| {
            parse(t)
                .unwrap_or_else(|e| panic!("{t}: {e}"))
                .remove(0)
                .statement
        };
        assert!(matches!(
            st("ALTER MATERIALIZED VIEW v SET PARALLELISM TO 4"),
            Statement::Alter(Alter { target: AlterTarget::Making(n, "ALTER MATERIALIZED VIEW"), partitions: 4 }) if n == "v"
        ));
        assert!(matches!(
            st("ALTER QUERY 2 SET PARALLELISM = 1"),
            Statement::Alter(Alter {
                target: AlterTarget::Query(2),
                partitions: 1
            })
        ));
        assert!(matches!(
            st("EXPLAIN ANALYZE QUERY 7"),
            Statement::ExplainAnalyze(7)
        ));
        assert!(
            matches!(st("CREATE STREAM x AS SELECT a FROM s"), Statement::CreateAs(c) if !c.view && c.name == "x")
        );
        assert!(
            matches!(st("CREATE MATERIALIZED VIEW x AS SELECT a FROM s"), Statement::CreateAs(c) if c.view)
        );
        assert!(
            matches!(st("DROP MATERIALIZED VIEW IF EXISTS x"), Statement::Drop(d) if d.kind == DropKind::MaterializedView && d.if_exists)
        );
        assert!(matches!(st("DROP STREAM x"), Statement::Drop(d) if d.kind == DropKind::Stream));
        assert!(matches!(st("START TRANSACTION"), Statement::Begin));
        assert!(
            matches!(st("SHOW server_version"), Statement::Show(Show::Setting(s)) if s == "server_version")
        );
        let copy = st("COPY (SUBSCRIBE TO v) TO STDOUT WITH (FORMAT csv, HEADER)");
        assert!(
            matches!(&copy, Statement::CopyOut(c) if c.format == CopyFormat::Csv && c.header && matches!(c.inner, Statement::Subscribe(_)))
        );
        assert!(matches!(st("INSERT INTO s VALUES (1)"), s if s.inserts_values()));
        for bad in [
            "DROP QUERY x",
            "ALTER QUERY 1 SET PARALLELISM 0",
            "SUBSCRIBE TO v LIMIT 3",
            "COPY (SELECT 1 TO STDOUT",
            "COPY (DROP QUERY 1) TO STDOUT",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    /// What the server asks of a statement: whether it only reads, adds rows, what it
    /// makes, its command tag.
    #[test]
    fn statements_say_what_they_do() {
        let st = |t: &str| {
            parse(t)
                .unwrap_or_else(|e| panic!("{t}: {e}"))
                .remove(0)
                .statement
        };
        for (t, reads, values, makes, tag) in [
            ("SHOW STREAMS", true, false, None, "SHOW"),
            ("DESCRIBE calls", true, false, None, "DESCRIBE"),
            ("EXPLAIN SELECT a FROM s", true, false, None, "EXPLAIN"),
            ("EXPLAIN ANALYZE QUERY 1", true, false, None, "EXPLAIN"),
            ("SUBSCRIBE TO v", true, false, None, "SUBSCRIBE"),
            ("SELECT a FROM s", false, false, None, "SELECT"),
            ("INSERT INTO s VALUES (1)", false, true, None, "INSERT"),
            (
                "INSERT INTO s SELECT a FROM t",
                false,
                false,
                None,
                "INSERT",
            ),
            ("COPY s FROM STDIN", false, false, None, "COPY"),
            (
                "CREATE STREAM Calls (a BIGINT)",
                false,
                false,
                Some("calls"),
                "CREATE STREAM",
            ),
            (
                "CREATE SINK out WITH (sink = 'discard')",
                false,
                false,
                Some("out"),
                "CREATE SINK",
            ),
            (
                "CREATE STREAM x AS SELECT a FROM s",
                false,
                false,
                Some("x"),
                "CREATE STREAM",
            ),
            (
                "CREATE MATERIALIZED VIEW V AS SELECT a FROM s",
                false,
                false,
                Some("v"),
                "CREATE MATERIALIZED VIEW",
            ),
            (
                "CREATE VIEW w AS SELECT a FROM s",
                false,
                false,
                Some("w"),
                "CREATE VIEW",
            ),
            (
                "CREATE FUNCTION f(x BIGINT) RETURNS BIGINT LANGUAGE python AS $$ return x $$",
                false,
                false,
                Some("f"),
                "CREATE FUNCTION",
            ),
            (
                "DROP MATERIALIZED VIEW v",
                false,
                false,
                None,
                "DROP MATERIALIZED VIEW",
            ),
            (
                "ALTER STREAM x SET PARALLELISM 2",
                false,
                false,
                None,
                "ALTER STREAM",
            ),
            (
                "ALTER QUERY 3 SET PARALLELISM 2",
                false,
                false,
                None,
                "ALTER QUERY",
            ),
        ] {
            let s = st(t);
            assert_eq!(s.reads(), reads, "{t}");
            assert_eq!(s.inserts_values(), values, "{t}");
            assert_eq!(s.makes().as_deref(), makes, "{t}");
            assert_eq!(s.tag(), tag, "{t}");
        }
    }

    /// Empty statements and comments make no statement; sqlparser's errors point at
    /// the `;` that ends a statement; positions asked out of order are still right.
    #[test]
    fn empty_pieces_comments_and_error_places() {
        assert_eq!(parse(" ; -- only a comment\n ;").expect("parses").len(), 0);
        assert_eq!(
            parse("SELECT a FROM s; -- the end").expect("parses").len(),
            1
        );
        let e = parse("SELECT a FROM s WHERE;")
            .expect_err("no predicate")
            .to_string();
        assert!(e.contains("column 22"), "{e}");
        let mut offsets = Offsets::new("ab\ncdé f");
        assert_eq!(offsets.at(2, 5), 8);
        assert_eq!(offsets.at(1, 2), 1);
        assert_eq!(offsets.at(2, 1), 3);
    }

    /// What PostgreSQL's drivers send around their statements parses as such.
    #[test]
    fn what_drivers_send_parses() {
        let st = |t: &str| {
            parse(t)
                .unwrap_or_else(|e| panic!("{t}: {e}"))
                .remove(0)
                .statement
        };
        let set = |t: &str| match st(t) {
            Statement::Set(s) => (s.name.to_ascii_lowercase(), s.text()),
            other => panic!("{t}: {other:?}"),
        };
        assert_eq!(
            set("SET extra_float_digits = 3"),
            ("extra_float_digits".into(), "3".into())
        );
        assert_eq!(
            set("SET application_name = 'PostgreSQL JDBC Driver'"),
            ("application_name".into(), "PostgreSQL JDBC Driver".into())
        );
        assert_eq!(
            set("SET SESSION DateStyle TO 'ISO'"),
            ("datestyle".into(), "ISO".into())
        );
        assert_eq!(
            set("SET search_path TO \"$user\", public"),
            ("search_path".into(), "\"$user\", public".into())
        );
        for (t, want) in [
            ("BEGIN ISOLATION LEVEL READ COMMITTED", "BEGIN"),
            ("BEGIN", "BEGIN"),
            ("COMMIT WORK", "COMMIT"),
            ("END", "COMMIT"),
            ("ABORT", "ROLLBACK"),
            ("ROLLBACK", "ROLLBACK"),
            ("SHOW transaction_isolation", "SHOW"),
            ("SELECT version()", "SELECT"),
        ] {
            assert_eq!(st(t).tag(), want, "{t}");
        }
    }

    #[test]
    fn parameters_bind_as_typed_constants() {
        let text = "SELECT a - $1, $2, $3, $4 FROM t WHERE b = $5";
        let mut got = parse(text).expect("parses");
        assert_eq!(parameters(text), 5);
        let values = [
            Param::Value(Scalar::Int(-5)),
            Param::Value(Scalar::Float(f64::NAN)),
            Param::Value(Scalar::Str("it's $1".into())),
            Param::Value(Scalar::Null),
            Param::Typed(
                ast::DataType::Timestamp(None, ast::TimezoneInfo::None),
                "2026-01-01 00:00:00".into(),
            ),
        ];
        bind(&mut got, &values).expect("binds");
        assert_eq!(
            got[0].bound.as_deref(),
            Some("SELECT a - (-5), CAST('NaN' AS DOUBLE PRECISION), 'it''s $1', NULL FROM t WHERE b = TIMESTAMP '2026-01-01 00:00:00'")
        );
        let mut nested = parse("COPY (SUBSCRIBE TO v WHERE a > $1) TO STDOUT; EXPLAIN SELECT $1")
            .expect("parses");
        bind(&mut nested, &values).expect("binds");
        assert_eq!(
            nested[0].bound.as_deref(),
            Some("COPY (SUBSCRIBE TO v WHERE a > (-5)) TO STDOUT WITH (FORMAT text, HEADER false)")
        );
        assert_eq!(nested[1].bound.as_deref(), Some("EXPLAIN SELECT (-5)"));
        let mut short = parse("SELECT $3").expect("parses");
        assert!(bind(&mut short, &values[..1]).is_err());
        let mut declared = parse("CREATE VIEW v AS SELECT $1 FROM t").expect("parses");
        assert!(bind(&mut declared, &values).is_err());
    }
}
