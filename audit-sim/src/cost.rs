//! Cost report: what private SCT auditing with this system would cost an
//! operator, next to the published alternatives.
//!
//! The simulator measures one demo deployment over real HTTP
//! ([`Measured`]); this module turns those measurements into weekly cost per
//! client and per million clients with the price model of YPIR §4.5
//! (Table 6: $0.09 per outbound GB, $1.5·10⁻⁵ per core-second, inbound
//! traffic free; see [`Prices`]), and extrapolates to the internet-scale
//! database of the paper (5·10⁹ SCTs → a 2^36-bit database, 8 GiB of
//! records) from single-thread answer times at several database sizes with
//! a fitted fixed + per-byte model ([`fit()`]). The answer times
//! ([`answer_times`]) are either measured in process on the machine making
//! the report ([`measure_answer_times`]) or read from `pir-bench --json`
//! files the operator names ([`load_pir_bench_points`]); the report states
//! which ([`TimingSource`]: the CPU model, or the file names) and that the
//! fit assumes answer time linear in database bytes up to the target.
//!
//! Three kinds of rows are kept apart everywhere ([`RowSource`]):
//! *measured* (the demo run), *extrapolated* (our protocol sizes at 2^36
//! bits and the fitted server time) and *quoted* (YPIR Table 6 and Chrome's
//! k-anonymity figure, copied from the paper, not measured here).
//! [`write_report`] writes Markdown, JSON and an SVG chart.
//!
//! Units: sizes are shown in binary units (KiB, MiB). The paper's "MB" and
//! "KB" are binary too: its communication costs are only reproduced with
//! 1 MB = 2^20 bytes and the price per GB applied per 10^9 bytes (e.g.
//! DoublePIR weekly: (16 MiB + 640 KiB) · $0.09 / 10^9 B = $0.001569), so
//! quoted sizes are converted with 2^20 and our costs use 10^9 bytes per GB.
//!
//! One job per submodule: `model` (the price model and the report it
//! prices), `measure` (answer times measured here, through
//! `pir_core::bench`), `bench_files` (reading `pir-bench` files), `fit`
//! (the server-time model), `quoted` (the papers' figures), `markdown` and
//! `svg` (rendering) and `format` (numbers).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

mod bench_files;
mod fit;
mod format;
mod markdown;
mod measure;
mod model;
mod quoted;
mod svg;
#[cfg(test)]
pub(crate) mod test_util;

pub use bench_files::load_pir_bench_points;
pub(crate) use bench_files::read_bench_objects;
pub use fit::{fit, Fit, FitPoint};
pub(crate) use format::fmt_sig;
pub use markdown::render_markdown;
pub use measure::{
    answer_times, measure_answer_times, measure_bits_for, measure_scale, AnswerTimes, ThisMachine,
    TimingSource, DEFAULT_MAX_MEASURE_BITS,
};
pub use model::{
    build_report, internet_scale_manifest_bytes, Bill, CostReport, Measured, Prices, Row,
    RowSource, BILLED_POPULATIONS, BYTES_PER_GB, DEFAULT_TARGET_DB_BITS, DEFAULT_USD_PER_GIB_HOUR,
    INTERNET_SCALE_LOGS, MANIFEST_FETCHES_PER_WEEK,
};
pub use quoted::{PAPER_KB, PAPER_MB};
pub use svg::render_svg;
pub(crate) use svg::xml;

pub use crate::machine::cpu_model;
pub use crate::scale::INTERNET_SCALE_SCTS;

/// File names written by [`write_report`].
pub const MARKDOWN_FILE: &str = "cost-report.md";
/// See [`MARKDOWN_FILE`].
pub const JSON_FILE: &str = "cost-report.json";
/// See [`MARKDOWN_FILE`].
pub const SVG_FILE: &str = "cost-report.svg";

/// Paths written by [`write_report`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportPaths {
    /// `cost-report.md`.
    pub markdown: PathBuf,
    /// `cost-report.json`.
    pub json: PathBuf,
    /// `cost-report.svg`.
    pub svg: PathBuf,
}

/// Writes `cost-report.md`, `cost-report.json` and `cost-report.svg` into
/// `dir` (created if missing); the Markdown links the SVG relatively.
pub fn write_report(r: &CostReport, dir: &Path) -> Result<ReportPaths> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let paths = ReportPaths {
        markdown: dir.join(MARKDOWN_FILE),
        json: dir.join(JSON_FILE),
        svg: dir.join(SVG_FILE),
    };
    let json = serde_json::to_string_pretty(r)
        .map_err(|e| Error::Invalid(format!("cost report is not serializable: {e}")))?;
    for (path, text) in [
        (&paths.markdown, render_markdown(r)),
        (&paths.json, json + "\n"),
        (&paths.svg, render_svg(r)),
    ] {
        std::fs::write(path, text).map_err(|e| Error::io(path, e))?;
    }
    Ok(paths)
}
