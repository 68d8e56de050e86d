//! The producer's delivery settings (`acks`, time-outs, retries, idempotence), as Kafka names them.
//! The engine that delivers batches with them is [`crate::producer`].

use std::time::Duration;

/// Kafka's `acks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Acks {
    /// acks=0: no response; a request counts as delivered once written.
    None,
    /// acks=1: the leader has written it.
    Leader,
    /// acks=all (-1): every in-sync replica has it.
    All,
}

impl Acks {
    pub fn wire_value(self) -> i16 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }

    /// The spelling of `acks` users know: 0, 1 or all.
    pub fn name(self) -> &'static str {
        match self {
            Acks::None => "0",
            Acks::Leader => "1",
            Acks::All => "all",
        }
    }
}

impl std::str::FromStr for Acks {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "0" => Ok(Acks::None),
            "1" => Ok(Acks::Leader),
            "all" | "-1" => Ok(Acks::All),
            other => Err(format!("unknown acks {other:?} (expected 0, 1, all or -1)")),
        }
    }
}

/// Delivery settings for produce requests. The default is Kafka's producer's (see
/// [`ProducerSettings`](crate::ProducerSettings)).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProducerConfig {
    pub acks: Acks,
    /// The broker-side timeout carried in the request (`request.timeout.ms`).
    pub request_timeout: Duration,
    /// Retries after the first attempt (`retries`).
    pub retries: u32,
    /// Wait between attempts (`retry.backoff.ms`).
    pub retry_backoff: Duration,
    /// Upper bound from first send to final outcome (`delivery.timeout.ms`).
    pub delivery_timeout: Duration,
    /// Batches carry a producer id and sequence numbers (`enable.idempotence`): the broker's
    /// DUPLICATE_SEQUENCE_NUMBER for a retried batch means it already holds it (acknowledged), and
    /// OUT_OF_ORDER_SEQUENCE_NUMBER behind a retried batch is retried, as Java's sender does.
    #[serde(default)]
    pub idempotent: bool,
    /// Bytes of closed batches the producer holds queued or in flight before a new batch waits
    /// (`buffer.memory`; librdkafka's `queue.buffering.max.kbytes`, in KiB).
    #[serde(default = "default_buffer_memory")]
    pub buffer_memory: usize,
}

/// Java's producer's `buffer.memory` default: 32 MiB.
pub const BUFFER_MEMORY: usize = 32 * 1024 * 1024;

fn default_buffer_memory() -> usize {
    BUFFER_MEMORY
}

impl Default for ProducerConfig {
    fn default() -> Self {
        crate::ProducerSettings::default()
            .delivery(crate::ConnectionSettings::default().request_timeout)
    }
}
