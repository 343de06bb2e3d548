//! Typed schemas.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The type of a column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DataType {
    /// 64-bit signed integer.
    Int64,
    /// 64-bit float.
    Float64,
    /// Boolean.
    Bool,
    /// UTF-8 text.
    String,
    /// A date and time without a zone (SQL `TIMESTAMP`): microseconds since
    /// 1970-01-01 00:00:00, stored as an int64 column.
    Timestamp,
    /// An instant (SQL `TIMESTAMP WITH TIME ZONE`): microseconds since the epoch in UTC,
    /// stored as an int64 column.
    TimestampTz,
    /// A date (SQL `DATE`): days since 1970-01-01, stored as an int64 column.
    Date,
    /// An array of 64-bit floats (SQL `DOUBLE PRECISION[]`, `FLOAT8[]`), any length.
    Float64Array,
    /// An array of 64-bit integers (SQL `BIGINT[]`), any length.
    Int64Array,
}

impl DataType {
    /// The type's name in SQL (`BIGINT`, `DOUBLE`, ...), as DESCRIBE shows it.
    pub fn sql_name(self) -> &'static str {
        match self {
            DataType::Int64 => "BIGINT",
            DataType::Float64 => "DOUBLE",
            DataType::Bool => "BOOLEAN",
            DataType::String => "TEXT",
            DataType::Timestamp => "TIMESTAMP",
            DataType::TimestampTz => "TIMESTAMPTZ",
            DataType::Date => "DATE",
            DataType::Float64Array => "DOUBLE[]",
            DataType::Int64Array => "BIGINT[]",
        }
    }

    /// The element type of an array type (the type itself for others).
    pub fn element(self) -> DataType {
        match self {
            DataType::Float64Array => DataType::Float64,
            DataType::Int64Array => DataType::Int64,
            t => t,
        }
    }

    /// The array type of elements of this type, if there is one.
    pub fn array_of(self) -> Option<DataType> {
        match self {
            DataType::Float64 => Some(DataType::Float64Array),
            DataType::Int64 => Some(DataType::Int64Array),
            _ => None,
        }
    }

    /// Whether this is an array type.
    pub fn is_array(self) -> bool {
        matches!(self, DataType::Float64Array | DataType::Int64Array)
    }

    /// Whether values of this type are stored as int64 (BIGINT and the time types).
    pub fn is_int_stored(self) -> bool {
        matches!(
            self,
            DataType::Int64 | DataType::Timestamp | DataType::TimestampTz | DataType::Date
        )
    }

    /// Whether this is a time type (TIMESTAMP, TIMESTAMPTZ, DATE).
    pub fn is_time(self) -> bool {
        matches!(
            self,
            DataType::Timestamp | DataType::TimestampTz | DataType::Date
        )
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DataType::Int64 => "int64",
            DataType::Float64 => "float64",
            DataType::Bool => "bool",
            DataType::String => "string",
            DataType::Timestamp => "timestamp",
            DataType::TimestampTz => "timestamptz",
            DataType::Date => "date",
            DataType::Float64Array => "float64[]",
            DataType::Int64Array => "int64[]",
        })
    }
}

impl std::str::FromStr for DataType {
    type Err = Error;
    fn from_str(s: &str) -> Result<DataType> {
        match s.to_ascii_lowercase().as_str() {
            "int64" | "int" | "bigint" | "integer" | "i64" => Ok(DataType::Int64),
            "float64" | "float" | "double" | "f64" | "real" => Ok(DataType::Float64),
            "bool" | "boolean" => Ok(DataType::Bool),
            "string" | "text" | "varchar" | "str" => Ok(DataType::String),
            "timestamp" => Ok(DataType::Timestamp),
            "timestamptz" => Ok(DataType::TimestampTz),
            "date" => Ok(DataType::Date),
            "float64[]" | "double[]" | "float8[]" => Ok(DataType::Float64Array),
            "int64[]" | "bigint[]" | "int8[]" => Ok(DataType::Int64Array),
            other => Err(Error::Plan(format!(
                "unknown type `{other}`; types are int64, float64, bool, string, timestamp, timestamptz, date, float64[], int64[]"
            ))),
        }
    }
}

/// A schema written as text, `name type, ...` (the command line's `--schema`): types
/// as [`DataType`] parses them, `?` after a type for a nullable column.
///
/// ```
/// use braid_plan::types::{DataType, Schema};
/// let s: Schema = "a int64, b float64?".parse()?;
/// assert_eq!(s.column_list(), "a, b");
/// assert!(s.fields[1].nullable && s.fields[1].ty == DataType::Float64);
/// assert!("a int64 b int64".parse::<Schema>().is_err()); // a comma is missing
/// # Ok::<(), braid_plan::error::Error>(())
/// ```
impl std::str::FromStr for Schema {
    type Err = Error;
    fn from_str(text: &str) -> Result<Schema> {
        let mut fields = Vec::new();
        for part in text.split(',') {
            let mut words = part.split_whitespace();
            let (Some(name), Some(ty), None) = (words.next(), words.next(), words.next()) else {
                return Err(Error::Plan(format!(
                    "schema entry {:?}: expected `name type` (columns separated by commas)",
                    part.trim()
                )));
            };
            let (ty, nullable) = match ty.strip_suffix('?') {
                Some(t) => (t, true),
                None => (ty, false),
            };
            fields.push(Field {
                name: name.to_string(),
                ty: ty.parse()?,
                nullable,
                len: None,
            });
        }
        Ok(Schema::new(fields))
    }
}

/// A named, typed column.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Field {
    /// Column name.
    pub name: String,
    /// Column type.
    pub ty: DataType,
    /// Whether the column may hold null.
    pub nullable: bool,
    /// An array column's declared length (SQL `DOUBLE PRECISION[1024]`): every array
    /// it holds has that many elements; None for any length (and for other types).
    #[serde(default)]
    pub len: Option<u32>,
}

impl Field {
    /// A non-nullable field.
    pub fn new(name: &str, ty: DataType) -> Field {
        Field {
            name: name.to_string(),
            ty,
            nullable: false,
            len: None,
        }
    }

    /// The type as SQL writes it, with an array's declared length (`DOUBLE[4]`).
    pub fn sql_type(&self) -> String {
        match (self.ty, self.len) {
            (DataType::Float64Array, Some(n)) => format!("DOUBLE[{n}]"),
            (DataType::Int64Array, Some(n)) => format!("BIGINT[{n}]"),
            (t, _) => t.sql_name().to_string(),
        }
    }

    /// The fault of an array of `got` elements in this column when it breaks the
    /// declared length.
    pub fn length_fault(&self, got: usize) -> Option<String> {
        let want = self.len?;
        (got != want as usize).then(|| {
            format!(
                "column `{}` holds {got} elements, declared {}",
                self.name,
                self.sql_type()
            )
        })
    }

    /// A nullable field.
    pub fn nullable(name: &str, ty: DataType) -> Field {
        Field {
            name: name.to_string(),
            ty,
            nullable: true,
            len: None,
        }
    }
}

/// The columns of a stream, and which one (if any) is its event time.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct Schema {
    /// Columns in order.
    pub fields: Vec<Field>,
    /// Index of the int64 event-time column, if the stream has one.
    pub event_time: Option<usize>,
}

impl Schema {
    /// A schema without an event-time column.
    pub fn new(fields: Vec<Field>) -> Schema {
        Schema {
            fields,
            event_time: None,
        }
    }

    /// Sets the event-time column by name; it must be an int64 or a timestamp.
    pub fn with_event_time(mut self, name: &str) -> Result<Schema> {
        let i = self.index_of(name)?;
        let f = &self.fields[i];
        if !matches!(
            f.ty,
            DataType::Int64 | DataType::Timestamp | DataType::TimestampTz
        ) {
            return Err(Error::Plan(format!(
                "event-time column `{name}` has type {}, expected int64 or a timestamp",
                f.ty
            )));
        }
        self.event_time = Some(i);
        Ok(self)
    }

    /// All columns int64, named as given.
    pub fn ints(names: &[&str]) -> Schema {
        Schema::new(
            names
                .iter()
                .map(|n| Field::new(n, DataType::Int64))
                .collect(),
        )
    }

    /// Number of columns.
    pub fn arity(&self) -> usize {
        self.fields.len()
    }

    /// Index of a column by name (case-insensitive); the error lists the columns.
    pub fn index_of(&self, name: &str) -> Result<usize> {
        self.fields
            .iter()
            .position(|f| f.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                Error::Plan(format!(
                    "no column `{name}`; columns are {}",
                    self.column_list()
                ))
            })
    }

    /// The column names, comma separated.
    pub fn column_list(&self) -> String {
        self.fields
            .iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(")?;
        for (i, c) in self.fields.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            match (c.ty, c.len) {
                (t, Some(n)) if t.is_array() => write!(f, "{} {}[{n}]", c.name, t.element())?,
                (t, _) => write!(f, "{} {t}", c.name)?,
            }
            if c.nullable {
                f.write_str("?")?;
            }
            if self.event_time == Some(i) {
                f.write_str(" EVENT TIME")?;
            }
        }
        f.write_str(")")
    }
}
