//! Values as PostgreSQL clients read them: text cells of a data row, and lines of
//! COPY's text format; and Braid's column types as Postgres types.

use braid_plan::batch::{Row, Value};
use braid_plan::types::DataType;
use pgwire::api::Type;

/// The Postgres type a client is told a column of `ty` has.
pub fn pg_type(ty: DataType) -> Type {
    match ty {
        DataType::Int64 => Type::INT8,
        DataType::Float64 => Type::FLOAT8,
        DataType::Bool => Type::BOOL,
        DataType::String => Type::VARCHAR,
        DataType::Timestamp => Type::TIMESTAMP,
        DataType::TimestampTz => Type::TIMESTAMPTZ,
        DataType::Date => Type::DATE,
        DataType::Float64Array => Type::FLOAT8_ARRAY,
        DataType::Int64Array => Type::INT8_ARRAY,
    }
}

/// Cell `c` of `row` as text (`None`: null); times as ISO text, booleans as `t`/`f`.
pub fn cell(row: &Row<'_>, c: usize, ty: DataType) -> Option<String> {
    Some(match row.get(c) {
        Value::Null => return None,
        Value::Int(v) if ty.is_time() => braid_plan::time::format(v, ty),
        Value::Bool(b) => if b { "t" } else { "f" }.to_string(),
        v => v.to_string(),
    })
}

/// `row` as a line of COPY's text format (tab-separated, `\N` for null, with a
/// newline).
pub fn copy_line(row: &Row<'_>, types: &[DataType], out: &mut String) {
    for (c, &ty) in types.iter().enumerate() {
        if c > 0 {
            out.push('\t');
        }
        match cell(row, c, ty) {
            None => out.push_str("\\N"),
            Some(s) => {
                for ch in s.chars() {
                    match ch {
                        '\\' => out.push_str("\\\\"),
                        '\t' => out.push_str("\\t"),
                        '\n' => out.push_str("\\n"),
                        '\r' => out.push_str("\\r"),
                        ch => out.push(ch),
                    }
                }
            }
        }
    }
    out.push('\n');
}

/// `row` as a line of COPY's CSV format (comma-separated, a field quoted when it holds
/// a comma, quote, line break, or is empty; null an unquoted empty field; with a
/// newline).
pub fn csv_line(row: &Row<'_>, types: &[DataType], out: &mut String) {
    for (c, &ty) in types.iter().enumerate() {
        if c > 0 {
            out.push(',');
        }
        if let Some(s) = cell(row, c, ty) {
            csv_field(&s, out);
        }
    }
    out.push('\n');
}

/// A field of CSV, quoted when it must be.
pub fn csv_field(s: &str, out: &mut String) {
    if s.is_empty() || s.contains([',', '"', '\n', '\r']) {
        out.push('"');
        out.push_str(&s.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(s);
    }
}
