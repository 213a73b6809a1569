//! The salted multi-Bloom filter (SimplePIR paper §6, Fig. 4).
//!
//! An epoch holds a one-hash-function Bloom filters of `bits = k·N` bits
//! each, N ≥ |S|. Filter i has its own hash function h_i, drawn after the
//! snapshot S is fixed (so a log cannot choose entries against it), from
//! one fresh 32-byte `salt_seed` per epoch. `leaf_hash` is the RFC 6962
//! §2.1 leaf hash SHA-256(0x00 ‖ MerkleTreeLeaf). Two derivations exist;
//! the manifest names the one an epoch uses ([`HashVersion`]).
//!
//! **[`HASH_V2`]** (what servers build): one keyed hash per entry, expanded
//! to all a filters by a stream cipher.
//!
//! ```text
//! key64 = SHA-256(E ‖ salt_seed ‖ 0x00) ‖ SHA-256(E ‖ salt_seed ‖ 0x01)
//!         E = "ct-audit/entry-key/v1"
//! k_h   = SHA-256(key64 ‖ leaf_hash)                      (32 bytes)
//! x_i   = little-endian u64 of bytes 8i..8i+8 of the ChaCha20 keystream
//!         (RFC 8439) under key k_h, nonce 0^12, block counter from 0
//! bit_i = ⌊x_i · bits / 2^64⌋            (64×64 → 128-bit multiply)
//! ```
//!
//! A builder compresses key64 once and then pays one SHA-256 compression
//! per entry plus one ChaCha20 block per entry and 8 filters; a client
//! computes `k_h` and the single block ⌊i/8⌋ it needs. Why the filters
//! still behave as independent random functions (Prop. 6.2) is argued in
//! docs/protocol.md §1: in the random-oracle model for SHA-256, every
//! entry's k_h is a fresh uniform key, so its a outputs are a ChaCha20
//! keystream under a uniform key — indistinguishable from a uniform
//! strings unless ChaCha20 is broken — and filter i reads its own 8 bytes.
//!
//! **[`HASH_V1`]** (still accepted for reading): one SHA-256 per entry and
//! filter.
//!
//! ```text
//! salt_i = SHA-256(D ‖ salt_seed ‖ u32be(i) ‖ 0x00) ‖ SHA-256(D ‖ salt_seed ‖ u32be(i) ‖ 0x01)
//!          D = "ct-audit/filter-salt/v2"
//! x_i    = first 8 bytes of SHA-256(salt_i ‖ leaf_hash), big-endian u64
//! bit_i  = ⌊x_i · bits / 2^64⌋
//! ```
//!
//! With SHA-256 modelled as a random oracle the functions H(salt_i ‖ ·) are
//! independent random oracles as long as the salts differ. Building costs
//! a·|S| compressions, which is why V2 replaced it.
//!
//! Both: the multiply-shift maps 2^64 equally likely x onto `bits` buckets
//! of ⌊2^64/bits⌋ or ⌈2^64/bits⌉ values, so each index has probability
//! within `bits/2^64` (relative) of 1/bits: ≤ 2^-26 for the largest filter
//! allowed (2^38 bits), negligible next to the false-positive rate ½ of
//! Prop. 6.2. One seed instead of a salts keeps the manifest clients fetch
//! every day at a few hundred bytes.
//!
//! Defaults (Prop. 6.2 with |U| = 2^256, λ = 128): a = 768, k = 8 give an
//! adversarial false-positive rate ≤ ½ per query except with probability
//! 2^-128 over the hash functions.

use ct_core::LeafHash;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// Default number of filters a (Prop. 6.2).
pub const DEFAULT_FILTERS: u32 = 768;
/// Default bits per element k (Prop. 6.2).
pub const DEFAULT_K: u32 = 8;
/// Name of the per-filter SHA-256 derivation, as written in the manifest.
pub const HASH_V1: &str = "sha256(salt64||leaf_hash)[0..8]be*bits>>64";
/// Name of the keyed-hash-then-ChaCha20 derivation, as written in the
/// manifest.
pub const HASH_V2: &str = "chacha20(sha256(key64||leaf_hash))[8i..8i+8]le*bits>>64";
/// Largest number of filters a manifest may declare.
pub const MAX_FILTERS: u32 = 4096;
/// Largest k accepted.
pub const MAX_K: u32 = 64;
/// Largest filter accepted (bits); internet scale is 8·5·10^9 < 2^36.
pub const MAX_FILTER_BITS: u64 = 1 << 38;

/// The bit-index derivation of an epoch (the manifest's `filter.hash`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HashVersion {
    /// [`HASH_V1`]: SHA-256 per entry and filter.
    V1,
    /// [`HASH_V2`]: SHA-256 per entry, ChaCha20 across filters.
    V2,
}

impl HashVersion {
    /// The name written in the manifest.
    pub fn name(self) -> &'static str {
        match self {
            HashVersion::V1 => HASH_V1,
            HashVersion::V2 => HASH_V2,
        }
    }

    /// Parses a manifest's `filter.hash`.
    pub fn from_name(name: &str) -> Result<HashVersion> {
        match name {
            HASH_V1 => Ok(HashVersion::V1),
            HASH_V2 => Ok(HashVersion::V2),
            _ => Err(Error::Invalid(format!("unknown filter hash {name:?}"))),
        }
    }
}

/// A 64-byte key block: a V1 filter salt or the V2 entry key (one SHA-256
/// block each).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Salt(#[serde(with = "crate::hex::array")] pub [u8; 64]);

impl std::fmt::Debug for Salt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Salt({})", crate::hex::encode(&self.0))
    }
}

/// Domain separator of V1 salt derivation.
pub const SALT_DOMAIN: &[u8] = b"ct-audit/filter-salt/v2";
/// Domain separator of the V2 entry key.
pub const ENTRY_KEY_DOMAIN: &[u8] = b"ct-audit/entry-key/v1";

fn key_block(domain: &[u8], salt_seed: &[u8; 32], index: Option<u32>) -> Salt {
    let half = |c: u8| -> [u8; 32] {
        let mut h = Sha256::new().chain_update(domain).chain_update(salt_seed);
        if let Some(i) = index {
            h.update(i.to_be_bytes());
        }
        h.chain_update([c]).finalize().into()
    };
    let mut s = [0u8; 64];
    s[..32].copy_from_slice(&half(0));
    s[32..].copy_from_slice(&half(1));
    Salt(s)
}

/// V1: `salt_i` derived from the epoch's salt seed (module docs).
pub fn derive_salt(salt_seed: &[u8; 32], i: u32) -> Salt {
    key_block(SALT_DOMAIN, salt_seed, Some(i))
}

/// V2: `key64` derived from the epoch's salt seed (module docs).
pub fn derive_entry_key(salt_seed: &[u8; 32]) -> Salt {
    key_block(ENTRY_KEY_DOMAIN, salt_seed, None)
}

/// ⌊x · bits / 2^64⌋.
#[inline(always)]
pub fn mul_shift(x: u64, bits: u64) -> u64 {
    ((u128::from(x) * u128::from(bits)) >> 64) as u64
}

/// V1: bit of filter `salt` (of `bits` bits) that `leaf_hash` maps to (see
/// the module docs). `bits` must be ≥ 1.
pub fn bit_index(salt: &Salt, leaf_hash: &LeafHash, bits: u64) -> u64 {
    FilterHasher::new(salt).bit(leaf_hash, bits)
}

/// V1: one filter's hash with the salt block already compressed: each
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
    pub fn bit(&self, leaf_hash: &LeafHash, bits: u64) -> u64 {
        let digest = self
            .after_salt
            .clone()
            .chain_update(leaf_hash.as_bytes())
            .finalize();
        let mut x = [0u8; 8];
        x.copy_from_slice(&digest[..8]);
        mul_shift(u64::from_be_bytes(x), bits)
    }
}

/// V2: the per-entry ChaCha20 key k_h as eight little-endian words.
pub type EntryKey = [u32; 8];

/// V2: k_h = SHA-256(key64 ‖ leaf_hash) with key64 already compressed, so
/// each [`EntryKeyer::key`] costs one SHA-256 compression.
#[derive(Clone)]
pub struct EntryKeyer {
    after_key: Sha256,
}

impl std::fmt::Debug for EntryKeyer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EntryKeyer")
    }
}

impl EntryKeyer {
    /// Compresses key64.
    pub fn new(key64: &Salt) -> EntryKeyer {
        EntryKeyer {
            after_key: Sha256::new().chain_update(key64.0),
        }
    }

    /// k_h for `leaf_hash`.
    pub fn key(&self, leaf_hash: &LeafHash) -> EntryKey {
        let d = self
            .after_key
            .clone()
            .chain_update(leaf_hash.as_bytes())
            .finalize();
        core::array::from_fn(|w| {
            u32::from_le_bytes([d[4 * w], d[4 * w + 1], d[4 * w + 2], d[4 * w + 3]])
        })
    }
}

/// "expand 32-byte k" (RFC 8439 §2.3).
const SIGMA: [u32; 4] = [0x6170_7865, 0x3320_646e, 0x7962_2d32, 0x6b20_6574];

#[inline(always)]
fn quarter(s: &mut [u32; 16], a: usize, b: usize, c: usize, d: usize) {
    s[a] = s[a].wrapping_add(s[b]);
    s[d] = (s[d] ^ s[a]).rotate_left(16);
    s[c] = s[c].wrapping_add(s[d]);
    s[b] = (s[b] ^ s[c]).rotate_left(12);
    s[a] = s[a].wrapping_add(s[b]);
    s[d] = (s[d] ^ s[a]).rotate_left(8);
    s[c] = s[c].wrapping_add(s[d]);
    s[b] = (s[b] ^ s[c]).rotate_left(7);
}

/// One ChaCha20 block (RFC 8439 §2.3) under `key` with nonce 0 and block
/// counter `counter`, as sixteen little-endian words.
pub fn chacha20_block(key: &EntryKey, counter: u32) -> [u32; 16] {
    let mut s = [0u32; 16];
    s[..4].copy_from_slice(&SIGMA);
    s[4..12].copy_from_slice(key);
    s[12] = counter;
    let init = s;
    for _ in 0..10 {
        quarter(&mut s, 0, 4, 8, 12);
        quarter(&mut s, 1, 5, 9, 13);
        quarter(&mut s, 2, 6, 10, 14);
        quarter(&mut s, 3, 7, 11, 15);
        quarter(&mut s, 0, 5, 10, 15);
        quarter(&mut s, 1, 6, 11, 12);
        quarter(&mut s, 2, 7, 8, 13);
        quarter(&mut s, 3, 4, 9, 14);
    }
    for (w, i) in s.iter_mut().zip(init) {
        *w = w.wrapping_add(i);
    }
    s
}

/// V2: x_i for filter `filter` under entry key `key` (module docs): word
/// pair `2·(i mod 8)` of block ⌊i/8⌋.
pub fn v2_word(key: &EntryKey, filter: u32) -> u64 {
    let b = chacha20_block(key, filter / 8);
    let j = 2 * (filter % 8) as usize;
    u64::from(b[j]) | u64::from(b[j + 1]) << 32
}

/// V2: bit of filter `filter` (of `bits` bits) that `leaf_hash` maps to
/// under the entry key `key64` (module docs). `bits` must be ≥ 1.
pub fn bit_index_v2(key64: &Salt, filter: u32, leaf_hash: &LeafHash, bits: u64) -> u64 {
    mul_shift(
        v2_word(&EntryKeyer::new(key64).key(leaf_hash), filter),
        bits,
    )
}

/// Entries whose ChaCha20 blocks [`chacha20_lanes`] computes at once.
pub const LANES: usize = 16;

/// [`LANES`] entry keys, word-major: `keys[w][l]` is word w of lane l.
pub type KeyLanes = [[u32; LANES]; 8];

/// Block `counter` of [`LANES`] ChaCha20 keystreams at once (one per key
/// lane), word-major: `out[w][l]` is word w of lane l's block — the same
/// words as [`chacha20_block`], laid out so the compiler keeps one
/// vector per state word. How a builder evaluates V2 for 8 filters at a
/// time. Plain Rust, vectorized for the build target (SSE2 on any
/// x86-64): `unsafe` and run-time CPU dispatch live only in pir-core's
/// kernels, and an AVX2 build of this loop measured about 2.4× faster on
/// the ChaCha20 part, ≈ 4 ns per (entry, filter) of the fill.
pub fn chacha20_lanes(keys: &KeyLanes, counter: u32) -> [[u32; LANES]; 16] {
    chacha20_lanes_portable(keys, counter)
}

/// [`chacha20_lanes`] in plain Rust (auto-vectorized for the target).
#[inline(always)]
fn chacha20_lanes_portable(keys: &KeyLanes, counter: u32) -> [[u32; LANES]; 16] {
    let mut s = [[0u32; LANES]; 16];
    for (w, c) in SIGMA.iter().enumerate() {
        s[w] = [*c; LANES];
    }
    s[4..12].copy_from_slice(keys);
    s[12] = [counter; LANES];
    let init = s;
    // One loop over the lanes per quarter round, indexing four state
    // words: the shape the compiler turns into vector instructions.
    #[inline(always)]
    #[allow(clippy::needless_range_loop)]
    fn q(s: &mut [[u32; LANES]; 16], a: usize, b: usize, c: usize, d: usize) {
        for l in 0..LANES {
            s[a][l] = s[a][l].wrapping_add(s[b][l]);
            s[d][l] = (s[d][l] ^ s[a][l]).rotate_left(16);
            s[c][l] = s[c][l].wrapping_add(s[d][l]);
            s[b][l] = (s[b][l] ^ s[c][l]).rotate_left(12);
            s[a][l] = s[a][l].wrapping_add(s[b][l]);
            s[d][l] = (s[d][l] ^ s[a][l]).rotate_left(8);
            s[c][l] = s[c][l].wrapping_add(s[d][l]);
            s[b][l] = (s[b][l] ^ s[c][l]).rotate_left(7);
        }
    }
    for _ in 0..10 {
        q(&mut s, 0, 4, 8, 12);
        q(&mut s, 1, 5, 9, 13);
        q(&mut s, 2, 6, 10, 14);
        q(&mut s, 3, 7, 11, 15);
        q(&mut s, 0, 5, 10, 15);
        q(&mut s, 1, 6, 11, 12);
        q(&mut s, 2, 7, 8, 13);
        q(&mut s, 3, 4, 9, 14);
    }
    for (w, i) in s.iter_mut().zip(init.iter()) {
        for (x, y) in w.iter_mut().zip(i) {
            *x = x.wrapping_add(*y);
        }
    }
    s
}

/// The filter parameters of an epoch (serialized without the derived
/// keys; parsing derives and checks them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "FilterWire", into = "FilterWire")]
pub struct FilterSpec {
    /// Bit-index derivation (serialized as [`HASH_V1`] or [`HASH_V2`]).
    pub hash: HashVersion,
    /// a: number of filters.
    pub a: u32,
    /// k: bits per element.
    pub k: u32,
    /// N: the capacity, ≥ |S| and a multiple of 8 (so each filter is a
    /// whole number of 64-bit words).
    pub n: u64,
    /// Bits per filter, k·N.
    pub bits: u64,
    /// Seed of the hash functions (fresh per epoch).
    pub salt_seed: [u8; 32],
    /// V1: one salt per filter, in filter order, derived from `salt_seed`
    /// (empty under V2).
    pub salts: Vec<Salt>,
    /// V2: key64, derived from `salt_seed` (`None` under V1).
    pub entry_key: Option<Salt>,
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
        let hash = HashVersion::from_name(&w.hash)?;
        let f = FilterSpec {
            salts: match hash {
                HashVersion::V1 => (0..w.a).map(|i| derive_salt(&w.salt_seed, i)).collect(),
                HashVersion::V2 => Vec::new(),
            },
            entry_key: (hash == HashVersion::V2).then(|| derive_entry_key(&w.salt_seed)),
            hash,
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
            hash: f.hash.name().to_owned(),
            a: f.a,
            k: f.k,
            n: f.n,
            bits: f.bits,
            salt_seed: f.salt_seed,
        }
    }
}

impl FilterSpec {
    /// The spec of a filters of k·N bits hashed with [`HASH_V2`] under
    /// keys derived from `salt_seed` (what a server builds).
    pub fn new(a: u32, k: u32, n: u64, salt_seed: [u8; 32]) -> Result<FilterSpec> {
        FilterSpec::with_hash(HashVersion::V2, a, k, n, salt_seed)
    }

    /// The spec of a filters of k·N bits hashed with `hash` under keys
    /// derived from `salt_seed`.
    pub fn with_hash(
        hash: HashVersion,
        a: u32,
        k: u32,
        n: u64,
        salt_seed: [u8; 32],
    ) -> Result<FilterSpec> {
        let bits = n
            .checked_mul(u64::from(k))
            .ok_or_else(|| Error::Invalid("k·N overflows".into()))?;
        FilterWire {
            hash: hash.name().to_owned(),
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
        let keys_ok = match self.hash {
            HashVersion::V1 => {
                self.entry_key.is_none()
                    && self.salts.len() == self.a as usize
                    && self
                        .salts
                        .iter()
                        .enumerate()
                        .all(|(i, s)| *s == derive_salt(&self.salt_seed, i as u32))
            }
            HashVersion::V2 => {
                self.salts.is_empty() && self.entry_key == Some(derive_entry_key(&self.salt_seed))
            }
        };
        if !keys_ok {
            return bad("keys are not the ones derived from salt_seed".into());
        }
        Ok(())
    }

    /// Bit of filter `filter` for `leaf_hash`.
    pub fn bit(&self, filter: u32, leaf_hash: &LeafHash) -> Result<u64> {
        if filter >= self.a {
            return Err(Error::OutOfRange {
                what: "filter",
                index: u64::from(filter),
                len: u64::from(self.a),
            });
        }
        match (&self.entry_key, self.salts.get(filter as usize)) {
            (Some(key64), _) => Ok(bit_index_v2(key64, filter, leaf_hash, self.bits)),
            (None, Some(salt)) => Ok(bit_index(salt, leaf_hash, self.bits)),
            (None, None) => Err(Error::Invalid("filter keys missing".into())),
        }
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
            assert_eq!(bit_index(&salt, &leaf.into(), bits), want);
            assert!(want < bits);
        }
        assert_eq!(bit_index(&salt, &leaf.into(), 1 << 36), KAT_2_36);
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

    /// The V2 known answers of `tests/data/filter_hash_v2.json`, written
    /// by `tests/data/filter_hash_v2.py` with Python's hashlib and the
    /// `cryptography` package's ChaCha20.
    #[test]
    fn v2_known_answers() {
        let kat: serde_json::Value =
            serde_json::from_str(include_str!("../tests/data/filter_hash_v2.json")).unwrap();
        let hex32 = |v: &serde_json::Value| -> [u8; 32] {
            let mut out = [0u8; 32];
            let s = v.as_str().unwrap();
            for (i, o) in out.iter_mut().enumerate() {
                *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
            }
            out
        };
        let num = |v: &serde_json::Value| -> u64 { v.as_str().unwrap().parse().unwrap() };
        let seed = hex32(&kat["salt_seed"]);
        let key64 = derive_entry_key(&seed);
        assert_eq!(crate::hex::encode(&key64.0), kat["key64"].as_str().unwrap());
        let keyer = EntryKeyer::new(&key64);
        let vectors = kat["vectors"].as_array().unwrap();
        assert_eq!(vectors.len(), 40);
        for v in vectors {
            let leaf = hex32(&v["leaf_hash"]);
            let key = keyer.key(&leaf.into());
            let want_key = hex32(&v["entry_key"]);
            let key_bytes: Vec<u8> = key.iter().flat_map(|w| w.to_le_bytes()).collect();
            assert_eq!(key_bytes, want_key);
            let filter = v["filter"].as_u64().unwrap() as u32;
            assert_eq!(v2_word(&key, filter), num(&v["x"]), "filter {filter}");
            for pair in v["bits"].as_array().unwrap() {
                let (bits, want) = (num(&pair[0]), num(&pair[1]));
                assert_eq!(bit_index_v2(&key64, filter, &leaf.into(), bits), want);
                let spec = FilterSpec::new(4096, 1, bits, seed);
                if let Ok(spec) = spec {
                    assert_eq!(spec.bit(filter, &leaf.into()).unwrap(), want);
                }
            }
        }
    }

    /// The RustCrypto `chacha20` crate (its RNG: 64-bit counter and stream
    /// 0, the same state words as nonce 0 below 2^32 blocks) agrees with
    /// [`chacha20_block`] word for word.
    #[test]
    fn chacha20_matches_rustcrypto() {
        use chacha20::rand_core::{Rng, SeedableRng};
        for t in 0u8..4 {
            let seed: [u8; 32] = core::array::from_fn(|i| (i as u8).wrapping_mul(37) ^ t);
            let key: EntryKey = core::array::from_fn(|w| {
                u32::from_le_bytes(seed[4 * w..4 * w + 4].try_into().unwrap())
            });
            for filter in [0u32, 3, 8, 100, 767, 4095] {
                let mut rng = chacha20::ChaCha20Rng::from_seed(seed);
                rng.set_word_pos(2 * u128::from(filter));
                assert_eq!(v2_word(&key, filter), rng.next_u64());
            }
        }
    }

    #[test]
    fn lanes_match_scalar() {
        let keys: Vec<EntryKey> = (0..LANES as u32)
            .map(|l| core::array::from_fn(|w| l.wrapping_mul(0x9e37_79b9) ^ (w as u32) << 8))
            .collect();
        let lanes: KeyLanes = core::array::from_fn(|w| core::array::from_fn(|l| keys[l][w]));
        for counter in [0u32, 1, 95, 511] {
            let out = chacha20_lanes(&lanes, counter);
            assert_eq!(out, chacha20_lanes_portable(&lanes, counter));
            for (l, key) in keys.iter().enumerate() {
                let one = chacha20_block(key, counter);
                for w in 0..16 {
                    assert_eq!(out[w][l], one[w]);
                }
            }
        }
    }

    #[test]
    fn bit_index_is_roughly_uniform() {
        let salt = Salt([7; 64]);
        let bits = 16u64;
        for version in [HashVersion::V1, HashVersion::V2] {
            let mut counts = [0u32; 16];
            for i in 0u32..16_000 {
                let mut h = [0u8; 32];
                h[..4].copy_from_slice(&i.to_le_bytes());
                let b = match version {
                    HashVersion::V1 => bit_index(&salt, &h.into(), bits),
                    HashVersion::V2 => bit_index_v2(&salt, i % 768, &h.into(), bits),
                };
                counts[b as usize] += 1;
            }
            // Expected 1000 each; σ ≈ 31; 6σ tolerance.
            assert!(
                counts.iter().all(|&c| (810..=1190).contains(&c)),
                "{version:?} {counts:?}"
            );
        }
    }

    /// Under V2 the a filters of one entry are as independent as under V1:
    /// for pairs of filters, the bits of 4000 entries in 4-bit filters
    /// agree at the rate of independent uniform indexes (1/4).
    #[test]
    fn v2_filters_look_independent() {
        let spec = FilterSpec::new(768, 1, 8, [3; 32]).unwrap();
        let bits = 4u64;
        let keyer = EntryKeyer::new(spec.entry_key.as_ref().unwrap());
        for (f, g) in [(0u32, 1u32), (0, 8), (7, 8), (5, 767)] {
            let same = (0u32..4000)
                .filter(|i| {
                    let mut h = [0u8; 32];
                    h[..4].copy_from_slice(&i.to_be_bytes());
                    let key = keyer.key(&h.into());
                    mul_shift(v2_word(&key, f), bits) == mul_shift(v2_word(&key, g), bits)
                })
                .count();
            // Expected 1000; σ ≈ 27; 6σ tolerance.
            assert!((840..=1160).contains(&same), "{f},{g}: {same}");
        }
    }

    #[test]
    fn spec_checks() {
        for version in [HashVersion::V1, HashVersion::V2] {
            let ok = FilterSpec::with_hash(version, 2, 8, 16, [1; 32]).unwrap();
            ok.check().unwrap();
            assert_eq!(ok.bits, 128);
            assert_eq!(ok.hash, version);
            // Round trip through JSON re-derives the keys.
            let json = serde_json::to_string(&ok).unwrap();
            assert!(json.contains(version.name()), "{json}");
            assert!(!json.contains("salts") && !json.contains("entry_key"));
            assert_eq!(serde_json::from_str::<FilterSpec>(&json).unwrap(), ok);
            let mut bad_name: serde_json::Value = serde_json::from_str(&json).unwrap();
            bad_name["hash"] = "md5".into();
            assert!(serde_json::from_value::<FilterSpec>(bad_name).is_err());
            for f in [
                |s: &mut FilterSpec| s.a = 0,
                |s: &mut FilterSpec| s.bits = 127,
                |s: &mut FilterSpec| s.n = 12,
                |s: &mut FilterSpec| {
                    s.hash = match s.hash {
                        HashVersion::V1 => HashVersion::V2,
                        HashVersion::V2 => HashVersion::V1,
                    }
                },
                |s: &mut FilterSpec| s.k = 0,
                |s: &mut FilterSpec| s.salts.push(Salt([9; 64])),
                |s: &mut FilterSpec| s.entry_key = Some(Salt([9; 64])),
                |s: &mut FilterSpec| s.salt_seed = [2; 32],
            ] {
                let mut bad = ok.clone();
                f(&mut bad);
                assert!(bad.check().is_err(), "{bad:?}");
            }
            assert!(ok.bit(2, &LeafHash::new([0; 32])).is_err());
            assert!(ok.bit(1, &LeafHash::new([0; 32])).unwrap() < 128);
        }
        let mut v1 = FilterSpec::with_hash(HashVersion::V1, 2, 8, 16, [1; 32]).unwrap();
        assert_ne!(v1.salts[0], v1.salts[1]);
        v1.a = 3; // one salt short
        assert!(v1.check().is_err());
        assert_eq!(
            FilterSpec::new(2, 8, 16, [1; 32]).unwrap().hash,
            HashVersion::V2
        );
        assert_eq!(FilterSpec::capacity_for(0), 8);
        assert_eq!(FilterSpec::capacity_for(9), 16);
    }
}
