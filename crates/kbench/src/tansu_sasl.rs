//! The embedded broker with SASL on (`kbench broker --sasl-user`, `--sasl-oauth-token`), assembled
//! from Tansu's public parts rather than its builder, for three reasons:
//!
//! - Tansu 0.6's in-memory storage does not keep SCRAM credentials (its calls for them are no-ops),
//!   so the SASL callback here ([`Verifier`]) answers each user's SCRAM-SHA-256 and SCRAM-SHA-512
//!   credential itself (derived at start with a random salt; the password is not kept for SCRAM),
//!   and checks PLAIN passwords (Tansu accepts any) and OAUTHBEARER tokens (Tansu has no
//!   validator). The rest of the SASL exchange is Tansu's.
//! - Tansu answers a second SaslHandshake on an authenticated connection by dropping the
//!   connection's authentication, so KIP-368 re-authentication cannot work on it. Each connection
//!   here gets Tansu's routes for everything but SASL, and SASL services that hand the first
//!   authentication to Tansu and run re-authentications themselves ([`Reauth`]).
//! - Tansu sets a session lifetime but never enforces it. Here a request other than SASL on a
//!   connection whose session has expired closes the connection, as a Kafka broker with
//!   `connections.max.reauth.ms` does, so a client that does not re-authenticate is caught.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rama::layer::MapErrLayer;
use rama::{Layer as _, Service};
use rsasl::callback::{Context, Request, SessionCallback, SessionData};
use rsasl::config::SASLConfig;
use rsasl::mechanisms::oauthbearer::properties::{OAuthBearerError, OAuthBearerValidate};
use rsasl::mechanisms::scram::properties::ScramStoredPassword;
use rsasl::prelude::{Mechname, SASLServer, Session, SessionError, State};
use rsasl::property::{AuthId, OAuthBearerToken, Password};
use rsasl::validate::{Validate, ValidationError};
use tansu_auth::{Authentication, Justification, SaslAuthenticateService, SaslHandshakeService};
use tansu_broker::Error;
use tansu_broker::coordinator::group::administrator::Controller;
use tansu_sans_io::{
    ApiKey as _, ErrorCode, Frame, SaslAuthenticateRequest, SaslAuthenticateResponse,
    SaslHandshakeRequest, SaslHandshakeResponse,
};
use tansu_service::{
    BytesFrameLayer, FrameRequestLayer, FrameRouteService, TcpBytesLayer, TcpContext,
    TcpContextLayer,
};
use tansu_storage::{BrokerRegistrationRequest, Storage, StorageContainer};
use url::Url;

use crate::tansu::CLUSTER_ID;

/// SCRAM iterations for stored credentials: Kafka's minimum.
const SCRAM_ITERATIONS: u32 = 4096;

/// Re-authentications accepted by this broker since it started (printed on each one when asked).
static REAUTHENTICATIONS: AtomicU64 = AtomicU64::new(0);

/// Who may connect when SASL is on: `name → password` users (SCRAM-SHA-256/512 and PLAIN) and
/// OAUTHBEARER tokens.
#[derive(Debug, Clone)]
pub struct SaslUsers {
    pub users: Vec<(String, String)>,
    pub tokens: Vec<String>,
    /// The session lifetime given to clients (KIP-368), enforced; Tansu's default is 60 s.
    pub session_lifetime: Duration,
    /// Print a line on stderr for every re-authentication.
    pub log_reauthentication: bool,
}

impl SaslUsers {
    pub fn is_empty(&self) -> bool {
        self.users.is_empty() && self.tokens.is_empty()
    }
}

/// Serve with SASL on `listen` until the process ends.
pub async fn serve(
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
        let service = connection_services(
            groups.clone(),
            storage.clone(),
            config.clone(),
            sasl.session_lifetime,
            sasl.log_reauthentication,
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

/// One connection's services: Tansu's storage and group routes, the SASL routes below, and the
/// session expiry check in front of them all; framing and SASL gating by Tansu's layers.
fn connection_services(
    groups: Controller<StorageContainer>,
    storage: StorageContainer,
    config: Arc<SASLConfig>,
    lifetime: Duration,
    log: bool,
) -> Result<impl Service<(), tokio::net::TcpStream, Error = Error> + Clone, Error> {
    let builder = FrameRouteService::<(), Error>::builder();
    let builder = tansu_broker::service::storage::services(builder, storage)?;
    let builder = tansu_broker::service::coordinator::services(builder, groups)?;
    let session = Reauth {
        config: config.clone(),
        lifetime,
        log,
        state: Arc::new(Mutex::new(ReauthState::default())),
    };
    let builder = builder
        .with_route(
            SaslAuthenticateRequest::KEY,
            (
                MapErrLayer::new(Error::from),
                FrameRequestLayer::<SaslAuthenticateRequest>::new(),
            )
                .into_layer(AuthenticateService {
                    session: session.clone(),
                    tansu: SaslAuthenticateService::default()
                        .session_lifetime_ms(Some(lifetime.as_millis() as i64)),
                })
                .boxed(),
        )?
        .with_route(
            SaslHandshakeRequest::KEY,
            (
                MapErrLayer::new(Error::from),
                FrameRequestLayer::<SaslHandshakeRequest>::new(),
            )
                .into_layer(HandshakeService {
                    session: session.clone(),
                })
                .boxed(),
        )?;
    let route = builder.build()?;
    Ok((
        TcpContextLayer::new(TcpContext::default().cluster_id(Some(CLUSTER_ID.into()))),
        TcpBytesLayer::default(),
        BytesFrameLayer::default().with_sasl_config(Some(config)),
    )
        .into_layer(Expiry {
            inner: route,
            session,
        }))
}

/// A connection's SASL session beyond what Tansu keeps: when it expires, and a re-authentication
/// under way.
#[derive(Clone)]
struct Reauth {
    config: Arc<SASLConfig>,
    lifetime: Duration,
    log: bool,
    state: Arc<Mutex<ReauthState>>,
}

#[derive(Default)]
struct ReauthState {
    expires: Option<Instant>,
    session: Option<Session<Justification>>,
}

impl Reauth {
    fn state(&self) -> std::sync::MutexGuard<'_, ReauthState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Whether the connection's first authentication (Tansu's) is done.
fn authenticated<S>(ctx: &rama::Context<S>) -> bool {
    ctx.get::<Authentication>()
        .is_some_and(Authentication::is_authenticated)
}

/// SaslHandshake: Tansu's for the first authentication; on an authenticated connection, the start of
/// a re-authentication run here.
#[derive(Clone)]
struct HandshakeService {
    session: Reauth,
}

impl<S: Send + Sync + 'static> Service<S, SaslHandshakeRequest> for HandshakeService {
    type Response = SaslHandshakeResponse;
    type Error = tansu_auth::Error;

    async fn serve(
        &self,
        ctx: rama::Context<S>,
        req: SaslHandshakeRequest,
    ) -> Result<Self::Response, Self::Error> {
        if !authenticated(&ctx) {
            return SaslHandshakeService.serve(ctx, req).await;
        }
        let started = Mechname::parse(req.mechanism.as_bytes())
            .ok()
            .and_then(|m| {
                SASLServer::<Justification>::new(self.session.config.clone())
                    .start_suggested(m)
                    .ok()
            });
        match started {
            Some(session) => {
                self.session.state().session = Some(session);
                Ok(SaslHandshakeResponse::default()
                    .error_code(ErrorCode::None.into())
                    .mechanisms(Some([req.mechanism].into())))
            }
            None => Ok(SaslHandshakeResponse::default()
                .error_code(ErrorCode::UnsupportedSaslMechanism.into())
                .mechanisms(Some([req.mechanism].into()))),
        }
    }
}

/// SaslAuthenticate: Tansu's for the first authentication (the session's expiry then set);
/// the steps of a re-authentication run here.
#[derive(Clone)]
struct AuthenticateService {
    session: Reauth,
    tansu: SaslAuthenticateService,
}

impl<S: Send + Sync + 'static> Service<S, SaslAuthenticateRequest> for AuthenticateService {
    type Response = SaslAuthenticateResponse;
    type Error = tansu_auth::Error;

    async fn serve(
        &self,
        ctx: rama::Context<S>,
        req: SaslAuthenticateRequest,
    ) -> Result<Self::Response, Self::Error> {
        let lifetime_ms = self.session.lifetime.as_millis() as i64;
        let reauthenticating = self.session.state().session.take();
        let Some(mut session) = reauthenticating else {
            let auth = ctx.get::<Authentication>().cloned();
            let response = self.tansu.serve(ctx, req).await?;
            if auth.is_some_and(|a| a.is_authenticated()) && response.error_code == 0 {
                let mut state = self.session.state();
                if state.expires.is_none() {
                    state.expires = Some(Instant::now() + self.session.lifetime);
                }
            }
            return Ok(response);
        };
        let mut out = std::io::Cursor::new(Vec::new());
        let failed = || {
            SaslAuthenticateResponse::default()
                .error_code(ErrorCode::SaslAuthenticationFailed.into())
                .error_message(Some(ErrorCode::SaslAuthenticationFailed.to_string()))
                .auth_bytes(bytes::Bytes::new())
                .session_lifetime_ms(Some(0))
        };
        let Ok(state) = session.step(Some(&req.auth_bytes), &mut out) else {
            return Ok(failed());
        };
        if let State::Finished(_) = state {
            // A failed validation leaves no value: refused, as the first authentication is.
            if !matches!(session.validation(), Some(Ok(_))) {
                return Ok(failed());
            }
            self.session.state().expires = Some(Instant::now() + self.session.lifetime);
            let n = REAUTHENTICATIONS.fetch_add(1, Ordering::Relaxed) + 1;
            if self.session.log {
                eprintln!("kbench broker: SASL re-authentication accepted ({n} so far)");
            }
        } else {
            self.session.state().session = Some(session);
        }
        Ok(SaslAuthenticateResponse::default()
            .error_code(ErrorCode::None.into())
            .error_message(None)
            .auth_bytes(bytes::Bytes::from(out.into_inner()))
            .session_lifetime_ms(Some(lifetime_ms)))
    }
}

/// Every request but SASL's on a connection whose session has expired closes the connection.
#[derive(Clone)]
struct Expiry<R> {
    inner: R,
    session: Reauth,
}

impl<R> Service<(), Frame> for Expiry<R>
where
    R: Service<(), Frame, Response = Frame, Error = Error>,
{
    type Response = Frame;
    type Error = Error;

    async fn serve(&self, ctx: rama::Context<()>, req: Frame) -> Result<Frame, Error> {
        let api_key = req.api_key()?;
        if api_key != SaslHandshakeRequest::KEY && api_key != SaslAuthenticateRequest::KEY {
            let expired = self
                .session
                .state()
                .expires
                .is_some_and(|at| Instant::now() >= at);
            if expired {
                return Err(Error::Custom(
                    "SASL session expired without re-authentication (KIP-368)".into(),
                ));
            }
        }
        self.inner.serve(ctx, req).await
    }
}
