//! A small reader and writer for the TLS presentation language.
//!
//! RFC 6962 defines its binary structures (`MerkleTreeLeaf`,
//! `TimestampedEntry`, `DigitallySigned`, ...) in the notation of RFC 5246 §4
//! (the same as RFC 8446 §3): big-endian fixed-width integers, fixed-size
//! arrays and variable-length vectors `opaque x<min..max>` prefixed by the
//! smallest big-endian length field that can hold `max`.
//!
//! [`Reader`] never panics: every read checks the remaining length and returns
//! [`Error::Truncated`]; [`Reader::finish`] rejects trailing bytes. [`Writer`]
//! refuses to encode a vector longer than its length prefix can express.

use crate::error::{Error, Result};

/// Maximum length of an `opaque x<0..2^8-1>` vector.
pub const MAX_U8_LEN: usize = (1 << 8) - 1;
/// Maximum length of an `opaque x<0..2^16-1>` vector.
pub const MAX_U16_LEN: usize = (1 << 16) - 1;
/// Maximum length of an `opaque x<0..2^24-1>` vector.
pub const MAX_U24_LEN: usize = (1 << 24) - 1;

/// Width of the length prefix of a variable-length vector (RFC 5246 §4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LengthPrefix {
    /// One byte: `<0..2^8-1>`.
    U8,
    /// Two bytes: `<0..2^16-1>`.
    U16,
    /// Three bytes: `<0..2^24-1>`.
    U24,
}

impl LengthPrefix {
    /// The largest length this prefix can express.
    pub const fn max_len(self) -> usize {
        match self {
            LengthPrefix::U8 => MAX_U8_LEN,
            LengthPrefix::U16 => MAX_U16_LEN,
            LengthPrefix::U24 => MAX_U24_LEN,
        }
    }

    /// Size of the prefix in bytes.
    pub const fn width(self) -> usize {
        match self {
            LengthPrefix::U8 => 1,
            LengthPrefix::U16 => 2,
            LengthPrefix::U24 => 3,
        }
    }
}

/// A cursor over a byte slice that decodes TLS-encoded fields.
///
/// Every method takes a `what` label naming the field; it appears in errors.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Starts reading at the beginning of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Number of bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// True when every byte has been consumed.
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// Offset of the next byte to be read, from the start of the input.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// The unconsumed bytes, without consuming them.
    pub fn rest(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or(&[])
    }

    /// Consumes exactly `n` bytes.
    pub fn read_bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8]> {
        let available = self.remaining();
        if n > available {
            return Err(Error::Truncated {
                what,
                needed: n,
                available,
            });
        }
        let end = self.pos + n;
        let out = self.buf.get(self.pos..end).ok_or(Error::Truncated {
            what,
            needed: n,
            available,
        })?;
        self.pos = end;
        Ok(out)
    }

    /// Consumes a fixed-size array such as `opaque issuer_key_hash[32]`.
    pub fn read_array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N]> {
        let bytes = self.read_bytes(N, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    /// Reads a big-endian unsigned integer of `width` (1..=8) bytes.
    fn read_uint(&mut self, width: usize, what: &'static str) -> Result<u64> {
        debug_assert!((1..=8).contains(&width));
        let bytes = self.read_bytes(width, what)?;
        Ok(bytes.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    /// Reads a `uint8`.
    pub fn read_u8(&mut self, what: &'static str) -> Result<u8> {
        let [b] = self.read_array::<1>(what)?;
        Ok(b)
    }

    /// Reads a big-endian `uint16`.
    pub fn read_u16(&mut self, what: &'static str) -> Result<u16> {
        Ok(u16::from_be_bytes(self.read_array::<2>(what)?))
    }

    /// Reads a big-endian `uint24` (returned widened to `u32`).
    pub fn read_u24(&mut self, what: &'static str) -> Result<u32> {
        // Three bytes always fit in a u32.
        Ok(self.read_uint(3, what)? as u32)
    }

    /// Reads a big-endian `uint40`, the `LeafIndex` of c2sp.org/static-ct-api.
    pub fn read_u40(&mut self, what: &'static str) -> Result<u64> {
        self.read_uint(5, what)
    }

    /// Reads a big-endian `uint64`.
    pub fn read_u64(&mut self, what: &'static str) -> Result<u64> {
        Ok(u64::from_be_bytes(self.read_array::<8>(what)?))
    }

    /// Reads a length prefix of the given width.
    fn read_len(&mut self, prefix: LengthPrefix, what: &'static str) -> Result<usize> {
        // At most three bytes: always fits in usize on supported targets.
        Ok(self.read_uint(prefix.width(), what)? as usize)
    }

    /// Reads `opaque x<min..max>` with a length prefix of width `prefix`.
    ///
    /// `max` is the caller's cap; it may be tighter than what the prefix can
    /// express (a cap above the prefix's range is harmless). Lengths outside
    /// `min..=max` are rejected before any byte of the body is consumed.
    pub fn read_opaque_bounded(
        &mut self,
        prefix: LengthPrefix,
        min: usize,
        max: usize,
        what: &'static str,
    ) -> Result<&'a [u8]> {
        let len = self.read_len(prefix, what)?;
        if len > max {
            return Err(Error::TooLarge { what, len, max });
        }
        if len < min {
            return Err(Error::TooSmall { what, len, min });
        }
        self.read_bytes(len, what)
    }

    /// Reads `opaque x<0..2^8-1>`.
    pub fn read_opaque8(&mut self, what: &'static str) -> Result<&'a [u8]> {
        self.read_opaque_bounded(LengthPrefix::U8, 0, MAX_U8_LEN, what)
    }

    /// Reads `opaque x<0..2^16-1>`.
    pub fn read_opaque16(&mut self, what: &'static str) -> Result<&'a [u8]> {
        self.read_opaque_bounded(LengthPrefix::U16, 0, MAX_U16_LEN, what)
    }

    /// Reads `opaque x<0..2^24-1>`.
    pub fn read_opaque24(&mut self, what: &'static str) -> Result<&'a [u8]> {
        self.read_opaque_bounded(LengthPrefix::U24, 0, MAX_U24_LEN, what)
    }

    /// Checks that every byte was consumed; `what` names the whole structure.
    pub fn finish(&self, what: &'static str) -> Result<()> {
        match self.remaining() {
            0 => Ok(()),
            count => Err(Error::TrailingBytes { what, count }),
        }
    }
}

/// Builds a TLS-encoded byte string.
#[derive(Clone, Debug, Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Self {
        Writer::default()
    }

    /// An empty writer with room for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Self {
        Writer {
            buf: Vec::with_capacity(capacity),
        }
    }

    /// Appends raw bytes (a fixed-size array or an already-encoded struct).
    pub fn put_bytes(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Appends a `uint8`.
    pub fn put_u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    /// Appends a big-endian `uint16`.
    pub fn put_u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// Appends a big-endian `uint24`; fails if `v` does not fit in 24 bits.
    pub fn put_u24(&mut self, v: u32, what: &'static str) -> Result<()> {
        if v > 0x00ff_ffff {
            return Err(Error::TooLarge {
                what,
                len: v as usize,
                max: MAX_U24_LEN,
            });
        }
        self.buf.extend_from_slice(&v.to_be_bytes()[1..]);
        Ok(())
    }

    /// Appends a big-endian `uint40`; fails if `v` does not fit in 40 bits.
    pub fn put_u40(&mut self, v: u64, what: &'static str) -> Result<()> {
        if v >> 40 != 0 {
            return Err(Error::InvalidArgument(format!(
                "{what}: {v} does not fit in a uint40"
            )));
        }
        self.buf.extend_from_slice(&v.to_be_bytes()[3..]);
        Ok(())
    }

    /// Appends a big-endian `uint64`.
    pub fn put_u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// Appends `opaque x<0..max>` with a length prefix of width `prefix`.
    pub fn put_opaque(
        &mut self,
        prefix: LengthPrefix,
        data: &[u8],
        what: &'static str,
    ) -> Result<()> {
        let len = data.len();
        let max = prefix.max_len();
        if len > max {
            return Err(Error::TooLarge { what, len, max });
        }
        let be = (len as u64).to_be_bytes();
        self.buf.extend_from_slice(&be[8 - prefix.width()..]);
        self.buf.extend_from_slice(data);
        Ok(())
    }

    /// Appends `opaque x<0..2^8-1>`.
    pub fn put_opaque8(&mut self, data: &[u8], what: &'static str) -> Result<()> {
        self.put_opaque(LengthPrefix::U8, data, what)
    }

    /// Appends `opaque x<0..2^16-1>`.
    pub fn put_opaque16(&mut self, data: &[u8], what: &'static str) -> Result<()> {
        self.put_opaque(LengthPrefix::U16, data, what)
    }

    /// Appends `opaque x<0..2^24-1>`.
    pub fn put_opaque24(&mut self, data: &[u8], what: &'static str) -> Result<()> {
        self.put_opaque(LengthPrefix::U24, data, what)
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// True when nothing has been written.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Borrows the encoding.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Returns the encoding.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_round_trip() {
        let mut w = Writer::new();
        w.put_u8(0xab);
        w.put_u16(0x1234);
        w.put_u24(0x0056_789a, "u24").unwrap();
        w.put_u40(0x00ff_0102_0304, "u40").unwrap();
        w.put_u64(0x0102_0304_0506_0708);
        let bytes = w.into_bytes();
        assert_eq!(bytes.len(), 1 + 2 + 3 + 5 + 8);
        let mut r = Reader::new(&bytes);
        assert_eq!(r.read_u8("a").unwrap(), 0xab);
        assert_eq!(r.read_u16("b").unwrap(), 0x1234);
        assert_eq!(r.read_u24("c").unwrap(), 0x0056_789a);
        assert_eq!(r.read_u40("d").unwrap(), 0x00ff_0102_0304);
        assert_eq!(r.read_u64("e").unwrap(), 0x0102_0304_0506_0708);
        r.finish("all").unwrap();
    }

    #[test]
    fn opaque_round_trip_all_widths() {
        let data = vec![7u8; 300];
        let mut w = Writer::new();
        w.put_opaque8(&data[..255], "o8").unwrap();
        w.put_opaque16(&data, "o16").unwrap();
        w.put_opaque24(&data[..1], "o24").unwrap();
        w.put_opaque16(&[], "empty").unwrap();
        let bytes = w.into_bytes();
        let mut r = Reader::new(&bytes);
        assert_eq!(r.read_opaque8("o8").unwrap().len(), 255);
        assert_eq!(r.read_opaque16("o16").unwrap(), &data[..]);
        assert_eq!(r.read_opaque24("o24").unwrap(), &data[..1]);
        assert_eq!(r.read_opaque16("empty").unwrap(), &[] as &[u8]);
        assert!(r.is_empty());
    }

    #[test]
    fn truncated_integer() {
        let mut r = Reader::new(&[1, 2, 3]);
        match r.read_u64("ts") {
            Err(Error::Truncated {
                what: "ts",
                needed: 8,
                available: 3,
            }) => {}
            other => panic!("unexpected {other:?}"),
        }
        // A failed read consumes nothing.
        assert_eq!(r.remaining(), 3);
        assert!(matches!(r.read_u24("u24"), Ok(0x010203)));
        assert!(matches!(r.read_u8("x"), Err(Error::Truncated { .. })));
    }

    #[test]
    fn truncated_opaque_body_and_prefix() {
        // Prefix says 5 bytes, only 2 follow.
        let mut r = Reader::new(&[0, 5, 1, 2]);
        assert!(matches!(
            r.read_opaque16("body"),
            Err(Error::Truncated {
                needed: 5,
                available: 2,
                ..
            })
        ));
        // The prefix itself is cut.
        let mut r = Reader::new(&[0, 0]);
        assert!(matches!(
            r.read_opaque24("prefix"),
            Err(Error::Truncated { needed: 3, .. })
        ));
    }

    #[test]
    fn trailing_bytes_rejected() {
        let mut r = Reader::new(&[0, 1, 2]);
        r.read_u16("x").unwrap();
        assert!(matches!(
            r.finish("thing"),
            Err(Error::TrailingBytes {
                what: "thing",
                count: 1
            })
        ));
    }

    #[test]
    fn bounded_opaque_caps() {
        let mut r = Reader::new(&[0, 0, 4, 1, 2, 3, 4]);
        assert!(matches!(
            r.clone()
                .read_opaque_bounded(LengthPrefix::U24, 0, 3, "capped"),
            Err(Error::TooLarge { len: 4, max: 3, .. })
        ));
        assert!(matches!(
            r.clone()
                .read_opaque_bounded(LengthPrefix::U24, 5, 10, "min"),
            Err(Error::TooSmall { len: 4, min: 5, .. })
        ));
        assert_eq!(
            r.read_opaque_bounded(LengthPrefix::U24, 1, 4, "ok")
                .unwrap(),
            &[1, 2, 3, 4]
        );
    }

    #[test]
    fn writer_rejects_oversize() {
        let mut w = Writer::new();
        assert!(matches!(
            w.put_opaque8(&[0u8; 256], "o8"),
            Err(Error::TooLarge { max: 255, .. })
        ));
        assert!(matches!(
            w.put_opaque16(&vec![0u8; 65536], "o16"),
            Err(Error::TooLarge { max: 65535, .. })
        ));
        assert!(w.put_u24(1 << 24, "u24").is_err());
        assert!(w.put_u40(1 << 40, "u40").is_err());
        assert!(w.is_empty());
    }

    #[test]
    fn rest_and_position() {
        let mut r = Reader::new(&[9, 8, 7]);
        r.read_u8("a").unwrap();
        assert_eq!(r.position(), 1);
        assert_eq!(r.rest(), &[8, 7]);
    }
}
