//! HTTP for the log clients: one [`HttpClient`] (reqwest with rustls) per
//! process and one [`LogEndpoint`] per log, which adds that log's limits.
//!
//! Every request:
//!
//! * waits for the log's request-rate limiter (`requests_per_second`) and a
//!   slot of its concurrency limit (`concurrency`);
//! * has a per-request timeout covering connect, headers and body;
//! * reads the body with a hard cap: a `Content-Length` above the cap is
//!   refused before reading, and reading stops as soon as the cap is passed;
//! * is retried on 429, 5xx (except 501), timeouts and transport errors,
//!   with exponential backoff and full jitter, waiting at least what
//!   `Retry-After` asks (seconds or an HTTP date). A `Retry-After` above
//!   `max_retry_after_seconds` gives up at once with [`Error::RateLimited`].
//!
//! Other statuses (404, 400, ...) fail at once with [`Error::Http`]. A 200
//! body is returned as bytes; whether it is garbage is for the caller's
//! parser to say (it is never retried: a log that serves garbage is
//! misbehaving, and the next scheduled run tries again).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ct_core::splitmix::{self, SplitMix64};
use serde::Deserialize;
use tokio::sync::Semaphore;

use crate::error::{Error, Result};

/// Transport settings shared by every log (`[http]` in the configuration).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct HttpSettings {
    /// Per-request timeout (connect + headers + body), seconds.
    pub timeout_seconds: f64,
    /// Retries after the first attempt for retryable failures.
    pub max_retries: u32,
    /// First backoff step, milliseconds (doubled per retry, full jitter).
    pub initial_backoff_ms: u64,
    /// Largest backoff step, seconds.
    pub max_backoff_seconds: f64,
    /// A `Retry-After` above this (seconds) is not waited for: the request
    /// fails with [`Error::RateLimited`].
    pub max_retry_after_seconds: u64,
    /// Hard cap on a response body, bytes.
    pub max_response_bytes: usize,
    /// `User-Agent` header.
    pub user_agent: String,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            timeout_seconds: 60.0,
            max_retries: 10,
            initial_backoff_ms: 250,
            max_backoff_seconds: 60.0,
            max_retry_after_seconds: 600,
            max_response_bytes: 64 << 20,
            user_agent: concat!("ct-ingest/", env!("CARGO_PKG_VERSION")).to_owned(),
        }
    }
}

impl HttpSettings {
    /// Checks the values are usable.
    pub fn validate(&self) -> Result<()> {
        if !(self.timeout_seconds.is_finite() && self.timeout_seconds > 0.0) {
            return Err(Error::Config(format!(
                "http.timeout_seconds must be positive, got {}",
                self.timeout_seconds
            )));
        }
        if !(self.max_backoff_seconds.is_finite() && self.max_backoff_seconds >= 0.0) {
            return Err(Error::Config(format!(
                "http.max_backoff_seconds must be >= 0, got {}",
                self.max_backoff_seconds
            )));
        }
        if self.max_response_bytes == 0 {
            return Err(Error::Config("http.max_response_bytes must be > 0".into()));
        }
        Ok(())
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.timeout_seconds.clamp(0.001, 86_400.0))
    }
}

/// Counters of one [`HttpClient`] (shared by its clones).
#[derive(Debug, Default)]
pub struct HttpCounters {
    /// Requests sent (every attempt).
    pub requests: AtomicU64,
    /// Response body bytes read.
    pub bytes: AtomicU64,
    /// Attempts that were retried (429, 5xx, timeouts, transport errors).
    pub retries: AtomicU64,
    /// Requests that failed for good.
    pub errors: AtomicU64,
}

/// A reqwest client plus the retry policy; cheap to clone.
#[derive(Clone, Debug)]
pub struct HttpClient {
    client: reqwest::Client,
    settings: Arc<HttpSettings>,
    counters: Arc<HttpCounters>,
}

/// A successful (2xx) response.
#[derive(Clone, Debug)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The body, at most the cap given to [`LogEndpoint::get`].
    pub body: Vec<u8>,
}

/// Why one attempt failed.
enum Attempt {
    /// Retry after at least this long (Retry-After), if given.
    Retry { err: Error, wait: Option<Duration> },
    /// Do not retry.
    Fatal(Error),
}

impl HttpClient {
    /// Builds the client (rustls with the webpki roots).
    pub fn new(settings: &HttpSettings) -> Result<Self> {
        settings.validate()?;
        let client = reqwest::Client::builder()
            .user_agent(settings.user_agent.clone())
            .timeout(settings.timeout())
            .connect_timeout(settings.timeout())
            .pool_max_idle_per_host(64)
            .build()
            .map_err(|e| Error::Network {
                url: String::new(),
                reason: format!("cannot build the HTTP client: {e}"),
            })?;
        Ok(HttpClient {
            client,
            settings: Arc::new(settings.clone()),
            counters: Arc::new(HttpCounters::default()),
        })
    }

    /// The settings in force.
    pub fn settings(&self) -> &HttpSettings {
        &self.settings
    }

    /// The request counters.
    pub fn counters(&self) -> &HttpCounters {
        &self.counters
    }

    /// GET `url` with retries, without per-log limits (e.g. the log list).
    pub async fn get(&self, url: &str, max_bytes: usize) -> Result<Response> {
        self.get_limited(url, max_bytes, None).await
    }

    async fn get_limited(
        &self,
        url: &str,
        max_bytes: usize,
        limits: Option<&Limits>,
    ) -> Result<Response> {
        let max_bytes = max_bytes.min(self.settings.max_response_bytes);
        let mut retries = 0u32;
        loop {
            let outcome = match limits {
                Some(l) => {
                    l.rate.acquire().await;
                    // The semaphore is never closed; treat a closed one as
                    // "no limit" rather than failing.
                    let _permit = l.slots.acquire().await.ok();
                    self.attempt(url, max_bytes).await
                }
                None => self.attempt(url, max_bytes).await,
            };
            let (err, wait) = match outcome {
                Ok(r) => return Ok(r),
                Err(Attempt::Fatal(e)) => {
                    self.counters.errors.fetch_add(1, Ordering::Relaxed);
                    return Err(e);
                }
                Err(Attempt::Retry { err, wait }) => (err, wait),
            };
            if let Some(w) = wait {
                if w.as_secs() > self.settings.max_retry_after_seconds {
                    self.counters.errors.fetch_add(1, Ordering::Relaxed);
                    return Err(Error::RateLimited {
                        url: url.to_owned(),
                        retry_after_s: Some(w.as_secs()),
                    });
                }
            }
            if retries >= self.settings.max_retries {
                self.counters.errors.fetch_add(1, Ordering::Relaxed);
                return Err(err);
            }
            let backoff = self.backoff(retries);
            let delay = wait.map_or(backoff, |w| w.max(backoff));
            tracing::debug!(url, error = %crate::error::chain(&err), retry = retries + 1, delay_ms = delay.as_millis() as u64, "retrying");
            self.counters.retries.fetch_add(1, Ordering::Relaxed);
            retries += 1;
            tokio::time::sleep(delay).await;
        }
    }

    /// Full jitter: uniform in `[0, min(max, initial * 2^retry)]`.
    fn backoff(&self, retry: u32) -> Duration {
        let cap = self.settings.max_backoff_seconds.max(0.0);
        let base = self.settings.initial_backoff_ms as f64 / 1000.0;
        let step = (base * 2f64.powi(retry.min(30) as i32)).min(cap);
        Duration::from_secs_f64((step * jitter_unit()).max(0.0))
    }

    async fn attempt(&self, url: &str, max_bytes: usize) -> std::result::Result<Response, Attempt> {
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        let timeout_ms = self.settings.timeout().as_millis() as u64;
        let transport = |e: reqwest::Error| {
            if e.is_timeout() {
                Error::Timeout {
                    url: url.to_owned(),
                    timeout_ms,
                }
            } else {
                Error::Network {
                    url: url.to_owned(),
                    reason: crate::error::chain(&e),
                }
            }
        };
        let mut resp = match self.client.get(url).send().await {
            Ok(r) => r,
            Err(e) if e.is_builder() => return Err(Attempt::Fatal(transport(e))),
            Err(e) => {
                return Err(Attempt::Retry {
                    err: transport(e),
                    wait: None,
                })
            }
        };
        let status = resp.status().as_u16();
        if status == 429 || ((500..600).contains(&status) && status != 501) {
            let wait = retry_after(resp.headers());
            let err = if status == 429 {
                Error::RateLimited {
                    url: url.to_owned(),
                    retry_after_s: wait.map(|w| w.as_secs()),
                }
            } else {
                Error::Http {
                    url: url.to_owned(),
                    status,
                }
            };
            return Err(Attempt::Retry { err, wait });
        }
        if !(200..300).contains(&status) {
            return Err(Attempt::Fatal(Error::Http {
                url: url.to_owned(),
                status,
            }));
        }
        if let Some(len) = resp.content_length() {
            if len > max_bytes as u64 {
                return Err(Attempt::Fatal(
                    ct_core::Error::TooLarge {
                        what: "HTTP response body",
                        len: usize::try_from(len).unwrap_or(usize::MAX),
                        max: max_bytes,
                    }
                    .into(),
                ));
            }
        }
        let mut body = Vec::with_capacity(
            resp.content_length()
                .map_or(64 << 10, |l| l as usize)
                .min(max_bytes),
        );
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    if body.len() + chunk.len() > max_bytes {
                        return Err(Attempt::Fatal(
                            ct_core::Error::TooLarge {
                                what: "HTTP response body",
                                len: body.len() + chunk.len(),
                                max: max_bytes,
                            }
                            .into(),
                        ));
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => {
                    return Err(Attempt::Retry {
                        err: transport(e),
                        wait: None,
                    })
                }
            }
        }
        self.counters
            .bytes
            .fetch_add(body.len() as u64, Ordering::Relaxed);
        Ok(Response { status, body })
    }
}

/// One log's limits: request rate and concurrent requests.
#[derive(Debug)]
struct Limits {
    rate: RateLimiter,
    slots: Semaphore,
}

/// One log as seen by the HTTP layer: the shared client plus that log's rate
/// and concurrency limits. Cheap to clone (shares the limits).
#[derive(Clone, Debug)]
pub struct LogEndpoint {
    http: HttpClient,
    limits: Arc<Limits>,
}

impl LogEndpoint {
    /// `concurrency` requests at once (at least 1) and at most
    /// `requests_per_second` request starts per second (`None` or a
    /// non-positive value: unlimited).
    pub fn new(http: HttpClient, concurrency: usize, requests_per_second: Option<f64>) -> Self {
        LogEndpoint {
            http,
            limits: Arc::new(Limits {
                rate: RateLimiter::new(requests_per_second),
                slots: Semaphore::new(concurrency.max(1)),
            }),
        }
    }

    /// GET `url` within this log's limits, with retries, reading at most
    /// `max_bytes` (and at most the client's `max_response_bytes`).
    pub async fn get(&self, url: &str, max_bytes: usize) -> Result<Response> {
        self.http
            .get_limited(url, max_bytes, Some(&self.limits))
            .await
    }

    /// The shared client.
    pub fn http(&self) -> &HttpClient {
        &self.http
    }
}

/// Spaces request starts at least `1 / rate` apart (no bursts).
#[derive(Debug)]
struct RateLimiter {
    interval: Option<Duration>,
    next: Mutex<Option<Instant>>,
}

impl RateLimiter {
    fn new(requests_per_second: Option<f64>) -> Self {
        let interval = requests_per_second
            .filter(|r| r.is_finite() && *r > 0.0)
            .map(|r| Duration::from_secs_f64(1.0 / r));
        RateLimiter {
            interval,
            next: Mutex::new(None),
        }
    }

    async fn acquire(&self) {
        let Some(interval) = self.interval else {
            return;
        };
        let wait = {
            // A poisoned lock only means another task panicked while
            // holding it; the Instant inside is still meaningful.
            let mut next = match self.next.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            let now = Instant::now();
            let slot = next.map_or(now, |n| n.max(now));
            *next = Some(slot + interval);
            slot.saturating_duration_since(now)
        };
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

/// `Retry-After` as delay-seconds or an HTTP date (RFC 9110 §10.2.3).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let v = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = parse_http_date(v)?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?.as_secs();
    Some(Duration::from_secs(at.saturating_sub(now)))
}

/// Parses an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) to Unix seconds.
fn parse_http_date(s: &str) -> Option<u64> {
    let rest = s.split_once(", ")?.1;
    let mut it = rest.split(' ');
    let day: i64 = it.next()?.parse().ok()?;
    let month = match it.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: i64 = it.next()?.parse().ok()?;
    let mut hms = it.next()?.split(':');
    let h: i64 = hms.next()?.parse().ok()?;
    let m: i64 = hms.next()?.parse().ok()?;
    let sec: i64 = hms.next()?.parse().ok()?;
    if it.next()? != "GMT" || !(1..=31).contains(&day) || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    // Days from civil (H. Hinnant).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days * 86_400 + h * 3600 + m * 60 + sec).ok()
}

/// A uniform value in `[0, 1)` from a per-process splitmix64 sequence
/// seeded by the clock (jitter needs no cryptographic quality).
fn jitter_unit() -> f64 {
    static STATE: AtomicU64 = AtomicU64::new(0);
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let state = STATE.fetch_add(splitmix::GAMMA, Ordering::Relaxed);
    SplitMix64(state.wrapping_add(seed)).unit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_dates() {
        assert_eq!(
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(parse_http_date("06 Nov 1994 08:49:37 GMT"), None);
        assert_eq!(parse_http_date("Sun, 06 Foo 1994 08:49:37 GMT"), None);
        assert_eq!(parse_http_date("Sun, 06 Nov 1994 08:49:37 UTC"), None);
    }

    #[test]
    fn jitter_in_range() {
        for _ in 0..1000 {
            let j = jitter_unit();
            assert!((0.0..1.0).contains(&j));
        }
    }

    #[test]
    fn backoff_is_capped() {
        let settings = HttpSettings {
            initial_backoff_ms: 100,
            max_backoff_seconds: 1.0,
            ..HttpSettings::default()
        };
        let c = HttpClient::new(&settings).expect("client");
        for r in 0..40 {
            assert!(c.backoff(r) <= Duration::from_secs(1));
        }
    }

    #[tokio::test]
    async fn rate_limiter_spaces_requests() {
        let rl = RateLimiter::new(Some(100.0));
        let start = Instant::now();
        for _ in 0..6 {
            rl.acquire().await;
        }
        // 6 starts at 10 ms spacing: the last at >= 50 ms.
        assert!(start.elapsed() >= Duration::from_millis(45));
        let unlimited = RateLimiter::new(None);
        let start = Instant::now();
        for _ in 0..1000 {
            unlimited.acquire().await;
        }
        assert!(start.elapsed() < Duration::from_millis(100));
    }
}
