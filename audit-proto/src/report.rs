//! Misbehaviour reports: what a client sends to `POST /v1/reports` when an
//! SCT's leaf was absent from two epochs (`docs/protocol.md` §6).
//!
//! The body is versioned JSON ([`MisbehaviourReport`], version
//! [`REPORT_VERSION`]), the same object the client library produces and
//! the browser extension stores, so a stored report is sent as it is. It
//! names the log, carries the SCT and the certificate chain it was
//! delivered with (leaf first, DER in base64), the leaf hash the client
//! rebuilt, and the epochs whose filters did not contain that leaf.
//!
//! Parsing is strict: unknown or duplicate fields, trailing bytes, a
//! version other than 1, base64 that does not decode, and anything over
//! the caps below are refused ([`MisbehaviourReport::from_json`]);
//! [`MisbehaviourReport::check`] decodes the byte fields into a
//! [`CheckedReport`]. Whether the report is *true* (the SCT verifies, the
//! leaf really is absent) is for the auditor to check; this module only
//! fixes the form.

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use ct_core::{LeafHash, LogId};

/// The report format version this crate reads and writes.
pub const REPORT_VERSION: u32 = 1;
/// Path of the report endpoint.
pub const REPORTS_PATH: &str = "/v1/reports";
/// Largest report body accepted (bytes of JSON).
pub const MAX_REPORT_BYTES: usize = 192 << 10;
/// Most certificates in a report's chain (leaf first).
pub const MAX_CHAIN_CERTS: usize = 6;
/// Largest certificate in a chain (DER bytes).
pub const MAX_CERT_BYTES: usize = 16 << 10;
/// Largest SCT (TLS encoding, bytes): an RSA-4096 signature and a few
/// extensions fit.
pub const MAX_SCT_BYTES: usize = 2 << 10;
/// Most epochs a report names.
pub const MAX_REPORT_EPOCHS: usize = 16;
/// Longest `auditor` string.
pub const MAX_AUDITOR_LEN: usize = 2 << 10;

/// How the log's leaf was rebuilt from the certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// SCT embedded in the certificate: a `precert_entry`.
    Precert,
    /// SCT delivered by TLS or OCSP: an `x509_entry`.
    X509,
}

impl EntryKind {
    /// `"precert"` or `"x509"`, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Precert => "precert",
            EntryKind::X509 => "x509",
        }
    }
}

/// Evidence that a log did not publish an entry it promised (an SCT),
/// verifiable by anyone with the log's key: the SCT's signature over the
/// leaf rebuilt from the chain proves the promise; the leaf hash is absent
/// from the log (the log's `get-proof-by-hash`, or a full copy of it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MisbehaviourReport {
    /// Report format version ([`REPORT_VERSION`]).
    pub version: u32,
    /// Log ID (base64 in JSON).
    pub log_id: LogId,
    /// SCT timestamp (ms).
    pub sct_timestamp_ms: u64,
    /// The log's MMD (s), as the client's log list states it.
    pub mmd_s: u64,
    /// The SCT (TLS encoding), base64.
    pub sct: String,
    /// Leaf kind.
    pub kind: EntryKind,
    /// Certificate chain, leaf first (DER, base64).
    pub chain: Vec<String>,
    /// RFC 6962 leaf hash that should be in the log (hex in JSON).
    pub leaf_hash: LeafHash,
    /// Epochs whose sets did not contain it.
    pub not_found_in_epochs: Vec<u64>,
    /// The auditor that answered.
    pub auditor: String,
    /// When the report was made (ms).
    pub reported_at_ms: u64,
}

/// A report whose form is checked and whose byte fields are decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckedReport {
    /// The log.
    pub log_id: LogId,
    /// SCT timestamp (ms), as the report states it.
    pub sct_timestamp_ms: u64,
    /// MMD (s), as the report states it.
    pub mmd_s: u64,
    /// The SCT's TLS encoding.
    pub sct: Vec<u8>,
    /// Leaf kind.
    pub kind: EntryKind,
    /// DER certificates, leaf first (at least one).
    pub chain: Vec<Vec<u8>>,
    /// The claimed leaf hash.
    pub leaf_hash: LeafHash,
    /// The claimed epochs, ascending, without repeats (at least one).
    pub epochs: Vec<u64>,
    /// The auditor the client named.
    pub auditor: String,
    /// When the client made the report (ms).
    pub reported_at_ms: u64,
}

/// What `POST /v1/reports` answers for a report it accepted (202 for a
/// new report, 200 for one it already holds).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportReceipt {
    /// `"received"`: verified by the auditor and stored; the confirmation
    /// with the log follows.
    pub status: String,
    /// The report's leaf was already reported (nothing new was stored).
    pub duplicate: bool,
    /// The stored report's leaf hash (hex).
    pub leaf_hash: LeafHash,
}

fn invalid(why: impl Into<String>) -> Error {
    Error::InvalidReport(why.into())
}

fn decode_b64(what: &str, text: &str, max: usize) -> Result<Vec<u8>> {
    if text.len() > max.div_ceil(3) * 4 {
        return Err(invalid(format!("{what} is longer than {max} bytes")));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|_| invalid(format!("{what} is not standard base64")))?;
    if bytes.is_empty() {
        return Err(invalid(format!("{what} is empty")));
    }
    if bytes.len() > max {
        return Err(invalid(format!("{what} is longer than {max} bytes")));
    }
    Ok(bytes)
}

impl MisbehaviourReport {
    /// Parses a report body strictly (see the module docs) and checks it
    /// ([`MisbehaviourReport::check`]).
    pub fn from_json(bytes: &[u8]) -> Result<(MisbehaviourReport, CheckedReport)> {
        if bytes.len() > MAX_REPORT_BYTES {
            return Err(invalid(format!(
                "{} bytes, more than the {MAX_REPORT_BYTES} allowed",
                bytes.len()
            )));
        }
        let r: MisbehaviourReport =
            serde_json::from_slice(bytes).map_err(|e| invalid(e.to_string()))?;
        let checked = r.check()?;
        Ok((r, checked))
    }

    /// Checks the version and caps and decodes the byte fields.
    pub fn check(&self) -> Result<CheckedReport> {
        if self.version != REPORT_VERSION {
            return Err(invalid(format!(
                "version {} (this auditor reads version {REPORT_VERSION})",
                self.version
            )));
        }
        if self.chain.is_empty() || self.chain.len() > MAX_CHAIN_CERTS {
            return Err(invalid(format!(
                "the chain has {} certificates (1 to {MAX_CHAIN_CERTS})",
                self.chain.len()
            )));
        }
        if self.kind == EntryKind::Precert && self.chain.len() < 2 {
            return Err(invalid(
                "an embedded SCT needs the issuer certificate in the chain",
            ));
        }
        if self.not_found_in_epochs.is_empty() || self.not_found_in_epochs.len() > MAX_REPORT_EPOCHS
        {
            return Err(invalid(format!(
                "{} epochs named (1 to {MAX_REPORT_EPOCHS})",
                self.not_found_in_epochs.len()
            )));
        }
        if self.auditor.len() > MAX_AUDITOR_LEN {
            return Err(invalid(format!(
                "auditor is longer than {MAX_AUDITOR_LEN} bytes"
            )));
        }
        let sct = decode_b64("sct", &self.sct, MAX_SCT_BYTES)?;
        let chain = self
            .chain
            .iter()
            .enumerate()
            .map(|(i, c)| decode_b64(&format!("chain[{i}]"), c, MAX_CERT_BYTES))
            .collect::<Result<Vec<_>>>()?;
        let mut epochs = self.not_found_in_epochs.clone();
        epochs.sort_unstable();
        epochs.dedup();
        Ok(CheckedReport {
            log_id: self.log_id,
            sct_timestamp_ms: self.sct_timestamp_ms,
            mmd_s: self.mmd_s,
            sct,
            kind: self.kind,
            chain,
            leaf_hash: self.leaf_hash,
            epochs,
            auditor: self.auditor.clone(),
            reported_at_ms: self.reported_at_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(b: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(b)
    }

    fn report() -> MisbehaviourReport {
        MisbehaviourReport {
            version: 1,
            log_id: LogId::new([1; 32]),
            sct_timestamp_ms: 5,
            mmd_s: 60,
            sct: b64(b"sct"),
            kind: EntryKind::Precert,
            chain: vec![b64(b"leaf"), b64(b"issuer")],
            leaf_hash: LeafHash::new([7; 32]),
            not_found_in_epochs: vec![4, 3, 4],
            auditor: "http://a".into(),
            reported_at_ms: 9,
        }
    }

    fn json(v: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    #[test]
    fn a_report_round_trips_and_decodes() {
        let r = report();
        let bytes = serde_json::to_vec(&r).unwrap();
        let (back, c) = MisbehaviourReport::from_json(&bytes).unwrap();
        assert_eq!(back, r);
        assert_eq!(c.sct, b"sct");
        assert_eq!(c.chain, vec![b"leaf".to_vec(), b"issuer".to_vec()]);
        assert_eq!(c.epochs, vec![3, 4]);
        assert_eq!(c.kind.as_str(), "precert");
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(v["leaf_hash"], LeafHash::new([7; 32]).to_hex());
        assert_eq!(v["kind"], "precert");
    }

    #[test]
    fn malformed_reports_are_refused() {
        let good = serde_json::to_value(report()).unwrap();
        let with = |k: &str, val: serde_json::Value| {
            let mut v = good.clone();
            v[k] = val;
            json(v)
        };
        let mut unknown = good.clone();
        unknown["extra"] = 1.into();
        let mut missing = good.clone();
        missing.as_object_mut().unwrap().remove("sct");
        let mut trailing = json(good.clone());
        trailing.extend_from_slice(b" {}");
        let dup = {
            let s = String::from_utf8(json(good.clone())).unwrap();
            s.replacen("{", "{\"version\":1,", 1).into_bytes()
        };
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("not json", b"nope".to_vec()),
            ("unknown field", json(unknown)),
            ("missing field", json(missing)),
            ("trailing bytes", trailing),
            ("duplicate field", dup),
            ("version", with("version", 2.into())),
            ("empty chain", with("chain", serde_json::json!([]))),
            (
                "precert without issuer",
                with("chain", serde_json::json!([b64(b"leaf")])),
            ),
            (
                "long chain",
                with(
                    "chain",
                    serde_json::json!(vec![b64(b"c"); MAX_CHAIN_CERTS + 1]),
                ),
            ),
            ("bad base64", with("sct", "!!".into())),
            ("empty sct", with("sct", "".into())),
            (
                "long sct",
                with("sct", b64(&vec![0; MAX_SCT_BYTES + 1]).into()),
            ),
            (
                "long cert",
                with(
                    "chain",
                    serde_json::json!([b64(&vec![0; MAX_CERT_BYTES + 1]), b64(b"i")]),
                ),
            ),
            (
                "no epochs",
                with("not_found_in_epochs", serde_json::json!([])),
            ),
            (
                "many epochs",
                with(
                    "not_found_in_epochs",
                    serde_json::json!((0..=MAX_REPORT_EPOCHS as u64).collect::<Vec<_>>()),
                ),
            ),
            ("bad leaf hash", with("leaf_hash", "00".into())),
            ("bad log id", with("log_id", "AAAA".into())),
            ("bad kind", with("kind", "cert".into())),
            (
                "long auditor",
                with("auditor", "a".repeat(MAX_AUDITOR_LEN + 1).into()),
            ),
            ("negative", with("sct_timestamp_ms", (-1).into())),
            ("too large", vec![b' '; MAX_REPORT_BYTES + 1]),
        ];
        for (what, body) in cases {
            let e = MisbehaviourReport::from_json(&body).unwrap_err();
            assert!(matches!(e, Error::InvalidReport(_)), "{what}: {e}");
        }
        // X.509 entries need only the leaf.
        let mut x = report();
        x.kind = EntryKind::X509;
        x.chain.truncate(1);
        assert!(x.check().is_ok());
    }
}
