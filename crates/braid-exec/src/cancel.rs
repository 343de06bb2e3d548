//! Cancelling a running query from another thread.
//!
//! A [`Cancel`] is a cheap, cloneable handle on one flag. A run started with it in
//! [`crate::runtime::RunConfig::cancel`] checks the flag wherever a source reads or
//! waits: once it is set, every source stops reading and reports the end of its input,
//! the rows already read drain through the dataflow, and every worker finishes as at
//! the end of input (no thread is killed). Sinks write nothing more once the flag is
//! set, so the output is a prefix of what the whole run would have written: rows made
//! by the early end of input (aggregates of windows left open) never reach them. The
//! run then returns its report with [`crate::runtime::RunReport::cancelled`] set.
//!
//! A [`crate::session::Session`] hands out its handle with
//! [`crate::session::Session::cancel_handle`]: a server thread (or the shell's Ctrl-C
//! handler) keeps a clone and calls [`Cancel::cancel`] while another thread runs a
//! query. Within one process the flag reaches every worker; with several processes each
//! process needs its own call.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A handle that cancels the run it was given to (see the module doc).
#[derive(Clone, Debug, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// A handle not cancelled.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Cancels the run: its sources stop and it ends promptly. Safe from any thread, and
    /// from a signal handler's thread.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether [`Cancel::cancel`] was called since the last [`Cancel::reset`].
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Clears the flag (a session does so before each query it runs).
    pub fn reset(&self) {
        self.0.store(false, Ordering::SeqCst);
    }
}
