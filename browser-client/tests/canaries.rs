//! Canary probes against hostile auditors (docs/protocol.md §6.2): fakes on
//! 127.0.0.1:0 that state the fill ratio 0.117 while their databases hold
//! all ones, all zeros, or bits at density 0.5, and one honest fake (density
//! 0.117). `run_canaries` flags the hostile ones within the number of
//! canaries `canaries_to_flag` states and never the honest one; a new
//! auditor starts clean; a failed query does not stop the others.

mod support;

use std::sync::Arc;

use browser_client::audit::run_canaries;
use browser_client::canary::{canaries_to_flag, CanaryTally, CanaryVerdict};
use browser_client::fallback::FallbackPolicy;
use browser_client::net::Auditor;
use browser_client::probe::Prober;
use support::fake_auditor::{start, Failure, Fill};

const CLAIMED: f64 = 0.117;

/// Sends canaries `step` at a time until the verdict is not `Consistent`
/// or `max` canaries were sent; returns the verdict and the canaries sent.
async fn probe_until_flagged(fill: Fill, step: usize, max: usize) -> (CanaryVerdict, usize) {
    let fake = start("127.0.0.1:0", CLAIMED, fill).await;
    let auditor = Auditor::new(&fake.url).unwrap();
    let prober = Prober::new(Arc::new(auditor.manifest().await.unwrap().0));
    let mut tally = CanaryTally::new(auditor.base());
    let mut sent = 0;
    while sent < max {
        let run = run_canaries(&auditor, &prober, &mut tally, step)
            .await
            .unwrap();
        assert_eq!((run.answered, run.failed), (step, 0));
        sent += step;
        if run.check.verdict != CanaryVerdict::Consistent {
            return (run.check.verdict, sent);
        }
    }
    (tally.check().verdict, sent)
}

#[tokio::test]
async fn an_all_ones_auditor_is_flagged_within_the_stated_count() {
    let bound = canaries_to_flag(CLAIMED, true).unwrap() as usize;
    let (verdict, sent) = probe_until_flagged(Fill::Ones, 1, 1000).await;
    assert_eq!(verdict, CanaryVerdict::TooManyLogged);
    assert_eq!(sent, bound);
}

#[tokio::test]
async fn an_all_zeros_auditor_is_flagged_within_the_stated_count() {
    let bound = canaries_to_flag(CLAIMED, false).unwrap() as usize;
    let (verdict, sent) = probe_until_flagged(Fill::Zeros, 4, 1000).await;
    assert_eq!(verdict, CanaryVerdict::TooFewLogged);
    assert!(sent >= bound && sent < bound + 4, "{sent} vs {bound}");
}

#[tokio::test]
async fn a_wrong_fill_is_flagged_and_an_honest_one_is_not() {
    // Half the bits set where 0.117 is stated: flagged within 64 canaries
    // but for a chance of about 1e-5 (at most 18 ones of 64 at density 0.5).
    let (verdict, sent) = probe_until_flagged(Fill::Random(0.5), 4, 64).await;
    assert_eq!(verdict, CanaryVerdict::TooManyLogged, "after {sent}");
    // Honest: the stated density; 64 canaries stay consistent (a false
    // alarm has probability below 2e-6).
    let (verdict, sent) = probe_until_flagged(Fill::Random(CLAIMED), 8, 64).await;
    assert_eq!((verdict, sent), (CanaryVerdict::Consistent, 64));
}

#[tokio::test]
async fn a_new_auditor_starts_clean_and_a_failed_query_does_not_stop_the_others() {
    let ones = start("127.0.0.1:0", CLAIMED, Fill::Ones).await;
    let a = Auditor::new(&ones.url).unwrap();
    let prober = Prober::new(Arc::new(a.manifest().await.unwrap().0));
    let mut tally = CanaryTally::new(a.base());
    let run = run_canaries(&a, &prober, &mut tally, 8).await.unwrap();
    assert_eq!(run.check.verdict, CanaryVerdict::TooManyLogged);
    assert_eq!(run.check.measured, Some(1.0));
    assert!(
        run.check.message.contains("LOGGED too often"),
        "{}",
        run.check.message
    );

    let honest = start("127.0.0.1:0", CLAIMED, Fill::Random(CLAIMED)).await;
    honest.fail_next(&[Failure {
        status: 503,
        retry_after: Some(60),
    }]);
    // Without the fallback (which would wait out the Retry-After and ask
    // again), the 503 fails its query.
    let b = Auditor::new(&honest.url)
        .unwrap()
        .with_fallback(FallbackPolicy::never());
    let prober = Prober::new(Arc::new(b.manifest().await.unwrap().0));
    let run = run_canaries(&b, &prober, &mut tally, 3).await.unwrap();
    assert_eq!((run.answered, run.failed), (2, 1));
    assert_eq!(tally.auditor, b.base());
    assert_eq!(
        tally.recent.len(),
        2,
        "the first auditor's canaries were kept"
    );
    assert_eq!(run.check.probes, 2);
    assert_eq!(run.check.verdict, CanaryVerdict::Consistent);
}
