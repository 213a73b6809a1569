//! The auditor's HTTP request path end to end: arbitrary method, path,
//! headers and body (encoding in `ct_auditor_fuzz::http_input`) go through
//! auditor-server's own router (`tower::ServiceExt::oneshot`) serving a
//! tiny TOY epoch built once per process, through routing, extraction,
//! query parsing, batching and YPIR answering. Nothing panics, and the
//! answers keep the protocol's contract: every error is a JSON error body
//! whose code is a known one sent with its own status; a 200 query answer
//! is a well-formed response of the advertised length; a 200 manifest is
//! the served one.
#![no_main]

use audit_proto::api::{ErrorBody, ErrorCode};
use audit_proto::Manifest;
use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, Method, Request, StatusCode, Uri};
use ct_auditor_fuzz::{http_input, tiny_epoch};
use libfuzzer_sys::fuzz_target;
use pir_core::sampler::PublicSeed;
use tower::ServiceExt as _;

/// The database a query path names, if it is one of the manifest's.
fn db_of(path: &[u8], m: &Manifest) -> usize {
    let s = String::from_utf8_lossy(path);
    s.split("/dbs/")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .and_then(|d| d.parse::<usize>().ok())
        .filter(|&d| d < m.dbs.len())
        .unwrap_or(0)
}

fuzz_target!(|data: &[u8]| {
    let Some(raw) = http_input::parse(data) else {
        return;
    };
    let served = tiny_epoch::served();
    let Ok(method) = Method::from_bytes(raw.method) else {
        return;
    };
    let Ok(uri) = Uri::try_from(raw.path) else {
        return;
    };
    let mut body = raw.body.to_vec();
    if body.len() >= 14 && body[6..14] == [0; 8] {
        let db = &served.manifest.dbs[db_of(raw.path, &served.manifest)];
        body[6..14].copy_from_slice(&PublicSeed(db.seed).id());
    }
    let mut req = Request::new(Body::from(body));
    *req.method_mut() = method.clone();
    *req.uri_mut() = uri;
    for (n, v) in &raw.headers {
        let (Ok(n), Ok(v)) = (HeaderName::from_bytes(n), HeaderValue::from_bytes(v)) else {
            return;
        };
        req.headers_mut().append(n, v);
    }
    let is_query = req.uri().path().ends_with("/query");
    let (status, bytes) = served.rt.block_on(async {
        let resp = served
            .router
            .clone()
            .oneshot(req)
            .await
            .expect("the router is infallible");
        let status = resp.status();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .expect("body reads");
        (status, bytes)
    });
    if std::env::var_os("FUZZ_HTTP_TRACE").is_some() {
        eprintln!(
            "{method} {} -> {status}, {} bytes",
            String::from_utf8_lossy(raw.path),
            bytes.len()
        );
    }
    if method == Method::HEAD {
        return;
    }
    if status.is_client_error() || status.is_server_error() {
        let e: ErrorBody = serde_json::from_slice(&bytes).unwrap_or_else(|err| {
            panic!(
                "{status} without a JSON error body ({err}): {:?}",
                String::from_utf8_lossy(&bytes)
            )
        });
        let code = ErrorCode::parse(&e.error).expect("a known error code");
        assert_eq!(
            code.http_status(),
            status.as_u16(),
            "{} sent with {status}",
            e.error
        );
        return;
    }
    assert_eq!(status, StatusCode::OK, "unexpected status");
    if is_query && method == Method::POST {
        let db = &served.manifest.dbs[db_of(raw.path, &served.manifest)];
        assert_eq!(bytes.len() as u64, db.response_bytes);
        pir_core::wire::Response::from_bytes(&bytes).expect("a served answer parses");
    } else if req_path_is(raw.path, b"/v1/manifest") {
        assert_eq!(
            Manifest::from_json(&bytes).ok().as_ref(),
            Some(&served.manifest)
        );
    }
});

fn req_path_is(path: &[u8], want: &[u8]) -> bool {
    path.split(|&b| b == b'?').next() == Some(want)
}
