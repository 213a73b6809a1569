//! Lower-case hex, and serde helpers for fixed-size byte strings.

/// Lower-case hex of `bytes`.
pub fn encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

/// Decodes exactly `N` bytes of hex (either case).
pub fn decode_array<const N: usize>(s: &str) -> Option<[u8; N]> {
    let s = s.as_bytes();
    if s.len() != 2 * N {
        return None;
    }
    let nib = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = nib(s[2 * i])? << 4 | nib(s[2 * i + 1])?;
    }
    Some(out)
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects() {
        let b = [0u8, 1, 0xab, 0xff];
        assert_eq!(encode(&b), "0001abff");
        assert_eq!(decode_array::<4>("0001ABff"), Some(b));
        assert_eq!(decode_array::<4>("0001abf"), None);
        assert_eq!(decode_array::<4>("0001abfg"), None);
        assert_eq!(decode_array::<3>("0001abff"), None);
    }
}
