//! The HTTP side of `kbench serve`: the routes, the bearer-token check, the error answer (a status
//! and a message naming the field at fault), body parsing that names fields, and the OpenAPI
//! document.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use crate::serve::App;
use crate::serve::{pub_sub, v1};

/// An error answer: a status and a message naming the field or thing at fault.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub field: Option<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            field: None,
        }
    }

    /// A 400 naming `field`.
    pub fn field(field: &str, message: impl Into<String>) -> ApiError {
        let message = message.into();
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: if message.starts_with(field) {
                message
            } else {
                format!("{field}: {message}")
            },
            field: Some(field.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({ "error": self.message, "status": self.status.as_u16() });
        if let Some(f) = self.field {
            body["field"] = Value::String(f);
        }
        (self.status, axum::Json(body)).into_response()
    }
}

pub type ApiResult = Result<Response, ApiError>;

pub fn json_response(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

/// The body as a JSON object, or a 400 saying why not.
pub fn json_object(body: &[u8]) -> Result<Value, ApiError> {
    let raw: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, format!("malformed JSON: {e}")))?;
    if !raw.is_object() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "the body must be a JSON object",
        ));
    }
    Ok(raw)
}

/// Deserialize into `T`, naming the field at fault.
pub fn from_value<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        // A missing or unknown field is named in the message; otherwise the path names it.
        let field = if path == "." || path.is_empty() {
            inner
                .split('`')
                .nth(1)
                .map(str::to_string)
                .unwrap_or_else(|| "body".into())
        } else {
            path
        };
        ApiError::field(&field, inner)
    })
}

/// Parse an optional field with `parse`, naming the field on error.
pub fn optional<T>(
    field: &str,
    value: Option<&str>,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Option<T>, ApiError> {
    value.map(|v| named(field, parse(v))).transpose()
}

pub fn named<T>(field: &str, r: Result<T, String>) -> Result<T, ApiError> {
    r.map_err(|e| ApiError::field(field, e))
}

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
