//! The hint file: the dense hint rows of DBSetup persisted for restarts
//! ([`Server::write_hint`], [`Server::from_hint`]), versioned and
//! checksummed, parsed without trusting a byte of it.

use std::sync::Arc;
use std::time::Instant;

use sha2::{Digest, Sha256};

use super::Server;
use crate::db::Database;
use crate::digits::DigitMatrix;
use crate::error::{Error, Result};
use crate::params::{DbShape, Params};
use crate::rns::Context;
use crate::sampler::{hex, PublicSeed};

/// Magic and version of a hint file: "YPIRHNT" then the version digit.
const HINT_MAGIC: [u8; 8] = *b"YPIRHNT1";
/// Hint file header: magic, parameter-set id, seed, ℓ1, ℓ2, K_H.
const HINT_HEADER: usize = 8 + 2 + 32 + 8 + 8 + 4;
/// SHA-256 trailer.
const HINT_CHECKSUM: usize = 32;

/// Parses a hint file written by [`Server::write_hint`] for `params`,
/// `shape` and `seed` into the dense hint rows. Never panics.
fn parse_hint_file(
    params: &Params,
    shape: DbShape,
    seed: &PublicSeed,
    f: &[u8],
) -> Result<DigitMatrix> {
    let total = Server::hint_file_len(params, shape);
    let truncated = || Error::Truncated {
        needed: total,
        have: f.len(),
    };
    if f.len() < HINT_MAGIC.len() {
        return Err(truncated());
    }
    if f[..7] != HINT_MAGIC[..7] {
        return Err(Error::BadMagic("hint file"));
    }
    if f[7] != HINT_MAGIC[7] {
        return Err(Error::UnsupportedVersion(f[7].wrapping_sub(b'0')));
    }
    if f.len() < HINT_HEADER {
        return Err(truncated());
    }
    let mut le = [0u8; 8];
    let id = u16::from_le_bytes([f[8], f[9]]);
    if id != params.id {
        return Err(Error::WrongParamSet {
            expected: params.id,
            got: id,
        });
    }
    if f[10..42] != seed.0 {
        let mut theirs = [0u8; 32];
        theirs.copy_from_slice(&f[10..42]);
        return Err(Error::WrongSeed {
            expected: hex(&seed.id()),
            got: hex(&PublicSeed(theirs).id()),
        });
    }
    le.copy_from_slice(&f[42..50]);
    let ell1 = u64::from_le_bytes(le);
    le.copy_from_slice(&f[50..58]);
    let ell2 = u64::from_le_bytes(le);
    if ell1 != shape.ell1 as u64 || ell2 != shape.ell2 as u64 {
        return Err(Error::WrongShape {
            ell1: shape.ell1,
            ell2: shape.ell2,
            got_ell1: usize::try_from(ell1).unwrap_or(usize::MAX),
            got_ell2: usize::try_from(ell2).unwrap_or(usize::MAX),
        });
    }
    let kh = params.hint_rows();
    if u32::from_le_bytes([f[58], f[59], f[60], f[61]]) as u64 != kh as u64 {
        return Err(Error::CorruptHint("K_H differs from the parameter set"));
    }
    if f.len() < total {
        return Err(truncated());
    }
    if f.len() > total {
        return Err(Error::TrailingBytes(f.len() - total));
    }
    let (signed, checksum) = f.split_at(total - HINT_CHECKSUM);
    if Sha256::digest(signed)[..] != checksum[..] {
        return Err(Error::CorruptHint("checksum mismatch"));
    }
    // Every chunk is a signed log p-bit value (chunk_signed); the last row
    // holds only the d1·log q̃1 mod log p leftover bits of each column, so
    // its chunks are non-negative and below 2^leftover (pack_chunks).
    let pb = params.p_bits;
    let half = 1i32 << (pb - 1);
    let leftover = (params.d1 * params.q1_tilde_bits as usize) % pb as usize;
    let mut hint = DigitMatrix::zeros(kh, shape.ell2);
    let mut vals = vec![0i16; shape.ell2];
    for (r, row) in signed[HINT_HEADER..]
        .chunks_exact(2 * shape.ell2)
        .enumerate()
    {
        let (lo, hi) = if r + 1 == kh && leftover != 0 {
            (0, 1i32 << leftover)
        } else {
            (-half, half)
        };
        for (j, (b, v)) in row.chunks_exact(2).zip(vals.iter_mut()).enumerate() {
            *v = i16::from_le_bytes([b[0], b[1]]);
            if !(lo..hi).contains(&(*v as i32)) {
                return Err(Error::OutOfRange {
                    field: "hint",
                    index: r * shape.ell2 + j,
                });
            }
        }
        hint.write_row(r, 0, &vals);
    }
    Ok(hint)
}

impl Server {
    /// Restarts a server from a hint file written by [`Server::write_hint`]
    /// for the same parameter set, database and seed, without recomputing
    /// A1·D (App. B), the expensive part of DBSetup.
    ///
    /// The file is parsed, not trusted: the magic and version, parameter-set
    /// id, seed, shape and K_H must match, the length must be exact (no
    /// truncation, no trailing bytes), the SHA-256 checksum must verify and
    /// every chunk must lie in the range the hint uses ([−p/2, p/2), and
    /// [0, 2^r) in the last row, which holds the r = d1·log q̃1 mod log p
    /// leftover bits of each column). Never panics on any input bytes.
    ///
    /// a2, the packing key rows, H2 and the §4.2 precomputation are
    /// re-derived from the seed. The unrounded A1·D is not in the file: the
    /// first [`Server::update`] that changes a record recomputes it (at the
    /// cost of a full DBSetup). The checksum guards against corruption, not
    /// against pairing the file with another database version under the
    /// same seed and shape; such a server answers wrongly until it is
    /// updated.
    pub fn from_hint(
        ctx: Arc<Context>,
        db: Database,
        seed: PublicSeed,
        hint_file: &[u8],
    ) -> Result<Server> {
        let t0 = Instant::now();
        let params = ctx.params;
        Self::check_database(&params, &db)?;
        let shape = db.shape();
        let hint = parse_hint_file(&params, shape, &seed, hint_file)?;
        let a1 = seed.expand_a1(params.m1(shape), params.d1);
        let load_s = t0.elapsed().as_secs_f64();
        Ok(Self::assemble(ctx, db, seed, hint, Vec::new(), &a1, load_s))
    }

    /// Writes the hint file of this server (see [`Server::from_hint`]),
    /// exactly [`Server::hint_file_len`] bytes, and flushes `w`.
    ///
    /// Layout (integers little-endian):
    ///
    /// | bytes | field |
    /// |---|---|
    /// | 8 | magic `YPIRHNT1` (the last byte is the format version) |
    /// | 2 | parameter-set id (u16) |
    /// | 32 | public seed |
    /// | 8 | ℓ1 (u64) |
    /// | 8 | ℓ2 (u64) |
    /// | 4 | K_H = ⌈d1·log q̃1 / log p⌉ (u32, [`Params::hint_rows`]) |
    /// | 2·K_H·ℓ2 | dense hint rows, row-major K_H × ℓ2, i16 each: the signed log p-bit chunks of ⌊A1·D⌉_{q1,q̃1} (App. B) |
    /// | 32 | SHA-256 of all preceding bytes |
    pub fn write_hint<W: std::io::Write>(&self, w: &mut W) -> Result<()> {
        let params = &self.ctx.params;
        let mut sha = Sha256::new();
        let mut buf = Vec::with_capacity(1 << 16);
        buf.extend_from_slice(&HINT_MAGIC);
        buf.extend_from_slice(&params.id.to_le_bytes());
        buf.extend_from_slice(&self.seed.0);
        buf.extend_from_slice(&(self.shape.ell1 as u64).to_le_bytes());
        buf.extend_from_slice(&(self.shape.ell2 as u64).to_le_bytes());
        buf.extend_from_slice(&(params.hint_rows() as u32).to_le_bytes());
        sha.update(&buf);
        w.write_all(&buf)?;
        let mut row = vec![0i16; self.shape.ell2];
        for r in 0..self.hint.rows() {
            self.hint.read_row(r, 0, &mut row);
            buf.clear();
            for &v in &row {
                buf.extend_from_slice(&v.to_le_bytes());
            }
            sha.update(&buf);
            w.write_all(&buf)?;
        }
        w.write_all(&sha.finalize())?;
        w.flush()?;
        Ok(())
    }

    /// Exact length in bytes of the hint file of a `shape` database under
    /// `params` (62 + 2·K_H·ℓ2 + 32), so that callers can cap reads.
    /// Saturates at `usize::MAX` instead of overflowing.
    pub fn hint_file_len(params: &Params, shape: DbShape) -> usize {
        params
            .hint_rows()
            .saturating_mul(shape.ell2)
            .saturating_mul(2)
            .saturating_add(HINT_HEADER + HINT_CHECKSUM)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::test_util::{assert_same_answers, hint_bytes, lcg_db, CELLS, HINT_SHAPE};
    use crate::params::{SMALL, TOY};

    #[test]
    fn hint_file_round_trip_answers_identically() {
        let db = lcg_db(HINT_SHAPE, 9);
        let seed = PublicSeed([4u8; 32]);
        let ctx = Arc::new(Context::new(TOY));
        let fresh = Server::setup_with_context(ctx.clone(), db.clone(), seed).unwrap();
        let file = hint_bytes(&fresh);
        assert_eq!(file.len(), Server::hint_file_len(&TOY, HINT_SHAPE));
        assert_eq!(file.len(), 62 + 2 * TOY.hint_rows() * HINT_SHAPE.ell2 + 32);
        assert_eq!(&file[..8], b"YPIRHNT1");

        let loaded = Server::from_hint(ctx, db.clone(), seed, &file).unwrap();
        assert_eq!(loaded.hint, fresh.hint);
        assert!(loaded.ad.is_empty());
        assert_eq!(loaded.a1_ext, fresh.a1_ext);
        assert_eq!(hint_bytes(&loaded), file);
        let t = loaded.setup_timings();
        assert!(t.hint >= 0.0 && t.h2 > 0.0 && t.packing > 0.0);
        assert_same_answers(&loaded, &fresh, &db, &CELLS);
    }

    #[test]
    fn corrupt_hint_files_are_rejected() {
        let db = lcg_db(HINT_SHAPE, 10);
        let seed = PublicSeed([5u8; 32]);
        let ctx = Arc::new(Context::new(TOY));
        let server = Server::setup_with_context(ctx.clone(), db.clone(), seed).unwrap();
        let good = hint_bytes(&server);
        let n = good.len();
        let load = |f: &[u8]| Server::from_hint(ctx.clone(), db.clone(), seed, f).map(|_| ());
        assert!(load(&good).is_ok());

        // Every header and checksum byte, and a stride through the body,
        // each with a low and a high bit flipped.
        let positions = (0..HINT_HEADER)
            .chain((HINT_HEADER..n - HINT_CHECKSUM).step_by(997))
            .chain([HINT_HEADER + 1, n - HINT_CHECKSUM - 1])
            .chain(n - HINT_CHECKSUM..n);
        for i in positions {
            for bit in [0x01u8, 0x80] {
                let mut f = good.clone();
                f[i] ^= bit;
                let e = load(&f).unwrap_err();
                match i {
                    0..=6 => assert_eq!(e, Error::BadMagic("hint file")),
                    7 => assert!(matches!(e, Error::UnsupportedVersion(_))),
                    8..=9 => assert!(matches!(e, Error::WrongParamSet { .. })),
                    10..=41 => assert!(matches!(e, Error::WrongSeed { .. })),
                    42..=57 => assert!(matches!(e, Error::WrongShape { .. })),
                    58..=61 => assert!(matches!(e, Error::CorruptHint(_))),
                    _ => assert_eq!(e, Error::CorruptHint("checksum mismatch"), "byte {i}"),
                }
            }
        }

        // Truncation and extension.
        for len in [
            0,
            1,
            7,
            8,
            9,
            HINT_HEADER - 1,
            HINT_HEADER,
            n / 2,
            n - 33,
            n - 1,
        ] {
            assert_eq!(
                load(&good[..len]).unwrap_err(),
                Error::Truncated {
                    needed: n,
                    have: len
                },
                "length {len}"
            );
        }
        let mut long = good.clone();
        long.push(0);
        assert_eq!(load(&long).unwrap_err(), Error::TrailingBytes(1));
        long.extend_from_slice(&good);
        assert_eq!(load(&long).unwrap_err(), Error::TrailingBytes(n + 1));

        // Out-of-range chunks under a valid checksum.
        let reseal = |f: &mut Vec<u8>| {
            let body = f.len() - HINT_CHECKSUM;
            let sum = Sha256::digest(&f[..body]);
            f[body..].copy_from_slice(&sum);
        };
        let ell2 = HINT_SHAPE.ell2;
        let kh = TOY.hint_rows();
        let at = |r: usize, j: usize| HINT_HEADER + 2 * (r * ell2 + j);
        for (r, j, v) in [
            (0, 0, 1i16 << 14),
            (3, 7, -(1 << 14) - 1),
            (kh - 2, ell2 - 1, i16::MAX),
            (kh - 1, 5, -1), // the last row holds 64·28 mod 15 = 7 bits
            (kh - 1, 6, 1 << 7),
        ] {
            let mut f = good.clone();
            f[at(r, j)..at(r, j) + 2].copy_from_slice(&v.to_le_bytes());
            reseal(&mut f);
            assert_eq!(
                load(&f).unwrap_err(),
                Error::OutOfRange {
                    field: "hint",
                    index: r * ell2 + j
                }
            );
        }
        // The extremes of the range are accepted (and resealing is sound).
        for (r, j, v) in [
            (0, 0, -(1i16 << 14)),
            (1, 1, (1 << 14) - 1),
            (kh - 1, 2, (1 << 7) - 1),
            (kh - 1, 3, 0),
        ] {
            let mut f = good.clone();
            f[at(r, j)..at(r, j) + 2].copy_from_slice(&v.to_le_bytes());
            reseal(&mut f);
            assert!(load(&f).is_ok());
        }

        // Wrong seed, shape, parameter set, record size.
        let other_seed = PublicSeed([6u8; 32]);
        assert!(matches!(
            Server::from_hint(ctx.clone(), db.clone(), other_seed, &good),
            Err(Error::WrongSeed { .. })
        ));
        let other_shape = DbShape {
            ell1: 150,
            ell2: 299,
        };
        assert!(matches!(
            Server::from_hint(ctx.clone(), lcg_db(other_shape, 1), seed, &good),
            Err(Error::WrongShape { .. })
        ));
        let other_shape = DbShape {
            ell1: 151,
            ell2: 300,
        };
        assert!(matches!(
            Server::from_hint(ctx.clone(), lcg_db(other_shape, 1), seed, &good),
            Err(Error::WrongShape { .. })
        ));
        assert!(matches!(
            Server::from_hint(Arc::new(Context::new(SMALL)), db.clone(), seed, &good),
            Err(Error::WrongParamSet { .. })
        ));
        let bits = Database::zeros(HINT_SHAPE, 1);
        assert!(matches!(
            Server::from_hint(ctx.clone(), bits, seed, &good),
            Err(Error::InvalidParams(_))
        ));
        assert!(matches!(
            load(b"not a hint file at all"),
            Err(Error::BadMagic("hint file"))
        ));
    }
}
