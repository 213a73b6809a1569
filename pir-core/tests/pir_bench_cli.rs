//! `pir-bench` as a user runs it: a tiny database, a batch on two threads,
//! update rounds, and the in-run fields the benchmark targets
//! (`docs/benchmarks.md`) read.

use std::process::Command;

/// Runs `pir-bench <args> --json`, checks it succeeded and answered
/// correctly, and returns its JSON object.
fn pir_bench(args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_pir-bench"))
        .args(args)
        .arg("--json")
        .output()
        .expect("run pir-bench");
    assert!(
        out.status.success(),
        "pir-bench failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["all_correct"], true);
    v
}

/// The number `obj[key]`; `what` names `obj` in the failure message.
fn num(obj: &serde_json::Value, what: &str, key: &str) -> f64 {
    obj[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{what}{key} missing"))
}

#[test]
fn pir_bench_reports_in_run_speedups() {
    let v = pir_bench(&[
        "--db-bits",
        "20",
        "--trials",
        "2",
        "--batch",
        "2",
        "--threads",
        "2",
    ]);
    assert_eq!(v["batch"], 2);
    assert_eq!(v["threads"], 2);
    let f = |k: &str| num(&v, "", k);
    let (single, batch, one) = (
        f("single_answer_ms_min"),
        f("answer_ms_min"),
        f("one_thread_answer_ms_min"),
    );
    assert!(single > 0.0 && batch > 0.0 && one > 0.0);
    // the speedups are exactly the ratios of the reported times
    assert!((f("batch_speedup") - 2.0 * single / batch).abs() < 1e-9);
    assert!((f("thread_speedup") - one / batch).abs() < 1e-9);
    // on two threads the query-only steps ran beside the scan, and the
    // ceiling ratio is the streamed bytes ÷ the best answer ÷ the
    // all-threads bandwidth
    assert!(f("overlapped_ms") > 0.0);
    let stream = f("answer_stream_bytes");
    assert!(stream > f("db_bytes"));
    let ceiling = stream / (batch / 1e3) / 1e9 / f("mem_bw_all_threads_gb_s");
    assert!((f("all_threads_bw_fraction") - ceiling).abs() < 1e-9 * ceiling);
    // the overlap ceiling: for the batch, over the whole database, its
    // fraction the ratio of its reported times (measured for the kernels
    // with a synthetic pass, AVX2 and AVX-512 VNNI, absent for the others)
    let o = &v["overlap_ceiling"];
    if !matches!(v["kernel"].as_str(), Some("avx2" | "avx512-vnni")) {
        assert!(o.is_null());
    } else {
        let g = |k: &str| num(o, "overlap_ceiling.", k);
        assert_eq!(o["batch"], 2);
        assert_eq!(o["bytes"].as_f64(), Some(f("db_bytes")));
        let (s, c, b) = (g("stream_ms"), g("compute_ms"), g("both_ms"));
        assert!(s > 0.0 && c > 0.0 && b > 0.0);
        assert!((g("overlap_fraction") - s.max(c) / b).abs() < 1e-9);
        assert!(g("bound_fraction") > 0.0);
    }
    // the cached pass: the batch's real pass over a cache-resident
    // database, its fraction k·bytes ÷ (pass × peak)
    let c = &v["cached_pass"];
    if v["mac_peak_g_per_s"].is_null() {
        assert!(c.is_null());
    } else {
        let g = |k: &str| num(c, "cached_pass.", k);
        assert_eq!(c["batch"], 2);
        assert_eq!(c["kernel"], v["kernel"]);
        let expect = 2.0 * g("bytes") / (g("pass_ms") / 1e3 * g("mac_peak_g_per_s") * 1e9);
        assert!((g("fraction") - expect).abs() < 1e-9 * expect);
    }
}

#[test]
fn pir_bench_without_batch_or_threads_has_no_speedups() {
    let v = pir_bench(&["--db-bits", "20", "--trials", "1"]);
    assert!(v["batch_speedup"].is_null() && v["thread_speedup"].is_null());
    assert!(v["single_answer_ms_min"].is_null() && v["one_thread_answer_ms_min"].is_null());
    // one thread: the steps run in order, and there is no all-threads ceiling
    assert_eq!(v["overlapped_ms"].as_f64(), Some(0.0));
    assert!(v["all_threads_bw_fraction"].is_null());
    // the one-core stream ratios: the streamed bytes ÷ the best answer ÷
    // the bandwidth, and the database's share of those bytes, which is
    // what `bw_fraction` would be at the stream's ratio
    let f = |k: &str| num(&v, "", k);
    let (stream, db) = (f("answer_stream_bytes"), f("db_bytes"));
    let expect = stream / (f("answer_ms_min") / 1e3) / 1e9 / f("mem_bw_gb_s");
    assert!((f("answer_stream_fraction") - expect).abs() < 1e-9 * expect);
    assert!((f("bw_fraction_ceiling") - db / stream).abs() < 1e-12);
    let at_ceiling = f("answer_stream_fraction") * f("bw_fraction_ceiling");
    assert!((f("bw_fraction") - at_ceiling).abs() < 1e-9 * at_ceiling);
}

#[test]
fn pir_bench_times_every_update_round() {
    let v = pir_bench(&[
        "--db-bits",
        "20",
        "--trials",
        "3",
        "--update-fraction",
        "0.01",
    ]);
    let u = &v["update"];
    assert_eq!(u["answers_correct_after_update"], true);
    assert_eq!(u["rounds"], 3);
    // a sorted list of three timings
    let times = |key: &str| -> Vec<f64> {
        let t: Vec<f64> = u[key]
            .as_array()
            .unwrap_or_else(|| panic!("{key} missing"))
            .iter()
            .map(|x| x.as_f64().expect("seconds"))
            .collect();
        assert_eq!(t.len(), 3, "{key}");
        assert!(t.windows(2).all(|w| w[0] <= w[1]), "{key} sorted: {t:?}");
        t
    };
    let all = times("update_seconds_all");
    let f = |k: &str| num(u, "", k);
    // the median and the best of the rounds
    assert_eq!(f("update_seconds"), all[1]);
    assert_eq!(f("update_seconds_min"), all[0]);
    // DBSetup timed as often, and the ratios: median ÷ median, best ÷ best
    let setups = times("setup_seconds_all");
    assert!(setups[0] > 0.0);
    assert_eq!(f("setup_seconds"), setups[1]);
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
    assert!(close(f("speedup_vs_setup") * all[1], setups[1]));
    assert!(close(f("speedup_vs_setup_best") * all[0], setups[0]));
    // and the first setup alone (what the ratio was before), without the
    // one-off prefetch measurement
    let first = f("speedup_vs_first_setup") * all[1];
    let prep = v["prep_seconds"].as_f64().expect("prep_seconds");
    let tune = v["prep_tune_seconds"].as_f64().expect("tune");
    assert!(close(first, prep - tune));
}

#[test]
fn pir_bench_reports_memory_the_multiply_bound_and_other_shapes() {
    let v = pir_bench(&["--db-bits", "20", "--trials", "2", "--batch", "2"]);
    let f = |k: &str| num(&v, "", k);
    // getrusage's peak covers at least the database, and the ratio is it
    let rss = f("peak_rss_bytes");
    assert!(rss >= f("db_bytes"));
    assert!((f("peak_rss_over_db") - rss / f("db_bytes")).abs() < 1e-9);
    assert!(f("db_setup_peak_bytes") > f("db_bytes"));
    if v["mac_peak_g_per_s"].is_null() {
        // the scalar kernel has no multiply ceiling
        assert_eq!(v["kernel"], "scalar");
    } else {
        assert!(f("mac_peak_g_per_s") > 0.0 && f("clock_ghz") > 0.0);
        let per_cycle = f("mac_peak_g_per_s") / f("clock_ghz");
        assert!((f("macs_per_cycle") - per_cycle).abs() < 1e-9 * per_cycle);
        assert!(f("simplepir_bound_fraction") > 0.0 && f("simplepir_bound_fraction_wall") > 0.0);
        let s = f("answer_cpu_share");
        assert!(s > 0.0 && s <= 1.0);
    }
    // the same bits as a taller database: 2^17 records as 2^12 × 2^5
    let v = pir_bench(&["--db-bits", "20", "--trials", "1", "--rows-log", "12"]);
    assert_eq!(
        (v["rows"].as_u64(), v["cols"].as_u64()),
        (Some(4096), Some(32))
    );
}

#[test]
fn pir_bench_refuses_sizes_outside_its_range() {
    for (bits, rows) in [
        ("19", None),
        ("37", None),
        ("20", Some("19")),
        ("20", Some("4")),
    ] {
        let mut args = vec!["--db-bits", bits, "--json"];
        if let Some(r) = rows {
            args.extend(["--rows-log", r]);
        }
        let out = Command::new(env!("CARGO_BIN_EXE_pir-bench"))
            .args(&args)
            .output()
            .expect("run pir-bench");
        assert!(!out.status.success(), "{args:?} should be refused");
    }
}

/// `--cached-pass-batches`: the real pass over a cache-resident database
/// for each batch size, each fraction the ratio of its reported times, and
/// no database built.
#[test]
fn pir_bench_times_the_cached_pass_per_batch_size() {
    let out = Command::new(env!("CARGO_BIN_EXE_pir-bench"))
        .args(["--cached-pass-batches", "1,3", "--json"])
        .output()
        .expect("run pir-bench");
    assert!(
        out.status.success(),
        "pir-bench failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert!(v["db_bytes"].is_null(), "no database is built: {v}");
    let passes = v["cached_passes"].as_array().expect("cached_passes");
    assert_eq!(passes.len(), 2);
    for (p, k) in passes.iter().zip([1u64, 3]) {
        assert_eq!(p["batch"].as_u64(), Some(k));
        let c = &p["cached_pass"];
        if v["kernel"] == "scalar" {
            assert!(c.is_null());
            continue;
        }
        let g = |key: &str| num(c, "cached_pass.", key);
        assert_eq!(c["batch"].as_u64(), Some(k));
        let expect = k as f64 * g("bytes") / (g("pass_ms") / 1e3 * g("mac_peak_g_per_s") * 1e9);
        assert!((g("fraction") - expect).abs() < 1e-9 * expect);
    }
    for bad in ["0", "65", ""] {
        let out = Command::new(env!("CARGO_BIN_EXE_pir-bench"))
            .args(["--cached-pass-batches", bad])
            .output()
            .expect("run pir-bench");
        assert!(!out.status.success(), "{bad:?} should be refused");
    }
}
