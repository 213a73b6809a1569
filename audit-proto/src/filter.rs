//! The salted multi-Bloom filter (SimplePIR paper §6, Fig. 4).
//!
//! An epoch holds a one-hash-function Bloom filters of `bits = k·N` bits
//! each, N ≥ |S|. Filter i uses its own salt (32 bytes drawn from the OS
//! CSPRNG *after* the snapshot S is fixed, so a log cannot choose entries
//! against it) and the hash
//!
//! ```text
//! x      = first 8 bytes of SHA-256(salt_i ‖ leaf_hash), big-endian u64
//! bit_i  = ⌊x · bits / 2^64⌋            (64×64 → 128-bit multiply)
//! ```
//!
//! `leaf_hash` is the RFC 6962 §2.1 leaf hash SHA-256(0x00 ‖ MerkleTreeLeaf).
//! The multiply-shift maps 2^64 equally likely x onto `bits` buckets of
//! ⌊2^64/bits⌋ or ⌈2^64/bits⌉ values, so each index has probability
//! within `bits/2^64` (relative) of 1/bits: ≤ 2^-28 for the largest filter
//! we allow (2^36 bits), negligible next to the false-positive rate ½ of
//! Prop. 6.2. SHA-256 and the multiply are branch-free in the client.
//!
//! Defaults (Prop. 6.2 with |U| = 2^256, λ = 128): a = 768, k = 8 give an
//! adversarial false-positive rate ≤ ½ per query except with probability
//! 2^-128 over the salts.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// Default number of filters a (Prop. 6.2).
pub const DEFAULT_FILTERS: u32 = 768;
/// Default bits per element k (Prop. 6.2).
pub const DEFAULT_K: u32 = 8;
/// Name of the bit-index derivation above, as written in the manifest.
pub const HASH_V1: &str = "sha256(salt||leaf_hash)[0..8]be*bits>>64";
/// Largest number of filters a manifest may declare.
pub const MAX_FILTERS: u32 = 4096;
/// Largest k accepted.
pub const MAX_K: u32 = 64;
/// Largest filter accepted (bits); internet scale is 8·5·10^9 < 2^36.
pub const MAX_FILTER_BITS: u64 = 1 << 38;

/// The salt of one filter.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Salt(#[serde(with = "crate::hex::array")] pub [u8; 32]);

impl std::fmt::Debug for Salt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Salt({})", crate::hex::encode(&self.0))
    }
}

/// Bit of filter `salt` (of `bits` bits) that `leaf_hash` maps to (see the
/// module docs). `bits` must be ≥ 1.
pub fn bit_index(salt: &Salt, leaf_hash: &[u8; 32], bits: u64) -> u64 {
    let digest = Sha256::new()
        .chain_update(salt.0)
        .chain_update(leaf_hash)
        .finalize();
    let mut x = [0u8; 8];
    x.copy_from_slice(&digest[..8]);
    ((u128::from(u64::from_be_bytes(x)) * u128::from(bits)) >> 64) as u64
}

/// The filter parameters of an epoch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilterSpec {
    /// Bit-index derivation; [`HASH_V1`].
    pub hash: String,
    /// a: number of filters.
    pub a: u32,
    /// k: bits per element.
    pub k: u32,
    /// N: the capacity, ≥ |S| and a multiple of 8 (so each filter is a
    /// whole number of 64-bit words).
    pub n: u64,
    /// Bits per filter, k·N.
    pub bits: u64,
    /// One salt per filter, in filter order.
    pub salts: Vec<Salt>,
}

impl FilterSpec {
    /// The capacity N for a set of `entries` elements: |S| rounded up to a
    /// multiple of 8 (at least 8).
    pub fn capacity_for(entries: u64) -> u64 {
        entries.max(1).div_ceil(8) * 8
    }

    /// Checks the invariants every reader relies on.
    pub fn check(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Invalid(m));
        if self.hash != HASH_V1 {
            return bad(format!("unknown filter hash {:?}", self.hash));
        }
        if self.a == 0 || self.a > MAX_FILTERS {
            return bad(format!("a = {} not in 1..={MAX_FILTERS}", self.a));
        }
        if self.k == 0 || self.k > MAX_K {
            return bad(format!("k = {} not in 1..={MAX_K}", self.k));
        }
        if self.n == 0 || !self.n.is_multiple_of(8) {
            return bad(format!("N = {} must be a positive multiple of 8", self.n));
        }
        match self.n.checked_mul(u64::from(self.k)) {
            Some(b) if b == self.bits && b <= MAX_FILTER_BITS => {}
            _ => {
                return bad(format!(
                    "bits = {} must equal k·N = {}·{} and be ≤ 2^38",
                    self.bits, self.k, self.n
                ))
            }
        }
        if self.salts.len() != self.a as usize {
            return bad(format!(
                "{} salts for a = {} filters",
                self.salts.len(),
                self.a
            ));
        }
        Ok(())
    }

    /// Bit of filter `filter` for `leaf_hash`.
    pub fn bit(&self, filter: u32, leaf_hash: &[u8; 32]) -> Result<u64> {
        let salt = self.salts.get(filter as usize).ok_or(Error::OutOfRange {
            what: "filter",
            index: u64::from(filter),
            len: self.salts.len() as u64,
        })?;
        Ok(bit_index(salt, leaf_hash, self.bits))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known-answer vector, computed independently with Python:
    /// `h = hashlib.sha256(bytes(range(32)) + bytes([0xff]*32)).digest()`,
    /// `(int.from_bytes(h[:8], 'big') * bits) >> 64`.
    #[test]
    fn bit_index_known_answer() {
        let salt = Salt(core::array::from_fn(|i| i as u8));
        let leaf = [0xffu8; 32];
        let digest = Sha256::digest([&salt.0[..], &leaf[..]].concat());
        let x = u64::from_be_bytes(digest[..8].try_into().unwrap());
        for bits in [1u64, 8, 1000, 1 << 36] {
            let want = ((x as u128 * bits as u128) >> 64) as u64;
            assert_eq!(bit_index(&salt, &leaf, bits), want);
            assert!(want < bits);
        }
        assert_eq!(bit_index(&salt, &leaf, 1 << 36), KAT_2_36);
    }
    const KAT_2_36: u64 = 21_549_503_637;

    #[test]
    fn bit_index_is_roughly_uniform() {
        let salt = Salt([7; 32]);
        let bits = 16u64;
        let mut counts = [0u32; 16];
        for i in 0u32..16_000 {
            let mut h = [0u8; 32];
            h[..4].copy_from_slice(&i.to_le_bytes());
            counts[bit_index(&salt, &h, bits) as usize] += 1;
        }
        // Expected 1000 each; σ ≈ 31; 6σ tolerance.
        assert!(
            counts.iter().all(|&c| (810..=1190).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn spec_checks() {
        let ok = FilterSpec {
            hash: HASH_V1.into(),
            a: 2,
            k: 8,
            n: 16,
            bits: 128,
            salts: vec![Salt([1; 32]), Salt([2; 32])],
        };
        ok.check().unwrap();
        assert_eq!(FilterSpec::capacity_for(0), 8);
        assert_eq!(FilterSpec::capacity_for(9), 16);
        for f in [
            |s: &mut FilterSpec| s.a = 3,
            |s: &mut FilterSpec| s.bits = 127,
            |s: &mut FilterSpec| s.n = 12,
            |s: &mut FilterSpec| s.hash = "md5".into(),
            |s: &mut FilterSpec| s.k = 0,
        ] {
            let mut bad = ok.clone();
            f(&mut bad);
            assert!(bad.check().is_err(), "{bad:?}");
        }
        assert!(ok.bit(2, &[0; 32]).is_err());
        assert!(ok.bit(1, &[0; 32]).unwrap() < 128);
    }
}
