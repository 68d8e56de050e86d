//! What every handler of `kbench serve` shares: the run registry, the token, the default cluster,
//! and the embedded broker the server starts on first use and keeps.

use std::sync::Arc;

use axum::http::StatusCode;

use crate::embedded::EmbeddedBroker;
use crate::serve::error::ApiError;
use crate::serve::registry::Registry;

pub struct App {
    pub runs: Arc<Registry>,
    pub token: Option<String>,
    pub default_bootstrap: Option<Vec<String>>,
    pub embedded: tokio::sync::Mutex<Option<EmbeddedBroker>>,
    /// `Host` values this server answers to: its own address, `localhost`, and `--allowed-host`.
    pub allowed_hosts: Vec<String>,
    /// Origins whose browser requests are allowed (`--cors-origin`); none by default.
    pub cors_origins: Vec<String>,
    pub request_ids: std::sync::atomic::AtomicU64,
    /// What every run's spec is checked against (`--max-record-size`, `--memory-budget`).
    pub limits: kbench_bench::spec::Limits,
    /// Connection and security properties for runs against the server's default cluster.
    pub client: kbench_client::ConnectionSettings,
    /// The same, as given (what a distributed run's agents are sent).
    pub client_pairs: Vec<(String, String)>,
    /// `kbench agent`: the `/agent/v1` routes are served.
    pub agent: bool,
    /// The token of the agents distributed runs go to (`--agent-token`).
    pub agent_token: Option<String>,
    /// `kbench agent --exit-after-segments N`: the segments whose result a coordinator has read,
    /// and when to exit (a Kubernetes Job's agents end with the run).
    pub exit_after: Option<usize>,
    /// `kbench agent --lease`: how long a segment may go unasked about by its coordinator.
    pub lease: Option<std::time::Duration>,
    pub delivered: std::sync::Mutex<std::collections::BTreeSet<String>>,
    pub exit: tokio::sync::Notify,
    /// The latest run's Prometheus metrics (`/metrics`).
    pub metrics: std::sync::Mutex<Option<Arc<crate::metrics::RunMetrics>>>,
    /// Set once the server is told to stop: open event streams end.
    pub closing: tokio::sync::watch::Sender<bool>,
    /// The results store the dashboard's history reads (`--store`), opened at start.
    pub store: Option<std::sync::Mutex<kbench_bench::history::Store>>,
}

impl App {
    /// A new run's metrics, now the ones `/metrics` shows; what its timeline feeds them through.
    pub fn metrics_for(
        &self,
        workload: &str,
        topic: &str,
        run_id: &str,
    ) -> kbench_bench::timeline::WindowSink {
        let m = crate::metrics::RunMetrics::new(workload, topic, run_id);
        let sink = m.sink();
        *self.metrics.lock().expect("metrics lock") = Some(m);
        sink
    }

    /// A fresh request id.
    pub fn next_request_id(&self) -> u64 {
        self.request_ids
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1
    }

    /// Whether `host` names this server by an allowed name, not merely through `--allowed-host
    /// '*'`: only then is an Origin of the same host this server's own page (with `*`, a rebound
    /// name would pass as well).
    pub fn host_named(&self, host: &str) -> bool {
        !self.allowed_hosts.iter().any(|a| a == "*") && self.host_allowed(host)
    }

    /// Whether `host` (a `Host` header) names this server: one of the allowed `name:port` values,
    /// or an allowed name given without a port.
    pub fn host_allowed(&self, host: &str) -> bool {
        let host = host.trim().to_ascii_lowercase();
        let name = match host.rsplit_once(':') {
            Some((n, p)) if p.chars().all(|c| c.is_ascii_digit()) && !n.ends_with(':') => n,
            _ => host.as_str(),
        };
        self.allowed_hosts
            .iter()
            .any(|a| *a == host || (!a.contains(':') && a == name) || a == "*")
    }
    /// The bootstrap list for a run: the request's, the server's, or the embedded broker (started
    /// once, kept for the server's life). Also whether it is the embedded one.
    pub async fn bootstrap(
        &self,
        requested: Option<Vec<String>>,
    ) -> Result<(Vec<String>, bool), ApiError> {
        if let Some(b) = requested.or_else(|| self.default_bootstrap.clone()) {
            return Ok((b, false));
        }
        let mut embedded = self.embedded.lock().await;
        if embedded.is_none() {
            let broker = EmbeddedBroker::start()
                .await
                .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e))?;
            eprintln!(
                "kbench serve: started an embedded Tansu broker (in-memory) on {}",
                broker.addr()
            );
            *embedded = Some(broker);
        }
        let addr = embedded
            .as_ref()
            .map(|b| b.addr().to_string())
            .unwrap_or_default();
        Ok((vec![addr], true))
    }
}
