//! The salted multi-Bloom filter (SimplePIR paper §6, Fig. 4).
//!
//! An epoch holds a one-hash-function Bloom filters of `bits = k·N` bits
//! each, N ≥ |S|. Filter i uses its own 64-byte salt (unpredictable before
//! the snapshot S is fixed, so a log cannot choose entries against it) and
//! the hash
//!
//! ```text
//! x      = first 8 bytes of SHA-256(salt_i ‖ leaf_hash), big-endian u64
//! bit_i  = ⌊x · bits / 2^64⌋            (64×64 → 128-bit multiply)
//! ```
//!
//! `leaf_hash` is the RFC 6962 §2.1 leaf hash SHA-256(0x00 ‖ MerkleTreeLeaf).
//! The salt is exactly one SHA-256 block, so a builder hashing |S| entries
//! into a filter compresses the salt once and each entry with a single
//! compression ([`FilterHasher`]) — half the work of a 32-byte salt, and
//! filter insertion (a·|S| hashes) is most of an epoch build.
//!
//! The manifest carries one 32-byte `salt_seed` instead of a salts:
//! `salt_i = SHA-256(D ‖ salt_seed ‖ u32be(i) ‖ 0x00) ‖ SHA-256(D ‖ salt_seed ‖ u32be(i) ‖ 0x01)`
//! with D = `"ct-audit/filter-salt/v2"`.
//! With SHA-256 modelled as a random oracle (as Prop. 6.2 does), the
//! functions H(salt_i ‖ ·) are independent random oracles as long as the
//! salts differ, and they are unpredictable before the seed is drawn —
//! which is after the snapshot is fixed. This keeps the manifest clients
//! fetch every day at a few hundred bytes instead of 50 KB of salts.
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
pub const HASH_V1: &str = "sha256(salt64||leaf_hash)[0..8]be*bits>>64";
/// Largest number of filters a manifest may declare.
pub const MAX_FILTERS: u32 = 4096;
/// Largest k accepted.
pub const MAX_K: u32 = 64;
/// Largest filter accepted (bits); internet scale is 8·5·10^9 < 2^36.
pub const MAX_FILTER_BITS: u64 = 1 << 38;

/// The salt of one filter: one SHA-256 block.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Salt(#[serde(with = "crate::hex::array")] pub [u8; 64]);

impl std::fmt::Debug for Salt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Salt({})", crate::hex::encode(&self.0))
    }
}

/// Domain separator of salt derivation.
pub const SALT_DOMAIN: &[u8] = b"ct-audit/filter-salt/v2";

/// `salt_i` derived from the epoch's salt seed (module docs).
pub fn derive_salt(salt_seed: &[u8; 32], i: u32) -> Salt {
    let half = |c: u8| -> [u8; 32] {
        Sha256::new()
            .chain_update(SALT_DOMAIN)
            .chain_update(salt_seed)
            .chain_update(i.to_be_bytes())
            .chain_update([c])
            .finalize()
            .into()
    };
    let mut s = [0u8; 64];
    s[..32].copy_from_slice(&half(0));
    s[32..].copy_from_slice(&half(1));
    Salt(s)
}

/// Bit of filter `salt` (of `bits` bits) that `leaf_hash` maps to (see the
/// module docs). `bits` must be ≥ 1.
pub fn bit_index(salt: &Salt, leaf_hash: &[u8; 32], bits: u64) -> u64 {
    FilterHasher::new(salt).bit(leaf_hash, bits)
}

/// One filter's hash with the salt block already compressed: each
/// [`FilterHasher::bit`] costs one SHA-256 compression.
#[derive(Clone)]
pub struct FilterHasher {
    after_salt: Sha256,
}

impl std::fmt::Debug for FilterHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FilterHasher")
    }
}

impl FilterHasher {
    /// Compresses the salt.
    pub fn new(salt: &Salt) -> FilterHasher {
        FilterHasher {
            after_salt: Sha256::new().chain_update(salt.0),
        }
    }

    /// [`bit_index`] for this filter's salt.
    pub fn bit(&self, leaf_hash: &[u8; 32], bits: u64) -> u64 {
        let digest = self.after_salt.clone().chain_update(leaf_hash).finalize();
        let mut x = [0u8; 8];
        x.copy_from_slice(&digest[..8]);
        ((u128::from(u64::from_be_bytes(x)) * u128::from(bits)) >> 64) as u64
    }
}

/// The filter parameters of an epoch (serialized without the derived
/// salts; parsing derives and checks them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "FilterWire", into = "FilterWire")]
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
    /// Seed of the salts (fresh per epoch).
    pub salt_seed: [u8; 32],
    /// One salt per filter, in filter order, derived from `salt_seed`.
    pub salts: Vec<Salt>,
}

/// The serialized form of [`FilterSpec`].
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilterWire {
    hash: String,
    a: u32,
    k: u32,
    n: u64,
    bits: u64,
    #[serde(with = "crate::hex::array")]
    salt_seed: [u8; 32],
}

impl TryFrom<FilterWire> for FilterSpec {
    type Error = Error;
    fn try_from(w: FilterWire) -> Result<FilterSpec> {
        if w.a == 0 || w.a > MAX_FILTERS {
            return Err(Error::Invalid(format!(
                "a = {} not in 1..={MAX_FILTERS}",
                w.a
            )));
        }
        let f = FilterSpec {
            salts: (0..w.a).map(|i| derive_salt(&w.salt_seed, i)).collect(),
            hash: w.hash,
            a: w.a,
            k: w.k,
            n: w.n,
            bits: w.bits,
            salt_seed: w.salt_seed,
        };
        f.check()?;
        Ok(f)
    }
}

impl From<FilterSpec> for FilterWire {
    fn from(f: FilterSpec) -> FilterWire {
        FilterWire {
            hash: f.hash,
            a: f.a,
            k: f.k,
            n: f.n,
            bits: f.bits,
            salt_seed: f.salt_seed,
        }
    }
}

impl FilterSpec {
    /// The spec of a filters of k·N bits with salts derived from
    /// `salt_seed`.
    pub fn new(a: u32, k: u32, n: u64, salt_seed: [u8; 32]) -> Result<FilterSpec> {
        let bits = n
            .checked_mul(u64::from(k))
            .ok_or_else(|| Error::Invalid("k·N overflows".into()))?;
        FilterWire {
            hash: HASH_V1.to_owned(),
            a,
            k,
            n,
            bits,
            salt_seed,
        }
        .try_into()
    }

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
        if self.salts.len() != self.a as usize
            || self
                .salts
                .iter()
                .enumerate()
                .any(|(i, s)| *s != derive_salt(&self.salt_seed, i as u32))
        {
            return bad("salts are not the ones derived from salt_seed".into());
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
    /// `h = hashlib.sha256(bytes(range(64)) + bytes([0xff]*32)).digest()`,
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
    const KAT_2_36: u64 = 59_379_422_954;

    /// Known answers computed with Python's hashlib (docs/protocol.md).
    #[test]
    fn derivations_known_answers() {
        let seed: [u8; 32] = core::array::from_fn(|i| i as u8);
        assert_eq!(
            crate::hex::encode(&derive_salt(&seed, 5).0),
            "9202f161f224071d7a62c5a87a0c9f4728165e5dae92e34622bc04fba54c16cc\
             f43a94451e548ce72e3959c17abe43680112aed3dd9f0bab5a90f9392b92130b"
        );
        assert_eq!(
            crate::hex::encode(&crate::manifest::derive_db_seed(&seed, 3)),
            "52395dc24abee10bbc9022d9fc33bfe5f750fc73dbfa7bd586eb1c9d9994ecc2"
        );
    }

    #[test]
    fn bit_index_is_roughly_uniform() {
        let salt = Salt([7; 64]);
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
        let ok = FilterSpec::new(2, 8, 16, [1; 32]).unwrap();
        ok.check().unwrap();
        assert_eq!(ok.bits, 128);
        assert_ne!(ok.salts[0], ok.salts[1]);
        // Round trip through JSON re-derives the salts.
        let json = serde_json::to_string(&ok).unwrap();
        assert!(!json.contains("salts"));
        assert_eq!(serde_json::from_str::<FilterSpec>(&json).unwrap(), ok);
        assert_eq!(FilterSpec::capacity_for(0), 8);
        assert_eq!(FilterSpec::capacity_for(9), 16);
        for f in [
            |s: &mut FilterSpec| s.a = 3,
            |s: &mut FilterSpec| s.bits = 127,
            |s: &mut FilterSpec| s.n = 12,
            |s: &mut FilterSpec| s.hash = "md5".into(),
            |s: &mut FilterSpec| s.k = 0,
            |s: &mut FilterSpec| s.salts[1] = Salt([9; 64]),
            |s: &mut FilterSpec| s.salt_seed = [2; 32],
        ] {
            let mut bad = ok.clone();
            f(&mut bad);
            assert!(bad.check().is_err(), "{bad:?}");
        }
        assert!(ok.bit(2, &[0; 32]).is_err());
        assert!(ok.bit(1, &[0; 32]).unwrap() < 128);
    }
}
