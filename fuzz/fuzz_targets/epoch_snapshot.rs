//! The object store's epoch snapshot (auditor-server
//! `objstore::SnapshotDecoder`), as a shard streams it: fed in chunks of
//! a size the input chooses, against the expectation its own header
//! states (count capped at 4096). Never panics; an accepted snapshot
//! holds exactly the stated count of strictly ascending hashes and
//! re-encodes to exactly its bytes; the whole-object and chunked reads
//! agree.
#![no_main]

use auditor_server::objstore::{
    decode_snapshot, encode_snapshot, SnapshotDecoder, SnapshotExpect, SNAPSHOT_HEADER,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&step, data)) = data.split_first() else {
        return;
    };
    let want = match data.get(..SNAPSHOT_HEADER) {
        Some(h) => SnapshotExpect {
            epoch: u64::from_le_bytes(h[12..20].try_into().unwrap()),
            count: u64::from_le_bytes(h[20..28].try_into().unwrap()).min(4096),
            set_sha256: h[28..60].try_into().unwrap(),
        },
        None => SnapshotExpect {
            epoch: 1,
            count: 0,
            set_sha256: [0; 32],
        },
    };
    let whole = decode_snapshot(data, want);
    let mut d = SnapshotDecoder::new("fuzz".into(), want).expect("count capped");
    let chunked = data
        .chunks(usize::from(step).max(1))
        .try_for_each(|c| d.feed(c))
        .and_then(|()| d.finish());
    assert_eq!(
        whole.is_ok(),
        chunked.is_ok(),
        "chunking changed the verdict"
    );
    if let (Ok(a), Ok(b)) = (whole, chunked) {
        assert_eq!(a, b);
        assert_eq!(a.len() as u64, want.count);
        assert!(a.windows(2).all(|w| w[0] < w[1]), "not strictly ascending");
        assert_eq!(encode_snapshot(want.epoch, &a), data, "not canonical");
    }
});
