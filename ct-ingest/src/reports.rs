//! Confirming misbehaviour reports with the logs.
//!
//! The auditor verifies a report (`POST /v1/reports`) against what it
//! holds: the SCT's signature, the chain, the leaf hash, its own epochs and
//! store. It does not talk to logs; this ingester does, so after ingesting
//! it asks each log about the reports still `received`
//! ([`confirm_reports`]), once the log's verified tree has grown past the
//! SCT's timestamp plus the MMD (the store's `ingested_until_ms` has
//! reached the SCT's timestamp: the head it was recorded from was signed at
//! least an MMD after the SCT, so its tree must hold the leaf):
//!
//! * **RFC 6962 logs**: `get-proof-by-hash` for the leaf in the verified
//!   tree (`verified_tree_size`, root `verified_root_hash`). An audit path
//!   that verifies against the verified root refutes the report; a 404
//!   confirms it (the log itself says it does not hold the leaf). Anything
//!   else (a path that does not verify, a network failure) leaves the
//!   report `received`, with a note, for the next run.
//! * **static-ct-api logs** serve no lookup by hash, but the store holds
//!   every entry of the verified prefix, each checked against the
//!   checkpoint: the leaf among the log's stored entries refutes the
//!   report, its absence confirms it. A certificate already expired cannot
//!   be confirmed this way (expired entries are pruned); its report stays
//!   `received` with a note.
//!
//! A report of a log this ingester does not select, or whose ingestion
//! failed in this run, stays `received`.

use ct_core::loglist::LogApi;
use ct_core::merkle::verify_inclusion;
use ct_core::{LeafHash, LogId};
use ct_store::{ReportStatus, Store, StoredReport};

use crate::config::SelectedLog;
use crate::error::{chain, Result};
use crate::http::{HttpClient, LogEndpoint};
use crate::rfc6962::Rfc6962Client;

/// Reports read per run at most (the oldest first).
pub const MAX_REPORTS_PER_RUN: u64 = 1_000;

/// What one confirmation attempt found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckOutcome {
    /// The log does not hold the leaf.
    Confirmed,
    /// The log holds the leaf.
    Refuted,
    /// Not decided this time (why is in [`ReportCheck::note`]).
    Undecided,
}

impl CheckOutcome {
    /// The status recorded for it.
    pub fn status(&self) -> ReportStatus {
        match self {
            CheckOutcome::Confirmed => ReportStatus::Confirmed,
            CheckOutcome::Refuted => ReportStatus::Refuted,
            CheckOutcome::Undecided => ReportStatus::Received,
        }
    }

    /// `confirmed`, `refuted` or `undecided` (the metric label).
    pub fn as_str(&self) -> &'static str {
        match self {
            CheckOutcome::Confirmed => "confirmed",
            CheckOutcome::Refuted => "refuted",
            CheckOutcome::Undecided => "undecided",
        }
    }
}

/// One report checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportCheck {
    /// The report's row id.
    pub id: u64,
    /// Its log.
    pub log_id: LogId,
    /// Its leaf.
    pub leaf_hash: LeafHash,
    /// What was found.
    pub outcome: CheckOutcome,
    /// Why, for the operator (stored with the report).
    pub note: String,
}

/// Asks the logs about every `received` report (at most
/// [`MAX_REPORTS_PER_RUN`]) and records what they say in the store. Reports
/// whose log's verified tree has not yet grown past the SCT's timestamp
/// plus the MMD are left alone (not counted as an attempt). Errors only if
/// the store fails.
pub async fn confirm_reports(
    store: &Store,
    http: &HttpClient,
    logs: &[SelectedLog],
    now_ms: u64,
) -> Result<Vec<ReportCheck>> {
    let pending = store
        .reports(Some(ReportStatus::Received), MAX_REPORTS_PER_RUN)
        .await?;
    let mut out = Vec::new();
    for r in pending {
        let Some((outcome, note)) = check_one(store, http, logs, &r, now_ms).await? else {
            continue;
        };
        store
            .record_report_check(r.id, outcome.status(), &note, now_ms)
            .await?;
        tracing::info!(
            report = r.id,
            log_id = %r.report.log_id,
            leaf_hash = %r.report.leaf_hash,
            outcome = outcome.as_str(),
            %note,
            "misbehaviour report checked with the log"
        );
        out.push(ReportCheck {
            id: r.id,
            log_id: r.report.log_id,
            leaf_hash: r.report.leaf_hash,
            outcome,
            note,
        });
    }
    Ok(out)
}

/// `None`: not due yet (nothing recorded).
async fn check_one(
    store: &Store,
    http: &HttpClient,
    logs: &[SelectedLog],
    r: &StoredReport,
    now_ms: u64,
) -> Result<Option<(CheckOutcome, String)>> {
    let rep = &r.report;
    let Some(log) = logs.iter().find(|l| l.info.log_id == rep.log_id) else {
        return Ok(Some((
            CheckOutcome::Undecided,
            "the log is not among the logs this ingester selects, or its ingestion failed \
             in this run"
                .into(),
        )));
    };
    let state = store.log_state(&rep.log_id).await?;
    if state.ingested_until_ms < rep.sct_timestamp_ms {
        // The verified tree may not hold the leaf yet: wait.
        return Ok(None);
    }
    let size = state.verified_tree_size;
    match &log.info.api {
        LogApi::Rfc6962 { url } => {
            let Some(root) = state.verified_root_hash else {
                return Ok(None);
            };
            let ep = LogEndpoint::new(
                http.clone(),
                log.limits.concurrency,
                log.limits.requests_per_second,
            );
            let client = Rfc6962Client::new(ep, url, log.info.key.clone());
            Ok(Some(
                match client.get_proof_by_hash(&rep.leaf_hash, size).await {
                    Ok(None) => (
                        CheckOutcome::Confirmed,
                        format!(
                            "get-proof-by-hash: the log answered 404 for the leaf in its \
                             verified tree of size {size}"
                        ),
                    ),
                    Ok(Some((index, path))) => {
                        match verify_inclusion(&rep.leaf_hash, index, size, &path, &root) {
                            Ok(()) => (
                                CheckOutcome::Refuted,
                                format!(
                                    "get-proof-by-hash: the leaf is at index {index} of the \
                                     log's verified tree of size {size} (the proof verifies)"
                                ),
                            ),
                            Err(e) => (
                                CheckOutcome::Undecided,
                                format!(
                                    "get-proof-by-hash: the log's proof for index {index} in \
                                     tree {size} does not verify: {e}"
                                ),
                            ),
                        }
                    }
                    Err(e) => (
                        CheckOutcome::Undecided,
                        format!("get-proof-by-hash failed: {}", chain(&e)),
                    ),
                },
            ))
        }
        LogApi::StaticCt { .. } => {
            if rep.not_after < (now_ms / 1000) as i64 {
                return Ok(Some((
                    CheckOutcome::Undecided,
                    "the certificate has expired: its entry would have been pruned, so \
                     absence from the store proves nothing"
                        .into(),
                )));
            }
            let present = store
                .contains_leaf(
                    &rep.log_id,
                    &rep.leaf_hash,
                    rep.sct_timestamp_ms,
                    rep.not_after,
                )
                .await?;
            Ok(Some(if present {
                (
                    CheckOutcome::Refuted,
                    format!(
                        "the leaf is among the log's {} verified entries",
                        state.verified_position
                    ),
                )
            } else {
                (
                    CheckOutcome::Confirmed,
                    format!(
                        "absent from the log's {} verified entries (checkpoint of size {size} \
                         signed after the SCT's timestamp plus the MMD)",
                        state.verified_position
                    ),
                )
            }))
        }
    }
}
