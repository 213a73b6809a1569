//! The corpus: every certificate the log issued for a demo or simulation,
//! with its ground truth, as JSON lines.
//!
//! One line per certificate:
//!
//! ```json
//! {"cert":"<DER, base64>","issuer":"<DER, base64>","tls_sct":null,"truth":"logged"}
//! ```
//!
//! `tls_sct` is the TLS encoding (base64) of an SCT delivered separately
//! (by TLS or OCSP); it is `null` when the certificate embeds its SCT.
//! `truth` is `logged` (the log published the entry), `omitted` (the log
//! signed the SCT but never published the entry) or `forged` (the SCT's
//! signature does not verify). This is the format `audit-sim
//! simulate --corpus` reads (`audit_sim::sim::read_corpus`); audit-demo
//! tests that the two stay compatible.
//!
//! [`issue_corpus`] issues one; [`write_jsonl`] writes it.

use std::path::Path;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::log::TestLog;
use crate::shared::IssuedEntry;

/// Ground truth of a corpus certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Truth {
    /// The log published the entry.
    Logged,
    /// The log issued an SCT but never published the entry.
    Omitted,
    /// The SCT's signature is forged (does not verify).
    Forged,
}

/// One certificate of the corpus (one JSON line).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorpusRecord {
    /// Leaf certificate, DER, base64.
    pub cert: String,
    /// Issuer certificate, DER, base64.
    pub issuer: String,
    /// An SCT delivered by TLS (TLS encoding, base64) instead of embedded.
    #[serde(default)]
    pub tls_sct: Option<String>,
    /// Ground truth.
    pub truth: Truth,
}

impl CorpusRecord {
    /// The record of an issued certificate. With [`Truth::Forged`] the
    /// separately delivered SCT gets a corrupted signature (its last byte
    /// flipped); an embedded SCT cannot be forged that way (the certificate
    /// signature covers it), so that is an error.
    pub fn new(e: &IssuedEntry, truth: Truth) -> Result<CorpusRecord> {
        let tls_sct = if e.embedded {
            if truth == Truth::Forged {
                return Err(ct_core::Error::InvalidArgument(
                    "only a separately delivered SCT can be forged".into(),
                )
                .into());
            }
            None
        } else {
            let mut sct = e.sct.clone();
            if truth == Truth::Forged {
                let last = sct
                    .signature
                    .signature
                    .last_mut()
                    .ok_or_else(|| Error::Internal("the SCT has an empty signature".into()))?;
                *last ^= 0x01;
            }
            Some(BASE64.encode(sct.encode()?))
        };
        Ok(CorpusRecord {
            cert: BASE64.encode(&e.cert_der),
            issuer: BASE64.encode(&e.issuer_der),
            tls_sct,
            truth,
        })
    }

    /// The record as one JSON line (without the newline).
    pub fn to_json(&self) -> Result<String> {
        Ok(serde_json::to_string(self)?)
    }
}

/// What [`issue_corpus`] issues.
#[derive(Clone, Debug, PartialEq)]
pub struct CorpusSpec {
    /// Certificates issued and logged.
    pub logged: usize,
    /// SCTs issued (embedded in precertificate-based certificates) but
    /// never logged.
    pub omitted: usize,
    /// Separately delivered SCTs of logged certificates that also appear
    /// with a forged signature; at most the number of those (the rest of
    /// the logged ones embed their SCT).
    pub forged: usize,
    /// Fraction of the logged certificates that embed their SCT
    /// (precertificate-based); the others' SCT is delivered separately.
    pub precert_fraction: f64,
}

impl Default for CorpusSpec {
    fn default() -> Self {
        CorpusSpec {
            logged: 200,
            omitted: 20,
            forged: 10,
            precert_fraction: 0.5,
        }
    }
}

/// An issued corpus.
#[derive(Clone, Debug)]
pub struct Corpus {
    /// The logged certificates, in log order.
    pub logged: Vec<IssuedEntry>,
    /// The certificates whose SCT the log never logged.
    pub omitted: Vec<IssuedEntry>,
    /// Every record: the logged ones, then the omitted ones, then the
    /// forged ones.
    pub records: Vec<CorpusRecord>,
}

impl Corpus {
    /// Records with this truth.
    pub fn count(&self, truth: Truth) -> usize {
        self.records.iter().filter(|r| r.truth == truth).count()
    }
}

/// Issues `spec.omitted` never-logged SCTs first, then `spec.logged`
/// logged certificates, and lists them, plus `spec.forged` forged copies
/// of separately delivered SCTs. The omitted SCTs come first so that they
/// are older than the logged entries: once a head covers the logged ones
/// ([`TestLog::publish_covering_head`]), it covers the omitted ones too,
/// and their absence is misbehaviour an auditor's clients can detect.
pub async fn issue_corpus(log: &TestLog, spec: &CorpusSpec) -> Result<Corpus> {
    let mut omitted = Vec::with_capacity(spec.omitted);
    for _ in 0..spec.omitted {
        omitted.push(log.issue_unlogged().await?);
    }
    let logged = log.add_entries(spec.logged, spec.precert_fraction).await?;
    let mut records = Vec::with_capacity(logged.len() + omitted.len() + spec.forged);
    for e in &logged {
        records.push(CorpusRecord::new(e, Truth::Logged)?);
    }
    for e in &omitted {
        records.push(CorpusRecord::new(e, Truth::Omitted)?);
    }
    for e in logged.iter().filter(|e| !e.embedded).take(spec.forged) {
        records.push(CorpusRecord::new(e, Truth::Forged)?);
    }
    Ok(Corpus {
        logged,
        omitted,
        records,
    })
}

/// The records as JSON lines (each ended by a newline).
pub fn to_jsonl(records: &[CorpusRecord]) -> Result<String> {
    let mut out = String::new();
    for r in records {
        out.push_str(&r.to_json()?);
        out.push('\n');
    }
    Ok(out)
}

/// Writes the records as JSON lines to `path`, through a temporary file in
/// the same directory that is then renamed, so a reader never sees a
/// partial corpus.
pub fn write_jsonl(path: &Path, records: &[CorpusRecord]) -> Result<()> {
    write_file(path, to_jsonl(records)?.as_bytes())
}

/// Writes `bytes` to `path` through `path.tmp` and a rename.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let io = |source| Error::Io {
        path: path.to_owned(),
        source,
    };
    std::fs::write(&tmp, bytes).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(|source| {
        let _ = std::fs::remove_file(&tmp);
        io(source)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TestLogConfig;
    use ct_core::sth::SignedCertificateTimestamp;

    #[test]
    fn truth_serialises_in_snake_case() {
        for (t, s) in [
            (Truth::Logged, "\"logged\""),
            (Truth::Omitted, "\"omitted\""),
            (Truth::Forged, "\"forged\""),
        ] {
            assert_eq!(serde_json::to_string(&t).unwrap(), s);
            assert_eq!(serde_json::from_str::<Truth>(s).unwrap(), t);
        }
    }

    #[test]
    fn record_field_names_and_default() {
        let r = CorpusRecord {
            cert: "Y2VydA==".into(),
            issuer: "aXNzdWVy".into(),
            tls_sct: None,
            truth: Truth::Omitted,
        };
        assert_eq!(
            r.to_json().unwrap(),
            r#"{"cert":"Y2VydA==","issuer":"aXNzdWVy","tls_sct":null,"truth":"omitted"}"#
        );
        let without_sct: CorpusRecord =
            serde_json::from_str(r#"{"cert":"Y2VydA==","issuer":"aXNzdWVy","truth":"omitted"}"#)
                .unwrap();
        assert_eq!(without_sct, r);
    }

    #[tokio::test]
    async fn corpus_records_carry_their_truth() {
        let log = TestLog::start(TestLogConfig::default()).await.unwrap();
        let spec = CorpusSpec {
            logged: 6,
            omitted: 2,
            forged: 2,
            precert_fraction: 0.5,
        };
        let c = issue_corpus(&log, &spec).await.unwrap();
        assert_eq!((c.logged.len(), c.omitted.len()), (6, 2));
        assert_eq!(log.tree_size(), 6);
        assert_eq!(c.count(Truth::Logged), 6);
        assert_eq!(c.count(Truth::Omitted), 2);
        assert_eq!(c.count(Truth::Forged), 2);
        // The omitted SCTs are older than every logged one.
        let oldest_logged = c.logged.iter().map(|e| e.timestamp_ms).min().unwrap();
        assert!(c.omitted.iter().all(|e| e.timestamp_ms <= oldest_logged));

        let key = log.log_key();
        for r in &c.records {
            let cert = BASE64.decode(&r.cert).unwrap();
            let e = c
                .logged
                .iter()
                .chain(&c.omitted)
                .find(|e| e.cert_der == cert)
                .expect("record of an issued certificate");
            assert_eq!(BASE64.decode(&r.issuer).unwrap(), log.issuer_der());
            match (&r.tls_sct, r.truth) {
                (None, Truth::Forged) => panic!("forged record without an SCT"),
                (None, _) => assert!(e.embedded),
                (Some(b64), truth) => {
                    assert!(!e.embedded);
                    let sct =
                        SignedCertificateTimestamp::decode(&BASE64.decode(b64).unwrap()).unwrap();
                    let verified = sct.verify(&key, &e.signed_entry());
                    assert_eq!(verified.is_ok(), truth != Truth::Forged, "{truth:?}");
                }
            }
        }
        // An embedded SCT cannot be forged.
        let embedded = c.logged.iter().find(|e| e.embedded).unwrap();
        assert!(CorpusRecord::new(embedded, Truth::Forged).is_err());

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("corpus.jsonl");
        write_jsonl(&path, &c.records).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let back: Vec<CorpusRecord> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(back, c.records);
        assert!(!dir.path().join("corpus.jsonl.tmp").exists());
        log.shutdown().await;
    }

    #[tokio::test]
    async fn covering_head_covers_every_sct() {
        let log = TestLog::start(TestLogConfig {
            mmd_seconds: 1,
            ..TestLogConfig::default()
        })
        .await
        .unwrap();
        let c = issue_corpus(
            &log,
            &CorpusSpec {
                logged: 2,
                omitted: 1,
                forged: 0,
                precert_fraction: 0.0,
            },
        )
        .await
        .unwrap();
        let newest = c.logged.iter().map(|e| e.timestamp_ms).max().unwrap();
        let before = log.signed_tree_head();
        assert!(before.timestamp < newest + 1000);
        log.publish_covering_head().await.unwrap();
        let after = log.signed_tree_head();
        after.verify(&log.log_key()).unwrap();
        assert_eq!(after.tree_size, 2);
        assert_eq!(after.root_hash, before.root_hash);
        assert!(after.timestamp >= newest + 1000);
        log.shutdown().await;
    }
}
