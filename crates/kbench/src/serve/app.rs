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
}

impl App {
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
