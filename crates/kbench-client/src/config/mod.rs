//! Kafka client settings with their defaults, defined once for every front end, and client properties
//! by the names Java and librdkafka users know (`-X key=value`, `--producer-props`, properties files).
//! An unknown or unsupported key is an error naming it; a value that does not parse is an error
//! naming the key and where it came from. Secret values are never echoed.
//!
//! Three kinds of settings, each plain data with Java's defaults: [`ConnectionSettings`] (where and
//! how securely; every client), [`ProducerSettings`] and [`ConsumerSettings`] (what a spec holds
//! whole). [`ProducerProperties`] and [`ConsumerProperties`] are what a list of properties gives:
//! the connection, the client's settings, and (for a consumer) the group, start and commit choices.

mod connection;
mod consumer;
mod producer;
mod properties;

use std::collections::BTreeMap;

pub use connection::{ConnectionSettings, MAX_IN_FLIGHT, is_connection_property};
pub use consumer::{ConsumerSettings, GroupProtocol, OffsetReset};
pub use producer::{ProducerSettings, RETRY_BACKOFF};
pub use properties::{PropertiesSyntax, parse_properties};

/// A client property that could not be applied: where it came from, the key, and why. The value is
/// shown only when it is not a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PropertyError {
    #[error("{source_name} {given:?}: expected key=value")]
    Syntax { source_name: String, given: String },
    #[error("{source_name} {key}={shown}: {reason}")]
    Value {
        source_name: String,
        key: String,
        shown: String,
        reason: String,
    },
    #[error("{source_name} {key}: not supported by this build of kbench yet")]
    Unsupported { source_name: String, key: String },
    #[error("{source_name} {key}: unknown client property {key:?}")]
    Unknown { source_name: String, key: String },
    /// Settings that do not work together, or a file they name that cannot be used.
    #[error("{key}: {reason}")]
    Setup { key: String, reason: String },
}

impl PropertyError {
    /// A bad `value` of `key` from `source`: the value shown unless it is a secret.
    pub(crate) fn value(source: &str, key: &str, value: &str, reason: &str) -> PropertyError {
        PropertyError::Value {
            source_name: source.to_string(),
            key: key.to_string(),
            shown: if is_secret(key) { "***" } else { value }.to_string(),
            reason: reason.to_string(),
        }
    }

    fn unknown(source: &str, key: &str) -> PropertyError {
        PropertyError::Unknown {
            source_name: source.to_string(),
            key: key.to_string(),
        }
    }
}

/// Settings that cannot work together, as Java's clients refuse them (ConfigException): the
/// property to change and why. A spec's `validate()` says it naming the property.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {reason}")]
pub struct Conflict {
    pub key: &'static str,
    pub reason: String,
}

/// Whether a property's value must never be shown.
pub fn is_secret(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    [
        "password",
        "secret",
        "jaas",
        "token",
        "credential",
        "user.info",
    ]
    .iter()
    .any(|s| k.contains(s))
}

/// Properties as given, secret values masked: what a result or an answer may show.
pub fn redacted(given: &[(String, String)]) -> BTreeMap<String, String> {
    given
        .iter()
        .map(|(k, v)| {
            let v = if is_secret(k) {
                "***".to_string()
            } else {
                without_password(v)
            };
            (k.clone(), v)
        })
        .collect()
}

/// Every URL's password (`scheme://user:password@host`, in a comma-separated list too) masked;
/// any other value as it is. The userinfo ends at the authority's last `@`, as URL parsers read it.
pub fn without_password(value: &str) -> String {
    value
        .split(',')
        .map(|part| {
            let Some((scheme, rest)) = part.split_once("://") else {
                return part.to_string();
            };
            let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            let Some(at) = rest[..authority_end].rfind('@') else {
                return part.to_string();
            };
            let user = rest[..at].split_once(':').map_or(&rest[..at], |(u, _)| u);
            format!("{scheme}://{user}:***@{}", &rest[at + 1..])
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Split `key=value`; `flag` names where it came from, for the error.
pub fn split_property<'a>(flag: &str, kv: &'a str) -> Result<(&'a str, &'a str), PropertyError> {
    kv.split_once('=')
        .map(|(k, v)| (k.trim(), v.trim()))
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| PropertyError::Syntax {
            source_name: flag.to_string(),
            given: if is_secret(kv) {
                "***".into()
            } else {
                kv.to_string()
            },
        })
}

/// Producer keys accepted and deliberately without effect (serializers: kbench writes bytes itself).
const PRODUCER_IGNORED: &[&str] = &["key.serializer", "value.serializer"];

/// Producer keys users may pass that kbench does not implement yet: an error, never a silent
/// default.
const PRODUCER_UNSUPPORTED: &[&str] = &["partitioner.class"];

/// Confluent's serializer settings (`KafkaAvroSerializer` reads them from the producer's
/// properties), kept as given for `--value-schema`: the registry, its credentials and trust, and
/// how the subject is named and the schema found.
pub fn is_serializer_property(key: &str) -> bool {
    key.starts_with("schema.registry.")
        || matches!(
            key,
            "basic.auth.user.info"
                | "basic.auth.credentials.source"
                | "value.subject.name.strategy"
                | "auto.register.schemas"
                | "use.latest.version"
                | "use.schema.id"
        )
}

/// What a producer's properties give: its connection and its settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ProducerProperties {
    pub connection: ConnectionSettings,
    pub producer: ProducerSettings,
    /// The serializer's settings ([`is_serializer_property`]), as given.
    pub serializer: BTreeMap<String, String>,
}

impl Default for ProducerProperties {
    fn default() -> Self {
        ProducerProperties {
            connection: ConnectionSettings {
                client_id: "kbench-producer".into(),
                ..ConnectionSettings::default()
            },
            producer: ProducerSettings::default(),
            serializer: BTreeMap::new(),
        }
    }
}

impl ProducerProperties {
    /// Apply one property; `flag` is `-X`, `--producer-props` or a file, for messages.
    pub fn apply(&mut self, flag: &str, key: &str, value: &str) -> Result<(), PropertyError> {
        if self.connection.apply(flag, key, value)? || self.producer.apply(flag, key, value)? {
            return Ok(());
        }
        if PRODUCER_IGNORED.contains(&key) {
            return Ok(());
        }
        if is_serializer_property(key) {
            self.serializer.insert(key.to_string(), value.to_string());
            return Ok(());
        }
        if PRODUCER_UNSUPPORTED.contains(&key) {
            return Err(PropertyError::Unsupported {
                source_name: flag.to_string(),
                key: key.to_string(),
            });
        }
        Err(PropertyError::unknown(flag, key))
    }

    /// Build the connection's TLS and SASL (see [`ConnectionSettings::finish`]). The producer's
    /// own rules are the spec's to check (`validate()`), after every flag has had its say.
    pub fn finish(&mut self) -> Result<(), PropertyError> {
        self.connection.finish()
    }
}

/// Consumer keys accepted and deliberately without effect: deserializers (kbench reads bytes), and
/// settings whose only effect is in Java's poll loop or client internals.
const CONSUMER_IGNORED: &[&str] = &[
    "key.deserializer",
    "value.deserializer",
    "max.poll.records",
    "max.poll.interval.ms",
    "receive.buffer.bytes",
    "send.buffer.bytes",
    "fetch.min.bytes",
    "check.crcs",
    "enable.auto.offset.store",
];

/// What a consumer's properties give: its connection, its settings, and the properties that
/// choose its group, where it starts and whether it commits (a workload's own fields take them).
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumerProperties {
    pub connection: ConnectionSettings,
    pub consumer: ConsumerSettings,
    /// `group.id`.
    pub group_id: Option<String>,
    /// `auto.offset.reset`, when given.
    pub auto_offset_reset: Option<OffsetReset>,
    /// `enable.auto.commit` (Java's default: true).
    pub enable_auto_commit: bool,
    /// The deserializer's settings ([`is_serializer_property`]: the same names), as given.
    pub deserializer: BTreeMap<String, String>,
}

impl Default for ConsumerProperties {
    fn default() -> Self {
        ConsumerProperties {
            connection: ConnectionSettings {
                client_id: "kbench-consumer".into(),
                ..ConnectionSettings::default()
            },
            consumer: ConsumerSettings::default(),
            group_id: None,
            auto_offset_reset: None,
            enable_auto_commit: true,
            deserializer: BTreeMap::new(),
        }
    }
}

impl ConsumerProperties {
    /// Apply one property; `flag` names its source for messages. Producer-only keys are refused.
    pub fn apply(&mut self, flag: &str, key: &str, value: &str) -> Result<(), PropertyError> {
        if self.connection.apply(flag, key, value)? || self.consumer.apply(flag, key, value)? {
            return Ok(());
        }
        let bad = |what: &str| PropertyError::value(flag, key, value, what);
        match key {
            "group.id" => self.group_id = Some(value.to_string()),
            "auto.offset.reset" => {
                self.auto_offset_reset = Some(value.parse().map_err(|e: String| bad(&e))?)
            }
            "enable.auto.commit" => {
                self.enable_auto_commit = match value.to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(bad("expected true or false")),
                }
            }
            k if CONSUMER_IGNORED.contains(&k) => {}
            k if is_serializer_property(k) => {
                self.deserializer.insert(k.to_string(), value.to_string());
            }
            k if ProducerSettings::takes(k) || PRODUCER_IGNORED.contains(&k) => {
                return Err(bad("a producer property; a consumer does not take it"));
            }
            _ => return Err(PropertyError::unknown(flag, key)),
        }
        Ok(())
    }

    /// Build the connection's TLS and SASL (see [`ConnectionSettings::finish`]).
    pub fn finish(&mut self) -> Result<(), PropertyError> {
        self.connection.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_passwords_are_masked_whole() {
        assert_eq!(
            without_password("http://u:p@ss@reg:8081/x"),
            "http://u:***@reg:8081/x"
        );
        assert_eq!(
            without_password("http://a:1@r1,https://b:2@r2"),
            "http://a:***@r1,https://b:***@r2"
        );
        assert_eq!(without_password("http://reg/p@th"), "http://reg/p@th");
        assert_eq!(without_password("plain"), "plain");
        assert!(is_secret("basic.auth.user.info"));
    }

    #[test]
    fn unknown_key_is_named() {
        let err = ProducerProperties::default()
            .apply("-X", "nosuch", "1")
            .unwrap_err();
        assert!(err.to_string().contains("nosuch"), "{err}");
        assert!(matches!(
            ProducerProperties::default().apply("-X", "partitioner.class", "x"),
            Err(PropertyError::Unsupported { .. })
        ));
    }

    #[test]
    fn a_consumer_refuses_producer_keys_and_takes_its_own() {
        let mut c = ConsumerProperties::default();
        for (k, v) in [
            ("group.id", "g"),
            ("auto.offset.reset", "smallest"),
            ("enable.auto.commit", "false"),
            ("fetch.wait.max.ms", "7"),
            ("client.id", "me"),
            ("max.poll.records", "10"),
        ] {
            c.apply("-X", k, v).unwrap();
        }
        assert_eq!(c.group_id.as_deref(), Some("g"));
        assert_eq!(c.auto_offset_reset, Some(OffsetReset::Earliest));
        assert!(!c.enable_auto_commit);
        assert_eq!(
            c.consumer.fetch_max_wait,
            std::time::Duration::from_millis(7)
        );
        assert_eq!(c.connection.client_id, "me");
        for producer_key in ["acks", "linger.ms", "value.serializer", "retry.backoff.ms"] {
            let err = c.apply("-X", producer_key, "1").unwrap_err().to_string();
            assert!(err.contains("a producer property"), "{err}");
        }
    }

    #[test]
    fn each_group_protocol_refuses_the_settings_of_the_other() {
        let mut c = ConsumerSettings::default();
        c.apply("-X", "group.protocol", "CONSUMER").unwrap();
        assert_eq!(c.group_protocol, GroupProtocol::Consumer);
        c.check().unwrap();
        c.apply("-X", "group.remote.assignor", "uniform").unwrap();
        c.check().unwrap();
        for (key, value) in [
            ("session.timeout.ms", "10000"),
            ("heartbeat.interval.ms", "1000"),
            ("partition.assignment.strategy", "roundrobin"),
        ] {
            let mut set = c.clone();
            set.apply("-X", key, value).unwrap();
            let conflict = set.check().unwrap_err();
            assert_eq!(conflict.key, key);
            assert!(
                conflict.reason.contains("group.protocol=consumer"),
                "{}",
                conflict.reason
            );
        }
        let mut classic = ConsumerSettings::default();
        classic
            .apply("-X", "group.remote.assignor", "range")
            .unwrap();
        assert_eq!(classic.check().unwrap_err().key, "group.remote.assignor");
        let bad = classic.apply("-X", "group.protocol", "modern").unwrap_err();
        assert!(bad.to_string().contains("classic or consumer"), "{bad}");
    }

    #[test]
    fn a_static_id_is_checked_as_kafka_checks_it() {
        let mut c = ConsumerSettings::default();
        c.apply("-X", "group.instance.id", "pod-7.eu_west").unwrap();
        assert_eq!(c.group_instance_id.as_deref(), Some("pod-7.eu_west"));
        for bad in ["", " kb", "a/b", ".", "..", &"x".repeat(250)] {
            let e = c.apply("-X", "group.instance.id", bad).unwrap_err();
            assert!(e.to_string().contains("group.instance.id"), "{e}");
        }
    }

    #[test]
    fn secrets_are_masked_when_shown() {
        let shown = redacted(&[
            ("sasl.password".into(), "hunter2".into()),
            ("acks".into(), "1".into()),
        ]);
        assert_eq!(shown["sasl.password"], "***");
        assert_eq!(shown["acks"], "1");
        let err = split_property("-X", "sasl.password:hunter2").unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }
}
