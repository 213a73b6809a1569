//! Lower-case hex (ct-core's), and serde helpers for fixed-size byte
//! strings.

pub use ct_core::hex::{decode_array, encode};

/// `#[serde(with = "audit_proto::hex::array")]` for `[u8; N]` as hex.
pub mod array {
    use serde::{de::Error as _, Deserialize, Deserializer, Serializer};

    /// Serializes as lower-case hex.
    pub fn serialize<S: Serializer, const N: usize>(v: &[u8; N], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::encode(v))
    }

    /// Deserializes exactly `N` bytes of hex.
    pub fn deserialize<'de, D: Deserializer<'de>, const N: usize>(
        d: D,
    ) -> Result<[u8; N], D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        super::decode_array(&s)
            .ok_or_else(|| D::Error::custom(format!("expected {} hex digits", 2 * N)))
    }
}
