//! Fields written as text: one parser for every reader, one CSV writer for every
//! writer. A line of CSV splits into fields ([`split_fields`]), each parsed by its
//! column's type ([`parse_field`]); the int fast path ([`ascii_int`]) is the general
//! path's answer without a `str` on the way. [`write_csv_row`] writes a row back as
//! the readers take it (CSV sinks, Kafka's CSV records, the durable logs' files).

use crate::batch::{Row, Value};
use crate::types::DataType;

/// An int64 written in ASCII (`[+-]?[0-9]+` between ASCII white space), without a
/// UTF-8 check or a `str` on the way; None for anything else (empty, too large, any
/// other byte), which the general path then judges.
#[inline]
pub fn ascii_int(mut bytes: &[u8]) -> Option<i64> {
    let space = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
    if bytes.first().is_some_and(space) || bytes.last().is_some_and(space) {
        let start = bytes.iter().position(|b| !space(b))?;
        let end = bytes.iter().rposition(|b| !space(b))? + 1;
        bytes = &bytes[start..end];
    }
    let (negative, digits) = match bytes.first()? {
        b'-' => (true, &bytes[1..]),
        b'+' => (false, &bytes[1..]),
        _ => (false, bytes),
    };
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    // Accumulated negatively, so that i64::MIN fits; 18 digits cannot overflow.
    let mut v: i64 = 0;
    if digits.len() <= 18 {
        for &b in digits {
            let d = b.wrapping_sub(b'0');
            if d > 9 {
                return None;
            }
            v = v * 10 - i64::from(d);
        }
    } else {
        for &b in digits {
            let d = b.wrapping_sub(b'0');
            if d > 9 {
                return None;
            }
            v = v.checked_mul(10)?.checked_sub(i64::from(d))?;
        }
    }
    match negative {
        true => Some(v),
        false => v.checked_neg(),
    }
}

/// Parses one field as `ty`: the one field parser of every reader (CSV and text files,
/// streams, tables, the server's INSERT, COPY, TCP and HTTP, the durable log), so one
/// text is one value wherever it comes from. `quoted` says the field was written as a
/// value whatever its bytes (a quoted CSV field, a field of COPY's text format, a SQL
/// literal): PostgreSQL's COPY rules, where an unquoted empty CSV field is null and
/// `""` the empty string. TEXT keeps its bytes as they are (spaces too); an unquoted
/// field with nothing in it is null (an error in a NOT NULL column). Other types read
/// the field between white space, which alone is null there.
pub fn parse_field(
    bytes: &[u8],
    ty: DataType,
    nullable: bool,
    quoted: bool,
) -> Result<Value<'_>, String> {
    if let (DataType::Int64, Some(v)) = (ty, ascii_int(bytes)) {
        return Ok(Value::Int(v));
    }
    let text =
        std::str::from_utf8(bytes).map_err(|_| format!("bytes are not UTF-8, expected {ty}"))?;
    if ty == DataType::String && (quoted || !text.is_empty()) {
        return Ok(Value::Str(text));
    }
    let t = text.trim();
    if t.is_empty() {
        return if nullable {
            Ok(Value::Null)
        } else {
            Err(format!("empty, expected {ty}"))
        };
    }
    let shown = || t.chars().take(40).collect::<String>();
    match ty {
        DataType::Int64 => t
            .parse()
            .map(Value::Int)
            .map_err(|_| format!("{:?} is not an int64", shown())),
        DataType::Float64 => t
            .parse()
            .map(Value::Float)
            .map_err(|_| format!("{:?} is not a float64", shown())),
        DataType::Bool => match t.to_ascii_lowercase().as_str() {
            "true" | "t" | "1" => Ok(Value::Bool(true)),
            "false" | "f" | "0" => Ok(Value::Bool(false)),
            _ => Err(format!("{:?} is not a bool (true/false)", shown())),
        },
        DataType::String => Ok(Value::Str(text)),
        DataType::Timestamp | DataType::TimestampTz | DataType::Date => {
            crate::time::parse(t, ty).map(Value::Int)
        }
        // Parsed into the batch's arena where rows are built (`Batch::push_array_text`);
        // a reader that calls this for an array column has no arena to put it in.
        DataType::Float64Array | DataType::Int64Array => Err(format!(
            "{ty} columns are read from CSV files and streams only, not from this format"
        )),
    }
}

/// A field of a line: its range, its 1-based column, and whether it was quoted (its
/// range is then in the parser's buffer of unquoted bytes, else in the line).
pub type Field = (usize, usize, u64, bool);

/// Splits one line (without its line end) into fields: comma-separated, a field may be
/// quoted with `"` (a doubled `""` inside is one quote) and then holds commas. Fields
/// never span lines. `fields` gets each field's range, its 1-based byte column in the
/// line, and whether it was quoted: a quoted field's bytes (its quotes undone) go to
/// `data` and its range is in `data`, any other's range is in `line`. On a malformed
/// quote, the column and reason.
pub fn split_fields(
    line: &[u8],
    data: &mut Vec<u8>,
    fields: &mut Vec<Field>,
) -> Result<(), (u64, String)> {
    data.clear();
    fields.clear();
    let mut i = 0;
    loop {
        let column = i as u64 + 1;
        let start = data.len();
        if line.get(i) == Some(&b'"') {
            i += 1;
            loop {
                match line.get(i) {
                    None => {
                        return Err((
                            column,
                            "quoted field is not closed on its line, expected a closing `\"`"
                                .into(),
                        ))
                    }
                    Some(b'"') if line.get(i + 1) == Some(&b'"') => {
                        data.push(b'"');
                        i += 2;
                    }
                    Some(b'"') => {
                        i += 1;
                        break;
                    }
                    Some(&b) => {
                        data.push(b);
                        i += 1;
                    }
                }
            }
            // Only spaces may follow the closing quote before the next comma.
            while line.get(i).is_some_and(|b| *b == b' ' || *b == b'\t') {
                i += 1;
            }
            if !matches!(line.get(i), None | Some(b',')) {
                return Err((
                    i as u64 + 1,
                    "text after a closing `\"`, expected `,` or the line end".into(),
                ));
            }
            fields.push((start, data.len(), column, true));
        } else {
            let end = line[i..]
                .iter()
                .position(|&b| b == b',')
                .map_or(line.len(), |p| i + p);
            fields.push((i, end, column, false));
            i = end;
        }
        if i >= line.len() {
            return Ok(());
        }
        i += 1; // the comma
    }
}

/// Formats a row as a CSV line that reads back (by [`parse_field`]) to the same
/// values: strings are quoted when needed (the empty string too: `""`, as PostgreSQL's
/// COPY writes it, while null is nothing), arrays always, and a column whose type in
/// `types` is a timestamp or date is written as ISO text; `emit_ms` last when given.
pub fn write_csv_row(
    out: &mut impl std::io::Write,
    row: &Row<'_>,
    types: &[DataType],
    emit_ms: Option<u64>,
) -> std::io::Result<()> {
    for c in 0..row.arity() {
        if c > 0 {
            out.write_all(b",")?;
        }
        match row.get(c) {
            // Quoted where a reader could take it otherwise: empty (unquoted is null),
            // with a separator, a quote or a line end, with spaces at an end (kept as
            // written, but visibly), or starting with `#` (a log file's first line).
            Value::Str(s)
                if s.is_empty()
                    || s.contains([',', '"', '\n', '\r'])
                    || s.trim() != s
                    || s.starts_with('#') =>
            {
                write!(out, "\"{}\"", s.replace('"', "\"\""))?;
            }
            // An array's text has commas: always quoted (it holds no quote).
            v @ (Value::Floats(_) | Value::Ints(_)) => {
                write!(out, "\"{v}\"")?;
            }
            Value::Int(v) if types.get(c).is_some_and(|t| t.is_time()) => {
                out.write_all(crate::time::format(v, types[c]).as_bytes())?;
            }
            v => write!(out, "{v}")?,
        }
    }
    if let Some(ms) = emit_ms {
        write!(out, ",{ms}")?;
    }
    out.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PostgreSQL's COPY rules: an unquoted empty field is null, a quoted one (or a field
    /// written as a value) the empty string; TEXT keeps its spaces; other types read the
    /// field between white space, which alone is null there.
    #[test]
    fn null_and_the_empty_string_as_copy_tells_them_apart() {
        let s = DataType::String;
        assert_eq!(parse_field(b"", s, true, false), Ok(Value::Null));
        assert_eq!(parse_field(b"", s, true, true), Ok(Value::Str("")));
        assert_eq!(parse_field(b"  ", s, true, false), Ok(Value::Str("  ")));
        assert_eq!(parse_field(b" a ", s, true, false), Ok(Value::Str(" a ")));
        assert!(parse_field(b"", s, false, false).is_err());
        assert_eq!(parse_field(b"", s, false, true), Ok(Value::Str("")));
        let i = DataType::Int64;
        assert_eq!(parse_field(b" 7 ", i, true, false), Ok(Value::Int(7)));
        assert_eq!(parse_field(b"  ", i, true, false), Ok(Value::Null));
        assert!(parse_field(b"x", i, true, true).is_err());
    }

    /// A quoted field's quotes are undone, and it says it was quoted.
    #[test]
    fn fields_say_whether_they_were_quoted() {
        let (mut data, mut fields) = (Vec::new(), Vec::new());
        split_fields(br#",""," a ","b""c""#, &mut data, &mut fields).unwrap();
        let got: Vec<(String, bool)> = fields
            .iter()
            .map(|&(a, b, _, q)| {
                let bytes = if q {
                    &data[a..b]
                } else {
                    &br#",""," a ","b""c""#[a..b]
                };
                (String::from_utf8_lossy(bytes).into_owned(), q)
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (String::new(), false),
                (String::new(), true),
                (" a ".into(), true),
                ("b\"c".into(), true)
            ]
        );
    }
}
