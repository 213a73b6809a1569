//! Wire format of queries and responses (version 1), specified byte by byte
//! in `docs/wire-format.md`.
//!
//! Every element is packed to its bit width, least-significant bit first,
//! into a little-endian bit stream; each section starts on a byte boundary
//! and its padding bits must be zero. Parsing checks the magic, version,
//! parameter set, the exact length (no truncation, no trailing bytes) and
//! that every element is reduced; it never panics.

use crate::arith::{P0, P1};
use crate::error::{Error, Result};
use crate::params::{self, DbShape, Params};

/// Current wire version.
pub const VERSION: u8 = 1;
/// Magic of a query.
pub const QUERY_MAGIC: [u8; 3] = *b"YPQ";
/// Magic of a response.
pub const RESPONSE_MAGIC: [u8; 3] = *b"YPR";
/// Bits of one residue mod P0 or P1.
pub const RESIDUE_BITS: u32 = 28;
/// Query header length in bytes.
pub const QUERY_HEADER: usize = 3 + 1 + 2 + 8 + 4 + 4;
/// Response header length in bytes.
pub const RESPONSE_HEADER: usize = 3 + 1 + 2 + 8;

/// A YPIR query q = (pk, c1, c2) (Construction 3.1), as the server sees it.
///
/// Built by [`crate::client::Client`], parsed by [`Query::from_bytes`] or
/// assembled with [`Query::new`]; all three uphold the same invariants: a
/// known parameter set, a shape of 1..=2^18 per side, section lengths that
/// match both, and every residue below its prime. So every `Query`
/// serializes, and the server only has to check that it was built for its
/// database (parameter set, seed, shape).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    param_id: u16,
    seed_id: [u8; 8],
    shape: DbShape,
    pk_b: Vec<u32>,
    c1: Vec<u32>,
    c2: Vec<u32>,
}

/// A YPIR response: one RLWE ciphertext after split modulus switching
/// (Answer step 4), c0 over q̃_{2,1} and the first `n_used` coefficients of
/// c1 over q̃_{2,2} (the rest carry no data and are not sent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// Parameter-set id.
    pub param_id: u16,
    /// Id of the public seed of the database that answered.
    pub seed_id: [u8; 8],
    /// c0 ∈ Z_{q̃_{2,1}}^{d2}.
    pub c0: Vec<u32>,
    /// c1 ∈ Z_{q̃_{2,2}}^{n_used}.
    pub c1: Vec<u32>,
}

struct BitWriter {
    out: Vec<u8>,
    acc: u64,
    nbits: u32,
}

impl BitWriter {
    fn new(cap: usize) -> Self {
        BitWriter {
            out: Vec::with_capacity(cap),
            acc: 0,
            nbits: 0,
        }
    }
    #[inline]
    fn put(&mut self, v: u64, bits: u32) {
        debug_assert!(bits <= 32 && (bits == 64 || v >> bits == 0));
        self.acc |= v << self.nbits;
        self.nbits += bits;
        while self.nbits >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.nbits -= 8;
        }
    }
    fn align(&mut self) {
        if self.nbits > 0 {
            self.out.push(self.acc as u8);
            self.acc = 0;
            self.nbits = 0;
        }
    }
}

struct BitReader<'a> {
    buf: &'a [u8],
    pos: usize,
    acc: u64,
    nbits: u32,
}

impl<'a> BitReader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        BitReader {
            buf,
            pos: 0,
            acc: 0,
            nbits: 0,
        }
    }
    /// Caller has checked the total length, so running out is a bug in the
    /// size computation; it is reported as truncation rather than a panic.
    #[inline]
    fn get(&mut self, bits: u32) -> Result<u64> {
        while self.nbits < bits {
            let b = *self.buf.get(self.pos).ok_or(Error::Truncated {
                needed: self.pos + 1,
                have: self.buf.len(),
            })?;
            self.acc |= (b as u64) << self.nbits;
            self.pos += 1;
            self.nbits += 8;
        }
        let v = self.acc & ((1u64 << bits) - 1);
        self.acc >>= bits;
        self.nbits -= bits;
        Ok(v)
    }
    /// Ends a section: remaining padding bits must be zero.
    fn align(&mut self, field: &'static str) -> Result<()> {
        if self.acc != 0 {
            return Err(Error::NonZeroPadding(field));
        }
        self.acc = 0;
        self.nbits = 0;
        Ok(())
    }
}

fn section_bytes(count: usize, bits: u32) -> usize {
    count.saturating_mul(bits as usize).div_ceil(8)
}

/// Exact serialized size of a query for `params` and `shape`. The shape
/// may come from untrusted input (a manifest): one no parameter set accepts
/// (ℓ1 or ℓ2 above [`params::MAX_DIM`]) gets an oversized length (the
/// arithmetic saturates) instead of overflowing.
pub fn query_len(params: &Params, shape: DbShape) -> usize {
    let pk_polys = params.log_d2() * params.gadget_len();
    (QUERY_HEADER + 2 * pk_polys * section_bytes(params.d2, RESIDUE_BITS))
        .saturating_add(section_bytes(shape.ell1, 32))
        .saturating_add(section_bytes(shape.ell2, RESIDUE_BITS).saturating_mul(2))
}

/// Exact serialized size of a response for `params`.
pub fn response_len(params: &Params) -> usize {
    RESPONSE_HEADER
        + section_bytes(params.d2, params.q2_1_tilde_bits)
        + section_bytes(params.layout().n_used, params.q2_2_tilde_bits)
}

fn put_residues(w: &mut BitWriter, poly: &[u32]) {
    // poly = [P0 half | P1 half]; each half is its own section
    let n = poly.len() / 2;
    for half in [&poly[..n], &poly[n..]] {
        for &x in half {
            w.put(x as u64, RESIDUE_BITS);
        }
        w.align();
    }
}

fn get_residues(
    r: &mut BitReader<'_>,
    n: usize,
    out: &mut Vec<u32>,
    field: &'static str,
) -> Result<()> {
    for (h, p) in [P0, P1].iter().enumerate() {
        for i in 0..n {
            let x = r.get(RESIDUE_BITS)? as u32;
            if x >= *p {
                return Err(Error::OutOfRange {
                    field,
                    index: h * n + i,
                });
            }
            out.push(x);
        }
        r.align(field)?;
    }
    Ok(())
}

/// Checks polynomials of `2·n` residues (P0 half, then P1 half) laid end
/// to end in `v` (`v.len()` a multiple of 2n).
fn check_residues(v: &[u32], n: usize, field: &'static str) -> Result<()> {
    for (index, &x) in v.iter().enumerate() {
        let p = if index % (2 * n) < n { P0 } else { P1 };
        if x >= p {
            return Err(Error::OutOfRange { field, index });
        }
    }
    Ok(())
}

fn check_len(buf: &[u8], want: usize) -> Result<()> {
    use std::cmp::Ordering::*;
    match buf.len().cmp(&want) {
        Less => Err(Error::Truncated {
            needed: want,
            have: buf.len(),
        }),
        Greater => Err(Error::TrailingBytes(buf.len() - want)),
        Equal => Ok(()),
    }
}

/// Checks magic, version and length of a header; returns the parameter set
/// and seed id (bytes 4..14, shared by queries and responses).
fn parse_common_header(
    buf: &[u8],
    magic: [u8; 3],
    header: usize,
    kind: &'static str,
) -> Result<(Params, [u8; 8])> {
    if buf.len() < header {
        return Err(Error::Truncated {
            needed: header,
            have: buf.len(),
        });
    }
    if buf[0..3] != magic {
        return Err(Error::BadMagic(kind));
    }
    if buf[3] != VERSION {
        return Err(Error::UnsupportedVersion(buf[3]));
    }
    let params = params::by_id(u16::from_le_bytes([buf[4], buf[5]]))?;
    let mut seed_id = [0u8; 8];
    seed_id.copy_from_slice(&buf[6..14]);
    Ok((params, seed_id))
}

impl Query {
    /// A query from its parts, checked like [`Query::from_bytes`] checks
    /// bytes: `param_id` must name a known parameter set (else
    /// [`Error::UnknownParamSet`]) and `shape` have 1..=2^18 rows and
    /// columns ([`Error::ShapeTooLarge`]); `pk_b` must hold the
    /// (log d2)·t packing-key polynomials of 2·d2 residues, `c1` ℓ1 words
    /// and `c2` 2·ℓ2 residues ([`Error::LengthMismatch`], checked before
    /// any residue is read); residues must be below P0 in each first half
    /// and below P1 in each second half ([`Error::OutOfRange`], index within
    /// the field).
    pub fn new(
        param_id: u16,
        seed_id: [u8; 8],
        shape: DbShape,
        pk_b: Vec<u32>,
        c1: Vec<u32>,
        c2: Vec<u32>,
    ) -> Result<Query> {
        let params = params::by_id(param_id)?;
        let DbShape { ell1, ell2 } = shape;
        if ell1 == 0 || ell2 == 0 || ell1 > params::MAX_DIM || ell2 > params::MAX_DIM {
            return Err(Error::ShapeTooLarge { ell1, ell2 });
        }
        let pk_len = params.log_d2() * params.gadget_len() * 2 * params.d2;
        if pk_b.len() != pk_len || c1.len() != ell1 || c2.len() != 2 * ell2 {
            return Err(Error::LengthMismatch {
                expected: pk_len + ell1 + 2 * ell2,
                got: pk_b.len() + c1.len() + c2.len(),
            });
        }
        check_residues(&pk_b, params.d2, "pk")?;
        check_residues(&c2, ell2, "c2")?;
        Ok(Query {
            param_id,
            seed_id,
            shape,
            pk_b,
            c1,
            c2,
        })
    }

    /// Parameter-set id.
    pub fn param_id(&self) -> u16 {
        self.param_id
    }

    /// Id of the public seed the query was built for.
    pub fn seed_id(&self) -> [u8; 8] {
        self.seed_id
    }

    /// Database shape the query was built for.
    pub fn shape(&self) -> DbShape {
        self.shape
    }

    /// The b rows of the packing key W_1..W_{log d2}, NTT form:
    /// (log d2)·t polynomials of 2·d2 residues (P0 half, then P1 half).
    pub fn pk_b(&self) -> &[u32] {
        &self.pk_b
    }

    /// c1 ∈ Z_{2^32}^{ℓ1}.
    pub fn c1(&self) -> &[u32] {
        &self.c1
    }

    /// c2 ∈ Z_{q2}^{ℓ2}: ℓ2 residues mod P0 then ℓ2 residues mod P1.
    pub fn c2(&self) -> &[u32] {
        &self.c2
    }

    /// Serializes (wire version 1).
    pub fn to_bytes(&self) -> Vec<u8> {
        let params = params::by_id(self.param_id).expect("Query::new and from_bytes check the id");
        let mut w = BitWriter::new(query_len(&params, self.shape));
        w.out.extend_from_slice(&QUERY_MAGIC);
        w.out.push(VERSION);
        w.out.extend_from_slice(&self.param_id.to_le_bytes());
        w.out.extend_from_slice(&self.seed_id);
        w.out
            .extend_from_slice(&(self.shape.ell1 as u32).to_le_bytes());
        w.out
            .extend_from_slice(&(self.shape.ell2 as u32).to_le_bytes());
        let n = 2 * params.d2;
        for poly in self.pk_b.chunks(n) {
            put_residues(&mut w, poly);
        }
        for &c in &self.c1 {
            w.put(c as u64, 32);
        }
        w.align();
        put_residues(&mut w, &self.c2);
        w.out
    }

    /// Parses untrusted bytes. Only the header is trusted enough to size the
    /// rest; the shape must be one the params accept (≤ 2^18 per side), so a
    /// query is at most a few MB before any allocation.
    pub fn from_bytes(buf: &[u8]) -> Result<Query> {
        let (params, seed_id) = parse_common_header(buf, QUERY_MAGIC, QUERY_HEADER, "query")?;
        let param_id = params.id;
        let ell1 = u32::from_le_bytes([buf[14], buf[15], buf[16], buf[17]]) as usize;
        let ell2 = u32::from_le_bytes([buf[18], buf[19], buf[20], buf[21]]) as usize;
        let shape = DbShape { ell1, ell2 };
        if ell1 == 0 || ell2 == 0 || ell1 > params::MAX_DIM || ell2 > params::MAX_DIM {
            return Err(Error::ShapeTooLarge { ell1, ell2 });
        }
        check_len(buf, query_len(&params, shape))?;
        let mut r = BitReader::new(&buf[QUERY_HEADER..]);
        let pk_polys = params.log_d2() * params.gadget_len();
        let mut pk_b = Vec::with_capacity(pk_polys * 2 * params.d2);
        for _ in 0..pk_polys {
            get_residues(&mut r, params.d2, &mut pk_b, "pk")?;
        }
        let mut c1 = Vec::with_capacity(ell1);
        for _ in 0..ell1 {
            c1.push(r.get(32)? as u32);
        }
        r.align("c1")?;
        let mut c2 = Vec::with_capacity(2 * ell2);
        get_residues(&mut r, ell2, &mut c2, "c2")?;
        Ok(Query {
            param_id,
            seed_id,
            shape,
            pk_b,
            c1,
            c2,
        })
    }
}

impl Response {
    /// Serializes (wire version 1).
    pub fn to_bytes(&self) -> Vec<u8> {
        let params =
            params::by_id(self.param_id).expect("responses are built from known parameter sets");
        let mut w = BitWriter::new(response_len(&params));
        w.out.extend_from_slice(&RESPONSE_MAGIC);
        w.out.push(VERSION);
        w.out.extend_from_slice(&self.param_id.to_le_bytes());
        w.out.extend_from_slice(&self.seed_id);
        for &c in &self.c0 {
            w.put(c as u64, params.q2_1_tilde_bits);
        }
        w.align();
        for &c in &self.c1 {
            w.put(c as u64, params.q2_2_tilde_bits);
        }
        w.align();
        w.out
    }

    /// Parses untrusted bytes.
    pub fn from_bytes(buf: &[u8]) -> Result<Response> {
        let (params, seed_id) =
            parse_common_header(buf, RESPONSE_MAGIC, RESPONSE_HEADER, "response")?;
        let param_id = params.id;
        check_len(buf, response_len(&params))?;
        let mut r = BitReader::new(&buf[RESPONSE_HEADER..]);
        // Every bit pattern of the field width is a valid element (the
        // moduli are powers of two), so only padding needs checking.
        let mut c0 = Vec::with_capacity(params.d2);
        for _ in 0..params.d2 {
            c0.push(r.get(params.q2_1_tilde_bits)? as u32);
        }
        r.align("c0")?;
        let n_used = params.layout().n_used;
        let mut c1 = Vec::with_capacity(n_used);
        for _ in 0..n_used {
            c1.push(r.get(params.q2_2_tilde_bits)? as u32);
        }
        r.align("c1")?;
        Ok(Response {
            param_id,
            seed_id,
            c0,
            c1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::TOY;

    /// Parts of a TOY query for `shape`: every residue the largest its prime
    /// allows, c1 all ones.
    fn parts(shape: DbShape) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
        let halves = |n: usize, polys: usize| -> Vec<u32> {
            (0..polys)
                .flat_map(|_| [vec![P0 - 1; n], vec![P1 - 1; n]].concat())
                .collect()
        };
        let pk_b = halves(TOY.d2, TOY.log_d2() * TOY.gadget_len());
        (pk_b, vec![u32::MAX; shape.ell1], halves(shape.ell2, 1))
    }

    /// A manifest may name any shape; sizing a query for one no parameter
    /// set accepts must not overflow (the fuzz target `manifest` found
    /// ℓ1 = 2^60 panicking in the client's size check).
    #[test]
    fn query_len_saturates_for_shapes_beyond_max_dim() {
        let max = DbShape {
            ell1: params::MAX_DIM,
            ell2: params::MAX_DIM,
        };
        for shape in [
            DbShape {
                ell1: 1 << 60,
                ell2: 1,
            },
            DbShape {
                ell1: 1,
                ell2: usize::MAX,
            },
            DbShape {
                ell1: usize::MAX,
                ell2: usize::MAX,
            },
        ] {
            let len = query_len(&TOY, shape);
            assert!(len > query_len(&TOY, max), "{shape:?}: {len}");
        }
    }

    #[test]
    fn new_accepts_valid_parts_and_round_trips() {
        let shape = DbShape { ell1: 3, ell2: 5 };
        let (pk_b, c1, c2) = parts(shape);
        let q = Query::new(TOY.id, [7; 8], shape, pk_b.clone(), c1.clone(), c2.clone()).unwrap();
        assert_eq!(
            (q.param_id(), q.seed_id(), q.shape()),
            (TOY.id, [7; 8], shape)
        );
        assert_eq!((q.pk_b(), q.c1(), q.c2()), (&pk_b[..], &c1[..], &c2[..]));
        let bytes = q.to_bytes();
        assert_eq!(bytes.len(), query_len(&TOY, shape));
        assert_eq!(Query::from_bytes(&bytes).unwrap(), q);
    }

    #[test]
    fn new_rejects_what_the_parser_rejects() {
        let shape = DbShape { ell1: 3, ell2: 5 };
        let (pk_b, c1, c2) = parts(shape);
        let new = |id, shape, pk_b: &[u32], c1: &[u32], c2: &[u32]| {
            Query::new(id, [0; 8], shape, pk_b.to_vec(), c1.to_vec(), c2.to_vec())
        };
        assert!(matches!(
            new(0x7777, shape, &pk_b, &c1, &c2),
            Err(Error::UnknownParamSet(0x7777))
        ));
        for bad in [
            DbShape { ell1: 0, ell2: 5 },
            DbShape { ell1: 3, ell2: 0 },
            DbShape {
                ell1: params::MAX_DIM + 1,
                ell2: 5,
            },
        ] {
            assert!(matches!(
                new(TOY.id, bad, &pk_b, &c1, &c2),
                Err(Error::ShapeTooLarge { .. })
            ));
        }
        let total = pk_b.len() + c1.len() + c2.len();
        for (p, a, b) in [
            (&pk_b[1..], &c1[..], &c2[..]),
            (&pk_b[..], &c1[1..], &c2[..]),
            (&pk_b[..], &c1[..], &c2[1..]),
        ] {
            assert!(matches!(
                new(TOY.id, shape, p, a, b),
                Err(Error::LengthMismatch { expected, got }) if expected == total && got == total - 1
            ));
        }
        // a residue at its prime: P0 in a first half, P1 in a second half
        let n = TOY.d2;
        for (field, index, value) in [
            ("pk", 0, P0),
            ("pk", n - 1, P0),
            ("pk", n, P1),
            ("pk", 2 * n + 1, P0),
            ("pk", pk_b.len() - 1, P1),
            ("c2", 0, P0),
            ("c2", 4, P0),
            ("c2", 5, P1),
            ("c2", 9, P1),
        ] {
            let (mut p, mut b) = (pk_b.clone(), c2.clone());
            match field {
                "pk" => p[index] = value,
                _ => b[index] = value,
            }
            let r = new(TOY.id, shape, &p, &c1, &b);
            assert!(
                matches!(r, Err(Error::OutOfRange { field: f, index: i }) if f == field && i == index),
                "{field}[{index}] = {value}: {r:?}"
            );
        }
    }
}
