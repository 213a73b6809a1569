//! Shared by the integration tests that need it.
#![allow(dead_code)]
pub mod fake_auditor;
