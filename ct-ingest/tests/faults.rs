//! Fault tests of the `ct-ingest` binary against a local test log
//! (`ct-testlog`): the process killed with SIGKILL at random points of an
//! ingest, PostgreSQL stopped and restarted under it, the SQLite store's
//! filesystem full. After every fault the store must hold exactly the
//! entries `[0, verified position)` of the log, with the log's leaf hashes,
//! none twice; and after the fault has gone, a new run must complete with
//! exactly the log's entries.
//!
//! ```sh
//! export TEST_DATABASE_URL="$(bash ct-store/tests/pg.sh start /tmp/ct-pg)"
//! cargo test -p ct-ingest --test faults
//! bash ct-store/tests/pg.sh stop /tmp/ct-pg
//! ```
//!
//! * `kill_during_ingest`: 5 kills during a 2,000-entry ingest, on SQLite
//!   and (with `TEST_DATABASE_URL`) PostgreSQL. The full size,
//!   `kill_during_ingest_full` (ignored by default; 20 kills during a
//!   10^5-entry ingest, sizes from `FAULT_ENTRIES` and `FAULT_KILLS`), is
//!   run and recorded as docs/reliability.md ("Faults") says. `FAULT_SEED`
//!   replays the kill points of a printed seed.
//! * `postgres_restart_mid_ingest`: runs only with `TEST_DATABASE_URL`
//!   (which says PostgreSQL is installed), on a cluster of its own that it
//!   starts, stops and restarts with `ct-store/tests/pg.sh`.
//! * `sqlite_disk_full`: mounts a small tmpfs (needs root or
//!   `CAP_SYS_ADMIN`); skipped with a message when it cannot, unless
//!   `TEST_REQUIRE_FAULTS=1`.
//!
//! `TEST_REQUIRE_POSTGRES=1` turns a missing `TEST_DATABASE_URL` into a
//! failure.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use test_support::{Rng, TinyFs};

use ct_store::{LogKind, Store, StoreError};
use ct_testlog::{IssuedEntry, TestLog, TestLogConfig};

use ct_store::testing::{BoxErr, TestDb};

type TestResult = Result<(), BoxErr>;

const PASSWORD: &str = "Sekr1t-pw";

// ---------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_ct-ingest")
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn env_u64(name: &str, default: u64) -> Result<u64, BoxErr> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => Ok(v.trim().parse()?),
        _ => Ok(default),
    }
}

/// A test log filled with `n` entries, and its log list on disk.
struct Fixture {
    log: TestLog,
    /// Leaf hash by leaf index.
    leaves: Vec<[u8; 32]>,
    dir: tempfile::TempDir,
    list: PathBuf,
}

impl Fixture {
    async fn new(n: u64) -> Result<Fixture, BoxErr> {
        let log = TestLog::start(TestLogConfig::default()).await?;
        let started = Instant::now();
        let mut issued: Vec<IssuedEntry> = Vec::new();
        let mut left = n;
        while left > 0 {
            let k = left.min(10_000);
            issued.extend(log.add_entries(k as usize, 0.5).await?);
            left -= k;
        }
        eprintln!(
            "test log: {n} entries issued in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let mut leaves = vec![[0u8; 32]; n as usize];
        for e in &issued {
            let i = e.leaf_index.ok_or("issued entry without a leaf index")?;
            leaves[usize::try_from(i)?] = e.leaf_hash.to_bytes();
        }
        let dir = tempfile::tempdir()?;
        let list = dir.path().join("log_list.json");
        std::fs::write(&list, log.log_list_json())?;
        Ok(Fixture {
            log,
            leaves,
            dir,
            list,
        })
    }

    fn n(&self) -> u64 {
        self.leaves.len() as u64
    }

    /// Writes a configuration for `db_url` and returns its path: the test
    /// log only, through `api`, with `limits` (TOML lines of a `[[log]]`)
    /// and `extra` appended.
    fn config(
        &self,
        name: &str,
        db_url: &str,
        api: LogKind,
        limits: &str,
        extra: &str,
    ) -> Result<PathBuf, BoxErr> {
        let path = self.dir.path().join(format!("{name}.toml"));
        std::fs::write(
            &path,
            format!(
                "log_list = \"{}\"\ndatabase_url = \"{db_url}\"\n{extra}\n\
                 [[log]]\nid = \"{}\"\napi = \"{}\"\n{limits}\n",
                self.list.display(),
                ct_core::hex::encode(self.log.log_id().as_bytes()),
                api.as_str()
            ),
        )?;
        Ok(path)
    }
}

/// `ct-ingest <args> --config <config>`, stderr appended to `stderr`.
fn spawn(args: &[&str], config: &Path, stderr: &Path) -> Result<Child, BoxErr> {
    let err = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(stderr)?;
    Ok(Command::new(bin())
        .args(args)
        .arg("--config")
        .arg(config)
        .env_remove("DATABASE_URL")
        .env_remove("CT_INGEST_DATABASE_URL")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()?)
}

/// Waits for `child` to exit by itself (killing it after `timeout`).
fn wait_exit(child: &mut Child, timeout: Duration) -> Result<std::process::ExitStatus, BoxErr> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if Instant::now() > deadline {
            child.kill()?;
            child.wait()?;
            return Err(format!("ct-ingest did not finish within {timeout:?}").into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The log's verified position (0 before the ingester registered it).
async fn verified(store: &Store, log_id: &ct_core::LogId) -> Result<u64, StoreError> {
    match store.log_state(log_id).await {
        Ok(s) => Ok(s.verified_position),
        Err(StoreError::UnknownLog(_)) => Ok(0),
        Err(e) => Err(e),
    }
}

/// Every stored entry as (leaf index, leaf hash), in index order, read with
/// the driver directly (not through the store's API).
async fn stored_rows(url: &str) -> Result<Vec<(i64, Vec<u8>)>, BoxErr> {
    const Q: &str = "SELECT leaf_index, leaf_hash FROM entries ORDER BY leaf_index";
    if url.starts_with("sqlite:") {
        let pool = sqlx::SqlitePool::connect(url).await?;
        let rows = sqlx::query_as(Q).fetch_all(&pool).await?;
        pool.close().await;
        Ok(rows)
    } else {
        let pool = sqlx::PgPool::connect(url).await?;
        let rows = sqlx::query_as(Q).fetch_all(&pool).await?;
        pool.close().await;
        Ok(rows)
    }
}

/// The invariant after any fault: the store holds exactly the log's
/// entries `[0, v)` (v: the verified position), each once, with the log's
/// leaf hashes; the stored tree head covers v. Returns v.
async fn check_store(url: &str, fx: &Fixture) -> Result<u64, BoxErr> {
    let store = Store::connect(url).await?;
    let log_id = fx.log.log_id();
    let v = verified(&store, &log_id).await?;
    if v > 0 {
        let state = store.log_state(&log_id).await?;
        if state.verified_tree_size < v {
            return Err(format!(
                "verified position {v} beyond the stored tree head {}",
                state.verified_tree_size
            )
            .into());
        }
        let (pos, frontier) = store.verified_frontier(&log_id).await?;
        let nodes = frontier.ok_or("no frontier stored with the verified position")?;
        if pos != v || nodes.len() != v.count_ones() as usize {
            return Err(format!("frontier of {} nodes at {pos}, position {v}", nodes.len()).into());
        }
    }
    store.close().await;
    let rows = stored_rows(url).await?;
    if rows.len() as u64 != v {
        return Err(format!(
            "{} entries stored but the verified position is {v} ({})",
            rows.len(),
            if (rows.len() as u64) < v {
                "position ahead of the data"
            } else {
                "data beyond the position, or duplicates"
            }
        )
        .into());
    }
    for (i, (index, hash)) in rows.iter().enumerate() {
        if *index != i as i64 {
            return Err(format!("row {i} has leaf index {index} (a gap or a duplicate)").into());
        }
        if hash.as_slice() != fx.leaves[i].as_slice() {
            return Err(format!("entry {i}: stored leaf hash differs from the log's").into());
        }
    }
    Ok(v)
}

// ---------------------------------------------------------------------------
// Killed with SIGKILL
// ---------------------------------------------------------------------------

/// One kill: where it was aimed and where it landed.
struct Kill {
    target: u64,
    jitter_ms: u64,
    at_ms: u128,
    before: u64,
    after: u64,
    exited_first: bool,
}

/// `kills` SIGKILLs of `ct-ingest once` at random points of an ingest of
/// `fx` into `db`, the store checked after each; then one run to the end.
async fn kill_during_ingest_on(
    fx: &Fixture,
    db: &TestDb,
    api: LogKind,
    kills: u64,
    seed: u64,
) -> Result<(), BoxErr> {
    let n = fx.n();
    // About 100 commits (RFC 6962: one per 5 requests; static-ct-api
    // commits whole 256-entry tiles) and a request rate that makes the
    // ingest last long enough (a second or two at 2,000 entries) for kills
    // to land between and during commits.
    let commit_every = (n / 100).max(100);
    let batch_size = commit_every / 5;
    let rps = match api {
        LogKind::Rfc6962 => 100,
        LogKind::Static => (n / 200).max(10),
    };
    let config = fx.config(
        &format!("kill-{}", db.name()),
        &db.url,
        api,
        &format!(
            "batch_size = {batch_size}\nconcurrency = 2\nrequests_per_second = {rps}\n\
             commit_every = {commit_every}"
        ),
        "",
    )?;
    let stderr = fx.dir.path().join(format!("kill-{}.stderr", db.name()));
    let mut rng = Rng(seed);
    let log_id = fx.log.log_id();
    // The schema exists before the first child starts, so the progress
    // can be polled from the start.
    let store = db.store().await?;
    let started = Instant::now();
    let mut record: Vec<Kill> = Vec::new();
    let mut v = 0u64;
    for k in 0..kills {
        // Aim within the next 2/(kills left + 1) of what remains, so the
        // kills spread over the whole ingest; the target is below n.
        let span = (2 * (n - v) / (kills - k + 1)).max(1);
        let target = v + rng.below(span);
        let jitter_ms = rng.below(40);
        let mut child = spawn(&["once"], &config, &stderr)?;
        let spawned = Instant::now();
        let mut before = v;
        let mut exited_first = false;
        loop {
            if child.try_wait()?.is_some() {
                exited_first = true;
                break;
            }
            before = verified(&store, &log_id).await?;
            if before >= target {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(jitter_ms)).await;
        let at_ms = spawned.elapsed().as_millis();
        child.kill()?; // SIGKILL
        child.wait()?;
        let after = check_store(&db.url, fx)
            .await
            .map_err(|e| format!("after kill {} of {kills}: {e}", k + 1))?;
        if after < v {
            return Err(format!("verified position moved back: {v} -> {after}").into());
        }
        v = after;
        record.push(Kill {
            target,
            jitter_ms,
            at_ms,
            before,
            after,
            exited_first,
        });
    }
    let mut child = spawn(&["once"], &config, &stderr)?;
    let status = wait_exit(&mut child, Duration::from_secs(600))?;
    if !status.success() {
        let log = std::fs::read_to_string(&stderr).unwrap_or_default();
        return Err(format!("final run failed: {status}\n{log}").into());
    }
    let end = check_store(&db.url, fx).await?;
    store.close().await;
    if end != n {
        return Err(format!("final verified position {end}, log has {n}").into());
    }
    let mid = record
        .iter()
        .filter(|k| k.after > 0 && k.after < n && !k.exited_first)
        .count();
    eprintln!(
        "kill_during_ingest {} {} seed={seed:#x}: {n} entries, commit_every {commit_every}, \
         {kills} kills ({mid} with 0 < verified < {n}), {} runs, {:.1} s in all; \
         store exact after every kill and at the end",
        db.name(),
        api.as_str(),
        kills + 1,
        started.elapsed().as_secs_f64()
    );
    for (i, k) in record.iter().enumerate() {
        eprintln!(
            "  kill {:>2}: aimed at >= {:>6} (+{:>2} ms), SIGKILL {:>5} ms after start, \
             verified {:>6} when aimed, {:>6} after the kill{}",
            i + 1,
            k.target,
            k.jitter_ms,
            k.at_ms,
            k.before,
            k.after,
            if k.exited_first {
                " (had exited already)"
            } else {
                ""
            }
        );
    }
    Ok(())
}

async fn kill_during_ingest_with(n: u64, kills: u64) -> TestResult {
    let seed = env_u64("FAULT_SEED", unix_nanos())?;
    eprintln!("FAULT_SEED={seed}");
    let fx = Fixture::new(n).await?;
    for (i, db) in TestDb::all("faults", &format!("kill{n}"))
        .await?
        .into_iter()
        .enumerate()
    {
        // Both APIs are covered: RFC 6962 on SQLite, static-ct-api on
        // PostgreSQL.
        let api = if i == 0 {
            LogKind::Rfc6962
        } else {
            LogKind::Static
        };
        let result = kill_during_ingest_on(&fx, &db, api, kills, seed ^ i as u64).await;
        let name = db.name();
        db.cleanup().await?;
        result.map_err(|e| format!("{name} (FAULT_SEED={seed}): {e}"))?;
    }
    fx.log.shutdown().await;
    Ok(())
}

/// 5 SIGKILLs at random points of a 2,000-entry ingest; the store is exact
/// after each and at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_during_ingest() -> TestResult {
    kill_during_ingest_with(2_000, 5).await
}

/// The full size: 20 SIGKILLs during a 10^5-entry ingest (`FAULT_ENTRIES`,
/// `FAULT_KILLS` override). Run with `--release`, see docs/reliability.md.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "full size, minutes; run explicitly (docs/reliability.md, Faults)"]
async fn kill_during_ingest_full() -> TestResult {
    let n = env_u64("FAULT_ENTRIES", 100_000)?;
    let kills = env_u64("FAULT_KILLS", 20)?;
    kill_during_ingest_with(n, kills).await
}

// ---------------------------------------------------------------------------
// PostgreSQL down at the start, then restarted mid-ingest
// ---------------------------------------------------------------------------

/// A PostgreSQL cluster of this test's own (`ct-store/tests/pg.sh`),
/// stopped and deleted on drop.
struct OwnCluster {
    dir: PathBuf,
    url: String,
}

impl OwnCluster {
    fn pg_sh(args: &[&str]) -> Result<String, BoxErr> {
        // Durable commits: pg.sh's default (fsync and synchronous_commit
        // off, for speed) loses the last acknowledged commits in a crash,
        // which is not the fault under test.
        let out = Command::new("bash")
            .arg(repo_root().join("ct-store/tests/pg.sh"))
            .args(args)
            .env(
                "PGTEST_SERVER_OPTS",
                "-c fsync=on -c synchronous_commit=on -c full_page_writes=on",
            )
            .output()?;
        if !out.status.success() {
            return Err(format!(
                "pg.sh {args:?} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    fn start(dir: PathBuf) -> Result<OwnCluster, BoxErr> {
        // As root, pg.sh runs the server as `postgres`, which must be able
        // to reach DIR (a umask of 077 would make the parent unreadable).
        if let Some(parent) = dir.parent() {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o755))?;
        }
        let url = Self::pg_sh(&["start", &dir.to_string_lossy()])?;
        Ok(OwnCluster { dir, url })
    }

    fn run(&self, cmd: &str, extra: &[&str]) -> Result<(), BoxErr> {
        let dir = self.dir.to_string_lossy();
        let mut args = vec![cmd, &*dir];
        args.extend_from_slice(extra);
        Self::pg_sh(&args).map(drop)
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let _ = Self::pg_sh(&["stop", &self.dir.to_string_lossy()]);
    }
}

/// Polls `cond` every 50 ms for up to `secs`.
async fn wait_until<F, Fut>(what: &str, secs: u64, mut cond: F) -> Result<(), BoxErr>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !cond().await {
        if Instant::now() > deadline {
            return Err(format!("timed out after {secs} s waiting for {what}").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// The value of an unlabelled metric in a Prometheus text file.
fn metric(path: &Path, name: &str) -> Option<u64> {
    std::fs::read_to_string(path)
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// `ct-ingest run` while PostgreSQL is down (it retries with backoff, each
/// failure logged with its cause and counted), then PostgreSQL stopped like
/// a crash in the middle of the ingest: within 10 s `ct_ingest_store_up` is
/// 0 in the metrics file and the log names "Connection refused" (not a pool
/// timeout); started again 2 s later, the run completes, with exactly the
/// log's entries; the URL's password appears nowhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restart_mid_ingest() -> TestResult {
    if std::env::var("TEST_DATABASE_URL").map_or(true, |u| u.is_empty()) {
        if std::env::var_os("TEST_REQUIRE_POSTGRES").is_some() {
            return Err("TEST_REQUIRE_POSTGRES is set but TEST_DATABASE_URL is not".into());
        }
        eprintln!("postgres_restart_mid_ingest: TEST_DATABASE_URL unset, skipped");
        return Ok(());
    }
    let fx = Fixture::new(2_000).await?;
    let n = fx.n();
    let cluster = OwnCluster::start(fx.dir.path().join("pg"))?;
    // Trust authentication ignores the password; it is there to be hidden.
    let url = cluster.url.replacen(
        "postgres://postgres@",
        &format!("postgres://postgres:{PASSWORD}@"),
        1,
    );
    assert!(url.contains(PASSWORD), "{url}");
    // 40 requests a second of 20 entries: the ingest takes about 2.5 s.
    let config = fx.config(
        "restart",
        &url,
        LogKind::Rfc6962,
        "batch_size = 20\nconcurrency = 1\nrequests_per_second = 40\ncommit_every = 100",
        "[schedule]\nretry_seconds = 1\nretry_max_seconds = 2\n",
    )?;
    let metrics = fx.dir.path().join("restart.prom");
    let stderr = fx.dir.path().join("restart.stderr");
    let log_id = fx.log.log_id();

    // Down at the start: failed runs, retried after 1 s, 2 s, 2 s, ...
    cluster.run("pause", &[])?;
    let started = Instant::now();
    let mut child = spawn(
        &[
            "run",
            "--interval",
            "3600",
            "--metrics-file",
            &metrics.to_string_lossy(),
        ],
        &config,
        &stderr,
    )?;
    let result = async {
        wait_until("2 failed runs", 30, || async {
            metric(&metrics, "ct_ingest_runs_failed_total").unwrap_or(0) >= 2
        })
        .await?;
        let failed_while_down = metric(&metrics, "ct_ingest_runs_failed_total").unwrap_or(0);
        if metric(&metrics, "ct_ingest_up") != Some(0) {
            return Err::<_, BoxErr>("ct_ingest_up is not 0 while the database is down".into());
        }
        cluster.run("resume", &[])?;
        let resumed = Instant::now();

        // Stopped once a third is verified (ct-ingest migrates the empty
        // database first: it connects as the owner).
        wait_until("the schema migrated by ct-ingest", 30, || async {
            match Store::connect(&url).await {
                Ok(s) => {
                    s.close().await;
                    true
                }
                Err(_) => false,
            }
        })
        .await?;
        let store = Store::connect(&url).await?;
        wait_until("a third of the log verified", 60, || async {
            verified(&store, &log_id).await.unwrap_or(0) >= n / 3
        })
        .await?;
        let at_restart = verified(&store, &log_id).await?;
        store.close().await;
        if at_restart >= n {
            return Err(format!("the ingest ended before the restart ({at_restart})").into());
        }
        // Stopped like a crash in the middle of the pass: within 10 s the
        // metrics file says the store is down and the log names the cause.
        let before = std::fs::read_to_string(&stderr)?.len();
        cluster.run("pause", &[])?;
        let stopped = Instant::now();
        wait_until("ct_ingest_store_up 0 and the cause logged", 10, || async {
            let log = std::fs::read_to_string(&stderr).unwrap_or_default();
            metric(&metrics, "ct_ingest_store_up") == Some(0)
                && log[before.min(log.len())..]
                    .lines()
                    .any(|l| l.contains("store unreachable") && l.contains("Connection refused"))
        })
        .await?;
        let seen_after = stopped.elapsed();
        let log = std::fs::read_to_string(&stderr)?;
        if log[before..].contains("pool timed out") {
            return Err(format!("a pool timeout hid the cause:\n{}", &log[before..]).into());
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        cluster.run("resume", &[])?;
        let restarted = Instant::now();
        eprintln!(
            "postgres_restart_mid_ingest: outage seen in the metrics and the log {:.1} s after the stop",
            seen_after.as_secs_f64()
        );

        // The aborted run's commits stand; the next run verifies the rest.
        wait_until("the log fully verified and a finished run", 120, || async {
            let verified_all = match Store::connect(&url).await {
                Ok(store) => {
                    let v = verified(&store, &log_id).await.unwrap_or(0);
                    store.close().await;
                    v >= n
                }
                Err(_) => false,
            };
            verified_all
                && metric(&metrics, "ct_ingest_up") == Some(1)
                && metric(&metrics, "ct_ingest_store_up") == Some(1)
        })
        .await?;
        Ok((failed_while_down, resumed, at_restart, restarted))
    }
    .await;
    child.kill()?;
    child.wait()?;
    let (failed_while_down, resumed, at_restart, restarted) = result.map_err(|e| {
        let log = std::fs::read_to_string(&stderr).unwrap_or_default();
        let prom = std::fs::read_to_string(&metrics).unwrap_or_default();
        format!("{e}\n--- ct-ingest stderr:\n{log}\n--- metrics:\n{prom}")
    })?;
    let v = check_store(&url, &fx).await?;
    assert_eq!(v, n);

    let log = std::fs::read_to_string(&stderr)?;
    let prom = std::fs::read_to_string(&metrics)?;
    assert!(!log.contains(PASSWORD), "password in the log lines");
    assert!(!prom.contains(PASSWORD));
    let failures: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("run failed; retrying"))
        .collect();
    assert!(failures.len() as u64 >= failed_while_down, "{log}");
    for line in &failures {
        assert!(line.contains("error=store: database error: "), "{line}");
        assert!(line.matches("Connection refused").count() <= 1, "{line}");
    }
    if std::env::var_os("FAULT_VERBOSE").is_some() {
        eprintln!("--- ct-ingest stderr:\n{log}");
    }
    let refused_logs = log.lines().filter(|l| l.contains("log refused")).count();
    let mut causes: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("run failed; retrying") || l.contains("log refused"))
        .filter_map(|l| l.split_once("error=").map(|(_, c)| c))
        .collect();
    causes.sort_unstable();
    causes.dedup();
    eprintln!(
        "postgres_restart_mid_ingest: {n} entries; PostgreSQL down at the start: {failed_while_down} \
         failed runs in {:.1} s (retries after 1, 2 s); resumed, then restarted (down 2 s) at \
         verified {at_restart}; completed {:.1} s after the resume, {:.1} s after the restart; \
         {} failed runs, {} log refusals, {} runs in all; store exact; causes logged: {causes:#?}",
        resumed.duration_since(started).as_secs_f64(),
        resumed.elapsed().as_secs_f64(),
        restarted.elapsed().as_secs_f64(),
        metric(&metrics, "ct_ingest_runs_failed_total").unwrap_or(0),
        refused_logs,
        metric(&metrics, "ct_ingest_runs_total").unwrap_or(0),
    );
    drop(cluster);
    fx.log.shutdown().await;
    Ok(())
}

// ---------------------------------------------------------------------------
// SQLite on a full filesystem
// ---------------------------------------------------------------------------

/// The SQLite store's filesystem fills up mid-ingest: the run fails with a
/// clear error (storage full), the store stays intact (the integrity check
/// passes and it holds exactly `[0, verified)`), and once there is space
/// again the next run completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_disk_full() -> TestResult {
    let base = tempfile::tempdir()?;
    let fs = match TinyFs::mount(base.path().join("fs"), "256k") {
        Ok(fs) => fs,
        Err(e) => {
            if std::env::var("TEST_REQUIRE_FAULTS").is_ok_and(|v| v == "1") {
                return Err(
                    format!("TEST_REQUIRE_FAULTS=1 but tmpfs cannot be mounted: {e}").into(),
                );
            }
            eprintln!(
                "sqlite_disk_full: skipped: cannot mount a tmpfs ({e}); \
                 needs root or CAP_SYS_ADMIN (TEST_REQUIRE_FAULTS=1 makes this a failure)"
            );
            return Ok(());
        }
    };
    let fx = Fixture::new(2_000).await?;
    let n = fx.n();
    let db = fs.0.join("ct.db");
    let url = format!("sqlite://{}?mode=rwc", db.display());
    let config = fx.config(
        "full",
        &url,
        LogKind::Rfc6962,
        "batch_size = 100\ncommit_every = 200",
        "",
    )?;
    let stderr = fx.dir.path().join("full.stderr");
    let mut child = spawn(&["once"], &config, &stderr)?;
    let status = wait_exit(&mut child, Duration::from_secs(120))?;
    let log = std::fs::read_to_string(&stderr)?;
    assert!(
        !status.success(),
        "the ingest fit in the tiny filesystem:\n{log}"
    );
    assert!(
        log.contains("database storage full") && log.contains("database or disk is full"),
        "{log}"
    );

    // Intact while still full: the integrity check passes, and the store
    // holds exactly the verified prefix.
    let integrity = |url: String| async move {
        let pool = sqlx::SqlitePool::connect(&url).await?;
        let r: String = sqlx::query_scalar("PRAGMA integrity_check")
            .fetch_one(&pool)
            .await?;
        pool.close().await;
        Ok::<_, BoxErr>(r)
    };
    assert_eq!(integrity(url.clone()).await?, "ok");
    let v_full = check_store(&url, &fx).await?;
    assert!(v_full < n, "{v_full}");

    // Space again: the next run completes.
    fs.resize("64m")?;
    let mut child = spawn(&["once"], &config, &stderr)?;
    let status = wait_exit(&mut child, Duration::from_secs(120))?;
    assert!(status.success(), "{}", std::fs::read_to_string(&stderr)?);
    assert_eq!(integrity(url.clone()).await?, "ok");
    assert_eq!(check_store(&url, &fx).await?, n);
    let refusal = log
        .lines()
        .find(|l| l.contains("log refused"))
        .unwrap_or_default();
    eprintln!(
        "sqlite_disk_full: {n} entries into a 256 KiB tmpfs: failed at verified {v_full} with \
         {refusal:?}; integrity_check ok and the store exact while full; after resizing to 64 MiB \
         the next run completed ({n} entries, exact)"
    );
    drop(fs);
    fx.log.shutdown().await;
    Ok(())
}

/// A wrong password is not retried: `ct-ingest run` exits non-zero with
/// the server's message, and without the password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_password_ends_run() -> TestResult {
    let Some(roles) = ct_store::testing::Roles::create("ingest_auth").await? else {
        return Ok(());
    };
    let result = async {
        let fx = Fixture::new(10).await?;
        let url = roles
            .ingest_url
            .replace(ct_store::testing::Roles::PASSWORD, PASSWORD);
        let config = fx.config(
            "auth",
            &url,
            LogKind::Rfc6962,
            "",
            "[schedule]\nretry_seconds = 1\nretry_max_seconds = 1\n",
        )?;
        let stderr = fx.dir.path().join("auth.stderr");
        let metrics = fx.dir.path().join("auth.prom");
        let mut child = spawn(
            &[
                "run",
                "--interval",
                "3600",
                "--metrics-file",
                &metrics.to_string_lossy(),
            ],
            &config,
            &stderr,
        )?;
        let status = wait_exit(&mut child, Duration::from_secs(60))?;
        let log = std::fs::read_to_string(&stderr)?;
        assert!(!status.success(), "{log}");
        assert!(
            log.contains("password authentication failed for user"),
            "{log}"
        );
        assert!(!log.contains("retrying"), "retried:\n{log}");
        assert!(!log.contains(PASSWORD), "{log}");
        assert_eq!(metric(&metrics, "ct_ingest_store_up"), Some(0));
        fx.log.shutdown().await;
        Ok::<(), BoxErr>(())
    }
    .await;
    roles.cleanup().await?;
    result
}
