//! End-to-end tests across crates: browser-client against the local test
//! log's own records, and private audits over HTTP against a real
//! auditor-server fed by ct-ingest.

use std::collections::HashSet;
use std::time::Duration;

use audit_demo::{auditor_config, ingest, issue_corpus, sqlite_url, start_log, RunningAuditor};
use audit_sim::sim::{simulate, SimConfig};
use browser_client::policy::{AuditPolicy, EntryKind};
use browser_client::sct::{delivered_sct, embedded_scts, parse_log_list, Signature};
use futures_util::TryStreamExt;

type TestResult = anyhow::Result<()>;

/// A test log that issued a corpus, ingested into SQLite in a temporary
/// directory, and an auditor-server serving epochs of it.
struct Pipeline {
    dir: tempfile::TempDir,
    log: ct_testlog::TestLog,
    issued: audit_demo::Issued,
    url: String,
    auditor: RunningAuditor,
}

/// [`Pipeline`] with `logged`/`omitted`/`forged` SCTs and epochs rebuilt
/// every `interval_s` seconds (None: only when the test asks).
async fn pipeline(
    logged: usize,
    omitted: usize,
    forged: usize,
    interval_s: Option<u64>,
) -> anyhow::Result<Pipeline> {
    let dir = tempfile::tempdir()?;
    let log = start_log().await?;
    let issued = issue_corpus(&log, logged, omitted, forged).await?;
    let url = sqlite_url(dir.path());
    ingest(&log, dir.path(), &url).await?;
    let auditor = RunningAuditor::start(auditor_config(dir.path(), &url, interval_s)).await?;
    Ok(Pipeline {
        dir,
        log,
        issued,
        url,
        auditor,
    })
}

/// For every certificate the test log issued, the client rebuilds exactly
/// the leaf the log logged: precert_entry for embedded SCTs, x509_entry for
/// TLS-delivered ones, with the static-ct-api `leaf_index` extension copied;
/// every SCT signature verifies; and the leaf hashes are what ct-ingest
/// stored after verifying the log's tiles.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaf_hashes_rebuilt_from_certificates_match_the_log() -> TestResult {
    let dir = tempfile::tempdir()?;
    let log = start_log().await?;
    let issued = log.add_entries(24, 0.5).await?;
    let list = parse_log_list(log.log_list_json().as_bytes())?;
    let (mut pre, mut x509) = (0, 0);
    for e in &issued {
        let c = if e.embedded {
            pre += 1;
            let scts = embedded_scts(&e.cert_der, &e.issuer_der, &list)?;
            assert_eq!(scts.len(), 1);
            assert_eq!(scts[0].kind, EntryKind::Precert);
            scts.into_iter().next().unwrap()
        } else {
            x509 += 1;
            let c = delivered_sct(&e.cert_der, &e.sct.encode()?, &list)?;
            assert_eq!(c.kind, EntryKind::X509);
            c
        };
        assert_eq!(
            *c.leaf_hash.as_bytes(),
            e.leaf_hash,
            "rebuilt leaf differs from the logged one"
        );
        assert_eq!(c.signature, Signature::Valid);
        assert_eq!(
            c.leaf_index, e.leaf_index,
            "leaf_index extension copied verbatim"
        );
        assert!(!c.extensions.is_empty());
        assert_eq!(c.timestamp_ms, e.timestamp_ms);
    }
    assert!(pre > 0 && x509 > 0);
    // The store holds exactly these leaf hashes after ct-ingest verified the log.
    let url = sqlite_url(dir.path());
    ingest(&log, dir.path(), &url).await?;
    let store = ct_store::Store::connect(&url).await?;
    let stored: HashSet<[u8; 32]> = store.active_leaf_hashes(0).try_collect().await?;
    let rebuilt: HashSet<[u8; 32]> = issued.iter().map(|e| e.leaf_hash).collect();
    assert_eq!(stored, rebuilt);
    Ok(())
}

/// A forged SCT (signature, timestamp or extensions changed) or an SCT of
/// a log missing from the log list is not audited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_scts_are_rejected_by_signature() -> TestResult {
    let log = start_log().await?;
    let issued = log.add_entries(4, 0.0).await?; // TLS-delivered SCTs
    let list = parse_log_list(log.log_list_json().as_bytes())?;
    let e = &issued[0];
    let ok = delivered_sct(&e.cert_der, &e.sct.encode()?, &list)?;
    assert!(ok.auditable());
    let mut forged = Vec::new();
    let mut s = e.sct.clone();
    let n = s.signature.signature.len();
    s.signature.signature[n - 1] ^= 1;
    forged.push(s);
    let mut s = e.sct.clone();
    s.timestamp += 1;
    forged.push(s);
    let mut s = e.sct.clone();
    s.extensions.clear();
    forged.push(s);
    for s in forged {
        let c = delivered_sct(&e.cert_der, &s.encode()?, &list)?;
        assert!(
            matches!(c.signature, Signature::Invalid(_)),
            "{:?}",
            c.signature
        );
        assert!(!c.auditable());
        assert!(c.to_pending(std::slice::from_ref(&e.cert_der), 0).is_none());
    }
    // The SCT on another certificate does not verify either.
    let other = delivered_sct(&issued[1].cert_der, &e.sct.encode()?, &list)?;
    assert!(matches!(other.signature, Signature::Invalid(_)));
    // A log missing from the list: not checked, not audited.
    let other_log = start_log().await?;
    let foreign = parse_log_list(other_log.log_list_json().as_bytes())?;
    let c = delivered_sct(&e.cert_der, &e.sct.encode()?, &foreign)?;
    assert_eq!(c.signature, Signature::UnknownLog);
    assert!(!c.auditable());
    Ok(())
}

/// Private audits over HTTP: every logged SCT is found; omitted SCTs are
/// caught at the rate the filter's fill ratio predicts; re-checks in a later
/// epoch turn into misbehaviour reports that check out.
///
/// Tolerance: with n omitted audits and catch probability p = 1 − fill
/// (≈ 0.88 at k = 8), the standard deviation of the rate is
/// √(p(1−p)/n) ≤ 0.06 for n ≥ 30; we accept |rate − p| ≤ 0.25 (> 4σ).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_audits_find_logged_and_catch_omitted_scts() -> TestResult {
    let Pipeline {
        dir,
        log,
        issued,
        url,
        auditor,
    } = pipeline(120, 60, 10, Some(4)).await?;
    let fill = auditor
        .service
        .state()
        .registry
        .current()
        .and_then(|e| e.report.as_ref().map(|r| r.fill_ratio))
        .ok_or_else(|| anyhow::anyhow!("no build report"))?;
    let list = parse_log_list(log.log_list_json().as_bytes())?;
    let cfg = SimConfig {
        server: auditor.url(),
        clients: 10,
        weeks: 1,
        policy: AuditPolicy::default(),
        omitted_fraction: 0.3,
        forged_fraction: 0.05,
        concurrency: 4,
        seed: 7,
        fill_probes: 64,
        recheck_timeout: Duration::from_secs(30),
        queue_dir: Some(dir.path().join("sim")),
        progress: false,
        retry: browser_client::net::RetryPolicy::default(),
        fallback: browser_client::fallback::FallbackPolicy::default(),
    };
    let r = simulate(cfg, issued.corpus.clone(), list.clone()).await?;
    let d = &r.detection;
    eprintln!(
        "{d:?}\nfill: server {fill:.4}, probed {:.3} ± {:.3}",
        r.fill_ratio, r.fill_ratio_stderr
    );
    assert!(d.logged_audits >= 50, "{d:?}");
    assert_eq!(d.logged_found, d.logged_audits, "every logged SCT is found");
    assert_eq!(d.false_reports, 0);
    assert!(d.forged_rejected > 0 && d.forged_accepted == 0);
    assert!(d.omitted_audits >= 30, "{d:?}");
    let expected = 1.0 - fill;
    assert!(
        (d.catch_rate_per_audit - expected).abs() <= 0.25,
        "catch rate {} vs expected {expected}",
        d.catch_rate_per_audit
    );
    // The probed fill ratio agrees with the server's (64 probes: σ ≈ 0.04).
    assert!(
        (r.fill_ratio - fill).abs() <= 0.2,
        "probed {} vs {fill}",
        r.fill_ratio
    );
    // Re-checks happened in a later epoch and produced reports about omitted SCTs only.
    assert!(r.epochs.len() >= 2, "epochs {:?}", r.epochs);
    assert!(d.rechecks > 0 && d.reports > 0, "{d:?}");
    let omitted: HashSet<audit_proto::LeafHash> = issued
        .omitted
        .iter()
        .map(|e| audit_proto::LeafHash::new(e.leaf_hash))
        .collect();
    assert_eq!(r.report_files.len() as u64, d.reports);
    for f in &r.report_files {
        let rep: browser_client::policy::MisbehaviourReport =
            serde_json::from_slice(&std::fs::read(f)?)?;
        assert!(omitted.contains(&rep.leaf_hash));
        assert_eq!(rep.not_found_in_epochs.len(), 2);
        assert!(rep.not_found_in_epochs[0] < rep.not_found_in_epochs[1]);
        // An operator can verify the promise: the SCT verifies over the chain…
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD;
        let chain: Vec<Vec<u8>> = rep
            .chain
            .iter()
            .map(|c| b64.decode(c))
            .collect::<Result<_, _>>()?;
        let scts = embedded_scts(&chain[0], &chain[1], &list)?;
        assert!(scts
            .iter()
            .any(|s| s.auditable() && s.leaf_hash == rep.leaf_hash));
    }
    // …and the leaf is absent from what the log published.
    let store = ct_store::Store::connect(&url).await?;
    let stored: HashSet<[u8; 32]> = store.active_leaf_hashes(0).try_collect().await?;
    assert!(issued
        .omitted
        .iter()
        .all(|e| !stored.contains(&e.leaf_hash)));
    auditor.stop().await
}

/// `sct-audit check`'s flow (`browser_client::audit::audit_now`) with a
/// queue file that survives restarts: an SCT younger than the MMD waits in
/// the queue; after a "restart" (queue reopened from disk) it is audited
/// and found; omitted SCTs are NOT FOUND, wait for a later epoch, and then
/// turn into misbehaviour reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_flow_with_a_persistent_queue() -> TestResult {
    use browser_client::audit::{audit_now, Outcome};
    use browser_client::net::Auditor;
    use browser_client::policy::PendingQueue;

    let Pipeline {
        dir,
        log,
        issued,
        auditor: server,
        ..
    } = pipeline(6, 10, 0, None).await?;
    let list = parse_log_list(log.log_list_json().as_bytes())?;
    let auditor = Auditor::new(&server.url())?;
    let qpath = dir.path().join("pending.json");

    // 1. Right after issuance the SCT is younger than the MMD: pending.
    let e = issued
        .logged
        .iter()
        .find(|e| e.embedded)
        .expect("an embedded SCT");
    let chain = vec![e.cert_der.clone(), e.issuer_der.clone()];
    let checked = embedded_scts(&e.cert_der, &e.issuer_der, &list)?;
    let mut q = PendingQueue::open(&qpath)?;
    let (out, _) = audit_now(&auditor, &mut q, &chain, &checked, e.timestamp_ms).await?;
    assert!(matches!(&out[..], [Outcome::Pending { .. }]), "{out:?}");
    q.save()?;
    drop(q);

    // 2. "Restart": the queue comes back from disk and the audit runs.
    let mut q = PendingQueue::open(&qpath)?;
    assert_eq!(q.items.len(), 1);
    let now = e.timestamp_ms + 10_000;
    let (out, stats) = audit_now(&auditor, &mut q, &[], &[], now).await?;
    assert!(matches!(&out[..], [Outcome::Logged { .. }]), "{out:?}");
    assert_eq!(stats.len(), 1);
    assert!(q.items.is_empty());

    // 3. Omitted SCTs: NOT FOUND (unless a false positive), then a report
    //    after a later epoch.
    let mut not_found = 0;
    for o in &issued.omitted {
        let checked = embedded_scts(&o.cert_der, &o.issuer_der, &list)?;
        let chain = vec![o.cert_der.clone(), o.issuer_der.clone()];
        let (out, _) = audit_now(&auditor, &mut q, &chain, &checked, now).await?;
        not_found += out
            .iter()
            .filter(|x| matches!(x, Outcome::NotFound { .. }))
            .count();
    }
    assert!(
        not_found >= 5,
        "only {not_found} of 10 omitted SCTs were caught"
    );
    q.save()?;
    // A re-check against the same epoch waits.
    let (out, _) = audit_now(&auditor, &mut q, &[], &[], now).await?;
    assert!(
        out.iter().all(|x| matches!(x, Outcome::Pending { .. })),
        "{out:?}"
    );
    server.service.build_and_publish(None).await?;
    let mut q = PendingQueue::open(&qpath)?;
    assert_eq!(q.items.len(), not_found);
    let (out, _) = audit_now(&auditor, &mut q, &[], &[], now).await?;
    let reports = out
        .iter()
        .filter(|x| matches!(x, Outcome::Misbehaviour(_)))
        .count();
    assert!(reports >= 1, "{out:?}");
    assert!(q.items.is_empty(), "every re-check is resolved");
    server.stop().await
}

/// An epoch retired while a client is auditing (it fetched the manifest,
/// then the auditor published two newer epochs and keeps only one previous
/// one): the query is refused with `unknown_epoch`, `run_ready` stops with
/// nothing lost, and `audit_now` fetches the manifest again and finishes the
/// audit against the new epoch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_epoch_retired_mid_audit_is_retried_on_the_new_one() -> TestResult {
    use browser_client::audit::{audit_now, is_epoch_retired, run_ready, Outcome};
    use browser_client::net::Auditor;
    use browser_client::policy::PendingQueue;
    use browser_client::probe::Prober;

    let Pipeline {
        dir,
        log,
        issued,
        auditor: server,
        ..
    } = pipeline(4, 0, 0, None).await?;
    let list = parse_log_list(log.log_list_json().as_bytes())?;
    let auditor = Auditor::new(&server.url())?;
    let (manifest, _) = auditor.manifest().await?;
    let stale = Prober::new(std::sync::Arc::new(manifest));
    server.service.build_and_publish(None).await?;
    server.service.build_and_publish(None).await?;

    let e = issued
        .logged
        .iter()
        .find(|e| e.embedded)
        .expect("an embedded SCT");
    let chain = vec![e.cert_der.clone(), e.issuer_der.clone()];
    let now = e.timestamp_ms + 10_000;
    let mut q = PendingQueue::open(&dir.path().join("pending.json"))?;
    for s in embedded_scts(&e.cert_der, &e.issuer_der, &list)? {
        if let Some(p) = s.to_pending(&chain, now) {
            q.push(p);
        }
    }
    assert_eq!(q.items.len(), 1);
    // the stale epoch is refused as such…
    let probe = stale.prepare(q.items[0].leaf_hash.as_bytes())?;
    let err = auditor.query(&probe).await.expect_err("retired epoch");
    assert!(is_epoch_retired(&err), "{err}");
    // …run_ready stops without losing the audit…
    let run = run_ready(&auditor, &stale, &mut q, now).await?;
    assert!(run.epoch_retired && run.ran.is_empty(), "{run:?}");
    assert!(matches!(&run.waiting[..], [Outcome::Pending { .. }]));
    assert_eq!(q.items.len(), 1, "the audit stays queued");
    // …and audit_now runs it against the current epoch.
    let (out, stats) = audit_now(&auditor, &mut q, &[], &[], now).await?;
    assert!(matches!(&out[..], [Outcome::Logged { .. }]), "{out:?}");
    assert_eq!(stats.len(), 1);
    assert!(q.items.is_empty());
    server.stop().await
}

/// Regenerates the fixtures of browser-client's CLI test (run by hand:
/// `cargo test -p audit-demo --test e2e -- --ignored write_sct_audit_fixtures`).
/// The expected leaf hashes are the test log's own records, not the
/// client's computation.
#[tokio::test]
#[ignore]
async fn write_sct_audit_fixtures() -> TestResult {
    use base64::Engine as _;
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../browser-client/tests/data");
    std::fs::create_dir_all(&out)?;
    let log = start_log().await?;
    let issued = log.add_entries(4, 0.5).await?;
    let pem = |der: &[u8]| {
        let b = base64::engine::general_purpose::STANDARD.encode(der);
        let lines: Vec<&str> = b
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap_or(""))
            .collect();
        format!(
            "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
            lines.join("\n")
        )
    };
    let pre = issued.iter().find(|e| e.embedded).expect("embedded");
    let tls = issued.iter().find(|e| !e.embedded).expect("tls");
    std::fs::write(out.join("leaf.pem"), pem(&pre.cert_der))?;
    std::fs::write(out.join("issuer.pem"), pem(&pre.issuer_der))?;
    std::fs::write(out.join("tls-leaf.pem"), pem(&tls.cert_der))?;
    std::fs::write(out.join("tls.sct"), tls.sct.encode()?)?;
    std::fs::write(out.join("log_list.json"), log.log_list_json())?;
    let expected = serde_json::json!({
        "log_id": audit_proto::manifest::encode_log_id(&log.log_id()),
        "embedded": { "leaf_hash": audit_proto::hex::encode(&pre.leaf_hash), "leaf_index": pre.leaf_index, "timestamp_ms": pre.timestamp_ms },
        "tls": { "leaf_hash": audit_proto::hex::encode(&tls.leaf_hash), "leaf_index": tls.leaf_index, "timestamp_ms": tls.timestamp_ms },
    });
    std::fs::write(
        out.join("expected.json"),
        serde_json::to_vec_pretty(&expected)?,
    )?;
    Ok(())
}
