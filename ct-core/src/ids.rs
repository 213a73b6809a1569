//! The two 32-byte identifiers the whole system speaks of: a log entry's
//! RFC 6962 leaf hash and a log's LogID. The ingest side computes and
//! stores them, the auditor derives filter bits from them, and a browser
//! rebuilds them from a certificate and its SCT; all of them use these
//! types.
//!
//! Both are `#[repr(transparent)]` over `[u8; 32]`, `Copy`, and convert
//! to and from the bytes for free ([`From`], [`AsRef`], `as_bytes`), so
//! bulk buffers of raw hashes can stay `[[u8; 32]]`. Their text forms are
//! the established ones, also used by serde: the leaf hash as 64
//! lower-case hex digits, the LogID as standard base64 (44 characters, as
//! in Chrome's log list and the epoch manifest).

use base64::Engine as _;
use serde::{de::Error as _, Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Result};

/// An RFC 6962 §2.1 leaf hash, SHA-256(0x00 ‖ MerkleTreeLeaf): the entry a
/// client audits. Text form: 64 lower-case hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[repr(transparent)]
pub struct LeafHash([u8; 32]);

impl LeafHash {
    /// Wraps the 32 bytes.
    pub const fn new(bytes: [u8; 32]) -> LeafHash {
        LeafHash(bytes)
    }

    /// The 32 bytes.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The 32 bytes, by value.
    pub const fn to_bytes(self) -> [u8; 32] {
        self.0
    }

    /// Parses exactly 64 hex digits (either case).
    pub fn from_hex(s: &str) -> Result<LeafHash> {
        crate::hex::decode_array(s)
            .map(LeafHash)
            .ok_or_else(|| Error::Malformed {
                what: "leaf_hash",
                reason: "not 64 hex digits".into(),
            })
    }

    /// Lower-case hex.
    pub fn to_hex(&self) -> String {
        crate::hex::encode(&self.0)
    }

    /// Wraps 32 bytes from a slice of exactly that length (a database
    /// column, say).
    pub fn from_slice(bytes: &[u8]) -> Result<LeafHash> {
        bytes
            .try_into()
            .map(LeafHash)
            .map_err(|_| Error::Malformed {
                what: "leaf_hash",
                reason: format!("{} bytes, not 32", bytes.len()),
            })
    }
}

/// An RFC 6962 §3.2 LogID, SHA-256 of the log's public key. Text form:
/// standard base64 (44 characters), as in log lists and the manifest.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[repr(transparent)]
pub struct LogId([u8; 32]);

impl LogId {
    /// Wraps the 32 bytes.
    pub const fn new(bytes: [u8; 32]) -> LogId {
        LogId(bytes)
    }

    /// The 32 bytes.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The 32 bytes, by value.
    pub const fn to_bytes(self) -> [u8; 32] {
        self.0
    }

    /// Parses standard base64 of exactly 32 bytes.
    pub fn from_base64(s: &str) -> Result<LogId> {
        let bad = |reason: &str| Error::Malformed {
            what: "log_id",
            reason: reason.into(),
        };
        // 32 bytes are 44 base64 characters; refuse anything longer before
        // decoding it.
        if s.len() != 44 {
            return Err(bad("not 44 base64 characters"));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(|_| bad("not base64"))?;
        bytes.try_into().map(LogId).map_err(|_| bad("not 32 bytes"))
    }

    /// Standard base64.
    pub fn to_base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.0)
    }

    /// Wraps 32 bytes from a slice of exactly that length (a database
    /// column, say).
    pub fn from_slice(bytes: &[u8]) -> Result<LogId> {
        bytes.try_into().map(LogId).map_err(|_| Error::Malformed {
            what: "log_id",
            reason: format!("{} bytes, not 32", bytes.len()),
        })
    }
}

/// The conversions and formatting both identifiers share.
macro_rules! id_common {
    ($t:ident, $text:ident) => {
        impl From<[u8; 32]> for $t {
            fn from(bytes: [u8; 32]) -> $t {
                $t(bytes)
            }
        }

        impl From<$t> for [u8; 32] {
            fn from(id: $t) -> [u8; 32] {
                id.0
            }
        }

        impl AsRef<[u8; 32]> for $t {
            fn as_ref(&self) -> &[u8; 32] {
                &self.0
            }
        }

        impl AsRef<[u8]> for $t {
            fn as_ref(&self) -> &[u8] {
                &self.0
            }
        }

        impl PartialEq<[u8; 32]> for $t {
            fn eq(&self, other: &[u8; 32]) -> bool {
                &self.0 == other
            }
        }

        impl PartialEq<$t> for [u8; 32] {
            fn eq(&self, other: &$t) -> bool {
                self == &other.0
            }
        }

        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.$text())
            }
        }

        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, concat!(stringify!($t), "({})"), self.$text())
            }
        }

        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                s.serialize_str(&self.$text())
            }
        }
    };
}

id_common!(LeafHash, to_hex);
id_common!(LogId, to_base64);

impl<'de> Deserialize<'de> for LeafHash {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<LeafHash, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        LeafHash::from_hex(&s).map_err(D::Error::custom)
    }
}

impl<'de> Deserialize<'de> for LogId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<LogId, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        LogId::from_base64(&s).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_forms_round_trip() {
        let h = LeafHash::new([0xab; 32]);
        assert_eq!(h.to_hex(), "ab".repeat(32));
        assert_eq!(h.to_string(), "ab".repeat(32));
        assert_eq!(format!("{h:?}"), format!("LeafHash({})", "ab".repeat(32)));
        assert_eq!(
            serde_json::to_string(&h).unwrap(),
            format!("\"{}\"", "ab".repeat(32))
        );
        let back: LeafHash = serde_json::from_str(&format!("\"{}\"", "AB".repeat(32))).unwrap();
        assert_eq!(back, h);
        let id = LogId::new([9; 32]);
        assert_eq!(
            id.to_base64(),
            base64::engine::general_purpose::STANDARD.encode([9u8; 32])
        );
        assert_eq!(format!("{id:?}"), format!("LogId({})", id.to_base64()));
        let back: LogId = serde_json::from_str(&serde_json::to_string(&id).unwrap()).unwrap();
        assert_eq!(back, id);
    }

    #[test]
    fn conversions_are_the_bytes() {
        let b = [5u8; 32];
        assert_eq!(LeafHash::from(b).to_bytes(), b);
        assert_eq!(<[u8; 32]>::from(LogId::new(b)), b);
        assert_eq!(LogId::from_slice(&b).unwrap(), b);
        assert!(LeafHash::from_slice(&b[..31]).is_err());
        assert_eq!(std::mem::size_of::<LeafHash>(), 32);
    }

    #[test]
    fn malformed_text_is_refused() {
        for bad in ["", "ab", &"ab".repeat(33), &"zz".repeat(32)] {
            assert!(LeafHash::from_hex(bad).is_err(), "{bad}");
        }
        let short = base64::engine::general_purpose::STANDARD.encode([1u8; 31]);
        let long = base64::engine::general_purpose::STANDARD.encode([1u8; 33]);
        for bad in [
            "",
            "!!!!",
            short.as_str(),
            long.as_str(),
            &"A".repeat(10_000),
        ] {
            assert!(LogId::from_base64(bad).is_err(), "{bad}");
        }
        assert!(serde_json::from_str::<LogId>("\"abc\"").is_err());
        assert!(serde_json::from_str::<LeafHash>("42").is_err());
    }
}
