//! The directory of persisted epochs: `epoch-<id>` directories published
//! by rename, `.building-<id>` directories claimed by their builder
//! (`crate::builddir`), pruning.

use std::path::{Path, PathBuf};

use crate::error::{io, Error, Result};

/// The directory of persisted epochs.
#[derive(Clone, Debug)]
pub struct EpochDir {
    root: PathBuf,
}

impl EpochDir {
    /// Opens (creating) `root`.
    pub fn open(root: &Path) -> Result<EpochDir> {
        std::fs::create_dir_all(root).map_err(io(root))?;
        Ok(EpochDir {
            root: root.to_owned(),
        })
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Published epoch ids (`epoch-<id>` directories), ascending.
    pub fn list(&self) -> Result<Vec<u64>> {
        let mut ids = Vec::new();
        for e in std::fs::read_dir(&self.root).map_err(io(&self.root))? {
            let e = e.map_err(io(&self.root))?;
            let name = e.file_name();
            if let Some(id) = name
                .to_str()
                .and_then(|n| n.strip_prefix("epoch-"))
                .and_then(|n| n.parse::<u64>().ok())
            {
                // Listed with or without a manifest: a published epoch that
                // lost it must be refused loudly, not skipped.
                if e.path().is_dir() {
                    ids.push(id);
                }
            }
        }
        ids.sort_unstable();
        Ok(ids)
    }

    /// The newest published epoch.
    pub fn latest(&self) -> Result<Option<u64>> {
        Ok(self.list()?.last().copied())
    }

    /// Directory of published epoch `id`.
    pub fn path(&self, id: u64) -> PathBuf {
        self.root.join(format!("epoch-{id:012}"))
    }

    /// Starts building epoch `id`: an empty private directory, claimed by
    /// this process until [`EpochDir::commit`] (or a failed build's
    /// removal) releases it (`crate::builddir`). Fails if another living
    /// process is building `id` here; a directory left by a dead builder
    /// is removed.
    pub fn begin(&self, id: u64) -> Result<PathBuf> {
        let tmp = self.root.join(format!(".building-{id:012}"));
        crate::builddir::claim(&tmp)?;
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(io(&tmp))?;
        }
        std::fs::create_dir(&tmp).map_err(io(&tmp))?;
        Ok(tmp)
    }

    /// Publishes a built directory atomically (rename; fails if another
    /// builder published `id` first).
    pub fn commit(&self, id: u64, tmp: &Path) -> Result<PathBuf> {
        let dst = self.path(id);
        if dst.exists() {
            return Err(Error::Config(format!(
                "{} exists: another builder published epoch {id} first",
                dst.display()
            )));
        }
        self.finish(tmp, &dst)?;
        Ok(dst)
    }

    /// Moves the finished build directory `tmp` to `dst` under the same
    /// root (e.g. a shard's staged epoch), fsyncs the root and releases
    /// the build's claim, lock file included.
    pub fn finish(&self, tmp: &Path, dst: &Path) -> Result<()> {
        std::fs::rename(tmp, dst).map_err(io(dst))?;
        crate::builddir::release(tmp);
        std::fs::File::open(&self.root)
            .and_then(|d| d.sync_all())
            .map_err(io(&self.root))
    }

    /// Removes a failed build's directory `tmp` and releases its claim.
    pub fn abandon(&self, tmp: &Path) {
        if let Err(rm) = std::fs::remove_dir_all(tmp) {
            if rm.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(dir = %tmp.display(), error = %rm, "could not remove a failed build");
            }
        }
        crate::builddir::release(tmp);
    }

    /// Deletes all but the newest `keep` epochs, and the build directories
    /// of dead builders ([`EpochDir::remove_stale_builds`]).
    pub fn prune(&self, keep: usize) -> Result<()> {
        let ids = self.list()?;
        for id in ids.iter().take(ids.len().saturating_sub(keep)) {
            let p = self.path(*id);
            std::fs::remove_dir_all(&p).map_err(io(&p))?;
        }
        self.remove_stale_builds()?;
        Ok(())
    }

    /// Removes every `.building-*` directory (and lock file) that no living
    /// builder holds: what builders killed mid-build left behind. Returns
    /// the directories removed, each logged at WARN. Directories other
    /// builders are writing are left alone.
    pub fn remove_stale_builds(&self) -> Result<Vec<PathBuf>> {
        crate::builddir::remove_stale(&self.root)
    }
}
