//! A snapshot of S sorted on local disk in bounded memory: what the
//! coordinator (`epoch prepare`) plans and uploads, at any |S|.
//!
//! The active leaf hashes stream from the store (after the coverage, as in
//! [`super::snapshot`]) into [`FANOUT`] spill files by their first byte.
//! Each spill file, in order, is sorted and deduplicated in memory when it
//! holds at most `max_run` hashes; a larger one is split again by the next
//! byte, recursively (SHA-256 leaf hashes are uniform, so each level divides
//! a file by 256). The sorted hashes are appended to one file, and |S| and
//! the set digest ([`crate::layout::set_digest`]) are taken from it in one
//! more pass. Memory: one run of at most `max_run` hashes, the spill
//! files' write buffers and one read chunk, whatever |S|. Disk: twice
//! 32 B × |S| at the most (the spill files and the sorted file).

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use futures_util::TryStreamExt as _;
use sha2::{Digest, Sha256};

use crate::error::{io, Error, Result};

/// Spill files per level: one per value of a hash byte.
const FANOUT: usize = 256;
/// Write buffer of each spill file.
const SPILL_BUFFER: usize = 32 << 10;
/// Hashes sorted in memory at once by default: 64 MiB.
pub const DEFAULT_MAX_RUN: usize = 1 << 21;
/// Hashes read per chunk from the sorted file: 1 MiB.
const CHUNK: usize = 1 << 15;
/// Deepest split (the hash has 32 bytes; 8 levels split 2^64 ways).
const MAX_DEPTH: usize = 8;

/// The sorted, deduplicated leaf hashes of a snapshot, on disk.
#[derive(Debug)]
pub struct SortedSnapshot {
    /// Entries active at this time (Unix seconds) are in S.
    pub now_s: i64,
    /// Per-log coverage, read before the hashes.
    pub coverage: Vec<ct_store::Coverage>,
    /// |S|.
    pub entries: u64,
    /// [`crate::layout::set_digest`] of S.
    pub set_sha256: [u8; 32],
    /// The sorted file (inside `_dir`).
    sorted: PathBuf,
    _dir: tempfile::TempDir,
}

impl SortedSnapshot {
    /// Snapshots the store at `now_s` into a temporary directory under
    /// `parent`, sorting runs of at most `max_run` hashes in memory.
    pub async fn from_store(
        store: &ct_store::Store,
        now_s: i64,
        parent: &Path,
        max_run: usize,
    ) -> Result<SortedSnapshot> {
        let coverage = store.coverage().await?;
        std::fs::create_dir_all(parent).map_err(io(parent))?;
        let dir = tempfile::Builder::new()
            .prefix(".snapshot-")
            .tempdir_in(parent)
            .map_err(io(parent))?;
        let mut spill = Spill::create(dir.path(), "s")?;
        let mut stream = store.active_leaf_hashes(now_s);
        while let Some(h) = stream.try_next().await? {
            spill.push(&h, 0)?;
        }
        drop(stream);
        let files = spill.finish()?;
        let root = dir.path().to_owned();
        tokio::task::spawn_blocking(move || {
            SortedSnapshot::sort(files, now_s, coverage, dir, &root, max_run)
        })
        .await?
    }

    /// The sorted snapshot of `hashes` (any order, duplicates allowed):
    /// tests and tools.
    pub fn from_hashes(
        hashes: impl IntoIterator<Item = [u8; 32]>,
        now_s: i64,
        parent: &Path,
        max_run: usize,
    ) -> Result<SortedSnapshot> {
        let dir = tempfile::Builder::new()
            .prefix(".snapshot-")
            .tempdir_in(parent)
            .map_err(io(parent))?;
        let mut spill = Spill::create(dir.path(), "s")?;
        for h in hashes {
            spill.push(&h, 0)?;
        }
        let files = spill.finish()?;
        let root = dir.path().to_owned();
        SortedSnapshot::sort(files, now_s, Vec::new(), dir, &root, max_run)
    }

    fn sort(
        files: Vec<PathBuf>,
        now_s: i64,
        coverage: Vec<ct_store::Coverage>,
        dir: tempfile::TempDir,
        root: &Path,
        max_run: usize,
    ) -> Result<SortedSnapshot> {
        let sorted = root.join("sorted");
        let mut out = BufWriter::new(File::create(&sorted).map_err(io(&sorted))?);
        for f in files {
            sort_file(&f, 1, max_run.max(1), &mut out)?;
        }
        out.into_inner()
            .map_err(|e| Error::Io {
                path: sorted.display().to_string(),
                source: e.into_error(),
            })?
            .sync_all()
            .map_err(io(&sorted))?;
        let mut snap = SortedSnapshot {
            now_s,
            coverage,
            entries: 0,
            set_sha256: [0; 32],
            sorted,
            _dir: dir,
        };
        let entries = std::fs::metadata(&snap.sorted)
            .map_err(io(&snap.sorted))?
            .len()
            / 32;
        // SHA-256(SET_DOMAIN ‖ u64be(|S|) ‖ h_1 ‖ … ‖ h_|S|), as set_digest.
        let mut d = Sha256::new();
        d.update(crate::layout::SET_DOMAIN);
        d.update(entries.to_be_bytes());
        snap.for_each_chunk(|c| {
            d.update(c.as_flattened());
            Ok(())
        })?;
        snap.entries = entries;
        snap.set_sha256 = d.finalize().into();
        Ok(snap)
    }

    /// A reader of the sorted hashes from the start.
    pub fn reader(&self) -> Result<SortedReader> {
        let path = self.sorted.clone();
        let r = BufReader::new(File::open(&path).map_err(io(&path))?);
        Ok(SortedReader { r, path })
    }

    /// Calls `f` on the sorted hashes, 2^15 (1 MiB) at a time, in order.
    pub fn for_each_chunk(&self, mut f: impl FnMut(&[[u8; 32]]) -> Result<()>) -> Result<()> {
        let path = &self.sorted;
        let mut r = BufReader::new(File::open(path).map_err(io(path))?);
        let mut buf = vec![[0u8; 32]; CHUNK];
        loop {
            let n = read_hashes(&mut r, &mut buf).map_err(io(path))?;
            if n == 0 {
                return Ok(());
            }
            f(&buf[..n])?;
        }
    }
}

/// Reads a [`SortedSnapshot`]'s hashes in order.
#[derive(Debug)]
pub struct SortedReader {
    r: BufReader<File>,
    path: PathBuf,
}

impl SortedReader {
    /// Fills `buf` with the next hashes; returns how many (0 at the end).
    pub fn next_into(&mut self, buf: &mut [[u8; 32]]) -> Result<usize> {
        read_hashes(&mut self.r, buf).map_err(io(&self.path))
    }
}

/// Reads up to `buf.len()` whole hashes; 0 at the end.
fn read_hashes(r: &mut impl Read, buf: &mut [[u8; 32]]) -> std::io::Result<usize> {
    let bytes = buf.as_flattened_mut();
    let mut got = 0;
    while got < bytes.len() {
        match r.read(&mut bytes[got..])? {
            0 => break,
            n => got += n,
        }
    }
    if !got.is_multiple_of(32) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "a spill file ends inside a hash",
        ));
    }
    Ok(got / 32)
}

/// Sorts the spill file `path` (hashes sharing their first `depth` bytes)
/// into `out`, splitting it by byte `depth` while it holds more than
/// `max_run` hashes; removes it.
fn sort_file(path: &Path, depth: usize, max_run: usize, out: &mut impl Write) -> Result<()> {
    let len = std::fs::metadata(path).map_err(io(path))?.len();
    let count = usize::try_from(len / 32).unwrap_or(usize::MAX);
    if count <= max_run || depth >= MAX_DEPTH {
        let mut run = vec![[0u8; 32]; count];
        let mut r = File::open(path).map_err(io(path))?;
        let n = read_hashes(&mut r, &mut run).map_err(io(path))?;
        run.truncate(n);
        run.sort_unstable();
        run.dedup();
        out.write_all(run.as_flattened()).map_err(io(path))?;
    } else {
        let parent = path.parent().unwrap_or(Path::new("."));
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut spill = Spill::create(parent, &name)?;
        let mut r = BufReader::new(File::open(path).map_err(io(path))?);
        let mut buf = vec![[0u8; 32]; CHUNK];
        loop {
            let n = read_hashes(&mut r, &mut buf).map_err(io(path))?;
            if n == 0 {
                break;
            }
            for h in &buf[..n] {
                spill.push(h, depth)?;
            }
        }
        drop(r);
        std::fs::remove_file(path).map_err(io(path))?;
        for f in spill.finish()? {
            sort_file(&f, depth + 1, max_run, out)?;
        }
        return Ok(());
    }
    std::fs::remove_file(path).map_err(io(path))
}

/// Up to [`FANOUT`] spill files `<prefix>-<byte>` in one directory, each
/// created at its first hash.
struct Spill {
    dir: PathBuf,
    prefix: String,
    files: Vec<Option<(PathBuf, BufWriter<File>)>>,
}

impl Spill {
    fn create(dir: &Path, prefix: &str) -> Result<Spill> {
        Ok(Spill {
            dir: dir.to_owned(),
            prefix: prefix.to_owned(),
            files: (0..FANOUT).map(|_| None).collect(),
        })
    }

    fn push(&mut self, h: &[u8; 32], byte: usize) -> Result<()> {
        let i = h[byte] as usize;
        let slot = &mut self.files[i];
        if slot.is_none() {
            let p = self.dir.join(format!("{}-{i:02x}", self.prefix));
            let f = File::create(&p).map_err(io(&p))?;
            *slot = Some((p, BufWriter::with_capacity(SPILL_BUFFER, f)));
        }
        match slot {
            Some((p, w)) => w.write_all(h).map_err(io(p)),
            None => Ok(()),
        }
    }

    /// Flushes and closes every file; returns them in byte order.
    fn finish(self) -> Result<Vec<PathBuf>> {
        let mut out = Vec::new();
        for (p, w) in self.files.into_iter().flatten() {
            w.into_inner().map_err(|e| Error::Io {
                path: p.display().to_string(),
                source: e.into_error(),
            })?;
            out.push(p);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(i: u64) -> [u8; 32] {
        Sha256::digest(i.to_le_bytes()).into()
    }

    /// Any order, duplicates and run size give the sorted, deduplicated
    /// set and its digest; a run size of 2 forces splits down several
    /// levels.
    #[test]
    fn sorts_and_deduplicates_in_bounded_runs() {
        let tmp = tempfile::tempdir().unwrap();
        let mut hashes: Vec<[u8; 32]> = (0..20_000u64).map(|i| hash(i % 15_000)).collect();
        hashes.reverse();
        let mut want = hashes.clone();
        want.sort_unstable();
        want.dedup();
        for max_run in [2, 7, 100, DEFAULT_MAX_RUN] {
            let snap = SortedSnapshot::from_hashes(hashes.iter().copied(), 5, tmp.path(), max_run)
                .unwrap();
            assert_eq!(snap.entries, 15_000);
            assert_eq!(snap.set_sha256, crate::plan::set_digest(&want));
            let mut got = Vec::new();
            snap.for_each_chunk(|c| {
                got.extend_from_slice(c);
                Ok(())
            })
            .unwrap();
            assert_eq!(got, want, "max_run {max_run}");
        }
        // nothing is left behind once the snapshot is dropped
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    }

    #[test]
    fn the_empty_set() {
        let tmp = tempfile::tempdir().unwrap();
        let snap = SortedSnapshot::from_hashes([], 5, tmp.path(), 10).unwrap();
        assert_eq!(snap.entries, 0);
        assert_eq!(snap.set_sha256, crate::plan::set_digest(&[]));
        snap.for_each_chunk(|_| panic!("no chunk")).unwrap();
    }
}
