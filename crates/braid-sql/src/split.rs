//! Cutting a text into its statements, and reading a statement's leading words: what a
//! server needs to dispatch statements one by one (some are the server's own:
//! `SUBSCRIBE`, `COPY`, `INSERT ... VALUES`) while errors keep their positions in the
//! whole text.

use sqlparser::dialect::GenericDialect;
use sqlparser::tokenizer::{Token, Tokenizer};

/// A token of a statement's start: a word (upper-cased when unquoted) or a symbol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lead {
    /// A keyword or identifier: upper-cased, unless it was quoted.
    Word(String),
    /// A quoted string literal.
    Str(String),
    /// A number.
    Number(String),
    /// Anything else, as written.
    Symbol(String),
}

/// A statement of a text: its byte range, and its tokens (without whitespace and
/// comments), each with its byte offset in the text.
#[derive(Clone, Debug)]
pub struct Piece {
    /// Byte range of the statement in the text (without its `;`).
    pub range: std::ops::Range<usize>,
    /// Its tokens and their byte offsets.
    pub tokens: Vec<(Lead, usize)>,
}

/// The statements of `text` (empty ones left out); `None` when the text does not
/// tokenize (the parser then words the error).
pub fn statements(text: &str) -> Option<Vec<Piece>> {
    let tokens = Tokenizer::new(&GenericDialect {}, text)
        .tokenize_with_location()
        .ok()?;
    // Byte offset of a token's (line, column). Tokens come in order, so a cursor moves
    // forward from the last one (counting characters from each line's start made a long
    // one-line INSERT quadratic).
    let mut cursor = (1u64, 1u64, 0usize);
    let mut offset = |line: u64, column: u64| -> usize {
        let (mut l, mut c, mut at) = cursor;
        if (line, column) < (l, c) {
            (l, c, at) = (1, 1, 0);
        }
        let mut chars = text[at..].chars();
        while (l, c) < (line, column) {
            match chars.next() {
                Some('\n') => (l, c) = (l + 1, 1),
                Some(_) => c += 1,
                None => break,
            }
            at = text.len() - chars.as_str().len();
        }
        cursor = (l, c, at);
        at
    };
    let mut out = Vec::new();
    let mut current: Vec<(Lead, usize)> = Vec::new();
    let mut start: Option<usize> = None;
    let mut end = 0;
    for t in tokens {
        let at = offset(t.span.start.line, t.span.start.column);
        let lead = match &t.token {
            Token::Whitespace(_) => continue,
            Token::EOF => break,
            Token::SemiColon => {
                if let Some(s) = start.take() {
                    out.push(Piece {
                        range: s..end,
                        tokens: std::mem::take(&mut current),
                    });
                }
                continue;
            }
            Token::Word(w) if w.quote_style.is_none() => Lead::Word(w.value.to_ascii_uppercase()),
            Token::Word(w) => Lead::Word(w.value.clone()),
            Token::SingleQuotedString(s) => Lead::Str(s.clone()),
            Token::Number(n, _) => Lead::Number(n.clone()),
            other => Lead::Symbol(other.to_string()),
        };
        start.get_or_insert(at);
        end = offset(t.span.end.line, t.span.end.column);
        current.push((lead, at));
    }
    if let Some(s) = start {
        out.push(Piece {
            range: s..end,
            tokens: current,
        });
    }
    Some(out)
}

/// `text` with everything outside `range` blanked (newlines kept), so that a
/// statement parsed alone reports the positions it has in the whole text.
pub fn alone(text: &str, range: std::ops::Range<usize>) -> String {
    text.char_indices()
        .map(|(i, c)| match range.contains(&i) || c == '\n' {
            true => c,
            false => ' ',
        })
        .collect()
}

impl Piece {
    /// Whether the statement starts with these words (upper case).
    pub fn starts_with(&self, words: &[&str]) -> bool {
        words.len() <= self.tokens.len()
            && words
                .iter()
                .zip(&self.tokens)
                .all(|(w, (t, _))| matches!(t, Lead::Word(x) if x == w))
    }

    /// `INSERT INTO name VALUES ...` or `INSERT INTO name (columns) VALUES ...`: rows,
    /// not a query.
    pub fn inserts_values(&self) -> bool {
        self.starts_with(&["INSERT", "INTO"])
            && match self.tokens.get(3) {
                Some((Lead::Word(w), _)) => w == "VALUES" || w == "VALUE",
                Some((Lead::Symbol(s), _)) => s == "(",
                _ => false,
            }
    }

    /// The word at token `i`, if it is one.
    pub fn word(&self, i: usize) -> Option<&str> {
        match self.tokens.get(i) {
            Some((Lead::Word(w), _)) => Some(w),
            _ => None,
        }
    }

    /// The byte offset of token `i` (the statement's end past the last).
    pub fn at(&self, i: usize) -> usize {
        self.tokens.get(i).map_or(self.range.end, |t| t.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_at_semicolons_outside_strings_and_keeps_offsets() {
        let text = "SELECT 'a;b' FROM s;\n -- c;\nSUBSCRIBE TO v ;;";
        let p = statements(text).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(&text[p[0].range.clone()], "SELECT 'a;b' FROM s");
        assert_eq!(&text[p[1].range.clone()], "SUBSCRIBE TO v");
        assert!(p[1].starts_with(&["SUBSCRIBE", "TO"]));
        assert_eq!(p[1].word(2), Some("V"));
        assert_eq!(p[1].at(2), text.find(" v").unwrap() + 1);
        let a = alone(text, p[1].range.clone());
        assert_eq!(a.find("SUBSCRIBE"), text.find("SUBSCRIBE"));
        assert!(!a.contains("SELECT"));
    }
}
