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

/// What a failed request tells a client about the cluster: the one classification the producer
/// and consumer engines act on (never lists of codes at the call sites).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// The client's picture of the cluster is out of date (the partition's leader moved, or the
    /// broker does not know the partition yet): refresh metadata once, then go to the leader it
    /// names.
    StaleMetadata,
    /// The broker could not be reached or did not answer (a refused connect, a lost connection, a
    /// client-side time-out): back off from that broker, and refresh metadata in case leadership
    /// moved away from it.
    Unreachable,
    /// Worth trying the same broker again after a back-off (REQUEST_TIMED_OUT,
    /// NOT_ENOUGH_REPLICAS, a coordinator loading, …).
    Retriable,
    /// Retrying cannot help (a record the broker refuses, an authorization failure, a version
    /// that cannot hold).
    Fatal,
}

/// The error codes that mean "your metadata is stale" (Java's `InvalidMetadataException` family).
const STALE_METADATA_CODES: &[i16] = &[
    3,   // UNKNOWN_TOPIC_OR_PARTITION
    5,   // LEADER_NOT_AVAILABLE
    6,   // NOT_LEADER_OR_FOLLOWER
    74,  // FENCED_LEADER_EPOCH
    75,  // UNKNOWN_LEADER_EPOCH
    100, // UNKNOWN_TOPIC_ID
    103, // INCONSISTENT_TOPIC_ID
];

impl ClientError {
    /// How a client should react to this error.
    pub fn class(&self) -> ErrorClass {
        match self {
            ClientError::Disconnected { .. }
            | ClientError::Connect { .. }
            | ClientError::Timeout { .. } => ErrorClass::Unreachable,
            ClientError::Kafka { code, .. } if STALE_METADATA_CODES.contains(code) => {
                ErrorClass::StaleMetadata
            }
            ClientError::Kafka { code, .. } if is_retriable_code(*code) => ErrorClass::Retriable,
            _ => ErrorClass::Fatal,
        }
    }

    /// A short name for counting retries by cause: Kafka's own name for an error code
    /// (`NOT_LEADER_OR_FOLLOWER`), else what happened to the connection.
    pub fn cause(&self) -> String {
        match self {
            ClientError::Kafka { code, .. } => kafka_error_code_name(*code),
            ClientError::Disconnected { .. } => "connection lost".into(),
            ClientError::Connect { .. } => "cannot connect".into(),
            ClientError::Timeout { .. } => "no answer within request.timeout.ms".into(),
            ClientError::Version(_) => "version".into(),
            ClientError::Frame(_) => "malformed response".into(),
            ClientError::Auth { .. } => "authentication".into(),
            ClientError::Other(_) => "other".into(),
        }
    }
}

/// Kafka's upper-case name for an error code, as the protocol guide spells it
/// (`NOT_LEADER_OR_FOLLOWER`); `UNKNOWN_CODE_<n>` for a code kafka-protocol does not know.
pub fn kafka_error_code_name(code: i16) -> String {
    let Some(e) = kafka_protocol::ResponseError::try_from_code(code) else {
        return format!("UNKNOWN_CODE_{code}");
    };
    let camel = format!("{e:?}");
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_classed_for_the_engines() {
        let e = |code| ClientError::kafka("Produce", "t-0", code);
        assert_eq!(e(6).class(), ErrorClass::StaleMetadata);
        assert_eq!(e(3).class(), ErrorClass::StaleMetadata);
        assert_eq!(e(7).class(), ErrorClass::Retriable); // REQUEST_TIMED_OUT
        assert_eq!(e(19).class(), ErrorClass::Retriable); // NOT_ENOUGH_REPLICAS
        assert_eq!(e(87).class(), ErrorClass::Fatal); // INVALID_RECORD
        let lost = ClientError::Disconnected {
            addr: "a:1".into(),
            reason: "eof".into(),
        };
        assert_eq!(lost.class(), ErrorClass::Unreachable);
        assert_eq!(e(6).cause(), "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(
            kafka_error_code_name(20),
            "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
        );
    }
}
