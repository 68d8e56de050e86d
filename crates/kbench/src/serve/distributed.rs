//! `/v1/runs` with `"agents"`: a CI job drives a distributed run through one server. The server is
//! the coordinator (the CLI's, `crate::coordinator`): the agents are checked before the run is
//! accepted (a bad list is a 400 naming `agents`, an agent that cannot be used a 502 naming it),
//! then the run is supervised like any other, its live figures the agents' own. A DELETE cancels
//! the token the coordinator follows: every agent's segment is stopped and its result still merged.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use kbench_bench::ProduceSpec;
use kbench_bench::e2e::E2eSpec;
use serde_json::{Map, Value, json};

use crate::coordinator::{AgentList, Coordinator, Target, parse_agents, run_e2e, run_produce};
use crate::serve::app::App;
use crate::serve::error::ApiError;
use crate::serve::registry::{Api, Live, Outcome};

/// The agents a request spreads its run over.
pub struct Spread {
    agents: Vec<String>,
    consumer_agent: Option<String>,
    token: Option<String>,
}

/// Take `agents`, `consumer_agent` and `agent_token` out of a /v1 body; `None` without `agents`.
pub fn take(obj: &mut Map<String, Value>) -> Result<Option<Spread>, ApiError> {
    let agents = match obj.remove("agents") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(Value::Array(list)) => Some(
            list.iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| ApiError::field("agents", "must be a list of agent URLs"))?
                .join(","),
        ),
        Some(_) => return Err(ApiError::field("agents", "must be a list of agent URLs")),
    };
    let text = |field: &'static str, v: Option<Value>| match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiError::field(field, "must be a string")),
    };
    let consumer_agent = text("consumer_agent", obj.remove("consumer_agent"))?;
    let token = text("agent_token", obj.remove("agent_token"))?;
    let Some(agents) = agents else {
        if consumer_agent.is_some() {
            return Err(ApiError::field("consumer_agent", "only with `agents`"));
        }
        return Ok(None);
    };
    let agents = parse_agents(&agents, "agents").map_err(|e| ApiError::field("agents", e))?;
    Ok(Some(Spread {
        agents,
        consumer_agent,
        token,
    }))
}

impl Spread {
    pub fn has_consumer_agent(&self) -> bool {
        self.consumer_agent.is_some()
    }
}

/// The agents' list as the run's config shows it (the token never).
pub fn shown(spread: &Spread) -> Value {
    json!({ "agents": spread.agents, "consumer_agent": spread.consumer_agent })
}

/// What both workloads need: the cluster (the request's, else the server's), the properties the
/// agents are sent, the agents checked and their clocks read.
async fn prepare(
    app: &App,
    spread: &Spread,
    bootstrap: Option<Vec<String>>,
    properties: Option<Vec<(String, String)>>,
) -> Result<(Coordinator, Target), ApiError> {
    app.runs.ensure_idle()?;
    let own = bootstrap.is_some();
    let Some(bootstrap) = bootstrap.or_else(|| app.default_bootstrap.clone()) else {
        return Err(ApiError::field(
            "bootstrap_servers",
            "a run over agents needs a cluster they all reach (the server has no default, and its embedded broker is on loopback)",
        ));
    };
    let properties = match properties {
        Some(p) => p,
        None if !own => app.client_pairs.clone(),
        None => Vec::new(),
    };
    let list = AgentList {
        urls: spread.agents.clone(),
        token: spread.token.clone().or_else(|| app.agent_token.clone()),
    };
    let coordinator = Coordinator::connect(&list).await.map_err(|e| ApiError {
        status: StatusCode::BAD_GATEWAY,
        message: e.replacen("--agents", "agents:", 1),
        field: Some("agents".into()),
    })?;
    let target = Target {
        bootstrap,
        properties: properties
            .into_iter()
            .filter(|(k, _)| k != "bootstrap.servers")
            .collect(),
        run: kbench_bench::spec::fresh_id("kbench-v1"),
        pins: Default::default(),
    };
    Ok((coordinator, target))
}

/// The agents' live figures for GET, from the coordinator's polls.
fn live_of(shared: &Arc<Mutex<Value>>) -> impl Fn(&[(String, Value)]) + Send + Sync + use<> {
    let shared = shared.clone();
    move |lives: &[(String, Value)]| {
        let v: Vec<Value> = lives
            .iter()
            .map(|(agent, live)| json!({ "agent": agent, "live": live }))
            .collect();
        *shared.lock().expect("live lock") = Value::Array(v);
    }
}

/// Enter a run over agents, its live figures the agents' (filled by [`live_of`]).
fn register(
    app: &App,
    kind: &'static str,
    config: Value,
) -> Result<(crate::serve::registry::Registered, Arc<Mutex<Value>>), ApiError> {
    let shared = Arc::new(Mutex::new(Value::Null));
    let run = app
        .runs
        .register(kind, Api::V1, config, Live::Agents(shared.clone()))?;
    Ok((run, shared))
}

/// A produce run spread over the agents.
pub async fn start_produce(
    app: &Arc<App>,
    config: Value,
    spec: ProduceSpec,
    bootstrap: Option<Vec<String>>,
    properties: Option<Vec<(String, String)>>,
    spread: Spread,
) -> Result<String, ApiError> {
    let (coordinator, target) = prepare(app, &spread, bootstrap, properties).await?;
    // Each split part must hold on its own (e.g. enough records for every agent).
    kbench_bench::distributed::split_produce(&spec, spread.agents.len())
        .map_err(|e| ApiError::field(e.field, e.reason))?;
    let (run, shared) = register(app, "produce", config)?;
    let (id, stop) = (run.id.clone(), run.stop.clone());
    app.runs.spawn(run, async move {
        let progress = live_of(&shared);
        outcome(run_produce(&coordinator, &spec, &target, stop.token(), &progress).await)
    });
    Ok(id)
}

/// An e2e run: the consumer on `consumer_agent` (else the first), producers on the others.
pub async fn start_e2e(
    app: &Arc<App>,
    config: Value,
    spec: E2eSpec,
    bootstrap: Option<Vec<String>>,
    properties: Option<Vec<(String, String)>>,
    spread: Spread,
) -> Result<String, ApiError> {
    let consumer = match &spread.consumer_agent {
        None => 0,
        Some(c) => {
            let c = parse_agents(c, "consumer_agent")
                .map_err(|e| ApiError::field("consumer_agent", e))?;
            spread
                .agents
                .iter()
                .position(|u| *u == c[0])
                .ok_or_else(|| ApiError::field("consumer_agent", "not one of the agents"))?
        }
    };
    kbench_bench::distributed::split_e2e(&spec, spread.agents.len().saturating_sub(1), 0)
        .map_err(|e| ApiError::field(e.field, e.reason))?;
    let (coordinator, target) = prepare(app, &spread, bootstrap, properties).await?;
    let (run, shared) = register(app, "e2e", config)?;
    let (id, stop) = (run.id.clone(), run.stop.clone());
    app.runs.spawn(run, async move {
        let progress = live_of(&shared);
        let every = Duration::from_secs(1);
        outcome(
            run_e2e(
                &coordinator,
                &spec,
                consumer,
                &target,
                every,
                stop.token(),
                &progress,
            )
            .await,
        )
    });
    Ok(id)
}

fn outcome<D: serde::Serialize>(merged: Result<D, String>) -> Outcome {
    match merged {
        Ok(doc) => Outcome {
            result: Some(serde_json::to_value(doc).unwrap_or(Value::Null)),
            ..Outcome::default()
        },
        Err(e) => Outcome::failed(e),
    }
}
