//! Precertificates and embedded SCTs (RFC 6962 §3.1–§3.3).
//!
//! A CA that embeds SCTs first issues a *precertificate*: the final
//! certificate's `TBSCertificate` plus the critical poison extension
//! `1.3.6.1.4.1.11129.2.4.3` (value ASN.1 `NULL`). The log signs a `PreCert`
//! entry: the SHA-256 of the issuer's SubjectPublicKeyInfo and the
//! precertificate's `TBSCertificate` *with the poison extension removed*.
//! The CA then issues the final certificate, identical except that the
//! poison is replaced by the `SignedCertificateTimestampList` extension
//! `1.3.6.1.4.1.11129.2.4.2`, whose `extnValue` holds a DER `OCTET STRING`
//! wrapping the TLS encoding
//!
//! ```text
//! opaque SerializedSCT<1..2^16-1>;
//! struct { SerializedSCT sct_list<1..2^16-1>; } SignedCertificateTimestampList;
//! ```
//!
//! So a TLS client (or auditor) holding only the final certificate and its
//! issuer rebuilds the logged entry by removing the SCT list extension from
//! the final certificate's `TBSCertificate` ([`precert_entry_from_final_cert`]);
//! RFC 6962 §3.2 requires the result to equal the precertificate's TBS
//! without the poison.
//!
//! The DER handling here is deliberately minimal: it walks definite-length
//! TLVs (rejecting indefinite lengths and non-minimal length encodings),
//! copies every field it does not change byte for byte, and re-encodes only
//! the lengths of the `TBSCertificate`, its `[3]` wrapper and the
//! `Extensions` sequence. When the removed extension was the only one, the
//! `[3] Extensions` field is omitted (RFC 5280 §4.1: `SIZE (1..MAX)`).

use sha2::{Digest, Sha256};
use x509_parser::prelude::FromDer as _;

use crate::error::{Error, Result};
use crate::leaf::{PreCert, SignedEntry, MAX_CERT_LEN};
use crate::sth::SignedCertificateTimestamp;
use crate::tls::{Reader, Writer};

/// DER contents of the OID `1.3.6.1.4.1.11129.2.4.3`, the precertificate
/// poison extension (RFC 6962 §3.1).
pub const OID_CT_POISON: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0xd6, 0x79, 0x02, 0x04, 0x03];
/// DER contents of the OID `1.3.6.1.4.1.11129.2.4.2`, the embedded
/// `SignedCertificateTimestampList` extension (RFC 6962 §3.3).
pub const OID_SCT_LIST: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0xd6, 0x79, 0x02, 0x04, 0x02];
/// The poison extension's `extnValue` contents: ASN.1 `NULL`.
pub const POISON_VALUE: &[u8] = &[0x05, 0x00];
/// Most SCTs accepted in one embedded list (real certificates carry 2–5).
pub const MAX_EMBEDDED_SCTS: usize = 64;

const TAG_BOOLEAN: u8 = 0x01;
const TAG_OCTET_STRING: u8 = 0x04;
const TAG_OID: u8 = 0x06;
const TAG_SEQUENCE: u8 = 0x30;
const TAG_EXTENSIONS: u8 = 0xa3;

/// One DER TLV.
#[derive(Clone, Copy)]
struct Tlv<'a> {
    tag: u8,
    content: &'a [u8],
    /// Tag, length and content.
    raw: &'a [u8],
}

/// Reads one definite-length DER TLV from the front of `input`, returning it
/// and the rest.
fn read_tlv<'a>(input: &'a [u8], what: &'static str) -> Result<(Tlv<'a>, &'a [u8])> {
    let truncated = |needed: usize| Error::Truncated {
        what,
        needed,
        available: input.len(),
    };
    let (&tag, rest) = input.split_first().ok_or_else(|| truncated(2))?;
    if tag & 0x1f == 0x1f {
        return Err(Error::x509(what, "multi-byte DER tags are not supported"));
    }
    let (&first, rest) = rest.split_first().ok_or_else(|| truncated(2))?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 {
            return Err(Error::x509(what, "indefinite length is not DER"));
        }
        if n > 4 {
            return Err(Error::x509(what, "length field longer than 4 bytes"));
        }
        let bytes = rest.get(..n).ok_or_else(|| truncated(2 + n))?;
        if bytes[0] == 0 {
            return Err(Error::x509(what, "non-minimal length encoding"));
        }
        let len = bytes
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        if len < 0x80 {
            return Err(Error::x509(what, "non-minimal length encoding"));
        }
        (len, &rest[n..])
    };
    let header = input.len() - rest.len();
    let content = rest.get(..len).ok_or(Error::Truncated {
        what,
        needed: header + len,
        available: input.len(),
    })?;
    let total = header + len;
    Ok((
        Tlv {
            tag,
            content,
            raw: &input[..total],
        },
        &input[total..],
    ))
}

/// Reads exactly one TLV with tag `tag`, rejecting trailing bytes.
fn read_only_tlv<'a>(input: &'a [u8], tag: u8, what: &'static str) -> Result<Tlv<'a>> {
    let (tlv, rest) = read_tlv(input, what)?;
    if tlv.tag != tag {
        return Err(Error::x509(
            what,
            format!("expected tag 0x{tag:02x}, found 0x{:02x}", tlv.tag),
        ));
    }
    if !rest.is_empty() {
        return Err(Error::TrailingBytes {
            what,
            count: rest.len(),
        });
    }
    Ok(tlv)
}

/// Appends a DER TLV with a minimal length encoding.
fn write_tlv(out: &mut Vec<u8>, tag: u8, content: &[u8]) {
    out.push(tag);
    let len = content.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|&&b| b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(content);
}

/// A DER TLV with a minimal length encoding.
fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(content.len() + 6);
    write_tlv(&mut out, tag, content);
    out
}

/// The DER `TBSCertificate` (tag, length and contents) of a DER
/// `Certificate`. Trailing bytes after the certificate are rejected.
pub fn tbs_certificate(cert_der: &[u8]) -> Result<&[u8]> {
    const WHAT: &str = "certificate";
    if cert_der.len() > MAX_CERT_LEN {
        return Err(Error::TooLarge {
            what: WHAT,
            len: cert_der.len(),
            max: MAX_CERT_LEN,
        });
    }
    let cert = read_only_tlv(cert_der, TAG_SEQUENCE, WHAT)?;
    let (tbs, _) = read_tlv(cert.content, "TBSCertificate")?;
    if tbs.tag != TAG_SEQUENCE {
        return Err(Error::x509("TBSCertificate", "not a SEQUENCE"));
    }
    Ok(tbs.raw)
}

/// One X.509 extension as found in a `TBSCertificate`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawExtension {
    /// `critical` (DEFAULT FALSE).
    pub critical: bool,
    /// Contents of the `extnValue` OCTET STRING (the DER of the extension
    /// value).
    pub value: Vec<u8>,
}

/// Parses an `Extension` SEQUENCE's contents into (OID contents, extension).
fn parse_extension(content: &[u8]) -> Result<(&[u8], RawExtension)> {
    const WHAT: &str = "Extension";
    let (oid, rest) = read_tlv(content, WHAT)?;
    if oid.tag != TAG_OID {
        return Err(Error::x509(WHAT, "extnID is not an OBJECT IDENTIFIER"));
    }
    let (next, rest) = read_tlv(rest, WHAT)?;
    let (critical, value_tlv, rest) = if next.tag == TAG_BOOLEAN {
        let critical = match next.content {
            [0xff] => true,
            // DER forbids encoding the default value, but some issuers do.
            [0x00] => false,
            _ => return Err(Error::x509(WHAT, "critical is not a DER BOOLEAN")),
        };
        let (value, rest) = read_tlv(rest, WHAT)?;
        (critical, value, rest)
    } else {
        (false, next, rest)
    };
    if value_tlv.tag != TAG_OCTET_STRING {
        return Err(Error::x509(WHAT, "extnValue is not an OCTET STRING"));
    }
    if !rest.is_empty() {
        return Err(Error::TrailingBytes {
            what: WHAT,
            count: rest.len(),
        });
    }
    Ok((
        oid.content,
        RawExtension {
            critical,
            value: value_tlv.content.to_vec(),
        },
    ))
}

/// Splits the extension with OID contents `oid` off a DER `TBSCertificate`.
///
/// Returns the `TBSCertificate` re-encoded without that extension (every
/// other byte unchanged, the `[3]` field dropped if no extension is left)
/// and the removed extension, or `None` (and the input unchanged) if it is
/// absent. An OID present more than once is an error (RFC 5280 §4.2).
pub fn remove_extension(tbs_der: &[u8], oid: &[u8]) -> Result<(Vec<u8>, Option<RawExtension>)> {
    const WHAT: &str = "TBSCertificate";
    if tbs_der.len() > MAX_CERT_LEN {
        return Err(Error::TooLarge {
            what: WHAT,
            len: tbs_der.len(),
            max: MAX_CERT_LEN,
        });
    }
    let tbs = read_only_tlv(tbs_der, TAG_SEQUENCE, WHAT)?;
    let mut fields = Vec::with_capacity(tbs.content.len());
    let mut removed: Option<RawExtension> = None;
    let mut seen_extensions = false;
    let mut rest = tbs.content;
    while !rest.is_empty() {
        let (field, next) = read_tlv(rest, WHAT)?;
        rest = next;
        if field.tag != TAG_EXTENSIONS {
            fields.extend_from_slice(field.raw);
            continue;
        }
        if seen_extensions {
            return Err(Error::x509(WHAT, "two [3] extensions fields"));
        }
        seen_extensions = true;
        let list = read_only_tlv(field.content, TAG_SEQUENCE, "Extensions")?;
        let mut kept = Vec::with_capacity(list.content.len());
        let mut exts = list.content;
        while !exts.is_empty() {
            let (ext, next) = read_tlv(exts, "Extension")?;
            exts = next;
            if ext.tag != TAG_SEQUENCE {
                return Err(Error::x509("Extension", "not a SEQUENCE"));
            }
            let (ext_oid, parsed) = parse_extension(ext.content)?;
            if ext_oid == oid {
                if removed.is_some() {
                    return Err(Error::x509(WHAT, "the same extension appears twice"));
                }
                removed = Some(parsed);
            } else {
                kept.extend_from_slice(ext.raw);
            }
        }
        if !kept.is_empty() {
            let seq = tlv(TAG_SEQUENCE, &kept);
            write_tlv(&mut fields, TAG_EXTENSIONS, &seq);
        }
    }
    if removed.is_none() {
        return Ok((tbs_der.to_vec(), None));
    }
    Ok((tlv(TAG_SEQUENCE, &fields), removed))
}

/// The `PreCert.tbs_certificate` of a DER precertificate: its
/// `TBSCertificate` with the poison extension removed. Fails unless the
/// poison is present, critical and ASN.1 `NULL` (RFC 6962 §3.1).
pub fn precert_tbs(precert_der: &[u8]) -> Result<Vec<u8>> {
    let (tbs, poison) = remove_extension(tbs_certificate(precert_der)?, OID_CT_POISON)?;
    match poison {
        None => Err(Error::x509(
            "precertificate",
            "no poison extension 1.3.6.1.4.1.11129.2.4.3",
        )),
        Some(p) if !p.critical || p.value != POISON_VALUE => Err(Error::x509(
            "precertificate",
            "the poison extension must be critical with an ASN.1 NULL value",
        )),
        Some(_) => Ok(tbs),
    }
}

/// The `TBSCertificate` of a final certificate with its embedded SCT list
/// extension removed, which is what the log signed for its precertificate
/// (RFC 6962 §3.2), together with the embedded SCTs. Fails if the
/// certificate has no SCT list extension.
pub fn final_cert_tbs(cert_der: &[u8]) -> Result<(Vec<u8>, Vec<SignedCertificateTimestamp>)> {
    let (tbs, ext) = remove_extension(tbs_certificate(cert_der)?, OID_SCT_LIST)?;
    let ext = ext.ok_or_else(|| {
        Error::x509(
            "certificate",
            "no embedded SCT list extension 1.3.6.1.4.1.11129.2.4.2",
        )
    })?;
    Ok((tbs, decode_sct_list_extension(&ext.value)?))
}

/// The SCTs embedded in a DER certificate (empty if it has no SCT list
/// extension).
pub fn embedded_scts(cert_der: &[u8]) -> Result<Vec<SignedCertificateTimestamp>> {
    let (_, ext) = remove_extension(tbs_certificate(cert_der)?, OID_SCT_LIST)?;
    match ext {
        Some(e) => decode_sct_list_extension(&e.value),
        None => Ok(Vec::new()),
    }
}

/// The TLS encoding of a `SignedCertificateTimestampList` (RFC 6962 §3.3).
pub fn encode_sct_list(scts: &[SignedCertificateTimestamp]) -> Result<Vec<u8>> {
    if scts.is_empty() {
        return Err(Error::TooSmall {
            what: "SignedCertificateTimestampList",
            len: 0,
            min: 1,
        });
    }
    let mut inner = Writer::new();
    for sct in scts {
        inner.put_opaque16(&sct.encode()?, "SerializedSCT")?;
    }
    let mut w = Writer::new();
    w.put_opaque16(inner.as_bytes(), "SignedCertificateTimestampList")?;
    Ok(w.into_bytes())
}

/// Decodes the TLS encoding of a `SignedCertificateTimestampList`.
pub fn decode_sct_list(bytes: &[u8]) -> Result<Vec<SignedCertificateTimestamp>> {
    const WHAT: &str = "SignedCertificateTimestampList";
    let mut r = Reader::new(bytes);
    let list = r.read_opaque16(WHAT)?;
    r.finish(WHAT)?;
    if list.is_empty() {
        return Err(Error::TooSmall {
            what: WHAT,
            len: 0,
            min: 1,
        });
    }
    let mut r = Reader::new(list);
    let mut out = Vec::new();
    while !r.is_empty() {
        if out.len() >= MAX_EMBEDDED_SCTS {
            return Err(Error::TooLarge {
                what: "embedded SCT count",
                len: out.len() + 1,
                max: MAX_EMBEDDED_SCTS,
            });
        }
        let sct = r.read_opaque16("SerializedSCT")?;
        out.push(SignedCertificateTimestamp::decode(sct)?);
    }
    Ok(out)
}

/// The contents of the SCT list extension's `extnValue`: a DER OCTET STRING
/// wrapping [`encode_sct_list`] (RFC 6962 §3.3).
pub fn sct_list_extension_value(scts: &[SignedCertificateTimestamp]) -> Result<Vec<u8>> {
    Ok(tlv(TAG_OCTET_STRING, &encode_sct_list(scts)?))
}

/// Decodes the contents of the SCT list extension's `extnValue`.
pub fn decode_sct_list_extension(value: &[u8]) -> Result<Vec<SignedCertificateTimestamp>> {
    let octets = read_only_tlv(value, TAG_OCTET_STRING, "SCT list extension value")?;
    decode_sct_list(octets.content)
}

/// `SHA-256` of the DER SubjectPublicKeyInfo of a DER issuer certificate:
/// the `PreCert.issuer_key_hash` of certificates it issues.
pub fn issuer_key_hash(issuer_cert_der: &[u8]) -> Result<[u8; 32]> {
    const WHAT: &str = "issuer certificate";
    let (rest, cert) = x509_parser::certificate::X509Certificate::from_der(issuer_cert_der)
        .map_err(|e| Error::x509(WHAT, e))?;
    if !rest.is_empty() {
        return Err(Error::TrailingBytes {
            what: WHAT,
            count: rest.len(),
        });
    }
    Ok(Sha256::digest(cert.tbs_certificate.subject_pki.raw).into())
}

/// The `precert_entry` a log signed for a certificate with embedded SCTs,
/// rebuilt from the final certificate and its issuer, with the embedded
/// SCTs (whose signatures cover this entry: verify each with
/// [`SignedCertificateTimestamp::verify`]).
pub fn precert_entry_from_final_cert(
    cert_der: &[u8],
    issuer_cert_der: &[u8],
) -> Result<(SignedEntry, Vec<SignedCertificateTimestamp>)> {
    let (tbs, scts) = final_cert_tbs(cert_der)?;
    let entry = SignedEntry::Precert(PreCert {
        issuer_key_hash: issuer_key_hash(issuer_cert_der)?,
        tbs_certificate: tbs,
    });
    Ok((entry, scts))
}

/// The `precert_entry` a log signs for a precertificate and its issuer.
pub fn precert_entry_from_precert(
    precert_der: &[u8],
    issuer_cert_der: &[u8],
) -> Result<SignedEntry> {
    Ok(SignedEntry::Precert(PreCert {
        issuer_key_hash: issuer_key_hash(issuer_cert_der)?,
        tbs_certificate: precert_tbs(precert_der)?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(oid: &[u8], critical: bool, value: &[u8]) -> Vec<u8> {
        let mut c = tlv(TAG_OID, oid);
        if critical {
            c.extend_from_slice(&[TAG_BOOLEAN, 1, 0xff]);
        }
        c.extend(tlv(TAG_OCTET_STRING, value));
        tlv(TAG_SEQUENCE, &c)
    }

    fn tbs_with(exts: &[Vec<u8>]) -> Vec<u8> {
        let mut c = vec![0xa0, 3, 2, 1, 2, 2, 1, 7];
        c.extend(tlv(TAG_SEQUENCE, &[0x55; 200])); // long enough for 2-byte lengths
        if !exts.is_empty() {
            c.extend(tlv(TAG_EXTENSIONS, &tlv(TAG_SEQUENCE, &exts.concat())));
        }
        tlv(TAG_SEQUENCE, &c)
    }

    const OTHER: &[u8] = &[0x55, 0x1d, 0x11];

    #[test]
    fn removing_keeps_order_and_other_bytes() {
        let a = ext(OTHER, false, &[0x30, 0]);
        let p = ext(OID_CT_POISON, true, POISON_VALUE);
        let (out, removed) = remove_extension(&tbs_with(&[a.clone(), p]), OID_CT_POISON).unwrap();
        assert_eq!(out, tbs_with(std::slice::from_ref(&a)));
        assert_eq!(
            removed,
            Some(RawExtension {
                critical: true,
                value: POISON_VALUE.to_vec()
            })
        );
        // Absent: unchanged.
        let t = tbs_with(std::slice::from_ref(&a));
        assert_eq!(remove_extension(&t, OID_CT_POISON).unwrap(), (t, None));
        // The only extension: the [3] field goes.
        let only = tbs_with(&[ext(OID_SCT_LIST, false, &[4, 0])]);
        let (out, removed) = remove_extension(&only, OID_SCT_LIST).unwrap();
        assert_eq!(out, tbs_with(&[]));
        assert!(removed.is_some());
        // Twice: error.
        let p = ext(OID_CT_POISON, true, POISON_VALUE);
        assert!(remove_extension(&tbs_with(&[p.clone(), a, p]), OID_CT_POISON).is_err());
    }

    #[test]
    fn sct_list_round_trip() {
        let sct = SignedCertificateTimestamp {
            log_id: crate::LogId::new([7; 32]),
            timestamp: 1,
            extensions: vec![0, 0, 5, 0, 0, 0, 0, 9],
            signature: crate::sth::DigitallySigned {
                hash_algorithm: 4,
                signature_algorithm: 3,
                signature: vec![1, 2, 3],
            },
        };
        let v = sct_list_extension_value(&[sct.clone(), sct.clone()]).unwrap();
        assert_eq!(
            decode_sct_list_extension(&v).unwrap(),
            vec![sct.clone(), sct]
        );
        assert!(encode_sct_list(&[]).is_err());
        assert!(decode_sct_list(&[0, 0]).is_err());
        for cut in 0..v.len() {
            assert!(decode_sct_list_extension(&v[..cut]).is_err());
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let good = tbs_with(&[ext(OID_CT_POISON, true, POISON_VALUE)]);
        for cut in 0..good.len() {
            assert!(remove_extension(&good[..cut], OID_CT_POISON).is_err());
        }
        for bad in [
            &[][..],
            &[0x30, 0x80, 0, 0],
            &[0x30, 0x81, 0x05, 0, 0, 0, 0, 0],
            &[0x30, 0x85, 1, 1, 1, 1, 1],
            &[0x3f, 0x01, 0x00],
            &[0x30, 0x02, 0xa3, 0x00],
        ] {
            assert!(remove_extension(bad, OID_CT_POISON).is_err(), "{bad:?}");
            assert!(tbs_certificate(bad).is_err());
            assert!(precert_tbs(bad).is_err());
            assert!(embedded_scts(bad).is_err());
        }
        // Non-critical poison is refused.
        let cert = {
            let t = tbs_with(&[ext(OID_CT_POISON, false, POISON_VALUE)]);
            let mut c = t;
            c.extend_from_slice(&[0x30, 0, 0x03, 1, 0]);
            tlv(TAG_SEQUENCE, &c)
        };
        assert!(precert_tbs(&cert).is_err());
    }
}
