//! A producer's identity and transactions: InitProducerId (idempotent and transactional produce),
//! and, with a `transactional.id`, the transaction coordinator's AddPartitionsToTxn and EndTxn.
//!
//! The batches themselves are stamped by `kbench-wire` ([`kbench_wire::BatchProducer`]); the
//! sequence numbers are the caller's, per partition, as Java's producer keeps them.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, EndTxnRequest, EndTxnResponse,
    InitProducerIdRequest, InitProducerIdResponse, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kbench_wire::ApiKey;

use crate::cluster::Cluster;
use crate::connection::Connection;
use crate::error::ClientError;

/// The id and epoch a broker gave a producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProducerIdentity {
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// Error codes a transaction coordinator answers while it is busy or moving: wait and ask again.
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;
const CONCURRENT_TRANSACTIONS: i16 = 51;
/// How often, and how far apart, a busy coordinator is asked again.
const BUSY_ATTEMPTS: u32 = 50;
const BUSY_WAIT: Duration = Duration::from_millis(100);

fn busy(code: i16) -> bool {
    matches!(
        code,
        COORDINATOR_LOAD_IN_PROGRESS
            | COORDINATOR_NOT_AVAILABLE
            | NOT_COORDINATOR
            | CONCURRENT_TRANSACTIONS
    )
}

/// Ask (`ask` sends the request once) until the answer's error code — `code` reads it — is not a
/// busy coordinator's, or the attempts run out: the last answer.
async fn until_settled<R, Fut>(
    mut ask: impl FnMut() -> Fut,
    code: impl Fn(&R) -> i16,
) -> Result<R, ClientError>
where
    Fut: std::future::Future<Output = Result<R, ClientError>>,
{
    let mut attempts = 0;
    loop {
        attempts += 1;
        let response = ask().await?;
        if busy(code(&response)) && attempts < BUSY_ATTEMPTS {
            tokio::time::sleep(BUSY_WAIT).await;
            continue;
        }
        return Ok(response);
    }
}

/// A transactional producer: its id, the coordinator that keeps its transactions, and whether a
/// transaction is open.
pub struct Transactions {
    transactional_id: String,
    identity: ProducerIdentity,
    coordinator: Arc<Connection>,
}

impl Cluster {
    /// InitProducerId for an idempotent producer (no transactional id): any broker answers.
    pub async fn init_producer_id(&self) -> Result<ProducerIdentity, ClientError> {
        let conn = self.control_connection().await?;
        init_on(self, &conn, None, Duration::ZERO).await
    }

    /// A transactional producer: the coordinator of `transactional_id` found, and InitProducerId
    /// asked of it (which fences an earlier producer with the same id and aborts what it left open).
    pub async fn init_transactions(
        &self,
        transactional_id: &str,
        transaction_timeout: Duration,
    ) -> Result<Transactions, ClientError> {
        let coordinator = crate::group::find_coordinator_of(self, transactional_id, 1).await?;
        let identity = init_on(
            self,
            &coordinator,
            Some(transactional_id),
            transaction_timeout,
        )
        .await?;
        Ok(Transactions {
            transactional_id: transactional_id.to_string(),
            identity,
            coordinator,
        })
    }
}

async fn init_on(
    cluster: &Cluster,
    conn: &Connection,
    transactional_id: Option<&str>,
    transaction_timeout: Duration,
) -> Result<ProducerIdentity, ClientError> {
    let version = cluster.version_on(conn, ApiKey::InitProducerId)?;
    let request = InitProducerIdRequest::default()
        .with_transactional_id(transactional_id.map(|t| TransactionalId(str_bytes(t))))
        .with_transaction_timeout_ms(transaction_timeout.as_millis().min(i32::MAX as u128) as i32)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let what = match transactional_id {
        Some(t) => format!("transactional.id {t:?}"),
        None => "an idempotent producer".to_string(),
    };
    let response: InitProducerIdResponse = until_settled(
        || conn.request_at(ApiKey::InitProducerId, version, &request),
        |r: &InitProducerIdResponse| r.error_code,
    )
    .await?;
    if response.error_code != 0 {
        return Err(ClientError::kafka(
            "InitProducerId",
            what,
            response.error_code,
        ));
    }
    if response.producer_id.0 < 0 {
        return Err(ClientError::Other(format!(
            "InitProducerId for {what}: the broker answered producer id {} without an error",
            response.producer_id.0
        )));
    }
    Ok(ProducerIdentity {
        producer_id: response.producer_id.0,
        producer_epoch: response.producer_epoch,
    })
}

impl Transactions {
    pub fn identity(&self) -> ProducerIdentity {
        self.identity
    }

    pub fn transactional_id(&self) -> &str {
        &self.transactional_id
    }

    /// AddPartitionsToTxn: `partitions` of `topic` join the open transaction (before any batch of
    /// the transaction is sent to them).
    pub async fn add_partitions(
        &self,
        cluster: &Cluster,
        topic: &str,
        partitions: &[i32],
    ) -> Result<(), ClientError> {
        // v4 and later are for brokers (KIP-890); a client speaks v3 at most.
        let version = cluster
            .version_on(&self.coordinator, ApiKey::AddPartitionsToTxn)?
            .min(3);
        let request = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(str_bytes(&self.transactional_id)))
            .with_v3_and_below_producer_id(ProducerId(self.identity.producer_id))
            .with_v3_and_below_producer_epoch(self.identity.producer_epoch)
            .with_v3_and_below_topics(vec![
                AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(str_bytes(topic)))
                    .with_partitions(partitions.to_vec()),
            ]);
        // Each partition's code; a partition refused for good outweighs one merely busy.
        let codes = |r: &AddPartitionsToTxnResponse| -> Vec<(i32, i16)> {
            let mut codes: Vec<(i32, i16)> = r
                .results_by_topic_v3_and_below
                .iter()
                .flat_map(|t| t.results_by_partition.iter())
                .map(|p| (p.partition_index, p.partition_error_code))
                .filter(|(_, code)| *code != 0)
                .collect();
            codes.sort_by_key(|(_, code)| busy(*code));
            codes
        };
        let response = until_settled(
            || {
                self.coordinator
                    .request_at(ApiKey::AddPartitionsToTxn, version, &request)
            },
            |r| codes(r).first().map_or(0, |(_, code)| *code),
        )
        .await?;
        match codes(&response).first() {
            Some((partition, code)) => Err(ClientError::kafka(
                "AddPartitionsToTxn",
                format!("{topic}-{partition}"),
                *code,
            )),
            None => Ok(()),
        }
    }

    /// EndTxn: commit (`true`) or abort the open transaction. Every batch of it must have been
    /// answered first.
    pub async fn end(&self, cluster: &Cluster, commit: bool) -> Result<(), ClientError> {
        let version = cluster.version_on(&self.coordinator, ApiKey::EndTxn)?;
        let request = EndTxnRequest::default()
            .with_transactional_id(TransactionalId(str_bytes(&self.transactional_id)))
            .with_producer_id(ProducerId(self.identity.producer_id))
            .with_producer_epoch(self.identity.producer_epoch)
            .with_committed(commit);
        let response: EndTxnResponse = until_settled(
            || {
                self.coordinator
                    .request_at(ApiKey::EndTxn, version, &request)
            },
            |r: &EndTxnResponse| r.error_code,
        )
        .await?;
        if response.error_code != 0 {
            return Err(ClientError::kafka(
                "EndTxn",
                format!("transactional.id {:?}", self.transactional_id),
                response.error_code,
            ));
        }
        Ok(())
    }
}

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}
