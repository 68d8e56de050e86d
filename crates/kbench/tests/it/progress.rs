//! Live progress: on a terminal (a pseudo-terminal from util-linux's `script`) a progress bar with
//! the periodic lines above it; `--no-progress` and a pipe keep kafka-producer-perf-test's plain
//! lines, with no terminal control codes; `--quiet` prints the final line only.

use std::process::Command;
use std::time::Duration;

use crate::common::*;

const LIMIT: Duration = Duration::from_secs(120);

/// `kbench ARGS` on a pseudo-terminal; what it wrote.
fn on_a_terminal(args: &[&str]) -> String {
    let line = std::iter::once(env!("CARGO_BIN_EXE_kbench").to_string())
        .chain(args.iter().map(|a| a.to_string()))
        .collect::<Vec<_>>()
        .join(" ");
    let out = Command::new("script")
        .args(["-qfec", &line, "/dev/null"])
        .output()
        .expect("util-linux script");
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

#[test]
fn a_terminal_gets_a_bar_and_a_pipe_gets_the_plain_lines() {
    let broker = TestBroker::start();
    let base = [
        "produce",
        "--bootstrap-server",
        &broker.addr,
        "--num-records",
        "9000",
        "--throughput",
        "3000",
        "--reporting-interval",
        "1000",
    ];
    let tty = on_a_terminal(&base);
    assert!(tty.contains("records/s, p99 "), "the bar's message: {tty}");
    assert!(
        tty.contains("/9000 records"),
        "elapsed against planned: {tty}"
    );
    assert!(
        tty.contains("records sent, ") && tty.contains(" ms 99.9th."),
        "lines above it: {tty}"
    );
    assert!(tty.contains('\u{1b}'), "drawn with terminal codes");

    let plain = on_a_terminal(&[&base[..], &["--no-progress"]].concat());
    assert!(
        !plain.contains('\u{1b}'),
        "--no-progress: no terminal codes: {plain:?}"
    );
    assert!(!plain.contains("records/s, p99"), "{plain}");
    assert!(
        plain.lines().filter(|l| l.contains("records/sec")).count() >= 3,
        "{plain}"
    );

    let piped = Cmd::on("produce", &broker)
        .args(&[
            "--num-records",
            "9000",
            "--throughput",
            "3000",
            "--reporting-interval",
            "1000",
        ])
        .ok(LIMIT);
    let piped = text(&piped.stdout);
    assert!(!piped.contains('\u{1b}'), "a pipe: no terminal codes");
    for l in piped.lines().filter(|l| l.contains("records sent")) {
        assert!(
            l.ends_with(" ms max latency.") || l.ends_with(" ms 99.9th."),
            "kafka-producer-perf-test's lines, exactly: {l}"
        );
    }

    let quiet = on_a_terminal(&[&base[..], &["--quiet"]].concat());
    let lines: Vec<&str> = quiet.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "--quiet: the final line only: {quiet:?}");
    assert!(lines[0].contains(" ms 99.9th."), "{quiet}");
}
