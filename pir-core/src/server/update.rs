//! Incremental DBSetup after records changed ([`Server::update`]): only
//! the touched columns of A1·D and of the hint are rewritten.

use std::time::Instant;

use super::chunks::ChunkPlan;
use super::Server;
use crate::db::ColumnsMut;
use crate::digits::{ColumnBlockMut, BLOCK_COLS, CHUNK_COLS};
use crate::error::{Error, Result};
use crate::kernel;

use super::setup::SetupTimings;

/// One changed record for [`Server::update`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordUpdate {
    /// Row i1.
    pub row: usize,
    /// Column i2.
    pub col: usize,
    /// New value in Z_N.
    pub value: u8,
}

/// What an update did.
#[derive(Clone, Copy, Debug, Default)]
pub struct UpdateStats {
    /// Records whose value changed.
    pub changed_records: usize,
    /// Columns of A1·D touched.
    pub dirty_columns: usize,
    /// Time per part.
    pub timings: SetupTimings,
}

/// One block of columns as `Server::update` rewrites it: its columns of
/// A1·D (column-major), of the hint, of the records, and its sorted
/// changes.
struct UpdateBlock<'a> {
    ad: &'a mut [u32],
    hint: ColumnBlockMut<'a>,
    db: ColumnsMut<'a>,
    terms: &'a mut [u64],
}

impl Server {
    /// Incremental DBSetup after some records changed (same public seed).
    ///
    /// A changed record (i, j) changes column j of A1·D by δ·A1[:, i], where
    /// A1[:, i] is a column of NCyclicMat(a1,b) (App. B), so the unrounded
    /// hint is updated in O(d1) per change; only the touched columns are
    /// re-rounded and re-packed. The records, A1·D and the hint are
    /// rewritten block by block of 1024 columns, in parallel when the rayon
    /// pool has more than one thread. H2 and the packing
    /// precomputation are then rebuilt (a fixed cost independent of the
    /// database size). The result
    /// answers exactly like a fresh [`Server::setup`] of the new database
    /// with the same seed. All updates are validated before any is applied.
    ///
    /// On a server loaded with [`Server::from_hint`], the first update that
    /// changes a record first recomputes A1·D (a full DBSetup pass), and with
    /// it the hint rows from the database itself.
    pub fn update(&mut self, changes: &[RecordUpdate]) -> Result<UpdateStats> {
        let params = self.ctx.params;
        let (ell1, ell2, d1) = (self.shape.ell1, self.shape.ell2, params.d1);
        for c in changes {
            if c.row >= ell1 || c.col >= ell2 {
                return Err(Error::IndexOutOfRange {
                    index: (c.col * ell1 + c.row) as u64,
                    len: (ell1 * ell2) as u64,
                });
            }
            if params.record_bits < 8 && c.value as u32 >= 1 << params.record_bits {
                return Err(Error::RecordOutOfRange {
                    index: c.col * ell1 + c.row,
                    value: c.value,
                    modulus: 1 << params.record_bits,
                });
            }
        }
        let t0 = Instant::now();
        // Loaded from a hint file: A1·D was not stored, recompute it (and
        // the hint, which the database itself determines).
        let mut hint_replaced = false;
        if self.ad.is_empty()
            && changes
                .iter()
                .any(|c| self.db.get(c.row, c.col) != Ok(c.value))
        {
            let (hint, ad, _) = Self::compute_hint(&self.ctx, &self.db, &self.seed);
            hint_replaced = hint != self.hint;
            self.hint = hint;
            self.ad = ad;
        }
        // Counting sort by column, so that each column of A1·D stays in L1
        // while its changes are applied, in two stable passes: by block of
        // BLOCK_COLS columns here (one output stream per block), then by
        // column inside each block's task below (its share of the changes
        // sorts in L2, and on every core). Stable, so a later change to the
        // same record still wins. A change is kept as one word:
        // (column in its block)·2^48 + row·2^8 + value (rows < 2^40: a
        // database of ℓ1 ≥ 2^40 rows would not fit in memory).
        debug_assert!((ell1 as u64) < 1 << 40 && BLOCK_COLS <= 1 << 16);
        let n_blocks = ell2.div_ceil(BLOCK_COLS);
        let mut starts = vec![0usize; n_blocks + 1];
        for c in changes {
            starts[c.col / BLOCK_COLS + 1] += 1;
        }
        for b in 0..n_blocks {
            starts[b + 1] += starts[b];
        }
        let mut next = starts.clone();
        let mut sorted = vec![0u64; changes.len()];
        for c in changes {
            let (b, jj) = (c.col / BLOCK_COLS, c.col % BLOCK_COLS);
            sorted[next[b]] = (jj as u64) << 48 | (c.row as u64) << 8 | u64::from(c.value);
            next[b] += 1;
        }
        drop(next);
        let mut stats = UpdateStats::default();
        // One task per block of BLOCK_COLS columns (in parallel with more
        // than one thread: the blocks of the records, of the sorted
        // changes, of A1·D and of the hint are disjoint):
        // 1. in column order, replace the block's records and turn each
        //    change into its term in place: (δ << 32 | offset of the run of
        //    A1's column in a1_ext), δ = 0 for a record that kept its
        //    value. The records are scattered over the database; each is
        //    prefetched AHEAD changes earlier (`pj` is the column of the
        //    change being fetched). A pass of its own: interleaved with
        //    the arithmetic of step 2, whose runs of A1 stream from L2, the
        //    misses slowed both down (one thread, B = 33: +7 ms);
        // 2. add the terms to each touched column of A1·D;
        // 3. re-round and re-pack the touched columns, 32 at a time
        //    straight into the hint's storage when they are a whole
        //    32-column chunk (every column is touched at 0.1 % changes),
        //    else runs of eight touched columns in place, the others one
        //    by one (ChunkPlan::pack_group).
        const AHEAD: usize = 16;
        let plan = ChunkPlan::for_params(&params);
        let (ad, a1_ext) = (&mut self.ad, &self.a1_ext);
        let block = |blk: UpdateBlock<'_>| -> Result<(usize, usize)> {
            let UpdateBlock {
                ad: blk_ad,
                hint: mut blk,
                db: mut blk_db,
                terms: blk_terms,
            } = blk;
            let (c0, c1) = (blk.c0, blk.c0 + blk.cols);
            // the block's changes by column: column j's are
            // blk_terms[at[j − c0] .. at[j − c0 + 1]]
            let mut at = vec![0usize; c1 - c0 + 1];
            for &k in blk_terms.iter() {
                at[(k >> 48) as usize + 1] += 1;
            }
            for jj in 0..c1 - c0 {
                at[jj + 1] += at[jj];
            }
            let mut next = at.clone();
            let mut by_column = vec![0u64; blk_terms.len()];
            for &k in blk_terms.iter() {
                let jj = (k >> 48) as usize;
                by_column[next[jj]] = k & ((1 << 48) - 1);
                next[jj] += 1;
            }
            blk_terms.copy_from_slice(&by_column);
            drop((next, by_column));
            let bucket = |j: usize| at[j - c0]..at[j - c0 + 1];
            let mut changed = 0;
            let mut pj = c0;
            for j in c0..c1 {
                for n in bucket(j) {
                    if let Some(&ahead) = blk_terms.get(n + AHEAD) {
                        while at[pj - c0 + 1] <= n + AHEAD {
                            pj += 1;
                        }
                        blk_db.prefetch((ahead >> 8) as usize, pj);
                    }
                    let key = blk_terms[n];
                    let (row, value) = ((key >> 8) as usize, key as u8);
                    let old = blk_db.replace(row, j, value)?;
                    // column `row` of A1 scaled by the change of the record
                    let delta = (value as i8 as i32 - old as i8 as i32) as u32;
                    let (b, ii) = (row / d1, row % d1);
                    blk_terms[n] = u64::from(delta) << 32 | (b * 2 * d1 + d1 - 1 - ii) as u64;
                    changed += usize::from(delta != 0);
                }
            }
            // steps 2 and 3 one 32-column chunk of the hint at a time, so
            // that the columns are packed while still in the cache (a
            // whole block of A1·D is 4 MiB, a chunk's columns 128 KiB)
            let mut terms: Vec<(u32, usize)> = Vec::new();
            let (mut values, mut column) = (Vec::new(), Vec::new());
            let mut n_dirty = 0;
            for (g, group) in blk_ad.chunks_mut(CHUNK_COLS * d1).enumerate() {
                let j = c0 + CHUNK_COLS * g;
                let mut dirty = [false; CHUNK_COLS];
                for (t, col) in group.chunks_exact_mut(d1).enumerate() {
                    terms.clear();
                    terms.extend(
                        blk_terms[bucket(j + t)]
                            .iter()
                            .filter(|&&t| t >> 32 != 0)
                            .map(|&t| ((t >> 32) as u32, t as u32 as usize)),
                    );
                    if !terms.is_empty() {
                        kernel::add_scaled_runs(col, &terms, a1_ext);
                        dirty[t] = true;
                    }
                }
                n_dirty += dirty.iter().filter(|&&d| d).count();
                let dirty = &dirty[..group.len() / d1];
                plan.pack_group(group, dirty, &mut blk, j, (&mut values, &mut column));
            }
            Ok((n_dirty, changed))
        };
        // the sorted changes, cut at the blocks' first columns
        let mut rest = &mut sorted[..];
        let block_terms = (0..n_blocks).map(|b| {
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(starts[b + 1] - starts[b]);
            rest = tail;
            head
        });
        let blocks: Vec<_> = ad
            .chunks_mut(BLOCK_COLS * d1)
            .zip(self.hint.column_blocks_mut())
            .zip(self.db.column_blocks_mut(BLOCK_COLS))
            .zip(block_terms)
            .map(|(((ad, hint), db), terms)| UpdateBlock {
                ad,
                hint,
                db,
                terms,
            })
            .collect();
        #[cfg(feature = "parallel")]
        let counts: Vec<(usize, usize)> = {
            use rayon::prelude::*;
            blocks.into_par_iter().map(block).collect::<Result<_>>()?
        };
        #[cfg(not(feature = "parallel"))]
        let counts: Vec<(usize, usize)> = blocks.into_iter().map(block).collect::<Result<_>>()?;
        for (dirty, changed) in counts {
            stats.dirty_columns += dirty;
            stats.changed_records += changed;
        }
        drop(sorted);
        stats.timings.hint = t0.elapsed().as_secs_f64();
        if stats.dirty_columns > 0 || hint_replaced {
            let (h2, packing) = self.rebuild_packing();
            stats.timings.h2 = h2;
            stats.timings.packing = packing;
        }
        Ok(stats)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    use super::super::test_util::{assert_same_answers, hint_bytes, lcg_db, CELLS, HINT_SHAPE};
    use crate::params::TOY;
    use crate::rns::Context;
    use crate::sampler::PublicSeed;

    #[test]
    fn update_after_hint_load_matches_fresh_setup() {
        let db = lcg_db(HINT_SHAPE, 11);
        let seed = PublicSeed([7u8; 32]);
        let ctx = Arc::new(Context::new(TOY));
        let file = hint_bytes(&Server::setup_with_context(ctx.clone(), db.clone(), seed).unwrap());
        let mut server = Server::from_hint(ctx.clone(), db.clone(), seed, &file).unwrap();

        // No-op updates do not trigger the recomputation of A1·D.
        let noop = [RecordUpdate {
            row: 3,
            col: 4,
            value: db.get(3, 4).unwrap(),
        }];
        assert_eq!(server.update(&noop).unwrap().changed_records, 0);
        assert!(server.ad.is_empty());

        let mut s = 99u64;
        let mut next = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 24) as usize
        };
        let mut new_db = db.clone();
        for round in 0..2 {
            let changes: Vec<RecordUpdate> = (0..40)
                .map(|_| RecordUpdate {
                    row: next() % HINT_SHAPE.ell1,
                    col: next() % HINT_SHAPE.ell2,
                    value: next() as u8,
                })
                .chain([RecordUpdate {
                    row: 17,
                    col: 3,
                    value: new_db.get(17, 3).unwrap() ^ 0x5a,
                }])
                .collect();
            for c in &changes {
                new_db.set(c.row, c.col, c.value).unwrap();
            }
            let stats = server.update(&changes).unwrap();
            assert!(stats.changed_records > 0, "round {round}");
            assert_eq!(server.ad.len(), TOY.d1 * HINT_SHAPE.ell2);
            assert_eq!(server.database(), &new_db);
            let fresh = Server::setup_with_context(ctx.clone(), new_db.clone(), seed).unwrap();
            assert_eq!(server.hint, fresh.hint);
            assert_eq!(server.ad, fresh.ad);
            assert_same_answers(&server, &fresh, &new_db, &CELLS);
        }

        // A stale hint file (older database, same seed and shape) is only
        // caught by the recomputation in the first update.
        let mut stale = Server::from_hint(ctx.clone(), new_db.clone(), seed, &file).unwrap();
        let change = [RecordUpdate {
            row: 0,
            col: 0,
            value: new_db.get(0, 0).unwrap() ^ 1,
        }];
        new_db.set(0, 0, change[0].value).unwrap();
        stale.update(&change).unwrap();
        let fresh = Server::setup_with_context(ctx, new_db.clone(), seed).unwrap();
        assert_same_answers(&stale, &fresh, &new_db, &CELLS);
    }
}
