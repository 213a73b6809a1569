//! When to audit, and what to remember until an audit can run
//! (YPIR §4.5 / SimplePIR §7 deployment, Chrome's policy, DeB24 in YPIR §4.5).
//!
//! * **Sampling.** Of the ~10^4 TLS connections a client makes in a week,
//!   a 1/1000 fraction is sampled and 2 SCTs of each sampled connection are
//!   audited: ≈ 20 audits a week ([`AuditPolicy`]).
//! * **Waiting.** An SCT is a promise to log within the log's maximum merge
//!   delay (MMD). It is audited only when it is older than the MMD *and*
//!   the epoch's coverage of its log (`ingested_until_ms`) has reached its
//!   timestamp; until then it waits in a persistent [`PendingQueue`].
//! * **Deciding.** Bit 1 → logged (false-positive rate ≤ ½ against an
//!   adversary, Prop. 6.2). Bit 0 → certainly not in that epoch's set: the
//!   audit is repeated once in a later epoch (the log may have merged it
//!   late, or the epoch may have been built before coverage caught up), and
//!   a second 0 produces a [`MisbehaviourReport`].

use std::path::{Path, PathBuf};

use audit_proto::{LeafHash, LogId, Manifest};
use base64::Engine as _;
use rand_core::RngCore;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Largest pending queue kept (oldest entries are dropped beyond it).
pub const MAX_PENDING: usize = 10_000;
/// Largest queue file read.
pub const MAX_QUEUE_FILE: u64 = 64 << 20;

/// Which connections are audited.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuditPolicy {
    /// TLS connections per week (for the simulator; 10^4 in the paper).
    pub connections_per_week: f64,
    /// Fraction of connections sampled (1/1000).
    pub sampled_fraction: f64,
    /// SCTs audited per sampled connection (2).
    pub audits_per_sample: u32,
}

impl Default for AuditPolicy {
    fn default() -> Self {
        AuditPolicy {
            connections_per_week: 1e4,
            sampled_fraction: 1e-3,
            audits_per_sample: 2,
        }
    }
}

impl AuditPolicy {
    /// Expected audits per week.
    pub fn audits_per_week(&self) -> f64 {
        self.connections_per_week * self.sampled_fraction * f64::from(self.audits_per_sample)
    }

    /// Decides for one connection: how many of its SCTs to audit (0 or
    /// `audits_per_sample`). `rng` should be a CSPRNG in a browser: which
    /// connections are audited must not be predictable by a server.
    pub fn sample_connection<R: RngCore>(&self, rng: &mut R) -> u32 {
        // 53 random bits → uniform in [0, 1).
        let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        if u < self.sampled_fraction {
            self.audits_per_sample
        } else {
            0
        }
    }
}

/// How the log's leaf was rebuilt (defined with the report's wire form in
/// `audit-proto`).
pub use audit_proto::report::EntryKind;

/// An SCT waiting to be audited (or re-checked).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingAudit {
    /// RFC 6962 leaf hash (hex in JSON).
    pub leaf_hash: LeafHash,
    /// Log ID (base64 in JSON).
    pub log_id: LogId,
    /// SCT timestamp (ms).
    pub sct_timestamp_ms: u64,
    /// The log's MMD from the log list (s).
    pub mmd_s: u64,
    /// Leaf kind.
    pub kind: EntryKind,
    /// The SCT (TLS encoding), base64.
    pub sct: String,
    /// Certificate chain, leaf first (DER, base64), for a report.
    pub chain: Vec<String>,
    /// Epoch of a first `NotFound`, if any.
    pub not_found_in: Option<u64>,
    /// When it was queued (ms).
    pub queued_at_ms: u64,
}

/// Whether a pending audit can run against an epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// Query now.
    Ready,
    /// The SCT is younger than the MMD: not before this time (ms).
    WaitForMmd(u64),
    /// The epoch does not cover the SCT yet (its log is absent or its
    /// ingested-until is earlier): wait for a later epoch.
    WaitForCoverage,
    /// A first `NotFound` came from this epoch (or a later one is needed).
    WaitForLaterEpoch,
}

/// Why a pending audit is not run against an epoch (the sentence for
/// people is its `Display`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum WaitReason {
    /// The SCT is younger than the log's MMD.
    Mmd {
        /// Not before this time (ms since the Unix epoch).
        due_ms: u64,
    },
    /// The auditor tracks the log, but the epoch's data of it ends before
    /// the SCT.
    Coverage {
        /// Log ID (base64 in JSON).
        log_id: LogId,
    },
    /// The auditor does not track the log at all: no epoch of it will
    /// cover the SCT unless its operator adds the log.
    LogNotTracked {
        /// Log ID (base64 in JSON).
        log_id: LogId,
    },
    /// A first NOT FOUND came from this epoch; the re-check needs a later
    /// one.
    LaterEpoch {
        /// The epoch of the first NOT FOUND.
        not_found_in: u64,
    },
    /// The auditor retired the epoch being probed while the audit step ran.
    EpochRetired {
        /// The retired epoch.
        epoch: u64,
    },
}

impl WaitReason {
    /// The sentence for people; `log_name` (the log list's description)
    /// names the log where one is named, else its base64 LogID does.
    pub fn message(&self, log_name: Option<&str>) -> String {
        let log = |id: &LogId| match log_name {
            Some(name) => format!("\"{name}\" ({id})"),
            None => id.to_string(),
        };
        match self {
            WaitReason::Mmd { due_ms } => format!(
                "pending: the SCT is younger than the log's maximum merge delay; audited \
                 from {} on",
                utc(*due_ms)
            ),
            WaitReason::Coverage { log_id } => format!(
                "pending: the auditor's current epoch does not yet cover log {} up to the \
                 SCT's time; waits for a later epoch",
                log(log_id)
            ),
            WaitReason::LogNotTracked { log_id } => format!(
                "not auditable here: this auditor does not track log {}, so no epoch will \
                 cover the SCT unless the auditor adds the log",
                log(log_id)
            ),
            WaitReason::LaterEpoch { not_found_in } => format!(
                "pending: NOT FOUND in epoch {not_found_in}; re-checked in a later epoch \
                 before anything is reported"
            ),
            WaitReason::EpochRetired { epoch } => format!(
                "pending: the auditor retired epoch {epoch} during the audit; audited \
                 against its next epoch"
            ),
        }
    }
}

impl std::fmt::Display for WaitReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message(None))
    }
}

/// Milliseconds since 1970 as RFC 3339 UTC (up to the year 9999).
fn utc(ms: u64) -> String {
    const YEAR_10000_S: u64 = 253_402_300_800;
    match ms.div_ceil(1000) {
        s if s < YEAR_10000_S => ct_core::civil::format_rfc3339(s as i64),
        _ => format!("{ms} ms after 1970"),
    }
}

/// Why `p` waits against `m` at `now_ms` (`None`: it is ready).
pub fn wait_reason(p: &PendingAudit, m: &Manifest, now_ms: u64) -> Result<Option<WaitReason>> {
    Ok(match readiness(p, m, now_ms)? {
        Readiness::Ready => None,
        Readiness::WaitForMmd(due_ms) => Some(WaitReason::Mmd { due_ms }),
        Readiness::WaitForCoverage if m.coverage(&p.log_id).is_none() => {
            Some(WaitReason::LogNotTracked { log_id: p.log_id })
        }
        Readiness::WaitForCoverage => Some(WaitReason::Coverage { log_id: p.log_id }),
        Readiness::WaitForLaterEpoch => Some(WaitReason::LaterEpoch {
            not_found_in: p.not_found_in.unwrap_or(m.epoch),
        }),
    })
}

/// Decides whether `p` can be audited against `m` at `now_ms`.
pub fn readiness(p: &PendingAudit, m: &Manifest, now_ms: u64) -> Result<Readiness> {
    let due = p
        .sct_timestamp_ms
        .saturating_add(p.mmd_s.saturating_mul(1000));
    if now_ms < due {
        return Ok(Readiness::WaitForMmd(due));
    }
    if let Some(e) = p.not_found_in {
        if m.epoch <= e {
            return Ok(Readiness::WaitForLaterEpoch);
        }
    }
    match m.coverage(&p.log_id) {
        Some(c) if c.ingested_until_ms >= p.sct_timestamp_ms => Ok(Readiness::Ready),
        _ => Ok(Readiness::WaitForCoverage),
    }
}

/// The answer of one private probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub enum AuditResult {
    /// The bit was 1.
    Logged {
        /// Epoch.
        epoch: u64,
        /// Filter probed.
        filter: u32,
    },
    /// The bit was 0: not in that epoch's set.
    NotFound {
        /// Epoch.
        epoch: u64,
        /// Filter probed.
        filter: u32,
    },
}

/// Evidence that a log did not publish an entry it promised: the body of
/// `POST /v1/reports` (versioned JSON, defined in `audit-proto`).
pub use audit_proto::report::MisbehaviourReport;

/// What recording a result did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// Logged: removed from the queue.
    Done,
    /// First `NotFound`: kept for a re-check in a later epoch.
    Recheck,
    /// Second `NotFound`: removed, and here is the report.
    Report(Box<MisbehaviourReport>),
}

/// The persistent queue of audits waiting for the MMD, for coverage, or
/// for a re-check. Native builds keep it in a JSON file (written atomically:
/// temp file + rename); the extension stores [`PendingQueue::to_json`] in
/// its own storage.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PendingQueue {
    /// Entries, oldest first.
    pub items: Vec<PendingAudit>,
    /// The canary probes of the auditor this queue is audited against
    /// (`sct-audit check` keeps them in its queue file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canaries: Option<crate::canary::CanaryTally>,
    #[serde(skip)]
    path: Option<PathBuf>,
    #[serde(skip)]
    repairs: Vec<String>,
}

impl PendingQueue {
    /// An empty in-memory queue.
    pub fn new() -> PendingQueue {
        PendingQueue::default()
    }

    /// Opens (or creates, if absent) the queue stored at `path`.
    pub fn open(path: &Path) -> Result<PendingQueue> {
        let mut q = match std::fs::metadata(path) {
            Ok(meta) if meta.len() > MAX_QUEUE_FILE => {
                return Err(Error::io(path, "queue file too large"));
            }
            Ok(_) => {
                let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
                let q = PendingQueue::from_json_repairing(&bytes)
                    .map_err(|e| Error::io(path, format!("{e}; the file was left as it is")))?;
                if !q.repairs.is_empty() {
                    // Nothing is lost: the file as found is kept beside the
                    // queue before the repaired queue replaces it on save.
                    let kept = path.with_extension(format!("bad-{}", now_ms_for_backup()));
                    std::fs::copy(path, &kept).map_err(|e| Error::io(&kept, e))?;
                }
                q
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => PendingQueue::new(),
            Err(e) => return Err(Error::io(path, e)),
        };
        q.path = Some(path.to_owned());
        Ok(q)
    }

    /// Parses a serialized queue, repairing what can be repaired: an entry
    /// that does not parse (a hand edit, a damaged write) is dropped and
    /// named in [`PendingQueue::repairs`], and the other entries are kept;
    /// duplicates (same leaf and log) are merged. A file that is not a queue
    /// at all (not JSON, no `items` list) is refused.
    pub fn from_json_repairing(bytes: &[u8]) -> Result<PendingQueue> {
        if bytes.len() as u64 > MAX_QUEUE_FILE {
            return Err(Error::Invalid("queue too large".into()));
        }
        #[derive(Deserialize)]
        struct Loose {
            items: Vec<serde_json::Value>,
        }
        let loose: Loose = serde_json::from_slice(bytes)
            .map_err(|e| Error::Invalid(format!("pending queue is not a queue file: {e}")))?;
        let mut q = PendingQueue::new();
        for (i, v) in loose.items.into_iter().enumerate() {
            match serde_json::from_value::<PendingAudit>(v) {
                Ok(p) => {
                    let before = q.items.len();
                    q.push(p);
                    if q.items.len() == before {
                        q.repairs.push(format!("entry {i}: duplicate, merged"));
                    }
                }
                Err(e) => q.repairs.push(format!("entry {i}: dropped ({e})")),
            }
        }
        Ok(q)
    }

    /// What [`PendingQueue::open`] or [`PendingQueue::from_json_repairing`]
    /// had to repair, one message per entry (empty for a sound file). When
    /// `open` repaired a file it kept the original beside it as
    /// `<name>.bad-<unix ms>`.
    pub fn repairs(&self) -> &[String] {
        &self.repairs
    }

    /// Parses a serialized queue, refusing it whole if any entry is bad.
    pub fn from_json(bytes: &[u8]) -> Result<PendingQueue> {
        if bytes.len() as u64 > MAX_QUEUE_FILE {
            return Err(Error::Invalid("queue too large".into()));
        }
        let q: PendingQueue = serde_json::from_slice(bytes)
            .map_err(|e| Error::Invalid(format!("pending queue: {e}")))?;
        Ok(q)
    }

    /// Serializes the queue.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Writes the queue back to its file, if it has one.
    pub fn save(&self) -> Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, self.to_json()).map_err(|e| Error::io(&tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
    }

    /// Adds an audit (deduplicated by leaf hash and log), dropping the
    /// oldest beyond [`MAX_PENDING`].
    pub fn push(&mut self, p: PendingAudit) {
        if self
            .items
            .iter()
            .any(|q| q.leaf_hash == p.leaf_hash && q.log_id == p.log_id)
        {
            return;
        }
        self.items.push(p);
        if self.items.len() > MAX_PENDING {
            let extra = self.items.len() - MAX_PENDING;
            self.items.drain(..extra);
        }
    }

    /// Indices of the audits ready against `m` at `now_ms`.
    pub fn ready(&self, m: &Manifest, now_ms: u64) -> Vec<usize> {
        self.items
            .iter()
            .enumerate()
            .filter(|(_, p)| matches!(readiness(p, m, now_ms), Ok(Readiness::Ready)))
            .map(|(i, _)| i)
            .collect()
    }

    /// Records the result of auditing item `index`.
    pub fn record(
        &mut self,
        index: usize,
        result: AuditResult,
        auditor: &str,
        now_ms: u64,
    ) -> Result<Recorded> {
        let item = self
            .items
            .get_mut(index)
            .ok_or_else(|| Error::Invalid(format!("no pending audit {index}")))?;
        match result {
            AuditResult::Logged { .. } => {
                self.items.remove(index);
                Ok(Recorded::Done)
            }
            AuditResult::NotFound { epoch, .. } => match item.not_found_in {
                Some(first) if epoch > first => {
                    let p = self.items.remove(index);
                    Ok(Recorded::Report(Box::new(MisbehaviourReport {
                        version: audit_proto::report::REPORT_VERSION,
                        log_id: p.log_id,
                        sct_timestamp_ms: p.sct_timestamp_ms,
                        mmd_s: p.mmd_s,
                        sct: p.sct,
                        kind: p.kind,
                        chain: p.chain,
                        leaf_hash: p.leaf_hash,
                        not_found_in_epochs: vec![first, epoch],
                        auditor: auditor.to_owned(),
                        reported_at_ms: now_ms,
                    })))
                }
                Some(_) => Ok(Recorded::Recheck),
                None => {
                    item.not_found_in = Some(epoch);
                    Ok(Recorded::Recheck)
                }
            },
        }
    }
}

/// Milliseconds for a backup file's name (0 where there is no clock).
fn now_ms_for_backup() -> u64 {
    #[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
    {
        ct_core::civil::unix_now_ms()
    }
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    {
        0
    }
}

/// Base64 (standard) of bytes, as used in queue and report files.
pub fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use audit_proto::filter::FilterSpec;
    use audit_proto::manifest::{DbLayout, LogCoverage, ManifestParts, PirSpec};

    fn manifest(epoch: u64, ingested_until_ms: u64) -> Manifest {
        Manifest::new(ManifestParts {
            epoch,
            created_at: 0,
            snapshot_at: 0,
            entries: 1,
            logs: vec![LogCoverage {
                log_id: LogId::new([1; 32]),
                verified_tree_size: 1,
                verified_position: 1,
                ingested_until_ms,
                mmd_s: 60,
            }],
            filter: FilterSpec::new(1, 8, 8, [0; 32]).unwrap(),
            pir: PirSpec {
                scheme: "ypir".into(),
                param_set: 1,
                param_name: "ypir-table1".into(),
                wire_version: 1,
                seed: [0; 32],
            },
            layout: &[DbLayout {
                filters: 1,
                rows: 8,
                cols: 1,
                query_bytes: 0,
                response_bytes: 0,
            }],
            shards: None,
        })
        .unwrap()
    }

    fn pending(ts: u64) -> PendingAudit {
        PendingAudit {
            leaf_hash: LeafHash::new([7; 32]),
            log_id: LogId::new([1; 32]),
            sct_timestamp_ms: ts,
            mmd_s: 60,
            kind: EntryKind::Precert,
            sct: b64(b"sct"),
            chain: vec![b64(b"leaf"), b64(b"issuer")],
            not_found_in: None,
            queued_at_ms: ts,
        }
    }

    #[test]
    fn policy_gives_twenty_a_week() {
        let p = AuditPolicy::default();
        assert!((p.audits_per_week() - 20.0).abs() < 1e-9);
        let mut rng = rand_chacha::ChaCha20Rng::from_seed_u64(1);
        let n: u32 = (0..100_000).map(|_| p.sample_connection(&mut rng)).sum();
        // 100 sampled connections expected (σ ≈ 10) → 200 audits.
        assert!((140..=260).contains(&n), "{n}");
    }

    trait FromSeedU64 {
        fn from_seed_u64(s: u64) -> Self;
    }
    impl FromSeedU64 for rand_chacha::ChaCha20Rng {
        fn from_seed_u64(s: u64) -> Self {
            rand_core::SeedableRng::seed_from_u64(s)
        }
    }

    #[test]
    fn readiness_waits_for_mmd_coverage_and_later_epoch() {
        let p = pending(1_000_000);
        let m = manifest(5, 2_000_000);
        assert_eq!(
            readiness(&p, &m, 1_000_000).unwrap(),
            Readiness::WaitForMmd(1_060_000)
        );
        assert_eq!(readiness(&p, &m, 1_060_000).unwrap(), Readiness::Ready);
        let early = manifest(5, 999_999);
        assert_eq!(
            readiness(&p, &early, 2_000_000).unwrap(),
            Readiness::WaitForCoverage
        );
        let mut other = pending(1_000_000);
        other.log_id = LogId::new([2; 32]);
        assert_eq!(
            readiness(&other, &m, 2_000_000).unwrap(),
            Readiness::WaitForCoverage
        );
        let mut again = p.clone();
        again.not_found_in = Some(5);
        assert_eq!(
            readiness(&again, &m, 2_000_000).unwrap(),
            Readiness::WaitForLaterEpoch
        );
        assert_eq!(
            readiness(&again, &manifest(6, 2_000_000), 2_000_000).unwrap(),
            Readiness::Ready
        );
        // The reasons, for people: a log the epoch lists but has not
        // covered yet waits; a log it does not list at all is not tracked.
        assert_eq!(wait_reason(&p, &m, 1_060_000).unwrap(), None);
        assert_eq!(
            wait_reason(&p, &early, 2_000_000).unwrap(),
            Some(WaitReason::Coverage { log_id: p.log_id })
        );
        let untracked = wait_reason(&other, &m, 2_000_000).unwrap().unwrap();
        assert_eq!(
            untracked,
            WaitReason::LogNotTracked {
                log_id: other.log_id
            }
        );
        let text = untracked.message(Some("Test Log"));
        assert!(
            text.contains(&format!(
                "this auditor does not track log \"Test Log\" ({})",
                other.log_id
            )),
            "{text}"
        );
        assert!(untracked.to_string().contains(&other.log_id.to_string()));
        let mmd = wait_reason(&p, &m, 1_000_000).unwrap().unwrap();
        assert!(mmd.to_string().contains("1970-01-01T00:17:40Z"), "{mmd}");
        assert_eq!(
            wait_reason(&again, &m, 2_000_000).unwrap(),
            Some(WaitReason::LaterEpoch { not_found_in: 5 })
        );
        // An SCT time no calendar can print is still said, not a panic.
        assert!(utc(u64::MAX).contains("ms after 1970"));
    }

    #[test]
    fn not_found_twice_in_different_epochs_makes_a_report() {
        let mut q = PendingQueue::new();
        q.push(pending(1));
        q.push(pending(1)); // duplicate ignored
        assert_eq!(q.items.len(), 1);
        let nf = |epoch| AuditResult::NotFound { epoch, filter: 3 };
        assert_eq!(
            q.record(0, nf(4), "http://a", 9).unwrap(),
            Recorded::Recheck
        );
        assert_eq!(
            q.record(0, nf(4), "http://a", 9).unwrap(),
            Recorded::Recheck
        );
        match q.record(0, nf(5), "http://a", 10).unwrap() {
            Recorded::Report(r) => {
                assert_eq!(r.not_found_in_epochs, vec![4, 5]);
                assert_eq!(r.chain.len(), 2);
            }
            other => panic!("{other:?}"),
        }
        assert!(q.items.is_empty());
        q.push(pending(2));
        assert_eq!(
            q.record(
                0,
                AuditResult::Logged {
                    epoch: 1,
                    filter: 0
                },
                "",
                0
            )
            .unwrap(),
            Recorded::Done
        );
        assert!(q
            .record(
                0,
                AuditResult::Logged {
                    epoch: 1,
                    filter: 0
                },
                "",
                0
            )
            .is_err());
    }

    #[test]
    fn queue_persists_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pending.json");
        let mut q = PendingQueue::open(&path).unwrap();
        q.push(pending(1));
        let mut second = pending(2);
        second.leaf_hash = LeafHash::new([8; 32]);
        q.push(second);
        q.record(
            0,
            AuditResult::NotFound {
                epoch: 3,
                filter: 1,
            },
            "",
            0,
        )
        .unwrap();
        q.save().unwrap();
        drop(q);
        let q2 = PendingQueue::open(&path).unwrap();
        assert_eq!(q2.items.len(), 2);
        assert_eq!(q2.items[0].not_found_in, Some(3));
        assert!(q2.repairs().is_empty());
        // A hand-edited entry is dropped with a message; the others stay,
        // and the file as found is kept beside the queue.
        let good = serde_json::to_value(&q2.items[1]).unwrap();
        let edited = serde_json::json!({"items": [{"leaf_hash": 1}, good, good]});
        let edited = serde_json::to_vec(&edited).unwrap();
        std::fs::write(&path, &edited).unwrap();
        let q3 = PendingQueue::open(&path).unwrap();
        assert_eq!(q3.items, vec![q2.items[1].clone()]);
        assert_eq!(q3.repairs().len(), 2, "{:?}", q3.repairs());
        assert!(q3.repairs()[0].starts_with("entry 0: dropped"));
        assert!(q3.repairs()[1].contains("duplicate"));
        let kept: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.extension()
                    .is_some_and(|x| x.to_string_lossy().starts_with("bad-"))
            })
            .collect();
        assert_eq!(kept.len(), 1);
        assert_eq!(std::fs::read(&kept[0]).unwrap(), edited);
        // The strict parser still refuses the edited file whole.
        assert!(PendingQueue::from_json(&edited).is_err());
        // A file that is not a queue is refused and left as it is.
        std::fs::write(&path, b"{\"items\": [").unwrap();
        let e = PendingQueue::open(&path).unwrap_err().to_string();
        assert!(e.contains("not a queue file"), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), b"{\"items\": [");
    }
}
