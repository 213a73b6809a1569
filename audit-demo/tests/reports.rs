//! Misbehaviour reports end to end: the test log issues SCTs it never
//! logs; a client audits them (NOT FOUND, then a report after a re-check in
//! a later epoch) and sends the report to `POST /v1/reports`; the auditor
//! verifies and stores it; ct-ingest confirms it with the log (RFC 6962
//! `get-proof-by-hash`, and static-ct-api through the stored verified
//! prefix); the operator's listing shows it. Every refusal of a report the
//! auditor can check is driven against the running server too.

use std::time::Duration;

use audit_demo::{auditor_config, issue_corpus, sqlite_url, start_log, RunningAuditor};
use audit_proto::report::MisbehaviourReport;
use browser_client::audit::{audit_now, Outcome};
use browser_client::net::Auditor;
use browser_client::policy::{b64, EntryKind, PendingQueue};
use browser_client::sct::{delivered_sct, embedded_scts, parse_log_list};
use ct_store::{ReportStatus, Store};

type TestResult = anyhow::Result<()>;

/// Runs ct-ingest once with `api` ("static" or "rfc6962") for the test log.
async fn ingest_with(
    log: &ct_testlog::TestLog,
    dir: &std::path::Path,
    url: &str,
    api: &str,
) -> anyhow::Result<ct_ingest::ingest::RunSummary> {
    let list = dir.join("log_list.json");
    std::fs::write(&list, log.log_list_json())?;
    let toml = format!(
        "log_list = {:?}\ndatabase_url = {:?}\n[[log]]\napi = {api:?}\n",
        list.display().to_string(),
        url
    );
    let config = ct_ingest::config::Config::from_toml(&toml)?;
    let s =
        ct_ingest::ingest::run_once(&config, &ct_ingest::ingest::IngestOptions::default()).await?;
    for (sel, r) in &s.logs {
        r.as_ref()
            .map_err(|e| anyhow::anyhow!("ingesting {}: {e}", sel.info.description))?;
    }
    Ok(s)
}

/// POSTs `body` as a report; returns (status, error code or "").
async fn post(base: &str, body: Vec<u8>, content_type: &str) -> anyhow::Result<(u16, String)> {
    let resp = reqwest::Client::new()
        .post(format!("{base}/v1/reports"))
        .header("content-type", content_type)
        .body(body)
        .send()
        .await?;
    let status = resp.status().as_u16();
    let text = resp.text().await?;
    let code = serde_json::from_str::<audit_proto::api::ErrorBody>(&text)
        .map(|b| b.error)
        .unwrap_or_default();
    Ok((status, code))
}

fn json(r: &MisbehaviourReport) -> Vec<u8> {
    serde_json::to_vec(r).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_omitted_sct_is_reported_verified_stored_and_confirmed_with_the_log() -> TestResult {
    let dir = tempfile::tempdir()?;
    let log = start_log().await?;
    let issued = issue_corpus(&log, 6, 8, 0).await?;
    let url = sqlite_url(dir.path());
    ingest_with(&log, dir.path(), &url, "static").await?;
    let mut config = auditor_config(dir.path(), &url, None);
    // Many reports from 127.0.0.1 below; the limits have their own tests.
    config.reports.per_ip_burst = 1000;
    config.reports.global_per_minute = 1000;
    let server = RunningAuditor::start(config).await?;
    let base = server.url();
    let list = parse_log_list(log.log_list_json().as_bytes())?;
    let auditor = Auditor::new(&base)?;

    // 1. Audit the omitted SCTs: NOT FOUND (up to false positives), then,
    //    after a later epoch, misbehaviour reports.
    let mut q = PendingQueue::open(&dir.path().join("pending.json"))?;
    let now = ct_core::civil::unix_now_ms();
    for o in &issued.omitted {
        let chain = vec![o.cert_der.clone(), o.issuer_der.clone()];
        let checked = if o.embedded {
            embedded_scts(&o.cert_der, &o.issuer_der, &list)?
        } else {
            vec![delivered_sct(&o.cert_der, &o.sct.encode()?, &list)?]
        };
        audit_now(&auditor, &mut q, &chain, &checked, now).await?;
    }
    let first_epoch = server
        .service
        .state()
        .registry
        .current()
        .map(|e| e.id())
        .unwrap_or(0);
    assert!(!q.items.is_empty(), "no omitted SCT was NOT FOUND");
    server.service.build_and_publish(None).await?;
    let (out, _) = audit_now(&auditor, &mut q, &[], &[], now).await?;
    let reports: Vec<MisbehaviourReport> = out
        .into_iter()
        .filter_map(|o| match o {
            Outcome::Misbehaviour(r) => Some(*r),
            _ => None,
        })
        .collect();
    assert!(reports.len() >= 2, "{} reports", reports.len());
    let report = reports[0].clone();
    assert_eq!(
        report.not_found_in_epochs,
        vec![first_epoch, first_epoch + 1]
    );

    // 2. Refusals, each with its stable code (nothing is stored).
    let mut cases: Vec<(&str, Vec<u8>, u16, &str)> = Vec::new();
    cases.push(("not json", b"{".to_vec(), 400, "bad_report"));
    let mut unknown_field = serde_json::to_value(&report)?;
    unknown_field["extra"] = 1.into();
    cases.push((
        "unknown field",
        serde_json::to_vec(&unknown_field)?,
        400,
        "bad_report",
    ));
    cases.push((
        "too large",
        vec![b' '; audit_proto::report::MAX_REPORT_BYTES + 1],
        413,
        "report_too_large",
    ));
    let mut r = report.clone();
    r.log_id = audit_proto::LogId::new([9; 32]);
    cases.push(("unknown log", json(&r), 422, "unknown_log"));
    let mut r = report.clone();
    r.sct_timestamp_ms += 1;
    cases.push(("timestamp", json(&r), 422, "bad_sct"));
    let mut r = report.clone();
    r.leaf_hash = audit_proto::LeafHash::new([3; 32]);
    cases.push(("leaf hash", json(&r), 422, "leaf_hash_mismatch"));
    let mut r = report.clone();
    r.chain[0] = b64(b"not a certificate");
    cases.push(("chain", json(&r), 422, "bad_chain"));
    // Another certificate of the log with this SCT: the signature fails.
    let other = &issued.logged[0];
    let mut r = report.clone();
    r.chain[0] = b64(&other.cert_der);
    r.kind = EntryKind::X509;
    cases.push(("signature", json(&r), 422, "bad_sct"));
    let mut r = report.clone();
    r.not_found_in_epochs = vec![first_epoch + 5];
    cases.push(("future epoch", json(&r), 422, "epoch_not_covering"));
    // A logged certificate reported as missing: its bit is set in every
    // filter of the epoch.
    let logged = issued
        .logged
        .iter()
        .find(|e| e.embedded)
        .expect("an embedded logged SCT");
    let mut r = report.clone();
    r.chain = vec![b64(&logged.cert_der), b64(&logged.issuer_der)];
    r.sct = b64(&logged.sct.encode()?);
    r.sct_timestamp_ms = logged.timestamp_ms;
    r.leaf_hash = logged.leaf_hash;
    r.kind = EntryKind::Precert;
    cases.push(("logged leaf", json(&r), 422, "leaf_present"));
    for (what, body, status, code) in cases {
        let (s, c) = post(&base, body, "application/json").await?;
        assert_eq!((s, c.as_str()), (status, code), "{what}");
    }
    let (s, c) = post(&base, json(&report), "text/plain").await?;
    assert_eq!((s, c.as_str()), (415, "unsupported_media_type"));

    // 3. The report is accepted once; a second one is a duplicate.
    let receipt = auditor.send_report(&report).await?;
    assert_eq!(receipt.status, "received");
    assert!(!receipt.duplicate);
    assert_eq!(receipt.leaf_hash, report.leaf_hash);
    assert!(auditor.send_report(&report).await?.duplicate);
    let store = Store::connect(&url).await?;
    let listed = auditor_server::reports::list(&store, None, 10).await?;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(listed[0].contains("received"), "{listed:?}");
    assert!(listed[0].contains(&report.leaf_hash.to_hex()));

    // 4. ct-ingest confirms it with the log: RFC 6962 get-proof-by-hash.
    let s = ingest_with(&log, dir.path(), &url, "rfc6962").await?;
    assert_eq!(s.reports.len(), 1, "{:?}", s.reports);
    assert_eq!(
        s.reports[0].outcome,
        ct_ingest::reports::CheckOutcome::Confirmed
    );
    assert!(s.reports[0].note.contains("get-proof-by-hash"));
    let stored = store.reports(None, 10).await?;
    assert_eq!(stored[0].status, ReportStatus::Confirmed);
    assert_eq!(stored[0].attempts, 1);

    // 5. A second report, confirmed through the static-ct-api prefix.
    let second = auditor.send_report(&reports[1]).await?;
    assert!(!second.duplicate);
    let s = ingest_with(&log, dir.path(), &url, "static").await?;
    assert_eq!(s.reports.len(), 1, "{:?}", s.reports);
    assert_eq!(
        s.reports[0].outcome,
        ct_ingest::reports::CheckOutcome::Confirmed
    );
    assert!(s.reports[0].note.contains("verified entries"));

    // 6. A report of a leaf the log did log (stored behind the auditor's
    //    back) is refuted by both ways of asking.
    for api in ["rfc6962", "static"] {
        let e = if api == "static" {
            &issued.logged[1]
        } else {
            &issued.logged[2]
        };
        assert!(
            store
                .insert_report(&ct_store::NewReport {
                    log_id: log.log_id(),
                    leaf_hash: e.leaf_hash,
                    sct_timestamp_ms: e.timestamp_ms,
                    mmd_s: 2,
                    kind: "x509".into(),
                    sct: e.sct.encode()?,
                    chain: vec![e.cert_der.clone()],
                    epochs: vec![first_epoch],
                    not_after: e.not_after,
                    received_at_ms: now,
                })
                .await?
        );
        let s = ingest_with(&log, dir.path(), &url, api).await?;
        assert_eq!(s.reports.len(), 1, "{api}: {:?}", s.reports);
        assert_eq!(
            s.reports[0].outcome,
            ct_ingest::reports::CheckOutcome::Refuted,
            "{api}: {:?}",
            s.reports[0]
        );
    }
    let counts = store.report_counts().await?;
    assert_eq!(
        counts,
        vec![
            (ReportStatus::Received, 0),
            (ReportStatus::Confirmed, 2),
            (ReportStatus::Refuted, 2)
        ]
    );
    let confirmed =
        auditor_server::reports::list(&store, Some(ReportStatus::Confirmed), 10).await?;
    assert_eq!(confirmed.len(), 2);

    // 7. The operator's metrics count what arrived.
    server.service.build_and_publish(None).await?;
    let metrics = reqwest::get(format!("{base}/metrics"))
        .await?
        .text()
        .await?;
    for line in [
        "auditor_reports_received_total{result=\"accepted\"} 2",
        "auditor_reports_received_total{result=\"duplicate\"} 1",
        "auditor_reports_received_total{result=\"leaf_present\"} 1",
        "auditor_reports_received_total{result=\"bad_report\"} 2",
        "auditor_reports{status=\"confirmed\"} 2",
    ] {
        assert!(metrics.contains(line), "{line} not in\n{metrics}");
    }
    store.close().await;
    server.stop().await?;
    tokio::time::timeout(Duration::from_secs(10), log.shutdown()).await?;
    Ok(())
}
