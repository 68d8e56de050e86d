//! Fetch responses for every version, v4 to v18, from one builder parameterised by the version's
//! traits, and the decoding of a complete response (header, body, record batches) with kbench's own
//! record decoder. The builder checks itself: it decodes what it wrote with kafka-protocol's decoders
//! and fails if a record went missing.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchResponse, ResponseHeader, TopicName};
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_protocol::records::RecordBatchDecoder;

use crate::frame::{FrameError, decode_response, response_header_version};
use crate::records::{BatchDecoder, BatchHeader, DecodeError, RecordView};

/// What distinguishes Fetch response versions, as far as a client decoding them is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchTraits {
    /// v5+: log_start_offset per partition.
    pub log_start_offset: bool,
    /// v7+: top-level error_code and session_id (fetch sessions, KIP-227).
    pub session_id: bool,
    /// v11+: preferred_read_replica per partition.
    pub preferred_read_replica: bool,
    /// v12+: compact strings and arrays, tagged fields, response header v1 (KIP-482).
    pub flexible: bool,
    /// v13+: topics by id, not name (KIP-516).
    pub topic_id: bool,
}

impl FetchTraits {
    pub fn of(version: i16) -> FetchTraits {
        FetchTraits {
            log_start_offset: version >= 5,
            session_id: version >= 7,
            preferred_read_replica: version >= 11,
            flexible: version >= 12,
            topic_id: version >= 13,
        }
    }
}

/// The Fetch versions kbench builds and decodes.
pub const FETCH_VERSIONS: std::ops::RangeInclusive<i16> = 4..=18;

/// A Fetch response that could not be built, or that did not survive its own check.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("Fetch v{version}: {reason}")]
    Encode { version: i16, reason: String },
    #[error("Fetch v{version} self-check: wrote {written} records, the real decoder read {read}")]
    SelfCheck {
        version: i16,
        written: u64,
        read: u64,
    },
}

/// One partition's records in a built response.
#[derive(Debug, Clone)]
pub struct PartitionRecords {
    pub partition: i32,
    pub high_watermark: i64,
    pub records: Bytes,
}

/// Build a complete Fetch response frame body (response header + body, without the size prefix, as
/// a client holds it after reading the frame) for `version`, then check it with kafka-protocol.
pub fn build_fetch_response(
    version: i16,
    correlation_id: i32,
    topic: &str,
    topic_id: uuid::Uuid,
    partitions: &[PartitionRecords],
) -> Result<Bytes, BuildError> {
    let t = FetchTraits::of(version);
    let fail = |reason: String| BuildError::Encode { version, reason };
    let mut topic_response = FetchableTopicResponse::default().with_partitions(
        partitions
            .iter()
            .map(|p| {
                let mut d = PartitionData::default()
                    .with_partition_index(p.partition)
                    .with_high_watermark(p.high_watermark)
                    .with_last_stable_offset(p.high_watermark)
                    .with_aborted_transactions(Some(Vec::new()))
                    .with_records(Some(p.records.clone()));
                if t.log_start_offset {
                    d = d.with_log_start_offset(0);
                }
                if t.preferred_read_replica {
                    d = d.with_preferred_read_replica(BrokerId(-1));
                }
                d
            })
            .collect(),
    );
    topic_response = if t.topic_id {
        topic_response.with_topic_id(topic_id)
    } else {
        topic_response.with_topic(TopicName(StrBytes::from_string(topic.to_string())))
    };
    let mut response = FetchResponse::default().with_responses(vec![topic_response]);
    if t.session_id {
        response = response.with_session_id(1).with_error_code(0);
    }
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let mut out = BytesMut::new();
    header
        .encode(&mut out, response_header_version(ApiKey::Fetch, version))
        .map_err(|e| fail(e.to_string()))?;
    response
        .encode(&mut out, version)
        .map_err(|e| fail(e.to_string()))?;
    let frame = out.freeze();

    // Self-check with the real decoders.
    let written: u64 = partitions
        .iter()
        .map(|p| count_records(&p.records))
        .sum::<Result<u64, DecodeError>>()
        .map_err(|e| fail(format!("input batches: {e}")))?;
    let decoded: FetchResponse =
        decode_response(ApiKey::Fetch, version, correlation_id, frame.clone())
            .map_err(|e| fail(e.to_string()))?;
    let mut read = 0u64;
    for p in decoded.responses.iter().flat_map(|t| t.partitions.iter()) {
        let mut records = p.records.clone().unwrap_or_default();
        if !records.is_empty() {
            let sets =
                RecordBatchDecoder::decode_all(&mut records).map_err(|e| fail(e.to_string()))?;
            read += sets.iter().map(|s| s.records.len() as u64).sum::<u64>();
        }
    }
    if read != written {
        return Err(BuildError::SelfCheck {
            version,
            written,
            read,
        });
    }
    Ok(frame)
}

fn count_records(mut batches: &[u8]) -> Result<u64, DecodeError> {
    let mut n = 0;
    while !batches.is_empty() {
        let (h, len) = BatchDecoder::header(batches)?;
        n += h.record_count as u64;
        batches = &batches[len..];
    }
    Ok(n)
}

/// Decode a complete Fetch response (header, body, and every record batch) at `version`, handing
/// every record to `visit`. Returns the number of records.
pub fn decode_fetch_response<F>(
    version: i16,
    correlation_id: i32,
    frame: Bytes,
    decoder: &mut BatchDecoder,
    mut visit: F,
) -> Result<u64, FetchDecodeError>
where
    F: FnMut(&BatchHeader, RecordView<'_>),
{
    let response = decode_fetch_frame(version, correlation_id, frame)?;
    let mut records = 0;
    for p in response.responses.iter().flat_map(|t| t.partitions.iter()) {
        if let Some(bytes) = &p.records {
            records += decoder.decode_all(bytes, &mut visit)?.records;
        }
    }
    Ok(records)
}

/// Decode a Fetch response frame (header and body; records left as bytes), tolerating tagged fields
/// a broker sends outside the versions that define them.
pub fn decode_fetch_frame(
    version: i16,
    correlation_id: i32,
    frame: Bytes,
) -> Result<FetchResponse, FrameError> {
    crate::frame::decode_response_with(ApiKey::Fetch, version, correlation_id, frame, |body| {
        decode_fetch_body(version, body)
    })
}

/// The Fetch response body. Before v12 this is kafka-protocol's decoder. From v12 (flexible) the
/// top-level fields are read here and each topic by kafka-protocol, and the top-level tagged fields
/// are skipped rather than checked: KIP-482 lets a receiver ignore tagged fields, and some
/// Kafka-compatible brokers (Tansu 0.6) send `node_endpoints` (tag 0, defined from v16) on v12–v15,
/// which kafka-protocol's strict decoder rejects.
pub fn decode_fetch_body(version: i16, body: &mut Bytes) -> Result<FetchResponse, String> {
    use bytes::Buf;
    use kafka_protocol::protocol::Decodable;
    if version < 12 {
        return FetchResponse::decode(body, version).map_err(|e| e.to_string());
    }
    let need = |body: &Bytes, n: usize| {
        if body.remaining() < n {
            Err(format!("Fetch v{version} response truncated"))
        } else {
            Ok(())
        }
    };
    need(body, 10)?;
    let throttle_time_ms = body.get_i32();
    let error_code = body.get_i16();
    let session_id = body.get_i32();
    let topics = uvarint(body)?.checked_sub(1).ok_or("null topics array")? as usize;
    if topics > body.remaining() {
        return Err(format!("Fetch v{version} response claims {topics} topics"));
    }
    let mut responses = Vec::with_capacity(topics);
    for _ in 0..topics {
        responses.push(FetchableTopicResponse::decode(body, version).map_err(|e| e.to_string())?);
    }
    // Top-level tagged fields: skipped, whatever their tags.
    let tags = uvarint(body)?;
    for _ in 0..tags {
        let _tag = uvarint(body)?;
        let size = uvarint(body)? as usize;
        need(body, size)?;
        body.advance(size);
    }
    Ok(FetchResponse::default()
        .with_throttle_time_ms(throttle_time_ms)
        .with_error_code(error_code)
        .with_session_id(session_id)
        .with_responses(responses))
}

fn uvarint(body: &mut Bytes) -> Result<u64, String> {
    use bytes::Buf;
    let mut v = 0u64;
    for shift in (0..35).step_by(7) {
        if !body.has_remaining() {
            return Err("truncated varint".into());
        }
        let b = body.get_u8();
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("varint too long".into())
}

/// A Fetch response that did not decode.
#[derive(Debug, thiserror::Error)]
pub enum FetchDecodeError {
    #[error("{0}")]
    Frame(#[from] FrameError),
    #[error("{0}")]
    Records(#[from] DecodeError),
}

/// Format a topic id as its canonical hyphenated lowercase text into `buf`, without allocating.
pub fn format_topic_id<'b>(id: &uuid::Uuid, buf: &'b mut [u8; 36]) -> &'b str {
    id.hyphenated().encode_lower(buf)
}

/// Write a topic id's 16 bytes, as the wire carries it.
pub fn put_topic_id<B: BufMut>(buf: &mut B, id: &uuid::Uuid) {
    buf.put_slice(id.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{RecordBatchBuilder, now_ms};
    use crate::compression::Compression;

    fn batch(n: u32) -> Bytes {
        let mut b = RecordBatchBuilder::new(Compression::None);
        let base = now_ms();
        b.start(base);
        for i in 0..n {
            b.append(base, None, Some(&i.to_be_bytes()), &[]);
        }
        b.finish().unwrap()
    }

    #[test]
    fn every_fetch_version_builds_checks_itself_and_decodes() {
        let id = uuid::Uuid::from_u128(0x1234_5678_9abc_def0_1234_5678_9abc_def0);
        for version in FETCH_VERSIONS {
            let parts = [
                PartitionRecords {
                    partition: 0,
                    high_watermark: 10,
                    records: batch(10),
                },
                PartitionRecords {
                    partition: 1,
                    high_watermark: 7,
                    records: batch(7),
                },
            ];
            let frame = build_fetch_response(version, 9, "t", id, &parts).unwrap();
            let mut d = BatchDecoder::new();
            let mut seen = 0;
            let n = decode_fetch_response(version, 9, frame, &mut d, |_, _| seen += 1).unwrap();
            assert_eq!((n, seen), (17, 17), "v{version}");
        }
    }

    #[test]
    fn node_endpoints_sent_below_v16_are_tolerated() {
        use kafka_protocol::messages::fetch_response::NodeEndpoint;
        // Build a v16 response with node_endpoints, then read it as v13, v14 and v15: the same layout
        // but for that tagged field, which kafka-protocol's strict decoder rejects there.
        let parts = [PartitionRecords {
            partition: 0,
            high_watermark: 3,
            records: batch(3),
        }];
        let v16 = build_fetch_response(16, 1, "t", uuid::Uuid::from_u128(1), &parts).unwrap();
        let mut with_tag = bytes::BytesMut::new();
        let decoded: FetchResponse = decode_response(ApiKey::Fetch, 16, 1, v16).unwrap();
        let decoded = decoded.with_node_endpoints(vec![NodeEndpoint::default().with_port(9092)]);
        ResponseHeader::default()
            .with_correlation_id(1)
            .encode(&mut with_tag, 1)
            .unwrap();
        decoded.encode(&mut with_tag, 16).unwrap();
        let frame = with_tag.freeze();
        for v in 13..=15 {
            assert!(decode_response::<FetchResponse>(ApiKey::Fetch, v, 1, frame.clone()).is_err());
            let n = decode_fetch_response(v, 1, frame.clone(), &mut BatchDecoder::new(), |_, _| {})
                .unwrap();
            assert_eq!(n, 3, "v{v}");
        }
    }

    #[test]
    fn traits_change_exactly_at_their_versions() {
        assert!(!FetchTraits::of(4).log_start_offset && FetchTraits::of(5).log_start_offset);
        assert!(!FetchTraits::of(6).session_id && FetchTraits::of(7).session_id);
        assert!(
            !FetchTraits::of(10).preferred_read_replica
                && FetchTraits::of(11).preferred_read_replica
        );
        assert!(!FetchTraits::of(11).flexible && FetchTraits::of(12).flexible);
        assert!(!FetchTraits::of(12).topic_id && FetchTraits::of(13).topic_id);
    }

    #[test]
    fn topic_id_formats_without_allocating() {
        let id = uuid::Uuid::from_u128(0x0011_2233_4455_6677_8899_aabb_ccdd_eeff);
        let mut buf = [0u8; 36];
        assert_eq!(
            format_topic_id(&id, &mut buf),
            "00112233-4455-6677-8899-aabbccddeeff"
        );
    }
}
