//! SASL on a Kafka connection: SaslHandshake v1 then SaslAuthenticate (v0–v2) with PLAIN,
//! SCRAM-SHA-256, SCRAM-SHA-512 (RFC 5802 / 7677, the server's signature verified) or OAUTHBEARER
//! (RFC 7628, a token read from a file or an environment variable). The cryptography is ring's
//! (already kbench's TLS provider); the message flow is written here because no maintained crate
//! speaks it over Kafka's framing.
//!
//! Credentials are [`Secret`]s: they print as `***` in every `Debug` and error, so that no result,
//! log line or HTTP answer can carry them.

use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use bytes::Bytes;
use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use kbench_wire::ApiKey;
use ring::rand::SecureRandom;
use ring::{digest, hmac, pbkdf2};

use crate::connection::Connection;
use crate::error::ClientError;

/// A value never shown: `Debug` prints `***`.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }
    /// The value itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// `sasl.mechanism`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    Plain,
    ScramSha256,
    ScramSha512,
    OAuthBearer,
}

impl SaslMechanism {
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
            SaslMechanism::OAuthBearer => "OAUTHBEARER",
        }
    }
}

impl std::str::FromStr for SaslMechanism {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_uppercase().as_str() {
            "PLAIN" => Ok(SaslMechanism::Plain),
            "SCRAM-SHA-256" => Ok(SaslMechanism::ScramSha256),
            "SCRAM-SHA-512" => Ok(SaslMechanism::ScramSha512),
            "OAUTHBEARER" => Ok(SaslMechanism::OAuthBearer),
            "GSSAPI" => Err("GSSAPI (Kerberos) is not supported; use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER".into()),
            _ => Err("expected PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER".into()),
        }
    }
}

/// Where an OAUTHBEARER token comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    /// `sasl.oauthbearer.token.endpoint.url=file:///path` (Java's file retriever) or
    /// `sasl.oauthbearer.token.file`.
    File(PathBuf),
    /// `sasl.oauthbearer.token.env=NAME`.
    Env(String),
}

/// The SASL side of the settings, as given (`sasl.*`, `sasl.jaas.config`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SaslSettings {
    pub mechanism: Option<SaslMechanism>,
    pub username: Option<String>,
    pub password: Option<Secret>,
    pub token: Option<TokenSource>,
}

/// SASL ready to authenticate connections with: the mechanism and its credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct Sasl {
    pub mechanism: SaslMechanism,
    /// The user (for OAUTHBEARER, none: the token names its principal).
    pub username: Option<String>,
    credential: Secret,
}

impl std::fmt::Debug for Sasl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sasl")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

impl SaslSettings {
    /// Check the settings and read the token, so that anything missing is an error naming the
    /// property before a broker is contacted. `sasl.mechanism` defaults to GSSAPI in Java; kbench
    /// has no Kerberos, so a missing mechanism is an error rather than a guess.
    pub fn build(&self) -> Result<Sasl, (&'static str, String)> {
        let mechanism = self.mechanism.ok_or((
            "sasl.mechanism",
            "security.protocol asks for SASL but no sasl.mechanism (or sasl.mechanisms) was given; Java's default, GSSAPI, is not supported".to_string(),
        ))?;
        match mechanism {
            SaslMechanism::OAuthBearer => {
                let token = match &self.token {
                    Some(TokenSource::File(path)) => {
                        crate::input::read_text(path, crate::input::SECRET_FILE).map_err(|e| {
                            (
                                "sasl.oauthbearer.token.endpoint.url",
                                format!("the token file {}: {e}", path.display()),
                            )
                        })?
                    }
                    .trim()
                    .to_string(),
                    Some(TokenSource::Env(name)) => std::env::var(name).map_err(|_| {
                        (
                            "sasl.oauthbearer.token.env",
                            format!("the environment variable {name} is not set"),
                        )
                    })?,
                    None => {
                        return Err((
                            "sasl.oauthbearer.token.endpoint.url",
                            "OAUTHBEARER needs a token: sasl.oauthbearer.token.endpoint.url=file:///path/to/token, sasl.oauthbearer.token.file=PATH or sasl.oauthbearer.token.env=VARIABLE (token endpoints are not called)".into(),
                        ));
                    }
                };
                if token.is_empty() || token.contains('\x01') {
                    return Err((
                        "sasl.oauthbearer.token",
                        "the token is empty or not a bearer token".into(),
                    ));
                }
                Ok(Sasl {
                    mechanism,
                    username: None,
                    credential: Secret(token),
                })
            }
            _ => {
                let username = self.username.clone().filter(|u| !u.is_empty()).ok_or((
                    "sasl.username",
                    format!(
                        "{} needs a user: sasl.username (librdkafka) or username=\"…\" in sasl.jaas.config (Java)",
                        mechanism.name()
                    ),
                ))?;
                let password = self.password.clone().ok_or((
                    "sasl.password",
                    format!(
                        "{} for user {username} needs a password: sasl.password or password=\"…\" in sasl.jaas.config",
                        mechanism.name()
                    ),
                ))?;
                Ok(Sasl {
                    mechanism,
                    username: Some(username),
                    credential: password,
                })
            }
        }
    }
}

/// What a `sasl.jaas.config` gives: the mechanism its login module implies, the user, the password.
pub type Jaas = (Option<SaslMechanism>, Option<String>, Option<Secret>);

/// Parse a Java `sasl.jaas.config`: `<LoginModule class> required key="value" …;`. The module
/// must be PlainLoginModule, ScramLoginModule or OAuthBearerLoginModule; `username` and `password`
/// are taken. The string is a secret: errors never quote it.
pub fn parse_jaas(config: &str) -> Result<Jaas, String> {
    let config = config.trim().trim_end_matches(';').trim();
    let (module, rest) = config
        .split_once(char::is_whitespace)
        .unwrap_or((config, ""));
    let implied = match module.rsplit('.').next().unwrap_or("") {
        "PlainLoginModule" => Some(SaslMechanism::Plain),
        // The mechanism (256 or 512) comes from sasl.mechanism.
        "ScramLoginModule" => None,
        "OAuthBearerLoginModule" => Some(SaslMechanism::OAuthBearer),
        "" => {
            return Err(
                "empty; expected `<LoginModule> required username=\"…\" password=\"…\";`".into(),
            );
        }
        other => {
            return Err(format!(
                "login module {other} is not supported; use PlainLoginModule, ScramLoginModule or OAuthBearerLoginModule"
            ));
        }
    };
    let rest = rest.trim_start();
    let rest = ["required", "requisite", "sufficient", "optional"]
        .iter()
        .find_map(|flag| rest.strip_prefix(flag))
        .ok_or("expected a control flag (`required`) after the login module")?;
    let (mut username, mut password) = (None, None);
    let mut chars = rest.trim().chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            break;
        }
        let key: String = chars
            .by_ref()
            .take_while(|c| *c != '=')
            .collect::<String>()
            .trim()
            .to_string();
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err("expected key=\"value\" options after the control flag".into());
        }
        let value = if chars.peek() == Some(&'"') {
            chars.next();
            let mut v = String::new();
            let mut closed = false;
            while let Some(c) = chars.next() {
                match c {
                    '\\' => {
                        if let Some(n) = chars.next() {
                            v.push(n)
                        }
                    }
                    '"' => {
                        closed = true;
                        break;
                    }
                    c => v.push(c),
                }
            }
            if !closed {
                return Err(format!("the value of {key} has no closing quote"));
            }
            v
        } else {
            let mut v = String::new();
            while let Some(c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                v.push(*c);
                chars.next();
            }
            v
        };
        match key.as_str() {
            "username" => username = Some(value),
            "password" => password = Some(Secret(value)),
            _ => {}
        }
    }
    Ok((implied, username, password))
}

/// Why SASL failed on a connection. Never contains the credential.
fn auth_error(addr: &str, sasl: &Sasl, reason: impl Into<String>) -> ClientError {
    ClientError::Auth {
        addr: addr.to_string(),
        mechanism: sasl.mechanism.name().to_string(),
        user: sasl.username.clone().unwrap_or_else(|| "(token)".into()),
        reason: reason.into(),
    }
}

/// The most SCRAM iterations accepted from a broker: Kafka allows 4096..=16384; far more would let a
/// hostile broker keep the client busy for minutes.
const MAX_SCRAM_ITERATIONS: u32 = 1_000_000;

/// Authenticate `conn` (freshly connected, or again when its session is about to end). Returns the
/// session lifetime the broker set (KIP-368), if any.
pub async fn authenticate(conn: &Connection, sasl: &Sasl) -> Result<Option<Duration>, ClientError> {
    let addr = conn.addr().to_string();
    let handshake_version = conn
        .ranges()
        .get(ApiKey::SaslHandshake)
        .map(|r| r.max.min(1))
        .filter(|v| *v >= 1)
        .ok_or_else(|| {
            auth_error(
                &addr,
                sasl,
                "the broker does not offer SaslHandshake v1 (is SASL enabled on this listener?)",
            )
        })?;
    let auth_version = conn
        .ranges()
        .get(ApiKey::SaslAuthenticate)
        .map(|r| r.max.min(2))
        .ok_or_else(|| auth_error(&addr, sasl, "the broker does not offer SaslAuthenticate"))?;
    let handshake: SaslHandshakeResponse = conn
        .request_direct(
            ApiKey::SaslHandshake,
            handshake_version,
            &SaslHandshakeRequest::default()
                .with_mechanism(StrBytes::from_static_str(sasl.mechanism.name())),
        )
        .await
        .map_err(|e| match e {
            ClientError::Disconnected { reason, .. } => auth_error(
                &addr,
                sasl,
                format!("the broker closed the connection at SaslHandshake ({reason}); it may not support {}", sasl.mechanism.name()),
            ),
            other => other,
        })?;
    if handshake.error_code != 0 {
        let offered: Vec<&str> = handshake
            .mechanisms
            .iter()
            .map(|m| m.as_str())
            .filter(|m| *m != sasl.mechanism.name())
            .collect();
        // A broker without SASL on this listener may echo the mechanism asked for, or name none.
        let offers = if offered.is_empty() {
            "it names no other; is SASL enabled on this listener?".to_string()
        } else {
            format!("it offers {}", offered.join(", "))
        };
        return Err(auth_error(
            &addr,
            sasl,
            format!(
                "the broker does not accept {} ({}); {offers}",
                sasl.mechanism.name(),
                crate::error::kafka_error_name(handshake.error_code),
            ),
        ));
    }
    let step = |bytes: Vec<u8>| {
        let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(bytes));
        let addr = addr.clone();
        async move {
            let response: SaslAuthenticateResponse = conn
                .request_direct(ApiKey::SaslAuthenticate, auth_version, &request)
                .await
                .map_err(|e| match e {
                    ClientError::Disconnected { reason, .. } => auth_error(
                        &addr,
                        sasl,
                        format!(
                            "the broker closed the connection during SaslAuthenticate ({reason})"
                        ),
                    ),
                    other => other,
                })?;
            if response.error_code != 0 {
                let message = response
                    .error_message
                    .as_ref()
                    .map(|m| m.to_string())
                    .filter(|m| !m.is_empty() && m != "NONE")
                    .unwrap_or_else(|| crate::error::kafka_error_name(response.error_code));
                return Err(auth_error(
                    &addr,
                    sasl,
                    format!("the broker refused the credentials: {message}"),
                ));
            }
            let lifetime = (response.session_lifetime_ms > 0)
                .then(|| Duration::from_millis(response.session_lifetime_ms as u64));
            Ok((response.auth_bytes, lifetime))
        }
    };
    let user = sasl.username.as_deref().unwrap_or("");
    match sasl.mechanism {
        SaslMechanism::Plain => {
            let mut msg = Vec::with_capacity(2 + user.len() + sasl.credential.0.len());
            msg.push(0);
            msg.extend_from_slice(user.as_bytes());
            msg.push(0);
            msg.extend_from_slice(sasl.credential.0.as_bytes());
            let (_, lifetime) = step(msg).await?;
            Ok(lifetime)
        }
        SaslMechanism::OAuthBearer => {
            let (challenge, lifetime) = step(oauthbearer_first(sasl.credential.expose())).await?;
            if !challenge.is_empty() {
                // RFC 7628 §3.2.3: an error is a JSON challenge; the client answers %x01 and fails.
                let _ = step(vec![1]).await;
                let status = String::from_utf8_lossy(&challenge)
                    .chars()
                    .take(300)
                    .collect::<String>();
                return Err(auth_error(
                    &addr,
                    sasl,
                    format!("the broker refused the token: {status}"),
                ));
            }
            Ok(lifetime)
        }
        SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512 => {
            let mut nonce = [0u8; 24];
            ring::rand::SystemRandom::new()
                .fill(&mut nonce)
                .map_err(|_| auth_error(&addr, sasl, "no random numbers for the SCRAM nonce"))?;
            let mut scram = Scram::new(sasl.mechanism, user, &B64.encode(nonce));
            let (server_first, _) = step(scram.client_first().into_bytes()).await?;
            let client_final = scram
                .client_final(&server_first, sasl.credential.expose())
                .map_err(|e| auth_error(&addr, sasl, e))?;
            let (server_final, lifetime) = step(client_final.into_bytes()).await?;
            scram
                .verify_server_final(&server_final)
                .map_err(|e| auth_error(&addr, sasl, e))?;
            Ok(lifetime)
        }
    }
}

/// The OAUTHBEARER client's first message (RFC 7628 §3.1), no authorization identity.
pub fn oauthbearer_first(token: &str) -> Vec<u8> {
    format!("n,,\x01auth=Bearer {token}\x01\x01").into_bytes()
}

/// A SCRAM server error (RFC 5802 §7) said the way a user can act on it.
fn scram_refusal(e: &str) -> String {
    match e {
        "invalid-proof" => "wrong password (the broker answered invalid-proof)".into(),
        "unknown-user" => "no such user (the broker answered unknown-user)".into(),
        other => format!("the broker refused: {other}"),
    }
}

/// A SCRAM client conversation (RFC 5802), one per authentication.
pub struct Scram {
    mechanism: SaslMechanism,
    client_first_bare: String,
    client_nonce: String,
    server_signature: Option<Vec<u8>>,
}

/// `saslname` escaping of a user name (RFC 5802 §5.1).
fn saslname(user: &str) -> String {
    user.replace('=', "=3D").replace(',', "=2C")
}

impl Scram {
    pub fn new(mechanism: SaslMechanism, user: &str, client_nonce: &str) -> Scram {
        Scram {
            mechanism,
            client_first_bare: format!("n={},r={client_nonce}", saslname(user)),
            client_nonce: client_nonce.to_string(),
            server_signature: None,
        }
    }

    /// `n,,n=user,r=nonce`: no channel binding, no authorization identity.
    pub fn client_first(&self) -> String {
        format!("n,,{}", self.client_first_bare)
    }

    /// Answer the server's first message with the proof.
    pub fn client_final(&mut self, server_first: &[u8], password: &str) -> Result<String, String> {
        let server_first = std::str::from_utf8(server_first)
            .map_err(|_| "the server's SCRAM message is not UTF-8")?;
        let mut nonce = None;
        let mut salt = None;
        let mut iterations = None;
        for attr in server_first.split(',') {
            match attr.split_once('=') {
                Some(("r", v)) => nonce = Some(v),
                Some(("s", v)) => salt = Some(v),
                Some(("i", v)) => iterations = Some(v),
                Some(("e", v)) => return Err(scram_refusal(v)),
                Some(("m", _)) => {
                    return Err("the broker asks for a SCRAM extension kbench does not know".into());
                }
                _ => {}
            }
        }
        let (Some(nonce), Some(salt), Some(iterations)) = (nonce, salt, iterations) else {
            return Err(
                "the server's first SCRAM message lacks its nonce, salt or iteration count".into(),
            );
        };
        if !nonce.starts_with(&self.client_nonce) || nonce.len() == self.client_nonce.len() {
            return Err("the server's SCRAM nonce does not extend kbench's".into());
        }
        let salt = B64
            .decode(salt)
            .map_err(|_| "the server's SCRAM salt is not base64")?;
        let iterations: u32 = iterations
            .parse()
            .map_err(|_| "the server's SCRAM iteration count is not a number")?;
        if iterations == 0 || iterations > MAX_SCRAM_ITERATIONS {
            return Err(format!(
                "the server asks for {iterations} SCRAM iterations (accepted: 1..={MAX_SCRAM_ITERATIONS})"
            ));
        }
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let keys = ScramKeys::derive(self.mechanism, password, &salt, iterations);
        let signature = hmac::sign(
            &hmac::Key::new(keys.hmac, &keys.stored_key),
            auth_message.as_bytes(),
        );
        let proof: Vec<u8> = keys
            .client_key
            .iter()
            .zip(signature.as_ref())
            .map(|(a, b)| a ^ b)
            .collect();
        self.server_signature = Some(
            hmac::sign(
                &hmac::Key::new(keys.hmac, &keys.server_key),
                auth_message.as_bytes(),
            )
            .as_ref()
            .to_vec(),
        );
        Ok(format!("{without_proof},p={}", B64.encode(proof)))
    }

    /// Check the server's signature: a broker that does not know the password cannot make it.
    pub fn verify_server_final(&self, server_final: &[u8]) -> Result<(), String> {
        let text = std::str::from_utf8(server_final)
            .map_err(|_| "the server's final SCRAM message is not UTF-8")?;
        if let Some(e) = text.strip_prefix("e=") {
            return Err(scram_refusal(e));
        }
        let v = text
            .split(',')
            .find_map(|a| a.strip_prefix("v="))
            .ok_or("the server's final SCRAM message has no signature")?;
        let given = B64
            .decode(v)
            .map_err(|_| "the server's SCRAM signature is not base64")?;
        let expected = self
            .server_signature
            .as_ref()
            .ok_or("the server's final message came before its first")?;
        if &given != expected {
            return Err(
                "the broker's SCRAM signature is wrong: it does not know this user's password"
                    .into(),
            );
        }
        Ok(())
    }
}

/// The keys of RFC 5802 §3 for a password, salt and iteration count; brokers store
/// `stored_key` and `server_key` (what `kbench broker --sasl-user` puts into Tansu).
pub struct ScramKeys {
    hmac: hmac::Algorithm,
    pub client_key: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl ScramKeys {
    pub fn derive(
        mechanism: SaslMechanism,
        password: &str,
        salt: &[u8],
        iterations: u32,
    ) -> ScramKeys {
        let (pbkdf, mac, hash, len) = match mechanism {
            SaslMechanism::ScramSha512 => (
                pbkdf2::PBKDF2_HMAC_SHA512,
                hmac::HMAC_SHA512,
                &digest::SHA512,
                64,
            ),
            _ => (
                pbkdf2::PBKDF2_HMAC_SHA256,
                hmac::HMAC_SHA256,
                &digest::SHA256,
                32,
            ),
        };
        let mut salted = vec![0u8; len];
        pbkdf2::derive(
            pbkdf,
            NonZeroU32::new(iterations.max(1)).expect("at least one"),
            salt,
            password.as_bytes(),
            &mut salted,
        );
        let key = hmac::Key::new(mac, &salted);
        let client_key = hmac::sign(&key, b"Client Key").as_ref().to_vec();
        let server_key = hmac::sign(&key, b"Server Key").as_ref().to_vec();
        let stored_key = digest::digest(hash, &client_key).as_ref().to_vec();
        ScramKeys {
            hmac: mac,
            client_key,
            stored_key,
            server_key,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677 §3's SCRAM-SHA-256 example, byte for byte.
    #[test]
    fn scram_sha_256_matches_rfc_7677() {
        let mut scram = Scram::new(SaslMechanism::ScramSha256, "user", "rOprNGfwEbeRWgbNEkqO");
        assert_eq!(scram.client_first(), "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first =
            b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let client_final = scram.client_final(server_first, "pencil").unwrap();
        assert_eq!(
            client_final,
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        scram
            .verify_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap();
        let err = scram
            .verify_server_final(b"v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap_err();
        assert!(err.contains("signature is wrong"), "{err}");
    }

    #[test]
    fn scram_refuses_a_nonce_that_is_not_ours_and_absurd_iterations() {
        let mut scram = Scram::new(SaslMechanism::ScramSha512, "u", "abc");
        assert!(scram.client_final(b"r=xyz123,s=AAAA,i=4096", "p").is_err());
        assert!(scram.client_final(b"r=abc,s=AAAA,i=4096", "p").is_err());
        let err = scram
            .client_final(b"r=abcdef,s=AAAA,i=2000000000", "p")
            .unwrap_err();
        assert!(err.contains("iterations"), "{err}");
        let err = scram.client_final(b"e=unknown-user", "p").unwrap_err();
        assert!(err.contains("unknown-user"), "{err}");
    }

    #[test]
    fn user_names_are_escaped() {
        let scram = Scram::new(SaslMechanism::ScramSha256, "a=b,c", "n");
        assert_eq!(scram.client_first(), "n,,n=a=3Db=2Cc,r=n");
    }

    #[test]
    fn jaas_configs_parse() {
        let (m, u, p) = parse_jaas(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="s3cr\"et";"#,
        )
        .unwrap();
        assert_eq!(m, Some(SaslMechanism::Plain));
        assert_eq!(u.as_deref(), Some("alice"));
        assert_eq!(p.unwrap().expose(), "s3cr\"et");
        let (m, u, _) = parse_jaas(
            "org.apache.kafka.common.security.scram.ScramLoginModule required\n  username=bob\n  password=\"x y\";",
        )
        .unwrap();
        assert_eq!((m, u.as_deref()), (None, Some("bob")));
        let err = parse_jaas("com.sun.security.auth.module.Krb5LoginModule required;").unwrap_err();
        assert!(err.contains("Krb5LoginModule"), "{err}");
        let err = parse_jaas(r#"x.PlainLoginModule required password="hunter2"#).unwrap_err();
        assert!(!err.contains("hunter2"), "{err}");
    }

    #[test]
    fn secrets_do_not_print() {
        let s = SaslSettings {
            mechanism: Some(SaslMechanism::Plain),
            username: Some("alice".into()),
            password: Some(Secret::new("hunter2")),
            token: None,
        };
        assert!(!format!("{s:?}").contains("hunter2"));
        let built = s.build().unwrap();
        assert!(!format!("{built:?}").contains("hunter2"));
    }

    #[test]
    fn missing_pieces_name_their_property() {
        let s = SaslSettings::default();
        assert_eq!(s.build().unwrap_err().0, "sasl.mechanism");
        let s = SaslSettings {
            mechanism: Some(SaslMechanism::ScramSha256),
            username: Some("u".into()),
            ..Default::default()
        };
        assert_eq!(s.build().unwrap_err().0, "sasl.password");
        let s = SaslSettings {
            mechanism: Some(SaslMechanism::OAuthBearer),
            ..Default::default()
        };
        assert_eq!(
            s.build().unwrap_err().0,
            "sasl.oauthbearer.token.endpoint.url"
        );
    }
}
