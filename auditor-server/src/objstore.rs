//! Epochs across machines through object storage (`docs/operator.md`
//! §Sharded mode): the coordinator's `auditor-server epoch prepare` takes
//! the snapshot of S from the SQL store once and writes it, sorted and
//! checksummed, next to the epoch spec ([`crate::plan::EpochSpec`]: the
//! complete manifest with seeds, coverage, layout and shard map); every
//! shard streams and verifies it, builds its own databases, persists them
//! and reports ready; `auditor-server epoch publish` marks the epoch
//! published once every shard has, and only then do the shards serve it.
//!
//! Objects, under the store's prefix (`epochs/<id>` with the id in 12
//! digits, so names sort like ids):
//!
//! | object | written by | content |
//! |---|---|---|
//! | `epochs/<id>/snapshot-<h>/part-<i>.bin`, `index.bin` | `epoch prepare`, first (the parts, then the index); named after the spec's fresh seed ([`snapshot_object`]) | the leaf hashes, in parts of 2^20 ([`crate::snapshot`], format version 2) |
//! | `epochs/<id>/spec.json` | `epoch prepare`, last, created once (a conditional create): its presence makes the epoch *prepared* | the epoch spec |
//! | `epochs/<id>/dbs/db-<d>.bits`, `.hint` | the shard that built database d, before its ready marker | the database's files as persisted ([`DbArtifact`]) |
//! | `epochs/<id>/ready/<shard>` | each shard, after persisting and uploading its databases | [`ReadyMarker`], naming the spec's digest and its databases' files with their SHA-256 |
//! | `epochs/<id>/published` | `epoch publish`, once every shard is ready | [`PublishedMarker`], naming the spec's and manifest's digests and every database's files |
//! | `epochs/<id>/publish-timed-out` | `epoch publish`, when its deadline passes first | [`TimedOutMarker`] |
//!
//! The snapshot's format is [`crate::snapshot`]'s. A shard reads the index,
//! then the parts with a few GETs in flight ([`PARTS_IN_FLIGHT`]), each
//! retried a bounded number of times ([`PART_ATTEMPTS`], on top of the
//! client's own retries), and checks every part against the index before
//! any of its entries is used ([`SnapshotStream`]); the set digest of the
//! spec is checked once the last part is in. A shard builds nothing from a
//! snapshot that fails any check, and reports ready only after all passed.
//!
//! Two coordinators may race for one epoch id (a CronJob and a job started
//! by hand): each takes its snapshot first, then picks the next id, draws
//! fresh seeds and writes its snapshot under its own name. Only one of them
//! creates the spec; the other removes its snapshot and fails with
//! [`Error::EpochTaken`]. A coordinator killed before its spec is written
//! leaves parts (and perhaps an index) no spec names, which no shard reads
//! and `prune` removes ([`Objects::prune`]: whole epochs without a spec,
//! and snapshot directories other than the one the spec names). A shard
//! reports ready, and serves a published epoch, only under the spec its
//! databases were built from.
//!
//! Objects are replaced whole (a local directory writes a temporary file
//! and renames it; S3 makes an object visible only once its upload
//! completes), so a reader sees an old object, a new one or none. Snapshot
//! parts are single PUTs; database files are multipart uploads, which a
//! killed process leaves incomplete and invisible on S3 (the bucket's
//! lifecycle rule `AbortIncompleteMultipartUpload` removes them,
//! `docs/operator.md` §Object store), and as `<name>#<n>` staging files in
//! a local directory (removed by `prune` with their epoch).

use std::path::Path;
use std::sync::Arc;

use audit_proto::{Manifest, ShardMap};
use futures_util::StreamExt as _;
use object_store::path::Path as ObjPath;
use object_store::{ObjectStore, ObjectStoreExt as _, PutMode, PutPayload};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::{parse_url, Location};
use crate::epoch::SortedSnapshot;
use crate::error::{Error, Result};
use crate::layout::{bits_name, hint_name};
use crate::plan::EpochSpec;

mod s3;

pub use crate::snapshot::{
    SnapshotExpect, SnapshotIndex, VerifiedPart, MAX_SNAPSHOT_ENTRIES, PARTS_IN_FLIGHT,
};
/// Attempts at reading one snapshot part (each with the client's own
/// retries inside) before the read fails.
pub const PART_ATTEMPTS: u32 = 3;
/// Name of a snapshot's index object in its directory.
pub const SNAPSHOT_INDEX: &str = "index.bin";
/// Largest marker or spec object read.
const MAX_MARKER_BYTES: u64 = 64 << 10;
/// Time limit of one object-store request, body included (a snapshot or a
/// database file of several GiB is one request).
pub const OBJECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1800);
/// Retries of a failed object-store request (with exponential backoff,
/// within 5 minutes), before the error reaches the caller.
pub const OBJECT_RETRIES: usize = 5;
/// Bytes per part of a snapshot upload.
const UPLOAD_PART: usize = 16 << 20;
/// Newest epoch directories looked at when searching for the newest
/// prepared or published epoch.
const SCAN_DEPTH: usize = 16;

/// Domain separator of [`snapshot_object`].
const SNAPSHOT_NAME_DOMAIN: &[u8] = b"ct-audit/snapshot-object/v1";
/// Name of the spec object.
pub const SPEC_OBJECT: &str = "spec.json";
/// Name of the published marker.
pub const PUBLISHED_OBJECT: &str = "published";
/// Name of the marker `epoch publish` leaves when its deadline passes.
pub const TIMED_OUT_OBJECT: &str = "publish-timed-out";

fn store_err(what: &str, e: object_store::Error) -> Error {
    Error::ObjectStore {
        what: what.to_owned(),
        source: e,
    }
}

/// What a shard writes to `epochs/<id>/ready/<shard>` once its databases
/// of the epoch are persisted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadyMarker {
    /// The epoch.
    pub epoch: u64,
    /// The shard's index.
    pub shard: u32,
    /// The shard count it was configured with.
    pub count: u32,
    /// Its databases.
    pub databases: Vec<u32>,
    /// SHA-256 of the manifest its bitmaps are bound to
    /// ([`crate::layout::manifest_digest`]): the same on every shard.
    #[serde(with = "audit_proto::hex::array")]
    pub manifest_sha256: [u8; 32],
    /// SHA-256 of the spec it built from ([`EpochSpec::digest`]).
    #[serde(with = "audit_proto::hex::array")]
    pub spec_sha256: [u8; 32],
    /// Its databases' files as it uploaded them, one per database, by id.
    pub artifacts: Vec<DbArtifact>,
    /// When (Unix s).
    pub at: i64,
}

/// One built database in the object store (`epochs/<id>/dbs/`): its
/// bitmap file (bound to the manifest by its digest) and its NTT hint file,
/// byte for byte as the shard that built it persisted them, with their
/// SHA-256. A server that did not build the database (another replica of
/// the group, one that lost its disk) downloads and checks them, then
/// loads them like its own files.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DbArtifact {
    /// The database.
    pub db: u32,
    /// Bytes of its `.bits` file.
    pub bits_bytes: u64,
    /// SHA-256 of its `.bits` file.
    #[serde(with = "audit_proto::hex::array")]
    pub bits_sha256: [u8; 32],
    /// Bytes of its `.hint` file.
    pub hint_bytes: u64,
    /// SHA-256 of its `.hint` file.
    #[serde(with = "audit_proto::hex::array")]
    pub hint_sha256: [u8; 32],
}

/// What `epoch publish` writes to `epochs/<id>/published`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishedMarker {
    /// The epoch.
    pub epoch: u64,
    /// Number of shards that reported ready.
    pub shards: u32,
    /// SHA-256 of the spec every ready shard built from
    /// ([`EpochSpec::digest`]); a shard serves the epoch only if its spec
    /// has this digest.
    #[serde(with = "audit_proto::hex::array")]
    pub spec_sha256: [u8; 32],
    /// SHA-256 of the manifest the shards serve.
    #[serde(with = "audit_proto::hex::array")]
    pub manifest_sha256: [u8; 32],
    /// Every database's files, by id (from the ready markers).
    pub databases: Vec<DbArtifact>,
    /// When (Unix s).
    pub at: i64,
}

impl PublishedMarker {
    /// The marker of `spec`'s epoch, with `shards` ready and the database
    /// files `databases`, at `at`.
    pub fn for_spec(
        spec: &EpochSpec,
        shards: u32,
        mut databases: Vec<DbArtifact>,
        at: i64,
    ) -> PublishedMarker {
        databases.sort_by_key(|a| a.db);
        PublishedMarker {
            epoch: spec.manifest.epoch,
            shards,
            spec_sha256: spec.digest(),
            manifest_sha256: crate::layout::manifest_digest(&spec.manifest.to_json()),
            databases,
            at,
        }
    }

    /// Whether this marker publishes `spec`'s epoch: it names the spec and
    /// its manifest, and lists every database's files once, in order.
    pub fn names(&self, spec: &EpochSpec) -> bool {
        let m = &spec.manifest;
        self.epoch == m.epoch
            && self.spec_sha256 == spec.digest()
            && self.manifest_sha256 == crate::layout::manifest_digest(&m.to_json())
            && self.databases.len() == m.dbs.len()
            && self
                .databases
                .iter()
                .enumerate()
                .all(|(i, a)| a.db as usize == i)
    }
}

/// What `epoch publish` writes to `epochs/<id>/publish-timed-out` when
/// not every shard reported ready in time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimedOutMarker {
    /// The epoch.
    pub epoch: u64,
    /// The shards that were ready.
    pub ready: Vec<u32>,
    /// The shards that were not.
    pub missing: Vec<u32>,
    /// When (Unix s).
    pub at: i64,
}

/// Where a snapshot's hashes come from when it is uploaded.
enum Hashes<'a> {
    /// In memory (sorted, deduplicated).
    Slice(&'a [[u8; 32]]),
    /// Sorted on disk.
    Sorted(&'a SortedSnapshot),
}

/// The name of `spec`'s snapshot directory in its epoch's directory:
/// `snapshot-<16 hex digits>`, from the spec's fresh PIR seed, so that
/// two coordinators racing for one epoch id never write the same objects
/// and the spec that wins names its own snapshot. It holds
/// [`SNAPSHOT_INDEX`] and the parts ([`part_object`]).
pub fn snapshot_object(spec: &EpochSpec) -> String {
    let h = Sha256::new()
        .chain_update(SNAPSHOT_NAME_DOMAIN)
        .chain_update(spec.manifest.pir.seed)
        .finalize();
    format!("snapshot-{}", audit_proto::hex::encode(&h[..8]))
}

/// The name of part `i` in a snapshot directory.
pub fn part_object(i: u32) -> String {
    format!("part-{i:06}.bin")
}

/// The shard count an epoch is planned for.
pub fn shard_count(m: &Manifest) -> u32 {
    m.shards.as_ref().map_or(1, ShardMap::count)
}

/// An object store holding prepared epochs.
#[derive(Clone)]
pub struct Objects {
    store: Arc<dyn ObjectStore>,
    prefix: String,
    url: String,
    /// The directory of a `file://` store (its staging files of
    /// interrupted uploads are removed by [`Objects::prune`]).
    local: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for Objects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.url)
    }
}

impl std::fmt::Display for Objects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.url)
    }
}

impl Objects {
    /// Opens `url`: `file:///dir` (created if missing) or
    /// `s3://bucket/prefix`, with the credentials, region and endpoint of
    /// the `AWS_*` environment variables (`AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL` and
    /// `AWS_ALLOW_HTTP=true` for an S3-compatible store over plain HTTP).
    pub fn open(url: &str) -> Result<Objects> {
        Objects::open_with(url, std::env::vars())
    }

    /// [`Objects::open`] with the `AWS_*` settings taken from `vars`
    /// instead of the environment (other keys are ignored).
    pub fn open_with(
        url: &str,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Objects> {
        let mut local = None;
        let (store, prefix): (Arc<dyn ObjectStore>, String) = match parse_url(url)? {
            Location::Dir(dir) => {
                std::fs::create_dir_all(&dir).map_err(crate::error::io(&dir))?;
                let fs = object_store::local::LocalFileSystem::new_with_prefix(&dir)
                    .map_err(|e| store_err(url, e))?;
                local = Some(dir);
                (Arc::new(fs), String::new())
            }
            Location::S3 { bucket, prefix } => (s3::open(url, &bucket, vars)?, prefix),
        };
        Ok(Objects {
            store,
            prefix,
            url: url.to_owned(),
            local,
        })
    }

    /// Wraps any object store (e.g. `object_store::memory::InMemory` in
    /// tests), objects under `prefix`.
    pub fn from_store(store: Arc<dyn ObjectStore>, prefix: &str, name: &str) -> Objects {
        Objects {
            store,
            prefix: prefix.trim_matches('/').to_owned(),
            url: name.to_owned(),
            local: None,
        }
    }

    fn key(&self, rel: &str) -> ObjPath {
        if self.prefix.is_empty() {
            ObjPath::from(rel)
        } else {
            ObjPath::from(format!("{}/{rel}", self.prefix))
        }
    }

    fn epoch_key(&self, id: u64, name: &str) -> ObjPath {
        self.key(&format!("epochs/{id:012}/{name}"))
    }

    /// Every epoch directory in the store (prepared or not), ascending.
    pub async fn epoch_ids(&self) -> Result<Vec<u64>> {
        let dir = self.key("epochs");
        let list = self
            .store
            .list_with_delimiter(Some(&dir))
            .await
            .map_err(|e| store_err("listing epochs", e))?;
        let mut ids: Vec<u64> = list
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename())
            .filter(|n| n.len() == 12)
            .filter_map(|n| n.parse().ok())
            .collect();
        ids.sort_unstable();
        Ok(ids)
    }

    async fn exists(&self, key: &ObjPath) -> Result<bool> {
        match self.store.head(key).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(store_err(&format!("looking up {key}"), e)),
        }
    }

    async fn read_small(&self, key: &ObjPath) -> Result<Option<Vec<u8>>> {
        let got = match self.store.get(key).await {
            Ok(g) => g,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(store_err(&format!("reading {key}"), e)),
        };
        if got.meta.size > MAX_MARKER_BYTES {
            return Err(Error::Corrupt {
                path: key.to_string(),
                why: format!("{} bytes, more than {MAX_MARKER_BYTES}", got.meta.size),
            });
        }
        let mut stream = got.into_stream();
        let mut out = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| store_err(&format!("reading {key}"), e))?;
            if (out.len() + chunk.len()) as u64 > MAX_MARKER_BYTES {
                return Err(Error::Corrupt {
                    path: key.to_string(),
                    why: format!("more than {MAX_MARKER_BYTES} bytes"),
                });
            }
            out.extend_from_slice(&chunk);
        }
        Ok(Some(out))
    }

    async fn read_json<T: serde::de::DeserializeOwned>(&self, key: &ObjPath) -> Result<Option<T>> {
        match self.read_small(key).await? {
            None => Ok(None),
            Some(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| Error::Corrupt {
                    path: key.to_string(),
                    why: e.to_string(),
                }),
        }
    }

    async fn put(&self, key: &ObjPath, bytes: Vec<u8>) -> Result<()> {
        self.store
            .put(key, PutPayload::from(bytes))
            .await
            .map(drop)
            .map_err(|e| store_err(&format!("writing {key}"), e))
    }

    fn json<T: Serialize>(v: &T) -> Vec<u8> {
        // Plain structs of integers and strings: cannot fail.
        let mut b = serde_json::to_vec_pretty(v).unwrap_or_default();
        b.push(b'\n');
        b
    }

    /// The spec of epoch `id`, if it is prepared (checked like a spec
    /// file, and that it names epoch `id`).
    pub async fn spec(&self, id: u64) -> Result<Option<EpochSpec>> {
        let key = self.epoch_key(id, SPEC_OBJECT);
        let Some(bytes) = self.read_small(&key).await? else {
            return Ok(None);
        };
        let spec = EpochSpec::from_json(&bytes).map_err(|e| Error::Corrupt {
            path: key.to_string(),
            why: crate::error::error_chain(&e),
        })?;
        if spec.manifest.epoch != id {
            return Err(Error::Corrupt {
                path: key.to_string(),
                why: format!("names epoch {}", spec.manifest.epoch),
            });
        }
        Ok(Some(spec))
    }

    /// The newest prepared epoch (one with a spec), among the newest
    /// epoch directories.
    pub async fn newest_prepared(&self) -> Result<Option<u64>> {
        for id in self.epoch_ids().await?.into_iter().rev().take(SCAN_DEPTH) {
            if self.exists(&self.epoch_key(id, SPEC_OBJECT)).await? {
                return Ok(Some(id));
            }
        }
        Ok(None)
    }

    /// The newest published epoch, among the newest epoch directories.
    pub async fn newest_published(&self) -> Result<Option<u64>> {
        for id in self.epoch_ids().await?.into_iter().rev().take(SCAN_DEPTH) {
            if self.is_published(id).await? {
                return Ok(Some(id));
            }
        }
        Ok(None)
    }

    /// Writes epoch `spec`'s snapshot `hashes` (sorted, deduplicated: the
    /// set the spec's digest names), then the spec: the epoch is prepared
    /// once this returns. Returns the snapshot's size in bytes (parts and
    /// index).
    pub async fn prepare(&self, spec: &EpochSpec, hashes: &[[u8; 32]]) -> Result<u64> {
        self.prepare_in_parts(spec, hashes, crate::snapshot::PART_ENTRIES)
            .await
    }

    /// [`Objects::prepare`] with `part_entries` entries per part (tests:
    /// many parts of a small set).
    pub async fn prepare_in_parts(
        &self,
        spec: &EpochSpec,
        hashes: &[[u8; 32]],
        part_entries: u32,
    ) -> Result<u64> {
        let m = &spec.manifest;
        if hashes.len() as u64 != m.entries || crate::plan::set_digest(hashes) != spec.set_sha256 {
            return Err(Error::Internal(
                "the snapshot is not the set the spec was planned from".into(),
            ));
        }
        if self.exists(&self.epoch_key(m.epoch, SPEC_OBJECT)).await? {
            return Err(Error::EpochTaken { epoch: m.epoch });
        }
        let bytes = self
            .upload_snapshot(spec, Hashes::Slice(hashes), part_entries)
            .await?;
        self.create_spec(spec).await?;
        Ok(bytes)
    }

    /// [`Objects::prepare`] from a snapshot sorted on disk: the hashes
    /// stream from its file a part at a time, with at most
    /// [`PARTS_IN_FLIGHT`] parts uploading, so memory does not grow with
    /// |S|.
    pub async fn prepare_sorted(&self, spec: &EpochSpec, snap: &SortedSnapshot) -> Result<u64> {
        let m = &spec.manifest;
        if snap.entries != m.entries || snap.set_sha256 != spec.set_sha256 {
            return Err(Error::Internal(
                "the snapshot is not the set the spec was planned from".into(),
            ));
        }
        if self.exists(&self.epoch_key(m.epoch, SPEC_OBJECT)).await? {
            return Err(Error::EpochTaken { epoch: m.epoch });
        }
        let bytes = self
            .upload_snapshot(spec, Hashes::Sorted(snap), crate::snapshot::PART_ENTRIES)
            .await?;
        self.create_spec(spec).await?;
        Ok(bytes)
    }

    /// Writes `spec`'s snapshot: the parts (single PUTs, at most
    /// [`PARTS_IN_FLIGHT`] at once), then the index. On error the objects
    /// written are removed (what a killed coordinator leaves, `prune`
    /// removes). Returns the bytes written.
    async fn upload_snapshot(
        &self,
        spec: &EpochSpec,
        hashes: Hashes<'_>,
        part_entries: u32,
    ) -> Result<u64> {
        let written = self.upload_parts(spec, hashes, part_entries).await;
        if written.is_err() {
            self.remove_snapshot(spec).await;
        }
        written
    }

    async fn upload_parts(
        &self,
        spec: &EpochSpec,
        hashes: Hashes<'_>,
        part_entries: u32,
    ) -> Result<u64> {
        use crate::snapshot::{encode_part, part_count, PartInfo, MAX_PARTS, MAX_PART_ENTRIES};
        let m = &spec.manifest;
        let count = m.entries;
        // Parts of at least `part_entries`, few enough for the index.
        let per = part_entries
            .max(u32::try_from(count.div_ceil(u64::from(MAX_PARTS))).unwrap_or(u32::MAX))
            .clamp(1, MAX_PART_ENTRIES);
        let parts = u32::try_from(part_count(count, per))
            .ok()
            .filter(|&n| n <= MAX_PARTS)
            .ok_or_else(|| Error::Internal(format!("{count} entries: too many for a snapshot")))?;
        let dir = snapshot_object(spec);
        let (mut slice, mut reader, mut buf) = match hashes {
            Hashes::Slice(h) => (h.chunks(per as usize), None, Vec::new()),
            Hashes::Sorted(s) => (
                [].chunks(per as usize),
                Some(s.reader()?),
                vec![[0u8; 32]; per.min(u32::try_from(count).unwrap_or(u32::MAX)) as usize],
            ),
        };
        let mut infos: Vec<Option<PartInfo>> = vec![None; parts as usize];
        let mut uploads = futures_util::stream::FuturesUnordered::new();
        let mut total = 0u64;
        for i in 0..parts {
            let n = crate::snapshot::entries_of(count, per, i) as usize;
            let chunk: &[[u8; 32]] = match &mut reader {
                None => slice.next().unwrap_or_default(),
                Some(r) => {
                    let mut got = 0;
                    while got < n {
                        match r.next_into(&mut buf[got..n])? {
                            0 => break,
                            k => got += k,
                        }
                    }
                    &buf[..got]
                }
            };
            if chunk.len() != n {
                return Err(Error::Internal(format!(
                    "the snapshot ended inside part {i} ({} of {n} entries)",
                    chunk.len()
                )));
            }
            let bytes = encode_part(m.epoch, i, parts, chunk);
            total += bytes.len() as u64;
            infos[i as usize] = Some(PartInfo {
                bytes: bytes.len() as u64,
                sha256: Sha256::digest(&bytes).into(),
            });
            let key = self.epoch_key(m.epoch, &format!("{dir}/{}", part_object(i)));
            let store = self.store.clone();
            uploads.push(async move {
                store
                    .put(&key, PutPayload::from(bytes))
                    .await
                    .map(drop)
                    .map_err(|e| store_err(&format!("writing {key}"), e))
            });
            if uploads.len() >= PARTS_IN_FLIGHT {
                if let Some(r) = uploads.next().await {
                    r?;
                }
            }
        }
        while let Some(r) = uploads.next().await {
            r?;
        }
        if reader
            .as_mut()
            .is_some_and(|r| r.next_into(&mut [[0u8; 32]]).ok() != Some(0))
        {
            return Err(Error::Internal(
                "the snapshot holds more entries than planned".into(),
            ));
        }
        let index = SnapshotIndex {
            want: SnapshotExpect {
                epoch: m.epoch,
                count,
                set_sha256: spec.set_sha256,
            },
            part_entries: per,
            parts: infos.into_iter().flatten().collect(),
        }
        .encode();
        total += index.len() as u64;
        let key = self.epoch_key(m.epoch, &format!("{dir}/{SNAPSHOT_INDEX}"));
        self.put(&key, index).await?;
        Ok(total)
    }

    /// Removes `spec`'s snapshot objects, as far as it can (failures are
    /// logged: `prune` removes what is left).
    async fn remove_snapshot(&self, spec: &EpochSpec) {
        let dir = self.epoch_key(spec.manifest.epoch, &snapshot_object(spec));
        if let Err(e) = self.delete_under(&dir).await {
            tracing::warn!(dir = %dir, error = %crate::error::error_chain(&e), "could not remove the snapshot of a failed prepare");
        }
    }

    /// Deletes every object under `dir`.
    async fn delete_under(&self, dir: &ObjPath) -> Result<()> {
        let mut list = self.store.list(Some(dir));
        while let Some(meta) = list.next().await {
            let meta = meta.map_err(|e| store_err(&format!("listing {dir}"), e))?;
            match self.store.delete(&meta.location).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(store_err(&format!("deleting {}", meta.location), e)),
            }
        }
        Ok(())
    }

    /// Creates `spec`'s object, once: of two coordinators racing for this
    /// epoch id, exactly one creates it; the other removes its snapshot
    /// and gets [`Error::EpochTaken`].
    async fn create_spec(&self, spec: &EpochSpec) -> Result<()> {
        let m = &spec.manifest;
        let spec_key = self.epoch_key(m.epoch, SPEC_OBJECT);
        let created = self
            .store
            .put_opts(
                &spec_key,
                PutPayload::from(spec.to_json()),
                PutMode::Create.into(),
            )
            .await;
        if let Err(e) = created {
            self.remove_snapshot(spec).await;
            return Err(match e {
                object_store::Error::AlreadyExists { .. } => Error::EpochTaken { epoch: m.epoch },
                e => store_err(&format!("writing {spec_key}"), e),
            });
        }
        Ok(())
    }

    /// Opens epoch `spec`'s snapshot: reads and checks its index against
    /// the spec (epoch, |S|, set digest), and that the snapshot directory
    /// holds exactly the parts it lists; then [`SnapshotStream`] yields
    /// the verified parts in order.
    pub async fn open_snapshot(&self, spec: &EpochSpec) -> Result<SnapshotStream> {
        use crate::snapshot::{index_len, MAX_PARTS};
        let m = &spec.manifest;
        let dir = self.epoch_key(m.epoch, &snapshot_object(spec));
        let key = self.epoch_key(
            m.epoch,
            &format!("{}/{SNAPSHOT_INDEX}", snapshot_object(spec)),
        );
        let want = SnapshotExpect {
            epoch: m.epoch,
            count: m.entries,
            set_sha256: spec.set_sha256,
        };
        let bytes = match read_retried(&*self.store, &key, index_len(MAX_PARTS)).await? {
            Some(b) => b,
            None => {
                return Err(Error::Corrupt {
                    path: key.to_string(),
                    why: "missing: the spec's snapshot has no index".into(),
                })
            }
        };
        let index = Arc::new(SnapshotIndex::decode(key.as_ref(), &bytes, want)?);
        // Exactly the listed parts: an extra or misnamed object is a
        // coordinator's mistake or a tampered store.
        let mut list = self.store.list(Some(&dir));
        let mut seen = vec![false; index.parts.len()];
        while let Some(meta) = list.next().await {
            let meta = meta.map_err(|e| store_err(&format!("listing {dir}"), e))?;
            let name = meta.location.filename().unwrap_or_default();
            if name == SNAPSHOT_INDEX {
                continue;
            }
            let part = name
                .strip_prefix("part-")
                .and_then(|n| n.strip_suffix(".bin"))
                .and_then(|n| n.parse::<u32>().ok())
                .filter(|&i| part_object(i) == name && (i as usize) < seen.len());
            match part {
                Some(i) => seen[i as usize] = true,
                None => {
                    return Err(Error::Corrupt {
                        path: meta.location.to_string(),
                        why: format!("not a part the index lists ({} parts)", seen.len()),
                    })
                }
            }
        }
        if let Some(i) = seen.iter().position(|s| !s) {
            return Err(Error::Corrupt {
                path: format!("{dir}/{}", part_object(i as u32)),
                why: format!("missing: part {i} of {}", seen.len()),
            });
        }
        let check = crate::snapshot::SetCheck::new(dir.to_string(), &index);
        let (store, index2, dir2) = (self.store.clone(), index.clone(), dir.clone());
        let parts = futures_util::stream::iter(0..index.parts.len() as u32)
            .map(move |i| {
                let (store, index, key) = (
                    store.clone(),
                    index2.clone(),
                    ObjPath::from(format!("{dir2}/{}", part_object(i))),
                );
                async move { read_part(&*store, &index, &key, i).await }
            })
            .buffered(PARTS_IN_FLIGHT)
            .boxed();
        Ok(SnapshotStream {
            index,
            parts,
            check: Some(check),
        })
    }

    /// Streams and checks epoch `spec`'s snapshot and returns its leaf
    /// hashes (tests and tools: a shard's build streams it,
    /// [`Objects::open_snapshot`]).
    pub async fn read_snapshot(&self, spec: &EpochSpec) -> Result<Vec<[u8; 32]>> {
        let mut s = self.open_snapshot(spec).await?;
        let mut out = Vec::new();
        while let Some(p) = s.next_part().await? {
            out.extend_from_slice(p.hashes());
        }
        Ok(out)
    }

    /// Object `key` whole if it exists and holds at most `max` bytes.
    #[cfg(test)]
    async fn read_capped(&self, key: &ObjPath, max: u64) -> Result<Option<Vec<u8>>> {
        let got = match self.store.get(key).await {
            Ok(g) => g,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(store_err(&format!("reading {key}"), e)),
        };
        read_body(got, key, max).await.map(Some)
    }

    /// Reports shard `marker.shard` ready for epoch `marker.epoch`.
    pub async fn write_ready(&self, marker: &ReadyMarker) -> Result<()> {
        let key = self.epoch_key(marker.epoch, &format!("ready/{:04}", marker.shard));
        self.put(&key, Self::json(marker)).await
    }

    /// Shard `shard`'s ready marker of epoch `id`, if any.
    pub async fn ready(&self, id: u64, shard: u32) -> Result<Option<ReadyMarker>> {
        self.read_json(&self.epoch_key(id, &format!("ready/{shard:04}")))
            .await
    }

    /// The shards whose ready marker for `spec`'s epoch is valid: it names
    /// the epoch, the shard, the spec's shard count and databases, and the
    /// manifest digest of the spec; and the shards that are not ready.
    pub async fn ready_shards(&self, spec: &EpochSpec) -> Result<(Vec<u32>, Vec<u32>)> {
        let (ready, missing) = self.ready_markers(spec).await?;
        Ok((ready.iter().map(|r| r.shard).collect(), missing))
    }

    /// The valid ready markers of `spec`'s epoch ([`Objects::ready_shards`]:
    /// also listing the files of exactly the shard's databases), and the
    /// shards without one.
    pub async fn ready_markers(&self, spec: &EpochSpec) -> Result<(Vec<ReadyMarker>, Vec<u32>)> {
        let m = &spec.manifest;
        let digest = crate::layout::manifest_digest(&m.to_json());
        let spec_digest = spec.digest();
        let count = shard_count(m);
        let (mut ready, mut missing) = (Vec::new(), Vec::new());
        for shard in 0..count {
            let own = match &m.shards {
                Some(map) => map.databases_of(shard, m.dbs.len() as u32),
                None => (0..m.dbs.len() as u32).collect(),
            };
            let valid = match self.ready(m.epoch, shard).await {
                Ok(Some(r)) => (r.epoch == m.epoch
                    && r.shard == shard
                    && r.count == count
                    && r.databases == own
                    && r.manifest_sha256 == digest
                    && r.spec_sha256 == spec_digest
                    && r.artifacts.iter().map(|a| a.db).eq(own.iter().copied()))
                .then_some(r),
                Ok(None) => None,
                Err(Error::Corrupt { path, why }) => {
                    tracing::warn!(%path, %why, "ready marker unreadable: shard counted as not ready");
                    None
                }
                Err(e) => return Err(e),
            };
            match valid {
                Some(r) => ready.push(r),
                None => missing.push(shard),
            }
        }
        Ok((ready, missing))
    }

    fn db_key(&self, epoch: u64, name: &str) -> ObjPath {
        self.epoch_key(epoch, &format!("dbs/{name}"))
    }

    /// Uploads database `db` of epoch `epoch` from the epoch directory
    /// `dir` (its `.bits` and `.hint` files, streamed in parts) and
    /// returns what a ready marker states of it.
    pub async fn upload_db(&self, epoch: u64, db: u32, dir: &Path) -> Result<DbArtifact> {
        let (bits_bytes, bits_sha256) = self
            .upload_file(
                &self.db_key(epoch, &bits_name(db as usize)),
                &dir.join(bits_name(db as usize)),
            )
            .await?;
        let (hint_bytes, hint_sha256) = self
            .upload_file(
                &self.db_key(epoch, &hint_name(db as usize)),
                &dir.join(hint_name(db as usize)),
            )
            .await?;
        Ok(DbArtifact {
            db,
            bits_bytes,
            bits_sha256,
            hint_bytes,
            hint_sha256,
        })
    }

    async fn upload_file(&self, key: &ObjPath, path: &Path) -> Result<(u64, [u8; 32])> {
        use tokio::io::AsyncReadExt as _;
        let mut f = tokio::fs::File::open(path)
            .await
            .map_err(crate::error::io(path))?;
        let upload = self
            .store
            .put_multipart(key)
            .await
            .map_err(|e| store_err(&format!("writing {key}"), e))?;
        let mut w = object_store::WriteMultipart::new_with_chunk_size(upload, UPLOAD_PART);
        let (mut sum, mut len) = (Sha256::new(), 0u64);
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = match f.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) => {
                    let _ = w.abort().await;
                    return Err(crate::error::io(path)(e));
                }
            };
            if let Err(e) = w.wait_for_capacity(4).await {
                let _ = w.abort().await;
                return Err(store_err(&format!("writing {key}"), e));
            }
            sum.update(&buf[..n]);
            w.write(&buf[..n]);
            len += n as u64;
        }
        w.finish()
            .await
            .map_err(|e| store_err(&format!("writing {key}"), e))?;
        Ok((len, sum.finalize().into()))
    }

    /// Downloads the files of `art` (database `art.db` of epoch `epoch`)
    /// into `dir`, refusing any whose length or SHA-256 differs from
    /// `art`'s; each file is fsynced.
    pub async fn download_db(&self, epoch: u64, art: &DbArtifact, dir: &Path) -> Result<()> {
        let name = bits_name(art.db as usize);
        self.download_file(
            &self.db_key(epoch, &name),
            &dir.join(&name),
            art.bits_bytes,
            &art.bits_sha256,
        )
        .await?;
        let name = hint_name(art.db as usize);
        self.download_file(
            &self.db_key(epoch, &name),
            &dir.join(&name),
            art.hint_bytes,
            &art.hint_sha256,
        )
        .await
    }

    async fn download_file(
        &self,
        key: &ObjPath,
        path: &Path,
        len: u64,
        sha: &[u8; 32],
    ) -> Result<()> {
        use tokio::io::AsyncWriteExt as _;
        let bad = |why: String| Error::Corrupt {
            path: key.to_string(),
            why,
        };
        let got = self
            .store
            .get(key)
            .await
            .map_err(|e| store_err(&format!("reading {key}"), e))?;
        if got.meta.size != len {
            return Err(bad(format!(
                "{} bytes, the ready marker says {len}",
                got.meta.size
            )));
        }
        let mut f = tokio::fs::File::create(path)
            .await
            .map_err(crate::error::io(path))?;
        let (mut sum, mut n) = (Sha256::new(), 0u64);
        let mut stream = got.into_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| store_err(&format!("reading {key}"), e))?;
            n += chunk.len() as u64;
            if n > len {
                return Err(bad(format!(
                    "more than the {len} bytes the ready marker says"
                )));
            }
            sum.update(&chunk);
            f.write_all(&chunk).await.map_err(crate::error::io(path))?;
        }
        if n != len || sum.finalize().as_slice() != sha {
            return Err(bad("length or SHA-256 differs from the ready marker".into()));
        }
        f.sync_all().await.map_err(crate::error::io(path))
    }

    /// Whether epoch `id` is published.
    pub async fn is_published(&self, id: u64) -> Result<bool> {
        self.exists(&self.epoch_key(id, PUBLISHED_OBJECT)).await
    }

    /// Epoch `id`'s published marker, if it is published.
    pub async fn published(&self, id: u64) -> Result<Option<PublishedMarker>> {
        self.read_json(&self.epoch_key(id, PUBLISHED_OBJECT)).await
    }

    /// Marks epoch `id` published.
    pub async fn write_published(&self, marker: &PublishedMarker) -> Result<()> {
        self.put(
            &self.epoch_key(marker.epoch, PUBLISHED_OBJECT),
            Self::json(marker),
        )
        .await
    }

    /// Records that `epoch publish` gave up on epoch `marker.epoch`.
    pub async fn write_timed_out(&self, marker: &TimedOutMarker) -> Result<()> {
        self.put(
            &self.epoch_key(marker.epoch, TIMED_OUT_OBJECT),
            Self::json(marker),
        )
        .await
    }

    /// Whether `epoch publish` gave up on epoch `id`.
    pub async fn timed_out(&self, id: u64) -> Result<bool> {
        self.exists(&self.epoch_key(id, TIMED_OUT_OBJECT)).await
    }

    /// Deletes every epoch directory older than the newest `keep` ones,
    /// except the newest published epoch and anything newer; every
    /// directory older than the newest prepared epoch that holds no spec
    /// (what a coordinator killed before writing its spec left); and, in
    /// an epoch with a spec, every snapshot directory the spec does not
    /// name (a racing coordinator's, killed before it could remove its
    /// own). In a local directory, the staging files of interrupted
    /// uploads in those directories go too. Returns the epochs deleted.
    pub async fn prune(&self, keep: usize) -> Result<Vec<u64>> {
        let ids = self.epoch_ids().await?;
        let published = self.newest_published().await?;
        let prepared = self.newest_prepared().await?;
        let old = ids.len().saturating_sub(keep);
        let mut gone = Vec::new();
        for (i, &id) in ids.iter().enumerate() {
            let spec = match self.spec(id).await {
                Ok(s) => s,
                Err(Error::Corrupt { .. }) => None,
                Err(e) => return Err(e),
            };
            let has_spec = spec.is_some() || self.exists(&self.epoch_key(id, SPEC_OBJECT)).await?;
            let abandoned = prepared.is_some_and(|p| id < p) && !has_spec;
            if !abandoned && (i >= old || published.is_some_and(|p| id >= p)) {
                if let Some(spec) = spec {
                    self.prune_orphan_snapshots(&spec).await?;
                }
                continue;
            }
            let rel = format!("epochs/{id:012}");
            self.delete_under(&self.key(&rel)).await?;
            self.remove_local(&rel);
            gone.push(id);
        }
        Ok(gone)
    }

    /// Deletes the snapshot directories of `spec`'s epoch other than the
    /// one it names.
    async fn prune_orphan_snapshots(&self, spec: &EpochSpec) -> Result<()> {
        let id = spec.manifest.epoch;
        let dir = self.key(&format!("epochs/{id:012}"));
        let list = self
            .store
            .list_with_delimiter(Some(&dir))
            .await
            .map_err(|e| store_err(&format!("listing {dir}"), e))?;
        let own = snapshot_object(spec);
        for p in &list.common_prefixes {
            let Some(name) = p.filename() else { continue };
            if name.starts_with("snapshot-") && name != own {
                tracing::info!(
                    epoch = id,
                    snapshot = name,
                    "removing a snapshot no spec names"
                );
                self.delete_under(p).await?;
                self.remove_local(&format!("epochs/{id:012}/{name}"));
            }
        }
        Ok(())
    }

    /// In a local directory store: removes the directory `rel` (under the
    /// prefix) with whatever staging files of interrupted uploads it
    /// still holds, which the store's listing does not show.
    fn remove_local(&self, rel: &str) {
        let Some(root) = &self.local else { return };
        let path = if self.prefix.is_empty() {
            root.join(rel)
        } else {
            root.join(&self.prefix).join(rel)
        };
        match std::fs::remove_dir_all(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(dir = %path.display(), error = %e, "could not remove a pruned directory")
            }
        }
    }
}

/// The verified parts of a snapshot, in order ([`Objects::open_snapshot`]):
/// up to [`PARTS_IN_FLIGHT`] are fetched at once, each checked against
/// the index as it arrives; [`SnapshotStream::next_part`] returns `None`
/// only once every part came and the set digest matched the spec's.
pub struct SnapshotStream {
    index: Arc<SnapshotIndex>,
    parts: futures_util::stream::BoxStream<'static, Result<VerifiedPart>>,
    check: Option<crate::snapshot::SetCheck>,
}

impl std::fmt::Debug for SnapshotStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotStream")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

impl SnapshotStream {
    /// The checked index.
    pub fn index(&self) -> &SnapshotIndex {
        &self.index
    }

    /// The next part, verified (its checksum against the index, its
    /// header, its order after the previous part); `Ok(None)` once the
    /// whole snapshot is in and hashes to the spec's set digest. After an
    /// error the stream is done.
    pub async fn next_part(&mut self) -> Result<Option<VerifiedPart>> {
        let Some(check) = self.check.as_mut() else {
            return Err(Error::Internal("snapshot stream used after its end".into()));
        };
        match self.parts.next().await {
            Some(Ok(p)) => match check.push(&p) {
                Ok(()) => Ok(Some(p)),
                Err(e) => {
                    self.check = None;
                    Err(e)
                }
            },
            Some(Err(e)) => {
                self.check = None;
                Err(e)
            }
            None => match self.check.take() {
                Some(c) => c.finish().map(|()| None),
                None => Ok(None),
            },
        }
    }
}

/// Reads part `i` of `index` from `key` ([`read_retried`]) and checks it.
async fn read_part(
    store: &dyn ObjectStore,
    index: &SnapshotIndex,
    key: &ObjPath,
    i: u32,
) -> Result<VerifiedPart> {
    let len = index.parts.get(i as usize).map_or(0, |p| p.bytes);
    match read_retried(store, key, len).await? {
        Some(bytes) => index.check_part(key.as_ref(), i, bytes),
        None => Err(Error::Corrupt {
            path: key.to_string(),
            why: format!("missing: part {i} of {}", index.parts.len()),
        }),
    }
}

/// Object `key` whole (`None` if it does not exist), refused if it holds
/// more than `max` bytes; a failing store is tried [`PART_ATTEMPTS`] times
/// (each with the client's own retries inside, 1 s and 2 s apart), a
/// damaged object refused at once.
async fn read_retried(store: &dyn ObjectStore, key: &ObjPath, max: u64) -> Result<Option<Vec<u8>>> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let got = match store.get(key).await {
            Ok(g) => read_body(g, key, max).await.map(Some),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(store_err(&format!("reading {key}"), e)),
        };
        match got {
            Err(e @ Error::ObjectStore { .. }) if attempt < PART_ATTEMPTS => {
                tracing::warn!(object = %key, attempt, error = %crate::error::error_chain(&e), "reading a snapshot object failed; retrying");
                tokio::time::sleep(std::time::Duration::from_millis(500 << attempt)).await;
            }
            r => return r,
        }
    }
}

/// The body of `got` (object `key`), refused if it holds more than `max`
/// bytes (checked before anything is read, and again while reading).
async fn read_body(got: object_store::GetResult, key: &ObjPath, max: u64) -> Result<Vec<u8>> {
    let too_long = |n: u64| Error::Corrupt {
        path: key.to_string(),
        why: format!("{n} bytes, more than the {max} expected (trailing bytes)"),
    };
    if got.meta.size > max {
        return Err(too_long(got.meta.size));
    }
    let mut out = Vec::with_capacity(got.meta.size as usize);
    let mut stream = got.into_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| store_err(&format!("reading {key}"), e))?;
        if (out.len() + chunk.len()) as u64 > max {
            return Err(too_long((out.len() + chunk.len()) as u64));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// Builds the databases `own` of the planned epoch `manifest` into `out`
/// from the object store's snapshot `stream`
/// ([`Objects::open_snapshot`]), in memory independent
/// of |S| ([`crate::memory::need_streamed`]): each part is filled on a
/// blocking thread as soon as it is verified, while the next parts are
/// fetched; the databases are set up and written only once the last part
/// is in and the set digest matched. On any error nothing is built (the
/// caller abandons `out`).
pub async fn build_streamed(
    mut stream: SnapshotStream,
    manifest: Manifest,
    own: Vec<u32>,
    bp: crate::epoch::BuildParams,
    out: std::path::PathBuf,
    t_all: std::time::Instant,
) -> Result<crate::epoch::Epoch> {
    type Part = Result<Option<VerifiedPart>>;
    // One verified part waits while another is filled.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Part>(1);
    let build = tokio::task::spawn_blocking(move || {
        crate::epoch::build_planned_with(manifest, &own, &bp, &out, t_all, |add| loop {
            match rx.blocking_recv() {
                Some(Ok(Some(part))) => add(part.hashes())?,
                Some(Ok(None)) => return Ok(()),
                Some(Err(e)) => return Err(e),
                None => {
                    return Err(Error::Internal(
                        "the snapshot stream stopped before its end".into(),
                    ))
                }
            }
        })
    });
    let fetch = async move {
        loop {
            // A slot first, so that no part is held while waiting for one.
            let Ok(slot) = tx.reserve().await else {
                return; // the build stopped
            };
            let next = stream.next_part().await;
            let last = !matches!(next, Ok(Some(_)));
            slot.send(next);
            if last {
                return;
            }
        }
    };
    let ((), built) = tokio::join!(fetch, build);
    built?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hashes(n: u8) -> Vec<[u8; 32]> {
        (0..n)
            .map(|i| [i.wrapping_mul(7).wrapping_add(1); 32])
            .collect()
    }

    fn sorted(n: u8) -> Vec<[u8; 32]> {
        let mut v = hashes(n);
        v.sort_unstable();
        v.dedup();
        v
    }

    /// An object store over another that can stall every PUT after the
    /// first `puts` (a coordinator killed mid-upload: the stalled future
    /// is dropped, so no clean-up runs) and fail each object's first GET
    /// (a transient error the part reader retries). GETs of later parts
    /// answer sooner, so parts complete out of order.
    #[derive(Debug)]
    struct Faulty {
        inner: Arc<dyn ObjectStore>,
        puts: std::sync::atomic::AtomicI64,
        fail_first_get: bool,
        failed: std::sync::Mutex<std::collections::HashSet<String>>,
    }

    impl Faulty {
        fn new(inner: Arc<dyn ObjectStore>, puts: i64, fail_first_get: bool) -> Faulty {
            Faulty {
                inner,
                puts: puts.into(),
                fail_first_get,
                failed: Default::default(),
            }
        }
    }

    impl std::fmt::Display for Faulty {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("faulty")
        }
    }

    #[async_trait::async_trait]
    impl ObjectStore for Faulty {
        async fn put_opts(
            &self,
            location: &ObjPath,
            payload: PutPayload,
            opts: object_store::PutOptions,
        ) -> object_store::Result<object_store::PutResult> {
            if self.puts.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) <= 0 {
                std::future::pending::<()>().await;
            }
            self.inner.put_opts(location, payload, opts).await
        }
        async fn put_multipart_opts(
            &self,
            location: &ObjPath,
            opts: object_store::PutMultipartOptions,
        ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
            self.inner.put_multipart_opts(location, opts).await
        }
        async fn get_opts(
            &self,
            location: &ObjPath,
            options: object_store::GetOptions,
        ) -> object_store::Result<object_store::GetResult> {
            let name = location.to_string();
            if let Some(i) = name
                .rsplit_once("part-")
                .and_then(|(_, n)| n.strip_suffix(".bin"))
                .and_then(|n| n.parse::<u64>().ok())
            {
                tokio::time::sleep(std::time::Duration::from_millis(40 - 2 * (i % 20))).await;
            }
            if self.fail_first_get && self.failed.lock().unwrap().insert(name) {
                return Err(object_store::Error::Generic {
                    store: "faulty",
                    source: "connection reset".into(),
                });
            }
            self.inner.get_opts(location, options).await
        }
        fn delete_stream(
            &self,
            locations: futures_util::stream::BoxStream<'static, object_store::Result<ObjPath>>,
        ) -> futures_util::stream::BoxStream<'static, object_store::Result<ObjPath>> {
            self.inner.delete_stream(locations)
        }
        fn list(
            &self,
            prefix: Option<&ObjPath>,
        ) -> futures_util::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>>
        {
            self.inner.list(prefix)
        }
        async fn list_with_delimiter(
            &self,
            prefix: Option<&ObjPath>,
        ) -> object_store::Result<object_store::ListResult> {
            self.inner.list_with_delimiter(prefix).await
        }
        async fn copy_opts(
            &self,
            from: &ObjPath,
            to: &ObjPath,
            options: object_store::CopyOptions,
        ) -> object_store::Result<()> {
            self.inner.copy_opts(from, to, options).await
        }
    }

    async fn names(store: &Arc<dyn ObjectStore>) -> Vec<String> {
        let mut v: Vec<String> = store
            .list(None)
            .map(|m| m.unwrap().location.to_string())
            .collect()
            .await;
        v.sort();
        v
    }

    /// A snapshot of many parts goes up and comes back whole, with parts
    /// arriving out of order and each first GET failing (retried); every
    /// damage to the stored objects is refused naming the object, and
    /// nothing of a refused snapshot is returned.
    #[tokio::test(start_paused = true)]
    async fn snapshot_parts_round_trip_and_stored_damage_is_refused() {
        let mem: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let objects = Objects::from_store(mem.clone(), "p", "memory");
        let snap = crate::epoch::Snapshot {
            now_s: 1_700_000_000,
            hashes: sorted(100),
            coverage: vec![],
        };
        let spec = crate::plan::plan_snapshot(&snap, &toy_config(1), 3).unwrap();
        let bytes = objects
            .prepare_in_parts(&spec, &snap.hashes, 7)
            .await
            .unwrap();
        let dir = format!("p/epochs/000000000003/{}", snapshot_object(&spec));
        let listed = names(&mem).await;
        assert_eq!(listed.len(), 15 + 2, "{listed:?}"); // 15 parts, index, spec
        assert_eq!(
            bytes,
            (0..15)
                .map(|i| crate::snapshot::part_len(crate::snapshot::entries_of(100, 7, i)))
                .sum::<u64>()
                + crate::snapshot::index_len(15)
        );
        let faulty = Objects::from_store(
            Arc::new(Faulty::new(mem.clone(), i64::MAX, true)),
            "p",
            "faulty",
        );
        assert_eq!(faulty.read_snapshot(&spec).await.unwrap(), snap.hashes);
        assert_eq!(objects.read_snapshot(&spec).await.unwrap(), snap.hashes);

        let key = |name: &str| ObjPath::from(format!("{dir}/{name}"));
        let get = |name: &str| {
            let mem = mem.clone();
            let k = key(name);
            async move { mem.get(&k).await.unwrap().bytes().await.unwrap().to_vec() }
        };
        let part = |i: u32| part_object(i);
        let index = get(SNAPSHOT_INDEX).await;
        let (p1, p2, p3) = (
            get(&part(1)).await,
            get(&part(2)).await,
            get(&part(3)).await,
        );
        let flipped = |mut b: Vec<u8>, at: usize| {
            b[at] ^= 1;
            b
        };
        let mut longer = p2.clone();
        longer.push(0);
        // (object written, its bytes (None: deleted), the object an error must name, what it says)
        let cases: Vec<(String, Option<Vec<u8>>, String, &str)> = vec![
            (part(3), Some(flipped(p3.clone(), 100)), part(3), "SHA-256"),
            (part(3), Some(flipped(p3.clone(), 20)), part(3), "SHA-256"),
            (
                part(2),
                Some(p2[..p2.len() - 1].to_vec()),
                part(2),
                "truncated",
            ),
            (part(2), Some(longer), part(2), "trailing bytes"),
            (part(2), Some(p1.clone()), part(2), "SHA-256"),
            (part(5), None, part(5), "missing"),
            (
                part(15),
                Some(p1.clone()),
                part(15),
                "not a part the index lists",
            ),
            (
                "part-x.bin".into(),
                Some(p1.clone()),
                "part-x.bin".into(),
                "not a part",
            ),
            (
                SNAPSHOT_INDEX.into(),
                Some(flipped(index.clone(), 30)),
                SNAPSHOT_INDEX.into(),
                "",
            ),
            (
                SNAPSHOT_INDEX.into(),
                Some(flipped(index.clone(), 200)),
                SNAPSHOT_INDEX.into(),
                "checksum",
            ),
            (
                SNAPSHOT_INDEX.into(),
                None,
                SNAPSHOT_INDEX.into(),
                "missing",
            ),
        ];
        for (name, bytes, named, says) in cases {
            let k = key(&name);
            let before = mem.get(&k).await.ok();
            let before = match before {
                Some(g) => Some(g.bytes().await.unwrap()),
                None => None,
            };
            match bytes {
                Some(b) => objects.put(&k, b).await.unwrap(),
                None => mem.delete(&k).await.unwrap(),
            }
            let e = objects.read_snapshot(&spec).await.unwrap_err();
            let text = e.to_string();
            assert!(matches!(e, Error::Corrupt { .. }), "{name}: {text}");
            assert!(
                text.contains(&named) && text.contains(says),
                "{name}: {text}"
            );
            match before {
                Some(b) => mem.put(&k, PutPayload::from(b)).await.map(drop).unwrap(),
                None => mem.delete(&k).await.unwrap(),
            }
            assert_eq!(
                objects.read_snapshot(&spec).await.unwrap(),
                snap.hashes,
                "{name} restored"
            );
        }
        // two parts swapped in place
        objects.put(&key(&part(1)), p2.clone()).await.unwrap();
        objects.put(&key(&part(2)), p1.clone()).await.unwrap();
        let e = objects.read_snapshot(&spec).await.unwrap_err().to_string();
        assert!(e.contains(&part(1)), "{e}");
    }

    /// A coordinator killed mid-upload (after 3 parts) leaves objects no
    /// spec names: the epoch is not prepared, nothing can be read as its
    /// snapshot, and prune removes them once a later epoch is prepared. A
    /// coordinator that lost the race for an epoch id and was killed
    /// before removing its snapshot leaves a directory prune removes too.
    #[tokio::test]
    async fn a_coordinator_killed_mid_upload_leaves_nothing_a_shard_builds_from() {
        let mem: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let objects = Objects::from_store(mem.clone(), "", "memory");
        let killed = Objects::from_store(Arc::new(Faulty::new(mem.clone(), 3, false)), "", "dying");
        let config = toy_config(1);
        let snap = crate::epoch::Snapshot {
            now_s: 1_700_000_000,
            hashes: sorted(100),
            coverage: vec![],
        };
        let spec1 = crate::plan::plan_snapshot(&snap, &config, 1).unwrap();
        let r = tokio::time::timeout(
            std::time::Duration::from_millis(300),
            killed.prepare_in_parts(&spec1, &snap.hashes, 10),
        )
        .await;
        assert!(r.is_err(), "the upload stalls after 3 parts");
        let left = names(&mem).await;
        assert_eq!(left.len(), 3, "{left:?}");
        assert_eq!(objects.epoch_ids().await.unwrap(), [1]);
        assert_eq!(objects.newest_prepared().await.unwrap(), None);
        assert!(objects.spec(1).await.unwrap().is_none());
        assert!(matches!(
            objects.read_snapshot(&spec1).await,
            Err(Error::Corrupt { .. })
        ));
        // The next coordinator prepares epoch 2; a racer for epoch 2 that
        // was killed after its upload leaves its snapshot directory.
        let spec2 = crate::plan::plan_snapshot(&snap, &config, 2).unwrap();
        let racer = crate::plan::plan_snapshot(&snap, &config, 2).unwrap();
        objects
            .upload_snapshot(&racer, Hashes::Slice(&snap.hashes), 10)
            .await
            .unwrap();
        objects.prepare(&spec2, &snap.hashes).await.unwrap();
        assert_eq!(objects.prune(5).await.unwrap(), [1]);
        let mut want = vec![
            format!(
                "epochs/000000000002/{}/{SNAPSHOT_INDEX}",
                snapshot_object(&spec2)
            ),
            format!(
                "epochs/000000000002/{}/{}",
                snapshot_object(&spec2),
                part_object(0)
            ),
            format!("epochs/000000000002/{SPEC_OBJECT}"),
        ];
        want.sort();
        assert_eq!(names(&mem).await, want);
        assert_eq!(objects.read_snapshot(&spec2).await.unwrap(), snap.hashes);
    }

    /// In a local directory, prune also removes the staging files an
    /// interrupted upload left, which the store's listing does not show.
    #[tokio::test]
    async fn prune_removes_local_staging_files() {
        let tmp = tempfile::tempdir().unwrap();
        let url = format!("file://{}", tmp.path().display());
        let objects = Objects::open(&url).unwrap();
        let config = toy_config(1);
        let snap = crate::epoch::Snapshot {
            now_s: 1_700_000_000,
            hashes: sorted(30),
            coverage: vec![],
        };
        let stale = tmp
            .path()
            .join("epochs/000000000001/snapshot-00/part-000000.bin#3");
        std::fs::create_dir_all(stale.parent().unwrap()).unwrap();
        std::fs::write(&stale, b"half a part").unwrap();
        let spec = crate::plan::plan_snapshot(&snap, &config, 2).unwrap();
        objects.prepare(&spec, &snap.hashes).await.unwrap();
        let orphan = tmp
            .path()
            .join("epochs/000000000002/snapshot-11/part-000000.bin#9");
        std::fs::create_dir_all(orphan.parent().unwrap()).unwrap();
        std::fs::write(&orphan, b"x").unwrap();
        assert_eq!(objects.prune(5).await.unwrap(), [1]);
        assert!(!tmp.path().join("epochs/000000000001").exists());
        assert!(!orphan.parent().unwrap().exists());
        assert_eq!(objects.read_snapshot(&spec).await.unwrap(), snap.hashes);
    }

    fn toy_config(shards: u32) -> crate::Config {
        let mut config = crate::Config::default();
        config.epoch.param_set = "toy-insecure-d64".into();
        config.epoch.allow_insecure_params = true;
        config.epoch.filters = 4;
        config.shard.count = shards;
        config.shard.urls = (0..shards).map(|i| format!("http://s{i}")).collect();
        config
    }

    /// Two coordinators prepare epoch 5 at once, with their own seeds:
    /// exactly one spec is created, it names the winner's snapshot, and
    /// the loser leaves nothing behind.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn racing_coordinators_create_one_spec() {
        let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let objects = Objects::from_store(store.clone(), "", "memory");
        let config = toy_config(2);
        let snap = crate::epoch::Snapshot {
            now_s: 1_700_000_000,
            hashes: sorted(250),
            coverage: vec![],
        };
        for _ in 0..5 {
            let a = crate::plan::plan_snapshot(&snap, &config, 5).unwrap();
            let b = crate::plan::plan_snapshot(&snap, &config, 5).unwrap();
            assert_ne!(snapshot_object(&a), snapshot_object(&b));
            let (ra, rb) = tokio::join!(
                objects.prepare(&a, &snap.hashes),
                objects.prepare(&b, &snap.hashes)
            );
            let winner = match (ra, rb) {
                (Ok(_), Err(Error::EpochTaken { epoch: 5 })) => &a,
                (Err(Error::EpochTaken { epoch: 5 }), Ok(_)) => &b,
                other => panic!("not exactly one winner: {other:?}"),
            };
            let stored = objects.spec(5).await.unwrap().unwrap();
            assert_eq!(&stored, winner);
            assert_eq!(objects.read_snapshot(&stored).await.unwrap(), snap.hashes);
            // only the spec and the winner's snapshot remain
            let dir = snapshot_object(winner);
            let mut want = vec![
                format!("epochs/000000000005/{dir}/{}", part_object(0)),
                format!("epochs/000000000005/{dir}/{SNAPSHOT_INDEX}"),
                format!("epochs/000000000005/{SPEC_OBJECT}"),
            ];
            want.sort();
            assert_eq!(names(&store).await, want);
            for m in store.list(None).collect::<Vec<_>>().await {
                store.delete(&m.unwrap().location).await.unwrap();
            }
        }
        // The race the check before the upload cannot see: b uploads, a
        // prepares whole, then b's spec comes second.
        let a = crate::plan::plan_snapshot(&snap, &config, 6).unwrap();
        let b = crate::plan::plan_snapshot(&snap, &config, 6).unwrap();
        objects
            .upload_snapshot(&b, Hashes::Slice(&snap.hashes), 64)
            .await
            .unwrap();
        objects.prepare(&a, &snap.hashes).await.unwrap();
        assert!(matches!(
            objects.create_spec(&b).await,
            Err(Error::EpochTaken { epoch: 6 })
        ));
        assert_eq!(objects.spec(6).await.unwrap().unwrap(), a);
        let b_snapshot = objects.epoch_key(6, &format!("{}/{SNAPSHOT_INDEX}", snapshot_object(&b)));
        assert!(!objects.exists(&b_snapshot).await.unwrap());
        assert_eq!(objects.read_snapshot(&a).await.unwrap(), snap.hashes);
    }

    /// A database's files go up and come down byte for byte; a damaged
    /// or swapped object is refused, and nothing longer than stated is
    /// written.
    #[tokio::test]
    async fn database_files_round_trip_and_damage_is_refused() {
        let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let objects = Objects::from_store(store, "", "memory");
        let src = tempfile::tempdir().unwrap();
        let bits: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(src.path().join(bits_name(4)), &bits).unwrap();
        std::fs::write(src.path().join(hint_name(4)), b"hint").unwrap();
        let art = objects.upload_db(9, 4, src.path()).await.unwrap();
        assert_eq!((art.db, art.bits_bytes, art.hint_bytes), (4, 3_000_000, 4));
        assert_eq!(art.bits_sha256, <[u8; 32]>::from(Sha256::digest(&bits)));
        let dst = tempfile::tempdir().unwrap();
        objects.download_db(9, &art, dst.path()).await.unwrap();
        assert_eq!(std::fs::read(dst.path().join(bits_name(4))).unwrap(), bits);
        assert_eq!(
            std::fs::read(dst.path().join(hint_name(4))).unwrap(),
            b"hint"
        );
        // one byte changed in the store
        let mut bad = bits.clone();
        bad[12345] ^= 1;
        objects
            .put(&objects.db_key(9, &bits_name(4)), bad)
            .await
            .unwrap();
        let e = objects.download_db(9, &art, dst.path()).await.unwrap_err();
        assert!(matches!(e, Error::Corrupt { .. }), "{e}");
        // a marker stating fewer bytes than the object holds
        let short = DbArtifact {
            bits_bytes: 10,
            ..art.clone()
        };
        assert!(objects.download_db(9, &short, dst.path()).await.is_err());
    }

    #[tokio::test]
    async fn prepare_ready_publish_in_memory() {
        let objects = Objects::from_store(
            Arc::new(object_store::memory::InMemory::new()),
            "p/q",
            "memory",
        );
        assert_eq!(objects.newest_prepared().await.unwrap(), None);
        let mut config = crate::Config::default();
        config.epoch.param_set = "toy-insecure-d64".into();
        config.epoch.allow_insecure_params = true;
        config.epoch.filters = 4;
        config.shard.count = 2;
        config.shard.urls = vec!["http://a".into(), "http://b".into()];
        let snap = crate::epoch::Snapshot {
            now_s: 1_700_000_000,
            hashes: sorted(50),
            coverage: vec![],
        };
        let spec = crate::plan::plan_snapshot(&snap, &config, 3).unwrap();
        objects.prepare(&spec, &snap.hashes).await.unwrap();
        assert!(matches!(
            objects.prepare(&spec, &snap.hashes).await,
            Err(Error::EpochTaken { epoch: 3 })
        ));
        assert_eq!(objects.epoch_ids().await.unwrap(), [3]);
        assert_eq!(objects.newest_prepared().await.unwrap(), Some(3));
        assert_eq!(objects.spec(3).await.unwrap().unwrap(), spec);
        assert_eq!(objects.read_snapshot(&spec).await.unwrap(), snap.hashes);
        assert_eq!(
            objects.ready_shards(&spec).await.unwrap(),
            (vec![], vec![0, 1])
        );
        let m = &spec.manifest;
        let files = |dbs: &[u32]| -> Vec<DbArtifact> {
            dbs.iter()
                .map(|&db| DbArtifact {
                    db,
                    bits_bytes: 1,
                    bits_sha256: [db as u8; 32],
                    hint_bytes: 2,
                    hint_sha256: [7; 32],
                })
                .collect()
        };
        let dbs1 = m
            .shards
            .as_ref()
            .unwrap()
            .databases_of(1, m.dbs.len() as u32);
        let mut r = ReadyMarker {
            epoch: 3,
            shard: 1,
            count: 2,
            artifacts: files(&dbs1),
            databases: dbs1,
            manifest_sha256: crate::layout::manifest_digest(&m.to_json()),
            spec_sha256: spec.digest(),
            at: 0,
        };
        // a marker without its databases' files does not count
        let dbs0 = m
            .shards
            .as_ref()
            .unwrap()
            .databases_of(0, m.dbs.len() as u32);
        assert!(!dbs0.is_empty());
        let bare = ReadyMarker {
            shard: 0,
            databases: dbs0,
            artifacts: Vec::new(),
            ..r.clone()
        };
        objects.write_ready(&bare).await.unwrap();
        assert_eq!(
            objects.ready_shards(&spec).await.unwrap().0,
            Vec::<u32>::new()
        );
        objects.write_ready(&r).await.unwrap();
        assert_eq!(
            objects.ready_shards(&spec).await.unwrap(),
            (vec![1], vec![0])
        );
        // a marker for another manifest does not count
        r.shard = 0;
        r.databases = m
            .shards
            .as_ref()
            .unwrap()
            .databases_of(0, m.dbs.len() as u32);
        r.artifacts = files(&r.databases);
        r.manifest_sha256[0] ^= 1;
        objects.write_ready(&r).await.unwrap();
        assert_eq!(objects.ready_shards(&spec).await.unwrap().0, vec![1]);
        r.manifest_sha256[0] ^= 1;
        objects.write_ready(&r).await.unwrap();
        assert_eq!(objects.ready_shards(&spec).await.unwrap().0, vec![0, 1]);
        assert!(!objects.is_published(3).await.unwrap());
        let (ready, _) = objects.ready_markers(&spec).await.unwrap();
        let all: Vec<DbArtifact> = ready.into_iter().flat_map(|r| r.artifacts).collect();
        let published = PublishedMarker::for_spec(&spec, 2, all.clone(), 0);
        assert!(published.names(&spec));
        assert!(!PublishedMarker::for_spec(&spec, 2, all[1..].to_vec(), 0).names(&spec));
        objects.write_published(&published).await.unwrap();
        assert_eq!(objects.newest_published().await.unwrap(), Some(3));
        assert_eq!(objects.published(3).await.unwrap(), Some(published));
        // a damaged snapshot is refused, naming the part
        let key = objects.epoch_key(3, &format!("{}/{}", snapshot_object(&spec), part_object(0)));
        let mut bad = objects.read_capped(&key, 1 << 20).await.unwrap().unwrap();
        bad[100] ^= 1;
        objects.put(&key, bad).await.unwrap();
        let e = objects.read_snapshot(&spec).await.unwrap_err().to_string();
        assert!(
            e.contains(&snapshot_object(&spec)) && e.contains("part-000000"),
            "{e}"
        );
    }
}
