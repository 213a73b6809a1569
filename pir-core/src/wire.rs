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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    /// Parameter-set id.
    pub param_id: u16,
    /// Id of the public seed the query was built for.
    pub seed_id: [u8; 8],
    /// Database shape the query was built for.
    pub shape: DbShape,
    /// The b rows of the packing key W_1..W_{log d2}, NTT form:
    /// (log d2)·t polynomials of 2·d2 residues (P0 half, then P1 half).
    pub pk_b: Vec<u32>,
    /// c1 ∈ Z_{2^32}^{ℓ1}.
    pub c1: Vec<u32>,
    /// c2 ∈ Z_{q2}^{ℓ2}: ℓ2 residues mod P0 then ℓ2 residues mod P1.
    pub c2: Vec<u32>,
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
    (count * bits as usize).div_ceil(8)
}

/// Exact serialized size of a query for `params` and `shape`.
pub fn query_len(params: &Params, shape: DbShape) -> usize {
    let pk_polys = params.log_d2() * params.gadget_len();
    QUERY_HEADER
        + 2 * pk_polys * section_bytes(params.d2, RESIDUE_BITS)
        + section_bytes(shape.ell1, 32)
        + 2 * section_bytes(shape.ell2, RESIDUE_BITS)
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
    /// Serializes (wire version 1).
    pub fn to_bytes(&self) -> Vec<u8> {
        let params =
            params::by_id(self.param_id).expect("queries are built from known parameter sets");
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
