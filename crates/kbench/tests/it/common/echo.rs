//! The user's application in the request-reply tests: a librdkafka service (not kbench's code) in
//! its own consumer group that reads each request, waits as a slow service would, and answers on
//! the reply topic, copying the correlation id into a header or a JSON field of its reply.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

/// How the service behaves.
#[derive(Debug, Clone)]
pub struct EchoSpec {
    pub requests: String,
    pub replies: String,
    /// Its consumer group (kbench's `--app-group`).
    pub group: String,
    /// The request header the correlation id is read from.
    pub header: String,
    /// Answer with a JSON value carrying the id in this field (no header); else copy the header.
    pub json_field: Option<String>,
    /// Each request's processing time.
    pub delay: Duration,
    /// Stop answering after this many replies (a service that died mid-run).
    pub answer_at_most: Option<u64>,
    /// Also send one reply whose correlation id is no request's, after this many replies.
    pub junk_after: Option<u64>,
}

impl EchoSpec {
    pub fn new(requests: &str, replies: &str, group: &str) -> EchoSpec {
        EchoSpec {
            requests: requests.into(),
            replies: replies.into(),
            group: group.into(),
            header: "kafka_correlationId".into(),
            json_field: None,
            delay: Duration::ZERO,
            answer_at_most: None,
            junk_after: None,
        }
    }
}

/// A running service; stopped (and joined) on drop.
pub struct Echo {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<u64>>,
}

impl Echo {
    /// Start the service on `bootstrap` and return once its consumer holds its partitions (a
    /// group join can take seconds); panics if it has none within a minute.
    pub fn start(bootstrap: &str, spec: EchoSpec) -> Echo {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", &spec.group)
            .set("auto.offset.reset", "earliest")
            .set("enable.auto.commit", "true")
            .set("auto.commit.interval.ms", "100")
            // A broker may hold a new group's join for half the session timeout.
            .set("session.timeout.ms", "6000")
            .set("fetch.wait.max.ms", "10")
            .create()
            .expect("librdkafka echo consumer");
        let producer: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("linger.ms", "0")
            .create()
            .expect("librdkafka echo producer");
        consumer
            .subscribe(&[&spec.requests])
            .expect("subscribe to the requests");
        let deadline = Instant::now() + Duration::from_secs(60);
        while consumer.assignment().map_or(0, |a| a.count()) == 0 {
            assert!(
                Instant::now() < deadline,
                "the echo service got no partitions of {} in 60 s",
                spec.requests
            );
            if let Some(Err(e)) = consumer.poll(Duration::from_millis(100)) {
                panic!("echo consumer: {e}");
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || serve(consumer, producer, spec, &stopping));
        Echo {
            stop,
            thread: Some(thread),
        }
    }

    /// Stop the service: the replies it sent.
    pub fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .map(|t| t.join().expect("echo thread"))
            .unwrap_or(0)
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Consume, wait, answer, until stopped; the replies sent.
fn serve(consumer: BaseConsumer, producer: BaseProducer, spec: EchoSpec, stop: &AtomicBool) -> u64 {
    let mut answered = 0u64;
    let mut junk_sent = false;
    while !stop.load(Ordering::Relaxed) {
        producer.poll(Duration::ZERO);
        let Some(msg) = consumer.poll(Duration::from_millis(50)) else {
            continue;
        };
        let msg = msg.expect("echo consumer");
        if spec.answer_at_most.is_some_and(|n| answered >= n) {
            continue;
        }
        let id: Option<Vec<u8>> = msg.headers().and_then(|h| {
            h.iter()
                .find(|h| h.key == spec.header)
                .and_then(|h| h.value.map(<[u8]>::to_vec))
        });
        std::thread::sleep(spec.delay);
        reply(&producer, &spec, id.as_deref());
        answered += 1;
        if spec.junk_after == Some(answered) && !junk_sent {
            reply(&producer, &spec, Some(b"not-a-request-of-this-run"));
            junk_sent = true;
        }
    }
    producer
        .flush(Duration::from_secs(10))
        .expect("echo producer flush");
    answered
}

/// One reply carrying `id` (none: a reply without one).
fn reply(producer: &BaseProducer, spec: &EchoSpec, id: Option<&[u8]>) {
    let (value, headers) = match (&spec.json_field, id) {
        (Some(field), id) => {
            let id = id.map(|i| String::from_utf8_lossy(i).into_owned());
            (
                serde_json::json!({ field: id, "status": "ok" }).to_string(),
                OwnedHeaders::new(),
            )
        }
        (None, id) => (
            "ok".to_string(),
            OwnedHeaders::new().insert(Header {
                key: &spec.header,
                value: id,
            }),
        ),
    };
    let mut record = BaseRecord::<(), _>::to(&spec.replies)
        .payload(&value)
        .headers(headers);
    loop {
        match producer.send(record) {
            Ok(()) => return,
            Err((e, back)) => {
                // A full queue drains as delivery reports are served.
                assert!(
                    matches!(
                        e,
                        rdkafka::error::KafkaError::MessageProduction(
                            rdkafka::types::RDKafkaErrorCode::QueueFull
                        )
                    ),
                    "echo reply: {e}"
                );
                producer.poll(Duration::from_millis(10));
                record = back;
            }
        }
    }
}

/// Create `topics` (each with `partitions`) with librdkafka's admin client, so that the service
/// can subscribe before kbench starts.
pub fn create_topics(bootstrap: &str, topics: &[&str], partitions: i32) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("librdkafka admin client");
    let new: Vec<NewTopic> = topics
        .iter()
        .map(|t| NewTopic::new(t, partitions, TopicReplication::Fixed(1)))
        .collect();
    let results = crate::common::runtime()
        .block_on(admin.create_topics(&new, &AdminOptions::new()))
        .expect("create topics");
    for r in results {
        r.unwrap_or_else(|(t, e)| panic!("create topic {t}: {e}"));
    }
}
