//! What a test log is started with: its configuration, start options,
//! and the failure modes it can be switched to.

use std::net::SocketAddr;

/// Configuration of a [`TestLog`](crate::TestLog).
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

/// How the server is started (for [`TestLog::start_with`](crate::TestLog::start_with)).
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

/// A failure mode of the log (see [`TestLog::set_misbehaviour`](crate::TestLog::set_misbehaviour)).
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
