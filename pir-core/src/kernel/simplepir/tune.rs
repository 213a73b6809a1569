//! The software-prefetch distance of the SimplePIR stream, and the kernel
//! that streams a single query, measured on the machine at the first large
//! DBSetup rather than fixed at compile time.

use super::{panels_with, SplitQuery, View};
use crate::kernel::Kernel;

/// Software-prefetch distances (bytes ahead of the tile being read) that
/// [`tune_prefetch`] tries; 0 issues no prefetch instruction and leaves the
/// stream to the hardware prefetchers. The AVX2 and AVX-512BW kernels
/// prefetch every line of the database that far ahead, one per quad; the
/// `vpdpbusd` kernel of one query the first two lines of each 4 KiB page.
///
/// Which is best depends on the core and the kernel (a kernel near its
/// arithmetic limit needs the prefetch, a kernel idle half the time can
/// be slowed by it), so the distance is measured on the machine, like an
/// FFT plan, rather than fixed at compile time.
const PREFETCH_CANDIDATES: [usize; 4] = [0, 4096, 8192, 24576];

/// How much faster than the selected kernel without software prefetch
/// another candidate must measure to be chosen (see [`choose`]).
const PREFETCH_MARGIN: f64 = 0.02;

/// The distance used until [`tune_prefetch`] has measured one (and for
/// databases too small to measure on): hardware prefetch only.
const PREFETCH_DEFAULT: usize = 0;

/// Interleaved rounds of [`measure_prefetch`], each timing every
/// candidate once; a candidate's rate is its best round. A timed pass
/// over 256 MiB takes ~9 ms, and on a shared core a slow stretch can
/// spoil every round of one candidate; five rounds make that unlikely
/// enough that candidates a few per cent apart are told apart.
const TUNE_ROUNDS: usize = 5;

/// Most bytes of database [`tune_prefetch`] streams per timed pass.
const TUNE_BYTES: usize = 256 << 20;

/// The smallest tiled region [`tune_prefetch`] measures on: 64 MiB, twice
/// the last-level cache of the machines this runs on, so the timed
/// passes stream from memory (a smaller database is mostly served from the
/// cache, where prefetching hardly matters). The auditor's databases are
/// 2^30 bits (128 MiB) each.
const MIN_TUNE_BYTES: usize = 64 << 20;

/// Not yet initialised (from `PIR_PF` or the default).
const PF_UNSET: usize = usize::MAX;

static PF_DIST: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(PF_UNSET);

/// The kernel of a single query ([`single_kernel`]), set by
/// [`tune_prefetch`] at each measurement.
static SINGLE: std::sync::Mutex<Option<Kernel>> = std::sync::Mutex::new(None);

/// The kernel a pass of a single query uses: what the measurements of
/// the large DBSetups so far found fastest for it ([`tune_prefetch`]), else
/// [`Kernel::selected`]. A single query is bound by the stream, not by
/// the multiplies, so the kernel that streams best is not always the one
/// with the most multiplies per cycle (on a Zen 4 EPYC the two are
/// within a few per cent); batches always use the selected kernel.
pub(crate) fn single_kernel() -> Kernel {
    SINGLE
        .lock()
        .ok()
        .and_then(|k| *k)
        .unwrap_or_else(Kernel::selected)
}

/// The kernel a pass of `queries` queries uses: [`single_kernel`] for
/// one, [`Kernel::selected`] for a batch.
pub(crate) fn pass_kernel(queries: usize) -> Kernel {
    if queries == 1 {
        single_kernel()
    } else {
        Kernel::selected()
    }
}

/// The kernels [`tune_prefetch`] times a single query with: the selected
/// one, and the AVX2 kernel beside an AVX-512 one (unless `PIR_KERNEL`
/// forced the choice).
fn single_candidates() -> Vec<Kernel> {
    let k = Kernel::selected();
    let mut v = vec![k];
    if !Kernel::forced()
        && matches!(k, Kernel::Avx512Bw | Kernel::Avx512Vnni)
        && Kernel::available().contains(&Kernel::Avx2)
    {
        v.push(Kernel::Avx2);
    }
    v
}

/// `PIR_PF` (bytes), if set: fixes the distance and disables tuning.
fn prefetch_forced() -> Option<usize> {
    static F: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *F.get_or_init(|| std::env::var("PIR_PF").ok().and_then(|v| v.parse().ok()))
}

/// Software prefetch distance in bytes of the SimplePIR stream: how far
/// ahead of the tile being read the kernels request cache lines (0: none;
/// the AVX2 and AVX-512BW kernels every line, the `vpdpbusd` kernel of one
/// query the first two of each 4 KiB page).
/// `PIR_PF` if set, else what the measurements of the large DBSetups so
/// far chose (see [`prefetch_tuning`]), else 0.
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

/// What the DBSetups of databases of at least 64 MiB measured
/// ([`crate::server::Server::setup`] times the SimplePIR pass of one
/// query at 0, 4, 8 and 24 KiB, with each kernel it may use, at the 1st,
/// 2nd, 4th, 8th, … such setup of the process, and keeps the fastest by
/// the best rate each candidate has reached so far).
#[derive(Clone, Debug, PartialEq)]
pub struct PrefetchTuning {
    /// The distance chosen (bytes; 0 = no software prefetch).
    pub chosen: usize,
    /// The kernel chosen for a single query (`avx2`, `avx512bw`,
    /// `avx512-vnni`; batches use the selected kernel).
    pub kernel: &'static str,
    /// Set by `PIR_PF`: nothing was measured.
    pub forced: bool,
    /// Best single-thread SimplePIR throughput (GB/s) of each candidate
    /// (kernel, distance) over the same span of a database, over every
    /// measurement so far, the selected kernel first.
    pub candidates: Vec<(&'static str, usize, f64)>,
    /// Bytes streamed per timed pass.
    pub span_bytes: usize,
    /// Measurements merged into `candidates` (0 when forced).
    pub measurements: usize,
}

/// The process's tuning: the last result, and how many DBSetups large
/// enough to measure on it has seen.
struct TuneState {
    tuning: Option<PrefetchTuning>,
    setups: usize,
}

static TUNING: std::sync::Mutex<TuneState> = std::sync::Mutex::new(TuneState {
    tuning: None,
    setups: 0,
});

/// Whether the `setup`-th DBSetup large enough to measure on (from 1)
/// measures again: the 1st, 2nd, 4th, 8th, …, so that a server building
/// hundreds of databases a day re-checks its choice a few times, spread
/// over its first epochs, at a cost that stays below a pass per setup on
/// average. Each measurement takes ~0.2 s per kernel; one taken while the
/// core's memory was slow (on a shared host every candidate then looks
/// alike, and none beats the selected kernel without prefetch by the
/// margin) no longer fixes the choice for the life of the process.
fn measures_at(setup: usize) -> bool {
    setup.is_power_of_two()
}

/// Merges a measurement's rates into the best so far (`best` empty: the
/// first). A shared core only ever slows a pass, so the best rate each
/// candidate has reached is the estimate of what it can do.
fn merge_best(best: &mut Vec<f64>, rates: &[f64]) {
    if best.len() != rates.len() {
        *best = rates.to_vec();
        return;
    }
    for (b, &r) in best.iter_mut().zip(rates) {
        *b = b.max(r);
    }
}

/// Times the first `panels` panels of `view` for one query with every
/// kernel of `kernels` at every [`PREFETCH_CANDIDATES`] distance,
/// [`TUNE_ROUNDS`] interleaved rounds, merges each candidate's best rate
/// into `prior` (the earlier measurements, if any; [`merge_best`]) and
/// returns the fastest by the merged rates ([`choose`]) with its kernel. Leaves the process-wide distance at the
/// last candidate; the caller sets it.
fn measure_prefetch(
    kernels: &[Kernel],
    view: &View<'_>,
    panels: usize,
    prior: Option<&PrefetchTuning>,
) -> (PrefetchTuning, Kernel) {
    use std::sync::atomic::Ordering::Relaxed;
    let panels = panels.min(view.panels());
    let span_bytes = panels * view.panel * view.tiled_cols;
    // The values do not change the work: time the pass with c1 = 0.
    let q = [SplitQuery::new(&vec![0u32; view.ell1])];
    let mut out = vec![vec![0u32; view.ell2]];
    let pairs: Vec<(Kernel, usize)> = kernels
        .iter()
        .flat_map(|&k| PREFETCH_CANDIDATES.iter().map(move |&d| (k, d)))
        .collect();
    let mut best = vec![f64::INFINITY; pairs.len()];
    for _round in 0..TUNE_ROUNDS {
        for (b, &(k, d)) in best.iter_mut().zip(&pairs) {
            PF_DIST.store(d, Relaxed);
            let t = std::time::Instant::now();
            panels_with(k, view, 0, panels, &q, &mut out);
            *b = b.min(t.elapsed().as_secs_f64());
            std::hint::black_box(&out);
        }
    }
    let rates: Vec<f64> = best
        .iter()
        .map(|&s| span_bytes as f64 / s.max(1e-9) / 1e9)
        .collect();
    // earlier rates count only for the same candidates in the same order
    let prior = prior.filter(|p| {
        p.candidates.len() == pairs.len()
            && p.candidates
                .iter()
                .zip(&pairs)
                .all(|(c, &(k, d))| (c.0, c.1) == (k.name(), d))
    });
    let mut merged: Vec<f64> = prior
        .map(|p| p.candidates.iter().map(|c| c.2).collect())
        .unwrap_or_default();
    merge_best(&mut merged, &rates);
    let times: Vec<f64> = merged.iter().map(|&r| 1.0 / r.max(1e-9)).collect();
    let (kernel, chosen) = pairs[choose(&times)];
    let tuning = PrefetchTuning {
        chosen,
        kernel: kernel.name(),
        forced: false,
        candidates: pairs
            .iter()
            .zip(&merged)
            .map(|(&(k, d), &r)| (k.name(), d, r))
            .collect(),
        span_bytes,
        measurements: prior.map_or(0, |p| p.measurements) + 1,
    };
    (tuning, kernel)
}

/// The candidate to keep among pass times `times`, the first of them the
/// selected kernel without software prefetch: the fastest, but another
/// candidate only when it beats that first one by more than
/// [`PREFETCH_MARGIN`] (a wrong distance can cost a third of the pass, so
/// noise between close candidates should not pick one).
fn choose(times: &[f64]) -> usize {
    let mut chosen = 0;
    for i in 1..times.len() {
        if times[i] < times[chosen] && times[i] * (1.0 + PREFETCH_MARGIN) < times[0] {
            chosen = i;
        }
    }
    chosen
}

/// The last measurement of this process, merged with the earlier ones,
/// if any (see [`PrefetchTuning`]).
pub fn prefetch_tuning() -> Option<PrefetchTuning> {
    TUNING.lock().map(|t| t.tuning.clone()).unwrap_or(None)
}

/// Called by every DBSetup: on the 1st, 2nd, 4th, 8th, … one of a
/// database of at least 64 MiB in this process ([`measures_at`]), measures
/// the SimplePIR pass of one query over the first 256 MiB of `db` (all of
/// it if smaller) with every [`PREFETCH_CANDIDATES`] distance and every
/// kernel a single query may use ([`single_candidates`]; [`TUNE_ROUNDS`]
/// interleaved rounds, best time of each), merges the rates into the best
/// each candidate has reached in this process, and keeps the fastest by
/// those (another candidate than the selected kernel without prefetch
/// only if it beats that by more than 2 %): the distance and the kernel
/// of single-query passes from then on ([`prefetch_distance`],
/// [`single_kernel`]; a batch prefetches the next tiles at its own fixed
/// distance with the selected kernel). Returns the merged result when it
/// measured, else `None`: the tiled region of `db` is smaller than 64 MiB
/// (not counted, so a later, larger database still tunes), the kernel is
/// scalar (no prefetch), or this setup is not one that measures. `PIR_PF`
/// fixes the distance instead (returned once, at the first call). About
/// 20 passes of 256 MiB per kernel: ~0.2 s each at 30 GB/s.
pub(crate) fn tune_prefetch(db: &crate::db::Database) -> Option<PrefetchTuning> {
    use std::sync::atomic::Ordering::Relaxed;
    let mut state = TUNING.lock().ok()?;
    if let Some(d) = prefetch_forced() {
        if state.tuning.is_some() {
            return None;
        }
        let t = PrefetchTuning {
            chosen: d,
            kernel: Kernel::selected().name(),
            forced: true,
            candidates: Vec::new(),
            span_bytes: 0,
            measurements: 0,
        };
        state.tuning = Some(t.clone());
        return Some(t);
    }
    let k = Kernel::selected();
    let view = View::of(db);
    let panel_bytes = view.panel * view.tiled_cols;
    if k == Kernel::Scalar || panel_bytes == 0 || view.panels() * panel_bytes < MIN_TUNE_BYTES {
        return None;
    }
    state.setups += 1;
    if !measures_at(state.setups) {
        return None;
    }
    let (t, single) = measure_prefetch(
        &single_candidates(),
        &view,
        TUNE_BYTES.div_ceil(panel_bytes),
        state.tuning.as_ref(),
    );
    PF_DIST.store(t.chosen, Relaxed);
    if let Ok(mut s) = SINGLE.lock() {
        *s = Some(single);
    }
    state.tuning = Some(t.clone());
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
        let kernels = single_candidates();
        assert_eq!(kernels[0], Kernel::selected());
        let (t, single) = measure_prefetch(&kernels, &view, 2, None);
        assert_eq!(t.measurements, 1);
        assert_eq!(t.span_bytes, 2 * view.panel * view.tiled_cols);
        let want: Vec<_> = kernels
            .iter()
            .flat_map(|k| PREFETCH_CANDIDATES.iter().map(move |&d| (k.name(), d)))
            .collect();
        let got: Vec<_> = t.candidates.iter().map(|c| (c.0, c.1)).collect();
        assert_eq!(got, want);
        assert!(t.candidates.iter().all(|c| c.2 > 0.0));
        assert_eq!(t.kernel, single.name());
        assert!(kernels.contains(&single));
        let chosen = t
            .candidates
            .iter()
            .find(|c| (c.0, c.1) == (t.kernel, t.chosen))
            .unwrap();
        let fastest = t.candidates.iter().map(|c| c.2).fold(0.0, f64::max);
        let baseline = t.candidates[0].2;
        if (t.kernel, t.chosen) == (Kernel::selected().name(), 0) {
            // the selected kernel without prefetch, unless another beat it
            // by more than the margin
            assert!(fastest <= baseline * (1.0 + PREFETCH_MARGIN) + 1e-9);
        } else {
            assert_eq!(chosen.2, fastest);
            assert!(chosen.2 > baseline);
        }
        // a second measurement merges into the first: same candidates,
        // each at least as fast as either measurement alone
        let (t2, _) = measure_prefetch(&kernels, &view, 2, Some(&t));
        assert_eq!(t2.measurements, 2);
        for (a, b) in t2.candidates.iter().zip(&t.candidates) {
            assert_eq!((a.0, a.1), (b.0, b.1));
            assert!(a.2 >= b.2);
        }
        // too small to measure on: no tuning, nothing cached
        assert_eq!(
            tune_prefetch(&db).filter(|t| !t.forced && t.span_bytes < MIN_TUNE_BYTES),
            None
        );
        PF_DIST.store(PREFETCH_DEFAULT, std::sync::atomic::Ordering::Relaxed);
    }

    #[test]
    fn choose_keeps_the_baseline_unless_beaten_by_the_margin() {
        // the baseline (selected kernel, no prefetch) is first
        assert_eq!(choose(&[1.0, 0.99, 1.01]), 0);
        assert_eq!(choose(&[1.0, 0.97, 0.9]), 2);
        assert_eq!(choose(&[1.0, 0.9, 0.97]), 1);
        // faster than the baseline but within the margin of it: kept out
        assert_eq!(choose(&[1.0, 1.2, 0.985]), 0);
        assert_eq!(choose(&[1.0]), 0);
    }

    #[test]
    fn measurements_thin_out_over_a_process() {
        let at: Vec<usize> = (1..=40).filter(|&n| measures_at(n)).collect();
        assert_eq!(at, [1, 2, 4, 8, 16, 32]);
        // 768 databases a day for a year: 19 measurements
        assert_eq!((1..=768 * 365).filter(|&n| measures_at(n)).count(), 19);
    }

    #[test]
    fn merging_keeps_each_candidates_best_rate() {
        let mut best = Vec::new();
        merge_best(&mut best, &[20.0, 25.0, 18.0]);
        assert_eq!(best, [20.0, 25.0, 18.0]);
        // a slow measurement lowers nothing; a faster one raises its own
        merge_best(&mut best, &[19.0, 22.0, 29.0]);
        assert_eq!(best, [20.0, 25.0, 29.0]);
        // other candidates: start over
        merge_best(&mut best, &[1.0, 2.0]);
        assert_eq!(best, [1.0, 2.0]);
    }

    #[test]
    fn single_queries_use_the_measured_kernel() {
        // unmeasured: the selected kernel; a batch always uses it
        if SINGLE.lock().unwrap().is_none() {
            assert_eq!(single_kernel(), Kernel::selected());
        }
        assert_eq!(pass_kernel(1), single_kernel());
        assert_eq!(pass_kernel(4), Kernel::selected());
    }
}
