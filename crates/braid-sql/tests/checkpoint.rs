//! Checkpoints of a query's stream function: an instance restored from what another
//! saved at the end of an epoch, fed the rest of the input, emits exactly what the
//! uninterrupted instance does (the same rows, late rows and faults, in the same order,
//! with the same keys), for every stateful operator; bytes that do not fit the query
//! (another query's, truncated, corrupt) are an error, not a panic.

use braid_plan::batch::{Batch, RowKey, Scalar, Value};
use braid_plan::function::{Emitter, RowFault, StreamFunction, StreamFunctionFactory};
use braid_plan::plan::Plan;
use braid_plan::types::Schema;
use braid_sql::compile_script;
use proptest::prelude::*;
use std::sync::{Arc, OnceLock};

/// Event-time units per epoch, and epochs of input.
const EPOCH: i64 = 10;
const EPOCHS: u64 = 7;
/// The partition the instances run as (of 2).
const PART: (u32, u32) = (1, 2);

/// Two streams of the same columns (a query over both reads `_stream, _time, k, ...`)
/// and a table.
const HEAD: &str = "SET parallel = 'off'; SET stages = 'query';
CREATE STREAM s (k BIGINT, ts BIGINT NOT NULL, v DOUBLE, w TEXT, n BIGINT) WITH (path = 's.csv', event_time = 'ts', epoch = 10, lateness = 5);
CREATE STREAM r (k BIGINT, ts BIGINT NOT NULL, v DOUBLE, w TEXT, n BIGINT) WITH (path = 'r.csv', event_time = 'ts', epoch = 10, lateness = 5);
CREATE TABLE tab (k BIGINT, name TEXT, f DOUBLE) WITH (path = 'tab.csv');
";

const TABLE: &str = "k,name,f\n0,zero,0.5\n1,one,-1.25\n1,uno,3\n2,two,\n,nobody,7\n";

const JOIN_ON: &str = "ON a.k = b.k AND b.ts BETWEEN a.ts - 5 AND a.ts + 8";

/// Every stateful operator, with strings, floats and nulls in keys and aggregates.
fn queries() -> Vec<(&'static str, String)> {
    let agg = "SELECT window_start, window_end, k, count(*) AS c, sum(v) AS sv, avg(n) AS an, \
               min(w) AS lo, max(v) AS hi";
    let join = |kind: &str| {
        format!("SELECT a.k, a.ts, a.v, b.k AS bk, b.ts AS bts, b.w FROM s a {kind} r b {JOIN_ON}")
    };
    vec![
        ("tumble", format!("{agg}, count(DISTINCT w) AS dw, sum(n) AS sn, count(v) AS cv FROM s GROUP BY TUMBLE(ts, 20), k")),
        ("hop", format!("{agg} FROM s GROUP BY HOP(ts, 10, 30), k")),
        ("hop_uneven", format!("{agg}, sum(n) FILTER (WHERE v > 0) AS sp FROM s GROUP BY HOP(ts, 20, 30), k, w")),
        ("cumulate", "SELECT window_start, window_end, count(*) AS c, sum(v) AS sv, max(w) AS mw FROM s GROUP BY CUMULATE(ts, 10, 30)".into()),
        ("session", format!("{agg} FROM s GROUP BY SESSION(ts, 7), k")),
        ("count_window", format!("{agg} FROM s GROUP BY ROWS(3), k")),
        ("global", "SELECT count(*) AS c, sum(v) AS sv, avg(n) AS an, count(DISTINCT k) AS dk, min(w) AS mw, max(v) AS xv FROM s".into()),
        ("grouped_unbounded", "SELECT k, w, count(*) FILTER (WHERE v > 0) AS pos, sum(n) AS sn, avg(v) AS av FROM s GROUP BY k, w".into()),
        ("distinct", "SELECT DISTINCT k, w FROM s".into()),
        ("interval_join", join("JOIN")),
        ("left_join", join("LEFT JOIN")),
        ("right_join", join("RIGHT JOIN")),
        ("full_join", join("FULL JOIN")),
        ("unkeyed_join", "SELECT a.ts, b.ts AS bts, a.v, b.v AS bv FROM s a JOIN r b ON b.ts BETWEEN a.ts - 6 AND a.ts + 6 AND a.v < b.v".into()),
        ("window_over_left_join", format!("SELECT window_start, window_end, count(*) AS c, count(b.w) AS m, sum(b.v) AS sv FROM s a LEFT JOIN r b {JOIN_ON} GROUP BY TUMBLE(a.ts, 20)")),
        ("count_window_join", "SELECT a.k, a.n, b.n AS bn, b.w FROM LAST(s, 3) a JOIN LAST(r, 2) b ON a.k = b.k".into()),
        ("top_n", "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY c DESC, k) AS rownum FROM (SELECT window_start, window_end, k, count(*) AS c, sum(v) AS sv FROM s GROUP BY TUMBLE(ts, 20), k)) WHERE rownum <= 2".into()),
        ("lookup", "SELECT window_start, window_end, t.name, count(*) AS c, sum(t.f) AS sf, max(s.w) AS mw FROM s JOIN tab t ON s.k = t.k GROUP BY TUMBLE(s.ts, 20), t.name".into()),
        ("left_lookup", "SELECT s.k, s.ts, t.name, t.f FROM s LEFT JOIN tab t ON s.k = t.k WHERE s.n IS NULL OR s.n > -50".into()),
        ("union", "SELECT window_start, window_end, k, count(*) AS c, sum(v) AS sv FROM (SELECT k, ts, v FROM s UNION ALL SELECT k, ts, v FROM r) GROUP BY SESSION(ts, 5), k".into()),
    ]
}

/// A compiled query's stream function and the rows it reads.
struct Query {
    name: &'static str,
    factory: Arc<dyn StreamFunctionFactory>,
    /// The physical input (one stream's columns, or `_stream, _time` and theirs).
    input: Schema,
    arity: usize,
    late_arity: Option<usize>,
}

/// The Map of a plan (one stage: one Map) and its input's schema.
fn map_of<'p>(plan: &'p Plan, reg: &braid_plan::function::Registry) -> (&'p str, Schema) {
    match plan {
        Plan::Map(m) => (&m.function, m.input.schema(reg).expect("input schema")),
        Plan::Merge(m) => map_of(&m.input, reg),
        Plan::Sink(s) => map_of(&s.input, reg),
        Plan::Together(v) => map_of(&v[0], reg),
        other => panic!("no Map above {other:?}"),
    }
}

fn compile(name: &'static str, sql: &str) -> Query {
    let dir = std::env::temp_dir().join(format!("braid-ckpt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("tab.csv"), TABLE).expect("table");
    let script = compile_script(&format!("{HEAD}{sql};"), &dir, &Default::default())
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let job = &script.jobs[0];
    let (function, input) = map_of(&job.plan, &script.registry);
    let factory = script
        .registry
        .function(function)
        .expect("function")
        .clone();
    assert!(factory.checkpoints(), "{name}");
    let arity = factory.output_schema(&input).expect("schema").arity();
    let late_arity = factory.late_schema().map(|s| s.arity());
    Query {
        name,
        factory,
        input,
        arity,
        late_arity,
    }
}

/// Every query, compiled once.
fn all() -> &'static [Query] {
    static ALL: OnceLock<Vec<Query>> = OnceLock::new();
    ALL.get_or_init(|| {
        queries()
            .into_iter()
            .map(|(name, sql)| compile(name, &sql))
            .collect()
    })
}

fn query(name: &str) -> &'static Query {
    all().iter().find(|q| q.name == name).expect("query")
}

/// One generated input row: its stream (0 `s`, 1 `r`), epoch, and values.
#[derive(Clone, Debug)]
struct Gen {
    stream: i64,
    epoch: u64,
    /// Event time relative to the epoch's start: some rows are late (before the
    /// epoch's start minus the lateness of 5; for windows, those whose windows all end
    /// before that).
    jitter: i64,
    k: Option<i64>,
    v: Option<f64>,
    w: Option<&'static str>,
    n: Option<i64>,
}

fn gen_row() -> impl Strategy<Value = Gen> {
    let words = prop::sample::select(vec!["a", "b", "ÇA, \"va\"", ""]);
    (
        0..2i64,
        0..EPOCHS,
        prop_oneof![3 => -8..10i64, 1 => -40..-8i64],
        prop::option::weighted(0.85, 0..4i64),
        prop::option::weighted(
            0.85,
            prop_oneof![(-40..40i64).prop_map(|x| x as f64 / 4.0), -1e3..1e3f64],
        ),
        prop::option::weighted(0.85, words),
        prop::option::weighted(0.85, -100..100i64),
    )
        .prop_map(|(stream, epoch, jitter, k, v, w, n)| Gen {
            stream,
            epoch,
            jitter,
            k,
            v,
            w,
            n,
        })
}

/// The rows in the order a source delivers them (by epoch, then as generated).
fn gen_input() -> impl Strategy<Value = Vec<Gen>> {
    prop::collection::vec(gen_row(), 0..50).prop_map(|mut rows| {
        rows.sort_by_key(|g| g.epoch);
        rows
    })
}

/// The physical rows of `gens` for `q`, named by the input's columns.
fn physical(q: &Query, gens: &[Gen]) -> Batch {
    let mut b = Batch::new(q.input.arity());
    for g in gens {
        let ts = g.epoch as i64 * EPOCH + g.jitter;
        let values: Vec<Value<'_>> = q
            .input
            .fields
            .iter()
            .map(|f| match f.name.as_str() {
                "_stream" => Value::Int(g.stream),
                "_time" | "ts" => Value::Int(ts),
                "k" => g.k.map_or(Value::Null, Value::Int),
                "v" => g.v.map_or(Value::Null, Value::Float),
                "w" => g.w.map_or(Value::Null, Value::Str),
                "n" => g.n.map_or(Value::Null, Value::Int),
                other => panic!("{}: input column {other}", q.name),
            })
            .collect();
        b.push(RowKey::default(), &values);
    }
    b
}

/// What an instance emits.
#[derive(Clone, Debug, PartialEq)]
enum Out {
    Row(RowKey, Vec<Scalar>),
    Late(Vec<Scalar>),
    Fault(RowFault),
}

/// One call on the instance.
#[derive(Clone, Copy, Debug)]
enum Step {
    Row(usize),
    EndOfEpoch(u64),
    Finish,
}

/// The calls of a run over `gens`: each epoch's rows, then its end; then the finish.
fn steps(gens: &[Gen]) -> Vec<Step> {
    let mut v = Vec::new();
    let mut i = 0;
    for e in 0..EPOCHS {
        while i < gens.len() && gens[i].epoch == e {
            v.push(Step::Row(i));
            i += 1;
        }
        v.push(Step::EndOfEpoch(e));
    }
    v.push(Step::Finish);
    v
}

/// Makes call `step` on `f`, appending what it emits to `out`.
fn call(
    q: &Query,
    f: &mut dyn StreamFunction,
    input: &Batch,
    gens: &[Gen],
    step: Step,
    out: &mut Vec<Out>,
) {
    let mut rows = Batch::new(q.arity);
    let mut late = q.late_arity.map(Batch::new);
    let mut faults = Vec::new();
    let (seq, epoch) = match step {
        Step::Row(i) => (i as u64, gens[i].epoch),
        Step::EndOfEpoch(e) => (RowKey::END_OF_EPOCH, e),
        Step::Finish => (RowKey::FINISH, u64::MAX),
    };
    let mut e = Emitter::new(&mut rows, seq, PART.0)
        .at_epoch(epoch)
        .with_late(late.as_mut())
        .with_faults(&mut faults);
    match step {
        Step::Row(i) => f.process(input.row(i), &mut e),
        Step::EndOfEpoch(ep) => f.end_of_epoch(ep, &mut e),
        Step::Finish => f.finish(&mut e),
    }
    out.extend((0..rows.len()).map(|i| Out::Row(rows.key(i), rows.row(i).to_scalars())));
    if let Some(l) = &late {
        out.extend(l.rows().map(|r| Out::Late(r.to_scalars())));
    }
    out.extend(faults.into_iter().map(Out::Fault));
}

fn create(q: &Query) -> Box<dyn StreamFunction> {
    q.factory.create(PART.0, PART.1)
}

/// Runs `q` over `gens` uninterrupted, saving at the end of every epoch; then, for each
/// of those checkpoints, restores a fresh instance from it and runs the rest: its output
/// must be the rest of the uninterrupted run's, and it must save the same bytes.
fn check(q: &Query, gens: &[Gen]) -> Result<(), TestCaseError> {
    let input = physical(q, gens);
    let steps = steps(gens);
    let mut f = create(q);
    let mut out = Vec::new();
    // (next step, output so far, bytes) at each checkpoint.
    let mut checkpoints = Vec::new();
    for (i, &step) in steps.iter().enumerate() {
        call(q, &mut *f, &input, gens, step, &mut out);
        if let Step::EndOfEpoch(_) = step {
            let mut bytes = vec![0xAB]; // save appends
            f.save(&mut bytes)
                .map_err(|e| TestCaseError::fail(format!("{}: {e}", q.name)))?;
            checkpoints.push((i + 1, out.len(), bytes.split_off(1)));
        }
    }
    for (next, done, bytes) in checkpoints {
        let mut g = create(q);
        g.restore(&bytes)
            .map_err(|e| TestCaseError::fail(format!("{}: {e}", q.name)))?;
        let mut again = Vec::new();
        g.save(&mut again).expect("save");
        prop_assert!(
            again == bytes,
            "{}: a restored instance saves other bytes",
            q.name
        );
        let mut rest = Vec::new();
        for &step in &steps[next..] {
            call(q, &mut *g, &input, gens, step, &mut rest);
        }
        prop_assert_eq!(
            &rest[..],
            &out[done..],
            "{}: restored at step {} (of {})",
            q.name,
            next,
            steps.len()
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Every query, restored at the end of every epoch, goes on as if never stopped.
    #[test]
    fn restored_queries_go_on_as_if_never_stopped(gens in gen_input()) {
        for q in all() {
            check(q, &gens)?;
        }
    }

    /// Changing any one byte of a checkpoint, or cutting it short, makes it refused.
    #[test]
    fn damaged_checkpoints_are_refused(
        gens in gen_input(),
        which in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        flip in 1..=255u8,
    ) {
        let q = &all()[which.index(all().len())];
        let bytes = saved_after(q, &gens, EPOCHS / 2);
        let i = at.index(bytes.len());
        let mut bad = bytes.clone();
        bad[i] ^= flip;
        prop_assert!(create(q).restore(&bad).is_err(), "{}: byte {} changed", q.name, i);
        prop_assert!(create(q).restore(&bytes[..i]).is_err(), "{}: cut at {}", q.name, i);
        let mut longer = bytes.clone();
        longer.push(flip);
        prop_assert!(create(q).restore(&longer).is_err(), "{}: a byte more", q.name);
    }
}

/// What `q` saves after the end of epoch `last` of `gens`.
fn saved_after(q: &Query, gens: &[Gen], last: u64) -> Vec<u8> {
    let input = physical(q, gens);
    let mut f = create(q);
    let mut out = Vec::new();
    for step in steps(gens) {
        call(q, &mut *f, &input, gens, step, &mut out);
        if let Step::EndOfEpoch(e) = step {
            if e == last {
                break;
            }
        }
    }
    let mut bytes = Vec::new();
    f.save(&mut bytes).expect("save");
    bytes
}

/// Some rows in every epoch, of both streams, every key, some late.
fn some_input() -> Vec<Gen> {
    (0..42)
        .map(|i| Gen {
            stream: i % 2,
            epoch: (i / 6) as u64,
            jitter: if i % 5 == 3 { -38 } else { (i * 7) % 27 - 16 },
            k: (i % 5 != 4).then_some(i % 3),
            v: Some(i as f64 / 3.0),
            w: Some(["a", "b", "c"][i as usize % 3]),
            n: Some(i * 11 % 17),
        })
        .collect()
}

fn restore_error(q: &Query, bytes: &[u8]) -> String {
    match create(q).restore(bytes) {
        Ok(()) => panic!("{}: restored bytes that do not fit", q.name),
        Err(e) => e.to_string(),
    }
}

/// Another query's checkpoint is refused, naming the mismatch: even a query of the
/// same operators differing in a constant.
#[test]
fn another_querys_checkpoint_is_refused() {
    let gens = some_input();
    for a in all() {
        let bytes = saved_after(a, &gens, 3);
        for b in all().iter().filter(|b| b.name != a.name) {
            let e = restore_error(b, &bytes);
            assert!(
                e.contains("another query"),
                "{} into {}: {e}",
                a.name,
                b.name
            );
        }
    }
    let wider = compile(
        "tumble_30",
        "SELECT window_start, window_end, k, count(*) AS c FROM s GROUP BY TUMBLE(ts, 30), k",
    );
    let narrower = compile(
        "tumble_20",
        "SELECT window_start, window_end, k, count(*) AS c FROM s GROUP BY TUMBLE(ts, 20), k",
    );
    let e = restore_error(&narrower, &saved_after(&wider, &gens, 3));
    assert!(e.contains("another query"), "{e}");
}

/// Bytes that are no checkpoint, or of another format version, are refused by name.
#[test]
fn foreign_bytes_are_refused() {
    let q = query("tumble");
    assert!(restore_error(q, &[]).contains("shorter than its header"));
    assert!(restore_error(q, b"not a checkpoint of anything at all, but long").contains("magic"));
    let mut bytes = saved_after(q, &some_input(), 2);
    bytes[4] ^= 1;
    let e = restore_error(q, &bytes);
    assert!(e.contains("format version"), "{e}");
}

/// FNV-1a, as the checkpoint's header holds it of the body.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The header's length: magic, version, plan, operators, body length, checksum.
const HEADER: usize = 36;

/// `body` behind `header` with the length and checksum fixed, as if saved so.
fn forged(header: &[u8], body: &[u8]) -> Vec<u8> {
    let mut v = header[..HEADER].to_vec();
    v[20..28].copy_from_slice(&(body.len() as u64).to_le_bytes());
    v[28..36].copy_from_slice(&fnv(body).to_le_bytes());
    v.extend_from_slice(body);
    v
}

/// A state that passes the header's checks but is not the query's (another query's body
/// under this query's header) is refused by what does not fit: the operator's kind, the
/// number of keys, the width of a join's rows.
#[test]
fn states_of_other_shapes_are_refused() {
    let gens = some_input();
    let mine = |q: &Query| saved_after(q, &gens, 3);
    let narrow = compile(
        "narrow_join",
        &format!("SELECT a.k, b.w FROM (SELECT k, ts FROM s) a JOIN r b {JOIN_ON}"),
    );
    let cases = [
        (
            query("interval_join"),
            query("tumble"),
            "stateful operator 1: an aggregate's state for a stream join",
        ),
        (
            query("tumble"),
            query("hop"),
            "a group of 1 keys and 5 aggregates, not 1 and 8",
        ),
        (query("tumble"), query("top_n"), "a body of 2 states, not 1"),
        (
            &narrow,
            query("interval_join"),
            "the join's left side: rows of 5 columns, not 2",
        ),
    ];
    for (q, other, what) in cases {
        let bytes = forged(&mine(q), &mine(other)[HEADER..]);
        let e = restore_error(q, &bytes);
        assert!(e.contains(what), "{} into {}: {e}", other.name, q.name);
    }
    // The header's own, with its length and checksum fixed, restores.
    let q = query("left_join");
    let bytes = mine(q);
    create(q)
        .restore(&forged(&bytes, &bytes[HEADER..]))
        .expect("the same bytes");
}

/// A checkpoint of a fresh instance, and one at the end of the input, restore too.
#[test]
fn checkpoints_of_empty_and_finished_state_restore() {
    for q in all() {
        let mut bytes = Vec::new();
        create(q).save(&mut bytes).expect("save");
        create(q).restore(&bytes).expect("restore");
    }
    check(query("session"), &[]).expect("no rows");
}

/// The output of an uninterrupted run of `q` over `gens`.
fn run(q: &Query, gens: &[Gen]) -> Vec<Out> {
    let input = physical(q, gens);
    let mut f = create(q);
    let mut out = Vec::new();
    for step in steps(gens) {
        call(q, &mut *f, &input, gens, step, &mut out);
    }
    out
}

/// A fixed input reaches every operator (every query emits rows, and every one that can
/// refuse late rows refuses some), and every query restored at the end of each of its
/// epochs goes on as if never stopped: the property test's check is not vacuous.
#[test]
fn a_fixed_input_reaches_every_operator() {
    let gens = some_input();
    for q in all() {
        let out = run(q, &gens);
        let rows = out.iter().filter(|o| matches!(o, Out::Row(..))).count();
        let late = out.iter().filter(|o| matches!(o, Out::Late(..))).count();
        assert!(rows > 0, "{}: no rows", q.name);
        assert!(
            q.late_arity.is_none() || late > 0,
            "{}: no late rows",
            q.name
        );
        check(q, &gens).unwrap_or_else(|e| panic!("{e}"));
    }
}
