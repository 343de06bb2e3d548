//! A split's routing, as the engine evaluates it: route, `when` and broadcast compiled
//! once per split, the common shapes (a column; a column compared with an integer)
//! matched once per window. The reference interpreter (`braid_plan::reference`) routes
//! on its own, by evaluating the expressions row by row, so a bug here shows up as a
//! difference in the oracle tests.

use crate::shared::Shared;
use braid_plan::batch::{Batch, Datum, Row, Scalar};
use braid_plan::error::Result;
use braid_plan::expr::{Arena, BinOp, Expr, Fault};
use braid_plan::function::{Registry, RouteFn};
use braid_plan::plan::{Route, Split};
use std::cell::RefCell;
use std::sync::Arc;

/// Routing as one closure: destination partitions of a row, in ascending order.
pub(crate) struct Router {
    q: u32,
    modulo: Modulo,
    route: RouteImpl,
    broadcast: Option<Compiled>,
    /// Where faults go, with the site's name and whether it reads a source (see
    /// [`Router::reporting`]); a fault without it panics.
    faults: Option<(Arc<Shared>, String, Option<String>)>,
    /// The strings the expressions make for one row (see [`Arena`]), reset after each
    /// row: a route is an int and a condition a bool, so nothing outlives the row.
    /// Untouched without string functions.
    arena: RefCell<Arena>,
}

/// `v.rem_euclid(q)` for a fixed `q > 0`: a mask when `q` is a power of two (two's
/// complement makes that right for negative `v` too), else a division.
#[derive(Clone, Copy)]
pub(crate) struct Modulo {
    q: i64,
    mask: Option<i64>,
}

impl Modulo {
    pub(crate) fn new(q: u32) -> Modulo {
        let q = i64::from(q.max(1));
        Modulo {
            q,
            mask: (q.count_ones() == 1).then_some(q - 1),
        }
    }

    #[inline]
    pub(crate) fn of(self, v: i64) -> u32 {
        match self.mask {
            Some(m) => (v & m) as u32,
            None => v.rem_euclid(self.q) as u32,
        }
    }

    /// `v % q` of an unsigned `v` (a sequence number).
    #[inline]
    pub(crate) fn of_u64(self, v: u64) -> u32 {
        match self.mask {
            Some(m) => (v & m as u64) as u32,
            None => (v % self.q as u64) as u32,
        }
    }
}

enum RouteImpl {
    Expr(Compiled, Option<Compiled>),
    Native(RouteFn),
    RoundRobin,
    Grid(Compiled, u64, u64),
    /// `Route::Any`: each window whole to the next of `targets`, in turn.
    Any {
        targets: Vec<u32>,
        next: std::cell::Cell<usize>,
    },
}

/// A route or broadcast expression with the shapes splits use most (a column; a
/// column compared with an integer) evaluated straight on the row's datums, which
/// gives the same value as [`Expr::eval`] without walking the tree.
enum Compiled {
    Column(usize),
    ColumnCmpInt(usize, BinOp, i64, Expr),
    Expr(Expr),
}

impl Compiled {
    fn new(e: &Expr) -> Compiled {
        match e {
            Expr::Column(c, _) => Compiled::Column(*c),
            Expr::Binary(op, l, r) if op.is_comparison() => match (l.as_ref(), r.as_ref()) {
                (Expr::Column(c, _), Expr::Literal(Scalar::Int(k))) => {
                    Compiled::ColumnCmpInt(*c, *op, *k, e.clone())
                }
                _ => Compiled::Expr(e.clone()),
            },
            e => Compiled::Expr(e.clone()),
        }
    }

    /// The value as a partition number source: an int, or None.
    #[inline]
    fn int(&self, row: &Row<'_>, arena: &Arena) -> Result<Option<i64>, Fault> {
        Ok(match self {
            Compiled::Column(c) => row.int(*c),
            Compiled::ColumnCmpInt(..) => None,
            Compiled::Expr(e) => e.eval(row, arena)?.as_int(),
        })
    }

    /// True only when the predicate is true (not null, not false).
    #[inline]
    fn holds(&self, row: &Row<'_>, arena: &Arena) -> Result<bool, Fault> {
        Ok(match self {
            Compiled::ColumnCmpInt(c, op, k, e) => match row.datum(*c) {
                Datum::Int(v) => op.compare(v.cmp(k)),
                // Floats, nulls and other types compare as the interpreter does.
                _ => e.eval(row, arena)?.is_true(),
            },
            Compiled::Column(c) => row.get(*c).is_true(),
            Compiled::Expr(e) => e.eval(row, arena)?.is_true(),
        })
    }
}

/// Where a row goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dest {
    /// Nowhere.
    Omit,
    /// One partition.
    Partition(u32),
    /// All partitions.
    Broadcast,
    /// The partitions `p` with `p % modulus == residue` (a grid row or column).
    Class(u64, u64),
}

impl Router {
    /// Resolves a split's routing.
    pub(crate) fn new(split: &Split, registry: &Registry) -> Result<Router> {
        let route = match &split.route {
            Route::Expr { expr, when } => {
                RouteImpl::Expr(Compiled::new(expr), when.as_ref().map(Compiled::new))
            }
            Route::Native(name) => RouteImpl::Native(registry.route(name)?.clone()),
            Route::RoundRobin => RouteImpl::RoundRobin,
            Route::Any => RouteImpl::Any {
                targets: (0..split.q.max(1)).collect(),
                next: Default::default(),
            },
            Route::Grid { left, rows, cols } => {
                RouteImpl::Grid(Compiled::new(left), *rows as u64, *cols as u64)
            }
        };
        Ok(Router {
            q: split.q,
            modulo: Modulo::new(split.q),
            route,
            broadcast: split.broadcast.as_ref().map(Compiled::new),
            faults: None,
            arena: RefCell::new(Arena::new()),
        })
    }

    /// For `Route::Any`: the partitions this splitter's windows go to, in turn (none
    /// given: every partition).
    pub(crate) fn any_of(mut self, partitions: Vec<u32>) -> Router {
        if let RouteImpl::Any { targets, .. } = &mut self.route {
            if !partitions.is_empty() {
                *targets = partitions;
            }
        }
        self
    }

    /// Reports the rows whose route, `when` or broadcast expression faults (they go
    /// nowhere) to `shared`, as faults of `site`; `source`: the source the split reads,
    /// whose rows the sequence numbers count, if it reads one.
    pub(crate) fn reporting(
        mut self,
        shared: &Arc<Shared>,
        site: String,
        source: Option<String>,
    ) -> Router {
        self.faults = Some((shared.clone(), site, source));
        self
    }

    /// A fault on the row with sequence number `seq`: reported, and the row omitted.
    #[cold]
    #[inline(never)]
    fn fault(&self, seq: u64, fault: Fault) -> Dest {
        match &self.faults {
            Some((shared, site, source)) => {
                shared.fault(site, "split", seq, source.as_deref(), &fault)
            }
            None => panic!("split: {fault}"),
        }
        Dest::Omit
    }

    /// Where row `i` of `batch` goes: nowhere when an expression faults on it (the fault
    /// is reported). Round robin reads the row's sequence number from its key.
    #[inline]
    pub(crate) fn dest(&self, batch: &Batch, i: usize) -> Dest {
        let dest = self.dest_in(batch, i, &self.arena.borrow());
        self.arena.borrow_mut().reset();
        dest
    }

    /// [`Router::dest`], the strings made kept in `arena`.
    #[inline]
    fn dest_in(&self, batch: &Batch, i: usize, arena: &Arena) -> Dest {
        let row = batch.row(i);
        // Faults leave by the cold path, so that the common one returns a plain Dest.
        macro_rules! ok {
            ($e:expr) => {
                match $e {
                    Ok(v) => v,
                    Err(f) => return self.fault(batch.key(i).seq, f),
                }
            };
        }
        if let Some(b) = &self.broadcast {
            if ok!(b.holds(&row, arena)) {
                return Dest::Broadcast;
            }
        }
        let p = match &self.route {
            RouteImpl::Expr(e, when) => {
                if let Some(w) = when {
                    if !ok!(w.holds(&row, arena)) {
                        return Dest::Omit;
                    }
                }
                ok!(e.int(&row, arena)).map(|v| u64::from(self.modulo.of(v)))
            }
            RouteImpl::Native(f) => f(row).map(|v| v % self.q as u64),
            RouteImpl::RoundRobin => Some(batch.key(i).seq % self.q as u64),
            RouteImpl::Any { targets, next } => Some(u64::from(targets[next.get()])),
            RouteImpl::Grid(left, rows, cols) => {
                let seq = batch.key(i).seq;
                let side = if ok!(left.holds(&row, arena)) {
                    *rows
                } else {
                    *cols
                };
                return Dest::Class(side, seq % side);
            }
        };
        p.map_or(Dest::Omit, |p| Dest::Partition(p as u32))
    }

    /// Calls `f(i, dest)` for every row `i` of `batch` in order, with what
    /// [`Router::dest`] gives. The common shapes (route by a column, broadcast when a
    /// column compares with an integer) are matched once per batch, not per row.
    #[inline]
    pub(crate) fn each_dest(&self, batch: &Batch, mut f: impl FnMut(usize, Dest)) {
        let modulo = self.modulo;
        match &self.route {
            // The window's partition, then the next window's.
            RouteImpl::Any { targets, next } => {
                let p = targets[next.get()];
                self.each_broadcast_or(batch, &mut f, |_| Dest::Partition(p));
                next.set((next.get() + 1) % targets.len());
            }
            RouteImpl::RoundRobin => self.each_broadcast_or(batch, &mut f, |row| {
                let (b, i) = row.location();
                Dest::Partition(modulo.of_u64(b.key(i).seq))
            }),
            RouteImpl::Expr(Compiled::Column(c), None) => {
                let c = *c;
                self.each_broadcast_or(batch, &mut f, |row| match row.datum(c) {
                    Datum::Int(v) => Dest::Partition(modulo.of(v)),
                    _ => Dest::Omit,
                })
            }
            _ => {
                for i in 0..batch.len() {
                    f(i, self.dest(batch, i));
                }
            }
        }
    }

    /// [`Router::each_dest`] for a route given by `route`, with the broadcast test
    /// matched once per batch.
    #[inline]
    fn each_broadcast_or(
        &self,
        batch: &Batch,
        f: &mut impl FnMut(usize, Dest),
        route: impl Fn(&Row<'_>) -> Dest,
    ) {
        match &self.broadcast {
            None => {
                for i in 0..batch.len() {
                    f(i, route(&batch.row(i)));
                }
            }
            // One loop per comparison: the test per row is then one instruction.
            Some(Compiled::ColumnCmpInt(c, op, k, _)) => {
                let (c, k) = (*c, *k);
                let e = &|i: usize| self.dest(batch, i);
                match op {
                    BinOp::Eq => each_compared(batch, f, &route, c, e, |v| v == k),
                    BinOp::NotEq => each_compared(batch, f, &route, c, e, |v| v != k),
                    BinOp::Lt => each_compared(batch, f, &route, c, e, |v| v < k),
                    BinOp::LtEq => each_compared(batch, f, &route, c, e, |v| v <= k),
                    BinOp::Gt => each_compared(batch, f, &route, c, e, |v| v > k),
                    BinOp::GtEq => each_compared(batch, f, &route, c, e, |v| v >= k),
                    op => each_compared(batch, f, &route, c, e, |v| op.compare(v.cmp(&k))),
                }
            }
            Some(_) => {
                for i in 0..batch.len() {
                    f(i, self.dest(batch, i));
                }
            }
        }
    }

    /// Number of partitions.
    #[inline]
    pub(crate) fn q(&self) -> u32 {
        self.q
    }
}

/// [`Router::each_dest`] with the broadcast test `test` on an int in column `c` (a row
/// with another value there goes where `other(i)`, [`Router::dest`], says).
#[inline]
fn each_compared(
    batch: &Batch,
    f: &mut impl FnMut(usize, Dest),
    route: &impl Fn(&Row<'_>) -> Dest,
    c: usize,
    other: &dyn Fn(usize) -> Dest,
    test: impl Fn(i64) -> bool,
) {
    for i in 0..batch.len() {
        let row = batch.row(i);
        let d = match row.datum(c) {
            Datum::Int(v) if test(v) => Dest::Broadcast,
            Datum::Int(_) => route(&row),
            _ => other(i),
        };
        f(i, d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_plan::batch::{RowKey, Value};
    use braid_plan::plan::{Plan, SourceSpec};

    /// The compiled shapes give what the interpreter gives, for every datum type.
    #[test]
    fn compiled_routes_equal_the_interpreter() {
        let mut b = Batch::new(2);
        let rows = [
            [Value::Int(2), Value::Int(-7)],
            [Value::Int(3), Value::Null],
            [Value::Float(2.0), Value::Float(1.5)],
            [Value::Null, Value::Int(9)],
            [Value::Str("2"), Value::Bool(true)],
            [Value::Bool(true), Value::Int(i64::MIN)],
        ];
        for (i, r) in rows.iter().enumerate() {
            b.push(
                RowKey {
                    seq: i as u64,
                    lane: 0,
                },
                r,
            );
        }
        let col = |c: usize| Expr::Column(c, format!("c{c}"));
        let arena = Arena::new();
        for i in 0..b.len() {
            let row = b.row(i);
            for c in 0..2 {
                for op in BinOp::COMPARISONS {
                    for k in [-7, 2, 3] {
                        let e = col(c).bin(op, Expr::int(k));
                        let compiled = Compiled::new(&e);
                        assert!(matches!(compiled, Compiled::ColumnCmpInt(..)));
                        assert_eq!(
                            compiled.holds(&row, &arena).ok(),
                            e.eval(&row, &arena).ok().map(|v| v.is_true()),
                            "{e} row {i}"
                        );
                    }
                }
                let compiled = Compiled::new(&col(c));
                assert_eq!(
                    compiled.int(&row, &arena).ok(),
                    col(c).eval(&row, &arena).ok().map(|v| v.as_int())
                );
                assert_eq!(
                    compiled.holds(&row, &arena).ok(),
                    col(c).eval(&row, &arena).ok().map(|v| v.is_true())
                );
            }
        }
    }

    /// Routing a whole batch gives, row by row, what `dest` gives (and `dest` routes by
    /// `rem_euclid`), for every route and broadcast shape, powers of two and others.
    #[test]
    fn each_dest_equals_dest() {
        use braid_plan::plan::Strategy;
        use braid_plan::types::Schema;
        use std::sync::Arc;
        let mut b = Batch::new(2);
        let values = [
            Value::Int(2),
            Value::Int(-7),
            Value::Int(i64::MIN),
            Value::Int(i64::MAX),
            Value::Null,
            Value::Float(2.0),
            Value::Int(513),
        ];
        for (i, x) in values.iter().enumerate() {
            for (j, y) in values.iter().enumerate() {
                b.push(
                    RowKey {
                        seq: (i * values.len() + j) as u64,
                        lane: 0,
                    },
                    &[*x, *y],
                );
            }
        }
        let col = |c: usize| Expr::Column(c, format!("c{c}"));
        let routes = [
            Route::Expr {
                expr: col(0),
                when: None,
            },
            Route::Expr {
                expr: col(1),
                when: Some(col(0).bin(BinOp::Gt, Expr::int(0))),
            },
            Route::Expr {
                expr: col(0).bin(BinOp::Add, col(1)),
                when: None,
            },
            Route::RoundRobin,
        ];
        let broadcasts = [
            None,
            Some(col(1).bin(BinOp::Eq, Expr::int(2))),
            Some(col(0).bin(BinOp::Lt, col(1))),
        ];
        let schema = Schema::ints(&["c0", "c1"]);
        let registry = Registry::new();
        let shared = Arc::new(Shared::new(
            Default::default(),
            false,
            None,
            false,
            Default::default(),
            1,
        ));
        for q in [1, 3, 7, 8, 512, 1000] {
            for route in &routes {
                for broadcast in &broadcasts {
                    let Plan::Split(split) = Plan::source("s", SourceSpec::Stdin, schema.clone())
                        .split(q, route.clone(), broadcast.clone(), Strategy::Fsplit)
                    else {
                        panic!("split() makes a Split");
                    };
                    let router = Router::new(&split, &registry).expect("router").reporting(
                        &shared,
                        "split".into(),
                        None,
                    );
                    let mut got = Vec::new();
                    router.each_dest(&b, |i, d| got.push((i, d)));
                    let want: Vec<_> = (0..b.len()).map(|i| (i, router.dest(&b, i))).collect();
                    assert_eq!(got, want, "q = {q}, {route:?}, {broadcast:?}");
                    for (i, d) in want {
                        if let (Route::Expr { expr, when: None }, None, Dest::Partition(p)) =
                            (route, broadcast, d)
                        {
                            let v = expr
                                .eval(&b.row(i), &Arena::new())
                                .ok()
                                .and_then(|v| v.as_int())
                                .expect("an int routes");
                            assert_eq!(i64::from(p), v.rem_euclid(i64::from(q)));
                        }
                    }
                }
            }
        }
        // Routing by c0 + c1 overflows on (MAX, MAX), (MIN, MIN), (MAX, 2), (MAX, 513),
        // (MIN, -7) and their mirror images: those rows go nowhere and are reported
        // (by each_dest and dest, for every q and broadcast that does not take them).
        let faults = shared.faults.lock().expect("faults");
        assert_eq!(faults.len(), 1);
        assert!(faults[0].count > 0);
        assert!(
            faults[0].first[0]
                .what
                .contains("integer overflow in `(c0 + c1)`"),
            "{:?}",
            faults[0].first
        );
    }
}
