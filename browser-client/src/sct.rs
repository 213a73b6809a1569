//! From a certificate and its SCTs to the RFC 6962 leaf hash the log must
//! have logged (RFC 6962 §3.1–3.4), with the SCT signature checked.
//!
//! * SCTs embedded in the certificate (extension 1.3.6.1.4.1.11129.2.4.2)
//!   were issued for the **precertificate**: the leaf is a `precert_entry`
//!   with `issuer_key_hash` = SHA-256 of the issuer's SubjectPublicKeyInfo
//!   and the TBSCertificate with the SCT-list extension removed and
//!   re-encoded in DER (ct-core `precert`).
//! * SCTs delivered by TLS or OCSP were issued for the certificate itself:
//!   an `x509_entry`.
//! * Either way the SCT's `extensions` are copied verbatim into the
//!   `TimestampedEntry` (static-ct-api logs put a `leaf_index` there).
//!
//! The SCT signature covers exactly the fields of that `TimestampedEntry`,
//! so a signature that verifies with the log's key proves the leaf was
//! rebuilt as the log saw it. SCTs that do not verify are not audited:
//! they are the browser's problem (reject the certificate), not evidence
//! against a log.

use audit_proto::{LeafHash, LogId};
use ct_core::leaf::{MerkleTreeLeaf, SignedEntry};
use ct_core::loglist::LogList;
use ct_core::sth::SignedCertificateTimestamp;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::policy::{b64, EntryKind, PendingAudit};

/// Largest certificate file accepted (PEM or DER).
pub const MAX_CERT_FILE: usize = 1 << 20;

fn ct(e: ct_core::Error) -> Error {
    Error::Ct(e.to_string())
}

/// Certificates from PEM (one or more `CERTIFICATE` blocks) or one DER.
pub fn parse_certificates(bytes: &[u8]) -> Result<Vec<Vec<u8>>> {
    use base64::Engine as _;
    if bytes.len() > MAX_CERT_FILE {
        return Err(Error::Invalid(format!(
            "certificate input over {MAX_CERT_FILE} bytes"
        )));
    }
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Ok(vec![bytes.to_vec()]); // binary: DER
    };
    if !text.contains("-----BEGIN") {
        return Ok(vec![bytes.to_vec()]);
    }
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("-----BEGIN CERTIFICATE-----") {
        let body = &rest[start + 27..];
        let end = body
            .find("-----END CERTIFICATE-----")
            .ok_or_else(|| Error::Invalid("PEM: missing END CERTIFICATE".into()))?;
        let b64text: String = body[..end].chars().filter(|c| !c.is_whitespace()).collect();
        let der = base64::engine::general_purpose::STANDARD
            .decode(b64text)
            .map_err(|e| Error::Invalid(format!("PEM: {e}")))?;
        out.push(der);
        rest = &body[end + 25..];
    }
    if out.is_empty() {
        return Err(Error::Invalid(
            "PEM input without a CERTIFICATE block".into(),
        ));
    }
    Ok(out)
}

/// Outcome of checking an SCT's signature.
///
/// JSON: `{"status": "valid" | "invalid" | "unknown_log", "detail": …,
/// "message": …}`, where `detail` (only for `invalid`) is the verifier's
/// reason and `message` the sentence for people ([`Signature`]'s
/// `Display`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Signature {
    /// Verifies with the log's key over the rebuilt entry.
    Valid,
    /// Does not verify (or wrong key type): not audited.
    Invalid(String),
    /// The log is not in the log list: cannot be checked, not audited.
    UnknownLog,
}

impl Signature {
    /// `"valid"`, `"invalid"` or `"unknown_log"`.
    pub fn status(&self) -> &'static str {
        match self {
            Signature::Valid => "valid",
            Signature::Invalid(_) => "invalid",
            Signature::UnknownLog => "unknown_log",
        }
    }
}

impl std::fmt::Display for Signature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Signature::Valid => f.write_str("the SCT's signature verifies with the log's key"),
            Signature::Invalid(why) => write!(
                f,
                "the SCT's signature does not verify with the log's key ({why}), so the \
                 SCT is not audited: it proves nothing about the log, and a browser \
                 should not accept it"
            ),
            Signature::UnknownLog => f.write_str(
                "the log is not in the log list, so the SCT's signature cannot be checked \
                 and the SCT is not audited",
            ),
        }
    }
}

impl Serialize for Signature {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        let mut st = s.serialize_struct("Signature", 3)?;
        st.serialize_field("status", self.status())?;
        match self {
            Signature::Invalid(why) => st.serialize_field("detail", why)?,
            _ => st.skip_field("detail")?,
        }
        st.serialize_field("message", &self.to_string())?;
        st.end()
    }
}

/// One SCT of a certificate, rebuilt and checked.
#[derive(Clone, Debug, Serialize)]
pub struct CheckedSct {
    /// Log ID (base64 in JSON).
    pub log_id: LogId,
    /// The log's description from the log list.
    pub log_description: Option<String>,
    /// The log's MMD (s) from the log list.
    pub mmd_s: Option<u64>,
    /// SCT timestamp (ms).
    pub timestamp_ms: u64,
    /// SCT extensions, hex (copied verbatim into the leaf).
    pub extensions: String,
    /// `leaf_index` extension (static-ct-api logs), if present.
    pub leaf_index: Option<u64>,
    /// Leaf kind.
    pub kind: EntryKind,
    /// RFC 6962 leaf hash (hex in JSON).
    pub leaf_hash: LeafHash,
    /// Signature check.
    pub signature: Signature,
    /// The SCT (TLS encoding), base64.
    pub sct: String,
}

impl CheckedSct {
    /// Whether this SCT should be audited (signature verifies with a known
    /// log's key).
    pub fn auditable(&self) -> bool {
        self.signature == Signature::Valid
    }

    /// The pending audit for it (`None` if not auditable).
    pub fn to_pending(&self, chain: &[Vec<u8>], now_ms: u64) -> Option<PendingAudit> {
        if !self.auditable() {
            return None;
        }
        Some(PendingAudit {
            leaf_hash: self.leaf_hash,
            log_id: self.log_id,
            sct_timestamp_ms: self.timestamp_ms,
            mmd_s: self.mmd_s.unwrap_or(86_400),
            kind: self.kind,
            sct: self.sct.clone(),
            chain: chain.iter().map(|c| b64(c)).collect(),
            not_found_in: None,
            queued_at_ms: now_ms,
        })
    }
}

fn check(
    sct: &SignedCertificateTimestamp,
    entry: SignedEntry,
    kind: EntryKind,
    list: &LogList,
) -> Result<CheckedSct> {
    let log = list.find_by_log_id(&sct.log_id);
    let signature = match log {
        None => Signature::UnknownLog,
        Some(info) => match sct.verify(&info.key, &entry) {
            Ok(()) => Signature::Valid,
            Err(e) => Signature::Invalid(e.to_string()),
        },
    };
    let leaf_index = ct_core::leaf::leaf_index_from_extensions(&sct.extensions).unwrap_or(None);
    let leaf = MerkleTreeLeaf::new(sct.timestamped_entry(entry));
    let leaf_hash = leaf.leaf_hash().map_err(ct)?;
    Ok(CheckedSct {
        log_id: sct.log_id,
        log_description: log.map(|l| l.description.clone()),
        mmd_s: log.map(|l| l.mmd),
        timestamp_ms: sct.timestamp,
        extensions: audit_proto::hex::encode(&sct.extensions),
        leaf_index,
        kind,
        leaf_hash,
        signature,
        sct: b64(&sct.encode().map_err(ct)?),
    })
}

/// Whether `cert_der` carries the embedded SCT-list extension (whose SCTs
/// need the issuer certificate to rebuild their leaf).
pub fn has_embedded_scts(cert_der: &[u8]) -> Result<bool> {
    let tbs = ct_core::precert::tbs_certificate(cert_der).map_err(ct)?;
    let (_, ext) =
        ct_core::precert::remove_extension(tbs, ct_core::precert::OID_SCT_LIST).map_err(ct)?;
    Ok(ext.is_some())
}

/// Every SCT embedded in `cert_der` (issued by `issuer_der`), rebuilt as a
/// `precert_entry` and checked against `list`. A certificate without the
/// SCT-list extension has none (its SCTs, if any, came by TLS or OCSP).
pub fn embedded_scts(
    cert_der: &[u8],
    issuer_der: &[u8],
    list: &LogList,
) -> Result<Vec<CheckedSct>> {
    if !has_embedded_scts(cert_der)? {
        return Ok(Vec::new());
    }
    let (entry, scts) =
        ct_core::precert::precert_entry_from_final_cert(cert_der, issuer_der).map_err(ct)?;
    scts.iter()
        .map(|s| check(s, entry.clone(), EntryKind::Precert, list))
        .collect()
}

/// An SCT delivered by TLS or OCSP (TLS-encoded `sct`) for `cert_der`,
/// rebuilt as an `x509_entry` and checked against `list`.
pub fn delivered_sct(cert_der: &[u8], sct: &[u8], list: &LogList) -> Result<CheckedSct> {
    let sct = SignedCertificateTimestamp::decode(sct).map_err(ct)?;
    check(
        &sct,
        SignedEntry::X509(cert_der.to_vec()),
        EntryKind::X509,
        list,
    )
}

/// Parses a log list v3.
pub fn parse_log_list(bytes: &[u8]) -> Result<LogList> {
    LogList::from_json(bytes).map_err(ct)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_json_and_messages_are_for_people() {
        let bad = Signature::Invalid("signature verification failed for SCT".into());
        let v = serde_json::to_value(&bad).unwrap();
        assert_eq!(v["status"], "invalid");
        assert_eq!(v["detail"], "signature verification failed for SCT");
        let msg = v["message"].as_str().unwrap();
        assert!(
            msg.starts_with("the SCT's signature does not verify"),
            "{msg}"
        );
        assert!(
            msg.contains("not audited") && !msg.contains("Invalid("),
            "{msg}"
        );
        let v = serde_json::to_value(Signature::UnknownLog).unwrap();
        assert_eq!(v["status"], "unknown_log");
        assert!(v.get("detail").is_none());
        assert!(v["message"]
            .as_str()
            .unwrap()
            .contains("not in the log list"));
        assert!(!Signature::UnknownLog.to_string().contains("UnknownLog"));
        assert_eq!(
            serde_json::to_value(Signature::Valid).unwrap()["status"],
            "valid"
        );
    }
}
