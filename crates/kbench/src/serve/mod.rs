//! `kbench serve`: the HTTP control API. `error` (the error answer, body parsing), `registry` (the
//! runs, supervised), `app` (what handlers share), `runs` (starting the library's workloads),
//! `pub_sub` (the seed's `/pub-sub-demo`), `v1` (kbench's own `/v1/runs`), `payloads` (their body
//! parsers as functions of bytes, for fuzzing) and `http` (routes, auth, OpenAPI). Every request body becomes the same spec types the CLI builds.

mod agent;
mod app;
mod dashboard;
mod distributed;
mod error;
mod events;
mod history;
mod http;
mod listen;
pub mod payloads;
pub(crate) mod pub_sub;
mod registry;
mod runs;
pub(crate) mod v1;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use crate::serve::app::App;
use crate::serve::registry::{Registry, STOP_GRACE};

use crate::harness::{CliError, CliResult};

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub limits: crate::args::LimitArgs,

    /// For runs against --bootstrap-server; a /v1 body's `properties` replace them.
    #[command(flatten)]
    pub connection: crate::args::ConnectionArgs,

    /// Address to listen on. Loopback unless told otherwise; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Default Kafka bootstrap servers for runs that name none. Without it (and without
    /// kafkaBootstrapServers / bootstrap_servers in a request) kbench starts an embedded broker.
    #[arg(long, visible_alias = "broker-list")]
    pub bootstrap_server: Option<String>,

    /// Require `Authorization: Bearer TOKEN` on every request. A flag is visible to anyone who can
    /// list processes: prefer KBENCH_TOKEN or --token-file.
    #[arg(long, env = "KBENCH_TOKEN", hide_env_values = true)]
    pub token: Option<String>,

    /// Read the token from this file (its first line).
    #[arg(long, conflicts_with = "token")]
    pub token_file: Option<PathBuf>,

    /// Another `Host` this server answers to (repeatable): a name (any port) or name:port. Its own
    /// address and localhost are always allowed; `*` allows any (behind a proxy that checks).
    #[arg(long, value_name = "HOST")]
    pub allowed_host: Vec<String>,

    /// An origin whose browser requests are allowed (repeatable), e.g. http://localhost:3000. Without
    /// one, every request that carries an Origin header is refused.
    #[arg(long, value_name = "ORIGIN")]
    pub cors_origin: Vec<String>,

    /// The token of the agents a /v1 run spreads over (`agents`), unless the request gives its own
    /// `agent_token`.
    #[arg(long, env = "KBENCH_AGENT_TOKEN", hide_env_values = true)]
    pub agent_token: Option<String>,

    /// `kbench agent`: exit once this many segments have ended and their results were read by
    /// the coordinator (10 s later, so that it can still read the clock), e.g. as the pods of a
    /// Kubernetes Job.
    #[arg(long, value_name = "N", value_parser = crate::args::positive_usize)]
    pub exit_after_segments: Option<usize>,

    /// `kbench agent`: how long a segment may go without a word from its coordinator (whose
    /// progress polls come every second) before the agent stops it, keeps its partial result
    /// marked `abandoned`, and is free for the next run. At least 3s (default 15s).
    #[arg(long, value_name = "DURATION", value_parser = crate::args::parse_duration)]
    pub lease: Option<std::time::Duration>,

    /// A results store to read (an SQLite file, as `--store` on a workload fills it): the
    /// dashboard's history charts, change points and compare view, and `/v1/history`. Read only.
    #[arg(long, value_name = "DB")]
    pub store: Option<String>,

    /// Where every finished run's result document is written (and read back at start).
    #[arg(long, default_value = "kbench-results")]
    pub results_dir: PathBuf,
}

/// An agent's segment lease when `--lease` is not given.
const DEFAULT_LEASE: std::time::Duration = std::time::Duration::from_secs(15);
/// The shortest lease: the coordinator polls every second, and a poll may take a moment.
const MIN_LEASE: std::time::Duration = std::time::Duration::from_secs(3);

/// Stop every segment whose lease ran out (its coordinator gone), as a stop would; each stop runs
/// beside the others, bounded by the registry's grace.
async fn watch_leases(runs: Arc<Registry>) {
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        for id in runs.expired() {
            let runs = runs.clone();
            tokio::spawn(async move { runs.abandon(&id).await });
        }
    }
}

/// `kbench serve`; with `agent`, `kbench agent` (the `/agent/v1` routes too).
pub async fn run(args: ServeArgs, agent: bool) -> CliResult {
    if !agent && args.exit_after_segments.is_some() {
        return Err(CliError::usage(
            "--exit-after-segments: only for `kbench agent`",
        ));
    }
    if !agent && args.lease.is_some() {
        return Err(CliError::usage("--lease: only for `kbench agent`"));
    }
    if agent && args.store.is_some() {
        return Err(CliError::usage("--store: only for `kbench serve`"));
    }
    let store = args.store.as_deref().map(history::open).transpose()?;
    let lease = agent.then(|| args.lease.unwrap_or(DEFAULT_LEASE));
    if lease.is_some_and(|l| l < MIN_LEASE) {
        return Err(CliError::usage(format!(
            "--lease: at least {} s (the coordinator asks about its segments every second)",
            MIN_LEASE.as_secs()
        )));
    }
    if agent {
        // A test hook (docs/DESIGN.md, "Distributed runs travel as specs"): an agent whose clock
        // is wrong.
        if let Ok(ms) = std::env::var("KBENCH_TEST_CLOCK_SHIFT_MS") {
            let ms = ms.trim().parse::<i64>().map_err(|_| {
                CliError::usage("KBENCH_TEST_CLOCK_SHIFT_MS: not a whole number of ms")
            })?;
            kbench_bench::clock::set_shift_us(ms.saturating_mul(1000));
        }
    }
    let default_bootstrap = match args.bootstrap_server.as_deref() {
        Some(s) => Some(
            kbench_bench::spec::bootstrap_list(s)
                .map_err(|e| CliError::usage(format!("--bootstrap-server {e}")))?,
        ),
        None => None,
    };
    let token = match &args.token_file {
        Some(path) => {
            let text = kbench_client::input::read_text(path, kbench_client::input::SECRET_FILE)
                .map_err(|e| CliError::usage(format!("--token-file {}: {e}", path.display())))?;
            Some(text.lines().next().unwrap_or_default().trim().to_string())
        }
        None => args.token.clone(),
    };
    let client_pairs = args.connection.pairs()?;
    let client = args.connection.settings()?;
    if token.as_deref().is_some_and(str::is_empty) {
        return Err(CliError::usage("--token: must not be empty"));
    }
    std::fs::create_dir_all(&args.results_dir).map_err(|e| {
        CliError::usage(format!(
            "--results-dir {}: cannot create it: {e}",
            args.results_dir.display()
        ))
    })?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| CliError::usage(format!("--listen {}: {e}", args.listen)))?;
    let addr = listener.local_addr().unwrap_or(args.listen);
    if !addr.ip().is_loopback() && token.is_none() {
        eprintln!(
            "kbench serve: warning: listening on {addr}, beyond loopback, without --token: anyone who can reach it can start load"
        );
    }
    let port = addr.port();
    let mut allowed_hosts: Vec<String> = [
        addr.to_string(),
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
    ]
    .into_iter()
    .chain(args.allowed_host.iter().map(|h| h.to_ascii_lowercase()))
    .collect();
    if port == 80 {
        allowed_hosts.extend(["localhost".to_string(), "127.0.0.1".to_string()]);
    }
    let app = Arc::new(App {
        runs: Arc::new(Registry::load(&args.results_dir)),
        token,
        default_bootstrap,
        embedded: tokio::sync::Mutex::new(None),
        allowed_hosts,
        cors_origins: args.cors_origin.clone(),
        request_ids: std::sync::atomic::AtomicU64::new(0),
        limits: args.limits.limits(),
        client,
        client_pairs,
        agent,
        agent_token: args.agent_token.clone().filter(|t| !t.is_empty()),
        exit_after: args.exit_after_segments,
        lease,
        delivered: Default::default(),
        exit: tokio::sync::Notify::new(),
        metrics: Default::default(),
        closing: tokio::sync::watch::Sender::new(false),
        store: store.map(std::sync::Mutex::new),
    });
    let router = http::router(app.clone());
    let max_connections = listen::connection_limit(listen::raise_fd_limit());
    let name = if agent { "agent" } else { "serve" };
    println!("kbench {name}: listening on http://{addr}");
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    if lease.is_some() {
        tokio::spawn(watch_leases(app.runs.clone()));
    }
    let exit = app.clone();
    listen::serve(listener, router, max_connections, async move {
        tokio::select! {
            _ = crate::signals::stop_requested() => {}
            () = exit.exit.notified() => println!("kbench agent: every segment delivered; exiting"),
        }
        exit.closing.send_replace(true);
    })
    .await;
    // Stop whatever runs and let it write its result (bounded), then stop the embedded broker.
    for id in app.runs.stop_all() {
        let _ = tokio::time::timeout(STOP_GRACE, app.runs.wait_done(&id)).await;
    }
    if let Some(b) = app.embedded.lock().await.take() {
        b.stop().await;
    }
    Ok(0)
}
