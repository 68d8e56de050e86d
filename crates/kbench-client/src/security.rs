//! Secured connections: `security.protocol` and TLS (rustls) by the names Java and librdkafka users
//! know. The settings are plain data ([`SecuritySettings`], compared and shown without secrets); the
//! [`Tls`] built from them once per run holds the rustls configuration every connection shares.
//! Certificate problems are said with the broker's address and the reason (unknown CA, name mismatch,
//! expired) when a connection is opened, which is before any load.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// `security.protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SecurityProtocol {
    #[default]
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }

    /// The protocol that TLS and SASL on or off make.
    pub fn of(tls: bool, sasl: bool) -> SecurityProtocol {
        match (tls, sasl) {
            (false, false) => SecurityProtocol::Plaintext,
            (true, false) => SecurityProtocol::Ssl,
            (false, true) => SecurityProtocol::SaslPlaintext,
            (true, true) => SecurityProtocol::SaslSsl,
        }
    }
}

impl std::str::FromStr for SecurityProtocol {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Ok(SecurityProtocol::Plaintext),
            "SSL" => Ok(SecurityProtocol::Ssl),
            "SASL_PLAINTEXT" => Ok(SecurityProtocol::SaslPlaintext),
            "SASL_SSL" => Ok(SecurityProtocol::SaslSsl),
            _ => Err("expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL".into()),
        }
    }
}

/// The TLS side of the settings, as given. Paths are PEM files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// CA certificates to trust (`ssl.ca.location`, `ssl.truststore.location` of type PEM); the
    /// system's roots when absent.
    pub ca_file: Option<PathBuf>,
    /// The client's certificate chain (`ssl.certificate.location`, or the certificates in a PEM
    /// `ssl.keystore.location`).
    pub certificate_file: Option<PathBuf>,
    /// The client's private key (`ssl.key.location`, or the key in a PEM `ssl.keystore.location`).
    pub key_file: Option<PathBuf>,
    /// Check that the certificate names the broker (`ssl.endpoint.identification.algorithm=https`,
    /// the default; empty turns it off).
    pub verify_hostname: bool,
    /// Check the certificate at all (`enable.ssl.certificate.verification`, default true).
    pub verify_certificate: bool,
}

impl Default for TlsSettings {
    fn default() -> Self {
        TlsSettings {
            ca_file: None,
            certificate_file: None,
            key_file: None,
            verify_hostname: true,
            verify_certificate: true,
        }
    }
}

/// How to secure every connection of a run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SecuritySettings {
    pub protocol: SecurityProtocol,
    pub tls: TlsSettings,
    pub sasl: crate::sasl::SaslSettings,
}

/// Why TLS could not be set up from the settings: the property (or file) and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {reason}")]
pub struct TlsSetupError {
    pub key: &'static str,
    pub reason: String,
}

fn setup_error(key: &'static str, reason: impl Into<String>) -> TlsSetupError {
    TlsSetupError {
        key,
        reason: reason.into(),
    }
}

/// TLS ready to open connections with: one rustls configuration shared by every connection.
#[derive(Clone)]
pub struct Tls {
    connector: tokio_rustls::TlsConnector,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls")
    }
}

impl PartialEq for Tls {
    /// Two runs' TLS are compared by their settings, never by this handle.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl SecuritySettings {
    /// The TLS every connection uses, when the protocol asks for it; files are read and checked
    /// here, so a missing or malformed one is an error before anything is contacted.
    pub fn tls(&self) -> Result<Option<Arc<Tls>>, TlsSetupError> {
        if !self.protocol.uses_tls() {
            return Ok(None);
        }
        Tls::new(&self.tls).map(|t| Some(Arc::new(t)))
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_certificates(
    key: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    let pem = crate::input::read(path, crate::input::SECRET_FILE)
        .map_err(|e| setup_error(key, format!("{}: {e}", path.display())))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| setup_error(key, format!("{}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(setup_error(
            key,
            format!("{}: no PEM certificate in it", path.display()),
        ));
    }
    Ok(certs)
}

impl Tls {
    pub fn new(settings: &TlsSettings) -> Result<Tls, TlsSetupError> {
        let mut roots = RootCertStore::empty();
        let mut pinned = Vec::new();
        match &settings.ca_file {
            Some(path) => {
                for cert in read_certificates("ssl.ca.location", path)? {
                    // A self-signed broker certificate given as the CA is trusted as itself, as a
                    // Java trust store holding it would.
                    pinned.push(cert.clone());
                    roots.add(cert).map_err(|e| {
                        setup_error("ssl.ca.location", format!("{}: {e}", path.display()))
                    })?;
                }
            }
            None => {
                let native = rustls_native_certs::load_native_certs();
                for cert in native.certs {
                    let _ = roots.add(cert);
                }
                if roots.is_empty() && settings.verify_certificate {
                    return Err(setup_error(
                        "ssl.ca.location",
                        "no CA given and no system CA certificates found",
                    ));
                }
            }
        }
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS12, &rustls::version::TLS13])
            .map_err(|e| setup_error("security.protocol", e.to_string()))?;
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .map_err(|e| setup_error("ssl.ca.location", e.to_string()))?;
        let builder = builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Verifier {
                webpki,
                pinned,
                check_chain: settings.verify_certificate,
                check_name: settings.verify_hostname,
            }));
        let config = match (&settings.certificate_file, &settings.key_file) {
            (None, None) => builder.with_no_client_auth(),
            (Some(cert), Some(key)) => {
                let chain = read_certificates("ssl.certificate.location", cert)?;
                let pem = crate::input::read(key, crate::input::SECRET_FILE).map_err(|e| {
                    setup_error("ssl.key.location", format!("{}: {e}", key.display()))
                })?;
                let key_der = PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
                    setup_error(
                        "ssl.key.location",
                        format!("{}: no usable PEM private key ({e})", key.display()),
                    )
                })?;
                builder
                    .with_client_auth_cert(chain, key_der)
                    .map_err(|e| setup_error("ssl.key.location", e.to_string()))?
            }
            (Some(_), None) => {
                return Err(setup_error(
                    "ssl.key.location",
                    "a client certificate needs its private key",
                ));
            }
            (None, Some(_)) => {
                return Err(setup_error(
                    "ssl.certificate.location",
                    "a private key needs its client certificate",
                ));
            }
        };
        Ok(Tls {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
        })
    }

    /// Run the TLS handshake over `stream` towards `addr` (`host:port`): the host is the name the
    /// certificate must carry.
    pub async fn connect(
        &self,
        addr: &str,
        stream: tokio::net::TcpStream,
    ) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, String> {
        let host = addr
            .rsplit_once(':')
            .map_or(addr, |(h, _)| h)
            .trim_start_matches('[')
            .trim_end_matches(']');
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| format!("TLS: {host:?} is not a name a certificate can carry: {e}"))?;
        self.connector
            .connect(name, stream)
            .await
            .map_err(|e| describe_handshake_error(host, &e))
    }
}

/// A handshake failure in words a user can act on.
fn describe_handshake_error(host: &str, e: &std::io::Error) -> String {
    let Some(tls) = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    else {
        return format!("TLS handshake failed: {e} (is this a TLS port?)");
    };
    match tls {
        rustls::Error::InvalidCertificate(c) => match c {
            CertificateError::UnknownIssuer => "TLS: unknown CA: the broker's certificate is not signed by a trusted CA (give it with ssl.ca.location or ssl.truststore.location)".to_string(),
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => format!(
                "TLS: name mismatch: the broker's certificate is not valid for {host} (ssl.endpoint.identification.algorithm= turns this check off)"
            ),
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                "TLS: the broker's certificate has expired".to_string()
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                "TLS: the broker's certificate is not valid yet".to_string()
            }
            CertificateError::Other(o) if format!("{o:?}").contains("CaUsedAsEndEntity") => {
                "TLS: unknown CA: the broker presents a self-signed CA certificate as its own; give that certificate with ssl.ca.location to trust it".to_string()
            }
            other => format!("TLS: the broker's certificate was refused: {other:?}"),
        },
        rustls::Error::AlertReceived(alert) => format!(
            "TLS: the broker refused the handshake ({alert:?}); does it require a client certificate (ssl.certificate.location, ssl.key.location)?"
        ),
        other => format!("TLS handshake failed: {other}"),
    }
}

/// webpki's verification, plus: a broker certificate that is itself in the given CA file is trusted
/// (a self-signed certificate, pinned); with `check_name` off, a name mismatch is let through
/// (`ssl.endpoint.identification.algorithm=`); with `check_chain` off, any certificate is accepted
/// (`enable.ssl.certificate.verification=false`). Handshake signatures are always verified.
#[derive(Debug)]
struct Verifier {
    webpki: Arc<WebPkiServerVerifier>,
    pinned: Vec<CertificateDer<'static>>,
    check_chain: bool,
    check_name: bool,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if !self.check_chain {
            return Ok(ServerCertVerified::assertion());
        }
        match self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.check_name => Ok(ServerCertVerified::assertion()),
            Err(_)
                if self
                    .pinned
                    .iter()
                    .any(|p| p.as_ref() == end_entity.as_ref()) =>
            {
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}
