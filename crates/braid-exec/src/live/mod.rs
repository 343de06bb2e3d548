//! Braid as a running system: streams that live in Braid ([`log`]), queries installed
//! on long-running workers and dropped while others run ([`engine`]), producers
//! ([`ingest`]) and the session the server's front ends talk to ([`session`]).

pub mod engine;
pub mod feeds;
pub mod ingest;
pub mod io;
pub mod json;
pub mod latency;
pub mod log;
mod log_file;
pub mod session;
pub mod snapshot;
pub mod subscription;
mod taps;

pub use engine::{Engine, Status};
pub use session::{Client, LiveSession, Outcome, Recovered, Subscription};
