//! The column update of `Server::update` (App. B): a column of A1·D plus
//! scaled runs of the doubled, reversed a1; scalar twin here, both SIMD
//! widths in `simd`.

#[cfg(target_arch = "x86_64")]
use super::{avx512, Kernel};

#[cfg(target_arch = "x86_64")]
mod simd;

#[cfg(test)]
mod tests;

/// `col[k] += Σ_t δ_t·g[o_t + k]` (mod 2^32) for every k, with `terms` the
/// pairs (δ_t, o_t): every change of one column of A1·D at once
/// (`Server::update`). Each term is a contiguous run of `g`, the doubled and
/// reversed a1 blocks, so that a column of NCyclicMat(a1,b) is one forward
/// slice with its negacyclic sign already applied. The column is read and
/// written once; each 16-row block is accumulated in a register over all
/// terms. Runtime-dispatched: AVX-512F or AVX2 (`vpmulld`), with
/// [`add_scaled_runs_scalar`] as the twin.
///
/// # Panics
/// If a run `g[o_t .. o_t + col.len()]` is out of bounds (a caller bug: the
/// offsets are computed from validated rows).
pub(crate) fn add_scaled_runs(col: &mut [u32], terms: &[(u32, usize)], g: &[u32]) {
    let n = col.len();
    assert!(
        terms.iter().all(|&(_, o)| o <= g.len() && g.len() - o >= n),
        "run outside g"
    );
    #[cfg(target_arch = "x86_64")]
    {
        if matches!(Kernel::selected(), Kernel::Avx512Bw | Kernel::Avx512Vnni) && avx512() {
            // SAFETY: avx512f detected at runtime; every run has ≥ n
            // elements (asserted above).
            unsafe { simd::runs512(col, terms, g) };
            return;
        }
        if std::arch::is_x86_feature_detected!("avx2") && Kernel::selected() != Kernel::Scalar {
            // SAFETY: avx2 detected at runtime; every run has ≥ n elements.
            unsafe { simd::runs256(col, terms, g) };
            return;
        }
    }
    add_scaled_runs_scalar(col, terms, g, 0);
}

/// Scalar twin of [`add_scaled_runs`] for rows `from..`.
fn add_scaled_runs_scalar(col: &mut [u32], terms: &[(u32, usize)], g: &[u32], from: usize) {
    for (k, c) in col.iter_mut().enumerate().skip(from) {
        for &(d, o) in terms {
            *c = c.wrapping_add(d.wrapping_mul(g[o + k]));
        }
    }
}
