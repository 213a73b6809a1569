//! The log's state shared by the handle and the HTTP server: issuance,
//! sequencing, tree heads and tiles.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use ct_core::leaf::{encode_leaf_index_extension, PreCert, SignedEntry, TileLeaf};
use ct_core::sth::SignedCertificateTimestamp;
use ct_core::LeafHash;

use crate::ca;
use crate::config::{Misbehaviour, TestLogConfig};
use crate::error::Result;
use crate::signer::LogSigner;
use crate::state::{State, StoredEntry};

/// A certificate the log's CA issued and the log signed an SCT for.
#[derive(Clone, Debug)]
pub struct IssuedEntry {
    /// Position in the log; `None` for [`TestLog::issue_unlogged`](crate::TestLog::issue_unlogged).
    pub leaf_index: Option<u64>,
    /// The final certificate: with the embedded SCT list extension
    /// (1.3.6.1.4.1.11129.2.4.2) for precert-based entries, plain otherwise.
    pub cert_der: Vec<u8>,
    /// The issuing CA certificate.
    pub issuer_der: Vec<u8>,
    /// For precert-based entries: `PreCert.tbs_certificate`, the
    /// precertificate's TBS without the poison extension (equal to the
    /// final certificate's TBS without the SCT list extension).
    pub precert_tbs_der: Option<Vec<u8>>,
    /// The SCT (embedded in `cert_der` when `embedded`, delivered
    /// separately otherwise).
    pub sct: SignedCertificateTimestamp,
    /// Whether the SCT is embedded (precert-based entry).
    pub embedded: bool,
    /// RFC 6962 leaf hash of the `MerkleTreeLeaf` the SCT promises.
    pub leaf_hash: LeafHash,
    /// The SCT timestamp, milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
    /// `notAfter` of the certificate, Unix seconds.
    pub not_after: i64,
    /// For precert-based entries: the poisoned precertificate that was
    /// logged (the `TileLeaf.pre_certificate`).
    pub precert_der: Option<Vec<u8>>,
    /// The certificate's private key (PKCS #8 DER), so that a test can
    /// serve the certificate over TLS.
    pub key_pkcs8_der: Vec<u8>,
}

impl IssuedEntry {
    /// The `signed_entry` the SCT covers.
    pub fn signed_entry(&self) -> SignedEntry {
        match &self.precert_tbs_der {
            Some(tbs) => SignedEntry::Precert(PreCert {
                issuer_key_hash: ct_core::precert::issuer_key_hash(&self.issuer_der)
                    .unwrap_or_default(),
                tbs_certificate: tbs.clone(),
            }),
            None => SignedEntry::X509(self.cert_der.clone()),
        }
    }
}

/// State shared by the handle and the HTTP server.
pub(crate) struct Shared {
    pub(crate) cfg: TestLogConfig,
    pub(crate) origin: String,
    pub(crate) base_url: String,
    pub(crate) submission_url: String,
    pub(crate) signer: LogSigner,
    pub(crate) ca: ca::TestCa,
    /// `ASN.1Cert chain<0..2^24-1>` holding the CA: the RFC 6962
    /// `certificate_chain` / `precertificate_chain` of every entry.
    pub(crate) chain_encoding: Vec<u8>,
    pub(crate) state: RwLock<State>,
    /// Serialises issuance (sequencing) and remembers the last SCT time.
    pub(crate) issue_lock: Mutex<u64>,
    /// Requests since the misbehaviour was last set.
    pub(crate) requests: AtomicU64,
    pub(crate) started_s: i64,
}

impl Shared {
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Issues `count` entries (or one unlogged one), appends the logged
    /// ones and publishes a new head. Blocking (certificate signing).
    pub(crate) fn issue(
        &self,
        count: usize,
        precert_fraction: f64,
        logged: bool,
    ) -> Result<Vec<IssuedEntry>> {
        let mut last_ms = self.issue_lock.lock().unwrap_or_else(|e| e.into_inner());
        let base = self.read().real.size();
        let f = if precert_fraction.is_nan() {
            0.0
        } else {
            precert_fraction.clamp(0.0, 1.0)
        };
        let now_s = now_ms() / 1000;
        let not_after = i64::try_from(now_s)
            .unwrap_or(i64::MAX / 2)
            .saturating_add(self.cfg.cert_lifetime_days.saturating_mul(86_400));
        let mut issued = Vec::with_capacity(count);
        let mut stored = Vec::with_capacity(count);
        for i in 0..count {
            let precert = !logged || ((i as f64 + 1.0) * f).floor() > (i as f64 * f).floor();
            let index = base + i as u64;
            let ts = now_ms().max(*last_ms);
            *last_ms = ts;
            let (entry, leaf) = self.issue_one(index, ts, not_after, precert, logged)?;
            issued.push(entry);
            stored.push(leaf);
        }
        if logged && count > 0 {
            let mut st = self.write();
            for leaf in &stored {
                st.real.push(StoredEntry::new(leaf)?, leaf.leaf_hash());
            }
            st.publish(&self.signer, &self.origin, now_ms(), *last_ms)?;
        }
        Ok(issued)
    }

    /// Issues one certificate whose SCT promises `index`.
    pub(crate) fn issue_one(
        &self,
        index: u64,
        timestamp: u64,
        not_after: i64,
        precert: bool,
        logged: bool,
    ) -> Result<(IssuedEntry, TileLeaf)> {
        let name = if logged {
            format!("e{index}.{}", self.cert_domain())
        } else {
            format!("unlogged-{index}-{timestamp}.{}", self.cert_domain())
        };
        let now_s = i64::try_from(timestamp / 1000).unwrap_or(i64::MAX / 2);
        let issued = self.ca.issue(&name, now_s, not_after, precert)?;
        let key_pkcs8_der = issued.key_pkcs8_der();
        let extensions = encode_leaf_index_extension(index)?;
        let (entry, sct, cert_der, precert_der) = match issued.precert_der.clone() {
            Some(pre) => {
                let tbs = ct_core::precert::precert_tbs(&pre)?;
                let entry = SignedEntry::Precert(PreCert {
                    issuer_key_hash: self.ca.key_hash,
                    tbs_certificate: tbs,
                });
                let sct = self.signer.sign_sct(timestamp, &entry, extensions)?;
                let value = ct_core::precert::sct_list_extension_value(std::slice::from_ref(&sct))?;
                let cert = self.ca.finish(issued, Some(value))?;
                (entry, sct, cert, Some(pre))
            }
            None => {
                let cert = self.ca.finish(issued, None)?;
                let entry = SignedEntry::X509(cert.clone());
                let sct = self.signer.sign_sct(timestamp, &entry, extensions)?;
                (entry, sct, cert, None)
            }
        };
        let precert_tbs_der = match &entry {
            SignedEntry::Precert(p) => Some(p.tbs_certificate.clone()),
            SignedEntry::X509(_) => None,
        };
        let leaf = TileLeaf::new(
            sct.timestamped_entry(entry),
            precert_der.clone(),
            vec![self.ca.fingerprint],
        )?;
        let issued = IssuedEntry {
            leaf_index: logged.then_some(index),
            cert_der,
            issuer_der: self.ca.der().to_vec(),
            precert_tbs_der,
            embedded: precert_der.is_some(),
            leaf_hash: leaf.leaf_hash(),
            timestamp_ms: timestamp,
            not_after,
            precert_der,
            sct,
            key_pkcs8_der,
        };
        Ok((issued, leaf))
    }

    /// Signs a new head of the current tree at the current time.
    pub(crate) fn sign_head(&self) -> Result<()> {
        let newest_sct_ms = self.newest_sct_ms();
        self.write()
            .publish(&self.signer, &self.origin, now_ms(), newest_sct_ms)
    }

    /// The newest SCT timestamp issued so far (the log's start time before
    /// any).
    pub(crate) fn newest_sct_ms(&self) -> u64 {
        *self.issue_lock.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// DNS suffix of issued certificates.
    pub(crate) fn cert_domain(&self) -> &'static str {
        "testlog.example"
    }

    pub(crate) fn set_misbehaviour(&self, m: Misbehaviour) {
        let mut st = self.write();
        st.misbehaviour = m;
        self.requests.store(0, Ordering::SeqCst);
        if st
            .refresh_views(&self.signer, &self.origin, now_ms())
            .is_err()
        {
            // Cannot happen with well-formed stored entries; serve the real
            // view rather than a half-built one.
            st.wrong_head = None;
            st.fork = None;
        }
    }
}

/// Milliseconds since the Unix epoch.
pub(crate) use ct_core::civil::unix_now_ms as now_ms;

/// `YYYY-MM-DDTHH:MM:SSZ`.
pub(crate) fn rfc3339(unix_seconds: i64) -> String {
    ct_core::civil::format_rfc3339(unix_seconds)
}
