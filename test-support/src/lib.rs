//! Dev-only support for the workspace's tests: one copy of each fixture
//! that several crates' tests share. Its own tests are the workspace's
//! checks on itself (the module graph of every crate, where unsafe code
//! may live, the docs' citations). No crate depends on it outside
//! `[dev-dependencies]`.
//!
//! * [`Rng`]: SplitMix64, the tests' reproducible randomness
//!   (`FAULT_SEED` replays a run).
//! * [`TinyFs`]: a small tmpfs for disk-full tests, unmounted on drop.
//! * [`fake`]: what the fake auditors of the client-side tests share: a
//!   valid manifest of one small database, and serving a router on
//!   127.0.0.1.
//! * [`stats`]: Pearson's χ² test, for the uniformity checks.

pub mod fake;
pub mod stats;

use std::path::PathBuf;
use std::process::Command;

/// SplitMix64 (Steele, Lea, Flood 2014): reproducible, not cryptographic.
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    /// Seeded from `FAULT_SEED` if set, else from the clock; prints the
    /// seed with the test's name, so that a failure can be replayed.
    pub fn from_env(test: &str) -> Rng {
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

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform enough in `[0, n)` for tests (`n = 0` gives 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// SplitMix64's published first outputs for seed 0.
    #[test]
    fn splitmix64_known_answers() {
        let mut r = Rng(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(r.next_u64(), 0x06C4_5D18_8009_454F);
        assert!(r.below(7) < 7);
        assert_eq!(r.below(0), 0);
    }
}
