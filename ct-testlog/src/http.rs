//! The HTTP front end (axum): RFC 6962 §4 read endpoints, static-ct-api
//! assets, parameter validation and the misbehaviour layer.

use std::io::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, Request, State};
use axum::http::{header, HeaderValue, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;

use ct_core::merkle::{parse_tile_path, Hash, TilePath, HASH_LEN};

use crate::config::Misbehaviour;
use crate::shared::Shared;
use crate::state::View;

type App = Arc<Shared>;
type Params = Result<Query<Vec<(String, String)>>, QueryRejection>;

const JSON: &str = "application/json";
const OCTETS: &str = "application/octet-stream";
const HTML: &str = "text/html; charset=utf-8";
/// Longest query parameter value looked at (a base64 hash is 44).
const MAX_PARAM_LEN: usize = 128;

pub(crate) fn router(shared: App) -> Router {
    Router::new()
        .route("/ct/v1/get-sth", get(get_sth))
        .route("/ct/v1/get-sth-consistency", get(get_sth_consistency))
        .route("/ct/v1/get-proof-by-hash", get(get_proof_by_hash))
        .route("/ct/v1/get-entries", get(get_entries))
        .route("/ct/v1/get-entry-and-proof", get(get_entry_and_proof))
        .route("/ct/v1/get-roots", get(get_roots))
        .route("/ct/v1/add-chain", post(not_implemented))
        .route("/ct/v1/add-pre-chain", post(not_implemented))
        .route("/checkpoint", get(checkpoint))
        .route("/tile/{*rest}", get(tile))
        .route("/issuer/{fingerprint}", get(issuer))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(shared.clone(), misbehave))
        .with_state(shared)
}

// --- responses ----------------------------------------------------------------

fn json_ok(body: String) -> Response {
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, JSON),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

fn json_error(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, JSON)],
        serde_json::json!({ "error": message }).to_string(),
    )
        .into_response()
}

fn bad_request(message: &str) -> Response {
    json_error(StatusCode::BAD_REQUEST, message)
}

/// A refused request: status and message of the JSON error body.
struct Reject(StatusCode, String);

impl Reject {
    fn bad(message: impl Into<String>) -> Self {
        Reject(StatusCode::BAD_REQUEST, message.into())
    }
}

impl IntoResponse for Reject {
    fn into_response(self) -> Response {
        json_error(self.0, &self.1)
    }
}

/// Runs a handler body, turning a [`Reject`] into its response.
fn reply(f: impl FnOnce() -> Result<Response, Reject>) -> Response {
    f().unwrap_or_else(IntoResponse::into_response)
}

async fn not_found() -> Response {
    json_error(StatusCode::NOT_FOUND, "not found")
}

async fn not_implemented() -> Response {
    json_error(
        StatusCode::NOT_IMPLEMENTED,
        "this test log issues its entries itself; add-chain and add-pre-chain are not implemented",
    )
}

fn b64(bytes: &[u8]) -> String {
    BASE64.encode(bytes)
}

fn b64_list(hashes: &[Hash]) -> Vec<String> {
    hashes.iter().map(|h| b64(h)).collect()
}

// --- parameters ---------------------------------------------------------------

/// The single value of query parameter `name`.
fn param<'a>(params: &'a [(String, String)], name: &str) -> Result<&'a str, Reject> {
    let mut found = params.iter().filter(|(k, _)| k == name);
    let v = found
        .next()
        .ok_or_else(|| Reject::bad(format!("missing parameter {name:?}")))?;
    if found.next().is_some() {
        return Err(Reject::bad(format!(
            "parameter {name:?} given more than once"
        )));
    }
    if v.1.len() > MAX_PARAM_LEN {
        return Err(Reject::bad(format!("parameter {name:?} is too long")));
    }
    Ok(&v.1)
}

/// A decimal `u64` parameter: ASCII digits only.
fn u64_param(params: &[(String, String)], name: &str) -> Result<u64, Reject> {
    let v = param(params, name)?;
    if v.is_empty() || v.len() > 20 || !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Reject::bad(format!(
            "parameter {name:?} is not a non-negative decimal integer"
        )));
    }
    v.parse()
        .map_err(|_| Reject::bad(format!("parameter {name:?} does not fit in 64 bits")))
}

fn query(params: Params) -> Result<Vec<(String, String)>, Reject> {
    params
        .map(|Query(p)| p)
        .map_err(|e| Reject::bad(format!("bad query string: {e}")))
}

// --- RFC 6962 -----------------------------------------------------------------

fn with_view<F>(s: &Shared, f: F) -> Response
where
    F: FnOnce(View<'_>) -> Response,
{
    let st = s.read();
    f(st.view())
}

async fn get_sth(State(s): State<App>) -> Response {
    with_view(&s, |v| json_ok(v.head.sth_json.clone()))
}

async fn get_sth_consistency(State(s): State<App>, params: Params) -> Response {
    reply(|| {
        let p = query(params)?;
        let first = u64_param(&p, "first")?;
        let second = u64_param(&p, "second")?;
        Ok(with_view(&s, |v| {
            let size = v.size();
            if first > second || second > size {
                return bad_request(&format!(
                    "need 0 <= first <= second <= {size}, got first={first} second={second}"
                ));
            }
            match v.proofs.consistency_proof(first, second) {
                Some(proof) => {
                    json_ok(serde_json::json!({ "consistency": b64_list(&proof) }).to_string())
                }
                None => bad_request("tree sizes out of range"),
            }
        }))
    })
}

async fn get_proof_by_hash(State(s): State<App>, params: Params) -> Response {
    reply(|| {
        let p = query(params)?;
        let hash_b64 = param(&p, "hash")?;
        let tree_size = u64_param(&p, "tree_size")?;
        let hash: Hash = BASE64
            .decode(hash_b64)
            .ok()
            .and_then(|h| <[u8; HASH_LEN]>::try_from(h.as_slice()).ok())
            .ok_or_else(|| Reject::bad("hash is not a base64 SHA-256 leaf hash"))?;
        Ok(with_view(&s, |v| {
            let size = v.size();
            if tree_size == 0 || tree_size > size {
                return bad_request(&format!("need 1 <= tree_size <= {size}"));
            }
            let Some(index) = v.proofs.find(&hash, tree_size) else {
                return json_error(
                    StatusCode::NOT_FOUND,
                    "no leaf with this hash in the tree of that size",
                );
            };
            match v.proofs.inclusion_proof(index, tree_size) {
                Some(path) => json_ok(
                    serde_json::json!({ "leaf_index": index, "audit_path": b64_list(&path) })
                        .to_string(),
                ),
                None => bad_request("tree size out of range"),
            }
        }))
    })
}

async fn get_entries(State(s): State<App>, params: Params) -> Response {
    reply(|| {
        let p = query(params)?;
        let start = u64_param(&p, "start")?;
        let end = u64_param(&p, "end")?;
        if start > end {
            return Err(Reject::bad("start is after end"));
        }
        let st = s.read();
        let v = st.view();
        let size = v.size();
        if start >= size {
            return Err(Reject::bad(format!(
                "start {start} is not below the tree size {size}"
            )));
        }
        let mut cap = s.cfg.max_get_entries.max(1) as u64;
        if let Misbehaviour::TruncateBatches { max } = st.misbehaviour {
            cap = cap.min(max.max(1) as u64);
        }
        let last = end.min(size - 1).min(start.saturating_add(cap - 1));
        let mut body = String::from("{\"entries\":[");
        for i in start..=last {
            let Some(e) = v.data.entries.get(i as usize) else {
                break;
            };
            if i > start {
                body.push(',');
            }
            body.push_str("{\"leaf_input\":\"");
            body.push_str(&b64(&e.leaf_input()));
            body.push_str("\",\"extra_data\":\"");
            body.push_str(&b64(&e.extra_data(&s.chain_encoding)));
            body.push_str("\"}");
        }
        body.push_str("]}");
        Ok(json_ok(body))
    })
}

async fn get_entry_and_proof(State(s): State<App>, params: Params) -> Response {
    reply(|| {
        let p = query(params)?;
        let index = u64_param(&p, "leaf_index")?;
        let tree_size = u64_param(&p, "tree_size")?;
        Ok(with_view(&s, |v| {
            let size = v.size();
            if index >= tree_size || tree_size > size {
                return bad_request(&format!("need leaf_index < tree_size <= {size}"));
            }
            match (
                v.data.entries.get(index as usize),
                v.proofs.inclusion_proof(index, tree_size),
            ) {
                (Some(e), Some(path)) => json_ok(
                    serde_json::json!({
                        "leaf_input": b64(&e.leaf_input()),
                        "extra_data": b64(&e.extra_data(&s.chain_encoding)),
                        "audit_path": b64_list(&path),
                    })
                    .to_string(),
                ),
                _ => bad_request("leaf index out of range"),
            }
        }))
    })
}

async fn get_roots(State(s): State<App>) -> Response {
    json_ok(serde_json::json!({ "certificates": [b64(s.ca.der())] }).to_string())
}

// --- static-ct-api ------------------------------------------------------------

async fn checkpoint(State(s): State<App>) -> Response {
    with_view(&s, |v| {
        (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            v.head.checkpoint.clone(),
        )
            .into_response()
    })
}

fn immutable(content_type: &'static str, body: Vec<u8>) -> Response {
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "public, max-age=604800, immutable"),
        ],
        body,
    )
        .into_response()
}

fn gzip(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes).ok()?;
    enc.finish().ok()
}

async fn tile(State(s): State<App>, uri: Uri) -> Response {
    let path = uri.path();
    let id = match parse_tile_path(path) {
        Ok(id) => id,
        Err(e) => return bad_request(&e.to_string()),
    };
    with_view(&s, |v| {
        // Serve only what the served head commits to.
        let size = v.size();
        match id {
            TilePath::Hash(t) => {
                let exists = t.leaf_range().is_some_and(|(_, end)| end <= size);
                match v.data.tree.hash_tile(t).filter(|_| exists) {
                    Some(body) => immutable(OCTETS, body),
                    None => json_error(StatusCode::NOT_FOUND, "no such tile"),
                }
            }
            TilePath::Data(t) => {
                let Some((start, end)) = t.leaf_range().filter(|&(_, end)| end <= size) else {
                    return json_error(StatusCode::NOT_FOUND, "no such tile");
                };
                let Some(entries) = v.data.entries.get(start as usize..end as usize) else {
                    return json_error(StatusCode::NOT_FOUND, "no such tile");
                };
                let mut body = Vec::new();
                for e in entries {
                    body.extend_from_slice(&e.tile_leaf);
                }
                match gzip(&body) {
                    Some(z) => {
                        let mut r = immutable(OCTETS, z);
                        r.headers_mut()
                            .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
                        r
                    }
                    None => immutable(OCTETS, body),
                }
            }
        }
    })
}

async fn issuer(State(s): State<App>, uri: Uri) -> Response {
    let fp = uri.path().trim_start_matches("/issuer/");
    let ours = ct_core::hex::encode(&s.ca.fingerprint);
    if fp.len() != 64
        || !fp
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return bad_request("the fingerprint must be 64 lowercase hex digits");
    }
    if fp != ours {
        return json_error(StatusCode::NOT_FOUND, "unknown issuer");
    }
    immutable("application/pkix-cert", s.ca.der().to_vec())
}

// --- misbehaviour -------------------------------------------------------------

async fn misbehave(State(s): State<App>, req: Request, next: Next) -> Response {
    let m = s.read().misbehaviour.clone();
    let n = s.requests.fetch_add(1, Ordering::SeqCst) + 1;
    match m {
        Misbehaviour::RateLimit {
            every_nth,
            retry_after_s,
        } if n % u64::from(every_nth.max(1)) == 0 => {
            let mut r = json_error(StatusCode::TOO_MANY_REQUESTS, "rate limited");
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_s));
            r
        }
        Misbehaviour::Garbage => garbage(req.uri().path()),
        _ => next.run(req).await,
    }
}

const HTML_PAGE: &str = "<html><body><h1>502 Bad Gateway</h1><p>The upstream server is \
                         unavailable.</p></body></html>";

/// A body that fails to parse as whatever `path` should serve.
fn garbage(path: &str) -> Response {
    let (status, ct, body): (StatusCode, &'static str, Vec<u8>) = match path {
        "/ct/v1/get-sth" => (
            StatusCode::OK,
            JSON,
            br#"{"tree_size":3,"timestamp":1700000000000,"sha256_root_hash":"not*base64!","tree_head_signature":"@@@@"}"#.to_vec(),
        ),
        "/ct/v1/get-entries" => (StatusCode::OK, JSON, br#"{"entries":"nope"}"#.to_vec()),
        "/ct/v1/get-sth-consistency" => (
            StatusCode::OK,
            JSON,
            br#"{"consistency":["!!not base64!!"]}"#.to_vec(),
        ),
        "/ct/v1/get-roots" => (StatusCode::OK, JSON, br#"{"certificates":[42]}"#.to_vec()),
        // Neither a whole number of hashes nor a parseable TileLeaf.
        p if p.starts_with("/tile/data/") => (StatusCode::OK, OCTETS, HTML_PAGE.as_bytes().to_vec()),
        p if p.starts_with("/tile/") => (StatusCode::OK, OCTETS, vec![0x3c; 33]),
        "/checkpoint" | "/ct/v1/get-proof-by-hash" | "/ct/v1/get-entry-and-proof" => {
            (StatusCode::OK, HTML, HTML_PAGE.as_bytes().to_vec())
        }
        _ => (StatusCode::BAD_GATEWAY, HTML, HTML_PAGE.as_bytes().to_vec()),
    };
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
    r
}
