//! Subscribers' filters run where rows are appended: the source side of a stream.
//!
//! A subscriber with a filter (`SUBSCRIBE TO s WHERE ...`) registers a tap on the
//! stream's log. Each appended batch is evaluated once against every tap, under the
//! log's lock (so taps see batches in log order), and each tap queues only its rows:
//! a subscriber wakes only for rows it wants, and no subscriber scans the whole log.
//!
//! Filters whose first conjunct is `E = constant` (an integer or a string) over the
//! same expression `E` form a group: `E` is evaluated once per row, and a hash lookup
//! of its value finds the taps that want the row, so 100 subscribers of
//! `k % 100 = i` cost one evaluation per row, not 100. The rest of such a filter is
//! evaluated only for the rows whose first conjunct holds, as the filter's own
//! left-to-right evaluation would (`AND` stops at a false left side); where `E` is
//! NULL, or of another kind than the constant, the whole filter is evaluated, so
//! faults and NULLs come out as they would without the index.

use braid_plan::batch::{Batch, Row, Scalar, Value};
use braid_plan::expr::{Arena, BinOp, Expr};
use braid_plan::types::{DataType, Schema};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::task::Waker;

/// The taps of one stream.
#[derive(Default)]
pub(crate) struct Taps {
    next: u64,
    taps: BTreeMap<u64, Tap>,
    groups: Vec<Group>,
    /// Scratch for the groups' expressions, and for the taps' filters.
    keys: Arena,
    arena: Arena,
}

/// One subscriber's filter and the rows it has not taken yet.
pub(crate) struct Tap {
    expr: Expr,
    text: String,
    /// It is in a group (its filter starts with an indexed equality).
    grouped: bool,
    /// The filter is exactly its group's equality (nothing more to evaluate).
    exact: bool,
    /// Batches of its rows, in log order, and how many rows they hold.
    pub queue: VecDeque<Arc<Batch>>,
    pub queued: u64,
    pub waker: Option<Waker>,
    /// The fault its filter met (it gets nothing more).
    pub fault: Option<String>,
    /// Rows of the batch being dispatched that it takes (scratch).
    picked: Vec<usize>,
}

/// Taps whose filters start with `expr = constant`.
struct Group {
    expr: Expr,
    ints: HashMap<i64, Vec<u64>>,
    strs: HashMap<String, Vec<u64>>,
    members: Vec<u64>,
}

impl Taps {
    /// Registers a filter `expr` (written `text`) over rows of `schema`; its id.
    pub fn add(&mut self, expr: Expr, text: &str, schema: &Schema) -> u64 {
        let id = self.next;
        self.next += 1;
        let (mut grouped, mut exact) = (false, false);
        if let Some((e, key)) = indexable(&expr, schema) {
            grouped = true;
            exact = first_conjunct(&expr) == &expr;
            let g = match self.groups.iter().position(|g| g.expr == *e) {
                Some(g) => g,
                None => {
                    self.groups.push(Group {
                        expr: e.clone(),
                        ints: HashMap::new(),
                        strs: HashMap::new(),
                        members: Vec::new(),
                    });
                    self.groups.len() - 1
                }
            };
            let g = &mut self.groups[g];
            match key {
                Scalar::Int(i) => g.ints.entry(i).or_default().push(id),
                Scalar::Str(s) => g.strs.entry(s).or_default().push(id),
                _ => unreachable!("indexable keys are integers and strings"),
            }
            g.members.push(id);
        }
        self.taps.insert(
            id,
            Tap {
                expr,
                text: text.to_string(),
                grouped,
                exact,
                queue: VecDeque::new(),
                queued: 0,
                waker: None,
                fault: None,
                picked: Vec::new(),
            },
        );
        id
    }

    /// Takes tap `id` away.
    pub fn remove(&mut self, id: u64) {
        self.taps.remove(&id);
        for g in &mut self.groups {
            g.members.retain(|&m| m != id);
            g.ints.retain(|_, v| {
                v.retain(|&m| m != id);
                !v.is_empty()
            });
            g.strs.retain(|_, v| {
                v.retain(|&m| m != id);
                !v.is_empty()
            });
        }
        self.groups.retain(|g| !g.members.is_empty());
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.taps.len()
    }

    /// Tap `id`, if it is there.
    pub fn get_mut(&mut self, id: u64) -> Option<&mut Tap> {
        self.taps.get_mut(&id)
    }

    /// Every tap's waker, taken (the stream closed).
    pub fn wake_all(&mut self) {
        for t in self.taps.values_mut() {
            if let Some(w) = t.waker.take() {
                w.wake();
            }
        }
    }

    /// Hands each tap the rows of `batch` its filter keeps, waking those that got any.
    pub fn dispatch(&mut self, batch: &Arc<Batch>) {
        if self.taps.is_empty() {
            return;
        }
        let Taps {
            taps,
            groups,
            keys,
            arena,
            ..
        } = self;
        for (i, row) in batch.rows().enumerate() {
            for g in groups.iter() {
                keys.reset();
                let (ids, matched): (&[u64], bool) = match g.expr.eval(&row, keys) {
                    Ok(Value::Int(v)) if !g.ints.is_empty() => {
                        (g.ints.get(&v).map_or(&[], Vec::as_slice), true)
                    }
                    Ok(Value::Str(s)) if !g.strs.is_empty() => {
                        (g.strs.get(s).map_or(&[], Vec::as_slice), true)
                    }
                    // NULL, another kind, or a fault: each member evaluates its whole
                    // filter on this row (what it would do without the index).
                    _ => (&g.members, false),
                };
                for id in ids {
                    if let Some(t) = taps.get_mut(id) {
                        t.offer(&row, i, arena, matched);
                    }
                }
            }
            for t in taps.values_mut() {
                if !t.grouped {
                    t.offer(&row, i, arena, false);
                }
            }
        }
        for t in taps.values_mut() {
            if t.fault.is_some() || t.picked.is_empty() {
                t.picked.clear();
                continue;
            }
            let mut out = Batch::with_capacity(batch.arity(), t.picked.len());
            for &i in &t.picked {
                out.push_row_of(batch, i, batch.key(i));
            }
            t.picked.clear();
            t.queued += out.len() as u64;
            t.queue.push_back(Arc::new(out));
            if let Some(w) = t.waker.take() {
                w.wake();
            }
        }
    }
}

impl Tap {
    /// Row `i`: taken when the filter holds (`matched`: its indexed equality is known
    /// to hold, so an exact filter holds); a fault ends the tap.
    fn offer(&mut self, row: &Row<'_>, i: usize, arena: &mut Arena, matched: bool) {
        if self.fault.is_some() {
            return;
        }
        if matched && self.exact {
            self.picked.push(i);
            return;
        }
        arena.reset();
        match self.expr.eval(row, arena) {
            Ok(Value::Bool(true)) => self.picked.push(i),
            Ok(_) => {}
            Err(f) => {
                self.fault = Some(format!(
                    "the subscription's filter `{}` on row {:?}: {}",
                    self.text,
                    row.to_scalars(),
                    f.message
                ));
                self.queue.clear();
                self.queued = 0;
                self.picked.clear();
                if let Some(w) = self.waker.take() {
                    w.wake();
                }
            }
        }
    }
}

/// The leftmost conjunct of `e` (`e` itself when it is no `AND`).
fn first_conjunct(e: &Expr) -> &Expr {
    match e {
        Expr::Binary(BinOp::And, l, _) => first_conjunct(l),
        _ => e,
    }
}

/// `E` and the constant when `e`'s first conjunct is `E = constant` (either way
/// round), with `E` an integer and the constant an integer, or both strings.
fn indexable<'e>(e: &'e Expr, schema: &Schema) -> Option<(&'e Expr, Scalar)> {
    let Expr::Binary(BinOp::Eq, l, r) = first_conjunct(e) else {
        return None;
    };
    let (side, key) = match (&**l, &**r) {
        (Expr::Literal(k), side) | (side, Expr::Literal(k)) => (side, k),
        _ => return None,
    };
    if matches!(side, Expr::Literal(_)) {
        return None;
    }
    match (side.data_type(schema).ok()?, key) {
        (DataType::Int64, Scalar::Int(_)) | (DataType::String, Scalar::Str(_)) => {
            Some((side, key.clone()))
        }
        _ => None,
    }
}
