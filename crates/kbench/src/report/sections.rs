//! The report's per-kind sections: a run's accounting, a sweep's and a codec run's tables, a
//! comparison's verdicts.

use serde_json::Value;

use super::*;

pub(super) fn accounting(h: &mut String, d: &Doc) {
    let v = &d.value;
    let _ = write!(h, "<h2>{} — {}</h2>", escape(&d.label), escape(d.kind()));
    h.push_str("<h3>Counts and accounting</h3><table>");
    for f in [
        "records_sent",
        "records_produced",
        "records_acked",
        "records_failed",
        "records_consumed",
        "records_lost",
        "records_late",
        "records_duplicated",
        "records_unexpected",
        "bytes_acked",
        "records_per_sec",
        "mb_per_sec",
        "client_cpu_us_per_record",
        "peak_rss_kib",
    ] {
        if let Some(x) = v.get(f) {
            let class =
                if (f == "records_failed" || f == "records_lost") && x.as_u64().unwrap_or(0) > 0 {
                    " class=\"bad\""
                } else {
                    ""
                };
            let _ = write!(
                h,
                "<tr><th class=\"l\">{f}</th><td{class}>{}</td></tr>",
                num(x)
            );
        }
    }
    if let (Some(s), Some(a), Some(f)) = (
        v["records_sent"]
            .as_u64()
            .or(v["records_produced"].as_u64()),
        v["records_acked"].as_u64(),
        v["records_failed"].as_u64(),
    ) {
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
    for k in ["negotiated_versions", "pinned_versions"] {
        if let Some(m) = v
            .get(k)
            .and_then(Value::as_object)
            .filter(|m| !m.is_empty())
        {
            let list: Vec<String> = m.iter().map(|(a, n)| format!("{a} v{n}")).collect();
            row(h, k, escape(&list.join(", ")));
        }
    }
    for k in ["seed", "clock", "start_time", "end_time"] {
        if let Some(x) = v.get(k).filter(|x| !x.is_null()) {
            row(h, k, num(x));
        }
    }
    if let Some(env) = v.get("environment") {
        row(
            h,
            "environment",
            escape(&format!(
                "kbench {} on {} ({} cores, {} {})",
                env["kbench_version"].as_str().unwrap_or("?"),
                env["hostname"].as_str().unwrap_or("?"),
                env["cores"],
                env["os"].as_str().unwrap_or("?"),
                env["arch"].as_str().unwrap_or("?")
            )),
        );
    }
    if let Some(reasons) = v.pointer("/saturation/reasons").and_then(Value::as_array) {
        let text: Vec<&str> = reasons.iter().filter_map(Value::as_str).collect();
        row(
            h,
            "saturation",
            if text.is_empty() {
                "not saturated".into()
            } else {
                format!("<span class=\"bad\">{}</span>", escape(&text.join("; ")))
            },
        );
    }
    if let Some(agents) = v.pointer("/distributed/agents").and_then(Value::as_array) {
        let list: Vec<String> = agents
            .iter()
            .map(|a| {
                format!(
                    "{} ({}, {}, clock ± {} µs)",
                    a["agent"].as_str().unwrap_or("?"),
                    a["role"].as_str().unwrap_or("?"),
                    a["status"].as_str().unwrap_or("?"),
                    a.pointer("/clock/bound_us")
                        .map_or("?".into(), |b| b.to_string())
                )
            })
            .collect();
        row(h, "agents", escape(&list.join("; ")));
    }
    if let Some(settings) = v.get("settings").and_then(Value::as_object) {
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

pub(super) fn sweep(h: &mut String, d: &Doc) {
    let _ = write!(
        h,
        "<h2>{} — sweep</h2><p class=\"muted\">Client CPU µs per message for each pinned version; each cell coloured by its ratio to the newest version of its row group (red: costlier, green: cheaper).</p>",
        escape(&d.label)
    );
    let cells = d.value["cells"].as_array().cloned().unwrap_or_default();
    for api in ["produce", "fetch"] {
        let mut rows: Vec<&Value> = cells
            .iter()
            .filter(|c| c.pointer("/cell/api").and_then(Value::as_str) == Some(api))
            .collect();
        if rows.is_empty() {
            continue;
        }
        // A row group is one shape: a Produce workload and acks, or a Fetch max_bytes — each
        // against its own newest version, as the CLI's tables have it.
        let group = |c: &Value| {
            let cell = &c["cell"];
            format!(
                "{} {} {}",
                cell.get("workload").and_then(Value::as_str).unwrap_or(""),
                cell.get("acks")
                    .and_then(Value::as_str)
                    .map(|a| format!("acks={a}"))
                    .unwrap_or_default(),
                cell.get("max_bytes")
                    .and_then(Value::as_i64)
                    .map(|b| format!("max_bytes={b}"))
                    .unwrap_or_default()
            )
        };
        rows.sort_by_key(|c| {
            (
                group(c),
                c.pointer("/cell/version")
                    .and_then(Value::as_i64)
                    .unwrap_or(-1),
            )
        });
        let newest = |g: &str| {
            rows.iter()
                .filter(|c| group(c) == g && c["cpu_us_per_msg"].as_f64().is_some())
                .max_by_key(|c| {
                    c.pointer("/cell/version")
                        .and_then(Value::as_i64)
                        .unwrap_or(-1)
                })
                .and_then(|c| c["cpu_us_per_msg"].as_f64())
        };
        let _ = write!(
            h,
            "<h3>{api}</h3><table><tr><th class=\"l\">cell</th><th>version</th><th>CPU µs/msg</th><th>vs newest</th><th>msgs/s</th><th>spread</th><th class=\"l\">verdict</th></tr>"
        );
        for c in &rows {
            let cpu = c["cpu_us_per_msg"].as_f64();
            let ratio = match (cpu, newest(&group(c))) {
                (Some(a), Some(b)) if b > 0.0 => a / b,
                _ => f64::NAN,
            };
            let _ = write!(
                h,
                "<tr><td class=\"l\">{}</td><td>{}</td><td style=\"background:{}\">{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
                escape(c["label"].as_str().unwrap_or("")),
                num(&c["cell"]["version"]),
                heat(ratio, true),
                num(&c["cpu_us_per_msg"]),
                if ratio.is_finite() {
                    format!("{ratio:.3}")
                } else {
                    "–".into()
                },
                num(&c["msgs_per_sec"]),
                num(&c["spread"]),
                num(&c["verdict"])
            );
        }
        h.push_str("</table>");
    }
}

pub(super) fn codec(h: &mut String, d: &Doc) {
    let _ = write!(h, "<h2>{} — codec</h2>", escape(&d.label));
    let mut cells = d.value["cells"].as_array().cloned().unwrap_or_default();
    // Grouped as people read them: API, shape, batch size, compression, then version.
    cells.sort_by_key(|c| {
        let s = &c["spec"];
        (
            s["api"].as_str().unwrap_or("").to_string(),
            s["shape"].as_str().unwrap_or("").to_string(),
            s["records"].as_u64().unwrap_or(0),
            s["compression"].as_str().unwrap_or("").to_string(),
            s["subject"].as_str().unwrap_or("").to_string(),
            s["version"].as_i64().unwrap_or(-1),
        )
    });
    let rows: Vec<(String, f64, usize)> = cells
        .iter()
        .filter(|c| c["skipped"].is_null())
        .filter_map(|c| {
            let api = c.pointer("/spec/api").and_then(Value::as_str).unwrap_or("");
            Some((
                c["label"].as_str()?.to_string(),
                c["ns_per_record"].as_f64()?,
                usize::from(api == "fetch"),
            ))
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
    for c in &cells {
        let _ = write!(
            h,
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(c["label"].as_str().unwrap_or("")),
            if c["skipped"].is_null() {
                num(&c["ns_per_record"])
            } else {
                format!("skipped: {}", num(&c["skipped"]))
            },
            num(&c["spread"]),
            num(&c["allocs_per_record"]),
            num(&c["wire_bytes"])
        );
    }
    h.push_str("</table>");
}

pub(super) fn compare(h: &mut String, d: &Doc) {
    let _ = write!(
        h,
        "<h2>{} — compare</h2><p class=\"muted\">B/A for each cell and metric with its 95 % bootstrap confidence interval; red a regression, green an improvement, grey inside the noise. A: {}; B: {}.</p>",
        escape(&d.label),
        num(&d.value["baseline"]),
        num(&d.value["candidate"])
    );
    let rows = d.value["rows"].as_array().cloned().unwrap_or_default();
    let colour = |v: &str| match v {
        "regression" => "#b00020",
        "improvement" => "#006b3c",
        _ => "#888888",
    };
    // The plot names each row by its number in the table and its metric (cells are long).
    let plot: Vec<(String, f64, f64, f64, &str)> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            (
                format!("{} · {}", i + 1, r["metric"].as_str().unwrap_or("")),
                r["ratio"].as_f64().unwrap_or(f64::NAN),
                r["ci_low"].as_f64().unwrap_or(f64::NAN),
                r["ci_high"].as_f64().unwrap_or(f64::NAN),
                colour(r["verdict"].as_str().unwrap_or("")),
            )
        })
        .collect();
    if !plot.is_empty() {
        h.push_str(&svg::intervals("compare-ratios", "B/A with 95 % CI", &plot));
    }
    h.push_str("<table><tr><th>#</th><th class=\"l\">cell</th><th class=\"l\">metric</th><th>A</th><th>B</th><th>B/A</th><th>95 % CI</th><th class=\"l\">verdict</th></tr>");
    for (i, r) in rows.iter().enumerate() {
        let verdict = r["verdict"].as_str().unwrap_or("");
        let _ = write!(
            h,
            "<tr><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}–{}</td><td class=\"l\" style=\"color:{}\">{}</td></tr>",
            i + 1,
            escape(r["cell"].as_str().unwrap_or("")),
            escape(r["metric"].as_str().unwrap_or("")),
            num(&r["a_median"]),
            num(&r["b_median"]),
            num(&r["ratio"]),
            num(&r["ci_low"]),
            num(&r["ci_high"]),
            colour(verdict),
            escape(&verdict.replace('_', " "))
        );
    }
    h.push_str("</table>");
}
