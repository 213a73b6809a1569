//! Ingester configuration: a TOML file, overridden by environment
//! variables, plus the selection of logs from Chrome's log list v3.
//!
//! ```toml
//! # Log list: a file path (or file://...) or an http(s) URL.
//! log_list = "https://www.gstatic.com/ct/log_list/v3/log_list.json"
//! # Default: the embedded SQLite file ct-ingest.db in the working directory.
//! database_url = "postgres://ct@db.internal/ct"
//!
//! [schedule]              # for `ct-ingest run`
//! interval_seconds = 600  # or: daily = "03:30" (UTC); at most one of the two
//! retry_seconds = 5       # after a failed run: retry after 5, 10, 20, ... s
//! retry_max_seconds = 300 # up to this (never later than the next run)
//!
//! [defaults]              # per-log limits, for every selected log
//! batch_size = 256        # entries per get-entries request (RFC 6962)
//! concurrency = 4         # requests in flight per log
//! requests_per_second = 10.0
//! commit_every = 65536    # entries verified and committed per transaction
//!
//! [http]                  # transport, shared by all logs (see http.rs)
//! timeout_seconds = 60
//! max_retries = 10
//!
//! [[log]]                 # no [[log]] at all: every log of the list
//! description = "Argon 2026h1"     # case-insensitive substring
//! [[log]]
//! id = "DleUvPOuqT4zGyyZB7P3kN+bwj1xMiXdIaklrGHFTiE="  # base64 or hex
//! api = "static"          # "rfc6962" or "static": when a log has both
//! requests_per_second = 2.0
//! ```
//!
//! Environment overrides (applied after the file, before validation):
//!
//! | variable | overrides |
//! |---|---|
//! | `CT_INGEST_DATABASE_URL`, else `DATABASE_URL` | `database_url` |
//! | `CT_INGEST_LOG_LIST` | `log_list` |
//! | `CT_INGEST_BATCH_SIZE`, `CT_INGEST_CONCURRENCY`, `CT_INGEST_REQUESTS_PER_SECOND`, `CT_INGEST_COMMIT_EVERY` | the same key of `[defaults]` |
//! | `CT_INGEST_INTERVAL_SECONDS`, `CT_INGEST_DAILY` | `[schedule]` (one replaces the other) |
//! | `CT_INGEST_TIMEOUT_SECONDS`, `CT_INGEST_MAX_RETRIES`, `CT_INGEST_MAX_RESPONSE_BYTES` | the same key of `[http]` |
//!
//! Per-log settings in `[[log]]` win over `[defaults]` (and so over the
//! environment's defaults).

use std::collections::HashSet;
use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::http::{HttpClient, HttpSettings};
pub use ct_core::civil::Schedule;
use ct_core::loglist::{LogApi, LogInfo, LogList, LogStateKind, MAX_LOG_LIST_SIZE};
use ct_core::LogId;
use ct_store::{LogKind, DEFAULT_DATABASE_URL};

/// Chrome's current log list.
pub const DEFAULT_LOG_LIST: &str = "https://www.gstatic.com/ct/log_list/v3/log_list.json";
/// Largest configuration file accepted.
pub const MAX_CONFIG_SIZE: usize = 1 << 20;

/// The whole configuration. `Debug` shows the database URL without its
/// password.
#[derive(Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Path, `file://` URL or `http(s)://` URL of a log list v3.
    #[serde(default = "default_log_list")]
    pub log_list: String,
    /// Database URL (`None`: [`DEFAULT_DATABASE_URL`]).
    #[serde(default)]
    pub database_url: Option<String>,
    /// When `ct-ingest run` ingests.
    #[serde(default)]
    pub schedule: ScheduleConfig,
    /// Limits of every selected log unless its `[[log]]` says otherwise.
    #[serde(default)]
    pub defaults: LimitsConfig,
    /// Transport settings.
    #[serde(default)]
    pub http: HttpSettings,
    /// Log selectors; empty selects every log of the list (see
    /// [`Config::select_logs`]).
    #[serde(default, rename = "log")]
    pub logs: Vec<LogSelector>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("log_list", &self.log_list)
            .field(
                "database_url",
                &self.database_url.as_deref().map(ct_store::redact_url),
            )
            .field("schedule", &self.schedule)
            .field("defaults", &self.defaults)
            .field("http", &self.http)
            .field("logs", &self.logs)
            .finish()
    }
}

fn default_log_list() -> String {
    DEFAULT_LOG_LIST.to_owned()
}

/// `[schedule]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ScheduleConfig {
    /// Ingest every this many seconds (measured from the start of a run).
    pub interval_seconds: Option<u64>,
    /// Ingest once a day at `HH:MM` UTC.
    pub daily: Option<String>,
    /// After a failed run (or a log refused for a transient reason: the
    /// database or the log unreachable), `ct-ingest run` tries again after
    /// this many seconds, doubling per consecutive failure up to
    /// `retry_max_seconds`, and never later than the next scheduled run
    /// (default [`DEFAULT_RETRY_SECONDS`]).
    pub retry_seconds: Option<u64>,
    /// Longest wait between retries (default [`DEFAULT_RETRY_MAX_SECONDS`]).
    pub retry_max_seconds: Option<u64>,
}

/// First wait before retrying a failed run (`[schedule] retry_seconds`).
pub const DEFAULT_RETRY_SECONDS: u64 = 5;
/// Longest wait between retries (`[schedule] retry_max_seconds`).
pub const DEFAULT_RETRY_MAX_SECONDS: u64 = 300;

impl ScheduleConfig {
    /// How long to wait before retry number `failures` (1 for the first
    /// retry after a failure): `retry_seconds · 2^(failures − 1)`, at most
    /// `retry_max_seconds`.
    pub fn retry_delay(&self, failures: u32) -> u64 {
        let first = self.retry_seconds.unwrap_or(DEFAULT_RETRY_SECONDS);
        let max = self.retry_max_seconds.unwrap_or(DEFAULT_RETRY_MAX_SECONDS);
        let doublings = failures.saturating_sub(1).min(63);
        first.saturating_mul(1u64 << doublings).min(max)
    }
}

/// Optional limits, as written in `[defaults]` or a `[[log]]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Entries asked per `get-entries` request.
    pub batch_size: Option<u64>,
    /// Requests in flight per log.
    pub concurrency: Option<usize>,
    /// Request starts per second per log (0: unlimited).
    pub requests_per_second: Option<f64>,
    /// Entries per verified commit.
    pub commit_every: Option<u64>,
}

/// One `[[log]]`: which log(s), and their limits.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LogSelector {
    /// Log ID, base64 (as in the log list) or 64 hex digits.
    pub id: Option<String>,
    /// Case-insensitive substring of the log's description.
    pub description: Option<String>,
    /// Only the log's RFC 6962 (`"rfc6962"`) or static-ct-api (`"static"`)
    /// entry of the list.
    pub api: Option<String>,
    /// Entries asked per `get-entries` request.
    pub batch_size: Option<u64>,
    /// Requests in flight.
    pub concurrency: Option<usize>,
    /// Request starts per second (0: unlimited).
    pub requests_per_second: Option<f64>,
    /// Entries per verified commit.
    pub commit_every: Option<u64>,
}

/// Resolved per-log limits.
#[derive(Clone, Debug, PartialEq)]
pub struct LogLimits {
    /// Entries asked per `get-entries` request (RFC 6962; static-ct-api
    /// logs are fetched a 256-entry tile at a time).
    pub batch_size: u64,
    /// Requests in flight.
    pub concurrency: usize,
    /// Request starts per second (`None`: unlimited).
    pub requests_per_second: Option<f64>,
    /// Entries per verified commit (rounded up to a multiple of 256 for
    /// static-ct-api logs).
    pub commit_every: u64,
}

impl Default for LogLimits {
    fn default() -> Self {
        LogLimits {
            batch_size: 256,
            concurrency: 4,
            requests_per_second: None,
            commit_every: 65_536,
        }
    }
}

/// A log chosen for ingestion, with its limits.
#[derive(Clone, Debug, PartialEq)]
pub struct SelectedLog {
    /// The log as listed.
    pub info: LogInfo,
    /// Its limits.
    pub limits: LogLimits,
}

impl SelectedLog {
    /// The API this log is ingested through.
    pub fn kind(&self) -> LogKind {
        match self.info.api {
            LogApi::Rfc6962 { .. } => LogKind::Rfc6962,
            LogApi::StaticCt { .. } => LogKind::Static,
        }
    }

    /// The URL stored for the log: the RFC 6962 base URL or the
    /// static-ct-api monitoring prefix.
    pub fn url(&self) -> &str {
        match &self.info.api {
            LogApi::Rfc6962 { url } => url,
            LogApi::StaticCt { monitoring_url, .. } => monitoring_url,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            log_list: default_log_list(),
            database_url: None,
            schedule: ScheduleConfig::default(),
            defaults: LimitsConfig::default(),
            http: HttpSettings::default(),
            logs: Vec::new(),
        }
    }
}

impl Config {
    /// Reads `path`, applies the process environment and validates.
    pub fn load(path: &Path) -> Result<Config> {
        let text = read_capped(path, MAX_CONFIG_SIZE)?;
        let text = String::from_utf8(text)
            .map_err(|_| Error::Config(format!("{} is not UTF-8", path.display())))?;
        let mut config = Config::from_toml(&text)?;
        config.apply_env(|k| std::env::var(k).ok())?;
        config.validate()?;
        Ok(config)
    }

    /// Parses TOML (no environment, no validation).
    pub fn from_toml(text: &str) -> Result<Config> {
        toml::from_str(text).map_err(|e| Error::Config(e.to_string()))
    }

    /// Applies the `CT_INGEST_*` / `DATABASE_URL` overrides read through
    /// `env` (empty values are ignored).
    pub fn apply_env<F>(&mut self, env: F) -> Result<()>
    where
        F: Fn(&str) -> Option<String>,
    {
        let get = |k: &str| {
            env(k)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        if let Some(url) = get("CT_INGEST_DATABASE_URL").or_else(|| get("DATABASE_URL")) {
            self.database_url = Some(url);
        }
        if let Some(v) = get("CT_INGEST_LOG_LIST") {
            self.log_list = v;
        }
        if let Some(v) = get("CT_INGEST_BATCH_SIZE") {
            self.defaults.batch_size = Some(parse_env("CT_INGEST_BATCH_SIZE", &v)?);
        }
        if let Some(v) = get("CT_INGEST_CONCURRENCY") {
            self.defaults.concurrency = Some(parse_env("CT_INGEST_CONCURRENCY", &v)?);
        }
        if let Some(v) = get("CT_INGEST_REQUESTS_PER_SECOND") {
            self.defaults.requests_per_second =
                Some(parse_env("CT_INGEST_REQUESTS_PER_SECOND", &v)?);
        }
        if let Some(v) = get("CT_INGEST_COMMIT_EVERY") {
            self.defaults.commit_every = Some(parse_env("CT_INGEST_COMMIT_EVERY", &v)?);
        }
        if let Some(v) = get("CT_INGEST_INTERVAL_SECONDS") {
            self.schedule.interval_seconds = Some(parse_env("CT_INGEST_INTERVAL_SECONDS", &v)?);
            self.schedule.daily = None;
        }
        if let Some(v) = get("CT_INGEST_DAILY") {
            self.schedule.interval_seconds = None;
            self.schedule.daily = Some(v);
        }
        if let Some(v) = get("CT_INGEST_TIMEOUT_SECONDS") {
            self.http.timeout_seconds = parse_env("CT_INGEST_TIMEOUT_SECONDS", &v)?;
        }
        if let Some(v) = get("CT_INGEST_MAX_RETRIES") {
            self.http.max_retries = parse_env("CT_INGEST_MAX_RETRIES", &v)?;
        }
        if let Some(v) = get("CT_INGEST_MAX_RESPONSE_BYTES") {
            self.http.max_response_bytes = parse_env("CT_INGEST_MAX_RESPONSE_BYTES", &v)?;
        }
        Ok(())
    }

    /// Checks every value (database URL, limits, schedule, selectors, HTTP
    /// settings). The database URL is parsed, not connected to: a
    /// malformed one is an error here (its message shows it without the
    /// password), an unreachable database only when a run connects.
    pub fn validate(&self) -> Result<()> {
        ct_store::DatabaseUrl::parse(self.database_url())
            .map_err(|e| Error::Config(format!("database_url: {e}")))?;
        self.http.validate()?;
        self.schedule()?;
        let retry = &self.schedule;
        if retry.retry_seconds == Some(0) || retry.retry_max_seconds == Some(0) {
            return Err(Error::Config(
                "[schedule] retry_seconds and retry_max_seconds must be > 0".into(),
            ));
        }
        if retry.retry_seconds.unwrap_or(DEFAULT_RETRY_SECONDS)
            > retry.retry_max_seconds.unwrap_or(DEFAULT_RETRY_MAX_SECONDS)
        {
            return Err(Error::Config(
                "[schedule] retry_seconds must not exceed retry_max_seconds".into(),
            ));
        }
        resolve_limits(&LogLimits::default(), &self.defaults, "[defaults]")?;
        for (i, sel) in self.logs.iter().enumerate() {
            if sel.id.is_none() && sel.description.is_none() {
                return Err(Error::Config(format!(
                    "[[log]] #{}: needs `id` or `description`",
                    i + 1
                )));
            }
            if let Some(id) = &sel.id {
                parse_log_id(id)?;
            }
            if let Some(api) = &sel.api {
                parse_api(api)?;
            }
            resolve_limits(&LogLimits::default(), &sel.limits(), "[[log]]")?;
        }
        Ok(())
    }

    /// The database URL to use: `database_url`, else
    /// [`DEFAULT_DATABASE_URL`].
    pub fn database_url(&self) -> &str {
        self.database_url.as_deref().unwrap_or(DEFAULT_DATABASE_URL)
    }

    /// The schedule (`None` if neither key is set).
    pub fn schedule(&self) -> Result<Option<Schedule>> {
        Schedule::from_keys(
            self.schedule.interval_seconds,
            self.schedule.daily.as_deref(),
        )
        .map_err(|e| Error::Config(e.to_string()))
    }

    /// Picks the logs to ingest from `list`.
    ///
    /// * With `[[log]]` selectors: every log matching a selector (all of its
    ///   given criteria: `id`, `description` substring, `api`). A selector
    ///   that matches nothing is an error (a typo must not silently skip a
    ///   log). A log matched by several selectors takes the limits of the
    ///   first.
    /// * Without selectors: every log of the list except those `pending` or
    ///   `rejected`, and except temporal shards whose interval ended before
    ///   `now_s` (all their certificates have expired).
    ///
    /// A log ID listed under both APIs (RFC 6962 `logs` and `tiled_logs`) is
    /// ingested once: through the API the selector names, else through
    /// static-ct-api.
    pub fn select_logs(&self, list: &LogList, now_s: i64) -> Result<Vec<SelectedLog>> {
        let defaults = resolve_limits(&LogLimits::default(), &self.defaults, "[defaults]")?;
        let mut chosen: Vec<SelectedLog> = Vec::new();
        let mut seen: HashSet<LogId> = HashSet::new();
        // Static-ct-api entries first, so that they win for unspecific
        // selectors.
        let mut candidates: Vec<&LogInfo> = list.logs().map(|(_, l)| l).collect();
        candidates.sort_by_key(|l| !matches!(l.api, LogApi::StaticCt { .. }));
        if self.logs.is_empty() {
            for l in candidates {
                let skip_state = matches!(
                    l.state.as_ref().map(|s| s.kind),
                    Some(LogStateKind::Pending | LogStateKind::Rejected)
                );
                let expired_shard = l
                    .temporal_interval
                    .as_ref()
                    .is_some_and(|t| t.end_exclusive <= now_s);
                if skip_state || expired_shard || !seen.insert(l.log_id) {
                    continue;
                }
                chosen.push(SelectedLog {
                    info: l.clone(),
                    limits: defaults.clone(),
                });
            }
            return Ok(chosen);
        }
        for (i, sel) in self.logs.iter().enumerate() {
            let id = sel.id.as_deref().map(parse_log_id).transpose()?;
            let api = sel.api.as_deref().map(parse_api).transpose()?;
            let needle = sel.description.as_deref().map(str::to_lowercase);
            let limits = resolve_limits(&defaults, &sel.limits(), "[[log]]")?;
            let mut matched = 0;
            for l in &candidates {
                let kind = match l.api {
                    LogApi::Rfc6962 { .. } => LogKind::Rfc6962,
                    LogApi::StaticCt { .. } => LogKind::Static,
                };
                let ok = id.is_none_or(|id| id == l.log_id)
                    && api.is_none_or(|a| a == kind)
                    && needle
                        .as_deref()
                        .is_none_or(|n| l.description.to_lowercase().contains(n));
                if !ok {
                    continue;
                }
                matched += 1;
                if seen.insert(l.log_id) {
                    chosen.push(SelectedLog {
                        info: (*l).clone(),
                        limits: limits.clone(),
                    });
                }
            }
            if matched == 0 {
                return Err(Error::Config(format!(
                    "[[log]] #{} ({}) matches no log of the list",
                    i + 1,
                    sel.describe()
                )));
            }
        }
        Ok(chosen)
    }
}

impl LogSelector {
    fn limits(&self) -> LimitsConfig {
        LimitsConfig {
            batch_size: self.batch_size,
            concurrency: self.concurrency,
            requests_per_second: self.requests_per_second,
            commit_every: self.commit_every,
        }
    }

    fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(id) = &self.id {
            parts.push(format!("id {id}"));
        }
        if let Some(d) = &self.description {
            parts.push(format!("description {d:?}"));
        }
        if let Some(a) = &self.api {
            parts.push(format!("api {a}"));
        }
        parts.join(", ")
    }
}

/// Fills `over`'s missing values from `base` and checks the result.
fn resolve_limits(base: &LogLimits, over: &LimitsConfig, section: &str) -> Result<LogLimits> {
    let l = LogLimits {
        batch_size: over.batch_size.unwrap_or(base.batch_size),
        concurrency: over.concurrency.unwrap_or(base.concurrency),
        requests_per_second: match over.requests_per_second {
            Some(r) => (r != 0.0).then_some(r),
            None => base.requests_per_second,
        },
        commit_every: over.commit_every.unwrap_or(base.commit_every),
    };
    if l.batch_size == 0 || l.batch_size > 1 << 20 {
        return Err(Error::Config(format!(
            "{section} batch_size must be in 1..=1048576, got {}",
            l.batch_size
        )));
    }
    if l.concurrency == 0 || l.concurrency > 1024 {
        return Err(Error::Config(format!(
            "{section} concurrency must be in 1..=1024, got {}",
            l.concurrency
        )));
    }
    if let Some(r) = l.requests_per_second {
        if !(r.is_finite() && r > 0.0) {
            return Err(Error::Config(format!(
                "{section} requests_per_second must be positive (0: unlimited), got {r}"
            )));
        }
    }
    if l.commit_every == 0 {
        return Err(Error::Config(format!("{section} commit_every must be > 0")));
    }
    Ok(l)
}

/// A log ID in base64 (standard, as in the log list) or 64 hex digits.
pub fn parse_log_id(s: &str) -> Result<LogId> {
    let s = s.trim();
    if let Some(bytes) = ct_core::hex::decode_array(s) {
        return Ok(LogId::new(bytes));
    }
    let bytes = ct_core::sth::decode_base64(s, "log id", 32)
        .map_err(|e| Error::Config(format!("log id {s:?}: {e}")))?;
    LogId::from_slice(&bytes).map_err(|_| Error::Config(format!("log id {s:?} is not 32 bytes")))
}

fn parse_api(s: &str) -> Result<LogKind> {
    match s {
        "rfc6962" => Ok(LogKind::Rfc6962),
        "static" | "static-ct-api" | "tiled" => Ok(LogKind::Static),
        other => Err(Error::Config(format!(
            "api must be \"rfc6962\" or \"static\", got {other:?}"
        ))),
    }
}

fn parse_env<T: std::str::FromStr>(name: &str, v: &str) -> Result<T>
where
    T::Err: std::fmt::Display,
{
    v.parse()
        .map_err(|e| Error::Config(format!("{name}={v:?}: {e}")))
}

/// Reads a whole file, refusing more than `max` bytes.
fn read_capped(path: &Path, max: usize) -> Result<Vec<u8>> {
    use std::io::Read as _;
    let io = |error| Error::Io {
        path: path.display().to_string(),
        error,
    };
    let f = std::fs::File::open(path).map_err(io)?;
    let mut buf = Vec::new();
    f.take(max as u64 + 1).read_to_end(&mut buf).map_err(io)?;
    if buf.len() > max {
        return Err(ct_core::Error::TooLarge {
            what: "file",
            len: buf.len(),
            max,
        }
        .into());
    }
    Ok(buf)
}

/// Loads a log list v3 from a path, a `file://` URL or an `http(s)://`
/// URL (fetched with `http`, capped at [`MAX_LOG_LIST_SIZE`]).
pub async fn load_log_list(source: &str, http: &HttpClient) -> Result<LogList> {
    let body = if source.starts_with("http://") || source.starts_with("https://") {
        http.get(source, MAX_LOG_LIST_SIZE).await?.body
    } else {
        let path = source.strip_prefix("file://").unwrap_or(source);
        read_capped(Path::new(path), MAX_LOG_LIST_SIZE)?
    };
    Ok(LogList::from_json(&body)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn parses_full_example() {
        let c = Config::from_toml(
            r#"
            log_list = "/tmp/list.json"
            database_url = "sqlite://x.db?mode=rwc"
            [schedule]
            daily = "03:30"
            [defaults]
            batch_size = 1000
            concurrency = 8
            requests_per_second = 5.5
            [http]
            timeout_seconds = 5
            [[log]]
            description = "argon"
            api = "rfc6962"
            batch_size = 32
            [[log]]
            id = "0000000000000000000000000000000000000000000000000000000000000000"
            "#,
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!(
            c.schedule().unwrap(),
            Some(Schedule::Daily(3 * 3600 + 1800))
        );
        assert_eq!(c.logs.len(), 2);
        assert_eq!(c.logs[0].batch_size, Some(32));
        assert_eq!(c.http.timeout_seconds, 5.0);
        assert_eq!(c.http.max_retries, HttpSettings::default().max_retries);
        assert_eq!(c.database_url(), "sqlite://x.db?mode=rwc");
    }

    #[test]
    fn defaults_and_errors() {
        let c = Config::from_toml("").unwrap();
        c.validate().unwrap();
        assert_eq!(c.database_url(), DEFAULT_DATABASE_URL);
        assert_eq!(c.log_list, DEFAULT_LOG_LIST);
        assert_eq!(c.schedule().unwrap(), None);
        for bad in [
            "unknown_key = 1",
            "[defaults]\nbatch_size = 0",
            "[defaults]\nconcurrency = 0",
            "[defaults]\nrequests_per_second = -1.0",
            "[schedule]\ndaily = \"25:00\"",
            "[schedule]\ninterval_seconds = 5\ndaily = \"01:00\"",
            "[[log]]\nbatch_size = 3",
            "[[log]]\nid = \"zz\"",
            "[[log]]\ndescription = \"x\"\napi = \"grpc\"",
            "[http]\ntimeout_seconds = 0",
            "database_url = \"postgres//ct:pw@h/db\"",
            "database_url = \"mysql://h/db\"",
            "database_url = \"postgres://h:port/db\"",
            "[schedule]\nretry_seconds = 0",
            "[schedule]\nretry_seconds = 600",
        ] {
            let r = Config::from_toml(bad).and_then(|c| c.validate());
            assert!(r.is_err(), "{bad} accepted");
        }
    }

    /// A malformed database URL is a configuration error that names it
    /// without the password.
    #[test]
    fn malformed_database_url_is_a_redacted_config_error() {
        let c = Config::from_toml("database_url = \"postgres//ct:Sekr1t@db:5432/ct\"").unwrap();
        let e = c.validate().unwrap_err();
        assert!(matches!(e, Error::Config(_)), "{e:?}");
        let msg = e.to_string();
        assert!(msg.contains("postgres//ct:***@db:5432/ct"), "{msg}");
        assert!(!msg.contains("Sekr1t"), "{msg}");
        assert_eq!(msg.matches("configuration: ").count(), 1, "{msg}");
        let debug = format!("{c:?}");
        assert!(
            !debug.contains("Sekr1t") && debug.contains("ct:***@db"),
            "{debug}"
        );
    }

    #[test]
    fn retry_delays_double_up_to_the_cap() {
        let s = ScheduleConfig::default();
        let d: Vec<u64> = (1..=9).map(|n| s.retry_delay(n)).collect();
        assert_eq!(d, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        let s = ScheduleConfig {
            retry_seconds: Some(1),
            retry_max_seconds: Some(4),
            ..ScheduleConfig::default()
        };
        assert_eq!(s.retry_delay(1), 1);
        assert_eq!(s.retry_delay(3), 4);
        assert_eq!(s.retry_delay(u32::MAX), 4);
    }

    #[test]
    fn env_overrides() {
        let mut c = Config::from_toml("database_url = \"sqlite://a.db\"").unwrap();
        let env: HashMap<&str, &str> = [
            ("DATABASE_URL", "postgres://x/y"),
            ("CT_INGEST_BATCH_SIZE", "77"),
            ("CT_INGEST_INTERVAL_SECONDS", "30"),
            ("CT_INGEST_LOG_LIST", " /x.json "),
            ("CT_INGEST_CONCURRENCY", ""),
        ]
        .into_iter()
        .collect();
        c.apply_env(|k| env.get(k).map(|v| v.to_string())).unwrap();
        assert_eq!(c.database_url(), "postgres://x/y");
        assert_eq!(c.defaults.batch_size, Some(77));
        assert_eq!(c.defaults.concurrency, None);
        assert_eq!(c.log_list, "/x.json");
        assert_eq!(c.schedule().unwrap(), Some(Schedule::Interval(30)));
        let env2: HashMap<&str, &str> = [
            ("DATABASE_URL", "postgres://x/y"),
            ("CT_INGEST_DATABASE_URL", "sqlite://b.db"),
        ]
        .into_iter()
        .collect();
        c.apply_env(|k| env2.get(k).map(|v| v.to_string())).unwrap();
        assert_eq!(c.database_url(), "sqlite://b.db");
        let bad: HashMap<&str, &str> = [("CT_INGEST_BATCH_SIZE", "many")].into_iter().collect();
        assert!(c.apply_env(|k| bad.get(k).map(|v| v.to_string())).is_err());
    }

    #[test]
    fn log_ids() {
        let hex = "0e5794bcf3aea93e331b2c9907b3f790df9bc23d713225dd21a925ac61c54e21";
        let b64 = "DleUvPOuqT4zGyyZB7P3kN+bwj1xMiXdIaklrGHFTiE=";
        assert_eq!(parse_log_id(hex).unwrap(), parse_log_id(b64).unwrap());
        assert!(parse_log_id("AAAA").is_err());
    }

    #[test]
    fn schedule_keys() {
        let c = Config::from_toml("[schedule]\ninterval_seconds = 60\ndaily = \"01:30\"").unwrap();
        let e = c.schedule().unwrap_err().to_string();
        assert!(e.contains("not both"), "{e}");
        let c = Config::from_toml("[schedule]\ninterval_seconds = 600").unwrap();
        assert_eq!(c.schedule().unwrap(), Some(Schedule::Interval(600)));
    }
}
