//! What an audit concluded, in words for people, with how certain it is
//! (docs/protocol.md §1 "Querying"). `sct-audit`, the wasm exports and
//! through them the extension all say it the same way:
//!
//! * **LOGGED** is probabilistic. One audit reads one bit of one random
//!   filter; a leaf that was never logged still reads 1 with probability
//!   equal to the filter's fill ratio (≈ 1/k, about 0.12 at k = 8), and a
//!   log that chooses its certificates adversarially gets at most ½
//!   (SimplePIR §6, Prop. 6.2). Every audit draws a fresh filter, so
//!   repeated audits of the same SCT multiply these odds.
//! * **NOT FOUND** is certain for that epoch's filters: a Bloom filter has
//!   no false negatives, so the leaf is not in the set the auditor
//!   published. Either the log did not publish it or the auditor's data is
//!   wrong; since the log may also have merged it late, the audit is
//!   repeated once in a later epoch before a misbehaviour report is made,
//!   and the report says that the log *or* the auditor misbehaved (the
//!   canaries, module `canary`, test the auditor).

use audit_proto::Manifest;
use serde::Serialize;

/// How likely a LOGGED answer is wrong: the probability that one audit of
/// an SCT that was never logged reads LOGGED.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Confidence {
    /// The epoch's fill ratio: measured (manifest `fill_ratio`) or, for a
    /// manifest that does not state it, expected from |S| and k·N.
    pub false_positive_rate: f64,
    /// Whether the ratio was measured when the epoch was built.
    pub measured: bool,
}

/// The bound against a log that chooses its certificates adversarially.
pub const ADVERSARIAL_BOUND: f64 = 0.5;

impl Confidence {
    /// Of the epoch `m`.
    pub fn of(m: &Manifest) -> Confidence {
        let (false_positive_rate, measured) = m.false_positive_rate();
        Confidence {
            false_positive_rate,
            measured,
        }
    }
}

/// The sentence for a LOGGED answer in `epoch`.
pub fn logged(epoch: u64, c: Confidence) -> String {
    format!(
        "LOGGED in epoch {epoch}, probably: one audit is probabilistic, and an SCT that was \
         never logged also passes it with probability {:.3} ({}), \
         at most {} against a log that chooses its certificates adversarially",
        c.false_positive_rate,
        if c.measured {
            "the fill ratio the auditor states for this epoch"
        } else {
            "the fill ratio expected for this epoch"
        },
        ADVERSARIAL_BOUND
    )
}

/// The sentence for a first NOT FOUND answer in `epoch`.
pub fn not_found(epoch: u64) -> String {
    format!(
        "NOT FOUND in epoch {epoch}: certain for this epoch's filters (they have no false \
         negatives, so the entry is not in the set the auditor published); either the log has \
         not published it yet or the auditor's data is wrong, so it is re-checked in a later \
         epoch before anything is reported"
    )
}

/// The sentence for a second NOT FOUND, in the `epochs` of a report.
pub fn misbehaviour(epochs: &[u64]) -> String {
    let list: Vec<String> = epochs.iter().map(u64::to_string).collect();
    format!(
        "NOT FOUND in epochs {}: certain for those epochs' filters; either the log has not \
         published the entry its SCT promised within its maximum merge delay, or the auditor's \
         filters are wrong (its canary check tests that): one of them misbehaved \
         (misbehaviour report)",
        list.join(" and ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logged_states_its_odds_and_not_found_its_certainty() {
        let c = Confidence {
            false_positive_rate: 0.117_188,
            measured: true,
        };
        let s = logged(7, c);
        assert!(s.starts_with("LOGGED in epoch 7"), "{s}");
        assert!(
            s.contains("0.117") && s.contains("(the fill ratio the auditor states for this epoch)"),
            "{s}"
        );
        assert!(s.contains("at most 0.5"), "{s}");
        let e = logged(
            7,
            Confidence {
                measured: false,
                ..c
            },
        );
        assert!(e.contains("the fill ratio expected for this epoch"), "{e}");
        let n = not_found(8);
        assert!(n.starts_with("NOT FOUND in epoch 8: certain"), "{n}");
        assert!(n.contains("or the auditor's data is wrong"), "{n}");
        let r = misbehaviour(&[8, 9]);
        assert!(r.contains("epochs 8 and 9"), "{r}");
        assert!(
            r.contains("the log has not published") && r.contains("or the auditor's"),
            "{r}"
        );
    }
}
