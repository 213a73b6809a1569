//! Chrome's log list v3 (ct-core `LogList::from_json`), as a client or the
//! ingester loads it: parsing never panics; every accepted log's ID is the
//! hash of its key and is found by `find_by_log_id`; every accepted
//! timestamp prints as RFC 3339 and parses back to itself.
#![no_main]

use ct_core::civil::format_rfc3339;
use ct_core::loglist::parse_rfc3339;
use ct_core::LogList;
use libfuzzer_sys::fuzz_target;

/// 0000-01-01T00:00:00Z ..= 9999-12-31T23:59:59Z.
const PRINTABLE: std::ops::RangeInclusive<i64> = -62_167_219_200..=253_402_300_799;

fn round_trips(t: i64) {
    if PRINTABLE.contains(&t) {
        assert_eq!(parse_rfc3339(&format_rfc3339(t)).ok(), Some(t), "{t}");
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(t) = parse_rfc3339(s) {
            round_trips(t);
        }
    }
    let Ok(list) = LogList::from_json(data) else {
        return;
    };
    if let Some(t) = list.log_list_timestamp {
        round_trips(t);
    }
    for (_, log) in list.logs() {
        assert_eq!(log.log_id, log.key.log_id());
        let found = list
            .find_by_log_id(&log.log_id)
            .expect("listed log is found");
        assert_eq!(found.log_id, log.log_id);
        let _ = log.checkpoint_origin();
        if let Some(s) = &log.state {
            round_trips(s.timestamp);
        }
        if let Some(t) = &log.temporal_interval {
            round_trips(t.start_inclusive);
            round_trips(t.end_exclusive);
            let _ = t.contains(0);
        }
    }
});
