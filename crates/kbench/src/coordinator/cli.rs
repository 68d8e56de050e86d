//! The coordinator's command-line end: `--agents` and its neighbours, connecting to the agents
//! before any load, and the end of a distributed run (the agents' lines, `--slo`, the result file,
//! the exit code).

use super::*;
use kbench_bench::distributed::{AgentOutcome, Distributed};

/// `--agents`, `--agents-dns` and `--agent-token`, for every workload that can be split.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DistributedArgs {
    /// Spread the run over these agents (`kbench agent`), e.g. http://10.0.0.5:8080,host2:8080:
    /// the load is split between them, started at one instant, and merged exactly. Needs
    /// --bootstrap-server (a cluster every agent can reach).
    #[arg(long, value_name = "URL,…", conflicts_with = "agents_dns")]
    pub agents: Option<String>,

    /// Find the agents by DNS: every address NAME[:PORT] resolves to (a headless Service), port
    /// 8080 unless given.
    #[arg(long, value_name = "NAME[:PORT]")]
    pub agents_dns: Option<String>,

    /// With --agents-dns: wait until the name resolves to at least this many agents (pods start
    /// at their own pace), at most --agents-wait.
    #[arg(long, value_name = "N", requires = "agents_dns", value_parser = crate::args::positive_usize)]
    pub agents_count: Option<usize>,

    /// With --agents-count: how long to wait for the agents (default 5m).
    #[arg(long, value_name = "DURATION", requires = "agents_count", value_parser = crate::args::parse_duration)]
    pub agents_wait: Option<Duration>,

    /// The agents' bearer token. Prefer KBENCH_AGENT_TOKEN: a flag is visible to anyone who can
    /// list processes.
    #[arg(long, env = "KBENCH_AGENT_TOKEN", hide_env_values = true)]
    pub agent_token: Option<String>,
}

impl DistributedArgs {
    /// Whether agents were asked for at all.
    pub fn given(&self) -> bool {
        self.agents.is_some() || self.agents_dns.is_some()
    }

    /// The agents, when the run is distributed.
    pub async fn list(&self) -> Result<Option<AgentList>, String> {
        let urls = match (&self.agents, &self.agents_dns) {
            (Some(a), _) => parse_agents(a, "--agents")?,
            (None, Some(name)) => {
                let want = self.agents_count.unwrap_or(1);
                let deadline =
                    Instant::now() + self.agents_wait.unwrap_or(Duration::from_secs(300));
                loop {
                    let found = resolve_agents(name).await;
                    match found {
                        Ok(urls) if urls.len() >= want => break urls,
                        _ if Instant::now() >= deadline => {
                            let have = found.map_or(0, |u| u.len());
                            return Err(format!(
                                "--agents-dns {name}: {have} agent(s) found, {want} wanted, after waiting {} s",
                                self.agents_wait
                                    .unwrap_or(Duration::from_secs(300))
                                    .as_secs()
                            ));
                        }
                        _ => tokio::time::sleep(Duration::from_secs(2)).await,
                    }
                }
            }
            (None, None) => return Ok(None),
        };
        Ok(Some(AgentList {
            urls,
            token: self.agent_token.clone().filter(|t| !t.is_empty()),
        }))
    }
}

/// The CLI's start of a distributed run, for every workload: the cluster's addresses
/// (`--bootstrap-server`) and the agents checked; each failure is one error line and its exit code.
pub async fn cli_connect(
    bootstrap: Option<&str>,
    agents: &AgentList,
) -> Result<(Vec<String>, Coordinator), CliError> {
    let Some(bootstrap) = bootstrap else {
        return Err(CliError::usage(
            "--agents: the agents need a cluster they all reach: give --bootstrap-server",
        ));
    };
    let bootstrap = kbench_bench::spec::bootstrap_list(bootstrap)
        .map_err(|e| CliError::usage(format!("--bootstrap-server {e}")))?;
    let coordinator = Coordinator::connect(agents)
        .await
        .map_err(CliError::failed)?;
    Ok((bootstrap, coordinator))
}

/// The CLI's end of a distributed run: the agents' lines, the `--slo` table, the result file; the
/// exit code — 4 when degraded, 130 when interrupted, 1 with failed (or lost) records, 3 when an
/// `--slo` condition failed.
pub fn cli_finish<D: serde::Serialize>(
    doc: &D,
    distributed: Option<&Distributed>,
    slo: Option<&[kbench_bench::slo::Condition]>,
    json: Option<&std::path::Path>,
    failed: bool,
    interrupted: bool,
) -> CliResult {
    print_agents(distributed);
    let (document, slo_met) = crate::args::check_slo(slo, doc);
    if let Some(path) = json {
        crate::args::write_json(path, &document)
            .map_err(|e| CliError::failed(format!("--json {e}")))?;
        eprintln!("kbench: wrote {}", path.display());
    }
    Ok(if distributed.is_some_and(|d| d.degraded) {
        crate::args::EXIT_DEGRADED
    } else if interrupted {
        crate::args::EXIT_INTERRUPTED
    } else if failed {
        crate::args::EXIT_FAILED
    } else if !slo_met {
        crate::args::EXIT_SLO
    } else {
        0
    })
}

/// A distributed run that ended without a result: its one error line, exit 130 when a signal
/// stopped it (during a consumer's join wait, say), else 1.
pub fn cli_error(e: String, interrupted: bool) -> CliError {
    if interrupted {
        CliError::with_code(crate::args::EXIT_INTERRUPTED, e)
    } else {
        CliError::failed(e)
    }
}

/// The agents' part of a result, one line each, and the clock statement.
pub fn print_agents(distributed: Option<&Distributed>) {
    let Some(d) = distributed else { return };
    let or_unknown = |v: Option<String>| v.unwrap_or_else(|| "?".to_string());
    println!();
    println!("Agents:");
    for a in &d.agents {
        let count = a.figures.records_acked.or(a.figures.records_consumed);
        let status = match a.status {
            AgentOutcome::Finished => "finished",
            AgentOutcome::Lost => "lost",
        };
        println!(
            "  {} ({}, {status}): {} records; clock offset {} µs ± {} µs (rtt {} µs, drift {} µs){}",
            a.agent,
            a.role,
            or_unknown(count.map(|c| c.to_string())),
            or_unknown(a.clock.offset_us.map(|c| c.to_string())),
            or_unknown(a.clock.bound_us.map(|c| c.to_string())),
            or_unknown(a.clock.rtt_us.map(|c| c.to_string())),
            or_unknown(a.clock.drift_us.map(|c| c.to_string())),
            a.error
                .as_deref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default(),
        );
    }
    if d.degraded {
        println!(
            "DEGRADED: agent(s) {} lost mid-run; the figures are the other agents' (the lost agents' last live counts are in distributed.agents)",
            d.lost_agents.join(", ")
        );
    }
}

/// Sum of a numeric live field over the agents' lines.
pub fn live_sum(lives: &[(String, Value)], field: &str) -> u64 {
    lives
        .iter()
        .filter_map(|(_, v)| v.get(field).and_then(Value::as_u64))
        .sum()
}

/// `--agents URL,URL,…`: each an http(s) URL, none twice. `flag` names the source in errors.
pub fn parse_agents(list: &str, flag: &str) -> Result<Vec<String>, String> {
    let mut seen = BTreeSet::new();
    let mut urls = Vec::new();
    for raw in list.split(',').map(str::trim) {
        if raw.is_empty() {
            return Err(format!("{flag}: an empty entry (a stray comma?)"));
        }
        let with_scheme = if raw.contains("://") {
            raw.to_string()
        } else {
            format!("http://{raw}")
        };
        let url = reqwest::Url::parse(&with_scheme)
            .map_err(|e| format!("{flag} {raw}: not a URL ({e})"))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(format!("{flag} {raw}: expected http://HOST:PORT"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(format!(
                "{flag}: an agent URL with credentials is refused; give the token with --agent-token or KBENCH_AGENT_TOKEN"
            ));
        }
        let normal = url.as_str().trim_end_matches('/').to_string();
        if !seen.insert(normal.clone()) {
            return Err(format!(
                "{flag} {raw}: given twice (each agent once; one agent runs one segment)"
            ));
        }
        urls.push(normal);
    }
    if urls.len() > MAX_AGENTS {
        return Err(format!("{flag}: more than {MAX_AGENTS} agents"));
    }
    Ok(urls)
}

/// `--agents-dns NAME[:PORT]`: every address the name resolves to (a headless Service's pods), as
/// agent URLs (port 8080 unless given).
pub async fn resolve_agents(name: &str) -> Result<Vec<String>, String> {
    let target = if name
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        name.to_string()
    } else {
        format!("{name}:8080")
    };
    let addrs: BTreeSet<std::net::SocketAddr> = tokio::net::lookup_host(&target)
        .await
        .map_err(|e| format!("--agents-dns {name}: cannot resolve it: {e}"))?
        .collect();
    if addrs.is_empty() {
        return Err(format!("--agents-dns {name}: resolves to no address"));
    }
    Ok(addrs.iter().map(|a| format!("http://{a}")).collect())
}
