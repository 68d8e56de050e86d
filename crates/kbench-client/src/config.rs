//! Kafka client settings with their defaults, defined once for every front end, and client properties
//! by the names Java and librdkafka users know (`-X key=value`, `--producer-props`, properties files).
//! An unknown or unsupported key is an error naming it; a value that does not parse is an error
//! naming the key and where it came from. Secret values are never echoed.

use std::collections::BTreeMap;
use std::time::Duration;

use kbench_wire::{Compression, Pins};

use crate::cluster::ClusterConfig;
use crate::produce::{Acks, ProducerConfig};
use crate::sasl::{Sasl, Secret, TokenSource, parse_jaas};
use crate::security::{SecuritySettings, Tls};

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

/// Producer settings with their Java defaults (Kafka 4.x).
#[derive(Debug, Clone, PartialEq)]
pub struct ProducerSettings {
    pub bootstrap_servers: Option<String>,
    pub acks: Acks,
    pub compression: Compression,
    pub batch_size: usize,
    /// The largest Produce request (`max.request.size`; librdkafka's `message.max.bytes`): ready
    /// batches of several partitions share a request up to this size.
    pub max_request_size: usize,
    pub linger: Duration,
    pub client_id: String,
    pub max_in_flight: usize,
    pub request_timeout: Duration,
    pub retries: u32,
    pub retry_backoff: Duration,
    pub delivery_timeout: Duration,
    pub connect_timeout: Duration,
    /// `security.protocol` and the TLS files and switches, as given.
    pub security: SecuritySettings,
    /// The TLS built from `security` by [`ProducerSettings::finish`].
    pub tls: Option<std::sync::Arc<Tls>>,
    /// The SASL built from `security` by [`ProducerSettings::finish`].
    pub sasl: Option<std::sync::Arc<Sasl>>,
    /// The mechanism `sasl.jaas.config`'s login module implies, used when `sasl.mechanism` is not
    /// given (PlainLoginModule → PLAIN).
    pub jaas_mechanism: Option<crate::sasl::SaslMechanism>,
    /// `enable.idempotence`: batches carry a producer id (InitProducerId) and per-partition
    /// sequence numbers, so the broker drops a retried batch it already holds. Off by default, as
    /// in librdkafka (Java turned it on in 3.0; kbench's figures stay comparable with earlier runs).
    pub idempotence: bool,
    /// `transactional.id`: records go in transactions (InitProducerId at the transaction
    /// coordinator, AddPartitionsToTxn, EndTxn); implies idempotence.
    pub transactional_id: Option<String>,
    /// `buffer.memory` (librdkafka: `queue.buffering.max.kbytes`): bytes of closed batches held
    /// queued or in flight before a new batch waits.
    pub buffer_memory: usize,
}

impl Default for ProducerSettings {
    fn default() -> Self {
        ProducerSettings {
            bootstrap_servers: None,
            acks: Acks::All,
            compression: Compression::None,
            batch_size: 16_384,
            max_request_size: 1_048_576,
            linger: Duration::from_millis(5),
            client_id: "kbench-producer".into(),
            max_in_flight: 5,
            request_timeout: Duration::from_millis(30_000),
            retries: i32::MAX as u32,
            retry_backoff: Duration::from_millis(100),
            delivery_timeout: Duration::from_millis(120_000),
            connect_timeout: Duration::from_millis(10_000),
            security: SecuritySettings::default(),
            tls: None,
            sasl: None,
            jaas_mechanism: None,
            idempotence: false,
            transactional_id: None,
            buffer_memory: crate::produce::BUFFER_MEMORY,
        }
    }
}

/// Keys accepted and deliberately without effect here (serializers: kbench writes bytes itself).
const IGNORED: &[&str] = &["key.serializer", "value.serializer"];

/// Keys users may pass that kbench does not implement yet: an error, never a silent default.
const UNSUPPORTED: &[&str] = &[
    "sasl.kerberos.service.name",
    "sasl.oauthbearer.config",
    "sasl.login.callback.handler.class",
    "sasl.client.callback.handler.class",
    "partitioner.class",
];

/// How to turn a Java key store into the PEM files kbench reads.
const STORE_HINT: &str = "convert to PEM: `keytool -exportcert -rfc -keystore truststore.jks -alias <ca> -file ca.pem` for a trust store, `keytool -importkeystore -srckeystore keystore.jks -destkeystore keystore.p12 -deststoretype PKCS12` then `openssl pkcs12 -in keystore.p12 -nodes -out client.pem` for a key store";

/// JKS and PKCS12 files are refused with the way to convert them.
fn refuse_store(path: &str) -> Result<(), String> {
    let lower = path.to_ascii_lowercase();
    if [".jks", ".p12", ".pfx", ".keystore", ".truststore"]
        .iter()
        .any(|e| lower.ends_with(e))
    {
        return Err(format!("JKS and PKCS12 stores are not read; {STORE_HINT}"));
    }
    Ok(())
}

/// Whether a property's value must never be shown.
pub fn is_secret(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    ["password", "secret", "jaas", "token", "credential"]
        .iter()
        .any(|s| k.contains(s))
}

/// A line of a properties text that is not `key=value`: the 1-based line and what is wrong. It
/// never holds a value (a secret's included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PropertiesSyntax {
    pub line: usize,
    pub what: String,
}

/// A Java properties text, read as `java.util.Properties.load` reads it (what the Kafka tools use
/// for `--producer.config` and OMB for its property blocks): `key=value`, `key: value` or
/// `key value` (the key ends at the first unescaped `=`, `:` or white space), `#` and `!` comment
/// lines, a line ending in an odd number of `\` continued on the next (its leading white space
/// skipped), the escapes `\t \n \r \f \uXXXX` and `\` before any other character, `\n`, `\r\n`
/// or `\r` line ends, and a leading byte-order mark skipped. Values are trimmed as Kafka's
/// ConfigDef trims them, except a secret's (Kafka's PASSWORD type keeps its spaces). Stricter than
/// Java in one place: a line with a key and neither a separator nor a value is an error, not an
/// empty value — it is a mistake far more often than meant.
pub fn parse_properties(text: &str) -> Result<Vec<(String, String)>, PropertiesSyntax> {
    const WS: [char; 3] = [' ', '\t', '\x0c'];
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let natural: Vec<&str> = text.split('\n').collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < natural.len() {
        let line = i + 1;
        let mut cur = natural[i].trim_start_matches(WS);
        i += 1;
        if cur.is_empty() || cur.starts_with('#') || cur.starts_with('!') {
            continue;
        }
        let mut logical = String::new();
        loop {
            let slashes = cur.len() - cur.trim_end_matches('\\').len();
            if slashes.is_multiple_of(2) {
                logical.push_str(cur);
                break;
            }
            logical.push_str(&cur[..cur.len() - 1]);
            if i == natural.len() {
                break;
            }
            cur = natural[i].trim_start_matches(WS);
            i += 1;
        }
        let err = |what: &str| PropertiesSyntax {
            line,
            what: what.to_string(),
        };
        let chars: Vec<char> = logical.chars().collect();
        let mut k = 0;
        while k < chars.len() {
            match chars[k] {
                '\\' => k += 2,
                '=' | ':' => break,
                c if WS.contains(&c) => break,
                _ => k += 1,
            }
        }
        let k = k.min(chars.len());
        let mut j = k;
        while j < chars.len() && WS.contains(&chars[j]) {
            j += 1;
        }
        let separated = j < chars.len() && matches!(chars[j], '=' | ':');
        if separated {
            j += 1;
            while j < chars.len() && WS.contains(&chars[j]) {
                j += 1;
            }
        }
        let key = unescape(&chars[..k]).map_err(|e| err(&e))?;
        if key.is_empty() {
            return Err(err("a value with no key"));
        }
        let value = unescape(&chars[j..]).map_err(|e| err(&format!("{key}: {e}")))?;
        if !separated && value.is_empty() {
            return Err(err(&format!(
                "{key}: no value (expected key=value, key: value or key value)"
            )));
        }
        let value = if is_secret(&key) {
            value
        } else {
            value.trim().to_string()
        };
        out.push((key, value));
    }
    Ok(out)
}

/// A key's or value's escapes, as java.util.Properties resolves them.
fn unescape(chars: &[char]) -> Result<String, String> {
    let mut out = String::with_capacity(chars.len());
    let mut i = 0;
    let mut pending_high: Option<u32> = None;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        if c != '\\' || i == chars.len() {
            if pending_high.take().is_some() {
                return Err("a \\u escape of half a surrogate pair".into());
            }
            if c != '\\' {
                out.push(c);
            }
            continue;
        }
        let e = chars[i];
        i += 1;
        if e != 'u' {
            if pending_high.take().is_some() {
                return Err("a \\u escape of half a surrogate pair".into());
            }
            out.push(match e {
                't' => '\t',
                'n' => '\n',
                'r' => '\r',
                'f' => '\x0c',
                other => other,
            });
            continue;
        }
        let hex: String = chars.get(i..i + 4).unwrap_or_default().iter().collect();
        let code = (hex.len() == 4)
            .then(|| u32::from_str_radix(&hex, 16).ok())
            .flatten()
            .ok_or("a malformed \\uXXXX escape (four hex digits expected)")?;
        i += 4;
        match (pending_high.take(), code) {
            (None, 0xD800..=0xDBFF) => pending_high = Some(code),
            (Some(high), 0xDC00..=0xDFFF) => {
                let joined = 0x10000 + ((high - 0xD800) << 10) + (code - 0xDC00);
                out.push(char::from_u32(joined).ok_or("a malformed \\u surrogate pair")?);
            }
            (Some(_), _) | (None, 0xDC00..=0xDFFF) => {
                return Err("a \\u escape of half a surrogate pair".into());
            }
            (None, code) => out.push(char::from_u32(code).ok_or("a malformed \\uXXXX escape")?),
        }
    }
    if pending_high.is_some() {
        return Err("a \\u escape of half a surrogate pair".into());
    }
    Ok(out)
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

impl ProducerSettings {
    /// Apply one property; `flag` is `-X`, `--producer-props` or a file, for messages.
    pub fn apply(&mut self, flag: &str, key: &str, value: &str) -> Result<(), PropertyError> {
        let shown = if is_secret(key) { "***" } else { value };
        let bad = |what: &str| PropertyError::Value {
            source_name: flag.to_string(),
            key: key.to_string(),
            shown: shown.to_string(),
            reason: what.to_string(),
        };
        let ms = |v: &str| -> Result<Duration, PropertyError> {
            v.parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| bad("expected a whole number of milliseconds"))
        };
        let count = |v: &str| -> Result<u64, PropertyError> {
            v.parse::<u64>().map_err(|_| bad("expected a whole number"))
        };
        match key {
            "bootstrap.servers" | "metadata.broker.list" => {
                self.bootstrap_servers = Some(value.to_string())
            }
            "acks" | "request.required.acks" => {
                self.acks = value.parse().map_err(|e: String| bad(&e))?
            }
            "compression.type" | "compression.codec" => {
                self.compression = value.parse().map_err(|e: String| bad(&e))?
            }
            "batch.size" => {
                self.batch_size = count(value)?.max(1) as usize;
            }
            "max.request.size" | "message.max.bytes" => {
                let n = count(value)?;
                if n == 0 || n > i32::MAX as u64 {
                    return Err(bad("must be between 1 and 2147483647 bytes"));
                }
                self.max_request_size = n as usize;
            }
            "linger.ms" | "queue.buffering.max.ms" => self.linger = ms(value)?,
            "buffer.memory" => {
                let n = count(value)?;
                if n == 0 || n > usize::MAX as u64 {
                    return Err(bad("must be at least 1 byte"));
                }
                self.buffer_memory = n as usize;
            }
            "queue.buffering.max.kbytes" => {
                let n = count(value)?;
                if n == 0 || n > (usize::MAX / 1024) as u64 {
                    return Err(bad("must be at least 1 KiB"));
                }
                self.buffer_memory = n as usize * 1024;
            }
            "client.id" => {
                // Every request header carries it as a Kafka string: 2-byte length.
                if value.len() > i16::MAX as usize {
                    return Err(bad(&format!(
                        "{} bytes: at most 32767 (a request header's string)",
                        value.len()
                    )));
                }
                self.client_id = value.to_string()
            }
            "max.in.flight.requests.per.connection" | "max.in.flight" => {
                let n = count(value)?;
                if n == 0 {
                    return Err(bad("must be at least 1"));
                }
                self.max_in_flight = n as usize;
            }
            "request.timeout.ms" => self.request_timeout = ms(value)?,
            "retries" | "message.send.max.retries" => {
                self.retries = count(value)?.min(u64::from(u32::MAX)) as u32
            }
            "retry.backoff.ms" => self.retry_backoff = ms(value)?,
            "delivery.timeout.ms" | "message.timeout.ms" => self.delivery_timeout = ms(value)?,
            "socket.connection.setup.timeout.ms" | "socket.connection.setup.timeout.max.ms" => {
                self.connect_timeout = ms(value)?
            }
            "security.protocol" => {
                self.security.protocol = value.parse().map_err(|e: String| bad(&e))?;
            }
            "sasl.mechanism" | "sasl.mechanisms" => {
                self.security.sasl.mechanism = Some(value.parse().map_err(|e: String| bad(&e))?);
            }
            "sasl.jaas.config" => {
                let (implied, username, password) = parse_jaas(value).map_err(|e| bad(&e))?;
                self.jaas_mechanism = implied;
                if username.is_some() {
                    self.security.sasl.username = username;
                }
                if password.is_some() {
                    self.security.sasl.password = password;
                }
            }
            "sasl.username" => self.security.sasl.username = Some(value.to_string()),
            "sasl.password" => self.security.sasl.password = Some(Secret::new(value)),
            "sasl.oauthbearer.token.endpoint.url" => {
                let path = value.strip_prefix("file://").ok_or_else(|| {
                    bad("only a file:// URL is read (token endpoints are not called); or give sasl.oauthbearer.token.file / sasl.oauthbearer.token.env")
                })?;
                self.security.sasl.token = Some(TokenSource::File(path.into()));
            }
            "sasl.oauthbearer.token.file" => {
                self.security.sasl.token = Some(TokenSource::File(value.into()))
            }
            "sasl.oauthbearer.token.env" => {
                self.security.sasl.token = Some(TokenSource::Env(value.to_string()))
            }
            "ssl.ca.location" | "ssl.truststore.location" => {
                refuse_store(value).map_err(|e| bad(&e))?;
                self.security.tls.ca_file = Some(value.into());
            }
            "ssl.certificate.location" => {
                refuse_store(value).map_err(|e| bad(&e))?;
                self.security.tls.certificate_file = Some(value.into());
            }
            "ssl.key.location" => self.security.tls.key_file = Some(value.into()),
            // A PEM key store holds the certificate chain and the key in one file.
            "ssl.keystore.location" => {
                refuse_store(value).map_err(|e| bad(&e))?;
                self.security.tls.certificate_file = Some(value.into());
                self.security.tls.key_file = Some(value.into());
            }
            "ssl.truststore.type" | "ssl.keystore.type" => {
                if !value.eq_ignore_ascii_case("PEM") {
                    return Err(bad(&format!("{} stores are not read; {STORE_HINT}", value)));
                }
            }
            "ssl.key.password" | "ssl.keystore.password" | "ssl.truststore.password" => {
                if !value.is_empty() && key == "ssl.key.password" {
                    return Err(bad(
                        "encrypted private keys are not read; decrypt it once with `openssl pkey -in key.pem -out key-plain.pem` and give that",
                    ));
                }
            }
            "ssl.endpoint.identification.algorithm" => {
                self.security.tls.verify_hostname = match value.to_ascii_lowercase().as_str() {
                    "" | "none" => false,
                    "https" => true,
                    _ => return Err(bad("expected https, or empty to turn the check off")),
                }
            }
            "enable.ssl.certificate.verification" => {
                self.security.tls.verify_certificate = match value.to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(bad("expected true or false")),
                }
            }
            "ssl.enabled.protocols" | "ssl.protocol" => {
                for v in value.split(',').map(str::trim) {
                    if !matches!(v, "TLSv1.2" | "TLSv1.3" | "TLS") {
                        return Err(bad("kbench speaks TLSv1.2 and TLSv1.3"));
                    }
                }
            }
            "transactional.id" => {
                if value.is_empty() {
                    return Err(bad("must not be empty"));
                }
                self.transactional_id = Some(value.to_string());
            }
            "enable.idempotence" => {
                self.idempotence = match value.to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(bad("expected true or false")),
                }
            }
            k if IGNORED.contains(&k) => {}
            k if UNSUPPORTED.contains(&k) => {
                return Err(PropertyError::Unsupported {
                    source_name: flag.to_string(),
                    key: key.to_string(),
                });
            }
            _ => {
                return Err(PropertyError::Unknown {
                    source_name: flag.to_string(),
                    key: key.to_string(),
                });
            }
        }
        Ok(())
    }

    /// enable.idempotence and transactional.id against the delivery settings (called by
    /// [`finish`](Self::finish), and again by a front end whose flags changed them since).
    pub fn check_idempotence(&mut self) -> Result<(), PropertyError> {
        if self.transactional_id.is_some() {
            // A transactional producer is an idempotent one (Java: enable.idempotence=false with
            // a transactional.id is a ConfigException).
            self.idempotence = true;
        }
        if self.idempotence {
            // Java's producer refuses the same combinations (ConfigException).
            let who = if self.transactional_id.is_some() {
                "transactional.id (an idempotent producer)"
            } else {
                "enable.idempotence=true"
            };
            let needs = |key: &str, what: &str| PropertyError::Setup {
                key: key.into(),
                reason: format!("{who} needs {what}"),
            };
            if self.acks != Acks::All {
                return Err(needs("acks", "acks=all"));
            }
            if self.max_in_flight > 5 {
                return Err(needs(
                    "max.in.flight.requests.per.connection",
                    "max.in.flight.requests.per.connection of at most 5",
                ));
            }
            if self.retries == 0 {
                return Err(needs("retries", "retries above 0"));
            }
        }
        Ok(())
    }

    /// Check the settings together and build what they need (TLS: files read, certificates
    /// parsed), so that a bad file is an error naming its property before anything is contacted.
    pub fn finish(&mut self) -> Result<(), PropertyError> {
        self.check_idempotence()?;
        let tls = &self.security.tls;
        if !self.security.protocol.uses_tls()
            && (tls.ca_file.is_some() || tls.certificate_file.is_some() || tls.key_file.is_some())
        {
            return Err(PropertyError::Setup {
                key: "security.protocol".into(),
                reason: format!(
                    "{}, but TLS files were given (ssl.*): set security.protocol=SSL",
                    self.security.protocol.name()
                ),
            });
        }
        if self.security.protocol.uses_tls() {
            if !tls.verify_certificate {
                tracing::warn!(
                    "certificate verification is off (enable.ssl.certificate.verification=false): any broker, or anyone between, is trusted"
                );
            } else if !tls.verify_hostname {
                tracing::warn!(
                    "host-name verification is off (ssl.endpoint.identification.algorithm=): a certificate the CA signed for another host is accepted"
                );
            }
        }
        self.tls = self.security.tls().map_err(|e| PropertyError::Setup {
            key: e.key.into(),
            reason: e.reason,
        })?;
        let sasl = &mut self.security.sasl;
        if sasl.mechanism.is_none() {
            sasl.mechanism = self.jaas_mechanism;
        }
        if self.security.protocol.uses_sasl() {
            let built = sasl.build().map_err(|(key, reason)| PropertyError::Setup {
                key: key.into(),
                reason,
            })?;
            self.sasl = Some(std::sync::Arc::new(built));
        } else if sasl.mechanism.is_some()
            || sasl.username.is_some()
            || sasl.password.is_some()
            || sasl.token.is_some()
        {
            return Err(PropertyError::Setup {
                key: "security.protocol".into(),
                reason: format!(
                    "{}, but SASL settings were given (sasl.*): set security.protocol=SASL_SSL or SASL_PLAINTEXT",
                    self.security.protocol.name()
                ),
            });
        }
        Ok(())
    }

    /// The connection settings these properties give, towards `bootstrap`.
    pub fn cluster_config(&self, bootstrap: Vec<String>, pins: Pins) -> ClusterConfig {
        ClusterConfig {
            bootstrap,
            client_id: self.client_id.clone(),
            connect_timeout: self.connect_timeout,
            request_timeout: self.request_timeout,
            max_in_flight: self.max_in_flight,
            pins,
            tls: self.tls.clone(),
            security_protocol: self.security.protocol,
            sasl: self.sasl.clone(),
        }
    }

    /// The delivery settings these properties give.
    pub fn producer_config(&self) -> ProducerConfig {
        ProducerConfig {
            acks: self.acks,
            request_timeout: self.request_timeout,
            retries: self.retries,
            retry_backoff: self.retry_backoff,
            delivery_timeout: self.delivery_timeout,
            idempotent: self.idempotence,
            buffer_memory: self.buffer_memory,
        }
    }

    /// Every property as given, secrets masked, for the result document.
    pub fn redacted(given: &[(String, String)]) -> BTreeMap<String, String> {
        given
            .iter()
            .map(|(k, v)| {
                let v = if is_secret(k) {
                    "***".to_string()
                } else {
                    v.clone()
                };
                (k.clone(), v)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(text: &str) -> Vec<(String, String)> {
        parse_properties(text).unwrap()
    }

    #[test]
    fn properties_read_as_java_reads_them() {
        let text = "\u{feff}# comment\r\n! also\n\nacks=all\nlinger.ms : 5\nbatch.size 16384\n  \
            \tclient.id\t=\tkb\\u00e9nch\nkey\\ with\\=odd = a\\\n    b\\nc\nsasl.password=  p w  \nempty=\n";
        assert_eq!(
            props(text),
            vec![
                ("acks".into(), "all".into()),
                ("linger.ms".into(), "5".into()),
                ("batch.size".into(), "16384".into()),
                ("client.id".into(), "kb\u{e9}nch".into()),
                ("key with=odd".into(), "ab\nc".into()),
                ("sasl.password".into(), "p w  ".into()),
                ("empty".into(), "".into()),
            ]
        );
        assert_eq!(
            props("a=\\uD83D\\uDE00"),
            vec![("a".into(), "\u{1F600}".into())]
        );
        assert_eq!(props("a=b\\"), vec![("a".into(), "b".into())]);
    }

    #[test]
    fn bad_properties_name_their_line_and_no_value() {
        let e = parse_properties("acks=all\n\nnovalue\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.what.starts_with("novalue: no value"), "{e:?}");
        let e = parse_properties("=x").unwrap_err();
        assert_eq!((e.line, e.what.as_str()), (1, "a value with no key"));
        let e = parse_properties("sasl.password=secret\\u12").unwrap_err();
        assert!(!e.what.contains("secret\\"), "{e:?}");
        assert!(e.what.contains("\\uXXXX"), "{e:?}");
        assert!(parse_properties("a=\\uD83D").is_err());
    }

    #[test]
    fn java_and_librdkafka_names_both_work() {
        let mut s = ProducerSettings::default();
        s.apply("-X", "acks", "1").unwrap();
        s.apply("-X", "compression.codec", "lz4").unwrap();
        s.apply("-X", "queue.buffering.max.ms", "20").unwrap();
        s.apply("-X", "max.in.flight.requests.per.connection", "3")
            .unwrap();
        assert_eq!(s.acks, Acks::Leader);
        assert_eq!(s.compression, Compression::Lz4);
        assert_eq!(s.linger, Duration::from_millis(20));
        assert_eq!(s.max_in_flight, 3);
    }

    #[test]
    fn unknown_key_is_named() {
        let err = ProducerSettings::default()
            .apply("-X", "nosuch", "1")
            .unwrap_err();
        assert!(err.to_string().contains("nosuch"), "{err}");
    }

    #[test]
    fn secrets_are_not_echoed_in_errors_or_results() {
        let err = ProducerSettings::default()
            .apply(
                "-X",
                "sasl.jaas.config",
                "x.PlainLoginModule required password=\"hunter2",
            )
            .unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
        let mut s = ProducerSettings::default();
        s.apply("-X", "sasl.password", "hunter2").unwrap();
        let err = s.finish().unwrap_err();
        assert!(
            err.to_string().contains("security.protocol") && !err.to_string().contains("hunter2"),
            "{err}"
        );
        assert!(!format!("{s:?}").contains("hunter2"));
        let shown = ProducerSettings::redacted(&[("sasl.password".into(), "hunter2".into())]);
        assert_eq!(shown["sasl.password"], "***");
    }

    #[test]
    fn java_and_librdkafka_sasl_names_give_the_same_settings() {
        let mut java = ProducerSettings::default();
        java.apply("-X", "security.protocol", "SASL_PLAINTEXT")
            .unwrap();
        java.apply("-X", "sasl.mechanism", "SCRAM-SHA-512").unwrap();
        java.apply(
            "-X",
            "sasl.jaas.config",
            r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="pw";"#,
        )
        .unwrap();
        java.finish().unwrap();
        let mut rdkafka = ProducerSettings::default();
        rdkafka
            .apply("-X", "security.protocol", "sasl_plaintext")
            .unwrap();
        rdkafka
            .apply("-X", "sasl.mechanisms", "SCRAM-SHA-512")
            .unwrap();
        rdkafka.apply("-X", "sasl.username", "alice").unwrap();
        rdkafka.apply("-X", "sasl.password", "pw").unwrap();
        rdkafka.finish().unwrap();
        assert_eq!(java.sasl, rdkafka.sasl);
        assert_eq!(java.security.sasl.password, rdkafka.security.sasl.password);
        // PlainLoginModule implies PLAIN when sasl.mechanism is not given.
        let mut plain = ProducerSettings::default();
        plain.apply("-X", "security.protocol", "SASL_SSL").unwrap();
        plain
            .apply(
                "-X",
                "sasl.jaas.config",
                r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b";"#,
            )
            .unwrap();
        plain.security.tls.verify_certificate = false;
        plain.finish().unwrap();
        assert_eq!(
            plain.sasl.as_ref().unwrap().mechanism,
            crate::SaslMechanism::Plain
        );
        let err = ProducerSettings::default()
            .apply("-X", "sasl.mechanism", "GSSAPI")
            .unwrap_err();
        assert!(err.to_string().contains("Kerberos"), "{err}");
    }

    #[test]
    fn buffer_memory_in_bytes_or_librdkafkas_kib() {
        let mut s = ProducerSettings::default();
        assert_eq!(s.buffer_memory, 32 * 1024 * 1024);
        s.apply("-X", "buffer.memory", "1000").unwrap();
        assert_eq!(s.producer_config().buffer_memory, 1000);
        s.apply("-X", "queue.buffering.max.kbytes", "2").unwrap();
        assert_eq!(s.producer_config().buffer_memory, 2048);
        let err = s.apply("-X", "buffer.memory", "0").unwrap_err().to_string();
        assert!(err.contains("buffer.memory"), "{err}");
    }

    #[test]
    fn bad_values_name_the_key() {
        let err = ProducerSettings::default()
            .apply("--producer-props", "linger.ms", "soon")
            .unwrap_err();
        let err = err.to_string();
        assert!(
            err.contains("linger.ms") && err.contains("--producer-props"),
            "{err}"
        );
    }
}

/// Where a consumer starts when it has no committed offset (`auto.offset.reset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetReset {
    Earliest,
    Latest,
}

impl OffsetReset {
    pub fn name(self) -> &'static str {
        match self {
            OffsetReset::Earliest => "earliest",
            OffsetReset::Latest => "latest",
        }
    }
}

/// Consumer settings with their Java defaults (Kafka 4.x), and the connection and security
/// settings every client shares (kept in a [`ProducerSettings`], whose producer-only fields a
/// consumer ignores).
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumerSettings {
    /// Connection, security, `client.id`, `request.timeout.ms`.
    pub connection: ProducerSettings,
    pub group_id: Option<String>,
    pub auto_offset_reset: OffsetReset,
    pub enable_auto_commit: bool,
    pub auto_commit_interval: Duration,
    pub session_timeout: Duration,
    pub heartbeat_interval: Duration,
    /// `fetch.max.wait.ms`.
    pub fetch_max_wait: Duration,
    /// `max.partition.fetch.bytes`.
    pub max_partition_fetch_bytes: usize,
    /// `fetch.max.bytes`.
    pub fetch_max_bytes: usize,
    /// `isolation.level=read_committed`: read up to the last stable offset, and leave out the
    /// records of aborted transactions. Kafka's default is read_uncommitted.
    pub read_committed: bool,
}

impl Default for ConsumerSettings {
    fn default() -> Self {
        ConsumerSettings {
            connection: ProducerSettings {
                client_id: "kbench-consumer".into(),
                ..ProducerSettings::default()
            },
            group_id: None,
            auto_offset_reset: OffsetReset::Latest,
            enable_auto_commit: true,
            auto_commit_interval: Duration::from_millis(5_000),
            session_timeout: Duration::from_millis(45_000),
            heartbeat_interval: Duration::from_millis(3_000),
            fetch_max_wait: Duration::from_millis(500),
            max_partition_fetch_bytes: 1_048_576,
            fetch_max_bytes: 52_428_800,
            read_committed: false,
        }
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

impl ConsumerSettings {
    /// Apply one property; `flag` names its source for messages. Producer-only keys are refused.
    pub fn apply(&mut self, flag: &str, key: &str, value: &str) -> Result<(), PropertyError> {
        let bad = |what: &str| PropertyError::Value {
            source_name: flag.to_string(),
            key: key.to_string(),
            shown: if is_secret(key) { "***" } else { value }.to_string(),
            reason: what.to_string(),
        };
        let ms = |v: &str| -> Result<Duration, PropertyError> {
            v.parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| bad("expected a whole number of milliseconds"))
        };
        let bytes = |v: &str| -> Result<usize, PropertyError> {
            match v.parse::<u64>() {
                Ok(n) if (1..=i32::MAX as u64).contains(&n) => Ok(n as usize),
                _ => Err(bad("expected a whole number of bytes from 1 to 2147483647")),
            }
        };
        let boolean = |v: &str| -> Result<bool, PropertyError> {
            match v.to_ascii_lowercase().as_str() {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(bad("expected true or false")),
            }
        };
        match key {
            "group.id" => self.group_id = Some(value.to_string()),
            "auto.offset.reset" => {
                self.auto_offset_reset = match value.to_ascii_lowercase().as_str() {
                    "earliest" | "smallest" | "beginning" => OffsetReset::Earliest,
                    "latest" | "largest" | "end" => OffsetReset::Latest,
                    _ => return Err(bad("expected earliest or latest")),
                }
            }
            "enable.auto.commit" => self.enable_auto_commit = boolean(value)?,
            "auto.commit.interval.ms" => self.auto_commit_interval = ms(value)?,
            "session.timeout.ms" => self.session_timeout = ms(value)?,
            "heartbeat.interval.ms" => self.heartbeat_interval = ms(value)?,
            "fetch.max.wait.ms" | "fetch.wait.max.ms" => self.fetch_max_wait = ms(value)?,
            "max.partition.fetch.bytes" | "fetch.message.max.bytes" => {
                self.max_partition_fetch_bytes = bytes(value)?
            }
            "fetch.max.bytes" => self.fetch_max_bytes = bytes(value)?,
            "isolation.level" => {
                self.read_committed = match value.to_ascii_lowercase().as_str() {
                    "read_committed" => true,
                    "read_uncommitted" => false,
                    _ => return Err(bad("expected read_uncommitted or read_committed")),
                }
            }
            k if CONSUMER_IGNORED.contains(&k) => {}
            "acks"
            | "request.required.acks"
            | "compression.type"
            | "compression.codec"
            | "batch.size"
            | "linger.ms"
            | "queue.buffering.max.ms"
            | "max.request.size"
            | "message.max.bytes"
            | "retries"
            | "message.send.max.retries"
            | "retry.backoff.ms"
            | "delivery.timeout.ms"
            | "message.timeout.ms"
            | "key.serializer"
            | "value.serializer"
            | "enable.idempotence"
            | "transactional.id"
            | "max.in.flight.requests.per.connection"
            | "max.in.flight" => {
                return Err(bad("a producer property; a consumer does not take it"));
            }
            _ => self.connection.apply(flag, key, value)?,
        }
        Ok(())
    }

    /// Check the settings together (TLS and SASL built, see [`ProducerSettings::finish`]).
    pub fn finish(&mut self) -> Result<(), PropertyError> {
        if self.heartbeat_interval >= self.session_timeout {
            return Err(PropertyError::Setup {
                key: "heartbeat.interval.ms".into(),
                reason: format!(
                    "{} ms is not below session.timeout.ms ({} ms)",
                    self.heartbeat_interval.as_millis(),
                    self.session_timeout.as_millis()
                ),
            });
        }
        self.connection.finish()
    }
}
