//! JSON lines for a stream: each line is one object keyed by column name (any case).
//! A missing key is null where the column allows it; an unknown key, a missing NOT
//! NULL column or a value of the wrong JSON type makes the line malformed, with the
//! column at fault and the reason. Numbers go to BIGINT (integers only) and DOUBLE,
//! `true`/`false` to BOOLEAN, strings to TEXT and to the time types (as their text,
//! `'2024-05-01 12:00:00'`).

use braid_plan::batch::{Batch, RowKey, Value};
use braid_plan::types::{DataType, Schema};
use serde_json::Value as Json;

/// Appends the row of the JSON object `raw` (as `schema` types it) keyed `seq`; or the
/// 1-based column at fault (0: the whole line) and why.
pub fn push_row(
    batch: &mut Batch,
    schema: &Schema,
    raw: &[u8],
    seq: u64,
) -> std::result::Result<(), (u64, String)> {
    let object = match serde_json::from_slice::<Json>(raw) {
        Ok(Json::Object(o)) => o,
        Ok(other) => return Err((0, format!("a JSON {}, expected an object", kind(&other)))),
        Err(e) => return Err((0, format!("not JSON: {e}"))),
    };
    let mut slots: Vec<Option<&Json>> = vec![None; schema.fields.len()];
    for (key, value) in &object {
        let Some(i) = schema
            .fields
            .iter()
            .position(|f| f.name.eq_ignore_ascii_case(key))
        else {
            return Err((
                0,
                format!(
                    "unknown key {key:?}; the columns are {}",
                    schema.column_list()
                ),
            ));
        };
        if slots[i].is_some() {
            return Err((i as u64 + 1, format!("key {key:?} given twice")));
        }
        slots[i] = Some(value);
    }
    let mut values: Vec<Value<'_>> = Vec::with_capacity(slots.len());
    for (i, (slot, f)) in slots.iter().zip(&schema.fields).enumerate() {
        let at = |reason: String| (i as u64 + 1, format!("column {}: {reason}", f.name));
        let v = match slot {
            None | Some(Json::Null) if f.nullable => Value::Null,
            None => return Err(at(format!("missing, expected {} (NOT NULL)", f.ty))),
            Some(v) => value(v, f.ty).map_err(at)?,
        };
        values.push(v);
    }
    batch.push(RowKey { seq, lane: 0 }, &values);
    Ok(())
}

/// The value of JSON `v` as a `ty`, or why it is not one.
pub(crate) fn value(v: &Json, ty: DataType) -> std::result::Result<Value<'_>, String> {
    let wrong = || format!("a JSON {}, expected {ty}", kind(v));
    match (ty, v) {
        (DataType::Int64, Json::Number(n)) => n
            .as_i64()
            .map(Value::Int)
            .ok_or_else(|| format!("{n} is not an int64")),
        (DataType::Float64, Json::Number(n)) => n.as_f64().map(Value::Float).ok_or_else(wrong),
        (DataType::Bool, Json::Bool(b)) => Ok(Value::Bool(*b)),
        (DataType::String, Json::String(s)) => Ok(Value::Str(s)),
        (DataType::Timestamp | DataType::TimestampTz | DataType::Date, Json::String(s)) => {
            braid_plan::time::parse(s.trim(), ty).map(Value::Int)
        }
        _ => Err(wrong()),
    }
}

pub(crate) fn kind(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "bool",
        Json::Number(_) => "number",
        Json::String(_) => "string",
        Json::Array(_) => "array",
        Json::Object(_) => "object",
    }
}
