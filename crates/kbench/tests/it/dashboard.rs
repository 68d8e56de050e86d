//! `kbench serve`'s dashboard in headless Chromium, driven over WebDriver (Debian's `chromium` and
//! `chromedriver`, installed by scripts/install-test-tools; the `fantoccini` client): the page
//! loads with no console error, asks for the token and works once given it (the token never in a
//! URL), a run started from its form shows live points as its intervals are pushed, a refused
//! start shows the API's message, and a store holding a step change (20 builds, records/s down 40 %
//! from the 11th) has its history chart mark the change at that build; two runs picked open the
//! compare table. A screenshot is taken (KBENCH_UPDATE_SCREENSHOT=1 writes it to
//! docs/dashboard-screenshot.png).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use crate::common::*;

const TOKEN: &str = "dash-token-never-shown-3c1e";
const LIMIT: Duration = Duration::from_secs(60);
/// Every wait in the browser is bounded by this.
const WAIT: Duration = Duration::from_secs(20);

/// A child process killed on drop.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `POST /session/{id}/se/log`: the browser's console log, as ChromeDriver keeps it.
#[derive(Debug)]
struct BrowserLog;

impl fantoccini::wd::WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base: &url::Url,
        session: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _: &url::Url) -> (axum::http::Method, Option<String>) {
        (
            axum::http::Method::POST,
            Some(json!({"type": "browser"}).to_string()),
        )
    }
}

/// The console's errors so far: ChromeDriver's SEVERE entries (but those of `allowed` requests
/// the server refused on purpose) and what the page's own error handlers caught.
async fn console_errors(c: &Client, allowed: &[&str]) -> Vec<String> {
    let log = c.issue_cmd(BrowserLog).await.expect("browser log");
    let mut errors: Vec<String> = log
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["level"] == "SEVERE")
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .filter(|m| !allowed.iter().any(|a| m.contains(a)))
        .collect();
    let caught = c
        .execute("return window.kbenchErrors || [];", vec![])
        .await
        .expect("caught errors");
    errors.extend(
        caught
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| e.as_str().unwrap_or_default().to_string()),
    );
    errors
}

/// Wait until `script` (a function body returning a value) returns something truthy; its value.
async fn until(c: &Client, what: &str, script: &str) -> Value {
    let started = Instant::now();
    loop {
        let v = c.execute(script, vec![]).await.expect("script");
        let truthy = match &v {
            Value::Null | Value::Bool(false) => false,
            Value::Number(n) => n.as_f64() != Some(0.0),
            Value::String(s) => !s.is_empty(),
            _ => true,
        };
        if truthy {
            return v;
        }
        assert!(
            started.elapsed() < WAIT,
            "hung: {what} did not happen within {WAIT:?} (last {v})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A store of 20 runs of one produce benchmark, one build each, whose records/s drops 40 % from the
/// 11th build on (each a real run's document, its figures set): the documents are real result
/// documents through the gate, the change known.
fn store_with_a_step(broker: &TestBroker, dir: &TempDir) -> String {
    let base = dir.path().join("base.json");
    Cmd::on("produce", broker)
        .topic("dashboard-history")
        .args(&["--num-records", "5000", "--record-size", "100"])
        .json(&base)
        .ok(LIMIT);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&base).unwrap()).unwrap();
    let db = dir.file("history.db");
    for i in 0..20u32 {
        let mut d = doc.clone();
        // A little noise, the same each time (±1 %), around 50 000 then 30 000 records/s.
        let noise = 1.0 + ((i * 7919) % 21) as f64 / 1000.0 - 0.01;
        let rps = if i < 10 { 50_000.0 } else { 30_000.0 } * noise;
        d["start_time"] = json!(format!("2026-01-01T00:{i:02}:00Z"));
        for rep in d["repetitions"].as_array_mut().expect("repetitions") {
            rep["records_per_sec"] = json!(rps);
            rep["mb_per_sec"] = json!(rps * 100.0 / 1048576.0);
        }
        let file = dir.path().join(format!("run-{i:02}.json"));
        std::fs::write(&file, serde_json::to_string_pretty(&d).unwrap()).unwrap();
        Cmd::new("history")
            .args(&["import", file.to_str().unwrap(), "--store", &db])
            .args(&["--build-label", &format!("build-{i:02}")])
            .ok(LIMIT);
    }
    db
}

/// ChromeDriver on a free loopback port, and its address once it answers.
fn chromedriver() -> (Killed, String) {
    let port = free_port();
    let child = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver is installed (scripts/install-test-tools installs Debian's chromium-driver)");
    let child = Killed(child);
    wait_until("chromedriver listens", WAIT, || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    (child, format!("http://127.0.0.1:{port}"))
}

#[test]
fn the_dashboard_works_in_a_real_browser() {
    let started = Instant::now();
    let broker = TestBroker::start();
    let dir = TempDir::new("dashboard");
    let db = store_with_a_step(&broker, &dir);
    let results = dir.file("results");
    let (serve, base) = start_serve(
        &[
            "--results-dir",
            &results,
            "--store",
            &db,
            "--bootstrap-server",
            &broker.addr,
        ],
        &[("KBENCH_TOKEN", TOKEN)],
    );
    let _serve = Killed(serve);
    let (_driver, webdriver) = chromedriver();
    let browser = if std::path::Path::new("/usr/lib/chromium/chromium").is_file() {
        "/usr/lib/chromium/chromium"
    } else {
        "chromium"
    };
    let profile = dir.file("chromium-profile");
    let caps = json!({
        "browserName": "chrome",
        "goog:chromeOptions": {
            "binary": browser,
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1500", "--hide-scrollbars", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                format!("--user-data-dir={profile}"),
            ],
        },
        "goog:loggingPrefs": {"browser": "ALL"},
    });
    let Value::Object(caps) = caps else {
        unreachable!()
    };
    let shot = runtime().block_on(async {
        tokio::time::timeout(Duration::from_secs(120), async {
            let c = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
                .capabilities(caps)
                .connect(&webdriver)
                .await
                .expect("a WebDriver session");
            let shot = drive(&c, &base).await;
            let _ = c.close().await;
            shot
        })
        .await
        .expect("the browser session hung")
    });
    assert_eq!(&shot[..8], b"\x89PNG\r\n\x1a\n", "a PNG screenshot");
    let decoder = png::Decoder::new(std::io::Cursor::new(&shot));
    let info = decoder
        .read_info()
        .expect("the screenshot decodes")
        .info()
        .clone();
    assert!(info.width >= 1000 && info.height >= 1000, "{info:?}");
    std::fs::write(dir.path().join("dashboard.png"), &shot).unwrap();
    if std::env::var_os("KBENCH_UPDATE_SCREENSHOT").is_some() {
        let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
        std::fs::write(docs.join("dashboard-screenshot.png"), &shot).unwrap();
    }
    eprintln!("dashboard test: {:?}", started.elapsed());
}

/// Everything done in the browser; the final screenshot.
async fn drive(c: &Client, base: &str) -> Vec<u8> {
    c.goto(base).await.expect("the page loads");
    c.execute(
        "window.kbenchErrors = [];
         window.addEventListener('error', (e) => window.kbenchErrors.push(String(e.message)));
         window.addEventListener('unhandledrejection', (e) => window.kbenchErrors.push(String(e.reason)));",
        vec![],
    )
    .await
    .expect("error collector");
    // Without the token, the page asks for it and asks the API nothing.
    let asks = until(
        c,
        "the page asks for the token",
        "return document.getElementById('auth-status').textContent;",
    )
    .await;
    assert_eq!(asks, "this server needs its API token");
    assert_eq!(console_errors(c, &[]).await, Vec::<String>::new());

    // Log in.
    c.find(Locator::Id("token"))
        .await
        .unwrap()
        .send_keys(TOKEN)
        .await
        .unwrap();
    c.find(Locator::Id("login-button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    until(
        c,
        "the token is taken",
        "return document.getElementById('auth-status').textContent === 'token set';",
    )
    .await;

    // History: the change is marked at the 11th build, a regression.
    let mark = until(
        c,
        "the history chart marks a change",
        "const m = document.querySelectorAll('svg.history-chart line.changepoint');
         return m.length ? Array.from(m).map((l) => l.textContent + '|' + l.getAttribute('class')) : null;",
    )
    .await;
    let marks: Vec<&str> = mark
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    assert_eq!(marks.len(), 1, "{marks:?}");
    assert!(
        marks[0].contains("at build build-10") && marks[0].contains("regression"),
        "{marks:?}"
    );
    // Two runs picked: the compare table.
    for i in ["3", "15"] {
        c.find(Locator::Css(&format!(
            "svg.history-chart circle.pickable[data-index='{i}']"
        )))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    }
    let rows = until(
        c,
        "the compare table",
        "const t = document.getElementById('compare-table');
         return t ? t.textContent : null;",
    )
    .await;
    let rows = rows.as_str().unwrap();
    assert!(
        rows.contains("records_per_sec (higher is better)"),
        "{rows}"
    );

    // A start the API refuses: its message shown, nothing started.
    let size = c
        .find(Locator::Css("input[name='record_size']"))
        .await
        .unwrap();
    size.clear().await.unwrap();
    size.send_keys("0").await.unwrap();
    c.find(Locator::Id("start-button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let refused = until(
        c,
        "the refusal is shown",
        "const r = document.getElementById('start-result');
         return r.className === 'error' ? r.textContent : null;",
    )
    .await;
    assert!(
        refused.as_str().unwrap().starts_with("record_size"),
        "{refused}"
    );

    // A run started from the form: live points as its intervals come, then its end.
    size.clear().await.unwrap();
    size.send_keys("100").await.unwrap();
    for (name, value) in [("num_records", "300000"), ("throughput", "100000")] {
        let f = c
            .find(Locator::Css(&format!("input[name='{name}']")))
            .await
            .unwrap();
        f.clear().await.unwrap();
        f.send_keys(value).await.unwrap();
    }
    c.find(Locator::Id("start-button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let said = until(
        c,
        "the run starts",
        "const r = document.getElementById('start-result');
         return r.className === 'ok' ? r.textContent : null;",
    )
    .await;
    assert!(said.as_str().unwrap().starts_with("started "), "{said}");
    until(
        c,
        "two live points",
        "return document.querySelectorAll('#live-throughput circle.point').length >= 2;",
    )
    .await;
    let end = until(
        c,
        "the run's end",
        "const s = document.getElementById('live-status').textContent;
         return s.includes('run finished') ? s : null;",
    )
    .await;
    let points: Value = c
        .execute(
            "return document.querySelectorAll('#live-latency circle.point').length;",
            vec![],
        )
        .await
        .unwrap();
    assert!(points.as_u64().unwrap() >= 4, "p50 and p99 drawn: {end}");
    until(
        c,
        "the finished run listed",
        "return document.querySelector('#runs tr[data-status=\"finished\"]') !== null;",
    )
    .await;

    // The token never in a URL; no console error but the refusal's 400.
    let url = c.current_url().await.unwrap();
    assert!(!url.as_str().contains(TOKEN), "{url}");
    assert_eq!(
        console_errors(c, &["status of 400"]).await,
        Vec::<String>::new()
    );
    c.screenshot().await.expect("a screenshot")
}
