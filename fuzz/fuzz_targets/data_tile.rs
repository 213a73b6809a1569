//! A static-ct-api data tile body (ct-core `leaf`), raw or gzip as a log
//! may serve it: decompression is capped, parsing never panics, the
//! entries re-encode to exactly the decompressed bytes, and the checked
//! parse (entry count and `leaf_index` of each entry) agrees with the
//! entries' own indices.
#![no_main]

use ct_core::leaf::{decompress_if_gzip, parse_data_tile, DataTile, MAX_DATA_TILE_SIZE};
use ct_core::merkle::{TileId, TILE_WIDTH};
use ct_core::parse_data_tile_checked;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(tile) = DataTile::new(data) else {
        return;
    };
    let plain = decompress_if_gzip(data, MAX_DATA_TILE_SIZE).expect("decompressed once already");
    assert_eq!(&plain[..], tile.bytes());
    let Ok(entries) = parse_data_tile(data) else {
        return;
    };
    assert!(entries.len() <= TILE_WIDTH as usize);
    let mut re = Vec::with_capacity(plain.len());
    for e in &entries {
        re.extend(e.encode().expect("re-encodes"));
    }
    assert_eq!(re, &plain[..], "entries do not re-encode to the tile");
    let (Some(first), Ok(width)) = (entries.first(), u16::try_from(entries.len())) else {
        return;
    };
    let Ok(start) = first.leaf_index() else {
        assert!(
            parse_data_tile_checked(TileId::new(0, 0, width).expect("valid id"), data).is_err()
        );
        return;
    };
    let index = start / TILE_WIDTH;
    let id = TileId::new(0, index, width).expect("valid id");
    let consecutive = entries
        .iter()
        .enumerate()
        .all(|(i, e)| e.leaf_index().ok() == Some(index * TILE_WIDTH + i as u64));
    assert_eq!(parse_data_tile_checked(id, data).is_ok(), consecutive);
});
