//! [`Commit`], the one way entries enter S, and the checks that turn it and
//! the stored state into the rows to write (the same for both backends).

use crate::convert::to_i64;
use crate::error::StoreError;
#[cfg(any(test, feature = "fault-injection"))]
use crate::model::FaultPlan;
use ct_core::LogId;

use crate::model::{CommitOutcome, Entry};
use crate::month::pg_month;

/// A batch of verified entries of one log, with the tree head they were
/// verified against: what [`Store::commit`](crate::Store::commit) writes,
/// together with the log's new verified position, in one transaction.
///
/// ```
/// # use ct_store::{Commit, Entry};
/// # let (log_id, root) = (ct_core::LogId::new([1u8; 32]), [2u8; 32]);
/// # let (entries, frontier): (Vec<Entry>, Vec<[u8; 32]>) = (Vec::new(), Vec::new());
/// let commit = Commit::new(&log_id, 1_000, &root)
///     .entries(&entries)
///     .ingested_until_ms(1_700_000_000_000)
///     .frontier(&frontier);
/// ```
///
/// `entries` must have consecutive leaf indices and start at or below the
/// stored verified position; a later start is a [`StoreError::Gap`]. An
/// earlier start is a replay (e.g. after a crash between the commit and the
/// caller noticing it): the already-verified prefix is skipped, so a replay
/// never duplicates rows nor moves the position back. Inserts use
/// `ON CONFLICT DO NOTHING` as a second line of defence.
///
/// The batch must end within the tree head (`tree_size`, `root_hash`). The
/// stored tree head only moves forward; a head of the same size with another
/// root is a [`StoreError::RootMismatch`]. `ingested_until_ms` only moves
/// forward. Entries whose `not_after` is before the commit's clock count
/// towards the verified position but are not stored (they are not in S).
#[derive(Clone, Copy, Debug)]
#[must_use = "a Commit does nothing until passed to Store::commit"]
pub struct Commit<'a> {
    pub(crate) log_id: &'a LogId,
    pub(crate) tree_size: u64,
    pub(crate) root_hash: &'a [u8; 32],
    pub(crate) entries: &'a [Entry],
    pub(crate) ingested_until_ms: u64,
    /// CompactRange nodes of `[0, end of batch)`, stored with the position
    /// (`None`: the stored frontier is cleared when the position moves).
    pub(crate) frontier: Option<&'a [[u8; 32]]>,
    /// The clock for expiry (`None`: the system clock).
    pub(crate) now_s: Option<i64>,
    #[cfg(any(test, feature = "fault-injection"))]
    pub(crate) fault: Option<FaultPlan>,
}

impl<'a> Commit<'a> {
    /// A commit for log `log_id` whose entries were verified against the
    /// tree head of size `tree_size` and root `root_hash`. Without
    /// [`Commit::entries`] it only records the tree head (and
    /// [`Commit::ingested_until_ms`]).
    pub fn new(log_id: &'a LogId, tree_size: u64, root_hash: &'a [u8; 32]) -> Commit<'a> {
        Commit {
            log_id,
            tree_size,
            root_hash,
            entries: &[],
            ingested_until_ms: 0,
            frontier: None,
            now_s: None,
            #[cfg(any(test, feature = "fault-injection"))]
            fault: None,
        }
    }

    /// The verified entries, in leaf-index order (default: none).
    pub fn entries(mut self, entries: &'a [Entry]) -> Commit<'a> {
        self.entries = entries;
        self
    }

    /// Largest SCT timestamp (ms) such that every entry of the log up to it
    /// is stored after this commit (default 0: the stored value stays; it
    /// never moves back).
    pub fn ingested_until_ms(mut self, ms: u64) -> Commit<'a> {
        self.ingested_until_ms = ms;
        self
    }

    /// The `CompactRange` nodes (ct-core's `merkle::CompactRange`, largest
    /// subtree first) of the entries `[0, end of batch)`, stored in the same
    /// transaction as the new verified position, so that a restart can
    /// resume hashing where the verified prefix ends (see
    /// [`Store::verified_frontier`](crate::Store::verified_frontier)).
    ///
    /// The frontier is written only if the commit moves the verified
    /// position (it then ends at the batch's end); it must hold
    /// `popcount(end)` roots, else [`StoreError::FrontierMismatch`] and
    /// nothing is written. A replay that does not move the position keeps
    /// the stored frontier. A commit without a frontier clears the stored
    /// one when it moves the position, so a stored frontier always matches
    /// the position.
    pub fn frontier(mut self, nodes: &'a [[u8; 32]]) -> Commit<'a> {
        self.frontier = Some(nodes);
        self
    }

    /// The clock for expiry, Unix seconds (default: the system clock at the
    /// commit): entries with `not_after < now_s` are not stored.
    pub fn now_s(mut self, now_s: i64) -> Commit<'a> {
        self.now_s = Some(now_s);
        self
    }

    /// Ends the commit with `fault` (feature `fault-injection`, for crash
    /// tests).
    #[cfg(any(test, feature = "fault-injection"))]
    pub fn fault(mut self, fault: FaultPlan) -> Commit<'a> {
        self.fault = Some(fault);
        self
    }
}

/// The stored state a commit is planned against.
pub(crate) struct PrevState {
    pub(crate) downloaded_position: u64,
    pub(crate) verified_position: u64,
    pub(crate) verified_tree_size: u64,
    pub(crate) verified_root_hash: Option<[u8; 32]>,
    pub(crate) ingested_until_ms: u64,
}

/// Row values to write, computed from the stored state and the commit.
pub(crate) struct Plan<'a> {
    /// New entries (at or past the previous verified position), still
    /// including expired ones.
    pub(crate) new_entries: &'a [Entry],
    pub(crate) replayed: u64,
    pub(crate) verified_position: u64,
    pub(crate) downloaded_position: u64,
    pub(crate) tree_size: u64,
    pub(crate) root_hash: Option<[u8; 32]>,
    pub(crate) ingested_until_ms: u64,
    /// `Some(value)`: write `frontier = value` (NULL if `value` is `None`);
    /// `None`: keep the stored frontier (the position did not move).
    pub(crate) frontier: Option<Option<Vec<u8>>>,
}

/// Column vectors of the rows to insert.
pub(crate) struct Columns<'a> {
    pub(crate) leaf_index: Vec<i64>,
    pub(crate) leaf_hash: Vec<&'a [u8]>,
    pub(crate) sct_timestamp_ms: Vec<i64>,
    pub(crate) not_after: Vec<i64>,
    /// PostgreSQL partition key ([`pg_month`]).
    pub(crate) expiry_month: Vec<i16>,
}

impl Columns<'_> {
    pub(crate) fn len(&self) -> usize {
        self.leaf_index.len()
    }
}

pub(crate) fn check_contiguous(entries: &[Entry]) -> Result<(), StoreError> {
    for pair in entries.windows(2) {
        let expected = pair[0]
            .leaf_index
            .checked_add(1)
            .ok_or(StoreError::OutOfRange {
                what: "leaf_index",
                value: pair[0].leaf_index,
            })?;
        if pair[1].leaf_index != expected {
            return Err(StoreError::NotContiguous {
                expected,
                found: pair[1].leaf_index,
            });
        }
    }
    Ok(())
}

/// Checks the commit against the stored state and computes the new state.
pub(crate) fn plan<'a>(prev: &PrevState, commit: &Commit<'a>) -> Result<Plan<'a>, StoreError> {
    let (new_entries, replayed, end) = match commit.entries.first() {
        None => (commit.entries, 0, prev.verified_position),
        Some(first) => {
            let first = first.leaf_index;
            if first > prev.verified_position {
                return Err(StoreError::Gap {
                    log_id: *commit.log_id,
                    verified_position: prev.verified_position,
                    first_leaf_index: first,
                });
            }
            let len = commit.entries.len() as u64;
            let end = first.checked_add(len).ok_or(StoreError::OutOfRange {
                what: "leaf_index",
                value: first,
            })?;
            // Entries below the verified position were committed before.
            let replayed = (prev.verified_position - first).min(len);
            let skip = usize::try_from(replayed).map_err(|_| StoreError::OutOfRange {
                what: "replayed",
                value: replayed,
            })?;
            (&commit.entries[skip..], replayed, end)
        }
    };
    if end > commit.tree_size {
        return Err(StoreError::BeyondTree {
            end,
            tree_size: commit.tree_size,
        });
    }
    let (tree_size, root_hash) = if commit.tree_size > prev.verified_tree_size {
        (commit.tree_size, Some(*commit.root_hash))
    } else if commit.tree_size == prev.verified_tree_size {
        match prev.verified_root_hash {
            Some(stored) if stored != *commit.root_hash => {
                return Err(StoreError::RootMismatch {
                    log_id: *commit.log_id,
                    tree_size: commit.tree_size,
                })
            }
            _ => (commit.tree_size, Some(*commit.root_hash)),
        }
    } else {
        // Verified against an older head: fine for the entries (checked
        // above that they lie within it), but the stored head stays.
        (prev.verified_tree_size, prev.verified_root_hash)
    };
    let verified_position = end.max(prev.verified_position);
    let frontier = if verified_position > prev.verified_position {
        match commit.frontier {
            Some(nodes) => {
                if nodes.len() != verified_position.count_ones() as usize {
                    return Err(StoreError::FrontierMismatch {
                        position: verified_position,
                        expected: verified_position.count_ones(),
                        found: nodes.len(),
                    });
                }
                Some(Some(nodes.concat()))
            }
            None => Some(None),
        }
    } else {
        None
    };
    Ok(Plan {
        new_entries,
        replayed,
        verified_position,
        downloaded_position: prev.downloaded_position.max(verified_position),
        tree_size,
        root_hash,
        ingested_until_ms: prev.ingested_until_ms.max(commit.ingested_until_ms),
        frontier,
    })
}

/// Column vectors of the entries still active at `now_s`.
pub(crate) fn columns(entries: &[Entry], now_s: i64) -> Result<Columns<'_>, StoreError> {
    let mut c = Columns {
        leaf_index: Vec::with_capacity(entries.len()),
        leaf_hash: Vec::with_capacity(entries.len()),
        sct_timestamp_ms: Vec::with_capacity(entries.len()),
        not_after: Vec::with_capacity(entries.len()),
        expiry_month: Vec::with_capacity(entries.len()),
    };
    for e in entries.iter().filter(|e| e.not_after >= now_s) {
        c.leaf_index.push(to_i64("leaf_index", e.leaf_index)?);
        c.leaf_hash.push(&e.leaf_hash.as_bytes()[..]);
        c.sct_timestamp_ms
            .push(to_i64("sct_timestamp_ms", e.sct_timestamp_ms)?);
        c.not_after.push(e.not_after);
        c.expiry_month.push(pg_month(e.not_after));
    }
    Ok(c)
}

pub(crate) fn outcome(plan: &Plan<'_>, stored: usize, inserted: u64) -> CommitOutcome {
    CommitOutcome {
        inserted,
        replayed: plan.replayed,
        expired: (plan.new_entries.len() - stored) as u64,
        verified_position: plan.verified_position,
    }
}
