//! Number formatting for the report: significant digits, binary units,
//! money, percentages.

/// Bytes per GiB.
pub(crate) const GIB: f64 = 1_073_741_824.0;

/// `v` with `sig` significant digits, trailing zeros trimmed, no exponent.
pub(crate) fn fmt_sig(v: f64, sig: i32) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v.is_finite() {
            "0".into()
        } else {
            format!("{v}")
        };
    }
    let mag = v.abs().log10().floor() as i32;
    let decimals = (sig - 1 - mag).clamp(0, 20) as usize;
    // Above `sig` integer digits, round away the excess ones too.
    let excess = mag + 1 - sig;
    let v = if excess > 0 {
        (v / 10f64.powi(excess)).round() * 10f64.powi(excess)
    } else {
        v
    };
    let mut out = format!("{v:.decimals$}");
    if out.contains('.') {
        out = out.trim_end_matches('0').trim_end_matches('.').to_owned();
    }
    let (int, frac) = match out.split_once('.') {
        Some((i, f)) => (i.to_owned(), format!(".{f}")),
        None => (out.clone(), String::new()),
    };
    format!("{}{frac}", group_thousands(&int))
}

pub(crate) fn group_thousands(int: &str) -> String {
    let (sign, digits) = match int.strip_prefix('-') {
        Some(d) => ("-", d),
        None => ("", int),
    };
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    format!("{sign}{out}")
}

/// Binary units, three significant digits.
pub(crate) fn fmt_bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b;
    let mut u = 0;
    while v.abs() >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{} B", fmt_sig(v.round(), 4))
    } else {
        format!("{} {}", fmt_sig(v, 3), UNITS[u])
    }
}

/// Clients: 10^k for a power of ten, else with thousands separators.
pub(crate) fn fmt_clients(n: f64) -> String {
    let e = n.log10().round();
    if n > 0.0 && (n - 10f64.powf(e)).abs() < 1e-9 * n {
        format!("10^{e}")
    } else {
        group_thousands(&format!("{n:.0}"))
    }
}

/// USD per client-week in the paper's style ($0.001822).
pub(crate) fn fmt_usd(v: f64) -> String {
    if v >= 1e-4 {
        format!("${v:.6}")
    } else {
        format!("${}", fmt_sig(v, 3))
    }
}

/// USD amounts like $1,822 or $2.35.
pub(crate) fn fmt_money(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("${}", group_thousands(&format!("{:.0}", v)))
    } else if v.abs() >= 1.0 {
        format!("${v:.2}")
    } else {
        format!("${}", fmt_sig(v, 3))
    }
}

pub(crate) fn fmt_seconds(v: f64) -> String {
    if v >= 0.1 {
        format!("{v:.2} s")
    } else {
        format!("{} s", fmt_sig(v, 3))
    }
}

pub(crate) fn fmt_pct(v: f64) -> String {
    format!("{}%", fmt_sig(v * 100.0, 2))
}

pub(crate) fn fmt_signed_pct(v: f64) -> String {
    let p = fmt_pct(v);
    if v > 0.0 {
        format!("+{p}")
    } else {
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::cost::PAPER_MB;

    #[test]
    fn formatting() {
        assert_eq!(fmt_bytes(16.0 * PAPER_MB), "16 MiB");
        assert_eq!(fmt_bytes(640.0 * 1024.0), "640 KiB");
        assert_eq!(fmt_bytes(11_967.0), "11.7 KiB");
        assert_eq!(fmt_bytes(500.0), "500 B");
        assert_eq!(fmt_usd(0.001569), "$0.001569");
        assert_eq!(fmt_usd(0.010610), "$0.010610");
        assert_eq!(fmt_usd(0.000022), "$0.000022");
        assert_eq!(fmt_money(1822.0000000002), "$1,822");
        assert_eq!(fmt_money(10863.0), "$10,863");
        assert_eq!(fmt_seconds(16.9), "16.90 s");
        assert_eq!(fmt_sig(1234567.0, 3), "1,230,000");
    }
}
