//! The log's Merkle tree: every perfect subtree hash kept by height, so
//! roots, audit paths, consistency proofs (RFC 6962 §2.1) and tiles
//! (c2sp.org/tlog-tiles) are read off directly.

use std::collections::HashMap;

use ct_core::merkle::{empty_root, node_hash, Hash, TileId, TILE_HEIGHT};

/// An append-only Merkle tree.
#[derive(Clone, Debug, Default)]
pub(crate) struct Tree {
    /// `levels[k][i]` is the hash of the perfect subtree of `2^k` leaves
    /// starting at leaf `i·2^k`; `levels[0]` are the leaf hashes.
    levels: Vec<Vec<Hash>>,
    /// First index of each leaf hash.
    index: HashMap<Hash, u64>,
}

/// Largest power of two strictly below `n` (`n >= 2`).
fn split(n: u64) -> u64 {
    1u64 << (63 - (n - 1).leading_zeros())
}

impl Tree {
    pub(crate) fn size(&self) -> u64 {
        self.levels.first().map_or(0, |l| l.len() as u64)
    }

    pub(crate) fn push(&mut self, leaf_hash: Hash) {
        if self.levels.is_empty() {
            self.levels.push(Vec::new());
        }
        let size = self.size();
        self.index.entry(leaf_hash).or_insert(size);
        self.levels[0].push(leaf_hash);
        let mut k = 0;
        while self.levels[k].len() & 1 == 0 {
            let l = &self.levels[k];
            let h = node_hash(&l[l.len() - 2], &l[l.len() - 1]);
            if self.levels.len() == k + 1 {
                self.levels.push(Vec::new());
            }
            self.levels[k + 1].push(h);
            k += 1;
        }
    }

    /// The index of the first leaf with this hash, if it is below `size`.
    pub(crate) fn find(&self, leaf_hash: &Hash, size: u64) -> Option<u64> {
        self.index.get(leaf_hash).copied().filter(|&i| i < size)
    }

    /// The leaf hash at `index`.
    #[cfg(test)]
    pub(crate) fn leaf(&self, index: u64) -> Option<Hash> {
        self.levels
            .first()?
            .get(usize::try_from(index).ok()?)
            .copied()
    }

    /// `MTH(D[start:end])` (RFC 6962 §2.1); requires
    /// `start < end <= size`.
    fn subtree(&self, start: u64, end: u64) -> Hash {
        let n = end - start;
        if n.is_power_of_two() && start & (n - 1) == 0 {
            let k = n.trailing_zeros() as usize;
            if let Some(h) = self
                .levels
                .get(k)
                .and_then(|l| l.get((start >> k) as usize))
            {
                return *h;
            }
        }
        if n == 1 {
            // Unreachable for start < size: levels[0] holds every leaf.
            return empty_root();
        }
        let k = split(n);
        node_hash(
            &self.subtree(start, start + k),
            &self.subtree(start + k, end),
        )
    }

    /// The Merkle Tree Hash of the first `size` leaves.
    pub(crate) fn root_at(&self, size: u64) -> Hash {
        if size == 0 || size > self.size() {
            return empty_root();
        }
        self.subtree(0, size)
    }

    /// The audit path `PATH(index, D[0:size])` (RFC 6962 §2.1.1), or `None`
    /// unless `index < size <= self.size()`.
    pub(crate) fn inclusion_proof(&self, index: u64, size: u64) -> Option<Vec<Hash>> {
        if index >= size || size > self.size() {
            return None;
        }
        let mut out = Vec::new();
        self.path(index, 0, size, &mut out);
        Some(out)
    }

    fn path(&self, m: u64, start: u64, end: u64, out: &mut Vec<Hash>) {
        let n = end - start;
        if n <= 1 {
            return;
        }
        let k = split(n);
        if m < k {
            self.path(m, start, start + k, out);
            out.push(self.subtree(start + k, end));
        } else {
            self.path(m - k, start + k, end, out);
            out.push(self.subtree(start, start + k));
        }
    }

    /// The consistency proof `PROOF(first, D[0:second])` (RFC 6962
    /// §2.1.2), or `None` unless `first <= second <= self.size()`. Empty
    /// when `first` is 0 or equals `second`.
    pub(crate) fn consistency_proof(&self, first: u64, second: u64) -> Option<Vec<Hash>> {
        if first > second || second > self.size() {
            return None;
        }
        let mut out = Vec::new();
        if first > 0 && first < second {
            self.subproof(first, 0, second, true, &mut out);
        }
        Some(out)
    }

    fn subproof(&self, m: u64, start: u64, end: u64, whole: bool, out: &mut Vec<Hash>) {
        let n = end - start;
        if m == n {
            if !whole {
                out.push(self.subtree(start, end));
            }
            return;
        }
        let k = split(n);
        if m <= k {
            self.subproof(m, start, start + k, whole, out);
            out.push(self.subtree(start + k, end));
        } else {
            self.subproof(m - k, start + k, end, false, out);
            out.push(self.subtree(start, start + k));
        }
    }

    /// The body of hash tile `id` (c2sp.org/tlog-tiles) if every hash it
    /// holds exists in the tree: `width` hashes of level `8·L` starting at
    /// `256·N`.
    pub(crate) fn hash_tile(&self, id: TileId) -> Option<Vec<u8>> {
        let height = (TILE_HEIGHT as usize).checked_mul(usize::from(id.level()))?;
        let level = self.levels.get(height)?;
        let start = usize::try_from(id.index()).ok()?.checked_mul(256)?;
        let end = start.checked_add(usize::from(id.width()))?;
        let hashes = level.get(start..end)?;
        Some(hashes.concat())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ct_core::merkle::{
        leaf_hash, parse_hash_tile, root_from_leaf_hashes, root_from_tiles, tiles_for_size,
        verify_consistency, verify_inclusion, TILE_WIDTH,
    };

    fn tree(n: u64) -> (Tree, Vec<Hash>) {
        let leaves: Vec<Hash> = (0..n)
            .map(|i| leaf_hash(&i.to_be_bytes()).to_bytes())
            .collect();
        let mut t = Tree::default();
        for l in &leaves {
            t.push(*l);
        }
        (t, leaves)
    }

    #[test]
    fn roots_and_proofs_verify() {
        let (t, leaves) = tree(70);
        for size in 0..=70u64 {
            let root = t.root_at(size);
            assert_eq!(root, root_from_leaf_hashes(&leaves[..size as usize]));
            for i in 0..size {
                let p = t.inclusion_proof(i, size).unwrap();
                verify_inclusion(&leaves[i as usize].into(), i, size, &p, &root).unwrap();
            }
            for first in 0..=size {
                let p = t.consistency_proof(first, size).unwrap();
                verify_consistency(first, size, &p, &t.root_at(first), &root).unwrap();
            }
        }
        assert!(t.inclusion_proof(70, 70).is_none());
        assert!(t.consistency_proof(3, 71).is_none());
        assert!(t.consistency_proof(4, 3).is_none());
        assert_eq!(t.find(&leaves[5], 70), Some(5));
        assert_eq!(t.find(&leaves[5], 5), None);
        assert_eq!(t.leaf(69), Some(leaves[69]));
        assert_eq!(t.leaf(70), None);
    }

    #[test]
    fn tiles_give_the_root() {
        for n in [1u64, 255, 256, 257, 256 * 256 + 3] {
            let (t, _) = tree(n);
            let root = root_from_tiles(n, |id| {
                let body = t.hash_tile(id).expect("tile exists");
                Ok(Some(parse_hash_tile(&body, id.width())?))
            })
            .unwrap();
            assert_eq!(root, t.root_at(n), "size {n}");
            for level in 0..3u8 {
                for id in tiles_for_size(level, n) {
                    assert!(t.hash_tile(id).is_some());
                    // One hash more than exists is refused.
                    if id.is_partial() {
                        let wider = TileId::new(level, id.index(), id.width() + 1).unwrap();
                        assert!(t.hash_tile(wider).is_none());
                    }
                }
            }
            let beyond = TileId::new(0, n.div_ceil(TILE_WIDTH) + 1, 1).unwrap();
            assert!(t.hash_tile(beyond).is_none());
        }
    }
}
