//! The served epochs: the current one and, for a grace period after a
//! swap, the previous one (so clients that fetched the old manifest just
//! before the swap still get answers). Publishing replaces one `Arc` under
//! a lock held for a pointer copy: requests in flight keep the epoch they
//! looked up alive until they finish.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use audit_proto::manifest::{DbSpec, Manifest};
use pir_core::params::{DbShape, Params};
use pir_core::server::Server;

use crate::batch::{AnswerPool, BatchConfig, Batcher};
use crate::epoch::{BuildReport, Epoch};
use crate::metrics::Metrics;

/// One database of a served epoch.
#[derive(Debug)]
pub struct ServedDb {
    /// Its manifest entry.
    pub spec: DbSpec,
    /// Seed id every query must carry.
    pub seed_id: [u8; 8],
    /// Shape every query must carry.
    pub shape: DbShape,
    /// The YPIR server.
    pub server: Arc<Server>,
    /// Its batch collector.
    pub batcher: Batcher,
}

/// An epoch ready to answer.
#[derive(Debug)]
pub struct ServedEpoch {
    /// Its manifest.
    pub manifest: Manifest,
    /// The manifest as served (serialized once).
    pub manifest_json: axum::body::Bytes,
    /// PIR parameters.
    pub params: Params,
    /// Databases by id (`None`: served by another shard).
    pub dbs: Vec<Option<ServedDb>>,
    /// How it was built, if known.
    pub report: Option<BuildReport>,
}

impl ServedEpoch {
    /// Wraps a built or loaded epoch and starts its batch collectors (inside
    /// a tokio runtime).
    pub fn activate(
        epoch: Epoch,
        pool: &AnswerPool,
        cfg: BatchConfig,
        metrics: &Metrics,
    ) -> crate::Result<Arc<ServedEpoch>> {
        let params = pir_core::params::by_id(epoch.manifest.pir.param_set)?;
        let dbs = epoch
            .manifest
            .dbs
            .iter()
            .zip(epoch.servers)
            .map(|(spec, server)| {
                let server = Arc::new(server?);
                Some(ServedDb {
                    spec: spec.clone(),
                    seed_id: server.seed().id(),
                    shape: server.shape(),
                    batcher: Batcher::spawn(server.clone(), pool, cfg, metrics.clone()),
                    server,
                })
            })
            .collect();
        Ok(Arc::new(ServedEpoch {
            manifest_json: epoch.manifest.to_json().into(),
            manifest: epoch.manifest,
            params,
            dbs,
            report: epoch.report,
        }))
    }

    /// Epoch id.
    pub fn id(&self) -> u64 {
        self.manifest.epoch
    }

    /// Number of databases this server holds.
    pub fn own_count(&self) -> usize {
        self.dbs.iter().filter(|d| d.is_some()).count()
    }
}

#[derive(Debug)]
struct Served {
    current: Arc<ServedEpoch>,
    previous: Option<(Arc<ServedEpoch>, Instant)>,
}

/// Result of looking an epoch up.
#[derive(Debug)]
pub enum Lookup {
    /// Served.
    Found(Arc<ServedEpoch>),
    /// Not served (never, or no longer); `current` is what is.
    Unknown {
        /// The current epoch, if any.
        current: Option<u64>,
    },
}

/// The set of served epochs.
#[derive(Debug)]
pub struct Registry {
    inner: RwLock<Option<Arc<Served>>>,
    grace: Duration,
}

impl Registry {
    /// Empty registry; previous epochs stay answerable for `grace`.
    pub fn new(grace: Duration) -> Registry {
        Registry {
            inner: RwLock::new(None),
            grace,
        }
    }

    fn get(&self) -> Option<Arc<Served>> {
        match self.inner.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// The current epoch.
    pub fn current(&self) -> Option<Arc<ServedEpoch>> {
        self.get().map(|s| s.current.clone())
    }

    /// Swaps `epoch` in as current (the old current becomes the previous
    /// one until the grace period ends). Refuses epochs not newer than the
    /// current one (returns false).
    pub fn publish(&self, epoch: Arc<ServedEpoch>) -> bool {
        let mut g = match self.inner.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if let Some(s) = g.as_ref() {
            if s.current.id() >= epoch.id() {
                return false;
            }
        }
        let previous = g
            .as_ref()
            .map(|s| (s.current.clone(), Instant::now() + self.grace));
        *g = Some(Arc::new(Served {
            current: epoch,
            previous,
        }));
        true
    }

    /// Every epoch held: the current one and the previous one (until it
    /// is swept).
    pub fn held(&self) -> Vec<Arc<ServedEpoch>> {
        let Some(s) = self.get() else {
            return Vec::new();
        };
        let mut v = vec![s.current.clone()];
        v.extend(s.previous.as_ref().map(|(p, _)| p.clone()));
        v
    }

    /// Finds a served epoch.
    pub fn lookup(&self, epoch: u64) -> Lookup {
        let Some(s) = self.get() else {
            return Lookup::Unknown { current: None };
        };
        if s.current.id() == epoch {
            return Lookup::Found(s.current.clone());
        }
        if let Some((prev, until)) = &s.previous {
            if prev.id() == epoch && Instant::now() < *until {
                return Lookup::Found(prev.clone());
            }
        }
        Lookup::Unknown {
            current: Some(s.current.id()),
        }
    }

    /// Drops the previous epoch once its grace period is over (frees its
    /// memory; requests still holding it finish first).
    pub fn sweep(&self) {
        let mut g = match self.inner.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if let Some(s) = g.as_ref() {
            if matches!(&s.previous, Some((_, until)) if Instant::now() >= *until) {
                *g = Some(Arc::new(Served {
                    current: s.current.clone(),
                    previous: None,
                }));
            }
        }
    }
}
