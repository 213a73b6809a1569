//! # pir-core: YPIR, hintless single-server PIR
//!
//! This crate implements YPIR (Menon–Wu, "YPIR: High-Throughput Single-Server
//! PIR with Silent Preprocessing", Construction 3.1 with §4.1, §4.2, §4.3,
//! App. B and App. C) as a library whose client half and server half talk
//! only through bytes:
//!
//! ```
//! use pir_core::{client::Client, db::BitDatabase, params::TABLE1, sampler::PublicSeed, server::Server};
//! # fn main() -> pir_core::Result<()> {
//! let mut bits = BitDatabase::zeros(1 << 20);
//! bits.set(12345, true)?;
//! let shape = bits.database().shape();
//! let seed = PublicSeed::random()?;                  // fresh per database version
//! let server = Server::setup(TABLE1, bits.into_database(), seed)?;   // DBSetup
//! let client = Client::new(TABLE1, shape, seed)?;    // knows only (params, shape, seed)
//! let (query, key, bit) = client.query_bit(1 << 20, 12345)?;          // Query
//! let response = server.answer_bytes(&query.to_bytes())?;             // Answer
//! let r = pir_core::wire::Response::from_bytes(&response)?;
//! assert!(client.extract_bit(&key, &r, bit)?);                        // Extract
//! # Ok(()) }
//! ```
//!
//! ## Where things live
//! | module | contents |
//! |---|---|
//! | [`arith`] | the CRT primes of q2, Barrett/Shoup reduction, rounding ⌊·⌉_{q,q'}, gadget g_z^{-1} |
//! | [`ntt`] | negacyclic NTT (bit-reversed slots), automorphisms as slot permutations |
//! | [`rns`] | polynomials over R_{d,q2} as residue pairs; per-parameter-set tables |
//! | [`params`] | Table 1 and test sets, database shapes, the correctness bound δ (Thm 3.4) |
//! | [`sampler`] | discrete Gaussian (constant-time CDT), OS-keyed secret stream, seed expansion |
//! | [`db`] | record databases (1 byte per record, column-major) and bit databases |
//! | [`digits`] | storage layout of the DoublePIR matrices (hint rows, T rows): column blocks × row quads × 32-column chunks, one sequential stream per pass |
//! | `kernel` (crate-private) | the SIMD inner loops, each with a scalar twin and chosen at run time: SimplePIR/DoublePIR passes, NTT, key switching and gadget digits of packing, residue products of the hint and H2, update and chunk-packing kernels; reached through [`server`] and [`ntt`] (which also name the selected kernel, the measured SimplePIR prefetch distance and the measured multiply ceiling of the SimplePIR kernel) |
//! | [`mem`] | huge-page advice for the buffers the passes stream, zeroed buffers advised before first touch, prefetch hints, peak resident memory and thread CPU time (for benchmarks) |
//! | [`packing`] | CDKS LWE-to-RLWE packing with the §4.2 precomputation |
//! | [`server`] | DBSetup (NTT hint, App. B), hint files for restarts, updates, Answer, batched answers (§4.3), the memory model; one submodule per job |
//! | [`client`] | Query and Extract |
//! | [`wire`] | versioned byte format of queries and responses (`docs/wire-format.md`) |
//! | `bench` (feature `bench`) | the timing loops `pir-bench` and audit-sim's cost report share: a random bit database set up and timed, timed and checked answers and batches, batch curves paired with single queries |
//!
//! ## Notation
//! One code name per paper symbol:
//!
//! | paper | code | Table 1 |
//! |---|---|---|
//! | d1 | [`params::Params::d1`] | 2^10 |
//! | d2 | [`params::Params::d2`] | 2^11 |
//! | q1 | [`params::LOG_Q1`] (q1 = 2^32, native `u32`) | 2^32 |
//! | q2 | [`arith::Q2`] = [`arith::P0`]·[`arith::P1`] | ≈ 2^55.9 |
//! | q̃1 | [`params::Params::q1_tilde_bits`] (log2) | 2^28 |
//! | q̃2,1 | [`params::Params::q2_1_tilde_bits`] (log2) | 2^28 |
//! | q̃2,2 | [`params::Params::q2_2_tilde_bits`] (log2) | 2^20 |
//! | N | [`params::Params::record_modulus`] (`record_bits` = log2 N) | 2^8 |
//! | p | [`params::Params::p`] (`p_bits` = log2 p) | 2^15 |
//! | z | [`params::Params::z`] (`z_bits` = log2 z) | 2^19 |
//! | t = ⌊log_z q2⌋ + 1 | [`params::Params::gadget_len`] | 3 |
//! | κ | [`params::Params::kappa`] | 2 |
//! | s1, s2 (χ1, χ2 widths) | [`params::Params::s1`], [`params::Params::s2`] | 11√(2π), 6.4√(2π) |
//! | ℓ1, ℓ2 | [`params::DbShape::ell1`], [`params::DbShape::ell2`] | ≤ 2^18 |
//! | m1, m2 | [`params::Params::m1`], [`params::Params::m2`] | ⌈ℓ/d⌉ |
//! | Δ1, Δ2 | [`params::Params::delta1`], [`params::Params::delta2`] | ⌊q1/N⌋, ⌊q2/p⌋ |
//! | δ (correctness error) | [`params::Correctness::log2_delta`] | ≤ 2^-40 |
//! | a1, a2 | [`sampler::PublicSeed::expand_a1`], [`sampler::PublicSeed::expand_a2`] | |
//! | s1, s2 (secrets), qk | [`client::QueryKey`] | |
//! | c1, c2, pk | [`wire::Query::c1`], [`wire::Query::c2`], [`wire::Query::pk_b`] | |
//! | H1 (as dense chunks), H2 | `server::Server::hint`, packing leaves | |
//!
//! ## Deviations from the paper, all deliberate
//! * **One response ciphertext** (ρ = 1): the d1 hint values of log q̃1 bits
//!   are bit-packed into ⌈d1·log q̃1/log p⌉ = 1912 p-bit plaintext rows instead
//!   of κ·d1 = 2048 base-p digits, so with the κ = 2 rows of T they fit in the
//!   d2 = 2048 slots of one RLWE ciphertext (see [`server`]). Only the 1914
//!   used coefficients of c1 are sent: 11 967 bytes per response.
//! * **The correctness bound** follows the proof of Theorem 3.4 with exact
//!   second moments for uniform digits and roundings; the printed theorem
//!   does not certify Table 1 (see [`params`]). A test measures the real noise
//!   against the model (they agree within a few percent).
//!
//! `unsafe` is confined to `kernel` and [`mem`], and every `unsafe` block
//! states why it is sound (`clippy::undocumented_unsafe_blocks`);
//! everything else is safe Rust and runs on wasm32 (`cargo build -p
//! pir-core --target wasm32-unknown-unknown --no-default-features`). The
//! modules depend on each other without cycles (`tests/module_graph.rs`
//! checks it): `mem`, `arith` and `error` at the bottom, `kernel` above the
//! storage modules `db` and `digits`, `ntt` and the rest above `kernel`.
//!
//! ## Tests
//! `cargo test -p pir-core` compares every SIMD kernel variant this CPU
//! has with its scalar twin. A variant the CPU lacks is skipped with a note
//! on stderr, unless a switch demands it; then its tests fail instead:
//! `TEST_REQUIRE_AVX2=1` demands the AVX2 variants, `TEST_REQUIRE_AVX512=1`
//! the AVX-512 ones (AVX-512F/BW, and AVX-512 VNNI for the VNNI variants of
//! the SimplePIR and DoublePIR passes). `.ci/run` sets each switch when
//! `/proc/cpuinfo` lists the features, so a CI run cannot pass with a
//! variant silently untested. `PIR_KERNEL=scalar|avx2|avx512bw|avx512-vnni`
//! selects the variant the dispatched paths (and the end-to-end tests) use.
// Loops over the two CRT residues index several parallel arrays at once.
#![allow(clippy::needless_range_loop)]

pub mod arith;
#[cfg(feature = "bench")]
pub mod bench;
pub mod client;
pub mod db;
pub mod digits;
pub mod error;
pub(crate) mod kernel;
pub mod mem;
pub mod ntt;
pub mod packing;
pub mod params;
pub mod rns;
pub mod sampler;
pub mod server;
pub mod wire;

pub use error::{Error, Result};

/// Runs `a` and `b` beside each other (`rayon::join`) when `fork` holds and
/// the pool has more than one thread, else in order; says whether they
/// forked. Every fork of pir-core's recursive and overlapped work goes
/// through here, so one thread (and wasm32, without the `parallel`
/// feature) always runs the same code in order.
#[cfg(feature = "parallel")]
pub(crate) fn join_if<RA: Send, RB: Send>(
    fork: bool,
    a: impl FnOnce() -> RA + Send,
    b: impl FnOnce() -> RB + Send,
) -> ((RA, RB), bool) {
    if fork && rayon::current_num_threads() > 1 {
        (rayon::join(a, b), true)
    } else {
        ((a(), b()), false)
    }
}

/// Without the `parallel` feature: `a` then `b`.
#[cfg(not(feature = "parallel"))]
pub(crate) fn join_if<RA, RB>(
    _fork: bool,
    a: impl FnOnce() -> RA,
    b: impl FnOnce() -> RB,
) -> ((RA, RB), bool) {
    ((a(), b()), false)
}
