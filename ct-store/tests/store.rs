//! Store tests: every case runs on SQLite (a temp file) and, when
//! `TEST_DATABASE_URL` points at a PostgreSQL server, on PostgreSQL too (one
//! fresh database per case, dropped afterwards). Start a throwaway server
//! with `tests/pg.sh` (see there for how CI calls it):
//!
//! ```sh
//! export TEST_DATABASE_URL="$(bash ct-store/tests/pg.sh start)"
//! cargo test -p ct-store --test store
//! bash ct-store/tests/pg.sh stop
//! ```
//!
//! Set `TEST_REQUIRE_POSTGRES=1` to fail instead of skipping PostgreSQL when
//! `TEST_DATABASE_URL` is unset.

use std::collections::HashSet;
use std::error::Error;
use std::time::Instant;

use ct_core::LeafHash;
use ct_store::{
    Commit, Coverage, Entry, FaultPlan, LogKind, LogMeta, NewReport, ReportStatus, Store,
    StoreError,
};
use futures_util::TryStreamExt;
use sha2::{Digest, Sha256};

use ct_store::testing::{with_database, TestDb};

type TestResult = Result<(), Box<dyn Error + Send + Sync>>;

// Fixed clock: 2027-01-15T08:00:00Z and the month boundaries around it.
const NOV_15_2026: i64 = 1_794_700_800;
const DEC_01_2026: i64 = 1_796_083_200;
const DEC_20_2026: i64 = 1_797_724_800;
const JAN_10_2027: i64 = 1_799_539_200;
const NOW: i64 = 1_800_000_000;
const JAN_20_2027: i64 = 1_800_403_200;
const FEB_01_2027: i64 = 1_801_440_000;
const MAR_01_2027: i64 = 1_803_859_200;
const MAR_15_2027: i64 = 1_805_068_800;
const APR_01_2027: i64 = 1_806_537_600;
/// 9999-12-31T23:59:59Z, the largest X.509 GeneralizedTime.
const END_OF_TIME: i64 = 253_402_300_799;

// ---------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------

/// Runs `$body(&Store, &TestDb)` on every available backend.
macro_rules! on_all_backends {
    ($(#[$attr:meta])* $name:ident, $body:ident) => {
        $(#[$attr])*
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() -> TestResult {
            for db in TestDb::all("t", stringify!($name)).await? {
                eprintln!("{}: {}", stringify!($name), db.name());
                let store = db.store().await?;
                assert_eq!(store.backend_name(), db.name());
                let result = $body(&store, &db).await;
                store.close().await;
                db.cleanup().await?;
                result.map_err(|e| format!("{} on {}: {e}", stringify!($name), store.backend_name()))?;
            }
            Ok(())
        }
    };
}

fn log_id(n: u8) -> [u8; 32] {
    Sha256::digest([b'l', n]).into()
}

fn meta(n: u8) -> LogMeta {
    LogMeta {
        log_id: log_id(n).into(),
        url: format!("https://log{n}.example/"),
        mmd_s: 86_400,
        kind: match n % 2 {
            0 => LogKind::Static,
            _ => LogKind::Rfc6962,
        },
    }
}

fn root(n: u64) -> [u8; 32] {
    Sha256::digest(n.to_be_bytes()).into()
}

fn entry(log: u8, index: u64, not_after: i64) -> Entry {
    let mut leaf = vec![0u8, log];
    leaf.extend_from_slice(&index.to_be_bytes());
    Entry {
        leaf_index: index,
        leaf_hash: LeafHash::new(Sha256::digest(&leaf).into()),
        sct_timestamp_ms: 1_700_000_000_000 + index,
        not_after,
    }
}

fn entries(log: u8, range: std::ops::Range<u64>, not_after: i64) -> Vec<Entry> {
    range.map(|i| entry(log, i, not_after)).collect()
}

const LATER: i64 = APR_01_2027 + 86_400; // active for all of these tests

// ---------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------

async fn migrations_idempotent_case(store: &Store, db: &TestDb) -> TestResult {
    store.upsert_log(&meta(1)).await?;
    store
        .commit(
            Commit::new(&log_id(1).into(), 10, &root(10))
                .entries(&entries(1, 0..10, LATER))
                .ingested_until_ms(5)
                .now_s(NOW),
        )
        .await?;
    // Again on the same pool, and from a second connection: no error,
    // nothing lost, each migration recorded once; a reader's read-only
    // check (Store::connect) finds the schema current.
    store.migrate().await?;
    let again = Store::connect_and_migrate(&db.url).await?;
    again.migrate().await?;
    Store::connect(&db.url).await?.close().await;
    assert_eq!(again.count_active(NOW).await?, 10);
    assert_eq!(
        again.log_state(&log_id(1).into()).await?.verified_position,
        10
    );
    again.close().await;
    // Every migration file of the backend, each applied once (both
    // flavours have the same numbered files).
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/sqlite");
    let files = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "sql"))
        .count();
    assert!(files >= 2, "0001_store.sql and 0002_frontier.sql at least");
    assert_eq!(
        db.scalar("SELECT count(*) FROM _sqlx_migrations").await?,
        files as i64,
        "every migration applied once"
    );
    Ok(())
}
on_all_backends!(migrations_idempotent, migrations_idempotent_case);

async fn upsert_and_download_case(store: &Store, _db: &TestDb) -> TestResult {
    let id = log_id(1);
    assert!(matches!(
        store.log_state(&id.into()).await,
        Err(StoreError::UnknownLog(x)) if x == id
    ));
    assert!(matches!(
        store.record_download(&id.into(), 5).await,
        Err(StoreError::UnknownLog(_))
    ));
    store.upsert_log(&meta(1)).await?;
    let s = store.log_state(&id.into()).await?;
    assert_eq!(s.meta, meta(1));
    assert_eq!(
        (
            s.downloaded_position,
            s.verified_position,
            s.verified_tree_size,
            s.verified_root_hash,
            s.ingested_until_ms
        ),
        (0, 0, 0, None, 0)
    );

    // The downloaded position is advisory: it moves freely and never
    // touches the verified one.
    store.record_download(&id.into(), 5_000).await?;
    store.record_download(&id.into(), 4_000).await?;
    let s = store.log_state(&id.into()).await?;
    assert_eq!((s.downloaded_position, s.verified_position), (4_000, 0));

    store
        .commit(
            Commit::new(&id.into(), 100, &root(100))
                .entries(&entries(1, 0..100, LATER))
                .ingested_until_ms(7)
                .now_s(NOW),
        )
        .await?;
    // Metadata updates keep the positions.
    let mut m = meta(1);
    m.url = "https://moved.example/".into();
    m.mmd_s = 60;
    m.kind = LogKind::Static;
    store.upsert_log(&m).await?;
    let s = store.log_state(&id.into()).await?;
    assert_eq!(s.meta, m);
    assert_eq!((s.downloaded_position, s.verified_position), (4_000, 100));
    // A commit lifts the downloaded position to at least the verified one.
    store.record_download(&id.into(), 10).await?;
    store
        .commit(
            Commit::new(&id.into(), 150, &root(150))
                .entries(&entries(1, 100..150, LATER))
                .ingested_until_ms(8)
                .now_s(NOW),
        )
        .await?;
    let s = store.log_state(&id.into()).await?;
    assert_eq!((s.downloaded_position, s.verified_position), (150, 150));
    Ok(())
}
on_all_backends!(upsert_and_download, upsert_and_download_case);

async fn commit_inserts_and_advances_atomically_case(store: &Store, _db: &TestDb) -> TestResult {
    let id = log_id(1);
    store.upsert_log(&meta(1)).await?;

    let out = store
        .commit(
            Commit::new(&id.into(), 1_000, &root(1_000))
                .entries(&entries(1, 0..100, LATER))
                .ingested_until_ms(111)
                .now_s(NOW),
        )
        .await?;
    assert_eq!((out.inserted, out.replayed, out.expired), (100, 0, 0));
    assert_eq!(out.verified_position, 100);
    let s = store.log_state(&id.into()).await?;
    assert_eq!(s.verified_position, 100);
    assert_eq!(s.verified_tree_size, 1_000);
    assert_eq!(s.verified_root_hash, Some(root(1_000)));
    assert_eq!(s.ingested_until_ms, 111);
    assert_eq!(store.count_active(NOW).await?, 100);

    // Next batch against a newer tree head.
    let out = store
        .commit(
            Commit::new(&id.into(), 2_000, &root(2_000))
                .entries(&entries(1, 100..250, LATER))
                .ingested_until_ms(222)
                .now_s(NOW),
        )
        .await?;
    assert_eq!((out.inserted, out.verified_position), (150, 250));

    // An empty batch advances only the tree head; ingested_until never
    // moves back.
    let out = store
        .commit(
            Commit::new(&id.into(), 3_000, &root(3_000))
                .ingested_until_ms(100)
                .now_s(NOW),
        )
        .await?;
    assert_eq!((out.inserted, out.verified_position), (0, 250));
    let s = store.log_state(&id.into()).await?;
    assert_eq!(
        (
            s.verified_tree_size,
            s.verified_root_hash,
            s.ingested_until_ms
        ),
        (3_000, Some(root(3_000)), 222)
    );

    // Crash just before COMMIT: the transaction did everything, yet neither
    // the entries nor the position are visible afterwards.
    let err = store
        .commit(
            Commit::new(&id.into(), 4_000, &root(4_000))
                .entries(&entries(1, 250..300, LATER))
                .ingested_until_ms(333)
                .now_s(NOW)
                .fault(FaultPlan::CrashBeforeCommit),
        )
        .await
        .expect_err("injected crash");
    let StoreError::InjectedFault {
        fault: FaultPlan::CrashBeforeCommit,
        outcome: would,
    } = err
    else {
        return Err(format!("expected the injected fault, got {err}").into());
    };
    assert_eq!((would.inserted, would.verified_position), (50, 300));
    let s = store.log_state(&id.into()).await?;
    assert_eq!(
        (
            s.verified_position,
            s.verified_tree_size,
            s.ingested_until_ms
        ),
        (250, 3_000, 222)
    );
    assert_eq!(store.count_active(NOW).await?, 250);

    // The restarted ingester replays the batch: inserted exactly once.
    let out = store
        .commit(
            Commit::new(&id.into(), 4_000, &root(4_000))
                .entries(&entries(1, 250..300, LATER))
                .ingested_until_ms(333)
                .now_s(NOW),
        )
        .await?;
    assert_eq!(
        (out.inserted, out.replayed, out.verified_position),
        (50, 0, 300)
    );
    assert_eq!(store.count_active(NOW).await?, 300);

    // A big batch crosses the per-statement chunk sizes of both backends.
    let big = entries(1, 300..40_300, LATER);
    let out = store
        .commit(
            Commit::new(&id.into(), 40_300, &root(40_300))
                .entries(&big)
                .ingested_until_ms(444)
                .now_s(NOW),
        )
        .await?;
    assert_eq!((out.inserted, out.verified_position), (40_000, 40_300));
    assert_eq!(store.count_active(NOW).await?, 40_300);
    Ok(())
}
on_all_backends!(
    commit_inserts_and_advances_atomically,
    commit_inserts_and_advances_atomically_case
);

async fn replay_after_crash_is_idempotent_case(store: &Store, _db: &TestDb) -> TestResult {
    let id = log_id(1);
    store.upsert_log(&meta(1)).await?;
    let batch = entries(1, 0..100, LATER);
    // Crash after COMMIT, before the caller recorded it: the caller sees a
    // failure, yet the batch is committed.
    let err = store
        .commit(
            Commit::new(&id.into(), 100, &root(100))
                .entries(&batch)
                .ingested_until_ms(10)
                .now_s(NOW)
                .fault(FaultPlan::CrashAfterCommit),
        )
        .await
        .expect_err("injected crash");
    assert!(
        matches!(
            err,
            StoreError::InjectedFault {
                fault: FaultPlan::CrashAfterCommit,
                outcome: ct_store::CommitOutcome {
                    inserted: 100,
                    verified_position: 100,
                    ..
                },
            }
        ),
        "{err}"
    );
    assert_eq!(store.count_active(NOW).await?, 100);
    assert_eq!(store.log_state(&id.into()).await?.verified_position, 100);

    // So the restarted caller sends the same batch again. Nothing is
    // inserted and the position stays.
    let out = store
        .commit(
            Commit::new(&id.into(), 100, &root(100))
                .entries(&batch)
                .ingested_until_ms(10)
                .now_s(NOW),
        )
        .await?;
    assert_eq!(
        (
            out.inserted,
            out.replayed,
            out.expired,
            out.verified_position
        ),
        (0, 100, 0, 100)
    );
    assert_eq!(store.count_active(NOW).await?, 100);
    assert_eq!(store.log_state(&id.into()).await?.verified_position, 100);

    // A batch overlapping the verified position: only the new half goes in.
    let out = store
        .commit(
            Commit::new(&id.into(), 150, &root(150))
                .entries(&entries(1, 50..150, LATER))
                .ingested_until_ms(15)
                .now_s(NOW),
        )
        .await?;
    assert_eq!(
        (out.inserted, out.replayed, out.verified_position),
        (50, 50, 150)
    );
    assert_eq!(store.count_active(NOW).await?, 150);

    // A stale replay verified against an older (smaller) tree head is a
    // no-op too: the stored head does not move back.
    let out = store
        .commit(
            Commit::new(&id.into(), 100, &root(100))
                .entries(&batch)
                .ingested_until_ms(10)
                .now_s(NOW),
        )
        .await?;
    assert_eq!(
        (out.inserted, out.replayed, out.verified_position),
        (0, 100, 150)
    );
    let s = store.log_state(&id.into()).await?;
    assert_eq!(
        (
            s.verified_position,
            s.verified_tree_size,
            s.verified_root_hash,
            s.ingested_until_ms
        ),
        (150, 150, Some(root(150)), 15)
    );

    // Replays of pruned entries do not resurrect them.
    store.prune_expired(LATER + 1).await?;
    assert_eq!(store.count_active(NOW).await?, 0);
    store
        .commit(
            Commit::new(&id.into(), 150, &root(150))
                .entries(&batch)
                .ingested_until_ms(15)
                .now_s(NOW),
        )
        .await?;
    assert_eq!(store.count_active(NOW).await?, 0);
    Ok(())
}
on_all_backends!(
    replay_after_crash_is_idempotent,
    replay_after_crash_is_idempotent_case
);

async fn gaps_and_bad_batches_refused_case(store: &Store, _db: &TestDb) -> TestResult {
    let id = log_id(1);
    store.upsert_log(&meta(1)).await?;
    store
        .commit(
            Commit::new(&id.into(), 100, &root(100))
                .entries(&entries(1, 0..10, LATER))
                .ingested_until_ms(1)
                .now_s(NOW),
        )
        .await?;
    let before = store.log_state(&id.into()).await?;

    let r = store
        .commit(
            Commit::new(&id.into(), 100, &root(100))
                .entries(&entries(1, 11..20, LATER))
                .ingested_until_ms(2)
                .now_s(NOW),
        )
        .await;
    assert!(
        matches!(
            r,
            Err(StoreError::Gap { log_id, verified_position: 10, first_leaf_index: 11 }) if log_id == id
        ),
        "{r:?}"
    );

    let mut holey = entries(1, 10..20, LATER);
    holey.remove(3);
    let r = store
        .commit(
            Commit::new(&id.into(), 100, &root(100))
                .entries(&holey)
                .ingested_until_ms(2)
                .now_s(NOW),
        )
        .await;
    assert!(
        matches!(
            r,
            Err(StoreError::NotContiguous {
                expected: 13,
                found: 14
            })
        ),
        "{r:?}"
    );

    let r = store
        .commit(
            Commit::new(&id.into(), 100, &root(100))
                .entries(&entries(1, 10..120, LATER))
                .ingested_until_ms(2)
                .now_s(NOW),
        )
        .await;
    assert!(
        matches!(
            r,
            Err(StoreError::BeyondTree {
                end: 120,
                tree_size: 100
            })
        ),
        "{r:?}"
    );

    let r = store
        .commit(
            Commit::new(&id.into(), 100, &root(7))
                .entries(&entries(1, 10..20, LATER))
                .ingested_until_ms(2)
                .now_s(NOW),
        )
        .await;
    assert!(
        matches!(r, Err(StoreError::RootMismatch { tree_size: 100, .. })),
        "{r:?}"
    );

    // Fails half-way through the transaction (an SCT timestamp beyond
    // i64::MAX is found while building the rows): rolled back.
    let mut bad = entries(1, 10..20, LATER);
    bad[5].sct_timestamp_ms = u64::MAX;
    let r = store
        .commit(
            Commit::new(&id.into(), 100, &root(100))
                .entries(&bad)
                .ingested_until_ms(2)
                .now_s(NOW),
        )
        .await;
    assert!(
        matches!(
            r,
            Err(StoreError::OutOfRange {
                what: "sct_timestamp_ms",
                ..
            })
        ),
        "{r:?}"
    );

    let r = store
        .commit(
            Commit::new(&log_id(9).into(), 1, &root(1))
                .entries(&entries(9, 0..1, LATER))
                .ingested_until_ms(2)
                .now_s(NOW),
        )
        .await;
    assert!(matches!(r, Err(StoreError::UnknownLog(_))), "{r:?}");

    assert_eq!(store.log_state(&id.into()).await?, before);
    assert_eq!(store.count_active(NOW).await?, 10);

    // The right batch still goes in.
    let out = store
        .commit(
            Commit::new(&id.into(), 100, &root(100))
                .entries(&entries(1, 10..20, LATER))
                .ingested_until_ms(2)
                .now_s(NOW),
        )
        .await?;
    assert_eq!((out.inserted, out.verified_position), (10, 20));
    Ok(())
}
on_all_backends!(
    gaps_and_bad_batches_refused,
    gaps_and_bad_batches_refused_case
);

async fn expiry_pruning_case(store: &Store, db: &TestDb) -> TestResult {
    let id = log_id(1);
    store.upsert_log(&meta(1)).await?;
    let mut batch = Vec::new();
    batch.extend(entries(1, 0..10, DEC_20_2026));
    batch.extend(entries(1, 10..20, JAN_10_2027));
    batch.extend(entries(1, 20..30, JAN_20_2027));
    batch.extend(entries(1, 30..40, FEB_01_2027)); // exactly on a month boundary
    batch.extend(entries(1, 40..50, MAR_15_2027));
    batch.extend(entries(1, 50..55, END_OF_TIME));
    batch.extend(entries(1, 55..60, NOV_15_2026)); // already expired at commit
    let out = store
        .commit(
            Commit::new(&id.into(), 60, &root(60))
                .entries(&batch)
                .ingested_until_ms(1)
                .now_s(DEC_01_2026),
        )
        .await?;
    assert_eq!(
        (out.inserted, out.expired, out.verified_position),
        (55, 5, 60)
    );
    assert_eq!(store.count_active(DEC_01_2026).await?, 55);
    if db.is_postgres() {
        assert_eq!(
            db.partitions().await?,
            [
                "entries_p202612",
                "entries_p202701",
                "entries_p202702",
                "entries_p202703",
                "entries_pfar"
            ]
        );
    }

    // Queries filter by the clock even before pruning.
    assert_eq!(store.count_active(NOW).await?, 35);

    // 2027-01-15: all of December (a whole partition) and the first half
    // of January go.
    assert_eq!(store.prune_expired(NOW).await?, 20);
    assert_eq!(store.count_active(i64::MIN).await?, 35);
    assert_eq!(store.prune_expired(NOW).await?, 0, "pruning is idempotent");
    if db.is_postgres() {
        assert_eq!(
            db.partitions().await?,
            [
                "entries_p202701",
                "entries_p202702",
                "entries_p202703",
                "entries_pfar"
            ]
        );
    }

    // Exactly at 2027-02-01T00:00:00Z: January is dropped; notAfter equal to
    // the clock is still valid.
    assert_eq!(store.prune_expired(FEB_01_2027).await?, 10);
    assert_eq!(store.count_active(i64::MIN).await?, 25);
    if db.is_postgres() {
        assert_eq!(
            db.partitions().await?,
            ["entries_p202702", "entries_p202703", "entries_pfar"]
        );
        // An interrupted earlier prune (detached, not dropped) is finished.
        let pool = sqlx::PgPool::connect(&db.url).await?;
        sqlx::raw_sql("ALTER TABLE entries DETACH PARTITION entries_p202702")
            .execute(&pool)
            .await?;
        pool.close().await;
        assert_eq!(store.count_active(i64::MIN).await?, 15);
        assert_eq!(store.prune_expired(MAR_01_2027).await?, 10);
        assert_eq!(db.partitions().await?, ["entries_p202703", "entries_pfar"]);
        assert_eq!(
            db.scalar("SELECT count(*) FROM pg_class WHERE relname = 'entries_p202702'")
                .await?,
            0
        );
    } else {
        assert_eq!(store.prune_expired(MAR_01_2027).await?, 10);
    }
    assert_eq!(store.count_active(i64::MIN).await?, 15);

    // Past March only the far-future certificates remain.
    assert_eq!(store.prune_expired(APR_01_2027).await?, 10);
    let left: HashSet<[u8; 32]> = store.active_leaf_hashes(APR_01_2027).try_collect().await?;
    let want: HashSet<[u8; 32]> = entries(1, 50..55, END_OF_TIME)
        .iter()
        .map(|e| e.leaf_hash.to_bytes())
        .collect();
    assert_eq!(left, want);

    // The position is untouched by expiry, and later months still work.
    assert_eq!(store.log_state(&id.into()).await?.verified_position, 60);
    let out = store
        .commit(
            Commit::new(&id.into(), 70, &root(70))
                .entries(&entries(1, 60..70, APR_01_2027 + 3_600))
                .ingested_until_ms(2)
                .now_s(APR_01_2027),
        )
        .await?;
    assert_eq!(out.inserted, 10);
    assert_eq!(store.count_active(APR_01_2027).await?, 15);
    Ok(())
}
on_all_backends!(expiry_pruning, expiry_pruning_case);

async fn active_set_iteration_case(store: &Store, _db: &TestDb) -> TestResult {
    let mut want_now = HashSet::new();
    let mut want_feb = HashSet::new();
    for log in 1..=3u8 {
        store.upsert_log(&meta(log)).await?;
        let n = 1_000 * u64::from(log);
        let batch: Vec<Entry> = (0..n)
            .map(|i| {
                entry(
                    log,
                    i,
                    match i % 3 {
                        0 => JAN_20_2027,
                        _ => MAR_15_2027,
                    },
                )
            })
            .collect();
        for e in &batch {
            want_now.insert(e.leaf_hash.to_bytes());
            if e.not_after >= FEB_01_2027 {
                want_feb.insert(e.leaf_hash.to_bytes());
            }
        }
        store
            .commit(
                Commit::new(&log_id(log).into(), n, &root(n))
                    .entries(&batch)
                    .ingested_until_ms(1)
                    .now_s(NOW),
            )
            .await?;
    }
    assert_eq!(want_now.len(), 6_000);

    let got: HashSet<[u8; 32]> = store.active_leaf_hashes(NOW).try_collect().await?;
    assert_eq!(got, want_now);
    assert_eq!(store.count_active(NOW).await?, 6_000);

    // Chunked consumption (as the epoch builder does), at a later clock.
    let mut stream = store.active_leaf_hashes(FEB_01_2027);
    let mut got = HashSet::new();
    let mut chunk = Vec::with_capacity(512);
    let mut chunks = 0;
    while let Some(h) = stream.try_next().await? {
        chunk.push(h);
        if chunk.len() == 512 {
            got.extend(chunk.drain(..));
            chunks += 1;
        }
    }
    got.extend(chunk.drain(..));
    drop(stream);
    assert!(chunks >= 7);
    assert_eq!(got, want_feb);
    assert_eq!(
        store.count_active(FEB_01_2027).await?,
        want_feb.len() as u64
    );

    // Nothing is active after everything expired.
    let n = store
        .active_leaf_hashes(APR_01_2027)
        .try_collect::<Vec<_>>()
        .await?;
    assert!(n.is_empty());
    Ok(())
}
on_all_backends!(active_set_iteration, active_set_iteration_case);

async fn reports_and_log_keys_case(store: &Store, _db: &TestDb) -> TestResult {
    // Log keys: unknown log refused, NULL until recorded, then read back.
    assert!(matches!(
        store.log_key(&log_id(1).into()).await,
        Err(StoreError::UnknownLog(_))
    ));
    store.upsert_log(&meta(1)).await?;
    assert_eq!(store.log_key(&log_id(1).into()).await?, None);
    store.set_log_key(&log_id(1).into(), b"spki").await?;
    assert_eq!(
        store.log_key(&log_id(1).into()).await?.as_deref(),
        Some(&b"spki"[..])
    );
    assert!(store.set_log_key(&log_id(1).into(), &[]).await.is_err());
    assert!(matches!(
        store.set_log_key(&log_id(2).into(), b"k").await,
        Err(StoreError::UnknownLog(_))
    ));

    // Leaf lookup in one log's stored entries.
    let batch = entries(1, 0..20, LATER);
    store
        .commit(
            Commit::new(&log_id(1).into(), 20, &root(20))
                .entries(&batch)
                .ingested_until_ms(1)
                .now_s(NOW),
        )
        .await?;
    let e = &batch[7];
    assert!(
        store
            .contains_leaf(&log_id(1).into(), &e.leaf_hash, e.sct_timestamp_ms, LATER)
            .await?
    );
    assert!(
        !store
            .contains_leaf(
                &log_id(1).into(),
                &[9; 32].into(),
                e.sct_timestamp_ms,
                LATER
            )
            .await?
    );
    assert!(
        !store
            .contains_leaf(&log_id(2).into(), &e.leaf_hash, e.sct_timestamp_ms, LATER)
            .await?
    );

    // Reports: inserted once per (log, leaf), listed, counted, checked.
    let report = |leaf: u8| NewReport {
        log_id: log_id(1).into(),
        leaf_hash: [leaf; 32].into(),
        sct_timestamp_ms: 1_700_000_000_000,
        mmd_s: 86_400,
        kind: "precert".into(),
        sct: vec![0, 1, 2],
        chain: vec![vec![0x30; 500], vec![0x31; 70_000]],
        epochs: vec![3, 4],
        not_after: LATER,
        received_at_ms: 1_800_000_000_000,
    };
    assert!(store.insert_report(&report(1)).await?);
    assert!(!store.insert_report(&report(1)).await?, "duplicate");
    assert!(store.insert_report(&report(2)).await?);
    let all = store.reports(None, 10).await?;
    assert_eq!(all.len(), 2);
    assert_eq!(all[0].report, report(1));
    assert_eq!(all[0].status, ReportStatus::Received);
    assert_eq!((all[0].attempts, all[0].checked_at_ms), (0, None));
    store
        .record_report_check(all[1].id, ReportStatus::Confirmed, "absent", 7)
        .await?;
    store
        .record_report_check(all[0].id, ReportStatus::Received, "log unreachable", 8)
        .await?;
    let pending = store.reports(Some(ReportStatus::Received), 10).await?;
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].attempts, 1);
    assert_eq!(pending[0].note.as_deref(), Some("log unreachable"));
    let confirmed = store.reports(Some(ReportStatus::Confirmed), 10).await?;
    assert_eq!(confirmed[0].report.leaf_hash, [2; 32]);
    assert_eq!(confirmed[0].checked_at_ms, Some(7));
    assert_eq!(store.reports(None, 1).await?.len(), 1);
    assert_eq!(
        store.report_counts().await?,
        vec![
            (ReportStatus::Received, 1),
            (ReportStatus::Confirmed, 1),
            (ReportStatus::Refuted, 0)
        ]
    );
    assert!(store
        .record_report_check(999, ReportStatus::Refuted, "", 1)
        .await
        .is_err());
    Ok(())
}
on_all_backends!(reports_and_log_keys, reports_and_log_keys_case);

async fn coverage_case(store: &Store, _db: &TestDb) -> TestResult {
    assert!(store.coverage().await?.is_empty());
    for log in 1..=3u8 {
        store.upsert_log(&meta(log)).await?;
    }
    store
        .commit(
            Commit::new(&log_id(1).into(), 50, &root(50))
                .entries(&entries(1, 0..40, LATER))
                .ingested_until_ms(1_111)
                .now_s(NOW),
        )
        .await?;
    store
        .commit(
            Commit::new(&log_id(2).into(), 7, &root(7))
                .entries(&entries(2, 0..7, LATER))
                .ingested_until_ms(2_222)
                .now_s(NOW),
        )
        .await?;
    let mut want = vec![
        Coverage {
            log_id: log_id(1).into(),
            verified_tree_size: 50,
            verified_position: 40,
            ingested_until_ms: 1_111,
            mmd_s: 86_400,
        },
        Coverage {
            log_id: log_id(2).into(),
            verified_tree_size: 7,
            verified_position: 7,
            ingested_until_ms: 2_222,
            mmd_s: 86_400,
        },
        Coverage {
            log_id: log_id(3).into(),
            verified_tree_size: 0,
            verified_position: 0,
            ingested_until_ms: 0,
            mmd_s: 86_400,
        },
    ];
    want.sort_by_key(|c| c.log_id);
    assert_eq!(store.coverage().await?, want);
    Ok(())
}
on_all_backends!(coverage, coverage_case);

async fn concurrent_commits_serialize_case(store: &Store, _db: &TestDb) -> TestResult {
    for log in 1..=2u8 {
        store.upsert_log(&meta(log)).await?;
    }
    // Two ingesters race with the same batch of log 1, a third commits log 2.
    let mut tasks = Vec::new();
    for (log, count) in [(1u8, 2_000u64), (1, 2_000), (2, 3_000)] {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            store
                .commit(
                    Commit::new(&log_id(log).into(), count, &root(count))
                        .entries(&entries(log, 0..count, LATER))
                        .ingested_until_ms(9)
                        .now_s(NOW),
                )
                .await
        }));
    }
    let mut outs = Vec::new();
    for t in tasks {
        outs.push(t.await??);
    }
    let mut log1: Vec<(u64, u64)> = outs[..2].iter().map(|o| (o.inserted, o.replayed)).collect();
    log1.sort_unstable();
    assert_eq!(log1, [(0, 2_000), (2_000, 0)]);
    assert_eq!(outs[2].inserted, 3_000);
    assert_eq!(store.count_active(NOW).await?, 5_000);
    assert_eq!(
        store.log_state(&log_id(1).into()).await?.verified_position,
        2_000
    );
    Ok(())
}
on_all_backends!(
    concurrent_commits_serialize,
    concurrent_commits_serialize_case
);

/// The frontier (migration 0002) is stored with the verified position,
/// checked against it, kept by replays, cleared by a plain commit, and
/// rolled back with the transaction.
async fn frontier_with_position_case(store: &Store, _db: &TestDb) -> TestResult {
    let id = log_id(1);
    store.upsert_log(&meta(1)).await?;
    assert_eq!(store.verified_frontier(&id.into()).await?, (0, None));
    let f5 = vec![[5u8; 32], [1u8; 32]]; // popcount(5) = 2
    store
        .commit(
            Commit::new(&id.into(), 10, &root(10))
                .entries(&entries(1, 0..5, LATER))
                .frontier(&f5)
                .now_s(NOW),
        )
        .await?;
    assert_eq!(
        store.verified_frontier(&id.into()).await?,
        (5, Some(f5.clone()))
    );
    // Wrong number of roots: refused, nothing written.
    let err = store
        .commit(
            Commit::new(&id.into(), 10, &root(10))
                .entries(&entries(1, 5..8, LATER))
                .frontier(&f5)
                .now_s(NOW),
        )
        .await
        .expect_err("popcount(8) = 1");
    assert!(matches!(
        err,
        StoreError::FrontierMismatch {
            position: 8,
            expected: 1,
            found: 2
        }
    ));
    assert_eq!(
        store.verified_frontier(&id.into()).await?,
        (5, Some(f5.clone()))
    );
    // A replay that does not move the position keeps the frontier.
    store
        .commit(
            Commit::new(&id.into(), 10, &root(10))
                .entries(&entries(1, 0..3, LATER))
                .frontier(&[[3u8; 32]])
                .now_s(NOW),
        )
        .await?;
    assert_eq!(
        store.verified_frontier(&id.into()).await?,
        (5, Some(f5.clone()))
    );
    // Crash before COMMIT: neither position nor frontier move.
    let err = store
        .commit(
            Commit::new(&id.into(), 10, &root(10))
                .entries(&entries(1, 5..8, LATER))
                .frontier(&[[8u8; 32]])
                .now_s(NOW)
                .fault(FaultPlan::CrashBeforeCommit),
        )
        .await
        .expect_err("injected crash");
    assert!(
        matches!(err, StoreError::InjectedFault { outcome, .. } if outcome.verified_position == 8),
        "{err}"
    );
    assert_eq!(store.verified_frontier(&id.into()).await?, (5, Some(f5)));
    store
        .commit(
            Commit::new(&id.into(), 10, &root(10))
                .entries(&entries(1, 5..8, LATER))
                .frontier(&[[8u8; 32]])
                .now_s(NOW),
        )
        .await?;
    assert_eq!(
        store.verified_frontier(&id.into()).await?,
        (8, Some(vec![[8u8; 32]]))
    );
    // A commit without a frontier that moves the position clears it.
    store
        .commit(
            Commit::new(&id.into(), 10, &root(10))
                .entries(&entries(1, 8..9, LATER))
                .now_s(NOW),
        )
        .await?;
    assert_eq!(store.verified_frontier(&id.into()).await?, (9, None));
    Ok(())
}
on_all_backends!(frontier_with_position, frontier_with_position_case);

/// Not a correctness test: bulk-insert throughput of one ingester
/// (sequential commits of 10,000-entry batches over 8 logs). Run with
/// `cargo test -p ct-store --test store -- --ignored --nocapture`;
/// `STORE_BENCH_ENTRIES` sets the total (default 1,000,000).
async fn bulk_insert_throughput_case(store: &Store, db: &TestDb) -> TestResult {
    let total: u64 = std::env::var("STORE_BENCH_ENTRIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    const LOGS: u8 = 8;
    const BATCH: u64 = 10_000;
    for log in 0..LOGS {
        store.upsert_log(&meta(log)).await?;
    }
    let per_log = total / u64::from(LOGS);
    // notAfter spread over 13 months, as in a live log.
    let not_after = |i: u64| NOW + (i.wrapping_mul(2_654_435_761) % (396 * 86_400)) as i64;
    let start = Instant::now();
    let mut build = std::time::Duration::ZERO;
    let mut done = 0u64;
    let mut pos = 0u64;
    while pos < per_log {
        let end = (pos + BATCH).min(per_log);
        for log in 0..LOGS {
            let t = Instant::now();
            let batch: Vec<Entry> = (pos..end).map(|i| entry(log, i, not_after(i))).collect();
            build += t.elapsed();
            let out = store
                .commit(
                    Commit::new(&log_id(log).into(), per_log, &root(per_log))
                        .entries(&batch)
                        .ingested_until_ms(end)
                        .now_s(NOW),
                )
                .await?;
            done += out.inserted;
        }
        pos = end;
    }
    let secs = (start.elapsed() - build).as_secs_f64();
    eprintln!(
        "bulk insert on {}: {done} entries in {secs:.2} s (store time) = {:.0} entries/s",
        db.name(),
        done as f64 / secs
    );
    assert_eq!(store.count_active(NOW).await?, done);
    let t = Instant::now();
    let streamed = store
        .active_leaf_hashes(NOW)
        .try_fold(0u64, |n, _| async move { Ok(n + 1) })
        .await?;
    assert_eq!(streamed, done);
    eprintln!(
        "active_leaf_hashes on {}: {:.0} hashes/s",
        db.name(),
        streamed as f64 / t.elapsed().as_secs_f64()
    );
    // On-disk size per row (for docs/storage.md).
    let (table, index) = if db.is_postgres() {
        let heap = db
            .scalar(
                "SELECT sum(pg_relation_size(inhrelid))::bigint FROM pg_inherits \
                 WHERE inhparent = 'entries'::regclass",
            )
            .await?;
        let idx = db
            .scalar(
                "SELECT sum(pg_indexes_size(inhrelid))::bigint FROM pg_inherits \
                 WHERE inhparent = 'entries'::regclass",
            )
            .await?;
        (heap, idx)
    } else {
        let pages = db
            .scalar("SELECT count(*) FROM dbstat WHERE name = 'entries'")
            .await;
        let file = db
            .scalar("SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()")
            .await?;
        (pages.map(|p| p * 4096).unwrap_or(file), file)
    };
    eprintln!(
        "size on {}: table {:.1} B/row, indexes (sqlite: whole file) {:.1} B/row",
        db.name(),
        table as f64 / done as f64,
        index as f64 / done as f64
    );
    Ok(())
}
on_all_backends!(
    #[ignore = "throughput measurement; run explicitly"]
    bulk_insert_throughput,
    bulk_insert_throughput_case
);

#[test]
fn with_database_replaces_the_path() {
    assert_eq!(
        with_database("postgres://u@127.0.0.1:5432/ct_test", "x"),
        "postgres://u@127.0.0.1:5432/x"
    );
    assert_eq!(
        with_database("postgres://u@h:1/db?sslmode=disable", "x"),
        "postgres://u@h:1/x?sslmode=disable"
    );
    assert_eq!(with_database("postgres://h", "x"), "postgres://h/x");
}

/// Connection failures: reported at once with the driver's cause (not a
/// pool timeout after 30 s), and never with the password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_errors_are_prompt_clear_and_redacted() -> TestResult {
    let password = "Sekr1t-pw";
    // A port nobody listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let url = format!("postgres://ct:{password}@127.0.0.1:{port}/ct");
    let started = Instant::now();
    let e = Store::connect(&url).await.expect_err("nothing listens");
    assert!(
        started.elapsed().as_secs() < 10,
        "took {:?}",
        started.elapsed()
    );
    let msg = e.to_string();
    assert!(matches!(e, StoreError::Database(_)), "{e:?}");
    assert!(msg.to_lowercase().contains("refused"), "{msg}");
    assert!(!msg.contains(password), "{msg}");
    assert!(!format!("{e:?}").contains(password));

    // Malformed URLs are refused before any connection, redacted.
    for bad in [
        format!("postgres//ct:{password}@127.0.0.1:{port}/ct"),
        format!("postgres://ct:{password}@127.0.0.1:port/ct"),
        format!("mysql://ct:{password}@127.0.0.1/ct"),
    ] {
        let e = Store::connect(&bad).await.expect_err("malformed");
        let msg = e.to_string();
        assert!(matches!(e, StoreError::InvalidUrl { .. }), "{bad}: {e:?}");
        assert!(msg.contains("ct:***@127.0.0.1"), "{msg}");
        assert!(!msg.contains(password), "{msg}");
    }

    // An SQLite file that cannot be created: the driver's message.
    let e = Store::connect("sqlite:///nonexistent-dir/ct.db?mode=rwc")
        .await
        .expect_err("no such directory");
    assert!(
        e.to_string().contains("unable to open database file"),
        "{e}"
    );
    Ok(())
}
