//! Inline SVG charts, written by kbench itself: a report must open with no network, so there is no
//! script library to load, and four chart shapes (percentile distribution, timeline, bars, interval
//! plot) are a few hundred lines of plain SVG whose output the tests can read. Every chart is an
//! `<svg class="chart" data-chart=NAME>` with one `<path class="series">` (or `<rect class="bar">`)
//! per series, so that a test can check each one is drawn and non-empty.

use std::fmt::Write as _;

const W: f64 = 720.0;
const H: f64 = 300.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 40.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 44.0;

/// Colours of series, in order (colour-blind safe: Okabe–Ito).
pub const PALETTE: &[&str] = &[
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442",
];

pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A round step for about `n` ticks over `span`.
fn step(span: f64, n: f64) -> f64 {
    if span <= 0.0 || !span.is_finite() {
        return 1.0;
    }
    let raw = span / n;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let nice = if norm < 1.5 {
        1.0
    } else if norm < 3.5 {
        2.0
    } else if norm < 7.5 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

fn fmt_num(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v.abs() >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// The frame: title, axes, y grid and labels; `x_ticks` as (position in data units, label).
struct Frame {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
}

impl Frame {
    fn x(&self, v: f64) -> f64 {
        LEFT + (v - self.x0) / (self.x1 - self.x0).max(1e-12) * (W - LEFT - RIGHT)
    }
    fn y(&self, v: f64) -> f64 {
        H - BOTTOM - (v - self.y0) / (self.y1 - self.y0).max(1e-12) * (H - TOP - BOTTOM)
    }

    fn open(
        &self,
        name: &str,
        title: &str,
        x_label: &str,
        y_label: &str,
        x_ticks: &[(f64, String)],
    ) -> String {
        let mut s = String::new();
        let _ = write!(
            s,
            r#"<svg class="chart" data-chart="{}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{}">"#,
            escape(name),
            escape(title)
        );
        let _ = write!(
            s,
            r#"<text x="{LEFT}" y="18" class="title">{}</text>"#,
            escape(title)
        );
        let ystep = step(self.y1 - self.y0, 5.0);
        let mut v = (self.y0 / ystep).ceil() * ystep;
        while v <= self.y1 + 1e-9 {
            let y = self.y(v);
            let _ = write!(
                s,
                r##"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end" class="tick">{}</text>"##,
                W - RIGHT,
                LEFT - 6.0,
                y + 4.0,
                fmt_num(v)
            );
            v += ystep;
        }
        for (xv, label) in x_ticks {
            let x = self.x(*xv);
            let _ = write!(
                s,
                r##"<line x1="{x:.1}" x2="{x:.1}" y1="{TOP}" y2="{}" stroke="#eee"/><text x="{x:.1}" y="{}" text-anchor="middle" class="tick">{}</text>"##,
                H - BOTTOM,
                H - BOTTOM + 16.0,
                escape(label)
            );
        }
        let _ = write!(
            s,
            r##"<line x1="{LEFT}" x2="{}" y1="{}" y2="{}" stroke="#333"/><line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{}" stroke="#333"/>"##,
            W - RIGHT,
            H - BOTTOM,
            H - BOTTOM,
            H - BOTTOM
        );
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle" class="axis">{}</text><text transform="translate(14 {}) rotate(-90)" text-anchor="middle" class="axis">{}</text>"#,
            (LEFT + W - RIGHT) / 2.0,
            H - 6.0,
            escape(x_label),
            (TOP + H - BOTTOM) / 2.0,
            escape(y_label)
        );
        s
    }
}

/// A legend row under the title.
fn legend(s: &mut String, names: &[&str]) {
    let mut x = W - RIGHT;
    for (i, name) in names.iter().enumerate().rev() {
        let w = 14.0 + 7.0 * name.chars().count() as f64;
        x -= w + 10.0;
        let c = PALETTE[i % PALETTE.len()];
        let _ = write!(
            s,
            r#"<rect x="{x:.1}" y="8" width="10" height="10" fill="{c}"/><text x="{:.1}" y="17" class="legend">{}</text>"#,
            x + 14.0,
            escape(name)
        );
    }
}

fn path(points: &[(f64, f64)], frame: &Frame) -> String {
    let mut d = String::new();
    for (i, (x, y)) in points.iter().enumerate() {
        let _ = write!(
            d,
            "{}{:.1},{:.1}",
            if i == 0 { "M" } else { " L" },
            frame.x(*x),
            frame.y(*y)
        );
    }
    d
}

/// Series of (x, y) points as lines.
pub struct Lines<'a> {
    pub name: &'a str,
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub series: Vec<(String, Vec<(f64, f64)>)>,
    /// Spans of x shaded behind the series, each with its label: the faults applied during a run.
    pub bands: Vec<(String, f64, f64)>,
}

/// A line chart with a linear x axis.
pub fn lines(c: &Lines) -> String {
    let all = c.series.iter().flat_map(|(_, p)| p.iter());
    let (mut x1, mut y1) = (0f64, 0f64);
    let mut x0 = f64::INFINITY;
    for (x, y) in all {
        x0 = x0.min(*x);
        x1 = x1.max(*x);
        y1 = y1.max(*y);
    }
    if !x0.is_finite() {
        x0 = 0.0;
    }
    let frame = Frame {
        x0,
        x1: x1.max(x0 + 1.0),
        y0: 0.0,
        y1: if y1 > 0.0 { y1 * 1.08 } else { 1.0 },
    };
    let xs = step(frame.x1 - frame.x0, 8.0);
    let mut ticks = Vec::new();
    let mut v = (frame.x0 / xs).ceil() * xs;
    while v <= frame.x1 + 1e-9 {
        ticks.push((v, fmt_num(v)));
        v += xs;
    }
    let mut s = frame.open(c.name, c.title, c.x_label, c.y_label, &ticks);
    for (i, (label, from, to)) in c.bands.iter().enumerate() {
        let (a, b) = (from.max(frame.x0), to.min(frame.x1));
        if b <= a {
            continue;
        }
        let (top, bottom) = (frame.y(frame.y1), frame.y(frame.y0));
        let _ = write!(
            s,
            r##"<rect class="fault" data-fault="{l}" x="{:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="#e8590c" fill-opacity="0.15"><title>{l}</title></rect><text x="{:.1}" y="{:.1}" class="legend" fill="#e8590c">{l}</text>"##,
            frame.x(a),
            (frame.x(b) - frame.x(a)).max(1.0),
            bottom - top,
            frame.x(a) + 2.0,
            top + 11.0 + 12.0 * (i % 6) as f64,
            l = escape(label),
        );
    }
    let names: Vec<&str> = c.series.iter().map(|(n, _)| n.as_str()).collect();
    legend(&mut s, &names);
    for (i, (name, points)) in c.series.iter().enumerate() {
        let _ = write!(
            s,
            r#"<path class="series" data-series="{}" d="{}" fill="none" stroke="{}" stroke-width="1.8"/>"#,
            escape(name),
            path(points, &frame),
            PALETTE[i % PALETTE.len()]
        );
    }
    s.push_str("</svg>");
    s
}

/// HdrHistogram's percentile plot: x is 1/(1−q) on a log scale (0 %, 90 %, 99 %, … 99.999 %),
/// y the value at that percentile (ms). `series`: (name, [(quantile, value ms)]).
pub fn percentiles(name: &str, title: &str, series: &[(String, Vec<(f64, f64)>)]) -> String {
    let x_of = |q: f64| (1.0 / (1.0 - q.min(0.999_999))).log10();
    let points: Vec<(String, Vec<(f64, f64)>)> = series
        .iter()
        .map(|(n, p)| {
            (
                n.clone(),
                p.iter()
                    .filter(|(q, _)| *q <= 0.999_99)
                    .map(|(q, v)| (x_of(*q), *v))
                    .collect(),
            )
        })
        .collect();
    let y1 = points
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(_, y)| *y))
        .fold(0.0, f64::max);
    let frame = Frame {
        x0: 0.0,
        x1: 5.0,
        y0: 0.0,
        y1: if y1 > 0.0 { y1 * 1.08 } else { 1.0 },
    };
    let ticks: Vec<(f64, String)> = ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"]
        .iter()
        .enumerate()
        .map(|(i, l)| (i as f64, l.to_string()))
        .collect();
    let mut s = frame.open(name, title, "percentile", "ms", &ticks);
    let names: Vec<&str> = points.iter().map(|(n, _)| n.as_str()).collect();
    legend(&mut s, &names);
    for (i, (n, p)) in points.iter().enumerate() {
        let _ = write!(
            s,
            r#"<path class="series" data-series="{}" d="{}" fill="none" stroke="{}" stroke-width="1.8"/>"#,
            escape(n),
            path(p, &frame),
            PALETTE[i % PALETTE.len()]
        );
    }
    s.push_str("</svg>");
    s
}

/// Horizontal bars: (label, value, colour index).
pub fn bars(name: &str, title: &str, unit: &str, rows: &[(String, f64, usize)]) -> String {
    let h = TOP + 18.0 * rows.len() as f64 + BOTTOM;
    let max = rows.iter().map(|r| r.1).fold(0.0, f64::max).max(1e-12);
    let label_w = 290.0;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="chart" data-chart="{}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {h}" width="{W}" height="{h}" role="img" aria-label="{}"><text x="8" y="18" class="title">{}</text>"#,
        escape(name),
        escape(title),
        escape(title)
    );
    for (i, (label, v, c)) in rows.iter().enumerate() {
        let y = TOP + 18.0 * i as f64;
        let w = (v / max * (W - label_w - 90.0)).max(0.5);
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end" class="tick">{}</text><rect class="bar" x="{label_w}" y="{:.1}" width="{w:.1}" height="13" fill="{}"/><text x="{:.1}" y="{:.1}" class="tick">{} {}</text>"#,
            label_w - 6.0,
            y + 11.0,
            escape(label),
            y + 1.0,
            PALETTE[c % PALETTE.len()],
            label_w + w + 4.0,
            y + 11.0,
            fmt_num(*v),
            escape(unit)
        );
    }
    s.push_str("</svg>");
    s
}

/// Ratios with their confidence intervals around 1: (label, ratio, low, high, colour).
pub fn intervals(name: &str, title: &str, rows: &[(String, f64, f64, f64, &str)]) -> String {
    let h = TOP + 22.0 * rows.len() as f64 + BOTTOM;
    let finite = |v: f64| if v.is_finite() { Some(v) } else { None };
    let lo = rows
        .iter()
        .filter_map(|r| finite(r.2))
        .fold(1.0, f64::min)
        .min(0.9);
    let hi = rows
        .iter()
        .filter_map(|r| finite(r.3))
        .fold(1.0, f64::max)
        .max(1.1);
    let label_w = 300.0;
    let x = |v: f64| label_w + (v - lo) / (hi - lo) * (W - label_w - 30.0);
    let mut s = String::new();
    let _ = write!(
        s,
        r##"<svg class="chart" data-chart="{}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {h}" width="{W}" height="{h}" role="img" aria-label="{}"><text x="8" y="18" class="title">{}</text><line class="series" x1="{:.1}" x2="{:.1}" y1="{TOP}" y2="{:.1}" stroke="#888" stroke-dasharray="4 3"/>"##,
        escape(name),
        escape(title),
        escape(title),
        x(1.0),
        x(1.0),
        h - BOTTOM
    );
    for (i, (label, ratio, l, u, colour)) in rows.iter().enumerate() {
        let y = TOP + 22.0 * i as f64 + 10.0;
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end" class="tick">{}</text>"#,
            label_w - 8.0,
            y + 4.0,
            escape(label)
        );
        if let (Some(l), Some(u)) = (finite(*l), finite(*u)) {
            let _ = write!(
                s,
                r#"<line x1="{:.1}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="{colour}" stroke-width="3"/>"#,
                x(l),
                x(u)
            );
        }
        if let Some(r) = finite(*ratio) {
            let _ = write!(
                s,
                r#"<circle class="bar" cx="{:.1}" cy="{y:.1}" r="4.5" fill="{colour}"/><text x="{:.1}" y="{:.1}" class="tick">{:.3}</text>"#,
                x(r),
                x(r) + 8.0,
                y - 5.0,
                r
            );
        }
    }
    for v in [lo, 1.0, hi] {
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" class="tick">{v:.2}</text>"#,
            x(v),
            h - BOTTOM + 16.0
        );
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_draw_their_series() {
        let l = lines(&Lines {
            name: "t",
            title: "records/s <per interval>",
            x_label: "s",
            y_label: "records/s",
            series: vec![("a & b".into(), vec![(0.0, 1.0), (1.0, 3.0)])],
            bands: vec![
                ("pause <1s>".into(), 0.25, 0.5),
                ("past the end".into(), 2.0, 3.0),
            ],
        });
        assert!(
            l.contains(r#"class="fault" data-fault="pause &lt;1s&gt;""#),
            "{l}"
        );
        assert!(
            !l.contains("past the end"),
            "a band outside the chart is not drawn"
        );
        assert!(
            l.contains(r#"data-series="a &amp; b""#) && l.contains("d=\"M"),
            "{l}"
        );
        assert!(l.contains("&lt;per interval&gt;"));
        let p = percentiles(
            "p",
            "latency",
            &[("x".into(), vec![(0.0, 1.0), (0.99, 5.0)])],
        );
        assert!(p.contains("99.999%") && p.contains("class=\"series\""));
        assert!(bars("b", "t", "ns", &[("v3".into(), 2.0, 0)]).contains("class=\"bar\""));
        let i = intervals("c", "t", &[("cell".into(), 1.1, 1.0, 1.2, "#c00")]);
        assert!(i.contains("<circle"));
        assert_eq!(step(97.0, 5.0), 20.0);
    }
}
