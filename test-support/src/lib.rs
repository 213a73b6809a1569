//! Dev-only support for the workspace's tests: one copy of each fixture
//! that several crates' tests share. Its own tests are the workspace's
//! checks on itself (the module graph of every crate, where unsafe code
//! may live, the docs' citations). No crate depends on it outside
//! `[dev-dependencies]`.
//!
//! * [`Rng`]: ct-core's SplitMix64, the tests' reproducible randomness;
//!   [`rng_from_env`] seeds it so that `FAULT_SEED` replays a run.
//! * [`TinyFs`]: a small tmpfs for disk-full tests, unmounted on drop.
//! * [`fake`]: what the fake auditors of the client-side tests share: a
//!   valid manifest of one small database, and serving a router on
//!   127.0.0.1.
//! * [`stats`]: Pearson's χ² test, for the uniformity checks.

pub mod fake;
pub mod stats;

use std::path::PathBuf;
use std::process::Command;

/// The tests' generator: ct-core's SplitMix64 (reproducible, not
/// cryptographic). `Rng(seed)` starts a sequence.
pub use ct_core::splitmix::SplitMix64 as Rng;

/// A generator seeded from `FAULT_SEED` if set, else from the clock; prints
/// the seed with the test's name, so that a failure can be replayed.
pub fn rng_from_env(test: &str) -> Rng {
    let seed = std::env::var("FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    eprintln!("{test}: FAULT_SEED={seed}");
    Rng(seed)
}

/// A tmpfs mounted for one test (needs root), unmounted on drop.
#[derive(Debug)]
pub struct TinyFs(pub PathBuf);

impl TinyFs {
    /// Mounts a tmpfs of `size` (`mount -o size=…`, e.g. `"64k"`) at
    /// `dir`, creating it. The error says why (not root, no `mount`).
    pub fn mount(dir: PathBuf, size: &str) -> Result<TinyFs, String> {
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output()
            .map_err(|e| format!("mount: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
        }
        Ok(TinyFs(dir))
    }

    /// Grows or shrinks it to `size`.
    pub fn resize(&self, size: &str) -> Result<(), String> {
        let out = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .output()
            .map_err(|e| format!("mount: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        Ok(())
    }
}

impl Drop for TinyFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).output();
    }
}
