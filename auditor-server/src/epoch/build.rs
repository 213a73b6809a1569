//! Building an epoch: its manifest from the snapshot and the seeds
//! ([`plan_manifest`]), the filters and databases ([`build_planned`]), and
//! the whole single-server build and publication ([`build_epoch`],
//! [`build_next`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use audit_proto::filter::FilterSpec;
use audit_proto::manifest::{DbLayout, FillRatio, LogCoverage, Manifest, ManifestParts, PirSpec};
use indicatif::{ProgressBar, ProgressStyle};
use pir_core::db::BitDatabase;
use pir_core::params::DbShape;
use pir_core::rns::Context;
use pir_core::sampler::PublicSeed;
use pir_core::server::Server;
use rayon::prelude::*;

use super::artifacts::{hint_write_error, write_bits, write_synced, BitsHeader};
use super::load::log_prefetch_choice;
use super::{
    fresh_seed, snapshot, unix_now_s, BuildParams, BuildReport, Epoch, PlanInput, Snapshot,
};
use crate::epochdir::EpochDir;
use crate::error::{io, Error, Result};
use crate::layout::{bits_name, hint_name, manifest_digest, plan_dbs, MANIFEST_FILE};

fn bar(show: bool, len: u64, what: &str) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len);
    if let Ok(style) =
        ProgressStyle::with_template("{msg:>24} [{bar:40}] {pos}/{len} ({elapsed}, eta {eta})")
    {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_message(what.to_owned());
    pb
}

/// The manifest of an epoch: filters of k·N bits (N from |S|), grouped
/// into databases by [`plan_dbs`], with the seeds and shard map of `input`.
/// Everything a shard needs to build its own databases bit for bit like
/// every other shard, given the same leaf hashes.
pub fn plan_manifest(input: PlanInput, bp: &BuildParams) -> Result<Manifest> {
    let params = bp.params;
    let entries = input.entries;
    let n = FilterSpec::capacity_for(entries);
    let filter_bits = n
        .checked_mul(u64::from(bp.k))
        .filter(|&b| b <= audit_proto::filter::MAX_FILTER_BITS)
        .ok_or_else(|| Error::Config(format!("k·N too large for |S| = {entries}")))?;
    let filter = FilterSpec::new(bp.filters, bp.k, n, input.salt_seed)?;
    let plan = plan_dbs(bp.filters, filter_bits, bp.db_bits_target);
    // The layout follows from the plan alone, so the manifest is fixed
    // before any database is written and every bitmap file can carry its
    // digest.
    let layout: Vec<DbLayout> = plan
        .iter()
        .map(|&(_, count)| {
            let shape = DbShape::for_bits(u64::from(count) * filter_bits, BitDatabase::RECORD_BITS);
            DbLayout {
                filters: count,
                rows: shape.ell1 as u64,
                cols: shape.ell2 as u64,
                query_bytes: pir_core::wire::query_len(&params, shape) as u64,
                response_bytes: pir_core::wire::response_len(&params) as u64,
            }
        })
        .collect();
    let logs = input
        .coverage
        .iter()
        .map(|c| LogCoverage {
            log_id: c.log_id,
            verified_tree_size: c.verified_tree_size,
            verified_position: c.verified_position,
            ingested_until_ms: c.ingested_until_ms,
            mmd_s: c.mmd_s,
        })
        .collect();
    let pir = PirSpec {
        scheme: "ypir".to_owned(),
        param_set: params.id,
        param_name: params.name.to_owned(),
        wire_version: pir_core::wire::VERSION,
        seed: input.pir_seed,
    };
    Ok(Manifest::new(ManifestParts {
        epoch: input.epoch,
        created_at: input.created_at,
        snapshot_at: input.snapshot_at,
        entries,
        logs,
        filter,
        pir,
        layout: &layout,
        shards: input.shards,
    })?)
}

/// The fill ratio of the first `sample` filters of the planned epoch
/// `manifest` over the leaf hashes `hashes` (one filter in memory at a
/// time): what `epoch plan` states for a sharded epoch, whose databases no
/// single server builds. The filters' ratios differ by a few times
/// 1/√(k·N), so a few filters measure the epoch's.
pub fn sample_fill_ratio(
    manifest: &Manifest,
    hashes: &[[u8; 32]],
    sample: u32,
) -> Result<FillRatio> {
    let filter_bits = manifest.filter.bits;
    let n = sample.clamp(1, manifest.filter.a);
    let mut words = vec![0u8; (filter_bits / 8) as usize];
    let mut set = 0u64;
    for j in 0..n {
        words.fill(0);
        crate::fill::fill_filters(
            &manifest.filter,
            hashes,
            vec![(j, &mut words[..])],
            &indicatif::ProgressBar::hidden(),
        )?;
        set += words.iter().map(|b| u64::from(b.count_ones())).sum::<u64>();
    }
    Ok(FillRatio::from_counts(
        set,
        filter_bits.saturating_mul(u64::from(n)),
    )?)
}

/// Bits of each sampled filter that [`sample_fill_ratio_sorted`] fills:
/// 2^27 bits, 16 MiB per filter (all of a smaller filter).
pub const SAMPLE_WINDOW_BITS: u64 = 1 << 27;

/// [`sample_fill_ratio`] over a snapshot on disk, in memory independent
/// of |S|: of each of the first `sample` (at most 8) filters, the first
/// [`SAMPLE_WINDOW_BITS`] bits (the filter hash is uniform, so a window
/// fills like its filter: at 2^27 bits × 8 filters the standard error of
/// the ratio is below 10^-5). Equal to [`sample_fill_ratio`] when the
/// filters are no larger than the window.
pub fn sample_fill_ratio_sorted(
    manifest: &Manifest,
    snap: &super::SortedSnapshot,
    sample: u32,
) -> Result<FillRatio> {
    let n = sample.clamp(1, manifest.filter.a.min(8));
    let window = manifest.filter.bits.min(SAMPLE_WINDOW_BITS) / 8 * 8;
    let mut maps = vec![vec![0u8; (window / 8) as usize]; n as usize];
    snap.for_each_chunk(|c| crate::fill::fill_window(&manifest.filter, c, &mut maps, window))?;
    let set = maps
        .iter()
        .flatten()
        .map(|b| u64::from(b.count_ones()))
        .sum::<u64>();
    Ok(FillRatio::from_counts(set, window * u64::from(n))?)
}

/// Builds epoch `epoch` from `snap` into the directory `out` (created by
/// the caller, e.g. [`EpochDir::begin`]) on one server: fresh seeds,
/// every database, the shard map of `bp` (if any). CPU-bound; call from a
/// blocking thread.
pub fn build_epoch(snap: &Snapshot, epoch: u64, bp: &BuildParams, out: &Path) -> Result<Epoch> {
    let t_all = Instant::now();
    // Fresh salts (derived from a fresh seed), drawn now that S is fixed
    // (Prop. 6.2), and a fresh public seed for the PIR databases.
    let manifest = plan_manifest(
        PlanInput {
            epoch,
            created_at: unix_now_s(),
            snapshot_at: snap.now_s,
            entries: snap.hashes.len() as u64,
            coverage: snap.coverage.clone(),
            salt_seed: fresh_seed()?,
            pir_seed: fresh_seed()?,
            shards: bp.shards.clone(),
        },
        bp,
    )?;
    let all: Vec<u32> = (0..manifest.dbs.len() as u32).collect();
    crate::memory::check(&manifest, &all, (0, 1), true, &bp.budget)?;
    build_planned(manifest, &snap.hashes, &all, bp, out, t_all)
}

/// Builds the databases `own` of the planned epoch `manifest` from the
/// snapshot's leaf hashes `hashes` (sorted, deduplicated, exactly
/// `manifest.entries` of them) into `out`: filters, DBSetup, artifacts and
/// the manifest. The other databases are left to the other shards.
/// [`build_planned_with`] fed `hashes` in slices. CPU-bound; call from a
/// blocking thread.
pub fn build_planned(
    manifest: Manifest,
    hashes: &[[u8; 32]],
    own: &[u32],
    bp: &BuildParams,
    out: &Path,
    t_all: Instant,
) -> Result<Epoch> {
    if hashes.len() as u64 != manifest.entries {
        return Err(Error::Internal(format!(
            "{} leaf hashes for a manifest of |S| = {}",
            hashes.len(),
            manifest.entries
        )));
    }
    build_planned_with(manifest, own, bp, out, t_all, |add| {
        hashes.chunks(crate::fill::ROUND).try_for_each(add)
    })
}

/// Builds the databases `own` of the planned epoch `manifest` into `out`
/// from leaf hashes that arrive in chunks: `feed` is called once with a
/// function it calls on each chunk (in any order, any sizes; together
/// exactly the `manifest.entries` entries of S), and returns `Ok` only
/// once every chunk it gave is known good. The chunks' bits are set as
/// they arrive; nothing is written to `out` before `feed` returns `Ok`
/// and the count matches. Then DBSetup, artifacts and the manifest, as
/// [`build_planned`]. CPU-bound; call from a blocking thread.
pub fn build_planned_with<F>(
    manifest: Manifest,
    own: &[u32],
    bp: &BuildParams,
    out: &Path,
    t_all: Instant,
    feed: F,
) -> Result<Epoch>
where
    F: FnOnce(&mut dyn FnMut(&[[u8; 32]]) -> Result<()>) -> Result<()>,
{
    let params = pir_core::params::by_id(manifest.pir.param_set)?;
    let epoch = manifest.epoch;
    let filter_bits = manifest.filter.bits;
    let ctx = Arc::new(Context::new(params));
    let own_filters: u64 = own
        .iter()
        .filter_map(|&d| manifest.dbs.get(d as usize))
        .map(|d| u64::from(d.filters))
        .sum();
    let mut report = BuildReport {
        epoch,
        entries: manifest.entries,
        filters: manifest.filter.a,
        filter_bits,
        dbs: own.len(),
        ..Default::default()
    };
    let mut servers: Vec<Option<Server>> = (0..manifest.dbs.len()).map(|_| None).collect();
    // First every filter (their bits do not depend on the manifest's
    // bytes), so that the measured fill ratio can go into the manifest
    // before its digest is written into the bitmap files.
    let pb = bar(bp.progress, manifest.entries, "hashing into filters");
    let (t, cpu) = (Instant::now(), crate::fill::cpu_seconds());
    let mut filled = crate::fill::own_bitmaps(&manifest, own)?;
    {
        let filters = crate::fill::filters_of(&manifest, &mut filled);
        let mut filler = crate::fill::Filler::new(&manifest.filter, filters)?;
        let want = manifest.entries;
        feed(&mut |chunk: &[[u8; 32]]| {
            if filler.entries() + chunk.len() as u64 > want {
                return Err(Error::Internal(format!(
                    "more than the {want} leaf hashes the manifest plans"
                )));
            }
            filler.add(chunk);
            pb.inc(chunk.len() as u64);
            Ok(())
        })?;
        if filler.entries() != want {
            return Err(Error::Internal(format!(
                "{} leaf hashes for a manifest of |S| = {want}",
                filler.entries()
            )));
        }
    }
    report.filters_cpu_s = cpu
        .zip(crate::fill::cpu_seconds())
        .map_or(0.0, |(a, b)| b - a);
    let mut set_bits = 0u64;
    let mut bitmaps = Vec::with_capacity(own.len());
    for &d in own {
        let bitmap = filled
            .get_mut(d as usize)
            .and_then(Option::take)
            .ok_or_else(|| Error::Internal(format!("database {d} listed twice")))?;
        set_bits += bitmap
            .par_iter()
            .map(|b| u64::from(b.count_ones()))
            .sum::<u64>();
        bitmaps.push((d, bitmap));
    }
    report.filters_s += t.elapsed().as_secs_f64();
    pb.finish_and_clear();
    let own_bits = filter_bits.saturating_mul(own_filters);
    report.fill_ratio = set_bits as f64 / own_bits.max(1) as f64;
    // A server that builds every database measures the whole epoch; the
    // shards of a planned epoch serve the ratio `epoch plan` measured.
    let manifest = if manifest.fill_ratio.is_none() && own_filters == u64::from(manifest.filter.a) {
        manifest.with_fill_ratio(FillRatio::from_counts(set_bits, own_bits)?)?
    } else {
        manifest
    };
    let manifest_json = manifest.to_json();
    let digest = manifest_digest(&manifest_json);
    for (d, bitmap) in bitmaps {
        let id = d as usize;
        let spec = &manifest.dbs[id];
        let bits = spec.bits;
        let t = Instant::now();
        let header = BitsHeader {
            epoch,
            db: d,
            bits,
            manifest: digest,
        };
        write_bits(&out.join(bits_name(id)), &header, &bitmap)?;
        report.persist_s += t.elapsed().as_secs_f64();

        let t = Instant::now();
        let seed = PublicSeed(spec.seed);
        let db = BitDatabase::from_bitmap_owned(bits, bitmap)?.into_database();
        report.db_bytes += db.as_bytes().len() as u64;
        let server = Server::setup_with_context(ctx.clone(), db, seed)?;
        report.setup_s += t.elapsed().as_secs_f64();
        let want = DbShape {
            ell1: spec.rows as usize,
            ell2: spec.cols as usize,
        };
        if server.shape() != want {
            return Err(Error::Internal(format!(
                "database {id}: pir-core chose another shape than DbShape::for_bits"
            )));
        }

        let t = Instant::now();
        let hint_path = out.join(hint_name(id));
        let mut f =
            std::io::BufWriter::new(std::fs::File::create(&hint_path).map_err(io(&hint_path))?);
        server
            .write_hint(&mut f)
            .map_err(|e| hint_write_error(&hint_path, e))?;
        let f = f.into_inner().map_err(|e| Error::Io {
            path: hint_path.display().to_string(),
            source: e.into_error(),
        })?;
        f.sync_all().map_err(io(&hint_path))?;
        report.persist_s += t.elapsed().as_secs_f64();
        // Epochs are rebuilt, never updated: serve what a restart from the
        // hint file would (crate::memory).
        let mut server = server;
        server.release_update_state();
        servers[id] = Some(server);
    }
    log_prefetch_choice();
    report.total_s = t_all.elapsed().as_secs_f64();
    let t = Instant::now();
    write_synced(&out.join(MANIFEST_FILE), &manifest_json)?;
    report.persist_s += t.elapsed().as_secs_f64();
    let json = serde_json::to_vec_pretty(&report)?;
    write_synced(&out.join("build.json"), &json)?;
    Ok(Epoch {
        manifest,
        servers,
        report: Some(report),
    })
}

/// Snapshot of the store at `now_s`, build of the next epoch, publication
/// and pruning: what `auditor-server build-epoch` and the schedule run.
pub async fn build_next(
    store: &ct_store::Store,
    dir: &EpochDir,
    bp: BuildParams,
    keep: usize,
    now_s: i64,
) -> Result<(PathBuf, Epoch)> {
    let t = Instant::now();
    let snap = snapshot(store, now_s).await?;
    let snap_s = t.elapsed().as_secs_f64();
    let id = dir.latest()?.map_or(1, |l| l + 1);
    tracing::info!(
        epoch = id,
        entries = snap.hashes.len(),
        snapshot_s = snap_s,
        "building epoch"
    );
    build_into(dir, id, keep, move |out| build_epoch(&snap, id, &bp, out)).await
}

/// Runs `build` on a blocking thread into the private directory of epoch
/// `id`, then publishes it and prunes old epochs. A failed build leaves no
/// `.building-*` directory behind.
pub async fn build_into<F>(
    dir: &EpochDir,
    id: u64,
    keep: usize,
    build: F,
) -> Result<(PathBuf, Epoch)>
where
    F: FnOnce(&Path) -> Result<Epoch> + Send + 'static,
{
    let tmp = dir.begin(id)?;
    let tmp2 = tmp.clone();
    let built = tokio::task::spawn_blocking(move || build(&tmp2))
        .await
        .map_err(Error::from)
        .and_then(|r| r);
    let epoch = match built {
        Ok(e) => e,
        Err(e) => {
            dir.abandon(&tmp);
            return Err(e);
        }
    };
    let path = dir.commit(id, &tmp)?;
    dir.prune(keep)?;
    if let Some(r) = &epoch.report {
        tracing::info!(
            epoch = id,
            dbs = r.dbs,
            of = epoch.manifest.dbs.len(),
            db_bytes = r.db_bytes,
            total_s = r.total_s,
            fill = r.fill_ratio,
            "epoch published"
        );
    }
    Ok((path, epoch))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ShardConfig;
    use crate::epoch::load_epoch;
    use sha2::{Digest, Sha256};

    #[test]
    fn the_manifest_states_the_measured_fill_ratio() {
        let hashes: Vec<[u8; 32]> = (0..40u32)
            .map(|i| Sha256::digest(i.to_le_bytes()).into())
            .collect();
        let snap = Snapshot {
            now_s: 1_700_000_000,
            hashes,
            coverage: Vec::new(),
        };
        let bp = BuildParams {
            filters: 6,
            k: 8,
            db_bits_target: 1 << 10,
            params: pir_core::params::TOY,
            progress: false,
            shards: None,
            budget: crate::memory::Budget::default(),
        };
        let dir = tempfile::tempdir().unwrap();
        let built = build_epoch(&snap, 1, &bp, dir.path()).unwrap();
        let m = &built.manifest;
        assert!(m.dbs.len() > 1, "{}", m.dbs.len());
        let ratio = m.fill_ratio.expect("fill ratio in the manifest");
        let report = built.report.as_ref().unwrap().fill_ratio;
        assert!((ratio.get() - report).abs() < 1e-6, "{ratio:?} {report}");
        // 40 entries in 320-bit filters: some bits collide, none is lost.
        assert!(
            ratio.get() > 0.1 && ratio.get() <= 40.0 / 320.0,
            "{ratio:?}"
        );
        assert_eq!(sample_fill_ratio(m, &snap.hashes, 6).unwrap(), ratio);
        // the same from a sorted snapshot on disk (filters within the window)
        let tmp = tempfile::tempdir().unwrap();
        let sorted = crate::epoch::SortedSnapshot::from_hashes(
            snap.hashes.iter().copied(),
            snap.now_s,
            tmp.path(),
            7,
        )
        .unwrap();
        assert_eq!(sample_fill_ratio_sorted(m, &sorted, 6).unwrap(), ratio);
        // The bitmaps are bound to the manifest with the ratio…
        let loaded = load_epoch(dir.path(), &ShardConfig::default(), &bp.budget).unwrap();
        assert_eq!(&loaded.manifest, m);
        // …and a manifest whose ratio was edited is refused.
        let path = dir.path().join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).unwrap();
        let edited = text.replacen(
            &format!("\"fill_ratio\":{}", ratio.get()),
            "\"fill_ratio\":0.01",
            1,
        );
        assert_ne!(edited, text);
        std::fs::write(&path, edited).unwrap();
        let e = load_epoch(dir.path(), &ShardConfig::default(), &bp.budget).unwrap_err();
        assert!(e.to_string().contains("another manifest"), "{e}");
    }
}
