//! The HTTP side of `kbench serve`: the routes, the bearer-token check and the OpenAPI document.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::handler::Handler as _;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use tracing::Instrument as _;

use crate::serve::app::App;
use crate::serve::error::{ApiError, json_response};
use crate::serve::{agent, dashboard, events, history, pub_sub, v1};

/// The largest segment an agent takes (its values included).
const SEGMENT_BODY_LIMIT: usize = 256 << 20;

pub fn router(app: Arc<App>) -> Router {
    let routes = if app.agent {
        Router::new()
            .route("/agent/v1/hello", get(agent::hello))
            .route("/agent/v1/clock", get(agent::clock))
            .route(
                "/agent/v1/segments",
                // A segment may carry a producer's values (a payload file's lines, an e2e run's
                // `--value-schema` pool): more than axum's default 2 MB.
                axum::routing::post(agent::create.layer(middleware::from_fn(json_only)))
                    .layer(axum::extract::DefaultBodyLimit::max(SEGMENT_BODY_LIMIT)),
            )
            .route(
                "/agent/v1/segments/{id}",
                get(agent::get).delete(agent::delete),
            )
            .route(
                "/agent/v1/segments/{id}/drain",
                axum::routing::post(agent::drain.layer(middleware::from_fn(json_only))),
            )
            .route(
                "/agent/v1/segments/{id}/enough",
                axum::routing::post(agent::enough),
            )
            .route(
                "/agent/v1/segments/{id}/go",
                axum::routing::post(agent::go.layer(middleware::from_fn(json_only))),
            )
    } else {
        Router::new()
            .route("/", get(dashboard::page))
            .route("/dashboard", get(dashboard::page))
    };
    routes
        .route(
            "/pub-sub-demo",
            get(pub_sub::get)
                .post(pub_sub::post.layer(middleware::from_fn(json_only)))
                .delete(pub_sub::delete),
        )
        .route(
            "/v1/runs",
            get(v1::list).post(v1::create.layer(middleware::from_fn(json_only))),
        )
        .route("/v1/runs/{id}", get(v1::get).delete(v1::delete))
        .route("/v1/runs/{id}/events", get(events::events))
        .route("/v1/history", get(history::list))
        .route("/v1/history/{key}", get(history::series))
        .route("/v1/history/{key}/compare", get(history::compare_runs))
        .route("/v1/openapi.json", get(openapi))
        .route("/metrics", get(metrics))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no such endpoint") })
        .layer(middleware::from_fn_with_state(app.clone(), guard))
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
            crate::serve::listen::BODY_TIMEOUT,
        ))
        .with_state(app)
}

/// Every request passes here first: the Host must be this server's (no DNS rebinding), a browser's
/// cross-origin request is refused unless its origin was allowed (`--cors-origin`) or is this
/// server's own (the dashboard's), and with a token the `Authorization: Bearer` header must carry
/// it — except on the dashboard's page itself, which holds no data and asks for the token. Each request gets an id, in its log lines and in
/// the `X-Request-Id` answer header.
async fn guard(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let id = app.next_request_id();
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let span = tracing::info_span!("request", id, %method, %path);
    // Read what the checks need now: the request itself is not held across the await below.
    let (host, origin, authorization) = {
        let header = |name: header::HeaderName| {
            request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        (
            header(header::HOST).unwrap_or_default(),
            header(header::ORIGIN),
            header(header::AUTHORIZATION),
        )
    };
    if !app.host_allowed(&host) {
        tracing::warn!(id, %host, "refused: Host not allowed");
        return refuse(
            id,
            StatusCode::MISDIRECTED_REQUEST,
            format!("Host {host:?} is not this server's (add it with --allowed-host)"),
        );
    }
    // The dashboard's own requests: a page this server served, at the Host just checked — named
    // by an allowed host, not let in by `--allowed-host '*'` (any rebound name would pass that).
    let same_origin = app.host_named(&host)
        && origin
            .as_deref()
            .and_then(|o| o.strip_prefix("http://"))
            .is_some_and(|o| o.eq_ignore_ascii_case(host.trim()));
    if let Some(o) = &origin
        && !same_origin
        && !app.cors_origins.iter().any(|a| a == o)
    {
        tracing::warn!(id, origin = %o, "refused: cross-origin");
        return refuse(
            id,
            StatusCode::FORBIDDEN,
            format!("cross-origin requests from {o} are refused (allow one with --cors-origin)"),
        );
    }
    if method == axum::http::Method::OPTIONS && origin.is_some() {
        let mut r = StatusCode::NO_CONTENT.into_response();
        cors_headers(&mut r, origin.as_deref());
        r.headers_mut().insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, POST, DELETE"),
        );
        r.headers_mut().insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("authorization, content-type"),
        );
        return with_id(r, id);
    }
    let page = !app.agent
        && matches!(path.as_str(), "/" | "/dashboard")
        && matches!(method, axum::http::Method::GET | axum::http::Method::HEAD);
    if let Some(token) = app.token.as_ref().filter(|_| !page) {
        let bearer = authorization.as_deref().and_then(|v| {
            let (scheme, rest) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        });
        if !bearer.is_some_and(|g| constant_time_eq(g.as_bytes(), token.as_bytes())) {
            let mut r = refuse(
                id,
                StatusCode::UNAUTHORIZED,
                "Authorization: Bearer <token> required".into(),
            );
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return r;
        }
    }
    let mut r = next.run(request).instrument(span).await;
    if r.status().is_server_error() {
        tracing::warn!(id, %method, %path, status = %r.status(), "answered");
    }
    cors_headers(&mut r, origin.as_deref());
    with_id(r, id)
}

/// A body must be JSON: a form or `text/plain` POST, which any web page can send without asking, is
/// refused (415). Only on the routes that take a body, so that an unknown method is still a 405.
async fn json_only(request: Request, next: Next) -> Response {
    let json = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| {
            t.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
        });
    if !json {
        return ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the body must be JSON: Content-Type: application/json",
        )
        .into_response();
    }
    next.run(request).await
}

fn refuse(id: u64, status: StatusCode, message: String) -> Response {
    with_id(ApiError::new(status, message).into_response(), id)
}

fn with_id(mut r: Response, id: u64) -> Response {
    r.headers_mut()
        .insert("x-request-id", HeaderValue::from(id));
    r
}

/// An allowed origin (the guard refused any other) is told so.
fn cors_headers(r: &mut Response, origin: Option<&str>) {
    if let Some(v) = origin.and_then(|o| HeaderValue::from_str(o).ok()) {
        r.headers_mut()
            .insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, v);
        r.headers_mut()
            .insert(header::VARY, HeaderValue::from_static("Origin"));
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The latest run's Prometheus metrics (empty before the first run).
async fn metrics(State(app): State<Arc<App>>) -> Response {
    let current = app.metrics.lock().expect("metrics lock").clone();
    crate::metrics::text(current.map(|m| m.encode()).unwrap_or_default())
}

async fn openapi(State(app): State<Arc<App>>) -> Response {
    json_response(
        StatusCode::OK,
        openapi_document(app.token.is_some(), app.limits.max_record_bytes),
    )
}

/// The OpenAPI 3.0 description of this server (serve/openapi.json), with this build's version; it
/// declares bearer security only when the server requires a token, and this server's record size
/// limit.
pub fn openapi_document(with_token: bool, max_record_bytes: usize) -> Value {
    let mut doc: Value = serde_json::from_str(include_str!("openapi.json"))
        .unwrap_or_else(|e| json!({ "error": e.to_string() }));
    doc["info"]["version"] = json!(env!("CARGO_PKG_VERSION"));
    doc["components"]["schemas"]["ProduceRun"]["properties"]["record_size"]["maximum"] =
        json!(max_record_bytes);
    let seed = &mut doc["paths"]["/pub-sub-demo"]["post"]["requestBody"]["content"]["application/json"]
        ["schema"]["properties"];
    for field in ["minMessagePayloadSizeBytes", "maxMessagePayloadSizeBytes"] {
        seed[field]["maximum"] = json!(max_record_bytes);
    }
    if !with_token && let Some(o) = doc.as_object_mut() {
        o.remove("security");
        if let Some(c) = o.get_mut("components").and_then(Value::as_object_mut) {
            c.remove("securitySchemes");
        }
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_openapi_document_parses_and_names_every_route() {
        assert!(openapi_document(false, 1).get("security").is_none());
        assert!(openapi_document(true, 1)["security"].is_array());
        let doc = openapi_document(true, 1234);
        assert_eq!(
            doc["components"]["schemas"]["ProduceRun"]["properties"]["record_size"]["maximum"],
            1234
        );
        assert_eq!(doc["openapi"], "3.0.3");
        for path in [
            "/v1/runs",
            "/v1/runs/{id}",
            "/v1/runs/{id}/events",
            "/v1/history",
            "/v1/history/{key}",
            "/v1/history/{key}/compare",
            "/pub-sub-demo",
            "/v1/openapi.json",
        ] {
            assert!(doc["paths"][path].is_object(), "{path}");
        }
    }
}
