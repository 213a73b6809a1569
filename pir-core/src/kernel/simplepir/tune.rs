//! The software-prefetch distance of the SimplePIR stream, measured on the
//! machine at the first large DBSetup rather than fixed at compile time.

use super::{panels_with, SplitQuery, View};
use crate::kernel::Kernel;

/// Software-prefetch distances (bytes ahead of the tile being read) that
/// [`tune_prefetch`] tries; 0 issues no prefetch instruction and leaves the
/// stream to the hardware prefetchers.
///
/// Which is best depends on the core, not on the code: on an AVX2-only
/// EPYC `prefetchnta` 24 KiB ahead beat the alternatives; on a Zen 4
/// EPYC any software prefetch cost 10–35 % of the
/// pass (0.60–0.74 of bandwidth with it, 0.91–0.94 without; see
/// `docs/benchmarks.md`). So the distance is measured on the machine, like
/// an FFT plan, rather than fixed at compile time.
const PREFETCH_CANDIDATES: [usize; 4] = [0, 4096, 8192, 24576];

/// How much faster than no software prefetch a distance must measure to be
/// chosen (see [`measure_prefetch`]).
const PREFETCH_MARGIN: f64 = 0.02;

/// The distance used until [`tune_prefetch`] has measured one (and for
/// databases too small to measure on): hardware prefetch only.
const PREFETCH_DEFAULT: usize = 0;

/// Most bytes of database [`tune_prefetch`] streams per timed pass.
const TUNE_BYTES: usize = 256 << 20;

/// The smallest tiled region [`tune_prefetch`] measures on: 64 MiB, twice
/// the last-level cache of the machines measured so far, so the timed
/// passes stream from memory (a smaller database is mostly served from the
/// cache, where prefetching hardly matters). The auditor's databases are
/// 2^30 bits (128 MiB) each.
const MIN_TUNE_BYTES: usize = 64 << 20;

/// Not yet initialised (from `PIR_PF` or the default).
const PF_UNSET: usize = usize::MAX;

static PF_DIST: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(PF_UNSET);

/// `PIR_PF` (bytes), if set: fixes the distance and disables tuning.
fn prefetch_forced() -> Option<usize> {
    static F: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *F.get_or_init(|| std::env::var("PIR_PF").ok().and_then(|v| v.parse().ok()))
}

/// Software prefetch distance in bytes of the SimplePIR stream: how far
/// ahead of the tile being read the kernels request cache lines (0: none).
/// `PIR_PF` if set, else what the first large DBSetup measured (see
/// [`prefetch_tuning`]), else 0.
pub fn prefetch_distance() -> usize {
    use std::sync::atomic::Ordering::Relaxed;
    match PF_DIST.load(Relaxed) {
        PF_UNSET => {
            let d = prefetch_forced().unwrap_or(PREFETCH_DEFAULT);
            PF_DIST.store(d, Relaxed);
            d
        }
        d => d,
    }
}

/// What the first DBSetup of a database of at least 64 MiB measured
/// ([`crate::server::Server::setup`] times the SimplePIR pass at 0, 4, 8
/// and 24 KiB and keeps the fastest for the process).
#[derive(Clone, Debug, PartialEq)]
pub struct PrefetchTuning {
    /// The distance chosen (bytes; 0 = no software prefetch).
    pub chosen: usize,
    /// Set by `PIR_PF`: nothing was measured.
    pub forced: bool,
    /// Best single-thread SimplePIR throughput (GB/s) of each candidate
    /// over the same span of the database.
    pub candidates: Vec<(usize, f64)>,
    /// Bytes streamed per timed pass.
    pub span_bytes: usize,
}

static TUNING: std::sync::Mutex<Option<PrefetchTuning>> = std::sync::Mutex::new(None);

/// Times the first `panels` panels of `view` with kernel `k` at every
/// [`PREFETCH_CANDIDATES`] distance, three interleaved rounds, and returns
/// the fastest (the earlier candidate on a tie). Leaves the process-wide
/// distance at the last candidate; the caller sets it.
fn measure_prefetch(k: Kernel, view: &View<'_>, panels: usize) -> PrefetchTuning {
    use std::sync::atomic::Ordering::Relaxed;
    let panels = panels.min(view.panels());
    let span_bytes = panels * view.panel * view.tiled_cols;
    // The values do not change the work: time the pass with c1 = 0.
    let q = [SplitQuery::new(&vec![0u32; view.ell1])];
    let mut out = vec![vec![0u32; view.ell2]];
    let mut best = [f64::INFINITY; PREFETCH_CANDIDATES.len()];
    for _round in 0..3 {
        for (b, &d) in best.iter_mut().zip(&PREFETCH_CANDIDATES) {
            PF_DIST.store(d, Relaxed);
            let t = std::time::Instant::now();
            panels_with(k, view, 0, panels, &q, &mut out);
            *b = b.min(t.elapsed().as_secs_f64());
            std::hint::black_box(&out);
        }
    }
    // The fastest, but software prefetch (candidates past the first, 0)
    // only when it beats none by more than PREFETCH_MARGIN: a wrong
    // distance costs up to a third of the pass (24 KiB on Zen 4), so noise
    // between close candidates should not pick one.
    let mut chosen = 0;
    for i in 1..best.len() {
        if best[i] < best[chosen] && best[i] * (1.0 + PREFETCH_MARGIN) < best[0] {
            chosen = i;
        }
    }
    PrefetchTuning {
        chosen: PREFETCH_CANDIDATES[chosen],
        forced: false,
        candidates: PREFETCH_CANDIDATES
            .iter()
            .zip(&best)
            .map(|(&d, &s)| (d, span_bytes as f64 / s.max(1e-9) / 1e9))
            .collect(),
        span_bytes,
    }
}

/// The measurement the first large DBSetup made in this process, if any
/// (see [`PrefetchTuning`]).
pub fn prefetch_tuning() -> Option<PrefetchTuning> {
    TUNING.lock().map(|t| t.clone()).unwrap_or(None)
}

/// Measures the SimplePIR pass of the selected kernel over the first
/// 256 MiB of `db` (all of it if smaller) with every
/// [`PREFETCH_CANDIDATES`] distance (three
/// interleaved rounds, best time of each), and keeps the fastest (a
/// distance only if it beats none by more than 2 %) for the
/// rest of the process. Runs once per process (later calls return the
/// first result); returns `None` without measuring when the tiled region of
/// `db` is smaller than 64 MiB or the kernel is scalar (no
/// prefetch), so a later, larger database can still tune. About 12 passes
/// of 256 MiB: ~0.1 s at 30 GB/s, paid at the first DBSetup.
pub(crate) fn tune_prefetch(db: &crate::db::Database) -> Option<PrefetchTuning> {
    use std::sync::atomic::Ordering::Relaxed;
    let mut slot = TUNING.lock().ok()?;
    if let Some(t) = slot.as_ref() {
        return Some(t.clone());
    }
    if let Some(d) = prefetch_forced() {
        let t = PrefetchTuning {
            chosen: d,
            forced: true,
            candidates: Vec::new(),
            span_bytes: 0,
        };
        *slot = Some(t.clone());
        return Some(t);
    }
    let k = Kernel::selected();
    let view = View::of(db);
    let panel_bytes = view.panel * view.tiled_cols;
    if k == Kernel::Scalar || panel_bytes == 0 || view.panels() * panel_bytes < MIN_TUNE_BYTES {
        return None;
    }
    let t = measure_prefetch(k, &view, TUNE_BYTES.div_ceil(panel_bytes));
    PF_DIST.store(t.chosen, Relaxed);
    *slot = Some(t.clone());
    Some(t)
}

#[cfg(test)]
mod tests {
    use super::super::{answer_with, simplepir_scalar};
    use super::*;
    use crate::kernel::test_util::{kernels, lcg};

    #[test]
    fn kernels_agree_at_every_prefetch_distance() {
        use crate::db::Database;
        use crate::params::DbShape;
        use std::sync::atomic::Ordering::Relaxed;
        let mut s = 5;
        let (ell1, ell2) = (2048usize, 40usize);
        let cm: Vec<u8> = (0..ell1 * ell2).map(|_| lcg(&mut s) as u8).collect();
        let db = Database::from_column_major(DbShape { ell1, ell2 }, 8, cm.clone()).unwrap();
        let c1: Vec<u32> = (0..ell1).map(|_| lcg(&mut s) as u32).collect();
        let mut want = vec![0u32; ell2];
        simplepir_scalar(&cm, ell1, &c1, &mut want);
        let split = [SplitQuery::new(&c1)];
        let view = View::of(&db);
        for &d in &PREFETCH_CANDIDATES {
            // Other tests may run meanwhile: the distance only changes
            // speed, never results, so sharing the global is harmless.
            PF_DIST.store(d, Relaxed);
            for k in kernels("kernels_agree_at_every_prefetch_distance") {
                let mut got = vec![vec![0u32; ell2]];
                answer_with(k, &view, &split, &mut got);
                assert_eq!(got[0], want, "distance {d} via {k:?}");
            }
        }
        PF_DIST.store(PREFETCH_DEFAULT, Relaxed);
    }

    #[test]
    fn prefetch_measurement_reports_every_candidate() {
        use crate::db::Database;
        use crate::params::DbShape;
        let shape = DbShape {
            ell1: 4096,
            ell2: 64,
        };
        let db = Database::zeros(shape, 8);
        let view = View::of(&db);
        assert!(view.panels() > 1);
        let t = measure_prefetch(Kernel::selected(), &view, 2);
        assert_eq!(t.span_bytes, 2 * view.panel * view.tiled_cols);
        assert_eq!(
            t.candidates.iter().map(|c| c.0).collect::<Vec<_>>(),
            PREFETCH_CANDIDATES
        );
        assert!(t.candidates.iter().all(|c| c.1 > 0.0));
        let fastest = t.candidates.iter().map(|c| c.1).fold(0.0, f64::max);
        let chosen = t.candidates.iter().find(|c| c.0 == t.chosen).unwrap();
        let none = t.candidates[0].1;
        if t.chosen == 0 {
            // none, unless a distance beat it by more than the margin
            assert!(fastest <= none * (1.0 + PREFETCH_MARGIN) + 1e-9);
        } else {
            assert_eq!(chosen.1, fastest);
            assert!(chosen.1 > none);
        }
        // too small to measure on: no tuning, nothing cached
        assert_eq!(
            tune_prefetch(&db).filter(|t| !t.forced && t.span_bytes < MIN_TUNE_BYTES),
            None
        );
        PF_DIST.store(PREFETCH_DEFAULT, std::sync::atomic::Ordering::Relaxed);
    }
}
