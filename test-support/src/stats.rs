//! Pearson's χ² goodness-of-fit test, for the tests that check a choice
//! is uniform (the databases clients ask).

/// The p-value of Pearson's χ² test of `observed` counts against the
/// probabilities `expected` (same length, summing to 1): the probability
/// that counts drawn from `expected` deviate at least as much. Categories
/// of zero probability must have zero counts (else the p-value is 0).
pub fn chi_square_p(observed: &[u64], expected: &[f64]) -> f64 {
    assert_eq!(observed.len(), expected.len(), "one probability per count");
    let n: u64 = observed.iter().sum();
    let mut stat = 0.0;
    let mut categories = 0usize;
    for (&o, &p) in observed.iter().zip(expected) {
        if p <= 0.0 {
            if o > 0 {
                return 0.0;
            }
            continue;
        }
        let e = p * n as f64;
        stat += (o as f64 - e).powi(2) / e;
        categories += 1;
    }
    if categories < 2 {
        return 1.0;
    }
    upper_gamma_q((categories - 1) as f64 / 2.0, stat / 2.0)
}

/// The regularised upper incomplete gamma function Q(a, x) (series below
/// a + 1, Lentz's continued fraction above).
fn upper_gamma_q(a: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 1.0;
    }
    let ln_pre = a * x.ln() - x - ln_gamma(a);
    if x < a + 1.0 {
        let (mut term, mut sum, mut ap) = (1.0 / a, 1.0 / a, a);
        for _ in 0..10_000 {
            ap += 1.0;
            term *= x / ap;
            sum += term;
            if term.abs() < sum.abs() * 1e-15 {
                break;
            }
        }
        (1.0 - sum * ln_pre.exp()).clamp(0.0, 1.0)
    } else {
        let tiny = 1e-300;
        let mut b = x + 1.0 - a;
        let mut c = 1.0 / tiny;
        let mut d = 1.0 / b;
        let mut h = d;
        for i in 1..10_000 {
            let an = -(i as f64) * (i as f64 - a);
            b += 2.0;
            d = an * d + b;
            if d.abs() < tiny {
                d = tiny;
            }
            c = b + an / c;
            if c.abs() < tiny {
                c = tiny;
            }
            d = 1.0 / d;
            let del = d * c;
            h *= del;
            if (del - 1.0).abs() < 1e-15 {
                break;
            }
        }
        (ln_pre.exp() * h).clamp(0.0, 1.0)
    }
}

/// ln Γ(x), x > 0 (Lanczos, g = 7).
fn ln_gamma(x: f64) -> f64 {
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + 7.5;
    for (i, &c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // χ² with 1 degree of freedom at 3.841: p = 0.05; 2 dof at 9.210: 0.01;
        // 5 dof at 11.07: 0.05.
        assert!((upper_gamma_q(0.5, 3.841 / 2.0) - 0.05).abs() < 1e-3);
        assert!((upper_gamma_q(1.0, 9.210 / 2.0) - 0.01).abs() < 1e-4);
        assert!((upper_gamma_q(2.5, 11.07 / 2.0) - 0.05).abs() < 1e-3);
        assert!((ln_gamma(5.0) - 24f64.ln()).abs() < 1e-12);
        // Exactly expected counts: p = 1; a lopsided die: p ≈ 0.
        assert!((chi_square_p(&[100, 100, 100], &[1.0 / 3.0; 3]) - 1.0).abs() < 1e-12);
        assert!(chi_square_p(&[300, 0, 0], &[1.0 / 3.0; 3]) < 1e-100);
        assert_eq!(chi_square_p(&[1, 2], &[1.0, 0.0]), 0.0);
        // Statistic 10.0 with 4 degrees of freedom: p = 0.0404.
        let p = chi_square_p(&[30, 10, 20, 20, 20], &[0.2; 5]);
        assert!((p - 0.0404).abs() < 1e-3, "{p}");
    }
}
