//! Cross-client batching (YPIR §4.3): queries for the same database that
//! arrive within a short window are answered by one pass over it
//! (`pir_core::server::Server::answer_batch`), on a rayon pool sized to the
//! cores — never on the async runtime's threads.
//!
//! One collector task per database: it waits for a first query and keeps
//! collecting until the window closes or the batch is full; then it waits
//! for a free pool thread (a semaphore with one permit per thread, shared
//! by every database of the pool) *while still collecting*, so under load
//! batches grow towards `max_batch` instead of queueing as many small
//! passes — each pass reads the database once whatever the batch size —
//! and an idle server adds at most the window to a query's latency.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pir_core::server::Server;
use pir_core::wire::Query;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};

use crate::metrics::Metrics;

/// One answered query.
#[derive(Clone, Debug)]
pub struct Answered {
    /// The serialized response.
    pub bytes: Vec<u8>,
    /// Size of the batch it was answered in.
    pub batch: usize,
    /// Wall seconds of that batch's answering pass.
    pub answer_s: f64,
}

/// Why a query got no answer.
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    /// pir-core refused the query.
    #[error(transparent)]
    Pir(#[from] pir_core::Error),
    /// The epoch was dropped, or a worker failed.
    #[error("answering worker unavailable: {0}")]
    Unavailable(&'static str),
}

/// Batching settings.
#[derive(Clone, Copy, Debug)]
pub struct BatchConfig {
    /// How long the first query of a batch waits for company.
    pub window: Duration,
    /// Largest batch.
    pub max_batch: usize,
}

struct Job {
    query: Query,
    reply: oneshot::Sender<Result<Answered, BatchError>>,
}

/// Handle on one database's collector.
#[derive(Clone, Debug)]
pub struct Batcher {
    tx: mpsc::Sender<Job>,
}

impl Batcher {
    /// Starts the collector for `server` (must run inside a tokio runtime).
    /// It ends when every handle is dropped.
    pub fn spawn(
        server: Arc<Server>,
        pool: &AnswerPool,
        cfg: BatchConfig,
        metrics: Metrics,
    ) -> Batcher {
        let (tx, rx) = mpsc::channel(1024);
        tokio::spawn(collect(rx, server, pool.clone(), cfg, metrics));
        Batcher { tx }
    }

    /// Answers `query` (already checked against this database's parameter
    /// set, seed and shape), possibly together with others.
    pub async fn answer(&self, query: Query) -> Result<Answered, BatchError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Job { query, reply })
            .await
            .map_err(|_| BatchError::Unavailable("epoch retired"))?;
        rx.await
            .map_err(|_| BatchError::Unavailable("worker dropped the query"))?
    }
}

/// The answer pool: rayon threads plus one permit per thread, so that a
/// batch is only handed over when a thread can start it.
#[derive(Clone, Debug)]
pub struct AnswerPool {
    pool: Arc<rayon::ThreadPool>,
    free: Arc<Semaphore>,
}

impl AnswerPool {
    /// A pool of `threads` threads (≥ 1).
    pub fn new(threads: usize) -> Result<AnswerPool, rayon::ThreadPoolBuildError> {
        let threads = threads.max(1);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("pir-answer-{i}"))
            .build()?;
        Ok(AnswerPool {
            pool: Arc::new(pool),
            free: Arc::new(Semaphore::new(threads)),
        })
    }
}

async fn collect(
    mut rx: mpsc::Receiver<Job>,
    server: Arc<Server>,
    pool: AnswerPool,
    cfg: BatchConfig,
    metrics: Metrics,
) {
    while let Some(first) = rx.recv().await {
        let mut jobs = vec![first];
        let deadline = tokio::time::Instant::now() + cfg.window;
        while jobs.len() < cfg.max_batch {
            match rx.try_recv() {
                Ok(j) => jobs.push(j),
                Err(_) if cfg.window.is_zero() => break,
                Err(_) => match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Some(j)) => jobs.push(j),
                    _ => break,
                },
            }
        }
        // Wait for a free thread, still accepting queries into this batch.
        let mut open = true;
        let permit: OwnedSemaphorePermit = loop {
            if let Ok(p) = pool.free.clone().try_acquire_owned() {
                break p;
            }
            tokio::select! {
                p = pool.free.clone().acquire_owned() => match p {
                    Ok(p) => break p,
                    Err(_) => return, // semaphore closed: shutting down
                },
                j = rx.recv(), if open && jobs.len() < cfg.max_batch => match j {
                    Some(j) => jobs.push(j),
                    None => open = false,
                },
            }
        };
        let server = server.clone();
        let metrics = metrics.clone();
        pool.pool.spawn(move || {
            run_batch(&server, jobs, &metrics);
            drop(permit);
        });
    }
}

fn run_batch(server: &Server, jobs: Vec<Job>, metrics: &Metrics) {
    let (queries, replies): (Vec<Query>, Vec<_>) =
        jobs.into_iter().map(|j| (j.query, j.reply)).unzip();
    let n = queries.len();
    let t = Instant::now();
    // A panic here would abort the pool thread; contain it and report.
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| server.answer_batch(&queries)));
    let answer_s = t.elapsed().as_secs_f64();
    metrics.answer_seconds.observe(answer_s);
    metrics.batch_size.observe(n as f64);
    match result {
        Ok(Ok(responses)) => {
            for (reply, r) in replies.into_iter().zip(responses) {
                let _ = reply.send(Ok(Answered {
                    bytes: r.to_bytes(),
                    batch: n,
                    answer_s,
                }));
            }
        }
        Ok(Err(e)) => {
            for reply in replies {
                let _ = reply.send(Err(BatchError::Pir(e.clone())));
            }
        }
        Err(_) => {
            tracing::error!("answering pass panicked");
            for reply in replies {
                let _ = reply.send(Err(BatchError::Unavailable("answering pass failed")));
            }
        }
    }
}
