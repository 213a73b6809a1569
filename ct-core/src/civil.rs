//! Calendar arithmetic on Unix time: the one copy of the civil-date
//! conversions the workspace uses (log-list timestamps, monthly storage
//! partitions, report dates), and the wall clock as Unix seconds.
//!
//! The conversions are H. Hinnant's era-based algorithms ("chrono-Compatible
//! Low-Level Date Algorithms") on the proleptic Gregorian calendar; they are
//! exact for every `i64` day count whose year fits the arithmetic (far beyond
//! any certificate's validity).

/// Seconds in a day (Unix time has no leap seconds).
pub const SECONDS_PER_DAY: i64 = 86_400;

/// Days since 1970-01-01 of the proleptic Gregorian date (`y`, `m` in
/// 1..=12, `d` in 1..=31). The caller checks that the date exists.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let (m, d) = (i64::from(m), i64::from(d));
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Days since 1970-01-01 → (year, month 1..=12, day 1..=31).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    // Both casts are in range: d is 1..=31 and m is 1..=12 by construction.
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Whether `y` is a Gregorian leap year.
pub fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

/// Days in month `m` (1..=12) of year `y`; 0 for a month outside 1..=12.
pub fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(y) => 29,
        2 => 28,
        _ => 0,
    }
}

/// Unix seconds as RFC 3339 UTC, `YYYY-MM-DDTHH:MM:SSZ`.
pub fn format_rfc3339(unix_s: i64) -> String {
    let (days, rem) = (
        unix_s.div_euclid(SECONDS_PER_DAY),
        unix_s.rem_euclid(SECONDS_PER_DAY),
    );
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The wall clock in Unix seconds (0 if the clock is before 1970). Not on
/// wasm32-unknown-unknown, which has no clock: the browser client takes
/// "now" from its caller.
#[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
pub fn unix_now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The wall clock in Unix milliseconds (0 if the clock is before 1970).
/// Not on wasm32-unknown-unknown (see [`unix_now_s`]).
#[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
pub fn unix_now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Naive reference: walk the calendar one day at a time from 1970-01-01.
    #[test]
    fn conversions_match_a_day_by_day_walk() {
        let (mut y, mut m, mut d) = (1970i64, 1u32, 1u32);
        for z in 0..(200 * 366) {
            assert_eq!(civil_from_days(z), (y, m, d), "day {z}");
            assert_eq!(days_from_civil(y, m, d), z);
            d += 1;
            if d > days_in_month(y, m) {
                d = 1;
                m += 1;
                if m > 12 {
                    m = 1;
                    y += 1;
                }
            }
        }
        // And backwards from 1969-12-31.
        let (mut y, mut m, mut d) = (1969i64, 12u32, 31u32);
        for z in (-(100 * 366)..0).rev() {
            assert_eq!(civil_from_days(z), (y, m, d), "day {z}");
            assert_eq!(days_from_civil(y, m, d), z);
            if d == 1 {
                if m == 1 {
                    y -= 1;
                    m = 12;
                } else {
                    m -= 1;
                }
                d = days_in_month(y, m);
            } else {
                d -= 1;
            }
        }
    }

    #[test]
    fn known_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_454), (2026, 1, 1));
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        // 2024-11-01T00:00:00Z = 1 730 419 200 (date -u -d 2024-11-01 +%s).
        assert_eq!(
            days_from_civil(2024, 11, 1) * SECONDS_PER_DAY,
            1_730_419_200
        );
        assert_eq!(format_rfc3339(951_827_696), "2000-02-29T12:34:56Z");
        assert_eq!(format_rfc3339(-1), "1969-12-31T23:59:59Z");
        assert!(!is_leap(1900) && is_leap(2000) && is_leap(2024) && !is_leap(2100));
        assert_eq!(days_in_month(2024, 2), 29);
        assert_eq!(days_in_month(2023, 13), 0);
    }
}
