//! The contract between the auditor server and its clients, shared by
//! `auditor-server` and `browser-client` (which must not depend on each
//! other or on `ct-ingest`).
//!
//! * [`filter`]: the salted multi-Bloom filter of the SimplePIR paper §6
//!   (a one-hash-function Bloom filters of k·N bits, Prop. 6.2) and the
//!   exact bit-index derivation every client must reproduce.
//! * [`manifest`]: the epoch manifest served at `GET /v1/manifest`, parsed
//!   into a checked form ("parse, don't validate"): salts and seeds are
//!   decoded, the database layout is proven to cover every filter once.
//! * [`shard`]: which base URL serves which database of a sharded epoch.
//! * [`report`]: the misbehaviour report a client sends to
//!   `POST /v1/reports`, parsed strictly.
//! * [`api`]: the JSON error body of every 4xx/5xx answer, header names and
//!   size limits of the HTTP API (`docs/protocol.md`).
//!
//! Nothing here is secret; the client's secrets live in `pir-core`.

pub mod api;
pub mod error;
pub mod filter;
pub mod hex;
pub mod manifest;
pub mod report;
pub mod shard;

/// The identifiers of the contract, ct-core's: every crate uses these.
pub use ct_core::{LeafHash, LogId};
pub use error::{Error, Result};
pub use filter::{bit_index, FilterSpec, HashVersion, Salt};
pub use manifest::{DbSpec, FillRatio, LogCoverage, Manifest, PirSpec, Probe};
pub use shard::{ShardMap, ShardRule};
