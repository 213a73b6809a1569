//! The stored form of a downloaded entry: its `notAfter`, which decides
//! when it leaves S. Used by both log clients ([`crate::rfc6962`],
//! [`crate::static_ct`]) when they decode an entry.

use ct_core::leaf::SignedEntry;
use ct_core::x509::entry_validity;

/// `notAfter` assumed for a logged entry whose certificate validity cannot
/// be parsed: its SCT timestamp plus this many seconds (1,200 days, longer
/// than any certificate lifetime CAs were ever allowed to issue under the
/// Baseline Requirements, 39 months). Such an entry is in the verified tree,
/// so it is kept rather than dropped; erring on "too long" only keeps it in
/// S a little longer.
pub const UNPARSABLE_VALIDITY_FALLBACK_S: i64 = 1_200 * 86_400;

/// `notAfter` of a logged entry (Unix seconds), or, if its certificate
/// cannot be parsed, the SCT timestamp plus
/// [`UNPARSABLE_VALIDITY_FALLBACK_S`] (logged as a warning).
pub fn entry_not_after(entry: &SignedEntry, sct_timestamp_ms: u64, leaf_index: u64) -> i64 {
    match entry_validity(entry) {
        Ok(v) => v.not_after,
        Err(e) => {
            tracing::warn!(leaf_index, error = %e, "certificate validity unparsable; using the fallback lifetime");
            i64::try_from(sct_timestamp_ms / 1000)
                .unwrap_or(i64::MAX)
                .saturating_add(UNPARSABLE_VALIDITY_FALLBACK_S)
        }
    }
}
