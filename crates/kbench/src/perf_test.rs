//! kafka-producer-perf-test's and kafka-consumer-perf-test's lines, from kbench's figures: the
//! front end's words for what the library measured (the library returns figures, never lines).

use std::time::SystemTime;

use kbench_bench::consume::{ConsumeRun, ConsumeWindow};

/// MiB, the consumer tool's "MB".
const MB: f64 = 1024.0 * 1024.0;

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
            timed_out: false,
            aborted: None,
            errors: BTreeMap::new(),
            partitions: BTreeMap::new(),
            member_id: None,
            end_to_end: latency_histogram(),
            verification: None,
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
}
