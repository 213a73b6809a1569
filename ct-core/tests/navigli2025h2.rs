//! Known-answer tests against real static-ct-api tiles of Let's Encrypt's
//! staging log "navigli2025h2" (tests/data/navigli2025h2/, with its provenance and licence).
//!
//! The set holds the full data and level-0 tiles 000..003 (entries 0..1023)
//! and the partial tiles `003.p/10`, which a log serves for tree size 778
//! (its entries 768..777 repeat the start of full tile 003). That is 1034
//! entry records in all, of 1024 distinct entries.

mod common;

use std::collections::HashSet;
use std::io::Write as _;

use ct_core::{
    cert_validity, data_tiles_for_range, parse_data_tile, parse_data_tile_checked, parse_hash_tile,
    parse_tile_path, root_from_leaf_hashes, root_from_tiles, tbs_validity, tiles_for_size,
    CompactRange, Error, Hash, SignedEntry, TileId, TilePath,
};

/// Every (data tile, level-0 tile) pair in the test data.
fn all_tiles() -> Vec<TileId> {
    let mut v: Vec<TileId> = (0..4).map(|i| TileId::new(0, i, 256).unwrap()).collect();
    v.push(TileId::new(0, 3, 10).unwrap());
    v
}

fn read_tile(path: &str) -> Option<Vec<u8>> {
    let p = common::navigli_dir().join(path);
    if p.exists() {
        Some(std::fs::read(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display())))
    } else {
        None
    }
}

fn level0_hashes(tile: TileId) -> Vec<Hash> {
    let bytes = read_tile(&tile.path()).unwrap_or_else(|| panic!("missing {}", tile.path()));
    parse_hash_tile(&bytes, tile.width()).unwrap()
}

#[test]
fn every_leaf_hash_matches_the_level0_tiles() {
    let mut checked = 0usize;
    let mut distinct = HashSet::new();
    for tile in all_tiles() {
        let data = read_tile(&tile.data_path()).unwrap();
        // Checks the entry count and that each leaf_index equals its position.
        let entries = parse_data_tile_checked(tile, &data)
            .unwrap_or_else(|e| panic!("{}: {e}", tile.data_path()));
        let hashes = level0_hashes(tile);
        assert_eq!(entries.len(), hashes.len());
        for (i, (entry, want)) in entries.iter().zip(&hashes).enumerate() {
            let index = tile.index() * 256 + i as u64;
            // Hash of the bytes as read...
            assert_eq!(&entry.leaf_hash(), want, "leaf hash of entry {index}");
            // ...and of the re-encoded MerkleTreeLeaf.
            assert_eq!(
                &entry.merkle_tree_leaf().leaf_hash().unwrap(),
                want,
                "re-encoded leaf hash of entry {index}"
            );
            assert_eq!(entry.leaf_index().unwrap(), index);
            checked += 1;
            distinct.insert(index);
        }
    }
    assert_eq!(checked, 1034, "1034 of 1034 entry records checked");
    assert_eq!(distinct.len(), 1024);
}

#[test]
fn every_precert_parses_and_has_a_not_after() {
    let mut precerts = 0;
    for tile in all_tiles() {
        for entry in parse_data_tile(&read_tile(&tile.data_path()).unwrap()).unwrap() {
            let SignedEntry::Precert(pc) = &entry.timestamped_entry().signed_entry else {
                panic!("all entries of this log segment are precert entries");
            };
            let v = tbs_validity(&pc.tbs_certificate).unwrap();
            let mut long = pc.tbs_certificate.clone();
            long.extend_from_slice(&[5, 0]);
            assert!(matches!(
                tbs_validity(&long),
                Err(Error::TrailingBytes {
                    what: "TBSCertificate",
                    count: 2
                })
            ));
            let cut = &pc.tbs_certificate[..pc.tbs_certificate.len() / 2];
            assert!(matches!(tbs_validity(cut), Err(Error::X509 { .. })));
            assert!(v.not_after > v.not_before);
            // Issued in 2025 and expiring in the log's 2025h2 shard.
            assert!(v.not_before > 1_735_689_600, "notBefore {}", v.not_before); // 2025-01-01
            assert!(
                (1_751_328_000..1_767_225_600).contains(&v.not_after),
                "notAfter {} outside 2025h2",
                v.not_after
            );
            // The submitted precertificate (poisoned, full cert) has the
            // same validity as the logged TBSCertificate.
            let pre = entry
                .pre_certificate()
                .expect("precert entries carry the precertificate");
            assert_eq!(cert_validity(pre).unwrap(), v);
            assert!(!entry.certificate_chain().is_empty());
            // The SCT timestamp falls inside the validity period.
            let ts = (entry.timestamped_entry().timestamp / 1000) as i64;
            assert!(v.contains(ts), "SCT time {ts} outside {v:?}");
            precerts += 1;
        }
    }
    assert_eq!(precerts, 1034);
}

#[test]
fn roots_from_data_tiles_and_hash_tiles_agree() {
    // 1024: the four full tiles. 778: tiles 000..002 plus the partial 003.p/10.
    for size in [778u64, 1024] {
        let tiles = data_tiles_for_range(0, size);
        assert_eq!(tiles, tiles_for_size(0, size));
        let mut leaf_hashes = Vec::new();
        let mut stream = CompactRange::new();
        for t in &tiles {
            // The tile maths names exactly the files the log served.
            let data = read_tile(&t.data_path())
                .unwrap_or_else(|| panic!("tile maths named a missing tile {}", t.data_path()));
            for e in parse_data_tile_checked(*t, &data).unwrap() {
                leaf_hashes.push(e.leaf_hash().to_bytes());
                stream.push(e.leaf_hash()).unwrap();
            }
        }
        assert_eq!(leaf_hashes.len() as u64, size);
        let direct = root_from_leaf_hashes(&leaf_hashes);
        assert_eq!(stream.root(), direct, "streaming root, size {size}");

        // Root from the level-0 hash tiles alone (the set has no level-1
        // tiles, so root_from_tiles must rebuild level-1 hashes itself).
        let mut fetched = Vec::new();
        let from_tiles = root_from_tiles(size, |id| {
            fetched.push(id);
            read_tile(&id.path())
                .map(|b| parse_hash_tile(&b, id.width()))
                .transpose()
        })
        .unwrap();
        assert_eq!(from_tiles, direct, "root from hash tiles, size {size}");
        assert!(
            fetched.iter().any(|t| t.level() == 1),
            "level 1 was tried first"
        );

        // With a level-1 tile built per the spec (each hash the MTH of a full
        // level-0 tile), the same root comes out.
        let level1: Vec<Hash> = (0..size / 256)
            .map(|i| root_from_leaf_hashes(&level0_hashes(TileId::new(0, i, 256).unwrap())))
            .collect();
        let with_l1 = root_from_tiles(size, |id| {
            if id.level() == 1 {
                assert_eq!(id, TileId::new(1, 0, level1.len() as u16).unwrap());
                return Ok(Some(level1.clone()));
            }
            read_tile(&id.path())
                .map(|b| parse_hash_tile(&b, id.width()))
                .transpose()
        })
        .unwrap();
        assert_eq!(with_l1, direct);
    }
}

#[test]
fn tile_paths_of_the_test_data_parse() {
    for t in all_tiles() {
        assert_eq!(parse_tile_path(&t.path()).unwrap(), TilePath::Hash(t));
        assert_eq!(parse_tile_path(&t.data_path()).unwrap(), TilePath::Data(t));
    }
}

#[test]
fn gzip_compressed_data_tile_gives_the_same_entries() {
    let raw = read_tile("tile/data/000").unwrap();
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(&raw).unwrap();
    let gz = enc.finish().unwrap();
    assert!(gz.len() < raw.len());
    let tile = TileId::new(0, 0, 256).unwrap();
    assert_eq!(
        parse_data_tile_checked(tile, &gz).unwrap(),
        parse_data_tile_checked(tile, &raw).unwrap()
    );
}

#[test]
fn corrupted_real_tiles_are_rejected() {
    let raw = read_tile("tile/data/003.p/10").unwrap();
    let tile = TileId::new(0, 3, 10).unwrap();
    // Truncated at every 997th byte: always an error, never a panic.
    for cut in (0..raw.len()).step_by(997) {
        assert!(parse_data_tile_checked(tile, &raw[..cut]).is_err());
    }
    // Claiming the partial tile is tile 4 breaks the leaf_index check.
    assert!(matches!(
        parse_data_tile_checked(TileId::new(0, 4, 10).unwrap(), &raw),
        Err(Error::LeafIndexMismatch {
            expected: 1024,
            found: 768
        })
    ));
    // A flipped bit inside a certificate changes the leaf hash.
    let mut bad = raw.clone();
    bad[200] ^= 1;
    let hashes = level0_hashes(tile);
    if let Ok(entries) = parse_data_tile(&bad) {
        assert_ne!(entries[0].leaf_hash(), hashes[0]);
    }
    // A hash tile of the wrong length is rejected.
    let l0 = read_tile(&tile.path()).unwrap();
    assert!(parse_hash_tile(&l0[..l0.len() - 1], 10).is_err());
}
