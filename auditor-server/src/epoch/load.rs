//! Loading a published epoch: the manifest, the bitmaps bound to it, the
//! NTT hints (recomputed if damaged), only the databases this shard holds.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use audit_proto::Manifest;
use pir_core::db::BitDatabase;
use pir_core::params::DbShape;
use pir_core::rns::Context;
use pir_core::sampler::PublicSeed;
use pir_core::server::Server;

use super::artifacts::{corrupt, read_bits, read_capped, BitsHeader, MAX_MANIFEST_FILE};
use super::Epoch;
use crate::config::ShardConfig;
use crate::error::{Error, Result};
use crate::layout::{bits_name, hint_name, manifest_digest, MANIFEST_FILE};

/// Loads a published epoch directory: manifest, bitmaps (checksummed, and
/// bound to the manifest by its digest) and NTT hints (checksummed;
/// recomputed with a warning if damaged). Refuses the epoch if the
/// manifest is missing, or differs from the one its bitmaps were built
/// with, or a bitmap is damaged or of an older format, or the epoch was
/// planned for another shard layout than `shard`. Loads only the databases
/// `shard` holds.
pub fn load_epoch(
    dir: &Path,
    shard: &ShardConfig,
    budget: &crate::memory::Budget,
) -> Result<Epoch> {
    let t = Instant::now();
    let mpath = dir.join(MANIFEST_FILE);
    let json = match read_capped(&mpath, MAX_MANIFEST_FILE) {
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Err(corrupt(
                &mpath,
                "missing: without its manifest the epoch's databases cannot be checked or served"
                    .into(),
            ))
        }
        r => r?,
    };
    let digest = manifest_digest(&json);
    let manifest = Manifest::from_json(&json).map_err(|e| corrupt(&mpath, e.to_string()))?;
    let params = pir_core::params::by_id(manifest.pir.param_set)?;
    let ctx = Arc::new(Context::new(params));
    let own = shard.own_databases(&manifest)?;
    crate::memory::check(&manifest, &own, (shard.index, shard.count), false, budget)?;
    let mut servers: Vec<Option<Server>> = (0..manifest.dbs.len()).map(|_| None).collect();
    for spec in own.iter().filter_map(|&d| manifest.dbs.get(d as usize)) {
        let id = spec.id as usize;
        let bpath = dir.join(bits_name(id));
        let header = BitsHeader {
            epoch: manifest.epoch,
            db: spec.id,
            bits: spec.bits,
            manifest: digest,
        };
        let bitmap = read_bits(&bpath, &header, &mpath)?;
        let db = BitDatabase::from_bitmap_owned(spec.bits, bitmap)?.into_database();
        let shape = db.shape();
        if shape
            != (DbShape {
                ell1: spec.rows as usize,
                ell2: spec.cols as usize,
            })
        {
            return Err(corrupt(
                &mpath,
                format!("database {id}: shape differs from the manifest"),
            ));
        }
        let seed = PublicSeed(spec.seed);
        let hpath = dir.join(hint_name(id));
        let hint = read_capped(&hpath, Server::hint_file_len(&params, shape) as u64)
            .map_err(|e| e.to_string());
        let server = match hint.and_then(|h| {
            Server::from_hint(ctx.clone(), db.clone(), seed, &h).map_err(|e| e.to_string())
        }) {
            Ok(s) => s,
            Err(why) => {
                tracing::warn!(path = %hpath.display(), %why, "hint unusable; recomputing DBSetup");
                Server::setup_with_context(ctx.clone(), db, seed)?
            }
        };
        servers[id] = Some(server);
    }
    log_prefetch_choice();
    let report = read_capped(&dir.join("build.json"), 1 << 20)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    tracing::info!(
        epoch = manifest.epoch,
        dbs = own.len(),
        of = servers.len(),
        seconds = t.elapsed().as_secs_f64(),
        "epoch loaded"
    );
    Ok(Epoch {
        manifest,
        servers,
        report,
    })
}

/// Logs the SimplePIR software-prefetch distance and single-query kernel
/// pir-core chose (`pir_core::server::prefetch_tuning`) each time it has
/// measured again (at the 1st, 2nd, 4th, 8th, … database large enough to
/// measure on): it depends on the machine, so an operator comparing hosts
/// should see it.
pub(super) fn log_prefetch_choice() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    // measurements logged so far, plus one (0: nothing logged yet)
    static LOGGED: AtomicUsize = AtomicUsize::new(0);
    if let Some(t) = pir_core::server::prefetch_tuning() {
        if LOGGED.swap(t.measurements + 1, Ordering::Relaxed) != t.measurements + 1 {
            tracing::info!(
                bytes = t.chosen,
                single_query_kernel = t.kernel,
                forced = t.forced,
                measurements = t.measurements,
                candidates_gb_s = ?t.candidates,
                "SimplePIR prefetch distance"
            );
        }
    }
}
