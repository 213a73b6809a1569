//! Ingestion tests against the local test log (`ct-testlog`) over
//! real HTTP on 127.0.0.1, through both APIs (RFC 6962 `get-entries` and
//! static-ct-api tiles), on SQLite (a temp file) and, when
//! `TEST_DATABASE_URL` is set, on PostgreSQL too (a fresh database per
//! case, like `tests/store.rs`):
//!
//! ```sh
//! export TEST_DATABASE_URL="$(bash ct-store/tests/pg.sh start)"
//! cargo test -p ct-ingest --test ingest
//! bash ct-store/tests/pg.sh stop
//! ```
//!
//! `TEST_REQUIRE_POSTGRES=1` turns a missing `TEST_DATABASE_URL` into a
//! failure. Throughput is measured by the benchmark program, not here:
//! `cargo run --release -p ct-ingest --features bench -- bench --api both`.

use std::collections::HashSet;
use std::error::Error as StdError;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ct_core::hex::encode as hex;
use ct_core::LogList;
use ct_ingest::config::{Config, LogLimits, LogSelector, SelectedLog};
use ct_ingest::http::{HttpClient, HttpSettings};
use ct_ingest::ingest::{ingest_log, run_once, IngestOptions, IngestReport};
use ct_ingest::Error;
use ct_store::{Commit, FaultPlan, LogKind, Store};
use ct_testlog::{IssuedEntry, Misbehaviour, TestLog, TestLogConfig};
use futures_util::TryStreamExt;

use ct_store::testing::TestDb;

type TestResult = Result<(), Box<dyn StdError + Send + Sync>>;
type BoxErr = Box<dyn StdError + Send + Sync>;

const APIS: [LogKind; 2] = [LogKind::Rfc6962, LogKind::Static];

// ---------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------

fn now_s() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Fast retries for tests.
fn http() -> HttpClient {
    HttpClient::new(&HttpSettings {
        timeout_seconds: 20.0,
        max_retries: 8,
        initial_backoff_ms: 10,
        max_backoff_seconds: 0.2,
        max_retry_after_seconds: 10,
        ..HttpSettings::default()
    })
    .expect("http client")
}

fn limits(batch_size: u64, commit_every: u64) -> LogLimits {
    LogLimits {
        batch_size,
        concurrency: 4,
        requests_per_second: None,
        commit_every,
    }
}

/// The test log as a [`SelectedLog`], selected from its log list by log ID
/// and API, with `limits`.
fn select(log: &TestLog, api: LogKind, l: &LogLimits) -> Result<SelectedLog, BoxErr> {
    let list = LogList::from_json(log.log_list_json().as_bytes())?;
    let config = Config {
        logs: vec![LogSelector {
            id: Some(hex(log.log_id().as_bytes())),
            api: Some(api.as_str().to_owned()),
            batch_size: Some(l.batch_size),
            concurrency: Some(l.concurrency),
            requests_per_second: Some(l.requests_per_second.unwrap_or(0.0)),
            commit_every: Some(l.commit_every),
            ..LogSelector::default()
        }],
        ..Config::default()
    };
    config.validate()?;
    let mut logs = config.select_logs(&list, now_s())?;
    assert_eq!(logs.len(), 1);
    let sel = logs.remove(0);
    assert_eq!(sel.kind(), api);
    Ok(sel)
}

async fn start_log(max_get_entries: usize) -> Result<TestLog, BoxErr> {
    Ok(TestLog::start(TestLogConfig {
        max_get_entries,
        mmd_seconds: 3600,
        ..TestLogConfig::default()
    })
    .await?)
}

/// Adds `n` entries, half precertificates.
async fn fill(log: &TestLog, n: usize) -> Result<Vec<IssuedEntry>, BoxErr> {
    Ok(log.add_entries(n, 0.5).await?)
}

/// The active leaf hashes, checking there are no duplicate rows.
async fn active_set(store: &Store) -> Result<HashSet<[u8; 32]>, BoxErr> {
    let all: Vec<[u8; 32]> = store.active_leaf_hashes(now_s()).try_collect().await?;
    let set: HashSet<[u8; 32]> = all.iter().copied().collect();
    assert_eq!(set.len(), all.len(), "duplicate rows in S");
    Ok(set)
}

fn hashes(issued: &[IssuedEntry]) -> HashSet<[u8; 32]> {
    issued.iter().map(|e| e.leaf_hash.to_bytes()).collect()
}

/// Asserts S equals the leaf hashes of `issued` (printing sizes, not sets).
async fn assert_set(store: &Store, issued: &[IssuedEntry], ctx: &str) -> Result<(), BoxErr> {
    let got = active_set(store).await?;
    let want = hashes(issued);
    let missing = want.difference(&got).count();
    let extra = got.difference(&want).count();
    assert!(
        missing == 0 && extra == 0,
        "{ctx}: S has {} entries, expected {}: {missing} missing, {extra} unexpected",
        got.len(),
        want.len()
    );
    Ok(())
}

async fn ingest(
    store: &Store,
    sel: &SelectedLog,
    opts: &IngestOptions,
) -> ct_ingest::Result<IngestReport> {
    ingest_log(store, &http(), sel, opts).await
}

/// Verified position and active count, for "nothing changed" checks.
async fn snapshot(store: &Store, log: &TestLog) -> Result<(u64, u64, Option<[u8; 32]>), BoxErr> {
    let st = store.log_state(&log.log_id()).await?;
    Ok((
        st.verified_position,
        store.count_active(now_s()).await?,
        st.verified_root_hash,
    ))
}

// ---------------------------------------------------------------------------
// Full ingest, then incremental
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_then_incremental_ingest() -> TestResult {
    for api in APIS {
        for db in TestDb::all("i", &format!("full_{}", api.as_str())).await? {
            let ctx = format!("{} {}", db.name(), api.as_str());
            let store = db.store().await?;
            let log = start_log(256).await?;
            let mut issued = fill(&log, 700).await?;
            // Batches of 100 and commits every 300 (static: 512) entries: the
            // intermediate commits are proven with consistency proofs (RFC
            // 6962) or hash tiles (static-ct-api).
            let sel = select(&log, api, &limits(100, 300))?;
            let r = ingest(&store, &sel, &IngestOptions::default()).await?;
            assert_eq!(r.verified_position, 700, "{ctx}");
            assert_eq!(r.inserted, 700, "{ctx}");
            assert_eq!(r.entries_downloaded, 700, "{ctx}");
            assert!(r.commits >= 2, "{ctx}: {} commits", r.commits);
            assert_set(&store, &issued, &ctx).await?;
            let sth = log.signed_tree_head();
            let st = store.log_state(&log.log_id()).await?;
            assert_eq!(st.verified_position, 700, "{ctx}");
            assert_eq!(st.verified_tree_size, 700, "{ctx}");
            assert_eq!(st.verified_root_hash, Some(sth.root_hash), "{ctx}");
            // "Ingested until" = signed head timestamp - MMD.
            assert_eq!(st.ingested_until_ms, sth.timestamp - 3_600_000, "{ctx}");
            assert!(
                issued
                    .iter()
                    .filter(|e| e.timestamp_ms <= st.ingested_until_ms)
                    .count()
                    == 0,
                "{ctx}: the test log's entries are all younger than the MMD"
            );

            // Nothing new: nothing downloaded.
            let r = ingest(&store, &sel, &IngestOptions::default()).await?;
            assert_eq!(r.entries_downloaded, 0, "{ctx}");
            assert_eq!(r.verified_position, 700, "{ctx}");

            // Growth: resumes at 700 from the stored frontier, after
            // checking the new head extends the verified one.
            issued.extend(fill(&log, 333).await?);
            let r = ingest(&store, &sel, &IngestOptions::default()).await?;
            assert_eq!(r.start_position, 700, "{ctx}");
            assert_eq!(r.entries_downloaded, 333, "{ctx}");
            assert_eq!(r.verified_position, 1033, "{ctx}");
            assert_set(&store, &issued, &ctx).await?;
            assert_eq!(store.count_active(now_s()).await?, 1033, "{ctx}");
            let (pos, frontier) = store.verified_frontier(&log.log_id()).await?;
            assert_eq!(pos, 1033);
            assert_eq!(
                frontier.map(|f| f.len()),
                Some(1033u64.count_ones() as usize)
            );
            log.shutdown().await;
            store.close().await;
            db.cleanup().await?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Crash and resume
// ---------------------------------------------------------------------------

/// The process dies just before the COMMIT of the second batch: the first
/// batch stays, the second is rolled back; the next run completes with no
/// loss and no duplicates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_after_crash_before_commit() -> TestResult {
    for api in APIS {
        for db in TestDb::all("i", &format!("crash_{}", api.as_str())).await? {
            let ctx = format!("{} {}", db.name(), api.as_str());
            let store = db.store().await?;
            let log = start_log(256).await?;
            let issued = fill(&log, 1100).await?;
            let sel = select(&log, api, &limits(100, 256))?;
            let crash = IngestOptions {
                fault: Some((2, FaultPlan::CrashBeforeCommit)),
                ..IngestOptions::default()
            };
            let err = ingest(&store, &sel, &crash)
                .await
                .expect_err("simulated crash");
            assert!(err.to_string().contains("simulated crash"), "{ctx}: {err}");
            let (pos, count, _) = snapshot(&store, &log).await?;
            assert_eq!((pos, count), (256, 256), "{ctx}: only the first batch");
            let r = ingest(&store, &sel, &IngestOptions::default()).await?;
            assert_eq!(r.start_position, 256, "{ctx}");
            assert_eq!(r.verified_position, 1100, "{ctx}");
            assert_eq!(r.entries_downloaded, 1100 - 256, "{ctx}");
            assert_set(&store, &issued, &ctx).await?;
            log.shutdown().await;
            store.close().await;
            db.cleanup().await?;
        }
    }
    Ok(())
}

/// The process dies just after the COMMIT of the second batch, before it
/// noticed: both batches stay; the next run resumes after them, with no loss
/// and no duplicates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_after_crash_after_commit() -> TestResult {
    for api in APIS {
        for db in TestDb::all("i", &format!("crash_after_{}", api.as_str())).await? {
            let ctx = format!("{} {}", db.name(), api.as_str());
            let store = db.store().await?;
            let log = start_log(256).await?;
            let issued = fill(&log, 1100).await?;
            let sel = select(&log, api, &limits(100, 256))?;
            let crash = IngestOptions {
                fault: Some((2, FaultPlan::CrashAfterCommit)),
                ..IngestOptions::default()
            };
            let err = ingest(&store, &sel, &crash)
                .await
                .expect_err("simulated crash");
            assert!(err.to_string().contains("simulated crash"), "{ctx}: {err}");
            let (pos, count, _) = snapshot(&store, &log).await?;
            assert_eq!((pos, count), (512, 512), "{ctx}: both batches committed");
            let r = ingest(&store, &sel, &IngestOptions::default()).await?;
            assert_eq!(r.start_position, 512, "{ctx}");
            assert_eq!(r.verified_position, 1100, "{ctx}");
            assert_eq!(r.entries_downloaded, 1100 - 512, "{ctx}");
            assert_set(&store, &issued, &ctx).await?;
            log.shutdown().await;
            store.close().await;
            db.cleanup().await?;
        }
    }
    Ok(())
}

/// The ingester is aborted at arbitrary points mid-run (the task is
/// dropped: fetches in flight, possibly a transaction open); each next run
/// resumes from the verified position. No loss, no duplicates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_after_abort_mid_run() -> TestResult {
    for api in APIS {
        for db in TestDb::all("i", &format!("abort_{}", api.as_str())).await? {
            let ctx = format!("{} {}", db.name(), api.as_str());
            let store = db.store().await?;
            let log = start_log(256).await?;
            let n = 1536u64;
            let issued = fill(&log, n as usize).await?;
            // Slow enough to be caught mid-run: 20 requests/s.
            let l = LogLimits {
                batch_size: 32,
                concurrency: 2,
                requests_per_second: Some(20.0),
                commit_every: 256,
            };
            let sel = select(&log, api, &l)?;
            let mut aborted_at = Vec::new();
            for _ in 0..3 {
                let before = store
                    .log_state(&log.log_id())
                    .await
                    .map_or(0, |s| s.verified_position);
                if before >= n {
                    break;
                }
                let (s2, sel2) = (store.clone(), sel.clone());
                let task = tokio::spawn(async move {
                    ingest_log(&s2, &http(), &sel2, &IngestOptions::default()).await
                });
                // Wait for at least one more commit, then kill it.
                let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
                loop {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let pos = store
                        .log_state(&log.log_id())
                        .await
                        .map_or(0, |s| s.verified_position);
                    if pos > before || task.is_finished() || tokio::time::Instant::now() > deadline
                    {
                        break;
                    }
                }
                // Let it get into the next batch.
                tokio::time::sleep(Duration::from_millis(150)).await;
                task.abort();
                let _ = task.await;
                let pos = store.log_state(&log.log_id()).await?.verified_position;
                aborted_at.push(pos);
            }
            assert!(
                aborted_at.iter().any(|&p| p > 0 && p < n),
                "{ctx}: never aborted mid-run: {aborted_at:?}"
            );
            let r = ingest(&store, &sel, &IngestOptions::default()).await?;
            assert_eq!(r.verified_position, n, "{ctx}");
            assert_set(&store, &issued, &ctx).await?;
            assert_eq!(store.count_active(now_s()).await?, n, "{ctx}");
            log.shutdown().await;
            store.close().await;
            db.cleanup().await?;
        }
    }
    Ok(())
}

/// A store whose verified position was committed without a frontier (a
/// `Commit` without one, or a database from before migration 0002): the
/// ingester re-hashes from 0, replaying the stored prefix without
/// duplicating it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_without_stored_frontier() -> TestResult {
    for api in APIS {
        for db in TestDb::all("i", &format!("nofrontier_{}", api.as_str())).await? {
            let ctx = format!("{} {}", db.name(), api.as_str());
            let store = db.store().await?;
            let log = start_log(256).await?;
            let issued = fill(&log, 400).await?;
            let sel = select(&log, api, &limits(100, 1000))?;
            // Register and commit the first 150 entries the old way.
            let r = ingest(&store, &sel, &IngestOptions::default()).await?;
            assert_eq!(r.verified_position, 400);
            let db2 = TestDb::all("i", &format!("nofrontier2_{}", api.as_str())).await?;
            let fresh = db2
                .into_iter()
                .find(|d| d.name() == db.name())
                .ok_or("backend")?;
            let store2 = fresh.store().await?;
            store2
                .upsert_log(&ct_store::LogMeta {
                    log_id: log.log_id(),
                    url: sel.url().to_owned(),
                    mmd_s: 3600,
                    kind: api,
                })
                .await?;
            let first: Vec<ct_store::Entry> = issued[..150]
                .iter()
                .enumerate()
                .map(|(i, e)| ct_store::Entry {
                    leaf_index: i as u64,
                    leaf_hash: e.leaf_hash,
                    sct_timestamp_ms: e.timestamp_ms,
                    not_after: e.not_after,
                })
                .collect();
            let sth = log.signed_tree_head();
            store2
                .commit(Commit::new(&log.log_id(), sth.tree_size, &sth.root_hash).entries(&first))
                .await?;
            assert_eq!(store2.verified_frontier(&log.log_id()).await?, (150, None));
            let r = ingest(&store2, &sel, &IngestOptions::default()).await?;
            assert_eq!(r.entries_downloaded, 400, "{ctx}: re-hashed from 0");
            assert_eq!(r.replayed, 150, "{ctx}");
            assert_eq!(r.inserted, 250, "{ctx}");
            assert_set(&store2, &issued, &ctx).await?;
            log.shutdown().await;
            store.close().await;
            store2.close().await;
            db.cleanup().await?;
            fresh.cleanup().await?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Misbehaviour
// ---------------------------------------------------------------------------

/// 429 with Retry-After: retried (waiting at least what the log asks) and
/// eventually complete. A Retry-After beyond the configured maximum fails
/// at once with `Error::RateLimited`, storing nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limited_requests_are_retried() -> TestResult {
    for api in APIS {
        for db in TestDb::all("i", &format!("ratelimit_{}", api.as_str())).await? {
            let ctx = format!("{} {}", db.name(), api.as_str());
            let store = db.store().await?;
            let log = start_log(256).await?;
            let issued = fill(&log, 600).await?;
            let sel = select(&log, api, &limits(100, 1000))?;
            log.set_misbehaviour(Misbehaviour::RateLimit {
                every_nth: 3,
                retry_after_s: 1,
            });
            let client = http();
            let t = std::time::Instant::now();
            let r = ingest_log(&store, &client, &sel, &IngestOptions::default()).await?;
            assert_eq!(r.verified_position, 600, "{ctx}");
            let retries = client.counters().retries.load(Ordering::Relaxed);
            assert!(retries > 0, "{ctx}: no retry");
            assert!(
                t.elapsed() >= Duration::from_secs(1),
                "{ctx}: Retry-After ignored"
            );
            assert_set(&store, &issued, &ctx).await?;

            // Retry-After above the maximum (10 s in `http()`): give up.
            let log2 = start_log(256).await?;
            fill(&log2, 50).await?;
            let sel2 = select(&log2, api, &limits(100, 1000))?;
            log2.set_misbehaviour(Misbehaviour::RateLimit {
                every_nth: 1,
                retry_after_s: 3600,
            });
            let err = ingest(&store, &sel2, &IngestOptions::default())
                .await
                .expect_err("rate limited");
            assert!(matches!(err, Error::RateLimited { .. }), "{ctx}: {err}");
            let (pos, _, _) = snapshot(&store, &log2).await?;
            assert_eq!(pos, 0, "{ctx}");
            assert_eq!(store.count_active(now_s()).await?, 600, "{ctx}");
            log.shutdown().await;
            log2.shutdown().await;
            store.close().await;
            db.cleanup().await?;
        }
    }
    Ok(())
}

/// `get-entries` answering fewer entries than asked: the client advances by
/// what came back and still completes (static-ct-api is unaffected).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_batches_still_complete() -> TestResult {
    for api in APIS {
        for db in TestDb::all("i", &format!("truncate_{}", api.as_str())).await? {
            let ctx = format!("{} {}", db.name(), api.as_str());
            let store = db.store().await?;
            let log = start_log(256).await?;
            let issued = fill(&log, 500).await?;
            log.set_misbehaviour(Misbehaviour::TruncateBatches { max: 7 });
            let sel = select(&log, api, &limits(100, 200))?;
            let r = ingest(&store, &sel, &IngestOptions::default()).await?;
            assert_eq!(r.verified_position, 500, "{ctx}");
            assert_eq!(r.entries_downloaded, 500, "{ctx}");
            assert_set(&store, &issued, &ctx).await?;
            log.shutdown().await;
            store.close().await;
            db.cleanup().await?;
        }
    }
    Ok(())
}

/// Runs `check` on a log that misbehaves with `m`: once on a fresh store
/// (nothing may be stored), once after 300 honest entries were verified
/// (the verified position, S and the root must not change). After the log
/// behaves again, ingestion completes.
///
/// A fork is only detectable against a view seen before (a fresh ingester
/// sees one self-consistent tree), so `fresh` is false for it.
async fn refused(
    case: &str,
    m: Misbehaviour,
    fresh: bool,
    check: fn(&Error) -> bool,
) -> TestResult {
    for api in APIS {
        for db in TestDb::all("i", &format!("{case}_{}", api.as_str())).await? {
            let ctx = format!("{} {} {case}", db.name(), api.as_str());
            let store = db.store().await?;

            // Fresh store.
            if fresh {
                let log = start_log(256).await?;
                fill(&log, 300).await?;
                log.set_misbehaviour(m.clone());
                let sel = select(&log, api, &limits(100, 100))?;
                let err = ingest(&store, &sel, &IngestOptions::default())
                    .await
                    .expect_err("refused");
                assert!(check(&err), "{ctx} (fresh): unexpected error {err:?}");
                let (pos, count, root) = snapshot(&store, &log).await?;
                assert_eq!((pos, count, root), (0, 0, None), "{ctx}: stored something");
                log.shutdown().await;
            }

            // After an honest prefix.
            let log = start_log(256).await?;
            let mut issued = fill(&log, 300).await?;
            let sel = select(&log, api, &limits(100, 100))?;
            ingest(&store, &sel, &IngestOptions::default()).await?;
            let before = snapshot(&store, &log).await?;
            assert_eq!(before.0, 300);
            issued.extend(fill(&log, 200).await?);
            log.set_misbehaviour(m.clone());
            let err = ingest(&store, &sel, &IngestOptions::default())
                .await
                .expect_err("refused");
            assert!(check(&err), "{ctx}: unexpected error {err:?}");
            assert_eq!(
                snapshot(&store, &log).await?,
                before,
                "{ctx}: state changed"
            );
            eprintln!("{ctx}: refused with: {err}");

            log.set_misbehaviour(Misbehaviour::None);
            let r = ingest(&store, &sel, &IngestOptions::default()).await?;
            assert_eq!(r.verified_position, 500, "{ctx}");
            let got = active_set(&store).await?;
            assert!(hashes(&issued).is_subset(&got), "{ctx}");
            assert_eq!(store.count_active(now_s()).await?, 500, "{ctx}");
            log.shutdown().await;
            store.close().await;
            db.cleanup().await?;
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_root_is_refused() -> TestResult {
    refused("wrongroot", Misbehaviour::WrongRoot, true, |e| {
        matches!(
            e,
            Error::Ct(ct_core::Error::RootMismatch { .. } | ct_core::Error::InvalidProof(_))
        )
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forked_tree_is_refused() -> TestResult {
    refused("fork", Misbehaviour::ForkedTree, false, |e| {
        matches!(
            e,
            Error::Ct(ct_core::Error::RootMismatch { .. } | ct_core::Error::InvalidProof(_))
        )
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_is_refused() -> TestResult {
    refused("garbage", Misbehaviour::Garbage, true, |e| {
        matches!(
            e,
            Error::Ct(
                ct_core::Error::Json { .. }
                    | ct_core::Error::Base64 { .. }
                    | ct_core::Error::Malformed { .. }
                    | ct_core::Error::Truncated { .. }
                    | ct_core::Error::TrailingBytes { .. }
                    | ct_core::Error::TooLarge { .. }
                    | ct_core::Error::TooSmall { .. }
                    | ct_core::Error::UnknownEnum { .. }
                    | ct_core::Error::Decompress(_)
                    | ct_core::Error::NoKnownSignature { .. }
            ) | Error::Http { .. }
        )
    })
    .await
}

/// An SCT whose entry the log never incorporated: its leaf is never in S,
/// while every logged entry around it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlogged_sct_is_never_in_the_set() -> TestResult {
    for api in APIS {
        for db in TestDb::all("i", &format!("unlogged_{}", api.as_str())).await? {
            let ctx = format!("{} {}", db.name(), api.as_str());
            let store = db.store().await?;
            let log = start_log(256).await?;
            let mut issued = fill(&log, 100).await?;
            let unlogged = log.issue_unlogged().await?;
            assert_eq!(unlogged.leaf_index, None);
            issued.extend(fill(&log, 100).await?);
            let sel = select(&log, api, &limits(64, 128))?;
            let r = ingest(&store, &sel, &IngestOptions::default()).await?;
            assert_eq!(r.verified_position, 200, "{ctx}");
            assert_set(&store, &issued, &ctx).await?;
            assert!(
                !active_set(&store)
                    .await?
                    .contains(unlogged.leaf_hash.as_bytes()),
                "{ctx}: the unlogged entry is in S"
            );
            log.shutdown().await;
            store.close().await;
            db.cleanup().await?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Expiry, configuration
// ---------------------------------------------------------------------------

/// Entries leave S when they expire: pruning removes them (the verified
/// position stays, and a later run does not bring them back); entries
/// already expired when verified are counted but never stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_pruning() -> TestResult {
    for api in APIS {
        for db in TestDb::all("i", &format!("expiry_{}", api.as_str())).await? {
            let ctx = format!("{} {}", db.name(), api.as_str());
            let store = db.store().await?;
            let log = start_log(256).await?;
            let issued = fill(&log, 300).await?;
            let sel = select(&log, api, &limits(100, 1000))?;
            ingest(&store, &sel, &IngestOptions::default()).await?;
            assert_set(&store, &issued, &ctx).await?;
            let later = now_s() + 91 * 86_400;
            assert_eq!(store.count_active(later).await?, 0, "{ctx}");
            assert_eq!(store.prune_expired(later).await?, 300, "{ctx}");
            assert_eq!(store.count_active(now_s()).await?, 0, "{ctx}");
            let r = ingest(&store, &sel, &IngestOptions::default()).await?;
            assert_eq!((r.verified_position, r.inserted), (300, 0), "{ctx}");
            assert_eq!(store.count_active(now_s()).await?, 0, "{ctx}");
            let more = fill(&log, 20).await?;
            ingest(&store, &sel, &IngestOptions::default()).await?;
            assert_set(&store, &more, &ctx).await?;

            // Certificates that expired before they were verified.
            let old = TestLog::start(TestLogConfig {
                cert_lifetime_days: -1,
                ..TestLogConfig::default()
            })
            .await?;
            fill(&old, 50).await?;
            let sel = select(&old, api, &limits(100, 1000))?;
            let r = ingest(&store, &sel, &IngestOptions::default()).await?;
            assert_eq!(
                (r.verified_position, r.inserted, r.expired),
                (50, 0, 50),
                "{ctx}"
            );
            assert_set(&store, &more, &ctx).await?;
            old.shutdown().await;
            log.shutdown().await;
            store.close().await;
            db.cleanup().await?;
        }
    }
    Ok(())
}

/// `run_once` from a TOML configuration and a log list file: the log is
/// listed under both APIs and selected by a description substring; the
/// static-ct-api entry wins; expired entries are pruned at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_once_from_config_file() -> TestResult {
    for db in TestDb::all("i", "runonce").await? {
        let ctx = db.name();
        let dir = tempfile::tempdir()?;
        let log = start_log(256).await?;
        let issued = fill(&log, 260).await?;
        let list_path = dir.path().join("log_list.json");
        std::fs::write(&list_path, log.log_list_json())?;
        let toml = format!(
            "log_list = {:?}\ndatabase_url = {:?}\n\
             [defaults]\nbatch_size = 50\nconcurrency = 3\n\
             [http]\ntimeout_seconds = 20\n\
             [[log]]\ndescription = \"CT-TESTLOG\"\ncommit_every = 100\n",
            list_path.display().to_string(),
            db.url
        );
        let config_path = dir.path().join("ct-ingest.toml");
        std::fs::write(&config_path, toml)?;
        let text = std::fs::read_to_string(&config_path)?;
        let config = Config::from_toml(&text)?;
        config.validate()?;
        let summary = run_once(&config, &IngestOptions::default()).await?;
        assert_eq!(summary.logs.len(), 1, "{ctx}");
        let (sel, result) = &summary.logs[0];
        assert_eq!(sel.kind(), LogKind::Static, "{ctx}");
        assert_eq!(sel.limits.batch_size, 50);
        assert_eq!(sel.limits.commit_every, 100);
        let r = result.as_ref().map_err(|e| e.to_string())?;
        assert_eq!(r.verified_position, 260, "{ctx}");
        assert_eq!(summary.pruned, 0, "{ctx}");
        let store = db.store().await?;
        assert_set(&store, &issued, ctx).await?;

        // A selector that matches nothing is a configuration error.
        let bad = Config::from_toml(&format!(
            "log_list = {:?}\ndatabase_url = {:?}\n[[log]]\ndescription = \"no such log\"\n",
            list_path.display().to_string(),
            db.url
        ))?;
        let err = run_once(&bad, &IngestOptions::default())
            .await
            .expect_err("no match");
        assert!(matches!(err, Error::Config(_)), "{ctx}: {err}");
        log.shutdown().await;
        store.close().await;
        db.cleanup().await?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// HTTP behaviour (a scripted server, for what the test log does not do)
// ---------------------------------------------------------------------------

/// A one-thread HTTP server on 127.0.0.1 that answers successive
/// connections with the given raw responses (`None`: accept, then say
/// nothing for 3 s), then stops.
fn scripted_server(responses: Vec<Option<String>>) -> Result<String, BoxErr> {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || {
        for r in responses {
            let Ok((mut conn, _)) = listener.accept() else {
                return;
            };
            let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
            let mut buf = Vec::new();
            let mut byte = [0u8; 1];
            while !buf.ends_with(b"\r\n\r\n") && buf.len() < 65_536 {
                match conn.read(&mut byte) {
                    Ok(1) => buf.push(byte[0]),
                    _ => break,
                }
            }
            match r {
                Some(resp) => {
                    let _ = conn.write_all(resp.as_bytes());
                }
                None => std::thread::sleep(Duration::from_secs(3)),
            }
        }
    });
    Ok(format!("http://{addr}/x"))
}

fn reply(status: &str, headers: &str, body: &str) -> Option<String> {
    Some(format!(
        "HTTP/1.1 {status}\r\nConnection: close\r\n{headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_retries_timeouts_and_caps() -> TestResult {
    let client = || {
        HttpClient::new(&HttpSettings {
            timeout_seconds: 0.5,
            max_retries: 3,
            initial_backoff_ms: 10,
            max_backoff_seconds: 0.05,
            max_retry_after_seconds: 5,
            ..HttpSettings::default()
        })
    };

    // 5xx is retried.
    let url = scripted_server(vec![
        reply("503 Service Unavailable", "", "busy"),
        reply("502 Bad Gateway", "", "<html>bad gateway</html>"),
        reply("200 OK", "", "fine"),
    ])?;
    let c = client()?;
    let r = c.get(&url, 1000).await?;
    assert_eq!(r.body, b"fine");
    assert_eq!(c.counters().retries.load(Ordering::Relaxed), 2);

    // 429 waits at least Retry-After.
    let url = scripted_server(vec![
        reply("429 Too Many Requests", "Retry-After: 1\r\n", ""),
        reply("200 OK", "", "ok"),
    ])?;
    let t = std::time::Instant::now();
    assert_eq!(client()?.get(&url, 1000).await?.body, b"ok");
    assert!(t.elapsed() >= Duration::from_secs(1));

    // Persistent 5xx: the last status, after max_retries.
    let url = scripted_server(vec![reply("500 Internal Server Error", "", ""); 4])?;
    let err = client()?.get(&url, 1000).await.expect_err("500");
    assert!(matches!(err, Error::Http { status: 500, .. }), "{err}");

    // 404 is not retried.
    let url = scripted_server(vec![reply("404 Not Found", "", "nope")])?;
    let c = client()?;
    let err = c.get(&url, 1000).await.expect_err("404");
    assert!(matches!(err, Error::Http { status: 404, .. }), "{err}");
    assert_eq!(c.counters().requests.load(Ordering::Relaxed), 1);

    // Body caps: by Content-Length, and while reading (no length).
    let big = "x".repeat(5000);
    let url = scripted_server(vec![reply("200 OK", "", &big)])?;
    let err = client()?.get(&url, 1000).await.expect_err("too large");
    assert!(
        matches!(err, Error::Ct(ct_core::Error::TooLarge { .. })),
        "{err}"
    );
    let url = scripted_server(vec![Some(format!(
        "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{big}"
    ))])?;
    let err = client()?.get(&url, 1000).await.expect_err("too large");
    assert!(
        matches!(err, Error::Ct(ct_core::Error::TooLarge { .. })),
        "{err}"
    );

    // A server that never answers: per-request timeout, retried, then
    // Error::Timeout.
    let url = scripted_server(vec![None, None, None, None])?;
    let t = std::time::Instant::now();
    let err = client()?.get(&url, 1000).await.expect_err("timeout");
    assert!(matches!(err, Error::Timeout { .. }), "{err}");
    assert!(t.elapsed() < Duration::from_secs(10));

    // Nothing listening: a network error after the retries.
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let err = client()?
        .get(&format!("http://127.0.0.1:{port}/"), 1000)
        .await
        .expect_err("refused");
    assert!(matches!(err, Error::Network { .. }), "{err}");
    Ok(())
}
