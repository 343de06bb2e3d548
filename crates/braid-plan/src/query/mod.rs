//! The continuous query language (in progress).
