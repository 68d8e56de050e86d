//! Fuzz target bodies. Each takes arbitrary bytes and must return without panicking, aborting or
//! allocating without bound, whatever they are: they are what a hostile broker, file or user can
//! hand kbench. `fuzz/fuzz_targets/*.rs` call them under libFuzzer; `tests/corpus.rs` runs them
//! over the committed corpora and reproducers on stable.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiVersionsResponse, CreateTopicsResponse, DeleteTopicsResponse, FindCoordinatorResponse,
    HeartbeatResponse, JoinGroupResponse, LeaveGroupResponse, ListOffsetsResponse,
    MetadataResponse, OffsetCommitResponse, OffsetFetchResponse, ProduceResponse,
    SaslAuthenticateResponse, SaslHandshakeResponse, SyncGroupResponse,
};
use kbench_wire::frame::{decode_response, next_frame, peek_correlation_id};
use kbench_wire::{ApiKey, BatchDecoder};

/// The APIs whose responses kbench decodes, with the versions it may negotiate.
pub const RESPONSES: &[(ApiKey, i16, i16)] = &[
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::Metadata, 0, 13),
    (ApiKey::Produce, 3, 13),
    (ApiKey::Fetch, 4, 18),
    (ApiKey::ListOffsets, 0, 10),
    (ApiKey::CreateTopics, 0, 7),
    (ApiKey::DeleteTopics, 0, 6),
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::OffsetCommit, 0, 9),
    (ApiKey::OffsetFetch, 0, 9),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
];

/// Target `responses`: byte 0 picks the API, byte 1 the version; the rest is a response frame
/// (header and body) decoded as kbench decodes it — a Fetch with every record batch in it.
pub fn responses(data: &[u8]) {
    let [a, v, rest @ ..] = data else {
        return;
    };
    let (api, lo, hi) = RESPONSES[*a as usize % RESPONSES.len()];
    let version = lo + (*v as i16 % (hi - lo + 1));
    let frame = Bytes::copy_from_slice(rest);
    let id = peek_correlation_id(rest).unwrap_or(0);
    macro_rules! decode {
        ($t:ty) => {{
            let _ = decode_response::<$t>(api, version, id, frame);
        }};
    }
    match api {
        ApiKey::ApiVersions => decode!(ApiVersionsResponse),
        ApiKey::Metadata => decode!(MetadataResponse),
        ApiKey::Produce => decode!(ProduceResponse),
        ApiKey::Fetch => {
            let mut decoder = BatchDecoder::new();
            let mut n = 0u64;
            let _ = kbench_wire::fetch::decode_fetch_response(
                version,
                id,
                frame,
                &mut decoder,
                |_, record| {
                    n += record.headers().count() as u64;
                },
            );
        }
        ApiKey::ListOffsets => decode!(ListOffsetsResponse),
        ApiKey::CreateTopics => decode!(CreateTopicsResponse),
        ApiKey::DeleteTopics => decode!(DeleteTopicsResponse),
        ApiKey::FindCoordinator => decode!(FindCoordinatorResponse),
        ApiKey::JoinGroup => decode!(JoinGroupResponse),
        ApiKey::SyncGroup => decode!(SyncGroupResponse),
        ApiKey::Heartbeat => decode!(HeartbeatResponse),
        ApiKey::OffsetCommit => decode!(OffsetCommitResponse),
        ApiKey::OffsetFetch => decode!(OffsetFetchResponse),
        ApiKey::LeaveGroup => decode!(LeaveGroupResponse),
        ApiKey::SaslHandshake => decode!(SaslHandshakeResponse),
        ApiKey::SaslAuthenticate => decode!(SaslAuthenticateResponse),
        _ => {}
    }
}

/// Target `record_batches`: the bytes as a Fetch's records field — every batch decoded (each
/// codec's decompressor reached through the attribute bits), every record and header visited, the
/// verification stamp read; and the gap finder.
pub fn record_batches(data: &[u8]) {
    decode_batches(data);
    // The same bytes with every batch's CRC made right, so that the fuzzer gets past the checksum
    // into the records and the decompressors (it cannot guess a CRC-32C).
    let mut fixed = data.to_vec();
    fix_crcs(&mut fixed);
    decode_batches(&fixed);
}

/// Rewrite the CRC of every whole batch in `buf` (base offset 8, length 4, epoch 4, magic 1, CRC 4;
/// the CRC covers attributes to the end).
pub fn fix_crcs(buf: &mut [u8]) {
    let mut pos = 0usize;
    while buf.len() >= pos + 61 {
        let len = i32::from_be_bytes([buf[pos + 8], buf[pos + 9], buf[pos + 10], buf[pos + 11]]);
        let Ok(len) = usize::try_from(len) else {
            return;
        };
        let end = pos + 12 + len;
        if len < 49 || end > buf.len() {
            return;
        }
        let crc = crc32c::crc32c(&buf[pos + 21..end]);
        buf[pos + 17..pos + 21].copy_from_slice(&crc.to_be_bytes());
        pos = end;
    }
}

/// Valid batches in every codec, with keys, values and headers: seeds for the corpus.
pub fn seed_batches() -> Vec<(String, Vec<u8>)> {
    use kbench_wire::{Compression, RecordBatchBuilder, RecordHeader};
    let mut out = Vec::new();
    for (codec, compression) in [
        ("none", Compression::None),
        ("gzip", Compression::Gzip),
        ("snappy", Compression::Snappy),
        ("lz4", Compression::Lz4),
        ("zstd", Compression::Zstd),
    ] {
        let mut b = RecordBatchBuilder::new(compression);
        b.start(1_700_000_000_000);
        for i in 0..5u8 {
            let stamp = kbench_bench::verify::Stamp::encode(7, u64::from(i), &[i; 3]);
            b.append(
                1_700_000_000_000 + i64::from(i),
                Some(&[i]),
                Some(&[i; 3]),
                &[RecordHeader {
                    key: kbench_bench::verify::VERIFY_HEADER,
                    value: Some(&stamp),
                }],
            );
        }
        out.push((format!("seed-{codec}"), b.finish().expect("batch").to_vec()));
    }
    out
}

fn decode_batches(data: &[u8]) {
    let mut decoder = BatchDecoder::new();
    let mut sum = 0usize;
    let _ = decoder.decode_all(data, |header, record| {
        sum += header.record_count as usize;
        sum += record.key.map_or(0, <[u8]>::len) + record.value.map_or(0, <[u8]>::len);
        for (k, v) in record.headers() {
            sum += k.len() + v.map_or(0, <[u8]>::len);
        }
        if let Some(s) = kbench_bench::verify::Stamp::of(&record) {
            sum += s.sequence as usize & 1;
        }
    });
    let _ = kbench_wire::first_gap(data, 0);
    std::hint::black_box(sum);
}

/// Target `frames`: a response stream cut into chunks (each chunk's length from the input) and
/// fed to the frame reader as the socket would, with a small frame limit.
pub fn frames(data: &[u8]) {
    let [cut, rest @ ..] = data else {
        return;
    };
    let chunk = 1 + *cut as usize;
    let mut buf = BytesMut::new();
    for piece in rest.chunks(chunk) {
        buf.extend_from_slice(piece);
        loop {
            match next_frame(&mut buf, 1 << 20) {
                Ok(Some(frame)) => {
                    let _ = peek_correlation_id(&frame);
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
}

/// Target `workload_files`: byte 0 picks the parser; the rest, as text, is an OMB workload file, an
/// OMB driver file, a load-shape scenario, `--ramp`/`--steps`, an `--slo` or a `--fault`.
pub fn workload_files(data: &[u8]) {
    let [which, rest @ ..] = data else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    use kbench_bench::omb::workload::{OmbDriver, OmbWorkload};
    use kbench_bench::shape::LoadShape;
    match which % 7 {
        0 => {
            let _ = OmbWorkload::parse(text);
        }
        1 => {
            let _ = OmbDriver::parse(text);
        }
        2 => {
            if let Ok(s) = kbench_bench::shape::Scenario::parse(text) {
                check_shape(&s);
            }
        }
        3 => {
            if let Ok(s) = LoadShape::parse_ramp(text) {
                check_shape(&s);
            }
        }
        4 => {
            if let Ok(s) = LoadShape::parse_steps(text) {
                check_shape(&s);
            }
        }
        5 => {
            for kind in ["produce", "consume", "e2e", "omb"] {
                let _ = kbench_bench::slo::parse(text, kind);
            }
        }
        _ => {
            let _ = kbench_bench::fault::Fault::parse(text);
        }
    }
}

/// A shape that parsed is usable: checked, and its schedule answers (bounded work).
fn check_shape(s: &kbench_bench::shape::LoadShape) {
    if s.check().is_ok() {
        let mut schedule = s.schedule();
        for i in [0u64, 1, 1000, 1 << 20] {
            let _ = schedule.time_of(i);
        }
    }
}

/// Target `http_payloads`: byte 0 picks the endpoint — `/pub-sub-demo` on a server without or with
/// a default cluster, or `/v1/runs`; the rest is the request body, read as its handler reads it up
/// to where a run would start (`kbench::serve::payloads`). A refused body is a 4xx, never a 500; a
/// secret given in it is never in the answer (the configuration GET shows, or the error).
pub fn http_payloads(data: &[u8]) {
    let [which, body @ ..] = data else {
        return;
    };
    let shown = answer(*which, body);
    for secret in secrets_in(body) {
        if !shown.contains(&secret) {
            continue;
        }
        // The answer may hold the same text for its own reasons (a list of valid values, say):
        // a leak is text that goes away when the secret is changed.
        let other: String = secret
            .chars()
            .map(|c| if c == 'x' { 'y' } else { 'x' })
            .collect();
        let text = String::from_utf8_lossy(body).replace(&secret, &other);
        assert!(
            answer(*which, text.as_bytes()).contains(&secret),
            "a secret given in the body is in the answer"
        );
    }
}

/// What the endpoint `which` answers for `body`, as text; checked on the way.
fn answer(which: u8, body: &[u8]) -> String {
    use kbench::serve::payloads;
    let answer = match which % 3 {
        0 => payloads::pub_sub_demo(body, false),
        1 => payloads::pub_sub_demo(body, true),
        _ => payloads::v1_runs(body),
    };
    match &answer {
        Ok(config) => {
            if let Some(obj) = config.as_object() {
                assert!(
                    !obj.contains_key("kafkaUserPassword"),
                    "a password in the shown configuration"
                );
                if let Some(props) = obj.get("properties").and_then(|p| p.as_object()) {
                    for (k, v) in props {
                        if kbench_client::is_secret(k) {
                            assert_eq!(v, "***", "{k} shown");
                        }
                    }
                }
            }
            config.to_string()
        }
        Err((status, message)) => {
            assert!(
                (400..500).contains(status),
                "a body answered {status}: {message}"
            );
            message.clone()
        }
    }
}

/// The secret values a body gives (`kafkaUserPassword`, secret `properties`) that are long enough
/// and occur once in the body as written: text the answer has no other reason to contain.
fn secrets_in(body: &[u8]) -> Vec<String> {
    let Ok(serde_json::Value::Object(obj)) = serde_json::from_slice::<serde_json::Value>(body)
    else {
        return Vec::new();
    };
    let mut found: Vec<String> = Vec::new();
    for (k, v) in &obj {
        if k == "kafkaUserPassword"
            && let Some(s) = v.as_str()
        {
            found.push(s.to_string());
        }
        if k == "properties"
            && let Some(props) = v.as_object()
        {
            for (pk, pv) in props {
                if kbench_client::is_secret(pk)
                    && let Some(s) = pv.as_str()
                {
                    found.push(s.to_string());
                }
            }
        }
    }
    let text = String::from_utf8_lossy(body);
    found.retain(|s| s.len() >= 8 && text.matches(s.as_str()).count() == 1);
    found
}

/// RFC 7677's example exchange: what the `sasl` target's seeds are built from.
pub const SCRAM_CLIENT_NONCE: &str = "rOprNGfwEbeRWgbNEkqO";
/// The password of RFC 7677's example.
pub const SCRAM_PASSWORD: &str = "pencil";

/// Target `sasl`: byte 0 picks SCRAM-SHA-256, SCRAM-SHA-512 or a JAAS configuration. For SCRAM the
/// rest, split at its first 0xFF byte, is the broker's first and final messages, answered as
/// kbench's client answers them (with RFC 7677's client nonce and password). Iteration counts
/// above 4 096 are legitimate (the client takes up to a million) but cost milliseconds each: they
/// are skipped here, not in the client.
pub fn sasl(data: &[u8]) {
    use kbench_client::SaslMechanism;
    use kbench_client::sasl::{Scram, parse_jaas};
    let [which, rest @ ..] = data else {
        return;
    };
    let mechanism = match which % 3 {
        0 => SaslMechanism::ScramSha256,
        1 => SaslMechanism::ScramSha512,
        _ => {
            if let Ok(text) = std::str::from_utf8(rest) {
                let _ = parse_jaas(text);
            }
            return;
        }
    };
    let (first, last) = match rest.iter().position(|b| *b == 0xff) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &[][..]),
    };
    if let Ok(text) = std::str::from_utf8(first) {
        let costly = text.split(',').any(|a| {
            a.split_once('=')
                .is_some_and(|(k, v)| k == "i" && v.parse::<u64>().is_ok_and(|i| i > 4096))
        });
        if costly {
            return;
        }
    }
    let mut scram = Scram::new(mechanism, "user", SCRAM_CLIENT_NONCE);
    let _ = scram.client_first();
    if scram.client_final(first, SCRAM_PASSWORD).is_ok() {
        let _ = scram.verify_server_final(last);
    }
}
