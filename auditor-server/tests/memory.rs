//! The memory check against what a build really allocates: epochs built
//! in this process (its own test binary, one test, so no other test
//! allocates meanwhile), their peak resident set measured (`VmHWM`, reset
//! through `/proc/self/clear_refs` before each build) and compared with
//! the figure a build is refused by: `memory::need(..).peak()` for a build
//! from hashes in memory, `memory::need_streamed(..).peak()` for a shard
//! that streams the snapshot from an object store. The databases hold 512
//! filters of 2^21 bits over 2^18 entries, so the bitmaps (128 MiB)
//! outweigh the snapshot parts and the fill's scratch, as they do at
//! internet scale: an estimate that left the bitmaps out would be exceeded.
//! Linux only.
#![cfg(target_os = "linux")]

use std::time::Instant;

use auditor_server::epoch::{build_epoch, BuildParams, Snapshot};
use auditor_server::memory;
use auditor_server::objstore::build_streamed;
use auditor_server::objstore::Objects;
use sha2::{Digest, Sha256};

/// A field of `/proc/self/status` in bytes (`VmHWM`, `VmRSS`).
fn status_bytes(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = text
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field}"));
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("a number of kB");
    kib * 1024
}

/// Resets the high-water mark to what is resident now (Linux ≥ 4.0) and
/// returns that.
fn reset_peak() -> u64 {
    std::fs::write("/proc/self/clear_refs", "5").expect("reset VmHWM");
    status_bytes("VmRSS:")
}

/// Holds `peak` (measured above the start) against `need`: never more
/// than the estimate (plus 4 MiB: thread stacks, the allocator), most of
/// it really reached, and more than the estimate without the bitmaps.
fn hold(what: &str, peak: u64, need: &memory::Need) {
    let model = need.peak();
    eprintln!(
        "{what}: measured peak {:.1} MiB above the start, model {:.1} MiB ({need:?})",
        peak as f64 / 1048576.0,
        model as f64 / 1048576.0
    );
    assert!(
        peak <= model + (4 << 20),
        "{what}: the build allocated {peak} bytes, the check allows {model}"
    );
    assert!(
        peak >= model / 2,
        "{what}: the build allocated {peak} bytes, far below the model's {model}"
    );
    // Without its bitmaps the model would not cover what the build
    // allocates.
    assert!(
        peak > model - need.records + (4 << 20),
        "{what}: {peak} bytes measured; an estimate without the bitmaps would allow them"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_check_covers_what_a_build_allocates() {
    let n = 1u32 << 18;
    let mut hashes: Vec<[u8; 32]> = (0..n)
        .map(|i| Sha256::digest(i.to_le_bytes()).into())
        .collect();
    hashes.sort_unstable();
    let snap = Snapshot {
        now_s: 1_700_000_000,
        hashes,
        coverage: Vec::new(),
    };
    let mut config = auditor_server::Config::default();
    config.epoch.param_set = "toy-insecure-d64".into();
    config.epoch.allow_insecure_params = true;
    config.epoch.filters = 512;
    config.epoch.db_bits_target = 1 << 29;
    let bp = BuildParams::from_config(&config).expect("build params");
    assert_eq!(bp.params.id, pir_core::params::TOY.id);

    // A single server's build, from the hashes in memory.
    let dir = tempfile::tempdir().expect("temp dir");
    let before = reset_peak();
    let built = build_epoch(&snap, 1, &bp, dir.path()).expect("build");
    let peak = status_bytes("VmHWM:").saturating_sub(before);
    let own: Vec<u32> = (0..built.manifest.dbs.len() as u32).collect();
    hold(
        "in memory",
        peak,
        &memory::need(&built.manifest, &own, true).expect("need"),
    );
    drop(built);

    // A shard's build, streaming the snapshot from a local object store
    // in parts of 2^15 entries.
    let objects = Objects::open(&format!("file://{}", dir.path().join("objects").display()))
        .expect("object store");
    let spec = auditor_server::plan::plan_snapshot(&snap, &config, 2).expect("plan");
    objects
        .prepare_in_parts(&spec, &snap.hashes, 1 << 15)
        .await
        .expect("prepare");
    let own: Vec<u32> = (0..spec.manifest.dbs.len() as u32).collect();
    let out = dir.path().join("shard");
    std::fs::create_dir_all(&out).expect("out dir");
    let before = reset_peak();
    let stream = objects.open_snapshot(&spec).await.expect("open");
    assert_eq!(stream.index().parts.len(), 8);
    let built = build_streamed(
        stream,
        spec.manifest.clone(),
        own.clone(),
        bp,
        out,
        Instant::now(),
    )
    .await
    .expect("streamed build");
    let peak = status_bytes("VmHWM:").saturating_sub(before);
    assert_eq!(built.manifest, spec.manifest);
    let need = memory::need_streamed(&spec.manifest, &own).expect("need");
    assert_eq!(need.snapshot, 0, "a streamed build holds no term in |S|");
    hold("streamed", peak, &need);
}
