//! The operator guide and the protocol document name what the code exports:
//! every metric a running server registers is in docs/operator.md, every
//! stable API error code (with its status) is in docs/protocol.md's error
//! table and nothing else is, and the body cap is stated exactly.

use std::collections::BTreeSet;
use std::error::Error as StdError;
use std::sync::Arc;
use std::time::Duration;

use audit_proto::api::ErrorCode;
use auditor_server::service::Service;
use auditor_server::Config;

type TestResult = Result<(), Box<dyn StdError + Send + Sync>>;

fn doc(name: &str) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/");
    std::fs::read_to_string(format!("{path}{name}"))
        .unwrap_or_else(|e| panic!("reading docs/{name}: {e}"))
}

/// Whether `doc` names `name` as code: `` `name` `` or `` `name{labels}` ``
/// (so `auditor_epoch` is not found inside `auditor_epoch_entries`).
fn names_metric(doc: &str, name: &str) -> bool {
    doc.contains(&format!("`{name}`")) || doc.contains(&format!("`{name}{{"))
}

/// 3360790 → "3,360,790", as the docs write numbers.
fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The metric names of a Prometheus text exposition (`# TYPE` lines).
fn exported_names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn every_metric_is_in_the_operator_guide() -> TestResult {
    // A real server on 127.0.0.1:0 with no epoch: what /metrics shows at
    // start-up, plus every registered metric (labelled ones without series
    // are not in the text yet).
    let dir = tempfile::tempdir()?;
    let mut config = Config {
        epoch_dir: dir.path().join("epochs"),
        bind: "127.0.0.1:0".into(),
        ..Config::default()
    };
    config.schedule.build_if_missing = false;
    config.schedule.reload_seconds = 0;
    let svc = Arc::new(Service::new(config)?);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(svc.clone().run(listener, async {
        let _ = rx.await;
    }));
    let http = reqwest::Client::new();
    let mut text = None;
    for _ in 0..200 {
        if let Ok(r) = http.get(format!("http://{addr}/metrics")).send().await {
            assert_eq!(r.status(), 200);
            text = Some(r.text().await?);
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let _ = tx.send(());
    task.await??;
    let text = text.ok_or("the server did not answer /metrics")?;

    let registered: BTreeSet<String> = svc.state().metrics.names().iter().cloned().collect();
    let exported = exported_names(&text);
    assert!(
        exported.is_subset(&registered),
        "exported but not registered: {:?}",
        exported.difference(&registered).collect::<Vec<_>>()
    );
    // queries by outcome are exported from the start
    assert!(exported.contains("auditor_queries_total"), "{text}");
    assert!(registered.len() >= 14, "{registered:?}");

    let guide = doc("operator.md");
    let missing: Vec<&String> = registered
        .iter()
        .filter(|n| !names_metric(&guide, n))
        .collect();
    assert!(
        missing.is_empty(),
        "metrics not named in docs/operator.md: {missing:?}"
    );
    Ok(())
}

#[test]
fn every_error_code_is_in_the_protocol_error_table() {
    let protocol = doc("protocol.md");
    // rows `| 404 | `unknown_epoch` | …` of the error table
    let rows: BTreeSet<(u16, String)> = protocol
        .lines()
        .filter_map(|l| {
            let mut cells = l.strip_prefix('|')?.split('|').map(str::trim);
            let status: u16 = cells.next()?.parse().ok()?;
            let code = cells.next()?.strip_prefix('`')?.strip_suffix('`')?;
            Some((status, code.to_owned()))
        })
        .collect();
    let codes: BTreeSet<(u16, String)> = ErrorCode::ALL
        .iter()
        .map(|c| (c.http_status(), c.as_str().to_owned()))
        .collect();
    assert!(
        codes.is_subset(&rows),
        "error codes missing from docs/protocol.md (status, code): {:?}",
        codes.difference(&rows).collect::<Vec<_>>()
    );
    assert!(
        rows.is_subset(&codes),
        "docs/protocol.md lists codes the server does not send: {:?}",
        rows.difference(&codes).collect::<Vec<_>>()
    );
}

#[test]
fn the_body_cap_is_stated_exactly() {
    let cap = auditor_server::max_query_body();
    let largest_query = cap - 4096;
    for doc_name in ["operator.md", "protocol.md"] {
        let text = doc(doc_name);
        for n in [cap, largest_query] {
            assert!(
                text.contains(&thousands(n)),
                "docs/{doc_name} does not state {}",
                thousands(n)
            );
        }
    }
}

#[test]
fn thousands_separates_groups() {
    assert_eq!(thousands(7), "7");
    assert_eq!(thousands(4096), "4,096");
    assert_eq!(thousands(3_360_790), "3,360,790");
    assert_eq!(thousands(100_000), "100,000");
}
