//! The server half: DBSetup and Answer of YPIR Construction 3.1 with the
//! NTT hint (§4.1, App. B), the packing preprocessing (§4.2), one packed
//! response ciphertext, and cross-client batching (§4.3).
//!
//! # The hint and the dense response layout
//! DBSetup computes, column by column, A1·D over Z_{2^32} with the NTT
//! (App. B: A1 = NCyclicMat(a1ᵀ), so NCyclicMat(a1,b)·d = NCoeffs(a1,b·d̂)
//! where NCoeffs(d̂) = d), rounds it to q̃1 and, instead of the base-p digits
//! G^{-1}_{d1,p} of Eq. (3.1), bit-packs the d1 values of log q̃1 bits of each
//! column into K_H = ⌈d1·log q̃1 / log p⌉ chunks of log p bits (stored as
//! signed representatives, so ‖H‖∞ ≤ p/2 as Theorem 3.4 assumes). With the κ
//! digit rows of T this is K_H + κ ≤ d2 plaintext rows, so the whole
//! DoublePIR response packs into ρ = 1 RLWE ciphertext.
//!
//! For a row h of that matrix the DoublePIR encoding has a-vector A2·hᵀ =
//! NCoeffs(Σ_b a2,b·ĥ_b) and CDKS.Pack turns a-vector α into
//! ã = Σ_j α_j x^{−j}. Since NCoeffs reverses coefficients, ã = −x·(Σ_b a2,b·ĥ_b),
//! and the factor d2^{-1} of Eq. (3.2) is folded in: ã = d2^{-1}·(−x)·Σ_b a2,b·ĥ_b,
//! all computed in the NTT domain.
//!
//! # Hint files
//! Computing A1·D is the expensive part of DBSetup (one pass of NTTs over the
//! whole database). [`Server::write_hint`] persists the dense hint rows in a
//! versioned, checksummed file and [`Server::from_hint`] rebuilds a server
//! from the database, its public seed and that file, re-deriving everything
//! else (a2, the packing key rows, H2 and the §4.2 precomputation) from the
//! seed: a cost independent of ℓ1. The file does not bind the database
//! contents: it must be stored together with the database version it was
//! written for.
//!
//! # Kernel selection and prefetch tuning
//! The SimplePIR and DoublePIR passes run the fastest SIMD kernel this CPU
//! has ([`simplepir_impl`] names it; `PIR_KERNEL=scalar|avx2|avx512bw|
//! avx512-vnni` forces one). The 1st, 2nd, 4th, 8th, … DBSetup of a
//! database of at least 64 MiB in a process measures the SimplePIR pass's
//! software-prefetch distance and single-query kernel, keeping the best
//! rate each candidate has reached ([`prefetch_tuning`],
//! [`prefetch_distance`]; `PIR_PF` fixes it).

use std::sync::Arc;
use std::time::Instant;

use sha2::{Digest, Sha256};

use crate::arith::{round_mod, round_pow2, small_residue, MODS, Q2};
use crate::db::{ColumnsMut, Database};
use crate::digits::{ColumnBlockMut, DigitMatrix, BLOCK_COLS, CHUNK_COLS, QUAD_ROWS};
use crate::error::{Error, Result};
use crate::kernel;
use crate::packing::{Leaf, PackInputs, PackPrecomp, StaticKs};
use crate::params::{DbShape, Layout, Params, LOG_Q1};
use crate::rns::{self, Context};
use crate::sampler::{hex, PublicSeed};
use crate::wire::{Query, Response};

pub use crate::kernel::{
    cached_pass, mac_peak, overlap_ceiling, prefetch_distance, prefetch_tuning, simplepir_impl,
    CachedPass, MacPeak, OverlapCeiling, PrefetchTuning,
};

/// Words between consecutive a2 blocks (and the transformed row blocks
/// H2 sums them against, [`Server::rows_a`]): 2·d2 plus 64. With a stride
/// of exactly 2·d2 (a multiple of 4 KiB) the m2 blocks' slots that
/// `kernel::mul_sum_blocks_mod` reads together all map to the same few L1
/// sets; measured on the Zen 4 at d2 = 2048, m2 = 16: 11.0 µs per row
/// with 4096 words, 7.0 µs with 4160.
fn a2_stride(d2: usize) -> usize {
    2 * d2 + 64
}

/// Server state of one database version: the output dbp of DBSetup.
pub struct Server {
    ctx: Arc<Context>,
    shape: DbShape,
    seed: PublicSeed,
    seed_id: [u8; 8],
    db: Database,
    /// Dense hint rows, K_H × ℓ2 signed log p-bit chunks, in the layout the
    /// DoublePIR pass streams ([`crate::digits`]).
    hint: DigitMatrix,
    /// a2 in NTT form (m2 polynomials) times NTT(−x·d2^{-1})
    /// ([`Server::scaled_a2`]), one every [`a2_stride`] words.
    a2: Vec<u32>,
    /// Public random rows of the packing key (NTT and Montgomery form).
    pack_a: Vec<u32>,
    pack: PackPrecomp,
    layout: Layout,
    /// a1 in coefficient form for the columns of A1 in `update`: per block,
    /// 2·d1 words `[rev(a), −rev(a)]` (`rev(a)[m] = a[d1 − 1 − m]`), so that
    /// column ii of NCyclicMat(a) is the forward run starting at
    /// d1 − 1 − ii, negacyclic signs included (App. B).
    a1_ext: Vec<u32>,
    /// Unrounded A1·D, column-major (d1 words per column), kept so that an
    /// update touches only what changed. Empty
    /// after [`Server::from_hint`] (a hint file stores only the rounded
    /// hint); the first [`Server::update`] then recomputes it.
    ad: Vec<u32>,
    setup_timings: SetupTimings,
}

/// Time spent in each part of DBSetup (or of an update).
#[derive(Clone, Copy, Debug, Default)]
pub struct SetupTimings {
    /// A1·D with the NTT (App. B) and the dense hint rows; for an update,
    /// the column updates and re-packing; for [`Server::from_hint`], reading
    /// and checking the hint file and expanding a1.
    pub hint: f64,
    /// H2 in CDKS form (the leaf `a` parts).
    pub h2: f64,
    /// Packing precomputation (§4.2).
    pub packing: f64,
    /// Measuring the SimplePIR prefetch distance and single-query kernel
    /// ([`prefetch_tuning`]): at the 1st, 2nd, 4th, 8th, … large database
    /// of the process; 0 otherwise.
    pub tune: f64,
}

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

/// Time spent in each step of one (batched) answer.
#[derive(Clone, Copy, Debug, Default)]
pub struct AnswerTimings {
    /// Step 1: c1ᵀ·D (all queries of the batch), from the start of the scan
    /// to its end (with more than one thread the query-only work of steps
    /// 2–3 runs beside it: [`AnswerTimings::overlapped`]).
    pub simplepir: f64,
    /// Step 2: c2ᵀ·[H; T]ᵀ and the T leaves.
    pub doublepir: f64,
    /// Steps 3–4: packing and modulus switching.
    pub packing: f64,
    /// The part of `doublepir` and `packing` that ran beside the scan (the
    /// hint rows' DoublePIR pass and the packing tree's static subtrees):
    /// zero on one thread, where the steps run in order.
    pub overlapped: f64,
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

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("params", &self.ctx.params.name)
            .field("shape", &self.shape)
            .field("seed", &self.seed)
            .finish()
    }
}

/// Signed representative of a log p-bit chunk.
#[inline]
fn chunk_signed(c: u32, p_bits: u32) -> i16 {
    let p = 1i32 << p_bits;
    let c = c as i32;
    (if c >= p / 2 { c - p } else { c }) as i16
}

/// Packs `vals` (each `w` bits) into chunks of `pb` bits, LSB first, as one
/// bit stream: the reference for [`ChunkPlan`] and its fallback for widths
/// it does not plan.
fn pack_chunks(vals: &[u32], w: u32, pb: u32, out: &mut [i16]) {
    let mut acc: u64 = 0;
    let mut nbits = 0u32;
    let mut k = 0;
    let mask = (1u64 << pb) - 1;
    for &v in vals {
        acc |= (v as u64) << nbits;
        nbits += w;
        while nbits >= pb {
            out[k] = chunk_signed((acc & mask) as u32, pb);
            k += 1;
            acc >>= pb;
            nbits -= pb;
        }
    }
    if nbits > 0 {
        out[k] = chunk_signed((acc & mask) as u32, pb);
        k += 1;
    }
    debug_assert_eq!(k, out.len());
}

/// Rounding and chunk packing of columns of A1·D (App. B: a column of
/// ⌊A1·D⌉_{q1,q̃1} becomes K_H = ⌈d1·log q̃1 / log p⌉ chunks of log p bits),
/// planned once per parameter set. This runs for every column at DBSetup
/// and for every dirty column at an update.
///
/// When a chunk is no wider than a value (log p ≤ log q̃1; Table 1: 15 ≤ 28)
/// every chunk lies inside two consecutive rounded values, so chunk k is
/// read straight out of the 64-bit window `r[i] | r[i+1]·2^log q̃1` at the
/// planned offset: iterations are independent and branch-free (the
/// bit-stream loop of [`pack_chunks`] mispredicts its refill branch).
pub(crate) struct ChunkPlan {
    /// log q̃1: width of a rounded value.
    w: u32,
    /// log p: width of a chunk.
    pb: u32,
    /// d1: values per column.
    d1: usize,
    /// Per chunk k: (i, off) with k·log p = i·log q̃1 + off, off < log q̃1.
    /// Empty when log p > log q̃1: [`pack_chunks`] runs instead.
    starts: Vec<(u32, u32)>,
    /// The same, eight chunks at a time, for [`kernel::pack_groups`]
    /// (the last `chunks mod 8` chunks are packed from `starts`).
    groups: Vec<kernel::PackGroup>,
    /// K_H.
    chunks: usize,
}

impl ChunkPlan {
    /// Plan for `d1` values rounded from 2^32 to 2^w, chunks of `pb` bits.
    pub(crate) fn new(d1: usize, w: u32, pb: u32) -> ChunkPlan {
        let chunks = (d1 * w as usize).div_ceil(pb as usize);
        assert!(w < LOG_Q1 && (1..=16).contains(&pb), "validated parameters");
        let starts = if pb <= w {
            (0..chunks)
                .map(|k| {
                    let bit = k * pb as usize;
                    ((bit / w as usize) as u32, (bit % w as usize) as u32)
                })
                .collect()
        } else {
            Vec::new()
        };
        let groups = starts
            .chunks_exact(8)
            .map(|g| {
                let base = g[0].0;
                let mut grp = kernel::PackGroup {
                    idx: [0; 16],
                    off: [0; 8],
                    base,
                };
                for (t, &(i, off)) in g.iter().enumerate() {
                    // 8 chunks of ≤ w bits span at most 9 values: i − base ≤ 8
                    grp.idx[t] = i - base;
                    grp.idx[t + 8] = i - base + 1;
                    grp.off[t] = u64::from(off);
                }
                grp
            })
            .collect();
        ChunkPlan {
            w,
            pb,
            d1,
            starts,
            groups,
            chunks,
        }
    }

    /// The plan of a parameter set.
    pub(crate) fn for_params(params: &Params) -> ChunkPlan {
        ChunkPlan::new(params.d1, params.q1_tilde_bits, params.p_bits)
    }

    /// Rounds `ad_col` (d1 values mod q1 = 2^32) to q̃1 and writes chunk k
    /// to `out[k·stride]`; `scratch` is reused between calls.
    pub(crate) fn pack(
        &self,
        ad_col: &[u32],
        scratch: &mut Vec<u32>,
        out: &mut [i16],
        stride: usize,
    ) {
        debug_assert_eq!(ad_col.len(), self.d1);
        scratch.clear();
        scratch.extend(
            ad_col
                .iter()
                .map(|&h| round_pow2(h as u64, LOG_Q1, self.w) as u32),
        );
        if self.starts.is_empty() {
            let mut chunks = vec![0i16; self.chunks];
            pack_chunks(scratch, self.w, self.pb, &mut chunks);
            for (k, c) in chunks.into_iter().enumerate() {
                out[k * stride] = c;
            }
            return;
        }
        // the window of the last chunk reads one value past the end, a
        // group's load sixteen
        scratch.resize(self.d1 + 16, 0);
        let r = &scratch[..];
        kernel::pack_groups(r, &self.groups, self.w, self.pb, out, stride);
        // the last `chunks mod 8` chunks; each is the representative in
        // [−p/2, p/2) of the window's log p bits at `off` (`chunk_signed`)
        let done = 8 * self.groups.len();
        for (k, &(i, off)) in self.starts.iter().enumerate().skip(done) {
            let i = i as usize;
            out[k * stride] = kernel::window_chunk(r[i], r[i + 1], self.w, off, self.pb);
        }
    }

    /// Rounds and packs into the hint block `blk` the columns j + t of
    /// `group` (up to [`kernel::PACK_COLS_MAX`] = 32 columns of A1·D,
    /// column-major, starting at a column j that is a multiple of 32, so
    /// all of them lie in one 32-column chunk of the hint's storage) that
    /// are `touched[t]`. When all are touched (and their number is a
    /// multiple of 8) they are packed in place in one
    /// `kernel::pack_columns` call, which fills each row's 64-byte line of
    /// the chunk at once; otherwise each eight-column run that is all
    /// touched goes in place on its own, and the remaining touched columns
    /// one by one. `values` and `column` are scratch reused between calls.
    /// DBSetup packs every column this way, an update its touched ones.
    pub(crate) fn pack_group(
        &self,
        group: &[u32],
        touched: &[bool],
        blk: &mut ColumnBlockMut<'_>,
        j: usize,
        (values, column): (&mut Vec<u32>, &mut Vec<i16>),
    ) {
        let d1 = self.d1;
        let n = group.len() / d1;
        assert!(n <= kernel::PACK_COLS_MAX && touched.len() == n && j.is_multiple_of(CHUNK_COLS));
        let col = |t: usize| &group[t * d1..(t + 1) * d1];
        let cols: [&[u32]; kernel::PACK_COLS_MAX] =
            std::array::from_fn(|t| if t < n { col(t) } else { &[] });
        let in_place = !self.starts.is_empty();
        if in_place && n.is_multiple_of(8) && n > 0 && touched.iter().all(|&t| t) {
            let (out, stride) = blk.column_run(j);
            kernel::pack_columns(
                &cols[..n],
                self.w,
                self.pb,
                &self.starts,
                values,
                out,
                stride,
            );
            return;
        }
        for t0 in (0..n).step_by(8) {
            let run = t0..(t0 + 8).min(n);
            if in_place && run.len() == 8 && touched[run.clone()].iter().all(|&t| t) {
                let (out, stride) = blk.column_run(j + t0);
                let eight = &cols[run];
                kernel::pack_columns(eight, self.w, self.pb, &self.starts, values, out, stride);
                continue;
            }
            column.resize(self.chunks, 0);
            for t in run.filter(|&t| touched[t]) {
                self.pack(col(t), values, column, 1);
                for (r, &v) in column.iter().enumerate() {
                    blk.set(r, j + t, v);
                }
            }
        }
    }
}

/// Inverse of [`pack_chunks`] on unsigned chunk values.
pub(crate) fn unpack_chunks(chunks: &[u32], w: u32, pb: u32, out: &mut [u32]) {
    let mut acc: u64 = 0;
    let mut nbits = 0u32;
    let mut it = chunks.iter();
    let mask = (1u64 << w) - 1;
    for o in out.iter_mut() {
        while nbits < w {
            acc |= (*it.next().unwrap_or(&0) as u64) << nbits;
            nbits += pb;
        }
        *o = (acc & mask) as u32;
        acc >>= w;
        nbits -= w;
    }
}

/// Signed base-p digits (κ of them) of a centred value in Z_{q̃1}.
#[inline]
pub(crate) fn t_digits(y: u32, q1t_bits: u32, p_bits: u32, kappa: usize, out: &mut [i16]) {
    let q = 1i64 << q1t_bits;
    let mut v = y as i64;
    if v >= q / 2 {
        v -= q;
    }
    let p = 1i64 << p_bits;
    for (k, o) in out.iter_mut().enumerate().take(kappa) {
        if k + 1 == kappa {
            *o = v as i16;
        } else {
            let mut d = v & (p - 1);
            if d >= p / 2 {
                d -= p;
            }
            *o = d as i16;
            v = (v - d) >> p_bits;
        }
    }
}

/// The leaves of the packing tree: dense hint rows and the κ rows of T at
/// their slots of `layout`, the rest zero.
fn pack_leaves(params: &Params, layout: &Layout) -> Vec<Leaf> {
    let mut leaves = vec![Leaf::Zero; params.d2];
    for (r, &pos) in layout.pos_hint.iter().enumerate() {
        leaves[pos] = Leaf::Hint(r);
    }
    for (r, &pos) in layout.pos_t.iter().enumerate() {
        leaves[pos] = Leaf::T(r);
    }
    leaves
}

/// Memory of one database's server, by part, in bytes
/// ([`Server::memory`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerMemory {
    /// The records: ℓ1·ℓ2 bytes.
    pub records: usize,
    /// Dense hint rows: K_H × ℓ2 i16 chunks (rows padded to 4, columns to
    /// 32).
    pub hint: usize,
    /// Unrounded A1·D, d1 × ℓ2 u32, kept after [`Server::setup`] for
    /// [`Server::update`] (a server restarted with [`Server::from_hint`]
    /// has none until its first update).
    pub unrounded: usize,
    /// Expanded public randomness: a1 (8·d1 bytes per block of d1 rows),
    /// a2 (4·(2·d2 + 64) bytes per block of d2 columns) and the packing
    /// key's public rows (4·log d2·t·2·d2 bytes).
    pub public: usize,
    /// The §4.2 packing precomputation ([`PackPrecomp::size_for`]): the
    /// cached digits of every static node of the packing tree, t·2·d2
    /// words each. Independent of the database size: the fixed cost of a
    /// database (100,237,312 bytes, ≈ 96 MiB, under YPIR Table 1).
    pub packing: usize,
    /// Transient allocations of DBSetup on top of the above: a1 in NTT
    /// form (8·d1 bytes per block of d1 rows) and the hint rows' packing
    /// inputs (K_H·2·d2 words), freed once the server is built.
    pub setup_transient: usize,
}

impl ServerMemory {
    /// Held by a server built with [`Server::setup`].
    pub fn after_setup(&self) -> usize {
        self.records + self.hint + self.unrounded + self.public + self.packing
    }

    /// Held by a server restarted with [`Server::from_hint`].
    pub fn after_load(&self) -> usize {
        self.after_setup() - self.unrounded
    }

    /// The most DBSetup holds at once.
    pub fn setup_peak(&self) -> usize {
        self.after_setup() + self.setup_transient
    }
}

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
    /// DBSetup(1^λ, D) with the public seed `seed` (fresh per database
    /// version). Refuses shapes whose correctness error exceeds 2^-40.
    pub fn setup(params: Params, db: Database, seed: PublicSeed) -> Result<Server> {
        Self::setup_with_context(Arc::new(Context::new(params)), db, seed)
    }

    /// [`Server::setup`] reusing a prebuilt [`Context`].
    pub fn setup_with_context(ctx: Arc<Context>, db: Database, seed: PublicSeed) -> Result<Server> {
        Self::check_database(&ctx.params, &db)?;
        let t0 = Instant::now();
        let (hint, ad, a1) = Self::compute_hint(&ctx, &db, &seed);
        let hint_s = t0.elapsed().as_secs_f64();
        Ok(Self::assemble(ctx, db, seed, hint, ad, &a1, hint_s))
    }

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

    /// The shape and record size checks of DBSetup.
    fn check_database(params: &Params, db: &Database) -> Result<()> {
        params.check_shape(db.shape())?;
        if db.record_bits() != params.record_bits {
            return Err(Error::InvalidParams("database record size differs from N"));
        }
        Ok(())
    }

    /// Builds the server from its hint rows: expands a2 and the packing key
    /// rows from the seed and runs the packing precomputation.
    fn assemble(
        ctx: Arc<Context>,
        db: Database,
        seed: PublicSeed,
        hint: DigitMatrix,
        ad: Vec<u32>,
        a1: &[u32],
        hint_s: f64,
    ) -> Server {
        let params = ctx.params;
        let shape = db.shape();
        let layout = params.layout();
        let m2 = params.m2(shape);
        let a2 = Self::scaled_a2(&ctx, &seed.expand_a2(m2, params.d2));
        let pack_a =
            ctx.to_mont(&seed.expand_pack(params.log_d2(), params.gadget_len(), params.d2));
        let mut server = Server {
            seed_id: seed.id(),
            ctx,
            shape,
            seed,
            db,
            hint,
            a2,
            pack_a,
            pack: PackPrecomp::empty(),
            layout,
            a1_ext: a1
                .chunks(params.d1)
                .flat_map(|b| {
                    let rev = b.iter().rev().copied();
                    rev.clone().chain(rev.map(u32::wrapping_neg))
                })
                .collect(),
            ad,
            setup_timings: SetupTimings {
                hint: hint_s,
                ..Default::default()
            },
        };
        // The 1st, 2nd, 4th, … large database of the process: measure the
        // SimplePIR prefetch distance and single-query kernel on it
        // (kernel::tune_prefetch; ~0.1 s per kernel).
        let t_tune = Instant::now();
        if kernel::tune_prefetch(&server.db).is_some() {
            server.setup_timings.tune = t_tune.elapsed().as_secs_f64();
        }
        let (h2, packing) = server.rebuild_packing();
        server.setup_timings.h2 = h2;
        server.setup_timings.packing = packing;
        server
    }

    /// Recomputes H2 (leaf `a` parts) from the hint rows and the packing
    /// precomputation; returns the seconds spent in each.
    fn rebuild_packing(&mut self) -> (f64, f64) {
        let params = self.ctx.params;
        let t0 = Instant::now();
        let kh = params.hint_rows();
        debug_assert_eq!(self.hint.rows(), kh);
        let hint_a = Self::rows_a(&self.ctx, &self.hint, &self.a2);
        let h2 = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let leaves = pack_leaves(&params, &self.layout);
        let old = std::mem::replace(&mut self.pack, PackPrecomp::empty());
        self.pack = old.rebuild(&self.ctx, leaves, hint_a, &self.pack_a);
        (h2, t1.elapsed().as_secs_f64())
    }

    /// Time spent in each part of DBSetup.
    pub fn setup_timings(&self) -> SetupTimings {
        self.setup_timings
    }

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

    /// Bytes one answer (or one batch) streams from memory: the database,
    /// the dense hint rows (DoublePIR pass) and the packing tree's cached
    /// digits. A memory-bound answer takes at least this ÷ the bandwidth.
    pub fn answer_stream_bytes(&self) -> usize {
        self.db.as_bytes().len() + self.hint.storage_bytes() + self.pack.size_bytes()
    }

    /// The parameter set.
    pub fn params(&self) -> &Params {
        &self.ctx.params
    }
    /// The database shape.
    pub fn shape(&self) -> DbShape {
        self.shape
    }
    /// The public seed (published to clients).
    pub fn seed(&self) -> PublicSeed {
        self.seed
    }
    /// The database.
    pub fn database(&self) -> &Database {
        &self.db
    }
    /// Gives the database back, dropping the server's state (hint rows,
    /// A1·D, packing precomputation), e.g. to rebuild it from scratch.
    pub fn into_database(self) -> Database {
        self.db
    }
    /// The memory a server of a `shape` database under `params` holds
    /// (and needs while it is set up), computed from the parameters and
    /// the shape alone, exactly as [`Server::setup`] allocates it (checked
    /// against [`Server::state_bytes`] in the tests).
    pub fn memory(params: &Params, shape: DbShape) -> ServerMemory {
        let (d1, d2) = (params.d1, params.d2);
        let (m1, m2) = (params.m1(shape), params.m2(shape));
        let kh = params.hint_rows();
        let t = params.gadget_len();
        ServerMemory {
            records: shape.records(),
            hint: 2 * DigitMatrix::padded_rows(kh) * DigitMatrix::padded_cols(shape.ell2),
            unrounded: 4 * d1 * shape.ell2,
            public: 4 * (m1 * 2 * d1 + m2 * a2_stride(d2) + params.log_d2() * t * 2 * d2),
            packing: PackPrecomp::size_for(&pack_leaves(params, &params.layout()), t),
            setup_transient: 4 * (m1 * 2 * d1 + kh * 2 * d2),
        }
    }

    /// Frees the unrounded A1·D that [`Server::setup`] keeps for
    /// [`Server::update`] (d1·4 bytes per column, [`ServerMemory::unrounded`]),
    /// for a server that will not be updated: the server then holds what
    /// one restarted with [`Server::from_hint`] holds, and answers the
    /// same. A later update recomputes it first (a full DBSetup).
    pub fn release_update_state(&mut self) {
        self.ad = Vec::new();
    }

    /// Bytes of server state beyond the database (hint rows, packing
    /// precomputation, expanded public randomness).
    pub fn state_bytes(&self) -> usize {
        self.hint.storage_bytes()
            + self.ad.len() * 4
            + self.a1_ext.len() * 4
            + self.a2.len() * 4
            + self.pack_a.len() * 4
            + self.pack.size_bytes()
    }

    /// Dense hint: K_H × ℓ2 chunks of ⌊A1·D⌉_{q1,q̃1} (App. B), in the
    /// DoublePIR layout ([`DigitMatrix`]).
    /// Returns (dense hint rows, unrounded A1·D column-major d1 × ℓ2, a1).
    #[allow(clippy::type_complexity)]
    fn compute_hint(
        ctx: &Context,
        db: &Database,
        seed: &PublicSeed,
    ) -> (DigitMatrix, Vec<u32>, Vec<u32>) {
        let params = ctx.params;
        let shape = db.shape();
        let (d1, ell1, ell2) = (params.d1, shape.ell1, shape.ell2);
        let m1 = params.m1(shape);
        let kh = params.hint_rows();
        // a1 lifted to (−2^31, 2^31] and transformed over both primes
        let (a1, a1_ntt) = ctx.a1_ntt(seed, m1);
        // Blocks summed per inverse NTT so that |Σ| ≤ G·d1·2^31·2^7 < q2/2.
        let group = ((1usize << 16) / d1).max(1);
        let column = |j: usize, hsum: &mut [u32]| {
            let mut col = vec![0u8; ell1];
            db.column_into(j, &mut col);
            let mut buf = vec![0u32; 2 * d1];
            let mut acc = vec![0u64; 2 * d1];
            hsum.fill(0);
            let mut b = 0;
            while b < m1 {
                let b_end = (b + group).min(m1);
                acc.iter_mut().for_each(|x| *x = 0);
                for blk in b..b_end {
                    // d̂ with NCoeffs(d̂) = rows blk·d1 .. of column j
                    let src = &col[blk * d1..((blk + 1) * d1).min(ell1)];
                    reversed_record_residues(src, &mut buf);
                    rns::forward(&ctx.ntt1, &mut buf);
                    rns::mul_acc_lazy(&a1_ntt[blk * 2 * d1..(blk + 1) * 2 * d1], &buf, &mut acc);
                }
                rns::reduce_acc(&acc, &mut buf);
                rns::inverse(&ctx.ntt1, &mut buf);
                for i in 0..d1 {
                    let x = ctx.crt.combine(buf[i], buf[d1 + i]);
                    let v = crate::arith::centre(x, Q2) as u64 as u32; // mod 2^32
                    hsum[d1 - 1 - i] = hsum[d1 - 1 - i].wrapping_add(v);
                }
                b = b_end;
            }
        };
        let mut hint = DigitMatrix::zeros(kh, ell2);
        // read and written 4 KiB column by column by `update`: ordinary pages
        let mut ad = vec![0u32; d1 * ell2];
        #[cfg(feature = "parallel")]
        {
            use rayon::prelude::*;
            ad.par_chunks_mut(d1)
                .enumerate()
                .for_each(|(j, h)| column(j, h));
        }
        #[cfg(not(feature = "parallel"))]
        for (j, h) in ad.chunks_mut(d1).enumerate() {
            column(j, h);
        }
        // then round and pack every column into the hint, block by block
        // (as `update` packs the columns it touched)
        let plan = ChunkPlan::for_params(&params);
        let pack_block = |(blk_ad, mut blk): (&[u32], ColumnBlockMut<'_>)| {
            let (mut values, mut column) = (Vec::new(), Vec::new());
            let all = [true; kernel::PACK_COLS_MAX];
            for (g, group) in blk_ad.chunks(CHUNK_COLS * d1).enumerate() {
                let (j, n) = (blk.c0 + CHUNK_COLS * g, group.len() / d1);
                plan.pack_group(group, &all[..n], &mut blk, j, (&mut values, &mut column));
            }
        };
        let blocks: Vec<(&[u32], ColumnBlockMut<'_>)> = ad
            .chunks(BLOCK_COLS * d1)
            .zip(hint.column_blocks_mut())
            .collect();
        #[cfg(feature = "parallel")]
        {
            use rayon::prelude::*;
            blocks.into_par_iter().for_each(pack_block);
        }
        #[cfg(not(feature = "parallel"))]
        blocks.into_iter().for_each(pack_block);
        (hint, ad, a1)
    }

    /// a2 ⊙ NTT(−x·d2^{-1}) block by block (NTT form): the constant factor
    /// of every CDKS input a-part folded into a2 once ([`Server::rows_a`]).
    fn scaled_a2(ctx: &Context, a2: &[u32]) -> Vec<u32> {
        let n = 2 * ctx.params.d2;
        let stride = a2_stride(ctx.params.d2);
        let mut out = vec![0u32; a2.len() / n * stride];
        for (o, a) in out.chunks_exact_mut(stride).zip(a2.chunks_exact(n)) {
            rns::mul(a, &ctx.neg_x_dinv, &mut o[..n]);
        }
        out
    }

    /// CDKS input a-parts ã = d2^{-1}·(−x)·Σ_b a2,b·ĥ_b of rows (NTT form),
    /// given `a2s` = [`Server::scaled_a2`].
    fn rows_a(ctx: &Context, rows: &DigitMatrix, a2s: &[u32]) -> Vec<Vec<u32>> {
        let (n_rows, ell2) = (rows.rows(), rows.cols());
        let d2 = ctx.params.d2;
        let m2 = ell2.div_ceil(d2);
        // Rows are read a quad at a time (one pass over its storage). Each
        // row's m2 blocks are transformed first, prime by prime, the
        // transform reading the block's reversed digits itself
        // (kernel::ntt_forward_reversed_i16), then summed against a2s
        // (kernel::mul_sum_blocks_mod keeps the 64-bit sums in registers
        // across the blocks and reduces them there; both inputs are
        // residues below 2^28).
        let stride = a2_stride(d2);
        let scratch = || (vec![0i16; QUAD_ROWS * ell2], vec![0u32; m2 * stride]);
        let quad = |(quad, ntts): &mut (Vec<i16>, Vec<u32>), q: usize| {
            rows.read_quad(q, quad);
            let in_quad = n_rows.min((q + 1) * QUAD_ROWS) - q * QUAD_ROWS;
            quad.chunks_exact(ell2)
                .take(in_quad)
                .map(|row| {
                    for (b, buf) in ntts.chunks_exact_mut(stride).enumerate() {
                        let src = &row[b * d2..((b + 1) * d2).min(ell2)];
                        for (h, buf) in buf[..2 * d2].chunks_exact_mut(d2).enumerate() {
                            kernel::ntt_forward_reversed_i16(&ctx.ntt2.t[h], src, buf);
                        }
                    }
                    let mut out = vec![0u32; 2 * d2];
                    for (h, o) in out.chunks_exact_mut(d2).enumerate() {
                        let at = h * d2;
                        let (a, x) = (&a2s[at..], &ntts[at..]);
                        kernel::mul_sum_blocks_mod(a, x, stride, m2, MODS[h].p, o);
                    }
                    out
                })
                .collect::<Vec<_>>()
        };
        let n_quads = n_rows.div_ceil(QUAD_ROWS);
        #[cfg(feature = "parallel")]
        {
            use rayon::prelude::*;
            (0..n_quads)
                .into_par_iter()
                .map_init(scratch, quad)
                .flatten_iter()
                .collect()
        }
        #[cfg(not(feature = "parallel"))]
        {
            let mut s = scratch();
            (0..n_quads).flat_map(|q| quad(&mut s, q)).collect()
        }
    }

    /// Whether `q` was built for this database. Its section lengths then
    /// match too: a [`Query`] always has the lengths of its own parameter
    /// set and shape.
    fn check_query(&self, q: &Query) -> Result<()> {
        let params = &self.ctx.params;
        if q.param_id() != params.id {
            return Err(Error::WrongParamSet {
                expected: params.id,
                got: q.param_id(),
            });
        }
        if q.seed_id() != self.seed_id {
            return Err(Error::WrongSeed {
                expected: hex(&self.seed_id),
                got: hex(&q.seed_id()),
            });
        }
        if q.shape() != self.shape {
            return Err(Error::WrongShape {
                ell1: self.shape.ell1,
                ell2: self.shape.ell2,
                got_ell1: q.shape().ell1,
                got_ell2: q.shape().ell2,
            });
        }
        Ok(())
    }

    /// Answer(dbp, q) on wire bytes.
    pub fn answer_bytes(&self, query: &[u8]) -> Result<Vec<u8>> {
        let q = Query::from_bytes(query)?;
        Ok(self.answer(&q)?.to_bytes())
    }

    /// Answer(dbp, q).
    pub fn answer(&self, q: &Query) -> Result<Response> {
        Ok(self.answer_batch(std::slice::from_ref(q))?.remove(0))
    }

    /// Answers k queries with one pass over the database (§4.3).
    pub fn answer_batch(&self, qs: &[Query]) -> Result<Vec<Response>> {
        Ok(self.answer_batch_timed(qs)?.0)
    }

    /// [`Server::answer_batch`] with a per-step time breakdown.
    pub fn answer_batch_timed(&self, qs: &[Query]) -> Result<(Vec<Response>, AnswerTimings)> {
        if qs.is_empty() {
            return Err(Error::InvalidBatch("no queries"));
        }
        for q in qs {
            self.check_query(q)?;
        }
        let params = &self.ctx.params;
        let ell2 = self.shape.ell2;
        let kappa = params.kappa();
        let mut tm = AnswerTimings::default();
        let c2s: Vec<&[u32]> = qs.iter().map(|q| q.c2()).collect();

        // The query-only work: the DoublePIR pass over the hint rows (step
        // 2) and the packing tree's static subtrees (step 3, §4.2) depend
        // on the query and the setup state but not on step 1's result.
        let query_only = || {
            let t = Instant::now();
            let mut yh = vec![vec![[0u32; 2]; params.hint_rows()]; qs.len()];
            kernel::doublepir(&self.hint, &c2s, &mut yh);
            let dp_secs = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let wbs: Vec<Vec<u32>> = qs.iter().map(|q| self.ctx.to_mont(q.pk_b())).collect();
            let wb_refs: Vec<&[u32]> = wbs.iter().map(Vec::as_slice).collect();
            let sks = self.pack.static_ks(&self.ctx, &wb_refs);
            QueryOnly {
                yh,
                wbs,
                sks,
                dp_secs,
                pack_secs: t.elapsed().as_secs_f64(),
            }
        };
        // Step 1: SimplePIR pass, one scan for the whole batch.
        let scan = || {
            let t = Instant::now();
            let c1s: Vec<&[u32]> = qs.iter().map(|q| q.c1()).collect();
            let mut y1 = vec![vec![0u32; ell2]; qs.len()];
            kernel::simplepir(&self.db, &c1s, &mut y1);
            (y1, t.elapsed().as_secs_f64())
        };
        // With more than one thread the memory-bound scan runs beside the
        // query-only work: the thread that takes the latter leaves the
        // other reading the database at one core's bandwidth, then joins
        // the scan by work stealing. One thread keeps the steps in order,
        // so its time breakdown compares with the paper's.
        let (((y1, scan_secs), qo), overlapped) = crate::join_if(true, scan, query_only);
        if overlapped {
            tm.overlapped = qo.dp_secs + qo.pack_secs;
        }
        // T = g_p^{-1}(⌊c1ᵀD⌉_{q1,q̃1}), κ rows × ℓ2 per query.
        let t0 = Instant::now();
        let t_rows: Vec<DigitMatrix> = y1
            .iter()
            .map(|y| {
                let mut t = vec![0i16; kappa * ell2];
                let mut dg = vec![0i16; kappa];
                for (j, &v) in y.iter().enumerate() {
                    let r = round_pow2(v as u64, LOG_Q1, params.q1_tilde_bits) as u32;
                    t_digits(r, params.q1_tilde_bits, params.p_bits, kappa, &mut dg);
                    for k in 0..kappa {
                        t[k * ell2 + j] = dg[k];
                    }
                }
                DigitMatrix::from_row_major(kappa, ell2, &t)
            })
            .collect();
        tm.simplepir = scan_secs + t0.elapsed().as_secs_f64();

        // Step 2: DoublePIR pass over each query's T rows (the hint rows
        // were done above, for the whole batch in one scan).
        let t1 = Instant::now();
        let mut yt = Vec::with_capacity(qs.len());
        let mut t_leaf_a = Vec::with_capacity(qs.len());
        for (q, t) in qs.iter().zip(&t_rows) {
            let mut o = vec![vec![[0u32; 2]; kappa]];
            kernel::doublepir(t, &[q.c2()], &mut o);
            yt.push(o.remove(0));
            t_leaf_a.push(Self::rows_a(&self.ctx, t, &self.a2));
        }
        tm.doublepir = qo.dp_secs + t1.elapsed().as_secs_f64();

        // Steps 3–4: packing with the §4.2 precomputation, modulus switching.
        let t2 = Instant::now();
        let d2 = params.d2;
        let mut out = Vec::with_capacity(qs.len());
        let inputs: Vec<PackInputs<'_>> = qo
            .wbs
            .iter()
            .zip(&t_leaf_a)
            .map(|(wb, ta)| PackInputs {
                wb,
                wa: &self.pack_a,
                t_leaf_a: ta,
            })
            .collect();
        let packed_all = self.pack.pack_dynamic(&self.ctx, &inputs, &qo.sks);
        for ((i, q), packed) in qs.iter().enumerate().zip(packed_all) {
            let mut a = packed.a;
            rns::inverse(&self.ctx.ntt2, &mut a);
            let mut b = packed.ks;
            rns::inverse(&self.ctx.ntt2, &mut b);
            // leaf part d2·Σ b_i x^i = Σ_i y_i x^i (the d2^{-1} of Eq. 3.2 cancels)
            for (r, &pos) in self.layout.pos_hint.iter().enumerate() {
                for h in 0..2 {
                    b[h * d2 + pos] = MODS[h].add(b[h * d2 + pos], qo.yh[i][r][h]);
                }
            }
            for (r, &pos) in self.layout.pos_t.iter().enumerate() {
                for h in 0..2 {
                    b[h * d2 + pos] = MODS[h].add(b[h * d2 + pos], yt[i][r][h]);
                }
            }
            let q21 = 1u64 << params.q2_1_tilde_bits;
            let q22 = 1u64 << params.q2_2_tilde_bits;
            let c0 = (0..d2)
                .map(|k| round_mod(self.ctx.crt.combine(a[k], a[d2 + k]), Q2, q21) as u32)
                .collect();
            let c1 = (0..self.layout.n_used)
                .map(|k| round_mod(self.ctx.crt.combine(b[k], b[d2 + k]), Q2, q22) as u32)
                .collect();
            out.push(Response {
                param_id: q.param_id(),
                seed_id: self.seed_id,
                c0,
                c1,
            });
        }
        tm.packing = qo.pack_secs + t2.elapsed().as_secs_f64();
        Ok((out, tm))
    }
}

/// The query-only part of steps 2–3 of one (batched) answer, with the time
/// each took.
struct QueryOnly {
    /// c2ᵀ·H per query: the hint rows' DoublePIR outputs.
    yh: Vec<Vec<[u32; 2]>>,
    /// Each query's W_b rows in Montgomery form.
    wbs: Vec<Vec<u32>>,
    /// The static subtrees' key-switching sums.
    sks: StaticKs,
    dp_secs: f64,
    pack_secs: f64,
}

/// Writes the RNS residues (both halves of `buf`, d entries each) of the
/// polynomial whose NCoeffs are the record block `src` (records as `i8`,
/// their representative in [−N/2, N/2)): coefficient i is
/// `src[d − 1 − i]`, and entries past the end of the block (a ragged last
/// block) are zero. Reversed iteration over the slice, so the loop
/// vectorises. (Hint and T rows: [`kernel::ntt_forward_reversed_i16`].)
#[inline]
fn reversed_record_residues(src: &[u8], buf: &mut [u32]) {
    let d = buf.len() / 2;
    let (r0, r1) = buf.split_at_mut(d);
    let pad = d - src.len();
    r0[..pad].fill(0);
    r1[..pad].fill(0);
    for ((o0, o1), &v) in r0[pad..]
        .iter_mut()
        .zip(&mut r1[pad..])
        .zip(src.iter().rev())
    {
        let v = v as i8 as i64;
        *o0 = small_residue(&MODS[0], v);
        *o1 = small_residue(&MODS[1], v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::params::{DbShape, SMALL, TOY};

    /// Entry (i, j) of NCyclicMat(g) (YPIR §2): α_{j−i} for j ≥ i, −α_{d+j−i} otherwise.
    fn ncyclic(g: &[i128], i: usize, j: usize) -> i128 {
        let d = g.len();
        if j >= i {
            g[j - i]
        } else {
            -g[d + j - i]
        }
    }

    /// `Server::memory` predicts what a built server holds, part by part,
    /// for ragged and tiled shapes, after setup and after a restart from
    /// the hint file.
    #[test]
    fn memory_estimate_equals_what_setup_allocates() {
        for (params, shape) in [
            (
                TOY,
                DbShape {
                    ell1: 150,
                    ell2: 300,
                },
            ),
            (
                TOY,
                DbShape {
                    ell1: 4096,
                    ell2: 64,
                },
            ),
            (
                SMALL,
                DbShape {
                    ell1: 700,
                    ell2: 1500,
                },
            ),
            (
                crate::params::TABLE1,
                DbShape {
                    ell1: 2048,
                    ell2: 2100,
                },
            ),
        ] {
            let db = Database::from_fn(shape, 8, |i, j| (i * 7 + j) as u8).unwrap();
            let seed = PublicSeed([9u8; 32]);
            let server = Server::setup(params, db.clone(), seed).unwrap();
            let mem = Server::memory(&params, shape);
            assert_eq!(mem.records, server.database().as_bytes().len());
            assert_eq!(mem.packing, server.pack.size_bytes(), "{}", params.name);
            assert_eq!(
                mem.after_setup(),
                mem.records + server.state_bytes(),
                "{} {shape:?}: {mem:?}",
                params.name
            );
            let mut hint = Vec::new();
            server.write_hint(&mut hint).unwrap();
            let ctx = Arc::new(Context::new(params));
            let restarted = Server::from_hint(ctx, db, seed, &hint).unwrap();
            assert_eq!(mem.after_load(), mem.records + restarted.state_bytes());
            assert!(mem.setup_peak() > mem.after_setup());
            let mut released = server;
            released.release_update_state();
            assert_eq!(mem.after_load(), mem.records + released.state_bytes());
            let (q, _, _) = crate::client::Client::new(params, shape, seed)
                .unwrap()
                .query_bit(8 * shape.records() as u64, 77)
                .unwrap();
            assert_eq!(
                released.answer(&q).unwrap().to_bytes(),
                restarted.answer(&q).unwrap().to_bytes()
            );
        }
        // The fixed part under Table 1: the packing digits dominate.
        let t1 = Server::memory(&crate::params::TABLE1, DbShape { ell1: 1, ell2: 1 });
        assert_eq!(t1.packing, 100_237_312, "{t1:?}");
    }

    #[test]
    fn ntt_hint_equals_naive_product() {
        // Ragged shape (not multiples of d1 = 64, d2 = 128): Remark 3.3.
        let params = TOY;
        let shape = DbShape {
            ell1: 150,
            ell2: 300,
        };
        let mut s = 5u64;
        let db = Database::from_fn(shape, 8, |_, _| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 33) as u8
        })
        .unwrap();
        let seed = PublicSeed([3u8; 32]);
        let ctx = Context::new(params);
        let (hint, _, _) = Server::compute_hint(&ctx, &db, &seed);
        let (d1, d2) = (params.d1, params.d2);
        let m1 = params.m1(shape);
        let a1: Vec<i128> = seed.expand_a1(m1, d1).iter().map(|&x| x as i128).collect();
        let kh = params.hint_rows();
        for j in 0..shape.ell2 {
            // naive A1·D[:, j] with A1 = [NCyclicMat(a1,1) | … ] truncated to ℓ1 columns
            let mut col = vec![0u32; d1];
            for (k, c) in col.iter_mut().enumerate() {
                let mut acc = 0i128;
                for i in 0..shape.ell1 {
                    let (b, ii) = (i / d1, i % d1);
                    let a = ncyclic(&a1[b * d1..(b + 1) * d1], k, ii);
                    acc += a * db.get(i, j).unwrap() as i8 as i128;
                }
                *c = round_pow2(acc.rem_euclid(1 << 32) as u64, 32, params.q1_tilde_bits) as u32;
            }
            let mut want = vec![0i16; kh];
            pack_chunks(&col, params.q1_tilde_bits, params.p_bits, &mut want);
            let got: Vec<i16> = (0..kh).map(|r| hint.get(r, j)).collect();
            assert_eq!(got, want, "column {j}");
        }

        // H2 = A2·Hᵀ: the CDKS input ã_r must be d2^{-1}·Σ_j α_{r,j} x^{−j}
        // with α_r = A2·(row r of H)ᵀ computed naively.
        let m2 = params.m2(shape);
        let a2_ntt = seed.expand_a2(m2, d2);
        let first3: Vec<i16> = (0..3 * shape.ell2)
            .map(|i| hint.get(i / shape.ell2, i % shape.ell2))
            .collect();
        let rows_a = Server::rows_a(
            &ctx,
            &DigitMatrix::from_row_major(3, shape.ell2, &first3),
            &Server::scaled_a2(&ctx, &a2_ntt),
        );
        for (r, ra) in rows_a.iter().enumerate() {
            let mut coeffs = ra.clone();
            rns::inverse(&ctx.ntt2, &mut coeffs);
            for h in 0..2 {
                let m = MODS[h];
                let mut a2c = a2_ntt.clone();
                // coefficient form of a2 mod this prime
                let polys: Vec<Vec<i128>> = (0..m2)
                    .map(|b| {
                        let mut v = a2c[b * 2 * d2 + h * d2..b * 2 * d2 + (h + 1) * d2].to_vec();
                        ctx.ntt2.t[h].inverse(&mut v);
                        v.iter().map(|&x| x as i128).collect()
                    })
                    .collect();
                a2c.clear();
                let dinv = m.inv(d2 as u32) as i128;
                for k in 0..d2 {
                    // α_{r,k} = Σ_j A2[k][j]·H[r][j]
                    let mut alpha = 0i128;
                    for j in 0..shape.ell2 {
                        alpha += ncyclic(&polys[j / d2], k, j % d2) * hint.get(r, j) as i128;
                    }
                    // coefficient of x^{−k}: x^0 for k = 0, −x^{d−k} otherwise
                    let (pos, sign) = if k == 0 { (0, 1) } else { (d2 - k, -1) };
                    let want = (sign * alpha * dinv).rem_euclid(m.p as i128) as u32;
                    assert_eq!(coeffs[h * d2 + pos], want, "row {r} k {k}");
                }
            }
        }
    }

    fn lcg_db(shape: DbShape, mut s: u64) -> Database {
        Database::from_fn(shape, 8, |_, _| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 33) as u8
        })
        .unwrap()
    }

    /// Ragged TOY shape (ℓ1 not a multiple of d1, ℓ2 not of d2, m2 = 3).
    const HINT_SHAPE: DbShape = DbShape {
        ell1: 150,
        ell2: 300,
    };

    fn hint_bytes(server: &Server) -> Vec<u8> {
        let mut f = Vec::new();
        server.write_hint(&mut f).unwrap();
        f
    }

    /// Same answers (byte for byte) and same extracted records.
    fn assert_same_answers(a: &Server, b: &Server, want: &Database, cells: &[(usize, usize)]) {
        let shape = want.shape();
        let client = crate::client::Client::new(a.ctx.params, shape, a.seed()).unwrap();
        for &(r, c) in cells {
            let (q, key) = client.query(r, c).unwrap();
            let qb = q.to_bytes();
            let ra = a.answer_bytes(&qb).unwrap();
            assert_eq!(ra, b.answer_bytes(&qb).unwrap(), "cell ({r}, {c})");
            let resp = Response::from_bytes(&ra).unwrap();
            assert_eq!(
                client.extract(&key, &resp).unwrap(),
                want.get(r, c).unwrap()
            );
        }
    }

    const CELLS: [(usize, usize); 5] = [(0, 0), (149, 299), (64, 128), (17, 3), (100, 257)];

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

    #[test]
    fn chunk_plan_equals_bit_stream() {
        let mut x = 0x9e3779b97f4a7c15u64;
        // (log q̃1, log p): the planned case log p ≤ log q̃1, including equal
        // widths and log q̃1 = 31, and the fallback log p > log q̃1
        for (w, pb) in [
            (28u32, 15u32),
            (28, 16),
            (20, 7),
            (31, 13),
            (9, 9),
            (12, 16),
            (5, 16),
        ] {
            for n in [1usize, 2, 3, 7, 64, 1024] {
                let ad: Vec<u32> = (0..n)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x as u32
                    })
                    .collect();
                let rounded: Vec<u32> = ad
                    .iter()
                    .map(|&h| round_pow2(h as u64, LOG_Q1, w) as u32)
                    .collect();
                let plan = ChunkPlan::new(n, w, pb);
                assert_eq!(plan.starts.is_empty(), pb > w);
                let k = plan.chunks;
                let mut want = vec![0i16; k];
                pack_chunks(&rounded, w, pb, &mut want);
                let mut scratch = Vec::new();
                for stride in [1usize, 3] {
                    let mut got = vec![i16::MIN; k * stride];
                    plan.pack(&ad, &mut scratch, &mut got, stride);
                    let got: Vec<i16> = got.iter().step_by(stride).copied().collect();
                    assert_eq!(got, want, "w={w} pb={pb} n={n} stride={stride}");
                }
            }
        }
    }

    #[test]
    fn chunk_packing_round_trip() {
        let vals: Vec<u32> = (0..64u32)
            .map(|i| i.wrapping_mul(2654435761u32) >> 4)
            .collect();
        let n = (64 * 28usize).div_ceil(15);
        let mut chunks = vec![0i16; n];
        pack_chunks(&vals, 28, 15, &mut chunks);
        let unsigned: Vec<u32> = chunks
            .iter()
            .map(|&c| (c as i32).rem_euclid(1 << 15) as u32)
            .collect();
        let mut back = vec![0u32; 64];
        unpack_chunks(&unsigned, 28, 15, &mut back);
        assert_eq!(back, vals);
        assert!(chunks
            .iter()
            .all(|&c| (-(1 << 14)..(1 << 14)).contains(&(c as i32))));
    }

    #[test]
    fn t_digits_round_trip() {
        let mut dg = [0i16; 2];
        for y in [
            0u32,
            1,
            (1 << 27) - 1,
            1 << 27,
            (1 << 27) + 1,
            (1 << 28) - 1,
            12345678,
        ] {
            t_digits(y, 28, 15, 2, &mut dg);
            let v = dg[0] as i64 + ((dg[1] as i64) << 15);
            assert_eq!(v.rem_euclid(1 << 28) as u32, y);
            assert!(dg
                .iter()
                .all(|&d| (-(1 << 14)..(1 << 14)).contains(&(d as i32))));
        }
    }
}
