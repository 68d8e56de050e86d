//! The sweep's tables, Markdown as printed: one per group of cells, and the per-record cost growth.

use std::collections::{BTreeMap, BTreeSet};
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
    let negotiated = negotiated(results);
    if !negotiated.is_empty() {
        let _ = writeln!(out, "Versions negotiated by the cells: {negotiated}");
    }
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

/// Every API's versions the cells' connections used, in API-key order: `ApiVersions v1, Metadata
/// v5, Produce v5` (several versions of one API joined by `/`).
fn negotiated(results: &[SweepResult]) -> String {
    let mut seen: BTreeMap<i16, (String, BTreeSet<i16>)> = BTreeMap::new();
    for r in results {
        for (name, v) in &r.negotiated_versions {
            let key = kbench_wire::ApiKey::iter()
                .find(|k| kbench_wire::api_name(*k) == *name)
                .map_or(i16::MAX, |k| k as i16);
            seen.entry(key)
                .or_insert_with(|| (name.clone(), BTreeSet::new()))
                .1
                .insert(*v);
        }
    }
    let parts: Vec<String> = seen
        .into_values()
        .map(|(name, versions)| {
            let vs: Vec<String> = versions.iter().map(|v| format!("v{v}")).collect();
            format!("{name} {}", vs.join("/"))
        })
        .collect();
    parts.join(", ")
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
