//! Client of a c2sp.org/static-ct-api log's monitoring prefix: the signed
//! `checkpoint`, data tiles `tile/data/<N>[.p/<W>]` and hash tiles
//! `tile/<L>/<N>[.p/<W>]`.
//!
//! * [`StaticCtClient::checkpoint`] returns a checkpoint only once its
//!   `RFC6962NoteSignature` verifies ([`verify_checkpoint`]).
//! * [`StaticCtClient::data_tile`] decodes a data tile (gzip or not) into
//!   [`Entry`] values, checking the entry count and every `leaf_index`
//!   extension ([`parse_data_tile_checked`]).
//! * A partial tile that is gone (404: logs may delete partial tiles once
//!   the full tile exists) is fetched as the full tile and cut to the
//!   requested width.
//! * [`StaticCtClient::root_with_prefix`] is the tile-based replacement for
//!   RFC 6962's consistency proofs: from the [`CompactRange`] of a verified
//!   prefix `[0, p)` and the hash tiles of a tree of size `N`, it computes
//!   the root of the tree `[0, m)` for any `p <= m <= N`. If that equals the
//!   signed root of `m`, the prefix (and everything it commits to) is part of
//!   that tree.

use std::collections::HashMap;

use futures_util::future::try_join_all;

use crate::error::{Error, Result};
use crate::http::{LogEndpoint, Response};
use ct_core::checkpoint::{verify_checkpoint, VerifiedCheckpoint, MAX_NOTE_SIZE};
use ct_core::leaf::{parse_data_tile_checked, MAX_DATA_TILE_SIZE};
use ct_core::merkle::{
    node_hash, parse_hash_tile, root_from_leaf_hashes, tile_for_size, CompactRange, Hash, TileId,
    HASH_LEN, TILE_HEIGHT, TILE_WIDTH,
};
use ct_core::sth::LogKey;
use ct_store::Entry;

/// A static-ct-api log: its endpoint (with limits), monitoring prefix,
/// checkpoint origin and key.
#[derive(Clone, Debug)]
pub struct StaticCtClient {
    ep: LogEndpoint,
    /// The monitoring prefix, ending in a slash.
    prefix: String,
    origin: String,
    key: LogKey,
}

/// Hash tiles fetched for one tree size (keyed by their id at that size).
pub type TileCache = HashMap<TileId, Vec<Hash>>;

impl StaticCtClient {
    /// A client for the log whose monitoring prefix is `monitoring_url`,
    /// checkpoint origin `origin` ([`ct_core::loglist::LogInfo::checkpoint_origin`])
    /// and key `key`.
    pub fn new(ep: LogEndpoint, monitoring_url: &str, origin: &str, key: LogKey) -> Self {
        StaticCtClient {
            ep,
            prefix: format!("{}/", monitoring_url.trim_end_matches('/')),
            origin: origin.to_owned(),
            key,
        }
    }

    /// The log's key.
    pub fn key(&self) -> &LogKey {
        &self.key
    }

    /// `<monitoring>/checkpoint`, verified.
    pub async fn checkpoint(&self) -> Result<VerifiedCheckpoint> {
        let url = format!("{}checkpoint", self.prefix);
        let resp = self.ep.get(&url, MAX_NOTE_SIZE).await?;
        Ok(verify_checkpoint(&resp.body, &self.origin, &self.key)?)
    }

    /// The entries of data tile `tile` (level 0, with its width at the tree
    /// size it was computed for), with leaf hashes, SCT timestamps and
    /// `notAfter`.
    pub async fn data_tile(&self, tile: TileId) -> Result<Vec<Entry>> {
        let (served, resp) = self
            .get_tile(
                tile,
                &tile.data_path(),
                &tile.full().data_path(),
                MAX_DATA_TILE_SIZE,
            )
            .await?;
        let leaves = parse_data_tile_checked(served, &resp.body)?;
        let first = tile.leaf_range().map(|(s, _)| s).ok_or_else(|| {
            ct_core::Error::InvalidArgument(format!(
                "data tile {} is out of range",
                tile.data_path()
            ))
        })?;
        Ok(leaves
            .iter()
            .take(usize::from(tile.width()))
            .zip(first..)
            .map(|(leaf, index)| {
                let te = leaf.timestamped_entry();
                Entry {
                    leaf_index: index,
                    leaf_hash: leaf.leaf_hash(),
                    sct_timestamp_ms: te.timestamp,
                    not_after: crate::entry::entry_not_after(&te.signed_entry, te.timestamp, index),
                }
            })
            .collect())
    }

    /// The hashes of hash tile `tile` (with its width at the tree size it
    /// was computed for).
    pub async fn hash_tile(&self, tile: TileId) -> Result<Vec<Hash>> {
        let max = TILE_WIDTH as usize * HASH_LEN;
        let (served, resp) = self
            .get_tile(tile, &tile.path(), &tile.full().path(), max)
            .await?;
        let mut hashes = parse_hash_tile(&resp.body, served.width())?;
        hashes.truncate(usize::from(tile.width()));
        Ok(hashes)
    }

    /// Fetches `path`; for a partial tile that is 404, `full_path` instead.
    /// Returns which tile was served.
    async fn get_tile(
        &self,
        tile: TileId,
        path: &str,
        full_path: &str,
        max: usize,
    ) -> Result<(TileId, Response)> {
        let url = format!("{}{path}", self.prefix);
        match self.ep.get(&url, max).await {
            Ok(r) => Ok((tile, r)),
            Err(Error::Http { status: 404, .. }) if tile.is_partial() => {
                let url = format!("{}{full_path}", self.prefix);
                Ok((tile.full(), self.ep.get(&url, max).await?))
            }
            Err(e) => Err(e),
        }
    }

    /// The root of the tree `[0, m)`, computed from `prefix` (the compact
    /// range of `[0, p)`, `p <= m`) and the hash tiles of the tree of size
    /// `tree_size >= m` for `[p, m)`. Tiles are taken from `cache` or
    /// fetched (in parallel) and added to it; `cache` must only hold tiles
    /// of `tree_size`.
    pub async fn root_with_prefix(
        &self,
        prefix: &CompactRange,
        m: u64,
        tree_size: u64,
        cache: &mut TileCache,
    ) -> Result<Hash> {
        if prefix.size() > m || m > tree_size {
            return Err(ct_core::Error::InvalidArgument(format!(
                "cannot extend a prefix of {} leaves to {m} with a tree of {tree_size}",
                prefix.size()
            ))
            .into());
        }
        let plan = subtree_decomposition(prefix.size(), m)
            .into_iter()
            .map(|(first, height)| subtree_location(first, height, tree_size))
            .collect::<Result<Vec<_>>>()?;
        let mut missing: Vec<TileId> = plan
            .iter()
            .map(|loc| loc.tile)
            .filter(|t| !cache.contains_key(t))
            .collect();
        missing.sort_unstable();
        missing.dedup();
        let fetched = try_join_all(missing.iter().map(|t| self.hash_tile(*t))).await?;
        cache.extend(missing.into_iter().zip(fetched));
        let mut range = prefix.clone();
        for loc in &plan {
            let hashes = cache
                .get(&loc.tile)
                .and_then(|t| t.get(loc.offset..loc.offset + loc.count))
                .ok_or_else(|| {
                    Error::malformed("hash tile", format!("{} is too short", loc.tile.path()))
                })?;
            range = extend_with_subtree(&range, loc.height, root_from_leaf_hashes(hashes))?;
        }
        Ok(range.root())
    }
}

/// The aligned perfect subtrees that exactly cover `[start, end)`, left to
/// right, as `(first leaf, height)`: each starts at a multiple of its size.
pub fn subtree_decomposition(start: u64, end: u64) -> Vec<(u64, u32)> {
    let mut out = Vec::new();
    let mut a = start;
    while a < end {
        let mut k = if a == 0 {
            63
        } else {
            a.trailing_zeros().min(63)
        };
        while k > 0 && (1u64 << k) > end - a {
            k -= 1;
        }
        out.push((a, k));
        a += 1u64 << k;
    }
    out
}

/// Where the root of the perfect subtree of `2^height` leaves starting at
/// `first` is found in the hash tiles of a tree of `tree_size` leaves: it
/// is the Merkle root of `count` consecutive hashes at tile level
/// `height / 8`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SubtreeLocation {
    tile: TileId,
    offset: usize,
    count: usize,
    height: u32,
}

fn subtree_location(first: u64, height: u32, tree_size: u64) -> Result<SubtreeLocation> {
    let level = height / TILE_HEIGHT;
    let r = height % TILE_HEIGHT;
    let index_at_level = first >> (TILE_HEIGHT * level);
    let tile_index = index_at_level / TILE_WIDTH;
    let level = u8::try_from(level).map_err(|_| {
        ct_core::Error::InvalidArgument(format!("subtree height {height} is too large"))
    })?;
    let tile = tile_for_size(level, tile_index, tree_size).ok_or_else(|| {
        ct_core::Error::InvalidArgument(format!(
            "tile {level}/{tile_index} does not exist at size {tree_size}"
        ))
    })?;
    let offset = (index_at_level % TILE_WIDTH) as usize;
    let count = 1usize << r;
    if offset + count > usize::from(tile.width()) {
        return Err(ct_core::Error::InvalidArgument(format!(
            "subtree at {first} of height {height} is not complete at size {tree_size}"
        ))
        .into());
    }
    Ok(SubtreeLocation {
        tile,
        offset,
        count,
        height,
    })
}

/// Appends the perfect subtree of `2^height` leaves with root `hash` to the
/// compact range `range` (whose size must be a multiple of `2^height`).
pub fn extend_with_subtree(range: &CompactRange, height: u32, hash: Hash) -> Result<CompactRange> {
    let span = 1u64
        .checked_shl(height)
        .filter(|_| height < 64)
        .ok_or_else(|| ct_core::Error::InvalidArgument(format!("subtree height {height}")))?;
    let size = range.size();
    if size & (span - 1) != 0 {
        return Err(ct_core::Error::InvalidArgument(format!(
            "a subtree of {span} leaves cannot start at {size}"
        ))
        .into());
    }
    let new_size = size
        .checked_add(span)
        .ok_or_else(|| ct_core::Error::InvalidArgument("compact range is full".into()))?;
    let mut nodes = range.nodes().to_vec();
    let mut h = hash;
    let mut s = size >> height;
    while s & 1 == 1 {
        let left = nodes.pop().ok_or_else(|| {
            ct_core::Error::InvalidArgument("compact range has too few nodes".into())
        })?;
        h = node_hash(&left, &h);
        s >>= 1;
    }
    nodes.push(h);
    Ok(CompactRange::from_parts(new_size, nodes)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ct_core::merkle::leaf_hash;

    fn leaves(n: u64) -> Vec<Hash> {
        (0..n)
            .map(|i| leaf_hash(&i.to_be_bytes()).to_bytes())
            .collect()
    }

    #[test]
    fn decomposition_covers_exactly() {
        for (start, end) in [(0, 0), (0, 1), (0, 1000), (3, 17), (256, 70_000), (5, 6)] {
            let d = subtree_decomposition(start, end);
            let mut pos = start;
            for (first, k) in d {
                assert_eq!(first, pos);
                assert_eq!(first % (1 << k), 0);
                pos += 1 << k;
            }
            assert_eq!(pos, end.max(start));
        }
    }

    #[test]
    fn extend_matches_leaf_by_leaf() {
        let all = leaves(1300);
        for p in [0u64, 1, 7, 256, 300, 1024] {
            for m in [p, p + 1, 777.max(p), 1300] {
                let mut range = CompactRange::new();
                range.extend(all[..p as usize].iter().copied()).unwrap();
                for (first, k) in subtree_decomposition(p, m) {
                    let f = first as usize;
                    let root = root_from_leaf_hashes(&all[f..f + (1usize << k)]);
                    range = extend_with_subtree(&range, k, root).unwrap();
                }
                assert_eq!(range.size(), m);
                assert_eq!(range.root(), root_from_leaf_hashes(&all[..m as usize]));
            }
        }
        assert!(extend_with_subtree(&CompactRange::new(), 64, [0; 32]).is_err());
        let mut one = CompactRange::new();
        one.push([1; 32]).unwrap();
        assert!(extend_with_subtree(&one, 1, [0; 32]).is_err());
    }

    #[test]
    fn locations_are_inside_tiles() {
        // Level-1 hashes exist for complete groups of 256 leaves only.
        let n = 70_000u64;
        for (first, k) in subtree_decomposition(300, n) {
            let loc = subtree_location(first, k, n).unwrap();
            assert_eq!(u32::from(loc.tile.level()), k / 8);
        }
    }
}
