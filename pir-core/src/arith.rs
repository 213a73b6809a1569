//! Modular arithmetic under the protocol: the two 28-bit NTT-friendly primes
//! whose product is q2 (YPIR §4 "Parameter selection"), Barrett and Shoup
//! multiplication, CRT between Z_q2 and (Z_p0, Z_p1), rounding between
//! moduli (⌊·⌉_{q,q'} of YPIR §2) and signed gadget decomposition (g_z^{-1}).
//!
//! Everything here is branch-free on secret data except where a comment says
//! otherwise; the values it sees on the client are secret-dependent
//! (s1, s2, errors), so conditional subtractions are written with masks.

/// First CRT prime of q2: 2^28 − 2^16 + 1 (YPIR §4, Table 1).
pub const P0: u32 = (1 << 28) - (1 << 16) + 1;
/// Second CRT prime of q2: 2^28 − 2^24 − 2^21 + 1 (YPIR §4, Table 1).
pub const P1: u32 = (1 << 28) - (1 << 24) - (1 << 21) + 1;
/// q2 = P0 · P1 ≈ 2^55.9.
pub const Q2: u64 = P0 as u64 * P1 as u64;

/// A prime modulus below 2^30 with precomputed Barrett constant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Modulus {
    /// The prime.
    pub p: u32,
    /// ⌊2^64 / p⌋.
    barrett: u64,
}

impl Modulus {
    /// Builds the constants for `p` (must be an odd prime < 2^30).
    pub const fn new(p: u32) -> Self {
        Modulus {
            p,
            barrett: (u64::MAX / p as u64),
        }
    }

    /// x mod p for any u64 x (Barrett with a 64×64→128 multiply).
    #[inline(always)]
    pub fn reduce(&self, x: u64) -> u32 {
        let q = ((x as u128 * self.barrett as u128) >> 64) as u64;
        let r = x.wrapping_sub(q.wrapping_mul(self.p as u64));
        // r < 2p; branch-free conditional subtraction.
        let r = r as u32;
        csub(r, self.p)
    }

    /// a·b mod p.
    #[inline(always)]
    pub fn mul(&self, a: u32, b: u32) -> u32 {
        self.reduce(a as u64 * b as u64)
    }

    /// a + b mod p for a, b < p.
    #[inline(always)]
    pub fn add(&self, a: u32, b: u32) -> u32 {
        csub(a + b, self.p)
    }

    /// a − b mod p for a, b < p.
    #[inline(always)]
    pub fn sub(&self, a: u32, b: u32) -> u32 {
        csub(a + self.p - b, self.p)
    }

    /// −a mod p for a < p.
    #[inline(always)]
    pub fn neg(&self, a: u32) -> u32 {
        csub(self.p - a, self.p)
    }

    /// a^e mod p (public exponents only: variable time in e).
    pub fn pow(&self, mut a: u32, mut e: u64) -> u32 {
        let mut r = 1u32;
        while e > 0 {
            if e & 1 == 1 {
                r = self.mul(r, a);
            }
            a = self.mul(a, a);
            e >>= 1;
        }
        r
    }

    /// a^{-1} mod p (Fermat; public values only).
    pub fn inv(&self, a: u32) -> u32 {
        self.pow(a, self.p as u64 - 2)
    }

    /// Shoup's precomputed quotient ⌊w · 2^32 / p⌋ for a fixed multiplicand w < p.
    #[inline(always)]
    pub fn shoup(&self, w: u32) -> u32 {
        (((w as u64) << 32) / self.p as u64) as u32
    }

    /// x·w mod p in [0, 2p) for any x < 2^32, given w' = shoup(w).
    #[inline(always)]
    pub fn mul_shoup_lazy(&self, x: u32, w: u32, w_shoup: u32) -> u32 {
        let q = ((x as u64 * w_shoup as u64) >> 32) as u32;
        x.wrapping_mul(w).wrapping_sub(q.wrapping_mul(self.p))
    }

    /// x·w mod p in [0, p).
    #[inline(always)]
    pub fn mul_shoup(&self, x: u32, w: u32, w_shoup: u32) -> u32 {
        csub(self.mul_shoup_lazy(x, w, w_shoup), self.p)
    }
}

/// Returns `a - m` if `a >= m`, else `a` (branch-free; a < 2m < 2^31).
#[inline(always)]
pub fn csub(a: u32, m: u32) -> u32 {
    let d = a.wrapping_sub(m);
    // If a < m the subtraction wrapped and the top bit is set.
    let mask = 0u32.wrapping_sub(d >> 31);
    d.wrapping_add(m & mask)
}

/// The two moduli of q2.
pub const MOD0: Modulus = Modulus::new(P0);
/// See [`MOD0`].
pub const MOD1: Modulus = Modulus::new(P1);
/// Both CRT moduli, indexed like residue vectors.
pub const MODS: [Modulus; 2] = [MOD0, MOD1];

/// P0^{-1} mod P1, for CRT reconstruction.
fn p0_inv_mod_p1() -> u32 {
    MOD1.inv(P0 % P1)
}

/// CRT between Z_q2 and Z_p0 × Z_p1.
#[derive(Clone, Copy, Debug)]
pub struct Crt {
    p0_inv: u32,
    p0_inv_shoup: u32,
}

impl Default for Crt {
    fn default() -> Self {
        Self::new()
    }
}

impl Crt {
    /// Precomputes the CRT constant.
    pub fn new() -> Self {
        let p0_inv = p0_inv_mod_p1();
        Crt {
            p0_inv,
            p0_inv_shoup: MOD1.shoup(p0_inv),
        }
    }

    /// P0^{-1} mod P1 and its Shoup quotient (for the SIMD twins of
    /// [`Crt::combine`]).
    pub fn p0_inv(&self) -> (u32, u32) {
        (self.p0_inv, self.p0_inv_shoup)
    }

    /// The unique x ∈ [0, q2) with x ≡ r0 (mod P0) and x ≡ r1 (mod P1).
    #[inline(always)]
    pub fn combine(&self, r0: u32, r1: u32) -> u64 {
        // x = r0 + P0 · ((r1 − r0) · P0^{-1} mod P1)
        let r0_mod_p1 = csub(r0, P1);
        let diff = MOD1.sub(r1, r0_mod_p1);
        let k = MOD1.mul_shoup(diff, self.p0_inv, self.p0_inv_shoup);
        r0 as u64 + P0 as u64 * k as u64
    }

    /// Residues of x ∈ [0, 2^64).
    #[inline(always)]
    pub fn split(x: u64) -> (u32, u32) {
        (MOD0.reduce(x), MOD1.reduce(x))
    }

    /// Residues of a signed integer |x| < 2^62.
    #[inline(always)]
    pub fn split_i64(x: i64) -> (u32, u32) {
        (reduce_signed(&MOD0, x), reduce_signed(&MOD1, x))
    }
}

/// x mod p for signed x with |x| < 2^62 (branch-free).
#[inline(always)]
pub fn reduce_signed(m: &Modulus, x: i64) -> u32 {
    let neg = (x >> 63) as u64; // all ones if negative
    let mag = ((x as u64) ^ neg).wrapping_sub(neg); // |x|
    let r = m.reduce(mag);
    // if negative: p − r (mod p)
    let nr = csub(m.p - r, m.p);
    let mask = neg as u32;
    (r & !mask) | (nr & mask)
}

/// x mod p for a small signed x with |x| < p (branch-free, no division):
/// used for records, digits and hint chunks.
#[inline(always)]
pub fn small_residue(m: &Modulus, x: i64) -> u32 {
    debug_assert!(x.unsigned_abs() < m.p as u64);
    let neg = (x >> 63) as u32; // all ones if negative
    (x as u32).wrapping_add(m.p & neg)
}

/// Lift x ∈ [0, q) to the centred representative in (−q/2, q/2].
#[inline(always)]
pub fn centre(x: u64, q: u64) -> i64 {
    if x > q / 2 {
        x as i64 - q as i64
    } else {
        x as i64
    }
}

/// ⌊x⌉_{q,q'} of YPIR §2: lift x ∈ Z_q to (−q/2, q/2], scale by q'/q,
/// round to nearest (ties up) and reduce mod q'. Works for any q, q' ≤ 2^62.
///
/// For x ∈ [0, q) the lift only changes the result by a multiple of q', so
/// ⌊x·q'/q + 1/2⌋ mod q' is computed directly on the unsigned value.
#[inline(always)]
pub fn round_mod(x: u64, q: u64, q_new: u64) -> u64 {
    let num = 2 * x as u128 * q_new as u128 + q as u128;
    ((num / (2 * q as u128)) % q_new as u128) as u64
}

/// ⌊x⌉_{q,q'} for power-of-two moduli q = 2^a, q' = 2^b with b < a ≤ 64.
#[inline(always)]
pub fn round_pow2(x: u64, log_q: u32, log_q_new: u32) -> u64 {
    let shift = log_q - log_q_new;
    let half = 1u64 << (shift - 1);
    let mask_new = if log_q_new == 64 {
        u64::MAX
    } else {
        (1u64 << log_q_new) - 1
    };
    (x.wrapping_add(half) >> shift) & mask_new
}

/// Signed base-z digits of x ∈ [0, q) (g_z^{-1}, YPIR §2 "Gadget matrices"):
/// returns t digits d_k ∈ [−z/2, z/2) with Σ d_k z^k ≡ x (mod q), z = 2^log_z.
/// The top digit absorbs the final carry and stays small because q < z^t.
#[inline(always)]
pub fn gadget_decompose(x: u64, q: u64, log_z: u32, t: usize, out: &mut [i64]) {
    let z = 1i64 << log_z;
    let half = z >> 1;
    // centre first so that the decomposition of values near q is short
    let mut v = centre(x, q);
    for d in out.iter_mut().take(t - 1) {
        let mut digit = v & (z - 1); // v mod z in [0, z)
        digit -= z & -((digit >= half) as i64); // map to [−z/2, z/2)
        *d = digit;
        v = (v - digit) >> log_z;
    }
    out[t - 1] = v;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primes_are_ntt_friendly_and_product_is_q2() {
        assert_eq!(P0, 268_369_921);
        assert_eq!(P1, 249_561_089);
        assert_eq!(Q2, 268_369_921u64 * 249_561_089u64);
        for p in [P0, P1] {
            assert_eq!((p - 1) % (2 * 2048), 0);
            // Fermat check against small bases: p is prime.
            let m = Modulus::new(p);
            for a in [2u32, 3, 5, 7, 11] {
                assert_eq!(m.pow(a, p as u64 - 1), 1);
            }
        }
    }

    #[test]
    fn barrett_and_shoup_match_naive() {
        let mut s = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        for m in MODS {
            for _ in 0..10_000 {
                let x = next();
                assert_eq!(m.reduce(x) as u64, x % m.p as u64);
                let a = (next() % m.p as u64) as u32;
                let b = (next() % m.p as u64) as u32;
                assert_eq!(m.mul(a, b) as u64, a as u64 * b as u64 % m.p as u64);
                assert_eq!(m.mul_shoup(a, b, m.shoup(b)), m.mul(a, b));
                let y = next() as u32;
                let lazy = m.mul_shoup_lazy(y, b, m.shoup(b));
                assert!(lazy < 2 * m.p);
                assert_eq!(lazy % m.p, m.mul(y % m.p, b));
                assert_eq!(m.add(a, b) as u64, (a as u64 + b as u64) % m.p as u64);
                assert_eq!(
                    m.sub(a, b) as u64,
                    (a as u64 + m.p as u64 - b as u64) % m.p as u64
                );
                let xi = (next() >> 3) as i64 - (1i64 << 60);
                assert_eq!(reduce_signed(&m, xi) as i64, xi.rem_euclid(m.p as i64));
            }
        }
    }

    #[test]
    fn small_residue_matches_reduction() {
        for m in MODS {
            for x in [
                -(m.p as i64) + 1,
                -300_000,
                -1,
                0,
                1,
                123_456,
                m.p as i64 - 1,
            ] {
                assert_eq!(small_residue(&m, x), reduce_signed(&m, x));
            }
        }
    }

    #[test]
    fn crt_round_trip() {
        let crt = Crt::new();
        let mut s = 99u64;
        for _ in 0..10_000 {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let x = s % Q2;
            let (r0, r1) = Crt::split(x);
            assert_eq!(crt.combine(r0, r1), x);
        }
        assert_eq!(crt.combine(0, 0), 0);
        assert_eq!(crt.combine(P0 - 1, P1 - 1), Q2 - 1);
        let (a, b) = Crt::split_i64(-1);
        assert_eq!(crt.combine(a, b), Q2 - 1);
    }

    #[test]
    fn rounding_matches_definition() {
        // ⌊x⌉_{q,q'} = round(q'/q · lift(x)) mod q'
        let cases: [(u64, u64); 4] = [
            (1 << 32, 1 << 28),
            (Q2, 1 << 28),
            (Q2, 1 << 20),
            (1 << 20, 1 << 15),
        ];
        let mut s = 7u64;
        for (q, qn) in cases {
            for _ in 0..5000 {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let x = (s >> 3) % q;
                let lifted = centre(x, q) as f64;
                let expect = ((lifted * qn as f64 / q as f64) + 0.5).floor() as i64;
                let expect = expect.rem_euclid(qn as i64) as u64;
                let got = round_mod(x, q, qn);
                // f64 may be off by one only at exact ties far below its precision
                assert_eq!(got, expect, "q={q} qn={qn} x={x}");
                if q.is_power_of_two() && qn.is_power_of_two() {
                    assert_eq!(round_pow2(x, q.trailing_zeros(), qn.trailing_zeros()), got);
                }
            }
        }
    }

    #[test]
    fn gadget_round_trip() {
        let mut s = 3u64;
        let mut digits = [0i64; 3];
        for _ in 0..20_000 {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let x = (s >> 5) % Q2;
            gadget_decompose(x, Q2, 19, 3, &mut digits);
            let z = 1i128 << 19;
            let mut acc = 0i128;
            for (k, d) in digits.iter().enumerate() {
                if k < 2 {
                    assert!(*d >= -(1 << 18) && *d < (1 << 18), "digit {d}");
                } else {
                    assert!(d.unsigned_abs() <= (Q2 >> 38) / 2 + 2, "top digit {d}");
                }
                acc += *d as i128 * z.pow(k as u32);
            }
            assert_eq!(acc.rem_euclid(Q2 as i128) as u64, x);
        }
    }
}
