//! `ct-ingest`: pulls every configured Certificate Transparency log (RFC 6962
//! and static-ct-api), verifies what it downloads against the log's signed
//! tree head, and commits the verified entries to the entry store.
//!
//! The parsing and verification it relies on (TLS encoding, leaves and
//! tiles, Merkle proofs, signatures, checkpoints, X.509 validity,
//! precertificates, the log list) is the [`ct_core`] crate, which does no
//! I/O; ct-core's errors are carried in this crate's [`Error`] as
//! [`Error::Ct`] (`?` wraps them). The store (SQLite or PostgreSQL, the
//! verified position and frontier of each log) is the [`ct_store`] crate.
//! This crate adds the log clients, the ingestion loop and its
//! configuration on top, and the local test log.
//!
//! # Modules
//!
//! | module | what | specifications |
//! |---|---|---|
//! | [`error`] | the crate's [`Error`] and [`Result`] (`ct_core::Error` in [`Error::Ct`], plus network, configuration and store failures); [`error::chain`] for logging an error with its causes | |
//! | [`config`] | TOML configuration, environment overrides, log selection from the log list | |
//! | [`http`] | HTTP client: per-log rate and concurrency limits, timeouts, capped bodies, retries with backoff | RFC 9110 §10.2.3 (`Retry-After`) |
//! | [`entry`] | an entry's `notAfter` (its expiry), with a fallback for unparsable certificates | RFC 5280 §4.1.2.5 |
//! | [`rfc6962`] | `get-sth`, `get-sth-consistency`, `get-entries` client | RFC 6962 §4 |
//! | [`static_ct`] | checkpoint, data and hash tile client; tile-based prefix proofs | c2sp.org/static-ct-api, c2sp.org/tlog-tiles |
//! | [`ingest`] | per-log ingestion: download, verify against the signed head, commit with the frontier | see `docs/ingest.md` |
//! | [`reports`] | confirming the auditor's misbehaviour reports with the logs (`get-proof-by-hash`, or the stored verified prefix) | RFC 6962 §4.5 |
//! | [`metrics`] | run counters and per-log gauges in the Prometheus text format | |
//! | `bench` (feature `bench`, off by default) | end-to-end ingestion benchmark against a local test log (`ct-testlog`) | |

#[cfg(feature = "bench")]
pub mod bench;
pub mod config;
pub mod entry;
pub mod error;
pub mod http;
pub mod ingest;
pub mod metrics;
pub mod reports;
pub mod rfc6962;
pub mod static_ct;

pub use error::{Error, Result};
