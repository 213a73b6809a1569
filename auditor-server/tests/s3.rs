//! The object store's S3 code path against a real S3-compatible server:
//! moto's standalone server (`moto_server`, from PyPI `moto[server]`;
//! `.ci/run` installs it) on 127.0.0.1. A prepared epoch whose snapshot
//! spans three part objects, read back and verified; ready
//! markers, the published marker, listing, pruning, and a damaged
//! snapshot refused. Skipped, saying so, when `moto_server` is not on
//! PATH.
#![cfg(unix)]

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use auditor_server::objstore::{Objects, PublishedMarker, ReadyMarker};
use common::{free_port, TestResult};
use sha2::{Digest, Sha256};

fn on_path(bin: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(bin))
            .find(|f| f.is_file())
    })
}

/// A moto server, killed on drop.
struct Moto(std::process::Child);

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_path_against_moto() -> TestResult {
    let Some(moto) = on_path("moto_server") else {
        eprintln!(
            "skipped: moto_server is not on PATH (pip install 'moto[server]'); \
             the S3 path is not exercised"
        );
        return Ok(());
    };
    let port = free_port()?;
    let _server = Moto(
        Command::new(moto)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    let endpoint = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        // Creating the bucket also tells that the server is up.
        match http.put(format!("{endpoint}/ct-auditor")).send().await {
            Ok(r) if r.status().is_success() => break,
            r => {
                if Instant::now() > deadline {
                    return Err(format!("moto_server did not come up: {r:?}").into());
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    let vars = [
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ENDPOINT_URL", endpoint.as_str()),
        ("AWS_ALLOW_HTTP", "true"),
        ("UNRELATED", "ignored"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()));
    let objects = Objects::open_with("s3://ct-auditor/prod/epochs-test", vars)?;
    assert_eq!(objects.newest_prepared().await?, None);

    // 17 MiB of leaf hashes: two parts of the multipart upload.
    let mut hashes: Vec<[u8; 32]> = (0u32..557_056)
        .map(|i| Sha256::digest(i.to_be_bytes()).into())
        .collect();
    hashes.sort_unstable();
    let mut config = auditor_server::Config::default();
    config.epoch.param_set = "toy-insecure-d64".into();
    config.epoch.allow_insecure_params = true;
    config.epoch.filters = 4;
    config.shard.count = 2;
    config.shard.urls = vec!["http://a:8080".into(), "http://b:8080".into()];
    let snap = |hashes: Vec<[u8; 32]>| auditor_server::epoch::Snapshot {
        now_s: 1_700_000_000,
        hashes,
        coverage: vec![],
    };
    let s1 = snap(hashes);
    let spec = auditor_server::plan::plan_snapshot(&s1, &config, 1)?;
    let bytes = objects.prepare_in_parts(&spec, &s1.hashes, 1 << 18).await?;
    {
        use auditor_server::snapshot::{index_len, part_len};
        assert_eq!(
            bytes,
            2 * part_len(1 << 18) + part_len(557_056 - (2 << 18)) + index_len(3)
        );
    }
    assert_eq!(objects.newest_prepared().await?, Some(1));
    assert_eq!(objects.spec(1).await?.as_ref(), Some(&spec));
    assert!(objects.read_snapshot(&spec).await? == s1.hashes);

    let m = &spec.manifest;
    let digest = auditor_server::layout::manifest_digest(&m.to_json());
    let map = m.shards.as_ref().ok_or("no shard map")?;
    let files = tempfile::tempdir()?;
    let mut all = Vec::new();
    for shard in 0..2 {
        // Each database's files through S3 multipart uploads and back.
        let databases = map.databases_of(shard, m.dbs.len() as u32);
        let mut artifacts = Vec::new();
        for &db in &databases {
            std::fs::write(
                files.path().join(format!("db-{db:04}.bits")),
                vec![db as u8; 5 << 20],
            )?;
            std::fs::write(files.path().join(format!("db-{db:04}.hint")), b"hint")?;
            artifacts.push(objects.upload_db(1, db, files.path()).await?);
        }
        let back = tempfile::tempdir()?;
        for a in &artifacts {
            objects.download_db(1, a, back.path()).await?;
            let db = a.db;
            assert_eq!(
                std::fs::read(back.path().join(format!("db-{db:04}.bits")))?,
                vec![db as u8; 5 << 20]
            );
        }
        all.extend(artifacts.iter().cloned());
        objects
            .write_ready(&ReadyMarker {
                epoch: 1,
                shard,
                count: 2,
                databases,
                manifest_sha256: digest,
                spec_sha256: spec.digest(),
                artifacts,
                at: 0,
            })
            .await?;
    }
    assert_eq!(objects.ready_shards(&spec).await?, (vec![0, 1], vec![]));
    assert!(!objects.is_published(1).await?);
    objects
        .write_published(&PublishedMarker::for_spec(&spec, 2, all, 0))
        .await?;
    assert_eq!(objects.newest_published().await?, Some(1));

    // A second epoch; pruning to one epoch keeps the published one until
    // the newer is published.
    let s2 = snap(s1.hashes[..1000].to_vec());
    let spec2 = auditor_server::plan::plan_snapshot(&s2, &config, 2)?;
    objects.prepare(&spec2, &s2.hashes).await?;
    assert_eq!(objects.epoch_ids().await?, [1, 2]);
    assert_eq!(objects.prune(1).await?, Vec::<u64>::new());
    objects
        .write_published(&PublishedMarker::for_spec(&spec2, 2, Vec::new(), 0))
        .await?;
    assert_eq!(objects.prune(1).await?, [1]);
    assert_eq!(objects.epoch_ids().await?, [2]);

    // A snapshot that does not hold the planned set is refused.
    let wrong = snap(s1.hashes[1000..2000].to_vec());
    let mut spec3 = auditor_server::plan::plan_snapshot(&wrong, &config, 3)?;
    objects.prepare(&spec3, &wrong.hashes).await?;
    spec3.set_sha256 = spec2.set_sha256;
    let e = objects.read_snapshot(&spec3).await.unwrap_err().to_string();
    assert!(e.contains("set digest differs"), "{e}");
    Ok(())
}
