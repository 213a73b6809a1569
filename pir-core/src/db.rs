//! Databases: an ℓ1 × ℓ2 grid of Z_N records of any size (Remark 3.3), and
//! the bit database of §4 "Parameter selection" on top of it.
//!
//! Records are stored packed, one byte each. When ℓ1 is a multiple of 32 and
//! ℓ2 ≥ 16 the first ⌊ℓ2/16⌋·16 columns are **tiled**: columns are taken in
//! groups of 16, rows in panels of P rows (P = [`panel_rows`], at most
//! 2048, a multiple of 32 dividing ℓ1), and each (panel, group) tile of
//! 16·P bytes holds its records as 64-byte *quads* of 4 rows × 16 columns,
//! the 4 rows of a column side by side: record (i, 16g+c) with i = pP + r
//! lives at p·P·ℓ2' + 16g·P + ⌊r/4⌋·64 + 4c + (r mod 4), ℓ2' = ⌊ℓ2/16⌋·16.
//! Tiles are stored panel by panel, group by group inside a panel, so the
//! SimplePIR pass reads the database as one sequential stream while the
//! slice of each query it needs stays in L1 (with P = ℓ1 the query would be
//! re-read from L2 for every few hundred bytes of database, which measurably
//! keeps the pass from the memory bandwidth: `docs/benchmarks.md`). A quad
//! is exactly one `vpdpbusd` operand: each 32-bit lane holds 4 rows of one
//! column, so 4 bytes of a query (its digits of those rows, broadcast) meet
//! all 16 columns in one instruction and every lane accumulates one column;
//! a batch multiplies each quad by every query with no transposition.
//! Columns past the last full group, and every column when ℓ1 mod 32 ≠ 0,
//! are plain column-major (record (i, j) at j·ℓ1 + i). Tiling is a
//! permutation of the column-major bytes and is done in place.
//!
//! For the linear algebra a record v ∈ Z_N is used through its
//! representative in [−N/2, N/2) (the byte reinterpreted as `i8` for
//! N = 2^8), which keeps ‖D‖∞ ≤ N/2 as Theorem 3.4 assumes.

use crate::error::{Error, Result};
use crate::mem;
use crate::params::DbShape;

/// An ℓ1 × ℓ2 matrix of records in Z_N, N = 2^record_bits ≤ 2^8.
#[derive(Clone, PartialEq, Eq)]
pub struct Database {
    shape: DbShape,
    record_bits: u32,
    data: Vec<u8>,
    /// Where each record lives (tiled or column-major; see module docs).
    map: OffsetMap,
}

/// Columns per tile group.
pub const GROUP_COLS: usize = 16;
/// Rows per quad: one 64-byte vector of a tile holds 4 rows × 16 columns.
pub const QUAD_ROWS: usize = 4;
/// Panel heights are multiples of this many rows.
pub const BLOCK_ROWS: usize = 32;

/// Most rows per panel (see the module docs): a 2048-row tile is 32 KiB and
/// its slice of the query bytes 8 KiB, so the slice stays in L1 while the
/// tile streams past; a panel's partial sums are added once per tile.
/// (With 8-column tiles, 4096 rows slowed the single-query pass by a
/// third.) Batches take a tile 512 rows at a time
/// (`kernel::simplepir::SLICE_ROWS`).
pub const MAX_PANEL_ROWS: usize = 2048;

/// Whether a shape is stored tiled.
pub fn is_tiled(shape: DbShape) -> bool {
    shape.ell1.is_multiple_of(BLOCK_ROWS) && shape.ell2 >= GROUP_COLS
}

/// Rows per panel P of a tiled shape: the largest multiple of 32 that
/// divides ℓ1 and is at most [`MAX_PANEL_ROWS`] (ℓ1 itself when ℓ1 is not a
/// multiple of 32, where nothing is tiled).
pub fn panel_rows(shape: DbShape) -> usize {
    let ell1 = shape.ell1;
    if !ell1.is_multiple_of(BLOCK_ROWS) || ell1 == 0 {
        return ell1;
    }
    let blocks = ell1 / BLOCK_ROWS;
    let most = MAX_PANEL_ROWS / BLOCK_ROWS;
    let d = (1..=most.min(blocks))
        .rev()
        .find(|d| blocks.is_multiple_of(*d))
        .unwrap_or(1);
    d * BLOCK_ROWS
}

/// Storage offset of record (row, col).
#[inline]
pub fn offset(shape: DbShape, tiled: bool, row: usize, col: usize) -> usize {
    OffsetMap::new(shape, tiled).at(row, col)
}

/// [`offset`] with its per-shape constants computed once (the panel height
/// search and, for power-of-two panels, the divisions): `Server::update`
/// locates a million random records per 0.1 % of a 1 GiB database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct OffsetMap {
    ell1: usize,
    /// Columns in whole 16-column groups (the tiled part).
    full: usize,
    panel: usize,
    /// log2 of `panel` when it is a power of two.
    panel_shift: Option<u32>,
    tiled: bool,
}

impl OffsetMap {
    fn new(shape: DbShape, tiled: bool) -> Self {
        let panel = panel_rows(shape);
        OffsetMap {
            ell1: shape.ell1,
            full: shape.ell2 / GROUP_COLS * GROUP_COLS,
            panel,
            panel_shift: panel.is_power_of_two().then(|| panel.trailing_zeros()),
            tiled,
        }
    }

    #[inline]
    fn at(&self, row: usize, col: usize) -> usize {
        if self.tiled && col < self.full {
            let (p, r) = match self.panel_shift {
                Some(sh) => (row >> sh, row & (self.panel - 1)),
                None => (row / self.panel, row % self.panel),
            };
            let (g, c) = (col / GROUP_COLS, col % GROUP_COLS);
            p * self.panel * self.full
                + g * GROUP_COLS * self.panel
                + r / QUAD_ROWS * (QUAD_ROWS * GROUP_COLS)
                + c * QUAD_ROWS
                + r % QUAD_ROWS
        } else {
            col * self.ell1 + row
        }
    }
}

/// Rearranges column-major bytes into the tiled layout, in place: first each
/// group of 16 columns is interleaved in 4-row quads (temporary buffer of
/// 16·ℓ1 bytes), which leaves tile (p, g) at group-major position g·n_p + p;
/// then the n_g × n_p matrix of 8·P-byte tiles is transposed to panel-major
/// order by following the permutation's cycles (one tile of temporary
/// space and one bit per tile).
fn tile_in_place(shape: DbShape, data: &mut [u8]) {
    let ell1 = shape.ell1;
    let gbytes = GROUP_COLS * ell1;
    let groups = shape.ell2 / GROUP_COLS;
    let mut tmp = vec![0u8; gbytes];
    for group in data[..groups * gbytes].chunks_mut(gbytes) {
        tmp.copy_from_slice(group);
        for c in 0..GROUP_COLS {
            let col = &tmp[c * ell1..(c + 1) * ell1];
            for (t, four) in col.chunks_exact(QUAD_ROWS).enumerate() {
                let dst = t * QUAD_ROWS * GROUP_COLS + c * QUAD_ROWS;
                group[dst..dst + QUAD_ROWS].copy_from_slice(four);
            }
        }
    }
    let panels = ell1 / panel_rows(shape);
    let tile = gbytes / panels.max(1);
    transpose_tiles(&mut data[..groups * gbytes], groups, panels, tile);
}

/// In-place transpose of a rows × cols row-major matrix whose elements are
/// `tile`-byte blocks: the element at k = r·cols + c moves to c·rows + r.
fn transpose_tiles(data: &mut [u8], rows: usize, cols: usize, tile: usize) {
    let n = rows * cols;
    if rows <= 1 || cols <= 1 {
        return;
    }
    debug_assert_eq!(data.len(), n * tile);
    let dest = |k: usize| (k % cols) * rows + k / cols;
    let mut done = vec![false; n];
    let mut held = vec![0u8; tile];
    let mut swap = vec![0u8; tile];
    for start in 0..n {
        if done[start] {
            continue;
        }
        done[start] = true;
        let mut k = dest(start);
        if k == start {
            continue;
        }
        held.copy_from_slice(&data[start * tile..(start + 1) * tile]);
        while !done[k] {
            // place the held tile at k, pick up the one that was there
            let slot = &mut data[k * tile..(k + 1) * tile];
            swap.copy_from_slice(slot);
            slot.copy_from_slice(&held);
            std::mem::swap(&mut held, &mut swap);
            done[k] = true;
            k = dest(k);
        }
        // the cycle closes at `start`
        data[start * tile..(start + 1) * tile].copy_from_slice(&held);
    }
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
            data: mem::zeroed_huge::<u8>(shape.records()),
            map: OffsetMap::new(shape, is_tiled(shape)),
        }
    }

    /// Wraps column-major record bytes; every record must be below N.
    pub fn from_column_major(shape: DbShape, record_bits: u32, mut data: Vec<u8>) -> Result<Self> {
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
        let tiled = is_tiled(shape);
        if tiled {
            tile_in_place(shape, &mut data);
        }
        // Every answer streams the whole buffer: back it with huge pages
        // (free if it came from `mem::zeroed_huge`).
        mem::collapse_huge_pages(&mut data);
        Ok(Database {
            shape,
            record_bits,
            data,
            map: OffsetMap::new(shape, tiled),
        })
    }

    /// Builds a database from a function of (row, column).
    pub fn from_fn(
        shape: DbShape,
        record_bits: u32,
        mut f: impl FnMut(usize, usize) -> u8,
    ) -> Result<Self> {
        let mut data = mem::zeroed_huge::<u8>(shape.records());
        for (j, col) in data.chunks_exact_mut(shape.ell1.max(1)).enumerate() {
            for (i, d) in col.iter_mut().enumerate() {
                *d = f(i, j);
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
        Ok(self.data[self.map.at(row, col)])
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
        let off = self.map.at(row, col);
        self.data[off] = value;
        Ok(())
    }

    /// Overwrites record (row, col) and returns the value it held (one
    /// offset computation: the update path of `Server::update`).
    pub fn replace(&mut self, row: usize, col: usize, value: u8) -> Result<u8> {
        self.check(row, col)?;
        if self.record_bits < 8 && value as u32 >= 1 << self.record_bits {
            return Err(Error::RecordOutOfRange {
                index: col * self.shape.ell1 + row,
                value,
                modulus: 1 << self.record_bits,
            });
        }
        let off = self.map.at(row, col);
        Ok(std::mem::replace(&mut self.data[off], value))
    }

    /// The records as disjoint mutable views of `block_cols` columns each
    /// (the last narrower), so that blocks of columns can be rewritten in
    /// parallel (`Server::update`). A block of the tiled part is one run of
    /// bytes per panel; columns stored column-major are one run.
    ///
    /// # Panics
    /// If `block_cols` is not a positive multiple of [`GROUP_COLS`] (a
    /// caller bug: a tile group would straddle two blocks).
    pub fn column_blocks_mut(&mut self, block_cols: usize) -> Vec<ColumnsMut<'_>> {
        assert!(
            block_cols > 0 && block_cols.is_multiple_of(GROUP_COLS),
            "column block width"
        );
        let DbShape { ell1, ell2 } = self.shape;
        let map = self.map;
        // columns stored tiled: 0..tiled_cols
        let tiled_cols = if map.tiled && ell1 > 0 { map.full } else { 0 };
        let (tiled, plain) = self.data.split_at_mut(tiled_cols * ell1);
        let mut blocks: Vec<ColumnsMut<'_>> = (0..ell2.div_ceil(block_cols))
            .map(|k| {
                let c0 = k * block_cols;
                ColumnsMut {
                    c0,
                    cols: block_cols.min(ell2 - c0),
                    map,
                    tiled_cols,
                    record_bits: self.record_bits,
                    panels: Vec::new(),
                    plain: &mut [],
                    plain_c0: c0.max(tiled_cols),
                }
            })
            .collect();
        if tiled_cols > 0 {
            for panel in tiled.chunks_mut(map.panel * tiled_cols) {
                let mut rest = panel;
                for blk in blocks.iter_mut().take_while(|b| b.c0 < tiled_cols) {
                    let width = (blk.c0 + blk.cols).min(tiled_cols) - blk.c0;
                    let (run, tail) = std::mem::take(&mut rest).split_at_mut(width * map.panel);
                    blk.panels.push(run);
                    rest = tail;
                }
            }
        }
        let mut rest = plain;
        for blk in blocks.iter_mut() {
            let width = (blk.c0 + blk.cols).saturating_sub(blk.plain_c0);
            let (run, tail) = std::mem::take(&mut rest).split_at_mut(width * ell1);
            blk.plain = run;
            rest = tail;
        }
        blocks
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

    /// Copies column `col` (ℓ1 records, top to bottom) into `out`.
    pub fn column_into(&self, col: usize, out: &mut [u8]) {
        let ell1 = self.shape.ell1;
        if self.map.tiled && col < self.map.full {
            for (t, four) in out[..ell1].chunks_exact_mut(QUAD_ROWS).enumerate() {
                let src = self.map.at(t * QUAD_ROWS, col);
                four.copy_from_slice(&self.data[src..src + QUAD_ROWS]);
            }
        } else {
            out[..ell1].copy_from_slice(&self.data[col * ell1..(col + 1) * ell1]);
        }
    }

    /// Storage offset of record (row, col) in [`Database::as_bytes`].
    pub fn record_offset(&self, row: usize, col: usize) -> usize {
        self.map.at(row, col)
    }

    /// The storage bytes (layout described in the module docs).
    pub fn as_bytes(&self) -> &[u8] {
        &self.data
    }

    /// Whether the storage is tiled (see module docs).
    pub fn is_tiled(&self) -> bool {
        self.map.tiled
    }
}

/// Columns c0..c0 + cols of a [`Database`], writable on their own
/// ([`Database::column_blocks_mut`]).
pub struct ColumnsMut<'a> {
    /// First column of the block.
    pub c0: usize,
    /// Columns in the block.
    pub cols: usize,
    map: OffsetMap,
    /// Columns stored tiled (0 when nothing is).
    tiled_cols: usize,
    record_bits: u32,
    /// Per panel p: the block's tiled columns, from storage offset
    /// p·P·tiled_cols + c0·P on.
    panels: Vec<&'a mut [u8]>,
    /// The block's column-major columns plain_c0.., from storage offset
    /// plain_c0·ℓ1 on.
    plain: &'a mut [u8],
    plain_c0: usize,
}

impl ColumnsMut<'_> {
    /// Locates record (row, col) of this block — (panel, or `None` for the
    /// column-major run; index in that run) — or gives the error
    /// [`Database::replace`] gives for it.
    #[inline]
    fn locate(&self, row: usize, col: usize, value: u8) -> Result<(Option<usize>, usize)> {
        if row >= self.map.ell1 || col < self.c0 || col >= self.c0 + self.cols {
            return Err(Error::IndexOutOfRange {
                index: (col * self.map.ell1 + row) as u64,
                len: (self.map.ell1 * (self.c0 + self.cols)) as u64,
            });
        }
        if self.record_bits < 8 && value as u32 >= 1 << self.record_bits {
            return Err(Error::RecordOutOfRange {
                index: col * self.map.ell1 + row,
                value,
                modulus: 1 << self.record_bits,
            });
        }
        Ok(if col < self.tiled_cols {
            let p = match self.map.panel_shift {
                Some(sh) => row >> sh,
                None => row / self.map.panel,
            };
            let base = (p * self.tiled_cols + self.c0) * self.map.panel;
            (Some(p), self.map.at(row, col) - base)
        } else {
            (None, (col - self.plain_c0) * self.map.ell1 + row)
        })
    }

    /// [`Database::replace`] for a record of this block.
    #[inline]
    pub fn replace(&mut self, row: usize, col: usize, value: u8) -> Result<u8> {
        let (panel, i) = self.locate(row, col, value)?;
        let run = match panel {
            Some(p) => &mut *self.panels[p],
            None => &mut *self.plain,
        };
        Ok(std::mem::replace(&mut run[i], value))
    }

    /// Prefetch hint for record (row, col) of this block (no effect for
    /// a record outside it).
    #[inline]
    pub fn prefetch(&self, row: usize, col: usize) {
        match self.locate(row, col, 0) {
            Ok((Some(p), i)) => mem::prefetch(self.panels[p], i),
            Ok((None, i)) => mem::prefetch(self.plain, i),
            Err(_) => {}
        }
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
/// ℓ1 = 2^⌈log ℓ'/2⌉, ℓ2 = ⌈ℓ'/ℓ1⌉ ([`DbShape::for_bits`], N = 2^8).
///
/// Bit b lives in byte b/8 at bit position b mod 8 (LSB first); byte k is
/// record (k mod ℓ1, k div ℓ1), i.e. the bitmap bytes read column-major.
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
        let bytes = Self::check_bitmap(bits, bitmap)?;
        let shape = DbShape::for_bits(bits, Self::RECORD_BITS);
        let mut data = mem::zeroed_huge::<u8>(shape.records());
        data[..bytes].copy_from_slice(bitmap);
        Ok(BitDatabase {
            bits,
            db: Database::from_column_major(shape, Self::RECORD_BITS, data)?,
        })
    }

    /// Like [`BitDatabase::from_bitmap`] but takes ownership of the bytes,
    /// so building a large database needs no second copy.
    pub fn from_bitmap_owned(bits: u64, mut bitmap: Vec<u8>) -> Result<Self> {
        Self::check_bitmap(bits, &bitmap)?;
        let shape = DbShape::for_bits(bits, Self::RECORD_BITS);
        bitmap.resize(shape.records(), 0);
        Ok(BitDatabase {
            bits,
            db: Database::from_column_major(shape, Self::RECORD_BITS, bitmap)?,
        })
    }

    /// The byte length of a bitmap of `bits` bits, after checking that
    /// `bitmap` has exactly that many bytes and no bit set past the end.
    fn check_bitmap(bits: u64, bitmap: &[u8]) -> Result<usize> {
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
        Ok(bytes)
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
    fn tiled_layout_is_a_permutation_of_column_major() {
        for (ell1, ell2) in [
            (32usize, 8usize),
            (64, 19),
            (96, 7),
            (33, 16),
            (128, 24),
            (2048, 16),
            (1056, 27),
            (3072, 8),
            (3072, 33),
            (96, 16),
        ] {
            let shape = DbShape { ell1, ell2 };
            let cm: Vec<u8> = (0..ell1 * ell2).map(|k| (k * 7 + k / 13) as u8).collect();
            let db = Database::from_column_major(shape, 8, cm.clone()).unwrap();
            assert_eq!(db.is_tiled(), ell1 % 32 == 0 && ell2 >= 16);
            let mut col = vec![0u8; ell1];
            for j in 0..ell2 {
                db.column_into(j, &mut col);
                assert_eq!(&col[..], &cm[j * ell1..(j + 1) * ell1]);
                for i in 0..ell1 {
                    assert_eq!(db.get(i, j).unwrap(), cm[j * ell1 + i]);
                }
            }
            let mut sorted = db.as_bytes().to_vec();
            let mut want = cm.clone();
            sorted.sort();
            want.sort();
            assert_eq!(sorted, want);
        }
    }

    #[test]
    fn column_blocks_replace_like_the_whole_database() {
        // tiled with column-major tail columns, several panels, a panel
        // height that is not a power of two, nothing tiled, 4-bit records
        for (ell1, ell2, block, bits) in [
            (64usize, 19usize, 16usize, 8u32),
            (8192, 40, 16, 8),
            (3072, 37, 16, 8),
            (33, 16, 16, 8),
            (96, 7, 16, 4),
            (64, 40, 64, 8),
            (64, 70, 32, 8),
        ] {
            let shape = DbShape { ell1, ell2 };
            let n = 1usize << bits;
            let cm: Vec<u8> = (0..ell1 * ell2)
                .map(|k| ((k * 7 + k / 13) % n) as u8)
                .collect();
            let mut whole = Database::from_column_major(shape, bits, cm.clone()).unwrap();
            let mut blocked = whole.clone();
            let mut blocks = blocked.column_blocks_mut(block);
            assert_eq!(blocks.len(), ell2.div_ceil(block));
            for blk in blocks.iter_mut() {
                for j in blk.c0..blk.c0 + blk.cols {
                    for i in 0..ell1 {
                        let v = ((i * 5 + j * 3) % n) as u8;
                        blk.prefetch(i, j);
                        assert_eq!(blk.replace(i, j, v), whole.replace(i, j, v), "{i} {j}");
                    }
                }
                // records outside the block, and values ≥ N, are refused
                assert!(blk.replace(0, blk.c0 + blk.cols, 0).is_err());
                assert!(blk.replace(ell1, blk.c0, 0).is_err());
                if blk.c0 > 0 {
                    assert!(blk.replace(0, blk.c0 - 1, 0).is_err());
                }
                if bits < 8 {
                    assert!(blk.replace(0, blk.c0, n as u8).is_err());
                }
            }
            drop(blocks);
            assert!(whole == blocked);
        }
    }

    #[test]
    fn panels_divide_the_rows() {
        for (ell1, want) in [
            (32, 32),
            (96, 96),
            (512, 512),
            (2048, 2048),
            (8192, 2048),
            (1056, 1056),
            (3072, 1536),
            (33, 33),
        ] {
            assert_eq!(panel_rows(DbShape { ell1, ell2: 8 }), want, "{ell1}");
        }
        // tile (p, g) of a multi-panel shape is contiguous and panel-major
        let shape = DbShape {
            ell1: 8192,
            ell2: 32,
        };
        assert_eq!(offset(shape, true, 0, 16), 16 * 2048);
        assert_eq!(offset(shape, true, 2048, 0), 32 * 2048);
        // row 33 of panel 1 is row 1 of quad 8; column 25 is column 9 of
        // group 1
        assert_eq!(
            offset(shape, true, 2048 + 33, 25),
            32 * 2048 + 16 * 2048 + 8 * 64 + 9 * 4 + 1
        );
    }

    #[test]
    fn tile_transpose_matches_naive() {
        for (rows, cols, tile) in [
            (1usize, 5usize, 3usize),
            (4, 1, 2),
            (2, 3, 1),
            (5, 7, 4),
            (6, 4, 3),
        ] {
            let data: Vec<u8> = (0..rows * cols * tile).map(|k| k as u8).collect();
            let mut t = data.clone();
            transpose_tiles(&mut t, rows, cols, tile);
            for r in 0..rows {
                for c in 0..cols {
                    let src = &data[(r * cols + c) * tile..][..tile];
                    let dst = &t[(c * rows + r) * tile..][..tile];
                    assert_eq!(src, dst, "{rows}x{cols} ({r},{c})");
                }
            }
        }
    }

    #[test]
    fn records_are_range_checked() {
        let shape = DbShape { ell1: 2, ell2: 2 };
        assert!(Database::from_column_major(shape, 4, vec![0, 15, 16, 1]).is_err());
        assert!(Database::from_column_major(shape, 4, vec![0, 15, 3, 1]).is_ok());
        assert!(Database::from_column_major(shape, 8, vec![0; 3]).is_err());
        assert!(BitDatabase::from_bitmap(12, &[0xff, 0x10]).is_err());
        assert!(BitDatabase::from_bitmap(12, &[0xff, 0x0f]).is_ok());
        // both constructors: a bit past the end, a byte too many or too few
        for (bitmap, ok) in [
            (vec![0xff, 0x10], false),
            (vec![0xff, 0x0f, 0], false),
            (vec![0xff], false),
            (vec![0xff, 0x0f], true),
        ] {
            assert_eq!(BitDatabase::from_bitmap(12, &bitmap).is_ok(), ok);
            let owned = BitDatabase::from_bitmap_owned(12, bitmap);
            assert_eq!(owned.is_ok(), ok);
        }
        let a = BitDatabase::from_bitmap(12, &[0xa5, 0x0c]).unwrap();
        let b = BitDatabase::from_bitmap_owned(12, vec![0xa5, 0x0c]).unwrap();
        assert!((0..12).all(|i| a.get(i).unwrap() == b.get(i).unwrap()));
    }
}
