//! Per-interval series: what a run did in each window of its measured phase (1 s by default), for
//! timelines in reports and HdrHistogram interval logs. Nothing is added to the hot path: a window
//! is the difference between two snapshots of the run's cumulative counters and histograms, taken
//! every interval, so the windows add up to the run exactly. Each window keeps its histograms
//! compressed (V2 + deflate, a few hundred bytes), so an hour of windows stays small.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The interval unless told otherwise.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);

/// One window: when it started (µs since the Unix epoch), how long it lasted, the change of each
/// counter, and each histogram's records in it (compressed).
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    pub start_us: u64,
    pub duration: Duration,
    /// The counters' names, in the order of `counts`.
    pub counters: &'static [&'static str],
    pub counts: Vec<u64>,
    /// `(tag, V2-deflate bytes)` per histogram.
    pub histograms: Vec<(&'static str, Vec<u8>)>,
}

impl Window {
    /// The window's histogram of `tag`.
    pub fn histogram(&self, tag: &str) -> Option<Histogram<u64>> {
        let (_, bytes) = self.histograms.iter().find(|(t, _)| *t == tag)?;
        Deserializer::new().deserialize(&mut bytes.as_slice()).ok()
    }
}

/// Where a run's timeline windows go as they close (live metrics). Not part of a spec's identity:
/// any two are equal, and it is never serialised.
#[derive(Clone, Default)]
pub struct WindowSink(Option<std::sync::Arc<OnWindow>>);

/// What a [`WindowSink`] calls with each window.
type OnWindow = dyn Fn(&Window) + Send + Sync;

impl WindowSink {
    pub fn new(f: impl Fn(&Window) + Send + Sync + 'static) -> WindowSink {
        WindowSink(Some(std::sync::Arc::new(f)))
    }

    /// Both sinks, this one first.
    pub fn and(self, other: WindowSink) -> WindowSink {
        match (self.0, other.0) {
            (None, b) => WindowSink(b),
            (a, None) => WindowSink(a),
            (Some(a), Some(b)) => WindowSink::new(move |w| {
                a(w);
                b(w);
            }),
        }
    }
}

impl std::fmt::Debug for WindowSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "WindowSink(set)"
        } else {
            "WindowSink(none)"
        })
    }
}

impl PartialEq for WindowSink {
    fn eq(&self, _: &WindowSink) -> bool {
        true
    }
}

/// Takes windows from cumulative figures.
pub struct Timeline {
    sink: WindowSink,
    counters: &'static [&'static str],
    tags: &'static [&'static str],
    last_counts: Vec<u64>,
    last_histograms: Vec<Histogram<u64>>,
    last_at: SystemTime,
    windows: Vec<Window>,
    serializer: V2DeflateSerializer,
}

impl Timeline {
    /// A timeline of `counters` and of the histograms `tags`, all zero at `start`.
    pub fn new(
        start: SystemTime,
        counters: &'static [&'static str],
        tags: &'static [&'static str],
    ) -> Timeline {
        Timeline {
            sink: WindowSink::default(),
            counters,
            tags,
            last_counts: vec![0; counters.len()],
            last_histograms: tags
                .iter()
                .map(|_| crate::measure::latency_histogram())
                .collect(),
            last_at: start,
            windows: Vec::new(),
            serializer: V2DeflateSerializer::new(),
        }
    }

    /// Close the window ending `now`, given the cumulative counters and histograms (in the order
    /// named at `new`).
    pub fn take(&mut self, now: SystemTime, counts: &[u64], histograms: Vec<Histogram<u64>>) {
        let mut window = Window {
            start_us: micros(self.last_at),
            duration: now.duration_since(self.last_at).unwrap_or_default(),
            counters: self.counters,
            counts: counts
                .iter()
                .zip(&self.last_counts)
                .map(|(now, before)| now.saturating_sub(*before))
                .collect(),
            histograms: Vec::with_capacity(self.tags.len()),
        };
        for ((tag, total), last) in self.tags.iter().zip(&histograms).zip(&self.last_histograms) {
            let mut delta = total.clone();
            // Cumulative histograms only grow, so the difference is exactly this window's records.
            if delta.subtract(last).is_err() {
                delta.reset();
            }
            let mut bytes = Vec::new();
            if self.serializer.serialize(&delta, &mut bytes).is_err() {
                bytes.clear();
            }
            window.histograms.push((tag, bytes));
        }
        self.last_counts = counts.to_vec();
        self.last_histograms = histograms;
        self.last_at = now;
        if let Some(f) = &self.sink.0 {
            f(&window);
        }
        self.windows.push(window);
    }

    /// Send every window to `sink` as it closes.
    pub fn with_sink(mut self, sink: WindowSink) -> Timeline {
        self.sink = sink;
        self
    }

    pub fn into_windows(self) -> Vec<Window> {
        self.windows
    }
}

/// Several timelines of the same counters and histograms (one per group member, say) as one:
/// window `k` holds every window that began in `[start + k·every, start + (k+1)·every)`, counts
/// added and histograms added exactly.
pub fn merge_by_slot(windows: Vec<Window>, start: SystemTime, every: Duration) -> Vec<Window> {
    let start_us = micros(start);
    let every_us = every.as_micros().max(1) as u64;
    let mut slots: BTreeMap<u64, (Window, Vec<Histogram<u64>>)> = BTreeMap::new();
    for w in windows {
        let k = w.start_us.saturating_sub(start_us) / every_us;
        let hists: Vec<Histogram<u64>> = w
            .histograms
            .iter()
            .map(|(_, bytes)| {
                Deserializer::new()
                    .deserialize(&mut bytes.as_slice())
                    .unwrap_or_else(|_| crate::measure::latency_histogram())
            })
            .collect();
        match slots.get_mut(&k) {
            Some((into, into_hists)) => {
                for (a, b) in into.counts.iter_mut().zip(&w.counts) {
                    *a += b;
                }
                let end = (into.start_us + into.duration.as_micros() as u64)
                    .max(w.start_us + w.duration.as_micros() as u64);
                into.start_us = into.start_us.min(w.start_us);
                into.duration = Duration::from_micros(end - into.start_us);
                for (a, b) in into_hists.iter_mut().zip(&hists) {
                    let _ = a.add(b);
                }
            }
            None => {
                slots.insert(k, (w, hists));
            }
        }
    }
    let mut serializer = V2DeflateSerializer::new();
    slots
        .into_values()
        .map(|(mut w, hists)| {
            for ((_, bytes), h) in w.histograms.iter_mut().zip(&hists) {
                bytes.clear();
                if serializer.serialize(h, bytes).is_err() {
                    bytes.clear();
                }
            }
            w
        })
        .collect()
}

fn micros(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// One window of a result document's `intervals`: when it began (s after the run's start) and how
/// long it lasted, then its figures by name — counters, rates and histograms' percentiles — whose
/// names depend on the workload (`records`, `bytes`, `latency`, …).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub t_s: f64,
    pub duration_s: f64,
    /// A distributed run's merged window: how many agents' windows it adds up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agents: Option<usize>,
    /// The window's histograms whole, by name ([`crate::measure::encode_histogram`]): only in a
    /// distributed segment's result whose coordinator writes `--histogram-log`, so that the merge
    /// can add them exactly ([`with_histograms`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub histograms: BTreeMap<String, String>,
    #[serde(flatten)]
    pub figures: BTreeMap<String, Figure>,
}

/// One figure of a window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Figure {
    /// A counter's change over the window.
    Count(u64),
    /// A rate over the window (`records_per_sec`, `mb_per_sec`).
    Rate(f64),
    /// A histogram's records in the window, µs.
    Latency(WindowLatency),
}

/// A histogram's figures in one window, µs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WindowLatency {
    pub count: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub max: u64,
}

impl Interval {
    /// The counter `name` in this window, if it has one.
    pub fn count(&self, name: &str) -> Option<u64> {
        match self.figures.get(name)? {
            Figure::Count(n) => Some(*n),
            _ => None,
        }
    }

    /// The rate `name` (a counter's figure read as a rate too, as JSON cannot tell them apart).
    pub fn rate(&self, name: &str) -> Option<f64> {
        match self.figures.get(name)? {
            Figure::Rate(r) => Some(*r),
            Figure::Count(n) => Some(*n as f64),
            Figure::Latency(_) => None,
        }
    }

    /// The histogram `name`'s figures in this window.
    pub fn latency(&self, name: &str) -> Option<&WindowLatency> {
        match self.figures.get(name)? {
            Figure::Latency(l) => Some(l),
            _ => None,
        }
    }
}

/// The windows as the result document's `intervals`: each window's offset from `start` and length
/// (s), its counters by name (`bytes` also as MB/s; the first counter also per second), and each
/// histogram's count, p50, p90, p99 and max (µs).
pub fn intervals(start: SystemTime, counters: &[&str], windows: &[Window]) -> Vec<Interval> {
    let start_us = micros(start);
    windows
        .iter()
        .map(|w| {
            let secs = w.duration.as_secs_f64().max(1e-9);
            let mut figures = BTreeMap::new();
            for (name, n) in counters.iter().zip(&w.counts) {
                figures.insert(name.to_string(), Figure::Count(*n));
                if *name == "bytes" || *name == "bytes_consumed" {
                    let mb = *n as f64 / secs / (1024.0 * 1024.0);
                    figures.insert("mb_per_sec".into(), Figure::Rate(mb));
                }
            }
            if let (Some(first), Some(n)) = (counters.first(), w.counts.first()) {
                figures.insert(format!("{first}_per_sec"), Figure::Rate(*n as f64 / secs));
            }
            for (tag, _) in &w.histograms {
                let h = w.histogram(tag);
                let q = |q: f64| {
                    h.as_ref()
                        .filter(|h| !h.is_empty())
                        .map_or(0, |h| h.value_at_quantile(q))
                };
                let latency = WindowLatency {
                    count: h.as_ref().map_or(0, Histogram::len),
                    p50: q(0.5),
                    p90: q(0.9),
                    p99: q(0.99),
                    max: h.as_ref().map_or(0, Histogram::max),
                };
                figures.insert(tag.to_string(), Figure::Latency(latency));
            }
            Interval {
                t_s: (w.start_us.saturating_sub(start_us)) as f64 / 1e6,
                duration_s: w.duration.as_secs_f64(),
                agents: None,
                histograms: BTreeMap::new(),
                figures,
            }
        })
        .collect()
}

/// `intervals` (made by [`intervals`] from `windows`) with each window's histograms kept whole.
pub fn with_histograms(mut intervals: Vec<Interval>, windows: &[Window]) -> Vec<Interval> {
    for (interval, w) in intervals.iter_mut().zip(windows) {
        for (tag, _) in &w.histograms {
            if let Some(h) = w.histogram(tag) {
                interval
                    .histograms
                    .insert(tag.to_string(), crate::measure::encode_histogram(&h));
            }
        }
    }
    intervals
}

/// Write `windows` as an HdrHistogram interval log (format 1.3, as HistogramLogProcessor and
/// HistogramLogAnalyzer read it): the header, `StartTime` (the run's start), the legend, then one
/// line per window and histogram, tagged with the histogram's name; values in µs, the max column
/// in ms. Each histogram is the compressed V2 encoding (cookie `0x1c849314`, DEFLATE), the one the
/// format's `Interval_Compressed_Histogram` column names and Java's `HistogramLogReader`,
/// HistogramLogAnalyzer and HdrHistogram_py read.
pub fn write_interval_log(
    out: &mut impl std::io::Write,
    start: SystemTime,
    windows: &[Window],
) -> std::io::Result<()> {
    let start_us = micros(start);
    let logged = windows.iter().flat_map(|w| {
        let offset = Duration::from_micros(w.start_us.saturating_sub(start_us));
        w.histograms
            .iter()
            .filter_map(move |(tag, _)| Some((offset, w.duration, *tag, w.histogram(tag)?)))
    });
    write_log(out, start, logged)
}

/// The same log from a result's `intervals` whose histograms were kept whole (a distributed run's
/// merged windows, [`Interval::histograms`]); a window without them is left out.
pub fn write_interval_log_of(
    out: &mut impl std::io::Write,
    start: SystemTime,
    intervals: &[Interval],
) -> std::io::Result<()> {
    let logged = intervals.iter().flat_map(|i| {
        let offset = Duration::from_secs_f64(i.t_s.max(0.0));
        let duration = Duration::from_secs_f64(i.duration_s.max(0.0));
        i.histograms.iter().filter_map(move |(tag, text)| {
            Some((
                offset,
                duration,
                tag.as_str(),
                crate::measure::decode_histogram(text)?,
            ))
        })
    });
    write_log(out, start, logged)
}

/// The interval log's header, then one line per (offset from `start`, length, tag, histogram).
fn write_log<'a>(
    out: &mut impl std::io::Write,
    start: SystemTime,
    logged: impl Iterator<Item = (Duration, Duration, &'a str, Histogram<u64>)>,
) -> std::io::Result<()> {
    let start_s = micros(start) as f64 / 1e6;
    writeln!(out, "#[Histogram log format version 1.3]")?;
    writeln!(
        out,
        "#[Written by kbench {}; values in µs]",
        env!("CARGO_PKG_VERSION")
    )?;
    writeln!(out, "#[StartTime: {start_s:.3} (seconds since epoch)]")?;
    writeln!(
        out,
        "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\""
    )?;
    let mut serializer = V2DeflateSerializer::new();
    let mut log = IntervalLogWriterBuilder::new()
        .with_max_value_divisor(1000.0)
        .begin_log_with(out, &mut serializer)?;
    for (offset, duration, tag, h) in logged {
        let tag = Tag::new(tag).ok_or_else(|| std::io::Error::other("bad tag"))?;
        log.write_histogram(&h, offset, duration, Some(tag))
            .map_err(|e| std::io::Error::other(format!("{e:?}")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

    #[test]
    fn windows_add_up_to_the_run_and_the_log_reads_back() {
        let start = SystemTime::now();
        let mut t = Timeline::new(start, &["records"], &["latency"]);
        let mut total = crate::measure::latency_histogram();
        let mut n = 0;
        for (i, values) in [vec![10u64, 20], vec![], vec![5_000, 7, 7, 900_000]]
            .iter()
            .enumerate()
        {
            for v in values {
                total.record(*v).unwrap();
                n += 1;
            }
            t.take(
                start + Duration::from_secs(i as u64 + 1),
                &[n],
                vec![total.clone()],
            );
        }
        let windows = t.into_windows();
        assert_eq!(windows.len(), 3);
        assert_eq!(windows.iter().map(|w| w.counts[0]).sum::<u64>(), 6);
        assert_eq!(windows[1].histogram("latency").unwrap().len(), 0);
        let list = intervals(start, &["records"], &windows);
        assert_eq!(list[2].t_s, 2.0);
        assert_eq!(list[2].latency("latency").unwrap().count, 4);
        let json = serde_json::to_value(&list).unwrap();
        assert_eq!(json[2]["latency"]["count"], 4);
        assert_eq!(json[2]["records"], 4);
        let back: Vec<Interval> = serde_json::from_value(json).unwrap();
        assert_eq!(back, list, "intervals read back as they were written");
        let mut log = Vec::new();
        write_interval_log(&mut log, start, &windows).unwrap();
        let text = String::from_utf8(log.clone()).unwrap();
        assert!(
            text.starts_with("#[Histogram log format version 1.3]\n"),
            "{text}"
        );
        assert!(text.contains("#[StartTime: "), "{text}");
        let mut sum = crate::measure::latency_histogram();
        let mut lines = 0;
        for entry in IntervalLogIterator::new(&log) {
            if let LogEntry::Interval(h) = entry.unwrap() {
                assert_eq!(
                    h.tag().map(|t| t.as_str().to_string()),
                    Some("latency".into())
                );
                let bytes = base64::Engine::decode(
                    &base64::engine::general_purpose::STANDARD,
                    h.encoded_histogram(),
                )
                .unwrap();
                assert_eq!(
                    bytes[..4],
                    0x1c84_9314u32.to_be_bytes(),
                    "the compressed V2 encoding, as the format's readers expect"
                );
                let w: Histogram<u64> = Deserializer::new()
                    .deserialize(&mut bytes.as_slice())
                    .unwrap();
                sum.add(&w).unwrap();
                lines += 1;
            }
        }
        assert_eq!(lines, 3);
        assert_eq!(sum, total, "the windows sum to the run's histogram exactly");
    }
}
