//! One browser's audit step, as `sct-audit check` and an embedding
//! application run it: queue the auditable SCTs of a certificate, then run
//! every audit of the queue that is ready against the current epoch.

use std::sync::Arc;

use audit_proto::{LeafHash, LogId};
use serde::Serialize;

use crate::canary::{canary_leaf, CanaryCheck, CanaryProbe, CanaryTally};
use crate::error::Result;
use crate::net::{Auditor, QueryStats};
use crate::policy::{
    wait_reason, AuditResult, MisbehaviourReport, PendingQueue, Recorded, WaitReason,
};
use crate::probe::Prober;
use crate::sct::{CheckedSct, Signature};
use crate::verdict::{self, Confidence};

/// What happened to one SCT (or queued audit).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum Outcome {
    /// Not audited: the SCT does not verify, or its log is unknown.
    NotAuditable {
        /// Log ID (base64 in JSON).
        log_id: LogId,
        /// Why.
        signature: Signature,
    },
    /// Not audited yet: waiting for the MMD, coverage, or a later epoch
    /// for a re-check — or never here, for a log the auditor does not
    /// track ([`WaitReason::LogNotTracked`]).
    Pending {
        /// Log ID (base64 in JSON).
        log_id: LogId,
        /// Leaf hash (hex in JSON).
        leaf_hash: LeafHash,
        /// What it waits for.
        reason: WaitReason,
    },
    /// The probed bit was 1: logged, with the odds of [`Confidence`].
    Logged {
        /// Log ID (base64 in JSON).
        log_id: LogId,
        /// Leaf hash (hex in JSON).
        leaf_hash: LeafHash,
        /// Epoch.
        epoch: u64,
        /// Filter probed.
        filter: u32,
        /// How likely a never-logged SCT gets this answer.
        confidence: Confidence,
        /// Request bytes.
        upload_bytes: usize,
        /// Response bytes.
        download_bytes: usize,
    },
    /// The probed bit was 0: certainly not in the epoch's set; re-checked
    /// in a later epoch.
    NotFound {
        /// Log ID (base64 in JSON).
        log_id: LogId,
        /// Leaf hash (hex in JSON).
        leaf_hash: LeafHash,
        /// Epoch.
        epoch: u64,
        /// Filter probed.
        filter: u32,
    },
    /// Not found in two epochs: the report.
    Misbehaviour(Box<MisbehaviourReport>),
}

/// The classes of [`Outcome`], least to most severe; `sct-audit check`
/// exits with the [`Verdict::exit_code`] of the most severe of its SCTs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every SCT audited answered LOGGED.
    Logged,
    /// Some SCT waits (MMD, coverage, a re-check in a later epoch).
    Pending,
    /// Some SCT cannot be audited: its signature does not verify, its log
    /// is not in the log list, or this auditor does not track its log.
    NotAuditable,
    /// Some SCT was NOT FOUND, or a misbehaviour report was made.
    NotFound,
}

/// `sct-audit check`'s exit code when it could not audit (bad input, the
/// auditor unreachable or answering errors).
pub const EXIT_ERROR: i32 = 1;

impl Verdict {
    /// `sct-audit check`'s exit code: 0 logged, 2 not found or
    /// misbehaviour, 3 not auditable, 4 pending ([`EXIT_ERROR`] = 1 is an
    /// error).
    pub fn exit_code(self) -> i32 {
        match self {
            Verdict::Logged => 0,
            Verdict::NotFound => 2,
            Verdict::NotAuditable => 3,
            Verdict::Pending => 4,
        }
    }

    /// The most severe verdict of `outcomes` ([`Verdict::Logged`] if empty).
    pub fn of_all<'a>(outcomes: impl IntoIterator<Item = &'a Outcome>) -> Verdict {
        outcomes
            .into_iter()
            .map(Outcome::verdict)
            .max()
            .unwrap_or(Verdict::Logged)
    }
}

impl Outcome {
    /// Its class.
    pub fn verdict(&self) -> Verdict {
        match self {
            Outcome::Logged { .. } => Verdict::Logged,
            Outcome::Pending {
                reason: WaitReason::LogNotTracked { .. },
                ..
            }
            | Outcome::NotAuditable { .. } => Verdict::NotAuditable,
            Outcome::Pending { .. } => Verdict::Pending,
            Outcome::NotFound { .. } | Outcome::Misbehaviour(_) => Verdict::NotFound,
        }
    }

    /// The log it is about.
    pub fn log_id(&self) -> LogId {
        match self {
            Outcome::NotAuditable { log_id, .. }
            | Outcome::Pending { log_id, .. }
            | Outcome::Logged { log_id, .. }
            | Outcome::NotFound { log_id, .. } => *log_id,
            Outcome::Misbehaviour(r) => r.log_id,
        }
    }

    /// What it means, for people; `log_name` (the log list's description)
    /// names the log where one is named.
    pub fn message(&self, log_name: Option<&str>) -> String {
        match self {
            Outcome::NotAuditable { signature, .. } => format!("not audited: {signature}"),
            Outcome::Pending { reason, .. } => reason.message(log_name),
            Outcome::Logged {
                epoch, confidence, ..
            } => verdict::logged(*epoch, *confidence),
            Outcome::NotFound { epoch, .. } => verdict::not_found(*epoch),
            Outcome::Misbehaviour(r) => verdict::misbehaviour(&r.not_found_in_epochs),
        }
    }
}

/// One audit that ran (a private query was sent).
#[derive(Clone, Debug)]
pub struct Audited {
    /// What it concluded.
    pub outcome: Outcome,
    /// Its leaf hash.
    pub leaf_hash: LeafHash,
    /// Whether it was the re-check of an earlier `NotFound`.
    pub recheck: bool,
    /// Wire and server figures.
    pub stats: QueryStats,
    /// Client time: building the query and decoding the answer (s).
    pub client_seconds: f64,
}

/// An audit whose query failed (every fallback attempt, or an error the
/// fallback does not handle); it stays queued as it was.
#[derive(Debug)]
pub struct FailedAudit {
    /// Its log.
    pub log_id: LogId,
    /// Its leaf hash.
    pub leaf_hash: LeafHash,
    /// Why.
    pub error: crate::error::Error,
}

impl FailedAudit {
    /// The failure's class, for reports and metrics: `fallback_exhausted`
    /// (no database answered within the bound), `unreachable`, `timeout`,
    /// `http_<status>_<code>`, `invalid_answer` (it did not decode) or
    /// `other`.
    pub fn reason(&self) -> String {
        use crate::error::Error;
        match &self.error {
            Error::Exhausted { .. } => "fallback_exhausted".into(),
            Error::Network(_) => "unreachable".into(),
            Error::Timeout(_) => "timeout".into(),
            Error::Server { status, code, .. } => format!("http_{status}_{code}"),
            Error::Invalid(_) | Error::Pir(_) => "invalid_answer".into(),
            _ => "other".into(),
        }
    }
}

/// What [`run_ready`] did.
#[derive(Debug, Default)]
pub struct ReadyRun {
    /// The audits that ran.
    pub ran: Vec<Audited>,
    /// The audits whose query failed (still queued).
    pub failed: Vec<FailedAudit>,
    /// The audits still waiting, as [`Outcome::Pending`].
    pub waiting: Vec<Outcome>,
    /// The auditor stopped serving the prober's epoch mid-run (it answered
    /// `unknown_epoch`): the audits from there on were not sent and stay
    /// queued; fetch the manifest again and rerun.
    pub epoch_retired: bool,
}

/// How many times an audit step refetches the manifest and tries again
/// when the epoch it was probing is retired under it (epochs rotate daily;
/// two rotations during one step mean something else is wrong), or when
/// the auditor's manifest or answer could not be used (a network error, an
/// error status, an answer that does not decode).
pub const EPOCH_RETRIES: usize = 2;

/// Whether `e` is the auditor saying the queried epoch is no longer served.
pub fn is_epoch_retired(e: &crate::error::Error) -> bool {
    matches!(e, crate::error::Error::Server { code, .. } if code == "unknown_epoch")
}

/// Runs every audit of `queue` that is ready against `prober`'s epoch at
/// `now_ms` (one fresh random filter each, and a fresh one for each
/// fallback attempt: [`Auditor::query_with_fallback`]) and records the
/// results in the queue. Returns the audits that ran and, as [`Outcome::Pending`], those
/// still waiting. If the auditor retires the epoch meanwhile, the run stops
/// there with [`ReadyRun::epoch_retired`] set; nothing is lost, the
/// remaining audits stay queued.
pub async fn run_ready(
    auditor: &Auditor,
    prober: &Prober,
    queue: &mut PendingQueue,
    now_ms: u64,
) -> Result<ReadyRun> {
    let mut ran = Vec::new();
    let mut failed = Vec::new();
    let mut waiting = Vec::new();
    let mut i = 0;
    while i < queue.items.len() {
        let item = &queue.items[i];
        let (log_id, leaf_hash) = (item.log_id, item.leaf_hash);
        if let Some(reason) = wait_reason(item, prober.manifest(), now_ms)? {
            waiting.push(Outcome::Pending {
                log_id,
                leaf_hash,
                reason,
            });
            i += 1;
            continue;
        }
        let recheck = item.not_found_in.is_some();
        let mut prepare_seconds = 0.0;
        // A fresh random filter and query per attempt: if the query's
        // group fails, the next attempt asks an independent database.
        let answered = auditor
            .query_with_fallback(|| {
                let t = std::time::Instant::now();
                let q = prober.prepare(leaf_hash.as_bytes());
                prepare_seconds += t.elapsed().as_secs_f64();
                q
            })
            .await;
        let (q, bit, stats) = match answered {
            Ok(a) => (a.query, a.bit, a.stats),
            Err(e) if is_epoch_retired(&e) => {
                for item in &queue.items[i..] {
                    waiting.push(Outcome::Pending {
                        log_id: item.log_id,
                        leaf_hash: item.leaf_hash,
                        reason: WaitReason::EpochRetired {
                            epoch: prober.manifest().epoch,
                        },
                    });
                }
                return Ok(ReadyRun {
                    ran,
                    failed,
                    waiting,
                    epoch_retired: true,
                });
            }
            Err(error) => {
                failed.push(FailedAudit {
                    log_id,
                    leaf_hash,
                    error,
                });
                i += 1; // kept in the queue
                continue;
            }
        };
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
        let outcome = match queue.record(i, result, auditor.base(), now_ms)? {
            Recorded::Done => Outcome::Logged {
                log_id,
                leaf_hash,
                epoch: q.epoch,
                filter: q.filter,
                confidence: Confidence::of(prober.manifest()),
                upload_bytes: stats.upload_bytes,
                download_bytes: stats.download_bytes,
            },
            Recorded::Recheck => {
                i += 1; // kept in the queue
                Outcome::NotFound {
                    log_id,
                    leaf_hash,
                    epoch: q.epoch,
                    filter: q.filter,
                }
            }
            Recorded::Report(r) => Outcome::Misbehaviour(r),
        };
        ran.push(Audited {
            outcome,
            leaf_hash,
            recheck,
            client_seconds: prepare_seconds + stats.decode_seconds,
            stats,
        });
    }
    Ok(ReadyRun {
        ran,
        failed,
        waiting,
        epoch_retired: false,
    })
}

/// Canary probes per `sct-audit check` (docs/protocol.md §6.2).
pub const CANARIES_PER_STEP: usize = 2;

/// What [`run_canaries`] did.
#[derive(Clone, Debug)]
pub struct CanaryRun {
    /// Canaries answered (recorded in the tally).
    pub answered: usize,
    /// Canaries whose query failed (not recorded: an unusable answer is
    /// never read as a bit).
    pub failed: usize,
    /// The tally's test after the run.
    pub check: CanaryCheck,
}

/// Sends `n` canary probes against `prober`'s epoch — random leaves no log
/// holds, each in a fresh random filter, indistinguishable from audits to
/// the auditor — and records their answers in `tally` (emptied first if it
/// belongs to another auditor). A query that fails is counted and skipped:
/// the other canaries still run.
pub async fn run_canaries(
    auditor: &Auditor,
    prober: &Prober,
    tally: &mut CanaryTally,
    n: usize,
) -> Result<CanaryRun> {
    let claimed = Confidence::of(prober.manifest()).false_positive_rate;
    let (mut answered, mut failed) = (0, 0);
    for _ in 0..n {
        let leaf = canary_leaf()?;
        match auditor.query_with_fallback(|| prober.prepare(&leaf)).await {
            Ok(a) => {
                let logged = a.bit;
                tally.record(
                    auditor.base(),
                    CanaryProbe {
                        epoch: a.query.epoch,
                        claimed,
                        logged,
                    },
                )?;
                answered += 1;
            }
            Err(_) => failed += 1,
        }
    }
    if tally.auditor != auditor.base() {
        *tally = CanaryTally::new(auditor.base());
    }
    Ok(CanaryRun {
        answered,
        failed,
        check: tally.check(),
    })
}

/// Queues the auditable SCTs of `chain[0]` and runs every ready audit of
/// `queue` against the auditor's current epoch (one fresh random filter
/// per audit). Returns what happened, including queued audits from earlier
/// calls; the caller saves the queue — also when this returns an error.
///
/// An answer that cannot be used — garbage, a wrong length, an answer
/// under another epoch's seed, an error status — is never read as a bit:
/// the step fetches the manifest again and retries, up to
/// [`EPOCH_RETRIES`] times, then returns the error. The audit stays queued
/// as it was (results recorded before the error stay recorded in `queue`),
/// so a hostile or broken auditor yields errors and retries, never a
/// `NotFound`.
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
                log_id: s.log_id,
                signature: s.signature.clone(),
            }),
        }
    }
    let mut stats = Vec::new();
    for attempt in 0..=EPOCH_RETRIES {
        let step = async {
            let (manifest, _) = auditor.manifest().await?;
            let prober = Prober::new(Arc::new(manifest));
            run_ready(auditor, &prober, queue, now_ms).await
        }
        .await;
        let mut run = match step {
            Ok(run) => run,
            Err(_) if attempt < EPOCH_RETRIES => continue,
            Err(e) => return Err(e),
        };
        stats.extend(run.ran.iter().map(|a| a.stats));
        out.extend(run.ran.drain(..).map(|a| a.outcome));
        if !run.failed.is_empty() {
            // The audits that ran are recorded; the failed ones, still
            // queued, are tried again with a fresh manifest.
            if attempt < EPOCH_RETRIES {
                continue;
            }
            return Err(run.failed.swap_remove(0).error);
        }
        if !run.epoch_retired || attempt == EPOCH_RETRIES {
            // after the last retry the unsent audits stay queued (Pending)
            out.extend(run.waiting);
            break;
        }
    }
    Ok((out, stats))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_severe_outcome_sets_the_exit_code() {
        let (log_id, leaf_hash) = (LogId::new([1; 32]), LeafHash::new([2; 32]));
        let logged = Outcome::Logged {
            log_id,
            leaf_hash,
            epoch: 3,
            filter: 0,
            confidence: Confidence {
                false_positive_rate: 0.12,
                measured: true,
            },
            upload_bytes: 1,
            download_bytes: 1,
        };
        let pending = Outcome::Pending {
            log_id,
            leaf_hash,
            reason: WaitReason::Mmd { due_ms: 0 },
        };
        let untracked = Outcome::Pending {
            log_id,
            leaf_hash,
            reason: WaitReason::LogNotTracked { log_id },
        };
        let bad = Outcome::NotAuditable {
            log_id,
            signature: Signature::UnknownLog,
        };
        let not_found = Outcome::NotFound {
            log_id,
            leaf_hash,
            epoch: 3,
            filter: 0,
        };
        let code = |os: &[&Outcome]| Verdict::of_all(os.iter().copied()).exit_code();
        assert_eq!(code(&[]), 0);
        assert_eq!(code(&[&logged]), 0);
        assert_eq!(code(&[&logged, &pending]), 4);
        assert_eq!(code(&[&pending, &untracked]), 3);
        assert_eq!(code(&[&bad, &logged]), 3);
        assert_eq!(code(&[&pending, &bad, &not_found, &logged]), 2);
        assert_ne!(EXIT_ERROR, 0);
        assert!(logged.message(None).contains("probability 0.120"));
        assert!(untracked
            .message(Some("Argon 2026"))
            .contains("this auditor does not track log \"Argon 2026\""));
        assert!(bad
            .message(None)
            .starts_with("not audited: the log is not in the log list"));
        assert!(not_found.message(None).contains("certain"));
    }
}
