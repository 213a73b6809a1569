//! The report as Markdown ([`render_markdown`]).

use super::fit::{distinct_sizes, FitPoint};
use super::format::{
    fmt_bytes, fmt_clients, fmt_money, fmt_pct, fmt_seconds, fmt_sig, fmt_signed_pct, fmt_usd,
    group_thousands, GIB,
};
use super::model::{CostReport, RowSource, INTERNET_SCALE_LOGS, MANIFEST_FETCHES_PER_WEEK};
use super::SVG_FILE;

pub(super) fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map(f).unwrap_or_else(|| "–".to_owned())
}

/// The report as Markdown: summary, table, fit, inputs, assumptions.
pub fn render_markdown(r: &CostReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let p = &r.prices;
    let m = &r.measured;
    let ex = r.extrapolated();
    let quoted_total = |name: &str| {
        r.rows
            .iter()
            .find(|row| row.scheme == name && row.source.is_quoted())
            .and_then(|row| row.usd_per_million_clients_week)
    };
    let ypir = quoted_total("YPIR (paper)").unwrap_or(228.0);
    let dpir = quoted_total("DoublePIR, weekly hint").unwrap_or(1822.0);

    let _ = writeln!(
        s,
        "# Private SCT auditing: weekly cost per million clients\n"
    );
    if let Some(ex) = ex {
        let total = ex.usd_per_million_clients_week.unwrap_or(0.0);
        let comp = ex.computation_usd.unwrap_or(0.0) * 1e6;
        let comm = ex.communication_usd.unwrap_or(0.0) * 1e6;
        let manifest = p.outbound_usd(ex.offline_download_bytes.unwrap_or(0.0)) * 1e6;
        let measured_total = r
            .rows
            .iter()
            .find(|row| row.source == RowSource::Measured)
            .and_then(|row| row.usd_per_million_clients_week)
            .unwrap_or(0.0);
        let _ = writeln!(
            s,
            "**Extrapolated to the internet-scale database (2^{} bits, {} of records), this system would \
             cost about {} per week per million clients** — {} of server computation and {} of outbound \
             communication, of which {} is the daily manifest — against **{} for YPIR** and **{} for \
             DoublePIR with weekly hints** as quoted from the YPIR paper (§4.5, Table 6): {} and {}. The extrapolation uses {} audits per client-week from the simulator, the exact query \
             and response sizes of our wire format, and single-core answer times fitted at {} database \
             sizes (rms error {}), {}. The demo the simulator ran ({} clients, a {} database) measured {} per \
             week per million clients over HTTP. Quoted rows are copied from the paper, not measured here.\n",
            r.target_db_bits,
            fmt_bytes(r.target_db_bytes as f64),
            fmt_money(total),
            fmt_money(comp),
            fmt_money(comm),
            fmt_money(manifest),
            fmt_money(ypir),
            fmt_money(dpir),
            relative(total, ypir, "the paper's YPIR"),
            relative(total, dpir, "DoublePIR"),
            fmt_sig(m.audits_per_client_week, 3),
            distinct_sizes(r.fit_points.iter()),
            fmt_pct(r.fit.rel_rms_error),
            r.timings.describe(),
            group_thousands(&m.clients.to_string()),
            fmt_bytes(m.db_bytes as f64),
            fmt_money(measured_total),
        );
    }
    let _ = writeln!(
        s,
        "![weekly cost and communication per client]({SVG_FILE})\n"
    );

    let _ = writeln!(s, "## Weekly cost per client\n");
    let _ = writeln!(
        s,
        "| scheme | source | offline download | upload | download | server time | communication | computation | **total / client** | **per 10^6 clients** |"
    );
    let _ = writeln!(s, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|");
    for (i, row) in r.rows.iter().enumerate() {
        let up = match (row.upload_bytes_per_week, row.total_bytes_per_week) {
            (None, Some(t)) if row.download_bytes_per_week.is_none() => {
                format!("{} in total", fmt_bytes(t))
            }
            (u, _) => opt(u, fmt_bytes),
        };
        let _ = writeln!(
            s,
            "| {} <sup>{}</sup> | {} | {} | {} | {} | {} | {} | {} | **{}** | **{}** |",
            md_escape(&row.scheme),
            i + 1,
            row.source.label(),
            opt(row.offline_download_bytes, fmt_bytes),
            up,
            opt(row.download_bytes_per_week, fmt_bytes),
            opt(row.server_core_seconds_per_week, fmt_seconds),
            opt(row.communication_usd, fmt_usd),
            opt(row.computation_usd, fmt_usd),
            opt(row.total_usd_per_client_week, fmt_usd),
            opt(row.usd_per_million_clients_week, fmt_money),
        );
    }
    let _ = writeln!(
        s,
        "\nAll columns are per client-week; server time is core-seconds. Communication cost prices \
         offline + online download (outbound); uploads are inbound and free.\n"
    );
    for (i, row) in r.rows.iter().enumerate() {
        let _ = writeln!(s, "{}. {}", i + 1, md_escape(&row.note));
    }

    // The fit.
    let f = &r.fit;
    let _ = writeln!(s, "\n## Server time: fit and extrapolation\n");
    let _ = writeln!(
        s,
        "Single-core answer time of one query, fitted as t(bytes) = a + b·bytes by least squares on \
         the relative error (the sizes span decades):\n\n\
         **t = {} ms + {} ms per GiB** (a scan rate of {} GB/s), from {} points at {} sizes.\n\n\
         Answer times: {}.\n",
        fmt_sig(f.fixed_seconds * 1e3, 3),
        fmt_sig(f.seconds_per_byte * 1e3 * GIB, 3),
        if f.seconds_per_byte > 0.0 {
            fmt_sig(1.0 / f.seconds_per_byte / 1e9, 3)
        } else {
            "∞".into()
        },
        f.points,
        distinct_sizes(r.fit_points.iter()),
        md_escape(&r.timings.describe()),
    );
    let _ = writeln!(
        s,
        "| point | database | measured | fit | relative error |\n|---|--:|--:|--:|--:|"
    );
    let mut pts: Vec<&FitPoint> = r.fit_points.iter().collect();
    pts.sort_by(|a, b| a.db_bytes.total_cmp(&b.db_bytes));
    for p in pts {
        let pred = f.predict(p.db_bytes);
        let _ = writeln!(
            s,
            "| {} | {} | {} ms | {} ms | {} |",
            md_escape(&p.source),
            fmt_bytes(p.db_bytes),
            fmt_sig(p.seconds * 1e3, 3),
            fmt_sig(pred * 1e3, 3),
            fmt_signed_pct((pred - p.seconds) / p.seconds),
        );
    }
    let target_s = f.predict(r.target_db_bytes as f64);
    let largest = r.fit_points.iter().map(|p| p.db_bytes).fold(0.0, f64::max);
    let _ = writeln!(
        s,
        "\nRelative error over the points: rms {}, max {}. Leave-one-out at the largest size \
         (refit without it, predict it): {}.\n",
        fmt_pct(f.rel_rms_error),
        fmt_pct(f.max_rel_error),
        f.loo_rel_error_largest
            .map(fmt_signed_pct)
            .unwrap_or_else(|| "not available (fewer than three sizes)".into()),
    );
    let _ = writeln!(
        s,
        "At the target, 2^{} bits = {} of records, the fit predicts **{} ms per query**, {}× beyond \
         the largest measured size; × {} audits = {} of one core per client-week. This assumes the \
         answer time stays linear in database bytes up to the target: the SimplePIR pass streams the \
         database once, so past the last-level cache the slope is the machine's memory bandwidth for \
         one core, and a machine with another memory system has another slope.",
        r.target_db_bits,
        fmt_bytes(r.target_db_bytes as f64),
        fmt_sig(target_s * 1e3, 3),
        fmt_sig(r.target_db_bytes as f64 / largest.max(1.0), 3),
        fmt_sig(m.audits_per_client_week, 3),
        fmt_seconds(target_s * m.audits_per_client_week),
    );
    if m.db_bytes > 0 {
        let pred = f.predict(m.db_bytes as f64);
        let _ = writeln!(
            s,
            "Cross-check: at the demo's {} database the fit predicts {} ms per query in-process; the \
             auditor reported {} ms per query over HTTP (answer time ÷ batch, mean batch {}), {}× the \
             fit: the ratio is request handling (adds) and batching (saves), both left out of the extrapolation.",
            fmt_bytes(m.db_bytes as f64),
            fmt_sig(pred * 1e3, 3),
            fmt_sig(m.server_core_seconds_per_query * 1e3, 3),
            fmt_sig(m.mean_batch, 3),
            fmt_sig(m.server_core_seconds_per_query / pred, 3),
        );
    }

    render_scale(&mut s, r);

    // Inputs.
    let _ = writeln!(s, "\n## Measured inputs (simulator, over HTTP)\n");
    let _ = writeln!(s, "| quantity | value |\n|---|--:|");
    let inputs = [
        (
            "clients × weeks",
            format!(
                "{} × {}",
                group_thousands(&m.clients.to_string()),
                fmt_sig(m.weeks, 3)
            ),
        ),
        (
            "audits per client-week",
            fmt_sig(m.audits_per_client_week, 3),
        ),
        ("upload per query", fmt_bytes(m.upload_bytes_per_query)),
        ("download per query", fmt_bytes(m.download_bytes_per_query)),
        (
            "manifest download per client-week",
            fmt_bytes(m.manifest_bytes_per_client_week),
        ),
        (
            "server core-seconds per query",
            format!("{} ms", fmt_sig(m.server_core_seconds_per_query * 1e3, 3)),
        ),
        ("mean batch", fmt_sig(m.mean_batch, 3)),
        (
            "client time per audit (not billed)",
            format!("{} ms", fmt_sig(m.client_seconds_per_audit * 1e3, 3)),
        ),
        ("demo PIR database", fmt_bytes(m.db_bytes as f64)),
        ("demo \\|S\\|", group_thousands(&m.entries.to_string())),
    ];
    for (k, v) in inputs {
        let _ = writeln!(s, "| {k} | {v} |");
    }

    let _ = writeln!(s, "\n## Assumptions\n");
    let _ = writeln!(
        s,
        "* Prices: ${} per outbound GB (10^9 bytes; inbound free) and ${} per core-second — the \
         paper's AWS figures, configurable.\n\
         * {} audits per client-week, as measured by the simulator (the paper assumes 20: 10^4 TLS \
         connections, two audits for 1/1000 of them); one PIR query per audit.\n\
         * Measured: the demo row, every number from the simulator's HTTP exchanges. Extrapolated: \
         query {} B and response {} B are exact wire sizes at 2^{} bits; server time comes from the fit \
         (single core, one query per pass, no HTTP); the manifest ({}) is a serialized internet-scale \
         manifest (768 databases, derived salts and seeds, {} logs), fetched {} times a week (one per daily epoch). \
         {} Not included: HTTP and TLS overhead, idle capacity, headroom.\n\
         * Server-time points: {}. The fit is assumed linear in database bytes from the largest \
         point ({}) to the target ({}, {}× further); pir-bench runs near the target \
         (`--pir-bench FILE`) shorten that extrapolation.\n\
         * Quoted: YPIR §4.5 Table 6 exactly as printed (its MB/KB are binary units, see the \
         communication costs) and Chrome's 2.3 MB per week (YPIR §4.5 citing DeB24); not measured \
         here, on the authors' machine.\n\
         * Generated {}.",
        fmt_sig(p.usd_per_outbound_gb, 3),
        fmt_sig(p.usd_per_core_second, 3),
        fmt_sig(m.audits_per_client_week, 3),
        group_thousands(&r.target_query_bytes.to_string()),
        group_thousands(&r.target_response_bytes.to_string()),
        r.target_db_bits,
        fmt_bytes(r.target_manifest_bytes as f64),
        INTERNET_SCALE_LOGS,
        MANIFEST_FETCHES_PER_WEEK,
        match (&r.batch, &r.fixed) {
            (Some(_), Some(_)) => "Batched rows and the fixed costs use the batch curve, filter build and DBSetup rates measured here (sections above).",
            (None, Some(_)) => "No batch curve was measured, so every row is priced one query per pass; the fixed costs use rates measured here.",
            (Some(_), None) => "Batched rows use the batch curve measured here; the fixed costs (daily build, memory) were not measured and are left out.",
            (None, None) => "Neither cross-client batching nor the fixed costs (daily build, memory) were measured here (answer times come only from named files), so both are left out.",
        },
        md_escape(&r.timings.describe()),
        fmt_bytes(largest),
        fmt_bytes(r.target_db_bytes as f64),
        fmt_sig(r.target_db_bytes as f64 / largest.max(1.0), 3),
        r.generated_at,
    );
    s
}

/// Batching, fixed costs and the whole bill.
fn render_scale(s: &mut String, r: &CostReport) {
    use std::fmt::Write as _;
    let p = &r.prices;
    if let Some(c) = &r.batch {
        let _ = writeln!(s, "\n## Cross-client batching (measured here)\n");
        let _ = writeln!(
            s,
            "One pass over a database answers k queries at once (YPIR §4.5). Per-query core time \
             relative to one query, {}:\n\n| k | pass | per query | relative |\n|--:|--:|--:|--:|",
            md_escape(&c.source)
        );
        for b in &c.points {
            let _ = writeln!(
                s,
                "| {} | {} ms | {} ms | {} |",
                b.k,
                fmt_sig(b.batch_seconds * 1e3, 3),
                fmt_sig(b.batch_seconds * 1e3 / b.k as f64, 3),
                fmt_sig(b.per_query_ratio, 3)
            );
        }
        let _ = writeln!(
            s,
            "\nThe batched rows carry this ratio measured at {} to the real filter ({}), where the \
             pass is equally memory- or arithmetic-bound.",
            fmt_bytes(c.db_bytes),
            fmt_bytes(r.real_filter_db_bytes as f64)
        );
    }
    if let (Some(f), Some(b)) = (&r.fixed, &r.build_rates) {
        let _ = writeln!(s, "\n## Fixed costs per week (shared by all clients)\n");
        let _ = writeln!(
            s,
            "| item | quantity | per week | source |\n|---|--:|--:|---|\n\
             | daily epoch build: {} filters × {} entries | {} core-hours a day ({} in the filters) | {} | extrapolated from {} ns per (entry, filter) ({}) and DBSetup at {} MB/s per core ({}) |\n\
             | server memory: {} per epoch, provisioned twice | {} | {} | extrapolated: {} databases of {} records each plus hint, public data and packing precomputation (`Server::memory`), two epochs resident (the next is built and the previous answers for the grace period while the current serves), at ${} per GiB-hour |\n\
             | **total** | | **{}** | |",
            f.filters,
            fmt_sig(f.entries as f64, 3),
            fmt_sig(f.build_core_seconds_per_day / 3600.0, 3),
            fmt_sig(f.build_filter_core_seconds_per_day / 3600.0, 3),
            fmt_money(f.build_usd_per_week),
            fmt_sig(b.ns_per_entry_filter, 3),
            md_escape(&b.filter_source),
            fmt_sig(b.setup_bytes_per_core_second / 1e6, 3),
            md_escape(&b.setup_source),
            fmt_bytes(f.epoch_memory_bytes),
            fmt_bytes(f.provisioned_memory_bytes),
            fmt_money(f.memory_usd_per_week),
            f.filters,
            fmt_bytes(f.db_bytes as f64),
            fmt_sig(p.usd_per_gib_hour, 3),
            fmt_money(f.usd_per_week),
        );
    }
    if !r.bills.is_empty() {
        let _ = writeln!(s, "\n## The whole weekly bill at the real filter size\n");
        let _ = writeln!(
            s,
            "| clients | queries/s per database | mean batch | per-client costs | fixed costs | **total per week** | **per 10^6 clients** | cores answering |\n|--:|--:|--:|--:|--:|--:|--:|--:|"
        );
        for b in &r.bills {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | **{}** | **{}** | {} |",
                fmt_clients(b.clients),
                fmt_sig(b.per_database_rate, 3),
                fmt_sig(b.expected_batch, 3),
                fmt_money(b.variable_usd_per_week),
                if r.fixed.is_some() {
                    fmt_money(b.fixed_usd_per_week)
                } else {
                    "not measured".into()
                },
                fmt_money(b.total_usd_per_week),
                fmt_money(b.usd_per_million_clients_week),
                fmt_sig(b.answering_cores, 3),
            );
        }
        let _ = writeln!(
            s,
            "\nAll extrapolated from the measurements above. Cores answering = queries per second × \
             batched core-seconds per query, before headroom for peaks."
        );
    }
    if let Some(d) = &r.deployment {
        let m = &d.machine;
        let _ = writeln!(s, "\n## Machines\n");
        let _ = writeln!(
            s,
            "Sized for {} machines (an assumption: the memory bandwidth of a whole machine cannot be \
             measured from one core). Each shard keeps {} databases with room for a second epoch and \
             for the {} of leaf hashes and their keys it holds while building ({} % of its memory in \
             all), so the epoch needs **{} shards**. Each shard streams the whole \
             snapshot ({} of leaf hashes: every filter holds every entry; {} at the machine's network \
             rate), {} a day from the object store in all; the daily build's computation then takes \
             **{} of wall time** with every shard building its own databases on all its cores (not \
             counted: each shard also keys every entry, one SHA-256 per entry, beside its share).\n",
            md_escape(&m.name),
            d.databases_per_shard,
            fmt_bytes(d.build_transient_bytes),
            fmt_sig(crate::scale::USABLE_MEMORY_FRACTION * 100.0, 3),
            d.shards,
            fmt_bytes(d.snapshot_bytes),
            fmt_seconds(d.snapshot_download_s),
            fmt_bytes(d.snapshot_bytes_per_day),
            fmt_seconds(d.build_compute_s),
        );
        let _ = writeln!(
            s,
            "| clients | cores answering | scan | machines for cores | for bandwidth | for memory | **machines** |\n|--:|--:|--:|--:|--:|--:|--:|"
        );
        for p in &d.populations {
            let _ = writeln!(
                s,
                "| {} | {} | {} GB/s | {} | {} | {} | **{}** |",
                fmt_clients(p.clients),
                fmt_sig(p.answering_cores, 3),
                fmt_sig(p.scan_gb_s, 3),
                p.machines_for_cores,
                p.machines_for_bandwidth,
                d.shards,
                p.machines,
            );
        }
        let _ = writeln!(
            s,
            "\nExtrapolated, before headroom for peaks and failures. Where bandwidth binds, more \
             batching (a longer window) or more shards lower the need; the cost rows above price core \
             time only."
        );
    }
}

/// "1.13× the cost of X" / "7.05× cheaper than X".
fn relative(ours: f64, theirs: f64, name: &str) -> String {
    if ours <= 0.0 || theirs <= 0.0 {
        String::new()
    } else if ours <= theirs {
        format!("{}× cheaper than {name}", fmt_sig(theirs / ours, 3))
    } else {
        format!("{}× the cost of {name}", fmt_sig(ours / theirs, 3))
    }
}

pub(super) fn md_escape(s: &str) -> String {
    s.replace('|', "\\|")
}
