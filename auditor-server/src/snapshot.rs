//! The epoch snapshot in the object store, format version 2: the sorted,
//! deduplicated leaf hashes of S split into part objects, listed by an
//! index object (`docs/architecture.md` §Epoch snapshot).
//!
//! Parts are cut **by position** in the sorted order: part i holds the
//! entries i·P … (i+1)·P − 1 ([`PART_ENTRIES`] = P = 2^20, 32 MiB). The
//! coordinator cuts them as the sorted file streams past, without knowing
//! anything but the count; every part but the last has the same size, so
//! a reader's memory per part in flight is fixed whatever S looks like (a
//! cut by hash range would give parts of uneven, data-dependent sizes).
//! At 2^36 entries that is 65,536 part objects of 32 MiB each, far inside
//! S3's limits (5 GiB per PUT, no limit on objects); no part is a
//! multipart upload, so the 10,000-part limit of one multipart upload does
//! not apply. Version 1 (one object) is no longer read: epochs are rebuilt
//! daily, so a store holds no v1 snapshot a shard still needs.
//!
//! Objects, in the epoch's directory, under `snapshot-<h>/`
//! ([`crate::objstore::snapshot_object`]); all integers little-endian:
//!
//! ```text
//! index.bin:
//!   magic "CTAUSIDX" (8) ‖ version u32 = 2 ‖ epoch u64 ‖ count u64
//!   ‖ part entries u32 (P) ‖ part count u32 (n = ⌈count / P⌉)
//!   ‖ set digest (32: crate::layout::set_digest of all the hashes)
//!   ‖ n × (part bytes u64 ‖ part SHA-256 (32))
//!   ‖ SHA-256 of every byte before (32)
//! part-<i, 6 digits>.bin:
//!   magic "CTAUSNAP" (8) ‖ version u32 = 2 ‖ epoch u64 ‖ part index u32
//!   ‖ part count u32 ‖ entry count u64
//!   ‖ entry count × 32-byte leaf hashes, strictly ascending
//!   ‖ SHA-256 of every byte before (32)
//! ```
//!
//! The index must name the spec's epoch, count and set digest
//! ([`SnapshotExpect`]) and its own checksum; each part must have exactly
//! the length and SHA-256 the index lists, and its header its own index,
//! the part count and the count the index implies — so a part damaged,
//! truncated, lengthened, missing, duplicated or put in another part's
//! place is refused ([`SnapshotIndex::check_part`]), naming the part,
//! before any of its entries is used. Across parts ([`SetCheck`], fed the
//! parts in order) every hash must be greater than the one before and the
//! hashes must hash to the spec's set digest.

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::layout::SET_DOMAIN;

/// Part GETs (and PUTs) of a snapshot in flight at once.
pub const PARTS_IN_FLIGHT: usize = 4;
/// Magic of a part object.
pub const PART_MAGIC: &[u8; 8] = b"CTAUSNAP";
/// Magic of the index object.
pub const INDEX_MAGIC: &[u8; 8] = b"CTAUSIDX";
/// Version of the snapshot format.
pub const SNAPSHOT_VERSION: u32 = 2;
/// Bytes of a part's header.
pub const PART_HEADER: usize = 8 + 4 + 8 + 4 + 4 + 8;
/// Bytes of the index's header.
pub const INDEX_HEADER: usize = 8 + 4 + 8 + 8 + 4 + 4 + 32;
/// Bytes of one part's line in the index.
pub const INDEX_LINE: usize = 8 + 32;
/// Most leaf hashes a snapshot may hold (2^36, ~14 times the 5·10^9
/// entries of the internet-scale deployment).
pub const MAX_SNAPSHOT_ENTRIES: u64 = 1 << 36;
/// Entries per part the coordinator writes: 2^20, 32 MiB.
pub const PART_ENTRIES: u32 = 1 << 20;
/// Most entries per part a reader accepts (its memory per part).
pub const MAX_PART_ENTRIES: u32 = 1 << 22;
/// Most parts an index may list (2^36 entries at [`PART_ENTRIES`] are 2^16).
pub const MAX_PARTS: u32 = 1 << 17;

/// What a snapshot must hold (from the epoch spec).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotExpect {
    /// Its epoch.
    pub epoch: u64,
    /// |S|.
    pub count: u64,
    /// [`crate::layout::set_digest`] of S.
    pub set_sha256: [u8; 32],
}

/// One part as the index lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartInfo {
    /// Bytes of the part object.
    pub bytes: u64,
    /// SHA-256 of the whole part object.
    pub sha256: [u8; 32],
}

/// A checked index object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotIndex {
    /// What it was checked against.
    pub want: SnapshotExpect,
    /// Entries per part (the last may hold fewer).
    pub part_entries: u32,
    /// The parts, in order.
    pub parts: Vec<PartInfo>,
}

/// Bytes of a part of `entries` entries.
pub fn part_len(entries: u64) -> u64 {
    PART_HEADER as u64 + 32 * entries + 32
}

/// Bytes of an index of `parts` parts.
pub fn index_len(parts: u32) -> u64 {
    INDEX_HEADER as u64 + INDEX_LINE as u64 * u64::from(parts) + 32
}

/// Parts of a snapshot of `count` entries, `part_entries` per part.
pub fn part_count(count: u64, part_entries: u32) -> u64 {
    count.div_ceil(u64::from(part_entries.max(1)))
}

/// Entries of part `i` of `count` entries cut every `part_entries`.
pub fn entries_of(count: u64, part_entries: u32, i: u32) -> u64 {
    let p = u64::from(part_entries.max(1));
    count.saturating_sub(u64::from(i) * p).min(p)
}

fn le64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

fn le32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_le_bytes(a)
}

fn corrupt(name: &str, why: String) -> Error {
    Error::Corrupt {
        path: name.to_owned(),
        why,
    }
}

/// The header of part `index` of `parts` of epoch `epoch`, holding
/// `entries` entries.
pub fn part_header(epoch: u64, index: u32, parts: u32, entries: u64) -> [u8; PART_HEADER] {
    let mut h = [0u8; PART_HEADER];
    h[..8].copy_from_slice(PART_MAGIC);
    h[8..12].copy_from_slice(&SNAPSHOT_VERSION.to_le_bytes());
    h[12..20].copy_from_slice(&epoch.to_le_bytes());
    h[20..24].copy_from_slice(&index.to_le_bytes());
    h[24..28].copy_from_slice(&parts.to_le_bytes());
    h[28..36].copy_from_slice(&entries.to_le_bytes());
    h
}

/// Part `index` of `parts` of epoch `epoch` holding `hashes`, whole.
pub fn encode_part(epoch: u64, index: u32, parts: u32, hashes: &[[u8; 32]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(part_len(hashes.len() as u64) as usize);
    out.extend_from_slice(&part_header(epoch, index, parts, hashes.len() as u64));
    out.extend_from_slice(hashes.as_flattened());
    let sum = Sha256::digest(&out);
    out.extend_from_slice(&sum);
    out
}

impl SnapshotIndex {
    /// The index object's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let w = &self.want;
        let mut out = Vec::with_capacity(index_len(self.parts.len() as u32) as usize);
        out.extend_from_slice(INDEX_MAGIC);
        out.extend_from_slice(&SNAPSHOT_VERSION.to_le_bytes());
        out.extend_from_slice(&w.epoch.to_le_bytes());
        out.extend_from_slice(&w.count.to_le_bytes());
        out.extend_from_slice(&self.part_entries.to_le_bytes());
        out.extend_from_slice(&(self.parts.len() as u32).to_le_bytes());
        out.extend_from_slice(&w.set_sha256);
        for p in &self.parts {
            out.extend_from_slice(&p.bytes.to_le_bytes());
            out.extend_from_slice(&p.sha256);
        }
        let sum = Sha256::digest(&out);
        out.extend_from_slice(&sum);
        out
    }

    /// Checks the index object `bytes` (named `name` in errors) against
    /// `want`: format, epoch, count (at most [`MAX_SNAPSHOT_ENTRIES`]),
    /// set digest, the cut (parts of at most [`MAX_PART_ENTRIES`], at most
    /// [`MAX_PARTS`] of them, as many as the count needs), each part's
    /// length, its checksum and that nothing follows it.
    pub fn decode(name: &str, bytes: &[u8], want: SnapshotExpect) -> Result<SnapshotIndex> {
        if want.count > MAX_SNAPSHOT_ENTRIES {
            return Err(corrupt(
                name,
                format!(
                    "{} entries planned, more than {MAX_SNAPSHOT_ENTRIES}",
                    want.count
                ),
            ));
        }
        if bytes.len() < INDEX_HEADER + 32 {
            return Err(corrupt(
                name,
                format!("truncated: {} bytes, not even a header", bytes.len()),
            ));
        }
        if &bytes[..8] != INDEX_MAGIC {
            return Err(corrupt(name, "not a snapshot index (bad magic)".into()));
        }
        let version = le32(&bytes[8..]);
        if version != SNAPSHOT_VERSION {
            return Err(corrupt(
                name,
                format!("snapshot format version {version} (this server reads {SNAPSHOT_VERSION})"),
            ));
        }
        let (epoch, count) = (le64(&bytes[12..]), le64(&bytes[20..]));
        let (part_entries, parts) = (le32(&bytes[28..]), le32(&bytes[32..]));
        if epoch != want.epoch {
            return Err(corrupt(
                name,
                format!("snapshot of epoch {epoch}, expected {}", want.epoch),
            ));
        }
        if count != want.count {
            return Err(corrupt(
                name,
                format!("{count} entries, the spec plans {}", want.count),
            ));
        }
        if bytes[36..68] != want.set_sha256 {
            return Err(corrupt(name, "set digest differs from the spec's".into()));
        }
        if part_entries == 0 || part_entries > MAX_PART_ENTRIES || parts > MAX_PARTS {
            return Err(corrupt(
                name,
                format!("{parts} parts of {part_entries} entries (at most {MAX_PARTS} of {MAX_PART_ENTRIES})"),
            ));
        }
        if u64::from(parts) != part_count(count, part_entries) {
            return Err(corrupt(
                name,
                format!("{parts} parts of {part_entries} entries cannot hold {count} entries"),
            ));
        }
        let len = index_len(parts);
        if bytes.len() as u64 != len {
            return Err(corrupt(
                name,
                if (bytes.len() as u64) < len {
                    format!("truncated: {} of {len} bytes", bytes.len())
                } else {
                    format!("longer than {len} bytes (trailing bytes)")
                },
            ));
        }
        let body = bytes.len() - 32;
        if Sha256::digest(&bytes[..body]).as_slice() != &bytes[body..] {
            return Err(corrupt(name, "checksum mismatch".into()));
        }
        let mut list = Vec::with_capacity(parts as usize);
        for (i, line) in bytes[INDEX_HEADER..body]
            .chunks_exact(INDEX_LINE)
            .enumerate()
        {
            let p = PartInfo {
                bytes: le64(line),
                sha256: line[8..].try_into().unwrap_or([0; 32]),
            };
            let want_len = part_len(entries_of(count, part_entries, i as u32));
            if p.bytes != want_len {
                return Err(corrupt(
                    name,
                    format!(
                        "part {i} listed with {} bytes, its entries take {want_len}",
                        p.bytes
                    ),
                ));
            }
            list.push(p);
        }
        Ok(SnapshotIndex {
            want,
            part_entries,
            parts: list,
        })
    }

    /// The index of `hashes` (sorted, deduplicated) cut every
    /// `part_entries`, as the coordinator writes it (tests and tools).
    pub fn of(epoch: u64, hashes: &[[u8; 32]], part_entries: u32) -> (SnapshotIndex, Vec<Vec<u8>>) {
        let part_entries = part_entries.max(1);
        let n = part_count(hashes.len() as u64, part_entries) as u32;
        let parts: Vec<Vec<u8>> = hashes
            .chunks(part_entries as usize)
            .enumerate()
            .map(|(i, c)| encode_part(epoch, i as u32, n, c))
            .collect();
        let index = SnapshotIndex {
            want: SnapshotExpect {
                epoch,
                count: hashes.len() as u64,
                set_sha256: crate::layout::set_digest(hashes),
            },
            part_entries,
            parts: parts
                .iter()
                .map(|p| PartInfo {
                    bytes: p.len() as u64,
                    sha256: Sha256::digest(p).into(),
                })
                .collect(),
        };
        (index, parts)
    }

    /// Entries of part `i`.
    pub fn entries_of(&self, i: u32) -> u64 {
        entries_of(self.want.count, self.part_entries, i)
    }

    /// Checks part `i`'s object `bytes` (named `name` in errors): the
    /// length and SHA-256 the index lists, then its header (format, epoch,
    /// its own index, the part count, its entry count) and that its
    /// hashes ascend strictly. Parts may be checked in any order; the
    /// returned part's hashes may be used at once.
    pub fn check_part(&self, name: &str, i: u32, bytes: Vec<u8>) -> Result<VerifiedPart> {
        let Some(info) = self.parts.get(i as usize) else {
            return Err(corrupt(
                name,
                format!("part {i}, but the index lists {}", self.parts.len()),
            ));
        };
        let len = bytes.len() as u64;
        if len != info.bytes {
            return Err(corrupt(
                name,
                if len < info.bytes {
                    format!("truncated: {len} of {} bytes", info.bytes)
                } else {
                    format!("longer than {} bytes (trailing bytes)", info.bytes)
                },
            ));
        }
        if Sha256::digest(&bytes).as_slice() != info.sha256 {
            return Err(corrupt(
                name,
                format!("part {i}: SHA-256 differs from the index's"),
            ));
        }
        // Past the index's checksum the bytes are the coordinator's: the
        // header checks below catch a coordinator that wrote them wrong.
        let entries = self.entries_of(i);
        let want = part_header(self.want.epoch, i, self.parts.len() as u32, entries);
        if bytes.len() < PART_HEADER || bytes[..PART_HEADER] != want {
            return Err(corrupt(
                name,
                format!(
                    "part {i}: header does not name epoch {}, part {i} of {}, {entries} entries",
                    self.want.epoch,
                    self.parts.len()
                ),
            ));
        }
        let body = bytes.len() - 32;
        if Sha256::digest(&bytes[..body]).as_slice() != &bytes[body..] {
            return Err(corrupt(name, format!("part {i}: checksum mismatch")));
        }
        let part = VerifiedPart { bytes, index: i };
        if let Some(k) = part.hashes().windows(2).position(|w| w[0] >= w[1]) {
            return Err(corrupt(
                name,
                format!(
                    "part {i}: leaf hash {} is not greater than the one before (not sorted, or a duplicate)",
                    k + 1
                ),
            ));
        }
        Ok(part)
    }
}

/// A part whose bytes the index vouches for.
#[derive(Debug)]
pub struct VerifiedPart {
    bytes: Vec<u8>,
    index: u32,
}

impl VerifiedPart {
    /// Its position among the parts.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Its leaf hashes, ascending.
    pub fn hashes(&self) -> &[[u8; 32]] {
        let body =
            &self.bytes[PART_HEADER.min(self.bytes.len())..self.bytes.len().saturating_sub(32)];
        body.as_chunks::<32>().0
    }
}

/// The checks across parts, fed every part in order: each part's first
/// hash above the previous part's last, and the set digest of them all.
#[derive(Debug)]
pub struct SetCheck {
    name: String,
    want: SnapshotExpect,
    parts: u32,
    next: u32,
    seen: u64,
    last: Option<[u8; 32]>,
    set: Sha256,
}

impl SetCheck {
    /// The check of the snapshot `index` (named `name` in errors).
    pub fn new(name: String, index: &SnapshotIndex) -> SetCheck {
        let mut set = Sha256::new();
        set.update(SET_DOMAIN);
        set.update(index.want.count.to_be_bytes());
        SetCheck {
            name,
            want: index.want,
            parts: index.parts.len() as u32,
            next: 0,
            seen: 0,
            last: None,
            set,
        }
    }

    /// Takes the next part (which must be part `self.next`).
    pub fn push(&mut self, part: &VerifiedPart) -> Result<()> {
        if part.index != self.next {
            return Err(corrupt(
                &self.name,
                format!("part {} where part {} belongs", part.index, self.next),
            ));
        }
        let h = part.hashes();
        if let (Some(prev), Some(first)) = (self.last, h.first()) {
            if prev >= *first {
                return Err(corrupt(
                    &self.name,
                    format!(
                        "part {}: its first leaf hash is not greater than part {}'s last",
                        part.index,
                        part.index.wrapping_sub(1)
                    ),
                ));
            }
        }
        self.set.update(h.as_flattened());
        self.seen += h.len() as u64;
        self.last = h.last().copied().or(self.last);
        self.next += 1;
        Ok(())
    }

    /// Checks that every part came and the set digest.
    pub fn finish(self) -> Result<()> {
        if self.next != self.parts || self.seen != self.want.count {
            return Err(corrupt(
                &self.name,
                format!(
                    "{} of {} parts, {} of {} entries",
                    self.next, self.parts, self.seen, self.want.count
                ),
            ));
        }
        if self.set.finalize().as_slice() != self.want.set_sha256 {
            return Err(corrupt(
                &self.name,
                "the leaf hashes are not the planned set".into(),
            ));
        }
        Ok(())
    }
}

/// Decodes a whole snapshot held in memory — the index object and the
/// part objects in order — against `want` (fuzzing, tools, tests).
pub fn decode_snapshot(
    index: &[u8],
    parts: &[&[u8]],
    want: SnapshotExpect,
) -> Result<Vec<[u8; 32]>> {
    let idx = SnapshotIndex::decode("index", index, want)?;
    if parts.len() != idx.parts.len() {
        return Err(corrupt(
            "snapshot",
            format!("{} parts, the index lists {}", parts.len(), idx.parts.len()),
        ));
    }
    let mut check = SetCheck::new("snapshot".into(), &idx);
    let mut out = Vec::with_capacity(want.count.min(1 << 16) as usize);
    for (i, p) in parts.iter().enumerate() {
        let part = idx.check_part(&format!("part {i}"), i as u32, p.to_vec())?;
        check.push(&part)?;
        out.extend_from_slice(part.hashes());
    }
    check.finish()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(n: u32) -> Vec<[u8; 32]> {
        let mut v: Vec<[u8; 32]> = (0..n)
            .map(|i| Sha256::digest(i.to_le_bytes()).into())
            .collect();
        v.sort_unstable();
        v
    }

    fn expect(epoch: u64, h: &[[u8; 32]]) -> SnapshotExpect {
        SnapshotExpect {
            epoch,
            count: h.len() as u64,
            set_sha256: crate::layout::set_digest(h),
        }
    }

    fn refs(parts: &[Vec<u8>]) -> Vec<&[u8]> {
        parts.iter().map(Vec::as_slice).collect()
    }

    #[test]
    fn round_trip_in_any_cut() {
        for (n, per) in [(0u32, 4u32), (1, 1), (30, 7), (30, 30), (30, 31), (64, 16)] {
            let h = sorted(n);
            let (idx, parts) = SnapshotIndex::of(4, &h, per);
            assert_eq!(parts.len() as u64, part_count(u64::from(n), per));
            let bytes = idx.encode();
            assert_eq!(bytes.len() as u64, index_len(parts.len() as u32));
            assert_eq!(
                SnapshotIndex::decode("i", &bytes, expect(4, &h)).unwrap(),
                idx
            );
            assert_eq!(
                decode_snapshot(&bytes, &refs(&parts), expect(4, &h)).unwrap(),
                h,
                "{n} entries, {per} per part"
            );
        }
    }

    /// Parts check on their own, in any order; the checks across parts
    /// then need them in order.
    #[test]
    fn parts_check_in_any_order() {
        let h = sorted(50);
        let (idx, parts) = SnapshotIndex::of(2, &h, 7);
        let mut order: Vec<u32> = (0..parts.len() as u32).collect();
        order.reverse();
        order.swap(1, 4);
        let mut got: Vec<VerifiedPart> = order
            .iter()
            .map(|&i| idx.check_part("p", i, parts[i as usize].clone()).unwrap())
            .collect();
        let mut check = SetCheck::new("s".into(), &idx);
        assert!(check
            .push(&got[0])
            .unwrap_err()
            .to_string()
            .contains("part 7 where part 0"));
        got.sort_by_key(VerifiedPart::index);
        let mut check2 = SetCheck::new("s".into(), &idx);
        for p in &got {
            check2.push(p).unwrap();
        }
        check2.finish().unwrap();
    }

    #[test]
    fn every_damage_is_refused_naming_the_part() {
        let h = sorted(40);
        let (idx, parts) = SnapshotIndex::of(4, &h, 6);
        let index = idx.encode();
        let want = expect(4, &h);
        let err = |i: &[u8], p: &[Vec<u8>], w: SnapshotExpect| {
            decode_snapshot(i, &refs(p), w).unwrap_err().to_string()
        };
        // a flipped byte anywhere in a part
        for at in [0, 9, 13, 21, 25, 30, 40, 100, parts[2].len() - 1] {
            let mut p = parts.clone();
            p[2][at] ^= 0x10;
            let e = err(&index, &p, want);
            assert!(e.contains("part 2"), "byte {at}: {e}");
        }
        // anywhere in the index
        for at in [0, 8, 12, 20, 28, 32, 40, 70, index.len() - 1] {
            let mut i = index.clone();
            i[at] ^= 0x10;
            assert!(
                decode_snapshot(&i, &refs(&parts), want).is_err(),
                "byte {at}"
            );
        }
        // swapped parts, a missing one, an extra one, a duplicated one
        let mut p = parts.clone();
        p.swap(1, 2);
        assert!(err(&index, &p, want).contains("part 1"));
        let mut p = parts.clone();
        p.remove(3);
        assert!(err(&index, &p, want).contains("parts, the index lists"));
        let mut p = parts.clone();
        p.push(parts[0].clone());
        assert!(err(&index, &p, want).contains("parts, the index lists"));
        let mut p = parts.clone();
        p[4] = parts[3].clone();
        assert!(err(&index, &p, want).contains("part 4"));
        // truncated, trailing bytes
        let mut p = parts.clone();
        p[1].pop();
        assert!(err(&index, &p, want).contains("truncated"));
        let mut p = parts.clone();
        p[1].push(0);
        assert!(err(&index, &p, want).contains("trailing bytes"));
        assert!(err(&index[..index.len() - 1], &parts, want).contains("truncated"));
        let mut long = index.clone();
        long.push(0);
        assert!(err(&long, &parts, want).contains("trailing bytes"));
        // wrong epoch, count, set
        assert!(err(&index, &parts, SnapshotExpect { epoch: 5, ..want }).contains("epoch 4"));
        assert!(err(&index, &parts, SnapshotExpect { count: 39, ..want })
            .contains("40 entries, the spec plans 39"));
        let other = expect(4, &sorted(39));
        assert!(err(&index, &parts, SnapshotExpect { count: 40, ..other }).contains("set digest"));
        // a count over the cap
        let huge = SnapshotExpect {
            count: MAX_SNAPSHOT_ENTRIES + 1,
            ..want
        };
        assert!(SnapshotIndex::decode("i", &index, huge).is_err());
    }

    /// A coordinator that wrote parts wrong, with a consistent index:
    /// unsorted or duplicate hashes, within a part or across two, or
    /// another set, are refused.
    #[test]
    fn a_consistent_but_wrong_snapshot_is_refused() {
        let h = sorted(20);
        for (bad, what) in [
            (
                {
                    let mut v = h.clone();
                    v.swap(3, 4);
                    v
                },
                "not greater than the one before",
            ),
            (
                {
                    let mut v = h.clone();
                    v[6] = v[5];
                    v
                },
                "not greater than the one before",
            ),
            (
                {
                    let mut v = h.clone();
                    v.swap(4, 5);
                    v
                },
                "first leaf hash",
            ),
        ] {
            let (idx, parts) = SnapshotIndex::of(1, &bad, 5);
            let e = decode_snapshot(&idx.encode(), &refs(&parts), expect(1, &bad))
                .unwrap_err()
                .to_string();
            assert!(e.contains(what), "{e}");
        }
        // a valid snapshot of another set under the spec's set digest
        let (mut idx, parts) = SnapshotIndex::of(1, &h, 5);
        idx.want.set_sha256 = crate::layout::set_digest(&sorted(21)[..20]);
        let e = decode_snapshot(&idx.encode(), &refs(&parts), idx.want)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not the planned set"), "{e}");
    }

    /// Random damage (flips, cuts, insertions) to any object never
    /// panics and is never accepted.
    #[test]
    fn random_damage_never_passes() {
        let h = sorted(40);
        let (idx, parts) = SnapshotIndex::of(7, &h, 9);
        let index = idx.encode();
        let want = expect(7, &h);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        for _ in 0..2000 {
            let (mut i, mut p) = (index.clone(), parts.clone());
            let which = next(p.len() + 1);
            let b = if which == p.len() {
                &mut i
            } else {
                &mut p[which]
            };
            match next(3) {
                0 => {
                    let at = next(b.len());
                    b[at] ^= 1 << next(8);
                }
                1 => b.truncate(next(b.len())),
                _ => {
                    let at = next(b.len() + 1);
                    b.insert(at, next(256) as u8);
                }
            }
            assert!(decode_snapshot(&i, &refs(&p), want).is_err());
        }
    }
}
