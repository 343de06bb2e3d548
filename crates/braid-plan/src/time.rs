//! Timestamps and dates as text (parsed with `jiff`): what a CSV field or a SQL literal
//! holds, and what output shows. Values are int64: microseconds since 1970-01-01
//! 00:00:00 (UTC for TIMESTAMPTZ) and days since 1970-01-01 for DATE.

use crate::types::DataType;
use jiff::civil::{Date, DateTime};
use jiff::tz::{Offset, TimeZone};
use jiff::Timestamp;

/// The text formats a time type reads (for messages).
pub fn expected(ty: DataType) -> &'static str {
    match ty {
        DataType::Date => "a date, YYYY-MM-DD",
        DataType::TimestampTz => {
            "a timestamp, YYYY-MM-DD HH:MM:SS[.ffffff] with an optional offset (Z, +01:00; none is UTC)"
        }
        _ => "a timestamp, YYYY-MM-DD HH:MM:SS[.ffffff] (or with T for the space)",
    }
}

/// `text` as a value of time type `ty`; the error says what was expected.
pub fn parse(text: &str, ty: DataType) -> Result<i64, String> {
    let t = text.trim();
    let bad = || format!("{t:?} is not {}", expected(ty));
    match ty {
        DataType::Date => {
            let d: Date = t.parse().map_err(|_| bad())?;
            let days = d
                .since(Date::constant(1970, 1, 1))
                .map_err(|_| bad())?
                .get_days();
            Ok(i64::from(days))
        }
        DataType::TimestampTz => match t.parse::<Timestamp>() {
            Ok(ts) => Ok(ts.as_microsecond()),
            Err(_) => civil_micros(t).ok_or_else(bad),
        },
        _ => civil_micros(t).ok_or_else(bad),
    }
}

/// A date and time without an offset, as microseconds since the epoch (read as UTC).
fn civil_micros(t: &str) -> Option<i64> {
    let dt: DateTime = t.parse().ok()?;
    let ts = Offset::UTC.to_timestamp(dt).ok()?;
    Some(ts.as_microsecond())
}

/// Value `v` of time type `ty` as text: `2026-11-24 10:15:00[.123]` (TIMESTAMP),
/// `2026-11-24T10:15:00[.123]Z` (TIMESTAMPTZ), `2026-11-24` (DATE). A value outside
/// what the calendar holds is shown as its number.
pub fn format(v: i64, ty: DataType) -> String {
    let shown = match ty {
        DataType::Date => i32::try_from(v)
            .ok()
            .and_then(|d| {
                Date::constant(1970, 1, 1)
                    .checked_add(jiff::Span::new().try_days(d).ok()?)
                    .ok()
            })
            .map(|d| d.to_string()),
        _ => Timestamp::from_microsecond(v).ok().map(|ts| {
            let dt = ts.to_zoned(TimeZone::UTC).datetime();
            let s = dt.strftime("%Y-%m-%d %H:%M:%S%.f").to_string();
            if ty == DataType::TimestampTz {
                format!("{}Z", s.replacen(' ', "T", 1))
            } else {
                s
            }
        }),
    };
    shown.unwrap_or_else(|| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let ts = DataType::Timestamp;
        let v = parse("2026-11-24 10:15:00", ts).unwrap();
        assert_eq!(v, 1_795_515_300_000_000);
        assert_eq!(format(v, ts), "2026-11-24 10:15:00");
        assert_eq!(parse("2026-11-24T10:15:00", ts), Ok(v));
        let v3 = parse("2026-11-24 10:15:00.123", ts).unwrap();
        assert_eq!(v3, v + 123_000);
        assert_eq!(format(v3, ts), "2026-11-24 10:15:00.123");
        let tz = DataType::TimestampTz;
        assert_eq!(parse("2026-11-24T10:15:00.123Z", tz), Ok(v3));
        assert_eq!(parse("2026-11-24T11:15:00.123+01:00", tz), Ok(v3));
        assert_eq!(format(v3, tz), "2026-11-24T10:15:00.123Z");
        assert!(parse("2026-11-24T10:15:00Z", ts).is_err());
        assert_eq!(parse("1970-01-02", DataType::Date), Ok(1));
        assert_eq!(parse("1969-12-31", DataType::Date), Ok(-1));
        assert_eq!(format(20_781, DataType::Date), "2026-11-24");
        assert!(parse("2026-13-01", DataType::Date).is_err());
        assert!(parse("yesterday", ts).is_err());
    }
}
