//! The seed REST perf service's statistics, as `/pub-sub-demo` answers them: counts, and per
//! latency a stats object with values in ms (µs precision), ISO-8601 instants and durations. A
//! mapping of kbench's own figures, nothing measured here.

use std::time::SystemTime;

use hdrhistogram::Histogram;
use serde_json::{Value, json};

use crate::e2e::E2eLive;
use crate::iso8601;

fn ms3(us: f64) -> Value {
    json!((us / 1000.0 * 1000.0).round() / 1000.0)
}

/// The seed's stats object from a histogram in µs: null fields and `{}` when there are no samples.
pub fn seed_stats(h: &Histogram<u64>) -> Value {
    if h.is_empty() {
        return json!({
            "totalLatenciesGathered": 0,
            "minRequestDurationMs": null,
            "maxRequestDurationMs": null,
            "avgRequestDurationMs": null,
            "medianRequestTimeMs": null,
            "percentilesMs": {},
        });
    }
    let q = |p: f64| ms3(h.value_at_quantile(p) as f64);
    json!({
        "totalLatenciesGathered": h.len(),
        "minRequestDurationMs": ms3(h.min() as f64),
        "maxRequestDurationMs": ms3(h.max() as f64),
        "avgRequestDurationMs": ms3(h.mean()),
        "medianRequestTimeMs": q(0.5),
        "percentilesMs": {
            "50.0": q(0.50),
            "80.0": q(0.80),
            "90.0": q(0.90),
            "95.0": q(0.95),
            "98.0": q(0.98),
            "99.0": q(0.99),
        },
    })
}

/// The figures a seed stats answer is made of.
pub struct PubSubFigures<'a> {
    pub produced: u64,
    pub consumed: u64,
    pub failed: u64,
    pub producer: &'a Histogram<u64>,
    pub whole_trip: &'a Histogram<u64>,
}

/// The seed's whole stats answer; `kill` is when the run was stopped (None: still running, so the
/// duration runs to now).
pub fn pub_sub_stats(f: PubSubFigures<'_>, start: SystemTime, kill: Option<SystemTime>) -> Value {
    let duration = kill
        .unwrap_or_else(SystemTime::now)
        .duration_since(start)
        .unwrap_or_default();
    json!({
        "totalProducedMessages": f.produced,
        "totalConsumedMessages": f.consumed,
        "totalFailedMessages": f.failed,
        "producerStats": seed_stats(f.producer),
        "wholeTripStats": seed_stats(f.whole_trip),
        "taskStartTime": iso8601::format_instant(start),
        "taskKillTime": kill.map(iso8601::format_instant),
        "taskDuration": iso8601::format_duration(duration),
    })
}

/// The same from a run in progress.
pub fn pub_sub_stats_live(live: &E2eLive, start: SystemTime) -> Value {
    let s = live.snapshot();
    pub_sub_stats(
        PubSubFigures {
            produced: s.produced,
            consumed: s.consumed,
            failed: s.failed,
            producer: &s.producer_latency,
            whole_trip: &s.whole_trip,
        },
        start,
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_stats_have_nulls_and_no_percentiles() {
        let h = crate::measure::latency_histogram();
        let s = seed_stats(&h);
        assert_eq!(s["totalLatenciesGathered"], 0);
        assert!(s["minRequestDurationMs"].is_null());
        assert_eq!(s["percentilesMs"], json!({}));
    }

    #[test]
    fn values_are_ms_with_microsecond_precision() {
        let mut h = crate::measure::latency_histogram();
        h.record(412).unwrap();
        let s = seed_stats(&h);
        assert_eq!(s["minRequestDurationMs"], json!(0.412));
        assert_eq!(s["percentilesMs"]["99.0"], json!(0.412));
    }
}
