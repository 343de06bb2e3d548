//! Linear Road records: the 15-field input tuple, the five output lines, and the
//! input checks of `docs/linear-road.md` section 8.
//!
//! This module is shared by the generator, the stream function and the validator:
//! it only parses, formats and filters; it computes no answers.

use std::collections::HashMap;
use std::fmt;

/// Number of comma-separated fields in an input line.
pub const INPUT_FIELDS: usize = 15;

/// One input tuple (doc section 2). Fields that do not apply are -1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Input {
    /// Type: 0 position report, 2 balance, 3 daily expenditure, 4 travel time.
    pub typ: i64,
    /// Time: emission second.
    pub time: i64,
    /// VID: vehicle id (the requester for 2, 3, 4).
    pub vid: i64,
    /// Spd: speed in mph (signed: some generators write negative speeds).
    pub spd: i64,
    /// XWay: expressway (for 3 and 4 the one asked about).
    pub xway: i64,
    /// Lane 0..4 (0 entrance ramp, 4 exit ramp).
    pub lane: i64,
    /// Dir: 0 eastbound, 1 westbound.
    pub dir: i64,
    /// Seg 0..99.
    pub seg: i64,
    /// Pos: feet from the west end, 0..527999.
    pub pos: i64,
    /// QID: query id (types 2, 3, 4).
    pub qid: i64,
    /// S_init: start segment (type 4).
    pub s_init: i64,
    /// S_end: end segment (type 4).
    pub s_end: i64,
    /// DOW: day of week 1..7 (type 4).
    pub dow: i64,
    /// TOD: minute of day 1..1440 (type 4).
    pub tod: i64,
    /// Day: 1 = yesterday .. 69 (type 3).
    pub day: i64,
}

impl Input {
    /// Builds a tuple from the 15 fields in file order.
    pub fn from_fields(f: [i64; INPUT_FIELDS]) -> Input {
        Input {
            typ: f[0],
            time: f[1],
            vid: f[2],
            spd: f[3],
            xway: f[4],
            lane: f[5],
            dir: f[6],
            seg: f[7],
            pos: f[8],
            qid: f[9],
            s_init: f[10],
            s_end: f[11],
            dow: f[12],
            tod: f[13],
            day: f[14],
        }
    }

    /// The 15 fields in file order.
    pub fn fields(&self) -> [i64; INPUT_FIELDS] {
        [
            self.typ,
            self.time,
            self.vid,
            self.spd,
            self.xway,
            self.lane,
            self.dir,
            self.seg,
            self.pos,
            self.qid,
            self.s_init,
            self.s_end,
            self.dow,
            self.tod,
            self.day,
        ]
    }

    /// A position report (type 0).
    pub fn position(
        time: i64,
        vid: i64,
        spd: i64,
        xway: i64,
        lane: i64,
        dir: i64,
        pos: i64,
    ) -> Input {
        Input {
            typ: 0,
            time,
            vid,
            spd,
            xway,
            lane,
            dir,
            seg: pos / 5280,
            pos,
            qid: -1,
            s_init: -1,
            s_end: -1,
            dow: -1,
            tod: -1,
            day: -1,
        }
    }
}

impl fmt::Display for Input {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.fields();
        for (i, x) in v.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{x}")?;
        }
        Ok(())
    }
}

/// Why an input line was not accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)] // variant docs say what the fields hold
pub enum Reject {
    /// Not 15 fields.
    FieldCount { found: usize },
    /// A field is not an integer; `field` is 0-based, `column` is the 1-based byte column.
    NotInteger {
        field: usize,
        column: usize,
        text: String,
    },
    /// Type is not 0, 2, 3 or 4.
    UnknownType(i64),
    /// Time is negative.
    NegativeTime(i64),
    /// Time is smaller than the previous accepted line's.
    DecreasingTime { time: i64, previous: i64 },
    /// A position-report field is out of range.
    OutOfRange { field: &'static str, value: i64 },
    /// A second position report of the same vehicle with the same Time.
    DuplicateReport { vid: i64, time: i64 },
}

impl fmt::Display for Reject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reject::FieldCount { found } => {
                write!(f, "expected {INPUT_FIELDS} fields, found {found}")
            }
            Reject::NotInteger {
                field,
                column,
                text,
            } => write!(
                f,
                "column {column}: field {} is {text:?}, expected an integer",
                field + 1
            ),
            Reject::UnknownType(t) => write!(f, "unknown type {t}, expected 0, 2, 3 or 4"),
            Reject::NegativeTime(t) => write!(f, "negative Time {t}"),
            Reject::DecreasingTime { time, previous } => {
                write!(f, "Time {time} is before the previous line's {previous}")
            }
            Reject::OutOfRange { field, value } => write!(f, "{field} {value} is out of range"),
            Reject::DuplicateReport { vid, time } => {
                write!(f, "second position report of vehicle {vid} at Time {time}")
            }
        }
    }
}

/// Parses one input line (no trailing newline needed; a trailing `\r` is accepted).
pub fn parse_input(line: &str) -> Result<Input, Reject> {
    let line = line.strip_suffix('\r').unwrap_or(line);
    let mut f = [0i64; INPUT_FIELDS];
    let mut n = 0;
    let mut column = 1;
    for text in line.split(',') {
        if n < INPUT_FIELDS {
            let t = text.trim();
            f[n] = t.parse::<i64>().map_err(|_| Reject::NotInteger {
                field: n,
                column,
                text: text.chars().take(40).collect(),
            })?;
        }
        n += 1;
        column += text.len() + 1;
    }
    if n != INPUT_FIELDS {
        return Err(Reject::FieldCount { found: n });
    }
    Ok(Input::from_fields(f))
}

/// The global input checks of doc section 8 that need the whole stream in order:
/// type, Time monotonicity, ranges of position fields, duplicate reports.
/// One `InputFilter` sees every accepted line in file order.
#[derive(Debug, Default)]
pub struct InputFilter {
    last_time: i64,
    /// Time of each vehicle's latest accepted position report.
    last_report: HashMap<i64, i64>,
}

impl InputFilter {
    /// A filter that has seen nothing.
    pub fn new() -> InputFilter {
        InputFilter::default()
    }

    /// Accepts or rejects `t`; an accepted tuple updates the filter's state.
    pub fn check(&mut self, t: &Input) -> Result<(), Reject> {
        if !matches!(t.typ, 0 | 2 | 3 | 4) {
            return Err(Reject::UnknownType(t.typ));
        }
        if t.time < 0 {
            return Err(Reject::NegativeTime(t.time));
        }
        if t.time < self.last_time {
            return Err(Reject::DecreasingTime {
                time: t.time,
                previous: self.last_time,
            });
        }
        if t.vid < 0 {
            return Err(Reject::OutOfRange {
                field: "VID",
                value: t.vid,
            });
        }
        if t.typ == 0 {
            let checks: [(&'static str, i64, i64, i64); 5] = [
                ("XWay", t.xway, 0, i64::MAX),
                ("Lane", t.lane, 0, 4),
                ("Dir", t.dir, 0, 1),
                ("Seg", t.seg, 0, 99),
                ("Pos", t.pos, 0, 527_999),
            ];
            for (field, value, lo, hi) in checks {
                if value < lo || value > hi {
                    return Err(Reject::OutOfRange { field, value });
                }
            }
            if self.last_report.get(&t.vid) == Some(&t.time) {
                return Err(Reject::DuplicateReport {
                    vid: t.vid,
                    time: t.time,
                });
            }
            self.last_report.insert(t.vid, t.time);
        }
        self.last_time = t.time;
        Ok(())
    }
}

/// One output line (doc section 3). `emit` is the simulation second of production.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(missing_docs)] // fields are named after the doc's output columns
pub enum Output {
    /// `0,VID,Time,Emit,LAV,Toll`
    Toll {
        vid: i64,
        time: i64,
        emit: i64,
        lav: i64,
        toll: i64,
    },
    /// `1,Time,Emit,VID,Seg`
    Accident {
        time: i64,
        emit: i64,
        vid: i64,
        seg: i64,
    },
    /// `2,Time,Emit,ResultTime,QID,Bal`
    Balance {
        time: i64,
        emit: i64,
        result_time: i64,
        qid: i64,
        bal: i64,
    },
    /// `3,Time,Emit,QID,Bal`
    Daily {
        time: i64,
        emit: i64,
        qid: i64,
        bal: i64,
    },
    /// `4,Time,Emit,QID,TravelTime,Toll`
    Travel {
        time: i64,
        emit: i64,
        qid: i64,
        travel_time: i64,
        toll: i64,
    },
}

impl Output {
    /// The output type number 0..4.
    pub fn typ(&self) -> usize {
        match self {
            Output::Toll { .. } => 0,
            Output::Accident { .. } => 1,
            Output::Balance { .. } => 2,
            Output::Daily { .. } => 3,
            Output::Travel { .. } => 4,
        }
    }

    /// Time of the input tuple that caused this output.
    pub fn time(&self) -> i64 {
        match *self {
            Output::Toll { time, .. }
            | Output::Accident { time, .. }
            | Output::Balance { time, .. }
            | Output::Daily { time, .. }
            | Output::Travel { time, .. } => time,
        }
    }

    /// The simulation second at which the output was produced.
    pub fn emit(&self) -> i64 {
        match *self {
            Output::Toll { emit, .. }
            | Output::Accident { emit, .. }
            | Output::Balance { emit, .. }
            | Output::Daily { emit, .. }
            | Output::Travel { emit, .. } => emit,
        }
    }

    /// The same output with another emit time.
    pub fn with_emit(mut self, e: i64) -> Output {
        match &mut self {
            Output::Toll { emit, .. }
            | Output::Accident { emit, .. }
            | Output::Balance { emit, .. }
            | Output::Daily { emit, .. }
            | Output::Travel { emit, .. } => *emit = e,
        }
        self
    }

    /// Deadline in seconds (doc section 3).
    pub fn deadline(&self) -> i64 {
        match self {
            Output::Toll { .. } | Output::Accident { .. } | Output::Balance { .. } => 5,
            Output::Daily { .. } => 10,
            Output::Travel { .. } => 30,
        }
    }
}

impl fmt::Display for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Output::Toll {
                vid,
                time,
                emit,
                lav,
                toll,
            } => write!(f, "0,{vid},{time},{emit},{lav},{toll}"),
            Output::Accident {
                time,
                emit,
                vid,
                seg,
            } => write!(f, "1,{time},{emit},{vid},{seg}"),
            Output::Balance {
                time,
                emit,
                result_time,
                qid,
                bal,
            } => {
                write!(f, "2,{time},{emit},{result_time},{qid},{bal}")
            }
            Output::Daily {
                time,
                emit,
                qid,
                bal,
            } => write!(f, "3,{time},{emit},{qid},{bal}"),
            Output::Travel {
                time,
                emit,
                qid,
                travel_time,
                toll,
            } => {
                write!(f, "4,{time},{emit},{qid},{travel_time},{toll}")
            }
        }
    }
}

/// Parses an output line; the error says what was expected.
pub fn parse_output(line: &str) -> Result<Output, String> {
    let line = line.trim_end_matches(['\r', '\n']);
    let v: Vec<i64> = line
        .split(',')
        .enumerate()
        .map(|(i, s)| {
            s.trim()
                .parse::<i64>()
                .map_err(|_| format!("field {} is {s:?}, expected an integer", i + 1))
        })
        .collect::<Result<_, _>>()?;
    let want = |n: usize| -> Result<(), String> {
        if v.len() == n {
            Ok(())
        } else {
            Err(format!(
                "type {} output needs {n} fields, found {}",
                v[0],
                v.len()
            ))
        }
    };
    match v.first() {
        Some(0) => want(6).map(|_| Output::Toll {
            vid: v[1],
            time: v[2],
            emit: v[3],
            lav: v[4],
            toll: v[5],
        }),
        Some(1) => want(5).map(|_| Output::Accident {
            time: v[1],
            emit: v[2],
            vid: v[3],
            seg: v[4],
        }),
        Some(2) => want(6).map(|_| Output::Balance {
            time: v[1],
            emit: v[2],
            result_time: v[3],
            qid: v[4],
            bal: v[5],
        }),
        Some(3) => want(5).map(|_| Output::Daily {
            time: v[1],
            emit: v[2],
            qid: v[3],
            bal: v[4],
        }),
        Some(4) => want(6).map(|_| Output::Travel {
            time: v[1],
            emit: v[2],
            qid: v[3],
            travel_time: v[4],
            toll: v[5],
        }),
        Some(t) => Err(format!("unknown output type {t}, expected 0..4")),
        None => Err("empty line".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_round_trip() {
        let line = "0,0,1,10,0,0,0,19,100320,-1,-1,-1,-1,-1,-1";
        let t = parse_input(line).expect("valid line");
        assert_eq!(t.seg, 19);
        assert_eq!(t.to_string(), line);
    }

    #[test]
    fn parse_errors_name_field_and_column() {
        assert_eq!(parse_input("0,1,2"), Err(Reject::FieldCount { found: 3 }));
        match parse_input("0,1,x2,3,4,5,6,7,8,9,10,11,12,13,14") {
            Err(Reject::NotInteger {
                field: 2,
                column: 5,
                ..
            }) => {}
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn filter_rejects_quirks() {
        let mut f = InputFilter::new();
        let a = Input::position(10, 1, 50, 0, 1, 0, 5280);
        assert!(f.check(&a).is_ok());
        assert_eq!(
            f.check(&a),
            Err(Reject::DuplicateReport { vid: 1, time: 10 })
        );
        let early = Input::position(9, 2, 50, 0, 1, 0, 5280);
        assert!(matches!(
            f.check(&early),
            Err(Reject::DecreasingTime { .. })
        ));
        let bad_lane = Input::position(11, 2, 50, 0, 5, 0, 5280);
        assert!(matches!(
            f.check(&bad_lane),
            Err(Reject::OutOfRange { field: "Lane", .. })
        ));
    }

    #[test]
    fn output_round_trip() {
        for line in [
            "0,7,10,11,35,128",
            "1,10,12,7,3",
            "2,10,11,9,4,55",
            "3,10,11,4,55",
            "4,10,11,4,600,12",
        ] {
            let o = parse_output(line).expect("valid output");
            assert_eq!(o.to_string(), line);
        }
        assert!(parse_output("0,1,2").is_err());
    }
}
