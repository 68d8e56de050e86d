//! The results store: workloads keep their results with `--store`, `kbench history import` keeps
//! documents already on disk (once), and `list` and `show` read them back run by run; in an SQLite
//! file, and in a PostgreSQL database (a server the test starts: Debian's `initdb` and `pg_ctl`).

use std::time::Duration;

use crate::common::*;

#[path = "../../../kbench-bench/tests/support/postgres_server.rs"]
mod postgres_server;

const LIMIT: Duration = Duration::from_secs(120);

#[test]
fn results_are_kept_run_after_run_and_read_back() {
    let broker = TestBroker::start();
    let dir = TempDir::new("history");
    let db = dir.file("results/history.db");
    let first = dir.path().join("first.json");
    for (build, json) in [("build-1", Some(&first)), ("build-2", None)] {
        let mut cmd = Cmd::on("produce", &broker)
            .topic("history")
            .args(&["--num-records", "20000", "--record-size", "100"])
            .args(&["--throughput", "-1", "--store", &db, "--build-label", build]);
        if let Some(json) = json {
            cmd = cmd.json(json);
        }
        let out = cmd.ok(LIMIT);
        assert!(
            text(&out.stderr).contains("kbench: stored in"),
            "{}",
            text(&out.stderr)
        );
    }
    Cmd::on("consume", &broker)
        .topic("history")
        .args(&[
            "--messages",
            "20000",
            "--store",
            &db,
            "--target-label",
            "local",
        ])
        .ok(LIMIT);

    let list = text(
        &Cmd::new("history")
            .args(&["list", "--store", &db])
            .ok(LIMIT)
            .stdout,
    );
    let lines: Vec<&str> = list.lines().skip(1).collect();
    assert_eq!(lines.len(), 2, "{list}");
    let produce = lines.iter().find(|l| l.contains(" produce ")).expect(&list);
    let consume = lines.iter().find(|l| l.contains(" consume ")).expect(&list);
    let words: Vec<&str> = produce.split_whitespace().collect();
    assert_eq!(words[2], "2", "two produce runs: {list}");
    assert_eq!(
        words[3], broker.addr,
        "the bootstrap servers name the target: {list}"
    );
    assert!(consume.contains(" local "), "the target's label: {list}");
    let key = words[0];

    let show = text(
        &Cmd::new("history")
            .args(&["show", "--store", &db, "--benchmark", &key[..6]])
            .ok(LIMIT)
            .stdout,
    );
    assert!(
        show.contains("records_per_sec (higher is better)"),
        "{show}"
    );
    let runs: Vec<&str> = show.lines().filter(|l| l.contains("build-")).collect();
    assert_eq!(runs.len(), 2, "{show}");
    assert!(
        runs[0].contains("build-1") && runs[1].contains("build-2"),
        "{show}"
    );
    let p99 = text(
        &Cmd::new("history")
            .args(&["show", "--store", &db, "--benchmark", key])
            .args(&["--metric", "latency_p99_us"])
            .ok(LIMIT)
            .stdout,
    );
    assert!(p99.contains("latency_p99_us (lower is better)"), "{p99}");

    // The first run's document on disk is the run already stored; a file that is not a result
    // document in a folder is skipped, named outright it is refused.
    std::fs::write(dir.path().join("notes.json"), "{\"hello\": 1}").unwrap();
    let import = text(
        &Cmd::new("history")
            .args(&["import", dir.path().to_str().unwrap(), "--store", &db])
            .ok(LIMIT)
            .stdout,
    );
    assert!(import.contains("first.json: already stored"), "{import}");
    assert!(import.contains("notes.json: skipped"), "{import}");
    assert!(
        import.contains("0 runs stored, 1 already stored, 1 files skipped"),
        "{import}"
    );
    let notes = dir.file("notes.json");
    Cmd::new("history")
        .args(&["import", &notes, "--store", &db])
        .refused("notes.json");

    // Bad input: one error naming the flag.
    Cmd::new("history")
        .args(&["show", "--store", &db, "--benchmark", "ffffff"])
        .refused("--benchmark ffffff");
    Cmd::new("history")
        .args(&[
            "show",
            "--store",
            &db,
            "--benchmark",
            key,
            "--metric",
            "nope",
        ])
        .refused("--metric nope");
    Cmd::on("produce", &broker)
        .args(&["--num-records", "10", "--build-label", "x"])
        .refused("--build-label");
    let not_a_store = dir.file("first.json");
    Cmd::on("produce", &broker)
        .args(&["--num-records", "10", "--store", &not_a_store])
        .refused(&format!("--store {not_a_store}"));
}

/// Issue 35's regression end to end: twenty runs of one benchmark, the last ten of a "build"
/// whose broker answers 5 ms later (the fault proxy's delay, from the run's first instant).
/// `history check` names the first slow build and exits 1; counted from after every run, the
/// regression is older and it exits 0.
#[test]
fn a_slower_build_is_found_in_the_series_and_fails_the_check() {
    let dir = TempDir::new("history-check");
    let db = dir.file("history.db");
    for run in 1..=20 {
        let build = format!("build-{run:02}");
        let mut cmd = Cmd::new("produce")
            .topic("history-check")
            .args(&["--num-records", "1500", "--record-size", "100"])
            .args(&["--throughput", "-1", "--acks", "1", "--seed", "7"])
            .args(&["--store", &db, "--build-label", &build]);
        if run > 10 {
            cmd = cmd.args(&["--fault", "at=0s delay=5ms"]);
        }
        cmd.ok(LIMIT);
    }
    let before_any = "2000-01-01";
    let check = Cmd::new("history")
        .args(&["check", "--store", &db, "--metric", "latency_p50_us"])
        .args(&["--since", before_any])
        .run(LIMIT);
    let out = text(&check.stdout);
    assert_eq!(check.status.code(), Some(1), "{out}{}", text(&check.stderr));
    let found: Vec<&str> = out.lines().filter(|l| l.contains("REGRESSION")).collect();
    assert_eq!(found.len(), 1, "one change, at the first slow build: {out}");
    assert!(
        found[0].contains("latency_p50_us") && found[0].contains("first in build build-11 "),
        "{out}"
    );
    assert!(out.contains("1 regression(s) since 2000-01-01"), "{out}");

    // The same series, read from a build on: the slow build counts; from after the last run, it
    // is older and the check passes.
    let since_build = Cmd::new("history")
        .args(&["check", "--store", &db, "--metric", "latency_p50_us"])
        .args(&["--since", "build-05"])
        .run(LIMIT);
    assert_eq!(
        since_build.status.code(),
        Some(1),
        "{}",
        text(&since_build.stdout)
    );
    let report = format!("{db}.check.json");
    let later = Cmd::new("history")
        .args(&["check", "--store", &db, "--metric", "latency_p50_us"])
        .args(&["--since", "2999-01-01", "--json", &report])
        .ok(LIMIT);
    let later = text(&later.stdout);
    assert!(
        later.contains("0 regression(s) since 2999-01-01, 1 older"),
        "{later}"
    );
    // The same, as JSON for CI.
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(report["regressions"], 0, "{report}");
    assert_eq!(report["older_regressions"], 1, "{report}");
    let change = &report["changes"][0];
    assert_eq!(change["metric"], "latency_p50_us", "{report}");
    assert_eq!(change["build_label"], "build-11", "{report}");
    assert_eq!(change["regression"], true, "{report}");
    assert_eq!(change["counts"], false, "{report}");

    // `show` marks the change on its run.
    let list = text(
        &Cmd::new("history")
            .args(&["list", "--store", &db])
            .ok(LIMIT)
            .stdout,
    );
    let key = list
        .lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().next())
        .expect(&list);
    let show = text(
        &Cmd::new("history")
            .args(&["show", "--store", &db, "--benchmark", key])
            .args(&["--metric", "latency_p50_us", "--samples"])
            .ok(LIMIT)
            .stdout,
    );
    let marked: Vec<&str> = show.lines().filter(|l| l.contains("REGRESSION")).collect();
    assert!(
        marked.len() == 1 && marked[0].contains("build-11"),
        "{show}"
    );
    assert_eq!(show.matches("samples:").count(), 20, "{show}");

    // Bad input: one error naming the flag.
    Cmd::new("history")
        .args(&["check", "--store", &db, "--since", "no-such-build"])
        .refused("--since no-such-build");
    Cmd::new("history")
        .args(&["check", "--store", &db, "--metric", "nope"])
        .refused("--metric nope");
    Cmd::new("history")
        .args(&["check", "--store", &db, "--max-pvalue", "2"])
        .refused("--max-pvalue");
}

/// A team's store: the workloads store into a PostgreSQL database from inside their runtime,
/// `import`, `list` and `show` read it, and its password is never shown.
#[test]
fn results_are_kept_in_postgresql() {
    let server = postgres_server::PgServer::shared();
    let url = server.database("cli");
    let broker = TestBroker::start();
    let dir = TempDir::new("history-pg");
    let first = dir.path().join("first.json");
    for (build, json) in [("build-1", Some(&first)), ("build-2", None)] {
        let mut cmd = Cmd::on("produce", &broker)
            .topic("history-pg")
            .args(&["--num-records", "5000", "--record-size", "100"])
            .args(&[
                "--throughput",
                "-1",
                "--store",
                &url,
                "--build-label",
                build,
            ]);
        if let Some(json) = json {
            cmd = cmd.json(json);
        }
        let err = text(&cmd.ok(LIMIT).stderr);
        assert!(err.contains(&format!("kbench: stored in {url}")), "{err}");
    }
    let import = text(
        &Cmd::new("history")
            .args(&["import", dir.path().to_str().unwrap(), "--store", &url])
            .ok(LIMIT)
            .stdout,
    );
    assert!(import.contains("first.json: already stored"), "{import}");

    let list = text(
        &Cmd::new("history")
            .args(&["list", "--store", &url])
            .ok(LIMIT)
            .stdout,
    );
    let lines: Vec<&str> = list.lines().skip(1).collect();
    assert_eq!(lines.len(), 1, "{list}");
    let words: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(words[1..3], ["produce", "2"], "{list}");
    let show = text(
        &Cmd::new("history")
            .args(&["show", "--store", &url, "--benchmark", words[0]])
            .ok(LIMIT)
            .stdout,
    );
    let runs: Vec<&str> = show.lines().filter(|l| l.contains("build-")).collect();
    assert_eq!(runs.len(), 2, "{show}");
    assert!(
        runs[0].contains("build-1") && runs[1].contains("build-2"),
        "{show}"
    );

    // A password in the URL is masked wherever the store is named; an unreachable server, and a
    // store of a newer kbench, are one error each naming it.
    let with_password = url.replace("kbench@", "kbench:s3cret@");
    let masked = url.replace("kbench@", "kbench:***@");
    let out = Cmd::new("history")
        .args(&["show", "--store", &with_password, "--benchmark", "ffffff"])
        .run(LIMIT);
    let err = text(&out.stderr);
    assert!(err.contains(&format!("no benchmark in {masked}")), "{err}");
    assert!(!err.contains("s3cret"), "{err}");
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let unreachable = format!("postgres://kbench:s3cret@127.0.0.1:{closed}/history");
    Cmd::on("produce", &broker)
        .args(&["--num-records", "10", "--store", &unreachable])
        .refused(&format!(
            "--store postgres://kbench:***@127.0.0.1:{closed}/history: error connecting to server"
        ));
    let database = url.rsplit('/').next().unwrap();
    server.sql(database, "UPDATE kbench_schema SET version = version + 1");
    Cmd::new("history")
        .args(&["list", "--store", &url])
        .refused(&format!("--store {url}: schema version"));
}
