//! Memory helpers for the buffers the server streams: transparent-huge-page
//! advice (`madvise`) for the database and the hint rows, a zeroed
//! allocation advised before first touch, software-prefetch hints, the
//! process's peak resident memory (`getrusage`) and the calling thread's
//! CPU time (`clock_gettime`), and how many misses to DRAM one core keeps
//! in flight ([`miss_parallelism`], for `pir-bench`).
//!
//! A leaf module: it uses nothing else from the crate, so every other module
//! (the record and digit storage, packing, the kernels) can depend on it.
//! Besides the crate-private `kernel` it is the only module with `unsafe`:
//! the `madvise`, `getrusage` and `clock_gettime` calls and the prefetch
//! instructions, hints
//! that never change memory contents.

#![allow(unsafe_code)]

/// Large read-mostly buffers (the database, the hint rows) are scanned once
/// per answer; with 4 KiB pages a 1 GiB scan crosses 262,144 pages, each a
/// TLB miss that the hardware prefetcher cannot run ahead of. Below this
/// size huge pages do not matter.
const HUGE_PAGE_MIN: usize = 4 << 20;
/// Transparent huge page size on x86-64 and aarch64 Linux.
const HUGE_PAGE: usize = 2 << 20;

/// How the operating system was asked to back a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageAdvice {
    /// Not attempted (small buffer, or not Linux).
    Skipped,
    /// The kernel accepted the request.
    Accepted,
    /// The kernel refused (e.g. THP disabled, or an old kernel without
    /// `MADV_COLLAPSE`); the buffer works as before, with 4 KiB pages.
    Refused,
}

/// The 2 MiB-aligned interior of `buf` as (address, length), if any.
/// `PIR_HUGE_PAGES=0` turns the advice off (for A/B benchmarks).
fn huge_range<T>(buf: &mut [T]) -> Option<(usize, usize)> {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let on = *ON.get_or_init(|| std::env::var("PIR_HUGE_PAGES").map_or(true, |v| v != "0"));
    let bytes = std::mem::size_of_val(buf);
    if !on || bytes < HUGE_PAGE_MIN {
        return None;
    }
    let p = buf.as_mut_ptr() as usize;
    let start = p.checked_add(HUGE_PAGE - 1)? & !(HUGE_PAGE - 1);
    let end = (p + bytes) & !(HUGE_PAGE - 1);
    (end > start).then_some((start, end - start))
}

#[cfg(target_os = "linux")]
fn madvise(range: (usize, usize), advice: libc::c_int) -> PageAdvice {
    // SAFETY: `range` lies inside a live allocation we hold a unique borrow
    // of (`huge_range`), aligned to 2 MiB. MADV_HUGEPAGE and MADV_COLLAPSE are
    // hints about backing only: they never change the contents or the
    // validity of the mapping (a collapse copies the data into a huge page
    // and remaps it atomically), so no Rust-visible memory changes.
    let r = unsafe { libc::madvise(range.0 as *mut libc::c_void, range.1, advice) };
    if r == 0 {
        PageAdvice::Accepted
    } else {
        PageAdvice::Refused
    }
}

/// Asks for transparent huge pages for the pages of `buf` that are not yet
/// touched: call it right after allocating a zeroed buffer and before
/// writing it (`MADV_HUGEPAGE`). A hint; no-op off Linux.
pub fn advise_huge_pages<T>(buf: &mut [T]) -> PageAdvice {
    match huge_range(buf) {
        #[cfg(target_os = "linux")]
        Some(r) => madvise(r, libc::MADV_HUGEPAGE),
        _ => PageAdvice::Skipped,
    }
}

/// Moves an already written buffer onto huge pages now (`MADV_HUGEPAGE`
/// then `MADV_COLLAPSE`, Linux ≥ 6.1): a copy of the buffer, 2 MiB at a
/// time, so no second buffer is ever allocated. Pages already huge are
/// left alone. A hint; no-op off Linux.
pub fn collapse_huge_pages<T>(buf: &mut [T]) -> PageAdvice {
    match huge_range(buf) {
        #[cfg(target_os = "linux")]
        Some(r) => {
            madvise(r, libc::MADV_HUGEPAGE);
            madvise(r, libc::MADV_COLLAPSE)
        }
        _ => PageAdvice::Skipped,
    }
}

/// A zeroed vector of `len` integers whose pages are advised to be huge
/// before they are first touched (see [`advise_huge_pages`]).
pub fn zeroed_huge<T: Copy + Default>(len: usize) -> Vec<T> {
    // `vec![0; n]` of an integer type is a zeroed allocation: for large n,
    // fresh untouched pages, so the advice applies when they are first
    // written.
    let mut v = vec![T::default(); len];
    advise_huge_pages(&mut v);
    v
}

/// Prefetch hint for `data[index]` (no effect if out of range or on other
/// architectures; never faults).
#[inline]
pub fn prefetch<T>(data: &[T], index: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if index < data.len() {
            // SAFETY: prefetch is a hint that cannot fault; the address is
            // inside `data` anyway.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    data.as_ptr().add(index) as *const i8,
                )
            };
        }
    }
    let _ = (data, index);
}

/// Prefetch hints into L2 for every cache line of `data` (no effect on other
/// architectures; never faults).
#[inline]
pub(crate) fn prefetch_l2(data: &[u8]) {
    prefetch_lines_l2(data, 0..data.len().div_ceil(64));
}

/// Prefetch hints into L2 for the 64-byte lines `lines` of `data` (line i
/// at byte 64i): the loop's own check is the range, with no bounds check
/// per line (the hot loops of the SimplePIR kernels issue these between
/// their multiplies). Lines past the end of `data` are not touched.
#[inline(always)]
pub(crate) fn prefetch_lines_l2(data: &[u8], lines: std::ops::Range<usize>) {
    #[cfg(target_arch = "x86_64")]
    {
        let end = lines.end.min(data.len().div_ceil(64));
        let p = data.as_ptr();
        for line in lines.start..end {
            // SAFETY: prefetch is a hint that cannot fault; line < end,
            // so the address is inside `data` anyway.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(
                    p.add(64 * line) as *const i8,
                )
            };
        }
    }
    let _ = (data, lines);
}

/// Prefetch hints into L2 for the first two lines of every 4 KiB page
/// that starts in `[p + ahead, p + ahead + len)`: the pages a stream at
/// `p` reads when it is `ahead` bytes further. The hardware streamer
/// stops at every page boundary; a request for a page's first lines
/// restarts it there and leaves the rest of the page to it (the
/// single-query `vpdpbusd` pass and the DoublePIR pass, see
/// `docs/benchmarks.md`). The addresses may lie outside any allocation:
/// a prefetch is a hint and never faults.
#[inline(always)]
pub(crate) fn prefetch_page_starts(p: *const u8, len: usize, ahead: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let at = p as usize;
        // offsets from p of the pages starting in [at + ahead, at + ahead + len)
        let mut off = (at + ahead).next_multiple_of(4096) - at;
        while off < ahead + len {
            for line in [off, off + 64] {
                // SAFETY: a prefetch is a hint that cannot fault, whatever
                // the address (`wrapping_add` names it without claiming it
                // is inside an allocation).
                unsafe {
                    std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(
                        p.wrapping_add(line) as *const i8,
                    )
                };
            }
            off += 4096;
        }
    }
    let _ = (p, len, ahead);
}

/// CPU time the calling thread has run so far, in seconds
/// (`CLOCK_THREAD_CPUTIME_ID`), or `None` where it is not available. On a
/// shared machine a timing in CPU time leaves out the time the thread
/// waited for a core, which wall time includes.
pub fn thread_cpu_seconds() -> Option<f64> {
    #[cfg(target_os = "linux")]
    {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `clock_gettime` writes one `timespec` into `t`, which we
        // pass by unique pointer; the clock id is a valid constant.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
        (rc == 0).then_some(t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// Peak resident memory of this process so far in bytes (`getrusage`'s
/// `ru_maxrss`), or `None` where it is not available (not Linux, or the
/// call failed).
pub fn peak_rss_bytes() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `getrusage` writes one `rusage` into the zeroed struct we
        // pass by unique pointer and reads nothing else.
        let mut r: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: as above; RUSAGE_SELF is a valid `who`.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) };
        // Linux reports ru_maxrss in KiB.
        (rc == 0).then(|| r.ru_maxrss.max(0) as u64 * 1024)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// The measurement of [`miss_parallelism`] (native targets only: it
/// needs a clock, which wasm32 in a browser has only through JavaScript).
#[cfg(not(target_arch = "wasm32"))]
mod misses {
    use crate::mem::{advise_huge_pages, thread_cpu_seconds, PageAdvice};

    /// Bytes of [`miss_parallelism`]'s buffer: eight times the largest L3 we
    /// run on (32 MiB), so that a chased line comes from DRAM.
    const MISS_BUFFER_BYTES: usize = 256 << 20;

    /// How many independent chains [`miss_parallelism`] times. Beyond about
    /// 48 a chain step's few instructions times the chains fill the reorder
    /// window of the cores we run on (224–512 entries), which then limits the
    /// loads in flight before the miss buffers do.
    pub const MISS_CHAINS: [usize; 10] = [1, 2, 4, 8, 12, 16, 20, 24, 32, 48];

    /// Lines each timed round visits over all its chains: 2^20, about 150 ms
    /// at 150 ns a line for one chain, 8 ms at 9 GB/s.
    const MISS_VISITS: usize = 1 << 20;

    /// Timed rounds per chain count, the best kept: on a shared guest the
    /// same chase can move by half from one round to the next.
    const MISS_ROUNDS: usize = 5;

    /// How many cache-line misses to DRAM one core keeps in flight, measured
    /// as independent pointer chases over random lines of a buffer far larger
    /// than the last-level cache (see [`miss_parallelism`]). A pass that
    /// reads a line every `t` ns through L1 misses needs latency ÷ `t` of
    /// them in flight (Little's law), whatever its software prefetches do;
    /// `docs/benchmarks.md` compares that with what the batched SimplePIR
    /// pass needs at its cache-resident rate.
    #[derive(Clone, Debug, PartialEq)]
    pub struct MissParallelism {
        /// Bytes of the chased buffer.
        pub buffer_bytes: usize,
        /// Whether the buffer was advised onto huge pages (with 4 KiB pages a
        /// random line is also a TLB miss, whose page walk adds latency).
        pub huge_pages: PageAdvice,
        /// One chain: nanoseconds per line (the load-to-use latency of a line
        /// from DRAM), best of the rounds.
        pub one_chain_ns: f64,
        /// (chains, GB/s of lines fetched), best of the rounds, for each of
        /// [`MISS_CHAINS`].
        pub chains_gb_s: Vec<(usize, f64)>,
    }

    impl MissParallelism {
        /// The most GB/s of random lines any chain count fetched.
        pub fn best_gb_s(&self) -> f64 {
            self.chains_gb_s.iter().map(|c| c.1).fold(0.0, f64::max)
        }

        /// Lines in flight at the best rate (Little's law: lines per ns ×
        /// the one-chain latency).
        pub fn lines_in_flight(&self) -> f64 {
            self.best_gb_s() / 64.0 * self.one_chain_ns
        }
    }

    /// Measures [`MissParallelism`] on the calling thread over a 256 MiB
    /// buffer (about two seconds in all). Timed in the thread's CPU time where
    /// the platform has it.
    pub fn miss_parallelism() -> MissParallelism {
        miss_parallelism_over(MISS_BUFFER_BYTES, MISS_VISITS, MISS_ROUNDS)
    }

    /// [`miss_parallelism`] over `bytes` (whole lines), `visits` lines per
    /// round, best of `rounds`.
    fn miss_parallelism_over(bytes: usize, visits: usize, rounds: usize) -> MissParallelism {
        let (buf, order, huge_pages) = line_cycle(bytes / 64);
        let lines = buf.len() / 8;
        let seconds = || thread_cpu_seconds().unwrap_or_else(wall_seconds);
        let best = |chains: usize| {
            // chain c starts at line order position c·lines/chains, so no two
            // chains share a line within a round while steps ≤ lines/chains
            let steps = (visits / chains).min(lines / chains).max(1);
            let starts = chain_starts(&order, chains);
            let mut t = f64::INFINITY;
            for _ in 0..rounds.max(1) {
                let t0 = seconds();
                std::hint::black_box(chase(&buf, &starts, steps));
                t = t.min(seconds() - t0);
            }
            (steps * chains, t.max(1e-9))
        };
        let (n1, t1) = best(1);
        let chains_gb_s = MISS_CHAINS
            .iter()
            .map(|&c| {
                let (n, t) = if c == 1 { (n1, t1) } else { best(c) };
                (c, n as f64 * 64.0 / t / 1e9)
            })
            .collect();
        MissParallelism {
            buffer_bytes: lines * 64,
            huge_pages,
            one_chain_ns: t1 / n1 as f64 * 1e9,
            chains_gb_s,
        }
    }

    /// Wall-clock seconds since the first call (the fallback clock of
    /// [`miss_parallelism`]).
    fn wall_seconds() -> f64 {
        static T0: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        T0.get_or_init(std::time::Instant::now)
            .elapsed()
            .as_secs_f64()
    }

    /// A buffer of `lines` 64-byte lines (8 words each) whose first words
    /// link every line into one cycle in a random order: word 8i holds the
    /// line that follows line i. The order is a Fisher–Yates shuffle from a
    /// fixed public seed (the measurement needs no secret, only an order the
    /// hardware prefetchers cannot follow). Returns the buffer, the order
    /// (line 0 first) and the page advice.
    fn line_cycle(lines: usize) -> (Vec<u64>, Vec<u32>, PageAdvice) {
        let lines = lines.max(1);
        let mut buf = vec![0u64; 8 * lines];
        let advice = advise_huge_pages(&mut buf);
        let mut order: Vec<u32> = (0..lines as u32).collect();
        // xorshift64*, a fixed seed
        let mut s = 0x2545_f491_4f6c_dd1du64;
        for i in (2..lines).rev() {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            let r = s.wrapping_mul(0x2545_f491_4f6c_dd1d);
            // a uniform index in 1..=i (Lemire's multiply-high), keeping
            // line 0 first
            let j = 1 + ((u128::from(r) * i as u128) >> 64) as usize;
            order.swap(i, j);
        }
        for (k, &line) in order.iter().enumerate() {
            buf[8 * line as usize] = u64::from(order[(k + 1) % lines]);
        }
        (buf, order, advice)
    }

    /// The lines at which `chains` chains start: positions 0, L/c, 2L/c, …
    /// of the cycle `order` of [`line_cycle`].
    fn chain_starts(order: &[u32], chains: usize) -> Vec<usize> {
        let gap = (order.len() / chains.max(1)).max(1);
        (0..chains.max(1))
            .map(|c| order[(c * gap) % order.len().max(1)] as usize)
            .collect()
    }

    /// `steps` steps of every chain from `starts`, the chains interleaved so
    /// that their loads are independent; returns the lines reached, xored.
    fn chase(buf: &[u64], starts: &[usize], steps: usize) -> usize {
        let mut cur = starts.to_vec();
        for _ in 0..steps {
            for c in cur.iter_mut() {
                *c = buf[8 * *c] as usize;
            }
        }
        cur.iter().fold(0, |x, &c| x ^ c)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn line_cycle_links_every_line_once() {
            for lines in [1, 2, 3, 64, 1000] {
                let (buf, order, _) = line_cycle(lines);
                assert_eq!(order[0], 0);
                let mut seen = vec![false; lines];
                let mut line = 0usize;
                for _ in 0..lines {
                    assert!(!seen[line], "line {line} reached twice ({lines} lines)");
                    seen[line] = true;
                    line = buf[8 * line] as usize;
                    assert!(line < lines);
                }
                assert_eq!(line, 0, "the walk closes after {lines} lines");
                // only the first word of a line is written
                assert!(buf.iter().enumerate().all(|(i, &w)| i % 8 == 0 || w == 0));
            }
        }

        #[test]
        fn chains_start_evenly_and_follow_the_cycle() {
            let (buf, order, _) = line_cycle(1000);
            let starts = chain_starts(&order, 4);
            assert_eq!(starts.len(), 4);
            assert_eq!(starts[0], 0);
            // 250 steps from each start reach the next start
            let walk = |mut l: usize, n: usize| {
                for _ in 0..n {
                    l = buf[8 * l] as usize;
                }
                l
            };
            for c in 0..4 {
                assert_eq!(walk(starts[c], 250), starts[(c + 1) % 4]);
            }
            let ends: Vec<_> = starts.iter().map(|&s| walk(s, 7)).collect();
            assert_eq!(chase(&buf, &starts, 7), ends.iter().fold(0, |x, &e| x ^ e));
        }

        #[test]
        fn miss_parallelism_reports_every_chain_count() {
            let m = miss_parallelism_over(1 << 20, 1 << 12, 1);
            assert_eq!(m.buffer_bytes, 1 << 20);
            assert_eq!(
                m.chains_gb_s.iter().map(|c| c.0).collect::<Vec<_>>(),
                MISS_CHAINS
            );
            assert!(m.one_chain_ns > 0.0 && m.one_chain_ns.is_finite());
            assert!(m.chains_gb_s.iter().all(|c| c.1 > 0.0 && c.1.is_finite()));
            assert!(m.lines_in_flight() > 0.0 && m.best_gb_s() >= m.chains_gb_s[0].1);
        }
    }
}
#[cfg(not(target_arch = "wasm32"))]
pub use misses::{miss_parallelism, MissParallelism, MISS_CHAINS};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_range_is_the_aligned_interior() {
        let mut small = vec![0u8; HUGE_PAGE_MIN - 1];
        assert_eq!(huge_range(&mut small), None);
        let mut v = vec![0u8; 3 * HUGE_PAGE + 12345];
        let p = v.as_ptr() as usize;
        let (start, len) = huge_range(&mut v).expect("large enough");
        assert_eq!(start % HUGE_PAGE, 0);
        assert_eq!(len % HUGE_PAGE, 0);
        assert!(start >= p && start - p < HUGE_PAGE);
        assert!(start + len <= p + v.len() && p + v.len() - (start + len) < HUGE_PAGE);
    }

    #[test]
    fn huge_page_advice_keeps_contents() {
        // zeroed before and after the advice, writable afterwards
        let mut v = zeroed_huge::<u32>(3 << 20);
        assert!(v.iter().all(|&x| x == 0));
        for (i, x) in v.iter_mut().enumerate() {
            *x = (i as u32).wrapping_mul(2654435761);
        }
        // collapsing written pages must not change a byte, whatever the
        // kernel answers
        let _ = collapse_huge_pages(&mut v);
        assert!(v
            .iter()
            .enumerate()
            .all(|(i, &x)| x == (i as u32).wrapping_mul(2654435761)));
        let mut small = vec![7u8; 100];
        assert_eq!(collapse_huge_pages(&mut small), PageAdvice::Skipped);
        assert_eq!(small, vec![7u8; 100]);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn peak_rss_grows_with_a_touched_buffer() {
        let before = peak_rss_bytes().expect("getrusage on Linux");
        assert!(before > 0);
        let mut v = vec![0u8; 64 << 20];
        for x in v.iter_mut().step_by(4096) {
            *x = 1;
        }
        std::hint::black_box(&v);
        let after = peak_rss_bytes().expect("getrusage on Linux");
        assert!(after >= before.max(64 << 20), "{before} -> {after}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn thread_cpu_time_advances_with_work() {
        let t0 = thread_cpu_seconds().expect("clock_gettime on Linux");
        let mut x = 1u64;
        while thread_cpu_seconds().expect("clock_gettime") < t0 + 0.01 {
            x = std::hint::black_box(x.wrapping_mul(3));
        }
        assert!(thread_cpu_seconds().unwrap() >= t0 + 0.01);
    }
}
