//! The embedded Kafka-compatible broker: Tansu with in-memory storage, served in the foreground of
//! `kbench broker`. Only the child process runs this; the benchmarking process never hosts the broker,
//! so its CPU figures stay the client's own.
//!
//! With SASL users or tokens the broker is assembled from Tansu's public parts rather than its
//! builder: the builder builds its SASL configuration from its storage, and Tansu 0.6's in-memory
//! storage does not keep SCRAM credentials (its calls for them are no-ops). Here every connection
//! gets Tansu's own service stack (`tansu_broker::service::services`) with SASL on, and a SASL
//! callback that answers each user's SCRAM-SHA-256 and SCRAM-SHA-512 credential (derived at start
//! with a random salt; the password itself is not kept for SCRAM), checks PLAIN passwords (Tansu
//! accepts any) and OAUTHBEARER tokens (Tansu has no validator), and leaves the rest to Tansu.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use rsasl::callback::{Context, Request, SessionCallback, SessionData};
use rsasl::config::SASLConfig;
use rsasl::mechanisms::oauthbearer::properties::{OAuthBearerError, OAuthBearerValidate};
use rsasl::mechanisms::scram::properties::ScramStoredPassword;
use rsasl::prelude::SessionError;
use rsasl::property::{AuthId, OAuthBearerToken, Password};
use rsasl::validate::{Validate, ValidationError};
use tansu_broker::broker::Broker;
use tansu_broker::coordinator::group::administrator::Controller;
use tansu_storage::{BrokerRegistrationRequest, Storage, StorageContainer};
use url::Url;

/// Who may connect when SASL is on: `name → password` users (SCRAM-SHA-256/512 and PLAIN) and
/// OAUTHBEARER tokens.
#[derive(Debug, Clone, Default)]
pub struct SaslUsers {
    pub users: Vec<(String, String)>,
    pub tokens: Vec<String>,
}

impl SaslUsers {
    pub fn is_empty(&self) -> bool {
        self.users.is_empty() && self.tokens.is_empty()
    }
}

/// Serve a single-node Tansu broker on `listen` until the process is ended, advertising
/// `advertise` (`host:port`) when given, else `listen`; with SASL when `sasl` names anyone.
pub async fn serve(
    listen: SocketAddr,
    advertise: Option<&str>,
    node_id: i32,
    sasl: &SaslUsers,
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
        return serve_sasl(listen, advertised, node_id, storage, sasl).await;
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

const CLUSTER_ID: &str = "kbench-embedded";

/// SCRAM iterations for stored credentials: Kafka's minimum.
const SCRAM_ITERATIONS: u32 = 4096;

async fn serve_sasl(
    listen: SocketAddr,
    advertised: Url,
    node_id: i32,
    storage_url: Url,
    sasl: &SaslUsers,
) -> Result<(), String> {
    let start_err =
        |e: &dyn std::fmt::Display| format!("embedded broker: could not start Tansu: {e}");
    let storage = StorageContainer::builder()
        .cluster_id(CLUSTER_ID)
        .node_id(node_id)
        .advertised_listener(advertised)
        .storage(storage_url)
        .silent(true)
        .build()
        .await
        .map_err(|e| start_err(&e))?;
    let mut scram = HashMap::new();
    for (user, password) in &sasl.users {
        for mechanism in [
            kbench_client::SaslMechanism::ScramSha256,
            kbench_client::SaslMechanism::ScramSha512,
        ] {
            let salt: [u8; 16] = rand::random();
            let keys = kbench_client::sasl::ScramKeys::derive(
                mechanism,
                password,
                &salt,
                SCRAM_ITERATIONS,
            );
            scram.insert(
                (user.clone(), mechanism.name()),
                Stored {
                    salt: salt.to_vec(),
                    stored_key: keys.stored_key,
                    server_key: keys.server_key,
                },
            );
        }
    }
    let groups = Controller::with_storage(storage.clone()).map_err(|e| start_err(&e))?;
    let callback = Verifier {
        tansu: tansu_auth::Callback::new(storage.clone()),
        passwords: sasl.users.iter().cloned().collect(),
        scram,
        tokens: sasl.tokens.clone(),
    };
    let config: Arc<SASLConfig> = SASLConfig::builder()
        .with_defaults()
        .with_callback(callback)
        .map_err(|e| start_err(&e))?;
    storage
        .register_broker(BrokerRegistrationRequest {
            broker_id: node_id,
            cluster_id: CLUSTER_ID.into(),
            incarnation_id: uuid::Uuid::new_v4(),
            rack: None,
        })
        .await
        .map_err(|e| start_err(&e))?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| format!("embedded broker on {listen}: {e}"))?;
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::debug!("embedded broker: accept: {e}");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let service = tansu_broker::service::services(
            CLUSTER_ID,
            groups.clone(),
            storage.clone(),
            Some(config.clone()),
        )
        .map_err(|e| start_err(&e))?;
        tokio::spawn(async move {
            use rama::Service as _;
            if let Err(e) = service.serve(rama::Context::default(), stream).await {
                tracing::debug!("embedded broker: connection ended: {e:?}");
            }
        });
    }
}

/// A user's SCRAM credential for one mechanism, as a broker stores it (RFC 5802: never the password).
struct Stored {
    salt: Vec<u8>,
    stored_key: Vec<u8>,
    server_key: Vec<u8>,
}

/// Tansu's SASL callback, given what Tansu 0.6's in-memory storage cannot hold: its SCRAM
/// credential calls are no-ops there, so SCRAM credentials are answered from `scram`; PLAIN
/// passwords and OAUTHBEARER tokens are checked against what was given.
struct Verifier<S> {
    tansu: tansu_auth::Callback<S>,
    passwords: HashMap<String, String>,
    scram: HashMap<(String, &'static str), Stored>,
    tokens: Vec<String>,
}

impl<S: Storage> SessionCallback for Verifier<S> {
    fn callback(
        &self,
        session_data: &SessionData,
        context: &Context<'_>,
        request: &mut Request<'_>,
    ) -> Result<(), SessionError> {
        if request.is::<OAuthBearerValidate>() {
            let token = context
                .get_ref::<OAuthBearerToken>()
                .map(|t| t.strip_prefix("Bearer ").unwrap_or(t).trim());
            let known = token.is_some_and(|t| self.tokens.iter().any(|k| k == t));
            let verdict = if known {
                Ok(())
            } else {
                Err(OAuthBearerError::new("invalid_token", None, None))
            };
            request.satisfy::<OAuthBearerValidate>(&verdict)?;
            return Ok(());
        }
        let mechanism = session_data.mechanism().mechanism;
        if mechanism.starts_with("SCRAM-") {
            let user = context.get_ref::<AuthId>().unwrap_or("");
            if let Some(stored) = self.scram.get(&(user.to_string(), mechanism)) {
                request.satisfy::<ScramStoredPassword<'_>>(&ScramStoredPassword::new(
                    SCRAM_ITERATIONS,
                    &stored.salt,
                    &stored.stored_key,
                    &stored.server_key,
                ))?;
            }
            return Ok(());
        }
        self.tansu.callback(session_data, context, request)
    }

    fn validate(
        &self,
        session_data: &SessionData,
        context: &Context<'_>,
        validate: &mut Validate<'_>,
    ) -> Result<(), ValidationError> {
        if session_data.mechanism().mechanism == "PLAIN" {
            let user = context.get_ref::<AuthId>().unwrap_or("");
            let given = context.get_ref::<Password>().unwrap_or(b"");
            let known = self
                .passwords
                .get(user)
                .is_some_and(|p| p.as_bytes() == given);
            if !known {
                return Err(ValidationError::Boxed(
                    "unknown user or wrong password".into(),
                ));
            }
        }
        self.tansu.validate(session_data, context, validate)
    }
}
