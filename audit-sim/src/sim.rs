//! The population simulator: M clients over W weeks against a running
//! auditor over real HTTP, each auditing ≈ 20 SCTs a week drawn from a
//! corpus of certificates of the local test log (most logged; a
//! configurable fraction omitted by a misbehaving log or carrying forged
//! SCTs). It measures what crossed the wire, the server's reported compute,
//! the client's CPU per audit, the filter fill ratio (by private probes of
//! random bits) and detection — per audit and per client-week — and feeds
//! the cost report ([`crate::cost`]).
//!
//! Time is simulated (each client lives W weeks of days; SCTs age by the
//! simulated clock), queries are real. Re-checks of `NotFound` results need
//! a later epoch: at the end the simulator waits (up to
//! `recheck_timeout`) for the auditor to publish one and re-checks.
//!
//! An overloaded auditor answers 503 or 429 with `Retry-After`: manifest
//! fetches wait as told and retry per [`SimConfig::retry`] (capped waits, a
//! bounded number of retries per request). Queries fall back as the
//! clients do ([`SimConfig::fallback`], docs/protocol.md §7.1): when a
//! query's group is unreachable, times out or answers 5xx, a fresh query
//! for a fresh random database is sent instead; the report counts the
//! fallbacks by reason ([`SimReport::fallback`]). An audit that still
//! fails stays queued (tried again the next simulated day) and is counted
//! in [`SimReport::audits_failed`] with its reason; the simulation goes on.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use audit_proto::{LeafHash, Manifest};
use base64::Engine as _;
use ct_core::loglist::LogList;
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use serde::{Deserialize, Serialize};

use browser_client::audit::{self, Outcome};
use browser_client::fallback::{FallbackPolicy, FallbackStats};
use browser_client::net::{Auditor, Clock, RetryPolicy};
use browser_client::policy::{AuditPolicy, MisbehaviourReport, PendingAudit, PendingQueue};
use browser_client::probe::Prober;
use browser_client::sct;

use crate::cost::Measured;
use crate::error::{Error, Result};

/// Ground truth of a corpus certificate (used only to score the results).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Truth {
    /// The log published it.
    Logged,
    /// The log issued an SCT but never published the entry.
    Omitted,
    /// The SCT's signature is forged (does not verify).
    Forged,
}

/// One certificate of the corpus (JSON lines).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CorpusEntry {
    /// Leaf certificate, DER, base64.
    pub cert: String,
    /// Issuer certificate, DER, base64.
    pub issuer: String,
    /// An SCT delivered by TLS (TLS encoding, base64) instead of embedded.
    #[serde(default)]
    pub tls_sct: Option<String>,
    /// Ground truth.
    pub truth: Truth,
}

/// Largest corpus file.
pub const MAX_CORPUS_FILE: u64 = 256 << 20;

/// Reads a JSON-lines corpus.
pub fn read_corpus(path: &Path) -> Result<Vec<CorpusEntry>> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if meta.len() > MAX_CORPUS_FILE {
        return Err(Error::io(path, "corpus file too large"));
    }
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map_err(|e| Error::Invalid(format!("{}:{}: {e}", path.display(), i + 1)))
        })
        .collect()
}

/// Simulation settings.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Auditor base URL.
    pub server: String,
    /// Simulated clients.
    pub clients: usize,
    /// Simulated weeks.
    pub weeks: u32,
    /// Which connections are audited.
    pub policy: AuditPolicy,
    /// Probability that an audited SCT is one the log omitted.
    pub omitted_fraction: f64,
    /// Probability that an audited SCT is forged.
    pub forged_fraction: f64,
    /// Clients running at once.
    pub concurrency: usize,
    /// Seed of the *simulation* choices (which connections, which
    /// certificates); the cryptography always uses the OS RNG.
    pub seed: u64,
    /// Private probes of uniformly random filter bits to measure the fill
    /// ratio.
    pub fill_probes: usize,
    /// How long to wait for a later epoch for re-checks.
    pub recheck_timeout: Duration,
    /// Where to keep per-client pending queues (persisted after each day);
    /// `None`: in memory.
    pub queue_dir: Option<PathBuf>,
    /// Show a progress bar.
    pub progress: bool,
    /// Retries of 503/429 answers to manifest fetches (`Retry-After`,
    /// capped).
    pub retry: RetryPolicy,
    /// The queries' fallback to fresh draws (it waits with `retry`'s
    /// sleeper).
    pub fallback: FallbackPolicy,
}

/// Detection results.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Detection {
    /// Audits of logged SCTs.
    pub logged_audits: u64,
    /// Of those, answered `Logged` (must be all).
    pub logged_found: u64,
    /// First audits of omitted SCTs.
    pub omitted_audits: u64,
    /// Of those, answered `NotFound` (caught at the first audit).
    pub omitted_caught: u64,
    /// `omitted_caught / omitted_audits`.
    pub catch_rate_per_audit: f64,
    /// Expected per-audit catch rate for a non-member: 1 − fill ratio.
    pub expected_catch_rate: f64,
    /// Client-weeks in which the client audited at least one omitted SCT.
    pub client_weeks_with_omitted: u64,
    /// Of those, client-weeks where at least one was caught.
    pub client_weeks_caught: u64,
    /// `client_weeks_caught / client_weeks_with_omitted`.
    pub catch_rate_per_client_week: f64,
    /// Re-checks done in a later epoch.
    pub rechecks: u64,
    /// Misbehaviour reports produced (two `NotFound` in two epochs).
    pub reports: u64,
    /// Reports about SCTs that were in fact logged (must be 0).
    pub false_reports: u64,
    /// Forged SCTs met: rejected by signature, not audited.
    pub forged_rejected: u64,
    /// Forged SCTs that verified (must be 0).
    pub forged_accepted: u64,
    /// Audits still pending at the end (waiting for MMD/coverage/epoch).
    pub still_pending: u64,
}

/// The simulator's output.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SimReport {
    /// Auditor URL.
    pub server: String,
    /// Epochs seen.
    pub epochs: Vec<u64>,
    /// |S| and database bytes of the first epoch.
    pub entries: u64,
    /// PIR database bytes scanned per query (ℓ1·ℓ2 records).
    pub db_bytes: u64,
    /// Measured fill ratio (fraction of 1s among `fill_probes` private
    /// probes of uniformly random bits) and its standard error.
    pub fill_ratio: f64,
    /// Standard error of `fill_ratio`.
    pub fill_ratio_stderr: f64,
    /// Probes used.
    pub fill_probes: u64,
    /// Inputs of the cost report.
    pub measured: Measured,
    /// Detection.
    pub detection: Detection,
    /// Mean client round trip per query (s), of the answered attempt.
    pub round_trip_seconds_mean: f64,
    /// 503/429 answers (load shedding) that were waited out and retried.
    #[serde(default)]
    pub retries: u64,
    /// Time the clients spent waiting before those retries (s).
    #[serde(default)]
    pub retry_wait_seconds: f64,
    /// What the queries' fallback did: attempts, fallbacks taken, queries
    /// that gave up, failed attempts by reason.
    #[serde(default)]
    pub fallback: FallbackStats,
    /// Audit attempts whose query failed (the audit stayed queued and was
    /// tried again the next simulated day).
    #[serde(default)]
    pub audits_failed: u64,
    /// Those failures by reason (`fallback_exhausted`, `http_400_…`, …).
    #[serde(default)]
    pub audit_failures: std::collections::BTreeMap<String, u64>,
    /// Fill-ratio probes whose query failed (not counted in
    /// `fill_probes`' answers).
    #[serde(default)]
    pub fill_probes_failed: u64,
    /// Wall time of the simulation (s).
    pub wall_seconds: f64,
    /// Misbehaviour reports written (paths).
    pub report_files: Vec<String>,
}

#[derive(Default)]
struct Totals {
    queries: u64,
    upload: u64,
    download: u64,
    manifest_bytes: u64,
    server_s: f64,
    batch_sum: u64,
    client_s: f64,
    audits: u64,
    round_trip_s: f64,
    det: Detection,
    reports: Vec<MisbehaviourReport>,
    epochs: Vec<u64>,
    audits_failed: u64,
    audit_failures: std::collections::BTreeMap<String, u64>,
}

struct Shared {
    cfg: SimConfig,
    auditor: Auditor,
    list: LogList,
    pools: [Vec<CorpusEntry>; 3],
    truth_by_leaf: std::collections::HashMap<LeafHash, Truth>,
    totals: Mutex<Totals>,
    probers: Mutex<Option<Arc<Prober>>>,
    progress: indicatif::ProgressBar,
    day_ms: u64,
    t0_ms: u64,
    done_clients: AtomicU64,
}

use ct_core::civil::unix_now_ms as now_ms;

fn uniform(rng: &mut ChaCha20Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

impl Shared {
    /// The prober for the manifest `m` (rebuilt when the epoch changes).
    fn prober(&self, m: Manifest) -> Arc<Prober> {
        let mut g = self.probers.lock().unwrap_or_else(|p| p.into_inner());
        match g.as_ref() {
            Some(p) if p.manifest().epoch == m.epoch => p.clone(),
            _ => {
                let p = Arc::new(Prober::new(Arc::new(m)));
                *g = Some(p.clone());
                let mut t = self.totals.lock().unwrap_or_else(|p| p.into_inner());
                if !t.epochs.contains(&p.manifest().epoch) {
                    t.epochs.push(p.manifest().epoch);
                }
                p
            }
        }
    }

    async fn fetch_prober(&self) -> Result<Arc<Prober>> {
        let (m, n) = self.auditor.manifest().await?;
        self.totals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .manifest_bytes += n as u64;
        Ok(self.prober(m))
    }

    /// Draws one SCT to audit; returns its pending entry (or counts a
    /// forged one). Measures the client CPU of the rebuild.
    fn draw(&self, rng: &mut ChaCha20Rng, sim_now: u64) -> Result<Option<(PendingAudit, f64)>> {
        let u = uniform(rng);
        let pool = if u < self.cfg.omitted_fraction && !self.pools[1].is_empty() {
            1
        } else if u < self.cfg.omitted_fraction + self.cfg.forged_fraction
            && !self.pools[2].is_empty()
        {
            2
        } else {
            0
        };
        let entries = &self.pools[pool];
        if entries.is_empty() {
            return Err(Error::Invalid("corpus has no logged certificates".into()));
        }
        let e = &entries[(rng.next_u64() % entries.len() as u64) as usize];
        let t = Instant::now();
        let b64 = base64::engine::general_purpose::STANDARD;
        let cert = b64
            .decode(&e.cert)
            .map_err(|x| Error::Invalid(x.to_string()))?;
        let issuer = b64
            .decode(&e.issuer)
            .map_err(|x| Error::Invalid(x.to_string()))?;
        let checked = match &e.tls_sct {
            Some(s) => vec![sct::delivered_sct(
                &cert,
                &b64.decode(s).map_err(|x| Error::Invalid(x.to_string()))?,
                &self.list,
            )?],
            None => sct::embedded_scts(&cert, &issuer, &self.list)?,
        };
        let cpu = t.elapsed().as_secs_f64();
        let Some(c) = checked.first() else {
            return Ok(None);
        };
        if !c.auditable() {
            let mut t = self.totals.lock().unwrap_or_else(|p| p.into_inner());
            if e.truth == Truth::Forged {
                t.det.forged_rejected += 1;
            }
            return Ok(None);
        }
        if e.truth == Truth::Forged {
            self.totals
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .det
                .forged_accepted += 1;
        }
        Ok(c.to_pending(&[cert, issuer], sim_now).map(|p| (p, cpu)))
    }

    /// Runs every ready audit of `queue` against `prober` (the same code
    /// as `sct-audit check`: [`audit::run_ready`]) and scores it. If
    /// the auditor retires the epoch meanwhile, the manifest is fetched
    /// again and the rest run against the new epoch.
    async fn run_ready(
        &self,
        queue: &mut PendingQueue,
        prober: &Arc<Prober>,
        sim_now: u64,
        first_audits: &mut Vec<(LeafHash, bool)>,
    ) -> Result<()> {
        let mut prober = prober.clone();
        for attempt in 0..=audit::EPOCH_RETRIES {
            let run = audit::run_ready(&self.auditor, &prober, queue, sim_now).await?;
            if !run.failed.is_empty() {
                let mut t = self.totals.lock().unwrap_or_else(|p| p.into_inner());
                for f in &run.failed {
                    t.audits_failed += 1;
                    *t.audit_failures.entry(f.reason()).or_default() += 1;
                }
            }
            self.score(run.ran, first_audits);
            if !run.epoch_retired || attempt == audit::EPOCH_RETRIES {
                break;
            }
            prober = self.fetch_prober().await?;
        }
        Ok(())
    }

    /// Adds audits that ran to the totals.
    fn score(&self, ran: Vec<audit::Audited>, first_audits: &mut Vec<(LeafHash, bool)>) {
        for a in ran {
            let truth = self.truth_by_leaf.get(&a.leaf_hash).copied();
            let logged = matches!(a.outcome, Outcome::Logged { .. });
            let mut t = self.totals.lock().unwrap_or_else(|p| p.into_inner());
            t.queries += 1;
            t.upload += a.stats.upload_bytes as u64;
            t.download += a.stats.download_bytes as u64;
            t.server_s += a.stats.server_pass_seconds / a.stats.batch.max(1) as f64;
            t.batch_sum += a.stats.batch as u64;
            t.client_s += a.client_seconds;
            t.round_trip_s += a.stats.round_trip_seconds;
            if a.recheck {
                t.det.rechecks += 1;
            } else {
                match truth {
                    Some(Truth::Logged) => {
                        t.det.logged_audits += 1;
                        t.det.logged_found += u64::from(logged);
                    }
                    Some(Truth::Omitted) => {
                        t.det.omitted_audits += 1;
                        t.det.omitted_caught += u64::from(!logged);
                        first_audits.push((a.leaf_hash, !logged));
                    }
                    _ => {}
                }
            }
            if let Outcome::Misbehaviour(r) = a.outcome {
                t.det.reports += 1;
                if truth == Some(Truth::Logged) {
                    t.det.false_reports += 1;
                }
                t.reports.push(*r);
            }
            drop(t);
            self.progress.inc(1);
        }
    }

    async fn client(self: Arc<Self>, id: usize) -> Result<PendingQueue> {
        let mut rng = ChaCha20Rng::seed_from_u64(
            self.cfg.seed ^ (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        let mut queue = match &self.cfg.queue_dir {
            Some(d) => PendingQueue::open(&d.join(format!("client-{id:05}.json")))?,
            None => PendingQueue::new(),
        };
        let per_day = self.cfg.policy.connections_per_week / 7.0;
        for week in 0..self.cfg.weeks {
            let mut week_omitted = Vec::new();
            for day in 0..7u64 {
                let sim_now = self.t0_ms + (u64::from(week) * 7 + day) * self.day_ms;
                let prober = self.fetch_prober().await?;
                // Connections of the day: sample which are audited.
                let conns = per_day.round() as u64;
                let mut audits = 0u32;
                for _ in 0..conns {
                    audits += self.cfg.policy.sample_connection(&mut rng);
                }
                for _ in 0..audits {
                    if let Some((p, cpu)) = self.draw(&mut rng, sim_now)? {
                        self.totals
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .client_s += cpu;
                        self.totals.lock().unwrap_or_else(|p| p.into_inner()).audits += 1;
                        queue.push(p);
                    }
                }
                self.run_ready(&mut queue, &prober, sim_now, &mut week_omitted)
                    .await?;
                queue.save()?;
            }
            let mut t = self.totals.lock().unwrap_or_else(|p| p.into_inner());
            if !week_omitted.is_empty() {
                t.det.client_weeks_with_omitted += 1;
                if week_omitted.iter().any(|(_, caught)| *caught) {
                    t.det.client_weeks_caught += 1;
                }
            }
        }
        self.done_clients.fetch_add(1, Ordering::Relaxed);
        Ok(queue)
    }
}

/// Runs the simulation (see the module docs).
pub async fn simulate(
    cfg: SimConfig,
    corpus: Vec<CorpusEntry>,
    list: LogList,
) -> Result<SimReport> {
    if cfg.clients == 0 || cfg.weeks == 0 || cfg.concurrency == 0 {
        return Err(Error::Invalid(
            "clients, weeks and concurrency must be ≥ 1".into(),
        ));
    }
    if !(0.0..=1.0).contains(&(cfg.omitted_fraction + cfg.forged_fraction)) {
        return Err(Error::Invalid(
            "omitted + forged fractions must be in [0, 1]".into(),
        ));
    }
    let started = Instant::now();
    // The fallback waits with the retries' sleeper (tests record them).
    let auditor = Auditor::new(&cfg.server)?
        .with_retry(cfg.retry.clone())
        .with_fallback(cfg.fallback.clone())
        .with_timer(Clock::system(), cfg.retry.sleeper.clone());
    // Ground truth by leaf hash (for scoring only).
    let mut pools: [Vec<CorpusEntry>; 3] = Default::default();
    let mut truth_by_leaf = std::collections::HashMap::new();
    let b64 = base64::engine::general_purpose::STANDARD;
    for e in corpus {
        let cert = b64
            .decode(&e.cert)
            .map_err(|x| Error::Invalid(x.to_string()))?;
        let issuer = b64
            .decode(&e.issuer)
            .map_err(|x| Error::Invalid(x.to_string()))?;
        // A forged SCT rebuilds the same leaf as the genuine one (only its
        // signature differs) and is never audited: it must not relabel it.
        if e.truth == Truth::Forged {
        } else if e.tls_sct.is_none() {
            if let Ok(scts) = sct::embedded_scts(&cert, &issuer, &list) {
                for s in scts {
                    truth_by_leaf.insert(s.leaf_hash, e.truth);
                }
            }
        } else if let Some(s) = &e.tls_sct {
            let raw = b64.decode(s).map_err(|x| Error::Invalid(x.to_string()))?;
            if let Ok(c) = sct::delivered_sct(&cert, &raw, &list) {
                truth_by_leaf.insert(c.leaf_hash, e.truth);
            }
        }
        let i = match e.truth {
            Truth::Logged => 0,
            Truth::Omitted => 1,
            Truth::Forged => 2,
        };
        pools[i].push(e);
    }
    if let Some(d) = &cfg.queue_dir {
        std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
    }
    let expected =
        (cfg.clients as f64 * f64::from(cfg.weeks) * cfg.policy.audits_per_week()) as u64;
    let progress = if cfg.progress {
        let pb = indicatif::ProgressBar::new(expected.max(1));
        if let Ok(s) = indicatif::ProgressStyle::with_template(
            "{msg:>12} [{bar:40}] {pos}/~{len} audits ({elapsed})",
        ) {
            pb.set_style(s.progress_chars("=> "));
        }
        pb.set_message("simulating");
        pb
    } else {
        indicatif::ProgressBar::hidden()
    };
    let shared = Arc::new(Shared {
        cfg: cfg.clone(),
        auditor,
        list,
        pools,
        truth_by_leaf,
        totals: Mutex::new(Totals::default()),
        probers: Mutex::new(None),
        progress,
        day_ms: 86_400_000,
        t0_ms: now_ms(),
        done_clients: AtomicU64::new(0),
    });
    // Fill ratio: private probes of uniformly random bits. If the epoch is
    // retired during the probes, the rest probe the new one (every epoch's
    // filters hold the same kind of set, so each probe is still a sample of
    // the fill ratio).
    let first = shared.fetch_prober().await?;
    let mut prober = first.clone();
    let mut ones = 0u64;
    let mut retired = 0;
    let mut rng = ChaCha20Rng::seed_from_u64(cfg.seed ^ 0xF111);
    let mut probe = 0;
    let mut fill_failed = 0u64;
    let mut answered = 0u64;
    while probe < cfg.fill_probes {
        // A uniformly random bit of a uniformly random filter, drawn
        // afresh for each fallback attempt.
        let drawn = shared
            .auditor
            .query_with_fallback(|| {
                let m = prober.manifest();
                let f = (rng.next_u64() % u64::from(m.filter.a)) as u32;
                let bit = rng.next_u64() % m.filter.bits;
                prober.prepare_bit(f, bit)
            })
            .await;
        match drawn {
            Ok(a) => {
                ones += u64::from(a.bit);
                answered += 1;
                probe += 1;
                retired = 0;
            }
            // The budget is per probe: a long run sees many daily rotations.
            Err(e) if audit::is_epoch_retired(&e) && retired < audit::EPOCH_RETRIES => {
                retired += 1;
                prober = shared.fetch_prober().await?;
            }
            Err(e) if audit::is_epoch_retired(&e) => return Err(e.into()),
            Err(_) => {
                fill_failed += 1;
                probe += 1;
            }
        }
    }
    let fill = if answered > 0 {
        ones as f64 / answered as f64
    } else {
        f64::NAN
    };
    let fill_se = if answered > 0 {
        (fill * (1.0 - fill) / answered as f64).sqrt()
    } else {
        f64::NAN
    };
    // Clients, `concurrency` at a time.
    let sem = Arc::new(tokio::sync::Semaphore::new(cfg.concurrency));
    let mut tasks = Vec::new();
    for id in 0..cfg.clients {
        let permit = sem
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| Error::Invalid(e.to_string()))?;
        let s = shared.clone();
        tasks.push(tokio::spawn(async move {
            let r = s.client(id).await;
            drop(permit);
            r
        }));
    }
    let mut queues = Vec::new();
    for t in tasks {
        queues.push(t.await.map_err(|e| Error::Invalid(e.to_string()))??);
    }
    // Re-checks in a later epoch.
    let need = |qs: &[PendingQueue]| {
        qs.iter()
            .flat_map(|q| &q.items)
            .filter_map(|p| p.not_found_in)
            .max()
    };
    if let Some(last_nf) = need(&queues) {
        let deadline = Instant::now() + cfg.recheck_timeout;
        let mut prober = shared.fetch_prober().await?;
        while prober.manifest().epoch <= last_nf && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(500)).await;
            prober = shared.fetch_prober().await?;
        }
        let sim_end = shared.t0_ms + u64::from(cfg.weeks) * 7 * shared.day_ms;
        for q in queues.iter_mut() {
            let mut unused = Vec::new();
            shared.run_ready(q, &prober, sim_end, &mut unused).await?;
            q.save()?;
        }
    }
    shared.progress.finish_and_clear();
    let mut t = std::mem::take(&mut *shared.totals.lock().unwrap_or_else(|p| p.into_inner()));
    t.det.still_pending = queues.iter().map(|q| q.items.len() as u64).sum();
    t.det.catch_rate_per_audit = ratio(t.det.omitted_caught, t.det.omitted_audits);
    t.det.catch_rate_per_client_week =
        ratio(t.det.client_weeks_caught, t.det.client_weeks_with_omitted);
    t.det.expected_catch_rate = 1.0 - fill;
    let m = first.manifest();
    let db_bytes = m.dbs.iter().map(|d| d.rows * d.cols).max().unwrap_or(0);
    let client_weeks = cfg.clients as f64 * f64::from(cfg.weeks);
    let q = t.queries.max(1) as f64;
    let measured = Measured {
        clients: cfg.clients as u64,
        weeks: f64::from(cfg.weeks),
        audits_per_client_week: t.queries as f64 / client_weeks,
        upload_bytes_per_query: t.upload as f64 / q,
        download_bytes_per_query: t.download as f64 / q,
        manifest_bytes_per_client_week: t.manifest_bytes as f64 / client_weeks,
        server_core_seconds_per_query: t.server_s / q,
        mean_batch: t.batch_sum as f64 / q,
        client_seconds_per_audit: t.client_s / q,
        db_bytes,
        entries: m.entries,
    };
    t.epochs.sort_unstable();
    let retry = shared.auditor.retry_stats();
    Ok(SimReport {
        server: cfg.server.clone(),
        epochs: t.epochs,
        entries: m.entries,
        db_bytes,
        fill_ratio: fill,
        fill_ratio_stderr: fill_se,
        fill_probes: cfg.fill_probes as u64,
        measured,
        detection: t.det,
        round_trip_seconds_mean: t.round_trip_s / q,
        retries: retry.retries,
        retry_wait_seconds: retry.wait_seconds,
        fallback: shared.auditor.fallback_stats(),
        audits_failed: t.audits_failed,
        audit_failures: t.audit_failures,
        fill_probes_failed: fill_failed,
        wall_seconds: started.elapsed().as_secs_f64(),
        report_files: write_reports(&t.reports, cfg.queue_dir.as_deref())?,
    })
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        f64::NAN
    } else {
        a as f64 / b as f64
    }
}

fn write_reports(reports: &[MisbehaviourReport], dir: Option<&Path>) -> Result<Vec<String>> {
    let Some(dir) = dir else {
        return Ok(Vec::new());
    };
    let dir = dir.join("reports");
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let mut out = Vec::new();
    for (i, r) in reports.iter().enumerate() {
        let p = dir.join(format!(
            "report-{i:04}-{}.json",
            &r.leaf_hash.to_hex()[..16]
        ));
        let json = serde_json::to_vec_pretty(r).map_err(|e| Error::Invalid(e.to_string()))?;
        std::fs::write(&p, json).map_err(|e| Error::io(&p, e))?;
        out.push(p.display().to_string());
    }
    Ok(out)
}
