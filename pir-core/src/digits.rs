//! Storage layout of the matrices the DoublePIR pass reads: the hint rows
//! H (K_H × ℓ2 signed digits, [`crate::server`]) and each query's T rows
//! (κ × ℓ2), YPIR Construction 3.1, Answer step 2.
//!
//! The pass computes, for every row r, `Σ_j x[r][j]·c2[j]` over both CRT
//! primes. Stored row-major, it would read several row streams at once
//! beside a block of c2 re-read for every row, which no prefetching makes
//! stream; one sequential stream with the c2 block in L1 runs near the
//! read loop's speed. So the digits are stored in the order the pass
//! reads them:
//!
//! * columns in blocks of [`BLOCK_COLS`] (the last block narrower), so the
//!   c2 of a block (its 5 × 1024 limbs, 10 KiB) stays in L1 (twice as
//!   wide would crowd L1; half as wide pays the per-quad reductions twice
//!   as often);
//! * inside a block, rows in quads (4 rows; the row count is padded to a
//!   multiple of 4 with zero rows);
//! * inside a quad, 32-column chunks, each holding the 32 digits of row
//!   4q, then of 4q + 1, 4q + 2, 4q + 3 (128 digits, 256 bytes).
//!
//! ℓ2 is padded to a multiple of 32 with zero columns. Block b starts at
//! b·BLOCK_COLS·R4 (R4 = padded rows) and is one contiguous stream of
//! R4/4 quads, so the whole pass reads the buffer once, front to back.
//! Zero padding contributes nothing to any sum.

/// Columns per block (see the module docs).
pub const BLOCK_COLS: usize = 1024;
/// Columns per chunk: one 64-byte vector of i16 digits.
pub const CHUNK_COLS: usize = 32;
/// Rows per quad.
pub const QUAD_ROWS: usize = 4;

/// A rows × cols matrix of i16 digits in the DoublePIR layout.
#[derive(Clone, PartialEq, Eq)]
pub struct DigitMatrix {
    rows: usize,
    cols: usize,
    data: Vec<i16>,
}

/// Columns c0..c0 + cols of a [`DigitMatrix`] (one storage block of
/// [`BLOCK_COLS`] columns), writable on its own.
pub struct ColumnBlockMut<'a> {
    /// First column of the block.
    pub c0: usize,
    /// Columns of the matrix in the block.
    pub cols: usize,
    /// Padded width of the block's storage.
    w: usize,
    rows: usize,
    data: &'a mut [i16],
}

/// Where the hint's chunk packer (`kernel::pack_columns`) puts chunk k of
/// its columns in `out`: at `(k / 4)·quad + (k mod 4)·row`. A row-major buffer of stride s is
/// [`RowStride::plain`]`(s)` (quad = 4s); the hint's own storage
/// (this module's layout: rows in quads of 4, one 32-column chunk of each
/// row after the other) is row = 32, quad = 4 × the block width, so the
/// packer can write into it directly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowStride {
    /// Between rows 4q + i and 4q + i + 1.
    pub row: usize,
    /// Between rows 4q and 4q + 4.
    pub quad: usize,
}

impl RowStride {
    /// Row k at k·stride.
    pub fn plain(stride: usize) -> Self {
        RowStride {
            row: stride,
            quad: 4 * stride,
        }
    }

    /// Index of row k's first entry.
    #[inline]
    pub fn at(self, k: usize) -> usize {
        (k >> 2) * self.quad + (k & 3) * self.row
    }
}

impl ColumnBlockMut<'_> {
    /// Index in the block of (r, j), j a column of the block.
    #[inline]
    fn offset(&self, r: usize, j: usize) -> usize {
        let jj = j - self.c0;
        jj / CHUNK_COLS * QUAD_ROWS * CHUNK_COLS
            + jj % CHUNK_COLS
            + DigitMatrix::row_step(r, self.w)
    }

    /// The storage from entry (0, j) on, and where each row of column j
    /// lies in it ([`RowStride`]): entry (r, j + c) is at
    /// `stride.at(r) + c` for c < 32 − j mod 32 (the rest of j's 32-column
    /// chunk), so the chunk packer (`kernel::pack_columns`) can write them in place.
    ///
    /// # Panics
    /// If j is not a column of this block.
    pub fn column_run(&mut self, j: usize) -> (&mut [i16], RowStride) {
        assert!(
            j >= self.c0 && j < self.c0 + self.cols,
            "column of the block"
        );
        let o = self.offset(0, j);
        let stride = RowStride {
            row: CHUNK_COLS,
            quad: QUAD_ROWS * self.w,
        };
        (&mut self.data[o..], stride)
    }

    /// Sets entry (r, j), j a column of this block.
    ///
    /// # Panics
    /// If r or j is out of range.
    pub fn set(&mut self, r: usize, j: usize, v: i16) {
        assert!(
            r < self.rows && j >= self.c0 && j < self.c0 + self.cols,
            "digit index"
        );
        let o = self.offset(r, j);
        self.data[o] = v;
    }
}

impl std::fmt::Debug for DigitMatrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DigitMatrix({}x{})", self.rows, self.cols)
    }
}

impl DigitMatrix {
    /// An all-zero matrix. Large buffers are advised for transparent huge
    /// pages before first touch (they are streamed once per answer).
    pub fn zeros(rows: usize, cols: usize) -> Self {
        let len = Self::padded_rows(rows) * Self::padded_cols(cols);
        DigitMatrix {
            rows,
            cols,
            data: crate::mem::zeroed_huge::<i16>(len),
        }
    }

    /// The matrix of `row_major` (rows × cols entries, row after row).
    pub fn from_row_major(rows: usize, cols: usize, row_major: &[i16]) -> Self {
        assert_eq!(row_major.len(), rows * cols, "row-major length");
        let mut m = Self::zeros(rows, cols);
        for r in 0..rows {
            m.write_row(r, 0, &row_major[r * cols..(r + 1) * cols]);
        }
        m
    }

    /// Rows padded to a multiple of [`QUAD_ROWS`].
    pub fn padded_rows(rows: usize) -> usize {
        rows.div_ceil(QUAD_ROWS) * QUAD_ROWS
    }

    /// Columns padded to a multiple of [`CHUNK_COLS`].
    pub fn padded_cols(cols: usize) -> usize {
        cols.div_ceil(CHUNK_COLS) * CHUNK_COLS
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Storage bytes (padding included).
    pub fn storage_bytes(&self) -> usize {
        self.data.len() * 2
    }

    /// The storage, in the order the pass reads it.
    pub fn as_slice(&self) -> &[i16] {
        &self.data
    }

    /// Column blocks: (first column, padded width, storage of the block).
    /// The block's quads are consecutive `QUAD_ROWS × width` slices.
    pub fn blocks(&self) -> impl Iterator<Item = (usize, usize, &[i16])> + '_ {
        let cols_pad = Self::padded_cols(self.cols);
        let rows_pad = Self::padded_rows(self.rows);
        (0..cols_pad.div_ceil(BLOCK_COLS)).map(move |b| {
            let c0 = b * BLOCK_COLS;
            let w = BLOCK_COLS.min(cols_pad - c0);
            let start = c0 * rows_pad;
            (c0, w, &self.data[start..start + w * rows_pad])
        })
    }

    /// Storage index of (r, j); both in range.
    #[inline]
    fn offset(&self, r: usize, j: usize) -> usize {
        let (base, w) = self.column_base(j);
        base + Self::row_step(r, w)
    }

    /// The part of [`DigitMatrix::offset`] that depends on the column: the
    /// index of (0, j), and the width of j's block.
    #[inline]
    fn column_base(&self, j: usize) -> (usize, usize) {
        let c0 = j / BLOCK_COLS * BLOCK_COLS;
        let w = BLOCK_COLS.min(Self::padded_cols(self.cols) - c0);
        let jj = j - c0;
        let base = c0 * Self::padded_rows(self.rows)
            + jj / CHUNK_COLS * QUAD_ROWS * CHUNK_COLS
            + jj % CHUNK_COLS;
        (base, w)
    }

    /// The part that depends on the row, in a block of width w.
    #[inline]
    fn row_step(r: usize, w: usize) -> usize {
        r / QUAD_ROWS * QUAD_ROWS * w + r % QUAD_ROWS * CHUNK_COLS
    }

    /// Entry (r, j).
    ///
    /// # Panics
    /// If r or j is out of range.
    pub fn get(&self, r: usize, j: usize) -> i16 {
        assert!(r < self.rows && j < self.cols, "digit index");
        self.data[self.offset(r, j)]
    }

    /// Sets entry (r, j).
    ///
    /// # Panics
    /// If r or j is out of range.
    pub fn set(&mut self, r: usize, j: usize, v: i16) {
        assert!(r < self.rows && j < self.cols, "digit index");
        let o = self.offset(r, j);
        self.data[o] = v;
    }

    /// Writes `src` to columns j0.. of row r (one copy per chunk).
    ///
    /// # Panics
    /// If the row or the column range is out of range.
    pub fn write_row(&mut self, r: usize, j0: usize, src: &[i16]) {
        assert!(r < self.rows && j0 + src.len() <= self.cols, "row segment");
        let mut j = j0;
        let mut rest = src;
        while !rest.is_empty() {
            let n = (CHUNK_COLS - j % CHUNK_COLS).min(rest.len());
            let o = self.offset(r, j);
            self.data[o..o + n].copy_from_slice(&rest[..n]);
            rest = &rest[n..];
            j += n;
        }
    }

    /// The column blocks as disjoint mutable views, so that blocks can be
    /// written in parallel (`Server::update`).
    pub fn column_blocks_mut(&mut self) -> impl Iterator<Item = ColumnBlockMut<'_>> {
        let (rows, cols) = (self.rows, self.cols);
        let rows_pad = Self::padded_rows(rows);
        // (no rows: no storage, no blocks)
        self.data
            .chunks_mut((BLOCK_COLS * rows_pad).max(1))
            .enumerate()
            .map(move |(b, data)| {
                let c0 = b * BLOCK_COLS;
                ColumnBlockMut {
                    c0,
                    cols: BLOCK_COLS.min(cols - c0),
                    w: data.len() / rows_pad,
                    rows,
                    data,
                }
            })
    }

    /// Reads the whole rows 4q .. 4q + 4 (quad q) into `dst`, row-major
    /// (row 4q + i at `dst[i·cols ..][..cols]`; rows past [`Self::rows`]
    /// read as the zero padding they are). One pass over the quad's
    /// storage, front to back: reading the four rows one by one would read
    /// every 256-byte run four times, a quarter at a time (H2 reads the
    /// whole hint this way, `Server::update`).
    ///
    /// # Panics
    /// If q is not a quad of the matrix or `dst` is shorter than 4 rows.
    pub fn read_quad(&self, q: usize, dst: &mut [i16]) {
        let cols = self.cols;
        assert!(q * QUAD_ROWS < self.rows, "quad index");
        assert!(dst.len() >= QUAD_ROWS * cols, "quad buffer");
        for (c0, w, blk) in self.blocks() {
            let quad = &blk[q * QUAD_ROWS * w..(q + 1) * QUAD_ROWS * w];
            for (k, chunk) in quad.chunks_exact(QUAD_ROWS * CHUNK_COLS).enumerate() {
                let j = c0 + k * CHUNK_COLS;
                let n = cols.saturating_sub(j).min(CHUNK_COLS);
                if n == 0 {
                    break;
                }
                if n == CHUNK_COLS {
                    // a whole chunk: fixed-size copies, element by element
                    // (with one slice copy for both cases the compiler
                    // emitted a memcpy call per 64 bytes, ~2 % of an update)
                    for (i, src) in chunk.chunks_exact(CHUNK_COLS).enumerate() {
                        let d = &mut dst[i * cols + j..][..CHUNK_COLS];
                        for (d, &s) in d.iter_mut().zip(src) {
                            *d = s;
                        }
                    }
                } else {
                    for (i, src) in chunk.chunks_exact(CHUNK_COLS).enumerate() {
                        dst[i * cols + j..][..n].copy_from_slice(&src[..n]);
                    }
                }
            }
        }
    }

    /// Reads columns j0..j0 + dst.len() of row r into `dst`.
    ///
    /// # Panics
    /// If the row or the column range is out of range.
    pub fn read_row(&self, r: usize, j0: usize, dst: &mut [i16]) {
        assert!(r < self.rows && j0 + dst.len() <= self.cols, "row segment");
        if j0 == 0 && dst.len() == self.cols {
            // A whole row (hint files): walk the blocks and chunks
            // directly, whole chunks as fixed-size copies.
            let mut done = 0;
            for (_, w, blk) in self.blocks() {
                let quad = &blk[r / QUAD_ROWS * QUAD_ROWS * w..];
                for k in 0..w / CHUNK_COLS {
                    let n = (self.cols - done).min(CHUNK_COLS);
                    if n == 0 {
                        break;
                    }
                    let src = &quad[k * QUAD_ROWS * CHUNK_COLS + r % QUAD_ROWS * CHUNK_COLS..];
                    if n == CHUNK_COLS {
                        let d: &mut [i16; CHUNK_COLS] = (&mut dst[done..done + CHUNK_COLS])
                            .try_into()
                            .expect("chunk");
                        d.copy_from_slice(&src[..CHUNK_COLS]);
                    } else {
                        dst[done..done + n].copy_from_slice(&src[..n]);
                    }
                    done += n;
                }
            }
            return;
        }
        let mut j = j0;
        let mut done = 0;
        while done < dst.len() {
            let n = (CHUNK_COLS - j % CHUNK_COLS).min(dst.len() - done);
            let o = self.offset(r, j);
            dst[done..done + n].copy_from_slice(&self.data[o..o + n]);
            done += n;
            j += n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_a_bijection_onto_the_unpadded_cells() {
        for (rows, cols) in [
            (1, 1),
            (3, 31),
            (4, 32),
            (5, 33),
            (7, 600),
            (9, 1100),
            (8, 1024),
        ] {
            let m = DigitMatrix::zeros(rows, cols);
            let mut seen = vec![false; m.data.len()];
            for r in 0..rows {
                for j in 0..cols {
                    let o = m.offset(r, j);
                    assert!(!seen[o], "{rows}x{cols}: ({r}, {j}) collides");
                    seen[o] = true;
                }
            }
            assert_eq!(
                m.data.len(),
                DigitMatrix::padded_rows(rows) * DigitMatrix::padded_cols(cols)
            );
        }
    }

    #[test]
    fn rows_round_trip_and_blocks_cover_the_storage() {
        let (rows, cols) = (6usize, 1100usize);
        let rm: Vec<i16> = (0..rows * cols)
            .map(|i| (i * 7919 % 65521) as i16)
            .collect();
        let m = DigitMatrix::from_row_major(rows, cols, &rm);
        for r in 0..rows {
            let mut row = vec![0i16; cols];
            m.read_row(r, 0, &mut row);
            assert_eq!(row, rm[r * cols..(r + 1) * cols]);
            for j in [0, 31, 32, 511, 512, 1099] {
                assert_eq!(m.get(r, j), rm[r * cols + j]);
            }
            // unaligned segments
            let mut seg = vec![0i16; 100];
            m.read_row(r, 470, &mut seg);
            assert_eq!(seg, rm[r * cols + 470..r * cols + 570]);
        }
        // whole quads (the second one half padding: rows 6 and 7 are zero)
        let mut quad = vec![1i16; QUAD_ROWS * cols];
        for q in 0..rows.div_ceil(QUAD_ROWS) {
            m.read_quad(q, &mut quad);
            for i in 0..QUAD_ROWS {
                let r = q * QUAD_ROWS + i;
                let got = &quad[i * cols..(i + 1) * cols];
                if r < rows {
                    assert_eq!(got, &rm[r * cols..(r + 1) * cols], "row {r}");
                } else {
                    assert!(got.iter().all(|&v| v == 0), "padding row {r}");
                }
            }
        }
        let mut m2 = DigitMatrix::zeros(rows, cols);
        for r in 0..rows {
            m2.write_row(r, 0, &rm[r * cols..r * cols + 45]);
            m2.write_row(r, 45, &rm[r * cols + 45..(r + 1) * cols]);
        }
        assert_eq!(m2, m);
        // blocks: widths 1024 and 96 (1100 padded to 1120), contiguous
        assert_eq!(BLOCK_COLS, 1024);
        let blocks: Vec<(usize, usize, usize)> =
            m.blocks().map(|(c0, w, s)| (c0, w, s.len())).collect();
        assert_eq!(blocks, vec![(0, 1024, 1024 * 8), (1024, 96, 96 * 8)]);
        // the first quad of the last block starts with row 0, columns 1024..1056
        let (_, _, last) = m.blocks().last().unwrap();
        assert_eq!(last[..32], rm[1024..1056]);
        assert_eq!(last[32..64], rm[cols + 1024..cols + 1056]);
        // mutable column blocks: the same two blocks, each writable on its
        // own (entry by entry, and by column runs inside the block)
        let mut m4 = DigitMatrix::zeros(rows, cols);
        let mut blocks: Vec<_> = m4.column_blocks_mut().collect();
        assert_eq!(
            blocks.iter().map(|b| (b.c0, b.cols)).collect::<Vec<_>>(),
            vec![(0, 1024), (1024, 76)]
        );
        for r in 0..rows {
            for j in 0..1024 {
                blocks[0].set(r, j, rm[r * cols + j]);
            }
        }
        // the second through its column runs: columns j..j + 8 of row r at
        // stride.at(r) + c (the last four entry by entry)
        for j in (1024..1096).step_by(8) {
            let (run, stride) = blocks[1].column_run(j);
            for r in 0..rows {
                for c in 0..8 {
                    run[stride.at(r) + c] = rm[r * cols + j + c];
                }
            }
        }
        for r in 0..rows {
            for j in 1096..1100 {
                blocks[1].set(r, j, rm[r * cols + j]);
            }
        }
        drop(blocks);
        assert_eq!(m4, m);
    }

    #[test]
    #[should_panic(expected = "row segment")]
    fn out_of_range_segment_panics() {
        let mut m = DigitMatrix::zeros(2, 40);
        m.write_row(1, 30, &[0; 11]);
    }
}
