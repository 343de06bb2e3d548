//! Braid plans.
#![warn(missing_docs)]
