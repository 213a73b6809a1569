//! The auditor service: builds daily epochs of salted multi-Bloom filters
//! from the entry store that ct-ingest fills (`ct-store`; SimplePIR paper
//! §6–7) and answers hintless YPIR single-bit queries on them over HTTP
//! (YPIR Construction 3.1, §4.3 batching).
//!
//! * [`epoch`]: snapshot → salts → filters → PIR databases → DBSetup →
//!   persisted artifacts; loading them back.
//! * [`state`]: the served epochs (current + previous during a grace
//!   period), atomic swap.
//! * [`batch`]: cross-client batching of queries per database on a rayon
//!   pool, off the async runtime.
//! * [`routes`]: the axum router (`/v1/manifest`, `/v1/epochs/{e}/dbs/{d}/query`,
//!   `/healthz`, `/metrics`), JSON errors, request limits.
//! * [`conn`]: the accept loop, header and idle timeouts, the connection
//!   cap.
//! * [`memory`]: what an epoch's databases need, checked against the
//!   memory available before a build or load.
//! * [`plan`]: epoch specs, the seeds and snapshot the shards of an
//!   epoch share (`auditor-server epoch plan`).
//! * [`shard`]: which databases of an epoch this server holds ("shard i
//!   of n").
//! * [`service`]: start-up, scheduled builds, reloads, graceful shutdown.
//! * [`bench`](mod@bench): the load and build benchmarks.
//!
//! The wire contract lives in `audit-proto` and `docs/protocol.md`.
#![warn(unreachable_pub)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod batch;
pub mod bench;
pub mod config;
pub mod conn;
pub mod epoch;
pub mod error;
mod fill;
pub mod memory;
pub mod metrics;
pub mod plan;
pub mod routes;
pub mod service;
pub mod shard;
pub mod state;

pub use config::Config;
pub use error::{Error, Result};
