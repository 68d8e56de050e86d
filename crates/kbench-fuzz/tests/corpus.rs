//! Every fuzz target over its committed corpus and crash reproducers (`fuzz/corpus/<target>`,
//! `fuzz/regressions/<target>`), on stable: the targets keep building, and every input that
//! ever crashed one stays fixed. Plus a few thousand generated inputs per target, so the test
//! means something even before a corpus exists.

use std::path::PathBuf;

// As in the kbench binary (kbench_bench::measure::CountingAlloc): a count from the wire reserves
// address space, never aborts.
#[global_allocator]
static ALLOCATOR: kbench_wire::alloc::Reserving<std::alloc::System> =
    kbench_wire::alloc::Reserving(std::alloc::System);

fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut out = Vec::new();
    for dir in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) else {
            continue;
        };
        for e in entries.flatten() {
            if let Ok(bytes) = std::fs::read(e.path()) {
                out.push((e.path(), bytes));
            }
        }
    }
    out
}

/// Deterministic pseudo-random inputs, some built on a valid-looking prefix.
fn generated(prefix: &[u8], count: usize) -> Vec<Vec<u8>> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    (0..count)
        .map(|i| {
            let mut v = prefix[..prefix.len().min(i % (prefix.len() + 1))].to_vec();
            let len = (i * 7) % 300;
            for _ in 0..len {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                v.push(x as u8);
            }
            v
        })
        .collect()
}

fn run(target: &str, f: fn(&[u8]), prefix: &[u8]) {
    let committed = inputs(target);
    for (path, bytes) in &committed {
        eprintln!("{target}: {}", path.display());
        f(bytes);
    }
    for g in generated(prefix, 4000) {
        f(&g);
    }
}

#[test]
fn responses() {
    run("responses", kbench_fuzz::responses, &[3, 0, 0, 0, 0, 7]);
}

#[test]
fn record_batches() {
    // A batch header's start: base offset 0, a length, epoch, magic 2.
    let mut prefix = vec![0u8; 8];
    prefix.extend_from_slice(&60i32.to_be_bytes());
    prefix.extend_from_slice(&[0, 0, 0, 0, 2]);
    run("record_batches", kbench_fuzz::record_batches, &prefix);
    // The seeds are valid: every record of every codec decodes.
    for (name, batch) in kbench_fuzz::seed_batches() {
        let mut n = 0;
        kbench_wire::BatchDecoder::new()
            .decode_all(&batch, |_, _| n += 1)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(n, 5, "{name}");
        kbench_fuzz::record_batches(&batch);
    }
}

/// `KBENCH_FUZZ_WRITE_SEEDS=1 cargo test -p kbench-fuzz --test corpus write_seeds`: the seed
/// batches into fuzz/corpus/record_batches (committed).
#[test]
fn write_seeds() {
    if std::env::var_os("KBENCH_FUZZ_WRITE_SEEDS").is_none() {
        return;
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/record_batches");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, batch) in kbench_fuzz::seed_batches() {
        std::fs::write(dir.join(name), batch).unwrap();
    }
}

#[test]
fn frames() {
    run("frames", kbench_fuzz::frames, &[3, 0, 0, 0, 8, 0, 0, 0, 1]);
}

#[test]
fn workload_files() {
    run(
        "workload_files",
        kbench_fuzz::workload_files,
        b"\x02name: x\nphases:\n",
    );
}

#[test]
fn http_payloads() {
    run(
        "http_payloads",
        kbench_fuzz::http_payloads,
        b"\x02{\"workload\":\"e2e\",",
    );
    // The refusals and the shown configuration are checked, not just survived: a body that hides
    // nothing, one with a password, and a /v1 body with a secret property.
    let body = br#"{"type":"KAFKA_NATIVE","minBatchIntervalMs":100,"maxBatchIntervalMs":100,"minMessagePayloadSizeBytes":10,"maxMessagePayloadSizeBytes":10,"parallelProducers":1,"kafkaTopic":"t","minMessagesPerBatch":1,"maxMessagesPerBatch":1,"kafkaUserPassword":"hunter2-hunter2"}"#;
    let shown = kbench::serve::payloads::pub_sub_demo(body, false).expect("the payload parses");
    assert!(shown.get("kafkaUserPassword").is_none(), "{shown}");
    kbench_fuzz::http_payloads(&[&[0u8][..], body].concat());
    let v1 = br#"{"workload":"produce","num_records":10,"properties":{"sasl.password":"hunter2-hunter2","security.protocol":"SASL_PLAINTEXT","sasl.mechanism":"PLAIN","sasl.username":"u"}}"#;
    let shown = kbench::serve::payloads::v1_runs(v1).expect("the body parses");
    assert_eq!(shown["properties"]["sasl.password"], "***", "{shown}");
    let (status, message) =
        kbench::serve::payloads::v1_runs(br#"{"workload":"nope"}"#).unwrap_err();
    assert_eq!(status, 400);
    assert!(message.contains("workload"), "{message}");
}

#[test]
fn sasl() {
    run("sasl", kbench_fuzz::sasl, b"\x00r=rOprNGfwEbeRWgbNEkqO");
    // RFC 7677's exchange passes the whole way: the seed reaches the final message's check.
    let first =
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    let last = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";
    let mut scram = kbench_client::sasl::Scram::new(
        kbench_client::SaslMechanism::ScramSha256,
        "user",
        kbench_fuzz::SCRAM_CLIENT_NONCE,
    );
    scram
        .client_final(first, kbench_fuzz::SCRAM_PASSWORD)
        .unwrap();
    scram.verify_server_final(last).unwrap();
    kbench_fuzz::sasl(&[&[0u8][..], first, &[0xff], last].concat());
}
