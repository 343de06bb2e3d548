//! Checkpoints of a partition's query state ([`StreamFunction::save`] and
//! [`StreamFunction::restore`]).
//!
//! Only what rows change is saved: the windows of each aggregate, the two sides of each
//! stream join, the rows a top-N holds. The rest (expressions, layouts, the tables of
//! lookups, the late-row outputs) `create` rebuilds from the plan, and the batches rows
//! go up the tree in are empty between epochs, when checkpoints are taken.
//!
//! The format, bincode 1 with fixed-width little-endian integers: a [`Header`] of
//! [`HEADER_LEN`] bytes, then the body: a list of [`Saved`] states, one per stateful
//! operator of the tree in pre-order (an operator, then its inputs in order), which
//! `create` rebuilds identically. Maps are ordered (`BTreeMap`) and lists keep their
//! order, so the restored operators emit in the order the saved ones would have.
//!
//! A restore checks the header (what the bytes are, the format's version, the plan
//! they were saved for, the number of operators, the body's length and checksum) and
//! then each operator's kind and shape: bytes that do not fit the query are an error
//! naming what did not match, never a different state.
//!
//! [`StreamFunction::save`]: braid_plan::function::StreamFunction::save
//! [`StreamFunction::restore`]: braid_plan::function::StreamFunction::restore

use super::aggregate::Windows;
use super::join::Side;
use super::{Node, Op};
use crate::logical::Logical;
use bincode::Options;
use braid_plan::batch::Scalar;
use braid_plan::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// "BQck": a Braid query checkpoint.
const MAGIC: u32 = u32::from_le_bytes(*b"BQck");

/// The format's version: changes when a saved state's layout does (2: the body ends
/// with the partition's [`Tally`]).
const VERSION: u32 = 2;

/// What a partition counted besides its state: the late rows it refused, and which
/// partition it was.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub(super) struct Tally {
    pub late: u64,
    pub partition: u32,
}

/// A checkpoint's body.
#[derive(Serialize, Deserialize)]
struct Body<'a> {
    ops: Vec<Saved<'a>>,
    tally: Tally,
}

/// What a checkpoint starts with.
#[derive(Serialize, Deserialize)]
struct Header {
    magic: u32,
    version: u32,
    /// The [`fingerprint`] of the query the state is of.
    plan: u64,
    /// The number of stateful operators, the body's entries.
    ops: u32,
    /// The body's length in bytes.
    len: u64,
    /// Its FNV-1a hash.
    sum: u64,
}

/// A [`Header`]'s length in bytes (every field fixed-width).
const HEADER_LEN: usize = 4 + 4 + 8 + 4 + 8 + 8;

/// The state of one stateful operator: borrowed to save, owned once restored. (One
/// lives at a time, while a checkpoint is written or read: its size does not matter.)
#[derive(Serialize, Deserialize)]
#[allow(clippy::large_enum_variant)]
enum Saved<'a> {
    Aggregate(Cow<'a, Windows>),
    Join(Cow<'a, [Side; 2]>),
    TopN(Cow<'a, [Vec<Scalar>]>),
}

impl Saved<'_> {
    fn kind(&self) -> &'static str {
        match self {
            Saved::Aggregate(_) => "an aggregate",
            Saved::Join(_) => "a stream join",
            Saved::TopN(_) => "a top-N",
        }
    }
}

/// The encoding of every part: fixed-width integers, as `bincode::serialize`; a body
/// with bytes after its last entry does not fit.
fn options() -> impl Options {
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .reject_trailing_bytes()
}

/// FNV-1a, 64 bits.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A hash of what a state is of: every node of the plan (its description and columns),
/// the epoch length and the lateness (which decide when windows close).
pub(super) fn fingerprint(root: &Logical, epoch: u64, lateness: i64) -> u64 {
    fn walk(l: &Logical, text: &mut String) {
        text.push_str(&format!("{}\n{}\n", l.describe(), l.schema()));
        for c in l.children() {
            walk(c, text);
        }
    }
    let mut text = format!("epoch {epoch} lateness {lateness}\n");
    walk(root, &mut text);
    fnv(text.as_bytes())
}

impl Node {
    /// The states of the stateful operators of the tree, in pre-order.
    fn saved<'a>(&'a self, out: &mut Vec<Saved<'a>>) {
        match &self.op {
            Op::Agg(a) => out.push(Saved::Aggregate(Cow::Borrowed(&a.windows))),
            Op::Join(j) => out.push(Saved::Join(Cow::Borrowed(&j.sides))),
            Op::TopN(t) => out.push(Saved::TopN(Cow::Borrowed(&t.rows[..]))),
            Op::Scan { .. } | Op::Filter(_) | Op::Project(_) | Op::Lookup(_) | Op::Union => {}
        }
        for k in &self.kids {
            k.saved(out);
        }
    }

    /// The stateful operators of the tree, in pre-order.
    fn stateful<'a>(&'a mut self, out: &mut Vec<&'a mut Op>) {
        if matches!(self.op, Op::Agg(_) | Op::Join(_) | Op::TopN(_)) {
            out.push(&mut self.op);
        }
        for k in &mut self.kids {
            k.stateful(out);
        }
    }
}

/// Appends the state of the tree under `root`, of the plan with fingerprint `plan`.
pub(super) fn save(root: &Node, plan: u64, tally: Tally, out: &mut Vec<u8>) -> Result<()> {
    let mut ops = Vec::new();
    root.saved(&mut ops);
    let n = ops.len();
    let start = out.len();
    out.resize(start + HEADER_LEN, 0);
    options()
        .serialize_into(&mut *out, &Body { ops, tally })
        .map_err(|e| Error::Internal(format!("saving a checkpoint: {e}")))?;
    let body = &out[start + HEADER_LEN..];
    let header = Header {
        magic: MAGIC,
        version: VERSION,
        plan,
        ops: n as u32,
        len: body.len() as u64,
        sum: fnv(body),
    };
    let head = options()
        .serialize(&header)
        .map_err(|e| Error::Internal(format!("saving a checkpoint: {e}")))?;
    debug_assert_eq!(head.len(), HEADER_LEN);
    out[start..start + HEADER_LEN].copy_from_slice(&head);
    Ok(())
}

/// A checkpoint that does not fit: `why`.
fn misfit(why: impl std::fmt::Display) -> Error {
    Error::Plan(format!(
        "the checkpoint does not fit this query's state: {why}"
    ))
}

/// Replaces the state of the tree under `root` (a fresh one of the plan with
/// fingerprint `plan`) by what [`save`] wrote in `bytes`; on an error the tree may hold
/// part of it, and is not to be used.
pub(super) fn restore(root: &mut Node, plan: u64, bytes: &[u8]) -> Result<Tally> {
    fill(root, plan, bytes, None)
}

/// Rescaling: adds to the tree under `root` the entries of another partition's state
/// (what [`save`] wrote in `bytes`) whose route value has `keep`. Every stateful
/// operator of a hash-partitioned stage is keyed by what the stage is hashed by, so an
/// entry's route value follows from its key: an aggregate's group keys, a join row's
/// equality keys. A top-N holds no rows between epochs.
pub(super) fn restore_share(
    root: &mut Node,
    plan: u64,
    bytes: &[u8],
    keep: &dyn Fn(i64) -> bool,
) -> Result<Tally> {
    fill(root, plan, bytes, Some(keep))
}

/// [`restore`] (`keep` None: the whole state) or [`restore_share`].
fn fill(
    root: &mut Node,
    plan: u64,
    bytes: &[u8],
    keep: Option<&dyn Fn(i64) -> bool>,
) -> Result<Tally> {
    let mut ops = Vec::new();
    root.stateful(&mut ops);
    let (saved, tally) = read(bytes, plan, ops.len())?;
    for (i, (op, state)) in ops.into_iter().zip(saved).enumerate() {
        let kind = state.kind();
        let fitted = match (op, state, keep) {
            (Op::Agg(a), Saved::Aggregate(w), None) => a.restore(w.into_owned()),
            (Op::Agg(a), Saved::Aggregate(w), Some(keep)) => a.absorb(w.into_owned(), keep),
            (Op::Join(j), Saved::Join(s), None) => j.restore(s.into_owned()),
            (Op::Join(j), Saved::Join(s), Some(keep)) => j.absorb(s.into_owned(), keep),
            (Op::TopN(t), Saved::TopN(rows), None) => {
                t.rows = rows.into_owned();
                Ok(())
            }
            (Op::TopN(_), Saved::TopN(rows), Some(_)) if rows.is_empty() => Ok(()),
            (Op::TopN(_), Saved::TopN(_), Some(_)) => Err("a top-N holding rows".into()),
            (op, _, _) => Err(format!("{kind}'s state for {}", op.kind())),
        };
        fitted.map_err(|why| misfit(format_args!("stateful operator {}: {why}", i + 1)))?;
    }
    Ok(tally)
}

/// The operators' states in `bytes` (a checkpoint of the plan with fingerprint `plan`
/// and `n` stateful operators), after checking the header.
fn read(bytes: &[u8], plan: u64, n: usize) -> Result<(Vec<Saved<'static>>, Tally)> {
    if bytes.len() < HEADER_LEN {
        return Err(misfit(format_args!(
            "{} bytes, shorter than its header ({HEADER_LEN})",
            bytes.len()
        )));
    }
    let (head, body) = bytes.split_at(HEADER_LEN);
    let header: Header = options().deserialize(head).map_err(misfit)?;
    if header.magic != MAGIC {
        return Err(misfit(
            "it is not a checkpoint of a SQL query (magic number)",
        ));
    }
    if header.version != VERSION {
        return Err(misfit(format_args!(
            "format version {}, not {VERSION}",
            header.version
        )));
    }
    if header.plan != plan {
        return Err(misfit(format_args!(
            "it is of another query (plan {:016x}, not {plan:016x})",
            header.plan
        )));
    }
    if header.ops as usize != n {
        return Err(misfit(format_args!(
            "{} stateful operators, not {n}",
            header.ops
        )));
    }
    if header.len != body.len() as u64 {
        return Err(misfit(format_args!(
            "a body of {} bytes, not the {} its header gives (truncated?)",
            body.len(),
            header.len
        )));
    }
    if header.sum != fnv(body) {
        return Err(misfit("the body's checksum differs (corrupt)"));
    }
    let body: Body<'static> = options().deserialize(body).map_err(misfit)?;
    if body.ops.len() != n {
        return Err(misfit(format_args!(
            "a body of {} states, not {n}",
            body.ops.len()
        )));
    }
    Ok((body.ops, body.tally))
}

impl Op {
    /// What the operator is, for errors.
    fn kind(&self) -> &'static str {
        match self {
            Op::Agg(_) => "an aggregate",
            Op::Join(_) => "a stream join",
            Op::TopN(_) => "a top-N",
            Op::Scan { .. } => "a scan",
            Op::Filter(_) => "a filter",
            Op::Project(_) => "a projection",
            Op::Lookup(_) => "a lookup",
            Op::Union => "a union",
        }
    }
}
