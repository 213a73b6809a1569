//! Calendar arithmetic on Unix time: the one copy of the civil-date
//! conversions the workspace uses (log-list timestamps, monthly storage
//! partitions, report dates), the wall clock as Unix seconds, and the
//! daily or interval [`Schedule`] of the ingest and epoch-build loops.
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

/// When a recurring job runs (an ingest, an epoch build), as the
/// `[schedule]` section of ct-ingest's and auditor-server's configs says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// Every `n` seconds, measured from the start of the previous run.
    Interval(u64),
    /// Daily at this many seconds after 00:00 UTC.
    Daily(u32),
}

impl Schedule {
    /// The schedule a config's `interval_seconds` and `daily` (`HH:MM`
    /// UTC) keys ask for: at most one of them, `None` when neither is set.
    pub fn from_keys(
        interval_seconds: Option<u64>,
        daily: Option<&str>,
    ) -> Result<Option<Self>, crate::Error> {
        let bad = |reason: String| crate::Error::Malformed {
            what: "[schedule]",
            reason,
        };
        match (interval_seconds, daily) {
            (Some(_), Some(_)) => Err(bad("set interval_seconds or daily, not both".into())),
            (Some(0), None) => Err(bad("interval_seconds must be > 0".into())),
            (Some(n), None) => Ok(Some(Schedule::Interval(n))),
            (None, Some(hhmm)) => parse_hhmm(hhmm)
                .map(|at| Some(Schedule::Daily(at)))
                .ok_or_else(|| bad(format!("daily must be HH:MM (UTC), got {hhmm:?}"))),
            (None, None) => Ok(None),
        }
    }

    /// Seconds from `now_s` (Unix) to the next run; `last_start_s` is when
    /// the previous run started (for intervals; `None`: run now).
    pub fn seconds_until_next(&self, now_s: i64, last_start_s: Option<i64>) -> u64 {
        match *self {
            Schedule::Interval(n) => match last_start_s {
                Some(last) => {
                    let due = last.saturating_add(i64::try_from(n).unwrap_or(i64::MAX));
                    u64::try_from(due.saturating_sub(now_s)).unwrap_or(0)
                }
                None => 0,
            },
            Schedule::Daily(at) => {
                let day = now_s.rem_euclid(SECONDS_PER_DAY);
                let at = i64::from(at);
                let wait = if at > day {
                    at - day
                } else {
                    at + SECONDS_PER_DAY - day
                };
                u64::try_from(wait).unwrap_or(0)
            }
        }
    }
}

/// `HH:MM` (UTC, surrounding blanks allowed) to seconds after midnight;
/// `None` unless 00:00 ≤ it ≤ 23:59.
fn parse_hhmm(s: &str) -> Option<u32> {
    let (h, m) = s.trim().split_once(':')?;
    let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
    (h <= 23 && m <= 59).then_some(h * 3600 + m * 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules() {
        assert_eq!(
            Schedule::from_keys(None, Some(" 01:30 ")).unwrap(),
            Some(Schedule::Daily(5_400))
        );
        assert_eq!(
            Schedule::from_keys(Some(60), None).unwrap(),
            Some(Schedule::Interval(60))
        );
        assert_eq!(Schedule::from_keys(None, None).unwrap(), None);
        for (i, d) in [
            (Some(60), Some("01:30")),
            (Some(0), None),
            (None, Some("1:60")),
        ] {
            let e = Schedule::from_keys(i, d).unwrap_err().to_string();
            assert!(e.contains("[schedule]"), "{e}");
        }
        for bad in ["1:60", "24:00", "0130", "a:b", "", "-1:00", "01:30:00"] {
            assert_eq!(parse_hhmm(bad), None, "{bad:?}");
        }
        assert_eq!(parse_hhmm("23:59"), Some(86_340));
        let day = 86_400 * 20_000;
        assert_eq!(Schedule::Daily(3600).seconds_until_next(day, None), 3600);
        assert_eq!(
            Schedule::Daily(3600).seconds_until_next(day + 3600, None),
            86_400
        );
        assert_eq!(Schedule::Daily(0).seconds_until_next(-1, None), 1);
        assert_eq!(Schedule::Interval(60).seconds_until_next(100, None), 0);
        assert_eq!(Schedule::Interval(60).seconds_until_next(100, Some(90)), 50);
        assert_eq!(Schedule::Interval(60).seconds_until_next(200, Some(90)), 0);
        assert_eq!(
            Schedule::Interval(u64::MAX).seconds_until_next(0, Some(0)),
            i64::MAX as u64
        );
    }

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
