//! librdkafka (through the `rdkafka` crate, built from the source it bundles) as an independent
//! peer client: it reads what kbench wrote and writes what kbench reads, so that kbench is never
//! checked only against itself.

#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{ClientContext, Offset, TopicPartitionList};

/// One record as librdkafka read it.
#[derive(Debug, Clone)]
pub struct Read {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub timestamp_ms: Option<i64>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

/// Read partitions `0..partitions` of `topic` from the beginning with librdkafka (assigned, no
/// group) until `expected` records arrived, then keep polling for `settle` to catch any record
/// too many. Panics on a consumer error or if fewer arrive within `limit`.
pub fn read(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    expected: usize,
    settle: Duration,
    limit: Duration,
) -> Vec<Read> {
    read_with(&[], bootstrap, topic, partitions, expected, settle, limit)
}

/// As [`read`], with more librdkafka properties (e.g. SASL's).
pub fn read_with(
    properties: &[(&str, &str)],
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    expected: usize,
    settle: Duration,
    limit: Duration,
) -> Vec<Read> {
    let mut config = ClientConfig::new();
    for (k, v) in properties {
        config.set(*k, *v);
    }
    let consumer: BaseConsumer = config
        .set("bootstrap.servers", bootstrap)
        .set("group.id", format!("librdkafka-peer-{topic}"))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .set("client.id", "librdkafka-peer")
        .create()
        .expect("librdkafka consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .expect("partition");
    }
    consumer.assign(&tpl).expect("assign");
    let mut out = Vec::with_capacity(expected);
    let started = Instant::now();
    let mut full_at: Option<Instant> = None;
    loop {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => out.push(Read {
                partition: m.partition(),
                offset: m.offset(),
                key: m.key().map(<[u8]>::to_vec),
                value: m.payload().map(<[u8]>::to_vec),
                timestamp_ms: m.timestamp().to_millis(),
                headers: m
                    .headers()
                    .map(|h| {
                        h.iter()
                            .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                            .collect()
                    })
                    .unwrap_or_default(),
            }),
            Some(Err(e)) => panic!("librdkafka consumer on {topic}: {e}"),
            None => {}
        }
        if out.len() >= expected {
            let at = *full_at.get_or_insert_with(Instant::now);
            if at.elapsed() >= settle {
                return out;
            }
        }
        assert!(
            started.elapsed() < limit,
            "librdkafka read {} of {expected} records of {topic} within {limit:?}",
            out.len()
        );
    }
}

/// Counts delivery reports.
#[derive(Default)]
pub struct Deliveries {
    pub delivered: AtomicU64,
    pub failed: AtomicU64,
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(_) => self.delivered.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.failed.fetch_add(1, Ordering::Relaxed),
        };
    }
}

/// Produce `records` (partition, key, value) to `topic` with librdkafka, compressed with `codec`
/// (librdkafka's names: none, gzip, snappy, lz4, zstd), acks=all; returns (delivered, failed) once
/// every delivery report is in.
pub fn produce(
    bootstrap: &str,
    topic: &str,
    codec: &str,
    records: impl IntoIterator<Item = (i32, Vec<u8>, Vec<u8>)>,
) -> (u64, u64) {
    let producer = producer(
        bootstrap,
        &[("compression.codec", codec), ("linger.ms", "5")],
    );
    for (partition, key, value) in records {
        let mut record = BaseRecord::to(topic)
            .partition(partition)
            .key(&key)
            .payload(&value);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    producer.poll(Duration::from_millis(10));
                }
                Err((e, _)) => panic!("librdkafka produce to {topic}: {e}"),
            }
        }
        producer.poll(Duration::ZERO);
    }
    flushed(&producer)
}

/// Produce `records` (partition, value, headers) to `topic` with librdkafka, one at a time in
/// order (linger 0, one request in flight), acks=all; returns (delivered, failed).
pub fn produce_with_headers(
    bootstrap: &str,
    topic: &str,
    records: impl IntoIterator<Item = (i32, Vec<u8>, Vec<(String, Vec<u8>)>)>,
) -> (u64, u64) {
    let producer = producer(
        bootstrap,
        &[
            ("linger.ms", "0"),
            ("max.in.flight.requests.per.connection", "1"),
        ],
    );
    for (partition, value, headers) in records {
        let mut owned = OwnedHeaders::new();
        for (k, v) in &headers {
            owned = owned.insert(Header {
                key: k,
                value: Some(v),
            });
        }
        let record: BaseRecord<'_, [u8], Vec<u8>> = BaseRecord::to(topic)
            .partition(partition)
            .payload(&value)
            .headers(owned);
        if let Err((e, _)) = producer.send(record) {
            panic!("librdkafka produce to {topic}: {e}");
        }
        producer.poll(Duration::ZERO);
    }
    flushed(&producer)
}

/// A librdkafka producer with acks=all counting its delivery reports, and `properties` besides.
/// librdkafka's own transactions into partition 0 of `topic`: for each entry of `commits`, a
/// transaction of `records` records, committed when true and aborted when false.
pub fn produce_transactions(bootstrap: &str, topic: &str, records: usize, commits: &[bool]) {
    let producer = producer(bootstrap, &[("transactional.id", "librdkafka-peer-txn")]);
    let timeout = Duration::from_secs(30);
    producer
        .init_transactions(timeout)
        .expect("librdkafka init_transactions");
    for (t, &commit) in commits.iter().enumerate() {
        producer
            .begin_transaction()
            .expect("librdkafka begin_transaction");
        for i in 0..records {
            let value = format!("librdkafka-txn-{t}-{i}");
            producer
                .send(BaseRecord::<(), _>::to(topic).partition(0).payload(&value))
                .map_err(|(e, _)| e)
                .expect("librdkafka transactional send");
        }
        producer.flush(timeout).expect("librdkafka flush");
        if commit {
            producer
                .commit_transaction(timeout)
                .expect("librdkafka commit_transaction");
        } else {
            producer
                .abort_transaction(timeout)
                .expect("librdkafka abort_transaction");
        }
    }
}

fn producer(bootstrap: &str, properties: &[(&str, &str)]) -> BaseProducer<Deliveries> {
    let mut config = ClientConfig::new();
    for (k, v) in properties {
        config.set(*k, *v);
    }
    config
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("client.id", "librdkafka-peer")
        .create_with_context(Deliveries::default())
        .expect("librdkafka producer")
}

/// Flush, then (delivered, failed) once every delivery report is in.
fn flushed(producer: &BaseProducer<Deliveries>) -> (u64, u64) {
    producer
        .flush(Duration::from_secs(60))
        .expect("librdkafka flush");
    let c = producer.context();
    (
        c.delivered.load(Ordering::Relaxed),
        c.failed.load(Ordering::Relaxed),
    )
}

/// Produce one record per key (empty value) to `topic` with librdkafka, leaving the partition to
/// librdkafka's `murmur2_random` partitioner (the Java client's default for keyed records); returns
/// (delivered, failed).
pub fn produce_keyed(bootstrap: &str, topic: &str, keys: &[Vec<u8>]) -> (u64, u64) {
    let producer = producer(bootstrap, &[("partitioner", "murmur2_random")]);
    for key in keys {
        let record: BaseRecord<'_, Vec<u8>, [u8]> = BaseRecord::to(topic).key(key).payload(&[]);
        if let Err((e, _)) = producer.send(record) {
            panic!("librdkafka produce to {topic}: {e}");
        }
        producer.poll(Duration::ZERO);
    }
    flushed(&producer)
}
