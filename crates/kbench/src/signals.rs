//! The signals that stop a run: Ctrl-C (SIGINT) and SIGTERM, in one place for every subcommand.
//!
//! [`install`] listens from the program's first moment, so a signal that arrives while the embedded
//! broker starts or thousands of producers connect is never lost nor fatal: it is kept, and every
//! later [`stop_requested`] sees it. A second signal ends the process at once (exit 130), as a user
//! who presses Ctrl-C twice expects.

use std::sync::OnceLock;

use tokio::sync::watch;

static STOP: OnceLock<watch::Sender<Option<&'static str>>> = OnceLock::new();

fn sender() -> &'static watch::Sender<Option<&'static str>> {
    STOP.get_or_init(|| watch::channel(None).0)
}

/// Start listening for SIGINT and SIGTERM. Call once, inside the runtime, before anything else.
pub fn install() {
    let interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt());
    let terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
    let (Ok(mut interrupt), Ok(mut terminate)) = (interrupt, terminate) else {
        tracing::warn!("cannot listen for SIGINT/SIGTERM; they end kbench without a result");
        return;
    };
    tokio::spawn(async move {
        loop {
            let which = tokio::select! {
                _ = interrupt.recv() => "interrupted",
                _ = terminate.recv() => "terminated",
            };
            if sender().borrow().is_some() {
                eprintln!("kbench: {which} again: exiting now");
                std::process::exit(130);
            }
            sender().send_replace(Some(which));
        }
    });
}

/// Resolves on the first SIGINT or SIGTERM (also one that came before this call), with its name:
/// `interrupted` or `terminated`.
pub async fn stop_requested() -> &'static str {
    let mut rx = sender().subscribe();
    match rx.wait_for(Option::is_some).await {
        Ok(which) => which.unwrap_or("interrupted"),
        Err(_) => std::future::pending().await,
    }
}

/// Drive `job` to its end. A stop request (Ctrl-C, SIGTERM) or the embedded broker exiting asks
/// `stop`, saying why. Returns the job's output and whether the user asked for the stop.
pub async fn until_stopped<T>(
    job: impl std::future::Future<Output = T>,
    stop: &kbench_bench::Stop,
    mut embedded: Option<&mut crate::embedded::EmbeddedBroker>,
) -> (T, bool) {
    tokio::pin!(job);
    let mut interrupted = false;
    loop {
        tokio::select! {
            out = &mut job => return (out, interrupted),
            why = stop_requested(), if !stop.is_stopped() => {
                interrupted = true;
                stop.stop(why);
            }
            why = async { match embedded.as_mut() { Some(b) => b.exited().await, None => std::future::pending().await } }, if !stop.is_stopped() => {
                stop.stop(why);
            }
        }
    }
}
