//! The auditor service: builds daily epochs of salted multi-Bloom filters
//! from the entry store that ct-ingest fills (`ct-store`; SimplePIR paper
//! §6–7) and answers hintless YPIR single-bit queries on them over HTTP
//! (YPIR Construction 3.1, §4.3 batching).
//!
//! The modules, bottom up (each uses only those above it):
//!
//! * [`error`], `metrics`, `conn`: the crate's error, its Prometheus
//!   metrics, the accept loop with its timeouts and connection cap.
//! * [`config`]: the configuration as plain data (every section, the shard
//!   map, object store URLs, database URL checks).
//! * `builddir`, [`layout`], [`epochdir`]: who owns a `.building-*`
//!   directory; how filters are grouped into databases and what the files
//!   are called; the directory of persisted epochs.
//! * [`memory`], `fill`, `batch`: the memory an epoch needs, checked
//!   before a build or load; hashing entries into filters; cross-client
//!   batching of queries per database on a rayon pool.
//! * [`epoch`]: snapshot → salts → filters → PIR databases → DBSetup →
//!   persisted artifacts; loading them back.
//! * [`plan`], [`objstore`], [`snapshot`]: epoch specs, the seeds and
//!   snapshot the shards of an epoch share; the prepared snapshot and spec
//!   in object storage, shards' ready reports, publication; the
//!   snapshot's format (an index and parts, each checked).
//! * `state`: the served epochs (current + previous during a grace
//!   period), atomic swap.
//! * `http`, [`reports`], `routes`: HTTP errors and bodies;
//!   misbehaviour reports (`POST /v1/reports`, its own router); the axum
//!   router (`/v1/manifest`, `/v1/epochs/{e}/dbs/{d}/query`, `/healthz`,
//!   `/metrics`), request limits.
//! * [`service`]: start-up, scheduled builds, reloads, graceful shutdown.
//!
//! With the `bench` feature, `bench` (the load and build benchmarks),
//! `soak` (the load run with junk, `auditor-server bench soak`) and
//! `rehearse` (the sharded pipeline as processes at scale, `auditor-server
//! bench rehearse`) sit on top.
//!
//! The wire contract lives in `audit-proto` and `docs/protocol.md`.

mod batch;
#[cfg(feature = "bench")]
pub mod bench;
mod builddir;
pub mod config;
mod conn;
pub mod epoch;
pub mod epochdir;
pub mod error;
mod fill;
mod http;
pub mod layout;
pub mod memory;
mod metrics;
pub mod objstore;
pub mod plan;
#[cfg(feature = "bench")]
pub mod rehearse;
pub mod reports;
mod routes;
pub mod service;
pub mod snapshot;
#[cfg(feature = "bench")]
pub mod soak;
mod state;

pub use config::Config;
pub use error::{Error, Result};
pub use routes::max_query_body;
