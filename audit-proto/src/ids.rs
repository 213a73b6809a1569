//! Identifiers that cross the client/server contract, parsed once: a
//! certificate's RFC 6962 leaf hash and a log's LogID. Both are 32 bytes;
//! on the wire and in stored client state they keep their established
//! text forms (the leaf hash as lower-case hex, the LogID as standard
//! base64, as in Chrome's log list), so serialised files and the browser
//! extension's JSON do not change.

use base64::Engine as _;
use serde::{de::Error as _, Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Result};

/// An RFC 6962 §2.1 leaf hash, SHA-256(0x00 ‖ MerkleTreeLeaf): the entry a
/// client audits. Text form: 64 lower-case hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
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

    /// Parses exactly 64 hex digits (either case).
    pub fn from_hex(s: &str) -> Result<LeafHash> {
        crate::hex::decode_array(s)
            .map(LeafHash)
            .ok_or(Error::Encoding {
                what: "leaf_hash",
                why: "not 64 hex digits",
            })
    }

    /// Lower-case hex.
    pub fn to_hex(&self) -> String {
        crate::hex::encode(&self.0)
    }
}

impl std::fmt::Display for LeafHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl std::fmt::Debug for LeafHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LeafHash({})", self.to_hex())
    }
}

impl Serialize for LeafHash {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for LeafHash {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<LeafHash, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        LeafHash::from_hex(&s).map_err(D::Error::custom)
    }
}

/// An RFC 6962 §3.2 LogID, SHA-256 of the log's public key. Text form:
/// standard base64 (44 characters), as in log lists and the manifest.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
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

    /// Parses standard base64 of exactly 32 bytes.
    pub fn from_base64(s: &str) -> Result<LogId> {
        // 32 bytes are 44 base64 characters; refuse anything longer before
        // decoding it.
        if s.len() != 44 {
            return Err(Error::Encoding {
                what: "log_id",
                why: "not 44 base64 characters",
            });
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(|_| Error::Encoding {
                what: "log_id",
                why: "not base64",
            })?;
        bytes.try_into().map(LogId).map_err(|_| Error::Encoding {
            what: "log_id",
            why: "not 32 bytes",
        })
    }

    /// Standard base64.
    pub fn to_base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.0)
    }
}

impl std::fmt::Display for LogId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_base64())
    }
}

impl std::fmt::Debug for LogId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LogId({})", self.to_base64())
    }
}

impl Serialize for LogId {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_base64())
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
    fn text_forms_round_trip_and_match_the_old_strings() {
        let h = LeafHash::new([0xab; 32]);
        assert_eq!(h.to_hex(), "ab".repeat(32));
        assert_eq!(
            serde_json::to_string(&h).unwrap(),
            format!("\"{}\"", "ab".repeat(32))
        );
        let back: LeafHash = serde_json::from_str(&format!("\"{}\"", "AB".repeat(32))).unwrap();
        assert_eq!(back, h);
        let id = LogId::new([9; 32]);
        assert_eq!(id.to_base64(), crate::manifest::encode_log_id(&[9; 32]));
        let back: LogId = serde_json::from_str(&serde_json::to_string(&id).unwrap()).unwrap();
        assert_eq!(back, id);
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
