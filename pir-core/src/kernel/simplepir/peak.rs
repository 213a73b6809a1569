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
        let (instruction, per, run): (_, u32, fn() -> usize) = match k {
            Kernel::Avx512Vnni if super::avx512_vnni() => ("vpdpbusd zmm", 16, || {
                // SAFETY: avx512f, avx512bw and avx512vnni were detected.
                unsafe { dpbusd_zmm(ITERS) }
            }),
            Kernel::Avx512Bw if super::avx512() => ("vpmaddwd + vpaddd zmm", 16, || {
                // SAFETY: avx512f and avx512bw were detected.
                unsafe { maddwd_zmm(ITERS) }
            }),
            Kernel::Avx2 if super::super::avx2() => ("vpmaddwd + vpaddd ymm", 8, || {
                // SAFETY: avx2 was detected.
                unsafe { maddwd_ymm(ITERS) }
            }),
            _ => return None,
        };
        let mut best = 0f64;
        let mut clock = 0f64;
        for _ in 0..3 {
            clock = clock.max(clock_hz());
            let t = Stopwatch::start();
            let n = run();
            let rate = n as f64 * per as f64 / t.seconds();
            best = best.max(rate);
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
    let mut u = _mm256_set1_epi32(std::hint::black_box(0x0102_0304));
    // a record vector per chain, so the products are not shared
    let d: [__m256i; MADD_CHAINS] =
        std::array::from_fn(|c| _mm256_set1_epi16(std::hint::black_box(c as i16 + 5)));
    let mut a = [_mm256_setzero_si256(); MADD_CHAINS];
    for _ in 0..iters {
        for (x, &d) in a.iter_mut().zip(&d) {
            *x = _mm256_add_epi32(*x, _mm256_madd_epi16(u, d));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::test_util::kernels;

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
