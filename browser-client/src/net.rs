//! Native HTTP transport to the auditor (reqwest). The browser extension
//! uses `fetch` instead, around the same [`crate::probe`] code.
//!
//! Every response is size-capped before it is read (manifest: 4 MiB;
//! query response: the manifest's exact `response_bytes`), and errors come
//! back as [`Error::Server`] with the auditor's JSON error code.

use std::sync::Arc;
use std::time::{Duration, Instant};

use audit_proto::api::{
    ErrorBody, BATCH_SIZE_HEADER, MAX_MANIFEST_BYTES, OCTET_STREAM, SERVER_TIMING_HEADER,
};
use audit_proto::Manifest;

use crate::error::{Error, Result};
use crate::probe::PreparedQuery;

/// What one query cost on the wire and on the server.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct QueryStats {
    /// Request body bytes.
    pub upload_bytes: usize,
    /// Response body bytes.
    pub download_bytes: usize,
    /// Server-reported wall time of the answering pass (s), whole batch.
    pub server_pass_seconds: f64,
    /// Queries in that pass.
    pub batch: usize,
    /// Round trip as seen by the client (s).
    pub round_trip_seconds: f64,
    /// Client time spent decoding the response (s).
    pub decode_seconds: f64,
}

/// A client of one auditor.
#[derive(Clone, Debug)]
pub struct Auditor {
    base: Arc<str>,
    http: reqwest::Client,
}

impl Auditor {
    /// `base` like `http://127.0.0.1:8080` (no trailing slash needed).
    pub fn new(base: &str) -> Result<Auditor> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| Error::Network(e.to_string()))?;
        Ok(Auditor {
            base: base.trim_end_matches('/').into(),
            http,
        })
    }

    /// The base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Fetches and checks the current manifest; returns it with its size.
    pub async fn manifest(&self) -> Result<(Manifest, usize)> {
        let resp = self
            .http
            .get(format!("{}/v1/manifest", self.base))
            .send()
            .await
            .map_err(|e| Error::Network(e.to_string()))?;
        let body = read_capped(resp, MAX_MANIFEST_BYTES).await?;
        let n = body.len();
        Ok((Manifest::from_json(&body)?, n))
    }

    /// Sends a prepared query and decodes the bit.
    pub async fn query(&self, q: &PreparedQuery) -> Result<(bool, QueryStats)> {
        let t = Instant::now();
        let resp = self
            .http
            .post(format!("{}{}", self.base, q.path))
            .header("content-type", OCTET_STREAM)
            .body(q.body.clone())
            .send()
            .await
            .map_err(|e| Error::Network(e.to_string()))?;
        let batch = header(&resp, BATCH_SIZE_HEADER)
            .and_then(|v| v.parse().ok())
            .unwrap_or(1);
        let server_pass_seconds = header(&resp, SERVER_TIMING_HEADER)
            .as_deref()
            .and_then(parse_server_timing)
            .unwrap_or(0.0);
        let body = read_capped(resp, q.response_bytes).await?;
        let round_trip_seconds = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let bit = q.decode(&body)?;
        let stats = QueryStats {
            upload_bytes: q.body.len(),
            download_bytes: body.len(),
            server_pass_seconds,
            batch,
            round_trip_seconds,
            decode_seconds: t.elapsed().as_secs_f64(),
        };
        Ok((bit, stats))
    }
}

fn header(resp: &reqwest::Response, name: &str) -> Option<String> {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// `answer;dur=12.5` → 0.0125 s.
pub fn parse_server_timing(v: &str) -> Option<f64> {
    v.split(',')
        .map(str::trim)
        .find(|m| m.starts_with("answer"))?
        .split(';')
        .find_map(|p| p.trim().strip_prefix("dur="))?
        .parse::<f64>()
        .ok()
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
        .map(|ms| ms / 1e3)
}

/// Reads a response body of at most `max` bytes; non-2xx become
/// [`Error::Server`] with the JSON error body's code.
async fn read_capped(mut resp: reqwest::Response, max: usize) -> Result<Vec<u8>> {
    let status = resp.status();
    let mut body = Vec::new();
    let cap = if status.is_success() { max } else { 64 << 10 };
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| Error::Network(e.to_string()))?
    {
        if body.len() + chunk.len() > cap {
            return Err(Error::Invalid(format!("auditor response over {cap} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    if !status.is_success() {
        let (code, message) = match serde_json::from_slice::<ErrorBody>(&body) {
            Ok(e) => (e.error, e.message),
            Err(_) => (
                "http_error".to_owned(),
                String::from_utf8_lossy(&body).into_owned(),
            ),
        };
        return Err(Error::Server {
            status: status.as_u16(),
            code,
            message,
        });
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_timing() {
        assert_eq!(parse_server_timing("answer;dur=12.5"), Some(0.0125));
        assert_eq!(
            parse_server_timing("db;dur=1, answer;desc=\"x\";dur=2"),
            Some(0.002)
        );
        assert_eq!(parse_server_timing("answer"), None);
        assert_eq!(parse_server_timing("answer;dur=-1"), None);
        assert_eq!(parse_server_timing("answer;dur=NaN"), None);
    }
}
