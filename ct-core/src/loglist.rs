//! Chrome's CT log list, version 3 (`log_list.json`, schema
//! `log_list_schema.json` under gstatic.com/ct/log_list/v3/).
//!
//! ```text
//! { "version": "...", "log_list_timestamp": "RFC 3339",
//!   "operators": [ { "name": "...", "email": [...],
//!       "logs":       [ { "description", "log_id" (base64), "key" (base64 SPKI),
//!                         "url", "mmd", "state", "temporal_interval", "log_type" } ],
//!       "tiled_logs": [ { same, but "submission_url" and "monitoring_url"
//!                         instead of "url" } ] } ] }
//! ```
//!
//! `state` is an object with exactly one of `pending`, `qualified`, `usable`,
//! `readonly` (which adds `final_tree_head`), `retired`, `rejected`, each
//! holding a `timestamp`. `temporal_interval` has `start_inclusive` and
//! `end_exclusive`. Unknown fields are ignored. Parsing checks every
//! `log_id` against `SHA-256(key)` (RFC 6962 §3.2) and that every key is a
//! supported [`LogKey`].

use serde::Deserialize;

use crate::civil;
use crate::error::{Error, Result};
use crate::ids::LogId;
use crate::merkle::{Hash, HASH_LEN};
use crate::sth::{decode_base64, LogKey, MAX_SPKI_LEN};

/// Largest log list accepted (the real one is a few hundred KiB).
pub const MAX_LOG_LIST_SIZE: usize = 16 << 20;

/// A parsed and checked log list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogList {
    /// The list's `version`, if present.
    pub version: Option<String>,
    /// `log_list_timestamp` in Unix seconds, if present.
    pub log_list_timestamp: Option<i64>,
    /// The operators and their logs.
    pub operators: Vec<Operator>,
}

/// A log operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operator {
    /// The operator's name.
    pub name: String,
    /// Contact addresses.
    pub email: Vec<String>,
    /// RFC 6962 logs (`logs`) followed by static-ct-api logs (`tiled_logs`).
    pub logs: Vec<LogInfo>,
}

/// How a log is reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogApi {
    /// An RFC 6962 log with one base URL.
    Rfc6962 {
        /// Base URL of the RFC 6962 API.
        url: String,
    },
    /// A c2sp.org/static-ct-api log.
    StaticCt {
        /// Prefix of the RFC 6962 submission endpoints; its schema-less,
        /// slash-less form is the checkpoint origin.
        submission_url: String,
        /// Prefix of the static monitoring assets (checkpoint, tiles).
        monitoring_url: String,
    },
}

/// One log of the list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogInfo {
    /// Human-readable description.
    pub description: String,
    /// The log ID, checked to equal `SHA-256(key)`.
    pub log_id: LogId,
    /// The log's public key.
    pub key: LogKey,
    /// Endpoints.
    pub api: LogApi,
    /// Maximum merge delay, in seconds.
    pub mmd: u64,
    /// Current state, if the list gives one.
    pub state: Option<LogState>,
    /// The accepted `notAfter` range, for temporally sharded logs.
    pub temporal_interval: Option<TemporalInterval>,
    /// `log_type` ("prod", "test"), if present.
    pub log_type: Option<String>,
}

impl LogInfo {
    /// The static-ct-api checkpoint origin: the submission URL without its
    /// scheme and trailing slashes (c2sp.org/static-ct-api "Checkpoints").
    /// `None` for RFC 6962 logs.
    pub fn checkpoint_origin(&self) -> Option<String> {
        match &self.api {
            LogApi::StaticCt { submission_url, .. } => {
                let s = submission_url
                    .split_once("://")
                    .map_or(submission_url.as_str(), |(_, rest)| rest);
                Some(s.trim_end_matches('/').to_owned())
            }
            LogApi::Rfc6962 { .. } => None,
        }
    }
}

/// A log's state in the list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LogStateKind {
    /// `pending`.
    Pending,
    /// `qualified`.
    Qualified,
    /// `usable`.
    Usable,
    /// `readonly`.
    ReadOnly,
    /// `retired`.
    Retired,
    /// `rejected`.
    Rejected,
}

/// A state and when the log entered it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogState {
    /// Which state.
    pub kind: LogStateKind,
    /// When the log entered it, in Unix seconds.
    pub timestamp: i64,
    /// For `readonly` logs: the frozen `(tree_size, root_hash)`.
    pub final_tree_head: Option<(u64, Hash)>,
}

/// `[start_inclusive, end_exclusive)` in Unix seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TemporalInterval {
    /// First accepted `notAfter`.
    pub start_inclusive: i64,
    /// First rejected `notAfter` after the interval.
    pub end_exclusive: i64,
}

impl TemporalInterval {
    /// True if a certificate expiring at `not_after` belongs in this shard.
    pub fn contains(&self, not_after: i64) -> bool {
        self.start_inclusive <= not_after && not_after < self.end_exclusive
    }
}

// --- serde shapes -----------------------------------------------------------

#[derive(Deserialize)]
struct RawList {
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    log_list_timestamp: Option<String>,
    operators: Vec<RawOperator>,
}

#[derive(Deserialize)]
struct RawOperator {
    name: String,
    #[serde(default)]
    email: Vec<String>,
    #[serde(default)]
    logs: Vec<RawLog>,
    #[serde(default)]
    tiled_logs: Vec<RawLog>,
}

#[derive(Deserialize)]
struct RawLog {
    #[serde(default)]
    description: String,
    log_id: String,
    key: String,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    submission_url: Option<String>,
    #[serde(default)]
    monitoring_url: Option<String>,
    mmd: u64,
    #[serde(default)]
    state: Option<RawStates>,
    #[serde(default)]
    temporal_interval: Option<RawInterval>,
    #[serde(default)]
    log_type: Option<String>,
}

#[derive(Deserialize)]
struct RawStates {
    #[serde(default)]
    pending: Option<RawState>,
    #[serde(default)]
    qualified: Option<RawState>,
    #[serde(default)]
    usable: Option<RawState>,
    #[serde(default)]
    readonly: Option<RawState>,
    #[serde(default)]
    retired: Option<RawState>,
    #[serde(default)]
    rejected: Option<RawState>,
}

#[derive(Deserialize)]
struct RawState {
    timestamp: String,
    #[serde(default)]
    final_tree_head: Option<RawTreeHead>,
}

#[derive(Deserialize)]
struct RawTreeHead {
    sha256_root_hash: String,
    tree_size: u64,
}

#[derive(Deserialize)]
struct RawInterval {
    start_inclusive: String,
    end_exclusive: String,
}

impl LogList {
    /// Parses and checks a v3 log list (`log_list.json` or
    /// `all_logs_list.json`).
    pub fn from_json(body: &[u8]) -> Result<Self> {
        if body.len() > MAX_LOG_LIST_SIZE {
            return Err(Error::TooLarge {
                what: "log list",
                len: body.len(),
                max: MAX_LOG_LIST_SIZE,
            });
        }
        let raw: RawList = serde_json::from_slice(body).map_err(|source| Error::Json {
            what: "log list",
            source,
        })?;
        let log_list_timestamp = raw
            .log_list_timestamp
            .as_deref()
            .map(parse_rfc3339)
            .transpose()?;
        let mut operators = Vec::with_capacity(raw.operators.len());
        for op in raw.operators {
            let mut logs = Vec::with_capacity(op.logs.len() + op.tiled_logs.len());
            for l in op.logs {
                logs.push(convert_log(l, false)?);
            }
            for l in op.tiled_logs {
                logs.push(convert_log(l, true)?);
            }
            operators.push(Operator {
                name: op.name,
                email: op.email,
                logs,
            });
        }
        Ok(LogList {
            version: raw.version,
            log_list_timestamp,
            operators,
        })
    }

    /// Every log with its operator.
    pub fn logs(&self) -> impl Iterator<Item = (&Operator, &LogInfo)> + '_ {
        self.operators
            .iter()
            .flat_map(|op| op.logs.iter().map(move |l| (op, l)))
    }

    /// The log with this log ID, if listed.
    pub fn find_by_log_id(&self, log_id: &LogId) -> Option<&LogInfo> {
        self.logs().map(|(_, l)| l).find(|l| &l.log_id == log_id)
    }
}

fn convert_log(l: RawLog, tiled: bool) -> Result<LogInfo> {
    let log_id_bytes = decode_base64(&l.log_id, "log list log_id", HASH_LEN)?;
    let log_id = LogId::from_slice(&log_id_bytes).map_err(|_| {
        Error::malformed(
            "log list log_id",
            format!("{} bytes for {:?}", log_id_bytes.len(), l.description),
        )
    })?;
    let key_der = decode_base64(&l.key, "log list key", MAX_SPKI_LEN)?;
    let key = LogKey::from_spki_der(&key_der)?;
    if key.log_id() != log_id {
        return Err(Error::LogIdMismatch {
            what: format!("log list entry {:?}", l.description),
        });
    }
    let api = if tiled {
        match (l.submission_url, l.monitoring_url) {
            (Some(submission_url), Some(monitoring_url)) => LogApi::StaticCt {
                submission_url,
                monitoring_url,
            },
            _ => {
                return Err(Error::malformed(
                    "log list tiled log",
                    format!("{:?} lacks submission_url or monitoring_url", l.description),
                ))
            }
        }
    } else {
        let url = l.url.ok_or_else(|| {
            Error::malformed("log list log", format!("{:?} lacks url", l.description))
        })?;
        LogApi::Rfc6962 { url }
    };
    let state = l.state.map(convert_state).transpose()?;
    let temporal_interval = l
        .temporal_interval
        .map(|t| -> Result<TemporalInterval> {
            let i = TemporalInterval {
                start_inclusive: parse_rfc3339(&t.start_inclusive)?,
                end_exclusive: parse_rfc3339(&t.end_exclusive)?,
            };
            if i.end_exclusive <= i.start_inclusive {
                return Err(Error::malformed(
                    "log list temporal_interval",
                    "end_exclusive is not after start_inclusive",
                ));
            }
            Ok(i)
        })
        .transpose()?;
    Ok(LogInfo {
        description: l.description,
        log_id,
        key,
        api,
        mmd: l.mmd,
        state,
        temporal_interval,
        log_type: l.log_type,
    })
}

fn convert_state(s: RawStates) -> Result<LogState> {
    let candidates = [
        (LogStateKind::Pending, s.pending),
        (LogStateKind::Qualified, s.qualified),
        (LogStateKind::Usable, s.usable),
        (LogStateKind::ReadOnly, s.readonly),
        (LogStateKind::Retired, s.retired),
        (LogStateKind::Rejected, s.rejected),
    ];
    let mut found: Option<LogState> = None;
    for (kind, raw) in candidates {
        let Some(raw) = raw else { continue };
        if found.is_some() {
            return Err(Error::malformed("log list state", "more than one state"));
        }
        let final_tree_head = match raw.final_tree_head {
            Some(th) => {
                let root = decode_base64(&th.sha256_root_hash, "final_tree_head root", HASH_LEN)?;
                let root: Hash = root.as_slice().try_into().map_err(|_| {
                    Error::malformed("final_tree_head", "root hash is not 32 bytes")
                })?;
                Some((th.tree_size, root))
            }
            None => None,
        };
        found = Some(LogState {
            kind,
            timestamp: parse_rfc3339(&raw.timestamp)?,
            final_tree_head,
        });
    }
    found.ok_or_else(|| Error::malformed("log list state", "no known state"))
}

/// Parses an RFC 3339 `date-time` (`2024-11-01T00:00:00Z`, optionally with
/// fractional seconds, which are truncated, and a numeric offset) into Unix
/// seconds.
pub fn parse_rfc3339(s: &str) -> Result<i64> {
    const WHAT: &str = "RFC 3339 timestamp";
    let bad = || Error::malformed(WHAT, format!("{s:?}"));
    if s.len() > 64 || !s.is_ascii() {
        return Err(bad());
    }
    let b = s.as_bytes();
    let num = |range: std::ops::Range<usize>| -> Result<i64> {
        let part = b.get(range).ok_or_else(bad)?;
        if part.is_empty() || !part.iter().all(u8::is_ascii_digit) {
            return Err(bad());
        }
        Ok(part
            .iter()
            .fold(0i64, |acc, &d| acc * 10 + i64::from(d - b'0')))
    };
    let sep = |i: usize, allowed: &[u8]| -> Result<()> {
        match b.get(i) {
            Some(c) if allowed.contains(c) => Ok(()),
            _ => Err(bad()),
        }
    };
    let year = num(0..4)?;
    sep(4, b"-")?;
    let month = num(5..7)?;
    sep(7, b"-")?;
    let day = num(8..10)?;
    sep(10, b"Tt ")?;
    let hour = num(11..13)?;
    sep(13, b":")?;
    let minute = num(14..16)?;
    sep(16, b":")?;
    let second = num(17..19)?;
    let mut i = 19;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return Err(bad());
        }
    }
    let offset = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(sign @ (b'+' | b'-')) if i + 6 == b.len() => {
            let oh = num(i + 1..i + 3)?;
            sep(i + 3, b":")?;
            let om = num(i + 4..i + 6)?;
            if oh > 23 || om > 59 {
                return Err(bad());
            }
            let o = oh * 3600 + om * 60;
            if *sign == b'+' {
                o
            } else {
                -o
            }
        }
        _ => return Err(bad()),
    };
    if !(1..=12).contains(&month)
        || day < 1
        || day > i64::from(civil::days_in_month(year, month as u32))
        || hour > 23
        || minute > 59
        || second > 60
    {
        return Err(bad());
    }
    // Month and day were range-checked above.
    let days = civil::days_from_civil(year, month as u32, day as u32);
    Ok(days * 86_400 + hour * 3600 + minute * 60 + second - offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z").unwrap(), 0);
        assert_eq!(
            parse_rfc3339("2024-11-01T00:00:00Z").unwrap(),
            1_730_419_200
        );
        assert_eq!(
            parse_rfc3339("2000-02-29T12:34:56.789Z").unwrap(),
            951_827_696
        );
        assert_eq!(
            parse_rfc3339("2000-02-29T14:34:56+02:00").unwrap(),
            951_827_696
        );
        assert_eq!(
            parse_rfc3339("2000-02-29T10:04:56-02:30").unwrap(),
            951_827_696
        );
        assert_eq!(parse_rfc3339("1969-12-31T23:59:59Z").unwrap(), -1);
        assert_eq!(
            parse_rfc3339("2027-01-01T00:00:00Z").unwrap(),
            1_798_761_600
        );
        for bad in [
            "",
            "2024-11-01",
            "2024-11-01T00:00:00",
            "2024-13-01T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2024-11-01T24:00:00Z",
            "2024-11-01T00:00:00.Z",
            "2024-11-01T00:00:00Zjunk",
            "2024-11-01T00:00:00+0100",
            "2024-1-01T00:00:00Z",
            "２０２４-11-01T00:00:00Z",
        ] {
            assert!(parse_rfc3339(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn temporal_interval_bounds() {
        let t = TemporalInterval {
            start_inclusive: 10,
            end_exclusive: 20,
        };
        assert!(t.contains(10));
        assert!(t.contains(19));
        assert!(!t.contains(20));
        assert!(!t.contains(9));
    }
}
