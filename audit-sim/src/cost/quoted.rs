//! The papers' figures, quoted and never measured here: YPIR §4.5
//! Table 6 (DoublePIR, Tiptoe, HintlessPIR, YPIR) and Chrome's
//! k-anonymity figure (YPIR §4.5 citing DeB24), as rows of the report.

use super::model::{Row, RowSource};

/// The paper's "MB" in bytes (binary; see the module docs).
pub const PAPER_MB: f64 = 1_048_576.0;
/// The paper's "KB" in bytes.
pub const PAPER_KB: f64 = 1024.0;

/// One quoted Table 6 row: sizes in the paper's MB/KB, costs as printed.
struct Quoted {
    scheme: &'static str,
    offline_mb: Option<f64>,
    up_mb: f64,
    down_kb: f64,
    seconds: f64,
    comm: f64,
    comp: f64,
    total: f64,
    note: &'static str,
}

const TABLE6: [Quoted; 5] = [
    Quoted {
        scheme: "DoublePIR, weekly hint",
        offline_mb: Some(16.0),
        up_mb: 14.0,
        down_kb: 640.0,
        seconds: 16.90,
        comm: 0.001569,
        comp: 0.000253,
        total: 0.001822,
        note: "HHC+23 with a 16 MB hint downloaded once a week; audits may wait for the next hint",
    },
    Quoted {
        scheme: "DoublePIR, daily hint",
        offline_mb: Some(112.0),
        up_mb: 14.0,
        down_kb: 640.0,
        seconds: 16.90,
        comm: 0.010610,
        comp: 0.000253,
        total: 0.010863,
        note: "hint (or a hint update of about the same size) downloaded every day",
    },
    Quoted {
        scheme: "Tiptoe",
        offline_mb: None,
        up_mb: 659.0,
        down_kb: 172.0 * 1024.0,
        seconds: 194.96,
        comm: 0.016215,
        comp: 0.002924,
        total: 0.019139,
        note: "hintless",
    },
    Quoted {
        scheme: "HintlessPIR",
        offline_mb: None,
        up_mb: 27.0,
        down_kb: 34.0 * 1024.0,
        seconds: 32.40,
        comm: 0.003222,
        comp: 0.000486,
        total: 0.003708,
        note: "hintless",
    },
    Quoted {
        scheme: "YPIR (paper)",
        offline_mb: None,
        up_mb: 29.0,
        down_kb: 240.0,
        seconds: 13.74,
        comm: 0.000022,
        comp: 0.000206,
        total: 0.000228,
        note: "the authors' implementation; $183 per million with cross-client batches of 4 (§4.5 text)",
    },
];

pub(super) fn quoted_rows() -> Vec<Row> {
    let mut rows: Vec<Row> = TABLE6
        .iter()
        .map(|q| {
            let offline = q.offline_mb.map(|m| m * PAPER_MB);
            let up = q.up_mb * PAPER_MB;
            let down = q.down_kb * PAPER_KB;
            Row {
                scheme: q.scheme.to_owned(),
                source: RowSource::QuotedYpirTable6,
                offline_download_bytes: offline,
                upload_bytes_per_week: Some(up),
                download_bytes_per_week: Some(down),
                total_bytes_per_week: Some(offline.unwrap_or(0.0) + up + down),
                server_core_seconds_per_week: Some(q.seconds),
                communication_usd: Some(q.comm),
                computation_usd: Some(q.comp),
                total_usd_per_client_week: Some(q.total),
                usd_per_million_clients_week: Some(q.total * 1e6),
                note: format!(
                    "quoted from YPIR §4.5 Table 6, not measured: {}; 20 single-bit queries per week over an 8 GB database, AWS prices",
                    q.note
                ),
            }
        })
        .collect();
    rows.push(Row {
        scheme: "Chrome k-anonymity".into(),
        source: RowSource::QuotedChrome,
        offline_download_bytes: None,
        upload_bytes_per_week: None,
        download_bytes_per_week: None,
        total_bytes_per_week: Some(2.3 * PAPER_MB),
        server_core_seconds_per_week: None,
        communication_usd: None,
        computation_usd: None,
        total_usd_per_client_week: None,
        usd_per_million_clients_week: None,
        note: "quoted from YPIR §4.5 (citing DeB24), not measured: 2.3 MB of communication per week \
               (direction and server cost not stated); hash-prefix k-anonymity, no cryptographic privacy"
            .into(),
    });
    rows
}
