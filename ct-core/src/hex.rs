//! Lower-case hex: the text form of leaf hashes, salts and digests.

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
