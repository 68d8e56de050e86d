//! Kafka bytes for kbench: request/response framing, ApiVersions ranges and version pinning, and the
//! hand-written RecordBatch v2 codec with its compression formats.
//!
//! This crate never does I/O: it turns values into bytes and bytes into values, nothing else. Every
//! request and response body goes through the `kafka-protocol` crate with an explicit version; the
//! record batch (opaque bytes to `kafka-protocol`) is kbench's own hot path.

pub mod alloc;
pub mod batch;
pub mod compression;
pub mod fetch;
pub mod frame;
pub mod produce_frame;
pub mod records;
pub mod varint;
pub mod versions;

pub use batch::{BatchProducer, RecordBatchBuilder, RecordHeader};
pub use compression::Compression;
pub use frame::{FrameError, decode_response, decode_response_tolerant, encode_request};
pub use kafka_protocol;
pub use kafka_protocol::messages::ApiKey;
pub use produce_frame::{ProduceFrameError, ProduceHead, TopicRef, encode_produce_frame};
pub use records::{BatchDecoder, BatchHeader, DecodeError, RecordView, first_gap};
pub use versions::{ApiRanges, Negotiated, PinError, Pins, VersionError, api_name, kbench_range};
