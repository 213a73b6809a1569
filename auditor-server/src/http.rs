//! HTTP errors and bodies shared by the routes: [`ApiError`] (a stable code,
//! a message, the JSON body of `docs/protocol.md`) and reading a body
//! under a size cap.

use audit_proto::api::{ErrorBody, ErrorCode};
use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::StreamExt as _;

/// An error answer: stable code (which fixes the status), message.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub(crate) code: ErrorCode,
    pub(crate) message: String,
    pub(crate) current_epoch: Option<u64>,
    pub(crate) retry_after: Option<u64>,
    /// Answer with `Connection: close` (the body was left unread).
    pub(crate) close: bool,
    /// With `wrong_shard`: the shard that serves the database.
    pub(crate) shard_url: Option<String>,
}

impl ApiError {
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: message.into(),
            current_epoch: None,
            retry_after: None,
            close: false,
            shard_url: None,
        }
    }

    /// The stable error code.
    pub(crate) fn code(&self) -> &'static str {
        self.code.as_str()
    }

    /// With a `Retry-After` of `seconds`.
    pub(crate) fn retry_after(mut self, seconds: u64) -> ApiError {
        self.retry_after = Some(seconds);
        self
    }

    /// Answered with `Connection: close` (the body was left unread).
    pub(crate) fn closing(mut self) -> ApiError {
        self.close = true;
        self
    }

    /// The code.
    pub(crate) fn error_code(&self) -> ErrorCode {
        self.code
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
            shard_url: self.shard_url,
        };
        let mut resp = (status, Json(body)).into_response();
        if let Some(s) = self.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        if self.close {
            resp.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        resp
    }
}

/// Reads a body of at most `max` bytes (`declared`: its `Content-Length`,
/// if any, already checked against `max`). Errors are the handler's.
pub(crate) async fn read_body(
    body: Body,
    max: usize,
    declared: Option<u64>,
) -> Result<Vec<u8>, ApiError> {
    let mut buf = Vec::with_capacity(declared.map_or(0, |d| d.min(max as u64) as usize));
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk: Bytes = chunk.map_err(|e| {
            ApiError::new(
                ErrorCode::BadBody,
                format!("the request body could not be read: {e}"),
            )
        })?;
        if buf.len() + chunk.len() > max {
            return Err(too_large(max));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf)
}

/// 413 `query_too_large`: the body is over `max` bytes.
pub(crate) fn too_large(max: usize) -> ApiError {
    ApiError::new(
        ErrorCode::QueryTooLarge,
        format!("query bodies for this database are at most {max} bytes"),
    )
}
