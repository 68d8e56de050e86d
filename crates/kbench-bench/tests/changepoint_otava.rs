//! kbench's change-point detection against the labelled series of `otava-test-data` and against
//! Apache Otava itself (both from PyPI, in the venv scripts/install-test-tools makes):
//! `otava_reference.py` prints every series of otava-test-data's default suite with its ground
//! truth and Otava's change points; here kbench's `detect` runs on the same series with the same
//! settings (Otava's defaults), and both are scored against the truth and against each other the
//! way otava-test-data scores a detector (a detection within 5 points of a change matches it).

use kbench_bench::changepoint::{ChangePoint, Options, Point, detect};
use serde_json::Value;
use std::path::Path;

/// otava-test-data's matching tolerance (`compute_accuracy_metrics(tolerance=5)`).
const TOLERANCE: usize = 5;

/// The bars, a little under the figures measured (docs/HISTORY.md): Otava's settings, against the
/// ground truth and against Otava's own change points, and the corrected test's.
struct Bars {
    precision: f64,
    recall: f64,
    /// Share of Otava's changes kbench finds.
    finds_otavas: f64,
    /// Share of kbench's changes Otava finds.
    otavas_finds: f64,
}

const DEFAULT_BARS: Bars = Bars {
    precision: 0.85,
    recall: 0.65,
    finds_otavas: 0.85,
    otavas_finds: 0.90,
};
const CORRECTED_BARS: Bars = Bars {
    precision: 0.95,
    recall: 0.55,
    finds_otavas: 0.65,
    otavas_finds: 0.95,
};

/// The reference, computed once for the tests of this file.
fn reference() -> &'static Value {
    static REFERENCE: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    REFERENCE.get_or_init(compute_reference)
}

fn compute_reference() -> Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = root.join("../../target/tools/python/bin/python");
    assert!(
        python.is_file(),
        "Apache Otava and otava-test-data are not installed at {}: run scripts/install-test-tools \
         (scripts/test does)",
        python.display()
    );
    let out = std::process::Command::new(&python)
        .arg(root.join("tests/otava_reference.py"))
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "otava_reference.py failed (is the venv current? run scripts/install-test-tools): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the reference's JSON")
}

/// Matches of `found` to `truth` (each used once, greedy in `found`'s order, as
/// otava-test-data's scoring): true positives, and the pairs matched.
fn matches(truth: &[usize], found: &[usize]) -> Vec<(usize, usize)> {
    let mut used = vec![false; truth.len()];
    let mut pairs = Vec::new();
    for &f in found {
        if let Some(t) = (0..truth.len()).find(|&t| !used[t] && truth[t].abs_diff(f) <= TOLERANCE) {
            used[t] = true;
            pairs.push((truth[t], f));
        }
    }
    pairs
}

#[derive(Default, Debug)]
struct Tally {
    truth: usize,
    found: usize,
    matched: usize,
}

impl Tally {
    fn add(&mut self, truth: &[usize], found: &[usize]) -> (f64, f64) {
        let m = matches(truth, found).len();
        self.truth += truth.len();
        self.found += found.len();
        self.matched += m;
        (ratio(m, found.len()), ratio(m, truth.len()))
    }

    fn precision(&self) -> f64 {
        ratio(self.matched, self.found)
    }

    fn recall(&self) -> f64 {
        ratio(self.matched, self.truth)
    }
}

/// A share, 1 when there is nothing to share (no detection: no false one; no truth: none missed).
fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 { 1.0 } else { a as f64 / b as f64 }
}

fn indices(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_u64().unwrap() as usize)
        .collect()
}

#[test]
fn changepoint_otava_test_data_with_otavas_settings() {
    evaluate(&Options::default(), &DEFAULT_BARS);
}

#[test]
fn changepoint_otava_test_data_corrected() {
    evaluate(
        &Options {
            corrected: true,
            ..Options::default()
        },
        &CORRECTED_BARS,
    );
}

/// Runs `detect` with `options` on every series, prints each series' and the total figures, and
/// checks them against `bars`.
fn evaluate(options: &Options, bars: &Bars) {
    let reference = reference();
    let expected = &reference["options"];
    assert_eq!(expected["window"].as_u64(), Some(options.window as u64));
    assert_eq!(expected["max_pvalue"].as_f64(), Some(options.max_pvalue));
    assert_eq!(
        expected["min_magnitude"].as_f64(),
        Some(options.min_magnitude)
    );
    let mode = if options.corrected {
        "corrected"
    } else {
        "Otava's test"
    };
    println!(
        "{mode}: apache-otava {} otava-test-data {}; tolerance {TOLERANCE}",
        reference["apache_otava"], reference["otava_test_data"]
    );
    let (mut kbench, mut otava, mut agreement) =
        (Tally::default(), Tally::default(), Tally::default());
    let (mut flat, mut flat_kbench, mut flat_otava) = (0, 0, 0);
    let (mut same_direction, mut pairs) = (0, 0);
    for series in reference["series"].as_array().unwrap() {
        let name = series["name"].as_str().unwrap();
        let points: Vec<Point> = series["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| Point::single(v.as_f64().unwrap()))
            .collect();
        // Ground truth with each index once (overlaid patterns can mark one index twice).
        let mut truth = indices(&series["truth"]);
        truth.dedup();
        let by_otava: Vec<&Value> = series["otava"].as_array().unwrap().iter().collect();
        let otava_at: Vec<usize> = by_otava
            .iter()
            .map(|c| c["index"].as_u64().unwrap() as usize)
            .collect();
        let found: Vec<ChangePoint> = detect(&points, options);
        let kbench_at: Vec<usize> = found.iter().map(|c| c.index).collect();
        let (p, r) = kbench.add(&truth, &kbench_at);
        let (op, or) = otava.add(&truth, &otava_at);
        agreement.add(&otava_at, &kbench_at);
        if truth.is_empty() {
            flat += 1;
            flat_kbench += usize::from(!kbench_at.is_empty());
            flat_otava += usize::from(!otava_at.is_empty());
        }
        for (o, k) in matches(&otava_at, &kbench_at) {
            let o =
                by_otava[otava_at.iter().position(|&i| i == o).unwrap()]["forward_change_percent"]
                    .as_f64()
                    .unwrap();
            let k = found.iter().find(|c| c.index == k).unwrap().relative_change;
            pairs += 1;
            same_direction += usize::from((o > 0.0) == (k > 0.0));
        }
        println!(
            "{mode}: {name:<62} truth {truth:?} otava {otava_at:?} (P {op:.2} R {or:.2}) kbench {kbench_at:?} \
             (P {p:.2} R {r:.2})"
        );
    }
    println!(
        "{mode}: total: kbench precision {:.3} recall {:.3} ({} found, {} of {} true); Otava precision {:.3} \
         recall {:.3} ({} found, {} of {} true)",
        kbench.precision(),
        kbench.recall(),
        kbench.found,
        kbench.matched,
        kbench.truth,
        otava.precision(),
        otava.recall(),
        otava.found,
        otava.matched,
        otava.truth
    );
    println!(
        "{mode}: agreement: kbench finds {:.3} of Otava's {} changes; {:.3} of kbench's {} are Otava's; same \
         direction {same_direction} of {pairs}; series without a change: kbench reports one in \
         {flat_kbench} of {flat}, Otava in {flat_otava}",
        agreement.recall(),
        agreement.truth,
        agreement.precision(),
        agreement.found
    );
    assert!(
        kbench.precision() >= bars.precision,
        "kbench precision {:.3}",
        kbench.precision()
    );
    assert!(
        kbench.recall() >= bars.recall,
        "kbench recall {:.3}",
        kbench.recall()
    );
    assert!(
        agreement.recall() >= bars.finds_otavas,
        "kbench finds {:.3} of Otava's",
        agreement.recall()
    );
    assert!(
        agreement.precision() >= bars.otavas_finds,
        "{:.3} of kbench's are Otava's",
        agreement.precision()
    );
    // A change both find may differ in direction only where their neighbours differ.
    assert!(
        same_direction as f64 >= 0.95 * pairs as f64,
        "same direction {same_direction} of {pairs}"
    );
    assert_eq!(flat_kbench, 0, "a change reported in a series without one");
}
