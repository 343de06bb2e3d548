//! The fuzzer's random input: two streams and a table, written as CSV files, and the
//! declarations that read them (Braid's `CREATE STREAM` / `CREATE TABLE`, DuckDB's
//! column types).
//!
//! Event times follow the documented late-row rule, so that no row is late: a row
//! processed in epoch `e` (the epoch of the greatest event time so far, `floor(t /
//! epoch)`, negative times included) is late if its time is below `e * epoch -
//! lateness`; every row's time is at least that. A late row reported by Braid is a
//! disagreement.

use std::fmt::Write as _;
use std::path::Path;

/// A small, seedable random number generator (splitmix64): the fuzzer's runs are
/// reproducible from their seed alone, with no dependency.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % ((hi - lo + 1) as u64)) as i64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    /// One of `words`.
    pub fn word(&mut self, words: &[&'static str]) -> &'static str {
        words[self.below(words.len())]
    }

    /// One of `items`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// A column's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    /// BIGINT.
    Int,
    /// DOUBLE.
    Float,
    /// TEXT.
    Text,
    /// BOOLEAN (expressions only, no column has it).
    Bool,
}

impl Ty {
    /// The type's name in Braid.
    pub fn braid(self) -> &'static str {
        match self {
            Ty::Int => "BIGINT",
            Ty::Float => "DOUBLE",
            Ty::Text => "TEXT",
            Ty::Bool => "BOOLEAN",
        }
    }

    /// The type's name in DuckDB.
    pub fn duck(self) -> &'static str {
        match self {
            Ty::Int => "BIGINT",
            Ty::Float => "DOUBLE",
            Ty::Text => "VARCHAR",
            Ty::Bool => "BOOLEAN",
        }
    }
}

/// A value of the input (and of a result).
#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    /// NULL.
    Null,
    /// BIGINT.
    Int(i64),
    /// DOUBLE.
    Float(f64),
    /// TEXT.
    Str(String),
    /// BOOLEAN.
    Bool(bool),
}

/// A column of a relation.
#[derive(Clone, Debug)]
pub struct Col {
    /// Its name.
    pub name: &'static str,
    /// Its type.
    pub ty: Ty,
    /// Extreme values: compared, never computed with (they would overflow).
    pub extreme: bool,
}

/// A relation of the input: a stream or the table.
#[derive(Clone, Debug)]
pub struct Rel {
    /// The name it is declared as (and the DuckDB table's).
    pub name: &'static str,
    /// Its columns.
    pub cols: Vec<Col>,
    /// Its rows, in file order.
    pub rows: Vec<Vec<Val>>,
    /// How each text field is written: quoted or not (when it may be unquoted).
    pub quoted: Vec<Vec<bool>>,
}

/// What the generated data holds; each can be turned off to keep a known defect out
/// of a run (the CI sample).
#[derive(Clone, Copy, Debug)]
pub struct Features {
    /// Empty strings (`""` in the CSV) and strings of spaces only.
    pub empty_strings: bool,
    /// Negative event times.
    pub negative_times: bool,
    /// Text with leading or trailing spaces in the table.
    pub padded_table_text: bool,
}

impl Features {
    /// Everything.
    pub const ALL: Features = Features {
        empty_strings: true,
        negative_times: true,
        padded_table_text: true,
    };

    /// The features named in `text` (`empty_strings,negative_times`) turned off.
    pub fn without(text: &str) -> anyhow::Result<Features> {
        let mut f = Features::ALL;
        for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match name {
                "empty_strings" => f.empty_strings = false,
                "negative_times" => f.negative_times = false,
                "padded_table_text" => f.padded_table_text = false,
                other => anyhow::bail!(
                    "unknown data feature `{other}`: expected empty_strings, negative_times or padded_table_text"
                ),
            }
        }
        Ok(f)
    }
}

/// The input of one round of queries.
#[derive(Clone, Debug)]
pub struct Dataset {
    /// Stream `s1`.
    pub s1: Rel,
    /// Stream `s2`.
    pub s2: Rel,
    /// Table `t`.
    pub t: Rel,
    /// The streams' epoch length.
    pub epoch: i64,
    /// The lateness the rows were generated within (streams `s1`, `s2`).
    pub lateness: i64,
    /// The lateness of `s1w` and `s2w` (the same files): enough that a joined pair is
    /// never late for a window over the join (see [`Dataset::window_lateness`]).
    pub join_lateness: i64,
}

/// The widest interval-join bound the queries use, either way.
pub const MAX_BOUND: i64 = 5;

const KEYS: [i64; 5] = [0, 1, 2, 3, -1];
const EXTREMES: [i64; 6] = [i64::MIN, i64::MAX, 0, -1, 1, i64::MAX - 1];
const TEXTS: [&str; 12] = [
    "abc",
    "ABC",
    "Hello World",
    "a,b",
    "say \"hi\"",
    "x",
    "xyz",
    "héllo",
    "a_b%c",
    "b",
    "abcabc",
    "Zz",
];
const PADDED: [&str; 4] = ["  padded  ", " abc", "xyz ", " x "];
const EMPTY: [&str; 2] = ["", "   "];

fn text(rng: &mut Rng, f: Features, table: bool) -> Val {
    let r = rng.below(20);
    if r < 2 {
        return Val::Null;
    }
    if r < 4 && f.empty_strings {
        return Val::Str(rng.pick(&EMPTY).to_string());
    }
    if r < 7 && (!table || f.padded_table_text) {
        return Val::Str(rng.pick(&PADDED).to_string());
    }
    Val::Str(rng.pick(&TEXTS).to_string())
}

fn key(rng: &mut Rng) -> Val {
    if rng.chance(0.1) {
        Val::Null
    } else {
        Val::Int(*rng.pick(&KEYS))
    }
}

fn small(rng: &mut Rng) -> Val {
    if rng.chance(0.12) {
        Val::Null
    } else {
        Val::Int(rng.range(-20, 20))
    }
}

fn extreme(rng: &mut Rng) -> Val {
    match rng.below(10) {
        0 => Val::Null,
        1..=4 => Val::Int(*rng.pick(&EXTREMES)),
        _ => Val::Int(rng.range(-1000, 1000)),
    }
}

fn float(rng: &mut Rng) -> Val {
    match rng.below(12) {
        0 => Val::Null,
        1 => Val::Float(0.0),
        2 => Val::Float(*rng.pick(&[1e6, -1e6, 0.5, -0.25, 123456.75])),
        _ => Val::Float(rng.range(-4000, 4000) as f64 / 4.0),
    }
}

/// Floor division (correct for negative `a`).
pub fn floor_div(a: i64, b: i64) -> i64 {
    a.div_euclid(b)
}

/// Event times for `n` rows: mostly increasing, some out of order within `lateness`
/// of the current epoch's start (never late by the rule in the module's comment).
fn times(rng: &mut Rng, n: usize, epoch: i64, lateness: i64, negative: bool) -> Vec<i64> {
    let mut t = if negative { rng.range(-40, -5) } else { 0 };
    let mut max = t;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let v = if rng.chance(0.2) {
            // Out of order: anywhere from the oldest time not late up to the newest.
            let oldest = floor_div(max, epoch) * epoch - lateness;
            let lo = if negative { oldest } else { oldest.max(0) };
            rng.range(lo.min(max), max)
        } else {
            t += rng.range(0, 4);
            t
        };
        max = max.max(v);
        out.push(v);
    }
    out
}

/// A random dataset from `rng`.
pub fn generate(rng: &mut Rng, f: Features) -> Dataset {
    let epoch = *rng.pick(&[1, 1, 2, 5, 10]);
    let lateness = *rng.pick(&[0, 0, 3, 10]);
    // One sequence of times for both streams, dealt to them: each stream's own times
    // then keep the rule, and so do the two read merged.
    let n1 = rng.range(5, 120) as usize;
    let n2 = rng.range(5, 120) as usize;
    let all = times(rng, n1 + n2, epoch, lateness, f.negative_times);
    let (mut t1, mut t2) = (Vec::new(), Vec::new());
    for v in all {
        if (rng.chance(0.5) || t2.len() >= n2) && t1.len() < n1 {
            t1.push(v);
        } else {
            t2.push(v);
        }
    }
    let col = |name, ty| Col {
        name,
        ty,
        extreme: false,
    };
    let mut s1 = Rel {
        name: "s1",
        cols: vec![
            col("k", Ty::Int),
            col("v", Ty::Int),
            Col {
                name: "b",
                ty: Ty::Int,
                extreme: true,
            },
            col("x", Ty::Float),
            col("s", Ty::Text),
            col("ts", Ty::Int),
        ],
        rows: Vec::new(),
        quoted: Vec::new(),
    };
    for ts in t1 {
        s1.rows.push(vec![
            key(rng),
            small(rng),
            extreme(rng),
            float(rng),
            text(rng, f, false),
            Val::Int(ts),
        ]);
    }
    let mut s2 = Rel {
        name: "s2",
        cols: vec![
            col("k", Ty::Int),
            col("v", Ty::Int),
            col("x", Ty::Float),
            col("s", Ty::Text),
            col("ts", Ty::Int),
        ],
        rows: Vec::new(),
        quoted: Vec::new(),
    };
    for ts in t2 {
        s2.rows.push(vec![
            key(rng),
            small(rng),
            float(rng),
            text(rng, f, false),
            Val::Int(ts),
        ]);
    }
    let mut t = Rel {
        name: "t",
        cols: vec![col("k", Ty::Int), col("name", Ty::Text), col("w", Ty::Int)],
        rows: Vec::new(),
        quoted: Vec::new(),
    };
    for _ in 0..rng.range(2, 8) {
        t.rows.push(vec![key(rng), text(rng, f, true), small(rng)]);
    }
    for rel in [&mut s1, &mut s2, &mut t] {
        rel.quoted = rel
            .rows
            .iter()
            .map(|r| r.iter().map(|_| rng.chance(0.5)).collect())
            .collect();
    }
    Dataset {
        s1,
        s2,
        t,
        epoch,
        lateness,
        join_lateness: lateness + epoch + MAX_BOUND,
    }
}

/// A field as CSV writes it (PostgreSQL's rule: an unquoted empty field is NULL, `""`
/// the empty string; a string that needs quotes has them, others when `quote`).
fn field(v: &Val, quote: bool) -> String {
    match v {
        Val::Null => String::new(),
        Val::Int(i) => i.to_string(),
        Val::Float(x) => format!("{x:?}"),
        Val::Bool(b) => b.to_string(),
        Val::Str(s) => {
            let needs = s.is_empty()
                || s.trim() != s
                || s.contains([',', '"', '\n', '\r'])
                || s.trim().is_empty();
            if needs || quote {
                format!("\"{}\"", s.replace('"', "\"\""))
            } else {
                s.clone()
            }
        }
    }
}

impl Rel {
    /// The CSV text of the relation, with a header.
    pub fn csv(&self) -> String {
        let mut out = String::new();
        let names: Vec<&str> = self.cols.iter().map(|c| c.name).collect();
        out.push_str(&names.join(","));
        out.push('\n');
        for (i, row) in self.rows.iter().enumerate() {
            let q = self.quoted.get(i);
            let fields: Vec<String> = row
                .iter()
                .enumerate()
                .map(|(j, v)| field(v, q.and_then(|q| q.get(j)).copied().unwrap_or(false)))
                .collect();
            let _ = writeln!(out, "{}", fields.join(","));
        }
        out
    }

    /// The relation with only the rows `keep` says.
    pub fn keep(&self, keep: &[bool]) -> Rel {
        let mut r = self.clone();
        r.rows = self
            .rows
            .iter()
            .zip(keep)
            .filter(|(_, k)| **k)
            .map(|(r, _)| r.clone())
            .collect();
        r.quoted = self
            .quoted
            .iter()
            .zip(keep)
            .filter(|(_, k)| **k)
            .map(|(r, _)| r.clone())
            .collect();
        r
    }

    fn braid_columns(&self) -> String {
        self.cols
            .iter()
            .map(|c| {
                let nn = if c.name == "ts" { " NOT NULL" } else { "" };
                format!("{} {}{nn}", c.name, c.ty.braid())
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The DuckDB columns, name and type.
    pub fn duck_columns(&self) -> Vec<(String, String)> {
        self.cols
            .iter()
            .map(|c| (c.name.to_string(), c.ty.duck().to_string()))
            .collect()
    }
}

impl Dataset {
    /// The relations, streams first.
    pub fn rels(&self) -> [&Rel; 3] {
        [&self.s1, &self.s2, &self.t]
    }

    /// Writes the CSV files into `dir`.
    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
        for rel in self.rels() {
            let path = dir.join(format!("{}.csv", rel.name));
            std::fs::write(&path, rel.csv())
                .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        }
        Ok(())
    }

    /// Braid's declarations of the files in `dir`: `s1` and `s2` with the generated
    /// lateness, `s1w` and `s2w` (the same files) with [`Dataset::join_lateness`], and
    /// the table `t`.
    pub fn declarations(&self) -> String {
        let mut out = String::new();
        for rel in [&self.s1, &self.s2] {
            for (suffix, lateness) in [("", self.lateness), ("w", self.join_lateness)] {
                let _ = writeln!(
                    out,
                    "CREATE STREAM {}{suffix} ({}) WITH (source = 'csv', path = '{}.csv', header = true, event_time = 'ts', epoch = {}, lateness = {lateness});",
                    rel.name,
                    rel.braid_columns(),
                    rel.name,
                    self.epoch
                );
            }
        }
        let _ = writeln!(
            out,
            "CREATE TABLE t ({}) WITH (path = 't.csv', header = true);",
            self.t.braid_columns()
        );
        out
    }
}
