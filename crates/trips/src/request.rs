//! A trip request `<request time, origin (x, y), destination (x, y), latest departure>`
//! (Paper III's `r = <t_r, l_o, l_d, t_e>`), as rows of a Braid stream.

use braid_plan::batch::{Batch, Row, RowKey};
use braid_plan::types::{DataType, Field, Schema};
use serde::{Deserialize, Serialize};
use std::io::Write;

/// One trip request. Places are in meters on the city's plane; times in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// Request number, unique, increasing with time.
    pub id: i64,
    /// When it was made (t_r).
    pub t: i64,
    /// Origin.
    pub ox: i64,
    /// Origin.
    pub oy: i64,
    /// Destination.
    pub dx: i64,
    /// Destination.
    pub dy: i64,
    /// The latest time it must be served by (t_e >= t_r).
    pub deadline: i64,
}

/// The columns of a request stream, in order.
pub const COLUMNS: [&str; 7] = ["id", "t", "ox", "oy", "dx", "dy", "deadline"];

impl Request {
    /// The request as a point of the 4-dimensional request space (origin x, y,
    /// destination x, y): what the spatial partitioners split.
    pub fn point(&self) -> [f64; 4] {
        [
            self.ox as f64,
            self.oy as f64,
            self.dx as f64,
            self.dy as f64,
        ]
    }

    /// The length of its trip alone (Euclidean, meters).
    pub fn length(&self) -> f64 {
        dist(self.ox, self.oy, self.dx, self.dy)
    }

    /// The request in a row of [`schema`], or what is wrong with the row.
    pub fn from_row(row: &Row<'_>) -> Result<Request, String> {
        let mut v = [0i64; 7];
        for (i, x) in v.iter_mut().enumerate() {
            *x = row
                .int(i)
                .ok_or_else(|| format!("column `{}` is null or not an integer", COLUMNS[i]))?;
        }
        let r = Request::from_values(v);
        if r.deadline < r.t {
            return Err(format!(
                "request {}: deadline {} is before its request time {}",
                r.id, r.deadline, r.t
            ));
        }
        // Coordinates beyond 2^40 m would lose meters in f64 arithmetic and mean
        // nothing on a city's plane.
        const LIMIT: i64 = 1 << 40;
        if [r.ox, r.oy, r.dx, r.dy].iter().any(|c| c.abs() > LIMIT) {
            return Err(format!(
                "request {}: a coordinate is beyond +-2^40 meters",
                r.id
            ));
        }
        Ok(r)
    }

    /// The request of the values of [`COLUMNS`], in that order.
    pub fn from_values(v: [i64; 7]) -> Request {
        let [id, t, ox, oy, dx, dy, deadline] = v;
        Request {
            id,
            t,
            ox,
            oy,
            dx,
            dy,
            deadline,
        }
    }

    /// The row values of the request.
    pub fn values(&self) -> [i64; 7] {
        [
            self.id,
            self.t,
            self.ox,
            self.oy,
            self.dx,
            self.dy,
            self.deadline,
        ]
    }
}

/// Euclidean distance between two points, meters.
pub fn dist(ax: i64, ay: i64, bx: i64, by: i64) -> f64 {
    let x = (ax - bx) as f64;
    let y = (ay - by) as f64;
    (x * x + y * y).sqrt()
}

/// The schema of a request stream; `t` is its event time.
pub fn schema() -> Schema {
    let mut s = Schema::new(
        COLUMNS
            .iter()
            .map(|n| Field::new(n, DataType::Int64))
            .collect(),
    );
    s.event_time = Some(1);
    s
}

/// Requests as a batch (row i gets sequence number i).
pub fn batch(requests: &[Request]) -> Batch {
    let mut b = Batch::with_capacity(COLUMNS.len(), requests.len());
    for (i, r) in requests.iter().enumerate() {
        b.push_ints(
            RowKey {
                seq: i as u64,
                lane: 0,
            },
            &r.values(),
        );
    }
    b
}

/// Writes requests as CSV with a header line.
pub fn write_csv(requests: &[Request], out: &mut dyn Write) -> std::io::Result<()> {
    let mut w = std::io::BufWriter::new(out);
    writeln!(w, "{}", COLUMNS.join(","))?;
    for r in requests {
        let v = r.values();
        writeln!(
            w,
            "{},{},{},{},{},{},{}",
            v[0], v[1], v[2], v[3], v[4], v[5], v[6]
        )?;
    }
    w.flush()
}

/// Reads requests from a CSV file with the header [`write_csv`] writes; an error names
/// the line and column of the first value that is not what a request holds.
pub fn read_csv(path: &std::path::Path) -> std::io::Result<Vec<Request>> {
    let bad = |msg: String| std::io::Error::new(std::io::ErrorKind::InvalidData, msg);
    let mut r = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_path(path)
        .map_err(|e| bad(e.to_string()))?;
    let header = r.headers().map_err(|e| bad(e.to_string()))?.clone();
    if header.iter().ne(COLUMNS.iter().copied()) {
        return Err(bad(format!(
            "line 1: the header must be {}, found {}",
            COLUMNS.join(","),
            header.iter().collect::<Vec<_>>().join(",")
        )));
    }
    let mut out = Vec::new();
    for rec in r.records() {
        let rec = rec.map_err(|e| bad(e.to_string()))?;
        let line = rec.position().map_or(0, |p| p.line());
        if rec.len() != COLUMNS.len() {
            return Err(bad(format!(
                "line {line}: {} fields, expected {}",
                rec.len(),
                COLUMNS.len()
            )));
        }
        let mut v = [0i64; 7];
        for (i, x) in v.iter_mut().enumerate() {
            *x = rec[i].trim().parse().map_err(|_| {
                bad(format!(
                    "line {line}, column {} ({}): `{}` is not an integer",
                    i + 1,
                    COLUMNS[i],
                    &rec[i]
                ))
            })?;
        }
        out.push(Request::from_values(v));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_round_trips_and_a_bad_value_is_named_by_line_and_column() {
        let dir = std::env::temp_dir().join(format!("trips-csv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("r.csv");
        let reqs = crate::generate::generate(&crate::generate::GenConfig {
            requests: 100,
            ..Default::default()
        });
        write_csv(&reqs, &mut std::fs::File::create(&p).unwrap()).unwrap();
        assert_eq!(read_csv(&p).unwrap(), reqs);
        let mut text = std::fs::read_to_string(&p).unwrap();
        text.push_str("100,5,1,2,x3,4,600\n");
        std::fs::write(&p, text).unwrap();
        let e = read_csv(&p).unwrap_err().to_string();
        assert!(e.contains("line 102, column 5 (dx)"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
