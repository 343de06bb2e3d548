//! Rule: **two-phase aggregation** (Flink's local-global aggregation). A query whose one
//! stateful operator is an aggregate whose accumulators combine exactly (counts,
//! int64 sums and averages, min and max, over tumbling, hopping, cumulating or
//! unbounded windows) becomes a partial aggregate over the rows where they are (round
//! robin, no key) and, after the stage cut, a final aggregate that combines each
//! window's and group's partials, hashed by window and keys. An aggregate without
//! keys, which one partition would otherwise run, then runs on every partition, and a
//! few hot keys no longer load one partition with their rows.
//!
//! Exact means the same result in any order: integer sums are kept in 128 bits (the
//! partial rows carry both halves), so no split of the rows changes them or where
//! they overflow bigint (at the final emit, as serially). A float `sum` or `avg`
//! would round differently in another order, and `count(DISTINCT)`, session and count
//! windows do not combine from per-partition rows: those stay one-phase.

use crate::logical::{AggCall, AggFunc, AggPhase, Logical, WindowSpec};
use braid_plan::expr::Expr;
use braid_plan::types::{DataType, Field, Schema};

/// `root` with its aggregate split in two when it is the query's only stateful
/// operator and combines exactly; otherwise `root` unchanged.
pub(crate) fn two_phase(root: Logical) -> Logical {
    let splits = match root.stateful().as_slice() {
        [Logical::Aggregate {
            phase: AggPhase::Whole,
            input,
            window,
            aggs,
            ..
        }] => combines_exactly(window, aggs, input.schema()),
        _ => false,
    };
    match splits {
        true => split(root),
        false => root,
    }
}

/// Whether partial accumulators of `aggs` over `window` combine into exactly what one
/// accumulator over all rows holds.
fn combines_exactly(window: &WindowSpec, aggs: &[AggCall], input: &Schema) -> bool {
    let windows = matches!(
        window,
        WindowSpec::Tumble { .. }
            | WindowSpec::Hop { .. }
            | WindowSpec::Cumulate { .. }
            | WindowSpec::Unbounded
    );
    let int_arg = |c: &AggCall| {
        c.arg
            .as_ref()
            .is_some_and(|a| a.data_type(input) == Ok(DataType::Int64))
    };
    windows
        && aggs.iter().all(|c| match c.func {
            AggFunc::CountStar | AggFunc::Count | AggFunc::Min | AggFunc::Max => true,
            AggFunc::Sum => c.ty == DataType::Int64 && int_arg(c),
            AggFunc::Avg => int_arg(c),
            AggFunc::CountDistinct => false,
        })
}

/// The partial columns of one aggregate (see [`AggPhase::Partial`]): names and types.
pub(crate) fn partial_columns(i: usize, call: &AggCall) -> Vec<(String, DataType)> {
    let int = |suffix: &str| (format!("__p{i}{suffix}"), DataType::Int64);
    match call.func {
        AggFunc::CountStar | AggFunc::Count => vec![int("")],
        AggFunc::Sum => vec![int("_hi"), int("_lo")],
        AggFunc::Avg => vec![int("_hi"), int("_lo"), int("_n")],
        AggFunc::Min | AggFunc::Max | AggFunc::CountDistinct => {
            vec![(format!("__p{i}"), call.ty)]
        }
    }
}

/// Replaces the aggregate in `l` by a final aggregate over a partial one.
fn split(l: Logical) -> Logical {
    match l {
        Logical::Aggregate {
            phase: AggPhase::Whole,
            input,
            window,
            keys,
            aggs,
            schema,
        } => {
            // window_start, window_end, keys: as the whole aggregate's; then partials.
            let mut fields: Vec<Field> = schema.fields[..2 + keys.len()].to_vec();
            for (i, call) in aggs.iter().enumerate() {
                for (name, ty) in partial_columns(i, call) {
                    fields.push(Field::nullable(&name, ty));
                }
            }
            let partial_schema = Schema {
                fields,
                event_time: schema.event_time,
            };
            let final_keys = (0..keys.len())
                .map(|j| Expr::Column(2 + j, schema.fields[2 + j].name.clone()))
                .collect();
            let partial = Logical::Aggregate {
                phase: AggPhase::Partial,
                input,
                window: window.clone(),
                keys,
                aggs: aggs.clone(),
                schema: partial_schema,
            };
            Logical::Aggregate {
                phase: AggPhase::Final,
                input: Box::new(partial),
                window,
                keys: final_keys,
                aggs,
                schema,
            }
        }
        other => other.map_inputs(&mut split),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimizer::test_plans::{col, count_by, scan};

    /// `l`, an aggregate, with `func(arg)` added as column `x`.
    fn with_agg(mut l: Logical, func: AggFunc, arg: &str, ty: DataType) -> Logical {
        let Logical::Aggregate {
            input,
            aggs,
            schema,
            ..
        } = &mut l
        else {
            unreachable!()
        };
        aggs.push(AggCall {
            func,
            arg: Some(col(input, arg)),
            filter: None,
            ty,
        });
        schema.fields.push(Field::nullable("x", ty));
        l
    }

    #[test]
    fn an_exact_aggregate_is_split_into_partial_and_final() {
        let s = scan("s", 0, &["a", "b", "t"]);
        let plan = with_agg(count_by(s, &["b"]), AggFunc::Sum, "a", DataType::Int64);
        let out = two_phase(plan).to_string();
        assert!(
            out.contains("Aggregate (final) window=TUMBLE(10) keys=[b]")
                && out.contains("Aggregate (partial) window=TUMBLE(10) keys=[b]"),
            "{out}"
        );
        let Logical::Aggregate {
            phase: AggPhase::Final,
            input,
            ..
        } = two_phase(with_agg(
            count_by(scan("s", 0, &["a", "b", "t"]), &[]),
            AggFunc::Avg,
            "a",
            DataType::Float64,
        ))
        else {
            panic!("not split")
        };
        let names: Vec<&str> = input
            .schema()
            .fields
            .iter()
            .map(|f| f.name.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "window_start",
                "window_end",
                "__p0",
                "__p1_hi",
                "__p1_lo",
                "__p1_n"
            ]
        );
    }

    #[test]
    fn inexact_aggregates_stay_whole() {
        let s = || scan("s", 0, &["a", "b", "t"]);
        let distinct = with_agg(
            count_by(s(), &["b"]),
            AggFunc::CountDistinct,
            "a",
            DataType::Int64,
        );
        assert!(!two_phase(distinct).to_string().contains("partial"));
        // Two stateful operators: the stage cut decides.
        let twice = count_by(count_by(s(), &["a", "b"]), &["b"]);
        assert!(!two_phase(twice).to_string().contains("partial"));
    }
}
