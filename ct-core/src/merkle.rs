//! Merkle tree hashing, proofs and tiles.
//!
//! * Hashing follows RFC 6962 §2.1 (identical to RFC 9162 §2.1.1): the hash of
//!   the empty tree is `SHA-256()`, a leaf hash is `SHA-256(0x00 ‖ leaf)` and
//!   an interior node is `SHA-256(0x01 ‖ left ‖ right)`, where the left
//!   subtree of an `n`-leaf tree holds the largest power of two smaller than
//!   `n` leaves.
//! * [`root_from_leaf_hashes`] computes the Merkle Tree Hash iteratively and
//!   [`CompactRange`] computes it in a streaming fashion (O(log n) state).
//! * [`verify_inclusion`] implements RFC 9162 §2.1.3.2 and
//!   [`verify_consistency`] implements RFC 9162 §2.1.4.2.
//! * [`TileId`], [`parse_tile_path`], [`tiles_for_size`],
//!   [`data_tiles_for_range`] and [`root_from_tiles`] implement the tile
//!   layout of c2sp.org/tlog-tiles as used by c2sp.org/static-ct-api.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::ids::LeafHash;

/// Length of a SHA-256 hash.
pub const HASH_LEN: usize = 32;

/// A SHA-256 Merkle tree hash.
pub type Hash = [u8; HASH_LEN];

/// Domain-separation prefix of leaf hashes (RFC 6962 §2.1).
pub const LEAF_PREFIX: u8 = 0x00;
/// Domain-separation prefix of interior node hashes (RFC 6962 §2.1).
pub const NODE_PREFIX: u8 = 0x01;

/// Maximum number of hashes accepted in an inclusion or consistency proof.
///
/// A proof for a tree of at most 2^64 leaves has at most 64 (inclusion) or
/// 2·64 (consistency) entries; anything longer is garbage.
pub const MAX_PROOF_LEN: usize = 128;

/// The Merkle Tree Hash of the empty tree: `SHA-256()` (RFC 6962 §2.1).
pub fn empty_root() -> Hash {
    Sha256::digest([]).into()
}

/// `SHA-256(0x00 ‖ leaf)`: the hash of one leaf (RFC 6962 §2.1).
pub fn leaf_hash(leaf: &[u8]) -> LeafHash {
    let mut h = Sha256::new();
    h.update([LEAF_PREFIX]);
    h.update(leaf);
    LeafHash::new(h.finalize().into())
}

/// `SHA-256(0x01 ‖ left ‖ right)`: the hash of an interior node (RFC 6962 §2.1).
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut h = Sha256::new();
    h.update([NODE_PREFIX]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// The Merkle Tree Hash (RFC 6962 §2.1) of a list of leaf hashes.
///
/// Computed bottom-up, level by level: adjacent pairs are hashed together and
/// an unpaired last node is carried up unchanged, which yields exactly the
/// RFC's left-balanced tree. Uses O(n) memory.
///
/// The input may equally be the roots of consecutive *perfect* subtrees of
/// equal height (for example the hashes of a tile); the result is then the
/// hash of the subtree they span.
pub fn root_from_leaf_hashes(leaf_hashes: &[Hash]) -> Hash {
    if leaf_hashes.is_empty() {
        return empty_root();
    }
    let mut level: Vec<Hash> = leaf_hashes.to_vec();
    while level.len() > 1 {
        let mut next = Vec::with_capacity(level.len().div_ceil(2));
        for pair in level.chunks(2) {
            match pair {
                [l, r] => next.push(node_hash(l, r)),
                [single] => next.push(*single),
                _ => {}
            }
        }
        level = next;
    }
    level.first().copied().unwrap_or_else(empty_root)
}

/// Streaming Merkle Tree Hash: a compact range `[0, size)`.
///
/// Holds the roots of the maximal perfect subtrees that make up the tree
/// (one per set bit of `size`, largest first), so it needs O(log n) memory
/// however many leaves are appended. This is what the ingester keeps while it
/// feeds millions of leaf hashes; [`CompactRange::root`] is the RFC 6962 §2.1
/// Merkle Tree Hash for the current size.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompactRange {
    size: u64,
    /// Perfect subtree roots, left to right (largest subtree first).
    nodes: Vec<Hash>,
}

impl CompactRange {
    /// The empty tree.
    pub fn new() -> Self {
        CompactRange::default()
    }

    /// Rebuilds a range from a stored `size` and its subtree roots (as
    /// returned by [`CompactRange::nodes`]). Fails unless there is exactly one
    /// root per set bit of `size`.
    pub fn from_parts(size: u64, nodes: Vec<Hash>) -> Result<Self> {
        if nodes.len() != size.count_ones() as usize {
            return Err(Error::InvalidArgument(format!(
                "a compact range of size {size} needs {} subtree roots, got {}",
                size.count_ones(),
                nodes.len()
            )));
        }
        Ok(CompactRange { size, nodes })
    }

    /// Number of leaves appended so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The perfect subtree roots, largest (leftmost) first.
    pub fn nodes(&self) -> &[Hash] {
        &self.nodes
    }

    /// Appends one leaf hash (a [`LeafHash`], or the raw bytes of a hash
    /// tile). Fails only if the tree already has 2^64-1 leaves.
    pub fn push(&mut self, leaf_hash: impl Into<Hash>) -> Result<()> {
        let new_size = self
            .size
            .checked_add(1)
            .ok_or_else(|| Error::InvalidArgument("compact range is full".into()))?;
        let mut hash = leaf_hash.into();
        // Each trailing one bit of the old size is a perfect subtree of the
        // same height as `hash`: merge them, right to left.
        let mut s = self.size;
        while s & 1 == 1 {
            match self.nodes.pop() {
                Some(left) => hash = node_hash(&left, &hash),
                // Unreachable: nodes.len() == size.count_ones() is an invariant.
                None => break,
            }
            s >>= 1;
        }
        self.nodes.push(hash);
        self.size = new_size;
        Ok(())
    }

    /// Appends every leaf hash of `leaf_hashes`.
    pub fn extend<I: IntoIterator<Item = impl Into<Hash>>>(
        &mut self,
        leaf_hashes: I,
    ) -> Result<()> {
        for h in leaf_hashes {
            self.push(h)?;
        }
        Ok(())
    }

    /// The Merkle Tree Hash of the leaves appended so far.
    pub fn root(&self) -> Hash {
        let mut iter = self.nodes.iter().rev();
        let Some(last) = iter.next() else {
            return empty_root();
        };
        iter.fold(*last, |right, left| node_hash(left, &right))
    }
}

/// Verifies an inclusion proof (RFC 9162 §2.1.3.2; RFC 6962 §2.1.1 audit
/// path): that the leaf with hash `leaf_hash` is at `leaf_index` in the tree
/// of `tree_size` leaves whose root is `root`.
pub fn verify_inclusion(
    leaf_hash: &LeafHash,
    leaf_index: u64,
    tree_size: u64,
    proof: &[Hash],
    root: &Hash,
) -> Result<()> {
    let computed = root_from_inclusion_proof(leaf_hash, leaf_index, tree_size, proof)?;
    if &computed != root {
        return Err(Error::RootMismatch {
            what: "inclusion proof",
        });
    }
    Ok(())
}

/// Computes the root implied by an inclusion proof (RFC 9162 §2.1.3.2 steps
/// 1–5, without the final comparison).
pub fn root_from_inclusion_proof(
    leaf_hash: &LeafHash,
    leaf_index: u64,
    tree_size: u64,
    proof: &[Hash],
) -> Result<Hash> {
    if leaf_index >= tree_size {
        return Err(Error::InvalidProof(format!(
            "leaf index {leaf_index} is not below tree size {tree_size}"
        )));
    }
    if proof.len() > MAX_PROOF_LEN {
        return Err(Error::TooLarge {
            what: "inclusion proof",
            len: proof.len(),
            max: MAX_PROOF_LEN,
        });
    }
    let mut fn_ = leaf_index;
    let mut sn = tree_size - 1;
    let mut r = leaf_hash.to_bytes();
    for p in proof {
        if sn == 0 {
            return Err(Error::InvalidProof(
                "inclusion proof is longer than the path to the root".into(),
            ));
        }
        if fn_ & 1 == 1 || fn_ == sn {
            r = node_hash(p, &r);
            if fn_ & 1 == 0 {
                // Skip levels where this node is the last, unpaired one.
                while fn_ & 1 == 0 && fn_ != 0 {
                    fn_ >>= 1;
                    sn >>= 1;
                }
            }
        } else {
            r = node_hash(&r, p);
        }
        fn_ >>= 1;
        sn >>= 1;
    }
    if sn != 0 {
        return Err(Error::InvalidProof(
            "inclusion proof is shorter than the path to the root".into(),
        ));
    }
    Ok(r)
}

/// Verifies a consistency proof (RFC 9162 §2.1.4.2; RFC 6962 §2.1.2): that
/// the tree of `size1` leaves with root `root1` is a prefix of the tree of
/// `size2` leaves with root `root2`.
///
/// Edge cases not spelled out by the RFC's algorithm: a proof between equal
/// sizes must be empty and the roots equal; any tree is consistent with the
/// empty tree, with an empty proof.
pub fn verify_consistency(
    size1: u64,
    size2: u64,
    proof: &[Hash],
    root1: &Hash,
    root2: &Hash,
) -> Result<()> {
    if size1 > size2 {
        return Err(Error::InvalidProof(format!(
            "old size {size1} is larger than new size {size2}"
        )));
    }
    if proof.len() > MAX_PROOF_LEN {
        return Err(Error::TooLarge {
            what: "consistency proof",
            len: proof.len(),
            max: MAX_PROOF_LEN,
        });
    }
    if size1 == size2 {
        if !proof.is_empty() {
            return Err(Error::InvalidProof(
                "consistency proof between equal sizes must be empty".into(),
            ));
        }
        if root1 != root2 {
            return Err(Error::RootMismatch {
                what: "consistency proof between equal sizes",
            });
        }
        return Ok(());
    }
    if size1 == 0 {
        if !proof.is_empty() {
            return Err(Error::InvalidProof(
                "consistency proof from the empty tree must be empty".into(),
            ));
        }
        return Ok(());
    }
    // RFC 9162 §2.1.4.2 step 1.
    if proof.is_empty() {
        return Err(Error::InvalidProof("empty consistency proof".into()));
    }
    // Step 2: if size1 is a power of two, its root is the first node.
    let first_is_root = size1.is_power_of_two();
    let mut path = proof.iter();
    let start = if first_is_root {
        root1
    } else {
        path.next()
            .ok_or_else(|| Error::InvalidProof("empty consistency proof".into()))?
    };
    // Step 3.
    let mut fn_ = size1 - 1;
    let mut sn = size2 - 1;
    // Step 4.
    while fn_ & 1 == 1 {
        fn_ >>= 1;
        sn >>= 1;
    }
    // Step 5.
    let mut fr = *start;
    let mut sr = *start;
    // Step 6.
    for c in path {
        if sn == 0 {
            return Err(Error::InvalidProof(
                "consistency proof is longer than expected".into(),
            ));
        }
        if fn_ & 1 == 1 || fn_ == sn {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            if fn_ & 1 == 0 {
                while fn_ & 1 == 0 && fn_ != 0 {
                    fn_ >>= 1;
                    sn >>= 1;
                }
            }
        } else {
            sr = node_hash(&sr, c);
        }
        fn_ >>= 1;
        sn >>= 1;
    }
    // Step 7.
    if sn != 0 {
        return Err(Error::InvalidProof(
            "consistency proof is shorter than expected".into(),
        ));
    }
    if &fr != root1 {
        return Err(Error::RootMismatch {
            what: "consistency proof (old root)",
        });
    }
    if &sr != root2 {
        return Err(Error::RootMismatch {
            what: "consistency proof (new root)",
        });
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Tiles (c2sp.org/tlog-tiles, c2sp.org/static-ct-api "Merkle Tree")
// ---------------------------------------------------------------------------

/// Number of tree levels a tile spans.
pub const TILE_HEIGHT: u32 = 8;
/// Number of hashes (or entries) in a full tile.
pub const TILE_WIDTH: u64 = 1 << TILE_HEIGHT;
/// Largest tile level allowed by c2sp.org/tlog-tiles.
pub const MAX_TILE_LEVEL: u8 = 63;

/// One tile: `level` 0 holds leaf hashes; a hash at level `l` is the root of a
/// perfect subtree of `256^l` leaves. `width` is the number of hashes, 256
/// for a full tile and 1..=255 for a partial one (c2sp.org/tlog-tiles).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TileId {
    level: u8,
    index: u64,
    width: u16,
}

impl TileId {
    /// A tile at `level` (0..=63) with index `index` and `width` hashes
    /// (1..=256).
    pub fn new(level: u8, index: u64, width: u16) -> Result<Self> {
        if level > MAX_TILE_LEVEL {
            return Err(Error::InvalidArgument(format!(
                "tile level {level} is above {MAX_TILE_LEVEL}"
            )));
        }
        if width == 0 || u64::from(width) > TILE_WIDTH {
            return Err(Error::InvalidArgument(format!(
                "tile width {width} is not in 1..=256"
            )));
        }
        Ok(TileId {
            level,
            index,
            width,
        })
    }

    /// The tile level.
    pub fn level(&self) -> u8 {
        self.level
    }

    /// The tile index within its level.
    pub fn index(&self) -> u64 {
        self.index
    }

    /// Number of hashes (or, for a data tile, entries) in the tile.
    pub fn width(&self) -> u16 {
        self.width
    }

    /// True for a partial tile (fewer than 256 hashes).
    pub fn is_partial(&self) -> bool {
        u64::from(self.width) < TILE_WIDTH
    }

    /// The same tile position with full width.
    pub fn full(&self) -> TileId {
        TileId {
            width: TILE_WIDTH as u16,
            ..*self
        }
    }

    /// The hash tile path `tile/<L>/<N>[.p/<W>]`.
    pub fn path(&self) -> String {
        format!("tile/{}/{}", self.level, self.index_and_width_path())
    }

    /// The static-ct-api data tile path `tile/data/<N>[.p/<W>]`, holding the
    /// entries whose leaf hashes are in level-0 tile `N`
    /// (c2sp.org/static-ct-api "Log entries"). Meaningful for level 0 only.
    pub fn data_path(&self) -> String {
        format!("tile/data/{}", self.index_and_width_path())
    }

    fn index_and_width_path(&self) -> String {
        let mut s = encode_tile_index(self.index);
        if self.is_partial() {
            s.push_str(&format!(".p/{}", self.width));
        }
        s
    }

    /// The leaf range `[start, end)` whose hashes this tile commits to, or
    /// `None` if it does not fit in a `u64`.
    pub fn leaf_range(&self) -> Option<(u64, u64)> {
        let leaves_per_hash = 1u64.checked_shl(TILE_HEIGHT * u32::from(self.level))?;
        let start = self
            .index
            .checked_mul(TILE_WIDTH)?
            .checked_mul(leaves_per_hash)?;
        let end = start.checked_add(u64::from(self.width).checked_mul(leaves_per_hash)?)?;
        Some((start, end))
    }
}

/// Encodes a tile index as c2sp.org/tlog-tiles path elements: 3-digit groups,
/// all but the last prefixed with `x` (1234067 → `x001/x234/067`).
pub fn encode_tile_index(index: u64) -> String {
    let mut groups = Vec::new();
    let mut n = index;
    loop {
        groups.push(n % 1000);
        n /= 1000;
        if n == 0 {
            break;
        }
    }
    let mut out = String::new();
    for (i, g) in groups.iter().rev().enumerate() {
        if i + 1 < groups.len() {
            out.push_str(&format!("x{g:03}/"));
        } else {
            out.push_str(&format!("{g:03}"));
        }
    }
    out
}

/// What a tile path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TilePath {
    /// A hash tile `tile/<L>/<N>[.p/<W>]`.
    Hash(TileId),
    /// A static-ct-api data tile `tile/data/<N>[.p/<W>]` (level 0).
    Data(TileId),
}

/// Parses a tile path (with or without a leading `/`), strictly: decimal
/// level without leading zeros, 3-digit index groups with `x` on all but the
/// last, optional `.p/<W>` with `W` in 1..=255 and no leading zeros.
pub fn parse_tile_path(path: &str) -> Result<TilePath> {
    const WHAT: &str = "tile path";
    let bad = |reason: &str| Error::malformed(WHAT, format!("{reason} in {path:?}"));
    if path.len() > 256 {
        return Err(Error::TooLarge {
            what: WHAT,
            len: path.len(),
            max: 256,
        });
    }
    let p = path.strip_prefix('/').unwrap_or(path);
    let rest = p
        .strip_prefix("tile/")
        .ok_or_else(|| bad("no tile/ prefix"))?;
    let (level_str, rest) = rest.split_once('/').ok_or_else(|| bad("no level"))?;
    let data = level_str == "data";
    let level = if data {
        0
    } else {
        parse_decimal_no_leading_zero(level_str)
            .filter(|&l| l <= u64::from(MAX_TILE_LEVEL))
            .ok_or_else(|| bad("bad level"))? as u8
    };
    // Split off the partial suffix: the last element may be "NNN.p", then "W".
    let (index_part, width) = match rest.split_once(".p/") {
        Some((idx, w)) => {
            let w = parse_decimal_no_leading_zero(w)
                .filter(|&w| (1..TILE_WIDTH).contains(&w))
                .ok_or_else(|| bad("bad partial width"))?;
            (idx, w as u16)
        }
        None => (rest, TILE_WIDTH as u16),
    };
    let elems: Vec<&str> = index_part.split('/').collect();
    let mut index: u64 = 0;
    for (i, e) in elems.iter().enumerate() {
        let last = i + 1 == elems.len();
        let digits = if last {
            *e
        } else {
            e.strip_prefix('x')
                .ok_or_else(|| bad("index element without x"))?
        };
        if digits.len() != 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad("index element is not 3 digits"));
        }
        let g: u64 = digits.parse().map_err(|_| bad("bad index element"))?;
        index = index
            .checked_mul(1000)
            .and_then(|v| v.checked_add(g))
            .ok_or_else(|| bad("index overflows"))?;
    }
    // Reject non-canonical encodings such as "x000/001".
    if encode_tile_index(index) != index_part {
        return Err(bad("non-canonical index"));
    }
    let id = TileId::new(level, index, width)?;
    Ok(if data {
        TilePath::Data(id)
    } else {
        TilePath::Hash(id)
    })
}

fn parse_decimal_no_leading_zero(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 20 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if s.len() > 1 && s.starts_with('0') {
        return None;
    }
    s.parse().ok()
}

/// Number of hashes stored at tile `level` for a tree of `tree_size` leaves:
/// `floor(tree_size / 256^level)`.
fn hashes_at_level(level: u8, tree_size: u64) -> u64 {
    let shift = TILE_HEIGHT * u32::from(level);
    tree_size.checked_shr(shift).unwrap_or(0)
}

/// The tile at `level` with index `index` as served for a tree of
/// `tree_size` leaves (full, or partial with the right width), or `None` if
/// that tile does not exist yet.
pub fn tile_for_size(level: u8, index: u64, tree_size: u64) -> Option<TileId> {
    let n = hashes_at_level(level, tree_size);
    let start = index.checked_mul(TILE_WIDTH)?;
    if start >= n {
        return None;
    }
    let width = (n - start).min(TILE_WIDTH) as u16;
    TileId::new(level, index, width).ok()
}

/// All tiles at `level` that a tree of `tree_size` leaves consists of: the
/// full tiles, then the partial tile of width `floor(size/256^level) mod 256`
/// if that is non-zero (c2sp.org/tlog-tiles "Partial Tiles").
pub fn tiles_for_size(level: u8, tree_size: u64) -> Vec<TileId> {
    if level > MAX_TILE_LEVEL {
        return Vec::new();
    }
    let n = hashes_at_level(level, tree_size);
    let count = n.div_ceil(TILE_WIDTH);
    (0..count)
        .filter_map(|i| tile_for_size(level, i, tree_size))
        .collect()
}

/// The level-0 tiles (equivalently, data tiles) holding the leaves
/// `[start, tree_size)` of a tree of `tree_size` leaves, the last one partial
/// if `tree_size` is not a multiple of 256.
pub fn data_tiles_for_range(start: u64, tree_size: u64) -> Vec<TileId> {
    if start >= tree_size {
        return Vec::new();
    }
    let first = start / TILE_WIDTH;
    let last = (tree_size - 1) / TILE_WIDTH;
    (first..=last)
        .filter_map(|i| tile_for_size(0, i, tree_size))
        .collect()
}

/// Splits a hash tile body into its hashes, checking it holds exactly
/// `width` of them.
pub fn parse_hash_tile(bytes: &[u8], width: u16) -> Result<Vec<Hash>> {
    let expected = usize::from(width) * HASH_LEN;
    if bytes.len() != expected {
        return Err(Error::malformed(
            "hash tile",
            format!(
                "{} bytes, expected {expected} for {width} hashes",
                bytes.len()
            ),
        ));
    }
    Ok(bytes
        .chunks_exact(HASH_LEN)
        .map(|c| {
            let mut h = [0u8; HASH_LEN];
            h.copy_from_slice(c);
            h
        })
        .collect())
}

/// Computes the Merkle Tree Hash of a tree of `tree_size` leaves from its
/// tiles (c2sp.org/tlog-tiles "Merkle Tree").
///
/// The tree is split into its maximal perfect subtrees; the root of a subtree
/// of height `k` is rebuilt from `2^(k mod 8)` hashes of the tile at level
/// `k / 8`. `get_tile` is asked for tiles with the width they have at
/// `tree_size`; it returns `Ok(Some(hashes))`, or `Ok(None)` if that tile is
/// unavailable, in which case each needed hash is recomputed from the full
/// tile below it (so level-0 tiles alone are always enough). Each tile is
/// requested at most once (fetched tiles are kept until the call returns).
/// A returned tile of the wrong width is an error.
///
/// The fallback costs one tile per 256 hashes it rebuilds, recursively: it
/// is meant for the top, partial levels (or small trees such as test data),
/// not for rebuilding a large tree from level 0.
pub fn root_from_tiles<F>(tree_size: u64, mut get_tile: F) -> Result<Hash>
where
    F: FnMut(TileId) -> Result<Option<Vec<Hash>>>,
{
    if tree_size == 0 {
        return Ok(empty_root());
    }
    let mut reader = TileReader {
        tree_size,
        cache: HashMap::new(),
        get_tile: &mut get_tile,
    };
    // Perfect subtrees, left to right, largest first.
    let mut roots: Vec<Hash> = Vec::new();
    let mut start = 0u64;
    for height in (0..64u32).rev() {
        let span = 1u64 << height;
        if tree_size & span == 0 {
            continue;
        }
        let level = height / TILE_HEIGHT;
        let r = height % TILE_HEIGHT;
        let level_shift = TILE_HEIGHT * level;
        let first = start >> level_shift;
        let count = 1u64 << r;
        let hashes = reader.hashes(level as u8, first, count)?;
        roots.push(root_from_leaf_hashes(&hashes));
        start += span;
    }
    let mut iter = roots.iter().rev();
    let last = *iter
        .next()
        .ok_or_else(|| Error::InvalidArgument("no subtrees".into()))?;
    Ok(iter.fold(last, |right, left| node_hash(left, &right)))
}

type TileFetcher<'f> = dyn FnMut(TileId) -> Result<Option<Vec<Hash>>> + 'f;

struct TileReader<'a, 'f> {
    tree_size: u64,
    cache: HashMap<TileId, Option<Vec<Hash>>>,
    get_tile: &'a mut TileFetcher<'f>,
}

impl TileReader<'_, '_> {
    /// The `count` stored hashes at `level` starting at `first`; the range
    /// must lie within one tile.
    fn hashes(&mut self, level: u8, first: u64, count: u64) -> Result<Vec<Hash>> {
        let tile_index = first / TILE_WIDTH;
        let offset = (first % TILE_WIDTH) as usize;
        let end = offset + count as usize;
        let id = tile_for_size(level, tile_index, self.tree_size).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "tile {level}/{tile_index} does not exist at size {}",
                self.tree_size
            ))
        })?;
        if !self.cache.contains_key(&id) {
            let tile = (self.get_tile)(id)?;
            if let Some(t) = &tile {
                if t.len() != usize::from(id.width()) {
                    return Err(Error::malformed(
                        "hash tile",
                        format!(
                            "{} has {} hashes, expected {}",
                            id.path(),
                            t.len(),
                            id.width()
                        ),
                    ));
                }
            }
            self.cache.insert(id, tile);
        }
        if let Some(Some(tile)) = self.cache.get(&id) {
            return tile
                .get(offset..end)
                .map(<[Hash]>::to_vec)
                .ok_or_else(|| Error::malformed("hash tile", "range outside tile"));
        }
        if level == 0 {
            return Err(Error::InvalidArgument(format!(
                "level-0 tile {} is unavailable",
                id.path()
            )));
        }
        // Rebuild each hash from the full tile one level down.
        let mut out = Vec::with_capacity(count as usize);
        for j in first..first + count {
            let below = self.hashes(level - 1, j * TILE_WIDTH, TILE_WIDTH)?;
            out.push(root_from_leaf_hashes(&below));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6962 §2.1 MTH, recursively, over raw leaves.
    fn naive_mth(leaves: &[Vec<u8>]) -> Hash {
        match leaves.len() {
            0 => empty_root(),
            1 => leaf_hash(&leaves[0]).to_bytes(),
            n => {
                let k = split(n);
                node_hash(&naive_mth(&leaves[..k]), &naive_mth(&leaves[k..]))
            }
        }
    }

    /// Largest power of two smaller than n (n > 1).
    fn split(n: usize) -> usize {
        let mut k = 1;
        while k * 2 < n {
            k *= 2;
        }
        k
    }

    /// RFC 6962 §2.1.1 PATH(m, D[n]).
    fn naive_path(m: usize, leaves: &[Vec<u8>]) -> Vec<Hash> {
        let n = leaves.len();
        if n <= 1 {
            return vec![];
        }
        let k = split(n);
        if m < k {
            let mut p = naive_path(m, &leaves[..k]);
            p.push(naive_mth(&leaves[k..]));
            p
        } else {
            let mut p = naive_path(m - k, &leaves[k..]);
            p.push(naive_mth(&leaves[..k]));
            p
        }
    }

    /// RFC 6962 §2.1.2 PROOF(m, D[n]) = SUBPROOF(m, D[n], true).
    fn naive_proof(m: usize, leaves: &[Vec<u8>]) -> Vec<Hash> {
        fn subproof(m: usize, leaves: &[Vec<u8>], b: bool) -> Vec<Hash> {
            let n = leaves.len();
            if m == n {
                return if b { vec![] } else { vec![naive_mth(leaves)] };
            }
            let k = split(n);
            if m <= k {
                let mut p = subproof(m, &leaves[..k], b);
                p.push(naive_mth(&leaves[k..]));
                p
            } else {
                let mut p = subproof(m - k, &leaves[k..], false);
                p.push(naive_mth(&leaves[..k]));
                p
            }
        }
        subproof(m, leaves, true)
    }

    fn leaves(n: usize) -> Vec<Vec<u8>> {
        (0..n).map(|i| format!("leaf {i}").into_bytes()).collect()
    }

    fn hex(h: &Hash) -> String {
        crate::hex::encode(h)
    }

    #[test]
    fn empty_tree_hash_is_sha256_of_nothing() {
        assert_eq!(
            hex(&empty_root()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(root_from_leaf_hashes(&[]), empty_root());
        assert_eq!(CompactRange::new().root(), empty_root());
    }

    #[test]
    fn rfc6962_reference_vectors() {
        // Leaf hash of the empty leaf (used by RFC 6962 test suites).
        assert_eq!(
            hex(leaf_hash(b"").as_bytes()),
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
        );
    }

    #[test]
    fn naive_vs_iterative_vs_streaming_0_to_70() {
        let all = leaves(70);
        let mut stream = CompactRange::new();
        for n in 0..=70usize {
            let hashes: Vec<Hash> = all[..n].iter().map(|l| leaf_hash(l).to_bytes()).collect();
            let naive = naive_mth(&all[..n]);
            assert_eq!(root_from_leaf_hashes(&hashes), naive, "iterative, n={n}");
            assert_eq!(stream.size(), n as u64);
            assert_eq!(stream.root(), naive, "streaming, n={n}");
            assert_eq!(stream.nodes().len(), n.count_ones() as usize);
            if n < 70 {
                stream.push(leaf_hash(&all[n])).unwrap();
            }
        }
    }

    #[test]
    fn compact_range_from_parts() {
        let mut a = CompactRange::new();
        a.extend(leaves(13).iter().map(|l| leaf_hash(l))).unwrap();
        let mut b = CompactRange::from_parts(a.size(), a.nodes().to_vec()).unwrap();
        assert_eq!(a.root(), b.root());
        a.push(leaf_hash(b"x")).unwrap();
        b.push(leaf_hash(b"x")).unwrap();
        assert_eq!(a, b);
        assert!(matches!(
            CompactRange::from_parts(13, vec![[0; 32]; 2]),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn inclusion_proofs_verify_and_tampering_fails() {
        let all = leaves(40);
        for n in 1..=all.len() {
            let root = naive_mth(&all[..n]);
            for m in 0..n {
                let proof = naive_path(m, &all[..n]);
                let lh = leaf_hash(&all[m]);
                verify_inclusion(&lh, m as u64, n as u64, &proof, &root)
                    .unwrap_or_else(|e| panic!("m={m} n={n}: {e}"));
                // Wrong leaf.
                assert!(
                    verify_inclusion(&leaf_hash(b"nope"), m as u64, n as u64, &proof, &root)
                        .is_err()
                );
                // Wrong index (same proof length may still occur).
                if n > 1 {
                    let other = (m + 1) % n;
                    assert!(
                        verify_inclusion(&lh, other as u64, n as u64, &proof, &root).is_err(),
                        "m={m} other={other} n={n}"
                    );
                }
                // Each proof element flipped.
                for i in 0..proof.len() {
                    let mut bad = proof.clone();
                    bad[i][0] ^= 1;
                    assert!(verify_inclusion(&lh, m as u64, n as u64, &bad, &root).is_err());
                }
                // Too long / too short.
                let mut long = proof.clone();
                long.push([0; 32]);
                assert!(verify_inclusion(&lh, m as u64, n as u64, &long, &root).is_err());
                if !proof.is_empty() {
                    assert!(verify_inclusion(
                        &lh,
                        m as u64,
                        n as u64,
                        &proof[..proof.len() - 1],
                        &root
                    )
                    .is_err());
                }
                // A proof for size n does not prove inclusion in the tree of
                // size n+1. (Only the signed root binds the size: with the old
                // root, the same hashes can describe a bigger tree.)
                if n < all.len() {
                    let bigger = naive_mth(&all[..=n]);
                    assert!(
                        verify_inclusion(&lh, m as u64, n as u64 + 1, &proof, &bigger).is_err()
                    );
                }
            }
            // Index out of range.
            assert!(matches!(
                verify_inclusion(&LeafHash::new([0; 32]), n as u64, n as u64, &[], &root),
                Err(Error::InvalidProof(_))
            ));
        }
    }

    #[test]
    fn consistency_proofs_verify_and_tampering_fails() {
        let all = leaves(40);
        for n in 1..=all.len() {
            let root2 = naive_mth(&all[..n]);
            for m in 1..=n {
                let root1 = naive_mth(&all[..m]);
                let proof = if m == n {
                    vec![]
                } else {
                    naive_proof(m, &all[..n])
                };
                verify_consistency(m as u64, n as u64, &proof, &root1, &root2)
                    .unwrap_or_else(|e| panic!("m={m} n={n}: {e}"));
                // Wrong roots.
                let mut r = root1;
                r[5] ^= 0x80;
                assert!(verify_consistency(m as u64, n as u64, &proof, &r, &root2).is_err());
                let mut r = root2;
                r[31] ^= 1;
                assert!(verify_consistency(m as u64, n as u64, &proof, &root1, &r).is_err());
                // Flipped elements.
                for i in 0..proof.len() {
                    let mut bad = proof.clone();
                    bad[i][7] ^= 4;
                    assert!(
                        verify_consistency(m as u64, n as u64, &bad, &root1, &root2).is_err(),
                        "m={m} n={n} i={i}"
                    );
                }
                // Extra or missing element.
                let mut long = proof.clone();
                long.push([1; 32]);
                assert!(verify_consistency(m as u64, n as u64, &long, &root1, &root2).is_err());
                if !proof.is_empty() {
                    assert!(verify_consistency(
                        m as u64,
                        n as u64,
                        &proof[..proof.len() - 1],
                        &root1,
                        &root2
                    )
                    .is_err());
                }
                // The proof does not fit other sizes with their true roots.
                if m < n {
                    let r = naive_mth(&all[..=m]);
                    assert!(
                        verify_consistency(m as u64 + 1, n as u64, &proof, &r, &root2).is_err(),
                        "m={m} n={n}"
                    );
                }
                if n < all.len() {
                    let r = naive_mth(&all[..=n]);
                    assert!(
                        verify_consistency(m as u64, n as u64 + 1, &proof, &root1, &r).is_err(),
                        "m={m} n={n}"
                    );
                }
            }
            // Old size larger than new.
            assert!(verify_consistency(n as u64 + 1, n as u64, &[], &root2, &root2).is_err());
            // From the empty tree.
            verify_consistency(0, n as u64, &[], &empty_root(), &root2).unwrap();
            assert!(verify_consistency(0, n as u64, &[root2], &empty_root(), &root2).is_err());
        }
    }

    #[test]
    fn oversize_proofs_rejected() {
        let proof = vec![[0u8; 32]; MAX_PROOF_LEN + 1];
        assert!(matches!(
            verify_inclusion(&LeafHash::new([0; 32]), 0, 2, &proof, &[0; 32]),
            Err(Error::TooLarge { .. })
        ));
        assert!(matches!(
            verify_consistency(1, 2, &proof, &[0; 32], &[0; 32]),
            Err(Error::TooLarge { .. })
        ));
    }

    #[test]
    fn tile_index_encoding() {
        assert_eq!(encode_tile_index(0), "000");
        assert_eq!(encode_tile_index(7), "007");
        assert_eq!(encode_tile_index(999), "999");
        assert_eq!(encode_tile_index(1000), "x001/000");
        assert_eq!(encode_tile_index(1234067), "x001/x234/067");
        assert_eq!(
            encode_tile_index(u64::MAX),
            "x018/x446/x744/x073/x709/x551/615"
        );
    }

    #[test]
    fn tile_paths() {
        let t = TileId::new(0, 3, 10).unwrap();
        assert_eq!(t.path(), "tile/0/003.p/10");
        assert_eq!(t.data_path(), "tile/data/003.p/10");
        let t = TileId::new(2, 1234067, 256).unwrap();
        assert_eq!(t.path(), "tile/2/x001/x234/067");
        assert!(!t.is_partial());
        assert!(TileId::new(64, 0, 1).is_err());
        assert!(TileId::new(0, 0, 0).is_err());
        assert!(TileId::new(0, 0, 257).is_err());
    }

    #[test]
    fn tile_path_parsing_round_trips_and_rejects_garbage() {
        for (level, index, width) in [
            (0u8, 0u64, 256u16),
            (0, 3, 10),
            (5, 1234067, 1),
            (63, u64::MAX, 255),
        ] {
            let t = TileId::new(level, index, width).unwrap();
            assert_eq!(parse_tile_path(&t.path()).unwrap(), TilePath::Hash(t));
            assert_eq!(
                parse_tile_path(&format!("/{}", t.data_path())).unwrap(),
                TilePath::Data(TileId::new(0, index, width).unwrap())
            );
        }
        for bad in [
            "",
            "tile/",
            "tile/0",
            "tile/00/000",
            "tile/64/000",
            "tile/0/00",
            "tile/0/0000",
            "tile/0/001/002",
            "tile/0/x001",
            "tile/0/x000/001",
            "tile/0/000.p/0",
            "tile/0/000.p/256",
            "tile/0/000.p/010",
            "tile/0/000.p/",
            "tile/0/abc",
            "tile/data/x1/000",
            "tile/0/x018/x446/x744/x073/x709/x551/616",
            "tiles/0/000",
        ] {
            assert!(parse_tile_path(bad).is_err(), "{bad:?} should be rejected");
        }
        assert!(matches!(
            parse_tile_path(&"x".repeat(300)),
            Err(Error::TooLarge { .. })
        ));
    }

    #[test]
    fn tiles_for_size_matches_spec_example() {
        // c2sp.org/tlog-tiles: a tree of size 70,000 has 273 full level-0
        // tiles and one partial of width 112, one full level-1 tile and one
        // partial of width 17, and one partial level-2 tile of width 1.
        let l0 = tiles_for_size(0, 70_000);
        assert_eq!(l0.len(), 274);
        assert!(l0[..273].iter().all(|t| !t.is_partial()));
        assert_eq!(l0[273], TileId::new(0, 273, 112).unwrap());
        let l1 = tiles_for_size(1, 70_000);
        assert_eq!(
            l1,
            vec![
                TileId::new(1, 0, 256).unwrap(),
                TileId::new(1, 1, 17).unwrap()
            ]
        );
        assert_eq!(
            tiles_for_size(2, 70_000),
            vec![TileId::new(2, 0, 1).unwrap()]
        );
        assert!(tiles_for_size(3, 70_000).is_empty());
        // Size 256: one full level-0 tile and a level-1 partial of width 1.
        assert_eq!(
            tiles_for_size(0, 256),
            vec![TileId::new(0, 0, 256).unwrap()]
        );
        assert_eq!(tiles_for_size(1, 256), vec![TileId::new(1, 0, 1).unwrap()]);
        assert!(tiles_for_size(0, 0).is_empty());
    }

    #[test]
    fn data_tiles_for_ranges() {
        assert!(data_tiles_for_range(10, 10).is_empty());
        assert_eq!(
            data_tiles_for_range(0, 1034),
            vec![
                TileId::new(0, 0, 256).unwrap(),
                TileId::new(0, 1, 256).unwrap(),
                TileId::new(0, 2, 256).unwrap(),
                TileId::new(0, 3, 256).unwrap(),
                TileId::new(0, 4, 10).unwrap(),
            ]
        );
        assert_eq!(
            data_tiles_for_range(700, 1024),
            vec![
                TileId::new(0, 2, 256).unwrap(),
                TileId::new(0, 3, 256).unwrap()
            ]
        );
        assert_eq!(
            data_tiles_for_range(5, 6),
            vec![TileId::new(0, 0, 6).unwrap()]
        );
    }

    #[test]
    fn leaf_ranges() {
        assert_eq!(
            TileId::new(0, 3, 10).unwrap().leaf_range(),
            Some((768, 778))
        );
        assert_eq!(
            TileId::new(1, 1, 17).unwrap().leaf_range(),
            Some((65536, 65536 + 17 * 256))
        );
        assert_eq!(TileId::new(63, 1, 1).unwrap().leaf_range(), None);
    }

    #[test]
    fn hash_tile_parsing() {
        assert_eq!(parse_hash_tile(&[1u8; 64], 2).unwrap(), vec![[1u8; 32]; 2]);
        assert!(matches!(
            parse_hash_tile(&[1u8; 63], 2),
            Err(Error::Malformed { .. })
        ));
        assert!(parse_hash_tile(&[1u8; 96], 2).is_err());
    }

    /// Builds every tile of every level for the given leaf hashes, keyed by
    /// the id each tile has at `size`.
    fn all_tiles(hashes: &[Hash]) -> HashMap<TileId, Vec<Hash>> {
        let size = hashes.len() as u64;
        let mut out = HashMap::new();
        let mut level_hashes = hashes.to_vec();
        let mut level = 0u8;
        while !level_hashes.is_empty() {
            for t in tiles_for_size(level, size) {
                let start = (t.index() * TILE_WIDTH) as usize;
                out.insert(t, level_hashes[start..start + t.width() as usize].to_vec());
            }
            level_hashes = level_hashes
                .chunks_exact(TILE_WIDTH as usize)
                .map(root_from_leaf_hashes)
                .collect();
            level += 1;
        }
        out
    }

    #[test]
    fn root_from_tiles_matches_direct_root() {
        let hashes: Vec<Hash> = (0..70_000u32)
            .map(|i| leaf_hash(&i.to_be_bytes()).to_bytes())
            .collect();
        for size in [
            0usize, 1, 2, 255, 256, 257, 1034, 65535, 65536, 65537, 70_000,
        ] {
            let h = &hashes[..size];
            let tiles = all_tiles(h);
            let want = root_from_leaf_hashes(h);
            let mut requests = Vec::new();
            let got = root_from_tiles(size as u64, |id| {
                requests.push(id);
                Ok(tiles.get(&id).cloned())
            })
            .unwrap();
            assert_eq!(got, want, "size {size}");
            let unique: std::collections::HashSet<_> = requests.iter().collect();
            assert_eq!(unique.len(), requests.len(), "tile fetched twice");
            // Only level-0 tiles available: must fall back.
            let got0 = root_from_tiles(size as u64, |id| {
                Ok(if id.level() == 0 {
                    tiles.get(&id).cloned()
                } else {
                    None
                })
            })
            .unwrap();
            assert_eq!(got0, want, "size {size}, level 0 only");
        }
    }

    #[test]
    fn root_from_tiles_errors() {
        // Level-0 tile missing.
        assert!(root_from_tiles(5, |_| Ok(None)).is_err());
        // Wrong width returned.
        assert!(matches!(
            root_from_tiles(5, |_| Ok(Some(vec![[0; 32]; 4]))),
            Err(Error::Malformed { .. })
        ));
        // Fetcher error propagates.
        assert!(matches!(
            root_from_tiles(5, |_| Err(Error::InvalidArgument("boom".into()))),
            Err(Error::InvalidArgument(_))
        ));
    }
}
