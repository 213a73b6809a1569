//! Who owns a `.building-<id>` directory, and removing those whose builder
//! died.
//!
//! An epoch is built in `.building-<id>` and published by renaming it
//! ([`crate::epochdir::EpochDir`]). A builder killed on the way (SIGKILL, a
//! crash, a power cut) leaves that directory behind, possibly with
//! partial files; it is never loaded (only `epoch-<id>` directories are),
//! but it holds disk space.
//!
//! Ownership is an exclusive advisory lock (`flock`, through
//! [`std::fs::File::try_lock`]) on `<root>/.building-<id>.lock`, taken
//! before the directory is created and held until it has been published
//! or removed. The kernel drops the lock when its process dies, however it
//! dies, so a `.building-*` directory whose lock can be taken belongs to
//! no living builder: [`remove_stale`] removes it (with
//! its lock file). A directory whose lock is held belongs to a builder
//! that is still running — another `auditor-server build-epoch` writing
//! into the same epoch directory, say — and is left alone.
//!
//! A lock file is unlinked only by a holder of its lock; a process that
//! opened it just before and locks it just after would hold a lock on a
//! file no longer in the directory, so `claim` checks that the file it
//! locked is still the one at its path, and tries again if not.

use std::collections::HashMap;
use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::{io, Error, Result};

/// Locks held by this process, by build directory.
static HELD: Mutex<Option<HashMap<PathBuf, File>>> = Mutex::new(None);

fn held() -> std::sync::MutexGuard<'static, Option<HashMap<PathBuf, File>>> {
    HELD.lock().unwrap_or_else(|p| p.into_inner())
}

/// The lock file of build directory `tmp` (`.building-<id>` →
/// `.building-<id>.lock`).
fn lock_path(tmp: &Path) -> PathBuf {
    let mut name = tmp.file_name().unwrap_or_default().to_owned();
    name.push(".lock");
    tmp.with_file_name(name)
}

/// Takes the lock of build directory `tmp` without waiting: `Ok(Some)`
/// with the locked file, `Ok(None)` if another builder holds it.
fn try_take(tmp: &Path) -> Result<Option<File>> {
    let path = lock_path(tmp);
    loop {
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io(&path))?;
        match f.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Ok(None),
            Err(TryLockError::Error(e)) => return Err(io(&path)(e)),
        }
        // Still the file at `path`? (Its holder may have unlinked it
        // between our open and our lock.)
        let ours = f.metadata().map_err(io(&path))?;
        match std::fs::metadata(&path) {
            Ok(now) if now.dev() == ours.dev() && now.ino() == ours.ino() => return Ok(Some(f)),
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io(&path)(e)),
        }
    }
}

/// Claims build directory `tmp` for this process (before it is created):
/// fails if another living builder holds it.
pub(crate) fn claim(tmp: &Path) -> Result<()> {
    if held().as_ref().is_some_and(|m| m.contains_key(tmp)) {
        return Err(Error::Config(format!(
            "{} is being built by this process already",
            tmp.display()
        )));
    }
    match try_take(tmp)? {
        Some(f) => {
            held()
                .get_or_insert_with(HashMap::new)
                .insert(tmp.to_owned(), f);
            Ok(())
        }
        None => Err(Error::Config(format!(
            "{} is being built by another running process",
            tmp.display()
        ))),
    }
}

/// Gives up this process's claim on `tmp` (published or removed): unlinks
/// the lock file, then releases the lock.
pub(crate) fn release(tmp: &Path) {
    let f = held().as_mut().and_then(|m| m.remove(tmp));
    if let Some(f) = f {
        let path = lock_path(tmp);
        if let Err(e) = std::fs::remove_file(&path) {
            tracing::warn!(path = %path.display(), error = %e, "could not remove a build lock file");
        }
        drop(f);
    }
}

/// Removes every `.building-*` directory (and lock file) under `root` that
/// no living builder holds: what builders killed mid-build left behind.
/// Returns the directories removed, each logged at WARN. Directories other
/// builders are writing are left alone.
pub(crate) fn remove_stale(root: &Path) -> Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    for e in std::fs::read_dir(root).map_err(io(root))? {
        let e = e.map_err(io(root))?;
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(rest) = name.strip_prefix(".building-") else {
            continue;
        };
        // A lock file whose directory is gone (a builder killed between
        // removing the one and unlinking the other) is stale too.
        let dir = match rest.strip_suffix(".lock") {
            Some(id) => root.join(format!(".building-{id}")),
            None => e.path(),
        };
        if held().as_ref().is_some_and(|m| m.contains_key(&dir)) {
            continue;
        }
        let Some(lock) = try_take(&dir)? else {
            continue;
        };
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(io(&dir))?;
            tracing::warn!(
                dir = %dir.display(),
                "removed a build directory its builder left behind (killed mid-build)"
            );
            removed.push(dir.clone());
        }
        let path = lock_path(&dir);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&path)(e)),
        }
        drop(lock);
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::epochdir::EpochDir;

    #[test]
    fn claimed_directories_are_kept_and_unclaimed_ones_removed() {
        let root = tempfile::tempdir().unwrap();
        let dir = EpochDir::open(root.path()).unwrap();
        // Left behind by a dead builder: a directory with a partial file
        // and its (unlocked) lock file, and one without a lock file.
        let dead = root.path().join(".building-000000000007");
        std::fs::create_dir(&dead).unwrap();
        std::fs::write(dead.join("db-0000.bits"), b"partial").unwrap();
        std::fs::write(lock_path(&dead), b"").unwrap();
        let bare = root.path().join(".building-000000000008");
        std::fs::create_dir(&bare).unwrap();
        // A build in progress in this process.
        let live = dir.begin(9).unwrap();
        std::fs::write(live.join("db-0000.bits"), b"being written").unwrap();
        // A build of another process: its lock held through another open
        // file description (flock locks conflict between them).
        let other = root.path().join(".building-000000000010");
        std::fs::create_dir(&other).unwrap();
        let other_lock = File::create(lock_path(&other)).unwrap();
        other_lock.lock().unwrap();

        let mut removed = dir.remove_stale_builds().unwrap();
        removed.sort();
        assert_eq!(removed, vec![dead.clone(), bare.clone()]);
        assert!(!dead.exists() && !lock_path(&dead).exists());
        assert!(!bare.exists() && !lock_path(&bare).exists());
        assert!(live.join("db-0000.bits").exists());
        assert!(other.exists());
        // Another process's claim is refused while it lives.
        assert!(claim(&other).is_err());
        drop(other_lock);
        assert_eq!(dir.remove_stale_builds().unwrap(), vec![other.clone()]);

        // Publishing releases the claim and its lock file.
        dir.commit(9, &live).unwrap();
        assert!(!lock_path(&live).exists());
        assert!(dir.remove_stale_builds().unwrap().is_empty());
        assert_eq!(dir.list().unwrap(), vec![9]);
    }

    #[test]
    fn a_second_claim_fails() {
        let root = tempfile::tempdir().unwrap();
        let dir = EpochDir::open(root.path()).unwrap();
        let tmp = dir.begin(3).unwrap();
        assert!(dir.begin(3).is_err());
        release(&tmp);
        std::fs::remove_dir_all(&tmp).unwrap();
        assert!(dir.begin(3).is_ok());
    }
}
