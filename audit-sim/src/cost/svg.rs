//! The report's chart as a self-contained SVG ([`render_svg`]).

use super::format::{fmt_bytes, fmt_money, fmt_sig, fmt_usd};
use super::markdown::opt;
use super::model::{CostReport, Row};
use super::quoted::PAPER_MB;

const SVG_W: f64 = 980.0;
const BAR_X0: f64 = 24.0;
const BAR_W: f64 = 600.0;
const ROW_H: f64 = 40.0;
const BLUE: [&str; 3] = ["#1f5fa8", "#5b9bd5", "#b3d3f0"];
const GREY: [&str; 3] = ["#4d4d4d", "#8f8f8f", "#cdcdcd"];

/// A log-scale axis over [10^lo, 10^hi].
struct LogAxis {
    lo: i32,
    hi: i32,
}

impl LogAxis {
    fn for_values(values: impl Iterator<Item = f64>) -> LogAxis {
        let (mut min, mut max) = (f64::INFINITY, 0.0f64);
        for v in values.filter(|v| v.is_finite() && *v > 0.0) {
            min = min.min(v);
            max = max.max(v);
        }
        if !min.is_finite() {
            return LogAxis { lo: 0, hi: 1 };
        }
        let mut lo = min.log10().floor() as i32;
        if min.log10() - f64::from(lo) < 0.15 {
            lo -= 1;
        }
        let mut hi = max.log10().ceil() as i32;
        if hi <= lo {
            hi = lo + 1;
        }
        LogAxis { lo, hi }
    }

    fn x(&self, v: f64) -> f64 {
        let t = (v.max(1e-300).log10() - f64::from(self.lo)) / f64::from(self.hi - self.lo);
        BAR_X0 + BAR_W * t.clamp(0.0, 1.0)
    }
}

/// `s` escaped for SVG text and attribute values (control characters
/// but newline and tab become spaces).
pub(crate) fn xml(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

/// One panel's bar: segments (value, colour index, legend name) and the
/// value label.
struct Bar {
    label: String,
    quoted: bool,
    total: Option<f64>,
    parts: Vec<(f64, usize)>,
    text: String,
}

fn panel(
    out: &mut String,
    y0: f64,
    title: &str,
    legend: &[&str],
    bars: &[Bar],
    tick: impl Fn(i32) -> String,
) -> f64 {
    use std::fmt::Write as _;
    let axis = LogAxis::for_values(bars.iter().filter_map(|b| b.total));
    let _ = writeln!(
        out,
        r#"<text x="{BAR_X0}" y="{:.1}" font-size="16" font-weight="bold">{}</text>"#,
        y0 + 18.0,
        xml(title)
    );
    // Legend: the segment shades, in blue (ours) and grey (quoted).
    let mut lx = BAR_X0;
    let ly = y0 + 30.0;
    for (i, name) in legend.iter().enumerate() {
        let _ = writeln!(
            out,
            r#"<rect x="{lx:.1}" y="{ly:.1}" width="10" height="10" fill="{}"/><rect x="{:.1}" y="{ly:.1}" width="10" height="10" fill="{}"/><text x="{:.1}" y="{:.1}" font-size="11">{}</text>"#,
            BLUE[i],
            lx + 11.0,
            GREY[i],
            lx + 25.0,
            ly + 9.0,
            xml(name)
        );
        lx += 40.0 + 6.5 * name.chars().count() as f64;
    }
    if legend.len() > 1 {
        let _ = writeln!(
            out,
            r##"<text x="{lx:.1}" y="{:.1}" font-size="11" fill="#555">(segments: each part's share of the total)</text>"##,
            ly + 9.0
        );
    }
    let top = y0 + 48.0;
    let bottom = top + ROW_H * bars.len() as f64;
    // Grid and ticks at every decade.
    for k in axis.lo..=axis.hi {
        let x = axis.x(10f64.powi(k));
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" y1="{top:.1}" x2="{x:.1}" y2="{bottom:.1}" stroke="#e3e3e3"/><text x="{x:.1}" y="{:.1}" font-size="10" text-anchor="{}" fill="#555">{}</text>"##,
            bottom + 14.0,
            if k == axis.lo { "start" } else { "middle" },
            xml(&tick(k))
        );
    }
    let _ = writeln!(
        out,
        r##"<line x1="{BAR_X0}" y1="{top:.1}" x2="{BAR_X0}" y2="{bottom:.1}" stroke="#888"/>"##
    );
    for (i, bar) in bars.iter().enumerate() {
        let y = top + ROW_H * i as f64;
        let colours = if bar.quoted { &GREY } else { &BLUE };
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" font-size="12"{}>{}</text>"#,
            BAR_X0 + 4.0,
            y + 13.0,
            if bar.quoted {
                r##" fill="#444""##
            } else {
                r#" font-weight="bold""#
            },
            xml(&bar.label)
        );
        let by = y + 17.0;
        match bar.total {
            Some(total) if total > 0.0 => {
                let end = axis.x(total);
                let len = end - BAR_X0;
                let sum: f64 = bar.parts.iter().map(|p| p.0).sum();
                let mut x = BAR_X0;
                for &(v, c) in &bar.parts {
                    if v <= 0.0 || sum <= 0.0 {
                        continue;
                    }
                    let w = len * v / sum;
                    let _ = writeln!(
                        out,
                        r#"<rect x="{x:.2}" y="{by:.1}" width="{w:.2}" height="16" fill="{}"/>"#,
                        colours[c.min(2)]
                    );
                    x += w;
                }
                let _ = writeln!(
                    out,
                    r#"<text x="{:.1}" y="{:.1}" font-size="12">{}</text>"#,
                    end + 6.0,
                    by + 12.5,
                    xml(&bar.text)
                );
            }
            _ => {
                let _ = writeln!(
                    out,
                    r##"<text x="{:.1}" y="{:.1}" font-size="12" font-style="italic" fill="#777">{}</text>"##,
                    BAR_X0 + 6.0,
                    by + 12.5,
                    xml(&bar.text)
                );
            }
        }
    }
    bottom + 24.0
}

/// The chart: weekly server cost per client and weekly communication per
/// client, one bar per scheme on log scales; this system in blue, quoted
/// rows in grey. Self-contained SVG (no fonts, scripts or links).
pub fn render_svg(r: &CostReport) -> String {
    use std::fmt::Write as _;
    let chart_label = |row: &Row| {
        if row.source.is_quoted() {
            format!("{} — quoted, not measured", row.scheme)
        } else {
            row.scheme.clone()
        }
    };
    let cost: Vec<Bar> = r
        .rows
        .iter()
        .map(|row| Bar {
            label: chart_label(row),
            quoted: row.source.is_quoted(),
            total: row.total_usd_per_client_week,
            parts: vec![
                (row.computation_usd.unwrap_or(0.0), 0),
                (row.communication_usd.unwrap_or(0.0), 1),
            ],
            text: match (
                row.total_usd_per_client_week,
                row.usd_per_million_clients_week,
            ) {
                (Some(t), Some(m)) => format!("{} · {} per 10⁶ clients", fmt_usd(t), fmt_money(m)),
                _ => "cost not stated (communication only)".into(),
            },
        })
        .collect();
    let comm: Vec<Bar> = r
        .rows
        .iter()
        .map(|row| {
            let known =
                row.upload_bytes_per_week.is_some() || row.download_bytes_per_week.is_some();
            let parts = if known {
                vec![
                    (row.upload_bytes_per_week.unwrap_or(0.0), 0),
                    (row.download_bytes_per_week.unwrap_or(0.0), 1),
                    (row.offline_download_bytes.unwrap_or(0.0), 2),
                ]
            } else {
                vec![(row.total_bytes_per_week.unwrap_or(0.0), 1)]
            };
            let mut text = opt(row.total_bytes_per_week, fmt_bytes);
            if known {
                let mut d = vec![
                    format!("up {}", opt(row.upload_bytes_per_week, fmt_bytes)),
                    format!("down {}", opt(row.download_bytes_per_week, fmt_bytes)),
                ];
                if let Some(o) = row.offline_download_bytes.filter(|o| *o > 0.0) {
                    d.push(format!("offline {}", fmt_bytes(o)));
                }
                text = format!("{text} ({})", d.join(", "));
            } else {
                text.push_str(" in total");
            }
            Bar {
                label: chart_label(row),
                quoted: row.source.is_quoted(),
                total: row.total_bytes_per_week.map(|b| b / PAPER_MB),
                parts,
                text,
            }
        })
        .collect();
    let n = r.rows.len() as f64;
    let panel_h = 48.0 + ROW_H * n + 24.0;
    let height = 70.0 + 2.0 * panel_h + 30.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{SVG_W}" height="{height:.0}" viewBox="0 0 {SVG_W} {height:.0}" font-family="sans-serif">
<title>Private SCT auditing: weekly server cost and communication per client</title>
<rect x="0" y="0" width="{SVG_W}" height="{height:.0}" fill="white"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text x="{BAR_X0}" y="26" font-size="19" font-weight="bold">Private SCT auditing: cost per client-week</text>"#
    );
    let _ = writeln!(
        s,
        r##"<text x="{BAR_X0}" y="46" font-size="12" fill="#333">{}</text>"##,
        xml(&format!(
            "Blue: this system (measured demo, extrapolated to 2^{} bits). Grey: quoted from YPIR §4.5 Table 6 and DeB24, not measured.",
            r.target_db_bits
        ))
    );
    let _ = writeln!(
        s,
        r##"<text x="{BAR_X0}" y="62" font-size="12" fill="#333">{}</text>"##,
        xml(&format!(
            "Prices ${}/outbound GB, ${}/core-second; {} audits per client-week. Both axes logarithmic.",
            fmt_sig(r.prices.usd_per_outbound_gb, 3),
            fmt_sig(r.prices.usd_per_core_second, 3),
            fmt_sig(r.measured.audits_per_client_week, 3)
        ))
    );
    let y = panel(
        &mut s,
        70.0,
        "Weekly server cost per client (USD, log scale)",
        &["computation", "communication"],
        &cost,
        |k| format!("${}", fmt_sig(10f64.powi(k), 1)),
    );
    panel(
        &mut s,
        y,
        "Weekly communication per client (MiB, log scale)",
        &["upload", "download", "offline (hint / manifest)"],
        &comm,
        |k| format!("{} MiB", fmt_sig(10f64.powi(k), 1)),
    );
    let _ = writeln!(
        s,
        r##"<text x="{BAR_X0}" y="{:.0}" font-size="10" fill="#777">{}</text>"##,
        height - 10.0,
        xml(&format!(
            "Generated {}; server times {} — see cost-report.md for the numbers and assumptions.",
            r.generated_at,
            r.timings.short()
        ))
    );
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::cost::model::{build_report, Prices};
    use crate::cost::test_util::{assert_json_close, check_xml, measured, pt, times};
    use crate::cost::{write_report, CostReport};

    #[test]
    fn svg_is_well_formed_and_escaped() {
        let pts = [pt(1e6, 0.01), pt(1e8, 0.02), pt(1e9, 0.05)];
        let mut m = measured();
        m.entries = 7;
        let mut r = build_report(&m, &times(&pts), &Prices::default(), 36).unwrap();
        r.rows[0].scheme = "demo <&> \"quoted\" 'x'".into();
        let svg = render_svg(&r);
        check_xml(&svg);
        assert!(svg.contains("demo &lt;&amp;&gt; &quot;quoted&quot; &apos;x&apos;"));
        assert!(svg.contains("YPIR (paper) — quoted, not measured"));
        assert!(svg.contains(GREY[0]) && svg.contains(BLUE[0]));
        // Write all three files.
        let dir = tempfile::tempdir().unwrap();
        let paths = write_report(&r, &dir.path().join("out")).unwrap();
        let json = std::fs::read_to_string(&paths.json).unwrap();
        assert_json_close(&serde_json::from_str::<CostReport>(&json).unwrap(), &r);
        check_xml(&std::fs::read_to_string(&paths.svg).unwrap());
        assert!(std::fs::read_to_string(&paths.markdown)
            .unwrap()
            .starts_with("# "));
    }
}
