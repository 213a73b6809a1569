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
