//! A Kafka sink: one message per row (a CSV line or a JSON object keyed by column
//! name), written by worker 0's producer. A message the brokers did not take fails the
//! run with their reason; none is dropped silently.

use crate::checkpoint::{SinkMark, Store};
use crate::error::{Error, Result};
use braid_plan::batch::{Batch, Row, Value};
use braid_plan::connector::{KafkaSink, RecordFormat};
use braid_plan::text::write_csv_row;
use braid_plan::types::{DataType, Schema};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientConfig, ClientContext, Offset, TopicPartitionList};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a flush may take before the run fails.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Keeps the first delivery failure.
#[derive(Clone, Default)]
pub(crate) struct Deliveries {
    failed: Arc<Mutex<Option<String>>>,
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((e, _)) = result {
            if let Ok(mut f) = self.failed.lock() {
                f.get_or_insert_with(|| e.to_string());
            }
        }
    }
}

/// Writes rows to a topic.
pub(crate) struct KafkaWriter {
    producer: BaseProducer<Deliveries>,
    deliveries: Deliveries,
    spec: KafkaSink,
    key: Option<usize>,
    names: Vec<String>,
    types: Vec<DataType>,
    payload: Vec<u8>,
    key_text: Vec<u8>,
    /// Writing in transactions: a consumer of the group named as the transactional id,
    /// whose offset for the topic's partition 0 each commit sets, in the same
    /// transaction, to one past the last epoch it holds.
    group: Option<BaseConsumer>,
}

impl KafkaWriter {
    /// A writer of rows of `schema` to the topic of `spec` (idempotent: a message
    /// the client sends again after a broker error is written once).
    pub fn open(spec: &KafkaSink, schema: &Schema) -> Result<KafkaWriter> {
        KafkaWriter::open_with(spec, schema, None)
    }

    fn open_with(
        spec: &KafkaSink,
        schema: &Schema,
        transactional_id: Option<&str>,
    ) -> Result<KafkaWriter> {
        let key = match &spec.key {
            None => None,
            Some(k) => Some(schema.index_of(k).map_err(|_| {
                Error::Plan(braid_plan::error::Error::Plan(format!(
                    "Kafka sink key `{k}` is not a column of its rows ({})",
                    schema.column_list()
                )))
            })?),
        };
        let deliveries = Deliveries::default();
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", &spec.bootstrap)
            .set("enable.idempotence", "true")
            .set("linger.ms", "5");
        if let Some(id) = transactional_id {
            config.set("transactional.id", id);
        }
        let producer: BaseProducer<Deliveries> = config
            .create_with_context(deliveries.clone())
            .map_err(|e| {
                Error::Connector(format!("connecting to Kafka at {}: {e}", spec.bootstrap))
            })?;
        Ok(KafkaWriter {
            producer,
            deliveries,
            spec: spec.clone(),
            key,
            names: schema.fields.iter().map(|f| f.name.clone()).collect(),
            types: schema.fields.iter().map(|f| f.ty).collect(),
            payload: Vec::new(),
            key_text: Vec::new(),
            group: None,
        })
    }

    /// A writer in transactions under the transactional id `id`: starting, it fences
    /// off any earlier writer of that id and aborts its open transaction. Also the last
    /// epoch a committed transaction of that id holds, if any.
    pub fn transactional(
        spec: &KafkaSink,
        schema: &Schema,
        id: &str,
    ) -> Result<(KafkaWriter, Option<u64>)> {
        let mut w = KafkaWriter::open_with(spec, schema, Some(id))?;
        w.producer
            .init_transactions(TIMEOUT)
            .map_err(|e| w.fault("starting transactions", e))?;
        w.topic_exists()?;
        let group: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &spec.bootstrap)
            .set("group.id", id)
            .set("enable.auto.commit", "false")
            .set("isolation.level", "read_committed")
            .create()
            .map_err(|e| w.fault("opening the transactions' consumer group", e))?;
        let mut list = TopicPartitionList::new();
        list.add_partition(&spec.topic, 0);
        let committed = group
            .committed_offsets(list, TIMEOUT)
            .map_err(|e| w.fault("reading the last committed epoch", e))?;
        let last = committed
            .find_partition(&spec.topic, 0)
            .and_then(|e| match e.offset() {
                Offset::Offset(i64::MAX) => Some(u64::MAX),
                Offset::Offset(o) if o > 0 => Some(o as u64 - 1),
                _ => None,
            });
        w.group = Some(group);
        w.producer
            .begin_transaction()
            .map_err(|e| w.fault("beginning a transaction", e))?;
        Ok((w, last))
    }

    /// Waits until the topic exists (the brokers make a topic a producer asks for when
    /// they are set to), since a commit records its epoch against its partition 0.
    fn topic_exists(&self) -> Result<()> {
        let deadline = std::time::Instant::now() + TIMEOUT;
        loop {
            let md = self
                .producer
                .client()
                .fetch_metadata(Some(&self.spec.topic), TIMEOUT)
                .map_err(|e| self.fault("reading the topic's metadata", e))?;
            let ready = md.topics().iter().any(|t| {
                t.name() == self.spec.topic && t.error().is_none() && !t.partitions().is_empty()
            });
            if ready {
                return Ok(());
            }
            if std::time::Instant::now() > deadline {
                return Err(self.fault(
                    "the topic does not exist (create it, or let the brokers create topics)",
                    "no partitions",
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Commits the open transaction, which holds every row of the epochs up to
    /// `epoch` and no other, with the record that it does, then begins the next.
    pub fn commit(&mut self, epoch: u64) -> Result<()> {
        self.flush()?;
        let Some(group) = &self.group else {
            return Err(Error::Internal("a commit without transactions".into()));
        };
        let meta = group
            .group_metadata()
            .ok_or_else(|| Error::Internal("the transactions' group has no metadata".into()))?;
        let mut list = TopicPartitionList::new();
        // One past the epoch; the end of input's (u64::MAX, and any past i64's range)
        // as i64::MAX.
        let at = i64::try_from(epoch).map_or(i64::MAX, |e| e.saturating_add(1));
        list.add_partition_offset(&self.spec.topic, 0, Offset::Offset(at))
            .map_err(|e| self.fault("recording the committed epoch", e))?;
        self.producer
            .send_offsets_to_transaction(&list, &meta, TIMEOUT)
            .map_err(|e| self.fault("recording the committed epoch", e))?;
        self.producer
            .commit_transaction(TIMEOUT)
            .map_err(|e| self.fault("committing a transaction", e))?;
        self.producer
            .begin_transaction()
            .map_err(|e| self.fault("beginning a transaction", e))
    }

    fn fault(&self, doing: &str, e: impl std::fmt::Display) -> Error {
        Error::Connector(format!(
            "Kafka sink {} at {}: {doing}: {e}",
            self.spec.topic, self.spec.bootstrap
        ))
    }

    /// Sends a message per row of `batch` (queued; see [`KafkaWriter::flush`]).
    pub fn write(&mut self, batch: &Batch) -> Result<()> {
        for r in batch.rows() {
            self.payload.clear();
            match &self.spec.format {
                RecordFormat::Csv => {
                    write_csv_row(&mut self.payload, &r, &self.types, None)
                        .map_err(|e| Error::io("writing a row", e))?;
                    self.payload.pop(); // the line end
                }
                RecordFormat::Json { .. } => {
                    json_row(&mut self.payload, &r, &self.names, &self.types)
                }
            }
            if let Some(k) = self.key {
                self.key_text.clear();
                match r.get(k) {
                    Value::Int(v) if self.types[k].is_time() => self
                        .key_text
                        .extend_from_slice(braid_plan::time::format(v, self.types[k]).as_bytes()),
                    v => {
                        use std::io::Write;
                        let _ = write!(self.key_text, "{v}");
                    }
                }
            }
            loop {
                let mut record: BaseRecord<'_, [u8], [u8]> =
                    BaseRecord::to(&self.spec.topic).payload(&self.payload[..]);
                if self.key.is_some() {
                    record = record.key(&self.key_text[..]);
                }
                match self.producer.send(record) {
                    Ok(()) => break,
                    Err((
                        rdkafka::error::KafkaError::MessageProduction(
                            rdkafka::types::RDKafkaErrorCode::QueueFull,
                        ),
                        _,
                    )) => {
                        self.producer.poll(Duration::from_millis(50));
                    }
                    Err((e, _)) => return Err(self.fault("sending a message", e)),
                }
            }
        }
        self.producer.poll(Duration::ZERO);
        self.check()
    }

    fn check(&self) -> Result<()> {
        match self.deliveries.failed.lock().ok().and_then(|f| f.clone()) {
            Some(e) => Err(self.fault("a message was not delivered", e)),
            None => Ok(()),
        }
    }

    /// Waits until every message sent is delivered.
    pub fn flush(&mut self) -> Result<()> {
        self.producer
            .flush(TIMEOUT)
            .map_err(|e| self.fault("flushing", e))?;
        self.check()
    }
}

/// A row as a JSON object keyed by column name, in column order; times as their text,
/// a float that is no JSON number (NaN, infinite) as its name in a string.
fn json_row(out: &mut Vec<u8>, r: &Row<'_>, names: &[String], types: &[DataType]) {
    // Writing to a Vec cannot fail.
    out.push(b'{');
    for (c, name) in names.iter().enumerate() {
        if c > 0 {
            out.push(b',');
        }
        let _ = serde_json::to_writer(&mut *out, name);
        out.push(b':');
        let _ = match r.get(c) {
            Value::Null => serde_json::to_writer(&mut *out, &()),
            Value::Int(v) if types[c].is_time() => {
                serde_json::to_writer(&mut *out, &braid_plan::time::format(v, types[c]))
            }
            Value::Int(v) => serde_json::to_writer(&mut *out, &v),
            Value::Float(f) if f.is_finite() => serde_json::to_writer(&mut *out, &f),
            Value::Float(f) => serde_json::to_writer(&mut *out, &f.to_string()),
            Value::Bool(b) => serde_json::to_writer(&mut *out, &b),
            Value::Str(s) => serde_json::to_writer(&mut *out, s),
            Value::Ints(a) => serde_json::to_writer(&mut *out, a),
            Value::Floats(a) => {
                // Non-finite elements as strings, as a non-finite float is.
                let items: Vec<serde_json::Value> = a
                    .iter()
                    .map(|f| match serde_json::Number::from_f64(*f) {
                        Some(n) => serde_json::Value::Number(n),
                        None => serde_json::Value::String(f.to_string()),
                    })
                    .collect();
                serde_json::to_writer(&mut *out, &items)
            }
        };
    }
    out.push(b'}');
}

/// A Kafka sink under checkpoints: its writer, in transactions; the rows written; the
/// last epoch a committed transaction holds (resuming, the epochs up to it are in the
/// topic already and are not written again); and the last epoch written.
pub(crate) struct TopicInTransactions {
    writer: KafkaWriter,
    mark: SinkMark,
    committed: Option<u64>,
    written: Option<u64>,
}

impl TopicInTransactions {
    /// The sink of output `output` of a run with checkpoints in `store`: a
    /// transactional writer whose id is the topic's and the checkpoints' (the same when
    /// the run recovers, another for another run). Recovering, the epochs the last
    /// committed transaction holds are skipped: they are in the topic, and the resumed
    /// run makes them again from its last checkpoint.
    pub fn open(
        spec: &KafkaSink,
        schema: &Schema,
        output: usize,
        store: &Store,
    ) -> Result<TopicInTransactions> {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        (store.location(), output).hash(&mut h);
        let id = format!("braid-{}-{:016x}", spec.topic, h.finish());
        let (writer, last) = KafkaWriter::transactional(spec, schema, &id)?;
        // A run that starts over owns the topic's transactions from its first commit on.
        let committed = last.filter(|_| store.recovering());
        Ok(TopicInTransactions {
            writer,
            mark: SinkMark { bytes: 0, rows: 0 },
            committed,
            written: None,
        })
    }

    /// Writes epoch `epoch`'s windows (unless a committed transaction holds it).
    pub fn write(&mut self, epoch: u64, windows: &[super::Window]) -> std::io::Result<()> {
        self.mark.rows += windows.iter().map(|w| w.batch.len() as u64).sum::<u64>();
        if self.committed.is_some_and(|c| epoch <= c) {
            return Ok(()); // in the topic already
        }
        for w in windows {
            self.writer.write(&w.batch).map_err(std::io::Error::other)?;
        }
        self.written = Some(epoch);
        Ok(())
    }

    /// Commits the transaction holding the epochs up to checkpoint `c`.
    pub fn mark(&mut self, c: u64) -> std::io::Result<SinkMark> {
        if self.committed.is_none_or(|done| c > done) {
            self.writer.commit(c).map_err(std::io::Error::other)?;
            self.committed = Some(c);
            crash_after_commit(false);
        }
        Ok(self.mark)
    }

    /// The input has ended: commits the epochs after the last checkpoint.
    pub fn finish(&mut self) -> std::io::Result<()> {
        match self.written {
            Some(last) if self.committed.is_none_or(|c| last > c) => {
                self.writer.commit(last).map_err(std::io::Error::other)?;
                self.committed = Some(last);
                crash_after_commit(true);
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// Fault injection for the recovery tests: with `BRAID_CRASH_AFTER_KAFKA_COMMITS=n`,
/// the process aborts right after its n-th Kafka commit, before the checkpoint that
/// commit belongs to is durable (the moment where a sink that did not know what the
/// topic holds would write rows twice after recovering); with `=end`, right after the
/// commit at the end of input, before the run ends. `last`: this is that commit.
fn crash_after_commit(last: bool) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COMMITS: AtomicU64 = AtomicU64::new(0);
    let Ok(when) = std::env::var("BRAID_CRASH_AFTER_KAFKA_COMMITS") else {
        return;
    };
    let n = COMMITS.fetch_add(1, Ordering::Relaxed) + 1;
    if (last && when == "end") || when.parse::<u64>() == Ok(n) {
        std::process::abort();
    }
}
