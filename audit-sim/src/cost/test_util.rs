//! Fixtures shared by the cost report's tests.

use super::fit::FitPoint;
use super::measure::{AnswerTimes, TimingSource};
use super::model::{CostReport, Measured};

pub(crate) fn pt(db_bytes: f64, seconds: f64) -> FitPoint {
    FitPoint {
        db_bytes,
        seconds,
        source: format!("synthetic {db_bytes}"),
        setup_seconds: None,
    }
}

/// `pts` as if read from two pir-bench files.
pub(crate) fn times(pts: &[FitPoint]) -> AnswerTimes {
    AnswerTimes {
        points: pts.to_vec(),
        source: TimingSource {
            measured_here: None,
            pir_bench_files: vec!["a/b33.json".into(), "b35.json".into()],
        },
        batch: None,
        build: None,
    }
}

pub(crate) fn measured() -> Measured {
    Measured {
        clients: 100,
        weeks: 1.0,
        audits_per_client_week: 20.0,
        upload_bytes_per_query: 600_000.0,
        download_bytes_per_query: 12_000.0,
        manifest_bytes_per_client_week: 70_000.0,
        server_core_seconds_per_query: 0.012,
        mean_batch: 1.5,
        client_seconds_per_audit: 0.004,
        db_bytes: 1 << 27,
        entries: 174_760,
    }
}

/// JSON round trips agree up to the last bit of a float (serde_json's
/// default float parser is not exact).
pub(crate) fn assert_json_close(a: &CostReport, b: &CostReport) {
    fn close(a: &serde_json::Value, b: &serde_json::Value, at: &str) {
        use serde_json::Value as V;
        match (a, b) {
            (V::Number(x), V::Number(y)) => {
                let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
                assert!(
                    (x - y).abs() <= 1e-12 * x.abs().max(y.abs()),
                    "{at}: {x} vs {y}"
                );
            }
            (V::Array(x), V::Array(y)) => {
                assert_eq!(x.len(), y.len(), "{at}");
                for (i, (x, y)) in x.iter().zip(y).enumerate() {
                    close(x, y, &format!("{at}[{i}]"));
                }
            }
            (V::Object(x), V::Object(y)) => {
                assert_eq!(x.len(), y.len(), "{at}");
                for (k, v) in x {
                    close(v, &y[k], &format!("{at}.{k}"));
                }
            }
            (x, y) => assert_eq!(x, y, "{at}"),
        }
    }
    close(
        &serde_json::to_value(a).unwrap(),
        &serde_json::to_value(b).unwrap(),
        "report",
    );
}

/// Minimal well-formedness check: balanced tags, escaped '&' and '<'.
pub(crate) fn check_xml(s: &str) {
    let body = s.trim_start_matches(|c| c != '>').get(1..).unwrap(); // skip <?xml … ?>
    assert!(s.starts_with("<?xml"));
    let mut stack: Vec<String> = Vec::new();
    let mut rest = body;
    while let Some(i) = rest.find(['<', '&']) {
        let text = &rest[..i];
        assert!(!text.contains('>'), "stray '>' in text: {text}");
        rest = &rest[i..];
        if rest.starts_with('&') {
            assert!(
                ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                    .iter()
                    .any(|e| rest.starts_with(e)),
                "unescaped &: {}",
                &rest[..rest.len().min(20)]
            );
            rest = &rest[1..];
            continue;
        }
        let end = rest.find('>').expect("unterminated tag");
        let tag = &rest[1..end];
        assert!(!tag.contains('<'), "'<' inside a tag: {tag}");
        assert_eq!(tag.matches('"').count() % 2, 0, "unbalanced quotes: {tag}");
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(
                stack.pop().as_deref(),
                Some(name.trim()),
                "mismatched </{name}>"
            );
        } else if !tag.ends_with('/') {
            let name = tag.split_whitespace().next().unwrap().to_owned();
            stack.push(name);
        }
        rest = &rest[end + 1..];
    }
    assert!(stack.is_empty(), "unclosed: {stack:?}");
    assert_eq!(s.matches("<svg").count(), 1);
    assert!(s.trim_end().ends_with("</svg>"));
    assert!(!s.contains("href") && !s.contains("<script") && !s.contains("@font-face"));
}
