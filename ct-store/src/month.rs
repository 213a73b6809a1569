//! Calendar months (UTC) of PostgreSQL's monthly `entries` partitions:
//! the `expiry_month` partition key of a `notAfter`, and the month of a
//! partition's name.

use ct_core::civil;

/// PostgreSQL `expiry_month` of 2100-01: entries whose `notAfter` is at or
/// beyond 2100-01-01T00:00:00Z live in the single partition `entries_pfar`
/// (created by the migration, never dropped).
pub(crate) const PG_FAR_MONTH: i64 = 2100 * 12;

/// A calendar month (UTC) as `year * 12 + (month - 1)`.
fn month_of(unix_s: i64) -> i64 {
    let (y, m, _) = civil::civil_from_days(unix_s.div_euclid(civil::SECONDS_PER_DAY));
    y * 12 + i64::from(m) - 1
}

/// First second of month `idx` (see [`month_of`]).
pub(crate) fn month_start(idx: i64) -> i64 {
    // rem_euclid(12) + 1 is in 1..=12.
    let month = (idx.rem_euclid(12) + 1) as u32;
    civil::days_from_civil(idx.div_euclid(12), month, 1) * civil::SECONDS_PER_DAY
}

/// PostgreSQL `expiry_month` of a `notAfter`: [`month_of`] clamped to
/// `[0, PG_FAR_MONTH]` (see `migrations/postgres`).
pub(crate) fn pg_month(not_after: i64) -> i16 {
    i16::try_from(month_of(not_after).clamp(0, PG_FAR_MONTH)).unwrap_or(i16::MAX)
}

/// The month of a monthly partition's name, `entries_pYYYYMM` (`None` for
/// other tables).
pub(crate) fn partition_month(name: &str) -> Option<i64> {
    let digits = name.strip_prefix("entries_p")?;
    if digits.len() != 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let y: i64 = digits[..4].parse().ok()?;
    let m: i64 = digits[4..].parse().ok()?;
    (1..=12).contains(&m).then_some(y * 12 + m - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_and_partition_names() {
        // 2026-11-22T01:02:53Z
        let t = 1_795_309_373;
        let m = month_of(t);
        assert_eq!(partition_month("entries_p202611"), Some(m));
        assert_eq!(month_start(m), 1_793_491_200); // 2026-11-01
        assert_eq!(month_start(m + 1), 1_796_083_200); // 2026-12-01
        assert_eq!(month_of(month_start(m + 1)), m + 1);
        assert_eq!(month_of(month_start(m + 1) - 1), m);
        assert_eq!(partition_month("entries_pfar"), None);
        assert_eq!(partition_month("entries_p202613"), None);
        assert_eq!(month_start(PG_FAR_MONTH), 4_102_444_800); // 2100-01-01
        assert_eq!(i64::from(pg_month(253_402_300_799)), PG_FAR_MONTH);
        assert_eq!(i64::from(pg_month(4_102_444_799)), PG_FAR_MONTH - 1);
        assert_eq!(pg_month(-1), 1969 * 12 + 11);
        assert_eq!(pg_month(i64::MIN / 2), 0);
        assert_eq!(i64::from(pg_month(t)), m);
    }
}
