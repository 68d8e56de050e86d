//! Client errors: each one says which broker, API or topic it is about, so that the front end can
//! print it as the one clear message the user sees.

use kbench_wire::{FrameError, VersionError};

#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    #[error("cannot connect to {addr}: {reason}")]
    Connect { addr: String, reason: String },
    #[error("connection to {addr} was lost: {reason}")]
    Disconnected { addr: String, reason: String },
    #[error("{api} request to {addr} timed out after {timeout_ms} ms")]
    Timeout {
        addr: String,
        api: String,
        timeout_ms: u64,
    },
    #[error("{0}")]
    Version(#[from] VersionError),
    #[error("{0}")]
    Frame(String),
    #[error("{api} failed for {what}: {error} (Kafka error code {code})")]
    Kafka {
        api: String,
        what: String,
        code: i16,
        error: String,
    },
    /// SASL failed: which broker, mechanism and user, and why. Never the password or token.
    #[error("SASL {mechanism} authentication as {user} to {addr} failed: {reason}")]
    Auth {
        addr: String,
        mechanism: String,
        user: String,
        reason: String,
    },
    #[error("{0}")]
    Other(String),
}

impl From<FrameError> for ClientError {
    fn from(e: FrameError) -> Self {
        ClientError::Frame(e.to_string())
    }
}

impl ClientError {
    /// An error from a Kafka error code, described by its Kafka name.
    pub fn kafka(api: &str, what: impl Into<String>, code: i16) -> Self {
        ClientError::Kafka {
            api: api.to_string(),
            what: what.into(),
            code,
            error: kafka_error_name(code),
        }
    }

    /// The Kafka error code, when the broker answered with one.
    pub fn code(&self) -> Option<i16> {
        match self {
            ClientError::Kafka { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether retrying the same request later may succeed: lost connections, time-outs and the error
    /// codes Kafka marks retriable.
    pub fn is_retriable(&self) -> bool {
        match self {
            ClientError::Disconnected { .. }
            | ClientError::Timeout { .. }
            | ClientError::Connect { .. } => true,
            ClientError::Kafka { code, .. } => is_retriable_code(*code),
            _ => false,
        }
    }
}

/// Kafka's name for an error code (e.g. "NOT_LEADER_OR_FOLLOWER"-like text from kafka-protocol).
pub fn kafka_error_name(code: i16) -> String {
    kafka_protocol::ResponseError::try_from_code(code)
        .map_or_else(|| "NONE".into(), |e| e.to_string())
}

/// Whether Kafka marks the error code retriable.
pub fn is_retriable_code(code: i16) -> bool {
    kafka_protocol::ResponseError::try_from_code(code).is_some_and(|e| e.is_retriable())
}
