//! The memory check against what a build really allocates: an epoch built
//! in this process (its own test binary, so no other test allocates
//! meanwhile), its peak resident set measured (`VmHWM`, reset through
//! `/proc/self/clear_refs` before the build) and compared with
//! `memory::need(..).peak()`, the figure a build is refused by. The shard
//! holds 256 filters of 2^21 bits over 2^18 entries, so the bitmaps (64 MiB)
//! outweigh the leaf hashes and their keys (16 MiB), as they do at
//! internet scale. Linux only.
#![cfg(target_os = "linux")]

use auditor_server::epoch::{build_epoch, BuildParams, Snapshot};
use auditor_server::memory::{self, Budget};
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

#[test]
fn the_memory_check_covers_what_a_build_allocates() {
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
    let bp = BuildParams {
        filters: 256,
        k: 8,
        db_bits_target: 1 << 28,
        params: pir_core::params::TOY,
        progress: false,
        shards: None,
        budget: Budget::default(),
    };
    let dir = tempfile::tempdir().expect("temp dir");
    // Reset the high-water mark to what is resident now (Linux ≥ 4.0).
    std::fs::write("/proc/self/clear_refs", "5").expect("reset VmHWM");
    let before = status_bytes("VmRSS:");
    let built = build_epoch(&snap, 1, &bp, dir.path()).expect("build");
    let peak = status_bytes("VmHWM:").saturating_sub(before);
    let own: Vec<u32> = (0..built.manifest.dbs.len() as u32).collect();
    let need = memory::need(&built.manifest, &own, true).expect("need");
    let model = need.peak();
    eprintln!(
        "measured peak {:.1} MiB above the start, model {:.1} MiB ({need:?})",
        peak as f64 / 1048576.0,
        model as f64 / 1048576.0
    );
    // Never more than the model (plus 4 MiB: thread stacks, the allocator)…
    assert!(
        peak <= model + (4 << 20),
        "the build allocated {peak} bytes, the check allows {model}"
    );
    // …and the model is not vacuous: the build really reaches most of it.
    assert!(
        peak >= model / 2,
        "the build allocated {peak} bytes, far below the model's {model}"
    );
    // The fill phase is the larger one here: the check counts the bitmaps.
    assert!(
        need.records + need.snapshot + need.fill
            > need.serving() + need.transient + need.snapshot / 2
    );
    assert_eq!(model, need.records + need.snapshot + need.fill);
}
