//! The client against a hostile or broken auditor: a fake on 127.0.0.1:0
//! whose databases have every bit set, so every honest answer means
//! "logged" and any `NotFound` would be false. Scripted per request, it
//! answers garbage (random bytes of the right or a wrong length, a real
//! answer's header over random bytes, another query's answer, an empty or
//! JSON or HTML body), answers with another epoch's database, or changes
//! its manifest (epoch id, salts, seeds, shape) between the manifest fetch
//! and the query, or between the audit and the re-check. In every case the
//! audit step (`audit_now`) returns an error or a `Logged` after retrying
//! with a fresh manifest — never a `NotFound` or a report — and the queued
//! audit stays as it was.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use audit_proto::filter::FilterSpec;
use audit_proto::manifest::{
    encode_log_id, DbLayout, LogCoverage, Manifest, ManifestParts, PirSpec,
};
use audit_proto::{LeafHash, LogId};
use axum::body::Bytes;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use browser_client::audit::{audit_now, Outcome, EPOCH_RETRIES};
use browser_client::net::Auditor;
use browser_client::policy::{EntryKind, PendingAudit, PendingQueue};
use pir_core::client::Client;
use pir_core::db::BitDatabase;
use pir_core::params::{DbShape, TABLE1};
use pir_core::sampler::PublicSeed;
use pir_core::server::Server;

type BoxErr = Box<dyn std::error::Error + Send + Sync>;

const LOG: [u8; 32] = [1; 32];
const DAY_MS: u64 = 86_400_000;

fn now_ms() -> u64 {
    ct_core::civil::unix_now_ms()
}

/// An epoch: its manifest (2 filters of `n`·8 bits in one database,
/// covering the test log until now) and a server over a database of ones
/// (or zeros).
struct Ep {
    manifest: Manifest,
    server: Server,
}

fn ep(epoch: u64, salt: u8, pir_seed: u8, n: u64, ones: bool) -> Ep {
    let filter = FilterSpec::new(2, 8, n, [salt; 32]).unwrap();
    let bits = 2 * filter.bits;
    let shape = DbShape::for_bits(bits, BitDatabase::RECORD_BITS);
    let layout = [DbLayout {
        filters: 2,
        rows: shape.ell1 as u64,
        cols: shape.ell2 as u64,
        query_bytes: pir_core::wire::query_len(&TABLE1, shape) as u64,
        response_bytes: pir_core::wire::response_len(&TABLE1) as u64,
    }];
    let now = (now_ms() / 1000) as i64;
    let manifest = Manifest::new(ManifestParts {
        epoch,
        created_at: now,
        snapshot_at: now,
        entries: 100,
        logs: vec![LogCoverage {
            log_id: encode_log_id(&LOG),
            verified_tree_size: 100,
            verified_position: 100,
            ingested_until_ms: now_ms(),
            mmd_s: 86_400,
        }],
        filter,
        pir: PirSpec {
            scheme: "ypir".into(),
            param_set: TABLE1.id,
            param_name: TABLE1.name.into(),
            wire_version: pir_core::wire::VERSION,
            seed: [pir_seed; 32],
        },
        layout: &layout,
        shards: None,
    })
    .unwrap();
    let fill = if ones { 0xff } else { 0 };
    let db = BitDatabase::from_bitmap_owned(bits, vec![fill; (bits / 8) as usize]).unwrap();
    let server =
        Server::setup(TABLE1, db.into_database(), PublicSeed(manifest.dbs[0].seed)).unwrap();
    Ep { manifest, server }
}

/// What the fake answers to one query.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Answer {
    /// The honest answer of the epoch queried (unknown epoch: 404).
    Honest,
    /// Random bytes of the response length.
    RandomRightLength,
    /// Random bytes, one byte short.
    RandomWrongLength,
    /// The honest answer's header (version, seed id) over random bytes.
    HeaderThenRandom,
    /// The honest answer to another client's query for the same bit.
    AnotherQuerys,
    /// An empty 200.
    Empty,
    /// A JSON error body with status 200.
    JsonWith200,
    /// An HTML page with status 500.
    Html500,
    /// Epoch `.0`'s server answers the query whatever epoch was asked for
    /// (a query of another seed or shape is refused with a 400).
    FromEpoch(usize),
    /// A real answer of epoch `.0`'s server to a query under its own seed
    /// (an auditor answering from another epoch's database).
    ForeignSeed(usize),
}

/// Which manifest the fake serves.
#[derive(Clone, Copy, Debug)]
enum Serve {
    /// `epochs[i]`'s.
    Epoch(usize),
    /// Not JSON.
    Garbage,
}

struct Fake {
    epochs: Vec<Ep>,
    /// Scripts: the next manifest requests and answers; when empty,
    /// `Serve::Epoch(current)` and `Answer::Honest`.
    manifests: Mutex<VecDeque<Serve>>,
    answers: Mutex<VecDeque<Answer>>,
    /// The epoch served once the scripts are used up; the one whose
    /// queries are answered honestly.
    current: AtomicUsize,
    manifest_requests: AtomicUsize,
    query_requests: AtomicUsize,
}

fn random(n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    getrandom::getrandom(&mut v).unwrap();
    v
}

fn octets(body: Vec<u8>) -> Response {
    ([("content-type", audit_proto::api::OCTET_STREAM)], body).into_response()
}

async fn handle(fake: Arc<Fake>, method: Method, uri: Uri, body: Bytes) -> Response {
    if method == Method::GET && uri.path() == "/v1/manifest" {
        fake.manifest_requests.fetch_add(1, Ordering::SeqCst);
        let next = fake.manifests.lock().unwrap().pop_front();
        return match next.unwrap_or(Serve::Epoch(fake.current.load(Ordering::SeqCst))) {
            Serve::Epoch(i) => (
                [("content-type", "application/json")],
                fake.epochs[i].manifest.to_json(),
            )
                .into_response(),
            Serve::Garbage => ([("content-type", "application/json")], random(300)).into_response(),
        };
    }
    let asked = uri
        .path()
        .strip_prefix("/v1/epochs/")
        .and_then(|p| p.strip_suffix("/dbs/0/query"))
        .and_then(|e| e.parse::<u64>().ok());
    let (true, Some(asked)) = (method == Method::POST, asked) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    fake.query_requests.fetch_add(1, Ordering::SeqCst);
    let answer = fake
        .answers
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or(Answer::Honest);
    let current = &fake.epochs[fake.current.load(Ordering::SeqCst)];
    let honest = || current.server.answer_bytes(&body);
    let len = pir_core::wire::response_len(&TABLE1);
    match answer {
        Answer::Honest => {
            if asked != current.manifest.epoch {
                let body = serde_json::to_vec(&audit_proto::api::ErrorBody {
                    error: "unknown_epoch".into(),
                    message: "scripted".into(),
                    current_epoch: Some(current.manifest.epoch),
                    shard_url: None,
                })
                .unwrap();
                return (
                    StatusCode::NOT_FOUND,
                    [("content-type", "application/json")],
                    body,
                )
                    .into_response();
            }
            match honest() {
                Ok(a) => octets(a),
                Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
            }
        }
        Answer::RandomRightLength => octets(random(len)),
        Answer::RandomWrongLength => octets(random(len - 1)),
        Answer::HeaderThenRandom => match honest() {
            Ok(mut a) => {
                let tail = random(a.len() - 64);
                a[64..].copy_from_slice(&tail);
                octets(a)
            }
            Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
        },
        Answer::AnotherQuerys => {
            let m = &current.manifest;
            let spec = &m.dbs[0];
            let shape = DbShape {
                ell1: spec.rows as usize,
                ell2: spec.cols as usize,
            };
            let other = Client::new(TABLE1, shape, PublicSeed(spec.seed)).unwrap();
            let (q, _, _) = other.query_bit(spec.bits, 5).unwrap();
            octets(current.server.answer_bytes(&q.to_bytes()).unwrap())
        }
        Answer::Empty => octets(Vec::new()),
        Answer::JsonWith200 => (
            [("content-type", "application/json")],
            r#"{"error":"internal","message":"oops"}"#,
        )
            .into_response(),
        Answer::Html500 => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [("content-type", "text/html")],
            "<html><body>502 Bad Gateway</body></html>",
        )
            .into_response(),
        Answer::ForeignSeed(i) => {
            let e = &fake.epochs[i];
            let spec = &e.manifest.dbs[0];
            let shape = DbShape {
                ell1: spec.rows as usize,
                ell2: spec.cols as usize,
            };
            let c = Client::new(TABLE1, shape, PublicSeed(spec.seed)).unwrap();
            let (q, _, _) = c.query_bit(spec.bits, 5).unwrap();
            octets(e.server.answer_bytes(&q.to_bytes()).unwrap())
        }
        Answer::FromEpoch(i) => match fake.epochs[i].server.answer_bytes(&body) {
            Ok(a) => octets(a),
            Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
        },
    }
}

/// Epochs of the fake: 0 and 1 are epochs 1 and 2 (fresh salts and seeds,
/// same shape); 2 is epoch 2 again with other salts and seeds (an epoch
/// id reused); 3 is epoch 3 with another shape; 4 is epoch 1's manifest
/// over a database of zeros (an auditor serving the wrong data); 5 is
/// epoch 0 (older than every other).
fn epochs() -> Vec<Ep> {
    vec![
        ep(1, 11, 21, 4096, true),
        ep(2, 12, 22, 4096, true),
        ep(2, 13, 23, 4096, true),
        ep(3, 14, 24, 16384, true),
        ep(1, 11, 21, 4096, false),
        ep(0, 15, 25, 4096, true),
    ]
}

async fn start(epochs: Vec<Ep>) -> (Auditor, Arc<Fake>) {
    let fake = Arc::new(Fake {
        epochs,
        manifests: Mutex::new(VecDeque::new()),
        answers: Mutex::new(VecDeque::new()),
        current: AtomicUsize::new(0),
        manifest_requests: AtomicUsize::new(0),
        query_requests: AtomicUsize::new(0),
    });
    let f = fake.clone();
    let app = axum::Router::new().fallback(move |method: Method, uri: Uri, body: Bytes| {
        handle(f.clone(), method, uri, body)
    });
    let url = test_support::fake::serve(app).await;
    (Auditor::new(&url).unwrap(), fake)
}

impl Fake {
    fn script(&self, manifests: &[Serve], answers: &[Answer]) {
        *self.manifests.lock().unwrap() = manifests.iter().copied().collect();
        *self.answers.lock().unwrap() = answers.iter().copied().collect();
    }

    fn counts(&self) -> (usize, usize) {
        (
            self.manifest_requests.swap(0, Ordering::SeqCst),
            self.query_requests.swap(0, Ordering::SeqCst),
        )
    }
}

/// One queued audit of a leaf of the test log, due (its SCT is two days
/// old, the MMD one day).
fn queue(not_found_in: Option<u64>) -> PendingQueue {
    let mut q = PendingQueue::new();
    q.push(PendingAudit {
        leaf_hash: LeafHash::new([7; 32]),
        log_id: LogId::new(LOG),
        sct_timestamp_ms: now_ms() - 2 * DAY_MS,
        mmd_s: 86_400,
        kind: EntryKind::X509,
        sct: String::new(),
        chain: Vec::new(),
        not_found_in,
        queued_at_ms: now_ms() - 2 * DAY_MS,
    });
    q
}

/// Runs one audit step; fails the test on a `NotFound` or a report.
async fn step(auditor: &Auditor, q: &mut PendingQueue) -> Result<Vec<Outcome>, String> {
    match audit_now(auditor, q, &[], &[], now_ms()).await {
        Ok((outcomes, _)) => {
            for o in &outcomes {
                assert!(
                    !matches!(o, Outcome::NotFound { .. } | Outcome::Misbehaviour(_)),
                    "a false {o:?}"
                );
            }
            Ok(outcomes)
        }
        Err(e) => Err(e.to_string()),
    }
}

fn logged(outcomes: &[Outcome], epoch: u64) -> bool {
    matches!(outcomes, [Outcome::Logged { epoch: e, .. }] if *e == epoch)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_answers_give_errors_and_retries_never_not_found() -> Result<(), BoxErr> {
    let (auditor, fake) = start(epochs()).await;
    // Control: the honest fake says "logged".
    let mut q = queue(None);
    assert!(logged(&step(&auditor, &mut q).await?, 1));
    assert!(q.items.is_empty());
    fake.counts();

    let garbage = [
        Answer::RandomRightLength,
        Answer::RandomWrongLength,
        Answer::HeaderThenRandom,
        Answer::AnotherQuerys,
        Answer::Empty,
        Answer::JsonWith200,
        Answer::FromEpoch(1),
        Answer::ForeignSeed(1),
        Answer::ForeignSeed(2),
        Answer::ForeignSeed(3),
    ];
    let mut seen = Vec::new();
    for g in garbage {
        // Garbage every time: an error after 1 + EPOCH_RETRIES attempts,
        // each with a fresh manifest; the audit stays queued untouched.
        let mut q = queue(None);
        let before = q.items.clone();
        fake.script(&[], &[g; 1 + EPOCH_RETRIES]);
        let err = step(&auditor, &mut q)
            .await
            .err()
            .ok_or_else(|| format!("{g:?}: no error"))?;
        assert_eq!(q.items, before, "{g:?}: the queued audit changed");
        assert_eq!(
            fake.counts(),
            (1 + EPOCH_RETRIES, 1 + EPOCH_RETRIES),
            "{g:?}: not retried with a fresh manifest"
        );
        // Garbage once: the retry gets the honest answer.
        fake.script(&[], &[g]);
        assert!(logged(&step(&auditor, &mut q).await?, 1), "{g:?}");
        assert!(q.items.is_empty());
        fake.counts();
        seen.push(format!("{g:?}: {err}"));
    }
    // A 5xx is the group failing, not an answer: the query falls back to a
    // fresh draw (here the same fake), within one manifest.
    let mut q = queue(None);
    fake.script(&[], &[Answer::Html500; 1 + EPOCH_RETRIES]);
    assert!(logged(&step(&auditor, &mut q).await?, 1));
    assert_eq!(fake.counts(), (1, 2 + EPOCH_RETRIES));
    assert_eq!(
        auditor.fallback_stats().failures["server_error"],
        1 + EPOCH_RETRIES as u64
    );
    // Another query's answer decodes under our key only by chance (its
    // noise is refused): more tries, never a bit.
    for _ in 0..5 {
        let mut q = queue(None);
        fake.script(&[], &[Answer::AnotherQuerys; 1 + EPOCH_RETRIES]);
        assert!(step(&auditor, &mut q).await.is_err());
        assert!(q.items[0].not_found_in.is_none());
    }
    fake.counts();
    eprintln!("garbage answers, each refused:\n  {}", seen.join("\n  "));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_that_changes_under_the_client_gives_no_false_not_found() -> Result<(), BoxErr> {
    let (auditor, fake) = start(epochs()).await;

    // Garbage manifests: errors, retried, the audit stays queued.
    let mut q = queue(None);
    fake.script(&[Serve::Garbage; 1 + EPOCH_RETRIES], &[]);
    assert!(step(&auditor, &mut q).await.is_err());
    assert_eq!(q.items.len(), 1);
    assert_eq!(fake.counts(), (1 + EPOCH_RETRIES, 0));

    // The epoch changes between the manifest fetch and the query (same
    // shape, new salts and seeds): the honest fake says unknown_epoch,
    // the client fetches the new manifest and audits there.
    fake.current.store(1, Ordering::SeqCst);
    fake.script(&[Serve::Epoch(0)], &[]);
    assert!(logged(&step(&auditor, &mut q).await?, 2));
    assert_eq!(fake.counts(), (2, 2));

    // The same, but the fake answers the old epoch's query silently with
    // the new epoch's database: refused (another seed), retried.
    let mut q = queue(None);
    fake.script(&[Serve::Epoch(0)], &[Answer::ForeignSeed(1)]);
    assert!(logged(&step(&auditor, &mut q).await?, 2));
    assert_eq!(fake.counts(), (2, 2));

    // The epoch id stays, salts and seeds change between the fetch and
    // the query (epoch 2 rebuilt in place).
    let mut q = queue(None);
    fake.script(&[Serve::Epoch(1)], &[Answer::ForeignSeed(2)]);
    assert!(logged(&step(&auditor, &mut q).await?, 2));

    // The shape changes between the fetch and the query (epoch 3 of
    // another size): the old query does not fit; retried.
    fake.current.store(3, Ordering::SeqCst);
    let mut q = queue(None);
    fake.script(&[Serve::Epoch(1)], &[Answer::FromEpoch(3)]);
    assert!(logged(&step(&auditor, &mut q).await?, 3));
    fake.counts();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recheck_needs_a_later_real_epoch() -> Result<(), BoxErr> {
    let (auditor, fake) = start(epochs()).await;

    // Epoch 1 served over a database of zeros (the wrong data, which no
    // client can tell from an honest answer): one NotFound, recorded for
    // a re-check, no report.
    let mut q = queue(None);
    fake.current.store(4, Ordering::SeqCst);
    let outcomes = audit_now(&auditor, &mut q, &[], &[], now_ms()).await?.0;
    assert!(
        matches!(outcomes[..], [Outcome::NotFound { epoch: 1, .. }]),
        "{outcomes:?}"
    );
    assert_eq!(q.items[0].not_found_in, Some(1));

    // The re-check waits while the manifest names epoch 1 again (even
    // with other salts), or an older epoch.
    for i in [4, 0, 5] {
        fake.current.store(i, Ordering::SeqCst);
        let outcomes = step(&auditor, &mut q).await?;
        assert!(
            matches!(outcomes[..], [Outcome::Pending { .. }]),
            "{outcomes:?}"
        );
        assert_eq!(q.items[0].not_found_in, Some(1));
    }
    assert_eq!(
        fake.counts().1,
        1,
        "a query was sent for a re-check that must wait"
    );

    // Epoch 2 arrives but its answers are garbage, or come from epoch 1's
    // (zero) database: errors, no report, still queued.
    fake.current.store(1, Ordering::SeqCst);
    for g in [
        Answer::RandomRightLength,
        Answer::ForeignSeed(4),
        Answer::FromEpoch(4),
        Answer::HeaderThenRandom,
    ] {
        fake.script(&[], &[g; 1 + EPOCH_RETRIES]);
        assert!(step(&auditor, &mut q).await.is_err(), "{g:?}");
        assert_eq!(q.items.len(), 1);
        assert_eq!(q.items[0].not_found_in, Some(1));
    }
    // The manifest changes between the audit and the re-check: epoch 2
    // fetched, then the fake moves to epoch 3 of another shape.
    fake.current.store(3, Ordering::SeqCst);
    fake.script(&[Serve::Epoch(1)], &[]);
    // Epoch 3's honest answer: logged, the first NotFound forgotten.
    assert!(logged(&step(&auditor, &mut q).await?, 3));
    assert!(q.items.is_empty());
    Ok(())
}
