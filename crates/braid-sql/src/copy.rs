//! `COPY stream FROM STDIN [WITH (...)]`: parsed by sqlparser like every other
//! statement, its options read one by one. What Braid's ingest does is PostgreSQL's
//! default for each format (text: tab-separated, `\N` null; CSV: comma-separated, `"`
//! quotes, an unquoted empty field null), so an option that asks for exactly that is
//! taken, and one that asks for anything else is refused by name: never silently a
//! different reading of the producer's data (a HEADER false taken as a header would drop
//! its first row).

use braid_plan::error::{Error, Result};
use sqlparser::ast;

/// The data format of a COPY into a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyFormat {
    /// PostgreSQL's text format.
    Text,
    /// CSV.
    Csv,
}

/// A COPY into a stream: which stream, in what format, whether a header line comes first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyIn {
    /// The stream's name as written.
    pub stream: String,
    pub format: CopyFormat,
    pub header: bool,
}

/// The COPY into a stream `text` asks for, or why it is not one Braid takes.
/// The COPY into a stream statement `st` asks for, or why it is not one Braid takes.
pub(crate) fn copy_in_of(st: &ast::Statement) -> Result<CopyIn> {
    let (source, target, options, legacy) = match st {
        ast::Statement::Copy {
            source,
            to: false,
            target,
            options,
            legacy_options,
            ..
        } => (source, target, options, legacy_options),
        _ => return Err(usage()),
    };
    let ast::CopySource::Table {
        table_name,
        columns,
    } = source
    else {
        return Err(usage());
    };
    if !matches!(target, ast::CopyTarget::Stdin) {
        return Err(Error::NotSupported(
            "COPY from a file or a program on the server; COPY ... FROM STDIN takes what the client sends (psql: \\copy)".into(),
        ));
    }
    if !columns.is_empty() {
        return Err(Error::NotSupported(
            "COPY with a column list: send every column of the stream, in order".into(),
        ));
    }
    let (format, header) = format_and_header(options, legacy)?;
    Ok(CopyIn {
        stream: table_name.to_string(),
        format,
        header,
    })
}

/// The format and header of `COPY (...) TO STDOUT [options]` (`st`: that COPY with a
/// stand-in table for the parentheses); other options refused as for a COPY in.
pub(crate) fn copy_out_options(st: &ast::Statement) -> Result<(CopyFormat, bool)> {
    match st {
        ast::Statement::Copy {
            to: true,
            target: ast::CopyTarget::Stdout,
            options,
            legacy_options,
            ..
        } => match format_and_header(options, legacy_options)? {
            (CopyFormat::Text, true) => Err(Error::NotSupported(
                "COPY HEADER in the text format; PostgreSQL writes a header line in CSV only (WITH (FORMAT csv, HEADER))".into(),
            )),
            taken => Ok(taken),
        },
        _ => Err(Error::Plan(
            "COPY (query) TO STDOUT [WITH (FORMAT csv | text, HEADER)] is the COPY a query takes"
                .into(),
        )),
    }
}

/// FORMAT and HEADER of COPY options; any other that asks for another reading (or
/// writing) than the format's refused by name.
fn format_and_header(
    options: &[ast::CopyOption],
    legacy: &[ast::CopyLegacyOption],
) -> Result<(CopyFormat, bool)> {
    let mut format = None;
    let mut header = None;
    let mut rest = Vec::new();
    for o in options {
        match o {
            ast::CopyOption::Format(f) => format = Some(format_named(&f.value)?),
            ast::CopyOption::Header(h) => header = Some(*h),
            other => rest.push(Asked::New(other)),
        }
    }
    for o in legacy {
        match o {
            ast::CopyLegacyOption::Csv(csv) => {
                format = Some(CopyFormat::Csv);
                for c in csv {
                    match c {
                        ast::CopyLegacyCsvOption::Header => header = Some(true),
                        other => rest.push(Asked::LegacyCsv(other)),
                    }
                }
            }
            ast::CopyLegacyOption::Header => header = Some(true),
            other => rest.push(Asked::Legacy(other)),
        }
    }
    let format = format.unwrap_or(CopyFormat::Text);
    for asked in rest {
        asked.check(format)?;
    }
    Ok((format, header.unwrap_or(false)))
}

fn usage() -> Error {
    Error::Plan(
        "COPY stream FROM STDIN [WITH (FORMAT csv | text, HEADER [true | false])] is the COPY a stream takes".into(),
    )
}

fn format_named(name: &str) -> Result<CopyFormat> {
    match name.to_ascii_lowercase().as_str() {
        "csv" => Ok(CopyFormat::Csv),
        "text" => Ok(CopyFormat::Text),
        other => Err(Error::NotSupported(format!(
            "COPY FORMAT {other}; a stream takes FORMAT csv or FORMAT text"
        ))),
    }
}

/// An option other than FORMAT and HEADER, new style or legacy.
enum Asked<'a> {
    New(&'a ast::CopyOption),
    Legacy(&'a ast::CopyLegacyOption),
    LegacyCsv(&'a ast::CopyLegacyCsvOption),
}

impl Asked<'_> {
    /// Taken when it asks for what the format does anyway; refused by name otherwise.
    fn check(&self, format: CopyFormat) -> Result<()> {
        let csv = format == CopyFormat::Csv;
        let (delimiter, null) = match format {
            CopyFormat::Csv => (',', ""),
            CopyFormat::Text => ('\t', "\\N"),
        };
        let same = match self {
            Asked::New(ast::CopyOption::Delimiter(c))
            | Asked::Legacy(ast::CopyLegacyOption::Delimiter(c)) => *c == delimiter,
            Asked::New(ast::CopyOption::Null(s))
            | Asked::Legacy(ast::CopyLegacyOption::Null(s)) => s == null,
            Asked::New(ast::CopyOption::Quote(c))
            | Asked::LegacyCsv(ast::CopyLegacyCsvOption::Quote(c)) => csv && *c == '"',
            Asked::New(ast::CopyOption::Escape(c))
            | Asked::LegacyCsv(ast::CopyLegacyCsvOption::Escape(c)) => csv && *c == '"',
            Asked::New(ast::CopyOption::Encoding(e)) => {
                matches!(e.to_ascii_uppercase().as_str(), "UTF8" | "UTF-8")
            }
            Asked::New(ast::CopyOption::Freeze(_)) => true,
            _ => false,
        };
        if same {
            return Ok(());
        }
        let what = match self {
            Asked::New(o) => o.to_string(),
            Asked::Legacy(o) => o.to_string(),
            Asked::LegacyCsv(o) => o.to_string(),
        };
        Err(Error::NotSupported(format!(
            "COPY option {what}: a stream reads {} as PostgreSQL does by default ({}); leave the option out",
            if csv { "CSV" } else { "the text format" },
            if csv {
                "comma-separated, `\"` quotes, an unquoted empty field null"
            } else {
                "tab-separated, `\\N` null"
            }
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy_in(text: &str) -> Result<CopyIn> {
        match crate::parse::parse(text)?.remove(0).statement {
            crate::parse::Statement::CopyIn(c) => Ok(c),
            other => panic!("{text}: {other:?}"),
        }
    }

    fn taken(text: &str) -> (CopyFormat, bool) {
        let c = copy_in(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(c.stream, "calls");
        (c.format, c.header)
    }

    #[test]
    fn formats_and_headers_as_written() {
        use CopyFormat::*;
        assert_eq!(taken("COPY calls FROM STDIN"), (Text, false));
        assert_eq!(
            taken("COPY calls FROM STDIN WITH (FORMAT csv)"),
            (Csv, false)
        );
        assert_eq!(
            taken("COPY calls FROM STDIN WITH (FORMAT csv, HEADER)"),
            (Csv, true)
        );
        assert_eq!(
            taken("COPY calls FROM STDIN WITH (FORMAT csv, HEADER true)"),
            (Csv, true)
        );
        // A HEADER false is no header: its first row is a row.
        assert_eq!(
            taken("COPY calls FROM STDIN WITH (FORMAT csv, HEADER false)"),
            (Csv, false)
        );
        assert_eq!(taken("COPY calls FROM STDIN CSV HEADER"), (Csv, true));
        assert_eq!(
            taken("COPY calls FROM STDIN WITH (FORMAT csv, DELIMITER ',')"),
            (Csv, false)
        );
        assert_eq!(
            taken("COPY calls FROM STDIN WITH (FORMAT text, NULL '\\N')"),
            (Text, false)
        );
        // What CSV does anyway: its quote and escape `"`, UTF-8, FREEZE.
        assert_eq!(
            taken(
                r#"COPY calls FROM STDIN WITH (FORMAT csv, QUOTE '"', ESCAPE '"', ENCODING 'UTF8', FREEZE)"#
            ),
            (Csv, false)
        );
        assert_eq!(
            taken(r#"COPY calls FROM STDIN CSV QUOTE '"' ESCAPE '"'"#),
            (Csv, false)
        );
    }

    #[test]
    fn another_reading_is_refused_by_name() {
        for (text, named) in [
            ("COPY calls FROM STDIN WITH (FORMAT NAN)", "FORMAT nan"),
            (
                "COPY calls FROM STDIN WITH (FORMAT binary)",
                "FORMAT binary",
            ),
            (
                "COPY calls FROM STDIN WITH (FORMAT csv, DELIMITER ';')",
                "DELIMITER ';'",
            ),
            (
                "COPY calls FROM STDIN WITH (FORMAT csv, NULL 'x')",
                "NULL 'x'",
            ),
            (
                "COPY calls FROM STDIN WITH (DELIMITER ',')",
                "DELIMITER ','",
            ),
            (
                "COPY calls FROM STDIN WITH (FORMAT csv, QUOTE '''')",
                "QUOTE",
            ),
            (
                r"COPY calls FROM STDIN WITH (FORMAT csv, ESCAPE '\')",
                "ESCAPE",
            ),
            // QUOTE and ESCAPE are CSV's: the text format has neither.
            (
                r#"COPY calls FROM STDIN WITH (FORMAT text, QUOTE '"')"#,
                "QUOTE",
            ),
            (
                r#"COPY calls FROM STDIN WITH (FORMAT text, ESCAPE '"')"#,
                "ESCAPE",
            ),
            (
                "COPY calls FROM STDIN WITH (FORMAT csv, ENCODING 'LATIN1')",
                "ENCODING",
            ),
            ("COPY calls FROM '/etc/passwd'", "a file"),
            ("COPY calls (a) FROM STDIN", "column list"),
        ] {
            let e = copy_in(text).expect_err(text).to_string();
            assert!(e.contains(named), "{text}: {e}");
        }
    }
}
