//! The server's inner loops: the SimplePIR pass c1ᵀ·D (YPIR Construction
//! 3.1, Answer step 1) and the DoublePIR pass c2ᵀ·[H; T]ᵀ (step 2), the
//! NTT, the key-switching, node-combination and gadget-digit loops of
//! packing, the lazy residue products of the hint and of H2, and the
//! column update and chunk packing of `Server::update` (App. B).
//!
//! Not part of the public API (the passes are reached through
//! [`crate::server::Server`], the NTT through [`crate::ntt::NttTable`]).
//! Besides the leaf [`crate::mem`] (page advice, prefetch hints) this is the
//! only module allowed to use `unsafe`: each SIMD kernel is selected by
//! runtime CPU-feature detection and has a scalar twin that the tests
//! compare it against. The default build runs on any x86-64 and on wasm32
//! (scalar).
//!
//! SimplePIR and DoublePIR pick one of the [`Kernel`] variants. The other
//! kernels come in an AVX-512 version (16 u32 lanes) and an AVX2 version
//! (8 lanes), chosen from the selected [`Kernel`] (see `simd_width`): AVX-512
//! when an AVX-512 variant is selected, AVX2 for any other SIMD variant,
//! the scalar twins under `PIR_KERNEL=scalar` (`PIR_KERNEL=avx2` runs the
//! AVX2 versions on an AVX-512 machine).
//!
//! Layout: this file holds the CPU-feature detection and the [`Kernel`]
//! selection; each kernel family is a submodule holding its dispatch and
//! its scalar twin, with its instruction-set variants (and its tests) in
//! the submodule's directory:
//!
//! | family | what | variants |
//! |---|---|---|
//! | [`simplepir`](mod@simplepir) | SimplePIR tile and column passes (a batch two queries per record load with `vpdpbusd`), work splitting across threads; `simplepir::tune`: the measured prefetch distance; `simplepir::peak`: the measured multiply ceiling and overlap ceiling | `avx2` (`pmaddwd`, `vpmulld` for batch groups of 4 and 5 where it is one µop), `avx512` (`vpmaddwd`, `vpdpbusd`, `vpdpwssd`) |
//! | [`doublepir`](mod@doublepir) | DoublePIR limb kernels over a quad of digit rows | `avx512_vnni` (`vpdpwssd`), `avx2` (`vpmaddwd`) |
//! | [`ntt`] | negacyclic NTT tables and transforms (Harvey butterflies), the transform of H2's reversed digit blocks | `avx512`, `avx2` |
//! | [`keyswitch`] | packing: Montgomery key-switch accumulation, node combination, slot permutations | `avx512`, `avx2` |
//! | [`gadget`] | packing: the automorphism of a node's slots and its CRT gadget digits | `simd` (both widths) |
//! | [`rns`] | lazy 64-bit residue products (hint), block sums reduced in registers (H2) | `simd` (both widths) |
//! | [`runs`] | `Server::update`: a column of A1·D plus scaled runs of a1 | `simd` (both widths) |
//! | [`pack`] | rounding and chunk packing of A1·D columns into hint digits | `simd` (both widths) |
//!
//! Every family's `tests` compare each variant this CPU has against the
//! scalar twin; `TEST_REQUIRE_AVX512=1` / `TEST_REQUIRE_AVX2=1` make them
//! fail instead of skipping a variant the CPU lacks (see `test_util`).

#![allow(unsafe_code)]

mod doublepir;
mod gadget;
mod keyswitch;
pub(crate) mod ntt;
mod pack;
mod rns;
mod runs;
mod simplepir;

#[cfg(test)]
mod test_util;

pub(crate) use doublepir::doublepir;
pub(crate) use gadget::{crt_gadget_digits, permute};
pub(crate) use keyswitch::{add_permuted, keyswitch_acc, plus_minus, Mont, SlotPerm};
pub(crate) use ntt::ntt_forward_reversed_i16;
pub(crate) use pack::{pack_columns, pack_groups, window_chunk, PackGroup, PACK_COLS_MAX};
pub(crate) use rns::{mul_acc_lazy, mul_sum_blocks_mod};
pub(crate) use runs::add_scaled_runs;
pub use simplepir::peak::{
    cached_pass, mac_peak, overlap_ceiling, CachedPass, MacPeak, OverlapCeiling,
};
pub(crate) use simplepir::simplepir;
pub use simplepir::simplepir_impl;
pub(crate) use simplepir::tune::tune_prefetch;
pub use simplepir::tune::{prefetch_distance, prefetch_tuning, PrefetchTuning};

#[cfg(target_arch = "x86_64")]
fn avx512() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
}

#[cfg(target_arch = "x86_64")]
fn avx512_vnni() -> bool {
    avx512() && std::arch::is_x86_feature_detected!("avx512vnni")
}

#[cfg(target_arch = "x86_64")]
fn avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}

/// Vector width of the kernels outside SimplePIR (NTT, key switching, node
/// combination, chunk packing).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Simd {
    /// 16 u32 lanes (AVX-512F/BW).
    Avx512,
    /// 8 u32 lanes (AVX2).
    Avx2,
    /// The scalar twins.
    None,
}

/// AVX-512 when the selected [`Kernel`] is an AVX-512 one, AVX2 when it is
/// any other SIMD kernel (so `PIR_KERNEL=avx2` exercises the AVX2 paths on
/// an AVX-512 machine), scalar under `PIR_KERNEL=scalar` or without AVX2.
#[cfg(target_arch = "x86_64")]
fn simd_width() -> Simd {
    match Kernel::selected() {
        Kernel::Scalar => Simd::None,
        Kernel::Avx512Bw | Kernel::Avx512Vnni if avx512() => Simd::Avx512,
        _ if avx2() => Simd::Avx2,
        _ => Simd::None,
    }
}

/// SimplePIR kernel variants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// Portable scalar twin (lo/hi split, same arithmetic).
    Scalar,
    /// AVX2 `pmaddwd` on widened quarter quads (4 rows × 4 columns), two
    /// quarters per broadcast, a group of up to 3 queries per widening;
    /// groups of 4 on the records' 16-bit words as stored (two rows of a
    /// column each), without widening.
    Avx2,
    /// AVX-512BW `vpmaddwd` on widened half quads (4 rows × 8 columns),
    /// one query per call.
    Avx512Bw,
    /// AVX-512 VNNI: `vpdpbusd` on whole quads (4 rows × 16 columns) and
    /// the query's bytes, a group of up to 5 queries per quad loaded; the
    /// column-major tail with `vpdpwssd`.
    Avx512Vnni,
}

impl Kernel {
    /// Variants this CPU can run, fastest last.
    pub(crate) fn available() -> Vec<Kernel> {
        #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
        let mut v = vec![Kernel::Scalar];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                v.push(Kernel::Avx2);
            }
            if avx512() {
                v.push(Kernel::Avx512Bw);
            }
            if avx512_vnni() {
                v.push(Kernel::Avx512Vnni);
            }
        }
        v
    }

    /// The variant used: the fastest available, or `PIR_KERNEL` if set to
    /// an available one.
    pub(crate) fn selected() -> Kernel {
        Kernel::choice().0
    }

    /// Whether `PIR_KERNEL` chose [`Kernel::selected`] (then nothing
    /// replaces it, not even for a single query, whose kernel is otherwise
    /// measured with the prefetch distance).
    pub(crate) fn forced() -> bool {
        Kernel::choice().1
    }

    fn choice() -> (Kernel, bool) {
        static K: std::sync::OnceLock<(Kernel, bool)> = std::sync::OnceLock::new();
        *K.get_or_init(|| {
            let avail = Kernel::available();
            let forced = match std::env::var("PIR_KERNEL").ok().as_deref() {
                Some("scalar") => Some(Kernel::Scalar),
                Some("avx2") => Some(Kernel::Avx2),
                Some("avx512bw") => Some(Kernel::Avx512Bw),
                Some("avx512-vnni") => Some(Kernel::Avx512Vnni),
                _ => None,
            };
            match forced {
                Some(k) if avail.contains(&k) => (k, true),
                _ => (*avail.last().unwrap_or(&Kernel::Scalar), false),
            }
        })
    }

    /// Name for reports.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kernel::Scalar => "scalar",
            Kernel::Avx2 => "avx2",
            Kernel::Avx512Bw => "avx512bw",
            Kernel::Avx512Vnni => "avx512-vnni",
        }
    }
}
