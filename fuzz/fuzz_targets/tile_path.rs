//! A tlog-tiles / static-ct-api tile path (ct-core `merkle::parse_tile_path`),
//! as a log server parses a request URL: parsing never panics and is
//! canonical (a parsed path prints back as the same path).
#![no_main]

use ct_core::merkle::{parse_tile_path, TilePath};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(p) = parse_tile_path(s) else {
        return;
    };
    let printed = match p {
        TilePath::Hash(id) => id.path(),
        TilePath::Data(id) => {
            assert_eq!(id.level(), 0);
            id.data_path()
        }
    };
    assert_eq!(printed, s.strip_prefix('/').unwrap_or(s));
    assert_eq!(parse_tile_path(&printed).ok(), Some(p));
    let id = match p {
        TilePath::Hash(id) | TilePath::Data(id) => id,
    };
    let _ = id.leaf_range();
});
