//! `kbench serve`: the HTTP control API. `error` (the error answer, body parsing), `registry` (the
//! runs, supervised), `app` (what handlers share), `runs` (starting the library's workloads),
//! `pub_sub` (the seed's `/pub-sub-demo`), `v1` (kbench's own `/v1/runs`) and `http` (routes, auth,
//! OpenAPI). Every request body becomes the same spec types the CLI builds.

mod app;
mod error;
mod http;
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

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on. Loopback unless told otherwise; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Default Kafka bootstrap servers for runs that name none. Without it (and without
    /// kafkaBootstrapServers / bootstrap_servers in a request) kbench starts an embedded broker.
    #[arg(long, visible_alias = "broker-list")]
    pub bootstrap_server: Option<String>,

    /// Require `Authorization: Bearer TOKEN` on every request.
    #[arg(long, env = "KBENCH_TOKEN", hide_env_values = true)]
    pub token: Option<String>,

    /// Where every finished run's result document is written (and read back at start).
    #[arg(long, default_value = "kbench-results")]
    pub results_dir: PathBuf,
}

/// `kbench serve`.
pub async fn run(args: ServeArgs) -> u8 {
    let default_bootstrap = match args.bootstrap_server.as_deref() {
        Some(s) => match kbench_bench::spec::bootstrap_list(s) {
            Ok(v) => Some(v),
            Err(e) => {
                eprintln!("kbench: error: --bootstrap-server {e}");
                return crate::args::EXIT_USAGE;
            }
        },
        None => None,
    };
    if args.token.as_deref().is_some_and(str::is_empty) {
        eprintln!("kbench: error: --token: must not be empty");
        return crate::args::EXIT_USAGE;
    }
    if let Err(e) = std::fs::create_dir_all(&args.results_dir) {
        eprintln!(
            "kbench: error: --results-dir {}: cannot create it: {e}",
            args.results_dir.display()
        );
        return crate::args::EXIT_USAGE;
    }
    let listener = match tokio::net::TcpListener::bind(args.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("kbench: error: --listen {}: {e}", args.listen);
            return crate::args::EXIT_USAGE;
        }
    };
    let addr = listener.local_addr().unwrap_or(args.listen);
    if !addr.ip().is_loopback() && args.token.is_none() {
        eprintln!(
            "kbench serve: warning: listening on {addr}, beyond loopback, without --token: anyone who can reach it can start load"
        );
    }
    let app = Arc::new(App {
        runs: Arc::new(Registry::load(&args.results_dir)),
        token: args.token.clone(),
        default_bootstrap,
        embedded: tokio::sync::Mutex::new(None),
    });
    let router = http::router(app.clone());
    println!("kbench serve: listening on http://{addr}");
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    let served = axum::serve(listener, router)
        .with_graceful_shutdown(async {
            crate::signals::stop_requested().await;
        })
        .await;
    // Stop whatever runs and let it write its result (bounded), then stop the embedded broker.
    for id in app.runs.stop_all() {
        let _ = tokio::time::timeout(STOP_GRACE, app.runs.wait_done(&id)).await;
    }
    if let Some(b) = app.embedded.lock().await.take() {
        b.stop().await;
    }
    match served {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("kbench serve: error: {e}");
            crate::args::EXIT_FAILED
        }
    }
}
