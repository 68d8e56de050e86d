//! What every workload spec shares: the value syntax front ends accept (durations `10s`, inclusive
//! ranges `5..50ms`, bootstrap lists), fresh ids and seeds, and the checks every spec's `validate()`
//! makes the same way (Kafka's topic-name rules). Parsers return the reason as text; the caller names
//! the flag or field.

use std::time::Duration;

use crate::error::SpecError;

/// An inclusive range drawn from uniformly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Span<T> {
    pub min: T,
    pub max: T,
}

impl<T: Copy> Span<T> {
    pub fn fixed(v: T) -> Span<T> {
        Span { min: v, max: v }
    }
}

impl<T: Copy + PartialOrd + rand::distr::uniform::SampleUniform> Span<T> {
    /// A value drawn uniformly from the range.
    pub(crate) fn draw(&self, rng: &mut rand::rngs::SmallRng) -> T {
        use rand::Rng as _;
        if self.min >= self.max {
            self.min
        } else {
            rng.random_range(self.min..=self.max)
        }
    }
}

/// The largest record value a run sends unless told otherwise: far above what brokers accept by
/// default (Kafka's `message.max.bytes` is 1 MiB), far below what exhausts a machine.
pub const DEFAULT_MAX_RECORD_BYTES: usize = 16 * 1024 * 1024;
/// The most partitions kbench creates a topic with.
pub const MAX_PARTITIONS: i32 = 10_000;
/// The longest duration any setting may have (a month): longer is a typo, and overflows clocks.
pub const MAX_DURATION: Duration = Duration::from_secs(31 * 24 * 3600);
/// The longest a single wait (a Fetch wait, a batch interval, a drain) may be.
pub const MAX_WAIT: Duration = Duration::from_secs(3600);

/// What a run may use: the largest record, and the memory its buffers may hold at once. Checked by
/// every spec's `validate()`, so that the CLI, `/v1`, `/pub-sub-demo` (and workload files and agents
/// later) refuse the same runs.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Limits {
    pub max_record_bytes: usize,
    pub memory_budget_bytes: u64,
}

/// A size in MiB, or in KiB below one MiB (so that a small budget does not read as 0 MiB).
fn binary_size(bytes: u128) -> String {
    if bytes >= 1 << 20 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}

impl Default for Limits {
    /// 16 MiB records; half of this machine's memory.
    fn default() -> Self {
        Limits {
            max_record_bytes: DEFAULT_MAX_RECORD_BYTES,
            memory_budget_bytes: machine_memory_bytes() / 2,
        }
    }
}

impl Limits {
    /// `Err` naming `fields` when `needed` bytes exceed the memory budget.
    pub fn check_memory(&self, fields: &'static str, needed: u128) -> Result<(), SpecError> {
        if needed > u128::from(self.memory_budget_bytes) {
            return Err(SpecError::new(
                fields,
                format!(
                    "would hold about {} at once, above the memory budget of {} (half this machine's memory unless set)",
                    binary_size(needed),
                    binary_size(u128::from(self.memory_budget_bytes))
                ),
            ));
        }
        Ok(())
    }
}

/// This machine's memory (`MemTotal` in /proc/meminfo); 8 GiB where it cannot be read.
pub fn machine_memory_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(8 << 30, |kib| kib * 1024)
}

/// `Err` naming `field` unless `d` is at most `max`.
pub fn check_duration(field: &'static str, d: Duration, max: Duration) -> Result<(), SpecError> {
    if d > max {
        return Err(SpecError::new(
            field,
            format!(
                "{} s is longer than the {} s allowed",
                d.as_secs(),
                max.as_secs()
            ),
        ));
    }
    Ok(())
}

/// A seed for a run when none was given: the clock and the process id. It is printed and stored.
pub fn random_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    t ^ (u64::from(std::process::id()) << 32)
}

/// A fresh id with a prefix, e.g. `kbench-e2e-1f0c…`.
pub fn fresh_id(prefix: &str) -> String {
    format!("{prefix}-{:016x}", random_seed())
}

/// A duration such as `10s`, `500ms` or `2m`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim())
        .map_err(|e| format!("expected a duration such as 10s, 500ms or 2m ({e})"))
}

fn split_span(s: &str) -> (&str, &str) {
    match s.split_once("..") {
        Some((a, b)) => (a.trim(), b.trim()),
        None => (s.trim(), s.trim()),
    }
}

fn ordered<T: PartialOrd + std::fmt::Display + Copy>(min: T, max: T) -> Result<Span<T>, String> {
    if min > max {
        return Err(format!("minimum {min} is larger than maximum {max}"));
    }
    Ok(Span { min, max })
}

/// Milliseconds, as a range: `100..200ms`, `1..2s`, `100ms`, `100` (ms).
pub fn parse_interval_span(s: &str) -> Result<Span<u64>, String> {
    let s = s.trim();
    let (unit, body) = if let Some(b) = s.strip_suffix("ms") {
        (1, b)
    } else if let Some(b) = s.strip_suffix('s') {
        (1000, b)
    } else {
        (1, s)
    };
    let (a, b) = split_span(body);
    let num = |x: &str| {
        x.parse::<u64>()
            .map_err(|_| format!("{x:?} is not a whole, non-negative number"))
            .and_then(|v| {
                v.checked_mul(unit)
                    .ok_or_else(|| format!("{x:?} is too large"))
            })
    };
    ordered(num(a)?, num(b)?)
}

/// A range of whole numbers of at least 1: `4`, `1..10`.
pub fn parse_positive_span(s: &str) -> Result<Span<usize>, String> {
    let (a, b) = split_span(s);
    let num = |x: &str| match x.parse::<usize>() {
        Ok(0) | Err(_) => Err(format!("{x:?} is not a whole number of at least 1")),
        Ok(v) => Ok(v),
    };
    ordered(num(a)?, num(b)?)
}

/// Split a bootstrap list and check each entry is `host:port`.
pub fn bootstrap_list(s: &str) -> Result<Vec<String>, String> {
    if s.trim().is_empty() {
        return Err("no address given".into());
    }
    let servers: Vec<String> = s.split(',').map(|s| s.trim().to_string()).collect();
    if let Some(i) = servers.iter().position(String::is_empty) {
        return Err(format!(
            "entry {} of the list is empty (a stray comma?)",
            i + 1
        ));
    }
    if servers.iter().any(|s| s.contains('@')) {
        // Not echoed: the part before `@` is a credential.
        return Err(
            "an address with credentials (user:password@) is refused: a Kafka address is host:port, and credentials are never part of it"
                .into(),
        );
    }
    for s in &servers {
        match s.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0) => {}
            Some((host, port)) if !host.is_empty() && port.chars().all(|c| c.is_ascii_digit()) => {
                return Err(format!("{s:?}: port {port} is outside 1..=65535"));
            }
            _ => return Err(format!("{s:?}: expected host:port")),
        }
    }
    Ok(servers)
}

/// Kafka's rules for a topic name: 1 to 249 characters of ASCII letters, digits, `.`, `_` and `-`,
/// and not `.` or `..`.
pub fn check_topic(field: &'static str, topic: &str) -> Result<(), SpecError> {
    let fail = |why: String| Err(SpecError::new(field, why));
    if topic.is_empty() {
        return fail("must not be empty".into());
    }
    if topic.len() > 249 {
        return fail(format!(
            "{} characters; Kafka allows at most 249",
            topic.len()
        ));
    }
    if topic == "." || topic == ".." {
        return fail(format!("{topic:?} is not a legal topic name"));
    }
    if let Some(c) = topic
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return fail(format!(
            "{topic:?}: {c:?} is not allowed (letters, digits, '.', '_' and '-' only)"
        ));
    }
    Ok(())
}

/// `Err` naming `field` unless `v` is a finite number (no NaN, no infinity).
pub fn check_finite(field: &'static str, v: f64) -> Result<(), SpecError> {
    if !v.is_finite() {
        return Err(SpecError::new(field, format!("{v} is not a finite number")));
    }
    Ok(())
}

/// `Err` naming `field` unless `value` lies in `range`.
pub fn check_range<T: PartialOrd + std::fmt::Display>(
    field: &'static str,
    value: T,
    range: std::ops::RangeInclusive<T>,
) -> Result<(), SpecError> {
    if range.contains(&value) {
        return Ok(());
    }
    Err(SpecError::new(
        field,
        format!("{value} is outside {}..={}", range.start(), range.end()),
    ))
}

/// `Err` naming `field` unless `span.min <= span.max`.
pub fn check_span<T: PartialOrd + std::fmt::Display + Copy>(
    field: &'static str,
    span: Span<T>,
) -> Result<(), SpecError> {
    if span.min > span.max {
        return Err(SpecError::new(
            field,
            format!("minimum {} is larger than maximum {}", span.min, span.max),
        ));
    }
    Ok(())
}

/// A producer's settings, as every workload that produces checks them: sizes and waits in range,
/// then the combinations Java refuses (named by their property).
pub fn check_producer(p: &kbench_client::ProducerSettings) -> Result<(), SpecError> {
    check_range("batch_size", p.batch_size, 1..=i32::MAX as usize)?;
    check_range(
        "max_request_size",
        p.max_request_size,
        1..=i32::MAX as usize,
    )?;
    check_range("max_in_flight", p.max_in_flight, 1..=1_000)?;
    check_duration("linger", p.linger, MAX_WAIT)?;
    p.check().map_err(|c| SpecError::new(c.key, c.reason))
}

/// A consumer's settings, as every workload that consumes in a group checks them.
pub fn check_consumer(c: &kbench_client::ConsumerSettings) -> Result<(), SpecError> {
    check_range(
        "fetch_size",
        c.max_partition_fetch_bytes,
        1..=i32::MAX as usize,
    )?;
    check_range("fetch_max_bytes", c.fetch_max_bytes, 1..=i32::MAX as usize)?;
    check_duration("fetch_max_wait", c.fetch_max_wait, MAX_WAIT)?;
    check_duration("session_timeout", c.session_timeout, MAX_WAIT)?;
    c.check().map_err(|c| SpecError::new(c.key, c.reason))
}

/// How long requests still in flight when producers stop (the duration ended, or a stop was asked)
/// may take to be answered before they are counted failed: a dead or swamped broker must not hold a
/// run until the delivery timeout.
pub const DURATION_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_spans_parse_with_units() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert!(parse_duration("soon").is_err());
        assert_eq!(
            parse_interval_span("100..100ms").unwrap(),
            Span { min: 100, max: 100 }
        );
        assert_eq!(
            parse_interval_span("1..2s").unwrap(),
            Span {
                min: 1000,
                max: 2000
            }
        );
        assert_eq!(parse_interval_span("5").unwrap(), Span::fixed(5));
        assert!(
            parse_interval_span("200..100ms")
                .unwrap_err()
                .contains("larger")
        );
        assert!(parse_interval_span("-1..5ms").is_err());
        assert_eq!(
            parse_positive_span("1..10").unwrap(),
            Span { min: 1, max: 10 }
        );
        assert!(parse_positive_span("0").is_err());
        assert!(parse_positive_span("x..3").is_err());
    }

    #[test]
    fn bootstrap_lists_need_host_and_port() {
        assert_eq!(
            bootstrap_list("a:1, b:2").unwrap(),
            vec!["a:1".to_string(), "b:2".to_string()]
        );
        assert!(bootstrap_list("nohost").is_err());
        assert!(bootstrap_list("h:99999").is_err());
        assert!(bootstrap_list(" , ").is_err());
        let e = bootstrap_list("user:hunter2@host:9092").unwrap_err();
        assert!(!e.contains("hunter2"), "{e}");
    }

    #[test]
    fn budgets_durations_and_numbers_are_checked() {
        let limits = Limits {
            max_record_bytes: 1024,
            memory_budget_bytes: 1 << 20,
        };
        assert!(limits.check_memory("x", 1 << 20).is_ok());
        let e = limits
            .check_memory("producers, payload_size", (1 << 20) + 1)
            .unwrap_err();
        assert_eq!(e.field, "producers, payload_size");
        assert!(e.reason.contains("memory budget of 1 MiB"), "{}", e.reason);
        assert!(check_duration("d", MAX_WAIT, MAX_WAIT).is_ok());
        assert!(check_duration("d", MAX_WAIT + Duration::from_secs(1), MAX_WAIT).is_err());
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(check_finite("t", bad).is_err());
        }
        assert!(machine_memory_bytes() > 0);
    }

    #[test]
    fn topic_names_follow_kafkas_rules() {
        assert!(check_topic("topic", "kbench-perf_1.x").is_ok());
        for bad in ["", ".", "..", "a b", "ü", &"x".repeat(250)] {
            let e = check_topic("topic", bad).unwrap_err();
            assert_eq!(e.field, "topic", "{bad:?}");
        }
        assert!(check_topic("topic", &"x".repeat(249)).is_ok());
    }
}
