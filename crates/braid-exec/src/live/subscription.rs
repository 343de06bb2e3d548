//! A subscriber: a reader of a stream's log from an offset of its own.

use super::engine::Status;
use super::log::{Read, StreamLog, TapRead};
use braid_plan::batch::{Batch, Value};
use braid_plan::expr::{Arena, Expr};
use braid_plan::types::DataType;
use std::sync::Arc;
use std::task::{Context, Poll};

/// A subscriber's own filter (`SUBSCRIBE TO v WHERE ...`), applied as it reads, before
/// rows are sent to it: the postfilter of a stream process's subscriber.
pub struct Filter {
    /// The predicate over the stream's columns.
    pub expr: Expr,
    /// Its text, for errors.
    pub text: String,
    pub(super) arena: Arena,
}

impl Filter {
    /// A filter `expr` (written `text`).
    pub fn new(expr: Expr, text: &str) -> Filter {
        Filter {
            expr,
            text: text.to_string(),
            arena: Arena::new(),
        }
    }

    /// The rows of `b` the predicate holds for; the fault (with the row) that keeps it
    /// from being computed, if one does.
    fn apply(&mut self, b: &Batch) -> Result<Batch, String> {
        let mut out = Batch::with_capacity(b.arity(), b.len());
        for (i, row) in b.rows().enumerate() {
            self.arena.reset();
            match self.expr.eval(&row, &self.arena) {
                Ok(Value::Bool(true)) => out.push_row_of(b, i, b.key(i)),
                Ok(_) => {}
                Err(f) => {
                    return Err(format!(
                        "the subscription's filter `{}` on row {:?}: {}",
                        self.text,
                        row.to_scalars(),
                        f.message
                    ))
                }
            }
        }
        Ok(out)
    }
}

/// A reader of a stream's log from an offset; a private query (a bare SELECT) is
/// dropped with it.
pub struct Subscription {
    /// Column names and types.
    pub columns: Vec<(String, DataType)>,
    /// The stream read.
    pub log: Arc<StreamLog>,
    /// The next batch to read.
    pub offset: usize,
    /// Rows of the stream read or trimmed before it started: the next row's
    /// sequence number.
    pub read: u64,
    /// The rows it has yet to read, kept for it (a stream with a retention).
    pub hold: Option<super::log::Hold>,
    /// The query making the rows, when it is the subscriber's own.
    pub status: Option<Arc<Status>>,
    /// The subscriber's own filter, if any ([`Subscription::set_filter`]): applied here
    /// to the batches before `tap`'s offset, at the log to those after.
    pub(super) filter: Option<Filter>,
    /// The filter's tap on the log, and the first batch the tap sees.
    pub(super) tap: Option<(u64, usize)>,
    /// The fault that ended the subscription (its filter could not be computed).
    pub fault: Option<String>,
    pub(super) drop: Option<Box<dyn FnOnce() + Send>>,
}

impl Subscription {
    /// Gives the subscriber a filter: it runs at the log as rows are appended (see
    /// `taps`), and here on what the log held before.
    pub fn set_filter(&mut self, filter: Filter) {
        if let Some((id, _)) = self.tap.take() {
            self.log.untap(id);
        }
        self.tap = Some(self.log.tap(filter.expr.clone(), &filter.text));
        self.filter = Some(filter);
    }

    /// The tap's next batch when the subscriber has caught up with it (`None`: read
    /// the log).
    fn tapped(&mut self, waker: Option<&std::task::Waker>) -> Option<TapRead> {
        let (id, from) = self.tap?;
        if self.offset < from {
            return None;
        }
        // Its rows come from the tap now: it needs nothing more of the log.
        if let Some(h) = &self.hold {
            h.set(u64::MAX);
        }
        Some(self.log.take_tap(id, waker))
    }

    /// The next batch of rows, waking `cx` when one comes; `Ready(None)` once the
    /// stream has ended (dropped, or its query ended) and everything was read, or the
    /// subscriber's filter met a fault ([`Subscription::error`] says which).
    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Arc<Batch>>> {
        loop {
            if self.fault.is_some() {
                return Poll::Ready(None);
            }
            match self.tapped(Some(cx.waker())) {
                None => {}
                Some(TapRead::Batch(b)) => return Poll::Ready(Some(b)),
                Some(TapRead::Idle) => return Poll::Pending,
                Some(TapRead::Closed) => return Poll::Ready(None),
                Some(TapRead::Fault(f)) => {
                    self.fault = Some(f);
                    return Poll::Ready(None);
                }
            }
            let b = match self.log.poll_read(self.offset, cx) {
                Poll::Ready(Some(b)) => b,
                other => return other,
            };
            if let Some(b) = self.take(b) {
                return Poll::Ready(Some(b));
            }
        }
    }

    /// The next batch if there is one now; `Err(true)` once the stream has ended and
    /// everything was read (or the filter met a fault), `Err(false)` when nothing is
    /// there yet.
    pub fn try_next(&mut self) -> std::result::Result<Arc<Batch>, bool> {
        loop {
            if self.fault.is_some() {
                return Err(true);
            }
            match self.tapped(None) {
                None => {}
                Some(TapRead::Batch(b)) => return Ok(b),
                Some(TapRead::Idle) => return Err(false),
                Some(TapRead::Closed) => return Err(true),
                Some(TapRead::Fault(f)) => {
                    self.fault = Some(f);
                    return Err(true);
                }
            }
            match self.log.read(self.offset) {
                Read::Batch(b) => {
                    if let Some(b) = self.take(b) {
                        return Ok(b);
                    }
                }
                Read::Closed => return Err(true),
                Read::Idle(..) => {
                    // Caught up: what the readers have passed may go now.
                    self.log.trim_idle();
                    return Err(false);
                }
            }
        }
    }

    /// Moves past batch `b`; its rows for this subscriber (none: `None`).
    fn take(&mut self, b: Arc<Batch>) -> Option<Arc<Batch>> {
        self.offset += 1;
        self.read += b.len() as u64;
        if let Some(h) = &self.hold {
            h.set(self.read);
        }
        let Some(f) = self.filter.as_mut() else {
            return Some(b);
        };
        match f.apply(&b) {
            Ok(kept) if kept.is_empty() => None,
            Ok(kept) => Some(Arc::new(kept)),
            Err(e) => {
                self.fault = Some(e);
                None
            }
        }
    }

    /// Rows this subscriber has yet to read: of the stream while it catches up, of its
    /// own rows held at the log once it has.
    pub fn behind(&self) -> u64 {
        match self.tap {
            Some((id, from)) if self.offset >= from => self.log.tap_queued(id),
            _ => self.log.rows().saturating_sub(self.read),
        }
    }

    /// The error the query making the rows failed with, or the fault its filter met.
    pub fn error(&self) -> Option<String> {
        self.fault
            .clone()
            .or_else(|| self.status.as_ref().and_then(|s| s.error()))
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.log.subscriber(false);
        if let Some((id, _)) = self.tap.take() {
            self.log.untap(id);
        }
        if let Some(d) = self.drop.take() {
            d();
        }
    }
}
