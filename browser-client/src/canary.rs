//! Checking the auditor with canary probes (docs/protocol.md §6.2).
//!
//! A LOGGED answer is only as good as the auditor's filters: an auditor that
//! colludes with a log could serve databases of ones, and every audit would
//! answer LOGGED. PIR hides which bit a query reads, so the auditor cannot
//! answer one query honestly and the next one falsely; it can only change
//! the databases, and that changes how often *any* query reads a 1.
//!
//! A canary is a probe for a random 32-byte leaf hash that no log holds, in
//! a uniformly random filter: to the auditor it is one more query to a
//! random database. It reads 1 exactly when it hits a set bit, so its
//! LOGGED rate must be the epoch's fill ratio, which the manifest states.
//! [`CanaryTally`] keeps the last [`WINDOW`] canaries of one auditor and
//! tests their count of ones against the binomial distribution of the
//! stated ratio, both tails at [`ALPHA`]: an auditor whose filters are all
//! ones, all zeros, or filled at another ratio than it claims is flagged
//! ([`CanaryVerdict`]). At the fill ratio 0.117 (k = 8), an auditor that
//! answers 1 everywhere is flagged after 7 canaries and one that answers 0
//! everywhere after 112 ([`canaries_to_flag`]).

use audit_proto::LeafHash;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Canaries kept per auditor (the newest; older ones are dropped, so an
/// auditor that turns dishonest is judged on its recent answers).
pub const WINDOW: usize = 256;

/// The probability, per tail and per check, that an honest auditor is
/// flagged.
pub const ALPHA: f64 = 1e-6;

/// A random leaf hash for a canary, from the OS CSPRNG (the browser's in
/// wasm32). No log holds it (2^-256 chance otherwise).
pub fn canary_leaf() -> Result<LeafHash> {
    let mut leaf = [0u8; 32];
    getrandom::getrandom(&mut leaf).map_err(|e| Error::Random(e.to_string()))?;
    Ok(LeafHash::new(leaf))
}

/// One canary's answer.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CanaryProbe {
    /// Epoch queried.
    pub epoch: u64,
    /// The fill ratio the epoch's manifest states (or the expected one for a
    /// manifest without `fill_ratio`).
    pub claimed: f64,
    /// Whether the probe read 1.
    pub logged: bool,
}

/// The canaries of one auditor.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CanaryTally {
    /// The auditor's base URL; a tally of another auditor starts clean.
    pub auditor: String,
    /// The last [`WINDOW`] canaries, oldest first.
    pub recent: Vec<CanaryProbe>,
}

/// What the canaries say about the auditor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CanaryVerdict {
    /// The LOGGED rate agrees with the stated fill ratio (or there are too
    /// few canaries to tell).
    Consistent,
    /// Far more canaries answered LOGGED than the stated ratio allows: the
    /// auditor's filters hold more ones than it says (at worst, all ones:
    /// every audit answers LOGGED, whatever the log did).
    TooManyLogged,
    /// Far fewer canaries answered LOGGED than the stated ratio allows: the
    /// filters hold fewer ones than it says (at worst, all zeros: every
    /// audit answers NOT FOUND).
    TooFewLogged,
}

/// The test's figures, for people and for the popup.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CanaryCheck {
    /// The auditor.
    pub auditor: String,
    /// Canaries in the window.
    pub probes: usize,
    /// Of which answered LOGGED.
    pub logged: usize,
    /// The fill ratio the canaries measured (`logged / probes`; `None`
    /// without canaries).
    pub measured: Option<f64>,
    /// The mean of the ratios the manifests stated for those canaries.
    pub claimed: Option<f64>,
    /// P(at least `logged` ones) under the stated ratio.
    pub p_at_least: f64,
    /// P(at most `logged` ones) under the stated ratio.
    pub p_at_most: f64,
    /// The conclusion.
    pub verdict: CanaryVerdict,
    /// The sentence for people.
    pub message: String,
}

impl CanaryTally {
    /// An empty tally for `auditor`.
    pub fn new(auditor: &str) -> CanaryTally {
        CanaryTally {
            auditor: auditor.to_owned(),
            recent: Vec::new(),
        }
    }

    /// Records one canary of `auditor`: a tally of another auditor is
    /// emptied first. A `claimed` ratio outside [0, 1] is refused.
    pub fn record(&mut self, auditor: &str, probe: CanaryProbe) -> Result<()> {
        if !(0.0..=1.0).contains(&probe.claimed) {
            return Err(Error::Invalid(format!(
                "fill ratio {} is not in [0, 1]",
                probe.claimed
            )));
        }
        if self.auditor != auditor {
            *self = CanaryTally::new(auditor);
        }
        self.recent.push(probe);
        if self.recent.len() > WINDOW {
            let extra = self.recent.len() - WINDOW;
            self.recent.drain(..extra);
        }
        Ok(())
    }

    /// Tests the window's count of ones against the binomial distribution
    /// of the mean stated ratio, each tail at [`ALPHA`].
    pub fn check(&self) -> CanaryCheck {
        let n = self.recent.len();
        let ones = self.recent.iter().filter(|c| c.logged).count();
        let claimed = (n > 0)
            .then(|| self.recent.iter().map(|c| c.claimed).sum::<f64>() / n as f64)
            .map(|p| p.clamp(0.0, 1.0));
        let measured = (n > 0).then(|| ones as f64 / n as f64);
        let p = claimed.unwrap_or(0.0);
        let p_at_least = binomial_at_least(n as u64, ones as u64, p);
        let p_at_most = binomial_at_most(n as u64, ones as u64, p);
        let verdict = if n == 0 {
            CanaryVerdict::Consistent
        } else if p_at_least < ALPHA {
            CanaryVerdict::TooManyLogged
        } else if p_at_most < ALPHA {
            CanaryVerdict::TooFewLogged
        } else {
            CanaryVerdict::Consistent
        };
        let message = match (verdict, measured) {
            (_, None) => "no canary probes yet: the auditor's honesty is not checked yet".into(),
            (CanaryVerdict::Consistent, Some(m)) => format!(
                "canaries consistent with the auditor: {ones} of {n} random leaves no log holds \
                 answered LOGGED (measured fill ratio {m:.3}, the auditor states {p:.3})"
            ),
            (CanaryVerdict::TooManyLogged, Some(m)) => format!(
                "the auditor answers LOGGED too often: {ones} of {n} random leaves no log holds \
                 answered LOGGED (measured fill ratio {m:.3}, the auditor states {p:.3}; \
                 probability {p_at_least:.1e} for an honest auditor). Its LOGGED answers \
                 cannot be trusted"
            ),
            (CanaryVerdict::TooFewLogged, Some(m)) => format!(
                "the auditor answers LOGGED too rarely: {ones} of {n} random leaves no log holds \
                 answered LOGGED (measured fill ratio {m:.3}, the auditor states {p:.3}; \
                 probability {p_at_most:.1e} for an honest auditor). Its NOT FOUND answers \
                 cannot be trusted"
            ),
        };
        CanaryCheck {
            auditor: self.auditor.clone(),
            probes: n,
            logged: ones,
            measured,
            claimed,
            p_at_least,
            p_at_most,
            verdict,
            message,
        }
    }
}

/// How many canaries, all answering 1 (`ones`) or all 0, flag an auditor
/// that states fill ratio `p`: the least n with p^n < [`ALPHA`] (ones) or
/// (1 − p)^n < [`ALPHA`] (zeros); `None` when no number does (p = 1 for
/// ones, p = 0 for zeros).
pub fn canaries_to_flag(p: f64, ones: bool) -> Option<u64> {
    let q = if ones { p } else { 1.0 - p };
    if !(0.0..1.0).contains(&q) {
        return None;
    }
    if q == 0.0 {
        return Some(1);
    }
    (1..=1_000_000u64).find(|&n| q.powi(n as i32) < ALPHA)
}

/// The binomial probability masses P(X = i), i = 0..=n, for X ~
/// Binomial(n, p), computed term by term in logarithms (no overflow for any
/// n the window holds).
fn binomial_pmf(n: u64, p: f64) -> Vec<f64> {
    if p <= 0.0 || p >= 1.0 {
        let at = if p <= 0.0 { 0 } else { n };
        return (0..=n).map(|i| if i == at { 1.0 } else { 0.0 }).collect();
    }
    let step = (p / (1.0 - p)).ln();
    let mut ln = n as f64 * (1.0 - p).ln();
    let mut out = Vec::with_capacity(n as usize + 1);
    for i in 0..=n {
        out.push(ln.exp());
        if i < n {
            ln += ((n - i) as f64 / (i + 1) as f64).ln() + step;
        }
    }
    out
}

/// P(X ≥ k) for X ~ Binomial(n, p).
fn binomial_at_least(n: u64, k: u64, p: f64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    binomial_pmf(n, p)[k.min(n + 1) as usize..]
        .iter()
        .sum::<f64>()
        .min(1.0)
}

/// P(X ≤ k) for X ~ Binomial(n, p).
fn binomial_at_most(n: u64, k: u64, p: f64) -> f64 {
    if k >= n {
        return 1.0;
    }
    binomial_pmf(n, p)[..=k as usize]
        .iter()
        .sum::<f64>()
        .min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(answers: impl IntoIterator<Item = bool>, claimed: f64) -> CanaryTally {
        let mut t = CanaryTally::new("https://a.example");
        for logged in answers {
            t.record(
                "https://a.example",
                CanaryProbe {
                    epoch: 1,
                    claimed,
                    logged,
                },
            )
            .unwrap();
        }
        t
    }

    #[test]
    fn binomial_tails_match_closed_forms() {
        assert!((binomial_at_least(3, 3, 0.5) - 0.125).abs() < 1e-12);
        assert!((binomial_at_most(3, 0, 0.5) - 0.125).abs() < 1e-12);
        assert!((binomial_at_least(10, 1, 0.1) - (1.0 - 0.9f64.powi(10))).abs() < 1e-12);
        assert_eq!(binomial_at_least(5, 0, 0.3), 1.0);
        assert_eq!(binomial_at_most(5, 5, 0.3), 1.0);
        assert_eq!(binomial_at_least(5, 1, 0.0), 0.0);
        assert_eq!(binomial_at_most(5, 4, 1.0), 0.0);
        let total: f64 = binomial_pmf(256, 0.117).iter().sum();
        assert!((total - 1.0).abs() < 1e-9, "{total}");
    }

    #[test]
    fn all_ones_all_zeros_and_a_wrong_fill_are_flagged_within_the_stated_counts() {
        let p = 0.117;
        let ones = canaries_to_flag(p, true).unwrap();
        let zeros = canaries_to_flag(p, false).unwrap();
        assert_eq!((ones, zeros), (7, 112));
        let t = tally(std::iter::repeat_n(true, ones as usize - 1), p);
        assert_eq!(t.check().verdict, CanaryVerdict::Consistent);
        let t = tally(std::iter::repeat_n(true, ones as usize), p);
        let c = t.check();
        assert_eq!(c.verdict, CanaryVerdict::TooManyLogged, "{c:?}");
        assert!(c.message.contains("LOGGED too often"), "{}", c.message);
        assert_eq!(c.measured, Some(1.0));
        let t = tally(std::iter::repeat_n(false, zeros as usize - 1), p);
        assert_eq!(t.check().verdict, CanaryVerdict::Consistent);
        let t = tally(std::iter::repeat_n(false, zeros as usize), p);
        assert_eq!(t.check().verdict, CanaryVerdict::TooFewLogged);
        // Filters at 0.5 where 0.117 is stated: half the canaries answer 1.
        let t = tally((0..64).map(|i| i % 2 == 0), p);
        assert_eq!(t.check().verdict, CanaryVerdict::TooManyLogged);
        // An honest window: 30 of 256 at 0.117.
        let t = tally((0..256).map(|i| i % 256 < 30), p);
        let c = t.check();
        assert_eq!(c.verdict, CanaryVerdict::Consistent, "{c:?}");
        assert!((c.measured.unwrap() - 30.0 / 256.0).abs() < 1e-12);
        assert_eq!(canaries_to_flag(1.0, true), None);
        assert_eq!(canaries_to_flag(0.0, false), None);
        assert_eq!(canaries_to_flag(0.0, true), Some(1));
    }

    #[test]
    fn a_new_auditor_starts_clean_and_the_window_is_capped() {
        let mut t = tally(std::iter::repeat_n(true, 300), 0.1);
        assert_eq!(t.recent.len(), WINDOW);
        let probe = CanaryProbe {
            epoch: 2,
            claimed: 0.1,
            logged: false,
        };
        t.record("https://b.example", probe).unwrap();
        assert_eq!(t.auditor, "https://b.example");
        assert_eq!(t.recent, vec![probe]);
        assert!(t
            .record(
                "https://b.example",
                CanaryProbe {
                    claimed: 1.5,
                    ..probe
                }
            )
            .is_err());
        assert_eq!(
            CanaryTally::default().check().verdict,
            CanaryVerdict::Consistent
        );
        assert_ne!(canary_leaf().unwrap(), canary_leaf().unwrap());
    }

    #[test]
    fn honest_auditors_are_rarely_flagged() {
        // 2000 windows of 256 fair draws at p = 0.117 from a seeded RNG:
        // none flagged (each tail 1e-6 per check).
        use rand_core::{RngCore, SeedableRng};
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
        for _ in 0..2000 {
            let t = tally(
                (0..WINDOW)
                    .map(|_| ((rng.next_u64() >> 11) as f64 / ((1u64 << 53) as f64)) < 0.117),
                0.117,
            );
            assert_eq!(t.check().verdict, CanaryVerdict::Consistent);
        }
    }
}
