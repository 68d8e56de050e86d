//! Value parsers for clap and the small helpers every subcommand shares (flag names for spec fields,
//! writing a result file). A leaf: it imports nothing else from this crate.

use std::path::Path;
use std::time::Duration;

use kbench_bench::SpecError;
use kbench_bench::spec::Span;
use kbench_wire::Compression;

/// Exit codes shared by every subcommand.
pub const EXIT_FAILED: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_INTERRUPTED: u8 = 130;
/// A distributed run that lost an agent: its result is written, marked degraded.
pub const EXIT_DEGRADED: u8 = 4;
/// `--verify` found records lost, reordered or corrupted (or could not finish reading back).
pub const EXIT_VERIFY: u8 = 5;

/// Spec fields no flag sets, only a client property (`-X`): said as the property the user gave.
const PROPERTY_FIELDS: &[(&str, &str)] = &[("enable_idempotence", "enable.idempotence")];

/// The command-line flag for a spec field: `payload_size` → `--payload-size` (each of a list of
/// fields, `a, b` → `--a, --b`).
pub fn flag(field: &str) -> String {
    field
        .split(", ")
        // A dotted name is a client property (a rule of the producer's settings), said as given.
        .map(|f| {
            if f.contains('.') {
                f.to_string()
            } else if let Some((_, property)) = PROPERTY_FIELDS.iter().find(|(k, _)| *k == f) {
                property.to_string()
            } else {
                format!("--{}", f.replace('_', "-"))
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A spec error said with the flag's name.
pub fn spec_error(e: &SpecError) -> String {
    format!("{}: {}", flag(e.field), e.reason)
}

/// A whole number of at least `MIN` (e.g. repetitions, where medians need enough samples).
pub fn at_least<const MIN: usize>(s: &str) -> Result<usize, String> {
    match s.trim().parse::<i64>() {
        Ok(n) if n >= MIN as i64 => Ok(n as usize),
        _ => Err(format!("must be a whole number of at least {MIN}")),
    }
}

pub fn positive_u64(s: &str) -> Result<u64, String> {
    match s.trim().parse::<i128>() {
        Ok(n) if n > 0 && n <= u64::MAX as i128 => Ok(n as u64),
        Ok(n) if n > 0 => Err(format!("too large (at most {})", u64::MAX)),
        Ok(_) => Err("must be a positive whole number".into()),
        Err(_) => Err("expected a whole number".into()),
    }
}

pub fn positive_usize(s: &str) -> Result<usize, String> {
    positive_u64(s).map(|n| n as usize)
}

pub fn non_negative_u64(s: &str) -> Result<u64, String> {
    match s.trim().parse::<i128>() {
        Ok(n) if (0..=u64::MAX as i128).contains(&n) => Ok(n as u64),
        Ok(n) if n > 0 => Err(format!("too large (at most {})", u64::MAX)),
        Ok(_) => Err("must not be negative".into()),
        Err(_) => Err("expected a whole number".into()),
    }
}

pub fn positive_i32(s: &str) -> Result<i32, String> {
    positive_u64(s).and_then(|n| i32::try_from(n).map_err(|_| "too large".to_string()))
}

pub fn positive_i16(s: &str) -> Result<i16, String> {
    positive_u64(s).and_then(|n| i16::try_from(n).map_err(|_| "too large".to_string()))
}

pub fn non_negative_i32(s: &str) -> Result<i32, String> {
    non_negative_u64(s).and_then(|n| i32::try_from(n).map_err(|_| "too large".to_string()))
}

/// Records per second, or -1 (any negative) for unthrottled, as kafka-producer-perf-test.
pub fn parse_throughput(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| "expected a number of records/s, or -1".to_string())?;
    if !v.is_finite() || v == 0.0 {
        return Err("must be a positive number of records/s, or -1 for unthrottled".into());
    }
    Ok(v)
}

/// A finite, non-negative fraction (a noise threshold, a tolerance): NaN and infinities are refused,
/// since a verdict compared against them would mean nothing.
pub fn fraction(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        Ok(v) => Err(format!("{v} is not a finite, non-negative number")),
        Err(_) => Err("expected a number such as 0.15".into()),
    }
}

/// A topic config, KEY=VALUE.
pub fn topic_config(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
        _ => Err(format!(
            "{s:?} is not KEY=VALUE (e.g. cleanup.policy=compact)"
        )),
    }
}

/// A share from 0 to 1 (an abort rate, a tombstone share).
pub fn share(s: &str) -> Result<f64, String> {
    match fraction(s)? {
        v if v <= 1.0 => Ok(v),
        v => Err(format!("{v} is more than 1: expected a share from 0 to 1")),
    }
}

pub fn parse_acks(s: &str) -> Result<kbench_client::Acks, String> {
    s.parse()
}

pub fn parse_compression(s: &str) -> Result<Compression, String> {
    s.parse()
}

/// A duration such as `10s`, `500ms` or `2m`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    kbench_bench::spec::parse_duration(s)
}

/// A positive interval: whole milliseconds (`5000`) or a duration (`5s`).
pub fn parse_interval_ms(s: &str) -> Result<Duration, String> {
    let d = match s.trim().parse::<u64>() {
        Ok(ms) => Duration::from_millis(ms),
        Err(_) => parse_duration(s)?,
    };
    if d.is_zero() {
        return Err("must be greater than zero".into());
    }
    Ok(d)
}

/// `100..200ms`, `1..2s`, `100ms`, `100` (ms).
pub fn parse_interval_span(s: &str) -> Result<Span<u64>, String> {
    kbench_bench::spec::parse_interval_span(s)
}

/// A range of whole numbers of at least 1: `4`, `1..10`.
pub fn parse_count_span(s: &str) -> Result<Span<usize>, String> {
    kbench_bench::spec::parse_positive_span(s)
}

/// Exit code of a run that met every other expectation but failed a `--slo` condition.
pub const EXIT_SLO: u8 = 3;

/// Overwrite `field` when the flag (or body field) was given.
pub fn set<T>(field: &mut T, given: Option<T>) {
    if let Some(v) = given {
        *field = v;
    }
}

/// Where a run's figures go besides the terminal (produce, consume, e2e): the result document,
/// the timeline's windows, the HdrHistogram interval log.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct OutputArgs {
    /// Write the result document (docs/results.md) to this file.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,

    /// The length of the result's timeline windows (`intervals`, --histogram-log); default 1s.
    #[arg(long, value_parser = parse_duration)]
    pub timeline_interval: Option<Duration>,

    /// Write an HdrHistogram interval log (format 1.3: HistogramLogProcessor, HistogramLogAnalyzer
    /// and HdrHistogram_py read it): one line per timeline window and histogram of the workload
    /// (µs; docs/results.md names them).
    #[arg(long, value_name = "FILE")]
    pub histogram_log: Option<std::path::PathBuf>,

    /// `--store DB`, `--build-label`, `--target-label`: the result kept in the results store.
    #[command(flatten)]
    pub store: crate::store::StoreArgs,
}

impl OutputArgs {
    /// The files, checked before any load (see [`check_outputs`]).
    pub fn check(&self) -> Result<(), String> {
        check_outputs(&[
            ("--json", self.json.as_deref()),
            ("--histogram-log", self.histogram_log.as_deref()),
        ])?;
        self.store.check()
    }

    /// The interval log, when asked for.
    pub fn write_histogram_log(
        &self,
        start: std::time::SystemTime,
        windows: &[kbench_bench::timeline::Window],
    ) -> Result<(), crate::harness::CliError> {
        if let Some(path) = &self.histogram_log {
            write_histogram_log(path, start, windows)
                .map_err(|e| crate::harness::CliError::failed(format!("--histogram-log {e}")))?;
            eprintln!("kbench: wrote {}", path.display());
        }
        Ok(())
    }

    /// The interval log of a distributed run, from its merged windows (each agent's histograms
    /// added up exactly), when asked for; the histograms are then taken out of the windows, which
    /// the result document keeps as a single run's are.
    pub fn write_merged_histogram_log(
        &self,
        start_time: &str,
        intervals: &mut [kbench_bench::timeline::Interval],
    ) -> Result<(), crate::harness::CliError> {
        if let Some(path) = &self.histogram_log {
            let start = humantime::parse_rfc3339(start_time).map_err(|e| {
                crate::harness::CliError::failed(format!(
                    "--histogram-log: the merged start time {start_time:?}: {e}"
                ))
            })?;
            write_atomic(path, |out| {
                kbench_bench::timeline::write_interval_log_of(out, start, intervals)
            })
            .map_err(|e| crate::harness::CliError::failed(format!("--histogram-log {e}")))?;
            eprintln!("kbench: wrote {}", path.display());
        }
        for i in intervals {
            i.histograms.clear();
        }
        Ok(())
    }

    /// The result document, when asked for.
    pub fn write_json<T: serde::Serialize>(&self, doc: &T) -> Result<(), crate::harness::CliError> {
        if let Some(path) = &self.json {
            write_json(path, doc)
                .map_err(|e| crate::harness::CliError::failed(format!("--json {e}")))?;
            eprintln!("kbench: wrote {}", path.display());
        }
        self.store.keep(doc)
    }
}

/// `--pin`: API versions held for the whole run.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PinArgs {
    /// Pin API versions, e.g. produce=7,fetch=12 (Kafka API names, case-insensitive; the APIs the
    /// workload sends).
    #[arg(long, value_name = "API=VERSION[,…]")]
    pub pin: Vec<String>,
}

impl PinArgs {
    /// The pins, each an API of `apis`.
    pub fn pins(&self, apis: &[kbench_wire::ApiKey]) -> Result<kbench_wire::Pins, String> {
        let mut pins = kbench_wire::Pins::default();
        for p in &self.pin {
            pins.extend_from(p).map_err(|e| e.to_string())?;
        }
        pins.only(apis).map_err(|e| e.to_string())?;
        Ok(pins)
    }
}

/// `--slo`: the conditions a run must meet.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SloArgs {
    /// Conditions the run must meet, e.g. 'p99<20ms,records_per_sec>=500000,failed==0' (p99:
    /// the workload's headline latency; docs/results.md): a table after the run, and exit code 3
    /// when one fails.
    #[arg(long, value_name = "CONDITIONS")]
    pub slo: Option<String>,
}

impl SloArgs {
    /// The conditions, checked against `kind`'s document before anything runs.
    pub fn conditions(
        &self,
        kind: &str,
    ) -> Result<Option<Vec<kbench_bench::slo::Condition>>, String> {
        parse_slo(self.slo.as_deref(), kind)
    }
}

/// `--slo`, checked against the workload before anything runs.
pub fn parse_slo(
    text: Option<&str>,
    kind: &str,
) -> Result<Option<Vec<kbench_bench::slo::Condition>>, String> {
    text.map(|t| kbench_bench::slo::parse(t, kind).map_err(|e| format!("--slo {e}")))
        .transpose()
}

/// The result document with the `--slo` checks in it (`slo`), the table printed, and whether
/// every condition held (true without `--slo`).
pub fn check_slo<T: serde::Serialize>(
    conditions: Option<&[kbench_bench::slo::Condition]>,
    doc: &T,
) -> (serde_json::Value, bool) {
    let mut value = serde_json::to_value(doc).unwrap_or(serde_json::Value::Null);
    let Some(conditions) = conditions else {
        return (value, true);
    };
    let checks = kbench_bench::slo::evaluate(conditions, &value);
    println!();
    print!("{}", kbench_bench::slo::table(&checks));
    let passed = checks.iter().all(|c| c.passed);
    if let Some(map) = value.as_object_mut() {
        map.insert(
            "slo".into(),
            serde_json::json!({"passed": passed, "checks": checks}),
        );
    }
    (value, passed)
}

/// The files a run will write, checked before any load so that a run is never lost to its
/// output path: each can be written where it is named (not a folder; its folder made, a file
/// creatable in it), and no two flags name the same file. `outputs`: (flag, path given).
pub fn check_outputs(outputs: &[(&str, Option<&Path>)]) -> Result<(), String> {
    let mut seen: Vec<(&str, std::path::PathBuf)> = Vec::new();
    for (flag, path) in outputs {
        let Some(path) = path else { continue };
        if path.as_os_str().is_empty() {
            return Err(format!("{flag}: an empty path"));
        }
        if path.is_dir() {
            return Err(format!(
                "{flag} {}: is a folder; name a file",
                path.display()
            ));
        }
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        if let Some((other, _)) = seen.iter().find(|(_, p)| *p == absolute) {
            return Err(format!(
                "{other} and {flag} both name {}: one would overwrite the other",
                path.display()
            ));
        }
        let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
            Some(d) => d.to_path_buf(),
            None => std::path::PathBuf::from("."),
        };
        std::fs::create_dir_all(&dir).map_err(|e| {
            format!(
                "{flag} {}: cannot create {}: {e}",
                path.display(),
                dir.display()
            )
        })?;
        let probe = temp_beside(path);
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&probe)
            .map_err(|e| {
                // What failed is making a file in the folder (a result is written beside its
                // path, then moved into place): said so, or /proc's "No such file" reads as
                // if the path were missing.
                format!(
                    "{flag} {}: cannot write there: no file can be made in {} (a result is written beside its path, then moved into place): {e}",
                    path.display(),
                    dir.display()
                )
            })?;
        let _ = std::fs::remove_file(&probe);
        seen.push((flag, absolute));
    }
    Ok(())
}

/// A hidden file beside `path` in its folder, unique to this process and call.
fn temp_beside(path: &Path) -> std::path::PathBuf {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    path.with_file_name(format!(".{name}.kbench-{}-{n}.tmp", std::process::id()))
}

/// Write `path` whole or not at all: into a file beside it, then renamed over it, so a reader
/// (or a run interrupted mid-write) never sees half a document. Creates its folder.
pub fn write_atomic(
    path: &Path,
    write: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>,
) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let temp = temp_beside(path);
    let written = (|| {
        let mut out = std::io::BufWriter::new(std::fs::File::create(&temp)?);
        write(&mut out)?;
        std::io::Write::flush(&mut out)?;
        drop(out);
        std::fs::rename(&temp, path)
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        format!("{}: {e}", path.display())
    })
}

/// Write a run's timeline as an HdrHistogram interval log (atomically), creating its folder.
pub fn write_histogram_log(
    path: &Path,
    start: std::time::SystemTime,
    windows: &[kbench_bench::timeline::Window],
) -> Result<(), String> {
    write_atomic(path, |out| {
        kbench_bench::timeline::write_interval_log(out, start, windows)
    })
}

/// Write a result document as pretty JSON (atomically), creating its folder.
pub fn write_json<T: serde::Serialize>(path: &Path, doc: &T) -> Result<(), String> {
    let text = serde_json::to_string_pretty(doc).map_err(|e| format!("{}: {e}", path.display()))?;
    write_atomic(path, |out| {
        std::io::Write::write_all(out, text.as_bytes())?;
        std::io::Write::write_all(out, b"\n")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_and_counts_parse() {
        assert_eq!(parse_interval_ms("5000").unwrap(), Duration::from_secs(5));
        assert!(parse_interval_ms("0").is_err());
        assert!(positive_u64("-5").unwrap_err().contains("positive"));
        assert!(parse_throughput("0").is_err());
        assert_eq!(parse_throughput("-1").unwrap(), -1.0);
        assert_eq!(flag("payload_size"), "--payload-size");
        assert_eq!(
            flag("record_size, batch_size"),
            "--record-size, --batch-size"
        );
        assert_eq!(
            flag("max.in.flight.requests.per.connection"),
            "max.in.flight.requests.per.connection"
        );
        assert_eq!(fraction("0.15"), Ok(0.15));
        for bad in ["NaN", "inf", "-0.1", "x"] {
            assert!(fraction(bad).is_err(), "{bad}");
        }
    }
}

/// A size in bytes: `1048576`, `16MiB`, `512KiB`, `4GiB` (binary), or `1MB`, `2GB` (decimal).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        other => {
            return Err(format!(
                "unknown size unit {other:?} (use B, KiB, MiB, GiB, KB, MB, GB)"
            ));
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{s:?} is not a size (e.g. 16MiB, 1048576)"))?;
    let bytes = value * factor as f64;
    if !bytes.is_finite() || !(1.0..=u64::MAX as f64 / 2.0).contains(&bytes) {
        return Err(format!("{s:?} is outside 1 B..8 EiB"));
    }
    Ok(bytes as u64)
}

/// The limits a run's spec is checked against (`validate()`), for every workload that sends.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Limits")]
pub struct LimitArgs {
    /// Largest record value kbench will build (default 16MiB): a bigger one is refused before any
    /// load, as no broker's default `message.max.bytes` takes it. Sizes: 1048576, 16MiB, 1GB.
    #[arg(long, value_parser = parse_size)]
    pub max_record_size: Option<u64>,

    /// Most memory a run's buffers may hold at once (producers × requests in flight × batch bytes,
    /// plus the consumer's fetch buffers); default half this machine's memory.
    #[arg(long, value_parser = parse_size)]
    pub memory_budget: Option<u64>,
}

impl LimitArgs {
    pub fn limits(&self) -> kbench_bench::spec::Limits {
        let mut limits = kbench_bench::spec::Limits::default();
        if let Some(m) = self.max_record_size {
            limits.max_record_bytes = usize::try_from(m).unwrap_or(usize::MAX);
        }
        if let Some(b) = self.memory_budget {
            limits.memory_budget_bytes = b;
        }
        limits
    }
}

/// A properties file as the Kafka tools read them (`--producer.config`, `--command-config`):
/// `java.util.Properties` syntax (`kbench_client::config::parse_properties`), at most 1 MiB. Text
/// that is not UTF-8 is read as ISO-8859-1, as `Properties.load(InputStream)` reads every file.
pub fn read_properties_file(path: &Path) -> Result<Vec<(String, String)>, String> {
    let bytes = kbench_client::input::read(path, kbench_client::input::PROPERTIES)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let text = String::from_utf8(bytes)
        .unwrap_or_else(|e| e.into_bytes().iter().map(|&b| b as char).collect());
    kbench_client::config::parse_properties(&text)
        .map_err(|e| format!("{} line {}: {}", path.display(), e.line, e.what))
}

/// Client properties from properties files first, then the `(flag, key=value…)` lists in order, each
/// handed to `apply` with where it came from; the pairs as given (for the result, secrets masked
/// there). An error names the file or flag and the key, never a secret's value.
pub fn client_properties(
    files: &[std::path::PathBuf],
    lists: &[(&str, &[String])],
    mut apply: impl FnMut(&str, &str, &str) -> Result<(), kbench_client::PropertyError>,
) -> Result<Vec<(String, String)>, String> {
    let mut given = Vec::new();
    let mut take = |source: &str, k: &str, v: &str| -> Result<(), String> {
        apply(source, k, v).map_err(|e| e.to_string())?;
        given.push((k.to_string(), v.to_string()));
        Ok(())
    };
    for f in files {
        let source = f.display().to_string();
        for (k, v) in read_properties_file(f)? {
            take(&source, &k, &v)?;
        }
    }
    for (flag, kvs) in lists {
        for kv in kvs.iter() {
            let (k, v) = kbench_client::split_property(flag, kv).map_err(|e| e.to_string())?;
            take(flag, k, v)?;
        }
    }
    Ok(given)
}

/// The connection and security properties of a command that takes only those (e2e, sweep, serve):
/// `--command-config` files, then `-X` pairs.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConnectionArgs {
    /// Connection and security property, Java or librdkafka name (repeatable):
    /// -X security.protocol=SSL -X ssl.ca.location=ca.pem
    #[arg(short = 'X', value_name = "KEY=VALUE")]
    pub property: Vec<String>,

    /// A properties file with connection and security properties, as the Kafka tools take it;
    /// -X overrides it. Repeatable.
    #[arg(
        long = "command-config",
        visible_aliases = ["producer.config", "consumer.config"],
        value_name = "FILE"
    )]
    pub command_config: Vec<std::path::PathBuf>,
}

impl ConnectionArgs {
    /// The settings: checked, TLS built.
    pub fn settings(&self) -> Result<kbench_client::ConnectionSettings, String> {
        self.read().map(|(s, _)| s)
    }

    /// The properties as given (files first, then `-X`), checked: what an agent is sent.
    pub fn pairs(&self) -> Result<Vec<(String, String)>, String> {
        self.read().map(|(_, given)| given)
    }

    fn read(&self) -> Result<(kbench_client::ConnectionSettings, Vec<(String, String)>), String> {
        let mut settings = kbench_client::ConnectionSettings::default();
        let given = client_properties(
            &self.command_config,
            &[("-X", &self.property)],
            |source, k, v| {
                if settings.apply(source, k, v)? {
                    Ok(())
                } else {
                    Err(kbench_client::PropertyError::Setup {
                        key: format!("{source} {k}"),
                        reason: "not a connection or security property; use this command's own flag for it".into(),
                    })
                }
            },
        )?;
        settings.finish().map_err(|e| e.to_string())?;
        Ok((settings, given))
    }

    /// Take out the `-X` pairs that are Confluent serializer properties (`schema.registry.url`,
    /// `basic.auth.user.info`, …: [`kbench_client::is_serializer_property`]), for a command that
    /// reads schema-encoded values; the rest stay connection properties.
    pub fn take_serializer(
        &mut self,
    ) -> Result<std::collections::BTreeMap<String, String>, String> {
        let mut taken = std::collections::BTreeMap::new();
        let mut kept = Vec::with_capacity(self.property.len());
        for kv in std::mem::take(&mut self.property) {
            let (k, v) = kbench_client::split_property("-X", &kv).map_err(|e| e.to_string())?;
            if kbench_client::is_serializer_property(k) {
                taken.insert(k.to_string(), v.to_string());
            } else {
                kept.push(kv);
            }
        }
        self.property = kept;
        Ok(taken)
    }

    /// The arguments as a log line may show them: secret values masked.
    pub fn shown_args(&self) -> Vec<String> {
        self.as_args()
            .into_iter()
            .map(|a| match a.split_once('=') {
                Some((k, _)) if kbench_client::is_secret(k) => format!("{k}=***"),
                _ => a,
            })
            .collect()
    }

    /// The same properties again as command-line arguments (for a child process).
    pub fn as_args(&self) -> Vec<String> {
        let files = self
            .command_config
            .iter()
            .flat_map(|f| ["--command-config".to_string(), f.display().to_string()]);
        let props = self
            .property
            .iter()
            .flat_map(|p| ["-X".to_string(), p.clone()]);
        files.chain(props).collect()
    }
}

/// `--value-template FILE`: its name and text (JSON documents, read as a payload file is).
pub fn read_template(path: Option<&std::path::Path>) -> Result<Option<(String, String)>, String> {
    let Some(path) = path else {
        return Ok(None);
    };
    let name = path.display().to_string();
    let bytes = kbench_client::input::read(path, kbench_client::input::PAYLOAD)
        .map_err(|e| format!("--value-template {name}: {e}"))?;
    let text =
        String::from_utf8(bytes).map_err(|_| format!("--value-template {name}: not UTF-8 text"))?;
    Ok(Some((name, text)))
}

/// `--schema-hint FIELD=KIND:SPEC`: the field and the hint (checked against the schema later).
pub fn parse_schema_hint(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((field, hint)) if !field.trim().is_empty() && hint.contains(':') => {
            Ok((field.trim().to_string(), hint.trim().to_string()))
        }
        _ => Err("FIELD=KIND:SPEC (name=length:3..12, age=range:18..99, colour=values:RED,BLUE, tags=size:0..3)".into()),
    }
}

/// The flags that shape `--value-schema`'s values, one declaration for produce, e2e and omb.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SchemaValueArgs {
    /// With a .proto --value-schema: the message to generate, by its full or short name (default:
    /// the file's first message).
    #[arg(long, value_name = "NAME", requires = "value_schema")]
    pub value_message: Option<String>,

    /// Records from this file of JSON documents (JSON Lines, or one JSON array) encoded with
    /// --value-schema, in place of generated values; each record takes one at random. Avro takes
    /// plain JSON or Avro's JSON encoding (unions as {"type": value}), Protobuf its JSON mapping.
    #[arg(
        long,
        value_name = "FILE",
        requires = "value_schema",
        conflicts_with = "schema_values"
    )]
    pub value_template: Option<std::path::PathBuf>,

    /// With a .proto --value-schema, what the file cannot say of a field (repeatable):
    /// FIELD=length:MIN..MAX (string, bytes), FIELD=range:MIN..MAX (numbers),
    /// FIELD=values:A,B,C (strings, numbers, enum names), FIELD=size:MIN..MAX (repeated, map);
    /// FIELD is Message.field or package.Message.field.
    #[arg(long, value_name = "FIELD=HINT", requires = "value_schema", conflicts_with = "value_template", value_parser = parse_schema_hint)]
    pub schema_hint: Vec<(String, String)>,

    /// How many distinct values --value-schema generates before the load (default 1000); each
    /// record takes one at random.
    #[arg(long, value_name = "N", requires = "value_schema")]
    pub schema_values: Option<usize>,
}

impl SchemaValueArgs {
    /// `--value-schema FILE` read, with these flags, for `topic`: what `schema::prepare` takes
    /// (the registry and the serializer's properties are checked there).
    pub fn value_spec(
        &self,
        path: &std::path::Path,
        topic: &str,
        serializer: std::collections::BTreeMap<String, String>,
        seed: u64,
    ) -> Result<kbench_bench::schema::ValueSchemaSpec, String> {
        let file = path.display().to_string();
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("--value-schema {file}: {e}"))?;
        Ok(kbench_bench::schema::ValueSchemaSpec {
            file,
            text,
            topic: topic.to_string(),
            serializer,
            pool: self
                .schema_values
                .unwrap_or(kbench_bench::schema::DEFAULT_POOL),
            seed,
            message: self.value_message.clone(),
            role: kbench_bench::schema::Role::Value,
            template: read_template(self.value_template.as_deref())?,
            hints: self.schema_hint.clone(),
        })
    }
}
