//! The session's figures in Prometheus's text exposition format (version 0.0.4):
//! counters end in `_total`, every family has its HELP and TYPE, label values are
//! escaped.

use braid_exec::live::snapshot::Snapshot;
use std::fmt::Write;

/// One family: its name, type, help, and samples (labels, value).
struct Family<'a> {
    name: &'a str,
    kind: &'a str,
    help: &'a str,
    samples: Vec<(Vec<(&'a str, String)>, f64)>,
}

/// The text for `s`.
pub fn render(s: &Snapshot) -> String {
    let stream = |n: &str| vec![("stream", n.to_string())];
    let query = |n: usize| vec![("query", n.to_string())];
    let families = [
        Family {
            name: "braid_workers",
            kind: "gauge",
            help: "Worker threads of the engine over all processes.",
            samples: vec![(vec![], s.workers as f64)],
        },
        Family {
            name: "braid_stream_rows_total",
            kind: "counter",
            help: "Rows appended to a stream living in Braid.",
            samples: s
                .streams
                .iter()
                .map(|x| (stream(&x.name), x.rows as f64))
                .collect(),
        },
        Family {
            name: "braid_stream_ingested_bytes_total",
            kind: "counter",
            help: "Bytes a stream's producers sent (COPY, TCP, HTTP, tails), good lines and bad.",
            samples: s.streams.iter().map(|x| (stream(&x.name), x.bytes as f64)).collect(),
        },
        Family {
            name: "braid_stream_malformed_rows_total",
            kind: "counter",
            help: "Malformed rows a stream's producers sent, skipped and counted.",
            samples: s
                .streams
                .iter()
                .map(|x| (stream(&x.name), x.malformed as f64))
                .collect(),
        },
        Family {
            name: "braid_stream_subscribers",
            kind: "gauge",
            help: "Subscribers reading a stream now.",
            samples: s
                .streams
                .iter()
                .map(|x| (stream(&x.name), x.subscribers as f64))
                .collect(),
        },
        Family {
            name: "braid_stream_producers",
            kind: "gauge",
            help: "TCP producers connected to a stream now.",
            samples: s
                .streams
                .iter()
                .map(|x| (stream(&x.name), x.producers as f64))
                .collect(),
        },
        Family {
            name: "braid_query_running",
            kind: "gauge",
            help: "1 while a query runs, 0 once it ended, was dropped or failed.",
            samples: s
                .queries
                .iter()
                .map(|q| (query(q.number), f64::from(u8::from(q.state == "running"))))
                .collect(),
        },
        Family {
            name: "braid_query_rows_in_total",
            kind: "counter",
            help: "Rows a query's source read.",
            samples: s
                .queries
                .iter()
                .map(|q| (query(q.number), q.rows_in as f64))
                .collect(),
        },
        Family {
            name: "braid_query_rows_out_total",
            kind: "counter",
            help: "Rows a query's sinks wrote.",
            samples: s
                .queries
                .iter()
                .map(|q| (query(q.number), q.rows_out as f64))
                .collect(),
        },
        Family {
            name: "braid_query_fault_rows_total",
            kind: "counter",
            help: "Rows a query skipped on runtime faults (overflow, division by zero, bad casts).",
            samples: s
                .queries
                .iter()
                .map(|q| (query(q.number), q.faults as f64))
                .collect(),
        },
        Family {
            name: "braid_query_late_rows_total",
            kind: "counter",
            help: "Rows a query refused as late (after their window or join state had closed).",
            samples: s.queries.iter().map(|q| (query(q.number), q.late as f64)).collect(),
        },
        Family {
            name: "braid_query_kafka_lag_records",
            kind: "gauge",
            help: "Records of a query's Kafka sources not read yet: each partition's end less where reading stands, summed (consumer lag).",
            samples: s
                .queries
                .iter()
                .map(|q| (query(q.number), q.kafka_lag as f64))
                .collect(),
        },
        Family {
            name: "braid_stream_queued_rows",
            kind: "gauge",
            help: "Rows of a stream the slowest query reading it has not read yet.",
            samples: s
                .streams
                .iter()
                .map(|x| (stream(&x.name), x.queued as f64))
                .collect(),
        },
        Family {
            name: "braid_query_epoch_lag",
            kind: "gauge",
            help: "Epochs a query has read but not yet completed at its sinks.",
            samples: s
                .queries
                .iter()
                .map(|q| {
                    (
                        query(q.number),
                        q.epoch_in.saturating_sub(q.epoch_out) as f64,
                    )
                })
                .collect(),
        },
        Family {
            name: "braid_node_busy_seconds_total",
            kind: "counter",
            help: "Seconds the operators of a plan node (a box of the dashboard's graph) ran, on a worker's clock.",
            samples: nodes(s, |n| n.nanos.map(|ns| ns as f64 / 1e9)),
        },
        Family {
            name: "braid_node_latency_seconds",
            kind: "gauge",
            help: "How long after the source closed an epoch a plan node was done with it (its output frontier passed it), over recent epochs; label quantile 0.5 or 0.99.",
            samples: ["0.5", "0.99"]
                .iter()
                .enumerate()
                .flat_map(|(k, quantile)| {
                    nodes(s, move |n| n.latency_ms.map(|l| l[k] / 1e3))
                        .into_iter()
                        .map(move |(mut labels, v)| {
                            labels.push(("quantile", quantile.to_string()));
                            (labels, v)
                        })
                })
                .collect(),
        },
        Family {
            name: "braid_query_latency_constraint_seconds",
            kind: "gauge",
            help: "A running query's latency constraint (max_latency).",
            samples: s
                .queries
                .iter()
                .filter(|q| q.state == "running")
                .filter_map(|q| Some((vec![("query", q.number.to_string())], q.constraint_ms? / 1e3)))
                .collect(),
        },
        Family {
            name: "braid_query_row_latency_seconds",
            kind: "gauge",
            help: "Under a latency constraint, a running query's rows' latency from arriving at its source to written, since it started; label quantile 0.5 or 0.99.",
            samples: s
                .queries
                .iter()
                .filter(|q| q.state == "running")
                .flat_map(|q| {
                    q.row_latency_ms.into_iter().flat_map(move |l| {
                        [("0.5", l[0]), ("0.99", l[1])].map(|(quantile, ms)| {
                            (
                                vec![
                                    ("query", q.number.to_string()),
                                    ("quantile", quantile.to_string()),
                                ],
                                ms / 1e3,
                            )
                        })
                    })
                })
                .collect(),
        },
        Family {
            name: "braid_node_rows_out_total",
            kind: "counter",
            help: "Rows a plan node (a box of the dashboard's graph) put out.",
            samples: nodes(s, |n| n.rows_out.map(|r| r as f64)),
        },
    ];
    let mut out = String::new();
    histogram(&mut out, s);
    for f in families {
        let _ = writeln!(out, "# HELP {} {}", f.name, f.help);
        let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind);
        for (labels, value) in f.samples {
            let labels: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                .collect();
            match labels.is_empty() {
                true => {
                    let _ = writeln!(out, "{} {value}", f.name);
                }
                false => {
                    let _ = writeln!(out, "{}{{{}}} {value}", f.name, labels.join(","));
                }
            }
        }
    }
    out
}

/// `braid_query_latency_seconds`: each running query's end-to-end latency per epoch.
fn histogram(out: &mut String, s: &Snapshot) {
    let name = "braid_query_latency_seconds";
    let _ = writeln!(
        out,
        "# HELP {name} From a query's source closing an epoch to its output completing it."
    );
    let _ = writeln!(out, "# TYPE {name} histogram");
    for q in s.queries.iter().filter(|q| q.state == "running") {
        let l = &q.latency;
        let n = q.number;
        let mut cumulative = 0;
        for (k, bound) in braid_exec::live::latency::BOUNDS.iter().enumerate() {
            cumulative += l.buckets.get(k).copied().unwrap_or(0);
            let _ = writeln!(
                out,
                "{name}_bucket{{query=\"{n}\",le=\"{bound}\"}} {cumulative}"
            );
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{query=\"{n}\",le=\"+Inf\"}} {}",
            l.count
        );
        let _ = writeln!(out, "{name}_sum{{query=\"{n}\"}} {}", l.sum);
        let _ = writeln!(out, "{name}_count{{query=\"{n}\"}} {}", l.count);
    }
}

/// One sample per measured box of every running query's plan graph: labels query,
/// node (the box's id), kind, and worker for a `Map` box.
fn nodes(
    s: &Snapshot,
    value: impl Fn(&braid_plan::graph::GraphNode) -> Option<f64>,
) -> Vec<(Vec<(&'static str, String)>, f64)> {
    let mut out = Vec::new();
    for q in s.queries.iter().filter(|q| q.state == "running") {
        for n in &q.graph {
            let Some(v) = value(n) else { continue };
            let mut labels = vec![
                ("query", q.number.to_string()),
                ("node", n.id.to_string()),
                ("kind", n.kind.to_string()),
            ];
            if let Some(w) = n.worker {
                labels.push(("worker", w.to_string()));
            }
            out.push((labels, v));
        }
    }
    out
}

/// A label value as the format writes it: `\`, `"` and newlines escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
