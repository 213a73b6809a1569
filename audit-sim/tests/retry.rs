//! The simulator against a tiny auditor on 127.0.0.1:0 that sheds load: it
//! refuses its first requests with 503/429 + `Retry-After`, then serves a
//! real manifest and real YPIR answers over a 2^16-bit database of ones.
//! The simulated clients must wait as told (recorded by an injected
//! sleeper, not slept), retry, count it in the report, and give up with the
//! auditor's error after the last retry. The same fake can also retire its
//! epoch after every answer, as a busy auditor rotating epochs would, or
//! publish a sharded manifest naming another fake as the shard that
//! answers.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use audit_proto::manifest::Manifest;
use audit_sim::sim::{simulate, SimConfig};
use axum::body::Bytes;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use browser_client::fallback::FallbackPolicy;
use browser_client::net::{RetryPolicy, Sleeper};
use browser_client::policy::AuditPolicy;
use ct_core::loglist::LogList;
use pir_core::db::BitDatabase;
use pir_core::params::TABLE1;
use pir_core::sampler::PublicSeed;
use pir_core::server::Server;

/// What the fake auditor refuses: the first `manifests` manifest requests
/// and the first `queries` queries, with `status` and `Retry-After`.
struct Refuse {
    manifests: usize,
    queries: usize,
    status: u16,
    retry_after: &'static str,
}

const NONE: Refuse = Refuse {
    manifests: 0,
    queries: 0,
    status: 503,
    retry_after: "1",
};

struct Fake {
    manifest: Manifest,
    server: Server,
    refuse: Refuse,
    /// Publish a new epoch after every this many answers (and retire the
    /// old one); `usize::MAX`: never.
    rotate_every: usize,
    answered: AtomicUsize,
    manifest_requests: AtomicUsize,
    query_requests: AtomicUsize,
}

impl Fake {
    fn epoch(&self) -> u64 {
        1 + (self.answered.load(Ordering::SeqCst) / self.rotate_every) as u64
    }
}

/// A manifest of one filter (2^16 bits) in one database, and a pir-core
/// server over that database with every bit set.
fn epoch() -> (Manifest, Server) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let m = test_support::fake::tiny_manifest(1, now, 100);
    let bits = m.filter.bits;
    let db = BitDatabase::from_bitmap_owned(bits, vec![0xff; (bits / 8) as usize]).unwrap();
    let server = Server::setup(TABLE1, db.into_database(), PublicSeed(m.dbs[0].seed)).unwrap();
    (m, server)
}

fn error(status: u16, code: &str, current_epoch: Option<u64>) -> Response {
    let body = serde_json::to_vec(&audit_proto::api::ErrorBody {
        error: code.into(),
        message: "scripted".into(),
        current_epoch,
        shard_url: None,
    })
    .unwrap();
    (
        StatusCode::from_u16(status).unwrap(),
        [("content-type", "application/json")],
        body,
    )
        .into_response()
}

fn refused(status: u16, retry_after: &str) -> Response {
    let mut r = error(status, "overloaded", None);
    r.headers_mut()
        .insert("retry-after", retry_after.parse().unwrap());
    r
}

async fn handle(fake: Arc<Fake>, method: Method, uri: Uri, body: Bytes) -> Response {
    let r = &fake.refuse;
    if method == Method::GET && uri.path() == "/v1/manifest" {
        if fake.manifest_requests.fetch_add(1, Ordering::SeqCst) < r.manifests {
            return refused(r.status, r.retry_after);
        }
        let mut m = fake.manifest.clone();
        m.epoch = fake.epoch();
        return ([("content-type", "application/json")], m.to_json()).into_response();
    }
    let epoch = uri
        .path()
        .strip_prefix("/v1/epochs/")
        .and_then(|p| p.strip_suffix("/dbs/0/query"))
        .and_then(|e| e.parse::<u64>().ok());
    if let (&Method::POST, Some(epoch)) = (&method, epoch) {
        if fake.query_requests.fetch_add(1, Ordering::SeqCst) < r.queries {
            return refused(r.status, r.retry_after);
        }
        if epoch != fake.epoch() {
            return error(404, "unknown_epoch", Some(fake.epoch()));
        }
        return match fake.server.answer_bytes(&body) {
            Ok(answer) => {
                fake.answered.fetch_add(1, Ordering::SeqCst);
                (
                    [
                        ("content-type", audit_proto::api::OCTET_STREAM),
                        (audit_proto::api::BATCH_SIZE_HEADER, "1"),
                        (audit_proto::api::SERVER_TIMING_HEADER, "answer;dur=1.5"),
                    ],
                    answer,
                )
                    .into_response()
            }
            Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
        };
    }
    StatusCode::NOT_FOUND.into_response()
}

fn no_logs() -> LogList {
    LogList {
        version: None,
        log_list_timestamp: None,
        operators: Vec::new(),
    }
}

async fn start(refuse: Refuse) -> (String, Arc<Fake>) {
    start_rotating(refuse, usize::MAX).await
}

async fn start_rotating(refuse: Refuse, rotate_every: usize) -> (String, Arc<Fake>) {
    start_with(refuse, rotate_every, Vec::new()).await
}

/// A fake whose manifest says the database is served by the shards at
/// `shard_urls` (none: by the fake itself).
async fn start_with(
    refuse: Refuse,
    rotate_every: usize,
    shard_urls: Vec<String>,
) -> (String, Arc<Fake>) {
    let (mut manifest, server) = epoch();
    if !shard_urls.is_empty() {
        manifest.shards = Some(audit_proto::ShardMap::modulo(shard_urls));
        manifest.version = audit_proto::manifest::MANIFEST_VERSION;
        manifest.check().unwrap();
    }
    let fake = Arc::new(Fake {
        manifest,
        server,
        refuse,
        rotate_every,
        answered: AtomicUsize::new(0),
        manifest_requests: AtomicUsize::new(0),
        query_requests: AtomicUsize::new(0),
    });
    let f = fake.clone();
    let app = axum::Router::new().fallback(move |method: Method, uri: Uri, body: Bytes| {
        handle(f.clone(), method, uri, body)
    });
    let url = test_support::fake::serve(app).await;
    (url, fake)
}

/// Two clients for a week that audit nothing (only manifest fetches) and
/// `fill_probes` private probes; waits are recorded, not slept.
fn config(
    url: &str,
    fill_probes: usize,
    max_retries: u32,
) -> (SimConfig, Arc<Mutex<Vec<Duration>>>) {
    let waits = Arc::new(Mutex::new(Vec::new()));
    let w = waits.clone();
    let cfg = SimConfig {
        server: url.to_owned(),
        clients: 2,
        weeks: 1,
        policy: AuditPolicy {
            connections_per_week: 70.0,
            sampled_fraction: 0.0,
            audits_per_sample: 2,
        },
        omitted_fraction: 0.0,
        forged_fraction: 0.0,
        concurrency: 2,
        seed: 3,
        fill_probes,
        recheck_timeout: Duration::ZERO,
        queue_dir: None,
        progress: false,
        retry: RetryPolicy {
            max_retries,
            max_wait: Duration::from_secs(60),
            default_wait: Duration::from_secs(1),
            sleeper: Sleeper::new(move |d| {
                w.lock().unwrap().push(d);
                std::future::ready(())
            }),
        },
        fallback: FallbackPolicy::default(),
    };
    (cfg, waits)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulated_clients_wait_out_503_and_429_as_retry_after_says() {
    // The first manifest request gets 503 + Retry-After: 5.
    let (url, fake) = start(Refuse {
        manifests: 1,
        queries: 0,
        status: 503,
        retry_after: "5",
    })
    .await;
    let (cfg, waits) = config(&url, 4, 3);
    let report = simulate(cfg, Vec::new(), no_logs()).await.unwrap();
    assert_eq!(*waits.lock().unwrap(), [Duration::from_secs(5)]);
    assert_eq!((report.retries, report.retry_wait_seconds), (1, 5.0));
    // The probes went through and decoded: every bit of the database is 1.
    assert_eq!((report.fill_probes, report.fill_ratio), (4, 1.0));
    // 1 refused + 1 first fetch + 2 clients × 7 days.
    assert_eq!(fake.manifest_requests.load(Ordering::SeqCst), 16);
    assert_eq!(fake.query_requests.load(Ordering::SeqCst), 4);

    // Queries refused twice with 429 + Retry-After: 2: the fallback draws
    // afresh; the one group (unsharded) is asked again after its rest.
    let (url, fake) = start(Refuse {
        manifests: 0,
        queries: 2,
        status: 429,
        retry_after: "2",
    })
    .await;
    let (cfg, waits) = config(&url, 3, 3);
    let report = simulate(cfg, Vec::new(), no_logs()).await.unwrap();
    // The rest is measured on the real clock: the wait is what is left of
    // the 2 s after the next query was drawn.
    let waits = waits.lock().unwrap().clone();
    assert_eq!(waits.len(), 2);
    assert!(waits
        .iter()
        .all(|w| *w > Duration::ZERO && *w <= Duration::from_secs(2)));
    assert_eq!(report.retries, 0);
    let fb = &report.fallback;
    assert_eq!(
        (fb.queries, fb.attempts, fb.fallbacks, fb.gave_up),
        (3, 5, 2, 0)
    );
    assert_eq!(fb.failures["overloaded"], 2);
    let waited: f64 = waits.iter().map(Duration::as_secs_f64).sum();
    assert!(
        (fb.wait_seconds - waited).abs() < 0.01,
        "{} vs {waited}",
        fb.wait_seconds
    );
    assert_eq!((report.fill_probes, report.fill_ratio), (3, 1.0));
    assert_eq!(fake.query_requests.load(Ordering::SeqCst), 5);
}

/// Queries that every attempt fails are counted in the report, and the
/// simulation runs to its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_queries_are_reported_not_fatal() {
    let (url, fake) = start(Refuse {
        manifests: 0,
        queries: usize::MAX,
        status: 500,
        retry_after: "0",
    })
    .await;
    let (cfg, _) = config(&url, 2, 3);
    let report = simulate(cfg, Vec::new(), no_logs()).await.unwrap();
    let fb = &report.fallback;
    let k = u64::from(browser_client::fallback::MAX_REDRAWS);
    assert_eq!((fb.queries, fb.gave_up), (2, 2));
    assert_eq!((fb.attempts, fb.fallbacks), (2 * (k + 1), 2 * k));
    assert_eq!(fb.failures["server_error"], 2 * (k + 1));
    assert_eq!(report.fill_probes_failed, 2);
    assert!(report.fill_ratio.is_nan());
    assert_eq!(
        fake.query_requests.load(Ordering::SeqCst),
        2 * (k as usize + 1)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulation_stops_with_the_auditors_error_after_the_last_retry() {
    let (url, fake) = start(Refuse {
        manifests: usize::MAX,
        queries: 0,
        status: 503,
        retry_after: "1",
    })
    .await;
    let (cfg, waits) = config(&url, 4, 2);
    match simulate(cfg, Vec::new(), no_logs()).await {
        Err(audit_sim::Error::Client(browser_client::Error::Server { status, code, .. })) => {
            assert_eq!((status, code.as_str()), (503, "overloaded"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(*waits.lock().unwrap(), [Duration::from_secs(1); 2]);
    assert_eq!(fake.manifest_requests.load(Ordering::SeqCst), 3);
}

/// Epochs rotate while the fill ratio is probed: each probe may meet a
/// retired epoch and refetch the manifest, however many probes there are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fill_probes_follow_epochs_retired_under_them() {
    let (url, fake) = start_rotating(NONE, 1).await;
    let (cfg, waits) = config(&url, 6, 3);
    let report = simulate(cfg, Vec::new(), no_logs()).await.unwrap();
    assert_eq!((report.fill_probes, report.fill_ratio), (6, 1.0));
    assert!(waits.lock().unwrap().is_empty());
    // Six answers, and five probes sent to the epoch just retired.
    assert_eq!(fake.answered.load(Ordering::SeqCst), 6);
    assert_eq!(fake.query_requests.load(Ordering::SeqCst), 11);
    assert!(report.epochs.len() >= 6, "{:?}", report.epochs);
}

/// A sharded epoch: clients fetch the manifest from the front and send
/// every query to the shard its map names, never to the front.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_follow_the_manifests_shard_map() {
    let (shard_url, shard) = start(NONE).await;
    let (front_url, front) = start_with(NONE, usize::MAX, vec![shard_url]).await;
    let (cfg, _) = config(&front_url, 5, 0);
    let report = simulate(cfg, Vec::new(), no_logs()).await.unwrap();
    assert_eq!((report.fill_probes, report.fill_ratio), (5, 1.0));
    assert_eq!(front.query_requests.load(Ordering::SeqCst), 0);
    assert_eq!(shard.query_requests.load(Ordering::SeqCst), 5);
    assert_eq!(shard.manifest_requests.load(Ordering::SeqCst), 0);
    assert!(front.manifest_requests.load(Ordering::SeqCst) > 0);
}
