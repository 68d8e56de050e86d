//! `kbench broker`: the embedded Tansu broker (in-memory storage) in the foreground.

use std::net::SocketAddr;

use clap::Args;

#[derive(Debug, Args)]
pub struct BrokerArgs {
    /// Address to listen on (and advertise).
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub listen: SocketAddr,
    /// Address to advertise to clients instead (e.g. a TLS terminator such as stunnel in front).
    #[arg(long)]
    pub advertise: Option<String>,
    /// Print nothing at start-up.
    #[arg(long)]
    pub quiet: bool,
}

#[cfg(feature = "embedded-broker")]
pub async fn run(args: BrokerArgs) -> u8 {
    if !args.quiet {
        eprintln!(
            "kbench broker: Tansu 0.6 with in-memory storage, listening on {} (Ctrl-C to stop)",
            args.listen
        );
    }
    match crate::tansu::serve(args.listen, args.advertise.as_deref(), 0).await {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("kbench broker: error: {e}");
            1
        }
    }
}

#[cfg(not(feature = "embedded-broker"))]
pub async fn run(_args: BrokerArgs) -> u8 {
    eprintln!(
        "kbench broker: error: this build has no embedded broker (built without the `embedded-broker` feature); pass --bootstrap-server"
    );
    2
}
