//! A subscriber: a reader of a stream's log from an offset of its own.

use super::engine::Status;
use super::log::StreamLog;
use braid_plan::types::DataType;
use std::sync::Arc;

/// A reader of a stream's log from an offset; a private query (a bare SELECT) is
/// dropped with it.
pub struct Subscription {
    /// Column names and types.
    pub columns: Vec<(String, DataType)>,
    /// The stream read.
    pub log: Arc<StreamLog>,
    /// The next batch to read.
    pub offset: usize,
    /// Rows read so far.
    pub read: u64,
    /// The query making the rows, when it is the subscriber's own.
    pub status: Option<Arc<Status>>,
    pub(super) drop: Option<Box<dyn FnOnce() + Send>>,
}

impl Subscription {
    /// The next batch of rows, waking `cx` when one comes; `Ready(None)` once the
    /// stream has ended (dropped, or its query ended) and everything was read.
    pub fn poll_next(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Arc<braid_plan::batch::Batch>>> {
        let r = self.log.poll_read(self.offset, cx);
        if let std::task::Poll::Ready(Some(b)) = &r {
            self.offset += 1;
            self.read += b.len() as u64;
        }
        r
    }

    /// The next batch if there is one now; `Err(true)` once the stream has ended and
    /// everything was read, `Err(false)` when nothing is there yet.
    pub fn try_next(&mut self) -> std::result::Result<Arc<braid_plan::batch::Batch>, bool> {
        match self.log.read(self.offset) {
            super::log::Read::Batch(b) => {
                self.offset += 1;
                self.read += b.len() as u64;
                Ok(b)
            }
            super::log::Read::Closed => Err(true),
            super::log::Read::Idle(..) => Err(false),
        }
    }

    /// Rows in the stream this subscriber has not read yet.
    pub fn behind(&self) -> u64 {
        self.log.rows().saturating_sub(self.read)
    }

    /// The error the query making the rows failed with, if it did.
    pub fn error(&self) -> Option<String> {
        self.status.as_ref().and_then(|s| s.error())
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(d) = self.drop.take() {
            d();
        }
    }
}
