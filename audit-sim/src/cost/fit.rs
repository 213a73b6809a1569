//! The server-time model: single-core answer times at several database
//! sizes fitted as t(bytes) = a + b·bytes ([`fit()`]), with its errors and a
//! leave-one-out check of the extrapolation.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// One single-thread answer time at one database size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FitPoint {
    /// Database bytes scanned by one answer (records ℓ1·ℓ2).
    pub db_bytes: f64,
    /// Answer time of one query on one core (seconds).
    pub seconds: f64,
    /// Where the point comes from (file or in-process measurement).
    pub source: String,
    /// DBSetup time of that database on one core (seconds), when measured
    /// here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup_seconds: Option<f64>,
}

/// The fitted model t(bytes) = `fixed_seconds` + `seconds_per_byte`·bytes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    /// Fixed cost per query (seconds): DoublePIR pass and packing.
    pub fixed_seconds: f64,
    /// Cost per database byte (seconds): the SimplePIR scan.
    pub seconds_per_byte: f64,
    /// Number of points fitted.
    pub points: usize,
    /// Root mean square of the relative errors (pred − t)/t over the points.
    pub rel_rms_error: f64,
    /// Largest |pred − t|/t over the points.
    pub max_rel_error: f64,
    /// Leave-one-out check of the extrapolation: the points at the largest
    /// size are left out, the rest refitted, and the signed relative error
    /// (pred − t)/t of its prediction at the largest size reported (mean
    /// over the points there). `None` when fewer than two distinct sizes
    /// remain.
    pub loo_rel_error_largest: Option<f64>,
}

impl Fit {
    /// Predicted single-thread answer time (seconds) for `db_bytes`.
    pub fn predict(&self, db_bytes: f64) -> f64 {
        self.fixed_seconds + self.seconds_per_byte * db_bytes
    }
}

/// Least-squares fit of t = a + b·bytes minimising Σ((pred − t)/t)², i.e.
/// relative error, since the sizes span decades. Needs at least two
/// distinct sizes and positive, finite sizes and times.
pub fn fit(points: &[FitPoint]) -> Result<Fit> {
    for p in points {
        if !(p.db_bytes.is_finite() && p.db_bytes > 0.0 && p.seconds.is_finite() && p.seconds > 0.0)
        {
            return Err(Error::Invalid(format!(
                "fit point {:?}: size {} and time {} must be positive and finite",
                p.source, p.db_bytes, p.seconds
            )));
        }
    }
    if distinct_sizes(points.iter()) < 2 {
        return Err(Error::Invalid(format!(
            "the fit needs answer times at two or more database sizes ({} point(s) given)",
            points.len()
        )));
    }
    let (a, b) = solve(points)
        .ok_or_else(|| Error::Invalid("fit points are numerically degenerate".into()))?;
    let rel: Vec<f64> = points
        .iter()
        .map(|p| (a + b * p.db_bytes - p.seconds) / p.seconds)
        .collect();
    let rel_rms_error = (rel.iter().map(|e| e * e).sum::<f64>() / rel.len() as f64).sqrt();
    let max_rel_error = rel.iter().fold(0.0f64, |m, e| m.max(e.abs()));
    let largest = points.iter().map(|p| p.db_bytes).fold(0.0, f64::max);
    let rest: Vec<FitPoint> = points
        .iter()
        .filter(|p| p.db_bytes < largest)
        .cloned()
        .collect();
    let loo_rel_error_largest = if distinct_sizes(rest.iter()) >= 2 {
        solve(&rest).map(|(a2, b2)| {
            let top: Vec<f64> = points
                .iter()
                .filter(|p| p.db_bytes == largest)
                .map(|p| (a2 + b2 * p.db_bytes - p.seconds) / p.seconds)
                .collect();
            top.iter().sum::<f64>() / top.len() as f64
        })
    } else {
        None
    };
    Ok(Fit {
        fixed_seconds: a,
        seconds_per_byte: b,
        points: points.len(),
        rel_rms_error,
        max_rel_error,
        loo_rel_error_largest,
    })
}

pub(super) fn distinct_sizes<'a>(points: impl Iterator<Item = &'a FitPoint>) -> usize {
    let mut sizes: Vec<f64> = points.map(|p| p.db_bytes).collect();
    sizes.sort_by(f64::total_cmp);
    sizes.dedup();
    sizes.len()
}

/// Weighted normal equations with weights 1/t² on x scaled to [0, 1].
fn solve(points: &[FitPoint]) -> Option<(f64, f64)> {
    let scale = points.iter().map(|p| p.db_bytes).fold(0.0, f64::max);
    if scale <= 0.0 {
        return None;
    }
    let (mut s0, mut s1, mut s2, mut t0, mut t1) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for p in points {
        let w = 1.0 / (p.seconds * p.seconds);
        let u = p.db_bytes / scale;
        s0 += w;
        s1 += w * u;
        s2 += w * u * u;
        t0 += w * p.seconds;
        t1 += w * u * p.seconds;
    }
    let det = s0 * s2 - s1 * s1;
    if !(det.is_finite() && det > 1e-12 * s0 * s2) {
        return None;
    }
    let a = (s2 * t0 - s1 * t1) / det;
    let b = (s0 * t1 - s1 * t0) / det / scale;
    (a.is_finite() && b.is_finite()).then_some((a, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::cost::format::GIB;
    use crate::cost::test_util::pt;

    #[test]
    fn fit_recovers_a_line() {
        let (a, b) = (0.008, 4.0e-11);
        let pts: Vec<FitPoint> = [1u64 << 20, 1 << 24, 1 << 27, 1 << 30, 1 << 32]
            .iter()
            .map(|&x| pt(x as f64, a + b * x as f64))
            .collect();
        let f = fit(&pts).unwrap();
        assert!((f.fixed_seconds - a).abs() < 1e-12, "{f:?}");
        assert!((f.seconds_per_byte - b).abs() < 1e-20, "{f:?}");
        assert_eq!(f.points, 5);
        assert!(f.rel_rms_error < 1e-9 && f.max_rel_error < 1e-9, "{f:?}");
        assert!(f.loo_rel_error_largest.unwrap().abs() < 1e-9);
        assert!((f.predict(8.0 * GIB) - (a + b * 8.0 * GIB)).abs() < 1e-9);
    }

    #[test]
    fn fit_weights_relative_error_and_reports_it() {
        // 10 % noise on the smallest point must not wreck the slope.
        let mut pts: Vec<FitPoint> = [1u64 << 24, 1 << 28, 1 << 30, 1 << 32]
            .iter()
            .map(|&x| pt(x as f64, 0.01 + 3e-11 * x as f64))
            .collect();
        pts[0].seconds *= 1.1;
        let f = fit(&pts).unwrap();
        assert!(f.max_rel_error > 0.001 && f.max_rel_error < 0.1, "{f:?}");
        assert!((f.seconds_per_byte / 3e-11 - 1.0).abs() < 0.05, "{f:?}");
        // Two sizes: a fit but no leave-one-out.
        let f2 = fit(&pts[..2]).unwrap();
        assert!(f2.loo_rel_error_largest.is_none());
        assert!(f2.rel_rms_error < 1e-9);
    }

    #[test]
    fn fit_rejects_fewer_than_two_sizes_and_bad_points() {
        assert!(matches!(fit(&[]), Err(Error::Invalid(_))));
        assert!(matches!(fit(&[pt(1e6, 0.01)]), Err(Error::Invalid(_))));
        let same = [pt(1e6, 0.01), pt(1e6, 0.011), pt(1e6, 0.012)];
        assert!(matches!(fit(&same), Err(Error::Invalid(_))));
        assert!(matches!(
            fit(&[pt(1e6, 0.01), pt(2e6, -1.0)]),
            Err(Error::Invalid(_))
        ));
        assert!(matches!(
            fit(&[pt(f64::NAN, 0.01), pt(2e6, 0.02)]),
            Err(Error::Invalid(_))
        ));
    }
}
