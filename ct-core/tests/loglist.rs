//! Chrome log list v3 parsing against the hand-written fixture
//! tests/data/log_list.json.

mod common;

use ct_core::loglist::parse_rfc3339;
use ct_core::{Error, KeyType, LogApi, LogList, LogStateKind};
use serde_json::Value;

fn fixture() -> Value {
    serde_json::from_slice(&common::fixture("log_list.json")).unwrap()
}

fn parse(v: &Value) -> ct_core::Result<LogList> {
    LogList::from_json(v.to_string().as_bytes())
}

#[test]
fn fixture_parses() {
    let list = LogList::from_json(&common::fixture("log_list.json")).unwrap();
    assert_eq!(list.version.as_deref(), Some("1.2"));
    assert_eq!(
        list.log_list_timestamp,
        Some(parse_rfc3339("2025-06-01T12:00:00Z").unwrap())
    );
    assert_eq!(list.operators.len(), 2);
    assert_eq!(list.logs().count(), 4);

    let google = &list.operators[0];
    assert_eq!(google.name, "Google");
    assert_eq!(google.email, vec!["google-ct-logs@googlegroups.com"]);
    let icarus = &google.logs[0];
    assert_eq!(icarus.description, "Google 'Icarus' log");
    assert_eq!(
        icarus.log_id.to_base64(),
        "KTxRllTIOWW6qlD8WAfUt2+/WHopctykwwz05UVH9Hg="
    );
    assert_eq!(icarus.key.key_type(), KeyType::EcdsaP256);
    assert_eq!(
        icarus.api,
        LogApi::Rfc6962 {
            url: "https://ct.googleapis.com/icarus/".into()
        }
    );
    assert_eq!(icarus.mmd, 86400);
    let st = icarus.state.unwrap();
    assert_eq!(st.kind, LogStateKind::Retired);
    assert_eq!(st.timestamp, parse_rfc3339("2022-05-01T00:00:00Z").unwrap());
    assert!(icarus.temporal_interval.is_none());
    assert!(icarus.checkpoint_origin().is_none());

    let pilot = &google.logs[1];
    let st = pilot.state.unwrap();
    assert_eq!(st.kind, LogStateKind::ReadOnly);
    let (size, root) = st.final_tree_head.unwrap();
    assert_eq!(size, 1234);
    assert_eq!(
        common::b64e(&root),
        "qyJv/TObheataX8uFjAJsR+dJtJgNlfjzTe5CX8Ej2s="
    );

    let test_op = &list.operators[1];
    let rsa = &test_op.logs[0];
    assert_eq!(rsa.key.key_type(), KeyType::Rsa);
    assert_eq!(rsa.log_type.as_deref(), Some("test"));
    assert_eq!(rsa.state.unwrap().kind, LogStateKind::Usable);
    // Fractional seconds are truncated.
    assert_eq!(
        rsa.state.unwrap().timestamp,
        parse_rfc3339("2025-01-15T08:30:00Z").unwrap()
    );
    let ti = rsa.temporal_interval.unwrap();
    assert!(ti.contains(parse_rfc3339("2026-03-01T00:00:00Z").unwrap()));
    assert!(!ti.contains(parse_rfc3339("2026-07-01T00:00:00Z").unwrap()));

    let tiled = &test_op.logs[1];
    assert_eq!(
        tiled.api,
        LogApi::StaticCt {
            submission_url: "https://static.example.test/2026h1/".into(),
            monitoring_url: "https://static-mon.example.test/2026h1/".into(),
        }
    );
    assert_eq!(
        tiled.checkpoint_origin().as_deref(),
        Some("static.example.test/2026h1")
    );
    assert_eq!(tiled.state.unwrap().kind, LogStateKind::Qualified);
    assert_eq!(list.find_by_log_id(&tiled.log_id), Some(tiled));
    assert!(list.find_by_log_id(&ct_core::LogId::new([0; 32])).is_none());
}

#[test]
fn log_id_must_match_key() {
    let mut v = fixture();
    // Swap the two Google logs' IDs.
    let a = v["operators"][0]["logs"][0]["log_id"].clone();
    v["operators"][0]["logs"][0]["log_id"] = v["operators"][0]["logs"][1]["log_id"].clone();
    v["operators"][0]["logs"][1]["log_id"] = a;
    let r = parse(&v);
    assert!(
        matches!(r, Err(Error::LogIdMismatch { ref what }) if what.contains("Icarus")),
        "{r:?}"
    );
    // Same for tiled logs.
    let mut v = fixture();
    v["operators"][1]["tiled_logs"][0]["log_id"] = common::b64e(&[7; 32]).into();
    assert!(matches!(parse(&v), Err(Error::LogIdMismatch { .. })));
}

/// A named edit that makes the fixture invalid.
type Mutation = (&'static str, Box<dyn Fn(&mut Value)>);

#[test]
fn malformed_lists_are_rejected() {
    let cases: Vec<Mutation> = vec![
        (
            "no operators",
            Box::new(|v| {
                v.as_object_mut().unwrap().remove("operators");
            }),
        ),
        (
            "short log_id",
            Box::new(|v| {
                v["operators"][0]["logs"][0]["log_id"] = common::b64e(&[1; 31]).into();
            }),
        ),
        (
            "log_id not base64",
            Box::new(|v| {
                v["operators"][0]["logs"][0]["log_id"] = "???".into();
            }),
        ),
        (
            "key garbage",
            Box::new(|v| {
                v["operators"][0]["logs"][0]["key"] = common::b64e(b"not a key").into();
            }),
        ),
        (
            "missing key",
            Box::new(|v| {
                v["operators"][0]["logs"][0]
                    .as_object_mut()
                    .unwrap()
                    .remove("key");
            }),
        ),
        (
            "missing url",
            Box::new(|v| {
                v["operators"][0]["logs"][0]
                    .as_object_mut()
                    .unwrap()
                    .remove("url");
            }),
        ),
        (
            "missing monitoring_url",
            Box::new(|v| {
                v["operators"][1]["tiled_logs"][0]
                    .as_object_mut()
                    .unwrap()
                    .remove("monitoring_url");
            }),
        ),
        (
            "negative mmd",
            Box::new(|v| {
                v["operators"][0]["logs"][0]["mmd"] = (-1).into();
            }),
        ),
        (
            "two states",
            Box::new(|v| {
                v["operators"][0]["logs"][0]["state"]["usable"] =
                    serde_json::json!({"timestamp": "2020-01-01T00:00:00Z"});
            }),
        ),
        (
            "no known state",
            Box::new(|v| {
                v["operators"][0]["logs"][0]["state"] = serde_json::json!({"frozen": {}});
            }),
        ),
        (
            "bad timestamp",
            Box::new(|v| {
                v["operators"][0]["logs"][0]["state"]["retired"]["timestamp"] = "yesterday".into();
            }),
        ),
        (
            "inverted interval",
            Box::new(|v| {
                v["operators"][1]["logs"][0]["temporal_interval"]["end_exclusive"] =
                    "2025-01-01T00:00:00Z".into();
            }),
        ),
        (
            "bad final tree head",
            Box::new(|v| {
                v["operators"][0]["logs"][1]["state"]["readonly"]["final_tree_head"]
                    ["sha256_root_hash"] = "AAAA".into();
            }),
        ),
    ];
    for (why, mutate) in cases {
        let mut v = fixture();
        mutate(&mut v);
        assert!(parse(&v).is_err(), "{why} should be rejected");
    }
    assert!(matches!(LogList::from_json(b"{"), Err(Error::Json { .. })));
    assert!(matches!(LogList::from_json(b""), Err(Error::Json { .. })));
    let big = vec![b' '; ct_core::loglist::MAX_LOG_LIST_SIZE + 1];
    assert!(matches!(
        LogList::from_json(&big),
        Err(Error::TooLarge { .. })
    ));
}

#[test]
fn minimal_list_and_unknown_fields() {
    let v = serde_json::json!({ "operators": [], "something_new": [1, 2, 3] });
    let list = parse(&v).unwrap();
    assert!(list.operators.is_empty());
    assert!(list.version.is_none());
    assert!(list.log_list_timestamp.is_none());
}
