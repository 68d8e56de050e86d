//! Produce one finished record batch to its partition's leader, with Kafka's delivery semantics:
//! retriable errors and lost connections are retried after a back-off, re-routing when leadership
//! moved, until `retries` or `delivery.timeout.ms` runs out.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kbench_wire::ApiKey;

use crate::cluster::{Cluster, TopicLayout};
use crate::error::ClientError;

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
    /// `duplicate`: an idempotent batch the broker already held (DUPLICATE_SEQUENCE_NUMBER on a
    /// retry whose earlier attempt was written but not answered).
    Acked {
        base_offset: i64,
        attempts: u32,
        duplicate: bool,
    },
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
        self.deliver(config, topic, partition, batch, Instant::now(), 0, None)
            .await
    }

    /// Deliver one batch per partition (distinct partitions of `topic`, one leader) in one Produce
    /// request, as Java's sender drains every ready partition of a broker into one request. A
    /// partition whose part fails retriably is retried alone, within the same delivery timeout.
    /// One outcome per batch, in order.
    pub async fn produce_batches(
        &self,
        config: &ProducerConfig,
        topic: &TopicLayout,
        batches: Vec<(i32, Bytes)>,
    ) -> Vec<ProduceOutcome> {
        let started = Instant::now();
        if batches.len() == 1 {
            let (partition, batch) = batches.into_iter().next().expect("one batch");
            return vec![
                self.deliver(config, topic, partition, batch, started, 0, None)
                    .await,
            ];
        }
        let first = match topic.leader(batches[0].0) {
            Some(node) => self.produce_once(config, topic, node, &batches).await,
            None => Err(no_leader(topic, batches[0].0)),
        };
        let results: Vec<Result<Ack, ClientError>> = match first {
            Ok(per_partition) => per_partition,
            Err(e) => batches.iter().map(|_| Err(e.clone())).collect(),
        };
        let mut outcomes = Vec::with_capacity(batches.len());
        for ((partition, batch), result) in batches.into_iter().zip(results) {
            let outcome = match result {
                Ok(ack) => ProduceOutcome::Acked {
                    base_offset: ack.base_offset,
                    attempts: 1,
                    duplicate: ack.duplicate,
                },
                Err(error) => {
                    self.deliver(config, topic, partition, batch, started, 1, Some(error))
                        .await
                }
            };
            outcomes.push(outcome);
        }
        outcomes
    }

    /// The retry loop: `attempts` were made since `started`, the last failing with `error`.
    #[allow(clippy::too_many_arguments)]
    async fn deliver(
        &self,
        config: &ProducerConfig,
        topic: &TopicLayout,
        partition: i32,
        batch: Bytes,
        started: Instant,
        mut attempts: u32,
        mut error: Option<ClientError>,
    ) -> ProduceOutcome {
        let mut leader = topic.leader(partition);
        loop {
            if let Some(error) = error.take() {
                let out_of_time =
                    started.elapsed() + config.retry_backoff >= config.delivery_timeout;
                // Behind a retried batch, an idempotent batch arrives out of order: Java's sender
                // retries it, and so does this loop (the delivery timeout still bounds it).
                let retriable = error.is_retriable()
                    || (config.idempotent && error.code() == Some(OUT_OF_ORDER_SEQUENCE_NUMBER));
                if !retriable || attempts > config.retries || out_of_time {
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
            attempts += 1;
            let result = match leader {
                Some(node) => {
                    let one = [(partition, batch.clone())];
                    self.produce_once(config, topic, node, &one)
                        .await
                        .and_then(|mut r| r.pop().expect("one result"))
                }
                None => Err(no_leader(topic, partition)),
            };
            match result {
                Ok(ack) => {
                    return ProduceOutcome::Acked {
                        base_offset: ack.base_offset,
                        attempts,
                        duplicate: ack.duplicate,
                    };
                }
                Err(e) => error = Some(e),
            }
        }
    }

    /// One Produce request to `node`; the request's own failure is the error, else each batch's
    /// result (its base offset, or its partition's error), in order.
    async fn produce_once(
        &self,
        config: &ProducerConfig,
        topic: &TopicLayout,
        node: i32,
        batches: &[(i32, Bytes)],
    ) -> Result<Vec<Result<Ack, ClientError>>, ClientError> {
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
                batches,
                answered,
            )
            .await?;
        let Some(response) = response else {
            return Ok(batches
                .iter()
                .map(|_| {
                    Ok(Ack {
                        base_offset: -1,
                        duplicate: false,
                    })
                })
                .collect());
        };
        // Named only when something went wrong: no formatting on the hot path.
        let what = |partition: i32| format!("{}-{partition}", topic.name);
        let answers: Vec<_> = response
            .responses
            .iter()
            .flat_map(|t| t.partition_responses.iter())
            .collect();
        Ok(batches
            .iter()
            .map(|(partition, _)| {
                let p = answers
                    .iter()
                    .find(|p| p.index == *partition)
                    .ok_or_else(|| {
                        ClientError::Other(format!(
                            "Produce response did not mention {}",
                            what(*partition)
                        ))
                    })?;
                if config.idempotent && p.error_code == DUPLICATE_SEQUENCE_NUMBER {
                    return Ok(Ack {
                        base_offset: -1,
                        duplicate: true,
                    });
                }
                if p.error_code != 0 {
                    return Err(ClientError::kafka(
                        "Produce",
                        what(*partition),
                        p.error_code,
                    ));
                }
                Ok(Ack {
                    base_offset: p.base_offset,
                    duplicate: false,
                })
            })
            .collect())
    }
}

/// One partition's answer to a Produce request.
struct Ack {
    base_offset: i64,
    duplicate: bool,
}

/// OUT_OF_ORDER_SEQUENCE_NUMBER: an idempotent batch's sequence is past the next one expected.
const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
/// DUPLICATE_SEQUENCE_NUMBER: the broker already holds an idempotent batch with this sequence.
const DUPLICATE_SEQUENCE_NUMBER: i16 = 46;

fn no_leader(topic: &TopicLayout, partition: i32) -> ClientError {
    // LEADER_NOT_AVAILABLE: retriable, and a metadata refresh may name one.
    ClientError::kafka("Produce", format!("{}-{partition}", topic.name), 5)
}
