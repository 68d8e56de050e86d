//! Prometheus metrics of a run: `--metrics-listen ADDR` on produce and e2e, and `/metrics` on
//! `kbench serve` and `kbench agent`. Fed by the run's timeline windows as they close (once a second
//! by default, nothing added to the hot path), so every counter is the sum of the windows so far and
//! ends equal to the result document's count; latency histograms are the windows' HdrHistograms
//! added up, exposed with Prometheus buckets at scrape time. Encoded by `prometheus-client` (the
//! Prometheus text format, 0.0.4).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use hdrhistogram::Histogram;
use kbench_bench::timeline::{Window, WindowSink};
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

/// Histogram buckets, seconds.
const BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// What a window's counter or histogram becomes: its name, help and kind.
struct Exposed {
    window_field: &'static str,
    name: &'static str,
    help: &'static str,
}

const COUNTERS: &[Exposed] = &[
    Exposed {
        window_field: "sent",
        name: "kbench_records_sent",
        help: "Records handed to a produce request (first attempt).",
    },
    Exposed {
        window_field: "records",
        name: "kbench_records_acked",
        help: "Records acknowledged by the broker.",
    },
    Exposed {
        window_field: "failed",
        name: "kbench_records_failed",
        help: "Records given up on (delivery failed).",
    },
    Exposed {
        window_field: "bytes",
        name: "kbench_bytes_acked",
        help: "Value bytes of acknowledged records.",
    },
    Exposed {
        window_field: "consumed",
        name: "kbench_records_consumed",
        help: "Records of the run received by the consumer.",
    },
    Exposed {
        window_field: "bytes_consumed",
        name: "kbench_bytes_consumed",
        help: "Key and value bytes of the records consumed.",
    },
];

const HISTOGRAMS: &[Exposed] = &[
    Exposed {
        window_field: "latency",
        name: "kbench_produce_latency_seconds",
        help: "Per record: intended send time (or append time) to acknowledgement.",
    },
    Exposed {
        window_field: "service_time",
        name: "kbench_produce_service_time_seconds",
        help: "Per record: its request sent to acknowledgement.",
    },
    Exposed {
        window_field: "producer_request_duration",
        name: "kbench_produce_request_duration_seconds",
        help: "Per produce request: sent to acknowledged.",
    },
    Exposed {
        window_field: "whole_trip",
        name: "kbench_e2e_latency_seconds",
        help: "Per record: send time to the consumer's receipt.",
    },
    Exposed {
        window_field: "fetch_latency",
        name: "kbench_fetch_latency_seconds",
        help: "Per Fetch call: sent to answered.",
    },
    Exposed {
        window_field: "end_to_end",
        name: "kbench_consume_end_to_end_seconds",
        help: "Per record: its CreateTime to the Fetch answer that brought it (ms resolution).",
    },
];

/// One run's figures so far, and the labels every series carries.
#[derive(Debug)]
pub struct RunMetrics {
    labels: Vec<(String, String)>,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    counts: BTreeMap<&'static str, u64>,
    histograms: BTreeMap<&'static str, Histogram<u64>>,
}

impl RunMetrics {
    /// A run of `workload` on `topic`, known as `run_id`. Its windows may come from several
    /// timelines (OMB's producers and consumers): each names its counters.
    pub fn new(workload: &str, topic: &str, run_id: &str) -> Arc<RunMetrics> {
        Arc::new(RunMetrics {
            labels: vec![
                ("workload".into(), workload.into()),
                ("topic".into(), topic.into()),
                ("run_id".into(), run_id.into()),
            ],
            state: Mutex::new(State::default()),
        })
    }

    /// What the run's timeline sends its windows to.
    pub fn sink(self: &Arc<Self>) -> WindowSink {
        let me = self.clone();
        WindowSink::new(move |w| me.add(w))
    }

    fn add(&self, w: &Window) {
        let mut s = self.state.lock().expect("metrics lock");
        for (name, n) in w.counters.iter().zip(&w.counts) {
            *s.counts.entry(name).or_default() += n;
        }
        for (tag, _) in &w.histograms {
            let Some(h) = w.histogram(tag) else { continue };
            let total = s
                .histograms
                .entry(tag)
                .or_insert_with(kbench_bench::measure::latency_histogram);
            let _ = total.add(&h);
        }
    }

    /// Every series, the Prometheus text format.
    pub fn encode(self: &Arc<Self>) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(self.clone()));
        let mut out = String::new();
        if prometheus_client::encoding::prometheus_text::encode(&mut out, &registry).is_err() {
            out.clear();
        }
        out
    }
}

/// A counter's value, as prometheus-client encodes it.
#[derive(Debug)]
struct CounterValue(u64);

impl EncodeMetric for CounterValue {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::MetricEncoder,
    ) -> Result<(), std::fmt::Error> {
        encoder.encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(&self.0, None)
    }
    fn metric_type(&self) -> MetricType {
        MetricType::Counter
    }
}

impl prometheus_client::collector::Collector for RunMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = self.state.lock().expect("metrics lock");
        // A counter appears with the first window that carries it.
        for c in COUNTERS {
            let Some(n) = s.counts.get(c.window_field).copied() else {
                continue;
            };
            let mut m = encoder.encode_descriptor(c.name, c.help, None, MetricType::Counter)?;
            let family = m.encode_family(&self.labels)?;
            CounterValue(n).encode(family)?;
        }
        if let (Some(acked), Some(consumed)) = (s.counts.get("records"), s.counts.get("consumed")) {
            let mut m = encoder.encode_descriptor(
                "kbench_consumer_lag_records",
                "Records acknowledged and not yet received by the consumer.",
                None,
                MetricType::Gauge,
            )?;
            m.encode_family(&self.labels)?
                .encode_gauge(&(acked.saturating_sub(*consumed) as i64))?;
        }
        for h in HISTOGRAMS {
            let Some(hist) = s.histograms.get(h.window_field) else {
                continue;
            };
            // Each bucket's own count: the encoder writes them cumulatively (`le`).
            let mut below = 0;
            let buckets: Vec<(f64, u64)> = BUCKETS
                .iter()
                .map(|b| (*b, hist.count_between(0, (*b * 1e6) as u64)))
                .chain(std::iter::once((f64::INFINITY, hist.len())))
                .map(|(b, cumulative)| {
                    let own = cumulative.saturating_sub(below);
                    below = cumulative;
                    (b, own)
                })
                .collect();
            let sum = if hist.is_empty() {
                0.0
            } else {
                hist.mean() * hist.len() as f64 / 1e6
            };
            let mut m = encoder.encode_descriptor(h.name, h.help, None, MetricType::Histogram)?;
            m.encode_family(&self.labels)?
                .encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                    sum,
                    hist.len(),
                    &buckets,
                    None,
                )?;
        }
        Ok(())
    }
}

/// `--metrics-listen` and `--metrics-hold`, for every workload that has a timeline.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct MetricsArgs {
    /// Serve Prometheus metrics of the run at http://ADDR/metrics (e.g. 127.0.0.1:9464; port 0
    /// picks one, printed): records sent, acknowledged and failed, latency histograms, consumer
    /// lag; updated every timeline window (--timeline-interval).
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<std::net::SocketAddr>,

    /// Keep serving /metrics this long after the run (default 0s), so that a last scrape sees the
    /// final counts.
    #[arg(long, value_name = "DURATION", requires = "metrics_listen", value_parser = crate::args::parse_duration)]
    pub metrics_hold: Option<std::time::Duration>,
}

/// A running `/metrics` endpoint and how long to keep it after the run.
pub struct Endpoint {
    task: tokio::task::JoinHandle<()>,
    hold: std::time::Duration,
    /// Over agents: their metrics, frozen when the run ends.
    agents: Option<Arc<AgentMetrics>>,
}

impl MetricsArgs {
    /// With `--metrics-listen`: the run's metrics (feed them its windows through `sink()`) and
    /// their endpoint, started; its address printed on stderr.
    pub async fn start(
        &self,
        workload: &str,
        topic: &str,
    ) -> Result<Option<(Arc<RunMetrics>, Endpoint)>, String> {
        let Some(addr) = self.metrics_listen else {
            return Ok(None);
        };
        let run_id = kbench_bench::spec::fresh_id(&format!("kbench-{workload}"));
        let metrics = RunMetrics::new(workload, topic, &run_id);
        let (bound, task) = serve(addr, metrics.clone()).await?;
        eprintln!("kbench: metrics at http://{bound}/metrics (run_id {run_id})");
        Ok(Some((
            metrics,
            Endpoint {
                task,
                hold: self.metrics_hold.unwrap_or_default(),
                agents: None,
            },
        )))
    }
}

impl MetricsArgs {
    /// [`MetricsArgs::start`] for a CLI run: the metrics fed through `sink` (joined to what it
    /// already feeds), the endpoint to finish after the run; an error printed, with its exit code.
    pub async fn attach(
        &self,
        workload: &str,
        topic: &str,
        sink: &mut WindowSink,
    ) -> Result<Option<Endpoint>, String> {
        Ok(self
            .start(workload, topic)
            .await?
            .map(|(metrics, endpoint)| {
                *sink = std::mem::take(sink).and(metrics.sink());
                endpoint
            }))
    }
}

impl Endpoint {
    /// Over agents, as soon as their run is over (before the agents may go): serve what they
    /// ended with from now on. Nothing for a run of this process.
    pub async fn freeze(&self) {
        if let Some(agents) = &self.agents {
            agents.freeze().await;
        }
    }

    /// Keep serving for the hold, then stop.
    pub async fn finish(self) {
        self.freeze().await;
        if !self.hold.is_zero() {
            tokio::select! {
                _ = tokio::time::sleep(self.hold) => {}
                _ = crate::signals::stop_requested() => {}
            }
        }
        self.task.abort();
    }
}

/// Serve `/metrics` of `metrics` on `addr` until the returned handle is aborted; the bound address.
pub async fn serve(
    addr: std::net::SocketAddr,
    metrics: Arc<RunMetrics>,
) -> Result<(std::net::SocketAddr, tokio::task::JoinHandle<()>), String> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("--metrics-listen {addr}: {e}"))?;
    let bound = listener.local_addr().unwrap_or(addr);
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let metrics = metrics.clone();
            async move { text(metrics.encode()) }
        }),
    );
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((bound, task))
}

/// The exposition answer: the text format's content type.
pub fn text(body: String) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

/// `--metrics-listen` over `--agents`: the coordinator's `/metrics` is the sum of the agents' own.
/// Each agent serves its segment's figures; every agent buckets alike, so counters, buckets, sums
/// and counts add exactly. The series are relabelled as the coordinator's run, and the consumer lag
/// is computed from the sums (an e2e run's producers and consumer are on different agents). A
/// series an agent already served before this run began (its previous run) is left out; an agent
/// that does not answer a scrape counts with what it last served.
pub struct AgentMetrics {
    http: reqwest::Client,
    urls: Vec<String>,
    token: Option<String>,
    labels: Vec<(String, String)>,
    /// The `run_id`s the agents served before this run: not this run's.
    before: std::collections::BTreeSet<String>,
    /// What each agent last served.
    last: Mutex<Vec<String>>,
    /// After the run: the last merge, served for the hold.
    frozen: Mutex<Option<String>>,
    /// One scrape of the agents at a time: an older answer never overwrites a newer one (a
    /// counter that went back would read as a reset).
    scraping: tokio::sync::Mutex<()>,
}

/// How long one scrape of an agent may take.
const AGENT_SCRAPE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

impl AgentMetrics {
    /// Every agent's exposition now (`None` where one does not answer).
    async fn fetch(
        http: &reqwest::Client,
        urls: &[String],
        token: Option<&str>,
    ) -> Vec<Option<String>> {
        futures_util::future::join_all(urls.iter().map(|url| {
            let mut request = http
                .get(format!("{}/metrics", url.trim_end_matches('/')))
                .timeout(AGENT_SCRAPE_TIMEOUT);
            if let Some(t) = token {
                request = request.bearer_auth(t);
            }
            async move {
                let r = request.send().await.ok()?;
                if !r.status().is_success() {
                    return None;
                }
                r.text().await.ok()
            }
        }))
        .await
    }

    /// The agents' metrics now, added up (the frozen merge once the run is over).
    async fn scrape(&self) -> String {
        let _one = self.scraping.lock().await;
        if let Some(text) = self.frozen.lock().expect("metrics lock").clone() {
            return text;
        }
        let answers = Self::fetch(&self.http, &self.urls, self.token.as_deref()).await;
        let mut last = self.last.lock().expect("metrics lock");
        for (kept, answer) in last.iter_mut().zip(answers) {
            if let Some(text) = answer {
                *kept = text;
            }
        }
        merge_expositions(&last, &self.labels, &self.before)
    }

    /// The run is over: what is served from now on is this merge.
    async fn freeze(&self) {
        let text = self.scrape().await;
        *self.frozen.lock().expect("metrics lock") = Some(text);
    }
}

/// A series' labels, in order.
type Labels = Vec<(String, String)>;

/// One sample line of the text format: its metric name, labels and value.
fn parse_sample(line: &str) -> Option<(&str, Labels, f64)> {
    let (series, value) = line.rsplit_once(' ')?;
    let value: f64 = value.parse().ok()?;
    let Some((name, rest)) = series.split_once('{') else {
        return Some((series, Vec::new(), value));
    };
    let body = rest.strip_suffix('}')?;
    let mut labels = Vec::new();
    let mut chars = body.chars().peekable();
    loop {
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if key.is_empty() {
            break;
        }
        if chars.next() != Some('"') {
            return None;
        }
        let mut value = String::new();
        loop {
            match chars.next()? {
                '\\' => match chars.next()? {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                '"' => break,
                c => value.push(c),
            }
        }
        labels.push((key.trim_start_matches(',').to_string(), value));
        if chars.peek() == Some(&',') {
            chars.next();
        }
    }
    Some((name, labels, value))
}

fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The agents' expositions added up: every series of a run not in `before`, its `workload`,
/// `topic` and `run_id` labels replaced by `labels`, summed over the agents; each family's HELP
/// and TYPE once, in the order first seen; `kbench_consumer_lag_records` from the summed counts.
pub fn merge_expositions(
    texts: &[String],
    labels: &[(String, String)],
    before: &std::collections::BTreeSet<String>,
) -> String {
    const LAG: &str = "kbench_consumer_lag_records";
    // Family → its comment lines; series (name and labels, in order) → the sum.
    let mut families: Vec<(String, Vec<String>)> = Vec::new();
    let mut series: Vec<(String, String, String, f64)> = Vec::new();
    for text in texts {
        let mut family = String::new();
        for line in text.lines() {
            if let Some(comment) = line.strip_prefix("# ") {
                let mut parts = comment.splitn(3, ' ');
                let (kind, name) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
                if kind != "HELP" && kind != "TYPE" {
                    continue;
                }
                family = name.to_string();
                if name == LAG {
                    continue;
                }
                match families.iter_mut().find(|(f, _)| *f == family) {
                    Some((_, lines)) if lines.len() < 2 && !lines.contains(&line.to_string()) => {
                        lines.push(line.to_string())
                    }
                    Some(_) => {}
                    None => families.push((family.clone(), vec![line.to_string()])),
                }
                continue;
            }
            let Some((name, mut sample_labels, value)) = parse_sample(line) else {
                continue;
            };
            if family == LAG
                || sample_labels
                    .iter()
                    .any(|(k, v)| k == "run_id" && before.contains(v))
            {
                continue;
            }
            // The run's labels replace the agent's; others (a bucket's `le`) stay, first.
            sample_labels.retain(|(k, _)| !labels.iter().any(|(l, _)| l == k));
            sample_labels.extend(labels.iter().cloned());
            let rendered = sample_labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", label_value(v)))
                .collect::<Vec<_>>()
                .join(",");
            match series
                .iter_mut()
                .find(|(f, n, l, _)| *f == family && n == name && *l == rendered)
            {
                Some(s) => s.3 += value,
                None => series.push((family.clone(), name.to_string(), rendered, value)),
            }
        }
    }
    let mut out = String::new();
    let number = |v: f64| {
        if v.fract() == 0.0 && v.abs() < 9e15 {
            format!("{}", v as i64)
        } else {
            format!("{v}")
        }
    };
    for (family, comments) in &families {
        let samples: Vec<&(String, String, String, f64)> =
            series.iter().filter(|(f, ..)| f == family).collect();
        if samples.is_empty() {
            continue;
        }
        for c in comments {
            out.push_str(c);
            out.push('\n');
        }
        for (_, name, rendered, value) in samples {
            out.push_str(&format!("{name}{{{rendered}}} {}\n", number(*value)));
        }
    }
    let total = |name: &str| -> Option<f64> {
        let mut found = series.iter().filter(|(_, n, ..)| n == name).peekable();
        found.peek()?;
        Some(found.map(|s| s.3).sum())
    };
    if let (Some(acked), Some(consumed)) = (
        total("kbench_records_acked_total"),
        total("kbench_records_consumed_total"),
    ) {
        let rendered = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", label_value(v)))
            .collect::<Vec<_>>()
            .join(",");
        out.push_str(&format!(
            "# HELP {LAG} Records acknowledged and not yet received by the consumer.\n# TYPE {LAG} gauge\n{LAG}{{{rendered}}} {}\n",
            number((acked - consumed).max(0.0))
        ));
    }
    out.push_str("# EOF\n");
    out
}

impl MetricsArgs {
    /// With `--metrics-listen` on a run over `agents`: the coordinator's endpoint, serving the
    /// agents' metrics added up (see [`AgentMetrics`]); its address printed on stderr. Call before
    /// the run's segments start: what the agents serve now is not this run's.
    pub async fn start_agents(
        &self,
        workload: &str,
        topic: &str,
        agents: &crate::coordinator::AgentList,
    ) -> Result<Option<Endpoint>, String> {
        let Some(addr) = self.metrics_listen else {
            return Ok(None);
        };
        let run_id = kbench_bench::spec::fresh_id(&format!("kbench-{workload}"));
        let http = reqwest::Client::new();
        // What the agents serve before the run: earlier runs' series, to leave out.
        let before = AgentMetrics::fetch(&http, &agents.urls, agents.token.as_deref())
            .await
            .into_iter()
            .flatten()
            .flat_map(|text| {
                text.lines()
                    .filter_map(parse_sample)
                    .flat_map(|(_, labels, _)| labels)
                    .filter(|(k, _)| k == "run_id")
                    .map(|(_, v)| v)
                    .collect::<Vec<_>>()
            })
            .collect();
        let source = Arc::new(AgentMetrics {
            http,
            urls: agents.urls.clone(),
            token: agents.token.clone(),
            labels: vec![
                ("workload".into(), workload.into()),
                ("topic".into(), topic.into()),
                ("run_id".into(), run_id.clone()),
            ],
            before,
            last: Mutex::new(vec![String::new(); agents.urls.len()]),
            frozen: Mutex::new(None),
            scraping: tokio::sync::Mutex::new(()),
        });
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("--metrics-listen {addr}: {e}"))?;
        let bound = listener.local_addr().unwrap_or(addr);
        let served = source.clone();
        let app = axum::Router::new().route(
            "/metrics",
            axum::routing::get(move || {
                let source = served.clone();
                async move { text(source.scrape().await) }
            }),
        );
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        eprintln!(
            "kbench: metrics at http://{bound}/metrics (run_id {run_id}; the {} agents' added up)",
            agents.urls.len()
        );
        Ok(Some(Endpoint {
            task,
            hold: self.metrics_hold.unwrap_or_default(),
            agents: Some(source),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two agents' expositions (one producing, one consuming, one of an earlier run) added up:
    /// counters and buckets summed under the coordinator's labels, the lag from the sums.
    #[test]
    fn agents_expositions_add_up_under_the_runs_labels() {
        fn feed(
            m: &Arc<RunMetrics>,
            counters: &'static [&'static str],
            counts: &[u64],
            us: &[u64],
        ) {
            let mut t = kbench_bench::timeline::Timeline::new(
                std::time::SystemTime::now(),
                counters,
                &["latency"],
            )
            .with_sink(m.sink());
            let mut h = kbench_bench::measure::latency_histogram();
            for v in us {
                h.record(*v).unwrap();
            }
            t.take(std::time::SystemTime::now(), counts, vec![h]);
        }
        let a = RunMetrics::new("e2e-producers", "t", "seg-a");
        feed(&a, &["records", "sent"], &[5, 6], &[400, 3_000]);
        let b = RunMetrics::new("e2e-producers", "t", "seg-b");
        feed(&b, &["records", "sent"], &[7, 7], &[400]);
        let c = RunMetrics::new("e2e-consumer", "t", "seg-c");
        feed(&c, &["consumed"], &[9], &[]);
        let old = RunMetrics::new("produce", "t", "seg-old");
        feed(&old, &["records", "sent"], &[1000, 1000], &[400]);
        let labels = vec![
            ("workload".to_string(), "e2e".to_string()),
            ("topic".to_string(), "t".to_string()),
            ("run_id".to_string(), "r".to_string()),
        ];
        let before = std::collections::BTreeSet::from(["seg-old".to_string()]);
        let text = merge_expositions(
            &[a.encode(), b.encode(), c.encode(), old.encode()],
            &labels,
            &before,
        );
        let series = |name: &str| format!("{name}{{workload=\"e2e\",topic=\"t\",run_id=\"r\"}}");
        for (name, n) in [
            ("kbench_records_acked_total", 12),
            ("kbench_records_sent_total", 13),
            ("kbench_records_consumed_total", 9),
            ("kbench_consumer_lag_records", 3),
            ("kbench_produce_latency_seconds_count", 3),
        ] {
            assert!(
                text.contains(&format!("{} {n}\n", series(name))),
                "{name} {n}: {text}"
            );
        }
        assert!(
            text.contains(
                "kbench_produce_latency_seconds_bucket{le=\"0.0005\",workload=\"e2e\",topic=\"t\",run_id=\"r\"} 2\n"
            ),
            "{text}"
        );
        assert_eq!(
            text.matches("# TYPE kbench_records_acked_total counter")
                .count(),
            1,
            "{text}"
        );
        assert!(!text.contains("seg-"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn windows_become_counters_and_buckets() {
        let m = RunMetrics::new("produce", "t", "r1");
        let mut t = kbench_bench::timeline::Timeline::new(
            std::time::SystemTime::now(),
            &["records", "failed", "bytes", "sent"],
            &["latency"],
        )
        .with_sink(m.sink());
        let mut h = kbench_bench::measure::latency_histogram();
        for v in [400u64, 450, 1_500, 2_000_000] {
            h.record(v).unwrap();
        }
        t.take(std::time::SystemTime::now(), &[4, 0, 400, 4], vec![h]);
        let text = m.encode();
        assert!(
            text.contains(
                "kbench_records_acked_total{workload=\"produce\",topic=\"t\",run_id=\"r1\"} 4"
            ),
            "{text}"
        );
        for (le, n) in [
            ("0.0005", 2),
            ("0.001", 2),
            ("0.0025", 3),
            ("2.5", 4),
            ("+Inf", 4),
        ] {
            let line = format!(
                "kbench_produce_latency_seconds_bucket{{workload=\"produce\",topic=\"t\",run_id=\"r1\",le=\"{le}\"}} {n}\n"
            );
            assert!(text.contains(&line), "{line} in {text}");
        }
        assert!(text.contains("kbench_produce_latency_seconds_count{workload=\"produce\",topic=\"t\",run_id=\"r1\"} 4"), "{text}");
        assert!(!text.contains("kbench_records_consumed"), "{text}");
    }
}
