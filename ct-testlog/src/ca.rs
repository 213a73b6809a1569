//! The test CA: a self-signed ECDSA P-256 root that issues leaf
//! certificates, precertificates (critical poison extension) and final
//! certificates with an embedded SCT list (RFC 6962 §3.1, §3.3), with
//! `rcgen`.
//!
//! A precertificate and its final certificate come from the same
//! [`rcgen::CertificateParams`] (same serial, names, validity, subject key),
//! differing only in their last extension: the poison in one, the SCT list
//! in the other. rcgen writes custom extensions after all standard ones, in
//! order, so removing either yields the same `TBSCertificate`, which is what
//! RFC 6962 §3.2 requires.

use rcgen::{
    BasicConstraints, CertificateParams, CustomExtension, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SerialNumber, PKCS_ECDSA_P256_SHA256,
};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use crate::error::{Error, Result};

/// Arcs of 1.3.6.1.4.1.11129.2.4.3 (precertificate poison).
const POISON_ARCS: &[u64] = &[1, 3, 6, 1, 4, 1, 11129, 2, 4, 3];
/// Arcs of 1.3.6.1.4.1.11129.2.4.2 (embedded SCT list).
const SCT_LIST_ARCS: &[u64] = &[1, 3, 6, 1, 4, 1, 11129, 2, 4, 2];

pub(crate) fn rcgen_err(what: &str) -> impl Fn(rcgen::Error) -> Error + '_ {
    move |e| Error::Issue(format!("{what}: {e}"))
}

fn datetime(unix_seconds: i64) -> Result<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp(unix_seconds)
        .map_err(|e| Error::Issue(format!("time {unix_seconds} out of range: {e}")))
}

/// A random positive serial number of 16 bytes (RFC 5280 §4.1.2.2 allows
/// up to 20).
pub(crate) fn random_serial() -> Result<Vec<u8>> {
    let mut s = vec![0u8; 16];
    getrandom::getrandom(&mut s)
        .map_err(|e| Error::Issue(format!("no randomness for a serial: {e}")))?;
    s[0] = (s[0] & 0x7f) | 0x40;
    Ok(s)
}

/// The CA: key, certificate and the hashes logs and clients use.
pub(crate) struct TestCa {
    key: KeyPair,
    cert: rcgen::Certificate,
    der: Vec<u8>,
    /// `SHA-256` of the CA's SubjectPublicKeyInfo (`PreCert.issuer_key_hash`).
    pub(crate) key_hash: [u8; 32],
    /// `SHA-256` of the CA certificate (static-ct-api chain fingerprint).
    pub(crate) fingerprint: [u8; 32],
}

/// A leaf certificate issued by [`TestCa::issue`].
pub(crate) struct Issued {
    /// The precertificate (poisoned), for precert-based issuance.
    pub(crate) precert_der: Option<Vec<u8>>,
    /// The parameters, to issue the final certificate.
    params: CertificateParams,
    key: KeyPair,
}

impl Issued {
    /// The subject's private key (PKCS #8 DER).
    pub(crate) fn key_pkcs8_der(&self) -> Vec<u8> {
        self.key.serialize_der()
    }
}

impl TestCa {
    /// A fresh CA valid from a day before `now` for ten years.
    pub(crate) fn new(now: i64) -> Result<Self> {
        let key =
            KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(rcgen_err("test CA key"))?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, "ct-testlog");
        dn.push(DnType::CommonName, "ct-testlog CA");
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params.serial_number = Some(SerialNumber::from_slice(&random_serial()?));
        params.not_before = datetime(now - 86_400)?;
        params.not_after = datetime(now + 10 * 365 * 86_400)?;
        let cert = params
            .self_signed(&key)
            .map_err(rcgen_err("test CA certificate"))?;
        let der = cert.der().to_vec();
        Ok(TestCa {
            key_hash: Sha256::digest(key.public_key_der()).into(),
            fingerprint: Sha256::digest(&der).into(),
            key,
            cert,
            der,
        })
    }

    /// The DER CA certificate.
    pub(crate) fn der(&self) -> &[u8] {
        &self.der
    }

    /// Starts issuing a leaf for `dns_name` valid until `not_after` (and
    /// from an hour before `now`, or from a day before `not_after` if that
    /// is earlier, so already expired certificates can be made): draws the
    /// subject key and serial and, with `precert`, signs the poisoned
    /// precertificate. [`TestCa::finish`] then signs the certificate
    /// itself.
    pub(crate) fn issue(
        &self,
        dns_name: &str,
        now: i64,
        not_after: i64,
        precert: bool,
    ) -> Result<Issued> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(rcgen_err("leaf key"))?;
        let mut params = CertificateParams::new(vec![dns_name.to_owned()])
            .map_err(rcgen_err("leaf parameters"))?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, dns_name);
        params.distinguished_name = dn;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        params.serial_number = Some(SerialNumber::from_slice(&random_serial()?));
        params.not_before = datetime((now - 3600).min(not_after - 86_400))?;
        params.not_after = datetime(not_after)?;
        let precert_der = if precert {
            let mut p = params.clone();
            let mut poison = CustomExtension::from_oid_content(POISON_ARCS, vec![0x05, 0x00]);
            poison.set_criticality(true);
            p.custom_extensions.push(poison);
            let c = p
                .signed_by(&key, &self.cert, &self.key)
                .map_err(rcgen_err("precertificate"))?;
            Some(c.der().to_vec())
        } else {
            None
        };
        Ok(Issued {
            precert_der,
            params,
            key,
        })
    }

    /// The final certificate: with `sct_list_value` (the `extnValue`
    /// contents of the SCT list extension) for a precert-based issuance,
    /// or the plain certificate with `None`.
    pub(crate) fn finish(
        &self,
        issued: Issued,
        sct_list_value: Option<Vec<u8>>,
    ) -> Result<Vec<u8>> {
        let mut params = issued.params;
        if let Some(v) = sct_list_value {
            params
                .custom_extensions
                .push(CustomExtension::from_oid_content(SCT_LIST_ARCS, v));
        }
        let c = params
            .signed_by(&issued.key, &self.cert, &self.key)
            .map_err(rcgen_err("certificate"))?;
        Ok(c.der().to_vec())
    }
}
