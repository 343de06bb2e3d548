//! One record (a Kafka message) as one row: a CSV line or a JSON object
//! ([`RecordFormat`]), with the column at fault and why when it is not a row.

use crate::live::json::{kind, value};
use braid_plan::batch::{Batch, RowKey, Value};
#[cfg(feature = "kafka")]
use braid_plan::connector::RecordFormat;
use braid_plan::connector::{JsonPath, PathStep};
#[cfg(feature = "kafka")]
use braid_plan::text::{parse_field, split_fields, Field};
use braid_plan::types::Schema;
use serde_json::Value as Json;

/// Reads records of one format into rows of one schema (the Kafka source's).
#[cfg(feature = "kafka")]
pub(crate) struct Decoder {
    format: RecordFormat,
    schema: Schema,
    data: Vec<u8>,
    fields: Vec<Field>,
}

#[cfg(feature = "kafka")]
impl Decoder {
    pub fn new(format: &RecordFormat, schema: &Schema) -> Decoder {
        Decoder {
            format: format.clone(),
            schema: schema.clone(),
            data: Vec::new(),
            fields: Vec::new(),
        }
    }

    /// Appends the row of `record` to `batch` keyed `key`; or the 1-based column at
    /// fault (0: the whole record) and why it is no row (nothing appended then).
    pub fn push(
        &mut self,
        batch: &mut Batch,
        key: RowKey,
        record: &[u8],
    ) -> Result<(), (u64, String)> {
        match &self.format {
            RecordFormat::Csv => self.csv(batch, key, record),
            RecordFormat::Json { paths } => json(batch, key, record, &self.schema, paths),
        }
    }

    fn csv(&mut self, batch: &mut Batch, key: RowKey, record: &[u8]) -> Result<(), (u64, String)> {
        let mut text = record;
        if let Some(t) = text.strip_suffix(b"\n") {
            text = t;
        }
        if let Some(t) = text.strip_suffix(b"\r") {
            text = t;
        }
        if text.contains(&b'\n') {
            return Err((0, "a record of several lines; expected one CSV line".into()));
        }
        split_fields(text, &mut self.data, &mut self.fields)?;
        let arity = self.schema.arity();
        if self.fields.len() != arity {
            let found = self.fields.len();
            return Err((0, format!("expected {arity} fields, found {found}")));
        }
        batch.start_row(key);
        for (i, f) in self.schema.fields.iter().enumerate() {
            let (bytes, quoted) = match self.fields[i] {
                (a, b, _, true) => (&self.data[a..b], true),
                (a, b, _, false) => (&text[a..b], false),
            };
            match parse_field(bytes, f.ty, f.nullable, quoted) {
                Ok(v) => batch.push_value(v),
                Err(reason) => {
                    batch.abandon_row();
                    return Err((self.fields[i].2, format!("field `{}`: {reason}", f.name)));
                }
            }
        }
        Ok(())
    }
}

/// The value at `path` in `top`, if there is one.
fn find<'j>(top: &'j serde_json::Map<String, Json>, path: &JsonPath) -> Option<&'j Json> {
    let mut steps = path.steps.iter();
    let mut at: &Json = match steps.next()? {
        PathStep::Key(k) if path.by_name => top.get(k).or_else(|| {
            top.iter()
                .find(|(key, _)| key.eq_ignore_ascii_case(k))
                .map(|(_, v)| v)
        })?,
        PathStep::Key(k) => top.get(k)?,
        PathStep::Index(_) => return None,
    };
    for step in steps {
        at = match (step, at) {
            (PathStep::Key(k), Json::Object(o)) => o.get(k)?,
            (PathStep::Index(n), Json::Array(a)) => a.get(*n)?,
            _ => return None,
        };
    }
    Some(at)
}

/// A JSON object's row: each column at its path (missing or null: NULL where the
/// column allows it).
#[cfg(feature = "kafka")]
fn json(
    batch: &mut Batch,
    key: RowKey,
    record: &[u8],
    schema: &Schema,
    paths: &[JsonPath],
) -> Result<(), (u64, String)> {
    let object = json_object(record)?;
    push_json(batch, key, &object, schema, paths)
}

/// The JSON object of `record`, or why it is none (column 0: the whole record).
pub(crate) fn json_object(record: &[u8]) -> Result<serde_json::Map<String, Json>, (u64, String)> {
    match serde_json::from_slice::<Json>(record) {
        Ok(Json::Object(o)) => Ok(o),
        Ok(other) => Err((0, format!("a JSON {}, expected an object", kind(&other)))),
        Err(e) => Err((0, format!("not JSON: {e}"))),
    }
}

/// Column `c`'s value in `object`; NULL only where `nullable`.
pub(crate) fn json_column<'j>(
    object: &'j serde_json::Map<String, Json>,
    schema: &Schema,
    paths: &[JsonPath],
    c: usize,
    nullable: bool,
) -> Result<Value<'j>, (u64, String)> {
    let f = &schema.fields[c];
    let v = match find(object, &paths[c]) {
        None | Some(Json::Null) if nullable => Ok(Value::Null),
        None | Some(Json::Null) => Err(format!("missing, expected {} (NOT NULL)", f.ty)),
        Some(v) => value(v, f.ty),
    };
    v.map_err(|why| {
        let at = match paths[c].by_name {
            true => String::new(),
            false => format!(" (at {})", paths[c]),
        };
        (c as u64 + 1, format!("column {}{at}: {why}", f.name))
    })
}

/// Appends the row of `object` keyed `key`; or the column at fault and why (nothing
/// appended then).
pub(crate) fn push_json(
    batch: &mut Batch,
    key: RowKey,
    object: &serde_json::Map<String, Json>,
    schema: &Schema,
    paths: &[JsonPath],
) -> Result<(), (u64, String)> {
    batch.start_row(key);
    for (c, f) in schema.fields.iter().enumerate() {
        match json_column(object, schema, paths, c, f.nullable) {
            Ok(v) => batch.push_value(v),
            Err(e) => {
                batch.abandon_row();
                return Err(e);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_plan::types::{DataType, Field as Col};

    fn schema() -> Schema {
        let mut lat = Col::new("lat", DataType::Float64);
        lat.nullable = true;
        let mut name = Col::new("name", DataType::String);
        name.nullable = true;
        Schema::new(vec![Col::new("id", DataType::Int64), lat, name])
    }

    fn rows(d: &mut Decoder, records: &[&str]) -> (Vec<String>, Vec<(u64, String)>) {
        let mut b = Batch::new(3);
        let mut bad = Vec::new();
        for (i, r) in records.iter().enumerate() {
            if let Err(e) = d.push(
                &mut b,
                RowKey {
                    seq: i as u64,
                    lane: 0,
                },
                r.as_bytes(),
            ) {
                bad.push(e);
            }
        }
        let got = b.rows().map(|r| format!("{:?}", r.to_scalars())).collect();
        (got, bad)
    }

    #[test]
    fn json_columns_are_found_by_name_or_path_and_missing_ones_are_null() {
        let s = schema();
        let paths = vec![
            JsonPath::name("id"),
            JsonPath::parse("pos.coords[1]").unwrap(),
            JsonPath::name("name"),
        ];
        let mut d = Decoder::new(&RecordFormat::Json { paths }, &s);
        let (got, bad) = rows(
            &mut d,
            &[
                r#"{"ID": 7, "pos": {"coords": [1.5, 2.5]}, "name": "a", "extra": 1}"#,
                r#"{"id": 8}"#,
                r#"{"id": "x"}"#,
                r#"{"pos": {}}"#,
                r#"[1]"#,
                r#"{"id": 9, "pos": {"coords": ["n"]}}"#,
                r#"{"id": 10, "pos": {"coords": [0, "s"]}}"#,
                "{not json",
            ],
        );
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(
            got[0].contains("Int(7)")
                && got[0].contains("Float(2.5)")
                && got[0].contains("Str(\"a\")"),
            "{got:?}"
        );
        assert!(
            got[1].contains("Int(8)") && got[1].matches("Null").count() == 2,
            "{got:?}"
        );
        assert!(
            got[2].contains("Int(9)") && got[2].matches("Null").count() == 2,
            "{got:?}"
        );
        assert_eq!(bad[0].0, 1, "{bad:?}");
        assert!(
            bad[0].1.contains("a JSON string, expected int64"),
            "{bad:?}"
        );
        assert!(
            bad[1].1.contains("missing, expected int64 (NOT NULL)"),
            "{bad:?}"
        );
        assert!(
            bad[2].1.contains("a JSON array, expected an object"),
            "{bad:?}"
        );
        assert_eq!(bad[3].0, 2, "{bad:?}");
        assert!(bad[3].1.contains("(at pos.coords[1])"), "{bad:?}");
        assert!(bad[4].1.starts_with("not JSON"), "{bad:?}");
    }

    #[test]
    fn csv_records_take_one_line_each() {
        let s = schema();
        let mut d = Decoder::new(&RecordFormat::Csv, &s);
        let (got, bad) = rows(
            &mut d,
            &["1,2.5,\"a,b\"\n", "2,,", "3,x,y", "4,1", "5,1,a\n6,1,b"],
        );
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[0].contains("Str(\"a,b\")"), "{got:?}");
        assert_eq!(bad[0].0, 3, "{bad:?}");
        assert!(bad[0].1.contains("field `lat`"), "{bad:?}");
        assert!(bad[1].1.contains("expected 3 fields, found 2"), "{bad:?}");
        assert!(bad[2].1.contains("several lines"), "{bad:?}");
    }
}
