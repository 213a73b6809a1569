//! `ct-ingest`: pulls every configured Certificate Transparency log (RFC 6962
//! and static-ct-api), verifies what it downloads and keeps the set of active
//! log entries.
//!
//! The parsing and verification core (TLS encoding, leaves and tiles, Merkle
//! proofs, signatures, checkpoints, X.509 validity, precertificates, the log
//! list) lives in the [`ct_core`] crate, which does no I/O and is shared with
//! `browser-client`. Its modules are re-exported here at their old paths
//! (`ct_ingest::merkle`, `ct_ingest::sth`, ...) together with its top-level
//! items, and its errors are carried in this crate's [`Error`] as
//! [`Error::Ct`] (`?` wraps them). This crate adds the log clients, the
//! ingestion loop, the entry store and the local test log on top.
//!
//! # Modules
//!
//! | module | what | specifications |
//! |---|---|---|
//! | [`error`] | the crate's [`Error`] and [`Result`] (`ct_core::Error` in [`Error::Ct`], plus network, configuration and store failures) | |
//! | [`tls`] (`ct_core`) | TLS presentation-language [`tls::Reader`] / [`tls::Writer`] | RFC 5246 §4, RFC 8446 §3 |
//! | [`leaf`] (`ct_core`) | `MerkleTreeLeaf`, `TimestampedEntry`, `CtExtensions` / `leaf_index`, `TileLeaf`, data tiles (gzip) | RFC 6962 §3.1–§3.4, c2sp.org/static-ct-api |
//! | [`x509`] (`ct_core`) | `notBefore` / `notAfter` of certificates and precert TBSCertificates | RFC 5280 §4.1 |
//! | [`merkle`] (`ct_core`) | Merkle Tree Hash (batch and streaming), inclusion and consistency proofs, tile maths | RFC 6962 §2.1, RFC 9162 §2.1.3.2 and §2.1.4.2, c2sp.org/tlog-tiles |
//! | [`checkpoint`] (`ct_core`) | signed notes, checkpoints, static-ct-api `RFC6962NoteSignature` | c2sp.org/signed-note, c2sp.org/tlog-checkpoint, c2sp.org/static-ct-api |
//! | [`sth`] (`ct_core`) | [`LogKey`], `DigitallySigned`, `get-sth` JSON, tree head and SCT signatures | RFC 6962 §3.2, §3.5, §4.3 |
//! | [`loglist`] (`ct_core`) | Chrome log list v3 | gstatic.com/ct/log_list/v3 schema |
//! | [`config`] | TOML configuration, environment overrides, log selection from the log list | |
//! | [`http`] | HTTP client: per-log rate and concurrency limits, timeouts, capped bodies, retries with backoff | RFC 9110 §10.2.3 (`Retry-After`) |
//! | [`rfc6962`] | `get-sth`, `get-sth-consistency`, `get-entries` client | RFC 6962 §4 |
//! | [`static_ct`] | checkpoint, data and hash tile client; tile-based prefix proofs | c2sp.org/static-ct-api, c2sp.org/tlog-tiles |
//! | `bench` (feature `testlog`) | end-to-end ingestion benchmark against a local test log | |
//! | [`ingest`] | per-log ingestion: download, verify against the signed head, commit with the frontier | see `docs/ingest.md` |
//! | [`precert`] (`ct_core`) | precertificate TBS (poison removed), embedded SCT lists, rebuilding the logged entry of a final certificate | RFC 6962 §3.1–§3.3 |
//! | `testlog` (feature `testlog`, on by default) | a local RFC 6962 + static-ct-api log for tests and demos | RFC 6962 §3–§4, c2sp.org/static-ct-api |
//!
//! # Typical flow for a static-ct-api log
//!
//! 1. [`LogList::from_json`] gives each log's [`LogKey`] and URLs.
//! 2. [`verify_checkpoint`] authenticates `<monitoring>/checkpoint`.
//! 3. [`data_tiles_for_range`] says which `tile/data/...` to fetch;
//!    [`parse_data_tile_checked`] decodes each (gzip or not) into
//!    [`TileLeaf`]s with their leaf hashes and checked `leaf_index`.
//! 4. The leaf hashes go into a [`CompactRange`]; its root must equal the
//!    checkpoint's root hash (or use [`root_from_tiles`] with hash tiles).
//! 5. [`entry_validity`] gives each entry's `notAfter` for expiry.
//!
//! For RFC 6962 logs, [`SignedTreeHead::from_json`] and
//! [`SignedTreeHead::verify`] replace step 2, [`MerkleTreeLeaf::decode`]
//! parses `get-entries` leaves, and [`verify_consistency`] checks
//! `get-sth-consistency` proofs.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "testlog")]
pub mod bench;
pub mod config;
pub mod error;
pub mod http;
pub mod ingest;
pub mod metrics;
pub mod rfc6962;
pub mod signal;
pub mod static_ct;
#[cfg(feature = "testlog")]
pub mod testlog;

// ct-core's modules and its root re-exports (checkpoint, leaf, merkle, sth,
// x509 ...), so callers reach the parsing/verification core through this
// crate; the local `error` module and `Error`/`Result` below shadow
// ct-core's (a ct-core error arrives here as `Error::Ct`).
pub use ct_core::*;
pub use error::{Error, Result};
