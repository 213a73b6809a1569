//! `browser-client`: what a browser runs to audit SCTs privately, plus the
//! simulator and cost report an operator reads before deploying.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "native")]
pub mod audit;
#[cfg(feature = "native")]
pub mod cost;
pub mod error;
#[cfg(feature = "native")]
pub mod net;
pub mod policy;
pub mod probe;
pub mod sct;
#[cfg(feature = "native")]
pub mod sim;
#[cfg(feature = "wasm")]
pub mod wasm;

pub use error::{Error, Result};
