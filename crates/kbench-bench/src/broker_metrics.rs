//! The broker-side conversion guard: reads Kafka's message-conversion counters from a Prometheus text
//! page (as the JMX exporter serves `BrokerTopicMetrics`) before and after a run. Conversions mean the
//! broker re-encoded records for an old version, and a sweep would be measuring the broker's
//! down-conversion under the client's label.

use std::time::Duration;

/// Produce and fetch message-conversion counters at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct Conversions {
    pub produce: f64,
    pub fetch: f64,
}

/// Parse the conversion counters out of a Prometheus text exposition. Series names containing
/// `brokertopicmetrics` and `producemessageconversions` / `fetchmessageconversions` (any case, any
/// suffix such as `_total` or `_Count`) count; the broker-wide series (no `topic` label) is used when
/// present, otherwise the per-topic series are summed. `None` when the page has no such series.
pub fn parse(page: &str) -> Option<Conversions> {
    let mut found = false;
    let mut sums = [(0.0f64, None::<f64>); 2];
    for line in page
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (series, value) = match line.rsplit_once(' ') {
            Some((s, v)) => (s.trim(), v.trim()),
            None => continue,
        };
        let lower = series.to_ascii_lowercase();
        if !lower.contains("brokertopicmetrics") {
            continue;
        }
        let which = if lower.contains("producemessageconversions") {
            0
        } else if lower.contains("fetchmessageconversions") {
            1
        } else {
            continue;
        };
        if lower.contains("rate") {
            continue; // OneMinuteRate and friends: rates, not counters
        }
        let Ok(v) = value.parse::<f64>() else {
            continue;
        };
        found = true;
        if lower.contains("topic=") {
            sums[which].0 += v;
        } else {
            sums[which].1 = Some(sums[which].1.unwrap_or(0.0) + v);
        }
    }
    found.then(|| Conversions {
        produce: sums[0].1.unwrap_or(sums[0].0),
        fetch: sums[1].1.unwrap_or(sums[1].0),
    })
}

/// Why a metrics page gave no counters.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("{url}: {reason}")]
    Fetch { url: String, reason: String },
    #[error("{url}: no BrokerTopicMetrics produce/fetch message-conversion counters on the page")]
    NoCounters { url: String },
}

/// Fetch and parse the page at `url`.
pub async fn scrape(url: &str) -> Result<Conversions, MetricsError> {
    let failed = |e: reqwest::Error| MetricsError::Fetch {
        url: url.to_string(),
        reason: e.to_string(),
    };
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(failed)?;
    let page = client
        .get(url)
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .map_err(failed)?
        .text()
        .await
        .map_err(failed)?;
    parse(&page).ok_or_else(|| MetricsError::NoCounters {
        url: url.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_jmx_exporter_counters_preferring_the_broker_wide_series() {
        let page = r#"
# HELP kafka_server_brokertopicmetrics_producemessageconversions_total Attribute exposed for management
# TYPE kafka_server_brokertopicmetrics_producemessageconversions_total counter
kafka_server_brokertopicmetrics_producemessageconversions_total 7.0
kafka_server_brokertopicmetrics_producemessageconversions_total{topic="a",} 3.0
kafka_server_brokertopicmetrics_fetchmessageconversions_total{topic="a",} 2.0
kafka_server_brokertopicmetrics_fetchmessageconversions_total{topic="b",} 5.0
kafka_server_brokertopicmetrics_fetchmessageconversionspersec_oneminuterate 0.5
jvm_memory_bytes_used{area="heap",} 1.2e8
"#;
        assert_eq!(
            parse(page),
            Some(Conversions {
                produce: 7.0,
                fetch: 7.0
            })
        );
    }

    #[test]
    fn a_page_without_the_counters_is_none_not_zero() {
        assert_eq!(parse("jvm_threads_current 42\n"), None);
    }
}
