//! The dashboard: one HTML page (serve/dashboard.html; styles, scripts and charts inline, nothing
//! fetched from elsewhere) served at `/` and `/dashboard`. It is the only route the token does not
//! guard: it holds no data, and asks for the token (kept in the tab's sessionStorage, sent as the
//! `Authorization` header, never in a URL) before it reads anything from `/v1`. Its content
//! security policy allows requests to this server only.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::serve::app::App;

const PAGE: &str = include_str!("dashboard.html");

/// Scripts and styles inline, requests to this server only, no frames, no forms posted natively.
const POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
     connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The page, told whether this server needs a token and has a results store (so that it asks for
/// nothing it would be refused).
pub fn html(token_required: bool, store: bool) -> String {
    PAGE.replace("__TOKEN_REQUIRED__", &token_required.to_string())
        .replace("__STORE__", &store.to_string())
        .replace("__VERSION__", env!("CARGO_PKG_VERSION"))
}

pub async fn page(State(app): State<Arc<App>>) -> Response {
    let mut r = (
        StatusCode::OK,
        html(app.token.is_some(), app.store.is_some()),
    )
        .into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_self_contained() {
        let page = html(true, false);
        assert!(page.contains("const TOKEN_REQUIRED = true;"));
        assert!(page.contains("const STORE = false;"));
        assert!(!page.contains("__"), "every placeholder filled");
        // Nothing fetched from elsewhere: no URL with a scheme but the SVG namespace.
        for scheme in ["http://", "https://", "//cdn"] {
            let outside: Vec<&str> = page
                .match_indices(scheme)
                .map(|(i, _)| &page[i..(i + 40).min(page.len())])
                .filter(|s| !s.starts_with("http://www.w3.org/2000/svg"))
                .collect();
            assert!(outside.is_empty(), "{outside:?}");
        }
    }
}
