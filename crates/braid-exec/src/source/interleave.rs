//! The feed of an interleave: several sources read on worker 0 and merged into one
//! stream in the serial order of `braid_plan::interleave` (clamped epoch, clamped event
//! time when every child has one, child index, order within the child), in the wide
//! layout, with sequence numbers counting rows in that order.
//!
//! Files without an event time are numbered by file instead
//! ([`braid_plan::interleave::seq_by_file`]: a row's number depends on its file and its
//! index in it alone), and on several workers each worker reads the files
//! [`braid_plan::placement::file_worker`] gives it, whole, merging them in the same
//! order: the workers' streams together are the serial stream, each row under the number
//! serial reading gives it. A checkpoint keeps where worker 0's files are (only worker
//! 0 writes a resume point): resumed, on any number of workers, a file worker 0 read
//! then starts from its place there, any other from its start (the runtime drops the
//! windows a resumed run has already had, by epoch, and a file's epochs depend on its
//! rows alone).
//!
//! Each child keeps one pending window. A row is emitted only when every child that
//! has not ended has a pending window, so the child whose next row has the smallest
//! [`Key`] is known to go next, and goes on while its rows stay below every other
//! child's next; a child that has nothing yet makes the whole feed wait. A file's next
//! row is always at hand, so merged by time a row goes as soon as its turn comes, not
//! at the end of its epoch.

use super::{counts_rows_itself, open_at, Counters, Feed, Next, ReadOptions, Rejects};
use crate::error::{Error, Result};
use braid_plan::batch::{Batch, RowKey};
use braid_plan::function::Registry;
use braid_plan::interleave::{
    by_time, key_of, numbered_by_file, schema, seq_by_file, time_of, Key, Layout,
};
use braid_plan::plan::Source;
use std::sync::Arc;

/// One interleaved source and where its reading stands.
struct Child {
    /// The child, with the parent's epoch length.
    source: Source,
    /// None once the child has ended.
    feed: Option<Box<dyn Feed>>,
    /// The feed counts its rows in `rows_in` itself.
    counts_itself: bool,
    /// The pending window and the position of the next row in it.
    pending: Batch,
    next: usize,
    /// Rows of this child taken so far (the `_time` of an untimed child's next row).
    taken: u64,
    /// The key of the last row taken (its clamped epoch and time).
    last: Key,
    rejects: Rejects,
    /// Where the pending window starts ([`Feed::resume_point`]), if the feed says.
    pending_at: Option<Vec<u8>>,
    /// Rows of the first window to pass over (resuming inside it).
    skip: usize,
    /// Another worker reads this child (files read a file per worker).
    elsewhere: bool,
}

/// Where an interleave was before a window: each child's place (None once it ended),
/// and the sequence number of the window's first row.
#[derive(serde::Serialize, serde::Deserialize)]
struct Resume {
    seq: u64,
    /// Workers that read the files (1 when worker 0 reads them all).
    readers: usize,
    children: Vec<ChildAt>,
}

/// One child's place: the resume point of its pending window and the rows taken from
/// it, or its malformed records once it has ended.
#[derive(serde::Serialize, serde::Deserialize)]
struct ChildAt {
    at: Option<Vec<u8>>,
    next: usize,
    taken: u64,
    epoch: u64,
    time: u64,
    rejects: u64,
    first: Vec<super::Reject>,
}

impl Child {
    fn has_row(&self) -> bool {
        self.next < self.pending.len()
    }

    /// `_time` and key of the next pending row of child `index`.
    fn head(&self, index: usize, epoch_len: u64, by_time: bool) -> (i64, Key) {
        let time = time_of(&self.source, self.pending.row(self.next), self.taken);
        (time, key_of(index, time, self.last, epoch_len, by_time))
    }
}

/// Merges the feeds of an interleave's children.
pub(crate) struct InterleaveFeed {
    name: String,
    epoch_len: u64,
    /// Every child has an event time: rows merge by it within an epoch.
    by_time: bool,
    window: usize,
    layout: Layout,
    children: Vec<Child>,
    seq: u64,
    /// Rows are numbered by file ([`seq_by_file`]), not counted.
    by_file: bool,
    /// Workers reading the files, each its own (1: this feed reads them all).
    readers: usize,
    counters: Arc<Counters>,
    /// Where the window `next` returned last starts, when every child can say.
    last: Option<Vec<u8>>,
}

impl InterleaveFeed {
    /// Opens the children of `source` (an interleave of `children`) that worker
    /// `index` of `peers` reads (all of them unless they are files read a file per
    /// worker), at a [`Feed::resume_point`] of worker 0's feed of an interleave of the
    /// same children when given (read then by as many workers as now, or not).
    pub fn open(
        source: &Source,
        children: &[Source],
        (index, peers): (usize, usize),
        opts: &ReadOptions,
        counters: Arc<Counters>,
        registry: &Registry,
        resume: Option<&[u8]>,
    ) -> Result<InterleaveFeed> {
        let per_file = braid_plan::placement::files_per_worker(source) && peers > 1;
        let readers = if per_file { peers } else { 1 };
        let resume: Option<Resume> = match resume {
            Some(bytes) => Some(bincode::deserialize(bytes).map_err(|e| {
                Error::Internal(format!("the checkpoint's position in {}: {e}", source.name))
            })?),
            None => None,
        };
        if resume
            .as_ref()
            .is_some_and(|r| r.children.len() != children.len())
        {
            return Err(Error::Internal(format!(
                "the checkpoint's position in {} is for another number of sources",
                source.name
            )));
        }
        let wide = schema(children)?;
        if wide != source.schema {
            return Err(Error::Plan(braid_plan::error::Error::Plan(format!(
                "interleave source {} declares rows {}, but its sources make {wide}",
                source.name, source.schema
            ))));
        }
        let mut opened = Vec::with_capacity(children.len());
        for (k, child) in children.iter().enumerate() {
            let mut child = child.clone();
            child.epoch = source.epoch;
            let elsewhere = per_file && braid_plan::placement::file_worker(k, peers) != index;
            // The resume point's place of this child, if its writer (worker 0) read it.
            let at = resume
                .as_ref()
                .filter(|r| r.readers <= 1 || braid_plan::placement::file_worker(k, r.readers) == 0)
                .map(|r| &r.children[k]);
            let counts_itself = counts_rows_itself(&child.spec);
            let feed = match at {
                _ if elsewhere => None,
                // Ended before the resume point: its rows were all read then.
                Some(a) if a.at.is_none() => {
                    if counts_itself {
                        Counters::add(&counters.rows_in, a.taken);
                    }
                    None
                }
                _ => open_at(
                    &child,
                    0,
                    1,
                    opts,
                    counters.clone(),
                    registry,
                    at.and_then(|a| a.at.as_deref()),
                    None,
                )?,
            };
            opened.push(Child {
                counts_itself,
                feed,
                pending: Batch::new(child.schema.arity()),
                next: 0,
                taken: at.map_or(0, |a| a.taken),
                last: Key {
                    epoch: at.map_or(0, |a| a.epoch),
                    time: at.map_or(0, |a| a.time),
                    child: k,
                },
                rejects: Rejects {
                    source: child.name.clone(),
                    count: at.map_or(0, |a| a.rejects),
                    first: at.map_or(Vec::new(), |a| a.first.clone()),
                    ..Rejects::default()
                },
                pending_at: None,
                skip: at.map_or(0, |a| a.next),
                elsewhere,
                source: child,
            });
        }
        Ok(InterleaveFeed {
            name: source.name.clone(),
            epoch_len: source.epoch.max(1),
            by_time: by_time(children),
            window: source.window.max(1),
            layout: Layout::new(children),
            children: opened,
            seq: resume.as_ref().map_or(0, |r| r.seq),
            by_file: numbered_by_file(children, source.epoch),
            readers,
            counters,
            last: None,
        })
    }

    /// Where the feed is now, between rows: every child's place (None when a child
    /// that has not ended cannot say where its pending window starts).
    fn here(&self) -> Option<Vec<u8>> {
        let mut children = Vec::with_capacity(self.children.len());
        for c in &self.children {
            let at = match c.feed {
                None => None,
                Some(_) => Some(c.pending_at.clone()?),
            };
            children.push(ChildAt {
                at,
                next: c.next,
                taken: c.taken,
                epoch: c.last.epoch,
                time: c.last.time,
                rejects: c.rejects.count,
                first: c.rejects.first.clone(),
            });
        }
        bincode::serialize(&Resume {
            seq: self.seq,
            readers: self.readers,
            children,
        })
        .ok()
    }

    /// Gives every child that has not ended a pending row; false if one has to wait.
    fn fill(&mut self) -> Result<bool> {
        for child in &mut self.children {
            while !child.has_row() {
                let Some(feed) = child.feed.as_mut() else {
                    break;
                };
                match feed.next()? {
                    Next::Window(_, batch) => {
                        if !child.counts_itself {
                            Counters::add(&self.counters.rows_in, batch.len() as u64);
                        }
                        child.pending_at = feed.resume_point();
                        child.pending = batch;
                        // Resuming inside the first window: its first rows were taken.
                        child.next = std::mem::take(&mut child.skip);
                    }
                    Next::Wait => return Ok(false),
                    Next::Done => {
                        child.rejects = feed.rejects();
                        child.feed = None;
                        child.pending = Batch::new(0);
                        child.next = 0;
                    }
                }
            }
        }
        Ok(true)
    }
}

/// The window built so far, or `otherwise` if there is none.
fn emit(out: Option<(u64, Batch)>, otherwise: Next) -> Next {
    match out {
        Some((epoch, batch)) => Next::Window(epoch, batch),
        None => otherwise,
    }
}

impl InterleaveFeed {
    /// The next window (see [`Feed::next`]); `start` gets where it starts.
    fn build(&mut self, start: &mut Option<Vec<u8>>) -> Result<Next> {
        // The window being built and its epoch.
        let mut out: Option<(u64, Batch)> = None;
        loop {
            if !self.fill()? {
                return Ok(emit(out, Next::Wait));
            }
            let (epoch_len, timed) = (self.epoch_len, self.by_time);
            let heads = || {
                self.children
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.has_row())
                    .map(move |(i, c)| c.head(i, epoch_len, timed).1)
            };
            let Some(first) = heads().min() else {
                return Ok(emit(out, Next::Done));
            };
            let (i, epoch) = (first.child, first.epoch);
            // The child goes on while its rows come before every other child's next.
            let bound = heads().filter(|k| k.child != i).min();
            if out.as_ref().is_some_and(|&(e, _)| e != epoch) {
                return Ok(emit(out, Next::Wait));
            }
            if out.is_none() {
                *start = self.here();
            }
            let (_, batch) = out.get_or_insert_with(|| {
                (
                    epoch,
                    Batch::with_capacity(self.layout.arity(), self.window),
                )
            });
            let n = self.children.len();
            let child = &mut self.children[i];
            while child.has_row() && batch.len() < self.window {
                let (time, k) = child.head(i, epoch_len, timed);
                if k.epoch != epoch || bound.is_some_and(|b| k > b) {
                    break;
                }
                let seq = match self.by_file {
                    true => seq_by_file(n, epoch_len, i, child.taken).ok_or_else(|| {
                        Error::Internal(format!(
                            "row {} of {} in {}: its sequence number is past 2^63",
                            child.taken + 1,
                            child.source.name,
                            self.name
                        ))
                    })?,
                    false => self.seq,
                };
                let key = RowKey { seq, lane: 0 };
                self.layout
                    .push(batch, key, i, time, child.pending.row(child.next));
                self.seq += 1;
                child.next += 1;
                child.taken += 1;
                child.last = k;
            }
            if batch.len() >= self.window {
                return Ok(emit(out, Next::Wait));
            }
        }
    }
}

impl Feed for InterleaveFeed {
    fn resume_point(&self) -> Option<Vec<u8>> {
        self.last.clone()
    }

    fn next(&mut self) -> Result<Next> {
        // Where the window starts, noted when its first row is taken.
        let mut start: Option<Vec<u8>> = None;
        let next = self.build(&mut start)?;
        if matches!(next, Next::Window(..)) {
            self.last = start;
        }
        Ok(next)
    }

    fn rejects(&mut self) -> Rejects {
        let mut all = Rejects {
            source: self.name.clone(),
            ..Rejects::default()
        };
        for child in self.children.iter_mut().filter(|c| !c.elsewhere) {
            let mut r = match child.feed.as_mut() {
                Some(feed) => feed.rejects(),
                None => child.rejects.clone(),
            };
            for x in &mut r.first {
                x.reason = format!("{}: {}", child.source.name, x.reason);
            }
            all.absorb(r);
        }
        all
    }
}
