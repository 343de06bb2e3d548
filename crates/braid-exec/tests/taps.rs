//! Subscribers' filters run at the log as rows are appended (the source side), with
//! equality filters on one expression sharing a hash index. Every subscriber must
//! get exactly the rows its filter keeps, whether it subscribed before, between or
//! after the inserts; expected rows come from plain Rust predicates over the inserted
//! values, not from Braid's expressions.

use crate::live::{session, subscription};
use braid_exec::live::{LiveSession, Subscription};
use braid_plan::batch::Scalar;
use std::time::{Duration, Instant};

/// A row: k (NULL every 13th), v, name (NULL every 17th), f.
type Row = (Option<i64>, i64, Option<&'static str>, f64);

fn rows(n: i64) -> Vec<Row> {
    let names = ["ann", "bob", "cy"];
    (0..n)
        .map(|i| {
            (
                (i % 13 != 5).then_some(i),
                (i * 7919) % 100,
                (i % 17 != 2).then_some(names[(i % 3) as usize]),
                (i % 4) as f64,
            )
        })
        .collect()
}

fn sql_values(rows: &[Row]) -> String {
    let v: Vec<String> = rows
        .iter()
        .map(|(k, v, name, f)| {
            let k = k.map_or("NULL".to_string(), |k| k.to_string());
            let name = name.map_or("NULL".to_string(), |n| format!("'{n}'"));
            format!("({k}, {v}, {name}, {f:.1})")
        })
        .collect();
    v.join(", ")
}

fn scalars(r: &Row) -> Vec<Scalar> {
    vec![
        r.0.map_or(Scalar::Null, Scalar::Int),
        Scalar::Int(r.1),
        r.2.map_or(Scalar::Null, |n| Scalar::Str(n.to_string())),
        Scalar::Float(r.3),
    ]
}

type Pick = Box<dyn Fn(&Row) -> bool>;

/// Filters and the rows they keep (SQL: a NULL comparison keeps nothing).
fn filters() -> Vec<(String, Pick)> {
    let mut f: Vec<(String, Pick)> = (0..10)
        .map(|j| {
            let p: Pick = Box::new(move |r: &Row| r.0.is_some_and(|k| k % 10 == j));
            (format!("k % 10 = {j}"), p)
        })
        .collect();
    f.push((
        "3 = k % 10".into(),
        Box::new(|r| r.0.is_some_and(|k| k % 10 == 3)),
    ));
    f.push((
        "k % 10 = 4 AND v > 50".into(),
        Box::new(|r| r.0.is_some_and(|k| k % 10 == 4) && r.1 > 50),
    ));
    f.push(("name = 'bob'".into(), Box::new(|r| r.2 == Some("bob"))));
    f.push((
        "name = 'bob' AND k > 100".into(),
        Box::new(|r| r.2 == Some("bob") && r.0.is_some_and(|k| k > 100)),
    ));
    f.push(("v > 90".into(), Box::new(|r| r.1 > 90)));
    f.push(("f = 2".into(), Box::new(|r| r.3 == 2.0)));
    f.push((
        "k % 10 = 7 OR v = 1".into(),
        Box::new(|r| r.0.is_some_and(|k| k % 10 == 7) || r.1 == 1),
    ));
    f.push(("k = 42".into(), Box::new(|r| r.0 == Some(42))));
    f
}

fn insert(s: &mut LiveSession, rows: &[Row]) {
    let sql = format!("INSERT INTO ev VALUES {}", sql_values(rows));
    for r in s.execute(&sql) {
        r.unwrap_or_else(|e| panic!("insert: {e}"));
    }
}

/// Everything `sub` has now (its stream stays open).
fn drain(sub: &mut Subscription) -> Vec<Vec<Scalar>> {
    let mut out = Vec::new();
    let start = Instant::now();
    loop {
        match sub.try_next() {
            Ok(b) => out.extend(b.rows().map(|r| r.to_scalars())),
            Err(false) => return out,
            Err(true) => panic!("the subscription ended: {:?}", sub.error()),
        }
        assert!(start.elapsed() < Duration::from_secs(10));
    }
}

#[test]
fn filters_at_the_log_give_each_subscriber_exactly_its_rows() {
    for workers in [1, 2, 4] {
        let mut s = session(workers);
        let run = |s: &mut LiveSession, sql: &str| {
            for r in s.execute(sql) {
                r.unwrap_or_else(|e| panic!("{sql}: {e}"));
            }
        };
        run(
            &mut s,
            "CREATE STREAM ev (k BIGINT, v BIGINT, name VARCHAR, f DOUBLE)",
        );
        let all = rows(600);
        let filters = filters();
        // Subscribed before any row, after the first third, and after all rows.
        let mut subs: Vec<(usize, Subscription)> = Vec::new();
        for (i, (f, _)) in filters.iter().enumerate() {
            subs.push((
                i,
                subscription(&mut s, &format!("SUBSCRIBE TO ev WHERE {f}")),
            ));
        }
        insert(&mut s, &all[..200]);
        for (i, (f, _)) in filters.iter().enumerate() {
            subs.push((
                i,
                subscription(&mut s, &format!("SUBSCRIBE TO ev WHERE {f}")),
            ));
        }
        insert(&mut s, &all[200..450]);
        insert(&mut s, &all[450..]);
        for (i, (f, _)) in filters.iter().enumerate() {
            subs.push((i, subscription(&mut s, &format!("SUBSCRIBE ev WHERE {f}"))));
        }
        for (n, (i, sub)) in subs.iter_mut().enumerate() {
            let (f, pick) = &filters[*i];
            let want: Vec<Vec<Scalar>> = all.iter().filter(|r| pick(r)).map(scalars).collect();
            assert_eq!(drain(sub), want, "{workers} workers, subscriber {n}: {f}");
        }
        // A dropped subscriber's tap goes; the others go on.
        subs.truncate(5);
        insert(&mut s, &all[..30]);
        for (i, sub) in subs.iter_mut() {
            let (f, pick) = &filters[*i];
            let want: Vec<Vec<Scalar>> =
                all[..30].iter().filter(|r| pick(r)).map(scalars).collect();
            assert_eq!(drain(sub), want, "after the drop: {f}");
        }
    }
}

#[test]
fn a_fault_in_a_filter_at_the_log_ends_that_subscriber_only() {
    let mut s = session(1);
    for r in s.execute("CREATE STREAM ev (k BIGINT, v BIGINT, name VARCHAR, f DOUBLE)") {
        r.unwrap();
    }
    let all = rows(100);
    let faulty_sql = "SUBSCRIBE TO ev WHERE k % 10 = 3 AND 10 / (k - 3) > 0";
    let mut faulty = subscription(&mut s, faulty_sql);
    let mut threes = subscription(&mut s, "SUBSCRIBE TO ev WHERE k % 10 = 3");
    // Where the indexed side is NULL the rest of the filter is still evaluated (NULL
    // AND x evaluates x), so its fault on the NULL row (row 5) must come out.
    let null_sql = "SUBSCRIBE TO ev WHERE k % 10 = 3 AND 10 / coalesce(k, 0) > 0";
    let mut on_null = subscription(&mut s, null_sql);
    insert(&mut s, &all[..2]); // no k = 3 yet
    insert(&mut s, &all[2..]);
    let mut late = subscription(&mut s, faulty_sql);
    let mut on_null_late = subscription(&mut s, null_sql);
    for sub in [&mut faulty, &mut late, &mut on_null, &mut on_null_late] {
        let start = Instant::now();
        while sub.try_next() != Err(true) {
            assert!(start.elapsed() < Duration::from_secs(5), "no fault");
        }
        let e = sub.error().unwrap_or_default();
        assert!(e.contains("division by zero") && e.contains("10 / "), "{e}");
    }
    let want: Vec<Vec<Scalar>> = all
        .iter()
        .filter(|r| r.0.is_some_and(|k| k % 10 == 3))
        .map(scalars)
        .collect();
    assert_eq!(drain(&mut threes), want);
}
