//! Braid execution.
#![warn(missing_docs)]
