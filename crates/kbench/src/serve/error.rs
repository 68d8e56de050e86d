//! The error answer of `kbench serve` (a status and a message naming the field at fault) and body
//! parsing that names fields. A leaf: it imports nothing else from `serve`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

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
        // serde quotes the value it could not read: never a secret field's.
        let inner = if kbench_client::is_secret(&field) {
            "invalid value (not shown: the field holds a secret)".to_string()
        } else {
            inner
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
