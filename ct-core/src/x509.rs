//! Validity periods of logged certificates.
//!
//! The ingester keeps only entries that have not expired, so it needs the
//! `notAfter` (and, for sanity checks, `notBefore`) of every entry: from the
//! DER certificate of an `x509_entry`, or from the DER `TBSCertificate` that
//! is all a `precert_entry` carries (RFC 6962 §3.2 `PreCert`). The X.509
//! structures are those of RFC 5280 §4.1; parsing uses `x509-parser` without
//! deep-parsing extensions (only the validity is needed, and precertificate
//! TBS extensions are sometimes unusual).

use x509_parser::certificate::{TbsCertificateParser, X509CertificateParser};
use x509_parser::nom::Parser;

use crate::error::{Error, Result};
use crate::leaf::SignedEntry;

/// The validity period of a certificate, in Unix seconds (UTC).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Validity {
    /// `notBefore`.
    pub not_before: i64,
    /// `notAfter`.
    pub not_after: i64,
}

impl Validity {
    /// True if `unix_seconds` is within `[not_before, not_after]` (RFC 5280
    /// §4.1.2.5: both bounds inclusive).
    pub fn contains(&self, unix_seconds: i64) -> bool {
        self.not_before <= unix_seconds && unix_seconds <= self.not_after
    }
}

/// Validity of a DER-encoded `Certificate`. Trailing bytes after the
/// certificate are rejected.
pub fn cert_validity(der: &[u8]) -> Result<Validity> {
    const WHAT: &str = "certificate";
    let (rest, cert) = X509CertificateParser::new()
        .with_deep_parse_extensions(false)
        .parse(der)
        .map_err(|e| Error::x509(WHAT, e))?;
    if !rest.is_empty() {
        return Err(Error::TrailingBytes {
            what: WHAT,
            count: rest.len(),
        });
    }
    let v = &cert.tbs_certificate.validity;
    checked_validity(v.not_before.timestamp(), v.not_after.timestamp(), WHAT)
}

/// Validity of a DER-encoded `TBSCertificate` (as found in a precert entry).
/// Trailing bytes are rejected.
pub fn tbs_validity(der: &[u8]) -> Result<Validity> {
    const WHAT: &str = "TBSCertificate";
    let (rest, tbs) = TbsCertificateParser::new()
        .with_deep_parse_extensions(false)
        .parse(der)
        .map_err(|e| Error::x509(WHAT, e))?;
    if !rest.is_empty() {
        return Err(Error::TrailingBytes {
            what: WHAT,
            count: rest.len(),
        });
    }
    checked_validity(
        tbs.validity.not_before.timestamp(),
        tbs.validity.not_after.timestamp(),
        WHAT,
    )
}

fn checked_validity(not_before: i64, not_after: i64, what: &'static str) -> Result<Validity> {
    if not_after < not_before {
        return Err(Error::x509(
            what,
            format!("notAfter {not_after} is before notBefore {not_before}"),
        ));
    }
    Ok(Validity {
        not_before,
        not_after,
    })
}

/// `notAfter` of a DER certificate, in Unix seconds.
pub fn cert_not_after(der: &[u8]) -> Result<i64> {
    cert_validity(der).map(|v| v.not_after)
}

/// `notAfter` of a DER TBSCertificate, in Unix seconds.
pub fn tbs_not_after(der: &[u8]) -> Result<i64> {
    tbs_validity(der).map(|v| v.not_after)
}

/// Validity of a log entry: of the certificate for `x509_entry`, of the
/// TBSCertificate for `precert_entry`.
pub fn entry_validity(entry: &SignedEntry) -> Result<Validity> {
    match entry {
        SignedEntry::X509(cert) => cert_validity(cert),
        SignedEntry::Precert(p) => tbs_validity(&p.tbs_certificate),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_a_typed_error() {
        for bad in [
            &b""[..],
            b"\x30",
            b"\x30\x03\x02\x01\x01",
            b"hello world",
            &[0xff; 40],
        ] {
            assert!(matches!(
                cert_validity(bad),
                Err(Error::X509 {
                    what: "certificate",
                    ..
                })
            ));
            assert!(matches!(
                tbs_validity(bad),
                Err(Error::X509 {
                    what: "TBSCertificate",
                    ..
                })
            ));
        }
    }

    #[test]
    fn inverted_validity_rejected() {
        assert!(checked_validity(10, 9, "x").is_err());
        let v = checked_validity(10, 10, "x").unwrap();
        assert!(v.contains(10));
        assert!(!v.contains(11));
        assert!(!v.contains(9));
    }
}
