//! Property tests of the string functions: SQL text parsed and evaluated agrees with a
//! naive implementation written here over `Vec<char>` (PostgreSQL's definitions), on
//! random strings over a small alphabet with multi-byte characters and the
//! delimiters, nulls included; and printing a string expression parses back to it.

use braid_plan::batch::{Batch, RowKey, Scalar, Value};
use braid_plan::expr::Arena;
use braid_plan::types::{DataType, Field, Schema};
use braid_sql::expr::parse_expr;
use proptest::prelude::*;

/// Columns s, d, r (strings) and n, m (ints), all nullable.
fn schema() -> Schema {
    Schema::new(vec![
        Field::nullable("s", DataType::String),
        Field::nullable("d", DataType::String),
        Field::nullable("r", DataType::String),
        Field::nullable("n", DataType::Int64),
        Field::nullable("m", DataType::Int64),
    ])
}

/// One row's values.
#[derive(Clone, Debug)]
struct Row {
    s: Option<String>,
    d: Option<String>,
    r: Option<String>,
    n: Option<i64>,
    m: Option<i64>,
}

fn text(max: usize) -> impl Strategy<Value = Option<String>> {
    // Mostly non-null: a null makes every function but concat null.
    proptest::option::weighted(
        0.9,
        proptest::collection::vec(
            prop_oneof![
                Just('a'),
                Just('b'),
                Just('A'),
                Just(' '),
                Just(','),
                Just('é'),
                Just('€'),
                Just('ß'),
                Just('Σ'),
                Just('İ')
            ],
            0..max,
        )
        .prop_map(|v| v.into_iter().collect::<String>()),
    )
}

fn int() -> impl Strategy<Value = Option<i64>> {
    proptest::option::weighted(
        0.9,
        prop_oneof![
            -4i64..12,
            Just(i64::MAX),
            Just(i64::MIN),
            Just(i64::MIN + 1)
        ],
    )
}

fn row() -> impl Strategy<Value = Row> {
    (text(14), text(3), text(3), int(), int()).prop_map(|(s, d, r, n, m)| Row { s, d, r, n, m })
}

/// `text` evaluated on `row`: the value, or None for a fault.
fn sql(text: &str, row: &Row) -> Option<Scalar> {
    let e = parse_expr(text, &schema()).unwrap_or_else(|e| panic!("{text}: {e}"));
    let mut b = Batch::new(5);
    fn st(v: &Option<String>) -> Value<'_> {
        v.as_deref().map_or(Value::Null, Value::Str)
    }
    let it = |v: &Option<i64>| v.map_or(Value::Null, Value::Int);
    b.push(
        RowKey::default(),
        &[st(&row.s), st(&row.d), st(&row.r), it(&row.n), it(&row.m)],
    );
    let arena = Arena::new();
    e.eval(&b.row(0), &arena).ok().map(|v| v.to_scalar())
}

fn string(s: Option<String>) -> Option<Scalar> {
    Some(s.map_or(Scalar::Null, Scalar::Str))
}

fn chars(s: &str) -> Vec<char> {
    s.chars().collect()
}

/// PostgreSQL's substring: the characters at 1-based positions p with
/// start <= p < start + len (no upper bound without len); a negative len is an error.
fn naive_substring(s: &str, start: i64, len: Option<i64>) -> Option<String> {
    if len.is_some_and(|l| l < 0) {
        return None;
    }
    let (start, len) = (i128::from(start), len.map(i128::from));
    Some(
        chars(s)
            .into_iter()
            .enumerate()
            .filter(|(i, _)| {
                let p = *i as i128 + 1;
                p >= start && len.is_none_or(|l| p < start + l)
            })
            .map(|(_, c)| c)
            .collect(),
    )
}

/// 1-based character position of the first occurrence, 0 if none.
fn naive_strpos(s: &str, sub: &str) -> i64 {
    let (s, sub) = (chars(s), chars(sub));
    (0..=s.len())
        .find(|&i| s[i..].starts_with(&sub))
        .map_or(0, |i| i as i64 + 1)
}

/// Field n (1-based; negative from the end) of s cut at every delim, found by scanning
/// characters left to right.
fn naive_split_part(s: &str, delim: &str, n: i64) -> Option<String> {
    if n == 0 {
        return None;
    }
    let (s, d) = (chars(s), chars(delim));
    let mut fields: Vec<String> = Vec::new();
    if s.is_empty() {
        return Some(String::new());
    }
    if d.is_empty() {
        fields.push(s.iter().collect());
    } else {
        let mut cur = String::new();
        let mut i = 0;
        while i < s.len() {
            if s[i..].starts_with(&d) {
                fields.push(std::mem::take(&mut cur));
                i += d.len();
            } else {
                cur.push(s[i]);
                i += 1;
            }
        }
        fields.push(cur);
    }
    let k = if n > 0 {
        i128::from(n) - 1
    } else {
        fields.len() as i128 + i128::from(n)
    };
    Some(
        usize::try_from(k)
            .ok()
            .and_then(|k| fields.get(k).cloned())
            .unwrap_or_default(),
    )
}

/// Trims characters of `set` from the chosen ends.
fn naive_trim(s: &str, set: &str, start: bool, end: bool) -> String {
    let mut v = chars(s);
    let set = chars(set);
    while end && v.last().is_some_and(|c| set.contains(c)) {
        v.pop();
    }
    while start && v.first().is_some_and(|c| set.contains(c)) {
        v.remove(0);
    }
    v.into_iter().collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn case_mapping_and_replace(row in row()) {
        let up = row.s.as_ref().map(|s| s.chars().flat_map(char::to_uppercase).collect());
        prop_assert_eq!(sql("upper(s)", &row), string(up));
        let low = row.s.as_ref().map(|s| s.chars().flat_map(char::to_lowercase).collect());
        prop_assert_eq!(sql("lower(s)", &row), string(low));
        let rep = match (&row.s, &row.d, &row.r) {
            (Some(s), Some(d), Some(_)) if d.is_empty() => Some(s.clone()),
            (Some(s), Some(d), Some(r)) => Some(s.replace(d.as_str(), r)),
            _ => None,
        };
        prop_assert_eq!(sql("replace(s, d, r)", &row), string(rep));
    }

    #[test]
    fn substring_and_position(row in row()) {
        let want = match (&row.s, row.n, row.m) {
            (Some(s), Some(n), Some(m)) => naive_substring(s, n, Some(m)).map(Scalar::Str),
            _ => Some(Scalar::Null),
        };
        prop_assert_eq!(sql("SUBSTRING(s FROM n FOR m)", &row), want);
        let want = match (&row.s, row.n) {
            (Some(s), Some(n)) => naive_substring(s, n, None).map(Scalar::Str),
            _ => Some(Scalar::Null),
        };
        prop_assert_eq!(sql("substring(s, n)", &row), want);
        let want = match (&row.s, &row.d) {
            (Some(s), Some(d)) => Scalar::Int(naive_strpos(s, d)),
            _ => Scalar::Null,
        };
        prop_assert_eq!(sql("POSITION(d IN s)", &row), Some(want));
    }

    #[test]
    fn split_part_and_trims(row in row()) {
        let want = match (&row.s, &row.d, row.n) {
            (Some(s), Some(d), Some(n)) => naive_split_part(s, d, n).map(Scalar::Str),
            _ => Some(Scalar::Null),
        };
        prop_assert_eq!(sql("split_part(s, d, n)", &row), want);
        let trims = [
            ("TRIM(BOTH d FROM s)", true, true),
            ("TRIM(LEADING d FROM s)", true, false),
            ("TRIM(TRAILING d FROM s)", false, true),
        ];
        for (text, start, end) in trims {
            let want = match (&row.s, &row.d) {
                (Some(s), Some(d)) => Some(naive_trim(s, d, start, end)),
                _ => None,
            };
            prop_assert_eq!(sql(text, &row), string(want), "{}", text);
        }
        let want = row.s.as_ref().map(|s| naive_trim(s, " ", true, true));
        prop_assert_eq!(sql("trim(s)", &row), string(want));
    }

    #[test]
    fn concat_and_the_operator(row in row()) {
        let parts = [row.s.clone(), row.n.map(|n| n.to_string()), row.d.clone()];
        let want: String = parts.iter().flatten().cloned().collect();
        prop_assert_eq!(sql("concat(s, n, d)", &row), Some(Scalar::Str(want)));
        let want = match (&row.s, &row.d) {
            (Some(s), Some(d)) => Some(format!("{s}{d}")),
            _ => None,
        };
        prop_assert_eq!(sql("s || d", &row), string(want));
        let want = row.n.map(|n| n.to_string());
        prop_assert_eq!(sql("CAST(n AS VARCHAR)", &row), string(want));
    }

}

/// Each string function prints as text that parses back to it.
#[test]
fn string_exprs_print_then_parse() {
    let texts = [
        "upper(s)",
        "lower(s)",
        "concat(s, n, 'x')",
        "s || d",
        "SUBSTRING(s FROM n FOR m)",
        "substring(s, 2)",
        "TRIM(s)",
        "TRIM(LEADING d FROM s)",
        "rtrim(s, d)",
        "replace(s, d, r)",
        "POSITION(d IN s)",
        "split_part(s, d, -1)",
        "CAST(n AS TEXT)",
    ];
    for text in texts {
        let e = parse_expr(text, &schema()).expect("parses");
        let printed = e.to_string();
        let back = parse_expr(&printed, &schema()).expect("printed text parses");
        assert_eq!(back, e, "{text} printed as {printed}");
    }
}
