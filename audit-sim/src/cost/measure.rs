//! Measuring answer times on this machine, through pir-core's benchmark
//! code (`pir_core::bench`), and where the fit's times come from.

use std::path::PathBuf;

use pir_core::bench::{median, BenchDb};
use serde::{Deserialize, Serialize};

use super::bench_files::load_pir_bench_points;
use super::fit::FitPoint;
use super::format::fmt_bytes;
use crate::error::{Error, Result};
use crate::machine::cpu_model;

/// Smallest and largest database [`measure_answer_times`] builds (log2 bits).
const MIN_MEASURE_BITS: u32 = 12;
const MAX_MEASURE_BITS: u32 = 36;

/// The machine [`measure_answer_times`] ran on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThisMachine {
    /// CPU model ([`cpu_model`]).
    pub cpu: String,
    /// pir-core's SimplePIR kernel on it.
    pub kernel: String,
    /// Database sizes measured (log2 bits).
    pub log2_bits: Vec<u32>,
    /// Answers timed per size (the median is kept).
    pub trials: usize,
}

/// Where the fit's answer times come from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TimingSource {
    /// Measured in process by the report on this machine.
    pub measured_here: Option<ThisMachine>,
    /// `pir-bench --json` files named by the operator, as given; their
    /// machine is whatever ran them.
    pub pir_bench_files: Vec<String>,
}

impl TimingSource {
    /// One sentence for the report: "measured here on … (…)" and/or
    /// "taken from pir-bench files …".
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(m) = &self.measured_here {
            let sizes = match (m.log2_bits.iter().min(), m.log2_bits.iter().max()) {
                (Some(lo), Some(hi)) if lo != hi => format!("2^{lo} … 2^{hi} bits"),
                (Some(b), _) => format!("2^{b} bits"),
                _ => "no sizes".to_owned(),
            };
            parts.push(format!(
                "measured here on {} ({} kernel; in process, one core, {} databases of {sizes}, median of {} answer{} each)",
                m.cpu,
                m.kernel,
                m.log2_bits.len(),
                m.trials,
                if m.trials == 1 { "" } else { "s" }
            ));
        }
        if !self.pir_bench_files.is_empty() {
            parts.push(format!(
                "taken from the pir-bench file{} {} (not measured by this report; on whatever machine ran them)",
                if self.pir_bench_files.len() == 1 { "" } else { "s" },
                self.pir_bench_files.join(", ")
            ));
        }
        if parts.is_empty() {
            "of unknown origin".to_owned()
        } else {
            parts.join("; and ")
        }
    }

    /// A few words for the chart.
    pub(super) fn short(&self) -> String {
        match (&self.measured_here, self.pir_bench_files.is_empty()) {
            (Some(m), true) => format!("measured on {}", m.cpu),
            (Some(m), false) => format!("measured on {} and from pir-bench files", m.cpu),
            (None, false) => "from pir-bench files".to_owned(),
            (None, true) => "of unknown origin".to_owned(),
        }
    }
}

/// The answer times the fit uses and where they come from.
#[derive(Clone, Debug, PartialEq)]
pub struct AnswerTimes {
    /// The points.
    pub points: Vec<FitPoint>,
    /// Their origin, stated in the report.
    pub source: TimingSource,
    /// Cross-client batching measured here ([`measure_scale`]), if any.
    pub batch: Option<crate::scale::BatchCurve>,
    /// Build rates measured here ([`measure_scale`]), if any.
    pub build: Option<crate::scale::BuildRates>,
}

/// The sizes to measure here: `explicit` if given; else, when no pir-bench
/// file is named, every other size from 2^20 bits up to `max_bits` (or, if
/// `None`, up to the largest database that fits comfortably in this
/// machine's available memory, [`crate::scale::comfortable_max_bits`], at
/// most 2^35 bits) — the largest is far past any cache, so its slope is
/// the memory-bound scan the extrapolation assumes; else none (the named
/// files are the only timings).
pub fn measure_bits_for(
    explicit: Option<&[u32]>,
    max_bits: Option<u32>,
    pir_bench: &[PathBuf],
) -> Vec<u32> {
    match explicit {
        Some(bits) => bits.to_vec(),
        None if pir_bench.is_empty() => {
            let max = max_bits.unwrap_or_else(|| {
                crate::scale::comfortable_max_bits(
                    crate::scale::mem_available().unwrap_or(0),
                    DEFAULT_MAX_MEASURE_BITS,
                )
            });
            crate::scale::default_measure_bits(
                max.clamp(MIN_DEFAULT_MEASURE_BITS, MAX_MEASURE_BITS),
            )
        }
        None => Vec::new(),
    }
}

/// Largest size measured by default (2^35 bits = 4 GiB of records; a
/// larger one only when asked, with `max_bits`).
pub const DEFAULT_MAX_MEASURE_BITS: u32 = 35;
/// Smallest default measurement ceiling.
const MIN_DEFAULT_MEASURE_BITS: u32 = 20;

/// The fit's answer times: measured in process at `measure_bits` (if not
/// empty; `trials` answers per size) and read from the `pir_bench` files
/// (if any). At least one of the two is required. The result records which,
/// with this machine's CPU model for the measured ones.
pub fn answer_times(
    measure_bits: &[u32],
    trials: usize,
    pir_bench: &[PathBuf],
) -> Result<AnswerTimes> {
    if measure_bits.is_empty() && pir_bench.is_empty() {
        return Err(Error::Invalid(
            "no answer times: measure some database sizes here or name pir-bench files".into(),
        ));
    }
    let mut points = Vec::new();
    let mut source = TimingSource::default();
    if !measure_bits.is_empty() {
        points.extend(measure_answer_times(measure_bits, trials)?);
        source.measured_here = Some(ThisMachine {
            cpu: cpu_model(),
            kernel: pir_core::server::simplepir_impl().to_owned(),
            log2_bits: measure_bits.to_vec(),
            trials,
        });
    }
    if !pir_bench.is_empty() {
        points.extend(load_pir_bench_points(pir_bench)?);
        source.pir_bench_files = pir_bench.iter().map(|p| p.display().to_string()).collect();
    }
    Ok(AnswerTimes {
        points,
        source,
        batch: None,
        build: None,
    })
}

/// Adds what the fixed costs and batched prices need, measured here on one
/// core: the batch curve for `batch_ks` at the largest database measured
/// in process (`trials` rounds, each batch between two single queries and
/// repeated when they disagree, [`crate::scale::measure_batch_curve`]), the filter
/// build rate over `build_entries` entries
/// ([`crate::scale::measure_filter_build`]), and the DBSetup rate of that
/// largest database. Needs at least one size measured here
/// (`times.source.measured_here`).
pub fn measure_scale(
    times: &mut AnswerTimes,
    batch_ks: &[usize],
    build_entries: u64,
    trials: usize,
) -> Result<()> {
    let Some(here) = &times.source.measured_here else {
        return Err(Error::Invalid(
            "batching and build rates are measured here only: measure at least one size".into(),
        ));
    };
    let largest_bits = here.log2_bits.iter().copied().max().unwrap_or(20);
    let largest = times
        .points
        .iter()
        .filter(|p| p.setup_seconds.is_some())
        .max_by(|a, b| a.db_bytes.total_cmp(&b.db_bytes))
        .ok_or_else(|| Error::Invalid("no DBSetup time was measured here".into()))?;
    let setup_s = largest.setup_seconds.unwrap_or(0.0);
    let cpu = here.cpu.clone();
    if !batch_ks.is_empty() {
        times.batch = Some(crate::scale::measure_batch_curve(
            largest_bits,
            batch_ks,
            trials,
        )?);
    }
    let ns =
        crate::scale::measure_filter_build(build_entries, crate::scale::DEFAULT_BUILD_FILTERS)?;
    times.build = Some(crate::scale::BuildRates {
        ns_per_entry_filter: ns,
        filter_source: format!(
            "measured here on {cpu}: {build_entries} random leaves into {} filters of 8·|S| bits with HASH_V2 on one core",
            crate::scale::DEFAULT_BUILD_FILTERS
        ),
        setup_bytes_per_core_second: largest.db_bytes / setup_s.max(1e-9),
        setup_source: format!(
            "measured here on {cpu}: DBSetup of the {} database of the fit on one core",
            fmt_bytes(largest.db_bytes)
        ),
    });
    Ok(())
}

/// Measures single-thread answer times in-process: for each `b` in
/// `log2_bits`, a random bit database of 2^b bits, DBSetup with YPIR
/// Table 1 and a fresh public seed, then `trials` queries answered one at a
/// time inside a one-thread rayon pool (so the times are core-seconds).
/// Every answer is decoded and checked against the database. Returns the
/// median answer time (query parsing excluded, response serialization
/// included, as in `pir-bench`) per size.
pub fn measure_answer_times(log2_bits: &[u32], trials: usize) -> Result<Vec<FitPoint>> {
    if trials == 0 {
        return Err(Error::Invalid("trials must be positive".into()));
    }
    if let Some(b) = log2_bits
        .iter()
        .find(|b| !(MIN_MEASURE_BITS..=MAX_MEASURE_BITS).contains(*b))
    {
        return Err(Error::Invalid(format!(
            "database of 2^{b} bits: measure between 2^{MIN_MEASURE_BITS} and 2^{MAX_MEASURE_BITS} bits"
        )));
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .map_err(|e| Error::Invalid(format!("cannot start a one-thread pool: {e}")))?;
    pool.install(|| log2_bits.iter().map(|&b| measure_one(b, trials)).collect())
}

fn measure_one(log2_bits: u32, trials: usize) -> Result<FitPoint> {
    let mut db = BenchDb::random(log2_bits)?;
    let mut times = Vec::with_capacity(trials);
    for _ in 0..trials {
        let answer = db.time_answer()?;
        if !answer.correct {
            return Err(Error::Invalid(format!(
                "2^{log2_bits}-bit database: an answer decoded to another bit than the one stored"
            )));
        }
        times.push(answer.seconds);
    }
    let shape = db.shape;
    Ok(FitPoint {
        db_bytes: shape.records() as f64,
        seconds: median(&mut times),
        source: format!(
            "in-process, 2^{log2_bits} bits, median of {trials} answer{}",
            if trials == 1 { "" } else { "s" }
        ),
        setup_seconds: Some(db.setup_seconds),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_source_says_where_the_times_come_from() {
        let here = ThisMachine {
            cpu: "AMD EPYC 9R14 96-Core Processor".into(),
            kernel: "avx512-vnni".into(),
            log2_bits: vec![20, 22, 30],
            trials: 3,
        };
        let mut t = TimingSource {
            measured_here: Some(here.clone()),
            pir_bench_files: Vec::new(),
        };
        assert_eq!(
            t.describe(),
            "measured here on AMD EPYC 9R14 96-Core Processor (avx512-vnni kernel; in process, one core, \
             3 databases of 2^20 … 2^30 bits, median of 3 answers each)"
        );
        assert_eq!(t.short(), "measured on AMD EPYC 9R14 96-Core Processor");
        t.pir_bench_files = vec!["b35.json".into()];
        assert!(t.describe().ends_with(
            "each); and taken from the pir-bench file b35.json (not measured by this report; on whatever machine ran them)"
        ));
        t.measured_here = None;
        assert!(t
            .describe()
            .starts_with("taken from the pir-bench file b35.json"));
        assert_eq!(TimingSource::default().describe(), "of unknown origin");
        let one = ThisMachine {
            log2_bits: vec![24],
            trials: 1,
            ..here
        };
        assert!(TimingSource {
            measured_here: Some(one),
            pir_bench_files: Vec::new()
        }
        .describe()
        .contains("1 databases of 2^24 bits, median of 1 answer each"));
    }

    #[test]
    fn sizes_measured_here_by_default_only_without_files() {
        let f = [PathBuf::from("b35.json")];
        assert_eq!(measure_bits_for(None, Some(26), &[]), [20, 22, 24, 26]);
        assert_eq!(measure_bits_for(None, Some(36), &[]).last(), Some(&36));
        // Without a ceiling: up to what fits comfortably here, at most 2^35.
        let here = measure_bits_for(None, None, &[]);
        let top = *here.last().unwrap();
        assert!((20..=DEFAULT_MAX_MEASURE_BITS).contains(&top), "{here:?}");
        assert!(measure_bits_for(None, None, &f).is_empty());
        assert!(measure_bits_for(None, Some(30), &f).is_empty());
        assert_eq!(measure_bits_for(Some(&[18, 20]), None, &f), [18, 20]);
        assert_eq!(measure_bits_for(Some(&[22]), None, &[]), [22]);
    }

    #[test]
    fn answer_times_need_a_source_and_name_it() {
        assert!(matches!(answer_times(&[], 3, &[]), Err(Error::Invalid(_))));
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("b20.json");
        std::fs::write(
            &f,
            r#"{"answer_ms_median":7.5,"batch":1,"db_bytes":131072,"threads":1,"db_bits":20}"#,
        )
        .unwrap();
        let t = answer_times(&[], 3, std::slice::from_ref(&f)).unwrap();
        assert_eq!(t.points.len(), 1);
        assert_eq!(t.source.measured_here, None);
        assert_eq!(t.source.pir_bench_files, [f.display().to_string()]);
        let t = answer_times(&[16], 1, &[f]).unwrap();
        assert_eq!(t.points.len(), 2);
        let here = t.source.measured_here.unwrap();
        assert_eq!((here.log2_bits, here.trials), (vec![16], 1));
        assert_eq!(here.cpu, cpu_model());
        assert_eq!(here.kernel, pir_core::server::simplepir_impl());
    }

    #[test]
    fn measures_real_answer_times() {
        let pts = measure_answer_times(&[16, 18], 1).unwrap();
        assert_eq!(pts.len(), 2);
        assert!(pts.iter().all(|p| p.seconds > 0.0 && p.seconds.is_finite()));
        assert_eq!(pts[0].db_bytes, (1u64 << 13) as f64);
        assert_eq!(pts[1].db_bytes, (1u64 << 15) as f64);
        assert!(matches!(
            measure_answer_times(&[16], 0),
            Err(Error::Invalid(_))
        ));
        assert!(matches!(
            measure_answer_times(&[40], 1),
            Err(Error::Invalid(_))
        ));
    }
}
