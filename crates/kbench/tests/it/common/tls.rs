//! A TLS target for the tests: a private CA made here (rcgen), and `kbench broker` behind stunnel,
//! which terminates TLS (Tansu 0.6 does not serve TLS itself).

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{free_port, wait_until};

/// A private CA and the certificates the tests need, as PEM files in `dir`.
pub struct Pki {
    pub ca: PathBuf,
    /// Valid for `localhost` and 127.0.0.1.
    pub server: (PathBuf, PathBuf),
    /// Valid only for `broker.example`.
    pub wrong_name: (PathBuf, PathBuf),
    /// A client certificate the CA signed.
    pub client: (PathBuf, PathBuf),
}

impl Pki {
    pub fn new(dir: &Path) -> Pki {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair, SanType};
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "kbench test CA");
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let write = |name: &str, pem: String| {
            let p = dir.join(name);
            std::fs::write(&p, pem).unwrap();
            p
        };
        let leaf = |name: &str, sans: Vec<SanType>| {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.subject_alt_names = sans;
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, name);
            let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
            (
                write(&format!("{name}.pem"), cert.pem()),
                write(&format!("{name}.key"), key.serialize_pem()),
            )
        };
        Pki {
            ca: write("ca.pem", ca.pem()),
            server: leaf(
                "server",
                vec![
                    SanType::DnsName("localhost".try_into().unwrap()),
                    SanType::IpAddress(Ipv4Addr::LOCALHOST.into()),
                ],
            ),
            wrong_name: leaf(
                "wrong-name",
                vec![SanType::DnsName("broker.example".try_into().unwrap())],
            ),
            client: leaf(
                "client",
                vec![SanType::DnsName("kbench-client".try_into().unwrap())],
            ),
        }
    }
}

/// `kbench broker` listening in plaintext and advertising the stunnel port, and stunnel in front of
/// it; both die with this value.
pub struct TlsBroker {
    broker: Child,
    stunnel: Child,
    /// The TLS address clients use.
    pub addr: String,
}

impl TlsBroker {
    pub fn start(dir: &Path, cert: &(PathBuf, PathBuf), client_ca: Option<&Path>) -> TlsBroker {
        Self::start_with(dir, cert, client_ca, &[])
    }

    /// As [`TlsBroker::start`], with more `kbench broker` flags (e.g. `--sasl-user` for SASL_SSL).
    pub fn start_with(
        dir: &Path,
        cert: &(PathBuf, PathBuf),
        client_ca: Option<&Path>,
        flags: &[&str],
    ) -> TlsBroker {
        let (plain_port, tls_port) = (free_port(), free_port());
        let plain = format!("127.0.0.1:{plain_port}");
        let addr = format!("127.0.0.1:{tls_port}");
        let broker = super::kbench()
            .args([
                "broker",
                "--quiet",
                "--listen",
                &plain,
                "--advertise",
                &addr,
            ])
            .args(flags)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("kbench broker");
        let mut conf = format!(
            "foreground = yes\npid =\n[kafka]\naccept = {addr}\nconnect = {plain}\ncert = {}\nkey = {}\n",
            cert.0.display(),
            cert.1.display()
        );
        if let Some(ca) = client_ca {
            conf.push_str(&format!(
                "CAfile = {}\nverifyChain = yes\nrequireCert = yes\n",
                ca.display()
            ));
        }
        let conf_path = dir.join(format!("stunnel-{tls_port}.conf"));
        std::fs::write(&conf_path, conf).unwrap();
        let stunnel = Command::new(stunnel())
            .arg(&conf_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("stunnel (Debian package stunnel4; scripts/install-test-tools installs it)");
        let up = |a: &str| std::net::TcpStream::connect(a).is_ok();
        wait_until(
            "broker and stunnel listening",
            Duration::from_secs(30),
            || up(&plain) && up(&addr),
        );
        TlsBroker {
            broker,
            stunnel,
            addr,
        }
    }
}

impl Drop for TlsBroker {
    fn drop(&mut self) {
        for c in [&mut self.stunnel, &mut self.broker] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn stunnel() -> &'static str {
    if Path::new("/usr/bin/stunnel4").exists() {
        "/usr/bin/stunnel4"
    } else {
        "stunnel"
    }
}
