//! HTTP API constants and the JSON error body (`docs/protocol.md`).

use serde::{Deserialize, Serialize};

/// Largest manifest a client accepts: 4096 filters' salts (≈ 70 bytes of
/// JSON each) and 4096 databases and logs fit with room to spare.
pub const MAX_MANIFEST_BYTES: usize = 4 << 20;
/// Largest number of PIR databases per epoch (and so of shards).
pub const MAX_DBS: usize = 4096;
/// Content type of queries and responses.
pub const OCTET_STREAM: &str = "application/octet-stream";
/// Response header: number of queries answered in the same pass (§4.3).
pub const BATCH_SIZE_HEADER: &str = "x-pir-batch-size";
/// Response header (standard `Server-Timing`): `answer;dur=<ms>` is the
/// wall time of the answering pass on the server's worker pool, for the
/// whole batch.
pub const SERVER_TIMING_HEADER: &str = "server-timing";

/// The stable error codes of the HTTP API (`error` in [`ErrorBody`]), each
/// with the one HTTP status it is sent with (`docs/protocol.md` §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// 400: `{epoch}` in the path is not a number.
    BadEpoch,
    /// 404: the epoch is not served (never, or past its grace period).
    UnknownEpoch,
    /// 404: no such database in that epoch.
    UnknownDb,
    /// 421: the database is served by another shard ([`ErrorBody::shard_url`]
    /// names it).
    WrongShard,
    /// 404: no such endpoint.
    NotFound,
    /// 405: method not allowed on this endpoint.
    MethodNotAllowed,
    /// 415: a `Content-Type` other than [`OCTET_STREAM`].
    UnsupportedMediaType,
    /// 413: the body is longer than the database's query, or than the cap.
    QueryTooLarge,
    /// 408: the query body did not arrive within the body deadline.
    BodyTimeout,
    /// 400: not a well-formed query.
    MalformedQuery,
    /// 400: a query for another parameter set.
    WrongParamSet,
    /// 400: a query built for another public seed.
    WrongSeed,
    /// 400: a query for another database shape.
    WrongShape,
    /// 400: pir-core refused the query while answering.
    RejectedQuery,
    /// 400: the body could not be read.
    BadBody,
    /// 503: too many queries in flight.
    Overloaded,
    /// 503: the query was not answered in time.
    Timeout,
    /// 503: no epoch has been published yet.
    NoEpoch,
    /// 503: the epoch was retired, or its answering worker failed, while the
    /// query waited.
    Unavailable,
    /// 500: an unexpected failure inside the server.
    Internal,
    /// 413: a report body longer than [`crate::report::MAX_REPORT_BYTES`].
    ReportTooLarge,
    /// 400: not a report of the required form ([`crate::report`]).
    BadReport,
    /// 429: too many reports from this address, or in total; retry after
    /// `Retry-After` seconds.
    RateLimited,
    /// 422: the report names a log this auditor does not track (or whose
    /// key it does not hold).
    UnknownLog,
    /// 422: the chain does not hold together (a certificate does not
    /// parse, or the issuer did not sign the leaf).
    BadChain,
    /// 422: the SCT does not parse, or its signature does not verify with
    /// the log's key over the leaf rebuilt from the chain.
    BadSct,
    /// 422: the leaf rebuilt from the chain and SCT has another hash than
    /// the report states.
    LeafHashMismatch,
    /// 422: a named epoch is not one this auditor holds, or its coverage of
    /// the log does not reach the SCT's timestamp plus the MMD.
    EpochNotCovering,
    /// 422: the leaf is in a named epoch's set, or in the auditor's store.
    LeafPresent,
    /// 503: this auditor cannot take reports now (its store is unreachable).
    ReportsUnavailable,
}

impl ErrorCode {
    /// Every code, in the order of the protocol's error table.
    pub const ALL: [ErrorCode; 30] = [
        ErrorCode::BadEpoch,
        ErrorCode::UnknownEpoch,
        ErrorCode::UnknownDb,
        ErrorCode::WrongShard,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::QueryTooLarge,
        ErrorCode::BodyTimeout,
        ErrorCode::MalformedQuery,
        ErrorCode::WrongParamSet,
        ErrorCode::WrongSeed,
        ErrorCode::WrongShape,
        ErrorCode::RejectedQuery,
        ErrorCode::BadBody,
        ErrorCode::Overloaded,
        ErrorCode::Timeout,
        ErrorCode::NoEpoch,
        ErrorCode::Unavailable,
        ErrorCode::Internal,
        ErrorCode::ReportTooLarge,
        ErrorCode::BadReport,
        ErrorCode::RateLimited,
        ErrorCode::UnknownLog,
        ErrorCode::BadChain,
        ErrorCode::BadSct,
        ErrorCode::LeafHashMismatch,
        ErrorCode::EpochNotCovering,
        ErrorCode::LeafPresent,
        ErrorCode::ReportsUnavailable,
    ];

    /// The codes only `POST /v1/reports` answers with.
    pub const REPORT_ONLY: [ErrorCode; 10] = [
        ErrorCode::ReportTooLarge,
        ErrorCode::BadReport,
        ErrorCode::RateLimited,
        ErrorCode::UnknownLog,
        ErrorCode::BadChain,
        ErrorCode::BadSct,
        ErrorCode::LeafHashMismatch,
        ErrorCode::EpochNotCovering,
        ErrorCode::LeafPresent,
        ErrorCode::ReportsUnavailable,
    ];

    /// The code as sent in [`ErrorBody::error`].
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadEpoch => "bad_epoch",
            ErrorCode::UnknownEpoch => "unknown_epoch",
            ErrorCode::UnknownDb => "unknown_db",
            ErrorCode::WrongShard => "wrong_shard",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ErrorCode::QueryTooLarge => "query_too_large",
            ErrorCode::BodyTimeout => "body_timeout",
            ErrorCode::MalformedQuery => "malformed_query",
            ErrorCode::WrongParamSet => "wrong_param_set",
            ErrorCode::WrongSeed => "wrong_seed",
            ErrorCode::WrongShape => "wrong_shape",
            ErrorCode::RejectedQuery => "rejected_query",
            ErrorCode::BadBody => "bad_body",
            ErrorCode::Overloaded => "overloaded",
            ErrorCode::Timeout => "timeout",
            ErrorCode::NoEpoch => "no_epoch",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Internal => "internal",
            ErrorCode::ReportTooLarge => "report_too_large",
            ErrorCode::BadReport => "bad_report",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::UnknownLog => "unknown_log",
            ErrorCode::BadChain => "bad_chain",
            ErrorCode::BadSct => "bad_sct",
            ErrorCode::LeafHashMismatch => "leaf_hash_mismatch",
            ErrorCode::EpochNotCovering => "epoch_not_covering",
            ErrorCode::LeafPresent => "leaf_present",
            ErrorCode::ReportsUnavailable => "reports_unavailable",
        }
    }

    /// The HTTP status the code is sent with.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::BadEpoch
            | ErrorCode::MalformedQuery
            | ErrorCode::WrongParamSet
            | ErrorCode::WrongSeed
            | ErrorCode::WrongShape
            | ErrorCode::RejectedQuery
            | ErrorCode::BadBody
            | ErrorCode::BadReport => 400,
            ErrorCode::UnknownEpoch | ErrorCode::UnknownDb | ErrorCode::NotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::BodyTimeout => 408,
            ErrorCode::WrongShard => 421,
            ErrorCode::QueryTooLarge | ErrorCode::ReportTooLarge => 413,
            ErrorCode::UnsupportedMediaType => 415,
            ErrorCode::UnknownLog
            | ErrorCode::BadChain
            | ErrorCode::BadSct
            | ErrorCode::LeafHashMismatch
            | ErrorCode::EpochNotCovering
            | ErrorCode::LeafPresent => 422,
            ErrorCode::RateLimited => 429,
            ErrorCode::Internal => 500,
            ErrorCode::Overloaded
            | ErrorCode::Timeout
            | ErrorCode::NoEpoch
            | ErrorCode::Unavailable
            | ErrorCode::ReportsUnavailable => 503,
        }
    }

    /// The code a server sent, if it is one of these.
    pub fn parse(code: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.as_str() == code)
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The body of every error response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// Stable machine-readable code ([`ErrorCode::as_str`]), e.g. `unknown_epoch`.
    pub error: String,
    /// Human-readable explanation.
    pub message: String,
    /// The epoch the server currently serves, when it helps the client
    /// recover (refetch the manifest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_epoch: Option<u64>,
    /// With `wrong_shard`: the base URL of the shard that serves the
    /// database (as in the manifest's shard map).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard_url: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_are_distinct_snake_case_and_round_trip() {
        let mut seen = std::collections::HashSet::new();
        for c in ErrorCode::ALL {
            let s = c.as_str();
            assert!(seen.insert(s), "duplicate code {s}");
            assert!(
                !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{s}"
            );
            assert_eq!(ErrorCode::parse(s), Some(c));
            assert_eq!(c.to_string(), s);
            let status = c.http_status();
            assert!((400..600).contains(&status), "{s}: {status}");
        }
        assert_eq!(ErrorCode::parse("no_such_code"), None);
        assert_eq!(ErrorCode::Internal.http_status(), 500);
        assert_eq!(ErrorCode::QueryTooLarge.http_status(), 413);
        assert_eq!(ErrorCode::WrongShard.http_status(), 421);
        assert_eq!(ErrorCode::RateLimited.http_status(), 429);
        assert_eq!(ErrorCode::LeafPresent.http_status(), 422);
        for c in ErrorCode::REPORT_ONLY {
            assert!(ErrorCode::ALL.contains(&c), "{c}");
        }
        let body: ErrorBody = serde_json::from_str(
            r#"{"error":"wrong_shard","message":"m","shard_url":"http://s1"}"#,
        )
        .unwrap();
        assert_eq!(body.shard_url.as_deref(), Some("http://s1"));
    }
}
