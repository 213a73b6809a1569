//! An epoch's layout: how its a filters are grouped into PIR databases,
//! the names of its files, and the digest that binds them to its manifest.

use sha2::{Digest, Sha256};

/// The manifest's file name in an epoch directory.
pub const MANIFEST_FILE: &str = "manifest.json";

/// Partition of `a` filters of `filter_bits` bits into consecutive groups
/// of at most `target` bits (at least one filter each), sizes balanced:
/// returns (first filter, count) per database.
pub fn plan_dbs(a: u32, filter_bits: u64, target: u64) -> Vec<(u32, u32)> {
    let per = (target / filter_bits.max(1)).clamp(1, u64::from(a)) as u32;
    let n = a.div_ceil(per);
    let (base, extra) = (a / n, a % n);
    let mut out = Vec::with_capacity(n as usize);
    let mut first = 0;
    for i in 0..n {
        let count = base + u32::from(i < extra);
        out.push((first, count));
        first += count;
    }
    out
}

/// The digest that binds an epoch's bitmaps to its manifest: SHA-256 of
/// the exact bytes of `manifest.json` (what clients are served).
pub fn manifest_digest(manifest_json: &[u8]) -> [u8; 32] {
    Sha256::digest(manifest_json).into()
}

/// The bitmap file of database `id`.
pub(crate) fn bits_name(id: usize) -> String {
    format!("db-{id:04}.bits")
}

/// The NTT hint file of database `id`.
pub(crate) fn hint_name(id: usize) -> String {
    format!("db-{id:04}.hint")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_partitions_in_order() {
        for (a, fb, target) in [
            (768, 1000, 1 << 30),
            (768, 1 << 20, 1 << 26),
            (768, 1 << 35, 1 << 30),
            (5, 10, 25),
            (1, 8, 8),
        ] {
            let plan = plan_dbs(a, fb, target);
            let mut next = 0;
            for &(first, count) in &plan {
                assert_eq!(first, next);
                assert!(count >= 1);
                assert!(count == 1 || u64::from(count) * fb <= target);
                next += count;
            }
            assert_eq!(next, a);
            let max = plan.iter().map(|p| p.1).max().unwrap();
            let min = plan.iter().map(|p| p.1).min().unwrap();
            assert!(max - min <= 1, "balanced: {plan:?}");
        }
        assert_eq!(plan_dbs(768, 1 << 35, 1 << 30).len(), 768);
        assert_eq!(plan_dbs(768, 1000, 1 << 30).len(), 1);
    }
}
