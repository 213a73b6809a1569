//! Falling back to another database when a query's group fails
//! (docs/protocol.md §7.1).
//!
//! A query whose group (the shard serving its database) is unreachable,
//! times out, or answers 5xx (503 and 429 included) is not sent again: the
//! client draws a **fresh** uniformly random filter — hence database — and
//! builds a **fresh** query for it (new LWE secret), at once. Every draw
//! has the same distribution, independent of the SCT and of earlier draws;
//! the failed group is not excluded (excluding it would make the choice
//! depend on what this client saw of the fleet, which then needs its own
//! analysis, and a client that remembers a dead group is one that can be
//! told apart from the others).
//!
//! **The bound.** At most [`MAX_REDRAWS`] = K redraws, K + 1 attempts per
//! query. When the groups that fail hold a fraction p of the filters (one
//! dead group of G equal groups: p = 1/G), a query fails only if all K + 1
//! independent draws land there: probability p^(K+1). With K = 12: one
//! dead group of 3 fails (1/3)^13 ≈ 6.3·10^-7 of queries, one of 2
//! (1/2)^13 ≈ 1.2·10^-4; an audit step of n queries fails with probability
//! 1 − (1 − p^(K+1))^n ≈ n·p^(K+1) (`sct-audit check`: an SCT and 2
//! canaries, ≈ 1.9·10^-6 for one dead group of 3). A healthy fleet never
//! takes the fallback. The expected number of attempts is 1/(1 − p)
//! (1.5 with one dead group of 3).
//!
//! **Never hammering.** A group that failed rests before it is asked again
//! in the same query: as long as its `Retry-After` says (delta-seconds,
//! in full); a 503 or 429 without one for
//! [`FallbackPolicy::overloaded_wait_ms`]; an unreachable, timed-out or
//! 5xx group for a backoff that doubles from
//! [`FallbackPolicy::backoff_ms`] with each of its failures. A fresh draw
//! that lands on a resting group waits until the rest ends if that is at
//! most [`FallbackPolicy::max_wait_ms`] away and before the query's
//! deadline; otherwise it is not sent and counts as a failed attempt
//! ([`Failure::Resting`]). Draws that land elsewhere go at once.
//! The whole audit has a deadline ([`FallbackPolicy::deadline_ms`]); each
//! attempt a timeout ([`FallbackPolicy::attempt_timeout_ms`], never past
//! the deadline).
//!
//! This module is the policy as a state machine over an injected clock
//! (milliseconds): the native transport ([`crate::net`]), the wasm build
//! (`Fallback` in module `wasm`, driven by the extension's `fetch`) and the
//! simulator all run it.

use serde::{Deserialize, Serialize};

/// Redraws after a failed attempt, K: at most K + 1 attempts per query
/// (module docs for the failure rate it gives).
pub const MAX_REDRAWS: u32 = 12;

/// Why an attempt failed over to a fresh draw.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// No answer: connection refused or reset, DNS, TLS.
    Unreachable,
    /// No answer within the attempt's timeout.
    Timeout,
    /// A 5xx answer other than 503.
    ServerError,
    /// 503 (load shedding, not ready) or 429.
    Overloaded,
    /// Not sent: the drawn group rests past the audit's deadline.
    Resting,
}

impl Failure {
    /// All of them, in report order.
    pub const ALL: [Failure; 5] = [
        Failure::Unreachable,
        Failure::Timeout,
        Failure::ServerError,
        Failure::Overloaded,
        Failure::Resting,
    ];

    /// The failure an HTTP status means, if it is one the client falls
    /// back on (`None`: 2xx, 4xx, 421 — handled elsewhere or final).
    pub fn of_status(status: u16) -> Option<Failure> {
        match status {
            429 | 503 => Some(Failure::Overloaded),
            500..=599 => Some(Failure::ServerError),
            _ => None,
        }
    }

    /// Its name in reports and metrics.
    pub fn name(self) -> &'static str {
        match self {
            Failure::Unreachable => "unreachable",
            Failure::Timeout => "timeout",
            Failure::ServerError => "server_error",
            Failure::Overloaded => "overloaded",
            Failure::Resting => "resting",
        }
    }

    /// From [`Failure::name`].
    pub fn from_name(s: &str) -> Option<Failure> {
        Failure::ALL.into_iter().find(|f| f.name() == s)
    }
}

/// The fallback's settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FallbackPolicy {
    /// Redraws after a failed attempt (K; 0: no fallback).
    pub max_redraws: u32,
    /// Deadline of one query with all its attempts and waits (ms).
    pub deadline_ms: u64,
    /// Timeout of one attempt (ms), never past the deadline.
    pub attempt_timeout_ms: u64,
    /// Longest wait for a resting group (ms): a draw that lands on a group
    /// resting longer is skipped, not waited for.
    pub max_wait_ms: u64,
    /// Rest after a 503 or 429 without `Retry-After` in delta-seconds (ms).
    pub overloaded_wait_ms: u64,
    /// First rest after an unreachable, timed-out or 5xx group (ms); it
    /// doubles with each further failure of that group, up to
    /// `max_wait_ms`.
    pub backoff_ms: u64,
}

impl Default for FallbackPolicy {
    /// K = [`MAX_REDRAWS`], 300 s per query, 20 s per attempt (so that
    /// K + 1 timed-out attempts fit in the deadline: a group that swallows
    /// queries costs time, not the bound), rests of at most 30 s, 1 s
    /// after a 503/429 without `Retry-After`, backoff from 250 ms.
    fn default() -> FallbackPolicy {
        FallbackPolicy {
            max_redraws: MAX_REDRAWS,
            deadline_ms: 300_000,
            attempt_timeout_ms: 20_000,
            max_wait_ms: 30_000,
            overloaded_wait_ms: 1_000,
            backoff_ms: 250,
        }
    }
}

impl FallbackPolicy {
    /// No fallback: the first failure is final.
    pub fn never() -> FallbackPolicy {
        FallbackPolicy {
            max_redraws: 0,
            ..FallbackPolicy::default()
        }
    }

    /// The probability that a query fails when the failing groups hold a
    /// fraction `p` of the filters: p^(K+1).
    pub fn failure_probability(&self, p: f64) -> f64 {
        p.clamp(0.0, 1.0).powi(self.max_redraws as i32 + 1)
    }

    /// The rest a `Retry-After` of `retry_after` asks for (delta-seconds;
    /// an HTTP-date or garbage asks for none).
    pub fn retry_after_ms(retry_after: Option<&str>) -> Option<u64> {
        retry_after
            .map(str::trim)
            .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
            .map(|v| {
                v.parse::<u64>()
                    .map_or(u64::MAX, |s| s.saturating_mul(1000))
            })
    }
}

/// What to do with a freshly drawn query ([`Fallback::before_send`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Send it now, with this timeout (ms).
    Send {
        /// The attempt's timeout.
        timeout_ms: u64,
    },
    /// Its group rests: wait this long (ms), then ask again.
    Wait {
        /// How long.
        ms: u64,
    },
    /// Do not send it (its group rests past the deadline, or the deadline
    /// has passed): report [`Failure::Resting`] to [`Fallback::failed`].
    Skip,
}

/// The fallback state of one query (all its attempts).
#[derive(Clone, Debug)]
pub struct Fallback {
    policy: FallbackPolicy,
    start_ms: u64,
    /// Group → (rest until, failures so far).
    groups: Vec<(u32, u64, u32)>,
    failures: Vec<Failure>,
    waited_ms: u64,
}

impl Fallback {
    /// A query started at `now_ms` (any monotonic milliseconds).
    pub fn new(policy: FallbackPolicy, now_ms: u64) -> Fallback {
        Fallback {
            policy,
            start_ms: now_ms,
            groups: Vec::new(),
            failures: Vec::new(),
            waited_ms: 0,
        }
    }

    fn deadline(&self) -> u64 {
        self.start_ms.saturating_add(self.policy.deadline_ms)
    }

    /// Whether a query just drawn for group `group` is sent now, waits, or
    /// is skipped.
    pub fn before_send(&mut self, group: u32, now_ms: u64) -> Step {
        let deadline = self.deadline();
        if now_ms >= deadline {
            return Step::Skip;
        }
        let until = self.groups.iter().find(|g| g.0 == group).map_or(0, |g| g.1);
        if until > now_ms {
            if until >= deadline || until - now_ms > self.policy.max_wait_ms {
                return Step::Skip;
            }
            self.waited_ms += until - now_ms;
            return Step::Wait { ms: until - now_ms };
        }
        Step::Send {
            timeout_ms: self.policy.attempt_timeout_ms.min(deadline - now_ms),
        }
    }

    /// Records that the attempt at group `group` failed with `failure`
    /// (`retry_after`: the answer's `Retry-After` header). Returns whether
    /// to redraw (true) or give up (false: the bound or the deadline is
    /// reached).
    pub fn failed(
        &mut self,
        group: u32,
        failure: Failure,
        retry_after: Option<&str>,
        now_ms: u64,
    ) -> bool {
        self.failures.push(failure);
        let p = &self.policy;
        let i = match self.groups.iter().position(|g| g.0 == group) {
            Some(i) => i,
            None => {
                self.groups.push((group, 0, 0));
                self.groups.len() - 1
            }
        };
        let g = &mut self.groups[i];
        g.2 += 1;
        let rest = match (failure, FallbackPolicy::retry_after_ms(retry_after)) {
            (Failure::Resting, _) => None,
            (_, Some(ms)) => Some(ms),
            (Failure::Overloaded, None) => Some(p.overloaded_wait_ms.min(p.max_wait_ms)),
            (_, None) => Some(
                p.backoff_ms
                    .saturating_mul(1u64 << (g.2 - 1).min(32))
                    .min(p.max_wait_ms),
            ),
            // (the backoff stays waitable: at most max_wait_ms)
        };
        if let Some(ms) = rest {
            g.1 = g.1.max(now_ms.saturating_add(ms));
        }
        self.failures.len() <= p.max_redraws as usize && now_ms < self.deadline()
    }

    /// The failed attempts so far, in order (each was followed by a
    /// redraw, except the last one if [`Fallback::failed`] gave up).
    pub fn failures(&self) -> &[Failure] {
        &self.failures
    }

    /// Time spent waiting for resting groups (ms).
    pub fn waited_ms(&self) -> u64 {
        self.waited_ms
    }

    /// When the query started (ms).
    pub fn started_ms(&self) -> u64 {
        self.start_ms
    }

    /// The timeout of an attempt sent at `now_ms` (ms, at least 1).
    pub fn timeout_ms(&self, now_ms: u64) -> u64 {
        self.policy
            .attempt_timeout_ms
            .min(self.deadline().saturating_sub(now_ms))
            .max(1)
    }
}

/// Counts of fallbacks, for reports and metrics.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FallbackStats {
    /// Queries run under the fallback policy.
    pub queries: u64,
    /// Attempts sent or skipped, over all queries.
    pub attempts: u64,
    /// Redraws taken after a failed attempt.
    pub fallbacks: u64,
    /// Queries that failed: every attempt failed (or the deadline passed).
    pub gave_up: u64,
    /// Failed attempts by reason ([`Failure::name`] → count).
    pub failures: std::collections::BTreeMap<String, u64>,
    /// Time spent waiting for resting groups (s).
    pub wait_seconds: f64,
}

impl FallbackStats {
    /// Adds one finished query: its state, and whether it gave up (every
    /// attempt failed, or the deadline passed). A query that ended
    /// otherwise — answered, or an error the fallback does not handle (a
    /// 4xx, an answer that does not decode) — made one more attempt after
    /// its failures.
    pub fn add(&mut self, fb: &Fallback, gave_up: bool) {
        let failed = fb.failures.len() as u64;
        self.queries += 1;
        self.attempts += failed + u64::from(!gave_up);
        self.fallbacks += if gave_up {
            failed.saturating_sub(1)
        } else {
            failed
        };
        self.gave_up += u64::from(gave_up);
        for f in &fb.failures {
            *self.failures.entry(f.name().to_owned()).or_default() += 1;
        }
        self.wait_seconds += fb.waited_ms as f64 / 1e3;
    }

    /// The failed attempts by reason, for people: `unreachable ×3,
    /// overloaded ×1` (`none` if none).
    pub fn reasons(failures: &[Failure]) -> String {
        let parts: Vec<String> = Failure::ALL
            .into_iter()
            .filter_map(|f| {
                let n = failures.iter().filter(|&&x| x == f).count();
                (n > 0).then(|| format!("{} ×{n}", f.name()))
            })
            .collect();
        if parts.is_empty() {
            "none".to_owned()
        } else {
            parts.join(", ")
        }
    }

    /// Adds another set of counts.
    pub fn merge(&mut self, o: &FallbackStats) {
        self.queries += o.queries;
        self.attempts += o.attempts;
        self.fallbacks += o.fallbacks;
        self.gave_up += o.gave_up;
        for (k, v) in &o.failures {
            *self.failures.entry(k.clone()).or_default() += v;
        }
        self.wait_seconds += o.wait_seconds;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> FallbackPolicy {
        FallbackPolicy {
            max_redraws: 3,
            deadline_ms: 10_000,
            attempt_timeout_ms: 4_000,
            max_wait_ms: 5_000,
            overloaded_wait_ms: 1_000,
            backoff_ms: 100,
        }
    }

    #[test]
    fn a_healthy_group_is_sent_to_at_once_with_the_attempt_timeout() {
        let mut fb = Fallback::new(policy(), 1_000);
        assert_eq!(fb.before_send(0, 1_000), Step::Send { timeout_ms: 4_000 });
        // Near the deadline the timeout shrinks to what is left.
        assert_eq!(fb.before_send(0, 9_000), Step::Send { timeout_ms: 2_000 });
        assert_eq!(fb.before_send(0, 11_000), Step::Skip);
        assert!(fb.failures().is_empty());
    }

    #[test]
    fn every_failure_kind_redraws_until_the_bound() {
        for f in [
            Failure::Unreachable,
            Failure::Timeout,
            Failure::ServerError,
            Failure::Overloaded,
        ] {
            let mut fb = Fallback::new(policy(), 0);
            // Each failure on a different group: no rests in the way.
            for g in 0..3 {
                assert_eq!(fb.before_send(g, 0), Step::Send { timeout_ms: 4_000 });
                assert!(fb.failed(g, f, None, 0), "{f:?} attempt {g}");
            }
            assert_eq!(fb.before_send(3, 0), Step::Send { timeout_ms: 4_000 });
            // The fourth failure is the (K + 1)-th attempt: give up.
            assert!(!fb.failed(3, f, None, 0));
            assert_eq!(fb.failures(), [f; 4]);
        }
        let mut never = Fallback::new(FallbackPolicy::never(), 0);
        assert!(!never.failed(0, Failure::Unreachable, None, 0));
    }

    #[test]
    fn retry_after_is_honoured_then_the_group_is_asked_again() {
        let mut fb = Fallback::new(policy(), 0);
        assert!(fb.failed(1, Failure::Overloaded, Some("2"), 0));
        // A draw elsewhere goes at once; one on group 1 waits 2 s.
        assert_eq!(fb.before_send(0, 10), Step::Send { timeout_ms: 4_000 });
        assert_eq!(fb.before_send(1, 500), Step::Wait { ms: 1_500 });
        assert_eq!(fb.before_send(1, 2_000), Step::Send { timeout_ms: 4_000 });
        assert_eq!(fb.waited_ms(), 1_500);
        // A 500 with Retry-After rests as it says; one past the cap is capped.
        assert!(fb.failed(2, Failure::ServerError, Some("3"), 2_000));
        assert_eq!(fb.before_send(2, 2_000), Step::Wait { ms: 3_000 });
        // A rest longer than the longest wait: draws there are skipped.
        let mut fb = Fallback::new(policy(), 0);
        assert!(fb.failed(1, Failure::Overloaded, Some("3600"), 0));
        assert!(fb.failed(2, Failure::Overloaded, Some("6"), 0));
        assert_eq!(fb.before_send(1, 0), Step::Skip);
        assert_eq!(fb.before_send(2, 0), Step::Skip);
        assert_eq!(fb.before_send(2, 1_000), Step::Wait { ms: 5_000 });
        // Without Retry-After (or with an HTTP-date): the default rest.
        for ra in [None, Some("Wed, 21 Oct 2015 07:28:00 GMT"), Some("-1")] {
            let mut fb = Fallback::new(policy(), 0);
            assert!(fb.failed(1, Failure::Overloaded, ra, 0));
            assert_eq!(fb.before_send(1, 0), Step::Wait { ms: 1_000 }, "{ra:?}");
        }
    }

    #[test]
    fn a_rest_past_the_deadline_skips_the_draw_without_sending() {
        let mut fb = Fallback::new(
            FallbackPolicy {
                max_wait_ms: 60_000,
                ..policy()
            },
            0,
        );
        assert!(fb.failed(0, Failure::Overloaded, Some("10"), 0));
        assert_eq!(fb.before_send(0, 0), Step::Skip);
        assert!(fb.failed(0, Failure::Resting, None, 0));
        // Resting does not extend the rest; another group is still asked.
        assert_eq!(fb.before_send(1, 0), Step::Send { timeout_ms: 4_000 });
        assert_eq!(fb.failures(), [Failure::Overloaded, Failure::Resting]);
    }

    #[test]
    fn an_unreachable_group_backs_off_doubling() {
        let mut fb = Fallback::new(
            FallbackPolicy {
                max_redraws: 10,
                deadline_ms: 100_000,
                ..policy()
            },
            0,
        );
        let mut now = 0;
        for want in [100, 200, 400, 800, 1_600, 3_200] {
            assert!(fb.failed(7, Failure::Unreachable, None, now));
            assert_eq!(fb.before_send(7, now), Step::Wait { ms: want });
            now += want;
            assert_eq!(fb.before_send(7, now), Step::Send { timeout_ms: 4_000 });
        }
    }

    #[test]
    fn the_deadline_ends_the_redraws() {
        let mut fb = Fallback::new(policy(), 0);
        assert!(fb.failed(0, Failure::Timeout, None, 9_999));
        assert!(!fb.failed(1, Failure::Timeout, None, 10_000));
    }

    #[test]
    fn statuses_and_names() {
        assert_eq!(Failure::of_status(503), Some(Failure::Overloaded));
        assert_eq!(Failure::of_status(429), Some(Failure::Overloaded));
        assert_eq!(Failure::of_status(500), Some(Failure::ServerError));
        assert_eq!(Failure::of_status(504), Some(Failure::ServerError));
        for s in [200, 400, 404, 421, 413] {
            assert_eq!(Failure::of_status(s), None, "{s}");
        }
        for f in Failure::ALL {
            assert_eq!(Failure::from_name(f.name()), Some(f));
        }
        assert_eq!(Failure::from_name("nope"), None);
    }

    #[test]
    fn the_stated_bound() {
        let p = FallbackPolicy::default();
        assert_eq!(p.max_redraws, 12);
        assert!(u64::from(p.max_redraws + 1) * p.attempt_timeout_ms <= p.deadline_ms);
        assert!((p.failure_probability(1.0 / 3.0) - 6.27e-7).abs() < 1e-9);
        assert!((p.failure_probability(0.5) - 1.22e-4).abs() < 1e-6);
        assert_eq!(p.failure_probability(0.0), 0.0);
    }

    #[test]
    fn stats_count_fallbacks_and_give_ups() {
        let mut s = FallbackStats::default();
        let mut fb = Fallback::new(policy(), 0);
        s.add(&fb, false);
        assert_eq!(
            (s.queries, s.attempts, s.fallbacks, s.gave_up),
            (1, 1, 0, 0)
        );
        fb.failed(0, Failure::Unreachable, None, 0);
        s.add(&fb, false);
        assert_eq!(
            (s.queries, s.attempts, s.fallbacks, s.gave_up),
            (2, 3, 1, 0)
        );
        for _ in 0..3 {
            fb.failed(0, Failure::ServerError, None, 0);
        }
        s.add(&fb, true);
        assert_eq!(
            (s.queries, s.attempts, s.fallbacks, s.gave_up),
            (3, 7, 4, 1)
        );
        assert_eq!(
            FallbackStats::reasons(fb.failures()),
            "unreachable ×1, server_error ×3"
        );
        assert_eq!(FallbackStats::reasons(&[]), "none");
        assert_eq!(s.failures["unreachable"], 2);
        assert_eq!(s.failures["server_error"], 3);
        let mut t = FallbackStats::default();
        t.merge(&s);
        t.merge(&s);
        assert_eq!((t.attempts, t.failures["unreachable"]), (14, 4));
    }
}
