//! Sharding: which databases of an epoch this server builds, holds and
//! answers (`docs/operator.md` §Sharded mode).
//!
//! A server is "shard `index` of `count`". Database d belongs to shard
//! `d mod count` ([`audit_proto::shard::mod_shard`]), or, when the
//! configuration gives explicit `lists`, to the shard whose list holds it.
//! The manifest of a sharded epoch is the same on every shard and names
//! each shard's base URL ([`audit_proto::ShardMap`]), so clients send each
//! query to the shard holding its database; a query that reaches another
//! shard is answered 421 `wrong_shard` with the right shard's URL.
//!
//! The shards of one epoch must agree on everything that determines the
//! bits: the snapshot, the salt seed and the PIR seed. They take them from
//! the epoch the coordinator prepared in an object store (`auditor-server
//! epoch prepare`, [`crate::objstore`]), or from one epoch spec file
//! written by `auditor-server epoch plan` ([`crate::plan`]); a single
//! server (count 1) draws them itself.

use std::path::PathBuf;

use audit_proto::shard::{check_url, MAX_SHARDS};
use audit_proto::{Manifest, ShardMap, ShardRule};
use serde::Deserialize;

use crate::error::{Error, Result};

/// `[shard]` of the configuration.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ShardConfig {
    /// This server's shard number, `0..count`.
    pub index: u32,
    /// Number of shards (1: a single server holds every database).
    pub count: u32,
    /// The databases this shard serves, if not by the rule `d mod count`
    /// (must equal `lists[index]` when both are given, and the epoch
    /// spec's list for this shard).
    pub databases: Option<Vec<u32>>,
    /// Explicit assignment of every shard (list i: shard i's databases),
    /// instead of the rule; what `epoch plan` writes into the manifest.
    pub lists: Option<Vec<Vec<u32>>>,
    /// Base URL of each shard, in index order, published in the manifest.
    pub urls: Vec<String>,
    /// Instead of `urls`: one URL with `{i}`, expanded for i in 0..count.
    pub url_template: Option<String>,
    /// The epoch spec file (`auditor-server epoch plan`) that sharded
    /// builds take their snapshot time and seeds from.
    pub epoch_spec: Option<PathBuf>,
    /// The object store the coordinator prepares epochs in
    /// (`auditor-server epoch prepare`; [`crate::objstore`]): `file:///dir`
    /// or `s3://bucket/prefix`. A server with one builds its databases of
    /// the newest prepared epoch, reports ready, and serves the newest
    /// published one.
    pub object_store: Option<String>,
    /// With an object store: whether this server builds its group's
    /// databases of a prepared epoch when no other server has (true, the
    /// default), or only downloads the ones a builder (`auditor-server
    /// epoch build`, e.g. a Kubernetes Indexed Job) uploaded (false: the
    /// server then writes nothing to the object store, so read-only
    /// credentials suffice).
    pub build: bool,
}

impl Default for ShardConfig {
    fn default() -> Self {
        ShardConfig {
            index: 0,
            count: 1,
            databases: None,
            lists: None,
            urls: Vec::new(),
            url_template: None,
            epoch_spec: None,
            object_store: None,
            build: true,
        }
    }
}

fn config(m: impl Into<String>) -> Error {
    Error::Config(m.into())
}

/// `"0, 3,7"` → `[0, 3, 7]`.
fn parse_ids(key: &str, v: &str) -> Result<Vec<u32>> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<u32>()
                .map_err(|e| config(format!("{key}={v:?}: {s:?}: {e}")))
        })
        .collect()
}

impl ShardConfig {
    /// Applies `AUDITOR_SHARD_*` (`AUDITOR_SHARD_BUILD`: `true` or
    /// `false`), `AUDITOR_EPOCH_SPEC` and
    /// `AUDITOR_OBJECT_STORE` (`get` returns
    /// trimmed, non-empty values).
    pub fn apply_env(&mut self, get: &dyn Fn(&str) -> Option<String>) -> Result<()> {
        let num = |k: &str, v: &str| {
            v.parse::<u32>()
                .map_err(|e| config(format!("{k}={v:?}: {e}")))
        };
        if let Some(v) = get("AUDITOR_SHARD_INDEX") {
            self.index = num("AUDITOR_SHARD_INDEX", &v)?;
        }
        if let Some(v) = get("AUDITOR_SHARD_COUNT") {
            self.count = num("AUDITOR_SHARD_COUNT", &v)?;
        }
        if let Some(v) = get("AUDITOR_SHARD_DATABASES") {
            self.databases = Some(parse_ids("AUDITOR_SHARD_DATABASES", &v)?);
        }
        if let Some(v) = get("AUDITOR_SHARD_LISTS") {
            self.lists = Some(
                v.split(';')
                    .map(|l| parse_ids("AUDITOR_SHARD_LISTS", l))
                    .collect::<Result<_>>()?,
            );
        }
        if let Some(v) = get("AUDITOR_SHARD_URLS") {
            self.urls = v
                .split(',')
                .map(|u| u.trim().to_owned())
                .filter(|u| !u.is_empty())
                .collect();
            self.url_template = None;
        }
        if let Some(v) = get("AUDITOR_SHARD_URL_TEMPLATE") {
            self.url_template = Some(v);
            self.urls.clear();
        }
        if let Some(v) = get("AUDITOR_EPOCH_SPEC") {
            self.epoch_spec = Some(PathBuf::from(v));
        }
        if let Some(v) = get("AUDITOR_OBJECT_STORE") {
            self.object_store = Some(v);
        }
        if let Some(v) = get("AUDITOR_SHARD_BUILD") {
            self.build = v.parse().map_err(|_| {
                config(format!("AUDITOR_SHARD_BUILD={v:?}: expected true or false"))
            })?;
        }
        Ok(())
    }

    /// Whether the epoch is split across more than one server.
    pub fn is_sharded(&self) -> bool {
        self.count > 1
    }

    /// The shard base URLs, in index order (the template expanded,
    /// trailing slashes removed); empty if none are configured.
    pub fn resolved_urls(&self) -> Vec<String> {
        let urls: Vec<String> = match &self.url_template {
            Some(t) => (0..self.count)
                .map(|i| t.replace("{i}", &i.to_string()))
                .collect(),
            None => self.urls.clone(),
        };
        urls.into_iter()
            .map(|u| u.trim().trim_end_matches('/').to_owned())
            .collect()
    }

    /// The path of this shard's own base URL (`/g/1` of
    /// `https://auditor.example.org/g/1`), under which it answers its API
    /// as well as at the root, so that one public host can route
    /// `/g/{i}/…` to group i without rewriting the path
    /// (the HTTP routes). `None` when the URL has no path (or there are
    /// no URLs). [`ShardConfig::validate`] refuses paths that are not
    /// plain segments.
    pub fn own_path(&self) -> Option<String> {
        let url = self.resolved_urls().into_iter().nth(self.index as usize)?;
        let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
        let path = &rest[rest.find('/')?..];
        (path.len() > 1).then(|| path.to_owned())
    }

    /// The shard map to publish in the manifests this configuration
    /// plans: `None` without URLs (a single server, count 1).
    pub fn map(&self) -> Option<ShardMap> {
        let urls = self.resolved_urls();
        if urls.is_empty() {
            return None;
        }
        Some(ShardMap {
            urls,
            rule: match &self.lists {
                Some(l) => ShardRule::List(l.clone()),
                None => ShardRule::Mod,
            },
        })
    }

    /// Checks every value that does not depend on an epoch (the database
    /// ids are checked against each epoch's database count when it is
    /// planned or built). `scheduled`: `serve` builds epochs on a schedule.
    pub fn validate(&self, scheduled: bool) -> Result<()> {
        let (i, n) = (self.index, self.count);
        if n == 0 || n as usize > MAX_SHARDS {
            return Err(config(format!(
                "[shard] count = {n}: must be in 1..={MAX_SHARDS}"
            )));
        }
        if i >= n {
            return Err(config(format!(
                "[shard] index = {i} must be below count = {n} (shards are numbered 0..{})",
                n - 1
            )));
        }
        if !self.urls.is_empty() && self.url_template.is_some() {
            return Err(config("[shard]: set urls or url_template, not both"));
        }
        if let Some(t) = &self.url_template {
            if !t.contains("{i}") {
                return Err(config(format!(
                    "[shard] url_template = {t:?} has no {{i}} placeholder for the shard index"
                )));
            }
        }
        let urls = self.resolved_urls();
        if urls.is_empty() && n > 1 {
            return Err(config(format!(
                "[shard] count = {n} needs urls (or url_template), one base URL per shard: \
                 the manifest tells clients which shard serves which database"
            )));
        }
        if !urls.is_empty() && urls.len() != n as usize {
            return Err(config(format!(
                "[shard] urls lists {} URLs for count = {n} shards (one per shard, in index order)",
                urls.len()
            )));
        }
        for u in &urls {
            check_url(u).map_err(|e| config(format!("[shard] urls: {e}")))?;
            check_url_path(u)?;
        }
        let max_db = audit_proto::manifest::MAX_DBS as u32;
        let check_list = |what: &str, list: &[u32]| -> Result<()> {
            if list.is_empty() {
                return Err(config(format!("[shard] {what} is empty")));
            }
            let mut sorted = list.to_vec();
            sorted.sort_unstable();
            if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
                return Err(config(format!(
                    "[shard] {what} lists database {} twice",
                    w[0]
                )));
            }
            if let Some(d) = sorted.iter().find(|&&d| d >= max_db) {
                return Err(config(format!(
                    "[shard] {what}: database {d} out of range (ids are below {max_db})"
                )));
            }
            Ok(())
        };
        if let Some(d) = &self.databases {
            check_list("databases", d)?;
        }
        if let Some(lists) = &self.lists {
            if lists.len() != n as usize {
                return Err(config(format!(
                    "[shard] lists has {} lists for count = {n} shards",
                    lists.len()
                )));
            }
            let mut all = Vec::new();
            for (s, l) in lists.iter().enumerate() {
                check_list(&format!("lists[{s}]"), l)?;
                all.extend_from_slice(l);
            }
            check_list("lists (all shards together)", &all)?;
            if let Some(d) = &self.databases {
                if sorted(d) != sorted(&lists[i as usize]) {
                    return Err(config(format!(
                        "[shard] databases {d:?} differ from lists[{i}] = {:?}",
                        lists[i as usize]
                    )));
                }
            }
        }
        if self.epoch_spec.is_some() && self.object_store.is_some() {
            return Err(config(
                "[shard]: set epoch_spec or object_store, not both (the object store \
                 holds the epoch specs the coordinator prepares)",
            ));
        }
        if let Some(u) = &self.object_store {
            super::check_url(u)?;
        }
        if scheduled && self.object_store.is_some() {
            return Err(config(
                "[schedule] does not apply to a server with [shard] object_store: it builds \
                 the epochs `auditor-server epoch prepare` writes there",
            ));
        }
        if scheduled && (n > 1 || self.epoch_spec.is_some()) {
            return Err(config(
                "[schedule] does not apply to a sharded server or one with [shard] epoch_spec: \
                 the shards of an epoch must share its seeds, so they build what the epoch spec \
                 plans (run `auditor-server epoch plan` on the schedule instead)",
            ));
        }
        Ok(())
    }

    /// The databases this shard holds of the epoch `m`, ascending, after
    /// checking that the epoch was planned for this shard layout: the
    /// manifest's shard count equals `count` (no map: one shard), and an
    /// explicit `databases` list equals the manifest's for this shard.
    pub fn own_databases(&self, m: &Manifest) -> Result<Vec<u32>> {
        let n_dbs = m.dbs.len() as u32;
        let planned = m.shards.as_ref().map_or(1, ShardMap::count);
        if planned != self.count {
            return Err(config(format!(
                "epoch {} is planned for {planned} shard(s); this server is configured as \
                 shard {} of {}",
                m.epoch, self.index, self.count
            )));
        }
        let own = match &m.shards {
            None => (0..n_dbs).collect(),
            Some(map) => map.databases_of(self.index, n_dbs),
        };
        if let Some(want) = &self.databases {
            if let Some(d) = want.iter().find(|&&d| d >= n_dbs) {
                return Err(config(format!(
                    "[shard] databases: database {d} out of range (epoch {} has databases 0..{n_dbs})",
                    m.epoch
                )));
            }
            if sorted(want) != own {
                return Err(config(format!(
                    "[shard] databases {want:?} differ from what epoch {} assigns to shard {}: {own:?}",
                    m.epoch, self.index
                )));
            }
        }
        Ok(own)
    }
}

/// A shard URL's path is plain segments (`/g/1`: letters, digits and
/// `-._~`, no empty segment): the server mounts its routes under it.
fn check_url_path(url: &str) -> Result<()> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let Some(at) = rest.find('/') else {
        return Ok(());
    };
    let plain = rest[at + 1..].split('/').all(|seg| {
        !seg.is_empty()
            && seg
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
    });
    if plain {
        Ok(())
    } else {
        Err(config(format!(
            "[shard] urls: {url:?}: a shard URL's path must be plain segments \
             (letters, digits, -._~), like https://auditor.example.org/g/1"
        )))
    }
}

fn sorted(v: &[u32]) -> Vec<u32> {
    let mut v = v.to_vec();
    v.sort_unstable();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(text: &str) -> Result<ShardConfig> {
        let c: ShardConfig = toml::from_str(text).map_err(|e| config(e.to_string()))?;
        c.validate(false)?;
        Ok(c)
    }

    #[test]
    fn defaults_are_one_unsharded_server() {
        let c = shard("").unwrap();
        assert_eq!((c.index, c.count), (0, 1));
        assert!(!c.is_sharded());
        assert_eq!(c.map(), None);
    }

    #[test]
    fn rule_and_template() {
        let c = shard("index = 2\ncount = 3\nurl_template = \"http://auditor-{i}.auditor:8080/\"")
            .unwrap();
        let map = c.map().unwrap();
        assert_eq!(map.urls[2], "http://auditor-2.auditor:8080");
        assert_eq!(map.rule, ShardRule::Mod);
        let c = shard(
            "index = 1\ncount = 2\nurls = [\"http://a\", \"http://b\"]\n\
             lists = [[0, 3], [1, 2]]\ndatabases = [2, 1]",
        )
        .unwrap();
        assert_eq!(
            c.map().unwrap().rule,
            ShardRule::List(vec![vec![0, 3], vec![1, 2]])
        );
    }

    #[test]
    fn bad_values_get_clear_errors() {
        for (text, says) in [
            ("count = 0", "count = 0"),
            (
                "index = 3\ncount = 3\nurl_template = \"http://s{i}\"",
                "index = 3 must be below count = 3",
            ),
            ("count = 2", "needs urls"),
            ("count = 2\nurls = [\"http://a\"]", "1 URLs for count = 2"),
            ("count = 2\nurls = [\"http://a\", \"ftp://b\"]", "not http"),
            ("count = 2\nurl_template = \"http://s\"", "no {i}"),
            (
                "count = 2\nurl_template = \"http://s{i}\"\nurls = [\"http://a\", \"http://b\"]",
                "not both",
            ),
            ("databases = []", "databases is empty"),
            ("databases = [1, 1]", "twice"),
            ("databases = [5000]", "out of range"),
            (
                "count = 2\nurl_template = \"http://s{i}\"\nlists = [[0]]",
                "1 lists for count = 2",
            ),
            (
                "count = 2\nurl_template = \"http://s{i}\"\nlists = [[0], [0]]",
                "twice",
            ),
            (
                "count = 2\nurl_template = \"http://s{i}\"\nlists = [[0], []]",
                "lists[1] is empty",
            ),
            (
                "count = 2\nurl_template = \"http://s{i}\"\nlists = [[0], [1]]\ndatabases = [1]",
                "differ from lists[0]",
            ),
        ] {
            let e = shard(text).expect_err(text).to_string();
            assert!(e.contains(says), "{text:?}: {e}");
        }
        let c = shard("count = 2\nurl_template = \"http://s{i}\"").unwrap();
        let e = c.validate(true).unwrap_err().to_string();
        assert!(e.contains("epoch plan"), "{e}");
        let c = shard("epoch_spec = \"next.json\"").unwrap();
        assert!(c.validate(true).is_err());
    }

    #[test]
    fn own_path_is_the_path_of_this_shards_url() {
        let c = shard("index = 1\ncount = 3\nurl_template = \"https://auditor.example.org/g/{i}\"")
            .unwrap();
        assert_eq!(c.own_path().as_deref(), Some("/g/1"));
        let c = shard("index = 2\ncount = 3\nurl_template = \"http://s-{i}:8080/\"").unwrap();
        assert_eq!(c.own_path(), None);
        assert_eq!(shard("").unwrap().own_path(), None);
        let c =
            shard("index = 1\ncount = 2\nurls = [\"http://a/x\", \"http://a/v-1/g.1\"]").unwrap();
        assert_eq!(c.own_path().as_deref(), Some("/v-1/g.1"));
        for bad in ["http://a/g//{i}", "http://a/g/{i}*", "http://a/%7B{i}"] {
            let text = format!("count = 2\nurl_template = {bad:?}");
            assert!(shard(&text).is_err(), "{bad}");
        }
        let e = shard("count = 2\nurl_template = \"http://a/g:{i}\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("plain segments"), "{e}");
    }

    #[test]
    fn environment_overrides() {
        let mut c = ShardConfig::default();
        let env = |k: &str| match k {
            "AUDITOR_SHARD_INDEX" => Some("1".to_owned()),
            "AUDITOR_SHARD_COUNT" => Some("3".to_owned()),
            "AUDITOR_SHARD_DATABASES" => Some("1, 4,7".to_owned()),
            "AUDITOR_SHARD_URLS" => Some("http://a,http://b, http://c".to_owned()),
            "AUDITOR_EPOCH_SPEC" => Some("/specs/next.json".to_owned()),
            _ => None,
        };
        c.apply_env(&env).unwrap();
        c.validate(false).unwrap();
        assert_eq!((c.index, c.count), (1, 3));
        assert_eq!(c.databases, Some(vec![1, 4, 7]));
        assert_eq!(c.resolved_urls(), ["http://a", "http://b", "http://c"]);
        let mut c = ShardConfig::default();
        c.apply_env(&|k: &str| (k == "AUDITOR_SHARD_LISTS").then(|| "0,2;1".to_owned()))
            .unwrap();
        assert_eq!(c.lists, Some(vec![vec![0, 2], vec![1]]));
        let mut c = ShardConfig::default();
        let e = c
            .apply_env(&|k: &str| (k == "AUDITOR_SHARD_DATABASES").then(|| "1,x".to_owned()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("AUDITOR_SHARD_DATABASES"), "{e}");
        let mut c = ShardConfig::default();
        c.apply_env(&|k: &str| {
            (k == "AUDITOR_SHARD_URL_TEMPLATE").then(|| "http://s-{i}:8080".to_owned())
        })
        .unwrap();
        c.count = 2;
        assert_eq!(c.resolved_urls(), ["http://s-0:8080", "http://s-1:8080"]);
    }
}
