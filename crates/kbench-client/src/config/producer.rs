//! How a producer batches and delivers: Java's producer settings and their defaults (Kafka 4.x),
//! by the names Java and librdkafka users know. Plain data: a spec holds them whole and sends them
//! to agents; the engine's options and delivery settings are derived from them.

use std::time::Duration;

use kbench_wire::Compression;

use super::{Conflict, PropertyError};
use crate::produce::{Acks, ProducerConfig};
use crate::producer::ProducerOptions;

/// Java's `retry.backoff.ms` default.
pub const RETRY_BACKOFF: Duration = Duration::from_millis(100);

/// Producer settings with their Java defaults (Kafka 4.x).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProducerSettings {
    pub acks: Acks,
    pub compression: Compression,
    /// Upper bound of a batch's uncompressed size (`batch.size`).
    pub batch_size: usize,
    /// The largest Produce request (`max.request.size`; librdkafka's `message.max.bytes`): ready
    /// batches of several partitions share a request up to this size.
    pub max_request_size: usize,
    /// How long a batch may wait for more records (`linger.ms`).
    pub linger: Duration,
    /// Requests in flight per broker connection (`max.in.flight.requests.per.connection`).
    pub max_in_flight: usize,
    pub retries: u32,
    pub retry_backoff: Duration,
    /// Upper bound from a batch's opening to its outcome (`delivery.timeout.ms`).
    pub delivery_timeout: Duration,
    /// `enable.idempotence`: batches carry a producer id (InitProducerId) and per-partition
    /// sequence numbers, so the broker drops a retried batch it already holds. Off by default, as
    /// in librdkafka (Java turned it on in 3.0; kbench's figures stay comparable with earlier runs).
    /// A `transactional_id` implies it ([`ProducerSettings::idempotent`]).
    pub idempotence: bool,
    /// `transactional.id`: records go in transactions (InitProducerId at the transaction
    /// coordinator, AddPartitionsToTxn, EndTxn).
    pub transactional_id: Option<String>,
    /// `buffer.memory` (librdkafka: `queue.buffering.max.kbytes`): bytes of closed batches held
    /// queued or in flight before a new batch waits.
    pub buffer_memory: usize,
}

impl Default for ProducerSettings {
    fn default() -> Self {
        ProducerSettings {
            acks: Acks::All,
            compression: Compression::None,
            batch_size: 16_384,
            max_request_size: 1_048_576,
            linger: Duration::from_millis(5),
            max_in_flight: super::MAX_IN_FLIGHT,
            retries: i32::MAX as u32,
            retry_backoff: RETRY_BACKOFF,
            delivery_timeout: Duration::from_millis(120_000),
            idempotence: false,
            transactional_id: None,
            buffer_memory: crate::produce::BUFFER_MEMORY,
        }
    }
}

impl ProducerSettings {
    /// Apply one property if it is a producer's: `Ok(false)` leaves any other key to the caller.
    pub fn apply(&mut self, flag: &str, key: &str, value: &str) -> Result<bool, PropertyError> {
        let bad = |what: &str| PropertyError::value(flag, key, value, what);
        let ms = |v: &str| -> Result<Duration, PropertyError> {
            v.parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| bad("expected a whole number of milliseconds"))
        };
        let count = |v: &str| -> Result<u64, PropertyError> {
            v.parse::<u64>().map_err(|_| bad("expected a whole number"))
        };
        match key {
            "acks" | "request.required.acks" => {
                self.acks = value.parse().map_err(|e: String| bad(&e))?
            }
            "compression.type" | "compression.codec" => {
                self.compression = value.parse().map_err(|e: String| bad(&e))?
            }
            "batch.size" => self.batch_size = count(value)?.max(1) as usize,
            "max.request.size" | "message.max.bytes" => {
                let n = count(value)?;
                if n == 0 || n > i32::MAX as u64 {
                    return Err(bad("must be between 1 and 2147483647 bytes"));
                }
                self.max_request_size = n as usize;
            }
            "linger.ms" | "queue.buffering.max.ms" => self.linger = ms(value)?,
            "buffer.memory" => {
                let n = count(value)?;
                if n == 0 || n > usize::MAX as u64 {
                    return Err(bad("must be at least 1 byte"));
                }
                self.buffer_memory = n as usize;
            }
            "queue.buffering.max.kbytes" => {
                let n = count(value)?;
                if n == 0 || n > (usize::MAX / 1024) as u64 {
                    return Err(bad("must be at least 1 KiB"));
                }
                self.buffer_memory = n as usize * 1024;
            }
            "max.in.flight.requests.per.connection" | "max.in.flight" => {
                let n = count(value)?;
                if n == 0 {
                    return Err(bad("must be at least 1"));
                }
                self.max_in_flight = n as usize;
            }
            "retries" | "message.send.max.retries" => {
                self.retries = count(value)?.min(u64::from(u32::MAX)) as u32
            }
            "retry.backoff.ms" => self.retry_backoff = ms(value)?,
            "delivery.timeout.ms" | "message.timeout.ms" => self.delivery_timeout = ms(value)?,
            "transactional.id" => {
                if value.is_empty() {
                    return Err(bad("must not be empty"));
                }
                self.transactional_id = Some(value.to_string());
            }
            "enable.idempotence" => {
                self.idempotence = match value.to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(bad("expected true or false")),
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Whether `key` is a producer property.
    pub fn takes(key: &str) -> bool {
        // Applied to a scratch copy: any answer but "not mine" (a bad empty value included) says
        // the key is a producer's, so the key list stays in `apply` alone.
        !matches!(Self::default().apply("", key, ""), Ok(false))
    }

    /// Whether batches carry a producer id and sequences: `enable.idempotence`, or a
    /// `transactional.id` (Java: a transactional producer is an idempotent one).
    pub fn idempotent(&self) -> bool {
        self.idempotence || self.transactional_id.is_some()
    }

    /// The combinations Java's producer refuses (ConfigException), and kbench with it.
    pub fn check(&self) -> Result<(), Conflict> {
        if !self.idempotent() {
            return Ok(());
        }
        let who = if self.transactional_id.is_some() {
            "transactional.id (an idempotent producer)"
        } else {
            "enable.idempotence=true"
        };
        let needs = |key: &'static str, what: &str| Conflict {
            key,
            reason: format!("{who} needs {what}"),
        };
        if self.acks != Acks::All {
            return Err(needs("acks", "acks=all"));
        }
        if self.max_in_flight > 5 {
            return Err(needs(
                "max.in.flight.requests.per.connection",
                "max.in.flight.requests.per.connection of at most 5",
            ));
        }
        if self.retries == 0 {
            return Err(needs("retries", "retries above 0"));
        }
        Ok(())
    }

    /// The delivery settings, with the connection's `request.timeout.ms`.
    pub fn delivery(&self, request_timeout: Duration) -> ProducerConfig {
        ProducerConfig {
            acks: self.acks,
            request_timeout,
            retries: self.retries,
            retry_backoff: self.retry_backoff,
            delivery_timeout: self.delivery_timeout,
            idempotent: self.idempotent(),
            buffer_memory: self.buffer_memory,
        }
    }

    /// The engine's options: batches by `batch.size` and `linger.ms`, one open batch at a time.
    pub fn engine_options(&self, request_timeout: Duration) -> ProducerOptions {
        ProducerOptions {
            delivery: self.delivery(request_timeout),
            compression: self.compression,
            batch_size: self.batch_size,
            records_per_batch: None,
            linger: self.linger,
            max_in_flight: self.max_in_flight.max(1),
            max_request_size: self.max_request_size.max(1),
            per_partition: false,
            transactional_id: self.transactional_id.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_and_librdkafka_names_both_work() {
        let mut s = ProducerSettings::default();
        for (k, v) in [
            ("acks", "1"),
            ("compression.codec", "lz4"),
            ("queue.buffering.max.ms", "20"),
            ("max.in.flight.requests.per.connection", "3"),
        ] {
            assert_eq!(s.apply("-X", k, v), Ok(true), "{k}");
        }
        assert_eq!(s.acks, Acks::Leader);
        assert_eq!(s.compression, Compression::Lz4);
        assert_eq!(s.linger, Duration::from_millis(20));
        assert_eq!(s.max_in_flight, 3);
        assert_eq!(s.apply("-X", "nosuch", "1"), Ok(false));
        assert!(
            ProducerSettings::takes("linger.ms") && ProducerSettings::takes("transactional.id")
        );
        assert!(!ProducerSettings::takes("client.id") && !ProducerSettings::takes("group.id"));
    }

    #[test]
    fn buffer_memory_in_bytes_or_librdkafkas_kib() {
        let mut s = ProducerSettings::default();
        assert_eq!(s.buffer_memory, 32 * 1024 * 1024);
        s.apply("-X", "buffer.memory", "1000").unwrap();
        assert_eq!(s.delivery(Duration::ZERO).buffer_memory, 1000);
        s.apply("-X", "queue.buffering.max.kbytes", "2").unwrap();
        assert_eq!(s.delivery(Duration::ZERO).buffer_memory, 2048);
        let err = s.apply("-X", "buffer.memory", "0").unwrap_err().to_string();
        assert!(err.contains("buffer.memory"), "{err}");
    }

    #[test]
    fn bad_values_name_the_key() {
        let err = ProducerSettings::default()
            .apply("--producer-props", "linger.ms", "soon")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("linger.ms") && err.contains("--producer-props"),
            "{err}"
        );
    }

    #[test]
    fn idempotence_needs_what_java_needs() {
        let idempotent = ProducerSettings {
            idempotence: true,
            ..ProducerSettings::default()
        };
        assert_eq!(idempotent.check(), Ok(()));
        for (key, broken) in [
            (
                "acks",
                ProducerSettings {
                    acks: Acks::Leader,
                    ..idempotent.clone()
                },
            ),
            (
                "max.in.flight.requests.per.connection",
                ProducerSettings {
                    max_in_flight: 6,
                    ..idempotent.clone()
                },
            ),
            (
                "retries",
                ProducerSettings {
                    retries: 0,
                    ..idempotent.clone()
                },
            ),
            (
                "acks",
                ProducerSettings {
                    acks: Acks::None,
                    transactional_id: Some("t".into()),
                    ..ProducerSettings::default()
                },
            ),
        ] {
            assert_eq!(broken.check().unwrap_err().key, key);
        }
        let transactional = ProducerSettings {
            transactional_id: Some("t".into()),
            ..ProducerSettings::default()
        };
        assert!(transactional.idempotent() && transactional.delivery(Duration::ZERO).idempotent);
        // Without idempotence anything goes.
        assert_eq!(
            ProducerSettings {
                acks: Acks::None,
                max_in_flight: 50,
                ..ProducerSettings::default()
            }
            .check(),
            Ok(())
        );
    }
}
