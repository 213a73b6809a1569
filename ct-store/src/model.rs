//! The store's plain data: what a log, an entry, a commit's outcome and a
//! log's coverage are. No behaviour beyond naming values.

use ct_core::{LeafHash, LogId};

/// Which CT API a log speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LogKind {
    /// RFC 6962 `get-entries` API.
    Rfc6962,
    /// static-ct-api (tiled) log.
    Static,
}

impl LogKind {
    /// The value stored in the `kind` column.
    pub fn as_str(self) -> &'static str {
        match self {
            LogKind::Rfc6962 => "rfc6962",
            LogKind::Static => "static",
        }
    }
}

/// Static description of a log (from the log list).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogMeta {
    /// SHA-256 of the log's public key.
    pub log_id: LogId,
    /// Submission / monitoring URL prefix.
    pub url: String,
    /// Maximum merge delay in seconds.
    pub mmd_s: u64,
    /// API flavour.
    pub kind: LogKind,
}

/// Ingestion state of one log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogState {
    /// The log's metadata.
    pub meta: LogMeta,
    /// Advisory: next leaf index the fetcher would download. Never below
    /// `verified_position` after a commit.
    pub downloaded_position: u64,
    /// Authoritative: entries `[0, verified_position)` are verified and
    /// stored (or were already expired when committed).
    pub verified_position: u64,
    /// Size of the latest verified tree head.
    pub verified_tree_size: u64,
    /// Root hash of the latest verified tree head (`None` before the first).
    pub verified_root_hash: Option<[u8; 32]>,
    /// Largest SCT timestamp (ms) such that every entry of the log up to it
    /// is stored.
    pub ingested_until_ms: u64,
}

/// One log entry as stored in S (the log id is given per batch).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    /// Position in the log.
    pub leaf_index: u64,
    /// `SHA-256(0x00 ‖ MerkleTreeLeaf)`.
    pub leaf_hash: LeafHash,
    /// SCT timestamp, ms since the Unix epoch.
    pub sct_timestamp_ms: u64,
    /// Certificate `notAfter`, seconds since the Unix epoch.
    pub not_after: i64,
}

/// What [`Store::commit`](crate::Store::commit) did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommitOutcome {
    /// Rows actually inserted into S.
    pub inserted: u64,
    /// Entries of the batch below the previous verified position (a replay
    /// after a crash): neither inserted again nor counted twice.
    pub replayed: u64,
    /// New entries not stored because their `notAfter` had already passed.
    pub expired: u64,
    /// The verified position after the commit.
    pub verified_position: u64,
}

/// Per-log coverage, for the epoch metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Coverage {
    /// The log.
    pub log_id: LogId,
    /// Size of the latest verified tree head.
    pub verified_tree_size: u64,
    /// Entries `[0, verified_position)` are in S (unless expired).
    pub verified_position: u64,
    /// Every entry with an SCT timestamp up to this (ms) is stored.
    pub ingested_until_ms: u64,
    /// The log's maximum merge delay (s).
    pub mmd_s: u64,
}

/// How a commit is made to fail, for crash tests (feature
/// `fault-injection`; not in normal builds). Either way the commit returns
/// [`StoreError::InjectedFault`](crate::StoreError::InjectedFault) with the outcome it would have reported.
#[cfg(any(test, feature = "fault-injection"))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FaultPlan {
    /// Does all the work of the transaction, then drops it instead of
    /// committing, as a crash just before `COMMIT` would: nothing of it is
    /// visible afterwards.
    CrashBeforeCommit,
    /// Commits, then fails, as a crash just after `COMMIT` (before the
    /// caller noticed) would: the next commit of the same batch is a replay.
    CrashAfterCommit,
}

#[cfg(any(test, feature = "fault-injection"))]
impl std::fmt::Display for FaultPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FaultPlan::CrashBeforeCommit => "simulated crash before COMMIT",
            FaultPlan::CrashAfterCommit => "simulated crash after COMMIT",
        })
    }
}
