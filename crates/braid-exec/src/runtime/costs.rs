//! A cluster's partition costs, gathered on process 0 for its automatic rescaler.
//!
//! Each process measures only the partitions its own workers run. For the rescaler on
//! process 0 to see every worker's load, the first worker of every other process sends
//! its process's costs so far (summed over the run, as [`crate::profile::Profiler`]
//! keeps them) to worker 0 every period, through a small dataflow of its own beside
//! the query's. Worker 0 keeps the last from each process
//! ([`crate::shared::RemoteCosts`]); the rescaler adds them to its own. The dataflow ends with the query's (it watches its probe).

use super::Place;
use crate::shared::{Costs, Shared};
use std::sync::Arc;
use std::time::Duration;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::operator::{source, Operator};
use timely::dataflow::ProbeHandle;

/// What a process sends: its index and, per (stage, partition), the nanoseconds its
/// workers spent in the stream function so far.
type Message = (u64, Costs);

/// Builds the dataflow that sends this process's partition costs to worker 0 every
/// `period` (sent by the first worker of each process but process 0), until `query`
/// (the probe of the query's dataflow) is done. Every worker builds it, in the same
/// place among its dataflows.
pub(super) fn build(
    worker: &mut timely::worker::Worker,
    shared: &Arc<Shared>,
    place: Place,
    period: Duration,
    query: ProbeHandle<u64>,
) {
    let threads = place.threads.max(1);
    let sends = place.index >= threads && place.index.is_multiple_of(threads);
    let process = (place.index / threads) as u64;
    let (from, to) = (shared.clone(), shared.clone());
    worker.dataflow::<u64, _, _>(|scope| {
        let inner = scope;
        source::<_, CapacityContainerBuilder<Vec<Message>>, _, _>(
            scope,
            "Costs",
            move |cap, info| {
                let activator = inner.activator_for(info.address.clone());
                let mut cap = sends.then_some(cap);
                move |output| {
                    let Some(c) = &cap else { return };
                    if query.done() {
                        cap = None;
                        return;
                    }
                    let costs = from
                        .profiler
                        .partitions()
                        .into_iter()
                        .map(|c| (c.stage as u64, c.partition, c.nanos))
                        .collect();
                    output.session(c).give((process, costs));
                    activator.activate_after(period);
                }
            },
        )
        .sink(
            Exchange::new(|_: &Message| 0),
            "CostsIn",
            move |(input, _)| {
                input.for_each(|_, messages: &mut Vec<Message>| {
                    for (p, costs) in messages.drain(..) {
                        to.remote_costs.set(p, costs);
                    }
                })
            },
        );
    });
}
