//! Kafka sinks in a `braid` built without the `kafka` feature: refused by name when a
//! query would open one (nothing else of Kafka is compiled in: no librdkafka).

use crate::checkpoint::{SinkMark, Store};
use crate::error::Result;
use braid_plan::batch::Batch;
use braid_plan::connector::KafkaSink;
use braid_plan::types::Schema;
use std::convert::Infallible;

/// Never made: [`KafkaWriter::open`] refuses.
pub(crate) struct KafkaWriter(Infallible);

impl KafkaWriter {
    pub fn open(_: &KafkaSink, _: &Schema) -> Result<KafkaWriter> {
        Err(crate::error::not_built("Kafka topics", "kafka"))
    }

    pub fn write(&mut self, _: &Batch) -> Result<()> {
        match self.0 {}
    }

    pub fn flush(&mut self) -> Result<()> {
        match self.0 {}
    }
}

/// Never made: [`TopicInTransactions::open`] refuses.
pub(crate) struct TopicInTransactions(Infallible);

impl TopicInTransactions {
    pub fn open(_: &KafkaSink, _: &Schema, _: usize, _: &Store) -> Result<TopicInTransactions> {
        Err(crate::error::not_built("Kafka topics", "kafka"))
    }

    pub fn write(&mut self, _: u64, _: &[super::Window]) -> std::io::Result<()> {
        match self.0 {}
    }

    pub fn mark(&mut self, _: u64) -> std::io::Result<SinkMark> {
        match self.0 {}
    }

    pub fn finish(&mut self) -> std::io::Result<()> {
        match self.0 {}
    }
}
