//! `ct-testlog`: a local Certificate Transparency log (RFC 6962 +
//! static-ct-api) that issues real certificates and SCTs, for tests, demos
//! and benchmarks. Nothing in the production build depends on it: the
//! auditor's crates use it as a dev-dependency, `audit-demo` runs its
//! pipeline on it, and `ct-ingest bench` (cargo feature `bench`) measures
//! ingestion against it.
//!
//! [`TestLog::start`] runs a small but faithful CT log on `127.0.0.1` (an
//! ephemeral port): it has its own ECDSA P-256 key and a test CA, issues
//! real X.509 certificates and precertificates with `rcgen`, signs real SCTs
//! and tree heads, and serves the same tree through both read APIs at one
//! prefix, [`TestLog::base_url`]:
//!
//! | path | API | what |
//! |---|---|---|
//! | `ct/v1/get-sth` | RFC 6962 §4.3 | signed tree head |
//! | `ct/v1/get-sth-consistency?first=&second=` | §4.4 | consistency proof |
//! | `ct/v1/get-proof-by-hash?hash=&tree_size=` | §4.5 | audit path |
//! | `ct/v1/get-entries?start=&end=` | §4.6 | entries (inclusive `end`, capped by [`TestLogConfig::max_get_entries`]) |
//! | `ct/v1/get-roots` | §4.7 | the test CA |
//! | `ct/v1/get-entry-and-proof?leaf_index=&tree_size=` | §4.8 | entry with audit path |
//! | `checkpoint` | c2sp.org/static-ct-api | signed note, `RFC6962NoteSignature` |
//! | `tile/<L>/<N>[.p/<W>]` | c2sp.org/tlog-tiles | hash tiles, every level |
//! | `tile/data/<N>[.p/<W>]` | c2sp.org/static-ct-api | data tiles (`TileLeaf`s, gzip) |
//! | `issuer/<hex SHA-256>` | c2sp.org/static-ct-api | the test CA certificate |
//!
//! `add-chain` and `add-pre-chain` are not implemented (they answer 501):
//! entries are issued internally by [`TestLog::add_entries`], which plays
//! both the CA and the log. The log has a null merge delay: entries are
//! sequenced and the head, checkpoint and tiles re-signed before
//! `add_entries` returns, and every SCT carries the static-ct-api
//! `leaf_index` extension (so logged entries' `TimestampedEntry.extensions`
//! carry it too, in both APIs).
//!
//! Precertificate-based entries follow RFC 6962 §3.1–§3.3: a precertificate
//! with the critical poison extension is issued, the log signs the
//! `PreCert` (issuer key hash and the TBS without the poison), and the final
//! certificate carries the SCT list extension in the poison's place, so
//! [`ct_core::precert::precert_entry_from_final_cert`] rebuilds the logged
//! entry from the final certificate alone.
//!
//! # Misbehaviour
//!
//! [`TestLog::set_misbehaviour`] switches the log into one failure mode at a
//! time (see [`Misbehaviour`]); [`Misbehaviour::None`] switches back. Rate
//! limiting and garbage apply to every endpoint. Parameters are validated:
//! a missing, duplicated, non-decimal or out-of-range parameter is a 400
//! with a JSON body `{"error": "..."}`; an unknown path or a tile or entry
//! that does not exist (yet) is a 404. No request input can make the server
//! panic.
//!
//! # Origin and log list
//!
//! The checkpoint origin is [`TestLogConfig::origin`], or, if that is empty,
//! the listening address (`127.0.0.1:PORT`), which is what static-ct-api
//! prescribes for a log whose submission prefix is [`TestLog::base_url`].
//! [`TestLog::log_list_json`] lists the log twice, under `logs` (RFC 6962,
//! `url`) and `tiled_logs` (`submission_url` whose schema-less form is the
//! origin, `monitoring_url` = [`TestLog::base_url`]), so
//! [`ct_core::LogInfo::checkpoint_origin`] always gives the right origin.
//!
//! # Corpus
//!
//! [`issue_corpus`] issues logged entries, SCTs the log never logs
//! (omitted) and copies of TLS-delivered SCTs with a corrupted signature
//! (forged), and lists every certificate with its ground truth as a
//! [`CorpusRecord`]; [`corpus::write_jsonl`] writes them as the JSON lines
//! that `audit-sim simulate` reads. [`TestLog::publish_covering_head`]
//! then signs a head late enough (one MMD after the newest SCT) that an
//! ingester which verifies it counts every corpus SCT as due.
//!
//! # The `ct-testlog` binary
//!
//! `src/bin/ct-testlog.rs` runs a log until killed and writes its log list,
//! CA certificate and corpus to a directory (see `docs/ingest.md`).
#![warn(unreachable_pub)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod ca;
pub mod corpus;
pub mod error;
mod http;
mod signer;
mod state;
mod tree;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use ct_core::leaf::{encode_leaf_index_extension, PreCert, SignedEntry, TileLeaf};
use ct_core::merkle::Hash;
use ct_core::sth::{LogKey, SignedCertificateTimestamp, SignedTreeHead};
use ct_core::tls::Writer;

pub use corpus::{issue_corpus, Corpus, CorpusRecord, CorpusSpec, Truth};
pub use error::{Error, Result};
pub use signer::LogSigner;

use state::{Head, Ledger, State, StoredEntry};

/// Configuration of a [`TestLog`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestLogConfig {
    /// Checkpoint origin (and note key name), e.g. `"testlog.example/2025"`.
    /// Empty: the listening address, `127.0.0.1:PORT`.
    pub origin: String,
    /// Most entries one RFC 6962 `get-entries` answers (default 256).
    pub max_get_entries: usize,
    /// Maximum merge delay announced in the log list, seconds (default
    /// 86400). The log itself merges immediately.
    pub mmd_seconds: u64,
    /// Validity of issued certificates, days from now (default 90). Zero or
    /// negative values give certificates that have already expired (their
    /// `notBefore` is then a day before `notAfter`).
    pub cert_lifetime_days: i64,
}

impl Default for TestLogConfig {
    fn default() -> Self {
        TestLogConfig {
            origin: "testlog.example/2025".into(),
            max_get_entries: 256,
            mmd_seconds: 86_400,
            cert_lifetime_days: 90,
        }
    }
}

/// How the server is started (for [`TestLog::start_with`]).
#[derive(Clone, Debug)]
pub struct StartOptions {
    /// Address to listen on (default `127.0.0.1:0`, an ephemeral port).
    pub bind: SocketAddr,
    /// Seed of the log key: the same seed gives the same key and log ID
    /// (default: a random key).
    pub key_seed: Option<Vec<u8>>,
}

impl Default for StartOptions {
    fn default() -> Self {
        StartOptions {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            key_seed: None,
        }
    }
}

/// A failure mode of the log (see [`TestLog::set_misbehaviour`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Misbehaviour {
    /// Behave.
    #[default]
    None,
    /// Every `every_nth` request (counted from when this was set, over all
    /// endpoints) gets `429 Too Many Requests` with `Retry-After:
    /// retry_after_s`. `every_nth` 0 or 1 limits every request.
    RateLimit {
        /// Period of the refused requests.
        every_nth: u32,
        /// Seconds announced in `Retry-After`.
        retry_after_s: u32,
    },
    /// `get-entries` returns at most `max` entries (at least one), fewer
    /// than asked but otherwise valid, as RFC 6962 §4.6 allows.
    TruncateBatches {
        /// Most entries per response.
        max: usize,
    },
    /// The STH and checkpoint are validly signed but carry a root that does
    /// not match the entries (which, like the tiles and proofs, stay
    /// correct): recomputing the root from the entries detects it.
    WrongRoot,
    /// Serves a consistent-looking newer head (validly signed, later
    /// timestamp, two entries larger) over a forked tree in which every
    /// entry differs from the real one at its index (timestamps moved by
    /// 1 ms). Consistency proofs and audit paths come from the forked tree,
    /// so a consistency proof from any head served before fails; entries
    /// and tiles stay the real ones (plus the fork's two new entries, so
    /// the head's size is covered), so a client without history detects
    /// the fork by recomputing the root. Needs at least one logged entry
    /// (an empty log keeps serving its real head).
    ForkedTree,
    /// Data endpoints return garbage: HTML error pages, bad base64, JSON of
    /// the wrong shape, tiles of the wrong length. Every body fails to
    /// parse with ct-core's parsers.
    Garbage,
}

/// A certificate the log's CA issued and the log signed an SCT for.
#[derive(Clone, Debug)]
pub struct IssuedEntry {
    /// Position in the log; `None` for [`TestLog::issue_unlogged`].
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
    pub leaf_hash: [u8; 32],
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
    cfg: TestLogConfig,
    origin: String,
    base_url: String,
    submission_url: String,
    signer: LogSigner,
    ca: ca::TestCa,
    /// `ASN.1Cert chain<0..2^24-1>` holding the CA: the RFC 6962
    /// `certificate_chain` / `precertificate_chain` of every entry.
    chain_encoding: Vec<u8>,
    state: RwLock<State>,
    /// Serialises issuance (sequencing) and remembers the last SCT time.
    issue_lock: Mutex<u64>,
    /// Requests since the misbehaviour was last set.
    requests: AtomicU64,
    started_s: i64,
}

impl Shared {
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Issues `count` entries (or one unlogged one), appends the logged
    /// ones and publishes a new head. Blocking (certificate signing).
    fn issue(&self, count: usize, precert_fraction: f64, logged: bool) -> Result<Vec<IssuedEntry>> {
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
    fn issue_one(
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
    fn sign_head(&self) -> Result<()> {
        let newest_sct_ms = self.newest_sct_ms();
        self.write()
            .publish(&self.signer, &self.origin, now_ms(), newest_sct_ms)
    }

    /// The newest SCT timestamp issued so far (the log's start time before
    /// any).
    fn newest_sct_ms(&self) -> u64 {
        *self.issue_lock.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// DNS suffix of issued certificates.
    fn cert_domain(&self) -> &'static str {
        "testlog.example"
    }

    fn set_misbehaviour(&self, m: Misbehaviour) {
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
fn rfc3339(unix_seconds: i64) -> String {
    ct_core::civil::format_rfc3339(unix_seconds)
}

/// A running test log. Dropping it stops the server (without waiting);
/// [`TestLog::shutdown`] stops it and waits.
pub struct TestLog {
    shared: Arc<Shared>,
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for TestLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestLog")
            .field("base_url", &self.shared.base_url)
            .field("origin", &self.shared.origin)
            .finish_non_exhaustive()
    }
}

impl TestLog {
    /// Starts an empty log with a random key on `127.0.0.1:0`.
    pub async fn start(cfg: TestLogConfig) -> Result<TestLog> {
        Self::start_with(cfg, StartOptions::default()).await
    }

    /// Starts an empty log with explicit listening address and key seed.
    pub async fn start_with(cfg: TestLogConfig, opts: StartOptions) -> Result<TestLog> {
        if cfg.max_get_entries == 0 {
            return Err(ct_core::Error::InvalidArgument(
                "max_get_entries must be at least 1".into(),
            )
            .into());
        }
        let signer = match &opts.key_seed {
            Some(seed) => LogSigner::from_seed(seed)?,
            None => LogSigner::generate()?,
        };
        let listener = tokio::net::TcpListener::bind(opts.bind)
            .await
            .map_err(|source| Error::Listen {
                addr: opts.bind,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| Error::Listen {
            addr: opts.bind,
            source,
        })?;
        let base_url = format!("http://{addr}/");
        let (origin, submission_url) = if cfg.origin.is_empty() {
            (addr.to_string(), base_url.clone())
        } else {
            (cfg.origin.clone(), format!("https://{}/", cfg.origin))
        };
        let now = now_ms();
        let started_s = i64::try_from(now / 1000).unwrap_or(0);
        let ca = tokio::task::spawn_blocking(move || ca::TestCa::new(started_s))
            .await
            .map_err(|e| Error::Internal(format!("CA task failed: {e}")))??;
        let mut chain = Writer::new();
        chain.put_opaque24(ca.der(), "ASN.1Cert")?;
        let mut chain_encoding = Writer::new();
        chain_encoding.put_opaque24(chain.as_bytes(), "certificate_chain")?;
        let empty_root: Hash = ct_core::merkle::empty_root();
        let head = Head::sign(&signer, &origin, now, 0, empty_root)?;
        let state = State {
            real: Ledger::default(),
            head,
            misbehaviour: Misbehaviour::None,
            wrong_head: None,
            fork: None,
            last_head_ms: now,
        };
        let shared = Arc::new(Shared {
            cfg,
            origin,
            base_url,
            submission_url,
            signer,
            ca,
            chain_encoding: chain_encoding.into_bytes(),
            state: RwLock::new(state),
            issue_lock: Mutex::new(now),
            requests: AtomicU64::new(0),
            started_s,
        });
        let app = http::router(shared.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(TestLog {
            shared,
            addr,
            stop: Some(stop),
            server: Some(server),
        })
    }

    /// `http://127.0.0.1:PORT/`: the RFC 6962 API is under `ct/v1/`, the
    /// static-ct-api assets (`checkpoint`, `tile/...`, `issuer/...`) at the
    /// same prefix.
    pub fn base_url(&self) -> String {
        self.shared.base_url.clone()
    }

    /// The listening address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The checkpoint origin (and note key name).
    pub fn origin(&self) -> &str {
        &self.shared.origin
    }

    /// The configuration the log was started with.
    pub fn config(&self) -> &TestLogConfig {
        &self.shared.cfg
    }

    /// The log's public key.
    pub fn log_key(&self) -> LogKey {
        self.shared.signer.log_key().clone()
    }

    /// The log's public key as a DER SubjectPublicKeyInfo.
    pub fn log_key_spki_der(&self) -> Vec<u8> {
        self.shared.signer.log_key().spki_der().to_vec()
    }

    /// The log ID, `SHA-256` of the SubjectPublicKeyInfo.
    pub fn log_id(&self) -> [u8; 32] {
        self.shared.signer.log_id()
    }

    /// The test CA certificate (DER) that issues every entry.
    pub fn issuer_der(&self) -> Vec<u8> {
        self.shared.ca.der().to_vec()
    }

    /// `SHA-256` of the CA certificate: the static-ct-api chain fingerprint
    /// (served at `issuer/<hex>`).
    pub fn issuer_fingerprint(&self) -> [u8; 32] {
        self.shared.ca.fingerprint
    }

    /// Number of entries really logged (whatever the misbehaviour serves).
    pub fn tree_size(&self) -> u64 {
        self.shared.read().real.size()
    }

    /// The latest honest signed tree head.
    pub fn signed_tree_head(&self) -> SignedTreeHead {
        self.shared.read().head.sth.clone()
    }

    /// The latest honest checkpoint (signed note).
    pub fn checkpoint(&self) -> String {
        self.shared.read().head.checkpoint.clone()
    }

    /// Signs a new head (tree head and checkpoint) of the current tree at
    /// the current time, as a live log does at least once per MMD
    /// (RFC 6962 §3.5) even when nothing new was logged.
    pub async fn sign_head(&self) -> Result<()> {
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || shared.sign_head())
            .await
            .map_err(|e| Error::Internal(format!("signing task failed: {e}")))?
    }

    /// Waits until one MMD ([`TestLogConfig::mmd_seconds`]) has passed
    /// since the newest SCT the log issued, then signs a new head
    /// ([`TestLog::sign_head`]). That head's timestamp minus the MMD is at
    /// or past every SCT issued so far, so an ingester that verifies it
    /// records "ingested until" past all of them (and an auditor built from
    /// that store answers for them instead of deferring them). Waits the
    /// whole MMD: use a short one (the demo's is seconds).
    pub async fn publish_covering_head(&self) -> Result<()> {
        let due_ms = self
            .shared
            .newest_sct_ms()
            .saturating_add(self.shared.cfg.mmd_seconds.saturating_mul(1000));
        loop {
            let now = now_ms();
            if now >= due_ms {
                break;
            }
            tokio::time::sleep(Duration::from_millis(due_ms - now)).await;
        }
        self.sign_head().await
    }

    /// Issues `n` certificates and logs them: a fraction `precert_fraction`
    /// (clamped to 0..=1, spread evenly) as precertificate entries whose
    /// final certificates embed their SCT, the rest as x509 entries whose
    /// SCT is delivered separately. Returns once the entries are sequenced
    /// and the head, checkpoint and tiles published.
    pub async fn add_entries(&self, n: usize, precert_fraction: f64) -> Result<Vec<IssuedEntry>> {
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || shared.issue(n, precert_fraction, true))
            .await
            .map_err(|e| Error::Internal(format!("issuing task failed: {e}")))?
    }

    /// Issues a precertificate-based certificate with an embedded SCT that
    /// the log never incorporates (the SCT's `leaf_index` is the index it
    /// would have had, which the next logged entry takes).
    pub async fn issue_unlogged(&self) -> Result<IssuedEntry> {
        let shared = self.shared.clone();
        let mut v = tokio::task::spawn_blocking(move || shared.issue(1, 1.0, false))
            .await
            .map_err(|e| Error::Internal(format!("issuing task failed: {e}")))??;
        v.pop()
            .ok_or_else(|| Error::Internal("no entry issued".into()))
    }

    /// Switches the failure mode (and restarts the request count of
    /// [`Misbehaviour::RateLimit`]).
    pub fn set_misbehaviour(&self, m: Misbehaviour) {
        self.shared.set_misbehaviour(m);
    }

    /// The current failure mode.
    pub fn misbehaviour(&self) -> Misbehaviour {
        self.shared.read().misbehaviour.clone()
    }

    /// A Chrome log list v3 (`log_list.json` schema) with this log under
    /// `operators[0].logs[0]` (RFC 6962, `url`) and
    /// `operators[0].tiled_logs[0]` (static-ct-api), both `usable`.
    pub fn log_list_json(&self) -> String {
        let s = &self.shared;
        let key = BASE64.encode(s.signer.log_key().spki_der());
        let log_id = BASE64.encode(s.signer.log_id());
        let since = rfc3339(s.started_s - 86_400);
        let state = serde_json::json!({ "usable": { "timestamp": since } });
        serde_json::json!({
            "version": "1.0",
            "log_list_timestamp": rfc3339(s.started_s),
            "operators": [{
                "name": "ct-testlog operator",
                "email": ["testlog@testlog.example"],
                "logs": [{
                    "description": format!("ct-testlog {} (RFC 6962)", s.origin),
                    "log_id": log_id,
                    "key": key,
                    "url": s.base_url,
                    "mmd": s.cfg.mmd_seconds,
                    "state": state,
                }],
                "tiled_logs": [{
                    "description": format!("ct-testlog {} (static-ct-api)", s.origin),
                    "log_id": log_id,
                    "key": key,
                    "submission_url": s.submission_url,
                    "monitoring_url": s.base_url,
                    "mmd": s.cfg.mmd_seconds,
                    "state": state,
                }],
            }],
        })
        .to_string()
    }

    /// Stops the server and waits for it (at most five seconds).
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            let abort = server.abort_handle();
            if tokio::time::timeout(Duration::from_secs(5), server)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }
}

impl Drop for TestLog {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<TestLog>();
        check::<IssuedEntry>();
        check::<Misbehaviour>();
    }

    #[test]
    fn rfc3339_format() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(
            ct_core::loglist::parse_rfc3339(&rfc3339(1_234_567_890)).unwrap(),
            1_234_567_890
        );
    }
}
