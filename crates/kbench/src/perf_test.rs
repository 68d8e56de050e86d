//! kafka-producer-perf-test's and kafka-consumer-perf-test's lines, from kbench's figures: the
//! front end's words for what the library measured (the library returns figures, never lines).

use std::collections::BTreeMap;
use std::time::SystemTime;

use kbench_bench::cluster::ClusterReport;
use kbench_bench::consume::{ConsumeResultDocument, ConsumeRun, ConsumeWindow};
use kbench_bench::measure::LatencySummary;
use kbench_bench::result::ResultDocument;
use kbench_bench::{IntervalReport, ProduceRun};

/// MiB, the tools' "MB".
const MB: f64 = 1024.0 * 1024.0;

/// kafka-producer-perf-test's progress line, exactly, for one window.
pub fn producer_window(w: &IntervalReport) -> String {
    let secs = w.elapsed.as_secs_f64().max(1e-9);
    let avg_ms = if w.records == 0 {
        0.0
    } else {
        w.latency_sum_us as f64 / w.records as f64 / 1000.0
    };
    format!(
        "{} records sent, {:.1} records/sec ({:.2} MB/sec), {:.1} ms avg latency, {:.1} ms max latency.",
        w.records,
        w.records as f64 / secs,
        w.bytes as f64 / secs / MB,
        avg_ms,
        w.latency_max_us as f64 / 1000.0
    )
}

/// kafka-producer-perf-test's final line, exactly (latency percentiles in whole ms, as Java's
/// integer division gives them).
pub fn producer_final(run: &ProduceRun) -> String {
    total_line(
        run.records_acked,
        "",
        run.records_per_sec(),
        run.mb_per_sec(),
        &LatencySummary::of(&run.latency),
    )
}

/// The final line of a result document (a distributed run's merge).
pub fn producer_final_doc(doc: &ResultDocument) -> String {
    total_line(
        doc.records_acked,
        "",
        doc.records_per_sec,
        doc.mb_per_sec,
        &doc.latency,
    )
}

/// kafka-producer-perf-test's steady-state line (`--warmup-records`, KIP-1052): the final line's
/// format over the records after the warm-up, `N steady state records sent, …`.
pub fn producer_steady_final(s: &kbench_bench::result::SteadyStateSummary) -> String {
    total_line(
        s.records,
        " steady state",
        s.records_per_sec,
        s.mb_per_sec,
        &s.latency,
    )
}

/// Java's `Stats.printTotal`: `%d%s records sent, %f records/sec (%.2f MB/sec), %.2f ms avg
/// latency, %.2f ms max latency, %d ms 50th, %d ms 95th, %d ms 99th, %d ms 99.9th.`
fn total_line(records: u64, kind: &str, per_sec: f64, mb: f64, l: &LatencySummary) -> String {
    format!(
        "{records}{kind} records sent, {per_sec:.6} records/sec ({mb:.2} MB/sec), {:.2} ms avg latency, {:.2} ms max latency, {} ms 50th, {} ms 95th, {} ms 99th, {} ms 99.9th.",
        l.mean / 1000.0,
        l.max as f64 / 1000.0,
        l.p50 / 1000,
        l.p95 / 1000,
        l.p99 / 1000,
        l.p99_9 / 1000,
    )
}

/// The header line kafka-consumer-perf-test prints first.
pub fn consumer_header(detailed: bool) -> &'static str {
    if detailed {
        "time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
    } else {
        "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
    }
}

/// `time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
/// rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec`, the tool's detailed line.
pub fn consumer_window(w: &ConsumeWindow, date: &DateFormat) -> String {
    let ms = w.elapsed.as_millis() as f64;
    let mb = w.bytes as f64 / MB;
    let fetch_ms = w.elapsed.saturating_sub(w.join).as_millis() as u64;
    let per_fetch_s = |x: f64| {
        if fetch_ms == 0 {
            0.0
        } else {
            1000.0 * x / fetch_ms as f64
        }
    };
    format!(
        "{}, 0, {:.4}, {:.4}, {}, {:.4}, {}, {}, {:.4}, {:.4}",
        date.format(w.at),
        w.total_bytes as f64 / MB,
        if ms > 0.0 { 1000.0 * mb / ms } else { 0.0 },
        w.total_records,
        if ms > 0.0 {
            1000.0 * w.records as f64 / ms
        } else {
            0.0
        },
        w.join.as_millis(),
        fetch_ms,
        per_fetch_s(mb),
        per_fetch_s(w.records as f64),
    )
}

/// kafka-consumer-perf-test's final line (without `--show-detailed-stats`).
pub fn consumer_final(run: &ConsumeRun, date: &DateFormat) -> String {
    let secs = run.elapsed.as_secs_f64();
    let mb = run.bytes as f64 / MB;
    let fetch_ms = run.fetch_time().as_millis() as u64;
    let fetch_s = fetch_ms as f64 / 1000.0;
    format!(
        "{}, {}, {:.4}, {:.4}, {}, {:.4}, {}, {}, {:.4}, {:.4}",
        date.format(run.started_at),
        date.format(run.ended_at),
        mb,
        mb / secs,
        run.records,
        run.records as f64 / secs,
        run.join.as_millis(),
        fetch_ms,
        mb / fetch_s,
        run.records as f64 / fetch_s,
    )
}

/// kafka-consumer-perf-test's final line from a result document (a distributed run's merge): its
/// span, records, bytes, joining and fetch time, as [`consumer_final`] prints a run's.
pub fn consumer_final_doc(
    doc: &kbench_bench::consume::ConsumeResultDocument,
    date: &DateFormat,
) -> String {
    let at = |t: &str| humantime::parse_rfc3339_weak(t).unwrap_or(std::time::UNIX_EPOCH);
    let secs = doc.duration_s.max(1e-9);
    let mb = doc.bytes_consumed as f64 / MB;
    let fetch_s = (doc.fetch_time_ms as f64 / 1000.0).max(1e-9);
    format!(
        "{}, {}, {:.4}, {:.4}, {}, {:.4}, {}, {}, {:.4}, {:.4}",
        date.format(at(&doc.start_time)),
        date.format(at(&doc.end_time)),
        mb,
        mb / secs,
        doc.records_consumed,
        doc.records_consumed as f64 / secs,
        doc.rebalance_time_ms,
        doc.fetch_time_ms,
        mb / fetch_s,
        doc.records_consumed as f64 / fetch_s,
    )
}

/// `--print-metrics`: the table Kafka's tools print at the end (`ToolsUtils.printMetrics`) — a
/// blank line, a `Metric Name   Value` header, then one `group:name:{tags} : value` line per
/// metric in name order, names padded to the longest, values with three decimals.
pub fn metrics_table(metrics: &BTreeMap<String, f64>) -> String {
    if metrics.is_empty() {
        return String::new();
    }
    let width = metrics.keys().map(|k| k.chars().count()).max().unwrap_or(0);
    let mut out = format!("\n{:<width$}   {}", "Metric Name", "Value");
    for (name, value) in metrics {
        out.push_str(&format!("\n{name:<width$} : {value:.3}"));
    }
    out
}

/// The group of the figures kbench reports that Kafka's client has no metric for (or has one
/// with another meaning): a line in it is kbench's own.
const KBENCH_PRODUCER: &str = "kbench-producer-metrics";
const KBENCH_CONSUMER: &str = "kbench-consumer-metrics";

/// A metrics table being filled: each figure under `group:name:{client-id=…}`.
struct Metrics<'a> {
    client_id: &'a str,
    rows: BTreeMap<String, f64>,
}

impl Metrics<'_> {
    fn put(&mut self, group: &str, name: &str, value: f64) {
        let key = format!("{group}:{name}:{{client-id={}}}", self.client_id);
        self.rows.insert(key, value);
    }

    /// What the cluster did, as the run saw it: kbench's own figures.
    fn cluster(&mut self, group: &str, cluster: &ClusterReport) {
        self.put(
            group,
            "metadata-refresh-total",
            cluster.metadata_refreshes as f64,
        );
        self.put(
            group,
            "leader-change-total",
            cluster.leader_changes.len() as f64,
        );
    }
}

/// kafka-producer-perf-test `--print-metrics`, from a run's document (one process's, or the merge
/// of every agent's). Under Java's producer names
/// (`producer-metrics`) only what means the same over the run: records that failed (the total,
/// and the rate over the measured phase rather than Java's 30 s window). Java's `record-send-*`
/// and `records-per-request-avg` count a record again at each retry, kbench's records count once,
/// so those and the rest are kbench's own, in `kbench-producer-metrics`.
pub fn producer_metrics(doc: &ResultDocument, client_id: &str) -> BTreeMap<String, f64> {
    let secs = doc.duration_s.max(1e-9);
    let mut m = Metrics {
        client_id,
        rows: BTreeMap::new(),
    };
    let java = "producer-metrics";
    m.put(java, "record-error-total", doc.records_failed as f64);
    m.put(java, "record-error-rate", doc.records_failed as f64 / secs);
    let own = KBENCH_PRODUCER;
    m.put(own, "records-sent-total", doc.records_sent as f64);
    m.put(own, "records-sent-rate", doc.records_sent as f64 / secs);
    m.put(own, "records-acked-total", doc.records_acked as f64);
    if doc.produce_requests > 0 {
        let per_request = doc.records_sent as f64 / doc.produce_requests as f64;
        m.put(own, "records-per-produce-request-avg", per_request);
    }
    // Summaries hold µs.
    let ms = |l: &LatencySummary| (l.mean / 1000.0, l.max as f64 / 1000.0);
    let (latency_avg, latency_max) = ms(&doc.latency);
    m.put(own, "record-latency-avg-ms", latency_avg);
    m.put(own, "record-latency-max-ms", latency_max);
    let (service_avg, service_max) = ms(&doc.service_time);
    m.put(own, "record-service-time-avg-ms", service_avg);
    m.put(own, "record-service-time-max-ms", service_max);
    m.put(own, "publish-delay-avg-ms", ms(&doc.publish_delay).0);
    m.put(own, "records-unsent-total", doc.records_unsent as f64);
    m.put(own, "value-bytes-acked-total", doc.bytes_acked as f64);
    m.put(own, "produce-request-total", doc.produce_requests as f64);
    m.put(own, "record-batch-total", doc.record_batches as f64);
    let retries: u64 = doc.cluster.retries.values().sum();
    m.put(own, "attempt-retry-total", retries as f64);
    m.put(
        own,
        "batch-rerouted-total",
        doc.cluster.batches_rerouted as f64,
    );
    m.cluster(own, &doc.cluster);
    m.put(own, "socket-write-total", doc.socket_writes as f64);
    if let Some(cpu) = doc.client_cpu_us_per_record {
        m.put(own, "client-cpu-us-per-record", cpu);
    }
    m.rows
}

/// kafka-consumer-perf-test `--print-metrics`, from a run's document (one process's, or the merge
/// of every agent's). Under Java's names
/// (`consumer-fetch-manager-metrics`) only what means the same: records consumed, Fetch requests
/// and their latency (request sent to answer), records per Fetch — rates and averages over the
/// run rather than Java's 30 s windows. Bytes here are key and value bytes, not Java's fetched
/// bytes, and commits count those that succeeded (Java's every answer): kbench's own.
pub fn consumer_metrics(doc: &ConsumeResultDocument, client_id: &str) -> BTreeMap<String, f64> {
    let secs = doc.duration_s.max(1e-9);
    let records = doc.records_consumed;
    let mut m = Metrics {
        client_id,
        rows: BTreeMap::new(),
    };
    let fetch = "consumer-fetch-manager-metrics";
    m.put(fetch, "records-consumed-total", records as f64);
    m.put(fetch, "records-consumed-rate", records as f64 / secs);
    m.put(fetch, "fetch-total", doc.fetches as f64);
    m.put(fetch, "fetch-rate", doc.fetches as f64 / secs);
    let l = &doc.fetch_latency;
    m.put(fetch, "fetch-latency-avg", l.mean / 1000.0);
    m.put(fetch, "fetch-latency-max", l.max as f64 / 1000.0);
    if doc.fetches > 0 {
        let per_fetch = records as f64 / doc.fetches as f64;
        m.put(fetch, "records-per-request-avg", per_fetch);
    }
    let own = KBENCH_CONSUMER;
    m.put(own, "commits-succeeded-total", doc.commits as f64);
    m.put(
        own,
        "record-bytes-consumed-total",
        doc.bytes_consumed as f64,
    );
    m.put(own, "record-batch-total", doc.record_batches as f64);
    m.put(own, "empty-fetch-total", doc.empty_fetches as f64);
    m.put(own, "rebalance-time-ms", doc.rebalance_time_ms as f64);
    m.cluster(own, &doc.cluster);
    if let Some(cpu) = doc.client_cpu_us_per_record {
        m.put(own, "client-cpu-us-per-record", cpu);
    }
    m.rows
}

/// The subset of Java's `SimpleDateFormat` the tool's `--date-format` is used with: `yyyy`, `MM`,
/// `dd`, `HH`, `mm`, `ss`, `SSS`, and quoted or non-letter literals; times in UTC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DateFormat(Vec<DatePart>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum DatePart {
    Year,
    Month,
    Day,
    Hour,
    Minute,
    Second,
    Millis,
    Literal(String),
}

impl Default for DateFormat {
    fn default() -> Self {
        DateFormat::parse("yyyy-MM-dd HH:mm:ss:SSS").expect("the tool's default format")
    }
}

impl DateFormat {
    pub fn parse(pattern: &str) -> Result<DateFormat, String> {
        let mut parts = Vec::new();
        let chars: Vec<char> = pattern.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c == '\'' {
                let end = chars[i + 1..]
                    .iter()
                    .position(|c| *c == '\'')
                    .ok_or("an unclosed quote")?;
                let lit: String = chars[i + 1..i + 1 + end].iter().collect();
                parts.push(DatePart::Literal(if lit.is_empty() {
                    "'".into()
                } else {
                    lit
                }));
                i += end + 2;
                continue;
            }
            let run = chars[i..].iter().take_while(|x| **x == c).count();
            let part = match (c, run) {
                ('y', 4) => DatePart::Year,
                ('M', 2) => DatePart::Month,
                ('d', 2) => DatePart::Day,
                ('H', 2) => DatePart::Hour,
                ('m', 2) => DatePart::Minute,
                ('s', 2) => DatePart::Second,
                ('S', 3) => DatePart::Millis,
                (c, _) if c.is_ascii_alphabetic() => {
                    return Err(format!(
                        "{:?} is not supported (yyyy, MM, dd, HH, mm, ss and SSS are)",
                        chars[i..i + run].iter().collect::<String>()
                    ));
                }
                (c, n) => DatePart::Literal(std::iter::repeat_n(c, n).collect()),
            };
            parts.push(part);
            i += run;
        }
        Ok(DateFormat(parts))
    }

    pub fn format(&self, t: SystemTime) -> String {
        let ms = t
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let (y, mo, d, h, mi, s, milli) = civil_from_unix_ms(ms);
        let mut out = String::with_capacity(24);
        for p in &self.0 {
            match p {
                DatePart::Year => out.push_str(&format!("{y:04}")),
                DatePart::Month => out.push_str(&format!("{mo:02}")),
                DatePart::Day => out.push_str(&format!("{d:02}")),
                DatePart::Hour => out.push_str(&format!("{h:02}")),
                DatePart::Minute => out.push_str(&format!("{mi:02}")),
                DatePart::Second => out.push_str(&format!("{s:02}")),
                DatePart::Millis => out.push_str(&format!("{milli:03}")),
                DatePart::Literal(l) => out.push_str(l),
            }
        }
        out
    }
}

/// UTC calendar fields of a Unix time in ms (the days-to-civil algorithm of H. Hinnant's
/// `chrono`-compatible date notes).
fn civil_from_unix_ms(ms: i64) -> (i64, u32, u32, u32, u32, u32, u32) {
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    let secs = in_day / 1000;
    (
        y,
        m,
        d,
        (secs / 3600) as u32,
        (secs / 60 % 60) as u32,
        (secs % 60) as u32,
        (in_day % 1000) as u32,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use kbench_bench::CpuTime;
    use kbench_bench::measure::latency_histogram;
    use std::collections::BTreeMap;
    use std::time::Duration;

    #[test]
    fn the_tools_lines_have_its_columns() {
        let date = DateFormat::default();
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        assert_eq!(date.format(t), "2023-11-14 22:13:20:123");
        let run = ConsumeRun {
            records: 1_000_000,
            bytes: 100_000_000,
            batches: 10,
            started_at: t,
            ended_at: t + Duration::from_secs(2),
            elapsed: Duration::from_secs(2),
            join: Duration::from_millis(500),
            cpu: CpuTime::default(),
            peak_rss_kib: 0,
            timeline: Vec::new(),
            fetch_latency: latency_histogram(),
            fetches: 1,
            empty_fetches: 0,
            commits: 0,
            commits_refused: 0,
            timed_out: false,
            aborted: None,
            errors: BTreeMap::new(),
            partitions: BTreeMap::new(),
            member_id: None,
            end_to_end: latency_histogram(),
            verification: None,
            latest_values: None,
            value_decoding: None,
            cluster: Default::default(),
        };
        let line = consumer_final(&run, &date);
        let cols: Vec<&str> = line.split(", ").collect();
        assert_eq!(cols.len(), consumer_header(false).split(", ").count());
        assert_eq!(cols[2], "95.3674");
        assert_eq!(cols[3], "47.6837");
        assert_eq!(cols[4], "1000000");
        assert_eq!(cols[5], "500000.0000");
        assert_eq!(cols[6], "500");
        assert_eq!(cols[7], "1500");
        assert_eq!(cols[9], "666666.6667");
        assert_eq!(DateFormat::parse("HH'h'mm").unwrap().format(t), "22h13");
        assert!(DateFormat::parse("yyyy-MM-dd E").is_err());
    }

    #[test]
    fn the_steady_state_line_is_the_final_line_s_format() {
        let mut latency = latency_histogram();
        latency.record_n(1_000, 3).unwrap();
        latency.record(2_000).unwrap();
        let steady = kbench_bench::produce::phase::SteadyState {
            warmup_records: 10,
            records: 4,
            bytes: 4 * 1024 * 1024,
            elapsed: Duration::from_secs(2),
            latency,
        };
        assert_eq!(
            producer_steady_final(&kbench_bench::result::SteadyStateSummary::of(&steady)),
            "4 steady state records sent, 2.000000 records/sec (2.00 MB/sec), 1.25 ms avg latency, 2.00 ms max latency, 1 ms 50th, 2 ms 95th, 2 ms 99th, 2 ms 99.9th."
        );
    }

    #[test]
    fn the_metrics_table_is_java_s_layout() {
        let mut m = BTreeMap::new();
        m.insert(
            "producer-metrics:record-send-rate:{client-id=c}".to_string(),
            1.5,
        );
        m.insert("a:b:{}".to_string(), 2.0);
        let table = metrics_table(&m);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[0], "");
        assert_eq!(
            lines[1],
            "Metric Name                                       Value"
        );
        assert_eq!(
            lines[2],
            "a:b:{}                                          : 2.000"
        );
        assert_eq!(
            lines[3],
            "producer-metrics:record-send-rate:{client-id=c} : 1.500"
        );
        assert_eq!(metrics_table(&BTreeMap::new()), "");
    }
}
