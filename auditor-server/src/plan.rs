//! Epoch specs: what the shards of one epoch share
//! (`auditor-server epoch plan`, `docs/operator.md` §Sharded mode).
//!
//! Every bit of an epoch follows from the snapshot S, the salt seed, the
//! PIR seed and the layout. A single server draws the seeds itself right
//! after its snapshot; the shards of a sharded epoch must agree on them,
//! so one `epoch plan` run snapshots the store, draws both seeds from the
//! OS CSPRNG (after S is fixed, as Prop. 6.2 requires) and writes the
//! epoch spec: the complete manifest (seeds, coverage, layout, shard map)
//! and a SHA-256 digest of S ([`set_digest`]). Each shard then reads the
//! store again at the spec's snapshot time, checks that it gets exactly
//! that set (else [`Error::SnapshotMismatch`]: the store changed since the
//! plan), and builds only its own databases ([`build_from_spec`]). The
//! manifest — and so the digest every bitmap file is bound to — is the
//! same bytes on every shard.
//!
//! The shards must therefore read the same store (the same database, not
//! replicas that may lag), and nothing may be committed to or pruned from
//! it between the plan and the last shard's snapshot. The object-store
//! mode ([`crate::objstore`]: `epoch prepare` / `epoch publish`) has no
//! such requirement: the coordinator writes the snapshot once, sorted and
//! checksummed, next to the spec, and every shard reads that.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use audit_proto::{Manifest, ShardMap};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::Config;
use crate::config::ShardConfig;
use crate::epoch::{self, BuildParams, Epoch, PlanInput};
use crate::epochdir::EpochDir;
use crate::error::{io, Error, Result};

/// Version of the spec file format.
pub const SPEC_VERSION: u32 = 1;
/// Largest spec file read.
pub const MAX_SPEC_BYTES: u64 = 8 << 20;
/// Filters whose fill ratio `epoch plan` measures for the manifest.
pub const FILL_SAMPLE_FILTERS: u32 = 8;
pub use crate::layout::{set_digest, SET_DOMAIN};

/// The shared plan of one epoch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EpochSpec {
    /// [`SPEC_VERSION`].
    pub spec_version: u32,
    /// [`set_digest`] of S.
    #[serde(with = "audit_proto::hex::array")]
    pub set_sha256: [u8; 32],
    /// The epoch's manifest, as every shard will serve it.
    pub manifest: Manifest,
}

impl EpochSpec {
    /// Parses and checks a spec (the manifest with every invariant of
    /// [`Manifest::from_json`]).
    pub fn from_json(bytes: &[u8]) -> Result<EpochSpec> {
        let spec: EpochSpec =
            serde_json::from_slice(bytes).map_err(|e| Error::Config(format!("epoch spec: {e}")))?;
        if spec.spec_version != SPEC_VERSION {
            return Err(Error::Config(format!(
                "epoch spec version {} (this server reads {SPEC_VERSION})",
                spec.spec_version
            )));
        }
        spec.manifest.check()?;
        Ok(spec)
    }

    /// The spec as written (pretty JSON).
    pub fn to_json(&self) -> Vec<u8> {
        // Plain structs of strings and integers: cannot fail.
        let mut v = serde_json::to_vec_pretty(self).unwrap_or_default();
        v.push(b'\n');
        v
    }

    /// SHA-256 of the spec as written ([`EpochSpec::to_json`]): what the
    /// shards' ready markers and the published marker name, so that a
    /// shard serves an epoch only under the spec it was built from.
    pub fn digest(&self) -> [u8; 32] {
        Sha256::digest(self.to_json()).into()
    }

    /// Reads a spec file; also returns the SHA-256 of its bytes (to tell
    /// a changed file from one already tried).
    pub fn read(path: &Path) -> Result<(EpochSpec, [u8; 32])> {
        let bytes = EpochSpec::read_bytes(path)?;
        let spec = EpochSpec::from_json(&bytes).map_err(|e| match e {
            Error::Config(m) => Error::Config(format!("{}: {m}", path.display())),
            e => e,
        })?;
        Ok((spec, Sha256::digest(&bytes).into()))
    }

    /// The bytes of a spec file (at most [`MAX_SPEC_BYTES`]).
    pub fn read_bytes(path: &Path) -> Result<Vec<u8>> {
        use std::io::Read as _;
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .map_err(io(path))?
            .take(MAX_SPEC_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(io(path))?;
        if bytes.len() as u64 > MAX_SPEC_BYTES {
            return Err(Error::Config(format!(
                "{}: epoch spec over {MAX_SPEC_BYTES} bytes",
                path.display()
            )));
        }
        Ok(bytes)
    }

    /// Writes the spec to `path` atomically (a temporary file next to it,
    /// fsynced, then renamed over it).
    pub fn write(&self, path: &Path) -> Result<()> {
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        };
        let mut tmp = tempfile::NamedTempFile::new_in(&parent).map_err(io(&parent))?;
        tmp.write_all(&self.to_json()).map_err(io(path))?;
        tmp.as_file().sync_all().map_err(io(path))?;
        tmp.persist(path).map_err(|e| Error::Io {
            path: path.display().to_string(),
            source: e.error,
        })?;
        Ok(())
    }
}

/// Plans epoch `epoch`: snapshots the store at `now_s`, draws the salt
/// and PIR seeds from the OS CSPRNG, lays the databases out as
/// `config` says and assigns them to its shards (`[shard]` count, URLs,
/// rule or lists).
pub async fn plan_epoch(
    store: &ct_store::Store,
    config: &Config,
    epoch: u64,
    now_s: i64,
) -> Result<EpochSpec> {
    let snap = epoch::snapshot(store, now_s).await?;
    plan_snapshot(&snap, config, epoch)
}

/// Plans epoch `epoch` of the snapshot `snap` (taken just before): draws
/// the salt and PIR seeds from the OS CSPRNG now that S is fixed (Prop.
/// 6.2) and lays the databases out as `config` says.
pub fn plan_snapshot(snap: &epoch::Snapshot, config: &Config, epoch: u64) -> Result<EpochSpec> {
    plan_with(
        (
            snap.now_s,
            snap.hashes.len() as u64,
            set_digest(&snap.hashes),
        ),
        &snap.coverage,
        config,
        epoch,
        |m| epoch::sample_fill_ratio(m, &snap.hashes, FILL_SAMPLE_FILTERS),
    )
}

/// [`plan_snapshot`] of a snapshot sorted on disk (the coordinator's):
/// the fill ratio is measured in memory independent of |S|
/// ([`epoch::sample_fill_ratio_sorted`]).
pub fn plan_sorted(snap: &epoch::SortedSnapshot, config: &Config, epoch: u64) -> Result<EpochSpec> {
    plan_with(
        (snap.now_s, snap.entries, snap.set_sha256),
        &snap.coverage,
        config,
        epoch,
        |m| epoch::sample_fill_ratio_sorted(m, snap, FILL_SAMPLE_FILTERS),
    )
}

fn plan_with(
    (now_s, entries, set_sha256): (i64, u64, [u8; 32]),
    coverage: &[ct_store::Coverage],
    config: &Config,
    epoch: u64,
    fill_ratio: impl FnOnce(&audit_proto::Manifest) -> Result<audit_proto::FillRatio>,
) -> Result<EpochSpec> {
    let bp = BuildParams::from_config(config)?;
    let input = PlanInput {
        epoch,
        created_at: epoch::unix_now_s(),
        snapshot_at: now_s,
        entries,
        coverage: coverage.to_vec(),
        // drawn now that S is fixed (Prop. 6.2)
        salt_seed: epoch::fresh_seed()?,
        pir_seed: epoch::fresh_seed()?,
        shards: config.shard.map(),
    };
    let manifest = epoch::plan_manifest(input, &bp).map_err(|e| match e {
        Error::Manifest(e) => Error::Config(format!(
            "the [shard] configuration does not fit epoch {epoch}: {e}"
        )),
        e => e,
    })?;
    // No shard builds every database: the plan measures the fill ratio
    // the shards will serve on a sample of the filters.
    let ratio = fill_ratio(&manifest)?;
    let manifest = manifest.with_fill_ratio(ratio)?;
    Ok(EpochSpec {
        spec_version: SPEC_VERSION,
        set_sha256,
        manifest,
    })
}

/// Checks that this shard can build its part of the planned epoch `spec`:
/// the spec's parameter set is `bp`'s, the shard layout matches
/// ([`ShardConfig::own_databases`]) and the databases fit the memory
/// budget. Returns this shard's databases.
pub fn check_spec(spec: &EpochSpec, shard: &ShardConfig, bp: &BuildParams) -> Result<Vec<u32>> {
    let own = check_spec_params(spec, shard, bp)?;
    let m = &spec.manifest;
    crate::memory::check(m, &own, (shard.index, shard.count), true, &bp.budget)?;
    Ok(own)
}

/// [`check_spec`] for a build that streams the snapshot from the object
/// store ([`crate::memory::need_streamed`]).
pub fn check_spec_streamed(
    spec: &EpochSpec,
    shard: &ShardConfig,
    bp: &BuildParams,
) -> Result<Vec<u32>> {
    let own = check_spec_params(spec, shard, bp)?;
    let m = &spec.manifest;
    crate::memory::check_streamed(m, &own, (shard.index, shard.count), &bp.budget)?;
    Ok(own)
}

fn check_spec_params(spec: &EpochSpec, shard: &ShardConfig, bp: &BuildParams) -> Result<Vec<u32>> {
    let m = &spec.manifest;
    if m.pir.param_set != bp.params.id {
        return Err(Error::Config(format!(
            "epoch {} is planned with parameter set {}, this server is configured for {}",
            m.epoch, m.pir.param_name, bp.params.name
        )));
    }
    shard.own_databases(m)
}

/// Builds this shard's databases of the planned epoch `spec` into `dir`
/// and publishes them there: checks the spec ([`check_spec`]), snapshots
/// the store at the spec's snapshot time and refuses unless it gets the
/// planned set ([`Error::SnapshotMismatch`]). `bp.params` must be the
/// spec's parameter set (the configuration's insecure-set permission
/// applies).
pub async fn build_from_spec(
    store: &ct_store::Store,
    dir: &EpochDir,
    spec: &EpochSpec,
    shard: &ShardConfig,
    bp: &BuildParams,
    keep: usize,
) -> Result<(PathBuf, Epoch)> {
    let t = Instant::now();
    let m = &spec.manifest;
    let id = m.epoch;
    let own = check_spec(spec, shard, bp)?;
    if dir.list()?.contains(&id) {
        return Err(Error::Config(format!(
            "epoch {id} is already in {}",
            dir.root().display()
        )));
    }
    let snap = epoch::snapshot(store, m.snapshot_at).await?;
    let got = set_digest(&snap.hashes);
    if got != spec.set_sha256 || snap.hashes.len() as u64 != m.entries {
        return Err(Error::SnapshotMismatch {
            epoch: id,
            snapshot_at: m.snapshot_at,
            want_entries: m.entries,
            want: audit_proto::hex::encode(&spec.set_sha256),
            got_entries: snap.hashes.len() as u64,
            got: audit_proto::hex::encode(&got),
        });
    }
    tracing::info!(
        epoch = id,
        shard = shard.index,
        of = shard.count,
        dbs = own.len(),
        entries = snap.hashes.len(),
        snapshot_s = t.elapsed().as_secs_f64(),
        "building this shard's databases of a planned epoch"
    );
    let (manifest, bp) = (m.clone(), bp.clone());
    epoch::build_into(dir, id, keep, move |out| {
        epoch::build_planned(manifest, &snap.hashes, &own, &bp, out, t)
    })
    .await
}

/// Each shard's databases and memory estimate of the planned epoch `m`,
/// as `epoch plan` and `epoch prepare` print them. A shard (group) that
/// gets no database (fewer databases than shards, e.g. `db_bits_target`
/// larger than the whole set) is listed in `groups_without_databases` and
/// logged as a warning: its servers hold nothing and answer every query
/// 421.
pub fn shard_summary(m: &Manifest) -> Result<serde_json::Value> {
    shard_summary_for(m, false)
}

/// [`shard_summary`]; `streamed`: the shards stream the snapshot from the
/// object store (`epoch prepare`), so their build peak has no term in |S|
/// ([`crate::memory::need_streamed`]).
pub fn shard_summary_for(m: &Manifest, streamed: bool) -> Result<serde_json::Value> {
    let count = m.shards.as_ref().map_or(1, ShardMap::count);
    let mut empty = Vec::new();
    let shards: Vec<serde_json::Value> = (0..count)
        .map(|i| {
            let own = match &m.shards {
                Some(map) => map.databases_of(i, m.dbs.len() as u32),
                None => (0..m.dbs.len() as u32).collect(),
            };
            if own.is_empty() {
                empty.push(i);
            }
            let need = if streamed {
                crate::memory::need_streamed(m, &own)?
            } else {
                crate::memory::need(m, &own, true)?
            };
            Ok(serde_json::json!({
                "shard": i,
                "url": m.shards.as_ref().and_then(|s| s.urls.get(i as usize)),
                "databases": own.len(),
                "memory_serving_bytes": need.serving(),
                "memory_build_peak_bytes": need.peak(),
            }))
        })
        .collect::<Result<_>>()?;
    if !empty.is_empty() {
        tracing::warn!(
            epoch = m.epoch,
            databases = m.dbs.len(),
            shards = count,
            groups = ?empty,
            "some shard groups get no database of this epoch (fewer databases than shards: \
             lower [epoch] db_bits_target or the shard count); their servers hold nothing"
        );
    }
    Ok(serde_json::json!({
        "epoch": m.epoch,
        "snapshot_at": m.snapshot_at,
        "entries": m.entries,
        "databases": m.dbs.len(),
        "shards": shards,
        "groups_without_databases": empty,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_digest_binds_order_and_count() {
        let a = [[1u8; 32], [2u8; 32]];
        let b = [[2u8; 32], [1u8; 32]];
        assert_ne!(set_digest(&a), set_digest(&b));
        assert_ne!(set_digest(&a), set_digest(&a[..1]));
        assert_eq!(set_digest(&a), set_digest(&a.clone()));
        assert_ne!(set_digest(&[]), [0; 32]);
    }
}
