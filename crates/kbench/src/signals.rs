//! The signals that stop a run: Ctrl-C (SIGINT) and SIGTERM, in one place for every subcommand.

/// Resolves on the first SIGINT or SIGTERM, with its name: `interrupted` or `terminated`.
pub async fn stop_requested() -> &'static str {
    tokio::select! {
        _ = tokio::signal::ctrl_c() => "interrupted",
        _ = terminate() => "terminated",
    }
}

/// Resolves on SIGTERM (never, where it cannot be listened for).
pub async fn terminate() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut s) => {
            s.recv().await;
        }
        Err(_) => std::future::pending().await,
    }
}
