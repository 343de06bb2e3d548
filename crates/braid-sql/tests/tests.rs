//! braid-sql's integration tests, one binary (link time dominates on 2 cores).

mod checkpoint;
mod expr_props;
mod feeds;
mod outer_joins;
mod planner;
mod positions;
mod refusals;
mod script_fuzz;
mod string_props;
mod time;
mod topn;
mod windowed;
