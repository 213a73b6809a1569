//! pir-core (in progress)
#![deny(unsafe_op_in_unsafe_fn)]
pub mod arith;
pub mod ntt;
