//! The changes in a stored series: [`crate::changepoint::detect`] over a metric's runs (each run a
//! distribution of its repetitions), each change named by the run and build it first shows in, its
//! size, its direction for that metric (a regression or an improvement) and its confidence.

use std::time::SystemTime;

use serde::Serialize;

use super::Series;
use crate::changepoint::{self, Options};
use crate::compare::Better;

/// A change in one metric's series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub metric: String,
    /// Index of the first run after the change, in the series (oldest first).
    pub index: usize,
    /// That run: its id, start, and the build it measured.
    pub run_id: i64,
    pub started_at: String,
    pub build_label: Option<String>,
    /// Means of every repetition between the neighbouring changes.
    pub mean_before: f64,
    pub mean_after: f64,
    /// `(after − before) / before` (0 when `before` is 0: read the means).
    pub relative_change: f64,
    /// Worse for this metric (slower, fewer records/s, more errors).
    pub regression: bool,
    pub pvalue: f64,
    /// `1 − pvalue`.
    pub confidence: f64,
}

/// The changes of `series`, oldest first.
pub fn changes(series: &Series, options: &Options) -> Vec<Change> {
    let points: Vec<changepoint::Point> = series
        .points
        .iter()
        .map(|p| changepoint::Point::new(p.samples.clone()))
        .collect();
    changepoint::detect(&points, options)
        .into_iter()
        .filter_map(|c| {
            let run = series.points.get(c.index)?;
            let worse = match series.better {
                Better::Higher => c.mean_after < c.mean_before,
                Better::Lower => c.mean_after > c.mean_before,
            };
            Some(Change {
                metric: series.metric.clone(),
                index: c.index,
                run_id: run.run_id,
                started_at: run.started_at.clone(),
                build_label: run.build_label.clone(),
                mean_before: c.mean_before,
                mean_after: c.mean_after,
                relative_change: c.relative_change,
                regression: worse,
                pvalue: c.pvalue,
                confidence: c.confidence,
            })
        })
        .collect()
}

/// Where `kbench history check --since` starts counting: an instant, or the first run of a build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Since {
    /// A date (`2026-12-01`, midnight UTC) or an RFC 3339 time.
    Time(SystemTime),
    /// A build label, as runs record it (`--build-label`, the git commit by default).
    Build(String),
}

impl Since {
    /// A date or RFC 3339 time; anything else is taken for a build label.
    pub fn parse(text: &str) -> Since {
        let text = text.trim();
        let date_only = text.len() == 10 && text.as_bytes().get(4) == Some(&b'-');
        let stamp = if date_only {
            format!("{text}T00:00:00Z")
        } else {
            text.to_string()
        };
        match humantime::parse_rfc3339_weak(&stamp) {
            Ok(t) => Since::Time(t),
            Err(_) => Since::Build(text.to_string()),
        }
    }

    /// The instant from which changes count: the time itself, or the earliest start of a run of the
    /// build among `series` (every series read, so that a build missing from one benchmark still
    /// places the others). `None`: no run of that build is stored.
    pub fn start<'a>(&self, series: impl IntoIterator<Item = &'a Series>) -> Option<SystemTime> {
        match self {
            Since::Time(t) => Some(*t),
            Since::Build(label) => series
                .into_iter()
                .flat_map(|s| &s.points)
                .filter(|p| p.build_label.as_deref() == Some(label.as_str()))
                .filter_map(|p| time_of(&p.started_at))
                .min(),
        }
    }
}

/// A stored start time as an instant (`None` if it does not read as RFC 3339).
pub fn time_of(started_at: &str) -> Option<SystemTime> {
    humantime::parse_rfc3339_weak(started_at).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Point;

    fn series(better: Better, values: &[(f64, &str)]) -> Series {
        Series {
            metric: "records_per_sec".into(),
            better,
            points: values
                .iter()
                .enumerate()
                .map(|(i, (v, build))| Point {
                    run_id: i as i64 + 1,
                    started_at: format!("2026-12-01T00:{:02}:00.000Z", i),
                    build_label: Some(build.to_string()),
                    kbench_version: "0".into(),
                    samples: vec![*v, v * 1.01, v * 0.99],
                })
                .collect(),
        }
    }

    fn step(better: Better) -> Series {
        let mut v: Vec<(f64, &str)> = (0..10).map(|i| (100.0 + (i % 3) as f64, "a")).collect();
        v.extend((0..10).map(|i| (80.0 + (i % 3) as f64, "b")));
        series(better, &v)
    }

    #[test]
    fn a_drop_is_a_regression_where_higher_is_better_and_an_improvement_where_lower_is() {
        let found = changes(&step(Better::Higher), &Options::default());
        assert_eq!(found.len(), 1, "{found:?}");
        let c = &found[0];
        assert_eq!((c.index, c.run_id), (10, 11));
        assert_eq!(c.build_label.as_deref(), Some("b"));
        assert!(c.regression);
        assert!(c.relative_change < -0.15 && c.confidence > 0.999);
        let lower = changes(&step(Better::Lower), &Options::default());
        assert!(!lower[0].regression);
    }

    #[test]
    fn since_reads_dates_times_and_builds() {
        let s = step(Better::Higher);
        let at = |t: &str| Since::parse(t).start([&s]);
        assert_eq!(
            at("2026-12-01"),
            humantime::parse_rfc3339("2026-12-01T00:00:00Z").ok()
        );
        assert_eq!(at("2026-12-01T00:05:00Z"), time_of("2026-12-01T00:05:00Z"));
        assert_eq!(at("b"), time_of("2026-12-01T00:10:00.000Z"));
        assert_eq!(Since::parse("c0ffee"), Since::Build("c0ffee".into()));
        assert_eq!(at("c0ffee"), None);
    }
}
