//! A run's stop, in one value (mini-redis's `Shutdown`): asked once, with why, seen by every task of
//! the run. A front end asks it (a signal, the embedded broker gone, a DELETE, a lost coordinator);
//! a job watches it and says in its result why it ended early.

use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

/// The stop of one run. Clones share it.
#[derive(Debug, Clone, Default)]
pub struct Stop {
    token: CancellationToken,
    reason: Arc<Mutex<Option<String>>>,
}

impl Stop {
    pub fn new() -> Stop {
        Stop::default()
    }

    /// Ask the run to stop, saying why; the first reason given is the one kept.
    pub fn stop(&self, reason: impl Into<String>) {
        {
            let mut kept = self.reason.lock().expect("stop reason lock");
            if kept.is_none() {
                *kept = Some(reason.into());
            }
        }
        self.token.cancel();
    }

    pub fn is_stopped(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Resolves once the run is asked to stop.
    pub async fn stopped(&self) {
        self.token.cancelled().await
    }

    /// Why the run was asked to stop ("stopped" when it was, without a word); `None` while it runs.
    pub fn reason(&self) -> Option<String> {
        if !self.is_stopped() {
            return None;
        }
        Some(
            self.reason
                .lock()
                .expect("stop reason lock")
                .clone()
                .unwrap_or_else(|| "stopped".into()),
        )
    }

    /// The token under the stop, for the client's engines (which take a `CancellationToken`).
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_reason_is_kept_and_every_clone_sees_it() {
        let stop = Stop::new();
        let seen = stop.clone();
        assert_eq!(seen.reason(), None);
        stop.stop("interrupted");
        stop.stop("terminated");
        assert!(seen.is_stopped());
        assert_eq!(seen.reason().as_deref(), Some("interrupted"));
    }
}
