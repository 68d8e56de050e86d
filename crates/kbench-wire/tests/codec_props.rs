//! Property tests of the record-batch codec against kafka-protocol's (the oracle), for every Produce
//! and Fetch version and every compression, and of the decoder against malformed input.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, ProduceRequest, RequestHeader, TopicName};
use kafka_protocol::protocol::{Decodable, StrBytes};
use kafka_protocol::records::RecordBatchDecoder;
use kbench_wire::batch::{RecordBatchBuilder, RecordHeader};
use kbench_wire::fetch::{
    FETCH_VERSIONS, PartitionRecords, build_fetch_response, decode_fetch_response,
};
use kbench_wire::{BatchDecoder, Compression, encode_request};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Rec {
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// Milliseconds after the base timestamp: up to ~100 days, past the 32-bit (~25 days) trap.
    ts_offset: i64,
}

fn bytes_opt(max: usize) -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![
        1 => Just(None),
        1 => Just(Some(Vec::new())),
        4 => proptest::collection::vec(any::<u8>(), 0..max).prop_map(Some),
    ]
}

fn rec() -> impl Strategy<Value = Rec> {
    (
        bytes_opt(16),
        bytes_opt(300),
        // Few distinct header keys, so duplicates are common.
        proptest::collection::vec(
            (
                prop_oneof![Just(b"a".to_vec()), Just(b"b".to_vec())],
                bytes_opt(8),
            ),
            0..4,
        ),
        0i64..8_640_000_000,
    )
        .prop_map(|(key, value, headers, ts_offset)| Rec {
            key,
            value,
            headers,
            ts_offset,
        })
}

fn compression() -> impl Strategy<Value = Compression> {
    prop::sample::select(Compression::ALL.to_vec())
}

fn encode(records: &[Rec], c: Compression, base: i64) -> Bytes {
    let mut b = RecordBatchBuilder::new(c);
    b.start(base);
    for r in records {
        let hs: Vec<RecordHeader<'_>> = r
            .headers
            .iter()
            .map(|(k, v)| RecordHeader {
                key: k,
                value: v.as_deref(),
            })
            .collect();
        b.append(
            base + r.ts_offset,
            r.key.as_deref(),
            r.value.as_deref(),
            &hs,
        );
    }
    b.finish().unwrap()
}

/// What kbench's decoder reads back, compared field by field with what was written.
fn assert_kbench_decodes(batch: &[u8], records: &[Rec], base: i64) {
    let mut i = 0;
    BatchDecoder::new()
        .decode_all(batch, |_, r| {
            let want = &records[i];
            assert_eq!(r.offset, i as i64);
            assert_eq!(r.timestamp, base + want.ts_offset);
            assert_eq!(r.key, want.key.as_deref());
            assert_eq!(r.value, want.value.as_deref());
            let hs: Vec<(Vec<u8>, Option<Vec<u8>>)> = r
                .headers()
                .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                .collect();
            assert_eq!(hs, want.headers, "headers in order, duplicates kept");
            i += 1;
        })
        .unwrap();
    assert_eq!(i, records.len());
}

/// What kafka-protocol's decoder reads back (it folds duplicate header keys, so headers are not compared).
fn assert_oracle_decodes(mut batch: Bytes, records: &[Rec], base: i64) {
    let sets = RecordBatchDecoder::decode_all(&mut batch).unwrap();
    let got: Vec<_> = sets.into_iter().flat_map(|s| s.records).collect();
    assert_eq!(got.len(), records.len());
    for (g, w) in got.iter().zip(records) {
        assert_eq!(g.key.as_deref(), w.key.as_deref());
        assert_eq!(g.value.as_deref(), w.value.as_deref());
        assert_eq!(g.timestamp, base + w.ts_offset);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn produce_request_round_trips_at_every_version(
        records in proptest::collection::vec(rec(), 1..60),
        c in compression(),
    ) {
        let base = kbench_wire::batch::now_ms();
        let batch = encode(&records, c, base);
        for version in 3..=13i16 {
            if version < c.min_produce_version() {
                continue;
            }
            let mut data = TopicProduceData::default().with_partition_data(vec![
                PartitionProduceData::default().with_index(0).with_records(Some(batch.clone())),
            ]);
            data = if version >= 13 {
                data.with_topic_id(uuid::Uuid::from_u128(7))
            } else {
                data.with_name(TopicName(StrBytes::from_static_str("t")))
            };
            let request = ProduceRequest::default().with_acks(1).with_timeout_ms(1000).with_topic_data(vec![data]);
            let mut frame = BytesMut::new();
            encode_request(&mut frame, ApiKey::Produce, version, 1, &StrBytes::from_static_str("p"), &request).unwrap();
            let mut body = frame.split_off(4).freeze();
            let header = RequestHeader::decode(&mut body, ApiKey::Produce.request_header_version(version)).unwrap();
            prop_assert_eq!(header.request_api_version, version);
            let decoded = ProduceRequest::decode(&mut body, version).unwrap();
            let records_field = decoded.topic_data[0].partition_data[0].records.clone().unwrap();
            assert_oracle_decodes(records_field.clone(), &records, base);
            assert_kbench_decodes(&records_field, &records, base);
        }
    }

    #[test]
    fn fetch_response_round_trips_at_every_version(
        records in proptest::collection::vec(rec(), 1..60),
        c in compression(),
    ) {
        let base = kbench_wire::batch::now_ms();
        let batch = encode(&records, c, base);
        for version in FETCH_VERSIONS {
            let parts = [PartitionRecords { partition: 3, high_watermark: records.len() as i64, records: batch.clone() }];
            let frame = build_fetch_response(version, 5, "t", uuid::Uuid::from_u128(9), &parts).unwrap();
            let mut i = 0usize;
            let n = decode_fetch_response(version, 5, frame, &mut BatchDecoder::new(), |_, r| {
                assert_eq!(r.value, records[i].value.as_deref());
                i += 1;
            }).unwrap();
            prop_assert_eq!(n as usize, records.len());
            assert_oracle_decodes(batch.clone(), &records, base);
        }
    }

}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn mutated_batches_are_errors_or_values_never_panics(
        records in proptest::collection::vec(rec(), 1..20),
        c in compression(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
        fix_crc in any::<bool>(),
        truncate in any::<bool>(),
    ) {
        let batch = encode(&records, c, 0);
        let mut bad = batch.to_vec();
        for (at, byte) in flips {
            let i = at.index(bad.len());
            bad[i] ^= byte | 1;
        }
        if fix_crc && bad.len() > 21 {
            // Recompute the CRC so the mutation reaches the record parser, not just the checksum.
            let crc = crc32c::crc32c(&bad[21..]);
            bad[17..21].copy_from_slice(&crc.to_be_bytes());
        }
        if truncate {
            bad.truncate(cut.index(bad.len()));
        }
        let mut d = BatchDecoder::new();
        let _ = d.decode_batch(&bad, |_, r| {
            let _ = r.headers().count();
        });
        let _ = d.decode_all(&bad, |_, _| {});
    }
}

#[test]
fn large_batch_round_trips() {
    let records: Vec<Rec> = (0..50_000)
        .map(|i| Rec {
            key: Some(format!("k{i}").into_bytes()),
            value: Some(vec![b'v'; i % 200]),
            headers: vec![(b"h".to_vec(), Some(b"1".to_vec())), (b"h".to_vec(), None)],
            ts_offset: i as i64 * 200_000,
        })
        .collect();
    for c in Compression::ALL {
        let base = kbench_wire::batch::now_ms();
        let batch = encode(&records, c, base);
        assert_kbench_decodes(&batch, &records, base);
        assert_oracle_decodes(batch, &records, base);
    }
}

#[test]
fn bad_varint_is_an_error() {
    let records = vec![Rec {
        key: None,
        value: Some(b"x".to_vec()),
        headers: vec![],
        ts_offset: 0,
    }];
    let mut bad = encode(&records, Compression::None, 0).to_vec();
    // The record's length varint, then its attributes: make the timestamp delta an endless varint.
    for b in bad.iter_mut().skip(63).take(10) {
        *b = 0xff;
    }
    let crc = crc32c::crc32c(&bad[21..]);
    bad[17..21].copy_from_slice(&crc.to_be_bytes());
    assert!(BatchDecoder::new().decode_batch(&bad, |_, _| {}).is_err());
}
