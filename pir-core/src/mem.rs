//! Memory helpers for the buffers the server streams: transparent-huge-page
//! advice (`madvise`) for the database and the hint rows, a zeroed
//! allocation advised before first touch, software-prefetch hints, and the
//! process's peak resident memory (`getrusage`) and the calling thread's
//! CPU time (`clock_gettime`).
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
