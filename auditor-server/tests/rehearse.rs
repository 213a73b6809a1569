//! `auditor-server bench rehearse` end to end at tiny size: a store of
//! 2,000 synthetic entries, `epoch prepare`, two shards' `epoch
//! build`, `epoch publish` and `serve` on 127.0.0.1 port 0 (the
//! real binary, one process each), audits over HTTP. The report must name
//! every phase with its time and memory, find every member, and leave no
//! work directory behind.
#![cfg(target_os = "linux")]

use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_auditor-server");

#[test]
fn tiny_rehearsal_builds_publishes_and_audits() {
    let tmp = tempfile::tempdir().expect("temp dir");
    // 8 filters of 16,000 bits, two per database: 4 databases, 2 shards.
    let out = Command::new(BIN)
        .args(["bench", "rehearse", "--entries", "2000", "--filters", "8"])
        .args([
            "--shards",
            "2",
            "--audits",
            "16",
            "--db-bits-target",
            "32000",
        ])
        .args(["--param-set", "toy-insecure-d64", "--json", "--work-dir"])
        .arg(tmp.path())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run auditor-server bench rehearse");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench rehearse failed:\n{stderr}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.trim().lines().count(), 1, "one JSON line:\n{text}");
    let r: serde_json::Value = serde_json::from_str(&text).expect("JSON report");
    assert_eq!(r["entries"], 2000, "{r}");
    assert_eq!(r["filters"], 8, "{r}");
    assert_eq!(r["shards"], 2, "{r}");
    assert_eq!(r["databases"], 4, "{r}");
    assert_eq!(r["all_correct"], true, "{r}");
    assert_eq!(r["violations"], serde_json::json!([]), "{r}");
    let positive = |v: &serde_json::Value, k: &str| {
        assert!(v[k].as_f64().is_some_and(|x| x > 0.0), "{k} in {v}");
    };
    for k in [
        "store_fill_seconds",
        "store_bytes",
        "prepare_seconds",
        "coordinator_peak_rss_bytes",
        "snapshot_bytes",
        "build_seconds",
        "shard_peak_rss_bytes",
        "shard_database_bytes",
        "shard_margin_bytes",
        "fill_ns_per_entry_filter",
        "publish_seconds",
        "audit_seconds",
        "object_store_bytes",
        "cores",
        "memory_bytes",
    ] {
        positive(&r, k);
    }
    assert!(!r["cpu"].as_str().unwrap_or("").is_empty(), "{r}");
    // Every audit lands on a shard: 16 members, all found; 16 non-members.
    assert_eq!(r["members_audited"], 16, "{r}");
    assert_eq!(r["members_found"], 16, "{r}");
    assert_eq!(r["non_members_audited"], 16, "{r}");
    let shards = r["shard"].as_array().expect("shard array");
    assert_eq!(shards.len(), 2, "{r}");
    for s in shards {
        assert_eq!(s["databases"].as_array().map(Vec::len), Some(2), "{s}");
        for k in [
            "build_seconds",
            "peak_rss_bytes",
            "database_bytes",
            "margin_bytes",
            "fill_ratio",
            "serve_peak_rss_bytes",
            "members_audited",
        ] {
            positive(s, k);
        }
    }
    // The work directory is removed without --keep.
    assert_eq!(r["work_dir"], serde_json::Value::Null, "{r}");
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}
