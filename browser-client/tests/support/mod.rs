//! Shared by the integration tests that need it.
#![allow(dead_code)]
pub(crate) mod fake_auditor;
