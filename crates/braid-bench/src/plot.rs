//! Line charts of benchmark results as SVG, drawn with `plotters` (SVG backend only:
//! text is written as SVG `<text>`, so no font files are needed).
//!
//! A [`Chart`] holds named [`Series`] of `(x, y)` points, optional horizontal reference
//! lines (a deadline, the number of cores) and axis settings; [`Chart::to_svg`] renders
//! it. A logarithmic x axis has base 2 (ticks at powers of 2: partition counts), a
//! logarithmic y axis base 10; both are widened to whole powers of their base. Points
//! that cannot be drawn (not finite, or not positive on a logarithmic axis) are left
//! out, and a long series keeps only the first, lowest, highest and last point of each
//! pixel column, so an SVG's size is bounded by its width.
//!
//! ```
//! use braid_bench::plot::{Chart, Series};
//!
//! let chart = Chart {
//!     title: "Throughput vs q".into(),
//!     x_label: "q (partitions)".into(),
//!     y_label: "input rows/s".into(),
//!     log_x: true,
//!     series: vec![Series::line("fsplit", vec![(2.0, 9e6), (64.0, 7e6), (512.0, 3e6)])],
//!     ..Chart::default()
//! };
//! let svg = chart.to_svg(800, 450)?;
//! assert!(svg.contains("Throughput vs q") && svg.contains("fsplit"));
//! # Ok::<(), anyhow::Error>(())
//! ```

use anyhow::{anyhow, Result};
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::ops::Range;
use std::path::Path;

/// One named line.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Series {
    /// The name shown in the legend.
    pub name: String,
    /// The `(x, y)` points, joined in this order.
    pub points: Vec<(f64, f64)>,
}

impl Series {
    /// A line through `points`.
    pub fn line(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            name: name.into(),
            points,
        }
    }
}

/// A 2-D line chart with a title, axis labels, series and reference lines.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Chart {
    /// Title above the plot.
    pub title: String,
    /// Label of the x axis.
    pub x_label: String,
    /// Label of the y axis.
    pub y_label: String,
    /// Logarithmic x axis, base 2.
    pub log_x: bool,
    /// Logarithmic y axis, base 10.
    pub log_y: bool,
    /// The series, drawn in order (later ones on top).
    pub series: Vec<Series>,
    /// Horizontal reference lines `(y, label)`, dashed, labelled at their right end and
    /// always inside the y range.
    pub hlines: Vec<(f64, String)>,
}

/// Okabe-Ito palette (colour-blind safe), ordered for contrast on white; from the
/// ninth series on, lines are dashed.
const PALETTE: [RGBColor; 8] = [
    RGBColor(0x00, 0x72, 0xB2),
    RGBColor(0xD5, 0x5E, 0x00),
    RGBColor(0x00, 0x9E, 0x73),
    RGBColor(0xCC, 0x79, 0xA7),
    RGBColor(0xE6, 0x9F, 0x00),
    RGBColor(0x56, 0xB4, 0xE9),
    RGBColor(0x00, 0x00, 0x00),
    RGBColor(0xC9, 0xB8, 0x00),
];
/// Colour of the reference lines.
const REFERENCE: RGBColor = RGBColor(0xB0, 0x00, 0x20);
/// Series with at most this many points get a marker on every point.
const MARKED: usize = 50;

impl Chart {
    /// Renders the chart as a standalone SVG document of `width` x `height` pixels.
    pub fn to_svg(&self, width: u32, height: u32) -> Result<String> {
        let (w, h) = (width.max(240), height.max(160));
        let drawable = |p: &(f64, f64)| {
            p.0.is_finite()
                && p.1.is_finite()
                && (!self.log_x || p.0 > 0.0)
                && (!self.log_y || p.1 > 0.0)
        };
        let xs = self
            .series
            .iter()
            .flat_map(|s| &s.points)
            .filter(|p| drawable(p))
            .map(|p| p.0);
        let ys = self
            .series
            .iter()
            .flat_map(|s| &s.points)
            .filter(|p| drawable(p))
            .map(|p| p.1)
            .chain(
                self.hlines
                    .iter()
                    .map(|l| l.0)
                    .filter(|&y| y.is_finite() && (!self.log_y || y > 0.0)),
            );
        let x = axis_range(xs, self.log_x, 2.0, false);
        let y = axis_range(ys, self.log_y, 10.0, true);
        // Roughly one pixel column per unit of plot width, for decimation.
        let columns = w.saturating_sub(220).max(40) as usize;
        let lines: Vec<(String, Vec<(f64, f64)>)> = self
            .series
            .iter()
            .map(|s| {
                let pts: Vec<(f64, f64)> = s.points.iter().copied().filter(drawable).collect();
                (s.name.clone(), decimate(&pts, &x, self.log_x, columns))
            })
            .collect();
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
            root.fill(&WHITE)
                .map_err(|e| anyhow!("drawing the chart: {e}"))?;
            // The legend goes to the right of the plot, where it hides no data.
            let longest = lines.iter().map(|l| l.0.chars().count()).max();
            let legend_w = longest.map_or(0, |n| (40 + 7 * n as u32).min(w / 3));
            let (plot, legend) = root.split_horizontally(w - legend_w);
            match (self.log_x, self.log_y) {
                (false, false) => self.draw(&plot, &lines, x.clone(), y.clone()),
                (true, false) => self.draw(&plot, &lines, x.clone().log_scale().base(2.0), y),
                (false, true) => self.draw(&plot, &lines, x.clone(), y.log_scale()),
                (true, true) => self.draw(
                    &plot,
                    &lines,
                    x.clone().log_scale().base(2.0),
                    y.log_scale(),
                ),
            }?;
            draw_legend(&legend, &lines)?;
            root.present()
                .map_err(|e| anyhow!("drawing the chart: {e}"))?;
        }
        Ok(svg)
    }

    /// Renders the chart into the SVG file `path`.
    pub fn write_svg(&self, path: &Path, width: u32, height: u32) -> Result<()> {
        let svg = self.to_svg(width, height)?;
        std::fs::write(path, svg).map_err(|e| anyhow!("writing {}: {e}", path.display()))
    }

    /// Draws on `root` with the x and y coordinates `x` and `y`.
    fn draw<X, Y>(
        &self,
        root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
        lines: &[(String, Vec<(f64, f64)>)],
        x: X,
        y: Y,
    ) -> Result<()>
    where
        X: AsRangedCoord<Value = f64>,
        Y: AsRangedCoord<Value = f64>,
        X::CoordDescType: ValueFormatter<f64>,
        Y::CoordDescType: ValueFormatter<f64>,
    {
        let err = |e: DrawingAreaErrorKind<_>| anyhow!("drawing the chart: {e}");
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, ("sans-serif", 16).into_font())
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(64)
            .build_cartesian_2d(x, y)
            .map_err(err)?;
        let log_x = self.log_x;
        let x_format = move |v: &f64| {
            if log_x {
                power_of_two_label(*v)
            } else {
                short_label(*v)
            }
        };
        let y_format = |v: &f64| short_label(*v);
        chart
            .configure_mesh()
            .x_desc(&self.x_label)
            .y_desc(&self.y_label)
            .x_labels(10)
            .y_labels(10)
            .x_label_formatter(&x_format)
            .y_label_formatter(&y_format)
            .light_line_style(WHITE)
            .bold_line_style(RGBColor(0xE4, 0xE4, 0xE4))
            .label_style(("sans-serif", 12))
            .axis_desc_style(("sans-serif", 13))
            .draw()
            .map_err(err)?;
        let (x0, x1) = {
            let r = chart.x_range();
            (r.start, r.end)
        };
        for (i, (_, pts)) in lines.iter().enumerate() {
            let (colour, dashed) = line_style(i);
            let style = colour.stroke_width(2);
            if dashed {
                chart
                    .draw_series(DashedLineSeries::new(pts.iter().copied(), 6, 3, style))
                    .map_err(err)?;
            } else {
                chart
                    .draw_series(LineSeries::new(pts.iter().copied(), style))
                    .map_err(err)?;
            }
            if pts.len() <= MARKED {
                chart
                    .draw_series(
                        pts.iter()
                            .map(|&p| Circle::new(p, 3, colour.filled()).into_dyn()),
                    )
                    .map_err(err)?;
            }
        }
        for (y, label) in &self.hlines {
            if !y.is_finite() || (self.log_y && *y <= 0.0) {
                continue;
            }
            let style = REFERENCE.stroke_width(1);
            chart
                .draw_series(DashedLineSeries::new([(x0, *y), (x1, *y)], 7, 4, style))
                .map_err(err)?;
            let text = ("sans-serif", 12)
                .into_font()
                .color(&REFERENCE)
                .pos(Pos::new(HPos::Right, VPos::Bottom));
            chart
                .draw_series(std::iter::once(Text::new(label.clone(), (x1, *y), text)))
                .map_err(err)?;
        }
        Ok(())
    }
}

/// The colour of the `i`-th series and whether it is dashed.
fn line_style(i: usize) -> (RGBColor, bool) {
    (PALETTE[i % PALETTE.len()], i >= PALETTE.len())
}

/// One legend line per series, top down from the plot's top, as far as there is room.
fn draw_legend(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    lines: &[(String, Vec<(f64, f64)>)],
) -> Result<()> {
    let err = |e: DrawingAreaErrorKind<_>| anyhow!("drawing the legend: {e}");
    let (_, height) = area.dim_in_pixel();
    let font = ("sans-serif", 12).into_font().color(&BLACK);
    for (i, (name, _)) in lines.iter().enumerate() {
        let y = 50 + 18 * i as i32;
        if y + 18 > height as i32 {
            break;
        }
        let (colour, dashed) = line_style(i);
        let pieces: &[(i32, i32)] = if dashed {
            &[(2, 8), (11, 17), (20, 24)]
        } else {
            &[(2, 24)]
        };
        for &(x0, x1) in pieces {
            area.draw(&PathElement::new(
                vec![(x0, y), (x1, y)],
                colour.stroke_width(2),
            ))
            .map_err(err)?;
        }
        area.draw(&Text::new(
            name.clone(),
            (30, y),
            font.clone().pos(Pos::new(HPos::Left, VPos::Center)),
        ))
        .map_err(err)?;
    }
    Ok(())
}

/// The axis range of `values`: on a logarithmic axis widened to whole powers of `base`,
/// on a linear one from 0 when `from_zero` and the values are positive, with a margin;
/// a sensible default for no values or a single one.
fn axis_range(
    values: impl Iterator<Item = f64>,
    log: bool,
    base: f64,
    from_zero: bool,
) -> Range<f64> {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if lo > hi {
        return if log { 1.0..base } else { 0.0..1.0 };
    }
    if log {
        let lo = base.powf((lo.ln() / base.ln()).floor());
        let mut hi = base.powf((hi.ln() / base.ln()).ceil());
        if hi <= lo {
            hi = lo * base;
        }
        return lo..hi;
    }
    let lo = if from_zero && lo >= 0.0 { 0.0 } else { lo };
    if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
        return (lo - 1.0)..(hi + 1.0);
    }
    let pad = if from_zero { 0.05 * (hi - lo) } else { 0.0 };
    lo..(hi + pad)
}

/// Keeps, of the points of a series that fall into the same of `columns` columns of the
/// x range, the first, the lowest, the highest and the last (in their order); series of
/// at most four points per column are kept whole.
fn decimate(pts: &[(f64, f64)], x: &Range<f64>, log: bool, columns: usize) -> Vec<(f64, f64)> {
    if pts.len() <= 4 * columns {
        return pts.to_vec();
    }
    let pos = |v: f64| {
        if log {
            (v.ln() - x.start.ln()) / (x.end.ln() - x.start.ln())
        } else {
            (v - x.start) / (x.end - x.start)
        }
    };
    let column = |v: f64| (pos(v) * columns as f64).floor() as i64;
    let mut out = Vec::new();
    let mut start = 0;
    while start < pts.len() {
        let c = column(pts[start].0);
        let mut end = start + 1;
        while end < pts.len() && column(pts[end].0) == c {
            end += 1;
        }
        let run = &pts[start..end];
        let (mut lo, mut hi) = (0, 0);
        for (i, p) in run.iter().enumerate() {
            if p.1 < run[lo].1 {
                lo = i;
            }
            if p.1 > run[hi].1 {
                hi = i;
            }
        }
        let mut keep = vec![0, lo, hi, run.len() - 1];
        keep.sort_unstable();
        keep.dedup();
        out.extend(keep.into_iter().map(|i| run[i]));
        start = end;
    }
    out
}

/// A tick label with a `k`, `M` or `G` suffix and at most three significant digits.
pub fn short_label(v: f64) -> String {
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let text = format!("{scaled:.3}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        &text
    };
    let text = if text == "-0" { "0" } else { text };
    format!("{text}{suffix}")
}

/// A tick label on the base-2 axis: whole numbers as they are, `Ki`/`Mi` above 8192.
fn power_of_two_label(v: f64) -> String {
    if v >= 16384.0 && (v / 1024.0).fract() == 0.0 {
        if v >= 16.0 * 1048576.0 {
            format!("{}Mi", v / 1048576.0)
        } else {
            format!("{}Ki", v / 1024.0)
        }
    } else {
        short_label(v)
    }
}
