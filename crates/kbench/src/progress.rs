//! Live progress on a terminal: an indicatif bar (elapsed against planned, records/s, the current
//! window's p99, failures) fed by the run's timeline windows, with the periodic lines printed above
//! it. When stdout is not a terminal, or with `--no-progress`, the periodic lines are printed exactly
//! as before (kafka-producer-perf-test's format); `--quiet` prints only the final lines.

use std::io::IsTerminal as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use kbench_bench::timeline::{Window, WindowSink};

#[derive(Debug, Clone, Default, clap::Args)]
pub struct ProgressArgs {
    /// Print only the final lines: no periodic lines, no progress bar.
    #[arg(long, short = 'q')]
    pub quiet: bool,

    /// No progress bar, even on a terminal: the periodic lines only, as when the output is not a
    /// terminal.
    #[arg(long)]
    pub no_progress: bool,
}

/// What the run plans: a record count, a duration, or neither (until stopped).
pub struct Planned {
    pub records: Option<u64>,
    pub duration: Option<Duration>,
}

/// Where a run's progress goes.
pub struct Progress {
    bar: Option<ProgressBar>,
    quiet: bool,
    by_time: bool,
    /// Failures so far, and the longest window seen (a shorter, last one is not a rate to show).
    failed: Mutex<(u64, Duration)>,
}

impl Progress {
    pub fn new(args: &ProgressArgs, planned: Planned) -> Arc<Progress> {
        let terminal = std::io::stdout().is_terminal();
        let bar = (terminal && !args.quiet && !args.no_progress).then(|| {
            let (len, template) = match (planned.duration, planned.records) {
                (Some(d), _) => (
                    d.as_secs().max(1),
                    "{elapsed_precise} [{bar:30}] {pos}/{len} s  {msg}",
                ),
                (None, Some(n)) if n < u64::MAX => (
                    n,
                    "{elapsed_precise} [{bar:30}] {pos}/{len} records ({eta} left)  {msg}",
                ),
                _ => (0, "{elapsed_precise} {spinner}  {msg}"),
            };
            let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stdout());
            if let Ok(style) = ProgressStyle::with_template(template) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.enable_steady_tick(Duration::from_millis(250));
            bar
        });
        Arc::new(Progress {
            bar,
            quiet: args.quiet,
            by_time: planned.duration.is_some(),
            failed: Mutex::new((0, Duration::ZERO)),
        })
    }

    /// A bar of `total` steps (sweep and codec cells) on stderr, where those commands report each
    /// step, when stderr is a terminal. Drawn only when a step ends (no ticking thread), so that
    /// nothing runs beside a timed cell.
    pub fn steps(args: &ProgressArgs, total: u64, unit: &str) -> Arc<Progress> {
        let terminal = std::io::stderr().is_terminal();
        let bar = (terminal && !args.quiet && !args.no_progress).then(|| {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            let template = format!(
                "{{elapsed_precise}} [{{bar:30}}] {{pos}}/{{len}} {unit} ({{eta}} left)  {{msg}}"
            );
            if let Ok(style) = ProgressStyle::with_template(&template) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar
        });
        Arc::new(Progress {
            bar,
            quiet: args.quiet,
            by_time: false,
            failed: Mutex::new((0, Duration::ZERO)),
        })
    }

    /// A step ended: its line (on stderr; above the bar if there is one, none with `--quiet`), and
    /// the bar moves on with `message`.
    pub fn step(&self, line: Option<&str>, message: String) {
        match &self.bar {
            Some(b) => {
                if let Some(l) = line {
                    b.println(l);
                }
                b.inc(1);
                b.set_message(message);
            }
            None if !self.quiet => {
                if let Some(l) = line {
                    eprintln!("{l}");
                }
            }
            None => {}
        }
    }

    /// A periodic line: above the bar, as is without one, not at all with `--quiet`.
    pub fn line(&self, s: &str) {
        if self.quiet {
            return;
        }
        match &self.bar {
            Some(b) => b.println(s),
            None => println!("{s}"),
        }
    }

    /// A status note (not a figure): above the bar if there is one, else on stderr, so that stdout
    /// keeps only the tool's lines; not at all with `--quiet`.
    pub fn note(&self, s: &str) {
        if self.quiet {
            return;
        }
        match &self.bar {
            Some(b) => b.println(s),
            None => eprintln!("{s}"),
        }
    }

    /// A line printed whatever `--quiet` says (a final line), above the bar if there is one.
    pub fn always(&self, s: &str) {
        match &self.bar {
            Some(b) => b.println(s),
            None => println!("{s}"),
        }
    }

    /// Feed the bar from the run's windows: `advance` is the counter that moves it (and its rate),
    /// `latency` the histogram whose p99 it shows.
    pub fn sink(
        self: &Arc<Self>,
        counters: &'static [&'static str],
        advance: &'static str,
        latency: &'static str,
    ) -> WindowSink {
        if self.bar.is_none() {
            return WindowSink::default();
        }
        let me = self.clone();
        let records = counters.iter().position(|c| *c == advance);
        let failed = counters.iter().position(|c| *c == "failed");
        WindowSink::new(move |w: &Window| {
            let Some(bar) = &me.bar else { return };
            let n = records.and_then(|i| w.counts.get(i)).copied().unwrap_or(0);
            let f = failed.and_then(|i| w.counts.get(i)).copied().unwrap_or(0);
            let mut seen = me.failed.lock().expect("progress lock");
            seen.0 += f;
            seen.1 = seen.1.max(w.duration);
            if me.by_time {
                bar.set_position(
                    bar.elapsed()
                        .as_secs()
                        .min(bar.length().unwrap_or(u64::MAX)),
                );
            } else {
                bar.inc(n);
            }
            if w.duration < seen.1 / 2 {
                return;
            }
            let secs = w.duration.as_secs_f64().max(1e-9);
            let p99 = w.histogram(latency).filter(|h| !h.is_empty()).map_or_else(
                || "–".to_string(),
                |h| format!("{:.1} ms", h.value_at_quantile(0.99) as f64 / 1000.0),
            );
            bar.set_message(format!(
                "{:.0} records/s, p99 {p99}, {} failed",
                n as f64 / secs,
                seen.0
            ));
        })
    }

    /// The run ended: the bar goes, the final lines follow.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    /// A run that ends early (an error before its end) leaves no bar behind.
    fn drop(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
