//! `auditor-server`: the axum service that answers hintless YPIR queries over
//! the epoch's Bloom filters.
//!
//! Not yet implemented: this crate is a placeholder in the workspace until its
//! issue is taken up.
#![forbid(unsafe_code)]
