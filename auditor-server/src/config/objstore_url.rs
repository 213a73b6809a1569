//! Object store URLs (`[shard] object_store`): `file:///absolute/dir` or
//! `s3://bucket[/prefix]`, checked without opening the store.

use crate::error::{Error, Result};

/// Whether this build can open `s3://` stores (the cargo feature `s3`).
pub const S3_SUPPORT: bool = cfg!(feature = "s3");

/// Checks an object store URL without opening it: `file:///absolute/dir`
/// or `s3://bucket[/prefix]`, the latter only in a build with
/// [`S3_SUPPORT`], so that a server built without it fails at start-up
/// rather than at its first epoch.
pub fn check_url(url: &str) -> Result<()> {
    match parse_url(url)? {
        Location::S3 { .. } if !S3_SUPPORT => Err(no_s3(url)),
        _ => Ok(()),
    }
}

/// The error for an `s3://` URL in a build without the feature `s3`.
pub(crate) fn no_s3(url: &str) -> Error {
    Error::Config(format!(
        "object store {url:?}: this auditor-server was built without S3 support; \
         rebuild it with `cargo build --release -p auditor-server --features s3` \
         (the Docker image has it) or use a file:///absolute/dir store"
    ))
}

/// Where an object store URL points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// `file:///absolute/dir`.
    Dir(std::path::PathBuf),
    /// `s3://bucket/prefix`.
    S3 {
        /// The bucket.
        bucket: String,
        /// The key prefix (no leading or trailing `/`).
        prefix: String,
    },
}

/// Parses an object store URL: `file:///absolute/dir` or
/// `s3://bucket[/prefix]`.
pub fn parse_url(url: &str) -> Result<Location> {
    let bad = |why: &str| {
        Error::Config(format!(
            "object store {url:?}: {why} (expected file:///absolute/dir or s3://bucket/prefix)"
        ))
    };
    if let Some(path) = url.strip_prefix("file://") {
        if !path.starts_with('/') {
            return Err(bad("a file URL needs an absolute path"));
        }
        if path.contains(['?', '#', '%']) {
            return Err(bad("no query, fragment or percent-escapes in a file URL"));
        }
        return Ok(Location::Dir(std::path::PathBuf::from(path)));
    }
    if let Some(rest) = url.strip_prefix("s3://") {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let valid_bucket = (3..=63).contains(&bucket.len())
            && bucket
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
        if !valid_bucket {
            return Err(bad("not a valid S3 bucket name"));
        }
        let prefix = prefix.trim_matches('/');
        let plain = prefix.is_empty()
            || (!prefix.contains(['?', '#', '%', '\\'])
                && prefix
                    .split('/')
                    .all(|p| !p.is_empty() && p != "." && p != ".."));
        if !plain {
            return Err(bad("the prefix must be plain path segments"));
        }
        return Ok(Location::S3 {
            bucket: bucket.to_owned(),
            prefix: prefix.to_owned(),
        });
    }
    Err(bad("unsupported scheme"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        check_url("file:///var/lib/x").unwrap();
        for s3 in [
            "s3://ct-auditor-epochs/prod",
            "s3://bucket",
            "s3://bucket/a/b/",
        ] {
            parse_url(s3).unwrap_or_else(|e| panic!("{s3}: {e}"));
            let got = check_url(s3).map_err(|e| e.to_string());
            if cfg!(feature = "s3") {
                assert_eq!(got, Ok(()), "{s3}");
            } else {
                let e = got.expect_err(s3);
                assert!(e.contains("--features s3"), "{e}");
            }
        }
        for bad in [
            "file://relative/x",
            "/var/lib/x",
            "s3://",
            "s3://UPPER/x",
            "s3://b/../x",
            "gs://bucket/x",
            "file:///x?y",
        ] {
            assert!(check_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn locations() {
        assert_eq!(
            parse_url("s3://bucket/a/b/").unwrap(),
            Location::S3 {
                bucket: "bucket".into(),
                prefix: "a/b".into()
            }
        );
        assert_eq!(
            parse_url("file:///var/lib/x").unwrap(),
            Location::Dir("/var/lib/x".into())
        );
    }
}
