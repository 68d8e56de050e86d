//! Load shapes: a rate that changes over the run. A shape is a list of phases, each with a
//! duration and a rate that is constant or moves linearly from one value to another (a ramp); steps
//! and bursts are phases too. Open loop throughout: record `i`'s intended send time is the instant
//! at which the shape's cumulative count reaches `i`, so latency from the intended time and the
//! publish delay mean what they mean at a constant rate.
//!
//! Front ends build shapes from `--ramp`, `--steps`, `--bursts` or a scenario file (kbench's own
//! YAML, one schema: [`Scenario`]).

use std::time::Duration;

use serde::Deserialize;

use crate::spec::{MAX_DURATION, parse_duration};

/// One phase: `duration` long, the rate moving linearly from `from` to `to` records/s.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Phase {
    #[serde(serialize_with = "secs", deserialize_with = "from_secs")]
    pub duration: Duration,
    pub from: f64,
    pub to: f64,
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

fn from_secs<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = f64::deserialize(d)?;
    Duration::try_from_secs_f64(s).map_err(serde::de::Error::custom)
}

/// A rate over time.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LoadShape {
    pub phases: Vec<Phase>,
}

/// The highest rate a shape may ask for (as `--throughput`).
const MAX_RATE: f64 = 1e9;

impl LoadShape {
    /// Every check: at least one phase, durations above zero, rates finite in 0..=10^9, not
    /// every phase at 0, and the whole no longer than a month.
    pub fn check(&self) -> Result<(), String> {
        if self.phases.is_empty() {
            return Err("no phase".into());
        }
        let mut total = Duration::ZERO;
        for (i, p) in self.phases.iter().enumerate() {
            if p.duration.is_zero() {
                return Err(format!("phase {}: duration must be above zero", i + 1));
            }
            for r in [p.from, p.to] {
                if !r.is_finite() || !(0.0..=MAX_RATE).contains(&r) {
                    return Err(format!(
                        "phase {}: rate {r} is outside 0..={MAX_RATE} records/s",
                        i + 1
                    ));
                }
            }
            total = total.saturating_add(p.duration);
        }
        if total > MAX_DURATION {
            return Err(format!(
                "the phases last {} s, longer than the {} s allowed",
                total.as_secs(),
                MAX_DURATION.as_secs()
            ));
        }
        if self.records() < 1.0 {
            return Err("the phases send no record (every rate is 0)".into());
        }
        Ok(())
    }

    /// The same shape at `factor` times the rate (an agent's share of a distributed run).
    pub fn scaled(&self, factor: f64) -> LoadShape {
        LoadShape {
            phases: self
                .phases
                .iter()
                .map(|p| Phase {
                    from: p.from * factor,
                    to: p.to * factor,
                    ..*p
                })
                .collect(),
        }
    }

    /// How long the shape lasts.
    pub fn duration(&self) -> Duration {
        self.phases.iter().map(|p| p.duration).sum()
    }

    /// Records the shape schedules over its whole length.
    pub fn records(&self) -> f64 {
        self.phases
            .iter()
            .map(|p| (p.from + p.to) / 2.0 * p.duration.as_secs_f64())
            .sum()
    }

    /// The highest rate any phase reaches.
    pub fn peak(&self) -> f64 {
        self.phases
            .iter()
            .map(|p| p.from.max(p.to))
            .fold(0.0, f64::max)
    }

    /// The rate at `t` from the start (0 after the end).
    pub fn rate_at(&self, t: Duration) -> f64 {
        let mut start = Duration::ZERO;
        for p in &self.phases {
            if t < start + p.duration {
                let x = (t - start).as_secs_f64() / p.duration.as_secs_f64();
                return p.from + (p.to - p.from) * x;
            }
            start += p.duration;
        }
        0.0
    }

    /// A schedule: intended send times, record by record.
    pub fn schedule(&self) -> Schedule<'_> {
        Schedule {
            shape: self,
            phase: 0,
            phase_start_s: 0.0,
            phase_start_n: 0.0,
        }
    }

    /// `--ramp FROM..TO/s over DURATION` (also `FROM..TO over DURATION`).
    pub fn parse_ramp(s: &str) -> Result<LoadShape, String> {
        let (rates, over) = s.split_once(" over ").ok_or_else(|| {
            format!("{s:?}: expected FROM..TO/s over DURATION, e.g. 0..100000/s over 60s")
        })?;
        let (from, to) = rates
            .trim()
            .trim_end_matches("/s")
            .split_once("..")
            .ok_or_else(|| format!("{rates:?}: expected FROM..TO/s"))?;
        let shape = LoadShape {
            phases: vec![Phase {
                duration: parse_duration(over)?,
                from: rate(from)?,
                to: rate(to)?,
            }],
        };
        shape.check()?;
        Ok(shape)
    }

    /// `--steps R1,R2,…/s every DURATION`: each rate held for DURATION in turn.
    pub fn parse_steps(s: &str) -> Result<LoadShape, String> {
        let (rates, every) = s.split_once(" every ").ok_or_else(|| {
            format!("{s:?}: expected R1,R2,…/s every DURATION, e.g. 1000,5000,10000/s every 30s")
        })?;
        let duration = parse_duration(every)?;
        let phases = rates
            .trim()
            .trim_end_matches("/s")
            .split(',')
            .map(|r| {
                let r = rate(r)?;
                Ok(Phase {
                    duration,
                    from: r,
                    to: r,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let shape = LoadShape { phases };
        shape.check()?;
        Ok(shape)
    }

    /// `--bursts RATE/s for DURATION every PERIOD` over a base rate for `total`: each period is the
    /// base rate, then the burst for its last DURATION.
    pub fn parse_bursts(s: &str, base: f64, total: Duration) -> Result<LoadShape, String> {
        let bad = || {
            format!(
                "{s:?}: expected RATE/s for DURATION every PERIOD, e.g. 50000/s for 1s every 10s"
            )
        };
        let (burst, rest) = s.split_once(" for ").ok_or_else(bad)?;
        let (length, period) = rest.split_once(" every ").ok_or_else(bad)?;
        let burst = rate(burst.trim().trim_end_matches("/s"))?;
        let (length, period) = (parse_duration(length)?, parse_duration(period)?);
        if length >= period {
            return Err(format!(
                "{s:?}: the burst ({length:?}) must be shorter than its period ({period:?})"
            ));
        }
        if total.is_zero() || total > MAX_DURATION {
            return Err("--bursts needs --duration (the run's length)".into());
        }
        let mut phases = Vec::new();
        let mut left = total;
        while !left.is_zero() {
            let quiet = (period - length).min(left);
            phases.push(Phase {
                duration: quiet,
                from: base,
                to: base,
            });
            left -= quiet;
            let loud = length.min(left);
            if !loud.is_zero() {
                phases.push(Phase {
                    duration: loud,
                    from: burst,
                    to: burst,
                });
                left -= loud;
            }
            if phases.len() > 100_000 {
                return Err(format!(
                    "{s:?}: more than 100000 bursts; use a longer period"
                ));
            }
        }
        let shape = LoadShape { phases };
        shape.check()?;
        Ok(shape)
    }
}

fn rate(s: &str) -> Result<f64, String> {
    s.trim()
        .replace('_', "")
        .parse::<f64>()
        .ok()
        .filter(|r| r.is_finite() && (0.0..=MAX_RATE).contains(r))
        .ok_or_else(|| format!("{:?} is not a rate in 0..={MAX_RATE} records/s", s.trim()))
}

/// Intended send times of records 0, 1, 2, … in order (a cursor over the phases).
pub struct Schedule<'a> {
    shape: &'a LoadShape,
    phase: usize,
    phase_start_s: f64,
    /// Records scheduled before the phase (fractional).
    phase_start_n: f64,
}

impl Schedule<'_> {
    /// When record `i` is due, from the start; `None` once the shape has ended. `i` must not go
    /// down between calls.
    pub fn time_of(&mut self, i: u64) -> Option<Duration> {
        let n = i as f64;
        loop {
            let p = self.shape.phases.get(self.phase)?;
            let d = p.duration.as_secs_f64();
            let in_phase = (p.from + p.to) / 2.0 * d;
            if n < self.phase_start_n + in_phase {
                // Solve from·t + (to − from)/(2d)·t² = n − start for t in [0, d].
                let k = n - self.phase_start_n;
                let b = (p.to - p.from) / d;
                let t = if b.abs() < 1e-12 {
                    k / p.from
                } else {
                    let disc = (p.from * p.from + 2.0 * b * k).max(0.0);
                    (disc.sqrt() - p.from) / b
                };
                return Some(Duration::from_secs_f64(
                    self.phase_start_s + t.clamp(0.0, d),
                ));
            }
            self.phase_start_n += in_phase;
            self.phase_start_s += d;
            self.phase += 1;
        }
    }
}

/// kbench's scenario file: phases in order, each `duration` and either `rate` (constant) or `ramp`
/// (`FROM..TO`), records/s.
///
/// ```yaml
/// phases:
///   - rate: 1000
///     duration: 30s
///   - ramp: 1000..50000
///     duration: 60s
///   - rate: 0          # a pause
///     duration: 5s
/// ```
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub phases: Vec<ScenarioPhase>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioPhase {
    pub duration: String,
    #[serde(default)]
    pub rate: Option<f64>,
    #[serde(default)]
    pub ramp: Option<String>,
}

impl Scenario {
    /// Read and check a scenario file; errors name the field, the phase or the line.
    pub fn read(path: &std::path::Path) -> Result<LoadShape, String> {
        let text = kbench_client::input::read_text(path, kbench_client::input::CONFIG)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn parse(text: &str) -> Result<LoadShape, String> {
        let s: Scenario = crate::yaml::parse(text)?;
        let mut phases = Vec::new();
        for (i, p) in s.phases.iter().enumerate() {
            let n = i + 1;
            let duration =
                parse_duration(&p.duration).map_err(|e| format!("phases[{n}].duration: {e}"))?;
            let (from, to) = match (p.rate, &p.ramp) {
                (Some(r), None) => (r, r),
                (None, Some(ramp)) => {
                    let (a, b) = ramp
                        .trim_end_matches("/s")
                        .split_once("..")
                        .ok_or_else(|| format!("phases[{n}].ramp: {ramp:?}: expected FROM..TO"))?;
                    (
                        rate(a).map_err(|e| format!("phases[{n}].ramp: {e}"))?,
                        rate(b).map_err(|e| format!("phases[{n}].ramp: {e}"))?,
                    )
                }
                _ => {
                    return Err(format!("phases[{n}]: give exactly one of rate or ramp"));
                }
            };
            phases.push(Phase { duration, from, to });
        }
        let shape = LoadShape { phases };
        shape.check()?;
        Ok(shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times(shape: &LoadShape, n: u64) -> Vec<f64> {
        let mut s = shape.schedule();
        (0..n)
            .map_while(|i| s.time_of(i).map(|d| d.as_secs_f64()))
            .collect()
    }

    #[test]
    fn a_constant_phase_is_a_throttle() {
        let shape = LoadShape::parse_steps("1000/s every 2s").unwrap();
        let t = times(&shape, 5000);
        assert_eq!(t.len(), 2000, "2 s at 1000/s, then the shape ends");
        assert!((t[1000] - 1.0).abs() < 1e-9);
    }

    #[test]
    fn a_ramp_schedules_the_integral_of_its_rate() {
        let shape = LoadShape::parse_ramp("0..1000/s over 10s").unwrap();
        assert_eq!(shape.records(), 5000.0);
        let t = times(&shape, 10_000);
        assert_eq!(t.len(), 5000);
        // Half the records by t = sqrt(0.5)·10 s: the rate grows, so they bunch up later.
        assert!((t[2500] - 10.0 * 0.5f64.sqrt()).abs() < 1e-6, "{}", t[2500]);
        assert!(t.windows(2).all(|w| w[0] <= w[1]));
        // Descending too.
        let down = LoadShape::parse_ramp("1000..0/s over 10s").unwrap();
        let t = times(&down, 10_000);
        assert_eq!(t.len(), 5000);
        assert!(t[2500] < 5.0);
    }

    #[test]
    fn steps_pauses_and_bursts() {
        let steps = LoadShape::parse_steps("100,1_000/s every 1s").unwrap();
        let t = times(&steps, 5000);
        assert_eq!(t.len(), 1100);
        assert!((t[100] - 1.0).abs() < 1e-9 && (t[600] - 1.5).abs() < 1e-9);
        let paused = Scenario::parse(
            "phases:\n  - rate: 100\n    duration: 1s\n  - rate: 0\n    duration: 2s\n  - ramp: 100..100\n    duration: 1s\n",
        )
        .unwrap();
        let t = times(&paused, 1000);
        assert_eq!(t.len(), 200);
        assert!((t[100] - 3.0).abs() < 1e-9, "the pause: {}", t[100]);
        let bursts =
            LoadShape::parse_bursts("1000/s for 1s every 5s", 100.0, Duration::from_secs(10))
                .unwrap();
        assert_eq!(bursts.phases.len(), 4);
        assert_eq!(bursts.records(), 2.0 * (400.0 + 1000.0));
        assert_eq!(bursts.rate_at(Duration::from_millis(4500)), 1000.0);
        assert_eq!(bursts.rate_at(Duration::from_millis(5500)), 100.0);
    }

    #[test]
    fn bad_shapes_are_refused_with_a_reason() {
        for bad in [
            "0..100/s",
            "a..b/s over 5s",
            "0..100/s over 0s",
            "-5..100/s over 1s",
            "0..0/s over 5s",
        ] {
            assert!(LoadShape::parse_ramp(bad).is_err(), "{bad}");
        }
        assert!(LoadShape::parse_steps("100,x/s every 1s").is_err());
        assert!(
            LoadShape::parse_bursts("10/s for 5s every 5s", 1.0, Duration::from_secs(10)).is_err()
        );
        let e = Scenario::parse("phases:\n  - rate: 5\n    durations: 1s\n").unwrap_err();
        assert!(
            e.contains("unknown field `durations`") && e.contains("line 3"),
            "{e}"
        );
        let e = Scenario::parse("phases:\n  - rate: 5\n    ramp: 1..2\n    duration: 1s\n")
            .unwrap_err();
        assert!(e.contains("phases[1]"), "{e}");
        let e = Scenario::parse("phases:\n  - rate: 5\n    duration: soon\n").unwrap_err();
        assert!(e.contains("phases[1].duration"), "{e}");
    }
}
