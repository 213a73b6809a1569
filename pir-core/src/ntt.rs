//! Negacyclic number-theoretic transform over Z_p\[x\]/(x^n + 1) for the two
//! CRT primes of q2 (YPIR §2 "Polynomial rings", §4.1, App. B).
//!
//! Convention (fixed by the wire format, `docs/wire-format.md`): the forward
//! transform is the Cooley–Tukey negacyclic NTT of Longa–Naehrig with
//! bit-reversed output, so slot `i` holds f(ψ^{2·brv(i)+1}) where ψ is the
//! primitive 2n-th root of unity ψ = g^{(p−1)/2n} for g the smallest
//! primitive root mod p. Butterflies use Harvey's lazy reduction with
//! Shoup precomputed twiddles (values stay in [0, 4p) inside the transform).

use crate::arith::{Modulus, MODS};
pub use crate::kernel::ntt::{bit_reverse, NttTable};

impl NttTable {
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
    pub(crate) fn schoolbook(m: &Modulus, a: &[u32], b: &[u32]) -> Vec<u32> {
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
