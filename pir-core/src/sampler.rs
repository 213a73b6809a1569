//! Secret and public randomness.
//!
//! * Secrets (s1, s2, every error term) come from a ChaCha20 stream keyed
//!   with 32 fresh bytes from the OS CSPRNG (`getrandom`) for every query
//!   ([`SecretRng::from_os`]).
//! * Public randomness (a1, a2, the random rows of the packing key; Remark 3.2
//!   and Remark A.4) is expanded from a 32-byte public seed with ChaCha20 in
//!   counter mode, one ChaCha stream id per object ([`PublicSeed`]).
//!
//! The discrete Gaussian uses the paper's width convention (see
//! [`crate::params`]): ρ_s(x) = exp(−πx²/s²), standard deviation ≈ s/√(2π).
//! Sampling is a constant-time scan of a cumulative tail table, so the time
//! taken does not depend on the value drawn.

use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use sha2::{Digest, Sha256};

use crate::arith::{Modulus, MODS};
use crate::error::{Error, Result};

/// Discrete Gaussian D_{Z,s} with tail cut where the probability mass falls
/// below 2^-64 (beyond ≈ 9.4 standard deviations).
#[derive(Clone, Debug)]
pub struct GaussianSampler {
    /// `tail[k] = round(2^64 · Pr[|X| > k])`; strictly decreasing, ends above 0.
    tail: Vec<u64>,
    /// Gaussian parameter s.
    pub s: f64,
}

impl GaussianSampler {
    /// Builds the table for Gaussian parameter `s` (width, not σ).
    pub fn new(s: f64) -> Self {
        let rho = |x: f64| (-std::f64::consts::PI * x * x / (s * s)).exp();
        let limit = (s * 20.0).ceil() as usize + 2;
        let total: f64 = rho(0.0) + 2.0 * (1..limit).map(|x| rho(x as f64)).sum::<f64>();
        let mut tail = Vec::new();
        // Pr[|X| > k] = 2 Σ_{x > k} ρ(x) / total, summed from the far end for
        // relative precision in the tails.
        let mut suffix = vec![0f64; limit + 1];
        for x in (1..limit).rev() {
            suffix[x] = suffix[x + 1] + rho(x as f64);
        }
        for k in 0..limit - 1 {
            let pr = 2.0 * suffix[k + 1] / total;
            let scaled = pr * 18_446_744_073_709_551_616.0; // 2^64
            if scaled < 1.0 {
                break;
            }
            tail.push(if scaled >= u64::MAX as f64 {
                u64::MAX
            } else {
                scaled as u64
            });
        }
        GaussianSampler { tail, s }
    }

    /// Largest magnitude this sampler can output.
    pub fn bound(&self) -> i64 {
        self.tail.len() as i64
    }

    /// One sample. Constant time: every table entry is compared.
    #[inline]
    pub fn sample<R: RngCore>(&self, rng: &mut R) -> i64 {
        let u = rng.next_u64();
        let mut mag = 0u64;
        for &t in &self.tail {
            mag += (u < t) as u64;
        }
        let sign = (rng.next_u32() & 1) as i64; // 0 or 1
        let mag = mag as i64;
        (mag ^ -sign) + sign
    }

    /// Fills `out` with independent samples.
    pub fn fill<R: RngCore>(&self, rng: &mut R, out: &mut [i64]) {
        for x in out.iter_mut() {
            *x = self.sample(rng);
        }
    }
}

/// A ChaCha20 stream keyed from the OS CSPRNG, used for one query's secrets.
pub struct SecretRng(ChaCha20Rng);

impl SecretRng {
    /// Keys a fresh stream with 32 bytes from `getrandom`.
    pub fn from_os() -> Result<Self> {
        let mut key = [0u8; 32];
        getrandom::getrandom(&mut key).map_err(|e| Error::Rng(e.to_string()))?;
        let rng = ChaCha20Rng::from_seed(key);
        key.fill(0);
        Ok(SecretRng(rng))
    }

    /// Deterministic stream for known-answer tests only.
    #[cfg(test)]
    pub fn from_test_seed(seed: u64) -> Self {
        SecretRng(ChaCha20Rng::seed_from_u64(seed))
    }
}

impl RngCore for SecretRng {
    fn next_u32(&mut self) -> u32 {
        self.0.next_u32()
    }
    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        self.0.fill_bytes(dest)
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.0.try_fill_bytes(dest)
    }
}

/// ChaCha20 stream ids of the public objects expanded from a seed.
pub mod stream {
    /// a1 ∈ R_{d1,q1}^{m1}, coefficient form, one u32 per coefficient.
    pub const A1: u64 = 1;
    /// a2 ∈ R_{d2,q2}^{m2}, NTT form, residues mod P0 then P1 per polynomial.
    pub const A2: u64 = 2;
    /// Random rows a_{t,k} of the packing key, NTT form, t = 1..log d2, k < T.
    pub const PACK: u64 = 3;
}

/// The 32-byte public seed of one database version (fresh per epoch).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PublicSeed(pub [u8; 32]);

impl std::fmt::Debug for PublicSeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PublicSeed(id={})", hex(&self.id()))
    }
}

/// Lower-case hex of bytes.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl PublicSeed {
    /// A fresh random seed from the OS CSPRNG.
    pub fn random() -> Result<Self> {
        let mut s = [0u8; 32];
        getrandom::getrandom(&mut s).map_err(|e| Error::Rng(e.to_string()))?;
        Ok(PublicSeed(s))
    }

    /// The 8-byte seed id carried on the wire:
    /// SHA-256("pir-core/seed-id/v1" ‖ seed)[0..8].
    pub fn id(&self) -> [u8; 8] {
        let mut h = Sha256::new();
        h.update(b"pir-core/seed-id/v1");
        h.update(self.0);
        let d = h.finalize();
        let mut id = [0u8; 8];
        id.copy_from_slice(&d[..8]);
        id
    }

    fn stream(&self, id: u64) -> ChaCha20Rng {
        let mut r = ChaCha20Rng::from_seed(self.0);
        r.set_stream(id);
        r
    }

    /// a1: `m1·d1` coefficients mod 2^32 (block b = coefficients b·d1..(b+1)·d1).
    pub fn expand_a1(&self, m1: usize, d1: usize) -> Vec<u32> {
        let mut r = self.stream(stream::A1);
        (0..m1 * d1).map(|_| r.next_u32()).collect()
    }

    /// a2: `m2` polynomials in NTT form, each 2·d2 residues (P0 half, P1 half).
    pub fn expand_a2(&self, m2: usize, d2: usize) -> Vec<u32> {
        let mut r = self.stream(stream::A2);
        let mut out = Vec::with_capacity(m2 * 2 * d2);
        for _ in 0..m2 {
            for m in MODS {
                for _ in 0..d2 {
                    out.push(uniform_mod(&mut r, &m));
                }
            }
        }
        out
    }

    /// Random rows of the packing key: for t = 1..=log_d2 and k < gadget_len,
    /// one NTT-form polynomial of 2·d2 residues, in that order.
    pub fn expand_pack(&self, log_d2: usize, gadget_len: usize, d2: usize) -> Vec<u32> {
        let mut r = self.stream(stream::PACK);
        let mut out = Vec::with_capacity(log_d2 * gadget_len * 2 * d2);
        for _ in 0..log_d2 * gadget_len {
            for m in MODS {
                for _ in 0..d2 {
                    out.push(uniform_mod(&mut r, &m));
                }
            }
        }
        out
    }
}

/// Uniform residue mod p by rejection from 28-bit (or wider) words; public
/// randomness only (variable time).
fn uniform_mod<R: RngCore>(r: &mut R, m: &Modulus) -> u32 {
    let bits = 32 - (m.p - 1).leading_zeros();
    let mask = if bits == 32 {
        u32::MAX
    } else {
        (1u32 << bits) - 1
    };
    loop {
        let x = r.next_u32() & mask;
        if x < m.p {
            return x;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::TABLE1;

    #[test]
    fn gaussian_variance_matches_width_convention() {
        for s in [TABLE1.s1, TABLE1.s2] {
            let g = GaussianSampler::new(s);
            let mut rng = SecretRng::from_test_seed(42);
            let n = 400_000;
            let (mut sum, mut sumsq, mut max) = (0f64, 0f64, 0i64);
            for _ in 0..n {
                let x = g.sample(&mut rng);
                sum += x as f64;
                sumsq += (x * x) as f64;
                max = max.max(x.abs());
            }
            let mean = sum / n as f64;
            let var = sumsq / n as f64 - mean * mean;
            let want = s * s / (2.0 * std::f64::consts::PI); // std = s/√(2π)
            assert!(mean.abs() < 0.1, "mean {mean}");
            assert!(
                (var / want - 1.0).abs() < 0.02,
                "s={s}: var {var} want {want}"
            );
            assert!(max <= g.bound());
            // tail cut at ≥ 9 standard deviations
            assert!(g.bound() as f64 >= 9.0 * want.sqrt());
        }
    }

    #[test]
    fn seed_expansion_is_deterministic_and_domain_separated() {
        let seed = PublicSeed([7u8; 32]);
        assert_eq!(seed.expand_a1(2, 8), seed.expand_a1(2, 8));
        assert_ne!(seed.expand_a1(1, 8), PublicSeed([8u8; 32]).expand_a1(1, 8));
        let a2 = seed.expand_a2(1, 16);
        assert!(a2[..16].iter().all(|&x| x < MODS[0].p));
        assert!(a2[16..].iter().all(|&x| x < MODS[1].p));
        let pk = seed.expand_pack(1, 1, 16);
        assert_ne!(a2, pk);
        assert_ne!(seed.id(), PublicSeed([8u8; 32]).id());
    }
}
