//! What a run reports of its runtime faults (see `Shared::fault`): the rows skipped at
//! each site, and one fault's operator, row and message.

use braid_plan::batch::RowKey;

/// Rows skipped on runtime faults (overflow, division by zero, a failed cast) at one
/// site of the plan: a stream function (a query stage) or a split.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Faults {
    /// The site: `query1`, `query2_2` (stage 2 of query 2), `split of calls`.
    pub site: String,
    /// Rows skipped.
    pub count: u64,
    /// The [`Faults::KEEP`] of them with the least sequence numbers (the first rows),
    /// in that order.
    pub first: Vec<FaultRow>,
}

impl Faults {
    /// How many faults are kept for the report.
    pub const KEEP: usize = 20;
}

impl std::fmt::Display for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{}: {} row(s) skipped on runtime faults (--on-error fail stops at the first)",
            self.site, self.count
        )?;
        for r in &self.first {
            writeln!(f, "  {r}")?;
        }
        if self.count > self.first.len() as u64 {
            writeln!(f, "  ... and {} more", self.count - self.first.len() as u64)?;
        }
        Ok(())
    }
}

/// One runtime fault: which operator met it, on which row, and what went wrong.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct FaultRow {
    /// The row's sequence number (with [`RowKey::AT_END`] for a result made at the end
    /// of an epoch or of the input).
    pub seq: u64,
    /// The source whose rows `seq` counts (None for a result, or a row an earlier stage
    /// made).
    pub source: Option<String>,
    /// The row's line in the source's text, when the source says where its rows are
    /// (a CSV file, standard input, TCP).
    pub line: Option<u64>,
    /// The operator: `filter`, `project`, `aggregate`, `join`, `lookup`, `split`, ...
    pub operator: String,
    /// What went wrong, in which expression, on which values.
    pub what: String,
}

impl std::fmt::Display for FaultRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}, ", self.operator)?;
        match (&self.source, self.line) {
            _ if RowKey::made_at_end(self.seq) => write!(f, "a result")?,
            (Some(s), Some(line)) => write!(f, "row {} of {s} (line {line})", self.seq + 1)?,
            (Some(s), None) => write!(f, "row {} of {s}", self.seq + 1)?,
            (None, _) => write!(f, "a row of the stage before")?,
        }
        write!(f, ": {}", self.what)
    }
}
