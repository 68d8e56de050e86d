//! Where the cluster is and how every connection to it is made and secured: the settings every
//! client shares, producer or consumer (Java's `CommonClientConfigs` and the `security.*`,
//! `ssl.*` and `sasl.*` families), by the names Java and librdkafka users know.

use std::sync::Arc;
use std::time::Duration;

use kbench_wire::Pins;

use super::PropertyError;
use crate::cluster::ClusterConfig;
use crate::sasl::{Sasl, SaslMechanism, Secret, TokenSource, parse_jaas};
use crate::security::{SecuritySettings, Tls};

/// Java's `max.in.flight.requests.per.connection` default: requests in flight per connection
/// unless a producer's settings say otherwise.
pub const MAX_IN_FLIGHT: usize = 5;

/// Connection and security settings with Kafka's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionSettings {
    pub bootstrap_servers: Option<String>,
    pub client_id: String,
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    /// `security.protocol` and the TLS files and switches, as given.
    pub security: SecuritySettings,
    /// The TLS built from `security` by [`ConnectionSettings::finish`].
    pub tls: Option<Arc<Tls>>,
    /// The SASL built from `security` by [`ConnectionSettings::finish`].
    pub sasl: Option<Arc<Sasl>>,
    /// The mechanism `sasl.jaas.config`'s login module implies, used when `sasl.mechanism` is not
    /// given (PlainLoginModule → PLAIN).
    pub jaas_mechanism: Option<SaslMechanism>,
}

impl Default for ConnectionSettings {
    fn default() -> Self {
        ConnectionSettings {
            bootstrap_servers: None,
            client_id: "kbench".into(),
            request_timeout: Duration::from_millis(30_000),
            connect_timeout: Duration::from_millis(10_000),
            security: SecuritySettings::default(),
            tls: None,
            sasl: None,
            jaas_mechanism: None,
        }
    }
}

/// Keys users may pass that kbench does not implement yet: an error, never a silent default.
const UNSUPPORTED: &[&str] = &[
    "sasl.kerberos.service.name",
    "sasl.oauthbearer.config",
    "sasl.login.callback.handler.class",
    "sasl.client.callback.handler.class",
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

/// The properties that concern the connection itself (where, how long, how secured): what every
/// command that connects takes with `-X` or a properties file, and what an agent is sent.
pub fn is_connection_property(key: &str) -> bool {
    key.starts_with("security.")
        || key.starts_with("ssl.")
        || key.starts_with("enable.ssl.")
        || key.starts_with("sasl.")
        || matches!(
            key,
            "bootstrap.servers"
                | "metadata.broker.list"
                | "client.id"
                | "request.timeout.ms"
                | "socket.connection.setup.timeout.ms"
                | "socket.connection.setup.timeout.max.ms"
        )
}

impl ConnectionSettings {
    /// Apply one property if it is a connection property ([`is_connection_property`]): `Ok(false)`
    /// leaves any other key to the caller. `flag` names its source for messages.
    pub fn apply(&mut self, flag: &str, key: &str, value: &str) -> Result<bool, PropertyError> {
        if !is_connection_property(key) {
            return Ok(false);
        }
        let bad = |what: &str| PropertyError::value(flag, key, value, what);
        let ms = |v: &str| -> Result<Duration, PropertyError> {
            v.parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| bad("expected a whole number of milliseconds"))
        };
        let boolean = |v: &str| -> Result<bool, PropertyError> {
            match v.to_ascii_lowercase().as_str() {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(bad("expected true or false")),
            }
        };
        match key {
            "bootstrap.servers" | "metadata.broker.list" => {
                self.bootstrap_servers = Some(value.to_string())
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
            "request.timeout.ms" => self.request_timeout = ms(value)?,
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
                    return Err(bad(&format!("{value} stores are not read; {STORE_HINT}")));
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
                self.security.tls.verify_certificate = boolean(value)?
            }
            "ssl.enabled.protocols" | "ssl.protocol" => {
                for v in value.split(',').map(str::trim) {
                    if !matches!(v, "TLSv1.2" | "TLSv1.3" | "TLS") {
                        return Err(bad("kbench speaks TLSv1.2 and TLSv1.3"));
                    }
                }
            }
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
        Ok(true)
    }

    /// Check the settings together and build what they need (TLS: files read, certificates
    /// parsed; SASL), so that a bad file is an error naming its property before anything is
    /// contacted.
    pub fn finish(&mut self) -> Result<(), PropertyError> {
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
            self.sasl = Some(Arc::new(built));
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

    /// How to reach `bootstrap` with these settings: [`MAX_IN_FLIGHT`] requests in flight per
    /// connection (a producing job sets its producer's own).
    pub fn cluster_config(&self, bootstrap: Vec<String>, pins: Pins) -> ClusterConfig {
        ClusterConfig {
            bootstrap,
            client_id: self.client_id.clone(),
            connect_timeout: self.connect_timeout,
            request_timeout: self.request_timeout,
            max_in_flight: MAX_IN_FLIGHT,
            pins,
            tls: self.tls.clone(),
            security_protocol: self.security.protocol,
            sasl: self.sasl.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_not_echoed_in_errors() {
        let err = ConnectionSettings::default()
            .apply(
                "-X",
                "sasl.jaas.config",
                "x.PlainLoginModule required password=\"hunter2",
            )
            .unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
        let mut s = ConnectionSettings::default();
        assert_eq!(s.apply("-X", "sasl.password", "hunter2"), Ok(true));
        let err = s.finish().unwrap_err();
        assert!(
            err.to_string().contains("security.protocol") && !err.to_string().contains("hunter2"),
            "{err}"
        );
        assert!(!format!("{s:?}").contains("hunter2"));
    }

    #[test]
    fn java_and_librdkafka_sasl_names_give_the_same_settings() {
        let mut java = ConnectionSettings::default();
        for (k, v) in [
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            (
                "sasl.jaas.config",
                r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="pw";"#,
            ),
        ] {
            java.apply("-X", k, v).unwrap();
        }
        java.finish().unwrap();
        let mut rdkafka = ConnectionSettings::default();
        for (k, v) in [
            ("security.protocol", "sasl_plaintext"),
            ("sasl.mechanisms", "SCRAM-SHA-512"),
            ("sasl.username", "alice"),
            ("sasl.password", "pw"),
        ] {
            rdkafka.apply("-X", k, v).unwrap();
        }
        rdkafka.finish().unwrap();
        assert_eq!(java.sasl, rdkafka.sasl);
        assert_eq!(java.security.sasl.password, rdkafka.security.sasl.password);
        // PlainLoginModule implies PLAIN when sasl.mechanism is not given.
        let mut plain = ConnectionSettings::default();
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
        let err = ConnectionSettings::default()
            .apply("-X", "sasl.mechanism", "GSSAPI")
            .unwrap_err();
        assert!(err.to_string().contains("Kerberos"), "{err}");
    }

    #[test]
    fn other_keys_are_left_to_the_caller() {
        let mut s = ConnectionSettings::default();
        assert_eq!(s.apply("-X", "acks", "1"), Ok(false));
        assert_eq!(s.apply("-X", "client.id", "me"), Ok(true));
        assert_eq!(s.client_id, "me");
        assert!(matches!(
            s.apply("-X", "ssl.nosuch", "1"),
            Err(PropertyError::Unknown { .. })
        ));
    }
}
