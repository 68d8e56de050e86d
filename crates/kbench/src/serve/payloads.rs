//! The HTTP API's body parsers as plain functions of bytes, for the fuzz targets
//! (`crates/kbench-fuzz`): each reads a body exactly as its handler does, up to the point where a run
//! would start, and answers what the server would (the configuration GET shows, or the error's
//! status and message). No I/O.

use serde_json::Value;

use crate::serve::error::ApiError;

/// What a body parser answered: the configuration as GET would show it, or the error.
pub type Answer = Result<Value, (u16, String)>;

fn answer(e: ApiError) -> (u16, String) {
    (e.status.as_u16(), e.message)
}

/// `POST /pub-sub-demo`, on a server with (`server_bootstrap`) or without a default cluster.
pub fn pub_sub_demo(body: &[u8], server_bootstrap: bool) -> Answer {
    let limits = kbench_bench::spec::Limits::default();
    let server = kbench_client::ConnectionSettings::default();
    crate::serve::pub_sub::parse(body, limits, &server, server_bootstrap)
        .map(|p| p.shown)
        .map_err(answer)
}

/// `POST /v1/runs`.
pub fn v1_runs(body: &[u8]) -> Answer {
    let limits = kbench_bench::spec::Limits::default();
    crate::serve::v1::parse(body, limits)
        .map(|p| p.config)
        .map_err(answer)
}
