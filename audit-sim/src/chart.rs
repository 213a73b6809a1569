//! The batch curve as a picture: `pir-bench --batch k --json` runs of one
//! database size, one file (or object) per k, drawn as the answer time per
//! query against k beside the SimplePIR pass's two bounds (the memory
//! stream, |DB| ÷ bandwidth ÷ k, and the multiplies, |DB| ÷ MAC peak, YPIR
//! §4.3 cross-client batching), and the fractions of its bound the pass
//! reached, from memory and over a cache-resident database. An operator
//! reads off the batch size from which more queries per pass stop paying;
//! `docs/benchmarks.md` shows the curves of the machines it measured.
//!
//! Input is the operator's files: every length is capped, the runs must be
//! single-thread and of one database size, and a run that decoded a wrong
//! bit is refused rather than drawn.

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::cost::{fmt_sig, read_bench_objects, xml};
use crate::error::{Error, Result};

/// Most runs one chart takes (k = 1, 2, 4, …, 64 is seven).
pub const MAX_CURVE_POINTS: usize = 64;

/// Largest batch size a run may name.
const MAX_BATCH: u64 = 1 << 16;

/// One `pir-bench --batch k` run.
#[derive(Clone, Debug, PartialEq)]
pub struct CurvePoint {
    /// Queries per pass.
    pub k: u64,
    /// Whole answer (the batch), median over the trials, ms.
    pub answer_ms: f64,
    /// The SimplePIR pass of the batch, median, ms.
    pub simplepir_ms: f64,
    /// DoublePIR and packing of the batch, medians added, ms.
    pub rest_ms: f64,
    /// Single-core read bandwidth of the run, GB/s (thread CPU time where
    /// the run timed it).
    pub bandwidth_gb_s: f64,
    /// The kernel's multiply peak, G u8 × u32 MACs per second (none for
    /// the scalar kernel).
    pub mac_peak_g_per_s: Option<f64>,
    /// `simplepir_bound_fraction`: the pass against max(memory, multiply)
    /// bound.
    pub bound_fraction: Option<f64>,
    /// `cached_pass.fraction`: the same pass over a database in L2.
    pub cached_fraction: Option<f64>,
    /// `overlap_ceiling.bound_fraction`: what the stream leaves a perfect
    /// kernel.
    pub overlap_fraction: Option<f64>,
}

/// The runs of one database size, by increasing k (the measured curve
/// itself, as `pir-bench` printed it; [`crate::scale::BatchCurve`] is the
/// cost report's own measurement).
#[derive(Clone, Debug, PartialEq)]
pub struct BatchRuns {
    /// log2 of the database's bits.
    pub db_bits: u64,
    /// Database bytes (one per record).
    pub db_bytes: u64,
    /// The SimplePIR kernel the runs used.
    pub kernel: String,
    /// The runs.
    pub points: Vec<CurvePoint>,
}

impl BatchRuns {
    /// The best bandwidth of the runs (GB/s): the memory bound drawn.
    pub fn bandwidth_gb_s(&self) -> f64 {
        self.points
            .iter()
            .map(|p| p.bandwidth_gb_s)
            .fold(0.0, f64::max)
    }

    /// The best multiply peak of the runs (G MAC/s), if the kernel has one.
    pub fn mac_peak_g_per_s(&self) -> Option<f64> {
        self.points
            .iter()
            .filter_map(|p| p.mac_peak_g_per_s)
            .reduce(f64::max)
    }

    /// The SimplePIR bound per query at batch `k`, ms: max(|DB| ÷
    /// bandwidth ÷ k, |DB| ÷ MAC peak).
    pub fn bound_ms(&self, k: f64) -> f64 {
        let mem = self.db_bytes as f64 / (self.bandwidth_gb_s() * 1e9) / k * 1e3;
        let mul = self
            .mac_peak_g_per_s()
            .map_or(0.0, |p| self.db_bytes as f64 / (p * 1e9) * 1e3);
        mem.max(mul)
    }
}

/// Reads the runs of a batch curve from `pir-bench --json` files (see
/// [`crate::cost::load_pir_bench_points`] for the file forms).
pub fn load_batch_curve(files: &[PathBuf]) -> Result<BatchRuns> {
    let mut curve: Option<BatchRuns> = None;
    for path in files {
        for item in &read_bench_objects(path)? {
            let (bits, bytes, kernel, point) = curve_point(item)
                .map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))?;
            let c = curve.get_or_insert_with(|| BatchRuns {
                db_bits: bits,
                db_bytes: bytes,
                kernel: kernel.clone(),
                points: Vec::new(),
            });
            if (bits, bytes) != (c.db_bits, c.db_bytes) || kernel != c.kernel {
                return Err(Error::Invalid(format!(
                    "{}: a run of 2^{bits} bits with the {kernel} kernel beside runs of 2^{} \
                     bits with {}: one curve is one database size and one kernel",
                    path.display(),
                    c.db_bits,
                    c.kernel
                )));
            }
            if c.points.iter().any(|p| p.k == point.k) {
                return Err(Error::Invalid(format!(
                    "{}: a second run at batch {}",
                    path.display(),
                    point.k
                )));
            }
            if c.points.len() == MAX_CURVE_POINTS {
                return Err(Error::Invalid(format!(
                    "more than {MAX_CURVE_POINTS} runs for one curve"
                )));
            }
            c.points.push(point);
        }
    }
    let mut curve = curve.ok_or_else(|| Error::Invalid("no pir-bench file named".into()))?;
    if curve.points.len() < 2 {
        return Err(Error::Invalid(
            "a curve needs runs at two batch sizes or more".into(),
        ));
    }
    curve.points.sort_by_key(|p| p.k);
    Ok(curve)
}

/// One run → (db_bits, db_bytes, kernel, point). Errors are plain messages
/// (the caller adds the path).
fn curve_point(
    v: &serde_json::Value,
) -> std::result::Result<(u64, u64, String, CurvePoint), String> {
    let obj = v
        .as_object()
        .ok_or_else(|| "expected a JSON object per pir-bench run".to_owned())?;
    let uint = |field: &str| {
        obj.get(field)
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| format!("field {field:?} missing or not a non-negative integer"))
    };
    // a positive finite number, or None where the field is absent or null
    let opt = |v: Option<&serde_json::Value>, field: &str| match v {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(x) => match x.as_f64() {
            Some(f) if f.is_finite() && f > 0.0 => Ok(Some(f)),
            _ => Err(format!("field {field:?} is not a positive number")),
        },
    };
    let num =
        |field: &str| opt(obj.get(field), field)?.ok_or_else(|| format!("field {field:?} missing"));
    if uint("threads")? != 1 {
        return Err("a multi-thread run: the curve is per core (pir-bench --threads 1)".into());
    }
    if obj.get("all_correct").and_then(serde_json::Value::as_bool) != Some(true) {
        return Err("the run did not report all_correct: true; not drawn".into());
    }
    let k = uint("batch")?;
    if k == 0 || k > MAX_BATCH {
        return Err(format!("batch {k} outside 1..={MAX_BATCH}"));
    }
    let (bits, bytes) = (uint("db_bits")?, uint("db_bytes")?);
    if bytes == 0 {
        return Err("db_bytes is 0".into());
    }
    let kernel = obj
        .get("kernel")
        .and_then(serde_json::Value::as_str)
        .filter(|s| !s.is_empty() && s.len() <= 32)
        .ok_or_else(|| "field \"kernel\" missing or not a short string".to_owned())?
        .to_owned();
    let bandwidth = match opt(obj.get("mem_bw_cpu_time_gb_s"), "mem_bw_cpu_time_gb_s")? {
        Some(b) => b,
        None => num("mem_bw_gb_s")?,
    };
    let sub = |outer: &str, inner: &str| {
        opt(
            obj.get(outer).and_then(|o| o.get(inner)),
            &format!("{outer}.{inner}"),
        )
    };
    let point = CurvePoint {
        k,
        answer_ms: num("answer_ms_median")?,
        simplepir_ms: num("simplepir_ms")?,
        rest_ms: num("doublepir_ms")? + num("packing_ms")?,
        bandwidth_gb_s: bandwidth,
        mac_peak_g_per_s: opt(obj.get("mac_peak_g_per_s"), "mac_peak_g_per_s")?,
        bound_fraction: opt(
            obj.get("simplepir_bound_fraction"),
            "simplepir_bound_fraction",
        )?,
        cached_fraction: sub("cached_pass", "fraction")?,
        overlap_fraction: sub("overlap_ceiling", "bound_fraction")?,
    };
    Ok((bits, bytes, kernel, point))
}

/// Chart width and the plot area inside it.
const W: f64 = 1000.0;
const X0: f64 = 90.0;
const X1: f64 = 660.0;
/// Heights of the two panels' plot areas.
const H_TIME: f64 = 300.0;
const H_FRAC: f64 = 200.0;
/// Colours: this system (blue shades as in the cost report), the bounds
/// (grey), the cache-resident pass and the target.
const BLUE: &str = "#1f5fa8";
const BLUE_LIGHT: &str = "#5b9bd5";
const GREY: &str = "#8f8f8f";
const ORANGE: &str = "#d9822b";
const RED: &str = "#c0392b";

/// Which fraction of a run a series of the second panel draws.
type Fraction = fn(&CurvePoint) -> Option<f64>;

/// The x position of batch `k` on a log2 axis from 1 to `kmax`.
fn x_of(k: f64, kmax: f64) -> f64 {
    let t = if kmax > 1.0 {
        k.max(1.0).log2() / kmax.log2()
    } else {
        0.0
    };
    X0 + (X1 - X0) * t.clamp(0.0, 1.0)
}

/// A log10 axis covering `lo..hi` (positive), in whole decades.
fn decades(lo: f64, hi: f64) -> (i32, i32) {
    let a = lo.max(1e-9).log10().floor() as i32;
    let b = hi.max(lo).max(1e-9).log10().ceil() as i32;
    (a, b.max(a + 1))
}

/// The fraction axis of the second panel: from 0.1 below the lowest
/// value (a multiple of 0.1, at most 0.5, at least 0) to 1.05.
fn fraction_floor(values: impl Iterator<Item = f64>) -> f64 {
    let lo = values.fold(f64::INFINITY, f64::min);
    ((lo - 0.1) * 10.0).floor().clamp(0.0, 5.0) / 10.0
}

/// The y position of `v` on the decade axis `(a, b)` of a panel from `top`
/// with height `h`.
fn y_log(v: f64, (a, b): (i32, i32), top: f64, h: f64) -> f64 {
    let t = (v.max(1e-12).log10() - f64::from(a)) / f64::from(b - a);
    top + h * (1.0 - t.clamp(0.0, 1.0))
}

/// A polyline through `pts` with dots, or dashed and dotless.
fn series(s: &mut String, pts: &[(f64, f64)], colour: &str, dashed: bool, dots: bool) {
    if pts.is_empty() {
        return;
    }
    let path: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
    let dash = if dashed {
        r#" stroke-dasharray="6 4""#
    } else {
        ""
    };
    let _ = writeln!(
        s,
        r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>"#,
        path.join(" ")
    );
    if dots {
        for (x, y) in pts {
            let _ = writeln!(
                s,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{colour}"/>"#
            );
        }
    }
}

/// A legend entry at the right of the plot.
fn legend(s: &mut String, y: f64, colour: &str, dashed: bool, text: &str) {
    let dash = if dashed {
        r#" stroke-dasharray="6 4""#
    } else {
        ""
    };
    let _ = writeln!(
        s,
        r#"<line x1="{:.0}" y1="{y:.1}" x2="{:.0}" y2="{y:.1}" stroke="{colour}" stroke-width="2"{dash}/>"#,
        X1 + 18.0,
        X1 + 42.0
    );
    let _ = writeln!(
        s,
        r##"<text x="{:.0}" y="{:.1}" font-size="12" fill="#333">{}</text>"##,
        X1 + 48.0,
        y + 4.0,
        xml(text)
    );
}

/// The x axis (one tick per measured k) under a panel ending at `bottom`.
fn k_axis(s: &mut String, c: &BatchRuns, kmax: f64, top: f64, bottom: f64) {
    for p in &c.points {
        let x = x_of(p.k as f64, kmax);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{top:.1}" x2="{x:.1}" y2="{bottom:.1}" stroke="#eee"/>"##
        );
        let _ = writeln!(
            s,
            r##"<text x="{x:.1}" y="{:.1}" font-size="12" text-anchor="middle" fill="#333">{}</text>"##,
            bottom + 16.0,
            p.k
        );
    }
    let _ = writeln!(
        s,
        r##"<line x1="{X0}" y1="{bottom:.1}" x2="{X1}" y2="{bottom:.1}" stroke="#333"/>"##
    );
    let _ = writeln!(
        s,
        r##"<text x="{:.0}" y="{:.1}" font-size="12" text-anchor="middle" fill="#333">queries per pass k (log scale)</text>"##,
        (X0 + X1) / 2.0,
        bottom + 34.0
    );
}

/// The chart: per-query milliseconds against k (log–log) with the bounds,
/// then the fractions of the bound (linear) with the 0.85 target.
/// Self-contained SVG (no fonts, scripts or links). `title` heads it; the
/// caller names the machine there.
pub fn render_batch_svg(c: &BatchRuns, title: &str) -> String {
    let kmax = c.points.last().map_or(1.0, |p| p.k as f64);
    let mut s = String::new();
    let top1 = 78.0;
    let top2 = top1 + H_TIME + 70.0;
    let height = top2 + H_FRAC + 60.0;
    let _ = writeln!(
        s,
        r#"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height:.0}" viewBox="0 0 {W} {height:.0}" font-family="sans-serif">
<title>{}</title>
<rect x="0" y="0" width="{W}" height="{height:.0}" fill="white"/>"#,
        xml(title)
    );
    let _ = writeln!(
        s,
        r#"<text x="{X0}" y="26" font-size="18" font-weight="bold">{}</text>"#,
        xml(title)
    );
    let bw = c.bandwidth_gb_s();
    let peak = c.mac_peak_g_per_s();
    let _ = writeln!(
        s,
        r##"<text x="{X0}" y="46" font-size="12" fill="#333">{}</text>"##,
        xml(&format!(
            "2^{} bits ({} GiB), {} kernel, one core; bandwidth {} GB/s{}; medians of each run's trials.",
            c.db_bits,
            fmt_sig(c.db_bytes as f64 / (1u64 << 30) as f64, 3),
            c.kernel,
            fmt_sig(bw, 3),
            peak.map_or(String::new(), |p| format!(", multiply peak {} G MAC/s", fmt_sig(p, 3)))
        ))
    );

    // panel 1: ms per query
    let bottom1 = top1 + H_TIME;
    let per_q = |v: f64, k: u64| v / k as f64;
    let mut all: Vec<f64> = Vec::new();
    for p in &c.points {
        all.extend([
            per_q(p.answer_ms, p.k),
            per_q(p.simplepir_ms, p.k),
            per_q(p.rest_ms, p.k),
            c.bound_ms(p.k as f64),
        ]);
    }
    let lo = all.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = all.iter().cloned().fold(0.0, f64::max);
    let dec = decades(lo, hi);
    let _ = writeln!(
        s,
        r#"<text x="{X0}" y="{:.0}" font-size="14" font-weight="bold">Server time per query (ms, log scale)</text>"#,
        top1 - 10.0
    );
    // a gridline at 1, 2 and 5 of every decade
    let grid = (dec.0..=dec.1)
        .flat_map(|d| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(d)))
        .filter(|v| *v <= 10f64.powi(dec.1) * 1.0001);
    for v in grid {
        let y = y_log(v, dec, top1, H_TIME);
        let _ = writeln!(
            s,
            r##"<line x1="{X0}" y1="{y:.1}" x2="{X1}" y2="{y:.1}" stroke="#ddd"/>"##
        );
        let _ = writeln!(
            s,
            r##"<text x="{:.0}" y="{:.1}" font-size="12" text-anchor="end" fill="#333">{} ms</text>"##,
            X0 - 6.0,
            y + 4.0,
            fmt_sig(v, 1)
        );
    }
    k_axis(&mut s, c, kmax, top1, bottom1);
    let pts = |f: &dyn Fn(&CurvePoint) -> f64| -> Vec<(f64, f64)> {
        c.points
            .iter()
            .map(|p| (x_of(p.k as f64, kmax), y_log(f(p), dec, top1, H_TIME)))
            .collect()
    };
    // the bound, sampled finely between the measured k (its knee falls
    // between them)
    let steps = 64;
    let bound: Vec<(f64, f64)> = (0..=steps)
        .map(|i| {
            let k = kmax.powf(i as f64 / steps as f64);
            (x_of(k, kmax), y_log(c.bound_ms(k), dec, top1, H_TIME))
        })
        .collect();
    series(&mut s, &bound, GREY, true, false);
    series(&mut s, &pts(&|p| per_q(p.rest_ms, p.k)), GREY, false, true);
    series(
        &mut s,
        &pts(&|p| per_q(p.simplepir_ms, p.k)),
        BLUE_LIGHT,
        false,
        true,
    );
    series(
        &mut s,
        &pts(&|p| per_q(p.answer_ms, p.k)),
        BLUE,
        false,
        true,
    );
    legend(&mut s, top1 + 10.0, BLUE, false, "whole answer ÷ k");
    legend(&mut s, top1 + 30.0, BLUE_LIGHT, false, "SimplePIR pass ÷ k");
    legend(&mut s, top1 + 50.0, GREY, false, "DoublePIR + packing ÷ k");
    legend(
        &mut s,
        top1 + 70.0,
        GREY,
        true,
        "bound: max(|DB| ÷ bandwidth ÷ k,",
    );
    let _ = writeln!(
        s,
        r##"<text x="{:.0}" y="{:.1}" font-size="12" fill="#333">|DB| ÷ multiply peak)</text>"##,
        X1 + 48.0,
        top1 + 90.0
    );

    // panel 2: fractions of the bound
    let bottom2 = top2 + H_FRAC;
    let f0 = fraction_floor(c.points.iter().flat_map(|p| {
        [p.bound_fraction, p.cached_fraction, p.overlap_fraction]
            .into_iter()
            .flatten()
    }));
    let y_frac = |v: f64| top2 + H_FRAC * (1.0 - ((v - f0) / (1.05 - f0)).clamp(0.0, 1.0));
    let _ = writeln!(
        s,
        r#"<text x="{X0}" y="{:.0}" font-size="14" font-weight="bold">SimplePIR pass ÷ its bound</text>"#,
        top2 - 10.0
    );
    let ticks = ((1.0 - f0) * 10.0).round() as usize;
    for t in (0..=ticks).map(|i| f0 + i as f64 / 10.0) {
        let y = y_frac(t);
        let _ = writeln!(
            s,
            r##"<line x1="{X0}" y1="{y:.1}" x2="{X1}" y2="{y:.1}" stroke="#ddd"/>"##
        );
        let _ = writeln!(
            s,
            r##"<text x="{:.0}" y="{:.1}" font-size="12" text-anchor="end" fill="#333">{t:.1}</text>"##,
            X0 - 6.0,
            y + 4.0
        );
    }
    k_axis(&mut s, c, kmax, top2, bottom2);
    let target = y_frac(0.85);
    let _ = writeln!(
        s,
        r#"<line x1="{X0}" y1="{target:.1}" x2="{X1}" y2="{target:.1}" stroke="{RED}" stroke-width="1.5" stroke-dasharray="3 3"/>"#
    );
    let frac = |f: &dyn Fn(&CurvePoint) -> Option<f64>| -> Vec<(f64, f64)> {
        c.points
            .iter()
            .filter_map(|p| f(p).map(|v| (x_of(p.k as f64, kmax), y_frac(v))))
            .collect()
    };
    // the series the runs carry (older pir-bench files lack some), the
    // pass from memory drawn last, on top
    let fractions: [(Fraction, &str, &str); 3] = [
        (
            |p| p.overlap_fraction,
            GREY,
            "perfect kernel (overlap ceiling)",
        ),
        (
            |p| p.cached_fraction,
            ORANGE,
            "database in L2 (cached pass)",
        ),
        (|p| p.bound_fraction, BLUE, "from memory"),
    ];
    let mut ly = top2 + 10.0;
    for (f, colour, label) in fractions.into_iter().rev() {
        if !frac(&f).is_empty() {
            legend(&mut s, ly, colour, false, label);
            ly += 20.0;
        }
    }
    for (f, colour, _) in fractions {
        series(&mut s, &frac(&f), colour, false, true);
    }
    legend(&mut s, ly, RED, true, "target 0.85");
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::test_util::check_xml;

    fn run(k: u64, bits: u64) -> serde_json::Value {
        serde_json::json!({
            "db_bits": bits, "db_bytes": 1u64 << (bits - 3), "batch": k, "threads": 1,
            "kernel": "avx2", "all_correct": true,
            "answer_ms_median": 70.0 * k as f64 / (1.0 + 0.5 * k as f64).min(k as f64),
            "simplepir_ms": 50.0 * k as f64 / 1.5, "doublepir_ms": 10.0 * k as f64,
            "packing_ms": 9.0 * k as f64, "mem_bw_cpu_time_gb_s": 20.0,
            "mac_peak_g_per_s": 40.0, "simplepir_bound_fraction": 0.8,
            "cached_pass": {"fraction": 0.86}, "overlap_ceiling": {"bound_fraction": 0.95},
        })
    }

    fn files(dir: &std::path::Path, runs: &[serde_json::Value]) -> Vec<PathBuf> {
        runs.iter()
            .enumerate()
            .map(|(i, r)| {
                let p = dir.join(format!("run{i}.json"));
                std::fs::write(&p, r.to_string()).unwrap();
                p
            })
            .collect()
    }

    #[test]
    fn loads_a_curve_in_order_of_k() {
        let dir = tempfile::tempdir().unwrap();
        let runs = [run(4, 33), run(1, 33), run(64, 33), run(2, 33)];
        let c = load_batch_curve(&files(dir.path(), &runs)).unwrap();
        assert_eq!(
            c.points.iter().map(|p| p.k).collect::<Vec<_>>(),
            [1, 2, 4, 64]
        );
        assert_eq!(
            (c.db_bits, c.db_bytes, c.kernel.as_str()),
            (33, 1 << 30, "avx2")
        );
        assert_eq!(c.points[0].rest_ms, 19.0);
        assert_eq!(c.points[0].cached_fraction, Some(0.86));
        // the bound: memory alone at k = 1 (2^30 B ÷ 20 GB/s), the
        // multiplies from k = 2 on (2^30 ÷ 40 G/s, per query)
        assert!((c.bound_ms(1.0) - 1073.741824 / 20.0).abs() < 1e-9);
        assert!((c.bound_ms(8.0) - 1073.741824 / 40.0).abs() < 1e-9);
        // an array of runs in one file is the same curve
        let one = dir.path().join("all.json");
        std::fs::write(&one, serde_json::Value::Array(runs.to_vec()).to_string()).unwrap();
        assert_eq!(load_batch_curve(&[one]).unwrap(), c);
    }

    #[test]
    fn refuses_what_is_not_one_curve() {
        let dir = tempfile::tempdir().unwrap();
        let err = |runs: &[serde_json::Value]| match load_batch_curve(&files(dir.path(), runs)) {
            Err(Error::Invalid(m)) => m,
            other => panic!("expected an error, got {other:?}"),
        };
        assert!(err(&[run(1, 33), run(4, 34)]).contains("one database size"));
        assert!(err(&[run(4, 33), run(4, 33)]).contains("second run at batch 4"));
        assert!(err(&[run(4, 33)]).contains("two batch sizes"));
        let mut threads = run(2, 33);
        threads["threads"] = 2.into();
        assert!(err(&[run(1, 33), threads]).contains("multi-thread"));
        let mut wrong = run(2, 33);
        wrong["all_correct"] = false.into();
        assert!(err(&[run(1, 33), wrong]).contains("all_correct"));
        let mut neg = run(2, 33);
        neg["simplepir_ms"] = (-1.0).into();
        assert!(err(&[run(1, 33), neg]).contains("simplepir_ms"));
        let mut zero = run(2, 33);
        zero["batch"] = 0.into();
        assert!(err(&[run(1, 33), zero]).contains("batch 0"));
        let mut kernel = run(2, 33);
        kernel["kernel"] = "avx512-vnni".into();
        assert!(err(&[run(1, 33), kernel]).contains("one kernel"));
        let many: Vec<_> = (1..=MAX_CURVE_POINTS as u64 + 1)
            .map(|k| run(k, 33))
            .collect();
        assert!(err(&many).contains("more than"));
        assert!(matches!(load_batch_curve(&[]), Err(Error::Invalid(_))));
        // absent optional fields are left out of the chart, not errors
        let mut bare = run(2, 33);
        for f in [
            "mac_peak_g_per_s",
            "simplepir_bound_fraction",
            "cached_pass",
        ] {
            bare.as_object_mut().unwrap().remove(f);
        }
        bare["overlap_ceiling"] = serde_json::Value::Null;
        let c = load_batch_curve(&files(dir.path(), &[run(1, 33), bare])).unwrap();
        assert_eq!(c.points[1].cached_fraction, None);
        // and a series no run carries has no legend entry
        let mut none = c.clone();
        for p in &mut none.points {
            p.cached_fraction = None;
        }
        let svg = render_batch_svg(&none, "t");
        check_xml(&svg);
        assert!(!svg.contains("cached pass") && svg.contains("from memory"));
    }

    #[test]
    fn axes_map_the_ends_to_the_plot_edges() {
        assert_eq!(x_of(1.0, 64.0), X0);
        assert_eq!(x_of(64.0, 64.0), X1);
        assert!((x_of(8.0, 64.0) - (X0 + (X1 - X0) / 2.0)).abs() < 1e-9);
        assert_eq!(decades(0.3, 70.0), (-1, 2));
        assert_eq!(decades(16.0, 72.0), (1, 2));
        assert_eq!(decades(20.0, 20.0), (1, 2));
        assert_eq!(fraction_floor([0.76, 0.98].into_iter()), 0.5);
        assert_eq!(fraction_floor([0.31, 0.9].into_iter()), 0.2);
        assert_eq!(fraction_floor([-1.0].into_iter()), 0.0);
        assert_eq!(y_log(100.0, (-1, 2), 10.0, 300.0), 10.0);
        assert_eq!(y_log(0.1, (-1, 2), 10.0, 300.0), 310.0);
    }

    #[test]
    fn svg_is_well_formed_and_names_what_it_draws() {
        let dir = tempfile::tempdir().unwrap();
        let runs: Vec<_> = [1, 2, 4, 8, 16, 32, 64]
            .iter()
            .map(|&k| run(k, 33))
            .collect();
        let c = load_batch_curve(&files(dir.path(), &runs)).unwrap();
        let svg = render_batch_svg(&c, "Zen 3 <AVX2> & co");
        check_xml(&svg);
        assert!(svg.contains("Zen 3 &lt;AVX2&gt; &amp; co"));
        for text in [
            "whole answer ÷ k",
            "cached pass",
            "target 0.85",
            ">64</text>",
        ] {
            assert!(svg.contains(text), "{text}");
        }
        // seven runs: three series of dots in each panel (the bound is a
        // dotless line)
        assert_eq!(svg.matches("<circle").count(), 7 * 6);
    }
}
