//! Misbehaviour reports: `POST /v1/reports` (`docs/protocol.md` §8).
//!
//! A client whose audit found an SCT's leaf absent from two epochs sends
//! the [`audit_proto::report::MisbehaviourReport`]. The handler works in
//! this order, cheapest first, so junk costs little:
//!
//! 1. the rate limits ([`limit`]: per client address and global; 429
//!    `rate_limited` with `Retry-After`);
//! 2. `Content-Type: application/json` (415) and the body cap
//!    ([`audit_proto::report::MAX_REPORT_BYTES`], 413 `report_too_large`),
//!    read under the body deadline (408);
//! 3. strict parsing (400 `bad_report`);
//! 4. one of `[reports] max_concurrent` verification slots (503
//!    `overloaded`);
//! 5. verification against the auditor's own store and epochs
//!    ([`verify`]; 422 with the step's code);
//! 6. storage in the `reports` table, once per (log, leaf): 202 with a
//!    [`audit_proto::report::ReportReceipt`], or 200 with `duplicate` for a
//!    leaf already reported.
//!
//! ct-ingest later confirms stored reports with the log
//! (`ct-ingest/src/reports.rs`); operators list them with
//! `auditor-server reports list` ([`list`]) and watch
//! `auditor_reports_received_total{result}` and `auditor_reports{status}`.
//!
//! The auditor otherwise only reads the store; taking reports needs
//! `INSERT` (and `SELECT`) on `reports` (docs/operator.md, "Database
//! roles").

pub mod limit;
pub mod verify;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use audit_proto::api::ErrorCode;
use audit_proto::report::{MisbehaviourReport, ReportReceipt, MAX_REPORT_BYTES};
use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Json, Router};
use prometheus::{IntCounterVec, IntGaugeVec, Opts};
use tokio::sync::{OnceCell, Semaphore};

use crate::config::{Config, ReportsConfig};
use crate::epochdir::EpochDir;
use crate::error::Result;
use crate::http::{read_body, ApiError};
use crate::metrics::Metrics;

/// The token-bucket rates of `c`.
fn rates(c: &ReportsConfig) -> limit::Rates {
    limit::Rates {
        per_ip_per_second: f64::from(c.per_ip_per_hour) / 3600.0,
        per_ip_burst: f64::from(c.per_ip_burst),
        global_per_second: f64::from(c.global_per_minute) / 60.0,
        global_burst: f64::from(c.global_per_minute),
    }
}

/// The report metrics.
#[derive(Clone, Debug)]
pub struct ReportMetrics {
    /// Reports by result: `accepted`, `duplicate`, or the error code.
    pub received: IntCounterVec,
    /// Stored reports by status (refreshed from the store at every epoch
    /// build and every minute once a report arrived).
    pub stored: IntGaugeVec,
}

/// Every `result` label of `auditor_reports_received_total`.
pub fn report_results() -> impl Iterator<Item = &'static str> {
    ["accepted", "duplicate"].into_iter().chain(
        [
            ErrorCode::UnsupportedMediaType,
            ErrorCode::BodyTimeout,
            ErrorCode::BadBody,
            ErrorCode::Overloaded,
            ErrorCode::Internal,
        ]
        .into_iter()
        .chain(ErrorCode::REPORT_ONLY)
        .map(ErrorCode::as_str),
    )
}

impl ReportMetrics {
    /// Creates the metrics and registers them in `metrics`.
    pub fn register(metrics: &mut Metrics) -> ReportMetrics {
        let received = IntCounterVec::new(
            Opts::new(
                "auditor_reports_received_total",
                "Misbehaviour reports received, by result (accepted, duplicate, or the error code)",
            ),
            &["result"],
        )
        .unwrap_or_else(|e| unreachable!("{e}"));
        let stored = IntGaugeVec::new(
            Opts::new(
                "auditor_reports",
                "Stored misbehaviour reports by status (received, confirmed, refuted)",
            ),
            &["status"],
        )
        .unwrap_or_else(|e| unreachable!("{e}"));
        metrics.register(Box::new(received.clone()));
        metrics.register(Box::new(stored.clone()));
        for r in report_results() {
            received.with_label_values(&[r]);
        }
        ReportMetrics { received, stored }
    }
}

/// What the report route needs: the store (connected on first use), the
/// epoch directory, the limits and the metrics.
#[derive(Debug)]
pub struct Intake {
    database_url: String,
    store: OnceCell<ct_store::Store>,
    epochs: EpochDir,
    limiter: limit::Limiter,
    slots: Arc<Semaphore>,
    body_timeout: Duration,
    /// The metrics.
    pub metrics: ReportMetrics,
}

impl Intake {
    /// An intake for `config` (its `[reports]`, database and epoch
    /// directory); `None` if reports are disabled.
    pub fn new(config: &Config, metrics: ReportMetrics) -> Result<Option<Intake>> {
        let r = &config.reports;
        if !r.enabled {
            return Ok(None);
        }
        Ok(Some(Intake {
            database_url: config.database_url().to_owned(),
            store: OnceCell::new(),
            epochs: EpochDir::open(&config.epoch_dir)?,
            limiter: limit::Limiter::new(rates(r), Instant::now()),
            slots: Arc::new(Semaphore::new(r.max_concurrent)),
            body_timeout: Duration::from_millis(config.limits.body_timeout_ms),
            metrics,
        }))
    }

    async fn store(&self) -> std::result::Result<&ct_store::Store, ct_store::StoreError> {
        self.store
            .get_or_try_init(|| ct_store::Store::connect(&self.database_url))
            .await
    }

    /// Refreshes `auditor_reports{status}` from the intake's store, if it
    /// has connected (a report arrived); the epoch builds refresh it with
    /// their own connection ([`Intake::refresh_counts_from`]).
    pub async fn refresh_if_connected(&self) -> Result<()> {
        match self.store.get() {
            Some(store) => self.refresh_counts_from(store).await,
            None => Ok(()),
        }
    }

    /// Refreshes `auditor_reports{status}` from `store`.
    pub async fn refresh_counts_from(&self, store: &ct_store::Store) -> Result<()> {
        let counts = store.report_counts().await?;
        for (status, n) in counts {
            self.metrics
                .stored
                .with_label_values(&[status.as_str()])
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        Ok(())
    }
}

/// The router of `POST /v1/reports`, taken by `intake` (`None`: answered
/// 404 `not_found`), with whatever state the router it is merged into has.
pub fn router<S: Clone + Send + Sync + 'static>(intake: Option<Arc<Intake>>) -> Router<S> {
    Router::new()
        .route(audit_proto::report::REPORTS_PATH, post(submit))
        .with_state(intake)
}

/// `POST /v1/reports`.
async fn submit(
    State(intake): State<Option<Arc<Intake>>>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    body: Body,
) -> std::result::Result<Response, ApiError> {
    let Some(intake) = intake else {
        return Err(ApiError::new(
            ErrorCode::NotFound,
            "this auditor does not take misbehaviour reports",
        ));
    };
    let ip = peer.map(|Extension(ConnectInfo(a))| a.ip());
    let result = receive(&intake, ip, &headers, body).await;
    let label = match &result {
        Ok((_, r)) if r.duplicate => "duplicate",
        Ok(_) => "accepted",
        Err(e) => e.code(),
    };
    intake.metrics.received.with_label_values(&[label]).inc();
    result.map(|(status, receipt)| (status, Json(receipt)).into_response())
}

async fn receive(
    intake: &Intake,
    ip: Option<IpAddr>,
    headers: &HeaderMap,
    body: Body,
) -> std::result::Result<(StatusCode, ReportReceipt), ApiError> {
    let has_body = match headers.get(header::CONTENT_LENGTH) {
        Some(v) => v.as_bytes() != b"0",
        None => headers.contains_key(header::TRANSFER_ENCODING),
    };
    let early = |e: ApiError| if has_body { e.closing() } else { e };
    // 1. Rate limits.
    intake.limiter.take(ip, Instant::now()).map_err(|wait| {
        early(
            ApiError::new(
                ErrorCode::RateLimited,
                "too many reports; retry after the Retry-After delay",
            )
            .retry_after(wait),
        )
    })?;
    // 2. Type, size, body.
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"));
    if !json {
        return Err(early(ApiError::new(
            ErrorCode::UnsupportedMediaType,
            "reports are application/json",
        )));
    }
    let too_large = || {
        ApiError::new(
            ErrorCode::ReportTooLarge,
            format!("reports are at most {MAX_REPORT_BYTES} bytes"),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|d| d > MAX_REPORT_BYTES as u64) {
        return Err(too_large().closing());
    }
    let bytes = tokio::time::timeout(
        intake.body_timeout,
        read_body(body, MAX_REPORT_BYTES, declared),
    )
    .await
    .map_err(|_| {
        ApiError::new(
            ErrorCode::BodyTimeout,
            "the report body did not arrive in time",
        )
        .closing()
    })?
    .map_err(|e| match e.error_code() {
        ErrorCode::QueryTooLarge => too_large().closing(),
        _ => e.closing(),
    })?;
    // 3. Form.
    let (_, checked) = MisbehaviourReport::from_json(&bytes)
        .map_err(|e| ApiError::new(ErrorCode::BadReport, e.to_string()))?;
    drop(bytes);
    // 4. A verification slot.
    let _slot = intake.slots.clone().try_acquire_owned().map_err(|_| {
        ApiError::new(
            ErrorCode::Overloaded,
            "too many reports being verified; retry later",
        )
        .retry_after(1)
    })?;
    let store = intake.store().await.map_err(|e| {
        tracing::error!(error = %e, "connecting to the store for a report failed");
        ApiError::new(
            ErrorCode::ReportsUnavailable,
            "the auditor's store is unreachable; retry later",
        )
        .retry_after(30)
    })?;
    // 5. Verification.
    let now_ms = ct_core::civil::unix_now_ms();
    let new = verify::verify(store, &intake.epochs, &checked, now_ms)
        .await
        .map_err(|(code, why)| ApiError::new(code, why))?;
    // 6. Storage.
    let inserted = store.insert_report(&new).await.map_err(|e| {
        tracing::error!(error = %e, "storing a report failed");
        ApiError::new(
            ErrorCode::ReportsUnavailable,
            "the report could not be stored; retry later",
        )
        .retry_after(30)
    })?;
    if inserted {
        intake
            .metrics
            .stored
            .with_label_values(&[ct_store::ReportStatus::Received.as_str()])
            .inc();
        tracing::warn!(
            log_id = %checked.log_id,
            leaf_hash = %checked.leaf_hash,
            epochs = ?new.epochs,
            "misbehaviour report verified and stored: the log's SCT promised a leaf the \
             auditor's epochs do not hold"
        );
    }
    Ok((
        if inserted {
            StatusCode::ACCEPTED
        } else {
            StatusCode::OK
        },
        ReportReceipt {
            status: "received".into(),
            duplicate: !inserted,
            leaf_hash: new.leaf_hash,
        },
    ))
}

/// `auditor-server reports list`: the stored reports (all, or one
/// status), oldest first, at most `limit`, one line each.
pub async fn list(
    store: &ct_store::Store,
    status: Option<ct_store::ReportStatus>,
    limit: u64,
) -> Result<Vec<String>> {
    let rows = store.reports(status, limit).await?;
    Ok(rows
        .iter()
        .map(|r| {
            let rep = &r.report;
            let epochs: Vec<String> = rep.epochs.iter().map(u64::to_string).collect();
            format!(
                "{id}\t{status}\t{received}\tlog {log}\tleaf {leaf}\tsct {ts} ms\t{kind}\t\
                 epochs {epochs}\tattempts {attempts}\t{note}",
                id = r.id,
                status = r.status,
                received = ct_core::civil::format_rfc3339((rep.received_at_ms / 1000) as i64),
                log = rep.log_id,
                leaf = rep.leaf_hash,
                ts = rep.sct_timestamp_ms,
                kind = rep.kind,
                epochs = epochs.join(","),
                attempts = r.attempts,
                note = r.note.as_deref().unwrap_or("-"),
            )
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::{app, AppState, Limits};
    use crate::state::Registry;
    use audit_proto::api::ErrorBody;
    use audit_proto::LeafHash;
    use tower::ServiceExt as _;

    fn state(dir: &std::path::Path, reports: ReportsConfig) -> AppState {
        let config = crate::Config {
            database_url: Some(format!(
                "sqlite://{}?mode=rwc",
                dir.join("store.db").display()
            )),
            epoch_dir: dir.join("epochs"),
            reports,
            ..crate::Config::default()
        };
        let mut metrics = Metrics::new();
        let rm = ReportMetrics::register(&mut metrics);
        let st = AppState::new(
            Arc::new(Registry::new(Duration::from_secs(1))),
            metrics,
            Limits {
                max_concurrent: 1,
                timeout: Duration::from_secs(1),
                body_timeout: Duration::from_secs(1),
            },
        );
        match Intake::new(&config, rm).unwrap() {
            Some(i) => st.with_reports(Arc::new(i)),
            None => st,
        }
    }

    async fn post(
        st: &AppState,
        content_type: &str,
        body: Vec<u8>,
    ) -> (u16, Option<String>, HeaderMap, String) {
        let req = axum::http::Request::post("/v1/reports")
            .header(header::CONTENT_TYPE, content_type)
            .header(header::CONTENT_LENGTH, body.len())
            .body(Body::from(body))
            .unwrap();
        let resp = app(st.clone()).oneshot(req).await.unwrap();
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 16)
            .await
            .unwrap();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let code = serde_json::from_slice::<ErrorBody>(&bytes)
            .ok()
            .map(|b| b.error);
        (status, code, headers, text)
    }

    fn report_json() -> Vec<u8> {
        serde_json::to_vec(&MisbehaviourReport {
            version: 1,
            log_id: audit_proto::LogId::new([1; 32]),
            sct_timestamp_ms: 1,
            mmd_s: 60,
            sct: "c2N0".into(), // base64 of "sct"
            kind: audit_proto::report::EntryKind::X509,
            chain: vec!["bGVhZg==".into()], // "leaf"
            leaf_hash: LeafHash::new([2; 32]),
            not_found_in_epochs: vec![1, 2],
            auditor: "http://a".into(),
            reported_at_ms: 3,
        })
        .unwrap()
    }

    #[tokio::test]
    async fn junk_is_refused_with_stable_codes_before_any_work() {
        let dir = tempfile::tempdir().unwrap();
        // The store as the owner's migration leaves it (the auditor runs
        // no DDL).
        let url = format!(
            "sqlite://{}?mode=rwc",
            dir.path().join("store.db").display()
        );
        ct_store::Store::connect_and_migrate(&url)
            .await
            .unwrap()
            .close()
            .await;
        let st = state(
            dir.path(),
            ReportsConfig {
                per_ip_burst: 100,
                global_per_minute: 100,
                ..ReportsConfig::default()
            },
        );
        let json = "application/json";
        let cases: Vec<(&str, &str, Vec<u8>, u16, &str)> = vec![
            (
                "type",
                "text/plain",
                report_json(),
                415,
                "unsupported_media_type",
            ),
            ("not json", json, b"{nope".to_vec(), 400, "bad_report"),
            ("empty", json, Vec::new(), 400, "bad_report"),
            (
                "too large",
                json,
                vec![b' '; MAX_REPORT_BYTES + 1],
                413,
                "report_too_large",
            ),
            // A well-formed report of a log the store does not know.
            ("unknown log", json, report_json(), 422, "unknown_log"),
        ];
        for (what, ct, body, status, code) in cases {
            let (s, c, _, text) = post(&st, ct, body).await;
            assert_eq!((s, c.as_deref()), (status, Some(code)), "{what}: {text}");
        }
        // Nothing was stored; every refusal was counted by its code.
        let store = ct_store::Store::connect(&format!(
            "sqlite://{}?mode=rwc",
            dir.path().join("store.db").display()
        ))
        .await
        .unwrap();
        assert!(store.reports(None, 10).await.unwrap().is_empty());
        let m = st.reports.as_ref().unwrap().metrics.received.clone();
        assert_eq!(m.with_label_values(&["bad_report"]).get(), 2);
        assert_eq!(m.with_label_values(&["unknown_log"]).get(), 1);
        assert_eq!(m.with_label_values(&["accepted"]).get(), 0);
    }

    #[tokio::test]
    async fn the_rate_limit_answers_429_with_retry_after() {
        let dir = tempfile::tempdir().unwrap();
        let st = state(
            dir.path(),
            ReportsConfig {
                per_ip_burst: 100,
                global_per_minute: 2,
                ..ReportsConfig::default()
            },
        );
        for _ in 0..2 {
            let (s, c, _, _) = post(&st, "application/json", b"{}".to_vec()).await;
            assert_eq!((s, c.as_deref()), (400, Some("bad_report")));
        }
        let (s, c, h, _) = post(&st, "application/json", b"{}".to_vec()).await;
        assert_eq!((s, c.as_deref()), (429, Some("rate_limited")));
        assert_eq!(h.get(header::RETRY_AFTER).unwrap(), "30");
        // The unread body closes the connection.
        assert_eq!(h.get(header::CONNECTION).unwrap(), "close");
    }

    #[tokio::test]
    async fn disabled_reports_are_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let st = state(
            dir.path(),
            ReportsConfig {
                enabled: false,
                ..ReportsConfig::default()
            },
        );
        let (s, c, _, _) = post(&st, "application/json", report_json()).await;
        assert_eq!((s, c.as_deref()), (404, Some("not_found")));
    }

    #[tokio::test]
    async fn an_unreachable_store_is_503() {
        let dir = tempfile::tempdir().unwrap();
        let mut st = state(dir.path(), ReportsConfig::default());
        // A store URL nothing answers at.
        let config = crate::Config {
            database_url: Some("postgres://u@127.0.0.1:1/none".into()),
            epoch_dir: dir.path().join("epochs"),
            ..crate::Config::default()
        };
        let mut metrics = Metrics::new();
        let rm = ReportMetrics::register(&mut metrics);
        st.reports = Intake::new(&config, rm).unwrap().map(Arc::new);
        let (s, c, h, _) = post(&st, "application/json", report_json()).await;
        assert_eq!((s, c.as_deref()), (503, Some("reports_unavailable")));
        assert_eq!(h.get(header::RETRY_AFTER).unwrap(), "30");
    }

    #[test]
    fn limits_are_validated() {
        assert!(ReportsConfig::default().validate().is_ok());
        let zero = ReportsConfig {
            max_concurrent: 0,
            ..ReportsConfig::default()
        };
        assert!(zero.validate().is_err());
        let off = ReportsConfig {
            enabled: false,
            ..zero
        };
        assert!(off.validate().is_ok());
        assert!(report_results().any(|r| r == "leaf_present"));
    }
}
