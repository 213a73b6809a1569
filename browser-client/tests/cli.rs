//! The `sct-audit` binary on fixtures written by the local test log
//! (`cargo test -p audit-demo --test e2e -- --ignored write_sct_audit_fixtures`):
//! the expected leaf hashes are the log's own records.

use std::path::{Path, PathBuf};
use std::process::Command;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn sct_audit(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sct-audit"))
        .args(args)
        .output()
        .expect("run sct-audit")
}

fn expected() -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(data("expected.json")).unwrap()).unwrap()
}

fn s(p: PathBuf) -> String {
    p.display().to_string()
}

#[test]
fn inspect_embedded_sct_rebuilds_the_logged_precert_leaf() {
    let out = sct_audit(&[
        "inspect",
        "--cert",
        &s(data("leaf.pem")),
        "--issuer",
        &s(data("issuer.pem")),
        "--log-list",
        &s(data("log_list.json")),
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let e = expected();
    let sct = &v[0];
    assert_eq!(sct["leaf_hash"], e["embedded"]["leaf_hash"]);
    assert_eq!(sct["leaf_index"], e["embedded"]["leaf_index"]);
    assert_eq!(sct["timestamp_ms"], e["embedded"]["timestamp_ms"]);
    assert_eq!(sct["log_id"], e["log_id"]);
    assert_eq!(sct["kind"], "precert");
    assert_eq!(sct["signature"]["status"], "valid");
    // Human-readable form names the same leaf hash.
    let out = sct_audit(&[
        "inspect",
        "--cert",
        &s(data("leaf.pem")),
        "--issuer",
        &s(data("issuer.pem")),
        "--log-list",
        &s(data("log_list.json")),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(e["embedded"]["leaf_hash"].as_str().unwrap()),
        "{text}"
    );
    assert!(text.contains("verifies"), "{text}");
}

#[test]
fn inspect_tls_sct_rebuilds_the_logged_x509_leaf_and_rejects_a_forgery() {
    let args = |sct: &str| {
        sct_audit(&[
            "inspect",
            "--cert",
            &s(data("tls-leaf.pem")),
            "--sct",
            sct,
            "--log-list",
            &s(data("log_list.json")),
            "--json",
        ])
    };
    let out = args(&s(data("tls.sct")));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let e = expected();
    assert_eq!(v[0]["leaf_hash"], e["tls"]["leaf_hash"]);
    assert_eq!(v[0]["kind"], "x509");
    assert_eq!(v[0]["signature"]["status"], "valid");
    // Flip the last signature byte: still parses, no longer verifies.
    let dir = tempfile::tempdir().unwrap();
    let forged = dir.path().join("forged.sct");
    let mut raw = std::fs::read(data("tls.sct")).unwrap();
    *raw.last_mut().unwrap() ^= 1;
    std::fs::write(&forged, raw).unwrap();
    let out = args(&s(forged));
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["signature"]["status"], "invalid");
}

#[test]
fn bad_input_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(
        &garbage,
        b"-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let truncated = dir.path().join("truncated.sct");
    std::fs::write(&truncated, &std::fs::read(data("tls.sct")).unwrap()[..20]).unwrap();
    for args in [
        vec![
            "inspect",
            "--cert",
            &s(garbage.clone()),
            "--issuer",
            &s(data("issuer.pem")),
            "--log-list",
            &s(data("log_list.json")),
        ],
        vec![
            "inspect",
            "--cert",
            &s(data("tls-leaf.pem")),
            "--sct",
            &s(truncated.clone()),
            "--log-list",
            &s(data("log_list.json")),
        ],
        vec![
            "inspect",
            "--cert",
            &s(data("leaf.pem")),
            "--log-list",
            &s(data("log_list.json")),
        ],
        vec![
            "inspect",
            "--cert",
            &s(data("leaf.pem")),
            "--issuer",
            &s(data("issuer.pem")),
            "--log-list",
            &s(data("leaf.pem")),
        ],
        vec![
            "check",
            "--cert",
            &s(data("leaf.pem")),
            "--issuer",
            &s(data("issuer.pem")),
            "--log-list",
            &s(data("log_list.json")),
            "--server",
            "http://127.0.0.1:9",
        ],
    ] {
        let out = sct_audit(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains("Error"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// A small auditor on 127.0.0.1:0 that answers real YPIR queries (test
/// parameters) over one filter whose bits are all `bit`, for an epoch
/// whose manifest covers `logs` and states a fill ratio of 0.117188.
mod fake_auditor {
    use std::sync::Arc;

    use audit_proto::filter::FilterSpec;
    use audit_proto::manifest::{
        derive_db_seed, DbLayout, FillRatio, LogCoverage, ManifestParts, PirSpec,
    };
    use audit_proto::Manifest;
    use pir_core::db::BitDatabase;
    use pir_core::params::{DbShape, TOY};
    use pir_core::sampler::PublicSeed;
    use pir_core::server::Server;

    pub(crate) async fn serve(bit: bool, logs: Vec<LogCoverage>) -> String {
        serve_failing(bit, logs, 0).await
    }

    /// [`serve`], but the first `fail` queries are answered 500.
    pub(crate) async fn serve_failing(bit: bool, logs: Vec<LogCoverage>, fail: usize) -> String {
        let failed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let filter = FilterSpec::new(1, 8, 8, [7; 32]).unwrap();
        let shape = DbShape::for_bits(filter.bits, BitDatabase::RECORD_BITS);
        let pir_seed = [9; 32];
        let manifest = Manifest::new(ManifestParts {
            epoch: 5,
            created_at: 1_795_000_000,
            snapshot_at: 1_795_000_000,
            entries: 8,
            logs,
            pir: PirSpec {
                scheme: "ypir".into(),
                param_set: TOY.id,
                param_name: TOY.name.into(),
                wire_version: pir_core::wire::VERSION,
                seed: pir_seed,
            },
            layout: &[DbLayout {
                filters: 1,
                rows: shape.ell1 as u64,
                cols: shape.ell2 as u64,
                query_bytes: pir_core::wire::query_len(&TOY, shape) as u64,
                response_bytes: pir_core::wire::response_len(&TOY) as u64,
            }],
            filter,
            shards: None,
        })
        .unwrap()
        .with_fill_ratio(FillRatio::new(0.117_188).unwrap())
        .unwrap();
        let fill = if bit { 0xff } else { 0 };
        let db = BitDatabase::from_bitmap_owned(64, vec![fill; 8]).unwrap();
        let server = Arc::new(
            Server::setup(
                TOY,
                db.into_database(),
                PublicSeed(derive_db_seed(&pir_seed, 0)),
            )
            .unwrap(),
        );
        let body = manifest.to_json();
        let app =
            axum::Router::new().fallback(move |uri: axum::http::Uri, req: axum::body::Bytes| {
                let (server, manifest, failed) = (server.clone(), body.clone(), failed.clone());
                async move {
                    if uri.path() == "/v1/manifest" {
                        (axum::http::StatusCode::OK, manifest)
                    } else if uri.path() == "/v1/epochs/5/dbs/0/query"
                        && failed.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < fail
                    {
                        (
                            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                            br#"{"error":"internal","message":"scripted"}"#.to_vec(),
                        )
                    } else if uri.path() == "/v1/epochs/5/dbs/0/query" {
                        match server.answer_bytes(&req) {
                            Ok(r) => (axum::http::StatusCode::OK, r),
                            Err(e) => (axum::http::StatusCode::BAD_REQUEST, e.to_string().into()),
                        }
                    } else {
                        (axum::http::StatusCode::NOT_FOUND, Vec::new())
                    }
                }
            });
        let url = test_support::fake::serve(app).await;
        url
    }

    /// The fixtures' log, covered up to `until_ms`.
    pub(crate) fn covered(log_id: &str, until_ms: u64) -> Vec<LogCoverage> {
        vec![LogCoverage {
            log_id: log_id.to_owned(),
            verified_tree_size: 2,
            verified_position: 2,
            ingested_until_ms: until_ms,
            mmd_s: 2,
        }]
    }
}

/// `sct-audit check` on the embedded-SCT fixture against `server` at
/// `now_ms`, run off the test's runtime (the server runs on it).
async fn check(server: &str, now_ms: u64, extra: &[String]) -> (i32, String, String) {
    let mut args: Vec<String> = [
        "check",
        "--cert",
        &s(data("leaf.pem")),
        "--issuer",
        &s(data("issuer.pem")),
        "--log-list",
        &s(data("log_list.json")),
        "--server",
        server,
        "--now-ms",
        &now_ms.to_string(),
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    args.extend(extra.iter().cloned());
    let out = tokio::task::spawn_blocking(move || {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        sct_audit(&a)
    })
    .await
    .unwrap();
    (
        out.status.code().expect("exit code"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn fixture_times() -> (String, u64) {
    let e = expected();
    let log_id = e["log_id"].as_str().unwrap().to_owned();
    (log_id, e["embedded"]["timestamp_ms"].as_u64().unwrap())
}

fn no_debug_output(text: &str) {
    for debug in ["Invalid(", "UnknownLog", "WaitFor", "Some(", "LogId("] {
        assert!(!text.contains(debug), "Rust Debug output: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_exit_codes_logged_not_found_pending_untracked() {
    let (log_id, ts) = fixture_times();
    let later = ts + 3_600_000;
    // LOGGED: exit 0, with the fill ratio the auditor states.
    let ones = fake_auditor::serve(true, fake_auditor::covered(&log_id, later)).await;
    let (code, out, err) = check(&ones, later, &[]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("LOGGED in epoch 5, probably"), "{out}");
    assert!(
        out.contains("probability 0.117 (the fill ratio the auditor states for this epoch)"),
        "{out}"
    );
    assert!(out.contains("at most 0.5"), "{out}");
    assert!(
        out.contains("auditor check (2 canaries this run, 0 failed)"),
        "{out}"
    );
    no_debug_output(&out);
    // The canaries: every one of 8 answers LOGGED where the auditor states
    // 0.117 (its databases are all ones): exit 5, before any other code.
    let (code, out, err) = check(&ones, later, &["--canaries".into(), "8".into()]).await;
    assert_eq!(code, 5, "{out}{err}");
    assert!(
        out.contains("the auditor answers LOGGED too often: 8 of 8"),
        "{out}"
    );
    // NOT FOUND: exit 2, certain for the epoch.
    let zeros = fake_auditor::serve(false, fake_auditor::covered(&log_id, later)).await;
    let (code, out, err) = check(&zeros, later, &[]).await;
    assert_eq!(code, 2, "{out}{err}");
    assert!(out.contains("NOT FOUND in epoch 5: certain"), "{out}");
    // Pending (younger than the log's MMD): exit 4.
    let (code, out, err) = check(&ones, ts, &[]).await;
    assert_eq!(code, 4, "{out}{err}");
    assert!(out.contains("maximum merge delay"), "{out}");
    // Pending (the epoch's coverage of the log ends before the SCT): exit 4.
    let behind = fake_auditor::serve(true, fake_auditor::covered(&log_id, ts - 1)).await;
    let (code, out, err) = check(&behind, later, &[]).await;
    assert_eq!(code, 4, "{out}{err}");
    assert!(out.contains("does not yet cover log"), "{out}");
    // A log this auditor does not track: not auditable (exit 3), said so,
    // not left "pending" forever.
    let other = fake_auditor::serve(true, vec![]).await;
    let (code, out, err) = check(&other, later, &[]).await;
    assert_eq!(code, 3, "{out}{err}");
    assert!(out.contains("this auditor does not track log"), "{out}");
    assert!(out.contains(&log_id), "{out}");
    no_debug_output(&out);
    // The queue keeps a first NOT FOUND for its re-check.
    let dir = tempfile::tempdir().unwrap();
    let queue = s(dir.path().join("q.json"));
    let (code, out, _) = check(&zeros, later, &["--queue".into(), queue.clone()]).await;
    assert_eq!(code, 2, "{out}");
    let (code, out, _) = check(&ones, later, &["--queue".into(), queue]).await;
    assert_eq!(code, 4, "the re-check waits for a later epoch: {out}");
    assert!(out.contains("re-checked in a later epoch"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_exit_codes_not_auditable_and_error() {
    let (log_id, ts) = fixture_times();
    let later = ts + 3_600_000;
    let ones = fake_auditor::serve(true, fake_auditor::covered(&log_id, later)).await;
    // A TLS-delivered SCT whose signature does not verify: exit 3, in words.
    let dir = tempfile::tempdir().unwrap();
    let forged = dir.path().join("forged.sct");
    let mut raw = std::fs::read(data("tls.sct")).unwrap();
    *raw.last_mut().unwrap() ^= 1;
    std::fs::write(&forged, raw).unwrap();
    let run = |args: Vec<String>| async move {
        tokio::task::spawn_blocking(move || {
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            sct_audit(&a)
        })
        .await
        .unwrap()
    };
    let out = run(vec![
        "check".into(),
        "--cert".into(),
        s(data("tls-leaf.pem")),
        "--sct".into(),
        s(forged),
        "--log-list".into(),
        s(data("log_list.json")),
        "--server".into(),
        ones.clone(),
        "--now-ms".into(),
        later.to_string(),
    ])
    .await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(
        text.contains("not audited: the SCT's signature does not verify"),
        "{text}"
    );
    no_debug_output(&text);
    // A log list without the log: exit 3, "not in the log list".
    let empty_list = dir.path().join("empty.json");
    std::fs::write(
        &empty_list,
        br#"{"version":"1.0","log_list_timestamp":"2026-01-01T00:00:00Z","operators":[]}"#,
    )
    .unwrap();
    let out = run(vec![
        "check".into(),
        "--cert".into(),
        s(data("leaf.pem")),
        "--issuer".into(),
        s(data("issuer.pem")),
        "--log-list".into(),
        s(empty_list),
        "--server".into(),
        ones.clone(),
        "--now-ms".into(),
        later.to_string(),
    ])
    .await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("not in the log list"), "{text}");
    no_debug_output(&text);
    // Errors exit 1: an auditor that is not there, a usage error.
    let (code, _, err) = check("http://127.0.0.1:9", later, &[]).await;
    assert_eq!(code, 1, "{err}");
    let out = run(vec!["check".into(), "--bogus".into()]).await;
    assert_eq!(out.status.code(), Some(1));
    // The exit codes are in --help.
    let out = run(vec!["check".into(), "--help".into()]).await;
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    for line in [
        "0  LOGGED",
        "1  error",
        "2  NOT FOUND",
        "3  not auditable",
        "4  pending",
    ] {
        assert!(help.contains(line), "{help}");
    }
}

/// A certificate without embedded SCTs, given without `--issuer`, is told
/// so — not that its embedded SCTs need the issuer.
#[test]
fn certificate_without_embedded_scts_is_not_asked_for_its_issuer() {
    let out = sct_audit(&[
        "inspect",
        "--cert",
        &s(data("tls-leaf.pem")),
        "--log-list",
        &s(data("log_list.json")),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("has no embedded SCTs"), "{err}");
    assert!(!err.contains("issuer"), "{err}");
    // With embedded SCTs and no issuer, the issuer is what is missing.
    let out = sct_audit(&[
        "inspect",
        "--cert",
        &s(data("leaf.pem")),
        "--log-list",
        &s(data("log_list.json")),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("need the issuer certificate"), "{err}");
}

/// A query answered 500 is replaced by a fresh one (the fallback), and
/// `sct-audit check` says so; without the fallback the audit fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_falls_back_when_the_group_fails() {
    let (log_id, ts) = fixture_times();
    let later = ts + 3_600_000;
    let flaky = fake_auditor::serve_failing(true, fake_auditor::covered(&log_id, later), 2).await;
    let (code, stdout, stderr) = check(&flaky, later, &["--canaries".into(), "0".into()]).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("2 of 3 attempts failed (server_error ×2)"),
        "{stderr}"
    );
    let dead = fake_auditor::serve_failing(true, fake_auditor::covered(&log_id, later), 1000).await;
    let (code, _, stderr) = check(
        &dead,
        later,
        &[
            "--canaries".into(),
            "0".into(),
            "--max-redraws".into(),
            "0".into(),
        ],
    )
    .await;
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("no database answered in 1 attempts"),
        "{stderr}"
    );
}
