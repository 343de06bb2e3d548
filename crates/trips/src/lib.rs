//! Trip grouping on Braid (thesis Paper III, Gidófalvi et al., EDBT 2008): online ride
//! sharing over a stream of trip requests, parallelized by splitting the requests by
//! space.
//!
//! - [`request`]: the request stream's rows;
//! - [`generate`]: a day of requests in a metropolitan area, deterministic per seed;
//! - [`tg`]: the trip grouping algorithm and its stream function `tg`;
//! - [`partition`]: the spatial partitioners SPQ, SKD, APQ and AKD as routers;
//! - [`app`]: registration and the plan (split, TG per partition, time-ordered merge).
#![warn(missing_docs)]

pub mod app;
pub mod generate;
pub mod partition;
pub mod request;
pub mod tg;
