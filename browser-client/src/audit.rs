//! One browser's audit step, as `sct-audit check` and an embedding
//! application run it: queue the auditable SCTs of a certificate, then run
//! every audit of the queue that is ready against the current epoch.

use std::sync::Arc;

use serde::Serialize;

use crate::error::Result;
use crate::net::{Auditor, QueryStats};
use crate::policy::{
    readiness, AuditResult, MisbehaviourReport, PendingQueue, Readiness, Recorded,
};
use crate::probe::Prober;
use crate::sct::{CheckedSct, Signature};

/// What happened to one SCT (or queued audit).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum Outcome {
    /// Not audited: the SCT does not verify, or its log is unknown.
    NotAuditable {
        /// Log ID (base64).
        log_id: String,
        /// Why.
        signature: Signature,
    },
    /// Waiting (MMD, coverage, or a later epoch for a re-check).
    Pending {
        /// Log ID (base64).
        log_id: String,
        /// Leaf hash (hex).
        leaf_hash: String,
        /// What it waits for.
        waiting_for: String,
    },
    /// The probed bit was 1.
    Logged {
        /// Log ID (base64).
        log_id: String,
        /// Leaf hash (hex).
        leaf_hash: String,
        /// Epoch.
        epoch: u64,
        /// Filter probed.
        filter: u32,
        /// Request bytes.
        upload_bytes: usize,
        /// Response bytes.
        download_bytes: usize,
    },
    /// The probed bit was 0; re-checked in a later epoch.
    NotFound {
        /// Log ID (base64).
        log_id: String,
        /// Leaf hash (hex).
        leaf_hash: String,
        /// Epoch.
        epoch: u64,
        /// Filter probed.
        filter: u32,
    },
    /// Not found in two epochs: the report.
    Misbehaviour(Box<MisbehaviourReport>),
}

/// Queues the auditable SCTs of `chain[0]` and runs every ready audit of
/// `queue` against the auditor's current epoch (one fresh random filter
/// per audit). Returns what happened, including queued audits from earlier
/// calls; the caller saves the queue.
pub async fn audit_now(
    auditor: &Auditor,
    queue: &mut PendingQueue,
    chain: &[Vec<u8>],
    checked: &[CheckedSct],
    now_ms: u64,
) -> Result<(Vec<Outcome>, Vec<QueryStats>)> {
    let mut out = Vec::new();
    for s in checked {
        match s.to_pending(chain, now_ms) {
            Some(p) => queue.push(p),
            None => out.push(Outcome::NotAuditable {
                log_id: s.log_id.clone(),
                signature: s.signature.clone(),
            }),
        }
    }
    let (manifest, _) = auditor.manifest().await?;
    let prober = Prober::new(Arc::new(manifest));
    let mut stats = Vec::new();
    let mut i = 0;
    while i < queue.items.len() {
        let item = &queue.items[i];
        let (log_id, leaf_hash) = (item.log_id.clone(), item.leaf_hash.clone());
        match readiness(item, prober.manifest(), now_ms)? {
            Readiness::Ready => {}
            other => {
                out.push(Outcome::Pending {
                    log_id,
                    leaf_hash,
                    waiting_for: match other {
                        Readiness::WaitForMmd(t) => format!("the log's MMD (until {t} ms)"),
                        Readiness::WaitForCoverage => "an epoch covering the SCT".to_owned(),
                        _ => "a later epoch (re-check)".to_owned(),
                    },
                });
                i += 1;
                continue;
            }
        }
        let q = prober.prepare(&item.leaf_hash_bytes()?)?;
        let (bit, st) = auditor.query(&q).await?;
        stats.push(st);
        let result = if bit {
            AuditResult::Logged {
                epoch: q.epoch,
                filter: q.filter,
            }
        } else {
            AuditResult::NotFound {
                epoch: q.epoch,
                filter: q.filter,
            }
        };
        match queue.record(i, result, auditor.base(), now_ms)? {
            Recorded::Done => out.push(Outcome::Logged {
                log_id,
                leaf_hash,
                epoch: q.epoch,
                filter: q.filter,
                upload_bytes: st.upload_bytes,
                download_bytes: st.download_bytes,
            }),
            Recorded::Recheck => {
                out.push(Outcome::NotFound {
                    log_id,
                    leaf_hash,
                    epoch: q.epoch,
                    filter: q.filter,
                });
                i += 1;
            }
            Recorded::Report(r) => out.push(Outcome::Misbehaviour(r)),
        }
    }
    Ok((out, stats))
}
