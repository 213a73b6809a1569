//! What the auditor checks before it stores a report, cheapest first; the
//! first failure refuses the report with its stable error code:
//!
//! 1. **The log** is in the store with its public key (recorded by
//!    ct-ingest from the log list), whose SHA-256 is the log id
//!    (`unknown_log`).
//! 2. **The SCT** parses, names that log and the report's timestamp
//!    (`bad_sct`).
//! 3. **The chain**: every certificate parses; with an issuer, the leaf's
//!    issuer name is the issuer's subject and the issuer's signature over
//!    the leaf verifies, for the algorithms ct-core verifies (ECDSA P-256
//!    and RSA 2048–4096 with SHA-256; others are not checked) (`bad_chain`).
//! 4. **The promise**: the leaf is rebuilt (a `precert_entry` from the
//!    certificate and the issuer's key, the SCT among the embedded ones; or
//!    an `x509_entry`) and the SCT's signature over it verifies with the
//!    log's key (`bad_sct`); its leaf hash is the one reported
//!    (`leaf_hash_mismatch`).
//! 5. **The epochs**: every named epoch this auditor still holds (newer
//!    than its newest are refused; older ones it has pruned are skipped,
//!    but at least one must be held) covers the log up to the SCT's
//!    timestamp (its `ingested_until_ms`, a head's timestamp minus the MMD,
//!    has reached it: the log had promised the leaf by then), and its
//!    filters do not hold the leaf: a bit of 0 in any filter of the epoch
//!    this server holds proves the leaf was not in its set
//!    (`epoch_not_covering`, `leaf_present`).
//! 6. **The store**: the log's stored entries do not hold the leaf now
//!    (`leaf_present`: it was merged late, and the next epoch will show
//!    it).
//!
//! What it cannot check itself — that the log still does not hold the leaf
//! in a tree past the SCT's timestamp plus the MMD — ct-ingest asks the log
//! afterwards (`ct-ingest/src/reports.rs`).

use audit_proto::api::ErrorCode;
use audit_proto::report::{CheckedReport, EntryKind};
use ct_core::leaf::{MerkleTreeLeaf, SignedEntry};
use ct_core::sth::{DigitallySigned, LogKey, SignedCertificateTimestamp};
use ct_core::{LeafHash, LogId};
use ct_store::{NewReport, Store, StoreError};
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::epoch;
use crate::epochdir::EpochDir;

/// A refusal: the code and a message for the client.
pub type Refusal = (ErrorCode, String);

fn refuse(code: ErrorCode, why: impl Into<String>) -> Refusal {
    (code, why.into())
}

fn store_error(e: StoreError) -> Refusal {
    tracing::error!(error = %e, "reading the store for a report failed");
    refuse(
        ErrorCode::ReportsUnavailable,
        "the auditor's store could not be read; retry later",
    )
}

/// Checks `r` (see the module docs) and returns what to store, with the
/// epochs it verified. `now_ms` is the receipt time.
pub async fn verify(
    store: &Store,
    epochs: &EpochDir,
    r: &CheckedReport,
    now_ms: u64,
) -> Result<NewReport, Refusal> {
    let log_id = r.log_id;
    // 1. The log and its key.
    let key = match store.log_key(&log_id).await {
        Ok(Some(k)) => k,
        Ok(None) => {
            return Err(refuse(
                ErrorCode::UnknownLog,
                format!("this auditor holds no key for log {}", r.log_id),
            ))
        }
        Err(StoreError::UnknownLog(_)) => {
            return Err(refuse(
                ErrorCode::UnknownLog,
                format!("this auditor does not track log {}", r.log_id),
            ))
        }
        Err(e) => return Err(store_error(e)),
    };
    let key = LogKey::from_spki_der(&key)
        .ok()
        .filter(|k| k.log_id() == log_id)
        .ok_or_else(|| {
            refuse(
                ErrorCode::UnknownLog,
                format!("the stored key of log {} is not usable", r.log_id),
            )
        })?;
    let state = store.log_state(&log_id).await.map_err(store_error)?;
    let mmd_s = state.meta.mmd_s;

    // 2. The SCT.
    let sct = SignedCertificateTimestamp::decode(&r.sct)
        .map_err(|e| refuse(ErrorCode::BadSct, format!("the SCT does not parse: {e}")))?;
    if sct.log_id != log_id {
        return Err(refuse(
            ErrorCode::BadSct,
            "the SCT names another log than the report",
        ));
    }
    if sct.timestamp != r.sct_timestamp_ms {
        return Err(refuse(
            ErrorCode::BadSct,
            format!(
                "the SCT's timestamp is {}, the report states {}",
                sct.timestamp, r.sct_timestamp_ms
            ),
        ));
    }

    // 3. The chain.
    check_chain(&r.chain)?;
    let leaf = &r.chain[0];
    let not_after = ct_core::x509::cert_not_after(leaf).map_err(|e| {
        refuse(
            ErrorCode::BadChain,
            format!("the leaf's validity does not parse: {e}"),
        )
    })?;

    // 4. The promise and the leaf hash.
    let entry = match r.kind {
        EntryKind::Precert => {
            let issuer = r
                .chain
                .get(1)
                .ok_or_else(|| refuse(ErrorCode::BadChain, "an embedded SCT needs the issuer"))?;
            let (entry, embedded) = ct_core::precert::precert_entry_from_final_cert(leaf, issuer)
                .map_err(|e| {
                refuse(
                    ErrorCode::BadChain,
                    format!("the precertificate entry cannot be rebuilt: {e}"),
                )
            })?;
            if !embedded.contains(&sct) {
                return Err(refuse(
                    ErrorCode::BadSct,
                    "the SCT is not among the certificate's embedded SCTs",
                ));
            }
            entry
        }
        EntryKind::X509 => SignedEntry::X509(leaf.clone()),
    };
    sct.verify(&key, &entry).map_err(|e| {
        refuse(
            ErrorCode::BadSct,
            format!("the SCT's signature does not verify with the log's key: {e}"),
        )
    })?;
    let rebuilt = MerkleTreeLeaf::new(sct.timestamped_entry(entry))
        .leaf_hash()
        .map_err(|e| {
            refuse(
                ErrorCode::BadChain,
                format!("the leaf cannot be encoded: {e}"),
            )
        })?;
    if rebuilt != r.leaf_hash {
        return Err(refuse(
            ErrorCode::LeafHashMismatch,
            format!(
                "the leaf rebuilt from the chain and SCT hashes to {}, the report states {}",
                rebuilt, r.leaf_hash
            ),
        ));
    }

    // 5. The epochs (file reads: off the async runtime).
    let dir = epochs.clone();
    let leaf_hash = rebuilt;
    let claimed = r.epochs.clone();
    let ts = r.sct_timestamp_ms;
    let verified =
        tokio::task::spawn_blocking(move || check_epochs(&dir, &claimed, &log_id, &leaf_hash, ts))
            .await
            .map_err(|e| refuse(ErrorCode::Internal, e.to_string()))??;

    // 6. The store, now.
    if store
        .contains_leaf(&log_id, &rebuilt, ts, not_after)
        .await
        .map_err(store_error)?
    {
        return Err(refuse(
            ErrorCode::LeafPresent,
            "the log has published the leaf since (it is in the auditor's store); \
             the next epoch holds it",
        ));
    }

    Ok(NewReport {
        log_id,
        leaf_hash: rebuilt,
        sct_timestamp_ms: ts,
        mmd_s,
        kind: r.kind.as_str().to_owned(),
        sct: r.sct.clone(),
        chain: r.chain.clone(),
        epochs: verified,
        not_after,
        received_at_ms: now_ms,
    })
}

/// Step 3: every certificate parses; the issuer (if given) issued the leaf.
fn check_chain(chain: &[Vec<u8>]) -> Result<(), Refusal> {
    let mut certs = Vec::with_capacity(chain.len());
    for (i, der) in chain.iter().enumerate() {
        match X509Certificate::from_der(der) {
            Ok(([], c)) => certs.push(c),
            Ok(_) => {
                return Err(refuse(
                    ErrorCode::BadChain,
                    format!("chain[{i}]: trailing bytes after the certificate"),
                ))
            }
            Err(e) => {
                return Err(refuse(
                    ErrorCode::BadChain,
                    format!("chain[{i}] is not a certificate: {e}"),
                ))
            }
        }
    }
    let (Some(leaf), Some(issuer)) = (certs.first(), certs.get(1)) else {
        return Ok(());
    };
    if leaf.issuer().as_raw() != issuer.subject().as_raw() {
        return Err(refuse(
            ErrorCode::BadChain,
            "the leaf's issuer is not chain[1]'s subject",
        ));
    }
    if !issuer_signed(leaf, issuer)? {
        tracing::debug!(
            algorithm = %leaf.signature_algorithm.algorithm,
            "report chain: the issuer's signature algorithm is not one ct-core verifies"
        );
    }
    Ok(())
}

/// Whether `issuer` signed `cert`: `Ok(true)` verified, `Ok(false)` not
/// checkable here (algorithm or key type), `Err` it does not verify.
fn issuer_signed(
    cert: &X509Certificate<'_>,
    issuer: &X509Certificate<'_>,
) -> Result<bool, Refusal> {
    use x509_parser::oid_registry::{OID_PKCS1_SHA256WITHRSA, OID_SIG_ECDSA_WITH_SHA256};
    let alg = &cert.signature_algorithm.algorithm;
    let signature_algorithm = if *alg == OID_SIG_ECDSA_WITH_SHA256 {
        ct_core::sth::SIGNATURE_ALGORITHM_ECDSA
    } else if *alg == OID_PKCS1_SHA256WITHRSA {
        ct_core::sth::SIGNATURE_ALGORITHM_RSA
    } else {
        return Ok(false);
    };
    let Ok(key) = LogKey::from_spki_der(issuer.public_key().raw) else {
        return Ok(false);
    };
    if key.key_type().signature_algorithm() != signature_algorithm {
        return Err(refuse(
            ErrorCode::BadChain,
            "the leaf's signature algorithm does not match the issuer's key",
        ));
    }
    let sig = DigitallySigned {
        hash_algorithm: ct_core::sth::HASH_ALGORITHM_SHA256,
        signature_algorithm,
        signature: cert.signature_value.data.to_vec(),
    };
    key.verify(cert.tbs_certificate.as_ref(), &sig, "certificate")
        .map_err(|_| {
            refuse(
                ErrorCode::BadChain,
                "the issuer's signature over the leaf does not verify",
            )
        })?;
    Ok(true)
}

/// Step 5; returns the epochs verified (held by this server).
fn check_epochs(
    dir: &EpochDir,
    claimed: &[u64],
    log_id: &LogId,
    leaf_hash: &LeafHash,
    sct_timestamp_ms: u64,
) -> Result<Vec<u64>, Refusal> {
    let held = dir
        .list()
        .map_err(|e| refuse(ErrorCode::Internal, e.to_string()))?;
    let (Some(&oldest), Some(&newest)) = (held.first(), held.last()) else {
        return Err(refuse(
            ErrorCode::EpochNotCovering,
            "this auditor holds no epoch",
        ));
    };
    let mut verified = Vec::new();
    for &e in claimed {
        if e > newest {
            return Err(refuse(
                ErrorCode::EpochNotCovering,
                format!("epoch {e} is newer than this auditor's newest, {newest}"),
            ));
        }
        if e < oldest {
            continue; // pruned: cannot be checked any more
        }
        if !held.contains(&e) {
            return Err(refuse(
                ErrorCode::EpochNotCovering,
                format!("this auditor built no epoch {e}"),
            ));
        }
        let path = dir.path(e);
        let m = epoch::read_manifest(&path).map_err(|err| {
            refuse(
                ErrorCode::EpochNotCovering,
                format!("epoch {e} cannot be read: {err}"),
            )
        })?;
        let covered = m
            .coverage(log_id)
            .is_some_and(|c| c.ingested_until_ms >= sct_timestamp_ms);
        if !covered {
            return Err(refuse(
                ErrorCode::EpochNotCovering,
                format!(
                    "epoch {e} does not cover the log up to the SCT's timestamp plus the MMD, \
                     so the leaf need not be in it"
                ),
            ));
        }
        match absent_in(&path, &m, leaf_hash) {
            Ok(Some(true)) => verified.push(e),
            Ok(Some(false)) => {
                return Err(refuse(
                    ErrorCode::LeafPresent,
                    format!("every filter of epoch {e} this server holds has the leaf's bit set"),
                ))
            }
            Ok(None) => {
                return Err(refuse(
                    ErrorCode::EpochNotCovering,
                    format!("this server holds none of epoch {e}'s databases"),
                ))
            }
            Err(err) => return Err(refuse(ErrorCode::Internal, err.to_string())),
        }
    }
    if verified.is_empty() {
        return Err(refuse(
            ErrorCode::EpochNotCovering,
            format!("none of the epochs named is still held (oldest held: {oldest})"),
        ));
    }
    Ok(verified)
}

/// `Some(true)`: a filter of the epoch has a 0 at the leaf's bit (certainly
/// not in the set); `Some(false)`: every filter held has a 1; `None`: no
/// database of the epoch is held here.
fn absent_in(
    dir: &std::path::Path,
    m: &audit_proto::Manifest,
    leaf_hash: &LeafHash,
) -> crate::Result<Option<bool>> {
    let mut any = false;
    for filter in 0..m.filter.a {
        let p = m.probe(filter, leaf_hash)?;
        match epoch::read_db_bit(dir, m, p.db, p.bit)? {
            Some(false) => return Ok(Some(true)),
            Some(true) => any = true,
            None => {}
        }
    }
    Ok(any.then_some(false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ct_testlog::{TestLog, TestLogConfig};

    fn code(r: Result<(), Refusal>) -> Option<ErrorCode> {
        r.err().map(|(c, _)| c)
    }

    #[tokio::test]
    async fn chains_are_checked_link_by_link() {
        let a = TestLog::start(TestLogConfig::default()).await.unwrap();
        let b = TestLog::start(TestLogConfig::default()).await.unwrap();
        let e = a.add_entries(1, 1.0).await.unwrap().remove(0);
        let (leaf, issuer) = (e.cert_der.clone(), e.issuer_der.clone());
        assert_eq!(code(check_chain(&[leaf.clone(), issuer.clone()])), None);
        assert_eq!(code(check_chain(std::slice::from_ref(&leaf))), None);
        let (_, l) = X509Certificate::from_der(&leaf).unwrap();
        let (_, i) = X509Certificate::from_der(&issuer).unwrap();
        assert_eq!(issuer_signed(&l, &i), Ok(true), "ECDSA P-256 is checked");
        // Another CA: refused (its name or its signature).
        assert_eq!(
            code(check_chain(&[leaf.clone(), b.issuer_der()])),
            Some(ErrorCode::BadChain)
        );
        // A leaf whose signature was altered.
        let mut bad = leaf.clone();
        let n = bad.len();
        bad[n - 1] ^= 1;
        assert_eq!(
            code(check_chain(&[bad, issuer.clone()])),
            Some(ErrorCode::BadChain)
        );
        // Trailing bytes, and bytes that are no certificate.
        let mut long = leaf.clone();
        long.push(0);
        assert_eq!(code(check_chain(&[long])), Some(ErrorCode::BadChain));
        assert_eq!(
            code(check_chain(&[b"junk".to_vec()])),
            Some(ErrorCode::BadChain)
        );
        a.shutdown().await;
        b.shutdown().await;
    }
}
