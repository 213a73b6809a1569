//! An epoch's files: the bitmap format (`.bits`, bound to the manifest by
//! its digest), reading them back, one bit for a report, and the manifest.

use std::io::Write as _;
use std::path::Path;

use audit_proto::Manifest;
use sha2::{Digest, Sha256};

use crate::error::{io, Error, Result};
use crate::layout::{bits_name, MANIFEST_FILE};

/// Magic of a bitmap artifact; the last byte is the on-disk format version.
const BITS_MAGIC: &[u8; 8] = b"CTAUBIT2";
/// Magic of format 1, which did not bind the manifest (refused).
const BITS_MAGIC_V1: &[u8; 8] = b"CTAUBIT1";
/// Header: magic, epoch u64, db u32, bits u64, manifest digest.
const BITS_HEADER: usize = 8 + 8 + 4 + 8 + 32;
/// Largest manifest file read back.
pub(super) const MAX_MANIFEST_FILE: u64 = audit_proto::api::MAX_MANIFEST_BYTES as u64;

/// A failed hint write as an I/O error naming the file (pir-core's error
/// keeps the kind, e.g. `StorageFull`, but knows no path).
pub(super) fn hint_write_error(path: &Path, e: pir_core::Error) -> Error {
    match e {
        pir_core::Error::Io { kind, message } => Error::Io {
            path: path.display().to_string(),
            source: std::io::Error::new(kind, message),
        },
        e => e.into(),
    }
}

pub(super) fn corrupt(path: &Path, why: String) -> Error {
    Error::Corrupt {
        path: path.display().to_string(),
        why,
    }
}

pub(super) fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = std::fs::File::create(path).map_err(io(path))?;
    f.write_all(bytes).map_err(io(path))?;
    f.sync_all().map_err(io(path))
}

pub(super) fn read_capped(path: &Path, max: u64) -> Result<Vec<u8>> {
    use std::io::Read as _;
    let f = std::fs::File::open(path).map_err(io(path))?;
    let mut buf = Vec::new();
    f.take(max + 1).read_to_end(&mut buf).map_err(io(path))?;
    if buf.len() as u64 > max {
        return Err(corrupt(path, format!("longer than {max} bytes")));
    }
    Ok(buf)
}

/// What a bitmap file's header states: which epoch and database it is,
/// its size in bits, and the digest of the manifest it was built with
/// ([`manifest_digest`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct BitsHeader {
    pub(super) epoch: u64,
    pub(super) db: u32,
    pub(super) bits: u64,
    pub(super) manifest: [u8; 32],
}

impl BitsHeader {
    fn to_bytes(self) -> Vec<u8> {
        let mut h = Vec::with_capacity(BITS_HEADER);
        h.extend_from_slice(BITS_MAGIC);
        h.extend_from_slice(&self.epoch.to_le_bytes());
        h.extend_from_slice(&self.db.to_le_bytes());
        h.extend_from_slice(&self.bits.to_le_bytes());
        h.extend_from_slice(&self.manifest);
        h
    }
}

/// Bitmap file (format 2): magic `CTAUBIT2` ‖ epoch u64 ‖ db u32 ‖ bits
/// u64 (LE) ‖ SHA-256 of manifest.json ‖ ⌈bits/8⌉ bytes ‖ SHA-256 of all
/// before.
pub(super) fn write_bits(path: &Path, header: &BitsHeader, bitmap: &[u8]) -> Result<()> {
    let header = header.to_bytes();
    let digest = Sha256::new()
        .chain_update(&header)
        .chain_update(bitmap)
        .finalize();
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).map_err(io(path))?);
    f.write_all(&header).map_err(io(path))?;
    f.write_all(bitmap).map_err(io(path))?;
    f.write_all(&digest).map_err(io(path))?;
    let f = f.into_inner().map_err(|e| Error::Io {
        path: path.display().to_string(),
        source: e.into_error(),
    })?;
    f.sync_all().map_err(io(path))
}

/// Reads the bitmap of a file whose header must equal `want`, taken from
/// the manifest at `manifest` (named in the errors: either file may be the
/// wrong one).
pub(super) fn read_bits(path: &Path, want: &BitsHeader, manifest: &Path) -> Result<Vec<u8>> {
    let body = want.bits.div_ceil(8);
    let len = BITS_HEADER as u64 + body + 32;
    let mut buf = read_capped(path, len)?;
    match buf.get(..8) {
        Some(m) if m == BITS_MAGIC => {}
        Some(m) if m == BITS_MAGIC_V1 => {
            return Err(corrupt(
                path,
                "on-disk format 1 (written by an older auditor-server, without the \
                 manifest binding): refused; rebuild the epoch"
                    .into(),
            ))
        }
        _ => return Err(corrupt(path, "not an epoch bitmap file (bad magic)".into())),
    }
    if buf.len() as u64 != len {
        return Err(corrupt(
            path,
            format!("{} bytes, expected {len}", buf.len()),
        ));
    }
    let (data, digest) = buf.split_at(buf.len() - 32);
    if Sha256::digest(data).as_slice() != digest {
        return Err(corrupt(path, "checksum mismatch".into()));
    }
    let expected = want.to_bytes();
    let (fields, bound) = (
        &data[..BITS_HEADER - 32],
        &data[BITS_HEADER - 32..BITS_HEADER],
    );
    if fields != &expected[..BITS_HEADER - 32] {
        let le = |r: std::ops::Range<usize>| {
            let mut b = [0u8; 8];
            b[..r.len()].copy_from_slice(&fields[r]);
            u64::from_le_bytes(b)
        };
        return Err(corrupt(
            path,
            format!(
                "header (epoch {}, database {}, {} bits) does not match {} (epoch {}, \
                 database {}, {} bits): a file of another epoch or database",
                le(8..16),
                le(16..20),
                le(20..28),
                manifest.display(),
                want.epoch,
                want.db,
                want.bits
            ),
        ));
    }
    if bound != want.manifest {
        return Err(corrupt(
            path,
            format!(
                "built for another manifest: {} has SHA-256 {}, this database was \
                 built with {} (the manifest changed after the build, or belongs to \
                 another one)",
                manifest.display(),
                audit_proto::hex::encode(&want.manifest),
                audit_proto::hex::encode(bound)
            ),
        ));
    }
    buf.truncate(BITS_HEADER + body as usize);
    buf.drain(..BITS_HEADER);
    Ok(buf)
}

/// Reads bit `bit` of database `db`'s bitmap in the published epoch
/// directory `dir` of `manifest` (misbehaviour reports,
/// [`crate::reports`]): `None` if this server does not hold the file (a
/// shard holds only its own databases). The header must name this epoch,
/// database and size; the checksum is not recomputed (that would read the
/// whole file), loading the epoch checked it.
pub fn read_db_bit(dir: &Path, manifest: &Manifest, db: u32, bit: u64) -> Result<Option<bool>> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let spec = manifest
        .dbs
        .get(db as usize)
        .ok_or_else(|| Error::Internal(format!("no database {db} in the manifest")))?;
    if bit >= spec.bits {
        return Err(Error::Internal(format!(
            "bit {bit} beyond database {db}'s {} bits",
            spec.bits
        )));
    }
    let path = dir.join(bits_name(db as usize));
    let mut f = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(&path)(e)),
    };
    let mut header = [0u8; BITS_HEADER];
    f.read_exact(&mut header).map_err(io(&path))?;
    let want = BitsHeader {
        epoch: manifest.epoch,
        db,
        bits: spec.bits,
        manifest: [0; 32],
    }
    .to_bytes();
    if header[..BITS_HEADER - 32] != want[..BITS_HEADER - 32] {
        return Err(corrupt(
            &path,
            "header (magic, epoch, database, size) does not match the manifest".into(),
        ));
    }
    f.seek(SeekFrom::Start(BITS_HEADER as u64 + bit / 8))
        .map_err(io(&path))?;
    let mut byte = [0u8; 1];
    f.read_exact(&mut byte).map_err(io(&path))?;
    Ok(Some(byte[0] >> (bit % 8) & 1 == 1))
}

/// Reads the manifest of the published epoch directory `dir`.
pub fn read_manifest(dir: &Path) -> Result<Manifest> {
    let path = dir.join(MANIFEST_FILE);
    let json = read_capped(&path, MAX_MANIFEST_FILE)?;
    Manifest::from_json(&json).map_err(|e| corrupt(&path, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_file_round_trip_and_damage() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.bits");
        let bitmap: Vec<u8> = (0..100u8).collect();
        let h = BitsHeader {
            epoch: 3,
            db: 1,
            bits: 800,
            manifest: [7; 32],
        };
        write_bits(&p, &h, &bitmap).unwrap();
        assert_eq!(
            read_bits(&p, &h, Path::new("manifest.json")).unwrap(),
            bitmap
        );
        for other in [
            BitsHeader { epoch: 4, ..h },
            BitsHeader { db: 0, ..h },
            BitsHeader { bits: 792, ..h },
        ] {
            assert!(read_bits(&p, &other, Path::new("manifest.json")).is_err());
        }
        let err = read_bits(
            &p,
            &BitsHeader {
                manifest: [8; 32],
                ..h
            },
            Path::new("manifest.json"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("built for another manifest"), "{err}");
        let mut raw = std::fs::read(&p).unwrap();
        raw[70] ^= 1;
        std::fs::write(&p, &raw).unwrap();
        assert!(matches!(
            read_bits(&p, &h, Path::new("manifest.json")),
            Err(Error::Corrupt { .. })
        ));
    }

    #[test]
    fn old_format_bits_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("old.bits");
        let bitmap = [0xA5u8; 100];
        let mut data = Vec::new();
        data.extend_from_slice(BITS_MAGIC_V1);
        data.extend_from_slice(&3u64.to_le_bytes());
        data.extend_from_slice(&1u32.to_le_bytes());
        data.extend_from_slice(&800u64.to_le_bytes());
        data.extend_from_slice(&bitmap);
        let digest = Sha256::digest(&data);
        data.extend_from_slice(&digest);
        std::fs::write(&p, &data).unwrap();
        let h = BitsHeader {
            epoch: 3,
            db: 1,
            bits: 800,
            manifest: [0; 32],
        };
        let err = read_bits(&p, &h, Path::new("manifest.json"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("format 1") && err.contains("rebuild"), "{err}");
        std::fs::write(&p, b"garbage").unwrap();
        let err = read_bits(&p, &h, Path::new("manifest.json"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("bad magic"), "{err}");
    }
}
