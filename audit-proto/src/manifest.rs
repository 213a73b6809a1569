//! The epoch manifest (`GET /v1/manifest`, `docs/protocol.md` §Manifest).
//!
//! [`Manifest::from_json`] is the only way in from bytes: it caps the size,
//! rejects unknown fields, decodes every seed and log id, derives the
//! filter salts and the per-database public seeds, expands the database
//! runs and checks that the databases partition the filters in order, so
//! the rest of a client can index without further checks.
//!
//! The serialized form is compact whatever the number of filters: one salt
//! seed, one public seed, and the databases as runs of identical shapes
//! (`dbs: [{"count": 768, "filters": 1, …}]`). Database d's YPIR public
//! seed is `SHA-256("ct-audit/db-seed/v1" ‖ pir.seed ‖ u32be(d))`.
//!
//! Version 1 is an epoch served by one server; version 2 adds `shards`,
//! the map of which base URL serves which database ([`crate::shard`]).
//! A server writes version 1 whenever it has no map, so clients that know
//! only version 1 keep working with unsharded servers, and refuse (rather
//! than misroute) a sharded epoch.

use ct_core::{LeafHash, LogId};
use serde::{Deserialize, Serialize};

use crate::api::MAX_MANIFEST_BYTES;
use crate::error::{Error, Result};
use crate::filter::FilterSpec;
use crate::shard::ShardMap;

/// Manifest format version of a sharded epoch (with `shards`).
pub const MANIFEST_VERSION: u32 = 2;
/// Manifest format version of an epoch served by one server (no `shards`).
pub const MANIFEST_VERSION_UNSHARDED: u32 = 1;
pub use crate::api::MAX_DBS;
/// Largest number of logs per epoch.
pub const MAX_LOGS: usize = 4096;

/// Domain separator of the per-database seed derivation.
pub const DB_SEED_DOMAIN: &[u8] = b"ct-audit/db-seed/v1";

/// Public seed of database `d` derived from the epoch's PIR seed.
pub fn derive_db_seed(pir_seed: &[u8; 32], d: u32) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    Sha256::new()
        .chain_update(DB_SEED_DOMAIN)
        .chain_update(pir_seed)
        .chain_update(d.to_be_bytes())
        .finalize()
        .into()
}

/// One epoch, as served to clients (in memory: databases expanded, salts
/// and seeds derived; serialized: the compact form, see module docs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "ManifestWire", into = "ManifestWire")]
pub struct Manifest {
    /// [`MANIFEST_VERSION`] with a shard map,
    /// [`MANIFEST_VERSION_UNSHARDED`] without.
    pub version: u32,
    /// Epoch id: increases by one with every published epoch.
    pub epoch: u64,
    /// When the epoch was built (Unix seconds).
    pub created_at: i64,
    /// S = entries whose certificate had not expired at this time (Unix s).
    pub snapshot_at: i64,
    /// |S|.
    pub entries: u64,
    /// The fraction of the filters' bits that are set, as measured when
    /// the epoch was built ([`FillRatio`]); `None` in a manifest that does
    /// not state it.
    pub fill_ratio: Option<FillRatio>,
    /// Per-log coverage at snapshot time.
    pub logs: Vec<LogCoverage>,
    /// The filters.
    pub filter: FilterSpec,
    /// The PIR scheme.
    pub pir: PirSpec,
    /// The PIR databases, in filter order.
    pub dbs: Vec<DbSpec>,
    /// Which base URL serves which database; `None`: all of them are
    /// served where the manifest was fetched.
    pub shards: Option<ShardMap>,
}

/// What an epoch covers of one log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogCoverage {
    /// RFC 6962 LogID (SHA-256 of the log's key), base64 as in log lists.
    pub log_id: LogId,
    /// Size of the log's latest verified tree head.
    pub verified_tree_size: u64,
    /// Entries `[0, verified_position)` were ingested (unless expired).
    pub verified_position: u64,
    /// Every entry with an SCT timestamp ≤ this (ms) is in S unless
    /// expired: a client audits an SCT only once it is covered.
    pub ingested_until_ms: u64,
    /// The log's maximum merge delay (s).
    pub mmd_s: u64,
}

/// The fraction of an epoch's filter bits that are set, in [0, 1], kept
/// to the millionth (`"fill_ratio": 0.117188` in the manifest).
///
/// A leaf that is not in S reads a uniformly random bit of a uniformly
/// random filter, so this is the probability that one audit of a
/// never-logged SCT still answers "logged" (each entry sets one bit per
/// filter, so the ratio is about 1 − e^(−|S|/(k·N)) ≈ 1/k). A log that
/// chooses its certificates adversarially gets at most ½ (SimplePIR
/// §6, Prop. 6.2). Stored in millionths so that parsing and serializing
/// round-trip exactly (the manifest's bytes are bound to the epoch's
/// bitmap files by their SHA-256).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct FillRatio {
    millionths: u32,
}

impl FillRatio {
    /// One in the unit of the stored ratio.
    pub const SCALE: u32 = 1_000_000;

    /// A ratio in [0, 1], rounded to the millionth; refuses anything else
    /// (negative, above 1, NaN, infinite).
    pub fn new(ratio: f64) -> Result<FillRatio> {
        if !(0.0..=1.0).contains(&ratio) {
            return Err(Error::Invalid(format!(
                "fill_ratio {ratio} is not a ratio in [0, 1]"
            )));
        }
        Ok(FillRatio {
            millionths: (ratio * f64::from(Self::SCALE)).round() as u32,
        })
    }

    /// `set` of `total` bits set (`total` > 0, `set` ≤ `total`).
    pub fn from_counts(set: u64, total: u64) -> Result<FillRatio> {
        if total == 0 || set > total {
            return Err(Error::Invalid(format!(
                "fill ratio of {set} set bits out of {total}"
            )));
        }
        let m =
            (u128::from(set) * u128::from(Self::SCALE) + u128::from(total) / 2) / u128::from(total);
        Ok(FillRatio {
            millionths: m as u32, // ≤ SCALE
        })
    }

    /// The ratio.
    pub fn get(self) -> f64 {
        f64::from(self.millionths) / f64::from(Self::SCALE)
    }

    /// The ratio in millionths.
    pub fn millionths(self) -> u32 {
        self.millionths
    }
}

impl TryFrom<f64> for FillRatio {
    type Error = Error;
    fn try_from(r: f64) -> Result<FillRatio> {
        FillRatio::new(r)
    }
}

impl From<FillRatio> for f64 {
    fn from(r: FillRatio) -> f64 {
        r.get()
    }
}

/// The PIR scheme and parameter set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PirSpec {
    /// `"ypir"`.
    pub scheme: String,
    /// pir-core parameter-set id (1 = YPIR Table 1).
    pub param_set: u16,
    /// Its name.
    pub param_name: String,
    /// Wire format version of queries and responses.
    pub wire_version: u8,
    /// The epoch's public seed; database seeds derive from it.
    #[serde(with = "crate::hex::array")]
    pub seed: [u8; 32],
}

/// One PIR database: `filters` consecutive filters, concatenated (the
/// expanded, in-memory form).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DbSpec {
    /// Index in [`Manifest::dbs`] (and in the query URL).
    pub id: u32,
    /// First filter stored here.
    pub first_filter: u32,
    /// Number of filters stored here; filter `first_filter + j` occupies
    /// bits `[j·bits, (j+1)·bits)` of the database.
    pub filters: u32,
    /// Bits of the bit database: `filters · filter.bits`.
    pub bits: u64,
    /// ℓ1 (rows of one-byte records).
    pub rows: u64,
    /// ℓ2 (columns).
    pub cols: u64,
    /// The public seed of this database for this epoch (derived from the
    /// fresh `pir.seed`).
    pub seed: [u8; 32],
    /// Exact length of a query (bytes).
    pub query_bytes: u64,
    /// Exact length of a response (bytes).
    pub response_bytes: u64,
}

/// A run of identical consecutive databases (serialized form).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DbRun {
    /// Number of databases in the run.
    pub count: u32,
    /// Filters per database.
    pub filters: u32,
    /// ℓ1 of each.
    pub rows: u64,
    /// ℓ2 of each.
    pub cols: u64,
    /// Exact query length.
    pub query_bytes: u64,
    /// Exact response length.
    pub response_bytes: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestWire {
    version: u32,
    epoch: u64,
    created_at: i64,
    snapshot_at: i64,
    entries: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fill_ratio: Option<FillRatio>,
    logs: Vec<LogCoverage>,
    filter: FilterSpec,
    pir: PirSpec,
    dbs: Vec<DbRun>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    shards: Option<ShardMap>,
}

impl TryFrom<ManifestWire> for Manifest {
    type Error = Error;
    fn try_from(w: ManifestWire) -> Result<Manifest> {
        let total: u64 = w.dbs.iter().map(|r| u64::from(r.count)).sum();
        if total == 0 || total > MAX_DBS as u64 {
            return Err(Error::Invalid(format!("{total} databases (1..={MAX_DBS})")));
        }
        let mut dbs = Vec::with_capacity(total as usize);
        let mut first = 0u32;
        for r in &w.dbs {
            for _ in 0..r.count {
                let id = dbs.len() as u32;
                let bits = u64::from(r.filters)
                    .checked_mul(w.filter.bits)
                    .ok_or_else(|| Error::Invalid("database bits overflow".into()))?;
                dbs.push(DbSpec {
                    id,
                    first_filter: first,
                    filters: r.filters,
                    bits,
                    rows: r.rows,
                    cols: r.cols,
                    seed: derive_db_seed(&w.pir.seed, id),
                    query_bytes: r.query_bytes,
                    response_bytes: r.response_bytes,
                });
                first = first
                    .checked_add(r.filters)
                    .ok_or_else(|| Error::Invalid("too many filters".into()))?;
            }
        }
        let m = Manifest {
            version: w.version,
            epoch: w.epoch,
            created_at: w.created_at,
            snapshot_at: w.snapshot_at,
            entries: w.entries,
            fill_ratio: w.fill_ratio,
            logs: w.logs,
            filter: w.filter,
            pir: w.pir,
            dbs,
            shards: w.shards,
        };
        m.check()?;
        Ok(m)
    }
}

impl From<Manifest> for ManifestWire {
    fn from(m: Manifest) -> ManifestWire {
        let mut runs: Vec<DbRun> = Vec::new();
        for d in &m.dbs {
            let same = |r: &DbRun| {
                r.filters == d.filters
                    && r.rows == d.rows
                    && r.cols == d.cols
                    && r.query_bytes == d.query_bytes
                    && r.response_bytes == d.response_bytes
            };
            match runs.last_mut() {
                Some(r) if same(r) => r.count += 1,
                _ => runs.push(DbRun {
                    count: 1,
                    filters: d.filters,
                    rows: d.rows,
                    cols: d.cols,
                    query_bytes: d.query_bytes,
                    response_bytes: d.response_bytes,
                }),
            }
        }
        ManifestWire {
            version: m.version,
            epoch: m.epoch,
            created_at: m.created_at,
            snapshot_at: m.snapshot_at,
            entries: m.entries,
            fill_ratio: m.fill_ratio,
            logs: m.logs,
            filter: m.filter,
            pir: m.pir,
            dbs: runs,
            shards: m.shards,
        }
    }
}

/// Where a client's probe goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    /// Epoch.
    pub epoch: u64,
    /// Filter i (chosen uniformly by the client).
    pub filter: u32,
    /// Database index.
    pub db: u32,
    /// Bit within the database.
    pub bit: u64,
}

/// What [`Manifest::new`] builds a manifest from, by name.
#[derive(Clone, Debug)]
pub struct ManifestParts<'a> {
    /// Epoch number.
    pub epoch: u64,
    /// When the epoch was built (Unix s).
    pub created_at: i64,
    /// The store snapshot's "now" (Unix s): entries expired before it are out.
    pub snapshot_at: i64,
    /// |S|, the entries inserted into the filters.
    pub entries: u64,
    /// Per-log coverage.
    pub logs: Vec<LogCoverage>,
    /// The salted Bloom filters.
    pub filter: FilterSpec,
    /// The PIR scheme, parameters and epoch seed.
    pub pir: PirSpec,
    /// The databases, in order.
    pub layout: &'a [DbLayout],
    /// Which base URL serves which database (`None`: one server).
    pub shards: Option<ShardMap>,
}

/// One database of [`ManifestParts::layout`]: how many consecutive filters
/// it holds and its YPIR shape and sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DbLayout {
    /// Filters in the database.
    pub filters: u32,
    /// Rows ℓ1 of the database matrix.
    pub rows: u64,
    /// Columns ℓ2.
    pub cols: u64,
    /// Query size (bytes).
    pub query_bytes: u64,
    /// Response size (bytes).
    pub response_bytes: u64,
}

impl Manifest {
    /// Parses and checks a manifest (see the module docs).
    pub fn from_json(bytes: &[u8]) -> Result<Manifest> {
        if bytes.len() > MAX_MANIFEST_BYTES {
            return Err(Error::TooLarge {
                len: bytes.len(),
                max: MAX_MANIFEST_BYTES,
            });
        }
        let m: Manifest = serde_json::from_slice(bytes)?;
        m.check()?;
        Ok(m)
    }

    /// Serializes (compact JSON).
    pub fn to_json(&self) -> Vec<u8> {
        // Serializing plain structs of strings and integers cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Builds a checked manifest from its named parts: the databases are
    /// `parts.layout` in order (each starting at the filter after the
    /// previous one's last), with seeds derived from `parts.pir.seed`.
    pub fn new(parts: ManifestParts<'_>) -> Result<Manifest> {
        let ManifestParts {
            epoch,
            created_at,
            snapshot_at,
            entries,
            logs,
            filter,
            pir,
            layout,
            shards,
        } = parts;
        let mut first = 0u32;
        let mut dbs = Vec::with_capacity(layout.len());
        for (id, db) in layout.iter().enumerate() {
            let id = u32::try_from(id).map_err(|_| Error::Invalid("too many databases".into()))?;
            dbs.push(DbSpec {
                id,
                first_filter: first,
                filters: db.filters,
                bits: u64::from(db.filters).saturating_mul(filter.bits),
                rows: db.rows,
                cols: db.cols,
                seed: derive_db_seed(&pir.seed, id),
                query_bytes: db.query_bytes,
                response_bytes: db.response_bytes,
            });
            first = first.saturating_add(db.filters);
        }
        let m = Manifest {
            version: if shards.is_some() {
                MANIFEST_VERSION
            } else {
                MANIFEST_VERSION_UNSHARDED
            },
            epoch,
            created_at,
            snapshot_at,
            entries,
            fill_ratio: None,
            logs,
            filter,
            pir,
            dbs,
            shards,
        };
        m.check()?;
        Ok(m)
    }

    /// Checks every invariant (what [`Manifest::from_json`] relies on).
    pub fn check(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Invalid(m));
        match (self.version, &self.shards) {
            (MANIFEST_VERSION_UNSHARDED, None) | (MANIFEST_VERSION, Some(_)) => {}
            (MANIFEST_VERSION_UNSHARDED, Some(_)) => {
                return bad("version 1 has no shard map (version 2 does)".into())
            }
            (MANIFEST_VERSION, None) => return bad("version 2 needs a shard map".into()),
            (v, _) => {
                return bad(format!(
                    "version {v} (expected {MANIFEST_VERSION_UNSHARDED} or {MANIFEST_VERSION})"
                ))
            }
        }
        self.filter.check()?;
        if self.entries > self.filter.n {
            return bad(format!("|S| = {} > N = {}", self.entries, self.filter.n));
        }
        if let Some(r) = self.fill_ratio {
            // Each entry sets one bit per filter: at most |S| of the k·N
            // bits (plus the rounding to the millionth).
            let most = u128::from(self.entries) * u128::from(FillRatio::SCALE)
                + u128::from(self.filter.bits) / 2;
            if u128::from(r.millionths()) * u128::from(self.filter.bits) > most {
                return bad(format!(
                    "fill_ratio {} > |S| / bits = {} / {}",
                    r.get(),
                    self.entries,
                    self.filter.bits
                ));
            }
        }
        if self.pir.scheme != "ypir" {
            return bad(format!("unknown PIR scheme {:?}", self.pir.scheme));
        }
        if self.logs.len() > MAX_LOGS {
            return bad(format!("{} logs (max {MAX_LOGS})", self.logs.len()));
        }
        if self.dbs.is_empty() || self.dbs.len() > MAX_DBS {
            return bad(format!("{} databases (1..={MAX_DBS})", self.dbs.len()));
        }
        let mut next = 0u32;
        for (i, db) in self.dbs.iter().enumerate() {
            if db.id as usize != i || db.first_filter != next || db.filters == 0 {
                return bad(format!(
                    "database {i} does not continue the filter partition"
                ));
            }
            next = next
                .checked_add(db.filters)
                .filter(|&n| n <= self.filter.a)
                .ok_or_else(|| Error::Invalid(format!("database {i} holds too many filters")))?;
            let want = u64::from(db.filters).checked_mul(self.filter.bits);
            let room = db.rows.checked_mul(db.cols).and_then(|r| r.checked_mul(8));
            match (want, room) {
                (Some(w), Some(r)) if w == db.bits && r >= w => {}
                _ => return bad(format!("database {i}: bits/rows/cols inconsistent")),
            }
            if db.seed != derive_db_seed(&self.pir.seed, db.id) {
                return bad(format!("database {i}: seed is not derived from pir.seed"));
            }
        }
        if next != self.filter.a {
            return bad(format!(
                "databases hold {next} of {} filters",
                self.filter.a
            ));
        }
        if let Some(s) = &self.shards {
            s.check(self.dbs.len())?;
        }
        Ok(())
    }

    /// The base URL serving database `db`, if the epoch is sharded
    /// (`None`: the server the manifest came from serves every database).
    pub fn shard_url(&self, db: u32) -> Option<&str> {
        self.shards.as_ref().and_then(|s| s.url_of(db))
    }

    /// The database and bit that filter `filter`'s bit for `leaf_hash`
    /// lives at.
    pub fn probe(&self, filter: u32, leaf_hash: &LeafHash) -> Result<Probe> {
        let bit = self.filter.bit(filter, leaf_hash)?;
        let (db, bit) = self.locate(filter, bit)?;
        Ok(Probe {
            epoch: self.epoch,
            filter,
            db,
            bit,
        })
    }

    /// Maps (filter, bit of the filter) to (database, bit of the database).
    pub fn locate(&self, filter: u32, bit: u64) -> Result<(u32, u64)> {
        if bit >= self.filter.bits {
            return Err(Error::OutOfRange {
                what: "bit",
                index: bit,
                len: self.filter.bits,
            });
        }
        let idx = self.dbs.partition_point(|d| d.first_filter <= filter);
        let db = idx
            .checked_sub(1)
            .and_then(|i| self.dbs.get(i))
            .filter(|d| filter < d.first_filter + d.filters)
            .ok_or(Error::OutOfRange {
                what: "filter",
                index: u64::from(filter),
                len: u64::from(self.filter.a),
            })?;
        Ok((
            db.id,
            u64::from(filter - db.first_filter) * self.filter.bits + bit,
        ))
    }

    /// The manifest with its measured fill ratio set (checked like
    /// everything else: [`Manifest::check`]).
    pub fn with_fill_ratio(mut self, ratio: FillRatio) -> Result<Manifest> {
        self.fill_ratio = Some(ratio);
        self.check()?;
        Ok(self)
    }

    /// The fill ratio a filter of `filter.bits` bits holding the `entries`
    /// of S is expected to have, 1 − (1 − 1/bits)^|S| (each entry sets one
    /// bit per filter).
    pub fn expected_fill_ratio(&self) -> f64 {
        let bits = self.filter.bits.max(1) as f64;
        1.0 - (self.entries as f64 * (-1.0 / bits).ln_1p()).exp()
    }

    /// The probability that one audit of a leaf that is not in S answers
    /// "logged": the measured fill ratio if the manifest states it (`true`),
    /// else the expected one (`false`).
    pub fn false_positive_rate(&self) -> (f64, bool) {
        match self.fill_ratio {
            Some(r) => (r.get(), true),
            None => (self.expected_fill_ratio(), false),
        }
    }

    /// Coverage of the log `log_id`, if the epoch has it.
    pub fn coverage(&self, log_id: &LogId) -> Option<&LogCoverage> {
        self.logs.iter().find(|l| &l.log_id == log_id)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample() -> Manifest {
        let db = |filters, cols| DbLayout {
            filters,
            rows: 4,
            cols,
            query_bytes: 1,
            response_bytes: 1,
        };
        Manifest::new(ManifestParts {
            epoch: 7,
            created_at: 1_700_000_000,
            snapshot_at: 1_700_000_000,
            entries: 10,
            logs: vec![LogCoverage {
                log_id: LogId::new([9; 32]),
                verified_tree_size: 10,
                verified_position: 10,
                ingested_until_ms: 1_699_999_000_000,
                mmd_s: 86_400,
            }],
            filter: FilterSpec::new(3, 8, 16, [4; 32]).unwrap(),
            pir: PirSpec {
                scheme: "ypir".into(),
                param_set: 1,
                param_name: "table1".into(),
                wire_version: 1,
                seed: [5; 32],
            },
            layout: &[db(2, 8), db(1, 4)],
            shards: None,
        })
        .unwrap()
    }

    /// [`sample`] split across two shards by the mod rule.
    pub(crate) fn sharded() -> Manifest {
        let mut m = sample();
        m.version = MANIFEST_VERSION;
        m.shards = Some(ShardMap::modulo(vec![
            "http://shard-0:8080".into(),
            "https://shard-1.example/auditor".into(),
        ]));
        m.check().unwrap();
        m
    }

    #[test]
    fn sharded_manifests_round_trip_and_route() {
        let m = sharded();
        let json = m.to_json();
        let text = String::from_utf8(json.clone()).unwrap();
        assert!(text.contains("\"version\":2"), "{text}");
        assert!(text.contains("\"shards\":{\"rule\":\"mod\""), "{text}");
        assert_eq!(Manifest::from_json(&json).unwrap(), m);
        assert_eq!(m.shard_url(0), Some("http://shard-0:8080"));
        assert_eq!(m.shard_url(1), Some("https://shard-1.example/auditor"));
        assert_eq!(sample().shard_url(1), None);
        // Unsharded manifests stay version 1, byte for byte as before.
        let plain = String::from_utf8(sample().to_json()).unwrap();
        assert!(plain.contains("\"version\":1") && !plain.contains("shards"));
        // The version must match the presence of the map; the map is checked.
        for (from, to) in [
            ("\"version\":2", "\"version\":1"),
            ("\"version\":2", "\"version\":3"),
            ("\"rule\":\"mod\"", "\"rule\":\"list\""),
            ("http://shard-0:8080", "ftp://shard-0"),
            ("\"rule\":\"mod\"", "\"rule\":\"list\",\"dbs\":[[0],[0]]"),
        ] {
            let bad = text.replacen(from, to, 1);
            assert_ne!(bad, text, "{from}");
            assert!(Manifest::from_json(bad.as_bytes()).is_err(), "{to}");
        }
        let ok = text.replacen("\"rule\":\"mod\"", "\"rule\":\"list\",\"dbs\":[[1],[0]]", 1);
        let listed = Manifest::from_json(ok.as_bytes()).unwrap();
        assert_eq!(listed.shard_url(1), Some("http://shard-0:8080"));
        let mut v2_without = sample();
        v2_without.version = MANIFEST_VERSION;
        assert!(v2_without.check().is_err());
    }

    /// 768 databases over 16 shards: the map keeps the manifest small.
    #[test]
    fn shard_map_stays_small_at_internet_scale() {
        let layout = vec![
            DbLayout {
                filters: 1,
                rows: 1 << 16,
                cols: 1 << 16,
                query_bytes: 1,
                response_bytes: 1,
            };
            768
        ];
        let urls: Vec<String> = (0..16)
            .map(|i| format!("http://auditor-{i}.auditor-shards.default.svc:8080"))
            .collect();
        let parts = |shards| ManifestParts {
            epoch: 1,
            created_at: 0,
            snapshot_at: 0,
            entries: 1 << 32,
            logs: vec![],
            filter: FilterSpec::new(768, 8, 1 << 32, [1; 32]).unwrap(),
            pir: sample().pir,
            layout: &layout,
            shards,
        };
        let by_mod = Manifest::new(parts(Some(ShardMap::modulo(urls.clone())))).unwrap();
        assert!(by_mod.to_json().len() < 2048, "{}", by_mod.to_json().len());
        let lists: Vec<Vec<u32>> = (0..16u32)
            .map(|s| (0..768).filter(|d| d % 16 == s).collect())
            .collect();
        let by_list = Manifest::new(parts(Some(ShardMap {
            urls,
            rule: crate::shard::ShardRule::List(lists),
        })))
        .unwrap();
        let n = by_list.to_json().len();
        assert!(n < 6 << 10, "{n}");
        assert_eq!(Manifest::from_json(&by_list.to_json()).unwrap(), by_list);
    }

    #[test]
    fn round_trip_and_locate() {
        let m = sample();
        let json = m.to_json();
        assert_eq!(Manifest::from_json(&json).unwrap(), m);
        // Compact: runs, no per-database seeds, no salts.
        let text = String::from_utf8(json).unwrap();
        assert!(text.contains("\"count\":1,\"filters\":2"), "{text}");
        assert!(
            !text.contains("salts") && !text.contains("first_filter"),
            "{text}"
        );
        assert_ne!(m.dbs[0].seed, m.dbs[1].seed);
        assert_eq!(m.locate(0, 5).unwrap(), (0, 5));
        assert_eq!(m.locate(1, 5).unwrap(), (0, 133));
        assert_eq!(m.locate(2, 127).unwrap(), (1, 127));
        assert!(m.locate(3, 0).is_err());
        assert!(m.locate(0, 128).is_err());
        let p = m.probe(1, &LeafHash::new([0; 32])).unwrap();
        assert_eq!((p.epoch, p.db), (7, 0));
        assert!(p.bit >= 128 && p.bit < 256);
        assert!(m.coverage(&LogId::new([9; 32])).is_some());
        assert!(m.coverage(&LogId::new([8; 32])).is_none());
    }

    #[test]
    fn fill_ratio_round_trips_exactly_and_is_checked() {
        // Absent: the field is not written, and the expected ratio stands in.
        let plain = sample();
        assert!(!String::from_utf8(plain.to_json())
            .unwrap()
            .contains("fill_ratio"));
        let (p, measured) = plain.false_positive_rate();
        assert!(!measured);
        // |S| = 10 in 128 bits: 1 − (127/128)^10 ≈ 0.07543
        assert!((p - 0.075_435).abs() < 1e-6, "{p}");
        // Every count of set bits of a filter round-trips byte for byte.
        for set in 0..=10u64 {
            let r = FillRatio::from_counts(set, 128).unwrap();
            let m = sample().with_fill_ratio(r).unwrap();
            let json = m.to_json();
            let back = Manifest::from_json(&json).unwrap();
            assert_eq!(back, m);
            assert_eq!(back.to_json(), json);
            assert_eq!(back.false_positive_rate(), (r.get(), true));
        }
        let m = sample()
            .with_fill_ratio(FillRatio::from_counts(9, 128).unwrap())
            .unwrap();
        let text = String::from_utf8(m.to_json()).unwrap();
        assert!(text.contains("\"fill_ratio\":0.070313"), "{text}");
        // Not a ratio, or more bits set than |S| can set: refused.
        for bad in ["-0.1", "1.5", "1e400", "0.1", "\"0.07\"", "true"] {
            let t = text.replacen("0.070313", bad, 1);
            assert!(Manifest::from_json(t.as_bytes()).is_err(), "{bad}");
        }
        assert!(FillRatio::new(f64::NAN).is_err());
        assert!(FillRatio::new(1.000_001).is_err());
        assert!(FillRatio::from_counts(1, 0).is_err());
        assert!(FillRatio::from_counts(2, 1).is_err());
        assert!(sample()
            .with_fill_ratio(FillRatio::new(0.08).unwrap())
            .is_err());
        assert_eq!(FillRatio::from_counts(1, 3).unwrap().millionths(), 333_333);
        // Every stored value survives JSON exactly (the manifest's bytes
        // must be reproducible from the parsed manifest).
        for m in (0..=FillRatio::SCALE)
            .step_by(997)
            .chain([1, FillRatio::SCALE])
        {
            let r = FillRatio::new(f64::from(m) / 1e6).unwrap();
            assert_eq!(r.millionths(), m);
            let text = serde_json::to_string(&r).unwrap();
            let back: FillRatio = serde_json::from_str(&text).unwrap();
            assert_eq!(back, r, "{text}");
            assert_eq!(serde_json::to_string(&back).unwrap(), text);
        }
    }

    #[test]
    fn rejects_inconsistent_manifests() {
        let cases: Vec<fn(&mut Manifest)> = vec![
            |m| m.version = 2,
            |m| m.entries = 17,
            |m| m.pir.scheme = "spiral".into(),
            |m| m.dbs[1].first_filter = 1,
            |m| m.dbs[1].filters = 2,
            |m| m.dbs[0].bits = 255,
            |m| m.dbs[0].rows = 1,
            |m| m.dbs[1].seed = [0; 32],
            |m| m.pir.seed = [6; 32],
            |m| {
                m.dbs.pop();
            },
            |m| m.dbs.clear(),
        ];
        // Each breaks an invariant of the in-memory form…
        for f in cases {
            let mut m = sample();
            f(&mut m);
            assert!(m.check().is_err(), "{m:?}");
        }
        // …and the serialized form is re-derived and checked on parsing.
        let json = String::from_utf8(sample().to_json()).unwrap();
        for (from, to) in [
            ("\"version\":1", "\"version\":2"),
            ("\"entries\":10", "\"entries\":17"),
            ("\"scheme\":\"ypir\"", "\"scheme\":\"spiral\""),
            ("\"filters\":2", "\"filters\":3"),
            ("\"rows\":4,\"cols\":8", "\"rows\":1,\"cols\":8"),
            ("\"count\":1,\"filters\":1", "\"count\":2,\"filters\":1"),
            ("\"count\":1,\"filters\":1", "\"count\":0,\"filters\":1"),
            ("\"a\":3", "\"a\":0"),
            ("\"bits\":128", "\"bits\":127"),
            (&format!("\"{}\"", LogId::new([9; 32])), "\"AAAA\""),
        ] {
            let bad = json.replacen(from, to, 1);
            assert_ne!(bad, json, "{from}");
            assert!(Manifest::from_json(bad.as_bytes()).is_err(), "{to}");
        }
        // Unknown fields, bad hex, oversize input.
        let extra = json.replacen("{", "{\"x\":1,", 1);
        assert!(Manifest::from_json(extra.as_bytes()).is_err());
        let badhex = json.replacen(&crate::hex::encode(&[5; 32]), "zz", 1);
        assert_ne!(badhex, json);
        assert!(Manifest::from_json(badhex.as_bytes()).is_err());
        let big = vec![b' '; MAX_MANIFEST_BYTES + 1];
        assert!(matches!(
            Manifest::from_json(&big),
            Err(Error::TooLarge { .. })
        ));
    }
}
