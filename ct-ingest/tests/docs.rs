//! docs/ingest.md names every metric `--metrics-file` writes.

/// The metric names of a Prometheus text exposition (`# TYPE` lines).
fn exported_names(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// Whether `doc` names `name` as code: `` `name` `` or `` `name{labels}` ``.
fn names_metric(doc: &str, name: &str) -> bool {
    doc.contains(&format!("`{name}`")) || doc.contains(&format!("`{name}{{"))
}

#[test]
fn every_metric_is_in_the_ingest_doc() {
    // The rendering lists every metric (with `# TYPE`), per-log gauges
    // included, even before any run has been recorded.
    let names = exported_names(&ct_ingest::metrics::render_prometheus());
    assert!(names.len() >= 13, "{names:?}");
    assert!(
        names.iter().all(|n| n.starts_with("ct_ingest_")),
        "{names:?}"
    );
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/ingest.md");
    let doc = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let missing: Vec<&String> = names.iter().filter(|n| !names_metric(&doc, n)).collect();
    assert!(
        missing.is_empty(),
        "metrics not named in docs/ingest.md: {missing:?}"
    );
}
