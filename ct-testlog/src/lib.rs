//! `ct-testlog`: a local Certificate Transparency log (RFC 6962 +
//! static-ct-api) that issues real certificates and SCTs, for tests, demos
//! and benchmarks. Nothing in the production build depends on it: the
//! auditor's crates use it as a dev-dependency, `audit-demo` runs its
//! pipeline on it, and `ct-ingest bench` (cargo feature `bench`) measures
//! ingestion against it.
//!
//! [`TestLog::start`] runs a small but faithful CT log on `127.0.0.1` (an
//! ephemeral port): it has its own ECDSA P-256 key and a test CA, issues
//! real X.509 certificates and precertificates with `rcgen`, signs real SCTs
//! and tree heads, and serves the same tree through both read APIs at one
//! prefix, [`TestLog::base_url`]:
//!
//! | path | API | what |
//! |---|---|---|
//! | `ct/v1/get-sth` | RFC 6962 §4.3 | signed tree head |
//! | `ct/v1/get-sth-consistency?first=&second=` | §4.4 | consistency proof |
//! | `ct/v1/get-proof-by-hash?hash=&tree_size=` | §4.5 | audit path |
//! | `ct/v1/get-entries?start=&end=` | §4.6 | entries (inclusive `end`, capped by [`TestLogConfig::max_get_entries`]) |
//! | `ct/v1/get-roots` | §4.7 | the test CA |
//! | `ct/v1/get-entry-and-proof?leaf_index=&tree_size=` | §4.8 | entry with audit path |
//! | `checkpoint` | c2sp.org/static-ct-api | signed note, `RFC6962NoteSignature` |
//! | `tile/<L>/<N>[.p/<W>]` | c2sp.org/tlog-tiles | hash tiles, every level |
//! | `tile/data/<N>[.p/<W>]` | c2sp.org/static-ct-api | data tiles (`TileLeaf`s, gzip) |
//! | `issuer/<hex SHA-256>` | c2sp.org/static-ct-api | the test CA certificate |
//!
//! `add-chain` and `add-pre-chain` are not implemented (they answer 501):
//! entries are issued internally by [`TestLog::add_entries`], which plays
//! both the CA and the log. The log has a null merge delay: entries are
//! sequenced and the head, checkpoint and tiles re-signed before
//! `add_entries` returns, and every SCT carries the static-ct-api
//! `leaf_index` extension (so logged entries' `TimestampedEntry.extensions`
//! carry it too, in both APIs).
//!
//! Precertificate-based entries follow RFC 6962 §3.1–§3.3: a precertificate
//! with the critical poison extension is issued, the log signs the
//! `PreCert` (issuer key hash and the TBS without the poison), and the final
//! certificate carries the SCT list extension in the poison's place, so
//! [`ct_core::precert::precert_entry_from_final_cert`] rebuilds the logged
//! entry from the final certificate alone.
//!
//! # Misbehaviour
//!
//! [`TestLog::set_misbehaviour`] switches the log into one failure mode at a
//! time (see [`Misbehaviour`]); [`Misbehaviour::None`] switches back. Rate
//! limiting and garbage apply to every endpoint. Parameters are validated:
//! a missing, duplicated, non-decimal or out-of-range parameter is a 400
//! with a JSON body `{"error": "..."}`; an unknown path or a tile or entry
//! that does not exist (yet) is a 404. No request input can make the server
//! panic.
//!
//! # Origin and log list
//!
//! The checkpoint origin is [`TestLogConfig::origin`], or, if that is empty,
//! the listening address (`127.0.0.1:PORT`), which is what static-ct-api
//! prescribes for a log whose submission prefix is [`TestLog::base_url`].
//! [`TestLog::log_list_json`] lists the log twice, under `logs` (RFC 6962,
//! `url`) and `tiled_logs` (`submission_url` whose schema-less form is the
//! origin, `monitoring_url` = [`TestLog::base_url`]), so
//! [`ct_core::LogInfo::checkpoint_origin`] always gives the right origin.
//!
//! # Corpus
//!
//! [`issue_corpus`] issues logged entries, SCTs the log never logs
//! (omitted) and copies of TLS-delivered SCTs with a corrupted signature
//! (forged), and lists every certificate with its ground truth as a
//! [`CorpusRecord`]; [`corpus::write_jsonl`] writes them as the JSON lines
//! that `audit-sim simulate` reads. [`TestLog::publish_covering_head`]
//! then signs a head late enough (one MMD after the newest SCT) that an
//! ingester which verifies it counts every corpus SCT as due.
//!
//! # The `ct-testlog` binary
//!
//! `src/bin/ct-testlog.rs` runs a log until killed and writes its log list,
//! CA certificate and corpus to a directory (see `docs/ingest.md`).

mod ca;
mod config;
pub mod corpus;
pub mod error;
mod http;
mod log;
mod shared;
mod signer;
mod state;
mod tree;

pub use config::{Misbehaviour, StartOptions, TestLogConfig};
pub use corpus::{issue_corpus, Corpus, CorpusRecord, CorpusSpec, Truth};
pub use error::{Error, Result};
pub use log::TestLog;
pub use shared::IssuedEntry;
pub use signer::LogSigner;
