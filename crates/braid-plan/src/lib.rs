//! Braid plans.
#![warn(missing_docs)]
pub mod cost;
