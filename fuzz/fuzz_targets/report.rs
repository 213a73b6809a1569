//! The misbehaviour report body of `POST /v1/reports` (audit-proto
//! `report::MisbehaviourReport`), as the auditor reads it from anyone:
//! parsing never panics, a report that parses and checks round-trips
//! through its own JSON to the same report and the same checked bytes.
#![no_main]

use audit_proto::report::MisbehaviourReport;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok((report, checked)) = MisbehaviourReport::from_json(data) else {
        return;
    };
    let json = serde_json::to_vec(&report).expect("serializes");
    let (back, back_checked) = MisbehaviourReport::from_json(&json).expect("its own JSON parses");
    assert_eq!(back, report);
    assert_eq!(back_checked, checked);
});
