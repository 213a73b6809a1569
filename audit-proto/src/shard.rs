//! Which base URL serves which database of an epoch (`docs/protocol.md`
//! §Shards).
//!
//! An epoch's databases can be split across shards, each a server (or a
//! set of replicas behind one URL) that holds and answers only its own
//! databases. The manifest carries the split compactly, whatever the
//! number of databases:
//!
//! * `{"rule": "mod", "urls": [u0, …, u(n−1)]}`: database d is served by
//!   shard `d mod n` ([`mod_shard`]), at `urls[d mod n]`;
//! * `{"rule": "list", "urls": [...], "dbs": [[0, 3], [1, 2], …]}`:
//!   shard i serves exactly the databases `dbs[i]` (each database in
//!   exactly one list, no list empty).
//!
//! A manifest without a map is served by one server: the one it was
//! fetched from. Clients route each query with [`ShardMap::url_of`].
//!
//! URLs are base URLs (the API paths are appended): `http` or `https`,
//! printable ASCII without spaces, at most [`MAX_URL_BYTES`] bytes, no
//! query, fragment or trailing slash.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Largest number of shards.
pub const MAX_SHARDS: usize = crate::api::MAX_DBS;
/// Longest shard base URL (bytes).
pub const MAX_URL_BYTES: usize = 256;

/// The deterministic rule: database `db` belongs to shard `db mod count`
/// (round-robin: the databases of an epoch are near-identical in size, so
/// this balances memory and load). `count` must be ≥ 1.
pub fn mod_shard(db: u32, count: u32) -> u32 {
    db % count.max(1)
}

/// How databases are assigned to shards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShardRule {
    /// Database d → shard `d mod n` ([`mod_shard`]).
    Mod,
    /// Shard i serves the databases of list i.
    List(Vec<Vec<u32>>),
}

/// The shard map of an epoch: one base URL per shard, in shard order, and
/// the assignment rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "ShardMapWire", into = "ShardMapWire")]
pub struct ShardMap {
    /// Base URL of shard i.
    pub urls: Vec<String>,
    /// Which databases each shard serves.
    pub rule: ShardRule,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShardMapWire {
    rule: String,
    urls: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dbs: Option<Vec<Vec<u32>>>,
}

impl TryFrom<ShardMapWire> for ShardMap {
    type Error = Error;
    fn try_from(w: ShardMapWire) -> Result<ShardMap> {
        let rule = match (w.rule.as_str(), w.dbs) {
            ("mod", None) => ShardRule::Mod,
            ("list", Some(lists)) => ShardRule::List(lists),
            ("mod", Some(_)) => return Err(Error::Invalid("shards: rule mod takes no dbs".into())),
            ("list", None) => return Err(Error::Invalid("shards: rule list needs dbs".into())),
            (other, _) => {
                return Err(Error::Invalid(format!(
                    "shards: unknown rule {other:?} (mod or list)"
                )))
            }
        };
        let map = ShardMap { urls: w.urls, rule };
        map.check_urls()?;
        Ok(map)
    }
}

impl From<ShardMap> for ShardMapWire {
    fn from(m: ShardMap) -> ShardMapWire {
        let (rule, dbs) = match m.rule {
            ShardRule::Mod => ("mod", None),
            ShardRule::List(l) => ("list", Some(l)),
        };
        ShardMapWire {
            rule: rule.to_owned(),
            urls: m.urls,
            dbs,
        }
    }
}

/// Checks one shard base URL (module docs).
pub fn check_url(url: &str) -> Result<()> {
    let bad = |why: &str| Err(Error::Invalid(format!("shard URL {url:?}: {why}")));
    if url.len() > MAX_URL_BYTES {
        return Err(Error::Invalid(format!(
            "shard URL of {} bytes (at most {MAX_URL_BYTES})",
            url.len()
        )));
    }
    let rest = match url.split_once("://") {
        Some(("http", rest)) | Some(("https", rest)) => rest,
        _ => return bad("not http:// or https://"),
    };
    if !url.bytes().all(|b| b.is_ascii_graphic()) {
        return bad("only printable ASCII without spaces");
    }
    if url.contains(['?', '#']) || url.ends_with('/') {
        return bad("a base URL has no query, fragment or trailing slash");
    }
    let host = rest.split('/').next().unwrap_or("");
    if host.is_empty() || host.contains('@') {
        return bad("no host (or user info)");
    }
    Ok(())
}

impl ShardMap {
    /// Database d on shard `d mod urls.len()`.
    pub fn modulo(urls: Vec<String>) -> ShardMap {
        ShardMap {
            urls,
            rule: ShardRule::Mod,
        }
    }

    /// Number of shards.
    pub fn count(&self) -> u32 {
        self.urls.len() as u32
    }

    fn check_urls(&self) -> Result<()> {
        if self.urls.is_empty() || self.urls.len() > MAX_SHARDS {
            return Err(Error::Invalid(format!(
                "{} shard URLs (1..={MAX_SHARDS})",
                self.urls.len()
            )));
        }
        self.urls.iter().try_for_each(|u| check_url(u))
    }

    /// Checks the map against an epoch of `dbs` databases: one URL per
    /// shard, each URL well-formed, and (rule list) one non-empty list per
    /// shard with every database in exactly one of them.
    pub fn check(&self, dbs: usize) -> Result<()> {
        self.check_urls()?;
        if let ShardRule::List(lists) = &self.rule {
            if lists.len() != self.urls.len() {
                return Err(Error::Invalid(format!(
                    "shards: {} URLs but {} database lists",
                    self.urls.len(),
                    lists.len()
                )));
            }
            let mut seen = vec![false; dbs];
            for (i, list) in lists.iter().enumerate() {
                if list.is_empty() {
                    return Err(Error::Invalid(format!("shards: shard {i} has no database")));
                }
                for &d in list {
                    match seen.get_mut(d as usize) {
                        Some(s) if !*s => *s = true,
                        Some(_) => {
                            return Err(Error::Invalid(format!(
                                "shards: database {d} is assigned twice"
                            )))
                        }
                        None => {
                            return Err(Error::Invalid(format!(
                                "shards: database {d} does not exist (the epoch has {dbs})"
                            )))
                        }
                    }
                }
            }
            if let Some(d) = seen.iter().position(|s| !s) {
                return Err(Error::Invalid(format!(
                    "shards: database {d} is assigned to no shard"
                )));
            }
        }
        Ok(())
    }

    /// The shard serving database `db` (`None` if no list holds it; a
    /// checked map assigns every database of its epoch).
    pub fn shard_of(&self, db: u32) -> Option<u32> {
        match &self.rule {
            ShardRule::Mod => Some(mod_shard(db, self.count())),
            ShardRule::List(lists) => lists.iter().position(|l| l.contains(&db)).map(|i| i as u32),
        }
    }

    /// The base URL serving database `db`.
    pub fn url_of(&self, db: u32) -> Option<&str> {
        self.shard_of(db)
            .and_then(|s| self.urls.get(s as usize))
            .map(String::as_str)
    }

    /// The databases of shard `shard` in an epoch of `dbs` databases,
    /// ascending.
    pub fn databases_of(&self, shard: u32, dbs: u32) -> Vec<u32> {
        match &self.rule {
            ShardRule::Mod => (0..dbs)
                .filter(|&d| mod_shard(d, self.count()) == shard)
                .collect(),
            ShardRule::List(lists) => {
                let mut v = lists.get(shard as usize).cloned().unwrap_or_default();
                v.sort_unstable();
                v
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("http://auditor-{i}:8080")).collect()
    }

    #[test]
    fn mod_rule_routes_round_robin() {
        let m = ShardMap::modulo(urls(3));
        m.check(768).unwrap();
        assert_eq!(m.shard_of(0), Some(0));
        assert_eq!(m.shard_of(767), Some(767 % 3));
        assert_eq!(m.url_of(4), Some("http://auditor-1:8080"));
        assert_eq!(m.databases_of(2, 8), vec![2, 5]);
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(
            json,
            r#"{"rule":"mod","urls":["http://auditor-0:8080","http://auditor-1:8080","http://auditor-2:8080"]}"#
        );
        assert_eq!(serde_json::from_str::<ShardMap>(&json).unwrap(), m);
        assert_eq!(mod_shard(7, 1), 0);
        assert_eq!(mod_shard(7, 0), 0);
    }

    #[test]
    fn list_rule_assigns_each_database_once() {
        let m = ShardMap {
            urls: urls(2),
            rule: ShardRule::List(vec![vec![0, 3], vec![2, 1]]),
        };
        m.check(4).unwrap();
        assert_eq!(m.shard_of(1), Some(1));
        assert_eq!(m.url_of(3), Some("http://auditor-0:8080"));
        assert_eq!(m.databases_of(1, 4), vec![1, 2]);
        let json = serde_json::to_string(&m).unwrap();
        assert!(json.contains(r#""dbs":[[0,3],[2,1]]"#), "{json}");
        assert_eq!(serde_json::from_str::<ShardMap>(&json).unwrap(), m);
        for (lists, why) in [
            (vec![vec![0, 3], vec![2, 1, 3]], "twice"),
            (vec![vec![0, 3], vec![2]], "no shard"),
            (vec![vec![0, 1, 2, 3], vec![]], "no database"),
            (vec![vec![0, 3], vec![2, 1, 4]], "does not exist"),
            (vec![vec![0, 1, 2, 3]], "lists"),
        ] {
            let bad = ShardMap {
                urls: urls(2),
                rule: ShardRule::List(lists),
            };
            let e = bad.check(4).unwrap_err().to_string();
            assert!(e.contains(why), "{e}");
        }
    }

    #[test]
    fn urls_are_checked() {
        for ok in [
            "http://a",
            "https://auditor-0.auditor.default.svc:8080",
            "https://example.org/auditor",
            "http://[::1]:8080",
        ] {
            check_url(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        let long = format!("https://{}", "a".repeat(MAX_URL_BYTES));
        for bad in [
            "ftp://a",
            "javascript:alert(1)",
            "http://",
            "http:///x",
            "https://a/",
            "https://a?x=1",
            "https://a#f",
            "https://a b",
            "https://u:p@a",
            "https://a\n",
            "https://é.example",
            long.as_str(),
            "",
        ] {
            assert!(check_url(bad).is_err(), "{bad:?}");
        }
        // And on parsing: wrong rule, dbs with mod, no URLs, a bad URL.
        for json in [
            r#"{"rule":"hash","urls":["http://a"]}"#,
            r#"{"rule":"mod","urls":["http://a"],"dbs":[[0]]}"#,
            r#"{"rule":"list","urls":["http://a"]}"#,
            r#"{"rule":"mod","urls":[]}"#,
            r#"{"rule":"mod","urls":["file:///etc/passwd"]}"#,
            r#"{"rule":"mod","urls":["http://a"],"x":1}"#,
        ] {
            assert!(serde_json::from_str::<ShardMap>(json).is_err(), "{json}");
        }
    }
}
