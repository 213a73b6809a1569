use super::QuadSums;
use std::arch::x86_64::*;

/// Most 32-column steps before the 32-bit accumulators could overflow:
/// a step is one `vpdpwssd` per row and limb, which adds two products
/// |x·l| ≤ 2^14·1904 to each lane (its zmm covers the chunk; x: signed
/// digit |x| ≤ 2^14; limbs |l| ≤ 2^10 below the top one and
/// [`super::TOP_LIMB_MAX`] = 1904 at the top), so 34 steps stay below
/// 2^31 (34 · 2 · 2^14 · 1904 ≈ 2^30.96). A block has at most
/// BLOCK_COLS / 32 = 32 steps, so a quad never needs an intermediate
/// flush.
const FLUSH: usize = 34;
const _: () = assert!(crate::digits::BLOCK_COLS / 32 <= FLUSH);
const _: () = assert!(FLUSH as u64 * 2 * (1 << 14) * super::TOP_LIMB_MAX < 1 << 31);
const _: () = assert!(FLUSH as u64 * 2 * (1 << 14) * (1 << 10) < 1 << 31);

/// Sum of the 16 i32 lanes of `v` as 8 i64 lanes.
#[inline]
#[target_feature(enable = "avx512f")]
fn widen(v: __m512i) -> __m512i {
    let lo = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(v));
    let hi = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64::<1>(v));
    _mm512_add_epi64(lo, hi)
}

/// DoublePIR on one quad with `vpdpwssd`: `limbs` = the five signed
/// limbs of the block's c2 mod Q2 (`super::limbs_of`), interleaved per
/// chunk, so Σ x·c2 = Σ_t 2^{11t}·Σ x·l_t, added to `acc` as
/// [`QuadSums`] lays it out. Each step loads the five limb vectors once
/// for the four rows: 20 accumulators + 5 limbs + 1 digit vector = 26
/// zmm registers, and 20 `vpdpwssd` per 256 bytes of digits (24 with
/// three unsigned limbs per prime).
///
/// # Safety
/// avx512f, avx512bw and avx512vnni must be available; `quad` holds
/// 4·w digits in chunk order and `limbs` 5·w entries, w a multiple of
/// 32 and at most 32·FLUSH.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(super) unsafe fn quad_limbs(quad: &[i16], limbs: &[i16], acc: &mut QuadSums) {
    let chunks = quad.len() / 128;
    assert!(
        quad.len() == chunks * 128 && limbs.len() == chunks * 160 && chunks <= FLUSH,
        "quad shape"
    );
    if chunks == 0 {
        return;
    }
    // The loop is written in assembly: with this many accumulators beside
    // the limbs and a digit vector, LLVM's allocator spills accumulators
    // to the stack on every step (even with named variables), which halves
    // the pass's speed.
    let z = _mm512_setzero_si512();
    let (mut a00, mut a01, mut a02, mut a03, mut a04) = (z, z, z, z, z);
    let (mut a10, mut a11, mut a12, mut a13, mut a14) = (z, z, z, z, z);
    let (mut a20, mut a21, mut a22, mut a23, mut a24) = (z, z, z, z, z);
    let (mut a30, mut a31, mut a32, mut a33, mut a34) = (z, z, z, z, z);
    // SAFETY: the loop runs `chunks` ≥ 1 times; iteration c reads the
    // 320 bytes at limbs + 320c (limb t of chunk c at 64t) and the 256
    // bytes at quad + 256c (row i at 64i), all inside the slices
    // (asserted above). It writes only its register operands, touches
    // no stack and leaves the flags clobbered (declared by default).
    unsafe {
        std::arch::asm!(
            "2:",
            "vmovdqu64 zmm0, [{lp}]",
            "vmovdqu64 zmm1, [{lp} + 64]",
            "vmovdqu64 zmm2, [{lp} + 128]",
            "vmovdqu64 zmm3, [{lp} + 192]",
            "vmovdqu64 zmm4, [{lp} + 256]",
            "vmovdqu64 zmm5, [{xp}]",
            "vpdpwssd zmm6, zmm5, zmm0",
            "vpdpwssd zmm7, zmm5, zmm1",
            "vpdpwssd zmm8, zmm5, zmm2",
            "vpdpwssd zmm9, zmm5, zmm3",
            "vpdpwssd zmm10, zmm5, zmm4",
            "vmovdqu64 zmm5, [{xp} + 64]",
            "vpdpwssd zmm11, zmm5, zmm0",
            "vpdpwssd zmm12, zmm5, zmm1",
            "vpdpwssd zmm13, zmm5, zmm2",
            "vpdpwssd zmm14, zmm5, zmm3",
            "vpdpwssd zmm15, zmm5, zmm4",
            "vmovdqu64 zmm5, [{xp} + 128]",
            "vpdpwssd zmm16, zmm5, zmm0",
            "vpdpwssd zmm17, zmm5, zmm1",
            "vpdpwssd zmm18, zmm5, zmm2",
            "vpdpwssd zmm19, zmm5, zmm3",
            "vpdpwssd zmm20, zmm5, zmm4",
            "vmovdqu64 zmm5, [{xp} + 192]",
            "vpdpwssd zmm21, zmm5, zmm0",
            "vpdpwssd zmm22, zmm5, zmm1",
            "vpdpwssd zmm23, zmm5, zmm2",
            "vpdpwssd zmm24, zmm5, zmm3",
            "vpdpwssd zmm25, zmm5, zmm4",
            "add {lp}, 320",
            "add {xp}, 256",
            "dec {n}",
            "jnz 2b",
            lp = inout(reg) limbs.as_ptr() => _,
            xp = inout(reg) quad.as_ptr() => _,
            n = inout(reg) chunks => _,
            out("zmm0") _,
            out("zmm1") _,
            out("zmm2") _,
            out("zmm3") _,
            out("zmm4") _,
            out("zmm5") _,
            inout("zmm6") a00,
            inout("zmm7") a01,
            inout("zmm8") a02,
            inout("zmm9") a03,
            inout("zmm10") a04,
            inout("zmm11") a10,
            inout("zmm12") a11,
            inout("zmm13") a12,
            inout("zmm14") a13,
            inout("zmm15") a14,
            inout("zmm16") a20,
            inout("zmm17") a21,
            inout("zmm18") a22,
            inout("zmm19") a23,
            inout("zmm20") a24,
            inout("zmm21") a30,
            inout("zmm22") a31,
            inout("zmm23") a32,
            inout("zmm24") a33,
            inout("zmm25") a34,
            options(nostack, readonly),
        );
    }
    let a = [
        [a00, a01, a02, a03, a04],
        [a10, a11, a12, a13, a14],
        [a20, a21, a22, a23, a24],
        [a30, a31, a32, a33, a34],
    ];
    // x[2i + h]: row i, limb pair h (l_0 + 2^11·l_1, l_2 + 2^11·l_3) in
    // 8 i64 lanes; y[i]: row i, l_4. Each lane of a widened accumulator
    // is below 2^31 · 2 (two i32 lanes), so a pair is below 2^43.
    let x: [__m512i; 8] = std::array::from_fn(|k| {
        let (ai, h) = (&a[k / 2], k % 2);
        _mm512_add_epi64(
            widen(ai[2 * h]),
            _mm512_slli_epi64::<11>(widen(ai[2 * h + 1])),
        )
    });
    let y: [__m512i; 4] = std::array::from_fn(|i| widen(a[i][4]));
    // Transposed reduction of the eight vectors to their eight lane
    // sums, in the order of `acc.lm` (row-major [row][pair]): fewer
    // shuffles than eight horizontal sums, which share the vector pipes
    // with the next quad's `vpdpwssd`s. 128-bit lane j of p[m] holds
    // [x[2m], x[2m + 1]] summed over lanes 2j, 2j + 1; each
    // shuffle-and-add level then adds 128-bit lanes in pairs. The four
    // top-limb vectors take the same levels, the last one with itself:
    // its low 256 bits are [y0, y1, y2, y3].
    let unpack = |e: __m512i, o: __m512i| {
        _mm512_add_epi64(_mm512_unpacklo_epi64(e, o), _mm512_unpackhi_epi64(e, o))
    };
    let p: [__m512i; 4] = std::array::from_fn(|m| unpack(x[2 * m], x[2 * m + 1]));
    let pairs = |a: __m512i, b: __m512i| {
        _mm512_add_epi64(
            _mm512_shuffle_i64x2::<0b10_00_10_00>(a, b),
            _mm512_shuffle_i64x2::<0b11_01_11_01>(a, b),
        )
    };
    let sums = pairs(pairs(p[0], p[1]), pairs(p[2], p[3]));
    let top = pairs(unpack(y[0], y[1]), unpack(y[2], y[3]));
    let top = pairs(top, top);
    let lm = acc.lm.as_mut_ptr() as *mut __m512i;
    let hi = acc.hi.as_mut_ptr() as *mut __m256i;
    // SAFETY: `acc.lm` is 4 × 2 i64, exactly one 512-bit vector; `acc.hi`
    // 4 i64, one 256-bit vector.
    unsafe {
        _mm512_storeu_si512(lm, _mm512_add_epi64(_mm512_loadu_si512(lm), sums));
        _mm256_storeu_si256(
            hi,
            _mm256_add_epi64(_mm256_loadu_si256(hi), _mm512_castsi512_si256(top)),
        );
    }
}
