//! The sweep's tables, Markdown as printed: one per group of cells, and the per-record cost growth.

use std::fmt::Write as _;

use kbench_bench::sweep::{CellStatus, SweepResult, grouped, verdict};

/// The header lines (which tier, against what, the broker's conversions), then a table per group of
/// cells: each version's CPU per message against the newest completed one, and its verdict.
pub(super) fn groups(
    results: &[SweepResult],
    noise: f64,
    embedded: bool,
    no_pin: bool,
    conversions: &str,
    isolated: bool,
) -> String {
    let mut out = String::new();
    let target = if embedded {
        "the embedded Tansu broker"
    } else {
        "the given cluster"
    };
    if no_pin {
        let _ = writeln!(
            out,
            "Tier 2 sanity run — not comparable — against {target}: versions negotiated unaided, no pins"
        );
    } else {
        let _ = writeln!(
            out,
            "Tier 1 sweep against {target}: every cell pinned, negotiated == pin checked"
        );
    }
    let _ = writeln!(
        out,
        "Client CPU per message is this process's getrusage over the measured phase; broker conversions: {conversions}"
    );
    for (group, cells) in grouped(results) {
        let newest = cells
            .iter()
            .filter(|c| matches!(c.status, CellStatus::Completed))
            .max_by_key(|c| c.cell.version())
            .copied();
        let _ = writeln!(out, "\n{group}");
        let _ = writeln!(
            out,
            "| version | µs/msg | vs newest | msg/s | spread | peak RSS | verdict |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|");
        for c in &cells {
            let v = verdict(c, &cells, noise, isolated);
            match &c.status {
                CellStatus::Completed => {
                    let vs = newest.map_or("–".into(), |n| {
                        format!("{:.2}×", c.cpu_us_per_msg / n.cpu_us_per_msg)
                    });
                    let _ = writeln!(
                        out,
                        "| v{} | {:.3} | {vs} | {:.0} | {:.1} % | {} MiB | {v} |",
                        c.cell.version(),
                        c.cpu_us_per_msg,
                        c.msgs_per_sec,
                        c.spread * 100.0,
                        c.peak_rss_kib / 1024
                    );
                }
                CellStatus::Abandoned { reason } | CellStatus::Error { reason, .. } => {
                    let _ = writeln!(
                        out,
                        "| v{} | – | – | – | – | – | {v}: {reason} |",
                        c.cell.version()
                    );
                }
            }
        }
    }
    out
}

/// Appends the per-record cost growth from batch100 to batch1000 against the newest version's, when
/// the sweep has the cells to say it.
pub(super) fn growth(tables: &mut String, results: &[SweepResult]) {
    let growth = kbench_bench::sweep::growth(results);
    if growth.is_empty() {
        return;
    }
    let _ = writeln!(
        tables,
        "\nPer-record cost growth, batch100 → batch1000 (CPU/msg ratio), against the newest version's"
    );
    let _ = writeln!(
        tables,
        "| version | acks | batch100 µs/msg | batch1000 µs/msg | growth | vs newest | verdict |"
    );
    let _ = writeln!(tables, "|---|---|---|---|---|---|---|");
    for g in &growth {
        let _ = writeln!(
            tables,
            "| v{} | {} | {:.3} | {:.3} | {:.2}× | {:.2}× | {} |",
            g.version,
            g.acks,
            g.batch100_us,
            g.batch1000_us,
            g.growth,
            g.vs_newest,
            if g.worse {
                "grows > 10 % faster than newest"
            } else {
                "ok"
            }
        );
    }
}
