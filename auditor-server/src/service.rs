//! Start-up, scheduled epoch builds, reloads of epochs built elsewhere,
//! and graceful shutdown.
//!
//! The service answers the current epoch while the next is built (on the
//! blocking pool and rayon's global pool; answers use their own pool), then
//! swaps atomically (`crate::state::Registry::publish`).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use sha2::Digest as _;
use tokio::net::TcpListener;

use crate::batch::{AnswerPool, BatchConfig};
use crate::config::{redact_secrets, redact_url, Config};
use crate::conn::{self, ConnLimits};
use crate::epoch::{self, BuildParams, Epoch};
use crate::epochdir::EpochDir;
use crate::error::{error_chain, Error, Result};
use crate::memory::{self, Budget};
use crate::metrics::Metrics;
use crate::objstore::{self, Objects, ReadyMarker};
use crate::plan::{self, EpochSpec};
use crate::routes::{self, AppState, Limits};
use crate::state::{Registry, ServedEpoch};

/// A configured auditor.
pub struct Service {
    config: Config,
    state: AppState,
    pool: AnswerPool,
    batch: BatchConfig,
    dir: EpochDir,
    /// Serialises builds started by this process.
    building: tokio::sync::Mutex<()>,
    /// Epochs refused at load, with the reason (not retried).
    refused: std::sync::Mutex<BTreeMap<u64, String>>,
    /// SHA-256 of the epoch spec file whose build failed last (not retried
    /// until the file changes).
    spec_failed: std::sync::Mutex<Option<[u8; 32]>>,
    /// Object-store mode ([`crate::objstore`]).
    objects: Option<Objects>,
    /// Object-store mode: this shard's part of a prepared epoch, built and
    /// reported ready, until the epoch is published.
    staged: std::sync::Mutex<Option<Epoch>>,
    /// Object-store mode: the last epoch whose build failed, the number
    /// of attempts and when to try again.
    obj_failed: std::sync::Mutex<Option<(u64, u32, std::time::Instant)>>,
    /// Object-store mode: the newest epoch counted in
    /// `auditor_epoch_publish_timeouts_total`.
    timeout_seen: std::sync::atomic::AtomicU64,
}

/// Refuses an epoch loaded from the directory of epoch `id` whose
/// manifest names another epoch (a directory renamed or copied by hand):
/// its files are consistent among themselves, but clients would be told
/// another id than the one it was published under.
fn check_dir_id(dir: &std::path::Path, id: u64, epoch: Epoch) -> Result<Epoch> {
    if epoch.manifest.epoch != id {
        return Err(Error::Corrupt {
            path: dir.join(crate::layout::MANIFEST_FILE).display().to_string(),
            why: format!(
                "names epoch {}, but lies in the directory of epoch {id} (renamed or copied?)",
                epoch.manifest.epoch
            ),
        });
    }
    Ok(epoch)
}

/// Longest delay between retries of the start-up build.
const MAX_BUILD_RETRY: Duration = Duration::from_secs(300);

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("epoch_dir", &self.dir)
            .finish()
    }
}

impl Service {
    /// Sets up the answer pool, registry, metrics and epoch directory.
    pub fn new(config: Config) -> Result<Service> {
        config.validate()?;
        if !config.shard.build && config.shard.object_store.is_none() {
            return Err(Error::Config(
                "[shard] build = false needs [shard] object_store: the databases are then \
                 downloaded from where `auditor-server epoch build` uploads them"
                    .into(),
            ));
        }
        let threads = match config.limits.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        };
        let pool = AnswerPool::new(threads)?;
        let dir = EpochDir::open(&config.epoch_dir)?;
        let objects = match &config.shard.object_store {
            Some(url) => Some(Objects::open(url)?),
            None => None,
        };
        let mut metrics = Metrics::new();
        let report_metrics = crate::reports::ReportMetrics::register(&mut metrics);
        let intake = crate::reports::Intake::new(&config, report_metrics)?;
        let mut state = AppState::new(
            Arc::new(Registry::new(Duration::from_secs(
                config.epoch.grace_seconds,
            ))),
            metrics,
            Limits {
                max_concurrent: config.limits.max_concurrent_queries,
                timeout: Duration::from_secs(config.limits.request_timeout_seconds),
                body_timeout: Duration::from_millis(config.limits.body_timeout_ms),
            },
        );
        if let Some(i) = intake {
            state = state.with_reports(Arc::new(i));
        }
        Ok(Service {
            batch: BatchConfig {
                window: Duration::from_millis(config.limits.batch_window_ms),
                max_batch: config.limits.max_batch,
            },
            config,
            state,
            pool,
            dir,
            building: tokio::sync::Mutex::new(()),
            refused: std::sync::Mutex::new(BTreeMap::new()),
            spec_failed: std::sync::Mutex::new(None),
            objects,
            staged: std::sync::Mutex::new(None),
            obj_failed: std::sync::Mutex::new(None),
            timeout_seen: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Handler state (registry, metrics, limits).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The epoch directory.
    pub fn epoch_dir(&self) -> &EpochDir {
        &self.dir
    }

    /// The router over this service's state: the API at the root and
    /// under the path of this shard's own URL, if it has one.
    pub fn router(&self) -> axum::Router {
        routes::app_under(self.state.clone(), self.config.shard.own_path().as_deref())
    }

    /// Serves `epoch` from now on (must be newer than the current one).
    /// Call inside the tokio runtime.
    pub fn publish(&self, epoch: Epoch) -> Result<bool> {
        let build_s = epoch.report.as_ref().map(|r| r.total_s);
        let served = ServedEpoch::activate(epoch, &self.pool, self.batch, &self.state.metrics)?;
        let id = served.id();
        let ok = self.state.registry.publish(served);
        if ok {
            self.state.metrics.epochs_published.inc();
            if let Some(s) = build_s {
                self.state.metrics.epoch_build_seconds.set(s);
            }
            tracing::info!(epoch = id, "epoch published");
        }
        Ok(ok)
    }

    /// Loads the newest persisted epoch newer than the served one that can
    /// be loaded; returns the epoch served afterwards. An epoch that fails
    /// to load (missing or mismatched manifest, damaged or old-format
    /// files) is refused: logged once at ERROR with its cause, counted in
    /// `auditor_epoch_failures_total`, never served, and not retried by
    /// this process ([`Service::refused_epochs`]); the next older epoch is
    /// tried instead. Errors only if the directory cannot be read.
    pub async fn reload(&self) -> Result<Option<u64>> {
        let current = self.state.registry.current().map(|e| e.id());
        for id in self.dir.list()?.into_iter().rev() {
            if current.is_some_and(|c| id <= c) {
                break;
            }
            if self.refused_lock().contains_key(&id) {
                continue;
            }
            let path = self.dir.path(id);
            let shard = self.config.shard.clone();
            let budget = self.budget();
            let loaded =
                tokio::task::spawn_blocking(move || epoch::load_epoch(&path, &shard, &budget))
                    .await?;
            match loaded
                .and_then(|epoch| check_dir_id(&self.dir.path(id), id, epoch))
                .and_then(|epoch| self.publish(epoch))
            {
                Ok(_) => break,
                Err(e) => {
                    let why = error_chain(&e);
                    self.state.metrics.epoch_failures.inc();
                    tracing::error!(
                        epoch = id,
                        dir = %self.dir.path(id).display(),
                        error = %why,
                        "epoch refused: it is not served (a new build replaces it)"
                    );
                    self.refused_lock().insert(id, why);
                }
            }
        }
        Ok(self.state.registry.current().map(|e| e.id()))
    }

    fn refused_lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, String>> {
        match self.refused.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Epochs on disk this process refused to load, with the reason.
    pub fn refused_epochs(&self) -> Vec<(u64, String)> {
        self.refused_lock()
            .iter()
            .map(|(id, why)| (*id, why.clone()))
            .collect()
    }

    /// Builds the next epoch from the store (snapshot at `now_s`, default
    /// now), persists and publishes it. Returns its id. A failure — the
    /// store unreachable included — is counted in
    /// `auditor_epoch_failures_total` and logged once at ERROR with its
    /// cause chain (database URL credentials redacted).
    pub async fn build_and_publish(&self, now_s: Option<i64>) -> Result<u64> {
        let _guard = self.building.lock().await;
        let result = self.build_locked(now_s).await;
        if let Err(e) = &result {
            self.state.metrics.epoch_failures.inc();
            if e.store_unreachable() {
                self.state.metrics.store_up.set(0);
            }
            let why = redact_secrets(&error_chain(e), self.config.database_url());
            tracing::error!(error = %why, "epoch build failed");
        }
        result
    }

    async fn build_locked(&self, now_s: Option<i64>) -> Result<u64> {
        if let Some(path) = &self.config.shard.epoch_spec {
            let (spec, _) = EpochSpec::read(path)?;
            return self.build_spec_locked(&spec).await;
        }
        if self.config.shard.is_sharded() {
            return Err(Error::Config(
                "a sharded server (count > 1) builds epochs only from an epoch spec \
                 ([shard] epoch_spec, written by auditor-server epoch plan)"
                    .into(),
            ));
        }
        let mut bp = BuildParams::from_config(&self.config)?;
        bp.budget = self.budget();
        let store = self.open_store().await?;
        let now = now_s.unwrap_or_else(epoch::unix_now_s);
        let built = epoch::build_next(&store, &self.dir, bp, self.config.epoch.keep, now).await;
        let built = explain(&store, built).await;
        self.refresh_report_counts(&store).await;
        store.close().await;
        let (_, epoch) = built?;
        let id = epoch.manifest.epoch;
        self.publish(epoch)?;
        Ok(id)
    }

    /// Connects to the entry store (read-only schema check, no DDL) and
    /// sets `auditor_store_up`.
    async fn open_store(&self) -> Result<ct_store::Store> {
        match ct_store::Store::connect(self.config.database_url()).await {
            Ok(store) => {
                self.state.metrics.store_up.set(1);
                Ok(store)
            }
            Err(e) => {
                if e.is_unreachable() || e.is_auth_failure() {
                    self.state.metrics.store_up.set(0);
                }
                Err(e.into())
            }
        }
    }

    /// Refreshes `auditor_reports{status}` with `store` (failures are
    /// logged: the gauge is informative).
    async fn refresh_report_counts(&self, store: &ct_store::Store) {
        if let Some(i) = &self.state.reports {
            if let Err(e) = i.refresh_counts_from(store).await {
                tracing::warn!(error = %error_chain(&e), "counting misbehaviour reports failed");
            }
        }
    }

    /// The memory budget of a new epoch: the configured one, less what
    /// the epochs already held use (the system's figures already count
    /// them).
    fn budget(&self) -> Budget {
        let held = self
            .state
            .registry
            .held()
            .iter()
            .map(|ep| {
                let own: Vec<u32> = (0..ep.dbs.len() as u32)
                    .filter(|&d| ep.dbs[d as usize].is_some())
                    .collect();
                memory::need(&ep.manifest, &own, false).map_or(0, |n| n.serving())
            })
            .sum();
        Budget {
            max_bytes: (self.config.epoch.max_memory_bytes > 0)
                .then_some(self.config.epoch.max_memory_bytes),
            held,
        }
    }

    async fn build_spec_locked(&self, spec: &EpochSpec) -> Result<u64> {
        let mut bp = BuildParams::from_config(&self.config)?;
        bp.budget = self.budget();
        let store = self.open_store().await?;
        let built = plan::build_from_spec(
            &store,
            &self.dir,
            spec,
            &self.config.shard,
            &bp,
            self.config.epoch.keep,
        )
        .await;
        let built = explain(&store, built).await;
        self.refresh_report_counts(&store).await;
        store.close().await;
        let (_, epoch) = built?;
        let id = epoch.manifest.epoch;
        self.publish(epoch)?;
        Ok(id)
    }

    /// With `[shard] epoch_spec`: builds this server's part of the epoch
    /// the spec file plans, if it is newer than every epoch on disk, and
    /// publishes it. A spec whose build failed is not retried until the
    /// file changes (failures are counted and logged like other builds).
    /// Returns the epoch built, if any.
    pub async fn build_from_spec_if_new(&self) -> Result<Option<u64>> {
        let Some(path) = self.config.shard.epoch_spec.clone() else {
            return Ok(None);
        };
        let _guard = self.building.lock().await;
        let bytes = match EpochSpec::read_bytes(&path) {
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                return Ok(None);
            }
            r => r.map_err(|e| self.spec_failure(&path, None, e))?,
        };
        let digest: [u8; 32] = sha2::Sha256::digest(&bytes).into();
        if *self.spec_failed_lock() == Some(digest) {
            return Ok(None);
        }
        let spec =
            EpochSpec::from_json(&bytes).map_err(|e| self.spec_failure(&path, Some(digest), e))?;
        let current = self.state.registry.current().map(|e| e.id());
        let newest = self.dir.latest()?.max(current);
        if newest.is_some_and(|n| spec.manifest.epoch <= n) {
            return Ok(None);
        }
        let id = self
            .build_spec_locked(&spec)
            .await
            .map_err(|e| self.spec_failure(&path, Some(digest), e))?;
        Ok(Some(id))
    }

    fn spec_failed_lock(&self) -> std::sync::MutexGuard<'_, Option<[u8; 32]>> {
        self.spec_failed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts and logs a failed build from the spec file at `path` (whose
    /// bytes hash to `digest`, then not retried until the file changes).
    fn spec_failure(&self, path: &std::path::Path, digest: Option<[u8; 32]>, e: Error) -> Error {
        if digest.is_some() {
            *self.spec_failed_lock() = digest;
        }
        self.state.metrics.epoch_failures.inc();
        let why = redact_secrets(&error_chain(&e), self.config.database_url());
        tracing::error!(
            error = %why,
            spec = %path.display(),
            "epoch build from the spec failed (retried when the spec file changes)"
        );
        e
    }

    /// Serves on `listener` until `shutdown` resolves: loads the newest
    /// usable epoch (building one if there is none, or the newest on disk
    /// was refused, and the config says so), runs the build schedule and
    /// the reload poll, and drains requests on shutdown.
    pub async fn run<F>(self: Arc<Self>, listener: TcpListener, shutdown: F) -> Result<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let mut tasks = Vec::new();
        // A failure no retry cures (wrong password, missing grant, schema):
        // the server stops, and `run` returns it.
        let fatal = Fatal::default();
        tracing::info!(
            database = %redact_url(self.config.database_url()),
            epoch_dir = %self.dir.root().display(),
            "auditor-server starting"
        );
        // Build directories of builders killed mid-build (this process's
        // previous life included) are never loaded; free their space.
        if let Err(e) = self.dir.remove_stale_builds() {
            tracing::warn!(error = %error_chain(&e), "could not remove stale build directories");
        }
        let served = match self.reload().await {
            Ok(s) => s,
            Err(e) => {
                self.state.metrics.epoch_failures.inc();
                return Err(e);
            }
        };
        let newest = self.dir.latest()?;
        let newest_refused = newest.is_some_and(|n| served.is_none_or(|s| n > s));
        if let Some(e) = served {
            tracing::info!(epoch = e, "serving persisted epoch");
        }
        let spec = self.config.shard.epoch_spec.is_some();
        let objects = self.objects.is_some();
        if objects {
            // Builds follow the object store: now, and every reload period
            // after the last pass, in a task of their own so that a long
            // build does not hold up the sweep of the previous epoch.
            let svc = self.clone();
            let every = match self.config.schedule.reload_seconds {
                0 => Duration::from_secs(5),
                n => Duration::from_secs(n),
            };
            tasks.push(tokio::spawn(async move {
                loop {
                    // Failures are counted and logged by sync_objects.
                    let _ = svc.sync_objects().await;
                    tokio::time::sleep(every).await;
                }
            }));
        } else if spec {
            // Builds follow the epoch spec file: now, and whenever it
            // names a newer epoch (polled with the reload).
            let svc = self.clone();
            tasks.push(tokio::spawn(async move {
                // Failures are counted and logged by build_from_spec_if_new.
                let _ = svc.build_from_spec_if_new().await;
            }));
        } else if self.config.shard.is_sharded() {
            if served.is_none() {
                tracing::warn!(
                    "sharded server without [shard] epoch_spec: serving only epochs built into \
                     the epoch directory by `auditor-server build-epoch --epoch-spec`; 503 until one is"
                );
            }
        } else if (served.is_none() || newest_refused) && self.config.schedule.build_if_missing {
            // Build in the background: the server listens at once and
            // answers 503 `no_epoch` (health checks see it alive) until
            // the first epoch is published. Failed attempts are retried
            // with a growing delay until an epoch is served.
            tracing::info!("no usable epoch on disk: building one");
            let svc = self.clone();
            let fatal = fatal.clone();
            tasks.push(tokio::spawn(async move {
                // Until an epoch is served: no deadline.
                let far = tokio::time::Instant::now() + Duration::from_secs(100 * 365 * 86_400);
                let r = retry_until(far, "start-up", Error::needs_operator, || async {
                    if svc.state.registry.current().is_some() {
                        return Ok(0); // published meanwhile (a reload)
                    }
                    svc.build_and_publish(None).await
                })
                .await;
                if let Err(e) = r {
                    fatal.raise(e);
                }
            }));
        } else if served.is_none() {
            tracing::warn!("no epoch on disk; answering 503 until one is published");
        }
        if let Some(schedule) = self.config.schedule()? {
            let svc = self.clone();
            let fatal = fatal.clone();
            tasks.push(tokio::spawn(async move {
                // The epoch just loaded or built counts as the last run.
                let mut last = Some(epoch::unix_now_s());
                loop {
                    let now = epoch::unix_now_s();
                    let wait = schedule.seconds_until_next(now, last);
                    tokio::time::sleep(Duration::from_secs(wait)).await;
                    last = Some(epoch::unix_now_s());
                    // A failed build is retried with a growing delay until
                    // it succeeds or the next scheduled build is due.
                    let next = schedule.seconds_until_next(epoch::unix_now_s(), last);
                    let due = tokio::time::Instant::now() + Duration::from_secs(next);
                    let build = || svc.build_and_publish(None);
                    match retry_until(due, "scheduled", Error::needs_operator, build).await {
                        Ok(id) => tracing::info!(epoch = id, "scheduled epoch built"),
                        Err(e) if e.needs_operator() => {
                            fatal.raise(e);
                            return;
                        }
                        // Counted and logged by build_and_publish; the
                        // next scheduled build tries again.
                        Err(_) => {}
                    }
                }
            }));
        }
        if let Some(intake) = self.state.reports.clone() {
            tasks.push(tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    if let Err(e) = intake.refresh_if_connected().await {
                        tracing::warn!(error = %error_chain(&e), "counting misbehaviour reports failed");
                    }
                }
            }));
        }
        let every = self.config.schedule.reload_seconds;
        {
            let svc = self.clone();
            let every = Duration::from_secs(if every == 0 { 5 } else { every });
            let reload = self.config.schedule.reload_seconds > 0;
            tasks.push(tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    svc.state.registry.sweep();
                    if spec {
                        let _ = svc.build_from_spec_if_new().await;
                    }
                    if reload && !objects {
                        if let Err(e) = svc.reload().await {
                            svc.state.metrics.epoch_failures.inc();
                            tracing::error!(error = %error_chain(&e), "epoch reload failed");
                        }
                    }
                }
            }));
        }
        let addr = listener.local_addr().map_err(|source| Error::Io {
            path: format!("listening socket {}", self.config.bind),
            source,
        })?;
        tracing::info!(%addr, "auditor-server listening");
        let l = &self.config.limits;
        let limits = ConnLimits {
            max_connections: l.max_connections,
            header_timeout: Duration::from_millis(l.header_timeout_ms),
            idle_timeout: Duration::from_millis(l.idle_timeout_ms),
        };
        let stop = {
            let fatal = fatal.clone();
            async move {
                tokio::select! {
                    () = shutdown => {}
                    () = fatal.raised() => {}
                }
            }
        };
        conn::serve(
            listener,
            self.router(),
            limits,
            self.state.metrics.open_connections.clone(),
            stop,
        )
        .await;
        for t in tasks {
            t.abort();
        }
        match fatal.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// `built`, with a store error that is only "pool timed out" replaced by
/// the cause the server gives now ([`ct_store::Store::diagnose`]).
async fn explain<T>(store: &ct_store::Store, built: Result<T>) -> Result<T> {
    match built {
        Err(Error::Store(e)) => Err(Error::Store(store.diagnose(e).await)),
        other => other,
    }
}

/// Runs `attempt` until it succeeds, retrying a failure after 1 s, 2 s,
/// 4 s … (at most [`MAX_BUILD_RETRY`]) as long as the retry starts before
/// `deadline` (the next scheduled build). A failure no retry cures
/// (`is_fatal`: [`Error::needs_operator`]) ends it at once. Returns the
/// last result.
pub(crate) async fn retry_until<F, Fut>(
    deadline: tokio::time::Instant,
    what: &str,
    is_fatal: fn(&Error) -> bool,
    mut attempt: F,
) -> Result<u64>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<u64>>,
{
    let mut wait = Duration::from_secs(1);
    loop {
        match attempt().await {
            Ok(id) => return Ok(id),
            Err(e) if is_fatal(&e) => return Err(e),
            Err(e) => {
                if tokio::time::Instant::now() + wait >= deadline {
                    return Err(e);
                }
                tracing::info!(
                    retry_in_s = wait.as_secs(),
                    "retrying the {what} epoch build"
                );
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(MAX_BUILD_RETRY);
            }
        }
    }
}

/// The first failure that stops `serve`, and its signal.
#[derive(Clone, Default)]
struct Fatal(Arc<(std::sync::Mutex<Option<Error>>, tokio::sync::Notify)>);

impl Fatal {
    fn raise(&self, e: Error) {
        tracing::error!(error = %error_chain(&e), "stopping: this needs an operator");
        let mut slot = self.0 .0.lock().unwrap_or_else(|p| p.into_inner());
        slot.get_or_insert(e);
        self.0 .1.notify_one();
    }

    async fn raised(&self) {
        self.0 .1.notified().await;
    }

    fn take(&self) -> Option<Error> {
        self.0 .0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// Object-store mode (`[shard] object_store`, [`crate::objstore`]): build
/// this shard's databases of the newest prepared epoch, report ready,
/// serve the newest published epoch.
impl Service {
    /// The object store, in object-store mode.
    pub fn objects(&self) -> Option<&Objects> {
        self.objects.as_ref()
    }

    /// The epoch built and reported ready but not yet published, if any.
    pub fn staged_epoch(&self) -> Option<u64> {
        self.staged_lock().as_ref().map(|e| e.manifest.epoch)
    }

    /// The build report of the staged epoch, if any (`None` also when it
    /// was loaded without one).
    pub fn staged_report(&self) -> Option<epoch::BuildReport> {
        self.staged_lock().as_ref().and_then(|e| e.report.clone())
    }

    fn staged_lock(&self) -> std::sync::MutexGuard<'_, Option<Epoch>> {
        self.staged.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn staged_dir(&self, id: u64) -> std::path::PathBuf {
        self.dir.root().join(format!(".staged-{id:012}"))
    }

    /// One pass over the object store: serves the newest published epoch
    /// (from what this shard staged or persisted, else building it), then
    /// builds this shard's part of the newest prepared epoch, persists it
    /// (`.staged-<id>` in the epoch directory) and reports ready
    /// (`epochs/<id>/ready/<shard>`). Updates the object-store metrics.
    /// Failures are counted (`auditor_object_store_errors_total` for the
    /// store, `auditor_epoch_failures_total` for builds) and logged; a
    /// failed build is retried with a growing delay. Does nothing without
    /// an object store.
    pub async fn sync_objects(&self) -> Result<()> {
        let Some(objects) = &self.objects else {
            return Ok(());
        };
        let _guard = self.building.lock().await;
        let result = self.sync_locked(objects).await;
        if let Err(e) = &result {
            let why = error_chain(e);
            if matches!(e, Error::ObjectStore { .. }) {
                self.state.metrics.object_store_errors.inc();
                tracing::warn!(store = %objects, error = %why, "object store unavailable; retrying");
            } else {
                self.state.metrics.epoch_failures.inc();
                tracing::error!(store = %objects, error = %why, "epoch from the object store failed");
            }
        }
        result
    }

    /// `auditor-server epoch build`: builds this group's databases of the
    /// newest prepared epoch, uploads them and reports the group ready,
    /// unless the group is ready in it already; then waits up to `wait`
    /// (looking every `poll`) for a newer prepared epoch to build. A
    /// builder started beside the coordinator (the same schedule) thus
    /// builds the epoch the coordinator is preparing, and one restarted
    /// after its build finds its group ready and stops.
    pub async fn build_group(&self, wait: Duration, poll: Duration) -> Result<GroupBuild> {
        let Some(objects) = &self.objects else {
            return Err(Error::Config(
                "epoch build needs an object store ([shard] object_store, --object-store)".into(),
            ));
        };
        let deadline = tokio::time::Instant::now() + wait;
        let group = self.config.shard.index;
        let mut seen = None;
        loop {
            let _guard = self.building.lock().await;
            if let Some(id) = objects.newest_prepared().await? {
                if let Some(spec) = objects.spec(id).await? {
                    let (ready, _) = objects.ready_shards(&spec).await?;
                    if !ready.contains(&group) {
                        self.stage_with(objects, &spec, None).await?;
                        if self.staged_epoch() != Some(id) {
                            return Err(Error::Internal(format!(
                                "epoch {id}: group {group}'s databases were not staged"
                            )));
                        }
                        self.report_ready(objects, &spec).await?;
                        return Ok(GroupBuild::Built { epoch: id });
                    }
                    seen = Some(id);
                }
            }
            drop(_guard);
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Ok(match seen {
                    Some(epoch) => GroupBuild::AlreadyReady { epoch },
                    None => GroupBuild::NothingPrepared,
                });
            }
            tokio::time::sleep(poll.min(deadline - now)).await;
        }
    }

    fn current_id(&self) -> Option<u64> {
        self.state.registry.current().map(|e| e.id())
    }

    async fn sync_locked(&self, objects: &Objects) -> Result<()> {
        let m = &self.state.metrics;
        if let Some(p) = objects.newest_published().await? {
            if self.current_id().is_none_or(|c| p > c) {
                self.switch_to(objects, p).await?;
            }
        }
        let Some(id) = objects.newest_prepared().await? else {
            return Ok(());
        };
        m.epoch_prepared.set(id as i64);
        let Some(spec) = objects.spec(id).await? else {
            return Ok(()); // pruned meanwhile
        };
        let (ready, _) = objects.ready_shards(&spec).await?;
        m.epoch_ready_shards.set(ready.len() as i64);
        m.epoch_planned_shards
            .set(i64::from(objstore::shard_count(&spec.manifest)));
        if objects.timed_out(id).await?
            && self
                .timeout_seen
                .fetch_max(id, std::sync::atomic::Ordering::Relaxed)
                < id
        {
            m.epoch_publish_timeouts.inc();
            tracing::warn!(
                epoch = id,
                ready = ?ready,
                "epoch publish timed out: not every shard reported ready; the previous epoch stays served"
            );
        }
        if self.current_id().is_some_and(|c| id <= c) || self.dir.list()?.contains(&id) {
            m.epoch_staged.set(0);
            return Ok(());
        }
        self.stage(objects, &spec).await?;
        if self.staged_epoch() != Some(id) {
            return Ok(()); // a failed build waits for its retry
        }
        m.epoch_staged.set(id as i64);
        // A server that only downloads never writes: what it staged came
        // from this group's ready marker.
        if self.config.shard.build && !ready.contains(&self.config.shard.index) {
            self.report_ready(objects, &spec).await?;
        }
        if objects.is_published(id).await? {
            self.switch_to(objects, id).await?;
        }
        Ok(())
    }

    /// Makes this shard's part of `spec`'s epoch the staged one: already
    /// staged in memory, or persisted in `.staged-<id>` by an earlier run
    /// (loaded and checked), or built from the object store's snapshot.
    async fn stage(&self, objects: &Objects, spec: &crate::plan::EpochSpec) -> Result<()> {
        self.stage_with(objects, spec, None).await
    }

    /// [`Service::stage`], downloading this shard's databases instead of
    /// building them when their files are in the object store: `published`
    /// (the published marker's list, checked to name the spec), else the
    /// ready marker another replica of this group wrote.
    async fn stage_with(
        &self,
        objects: &Objects,
        spec: &crate::plan::EpochSpec,
        published: Option<Vec<objstore::DbArtifact>>,
    ) -> Result<()> {
        let id = spec.manifest.epoch;
        if self.staged_epoch() == Some(id) {
            return Ok(());
        }
        if let Some((failed, _, next)) = *self.obj_failed_lock() {
            if failed == id && std::time::Instant::now() < next {
                return Ok(());
            }
        }
        // A newer prepared epoch replaces an older staged one.
        *self.staged_lock() = None;
        self.remove_staged_dirs(|s| s != id)?;
        let path = self.staged_dir(id);
        let epoch = if path.is_dir() {
            let (shard, budget) = (self.config.shard.clone(), self.budget());
            let p = path.clone();
            let loaded =
                tokio::task::spawn_blocking(move || epoch::load_epoch(&p, &shard, &budget)).await?;
            match loaded {
                Ok(e) if e.manifest == spec.manifest => Ok(e),
                Ok(_) | Err(_) => {
                    tracing::warn!(dir = %path.display(), "staged epoch unusable; building it again");
                    std::fs::remove_dir_all(&path).map_err(crate::error::io(&path))?;
                    self.build_staged(objects, spec).await
                }
            }
        } else {
            match self.built_elsewhere(objects, spec, published).await? {
                Some(files) => self.fetch_staged(objects, spec, &files).await,
                None if !self.config.shard.build => {
                    tracing::info!(
                        epoch = id,
                        shard = self.config.shard.index,
                        "waiting for this group's databases ([shard] build = false: \
                         `auditor-server epoch build` uploads them)"
                    );
                    return Ok(());
                }
                None => self.build_staged(objects, spec).await,
            }
        };
        match epoch {
            Ok(e) => {
                *self.obj_failed_lock() = None;
                *self.staged_lock() = Some(e);
                Ok(())
            }
            Err(e) => {
                let mut f = self.obj_failed_lock();
                let attempts = match *f {
                    Some((failed, n, _)) if failed == id => n + 1,
                    _ => 1,
                };
                let wait = Duration::from_secs(1 << attempts.min(9)).min(MAX_BUILD_RETRY);
                *f = Some((id, attempts, std::time::Instant::now() + wait));
                Err(e)
            }
        }
    }

    fn obj_failed_lock(&self) -> std::sync::MutexGuard<'_, Option<(u64, u32, std::time::Instant)>> {
        self.obj_failed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Deletes the `.staged-<id>` directories whose id `drop` selects.
    fn remove_staged_dirs(&self, drop: impl Fn(u64) -> bool) -> Result<()> {
        let root = self.dir.root();
        for e in std::fs::read_dir(root).map_err(crate::error::io(root))? {
            let e = e.map_err(crate::error::io(root))?;
            let id = e
                .file_name()
                .to_str()
                .and_then(|n| n.strip_prefix(".staged-"))
                .and_then(|n| n.parse::<u64>().ok());
            if id.is_some_and(&drop) {
                let p = e.path();
                std::fs::remove_dir_all(&p).map_err(crate::error::io(&p))?;
            }
        }
        Ok(())
    }

    /// The files of this shard's databases of `spec`'s epoch if some server
    /// has built them: from `published` (the published marker's list), else
    /// from this group's valid ready marker.
    async fn built_elsewhere(
        &self,
        objects: &Objects,
        spec: &crate::plan::EpochSpec,
        published: Option<Vec<objstore::DbArtifact>>,
    ) -> Result<Option<Vec<objstore::DbArtifact>>> {
        let own = self.config.shard.own_databases(&spec.manifest)?;
        let all = match published {
            Some(all) => all,
            None => {
                let (ready, _) = objects.ready_markers(spec).await?;
                match ready
                    .into_iter()
                    .find(|r| r.shard == self.config.shard.index)
                {
                    Some(r) => r.artifacts,
                    None => return Ok(None),
                }
            }
        };
        let files: Vec<objstore::DbArtifact> =
            all.into_iter().filter(|a| own.contains(&a.db)).collect();
        Ok((files.len() == own.len()).then_some(files))
    }

    /// Downloads this shard's databases of `spec`'s epoch (`files`, built
    /// by another server) into `.building-<id>` with the manifest, checks
    /// them by loading them (each bitmap bound to the manifest, every
    /// checksum), then renames the directory `.staged-<id>`. No snapshot is
    /// read and nothing is built.
    async fn fetch_staged(
        &self,
        objects: &Objects,
        spec: &crate::plan::EpochSpec,
        files: &[objstore::DbArtifact],
    ) -> Result<Epoch> {
        let t = std::time::Instant::now();
        let id = spec.manifest.epoch;
        let tmp = self.dir.begin(id)?;
        let fetched = async {
            for a in files {
                objects.download_db(id, a, &tmp).await?;
            }
            let mpath = tmp.join(crate::layout::MANIFEST_FILE);
            std::fs::File::create(&mpath)
                .and_then(|mut f| {
                    std::io::Write::write_all(&mut f, &spec.manifest.to_json())?;
                    f.sync_all()
                })
                .map_err(crate::error::io(&mpath))?;
            let (p, shard, budget) = (tmp.clone(), self.config.shard.clone(), self.budget());
            tokio::task::spawn_blocking(move || epoch::load_epoch(&p, &shard, &budget)).await?
        }
        .await;
        let epoch = match fetched {
            Ok(e) => e,
            Err(e) => {
                self.dir.abandon(&tmp);
                return Err(e);
            }
        };
        self.dir.finish(&tmp, &self.staged_dir(id))?;
        tracing::info!(
            epoch = id,
            dbs = files.len(),
            seconds = t.elapsed().as_secs_f64(),
            "this shard's databases are downloaded from the object store (built elsewhere) and checked"
        );
        Ok(epoch)
    }

    /// Streams and verifies `spec`'s snapshot, builds this shard's
    /// databases into `.building-<id>`, then renames it `.staged-<id>`.
    async fn build_staged(
        &self,
        objects: &Objects,
        spec: &crate::plan::EpochSpec,
    ) -> Result<Epoch> {
        let t = std::time::Instant::now();
        let mut bp = BuildParams::from_config(&self.config)?;
        bp.budget = self.budget();
        let own = plan::check_spec_streamed(spec, &self.config.shard, &bp)?;
        let id = spec.manifest.epoch;
        let stream = objects.open_snapshot(spec).await?;
        tracing::info!(
            epoch = id,
            shard = self.config.shard.index,
            of = self.config.shard.count,
            dbs = own.len(),
            entries = spec.manifest.entries,
            parts = stream.index().parts.len(),
            "snapshot index verified; building this shard's databases as its parts arrive"
        );
        let tmp = self.dir.begin(id)?;
        let built =
            objstore::build_streamed(stream, spec.manifest.clone(), own, bp, tmp.clone(), t).await;
        if built.is_ok() {
            let _ = tokio::task::spawn_blocking(fault_pause_build).await;
        }
        let epoch = match built {
            Ok(e) => e,
            Err(e) => {
                self.dir.abandon(&tmp);
                return Err(e);
            }
        };
        let staged = self.staged_dir(id);
        self.dir.finish(&tmp, &staged)?;
        tracing::info!(
            epoch = id,
            seconds = t.elapsed().as_secs_f64(),
            "this shard's databases are built and persisted"
        );
        Ok(epoch)
    }

    async fn report_ready(&self, objects: &Objects, spec: &crate::plan::EpochSpec) -> Result<()> {
        let m = &spec.manifest;
        let databases = self.config.shard.own_databases(m)?;
        // The databases' files go up first, so that a ready marker always
        // names files that exist (another replica of this group, or a
        // server that lost its disk, loads them instead of building).
        let dir = self.staged_dir(m.epoch);
        let mut artifacts = Vec::with_capacity(databases.len());
        for &db in &databases {
            artifacts.push(objects.upload_db(m.epoch, db, &dir).await?);
        }
        let marker = ReadyMarker {
            epoch: m.epoch,
            shard: self.config.shard.index,
            count: self.config.shard.count,
            databases,
            manifest_sha256: crate::layout::manifest_digest(&m.to_json()),
            spec_sha256: spec.digest(),
            artifacts,
            at: epoch::unix_now_s(),
        };
        objects.write_ready(&marker).await?;
        tracing::info!(epoch = m.epoch, shard = marker.shard, "reported ready");
        Ok(())
    }

    /// Serves the published epoch `id`: the staged one (its directory
    /// becomes `epoch-<id>`), or the one persisted on disk, or else this
    /// shard's part built now from the object store.
    async fn switch_to(&self, objects: &Objects, id: u64) -> Result<()> {
        if self.dir.list()?.contains(&id) {
            self.reload().await?;
            return Ok(());
        }
        let Some(spec) = objects.spec(id).await? else {
            return Err(Error::Corrupt {
                path: format!("{objects}: epochs/{id:012}"),
                why: "published without a spec".into(),
            });
        };
        // Serve only what the publisher saw every shard build: the marker
        // names the spec (and so the snapshot, seeds and layout) and the
        // manifest.
        let marker = objects.published(id).await?;
        if !marker.as_ref().is_some_and(|p| p.names(&spec)) {
            return Err(Error::Corrupt {
                path: format!("{objects}: epochs/{id:012}/{}", objstore::PUBLISHED_OBJECT),
                why: "the published marker does not name this epoch's spec and manifest".into(),
            });
        }
        if self.staged_epoch() != Some(id) {
            self.stage_with(objects, &spec, marker.map(|p| p.databases))
                .await?;
            if self.staged_epoch() != Some(id) {
                return Ok(()); // waiting for a retry
            }
        }
        let Some(epoch) = self.staged_lock().take() else {
            return Ok(());
        };
        if epoch.manifest != spec.manifest {
            return Err(Error::Corrupt {
                path: self.staged_dir(id).display().to_string(),
                why: "the staged databases were built from another spec".into(),
            });
        }
        self.dir.commit(id, &self.staged_dir(id))?;
        self.dir.prune(self.config.epoch.keep)?;
        self.state.metrics.epoch_staged.set(0);
        self.publish(epoch)?;
        Ok(())
    }
}

/// What [`Service::build_group`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GroupBuild {
    /// Built this group's databases of `epoch`, uploaded them and wrote
    /// its ready marker.
    Built {
        /// The epoch built.
        epoch: u64,
    },
    /// The group was ready in the newest prepared epoch, and no newer one
    /// came within the wait.
    AlreadyReady {
        /// The newest prepared epoch.
        epoch: u64,
    },
    /// No epoch is prepared in the object store.
    NothingPrepared,
}

/// Fault injection for the cluster tests, debug builds only: with
/// `AUDITOR_FAULT_PAUSE_BUILD_MS` set, a shard's object-store build
/// sleeps that long after writing its databases into `.building-<id>` and
/// before staging them, so that a test can kill the shard mid-build.
fn fault_pause_build() {
    #[cfg(debug_assertions)]
    if let Some(ms) = std::env::var("AUDITOR_FAULT_PAUSE_BUILD_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        tracing::warn!(ms, "AUDITOR_FAULT_PAUSE_BUILD_MS: pausing the build");
        std::thread::sleep(Duration::from_millis(ms));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use tokio::time::Instant;

    /// `retry_until` with a deadline `deadline_s` from now, over an attempt
    /// that fails `fails` times (transient, or needing an operator when
    /// `fatal`), then succeeds; returns the result and when each attempt
    /// ran, in seconds of tokio's paused clock.
    async fn run(deadline_s: u64, fails: u32, fatal: bool) -> (Result<u64>, Vec<u64>) {
        let n: Arc<AtomicU32> = Arc::default();
        let at: Arc<std::sync::Mutex<Vec<u64>>> = Arc::default();
        let start = Instant::now();
        // A configuration error stands in for a wrong password.
        let fatal_config = |e: &Error| matches!(e, Error::Config(_));
        let r = retry_until(
            start + Duration::from_secs(deadline_s),
            "test",
            fatal_config,
            || {
                let (n, at) = (n.clone(), at.clone());
                async move {
                    at.lock().unwrap().push(start.elapsed().as_secs());
                    let i = n.fetch_add(1, Ordering::SeqCst);
                    if fatal {
                        Err(Error::Config("a wrong password".into()))
                    } else if i < fails {
                        Err(Error::Memory("the store is down".into()))
                    } else {
                        Ok(7)
                    }
                }
            },
        )
        .await;
        let at = at.lock().unwrap().clone();
        (r, at)
    }

    /// A failed build is retried after 1, 2, 4 … s and succeeds within the
    /// window before the next schedule.
    #[tokio::test(start_paused = true)]
    async fn failed_build_is_retried_until_it_succeeds() {
        let (r, at) = run(3600, 3, false).await;
        assert_eq!(r.unwrap(), 7);
        assert_eq!(at, [0, 1, 3, 7]);
    }

    /// Retries stop when the next scheduled build is due (it takes over).
    #[tokio::test(start_paused = true)]
    async fn retries_stop_at_the_next_schedule() {
        let (r, at) = run(20, u32::MAX, false).await;
        assert!(r.is_err());
        assert_eq!(at, [0, 1, 3, 7, 15]);
    }

    /// The delay stops growing at five minutes.
    #[tokio::test(start_paused = true)]
    async fn retry_delay_is_capped() {
        let (r, at) = run(3600, 12, false).await;
        assert_eq!(r.unwrap(), 7);
        let gaps: Vec<u64> = at.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(gaps, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
    }

    /// A failure no retry cures ends the retries at once.
    #[tokio::test(start_paused = true)]
    async fn operator_failures_are_not_retried() {
        let (r, at) = run(3600, 0, true).await;
        assert!(matches!(r, Err(Error::Config(_))));
        assert_eq!(at, [0]);
    }
}
