//! Client of the RFC 6962 §4 API (`<url>/ct/v1/...`): `get-sth`,
//! `get-sth-consistency`, `get-entries`, and `get-proof-by-hash` (for
//! confirming misbehaviour reports, [`crate::reports`]).
//!
//! Every response is parsed as hostile input: the body is size-capped by
//! [`LogEndpoint`], JSON must have the expected shape, base64 must decode,
//! `get-entries` must return between 1 and the requested number of entries,
//! every `leaf_input` must be a complete `MerkleTreeLeaf` and every
//! `extra_data` a complete chain of the entry's type. Anything else is an
//! error for that request (nothing of it is returned). Tree heads are
//! returned only once their signature verifies with the log's key.
//!
//! Entries come back as [`ct_store::Entry`] values (leaf
//! index, leaf hash, SCT timestamp, `notAfter`): they are *downloaded*, not
//! verified; [`crate::ingest`] verifies them against a signed tree head
//! before they are committed.

use std::borrow::Cow;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::http::LogEndpoint;
use ct_core::leaf::{LogEntryType, MerkleTreeLeaf, MAX_CERT_LEN, MAX_EXTENSIONS_LEN};
use ct_core::merkle::{leaf_hash, Hash, HASH_LEN, MAX_PROOF_LEN};
use ct_core::sth::{decode_base64, LogKey, SignedTreeHead, MAX_STH_JSON_LEN};
use ct_core::tls::{Reader, MAX_U24_LEN};
use ct_core::LeafHash;
use ct_store::Entry;

/// Largest `leaf_input` accepted: a `MerkleTreeLeaf` with a maximal
/// certificate (or TBS plus issuer key hash) and maximal extensions.
pub const MAX_LEAF_INPUT_LEN: usize = 2 + 8 + 2 + 32 + 3 + MAX_CERT_LEN + 2 + MAX_EXTENSIONS_LEN;
/// Largest `extra_data` accepted (a certificate chain).
pub const MAX_EXTRA_DATA_LEN: usize = 3 + 3 + 2 * MAX_U24_LEN;
/// Largest `get-sth-consistency` body accepted.
pub const MAX_CONSISTENCY_JSON_LEN: usize = 64 << 10;

/// An RFC 6962 log: its endpoint (with limits), base URL and key.
#[derive(Clone, Debug)]
pub struct Rfc6962Client {
    ep: LogEndpoint,
    /// `<url>/ct/v1/`, ending in a slash.
    prefix: String,
    key: LogKey,
}

#[derive(Deserialize)]
struct GetEntriesJson<'a> {
    #[serde(borrow)]
    entries: Vec<RawEntry<'a>>,
}

#[derive(Deserialize)]
struct RawEntry<'a> {
    #[serde(borrow)]
    leaf_input: Cow<'a, str>,
    #[serde(borrow)]
    extra_data: Cow<'a, str>,
}

#[derive(Deserialize)]
struct ProofByHashJson {
    leaf_index: u64,
    audit_path: Vec<String>,
}

/// Largest `get-proof-by-hash` body accepted.
pub const MAX_PROOF_JSON_LEN: usize = 64 << 10;

#[derive(Deserialize)]
struct ConsistencyJson {
    consistency: Vec<String>,
}

impl Rfc6962Client {
    /// A client for the log at `url` (the log list's `url`, with or without
    /// a trailing slash) whose key is `key`.
    pub fn new(ep: LogEndpoint, url: &str, key: LogKey) -> Self {
        Rfc6962Client {
            ep,
            prefix: format!("{}/ct/v1/", url.trim_end_matches('/')),
            key,
        }
    }

    /// The log's key.
    pub fn key(&self) -> &LogKey {
        &self.key
    }

    /// `get-sth`, verified with the log's key.
    pub async fn get_sth(&self) -> Result<SignedTreeHead> {
        let url = format!("{}get-sth", self.prefix);
        let resp = self.ep.get(&url, MAX_STH_JSON_LEN).await?;
        let sth = SignedTreeHead::from_json(&resp.body)?;
        sth.verify(&self.key)?;
        Ok(sth)
    }

    /// `get-sth-consistency?first=..&second=..`: the proof's hashes
    /// (checked to be 32 bytes each and at most [`MAX_PROOF_LEN`]; whether
    /// they prove anything is for [`ct_core::merkle::verify_consistency`]).
    pub async fn get_sth_consistency(&self, first: u64, second: u64) -> Result<Vec<Hash>> {
        let url = format!(
            "{}get-sth-consistency?first={first}&second={second}",
            self.prefix
        );
        let resp = self.ep.get(&url, MAX_CONSISTENCY_JSON_LEN).await?;
        parse_consistency(&resp.body)
    }

    /// One `get-entries?start=..&end=..` request for `[start, end)`
    /// (`end` exclusive here; the request's `end` is inclusive). The log may
    /// return fewer entries than asked (RFC 6962 §4.6); this returns what
    /// came back, decoded, with leaf indices from `start`. Zero entries, more
    /// than asked, or any undecodable entry is an error.
    pub async fn get_entries(&self, start: u64, end: u64) -> Result<Vec<Entry>> {
        if end <= start {
            return Err(ct_core::Error::InvalidArgument(format!(
                "get-entries of the empty range [{start}, {end})"
            ))
            .into());
        }
        let url = format!("{}get-entries?start={start}&end={}", self.prefix, end - 1);
        let resp = self.ep.get(&url, usize::MAX).await?;
        parse_get_entries(&resp.body, start, end - start)
    }
}

impl Rfc6962Client {
    /// `get-proof-by-hash?hash=..&tree_size=..` (RFC 6962 §4.5): the leaf's
    /// index and audit path in the tree of `tree_size`, or `None` when the
    /// log answers 404 (it holds no leaf with that hash in that tree).
    /// Whether the path proves anything is for
    /// [`ct_core::merkle::verify_inclusion`].
    pub async fn get_proof_by_hash(
        &self,
        leaf_hash: &LeafHash,
        tree_size: u64,
    ) -> Result<Option<(u64, Vec<Hash>)>> {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD.encode(leaf_hash.as_bytes());
        // Standard base64 in a query string: '+', '/' and '=' escaped.
        let hash = b64
            .replace('+', "%2B")
            .replace('/', "%2F")
            .replace('=', "%3D");
        let url = format!(
            "{}get-proof-by-hash?hash={hash}&tree_size={tree_size}",
            self.prefix
        );
        match self.ep.get(&url, MAX_PROOF_JSON_LEN).await {
            Ok(resp) => parse_proof_by_hash(&resp.body).map(Some),
            Err(Error::Http { status: 404, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Parses a `get-proof-by-hash` body: the leaf index and the audit path
/// (32-byte hashes, at most [`MAX_PROOF_LEN`]).
pub fn parse_proof_by_hash(body: &[u8]) -> Result<(u64, Vec<Hash>)> {
    let j: ProofByHashJson =
        serde_json::from_slice(body).map_err(|source| ct_core::Error::Json {
            what: "get-proof-by-hash response",
            source,
        })?;
    if j.audit_path.len() > MAX_PROOF_LEN {
        return Err(ct_core::Error::TooLarge {
            what: "audit path",
            len: j.audit_path.len(),
            max: MAX_PROOF_LEN,
        }
        .into());
    }
    let path = j
        .audit_path
        .iter()
        .map(|h| {
            let b = decode_base64(h, "audit path hash", HASH_LEN)?;
            <Hash>::try_from(b.as_slice()).map_err(|_| {
                ct_core::Error::TooSmall {
                    what: "audit path hash",
                    len: b.len(),
                    min: HASH_LEN,
                }
                .into()
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((j.leaf_index, path))
}

/// Parses a `get-sth-consistency` body.
pub fn parse_consistency(body: &[u8]) -> Result<Vec<Hash>> {
    let j: ConsistencyJson =
        serde_json::from_slice(body).map_err(|source| ct_core::Error::Json {
            what: "get-sth-consistency response",
            source,
        })?;
    if j.consistency.len() > MAX_PROOF_LEN {
        return Err(ct_core::Error::TooLarge {
            what: "consistency proof",
            len: j.consistency.len(),
            max: MAX_PROOF_LEN,
        }
        .into());
    }
    j.consistency
        .iter()
        .map(|h| {
            let b = decode_base64(h, "consistency proof hash", HASH_LEN)?;
            let hash = <Hash>::try_from(b.as_slice()).map_err(|_| ct_core::Error::TooSmall {
                what: "consistency proof hash",
                len: b.len(),
                min: HASH_LEN,
            })?;
            Ok(hash)
        })
        .collect()
}

/// Parses a `get-entries` body for a request of `requested` entries from
/// `start`: 1..=`requested` entries, each decoded (see [`decode_entry`]).
pub fn parse_get_entries(body: &[u8], start: u64, requested: u64) -> Result<Vec<Entry>> {
    let j: GetEntriesJson<'_> =
        serde_json::from_slice(body).map_err(|source| ct_core::Error::Json {
            what: "get-entries response",
            source,
        })?;
    let n = j.entries.len() as u64;
    if n == 0 || n > requested {
        return Err(Error::malformed(
            "get-entries response",
            format!("{n} entries for a request of {requested} starting at {start}"),
        ));
    }
    j.entries
        .iter()
        .zip(start..)
        .map(|(e, index)| decode_entry(&e.leaf_input, &e.extra_data, index))
        .collect()
}

/// Decodes one `get-entries` entry at `leaf_index`: the `leaf_input`
/// `MerkleTreeLeaf` (its leaf hash is over the exact bytes served), the
/// `extra_data` chain (structure only), the SCT timestamp and `notAfter`
/// ([`crate::entry::entry_not_after`]).
pub fn decode_entry(leaf_input_b64: &str, extra_data_b64: &str, leaf_index: u64) -> Result<Entry> {
    let leaf = decode_base64(leaf_input_b64, "get-entries leaf_input", MAX_LEAF_INPUT_LEN)?;
    let mtl = MerkleTreeLeaf::decode(&leaf)?;
    let extra = decode_base64(extra_data_b64, "get-entries extra_data", MAX_EXTRA_DATA_LEN)?;
    let te = &mtl.timestamped_entry;
    check_extra_data(te.signed_entry.entry_type(), &extra)?;
    Ok(Entry {
        leaf_index,
        leaf_hash: leaf_hash(&leaf),
        sct_timestamp_ms: te.timestamp,
        not_after: crate::entry::entry_not_after(&te.signed_entry, te.timestamp, leaf_index),
    })
}

/// Checks the structure of `extra_data` (RFC 6962 §4.6): for an
/// `x509_entry`, `ASN.1Cert certificate_chain<0..2^24-1>`; for a
/// `precert_entry`, a `PrecertChainEntry` (`ASN.1Cert pre_certificate;
/// ASN.1Cert precertificate_chain<0..2^24-1>`). Certificates must be
/// non-empty; nothing may trail.
pub fn check_extra_data(entry_type: LogEntryType, extra: &[u8]) -> Result<()> {
    const WHAT: &str = "get-entries extra_data";
    let mut r = Reader::new(extra);
    if entry_type == LogEntryType::Precert {
        let pre = r.read_opaque24("PrecertChainEntry.pre_certificate")?;
        if pre.is_empty() {
            return Err(Error::malformed(WHAT, "empty pre_certificate"));
        }
    }
    let chain = r.read_opaque24("certificate_chain")?;
    r.finish(WHAT)?;
    let mut c = Reader::new(chain);
    while !c.is_empty() {
        let cert = c.read_opaque24("certificate_chain entry")?;
        if cert.is_empty() {
            return Err(Error::malformed(WHAT, "empty certificate in the chain"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_get_entries_is_an_error() {
        for body in [
            &b"<html><body>502 Bad Gateway</body></html>"[..],
            b"",
            b"{}",
            b"{\"entries\": []}",
            b"{\"entries\": [{\"leaf_input\": \"!!!\", \"extra_data\": \"\"}]}",
            b"{\"entries\": [{\"leaf_input\": \"AAAA\", \"extra_data\": \"\"}]}",
        ] {
            assert!(parse_get_entries(body, 0, 10).is_err());
        }
    }

    #[test]
    fn consistency_parsing() {
        let h = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
        let body = format!("{{\"consistency\": [\"{h}\", \"{h}\"]}}");
        assert_eq!(parse_consistency(body.as_bytes()).unwrap().len(), 2);
        assert!(parse_consistency(b"{\"consistency\": [\"AAAA\"]}").is_err());
        assert!(parse_consistency(b"<html>").is_err());
        assert_eq!(
            parse_consistency(b"{\"consistency\": []}").unwrap().len(),
            0
        );
    }

    #[test]
    fn extra_data_structure() {
        // x509: empty chain; one-cert chain.
        assert!(check_extra_data(LogEntryType::X509, &[0, 0, 0]).is_ok());
        assert!(check_extra_data(LogEntryType::X509, &[0, 0, 4, 0, 0, 1, 7]).is_ok());
        // Trailing byte, empty cert, truncated.
        assert!(check_extra_data(LogEntryType::X509, &[0, 0, 0, 1]).is_err());
        assert!(check_extra_data(LogEntryType::X509, &[0, 0, 3, 0, 0, 0]).is_err());
        assert!(check_extra_data(LogEntryType::X509, &[0, 0, 5, 0, 0, 1]).is_err());
        // precert: pre_certificate then chain.
        assert!(check_extra_data(LogEntryType::Precert, &[0, 0, 1, 9, 0, 0, 0]).is_ok());
        assert!(check_extra_data(LogEntryType::Precert, &[0, 0, 0, 0, 0, 0]).is_err());
        assert!(check_extra_data(LogEntryType::Precert, &[0, 0, 0]).is_err());
    }

    #[test]
    fn proof_by_hash_bodies_are_checked() {
        let h = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
        let ok = format!(r#"{{"leaf_index":5,"audit_path":["{h}","{h}"]}}"#);
        let (index, path) = parse_proof_by_hash(ok.as_bytes()).unwrap();
        assert_eq!((index, path.len()), (5, 2));
        assert_eq!(path[0], [0u8; 32]);
        let empty = parse_proof_by_hash(br#"{"leaf_index":0,"audit_path":[]}"#).unwrap();
        assert!(empty.1.is_empty());
        let long = format!(
            r#"{{"leaf_index":1,"audit_path":[{}]}}"#,
            vec![format!("\"{h}\""); MAX_PROOF_LEN + 1].join(",")
        );
        for bad in [
            &b"{}"[..],
            br#"{"leaf_index":-1,"audit_path":[]}"#,
            br#"{"leaf_index":1,"audit_path":["AAAA"]}"#,
            br#"{"leaf_index":1,"audit_path":["!!"]}"#,
            long.as_bytes(),
        ] {
            assert!(
                parse_proof_by_hash(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
