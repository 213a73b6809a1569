//! `ct-ingest`: pulls every configured Certificate Transparency log (RFC 6962
//! and static-ct-api), verifies what it downloads and keeps the set of active
//! log entries.
//!
//! Not yet implemented: this crate is a placeholder in the workspace until its
//! issue is taken up.
#![forbid(unsafe_code)]
