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
        [self.ox as f64, self.oy as f64, self.dx as f64, self.dy as f64]
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
        let r = Request {
            id: v[0],
            t: v[1],
            ox: v[2],
            oy: v[3],
            dx: v[4],
            dy: v[5],
            deadline: v[6],
        };
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
