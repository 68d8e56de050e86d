//! The maximum sustainable rate (`kbench produce --find-max-rate`; OMB's `producerRate: 0`): a
//! sequence of short throttled runs, doubling the target rate while each step keeps up, then
//! halving the interval between the last step that kept up and the first that did not. A step keeps
//! up when it sent at least 95 % of its schedule, failed no record, and kbench was not the limit
//! (under 90 % of a core). The result is every step and the chosen rate — the highest that kept up —
//! never a rate no step sustained.

use std::sync::Arc;
use std::time::Duration;

use kbench_client::ClusterConfig;
use serde::Serialize;

use crate::error::BenchError;
use crate::produce::{ProduceOutcome, ProduceSpec, run_job};
use crate::stop::Stop;

/// How the search runs.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchSettings {
    /// The first target rate, records/s.
    pub start_rate: f64,
    /// Each step's measured phase.
    pub step_duration: Duration,
    /// At most this many steps.
    pub max_steps: usize,
    /// Stop refining once the interval is within this share of the rate that kept up.
    pub precision: f64,
}

impl Default for SearchSettings {
    fn default() -> Self {
        SearchSettings {
            start_rate: 10_000.0,
            step_duration: Duration::from_secs(5),
            max_steps: 12,
            precision: 0.05,
        }
    }
}

/// One step of the search.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    pub target_records_per_sec: f64,
    /// Records sent over the step's measured time.
    pub sent_records_per_sec: f64,
    pub acked_records_per_sec: f64,
    pub latency_p99_us: u64,
    pub publish_delay_p99_us: u64,
    pub records_failed: u64,
    pub cpu_share: f64,
    pub kept_up: bool,
    pub why_not: Option<String>,
}

/// What the search found.
#[derive(Debug)]
pub struct MaxRate {
    /// The highest target rate a step kept up with; `None` if none did.
    pub chosen: Option<f64>,
    pub steps: Vec<Step>,
    /// The run of the chosen step.
    pub best: Option<ProduceOutcome>,
    /// A step missed: the limit lies between `chosen` and it. `false`: every step kept up and the
    /// search stopped (`--max-steps`, an interrupt) before finding one — `chosen` is a lower bound.
    pub limit_found: bool,
}

/// Run the search. `on_step` hears each step as it ends.
pub async fn find_max_rate(
    spec: &ProduceSpec,
    cluster: ClusterConfig,
    embedded: bool,
    search: &SearchSettings,
    stop: Stop,
    on_step: impl Fn(usize, &Step),
) -> Result<MaxRate, BenchError> {
    let mut steps = Vec::new();
    let mut best: Option<ProduceOutcome> = None;
    let mut kept: Option<f64> = None;
    let mut missed: Option<f64> = None;
    let mut rate = search.start_rate;
    while steps.len() < search.max_steps && !stop.is_stopped() {
        let secs = search.step_duration.as_secs_f64();
        let step_spec = ProduceSpec {
            throughput: Some(rate),
            duration: Some(search.step_duration),
            // The duration ends the step; the count only bounds it.
            num_records: ((rate * secs * 2.0).ceil() as u64).max(1),
            repetitions: 1,
            reporting_interval: search.step_duration * 2,
            ..spec.clone()
        };
        let outcome = run_job(
            &step_spec,
            cluster.clone(),
            embedded,
            stop.clone(),
            Arc::new(()),
        )
        .await?;
        let run = &outcome.run;
        let elapsed = run.elapsed.as_secs_f64().max(1e-9);
        let sent_rate = run.records_sent as f64 / elapsed;
        let q = |h: &hdrhistogram::Histogram<u64>| {
            if h.is_empty() {
                0
            } else {
                h.value_at_quantile(0.99)
            }
        };
        let why_not = if run.aborted.is_some() {
            Some("stopped".to_string())
        } else if run.records_failed > 0 {
            Some(format!("{} records failed", run.records_failed))
        } else if (run.records_sent as f64) < 0.95 * rate * secs {
            Some(format!(
                "sent {:.0} of the {:.0} records its schedule held",
                run.records_sent as f64,
                rate * secs
            ))
        } else if run.saturation.cpu_share > 0.9 {
            Some(format!(
                "kbench used {:.0} % of a core",
                run.saturation.cpu_share * 100.0
            ))
        } else {
            None
        };
        let step = Step {
            target_records_per_sec: rate,
            sent_records_per_sec: sent_rate,
            acked_records_per_sec: run.records_per_sec(),
            latency_p99_us: q(&run.latency),
            publish_delay_p99_us: q(&run.publish_delay),
            records_failed: run.records_failed,
            cpu_share: run.saturation.cpu_share,
            kept_up: why_not.is_none(),
            why_not,
        };
        on_step(steps.len(), &step);
        let kept_up = step.kept_up;
        steps.push(step);
        if kept_up {
            kept = Some(rate);
            best = Some(outcome);
        } else {
            missed = Some(missed.map_or(rate, |m: f64| m.min(rate)));
        }
        rate = match (kept, missed) {
            (Some(k), None) => k * 2.0,
            (None, Some(m)) => m / 2.0,
            (Some(k), Some(m)) => {
                if (m - k) / k <= search.precision {
                    break;
                }
                (k + m) / 2.0
            }
            (None, None) => unreachable!("a step either kept up or not"),
        };
        if rate < 1.0 {
            break;
        }
    }
    Ok(MaxRate {
        chosen: kept,
        steps,
        best,
        limit_found: missed.is_some(),
    })
}
