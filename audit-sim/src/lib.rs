//! `audit-sim`: operator tools — a population of simulated browsers against
//! a running auditor, and the cost report per million clients.
//!
//! * [`sim`]: M clients over W weeks, each auditing ≈ 20 SCTs a week with
//!   the `browser-client` library over real HTTP; measures bytes, server
//!   and client time, the filter fill ratio and detection.
//! * [`cost`]: turns those measurements into a weekly cost per client and
//!   per million clients next to the YPIR paper's Table 6, with server time
//!   extrapolated from answer times measured on this machine or read from
//!   `pir-bench` files the operator names.
//! * [`scale`]: the bill beyond one query — cross-client batching measured
//!   here, the fixed weekly costs, the machines of the deployment.
//! * [`machine`]: the machine the tools run on (CPU model, free memory).
//! * [`chart`]: the batch curve of `pir-bench --batch k` runs as an SVG
//!   chart (time per query against k, beside its bounds).
//!
//! Binary: `audit-sim` (`simulate`, `cost-report`, `batch-chart`). Nothing
//! here runs in a browser; what a browser runs is the `browser-client`
//! crate.

pub mod chart;
pub mod cost;
pub mod error;
pub mod machine;
pub mod scale;
pub mod sim;

pub use error::{Error, Result};
