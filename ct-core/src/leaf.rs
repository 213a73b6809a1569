//! Log entries: RFC 6962 §3.4 `MerkleTreeLeaf` and c2sp.org/static-ct-api
//! `TileLeaf`.
//!
//! ```text
//! enum { v1(0), (255) } Version;                                 RFC 6962 §3.2
//! enum { timestamped_entry(0), (255) } MerkleLeafType;           RFC 6962 §3.4
//! enum { x509_entry(0), precert_entry(1), (65535) } LogEntryType; RFC 6962 §3.1
//!
//! opaque ASN.1Cert<1..2^24-1>;
//! struct {
//!     opaque issuer_key_hash[32];
//!     TBSCertificate tbs_certificate;          // opaque <1..2^24-1>
//! } PreCert;
//!
//! struct {
//!     uint64 timestamp;
//!     LogEntryType entry_type;
//!     select(entry_type) {
//!         case x509_entry: ASN.1Cert;
//!         case precert_entry: PreCert;
//!     } signed_entry;
//!     CtExtensions extensions;                 // opaque <0..2^16-1>
//! } TimestampedEntry;
//!
//! struct {
//!     Version version;
//!     MerkleLeafType leaf_type;
//!     select (leaf_type) { case timestamped_entry: TimestampedEntry; }
//! } MerkleTreeLeaf;
//! ```
//!
//! c2sp.org/static-ct-api "Log entries" serves entries in data tiles, each a
//! sequence of
//!
//! ```text
//! struct {
//!     TimestampedEntry timestamped_entry;
//!     select (entry_type) {
//!         case x509_entry: Empty;
//!         case precert_entry: ASN.1Cert pre_certificate;
//!     };
//!     Fingerprint certificate_chain<0..2^16-1>;   // opaque Fingerprint[32]
//! } TileLeaf;
//! ```
//!
//! and gives `CtExtensions` a structure ("SCT Extension"): a list of
//! `Extension { uint8 extension_type; opaque extension_data<0..2^16-1>; }`
//! where type 0 is `leaf_index`, a big-endian `uint40`.

use std::borrow::Cow;
use std::io::Read;

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::ids::LeafHash;
use crate::merkle::TileId;
use crate::merkle::{LEAF_PREFIX, TILE_WIDTH};
use crate::tls::{LengthPrefix, Reader, Writer, MAX_U16_LEN, MAX_U24_LEN};

/// `Version.v1` (RFC 6962 §3.2).
pub const VERSION_V1: u8 = 0;
/// `MerkleLeafType.timestamped_entry` (RFC 6962 §3.4).
pub const LEAF_TYPE_TIMESTAMPED_ENTRY: u8 = 0;
/// `ExtensionType.leaf_index` (c2sp.org/static-ct-api "SCT Extension").
pub const EXTENSION_LEAF_INDEX: u8 = 0;
/// Length of a `LeafIndex` (`uint40`).
pub const LEAF_INDEX_LEN: usize = 5;
/// Largest value a `uint40` leaf index can hold.
pub const MAX_LEAF_INDEX: u64 = (1 << 40) - 1;

/// Largest certificate or TBSCertificate accepted (`<1..2^24-1>`).
pub const MAX_CERT_LEN: usize = MAX_U24_LEN;
/// Largest `CtExtensions` accepted (`<0..2^16-1>`).
pub const MAX_EXTENSIONS_LEN: usize = MAX_U16_LEN;
/// Largest number of chain fingerprints in a `TileLeaf` (`<0..2^16-1>` bytes
/// of 32-byte hashes).
pub const MAX_CHAIN_LEN: usize = MAX_U16_LEN / 32;

/// Cap on the size of a data tile, compressed or not, and on the output of
/// decompressing one. Real tiles are well under 2 MiB (256 entries of a few
/// KiB); the cap leaves room for unusually large certificates while bounding
/// memory use on hostile input.
pub const MAX_DATA_TILE_SIZE: usize = 32 << 20;
/// Maximum number of entries in one data tile (c2sp.org/tlog-tiles).
pub const MAX_DATA_TILE_ENTRIES: usize = TILE_WIDTH as usize;
/// The two magic bytes that start a gzip stream (RFC 1952 §2.3.1).
pub const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// `LogEntryType` (RFC 6962 §3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LogEntryType {
    /// `x509_entry(0)`: a final certificate.
    X509 = 0,
    /// `precert_entry(1)`: a precertificate's TBSCertificate.
    Precert = 1,
}

impl LogEntryType {
    /// The wire value.
    pub fn to_u16(self) -> u16 {
        self as u16
    }

    /// Parses the wire value, rejecting unknown types.
    pub fn from_u16(v: u16) -> Result<Self> {
        match v {
            0 => Ok(LogEntryType::X509),
            1 => Ok(LogEntryType::Precert),
            other => Err(Error::UnknownEnum {
                what: "LogEntryType",
                value: u64::from(other),
            }),
        }
    }
}

/// `PreCert` (RFC 6962 §3.2): the hash of the issuer's SubjectPublicKeyInfo
/// and the DER TBSCertificate of the precertificate with the poison
/// extension removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreCert {
    /// SHA-256 of the issuing CA's DER SubjectPublicKeyInfo.
    pub issuer_key_hash: [u8; 32],
    /// DER `TBSCertificate`.
    pub tbs_certificate: Vec<u8>,
}

/// The `signed_entry` of a `TimestampedEntry`, tagged by its `entry_type`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SignedEntry {
    /// `x509_entry`: the DER certificate (`ASN.1Cert`).
    X509(Vec<u8>),
    /// `precert_entry`: the `PreCert`.
    Precert(PreCert),
}

impl SignedEntry {
    /// The `LogEntryType` tag of this entry.
    pub fn entry_type(&self) -> LogEntryType {
        match self {
            SignedEntry::X509(_) => LogEntryType::X509,
            SignedEntry::Precert(_) => LogEntryType::Precert,
        }
    }

    /// Decodes `entry_type` followed by the matching `signed_entry`.
    pub fn decode_from(r: &mut Reader<'_>) -> Result<Self> {
        let entry_type = LogEntryType::from_u16(r.read_u16("TimestampedEntry.entry_type")?)?;
        Self::decode_body(entry_type, r)
    }

    /// Decodes the `signed_entry` body for a known `entry_type`.
    pub fn decode_body(entry_type: LogEntryType, r: &mut Reader<'_>) -> Result<Self> {
        Ok(match entry_type {
            LogEntryType::X509 => SignedEntry::X509(
                r.read_opaque_bounded(LengthPrefix::U24, 1, MAX_CERT_LEN, "ASN.1Cert")?
                    .to_vec(),
            ),
            LogEntryType::Precert => {
                let issuer_key_hash = r.read_array::<32>("PreCert.issuer_key_hash")?;
                let tbs = r.read_opaque_bounded(
                    LengthPrefix::U24,
                    1,
                    MAX_CERT_LEN,
                    "PreCert.tbs_certificate",
                )?;
                SignedEntry::Precert(PreCert {
                    issuer_key_hash,
                    tbs_certificate: tbs.to_vec(),
                })
            }
        })
    }

    /// Encodes `entry_type` followed by `signed_entry`.
    pub fn encode_into(&self, w: &mut Writer) -> Result<()> {
        w.put_u16(self.entry_type().to_u16());
        self.encode_body_into(w)
    }

    /// Encodes the `signed_entry` body only (as in RFC 6962 §3.2's
    /// digitally-signed SCT struct, which carries `entry_type` separately —
    /// the bytes are identical).
    pub fn encode_body_into(&self, w: &mut Writer) -> Result<()> {
        match self {
            SignedEntry::X509(cert) => {
                check_nonempty(cert, "ASN.1Cert")?;
                w.put_opaque24(cert, "ASN.1Cert")
            }
            SignedEntry::Precert(p) => {
                check_nonempty(&p.tbs_certificate, "PreCert.tbs_certificate")?;
                w.put_bytes(&p.issuer_key_hash);
                w.put_opaque24(&p.tbs_certificate, "PreCert.tbs_certificate")
            }
        }
    }
}

fn check_nonempty(data: &[u8], what: &'static str) -> Result<()> {
    if data.is_empty() {
        return Err(Error::TooSmall {
            what,
            len: 0,
            min: 1,
        });
    }
    Ok(())
}

/// `TimestampedEntry` (RFC 6962 §3.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimestampedEntry {
    /// Milliseconds since the Unix epoch (the SCT's timestamp).
    pub timestamp: u64,
    /// The logged certificate or precertificate.
    pub signed_entry: SignedEntry,
    /// Raw `CtExtensions` bytes (without their length prefix); see
    /// [`parse_ct_extensions`].
    pub extensions: Vec<u8>,
}

impl TimestampedEntry {
    /// Decodes one `TimestampedEntry` from the reader (leaving any following
    /// bytes unread).
    pub fn decode_from(r: &mut Reader<'_>) -> Result<Self> {
        let timestamp = r.read_u64("TimestampedEntry.timestamp")?;
        let signed_entry = SignedEntry::decode_from(r)?;
        let extensions = r
            .read_opaque_bounded(
                LengthPrefix::U16,
                0,
                MAX_EXTENSIONS_LEN,
                "TimestampedEntry.extensions",
            )?
            .to_vec();
        Ok(TimestampedEntry {
            timestamp,
            signed_entry,
            extensions,
        })
    }

    /// Decodes a complete `TimestampedEntry`, rejecting trailing bytes.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let mut r = Reader::new(bytes);
        let e = Self::decode_from(&mut r)?;
        r.finish("TimestampedEntry")?;
        Ok(e)
    }

    /// Appends the TLS encoding.
    pub fn encode_into(&self, w: &mut Writer) -> Result<()> {
        w.put_u64(self.timestamp);
        self.signed_entry.encode_into(w)?;
        w.put_opaque16(&self.extensions, "TimestampedEntry.extensions")
    }

    /// The TLS encoding.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut w = Writer::with_capacity(self.encoded_len_hint());
        self.encode_into(&mut w)?;
        Ok(w.into_bytes())
    }

    fn encoded_len_hint(&self) -> usize {
        let body = match &self.signed_entry {
            SignedEntry::X509(c) => 3 + c.len(),
            SignedEntry::Precert(p) => 32 + 3 + p.tbs_certificate.len(),
        };
        8 + 2 + body + 2 + self.extensions.len()
    }

    /// The parsed `CtExtensions`.
    pub fn parsed_extensions(&self) -> Result<Vec<CtExtension>> {
        parse_ct_extensions(&self.extensions)
    }

    /// The `leaf_index` extension (c2sp.org/static-ct-api), which static-ct-api
    /// logs MUST include; [`Error::MissingLeafIndex`] if it is absent.
    pub fn leaf_index(&self) -> Result<u64> {
        leaf_index_from_extensions(&self.extensions)?.ok_or(Error::MissingLeafIndex)
    }
}

/// `MerkleTreeLeaf` (RFC 6962 §3.4), always `version = v1` and
/// `leaf_type = timestamped_entry`, the only values RFC 6962 defines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MerkleTreeLeaf {
    /// The entry.
    pub timestamped_entry: TimestampedEntry,
}

impl MerkleTreeLeaf {
    /// Wraps an entry.
    pub fn new(timestamped_entry: TimestampedEntry) -> Self {
        MerkleTreeLeaf { timestamped_entry }
    }

    /// Decodes a complete `MerkleTreeLeaf` (for example the `leaf_input` of
    /// RFC 6962 §4.6 `get-entries`), rejecting unknown versions and leaf
    /// types and trailing bytes.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let mut r = Reader::new(bytes);
        let version = r.read_u8("MerkleTreeLeaf.version")?;
        if version != VERSION_V1 {
            return Err(Error::UnknownEnum {
                what: "MerkleTreeLeaf.version",
                value: u64::from(version),
            });
        }
        let leaf_type = r.read_u8("MerkleTreeLeaf.leaf_type")?;
        if leaf_type != LEAF_TYPE_TIMESTAMPED_ENTRY {
            return Err(Error::UnknownEnum {
                what: "MerkleTreeLeaf.leaf_type",
                value: u64::from(leaf_type),
            });
        }
        let timestamped_entry = TimestampedEntry::decode_from(&mut r)?;
        r.finish("MerkleTreeLeaf")?;
        Ok(MerkleTreeLeaf { timestamped_entry })
    }

    /// The TLS encoding.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut w = Writer::with_capacity(2 + self.timestamped_entry.encoded_len_hint());
        w.put_u8(VERSION_V1);
        w.put_u8(LEAF_TYPE_TIMESTAMPED_ENTRY);
        self.timestamped_entry.encode_into(&mut w)?;
        Ok(w.into_bytes())
    }

    /// `SHA-256(0x00 ‖ MerkleTreeLeaf)`, the RFC 6962 §2.1 leaf hash.
    pub fn leaf_hash(&self) -> Result<LeafHash> {
        Ok(crate::merkle::leaf_hash(&self.encode()?))
    }
}

/// The RFC 6962 leaf hash of the `MerkleTreeLeaf` wrapping an already
/// encoded `TimestampedEntry`: `SHA-256(0x00 ‖ 0x00 (v1) ‖ 0x00
/// (timestamped_entry) ‖ entry)`. Avoids re-encoding when the bytes came off
/// the wire.
pub fn leaf_hash_of_encoded_entry(timestamped_entry: &[u8]) -> LeafHash {
    let mut h = Sha256::new();
    h.update([LEAF_PREFIX, VERSION_V1, LEAF_TYPE_TIMESTAMPED_ENTRY]);
    h.update(timestamped_entry);
    LeafHash::new(h.finalize().into())
}

/// One `Extension` of a `CtExtensions` list (c2sp.org/static-ct-api).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CtExtension {
    /// `ExtensionType` (0 = `leaf_index`).
    pub extension_type: u8,
    /// `extension_data`.
    pub data: Vec<u8>,
}

/// Parses `CtExtensions` bytes (without their outer length prefix) as the
/// list of `Extension`s defined by c2sp.org/static-ct-api "SCT Extension".
/// Unknown extension types are kept; duplicate types are rejected as the
/// spec forbids them.
pub fn parse_ct_extensions(bytes: &[u8]) -> Result<Vec<CtExtension>> {
    if bytes.len() > MAX_EXTENSIONS_LEN {
        return Err(Error::TooLarge {
            what: "CtExtensions",
            len: bytes.len(),
            max: MAX_EXTENSIONS_LEN,
        });
    }
    let mut r = Reader::new(bytes);
    let mut out: Vec<CtExtension> = Vec::new();
    while !r.is_empty() {
        let extension_type = r.read_u8("Extension.extension_type")?;
        let data = r.read_opaque16("Extension.extension_data")?.to_vec();
        if out.iter().any(|e| e.extension_type == extension_type) {
            return Err(Error::DuplicateExtension { extension_type });
        }
        out.push(CtExtension {
            extension_type,
            data,
        });
    }
    Ok(out)
}

/// The `leaf_index` carried by `CtExtensions` bytes, if any.
///
/// Fails if the extensions are malformed or the `leaf_index` data is not
/// exactly 5 bytes.
pub fn leaf_index_from_extensions(bytes: &[u8]) -> Result<Option<u64>> {
    for ext in parse_ct_extensions(bytes)? {
        if ext.extension_type == EXTENSION_LEAF_INDEX {
            let mut r = Reader::new(&ext.data);
            let index = r.read_u40("leaf_index")?;
            r.finish("leaf_index")?;
            return Ok(Some(index));
        }
    }
    Ok(None)
}

/// Encodes `CtExtensions` bytes (without outer length prefix) holding only a
/// `leaf_index` extension: 8 bytes, as c2sp.org/static-ct-api notes.
pub fn encode_leaf_index_extension(leaf_index: u64) -> Result<Vec<u8>> {
    let mut w = Writer::with_capacity(8);
    w.put_u8(EXTENSION_LEAF_INDEX);
    w.put_u16(LEAF_INDEX_LEN as u16);
    w.put_u40(leaf_index, "leaf_index")?;
    Ok(w.into_bytes())
}

/// One entry of a static-ct-api data tile (c2sp.org/static-ct-api "Log
/// entries"), together with its RFC 6962 leaf hash.
///
/// The leaf hash is computed from the exact `TimestampedEntry` bytes read,
/// so it can be compared directly with the level-0 hash tile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileLeaf {
    timestamped_entry: TimestampedEntry,
    pre_certificate: Option<Vec<u8>>,
    certificate_chain: Vec<[u8; 32]>,
    leaf_hash: LeafHash,
}

impl TileLeaf {
    /// Builds a `TileLeaf`. `pre_certificate` must be present exactly when
    /// the entry is a precert entry.
    pub fn new(
        timestamped_entry: TimestampedEntry,
        pre_certificate: Option<Vec<u8>>,
        certificate_chain: Vec<[u8; 32]>,
    ) -> Result<Self> {
        match (&timestamped_entry.signed_entry, &pre_certificate) {
            (SignedEntry::X509(_), None) => {}
            (SignedEntry::Precert(_), Some(p)) => check_nonempty(p, "TileLeaf.pre_certificate")?,
            (SignedEntry::X509(_), Some(_)) => {
                return Err(Error::InvalidArgument(
                    "an x509_entry TileLeaf has no pre_certificate".into(),
                ))
            }
            (SignedEntry::Precert(_), None) => {
                return Err(Error::InvalidArgument(
                    "a precert_entry TileLeaf needs its pre_certificate".into(),
                ))
            }
        }
        if certificate_chain.len() > MAX_CHAIN_LEN {
            return Err(Error::TooLarge {
                what: "TileLeaf.certificate_chain",
                len: certificate_chain.len() * 32,
                max: MAX_U16_LEN,
            });
        }
        let leaf_hash = leaf_hash_of_encoded_entry(&timestamped_entry.encode()?);
        Ok(TileLeaf {
            timestamped_entry,
            pre_certificate,
            certificate_chain,
            leaf_hash,
        })
    }

    /// Decodes one `TileLeaf` from the reader.
    pub fn decode_from(r: &mut Reader<'_>) -> Result<Self> {
        let start = r.rest();
        let before = r.remaining();
        let timestamped_entry = TimestampedEntry::decode_from(r)?;
        let consumed = before - r.remaining();
        let raw_entry = start
            .get(..consumed)
            .ok_or_else(|| Error::malformed("TileLeaf", "reader position out of range"))?;
        let leaf_hash = leaf_hash_of_encoded_entry(raw_entry);
        let pre_certificate = match timestamped_entry.signed_entry {
            SignedEntry::X509(_) => None,
            SignedEntry::Precert(_) => Some(
                r.read_opaque_bounded(
                    LengthPrefix::U24,
                    1,
                    MAX_CERT_LEN,
                    "TileLeaf.pre_certificate",
                )?
                .to_vec(),
            ),
        };
        let chain = r.read_opaque16("TileLeaf.certificate_chain")?;
        if chain.len() % 32 != 0 {
            return Err(Error::malformed(
                "TileLeaf.certificate_chain",
                format!(
                    "{} bytes is not a whole number of fingerprints",
                    chain.len()
                ),
            ));
        }
        let certificate_chain = chain
            .chunks_exact(32)
            .map(|c| {
                let mut f = [0u8; 32];
                f.copy_from_slice(c);
                f
            })
            .collect();
        Ok(TileLeaf {
            timestamped_entry,
            pre_certificate,
            certificate_chain,
            leaf_hash,
        })
    }

    /// Decodes exactly one `TileLeaf`, rejecting trailing bytes.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let mut r = Reader::new(bytes);
        let leaf = Self::decode_from(&mut r)?;
        r.finish("TileLeaf")?;
        Ok(leaf)
    }

    /// Appends the TLS encoding.
    pub fn encode_into(&self, w: &mut Writer) -> Result<()> {
        self.timestamped_entry.encode_into(w)?;
        if let Some(p) = &self.pre_certificate {
            w.put_opaque24(p, "TileLeaf.pre_certificate")?;
        }
        let chain: Vec<u8> = self.certificate_chain.concat();
        w.put_opaque16(&chain, "TileLeaf.certificate_chain")
    }

    /// The TLS encoding.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut w = Writer::new();
        self.encode_into(&mut w)?;
        Ok(w.into_bytes())
    }

    /// The `TimestampedEntry`.
    pub fn timestamped_entry(&self) -> &TimestampedEntry {
        &self.timestamped_entry
    }

    /// The submitted precertificate (precert entries only).
    pub fn pre_certificate(&self) -> Option<&[u8]> {
        self.pre_certificate.as_deref()
    }

    /// SHA-256 fingerprints of the submitted chain's issuers.
    pub fn certificate_chain(&self) -> &[[u8; 32]] {
        &self.certificate_chain
    }

    /// The RFC 6962 leaf hash `SHA-256(0x00 ‖ MerkleTreeLeaf)`.
    pub fn leaf_hash(&self) -> LeafHash {
        self.leaf_hash
    }

    /// The `MerkleTreeLeaf` this entry is logged as.
    pub fn merkle_tree_leaf(&self) -> MerkleTreeLeaf {
        MerkleTreeLeaf::new(self.timestamped_entry.clone())
    }

    /// The `leaf_index` extension; [`Error::MissingLeafIndex`] if absent.
    pub fn leaf_index(&self) -> Result<u64> {
        self.timestamped_entry.leaf_index()
    }

    /// Splits into `(timestamped_entry, pre_certificate, certificate_chain)`.
    pub fn into_parts(self) -> (TimestampedEntry, Option<Vec<u8>>, Vec<[u8; 32]>) {
        (
            self.timestamped_entry,
            self.pre_certificate,
            self.certificate_chain,
        )
    }
}

/// Returns `bytes` unchanged, or its gzip decompression if it starts with the
/// gzip magic, refusing to produce more than `max_len` bytes.
///
/// c2sp.org/static-ct-api lets logs serve data tiles with `Content-Encoding:
/// gzip` without negotiation, so a client may receive either form. Detection
/// is unambiguous for data tiles: an uncompressed tile starts with a
/// millisecond timestamp, whose first byte is 0x00 for any date before the
/// year 2500, never 0x1f. Concatenated gzip members are accepted; anything
/// after the last member that is not a gzip member is an error.
pub fn decompress_if_gzip(bytes: &[u8], max_len: usize) -> Result<Cow<'_, [u8]>> {
    if !bytes.starts_with(&GZIP_MAGIC) {
        if bytes.len() > max_len {
            return Err(Error::TooLarge {
                what: "data tile",
                len: bytes.len(),
                max: max_len,
            });
        }
        return Ok(Cow::Borrowed(bytes));
    }
    let decoder = flate2::read::MultiGzDecoder::new(bytes);
    let mut out = Vec::new();
    let limit = u64::try_from(max_len).unwrap_or(u64::MAX).saturating_add(1);
    decoder
        .take(limit)
        .read_to_end(&mut out)
        .map_err(Error::Decompress)?;
    if out.len() > max_len {
        return Err(Error::TooLarge {
            what: "decompressed data tile",
            len: out.len(),
            max: max_len,
        });
    }
    Ok(Cow::Owned(out))
}

/// Iterator over the `TileLeaf`s of an uncompressed data tile.
///
/// Yields at most [`MAX_DATA_TILE_ENTRIES`] entries; more is an error. After
/// the first error it yields nothing more.
#[derive(Clone, Debug)]
pub struct DataTileIter<'a> {
    reader: Reader<'a>,
    count: usize,
    done: bool,
}

impl<'a> DataTileIter<'a> {
    /// Iterates over the entries of `bytes` (already decompressed).
    pub fn new(bytes: &'a [u8]) -> Self {
        DataTileIter {
            reader: Reader::new(bytes),
            count: 0,
            done: false,
        }
    }

    /// Number of entries yielded so far.
    pub fn count_so_far(&self) -> usize {
        self.count
    }
}

impl Iterator for DataTileIter<'_> {
    type Item = Result<TileLeaf>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.reader.is_empty() {
            return None;
        }
        if self.count >= MAX_DATA_TILE_ENTRIES {
            self.done = true;
            return Some(Err(Error::TooLarge {
                what: "data tile entry count",
                len: self.count + 1,
                max: MAX_DATA_TILE_ENTRIES,
            }));
        }
        match TileLeaf::decode_from(&mut self.reader) {
            Ok(leaf) => {
                self.count += 1;
                Some(Ok(leaf))
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// A data tile's bytes, decompressed if they were gzip-compressed.
#[derive(Clone, Debug)]
pub struct DataTile<'a> {
    bytes: Cow<'a, [u8]>,
}

impl<'a> DataTile<'a> {
    /// Accepts a data tile body as served (raw or gzip), with the
    /// [`MAX_DATA_TILE_SIZE`] cap.
    pub fn new(body: &'a [u8]) -> Result<Self> {
        Ok(DataTile {
            bytes: decompress_if_gzip(body, MAX_DATA_TILE_SIZE)?,
        })
    }

    /// The uncompressed bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Iterates over the entries.
    pub fn iter(&self) -> DataTileIter<'_> {
        DataTileIter::new(&self.bytes)
    }
}

/// Parses every entry of a data tile body (raw or gzip-compressed).
pub fn parse_data_tile(body: &[u8]) -> Result<Vec<TileLeaf>> {
    let tile = DataTile::new(body)?;
    tile.iter().collect()
}

/// Parses the data tile `tile` (as named by its level-0 [`TileId`]) and
/// checks it against the static-ct-api rules: exactly `tile.width()` entries,
/// and each entry's `leaf_index` extension equal to its position in the log.
pub fn parse_data_tile_checked(tile: TileId, body: &[u8]) -> Result<Vec<TileLeaf>> {
    if tile.level() != 0 {
        return Err(Error::InvalidArgument(format!(
            "data tiles are level 0, got level {}",
            tile.level()
        )));
    }
    let entries = parse_data_tile(body)?;
    if entries.len() != usize::from(tile.width()) {
        return Err(Error::malformed(
            "data tile",
            format!(
                "{} has {} entries, expected {}",
                tile.data_path(),
                entries.len(),
                tile.width()
            ),
        ));
    }
    let first = tile
        .index()
        .checked_mul(TILE_WIDTH)
        .ok_or_else(|| Error::InvalidArgument("tile index overflows".into()))?;
    for (i, e) in entries.iter().enumerate() {
        let expected = first + i as u64;
        let found = e.leaf_index()?;
        if found != expected {
            return Err(Error::LeafIndexMismatch { expected, found });
        }
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn x509_entry(ts: u64, cert: &[u8], ext: Vec<u8>) -> TimestampedEntry {
        TimestampedEntry {
            timestamp: ts,
            signed_entry: SignedEntry::X509(cert.to_vec()),
            extensions: ext,
        }
    }

    fn precert_entry(ts: u64, tbs: &[u8], ext: Vec<u8>) -> TimestampedEntry {
        TimestampedEntry {
            timestamp: ts,
            signed_entry: SignedEntry::Precert(PreCert {
                issuer_key_hash: [0x11; 32],
                tbs_certificate: tbs.to_vec(),
            }),
            extensions: ext,
        }
    }

    #[test]
    fn merkle_tree_leaf_round_trip_and_layout() {
        let leaf = MerkleTreeLeaf::new(x509_entry(0x0102030405060708, b"CERT", vec![]));
        let enc = leaf.encode().unwrap();
        assert_eq!(
            enc,
            [
                &[0u8, 0][..],             // v1, timestamped_entry
                &[1, 2, 3, 4, 5, 6, 7, 8], // timestamp
                &[0, 0],                   // x509_entry
                &[0, 0, 4],                // ASN.1Cert length
                b"CERT",
                &[0, 0], // extensions
            ]
            .concat()
        );
        assert_eq!(MerkleTreeLeaf::decode(&enc).unwrap(), leaf);
        assert_eq!(leaf.leaf_hash().unwrap(), crate::merkle::leaf_hash(&enc));
        assert_eq!(
            leaf_hash_of_encoded_entry(&leaf.timestamped_entry.encode().unwrap()),
            crate::merkle::leaf_hash(&enc)
        );

        let leaf = MerkleTreeLeaf::new(precert_entry(
            7,
            b"TBS",
            encode_leaf_index_extension(9).unwrap(),
        ));
        let enc = leaf.encode().unwrap();
        let dec = MerkleTreeLeaf::decode(&enc).unwrap();
        assert_eq!(dec, leaf);
        assert_eq!(dec.timestamped_entry.leaf_index().unwrap(), 9);
    }

    #[test]
    fn merkle_tree_leaf_rejects_bad_enums() {
        let enc = MerkleTreeLeaf::new(x509_entry(1, b"C", vec![]))
            .encode()
            .unwrap();
        let mut bad = enc.clone();
        bad[0] = 1;
        assert!(matches!(
            MerkleTreeLeaf::decode(&bad),
            Err(Error::UnknownEnum {
                what: "MerkleTreeLeaf.version",
                value: 1
            })
        ));
        let mut bad = enc.clone();
        bad[1] = 3;
        assert!(matches!(
            MerkleTreeLeaf::decode(&bad),
            Err(Error::UnknownEnum {
                what: "MerkleTreeLeaf.leaf_type",
                value: 3
            })
        ));
        let mut bad = enc.clone();
        bad[11] = 2; // entry_type low byte
        assert!(matches!(
            MerkleTreeLeaf::decode(&bad),
            Err(Error::UnknownEnum {
                what: "LogEntryType",
                value: 2
            })
        ));
        let mut bad = enc;
        bad[10] = 1; // entry_type = 256
        assert!(matches!(
            MerkleTreeLeaf::decode(&bad),
            Err(Error::UnknownEnum { value: 256, .. })
        ));
    }

    #[test]
    fn merkle_tree_leaf_rejects_truncation_and_trailing_bytes() {
        let enc = MerkleTreeLeaf::new(precert_entry(1, b"TBS!", vec![1, 0, 0]))
            .encode()
            .unwrap();
        for cut in 0..enc.len() {
            assert!(
                matches!(
                    MerkleTreeLeaf::decode(&enc[..cut]),
                    Err(Error::Truncated { .. })
                ),
                "cut at {cut}"
            );
        }
        let mut long = enc.clone();
        long.push(0);
        assert!(matches!(
            MerkleTreeLeaf::decode(&long),
            Err(Error::TrailingBytes {
                what: "MerkleTreeLeaf",
                count: 1
            })
        ));
    }

    #[test]
    fn empty_certificates_rejected() {
        let mut w = Writer::new();
        w.put_u64(1);
        w.put_u16(0);
        w.put_bytes(&[0, 0, 0]); // zero-length ASN.1Cert
        w.put_u16(0);
        assert!(matches!(
            TimestampedEntry::decode(w.as_bytes()),
            Err(Error::TooSmall {
                what: "ASN.1Cert",
                ..
            })
        ));
        assert!(MerkleTreeLeaf::new(x509_entry(1, b"", vec![]))
            .encode()
            .is_err());
    }

    #[test]
    fn ct_extensions() {
        let ext = encode_leaf_index_extension(0x01_0203_0405).unwrap();
        assert_eq!(ext, vec![0, 0, 5, 1, 2, 3, 4, 5]);
        assert_eq!(
            leaf_index_from_extensions(&ext).unwrap(),
            Some(0x01_0203_0405)
        );
        assert_eq!(leaf_index_from_extensions(&[]).unwrap(), None);
        // Unknown extension first, leaf_index second.
        let mut two = vec![7, 0, 1, 0xaa];
        two.extend_from_slice(&ext);
        assert_eq!(
            leaf_index_from_extensions(&two).unwrap(),
            Some(0x01_0203_0405)
        );
        assert_eq!(parse_ct_extensions(&two).unwrap().len(), 2);
        assert!(encode_leaf_index_extension(MAX_LEAF_INDEX + 1).is_err());
    }

    #[test]
    fn ct_extensions_errors() {
        // Duplicate.
        let mut dup = encode_leaf_index_extension(1).unwrap();
        dup.extend(encode_leaf_index_extension(2).unwrap());
        assert!(matches!(
            parse_ct_extensions(&dup),
            Err(Error::DuplicateExtension { extension_type: 0 })
        ));
        // Truncated.
        assert!(matches!(
            parse_ct_extensions(&[0, 0, 5, 1, 2]),
            Err(Error::Truncated { .. })
        ));
        assert!(matches!(
            parse_ct_extensions(&[0, 0]),
            Err(Error::Truncated { .. })
        ));
        // Wrong leaf_index length.
        assert!(matches!(
            leaf_index_from_extensions(&[0, 0, 4, 1, 2, 3, 4]),
            Err(Error::Truncated { .. })
        ));
        assert!(matches!(
            leaf_index_from_extensions(&[0, 0, 6, 1, 2, 3, 4, 5, 6]),
            Err(Error::TrailingBytes { .. })
        ));
        // Oversize.
        assert!(matches!(
            parse_ct_extensions(&vec![0u8; MAX_EXTENSIONS_LEN + 1]),
            Err(Error::TooLarge { .. })
        ));
        // Missing.
        assert!(matches!(
            x509_entry(1, b"c", vec![]).leaf_index(),
            Err(Error::MissingLeafIndex)
        ));
    }

    fn sample_tile_leaf(i: u64) -> TileLeaf {
        if i & 1 == 0 {
            TileLeaf::new(
                precert_entry(
                    1000 + i,
                    format!("tbs{i}").as_bytes(),
                    encode_leaf_index_extension(i).unwrap(),
                ),
                Some(format!("precert{i}").into_bytes()),
                vec![[i as u8; 32], [0xee; 32]],
            )
            .unwrap()
        } else {
            TileLeaf::new(
                x509_entry(
                    1000 + i,
                    format!("cert{i}").as_bytes(),
                    encode_leaf_index_extension(i).unwrap(),
                ),
                None,
                vec![[0xaa; 32]],
            )
            .unwrap()
        }
    }

    #[test]
    fn tile_leaf_round_trip_and_hash() {
        for i in 0..4 {
            let leaf = sample_tile_leaf(i);
            let enc = leaf.encode().unwrap();
            let dec = TileLeaf::decode(&enc).unwrap();
            assert_eq!(dec, leaf);
            assert_eq!(dec.leaf_hash(), dec.merkle_tree_leaf().leaf_hash().unwrap());
            assert_eq!(dec.leaf_index().unwrap(), i);
            let mut long = enc.clone();
            long.push(1);
            assert!(matches!(
                TileLeaf::decode(&long),
                Err(Error::TrailingBytes { .. })
            ));
            for cut in 0..enc.len() {
                assert!(TileLeaf::decode(&enc[..cut]).is_err(), "cut {cut}");
            }
        }
    }

    #[test]
    fn tile_leaf_constructor_checks() {
        assert!(TileLeaf::new(x509_entry(1, b"c", vec![]), Some(b"p".to_vec()), vec![]).is_err());
        assert!(TileLeaf::new(precert_entry(1, b"t", vec![]), None, vec![]).is_err());
        assert!(TileLeaf::new(precert_entry(1, b"t", vec![]), Some(vec![]), vec![]).is_err());
        assert!(matches!(
            TileLeaf::new(
                x509_entry(1, b"c", vec![]),
                None,
                vec![[0; 32]; MAX_CHAIN_LEN + 1]
            ),
            Err(Error::TooLarge { .. })
        ));
    }

    #[test]
    fn tile_leaf_chain_must_be_whole_fingerprints() {
        let mut w = Writer::new();
        x509_entry(1, b"c", vec![]).encode_into(&mut w).unwrap();
        w.put_opaque16(&[0u8; 33], "chain").unwrap();
        assert!(matches!(
            TileLeaf::decode(w.as_bytes()),
            Err(Error::Malformed {
                what: "TileLeaf.certificate_chain",
                ..
            })
        ));
    }

    fn tile_bytes(n: u64) -> Vec<u8> {
        let mut out = Vec::new();
        for i in 0..n {
            out.extend(sample_tile_leaf(i).encode().unwrap());
        }
        out
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn data_tile_raw_and_gzip() {
        let raw = tile_bytes(10);
        let a = parse_data_tile(&raw).unwrap();
        let b = parse_data_tile(&gzip(&raw)).unwrap();
        assert_eq!(a.len(), 10);
        assert_eq!(a, b);
        let tile = TileId::new(0, 0, 10).unwrap();
        assert_eq!(parse_data_tile_checked(tile, &gzip(&raw)).unwrap(), a);
        // Two concatenated gzip members decode as one stream.
        let mut two = gzip(&raw[..100]);
        two.extend(gzip(&raw[100..]));
        assert_eq!(parse_data_tile(&two).unwrap(), a);
        assert!(parse_data_tile(&[]).unwrap().is_empty());
    }

    #[test]
    fn data_tile_checked_errors() {
        let raw = tile_bytes(10);
        // Wrong width.
        assert!(matches!(
            parse_data_tile_checked(TileId::new(0, 0, 11).unwrap(), &raw),
            Err(Error::Malformed { .. })
        ));
        // Wrong position: tile 1 starts at 256.
        assert!(matches!(
            parse_data_tile_checked(TileId::new(0, 1, 10).unwrap(), &raw),
            Err(Error::LeafIndexMismatch {
                expected: 256,
                found: 0
            })
        ));
        assert!(parse_data_tile_checked(TileId::new(1, 0, 10).unwrap(), &raw).is_err());
        // Missing leaf_index.
        let no_ext = TileLeaf::new(x509_entry(1, b"c", vec![]), None, vec![]).unwrap();
        assert!(matches!(
            parse_data_tile_checked(TileId::new(0, 0, 1).unwrap(), &no_ext.encode().unwrap()),
            Err(Error::MissingLeafIndex)
        ));
    }

    #[test]
    fn data_tile_garbage_rejected() {
        let raw = tile_bytes(3);
        // Truncated last entry.
        assert!(parse_data_tile(&raw[..raw.len() - 1]).is_err());
        // Garbage appended.
        let mut g = raw.clone();
        g.extend_from_slice(&[0xff; 7]);
        assert!(parse_data_tile(&g).is_err());
        // Gzip with garbage after the stream.
        let mut gz = gzip(&raw);
        gz.extend_from_slice(b"garbage!");
        assert!(matches!(parse_data_tile(&gz), Err(Error::Decompress(_))));
        // Corrupt gzip body.
        let mut gz = gzip(&raw);
        let mid = gz.len() / 2;
        gz[mid] ^= 0xff;
        assert!(parse_data_tile(&gz).is_err());
        // Just the magic.
        assert!(parse_data_tile(&GZIP_MAGIC).is_err());
        // The iterator stops after the first error.
        let mut it = DataTileIter::new(&g);
        let results: Vec<_> = it.by_ref().collect();
        assert_eq!(results.len(), 4);
        assert!(results[3].is_err());
        assert!(it.next().is_none());
        assert_eq!(it.count_so_far(), 3);
    }

    #[test]
    fn data_tile_too_many_entries() {
        let one = sample_tile_leaf(1).encode().unwrap();
        let many = one.repeat(MAX_DATA_TILE_ENTRIES + 1);
        assert!(matches!(
            parse_data_tile(&many),
            Err(Error::TooLarge {
                what: "data tile entry count",
                ..
            })
        ));
        assert_eq!(
            parse_data_tile(&one.repeat(MAX_DATA_TILE_ENTRIES))
                .unwrap()
                .len(),
            256
        );
    }

    #[test]
    fn decompression_is_capped() {
        // A gzip bomb: 64 KiB of zeros compresses to ~100 bytes.
        let bomb = gzip(&vec![0u8; 64 << 10]);
        assert!(matches!(
            decompress_if_gzip(&bomb, 1000),
            Err(Error::TooLarge {
                what: "decompressed data tile",
                ..
            })
        ));
        assert_eq!(decompress_if_gzip(&bomb, 64 << 10).unwrap().len(), 64 << 10);
        // Raw input is capped too.
        assert!(matches!(
            decompress_if_gzip(&[0u8; 10], 9),
            Err(Error::TooLarge {
                what: "data tile",
                ..
            })
        ));
        assert!(matches!(
            decompress_if_gzip(&[0u8; 10], 10),
            Ok(Cow::Borrowed(_))
        ));
    }
}
