//! A fleet on 127.0.0.1 behind one address: 3 groups × 2 replicas
//! (`auditor-server serve` processes, the real binary) over a
//! local-directory object store, the coordinator's `epoch prepare` /
//! `epoch publish`, and a front that routes `/g/{i}/…` to group i's
//! replicas as an Ingress in front of a Service does (a replica that
//! refuses the connection or answers 503 is skipped for the next; a group
//! with no replica left is answered 502). Four simulated clients audit
//! logged SCTs with browser-client's fallback (docs/protocol.md §7.1):
//!
//! * while every group is healthy, the fallback is never taken and the
//!   databases asked are uniform (χ², threshold p = 10^-6);
//! * one replica SIGKILLed: 0 failed audits, no fallback (the front goes
//!   to the other replica);
//! * a whole group SIGKILLed: 0 failed audits, through the fallback (a
//!   query fails with probability (1/3)^13 ≈ 6·10^-7); the databases asked,
//!   failed attempts included, stay uniform, and none answered is the dead
//!   group's;
//! * the next epoch is prepared, built (the dead group's databases by its
//!   builder, `epoch build`) and published while that group is dead, and
//!   the live groups serve it;
//! * every replica restarted one at a time while the clients audit: 0
//!   failed audits.
//!
//! The second replica of each group starts with an empty disk and serves
//! the published epoch without building it. Tiny parameters: the insecure
//! toy set, 12 filters in 6 databases, 2 per group.
#![cfg(unix)]

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use browser_client::fallback::FallbackStats;
use browser_client::net::Auditor;
use browser_client::probe::Prober;
use common::{auditor, free_port, BoxErr, Pipeline, Served, TestResult};

const GROUPS: u32 = 3;
const REPLICAS: u32 = 2;
const FILTERS: u32 = 12;
const DBS: usize = 6;
const ENTRIES: usize = 40;
const CLIENTS: usize = 4;
/// Long enough for any step of the test on a loaded machine.
const WAIT: Duration = Duration::from_secs(60);
/// The χ² tests' threshold: a uniform choice fails one with this
/// probability.
const P_MIN: f64 = 1e-6;

/// The front: one address, routing by path to the replicas of a group.
#[derive(Clone)]
struct Front {
    /// Base URLs of each group's replicas.
    replicas: Arc<Vec<Vec<String>>>,
    /// The database of every query that reached the front, in order.
    asked: Arc<Mutex<Vec<u32>>>,
    next: Arc<AtomicUsize>,
    http: reqwest::Client,
}

impl Front {
    /// Database `d` of `/g/{i}/v1/epochs/{e}/dbs/{d}/query`.
    fn db_of(path: &str) -> Option<u32> {
        path.split_once("/dbs/")?
            .1
            .strip_suffix("/query")?
            .parse()
            .ok()
    }

    async fn forward(self, req: axum::http::Request<axum::body::Body>) -> axum::response::Response {
        use axum::response::IntoResponse;
        let path = req.uri().path().to_owned();
        let group = path
            .strip_prefix("/g/")
            .and_then(|r| r.split('/').next())
            .and_then(|g| g.parse::<usize>().ok())
            .unwrap_or(0);
        let Some(replicas) = self.replicas.get(group) else {
            return axum::http::StatusCode::NOT_FOUND.into_response();
        };
        if req.method() == axum::http::Method::POST {
            if let Some(db) = Front::db_of(&path) {
                self.asked.lock().unwrap().push(db);
            }
        }
        let method = req.method().clone();
        let ct = req.headers().get("content-type").cloned();
        let body = axum::body::to_bytes(req.into_body(), 8 << 20)
            .await
            .unwrap_or_default();
        // Round robin; the next replica when one refuses or is not ready.
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        for k in 0..replicas.len() {
            let base = &replicas[(start + k) % replicas.len()];
            let mut out = self
                .http
                .request(method.clone(), format!("{base}{path}"))
                .body(body.clone());
            if let Some(ct) = &ct {
                out = out.header("content-type", ct);
            }
            let Ok(resp) = out.send().await else { continue };
            if resp.status() == 503 && k + 1 < replicas.len() {
                continue;
            }
            let mut back = axum::http::Response::builder().status(resp.status());
            for h in ["content-type", "retry-after", "server-timing"] {
                if let Some(v) = resp.headers().get(h) {
                    back = back.header(h, v);
                }
            }
            let Ok(bytes) = resp.bytes().await else {
                continue;
            };
            return back
                .body(axum::body::Body::from(bytes))
                .unwrap_or_else(|_| axum::http::StatusCode::BAD_GATEWAY.into_response());
        }
        (
            axum::http::StatusCode::BAD_GATEWAY,
            [("content-type", "application/json")],
            r#"{"error":"bad_gateway","message":"no replica of this group answers"}"#,
        )
            .into_response()
    }

    fn take_asked(&self) -> Vec<u32> {
        std::mem::take(&mut *self.asked.lock().unwrap())
    }
}

struct Fleet {
    p: Pipeline,
    config: PathBuf,
    objects: PathBuf,
    front_url: String,
    front: Front,
    /// ports[group][replica].
    ports: Vec<Vec<u16>>,
    http: reqwest::Client,
}

impl Fleet {
    async fn new() -> Result<Fleet, BoxErr> {
        let p = Pipeline::new(ENTRIES).await?;
        let config = common::toy_fleet_config(p.dir.path(), ENTRIES, FILTERS)?;
        let ports = (0..GROUPS)
            .map(|_| (0..REPLICAS).map(|_| free_port()).collect())
            .collect::<Result<Vec<Vec<u16>>, _>>()?;
        let replicas = ports
            .iter()
            .map(|g| g.iter().map(|p| format!("http://127.0.0.1:{p}")).collect())
            .collect();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let front_url = format!("http://{}", listener.local_addr()?);
        let front = Front {
            replicas: Arc::new(replicas),
            asked: Arc::default(),
            next: Arc::default(),
            http: reqwest::Client::new(),
        };
        let f = front.clone();
        let app = axum::Router::new().fallback(move |req| f.clone().forward(req));
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Fleet {
            objects: p.dir.path().join("objects"),
            p,
            config,
            front_url,
            front,
            ports,
            http: reqwest::Client::new(),
        })
    }

    fn with_fleet_env(&self, cmd: &mut Command) {
        cmd.arg("--config")
            .arg(&self.config)
            .args([
                "--object-store",
                &format!("file://{}", self.objects.display()),
            ])
            .env("AUDITOR_SHARD_COUNT", GROUPS.to_string())
            .env(
                "AUDITOR_SHARD_URL_TEMPLATE",
                format!("{}/g/{{i}}", self.front_url),
            );
    }

    fn url(&self, g: u32, r: u32) -> String {
        format!("http://127.0.0.1:{}", self.ports[g as usize][r as usize])
    }

    /// Starts replica `r` of group `g` on its own port and disk; waits
    /// until it listens.
    fn replica(&self, g: u32, r: u32) -> Result<Served, BoxErr> {
        let mut cmd = auditor();
        self.with_fleet_env(&mut cmd);
        cmd.args(["serve", "--shard-index", &g.to_string()])
            .args([
                "--bind",
                &format!("127.0.0.1:{}", self.ports[g as usize][r as usize]),
            ])
            .arg("--epoch-dir")
            .arg(self.p.dir.path().join(format!("group-{g}-replica-{r}")));
        let mut s = Served::spawn(cmd)?;
        s.wait_for("auditor-server listening", WAIT)?;
        Ok(s)
    }

    /// Runs `epoch <args>` (a coordinator or builder command); it must
    /// succeed.
    fn run(&self, args: &[&str]) -> TestResult {
        let mut cmd = auditor();
        self.with_fleet_env(&mut cmd);
        cmd.args(["--database-url", &self.p.db_url])
            .arg("--epoch-dir")
            .arg(self.p.dir.path().join("coordinator"))
            .arg("epoch")
            .args(args);
        let out = cmd.output()?;
        assert!(
            out.status.success(),
            "epoch {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(())
    }

    /// Waits until replica `r` of group `g` reports epoch `epoch` ready.
    async fn ready(&self, g: u32, r: u32, epoch: u64) -> TestResult {
        let deadline = Instant::now() + WAIT;
        let url = format!("{}/readyz", self.url(g, r));
        let mut last = String::new();
        while Instant::now() < deadline {
            if let Ok(resp) = self.http.get(&url).send().await {
                let ok = resp.status() == 200;
                last = resp.text().await.unwrap_or_default();
                let v: serde_json::Value = serde_json::from_str(&last).unwrap_or_default();
                if ok && v["epoch"] == epoch {
                    return Ok(());
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(format!("group {g} replica {r} does not serve epoch {epoch}: {last}").into())
    }
}

/// What a batch of audits did.
#[derive(Debug, Default)]
struct Audits {
    answered: usize,
    failed: Vec<String>,
    /// The database of each answered audit.
    answered_dbs: Vec<u32>,
}

/// `CLIENTS` clients, each auditing logged SCTs (leaf hashes of the log)
/// one after the other — `per_client` each, or until `stop` is set — as
/// browser-client audits them: a fresh random filter per attempt, the
/// fallback on failures. A logged SCT must never read NOT FOUND.
async fn audit(
    auditor: &Auditor,
    prober: &Arc<Prober>,
    hashes: &Arc<Vec<[u8; 32]>>,
    per_client: usize,
    stop: Option<Arc<AtomicBool>>,
) -> Audits {
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let (a, p, h, stop) = (
            auditor.clone(),
            prober.clone(),
            hashes.clone(),
            stop.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut out = Audits::default();
            let mut n = 0;
            while n < per_client && !stop.as_ref().is_some_and(|s| s.load(Ordering::SeqCst)) {
                let leaf = h[(c * 7 + n) % h.len()];
                match a.query_with_fallback(|| p.prepare(&leaf.into())).await {
                    Ok(ans) => {
                        assert!(
                            ans.bit,
                            "a logged SCT read NOT FOUND in database {}",
                            ans.query.db
                        );
                        out.answered += 1;
                        out.answered_dbs.push(ans.query.db);
                    }
                    Err(e) => out.failed.push(e.to_string()),
                }
                n += 1;
            }
            out
        }));
    }
    let mut all = Audits::default();
    for t in tasks {
        let o = t.await.expect("client task");
        all.answered += o.answered;
        all.failed.extend(o.failed);
        all.answered_dbs.extend(o.answered_dbs);
    }
    all
}

fn histogram(dbs: &[u32]) -> Vec<u64> {
    let mut h = vec![0u64; DBS];
    for &d in dbs {
        h[d as usize] += 1;
    }
    h
}

/// χ² p-value of the databases in `dbs` against the uniform choice (every
/// database holds 2 of the 12 filters).
fn uniform_p(dbs: &[u32]) -> f64 {
    test_support::stats::chi_square_p(&histogram(dbs), &[1.0 / DBS as f64; DBS])
}

fn delta(after: &FallbackStats, before: &FallbackStats) -> (u64, u64, u64) {
    (
        after.queries - before.queries,
        after.fallbacks - before.fallbacks,
        after.gave_up - before.gave_up,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audits_survive_dead_replicas_dead_groups_and_rolling_restarts() -> TestResult {
    let fleet = Fleet::new().await?;
    let hashes = Arc::new(fleet.p.hashes());

    // ---- the fleet: replica 0 of each group builds, the epoch is published
    let mut served: Vec<Vec<Option<Served>>> = Vec::new();
    for g in 0..GROUPS {
        served.push(vec![Some(fleet.replica(g, 0)?), None]);
    }
    fleet.run(&["prepare"])?;
    fleet.run(&["publish", "--timeout-seconds", "60", "--poll-seconds", "1"])?;
    for g in 0..GROUPS {
        fleet.ready(g, 0, 1).await?;
    }
    // Replica 1 of each group starts with an empty disk: it downloads its
    // group's databases and serves them without building.
    for g in 0..GROUPS {
        let mut s = fleet.replica(g, 1)?;
        fleet.ready(g, 1, 1).await?;
        let log = s.drain();
        assert!(log.contains("downloaded from the object store"), "{log}");
        assert!(!log.contains("building this shard's databases"), "{log}");
        served[g as usize][1] = Some(s);
    }

    let auditor = Auditor::new(&fleet.front_url)?;
    let (m, _) = auditor.manifest().await?;
    assert_eq!(m.dbs.len(), DBS);
    assert_eq!(
        m.shard_url(1),
        Some(format!("{}/g/1", fleet.front_url).as_str())
    );
    let mut prober = Arc::new(Prober::new(Arc::new(m)));

    // ---- healthy: no fallback, uniform databases ----
    let before = auditor.fallback_stats();
    let healthy = audit(&auditor, &prober, &hashes, 60, None).await;
    assert_eq!(
        (healthy.answered, healthy.failed.len()),
        (CLIENTS * 60, 0),
        "{:?}",
        healthy.failed
    );
    assert_eq!(
        delta(&auditor.fallback_stats(), &before),
        (CLIENTS as u64 * 60, 0, 0)
    );
    let asked = fleet.front.take_asked();
    assert_eq!(asked.len(), CLIENTS * 60);
    let p = uniform_p(&asked);
    assert!(
        p > P_MIN,
        "databases asked while healthy: {:?}, p = {p}",
        histogram(&asked)
    );

    // ---- one replica of group 1 SIGKILLed: the front uses the other ----
    if let Some(mut s) = served[1][0].take() {
        s.kill()?;
    }
    let before = auditor.fallback_stats();
    let one_down = audit(&auditor, &prober, &hashes, 25, None).await;
    assert!(one_down.failed.is_empty(), "{:?}", one_down.failed);
    assert_eq!(
        delta(&auditor.fallback_stats(), &before),
        (CLIENTS as u64 * 25, 0, 0)
    );
    fleet.front.take_asked();

    // ---- the whole of group 1 SIGKILLed: the fallback draws again ----
    if let Some(mut s) = served[1][1].take() {
        s.kill()?;
    }
    let before = auditor.fallback_stats();
    let group_down = audit(&auditor, &prober, &hashes, 60, None).await;
    // One dead group of 3: a query fails with probability (1/3)^13, here
    // 240 · 6.3·10^-7 ≈ 1.5·10^-4 for any of them.
    assert!(group_down.failed.is_empty(), "{:?}", group_down.failed);
    let after = auditor.fallback_stats();
    let (queries, fallbacks, gave_up) = delta(&after, &before);
    assert_eq!((queries, gave_up), (CLIENTS as u64 * 60, 0));
    // About half a fallback per query (a third of the draws land on the
    // dead group); at least one for sure.
    assert!(fallbacks > 0, "no fallback with a dead group");
    let server_errors = after.failures.get("server_error").copied().unwrap_or(0)
        - before.failures.get("server_error").copied().unwrap_or(0);
    assert_eq!(
        server_errors, fallbacks,
        "every fallback was a 502 of the dead group"
    );
    // Every draw, failed or answered, is uniform over all 6 databases; the
    // answered ones are never group 1's (databases 1 and 4).
    let asked = fleet.front.take_asked();
    assert_eq!(asked.len() as u64, queries + fallbacks);
    let p = uniform_p(&asked);
    assert!(
        p > P_MIN,
        "databases asked with a dead group: {:?}, p = {p}",
        histogram(&asked)
    );
    let h = histogram(&group_down.answered_dbs);
    assert_eq!((h[1], h[4]), (0, 0), "{h:?}");

    // ---- the next epoch is published while group 1 is dead: publishing
    // waits for the databases to be built (here group 1's by its builder,
    // `epoch build`), not for serving replicas ----
    fleet.run(&["prepare"])?;
    fleet.run(&["build", "--shard-index", "1"])?;
    fleet.run(&["publish", "--timeout-seconds", "60", "--poll-seconds", "1"])?;
    for g in [0, 2] {
        for r in 0..REPLICAS {
            fleet.ready(g, r, 2).await?;
        }
    }
    let (m2, _) = auditor.manifest().await?;
    assert_eq!(m2.epoch, 2);
    prober = Arc::new(Prober::new(Arc::new(m2)));
    let next_epoch = audit(&auditor, &prober, &hashes, 20, None).await;
    assert!(next_epoch.failed.is_empty(), "{:?}", next_epoch.failed);
    fleet.front.take_asked();

    // ---- group 1 back (it downloads epoch 2's databases its builder
    // uploaded), then every replica restarted one at a time ----
    for r in 0..REPLICAS {
        served[1][r as usize] = Some(fleet.replica(1, r)?);
        fleet.ready(1, r, 2).await?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let clients = {
        let (a, p, h, s) = (
            auditor.clone(),
            prober.clone(),
            hashes.clone(),
            stop.clone(),
        );
        tokio::spawn(async move { audit(&a, &p, &h, usize::MAX, Some(s)).await })
    };
    let before = auditor.fallback_stats();
    for g in 0..GROUPS {
        for r in 0..REPLICAS {
            if let Some(mut s) = served[g as usize][r as usize].take() {
                s.kill()?;
            }
            served[g as usize][r as usize] = Some(fleet.replica(g, r)?);
            fleet.ready(g, r, 2).await?;
        }
    }
    stop.store(true, Ordering::SeqCst);
    let rolling = clients.await?;
    assert!(rolling.failed.is_empty(), "{:?}", rolling.failed);
    assert!(rolling.answered > 0);
    let (_, _, gave_up) = delta(&auditor.fallback_stats(), &before);
    assert_eq!(gave_up, 0);
    eprintln!(
        "fleet: healthy {} audits; one replica down {}; group down {} ({fallbacks} fallbacks); \
         rolling restart {} audits",
        healthy.answered, one_down.answered, group_down.answered, rolling.answered
    );
    Ok(())
}
