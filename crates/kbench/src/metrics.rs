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
    /// Keep serving for the hold, then stop.
    pub async fn finish(self) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
