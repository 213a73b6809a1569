//! The `audit-sim` binary. `cost-report`: the server times come from this
//! machine or from the pir-bench files named on the command line, never
//! from anywhere else, and the report says which. `batch-chart`: draws
//! pir-bench batch runs, and refuses runs that are not one curve.

use std::path::Path;
use std::process::Command;

use audit_sim::cost::{CostReport, Measured};
use audit_sim::sim::{Detection, SimReport};

fn sim_report(dir: &Path) -> std::path::PathBuf {
    let r = SimReport {
        server: "http://127.0.0.1:1".into(),
        epochs: vec![1, 2],
        entries: 2001,
        db_bytes: 1 << 20,
        fill_ratio: 0.11,
        fill_ratio_stderr: 0.02,
        fill_probes: 200,
        measured: Measured {
            clients: 50,
            weeks: 2.0,
            audits_per_client_week: 21.0,
            upload_bytes_per_query: 480_000.0,
            download_bytes_per_query: 11_967.0,
            manifest_bytes_per_client_week: 5_000.0,
            server_core_seconds_per_query: 0.007,
            mean_batch: 3.0,
            client_seconds_per_audit: 0.004,
            db_bytes: 1 << 20,
            entries: 2001,
        },
        detection: Detection::default(),
        round_trip_seconds_mean: 0.02,
        retries: 0,
        retry_wait_seconds: 0.0,
        fallback: Default::default(),
        audits_failed: 0,
        audit_failures: Default::default(),
        fill_probes_failed: 0,
        wall_seconds: 20.0,
        report_files: Vec::new(),
    };
    let p = dir.join("sim-report.json");
    std::fs::write(&p, serde_json::to_vec(&r).unwrap()).unwrap();
    p
}

fn cost_report(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_audit-sim"))
        .arg("cost-report")
        .args(args)
        .output()
        .expect("run audit-sim")
}

fn read_report(out: &Path) -> (String, CostReport) {
    let md = std::fs::read_to_string(out.join("cost-report.md")).unwrap();
    let json = std::fs::read(out.join("cost-report.json")).unwrap();
    (md, serde_json::from_slice(&json).unwrap())
}

#[test]
fn named_pir_bench_files_are_the_only_timings() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_report(dir.path());
    let (b33, b35) = (dir.path().join("b33.json"), dir.path().join("b35.json"));
    std::fs::write(
        &b33,
        r#"{"answer_ms_median":52.6,"batch":1,"db_bytes":1073741824,"threads":1,"db_bits":33}"#,
    )
    .unwrap();
    std::fs::write(
        &b35,
        r#"{"answer_ms_median":171.0,"batch":1,"db_bytes":4294967296,"threads":1,"db_bits":35}"#,
    )
    .unwrap();
    let out = dir.path().join("out");
    let o = cost_report(&[
        "--sim",
        sim.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--pir-bench",
        b33.to_str().unwrap(),
        "--pir-bench",
        b35.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (md, r) = read_report(&out);
    assert_eq!(r.fit_points.len(), 2);
    assert_eq!(r.timings.measured_here, None);
    assert_eq!(
        r.timings.pir_bench_files,
        [b33.display().to_string(), b35.display().to_string()]
    );
    assert!(md.contains(&format!(
        "taken from the pir-bench files {}, {} (not measured by this report",
        b33.display(),
        b35.display()
    )));
    assert!(!md.contains("measured here on"), "{md}");
}

#[test]
fn measured_here_names_the_cpu_next_to_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_report(dir.path());
    let b35 = dir.path().join("b35.json");
    std::fs::write(
        &b35,
        r#"{"answer_ms_median":171.0,"batch":1,"db_bytes":4294967296,"threads":1,"db_bits":35}"#,
    )
    .unwrap();
    let out = dir.path().join("out");
    let o = cost_report(&[
        "--sim",
        sim.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--measure-bits",
        "16",
        "--trials",
        "1",
        "--batch-ks",
        "1,2",
        "--build-entries",
        "4096",
        "--pir-bench",
        b35.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (md, r) = read_report(&out);
    let here = r.timings.measured_here.expect("measured here");
    assert_eq!(here.cpu, audit_sim::cost::cpu_model());
    assert_eq!((here.log2_bits, here.trials), (vec![16], 1));
    assert_eq!(r.timings.pir_bench_files, [b35.display().to_string()]);
    assert_eq!(r.fit_points.len(), 2);
    // Batching and the fixed costs are measured here too, and say so.
    let batch = r.batch.as_ref().expect("batch curve measured here");
    assert_eq!(batch.points.iter().map(|p| p.k).collect::<Vec<_>>(), [1, 2]);
    assert!(batch
        .source
        .starts_with(&format!("measured here on {}", here.cpu)));
    let build = r.build_rates.as_ref().expect("build rates measured here");
    assert!(build.filter_source.contains("4096 random leaves"));
    assert!(r.fixed.as_ref().is_some_and(|f| f.usd_per_week > 0.0));
    assert!(md.contains("## The whole weekly bill at the real filter size"));
    assert!(
        md.contains(&format!("measured here on {} (", here.cpu)),
        "{md}"
    );
    assert!(md.contains(&format!(
        "; and taken from the pir-bench file {} (",
        b35.display()
    )));

    // A named file that is missing is an error, not a silent fallback.
    let o = cost_report(&[
        "--sim",
        sim.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--pir-bench",
        dir.path().join("missing.json").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("missing.json"));
}

/// `audit-sim batch-chart` on the committed Zen 3 curve: one SVG naming
/// every k, and a mixed set of runs refused with a message, not a chart.
#[test]
fn batch_chart_draws_committed_runs_and_refuses_mixed_ones() {
    let bench = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/bench/zen3-avx2");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("curve.svg");
    let files: Vec<_> = [1, 2, 4, 8, 16, 32, 64]
        .iter()
        .map(|k| bench.join(format!("b33-batch{k}.json")))
        .collect();
    let run = |files: &[std::path::PathBuf]| {
        Command::new(env!("CARGO_BIN_EXE_audit-sim"))
            .args(["batch-chart", "--title", "Zen 3 test", "--out"])
            .arg(&out)
            .args(files)
            .output()
            .expect("run audit-sim")
    };
    let o = run(&files);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("7 runs of 2^33 bits, k = 1, 2, 4, 8, 16, 32, 64"));
    let svg = std::fs::read_to_string(&out).unwrap();
    assert!(svg.starts_with("<?xml") && svg.contains("Zen 3 test"));
    assert!(svg.contains(">64</text>") && svg.contains("cached pass"));
    std::fs::remove_file(&out).unwrap();
    // a 2^35-bit run among 2^33-bit ones
    let mut mixed = files.clone();
    mixed.push(bench.join("b35.json"));
    let o = run(&mixed);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("b35.json") && err.contains("one database size"),
        "{err}"
    );
    assert!(!out.exists());
}
