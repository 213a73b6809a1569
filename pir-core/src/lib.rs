//! pir-core (in progress)
#![deny(unsafe_op_in_unsafe_fn)]
pub mod arith;
pub mod client;
pub mod db;
pub mod error;
pub mod kernel;
pub mod ntt;
pub mod packing;
pub mod params;
pub mod rns;
pub mod sampler;
pub mod server;
pub mod wire;
pub use error::{Error, Result};
