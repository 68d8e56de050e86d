//! The bench layer's errors: a spec that does not hold, a cluster or proxy that cannot be reached or
//! used, a result that cannot be written. Each says what it is about; the front end names the flag
//! or field (a [`SpecError`] carries the spec's own field name, which each front end maps to its own).

use kbench_client::ClientError;
use kbench_rest::RestError;

/// A spec value that cannot be run: the spec's field (snake_case, as in the `/v1` API) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct SpecError {
    pub field: &'static str,
    pub reason: String,
}

impl SpecError {
    pub fn new(field: &'static str, reason: impl Into<String>) -> SpecError {
        SpecError {
            field,
            reason: reason.into(),
        }
    }
}

/// Why a workload could not run (or could not finish writing its result).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// No broker of the bootstrap list answered (or none in time).
    #[error("{bootstrap}: cannot connect: {reason}")]
    Connect { bootstrap: String, reason: String },
    /// A pinned or needed API version cannot hold against this broker.
    #[error(transparent)]
    Version(#[from] kbench_wire::VersionError),
    /// The topic could not be found, created or used.
    #[error("topic {topic:?}: {source}")]
    Topic { topic: String, source: ClientError },
    #[error(transparent)]
    Client(ClientError),
    #[error(transparent)]
    Rest(#[from] RestError),
    /// A run-time condition that stops the workload (e.g. a consumer that never got partitions).
    #[error("{0}")]
    Run(String),
    /// The run was stopped while a consumer was still joining its group: it read nothing.
    #[error("stopped while joining the group")]
    StoppedJoining,
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

impl From<ClientError> for BenchError {
    fn from(e: ClientError) -> Self {
        match e {
            ClientError::Version(v) => BenchError::Version(v),
            other => BenchError::Client(other),
        }
    }
}

impl BenchError {
    /// The topic could not be found, created or used.
    pub fn topic(topic: &str, e: ClientError) -> BenchError {
        BenchError::Topic {
            topic: topic.to_string(),
            source: e,
        }
    }

    /// A connect failure towards `bootstrap`, said the way a user can act on it.
    pub fn connect(bootstrap: &str, e: ClientError) -> BenchError {
        match e {
            ClientError::Connect { reason, .. } => BenchError::Connect {
                bootstrap: bootstrap.to_string(),
                reason,
            },
            other => other.into(),
        }
    }
}
