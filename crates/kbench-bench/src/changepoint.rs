//! Change-point detection over a metric's history: which builds changed records/s, MB/s, CPU per
//! record, a latency percentile or the error count, and by how much. Pure: no I/O, no clock, no
//! global randomness; the same series, options and seed give the same answer.
//!
//! The method is Apache Otava's (formerly DataStax's Hunter; Fleming et al., "Hunter: Using Change
//! Point Detection to Hunt for Performance Regressions", ICPE 2023), itself built on E-divisive
//! (Matteson & James 2014), the method MongoDB's CI uses (Daly et al., "Change Point Detection in
//! Software Performance Testing", ICPE 2020). Implemented here from those papers and from the
//! behaviour of `otava.analysis.compute_change_points` (apache-otava 0.8.0); no code is copied.
//!
//! 1. **Split.** A window of `window` points slides over the series in steps of `window / 2`
//!    (after a change found in a window, the next window starts at that change if that is
//!    further on). Inside each window, E-divisive bisects recursively: in every segment between
//!    the changes found so far, the candidate is the split `τ` (with a right end `κ`) maximising
//!    the energy divergence of Matteson & James with α = 1,
//!    `Q = 2/(n+m)·Σ|xᵢ−yⱼ| − 2m/((n+m)(n−1))·Σ|xᵢ−xₖ| − 2n/((n+m)(m−1))·Σ|yⱼ−yₖ|`
//!    (`x` the `n` samples of `[start, τ)`, `y` the `m` samples of `[τ, κ)`); the segment with the
//!    largest `Q` is split if its candidate is significant at the *first-pass* level (10 ×
//!    `max_pvalue` below 0.05, 2 × below 0.5, as Otava), and bisection stops at the first candidate
//!    that is not. The union of every window's changes are the "weak" change points.
//! 2. **Merge.** Each weak change is re-tested between its neighbours; then, repeatedly, the one
//!    with the largest p-value is dropped while that p-value is not below `max_pvalue`, and after
//!    that the one with the smallest magnitude (`max(|after/before − 1|, |before/after − 1|)`)
//!    while that is not above `min_magnitude`; the neighbours of a dropped change are re-tested.
//!    (Otava 0.8.0 re-tests the change after the dropped one and the one after that; here the two
//!    actual neighbours, whose segments the drop changed, are re-tested.)
//!
//! **Significance.** Otava's default path decides with Student's two-sample t-test. Here the same
//! question (do the segments either side of the split have different means?) is answered by a
//! permutation test, which assumes no normal distribution: the pooled two-sample t statistic of the
//! split is compared with the statistic of `permutations` random reassignments of the segments'
//! points to the two sides; the p-value is `(k + 1) / (permutations + 1)` with `k` the
//! reassignments at least as extreme, or, once 20 have been (Besag & Clifford's sequential
//! p-value, which bounds the work on the many candidates that are far from significant), `20 / L`
//! after `L` reassignments. Each test draws from a generator seeded by `seed` and the test's
//! segment bounds, so a test's answer does not depend on the order of the tests before it. A
//! permutation test cannot say more than its reassignments can: a split with `k` points on its
//! short side of `n` has a p-value of at least about `1 / C(n, k)` — a change needs a few points
//! each side (at the default 0.001, three points on the short side of twenty or more).
//!
//! Like Otava's t-test, the test is of means: a change in spread alone (same mean) is not reported.
//!
//! **Selection.** The split tested is the one the divergence picked as the most different, and
//! neither Otava's t-test nor the default permutation test allows for that: on flat noise their
//! p-values are too small, and some flat series show a change (of 200 flat normal series of 300
//! points, Otava 0.8.0 reports a change in 21, kbench's default in 13). With
//! [`Options::corrected`], each reassignment's statistic is instead the largest over every split
//! of its segment (two points or more a side, or one when the tested split has one), as
//! E-divisive's own permutation test re-maximises: 1 of the 200, at the cost of recall on small
//! changes (docs/HISTORY.md has the figures).
//!
//! **Repetitions.** A [`Point`] is one build's run and carries every repetition's value: the
//! repetitions are kept as a distribution. The energy divergence and the means use every sample;
//! splits are only between points; the permutation test reassigns whole points (a run's
//! repetitions share its build and machine, so they are not exchangeable with other runs' samples).
//! With one sample per point this is the plain series Otava analyses.
//!
//! **Missing values.** Samples that are NaN or infinite are dropped; a point left with no sample
//! is skipped (it belongs to neither side of any change, and a change is never reported at it).
//! Otava instead fills a missing value with the previous one.

use serde::{Deserialize, Serialize};

/// Sequential permutation test: stop after this many reassignments at least as extreme.
const EARLY_STOP_EXCEEDANCES: u64 = 20;
/// The bound on `Options::permutations` (work per test is at most this × the short side).
pub const MAX_PERMUTATIONS: usize = 100_000;

/// How the series is analysed. The defaults are Otava's where Otava has the setting
/// (`otava.series.AnalysisOptions`: `window_len` 50, `max_pvalue` 0.001, `min_magnitude` 0.0).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Options {
    /// A change is kept only with a p-value below this (Otava's `--p-value`, default 0.001).
    pub max_pvalue: f64,
    /// A change is kept only with a magnitude above this (a relative change, 0.05 = 5 %; Otava's
    /// `--magnitude`, default 0.0).
    pub min_magnitude: f64,
    /// Random reassignments per significance test (Otava has none: it uses a t-test; its
    /// original-E-divisive mode uses 100). Default 10 000, capped at [`MAX_PERMUTATIONS`]; the
    /// smallest p-value it can give is `1 / (permutations + 1)`.
    pub permutations: usize,
    /// Seed of the permutation test's generator.
    pub seed: u64,
    /// Points per sliding window (Otava's `--window`, default 50); 0 analyses the whole series as
    /// one window (E-divisive without windowing). Values of 1 act as 2.
    pub window: usize,
    /// Correct the test for the split having been chosen: each reassignment's statistic is the
    /// largest over every split of the segment (two points or more a side), not the statistic at
    /// the split tested. Otava does not (default false): its p-value is that of one split, the
    /// one the divergence picked as the most different, and flat noise then passes for a change
    /// more often than `max_pvalue` says (see docs/HISTORY.md for the rates measured).
    pub corrected: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            max_pvalue: 0.001,
            min_magnitude: 0.0,
            permutations: 10_000,
            seed: 0,
            window: 50,
            corrected: false,
        }
    }
}

/// One point of a metric's series: a build's run, with the value of each of its repetitions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub samples: Vec<f64>,
}

impl Point {
    pub fn new(samples: Vec<f64>) -> Self {
        Self { samples }
    }

    /// A point with one sample.
    pub fn single(value: f64) -> Self {
        Self {
            samples: vec![value],
        }
    }
}

impl From<f64> for Point {
    fn from(value: f64) -> Self {
        Self::single(value)
    }
}

/// A change found in a series.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChangePoint {
    /// Index (into the series given) of the first point after the change.
    pub index: usize,
    /// Mean of every sample from the previous change (or the start) up to this one.
    pub mean_before: f64,
    /// Mean of every sample from this change up to the next one (or the end).
    pub mean_after: f64,
    /// `(mean_after − mean_before) / mean_before`; 0.0 when `mean_before` is 0 (undefined there,
    /// as in Otava: read the two means).
    pub relative_change: f64,
    /// The permutation test's p-value for this change between its neighbours.
    pub pvalue: f64,
    /// `1 − pvalue`.
    pub confidence: f64,
}

/// The change points of `series`, in index order. Empty for a series of fewer than two points
/// with data, a constant one, or one without a significant change.
pub fn detect(series: &[Point], options: &Options) -> Vec<ChangePoint> {
    let data = Data::new(series);
    if data.points() < 2 {
        return Vec::new();
    }
    let options = Options {
        max_pvalue: if options.max_pvalue.is_nan() {
            0.0
        } else {
            options.max_pvalue
        },
        min_magnitude: if options.min_magnitude.is_nan() {
            0.0
        } else {
            options.min_magnitude
        },
        permutations: options.permutations.min(MAX_PERMUTATIONS),
        ..options.clone()
    };
    let weak = split(&data, &options);
    let mut found: Vec<Found> = weak
        .iter()
        .enumerate()
        .map(|(i, &at)| {
            let before = if i == 0 { 0 } else { weak[i - 1] };
            let after = weak.get(i + 1).copied().unwrap_or(data.points());
            Found {
                at,
                test: significance(&data, before, at, after, &options),
            }
        })
        .collect();
    merge(&data, &mut found, &options);
    found
        .into_iter()
        .map(|f| {
            let (before, after) = (f.test.mean_before, f.test.mean_after);
            ChangePoint {
                index: data.original[f.at],
                mean_before: before,
                mean_after: after,
                relative_change: if before == 0.0 {
                    0.0
                } else {
                    (after - before) / before
                },
                pvalue: f.test.pvalue,
                confidence: 1.0 - f.test.pvalue,
            }
        })
        .collect()
}

/// The series with its unusable samples and empty points dropped, samples flattened and centred
/// on their mean (the divergence and the t statistic do not change under a shift; the sums of
/// squares lose less precision).
struct Data {
    /// Index in the caller's series of each point kept.
    original: Vec<usize>,
    /// Offset in `samples` of each point's first sample, and the total at the end.
    start: Vec<usize>,
    samples: Vec<f64>,
    /// What was subtracted from every sample.
    shift: f64,
}

impl Data {
    fn new(series: &[Point]) -> Self {
        let mut data = Data {
            original: Vec::new(),
            start: vec![0],
            samples: Vec::new(),
            shift: 0.0,
        };
        for (index, point) in series.iter().enumerate() {
            let before = data.samples.len();
            data.samples
                .extend(point.samples.iter().copied().filter(|v| v.is_finite()));
            if data.samples.len() > before {
                data.original.push(index);
                data.start.push(data.samples.len());
            }
        }
        if !data.samples.is_empty() {
            data.shift = data.samples.iter().sum::<f64>() / data.samples.len() as f64;
            if data.shift.is_finite() {
                data.samples.iter_mut().for_each(|v| *v -= data.shift);
            } else {
                data.shift = 0.0;
            }
        }
        data
    }

    fn points(&self) -> usize {
        self.original.len()
    }

    /// Count, sum and sum of squares of the (centred) samples of point `p`.
    fn sums(&self, p: usize) -> Sums {
        let values = &self.samples[self.start[p]..self.start[p + 1]];
        Sums {
            n: values.len() as f64,
            sum: values.iter().sum(),
            sumsq: values.iter().map(|v| v * v).sum(),
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Sums {
    n: f64,
    sum: f64,
    sumsq: f64,
}

impl Sums {
    fn add(self, o: Sums) -> Sums {
        Sums {
            n: self.n + o.n,
            sum: self.sum + o.sum,
            sumsq: self.sumsq + o.sumsq,
        }
    }

    fn sub(self, o: Sums) -> Sums {
        Sums {
            n: self.n - o.n,
            sum: self.sum - o.sum,
            sumsq: self.sumsq - o.sumsq,
        }
    }

    fn mean(self) -> f64 {
        if self.n > 0.0 { self.sum / self.n } else { 0.0 }
    }

    /// Sum of squared deviations from the mean.
    fn squares(self) -> f64 {
        if self.n > 0.0 {
            (self.sumsq - self.sum * self.sum / self.n).max(0.0)
        } else {
            0.0
        }
    }
}

/// The pooled two-sample t statistic (absolute) of `left` against `all − left`; 0 when the means
/// are equal, infinite when they differ and neither side varies.
fn t_statistic(left: Sums, all: Sums) -> f64 {
    let right = all.sub(left);
    if left.n <= 0.0 || right.n <= 0.0 {
        return 0.0;
    }
    let diff = (left.mean() - right.mean()).abs();
    if diff == 0.0 {
        return 0.0;
    }
    let dof = all.n - 2.0;
    let variance = if dof > 0.0 {
        (left.squares() + right.squares()) / dof
    } else {
        0.0
    };
    let scale = (variance * (1.0 / left.n + 1.0 / right.n)).sqrt();
    if scale > 0.0 {
        diff / scale
    } else {
        f64::INFINITY
    }
}

/// A significance test's outcome for the split of points `[a, b)` at `at`.
#[derive(Clone, Copy, Debug)]
struct Test {
    pvalue: f64,
    mean_before: f64,
    mean_after: f64,
}

/// The permutation test of the split of points `[a, b)` at `at` (see the module's documentation).
fn significance(data: &Data, a: usize, at: usize, b: usize, options: &Options) -> Test {
    let sums: Vec<Sums> = (a..b).map(|p| data.sums(p)).collect();
    let all = sums.iter().fold(Sums::default(), |s, &p| s.add(p));
    let left = sums[..at - a]
        .iter()
        .fold(Sums::default(), |s, &p| s.add(p));
    let mean_before = left.mean() + data.shift;
    let mean_after = all.sub(left).mean() + data.shift;
    let observed = t_statistic(left, all);
    let test = |pvalue| Test {
        pvalue,
        mean_before,
        mean_after,
    };
    if all.n <= 2.0 || observed.is_nan() || observed == 0.0 {
        return test(1.0);
    }
    let mut reassign = Reassign::new(
        sums,
        all,
        at - a,
        mix(options.seed, [a as u64, at as u64, b as u64]),
    );
    let threshold = observed * (1.0 - 1e-9);
    let mut extreme = 0u64;
    for done in 1..=options.permutations as u64 {
        let statistic = if options.corrected {
            reassign.best_split()
        } else {
            reassign.same_sizes()
        };
        if statistic >= threshold {
            extreme += 1;
            if extreme == EARLY_STOP_EXCEEDANCES {
                return test(extreme as f64 / done as f64);
            }
        }
    }
    test((extreme + 1) as f64 / (options.permutations + 1) as f64)
}

/// Random reassignments of a segment's points to the two sides of a split.
struct Reassign {
    sums: Vec<Sums>,
    all: Sums,
    left: usize,
    order: Vec<usize>,
    rng: SplitMix64,
}

impl Reassign {
    fn new(sums: Vec<Sums>, all: Sums, left: usize, seed: u64) -> Self {
        let order = (0..sums.len()).collect();
        Self {
            sums,
            all,
            left,
            order,
            rng: SplitMix64::new(seed),
        }
    }

    /// The statistic of a random split with the tested split's sizes: a random subset of the short
    /// side's size (a partial shuffle).
    fn same_sizes(&mut self) -> f64 {
        let n = self.order.len();
        let short = self.left.min(n - self.left);
        let mut drawn = Sums::default();
        for i in 0..short {
            let j = i + self.rng.below(n - i);
            self.order.swap(i, j);
            drawn = drawn.add(self.sums[self.order[i]]);
        }
        let left = if self.left <= n - self.left {
            drawn
        } else {
            self.all.sub(drawn)
        };
        t_statistic(left, self.all)
    }

    /// The largest statistic over every split of a random order with two points or more a side
    /// (or one, when the tested split has one on a side).
    fn best_split(&mut self) -> f64 {
        let n = self.order.len();
        let min_side = self.left.min(n - self.left).min(2);
        for i in 0..n {
            let j = i + self.rng.below(n - i);
            self.order.swap(i, j);
        }
        let mut left = Sums::default();
        let mut best: f64 = 0.0;
        for (k, &p) in self.order[..n - min_side].iter().enumerate() {
            left = left.add(self.sums[p]);
            if k + 1 >= min_side {
                best = best.max(t_statistic(left, self.all));
            }
        }
        best
    }
}

/// Otava's first-pass significance level for the split step.
fn first_pass_pvalue(max_pvalue: f64) -> f64 {
    if max_pvalue < 0.05 {
        max_pvalue * 10.0
    } else if max_pvalue < 0.5 {
        max_pvalue * 2.0
    } else {
        max_pvalue
    }
}

/// The split step: the weak change points (point indices, sorted, distinct) of every window.
fn split(data: &Data, options: &Options) -> Vec<usize> {
    let n = data.points();
    let level = first_pass_pvalue(options.max_pvalue);
    if options.window == 0 {
        return divide(data, 0, n, level, options);
    }
    let window = options.window.max(2);
    let step = window / 2;
    let mut weak: Vec<usize> = Vec::new();
    let mut start = 0;
    while start < n {
        let end = (start + window).min(n);
        let found = divide(data, start, end, level, options);
        start = (start + step).max(found.last().copied().unwrap_or(0));
        weak.extend(found);
    }
    weak.sort_unstable();
    weak.dedup();
    weak
}

/// The best split of one segment by the energy divergence.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    at: usize,
    qhat: f64,
}

/// E-divisive over the points `[from, to)`: bisects while the best candidate of all segments is
/// significant at `level`; the changes found, sorted.
fn divide(data: &Data, from: usize, to: usize, level: f64, options: &Options) -> Vec<usize> {
    let mut found: Vec<usize> = Vec::new();
    // Each segment's candidate, kept until the segment is split.
    let mut candidates: Vec<(usize, usize, Option<Candidate>)> = Vec::new();
    loop {
        let mut bounds = Vec::with_capacity(found.len() + 2);
        bounds.push(from);
        bounds.extend(found.iter().copied());
        bounds.push(to);
        let mut best: Option<(usize, usize, Candidate)> = None;
        for w in bounds.windows(2) {
            let (a, b) = (w[0], w[1]);
            let cached = candidates
                .iter()
                .find(|c| c.0 == a && c.1 == b)
                .map(|c| c.2);
            let candidate = cached.unwrap_or_else(|| {
                let c = candidate(data, a, b);
                candidates.push((a, b, c));
                c
            });
            if let Some(c) =
                candidate.filter(|c| best.is_none_or(|(_, _, best)| c.qhat > best.qhat))
            {
                best = Some((a, b, c));
            }
        }
        let Some((a, b, c)) = best else { break };
        if significance(data, a, c.at, b, options).pvalue > level {
            break;
        }
        let at = found.partition_point(|&f| f < c.at);
        found.insert(at, c.at);
    }
    found
}

/// The split of points `[a, b)` maximising the energy divergence `Q(τ, κ)` over `a < τ < κ ≤ b`
/// (τ, κ between points; the sums over every sample), with the first `τ` on ties; `None` below
/// two points. O(samples²) time, O(samples) memory: the right end `κ` grows one sample at a time
/// and every `τ`'s between-sum and right within-sum grow with it.
fn candidate(data: &Data, a: usize, b: usize) -> Option<Candidate> {
    if b < a + 2 {
        return None;
    }
    let base = data.start[a];
    let x = &data.samples[base..data.start[b]];
    let bound = |p: usize| data.start[a + p] - base; // sample offset of relative point p
    let points = b - a;
    let mut within_left = vec![0.0; points + 1]; // Σ|xᵢ − xₖ| over [0, bound(t))
    let mut between = vec![0.0; points]; // Σ|xᵢ − yⱼ|, x in [0, bound(t)), y in [bound(t), e]
    let mut within_right = vec![0.0; points]; // Σ|yⱼ − yₖ| over [bound(t), e]
    let mut prefix = vec![0.0; x.len() + 1];
    let mut within_all = 0.0;
    let mut best: Option<Candidate> = None;
    let mut point = 0; // relative point holding sample e
    for e in 0..x.len() {
        if e == bound(point + 1) {
            point += 1;
        }
        for i in 0..e {
            prefix[i + 1] = prefix[i] + (x[i] - x[e]).abs();
        }
        within_all += prefix[e];
        for t in 1..=point {
            let to_left = prefix[bound(t)];
            between[t] += to_left;
            within_right[t] += prefix[e] - to_left;
        }
        if e + 1 != bound(point + 1) {
            continue;
        }
        within_left[point + 1] = within_all;
        for t in 1..=point {
            let n = bound(t) as f64;
            let m = (e + 1 - bound(t)) as f64;
            let mut q = 2.0 / (n + m) * between[t];
            if n > 1.0 {
                q -= 2.0 * m / ((n + m) * (n - 1.0)) * within_left[t];
            }
            if m > 1.0 {
                q -= 2.0 * n / ((n + m) * (m - 1.0)) * within_right[t];
            }
            let at = a + t;
            if best.is_none_or(|c| q > c.qhat || (q == c.qhat && at < c.at)) {
                best = Some(Candidate { at, qhat: q });
            }
        }
    }
    best
}

/// A change kept through the merge step, with its test between its current neighbours.
struct Found {
    at: usize,
    test: Test,
}

/// Otava's change magnitude: the larger of the forward and backward relative changes.
fn magnitude(test: &Test) -> f64 {
    let (before, after) = (test.mean_before, test.mean_after);
    let forward = if before == 0.0 {
        0.0
    } else {
        after / before - 1.0
    };
    let backward = if after == 0.0 {
        0.0
    } else {
        before / after - 1.0
    };
    forward.abs().max(backward.abs())
}

/// The merge step: drops the weakest change (largest p-value, or once every p-value is below
/// `max_pvalue` the smallest magnitude) while it is not good enough, re-testing its neighbours.
fn merge(data: &Data, found: &mut Vec<Found>, options: &Options) {
    while !found.is_empty() {
        let mut weakest = 0;
        for (i, f) in found.iter().enumerate() {
            if f.test.pvalue > found[weakest].test.pvalue {
                weakest = i;
            }
        }
        if found[weakest].test.pvalue < options.max_pvalue {
            for (i, f) in found.iter().enumerate() {
                if magnitude(&f.test) < magnitude(&found[weakest].test) {
                    weakest = i;
                }
            }
            if magnitude(&found[weakest].test) > options.min_magnitude {
                return;
            }
        }
        found.remove(weakest);
        for i in [weakest.wrapping_sub(1), weakest] {
            if i < found.len() {
                let before = if i == 0 { 0 } else { found[i - 1].at };
                let after = found.get(i + 1).map_or(data.points(), |f| f.at);
                found[i].test = significance(data, before, found[i].at, after, options);
            }
        }
    }
}

/// SplitMix64 (Steele, Lea & Flood 2014): small, fast, and the same stream on every platform and
/// crate version.
struct SplitMix64(u64);

impl SplitMix64 {
    fn new(seed: u64) -> Self {
        Self(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, n)` (multiply-shift; the bias is below 2⁻⁵⁰ for the sizes here).
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next()) * n as u128) >> 64) as usize
    }
}

/// A test's seed from the options' seed and the test's segment bounds.
fn mix(seed: u64, parts: [u64; 3]) -> u64 {
    let mut rng = SplitMix64::new(seed);
    let mut h = rng.next();
    for p in parts {
        rng = SplitMix64::new(h ^ p);
        h = rng.next();
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(values: &[f64]) -> Vec<Point> {
        values.iter().map(|&v| Point::single(v)).collect()
    }

    /// Normal noise (Box–Muller) from a seeded generator.
    fn noise(seed: u64, n: usize, mean: f64, sigma: f64) -> Vec<f64> {
        let mut rng = SplitMix64::new(seed);
        let mut uniform = move || (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
        (0..n)
            .map(|_| {
                let (u, v) = (uniform().max(1e-300), uniform());
                mean + sigma * (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
            })
            .collect()
    }

    #[test]
    fn changepoint_flat_noisy_series_has_no_change() {
        // Otava's test is of the one split the divergence picked, the most different one: on flat
        // noise its p-value is too small, and several series in a hundred show a change: here two
        // of ten, seeds 2 and 6, in which Otava 0.8.0 also finds a change. The corrected test finds
        // none.
        let flat: Vec<Vec<Point>> = (1..=10)
            .map(|seed| series(&noise(seed, 300, 1000.0, 50.0)))
            .collect();
        let alarms: Vec<usize> = (0..flat.len())
            .filter(|&i| !detect(&flat[i], &Options::default()).is_empty())
            .map(|i| i + 1)
            .collect();
        assert_eq!(alarms, [2, 6]);
        let corrected = Options {
            corrected: true,
            ..Options::default()
        };
        for (i, values) in flat.iter().enumerate() {
            let found = detect(values, &corrected);
            assert!(found.is_empty(), "seed {}: {found:?}", i + 1);
        }
        // Nor with repetitions.
        let reps: Vec<Point> = noise(12, 400, 50.0, 5.0)
            .chunks(4)
            .map(|r| Point::new(r.to_vec()))
            .collect();
        assert!(detect(&reps, &Options::default()).is_empty());
        assert!(detect(&reps, &corrected).is_empty());
    }

    #[test]
    fn changepoint_one_step_found_at_its_index_with_its_direction() {
        let mut values = noise(7, 120, 100.0, 2.0);
        values[70..].iter_mut().for_each(|v| *v += 10.0);
        let found = detect(&series(&values), &Options::default());
        assert_eq!(found.len(), 1, "{found:?}");
        let c = &found[0];
        assert_eq!(c.index, 70);
        assert!((c.relative_change - 0.1).abs() < 0.02, "{c:?}");
        assert!(c.mean_after > c.mean_before);
        assert!(c.pvalue < 0.001 && (c.confidence - (1.0 - c.pvalue)).abs() < 1e-12);
        // Downwards: a regression of throughput.
        let down: Vec<f64> = values.iter().map(|v| 300.0 - v).collect();
        let found = detect(&series(&down), &Options::default());
        assert_eq!(found.iter().map(|c| c.index).collect::<Vec<_>>(), [70]);
        assert!(found[0].relative_change < 0.0);
    }

    #[test]
    fn changepoint_two_steps() {
        let mut values = noise(11, 200, 50.0, 1.0);
        values[60..].iter_mut().for_each(|v| *v += 5.0);
        values[140..].iter_mut().for_each(|v| *v -= 8.0);
        let found = detect(&series(&values), &Options::default());
        assert_eq!(
            found.iter().map(|c| c.index).collect::<Vec<_>>(),
            [60, 140],
            "{found:?}"
        );
        assert!(found[0].relative_change > 0.0 && found[1].relative_change < 0.0);
        // The whole series as one window finds the same.
        let whole = Options {
            window: 0,
            ..Options::default()
        };
        let found = detect(&series(&values), &whole);
        assert_eq!(
            found.iter().map(|c| c.index).collect::<Vec<_>>(),
            [60, 140],
            "{found:?}"
        );
    }

    #[test]
    fn changepoint_constant_and_tiny_series() {
        let options = Options::default();
        assert!(detect(&[], &options).is_empty());
        assert!(detect(&series(&[5.0]), &options).is_empty());
        assert!(detect(&series(&[5.0, 9.0]), &options).is_empty());
        assert!(detect(&series(&[1.0, 1.0, 9.0, 9.0]), &options).is_empty());
        assert!(detect(&series(&[7.0; 400]), &options).is_empty());
        assert!(detect(&series(&[0.0; 60]), &options).is_empty());
        assert!(detect(&vec![Point::new(Vec::new()); 10], &options).is_empty());
        let window_one = Options {
            window: 1,
            ..Options::default()
        };
        assert!(detect(&series(&[1.0, 2.0, 3.0]), &window_one).is_empty());
    }

    #[test]
    fn changepoint_non_finite_samples_are_skipped() {
        let mut values = noise(3, 100, 10.0, 0.5);
        values[40..].iter_mut().for_each(|v| *v += 3.0);
        let clean = detect(&series(&values), &Options::default());
        assert_eq!(clean.iter().map(|c| c.index).collect::<Vec<_>>(), [40]);
        // A NaN point just before the change: it is skipped, the change is still at 40; a NaN
        // point at the change: the change is reported at the next point with data.
        for (hole, expected) in [(39, 40), (40, 41)] {
            let mut holed = series(&values);
            holed[hole] = Point::new(vec![f64::NAN, f64::INFINITY]);
            let found = detect(&holed, &Options::default());
            assert_eq!(
                found.iter().map(|c| c.index).collect::<Vec<_>>(),
                [expected]
            );
        }
        let nan = vec![Point::single(f64::NAN); 50];
        assert!(detect(&nan, &Options::default()).is_empty());
    }

    #[test]
    fn changepoint_repetitions_are_a_distribution() {
        // 40 runs of 5 repetitions each; the mean moves by 2 % at run 25, within the spread of
        // one run's repetitions (σ 2 %) but clear over five.
        let samples = noise(5, 200, 100.0, 2.0);
        let points: Vec<Point> = samples
            .chunks(5)
            .enumerate()
            .map(|(run, reps)| {
                let step = if run >= 25 { 2.0 } else { 0.0 };
                Point::new(reps.iter().map(|v| v + step).collect())
            })
            .collect();
        let found = detect(&points, &Options::default());
        assert_eq!(
            found.iter().map(|c| c.index).collect::<Vec<_>>(),
            [25],
            "{found:?}"
        );
        // The means are over every repetition.
        let before: f64 = points[..25].iter().flat_map(|p| &p.samples).sum::<f64>() / 125.0;
        assert!((found[0].mean_before - before).abs() < 1e-9);
    }

    #[test]
    fn changepoint_deterministic_for_a_seed_and_min_magnitude_filters() {
        let mut values = noise(9, 150, 100.0, 3.0);
        values[75..].iter_mut().for_each(|v| *v += 8.0);
        let options = Options::default();
        let once = detect(&series(&values), &options);
        assert_eq!(once, detect(&series(&values), &options));
        assert_eq!(once.iter().map(|c| c.index).collect::<Vec<_>>(), [75]);
        let big_only = Options {
            min_magnitude: 0.10,
            ..Options::default()
        };
        assert!(detect(&series(&values), &big_only).is_empty());
        let corrected = Options {
            corrected: true,
            seed: 99,
            ..Options::default()
        };
        assert_eq!(
            detect(&series(&values), &corrected)
                .iter()
                .map(|c| c.index)
                .collect::<Vec<_>>(),
            [75]
        );
        let json = serde_json::to_string(&once[0]).unwrap();
        let back: ChangePoint = serde_json::from_str(&json).unwrap();
        assert_eq!((back.index, back.pvalue), (once[0].index, once[0].pvalue));
    }

    #[test]
    fn changepoint_candidate_matches_the_direct_formula() {
        let values = noise(21, 17, 0.0, 1.0);
        let data = Data::new(&series(&values));
        let c = candidate(&data, 0, values.len()).unwrap();
        let mut best = (0, f64::NEG_INFINITY);
        for tau in 1..values.len() {
            for kappa in tau + 1..=values.len() {
                let (x, y) = (&values[..tau], &values[tau..kappa]);
                let (n, m) = (x.len() as f64, y.len() as f64);
                let pairs = |s: &[f64]| -> f64 {
                    let mut t = 0.0;
                    for i in 0..s.len() {
                        for k in i + 1..s.len() {
                            t += (s[i] - s[k]).abs();
                        }
                    }
                    t
                };
                let cross: f64 = x
                    .iter()
                    .flat_map(|a| y.iter().map(move |b| (a - b).abs()))
                    .sum();
                let mut q = 2.0 / (n + m) * cross;
                if n > 1.0 {
                    q -= 2.0 * m / ((n + m) * (n - 1.0)) * pairs(x);
                }
                if m > 1.0 {
                    q -= 2.0 * n / ((n + m) * (m - 1.0)) * pairs(y);
                }
                if q > best.1 + 1e-9 {
                    best = (tau, q);
                }
            }
        }
        assert_eq!(c.at, best.0);
        assert!((c.qhat - best.1).abs() < 1e-9 * best.1.abs().max(1.0));
    }
}
