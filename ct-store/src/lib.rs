//! `ct-store`: the SQL store of verified CT log entries: the active entry
//! set S and the per-log ingestion state. `ct-ingest` fills it,
//! `auditor-server` reads it to build epochs.
//!
//! Two backends behind one [`Store`]:
//!
//! * **SQLite** (`sqlite://path?mode=rwc`): the embedded default, one file,
//!   WAL mode. Migrations in `ct-store/migrations/sqlite/`.
//! * **PostgreSQL** (`postgres://…`, normally from `DATABASE_URL`): for the
//!   production volume (billions of rows). The `entries` table is
//!   range-partitioned by certificate `notAfter` into calendar months, so
//!   expiry drops whole partitions. Migrations in
//!   `ct-store/migrations/postgres/`.
//!
//! Every operation is written once; what differs between the two (SQL
//! dialect, bulk insert, partitions) is the `dialect` module's `Dialect`
//! trait.
//!
//! Each log has two positions (certspotter's design): the *downloaded*
//! position is advisory (how far the fetcher got), the *verified* position is
//! authoritative: entries `[0, verified)` have been verified against a signed
//! tree head and are in S (unless they had already expired). Entries enter S
//! only through [`Store::commit`], in the same transaction that advances the
//! verified position, so a crash never leaves entries without the position
//! or the position without the entries. See `docs/storage.md`.
//!
//! Misbehaviour reports that the auditor verified live in the `reports`
//! table ([`Store::insert_report`], [`Store::reports`]); the logs' public
//! keys the auditor verifies them with in `logs.public_key`
//! ([`Store::set_log_key`], [`Store::log_key`]).
//!
//! [`Store::connect`] runs no DDL: it checks the schema version read-only
//! and refuses a schema that is missing, behind or ahead of this build.
//! Applying the migrations is the owner role's job
//! ([`Store::connect_and_migrate`], `ct-ingest migrate`); on PostgreSQL
//! every connection's `search_path` is [`PG_SCHEMA`] alone.
//!
//! Database URLs are checked without connecting by [`DatabaseUrl::parse`]
//! and shown without their password by [`redact_url`] (and
//! `DatabaseUrl`'s `Display`); no [`StoreError`] message contains a
//! password.
//!
//! # Feature `fault-injection`
//!
//! Off by default; crash tests turn it on (as a dev-dependency feature).
//! It adds `FaultPlan`, `Commit::fault` and `StoreError::InjectedFault`:
//! a commit that does all its work and then drops its transaction, or
//! commits and then fails, as a crash just before or just after `COMMIT`
//! would.
//!
//! # Feature `testing`
//!
//! Off by default; tests turn it on. It adds the module `testing`: a fresh SQLite
//! database per test case, and a fresh PostgreSQL database when
//! `TEST_DATABASE_URL` is set.

mod commit;
mod convert;
mod dialect;
mod error;
mod model;
mod month;
mod reports;
mod schema;
mod store;
mod url;

#[cfg(feature = "testing")]
pub mod testing;

pub use commit::Commit;
pub use error::StoreError;
#[cfg(any(test, feature = "fault-injection"))]
pub use model::FaultPlan;
pub use model::{CommitOutcome, Coverage, Entry, LogKind, LogMeta, LogState};
pub use reports::{NewReport, ReportStatus, StoredReport, MAX_PUBLIC_KEY_BYTES};
pub use schema::PG_SCHEMA;
pub use store::Store;
pub use url::{redact_secrets, redact_url, DatabaseUrl};

/// The embedded SQLite file used when no database URL is configured
/// (`ct-ingest` and `auditor-server` default to the same store).
pub const DEFAULT_DATABASE_URL: &str = "sqlite://ct-ingest.db?mode=rwc";
