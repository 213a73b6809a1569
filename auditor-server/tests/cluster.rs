//! A local sharded cluster on 127.0.0.1: three `auditor-server serve`
//! processes (the real binary) with a local-directory object store, and
//! the coordinator's `epoch prepare` / `epoch publish`. It shows that
//! audits routed through the served manifest read exactly the bits one
//! single server gives for the same seeds; that a shard killed (SIGKILL)
//! in the middle of its build keeps the new epoch unpublished while the
//! old one still answers, and that the retry publishes it once the shard
//! is back; that a restarted shard serves its persisted epoch; and that a
//! misrouted query gets 421 (which the client library follows once).
//! Tiny parameters: the insecure toy set, 12 filters in 6 databases.
#![cfg(unix)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use audit_proto::api::{ErrorBody, OCTET_STREAM};
use audit_proto::Manifest;
use auditor_server::plan::EpochSpec;
use auditor_server::service::Service;
use browser_client::net::Auditor;
use browser_client::probe::Prober;
use common::{auditor, free_port, same_bits, BoxErr, Pipeline, Served, TestResult};

const SHARDS: u32 = 3;
const FILTERS: u32 = 12;
const ENTRIES: usize = 40;
/// Long enough for any step of the test on a loaded machine.
const WAIT: Duration = Duration::from_secs(60);

struct Cluster {
    p: Pipeline,
    config: PathBuf,
    objects: PathBuf,
    ports: Vec<u16>,
    urls: Vec<String>,
    http: reqwest::Client,
}

impl Cluster {
    async fn new() -> Result<Cluster, BoxErr> {
        let p = Pipeline::new(ENTRIES).await?;
        let config = common::toy_fleet_config(p.dir.path(), ENTRIES, FILTERS)?;
        let ports = (0..SHARDS)
            .map(|_| free_port())
            .collect::<Result<Vec<_>, _>>()?;
        let urls = ports
            .iter()
            .map(|p| format!("http://127.0.0.1:{p}"))
            .collect();
        Ok(Cluster {
            objects: p.dir.path().join("objects"),
            p,
            config,
            ports,
            urls,
            http: reqwest::Client::new(),
        })
    }

    fn object_store(&self) -> String {
        format!("file://{}", self.objects.display())
    }

    fn epoch_objects(&self, id: u64) -> PathBuf {
        self.objects.join(format!("epochs/{id:012}"))
    }

    fn epoch_dir(&self, shard: u32) -> PathBuf {
        self.p.dir.path().join(format!("shard-{shard}"))
    }

    fn with_cluster_env(&self, cmd: &mut Command) {
        cmd.arg("--config")
            .arg(&self.config)
            .args(["--object-store", &self.object_store()])
            .env("AUDITOR_SHARD_COUNT", SHARDS.to_string())
            .env("AUDITOR_SHARD_URLS", self.urls.join(","));
    }

    /// Starts shard `i` (with extra environment `env`); waits until it
    /// listens.
    fn shard(&self, i: u32, env: &[(&str, &str)]) -> Result<Served, BoxErr> {
        let mut cmd = auditor();
        self.with_cluster_env(&mut cmd);
        cmd.args(["serve", "--shard-index", &i.to_string()])
            .args(["--bind", &format!("127.0.0.1:{}", self.ports[i as usize])])
            .arg("--epoch-dir")
            .arg(self.epoch_dir(i));
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut s = Served::spawn(cmd)?;
        s.wait_for("auditor-server listening", WAIT)?;
        Ok(s)
    }

    /// A coordinator command (`epoch prepare`, `epoch publish`).
    fn coordinator_cmd(&self, args: &[&str]) -> Command {
        let mut cmd = auditor();
        self.with_cluster_env(&mut cmd);
        cmd.args(["--database-url", &self.p.db_url])
            .arg("--epoch-dir")
            .arg(self.p.dir.path().join("coordinator"))
            .arg("epoch")
            .args(args);
        cmd
    }

    /// Runs a coordinator command.
    fn coordinator(&self, args: &[&str]) -> Result<Output, BoxErr> {
        Ok(self.coordinator_cmd(args).output()?)
    }

    fn prepare(&self) -> Result<serde_json::Value, BoxErr> {
        let out = self.coordinator(&["prepare"])?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "epoch prepare: {stderr}");
        Ok(serde_json::from_slice(&out.stdout)?)
    }

    fn publish(&self, timeout_s: u64) -> Result<(Option<i32>, String), BoxErr> {
        let t = timeout_s.to_string();
        let out = self.coordinator(&["publish", "--timeout-seconds", &t, "--poll-seconds", "1"])?;
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!stderr.contains("panicked"), "{stderr}");
        Ok((out.status.code(), stderr))
    }

    /// Waits until shard `i`'s `/readyz` reports epoch `epoch`.
    async fn ready(&self, i: u32, epoch: u64) -> Result<serde_json::Value, BoxErr> {
        let deadline = Instant::now() + WAIT;
        let url = format!("{}/readyz", self.urls[i as usize]);
        let mut last = String::new();
        while Instant::now() < deadline {
            if let Ok(r) = self.http.get(&url).send().await {
                let ok = r.status() == 200;
                last = r.text().await.unwrap_or_default();
                if ok {
                    let v: serde_json::Value = serde_json::from_str(&last)?;
                    if v["epoch"] == epoch {
                        return Ok(v);
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(format!("shard {i} does not serve epoch {epoch}: {last}").into())
    }

    async fn manifest(&self, i: u32) -> Result<(Vec<u8>, Manifest), BoxErr> {
        let r = self
            .http
            .get(format!("{}/v1/manifest", self.urls[i as usize]))
            .send()
            .await?;
        assert_eq!(r.status(), 200);
        let b = r.bytes().await?.to_vec();
        let m = Manifest::from_json(&b)?;
        Ok((b, m))
    }

    /// An unlabelled metric of shard `i`.
    async fn metric(&self, i: u32, name: &str) -> Result<f64, BoxErr> {
        let text = self
            .http
            .get(format!("{}/metrics", self.urls[i as usize]))
            .send()
            .await?
            .text()
            .await?;
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
            .ok_or_else(|| format!("no {name} in:\n{text}").into())
    }

    /// Waits until shard `i`'s metric `name` equals `want`.
    async fn metric_is(&self, i: u32, name: &str, want: f64) -> TestResult {
        let deadline = Instant::now() + WAIT;
        loop {
            let got = self.metric(i, name).await?;
            if got == want {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("shard {i}: {name} = {got}, expected {want}").into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The filters whose databases shard `shard` serves (2 filters per database).
fn filters_of(m: &Manifest, shards: &[u32]) -> Vec<u32> {
    (0..FILTERS)
        .filter(|&f| {
            let db = f / 2;
            let shard = m.shards.as_ref().and_then(|s| s.shard_of(db)).unwrap_or(0);
            shards.contains(&shard)
        })
        .collect()
}

fn wait_until(what: &str, cond: impl Fn() -> bool) -> TestResult {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        if Instant::now() > deadline {
            return Err(format!("timed out waiting for {what}").into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

fn is_dir(p: &Path) -> bool {
    p.is_dir()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_shard_processes_and_a_coordinator() -> TestResult {
    let c = Cluster::new().await?;
    let hashes = c.p.hashes();
    let mut shards = (0..SHARDS)
        .map(|i| c.shard(i, &[]))
        .collect::<Result<Vec<_>, _>>()?;

    // Nothing prepared yet: publish is an error (exit status 1), not a
    // timeout.
    let (code, stderr) = c.publish(0)?;
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("no prepared epoch"), "{stderr}");

    // ---- epoch 1: prepared once, built by every shard, published ----
    let summary = c.prepare()?;
    assert_eq!(summary["epoch"], 1, "{summary}");
    assert_eq!(summary["databases"], 6, "{summary}");
    assert_eq!(summary["shards"][2]["url"], c.urls[2]);
    let spec1 = EpochSpec::from_json(&std::fs::read(c.epoch_objects(1).join("spec.json"))?)?;
    assert!(c
        .epoch_objects(1)
        .join(auditor_server::objstore::snapshot_object(&spec1))
        .join(auditor_server::objstore::SNAPSHOT_INDEX)
        .is_file());
    let (code, stderr) = c.publish(60)?;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(c.epoch_objects(1).join("published").is_file());
    for i in 0..SHARDS {
        let r = c.ready(i, 1).await?;
        assert_eq!(
            (r["databases"].as_u64(), r["of"].as_u64()),
            (Some(2), Some(6))
        );
    }
    let (bytes, m) = c.manifest(0).await?;
    for i in 1..SHARDS {
        assert_eq!(
            c.manifest(i).await?.0,
            bytes,
            "shard {i} serves other bytes"
        );
    }
    let spec = EpochSpec::from_json(&std::fs::read(c.epoch_objects(1).join("spec.json"))?)?;
    assert_eq!(m, spec.manifest);
    assert_eq!(m.shard_url(4), Some(c.urls[1].as_str()));

    // (a) One single server built from the same seeds (in this process).
    let mut single_spec = spec.clone();
    single_spec.manifest.shards = None;
    single_spec.manifest.version = audit_proto::manifest::MANIFEST_VERSION_UNSHARDED;
    let single_path = c.p.dir.path().join("single.json");
    single_spec.write(&single_path)?;
    let mut single_config = auditor_server::Config {
        database_url: Some(c.p.db_url.clone()),
        epoch_dir: c.p.dir.path().join("single"),
        ..auditor_server::Config::default()
    };
    single_config.epoch.param_set = "toy-insecure-d64".into();
    single_config.epoch.allow_insecure_params = true;
    single_config.shard.epoch_spec = Some(single_path);
    let single = Arc::new(Service::new(single_config)?);
    assert_eq!(single.build_from_spec_if_new().await?, Some(1));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let single_url = format!("http://{}", listener.local_addr()?);
    let (stop_single, rx) = tokio::sync::oneshot::channel::<()>();
    let single_task = tokio::spawn(single.clone().run(listener, async {
        let _ = rx.await;
    }));
    let m1 = Manifest::from_json(
        &c.http
            .get(format!("{single_url}/v1/manifest"))
            .send()
            .await?
            .bytes()
            .await?,
    )?;
    assert_eq!(m1, single_spec.manifest);

    let sharded = (
        &Prober::new(Arc::new(m.clone())),
        &Auditor::new(&c.urls[0])?,
    );
    let one = (&Prober::new(Arc::new(m1)), &Auditor::new(&single_url)?);
    let read = same_bits(&hashes, 0..FILTERS, sharded, Some(one)).await?;
    assert_eq!(read, FILTERS as usize * 14);
    let _ = stop_single.send(());
    single_task.await??;

    // (d) A query for shard 1's database 4 sent to shard 0: 421 naming
    // shard 1; the client library follows it once.
    let q = sharded.0.prepare_bit(8, 3)?;
    assert_eq!(q.db, 4);
    let resp = c
        .http
        .post(format!("{}{}", c.urls[0], q.path))
        .header("content-type", OCTET_STREAM)
        .body(q.body.clone())
        .send()
        .await?;
    assert_eq!(resp.status(), 421);
    let err: ErrorBody = serde_json::from_slice(&resp.bytes().await?)?;
    assert_eq!(err.error, "wrong_shard");
    assert_eq!(err.shard_url.as_deref(), Some(c.urls[1].as_str()));
    let mut unrouted = m.clone();
    unrouted.shards = None;
    let blind = Prober::new(Arc::new(unrouted));
    let q = blind.prepare_bit(8, m.filter.bit(8, &hashes[0].into())?)?;
    assert_eq!(q.shard_url, None);
    let (bit, _) = Auditor::new(&c.urls[0])?.query(&q).await?;
    assert!(bit, "followed to shard 1, which holds the entry's bit");

    // ---- epoch 2: shard 2 killed in the middle of its build ----
    // Shard 2 restarts with a pause after writing its databases (debug
    // builds' fault hook), so the kill lands mid-build.
    let build_json = c.epoch_dir(2).join("epoch-000000000001/build.json");
    let built_at = std::fs::metadata(&build_json)?.modified()?;
    shards[2].kill()?;
    shards[2] = c.shard(2, &[("AUDITOR_FAULT_PAUSE_BUILD_MS", "600000")])?;
    // (c) The restarted shard serves its persisted epoch, not rebuilt.
    c.ready(2, 1).await?;
    assert_eq!(std::fs::metadata(&build_json)?.modified()?, built_at);

    assert_eq!(c.prepare()?["epoch"], 2);
    let ready = c.epoch_objects(2).join("ready");
    wait_until("shards 0 and 1 ready for epoch 2", || {
        ready.join("0000").is_file() && ready.join("0001").is_file()
    })?;
    let building = c.epoch_dir(2).join(".building-000000000002");
    if cfg!(debug_assertions) {
        shards[2].wait_for("AUDITOR_FAULT_PAUSE_BUILD_MS", WAIT)?;
        assert!(is_dir(&building), "shard 2 is mid-build");
    }
    shards[2].kill()?;
    assert!(!ready.join("0002").exists());

    // Not every shard ready: publish gives up with exit status 2.
    let (code, stderr) = c.publish(2)?;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("[2] not ready"), "{stderr}");
    assert!(!c.epoch_objects(2).join("published").exists());
    assert!(c.epoch_objects(2).join("publish-timed-out").is_file());
    // The old epoch still answers; the metrics say why the new one waits.
    for i in 0..2 {
        assert_eq!(c.manifest(i).await?.1.epoch, 1);
        c.metric_is(i, "auditor_epoch_publish_timeouts_total", 1.0)
            .await?;
        assert_eq!(c.metric(i, "auditor_epoch_prepared").await?, 2.0);
        assert_eq!(c.metric(i, "auditor_epoch_ready_shards").await?, 2.0);
        assert_eq!(c.metric(i, "auditor_epoch_planned_shards").await?, 3.0);
        assert_eq!(c.metric(i, "auditor_epoch_staged").await?, 2.0);
        assert_eq!(c.metric(i, "auditor_epoch").await?, 1.0);
    }
    let alive = filters_of(&m, &[0, 1]);
    assert_eq!(alive.len(), 8);
    same_bits(&hashes, alive.into_iter(), sharded, None).await?;

    // Shard 2 back: it serves epoch 1 from disk at once, then builds
    // epoch 2 (the killed build's directory is discarded) and reports
    // ready; the retried publish succeeds and every shard switches.
    shards[2] = c.shard(2, &[])?;
    c.ready(2, 1).await?;
    wait_until("shard 2 ready for epoch 2", || ready.join("0002").is_file())?;
    assert!(!building.exists());
    let (code, stderr) = c.publish(60)?;
    assert_eq!(code, Some(0), "{stderr}");
    for i in 0..SHARDS {
        c.ready(i, 2).await?;
    }
    let (_, m2) = c.manifest(1).await?;
    assert_eq!(m2.epoch, 2);
    assert_ne!(m2.filter.salt_seed, m.filter.salt_seed);
    let read = same_bits(
        &hashes,
        0..FILTERS,
        (&Prober::new(Arc::new(m2)), &Auditor::new(&c.urls[2])?),
        None,
    )
    .await?;
    assert_eq!(read, FILTERS as usize * 14);
    // The old epoch stays answerable for the grace period.
    same_bits(&hashes, [0, 5, 11].into_iter(), sharded, None).await?;
    assert_eq!(c.metric(0, "auditor_epoch_staged").await?, 0.0);

    // A published epoch is idempotent to publish again.
    let (code, stderr) = c.publish(0)?;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("already published"), "{stderr}");
    for s in &mut shards {
        s.kill()?;
    }
    Ok(())
}

/// Two coordinators (a CronJob and a job started by hand) prepare at the
/// same moment against one store. Whatever the interleaving, each epoch id
/// has exactly one spec; a coordinator that lost the race exits non-zero
/// saying so and leaves no snapshot behind; the published epoch is served
/// with the same manifest by every shard, and every logged entry is found
/// in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_coordinators_at_once() -> TestResult {
    use std::process::Stdio;
    let c = Cluster::new().await?;
    let hashes = c.p.hashes();
    let mut shards = (0..SHARDS)
        .map(|i| c.shard(i, &[]))
        .collect::<Result<Vec<_>, _>>()?;
    let start = || {
        c.coordinator_cmd(&["prepare"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
    };
    let (a, b) = (start()?, start()?);
    let mut prepared = Vec::new();
    for out in [a.wait_with_output()?, b.wait_with_output()?] {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{stderr}");
        if out.status.success() {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
            prepared.push(v["epoch"].as_u64().ok_or("no epoch in the summary")?);
        } else {
            assert_eq!(out.status.code(), Some(1), "{stderr}");
            assert!(
                stderr.contains("prepared by another coordinator"),
                "{stderr}"
            );
        }
    }
    eprintln!("two_coordinators_at_once: prepared {prepared:?}");
    assert!(
        !prepared.is_empty(),
        "neither coordinator prepared an epoch"
    );
    prepared.sort_unstable();
    prepared.dedup();
    // Every epoch directory holds one spec and exactly the snapshot it
    // names, nothing of the loser.
    let mut ids = Vec::new();
    for e in std::fs::read_dir(c.objects.join("epochs"))? {
        let id: u64 = e?.file_name().to_string_lossy().parse()?;
        let spec = EpochSpec::from_json(&std::fs::read(c.epoch_objects(id).join("spec.json"))?)?;
        assert_eq!(spec.manifest.epoch, id);
        let mut names: Vec<String> = std::fs::read_dir(c.epoch_objects(id))?
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<Result<_, _>>()?;
        names.retain(|n| n != "ready");
        names.sort();
        let mut want = vec![
            auditor_server::objstore::snapshot_object(&spec),
            "spec.json".to_owned(),
        ];
        want.sort();
        assert_eq!(names, want, "epoch {id}");
        ids.push(id);
    }
    ids.sort_unstable();
    assert_eq!(ids, prepared, "the epochs in the store are those reported");

    let newest = *prepared.last().ok_or("none")?;
    let (code, stderr) = c.publish(60)?;
    assert_eq!(code, Some(0), "{stderr}");
    for i in 0..SHARDS {
        c.ready(i, newest).await?;
    }
    let spec = EpochSpec::from_json(&std::fs::read(c.epoch_objects(newest).join("spec.json"))?)?;
    let (bytes, m) = c.manifest(0).await?;
    assert_eq!(m, spec.manifest);
    for i in 1..SHARDS {
        assert_eq!(
            c.manifest(i).await?.0,
            bytes,
            "shard {i} serves other bytes"
        );
    }
    // Every logged entry, each in one of its filters (all 12 covered):
    // 0 wrong bits.
    let prober = Prober::new(Arc::new(m.clone()));
    let client = Auditor::new(&c.urls[0])?;
    for (n, h) in hashes.iter().enumerate() {
        let f = (n as u32) % FILTERS;
        let (bit, _) = client
            .query(&prober.prepare_bit(f, m.filter.bit(f, &(*h).into())?)?)
            .await?;
        assert!(bit, "entry {n} not found in filter {f}");
    }
    // A replica of group 1 on another port, with an empty disk, serves the
    // published epoch without building it: it downloads group 1's files
    // and checks them.
    let port = free_port()?;
    let mut cmd = auditor();
    c.with_cluster_env(&mut cmd);
    cmd.args(["serve", "--shard-index", "1"])
        .args(["--bind", &format!("127.0.0.1:{port}")])
        .arg("--epoch-dir")
        .arg(c.p.dir.path().join("replica-1"));
    let mut replica = Served::spawn(cmd)?;
    replica.wait_for("downloaded from the object store", WAIT)?;
    let replica_url = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + WAIT;
    loop {
        let r = c.http.get(format!("{replica_url}/readyz")).send().await?;
        let ok = r.status() == 200;
        let v: serde_json::Value =
            serde_json::from_str(&r.text().await.unwrap_or_default()).unwrap_or_default();
        if ok && v["epoch"] == newest {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the replica does not serve epoch {newest}: {v}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = replica.drain();
    assert!(!log.contains("building this shard's databases"), "{log}");
    let replica_auditor = Auditor::new(&replica_url)?;
    for f in filters_of(&m, &[1]) {
        for h in &hashes[..8] {
            let mut q = prober.prepare_bit(f, m.filter.bit(f, &(*h).into())?)?;
            q.shard_url = None;
            let (bit, _) = replica_auditor.query(&q).await?;
            assert!(bit, "the replica lost an entry in filter {f}");
        }
    }
    replica.kill()?;

    // No build left a lock or a build directory behind.
    for i in 0..SHARDS {
        for e in std::fs::read_dir(c.epoch_dir(i))? {
            let name = e?.file_name().to_string_lossy().into_owned();
            assert!(
                !name.starts_with(".building-"),
                "shard {i}: {name} left behind"
            );
        }
    }
    for s in &mut shards {
        s.kill()?;
    }
    Ok(())
}

/// One shard in this process over a local-directory object store: a
/// damaged snapshot is refused (nothing built, nothing reported ready,
/// the failure counted), the repaired one is built after the retry delay
/// and reported ready, and the shard serves the epoch only once it is
/// published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_snapshot_is_never_built() -> TestResult {
    use auditor_server::objstore::{part_object, snapshot_object, Objects, PublishedMarker};
    let dir = tempfile::tempdir()?;
    let url = format!("file://{}", dir.path().join("objects").display());
    let mut config = auditor_server::Config {
        epoch_dir: dir.path().join("epochs"),
        ..auditor_server::Config::default()
    };
    config.epoch.param_set = "toy-insecure-d64".into();
    config.epoch.allow_insecure_params = true;
    config.epoch.filters = 4;
    config.shard.object_store = Some(url.clone());
    let mut hashes: Vec<[u8; 32]> = (0u8..100).map(|i| [i.wrapping_mul(37); 32]).collect();
    hashes.sort_unstable();
    hashes.dedup();
    let snap = auditor_server::epoch::Snapshot {
        now_s: 1_700_000_000,
        hashes,
        coverage: vec![],
    };
    let spec = auditor_server::plan::plan_snapshot(&snap, &config, 1)?;
    let objects = Objects::open(&url)?;
    objects.prepare(&spec, &snap.hashes).await?;
    let object = dir
        .path()
        .join("objects/epochs/000000000001")
        .join(snapshot_object(&spec))
        .join(part_object(0));
    let good = std::fs::read(&object)?;
    let (_, parts) = auditor_server::snapshot::SnapshotIndex::of(1, &snap.hashes, 1 << 20);
    assert_eq!(good, parts[0]);
    let mut bad = good.clone();
    bad[200] ^= 4;
    std::fs::write(&object, &bad)?;

    let svc = Service::new(config)?;
    let e = svc.sync_objects().await.unwrap_err();
    assert!(matches!(e, auditor_server::Error::Corrupt { .. }), "{e}");
    assert_eq!(svc.state().metrics.epoch_failures.get(), 1);
    assert_eq!(svc.staged_epoch(), None);
    assert_eq!(objects.ready(1, 0).await?, None);
    assert!(std::fs::read_dir(dir.path().join("epochs"))?
        .next()
        .is_none());

    // Repaired: built at the first poll after the retry delay (2 s).
    std::fs::write(&object, &good)?;
    svc.sync_objects().await?;
    assert_eq!(svc.staged_epoch(), None, "still waiting for the retry");
    tokio::time::sleep(Duration::from_millis(2100)).await;
    svc.sync_objects().await?;
    assert_eq!(svc.staged_epoch(), Some(1));
    assert!(objects.ready(1, 0).await?.is_some());
    assert!(
        svc.state().registry.current().is_none(),
        "not published yet"
    );
    assert_eq!(svc.state().metrics.epoch_staged.get(), 1);

    objects
        .write_published(&PublishedMarker::for_spec(
            &spec,
            1,
            objects
                .ready_markers(&spec)
                .await?
                .0
                .into_iter()
                .flat_map(|r| r.artifacts)
                .collect(),
            0,
        ))
        .await?;
    svc.sync_objects().await?;
    let served = svc.state().registry.current().ok_or("not serving")?;
    assert_eq!(
        (served.id(), served.own_count()),
        (1, spec.manifest.dbs.len())
    );
    assert_eq!(svc.epoch_dir().list()?, [1]);
    assert_eq!(svc.staged_epoch(), None);
    Ok(())
}

/// `epoch prepare` for more shards than the epoch has databases (here
/// `db_bits_target` holds all 12 filters in one database, so shards 1
/// and 2 get none): the epoch is prepared, but the summary lists the
/// groups without a database and the log warns of them. With databases
/// for every shard the list is empty and nothing is warned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepare_warns_of_groups_without_databases() -> TestResult {
    let c = Cluster::new().await?;
    let v = c.prepare()?;
    assert_eq!(v["databases"], 6);
    assert_eq!(v["groups_without_databases"], serde_json::json!([]));

    let filter_bits = audit_proto::filter::FilterSpec::capacity_for(ENTRIES as u64) * 8;
    let one_db = c.p.dir.path().join("one-db.toml");
    std::fs::write(
        &one_db,
        format!(
            "[epoch]\nparam_set = \"toy-insecure-d64\"\nallow_insecure_params = true\n\
             filters = {FILTERS}\ndb_bits_target = {}\n",
            64 * filter_bits
        ),
    )?;
    let out = auditor()
        .arg("--config")
        .arg(&one_db)
        .args(["--object-store", &c.object_store()])
        .env("AUDITOR_SHARD_COUNT", SHARDS.to_string())
        .env("AUDITOR_SHARD_URLS", c.urls.join(","))
        .args(["--database-url", &c.p.db_url])
        .arg("--epoch-dir")
        .arg(c.p.dir.path().join("coordinator"))
        .args(["epoch", "prepare"])
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "epoch prepare: {stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(v["databases"], 1);
    assert_eq!(v["groups_without_databases"], serde_json::json!([1, 2]));
    assert_eq!(v["shards"][1]["databases"], 0);
    assert!(
        stderr.contains("WARN") && stderr.contains("get no database"),
        "{stderr}"
    );
    Ok(())
}

/// Every file under `dir` with its size and modification time.
fn listing(dir: &Path) -> Result<Vec<(PathBuf, u64, std::time::SystemTime)>, BoxErr> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let meta = e.metadata()?;
            if meta.is_dir() {
                todo.push(e.path());
            } else {
                out.push((e.path(), meta.len(), meta.modified()?));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The deployment with a builder per group (the chart's Indexed Job):
/// serving servers with `[shard] build = false` never build and never
/// write to the object store; `epoch build --shard-index i` builds group
/// i's databases, uploads them and reports ready (once: a second run finds
/// the group ready); `epoch publish` publishes; the servers download and
/// serve exactly the bits of the set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builders_build_and_serving_servers_only_download() -> TestResult {
    let c = Cluster::new().await?;
    let hashes = c.p.hashes();
    assert_eq!(c.prepare()?["epoch"], 1);
    let mut shards = (0..SHARDS)
        .map(|i| c.shard(i, &[("AUDITOR_SHARD_BUILD", "false")]))
        .collect::<Result<Vec<_>, _>>()?;
    for s in &mut shards {
        s.wait_for("waiting for this group's databases", WAIT)?;
    }
    assert!(!c.epoch_objects(1).join("ready").exists());
    for i in 0..SHARDS {
        assert!(
            !is_dir(&c.epoch_dir(i).join(".staged-000000000001")),
            "shard {i} staged without a builder"
        );
    }

    let build = |i: u32| -> Result<serde_json::Value, BoxErr> {
        let out = c.coordinator(&["build", "--shard-index", &i.to_string()])?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "epoch build {i}: {stderr}");
        Ok(serde_json::from_slice(&out.stdout)?)
    };
    for i in 0..SHARDS {
        let v = build(i)?;
        assert_eq!(
            (v["group"].as_u64(), v["epoch"].as_u64()),
            (Some(i.into()), Some(1))
        );
        assert_eq!(v["built"], true, "{v}");
    }
    // Run again (a retried index): the group is ready, nothing is built.
    assert_eq!(build(0)?["built"], false);
    let (code, stderr) = c.publish(60)?;
    assert_eq!(code, Some(0), "{stderr}");

    let before = listing(&c.objects)?;
    for i in 0..SHARDS {
        c.ready(i, 1).await?;
        shards[i as usize].find("downloaded from the object store", WAIT)?;
    }
    assert_eq!(
        listing(&c.objects)?,
        before,
        "a serving server wrote to the object store"
    );
    let (_, m) = c.manifest(0).await?;
    let read = same_bits(
        &hashes,
        0..FILTERS,
        (&Prober::new(Arc::new(m)), &Auditor::new(&c.urls[0])?),
        None,
    )
    .await?;
    assert_eq!(read, FILTERS as usize * 14);
    for (i, s) in shards.iter_mut().enumerate() {
        let log = s.drain();
        assert!(
            !log.contains("building this shard"),
            "shard {i} built:\n{log}"
        );
    }
    Ok(())
}
