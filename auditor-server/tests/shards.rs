//! Sharded mode over real HTTP on 127.0.0.1: one epoch planned once
//! (`plan::plan_epoch`), three shard servers in this process building
//! their databases of it from the same store, and a single server built
//! from the same seeds. Audits routed through the served manifest
//! (browser-client's `Prober` and `Auditor`) must read exactly the bits
//! the single server gives; a misrouted query gets 421 naming the right
//! shard; a restarted shard serves its persisted databases; epochs that
//! do not fit a shard are refused with clear errors. Tiny parameters: the
//! insecure toy parameter set, 12 filters in 6 databases.

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use audit_proto::api::{ErrorBody, OCTET_STREAM};
use audit_proto::Manifest;
use auditor_server::plan::{self, EpochSpec};
use auditor_server::service::Service;
use auditor_server::Config;
use browser_client::net::Auditor;
use browser_client::probe::Prober;
use common::{BoxErr, Pipeline as Store, TestResult};

const SHARDS: u32 = 3;
const FILTERS: u32 = 12;

impl Store {
    /// A server configuration on this store with tiny parameters: 12
    /// filters of 8·N bits, two per database (6 databases).
    fn config(&self, name: &str, entries: u64) -> Config {
        let mut c = Config {
            database_url: Some(self.db_url.clone()),
            epoch_dir: self.dir.path().join(name),
            bind: "127.0.0.1:0".into(),
            ..Config::default()
        };
        c.epoch.param_set = "toy-insecure-d64".into();
        c.epoch.allow_insecure_params = true;
        c.epoch.filters = FILTERS;
        let filter_bits = audit_proto::filter::FilterSpec::capacity_for(entries) * 8;
        c.epoch.db_bits_target = 2 * filter_bits;
        c.schedule.reload_seconds = 1;
        c
    }

    async fn plan(&self, config: &Config, epoch: u64) -> Result<EpochSpec, BoxErr> {
        let store = ct_store::Store::connect(&self.db_url).await?;
        let spec = plan::plan_epoch(&store, config, epoch, auditor_server::epoch::unix_now_s());
        let spec = spec.await;
        store.close().await;
        Ok(spec?)
    }
}

/// A server running on a listener bound before its configuration was
/// written (so the shard URLs can name the ports).
struct Running {
    addr: SocketAddr,
    svc: Arc<Service>,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<auditor_server::Result<()>>,
}

impl Running {
    fn start(config: Config, listener: tokio::net::TcpListener) -> Result<Running, BoxErr> {
        let addr = listener.local_addr()?;
        let svc = Arc::new(Service::new(config)?);
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(svc.clone().run(listener, async {
            let _ = rx.await;
        }));
        Ok(Running {
            addr,
            svc,
            stop,
            task,
        })
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Waits for `/readyz`; returns its JSON.
    async fn ready(&self, http: &reqwest::Client) -> Result<serde_json::Value, BoxErr> {
        for _ in 0..600 {
            if let Ok(r) = http.get(format!("{}/readyz", self.url())).send().await {
                if r.status() == 200 {
                    return Ok(serde_json::from_slice(&r.bytes().await?)?);
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(format!("{} did not become ready", self.url()).into())
    }

    async fn stop(self) -> TestResult {
        let _ = self.stop.send(());
        self.task.await??;
        Ok(())
    }
}

fn write_spec(dir: &Path, name: &str, spec: &EpochSpec) -> Result<PathBuf, BoxErr> {
    let path = dir.join(name);
    spec.write(&path)?;
    Ok(path)
}

async fn manifest_bytes(http: &reqwest::Client, base: &str) -> Result<Vec<u8>, BoxErr> {
    let r = http.get(format!("{base}/v1/manifest")).send().await?;
    assert_eq!(r.status(), 200);
    Ok(r.bytes().await?.to_vec())
}

async fn same_bits(
    store: &Store,
    filters: impl Iterator<Item = u32>,
    a: (&Prober, &Auditor),
    b: (&Prober, &Auditor),
) -> Result<usize, BoxErr> {
    common::same_bits(&store.hashes(), filters, a, Some(b)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_answer_exactly_what_one_server_answers() -> TestResult {
    let store = Store::new(40).await?;
    let http = reqwest::Client::new();

    // Shard URLs name listeners bound up front.
    let mut listeners = Vec::new();
    for _ in 0..SHARDS {
        listeners.push(tokio::net::TcpListener::bind("127.0.0.1:0").await?);
    }
    let urls: Vec<String> = listeners
        .iter()
        .map(|l| Ok::<_, std::io::Error>(format!("http://{}", l.local_addr()?)))
        .collect::<Result<_, _>>()?;
    let shard_config = |i: u32, spec: Option<PathBuf>| {
        let mut c = store.config(&format!("shard-{i}"), 40);
        c.shard.index = i;
        c.shard.count = SHARDS;
        c.shard.urls = urls.clone();
        c.shard.epoch_spec = spec;
        c
    };
    let spec = store.plan(&shard_config(0, None), 1).await?;
    assert_eq!(spec.manifest.dbs.len(), 6);
    assert_eq!(spec.manifest.entries, 40);
    // `epoch plan` measured the fill ratio the shards serve.
    let fill = spec.manifest.fill_ratio.expect("planned fill ratio").get();
    assert!(
        fill > 0.0 && fill <= 40.0 / spec.manifest.filter.bits as f64,
        "{fill}"
    );
    let spec_path = write_spec(store.dir.path(), "spec.json", &spec)?;
    assert_eq!(EpochSpec::read(&spec_path)?.0, spec);

    // The same epoch, same seeds, on one server.
    let mut single_spec = spec.clone();
    single_spec.manifest.shards = None;
    single_spec.manifest.version = audit_proto::manifest::MANIFEST_VERSION_UNSHARDED;
    let single_path = write_spec(store.dir.path(), "single.json", &single_spec)?;
    let mut single_config = store.config("single", 40);
    single_config.shard.epoch_spec = Some(single_path);

    let mut shards = Vec::new();
    for (i, l) in (0..SHARDS).zip(listeners) {
        shards.push(Running::start(shard_config(i, Some(spec_path.clone())), l)?);
    }
    let single = Running::start(
        single_config,
        tokio::net::TcpListener::bind("127.0.0.1:0").await?,
    )?;
    for (i, s) in shards.iter().enumerate() {
        let r = s.ready(&http).await?;
        assert_eq!(
            (r["epoch"].as_u64(), r["of"].as_u64()),
            (Some(1), Some(6)),
            "{r}"
        );
        assert_eq!(r["databases"], 2, "shard {i}: {r}");
    }
    assert_eq!(single.ready(&http).await?["databases"], 6);

    // Every shard serves the same manifest bytes, with the shard map.
    let bytes = manifest_bytes(&http, &shards[0].url()).await?;
    for s in &shards[1..] {
        assert_eq!(manifest_bytes(&http, &s.url()).await?, bytes);
    }
    let m = Manifest::from_json(&bytes)?;
    assert_eq!(m, spec.manifest);
    assert_eq!(m.shard_url(4), Some(urls[1].as_str()));
    let m1 = Manifest::from_json(&manifest_bytes(&http, &single.url()).await?)?;
    assert_eq!(m1, single_spec.manifest);

    // Audits routed by the manifest read what the single server reads.
    let sharded = (
        &Prober::new(Arc::new(m.clone())),
        &Auditor::new(&shards[0].url())?,
    );
    let one = (&Prober::new(Arc::new(m1)), &Auditor::new(&single.url())?);
    let read = same_bits(&store, 0..FILTERS, sharded, one).await?;
    assert_eq!(read, FILTERS as usize * 14);
    for s in &shards {
        let text = http
            .get(format!("{}/metrics", s.url()))
            .send()
            .await?
            .text()
            .await?;
        let ok: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("auditor_queries_total{outcome=\"ok\"} "))
            .ok_or("no ok count")?
            .parse()?;
        assert_eq!(ok, 4.0 * 14.0, "each shard answers its 4 filters' queries");
    }

    // A query for shard 1's database 4 sent to shard 0: 421, naming shard 1.
    let q = sharded.0.prepare_bit(8, 3)?;
    assert_eq!(q.db, 4);
    let resp = http
        .post(format!("{}{}", shards[0].url(), q.path))
        .header("content-type", OCTET_STREAM)
        .body(q.body.clone())
        .send()
        .await?;
    assert_eq!(resp.status(), 421);
    assert_eq!(
        resp.headers().get("connection").map(|v| v.as_bytes()),
        Some(&b"close"[..])
    );
    let err: ErrorBody = serde_json::from_slice(&resp.bytes().await?)?;
    assert_eq!(err.error, "wrong_shard");
    assert_eq!(err.shard_url.as_deref(), Some(urls[1].as_str()));
    assert_eq!(err.current_epoch, Some(1));
    assert!(err.message.contains(&urls[1]), "{}", err.message);
    // A database that does not exist is still 404.
    let resp = http
        .post(format!("{}/v1/epochs/1/dbs/6/query", shards[0].url()))
        .body(Vec::new())
        .send()
        .await?;
    assert_eq!(resp.status(), 404);

    // Shard 1 restarts on its port: it loads its two persisted databases
    // (no rebuild) and answers them again.
    let restarted = shards.remove(1);
    let addr = restarted.addr;
    let build_json = store
        .dir
        .path()
        .join("shard-1/epoch-000000000001/build.json");
    let built_at = std::fs::metadata(&build_json)?.modified()?;
    restarted.stop().await?;
    let mut listener = None;
    for _ in 0..100 {
        match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => {
                listener = Some(l);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    let again = Running::start(
        shard_config(1, Some(spec_path.clone())),
        listener.ok_or("could not bind shard 1's port again")?,
    )?;
    let r = again.ready(&http).await?;
    assert_eq!(
        (r["epoch"].as_u64(), r["databases"].as_u64()),
        (Some(1), Some(2))
    );
    let read = same_bits(&store, [2, 3, 8, 9].into_iter(), sharded, one).await?;
    assert_eq!(read, 4 * 14);
    assert_eq!(std::fs::metadata(&build_json)?.modified()?, built_at);
    assert!(again.svc.refused_epochs().is_empty());
    let q = sharded.0.prepare_bit(0, 1)?;
    let resp = http
        .post(format!("{}{}", again.url(), q.path))
        .body(q.body.clone())
        .send()
        .await?;
    assert_eq!(resp.status(), 421);

    again.stop().await?;
    for s in shards {
        s.stop().await?;
    }
    single.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn epochs_that_do_not_fit_a_shard_are_refused() -> TestResult {
    let store = Store::new(24).await?;
    let urls: Vec<String> = (0..SHARDS).map(|i| format!("http://s{i}:8080")).collect();
    let mut config = store.config("planned", 24);
    config.shard.count = SHARDS;
    config.shard.urls = urls.clone();

    // Invalid shard settings are configuration errors at start-up.
    let mut bad = config.clone();
    bad.shard.index = SHARDS;
    let e = Service::new(bad).unwrap_err().to_string();
    assert!(e.contains("index = 3 must be below count = 3"), "{e}");
    let mut bad = config.clone();
    bad.shard.urls.pop();
    let e = Service::new(bad).unwrap_err().to_string();
    assert!(e.contains("2 URLs for count = 3"), "{e}");

    // An explicit map that does not cover the epoch's databases: plan refuses.
    let mut listed = config.clone();
    listed.shard.lists = Some(vec![vec![0, 3], vec![1, 4], vec![2]]);
    let e = store.plan(&listed, 1).await.unwrap_err().to_string();
    assert!(e.contains("database 5 is assigned to no shard"), "{e}");

    let spec = store.plan(&config, 1).await?;
    let db = ct_store::Store::connect(&store.db_url).await?;
    let bp = auditor_server::epoch::BuildParams::from_config(&config)?;
    let build = |shard: auditor_server::config::ShardConfig, dir: &str| {
        let dir = auditor_server::epochdir::EpochDir::open(&store.dir.path().join(dir));
        let (db, spec, bp) = (&db, &spec, &bp);
        async move { plan::build_from_spec(db, &dir?, spec, &shard, bp, 3).await }
    };

    // Planned for 3 shards, configured as one of 2.
    let mut two = config.shard.clone();
    two.count = 2;
    two.urls.pop();
    let e = build(two, "two").await.unwrap_err().to_string();
    assert!(
        e.contains("planned for 3 shard(s)") && e.contains("shard 0 of 2"),
        "{e}"
    );

    // An explicit list for this shard that is not the plan's.
    let mut listed = config.shard.clone();
    listed.databases = Some(vec![0, 1]);
    let e = build(listed, "listed").await.unwrap_err().to_string();
    assert!(
        e.contains("differ from what epoch 1 assigns to shard 0: [0, 3]"),
        "{e}"
    );

    // The store changed after the plan: the shard refuses instead of
    // building databases that differ from the other shards', and leaves
    // no partial build behind.
    store.log.add_entries(3, 0.0).await?;
    store.ingest().await?;
    let e = build(config.shard.clone(), "changed").await.unwrap_err();
    assert!(
        matches!(
            e,
            auditor_server::Error::SnapshotMismatch {
                want_entries: 24,
                got_entries: 27,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("plan the epoch again"), "{e}");
    let left: Vec<_> = std::fs::read_dir(store.dir.path().join("changed"))?.collect();
    assert!(left.is_empty(), "{left:?}");
    db.close().await;
    Ok(())
}

/// A build that would not fit in the memory budget is refused before
/// anything is allocated, names the shard count and the db_bits_target
/// that would fit, and leaves nothing behind; the same epoch split over
/// three shards fits the same budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builds_that_would_not_fit_in_memory_are_refused() -> TestResult {
    use auditor_server::memory;
    let store = Store::new(24).await?;
    let mut config = store.config("single", 24);
    // Room for the snapshot and two of the six databases, not three.
    let spec = store.plan(&config, 1).await?;
    let m = &spec.manifest;
    let two = memory::need(m, &[0, 1], true)?.peak();
    let three = memory::need(m, &[0, 1, 2], true)?.peak();
    assert!(two < three);
    config.epoch.max_memory_bytes = (two + three) / 2;

    let svc = Service::new(config.clone())?;
    let e = svc.build_and_publish(None).await.unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, auditor_server::Error::Memory(_)), "{msg}");
    assert!(
        msg.contains("shard 0 of 1") && msg.contains("6 of 6 databases"),
        "{msg}"
    );
    assert!(msg.contains("max_memory_bytes"), "{msg}");
    assert!(msg.contains("[shard] count = 3"), "{msg}");
    assert!(msg.contains("db_bits_target = "), "{msg}");
    assert_eq!(svc.epoch_dir().list()?, Vec::<u64>::new());
    let left: Vec<_> = std::fs::read_dir(svc.epoch_dir().root())?.collect();
    assert!(left.is_empty(), "{left:?}");

    // A third of the epoch per shard fits.
    let mut shard = config.clone();
    shard.epoch_dir = store.dir.path().join("shard-2");
    shard.shard.index = 2;
    shard.shard.count = SHARDS;
    shard.shard.urls = (0..SHARDS).map(|i| format!("http://s{i}")).collect();
    let spec = store.plan(&shard, 1).await?;
    let path = write_spec(store.dir.path(), "spec.json", &spec)?;
    shard.shard.epoch_spec = Some(path);
    let svc = Service::new(shard)?;
    assert_eq!(svc.build_and_publish(None).await?, 1);
    let served = svc.state().registry.current().ok_or("not published")?;
    assert_eq!(served.own_count(), 2);
    Ok(())
}

/// A front like the Helm chart's Ingress (docs/deploy-kubernetes.md): one
/// address that forwards `/g/{i}/…` unchanged to group i's server and
/// every other path to `backends[0]` (the manifest). Only what the API
/// needs is carried: method, path, `Content-Type`, body; status,
/// `Content-Type` and body back.
async fn start_front(
    listener: tokio::net::TcpListener,
    backends: Vec<String>,
) -> tokio::task::JoinHandle<()> {
    use axum::body::Body;
    use axum::http::{Request, Response};
    let http = reqwest::Client::new();
    let forward = move |req: Request<Body>| {
        let (http, backends) = (http.clone(), backends.clone());
        async move {
            let path = req.uri().path().to_owned();
            let group = path
                .strip_prefix("/g/")
                .and_then(|r| r.split('/').next())
                .and_then(|g| g.parse::<usize>().ok());
            let backend = &backends[group.unwrap_or(0)];
            let method = req.method().clone();
            let ct = req.headers().get("content-type").cloned();
            let body = axum::body::to_bytes(req.into_body(), 8 << 20)
                .await
                .unwrap_or_default();
            let mut out = http.request(method, format!("{backend}{path}")).body(body);
            if let Some(ct) = ct {
                out = out.header("content-type", ct);
            }
            let resp = out.send().await.expect("backend answers");
            let mut back = Response::builder().status(resp.status());
            if let Some(ct) = resp.headers().get("content-type") {
                back = back.header("content-type", ct);
            }
            back.body(Body::from(resp.bytes().await.unwrap_or_default()))
                .expect("response")
        }
    };
    let app = axum::Router::new().fallback(forward);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    })
}

/// One public address routed by path: the manifest names group URLs
/// `http://front/g/{i}`, each server answers its API under its own
/// group's path, the client (browser-client's `Auditor`) joins those URLs
/// with the query paths, and a query sent to the wrong group is answered
/// 421 naming the right group's URL, which the client follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_host_routes_queries_by_path_to_groups() -> TestResult {
    let store = Store::new(40).await?;
    let http = reqwest::Client::new();
    let front = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let front_url = format!("http://{}", front.local_addr()?);
    let mut listeners = Vec::new();
    for _ in 0..SHARDS {
        listeners.push(tokio::net::TcpListener::bind("127.0.0.1:0").await?);
    }
    let direct: Vec<String> = listeners
        .iter()
        .map(|l| Ok::<_, std::io::Error>(format!("http://{}", l.local_addr()?)))
        .collect::<Result<_, _>>()?;
    let shard_config = |i: u32, spec: Option<PathBuf>| {
        let mut c = store.config(&format!("group-{i}"), 40);
        c.shard.index = i;
        c.shard.count = SHARDS;
        c.shard.url_template = Some(format!("{front_url}/g/{{i}}"));
        c.shard.epoch_spec = spec;
        c
    };
    let spec = store.plan(&shard_config(0, None), 1).await?;
    let spec_path = write_spec(store.dir.path(), "spec.json", &spec)?;
    let mut shards = Vec::new();
    for (i, l) in (0..SHARDS).zip(listeners) {
        shards.push(Running::start(shard_config(i, Some(spec_path.clone())), l)?);
    }
    for s in &shards {
        s.ready(&http).await?;
    }
    let _front = start_front(front, direct.clone()).await;

    // The manifest through the front names every group under its path.
    let auditor = Auditor::new(&front_url)?;
    let (m, _) = auditor.manifest().await?;
    assert_eq!(m.shard_url(4), Some(format!("{front_url}/g/1").as_str()));
    // Each server answers under its own path (and still at the root).
    let r = http.get(format!("{front_url}/g/2/readyz")).send().await?;
    assert_eq!(r.status(), 200);
    let r = http.get(format!("{}/g/1/readyz", direct[1])).send().await?;
    assert_eq!(r.status(), 200);

    // Audits through the one address read the true bits.
    let prober = Prober::new(Arc::new(m.clone()));
    let read = common::same_bits(&store.hashes(), 0..FILTERS, (&prober, &auditor), None).await?;
    assert_eq!(read, FILTERS as usize * 14);

    // Database 4 is group 1's: sent under /g/0 it is answered 421 naming
    // /g/1 of the same host.
    let q = prober.prepare_bit(8, 3)?;
    assert_eq!(q.db, 4);
    assert_eq!(q.url(&front_url), format!("{front_url}/g/1{}", q.path));
    let resp = http
        .post(format!("{front_url}/g/0{}", q.path))
        .header("content-type", OCTET_STREAM)
        .body(q.body.clone())
        .send()
        .await?;
    assert_eq!(resp.status(), 421);
    let err: ErrorBody = serde_json::from_slice(&resp.bytes().await?)?;
    assert_eq!(err.error, "wrong_shard");
    assert_eq!(err.shard_url, Some(format!("{front_url}/g/1")));
    // A client whose shard map is stale follows that answer once, to the
    // right group, and reads the bit.
    let mut stale = prober.prepare_bit(8, 3)?;
    stale.shard_url = Some(format!("{front_url}/g/0"));
    let (bit, _) = auditor.query(&stale).await?;
    let (want, _) = auditor.query(&prober.prepare_bit(8, 3)?).await?;
    assert_eq!(bit, want);

    for s in shards {
        s.stop().await?;
    }
    Ok(())
}
