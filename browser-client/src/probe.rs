//! One private probe: filter choice, bit index, YPIR query, decoding
//! (docs/protocol.md §1–2, §7 steps 3–6).
//!
//! The probe is transport-free so the same code runs natively and in the
//! browser (wasm32): [`Prober::prepare`] returns the URL path and body to
//! POST, [`PreparedQuery::decode`] turns the response body into the bit.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use audit_proto::Manifest;
use pir_core::client::{Client, QueryKey};
use pir_core::params::DbShape;
use pir_core::sampler::PublicSeed;
use pir_core::wire::Response;

use crate::error::{Error, Result};

/// Filter index i uniform in [0, a), from the OS CSPRNG, drawn afresh for
/// every audit (hintless: misses of repeated audits are independent).
/// Rejection sampling: no modulo bias. The loop's length depends only on
/// the random draw, not on any secret.
pub fn choose_filter(a: u32) -> Result<u32> {
    if a == 0 {
        return Err(Error::Invalid("a = 0 filters".into()));
    }
    let limit = u32::MAX - u32::MAX % a; // accept x < limit (a multiple of a)
    loop {
        let mut b = [0u8; 4];
        getrandom::getrandom(&mut b).map_err(|e| Error::Random(e.to_string()))?;
        let x = u32::from_le_bytes(b);
        if x < limit {
            return Ok(x % a);
        }
    }
}

/// A query ready to send, with the secret needed to read its answer.
pub struct PreparedQuery {
    /// Epoch queried.
    pub epoch: u64,
    /// Filter probed.
    pub filter: u32,
    /// Database queried.
    pub db: u32,
    /// `POST` path: `/v1/epochs/{epoch}/dbs/{db}/query`.
    pub path: String,
    /// Base URL of the shard serving the database, from the manifest's
    /// shard map; `None`: the auditor the manifest came from serves it.
    pub shard_url: Option<String>,
    /// The group serving the database: its shard in the manifest's shard
    /// map, 0 when the epoch is not sharded. The fallback
    /// ([`crate::fallback`]) rests failed groups by this number.
    pub group: u32,
    /// Request body (`application/octet-stream`).
    pub body: Vec<u8>,
    /// Exact length of a valid response.
    pub response_bytes: usize,
    client: Arc<Client>,
    key: QueryKey,
    bit_in_record: u32,
}

impl std::fmt::Debug for PreparedQuery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedQuery")
            .field("path", &self.path)
            .field("body_len", &self.body.len())
            .finish_non_exhaustive()
    }
}

impl PreparedQuery {
    /// The URL to `POST` the query to: the path on the database's shard,
    /// or on `auditor` (the base URL the manifest was fetched from) when
    /// the epoch is not sharded.
    pub fn url(&self, auditor: &str) -> String {
        let base = self.shard_url.as_deref().unwrap_or(auditor);
        format!("{}{}", base.trim_end_matches('/'), self.path)
    }

    /// Reads the probed bit from the response body (exact length, wire
    /// checks, seed id of this database).
    pub fn decode(&self, response: &[u8]) -> Result<bool> {
        if response.len() != self.response_bytes {
            return Err(Error::Invalid(format!(
                "response is {} bytes, expected {}",
                response.len(),
                self.response_bytes
            )));
        }
        let r = Response::from_bytes(response)?;
        Ok(self.client.extract_bit(&self.key, &r, self.bit_in_record)?)
    }
}

/// Builds probes for one epoch; caches the per-database public matrices
/// (expanded from the manifest's seeds) across probes.
pub struct Prober {
    manifest: Arc<Manifest>,
    clients: Mutex<HashMap<u32, Arc<Client>>>,
}

impl std::fmt::Debug for Prober {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prober")
            .field("epoch", &self.manifest.epoch)
            .finish()
    }
}

impl Prober {
    /// A prober for a parsed (hence checked) manifest.
    pub fn new(manifest: Arc<Manifest>) -> Prober {
        Prober {
            manifest,
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// The manifest.
    pub fn manifest(&self) -> &Arc<Manifest> {
        &self.manifest
    }

    fn client(&self, db: u32) -> Result<Arc<Client>> {
        let mut cache = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = cache.get(&db) {
            return Ok(c.clone());
        }
        let m = &self.manifest;
        let spec = m
            .dbs
            .get(db as usize)
            .ok_or_else(|| Error::Invalid(format!("no database {db}")))?;
        let params = pir_core::params::by_id(m.pir.param_set)?;
        let to_usize = |v: u64| {
            usize::try_from(v).map_err(|_| Error::Invalid("database shape too large".into()))
        };
        let shape = DbShape {
            ell1: to_usize(spec.rows)?,
            ell2: to_usize(spec.cols)?,
        };
        let expected = pir_core::wire::query_len(&params, shape) as u64;
        if expected != spec.query_bytes
            || pir_core::wire::response_len(&params) as u64 != spec.response_bytes
        {
            return Err(Error::Invalid(format!(
                "database {db}: manifest sizes disagree with parameter set {}",
                params.name
            )));
        }
        let client = Arc::new(Client::new(params, shape, PublicSeed(spec.seed))?);
        cache.insert(db, client.clone());
        Ok(client)
    }

    /// Probes `leaf_hash` in a freshly drawn random filter.
    pub fn prepare(&self, leaf_hash: &[u8; 32]) -> Result<PreparedQuery> {
        let filter = choose_filter(self.manifest.filter.a)?;
        self.prepare_in(filter, leaf_hash)
    }

    /// Probes `leaf_hash` in filter `filter` (tests and fill-ratio
    /// sampling; real audits use [`Prober::prepare`]).
    pub fn prepare_in(&self, filter: u32, leaf_hash: &[u8; 32]) -> Result<PreparedQuery> {
        let bit = self.manifest.filter.bit(filter, leaf_hash)?;
        self.prepare_bit(filter, bit)
    }

    /// Probes bit `bit` of filter `filter`.
    pub fn prepare_bit(&self, filter: u32, bit: u64) -> Result<PreparedQuery> {
        let m = &self.manifest;
        let (db, bit_in_db) = m.locate(filter, bit)?;
        let client = self.client(db)?;
        let spec = &m.dbs[db as usize];
        let (q, key, bit_in_record) = client.query_bit(spec.bits, bit_in_db)?;
        Ok(PreparedQuery {
            epoch: m.epoch,
            filter,
            db,
            path: format!("/v1/epochs/{}/dbs/{db}/query", m.epoch),
            shard_url: m.shard_url(db).map(str::to_owned),
            group: m.shards.as_ref().and_then(|s| s.shard_of(db)).unwrap_or(0),
            body: q.to_bytes(),
            response_bytes: spec.response_bytes as usize,
            client,
            key,
            bit_in_record,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_choice_is_in_range_and_spread() {
        assert!(choose_filter(0).is_err());
        assert_eq!(choose_filter(1).unwrap(), 0);
        let mut seen = [0u32; 6];
        for _ in 0..6000 {
            seen[choose_filter(6).unwrap() as usize] += 1;
        }
        // 1000 expected each, σ ≈ 29: 6σ tolerance.
        assert!(seen.iter().all(|&c| (820..=1180).contains(&c)), "{seen:?}");
    }
}
