//! The SQL operators allocate nothing per row once warm: a filter and projection
//! without string functions never touch their arena, and with string functions the
//! arena, reset after each row, is reused. Counted by a global allocator that counts
//! this thread's allocations (its own test binary, so that no other test pays for it).

use braid_plan::batch::{Batch, RowKey, Value};
use braid_plan::function::{Emitter, StreamFunction, StreamFunctionFactory};
use braid_sql::run::{LateRows, Layout, QueryFactory};
use std::alloc::{GlobalAlloc, Layout as Mem, System};
use std::cell::Cell;
use std::path::Path;
use std::sync::Arc;

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    // try_with: the thread's storage may be gone while it exits.
    let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Mem) -> *mut u8 {
        count();
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Mem) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Mem, size: usize) -> *mut u8 {
        count();
        System.realloc(p, l, size)
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(|c| c.get())
}

/// The stream function of `query` over `s (a BIGINT, b BIGINT, w TEXT)`, as written
/// (the filter kept, not moved into the balancer).
fn query_fn(query: &str) -> Box<dyn StreamFunction> {
    query_over("a BIGINT, b BIGINT, w TEXT", query)
}

/// The stream function of `query` over `s (columns)`.
fn query_over(columns: &str, query: &str) -> Box<dyn StreamFunction> {
    let text = format!("CREATE STREAM s ({columns}) WITH (source = 'stdin'); {query}");
    let script =
        braid_sql::compile_script(&text, Path::new("."), &Default::default()).expect("compiles");
    let logical = script.jobs[0].logical.clone().expect("a logical plan");
    QueryFactory::new(
        logical,
        Layout::single(),
        1,
        0,
        Arc::new(LateRows::default()),
    )
    .create(0, 1)
}

/// Allocations while `query` (of `arity` columns) processes 11 000 rows, after the same
/// rows once to warm up (its buffers grow to the longest row), and the rows it emitted.
fn allocations(query: &str, arity: usize) -> (u64, u64) {
    let mut f = query_fn(query);
    let words = ["apple", "Banana split", "ÇA VA", "x", ""];
    let mut input = Batch::new(3);
    for i in 0..11_000i64 {
        let w = words[i as usize % words.len()];
        input.push(
            RowKey::default(),
            &[Value::Int(i), Value::Int(i % 11), Value::Str(w)],
        );
    }
    let mut out = Batch::new(arity);
    let mut run = |from: usize, to: usize, out: &mut Batch| {
        let mut n = 0;
        for i in from..to {
            out.clear();
            let mut e = Emitter::new(out, i as u64, 0);
            f.process(input.row(i), &mut e);
            n += out.len() as u64;
        }
        n
    };
    run(0, 11_000, &mut out);
    let before = allocs();
    let emitted = run(0, 11_000, &mut out);
    (allocs() - before, emitted)
}

#[test]
fn filter_and_project_without_strings_allocate_nothing() {
    let (n, rows) = allocations(
        "SELECT a + b AS c, a * 2 AS d, w FROM s WHERE a % 3 <> 0 AND b > 5",
        3,
    );
    assert!(rows > 3000, "{rows} rows");
    assert_eq!(n, 0, "{n} allocations for 11 000 rows");
}

#[test]
fn string_functions_reuse_their_arena() {
    let (n, rows) = allocations(
        "SELECT upper(w) AS u, concat(w, '-', a) AS c, replace(w, 'a', 'αα') AS r, \
         CAST(b AS TEXT) || w AS t FROM s WHERE lower(w) <> 'x'",
        4,
    );
    assert!(rows > 7000, "{rows} rows");
    assert_eq!(n, 0, "{n} allocations for 11 000 rows");
}

/// A query that only filters and projects computes windows of all-int rows at a time
/// (`process_rows`) in buffers it reuses.
#[test]
fn the_window_path_allocates_nothing_once_warm() {
    let mut f = query_over(
        "a BIGINT, b BIGINT",
        "SELECT a + b AS c, a * 2 AS d FROM s WHERE a % 3 <> 0 AND b > 5",
    );
    let mut input = Batch::new(2);
    for i in 0..1024i64 {
        input.push_ints(
            RowKey {
                seq: i as u64,
                lane: 0,
            },
            &[i, i % 11],
        );
    }
    let rows: Vec<u32> = (0..1024).collect();
    let mut out = Batch::with_capacity(2, 1024);
    let mut run = |out: &mut Batch| {
        out.clear();
        f.process_rows(&input, &rows, &mut Emitter::new(out, 0, 0));
        out.len() as u64
    };
    // Two windows to warm up: the buffers of the rows kept swap roles at each filter.
    run(&mut out);
    run(&mut out);
    let before = allocs();
    let emitted: u64 = (0..10).map(|_| run(&mut out)).sum();
    let n = allocs() - before;
    assert!(emitted > 3000, "{emitted} rows");
    assert_eq!(n, 0, "{n} allocations for 10 windows");
}
