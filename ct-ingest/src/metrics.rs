//! Process-wide ingest metrics in the Prometheus text exposition format.
//!
//! [`record_run`] folds a finished [`RunSummary`] into counters (entries,
//! bytes, requests, errors) and per-log gauges (verified size, lag behind
//! the signed head in entries and in time); [`record_failed_run`] counts a
//! run that could not finish (log list, database) and marks the ingester
//! and every log down. [`render_prometheus`] renders them. The `ct-ingest`
//! binary writes the rendering to a file after every run, failed or not
//! (`--metrics-file`, for a node-exporter textfile collector); nothing
//! serves it over HTTP. The names and their meanings are listed in
//! docs/ingest.md.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::ingest::RunSummary;

#[derive(Clone, Debug, Default)]
struct LogGauges {
    description: String,
    verified_size: u64,
    head_size: u64,
    lag_seconds: u64,
    ok: bool,
}

#[derive(Default)]
struct Metrics {
    runs: AtomicU64,
    runs_failed: AtomicU64,
    /// 1 if the last run finished, 0 if it failed (or none ran yet).
    up: AtomicU64,
    /// 1 if the store answered the last connection or probe, else 0.
    store_up: AtomicU64,
    last_success_s: AtomicU64,
    last_failure_s: AtomicU64,
    entries_inserted: AtomicU64,
    entries_expired: AtomicU64,
    entries_pruned: AtomicU64,
    http_requests: AtomicU64,
    http_bytes: AtomicU64,
    http_retries: AtomicU64,
    http_errors: AtomicU64,
    log_errors: AtomicU64,
    /// Misbehaviour report checks: confirmed, refuted, undecided.
    report_checks: [AtomicU64; 3],
    logs: Mutex<BTreeMap<String, LogGauges>>,
}

static METRICS: std::sync::OnceLock<Metrics> = std::sync::OnceLock::new();

fn metrics() -> &'static Metrics {
    METRICS.get_or_init(Metrics::default)
}

/// Adds a finished run to the process-wide metrics (`now_ms`: wall clock).
pub fn record_run(summary: &RunSummary, now_ms: u64) {
    let m = metrics();
    m.runs.fetch_add(1, Ordering::Relaxed);
    m.up.store(1, Ordering::Relaxed);
    m.last_success_s.store(now_ms / 1000, Ordering::Relaxed);
    m.entries_pruned
        .fetch_add(summary.pruned, Ordering::Relaxed);
    let (req, bytes, retries, errors) = summary.http;
    m.http_requests.fetch_add(req, Ordering::Relaxed);
    m.http_bytes.fetch_add(bytes, Ordering::Relaxed);
    m.http_retries.fetch_add(retries, Ordering::Relaxed);
    m.http_errors.fetch_add(errors, Ordering::Relaxed);
    for c in &summary.reports {
        let i = match c.outcome {
            crate::reports::CheckOutcome::Confirmed => 0,
            crate::reports::CheckOutcome::Refuted => 1,
            crate::reports::CheckOutcome::Undecided => 2,
        };
        m.report_checks[i].fetch_add(1, Ordering::Relaxed);
    }
    let mut logs = m.logs.lock().unwrap_or_else(|p| p.into_inner());
    for (log, res) in &summary.logs {
        let key = ct_core::hex::encode(log.info.log_id.as_bytes());
        let g = logs.entry(key).or_default();
        g.description = log.info.description.clone();
        match res {
            Ok(r) => {
                m.entries_inserted.fetch_add(r.inserted, Ordering::Relaxed);
                m.entries_expired.fetch_add(r.expired, Ordering::Relaxed);
                g.verified_size = r.verified_position;
                g.head_size = r.head_tree_size;
                g.lag_seconds = now_ms.saturating_sub(r.ingested_until_ms) / 1000;
                g.ok = true;
            }
            Err(_) => {
                m.log_errors.fetch_add(1, Ordering::Relaxed);
                g.ok = false;
            }
        }
    }
}

/// Adds a run that failed before it finished (the log list or the
/// database could not be read, or the expiry prune failed): counts it,
/// records its time, and sets `ct_ingest_up` and every known log's
/// `ct_ingest_log_up` to 0 (nothing is known to be ingested). The logs'
/// other gauges keep the values of their last successful run.
pub fn record_failed_run(now_ms: u64) {
    let m = metrics();
    m.runs.fetch_add(1, Ordering::Relaxed);
    m.runs_failed.fetch_add(1, Ordering::Relaxed);
    m.up.store(0, Ordering::Relaxed);
    m.last_failure_s.store(now_ms / 1000, Ordering::Relaxed);
    let mut logs = m.logs.lock().unwrap_or_else(|p| p.into_inner());
    for g in logs.values_mut() {
        g.ok = false;
    }
}

/// Records whether the store answered: set when a run connects, by the
/// probe every few seconds during a run (`IngestOptions::store_health`),
/// and to 0 when a run fails because the store could not be reached.
pub fn set_store_up(up: bool) {
    metrics().store_up.store(u64::from(up), Ordering::Relaxed);
}

/// Escapes a Prometheus label value.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The metrics in the Prometheus text format (version 0.0.4).
pub fn render_prometheus() -> String {
    let m = metrics();
    let mut out = String::new();
    let counters: [(&str, &str, &AtomicU64); 10] = [
        (
            "ct_ingest_runs_total",
            "Ingest runs, finished or failed.",
            &m.runs,
        ),
        (
            "ct_ingest_runs_failed_total",
            "Ingest runs that failed before finishing (log list, database).",
            &m.runs_failed,
        ),
        (
            "ct_ingest_entries_inserted_total",
            "Verified entries stored.",
            &m.entries_inserted,
        ),
        (
            "ct_ingest_entries_expired_total",
            "Verified entries skipped because already expired.",
            &m.entries_expired,
        ),
        (
            "ct_ingest_entries_pruned_total",
            "Expired entries removed from the store.",
            &m.entries_pruned,
        ),
        (
            "ct_ingest_http_requests_total",
            "HTTP requests sent to logs (every attempt).",
            &m.http_requests,
        ),
        (
            "ct_ingest_http_bytes_total",
            "HTTP response body bytes read from logs.",
            &m.http_bytes,
        ),
        (
            "ct_ingest_http_retries_total",
            "HTTP attempts retried (429, 5xx, timeouts).",
            &m.http_retries,
        ),
        (
            "ct_ingest_http_errors_total",
            "HTTP requests that failed for good.",
            &m.http_errors,
        ),
        (
            "ct_ingest_log_errors_total",
            "Log runs refused (verification or transport errors).",
            &m.log_errors,
        ),
    ];
    for (name, help, v) in counters {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
            v.load(Ordering::Relaxed)
        );
    }
    let name = "ct_ingest_report_checks_total";
    let _ = writeln!(
        out,
        "# HELP {name} Misbehaviour reports checked with their log, by outcome.\n# TYPE {name} counter"
    );
    for (outcome, v) in ["confirmed", "refuted", "undecided"]
        .iter()
        .zip(&m.report_checks)
    {
        let _ = writeln!(
            out,
            "{name}{{outcome=\"{outcome}\"}} {}",
            v.load(Ordering::Relaxed)
        );
    }
    let process_gauges: [(&str, &str, &AtomicU64); 4] = [
        (
            "ct_ingest_up",
            "1 if the last run finished, 0 if it failed or none has run yet.",
            &m.up,
        ),
        (
            "ct_ingest_store_up",
            "1 if the store answered the last connection or probe (every 3 s during a run), 0 if not or none yet.",
            &m.store_up,
        ),
        (
            "ct_ingest_last_success_timestamp_seconds",
            "Unix time the last finished run ended (0: none yet).",
            &m.last_success_s,
        ),
        (
            "ct_ingest_last_failure_timestamp_seconds",
            "Unix time the last failed run ended (0: none yet).",
            &m.last_failure_s,
        ),
    ];
    for (name, help, v) in process_gauges {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {}",
            v.load(Ordering::Relaxed)
        );
    }
    let logs = m.logs.lock().unwrap_or_else(|p| p.into_inner());
    type Gauge = (&'static str, &'static str, fn(&LogGauges) -> u64);
    let gauges: [Gauge; 4] = [
        (
            "ct_ingest_log_verified_size",
            "Verified tree size stored per log.",
            |g| g.verified_size,
        ),
        (
            "ct_ingest_log_lag_entries",
            "Signed head size minus verified size.",
            |g| g.head_size.saturating_sub(g.verified_size),
        ),
        (
            "ct_ingest_log_lag_seconds",
            "Seconds since the log's ingested-until timestamp.",
            |g| g.lag_seconds,
        ),
        (
            "ct_ingest_log_up",
            "1 if the last run of the log succeeded, 0 if it or the whole run failed.",
            |g| g.ok as u64,
        ),
    ];
    for (name, help, f) in gauges {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        for (id, g) in logs.iter() {
            let _ = writeln!(
                out,
                "{name}{{log_id=\"{id}\",description=\"{}\"}} {}",
                label(&g.description),
                f(g)
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_escapes_labels() {
        let text = render_prometheus();
        assert!(text.contains("# TYPE ct_ingest_runs_total counter"));
        assert!(text.contains("# TYPE ct_ingest_runs_failed_total counter"));
        assert!(text.contains("# TYPE ct_ingest_up gauge"));
        assert!(text.contains("ct_ingest_http_bytes_total "));
        assert!(text.contains("ct_ingest_report_checks_total{outcome=\"confirmed\"} "));
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
