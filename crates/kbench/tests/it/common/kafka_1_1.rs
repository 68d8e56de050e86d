//! librdkafka's mock cluster narrowed to Apache Kafka 1.1.0: the legacy broker of tier 2. Shared by
//! the tests (`mock::Mock::kafka_1_1`) and the `mock_cluster` example (`--kafka 1.1`), which
//! includes this file.
//!
//! The ranges are Kafka 1.1.0's ApiVersions answer for every client API (as generated from 1.1's
//! protocol schemas: Produce 0–5 and Fetch 0–7 are the last before 2.0's Produce v6 / Fetch v8;
//! DescribeConfigs v1, the delegation-token APIs and DeleteGroups are 1.1's additions). The mock
//! does not serve CreateTopics, DeleteTopics, DescribeGroups, ListGroups, SaslHandshake,
//! SaslAuthenticate or DescribeConfigs at all: it never advertises them, narrowed or not.

use rdkafka::ClientContext;
use rdkafka::error::KafkaResult;
use rdkafka::mocking::MockCluster;
use rdkafka::types::RDKafkaApiKey as Api;

/// Kafka 1.1.0's version range of every API kbench may use.
pub const KAFKA_1_1: &[(Api, i16, i16)] = &[
    (Api::Produce, 0, 5),
    (Api::Fetch, 0, 7),
    (Api::ListOffsets, 0, 2),
    (Api::Metadata, 0, 5),
    (Api::OffsetCommit, 0, 3),
    (Api::OffsetFetch, 0, 3),
    (Api::FindCoordinator, 0, 1),
    (Api::JoinGroup, 0, 2),
    (Api::Heartbeat, 0, 1),
    (Api::LeaveGroup, 0, 1),
    (Api::SyncGroup, 0, 1),
    (Api::DescribeGroups, 0, 1),
    (Api::ListGroups, 0, 1),
    (Api::SaslHandshake, 0, 1),
    (Api::ApiVersion, 0, 1),
    (Api::CreateTopics, 0, 2),
    (Api::DeleteTopics, 0, 1),
    (Api::InitProducerId, 0, 0),
    (Api::AddPartitionsToTxn, 0, 0),
    (Api::AddOffsetsToTxn, 0, 0),
    (Api::EndTxn, 0, 0),
    (Api::TxnOffsetCommit, 0, 0),
    (Api::DescribeConfigs, 0, 1),
    (Api::SaslAuthenticate, 0, 0),
];

/// APIs the mock serves that Kafka 1.1 did not offer a client as the mock serves them:
/// OffsetForLeaderEpoch (1.1 had v0; the mock serves only v2). The mock (librdkafka 2.12) serves
/// no OffsetDelete or DescribeCluster. It also advertises ConsumerGroupHeartbeat (68) and the
/// telemetry APIs (71, 72), which are past the last key rdkafka 0.39's `RDKafkaApiKey` names
/// (Envelope, 58): they stay advertised, and kbench never asks for them.
pub const NOT_IN_KAFKA_1_1: &[Api] = &[Api::OffsetForLeaderEpoch];

/// Narrow `mock` to Kafka 1.1.0: [`KAFKA_1_1`]'s ranges, [`NOT_IN_KAFKA_1_1`] disabled.
pub fn narrow<C: ClientContext>(mock: &MockCluster<'_, C>) -> KafkaResult<()> {
    for &(api, min, max) in KAFKA_1_1 {
        mock.apiversion(api, Some(min), Some(max))?;
    }
    for &api in NOT_IN_KAFKA_1_1 {
        mock.apiversion(api, None, None)?;
    }
    Ok(())
}

/// Produce v5, the one answer where the mock is not Kafka 1.1: it writes `log_start_offset` only
/// from v6, where Kafka's ProduceResponse (and librdkafka's own reader) has it from v5, so its v5
/// answers are 8 bytes short per partition and no client reads them. `mend` puts a proxy in front
/// of each of the mock's brokers (`bootstrap`, comma-separated) that inserts the missing field (-1,
/// "not said") into those answers and rewrites Metadata answers to advertise the proxies, so that
/// every connection passes through them; every other frame passes untouched. The answer is the
/// proxies' bootstrap list.
pub fn mend(bootstrap: &str) -> String {
    use std::collections::HashMap;
    use std::net::TcpListener;
    use std::sync::Arc;

    let mut listeners = Vec::new();
    let mut proxied = HashMap::new();
    for upstream in bootstrap.split(',') {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let upstream_port: u16 = upstream.rsplit(':').next().unwrap().parse().unwrap();
        proxied.insert(upstream_port, port);
        listeners.push((listener, upstream.to_string()));
    }
    let proxied = Arc::new(proxied);
    let list: Vec<String> = listeners
        .iter()
        .map(|(l, _)| l.local_addr().unwrap().to_string())
        .collect();
    for (listener, upstream) in listeners {
        let proxied = proxied.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = std::net::TcpStream::connect(&upstream) else {
                    return;
                };
                proxy::serve(client, server, proxied.clone());
            }
        });
    }
    list.join(",")
}

mod proxy {
    use std::collections::HashMap;
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::sync::{Arc, Mutex};

    use bytes::{Bytes, BytesMut};
    use kafka_protocol::messages::MetadataResponse;
    use kafka_protocol::protocol::{Decodable, Encodable};

    const PRODUCE: i16 = 0;
    const METADATA: i16 = 3;

    /// One client's connection: requests forwarded as they are, their API and version kept by
    /// correlation id; answers mended as they come back.
    pub fn serve(mut client: TcpStream, mut server: TcpStream, proxied: Arc<HashMap<u16, u16>>) {
        let asked: Arc<Mutex<HashMap<i32, (i16, i16)>>> = Arc::default();
        let (mut to_client, mut from_server) =
            (client.try_clone().unwrap(), server.try_clone().unwrap());
        let kept = asked.clone();
        std::thread::spawn(move || {
            while let Some(frame) = read_frame(&mut from_server) {
                let correlation = i32::from_be_bytes(frame[4..8].try_into().unwrap());
                let asked = kept.lock().unwrap().remove(&correlation);
                let frame = match asked {
                    Some((PRODUCE, 5)) => produce_v5(&frame),
                    Some((METADATA, version)) => metadata(&frame, version, &proxied),
                    _ => frame,
                };
                if to_client.write_all(&frame).is_err() {
                    return;
                }
            }
        });
        std::thread::spawn(move || {
            while let Some(frame) = read_frame(&mut client) {
                let b = &frame[4..];
                let (api, version) = (
                    i16::from_be_bytes([b[0], b[1]]),
                    i16::from_be_bytes([b[2], b[3]]),
                );
                let correlation = i32::from_be_bytes(b[4..8].try_into().unwrap());
                asked.lock().unwrap().insert(correlation, (api, version));
                if server.write_all(&frame).is_err() {
                    return;
                }
            }
        });
    }

    /// A Produce v5 answer with `log_start_offset` (-1) after each partition's `log_append_time`.
    fn produce_v5(frame: &[u8]) -> Vec<u8> {
        let mut at = 8; // size prefix, correlation id
        let mut out = frame[..at].to_vec();
        let topics = int(copy(frame, &mut at, 4, &mut out));
        for _ in 0..topics {
            let name = int(copy(frame, &mut at, 2, &mut out));
            copy(frame, &mut at, name.max(0) as usize, &mut out);
            let partitions = int(copy(frame, &mut at, 4, &mut out));
            for _ in 0..partitions {
                // partition, error code, base offset, log append time; then the missing field
                copy(frame, &mut at, 4 + 2 + 8 + 8, &mut out);
                out.extend_from_slice(&(-1i64).to_be_bytes());
            }
        }
        let rest = frame.len() - at;
        copy(frame, &mut at, rest, &mut out); // throttle_time_ms
        let size = (out.len() - 4) as i32;
        out[..4].copy_from_slice(&size.to_be_bytes());
        out
    }

    /// `n` bytes of `frame` from `at` copied to `out`, `at` moved past them.
    fn copy<'a>(frame: &'a [u8], at: &mut usize, n: usize, out: &mut Vec<u8>) -> &'a [u8] {
        let bytes = &frame[*at..*at + n];
        out.extend_from_slice(bytes);
        *at += n;
        bytes
    }

    /// A big-endian INT16 or INT32.
    fn int(bytes: &[u8]) -> i32 {
        match bytes.len() {
            2 => i32::from(i16::from_be_bytes([bytes[0], bytes[1]])),
            _ => i32::from_be_bytes(bytes.try_into().expect("INT32")),
        }
    }

    /// A Metadata answer advertising the proxies instead of the mock's brokers.
    fn metadata(frame: &[u8], version: i16, proxied: &HashMap<u16, u16>) -> Vec<u8> {
        let header_len = if version >= 9 { 9 } else { 8 }; // v9+: tagged fields after the id
        let mut body = Bytes::copy_from_slice(&frame[header_len..]);
        let Ok(mut response) = MetadataResponse::decode(&mut body, version) else {
            return frame.to_vec();
        };
        for b in &mut response.brokers {
            if let Some(p) = u16::try_from(b.port).ok().and_then(|p| proxied.get(&p)) {
                b.port = i32::from(*p);
            }
        }
        let mut out = BytesMut::from(&frame[..header_len]);
        response.encode(&mut out, version).expect("Metadata");
        out.extend_from_slice(&body); // whatever the mock wrote after the body
        let size = (out.len() - 4) as i32;
        out[..4].copy_from_slice(&size.to_be_bytes());
        out.to_vec()
    }

    /// One size-prefixed frame, prefix included; None at the end of the stream.
    fn read_frame(s: &mut TcpStream) -> Option<Vec<u8>> {
        let mut len = [0u8; 4];
        s.read_exact(&mut len).ok()?;
        let mut frame = len.to_vec();
        frame.resize(4 + i32::from_be_bytes(len) as usize, 0);
        s.read_exact(&mut frame[4..]).ok()?;
        Some(frame)
    }
}
