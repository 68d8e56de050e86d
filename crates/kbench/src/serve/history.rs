//! `/v1/history`: the results store `kbench serve --store DB` was given, read for the dashboard.
//! The benchmarks stored; one benchmark's metric run by run with its change points
//! ([`kbench_bench::history::changes`], `kbench history check`'s, with default options, every repetition a sample); and two of
//! its runs compared as `kbench compare` compares two documents (its [`CompareDocument`]: each
//! metric's ratio of medians, 95 % bootstrap interval and verdict). No result is written (opening
//! the store brings an older one up to this schema, as every command does).

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use kbench_bench::changepoint::Options;
use kbench_bench::compare::{CompareDocument, Samples, compare, median};
use kbench_bench::history::{Benchmark, HistoryError, Point, Series, Store, changes};
use kbench_bench::{Header, Kind};
use serde_json::{Value, json};

use crate::harness::CliError;
use crate::serve::app::App;
use crate::serve::error::{ApiError, ApiResult, json_response};

/// `kbench compare`'s defaults: the smallest change called a regression, and the bootstrap seed.
const THRESHOLD: f64 = 0.05;
const SEED: u64 = 1;

/// Open the store at start: one that cannot be read (missing, another schema, not a store) is a
/// usage error naming it. A missing file is not created: serve stores no result.
pub fn open(location: &str) -> Result<Store, CliError> {
    let remote = location.contains("://");
    if !remote && !std::path::Path::new(location).is_file() {
        return Err(CliError::usage(format!(
            "--store {location}: no such file (fill a store with --store on a workload, or `kbench history import`)"
        )));
    }
    Store::open(location).map_err(|e| CliError::usage(format!("--store: {}", reason(&e))))
}

/// What went wrong, without the store's location (a PostgreSQL URL may hold a password).
fn reason(e: &HistoryError) -> String {
    match e {
        HistoryError::Store { error, .. } => error.clone(),
        HistoryError::Document(d) => d.clone(),
    }
}

/// Run `f` on the store, off the runtime's threads; 404 when serve has no store.
async fn with_store<R: Send + 'static>(
    app: &Arc<App>,
    f: impl FnOnce(&Store) -> Result<R, ApiError> + Send + 'static,
) -> Result<R, ApiError> {
    if app.store.is_none() {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "no results store: start kbench serve with --store DB",
        ));
    }
    let app = app.clone();
    tokio::task::spawn_blocking(move || {
        let store = app
            .store
            .as_ref()
            .expect("checked above")
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        f(&store)
    })
    .await
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
}

fn store_failed(e: HistoryError) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        format!("the results store could not be read: {}", reason(&e)),
    )
}

/// The benchmark with `key` (its 12 digits, as listed).
fn benchmark(store: &Store, key: &str) -> Result<Benchmark, ApiError> {
    store
        .benchmarks()
        .map_err(store_failed)?
        .into_iter()
        .find(|b| b.key == key)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                format!("no benchmark with key {key:?} in the store"),
            )
        })
}

/// The query's parameters, refusing any but `known`.
fn params(
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
    known: &[&str],
) -> Result<HashMap<String, String>, ApiError> {
    let q = query
        .map(|Query(q)| q)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.body_text()))?;
    if let Some(k) = q.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(ApiError::field(
            k,
            format!("unknown parameter (known: {})", known.join(", ")),
        ));
    }
    Ok(q)
}

/// The metric asked for, or the benchmark's records/s (else its first).
fn metric_of(b: &Benchmark, asked: Option<&String>) -> Result<String, ApiError> {
    match asked {
        Some(m) if b.metrics.contains(m) => Ok(m.clone()),
        Some(m) => Err(ApiError::field(
            "metric",
            format!(
                "benchmark {} has no metric {m:?} (it has {})",
                b.key,
                b.metrics.join(", ")
            ),
        )),
        None if b.metrics.iter().any(|m| m == "records_per_sec") => Ok("records_per_sec".into()),
        None => b
            .metrics
            .first()
            .cloned()
            .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "the benchmark has no metrics")),
    }
}

pub async fn list(State(app): State<Arc<App>>) -> ApiResult {
    let all = with_store(&app, |s| s.benchmarks().map_err(store_failed)).await?;
    Ok(json_response(StatusCode::OK, json!({ "benchmarks": all })))
}

/// A series as the dashboard draws it: each run's samples and median, and the change points.
fn series_json(b: &Benchmark, s: &Series) -> Value {
    let points: Vec<Value> = s
        .points
        .iter()
        .map(|p| {
            let mut v = p.samples.clone();
            let m = median(&mut v);
            json!({
                "run_id": p.run_id,
                "started_at": p.started_at,
                "build_label": p.build_label,
                "kbench_version": p.kbench_version,
                "samples": p.samples,
                "median": m,
                "min": v.first(),
                "max": v.last(),
            })
        })
        .collect();
    let changes: Vec<Value> = changes(s, &Options::default())
        .into_iter()
        .map(|c| {
            json!({
                "index": c.index,
                "run_id": c.run_id,
                "build_label": c.build_label,
                "started_at": c.started_at,
                "mean_before": c.mean_before,
                "mean_after": c.mean_after,
                "relative_change": c.relative_change,
                "pvalue": c.pvalue,
                "confidence": c.confidence,
                "direction": if c.regression { "regression" } else { "improvement" },
            })
        })
        .collect();
    json!({
        "benchmark": b,
        "metric": s.metric,
        "better": s.better,
        "points": points,
        "change_points": changes,
    })
}

pub async fn series(
    State(app): State<Arc<App>>,
    UrlPath(key): UrlPath<String>,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> ApiResult {
    let q = params(query, &["metric"])?;
    let body = with_store(&app, move |store| {
        let b = benchmark(store, &key)?;
        let metric = metric_of(&b, q.get("metric"))?;
        let s = store.series(&b, &metric).map_err(store_failed)?;
        Ok(series_json(&b, &s))
    })
    .await?;
    Ok(json_response(StatusCode::OK, body))
}

/// A run id from the query.
fn run_id(q: &HashMap<String, String>, name: &str) -> Result<i64, ApiError> {
    let v = q
        .get(name)
        .ok_or_else(|| ApiError::field(name, "missing: the run id (run_id of a point)"))?;
    v.parse()
        .map_err(|_| ApiError::field(name, format!("{v:?} is not a run id")))
}

/// How a side of the comparison is named: its run, build and start.
fn side(p: Option<&Point>, id: i64) -> String {
    match p {
        Some(p) => format!(
            "run {id} (build {}, {})",
            p.build_label.as_deref().unwrap_or("-"),
            p.started_at
        ),
        None => format!("run {id}"),
    }
}

pub async fn compare_runs(
    State(app): State<Arc<App>>,
    UrlPath(key): UrlPath<String>,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> ApiResult {
    let q = params(query, &["a", "b"])?;
    let (a, b) = (run_id(&q, "a")?, run_id(&q, "b")?);
    let doc = with_store(&app, move |store| {
        let bench = benchmark(store, &key)?;
        let mut rows = Vec::new();
        let (mut only_a, mut only_b) = (Vec::new(), Vec::new());
        let (mut pa, mut pb) = (None, None);
        for metric in &bench.metrics {
            let s = store.series(&bench, metric).map_err(store_failed)?;
            let find = |id| s.points.iter().find(|p| p.run_id == id).cloned();
            match (find(a), find(b)) {
                (Some(x), Some(y)) => {
                    rows.push(compare(
                        &Samples {
                            cell: bench.cell.clone(),
                            metric: metric.clone(),
                            better: s.better,
                            a: x.samples.clone(),
                            b: y.samples.clone(),
                        },
                        THRESHOLD,
                        SEED,
                    ));
                    pa.get_or_insert(x);
                    pb.get_or_insert(y);
                }
                (Some(x), None) => {
                    only_a.push(metric.clone());
                    pa.get_or_insert(x);
                }
                (None, Some(y)) => {
                    only_b.push(metric.clone());
                    pb.get_or_insert(y);
                }
                (None, None) => {}
            }
        }
        for (id, p, field) in [(a, &pa, "a"), (b, &pb, "b")] {
            if p.is_none() {
                return Err(ApiError::field(
                    field,
                    format!("benchmark {} has no run {id}", bench.key),
                ));
            }
        }
        Ok(CompareDocument {
            header: Header::new(Kind::Compare),
            baseline: side(pa.as_ref(), a),
            candidate: side(pb.as_ref(), b),
            threshold: THRESHOLD,
            seed: SEED,
            rows,
            only_in_baseline: only_a,
            only_in_candidate: only_b,
        })
    })
    .await?;
    Ok(json_response(
        StatusCode::OK,
        serde_json::to_value(&doc).unwrap_or(Value::Null),
    ))
}
