//! The arithmetic ceiling of the SimplePIR pass, measured on the machine:
//! how many u8 × u32 multiply-accumulates per second the selected
//! kernel's multiply instructions retire when they run from registers
//! only, and the core clock. A batch of k queries costs k multiply-
//! accumulates per database byte, so its pass takes at least
//! k·|DB| ÷ [`MacPeak::macs_per_second`], and at least |DB| ÷ bandwidth.

use super::Kernel;
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// A stopwatch in the calling thread's CPU time where the platform has it
/// (so that time spent waiting for a core on a shared machine does not
/// count), else in wall time.
#[cfg(target_arch = "x86_64")]
struct Stopwatch(Option<f64>, std::time::Instant);

#[cfg(target_arch = "x86_64")]
impl Stopwatch {
    fn start() -> Self {
        Stopwatch(crate::mem::thread_cpu_seconds(), std::time::Instant::now())
    }

    fn seconds(&self) -> f64 {
        match (self.0, crate::mem::thread_cpu_seconds()) {
            (Some(a), Some(b)) if b > a => b - a,
            _ => self.1.elapsed().as_secs_f64(),
        }
    }
}

/// The measured multiply throughput of one SimplePIR kernel variant (see
/// [`mac_peak`]).
#[derive(Clone, Debug, PartialEq)]
pub struct MacPeak {
    /// The kernel variant measured (as [`super::simplepir_impl`] names it).
    pub kernel: &'static str,
    /// The instruction mix timed, per group of u8 × u32 multiply-
    /// accumulates.
    pub instruction: &'static str,
    /// u8 × u32 multiply-accumulates (one record byte times one 32-bit
    /// query word) one issue of `instruction` performs.
    pub macs_per_instruction: u32,
    /// Best rate over the rounds: u8 × u32 multiply-accumulates per second
    /// on the calling thread (equivalently, database bytes per second one
    /// query of a compute-bound batch can be charged).
    pub macs_per_second: f64,
    /// Core clock measured in the same call by a chain of dependent
    /// register adds (one per cycle), in Hz. Both rates are timed in the
    /// thread's CPU time where the platform has it.
    pub clock_hz: f64,
}

impl MacPeak {
    /// u8 × u32 multiply-accumulates per cycle.
    pub fn macs_per_cycle(&self) -> f64 {
        self.macs_per_second / self.clock_hz
    }
}

/// Independent accumulator chains of the throughput loops: more than
/// latency × issue width (5 × 2 for `vpdpbusd`), fewer than the registers.
#[cfg(target_arch = "x86_64")]
const CHAINS: usize = 12;

/// Chains of the `vpmaddwd` + `vpaddd` loops: each also holds its own
/// record vector, and the AVX2 variant has only 16 registers.
#[cfg(target_arch = "x86_64")]
const MADD_CHAINS: usize = 6;

/// Iterations of each timed loop (CHAINS instructions each): about 5 ms
/// at 2 instructions per cycle and 2.5 GHz (fewer in the unoptimised
/// test build).
#[cfg(target_arch = "x86_64")]
const ITERS: usize = if cfg!(test) { 20_000 } else { 2_000_000 };

/// Measures [`MacPeak`] for the selected kernel on the calling thread (best
/// of three rounds of about 5 ms each); `None` for the scalar kernel.
pub fn mac_peak() -> Option<MacPeak> {
    mac_peak_of(Kernel::selected())
}

/// [`mac_peak`] for variant `k`.
pub(crate) fn mac_peak_of(k: Kernel) -> Option<MacPeak> {
    #[cfg(target_arch = "x86_64")]
    {
        // the instruction mixes the variant's kernels multiply with; the
        // peak is the fastest
        type Loop = fn() -> usize;
        let (instruction, per, loops): (_, u32, &[Loop]) = match k {
            Kernel::Avx512Vnni if super::avx512_vnni() => (
                "vpdpbusd zmm",
                16,
                &[|| {
                    // SAFETY: avx512f, avx512bw and avx512vnni were detected.
                    unsafe { dpbusd_zmm(ITERS) }
                }],
            ),
            Kernel::Avx512Bw if super::avx512() => (
                "vpmaddwd + vpaddd zmm",
                16,
                &[|| {
                    // SAFETY: avx512f and avx512bw were detected.
                    unsafe { maddwd_zmm(ITERS) }
                }],
            ),
            Kernel::Avx2 if super::super::avx2() => match super::avx2_batch() {
                super::Avx2Batch::Words => (
                    "vpmaddwd + vpaddd ymm",
                    8,
                    &[|| {
                        // SAFETY: avx2 was detected.
                        unsafe { maddwd_ymm(ITERS) }
                    }],
                ),
                // batches of 4 and 5 multiply with `vpmulld`, smaller
                // groups with `vpmaddwd`
                super::Avx2Batch::Mulld => (
                    "vpmaddwd or vpmulld + vpaddd ymm",
                    8,
                    &[
                        || {
                            // SAFETY: avx2 was detected.
                            unsafe { maddwd_ymm(ITERS) }
                        },
                        || {
                            // SAFETY: avx2 was detected.
                            unsafe { mulld_ymm(ITERS) }
                        },
                    ],
                ),
            },
            _ => return None,
        };
        let mut best = 0f64;
        let mut clock = 0f64;
        for _ in 0..3 {
            clock = clock.max(clock_hz());
            for run in loops {
                best = best.max(per as f64 * per_second(run));
            }
        }
        Some(MacPeak {
            kernel: k.name(),
            instruction,
            macs_per_instruction: per,
            macs_per_second: best,
            clock_hz: clock,
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = k;
        None
    }
}

/// What one core can reach for a batch of k queries when both its memory
/// stream and its arithmetic are as good as they can be: a synthetic pass
/// that reads every 64-byte line of a buffer once (`prefetcht1` a fixed
/// distance ahead, then a demand load) and feeds each line to exactly the
/// multiply instructions batch k needs per line (4k `vpdpbusd` with the
/// selected AVX-512 VNNI kernel, 8k `vpmaddwd` + `vpaddd` ymm pairs with
/// AVX2), from registers only: no transposition, no L1 traffic beyond the
/// line, no reduction. Its time against max(stream alone, arithmetic
/// alone) is the ceiling that overlapping the two reaches on this core,
/// an upper bound for what the real pass can reach of
/// max(|DB| ÷ bandwidth, k·|DB| ÷ MAC rate) (see `docs/benchmarks.md`).
#[derive(Clone, Debug, PartialEq)]
pub struct OverlapCeiling {
    /// The kernel variant whose instruction mix was timed.
    pub kernel: &'static str,
    /// The batch size k emulated.
    pub batch: usize,
    /// Bytes streamed (the buffer, rounded down to whole lines).
    pub bytes: usize,
    /// The stream alone (prefetch + load per line, no multiplies), CPU
    /// seconds, best of the rounds.
    pub stream_seconds: f64,
    /// The multiplies alone, over a 16 KiB piece of the buffer held in
    /// L1 and walked as many times as the buffer has lines.
    pub compute_seconds: f64,
    /// Both in one pass.
    pub both_seconds: f64,
}

impl OverlapCeiling {
    /// max(stream alone, arithmetic alone) ÷ both: 1 when the core hides
    /// the shorter of the two entirely, ½ when they add up.
    pub fn fraction(&self) -> f64 {
        self.stream_seconds.max(self.compute_seconds) / self.both_seconds
    }
}

/// Lines between a line's `prefetcht1` and its load in [`overlap_ceiling`]
/// (4 KiB: far enough ahead to cover the memory latency; much nearer
/// starves the stream, further gains nothing).
#[cfg(target_arch = "x86_64")]
const OVERLAP_AHEAD_LINES: usize = 64;

/// Measures [`OverlapCeiling`] for batch `k` with the selected kernel over
/// `buf` (best of two rounds, CPU time); `None` for the scalar and
/// AVX-512BW kernels or an empty `buf`.
pub fn overlap_ceiling(buf: &[u8], k: usize) -> Option<OverlapCeiling> {
    overlap_ceiling_of(Kernel::selected(), buf, k)
}

/// [`overlap_ceiling`] for variant `kind`.
pub(crate) fn overlap_ceiling_of(kind: Kernel, buf: &[u8], k: usize) -> Option<OverlapCeiling> {
    #[cfg(target_arch = "x86_64")]
    {
        let lines = buf.len() / 64;
        if lines == 0 {
            return None;
        }
        let buf = &buf[..64 * lines];
        let run: fn(&[u8], usize, usize, bool) -> u64 = match kind {
            Kernel::Avx512Vnni if super::avx512_vnni() => |b, k, reps, pf| {
                // SAFETY: avx512f, avx512bw and avx512vnni were detected.
                unsafe { stream_dpbusd(b, k, reps, pf) }
            },
            Kernel::Avx2 if super::super::avx2() => |b, k, reps, pf| {
                // SAFETY: avx2 was detected.
                unsafe { stream_maddwd(b, k, reps, pf) }
            },
            _ => return None,
        };
        let piece = &buf[..buf.len().min(16 * 1024)];
        let reps = lines.div_ceil(piece.len() / 64);
        let mut best = [f64::INFINITY; 3];
        for _ in 0..2 {
            for (i, (b, k, reps, pf)) in [
                (buf, 0, 1, true),
                (piece, k, reps, false),
                (buf, k, 1, true),
            ]
            .into_iter()
            .enumerate()
            {
                let t = Stopwatch::start();
                std::hint::black_box(run(b, k, reps, pf));
                best[i] = best[i].min(t.seconds());
            }
        }
        Some(OverlapCeiling {
            kernel: kind.name(),
            batch: k,
            bytes: buf.len(),
            stream_seconds: best[0],
            compute_seconds: best[1],
            both_seconds: best[2],
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (kind, buf, k);
        None
    }
}

/// The real batch pass (the SimplePIR pass of a batch: tiled layout, prefetches
/// and all) over a database small enough to stay in this core's caches,
/// against the multiply peak measured beside it: what the kernels reach
/// of the arithmetic ceiling when memory costs nothing. The pass over the
/// real database can reach no more of its bound than this at a
/// compute-bound batch, so it splits a shortfall between the kernel (this
/// fraction) and the stream ([`OverlapCeiling`]).
#[derive(Clone, Debug, PartialEq)]
pub struct CachedPass {
    /// The kernel variant timed.
    pub kernel: &'static str,
    /// The batch size k.
    pub batch: usize,
    /// Bytes of the cache-resident database (4096 rows × 64 columns).
    pub bytes: usize,
    /// One pass, CPU seconds, best of the rounds.
    pub seconds: f64,
    /// The best [`MacPeak::macs_per_second`] measured between the rounds.
    pub macs_per_second: f64,
}

impl CachedPass {
    /// k·bytes ÷ (seconds × peak): 1 when the pass retires multiplies as
    /// fast as the peak loop.
    pub fn fraction(&self) -> f64 {
        self.batch as f64 * self.bytes as f64 / (self.seconds * self.macs_per_second)
    }

    /// Database bytes per second the pass reads: what a pass from memory
    /// at the same rate must stream.
    pub fn bytes_per_second(&self) -> f64 {
        self.bytes as f64 / self.seconds
    }
}

/// Rows of [`cached_pass`]'s database: two panels of 2048, so that the
/// panel loop and the partial sums between panels are exercised.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const CACHED_ROWS: usize = 4096;
/// Columns of [`cached_pass`]'s database: 256 KiB in all, half the
/// smallest L2 among the x86-64 cores we run on (Zen 2 and 3: 512 KiB).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const CACHED_COLS: usize = 64;

/// Timed rounds of [`cached_pass`], each preceded by a [`mac_peak_of`]
/// measurement; the best of each is kept. On a core whose SMT sibling is
/// busy both vary from round to round, so it takes many short rounds
/// (about a second in all) for the best to be steady from run to run.
#[cfg(target_arch = "x86_64")]
const CACHED_ROUNDS: usize = if cfg!(test) { 2 } else { 60 };

/// u8 × u32 multiply-accumulates per timed round of [`cached_pass`]
/// (about 2 ms at 40 G/s).
#[cfg(target_arch = "x86_64")]
const CACHED_ROUND_MACS: usize = if cfg!(test) { 1 << 20 } else { 80 << 20 };

/// Measures [`CachedPass`] for batch `k` with the kernel a pass of k
/// queries uses (the selected one, or for k = 1 the one measured fastest
/// for a single query); `None` for the scalar kernel or k = 0.
pub fn cached_pass(k: usize) -> Option<CachedPass> {
    cached_pass_of(super::tune::pass_kernel(k), k)
}

/// [`cached_pass`] for variant `kind`.
pub(crate) fn cached_pass_of(kind: Kernel, k: usize) -> Option<CachedPass> {
    #[cfg(target_arch = "x86_64")]
    {
        cached_pass_x86(kind, k)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (kind, k);
        None
    }
}

/// [`cached_pass_of`] where there are kernels to time.
#[cfg(target_arch = "x86_64")]
fn cached_pass_x86(kind: Kernel, k: usize) -> Option<CachedPass> {
    use crate::db::Database;
    use crate::params::DbShape;
    if k == 0 {
        return None;
    }
    // the first round's peak; None for a variant without one
    let mut peak = mac_peak_of(kind)?.macs_per_second;
    // public, fixed contents: the pass does not depend on the values
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let shape = DbShape {
        ell1: CACHED_ROWS,
        ell2: CACHED_COLS,
    };
    let records = (0..shape.records()).map(|_| next() as u8).collect();
    let db = Database::from_column_major(shape, 8, records).ok()?;
    let view = super::View::of(&db);
    let queries: Vec<_> = (0..k)
        .map(|_| {
            let c1: Vec<u32> = (0..CACHED_ROWS).map(|_| next() as u32).collect();
            super::SplitQuery::new(&c1)
        })
        .collect();
    let mut out = vec![vec![0u32; CACHED_COLS]; k];
    let bytes = shape.records();
    let reps = CACHED_ROUND_MACS.div_ceil(k * bytes).max(1);
    // one untimed pass brings the database and the queries into cache
    super::answer_with(kind, &view, &queries, &mut out);
    let mut best = f64::INFINITY;
    for round in 0..CACHED_ROUNDS {
        if round > 0 {
            peak = peak.max(mac_peak_of(kind)?.macs_per_second);
        }
        let t = Stopwatch::start();
        for _ in 0..reps {
            super::answer_with(kind, &view, &queries, &mut out);
            std::hint::black_box(&mut out);
        }
        best = best.min(t.seconds() / reps as f64);
    }
    // what was timed is the right answer
    let mut twin = vec![vec![0u32; CACHED_COLS]; k];
    super::answer_with(Kernel::Scalar, &view, &queries, &mut twin);
    assert_eq!(
        out,
        twin,
        "the {} pass disagrees with its scalar twin",
        kind.name()
    );
    Some(CachedPass {
        kernel: kind.name(),
        batch: k,
        bytes,
        seconds: best,
        macs_per_second: peak,
    })
}

/// `reps` walks over `buf` (whole 64-byte lines), each line prefetched
/// [`OVERLAP_AHEAD_LINES`] ahead when `prefetch`, loaded, folded into a
/// checksum and fed to 4k `vpdpbusd` (batch k: 64 bytes × k queries, 16
/// u8 × u32 MACs per instruction) over 16 accumulators. Returns the xor
/// of the lines' 64-bit words plus the accumulators' sum, so nothing can
/// be left out.
///
/// # Safety
/// The caller must have checked avx512f, avx512bw and avx512vnni.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn stream_dpbusd(buf: &[u8], k: usize, reps: usize, prefetch: bool) -> u64 {
    let lines = buf.len() / 64;
    let q = _mm512_set1_epi32(std::hint::black_box(0x0102_0304));
    let mut acc = [_mm512_setzero_si512(); 16];
    let mut fold = _mm512_setzero_si512();
    let p = buf.as_ptr();
    // One line: 4 queries a round over all 16 accumulators, then the
    // k mod 4 queries left over 4 of them starting at `$off`, so that
    // successive lines (offsets 0, 4, 8, 12) spread the remainder over
    // all accumulators instead of making a dependency chain of it.
    macro_rules! line {
        ($i:expr, $off:literal) => {{
            let i = $i;
            if prefetch && i + OVERLAP_AHEAD_LINES < lines {
                // SAFETY: a prefetch never faults; the address is in `buf`.
                unsafe {
                    _mm_prefetch::<_MM_HINT_T1>(p.add(64 * (i + OVERLAP_AHEAD_LINES)) as *const i8)
                };
            }
            // SAFETY: i < lines, so the 64 bytes at 64i are in `buf`.
            let d = unsafe { _mm512_loadu_si512(p.add(64 * i) as *const __m512i) };
            fold = _mm512_xor_si512(fold, d);
            for _ in 0..k / 4 {
                for a in acc.iter_mut() {
                    *a = _mm512_dpbusd_epi32(*a, d, q);
                }
            }
            let rem = 4 * (k % 4);
            for t in 0..12 {
                if t < rem {
                    let a = &mut acc[($off + t) % 16];
                    *a = _mm512_dpbusd_epi32(*a, d, q);
                }
            }
        }};
    }
    for _ in 0..reps {
        let mut i = 0;
        while i + 4 <= lines {
            line!(i, 0);
            line!(i + 1, 4);
            line!(i + 2, 8);
            line!(i + 3, 12);
            i += 4;
        }
        while i < lines {
            line!(i, 0);
            i += 1;
        }
    }
    let s = acc
        .iter()
        .fold(_mm512_setzero_si512(), |s, &x| _mm512_add_epi32(s, x));
    let mut words = [0u64; 8];
    // SAFETY: `words` is 64 bytes, one 512-bit store.
    unsafe { _mm512_storeu_si512(words.as_mut_ptr() as *mut __m512i, fold) };
    words.iter().fold(0, |x, w| x ^ w) ^ u64::from(_mm512_reduce_add_epi32(s) as u32)
}

/// [`stream_dpbusd`] with the AVX2 kernel's instructions: each line (two
/// ymm vectors) feeds 8k `vpmaddwd` + `vpaddd` pairs (8 u8 × u32 MACs per
/// pair) over 8 accumulators.
///
/// # Safety
/// The caller must have checked avx2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn stream_maddwd(buf: &[u8], k: usize, reps: usize, prefetch: bool) -> u64 {
    let lines = buf.len() / 64;
    let mut q: [__m256i; 4] =
        std::array::from_fn(|j| _mm256_set1_epi32(std::hint::black_box(0x0102_0304 + j as i32)));
    let mut acc = [_mm256_setzero_si256(); 8];
    let mut fold = _mm256_setzero_si256();
    let p = buf.as_ptr();
    for _ in 0..reps {
        for i in 0..lines {
            if prefetch && i + OVERLAP_AHEAD_LINES < lines {
                // SAFETY: a prefetch never faults; the address is in `buf`.
                unsafe {
                    _mm_prefetch::<_MM_HINT_T1>(p.add(64 * (i + OVERLAP_AHEAD_LINES)) as *const i8)
                };
            }
            // SAFETY: i < lines, so the 64 bytes at 64i are in `buf`.
            let (d0, d1) = unsafe {
                (
                    _mm256_loadu_si256(p.add(64 * i) as *const __m256i),
                    _mm256_loadu_si256(p.add(64 * i + 32) as *const __m256i),
                )
            };
            fold = _mm256_xor_si256(fold, _mm256_xor_si256(d0, d1));
            // one query a round: 8 pairs, 4 per record vector, each with
            // its own multiplier so that no product is shared
            for _ in 0..k {
                for (j, a) in acc.iter_mut().enumerate() {
                    let d = if j < 4 { d0 } else { d1 };
                    *a = _mm256_add_epi32(*a, _mm256_madd_epi16(d, q[j % 4]));
                }
                // the multipliers change as far as the compiler knows, so
                // the products are not shared between rounds either
                for q in q.iter_mut() {
                    // SAFETY: emits no instruction.
                    unsafe {
                        std::arch::asm!(
                            "/* {0} */",
                            inout(ymm_reg) * q,
                            options(nomem, nostack, preserves_flags)
                        )
                    };
                }
            }
        }
    }
    let s = acc
        .iter()
        .fold(_mm256_setzero_si256(), |s, &x| _mm256_add_epi32(s, x));
    let (mut words, mut sums) = ([0u64; 4], [0u32; 8]);
    // SAFETY: `words` and `sums` are 32 bytes each, one 256-bit store each.
    unsafe {
        _mm256_storeu_si256(words.as_mut_ptr() as *mut __m256i, fold);
        _mm256_storeu_si256(sums.as_mut_ptr() as *mut __m256i, s);
    }
    words.iter().fold(0, |x, w| x ^ w)
        ^ u64::from(sums.iter().fold(0u32, |a, &v| a.wrapping_add(v)))
}

/// The core clock: a chain of dependent register-register adds retires
/// one add per cycle (add-immediate chains can be folded at rename on
/// recent cores, so the addend is a register).
#[cfg(target_arch = "x86_64")]
fn clock_hz() -> f64 {
    const N: u64 = 4_000_000;
    let t = Stopwatch::start();
    let mut x: u64 = 1;
    for _ in 0..N {
        // SAFETY: plain register arithmetic; no memory, stack or flags
        // the compiler relies on.
        unsafe {
            std::arch::asm!(
                "add {x}, {y}", "add {x}, {y}", "add {x}, {y}", "add {x}, {y}",
                "add {x}, {y}", "add {x}, {y}", "add {x}, {y}", "add {x}, {y}",
                x = inout(reg) x,
                y = in(reg) 3u64,
                options(nomem, nostack),
            );
        }
    }
    std::hint::black_box(x);
    (8 * N) as f64 / t.seconds()
}

/// An empty barrier the compiler cannot see through: keeps the timed loops
/// from being folded, since their operands never change.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn barrier() {
    // SAFETY: emits no instruction.
    unsafe { std::arch::asm!("", options(nomem, nostack, preserves_flags)) };
}

/// `iters` rounds of CHAINS independent `vpdpbusd`; returns how many ran.
///
/// # Safety
/// The caller must have checked avx512f, avx512bw and avx512vnni.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn dpbusd_zmm(iters: usize) -> usize {
    let u = _mm512_set1_epi32(std::hint::black_box(0x0102_0304));
    let d = _mm512_set1_epi32(std::hint::black_box(0x0506_0708));
    let mut a = [_mm512_setzero_si512(); CHAINS];
    for _ in 0..iters {
        for x in a.iter_mut() {
            *x = _mm512_dpbusd_epi32(*x, u, d);
        }
        barrier();
    }
    let s = a
        .iter()
        .fold(_mm512_setzero_si512(), |s, &x| _mm512_add_epi32(s, x));
    std::hint::black_box(s);
    iters * CHAINS
}

/// `iters` rounds of MADD_CHAINS independent `vpmaddwd` + `vpaddd` (zmm).
///
/// # Safety
/// The caller must have checked avx512f and avx512bw.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn maddwd_zmm(iters: usize) -> usize {
    let mut u = _mm512_set1_epi32(std::hint::black_box(0x0102_0304));
    // a record vector per chain, so the products are not shared
    let d: [__m512i; MADD_CHAINS] =
        std::array::from_fn(|c| _mm512_set1_epi16(std::hint::black_box(c as i16 + 5)));
    let mut a = [_mm512_setzero_si512(); MADD_CHAINS];
    for _ in 0..iters {
        for (x, &d) in a.iter_mut().zip(&d) {
            *x = _mm512_add_epi32(*x, _mm512_madd_epi16(u, d));
        }
        // the multiplier changes as far as the compiler knows, so the
        // products are recomputed every round
        // SAFETY: emits no instruction.
        unsafe {
            std::arch::asm!("/* {0} */", inout(zmm_reg) u, options(nomem, nostack, preserves_flags))
        };
    }
    let s = a
        .iter()
        .fold(_mm512_setzero_si512(), |s, &x| _mm512_add_epi32(s, x));
    std::hint::black_box(s);
    iters * MADD_CHAINS
}

/// `iters` rounds of MADD_CHAINS independent `vpmaddwd` + `vpaddd` (ymm).
///
/// # Safety
/// The caller must have checked avx2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn maddwd_ymm(iters: usize) -> usize {
    // a record vector per chain, so the products are not shared
    let d = std::array::from_fn(|c| _mm256_set1_epi16(std::hint::black_box(c as i16 + 5)));
    pairs_ymm(iters, d, |u, d| _mm256_madd_epi16(u, d))
}

/// `iters` rounds of MADD_CHAINS independent `vpmulld` + `vpaddd` (ymm):
/// 8 u8 × u32 multiply-accumulates per pair, as many as `vpmaddwd` on
/// two 16-bit halves ([`maddwd_ymm`]).
///
/// # Safety
/// The caller must have checked avx2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn mulld_ymm(iters: usize) -> usize {
    let d = std::array::from_fn(|c| _mm256_set1_epi32(std::hint::black_box(c as i32 + 5)));
    pairs_ymm(iters, d, |u, d| _mm256_mullo_epi32(u, d))
}

/// `iters` rounds of `mul` + `vpaddd` on MADD_CHAINS independent chains,
/// chain c multiplying its own vector `d[c]` (so that no product is
/// shared) by a multiplier the compiler cannot see to be constant.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2")]
fn pairs_ymm(
    iters: usize,
    d: [__m256i; MADD_CHAINS],
    mul: impl Fn(__m256i, __m256i) -> __m256i,
) -> usize {
    let mut u = _mm256_set1_epi32(std::hint::black_box(0x0102_0304));
    let mut a = [_mm256_setzero_si256(); MADD_CHAINS];
    for _ in 0..iters {
        for (x, &d) in a.iter_mut().zip(&d) {
            *x = _mm256_add_epi32(*x, mul(u, d));
        }
        // the multiplier changes as far as the compiler knows, so the
        // products are recomputed every round
        // SAFETY: emits no instruction.
        unsafe {
            std::arch::asm!("/* {0} */", inout(ymm_reg) u, options(nomem, nostack, preserves_flags))
        };
    }
    let s = a
        .iter()
        .fold(_mm256_setzero_si256(), |s, &x| _mm256_add_epi32(s, x));
    std::hint::black_box(s);
    iters * MADD_CHAINS
}

/// Whether `vpmulld` + `vpaddd` runs at least [`MULLD_AS_FAST`] of the
/// rate of `vpmaddwd` + `vpaddd` on this core (ymm, from registers, the
/// best of three alternating rounds of about 0.3 ms each): on AMD Zen 4
/// both run at the same rate; Intel cores split `vpmulld` into two µops
/// and run it at about half the rate.
#[cfg(target_arch = "x86_64")]
pub(super) fn mulld_as_fast() -> bool {
    if !super::super::avx2() {
        return false;
    }
    let (mut madd, mut mulld) = (0f64, 0f64);
    for _ in 0..3 {
        madd = madd.max(per_second(|| {
            // SAFETY: avx2 was detected.
            unsafe { maddwd_ymm(ITERS / 8) }
        }));
        mulld = mulld.max(per_second(|| {
            // SAFETY: avx2 was detected.
            unsafe { mulld_ymm(ITERS / 8) }
        }));
    }
    mulld >= MULLD_AS_FAST * madd
}

/// What `run` counts, per second of the calling thread's CPU time.
#[cfg(target_arch = "x86_64")]
fn per_second(run: impl FnOnce() -> usize) -> f64 {
    let t = Stopwatch::start();
    let n = run();
    n as f64 / t.seconds()
}

/// The share of the `vpmaddwd` pair rate from which `vpmulld` counts as
/// as fast ([`mulld_as_fast`]): well below 1, so that timing noise does
/// not flip the choice on a core where both run alike, and well above the
/// half of a core that splits `vpmulld`.
#[cfg(target_arch = "x86_64")]
const MULLD_AS_FAST: f64 = 0.9;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::test_util::{kernels, lcg};

    /// The streaming loops read every line: with no multiplies their
    /// result is the xor of the buffer's 64-bit words, and a batch only
    /// adds the accumulators' sum, which changes with the data.
    #[test]
    fn overlap_loops_read_every_line() {
        let mut s = 7;
        let buf: Vec<u8> = (0..64 * 300 + 17).map(|_| lcg(&mut s) as u8).collect();
        let whole = &buf[..64 * 300];
        let xor = whole.chunks_exact(8).fold(0u64, |x, w| {
            x ^ u64::from_le_bytes(w.try_into().expect("8 bytes"))
        });
        #[cfg(target_arch = "x86_64")]
        for k in kernels("overlap_loops_read_every_line") {
            let run: fn(&[u8], usize, usize, bool) -> u64 = match k {
                // SAFETY: `kernels` yields only variants this CPU has.
                Kernel::Avx512Vnni => |b, k, r, p| unsafe { stream_dpbusd(b, k, r, p) },
                // SAFETY: as above.
                Kernel::Avx2 => |b, k, r, p| unsafe { stream_maddwd(b, k, r, p) },
                _ => continue,
            };
            assert_eq!(run(whole, 0, 1, true), xor, "{k:?}");
            assert_eq!(run(whole, 0, 2, false), 0, "{k:?}: two walks cancel");
            let mut other = whole.to_vec();
            other[64 * 299 + 3] ^= 1;
            for batch in [1, 3, 4, 7] {
                assert_ne!(
                    run(whole, batch, 1, true),
                    run(&other, batch, 1, true),
                    "{k:?} k={batch}"
                );
            }
            let c = overlap_ceiling_of(k, &buf, 4).expect("a variant with a ceiling");
            assert_eq!((c.batch, c.bytes, c.kernel), (4, 64 * 300, k.name()));
            assert!(c.fraction() > 0.0 && c.fraction().is_finite(), "{c:?}");
        }
        assert_eq!(overlap_ceiling_of(Kernel::Scalar, &buf, 4), None);
        assert_eq!(overlap_ceiling_of(Kernel::selected(), &[0; 63], 4), None);
    }

    #[test]
    fn cached_pass_times_every_simd_variant() {
        assert_eq!(cached_pass_of(Kernel::Scalar, 4), None);
        assert_eq!(cached_pass_of(Kernel::selected(), 0), None);
        for k in kernels("cached_pass_times_every_simd_variant") {
            if k == Kernel::Scalar {
                continue;
            }
            for batch in [1, 5] {
                let c = cached_pass_of(k, batch).expect("a SIMD variant this CPU has");
                assert_eq!(
                    (c.kernel, c.batch, c.bytes),
                    (k.name(), batch, CACHED_ROWS * CACHED_COLS)
                );
                assert!(c.fraction() > 0.0 && c.fraction().is_finite(), "{c:?}");
            }
        }
    }

    #[test]
    fn every_simd_variant_reports_a_peak() {
        assert_eq!(mac_peak_of(Kernel::Scalar), None);
        for k in kernels("every_simd_variant_reports_a_peak") {
            if k == Kernel::Scalar {
                continue;
            }
            let p = mac_peak_of(k).expect("a SIMD variant this CPU has");
            assert_eq!(p.kernel, k.name());
            assert!(p.macs_per_second > 0.0 && p.clock_hz > 0.0, "{p:?}");
            assert!(p.macs_per_instruction == 8 || p.macs_per_instruction == 16);
        }
    }
}
