//! The coordinator of a distributed run: the HTTP side of `--agents`. It checks every agent before
//! any load (reachable, token accepted, same agent protocol, idle, listed once), estimates each
//! agent's clock, hands out the segments the library split (`kbench_bench::distributed`), starts them
//! at one instant, polls them (live progress; an agent that stops answering is lost, not waited
//! for), and merges the results exactly. Used by the CLI (`produce`, `e2e`, `consume`, `omb`) and by
//! `/v1/runs` (`produce`, `e2e`).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use kbench_bench::ProduceSpec;
use kbench_bench::clock::wall_us;
use kbench_bench::consume::{ConsumeResultDocument, ConsumeSpec};
use kbench_bench::distributed::{
    AGENT_PROTOCOL, AgentPart, ClockEstimate, ClockSample, MAX_AGENTS, MergedOmb, OmbSegment,
    RunStatus, Segment, Work, merge_consume, merge_e2e, merge_omb, merge_produce,
    producer_segments, split_consume, split_e2e, split_omb, split_produce,
};
use kbench_bench::document;
use kbench_bench::e2e::E2eSpec;
use kbench_bench::omb::OmbSpec;
use kbench_bench::result::{E2eResultDocument, Kind, ResultDocument};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::harness::{CliError, CliResult};

/// Clock exchanges per agent and estimate.
mod cli;

pub use cli::{DistributedArgs, cli_connect, cli_error, cli_finish, live_sum, parse_agents};

const CLOCK_SAMPLES: usize = 8;
/// An agent that has not answered for this long is lost.
const LOST_AFTER: Duration = Duration::from_secs(5);
/// The time between choosing the start instant and the start: every agent must have its segment,
/// and be connected to the cluster, by then.
const START_LEAD: Duration = Duration::from_secs(2);
/// How often each agent is polled (progress lines come every reporting interval).
const POLL: Duration = Duration::from_secs(1);
/// How often consume segments are polled: the agents' summed count ends the run (`--messages`),
/// and each poll's delay is time the agents may read past it.
const CONSUME_POLL: Duration = Duration::from_millis(100);
/// How long one control request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a consumer that is joining its group is polled (its producers start once it has).
const READY_POLL: Duration = Duration::from_millis(250);
/// How often the wait for a consumer's join is told.
const NOTICE_EVERY: Duration = Duration::from_secs(3);
/// A consumer's join may take its rebalance timeout, plus this: the client's own patience for one
/// JoinGroup beyond it (5 s), connecting, the topic, the positions.
const JOIN_MARGIN: Duration = Duration::from_secs(20);

/// Told the coordinator's own lines (a wait under way), one at a time.
pub type Notice = dyn Fn(&str) + Send + Sync;

/// Told each agent's live figures (its address, its `live` block) at every poll.
pub type Progress<'a> = dyn Fn(&[(String, Value)]) + Send + Sync + 'a;

/// Where the agents are and how to reach them.
#[derive(Debug, Clone)]
pub struct AgentList {
    pub urls: Vec<String>,
    pub token: Option<String>,
}

/// The control conversation with the agents.
pub struct Coordinator {
    http: reqwest::Client,
    token: Option<String>,
    agents: Vec<String>,
    clocks: Vec<ClockEstimate>,
    notice: Box<Notice>,
}

/// A segment handed to an agent, as the poll loop follows it.
struct Running {
    agent: usize,
    id: String,
    role: &'static str,
    last_ok: Instant,
    last_live: Value,
    /// The agent's word on the segment; `None` once the agent is lost.
    status: Option<RunStatus>,
    result: Option<Value>,
    error: Option<String>,
}

impl Running {
    fn done(&self) -> bool {
        self.status.is_none_or(|s| !s.active())
    }

    /// The segment's status as the merged result names it: the agent's, or `lost`.
    fn status_name(&self) -> &'static str {
        self.status.map_or("lost", RunStatus::name)
    }
}

/// An agent's answer about one segment (the run's `GET`), as far as the coordinator reads it.
#[derive(Debug, serde::Deserialize)]
struct SegmentAnswer {
    status: RunStatus,
    #[serde(default)]
    live: Value,
    error: Option<String>,
    result: Option<Value>,
}

impl Coordinator {
    /// Check every agent (reachable, token accepted, same protocol, idle) and estimate its clock:
    /// any problem is one error naming the agent, before any load.
    pub async fn connect(list: &AgentList) -> Result<Coordinator, String> {
        if list.urls.is_empty() {
            return Err("--agents: no agent given".into());
        }
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(Duration::from_secs(3))
            .build()
            .map_err(|e| format!("no HTTP client: {e}"))?;
        let mut c = Coordinator {
            http,
            token: list.token.clone(),
            agents: list.urls.clone(),
            clocks: Vec::new(),
            notice: Box::new(|line| tracing::info!("{line}")),
        };
        for url in &c.agents {
            let hello = c
                .call(reqwest::Method::GET, url, "/agent/v1/hello", None)
                .await?;
            let protocol = hello.get("protocol").and_then(Value::as_u64);
            if protocol != Some(u64::from(AGENT_PROTOCOL)) {
                return Err(format!(
                    "--agents {url}: the agent speaks agent protocol {}, this kbench {AGENT_PROTOCOL} (kbench {} there, {} here): run the same version",
                    protocol.map_or_else(|| "none".into(), |p| p.to_string()),
                    hello
                        .get("kbench_version")
                        .and_then(Value::as_str)
                        .unwrap_or("?"),
                    env!("CARGO_PKG_VERSION"),
                ));
            }
            if let Some(busy) = hello.get("busy_with").and_then(Value::as_str) {
                return Err(format!(
                    "--agents {url}: busy with run {busy} (stop it, or use another agent)"
                ));
            }
        }
        let mut clocks = Vec::new();
        for url in &c.agents {
            clocks.push(c.clock(url).await?);
        }
        c.clocks = clocks;
        Ok(c)
    }

    /// Where the coordinator's own lines go (a wait under way); the log's info level unless told.
    pub fn with_notice(mut self, notice: impl Fn(&str) + Send + Sync + 'static) -> Coordinator {
        self.notice = Box::new(notice);
        self
    }

    /// The largest of the agents' clock bounds, µs.
    pub fn clock_bound_us(&self) -> u64 {
        self.clocks.iter().map(|c| c.bound_us).max().unwrap_or(0)
    }

    /// A request to an agent, with the token when there is one.
    fn request(&self, method: reqwest::Method, url: &str, path: &str) -> reqwest::RequestBuilder {
        let request = self.http.request(method, format!("{url}{path}"));
        match &self.token {
            Some(t) => request.bearer_auth(t),
            None => request,
        }
    }

    /// One control request; an error names the agent and says what to do.
    async fn call(
        &self,
        method: reqwest::Method,
        url: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, String> {
        let mut request = self.request(method, url, path);
        if let Some(b) = body {
            request = request
                .header("content-type", "application/json")
                .body(b.to_string());
        }
        let response = request.send().await.map_err(|e| {
            let why = if e.is_timeout() {
                "no answer in time".to_string()
            } else if e.is_connect() {
                "cannot connect (is `kbench agent` running there?)".to_string()
            } else {
                e.to_string()
            };
            format!("--agents {url}: {why}")
        })?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status == reqwest::StatusCode::UNAUTHORIZED {
            return Err(format!(
                "--agents {url}: the agent refused the token (give the agents' token with --agent-token or KBENCH_AGENT_TOKEN)"
            ));
        }
        if !status.is_success() {
            let message = body
                .get("error")
                .and_then(Value::as_str)
                .map_or_else(|| text.chars().take(200).collect(), str::to_string);
            if status == reqwest::StatusCode::NOT_FOUND && path == "/agent/v1/hello" {
                return Err(format!(
                    "--agents {url}: not a kbench agent (start it with `kbench agent`)"
                ));
            }
            return Err(format!("--agents {url}: {status}: {message}"));
        }
        Ok(body)
    }

    /// The agent's clock against ours, from [`CLOCK_SAMPLES`] timed exchanges.
    async fn clock(&self, url: &str) -> Result<ClockEstimate, String> {
        let mut samples = Vec::with_capacity(CLOCK_SAMPLES);
        for _ in 0..CLOCK_SAMPLES {
            let sent_us = wall_us();
            let answer = self
                .call(reqwest::Method::GET, url, "/agent/v1/clock", None)
                .await?;
            let received_us = wall_us();
            let agent_us = answer
                .get("unix_us")
                .and_then(Value::as_u64)
                .ok_or_else(|| format!("--agents {url}: the clock answer has no unix_us"))?;
            samples.push(ClockSample {
                sent_us,
                agent_us,
                received_us,
            });
        }
        ClockEstimate::from_samples(&samples)
            .ok_or_else(|| format!("--agents {url}: no usable clock sample"))
    }

    /// The clocks again, after the run (drift); an agent that no longer answers has none.
    async fn clocks_after(&self) -> Vec<Option<ClockEstimate>> {
        let mut out = Vec::new();
        for url in &self.agents {
            out.push(self.clock(url).await.ok());
        }
        out
    }

    /// Hand `segment` to agent `i`.
    async fn start(
        &self,
        i: usize,
        segment: &Segment,
        role: &'static str,
    ) -> Result<Running, String> {
        let body = serde_json::to_value(segment).map_err(|e| e.to_string())?;
        let answer = self
            .call(
                reqwest::Method::POST,
                &self.agents[i],
                "/agent/v1/segments",
                Some(&body),
            )
            .await?;
        let id = answer
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("--agents {}: no segment id in the answer", self.agents[i]))?;
        Ok(Running {
            agent: i,
            id: id.to_string(),
            role,
            last_ok: Instant::now(),
            last_live: Value::Null,
            status: Some(RunStatus::Running),
            result: None,
            error: None,
        })
    }

    /// Poll one segment: its status, live figures and (once done) result; lost after
    /// [`LOST_AFTER`] without an answer.
    async fn poll(&self, s: &mut Running) {
        if s.done() {
            return;
        }
        let path = format!("/agent/v1/segments/{}", s.id);
        match self
            .call(reqwest::Method::GET, &self.agents[s.agent], &path, None)
            .await
        {
            Ok(v) => match serde_json::from_value::<SegmentAnswer>(v) {
                Ok(a) => {
                    s.last_ok = Instant::now();
                    s.last_live = a.live;
                    s.status = Some(a.status);
                    s.error = a.error;
                    if a.status == RunStatus::Finished {
                        s.result = a.result.filter(|r| !r.is_null());
                    }
                }
                Err(e) => {
                    tracing::warn!(agent = %self.agents[s.agent], "an answer not understood: {e}")
                }
            },
            Err(e) => {
                if s.last_ok.elapsed() >= LOST_AFTER {
                    tracing::warn!(agent = %self.agents[s.agent], "lost: {e}");
                    s.status = None;
                    s.error = Some(format!(
                        "no answer for {} s (last: {e})",
                        LOST_AFTER.as_secs()
                    ));
                }
            }
        }
    }

    /// Poll an e2e consumer's segment until it has joined its group (its phase past `starting`),
    /// for at most `bound`, saying every [`NOTICE_EVERY`] how long it has waited. Each poll renews
    /// its lease. On giving up or on `cancel` the segment is stopped; the error names the agent and
    /// the phase.
    async fn wait_joined(
        &self,
        s: &mut Running,
        bound: Duration,
        cancel: &CancellationToken,
    ) -> Result<(), String> {
        let url = self.agents[s.agent].clone();
        let started = Instant::now();
        let mut told = Instant::now();
        loop {
            self.poll(s).await;
            if s.done() {
                return Err(format!(
                    "--agents {url}: the consumer ended before it joined its group: {}",
                    s.error.clone().unwrap_or_else(|| s.status_name().into())
                ));
            }
            let phase = s.last_live.get("phase").and_then(Value::as_str);
            if phase.is_some_and(|p| p != "starting") {
                return Ok(());
            }
            if started.elapsed() >= bound {
                self.stop_all(std::slice::from_ref(s)).await;
                return Err(format!(
                    "--agents {url}: the consumer did not join its group within {} s (its rebalance timeout + {} s; a broker that holds JoinGroup longer needs a longer session.timeout.ms)",
                    bound.as_secs(),
                    JOIN_MARGIN.as_secs()
                ));
            }
            if told.elapsed() >= NOTICE_EVERY {
                told = Instant::now();
                (self.notice)(&format!(
                    "waiting for the consumer on {url} to join its group… {} s",
                    started.elapsed().as_secs()
                ));
            }
            tokio::select! {
                _ = tokio::time::sleep(READY_POLL) => {}
                _ = cancel.cancelled() => {
                    self.stop_all(std::slice::from_ref(s)).await;
                    return Err(format!(
                        "--agents {url}: stopped while the consumer was joining its group"
                    ));
                }
            }
        }
    }

    /// Poll OMB segments until every one's consumers have joined their groups (each segment's
    /// phase past `starting`), for at most `bound`, saying every [`NOTICE_EVERY`] how long it has
    /// waited. A segment that ends first, giving up, or `cancel` stop every segment; the error
    /// names the agent.
    async fn wait_all_joined(
        &self,
        segments: &mut [Running],
        bound: Duration,
        cancel: &CancellationToken,
    ) -> Result<(), String> {
        let started = Instant::now();
        let mut told = Instant::now();
        loop {
            futures_util::future::join_all(segments.iter_mut().map(|s| self.poll(s))).await;
            if let Some((url, why)) = self.one_ended(segments).await {
                return Err(format!(
                    "--agents {url}: the segment ended before its consumers joined their groups: {why}"
                ));
            }
            // A segment not heard from yet is still joining for all the coordinator knows.
            let joining: Vec<String> = segments
                .iter()
                .filter(|s| {
                    s.last_live
                        .get("phase")
                        .and_then(Value::as_str)
                        .is_none_or(|p| p == "starting")
                })
                .map(|s| self.agents[s.agent].clone())
                .collect();
            if joining.is_empty() {
                return Ok(());
            }
            if started.elapsed() >= bound {
                self.stop_all(segments).await;
                return Err(format!(
                    "--agents {}: the consumers did not join their groups within {} s (twice the session timeout and a margin; a broker that holds JoinGroup longer needs a longer session.timeout.ms)",
                    joining.join(", "),
                    bound.as_secs(),
                ));
            }
            if told.elapsed() >= NOTICE_EVERY {
                told = Instant::now();
                (self.notice)(&format!(
                    "waiting for the consumers on {} to join their groups… {} s",
                    joining.join(", "),
                    started.elapsed().as_secs()
                ));
            }
            tokio::select! {
                _ = tokio::time::sleep(READY_POLL) => {}
                _ = cancel.cancelled() => {
                    self.stop_all(segments).await;
                    return Err("--agents: stopped while the consumers were joining their groups".into());
                }
            }
        }
    }

    /// The barrier: every segment must have reached its agent before the start instant `at`
    /// (coordinator's clock, µs); otherwise the agents would not start together. Until then the
    /// segments are polled: each agent connects, checks the versions (its `--pin`s among them) and
    /// the topic before its barrier, and one that ends there is the run's error, naming its agent.
    /// Either way every segment is stopped.
    async fn hold_barrier(&self, segments: &mut [Running], at: u64) -> Result<(), String> {
        let now = wall_us();
        if now > at {
            self.stop_all(segments).await;
            return Err(format!(
                "--agents: handing out the segments ended {} ms after the barrier start (a lead of {} s): the agents would not have started together; every segment was stopped (are the agents overloaded or far away?)",
                (now - at) / 1000,
                START_LEAD.as_secs()
            ));
        }
        loop {
            futures_util::future::join_all(segments.iter_mut().map(|s| self.poll(s))).await;
            if let Some((url, why)) = self.one_ended(segments).await {
                return Err(format!("--agents {url}: {why}"));
            }
            let now = wall_us();
            if now > at {
                return Ok(());
            }
            tokio::time::sleep(READY_POLL.min(Duration::from_micros(at - now + 1))).await;
        }
    }

    /// A segment that ended before the run could start: its agent and why; every other segment
    /// is then stopped.
    async fn one_ended(&self, segments: &[Running]) -> Option<(String, String)> {
        let s = segments.iter().find(|s| s.done())?;
        let why = s
            .error
            .clone()
            .unwrap_or_else(|| s.status_name().to_string());
        let url = self.agents[s.agent].clone();
        self.stop_all(segments).await;
        Some((url, why))
    }

    /// Ask every segment not done yet to stop (best effort).
    async fn stop_all(&self, segments: &[Running]) {
        for s in segments.iter().filter(|s| !s.done()) {
            let path = format!("/agent/v1/segments/{}", s.id);
            let url = &self.agents[s.agent];
            let _ = self
                .request(reqwest::Method::DELETE, url, &path)
                .timeout(Duration::from_secs(2))
                .send()
                .await;
        }
    }

    /// Poll `segments` every [`POLL`] until all are done; `progress` gets the agents' live
    /// figures every `every`. On `cancel`, they are asked to stop and still awaited (their results
    /// kept).
    async fn follow(
        &self,
        segments: &mut [Running],
        every: Duration,
        cancel: &CancellationToken,
        progress: &Progress<'_>,
    ) {
        let mut stopped = false;
        let mut shown = Instant::now();
        loop {
            // Every segment at once: one agent slow to answer must not hold back the others'
            // renewals (a poll renews the segment's lease on its agent).
            futures_util::future::join_all(segments.iter_mut().map(|s| self.poll(s))).await;
            if segments.iter().all(Running::done) {
                return;
            }
            if shown.elapsed() + POLL / 2 >= every {
                shown = Instant::now();
                let lives: Vec<(String, Value)> = segments
                    .iter()
                    .map(|s| (self.agents[s.agent].clone(), s.last_live.clone()))
                    .collect();
                progress(&lives);
            }
            tokio::select! {
                _ = tokio::time::sleep(POLL.min(every)) => {}
                _ = cancel.cancelled(), if !stopped => {
                    stopped = true;
                    self.stop_all(segments).await;
                }
            }
        }
    }

    /// [`Coordinator::follow`] for segments that end when the agents together have read enough
    /// (consume: `--messages`; omb: every record acknowledged), polled every [`CONSUME_POLL`]:
    /// once `enough` says so of the segments' last live figures, every segment still reading is
    /// told (`…/enough`) and ends, its result kept.
    async fn follow_until(
        &self,
        segments: &mut [Running],
        enough_read: impl Fn(&[Running]) -> bool,
        every: Duration,
        cancel: &CancellationToken,
        progress: &Progress<'_>,
    ) {
        let mut stopped = false;
        let mut enough = false;
        let mut shown = Instant::now();
        loop {
            futures_util::future::join_all(segments.iter_mut().map(|s| self.poll(s))).await;
            if segments.iter().all(Running::done) {
                return;
            }
            if !enough && enough_read(segments) {
                enough = true;
                let told = segments.iter().filter(|s| !s.done()).map(|s| async move {
                    let path = format!("/agent/v1/segments/{}/enough", s.id);
                    self.call(reqwest::Method::POST, &self.agents[s.agent], &path, None)
                        .await
                });
                for answer in futures_util::future::join_all(told).await {
                    // A segment that ended meanwhile has its result anyway.
                    if let Err(e) = answer {
                        tracing::debug!("enough: {e}");
                    }
                }
            }
            if shown.elapsed() + CONSUME_POLL / 2 >= every {
                shown = Instant::now();
                let lives: Vec<(String, Value)> = segments
                    .iter()
                    .map(|s| (self.agents[s.agent].clone(), s.last_live.clone()))
                    .collect();
                progress(&lives);
            }
            tokio::select! {
                _ = tokio::time::sleep(CONSUME_POLL) => {}
                _ = cancel.cancelled(), if !stopped => {
                    stopped = true;
                    self.stop_all(segments).await;
                }
            }
        }
    }

    /// One segment per agent, agent `i` the `i`-th of `works` (each given its agent's start
    /// instant, on that agent's clock), handed out and held to the barrier: on any failure every
    /// segment handed out is stopped.
    async fn start_together<F: FnOnce(u64) -> Work>(
        &self,
        target: &Target,
        role: &'static str,
        works: impl Iterator<Item = F>,
    ) -> Result<Vec<Running>, String> {
        let (at, start_at) = self.start_at();
        let mut segments = Vec::new();
        for (i, work) in works.enumerate() {
            let body = segment(target, work(start_at[i]));
            match self.start(i, &body, role).await {
                Ok(s) => segments.push(s),
                Err(e) => {
                    self.stop_all(&segments).await;
                    return Err(e);
                }
            }
        }
        self.hold_barrier(&mut segments, at).await?;
        Ok(segments)
    }

    /// The part each segment played, for the merge: its result read as the document `kind`
    /// writes (an agent whose result does not read as one is lost, and says why).
    fn parts<D: serde::de::DeserializeOwned>(
        &self,
        segments: &[Running],
        after: &[Option<ClockEstimate>],
        kind: Kind,
    ) -> Vec<AgentPart<D>> {
        segments
            .iter()
            .map(|s| {
                let read = s.result.as_ref().map(|v| document::read_as::<D>(v, kind));
                let (result, lost) = match read {
                    Some(Ok(d)) => (Some(d), None),
                    Some(Err(e)) => (None, Some(format!("its result {e}"))),
                    None => (
                        None,
                        Some(
                            s.error
                                .clone()
                                .unwrap_or_else(|| s.status_name().to_string()),
                        ),
                    ),
                };
                AgentPart {
                    agent: self.agents[s.agent].clone(),
                    role: s.role,
                    clock_before: self.clocks.get(s.agent).copied(),
                    clock_after: after.get(s.agent).copied().flatten(),
                    result,
                    lost,
                    last_live: s.last_live.clone(),
                }
            })
            .collect()
    }

    /// The start instant: now + the lead, in the coordinator's clock and in each agent's own
    /// (shifted by its offset).
    fn start_at(&self) -> (u64, Vec<u64>) {
        let worst_rtt = self.clocks.iter().map(|c| c.rtt_us).max().unwrap_or(0);
        let at = wall_us() + START_LEAD.as_micros() as u64 + 4 * worst_rtt;
        let each = self
            .clocks
            .iter()
            .map(|c| (at as i64 + c.offset_us).max(0) as u64)
            .collect();
        (at, each)
    }
}

/// What a distributed run needs besides its spec: the cluster and its connection properties.
#[derive(Debug, Clone)]
pub struct Target {
    pub bootstrap: Vec<String>,
    pub properties: Vec<(String, String)>,
    /// The run's name on the agents.
    pub run: String,
    /// `--pin`: every agent negotiates and holds them (version by Kafka API name).
    pub pins: std::collections::BTreeMap<String, i16>,
}

impl Target {
    /// The CLI's target: the cluster, the connection and security properties among `properties`
    /// (everything else is in the spec), a fresh run name after `workload`, the pins.
    pub fn of_cli(
        bootstrap: Vec<String>,
        properties: &[(String, String)],
        workload: &str,
        pins: &kbench_wire::Pins,
    ) -> Target {
        Target {
            bootstrap,
            properties: properties
                .iter()
                .filter(|(k, _)| {
                    kbench_client::is_connection_property(k) && k != "bootstrap.servers"
                })
                .cloned()
                .collect(),
            run: kbench_bench::spec::fresh_id(&format!("kbench-{workload}")),
            pins: pin_names(pins),
        }
    }
}

/// `--pin`s as a segment carries them: version by Kafka API name.
pub fn pin_names(pins: &kbench_wire::Pins) -> std::collections::BTreeMap<String, i16> {
    pins.iter()
        .map(|(api, v)| (kbench_wire::api_name(api), v))
        .collect()
}

fn segment(target: &Target, work: Work) -> Segment {
    // What an e2e spec holds outside its serialised form: a producer's prepared values, a
    // consumer's deserializer properties.
    let (values, deserializer) = match &work {
        Work::E2e(s) => (
            s.values
                .as_ref()
                .filter(|_| s.mode.has_producers())
                .map(|v| v.to_vec()),
            if s.mode.has_consumer() {
                s.deserializer.clone()
            } else {
                Default::default()
            },
        ),
        Work::Consume(s) => (None, s.deserializer.clone()),
        Work::Produce(_) | Work::Omb(_) => (None, Default::default()),
    };
    Segment {
        protocol: AGENT_PROTOCOL,
        run: target.run.clone(),
        work,
        bootstrap_servers: target.bootstrap.clone(),
        properties: target.properties.clone(),
        pins: target.pins.clone(),
        values,
        deserializer,
    }
}

/// A produce run spread over every agent: split, barrier start, followed, merged.
pub async fn run_produce(
    c: &Coordinator,
    spec: &ProduceSpec,
    target: &Target,
    cancel: &CancellationToken,
    progress: &Progress<'_>,
) -> Result<ResultDocument, String> {
    let parts = split_produce(spec, c.agents.len()).map_err(|e| crate::args::spec_error(&e))?;
    let works = parts.into_iter().map(|mut part| {
        move |at| {
            part.start_at_us = Some(at);
            Work::Produce(Box::new(part))
        }
    });
    let mut segments = c.start_together(target, "produce", works).await?;
    c.follow(&mut segments, spec.reporting_interval, cancel, progress)
        .await;
    let after = c.clocks_after().await;
    merge_produce(&c.parts(&segments, &after, Kind::Produce))
}

/// A consume run spread over every agent: split (members in the run's group, or partitions),
/// barrier start (each agent connected, its versions and the topic checked), followed, merged.
pub async fn run_consume(
    c: &Coordinator,
    spec: &ConsumeSpec,
    target: &Target,
    cancel: &CancellationToken,
    progress: &Progress<'_>,
) -> Result<ConsumeResultDocument, String> {
    let parts = split_consume(spec, c.agents.len()).map_err(|e| crate::args::spec_error(&e))?;
    let works = parts.into_iter().map(|mut part| {
        move |at| {
            part.start_at_us = Some(at);
            Work::Consume(Box::new(part))
        }
    });
    let mut segments = c.start_together(target, "consume", works).await?;
    let read_all = |segments: &[Running]| live_total(segments, "records_consumed") >= spec.messages;
    c.follow_until(
        &mut segments,
        read_all,
        spec.reporting_interval,
        cancel,
        progress,
    )
    .await;
    let after = c.clocks_after().await;
    merge_consume(&c.parts(&segments, &after, Kind::Consume))
}

/// A numeric live figure summed over the segments' last polls.
fn live_total(segments: &[Running], field: &str) -> u64 {
    segments
        .iter()
        .filter_map(|s| s.last_live.get(field)?.as_u64())
        .sum()
}

/// An OMB workload spread over every agent: its producers and consumers split
/// ([`split_omb`]); every agent's segment started at once, its consumers joining their groups;
/// once all have joined (as long as a join takes), the producers of every agent started at one
/// instant (`…/go`); followed; once every producer has ended and the agents' consumers together
/// have read every record acknowledged (once per subscription), every segment is told it is done
/// (`…/enough`); the results merged. `workload` and `driver` are the files' text.
pub async fn run_omb(
    c: &Coordinator,
    spec: &OmbSpec,
    workload: &str,
    driver: Option<&str>,
    target: &Target,
    cancel: &CancellationToken,
    progress: &Progress<'_>,
) -> Result<MergedOmb, String> {
    let shares = split_omb(spec, c.agents.len()).map_err(|e| crate::args::spec_error(&e))?;
    let mut segments = Vec::new();
    for (i, share) in shares.iter().enumerate() {
        let work = OmbSegment::of(spec, workload, driver, share.clone());
        let body = segment(target, Work::Omb(Box::new(work)));
        match c.start(i, &body, "omb").await {
            Ok(s) => segments.push(s),
            Err(e) => {
                c.stop_all(&segments).await;
                return Err(e);
            }
        }
    }
    // Each agent waits for its consumers' joins as long as the single process does; the margin
    // is the control conversation's.
    let bound = spec.consumer.consumer.session_timeout * 2 + Duration::from_secs(30) + JOIN_MARGIN;
    c.wait_all_joined(&mut segments, bound, cancel).await?;
    let (at, start_at) = c.start_at();
    for s in &segments {
        let path = format!("/agent/v1/segments/{}/go", s.id);
        let body = json!({ "start_at_us": start_at[s.agent] });
        if let Err(e) = c
            .call(
                reqwest::Method::POST,
                &c.agents[s.agent],
                &path,
                Some(&body),
            )
            .await
        {
            c.stop_all(&segments).await;
            return Err(e);
        }
    }
    if wall_us() > at {
        c.stop_all(&segments).await;
        return Err(format!(
            "--agents: telling the agents their start ended after it (a lead of {} s): they would not have started together; every segment was stopped",
            START_LEAD.as_secs()
        ));
    }
    let subscriptions = u64::from(spec.workload.subscriptions_per_topic);
    let drained = |segments: &[Running]| {
        // Producing for all the coordinator knows, unless it said it has finished producing.
        let producing = segments.iter().any(|s| {
            !s.done()
                && !matches!(
                    s.last_live.get("phase").and_then(Value::as_str),
                    Some("draining" | "done")
                )
        });
        !producing
            && live_total(segments, "records_consumed")
                >= live_total(segments, "records_acked_all") * subscriptions
    };
    c.follow_until(
        &mut segments,
        drained,
        spec.reporting_interval,
        cancel,
        progress,
    )
    .await;
    let after = c.clocks_after().await;
    merge_omb(
        &c.parts(&segments, &after, Kind::Omb),
        &shares,
        spec.workload.subscriptions_per_topic,
    )
}

/// An e2e run: the consumer on `consumer_agent` (joined before any producer starts), the producers
/// split over the other agents and started at one instant, the consumer told what they acknowledged
/// and drained, the parts merged.
pub async fn run_e2e(
    c: &Coordinator,
    spec: &E2eSpec,
    consumer_agent: usize,
    target: &Target,
    every: Duration,
    cancel: &CancellationToken,
    progress: &Progress<'_>,
) -> Result<E2eResultDocument, String> {
    let producer_agents: Vec<usize> = (0..c.agents.len())
        .filter(|i| *i != consumer_agent)
        .collect();
    let run_tag = rand::random::<u32>();
    let (mut consumer, producers) =
        split_e2e(spec, producer_agents.len(), run_tag).map_err(|e| crate::args::spec_error(&e))?;
    let producer_clocks: Vec<ClockEstimate> =
        producer_agents.iter().map(|i| c.clocks[*i]).collect();
    consumer.producer_segments =
        producer_segments(&producers, &producer_clocks, &c.clocks[consumer_agent]);
    let body = segment(target, Work::E2e(Box::new(consumer.clone())));
    // Answered at once; the producers start once it has joined its group and is positioned.
    let mut consumer_run = c.start(consumer_agent, &body, "consumer").await?;
    c.wait_joined(
        &mut consumer_run,
        spec.rebalance_timeout() + JOIN_MARGIN,
        cancel,
    )
    .await?;
    let (at, start_at) = c.start_at();
    let mut running = Vec::new();
    for (k, mut part) in producers.into_iter().enumerate() {
        let i = producer_agents[k];
        part.start_at_us = Some(start_at[i]);
        let body = segment(target, Work::E2e(Box::new(part)));
        match c.start(i, &body, "producer").await {
            Ok(s) => running.push(s),
            Err(e) => {
                c.stop_all(&running).await;
                c.stop_all(std::slice::from_ref(&consumer_run)).await;
                return Err(e);
            }
        }
    }
    if let Err(e) = c.hold_barrier(&mut running, at).await {
        c.stop_all(std::slice::from_ref(&consumer_run)).await;
        return Err(e);
    }
    // The producers run (their duration, or until stopped); the consumer's progress goes along.
    {
        let consumer_live = std::sync::Mutex::new(Value::Null);
        let show = |lives: &[(String, Value)]| {
            let mut all = lives.to_vec();
            all.push((
                c.agents[consumer_agent].clone(),
                consumer_live.lock().expect("live lock").clone(),
            ));
            progress(&all);
        };
        let follow = c.follow(&mut running, every, cancel, &show);
        tokio::pin!(follow);
        loop {
            tokio::select! {
                _ = &mut follow => break,
                _ = tokio::time::sleep(POLL.min(every)) => {
                    c.poll(&mut consumer_run).await;
                    *consumer_live.lock().expect("live lock") = consumer_run.last_live.clone();
                }
            }
        }
    }
    // Tell the consumer what each producer agent acknowledged (with `--verify`, record by
    // record); it drains, then finishes.
    let parts = c.parts::<E2eResultDocument>(&running, &[], Kind::E2e);
    let acked: Vec<Option<u64>> = parts
        .iter()
        .map(|p| Some(p.result.as_ref()?.records_acked))
        .collect();
    let written: Vec<&kbench_bench::verify::WrittenWire> = parts
        .iter()
        .filter_map(|p| p.result.as_ref()?.written.as_ref())
        .collect();
    if !consumer_run.done() {
        let path = format!("/agent/v1/segments/{}/drain", consumer_run.id);
        if let Err(e) = c
            .call(
                reqwest::Method::POST,
                &c.agents[consumer_agent],
                &path,
                Some(&json!({ "acked": acked, "written": written })),
            )
            .await
        {
            tracing::warn!("drain: {e}");
        }
        c.follow(
            std::slice::from_mut(&mut consumer_run),
            every,
            cancel,
            &|_: &[(String, Value)]| {},
        )
        .await;
    }
    let after = c.clocks_after().await;
    let mut consumer_part: AgentPart<E2eResultDocument> = c
        .parts(std::slice::from_ref(&consumer_run), &after, Kind::E2e)
        .remove(0);
    // A consumer's document without its consumer side did not read whole (the side is one
    // flattened block, absent when any of its fields is wrong): its reads are unknown, said so.
    if consumer_part
        .result
        .as_ref()
        .is_some_and(|d| d.consumer.is_none())
    {
        consumer_part.result = None;
        consumer_part.lost = Some("its result has no consumer side that reads".into());
    }
    merge_e2e(&consumer_part, &c.parts(&running, &after, Kind::E2e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_lists_are_checked() {
        assert_eq!(
            parse_agents("h1:8080, http://h2:9/", "--agents").unwrap(),
            vec!["http://h1:8080".to_string(), "http://h2:9".to_string()]
        );
        for (bad, says) in [
            ("h1:1,h1:1", "given twice"),
            ("h1:1,,h2:2", "empty entry"),
            ("ftp://h:1", "expected http"),
            ("http://user:pw@h:1", "credentials"),
        ] {
            let e = parse_agents(bad, "--agents").unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
            assert!(!e.contains("pw@"), "{e}");
        }
    }
}
