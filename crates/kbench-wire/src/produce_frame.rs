//! A Produce request written around its record batches instead of through them: the frame's pieces
//! between the batches (size, header, body up to the first records' length; each further
//! partition's index and length; the tagged-field counts at the end) are encoded here, and the
//! batches themselves are sent as they are, never copied into the frame. At 1 MB batches that copy
//! was a tenth of the client's CPU (docs/PERFORMANCE.md).
//!
//! Produce v3–v13 for one topic and one or more partitions, with or without a transactional id;
//! byte for byte what `kafka-protocol` encodes for the same request (checked for every version
//! below).

use bytes::{BufMut, BytesMut};

use crate::varint::put_uvarint;

/// The topic, by name (v3–v12) or by id (v13).
#[derive(Debug, Clone, Copy)]
pub enum TopicRef<'a> {
    Name(&'a str),
    Id([u8; 16]),
}

/// Everything of a one-topic Produce request but its partitions.
#[derive(Debug, Clone, Copy)]
pub struct ProduceHead<'a> {
    pub version: i16,
    pub correlation_id: i32,
    pub client_id: &'a str,
    pub acks: i16,
    pub timeout_ms: i32,
    pub topic: TopicRef<'a>,
    /// A transactional producer's `transactional.id`: brokers count the batches as part of its
    /// open transaction only when the request names it.
    pub transactional_id: Option<&'a str>,
}

/// Why a frame could not be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProduceFrameError {
    #[error("Produce v{0} is outside v3–v13")]
    Version(i16),
    #[error("Produce v{0} names topics by id; v3–v12 by name")]
    TopicRef(i16),
    #[error("a Produce request needs at least one partition")]
    NoPartition,
    #[error("a {0}-byte frame is larger than Kafka's 2 GiB frame limit")]
    TooLarge(usize),
}

/// Append the frame's pieces for `partitions` (each a partition index and the length of the record
/// batch sent for it, in order) to `out`, and return where the batches go: batch `i` follows
/// `out[..cuts[i]]` (after the previous cut), and the bytes after the last cut follow the last batch.
/// Sending `out[..cuts[0]]`, batch 0, `out[cuts[0]..cuts[1]]`, batch 1, …, `out[cuts[n-1]..]` is the
/// whole frame.
pub fn encode_produce_frame(
    out: &mut BytesMut,
    head: &ProduceHead<'_>,
    partitions: &[(i32, usize)],
) -> Result<Vec<usize>, ProduceFrameError> {
    let v = head.version;
    if !(3..=13).contains(&v) {
        return Err(ProduceFrameError::Version(v));
    }
    if partitions.is_empty() {
        return Err(ProduceFrameError::NoPartition);
    }
    let flexible = v >= 9;
    match (head.topic, v >= 13) {
        (TopicRef::Id(_), true) | (TopicRef::Name(_), false) => {}
        _ => return Err(ProduceFrameError::TopicRef(v)),
    }
    let start = out.len();
    out.reserve(64 + head.client_id.len() + 16 * partitions.len());
    out.put_i32(0); // size, patched below
    // Request header v1 (v3–v8) or v2 (v9+): the client id stays a classic nullable string.
    out.put_i16(0); // api key: Produce
    out.put_i16(v);
    out.put_i32(head.correlation_id);
    out.put_i16(head.client_id.len() as i16);
    out.put_slice(head.client_id.as_bytes());
    if flexible {
        out.put_u8(0); // header tagged fields
    }
    match (head.transactional_id, flexible) {
        (None, true) => out.put_u8(0),
        (None, false) => out.put_i16(-1),
        (Some(id), true) => {
            put_uvarint(out, id.len() as u64 + 1);
            out.put_slice(id.as_bytes());
        }
        (Some(id), false) => {
            out.put_i16(id.len() as i16);
            out.put_slice(id.as_bytes());
        }
    }
    out.put_i16(head.acks);
    out.put_i32(head.timeout_ms);
    // topic_data: one topic.
    if flexible {
        put_uvarint(out, 2);
    } else {
        out.put_i32(1);
    }
    match head.topic {
        TopicRef::Id(id) => out.put_slice(&id),
        TopicRef::Name(name) if flexible => {
            put_uvarint(out, name.len() as u64 + 1);
            out.put_slice(name.as_bytes());
        }
        TopicRef::Name(name) => {
            out.put_i16(name.len() as i16);
            out.put_slice(name.as_bytes());
        }
    }
    // partition_data.
    if flexible {
        put_uvarint(out, partitions.len() as u64 + 1);
    } else {
        out.put_i32(partitions.len() as i32);
    }
    let mut cuts = Vec::with_capacity(partitions.len());
    let mut records = 0usize;
    for (i, &(partition, len)) in partitions.iter().enumerate() {
        if i > 0 && flexible {
            out.put_u8(0); // the previous partition's tagged fields
        }
        out.put_i32(partition);
        if flexible {
            put_uvarint(out, len as u64 + 1);
        } else {
            out.put_i32(len as i32);
        }
        cuts.push(out.len() - start);
        records += len;
    }
    if flexible {
        out.put_slice(&[0, 0, 0]); // tagged fields: the last partition's, the topic's, the request's
    }
    let size = out.len() - start - 4 + records;
    let size = i32::try_from(size).map_err(|_| ProduceFrameError::TooLarge(size))?;
    out[start..start + 4].copy_from_slice(&size.to_be_bytes());
    Ok(cuts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ApiKey, encode_request};
    use bytes::Bytes;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ProduceRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;

    fn head(version: i16, topic: TopicRef<'_>) -> ProduceHead<'_> {
        ProduceHead {
            version,
            correlation_id: 42,
            client_id: "kbench-producer",
            acks: -1,
            timeout_ms: 30_000,
            topic,
            transactional_id: None,
        }
    }

    /// Byte for byte what kafka-protocol writes, every version, one to three partitions, small and
    /// large batches.
    #[test]
    fn the_pieces_around_the_batches_are_kafka_protocols_frame() {
        let id = uuid::Uuid::from_u128(0x0123_4567_89ab_cdef_0011_2233_4455_6677);
        let batch = |len: usize, seed: u8| {
            Bytes::from((0..len).map(|i| (i as u8) ^ seed).collect::<Vec<u8>>())
        };
        let shapes: [&[(i32, usize)]; 5] = [
            &[(7, 0)],
            &[(7, 61)],
            &[(7, 20_000)],
            &[(0, 200), (3, 61)],
            &[(2, 200), (0, 20_000), (9, 130)],
        ];
        for (shape, txn) in shapes
            .iter()
            .flat_map(|s| [(*s, None), (*s, Some("kbench-txn"))])
        {
            let batches: Vec<(i32, Bytes)> = shape
                .iter()
                .map(|&(p, len)| (p, batch(len, p as u8)))
                .collect();
            for version in 3..=13i16 {
                let mut data = TopicProduceData::default().with_partition_data(
                    batches
                        .iter()
                        .map(|(p, b)| {
                            PartitionProduceData::default()
                                .with_index(*p)
                                .with_records(Some(b.clone()))
                        })
                        .collect(),
                );
                data = if version >= 13 {
                    data.with_topic_id(id)
                } else {
                    data.with_name(TopicName(StrBytes::from_static_str("bench-topic")))
                };
                let request = ProduceRequest::default()
                    .with_transactional_id(txn.map(|t| {
                        kafka_protocol::messages::TransactionalId(StrBytes::from_static_str(t))
                    }))
                    .with_acks(-1)
                    .with_timeout_ms(30_000)
                    .with_topic_data(vec![data]);
                let mut expected = BytesMut::new();
                let client = StrBytes::from_static_str("kbench-producer");
                encode_request(
                    &mut expected,
                    ApiKey::Produce,
                    version,
                    42,
                    &client,
                    &request,
                )
                .unwrap();
                let topic = if version >= 13 {
                    TopicRef::Id(*id.as_bytes())
                } else {
                    TopicRef::Name("bench-topic")
                };
                let mut pieces = BytesMut::new();
                let head = ProduceHead {
                    transactional_id: txn,
                    ..head(version, topic)
                };
                let cuts = encode_produce_frame(&mut pieces, &head, shape).unwrap();
                let mut got = BytesMut::new();
                let mut from = 0;
                for (cut, (_, b)) in cuts.iter().zip(&batches) {
                    got.extend_from_slice(&pieces[from..*cut]);
                    got.extend_from_slice(b);
                    from = *cut;
                }
                got.extend_from_slice(&pieces[from..]);
                assert_eq!(got, expected, "Produce v{version}, {shape:?}, {txn:?}");
            }
        }
    }

    #[test]
    fn out_of_range_requests_are_refused() {
        let mut out = BytesMut::new();
        let one = &[(0, 0)];
        assert!(encode_produce_frame(&mut out, &head(2, TopicRef::Name("t")), one).is_err());
        assert!(encode_produce_frame(&mut out, &head(13, TopicRef::Name("t")), one).is_err());
        assert!(encode_produce_frame(&mut out, &head(12, TopicRef::Id([0; 16])), one).is_err());
        assert_eq!(
            encode_produce_frame(&mut out, &head(9, TopicRef::Name("t")), &[]),
            Err(ProduceFrameError::NoPartition)
        );
    }
}
