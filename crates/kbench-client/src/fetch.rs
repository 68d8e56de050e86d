//! Fetch partitions from their leaders at the negotiated (or pinned) Fetch version: names before
//! v13, topic ids from v13 (KIP-516).

use bytes::Bytes;
use kafka_protocol::messages::FetchRequest;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kbench_wire::ApiKey;

use crate::cluster::{Cluster, TopicLayout, topic_name};
use crate::error::ClientError;

/// One partition's share of a Fetch response.
#[derive(Debug, Clone)]
pub struct FetchedPartition {
    /// The partition's high watermark; -1 when the response did not say.
    pub high_watermark: i64,
    /// The record batches, as the broker sent them (possibly empty).
    pub records: Bytes,
    /// Read committed: the aborted transactions among the records, as (producer id, first offset)
    /// — what [`kbench_wire::records::AbortedFilter`] leaves out. Empty otherwise.
    pub aborted: Vec<(i64, i64)>,
}

impl FetchedPartition {
    /// A partition's share of a Fetch response.
    pub(crate) fn of(p: kafka_protocol::messages::fetch_response::PartitionData) -> Self {
        FetchedPartition {
            high_watermark: p.high_watermark,
            records: p.records.unwrap_or_default(),
            aborted: p
                .aborted_transactions
                .unwrap_or_default()
                .iter()
                .map(|a| (a.producer_id.0, a.first_offset))
                .collect(),
        }
    }
}

impl Cluster {
    /// Fetch `partition` from `offset`, waiting up to `max_wait_ms` for at least one byte. A
    /// response that does not mention the partition is an empty answer (brokers may leave out
    /// partitions with nothing to say; the upstream Tansu broker answers a Fetch with `max_wait_ms`
    /// 0 without any topic at all): no records, and a high watermark of -1 (unknown).
    pub async fn fetch(
        &self,
        topic: &TopicLayout,
        partition: i32,
        offset: i64,
        max_bytes: i32,
        max_wait_ms: i32,
    ) -> Result<FetchedPartition, ClientError> {
        Ok(self
            .fetch_partitions(
                topic,
                &[(partition, offset)],
                max_bytes,
                max_bytes,
                max_wait_ms,
            )
            .await?
            .into_iter()
            .find(|(p, _)| *p == partition)
            .map(|(_, f)| f)
            .unwrap_or(FetchedPartition {
                high_watermark: -1,
                records: Bytes::new(),
                aborted: Vec::new(),
            }))
    }
}

impl Cluster {
    /// Fetch several partitions of `topic` at once: one request per leader, each partition from its
    /// own offset. Answers come back in no particular order, at most one per partition asked (a
    /// partition the broker left out of its response is not in the answer); a partition error fails
    /// the whole call (the caller decides whether to retry).
    pub async fn fetch_partitions(
        &self,
        topic: &TopicLayout,
        positions: &[(i32, i64)],
        partition_max_bytes: i32,
        max_bytes: i32,
        max_wait_ms: i32,
    ) -> Result<Vec<(i32, FetchedPartition)>, ClientError> {
        self.fetch_partitions_isolated(
            topic,
            positions,
            (partition_max_bytes, max_bytes),
            max_wait_ms,
            false,
        )
        .await
    }

    /// As [`fetch_partitions`](Self::fetch_partitions), `read_committed` (isolation level 1,
    /// `isolation.level=read_committed`) or not: read committed, the broker answers up to the last
    /// stable offset and lists the aborted transactions in each partition's answer.
    pub async fn fetch_partitions_isolated(
        &self,
        topic: &TopicLayout,
        positions: &[(i32, i64)],
        (partition_max_bytes, max_bytes): (i32, i32),
        max_wait_ms: i32,
        read_committed: bool,
    ) -> Result<Vec<(i32, FetchedPartition)>, ClientError> {
        let mut by_leader: std::collections::BTreeMap<i32, Vec<(i32, i64)>> = Default::default();
        for (p, o) in positions {
            let node = topic
                .leader(*p)
                .ok_or_else(|| ClientError::kafka("Fetch", format!("{}-{p}", topic.name), 5))?;
            by_leader.entry(node).or_default().push((*p, *o));
        }
        let mut out = Vec::with_capacity(positions.len());
        for (node, parts) in by_leader {
            let conn = self.connection(node).await?;
            let version = self.version_for_topic(&conn, ApiKey::Fetch, &topic.topic_id)?;
            let partitions = parts
                .iter()
                .map(|(p, o)| {
                    FetchPartition::default()
                        .with_partition(*p)
                        .with_fetch_offset(*o)
                        .with_partition_max_bytes(partition_max_bytes)
                })
                .collect();
            let mut fetch_topic = FetchTopic::default().with_partitions(partitions);
            fetch_topic = if version >= 13 {
                fetch_topic.with_topic_id(topic.topic_id)
            } else {
                fetch_topic.with_topic(topic_name(&topic.name))
            };
            let request = FetchRequest::default()
                .with_max_wait_ms(max_wait_ms)
                .with_min_bytes(1)
                .with_max_bytes(max_bytes)
                .with_isolation_level(i8::from(read_committed))
                .with_topics(vec![fetch_topic]);
            let (correlation_id, frame) =
                conn.request_frame(ApiKey::Fetch, version, &request).await?;
            let response = kbench_wire::fetch::decode_fetch_frame(version, correlation_id, frame)?;
            if response.error_code != 0 {
                return Err(ClientError::kafka(
                    "Fetch",
                    topic.name.clone(),
                    response.error_code,
                ));
            }
            for p in response
                .responses
                .into_iter()
                .flat_map(|t| t.partitions.into_iter())
            {
                if p.error_code != 0 {
                    return Err(ClientError::kafka(
                        "Fetch",
                        format!("{}-{}", topic.name, p.partition_index),
                        p.error_code,
                    ));
                }
                out.push((p.partition_index, FetchedPartition::of(p)));
            }
        }
        Ok(out)
    }
}
