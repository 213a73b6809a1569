//! Native HTTP transport to the auditor (reqwest). The browser extension
//! uses `fetch` instead, around the same [`crate::probe`] code.
//!
//! Every response is size-capped before it is read (manifest: 4 MiB;
//! query response: the manifest's exact `response_bytes`), and errors come
//! back as [`Error::Server`] with the auditor's JSON error code.
//!
//! An overloaded auditor answers 503 (load shedding) or 429 with a
//! `Retry-After` header. With a [`RetryPolicy`] ([`Auditor::with_retry`])
//! such answers are waited out as the header says — capped, and at most
//! [`RetryPolicy::max_retries`] times per request — before the error is
//! returned; [`Auditor::retry_stats`] counts the retries and the waiting.
//! [`Auditor::new`] does not retry.
//!
//! A query that reaches a shard not holding its database (the manifest
//! was stale, or routing went through a front) is answered 421
//! `wrong_shard` with the right shard's base URL in `shard_url`; the query
//! is sent there once more (if that URL is a valid shard URL other than
//! the one just tried), never more than once.
//!
//! Audits send their queries with [`Auditor::query_with_fallback`]: when
//! the query's group is unreachable, times out or answers 5xx (503 and 429
//! included), a fresh query for a fresh uniformly random database is
//! drawn and sent instead, up to [`crate::fallback::MAX_REDRAWS`] times,
//! resting groups as their `Retry-After` says ([`crate::fallback`],
//! docs/protocol.md §7.1). [`Auditor::fallback_stats`] counts what it did.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use audit_proto::api::{
    ErrorBody, BATCH_SIZE_HEADER, MAX_MANIFEST_BYTES, OCTET_STREAM, SERVER_TIMING_HEADER,
};
use audit_proto::Manifest;

use crate::error::{Error, Result};
use crate::fallback::{Failure, Fallback, FallbackPolicy, FallbackStats, Step};
use crate::probe::PreparedQuery;

/// What one query cost on the wire and on the server.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct QueryStats {
    /// Request body bytes.
    pub upload_bytes: usize,
    /// Response body bytes.
    pub download_bytes: usize,
    /// Server-reported wall time of the answering pass (s), whole batch.
    pub server_pass_seconds: f64,
    /// Queries in that pass.
    pub batch: usize,
    /// Round trip as seen by the client (s).
    pub round_trip_seconds: f64,
    /// Client time spent decoding the response (s).
    pub decode_seconds: f64,
}

/// How an [`Auditor`] waits before a retry. The default sleeps on tokio's
/// timer; tests inject one that records the waits instead of sleeping.
#[derive(Clone)]
pub struct Sleeper(Arc<SleepFn>);

type SleepFn = dyn Fn(Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync;

impl Sleeper {
    /// Sleeps on tokio's timer.
    pub fn tokio() -> Sleeper {
        Sleeper::new(tokio::time::sleep)
    }

    /// Waits with `f` (e.g. a recording no-op in tests).
    pub fn new<F, Fut>(f: F) -> Sleeper
    where
        F: Fn(Duration) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        Sleeper(Arc::new(move |d| Box::pin(f(d))))
    }

    /// Waits for `d`.
    pub async fn sleep(&self, d: Duration) {
        (self.0)(d).await;
    }
}

impl Default for Sleeper {
    fn default() -> Sleeper {
        Sleeper::tokio()
    }
}

impl std::fmt::Debug for Sleeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sleeper")
    }
}

/// A monotonic clock in milliseconds: the fallback's rests and deadline
/// are measured on it. The default reads [`Instant`]; tests inject one
/// that moves only when their [`Sleeper`] "sleeps".
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> u64 + Send + Sync>);

impl Clock {
    /// Milliseconds since the clock was made, from [`Instant`].
    pub fn system() -> Clock {
        let t0 = Instant::now();
        Clock::new(move || u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX))
    }

    /// Reads `f`.
    pub fn new(f: impl Fn() -> u64 + Send + Sync + 'static) -> Clock {
        Clock(Arc::new(f))
    }

    /// Now (ms).
    pub fn now_ms(&self) -> u64 {
        (self.0)()
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Clock")
    }
}

/// When to retry an overloaded auditor's 503 or 429 answer.
#[derive(Clone, Debug)]
pub struct RetryPolicy {
    /// Retries per request after the first attempt (0: never retry).
    pub max_retries: u32,
    /// Longest single wait, whatever `Retry-After` asks for.
    pub max_wait: Duration,
    /// Wait when the answer carries no `Retry-After` in delta-seconds (an
    /// HTTP-date is not interpreted); also capped by `max_wait`.
    pub default_wait: Duration,
    /// How to wait.
    pub sleeper: Sleeper,
}

impl RetryPolicy {
    /// Never retry: the first 503 or 429 is returned as [`Error::Server`].
    pub fn never() -> RetryPolicy {
        RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        }
    }

    /// The wait before retrying an answer whose `Retry-After` header is
    /// `retry_after`: its delta-seconds, or `default_wait` when absent or
    /// not delta-seconds, at most `max_wait`.
    pub fn wait_for(&self, retry_after: Option<&str>) -> Duration {
        retry_after
            .map(str::trim)
            .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
            .map(|v| v.parse::<u64>().map_or(Duration::MAX, Duration::from_secs))
            .unwrap_or(self.default_wait)
            .min(self.max_wait)
    }
}

impl Default for RetryPolicy {
    /// Three retries, waits of at most 30 s, 1 s without `Retry-After`.
    fn default() -> RetryPolicy {
        RetryPolicy {
            max_retries: 3,
            max_wait: Duration::from_secs(30),
            default_wait: Duration::from_secs(1),
            sleeper: Sleeper::default(),
        }
    }
}

/// Retries an [`Auditor`] (and its clones) made so far.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RetryStats {
    /// 503/429 answers retried.
    pub retries: u64,
    /// Time spent waiting before those retries (s).
    pub wait_seconds: f64,
}

#[derive(Debug, Default)]
struct RetryCounters {
    retries: AtomicU64,
    wait_micros: AtomicU64,
}

/// A query answered under the fallback policy.
#[derive(Debug)]
pub struct Answered<Q = PreparedQuery> {
    /// The query that was answered (the last one drawn).
    pub query: Q,
    /// The bit.
    pub bit: bool,
    /// Its wire and server figures.
    pub stats: QueryStats,
    /// Attempts it took (1: no fallback).
    pub attempts: u32,
}

/// One failed attempt: the error and the answer's `Retry-After`.
#[derive(Debug)]
pub(crate) struct AttemptError {
    pub(crate) error: Error,
    pub(crate) retry_after: Option<String>,
}

impl From<Error> for AttemptError {
    fn from(error: Error) -> AttemptError {
        AttemptError {
            error,
            retry_after: None,
        }
    }
}

/// A query the fallback can send: it knows its group.
pub(crate) trait Drawn {
    /// The group serving its database.
    fn group(&self) -> u32;
}

impl Drawn for PreparedQuery {
    fn group(&self) -> u32 {
        self.group
    }
}

/// Sends one query once (the fallback's transport: real HTTP in
/// [`Auditor`], scripted in the tests).
pub(crate) trait Transport<Q> {
    /// Sends `q` and decodes its bit, within `timeout`.
    async fn attempt(
        &self,
        q: &Q,
        timeout: Duration,
    ) -> std::result::Result<(bool, QueryStats), AttemptError>;
}

/// The failure an error of one attempt is, if the fallback handles it.
pub fn failure_of(e: &Error) -> Option<Failure> {
    match e {
        Error::Network(_) => Some(Failure::Unreachable),
        Error::Timeout(_) => Some(Failure::Timeout),
        Error::Server { status, .. } => Failure::of_status(*status),
        _ => None,
    }
}

/// Runs one query under `policy`: draws a query with `draw`, sends it, and
/// on a failure the fallback handles draws a fresh one (module docs of
/// [`crate::fallback`]). Adds what it did to `stats`.
pub(crate) async fn run_fallback<Q: Drawn, T: Transport<Q>>(
    transport: &T,
    policy: &FallbackPolicy,
    clock: &Clock,
    sleeper: &Sleeper,
    stats: &Mutex<FallbackStats>,
    mut draw: impl FnMut() -> Result<Q>,
) -> Result<Answered<Q>> {
    let mut fb = Fallback::new(policy.clone(), clock.now_ms());
    let finish = |fb: &Fallback, gave_up: bool| {
        stats
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .add(fb, gave_up);
    };
    // The last error of an attempt that was sent: what a give-up after
    // skipped draws reports (e.g. the 503 whose Retry-After made them skip).
    let mut last_sent: Option<Error> = None;
    loop {
        let q = match draw() {
            Ok(q) => q,
            Err(e) => {
                finish(&fb, false);
                return Err(e);
            }
        };
        let step = match fb.before_send(q.group(), clock.now_ms()) {
            Step::Wait { ms } => {
                // Once waited, sent (even if the clock did not move: a
                // sleeper that returns at once must not spin).
                sleeper.sleep(Duration::from_millis(ms)).await;
                Step::Send {
                    timeout_ms: fb.timeout_ms(clock.now_ms()),
                }
            }
            s => s,
        };
        let (failure, retry_after, error) = match step {
            Step::Send { timeout_ms } => {
                match transport
                    .attempt(&q, Duration::from_millis(timeout_ms))
                    .await
                {
                    Ok((bit, qs)) => {
                        finish(&fb, false);
                        return Ok(Answered {
                            query: q,
                            bit,
                            stats: qs,
                            attempts: fb.failures().len() as u32 + 1,
                        });
                    }
                    Err(a) => match failure_of(&a.error) {
                        Some(f) => (f, a.retry_after, a.error),
                        None => {
                            finish(&fb, false);
                            return Err(a.error);
                        }
                    },
                }
            }
            _ => (
                Failure::Resting,
                None,
                Error::Timeout(format!(
                    "group {} asked for no requests within the query's wait limit",
                    q.group()
                )),
            ),
        };
        if !fb.failed(q.group(), failure, retry_after.as_deref(), clock.now_ms()) {
            finish(&fb, true);
            let last = match (failure, last_sent) {
                (Failure::Resting, Some(sent)) => sent,
                _ => error,
            };
            return Err(Error::Exhausted {
                attempts: fb.failures().len() as u32,
                reasons: FallbackStats::reasons(fb.failures()),
                last: Box::new(last),
            });
        }
        if failure != Failure::Resting {
            last_sent = Some(error);
        }
    }
}

/// A client of one auditor. Clones share the connection pool and the retry
/// and fallback counters.
#[derive(Clone, Debug)]
pub struct Auditor {
    base: Arc<str>,
    http: reqwest::Client,
    retry: RetryPolicy,
    counters: Arc<RetryCounters>,
    fallback: FallbackPolicy,
    clock: Clock,
    sleeper: Sleeper,
    fallback_stats: Arc<Mutex<FallbackStats>>,
}

impl Auditor {
    /// `base` like `http://127.0.0.1:8080` (no trailing slash needed). Does
    /// not retry a request ([`Auditor::with_retry`]); audit queries fall
    /// back to fresh draws with [`FallbackPolicy::default`]
    /// ([`Auditor::with_fallback`]).
    pub fn new(base: &str) -> Result<Auditor> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| Error::Network(e.to_string()))?;
        Ok(Auditor {
            base: base.trim_end_matches('/').into(),
            http,
            retry: RetryPolicy::never(),
            counters: Arc::default(),
            fallback: FallbackPolicy::default(),
            clock: Clock::system(),
            sleeper: Sleeper::default(),
            fallback_stats: Arc::default(),
        })
    }

    /// Retries 503 and 429 answers as `policy` says (the manifest and
    /// reports, and [`Auditor::query`]; [`Auditor::query_with_fallback`]
    /// draws afresh instead).
    pub fn with_retry(mut self, policy: RetryPolicy) -> Auditor {
        self.retry = policy;
        self
    }

    /// Falls back as `policy` says in [`Auditor::query_with_fallback`].
    pub fn with_fallback(mut self, policy: FallbackPolicy) -> Auditor {
        self.fallback = policy;
        self
    }

    /// The fallback's clock and how it waits (tests: a fake clock that a
    /// recording sleeper advances).
    pub fn with_timer(mut self, clock: Clock, sleeper: Sleeper) -> Auditor {
        self.clock = clock;
        self.sleeper = sleeper;
        self
    }

    /// What the fallback did so far (this auditor and its clones).
    pub fn fallback_stats(&self) -> FallbackStats {
        self.fallback_stats
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Sends a query drawn by `draw` (e.g. `|| prober.prepare(leaf)`: a
    /// fresh random filter and a fresh query each call) and decodes its
    /// bit; when the query's group is unreachable, times out or answers
    /// 5xx, draws again and sends the new query, as the
    /// [`FallbackPolicy`] says. Errors the fallback does not handle (4xx,
    /// an answer that does not decode) are returned at once; when every
    /// attempt failed, [`Error::Exhausted`].
    pub async fn query_with_fallback(
        &self,
        draw: impl FnMut() -> Result<PreparedQuery>,
    ) -> Result<Answered> {
        run_fallback(
            self,
            &self.fallback,
            &self.clock,
            &self.sleeper,
            &self.fallback_stats,
            draw,
        )
        .await
    }

    /// The base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Retries so far (by this auditor and its clones).
    pub fn retry_stats(&self) -> RetryStats {
        RetryStats {
            retries: self.counters.retries.load(Ordering::Relaxed),
            wait_seconds: self.counters.wait_micros.load(Ordering::Relaxed) as f64 / 1e6,
        }
    }

    /// Sends the request `make` builds; a 503 or 429 answer is retried per
    /// the [`RetryPolicy`] (the last one is returned as it is). Returns the
    /// response and when its attempt was sent.
    async fn send(
        &self,
        make: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<(reqwest::Response, Instant)> {
        self.send_retrying(make, self.retry.max_retries).await
    }

    async fn send_retrying(
        &self,
        make: impl Fn() -> reqwest::RequestBuilder,
        max_retries: u32,
    ) -> Result<(reqwest::Response, Instant)> {
        let mut retries = 0;
        loop {
            let sent = Instant::now();
            let resp = make().send().await.map_err(net_error)?;
            let status = resp.status();
            let overloaded = status == reqwest::StatusCode::SERVICE_UNAVAILABLE
                || status == reqwest::StatusCode::TOO_MANY_REQUESTS;
            if !overloaded || retries >= max_retries {
                return Ok((resp, sent));
            }
            let wait = self.retry.wait_for(header(&resp, "retry-after").as_deref());
            drop(resp);
            retries += 1;
            self.counters.retries.fetch_add(1, Ordering::Relaxed);
            self.counters.wait_micros.fetch_add(
                u64::try_from(wait.as_micros()).unwrap_or(u64::MAX),
                Ordering::Relaxed,
            );
            self.retry.sleeper.sleep(wait).await;
        }
    }

    /// Fetches and checks the current manifest; returns it with its size.
    pub async fn manifest(&self) -> Result<(Manifest, usize)> {
        let url = format!("{}/v1/manifest", self.base);
        let (resp, _) = self.send(|| self.http.get(&url)).await?;
        let body = read_capped(resp, MAX_MANIFEST_BYTES).await?;
        let n = body.len();
        Ok((Manifest::from_json(&body)?, n))
    }

    /// Sends a prepared query to the server holding its database (the
    /// shard the manifest names, else this auditor) and decodes the bit.
    /// The round trip is the answered attempt's (waits before retries are
    /// in [`Auditor::retry_stats`]).
    pub async fn query(&self, q: &PreparedQuery) -> Result<(bool, QueryStats)> {
        self.query_once(q, None, self.retry.max_retries)
            .await
            .map_err(|a| a.error)
    }

    /// [`Auditor::query`] with a timeout and a number of same-query
    /// retries of 503/429; a failure carries the answer's `Retry-After`.
    async fn query_once(
        &self,
        q: &PreparedQuery,
        timeout: Option<Duration>,
        max_retries: u32,
    ) -> std::result::Result<(bool, QueryStats), AttemptError> {
        let url = q.url(&self.base);
        let (mut resp, mut t) = self.post_query(&url, q, timeout, max_retries).await?;
        if resp.status() == reqwest::StatusCode::MISDIRECTED_REQUEST {
            // 421 wrong_shard: once more at the shard the answer names.
            let tried = q.shard_url.as_deref().unwrap_or(&self.base);
            let (named, err) = read_misdirected(resp).await?;
            match named {
                Some(shard) if shard != tried.trim_end_matches('/') => {
                    let url = format!("{shard}{}", q.path);
                    (resp, t) = self.post_query(&url, q, timeout, max_retries).await?;
                }
                _ => return Err(err.into()),
            }
        }
        let retry_after = header(&resp, "retry-after");
        let batch = header(&resp, BATCH_SIZE_HEADER)
            .and_then(|v| v.parse().ok())
            .unwrap_or(1);
        let server_pass_seconds = header(&resp, SERVER_TIMING_HEADER)
            .as_deref()
            .and_then(parse_server_timing)
            .unwrap_or(0.0);
        let body = read_capped(resp, q.response_bytes)
            .await
            .map_err(|error| AttemptError { error, retry_after })?;
        let round_trip_seconds = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let bit = q.decode(&body)?;
        let stats = QueryStats {
            upload_bytes: q.body.len(),
            download_bytes: body.len(),
            server_pass_seconds,
            batch,
            round_trip_seconds,
            decode_seconds: t.elapsed().as_secs_f64(),
        };
        Ok((bit, stats))
    }

    /// Sends a misbehaviour report to `POST /v1/reports` and returns the
    /// auditor's receipt. The report names the site's certificate: send it
    /// only with the user's consent (`sct-audit check --send-report`, the
    /// extension's popup button).
    pub async fn send_report(
        &self,
        report: &audit_proto::report::MisbehaviourReport,
    ) -> Result<audit_proto::report::ReportReceipt> {
        let url = format!("{}{}", self.base, audit_proto::report::REPORTS_PATH);
        let body = serde_json::to_vec(report).map_err(|e| Error::Invalid(e.to_string()))?;
        let (resp, _) = self
            .send(|| {
                self.http
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body.clone())
            })
            .await?;
        let body = read_capped(resp, 64 << 10).await?;
        serde_json::from_slice(&body)
            .map_err(|e| Error::Invalid(format!("the auditor's report receipt: {e}")))
    }
}

impl Auditor {
    async fn post_query(
        &self,
        url: &str,
        q: &PreparedQuery,
        timeout: Option<Duration>,
        max_retries: u32,
    ) -> Result<(reqwest::Response, Instant)> {
        self.send_retrying(
            || {
                let r = self
                    .http
                    .post(url)
                    .header("content-type", OCTET_STREAM)
                    .body(q.body.clone());
                match timeout {
                    Some(t) => r.timeout(t),
                    None => r,
                }
            },
            max_retries,
        )
        .await
    }
}

impl Transport<PreparedQuery> for Auditor {
    /// One attempt: no same-query retry (the fallback draws afresh), the
    /// 421 follow-up included.
    async fn attempt(
        &self,
        q: &PreparedQuery,
        timeout: Duration,
    ) -> std::result::Result<(bool, QueryStats), AttemptError> {
        self.query_once(q, Some(timeout), 0).await
    }
}

/// A transport error: [`Error::Timeout`] if it timed out, else
/// [`Error::Network`].
fn net_error(e: reqwest::Error) -> Error {
    if e.is_timeout() {
        Error::Timeout(e.to_string())
    } else {
        Error::Network(e.to_string())
    }
}

/// Reads a 421 answer: the valid shard URL its error body names (if
/// any, without a trailing slash) and the error to return if it is not
/// followed.
async fn read_misdirected(resp: reqwest::Response) -> Result<(Option<String>, Error)> {
    let status = resp.status().as_u16();
    let mut resp = resp;
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(net_error)? {
        if body.len() + chunk.len() > 64 << 10 {
            return Err(Error::Invalid("auditor response over 65536 bytes".into()));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(match serde_json::from_slice::<ErrorBody>(&body) {
        Ok(e) => {
            let shard = e
                .shard_url
                .filter(|u| audit_proto::shard::check_url(u).is_ok())
                .map(|u| u.trim_end_matches('/').to_owned());
            let err = Error::Server {
                status,
                code: e.error,
                message: e.message,
            };
            (shard, err)
        }
        Err(_) => (
            None,
            Error::Server {
                status,
                code: "http_error".to_owned(),
                message: String::from_utf8_lossy(&body).into_owned(),
            },
        ),
    })
}

fn header(resp: &reqwest::Response, name: &str) -> Option<String> {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// `answer;dur=12.5` → 0.0125 s.
pub fn parse_server_timing(v: &str) -> Option<f64> {
    v.split(',')
        .map(str::trim)
        .find(|m| m.starts_with("answer"))?
        .split(';')
        .find_map(|p| p.trim().strip_prefix("dur="))?
        .parse::<f64>()
        .ok()
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
        .map(|ms| ms / 1e3)
}

/// Reads a response body of at most `max` bytes; non-2xx become
/// [`Error::Server`] with the JSON error body's code.
async fn read_capped(mut resp: reqwest::Response, max: usize) -> Result<Vec<u8>> {
    let status = resp.status();
    let mut body = Vec::new();
    let cap = if status.is_success() { max } else { 64 << 10 };
    while let Some(chunk) = resp.chunk().await.map_err(net_error)? {
        if body.len() + chunk.len() > cap {
            return Err(Error::Invalid(format!("auditor response over {cap} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    if !status.is_success() {
        let (code, message) = match serde_json::from_slice::<ErrorBody>(&body) {
            Ok(e) => (e.error, e.message),
            Err(_) => (
                "http_error".to_owned(),
                String::from_utf8_lossy(&body).into_owned(),
            ),
        };
        return Err(Error::Server {
            status: status.as_u16(),
            code,
            message,
        });
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_timing() {
        assert_eq!(parse_server_timing("answer;dur=12.5"), Some(0.0125));
        assert_eq!(
            parse_server_timing("db;dur=1, answer;desc=\"x\";dur=2"),
            Some(0.002)
        );
        assert_eq!(parse_server_timing("answer"), None);
        assert_eq!(parse_server_timing("answer;dur=-1"), None);
        assert_eq!(parse_server_timing("answer;dur=NaN"), None);
    }

    #[test]
    fn retry_after_is_honoured_capped_and_defaulted() {
        let p = RetryPolicy {
            max_retries: 3,
            max_wait: Duration::from_secs(30),
            default_wait: Duration::from_millis(1500),
            sleeper: Sleeper::default(),
        };
        let s = Duration::from_secs;
        assert_eq!(p.wait_for(Some("7")), s(7));
        assert_eq!(p.wait_for(Some(" 2 ")), s(2));
        assert_eq!(p.wait_for(Some("0")), s(0));
        assert_eq!(p.wait_for(Some("3600")), s(30));
        assert_eq!(p.wait_for(Some("99999999999999999999999")), s(30));
        for v in [
            None,
            Some(""),
            Some("-1"),
            Some("+5"),
            Some("1.5"),
            Some("Wed, 21 Oct 2015 07:28:00 GMT"),
        ] {
            assert_eq!(p.wait_for(v), Duration::from_millis(1500), "{v:?}");
        }
        let capped = RetryPolicy {
            max_wait: Duration::from_millis(100),
            ..p
        };
        assert_eq!(capped.wait_for(None), Duration::from_millis(100));
        assert_eq!(RetryPolicy::never().max_retries, 0);
    }
}

/// The retries against a tiny HTTP server on 127.0.0.1:0 that answers from
/// a script; waits are recorded by an injected [`Sleeper`], not slept.
#[cfg(test)]
mod retry_tests {
    use std::sync::Mutex;

    use axum::body::Bytes;
    use axum::http::{Method, StatusCode, Uri};
    use axum::response::{IntoResponse, Response};

    use super::*;
    use crate::probe::Prober;

    /// One scripted answer: status, `Retry-After`, JSON body.
    type Answer = (u16, Option<&'static str>, Vec<u8>);

    #[derive(Default)]
    struct Script {
        answers: Vec<Answer>,
        /// (method, path, body length) of every request.
        seen: Mutex<Vec<(Method, String, usize)>>,
    }

    /// Serves `answers` in order, repeating the last one.
    async fn serve(answers: Vec<Answer>) -> (String, Arc<Script>) {
        let script = Arc::new(Script {
            answers,
            ..Script::default()
        });
        let s = script.clone();
        let app = axum::Router::new().fallback(move |method: Method, uri: Uri, body: Bytes| {
            let s = s.clone();
            async move {
                let n = {
                    let mut seen = s.seen.lock().unwrap();
                    seen.push((method, uri.path().to_owned(), body.len()));
                    seen.len()
                };
                let (status, retry_after, body) = &s.answers[(n - 1).min(s.answers.len() - 1)];
                let mut r: Response = (
                    StatusCode::from_u16(*status).unwrap(),
                    [("content-type", "application/json")],
                    body.clone(),
                )
                    .into_response();
                if let Some(v) = retry_after {
                    r.headers_mut().insert("retry-after", v.parse().unwrap());
                }
                r
            }
        });
        let url = test_support::fake::serve(app).await;
        (url, script)
    }

    fn error(code: &str) -> Vec<u8> {
        serde_json::to_vec(&ErrorBody {
            error: code.into(),
            message: "scripted".into(),
            current_epoch: None,
            shard_url: None,
        })
        .unwrap()
    }

    /// A valid manifest of one 2^16-bit database.
    fn tiny_manifest() -> Manifest {
        test_support::fake::tiny_manifest(3, 1_700_000_000, 10)
    }

    /// A manifest of two 2^16-bit databases, served by the shards at
    /// `urls` (mod rule) or, with `urls` empty, unsharded.
    fn two_db_manifest(urls: Vec<String>) -> Manifest {
        test_support::fake::tiny_sharded_manifest(3, 1_700_000_000, 10, 2, urls)
    }

    #[tokio::test]
    async fn queries_go_to_the_shard_the_manifest_names() {
        let (a, seen_a) = serve(vec![(400, None, error("bad_query"))]).await;
        let (b, seen_b) = serve(vec![(421, None, error("wrong_shard"))]).await;
        let (front, seen_front) = serve(vec![(400, None, error("bad_query"))]).await;
        let prober = Prober::new(Arc::new(two_db_manifest(vec![a.clone(), b.clone()])));
        let auditor = Auditor::new(&front).unwrap();
        for (filter, want_db, shard) in [(0u32, 0u32, &a), (1, 1, &b)] {
            let q = prober.prepare_bit(filter, 77).unwrap();
            assert_eq!(q.db, want_db);
            assert_eq!(q.shard_url.as_deref(), Some(shard.as_str()));
            assert_eq!(
                q.url(&front),
                format!("{shard}/v1/epochs/3/dbs/{want_db}/query")
            );
            let _ = auditor.query(&q).await;
        }
        assert!(seen_front.seen.lock().unwrap().is_empty());
        let paths = |s: &Script| -> Vec<String> {
            s.seen.lock().unwrap().iter().map(|r| r.1.clone()).collect()
        };
        assert_eq!(paths(&seen_a), ["/v1/epochs/3/dbs/0/query"]);
        assert_eq!(paths(&seen_b), ["/v1/epochs/3/dbs/1/query"]);
        // 421 comes back as the server's error code.
        let q = prober.prepare_bit(1, 5).unwrap();
        match auditor.query(&q).await {
            Err(Error::Server { status, code, .. }) => {
                assert_eq!((status, code.as_str()), (421, "wrong_shard"))
            }
            other => panic!("{other:?}"),
        }
        // Unsharded: everything goes to the auditor the manifest came from.
        let q = Prober::new(Arc::new(two_db_manifest(vec![])))
            .prepare_bit(1, 5)
            .unwrap();
        assert_eq!(q.shard_url, None);
        assert_eq!(
            q.url(&format!("{front}/")),
            format!("{front}/v1/epochs/3/dbs/1/query")
        );
        let _ = auditor.query(&q).await;
        assert_eq!(paths(&seen_front), ["/v1/epochs/3/dbs/1/query"]);
    }

    fn wrong_shard(shard_url: &str) -> Vec<u8> {
        serde_json::to_vec(&ErrorBody {
            error: "wrong_shard".into(),
            message: "scripted".into(),
            current_epoch: Some(3),
            shard_url: Some(shard_url.to_owned()),
        })
        .unwrap()
    }

    /// A 421 naming another shard is followed once; one naming the shard
    /// just tried, an invalid URL or a second 421 is returned as the error.
    #[tokio::test]
    async fn a_421_is_retried_once_at_the_shard_it_names() {
        let (right, seen_right) = serve(vec![(400, None, error("bad_query"))]).await;
        let (wrong, seen_wrong) = serve(vec![(421, None, wrong_shard(&right))]).await;
        // Unsharded view of the epoch: the query goes to `wrong` first.
        let q = Prober::new(Arc::new(two_db_manifest(vec![])))
            .prepare_bit(1, 5)
            .unwrap();
        let auditor = Auditor::new(&wrong).unwrap();
        match auditor.query(&q).await {
            Err(Error::Server { status, code, .. }) => {
                assert_eq!((status, code.as_str()), (400, "bad_query"))
            }
            other => panic!("{other:?}"),
        }
        let paths = |s: &Script| -> Vec<(String, usize)> {
            s.seen
                .lock()
                .unwrap()
                .iter()
                .map(|r| (r.1.clone(), r.2))
                .collect()
        };
        let sent = ("/v1/epochs/3/dbs/1/query".to_owned(), q.body.len());
        assert_eq!(paths(&seen_wrong), std::slice::from_ref(&sent));
        assert_eq!(paths(&seen_right), [sent]);

        // Two shards that each name the other: one retry, then the error.
        let (b, seen_b) = serve(vec![(421, None, wrong_shard("http://127.0.0.1:9"))]).await;
        let (a, seen_a) = serve(vec![(421, None, wrong_shard(&b))]).await;
        match Auditor::new(&a).unwrap().query(&q).await {
            Err(Error::Server { status, code, .. }) => {
                assert_eq!((status, code.as_str()), (421, "wrong_shard"))
            }
            other => panic!("{other:?}"),
        }
        assert_eq!((paths(&seen_a).len(), paths(&seen_b).len()), (1, 1));

        // No valid URL named: not retried.
        for body in [
            wrong_shard("ftp://x"),
            wrong_shard(""),
            error("wrong_shard"),
        ] {
            let (c, seen_c) = serve(vec![(421, None, body)]).await;
            let e = Auditor::new(&c).unwrap().query(&q).await.unwrap_err();
            assert!(matches!(e, Error::Server { status: 421, .. }), "{e:?}");
            assert_eq!(paths(&seen_c).len(), 1);
        }
    }

    /// A policy whose sleeper records the waits and returns at once.
    fn recording(max_retries: u32, max_wait: Duration) -> (RetryPolicy, Arc<Mutex<Vec<Duration>>>) {
        let waits = Arc::new(Mutex::new(Vec::new()));
        let w = waits.clone();
        let policy = RetryPolicy {
            max_retries,
            max_wait,
            default_wait: Duration::from_secs(1),
            sleeper: Sleeper::new(move |d| {
                w.lock().unwrap().push(d);
                std::future::ready(())
            }),
        };
        (policy, waits)
    }

    #[tokio::test]
    async fn manifest_waits_out_503_and_429_as_retry_after_says() {
        let json = tiny_manifest().to_json();
        let (url, script) = serve(vec![
            (503, Some("7"), error("overloaded")),
            (429, Some("2"), error("too_many_requests")),
            (200, None, json.clone()),
        ])
        .await;
        let (policy, waits) = recording(3, Duration::from_secs(30));
        let auditor = Auditor::new(&url).unwrap().with_retry(policy);
        let (m, n) = auditor.manifest().await.unwrap();
        assert_eq!((m.epoch, n), (3, json.len()));
        assert_eq!(
            *waits.lock().unwrap(),
            [Duration::from_secs(7), Duration::from_secs(2)]
        );
        assert_eq!(
            auditor.clone().retry_stats(),
            RetryStats {
                retries: 2,
                wait_seconds: 9.0
            }
        );
        assert_eq!(script.seen.lock().unwrap().len(), 3);
    }

    #[tokio::test]
    async fn retries_are_capped_and_bounded_then_the_error_is_returned() {
        let (url, script) = serve(vec![(503, Some("3600"), error("overloaded"))]).await;
        let (policy, waits) = recording(2, Duration::from_millis(250));
        let auditor = Auditor::new(&url).unwrap().with_retry(policy);
        match auditor.manifest().await {
            Err(Error::Server { status, code, .. }) => {
                assert_eq!((status, code.as_str()), (503, "overloaded"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(*waits.lock().unwrap(), [Duration::from_millis(250); 2]);
        assert_eq!(auditor.retry_stats().retries, 2);
        assert!((auditor.retry_stats().wait_seconds - 0.5).abs() < 1e-9);
        assert_eq!(script.seen.lock().unwrap().len(), 3);
    }

    #[tokio::test]
    async fn other_errors_and_the_default_policy_do_not_retry() {
        let (url, script) = serve(vec![
            (503, Some("1"), error("overloaded")),
            (200, None, tiny_manifest().to_json()),
        ])
        .await;
        let auditor = Auditor::new(&url).unwrap();
        assert!(matches!(
            auditor.manifest().await,
            Err(Error::Server { status: 503, .. })
        ));
        assert_eq!(auditor.retry_stats(), RetryStats::default());
        assert_eq!(script.seen.lock().unwrap().len(), 1);

        let (url, script) = serve(vec![(500, Some("1"), error("internal"))]).await;
        let (policy, waits) = recording(3, Duration::from_secs(30));
        let auditor = Auditor::new(&url).unwrap().with_retry(policy);
        assert!(matches!(
            auditor.manifest().await,
            Err(Error::Server { status: 500, .. })
        ));
        assert!(waits.lock().unwrap().is_empty());
        assert_eq!(script.seen.lock().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn a_query_is_resent_whole_after_a_503_without_retry_after() {
        let (url, script) = serve(vec![
            (503, None, error("overloaded")),
            (400, None, error("bad_query")),
        ])
        .await;
        let prober = Prober::new(Arc::new(tiny_manifest()));
        let q = prober.prepare_bit(0, 12_345).unwrap();
        let (policy, waits) = recording(3, Duration::from_secs(30));
        let auditor = Auditor::new(&url).unwrap().with_retry(policy);
        match auditor.query(&q).await {
            Err(Error::Server { status, code, .. }) => {
                assert_eq!((status, code.as_str()), (400, "bad_query"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(*waits.lock().unwrap(), [Duration::from_secs(1)]);
        let seen = script.seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        for (method, path, len) in seen.iter() {
            assert_eq!(
                (method, path.as_str(), *len),
                (&Method::POST, "/v1/epochs/3/dbs/0/query", q.body.len())
            );
        }
    }
}

/// The fallback's driver against a scripted fleet: an injected clock that
/// only the recording sleeper moves, a fake transport (no HTTP, no sleeps),
/// a seeded draw.
#[cfg(test)]
mod fallback_tests {
    use std::collections::HashMap;

    use rand_chacha::ChaCha20Rng;
    use rand_core::{RngCore, SeedableRng};

    use super::*;
    use crate::probe::Prober;

    /// Databases of the test epoch: one filter each, on 3 groups by
    /// `db mod 3` — groups {0, 3}, {1, 4}, {2}: 2/5, 2/5, 1/5 of the filters.
    const DBS: u32 = 5;

    fn prober() -> Prober {
        let urls = (0..3).map(|g| format!("http://group-{g}.test")).collect();
        Prober::new(Arc::new(test_support::fake::tiny_sharded_manifest(
            3,
            1_700_000_000,
            10,
            DBS,
            urls,
        )))
    }

    /// What a group does with a query.
    #[derive(Clone, Copy, Debug)]
    enum Behaviour {
        Answers,
        /// Fails with this error: status (0: unreachable, 1: timeout) and
        /// Retry-After.
        Fails(u16, Option<&'static str>),
    }

    struct Fleet {
        groups: HashMap<u32, Behaviour>,
        clock: Arc<AtomicU64>,
        /// (time, database, group) of every query sent.
        sent: Mutex<Vec<(u64, u32, u32)>>,
    }

    /// A drawn query: its database and group (building real YPIR queries
    /// would only slow the thousands of draws down; the real draw is
    /// [`Prober::prepare`], checked below and in the fleet test).
    #[derive(Debug)]
    struct Fake {
        db: u32,
        group: u32,
    }

    impl Drawn for Fake {
        fn group(&self) -> u32 {
            self.group
        }
    }

    impl Transport<Fake> for Fleet {
        async fn attempt(
            &self,
            q: &Fake,
            timeout: Duration,
        ) -> std::result::Result<(bool, QueryStats), AttemptError> {
            let now = self.clock.load(Ordering::SeqCst);
            self.sent.lock().unwrap().push((now, q.db, q.group));
            match self
                .groups
                .get(&q.group)
                .copied()
                .unwrap_or(Behaviour::Answers)
            {
                Behaviour::Answers => Ok((true, QueryStats::default())),
                Behaviour::Fails(status, retry_after) => {
                    let error = match status {
                        0 => Error::Network("connection refused".into()),
                        1 => {
                            // The attempt used up its timeout.
                            self.clock
                                .fetch_add(timeout.as_millis() as u64, Ordering::SeqCst);
                            Error::Timeout("scripted".into())
                        }
                        s => Error::Server {
                            status: s,
                            code: "scripted".into(),
                            message: String::new(),
                        },
                    };
                    Err(AttemptError {
                        error,
                        retry_after: retry_after.map(str::to_owned),
                    })
                }
            }
        }
    }

    struct Run {
        fleet: Fleet,
        clock: Clock,
        sleeper: Sleeper,
        waits: Arc<Mutex<Vec<u64>>>,
        stats: Mutex<FallbackStats>,
        rng: ChaCha20Rng,
    }

    fn run(groups: &[(u32, Behaviour)], seed: u64) -> Run {
        let t = Arc::new(AtomicU64::new(1_000));
        let waits = Arc::new(Mutex::new(Vec::new()));
        let (tc, ts, w) = (t.clone(), t.clone(), waits.clone());
        Run {
            fleet: Fleet {
                groups: groups.iter().copied().collect(),
                clock: t,
                sent: Mutex::default(),
            },
            clock: Clock::new(move || tc.load(Ordering::SeqCst)),
            sleeper: Sleeper::new(move |d: Duration| {
                let ms = d.as_millis() as u64;
                w.lock().unwrap().push(ms);
                ts.fetch_add(ms, Ordering::SeqCst);
                std::future::ready(())
            }),
            waits,
            stats: Mutex::default(),
            rng: ChaCha20Rng::seed_from_u64(seed),
        }
    }

    impl Run {
        /// One query: a seeded uniform database per attempt (the real
        /// client draws a filter from the OS CSPRNG, [`Prober::prepare`]).
        async fn query(&mut self, policy: &FallbackPolicy) -> Result<Answered<Fake>> {
            let rng = &mut self.rng;
            run_fallback(
                &self.fleet,
                policy,
                &self.clock,
                &self.sleeper,
                &self.stats,
                || {
                    let db = (rng.next_u64() % u64::from(DBS)) as u32;
                    Ok(Fake { db, group: db % 3 })
                },
            )
            .await
        }

        fn sent(&self) -> Vec<(u64, u32, u32)> {
            self.fleet.sent.lock().unwrap().clone()
        }

        fn stats(&self) -> FallbackStats {
            self.stats.lock().unwrap().clone()
        }
    }

    /// Counts per database of `dbs`.
    fn histogram(dbs: impl Iterator<Item = u32>) -> Vec<u64> {
        let mut h = vec![0u64; DBS as usize];
        for d in dbs {
            h[d as usize] += 1;
        }
        h
    }

    /// Every database holds one of the 5 filters: uniform.
    fn uniform_p(h: &[u64]) -> f64 {
        test_support::stats::chi_square_p(h, &[1.0 / f64::from(DBS); DBS as usize])
    }

    #[tokio::test]
    async fn a_healthy_fleet_never_takes_the_fallback_and_stays_uniform() {
        let mut r = run(&[], 1);
        let n = 1_000;
        for _ in 0..n {
            let a = r.query(&FallbackPolicy::default()).await.unwrap();
            assert_eq!(a.attempts, 1);
        }
        let s = r.stats();
        assert_eq!(
            (s.queries, s.attempts, s.fallbacks, s.gave_up),
            (n, n, 0, 0)
        );
        assert!(s.failures.is_empty() && r.waits.lock().unwrap().is_empty());
        let p = uniform_p(&histogram(r.sent().iter().map(|s| s.1)));
        assert!(p > 1e-6, "databases asked not uniform: p = {p}");
    }

    #[tokio::test]
    async fn each_failure_kind_falls_back_to_a_fresh_uniform_draw() {
        for (status, reason) in [
            (0, "unreachable"),
            (1, "timeout"),
            (500, "server_error"),
            (502, "server_error"),
            (503, "overloaded"),
        ] {
            // Group 1 (databases 1 and 4, 2/5 of the filters) fails.
            let mut r = run(&[(1, Behaviour::Fails(status, None))], 2);
            let n = 600;
            let mut answered = Vec::new();
            for _ in 0..n {
                let a = r.query(&FallbackPolicy::default()).await.unwrap();
                assert_ne!(a.query.group, 1);
                answered.push(a.query.db);
            }
            let sent = r.sent();
            let s = r.stats();
            let on_dead = sent.iter().filter(|s| s.2 == 1).count() as u64;
            assert!(on_dead > 0, "{reason}");
            assert_eq!(s.fallbacks, on_dead, "{reason}");
            assert_eq!(s.failures[reason], on_dead, "{reason}");
            assert_eq!(s.attempts, sent.len() as u64, "{reason}");
            assert_eq!(s.gave_up, 0, "{reason}");
            // Every draw, failed or not, is uniform over all databases;
            // the answered ones are uniform over the live groups' ones.
            let p = uniform_p(&histogram(sent.iter().map(|s| s.1)));
            assert!(p > 1e-6, "{reason}: draws not uniform: p = {p}");
            let h = histogram(answered.into_iter());
            assert_eq!((h[1], h[4]), (0, 0));
            let live = [h[0], h[2], h[3]];
            let p = test_support::stats::chi_square_p(&live, &[1.0 / 3.0; 3]);
            assert!(p > 1e-6, "{reason}: answers not uniform: p = {p}");
        }
    }

    #[tokio::test]
    async fn a_group_that_said_retry_after_is_not_asked_before_it_ends() {
        let policy = FallbackPolicy::default();
        // Group 0 answers 503 with Retry-After: 5 s, group 2 429 with
        // Retry-After: 3600 s (longer than any wait: draws there are
        // skipped for the rest of the query).
        let mut r = run(
            &[
                (0, Behaviour::Fails(503, Some("5"))),
                (2, Behaviour::Fails(429, Some("3600"))),
            ],
            8,
        );
        // 3/5 of the draws fail: a query fails with probability
        // (3/5)^13 ≈ 0.13 %, which this seed does not meet.
        for _ in 0..200 {
            let a = r.query(&policy).await.unwrap();
            assert_eq!(a.query.group, 1);
        }
        // Within one query, a group is asked again only after its rest.
        let sent = r.sent();
        let stats = r.stats();
        assert!(stats.failures["overloaded"] > 0);
        assert!(!r.waits.lock().unwrap().is_empty());
        assert!(stats.wait_seconds > 0.0);
        let mut last: HashMap<u32, u64> = HashMap::new();
        let mut query_start = 0;
        for &(t, _, g) in &sent {
            if g == 1 {
                // answered: the next query starts
                last.clear();
                query_start = t;
                continue;
            }
            if let Some(&prev) = last.get(&g) {
                let rest = if g == 0 { 5_000 } else { 3_600_000 };
                assert!(
                    t >= prev + rest,
                    "group {g} asked at {t}, rests until {}",
                    prev + rest
                );
            }
            last.insert(g, t);
            assert!(t >= query_start);
        }
    }

    #[tokio::test]
    async fn the_bound_and_the_deadline_are_respected() {
        // Every group down: K + 1 attempts, then Exhausted.
        let mut r = run(
            &[
                (0, Behaviour::Fails(0, None)),
                (1, Behaviour::Fails(500, None)),
                (2, Behaviour::Fails(0, None)),
            ],
            4,
        );
        let policy = FallbackPolicy::default();
        match r.query(&policy).await {
            Err(Error::Exhausted { attempts, last, .. }) => {
                assert_eq!(attempts, MAX_REDRAWS_PLUS_ONE);
                assert!(failure_of(&last).is_some(), "{last:?}");
            }
            other => panic!("{other:?}"),
        }
        let s = r.stats();
        assert_eq!(
            (s.queries, s.attempts, s.fallbacks, s.gave_up),
            (1, 13, 12, 1)
        );
        // The sent attempts and the skipped ones (resting past the
        // deadline) add up to the bound.
        assert!(r.sent().len() <= 13);
        // Timeouts: the deadline ends it before the bound.
        let mut r = run(
            &[
                (0, Behaviour::Fails(1, None)),
                (1, Behaviour::Fails(1, None)),
                (2, Behaviour::Fails(1, None)),
            ],
            5,
        );
        let short = FallbackPolicy {
            deadline_ms: 70_000,
            attempt_timeout_ms: 30_000,
            ..FallbackPolicy::default()
        };
        assert!(matches!(
            r.query(&short).await,
            Err(Error::Exhausted { .. })
        ));
        let s = r.stats();
        assert!(s.attempts < 13 && s.failures["timeout"] >= 3, "{s:?}");
        let sent = r.sent();
        assert!(sent.iter().all(|&(t, ..)| t < 1_000 + 70_000), "{sent:?}");
        // No fallback configured: the first failure is final.
        let mut r = run(
            &[
                (0, Behaviour::Fails(0, None)),
                (1, Behaviour::Fails(0, None)),
                (2, Behaviour::Fails(0, None)),
            ],
            6,
        );
        assert!(matches!(
            r.query(&FallbackPolicy::never()).await,
            Err(Error::Exhausted { attempts: 1, .. })
        ));
        assert_eq!(r.sent().len(), 1);
    }

    #[test]
    fn a_prepared_query_names_the_group_of_its_database() {
        let prober = prober();
        for f in 0..DBS {
            let q = prober.prepare_bit(f, 5).unwrap();
            assert_eq!((q.db, q.group), (f, f % 3));
            assert_eq!(
                q.shard_url.as_deref(),
                Some(format!("http://group-{}.test", f % 3).as_str())
            );
        }
        let q = Prober::new(Arc::new(test_support::fake::tiny_manifest(3, 0, 1)))
            .prepare_bit(0, 5)
            .unwrap();
        assert_eq!((q.group, q.shard_url), (0, None));
    }

    const MAX_REDRAWS_PLUS_ONE: u32 = crate::fallback::MAX_REDRAWS + 1;

    #[tokio::test]
    async fn errors_the_fallback_does_not_handle_are_returned_at_once() {
        for status in [400, 404, 413, 421] {
            let mut r = run(
                &[
                    (0, Behaviour::Fails(status, None)),
                    (1, Behaviour::Fails(status, None)),
                    (2, Behaviour::Fails(status, None)),
                ],
                7,
            );
            match r.query(&FallbackPolicy::default()).await {
                Err(Error::Server { status: s, .. }) => assert_eq!(s, status),
                other => panic!("{other:?}"),
            }
            assert_eq!(r.sent().len(), 1);
            let s = r.stats();
            assert_eq!((s.attempts, s.fallbacks, s.gave_up), (1, 0, 0));
        }
    }
}
