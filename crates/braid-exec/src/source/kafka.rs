//! A Kafka topic as a stream. Every worker reads its share of the topic's partitions
//! (partition `p` on worker `p % workers`) with a consumer of its own (assigned, not a
//! consumer group: where reading stands is Braid's, kept in its checkpoints).
//!
//! Epochs come from each record's event time (or, without one, its partition's row
//! count), and never go back within a partition. A worker hands on the rows of an
//! epoch once every partition it reads has got to that epoch (a watermark over its
//! partitions), lowest epoch first, partition by partition: so which epoch a row falls
//! in depends on its partition's records only, not on how the reads interleaved. A
//! partition read to its end that has had no record for `idle_ms` holds no one back
//! (its later rows then join the epoch the worker is in, late, as a file's would).
//!
//! A row's sequence number is `offset * partitions + partition`: unique, and the same
//! whichever worker reads it. A malformed record is counted and reported with its
//! partition and offset, never dropped silently.

use super::record::Decoder;
use super::{epoch_at, Counters, Feed, Next, ReadOptions, RejectLog, Rejects};
use crate::error::{Error, Result};
use braid_plan::batch::{Batch, RowKey};
use braid_plan::connector::{KafkaSource, KafkaStart};
use braid_plan::plan::Source;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::statistics::Statistics;
use rdkafka::ClientContext;
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a request to the brokers may take before the run fails.
const TIMEOUT: Duration = Duration::from_secs(15);

/// One partition this worker reads.
struct Part {
    id: i32,
    /// Rows read and not handed on yet (from `next` on), with each one's epoch and offset.
    held: Batch,
    meta: Vec<(u64, i64)>,
    next: usize,
    /// The epoch of the last row read (a partition's epochs never go back), and rows read.
    epoch: u64,
    count: u64,
    /// The same, as of the last row handed on: where a resumed read starts from.
    taken_epoch: u64,
    taken_count: u64,
    /// The offset of the next record to read, and where a bounded read ends.
    position: i64,
    end: Option<i64>,
    /// The partition has been read to its current end (the broker said so).
    at_end: bool,
    /// When it last gave a record (or reading started).
    heard: Instant,
}

impl Part {
    fn done(&self) -> bool {
        self.end.is_some_and(|e| self.position >= e)
    }

    /// Read to its end with no record for `idle`: it holds back no one's epochs.
    fn idle(&self, idle: Duration) -> bool {
        self.at_end && self.heard.elapsed() >= idle
    }

    fn head(&self) -> Option<u64> {
        self.meta.get(self.next).map(|m| m.0)
    }

    /// Where a resumed read of this partition starts: its first row not handed on.
    fn resume(&self) -> PartAt {
        PartAt {
            id: self.id,
            offset: self.meta.get(self.next).map_or(self.position, |m| m.1),
            epoch: self.taken_epoch,
            count: self.taken_count,
        }
    }
}

/// A partition's place in a resume point.
#[derive(Clone, Copy, serde::Serialize, serde::Deserialize)]
struct PartAt {
    id: i32,
    offset: i64,
    epoch: u64,
    count: u64,
}

/// A Kafka feed's resume point: its workers, its epoch and its partitions' places.
#[derive(serde::Serialize, serde::Deserialize)]
struct Resume {
    peers: usize,
    epoch: u64,
    parts: Vec<PartAt>,
}

pub(crate) struct KafkaFeed {
    consumer: BaseConsumer<Lag>,
    spec: KafkaSource,
    source: Source,
    decoder: Decoder,
    parts: Vec<Part>,
    /// The topic's partitions (sequence numbers interleave them).
    partitions: u64,
    /// The epoch of the last window handed on.
    epoch: u64,
    peers: usize,
    strict: bool,
    rejects: RejectLog,
    counters: Arc<Counters>,
    /// This feed's share of [`Counters::kafka_lag`].
    lag: u64,
    /// Where the window handed on last starts.
    last: Option<Vec<u8>>,
}

impl Drop for KafkaFeed {
    fn drop(&mut self) {
        self.report_lag(0);
    }
}

fn kafka_error(doing: String) -> impl FnOnce(KafkaError) -> Error {
    move |e| Error::Connector(format!("{doing}: {e}"))
}

/// A consumer's lag, as its statistics (every second) last said: records behind each
/// assigned partition's end, summed.
#[derive(Clone, Default)]
pub(crate) struct Lag(Arc<AtomicU64>);

impl ClientContext for Lag {
    fn stats(&self, statistics: Statistics) {
        let lag: i64 = statistics
            .topics
            .values()
            .flat_map(|t| t.partitions.values())
            .filter(|p| p.partition >= 0)
            .map(|p| p.consumer_lag.max(0))
            .sum();
        self.0.store(lag as u64, Ordering::Relaxed);
    }
}

impl ConsumerContext for Lag {}

/// A consumer of the brokers `bootstrap`.
pub(crate) fn consumer(bootstrap: &str) -> Result<BaseConsumer<Lag>> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("statistics.interval.ms", "1000")
        .set("group.id", "braid")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("auto.offset.reset", "earliest")
        .set("isolation.level", "read_committed")
        // librdkafka stops fetching a partition whose local queue holds
        // `queued.min.messages` (100,000) and waits `fetch.queue.backoff.ms` (1 s by
        // default) before it looks again: a feed that holds back a partition ahead of
        // the others (the watermark) then waited a second at a time. Look again soon.
        .set("fetch.queue.backoff.ms", "5")
        .create_with_context(Lag::default())
        .map_err(kafka_error(format!("connecting to Kafka at {bootstrap}")))
}

/// The number of partitions of `topic`.
pub(crate) fn partitions(consumer: &BaseConsumer<Lag>, spec: &KafkaSource) -> Result<i32> {
    let doing = || format!("reading topic {} at {}", spec.topic, spec.bootstrap);
    let md = consumer
        .fetch_metadata(Some(&spec.topic), TIMEOUT)
        .map_err(kafka_error(doing()))?;
    let Some(t) = md.topics().iter().find(|t| t.name() == spec.topic) else {
        return Err(Error::Connector(format!("{}: no such topic", doing())));
    };
    if let Some(e) = t.error() {
        let code: RDKafkaErrorCode = e.into();
        return Err(Error::Connector(format!("{}: {code}", doing())));
    }
    if t.partitions().is_empty() {
        return Err(Error::Connector(format!(
            "{}: the topic has no partitions",
            doing()
        )));
    }
    Ok(t.partitions().len() as i32)
}

impl KafkaFeed {
    /// Opens worker `index`'s share of the partitions of `spec`, at a resume point of
    /// a feed of the same source when given; None if this worker reads no partition.
    pub fn open(
        source: &Source,
        spec: &KafkaSource,
        (index, peers): (usize, usize),
        opts: &ReadOptions,
        counters: Arc<Counters>,
        resume: Option<&[u8]>,
    ) -> Result<Option<KafkaFeed>> {
        let resume: Option<Resume> = match resume {
            Some(bytes) => Some(serde_json::from_slice(bytes).map_err(|e| {
                Error::Internal(format!("the checkpoint's place in {}: {e}", source.name))
            })?),
            None => None,
        };
        if let Some(r) = &resume {
            if r.peers != peers {
                return Err(Error::Connector(format!(
                    "source {} (Kafka) was checkpointed read by {} workers; resuming it on {peers} is not built (its partitions' places are kept per worker)",
                    source.name, r.peers
                )));
            }
        }
        let consumer = consumer(&spec.bootstrap)?;
        let n = partitions(&consumer, spec)?;
        let mine: Vec<i32> = (0..n).filter(|p| *p as usize % peers == index).collect();
        if mine.is_empty() {
            return Ok(None);
        }
        let mut parts = Vec::with_capacity(mine.len());
        let mut list = TopicPartitionList::new();
        for &id in &mine {
            let (low, high) = consumer
                .fetch_watermarks(&spec.topic, id, TIMEOUT)
                .map_err(kafka_error(format!(
                    "reading the offsets of {} partition {id}",
                    spec.topic
                )))?;
            let at = resume
                .as_ref()
                .and_then(|r| r.parts.iter().find(|p| p.id == id).copied());
            let start = match (&at, &spec.start) {
                (Some(a), _) => a.offset,
                (None, KafkaStart::Earliest) => low,
                (None, KafkaStart::Latest) => high,
                (None, KafkaStart::Offsets(given)) => given
                    .iter()
                    .find(|(p, _)| *p == id)
                    .map_or(low, |&(_, o)| o.max(low)),
            };
            let (epoch, count) = at.map_or((0, 0), |a| (a.epoch, a.count));
            list.add_partition_offset(&spec.topic, id, Offset::Offset(start))
                .map_err(kafka_error(format!(
                    "assigning {} partition {id}",
                    spec.topic
                )))?;
            parts.push(Part {
                id,
                held: Batch::new(source.schema.arity()),
                meta: Vec::new(),
                next: 0,
                epoch,
                count,
                taken_epoch: epoch,
                taken_count: count,
                position: start,
                end: spec.bounded.then_some(high),
                at_end: false,
                heard: Instant::now(),
            });
        }
        consumer.assign(&list).map_err(kafka_error(format!(
            "assigning the partitions of {}",
            spec.topic
        )))?;
        let rejects = RejectLog::new(&source.name, opts, counters.clone())?;
        Ok(Some(KafkaFeed {
            consumer,
            spec: spec.clone(),
            decoder: Decoder::new(&spec.format, &source.schema),
            source: source.clone(),
            parts,
            partitions: n as u64,
            epoch: resume.as_ref().map_or(0, |r| r.epoch),
            peers,
            strict: opts.strict,
            rejects,
            counters,
            lag: 0,
            last: None,
        }))
    }

    /// Reads what the consumer has, up to `budget` records.
    fn poll(&mut self, budget: usize) -> Result<()> {
        for _ in 0..budget {
            let Some(got) = self.consumer.poll(Duration::ZERO) else {
                return Ok(());
            };
            let m = match got {
                Ok(m) => m,
                Err(KafkaError::PartitionEOF(p)) => {
                    if let Some(part) = self.parts.iter_mut().find(|x| x.id == p) {
                        part.at_end = true;
                    }
                    continue;
                }
                Err(KafkaError::MessageConsumption(
                    RDKafkaErrorCode::BrokerTransportFailure
                    | RDKafkaErrorCode::AllBrokersDown
                    | RDKafkaErrorCode::OperationTimedOut,
                )) => continue, // the client reconnects by itself
                Err(e) => {
                    return Err(Error::Connector(format!(
                        "reading {} at {}: {e}",
                        self.spec.topic, self.spec.bootstrap
                    )))
                }
            };
            let Some(k) = self.parts.iter().position(|x| x.id == m.partition()) else {
                continue;
            };
            let part = &mut self.parts[k];
            let offset = m.offset();
            if part.done() || offset < part.position {
                continue; // past a bounded read's end, or seen already
            }
            part.position = offset + 1;
            part.at_end = false;
            part.heard = Instant::now();
            let seq = offset as u64 * self.partitions + part.id as u64;
            let payload = m.payload().unwrap_or_default();
            match self
                .decoder
                .push(&mut part.held, RowKey { seq, lane: 0 }, payload)
            {
                Ok(()) => {
                    let time = self
                        .source
                        .schema
                        .event_time
                        .and_then(|c| part.held.row(part.held.len() - 1).int(c));
                    let e = epoch_at(self.source.epoch, time, part.count).max(part.epoch);
                    part.epoch = e;
                    part.count += 1;
                    part.meta.push((e, offset));
                }
                Err((column, reason)) => {
                    let reason = format!("partition {}, offset {offset}: {reason}", part.id);
                    if self.strict {
                        return Err(Error::Input {
                            source_name: self.source.name.clone(),
                            line: offset as u64 + 1,
                            column,
                            message: reason,
                        });
                    }
                    self.rejects.add(offset as u64 + 1, column, reason, payload);
                }
            }
        }
        Ok(())
    }

    /// The highest epoch every partition still being read has got to.
    fn watermark(&self) -> u64 {
        let idle = Duration::from_millis(self.spec.idle_ms);
        self.parts
            .iter()
            .filter(|p| !(p.done() || p.idle(idle)))
            .map(|p| p.epoch)
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Updates this feed's share of [`Counters::kafka_lag`] from its consumer's
    /// statistics.
    fn update_lag(&mut self) {
        let lag = self.consumer.context().0.load(Ordering::Relaxed);
        self.report_lag(lag);
    }

    fn report_lag(&mut self, lag: u64) {
        let c = &self.counters.kafka_lag;
        c.fetch_add(lag.wrapping_sub(self.lag), Ordering::Relaxed);
        self.lag = lag;
    }

    fn here(&self) -> Option<Vec<u8>> {
        serde_json::to_vec(&Resume {
            peers: self.peers,
            epoch: self.epoch,
            parts: self.parts.iter().map(Part::resume).collect(),
        })
        .ok()
    }
}

impl Feed for KafkaFeed {
    fn next(&mut self) -> Result<Next> {
        let window = self.source.window.max(1);
        self.poll(4 * window)?;
        self.update_lag();
        let w = self.watermark();
        // The lowest epoch held that every partition has got to.
        let Some(e) = self
            .parts
            .iter()
            .filter_map(Part::head)
            .filter(|&e| e <= w)
            .min()
        else {
            if self.parts.iter().all(|p| p.done() && p.head().is_none()) {
                self.report_lag(0);
                return Ok(Next::Done);
            }
            return Ok(Next::Wait);
        };
        let start = self.here();
        // Rows of an idle partition that come late join the epoch the feed is in.
        let epoch = e.max(self.epoch);
        let mut out = Batch::with_capacity(self.source.schema.arity(), window);
        for p in &mut self.parts {
            while out.len() < window && p.head().is_some_and(|h| h.max(epoch) == epoch) {
                out.push_row_of(&p.held, p.next, p.held.key(p.next));
                p.taken_epoch = p.meta[p.next].0;
                p.taken_count += 1;
                p.next += 1;
            }
            if p.next == p.meta.len() && p.next > 0 {
                p.held.clear();
                p.meta.clear();
                p.next = 0;
            }
        }
        Counters::add(&self.counters.rows_in, out.len() as u64);
        self.epoch = epoch;
        self.last = start;
        Ok(Next::Window(epoch, out))
    }

    fn resume_point(&self) -> Option<Vec<u8>> {
        self.last.clone()
    }

    fn rejects(&mut self) -> Rejects {
        self.rejects.flush();
        self.rejects.rejects.clone()
    }
}
