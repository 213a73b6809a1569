//! The HTTP API (`docs/protocol.md`, `docs/openapi.yaml`).
//!
//! Every error is a JSON [`audit_proto::api::ErrorBody`] with a 4xx/5xx
//! status; nothing a client sends changes server state.
//!
//! The query handler works in this order, so that a slow or hostile client
//! can hold at most its own connection, never a slot other clients need:
//! 1. path, `Content-Type` and a declared `Content-Length` are checked
//!    (413 at once if the declared body exceeds the database's
//!    `query_bytes`);
//! 2. the body is read under its own deadline ([`Limits::body_timeout`],
//!    408 `body_timeout`) and the database's exact size cap;
//! 3. the query is parsed and checked against the database;
//! 4. only then is one of [`Limits::max_concurrent`] answer slots taken
//!    (none free: 503 `overloaded`), held while the query waits for and
//!    joins an answering pass, bounded by [`Limits::timeout`].
//!
//! Connection-level limits (header and idle timeouts, the connection cap)
//! live in [`crate::service`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use audit_proto::api::{ErrorCode, BATCH_SIZE_HEADER, OCTET_STREAM, SERVER_TIMING_HEADER};
use axum::body::Body;
use axum::extract::path::ErrorKind;
use axum::extract::rejection::PathRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use pir_core::wire::Query;
use tokio::sync::Semaphore;

use crate::batch::BatchError;
use crate::http::{read_body, too_large, ApiError};
use crate::metrics::Metrics;
use crate::state::{Lookup, Registry, ServedEpoch};

/// Request limits of the query route.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Queries being answered at once (each holds a slot from the end of
    /// its body until its answer); more get 503 `overloaded`.
    pub max_concurrent: usize,
    /// Time limit for answering a query once its body is read (waiting for
    /// and joining an answering pass).
    pub timeout: Duration,
    /// Time limit for receiving a query's body, counted from the end of
    /// its request head.
    pub body_timeout: Duration,
}

/// Shared state of the handlers.
#[derive(Clone, Debug)]
pub struct AppState {
    /// Served epochs.
    pub registry: Arc<Registry>,
    /// Metrics.
    pub metrics: Metrics,
    /// Limits.
    pub limits: Limits,
    /// Answer slots (`limits.max_concurrent` permits).
    pub slots: Arc<Semaphore>,
    /// Misbehaviour reports (`POST /v1/reports`); `None`: refused with
    /// 404 `not_found`.
    pub reports: Option<Arc<crate::reports::Intake>>,
}

impl AppState {
    /// State with `limits.max_concurrent` free answer slots.
    pub fn new(registry: Arc<Registry>, metrics: Metrics, limits: Limits) -> AppState {
        AppState {
            registry,
            metrics,
            slots: Arc::new(Semaphore::new(limits.max_concurrent)),
            limits,
            reports: None,
        }
    }

    /// Takes misbehaviour reports with `intake`.
    pub fn with_reports(mut self, intake: Arc<crate::reports::Intake>) -> AppState {
        self.reports = Some(intake);
        self
    }
}

/// Hard cap on a request body: the largest query any known parameter set
/// can produce (ℓ1 = ℓ2 = 2^18), plus 4 KiB. Each database then checks the
/// exact length of its own queries.
pub fn max_query_body() -> usize {
    let dim = pir_core::params::MAX_DIM;
    pir_core::params::ALL
        .iter()
        .map(|p| {
            pir_core::wire::query_len(
                p,
                pir_core::params::DbShape {
                    ell1: dim,
                    ell2: dim,
                },
            )
        })
        .max()
        .unwrap_or(0)
        + 4096
}

/// The router at the root only.
#[cfg(test)]
pub(crate) fn app(state: AppState) -> Router {
    app_under(state, None)
}

/// The router, answering every route at the root and, with `prefix` (a
/// path like `/g/1`: this shard's base URL's path,
/// [`crate::config::ShardConfig::own_path`]), under that prefix as well.
/// So a front that routes one public host by path (`/g/{i}/…` to group i,
/// docs/deploy-kubernetes.md) forwards requests unchanged, and clients
/// join the shard URL of the manifest with the API paths as they do for a
/// URL without a path.
pub(crate) fn app_under(state: AppState, prefix: Option<&str>) -> Router {
    let api = Router::new()
        .route("/v1/manifest", get(manifest))
        .route("/v1/epochs/{epoch}/dbs/{db}/query", post(query))
        .route("/livez", get(livez))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .merge(crate::reports::router(state.reports.clone()));
    let routes = match prefix {
        Some(p) => api.clone().nest(p, api),
        None => api,
    };
    routes
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(max_query_body()))
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::new(
        ErrorCode::NotFound,
        "no such endpoint (see docs/protocol.md)",
    )
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        "method not allowed on this endpoint",
    )
}

fn no_epoch() -> ApiError {
    ApiError {
        retry_after: Some(30),
        ..ApiError::new(ErrorCode::NoEpoch, "no epoch has been published yet")
    }
}

async fn manifest(State(st): State<AppState>) -> Result<Response, ApiError> {
    st.metrics.manifest_requests.inc();
    let ep = st.registry.current().ok_or_else(no_epoch)?;
    let etag = format!("\"epoch-{}\"", ep.id());
    Ok((
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (
                header::ETAG,
                HeaderValue::from_str(&etag).unwrap_or(HeaderValue::from_static("\"\"")),
            ),
        ],
        ep.manifest_json.clone(),
    )
        .into_response())
}

/// Liveness: 200 whenever the process answers HTTP and its served-epoch
/// state can be read, with or without an epoch (a new server waiting for
/// its first epoch is alive; a hung one answers nothing).
async fn livez(State(st): State<AppState>) -> Response {
    let epoch = st.registry.current().map(|e| e.id());
    Json(serde_json::json!({ "status": "alive", "epoch": epoch })).into_response()
}

async fn healthz(State(st): State<AppState>) -> Result<Response, ApiError> {
    let ep = st.registry.current().ok_or_else(no_epoch)?;
    Ok(Json(serde_json::json!({ "status": "ok", "epoch": ep.id() })).into_response())
}

/// Readiness: this server holds its databases of the current epoch.
async fn readyz(State(st): State<AppState>) -> Result<Response, ApiError> {
    let ep = st.registry.current().ok_or_else(no_epoch)?;
    Ok(Json(serde_json::json!({
        "status": "ready",
        "epoch": ep.id(),
        "databases": ep.own_count(),
        "of": ep.dbs.len(),
    }))
    .into_response())
}

async fn metrics_text(State(st): State<AppState>) -> Response {
    let cur = st.registry.current();
    st.metrics.observe_epoch(
        cur.as_ref().map(|e| &e.manifest),
        crate::epoch::unix_now_s(),
    );
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        st.metrics.render(),
    )
        .into_response()
}

async fn query(
    State(st): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let t0 = Instant::now();
    let result = match path {
        Ok(Path((epoch, db))) => answer_query(&st, &epoch, &db, &headers, body).await,
        Err(rejection) => Err(path_error(&rejection)),
    };
    let outcome = match &result {
        Ok(_) => "ok",
        Err(e) => e.code.as_str(),
    };
    st.metrics.queries.with_label_values(&[outcome]).inc();
    if result.is_ok() {
        st.metrics
            .request_seconds
            .observe(t0.elapsed().as_secs_f64());
    }
    result
}

/// The JSON error for path segments axum cannot decode (percent-encoded
/// bytes that are not UTF-8): like any other epoch that is not a number,
/// or database that does not exist, instead of axum's plain-text 400.
fn path_error(rejection: &PathRejection) -> ApiError {
    let in_db = matches!(
        rejection,
        PathRejection::FailedToDeserializePathParams(e)
            if matches!(e.kind(), ErrorKind::InvalidUtf8InPathParam { key } if key == "db")
    );
    if in_db {
        ApiError::new(ErrorCode::UnknownDb, rejection.body_text())
    } else {
        ApiError::new(ErrorCode::BadEpoch, rejection.body_text())
    }
}

/// What the checks before the body is read establish.
struct Target {
    ep: Arc<ServedEpoch>,
    db: usize,
    /// The body's cap: the database's query size.
    want: usize,
    /// The declared `Content-Length`.
    declared: Option<u64>,
}

/// The checks before the body is read: path, `Content-Type`, declared
/// `Content-Length`.
fn check_target(
    st: &AppState,
    epoch: &str,
    db: &str,
    headers: &HeaderMap,
) -> Result<Target, ApiError> {
    let epoch: u64 = epoch.parse().map_err(|_| {
        ApiError::new(
            ErrorCode::BadEpoch,
            format!("epoch {epoch:?} is not a number"),
        )
    })?;
    let ep = match st.registry.lookup(epoch) {
        Lookup::Found(ep) => ep,
        Lookup::Unknown { current } => {
            return Err(ApiError {
                current_epoch: current,
                ..ApiError::new(
                    ErrorCode::UnknownEpoch,
                    format!("epoch {epoch} is not served; fetch /v1/manifest"),
                )
            })
        }
    };
    let idx = db
        .parse::<usize>()
        .ok()
        .filter(|&i| i < ep.dbs.len())
        .ok_or_else(|| ApiError {
            current_epoch: Some(ep.id()),
            ..ApiError::new(
                ErrorCode::UnknownDb,
                format!(
                    "epoch {epoch} has databases 0..{}, not {db:?}",
                    ep.dbs.len()
                ),
            )
        })?;
    let Some(served) = &ep.dbs[idx] else {
        return Err(wrong_shard(&ep, idx));
    };
    // No Content-Type is taken as application/octet-stream; any other
    // type (parameters ignored) is refused.
    if let Some(ct) = headers.get(header::CONTENT_TYPE) {
        let mime = ct
            .to_str()
            .ok()
            .and_then(|s| s.split(';').next())
            .map(str::trim);
        if !mime.is_some_and(|m| m.eq_ignore_ascii_case(OCTET_STREAM)) {
            return Err(ApiError::new(
                ErrorCode::UnsupportedMediaType,
                format!("queries are {OCTET_STREAM}"),
            ));
        }
    }
    // An impossible declared length is refused before anything is read.
    let want = (served.spec.query_bytes as usize).min(max_query_body());
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|d| d > want as u64) {
        return Err(ApiError {
            close: true,
            ..too_large(want)
        });
    }
    Ok(Target {
        ep,
        db: idx,
        want,
        declared,
    })
}

async fn answer_query(
    st: &AppState,
    epoch: &str,
    db: &str,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    // An error answered before the body is read leaves the body unread, so
    // the connection cannot carry another request: say so.
    let has_body = match headers.get(header::CONTENT_LENGTH) {
        Some(v) => v.as_bytes() != b"0",
        None => headers.contains_key(header::TRANSFER_ENCODING),
    };
    let Target {
        ep,
        db,
        want,
        declared,
    } = check_target(st, epoch, db, headers).map_err(|e| ApiError {
        close: e.close || has_body,
        ..e
    })?;
    let Some(served) = &ep.dbs[db] else {
        return Err(wrong_shard(&ep, db));
    };
    let limit = st.limits.body_timeout;
    let body = tokio::time::timeout(limit, read_body(body, want, declared))
        .await
        .map_err(|_| ApiError {
            close: true,
            ..ApiError::new(
                ErrorCode::BodyTimeout,
                format!(
                    "the query body did not arrive within {} ms",
                    limit.as_millis()
                ),
            )
        })?
        .map_err(|e| ApiError { close: true, ..e })?;
    let q = Query::from_bytes(&body).map_err(|e| match e {
        pir_core::Error::UnknownParamSet(_) | pir_core::Error::WrongParamSet { .. } => {
            ApiError::new(ErrorCode::WrongParamSet, e.to_string())
        }
        e => ApiError::new(ErrorCode::MalformedQuery, e.to_string()),
    })?;
    if q.param_id() != ep.params.id {
        return Err(ApiError::new(
            ErrorCode::WrongParamSet,
            format!(
                "query for parameter set {}, this epoch uses {}",
                q.param_id(),
                ep.params.id
            ),
        ));
    }
    if q.seed_id() != served.seed_id {
        return Err(ApiError::new(
            ErrorCode::WrongSeed,
            "query built for another public seed; refetch the manifest".to_owned(),
        ));
    }
    if q.shape() != served.shape {
        return Err(ApiError::new(
            ErrorCode::WrongShape,
            format!(
                "query for a {}×{} database, this one is {}×{}",
                q.shape().ell1,
                q.shape().ell2,
                served.shape.ell1,
                served.shape.ell2
            ),
        ));
    }
    // Only the answer holds a slot.
    let _slot = st.slots.clone().try_acquire_owned().map_err(|_| ApiError {
        retry_after: Some(1),
        ..ApiError::new(
            ErrorCode::Overloaded,
            "too many concurrent queries; retry later",
        )
    })?;
    st.metrics.bytes_in.inc_by(body.len() as u64);
    drop(body);
    let ans = tokio::time::timeout(st.limits.timeout, served.batcher.answer(q))
        .await
        .map_err(|_| ApiError {
            retry_after: Some(1),
            ..ApiError::new(
                ErrorCode::Timeout,
                "the query was not answered in time; retry later",
            )
        })?
        .map_err(|e| match e {
            BatchError::Pir(e) => ApiError::new(ErrorCode::RejectedQuery, e.to_string()),
            BatchError::Unavailable(why) => ApiError {
                retry_after: Some(1),
                ..ApiError::new(ErrorCode::Unavailable, why)
            },
        })?;
    st.metrics.bytes_out.inc_by(ans.bytes.len() as u64);
    let timing = format!("answer;dur={:.3}", ans.answer_s * 1e3);
    Ok((
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(OCTET_STREAM)),
            (
                header::HeaderName::from_static(BATCH_SIZE_HEADER),
                HeaderValue::from(ans.batch),
            ),
            (
                header::HeaderName::from_static(SERVER_TIMING_HEADER),
                HeaderValue::from_str(&timing).unwrap_or(HeaderValue::from_static("answer")),
            ),
        ],
        ans.bytes,
    )
        .into_response())
}

/// 421: database `db` of the epoch is another shard's.
fn wrong_shard(ep: &ServedEpoch, db: usize) -> ApiError {
    let url = ep.manifest.shard_url(db as u32).map(str::to_owned);
    ApiError {
        current_epoch: Some(ep.id()),
        message: match &url {
            Some(u) => format!("database {db} is served by the shard at {u}"),
            None => format!("database {db} is not served here"),
        },
        shard_url: url,
        ..ApiError::new(ErrorCode::WrongShard, "")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use audit_proto::api::ErrorBody;
    use tower::ServiceExt as _;

    /// A state with no epoch yet and one answer slot.
    fn no_epoch_state() -> AppState {
        AppState::new(
            Arc::new(Registry::new(Duration::from_secs(1))),
            Metrics::new(),
            Limits {
                max_concurrent: 1,
                timeout: Duration::from_secs(1),
                body_timeout: Duration::from_secs(1),
            },
        )
    }

    /// Under a shard's path prefix every route answers as at the root (the
    /// query route reaches its handler: a bad epoch is its own 400, a GET
    /// is 405), and another prefix is 404, all with JSON bodies.
    #[tokio::test]
    async fn routes_answer_under_the_shards_path_prefix() {
        let state = no_epoch_state();
        let router = app_under(state, Some("/g/1"));
        for (method, path, code) in [
            (
                "POST",
                "/g/1/v1/epochs/x/dbs/0/query",
                Some(ErrorCode::BadEpoch),
            ),
            (
                "POST",
                "/v1/epochs/x/dbs/0/query",
                Some(ErrorCode::BadEpoch),
            ),
            (
                "GET",
                "/g/1/v1/epochs/1/dbs/0/query",
                Some(ErrorCode::MethodNotAllowed),
            ),
            ("GET", "/g/1/v1/manifest", Some(ErrorCode::NoEpoch)),
            ("GET", "/g/1/readyz", Some(ErrorCode::NoEpoch)),
            ("GET", "/g/1/healthz", Some(ErrorCode::NoEpoch)),
            ("GET", "/g/2/v1/manifest", Some(ErrorCode::NotFound)),
            ("GET", "/g/1", Some(ErrorCode::NotFound)),
            ("GET", "/g/1/metrics", None),
            ("GET", "/g/1/livez", None),
            ("GET", "/livez", None),
        ] {
            let req = axum::http::Request::builder()
                .method(method)
                .uri(path)
                .header(header::CONTENT_TYPE, OCTET_STREAM)
                .body(Body::empty())
                .unwrap();
            let resp = router.clone().oneshot(req).await.unwrap();
            let status = resp.status().as_u16();
            let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
                .await
                .unwrap();
            match code {
                Some(code) => {
                    assert_eq!(status, code.http_status(), "{method} {path}");
                    let body: ErrorBody = serde_json::from_slice(&bytes).unwrap();
                    assert_eq!(body.error, code.as_str(), "{method} {path}");
                }
                None if path.ends_with("/metrics") => {
                    assert_eq!(status, 200, "{method} {path}");
                    assert!(String::from_utf8_lossy(&bytes).contains("auditor_"));
                }
                None => {
                    // alive before the first epoch, when /healthz is 503
                    assert_eq!(status, 200, "{method} {path}");
                    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                    assert_eq!(v, serde_json::json!({ "status": "alive", "epoch": null }));
                }
            }
        }
    }

    /// Undecodable path segments get the protocol's JSON error body, not
    /// axum's plain-text rejection (found by the fuzz target
    /// `auditor_http`).
    #[tokio::test]
    async fn undecodable_path_segments_are_json_errors() {
        let state = no_epoch_state();
        for (path, code) in [
            ("/v1/epochs/%FF/dbs/0/query", ErrorCode::BadEpoch),
            ("/v1/epochs/1/dbs/%82%30/query", ErrorCode::UnknownDb),
        ] {
            let req = axum::http::Request::post(path)
                .header(header::CONTENT_TYPE, OCTET_STREAM)
                .body(Body::empty())
                .unwrap();
            let resp = app(state.clone()).oneshot(req).await.unwrap();
            assert_eq!(resp.status().as_u16(), code.http_status(), "{path}");
            let bytes = axum::body::to_bytes(resp.into_body(), 1 << 16)
                .await
                .unwrap();
            let body: ErrorBody = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(body.error, code.as_str(), "{path}");
        }
    }
}
