//! Per-log ingestion: download, verify against a signed tree head, commit.
//!
//! For one log, [`ingest_log`]:
//!
//! 1. reads the store's verified position `v`, the [`CompactRange`]
//!    frontier of `[0, v)` stored with it, and the last verified tree head
//!    `(T, root_T)`;
//! 2. fetches the log's current head `(N, root_N)` and verifies its
//!    signature (`get-sth`, or the static-ct-api checkpoint);
//! 3. checks that the new head extends the verified one: for `N == T` the
//!    roots must be equal; for `N > T`, RFC 6962 logs must serve a
//!    consistency proof `T → N` that verifies, and for static-ct-api logs
//!    the root of `[0, T)` recomputed from the frontier and the hash tiles of
//!    tree `N` must equal `root_T`;
//! 4. downloads `[v, N)` (RFC 6962: parallel `get-entries` ranges, each
//!    advancing by what the log actually returned; static-ct-api: data
//!    tiles), feeding every leaf hash into the frontier;
//! 5. every `commit_every` entries (and at `N`), proves that the prefix
//!    `[0, b)` downloaded so far is part of tree `N` (at `b == N`: the
//!    recomputed root equals `root_N`; before: an RFC 6962 consistency proof
//!    `b → N` from the recomputed root of `[0, b)`, or for static-ct-api the
//!    root of `N` recomputed from `[0, b)` plus hash tiles), and only then
//!    commits the entries with [`Store::commit`] (a [`Commit`] with the
//!    frontier): entries, new verified position and frontier in one
//!    transaction.
//!
//! Nothing unverified is ever committed: a failed check (or a fetch error,
//! or garbage) ends the run for that log with an error and the verified
//! position where the last successful commit left it. Killed at any point,
//! the next run resumes from the store's verified position and frontier; a
//! batch that was committed but not noticed is replayed idempotently by the
//! store.
//!
//! "Ingested until" (the store's `ingested_until_ms`): a log must
//! incorporate every SCT it issued within its maximum merge delay (MMD), so
//! every entry whose SCT timestamp is at most `head.timestamp − MMD` is in
//! the tree of that head. When a commit reaches the head's size, the
//! ingester records `ingested_until_ms = head.timestamp − MMD` (never
//! moving backwards); intermediate commits do not move it. An SCT with an
//! older timestamp whose entry is absent is log misbehaviour, which is what
//! the auditor's clients detect.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use futures_util::stream::{self, StreamExt};
use tokio::task::JoinHandle;

use crate::config::{load_log_list, Config, SelectedLog};
use crate::error::{Error, Result};
use crate::http::{HttpClient, LogEndpoint};
use crate::rfc6962::Rfc6962Client;
use crate::static_ct::{StaticCtClient, TileCache};
use ct_core::loglist::LogApi;
use ct_core::merkle::{tile_for_size, verify_consistency, CompactRange, Hash, TILE_WIDTH};
use ct_core::LogId;
#[cfg(feature = "fault-injection")]
use ct_store::FaultPlan;
use ct_store::{Commit, CommitOutcome, Entry, LogKind, LogMeta, Store, StoreError};

/// Progress sink: called with (log description, entries downloaded and
/// hashed so far, size of the signed head being ingested). The CLI draws
/// per-log progress bars with it; tracing logs are emitted regardless.
#[derive(Clone, Default)]
pub struct Progress(Option<Arc<ProgressFn>>);

/// The callback type of [`Progress`].
pub type ProgressFn = dyn Fn(&str, u64, u64) + Send + Sync;

impl Progress {
    /// Wraps a callback.
    pub fn new(f: impl Fn(&str, u64, u64) + Send + Sync + 'static) -> Progress {
        Progress(Some(Arc::new(f)))
    }

    fn report(&self, log: &str, done: u64, total: u64) {
        if let Some(f) = &self.0 {
            f(log, done, total);
        }
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Progress(callback)"
        } else {
            "Progress(none)"
        })
    }
}

/// Store health sink: called with `true` when a run has connected to the
/// store and whenever the probe during a run finds it answering, `false`
/// when the probe finds it unreachable (the cause is logged). The CLI sets
/// the `ct_ingest_store_up` gauge with it and rewrites the metrics file.
#[derive(Clone, Default)]
pub struct StoreHealth(Option<Arc<StoreHealthFn>>);

/// The callback type of [`StoreHealth`].
pub type StoreHealthFn = dyn Fn(bool) + Send + Sync;

impl StoreHealth {
    /// Wraps a callback.
    pub fn new(f: impl Fn(bool) + Send + Sync + 'static) -> StoreHealth {
        StoreHealth(Some(Arc::new(f)))
    }

    fn report(&self, up: bool) {
        if let Some(f) = &self.0 {
            f(up);
        }
    }
}

impl std::fmt::Debug for StoreHealth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "StoreHealth(callback)"
        } else {
            "StoreHealth(none)"
        })
    }
}

/// How often a run probes the store while it works ([`Store::ping`]): an
/// outage in the middle of a run ends the run within this time plus the
/// probe's own 5 s timeout, with the cause, instead of when the next store
/// operation gives up.
pub const STORE_PROBE_INTERVAL: Duration = Duration::from_secs(3);

/// Options of one ingestion run.
#[derive(Clone, Debug, Default)]
pub struct IngestOptions {
    /// Progress reporting (none by default).
    pub progress: Progress,
    /// Store health reporting (none by default).
    pub store_health: StoreHealth,
    /// The clock for expiry at commit time, Unix seconds (`None`: the
    /// system clock at each commit).
    pub now_s: Option<i64>,
    /// Crash tests (feature `fault-injection`): the n-th commit (1-based)
    /// of this run ends with this fault (see [`FaultPlan`]), and the run
    /// fails.
    #[cfg(feature = "fault-injection")]
    pub fault: Option<(u64, FaultPlan)>,
}

/// What one run did for one log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IngestReport {
    /// The log.
    pub log_id: LogId,
    /// Its description in the log list.
    pub description: String,
    /// The API used (`None` only in a default value).
    pub kind: Option<LogKind>,
    /// Verified position before the run.
    pub start_position: u64,
    /// Verified position after the run.
    pub verified_position: u64,
    /// Size of the signed head fetched.
    pub head_tree_size: u64,
    /// Timestamp of that head, ms.
    pub head_timestamp_ms: u64,
    /// The store's `ingested_until_ms` after the run.
    pub ingested_until_ms: u64,
    /// Entries downloaded (and decoded).
    pub entries_downloaded: u64,
    /// Rows inserted into S.
    pub inserted: u64,
    /// Verified entries not stored because already expired.
    pub expired: u64,
    /// Entries the store had already committed (replays).
    pub replayed: u64,
    /// Transactions committed.
    pub commits: u64,
    /// The log served a head smaller than the verified one (nothing done).
    pub stale_head: bool,
    /// Wall-clock time of the run.
    pub elapsed: Duration,
}

/// A log's API client.
#[derive(Debug)]
enum Source {
    Rfc6962(Rfc6962Client),
    Static(StaticCtClient),
}

/// A verified signed tree head.
#[derive(Clone, Copy, Debug)]
struct Head {
    tree_size: u64,
    timestamp_ms: u64,
    root: Hash,
}

impl Source {
    async fn head(&self) -> Result<Head> {
        match self {
            Source::Rfc6962(c) => {
                let sth = c.get_sth().await?;
                Ok(Head {
                    tree_size: sth.tree_size,
                    timestamp_ms: sth.timestamp,
                    root: sth.root_hash,
                })
            }
            Source::Static(c) => {
                let cp = c.checkpoint().await?;
                Ok(Head {
                    tree_size: cp.checkpoint.tree_size,
                    timestamp_ms: cp.timestamp,
                    root: cp.checkpoint.root_hash,
                })
            }
        }
    }

    /// Exactly the entries `[start, end)` of the tree of `tree_size`.
    async fn fetch(&self, start: u64, end: u64, tree_size: u64) -> Result<Vec<Entry>> {
        let entries = match self {
            Source::Rfc6962(c) => {
                let mut out = Vec::with_capacity((end - start) as usize);
                let mut pos = start;
                while pos < end {
                    // The log may truncate: advance by what came back.
                    let got = c.get_entries(pos, end).await?;
                    pos += got.len() as u64;
                    out.extend(got);
                }
                out
            }
            Source::Static(c) => {
                let tile = tile_for_size(0, start / TILE_WIDTH, tree_size).ok_or_else(|| {
                    ct_core::Error::InvalidArgument(format!(
                        "no data tile for {start} at size {tree_size}"
                    ))
                })?;
                let first = start / TILE_WIDTH * TILE_WIDTH;
                let mut all = c.data_tile(tile).await?;
                let lo = (start - first) as usize;
                let hi = (end - first) as usize;
                if hi > all.len() {
                    return Err(Error::malformed(
                        "data tile",
                        format!("{} has {} entries, need {hi}", tile.data_path(), all.len()),
                    ));
                }
                all.truncate(hi);
                all.drain(..lo);
                all
            }
        };
        for (e, index) in entries.iter().zip(start..) {
            if e.leaf_index != index {
                return Err(ct_core::Error::LeafIndexMismatch {
                    expected: index,
                    found: e.leaf_index,
                }
                .into());
            }
        }
        if entries.len() as u64 != end - start {
            return Err(Error::Internal(format!(
                "fetched {} entries for [{start}, {end})",
                entries.len()
            )));
        }
        Ok(entries)
    }

    /// Proves that `prefix` (`[0, b)`, `b <= head.tree_size`) is part of
    /// the tree of `head`.
    async fn verify_prefix(
        &self,
        prefix: &CompactRange,
        head: &Head,
        cache: &mut TileCache,
    ) -> Result<()> {
        let b = prefix.size();
        if b == head.tree_size {
            if prefix.root() != head.root {
                return Err(ct_core::Error::RootMismatch {
                    what: "entries downloaded up to the signed tree head",
                }
                .into());
            }
            return Ok(());
        }
        match self {
            Source::Rfc6962(c) => {
                let proof = c.get_sth_consistency(b, head.tree_size).await?;
                Ok(verify_consistency(
                    b,
                    head.tree_size,
                    &proof,
                    &prefix.root(),
                    &head.root,
                )?)
            }
            Source::Static(c) => {
                let root = c
                    .root_with_prefix(prefix, head.tree_size, head.tree_size, cache)
                    .await?;
                if root != head.root {
                    return Err(ct_core::Error::RootMismatch {
                        what: "downloaded prefix plus hash tiles vs the signed checkpoint",
                    }
                    .into());
                }
                Ok(())
            }
        }
    }
}

/// A spawned task that is aborted when dropped (fetches of a failed or
/// cancelled run stop instead of running on).
struct Task<T>(JoinHandle<T>);

impl<T> Drop for Task<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<T> Future for Task<T> {
    type Output = Result<T>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0)
            .poll(cx)
            .map(|r| r.map_err(|e| Error::Internal(format!("fetch task: {e}"))))
    }
}

/// The fetch units of `[start, end)`: pieces of at most `unit` entries that
/// end at multiples of `unit` and of `window` (the commit points), or at
/// `end`.
fn units(start: u64, end: u64, unit: u64, window: u64) -> impl Iterator<Item = (u64, u64)> {
    let next_multiple = |s: u64, m: u64| (s / m).saturating_add(1).saturating_mul(m);
    let mut s = start;
    std::iter::from_fn(move || {
        if s >= end {
            return None;
        }
        let e = next_multiple(s, unit)
            .min(next_multiple(s, window))
            .min(end);
        let r = (s, e);
        s = e;
        Some(r)
    })
}

use ct_core::civil::unix_now_s;

struct CommitJob {
    store: Store,
    log_id: LogId,
    entries: Vec<Entry>,
    head: Head,
    ingested_until_ms: u64,
    frontier: Vec<Hash>,
    now_s: i64,
    #[cfg(feature = "fault-injection")]
    fault: Option<FaultPlan>,
}

impl CommitJob {
    async fn run(self) -> Result<CommitOutcome> {
        let commit = Commit::new(&self.log_id, self.head.tree_size, &self.head.root)
            .entries(&self.entries)
            .ingested_until_ms(self.ingested_until_ms)
            .frontier(&self.frontier)
            .now_s(self.now_s);
        #[cfg(feature = "fault-injection")]
        let commit = match self.fault {
            Some(fault) => commit.fault(fault),
            None => commit,
        };
        Ok(self.store.commit(commit).await?)
    }
}

fn add_outcome(report: &mut IngestReport, out: &CommitOutcome) {
    report.inserted += out.inserted;
    report.expired += out.expired;
    report.replayed += out.replayed;
    report.commits += 1;
    report.verified_position = out.verified_position;
}

/// Ingests one log up to its current signed head (see the module
/// documentation). On error, whatever was committed before stays committed
/// and nothing else is.
pub async fn ingest_log(
    store: &Store,
    http: &HttpClient,
    log: &SelectedLog,
    opts: &IngestOptions,
) -> Result<IngestReport> {
    let started = Instant::now();
    let info = &log.info;
    let log_id = info.log_id;
    let kind = log.kind();
    store
        .upsert_log(&LogMeta {
            log_id,
            url: log.url().to_owned(),
            mmd_s: info.mmd,
            kind,
        })
        .await?;
    // The auditor verifies the SCTs of misbehaviour reports with it.
    store.set_log_key(&log_id, info.key.spki_der()).await?;
    let ep = LogEndpoint::new(
        http.clone(),
        log.limits.concurrency,
        log.limits.requests_per_second,
    );
    let source = Arc::new(match &info.api {
        LogApi::Rfc6962 { url } => Source::Rfc6962(Rfc6962Client::new(ep, url, info.key.clone())),
        LogApi::StaticCt { monitoring_url, .. } => {
            let origin = info.checkpoint_origin().ok_or_else(|| {
                Error::Config(format!("{}: no checkpoint origin", info.description))
            })?;
            Source::Static(StaticCtClient::new(
                ep,
                monitoring_url,
                &origin,
                info.key.clone(),
            ))
        }
    });

    let state = store.log_state(&log_id).await?;
    let (v, frontier) = store.verified_frontier(&log_id).await?;
    let mut compact = match frontier {
        Some(nodes) => CompactRange::from_parts(v, nodes)?,
        None => {
            if v > 0 {
                tracing::warn!(log = %info.description, verified_position = v,
                    "no frontier stored with the verified position; re-hashing the log from 0 \
                     (already stored entries are replayed, not duplicated)");
            }
            CompactRange::new()
        }
    };
    let stored_size = state.verified_tree_size;
    let stored_root = state.verified_root_hash;
    if compact.size() == stored_size && stored_size > 0 && stored_root != Some(compact.root()) {
        return Err(StoreError::Corrupt(format!(
            "{}: the stored frontier does not hash to the stored verified root",
            info.description
        ))
        .into());
    }

    let head = source.head().await?;
    let mut report = IngestReport {
        log_id,
        description: info.description.clone(),
        kind: Some(kind),
        start_position: v,
        verified_position: v,
        head_tree_size: head.tree_size,
        head_timestamp_ms: head.timestamp_ms,
        ingested_until_ms: state.ingested_until_ms,
        ..IngestReport::default()
    };
    let mut cache = TileCache::new();

    // The new head must extend the verified one.
    if head.tree_size < stored_size {
        if let (Source::Rfc6962(c), Some(root)) = (&*source, stored_root) {
            if head.tree_size > 0 {
                let proof = c.get_sth_consistency(head.tree_size, stored_size).await?;
                verify_consistency(head.tree_size, stored_size, &proof, &head.root, &root)?;
            }
        }
        tracing::warn!(log = %info.description, head = head.tree_size, verified = stored_size,
            "the log served a tree head older than the verified one; nothing to do");
        report.stale_head = true;
        report.elapsed = started.elapsed();
        return Ok(report);
    }
    if let Some(root) = stored_root.filter(|_| stored_size > 0) {
        if head.tree_size == stored_size {
            if head.root != root {
                return Err(ct_core::Error::RootMismatch {
                    what:
                        "signed tree head of the already verified size (the log presents two views)",
                }.into());
            }
        } else {
            match &*source {
                Source::Rfc6962(c) => {
                    let proof = c.get_sth_consistency(stored_size, head.tree_size).await?;
                    verify_consistency(stored_size, head.tree_size, &proof, &root, &head.root)?;
                }
                Source::Static(c) => {
                    let old = c
                        .root_with_prefix(&compact, stored_size, head.tree_size, &mut cache)
                        .await?;
                    if old != root {
                        return Err(ct_core::Error::RootMismatch {
                            what: "verified tree head recomputed from the new checkpoint's tiles \
                                   (the new tree does not extend it)",
                        }
                        .into());
                    }
                }
            }
        }
    }
    // static-ct-api: the verified prefix itself (the frontier) must be part
    // of the new tree; checked now from a few hash tiles rather than after
    // downloading everything.
    if let Source::Static(c) = &*source {
        if compact.size() > 0 && compact.size() < head.tree_size {
            let new_root = c
                .root_with_prefix(&compact, head.tree_size, head.tree_size, &mut cache)
                .await?;
            if new_root != head.root {
                return Err(ct_core::Error::RootMismatch {
                    what: "checkpoint vs the verified prefix plus the new tree's hash tiles \
                           (the new tree does not extend the verified one)",
                }
                .into());
            }
        }
    }

    let mmd_ms = info.mmd.saturating_mul(1000);
    let head_until = head.timestamp_ms.saturating_sub(mmd_ms);
    let now = |opts: &IngestOptions| opts.now_s.unwrap_or_else(unix_now_s);

    if compact.size() == head.tree_size {
        // Nothing new; a newer head of the same size still moves
        // "ingested until".
        if head.tree_size > 0 && head_until > state.ingested_until_ms {
            let out = store
                .commit(
                    Commit::new(&log_id, head.tree_size, &head.root)
                        .ingested_until_ms(head_until)
                        .frontier(compact.nodes())
                        .now_s(now(opts)),
                )
                .await?;
            report.verified_position = out.verified_position;
            report.ingested_until_ms = head_until;
        }
        report.elapsed = started.elapsed();
        return Ok(report);
    }

    let end = head.tree_size;
    let (unit, window) = match kind {
        LogKind::Static => (
            TILE_WIDTH,
            log.limits
                .commit_every
                .div_ceil(TILE_WIDTH)
                .saturating_mul(TILE_WIDTH),
        ),
        LogKind::Rfc6962 => (log.limits.batch_size, log.limits.commit_every),
    };
    tracing::info!(log = %info.description, from = compact.size(), to = end, "ingesting");
    let concurrency = log.limits.concurrency.max(1);
    let mut fetches = stream::iter(units(compact.size(), end, unit, window))
        .map(|(s, e)| {
            let src = Arc::clone(&source);
            Task(tokio::spawn(async move {
                src.fetch(s, e, end).await.map(|v| (e, v))
            }))
        })
        .buffered(concurrency);

    let mut pending: Vec<Entry> = Vec::new();
    let mut in_flight: Option<JoinHandle<Result<CommitOutcome>>> = None;
    let mut commits_started = 0u64;
    let result: Result<()> = async {
        while let Some(fetched) = fetches.next().await {
            let (e, entries) = fetched??;
            for en in &entries {
                compact.push(en.leaf_hash)?;
            }
            report.entries_downloaded += entries.len() as u64;
            opts.progress.report(&info.description, compact.size(), end);
            if pending.is_empty() {
                pending = entries;
            } else {
                pending.extend(entries);
            }
            if e != end && e % window != 0 {
                continue;
            }
            source.verify_prefix(&compact, &head, &mut cache).await?;
            if let Some(t) = in_flight.take() {
                let out = t
                    .await
                    .map_err(|e| Error::Internal(format!("commit task: {e}")))??;
                add_outcome(&mut report, &out);
            }
            commits_started += 1;
            let job = CommitJob {
                store: store.clone(),
                log_id,
                entries: std::mem::take(&mut pending),
                head,
                ingested_until_ms: if e == end { head_until } else { 0 },
                frontier: compact.nodes().to_vec(),
                now_s: now(opts),
                #[cfg(feature = "fault-injection")]
                fault: opts
                    .fault
                    .and_then(|(n, fault)| (n == commits_started).then_some(fault)),
            };
            in_flight = Some(tokio::spawn(job.run()));
        }
        Ok(())
    }
    .await;
    drop(fetches);
    // Let the commit in flight finish either way, so that the verified
    // position is settled when this returns.
    if let Some(t) = in_flight.take() {
        let out = t
            .await
            .map_err(|e| Error::Internal(format!("commit task: {e}")));
        match (out, &result) {
            (Ok(Ok(out)), _) => add_outcome(&mut report, &out),
            (Ok(Err(e)) | Err(e), Ok(())) => return Err(e),
            (Ok(Err(e)) | Err(e), Err(_)) => {
                tracing::warn!(log = %info.description, error = %crate::error::chain(&e), "commit failed after an earlier error");
            }
        }
    }
    result?;
    if report.verified_position == end {
        report.ingested_until_ms = report.ingested_until_ms.max(head_until);
    }
    report.elapsed = started.elapsed();
    tracing::info!(log = %info.description, verified = report.verified_position,
        inserted = report.inserted, secs = report.elapsed.as_secs_f64(), "ingested");
    Ok(report)
}

/// Ingests several logs concurrently (each within its own limits); one
/// result per log, in the order given.
pub async fn ingest_logs(
    store: &Store,
    http: &HttpClient,
    logs: &[SelectedLog],
    opts: &IngestOptions,
) -> Vec<Result<IngestReport>> {
    join_all(logs.iter().map(|l| ingest_log(store, http, l, opts))).await
}

/// What [`run_once`] did.
#[derive(Debug)]
pub struct RunSummary {
    /// The selected logs and the result of each.
    pub logs: Vec<(SelectedLog, Result<IngestReport>)>,
    /// Entries removed by the expiry prune after ingesting.
    pub pruned: u64,
    /// Misbehaviour reports checked with their logs after ingesting
    /// ([`crate::reports`]).
    pub reports: Vec<crate::reports::ReportCheck>,
    /// HTTP traffic of the run: (requests, body bytes, retries, failed requests).
    pub http: (u64, u64, u64, u64),
}

/// Opens the store for ingesting: checks its schema version, and brings a
/// missing or older schema up to date when this role may (SQLite, whose
/// file this process owns; a PostgreSQL role that owns the database, as in
/// the compose deployment). A role that may not (the ingest role of
/// docs/operator.md) gets the schema error, which names `ct-ingest migrate`.
pub async fn open_store(url: &str) -> Result<Store> {
    match Store::connect(url).await {
        Err(e @ (StoreError::SchemaMissing | StoreError::SchemaOutdated { .. })) => {
            match Store::connect_and_migrate(url).await {
                Ok(store) => {
                    tracing::info!(schema = %e, "store schema migrated");
                    Ok(store)
                }
                Err(m) if m.is_permission_denied() => Err(e.into()),
                Err(m) => Err(m.into()),
            }
        }
        r => Ok(r?),
    }
}

/// Probes the store every [`STORE_PROBE_INTERVAL`] and reports to
/// `health`; returns the first failure (logged with its cause).
async fn watch_store(store: Store, health: StoreHealth) -> StoreError {
    loop {
        tokio::time::sleep(STORE_PROBE_INTERVAL).await;
        match store.ping().await {
            Ok(()) => health.report(true),
            Err(e) => {
                health.report(false);
                tracing::error!(error = %e, "store unreachable; ending the run");
                return e;
            }
        }
    }
}

/// One full pass: loads the log list, selects the logs, connects to the
/// database, ingests every selected log up to its current head, then prunes
/// expired entries. Per-log failures are reported in the summary; only
/// setup failures (log list, selection, database) and a failed prune are
/// an `Err` (after a failed prune, the logs' own errors are logged here).
pub async fn run_once(config: &Config, opts: &IngestOptions) -> Result<RunSummary> {
    let http = HttpClient::new(&config.http)?;
    let list = load_log_list(&config.log_list, &http).await?;
    let now_s = opts.now_s.unwrap_or_else(unix_now_s);
    let logs = config.select_logs(&list, now_s)?;
    let store = open_store(config.database_url()).await?;
    opts.store_health.report(true);
    // The run ends as soon as the probe finds the store unreachable.
    let watcher = Task(tokio::spawn(watch_store(
        store.clone(),
        opts.store_health.clone(),
    )));
    let pass = pass(&store, &http, logs, opts);
    let result = tokio::select! {
        r = pass => r,
        e = watcher => Err(e?.into()),
    };
    store.close().await;
    result
}

/// The work of [`run_once`] once the store is open.
async fn pass(
    store: &Store,
    http: &HttpClient,
    logs: Vec<SelectedLog>,
    opts: &IngestOptions,
) -> Result<RunSummary> {
    let store = store.clone();
    let results = ingest_logs(&store, http, &logs, opts).await;
    let results = diagnose_all(&store, results).await;
    // A report check that cannot read or write the store is logged; the
    // ingestion it follows stands.
    // Only logs that answered this run are asked (a 404 from a log whose
    // API did not work at all would say nothing about the leaf).
    let answered: Vec<SelectedLog> = logs
        .iter()
        .zip(&results)
        .filter(|(_, r)| r.is_ok())
        .map(|(l, _)| l.clone())
        .collect();
    let reports = match crate::reports::confirm_reports(
        &store,
        http,
        &answered,
        opts.now_s.map_or_else(ct_core::civil::unix_now_ms, |s| {
            u64::try_from(s).unwrap_or(0).saturating_mul(1000)
        }),
    )
    .await
    {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %crate::error::chain(&e), "checking misbehaviour reports failed");
            Vec::new()
        }
    };
    let pruned = match store
        .prune_expired(opts.now_s.unwrap_or_else(unix_now_s))
        .await
    {
        Ok(n) => n,
        Err(e) => {
            // The run fails; its logs' errors would go unreported.
            for (log, r) in logs.iter().zip(&results) {
                if let Err(e) = r {
                    tracing::error!(log = %log.info.description, error = %crate::error::chain(e), "log refused");
                }
            }
            return Err(store.diagnose(e).await.into());
        }
    };
    let c = http.counters();
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    Ok(RunSummary {
        logs: logs.into_iter().zip(results).collect(),
        pruned,
        reports,
        http: (
            load(&c.requests),
            load(&c.bytes),
            load(&c.retries),
            load(&c.errors),
        ),
    })
}

/// Per-log results whose store error is only "pool timed out" replaced by
/// the cause the store gives now (e.g. "Connection refused").
async fn diagnose_all(
    store: &Store,
    results: Vec<Result<IngestReport>>,
) -> Vec<Result<IngestReport>> {
    let mut out = Vec::with_capacity(results.len());
    for r in results {
        out.push(match r {
            Err(Error::Store(e)) => Err(Error::Store(store.diagnose(e).await)),
            other => other,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_split_at_unit_window_and_end() {
        let u: Vec<_> = units(5, 30, 10, 15).collect();
        assert_eq!(u, vec![(5, 10), (10, 15), (15, 20), (20, 30)]);
        let u: Vec<_> = units(0, 0, 10, 15).collect();
        assert!(u.is_empty());
        let u: Vec<_> = units(250, 600, 256, 512).collect();
        assert_eq!(u, vec![(250, 256), (256, 512), (512, 600)]);
    }
}
