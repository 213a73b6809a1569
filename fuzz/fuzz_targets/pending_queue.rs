//! The client's persisted queue of pending audits (browser-client
//! `PendingQueue::from_json`), as read back from disk or extension
//! storage: parsing never panics; a parsed queue serializes to JSON that
//! parses back to it; deciding readiness against a manifest, pushing, and
//! recording results (up to a misbehaviour report) never panic.
#![no_main]

use std::sync::OnceLock;

use audit_proto::filter::FilterSpec;
use audit_proto::manifest::{DbLayout, LogCoverage, ManifestParts, PirSpec};
use audit_proto::Manifest;
use browser_client::policy::{readiness, AuditResult, PendingQueue, Recorded};
use libfuzzer_sys::fuzz_target;

/// A small manifest covering one log (the test log's ID) up to a fixed time.
fn manifest() -> &'static Manifest {
    static M: OnceLock<Manifest> = OnceLock::new();
    M.get_or_init(|| {
        let log_id =
            audit_proto::LogId::from_base64("xpiyBw5JgcINhzd7Ii6X0tgs0j5YpwSQei6bXa4WIs0=")
                .expect("fixture log id");
        let filter = FilterSpec::new(4, 8, 24, [1; 32]).expect("filter");
        let pir = PirSpec {
            scheme: "ypir".into(),
            param_set: pir_core::params::TOY.id,
            param_name: pir_core::params::TOY.name.into(),
            wire_version: pir_core::wire::VERSION,
            seed: [2; 32],
        };
        let logs = vec![LogCoverage {
            log_id,
            verified_tree_size: 100,
            verified_position: 100,
            ingested_until_ms: 1_795_319_100_000,
            mmd_s: 60,
        }];
        Manifest::new(ManifestParts {
            epoch: 5,
            created_at: 1_795_319_200,
            snapshot_at: 1_795_319_200,
            entries: 20,
            logs,
            filter,
            pir,
            layout: &[DbLayout {
                filters: 4,
                rows: 8,
                cols: 12,
                query_bytes: 0,
                response_bytes: 0,
            }],
            shards: None,
        })
        .expect("manifest")
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(mut q) = PendingQueue::from_json(data) else {
        return;
    };
    let json = q.to_json();
    let back = PendingQueue::from_json(json.as_bytes()).expect("its own JSON parses");
    assert_eq!(back, q, "JSON round trip changed the queue");
    let m = manifest();
    for now in [0, 1_795_319_300_000, u64::MAX] {
        for p in &q.items {
            readiness(p, m, now).expect("items were checked when parsed");
        }
        let _ = q.ready(m, now);
    }
    if let Some(first) = q.items.first().cloned() {
        q.push(first);
        let n = q.items.len();
        let mut reported = false;
        for epoch in [m.epoch, m.epoch + 1] {
            let r = q
                .record(0, AuditResult::NotFound { epoch, filter: 0 }, "fuzz", 1)
                .expect("index 0 exists");
            if let Recorded::Report(rep) = r {
                assert!(rep.not_found_in_epochs.len() == 2);
                reported = true;
                break;
            }
        }
        assert!(reported || q.items.len() == n);
        let _ = q.record(
            0,
            AuditResult::Logged {
                epoch: 9,
                filter: 1,
            },
            "fuzz",
            2,
        );
    }
});
