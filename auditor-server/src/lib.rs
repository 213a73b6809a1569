//! The auditor service: builds daily epochs of salted multi-Bloom filters
//! from the entry store that ct-ingest fills (`ct-store`; SimplePIR paper
//! §6–7) and answers hintless YPIR single-bit queries on them over HTTP
//! (YPIR Construction 3.1, §4.3 batching).
//!
//! * [`builddir`]: which process owns a `.building-*` directory;
//!   removing those of builders that died.
//! * [`epoch`]: snapshot → salts → filters → PIR databases → DBSetup →
//!   persisted artifacts; loading them back.
//! * [`state`]: the served epochs (current + previous during a grace
//!   period), atomic swap.
//! * [`batch`]: cross-client batching of queries per database on a rayon
//!   pool, off the async runtime.
//! * [`routes`]: the axum router (`/v1/manifest`, `/v1/epochs/{e}/dbs/{d}/query`,
//!   `/healthz`, `/metrics`), JSON errors, request limits.
//! * [`reports`]: misbehaviour reports (`POST /v1/reports`): limits,
//!   verification against the store and the epochs, storage, listing.
//! * [`conn`]: the accept loop, header and idle timeouts, the connection
//!   cap.
//! * [`memory`]: what an epoch's databases need, checked against the
//!   memory available before a build or load.
//! * [`plan`]: epoch specs, the seeds and snapshot the shards of an
//!   epoch share (`auditor-server epoch plan`).
//! * [`objstore`]: epochs across machines: the prepared snapshot and spec
//!   in object storage, shards' ready reports, publication.
//! * [`shard`]: which databases of an epoch this server holds ("shard i
//!   of n").
//! * [`service`]: start-up, scheduled builds, reloads, graceful shutdown.
//! * [`bench`](mod@bench): the load and build benchmarks.
//! * [`soak`]: the load run with junk (`bench soak`).
//!
//! The wire contract lives in `audit-proto` and `docs/protocol.md`.
#![warn(unreachable_pub)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod batch;
pub mod bench;
pub mod builddir;
pub mod config;
pub mod conn;
pub mod epoch;
pub mod error;
mod fill;
pub mod memory;
pub mod metrics;
pub mod objstore;
pub mod plan;
pub mod reports;
pub mod routes;
pub mod service;
pub mod shard;
pub mod soak;
pub mod state;

pub use config::Config;
pub use error::{Error, Result};
