//! Standalone SVG charts for Braid's benchmark results (std only).
//!
//! A [`Chart`] holds any number of [`Series`] (drawn as lines or as point
//! clouds), optional horizontal reference lines (e.g. a response-time
//! deadline) and axis settings; [`Chart::to_svg`] renders it to a
//! self-contained SVG document.
//!
//! Rendering rules:
//!
//! * Linear axes get "nice" 1-2-5 ticks; a logarithmic x axis has ticks at
//!   powers of 2, a logarithmic y axis at powers of 10 (or at 1-2-5 multiples
//!   when the range spans less than three decades).
//! * Tick labels use `k`/`M`/`G` suffixes for large numbers (binary
//!   `Ki`/`Mi`/`Gi` on the base-2 axis, where ticks are powers of 2).
//! * Points that cannot be drawn (non-finite coordinates, or non-positive
//!   ones on a logarithmic axis) are skipped; empty charts, single points and
//!   zero-width ranges get a sensible default range, so the output never
//!   contains `NaN`.
//! * Large series are decimated per pixel column: a point series keeps the
//!   minimum and maximum y of each column (drawn as a vertical stroke between
//!   them), a line series keeps the first, minimum, maximum and last point of
//!   each run of consecutive points in one column. The output size is thus
//!   bounded by the chart width, not by the number of points.
//! * Colours come from the Okabe-Ito colour-blind-safe palette; from the
//!   ninth series on, lines are also dashed.
#![warn(missing_docs)]

use std::fmt::Write as _;

/// How a [`Series`] is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Style {
    /// Points joined by straight lines in the given order (with markers when
    /// there are few points).
    #[default]
    Line,
    /// Unconnected points (a scatter plot).
    Points,
}

/// One named data series.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Series {
    /// The name shown in the legend.
    pub name: String,
    /// The `(x, y)` data points. Line series are drawn in this order.
    pub points: Vec<(f64, f64)>,
    /// Whether to draw a line or points.
    pub style: Style,
}

impl Series {
    /// A line series.
    pub fn line(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            name: name.into(),
            points,
            style: Style::Line,
        }
    }

    /// A point (scatter) series.
    pub fn points(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            name: name.into(),
            points,
            style: Style::Points,
        }
    }
}

/// A 2-D chart with a title, axis labels, data series and reference lines.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Chart {
    /// Title drawn above the plot (omitted if empty).
    pub title: String,
    /// Label of the x axis (omitted if empty).
    pub x_label: String,
    /// Label of the y axis (omitted if empty).
    pub y_label: String,
    /// Logarithmic x axis, base 2 (ticks at powers of 2).
    pub log_x: bool,
    /// Logarithmic y axis, base 10.
    pub log_y: bool,
    /// The data series, drawn in order (later ones on top).
    pub series: Vec<Series>,
    /// Horizontal reference lines `(y, label)`, e.g. a deadline; drawn dashed
    /// with the label at their right end, and always inside the y range.
    pub hlines: Vec<(f64, String)>,
}

/// Okabe-Ito palette, ordered for contrast on white (yellow last).
const PALETTE: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#C9B800",
];
/// Dash patterns used after the palette has been exhausted once.
const DASHES: [&str; 4] = ["", "6 3", "2 3", "8 3 2 3"];
/// Approximate width of one character at the 12 px label font.
const CHAR_W: f64 = 6.8;

impl Chart {
    /// Renders the chart as a standalone SVG document of `width` × `height`
    /// pixels (clamped to at least 240 × 160).
    pub fn to_svg(&self, width: u32, height: u32) -> String {
        let w = f64::from(width.max(240));
        let h = f64::from(height.max(160));

        // Layout: legend on the right, room for labels left and below.
        let max_name = self
            .series
            .iter()
            .map(|s| s.name.chars().count())
            .max()
            .unwrap_or(0);
        let legend_w = if self.series.is_empty() {
            0.0
        } else {
            (36.0 + CHAR_W * max_name as f64).min(w / 3.0)
        };
        let top = if self.title.is_empty() { 16.0 } else { 40.0 };
        let bottom = if self.x_label.is_empty() { 32.0 } else { 52.0 };
        let right = 16.0 + legend_w;
        let pw = 40.0f64.max(w - right - 80.0);
        let ph = 40.0f64.max(h - top - bottom);

        // Axes.
        let xs = data_range(
            self.series
                .iter()
                .flat_map(|s| s.points.iter())
                .filter_map(|p| valid(*p, self.log_x, self.log_y).then_some(p.0)),
        );
        let ys = data_range(
            self.series
                .iter()
                .flat_map(|s| s.points.iter())
                .filter_map(|p| valid(*p, self.log_x, self.log_y).then_some(p.1))
                .chain(
                    self.hlines
                        .iter()
                        .map(|l| l.0)
                        .filter(|&y| y.is_finite() && (!self.log_y || y > 0.0)),
                ),
        );
        // Powers of 2 have short labels and can sit closer together.
        let x_spacing = if self.log_x { 60.0 } else { 90.0 };
        let x_target = ((pw / x_spacing) as usize).clamp(2, 12);
        let y_target = ((ph / 45.0) as usize).clamp(2, 10);
        let xa = if self.log_x {
            log2_axis(xs, x_target)
        } else {
            linear_axis(xs, false, x_target)
        };
        let ya = if self.log_y {
            log10_axis(ys, y_target)
        } else {
            linear_axis(ys, true, y_target)
        };
        let frame = Frame {
            left: 72.0,
            top,
            w: pw,
            h: ph,
        };

        let mut s = String::new();
        let _ = write!(
            s,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
             viewBox=\"0 0 {w} {h}\" font-family=\"Helvetica, Arial, sans-serif\" \
             font-size=\"12\">\n<rect width=\"{w}\" height=\"{h}\" fill=\"white\"/>\n"
        );
        if !self.title.is_empty() {
            let _ = writeln!(
                s,
                "<text x=\"{}\" y=\"24\" text-anchor=\"middle\" font-size=\"16\" \
                 font-weight=\"bold\">{}</text>",
                num(frame.left + pw / 2.0),
                escape(&self.title)
            );
        }

        // Grid, ticks and tick labels.
        s.push_str("<g stroke=\"#e4e4e4\" stroke-width=\"1\">\n");
        for &t in &xa.ticks {
            let x = frame.x(&xa, t);
            let _ = writeln!(
                s,
                "<line x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\"/>",
                num(top),
                num(top + ph),
                x = num(x)
            );
        }
        for &t in &ya.ticks {
            let y = frame.y(&ya, t);
            let _ = writeln!(
                s,
                "<line x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\"/>",
                num(frame.left),
                num(frame.left + pw),
                y = num(y)
            );
        }
        s.push_str("</g>\n");
        let _ = writeln!(
            s,
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>",
            num(frame.left),
            num(top),
            num(pw),
            num(ph)
        );
        s.push_str("<g fill=\"#333\">\n");
        for (t, label) in xa.ticks.iter().zip(&xa.labels) {
            let _ = writeln!(
                s,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                num(frame.x(&xa, *t)),
                num(top + ph + 16.0),
                escape(label)
            );
        }
        for (t, label) in ya.ticks.iter().zip(&ya.labels) {
            let _ = writeln!(
                s,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
                num(frame.left - 6.0),
                num(frame.y(&ya, *t) + 4.0),
                escape(label)
            );
        }
        s.push_str("</g>\n");
        if !self.x_label.is_empty() {
            let _ = writeln!(
                s,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"13\">{}</text>",
                num(frame.left + pw / 2.0),
                num(top + ph + 40.0),
                escape(&self.x_label)
            );
        }
        if !self.y_label.is_empty() {
            let cy = top + ph / 2.0;
            let _ = writeln!(
                s,
                "<text x=\"18\" y=\"{cy}\" text-anchor=\"middle\" font-size=\"13\" \
                 transform=\"rotate(-90 18 {cy})\">{}</text>",
                escape(&self.y_label),
                cy = num(cy)
            );
        }

        // Data, clipped to the plot area (markers may overhang slightly).
        let _ = writeln!(
            s,
            "<defs><clipPath id=\"plot-area\"><rect x=\"{}\" y=\"{}\" width=\"{}\" \
             height=\"{}\"/></clipPath></defs>",
            num(frame.left - 4.0),
            num(top - 4.0),
            num(pw + 8.0),
            num(ph + 8.0)
        );
        s.push_str("<g clip-path=\"url(#plot-area)\" fill=\"none\">\n");
        for (i, series) in self.series.iter().enumerate() {
            let pts: Vec<(f64, f64)> = series
                .points
                .iter()
                .filter(|p| valid(**p, self.log_x, self.log_y))
                .map(|&(x, y)| (frame.x(&xa, x), frame.y(&ya, y)))
                .collect();
            let colour = PALETTE[i % PALETTE.len()];
            let dash = DASHES[(i / PALETTE.len()) % DASHES.len()];
            match series.style {
                Style::Line => {
                    let pts = decimate_line(&pts, frame.left, pw);
                    if pts.len() >= 2 {
                        let _ = write!(
                            s,
                            "<path stroke=\"{colour}\" stroke-width=\"2\" \
                             stroke-linejoin=\"round\"{} d=\"",
                            dash_attr(dash)
                        );
                        for (k, (x, y)) in pts.iter().enumerate() {
                            let _ = write!(
                                s,
                                "{}{} {}",
                                if k == 0 { "M" } else { " " },
                                num(*x),
                                num(*y)
                            );
                        }
                        s.push_str("\"/>\n");
                    }
                    if pts.len() <= 50 {
                        dots(&mut s, colour, 5.0, &pts);
                    }
                }
                Style::Points => {
                    if pts.len() > 2 * (pw as usize) {
                        let cols = decimate_points(&pts, frame.left, pw);
                        let _ = write!(
                            s,
                            "<path stroke=\"{colour}\" stroke-width=\"3\" \
                             stroke-linecap=\"round\" d=\""
                        );
                        for (x, y0, y1) in cols {
                            if (y1 - y0).abs() < 0.05 {
                                let _ = write!(s, "M{} {}h0", num(x), num(y0));
                            } else {
                                let _ = write!(s, "M{} {}V{}", num(x), num(y0), num(y1));
                            }
                        }
                        s.push_str("\"/>\n");
                    } else {
                        dots(&mut s, colour, 6.0, &pts);
                    }
                }
            }
        }
        s.push_str("</g>\n");

        // Reference lines.
        for (y, label) in &self.hlines {
            if !(y.is_finite() && (!self.log_y || *y > 0.0)) {
                continue;
            }
            let py = frame.y(&ya, *y);
            let _ = writeln!(
                s,
                "<line x1=\"{}\" y1=\"{py}\" x2=\"{}\" y2=\"{py}\" stroke=\"#B00020\" \
                 stroke-width=\"1.5\" stroke-dasharray=\"7 4\"/>",
                num(frame.left),
                num(frame.left + pw),
                py = num(py)
            );
            if !label.is_empty() {
                let ty = if py - top < 16.0 { py + 14.0 } else { py - 5.0 };
                let _ = writeln!(
                    s,
                    "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"#B00020\" \
                     stroke=\"white\" stroke-width=\"3\" paint-order=\"stroke\">{}</text>",
                    num(frame.left + pw - 4.0),
                    num(ty),
                    escape(label)
                );
            }
        }

        // Legend.
        if !self.series.is_empty() {
            let lx = frame.left + pw + 14.0;
            let max_chars = (((legend_w - 36.0) / CHAR_W + 1e-6).floor() as usize).max(3);
            let rows = (((h - top - 8.0) / 18.0).floor() as usize).max(1);
            s.push_str("<g>\n");
            for (i, series) in self.series.iter().enumerate() {
                let ly = top + 10.0 + 18.0 * i as f64;
                if i + 1 == rows && self.series.len() > rows {
                    let _ = writeln!(
                        s,
                        "<text x=\"{}\" y=\"{}\">… {} more</text>",
                        num(lx),
                        num(ly + 4.0),
                        self.series.len() - i
                    );
                    break;
                }
                let colour = PALETTE[i % PALETTE.len()];
                let dash = DASHES[(i / PALETTE.len()) % DASHES.len()];
                match series.style {
                    Style::Line => {
                        let _ = writeln!(
                            s,
                            "<line x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{colour}\" \
                             stroke-width=\"2\"{}/>",
                            num(lx),
                            num(lx + 22.0),
                            dash_attr(dash),
                            y = num(ly)
                        );
                    }
                    Style::Points => dots(&mut s, colour, 6.0, &[(lx + 11.0, ly)]),
                }
                let _ = writeln!(
                    s,
                    "<text x=\"{}\" y=\"{}\">{}</text>",
                    num(lx + 28.0),
                    num(ly + 4.0),
                    escape(&truncate(&series.name, max_chars))
                );
            }
            s.push_str("</g>\n");
        }
        s.push_str("</svg>\n");
        s
    }
}

/// The plot rectangle in pixels.
struct Frame {
    left: f64,
    top: f64,
    w: f64,
    h: f64,
}

impl Frame {
    fn x(&self, a: &Axis, v: f64) -> f64 {
        self.left + a.frac(v) * self.w
    }
    fn y(&self, a: &Axis, v: f64) -> f64 {
        self.top + self.h - a.frac(v) * self.h
    }
}

/// Scale of an axis.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Scale {
    Linear,
    Log,
}

/// A resolved axis: its range (always `lo < hi`, both finite, and positive
/// for log scales), ticks and tick labels.
#[derive(Clone, Debug, PartialEq)]
struct Axis {
    lo: f64,
    hi: f64,
    scale: Scale,
    ticks: Vec<f64>,
    labels: Vec<String>,
}

impl Axis {
    /// Position of `v` along the axis, 0 at `lo` and 1 at `hi`.
    fn frac(&self, v: f64) -> f64 {
        let f = match self.scale {
            Scale::Linear => (v - self.lo) / (self.hi - self.lo),
            Scale::Log => (v.ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln()),
        };
        if f.is_finite() {
            f
        } else {
            0.0
        }
    }
}

/// Whether a point can be drawn on the given axes.
fn valid((x, y): (f64, f64), log_x: bool, log_y: bool) -> bool {
    x.is_finite() && y.is_finite() && (!log_x || x > 0.0) && (!log_y || y > 0.0)
}

/// Minimum and maximum of some (already validated) values.
fn data_range(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values.fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
    })
}

/// The 1-2-5 step (`1, 2, 5 × 10^k`) nearest above `raw`.
fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    let n = raw / mag;
    let m = if n <= 1.0 + 1e-9 {
        1.0
    } else if n <= 2.0 + 1e-9 {
        2.0
    } else if n <= 5.0 + 1e-9 {
        5.0
    } else {
        10.0
    };
    m * mag
}

/// A linear axis over `range` with about `target` 1-2-5 ticks; the range is
/// widened to whole steps. With `zero` (used for the y axis), a range of
/// non-negative (or non-positive) values is extended to 0 when 0 is nearer
/// than its width, and the other ends get 3 % headroom.
fn linear_axis(range: Option<(f64, f64)>, zero: bool, target: usize) -> Axis {
    let (mut lo, mut hi) = range.unwrap_or((0.0, 1.0));
    // Keep clear of overflow when computing spans.
    lo = lo.clamp(-1e300, 1e300);
    hi = hi.clamp(-1e300, 1e300);
    if zero {
        if lo > 0.0 && lo < hi - lo {
            lo = 0.0;
        }
        if hi < 0.0 && -hi < hi - lo {
            hi = 0.0;
        }
    }
    let degenerate = range.is_none() || hi - lo <= 1e-12 * lo.abs().max(hi.abs());
    if degenerate {
        let d = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        if lo == 0.0 {
            hi = 1.0;
        } else {
            lo -= d;
            hi += d;
        }
    }
    if zero && !degenerate {
        // Headroom, so that extreme values do not sit on the frame.
        let pad = 0.03 * (hi - lo);
        if hi != 0.0 {
            hi += pad;
        }
        if lo != 0.0 {
            lo = if lo > 0.0 {
                (lo - pad).max(0.0)
            } else {
                lo - pad
            };
        }
    }
    let step = nice_step((hi - lo) / target.max(1) as f64);
    let k0 = (lo / step + 1e-9).floor();
    let k1 = (hi / step - 1e-9).ceil();
    let (lo, hi) = (k0 * step, k1 * step);
    let ticks: Vec<f64> = (0..=((k1 - k0) as i64).clamp(1, 1000))
        .map(|k| {
            let t = (k0 + k as f64) * step;
            if t.abs() < step * 1e-6 {
                0.0
            } else {
                t
            }
        })
        .collect();
    let labels = linear_labels(&ticks, step);
    Axis {
        lo,
        hi,
        scale: Scale::Linear,
        ticks,
        labels,
    }
}

/// A base-2 logarithmic axis: the range widened to powers of 2, ticks at
/// powers of 2 (every `n`-th one if there would be more than `target`).
fn log2_axis(range: Option<(f64, f64)>, target: usize) -> Axis {
    let (lo, hi) = range.unwrap_or((1.0, 2.0));
    let mut e0 = (lo.log2() + 1e-9).floor().clamp(-1070.0, 1022.0) as i32;
    let mut e1 = (hi.log2() - 1e-9).ceil().clamp(-1070.0, 1022.0) as i32;
    if e1 <= e0 {
        e0 -= 1;
        e1 += 1;
    }
    let stride = ((e1 - e0) as usize).div_ceil(target.max(1)).max(1);
    let ticks: Vec<f64> = (e0..=e1).step_by(stride).map(|e| 2f64.powi(e)).collect();
    let labels = ticks.iter().map(|&t| pow2_label(t)).collect();
    Axis {
        lo: 2f64.powi(e0),
        hi: 2f64.powi(e1),
        scale: Scale::Log,
        ticks,
        labels,
    }
}

/// Candidate "nice" values `m · 10^e` for `m` in 1, 2, 5, ordered.
fn nice_125(e: i32, m: usize) -> f64 {
    [1.0, 2.0, 5.0][m] * 10f64.powi(e)
}

/// A base-10 logarithmic axis: the range widened to 1-2-5 values; ticks at
/// powers of 10 when the range spans at least three decades (every `n`-th
/// one beyond `target`), else at all 1-2-5 values inside it.
fn log10_axis(range: Option<(f64, f64)>, target: usize) -> Axis {
    let (lo, hi) = range.unwrap_or((1.0, 10.0));
    // Index nice values as 3·e + m.
    let idx = |e: i32, m: usize| 3 * i64::from(e) + m as i64;
    let val = |i: i64| nice_125(i.div_euclid(3) as i32, i.rem_euclid(3) as usize);
    let e_lo = lo.log10().floor().clamp(-300.0, 300.0) as i32;
    let e_hi = hi.log10().floor().clamp(-300.0, 300.0) as i32;
    let mut i0 = idx(e_lo - 1, 0);
    while val(i0 + 1) <= lo * (1.0 + 1e-9) {
        i0 += 1;
    }
    let mut i1 = idx(e_hi + 1, 0);
    while val(i1 - 1) >= hi * (1.0 - 1e-9) {
        i1 -= 1;
    }
    if i1 <= i0 {
        i0 -= 1;
        i1 += 1;
    }
    let (lo, hi) = (val(i0), val(i1));
    let decades = (hi / lo).log10();
    let ticks: Vec<f64> = if decades >= 3.0 - 1e-9 {
        let d0 = lo.log10().ceil() as i32;
        let d1 = hi.log10().floor() as i32;
        let stride = ((d1 - d0) as usize).div_ceil(target.max(1)).max(1);
        (d0..=d1).step_by(stride).map(|e| 10f64.powi(e)).collect()
    } else {
        (i0..=i1).map(val).collect()
    };
    let labels = ticks.iter().map(|&t| short_label(t)).collect();
    Axis {
        lo,
        hi,
        scale: Scale::Log,
        ticks,
        labels,
    }
}

/// Decimal suffix for the magnitude `m`.
fn suffix(m: f64) -> (f64, &'static str) {
    if m >= 1e9 {
        (1e9, "G")
    } else if m >= 1e6 {
        (1e6, "M")
    } else if m >= 1e4 {
        (1e3, "k")
    } else {
        (1.0, "")
    }
}

/// Labels of linear ticks `step` apart: one suffix for the whole axis (from
/// 10 000 on, the largest that needs at most one decimal) and just enough
/// decimals to tell neighbouring ticks apart.
fn linear_labels(ticks: &[f64], step: f64) -> Vec<String> {
    let m = ticks.iter().fold(0.0f64, |a, t| a.max(t.abs()));
    if m >= 1e13 || (m > 0.0 && m < 1e-4) {
        return ticks
            .iter()
            .map(|t| {
                if *t == 0.0 {
                    "0".into()
                } else {
                    format!("{t:.1e}")
                }
            })
            .collect();
    }
    // The largest suffix that needs at most one decimal for this step.
    let (div, suf) = if m < 1e4 {
        (1.0, "")
    } else {
        [(1e9, "G"), (1e6, "M"), (1e3, "k")]
            .into_iter()
            .find(|&(d, _)| m >= d && step / d >= 0.1 - 1e-9)
            .unwrap_or((1.0, ""))
    };
    let rel = step / div;
    let decimals = if rel >= 1.0 {
        0
    } else {
        ((-rel.log10()) - 1e-9).ceil().clamp(0.0, 9.0) as usize
    };
    ticks
        .iter()
        .map(|t| {
            let s = format!("{:.*}", decimals, t / div);
            let s = if s
                .trim_start_matches('-')
                .chars()
                .all(|c| c == '0' || c == '.')
            {
                "0".to_string()
            } else {
                s
            };
            if s == "0" {
                s
            } else {
                format!("{s}{suf}")
            }
        })
        .collect()
}

/// `v` with `sig` significant digits and trailing zeros trimmed.
fn fmt_sig(v: f64, sig: i32) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let e = v.abs().log10().floor() as i32;
    let decimals = (sig - 1 - e).clamp(0, 12) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Label of a single value (log axes): `k`/`M`/`G` suffixes from 10 000 on.
fn short_label(v: f64) -> String {
    let a = v.abs();
    if a >= 1e13 || (a > 0.0 && a < 1e-4) {
        return format!("{v:.0e}");
    }
    let (div, suf) = suffix(a);
    format!("{}{suf}", fmt_sig(v / div, 3))
}

/// Label of a power of 2: plain up to 8192, then `Ki`/`Mi`/`Gi`, and `2^-n`
/// below 1/1024.
fn pow2_label(v: f64) -> String {
    let e = v.log2().round() as i32;
    if e < -10 {
        format!("2^{e}")
    } else if e < 14 {
        fmt_sig(v, 6)
    } else if e < 30 {
        format!("{}{}", 2f64.powi(e % 10), if e < 20 { "Ki" } else { "Mi" })
    } else if e < 40 {
        format!("{}Gi", 2f64.powi(e - 30))
    } else {
        format!("2^{e}")
    }
}

/// Line decimation (M4): of each run of consecutive points falling into the
/// same pixel column, keep the first, the lowest, the highest and the last,
/// in their original order. Only applied above four points per column.
fn decimate_line(pts: &[(f64, f64)], left: f64, w: f64) -> Vec<(f64, f64)> {
    if pts.len() <= 4 * (w as usize).max(1) {
        return pts.to_vec();
    }
    let col = |x: f64| ((x - left).floor()).clamp(0.0, w) as i64;
    let mut out = Vec::new();
    let mut start = 0;
    while start < pts.len() {
        let c = col(pts[start].0);
        let mut end = start + 1;
        while end < pts.len() && col(pts[end].0) == c {
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

/// Point decimation: per pixel column, the lowest and highest y (in pixels),
/// as `(column centre x, min y, max y)`, left to right.
fn decimate_points(pts: &[(f64, f64)], left: f64, w: f64) -> Vec<(f64, f64, f64)> {
    let n = (w.ceil() as usize) + 1;
    let mut cols: Vec<Option<(f64, f64)>> = vec![None; n];
    for &(x, y) in pts {
        let c = ((x - left).floor()).clamp(0.0, (n - 1) as f64) as usize;
        cols[c] = Some(match cols[c] {
            None => (y, y),
            Some((a, b)) => (a.min(y), b.max(y)),
        });
    }
    cols.into_iter()
        .enumerate()
        .filter_map(|(c, r)| r.map(|(a, b)| (left + c as f64 + 0.5, a, b)))
        .collect()
}

/// Round markers: zero-length strokes with round caps (compact in SVG).
fn dots(s: &mut String, colour: &str, size: f64, pts: &[(f64, f64)]) {
    if pts.is_empty() {
        return;
    }
    let _ = write!(
        s,
        "<path stroke=\"{colour}\" stroke-width=\"{size}\" stroke-linecap=\"round\" d=\""
    );
    for (x, y) in pts {
        let _ = write!(s, "M{} {}h0", num(*x), num(*y));
    }
    s.push_str("\"/>\n");
}

/// ` stroke-dasharray="…"` or nothing.
fn dash_attr(dash: &str) -> String {
    if dash.is_empty() {
        String::new()
    } else {
        format!(" stroke-dasharray=\"{dash}\"")
    }
}

/// A pixel coordinate with one decimal (no trailing `.0`; never NaN).
fn num(v: f64) -> String {
    if !v.is_finite() {
        return "0".into();
    }
    let r = (v * 10.0).round() / 10.0;
    if r == r.trunc() {
        format!("{}", r as i64)
    } else {
        format!("{r:.1}")
    }
}

/// `name` cut to `max` characters with an ellipsis.
fn truncate(name: &str, max: usize) -> String {
    if name.chars().count() <= max {
        name.to_string()
    } else {
        let mut t: String = name.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// XML-escapes text content and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks that tags nest properly; returns the number of elements.
    fn check_tags(svg: &str) -> usize {
        let mut stack: Vec<String> = Vec::new();
        let mut elements = 0;
        let mut rest = svg;
        while let Some(i) = rest.find('<') {
            let j = rest[i..].find('>').expect("unclosed tag") + i;
            let tag = &rest[i + 1..j];
            assert!(!tag.contains('<'), "stray < in {tag}");
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(
                    stack.pop().as_deref(),
                    Some(name.trim()),
                    "mismatched </{name}>"
                );
            } else if !tag.starts_with('?') && !tag.starts_with('!') {
                elements += 1;
                let name: String = tag
                    .chars()
                    .take_while(|c| !c.is_whitespace() && *c != '/')
                    .collect();
                if !tag.ends_with('/') {
                    stack.push(name);
                }
            }
            rest = &rest[j + 1..];
        }
        assert!(stack.is_empty(), "unclosed: {stack:?}");
        assert!(!rest.contains('>'), "stray > after last tag");
        elements
    }

    fn assert_sane(svg: &str) {
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(!svg.contains("NaN"));
        assert!(!svg.contains("inf"));
        check_tags(svg);
    }

    fn sample() -> Chart {
        Chart {
            title: "Throughput <fsplit> & trees".into(),
            x_label: "outputs q".into(),
            y_label: "tuples/s".into(),
            log_x: true,
            log_y: false,
            series: vec![
                Series::line(
                    "fsplit",
                    (1..=8)
                        .map(|k| (2f64.powi(k), 1e6 / (1.0 + 0.005 * 2f64.powi(k))))
                        .collect(),
                ),
                Series::line(
                    "maxtree \"a=1\"",
                    (1..=8).map(|k| (2f64.powi(k), 9.9e5)).collect(),
                ),
                Series::points("measured", vec![(4.0, 9.5e5), (64.0, 7.2e5)]),
            ],
            hlines: vec![(8e5, "target rate".into())],
        }
    }

    #[test]
    fn svg_is_well_formed_and_complete() {
        let svg = sample().to_svg(800, 500);
        assert_sane(&svg);
        assert!(svg.contains("Throughput &lt;fsplit&gt; &amp; trees"));
        assert!(svg.contains("fsplit"));
        assert!(svg.contains("maxtree &quot;a=1&quot;"));
        assert!(svg.contains("measured"));
        assert!(svg.contains("target rate"));
        assert!(svg.contains("outputs q"));
        assert!(svg.contains("tuples/s"));
        // x ticks at powers of 2, y ticks with k suffix
        assert!(svg.contains(">256</text>"));
        assert!(svg.contains(">0.2M</text>"));
    }

    #[test]
    fn degenerate_charts_have_no_nan() {
        let cases = vec![
            Chart::default(),
            Chart {
                series: vec![Series::line("empty", vec![])],
                ..Chart::default()
            },
            Chart {
                series: vec![Series::points("one", vec![(3.0, 7.0)])],
                ..Chart::default()
            },
            Chart {
                series: vec![Series::line("flat", vec![(0.0, 0.0), (0.0, 0.0)])],
                log_x: false,
                ..Chart::default()
            },
            Chart {
                series: vec![Series::line("flat", vec![(1.0, 5.0), (2.0, 5.0)])],
                log_x: true,
                log_y: true,
                ..Chart::default()
            },
            Chart {
                series: vec![Series::line(
                    "junk",
                    vec![
                        (f64::NAN, 1.0),
                        (0.0, f64::INFINITY),
                        (-1.0, -2.0),
                        (0.0, 0.0),
                    ],
                )],
                log_x: true,
                log_y: true,
                hlines: vec![(f64::NAN, "nan".into()), (-1.0, "neg".into())],
                ..Chart::default()
            },
            Chart {
                series: vec![Series::line("huge", vec![(-1e308, -1e308), (1e308, 1e308)])],
                ..Chart::default()
            },
            Chart {
                series: vec![Series::line(
                    "tiny",
                    vec![(1e-300, 1e-300), (2e-300, 3e-300)],
                )],
                log_x: true,
                log_y: true,
                ..Chart::default()
            },
        ];
        for c in cases {
            for (w, h) in [(800, 500), (0, 0), (100_000, 50)] {
                let svg = c.to_svg(w, h);
                assert_sane(&svg);
            }
        }
    }

    #[test]
    fn linear_ticks() {
        let a = linear_axis(Some((0.0, 10.0)), false, 5);
        assert_eq!(a.ticks, vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(a.labels, vec!["0", "2", "4", "6", "8", "10"]);
        let a = linear_axis(Some((0.13, 0.87)), false, 4);
        assert_eq!((a.lo, a.hi), (0.0, 1.0));
        assert_eq!(a.labels, vec!["0", "0.2", "0.4", "0.6", "0.8", "1.0"]);
        let a = linear_axis(Some((-3.0, 17.0)), false, 5);
        assert_eq!(a.ticks, vec![-5.0, 0.0, 5.0, 10.0, 15.0, 20.0]);
        let a = linear_axis(Some((0.0, 10_800.0)), false, 6);
        assert_eq!(a.ticks.len(), 7);
        assert_eq!(a.labels[1], "2k");
        assert_eq!(a.labels[6], "12k");
        let a = linear_axis(Some((1.0e6, 3.5e6)), true, 5);
        assert_eq!(a.lo, 0.0);
        assert_eq!(a.labels, vec!["0", "1M", "2M", "3M", "4M"]);
        let a = linear_axis(Some((2.0e7, 5.0e7)), true, 5);
        assert_eq!(a.labels.last().map(String::as_str), Some("60M"));
        // zero is not forced when far away
        let a = linear_axis(Some((95.0, 100.0)), true, 5);
        assert_eq!((a.lo, a.hi), (94.0, 102.0));
        let a = linear_axis(Some((95.0, 100.0)), false, 5);
        assert_eq!((a.lo, a.hi), (95.0, 100.0));
        // degenerate ranges
        let a = linear_axis(None, true, 5);
        assert_eq!((a.lo, a.hi), (0.0, 1.0));
        let a = linear_axis(Some((0.0, 0.0)), true, 5);
        assert_eq!((a.lo, a.hi), (0.0, 1.0));
        let a = linear_axis(Some((5.0, 5.0)), false, 5);
        assert!(a.lo < 5.0 && a.hi > 5.0);
        for a in [
            linear_axis(Some((1.0, 1.0 + 1e-13)), false, 5),
            linear_axis(Some((-7.0, -7.0)), true, 5),
        ] {
            assert!(a.lo < a.hi && a.ticks.len() >= 2);
        }
        assert_eq!(nice_step(0.7), 1.0);
        assert_eq!(nice_step(1.2), 2.0);
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(nice_step(7.0), 10.0);
        assert_eq!(nice_step(0.0), 1.0);
    }

    #[test]
    fn log_ticks() {
        let a = log2_axis(Some((2.0, 512.0)), 10);
        assert_eq!(a.ticks, (1..=9).map(|e| 2f64.powi(e)).collect::<Vec<_>>());
        assert_eq!(a.labels[0], "2");
        assert_eq!(a.labels[8], "512");
        let a = log2_axis(Some((3.0, 100.0)), 10);
        assert_eq!((a.lo, a.hi), (2.0, 128.0));
        let a = log2_axis(Some((1.0, 1048576.0)), 10);
        assert_eq!(a.ticks.len(), 11);
        assert_eq!(
            a.labels,
            vec!["1", "4", "16", "64", "256", "1024", "4096", "16Ki", "64Ki", "256Ki", "1Mi"]
        );
        let a = log2_axis(Some((8.0, 8.0)), 10);
        assert_eq!(a.ticks, vec![4.0, 8.0, 16.0]);
        let a = log2_axis(Some((0.25, 1.0)), 10);
        assert_eq!(a.labels, vec!["0.25", "0.5", "1"]);

        let a = log10_axis(Some((1.0, 1e6)), 10);
        assert_eq!(
            a.labels,
            vec!["1", "10", "100", "1000", "10k", "100k", "1M"]
        );
        let a = log10_axis(Some((0.3, 40.0)), 10);
        assert_eq!((a.lo, a.hi), (0.2, 50.0));
        assert_eq!(
            a.labels,
            vec!["0.2", "0.5", "1", "2", "5", "10", "20", "50"]
        );
        let a = log10_axis(Some((100.0, 100.0)), 10);
        assert!(a.lo < 100.0 && a.hi > 100.0);
        let a = log10_axis(None, 10);
        assert!(a.lo > 0.0 && a.lo < a.hi);
    }

    #[test]
    fn labels() {
        assert_eq!(short_label(20_000.0), "20k");
        assert_eq!(short_label(2_500_000.0), "2.5M");
        assert_eq!(short_label(0.05), "0.05");
        assert_eq!(pow2_label(2f64.powi(-12)), "2^-12");
        assert_eq!(pow2_label(2f64.powi(31)), "2Gi");
        assert_eq!(
            linear_labels(&[-0.0, 0.5, 1.0], 0.5),
            vec!["0", "0.5", "1.0"]
        );
        assert_eq!(escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(num(f64::NAN), "0");
        assert_eq!(num(12.34), "12.3");
        assert_eq!(num(12.0), "12");
    }

    #[test]
    fn decimation_bounds_output() {
        // ~1 M response times over a 3 h simulation, plus a noisy 1 M-point line.
        let n = 1_000_000;
        let mut seed = 12345u64;
        let mut rnd = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        let scatter: Vec<(f64, f64)> = (0..n)
            .map(|i| (i as f64 * 10_800.0 / n as f64, rnd() * rnd() * 5.0))
            .collect();
        let line: Vec<(f64, f64)> = (0..n)
            .map(|i| (i as f64 * 0.0108, (i as f64 / 5e4).sin() + rnd()))
            .collect();
        let chart = Chart {
            title: "Response time".into(),
            x_label: "simulation time (s)".into(),
            y_label: "response time (s)".into(),
            series: vec![
                Series::points("response", scatter),
                Series::line("noise", line),
            ],
            hlines: vec![(5.0, "deadline 5 s".into())],
            ..Chart::default()
        };
        let svg = chart.to_svg(1000, 600);
        assert_sane(&svg);
        assert!(svg.len() < 200_000, "{} bytes", svg.len());
        // Decimation keeps the extremes of every column.
        let pts: Vec<(f64, f64)> = (0..10_000)
            .map(|i| (10.0 + i as f64 / 100.0, (i % 7) as f64))
            .collect();
        let cols = decimate_points(&pts, 10.0, 100.0);
        assert_eq!(cols.len(), 100);
        assert!(cols.iter().all(|c| c.1 == 0.0 && c.2 == 6.0));
        let kept = decimate_line(&pts, 10.0, 100.0);
        assert!(kept.len() <= 4 * 100);
        assert_eq!(kept.first(), pts.first());
        assert_eq!(kept.last(), pts.last());
        // Small series are untouched.
        assert_eq!(decimate_line(&pts[..50], 10.0, 100.0), pts[..50].to_vec());
    }

    #[test]
    fn many_series_get_distinct_styles() {
        let chart = Chart {
            series: (0..20)
                .map(|i| {
                    Series::line(
                        format!("s{i}"),
                        vec![(0.0, i as f64), (1.0, i as f64 + 1.0)],
                    )
                })
                .collect(),
            ..Chart::default()
        };
        let svg = chart.to_svg(800, 300);
        assert_sane(&svg);
        for c in PALETTE {
            assert!(svg.contains(c));
        }
        assert!(svg.contains("stroke-dasharray=\"6 3\""));
        assert!(svg.contains("more</text>"));
    }
}
