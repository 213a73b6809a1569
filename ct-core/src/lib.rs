//! `ct-core`: the Certificate Transparency data structures and their
//! verification, with no I/O.
//!
//! This crate is the parsing and verification core shared by `ct-ingest`
//! (which downloads and stores logs) and `browser-client` (which rebuilds an
//! RFC 6962 leaf hash from a certificate and its SCT, and verifies the SCT,
//! before asking the auditor whether the log holds that leaf). It covers
//! RFC 6962 and RFC 9162 structures and Merkle proofs, the static-ct-api
//! (tiles, checkpoints), SCT and tree-head signatures, and Chrome's log list
//! v3. It does no I/O and starts no threads, and builds for
//! `wasm32-unknown-unknown`: every function takes bytes (as served by a log
//! or found in a certificate) and returns typed values or an [`Error`]. All
//! input is treated as hostile: parsers never panic, every length is capped,
//! and trailing bytes are rejected.
//!
//! # Modules
//!
//! | module | what | specifications |
//! |---|---|---|
//! | [`error`] | the crate's [`Error`] and [`Result`] | |
//! | [`ids`] | [`LeafHash`] and [`LogId`], the identifiers every crate uses, with their text forms | RFC 6962 §2.1, §3.2 |
//! | [`hex`] | lower-case hex | |
//! | [`splitmix`] | SplitMix64, the workspace's non-cryptographic randomness (jitter, load, tests) | Steele, Lea, Flood 2014 |
//! | [`tls`] | TLS presentation-language [`tls::Reader`] / [`tls::Writer`] | RFC 5246 §4, RFC 8446 §3 |
//! | [`leaf`] | `MerkleTreeLeaf`, `TimestampedEntry`, `CtExtensions` / `leaf_index`, `TileLeaf`, data tiles (gzip) | RFC 6962 §3.1–§3.4, c2sp.org/static-ct-api |
//! | [`x509`] | `notBefore` / `notAfter` of certificates and precert TBSCertificates | RFC 5280 §4.1 |
//! | [`merkle`] | Merkle Tree Hash (batch and streaming), inclusion and consistency proofs, tile maths | RFC 6962 §2.1, RFC 9162 §2.1.3.2 and §2.1.4.2, c2sp.org/tlog-tiles |
//! | [`checkpoint`] | signed notes, checkpoints, static-ct-api `RFC6962NoteSignature` | c2sp.org/signed-note, c2sp.org/tlog-checkpoint, c2sp.org/static-ct-api |
//! | [`sth`] | [`LogKey`], `DigitallySigned`, `get-sth` JSON, tree head and SCT signatures | RFC 6962 §3.2, §3.5, §4.3 |
//! | [`precert`] | precertificate TBS (poison removed), embedded SCT lists, rebuilding the logged entry of a final certificate | RFC 6962 §3.1–§3.3 |
//! | [`loglist`] | Chrome log list v3 | gstatic.com/ct/log_list/v3 schema |
//! | [`civil`] | calendar arithmetic on Unix time (civil dates, RFC 3339 formatting), the wall clock, and the daily or interval schedule of the ingest and build loops | proleptic Gregorian calendar |
//!
//! # Checking an SCT embedded in a certificate
//!
//! 1. [`LogList::from_json`] gives each log's [`LogKey`] (its log ID is
//!    [`LogKey::log_id`]).
//! 2. [`precert::embedded_scts`] extracts the SCTs of a final certificate;
//!    [`precert::precert_entry_from_final_cert`] rebuilds the
//!    [`SignedEntry`] the log signed (issuer key hash and TBSCertificate
//!    without the SCT list).
//! 3. [`SignedCertificateTimestamp::verify`] checks each SCT against its
//!    log's key; [`SignedCertificateTimestamp::timestamped_entry`] gives the
//!    [`TimestampedEntry`] the log must have logged, and the
//!    [`MerkleTreeLeaf`] wrapping it gives the RFC 6962 leaf hash
//!    ([`MerkleTreeLeaf::leaf_hash`]) to look up.
//!
//! # Verifying a static-ct-api log
//!
//! 1. [`verify_checkpoint`] authenticates `<monitoring>/checkpoint`.
//! 2. [`data_tiles_for_range`] says which `tile/data/...` to fetch;
//!    [`parse_data_tile_checked`] decodes each (gzip or not) into
//!    [`TileLeaf`]s with their leaf hashes and checked `leaf_index`.
//! 3. The leaf hashes go into a [`CompactRange`]; its root must equal the
//!    checkpoint's root hash (or use [`root_from_tiles`] with hash tiles).
//! 4. [`entry_validity`] gives each entry's `notAfter` for expiry.
//!
//! For RFC 6962 logs, [`SignedTreeHead::from_json`] and
//! [`SignedTreeHead::verify`] replace step 1, [`MerkleTreeLeaf::decode`]
//! parses `get-entries` leaves, and [`verify_consistency`] checks
//! `get-sth-consistency` proofs.

pub mod checkpoint;
pub mod civil;
pub mod error;
pub mod hex;
pub mod ids;
pub mod leaf;
pub mod loglist;
pub mod merkle;
pub mod precert;
pub mod splitmix;
pub mod sth;
pub mod tls;
pub mod x509;

pub use checkpoint::{
    rfc6962_key_id, verify_checkpoint, Checkpoint, NoteSignature, Rfc6962NoteSignature, SignedNote,
    VerifiedCheckpoint,
};
pub use error::{Error, Result};
pub use ids::{LeafHash, LogId};
pub use leaf::{
    decompress_if_gzip, encode_leaf_index_extension, leaf_index_from_extensions,
    parse_ct_extensions, parse_data_tile, parse_data_tile_checked, CtExtension, DataTile,
    DataTileIter, LogEntryType, MerkleTreeLeaf, PreCert, SignedEntry, TileLeaf, TimestampedEntry,
};
pub use loglist::{LogApi, LogInfo, LogList, LogState, LogStateKind, Operator, TemporalInterval};
pub use merkle::{
    data_tiles_for_range, empty_root, leaf_hash, node_hash, parse_hash_tile, parse_tile_path,
    root_from_leaf_hashes, root_from_tiles, tiles_for_size, verify_consistency, verify_inclusion,
    CompactRange, Hash, TileId, TilePath,
};
pub use sth::{
    sct_signature_input, tree_head_signature_input, verify_sct_signature, DigitallySigned, KeyType,
    LogKey, SignedCertificateTimestamp, SignedTreeHead,
};
pub use x509::{
    cert_not_after, cert_validity, entry_validity, tbs_not_after, tbs_validity, Validity,
};
