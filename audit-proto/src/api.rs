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
