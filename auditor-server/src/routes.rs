//! The HTTP API (`docs/protocol.md`, `docs/openapi.yaml`).
//!
//! Every error is a JSON [`audit_proto::api::ErrorBody`] with a 4xx/5xx
//! status; nothing a client sends changes server state. Limits, as tower
//! layers: a body cap slightly above the largest legal query
//! ([`max_query_body`]), and on the query route a concurrency limit with
//! load shedding (503 + `Retry-After`) and a whole-request timeout.

use std::sync::Arc;
use std::time::{Duration, Instant};

use audit_proto::api::{
    ErrorBody, ErrorCode, BATCH_SIZE_HEADER, OCTET_STREAM, SERVER_TIMING_HEADER,
};
use axum::body::Bytes;
use axum::error_handling::HandleErrorLayer;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use pir_core::wire::Query;
use tower::ServiceBuilder;

use crate::batch::BatchError;
use crate::metrics::Metrics;
use crate::state::{Lookup, Registry};

/// Request limits.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Queries in flight before load shedding.
    pub max_concurrent: usize,
    /// Whole-request timeout of the query route.
    pub timeout: Duration,
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

/// An error answer: stable code (which fixes the status), message.
#[derive(Debug)]
pub struct ApiError {
    code: ErrorCode,
    message: String,
    current_epoch: Option<u64>,
    retry_after: Option<u64>,
}

impl ApiError {
    fn new(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: message.into(),
            current_epoch: None,
            retry_after: None,
        }
    }

    /// The stable error code.
    pub fn code(&self) -> &'static str {
        self.code.as_str()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code.http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = ErrorBody {
            error: self.code.as_str().to_owned(),
            message: self.message,
            current_epoch: self.current_epoch,
        };
        let mut resp = (status, Json(body)).into_response();
        if let Some(s) = self.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        resp
    }
}

/// The router.
pub fn app(state: AppState) -> Router {
    let metrics = state.metrics.clone();
    let limits = ServiceBuilder::new()
        .layer(HandleErrorLayer::new(move |err: tower::BoxError| {
            let metrics = metrics.clone();
            async move {
                let e = if err.is::<tower::load_shed::error::Overloaded>() {
                    ApiError {
                        retry_after: Some(1),
                        ..ApiError::new(
                            ErrorCode::Overloaded,
                            "too many concurrent queries; retry later",
                        )
                    }
                } else if err.is::<tower::timeout::error::Elapsed>() {
                    ApiError {
                        retry_after: Some(1),
                        ..ApiError::new(
                            ErrorCode::Timeout,
                            "the query was not answered in time; retry later",
                        )
                    }
                } else {
                    ApiError::new(ErrorCode::Internal, err.to_string())
                };
                metrics.queries.with_label_values(&[e.code.as_str()]).inc();
                e
            }
        }))
        .load_shed()
        .concurrency_limit(state.limits.max_concurrent)
        .timeout(state.limits.timeout);
    Router::new()
        .route("/v1/manifest", get(manifest))
        .route(
            "/v1/epochs/{epoch}/dbs/{db}/query",
            post(query).route_layer(limits),
        )
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics_text))
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

async fn healthz(State(st): State<AppState>) -> Result<Response, ApiError> {
    let ep = st.registry.current().ok_or_else(no_epoch)?;
    Ok(Json(serde_json::json!({ "status": "ok", "epoch": ep.id() })).into_response())
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
    Path((epoch, db)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let t0 = Instant::now();
    let result = answer_query(&st, &epoch, &db, &headers, body).await;
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

async fn answer_query(
    st: &AppState,
    epoch: &str,
    db: &str,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
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
    let served = db
        .parse::<usize>()
        .ok()
        .and_then(|i| ep.dbs.get(i))
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
    if let Some(ct) = headers.get(header::CONTENT_TYPE) {
        let mime = ct
            .to_str()
            .ok()
            .and_then(|s| s.split(';').next())
            .map(str::trim);
        if mime != Some(OCTET_STREAM) {
            return Err(ApiError::new(
                ErrorCode::UnsupportedMediaType,
                format!("queries are {OCTET_STREAM}"),
            ));
        }
    }
    let body = body.map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            too_large(max_query_body())
        } else {
            ApiError::new(ErrorCode::BadBody, r.body_text())
        }
    })?;
    let want = served.spec.query_bytes as usize;
    if body.len() > want {
        return Err(too_large(want));
    }
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
    st.metrics.bytes_in.inc_by(body.len() as u64);
    drop(body);
    let ans = served.batcher.answer(q).await.map_err(|e| match e {
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

fn too_large(max: usize) -> ApiError {
    ApiError::new(
        ErrorCode::QueryTooLarge,
        format!("query bodies for this database are at most {max} bytes"),
    )
}
