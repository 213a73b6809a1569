//! A fake auditor on 127.0.0.1:0 for canary tests: one epoch whose manifest
//! states a fill ratio (`claimed`) while its databases are filled as the
//! test says (all ones, all zeros, or random bits at some density), answering
//! real YPIR queries over them. Scripted failures: the next queries can be
//! answered with an error status (and `Retry-After`).
//!
//! Shared by `tests/canaries.rs` and `examples/fake_auditor.rs` (which the
//! extension's Node tests start).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use audit_proto::filter::FilterSpec;
use audit_proto::manifest::{DbLayout, FillRatio, LogCoverage, Manifest, ManifestParts, PirSpec};
use axum::body::Bytes;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use pir_core::db::BitDatabase;
use pir_core::params::{DbShape, TABLE1};
use pir_core::sampler::PublicSeed;
use pir_core::server::Server;
use rand_core::{RngCore, SeedableRng};

/// The log the fake covers (LogID 0x01…01).
pub(crate) const LOG: [u8; 32] = [1; 32];
/// Filters of the epoch.
pub(crate) const FILTERS: u32 = 4;
/// N: entries per filter (bits = 8·N).
pub(crate) const N: u64 = 1024;

/// How the databases are filled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Fill {
    /// Every bit 1: every query answers LOGGED.
    Ones,
    /// Every bit 0: every query answers NOT FOUND.
    Zeros,
    /// Each bit 1 with this probability (seeded, so runs repeat).
    Random(f64),
}

impl std::str::FromStr for Fill {
    type Err = String;
    fn from_str(s: &str) -> Result<Fill, String> {
        match s {
            "ones" => Ok(Fill::Ones),
            "zeros" => Ok(Fill::Zeros),
            d => d
                .parse::<f64>()
                .ok()
                .filter(|p| (0.0..=1.0).contains(p))
                .map(Fill::Random)
                .ok_or_else(|| format!("fill must be ones, zeros or a density in [0, 1]: {s}")),
        }
    }
}

/// A scripted failure of the next query.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Failure {
    /// HTTP status.
    pub(crate) status: u16,
    /// `Retry-After` in seconds, if any.
    pub(crate) retry_after: Option<u64>,
}

/// The running fake.
pub(crate) struct Fake {
    /// Base URL.
    pub(crate) url: String,
    /// The epoch's manifest.
    pub(crate) manifest: Manifest,
    server: Server,
    failures: Mutex<VecDeque<Failure>>,
    /// Queries received (answered or failed).
    pub(crate) queries: AtomicUsize,
    /// Manifest requests received.
    pub(crate) manifests: AtomicUsize,
}

impl Fake {
    /// Answers the next queries with `failures`, in order.
    pub(crate) fn fail_next(&self, failures: &[Failure]) {
        self.failures
            .lock()
            .unwrap()
            .extend(failures.iter().copied());
    }
}

fn bitmap(bits: u64, fill: Fill) -> Vec<u8> {
    let bytes = (bits / 8) as usize;
    match fill {
        Fill::Ones => vec![0xff; bytes],
        Fill::Zeros => vec![0; bytes],
        Fill::Random(p) => {
            let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(42);
            let mut v = vec![0u8; bytes];
            for (i, byte) in v.iter_mut().enumerate() {
                for b in 0..8 {
                    let u = (rng.next_u64() >> 11) as f64 / ((1u64 << 53) as f64);
                    if u < p && ((i * 8 + b) as u64) < bits {
                        *byte |= 1 << b;
                    }
                }
            }
            v
        }
    }
}

/// The epoch (id `epoch`, seeds from `seed`) of a fake that states
/// `claimed` and is filled with `fill`.
pub(crate) fn epoch(epoch: u64, seed: u8, claimed: f64, fill: Fill) -> (Manifest, Server) {
    let filter = FilterSpec::new(FILTERS, 8, N, [seed; 32]).unwrap();
    let bits = u64::from(FILTERS) * filter.bits;
    let shape = DbShape::for_bits(bits, BitDatabase::RECORD_BITS);
    let layout = [DbLayout {
        filters: FILTERS,
        rows: shape.ell1 as u64,
        cols: shape.ell2 as u64,
        query_bytes: pir_core::wire::query_len(&TABLE1, shape) as u64,
        response_bytes: pir_core::wire::response_len(&TABLE1) as u64,
    }];
    let now_ms = ct_core::civil::unix_now_ms();
    let now = (now_ms / 1000) as i64;
    let manifest = Manifest::new(ManifestParts {
        epoch,
        created_at: now,
        snapshot_at: now,
        entries: N,
        logs: vec![LogCoverage {
            log_id: audit_proto::LogId::new(LOG),
            verified_tree_size: N,
            verified_position: N,
            ingested_until_ms: now_ms,
            mmd_s: 86_400,
        }],
        filter,
        pir: PirSpec {
            scheme: "ypir".into(),
            param_set: TABLE1.id,
            param_name: TABLE1.name.into(),
            wire_version: pir_core::wire::VERSION,
            seed: [seed.wrapping_add(100); 32],
        },
        layout: &layout,
        shards: None,
    })
    .unwrap()
    .with_fill_ratio(FillRatio::new(claimed).unwrap())
    .unwrap();
    let db = BitDatabase::from_bitmap_owned(bits, bitmap(bits, fill)).unwrap();
    let server =
        Server::setup(TABLE1, db.into_database(), PublicSeed(manifest.dbs[0].seed)).unwrap();
    (manifest, server)
}

async fn handle(fake: Arc<Fake>, method: Method, uri: Uri, body: Bytes) -> Response {
    let json = |status: StatusCode, code: &str| {
        let body = serde_json::json!({"error": code, "message": "fake auditor"}).to_string();
        (status, [("content-type", "application/json")], body).into_response()
    };
    if method == Method::GET && uri.path() == "/v1/manifest" {
        fake.manifests.fetch_add(1, Ordering::SeqCst);
        return (
            [("content-type", "application/json")],
            fake.manifest.to_json(),
        )
            .into_response();
    }
    let want = format!("/v1/epochs/{}/dbs/0/query", fake.manifest.epoch);
    if method != Method::POST || !uri.path().starts_with("/v1/epochs/") {
        return json(StatusCode::NOT_FOUND, "not_found");
    }
    fake.queries.fetch_add(1, Ordering::SeqCst);
    if let Some(f) = fake.failures.lock().unwrap().pop_front() {
        let status = StatusCode::from_u16(f.status).unwrap();
        let mut r = json(status, "overloaded");
        if let Some(s) = f.retry_after {
            r.headers_mut()
                .insert("retry-after", s.to_string().parse().unwrap());
        }
        return r;
    }
    if uri.path() != want {
        return json(StatusCode::NOT_FOUND, "unknown_epoch");
    }
    match fake.server.answer_bytes(&body) {
        Ok(a) => ([("content-type", audit_proto::api::OCTET_STREAM)], a).into_response(),
        Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    }
}

/// Starts a fake on `addr` (e.g. `127.0.0.1:0`) serving epoch 1 stating
/// `claimed`, filled with `fill`.
pub(crate) async fn start(addr: &str, claimed: f64, fill: Fill) -> Arc<Fake> {
    let (manifest, server) = epoch(1, 7, claimed, fill);
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let fake = Arc::new(Fake {
        url,
        manifest,
        server,
        failures: Mutex::new(VecDeque::new()),
        queries: AtomicUsize::new(0),
        manifests: AtomicUsize::new(0),
    });
    let f = fake.clone();
    let app = axum::Router::new().fallback(move |method: Method, uri: Uri, body: Bytes| {
        handle(f.clone(), method, uri, body)
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    fake
}
