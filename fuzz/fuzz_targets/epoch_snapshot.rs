//! The object store's epoch snapshot, format version 2 (auditor-server
//! `snapshot`): an index object and its part objects, as a shard reads
//! them. The input is the index then the parts, each behind a 2-byte
//! length (`ct_auditor_fuzz::split2`); the expectation is what the index's
//! own header states (count capped at 4096). Never panics; the whole read
//! and a read checking the parts in reverse order (then the checks across
//! parts in order) agree; an accepted snapshot holds exactly the stated
//! count of strictly ascending hashes and re-encodes to exactly its bytes.
#![no_main]

use auditor_server::snapshot::{
    decode_snapshot, SetCheck, SnapshotExpect, SnapshotIndex, INDEX_HEADER,
};
use ct_auditor_fuzz::split2;
use libfuzzer_sys::fuzz_target;

fn read_reversed(
    index: &[u8],
    parts: &[&[u8]],
    want: SnapshotExpect,
) -> auditor_server::Result<(SnapshotIndex, Vec<[u8; 32]>)> {
    let idx = SnapshotIndex::decode("fuzz", index, want)?;
    if parts.len() != idx.parts.len() {
        return Err(auditor_server::Error::Corrupt {
            path: "fuzz".into(),
            why: "part count".into(),
        });
    }
    let mut verified = Vec::new();
    for i in (0..parts.len()).rev() {
        verified.push(idx.check_part("fuzz", i as u32, parts[i].to_vec())?);
    }
    verified.reverse();
    let mut check = SetCheck::new("fuzz".into(), &idx);
    let mut out = Vec::new();
    for p in &verified {
        check.push(p)?;
        out.extend_from_slice(p.hashes());
    }
    check.finish()?;
    Ok((idx, out))
}

fuzz_target!(|data: &[u8]| {
    let mut pieces = Vec::new();
    let mut rest = data;
    while !rest.is_empty() && pieces.len() < 64 {
        let (a, r) = split2(rest);
        pieces.push(a);
        rest = r;
    }
    let Some((&index, parts)) = pieces.split_first() else {
        return;
    };
    let le64 = |h: &[u8]| u64::from_le_bytes(h[..8].try_into().unwrap());
    let want = match index.get(..INDEX_HEADER) {
        Some(h) => SnapshotExpect {
            epoch: le64(&h[12..]),
            count: le64(&h[20..]).min(4096),
            set_sha256: h[36..68].try_into().unwrap(),
        },
        None => SnapshotExpect {
            epoch: 1,
            count: 0,
            set_sha256: [0; 32],
        },
    };
    let whole = decode_snapshot(index, parts, want);
    let reversed = read_reversed(index, parts, want);
    assert_eq!(
        whole.is_ok(),
        reversed.is_ok(),
        "the order of the part checks changed the verdict"
    );
    if let (Ok(a), Ok((idx, b))) = (whole, reversed) {
        assert_eq!(a, b);
        assert_eq!(a.len() as u64, want.count);
        assert!(a.windows(2).all(|w| w[0] < w[1]), "not strictly ascending");
        let (again, again_parts) = SnapshotIndex::of(want.epoch, &a, idx.part_entries);
        assert_eq!(again.encode(), index, "index not canonical");
        assert_eq!(again_parts, parts, "parts not canonical");
    }
});
