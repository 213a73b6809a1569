//! Misbehaviour reports (the `reports` table) and the log keys the auditor
//! verifies them with (`logs.public_key`). See `docs/storage.md`.
//!
//! The auditor inserts the reports it verified ([`Store::insert_report`],
//! status [`ReportStatus::Received`]; a second report of the same log and
//! leaf is a duplicate and changes nothing); ct-ingest, which talks to the
//! logs, records what the log says ([`Store::record_report_check`]).
//! Operators list them ([`Store::reports`]).

use sqlx::Row;

use crate::convert::{from_i64, hash32, to_i64};
use crate::error::StoreError;
use crate::month::pg_month;
use crate::store::{with_dialect, Backend, Store};
use ct_core::{LeafHash, LogId};

/// Largest public key stored (bytes of DER), as the migration's check.
pub const MAX_PUBLIC_KEY_BYTES: usize = 2048;

/// Where a report stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReportStatus {
    /// Verified by the auditor and stored; not yet confirmed with the log.
    Received,
    /// The log's verified tree, past the SCT's timestamp plus the MMD, does
    /// not hold the leaf.
    Confirmed,
    /// The log holds the leaf: the report was wrong.
    Refuted,
}

impl ReportStatus {
    /// Every status.
    pub const ALL: [ReportStatus; 3] = [
        ReportStatus::Received,
        ReportStatus::Confirmed,
        ReportStatus::Refuted,
    ];

    /// The value stored in the `status` column.
    pub fn as_str(self) -> &'static str {
        match self {
            ReportStatus::Received => "received",
            ReportStatus::Confirmed => "confirmed",
            ReportStatus::Refuted => "refuted",
        }
    }
}

impl std::str::FromStr for ReportStatus {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self, StoreError> {
        ReportStatus::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown report status {s:?}")))
    }
}

impl std::fmt::Display for ReportStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A verified report, as the auditor stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewReport {
    /// The log.
    pub log_id: LogId,
    /// The leaf the log promised.
    pub leaf_hash: LeafHash,
    /// SCT timestamp (ms).
    pub sct_timestamp_ms: u64,
    /// The log's MMD (s).
    pub mmd_s: u64,
    /// `"precert"` or `"x509"`.
    pub kind: String,
    /// The SCT's TLS encoding.
    pub sct: Vec<u8>,
    /// DER certificates, leaf first.
    pub chain: Vec<Vec<u8>>,
    /// The epochs whose sets did not hold the leaf.
    pub epochs: Vec<u64>,
    /// The leaf certificate's `notAfter` (Unix seconds).
    pub not_after: i64,
    /// When the auditor received it (ms).
    pub received_at_ms: u64,
}

/// A stored report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredReport {
    /// Row id.
    pub id: u64,
    /// What was stored.
    pub report: NewReport,
    /// Where it stands.
    pub status: ReportStatus,
    /// The last confirmation attempt (ms), if any.
    pub checked_at_ms: Option<u64>,
    /// Confirmation attempts so far.
    pub attempts: u64,
    /// What the last attempt found.
    pub note: Option<String>,
}

const REPORT_COLUMNS: &str = "report_id, log_id, leaf_hash, sct_timestamp_ms, mmd_s, kind, sct, \
                              chain, epochs, not_after, received_at_ms, status, checked_at_ms, \
                              attempts, note";

/// The chain column: each certificate behind a 3-byte big-endian length.
fn encode_chain(chain: &[Vec<u8>]) -> Result<Vec<u8>, StoreError> {
    let mut out = Vec::with_capacity(chain.iter().map(|c| c.len() + 3).sum());
    for c in chain {
        let n = u32::try_from(c.len())
            .ok()
            .filter(|&n| n < 1 << 24)
            .ok_or_else(|| StoreError::Corrupt(format!("certificate of {} bytes", c.len())))?;
        out.extend_from_slice(&n.to_be_bytes()[1..]);
        out.extend_from_slice(c);
    }
    Ok(out)
}

fn decode_chain(mut b: &[u8]) -> Result<Vec<Vec<u8>>, StoreError> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let bad = || StoreError::Corrupt("truncated chain in a stored report".into());
        let head = b.get(..3).ok_or_else(bad)?;
        let n = (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
        let cert = b.get(3..3 + n).ok_or_else(bad)?;
        out.push(cert.to_vec());
        b = &b[3 + n..];
    }
    Ok(out)
}

fn encode_epochs(epochs: &[u64]) -> String {
    epochs
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn decode_epochs(s: &str) -> Result<Vec<u64>, StoreError> {
    if s.is_empty() {
        return Ok(Vec::new());
    }
    s.split(',')
        .map(|e| {
            e.parse()
                .map_err(|_| StoreError::Corrupt(format!("epoch list {s:?} in a stored report")))
        })
        .collect()
}

fn opt_u64(what: &str, v: Option<i64>) -> Result<Option<u64>, StoreError> {
    v.map(|v| from_i64(what, v)).transpose()
}

fn report_from_row<R>(row: &R) -> Result<StoredReport, StoreError>
where
    R: Row,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<i64>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> &'r str: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<&'r str>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> &'r [u8]: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    usize: sqlx::ColumnIndex<R>,
{
    Ok(StoredReport {
        id: from_i64("report_id", row.try_get(0)?)?,
        report: NewReport {
            log_id: hash32(row.try_get(1)?)?.into(),
            leaf_hash: hash32(row.try_get(2)?)?.into(),
            sct_timestamp_ms: from_i64("sct_timestamp_ms", row.try_get(3)?)?,
            mmd_s: from_i64("mmd_s", row.try_get(4)?)?,
            kind: row.try_get::<&str, _>(5)?.to_owned(),
            sct: row.try_get::<&[u8], _>(6)?.to_vec(),
            chain: decode_chain(row.try_get(7)?)?,
            epochs: decode_epochs(row.try_get(8)?)?,
            not_after: row.try_get(9)?,
            received_at_ms: from_i64("received_at_ms", row.try_get(10)?)?,
        },
        status: row.try_get::<&str, _>(11)?.parse()?,
        checked_at_ms: opt_u64("checked_at_ms", row.try_get(12)?)?,
        attempts: from_i64("attempts", row.try_get(13)?)?,
        note: row.try_get::<Option<&str>, _>(14)?.map(str::to_owned),
    })
}

impl Store {
    /// Records the log's public key (DER SubjectPublicKeyInfo). The caller
    /// has checked that its SHA-256 is the log id.
    pub async fn set_log_key(&self, log_id: &LogId, spki_der: &[u8]) -> Result<(), StoreError> {
        if spki_der.is_empty() || spki_der.len() > MAX_PUBLIC_KEY_BYTES {
            return Err(StoreError::Corrupt(format!(
                "a log key of {} bytes",
                spki_der.len()
            )));
        }
        let affected = with_dialect!(&self.backend, |pool| {
            sqlx::query("UPDATE logs SET public_key = $1 WHERE log_id = $2")
                .bind(spki_der)
                .bind(&log_id.as_bytes()[..])
                .execute(pool)
                .await?
                .rows_affected()
        });
        if affected == 0 {
            return Err(StoreError::UnknownLog(*log_id));
        }
        Ok(())
    }

    /// The log's public key, if the ingester recorded it
    /// ([`StoreError::UnknownLog`] if the log is not in the store).
    pub async fn log_key(&self, log_id: &LogId) -> Result<Option<Vec<u8>>, StoreError> {
        let row: Option<Option<Vec<u8>>> = with_dialect!(&self.backend, |pool| {
            sqlx::query_scalar("SELECT public_key FROM logs WHERE log_id = $1")
                .bind(&log_id.as_bytes()[..])
                .fetch_optional(pool)
                .await?
        });
        row.ok_or(StoreError::UnknownLog(*log_id))
    }

    /// Whether the log's stored entries hold `leaf_hash` (with that SCT
    /// timestamp, and certificate `notAfter`). One log's entries are
    /// scanned (on PostgreSQL only the month partition of `not_after`):
    /// there is no index by leaf hash, so this is for the rare report, not
    /// for bulk use. Expired entries have been pruned and are not found.
    pub async fn contains_leaf(
        &self,
        log_id: &LogId,
        leaf_hash: &LeafHash,
        sct_timestamp_ms: u64,
        not_after: i64,
    ) -> Result<bool, StoreError> {
        let ts = to_i64("sct_timestamp_ms", sct_timestamp_ms)?;
        let found: Option<i64> = match &self.backend {
            Backend::Sqlite(pool) => {
                sqlx::query_scalar(
                    "SELECT 1 FROM entries WHERE log_no = \
                     (SELECT log_no FROM logs WHERE log_id = $1) \
                     AND sct_timestamp_ms = $2 AND leaf_hash = $3 LIMIT 1",
                )
                .bind(&log_id.as_bytes()[..])
                .bind(ts)
                .bind(&leaf_hash.as_bytes()[..])
                .fetch_optional(pool)
                .await?
            }
            Backend::Postgres(pool) => {
                sqlx::query_scalar(
                    "SELECT 1::int8 FROM entries WHERE log_no = \
                     (SELECT log_no FROM logs WHERE log_id = $1) \
                     AND expiry_month = $2 AND sct_timestamp_ms = $3 AND leaf_hash = $4 LIMIT 1",
                )
                .bind(&log_id.as_bytes()[..])
                .bind(pg_month(not_after))
                .bind(ts)
                .bind(&leaf_hash.as_bytes()[..])
                .fetch_optional(pool)
                .await?
            }
        };
        Ok(found.is_some())
    }

    /// Stores a verified report with status [`ReportStatus::Received`].
    /// Returns `false` (and changes nothing) if the same log and leaf was
    /// already reported. Needs only `INSERT` on `reports`.
    pub async fn insert_report(&self, r: &NewReport) -> Result<bool, StoreError> {
        let chain = encode_chain(&r.chain)?;
        let epochs = encode_epochs(&r.epochs);
        let ts = to_i64("sct_timestamp_ms", r.sct_timestamp_ms)?;
        let mmd = to_i64("mmd_s", r.mmd_s)?;
        let at = to_i64("received_at_ms", r.received_at_ms)?;
        let inserted = with_dialect!(&self.backend, |pool| {
            sqlx::query(
                "INSERT INTO reports (log_id, leaf_hash, sct_timestamp_ms, mmd_s, kind, sct, \
                 chain, epochs, not_after, received_at_ms) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
                 ON CONFLICT (log_id, leaf_hash) DO NOTHING",
            )
            .bind(&r.log_id.as_bytes()[..])
            .bind(&r.leaf_hash.as_bytes()[..])
            .bind(ts)
            .bind(mmd)
            .bind(&r.kind)
            .bind(&r.sct)
            .bind(&chain)
            .bind(&epochs)
            .bind(r.not_after)
            .bind(at)
            .execute(pool)
            .await?
            .rows_affected()
        });
        Ok(inserted == 1)
    }

    /// Stored reports, oldest first: all, or those with `status`; at most
    /// `limit`.
    pub async fn reports(
        &self,
        status: Option<ReportStatus>,
        limit: u64,
    ) -> Result<Vec<StoredReport>, StoreError> {
        let limit = to_i64("limit", limit)?;
        let rows = with_dialect!(&self.backend, |pool| {
            let q = format!(
                "SELECT {REPORT_COLUMNS} FROM reports WHERE ($1 = '' OR status = $1) \
                 ORDER BY report_id LIMIT $2"
            );
            sqlx::query(&q)
                .bind(status.map_or("", ReportStatus::as_str))
                .bind(limit)
                .fetch_all(pool)
                .await?
                .iter()
                .map(report_from_row)
                .collect::<Result<Vec<_>, _>>()?
        });
        Ok(rows)
    }

    /// Number of stored reports per status (every status, zeros included).
    pub async fn report_counts(&self) -> Result<Vec<(ReportStatus, u64)>, StoreError> {
        let rows: Vec<(String, i64)> = with_dialect!(&self.backend, |pool| {
            sqlx::query_as("SELECT status, count(*) FROM reports GROUP BY status")
                .fetch_all(pool)
                .await?
        });
        let mut out: Vec<(ReportStatus, u64)> =
            ReportStatus::ALL.into_iter().map(|s| (s, 0)).collect();
        for (s, n) in rows {
            let s: ReportStatus = s.parse()?;
            if let Some(slot) = out.iter_mut().find(|(x, _)| *x == s) {
                slot.1 = from_i64("count", n)?;
            }
        }
        Ok(out)
    }

    /// Records a confirmation attempt of report `id`: its new status (or
    /// the same one, if the attempt was inconclusive), when, and what it
    /// found; counts the attempt.
    pub async fn record_report_check(
        &self,
        id: u64,
        status: ReportStatus,
        note: &str,
        now_ms: u64,
    ) -> Result<(), StoreError> {
        let id = to_i64("report_id", id)?;
        let now = to_i64("checked_at_ms", now_ms)?;
        let affected = with_dialect!(&self.backend, |pool| {
            sqlx::query(
                "UPDATE reports SET status = $1, note = $2, checked_at_ms = $3, \
                 attempts = attempts + 1 WHERE report_id = $4",
            )
            .bind(status.as_str())
            .bind(note)
            .bind(now)
            .bind(id)
            .execute(pool)
            .await?
            .rows_affected()
        });
        if affected == 0 {
            return Err(StoreError::Corrupt(format!("no report {id}")));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_and_epochs_columns_round_trip() {
        let chain = vec![vec![1u8; 300], vec![], vec![2; 70_000]];
        assert_eq!(decode_chain(&encode_chain(&chain).unwrap()).unwrap(), chain);
        assert!(decode_chain(&[0, 0, 5, 1]).is_err());
        assert!(decode_chain(&[0, 0]).is_err());
        assert_eq!(decode_epochs(&encode_epochs(&[3, 4])).unwrap(), vec![3, 4]);
        assert_eq!(decode_epochs("").unwrap(), Vec::<u64>::new());
        assert!(decode_epochs("3,x").is_err());
        for s in ReportStatus::ALL {
            assert_eq!(s.as_str().parse::<ReportStatus>().unwrap(), s);
        }
        assert!("pending".parse::<ReportStatus>().is_err());
    }
}
