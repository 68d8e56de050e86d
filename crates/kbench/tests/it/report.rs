//! `kbench report`: result documents of every kind, from real runs (produce with repetitions twice
//! and their `compare`, e2e, a restricted codec run and a restricted sweep), turned into one HTML
//! page, which headless Chromium (installed by scripts/install-test-tools) renders: no script error,
//! every chart present with its series drawn, and a screenshot that is not blank.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::*;

const LIMIT: Duration = Duration::from_secs(300);

fn chromium(args: &[&str], dir: &Path) -> std::process::Output {
    let profile = dir.join("chromium-profile");
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .output()
        .expect("chromium is installed (scripts/install-test-tools installs Debian's chromium)");
    assert!(out.status.success(), "chromium: {}", text(&out.stderr));
    out
}

/// The `d` attributes of every `class="series"` path inside each chart, by chart name.
fn charts(html: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for part in html.split("<svg class=\"chart\" data-chart=\"").skip(1) {
        let name = part.split('"').next().unwrap().to_string();
        let body = part.split("</svg>").next().unwrap();
        let mut drawn: Vec<String> = body
            .split("class=\"series\"")
            .skip(1)
            .filter_map(|s| s.split("d=\"").nth(1))
            .map(|s| s.split('"').next().unwrap().to_string())
            .collect();
        drawn.extend(body.matches("class=\"bar\"").map(|_| "bar".to_string()));
        out.push((name, drawn));
    }
    out
}

#[test]
fn every_kind_of_result_renders_in_a_real_browser() {
    let broker = TestBroker::start();
    let dir = TempDir::new("report");
    let file = |n: &str| dir.path().join(n);
    for name in ["a", "b"] {
        Cmd::on("produce", &broker)
            .topic("report")
            .args(&[
                "--num-records",
                "6000",
                "--throughput",
                "3000",
                "--repetitions",
                "3",
            ])
            .json(&file(&format!("{name}.json")))
            .ok(LIMIT);
    }
    // Two runs of one build on a shared machine: a verdict either way is possible (exit 1 on a
    // "regression"); the document is what the report needs.
    let out = Cmd::new("compare")
        .args(&[
            file("a.json").to_str().unwrap(),
            file("b.json").to_str().unwrap(),
        ])
        .args(&["--json", file("compare.json").to_str().unwrap()])
        .run(LIMIT);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(result_json(&file("compare.json"))["kind"], "compare");
    Cmd::on("e2e", &broker)
        .topic("report-e2e")
        .args(&[
            "--producers",
            "2",
            "--batch-interval",
            "10ms",
            "--duration",
            "3s",
        ])
        .json(&file("e2e.json"))
        .ok(LIMIT);
    Cmd::new("codec")
        .args(&[
            "--quick",
            "--api",
            "produce",
            "--shape",
            "small",
            "--records",
            "1,100",
        ])
        .json(&file("codec.json"))
        .ok(LIMIT);
    Cmd::on("sweep", &broker)
        .args(&[
            "--quick",
            "--produce-versions",
            "9,11",
            "--fetch-versions",
            "12,16",
        ])
        .args(&["--store", file("history.db").to_str().unwrap()])
        .json(&file("sweep.json"))
        .ok(LIMIT);
    // The sweep's cells are benchmarks of the results store too.
    let list = Cmd::new("history")
        .args(&["list", "--store", file("history.db").to_str().unwrap()])
        .ok(LIMIT);
    assert!(
        text(&list.stdout).matches(" sweep ").count() >= 4,
        "{}",
        text(&list.stdout)
    );
    std::fs::remove_file(file("history.db")).unwrap();
    let html_path = file("report.html");
    Cmd::new("report")
        .arg(dir.path().to_str().unwrap())
        .args(&["-o", html_path.to_str().unwrap(), "--title", "A <report>"])
        .ok(LIMIT);
    let html = std::fs::read_to_string(&html_path).unwrap();
    // Self-contained: nothing fetched from anywhere.
    for outside in ["<script", "src=\"http", "href=\"http", "@import", "url("] {
        assert!(!html.contains(outside), "the page loads {outside}");
    }
    assert!(html.contains("A &lt;report&gt;"), "the title is escaped");
    // The browser's view of it: every chart there, each series drawn.
    let dom = text(
        &chromium(
            &["--dump-dom", &format!("file://{}", html_path.display())],
            dir.path(),
        )
        .stdout,
    );
    let drawn = charts(&dom);
    let names: Vec<&str> = drawn.iter().map(|(n, _)| n.as_str()).collect();
    for expected in [
        "distribution-latency",
        "distribution-service_time",
        "distribution-whole_trip",
        "timeline-throughput",
        "timeline-latency",
        "timeline-whole_trip",
        "compare-ratios",
        "codec-ns-per-record",
    ] {
        assert!(names.contains(&expected), "{expected} missing: {names:?}");
    }
    for (name, series) in &drawn {
        assert!(!series.is_empty(), "{name}: nothing drawn");
        for d in series.iter().filter(|d| *d != "bar") {
            assert!(
                d.starts_with('M') && d.contains(" L"),
                "{name}: an empty line {d:?}"
            );
        }
    }
    // Overlaid: A and B in one distribution.
    let latency = &drawn
        .iter()
        .find(|(n, _)| n == "distribution-latency")
        .unwrap()
        .1;
    assert_eq!(latency.len(), 2, "a and b overlaid");
    assert!(
        dom.contains("<h3>produce</h3>") && dom.contains("<h3>fetch</h3>"),
        "sweep tables"
    );
    assert!(dom.contains("background:#"), "the sweep's heat map");
    assert!(dom.contains("holds"), "accounting shown");
    // A screenshot: rendered without script errors, and not blank.
    let png_path = file("report.png");
    let shot = chromium(
        &[
            "--window-size=1200,3000",
            &format!("--screenshot={}", png_path.display()),
            &format!("file://{}", html_path.display()),
        ],
        dir.path(),
    );
    let log = text(&shot.stderr);
    assert!(
        !log.contains("Uncaught") && !log.contains(":CONSOLE("),
        "script errors: {log}"
    );
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&png_path).unwrap(),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let pixels = &buf[..info.buffer_size()];
    let mut colours = std::collections::BTreeSet::new();
    let mut inked = 0usize;
    for p in pixels.chunks(px) {
        if p[..3].iter().any(|c| *c < 200) {
            inked += 1;
        }
        colours.insert((p[0] / 16, p[1] / 16, p[2] / 16));
    }
    let total = pixels.len() / px;
    assert!(
        inked * 100 > total,
        "the screenshot is nearly blank: {inked} of {total} pixels"
    );
    assert!(
        colours.len() > 20,
        "the screenshot has only {} colours",
        colours.len()
    );
}
