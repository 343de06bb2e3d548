//! What a benchmark writes besides its plots: CSV files of `Serialize` rows (a header
//! from the field names, via `csv` and serde) and markdown tables (via `comfy-table`).
//!
//! ```
//! use braid_bench::report::{markdown_table, Align};
//!
//! let md = markdown_table(
//!     &[("q", Align::Right), ("rows/s", Align::Right)],
//!     vec![vec!["64".into(), "1200000".into()]],
//! );
//! assert!(md.lines().nth(1).is_some_and(|l| l.starts_with("|---")));
//! ```

use anyhow::{Context, Result};
use comfy_table::{presets, CellAlignment, Table};
use serde::Serialize;
use std::path::Path;

/// Writes `rows` as a CSV file with a header line of the field names.
pub fn write_csv<T: Serialize>(path: &Path, rows: impl IntoIterator<Item = T>) -> Result<()> {
    let mut w =
        csv::Writer::from_path(path).with_context(|| format!("creating {}", path.display()))?;
    for row in rows {
        w.serialize(row)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    w.flush()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// How a column's cells are aligned (padding only: the markdown keeps `|---|`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    /// Text, names.
    Left,
    /// Numbers.
    Right,
}

/// A markdown table (GitHub's pipe tables) of `columns` (name, alignment) and `rows`,
/// ending in a newline; `|` inside a cell is escaped.
pub fn markdown_table<S: AsRef<str>>(columns: &[(S, Align)], rows: Vec<Vec<String>>) -> String {
    let escape = |s: &str| s.replace('|', "\\|");
    let mut table = Table::new();
    table
        .load_preset(presets::ASCII_MARKDOWN)
        .set_header(columns.iter().map(|(name, _)| escape(name.as_ref())));
    for row in rows {
        table.add_row(row.iter().map(|c| escape(c)));
    }
    for (i, (_, align)) in columns.iter().enumerate() {
        if let Some(c) = table.column_mut(i) {
            c.set_cell_alignment(match align {
                Align::Left => CellAlignment::Left,
                Align::Right => CellAlignment::Right,
            });
        }
    }
    let mut text = table.trim_fmt();
    text.push('\n');
    text
}

/// `v` rounded to `digits` decimals (for CSV fields: serde writes the shortest form).
pub fn round(v: f64, digits: i32) -> f64 {
    let k = 10f64.powi(digits);
    (v * k).round() / k
}

/// A progress bar of `total` steps (`what`) on standard error: drawn on a terminal,
/// hidden otherwise (then [`say`] prints plain lines).
pub fn bar(total: u64, what: &str) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    let bar = match std::io::stderr().is_terminal() {
        true => indicatif::ProgressBar::new(total),
        false => indicatif::ProgressBar::hidden(),
    };
    let template =
        format!("{{spinner}} [{{elapsed_precise}}] {{bar:30}} {{pos}}/{{len}} {what} {{msg}}");
    if let Ok(style) = indicatif::ProgressStyle::with_template(&template) {
        bar.set_style(style);
    }
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}

/// Prints `line` on standard error above `bar` (or plainly when it is hidden).
pub fn say(bar: &indicatif::ProgressBar, line: &str) {
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}
