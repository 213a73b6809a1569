//! Helpers of the kernel tests: a deterministic generator, and which SIMD
//! variants this CPU can run.
//!
//! A test comparing a SIMD variant with its scalar twin skips the variant
//! (with a note on stderr) when the CPU lacks its features, unless a switch
//! demands it; then the test fails instead:
//!
//! * `TEST_REQUIRE_AVX2=1`: every AVX2 variant (AVX2);
//! * `TEST_REQUIRE_AVX512=1`: every AVX-512 variant (AVX-512F and
//!   AVX-512BW, and AVX-512 VNNI for the VNNI variants of SimplePIR and
//!   DoublePIR).
//!
//! `.ci/run` sets each switch when `/proc/cpuinfo` lists the features, so
//! CI cannot pass with a variant silently untested.

use super::Kernel;

/// The generator every kernel test draws its inputs from.
pub(crate) fn lcg(s: &mut u64) -> u64 {
    *s = s
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *s >> 16
}

/// Whether the switch `var` is on (set, non-empty, not `0`).
fn required(var: &str) -> bool {
    std::env::var_os(var).is_some_and(|v| !v.is_empty() && v != "0")
}

/// `have`, after failing the test when the switch `var` (`demanded`: on)
/// demands the missing `feature`, or noting that `what` skips it.
fn check(have: bool, var: &str, demanded: bool, feature: &str, what: &str) -> bool {
    if !have {
        assert!(
            !demanded,
            "{var} is set but this CPU lacks {feature}: {what} cannot test it"
        );
        eprintln!("{what}: {feature} variants skipped, not on this machine");
    }
    have
}

/// Whether the AVX2 variants can run here (see the module docs).
pub(crate) fn has_avx2(what: &str) -> bool {
    #[cfg(target_arch = "x86_64")]
    let have = super::avx2();
    #[cfg(not(target_arch = "x86_64"))]
    let have = false;
    check(
        have,
        "TEST_REQUIRE_AVX2",
        required("TEST_REQUIRE_AVX2"),
        "AVX2",
        what,
    )
}

/// Whether the AVX-512F/BW variants can run here (see the module docs).
pub(crate) fn has_avx512(what: &str) -> bool {
    #[cfg(target_arch = "x86_64")]
    let have = super::avx512();
    #[cfg(not(target_arch = "x86_64"))]
    let have = false;
    check(
        have,
        "TEST_REQUIRE_AVX512",
        required("TEST_REQUIRE_AVX512"),
        "AVX-512F/BW",
        what,
    )
}

/// Whether the AVX-512 VNNI variants can run here (see the module docs).
pub(crate) fn has_avx512_vnni(what: &str) -> bool {
    #[cfg(target_arch = "x86_64")]
    let have = super::avx512_vnni();
    #[cfg(not(target_arch = "x86_64"))]
    let have = false;
    check(
        have,
        "TEST_REQUIRE_AVX512",
        required("TEST_REQUIRE_AVX512"),
        "AVX-512 VNNI",
        what,
    )
}

/// Every [`Kernel`] variant this CPU runs, after failing the test when a
/// switch demands one it lacks.
pub(crate) fn kernels(what: &str) -> Vec<Kernel> {
    let demanded = [
        (has_avx2(what), Kernel::Avx2),
        (has_avx512(what), Kernel::Avx512Bw),
        (has_avx512_vnni(what), Kernel::Avx512Vnni),
    ];
    let avail = Kernel::available();
    for (have, k) in demanded {
        assert_eq!(have, avail.contains(&k), "{k:?} detection disagrees");
    }
    avail
}

#[test]
fn a_missing_feature_skips_unless_demanded() {
    // (a switch no one sets; the real ones may be set by CI)
    assert!(!required("PIR_CORE_TEST_UTIL_UNSET_SWITCH"));
    assert!(check(true, "X", true, "a feature", "this test"));
    assert!(check(true, "X", false, "a feature", "this test"));
    assert!(!check(false, "X", false, "a feature", "this test"));
}

#[test]
#[should_panic(expected = "X is set but this CPU lacks a feature")]
fn a_demanded_missing_feature_fails() {
    check(false, "X", true, "a feature", "this test");
}
