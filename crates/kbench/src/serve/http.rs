//! The HTTP side of `kbench serve`: the routes, the bearer-token check and the OpenAPI document.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use crate::serve::app::App;
use crate::serve::error::{ApiError, json_response};
use crate::serve::{pub_sub, v1};

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route(
            "/pub-sub-demo",
            get(pub_sub::get)
                .post(pub_sub::post)
                .delete(pub_sub::delete),
        )
        .route("/v1/runs", get(v1::list).post(v1::create))
        .route("/v1/runs/{id}", get(v1::get).delete(v1::delete))
        .route("/v1/openapi.json", get(openapi))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no such endpoint") })
        .layer(middleware::from_fn_with_state(app.clone(), auth))
        .with_state(app)
}

async fn auth(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    if let Some(token) = &app.token {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if !given.is_some_and(|g| constant_time_eq(g.as_bytes(), token.as_bytes())) {
            let mut r = ApiError::new(
                StatusCode::UNAUTHORIZED,
                "Authorization: Bearer <token> required",
            )
            .into_response();
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return r;
        }
    }
    next.run(request).await
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn openapi() -> Response {
    json_response(StatusCode::OK, openapi_document())
}

/// The OpenAPI 3.0 description of this server (serve/openapi.json), with this build's version.
pub fn openapi_document() -> Value {
    let mut doc: Value = serde_json::from_str(include_str!("openapi.json"))
        .unwrap_or_else(|e| json!({ "error": e.to_string() }));
    doc["info"]["version"] = json!(env!("CARGO_PKG_VERSION"));
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_openapi_document_parses_and_names_every_route() {
        let doc = openapi_document();
        assert_eq!(doc["openapi"], "3.0.3");
        for path in [
            "/v1/runs",
            "/v1/runs/{id}",
            "/pub-sub-demo",
            "/v1/openapi.json",
        ] {
            assert!(doc["paths"][path].is_object(), "{path}");
        }
    }
}
