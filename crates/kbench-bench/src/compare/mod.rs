//! A/B comparison of result documents: per matched cell and metric, the ratio of medians B/A with a
//! 95 % bootstrap confidence interval over the repetitions, and a verdict that refuses to call a
//! difference the noise could explain.
//!
//! The rule: *regression* (or *improvement*) only when the whole confidence interval of the ratio
//! lies beyond `threshold` in the bad (or good) direction; otherwise *inside noise*. (Percentile
//! bootstrap intervals from a handful of repetitions are narrow; asking the whole interval to clear
//! the threshold, not merely to exclude 1, keeps false alarms on pure noise rare.) Fewer than 3 repetitions on a side give *too few repetitions*, never a verdict.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::document::null_as_nan;

use crate::result::Header;

/// Which way is better for a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    Higher,
    Lower,
}

/// The verdict for one cell and metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Regression,
    Improvement,
    InsideNoise,
    TooFewRepetitions,
    /// Every sample on both sides the same value (a count of failures at 0 in every run, say):
    /// nothing to resample, nothing changed.
    Identical,
    /// The baseline's median is 0 and the other side's is not, their samples overlapping: no
    /// ratio to give, and no verdict (samples apart get one, regression or improvement).
    NoRatio,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Regression => "regression",
            Verdict::Improvement => "improvement",
            Verdict::InsideNoise => "inside noise",
            Verdict::TooFewRepetitions => "too few repetitions",
            Verdict::Identical => "identical",
            Verdict::NoRatio => "no ratio (baseline 0)",
        }
    }
}

/// Samples of one metric of one cell, from each side.
#[derive(Debug, Clone, PartialEq)]
pub struct Samples {
    pub cell: String,
    pub metric: String,
    pub better: Better,
    pub a: Vec<f64>,
    pub b: Vec<f64>,
}

/// The comparison of one cell and metric. A figure with no value (no samples, a zero baseline) is
/// NaN here and null in JSON.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Comparison {
    pub cell: String,
    pub metric: String,
    pub better: Better,
    #[serde(deserialize_with = "null_as_nan")]
    pub a_median: f64,
    #[serde(deserialize_with = "null_as_nan")]
    pub b_median: f64,
    #[serde(deserialize_with = "null_as_nan")]
    pub ratio: f64,
    #[serde(deserialize_with = "null_as_nan")]
    pub ci_low: f64,
    #[serde(deserialize_with = "null_as_nan")]
    pub ci_high: f64,
    pub a_repetitions: usize,
    pub b_repetitions: usize,
    pub verdict: Verdict,
}

/// The result document of a comparison (`kind: "compare"`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CompareDocument {
    #[serde(flatten)]
    pub header: Header,
    pub baseline: String,
    pub candidate: String,
    pub threshold: f64,
    pub seed: u64,
    pub rows: Vec<Comparison>,
    pub only_in_baseline: Vec<String>,
    pub only_in_candidate: Vec<String>,
}

/// Fewest repetitions per side for a verdict.
pub const MIN_REPETITIONS: usize = 3;
const RESAMPLES: usize = 2000;

/// The median of `xs` (sorted in place); 0 when empty.
pub fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// The smallest and the largest of `xs`.
fn bounds(xs: &[f64]) -> (f64, f64) {
    xs.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
            (lo.min(*x), hi.max(*x))
        })
}

/// Compare one metric's samples.
pub fn compare(s: &Samples, threshold: f64, seed: u64) -> Comparison {
    let a_median = median(&mut s.a.clone());
    let b_median = median(&mut s.b.clone());
    let ratio = if a_median != 0.0 {
        b_median / a_median
    } else {
        f64::NAN
    };
    let mut out = Comparison {
        cell: s.cell.clone(),
        metric: s.metric.clone(),
        better: s.better,
        a_median,
        b_median,
        ratio,
        ci_low: ratio,
        ci_high: ratio,
        a_repetitions: s.a.len(),
        b_repetitions: s.b.len(),
        verdict: Verdict::TooFewRepetitions,
    };
    if s.a.len() < MIN_REPETITIONS || s.b.len() < MIN_REPETITIONS {
        return out;
    }
    // No spread on either side: identical, or a change (0 against something) that has no ratio.
    if s.a.iter().chain(&s.b).all(|x| *x == s.a[0]) {
        out.ratio = 1.0;
        out.ci_low = 1.0;
        out.ci_high = 1.0;
        out.verdict = Verdict::Identical;
        return out;
    }
    if !ratio.is_finite() {
        // Both medians 0: no shift. A baseline of 0 against something else: called only when
        // the two sides' samples do not overlap (failures at 0 in every run, then in every run).
        let (a_lo, a_hi) = bounds(&s.a);
        let (b_lo, b_hi) = bounds(&s.b);
        out.verdict = if b_median == 0.0 {
            Verdict::InsideNoise
        } else if b_lo > a_hi || b_hi < a_lo {
            let higher = b_lo > a_hi;
            match (higher, s.better) {
                (true, Better::Lower) | (false, Better::Higher) => Verdict::Regression,
                _ => Verdict::Improvement,
            }
        } else {
            Verdict::NoRatio
        };
        return out;
    }
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut ratios = Vec::with_capacity(RESAMPLES);
    let (mut ra, mut rb) = (vec![0.0; s.a.len()], vec![0.0; s.b.len()]);
    for _ in 0..RESAMPLES {
        for x in ra.iter_mut() {
            *x = s.a[rng.random_range(0..s.a.len())];
        }
        for x in rb.iter_mut() {
            *x = s.b[rng.random_range(0..s.b.len())];
        }
        let ma = median(&mut ra);
        if ma != 0.0 {
            ratios.push(median(&mut rb) / ma);
        }
    }
    ratios.sort_by(f64::total_cmp);
    let at = |q: f64| ratios[((ratios.len() - 1) as f64 * q).round() as usize];
    out.ci_low = at(0.025);
    out.ci_high = at(0.975);
    // Express "worse" as ratio > 1 whatever the metric's direction.
    let (worse_lo, worse_hi) = match s.better {
        Better::Lower => (out.ci_low, out.ci_high),
        Better::Higher => (1.0 / out.ci_high, 1.0 / out.ci_low),
    };
    out.verdict = if worse_lo > 1.0 + threshold {
        Verdict::Regression
    } else if worse_hi < 1.0 / (1.0 + threshold) {
        Verdict::Improvement
    } else {
        Verdict::InsideNoise
    };
    out
}

mod cells;

pub use cells::{Cells, DocumentError, cells_of};

#[cfg(test)]
mod tests {
    use super::*;

    fn noisy(center: f64, n: usize, seed: u64) -> Vec<f64> {
        let mut rng = SmallRng::seed_from_u64(seed);
        (0..n)
            .map(|_| center * (1.0 + rng.random_range(-0.02..0.02)))
            .collect()
    }

    fn samples(better: Better, a: Vec<f64>, b: Vec<f64>) -> Samples {
        Samples {
            cell: "c".into(),
            metric: "m".into(),
            better,
            a,
            b,
        }
    }

    #[test]
    fn a_twenty_percent_regression_is_called() {
        // Lower is better and B costs 20 % more.
        let c = compare(
            &samples(Better::Lower, noisy(100.0, 9, 1), noisy(120.0, 9, 2)),
            0.05,
            7,
        );
        assert_eq!(c.verdict, Verdict::Regression, "{c:?}");
        assert!(c.ci_low > 1.1 && c.ci_high < 1.3, "{c:?}");
        // Higher is better and B does 20 % less.
        let c = compare(
            &samples(Better::Higher, noisy(100.0, 9, 1), noisy(80.0, 9, 2)),
            0.05,
            7,
        );
        assert_eq!(c.verdict, Verdict::Regression, "{c:?}");
    }

    #[test]
    fn an_improvement_is_called() {
        let c = compare(
            &samples(Better::Higher, noisy(100.0, 9, 3), noisy(125.0, 9, 4)),
            0.05,
            7,
        );
        assert_eq!(c.verdict, Verdict::Improvement, "{c:?}");
    }

    #[test]
    fn pure_noise_is_almost_always_inside_noise() {
        // Two samples from the same ±30 % distribution, 200 times: false alarms must stay rare.
        let mut rng = SmallRng::seed_from_u64(5);
        let wide = |rng: &mut SmallRng| {
            (0..9)
                .map(|_| 100.0 * (1.0 + rng.random_range(-0.3..0.3)))
                .collect()
        };
        let alarms = (0..200)
            .filter(|i| {
                let c = compare(
                    &samples(Better::Lower, wide(&mut rng), wide(&mut rng)),
                    0.05,
                    *i,
                );
                c.verdict != Verdict::InsideNoise
            })
            .count();
        assert!(
            alarms <= 4,
            "{alarms} of 200 pure-noise comparisons were called"
        );
    }

    #[test]
    fn identical_samples_are_inside_noise() {
        let a = noisy(100.0, 9, 9);
        let c = compare(&samples(Better::Lower, a.clone(), a), 0.05, 7);
        assert_eq!(c.verdict, Verdict::InsideNoise);
        assert_eq!(c.ratio, 1.0);
    }

    #[test]
    fn small_but_certain_differences_below_the_threshold_are_not_called() {
        let c = compare(
            &samples(Better::Lower, noisy(100.0, 9, 1), noisy(103.0, 9, 2)),
            0.05,
            7,
        );
        assert_eq!(c.verdict, Verdict::InsideNoise, "{c:?}");
    }

    #[test]
    fn no_spread_on_either_side_is_identical_and_a_zero_baseline_has_no_ratio() {
        let c = compare(&samples(Better::Lower, vec![0.0; 3], vec![0.0; 3]), 0.05, 7);
        assert_eq!(c.verdict, Verdict::Identical);
        let c = compare(
            &samples(Better::Lower, vec![0.0; 3], vec![0.0, 2.0, 5.0]),
            0.05,
            7,
        );
        assert_eq!(c.verdict, Verdict::NoRatio);
        // Failures at 0 in every run, then in none: a regression with no ratio to give.
        let c = compare(
            &samples(Better::Lower, vec![0.0; 3], vec![3.0, 2.0, 5.0]),
            0.05,
            7,
        );
        assert_eq!(c.verdict, Verdict::Regression);
        // Both medians 0, a stray failure on one side: no shift.
        let c = compare(
            &samples(Better::Lower, vec![0.0; 3], vec![0.0, 0.0, 4.0]),
            0.05,
            7,
        );
        assert_eq!(c.verdict, Verdict::InsideNoise);
    }

    #[test]
    fn one_repetition_gives_no_verdict() {
        let c = compare(&samples(Better::Lower, vec![100.0], vec![200.0]), 0.05, 7);
        assert_eq!(c.verdict, Verdict::TooFewRepetitions);
    }
}
