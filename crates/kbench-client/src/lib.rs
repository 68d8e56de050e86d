//! Tokio I/O and the Kafka conversations kbench needs: one pipelined connection per broker,
//! ApiVersions negotiation on connect, metadata and leader routing, topic creation, produce with
//! retries, idempotent and transactional producers, fetch, and the classic consumer-group
//! conversation.
//!
//! Bytes are made and read by `kbench-wire`; this crate never times or counts anything for a result
//! (that is `kbench-bench`'s job): it only moves requests and says what happened to them.

pub mod cluster;
pub mod config;
pub mod connection;
pub mod error;
pub mod fetch;
pub mod group;
pub mod partitioner;
pub mod produce;
pub mod sasl;
pub mod security;
pub mod txn;

pub use cluster::{Cluster, ClusterConfig, PartitionLeader, TopicLayout};
pub use config::{
    ConsumerSettings, OffsetReset, ProducerSettings, PropertyError, is_secret, split_property,
};
pub use connection::Connection;
pub use error::ClientError;
pub use fetch::FetchedPartition;
pub use group::{GroupConfig, GroupMember, Membership};
pub use produce::{Acks, ProduceOutcome, ProducerConfig};
pub use sasl::{Sasl, SaslMechanism, SaslSettings, Secret};
pub use security::{SecurityProtocol, SecuritySettings, Tls, TlsSettings};
pub use txn::{ProducerIdentity, Transactions};
