//! `kbench broker`: the embedded Tansu broker (in-memory storage) in the foreground.

use std::net::SocketAddr;

use clap::Args;

use crate::harness::{CliError, CliResult};

#[derive(Debug, Args)]
pub struct BrokerArgs {
    /// Address to listen on (and advertise).
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub listen: SocketAddr,
    /// Address to advertise to clients instead (e.g. a TLS terminator such as stunnel in front).
    #[arg(long)]
    pub advertise: Option<String>,
    /// Turn on SASL and let this user in with this password (SCRAM-SHA-256, SCRAM-SHA-512 and
    /// PLAIN). Repeatable. For local test targets: the password is visible to `ps`.
    #[arg(long = "sasl-user", value_name = "NAME:PASSWORD", value_parser = parse_user)]
    pub sasl_users: Vec<(String, String)>,
    /// Turn on SASL and accept this OAUTHBEARER bearer token. Repeatable.
    #[arg(long = "sasl-oauth-token", value_name = "TOKEN")]
    pub sasl_tokens: Vec<String>,
    /// With SASL: the session lifetime given to clients (KIP-368), after which a connection that has
    /// not re-authenticated is closed at its next request.
    #[arg(long, default_value_t = 60_000, value_parser = clap::value_parser!(u64).range(1000..=86_400_000))]
    pub sasl_session_lifetime_ms: u64,
    /// With SASL: print a line for every re-authentication accepted.
    #[arg(long)]
    pub log_reauthentication: bool,
    /// Print nothing at start-up.
    #[arg(long)]
    pub quiet: bool,
}

fn parse_user(s: &str) -> Result<(String, String), String> {
    match s.split_once(':') {
        Some((user, password)) if !user.is_empty() && !password.is_empty() => {
            Ok((user.to_string(), password.to_string()))
        }
        _ => Err("expected NAME:PASSWORD, both non-empty".into()),
    }
}

#[cfg(feature = "embedded-broker")]
pub async fn run(args: BrokerArgs) -> CliResult {
    let sasl = crate::tansu_sasl::SaslUsers {
        users: args.sasl_users,
        tokens: args.sasl_tokens,
        session_lifetime: std::time::Duration::from_millis(args.sasl_session_lifetime_ms),
        log_reauthentication: args.log_reauthentication,
    };
    // The address is tried before anything is printed: a port in use is one error naming it, not
    // "listening on …" followed by the embedded broker's own failure. (Released at once for the
    // broker to bind; a port taken in between still fails there.)
    if let Err(e) = std::net::TcpListener::bind(args.listen) {
        return Err(CliError::usage(format!("--listen {}: {e}", args.listen)));
    }
    if !args.quiet {
        let users: Vec<&str> = sasl.users.iter().map(|(u, _)| u.as_str()).collect();
        eprintln!(
            "kbench broker: Tansu 0.6 with in-memory storage, listening on {}{} (Ctrl-C to stop)",
            args.listen,
            if sasl.is_empty() {
                String::new()
            } else {
                format!(
                    ", SASL (SCRAM-SHA-256, SCRAM-SHA-512, PLAIN, OAUTHBEARER) for {} user(s) [{}] and {} token(s)",
                    users.len(),
                    users.join(", "),
                    sasl.tokens.len()
                )
            }
        );
    }
    // The first SIGTERM or SIGINT ends the broker (Tansu's serve loop never returns on its own): a
    // container runtime, Kubernetes and systemd send SIGTERM once, then kill.
    let serving = crate::tansu::serve(args.listen, args.advertise.as_deref(), 0, &sasl);
    tokio::select! {
        served = serving => served.map(|()| 0).map_err(|e| CliError::failed(format!("broker: {e}"))),
        why = crate::signals::stop_requested() => {
            if !args.quiet {
                eprintln!("kbench broker: {why}: stopped");
            }
            Ok(0)
        }
    }
}

#[cfg(not(feature = "embedded-broker"))]
pub async fn run(_args: BrokerArgs) -> CliResult {
    Err(CliError::usage(
        "this build has no embedded broker (built without the `embedded-broker` feature); pass --bootstrap-server",
    ))
}
