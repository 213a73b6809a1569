//! `browser-client`: the client library a browser runs to audit SCTs
//! privately.
//!
//! Not yet implemented: this crate is a placeholder in the workspace until its
//! issue is taken up.
#![forbid(unsafe_code)]
