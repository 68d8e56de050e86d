use super::*;

fn registry() -> (Arc<Registry>, PathBuf) {
    let dir = std::env::temp_dir().join(format!(
        "kbench-registry-{}-{:x}",
        std::process::id(),
        kbench_bench::spec::random_seed()
    ));
    (Arc::new(Registry::load(&dir)), dir)
}

#[tokio::test]
async fn a_run_that_panics_ends_failed_and_the_next_start_is_accepted() {
    let (reg, dir) = registry();
    let run = reg
        .register("e2e", Api::V1, Value::Null, Live::None)
        .unwrap();
    let id = run.id.clone();
    reg.spawn(run, async { panic!("boom in the run") });
    reg.wait_done(&id).await;
    let (status, error) = reg.read_run(&id, |r| (r.status, r.error.clone())).unwrap();
    assert_eq!(status, Status::Failed);
    assert!(error.unwrap().contains("boom in the run"));
    assert!(
        reg.register("e2e", Api::V1, Value::Null, Live::None)
            .is_ok()
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(start_paused = true)]
async fn a_run_that_ignores_its_stop_is_aborted_after_the_grace() {
    let (reg, dir) = registry();
    let run = reg
        .register("e2e", Api::V1, Value::Null, Live::None)
        .unwrap();
    let id = run.id.clone();
    reg.spawn(run, std::future::pending());
    reg.stop_and_wait(&id).await.unwrap();
    let (status, error) = reg.read_run(&id, |r| (r.status, r.error.clone())).unwrap();
    assert_eq!(status, Status::Failed);
    assert!(error.unwrap().contains("aborted"));
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_run_that_keeps_its_thread_busy_leaves_the_server_runtime_free() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (reg, dir) = registry();
    let run = reg
        .register("produce", Api::V1, Value::Null, Live::None)
        .unwrap();
    let id = run.id.clone();
    let started = Arc::new(AtomicBool::new(false));
    let released = Arc::new(AtomicBool::new(false));
    let (s, r) = (started.clone(), released.clone());
    // A run that never yields: it blocks its thread until released, or gives up after 5 s.
    // Were it on the server's runtime (this test's one thread), the test could not release it.
    reg.spawn(run, async move {
        s.store(true, Ordering::SeqCst);
        let until = std::time::Instant::now() + Duration::from_secs(5);
        while !r.load(Ordering::SeqCst) && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        if r.load(Ordering::SeqCst) {
            Outcome::default()
        } else {
            Outcome::failed("never released: the server's runtime was blocked")
        }
    });
    while !started.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    released.store(true, Ordering::SeqCst);
    reg.wait_done(&id).await;
    let (status, error) = reg.read_run(&id, |r| (r.status, r.error.clone())).unwrap();
    assert_eq!(status, Status::Finished, "{error:?}");
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_result_is_on_disk_before_the_run_is_finished() {
    let (reg, dir) = registry();
    std::fs::create_dir_all(&dir).unwrap();
    let run = reg
        .register("produce", Api::V1, Value::Null, Live::None)
        .unwrap();
    let id = run.id.clone();
    reg.spawn(run, async {
        Outcome {
            result: Some(json!({ "kind": "produce" })),
            ..Outcome::default()
        }
    });
    reg.wait_done(&id).await;
    assert!(dir.join(format!("{id}.json")).is_file());
    assert_eq!(reg.read_run(&id, |r| r.status).unwrap(), Status::Finished);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_segment_nobody_asks_about_is_abandoned_with_its_partial_result() {
    let (reg, dir) = registry();
    std::fs::create_dir_all(&dir).unwrap();
    let run = reg
        .register("produce", Api::V1, Value::Null, Live::None)
        .unwrap();
    let id = run.id.clone();
    let stop = run.stop.clone();
    reg.spawn(run, async move {
        stop.stopped().await;
        Outcome {
            result: Some(json!({ "kind": "produce", "aborted": stop.reason() })),
            ..Outcome::default()
        }
    });
    reg.set_lease(&id, Duration::from_millis(500));
    // Asked about (renewed) more often than the lease: kept.
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        reg.renew(&id);
        assert!(reg.expired().is_empty());
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(reg.expired(), vec![id.clone()]);
    assert!(
        reg.expired().is_empty(),
        "each expired run is returned once"
    );
    reg.abandon(&id).await;
    let (status, error, result, shown) = reg
        .read_run(&id, |r| {
            (
                r.status,
                r.error.clone(),
                r.result.clone(),
                run_json(r, false),
            )
        })
        .unwrap();
    assert_eq!(status, Status::Abandoned);
    assert!(!status.active());
    assert!(error.unwrap().contains("no word from its coordinator"));
    let aborted = result.unwrap()["aborted"].as_str().unwrap().to_string();
    assert!(aborted.starts_with("abandoned"), "{aborted}");
    assert_eq!(shown["status"], "abandoned");
    assert_eq!(shown["lease_ms"], 500);
    assert!(shown["lease_expires_in_ms"].is_null());
    assert!(
        reg.register("produce", Api::V1, Value::Null, Live::None)
            .is_ok()
    );
    let _ = std::fs::remove_dir_all(dir);
}
