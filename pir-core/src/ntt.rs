//! Negacyclic number-theoretic transform over Z_p\[x\]/(x^n + 1) for the two
//! CRT primes of q2 (YPIR §2 "Polynomial rings", §4.1, App. B).
//!
//! Convention (fixed by the wire format, `docs/wire-format.md`): the forward
//! transform is the Cooley–Tukey negacyclic NTT of Longa–Naehrig with
//! bit-reversed output, so slot `i` holds f(ψ^{2·brv(i)+1}) where ψ is the
//! primitive 2n-th root of unity ψ = g^{(p−1)/2n} for g the smallest
//! primitive root mod p. Butterflies use Harvey's lazy reduction with
//! Shoup precomputed twiddles (values stay in [0, 4p) inside the transform).

use crate::arith::{csub, Modulus, MODS};

/// Twiddle tables for one prime and one power-of-two dimension.
#[derive(Clone, Debug)]
pub struct NttTable {
    /// The prime modulus.
    pub m: Modulus,
    /// Ring dimension n (power of two).
    pub n: usize,
    pub(crate) log_n: u32,
    /// Primitive 2n-th root of unity ψ.
    pub psi: u32,
    pub(crate) psi_rev: Vec<u32>,
    pub(crate) psi_rev_shoup: Vec<u32>,
    pub(crate) ipsi_rev: Vec<u32>,
    pub(crate) ipsi_rev_shoup: Vec<u32>,
    pub(crate) n_inv: u32,
    pub(crate) n_inv_shoup: u32,
    /// Lane twiddles of the four smallest stages (half-size t = 8, 4, 2, 1)
    /// for the SIMD transforms: for each 32-element chunk, 16 lanes (the
    /// AVX-512 transform); the AVX2 transform reads the stages t = 4, 2, 1
    /// as 8 lanes per 16-element chunk. Unused where there is no SIMD
    /// transform, e.g. wasm32.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(crate) small: SmallStages,
}

/// Per-lane twiddles (and Shoup quotients) of the stages whose butterflies
/// stay inside a 32-element chunk, indexed [stage][chunk·16 + lane] with
/// stage 0..4 ↔ t = 8, 4, 2, 1.
#[derive(Clone, Debug, Default)]
pub(crate) struct SmallStages {
    pub fwd: [Vec<u32>; 4],
    pub fwd_shoup: [Vec<u32>; 4],
    pub inv: [Vec<u32>; 4],
    pub inv_shoup: [Vec<u32>; 4],
}

/// Bit reversal of the low `bits` bits of `x`.
#[inline]
pub fn bit_reverse(x: usize, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        x.reverse_bits() >> (usize::BITS - bits)
    }
}

/// Smallest primitive root modulo the prime p (public constant).
fn smallest_primitive_root(m: &Modulus) -> u32 {
    let p = m.p;
    let mut factors = Vec::new();
    let mut r = p - 1;
    let mut f = 2;
    while f * f <= r {
        if r.is_multiple_of(f) {
            factors.push(f);
            while r.is_multiple_of(f) {
                r /= f;
            }
        }
        f += 1;
    }
    if r > 1 {
        factors.push(r);
    }
    (2..p)
        .find(|&g| factors.iter().all(|&q| m.pow(g, ((p - 1) / q) as u64) != 1))
        .expect("a prime has a primitive root")
}

impl NttTable {
    /// Builds the tables for prime modulus `m` and dimension `n`
    /// (requires 2n | p − 1).
    pub fn new(m: Modulus, n: usize) -> Self {
        assert!(n.is_power_of_two() && n >= 2);
        assert_eq!(
            (m.p as usize - 1) % (2 * n),
            0,
            "p is not NTT-friendly for n"
        );
        let log_n = n.trailing_zeros();
        let g = smallest_primitive_root(&m);
        let psi = m.pow(g, ((m.p - 1) as usize / (2 * n)) as u64);
        let ipsi = m.inv(psi);
        let mut psi_rev = vec![0u32; n];
        let mut ipsi_rev = vec![0u32; n];
        for (i, (pr, ipr)) in psi_rev.iter_mut().zip(ipsi_rev.iter_mut()).enumerate() {
            let e = bit_reverse(i, log_n) as u64;
            *pr = m.pow(psi, e);
            *ipr = m.pow(ipsi, e);
        }
        let psi_rev_shoup = psi_rev.iter().map(|&w| m.shoup(w)).collect();
        let ipsi_rev_shoup = ipsi_rev.iter().map(|&w| m.shoup(w)).collect();
        let n_inv = m.inv(n as u32);
        let mut small = SmallStages::default();
        if n >= 32 {
            for (st, t) in [8usize, 4, 2, 1].into_iter().enumerate() {
                let blocks = n / (2 * t);
                for c in 0..n / 32 {
                    for l in 0..16 {
                        let idx = blocks + c * (16 / t) + l / t;
                        small.fwd[st].push(psi_rev[idx]);
                        small.fwd_shoup[st].push(m.shoup(psi_rev[idx]));
                        small.inv[st].push(ipsi_rev[idx]);
                        small.inv_shoup[st].push(m.shoup(ipsi_rev[idx]));
                    }
                }
            }
        }
        NttTable {
            m,
            n,
            log_n,
            psi,
            psi_rev,
            psi_rev_shoup,
            ipsi_rev,
            ipsi_rev_shoup,
            n_inv,
            n_inv_shoup: m.shoup(n_inv),
            small,
        }
    }

    /// In-place forward negacyclic NTT. Input coefficients in [0, 4p), output
    /// slots in [0, p), bit-reversed order.
    pub fn forward(&self, a: &mut [u32]) {
        assert_eq!(a.len(), self.n);
        if crate::kernel::ntt_forward(self, a) {
            return;
        }
        self.forward_scalar(a);
    }

    /// Scalar twin of [`NttTable::forward`].
    pub fn forward_scalar(&self, a: &mut [u32]) {
        let p = self.m.p;
        let two_p = 2 * p;
        let n = self.n;
        let mut t = n;
        let mut m = 1;
        while m < n {
            t >>= 1;
            for i in 0..m {
                let w = self.psi_rev[m + i];
                let ws = self.psi_rev_shoup[m + i];
                let (lo, hi) = a[2 * i * t..2 * i * t + 2 * t].split_at_mut(t);
                for (x, y) in lo.iter_mut().zip(hi.iter_mut()) {
                    let u = csub(*x, two_p);
                    let v = self.m.mul_shoup_lazy(*y, w, ws);
                    *x = u + v;
                    *y = u + two_p - v;
                }
            }
            m <<= 1;
        }
        for x in a.iter_mut() {
            *x = csub(csub(*x, two_p), p);
        }
    }

    /// In-place inverse negacyclic NTT (bit-reversed slots in [0, p) to
    /// natural-order coefficients in [0, p)).
    pub fn inverse(&self, a: &mut [u32]) {
        assert_eq!(a.len(), self.n);
        if crate::kernel::ntt_inverse(self, a) {
            return;
        }
        self.inverse_scalar(a);
    }

    /// Scalar twin of [`NttTable::inverse`].
    pub fn inverse_scalar(&self, a: &mut [u32]) {
        let p = self.m.p;
        let two_p = 2 * p;
        let mut t = 1;
        let mut m = self.n;
        while m > 1 {
            let h = m >> 1;
            for i in 0..h {
                let w = self.ipsi_rev[h + i];
                let ws = self.ipsi_rev_shoup[h + i];
                let j1 = 2 * i * t;
                let (lo, hi) = a[j1..j1 + 2 * t].split_at_mut(t);
                for (x, y) in lo.iter_mut().zip(hi.iter_mut()) {
                    let u = *x;
                    let v = *y;
                    *x = csub(u + v, two_p);
                    *y = self.m.mul_shoup_lazy(u + two_p - v, w, ws);
                }
            }
            t <<= 1;
            m = h;
        }
        for x in a.iter_mut() {
            *x = self.m.mul_shoup(*x, self.n_inv, self.n_inv_shoup);
        }
    }

    /// The odd exponent e_i with slot i = f(ψ^{e_i}).
    pub fn slot_exponent(&self, i: usize) -> usize {
        2 * bit_reverse(i, self.log_n) + 1
    }

    /// NTT-domain image of the monomial x^k (k may exceed n; x^n = −1).
    pub fn monomial(&self, k: usize) -> Vec<u32> {
        (0..self.n)
            .map(|i| {
                let e = (k * self.slot_exponent(i)) % (2 * self.n);
                self.m.pow(self.psi, e as u64)
            })
            .collect()
    }

    /// Permutation `perm` with `τ_g(f)[i] = f[perm[i]]` in the NTT domain, for
    /// the automorphism τ_g: f(x) ↦ f(x^g), g odd.
    pub fn automorphism_perm(&self, g: usize) -> Vec<u32> {
        let two_n = 2 * self.n;
        // slot index of each odd exponent
        let mut slot_of = vec![usize::MAX; two_n];
        for i in 0..self.n {
            slot_of[self.slot_exponent(i)] = i;
        }
        (0..self.n)
            .map(|i| slot_of[(g * self.slot_exponent(i)) % two_n] as u32)
            .collect()
    }
}

/// NTT tables for both CRT primes at one dimension.
#[derive(Clone, Debug)]
pub struct CrtNtt {
    /// Tables indexed like residue vectors: `[P0, P1]`.
    pub t: [NttTable; 2],
}

impl CrtNtt {
    /// Tables for dimension `n` over both primes.
    pub fn new(n: usize) -> Self {
        CrtNtt {
            t: [NttTable::new(MODS[0], n), NttTable::new(MODS[1], n)],
        }
    }

    /// Ring dimension.
    pub fn n(&self) -> usize {
        self.t[0].n
    }
}

/// Automorphism τ_g on coefficient vectors over Z_p (x^i ↦ ±x^{g·i mod n}).
pub fn automorphism_coeffs(m: &Modulus, a: &[u32], g: usize, out: &mut [u32]) {
    let n = a.len();
    for (i, &c) in a.iter().enumerate() {
        let e = (g * i) % (2 * n);
        if e < n {
            out[e] = c;
        } else {
            out[e - n] = m.neg(c);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::arith::{P0, P1};

    /// Schoolbook negacyclic product, the reference for the NTT.
    pub fn schoolbook(m: &Modulus, a: &[u32], b: &[u32]) -> Vec<u32> {
        let n = a.len();
        let mut acc = vec![0i128; n];
        for i in 0..n {
            for j in 0..n {
                let prod = a[i] as i128 * b[j] as i128;
                if i + j < n {
                    acc[i + j] += prod;
                } else {
                    acc[i + j - n] -= prod;
                }
            }
        }
        acc.iter()
            .map(|&x| x.rem_euclid(m.p as i128) as u32)
            .collect()
    }

    fn rand_vec(seed: &mut u64, n: usize, p: u32) -> Vec<u32> {
        (0..n)
            .map(|_| {
                *seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((*seed >> 33) % p as u64) as u32
            })
            .collect()
    }

    #[test]
    fn ntt_multiplication_matches_schoolbook() {
        let mut seed = 1u64;
        for n in [4usize, 16, 64, 256, 1024, 2048] {
            for p in [P0, P1] {
                let tab = NttTable::new(Modulus::new(p), n);
                let a = rand_vec(&mut seed, n, p);
                let b = rand_vec(&mut seed, n, p);
                let want = if n <= 256 {
                    Some(schoolbook(&tab.m, &a, &b))
                } else {
                    None
                };
                let (mut fa, mut fb) = (a.clone(), b.clone());
                tab.forward(&mut fa);
                tab.forward(&mut fb);
                let mut prod: Vec<u32> =
                    fa.iter().zip(&fb).map(|(x, y)| tab.m.mul(*x, *y)).collect();
                tab.inverse(&mut prod);
                if let Some(w) = want {
                    assert_eq!(prod, w, "n={n} p={p}");
                }
                // round trip
                let mut rt = a.clone();
                tab.forward(&mut rt);
                tab.inverse(&mut rt);
                assert_eq!(rt, a);
            }
        }
    }

    #[test]
    fn simd_ntt_matches_scalar_twin() {
        let mut seed = 21u64;
        for n in [2usize, 16, 32, 64, 128, 1024, 2048, 4096] {
            for p in [P0, P1] {
                let tab = NttTable::new(Modulus::new(p), n);
                for _ in 0..3 {
                    // inputs anywhere in [0, 4p) exercise the lazy ranges
                    let a: Vec<u32> = rand_vec(&mut seed, n, 4 * p - 1);
                    let (mut f, mut g) = (a.clone(), a.clone());
                    tab.forward(&mut f);
                    tab.forward_scalar(&mut g);
                    assert_eq!(f, g, "forward n={n} p={p}");
                    let (mut fi, mut gi) = (f.clone(), f.clone());
                    tab.inverse(&mut fi);
                    tab.inverse_scalar(&mut gi);
                    assert_eq!(fi, gi, "inverse n={n} p={p}");
                    assert_eq!(fi, a.iter().map(|&x| x % p).collect::<Vec<_>>());
                }
            }
        }
    }

    #[test]
    fn ntt_slots_are_evaluations() {
        let tab = NttTable::new(Modulus::new(P1), 64);
        let mut seed = 5;
        let a = rand_vec(&mut seed, 64, P1);
        let mut fa = a.clone();
        tab.forward(&mut fa);
        for (i, &slot) in fa.iter().enumerate() {
            let x = tab.m.pow(tab.psi, tab.slot_exponent(i) as u64);
            let mut acc = 0u32;
            let mut xp = 1u32;
            for &c in &a {
                acc = tab.m.add(acc, tab.m.mul(c, xp));
                xp = tab.m.mul(xp, x);
            }
            assert_eq!(slot, acc);
        }
    }

    #[test]
    fn automorphism_in_ntt_domain_is_a_permutation() {
        for n in [16usize, 2048] {
            let tab = NttTable::new(Modulus::new(P0), n);
            let mut seed = 11;
            let a = rand_vec(&mut seed, n, P0);
            for g in [3usize, 5, 2 * n - 1, n + 1] {
                let mut coeff_aut = vec![0u32; n];
                automorphism_coeffs(&tab.m, &a, g, &mut coeff_aut);
                tab.forward(&mut coeff_aut);
                let mut fa = a.clone();
                tab.forward(&mut fa);
                let perm = tab.automorphism_perm(g);
                let via_perm: Vec<u32> = perm.iter().map(|&j| fa[j as usize]).collect();
                assert_eq!(via_perm, coeff_aut, "n={n} g={g}");
            }
            // monomial image
            let mut mono = vec![0u32; n];
            mono[3] = 1;
            tab.forward(&mut mono);
            assert_eq!(mono, tab.monomial(3));
            let mut mono = vec![0u32; n];
            mono[1] = tab.m.p - 1; // x^{n+1} = −x
            tab.forward(&mut mono);
            assert_eq!(mono, tab.monomial(n + 1));
        }
    }
}
