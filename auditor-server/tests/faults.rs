//! Faults injected into the real `auditor-server` binary and its epoch
//! directory:
//!
//! * `build_killed_at_random_points`: `build-epoch`, and `serve` building
//!   on a schedule, killed with SIGKILL at random points, 10 times; every
//!   restart serves the newest published epoch (checked bit by bit against
//!   the filters built in the clear) and removes the `.building-*`
//!   directories the killed builders left.
//! * `damaged_epoch_files_are_refused`: truncated, bit-flipped and swapped
//!   (between two databases, between two epochs) bitmap files and
//!   manifests, an epoch directory copied under another id, and damaged or
//!   swapped NTT hint files. Bitmaps and manifests are refused with an
//!   error naming the file, and the previous epoch is served; a hint is
//!   refused with a warning naming it and recomputed from the (verified)
//!   bitmap. No case crashes the server or serves a wrong bit.
//! * `epoch_dir_disk_full`: the epoch directory on a small tmpfs (needs
//!   root or `CAP_SYS_ADMIN`; skipped otherwise unless
//!   `TEST_REQUIRE_FAULTS=1`): the build fails with an error naming the
//!   file and "No space left on device", leaves nothing behind, and the
//!   running server goes on serving the previous epoch; once there is
//!   space, the next build is published and served.
//!
//! `FAULT_SEED=<n>` repeats a run's random choices (the seed is printed).
#![cfg(unix)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use test_support::{rng_from_env, Rng, TinyFs};

use audit_proto::api::OCTET_STREAM;
use audit_proto::Manifest;
use ct_store::{Commit, Entry, LogKind, LogMeta, Store};
use pir_core::client::Client;
use pir_core::params::DbShape;
use pir_core::sampler::PublicSeed;
use pir_core::wire::Response;
use sha2::{Digest, Sha256};

mod common;
use common::{BoxErr, Served, TestResult};

/// A SQLite store holding `n` synthetic active entries of one log; returns
/// its URL and the entries' leaf hashes.
async fn synthetic_store(dir: &Path, n: u64) -> Result<(String, Vec<[u8; 32]>), BoxErr> {
    let url = format!("sqlite://{}?mode=rwc", dir.join("ct.db").display());
    let store = Store::connect_and_migrate(&url).await?;
    let log_id = [7u8; 32];
    store
        .upsert_log(&LogMeta {
            log_id: log_id.into(),
            url: "http://faults.invalid/".into(),
            mmd_s: 86_400,
            kind: LogKind::Rfc6962,
        })
        .await?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let hashes: Vec<[u8; 32]> = (0..n)
        .map(|i| {
            Sha256::new()
                .chain_update(b"auditor-faults")
                .chain_update(i.to_le_bytes())
                .finalize()
                .into()
        })
        .collect();
    let entries: Vec<Entry> = hashes
        .iter()
        .enumerate()
        .map(|(i, h)| Entry {
            leaf_index: i as u64,
            leaf_hash: (*h).into(),
            sct_timestamp_ms: (now - 3600) * 1000,
            not_after: now as i64 + 90 * 86_400,
        })
        .collect();
    store
        .commit(
            Commit::new(&log_id.into(), n, &[0; 32])
                .entries(&entries)
                .ingested_until_ms((now - 3600) * 1000),
        )
        .await?;
    store.close().await;
    Ok((url, hashes))
}

/// The binary ([`common::auditor`]) with the given configuration file,
/// store and epoch directory.
fn auditor(config: &Path, db_url: &str, epochs: &Path) -> Command {
    let mut cmd = common::auditor();
    cmd.arg("--config")
        .arg(config)
        .args(["--database-url", db_url, "--epoch-dir"])
        .arg(epochs);
    cmd
}

/// A configuration file: 16 filters (tiny builds) grouped into databases
/// of `db_bits_target` bits, no build at start-up unless `build_if_missing`,
/// reloads every second, the given schedule.
fn write_config(
    dir: &Path,
    name: &str,
    db_bits_target: u64,
    build_if_missing: bool,
    interval: Option<u64>,
) -> Result<PathBuf, BoxErr> {
    let path = dir.join(format!("{name}.toml"));
    let interval = interval.map_or(String::new(), |s| format!("interval_seconds = {s}\n"));
    std::fs::write(
        &path,
        format!(
            "[epoch]\nfilters = 16\nk = 8\ndb_bits_target = {db_bits_target}\nkeep = 3\n\
             [schedule]\nbuild_if_missing = {build_if_missing}\nreload_seconds = 1\n{interval}"
        ),
    )?;
    Ok(path)
}

/// `serve` on 127.0.0.1 port 0; returns it once it listens, with its
/// address.
fn serve(cmd: Command) -> Result<(Served, SocketAddr), BoxErr> {
    let mut cmd = cmd;
    cmd.args(["serve", "--bind", "127.0.0.1:0"]);
    let mut p = Served::spawn(cmd)?;
    let line = p.wait_for("auditor-server listening", Duration::from_secs(120))?;
    Ok((p, common::listening_addr(&line)?))
}

/// Runs `build-epoch` to completion; returns (success, stderr).
fn build_epoch(cmd: Command) -> Result<(bool, String), BoxErr> {
    let mut cmd = cmd;
    let out = cmd.arg("build-epoch").output()?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// Published epoch ids in `epochs`, ascending.
fn published(epochs: &Path) -> Result<Vec<u64>, BoxErr> {
    let mut ids = Vec::new();
    for e in std::fs::read_dir(epochs)? {
        let name = e?.file_name().to_string_lossy().into_owned();
        if let Some(id) = name.strip_prefix("epoch-") {
            ids.push(id.parse()?);
        }
    }
    ids.sort_unstable();
    Ok(ids)
}

/// Names in `epochs` starting with `.building-`.
fn leftovers(epochs: &Path) -> Result<Vec<String>, BoxErr> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(epochs)? {
        let name = e?.file_name().to_string_lossy().into_owned();
        if name.starts_with(".building-") {
            out.push(name);
        }
    }
    out.sort();
    Ok(out)
}

fn epoch_path(epochs: &Path, id: u64) -> PathBuf {
    epochs.join(format!("epoch-{id:012}"))
}

/// HTTP to a served auditor.
struct Http {
    addr: SocketAddr,
    http: reqwest::Client,
}

impl Http {
    fn new(addr: SocketAddr) -> Result<Http, BoxErr> {
        Ok(Http {
            addr,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()?,
        })
    }

    /// The served epoch id (`/healthz`), `None` while there is none.
    async fn health_epoch(&self) -> Result<Option<u64>, BoxErr> {
        let resp = self
            .http
            .get(format!("http://{}/healthz", self.addr))
            .send()
            .await?;
        let v: serde_json::Value = serde_json::from_slice(&resp.bytes().await?)?;
        Ok(v["epoch"].as_u64())
    }

    async fn manifest(&self) -> Result<(Manifest, Vec<u8>), BoxErr> {
        let resp = self
            .http
            .get(format!("http://{}/v1/manifest", self.addr))
            .send()
            .await?;
        if resp.status() != 200 {
            return Err(format!("manifest: HTTP {}", resp.status()).into());
        }
        let bytes = resp.bytes().await?.to_vec();
        Ok((Manifest::from_json(&bytes)?, bytes))
    }

    /// Privately reads bit `bit` of filter `filter`.
    async fn read_bit(&self, m: &Manifest, filter: u32, bit: u64) -> Result<bool, BoxErr> {
        let (db, bit) = m.locate(filter, bit)?;
        let spec = &m.dbs[db as usize];
        let params = pir_core::params::by_id(m.pir.param_set)?;
        let shape = DbShape {
            ell1: spec.rows as usize,
            ell2: spec.cols as usize,
        };
        let client = Client::new(params, shape, PublicSeed(spec.seed))?;
        let (q, key, b) = client.query_bit(spec.bits, bit)?;
        let resp = self
            .http
            .post(format!(
                "http://{}/v1/epochs/{}/dbs/{db}/query",
                self.addr, m.epoch
            ))
            .header("content-type", OCTET_STREAM)
            .body(q.to_bytes())
            .send()
            .await?;
        let status = resp.status();
        let bytes = resp.bytes().await?;
        if status != 200 {
            return Err(format!("HTTP {status}: {}", String::from_utf8_lossy(&bytes)).into());
        }
        Ok(client.extract_bit(&key, &Response::from_bytes(&bytes)?, b)?)
    }

    /// Waits until epoch `id` is served.
    async fn wait_epoch(&self, id: u64, limit: Duration) -> TestResult {
        let deadline = Instant::now() + limit;
        loop {
            let now = self.health_epoch().await.ok().flatten();
            if now == Some(id) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(
                    format!("epoch {id} not served within {limit:?} (serving {now:?})").into(),
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Checks that the served epoch is `id`, that its manifest is the one
    /// on disk, and that `n` bits of every database (at members' positions
    /// and at random ones) equal the filters built in the clear from
    /// `hashes`.
    async fn check_serves(
        &self,
        epochs: &Path,
        id: u64,
        hashes: &[[u8; 32]],
        rng: &mut Rng,
        n: usize,
    ) -> TestResult {
        assert_eq!(self.health_epoch().await?, Some(id), "healthz epoch");
        let (m, bytes) = self.manifest().await?;
        assert_eq!(m.epoch, id);
        let on_disk = std::fs::read(epoch_path(epochs, id).join("manifest.json"))?;
        assert_eq!(bytes, on_disk, "served manifest differs from disk");
        for db in &m.dbs {
            for i in 0..n {
                let f = db.first_filter + rng.below(u64::from(db.filters)) as u32;
                let bit = if i % 2 == 0 {
                    let h = &hashes[rng.below(hashes.len() as u64) as usize];
                    m.filter.bit(f, &(*h).into())?
                } else {
                    rng.below(m.filter.bits)
                };
                let want = hashes
                    .iter()
                    .any(|h| m.filter.bit(f, &(*h).into()).is_ok_and(|b| b == bit));
                let got = self.read_bit(&m, f, bit).await?;
                assert_eq!(
                    got, want,
                    "epoch {id}, filter {f}, bit {bit}: served {got}, clear filter {want}"
                );
            }
        }
        Ok(())
    }
}

fn copy_dir(from: &Path, to: &Path) -> TestResult {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        std::fs::copy(e.path(), to.join(e.file_name()))?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn build_killed_at_random_points() -> TestResult {
    const KILLS: usize = 10;
    let mut rng = rng_from_env("build_killed_at_random_points");
    let tmp = tempfile::tempdir()?;
    let (db_url, hashes) = synthetic_store(tmp.path(), 3000).await?;
    let epochs = tmp.path().join("epochs");
    // Two databases per epoch, so a kill can land between their files.
    let config = write_config(tmp.path(), "restart", 16 * 8 * 3000 / 2, true, None)?;
    let scheduled = write_config(tmp.path(), "scheduled", 16 * 8 * 3000 / 2, true, Some(1))?;

    // A clean build first: epoch 1, and how long a build takes.
    let t = Instant::now();
    let (ok, stderr) = build_epoch(auditor(&config, &db_url, &epochs))?;
    let build_s = t.elapsed();
    assert!(ok, "first build failed: {stderr}");
    assert_eq!(published(&epochs)?, vec![1]);

    let mut summary = Vec::new();
    for kill in 1..=KILLS {
        let before = published(&epochs)?;
        // Odd kills: `build-epoch`, at a random time in [0, 1.3 × build);
        // even kills: `serve` building every second, at a random time in
        // its first 3 builds (its start-up load included).
        let (what, delay) = if kill % 2 == 1 {
            let delay = Duration::from_millis(rng.below(build_s.as_millis() as u64 * 13 / 10));
            let mut cmd = auditor(&config, &db_url, &epochs);
            cmd.arg("build-epoch");
            let mut p = Served::spawn(cmd)?;
            std::thread::sleep(delay);
            p.kill()?;
            ("build-epoch", delay)
        } else {
            let delay = Duration::from_millis(rng.below(build_s.as_millis() as u64 * 3));
            let (mut p, _) = serve(auditor(&scheduled, &db_url, &epochs))?;
            std::thread::sleep(delay);
            p.kill()?;
            ("serve (scheduled builds)", delay)
        };
        let after = published(&epochs)?;
        let left = leftovers(&epochs)?;
        let newest = *after.last().ok_or("no epoch left")?;

        // Restart: the newest published epoch is served, and what the
        // killed builder left is gone before the server listens.
        let (mut p, addr) = serve(auditor(&config, &db_url, &epochs))?;
        let http = Http::new(addr)?;
        http.wait_epoch(newest, Duration::from_secs(60)).await?;
        let after_restart = leftovers(&epochs)?;
        assert!(
            after_restart.is_empty(),
            "kill {kill}: left over after the restart: {after_restart:?}"
        );
        http.check_serves(&epochs, newest, &hashes, &mut rng, 4)
            .await?;
        let log = p.drain();
        assert!(!log.contains("refused"), "kill {kill}: {log}");
        assert!(!log.contains("panicked"), "kill {kill}: {log}");
        if !left.is_empty() {
            assert!(
                log.contains("removed a build directory its builder left behind"),
                "kill {kill}: {left:?} removed without a log line:\n{log}"
            );
        }
        p.kill()?;
        summary.push(format!(
            "  kill {kill:2}: {what:<24} SIGKILL after {:>5} ms; published {before:?} -> {after:?}; \
             left behind {left:?}; restart served epoch {newest}, bits exact, leftovers removed",
            delay.as_millis()
        ));
    }
    eprintln!(
        "build_killed_at_random_points: 3000 entries, 2 databases per epoch, a clean build takes {} ms; \
         {KILLS} kills:\n{}",
        build_s.as_millis(),
        summary.join("\n")
    );
    Ok(())
}

/// How an epoch directory is damaged.
#[derive(Clone, Copy, Debug)]
enum Damage {
    /// Cut to half its length.
    Truncate(&'static str),
    /// One bit flipped in the middle.
    FlipBit(&'static str),
    /// Exchanged with another file of the same epoch.
    SwapWithin(&'static str, &'static str),
    /// Replaced by the same file of epoch 3.
    FromOtherEpoch(&'static str),
    /// The whole directory of epoch 3 copied as epoch 2.
    WholeDirOfOtherEpoch,
}

impl Damage {
    fn apply(self, dir: &Path, other: &Path) -> TestResult {
        match self {
            Damage::Truncate(f) => {
                let p = dir.join(f);
                let b = std::fs::read(&p)?;
                std::fs::write(&p, &b[..b.len() / 2])?;
            }
            Damage::FlipBit(f) => {
                let p = dir.join(f);
                let mut b = std::fs::read(&p)?;
                let i = b.len() / 2;
                b[i] ^= 0x10;
                std::fs::write(&p, &b)?;
            }
            Damage::SwapWithin(a, b) => {
                let (pa, pb) = (dir.join(a), dir.join(b));
                let (ba, bb) = (std::fs::read(&pa)?, std::fs::read(&pb)?);
                std::fs::write(&pa, bb)?;
                std::fs::write(&pb, ba)?;
            }
            Damage::FromOtherEpoch(f) => {
                std::fs::copy(other.join(f), dir.join(f))?;
            }
            Damage::WholeDirOfOtherEpoch => {
                std::fs::remove_dir_all(dir)?;
                copy_dir(other, dir)?;
            }
        }
        Ok(())
    }

    /// The file the error must name.
    fn file(self) -> &'static str {
        match self {
            Damage::Truncate(f) | Damage::FlipBit(f) | Damage::FromOtherEpoch(f) => f,
            Damage::SwapWithin(a, _) => a,
            Damage::WholeDirOfOtherEpoch => "manifest.json",
        }
    }

    /// A damaged hint is refused and recomputed; the epoch is served.
    fn only_hints(self) -> bool {
        self.file().ends_with(".hint")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_epoch_files_are_refused() -> TestResult {
    let mut rng = rng_from_env("damaged_epoch_files_are_refused");
    let tmp = tempfile::tempdir()?;
    let (db_url, hashes) = synthetic_store(tmp.path(), 200).await?;
    // 16 filters of 8·200 bits in 4 databases of 4 filters (equal sizes).
    let config = write_config(tmp.path(), "auditor", 4 * 8 * 200, false, None)?;
    let src = tmp.path().join("src");
    for _ in 0..3 {
        let (ok, stderr) = build_epoch(auditor(&config, &db_url, &src))?;
        assert!(ok, "build failed: {stderr}");
    }
    assert_eq!(published(&src)?, vec![1, 2, 3]);
    let m2 = Manifest::from_json(&std::fs::read(epoch_path(&src, 2).join("manifest.json"))?)?;
    assert_eq!(m2.dbs.len(), 4, "{:?}", m2.dbs);

    let cases = [
        Damage::Truncate("db-0001.bits"),
        Damage::FlipBit("db-0002.bits"),
        Damage::SwapWithin("db-0000.bits", "db-0003.bits"),
        Damage::FromOtherEpoch("db-0001.bits"),
        Damage::Truncate("manifest.json"),
        Damage::FlipBit("manifest.json"),
        Damage::FromOtherEpoch("manifest.json"),
        Damage::WholeDirOfOtherEpoch,
        Damage::Truncate("db-0000.hint"),
        Damage::FlipBit("db-0001.hint"),
        Damage::SwapWithin("db-0002.hint", "db-0003.hint"),
        Damage::FromOtherEpoch("db-0000.hint"),
    ];
    let mut summary = Vec::new();
    for damage in cases {
        // Epoch 1 intact, epoch 2 damaged: a restart must serve epoch 1
        // (or, for a hint, epoch 2 with the hint recomputed).
        let live = tmp.path().join(format!("live-{}", summary.len()));
        copy_dir(&epoch_path(&src, 1), &epoch_path(&live, 1))?;
        copy_dir(&epoch_path(&src, 2), &epoch_path(&live, 2))?;
        damage.apply(&epoch_path(&live, 2), &epoch_path(&src, 3))?;
        let file = epoch_path(&live, 2).join(damage.file());
        let (mut p, addr) = serve(auditor(&config, &db_url, &live))?;
        let http = Http::new(addr)?;
        let line = if damage.only_hints() {
            let line = p.find("hint unusable", Duration::from_secs(60))?;
            http.wait_epoch(2, Duration::from_secs(60)).await?;
            http.check_serves(&live, 2, &hashes, &mut rng, 4).await?;
            line
        } else {
            let line = p.find("epoch refused", Duration::from_secs(60))?;
            http.wait_epoch(1, Duration::from_secs(60)).await?;
            http.check_serves(&live, 1, &hashes, &mut rng, 2).await?;
            line
        };
        assert!(
            line.contains(&file.display().to_string()),
            "{damage:?}: the error does not name {}: {line}",
            file.display()
        );
        let log = p.drain();
        assert!(!log.contains("panicked"), "{damage:?}: {log}");
        assert_eq!(p.child.try_wait()?, None, "{damage:?}: the server exited");
        p.kill()?;
        let why = line
            .split_once("error=")
            .or_else(|| line.split_once("why="))
            .map_or(line.as_str(), |(_, w)| w)
            .replace(&live.display().to_string(), "…");
        summary.push(format!("  {damage:?}: {why}"));
    }

    // A running server: a damaged epoch appearing next to the served one
    // is refused at the reload, the served one stays, and the next good
    // epoch is served.
    let live = tmp.path().join("live-running");
    copy_dir(&epoch_path(&src, 1), &epoch_path(&live, 1))?;
    let (mut p, addr) = serve(auditor(&config, &db_url, &live))?;
    let http = Http::new(addr)?;
    http.wait_epoch(1, Duration::from_secs(60)).await?;
    let staged = live.join("staging");
    copy_dir(&epoch_path(&src, 2), &staged)?;
    Damage::FlipBit("db-0003.bits").apply(&staged, &src)?;
    std::fs::rename(&staged, epoch_path(&live, 2))?;
    let line = p.wait_for("epoch refused", Duration::from_secs(30))?;
    assert!(
        line.contains("db-0003.bits") && line.contains("checksum mismatch"),
        "{line}"
    );
    http.check_serves(&live, 1, &hashes, &mut rng, 2).await?;
    copy_dir(&epoch_path(&src, 3), &staged)?;
    std::fs::rename(&staged, epoch_path(&live, 3))?;
    http.wait_epoch(3, Duration::from_secs(30)).await?;
    http.check_serves(&live, 3, &hashes, &mut rng, 2).await?;
    let log = p.drain();
    assert!(!log.contains("panicked"), "{log}");
    eprintln!(
        "damaged_epoch_files_are_refused: epoch 2 damaged next to an intact epoch 1, server restarted:\n{}\n  \
         running server: epoch 2 with a flipped bit in db-0003.bits refused at the reload, epoch 1 served, then epoch 3",
        summary.join("\n")
    );
    Ok(())
}

fn dir_bytes(dir: &Path) -> Result<u64, BoxErr> {
    let mut n = 0;
    for e in std::fs::read_dir(dir)? {
        n += e?.metadata()?.len();
    }
    Ok(n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn epoch_dir_disk_full() -> TestResult {
    let mut rng = rng_from_env("epoch_dir_disk_full");
    let tmp = tempfile::tempdir()?;
    let (db_url, hashes) = synthetic_store(tmp.path(), 2000).await?;
    let config = write_config(tmp.path(), "auditor", 16 * 8 * 2000 / 2, false, None)?;
    // An epoch built elsewhere gives the size of one.
    let src = tmp.path().join("src");
    let (ok, stderr) = build_epoch(auditor(&config, &db_url, &src))?;
    assert!(ok, "{stderr}");
    let one = dir_bytes(&epoch_path(&src, 1))?;
    // Room for epoch 1 and a third of another.
    let size_kib = (one + one / 3) / 1024 + 8;
    let fs = match TinyFs::mount(tmp.path().join("fs"), &format!("{size_kib}k")) {
        Ok(fs) => fs,
        Err(e) => {
            if std::env::var("TEST_REQUIRE_FAULTS").is_ok_and(|v| v == "1") {
                return Err(
                    format!("TEST_REQUIRE_FAULTS=1 but tmpfs cannot be mounted: {e}").into(),
                );
            }
            eprintln!(
                "epoch_dir_disk_full: skipped: cannot mount a tmpfs ({e}); needs root or \
                 CAP_SYS_ADMIN (TEST_REQUIRE_FAULTS=1 makes this a failure)"
            );
            return Ok(());
        }
    };
    let epochs = fs.0.join("epochs");
    copy_dir(&epoch_path(&src, 1), &epoch_path(&epochs, 1))?;
    let (mut p, addr) = serve(auditor(&config, &db_url, &epochs))?;
    let http = Http::new(addr)?;
    http.wait_epoch(1, Duration::from_secs(60)).await?;

    let (ok, stderr) = build_epoch(auditor(&config, &db_url, &epochs))?;
    assert!(!ok, "the build succeeded on a full disk: {stderr}");
    let err = stderr
        .lines()
        .find(|l| l.contains("No space left on device"))
        .ok_or_else(|| format!("no ENOSPC error: {stderr}"))?
        .to_owned();
    assert!(
        err.contains(&epochs.join(".building-000000000002").display().to_string()),
        "the error names no file of the build: {err}"
    );
    assert_eq!(
        published(&epochs)?,
        vec![1],
        "a partial epoch was published"
    );
    assert!(leftovers(&epochs)?.is_empty(), "{:?}", leftovers(&epochs)?);
    // The reload poll runs every second: give it three.
    tokio::time::sleep(Duration::from_secs(3)).await;
    http.check_serves(&epochs, 1, &hashes, &mut rng, 2).await?;

    // Space again: the next build is published and served.
    fs.resize("64m")?;
    let (ok, stderr) = build_epoch(auditor(&config, &db_url, &epochs))?;
    assert!(ok, "{stderr}");
    http.wait_epoch(2, Duration::from_secs(30)).await?;
    http.check_serves(&epochs, 2, &hashes, &mut rng, 2).await?;
    let log = p.drain();
    assert!(
        !log.contains("refused") && !log.contains("panicked"),
        "{log}"
    );
    p.kill()?;
    eprintln!(
        "epoch_dir_disk_full: epoch dir on a {size_kib} KiB tmpfs (epoch 1: {one} bytes): the build failed with \
         {:?}; nothing published or left behind; epoch 1 served throughout; after resizing to 64 MiB epoch 2 \
         was built and served",
        err.split_once("Error: ").map_or(err.as_str(), |(_, e)| e)
    );
    Ok(())
}
