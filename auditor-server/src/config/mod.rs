//! Configuration: a TOML file, then `AUDITOR_*` environment overrides,
//! then command-line flags (in the binary). Every key has a default, so an
//! empty file (or none) is a working embedded setup.
//!
//! ```toml
//! bind = "127.0.0.1:8080"
//! database_url = "sqlite://ct-ingest.db?mode=rwc"   # or postgres://…
//! epoch_dir = "epochs"
//!
//! [epoch]
//! filters = 768            # a (Prop. 6.2 default)
//! k = 8                    # bits per element (Prop. 6.2 default)
//! db_bits_target = 1073741824
//! param_set = "ypir-table1"
//! keep = 3                 # epochs kept on disk
//! grace_seconds = 900      # previous epoch stays answerable this long
//! max_memory_bytes = 0     # memory budget of the epochs (0: what the system reports)
//!
//! [schedule]               # when `serve` builds epochs itself
//! daily = "04:00"          # or interval_seconds = 86400; neither: never
//! reload_seconds = 30      # poll epoch_dir for epochs built elsewhere
//!
//! [limits]
//! max_concurrent_queries = 64
//! request_timeout_seconds = 30  # answering, after the body is read
//! body_timeout_ms = 20000  # receiving a query body
//! batch_window_ms = 2
//! max_batch = 8
//! threads = 0              # answer pool size; 0 = one per core
//! max_connections = 512    # at the cap, stop accepting until one closes
//! header_timeout_ms = 10000  # a request head, from its first byte
//! idle_timeout_ms = 30000  # keep-alive wait for the next request
//!
//! [reports]                # POST /v1/reports (crate::reports)
//! enabled = true
//! per_ip_per_hour = 10     # per client address (token bucket)
//! per_ip_burst = 3
//! global_per_minute = 60   # all clients together
//! max_concurrent = 2       # reports being verified at once
//!
//! [shard]                  # see ShardConfig and docs/operator.md
//! index = 0                # this server is shard `index` of `count`
//! count = 1                # database d belongs to shard d mod count
//! # urls = ["http://auditor-0:8080", …] or url_template = "http://auditor-{i}:8080"
//! # databases = [0, 3, 7]  # explicit list instead of the rule
//! # lists = [[0, 3, 7], [1, 2], …]  # every shard's list (epoch plan)
//! # epoch_spec = "specs/next.json"  # seeds shared by the shards (epoch plan)
//! # object_store = "s3://bucket/prefix"  # or file:///dir: epochs the coordinator prepares
//! ```

use std::path::{Path, PathBuf};

use pir_core::params::Params;
use serde::Deserialize;

use crate::error::{Error, Result};
pub use ct_core::civil::Schedule;

mod objstore_url;
mod reports;
mod shard;

#[cfg(not(feature = "s3"))]
pub(crate) use objstore_url::no_s3;
pub use objstore_url::{check_url, parse_url, Location, S3_SUPPORT};
pub use reports::ReportsConfig;
pub use shard::ShardConfig;

/// Largest `[limits] max_connections`.
pub const MAX_CONNECTIONS: usize = 1_000_000;

/// Largest configuration file accepted.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The whole configuration (its `Debug` redacts the database password).
#[derive(Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address to listen on.
    #[serde(default = "default_bind")]
    pub bind: String,
    /// Entry store (the one `ct-ingest` fills); `None`:
    /// [`ct_store::DEFAULT_DATABASE_URL`], the embedded SQLite default.
    #[serde(default)]
    pub database_url: Option<String>,
    /// Where epochs are persisted.
    #[serde(default = "default_epoch_dir")]
    pub epoch_dir: PathBuf,
    /// Epoch construction.
    #[serde(default)]
    pub epoch: EpochConfig,
    /// Scheduling of builds and reloads.
    #[serde(default)]
    pub schedule: ScheduleConfig,
    /// Request limits and batching.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// Which databases of each epoch this server holds.
    #[serde(default)]
    pub shard: ShardConfig,
    /// Misbehaviour reports (`POST /v1/reports`).
    #[serde(default)]
    pub reports: ReportsConfig,
}

/// `[epoch]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct EpochConfig {
    /// a: number of one-hash filters.
    pub filters: u32,
    /// k: filter bits per element.
    pub k: u32,
    /// Filters are grouped into PIR databases of at most this many bits
    /// (at least one filter each); see docs/architecture.md.
    pub db_bits_target: u64,
    /// pir-core parameter set by name.
    pub param_set: String,
    /// Allow the insecure test parameter sets (tests and demos only).
    pub allow_insecure_params: bool,
    /// Epochs kept on disk (≥ 2).
    pub keep: usize,
    /// Seconds the previous epoch stays answerable after a swap.
    pub grace_seconds: u64,
    /// Memory this server may use for its epochs' databases (bytes; 0: no
    /// budget beyond what `/proc/meminfo` and the cgroup report). A build
    /// or load that would not fit is refused (crate::memory).
    pub max_memory_bytes: u64,
}

impl Default for EpochConfig {
    fn default() -> Self {
        EpochConfig {
            filters: audit_proto::filter::DEFAULT_FILTERS,
            k: audit_proto::filter::DEFAULT_K,
            db_bits_target: 1 << 30,
            param_set: pir_core::params::TABLE1.name.to_owned(),
            allow_insecure_params: false,
            keep: 3,
            grace_seconds: 900,
            max_memory_bytes: 0,
        }
    }
}

/// `[schedule]`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ScheduleConfig {
    /// Build an epoch every this many seconds.
    pub interval_seconds: Option<u64>,
    /// Build an epoch daily at `HH:MM` UTC.
    pub daily: Option<String>,
    /// Poll the epoch directory for newer epochs this often (0: never).
    pub reload_seconds: u64,
    /// Build an epoch at start-up when the directory has none.
    pub build_if_missing: bool,
}

impl Default for ScheduleConfig {
    fn default() -> Self {
        ScheduleConfig {
            interval_seconds: None,
            daily: None,
            reload_seconds: 30,
            build_if_missing: true,
        }
    }
}

/// `[limits]`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Queries in flight; more get 503 + Retry-After.
    pub max_concurrent_queries: usize,
    /// Time limit for answering a query once its body is read; over it:
    /// 503 `timeout`.
    pub request_timeout_seconds: u64,
    /// Time limit for receiving a query's body after its request head; over
    /// it: 408 `body_timeout`. No answer slot is held meanwhile.
    pub body_timeout_ms: u64,
    /// How long the first query of a batch waits for company (§4.3).
    pub batch_window_ms: u64,
    /// Largest batch answered in one pass.
    pub max_batch: usize,
    /// Answer pool threads (0: one per core).
    pub threads: usize,
    /// Open connections at most; at the cap the server stops accepting
    /// until one closes (the rest wait in the listen backlog).
    pub max_connections: usize,
    /// A request head must be complete within this time of its first byte
    /// (on a new connection: of the connection opening).
    pub header_timeout_ms: u64,
    /// A keep-alive connection without a new request for this long after
    /// its last response is closed.
    pub idle_timeout_ms: u64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_concurrent_queries: 64,
            request_timeout_seconds: 30,
            body_timeout_ms: 20_000,
            batch_window_ms: 2,
            max_batch: 8,
            threads: 0,
            max_connections: 512,
            header_timeout_ms: 10_000,
            idle_timeout_ms: 30_000,
        }
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("bind", &self.bind)
            .field(
                "database_url",
                &self.database_url.as_deref().map(redact_url),
            )
            .field("epoch_dir", &self.epoch_dir)
            .field("epoch", &self.epoch)
            .field("schedule", &self.schedule)
            .field("limits", &self.limits)
            .field("shard", &self.shard)
            .field("reports", &self.reports)
            .finish()
    }
}

/// The one redaction of database URLs, shared with ct-ingest: the userinfo
/// password (malformed URLs and unencoded `#`, `/` in the password
/// included) and secret query parameters (`password=`, …) become `***`.
pub use ct_store::{redact_secrets, redact_url};

/// Checks that `url` is a database URL the entry store can open, without
/// connecting ([`ct_store::DatabaseUrl::parse`]; the URL redacted in the
/// error).
pub fn check_database_url(url: &str) -> Result<()> {
    ct_store::DatabaseUrl::parse(url)
        .map(drop)
        .map_err(|e| Error::Config(redact_secrets(&format!("database_url: {e}"), url)))
}

fn default_bind() -> String {
    "127.0.0.1:8080".to_owned()
}

fn default_epoch_dir() -> PathBuf {
    PathBuf::from("epochs")
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: default_bind(),
            database_url: None,
            epoch_dir: default_epoch_dir(),
            epoch: EpochConfig::default(),
            schedule: ScheduleConfig::default(),
            limits: LimitsConfig::default(),
            shard: ShardConfig::default(),
            reports: ReportsConfig::default(),
        }
    }
}

impl Config {
    /// Reads `path` (if given), applies the environment, validates.
    pub fn load(path: Option<&Path>) -> Result<Config> {
        let mut config = match path {
            Some(p) => {
                use std::io::Read as _;
                let mut text = String::new();
                std::fs::File::open(p)
                    .map_err(crate::error::io(p))?
                    .take(MAX_CONFIG_BYTES + 1)
                    .read_to_string(&mut text)
                    .map_err(crate::error::io(p))?;
                if text.len() as u64 > MAX_CONFIG_BYTES {
                    return Err(Error::Config(format!("{} is over 1 MiB", p.display())));
                }
                Config::from_toml(&text)?
            }
            None => Config::default(),
        };
        config.apply_env(|k| std::env::var(k).ok())?;
        config.validate()?;
        Ok(config)
    }

    /// Parses TOML (no environment, no validation).
    pub fn from_toml(text: &str) -> Result<Config> {
        Ok(toml::from_str(text)?)
    }

    /// Applies `AUDITOR_*` overrides (and `DATABASE_URL`) read via `env`;
    /// empty values are ignored.
    pub fn apply_env<F: Fn(&str) -> Option<String>>(&mut self, env: F) -> Result<()> {
        let get = |k: &str| {
            env(k)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        fn num<T: std::str::FromStr>(k: &str, v: &str) -> Result<T>
        where
            T::Err: std::fmt::Display,
        {
            v.parse()
                .map_err(|e| Error::Config(format!("{k}={v:?}: {e}")))
        }
        if let Some(v) = get("AUDITOR_BIND") {
            self.bind = v;
        }
        if let Some(v) = get("AUDITOR_DATABASE_URL").or_else(|| get("DATABASE_URL")) {
            self.database_url = Some(v);
        }
        if let Some(v) = get("AUDITOR_EPOCH_DIR") {
            self.epoch_dir = PathBuf::from(v);
        }
        if let Some(v) = get("AUDITOR_FILTERS") {
            self.epoch.filters = num("AUDITOR_FILTERS", &v)?;
        }
        if let Some(v) = get("AUDITOR_K") {
            self.epoch.k = num("AUDITOR_K", &v)?;
        }
        if let Some(v) = get("AUDITOR_DB_BITS_TARGET") {
            self.epoch.db_bits_target = num("AUDITOR_DB_BITS_TARGET", &v)?;
        }
        if let Some(v) = get("AUDITOR_PARAM_SET") {
            self.epoch.param_set = v;
        }
        if let Some(v) = get("AUDITOR_MAX_MEMORY_BYTES") {
            self.epoch.max_memory_bytes = num("AUDITOR_MAX_MEMORY_BYTES", &v)?;
        }
        if let Some(v) = get("AUDITOR_GRACE_SECONDS") {
            self.epoch.grace_seconds = num("AUDITOR_GRACE_SECONDS", &v)?;
        }
        if let Some(v) = get("AUDITOR_DAILY") {
            self.schedule.daily = Some(v);
            self.schedule.interval_seconds = None;
        }
        if let Some(v) = get("AUDITOR_INTERVAL_SECONDS") {
            self.schedule.interval_seconds = Some(num("AUDITOR_INTERVAL_SECONDS", &v)?);
            self.schedule.daily = None;
        }
        if let Some(v) = get("AUDITOR_RELOAD_SECONDS") {
            self.schedule.reload_seconds = num("AUDITOR_RELOAD_SECONDS", &v)?;
        }
        if let Some(v) = get("AUDITOR_MAX_CONCURRENT_QUERIES") {
            self.limits.max_concurrent_queries = num("AUDITOR_MAX_CONCURRENT_QUERIES", &v)?;
        }
        if let Some(v) = get("AUDITOR_REQUEST_TIMEOUT_SECONDS") {
            self.limits.request_timeout_seconds = num("AUDITOR_REQUEST_TIMEOUT_SECONDS", &v)?;
        }
        if let Some(v) = get("AUDITOR_BODY_TIMEOUT_MS") {
            self.limits.body_timeout_ms = num("AUDITOR_BODY_TIMEOUT_MS", &v)?;
        }
        if let Some(v) = get("AUDITOR_BATCH_WINDOW_MS") {
            self.limits.batch_window_ms = num("AUDITOR_BATCH_WINDOW_MS", &v)?;
        }
        if let Some(v) = get("AUDITOR_MAX_BATCH") {
            self.limits.max_batch = num("AUDITOR_MAX_BATCH", &v)?;
        }
        if let Some(v) = get("AUDITOR_THREADS") {
            self.limits.threads = num("AUDITOR_THREADS", &v)?;
        }
        if let Some(v) = get("AUDITOR_MAX_CONNECTIONS") {
            self.limits.max_connections = num("AUDITOR_MAX_CONNECTIONS", &v)?;
        }
        if let Some(v) = get("AUDITOR_HEADER_TIMEOUT_MS") {
            self.limits.header_timeout_ms = num("AUDITOR_HEADER_TIMEOUT_MS", &v)?;
        }
        if let Some(v) = get("AUDITOR_IDLE_TIMEOUT_MS") {
            self.limits.idle_timeout_ms = num("AUDITOR_IDLE_TIMEOUT_MS", &v)?;
        }
        self.shard.apply_env(&get)?;
        Ok(())
    }

    /// Checks every value.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(Error::Config(m.to_owned()));
        self.bind
            .parse::<std::net::SocketAddr>()
            .map_err(|e| Error::Config(format!("bind = {:?}: {e}", self.bind)))?;
        let e = &self.epoch;
        if e.filters == 0 || e.filters > audit_proto::filter::MAX_FILTERS {
            return bad("[epoch] filters must be in 1..=4096");
        }
        if e.k == 0 || e.k > audit_proto::filter::MAX_K {
            return bad("[epoch] k must be in 1..=64");
        }
        if e.db_bits_target < 8 {
            return bad("[epoch] db_bits_target must be ≥ 8");
        }
        if e.keep < 2 {
            return bad("[epoch] keep must be ≥ 2 (the current and the previous epoch)");
        }
        self.params()?;
        self.schedule()?;
        check_database_url(self.database_url())?;
        let l = &self.limits;
        if l.max_concurrent_queries == 0 || l.max_batch == 0 || l.max_batch > 64 {
            return bad("[limits] max_concurrent_queries ≥ 1 and max_batch in 1..=64");
        }
        if l.request_timeout_seconds == 0 || l.batch_window_ms > 1000 {
            return bad("[limits] request_timeout_seconds ≥ 1 and batch_window_ms ≤ 1000");
        }
        if l.body_timeout_ms == 0 || l.header_timeout_ms == 0 || l.idle_timeout_ms == 0 {
            return bad(
                "[limits] body_timeout_ms, header_timeout_ms and idle_timeout_ms must be ≥ 1",
            );
        }
        if l.max_connections == 0 || l.max_connections > MAX_CONNECTIONS {
            return bad("[limits] max_connections must be in 1..=1000000");
        }
        self.shard.validate(self.schedule()?.is_some())?;
        self.reports.validate()?;
        Ok(())
    }

    /// The PIR parameter set named by `[epoch] param_set`.
    pub fn params(&self) -> Result<Params> {
        let p = pir_core::params::ALL
            .iter()
            .find(|p| p.name == self.epoch.param_set)
            .copied()
            .ok_or_else(|| {
                Error::Config(format!(
                    "[epoch] param_set {:?} unknown (known: {})",
                    self.epoch.param_set,
                    pir_core::params::ALL.map(|p| p.name).join(", ")
                ))
            })?;
        if !p.secure && !self.epoch.allow_insecure_params {
            return Err(Error::Config(format!(
                "[epoch] param_set {:?} is an insecure test set; set allow_insecure_params = true to use it",
                p.name
            )));
        }
        Ok(p)
    }

    /// When `serve` builds epochs (`None`: never; builds come from
    /// `auditor-server build-epoch` and are picked up by reload).
    pub fn schedule(&self) -> Result<Option<Schedule>> {
        Schedule::from_keys(
            self.schedule.interval_seconds,
            self.schedule.daily.as_deref(),
        )
        .map_err(|e| Error::Config(e.to_string()))
    }

    /// The entry store URL.
    pub fn database_url(&self) -> &str {
        self.database_url
            .as_deref()
            .unwrap_or(ct_store::DEFAULT_DATABASE_URL)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_secure() {
        let c = Config::from_toml("").unwrap();
        c.validate().unwrap();
        assert_eq!(c.epoch.filters, 768);
        assert_eq!(c.epoch.k, 8);
        assert!(c.params().unwrap().secure);
        assert_eq!(c.schedule().unwrap(), None);
    }

    #[test]
    fn env_overrides_file() {
        let mut c =
            Config::from_toml("bind = \"0.0.0.0:1\"\n[schedule]\ndaily = \"03:00\"").unwrap();
        let env = |k: &str| match k {
            "AUDITOR_BIND" => Some("127.0.0.1:9".to_owned()),
            "DATABASE_URL" => Some("postgres://x/y".to_owned()),
            "AUDITOR_INTERVAL_SECONDS" => Some("60".to_owned()),
            "AUDITOR_MAX_BATCH" => Some(" ".to_owned()),
            _ => None,
        };
        c.apply_env(env).unwrap();
        c.validate().unwrap();
        assert_eq!(c.bind, "127.0.0.1:9");
        assert_eq!(c.database_url(), "postgres://x/y");
        assert_eq!(c.schedule().unwrap(), Some(Schedule::Interval(60)));
        assert_eq!(c.limits.max_batch, 8);
        let mut c = Config::default();
        assert!(c
            .apply_env(|k| (k == "AUDITOR_K").then(|| "eight".to_owned()))
            .is_err());
    }

    #[test]
    fn rejects_bad_values() {
        for text in [
            "bind = \"nowhere\"",
            "[epoch]\nfilters = 0",
            "[epoch]\nkeep = 1",
            "[epoch]\nparam_set = \"toy-insecure-d64\"",
            "[epoch]\nparam_set = \"nope\"",
            "[schedule]\ndaily = \"25:00\"",
            "[schedule]\ndaily = \"01:00\"\ninterval_seconds = 5",
            "[limits]\nmax_batch = 0",
            "[limits]\nmax_connections = 0",
            "[limits]\nidle_timeout_ms = 0",
            "[limits]\nbody_timeout_ms = 0",
        ] {
            let c = Config::from_toml(text).unwrap();
            assert!(c.validate().is_err(), "{text}");
        }
        assert!(Config::from_toml("unknown = 1").is_err());
        let e = Config::from_toml("[schedule]\ndaily = \"25:00\"")
            .unwrap()
            .validate()
            .unwrap_err()
            .to_string();
        assert_eq!(
            e.matches("configuration").count(),
            1,
            "repeated prefix: {e}"
        );
        let ok = Config::from_toml(
            "[epoch]\nparam_set = \"toy-insecure-d64\"\nallow_insecure_params = true",
        )
        .unwrap();
        ok.validate().unwrap();
    }

    #[test]
    fn schedule_keys() {
        let c = Config::from_toml("[schedule]\ndaily = \" 01:30 \"").unwrap();
        assert_eq!(c.schedule().unwrap(), Some(Schedule::Daily(5_400)));
        let c = Config::from_toml("[schedule]\ndaily = \"24:00\"").unwrap();
        let e = c.schedule().unwrap_err().to_string();
        assert!(e.contains("HH:MM"), "{e}");
    }

    #[test]
    fn database_urls_are_checked_and_redacted() {
        for ok in [
            "sqlite://ct-ingest.db?mode=rwc",
            "sqlite::memory:",
            "postgres://ct:pw@db:5432/ct",
            "postgresql://localhost/ct",
        ] {
            check_database_url(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for (bad, secret) in [
            ("postgres://user:hunter2@host:notaport/db", "hunter2"),
            ("mysql://root:s3cret@host/db", "s3cret"),
            ("sqlite://x.db?mode=sideways", ""),
            ("ct-ingest.db", ""),
        ] {
            let c = Config {
                database_url: Some(bad.to_owned()),
                ..Config::default()
            };
            let e = c.validate().expect_err(bad).to_string();
            assert!(e.contains("database_url"), "{e}");
            if !secret.is_empty() {
                assert!(!e.contains(secret), "{e}");
                assert!(e.contains(":***@"), "{e}");
                assert!(!format!("{c:?}").contains(secret));
            }
        }
        assert_eq!(
            redact_url("postgres://ct:pa:ss@db:5432/ct?sslmode=require"),
            "postgres://ct:***@db:5432/ct?sslmode=require"
        );
        assert_eq!(redact_url("postgres://ct@db/ct"), "postgres://ct@db/ct");
        assert_eq!(redact_url("sqlite://a@b.db"), "sqlite://a@b.db");
        assert_eq!(
            redact_secrets("failed for ct:pw1@db", "postgres://ct:pw1@db/x"),
            "failed for ct:***@db"
        );
        // What the parser reads as the end of the authority, and a
        // malformed scheme: still redacted.
        for (url, secret) in [
            ("postgres://ct:a#b@db/ct", "a#b"),
            ("postgres://ct:a/b@db/ct", "a/b"),
            ("postgres//ct:s3cret@db/ct", "s3cret"),
            ("postgres://db/ct?password=s3cret", "s3cret"),
        ] {
            assert!(!redact_url(url).contains(secret), "{url}");
            if let Err(e) = check_database_url(url) {
                assert!(!e.to_string().contains(secret), "{e}");
            }
        }
    }
}
