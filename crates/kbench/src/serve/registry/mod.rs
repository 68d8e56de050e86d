//! The run registry of `kbench serve`: every run started (one active at a time) and every finished
//! run found in the results directory. A run's task is supervised: whatever it ends with — a
//! result, an error, a panic — is recorded, its result file written (off the runtime thread) before
//! any answer calls it finished, and the next start is accepted. A stop has a bound: a run that does
//! not end within [`STOP_GRACE`] of being asked is aborted and recorded as such.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use axum::http::StatusCode;
use hdrhistogram::Histogram;
use kbench_bench::Kind;
use kbench_bench::e2e::E2eLive;
use kbench_bench::produce::{IntervalReport, ProduceObserver};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::serve::error::ApiError;

/// How long a stopped run may take to end (drain, re-read, close, write) before it is aborted.
pub const STOP_GRACE: Duration = Duration::from_secs(60);

/// Which API started a run (and so which shape its answers take).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    PubSub,
    V1,
}

/// A run's status: the agent protocol's own, so that a coordinator reads it typed.
pub use kbench_bench::distributed::RunStatus as Status;

/// Live counters of a produce run, fed by the job's progress windows.
#[derive(Default)]
pub struct ProduceLive {
    acked: AtomicU64,
    failed: AtomicU64,
}

impl ProduceObserver for ProduceLive {
    fn interval(&self, w: &IntervalReport) {
        self.acked.fetch_add(w.records, Ordering::Relaxed);
        self.failed.fetch_add(w.failed, Ordering::Relaxed);
    }
}

/// Live counters of a consume run (an agent's consume segment), fed by its windows.
#[derive(Default)]
pub struct ConsumeLive {
    consumed: AtomicU64,
    bytes: AtomicU64,
    /// Set once the consumer has its partitions and positions (past joining).
    reading: std::sync::atomic::AtomicBool,
}

impl kbench_bench::consume::ConsumeObserver for ConsumeLive {
    fn fetched(&self, records: u64, bytes: u64, _: &[u64]) {
        self.consumed.fetch_add(records, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }
    fn joined(&self) {
        self.reading.store(true, Ordering::Relaxed);
    }
}

pub enum Live {
    E2e(Arc<E2eLive>),
    Produce(Arc<ProduceLive>),
    Consume(Arc<ConsumeLive>),
    /// An agent's share of an OMB workload.
    Omb(Arc<kbench_bench::omb::OmbLive>),
    /// A distributed run: each agent's live figures, as last polled.
    Agents(Arc<Mutex<Value>>),
    None,
}

/// A run's live figures at its end, frozen: every count the result document also holds is the
/// result's (the last window an observer saw may be short of the whole run: a finished produce run
/// once showed 49 975 acknowledged where its result said 100 000), and `elapsed_s` is the run's
/// `duration_s`, no longer a clock still running after the end.
fn frozen_live(mut live: Value, result: Option<&Value>) -> Value {
    let Some(result) = result else {
        return live;
    };
    if let Some(map) = live.as_object_mut() {
        for (k, v) in map.iter_mut() {
            let from = if k == "elapsed_s" {
                "duration_s"
            } else {
                k.as_str()
            };
            if let Some(r) = result.get(from).filter(|r| r.is_number()) {
                *v = r.clone();
            }
        }
    }
    live
}

pub struct RunEntry {
    pub id: String,
    pub kind: &'static str,
    pub api: Api,
    /// The request as accepted, secrets removed.
    pub config: Value,
    pub status: Status,
    stop: kbench_bench::Stop,
    /// Wakes the run's thread to abort its task (a permit is kept if it is not waiting yet).
    abort: Option<Arc<tokio::sync::Notify>>,
    pub live: Live,
    /// Its timeline windows as they close (`/v1/runs/{id}/events`).
    pub feed: Arc<crate::serve::events::Feed>,
    /// The live figures frozen at the run's end (see [`frozen_live`]).
    final_live: Option<Value>,
    pub start_time: SystemTime,
    pub kill_time: Option<SystemTime>,
    /// The result document once finished.
    pub result: Option<Value>,
    /// The seed-shaped stats, for /pub-sub-demo runs once finished.
    pub pub_sub_stats: Option<Value>,
    pub error: Option<String>,
    done: watch::Receiver<bool>,
    /// An agent's segment: how long it may go without its coordinator asking about it.
    lease: Option<Duration>,
    /// When its coordinator last asked about it (or it started).
    renewed: Instant,
    /// Why it was abandoned, once its lease ran out.
    abandoned: Option<String>,
}

/// How a run ended: its result document (and seed stats), or why there is none.
#[derive(Debug, Default)]
pub struct Outcome {
    pub result: Option<Value>,
    pub stats: Option<Value>,
    pub error: Option<String>,
}

impl Outcome {
    pub fn failed(error: impl Into<String>) -> Outcome {
        Outcome {
            error: Some(error.into()),
            ..Outcome::default()
        }
    }
}

/// A run asked to stop: what says it is done, and what aborts it.
type Stopping = (watch::Receiver<bool>, Option<Arc<tokio::sync::Notify>>);

/// A run entered, not yet started: what its task needs.
pub struct Registered {
    pub id: String,
    pub stop: kbench_bench::Stop,
    done: watch::Sender<bool>,
}

pub struct Registry {
    runs: Mutex<Vec<RunEntry>>,
    results_dir: PathBuf,
}

impl Registry {
    /// A registry holding the finished runs found in `results_dir`.
    pub fn load(results_dir: &Path) -> Registry {
        Registry {
            runs: Mutex::new(load_finished(results_dir)),
            results_dir: results_dir.to_path_buf(),
        }
    }

    /// Read the runs under the lock.
    pub fn read<R>(&self, f: impl FnOnce(&[RunEntry]) -> R) -> R {
        f(&self.runs.lock().expect("runs lock"))
    }

    /// The run with `id`, read under the lock; 404 when unknown.
    pub fn read_run<R>(&self, id: &str, f: impl FnOnce(&RunEntry) -> R) -> Result<R, ApiError> {
        self.read(|runs| runs.iter().find(|r| r.id == id).map(f))
            .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, format!("no run with id {id:?}")))
    }

    /// The run's feed of windows and what says it is done; 404 when unknown.
    pub fn feed(
        &self,
        id: &str,
    ) -> Result<(Arc<crate::serve::events::Feed>, watch::Receiver<bool>), ApiError> {
        self.read_run(id, |r| (r.feed.clone(), r.done.clone()))
    }

    /// Refuse to start when a run is active (409).
    pub fn ensure_idle(&self) -> Result<(), ApiError> {
        self.read(|runs| match runs.iter().find(|r| r.status.active()) {
            Some(r) => Err(ApiError::new(
                StatusCode::CONFLICT,
                format!(
                    "run {} ({}) is still {}: stop it first (DELETE)",
                    r.id,
                    r.kind,
                    r.status.name()
                ),
            )),
            None => Ok(()),
        })
    }

    /// Enter a new running run, unless one is active (409).
    pub fn register(
        &self,
        kind: &'static str,
        api: Api,
        config: Value,
        live: Live,
    ) -> Result<Registered, ApiError> {
        let stop = kbench_bench::Stop::new();
        let (done_tx, done) = watch::channel(false);
        let id = new_run_id();
        let mut runs = self.runs.lock().expect("runs lock");
        if let Some(r) = runs.iter().find(|r| r.status.active()) {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                format!("run {} is still {}", r.id, r.status.name()),
            ));
        }
        runs.push(RunEntry {
            id: id.clone(),
            kind,
            api,
            config,
            status: Status::Running,
            stop: stop.clone(),
            abort: None,
            live,
            feed: crate::serve::events::Feed::new(),
            final_live: None,
            start_time: SystemTime::now(),
            kill_time: None,
            result: None,
            pub_sub_stats: None,
            error: None,
            done,
            lease: None,
            renewed: Instant::now(),
            abandoned: None,
        });
        Ok(Registered {
            id,
            stop,
            done: done_tx,
        })
    }

    /// Run a registered run's task under supervision: its outcome, error or panic is recorded (the
    /// result file written first) and waiters are woken. The task runs on a thread and runtime of its
    /// own, so that a run that keeps its thread busy never keeps the API from answering.
    pub fn spawn(
        self: &Arc<Self>,
        run: Registered,
        task: impl std::future::Future<Output = Outcome> + Send + 'static,
    ) {
        let abort = Arc::new(tokio::sync::Notify::new());
        if let Some(r) = self
            .runs
            .lock()
            .expect("runs lock")
            .iter_mut()
            .find(|r| r.id == run.id)
        {
            r.abort = Some(abort.clone());
        }
        let (end_tx, end_rx) = tokio::sync::oneshot::channel();
        let thread = std::thread::Builder::new()
            .name(format!("kbench-run-{}", run.id))
            .spawn(move || {
                // One thread, like the CLI's runtime: a run's figures (its CPU per record among
                // them) are the same whichever front end started it.
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                let rt = match runtime {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = end_tx.send(Err(format!("no runtime for the run: {e}")));
                        return;
                    }
                };
                let ended = rt.block_on(async move {
                    let mut handle = tokio::spawn(task);
                    tokio::select! {
                        ended = &mut handle => ended,
                        () = abort.notified() => {
                            handle.abort();
                            handle.await
                        }
                    }
                });
                let _ = end_tx.send(ended.map_err(|e| {
                    if e.is_panic() {
                        format!("the run panicked: {}", panic_message(e.into_panic()))
                    } else {
                        format!(
                            "the run did not stop within {} s of being asked and was aborted",
                            STOP_GRACE.as_secs()
                        )
                    }
                }));
                // Whatever the run left spawned is not waited for.
                rt.shutdown_background();
            });
        if let Err(e) = thread {
            let registry = self.clone();
            tokio::spawn(async move {
                registry
                    .finish(
                        &run.id,
                        Outcome::failed(format!("no thread for the run: {e}")),
                    )
                    .await;
                let _ = run.done.send(true);
            });
            return;
        }
        let registry = self.clone();
        tokio::spawn(async move {
            let outcome = match end_rx.await {
                Ok(Ok(o)) => o,
                Ok(Err(why)) => Outcome::failed(why),
                Err(_) => Outcome::failed("the run's thread ended without an outcome"),
            };
            registry.finish(&run.id, outcome).await;
            let _ = run.done.send(true);
        });
    }

    /// Record a run's end: write its result document first (off the runtime thread), then mark it.
    async fn finish(&self, id: &str, mut outcome: Outcome) {
        // A /v1 run's `slo`, evaluated on its result (checked when the run was accepted).
        let slo = {
            let runs = self.runs.lock().expect("runs lock");
            runs.iter()
                .find(|r| r.id == id)
                .and_then(|r| Some((r.kind, r.config.get("slo")?.as_str()?.to_string())))
        };
        if let (Some((kind, text)), Some(doc)) = (slo, outcome.result.as_mut())
            && let Ok(conditions) = kbench_bench::slo::parse(&text, kind)
        {
            let checks = kbench_bench::slo::evaluate(&conditions, doc);
            let passed = checks.iter().all(|c| c.passed);
            if let Some(map) = doc.as_object_mut() {
                map.insert(
                    "slo".into(),
                    serde_json::json!({"passed": passed, "checks": checks}),
                );
            }
        }
        if let Some(doc) = &outcome.result {
            let path = self.results_dir.join(format!("{id}.json"));
            let doc = doc.clone();
            let written =
                tokio::task::spawn_blocking(move || crate::args::write_json(&path, &doc)).await;
            let failure = match written {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e),
                Err(e) => Some(e.to_string()),
            };
            if let Some(e) = failure {
                tracing::error!(%id, "result not written: {e}");
                outcome.error = Some(format!("the result could not be written: {e}"));
            }
        }
        let mut runs = self.runs.lock().expect("runs lock");
        if let Some(r) = runs.iter_mut().find(|r| r.id == id) {
            r.status = if let Some(why) = &r.abandoned {
                outcome.error.get_or_insert_with(|| why.clone());
                Status::Abandoned
            } else if outcome.error.is_some() && outcome.result.is_none() {
                Status::Failed
            } else {
                Status::Finished
            };
            r.kill_time.get_or_insert_with(SystemTime::now);
            r.final_live = Some(frozen_live(live_json(r), outcome.result.as_ref()));
            r.result = outcome.result;
            r.pub_sub_stats = outcome.stats;
            r.error = outcome.error;
            r.abort = None;
        }
    }

    /// The run's kill time so far (when a stop was asked).
    pub fn kill_time(&self, id: &str) -> Option<SystemTime> {
        self.read(|runs| runs.iter().find(|r| r.id == id).and_then(|r| r.kill_time))
    }

    /// Wait until the run is done (its result recorded).
    pub async fn wait_done(&self, id: &str) {
        let done = self.read(|runs| runs.iter().find(|r| r.id == id).map(|r| r.done.clone()));
        if let Some(mut done) = done {
            let _ = done.wait_for(|d| *d).await;
        }
    }

    /// Ask a run to stop, saying why (a running one becomes stopping); what to wait on, and its
    /// abort.
    fn ask_stop(&self, id: &str, why: &str) -> Result<Stopping, ApiError> {
        let mut runs = self.runs.lock().expect("runs lock");
        let r = runs.iter_mut().find(|r| r.id == id).ok_or_else(|| {
            ApiError::new(StatusCode::NOT_FOUND, format!("no run with id {id:?}"))
        })?;
        if r.status == Status::Running {
            r.status = Status::Stopping;
            r.kill_time = Some(SystemTime::now());
            r.stop.stop(why);
        }
        Ok((r.done.clone(), r.abort.clone()))
    }

    /// Give a run (an agent's segment) a lease: it is abandoned once nobody has asked about it
    /// ([`renew`](Self::renew)) for `lease`.
    pub fn set_lease(&self, id: &str, lease: Duration) {
        let mut runs = self.runs.lock().expect("runs lock");
        if let Some(r) = runs.iter_mut().find(|r| r.id == id) {
            r.lease = Some(lease);
            r.renewed = Instant::now();
        }
    }

    /// Its coordinator asked about the run: its lease starts again.
    pub fn renew(&self, id: &str) {
        let mut runs = self.runs.lock().expect("runs lock");
        if let Some(r) = runs.iter_mut().find(|r| r.id == id) {
            r.renewed = Instant::now();
        }
    }

    /// The active runs whose lease ran out, marked abandoned (each is returned once): stop them
    /// with [`abandon`](Self::abandon).
    pub fn expired(&self) -> Vec<String> {
        let mut runs = self.runs.lock().expect("runs lock");
        runs.iter_mut()
            .filter(|r| r.status.active() && r.abandoned.is_none())
            .filter_map(|r| {
                let lease = r.lease?;
                (r.renewed.elapsed() >= lease).then(|| {
                    r.abandoned = Some(format!(
                        "abandoned: no word from its coordinator for {} (the agent's --lease); stopped, the partial result kept",
                        humantime::format_duration(lease)
                    ));
                    r.id.clone()
                })
            })
            .collect()
    }

    /// Stop a run whose lease ran out, as a stop would (bounded by [`STOP_GRACE`]); it ends
    /// `abandoned`, its partial result kept.
    pub async fn abandon(&self, id: &str) {
        let why = self.read(|runs| {
            runs.iter()
                .find(|r| r.id == id)
                .and_then(|r| r.abandoned.clone())
        });
        let why = why.unwrap_or_else(|| "abandoned".into());
        tracing::warn!(%id, "{why}");
        let _ = self.stop_bounded(id, &why).await;
    }

    /// Ask a run to stop and wait until its result is recorded; past [`STOP_GRACE`] it is aborted.
    pub async fn stop_and_wait(&self, id: &str) -> Result<(), ApiError> {
        self.stop_bounded(id, "stopped").await
    }

    async fn stop_bounded(&self, id: &str, why: &str) -> Result<(), ApiError> {
        let (mut done, abort) = self.ask_stop(id, why)?;
        if tokio::time::timeout(STOP_GRACE, done.wait_for(|d| *d))
            .await
            .is_err()
        {
            if let Some(a) = abort {
                a.notify_one();
            }
            let _ = done.wait_for(|d| *d).await;
        }
        Ok(())
    }

    /// Ask a run to stop, without waiting for it.
    pub fn stop(&self, id: &str) -> Result<(), ApiError> {
        self.ask_stop(id, "stopped").map(|_| ())
    }

    /// Ask the run to stop, saying why (its result's `aborted` keeps the reason).
    pub fn stop_because(&self, id: &str, why: &str) -> Result<(), ApiError> {
        self.ask_stop(id, why).map(|_| ())
    }

    /// Ask every active run to stop; what to wait on for each.
    pub fn stop_all(&self) -> Vec<String> {
        self.read(|runs| {
            runs.iter()
                .filter(|r| r.status.active())
                .map(|r| {
                    r.stop.stop("stopped");
                    r.id.clone()
                })
                .collect()
        })
    }
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

fn new_run_id() -> String {
    let stamp = kbench_bench::iso8601::format_instant(SystemTime::now())
        .replace([':', '.'], "-")
        .trim_end_matches('Z')
        .to_string();
    format!("{stamp}-{:04x}", kbench_bench::spec::random_seed() & 0xffff)
}

/// Previously finished runs, from the results directory.
fn load_finished(dir: &Path) -> Vec<RunEntry> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    for path in files {
        let Some(id) = path
            .file_stem()
            .and_then(|s| s.to_str())
            .map(str::to_string)
        else {
            continue;
        };
        let Some(doc) = kbench_client::input::read(&path, kbench_client::input::RESULT)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        else {
            continue;
        };
        // A run's document as the gate reads it; the server runs produce and e2e (and an agent
        // consume segments). One the
        // gate refuses (another schema version, a broken figure) is left out, and the log says so.
        let kind = match kbench_bench::document::check(&doc) {
            Ok(kind @ (Kind::E2e | Kind::Produce | Kind::Consume)) => kind.name(),
            Ok(_) => continue,
            Err(e) => {
                tracing::warn!(path = %path.display(), "a stored run left out: {e}");
                continue;
            }
        };
        let (_tx, done) = watch::channel(true);
        out.push(RunEntry {
            id,
            kind,
            api: if doc.get("pub_sub_demo").is_some() {
                Api::PubSub
            } else {
                Api::V1
            },
            config: doc.get("settings").cloned().unwrap_or(Value::Null),
            status: Status::Finished,
            stop: kbench_bench::Stop::new(),
            abort: None,
            live: Live::None,
            feed: crate::serve::events::Feed::new(),
            final_live: None,
            start_time: SystemTime::UNIX_EPOCH,
            kill_time: None,
            pub_sub_stats: doc.get("pub_sub_demo").cloned(),
            result: Some(doc),
            error: None,
            done,
            lease: None,
            renewed: Instant::now(),
            abandoned: None,
        });
    }
    out
}

/// A run's live figures, as GET shows them.
pub fn live_json(r: &RunEntry) -> Value {
    if let Some(frozen) = &r.final_live {
        return frozen.clone();
    }
    match &r.live {
        Live::E2e(live) => {
            let s = live.snapshot();
            let q = |h: &Histogram<u64>, p: f64| (!h.is_empty()).then(|| h.value_at_quantile(p));
            json!({
                "phase": s.phase,
                "elapsed_s": s.elapsed.as_secs_f64(),
                "records_produced": s.produced,
                "records_acked": s.acked,
                "records_failed": s.failed,
                "records_consumed": s.consumed,
                "records_duplicated": s.duplicates,
                "records_foreign": s.foreign,
                "commits": s.commits,
                "producer_request_duration_p50_us": q(&s.producer_latency, 0.5),
                "producer_request_duration_p99_us": q(&s.producer_latency, 0.99),
                "whole_trip_p50_us": q(&s.whole_trip, 0.5),
                "whole_trip_p99_us": q(&s.whole_trip, 0.99),
            })
        }
        Live::Produce(live) => json!({
            "records_acked": live.acked.load(Ordering::Relaxed),
            "records_failed": live.failed.load(Ordering::Relaxed),
        }),
        Live::Consume(live) => json!({
            "phase": if live.reading.load(Ordering::Relaxed) { "reading" } else { "starting" },
            "records_consumed": live.consumed.load(Ordering::Relaxed),
            "bytes_consumed": live.bytes.load(Ordering::Relaxed),
        }),
        Live::Omb(live) => {
            // The phase first: once it says draining, the counts read after it are final.
            // `records_acked_all` counts the warm-up too (what the consumers must read), and is
            // named apart from the result's measured `records_acked`, which a finished run's
            // live figures take.
            let phase = live.phase();
            let (acked, consumed) = live.counts();
            json!({
                "phase": phase,
                "records_acked_all": acked,
                "records_consumed": consumed,
            })
        }
        Live::Agents(agents) => json!({ "agents": agents.lock().expect("live lock").clone() }),
        Live::None => Value::Null,
    }
}

/// A run as `/v1/runs` shows it.
pub fn run_json(r: &RunEntry, with_result: bool) -> Value {
    let mut v = json!({
        "id": r.id,
        "workload": r.kind,
        "api": match r.api { Api::PubSub => "pub-sub-demo", Api::V1 => "v1" },
        "status": r.status.name(),
        "config": r.config,
        "live": live_json(r),
        "error": r.error,
    });
    if with_result {
        v["result"] = r.result.clone().unwrap_or(Value::Null);
    }
    if let Some(lease) = r.lease {
        v["lease_ms"] = json!(lease.as_millis() as u64);
        // While the segment runs: how long until it is abandoned unless its coordinator asks.
        v["lease_expires_in_ms"] = if r.status.active() && r.abandoned.is_none() {
            json!(lease.saturating_sub(r.renewed.elapsed()).as_millis() as u64)
        } else {
            Value::Null
        };
    }
    v
}

#[cfg(test)]
mod tests;
