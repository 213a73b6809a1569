//! `browser-client`: what a browser runs to audit SCTs privately.
//!
//! The audit of one SCT (docs/protocol.md §7):
//!
//! 1. [`sct`]: rebuild the RFC 6962 leaf the log must have logged from the
//!    certificate and its SCT (precert_entry for embedded SCTs, x509_entry
//!    for TLS/OCSP ones) and verify the SCT signature with the log list's
//!    key — only SCTs that verify are audited.
//! 2. [`policy`]: decide whether to audit (1/1000 of connections, 2 SCTs
//!    each ≈ 20 a week), wait for the MMD and the epoch's coverage in a
//!    persistent [`policy::PendingQueue`], re-check a `NotFound` once in a
//!    later epoch, then produce a [`policy::MisbehaviourReport`].
//! 3. [`probe`]: draw a filter uniformly, compute its bit for the leaf with
//!    the epoch's salt (`audit-proto`), build the hintless YPIR query
//!    (`pir-core`) and decode the answer — transport-free, so the same code
//!    runs natively and as wasm32 (module `wasm`, feature `wasm`).
//! 4. [`net`] and [`audit`]: the native HTTP transport and the audit step
//!    `sct-audit check` runs; [`fallback`]: when a query's group fails, a
//!    fresh random database is drawn and asked instead (bounded, honouring
//!    `Retry-After`).
//! 5. [`verdict`]: what an answer means, for people — LOGGED with the
//!    epoch's fill ratio (the odds that a never-logged SCT passes one
//!    audit), NOT FOUND as certain for its epoch.
//! 6. [`canary`]: checking the auditor — probes for random leaves no log
//!    holds, whose LOGGED rate must match the fill ratio the manifest
//!    states (a binomial test flags all-ones, all-zeros or wrong-fill
//!    auditors).
//!
//! Binary (feature `native`): `sct-audit`. The operator's population
//! simulator and cost report are the `audit-sim` crate.

#[cfg(feature = "native")]
pub mod audit;
pub mod canary;
pub mod error;
pub mod fallback;
#[cfg(feature = "native")]
pub mod net;
pub mod policy;
pub mod probe;
pub mod sct;
pub mod verdict;
#[cfg(feature = "wasm")]
pub mod wasm;

pub use error::{Error, Result};
