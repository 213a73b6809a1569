//! The handle of a running test log: start, issue, misbehave, stop.

use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use ct_core::merkle::Hash;
use ct_core::sth::{LogKey, SignedTreeHead};
use ct_core::tls::Writer;
use ct_core::LogId;

use crate::ca;
use crate::config::{Misbehaviour, StartOptions, TestLogConfig};
use crate::error::{Error, Result};
use crate::http;
use crate::shared::{now_ms, rfc3339, IssuedEntry, Shared};
use crate::signer::LogSigner;
use crate::state::{Head, Ledger, State};

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
    pub fn log_id(&self) -> LogId {
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
