//! Tokio I/O and the Kafka conversations kbench needs: one pipelined connection per broker,
//! ApiVersions negotiation on connect, metadata and leader routing, topic creation, the producer
//! engine (batches per partition that follow their leaders), idempotent and transactional
//! producers, fetch, and the classic consumer-group conversation.
//!
//! Bytes are made and read by `kbench-wire`; this crate never times the workload (that is
//! `kbench-bench`'s job): it moves requests, says what happened to them, and records what the
//! cluster did ([`events`]).

pub mod cluster;
pub mod config;
pub mod connection;
pub mod consumer;
pub mod error;
pub mod events;
pub mod fetch;
pub mod group;
/// The assignors, where they were before the group module gathered them.
pub use group::assignor;
pub mod input;
pub mod partitioner;
pub mod produce;
pub mod producer;
pub mod sasl;
pub mod security;
pub mod txn;

pub use cluster::{
    Cluster, ClusterConfig, PartitionLeader, Purpose, TopicLayout, create_topics_request,
};
pub use config::{
    Conflict, ConnectionSettings, ConsumerProperties, ConsumerSettings, OffsetReset,
    ProducerProperties, ProducerSettings, PropertyError, is_connection_property, is_secret,
    is_serializer_property, redacted, split_property,
};
pub use connection::Connection;
pub use consumer::{Consumer, ConsumerOptions, Fetched, FetchedPart};
pub use error::{ClientError, ErrorClass};
pub use events::{ClusterEvents, LeaderChange, Stall};
pub use fetch::FetchedPartition;
pub use group::{
    Assigned, Commits, Committed, GroupConfig, GroupConsumer, GroupCounters, GroupMember, JoinInfo,
    MemberEnd, Membership, Polled, Revoked, SessionSettings, StartFrom, StartPolicy,
};
pub use produce::{Acks, ProducerConfig};
pub use producer::{Acked, Delivery, OpenBatch, Outcome, Producer, ProducerOptions, Until};
pub use sasl::{Sasl, SaslMechanism, SaslSettings, Secret};
pub use security::{SecurityProtocol, SecuritySettings, Tls, TlsSettings};
pub use txn::{ProducerIdentity, Transactions};
