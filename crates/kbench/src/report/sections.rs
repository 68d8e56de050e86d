//! The report's per-kind sections: a run's accounting, a sweep's and a codec run's tables, a
//! comparison's verdicts.

use kbench_bench::codec::{Api, CellResult, CodecDocument};
use kbench_bench::compare::{CompareDocument, Verdict};
use kbench_bench::distributed::AgentOutcome;
use kbench_bench::sweep::{SweepCell, SweepCellDoc};
use kbench_wire::ApiKey;

use super::*;

pub(super) fn accounting(h: &mut String, label: &str, run: &Run) {
    let _ = write!(
        h,
        "<h2>{} — {}</h2>",
        escape(label),
        escape(run.kind().name())
    );
    h.push_str("<h3>Counts and accounting</h3><table>");
    for (f, x) in run.counts() {
        let bad = matches!(
            (f, x),
            ("records_failed" | "records_lost", Cell::Count(n)) if n > 0
        );
        let _ = write!(
            h,
            "<tr><th class=\"l\">{f}</th><td{}>{}</td></tr>",
            if bad { " class=\"bad\"" } else { "" },
            x.text()
        );
    }
    if let Some((s, a, f)) = run.sent_acked_failed() {
        let ok = s == a + f;
        let _ = write!(
            h,
            "<tr><th class=\"l\">sent = acked + failed</th><td class=\"{}\">{}</td></tr>",
            if ok { "good" } else { "bad" },
            if ok { "holds" } else { "does NOT hold" }
        );
    }
    h.push_str("</table><h3>Method</h3><table>");
    let row = |h: &mut String, k: &str, val: String| {
        let _ = write!(
            h,
            "<tr><th class=\"l\">{}</th><td class=\"l\">{val}</td></tr>",
            escape(k)
        );
    };
    for (k, versions) in run.versions() {
        if let Some(m) = versions.filter(|m| !m.is_empty()) {
            let list: Vec<String> = m.iter().map(|(a, n)| format!("{a} v{n}")).collect();
            row(h, k, escape(&list.join(", ")));
        }
    }
    if let Some(seed) = run.seed() {
        row(h, "seed", seed.to_string());
    }
    if let Some(clock) = run.clock() {
        row(h, "clock", escape(clock));
    }
    row(h, "start_time", escape(run.start_time()));
    row(h, "end_time", escape(run.end_time()));
    let env = run.environment();
    row(
        h,
        "environment",
        escape(&format!(
            "kbench {} on {} ({} cores, {} {})",
            env.kbench_version, env.hostname, env.cores, env.os, env.arch
        )),
    );
    if let Some(s) = run.saturation() {
        row(
            h,
            "saturation",
            if s.reasons.is_empty() {
                "not saturated".into()
            } else {
                format!(
                    "<span class=\"bad\">{}</span>",
                    escape(&s.reasons.join("; "))
                )
            },
        );
    }
    if let Some(d) = run.distributed() {
        let list: Vec<String> = d
            .agents
            .iter()
            .map(|a| {
                format!(
                    "{} ({}, {}, clock ± {} µs)",
                    a.agent,
                    a.role,
                    match a.status {
                        AgentOutcome::Finished => "finished",
                        AgentOutcome::Lost => "lost",
                    },
                    a.clock.bound_us.map_or("?".into(), |b| b.to_string())
                )
            })
            .collect();
        row(h, "agents", escape(&list.join("; ")));
    }
    if let Some(settings) = run.settings().as_object() {
        let list: Vec<String> = settings
            .iter()
            .filter(|(_, x)| !x.is_object() && !x.is_array() && !x.is_null())
            .map(|(k, x)| {
                format!(
                    "{k}={}",
                    x.as_str().map_or_else(|| x.to_string(), str::to_string)
                )
            })
            .collect();
        row(h, "settings", escape(&list.join(", ")));
    }
    h.push_str("</table>");
    if let Some(g) = run_group(run) {
        group(h, g);
    }
}

/// A run's consumer group block: a consume's, or an e2e's consumer side's.
pub(super) fn run_group(run: &Run) -> Option<&kbench_bench::consume::group::GroupReport> {
    match run {
        Run::Consume(d) => d.group.as_ref(),
        Run::E2e(d) => d.group.as_ref(),
        _ => None,
    }
}

/// A consumer group run's members, rebalances and stranded partitions (`group`).
fn group(h: &mut String, g: &kbench_bench::consume::group::GroupReport) {
    let ms = |v: f64| format!("{v:.0}");
    let partitions = |m: &std::collections::BTreeMap<i32, f64>| {
        m.iter()
            .map(|(p, v)| format!("{p}: {} ms", ms(*v)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    h.push_str("<h3>Consumer group</h3><table><tr><th class=\"l\">member</th><th>started s</th><th>ended s</th><th class=\"l\">ended</th><th>records</th><th>duplicated</th><th>joins</th></tr>");
    for m in &g.members {
        let _ = write!(
            h,
            "<tr><td class=\"l\">#{}</td><td>{:.1}</td><td>{:.1}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            m.member,
            m.started_s,
            m.ended_s,
            escape(&m.ended),
            m.records,
            m.duplicated
                .map_or_else(|| Cell::Unknown.text(), |d| d.to_string()),
            m.joins.len()
        );
    }
    h.push_str("</table><table><tr><th>rebalance at s</th><th>took ms</th><th class=\"l\">cause</th><th>JoinGroup max ms</th><th>SyncGroup max ms</th><th title=\"takeover_ms: from the fault to the first record read from the last partition that moved\">takeover ms</th><th class=\"l\">partitions without a reader</th></tr>");
    for r in &g.rebalances {
        let _ = write!(
            h,
            "<tr><td>{:.1}</td><td>{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
            r.began_s,
            ms((r.ended_s - r.began_s) * 1e3),
            escape(&r.cause),
            ms(r.join_group_ms_max),
            ms(r.sync_group_ms_max),
            r.takeover_ms.map_or_else(|| "—".to_string(), ms),
            escape(&partitions(&r.partitions_unowned_ms))
        );
    }
    h.push_str("</table>");
    if !g.partitions_unowned_at_end_ms.is_empty() {
        let _ = write!(
            h,
            "<p class=\"bad\">Partitions without a reader when the run ended: {}</p>",
            escape(&partitions(&g.partitions_unowned_at_end_ms))
        );
    }
}

/// A heat-map colour for a ratio against the reference (1 = white; worse red, better green).
fn heat(ratio: f64, lower_is_better: bool) -> String {
    if !ratio.is_finite() {
        return "#fff".into();
    }
    let worse = if lower_is_better {
        ratio - 1.0
    } else {
        1.0 - ratio
    };
    let t = (worse.abs() / 0.5).min(1.0);
    let (r, g, b) = if worse > 0.0 {
        (255.0, 255.0 - 130.0 * t, 255.0 - 130.0 * t)
    } else {
        (255.0 - 130.0 * t, 255.0, 255.0 - 130.0 * t)
    };
    format!("#{:02x}{:02x}{:02x}", r as u8, g as u8, b as u8)
}

pub(super) fn sweep(h: &mut String, label: &str, cells: &[SweepCellDoc]) {
    let _ = write!(
        h,
        "<h2>{} — sweep</h2><p class=\"muted\">Client CPU µs per message for each pinned version; each cell coloured by its ratio to the newest version of its row group (red: costlier, green: cheaper).</p>",
        escape(label)
    );
    // A row group is one shape: a Produce workload and acks, or a Fetch max_bytes — each against
    // its own newest version, as the CLI's tables have it.
    let group = |c: &SweepCellDoc| match c.result.cell {
        SweepCell::Produce { workload, acks, .. } => (Some((workload, acks)), None),
        SweepCell::Fetch { max_bytes, .. } => (None, Some(max_bytes)),
    };
    for (api, name) in [(ApiKey::Produce, "produce"), (ApiKey::Fetch, "fetch")] {
        let mut rows: Vec<&SweepCellDoc> = cells
            .iter()
            .filter(|c| c.result.cell.api() == api)
            .collect();
        if rows.is_empty() {
            continue;
        }
        rows.sort_by_key(|c| (group(c), c.result.cell.version()));
        let newest = |c: &SweepCellDoc| {
            rows.iter()
                .filter(|o| group(o) == group(c) && o.result.cpu_us_per_msg.is_finite())
                .max_by_key(|o| o.result.cell.version())
                .map(|o| o.result.cpu_us_per_msg)
        };
        let _ = write!(
            h,
            "<h3>{name}</h3><table><tr><th class=\"l\">cell</th><th>version</th><th>CPU µs/msg</th><th>vs newest</th><th>msgs/s</th><th>spread</th><th class=\"l\">verdict</th></tr>"
        );
        for c in &rows {
            let r = &c.result;
            let ratio = match newest(c) {
                Some(b) if b > 0.0 && r.cpu_us_per_msg.is_finite() => r.cpu_us_per_msg / b,
                _ => f64::NAN,
            };
            let figure = |x: f64| {
                if x.is_finite() {
                    Cell::Rate(x).text()
                } else {
                    Cell::Unknown.text()
                }
            };
            let _ = write!(
                h,
                "<tr><td class=\"l\">{}</td><td>{}</td><td style=\"background:{}\">{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
                escape(&r.label),
                r.cell.version(),
                heat(ratio, true),
                figure(r.cpu_us_per_msg),
                if ratio.is_finite() {
                    format!("{ratio:.3}")
                } else {
                    "–".into()
                },
                figure(r.msgs_per_sec),
                figure(r.spread),
                escape(&c.verdict)
            );
        }
        h.push_str("</table>");
    }
}

pub(super) fn codec(h: &mut String, label: &str, d: &CodecDocument) {
    let _ = write!(h, "<h2>{} — codec</h2>", escape(label));
    let mut cells: Vec<&CellResult> = d.cells.iter().collect();
    // Grouped as people read them: API, shape, batch size, compression, then version.
    cells.sort_by_key(|c| {
        let s = &c.spec;
        (
            s.api,
            s.shape,
            s.records,
            s.compression,
            s.subject,
            s.version,
        )
    });
    let rows: Vec<(String, f64, usize)> = cells
        .iter()
        .filter(|c| c.skipped.is_none() && c.ns_per_record.is_finite())
        .map(|c| {
            (
                c.label.clone(),
                c.ns_per_record,
                usize::from(c.spec.api == Api::Fetch),
            )
        })
        .collect();
    if !rows.is_empty() {
        h.push_str(&svg::bars(
            "codec-ns-per-record",
            "ns per record, by version and shape (blue: produce, orange: fetch)",
            "ns",
            &rows,
        ));
    }
    h.push_str("<table><tr><th class=\"l\">cell</th><th>ns/record</th><th>spread</th><th>allocs/record</th><th>wire bytes</th></tr>");
    let figure = |x: f64| {
        if x.is_finite() {
            Cell::Rate(x).text()
        } else {
            Cell::Unknown.text()
        }
    };
    for c in &cells {
        let _ = write!(
            h,
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&c.label),
            match &c.skipped {
                None => figure(c.ns_per_record),
                Some(why) => format!("skipped: {}", escape(why)),
            },
            figure(c.spread),
            Cell::rate(c.allocs_per_record).text(),
            c.wire_bytes
        );
    }
    h.push_str("</table>");
}

pub(super) fn compare(h: &mut String, label: &str, d: &CompareDocument) {
    let _ = write!(
        h,
        "<h2>{} — compare</h2><p class=\"muted\">B/A for each cell and metric with its 95 % bootstrap confidence interval; red a regression, green an improvement, grey inside the noise. A: {}; B: {}.</p>",
        escape(label),
        escape(&d.baseline),
        escape(&d.candidate)
    );
    let colour = |v: Verdict| match v {
        Verdict::Regression => "#b00020",
        Verdict::Improvement => "#006b3c",
        Verdict::InsideNoise
        | Verdict::TooFewRepetitions
        | Verdict::Identical
        | Verdict::NoRatio => "#888888",
    };
    // The plot names each row by its number in the table and its metric (cells are long).
    let plot: Vec<(String, f64, f64, f64, &str)> = d
        .rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            (
                format!("{} · {}", i + 1, r.metric),
                r.ratio,
                r.ci_low,
                r.ci_high,
                colour(r.verdict),
            )
        })
        .collect();
    if !plot.is_empty() {
        h.push_str(&svg::intervals("compare-ratios", "B/A with 95 % CI", &plot));
    }
    h.push_str("<table><tr><th>#</th><th class=\"l\">cell</th><th class=\"l\">metric</th><th>A</th><th>B</th><th>B/A</th><th>95 % CI</th><th class=\"l\">verdict</th></tr>");
    let figure = |x: f64| {
        if x.is_finite() {
            Cell::Rate(x).text()
        } else {
            Cell::Unknown.text()
        }
    };
    for (i, r) in d.rows.iter().enumerate() {
        let _ = write!(
            h,
            "<tr><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}–{}</td><td class=\"l\" style=\"color:{}\">{}</td></tr>",
            i + 1,
            escape(&r.cell),
            escape(&r.metric),
            figure(r.a_median),
            figure(r.b_median),
            figure(r.ratio),
            figure(r.ci_low),
            figure(r.ci_high),
            colour(r.verdict),
            r.verdict.label()
        );
    }
    h.push_str("</table>");
}
