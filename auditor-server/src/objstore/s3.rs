//! `s3://` object stores: `object_store`'s S3 client, in builds with the
//! cargo feature `s3` (it brings an HTTP client stack the default build
//! does not carry).

use std::sync::Arc;

use object_store::ObjectStore;

use crate::error::Result;

/// Opens bucket `bucket` of `url`, with the `AWS_*` settings of `vars`
/// (other keys are ignored).
#[cfg(feature = "s3")]
pub(super) fn open(
    url: &str,
    bucket: &str,
    vars: impl IntoIterator<Item = (String, String)>,
) -> Result<Arc<dyn ObjectStore>> {
    // Snapshots and databases are large objects streamed in one request
    // each: the crate's 30 s request timeout would cut a multi-GiB
    // transfer. Failed requests are retried a bounded number of times with
    // backoff. `AWS_TIMEOUT`, `AWS_CONNECT_TIMEOUT` (and the other keys)
    // still override.
    let options = object_store::ClientOptions::new()
        .with_timeout(super::OBJECT_TIMEOUT)
        .with_connect_timeout(std::time::Duration::from_secs(10));
    let retry = object_store::RetryConfig {
        max_retries: super::OBJECT_RETRIES,
        retry_timeout: std::time::Duration::from_secs(300),
        ..Default::default()
    };
    let mut b = object_store::aws::AmazonS3Builder::new()
        .with_client_options(options)
        .with_retry(retry);
    for (k, v) in vars {
        if let Some(key) = k
            .strip_prefix("AWS_")
            .and_then(|_| k.to_ascii_lowercase().parse().ok())
        {
            b = b.with_config(key, v);
        }
    }
    let s3 = b
        .with_bucket_name(bucket)
        .build()
        .map_err(|e| super::store_err(url, e))?;
    Ok(Arc::new(s3))
}

/// Without the feature `s3`: the error that names the build to use.
#[cfg(not(feature = "s3"))]
pub(super) fn open(
    url: &str,
    _bucket: &str,
    _vars: impl IntoIterator<Item = (String, String)>,
) -> Result<Arc<dyn ObjectStore>> {
    Err(crate::config::no_s3(url))
}
