//! Rate limits of `POST /v1/reports`: a token bucket per client address
//! and one for all clients together.
//!
//! The threat: anyone can send reports, and each costs the auditor a
//! signature check, reads of its epoch files and a query of its store
//! before it is refused or stored. The per-address bucket keeps one client
//! from taking the whole budget; the global bucket bounds the total work
//! whatever the number of addresses (a botnet, or every client behind one
//! proxy, which then shares one address). Only verified reports are
//! stored, and a report can only be verified with an SCT a log really
//! signed for a leaf absent from the auditor's epochs, so junk never
//! reaches the database; the limits bound the work of refusing it.
//!
//! At most [`MAX_TRACKED`] addresses are remembered; beyond that the
//! buckets that have refilled completely are forgotten first, and if that
//! is not enough all are (the global bucket still holds).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Instant;

/// Addresses remembered at most.
pub const MAX_TRACKED: usize = 10_000;

/// A token bucket: `capacity` tokens, refilled at `per_second`.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The rates, in reports.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rates {
    /// Per address: tokens refilled per second.
    pub per_ip_per_second: f64,
    /// Per address: bucket size (a burst).
    pub per_ip_burst: f64,
    /// All addresses: tokens refilled per second.
    pub global_per_second: f64,
    /// All addresses: bucket size.
    pub global_burst: f64,
}

/// The two kinds of buckets.
#[derive(Debug)]
pub struct Limiter {
    rates: Rates,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    global: Bucket,
    per_ip: HashMap<IpAddr, Bucket>,
}

fn refill(b: &mut Bucket, now: Instant, rate: f64, cap: f64) {
    let dt = now.saturating_duration_since(b.at).as_secs_f64();
    b.tokens = (b.tokens + dt * rate).min(cap);
    b.at = now;
}

/// Seconds until `b` holds one token.
fn wait(b: &Bucket, rate: f64) -> u64 {
    if rate <= 0.0 {
        return 3600;
    }
    ((1.0 - b.tokens) / rate).ceil().clamp(1.0, 3600.0) as u64
}

impl Limiter {
    /// Full buckets.
    pub fn new(rates: Rates, now: Instant) -> Limiter {
        Limiter {
            rates,
            state: Mutex::new(State {
                global: Bucket {
                    tokens: rates.global_burst,
                    at: now,
                },
                per_ip: HashMap::new(),
            }),
        }
    }

    /// Takes a token for a report from `ip` (`None`: address unknown, only
    /// the global bucket applies) at `now`; `Err(seconds)` to wait if
    /// either bucket is empty (nothing is taken then).
    pub fn take(&self, ip: Option<IpAddr>, now: Instant) -> Result<(), u64> {
        let r = self.rates;
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        refill(&mut st.global, now, r.global_per_second, r.global_burst);
        let mut own = None;
        if let Some(ip) = ip {
            if !st.per_ip.contains_key(&ip) && st.per_ip.len() >= MAX_TRACKED {
                st.per_ip.retain(|_, b| {
                    refill(b, now, r.per_ip_per_second, r.per_ip_burst);
                    b.tokens < r.per_ip_burst
                });
                if st.per_ip.len() >= MAX_TRACKED {
                    st.per_ip.clear();
                }
            }
            let b = st.per_ip.entry(ip).or_insert(Bucket {
                tokens: r.per_ip_burst,
                at: now,
            });
            refill(b, now, r.per_ip_per_second, r.per_ip_burst);
            if b.tokens < 1.0 {
                return Err(wait(b, r.per_ip_per_second));
            }
            own = Some(ip);
        }
        if st.global.tokens < 1.0 {
            return Err(wait(&st.global, r.global_per_second));
        }
        st.global.tokens -= 1.0;
        if let Some(b) = own.and_then(|ip| st.per_ip.get_mut(&ip)) {
            b.tokens -= 1.0;
        }
        Ok(())
    }

    /// Addresses remembered now.
    pub fn tracked(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .per_ip
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn rates() -> Rates {
        Rates {
            per_ip_per_second: 1.0 / 60.0,
            per_ip_burst: 2.0,
            global_per_second: 1.0,
            global_burst: 5.0,
        }
    }

    #[test]
    fn per_address_and_global_buckets() {
        let t0 = Instant::now();
        let l = Limiter::new(rates(), t0);
        let a: IpAddr = [10, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        assert!(l.take(Some(a), t0).is_ok());
        assert!(l.take(Some(a), t0).is_ok());
        // a's burst is spent: wait a minute for the next token.
        assert_eq!(l.take(Some(a), t0), Err(60));
        assert!(l.take(Some(b), t0).is_ok());
        assert!(l.take(None, t0).is_ok());
        assert!(l.take(None, t0).is_ok());
        // The global bucket (5) is empty now, for everyone.
        assert_eq!(l.take(Some(b), t0), Err(1));
        assert_eq!(l.take(None, t0), Err(1));
        // Refills.
        let t1 = t0 + Duration::from_secs(60);
        assert!(l.take(Some(a), t1).is_ok());
        assert_eq!(l.take(Some(a), t1), Err(60));
    }

    #[test]
    fn tracked_addresses_are_bounded() {
        let t0 = Instant::now();
        let l = Limiter::new(
            Rates {
                global_per_second: 1e9,
                global_burst: 1e9,
                ..rates()
            },
            t0,
        );
        for i in 0..MAX_TRACKED as u32 {
            let ip: IpAddr = std::net::Ipv4Addr::from(i).into();
            assert!(l.take(Some(ip), t0).is_ok());
        }
        assert_eq!(l.tracked(), MAX_TRACKED);
        // A new address when every bucket is still partly used: all are
        // forgotten (the global bucket still holds).
        assert!(l.take(Some([1, 2, 3, 4].into()), t0).is_ok());
        assert_eq!(l.tracked(), 1);
        for i in 0..MAX_TRACKED as u32 - 1 {
            let ip: IpAddr = std::net::Ipv4Addr::from(i).into();
            assert!(l.take(Some(ip), t0).is_ok());
        }
        assert_eq!(l.tracked(), MAX_TRACKED);
        // After every bucket refilled, those are forgotten first.
        let later = t0 + Duration::from_secs(3600);
        assert!(l.take(Some([1, 2, 3, 5].into()), later).is_ok());
        assert_eq!(l.tracked(), 1);
    }
}
