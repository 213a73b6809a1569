//! End-to-end tests of the auditor over real HTTP on 127.0.0.1 port 0:
//! local test log → ct-ingest (SQLite) → epoch → auditor-server → YPIR
//! queries built from the served manifest, decoded and compared with the
//! filters built in the clear.

mod common;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use audit_proto::api::{ErrorBody, BATCH_SIZE_HEADER, OCTET_STREAM};
use audit_proto::{LeafHash, Manifest};
use auditor_server::service::Service;
use auditor_server::Config;
use pir_core::client::{Client, QueryKey};
use pir_core::params::DbShape;
use pir_core::sampler::PublicSeed;
use pir_core::wire::Response;

use common::{BoxErr, Pipeline, TestResult};

impl Pipeline {
    fn config(&self) -> Config {
        let mut c = Config {
            database_url: Some(self.db_url.clone()),
            epoch_dir: self.dir.path().join("epochs"),
            bind: "127.0.0.1:0".into(),
            ..Config::default()
        };
        c.schedule.reload_seconds = 0;
        c
    }
}

/// A running server.
struct Running {
    addr: SocketAddr,
    svc: Arc<Service>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<auditor_server::Result<()>>,
    http: reqwest::Client,
}

impl Running {
    /// Starts a server and waits until it serves an epoch.
    async fn start(config: Config) -> Result<Running, BoxErr> {
        let r = Self::spawn(config).await?;
        for _ in 0..600 {
            if let Ok(resp) = r.http.get(r.url("/healthz")).send().await {
                if resp.status() == 200 {
                    return Ok(r);
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err("server did not become healthy".into())
    }

    /// Starts a server without waiting for an epoch.
    async fn spawn(config: Config) -> Result<Running, BoxErr> {
        let svc = Arc::new(Service::new(config)?);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(svc.clone().run(listener, async {
            let _ = rx.await;
        }));
        let r = Running {
            addr,
            svc,
            stop: Some(tx),
            task,
            http: reqwest::Client::new(),
        };
        Ok(r)
    }

    /// The value of an unlabelled counter or gauge on `/metrics`.
    async fn metric(&self, name: &str) -> Result<f64, BoxErr> {
        let text = self
            .http
            .get(self.url("/metrics"))
            .send()
            .await?
            .text()
            .await?;
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
            .ok_or_else(|| format!("no {name} in:\n{text}").into())
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    async fn stop(mut self) -> TestResult {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        (&mut self.task).await??;
        Ok(())
    }

    async fn manifest(&self) -> Result<Manifest, BoxErr> {
        let resp = self.http.get(self.url("/v1/manifest")).send().await?;
        assert_eq!(resp.status(), 200);
        Ok(Manifest::from_json(&resp.bytes().await?)?)
    }

    /// Builds a query for (filter, bit of the filter) from the manifest.
    fn query(
        m: &Manifest,
        filter: u32,
        bit: u64,
    ) -> Result<(u32, Vec<u8>, Client, QueryKey, u32), BoxErr> {
        let (db, bit) = m.locate(filter, bit)?;
        let spec = &m.dbs[db as usize];
        let params = pir_core::params::by_id(m.pir.param_set)?;
        let shape = DbShape {
            ell1: spec.rows as usize,
            ell2: spec.cols as usize,
        };
        let client = Client::new(params, shape, PublicSeed(spec.seed))?;
        let (q, key, b) = client.query_bit(spec.bits, bit)?;
        let bytes = q.to_bytes();
        assert_eq!(bytes.len() as u64, spec.query_bytes);
        Ok((db, bytes, client, key, b))
    }

    async fn post(&self, epoch: u64, db: u32, body: Vec<u8>) -> Result<reqwest::Response, BoxErr> {
        Ok(self
            .http
            .post(self.url(&format!("/v1/epochs/{epoch}/dbs/{db}/query")))
            .header("content-type", OCTET_STREAM)
            .body(body)
            .send()
            .await?)
    }

    /// Privately reads one filter bit through HTTP.
    async fn read_bit(&self, m: &Manifest, filter: u32, bit: u64) -> Result<bool, BoxErr> {
        let (db, body, client, key, b) = Self::query(m, filter, bit)?;
        let resp = self.post(m.epoch, db, body).await?;
        let status = resp.status();
        let bytes = resp.bytes().await?;
        if status != 200 {
            return Err(format!("HTTP {status}: {}", String::from_utf8_lossy(&bytes)).into());
        }
        let r = Response::from_bytes(&bytes)?;
        Ok(client.extract_bit(&key, &r, b)?)
    }
}

/// Filter `f` of the manifest's epoch built in the clear from `hashes`.
fn clear_filter(m: &Manifest, f: u32, hashes: &[LeafHash]) -> Vec<bool> {
    let mut bits = vec![false; m.filter.bits as usize];
    for h in hashes {
        bits[m.filter.bit(f, h).unwrap() as usize] = true;
    }
    bits
}

fn hashes(p: &Pipeline) -> Vec<LeafHash> {
    p.issued.iter().map(|e| e.leaf_hash).collect()
}

async fn error_body(resp: reqwest::Response) -> Result<(u16, ErrorBody), BoxErr> {
    let status = resp.status().as_u16();
    let ct = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    assert!(
        ct.starts_with("application/json"),
        "status {status}: content-type {ct:?}"
    );
    Ok((status, serde_json::from_slice(&resp.bytes().await?)?))
}

/// The headline test: every bit of one filter read privately over HTTP
/// equals the filter built in the clear; every member answers 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bit_of_a_filter_matches_the_clear_filter() -> TestResult {
    let p = Pipeline::new(40).await?;
    let run = Running::start(p.config()).await?;
    let m = run.manifest().await?;
    assert_eq!(m.epoch, 1);
    assert_eq!(m.entries, 40);
    assert_eq!((m.filter.a, m.filter.k, m.filter.n), (768, 8, 40));
    assert_eq!(m.logs.len(), 1);
    assert_eq!(m.logs[0].verified_tree_size, 40);
    assert_eq!(m.logs[0].mmd_s, 3600);
    assert_eq!(m.logs[0].log_id, p.log.log_id());
    assert_eq!(
        m.filter.hash,
        audit_proto::HashVersion::V2,
        "new epochs use HASH_V2"
    );
    // The 768 filters map one entry to independent bits of 320: about
    // 320·(1 − e^(−768/320)) ≈ 291 distinct ones (σ ≈ 4).
    let h0 = hashes(&p)[0];
    let distinct: HashSet<_> = (0..768).map(|f| m.filter.bit(f, &h0).unwrap()).collect();
    assert!(
        (265..=315).contains(&distinct.len()),
        "{} distinct bits",
        distinct.len()
    );

    let hs = hashes(&p);
    let filter = 1 + (u32::from(m.filter.salt_seed[0]) % 766); // some filter in the middle
    let clear = clear_filter(&m, filter, &hs);
    let ones = clear.iter().filter(|b| **b).count();
    assert!(ones > 0 && ones <= 40);
    // Query all 320 bits, 4 in flight at a time (exercises batching too).
    let run = Arc::new(run);
    let m = Arc::new(m);
    let mut read = vec![false; clear.len()];
    for chunk in (0..clear.len()).collect::<Vec<_>>().chunks(4) {
        let tasks: Vec<_> = chunk
            .iter()
            .map(|&bit| {
                let (run, m) = (run.clone(), m.clone());
                tokio::spawn(async move {
                    run.read_bit(&m, filter, bit as u64)
                        .await
                        .map_err(|e| e.to_string())
                })
            })
            .collect();
        for (&bit, t) in chunk.iter().zip(tasks) {
            read[bit] = t.await??;
        }
    }
    assert_eq!(
        read, clear,
        "filter {filter} read over PIR differs from the clear filter"
    );
    // Members answer 1 in random filters (and in the first and last).
    for (i, h) in hs.iter().enumerate() {
        let f = match i {
            0 => 0,
            1 => 767,
            _ => (u32::from(h.as_bytes()[0]) << 8 | u32::from(h.as_bytes()[1])) % 768,
        };
        let bit = m.filter.bit(f, h)?;
        assert!(
            run.read_bit(&m, f, bit).await?,
            "member {i} answered 0 in filter {f}"
        );
    }
    let run = Arc::into_inner(run).ok_or("server still shared")?;
    // Metrics saw the queries.
    let text = run
        .http
        .get(run.url("/metrics"))
        .send()
        .await?
        .text()
        .await?;
    for name in [
        "auditor_queries_total{outcome=\"ok\"}",
        "auditor_batch_size_bucket",
        "auditor_answer_seconds_bucket",
        "auditor_query_bytes_total",
        "auditor_response_bytes_total",
        "auditor_epoch 1",
        "auditor_epoch_age_seconds",
        "auditor_ingest_lag_seconds{log_id=",
    ] {
        assert!(text.contains(name), "metrics lack {name}:\n{text}");
    }
    run.stop().await
}

/// A new epoch is published while clients stream queries against the old
/// one: none fails; after the grace period the old epoch is refused with
/// a pointer to the current one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn epoch_swap_during_a_query_stream_loses_none() -> TestResult {
    let p = Pipeline::new(24).await?;
    let mut config = p.config();
    config.epoch.grace_seconds = 8;
    config.schedule.reload_seconds = 1;
    let run = Arc::new(Running::start(config).await?);
    let m1 = Arc::new(run.manifest().await?);
    let hs = Arc::new(hashes(&p));
    // New certificates arrive and are ingested.
    let more = p.log.add_entries(8, 0.5).await?;
    p.ingest().await?;
    // A client keeps querying epoch 1 until 5 queries after the swap.
    let published = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stream = {
        let (run, m1, hs, published) = (run.clone(), m1.clone(), hs.clone(), published.clone());
        tokio::spawn(async move {
            let (mut before, mut after) = (0usize, 0usize);
            let mut i = 0usize;
            while after < 5 {
                let swapped = published.load(std::sync::atomic::Ordering::SeqCst);
                let f = (i as u32 * 31) % 768;
                let bit = m1
                    .filter
                    .bit(f, &hs[i % hs.len()])
                    .map_err(|e| e.to_string())?;
                if !run.read_bit(&m1, f, bit).await.map_err(|e| e.to_string())? {
                    return Err(format!("member answered 0 in epoch {}", m1.epoch));
                }
                if swapped {
                    after += 1;
                } else {
                    before += 1;
                }
                i += 1;
            }
            Ok::<_, String>((before, after))
        })
    };
    // Meanwhile: build and publish epoch 2 (as the schedule would).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let id = run.svc.build_and_publish(None).await?;
    let swap = std::time::Instant::now();
    published.store(true, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(id, 2);
    let (before, after) = stream.await??;
    assert!(
        before >= 1 && after == 5,
        "queries before/after the swap: {before}/{after}"
    );
    let m2 = run.manifest().await?;
    assert_eq!(m2.epoch, 2);
    assert_eq!(m2.entries, 32);
    assert_ne!(
        m2.filter.salt_seed, m1.filter.salt_seed,
        "fresh salt seed per epoch"
    );
    assert_ne!(
        m2.filter.entry_key, m1.filter.entry_key,
        "fresh filter keys per epoch"
    );
    assert_ne!(m2.dbs[0].seed, m1.dbs[0].seed, "fresh seeds per epoch");
    // The new certificates are members of epoch 2.
    for e in &more {
        let bit = m2.filter.bit(5, &e.leaf_hash)?;
        assert!(run.read_bit(&m2, 5, bit).await?);
    }
    // Still in grace: epoch 1 answers (checked only if this machine got
    // here well within the grace period).
    if swap.elapsed() < Duration::from_secs(6) {
        assert!(run.read_bit(&m1, 0, m1.filter.bit(0, &hs[0])?).await?);
    }
    // After the grace period (the reload tick sweeps it): 404 + current epoch.
    tokio::time::sleep(Duration::from_millis(9500).saturating_sub(swap.elapsed())).await;
    let (_, body, _, _, _) = Running::query(&m1, 0, 0)?;
    let (status, err) = error_body(run.post(1, 0, body).await?).await?;
    assert_eq!(
        (status, err.error.as_str(), err.current_epoch),
        (404, "unknown_epoch", Some(2))
    );
    let run = Arc::into_inner(run).ok_or("server still shared")?;
    run.stop().await
}

/// A restarted server serves the persisted epoch (same manifest, same
/// answers) without rebuilding it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_serves_the_persisted_epoch() -> TestResult {
    let p = Pipeline::new(16).await?;
    let run = Running::start(p.config()).await?;
    let m = run.manifest().await?;
    run.stop().await?;
    // The store is gone: a restart must not need it.
    let mut config = p.config();
    config.database_url = Some("sqlite:///nonexistent/dir/none.db".into());
    config.schedule.build_if_missing = false;
    let t = std::time::Instant::now();
    let run = Running::start(config).await?;
    eprintln!("restart to healthy: {:.2} s", t.elapsed().as_secs_f64());
    let m2 = run.manifest().await?;
    assert_eq!(m2, m, "same epoch, same manifest");
    for (i, e) in p.issued.iter().enumerate().take(6) {
        let f = (i as u32 * 97) % 768;
        assert!(
            run.read_bit(&m2, f, m2.filter.bit(f, &e.leaf_hash)?)
                .await?
        );
    }
    // A damaged artifact is detected: flip a bitmap byte, restart → refuses.
    run.stop().await?;
    let bits = p
        .config()
        .epoch_dir
        .join("epoch-000000000001")
        .join("db-0000.bits");
    let mut raw = std::fs::read(&bits)?;
    raw[100] ^= 0x10;
    std::fs::write(&bits, raw)?;
    let mut config = p.config();
    config.schedule.build_if_missing = false;
    let svc = Service::new(config)?;
    assert_eq!(
        svc.reload().await?,
        None,
        "a corrupt bitmap must be refused"
    );
    let refused = svc.refused_epochs();
    assert_eq!(refused.len(), 1);
    assert!(refused[0].1.contains("checksum"), "{refused:?}");
    assert_eq!(svc.state().metrics.epoch_failures.get(), 1);
    Ok(())
}

/// The manifest is bound to the databases built with it: one hex digit of
/// `filter.salt_seed` changed, or the manifest deleted, and a restarted
/// server refuses the epoch (not served, failure counted, reason given);
/// configured to build, it builds a fresh epoch instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_that_does_not_match_its_databases_is_refused() -> TestResult {
    let p = Pipeline::new(8).await?;
    let run = Running::start(p.config()).await?;
    let m = run.manifest().await?;
    run.stop().await?;
    let dir = p.config().epoch_dir.join("epoch-000000000001");
    let mpath = dir.join("manifest.json");
    let original = std::fs::read_to_string(&mpath)?;
    let mut offline = p.config();
    offline.database_url = Some("sqlite:///nonexistent/dir/none.db".into());
    offline.schedule.build_if_missing = false;

    // Unmodified: loads.
    let svc = Service::new(offline.clone())?;
    assert_eq!(svc.reload().await?, Some(1));
    assert!(svc.refused_epochs().is_empty());

    // One hex digit of the salt seed changed.
    let seed = audit_proto::hex::encode(&m.filter.salt_seed);
    let at = original
        .find(&seed)
        .ok_or("salt_seed not in manifest.json")?
        + 10;
    let mut tampered = original.clone().into_bytes();
    tampered[at] = if tampered[at] == b'0' { b'1' } else { b'0' };
    std::fs::write(&mpath, &tampered)?;
    let run = Running::spawn(offline.clone()).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, err) = error_body(run.http.get(run.url("/healthz")).send().await?).await?;
    assert_eq!((status, err.error.as_str()), (503, "no_epoch"));
    assert_eq!(run.metric("auditor_epoch_failures_total").await?, 1.0);
    let refused = run.svc.refused_epochs();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].1.contains("db-0000.bits") && refused[0].1.contains("another manifest"),
        "{refused:?}"
    );
    run.stop().await?;

    // Deleted: refused with a message, not skipped.
    std::fs::remove_file(&mpath)?;
    let svc = Service::new(offline.clone())?;
    assert_eq!(svc.reload().await?, None);
    let refused = svc.refused_epochs();
    assert!(
        refused[0].1.contains("manifest.json") && refused[0].1.contains("missing"),
        "{refused:?}"
    );
    assert_eq!(svc.state().metrics.epoch_failures.get(), 1);

    // Tampered again, with the store at hand and build_if_missing: the
    // refused epoch is replaced by a fresh build.
    std::fs::write(&mpath, &tampered)?;
    let run = Running::start(p.config()).await?;
    assert_eq!(run.manifest().await?.epoch, 2);
    assert_eq!(run.svc.refused_epochs().len(), 1);
    run.stop().await
}

/// A build that cannot reach its store is counted as a failure (and
/// retried); the server stays up answering 503 `no_epoch`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_store_build_failures_are_counted() -> TestResult {
    let dir = tempfile::tempdir()?;
    let config = Config {
        database_url: Some("sqlite:///nonexistent/dir/none.db".into()),
        epoch_dir: dir.path().join("epochs"),
        bind: "127.0.0.1:0".into(),
        ..Config::default()
    };
    let run = Running::spawn(config).await?;
    let mut failures = 0.0;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        failures = run.metric("auditor_epoch_failures_total").await?;
        if failures >= 1.0 {
            break;
        }
    }
    assert!(failures >= 1.0, "no failure counted");
    let (status, err) = error_body(run.http.get(run.url("/healthz")).send().await?).await?;
    assert_eq!((status, err.error.as_str()), (503, "no_epoch"));
    // Retried: a second attempt about a second later.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(run.metric("auditor_epoch_failures_total").await? >= 2.0);
    run.stop().await
}

/// Each kind of bad input gets its 4xx JSON answer, and the server keeps
/// answering good queries correctly afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_4xx_json() -> TestResult {
    let p = Pipeline::new(12).await?;
    let run = Running::start(p.config()).await?;
    let m = run.manifest().await?;
    let (_, good, _, _, _) = Running::query(&m, 3, 7)?;
    let e = m.epoch;

    let expect = |status: u16, code: &'static str| {
        move |(s, b): (u16, ErrorBody)| {
            assert_eq!((s, b.error.as_str()), (status, code), "{}", b.message);
            assert!(!b.message.is_empty());
        }
    };
    // Unknown epoch / db / path / method.
    expect(404, "unknown_epoch")(error_body(run.post(e + 5, 0, good.clone()).await?).await?);
    expect(404, "unknown_db")(error_body(run.post(e, 9, good.clone()).await?).await?);
    let r = run
        .http
        .post(run.url("/v1/epochs/x/dbs/0/query"))
        .body(good.clone())
        .send()
        .await?;
    expect(400, "bad_epoch")(error_body(r).await?);
    let r = run
        .http
        .get(run.url("/v1/epochs/1/dbs/0/query"))
        .send()
        .await?;
    expect(405, "method_not_allowed")(error_body(r).await?);
    let r = run.http.get(run.url("/v2/manifest")).send().await?;
    expect(404, "not_found")(error_body(r).await?);
    // Wrong content type.
    let r = run
        .http
        .post(run.url(&format!("/v1/epochs/{e}/dbs/0/query")))
        .header("content-type", "application/json")
        .body(good.clone())
        .send()
        .await?;
    expect(415, "unsupported_media_type")(error_body(r).await?);
    // Malformed: empty, truncated, garbage, trailing bytes, oversized.
    expect(400, "malformed_query")(error_body(run.post(e, 0, Vec::new()).await?).await?);
    expect(400, "malformed_query")(
        error_body(run.post(e, 0, good[..good.len() - 1].to_vec()).await?).await?,
    );
    expect(400, "malformed_query")(
        error_body(run.post(e, 0, vec![0xAB; good.len()]).await?).await?,
    );
    let mut trailing = good.clone();
    trailing.push(0);
    expect(413, "query_too_large")(error_body(run.post(e, 0, trailing).await?).await?);
    let huge = vec![0u8; auditor_server::max_query_body() + 1];
    expect(413, "query_too_large")(error_body(run.post(e, 0, huge).await?).await?);
    // Wrong seed: a query built for the same shape with another seed.
    let spec = &m.dbs[0];
    let shape = DbShape {
        ell1: spec.rows as usize,
        ell2: spec.cols as usize,
    };
    let other = Client::new(pir_core::params::TABLE1, shape, PublicSeed([0x42; 32]))?;
    let (q, _, _) = other.query_bit(spec.bits, 0)?;
    expect(400, "wrong_seed")(error_body(run.post(e, 0, q.to_bytes()).await?).await?);
    // Wrong parameter set (an insecure test set), same shape and seed.
    let toy = Client::new(pir_core::params::TOY, shape, PublicSeed(spec.seed))?;
    let (q, _, _) = toy.query_bit(spec.bits, 0)?;
    expect(400, "wrong_param_set")(error_body(run.post(e, 0, q.to_bytes()).await?).await?);
    // Wrong shape: same parameters and seed, a smaller database.
    let small = DbShape {
        ell1: shape.ell1 / 2,
        ell2: shape.ell2,
    };
    let c = Client::new(pir_core::params::TABLE1, small, PublicSeed(spec.seed))?;
    let (q, _) = c.query(0, 0)?;
    expect(400, "wrong_shape")(error_body(run.post(e, 0, q.to_bytes()).await?).await?);
    // Nothing changed: a good query still decodes right.
    let h = p.issued[0].leaf_hash;
    assert!(run.read_bit(&m, 3, m.filter.bit(3, &h)?).await?);
    let text = run
        .http
        .get(run.url("/metrics"))
        .send()
        .await?
        .text()
        .await?;
    assert!(
        text.contains("auditor_queries_total{outcome=\"wrong_seed\"} 1"),
        "{text}"
    );
    run.stop().await
}

/// Concurrency limit: with one slot and a long batch window, a second
/// concurrent query is shed with 503 + Retry-After.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_gets_503_with_retry_after() -> TestResult {
    let p = Pipeline::new(8).await?;
    let mut config = p.config();
    config.limits.max_concurrent_queries = 1;
    config.limits.batch_window_ms = 800;
    let run = Arc::new(Running::start(config).await?);
    let m = run.manifest().await?;
    let (_, q1, _, _, _) = Running::query(&m, 0, 0)?;
    let (_, q2, _, _, _) = Running::query(&m, 0, 1)?;
    // Two queries 200 ms apart: whichever reaches the server first holds the
    // only slot for the 800 ms batch window; the other must be shed. (The
    // order is not assumed, so a slow machine cannot make this flaky.)
    let send = |q: Vec<u8>, delay_ms: u64| {
        let run = run.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            let r = run.post(1, 0, q).await.map_err(|e| e.to_string())?;
            let retry = r
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let (status, code) = if r.status() == 200 {
                (200, String::new())
            } else {
                let (s, b) = error_body(r).await.map_err(|e| e.to_string())?;
                (s, b.error)
            };
            Ok::<_, String>((status, code, retry))
        })
    };
    let (a, b) = (send(q1, 0), send(q2, 200));
    let mut results = vec![a.await??, b.await??];
    results.sort();
    assert_eq!(results[0], (200, String::new(), None), "{results:?}");
    assert_eq!(
        results[1],
        (503, "overloaded".to_owned(), Some("1".to_owned())),
        "{results:?}"
    );
    let run = Arc::into_inner(run).ok_or("server still shared")?;
    run.stop().await
}

/// Queries arriving together are answered in one pass, and each batched
/// answer is byte-identical to the unbatched answer of the same query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_answers_equal_unbatched_ones() -> TestResult {
    let p = Pipeline::new(8).await?;
    let mut config = p.config();
    config.limits.batch_window_ms = 400;
    config.limits.max_batch = 8;
    let run = Arc::new(Running::start(config).await?);
    let m = run.manifest().await?;
    let mut queries = Vec::new();
    for i in 0..5u64 {
        let (_, q, client, key, b) = Running::query(&m, 2, i * 11)?;
        queries.push((q, client, key, b));
    }
    let tasks: Vec<_> = queries
        .iter()
        .map(|(q, ..)| {
            let (run, q) = (run.clone(), q.clone());
            tokio::spawn(async move {
                let r = run.post(1, 0, q).await.map_err(|e| e.to_string())?;
                let batch: usize = r
                    .headers()
                    .get(BATCH_SIZE_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse().ok())
                    .ok_or("no batch header")?;
                let timing = r
                    .headers()
                    .get("server-timing")
                    .ok_or("no server-timing")?
                    .to_str()
                    .map_err(|e| e.to_string())?
                    .to_owned();
                assert!(timing.starts_with("answer;dur="), "{timing}");
                Ok::<_, String>((batch, r.bytes().await.map_err(|e| e.to_string())?.to_vec()))
            })
        })
        .collect();
    let served = run.svc.state().registry.current().ok_or("no epoch")?;
    let server = served.dbs[0]
        .as_ref()
        .ok_or("database 0 not held")?
        .server
        .clone();
    let clear = clear_filter(&m, 2, &hashes(&p));
    let mut max_batch = 0;
    for (t, (q, client, key, b)) in tasks.into_iter().zip(&queries) {
        let (batch, bytes) = t.await??;
        max_batch = max_batch.max(batch);
        assert_eq!(
            bytes,
            server.answer_bytes(q)?,
            "batched answer differs from the single answer"
        );
        let bit = client.extract_bit(key, &Response::from_bytes(&bytes)?, *b)?;
        let i = queries.iter().position(|x| &x.0 == q).unwrap_or(0) as u64;
        assert_eq!(bit, clear[(i * 11) as usize]);
    }
    assert!(
        max_batch >= 2,
        "queries sent together were not batched (max batch {max_batch})"
    );
    drop(served);
    drop(server);
    let run = Arc::into_inner(run).ok_or("server still shared")?;
    run.stop().await
}

/// Writes `head` on a fresh connection to `addr`.
async fn raw_connect(addr: SocketAddr, head: &str) -> Result<tokio::net::TcpStream, BoxErr> {
    use tokio::io::AsyncWriteExt as _;
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(head.as_bytes()).await?;
    Ok(s)
}

/// Status code, lower-cased head, body and the time until its first byte
/// of the HTTP/1.1 response read from `r` until the server closes the
/// connection (`Connection: close` answers).
async fn read_closed_response<R: tokio::io::AsyncRead + Unpin>(
    mut r: R,
) -> Result<(u16, String, Vec<u8>, Duration), BoxErr> {
    use tokio::io::AsyncReadExt as _;
    let t = std::time::Instant::now();
    let mut raw = vec![0u8; 1];
    r.read_exact(&mut raw).await?;
    let first = t.elapsed();
    r.read_to_end(&mut raw).await?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no complete response: {text:?}"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no status line: {head:?}"))?;
    Ok((
        status,
        head.to_ascii_lowercase(),
        body.as_bytes().to_vec(),
        first,
    ))
}

fn query_head(epoch: u64, db: u32, content_length: u64) -> String {
    format!(
        "POST /v1/epochs/{epoch}/dbs/{db}/query HTTP/1.1\r\nhost: test\r\n\
         content-type: {OCTET_STREAM}\r\ncontent-length: {content_length}\r\n\r\n"
    )
}

/// Clients trickling their bodies a byte at a time, more of them than
/// there are answer slots, do not make an honest query fail: bodies are
/// read before a slot is taken. Each slow client gets 408 `body_timeout`
/// (JSON, connection closed) once its body deadline passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_bodies_hold_no_answer_slot() -> TestResult {
    let p = Pipeline::new(8).await?;
    let mut config = p.config();
    config.limits.max_concurrent_queries = 2;
    config.limits.body_timeout_ms = 1500;
    let run = Running::start(config).await?;
    let m = run.manifest().await?;
    let len = m.dbs[0].query_bytes;
    let mut slow = Vec::new();
    for _ in 0..6 {
        let s = raw_connect(run.addr, &query_head(m.epoch, 0, len)).await?;
        let (r, mut w) = s.into_split();
        let reader =
            tokio::spawn(async move { read_closed_response(r).await.map_err(|e| e.to_string()) });
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt as _;
            for _ in 0..25 {
                if w.write_all(&[0]).await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        slow.push((reader, writer));
    }
    // While every slow client is mid-body, an honest query is answered.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let h = p.issued[0].leaf_hash;
    assert!(run.read_bit(&m, 1, m.filter.bit(1, &h)?).await?);
    for (reader, writer) in slow {
        let resp = reader.await?;
        writer.abort();
        let (status, head, body, took) = resp?;
        assert_eq!(status, 408, "{head}");
        assert!(head.contains("connection: close"), "{head}");
        assert!(head.contains("content-type: application/json"), "{head}");
        let err: ErrorBody = serde_json::from_slice(&body)?;
        assert_eq!(err.error, "body_timeout", "{}", err.message);
        assert!(
            took >= Duration::from_millis(1400) && took < Duration::from_secs(4),
            "answered after {took:?}"
        );
    }
    let text = run
        .http
        .get(run.url("/metrics"))
        .send()
        .await?
        .text()
        .await?;
    assert!(
        text.contains("auditor_queries_total{outcome=\"body_timeout\"} 6"),
        "{text}"
    );
    // Every outcome is exported from the start; none was overloaded.
    assert!(
        text.contains("auditor_queries_total{outcome=\"overloaded\"} 0"),
        "{text}"
    );
    run.stop().await
}

/// A declared body larger than the database's queries is refused with 413
/// at once, before any of it is sent; a query without Content-Type is
/// taken as application/octet-stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impossible_content_length_is_refused_at_once() -> TestResult {
    let p = Pipeline::new(8).await?;
    let mut config = p.config();
    config.limits.body_timeout_ms = 20_000;
    let run = Running::start(config).await?;
    let m = run.manifest().await?;
    for declared in [m.dbs[0].query_bytes + 1, 1 << 40] {
        let s = raw_connect(run.addr, &query_head(m.epoch, 0, declared)).await?;
        let (status, head, body, first) =
            tokio::time::timeout(Duration::from_secs(5), read_closed_response(s)).await??;
        assert!(first < Duration::from_secs(2), "answered after {first:?}");
        assert_eq!(status, 413, "{head}");
        assert!(head.contains("connection: close"), "{head}");
        let err: ErrorBody = serde_json::from_slice(&body)?;
        assert_eq!(err.error, "query_too_large", "{}", err.message);
    }
    // A client that sends its (too large) body anyway, after the server
    // has answered, still reads the 413: the server drains its input while
    // closing instead of resetting the connection.
    let mut s = raw_connect(run.addr, &query_head(m.epoch, 0, 1 << 30)).await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    {
        use tokio::io::AsyncWriteExt as _;
        let chunk = vec![0u8; 64 << 10];
        for _ in 0..32 {
            s.write_all(&chunk).await?;
        }
    }
    let (status, _, body, _) =
        tokio::time::timeout(Duration::from_secs(5), read_closed_response(s)).await??;
    assert_eq!(status, 413);
    assert_eq!(
        serde_json::from_slice::<ErrorBody>(&body)?.error,
        "query_too_large"
    );
    // No Content-Type: accepted.
    let (db, body, client, key, b) = Running::query(&m, 4, 0)?;
    let resp = run
        .http
        .post(run.url(&format!("/v1/epochs/{}/dbs/{db}/query", m.epoch)))
        .body(body)
        .send()
        .await?;
    assert_eq!(resp.status(), 200);
    let r = Response::from_bytes(&resp.bytes().await?)?;
    assert_eq!(
        client.extract_bit(&key, &r, b)?,
        clear_filter(&m, 4, &hashes(&p))[0]
    );
    run.stop().await
}

/// Reads one HTTP/1.1 response with a `content-length` from a keep-alive
/// connection: its status.
async fn read_keepalive_response(s: &mut tokio::net::TcpStream) -> Result<u16, BoxErr> {
    use tokio::io::AsyncReadExt as _;
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = s.read(&mut buf).await?;
        if n == 0 {
            return Err(format!("closed mid-response: {raw:?}").into());
        }
        raw.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&raw).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().to_owned())
                })
                .and_then(|v| v.parse().ok())
                .ok_or("no content-length")?;
            if body.len() >= len {
                return head
                    .split_whitespace()
                    .nth(1)
                    .and_then(|c| c.parse().ok())
                    .ok_or_else(|| "no status".into());
            }
        }
    }
}

/// How long until the server closes `s`, and the bytes it sent first.
async fn time_to_close(mut s: tokio::net::TcpStream) -> Result<(Duration, Vec<u8>), BoxErr> {
    use tokio::io::AsyncReadExt as _;
    let t = std::time::Instant::now();
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut got)).await??;
    Ok((t.elapsed(), got))
}

const HEALTHZ: &str = "GET /healthz HTTP/1.1\r\nhost: test\r\n\r\n";

/// A connection that sends nothing, one that sends its head too slowly,
/// and a keep-alive connection left idle after a response are closed
/// after the header and idle timeouts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_slow_header_connections_are_closed() -> TestResult {
    let p = Pipeline::new(8).await?;
    let mut config = p.config();
    config.limits.header_timeout_ms = 400;
    config.limits.idle_timeout_ms = 900;
    let run = Running::start(config).await?;
    // Nothing sent: closed after the header timeout, without an answer.
    let silent = tokio::spawn(time_to_close(raw_connect(run.addr, "").await?));
    // A head trickled a header line every 100 ms: closed 400 ms after its
    // first byte, without an answer.
    let s = raw_connect(run.addr, "GET /healthz HTTP/1.1\r\n").await?;
    let (r, mut w) = s.into_split();
    let trickle = tokio::spawn(async move {
        use tokio::io::AsyncWriteExt as _;
        for i in 0..50 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if w.write_all(format!("x-{i}: y\r\n").as_bytes())
                .await
                .is_err()
            {
                break;
            }
        }
    });
    let slow = tokio::spawn(async move {
        use tokio::io::AsyncReadExt as _;
        let t = std::time::Instant::now();
        let mut r = r;
        let mut got = Vec::new();
        let res = tokio::time::timeout(Duration::from_secs(10), r.read_to_end(&mut got)).await;
        (t.elapsed(), got, res.is_ok())
    });
    // Keep-alive: answered, then closed after the idle timeout (longer
    // than the header timeout).
    let mut ka = raw_connect(run.addr, HEALTHZ).await?;
    assert_eq!(read_keepalive_response(&mut ka).await?, 200);
    let (idle, rest) = time_to_close(ka).await?;
    assert!(rest.is_empty());
    assert!(
        idle >= Duration::from_millis(800) && idle < Duration::from_millis(2500),
        "idle keep-alive closed after {idle:?}"
    );

    let (took, got) = silent.await??;
    assert!(got.is_empty(), "{got:?}");
    assert!(
        took >= Duration::from_millis(350) && took < Duration::from_millis(2000),
        "silent connection closed after {took:?}"
    );
    let (took, got, closed) = slow.await?;
    trickle.abort();
    assert!(closed, "slow head not closed within 10 s");
    assert!(got.is_empty(), "{:?}", String::from_utf8_lossy(&got));
    assert!(
        took >= Duration::from_millis(350) && took < Duration::from_millis(2000),
        "slow head closed after {took:?}"
    );
    run.stop().await
}

/// With `max_connections` = 8 and 8 connections open, a new connection is
/// not accepted until one of them closes (here: by the idle timeout); it
/// is then served normally.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_cap_defers_new_connections() -> TestResult {
    let p = Pipeline::new(8).await?;
    let mut config = p.config();
    config.limits.max_connections = 8;
    config.limits.header_timeout_ms = 5000;
    config.limits.idle_timeout_ms = 800;
    let run = Running::start(config).await?;
    let open = run.svc.state().metrics.open_connections.clone();
    // The start-up health checks' connection idles out first.
    for _ in 0..100 {
        if open.get() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(open.get(), 0);
    let mut held = Vec::new();
    for _ in 0..8 {
        let mut s = raw_connect(run.addr, HEALTHZ).await?;
        assert_eq!(read_keepalive_response(&mut s).await?, 200);
        held.push(s);
    }
    let idle_from = std::time::Instant::now();
    assert_eq!(open.get(), 8);
    let fresh = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()?;
    let resp = fresh.get(run.url("/healthz")).send().await?;
    let waited = idle_from.elapsed();
    assert_eq!(resp.status(), 200);
    assert!(
        waited >= Duration::from_millis(600) && waited < Duration::from_secs(4),
        "the ninth connection was served after {waited:?}"
    );
    drop(held);
    drop(fresh);
    run.stop().await
}
