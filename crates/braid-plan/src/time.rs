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
        DataType::Date => date_of_days(v).map(|d| d.to_string()),
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

/// Writes value `v` of time type `ty` to `out` as PostgreSQL writes it as text
/// (`CAST(ts AS TEXT)`, with the session's zone UTC): `2026-11-24 10:15:00` for a
/// TIMESTAMP, `2026-11-24 10:15:00+00` for a TIMESTAMPTZ, `2026-11-24` for a DATE;
/// fractional seconds only when nonzero, without trailing zeros (`.5`, `.000123`);
/// a year before 1 as PostgreSQL's `BC` years (year 0 is `0001 ... BC`). False, with
/// nothing written, when the value is outside the years -9999 to 9999 that `jiff` holds.
pub fn write_sql_text(out: &mut impl std::fmt::Write, v: i64, ty: DataType) -> bool {
    let (date, time) = match ty {
        DataType::Date => match date_of_days(v) {
            Some(d) => (d, None),
            None => return false,
        },
        _ => match Timestamp::from_microsecond(v) {
            Ok(ts) => {
                let dt = Offset::UTC.to_datetime(ts);
                (dt.date(), Some(dt.time()))
            }
            Err(_) => return false,
        },
    };
    let year = i32::from(date.year());
    let bc = year <= 0;
    let year = if bc { 1 - year } else { year };
    // Writing to a string cannot fail.
    let _ = write!(out, "{year:04}-{:02}-{:02}", date.month(), date.day());
    if let Some(t) = time {
        let _ = write!(out, " {:02}:{:02}:{:02}", t.hour(), t.minute(), t.second());
        let (mut us, mut width) = (t.subsec_nanosecond() / 1000, 6);
        if us != 0 {
            while us % 10 == 0 {
                us /= 10;
                width -= 1;
            }
            let _ = write!(out, ".{us:0width$}");
        }
    }
    if ty == DataType::TimestampTz {
        let _ = out.write_str("+00");
    }
    if bc {
        let _ = out.write_str(" BC");
    }
    true
}

/// Day `d` since 1970-01-01 as a date, if the calendar holds it.
fn date_of_days(d: i64) -> Option<Date> {
    let d = i32::try_from(d).ok()?;
    Date::constant(1970, 1, 1)
        .checked_add(jiff::Span::new().try_days(d).ok()?)
        .ok()
}

/// The unit of a stream's event time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeUnit {
    /// Seconds.
    Second,
    /// Milliseconds.
    Milli,
    /// Microseconds (the unit of TIMESTAMP columns).
    Micro,
    /// Nanoseconds.
    Nano,
}

impl TimeUnit {
    /// The unit a `time_unit` option names.
    pub fn parse(s: &str) -> crate::error::Result<TimeUnit> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "s" => TimeUnit::Second,
            "ms" => TimeUnit::Milli,
            "us" => TimeUnit::Micro,
            "ns" => TimeUnit::Nano,
            _ => {
                return Err(crate::error::Error::Plan(format!(
                    "time_unit '{s}': write 's', 'ms', 'us' or 'ns'"
                )))
            }
        })
    }

    /// Nanoseconds in one unit.
    pub fn nanos(self) -> i128 {
        match self {
            TimeUnit::Second => 1_000_000_000,
            TimeUnit::Milli => 1_000_000,
            TimeUnit::Micro => 1_000,
            TimeUnit::Nano => 1,
        }
    }

    /// Units in one second (a stream's default `units_per_second`).
    pub fn per_second(self) -> f64 {
        (1_000_000_000 / self.nanos()) as f64
    }

    /// `nanos` nanoseconds as a whole number of units; `what` names the length.
    pub fn of_nanos(self, nanos: i128, what: &str) -> crate::error::Result<i64> {
        if nanos % self.nanos() != 0 {
            return Err(crate::error::Error::Plan(format!(
                "{what} is not a whole number of the stream's time unit ({self}); write a multiple of 1 {}",
                self.word()
            )));
        }
        i64::try_from(nanos / self.nanos()).map_err(|_| {
            crate::error::Error::Plan(format!("{what} does not fit in 64 bits of {self}"))
        })
    }

    fn word(self) -> &'static str {
        match self {
            TimeUnit::Second => "second",
            TimeUnit::Milli => "millisecond",
            TimeUnit::Micro => "microsecond",
            TimeUnit::Nano => "nanosecond",
        }
    }
}

impl std::fmt::Display for TimeUnit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TimeUnit::Second => "s",
            TimeUnit::Milli => "ms",
            TimeUnit::Micro => "us",
            TimeUnit::Nano => "ns",
        })
    }
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

    fn sql_text(v: i64, ty: DataType) -> String {
        let mut s = String::new();
        assert!(write_sql_text(&mut s, v, ty), "{v} {ty}");
        s
    }

    #[test]
    fn sql_text_is_postgresql_s() {
        let (ts, tz) = (DataType::Timestamp, DataType::TimestampTz);
        // 2024-01-01 00:00:05 is 19723 days and 5 s after 1970-01-01.
        let v = 19_723 * 86_400_000_000 + 5_000_000;
        assert_eq!(sql_text(v, ts), "2024-01-01 00:00:05");
        assert_eq!(sql_text(v, tz), "2024-01-01 00:00:05+00");
        assert_eq!(sql_text(v + 500_000, ts), "2024-01-01 00:00:05.5");
        assert_eq!(sql_text(v + 123, tz), "2024-01-01 00:00:05.000123+00");
        assert_eq!(sql_text(v + 120_000, ts), "2024-01-01 00:00:05.12");
        assert_eq!(sql_text(19_723, DataType::Date), "2024-01-01");
        assert_eq!(sql_text(-1, ts), "1969-12-31 23:59:59.999999");
        assert_eq!(sql_text(-1, DataType::Date), "1969-12-31");
        // 0001-01-01 is day -719162; the day before is 1 BC (PostgreSQL's year 0).
        assert_eq!(sql_text(-719_162, DataType::Date), "0001-01-01");
        assert_eq!(sql_text(-719_163, DataType::Date), "0001-12-31 BC");
        assert_eq!(
            sql_text(-719_163 * 86_400_000_000, tz),
            "0001-12-31 00:00:00+00 BC"
        );
        let mut s = String::new();
        assert!(!write_sql_text(&mut s, i64::MAX, ts) && s.is_empty());
        assert!(!write_sql_text(&mut s, i64::MAX, DataType::Date) && s.is_empty());
    }
}
