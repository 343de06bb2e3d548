//! The trip grouping algorithm (TG, Paper III section 3.3) and its stream function.
//!
//! Every grouping cycle (a minute), the requests that arrived join the queue of
//! waiting ones. The expiring requests (whose deadline comes before the next cycle)
//! must be served now; each may take up to `k - 1` waiting requests along:
//!
//! - the fractional extra cost of a request j for an expiring r is
//!   `FEC(r, j) = (d(r.o, j.o) + d(r.d, j.d)) / d(r.o, r.d)`;
//! - r's best share is r and its i requests of lowest FEC (ties by id) for the i of
//!   lowest amortized cost `AC = (1 + sum of their FECs) / (i + 1)`, `1 - AC` being its
//!   savings;
//! - greedily, the best share over all expiring requests is taken (the highest
//!   savings, ties by the lower leader id) while its savings reach `min_savings`; its
//!   members leave the queue, and the expiring requests whose best share held one of
//!   them look again;
//! - the expiring requests left go alone.
//!
//! The cost of a share is what its AC estimates, `d(r.o, r.d) * (1 + sum of FECs)`
//! (r's trip with detours to pick up and drop off the others: an upper bound of the
//! best route), against the sum of its members' trips alone. Results depend on the set
//! of requests a cycle sees, never on the order rows arrived in: the queue is kept by
//! id and every tie is broken by id.

use crate::request::{dist, Request};
use braid_plan::batch::{Row, Value};
use braid_plan::error::{Error, Result};
use braid_plan::expr::Fault;
use braid_plan::function::{Emitter, StreamFunction, StreamFunctionFactory};
use braid_plan::types::{DataType, Field, Schema};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// TG's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TgConfig {
    /// The largest share (Paper III: 4).
    pub k: usize,
    /// The least savings of a share of two or more (Paper III: 0.2).
    pub min_savings: f64,
    /// The grouping cycle, seconds (Paper III: 60); the stream's epoch must be this
    /// long, so that a cycle runs at the end of each epoch.
    pub cycle: i64,
}

impl Default for TgConfig {
    fn default() -> TgConfig {
        TgConfig {
            k: 4,
            min_savings: 0.2,
            cycle: 60,
        }
    }
}

/// One vehicle share: a leader (the expiring request it was made for) and its members.
#[derive(Clone, Debug, PartialEq)]
pub struct Share {
    /// When it was made: the cycle's time.
    pub at: i64,
    /// The leader's id.
    pub leader: i64,
    /// Member ids, the leader first, then by FEC.
    pub members: Vec<i64>,
    /// The estimated cost of the shared trip, meters.
    pub cost: f64,
    /// The members' trips alone, meters.
    pub alone: f64,
}

/// Work counters (the load of a partition).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Work {
    /// Requests taken in.
    pub requests: u64,
    /// Fractional extra costs computed: the algorithm's work.
    pub fec: u64,
    /// Shares made (singles included).
    pub shares: u64,
}

/// The waiting requests of one TG instance and what it has done.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Queue {
    /// Waiting requests, by id.
    waiting: Vec<Request>,
    /// Requests that arrived and are not yet in a cycle, in arrival order.
    arrived: Vec<Request>,
    /// The next cycle's time, once a request came.
    next: Option<i64>,
    /// Whether a cycle has run (before that, the first cycle is the one after the
    /// earliest request, whatever order they came in).
    ran: bool,
    /// Work so far.
    pub work: Work,
}

#[derive(Clone, Copy)]
struct Best {
    /// Amortized cost.
    ac: f64,
    /// How many others (indices into `picked`).
    n: usize,
    /// The others, by FEC then id: indices into the waiting list.
    picked: [usize; MAX_K],
    /// Their FECs.
    fec: [f64; MAX_K],
}

/// The largest `k` the stream function takes.
pub const MAX_K: usize = 16;

impl Queue {
    /// An empty queue.
    pub fn new() -> Queue {
        Queue::default()
    }

    /// Takes a request in; it joins the first cycle after its time.
    pub fn push(&mut self, r: Request, cycle: i64) {
        let first = (r.t.div_euclid(cycle) + 1) * cycle;
        if !self.ran {
            self.next = Some(self.next.map_or(first, |n| n.min(first)));
        }
        self.work.requests += 1;
        self.arrived.push(r);
    }

    /// Runs every cycle up to and including time `until`, appending the shares made.
    pub fn run_until(&mut self, until: i64, cfg: &TgConfig, out: &mut Vec<Share>) {
        while let Some(ct) = self.next.filter(|&ct| ct <= until) {
            self.cycle(ct, cfg, out);
            self.next = Some(ct + cfg.cycle);
        }
    }

    /// Runs cycles until every request is served (the input has ended).
    pub fn drain(&mut self, cfg: &TgConfig, out: &mut Vec<Share>) {
        while !(self.waiting.is_empty() && self.arrived.is_empty()) {
            let Some(ct) = self.next else { break };
            self.cycle(ct, cfg, out);
            self.next = Some(ct + cfg.cycle);
        }
    }

    /// Requests waiting or arrived.
    pub fn len(&self) -> usize {
        self.waiting.len() + self.arrived.len()
    }

    /// Whether none wait.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One grouping cycle at time `ct`.
    fn cycle(&mut self, ct: i64, cfg: &TgConfig, out: &mut Vec<Share>) {
        self.ran = true;
        // The requests made before `ct` join the queue.
        let (now, later): (Vec<Request>, Vec<Request>) =
            self.arrived.drain(..).partition(|r| r.t < ct);
        self.arrived = later;
        if !now.is_empty() {
            self.waiting.extend(now);
            self.waiting.sort_unstable_by_key(|r| r.id);
        }
        let q = &self.waiting;
        let expiring: Vec<usize> = (0..q.len())
            .filter(|&i| q[i].deadline < ct + cfg.cycle)
            .collect();
        if expiring.is_empty() {
            return;
        }
        let k = cfg.k.clamp(1, MAX_K + 1);
        let mut alive = vec![true; q.len()];
        let mut best: Vec<Option<Best>> = expiring
            .iter()
            .map(|&r| best_share(q, &alive, r, k, &mut self.work.fec))
            .collect();
        let mut open = vec![true; expiring.len()];
        loop {
            // The best share of all: the lowest AC, ties by the leader's id (expiring
            // is by id, so the first of equals).
            let mut top: Option<(usize, f64)> = None;
            for (e, b) in best.iter().enumerate() {
                if let (true, Some(b)) = (open[e], b) {
                    if top.is_none_or(|(_, ac)| b.ac < ac) {
                        top = Some((e, b.ac));
                    }
                }
            }
            let Some((e, ac)) = top else { break };
            if 1.0 - ac < cfg.min_savings {
                break;
            }
            let b = best[e].expect("chosen");
            let leader = expiring[e];
            out.push(share(q, ct, leader, &b));
            self.work.shares += 1;
            alive[leader] = false;
            for &j in &b.picked[..b.n] {
                alive[j] = false;
            }
            open[e] = false;
            for (x, &r) in expiring.iter().enumerate() {
                if open[x] && !alive[r] {
                    open[x] = false; // taken along by another's share
                }
            }
            // Those whose best share held a member taken look again.
            for x in 0..expiring.len() {
                if !open[x] {
                    continue;
                }
                let stale = best[x].is_some_and(|b| b.picked[..b.n].iter().any(|&j| !alive[j]));
                if stale {
                    best[x] = best_share(q, &alive, expiring[x], k, &mut self.work.fec);
                }
            }
        }
        // The expiring requests left go alone.
        for (x, &r) in expiring.iter().enumerate() {
            if open[x] {
                alive[r] = false;
                let len = q[r].length();
                out.push(Share {
                    at: ct,
                    leader: q[r].id,
                    members: vec![q[r].id],
                    cost: len,
                    alone: len,
                });
                self.work.shares += 1;
            }
        }
        let mut i = 0;
        self.waiting.retain(|_| {
            i += 1;
            alive[i - 1]
        });
    }
}

/// The share made for leader `r`.
fn share(q: &[Request], ct: i64, r: usize, b: &Best) -> Share {
    let leader = &q[r];
    let len = leader.length();
    let mut members = vec![leader.id];
    let mut alone = len;
    let mut fec = 0.0;
    for (&j, &f) in b.picked[..b.n].iter().zip(&b.fec[..b.n]) {
        members.push(q[j].id);
        alone += q[j].length();
        fec += f;
    }
    Share {
        at: ct,
        leader: leader.id,
        members,
        cost: len * (1.0 + fec),
        alone,
    }
}

/// Expiring request `r`'s best share among the living requests, if it can share.
fn best_share(q: &[Request], alive: &[bool], r: usize, k: usize, work: &mut u64) -> Option<Best> {
    let me = &q[r];
    let len = me.length();
    let m = k - 1;
    if m == 0 || len <= 0.0 {
        return None;
    }
    // The m lowest (FEC, index) pairs, kept sorted (index order is id order).
    let mut top = [(f64::INFINITY, usize::MAX); MAX_K];
    let mut n = 0;
    for (j, o) in q.iter().enumerate() {
        if j == r || !alive[j] {
            continue;
        }
        *work += 1;
        let f = (dist(me.ox, me.oy, o.ox, o.oy) + dist(me.dx, me.dy, o.dx, o.dy)) / len;
        if n == m && f >= top[m - 1].0 {
            continue;
        }
        // Insert keeping (fec, index) order; a later index never passes an equal FEC.
        let mut p = n.min(m - 1);
        if n < m {
            n += 1;
        }
        while p > 0 && top[p - 1].0 > f {
            top[p] = top[p - 1];
            p -= 1;
        }
        top[p] = (f, j);
    }
    if n == 0 {
        return None;
    }
    let mut best = (f64::INFINITY, 0);
    let mut sum = 1.0;
    for (i, &(f, _)) in top[..n].iter().enumerate() {
        sum += f;
        let ac = sum / (i + 2) as f64;
        if ac < best.0 {
            best = (ac, i + 1);
        }
    }
    let mut b = Best {
        ac: best.0,
        n: best.1,
        picked: [0; MAX_K],
        fec: [0.0; MAX_K],
    };
    for (i, &(f, j)) in top[..b.n].iter().enumerate() {
        b.picked[i] = j;
        b.fec[i] = f;
    }
    Some(b)
}

/// The columns TG emits: one row per member of each share.
pub fn output_schema() -> Schema {
    let mut fields: Vec<Field> = ["t", "leader", "id", "size"]
        .iter()
        .map(|n| Field::new(n, DataType::Int64))
        .collect();
    fields.push(Field::new("cost", DataType::Float64));
    fields.push(Field::new("alone", DataType::Float64));
    Schema::new(fields)
}

/// Each partition's work, summed when instances finish (a run in one process).
#[derive(Debug, Default)]
pub struct Loads {
    /// Work by partition.
    pub by_partition: Mutex<BTreeMap<u32, Work>>,
}

impl Loads {
    /// The work of each partition that had requests.
    pub fn snapshot(&self) -> BTreeMap<u32, Work> {
        self.by_partition
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default()
    }
}

/// The stream function `tg`: TG over a partition's requests (the first seven columns
/// of [`crate::request::schema`]; more may follow). At the end of each epoch it runs the
/// cycles up to the epoch's end, at the end of the input until no request waits. It
/// emits one row per member of each share: `(t, leader, id, size, cost, alone)`, cost
/// being the member's part of the share's cost (its cost / size).
pub struct Tg {
    /// The parameters.
    pub cfg: TgConfig,
    /// Where instances add their work at the end.
    pub loads: Arc<Loads>,
}

impl StreamFunctionFactory for Tg {
    fn output_schema(&self, input: &Schema) -> Result<Schema> {
        let want = crate::request::COLUMNS;
        let ok = input.fields.len() >= want.len()
            && input
                .fields
                .iter()
                .zip(want)
                .all(|(f, n)| f.ty == DataType::Int64 && f.name.eq_ignore_ascii_case(n));
        if !ok {
            return Err(Error::Plan(format!(
                "tg reads trip requests: its input's first columns must be the BIGINTs {}",
                want.join(", ")
            )));
        }
        if !(1..=MAX_K + 1).contains(&self.cfg.k) || self.cfg.cycle <= 0 {
            return Err(Error::Plan(format!(
                "tg: k = {} must be 1..={}, the cycle {} positive",
                self.cfg.k,
                MAX_K + 1,
                self.cfg.cycle
            )));
        }
        Ok(output_schema())
    }

    fn create(&self, partition: u32, _: u32) -> Box<dyn StreamFunction> {
        Box::new(TgState {
            cfg: self.cfg,
            queue: Queue::new(),
            out: Vec::new(),
            partition,
            loads: self.loads.clone(),
        })
    }

    fn every_epoch(&self) -> bool {
        true
    }

    fn checkpoints(&self) -> bool {
        true
    }
}

struct TgState {
    cfg: TgConfig,
    queue: Queue,
    out: Vec<Share>,
    partition: u32,
    loads: Arc<Loads>,
}

impl TgState {
    fn emit(&mut self, out: &mut Emitter<'_>) {
        for s in self.out.drain(..) {
            let size = s.members.len() as i64;
            let part = s.cost / size as f64;
            for &id in &s.members {
                out.emit(&[
                    Value::Int(s.at),
                    Value::Int(s.leader),
                    Value::Int(id),
                    Value::Int(size),
                    Value::Float(part),
                    Value::Float(s.alone / size as f64),
                ]);
            }
        }
    }
}

impl StreamFunction for TgState {
    fn process(&mut self, row: Row<'_>, out: &mut Emitter<'_>) {
        match Request::from_row(&row) {
            Ok(r) => self.queue.push(r, self.cfg.cycle),
            Err(why) => out.fault("tg", Fault::new(why)),
        }
    }

    fn end_of_epoch(&mut self, epoch: u64, out: &mut Emitter<'_>) {
        let end = (epoch as i64)
            .saturating_add(1)
            .saturating_mul(self.cfg.cycle);
        self.queue.run_until(end, &self.cfg, &mut self.out);
        self.emit(out);
    }

    fn finish(&mut self, out: &mut Emitter<'_>) {
        self.queue.drain(&self.cfg, &mut self.out);
        self.emit(out);
        if let Ok(mut m) = self.loads.by_partition.lock() {
            let w = m.entry(self.partition).or_default();
            w.requests += self.queue.work.requests;
            w.fec += self.queue.work.fec;
            w.shares += self.queue.work.shares;
        }
    }

    fn save(&self, out: &mut Vec<u8>) -> Result<()> {
        bincode::serialize_into(out, &self.queue)
            .map_err(|e| Error::Plan(format!("saving tg's queue: {e}")))
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        self.queue = bincode::deserialize(bytes)
            .map_err(|e| Error::Plan(format!("the saved state of tg is not its queue: {e}")))?;
        Ok(())
    }
}

/// The savings of a set of TG output rows: 1 - shared cost / cost alone.
pub fn savings(rows: &[(f64, f64)]) -> f64 {
    let (cost, alone) = rows
        .iter()
        .fold((0.0, 0.0), |(c, a), &(x, y)| (c + x, a + y));
    if alone > 0.0 {
        1.0 - cost / alone
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(id: i64, t: i64, o: (i64, i64), d: (i64, i64)) -> Request {
        Request {
            id,
            t,
            ox: o.0,
            oy: o.1,
            dx: d.0,
            dy: d.1,
            deadline: t + 600,
        }
    }

    fn run(reqs: &[Request], cfg: &TgConfig) -> Vec<Share> {
        let mut q = Queue::new();
        for r in reqs {
            q.push(*r, cfg.cycle);
        }
        let mut out = Vec::new();
        q.drain(cfg, &mut out);
        assert!(q.is_empty());
        out
    }

    #[test]
    fn two_neighbours_share_and_a_stranger_rides_alone() {
        // Two trips 10 km east, starting and ending 100 m apart; one trip far away.
        let reqs = [
            req(0, 0, (0, 0), (10_000, 0)),
            req(1, 5, (0, 100), (10_000, 100)),
            req(2, 7, (30_000, 30_000), (30_000, 20_000)),
        ];
        let out = run(&reqs, &TgConfig::default());
        assert_eq!(out.len(), 2, "{out:?}");
        let pair = &out[0];
        assert_eq!(pair.members, vec![0, 1]);
        // FEC = 200 / 10,000 = 0.02: cost 10,000 * 1.02, alone 20,000.
        assert!((pair.cost - 10_200.0).abs() < 1e-9);
        assert!((pair.alone - 20_000.0).abs() < 1e-9);
        assert_eq!(out[1].members, vec![2]);
        // Both expire at the cycle after 600 s: the first cycle at or after 600 - 60.
        assert_eq!(pair.at, 600);
    }

    #[test]
    fn a_share_below_the_least_savings_is_not_made() {
        // FEC = (2,900 + 2,900) / 10,000 = 0.58 gives AC 0.79, savings 0.21: made at
        // a threshold of 0.2, not at 0.22.
        let reqs = [
            req(0, 0, (0, 0), (10_000, 0)),
            req(1, 0, (0, 2_900), (10_000, 2_900)),
        ];
        let at = |min: f64| {
            run(
                &reqs,
                &TgConfig {
                    min_savings: min,
                    ..TgConfig::default()
                },
            )
            .len()
        };
        assert_eq!(at(0.2), 1);
        assert_eq!(at(0.22), 2);
    }

    #[test]
    fn shares_hold_at_most_k_and_take_the_lowest_amortized_cost() {
        // Five trips along one road, 10 m apart at both ends, all expiring together:
        // with k = 4, request 1 has the nearest three (0 and 2 at 10 m, 3 at 20 m:
        // the lowest AC of all), 0 before 2 on equal FEC; 4 then rides alone.
        let reqs: Vec<Request> = (0..5)
            .map(|i| req(i, 0, (0, 10 * i), (20_000, 10 * i)))
            .collect();
        let out = run(&reqs, &TgConfig::default());
        assert_eq!(out[0].members, vec![1, 0, 2, 3]);
        assert_eq!(out[1].members, vec![4]);
        assert_eq!(out.len(), 2);
        // k = 2: pairs.
        let out = run(
            &reqs,
            &TgConfig {
                k: 2,
                ..TgConfig::default()
            },
        );
        let sizes: Vec<usize> = out.iter().map(|s| s.members.len()).collect();
        assert_eq!(sizes, vec![2, 2, 1]);
    }

    #[test]
    fn only_expiring_requests_lead_and_late_ones_wait_their_turn() {
        // Request 1 comes at 300 s; 0 expires first (deadline 600) and takes 1 along
        // at the cycle of 600 s, though 1 could wait until 900.
        let reqs = [
            req(0, 0, (0, 0), (10_000, 0)),
            req(1, 300, (0, 50), (10_000, 50)),
        ];
        let out = run(&reqs, &TgConfig::default());
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].leader, 0);
        assert_eq!(out[0].at, 600);
        // Alone, 1 would go at its own expiry.
        let out = run(&reqs[1..], &TgConfig::default());
        assert_eq!(out[0].at, 900);
    }

    #[test]
    fn the_greedy_order_takes_the_best_share_first() {
        // 0 and 2 expire together; 1 is nearer 2 than 0. The pair (2, 1) saves more,
        // so it is made first, and 0 rides alone although 1 was its best partner too.
        let reqs = [
            req(0, 0, (0, 0), (10_000, 0)),
            req(1, 200, (0, 1_000), (10_000, 1_000)),
            req(2, 0, (0, 1_100), (10_000, 1_100)),
        ];
        let out = run(
            &reqs,
            &TgConfig {
                k: 2,
                ..TgConfig::default()
            },
        );
        assert_eq!(out[0].members, vec![2, 1]);
        assert_eq!(out[1].members, vec![0]);
    }

    #[test]
    fn a_saved_instance_goes_on_as_the_first_would_have() {
        use braid_plan::batch::{Batch, RowKey};
        let reqs = crate::generate::generate(&crate::generate::GenConfig {
            requests: 2_000,
            day: 3_600,
            ..Default::default()
        });
        let f = Tg {
            cfg: TgConfig::default(),
            loads: Arc::new(Loads::default()),
        };
        let feed = |inst: &mut Box<dyn StreamFunction>, rs: &[Request], out: &mut Batch| {
            let input = crate::request::batch(rs);
            let mut epoch = None;
            for (i, r) in rs.iter().enumerate() {
                let e = (r.t / 60) as u64;
                if let Some(p) = epoch.filter(|&p| p != e) {
                    inst.end_of_epoch(p, &mut Emitter::new(out, RowKey::END_OF_EPOCH, 0));
                }
                epoch = Some(e);
                inst.process(input.row(i), &mut Emitter::new(out, i as u64, 0));
            }
            if let Some(p) = epoch {
                inst.end_of_epoch(p, &mut Emitter::new(out, RowKey::END_OF_EPOCH, 0));
            }
        };
        let half = reqs.partition_point(|r| r.t < 1_800);
        let mut whole = Batch::new(6);
        let mut a = f.create(0, 1);
        feed(&mut a, &reqs, &mut whole);
        a.finish(&mut Emitter::new(&mut whole, RowKey::FINISH, 0));
        let mut split = Batch::new(6);
        let mut b = f.create(0, 1);
        feed(&mut b, &reqs[..half], &mut split);
        let mut bytes = Vec::new();
        b.save(&mut bytes).unwrap();
        let mut c = f.create(0, 1);
        c.restore(&bytes).unwrap();
        feed(&mut c, &reqs[half..], &mut split);
        c.finish(&mut Emitter::new(&mut split, RowKey::FINISH, 0));
        let rows = |b: &Batch| b.rows().map(|r| r.to_scalars()).collect::<Vec<_>>();
        assert_eq!(rows(&whole), rows(&split));
        assert_eq!(whole.len(), reqs.len());
        assert!(c.restore(b"not a queue").is_err());
    }

    #[test]
    fn arrival_order_does_not_change_the_shares() {
        let reqs: Vec<Request> = (0..40)
            .map(|i| {
                req(
                    i,
                    i * 13 % 300,
                    (i * 731 % 5_000, i * 377 % 5_000),
                    (20_000 + i * 91 % 3_000, i * 57 % 3_000),
                )
            })
            .collect();
        let a = run(&reqs, &TgConfig::default());
        let mut rev = reqs.clone();
        rev.reverse();
        assert_eq!(a, run(&rev, &TgConfig::default()));
        // Every request is in exactly one share.
        let mut ids: Vec<i64> = a.iter().flat_map(|s| s.members.clone()).collect();
        ids.sort();
        assert_eq!(ids, (0..40).collect::<Vec<_>>());
    }
}
