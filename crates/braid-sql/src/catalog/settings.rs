//! `SET` values: partitions, merge, split strategy, late rows, parallelism, stage cuts.

use braid_plan::batch::Scalar;
use braid_plan::error::{Error, Result};
use braid_plan::plan::Strategy;
use std::path::PathBuf;

/// How partition outputs are merged, per query (`SET merge = ...`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MergeMode {
    /// Event-time order, identical to the serial output.
    Transparent,
    /// Any order: the same multiset, less waiting.
    BestEffort,
}

/// `SET` values in force.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Logical partitions of automatically parallelized queries.
    pub partitions: u32,
    /// Merger after the parallel part.
    pub merge: MergeMode,
    /// Split strategy.
    pub strategy: Strategy,
    /// Where late rows go (counted either way).
    pub late_path: Option<PathBuf>,
    /// Parallelize automatically (false: every query runs in one partition).
    pub auto: bool,
    /// How queries are cut into stages.
    pub stages: Cut,
    /// `SET max_latency = '10ms'`: the latency constraint of the queries that follow
    /// (a sink's own `max_latency` wins); `'off'` or `'none'` takes it away.
    pub max_latency: Option<std::time::Duration>,
    /// `SET shed_load = '100ms'`: the paced sources of the queries that follow drop
    /// (and count) a window more than this far behind their schedule instead of
    /// slowing down; `'off'` takes it away.
    pub shed_load: Option<std::time::Duration>,
    /// `SET scheduler = 'chain'`: what each worker's `Map` of the queries that follow
    /// runs next among its partitions with rows ready.
    pub scheduler: braid_plan::plan::Scheduler,
    /// `SET aggregate = 'one_phase'`: a query's aggregate keeps each group's rows in one
    /// partition; `'two_phase'` (the default) lets the optimizer split an aggregate whose
    /// accumulators combine exactly into a partial one where the rows are and a final
    /// one by group (optimizer rule `two_phase`).
    pub two_phase: bool,
    /// `SET desired_rate = 20000000`: the input rate (rows/s) the queries that follow must
    /// keep up with; the split that reads each query's stream takes the shape that does
    /// (Paper V eq. 6: parasplit's `p` from one splitter's rate), `'off'` takes it away.
    pub desired_rate: Option<f64>,
    /// `SET splitter_rate = 7500000`: one splitter's rate (rows/s) for
    /// `desired_rate`; without it the session measures it (over a file or the
    /// generator) before the query runs.
    pub splitter_rate: Option<f64>,
    /// `SET window = 'auto'`: the physical window W of the queries that follow is chosen
    /// by doubling before each runs (Paper V); `'declared'` (the default): each stream's
    /// own `window`.
    pub tune_window: bool,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            partitions: 16,
            merge: MergeMode::Transparent,
            strategy: Strategy::Autosplit,
            late_path: None,
            auto: true,
            stages: Cut::Subquery,
            max_latency: None,
            shed_load: None,
            scheduler: braid_plan::plan::Scheduler::default(),
            two_phase: true,
            desired_rate: None,
            splitter_rate: None,
            tune_window: false,
        }
    }
}

/// How a query is cut into stages (`SET stages = ...`), after StreamCloud's strategies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// One stage per subquery: a new stage starts at a stateful operator whose input
    /// keeps state partitioned differently (adjacent compatible subqueries stay fused).
    Subquery,
    /// Every operator its own stage.
    Operator,
    /// The whole query in one stage.
    Query,
}

impl std::str::FromStr for Cut {
    type Err = Error;
    fn from_str(s: &str) -> Result<Cut> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "subquery" => Cut::Subquery,
            "operator" => Cut::Operator,
            "query" => Cut::Query,
            other => {
                return Err(Error::Plan(format!(
                    "stages `{other}`; expected 'subquery', 'operator' or 'query'"
                )))
            }
        })
    }
}

/// Applies `SET key = value`.
pub fn set(settings: &mut Settings, key: &str, value: &Scalar) -> Result<()> {
    let text = match value {
        Scalar::Str(s) => s.clone(),
        other => other.to_string(),
    };
    match key.to_ascii_lowercase().as_str() {
        "partitions" => {
            // An integer, or one quoted as Flink's SET writes values.
            let q = match value {
                Scalar::Int(q) => Some(*q),
                Scalar::Str(s) => s.trim().parse().ok(),
                _ => None,
            };
            match q.filter(|q| (1..=1 << 20).contains(q)) {
                Some(q) => settings.partitions = q as u32,
                None => {
                    let found = match value {
                        Scalar::Str(s) => format!("'{s}'"),
                        other => other.to_string(),
                    };
                    return Err(Error::Plan(format!(
                        "partitions must be an integer in 1..=1048576, found {found}"
                    )));
                }
            }
        }
        "merge" => {
            settings.merge = match text.to_ascii_lowercase().as_str() {
                "transparent" | "time" | "ordered" => MergeMode::Transparent,
                "best_effort" | "besteffort" | "union" => MergeMode::BestEffort,
                other => {
                    return Err(Error::Plan(format!(
                        "merge `{other}`; expected 'transparent' or 'best_effort'"
                    )))
                }
            }
        }
        "strategy" => settings.strategy = text.parse()?,
        "late_path" => settings.late_path = Some(PathBuf::from(text)),
        "stages" => settings.stages = text.parse()?,
        "shed_load" => {
            settings.shed_load = match text.trim().to_ascii_lowercase().as_str() {
                "off" | "none" | "" => None,
                _ => Some(duration(&text, "shed_load")?),
            }
        }
        "scheduler" => settings.scheduler = text.parse()?,
        "aggregate" => {
            settings.two_phase = match text.to_ascii_lowercase().as_str() {
                "two_phase" | "auto" => true,
                "one_phase" => false,
                other => {
                    return Err(Error::Plan(format!(
                        "aggregate `{other}`; expected 'two_phase' or 'one_phase'"
                    )))
                }
            }
        }
        "max_latency" => {
            settings.max_latency = match text.trim().to_ascii_lowercase().as_str() {
                "off" | "none" | "" => None,
                _ => Some(duration(&text, "max_latency")?),
            }
        }
        "parallel" => {
            settings.auto = match text.to_ascii_lowercase().as_str() {
                "auto" | "true" | "on" => true,
                "off" | "false" | "serial" => false,
                other => {
                    return Err(Error::Plan(format!(
                        "parallel `{other}`; expected 'auto' or 'off'"
                    )))
                }
            }
        }
        "desired_rate" => settings.desired_rate = rate(value, "desired_rate")?,
        "splitter_rate" => settings.splitter_rate = rate(value, "splitter_rate")?,
        "window" => {
            settings.tune_window = match text.trim().to_ascii_lowercase().as_str() {
                "auto" => true,
                "declared" => false,
                other => {
                    return Err(Error::Plan(format!(
                        "window `{other}`; expected 'auto' (W by doubling before each query runs) or 'declared' (each stream's own window = ...)"
                    )))
                }
            }
        }
        other => {
            return Err(Error::Plan(format!(
                "unknown setting `{other}`; settings are partitions, merge, strategy, late_path, parallel, stages, max_latency, shed_load, scheduler, aggregate, desired_rate, splitter_rate, window"
            )))
        }
    }
    Ok(())
}

/// A rate in rows per second (`20000000`, `2.5e7`, quoted or not), positive and finite;
/// `'off'` or `'none'`: no rate.
fn rate(value: &Scalar, what: &str) -> Result<Option<f64>> {
    let r = match value {
        Scalar::Int(n) => Some(*n as f64),
        Scalar::Float(x) => Some(*x),
        Scalar::Str(s) => match s.trim().to_ascii_lowercase().as_str() {
            "off" | "none" => return Ok(None),
            t => t.replace('_', "").parse::<f64>().ok(),
        },
        _ => None,
    };
    match r {
        Some(r) if r.is_finite() && r > 0.0 => Ok(Some(r)),
        _ => Err(Error::Plan(format!(
            "{what} {}; expected a positive number of rows per second (such as 20000000 or '2e7') or 'off'",
            match value {
                Scalar::Str(s) => format!("'{s}'"),
                other => other.to_string(),
            }
        ))),
    }
}

/// A duration written as SQL settings write one: a number and a unit (`'10ms'`,
/// `'250 us'`, `'1.5s'`, `'2 seconds'`), positive and at most an hour.
pub fn duration(text: &str, what: &str) -> Result<std::time::Duration> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = (t[..split].trim(), t[split..].trim().to_ascii_lowercase());
    let scale = match unit.as_str() {
        "us" | "µs" | "microsecond" | "microseconds" => 1e-6,
        "ms" | "millisecond" | "milliseconds" => 1e-3,
        "s" | "sec" | "second" | "seconds" => 1.0,
        _ => -1.0,
    };
    match number.parse::<f64>() {
        Ok(n) if scale > 0.0 && n > 0.0 && n * scale <= 3600.0 => {
            Ok(std::time::Duration::from_secs_f64(n * scale))
        }
        _ => Err(Error::Plan(format!(
            "{what} '{text}'; expected a positive duration of at most an hour with a unit, such as '10ms', '250us' or '1.5s'"
        ))),
    }
}

#[cfg(test)]
mod duration_tests {
    use super::{duration, rate};
    use braid_plan::batch::Scalar;

    #[test]
    fn rates_read_as_rows_per_second() {
        assert_eq!(rate(&Scalar::Int(20_000_000), "x").unwrap(), Some(2e7));
        assert_eq!(rate(&Scalar::Float(2.5e6), "x").unwrap(), Some(2.5e6));
        assert_eq!(rate(&Scalar::Str("2e7".into()), "x").unwrap(), Some(2e7));
        assert_eq!(rate(&Scalar::Str("off".into()), "x").unwrap(), None);
        for bad in [Scalar::Int(0), Scalar::Int(-5), Scalar::Str("fast".into())] {
            let e = rate(&bad, "desired_rate").unwrap_err().to_string();
            assert!(
                e.contains("desired_rate") && e.contains("rows per second"),
                "{e}"
            );
        }
    }
    use std::time::Duration;

    #[test]
    fn durations_read_with_their_units() {
        assert_eq!(duration("10ms", "x").unwrap(), Duration::from_millis(10));
        assert_eq!(
            duration(" 250 us", "x").unwrap(),
            Duration::from_micros(250)
        );
        assert_eq!(duration("1.5s", "x").unwrap(), Duration::from_millis(1500));
        assert_eq!(duration("2 seconds", "x").unwrap(), Duration::from_secs(2));
        for bad in ["10", "ms", "-1ms", "0ms", "10 minutes", "2h", "1.2.3ms"] {
            let e = duration(bad, "max_latency").unwrap_err().to_string();
            assert!(e.contains("expected a positive duration"), "{bad}: {e}");
        }
    }
}
