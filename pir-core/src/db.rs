//! Databases: an ℓ1 × ℓ2 grid of Z_N records of any size (Remark 3.3), and
//! the bit database of §4 "Parameter selection" on top of it.
//!
//! Records are stored packed, one byte each, **column-major**: record
//! (row i, column j) lives at `data[j·ℓ1 + i]`. Both server passes read whole
//! columns: the SimplePIR pass computes c1ᵀ·D column by column and the hint
//! A1·D (App. B) transforms column segments of d1 records, so this layout
//! streams the database exactly once per pass.
//!
//! For the linear algebra a record v ∈ Z_N is used through its
//! representative in [−N/2, N/2) (the byte reinterpreted as `i8` for
//! N = 2^8), which keeps ‖D‖∞ ≤ N/2 as Theorem 3.4 assumes.

use crate::error::{Error, Result};
use crate::params::DbShape;

/// An ℓ1 × ℓ2 matrix of records in Z_N, N = 2^record_bits ≤ 2^8.
#[derive(Clone, PartialEq, Eq)]
pub struct Database {
    shape: DbShape,
    record_bits: u32,
    data: Vec<u8>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Database({}x{}, N=2^{})",
            self.shape.ell1, self.shape.ell2, self.record_bits
        )
    }
}

impl Database {
    /// An all-zero database.
    pub fn zeros(shape: DbShape, record_bits: u32) -> Self {
        Database {
            shape,
            record_bits,
            data: vec![0u8; shape.records()],
        }
    }

    /// Wraps column-major record bytes; every record must be below N.
    pub fn from_column_major(shape: DbShape, record_bits: u32, data: Vec<u8>) -> Result<Self> {
        if data.len() != shape.records() {
            return Err(Error::LengthMismatch {
                expected: shape.records(),
                got: data.len(),
            });
        }
        if record_bits < 8 {
            let n = 1u32 << record_bits;
            if let Some((index, &value)) = data.iter().enumerate().find(|(_, &v)| v as u32 >= n) {
                return Err(Error::RecordOutOfRange {
                    index,
                    value,
                    modulus: n,
                });
            }
        }
        Ok(Database {
            shape,
            record_bits,
            data,
        })
    }

    /// Builds a database from a function of (row, column).
    pub fn from_fn(
        shape: DbShape,
        record_bits: u32,
        mut f: impl FnMut(usize, usize) -> u8,
    ) -> Result<Self> {
        let mut data = Vec::with_capacity(shape.records());
        for j in 0..shape.ell2 {
            for i in 0..shape.ell1 {
                data.push(f(i, j));
            }
        }
        Self::from_column_major(shape, record_bits, data)
    }

    /// The shape.
    pub fn shape(&self) -> DbShape {
        self.shape
    }

    /// log2 N.
    pub fn record_bits(&self) -> u32 {
        self.record_bits
    }

    /// Record (row, col).
    pub fn get(&self, row: usize, col: usize) -> Result<u8> {
        self.check(row, col)?;
        Ok(self.data[col * self.shape.ell1 + row])
    }

    /// Overwrites record (row, col).
    pub fn set(&mut self, row: usize, col: usize, value: u8) -> Result<()> {
        self.check(row, col)?;
        if self.record_bits < 8 && value as u32 >= 1 << self.record_bits {
            return Err(Error::RecordOutOfRange {
                index: col * self.shape.ell1 + row,
                value,
                modulus: 1 << self.record_bits,
            });
        }
        self.data[col * self.shape.ell1 + row] = value;
        Ok(())
    }

    fn check(&self, row: usize, col: usize) -> Result<()> {
        if row >= self.shape.ell1 || col >= self.shape.ell2 {
            return Err(Error::IndexOutOfRange {
                index: (col * self.shape.ell1 + row) as u64,
                len: self.shape.records() as u64,
            });
        }
        Ok(())
    }

    /// Column `col` (ℓ1 bytes).
    pub fn column(&self, col: usize) -> &[u8] {
        &self.data[col * self.shape.ell1..(col + 1) * self.shape.ell1]
    }

    /// All records, column-major.
    pub fn as_bytes(&self) -> &[u8] {
        &self.data
    }
}

/// Where one bit of a [`BitDatabase`] lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BitLocation {
    /// Record row i1.
    pub row: usize,
    /// Record column i2.
    pub col: usize,
    /// Bit within the one-byte record (0 = least significant).
    pub bit: u32,
}

/// A bitmap of ℓ bits stored as ℓ' = ⌈ℓ/8⌉ one-byte records on the §4 shape
/// ℓ1 = 2^⌈log ℓ'/2⌉, ℓ2 = 2^⌊log ℓ'/2⌋ (N = 2^8).
///
/// Bit b lives in byte b/8 at bit position b mod 8 (LSB first); byte k is
/// record (k mod ℓ1, k div ℓ1). With the column-major layout the record bytes
/// are exactly the bitmap bytes, zero-padded to ℓ1·ℓ2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BitDatabase {
    bits: u64,
    db: Database,
}

impl BitDatabase {
    /// Record size: one byte.
    pub const RECORD_BITS: u32 = 8;

    /// An all-zero bitmap of `bits` bits.
    pub fn zeros(bits: u64) -> Self {
        let shape = DbShape::for_bits(bits, Self::RECORD_BITS);
        BitDatabase {
            bits,
            db: Database::zeros(shape, Self::RECORD_BITS),
        }
    }

    /// Wraps an LSB-first bitmap of `bits` bits (⌈bits/8⌉ bytes; bits past
    /// the end must be zero).
    pub fn from_bitmap(bits: u64, bitmap: &[u8]) -> Result<Self> {
        let bytes = bits.div_ceil(8) as usize;
        if bitmap.len() != bytes {
            return Err(Error::LengthMismatch {
                expected: bytes,
                got: bitmap.len(),
            });
        }
        if !bits.is_multiple_of(8) && bitmap[bytes - 1] >> (bits % 8) != 0 {
            return Err(Error::IndexOutOfRange {
                index: bits,
                len: bits,
            });
        }
        let shape = DbShape::for_bits(bits, Self::RECORD_BITS);
        let mut data = Vec::with_capacity(shape.records());
        data.extend_from_slice(bitmap);
        data.resize(shape.records(), 0);
        Ok(BitDatabase {
            bits,
            db: Database::from_column_major(shape, Self::RECORD_BITS, data)?,
        })
    }

    /// Like [`BitDatabase::from_bitmap`] but takes ownership of the bytes,
    /// so building a large database needs no second copy.
    pub fn from_bitmap_owned(bits: u64, mut bitmap: Vec<u8>) -> Result<Self> {
        let bytes = bits.div_ceil(8) as usize;
        if bitmap.len() != bytes {
            return Err(Error::LengthMismatch {
                expected: bytes,
                got: bitmap.len(),
            });
        }
        if !bits.is_multiple_of(8) && bitmap[bytes - 1] >> (bits % 8) != 0 {
            return Err(Error::IndexOutOfRange {
                index: bits,
                len: bits,
            });
        }
        let shape = DbShape::for_bits(bits, Self::RECORD_BITS);
        bitmap.resize(shape.records(), 0);
        Ok(BitDatabase {
            bits,
            db: Database::from_column_major(shape, Self::RECORD_BITS, bitmap)?,
        })
    }

    /// Number of bits ℓ.
    pub fn len_bits(&self) -> u64 {
        self.bits
    }

    /// Maps a bit index to its record and bit position.
    pub fn locate(&self, bit: u64) -> Result<BitLocation> {
        locate_bit(self.db.shape(), self.bits, bit)
    }

    /// Reads bit `bit`.
    pub fn get(&self, bit: u64) -> Result<bool> {
        let l = self.locate(bit)?;
        Ok(self.db.get(l.row, l.col)? >> l.bit & 1 == 1)
    }

    /// Writes bit `bit`; returns the location of the changed record.
    pub fn set(&mut self, bit: u64, value: bool) -> Result<BitLocation> {
        let l = self.locate(bit)?;
        let old = self.db.get(l.row, l.col)?;
        let new = if value {
            old | 1 << l.bit
        } else {
            old & !(1 << l.bit)
        };
        self.db.set(l.row, l.col, new)?;
        Ok(l)
    }

    /// The underlying record database.
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// Consumes into the record database.
    pub fn into_database(self) -> Database {
        self.db
    }
}

/// Bit → (row, column, bit) for a bit database of `bits` bits on `shape`;
/// usable by a client that only knows the shape and the bit count.
pub fn locate_bit(shape: DbShape, bits: u64, bit: u64) -> Result<BitLocation> {
    if bit >= bits {
        return Err(Error::IndexOutOfRange {
            index: bit,
            len: bits,
        });
    }
    let byte = (bit / 8) as usize;
    Ok(BitLocation {
        row: byte % shape.ell1,
        col: byte / shape.ell1,
        bit: (bit % 8) as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_mapping_round_trip() {
        let mut b = BitDatabase::zeros(1000);
        assert_eq!(b.database().shape(), DbShape { ell1: 16, ell2: 8 });
        for bit in [0u64, 7, 8, 127, 128, 999] {
            b.set(bit, true).unwrap();
            assert!(b.get(bit).unwrap());
            let l = b.locate(bit).unwrap();
            assert_eq!(b.database().get(l.row, l.col).unwrap() >> l.bit & 1, 1);
        }
        assert!(!b.get(1).unwrap());
        assert!(b.get(1000).is_err());
        let l = b.locate(8 * 17 + 3).unwrap();
        assert_eq!((l.row, l.col, l.bit), (1, 1, 3));
    }

    #[test]
    fn records_are_range_checked() {
        let shape = DbShape { ell1: 2, ell2: 2 };
        assert!(Database::from_column_major(shape, 4, vec![0, 15, 16, 1]).is_err());
        assert!(Database::from_column_major(shape, 4, vec![0, 15, 3, 1]).is_ok());
        assert!(Database::from_column_major(shape, 8, vec![0; 3]).is_err());
        assert!(BitDatabase::from_bitmap(12, &[0xff, 0x10]).is_err());
        assert!(BitDatabase::from_bitmap(12, &[0xff, 0x0f]).is_ok());
    }
}
