//! The files the benchmarks write: an SVG plot carries its title, axis labels and
//! series names; a CSV file of serde rows reads back as the same rows; a markdown table
//! has a header, a separator line and one line per row.

use braid_bench::plot::{Chart, Series};
use braid_bench::report::{markdown_table, write_csv, Align};
use serde::{Deserialize, Serialize};

#[test]
fn plot_writes_title_axes_and_series() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("throughput.svg");
    let chart = Chart {
        title: "Throughput vs q (b = 0.5%, fsplit & parasplit)".into(),
        x_label: "q (partitions)".into(),
        y_label: "input rows/s".into(),
        log_x: true,
        log_y: true,
        series: vec![
            Series::line(
                "fsplit (2w)",
                vec![(2.0, 9.1e6), (64.0, 8.4e6), (512.0, 6.0e6)],
            ),
            Series::line(
                "parasplit (2w)",
                vec![(2.0, 8.8e6), (64.0, 8.9e6), (512.0, 8.7e6)],
            ),
            // Not drawable on logarithmic axes: left out, not an error.
            Series::line("empty", vec![(0.0, 1.0), (f64::NAN, 2.0)]),
        ],
        hlines: vec![(5e6, "target rate".into())],
    };
    chart.write_svg(&path, 800, 450).expect("plot");
    let svg = std::fs::read_to_string(&path).expect("read the SVG");
    assert!(svg.starts_with("<svg"), "{svg}");
    assert!(svg.trim_end().ends_with("</svg>"));
    for text in [
        "Throughput vs q (b = 0.5%, fsplit &amp; parasplit)",
        "q (partitions)",
        "input rows/s",
        "fsplit (2w)",
        "parasplit (2w)",
        "target rate",
        "\n512\n",
    ] {
        assert!(svg.contains(text), "no {text:?} in the SVG");
    }
    assert!(!svg.contains("NaN"));
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Row {
    example: String,
    workers: usize,
    rows_per_s: u64,
    eta: Option<f64>,
}

#[test]
fn csv_round_trips_through_a_reader() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("rows.csv");
    let rows = vec![
        Row {
            example: "fraud".into(),
            workers: 1,
            rows_per_s: 1_234_567,
            eta: Some(0.875),
        },
        Row {
            example: "shape, with \"quotes\"".into(),
            workers: 2,
            rows_per_s: 0,
            eta: None,
        },
    ];
    write_csv(&path, &rows).expect("write");
    let text = std::fs::read_to_string(&path).expect("read");
    assert!(
        text.starts_with("example,workers,rows_per_s,eta\n"),
        "{text}"
    );
    let back: Vec<Row> = csv::Reader::from_path(&path)
        .expect("open")
        .deserialize()
        .collect::<Result<_, _>>()
        .expect("rows");
    assert_eq!(back, rows);
}

#[test]
fn markdown_table_has_header_separator_and_rows() {
    let md = markdown_table(
        &[("routing", Align::Left), ("rows/s", Align::Right)],
        vec![
            vec!["skewed".into(), "1200".into()],
            vec!["a | b".into(), "7".into()],
        ],
    );
    let lines: Vec<&str> = md.lines().collect();
    assert_eq!(lines.len(), 4, "{md}");
    assert!(lines[0].starts_with("| routing"));
    assert!(lines[1].starts_with("|---"));
    assert!(lines[1].chars().all(|c| c == '|' || c == '-'));
    assert!(lines[3].contains("a \\| b"));
    assert!(md.ends_with('\n'));
}
