//! Differential Merkle target (ct-core `merkle`): for a tree of up to 299
//! leaves (one full 256-leaf tile, a partial one, and a level-1 tile) and sizes chosen by the input, four ways to the root (batch
//! `root_from_leaf_hashes`, streaming `CompactRange`, a range resumed with
//! `CompactRange::from_parts`, `root_from_tiles` with and without the
//! level-1 tile) must agree with a reference MTH written from RFC 9162's
//! definition; reference PATH and PROOF outputs must verify with
//! `verify_inclusion` / `verify_consistency`, and any single changed byte,
//! hash, leaf position or missing proof hash must make them fail.
#![no_main]

use ct_auditor_fuzz::reference_merkle as reference;
use ct_core::merkle::{
    leaf_hash, parse_hash_tile, root_from_leaf_hashes, root_from_tiles, verify_consistency,
    verify_inclusion, CompactRange, Hash, TILE_WIDTH,
};
use libfuzzer_sys::fuzz_target;

fn u16_at(d: &[u8], i: usize) -> usize {
    usize::from(u16::from_be_bytes([
        d.get(i).copied().unwrap_or(0),
        d.get(i + 1).copied().unwrap_or(0),
    ]))
}

fuzz_target!(|data: &[u8]| {
    let n = u16_at(data, 0) % 300;
    let m = u16_at(data, 2) % (n + 1);
    let idx = u16_at(data, 4);
    let flip = u16_at(data, 6);
    let salt = data.get(8..).unwrap_or(&[]);
    // Distinct leaf hashes from one hash of the salt (hashing every leaf
    // would double the cost of an execution and test nothing more).
    let base = leaf_hash(salt).to_bytes();
    let leaves: Vec<Hash> = (0..n)
        .map(|i| {
            let mut h = base;
            for (b, x) in h[24..].iter_mut().zip((i as u64).to_be_bytes()) {
                *b ^= x;
            }
            h
        })
        .collect();

    // Roots.
    let want = reference::mth(&leaves);
    assert_eq!(root_from_leaf_hashes(&leaves), want);
    let mut range = CompactRange::new();
    range.extend(leaves[..m].iter().copied()).expect("extends");
    assert_eq!(range.root(), reference::mth(&leaves[..m]));
    let mut resumed =
        CompactRange::from_parts(range.size(), range.nodes().to_vec()).expect("own parts");
    resumed
        .extend(leaves[m..].iter().copied())
        .expect("extends");
    assert_eq!(resumed.root(), want);
    let level1: Vec<Hash> = leaves
        .chunks_exact(TILE_WIDTH as usize)
        .map(reference::mth)
        .collect();
    for with_level1 in [false, true] {
        let root = root_from_tiles(n as u64, |id| {
            let (start, end) = id.leaf_range().expect("small tree");
            match id.level() {
                0 => {
                    let body = leaves[start as usize..end as usize].concat();
                    Ok(Some(parse_hash_tile(&body, id.width())?))
                }
                1 if with_level1 => {
                    let first = (start / TILE_WIDTH) as usize;
                    Ok(Some(
                        level1[first..first + usize::from(id.width())].to_vec(),
                    ))
                }
                _ => Ok(None),
            }
        })
        .expect("tiles of a real tree");
        assert_eq!(root, want);
    }
    if n == 0 {
        return;
    }

    // Inclusion.
    let i = idx % n;
    let mut path = reference::path(i, &leaves);
    assert!(verify_inclusion(&leaves[i].into(), i as u64, n as u64, &path, &want).is_ok());
    if n > 1 {
        assert!(verify_inclusion(
            &leaves[i].into(),
            ((i + 1) % n) as u64,
            n as u64,
            &path,
            &want
        )
        .is_err());
    }
    if !path.is_empty() {
        let k = flip % (path.len() * 32);
        path[k / 32][k % 32] ^= 1;
        assert!(verify_inclusion(&leaves[i].into(), i as u64, n as u64, &path, &want).is_err());
    }

    // Consistency.
    let old = reference::mth(&leaves[..m]);
    let mut proof = reference::proof(m, &leaves);
    assert!(verify_consistency(m as u64, n as u64, &proof, &old, &want).is_ok());
    if m > 0 && m < n {
        let k = flip % (proof.len() * 32);
        proof[k / 32][k % 32] ^= 1;
        assert!(verify_consistency(m as u64, n as u64, &proof, &old, &want).is_err());
        proof[k / 32][k % 32] ^= 1;
        proof.pop();
        assert!(verify_consistency(m as u64, n as u64, &proof, &old, &want).is_err());
    }
});
