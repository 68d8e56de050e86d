//! Serving connections with limits a hostile client cannot get around: a request's headers must
//! arrive within [`HEADER_TIMEOUT`] (which also closes a keep-alive connection idle that long), its
//! body within [`BODY_TIMEOUT`], and at most [`connection_limit`] connections are open at once
//! (more are closed as they are accepted, so file descriptors never run out). Shutdown stops
//! accepting and lets open requests finish, within a bound.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// How long a client may take to send a request's headers, and how long a connection may sit idle.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client may take to send a request's body.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long open requests may take to finish once the server is told to stop.
const SHUTDOWN_PATIENCE: Duration = Duration::from_secs(90);

/// Raise this process's open-file limit to its hard limit (at most 65 536): every connection is a
/// file descriptor.
pub fn raise_fd_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        let want = lim.rlim_max.min(65_536);
        if want > lim.rlim_cur {
            let raised = libc::rlimit {
                rlim_cur: want,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return want;
            }
        }
    }
    lim.rlim_cur
}

/// The most connections open at once: what the file-descriptor limit allows, less a reserve for
/// the runs' own connections and files, at most 4 096.
pub fn connection_limit(fd_limit: u64) -> usize {
    (fd_limit.saturating_sub(256) as usize).clamp(16, 4096)
}

/// Serve `router` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    max_connections: usize,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(max_connections));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors, for instance: wait a little instead of spinning.
                    tracing::warn!("accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            // Full: closed at once, so that it holds no descriptor.
            drop(stream);
            continue;
        };
        let service = TowerToHyperService::new(router.clone());
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_TIMEOUT)
            .serve_connection(TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            let _ = connection.await;
            drop(slot);
        });
    }
    let _ = tokio::time::timeout(SHUTDOWN_PATIENCE, graceful.shutdown()).await;
}
