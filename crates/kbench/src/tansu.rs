//! The embedded Kafka-compatible broker: Tansu with in-memory storage, served in the foreground of
//! `kbench broker`. Only the child process runs this; the benchmarking process never hosts the broker,
//! so its CPU figures stay the client's own.
//!
//! With SASL users or tokens the broker is assembled by [`crate::tansu_sasl`].

use std::net::SocketAddr;

use tansu_broker::broker::Broker;
use tansu_broker::coordinator::group::administrator::Controller;
use tansu_storage::StorageContainer;
use url::Url;

/// Serve a single-node Tansu broker on `listen` until the process is ended, advertising
/// `advertise` (`host:port`) when given, else `listen`; with SASL when `sasl` names anyone.
pub async fn serve(
    listen: SocketAddr,
    advertise: Option<&str>,
    node_id: i32,
    sasl: &crate::tansu_sasl::SaslUsers,
) -> Result<(), String> {
    let listener = Url::parse(&format!("tcp://{listen}")).map_err(|e| e.to_string())?;
    let advertised = match advertise {
        Some(a) => {
            Url::parse(&format!("tcp://{a}")).map_err(|e| format!("--advertise {a}: {e}"))?
        }
        None => listener.clone(),
    };
    let storage = Url::parse("memory://kbench/").map_err(|e| e.to_string())?;
    if !sasl.is_empty() {
        return crate::tansu_sasl::serve(listen, advertised, node_id, storage, sasl).await;
    }
    let mut broker = Broker::<Controller<StorageContainer>, StorageContainer>::builder()
        .node_id(node_id)
        .cluster_id(CLUSTER_ID)
        .incarnation_id(uuid::Uuid::new_v4())
        .advertised_listener(advertised)
        .storage(storage)
        .listener(listener)
        .silent(true)
        .build()
        .await
        .map_err(|e| format!("embedded broker: could not start Tansu: {e}"))?;
    broker
        .serve(tokio::time::Instant::now())
        .await
        .map_err(|e| format!("embedded broker on {listen}: {e}"))
}

pub const CLUSTER_ID: &str = "kbench-embedded";
