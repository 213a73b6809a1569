//! `[reports]`: misbehaviour reports (`POST /v1/reports`, `crate::reports`).

use serde::Deserialize;

use crate::error::{Error, Result};

/// `[reports]`: misbehaviour reports (`POST /v1/reports`).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ReportsConfig {
    /// Take reports (false: the endpoint answers 404 `not_found`).
    pub enabled: bool,
    /// Reports per hour from one client address (token bucket refill).
    pub per_ip_per_hour: u32,
    /// Reports one address may send at once (bucket size).
    pub per_ip_burst: u32,
    /// Reports per minute from all addresses together (the bucket holds as
    /// many).
    pub global_per_minute: u32,
    /// Reports verified at once; more get 503 `overloaded`.
    pub max_concurrent: usize,
}

impl Default for ReportsConfig {
    fn default() -> Self {
        ReportsConfig {
            enabled: true,
            per_ip_per_hour: 10,
            per_ip_burst: 3,
            global_per_minute: 60,
            max_concurrent: 2,
        }
    }
}

impl ReportsConfig {
    /// Checks the limits.
    pub fn validate(&self) -> Result<()> {
        if self.enabled
            && (self.per_ip_per_hour == 0
                || self.per_ip_burst == 0
                || self.global_per_minute == 0
                || self.max_concurrent == 0)
        {
            return Err(Error::Config(
                "[reports] per_ip_per_hour, per_ip_burst, global_per_minute and max_concurrent \
                 must be ≥ 1 (or enabled = false)"
                    .into(),
            ));
        }
        Ok(())
    }
}
