//! Produce one finished record batch to its partition's leader, with Kafka's delivery semantics:
//! retriable errors and lost connections are retried after a back-off, re-routing when leadership
//! moved, until `retries` or `delivery.timeout.ms` runs out.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kbench_wire::ApiKey;

use crate::cluster::{Cluster, TopicLayout};
use crate::error::ClientError;

/// Kafka's `acks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
#[derive(Debug, Clone, PartialEq)]
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
}

impl Default for ProducerConfig {
    fn default() -> Self {
        crate::ProducerSettings::default().producer_config()
    }
}

/// What became of one batch.
#[derive(Debug, Clone)]
pub enum ProduceOutcome {
    /// Acknowledged (or, with acks=0, written); `base_offset` is -1 when the broker did not say.
    Acked { base_offset: i64, attempts: u32 },
    /// Given up on; every record in the batch counts as failed.
    Failed { error: ClientError, attempts: u32 },
}

impl Cluster {
    /// Deliver `batch` to `partition` of `topic`, retrying per `config`. Never panics and never
    /// loses track of the batch: the outcome is either acknowledged or failed.
    pub async fn produce_batch(
        &self,
        config: &ProducerConfig,
        topic: &TopicLayout,
        partition: i32,
        batch: Bytes,
    ) -> ProduceOutcome {
        let started = Instant::now();
        let mut leader = topic.leader(partition);
        let mut attempts = 0;
        loop {
            attempts += 1;
            let result = match leader {
                Some(node) => {
                    self.produce_once(config, topic, partition, node, batch.clone())
                        .await
                }
                None => Err(ClientError::kafka(
                    "Produce",
                    format!("{}-{partition}", topic.name),
                    5,
                )),
            };
            let error = match result {
                Ok(base_offset) => {
                    return ProduceOutcome::Acked {
                        base_offset,
                        attempts,
                    };
                }
                Err(e) => e,
            };
            let out_of_time = started.elapsed() + config.retry_backoff >= config.delivery_timeout;
            if !error.is_retriable() || attempts > config.retries || out_of_time {
                return ProduceOutcome::Failed { error, attempts };
            }
            tracing::debug!(%error, attempts, "produce retry");
            tokio::time::sleep(config.retry_backoff).await;
            if let ClientError::Kafka { .. } | ClientError::Disconnected { .. } = error
                && let Ok((_, fresh)) = self.metadata(&topic.name).await
            {
                leader = fresh.leader(partition);
            }
        }
    }

    async fn produce_once(
        &self,
        config: &ProducerConfig,
        topic: &TopicLayout,
        partition: i32,
        node: i32,
        batch: Bytes,
    ) -> Result<i64, ClientError> {
        let conn = self.connection(node).await?;
        let version = self.version_on(&conn, ApiKey::Produce)?;
        let topic_ref = if version >= 13 {
            kbench_wire::TopicRef::Id(*topic.topic_id.as_bytes())
        } else {
            kbench_wire::TopicRef::Name(&topic.name)
        };
        let answered = config.acks != Acks::None;
        let response = conn
            .produce(
                version,
                config.acks.wire_value(),
                config.request_timeout.as_millis() as i32,
                topic_ref,
                partition,
                batch,
                answered,
            )
            .await?;
        let Some(response) = response else {
            return Ok(-1);
        };
        // Named only when something went wrong: no formatting on the hot path.
        let what = || format!("{}-{partition}", topic.name);
        let p = response
            .responses
            .iter()
            .flat_map(|t| t.partition_responses.iter())
            .find(|p| p.index == partition)
            .ok_or_else(|| {
                ClientError::Other(format!("Produce response did not mention {}", what()))
            })?;
        if p.error_code != 0 {
            return Err(ClientError::kafka("Produce", what(), p.error_code));
        }
        Ok(p.base_offset)
    }
}
