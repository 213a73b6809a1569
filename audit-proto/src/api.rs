//! HTTP API constants and the JSON error body (`docs/protocol.md`).

use serde::{Deserialize, Serialize};

/// Largest manifest a client accepts: 4096 filters' salts (≈ 70 bytes of
/// JSON each) and 4096 databases and logs fit with room to spare.
pub const MAX_MANIFEST_BYTES: usize = 4 << 20;
/// Content type of queries and responses.
pub const OCTET_STREAM: &str = "application/octet-stream";
/// Response header: number of queries answered in the same pass (§4.3).
pub const BATCH_SIZE_HEADER: &str = "x-pir-batch-size";
/// Response header (standard `Server-Timing`): `answer;dur=<ms>` is the
/// wall time of the answering pass on the server's worker pool, for the
/// whole batch.
pub const SERVER_TIMING_HEADER: &str = "server-timing";

/// The body of every error response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// Stable machine-readable code, e.g. `unknown_epoch`.
    pub error: String,
    /// Human-readable explanation.
    pub message: String,
    /// The epoch the server currently serves, when it helps the client
    /// recover (refetch the manifest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_epoch: Option<u64>,
}

/// Every `error` code the server sends (the table of `docs/protocol.md` §5).
/// Codes are stable: clients may match on them.
pub const ERROR_CODES: &[&str] = &[
    "bad_epoch",
    "unknown_epoch",
    "unknown_db",
    "not_found",
    "method_not_allowed",
    "unsupported_media_type",
    "query_too_large",
    "body_timeout",
    "malformed_query",
    "wrong_param_set",
    "wrong_seed",
    "wrong_shape",
    "rejected_query",
    "bad_body",
    "overloaded",
    "timeout",
    "no_epoch",
    "unavailable",
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The codes are distinct and exactly those of protocol.md's error
    /// table (rows of the form "| status | `code` | when |").
    #[test]
    fn error_codes_match_the_protocol_table() {
        let doc = include_str!("../../docs/protocol.md");
        let section = doc
            .split("## 5. Errors")
            .nth(1)
            .and_then(|s| s.split("\n## ").next())
            .expect("protocol.md has a section 5");
        let mut documented: Vec<&str> = section
            .lines()
            .filter_map(|l| l.strip_prefix('|'))
            .filter_map(|l| {
                let mut cells = l.split('|');
                cells.next()?.trim().parse::<u16>().ok()?;
                cells.next()
            })
            .filter_map(|c| c.trim().strip_prefix('`')?.strip_suffix('`'))
            .collect();
        documented.sort_unstable();
        let mut codes = ERROR_CODES.to_vec();
        codes.sort_unstable();
        let n = codes.len();
        codes.dedup();
        assert_eq!(codes.len(), n, "duplicate codes");
        assert_eq!(documented, codes);
    }
}
