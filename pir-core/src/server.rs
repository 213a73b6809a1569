//! The server half: DBSetup and Answer of YPIR Construction 3.1 with the
//! NTT hint (§4.1, App. B), the packing preprocessing (§4.2), one packed
//! response ciphertext, and cross-client batching (§4.3).
//!
//! # The hint and the dense response layout
//! DBSetup computes, column by column, A1·D over Z_{2^32} with the NTT
//! (App. B: A1 = NCyclicMat(a1ᵀ), so NCyclicMat(a1,b)·d = NCoeffs(a1,b·d̂)
//! where NCoeffs(d̂) = d), rounds it to q̃1 and, instead of the base-p digits
//! G^{-1}_{d1,p} of Eq. (3.1), bit-packs the d1 values of log q̃1 bits of each
//! column into K_H = ⌈d1·log q̃1 / log p⌉ chunks of log p bits (stored as
//! signed representatives, so ‖H‖∞ ≤ p/2 as Theorem 3.4 assumes). With the κ
//! digit rows of T this is K_H + κ ≤ d2 plaintext rows, so the whole
//! DoublePIR response packs into ρ = 1 RLWE ciphertext.
//!
//! For a row h of that matrix the DoublePIR encoding has a-vector A2·hᵀ =
//! NCoeffs(Σ_b a2,b·ĥ_b) and CDKS.Pack turns a-vector α into
//! ã = Σ_j α_j x^{−j}. Since NCoeffs reverses coefficients, ã = −x·(Σ_b a2,b·ĥ_b),
//! and the factor d2^{-1} of Eq. (3.2) is folded in: ã = d2^{-1}·(−x)·Σ_b a2,b·ĥ_b,
//! all computed in the NTT domain.
//!
//! # Hint files
//! Computing A1·D is the expensive part of DBSetup (one pass of NTTs over the
//! whole database). [`Server::write_hint`] persists the dense hint rows in a
//! versioned, checksummed file and [`Server::from_hint`] rebuilds a server
//! from the database, its public seed and that file, re-deriving everything
//! else (a2, the packing key rows, H2 and the §4.2 precomputation) from the
//! seed: a cost independent of ℓ1. The file does not bind the database
//! contents: it must be stored together with the database version it was
//! written for.
//!
//! # Kernel selection and prefetch tuning
//! The SimplePIR and DoublePIR passes run the fastest SIMD kernel this CPU
//! has ([`simplepir_impl`] names it; `PIR_KERNEL=scalar|avx2|avx512bw|
//! avx512-vnni` forces one). The 1st, 2nd, 4th, 8th, … DBSetup of a
//! database of at least 64 MiB in a process measures the SimplePIR pass's
//! software-prefetch distance and single-query kernel, keeping the best
//! rate each candidate has reached ([`prefetch_tuning`],
//! [`prefetch_distance`]; `PIR_PF` fixes it).
//!
//! # Modules
//! | module | contents |
//! |---|---|
//! | `setup` | DBSetup: A1·D with the NTT, H2, the packing precomputation ([`SetupTimings`]) |
//! | `chunks` | rounding and chunk packing of the hint's columns |
//! | `hint_file` | the hint file format ([`Server::write_hint`], [`Server::from_hint`]) |
//! | `update` | incremental DBSetup ([`Server::update`], [`RecordUpdate`]) |
//! | `answer` | Answer and batched answers ([`Server::answer_batch`], [`AnswerTimings`]) |
//! | `memory` | the memory model ([`Server::memory`], [`ServerMemory`]) |

use std::sync::Arc;

use crate::db::Database;
use crate::digits::DigitMatrix;
use crate::packing::PackPrecomp;
use crate::params::{DbShape, Layout, Params};
use crate::rns::Context;
use crate::sampler::PublicSeed;

pub use crate::kernel::{
    cached_pass, mac_peak, overlap_ceiling, prefetch_distance, prefetch_tuning, simplepir_impl,
    CachedPass, MacPeak, OverlapCeiling, PrefetchTuning,
};

mod answer;
mod chunks;
mod hint_file;
mod memory;
mod setup;
#[cfg(test)]
mod test_util;
mod update;

pub use answer::AnswerTimings;
pub(crate) use chunks::unpack_chunks;
pub use memory::ServerMemory;
pub use setup::SetupTimings;
pub use update::{RecordUpdate, UpdateStats};

/// Words between consecutive a2 blocks (and the transformed row blocks
/// H2 sums them against, [`Server::rows_a`]): 2·d2 plus 64. With a stride
/// of exactly 2·d2 (a multiple of 4 KiB) the m2 blocks' slots that
/// `kernel::mul_sum_blocks_mod` reads together all map to the same few L1
/// sets; measured on the Zen 4 at d2 = 2048, m2 = 16: 11.0 µs per row
/// with 4096 words, 7.0 µs with 4160.
fn a2_stride(d2: usize) -> usize {
    2 * d2 + 64
}

/// Server state of one database version: the output dbp of DBSetup.
pub struct Server {
    ctx: Arc<Context>,
    shape: DbShape,
    seed: PublicSeed,
    seed_id: [u8; 8],
    db: Database,
    /// Dense hint rows, K_H × ℓ2 signed log p-bit chunks, in the layout the
    /// DoublePIR pass streams ([`crate::digits`]).
    hint: DigitMatrix,
    /// a2 in NTT form (m2 polynomials) times NTT(−x·d2^{-1})
    /// ([`Server::scaled_a2`]), one every [`a2_stride`] words.
    a2: Vec<u32>,
    /// Public random rows of the packing key (NTT and Montgomery form).
    pack_a: Vec<u32>,
    pack: PackPrecomp,
    layout: Layout,
    /// a1 in coefficient form for the columns of A1 in `update`: per block,
    /// 2·d1 words `[rev(a), −rev(a)]` (`rev(a)[m] = a[d1 − 1 − m]`), so that
    /// column ii of NCyclicMat(a) is the forward run starting at
    /// d1 − 1 − ii, negacyclic signs included (App. B).
    a1_ext: Vec<u32>,
    /// Unrounded A1·D, column-major (d1 words per column), kept so that an
    /// update touches only what changed. Empty
    /// after [`Server::from_hint`] (a hint file stores only the rounded
    /// hint); the first [`Server::update`] then recomputes it.
    ad: Vec<u32>,
    setup_timings: SetupTimings,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("params", &self.ctx.params.name)
            .field("shape", &self.shape)
            .field("seed", &self.seed)
            .finish()
    }
}

impl Server {
    /// The parameter set.
    pub fn params(&self) -> &Params {
        &self.ctx.params
    }
    /// The database shape.
    pub fn shape(&self) -> DbShape {
        self.shape
    }
    /// The public seed (published to clients).
    pub fn seed(&self) -> PublicSeed {
        self.seed
    }
    /// The database.
    pub fn database(&self) -> &Database {
        &self.db
    }
    /// Gives the database back, dropping the server's state (hint rows,
    /// A1·D, packing precomputation), e.g. to rebuild it from scratch.
    pub fn into_database(self) -> Database {
        self.db
    }
}
