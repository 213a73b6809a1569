//! `pir-bench`: YPIR single-bit retrieval benchmark with Table 1 parameters.
//!
//! Builds a random bit database of 2^B bits, runs DBSetup, then T trials of
//! Query → Answer → Extract on random bits, and prints one JSON object.
//! Bandwidth is measured in the same run (a summing pass over the database
//! buffer itself, single thread), so `bw_fraction` is a ratio taken under
//! the same machine conditions as the answers. Likewise, with `--batch k`
//! every trial also answers the batch's first query alone, and with
//! `--threads n` it also answers the batch on one thread, so
//! `batch_speedup` and `thread_speedup` compare runs of the same trials
//! (alternating which goes first) rather than separate processes. Beside
//! the SimplePIR pass it times the kernel's multiply ceiling (`mac_*`) and
//! the overlap ceiling (`overlap_ceiling`: a synthetic pass over the same
//! database with the batch's multiply count per line, from registers),
//! the best one core can reach of max(memory, multiplies) for this batch,
//! the real pass over a cache-resident database (`cached_pass`: what
//! the kernels reach of the multiply ceiling when memory costs nothing),
//! and how many misses to DRAM the core keeps in flight
//! (`miss_parallelism`: what a pass whose lines all miss L1 can read).
//!
//! `--cached-pass-batches 1,2,4,…` measures only the cached pass, for each
//! batch size, and builds no database: what the selected kernel
//! (`PIR_KERNEL` picks another) reaches of its multiply ceiling per batch
//! size when memory costs nothing.
//!
//! The database, DBSetup's timing, the median and the memory check come
//! from `pir_core::bench`, which audit-sim's cost report times with too.

// the JSON report is one `serde_json::json!` literal with many fields
#![recursion_limit = "256"]

use std::time::Instant;

use anyhow::{bail, Context as _, Result};
use clap::Parser;
use pir_core::bench::{median, mem_available, BenchDb};
use pir_core::db::locate_bit;
use pir_core::params::{DbShape, TABLE1};
use pir_core::server::{CachedPass, RecordUpdate, Server};
use pir_core::wire::{Query, Response};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

#[derive(Parser, Debug)]
#[command(about = "YPIR benchmark (Table 1 parameters, single-bit records)")]
struct Args {
    /// log2 of the number of bits in the database (20..=36; 2^36 bits is an
    /// 8 GiB database, which needs about 9.3 GB of memory in all).
    #[arg(long, default_value_t = 30)]
    db_bits: u32,
    /// log2 of ℓ1 (rows) instead of `DbShape::for_bits`'s choice, to compare
    /// database shapes of the same size (ℓ2 = records ÷ ℓ1).
    #[arg(long)]
    rows_log: Option<u32>,
    /// Number of timed trials.
    #[arg(long, default_value_t = 5)]
    trials: usize,
    /// Queries answered together with one pass over the database (§4.3).
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Worker threads for setup and answering.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// After the trials, `trials` times: change this fraction of the
    /// records at random, apply `Server::update` and check answers on the
    /// updated database; the median update is timed against the setup.
    #[arg(long)]
    update_fraction: Option<f64>,
    /// Measure only the real pass over a cache-resident database
    /// (`cached_pass`) for each of these batch sizes, comma-separated
    /// (1..=64); builds no database.
    #[arg(long, value_delimiter = ',')]
    cached_pass_batches: Option<Vec<usize>>,
    /// Print one JSON object (otherwise a short human summary as well).
    #[arg(long)]
    json: bool,
}

/// Single-thread read bandwidth over `buf` in GB/s, two ways: a plain
/// summing pass (the buffer as little-endian u64 words, eight independent
/// accumulators, vectorisable loads, no stores) and the same pass with a
/// software prefetch 8 KiB ahead, which is what the SimplePIR kernel does.
/// The reference for `bw_fraction` is the better of the two, so that a
/// kernel cannot look faster than memory by out-prefetching a naive loop.
fn read_bandwidth(buf: &[u8]) -> ((f64, f64), f64) {
    let pass = |prefetch: bool| {
        let c = pir_core::mem::thread_cpu_seconds();
        let t = Instant::now();
        sum_words(buf, prefetch);
        let wall = t.elapsed().as_secs_f64();
        let cpu = cpu_since(c).unwrap_or(wall);
        (buf.len() as f64 / wall / 1e9, buf.len() as f64 / cpu / 1e9)
    };
    let (a, b) = (pass(false), pass(true));
    ((a.0, b.0), a.1.max(b.1))
}

/// Thread CPU seconds since `start` (a [`pir_core::mem::thread_cpu_seconds`]
/// reading), if both readings exist.
fn cpu_since(start: Option<f64>) -> Option<f64> {
    Some(pir_core::mem::thread_cpu_seconds()? - start?).filter(|&d| d > 0.0)
}

/// Read bandwidth of all threads of the current pool together (GB/s): each
/// sums its own contiguous share of `buf` with prefetch, as the parallel
/// SimplePIR pass splits the database. The ceiling for `--threads` speedups
/// of a memory-bound pass is this ÷ the single-thread figure.
fn read_bandwidth_all_threads(buf: &[u8]) -> f64 {
    use rayon::prelude::*;
    let share = buf.len().div_ceil(rayon::current_num_threads()).max(64);
    let t = Instant::now();
    buf.par_chunks(share).for_each(|part| sum_words(part, true));
    buf.len() as f64 / t.elapsed().as_secs_f64() / 1e9
}

/// The summing pass of [`read_bandwidth`].
fn sum_words(buf: &[u8], prefetch: bool) {
    let mut acc = [0u64; 8];
    let mut chunks = buf.chunks_exact(64);
    for (n, c) in (&mut chunks).enumerate() {
        if prefetch {
            pir_core::mem::prefetch(buf, n * 64 + 8192);
        }
        for (k, a) in acc.iter_mut().enumerate() {
            let mut w = [0u8; 8];
            w.copy_from_slice(&c[8 * k..8 * k + 8]);
            *a = a.wrapping_add(u64::from_le_bytes(w));
        }
    }
    let tail: u64 = chunks.remainder().iter().map(|&b| b as u64).sum();
    std::hint::black_box((acc, tail));
}

/// The JSON of a [`CachedPass`].
fn cached_pass_json(c: &CachedPass) -> serde_json::Value {
    serde_json::json!({
        "kernel": c.kernel,
        "batch": c.batch,
        "bytes": c.bytes,
        "pass_ms": c.seconds * 1e3,
        "mac_peak_g_per_s": c.macs_per_second / 1e9,
        // k·bytes ÷ (pass × peak)
        "fraction": c.fraction(),
        // the database bytes per second a pass at this rate reads
        "stream_gb_s": c.bytes_per_second() / 1e9,
    })
}

/// Prints `out`: one line with `--json`, else indented.
fn print(out: &serde_json::Value, json: bool) -> Result<()> {
    if json {
        println!("{out}");
    } else {
        println!("{}", serde_json::to_string_pretty(out)?);
    }
    Ok(())
}

/// `--cached-pass-batches`: [`CachedPass`] per batch size (null for the
/// scalar kernel, which has no multiply ceiling).
fn cached_passes(ks: &[usize], json: bool) -> Result<()> {
    if ks.is_empty() || ks.iter().any(|&k| !(1..=64).contains(&k)) {
        bail!("--cached-pass-batches takes batch sizes in 1..=64");
    }
    let passes: Vec<serde_json::Value> = ks
        .iter()
        .map(|&k| {
            let c = pir_core::server::cached_pass(k);
            serde_json::json!({ "batch": k, "cached_pass": c.as_ref().map(cached_pass_json) })
        })
        .collect();
    let out = serde_json::json!({
        "kernel": pir_core::server::simplepir_impl(),
        "cached_passes": passes,
    });
    print(&out, json)
}

fn main() -> Result<()> {
    let args = Args::parse();
    if let Some(ks) = &args.cached_pass_batches {
        return cached_passes(ks, args.json);
    }
    if !(20..=36).contains(&args.db_bits) {
        bail!("--db-bits must be in 20..=36");
    }
    if args.batch == 0 || args.trials == 0 || args.threads == 0 {
        bail!("--batch, --trials and --threads must be positive");
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.threads)
        .build()
        .context("thread pool")?;
    pool.install(|| run(&args))
}

fn run(args: &Args) -> Result<()> {
    let params = TABLE1;
    let bits = 1u64 << args.db_bits;
    let shape = match args.rows_log {
        None => DbShape::for_bits(bits, 8),
        Some(r) => {
            let records = bits / 8;
            if !(5..=18).contains(&r) || !records.is_multiple_of(1u64 << r) {
                bail!("--rows-log must be in 5..=18 and at most log2 of the records");
            }
            DbShape {
                ell1: 1 << r,
                ell2: (records >> r) as usize,
            }
        }
    };
    let correctness = params.check_shape(shape)?;
    // The process holds the database (built in place from the random
    // bitmap, no second copy) and the server state; refuse up front rather
    // than be killed half-way through DBSetup.
    let need = Server::memory(&params, shape).setup_peak() as u64;
    if let Some(avail) = mem_available() {
        if need > avail {
            bail!(
                "--db-bits {}: DBSetup needs about {:.1} GB, only {:.1} GB is available",
                args.db_bits,
                need as f64 / 1e9,
                avail as f64 / 1e9
            );
        }
    }

    // Random bitmap (bit b is bit b % 8 of record b / 8, record i at row
    // i mod ℓ1 of column i div ℓ1, as `locate_bit` maps them), then DBSetup.
    let BenchDb {
        mut server,
        client,
        mut rng,
        setup_seconds: prep_seconds,
        ..
    } = BenchDb::new(bits, shape, ChaCha8Rng::seed_from_u64(args.db_bits as u64))?;
    let seed = server.seed();
    let db_bytes = server.database().as_bytes().len();
    // Expected bits are read back from the server's copy (no second copy of
    // the database in memory).
    let expected = |srv: &Server, bit: u64| -> Result<bool> {
        let loc = locate_bit(shape, bits, bit)?;
        Ok(srv.database().get(loc.row, loc.col)? >> loc.bit & 1 == 1)
    };

    // (the first DBSetup's parts; the update ratio's rebuilds repeat the
    // prefetch measurement at the 2nd and 4th setup, so the choice the
    // answer trials ran with is taken now)
    let prep = server.setup_timings();
    let tuning = (
        pir_core::server::prefetch_distance(),
        pir_core::server::prefetch_tuning(),
    );

    let mut answer_ms = Vec::new();
    let (mut sp, mut dp, mut pk, mut ov) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut sp_frac = Vec::new();
    let (mut qms, mut ems) = (Vec::new(), Vec::new());
    let mut bw = Vec::new();
    let mut bw_all = Vec::new();
    let mut all_correct = true;
    let mut query_bytes = 0;
    let mut response_bytes = 0;
    // in-run references for the batch and thread speedups
    let one_thread = match args.threads {
        1 => None,
        _ => Some(
            rayon::ThreadPoolBuilder::new()
                .num_threads(1)
                .build()
                .context("one-thread pool")?,
        ),
    };
    let (mut single_ms, mut one_thread_ms) = (Vec::new(), Vec::new());
    // the multiply ceiling of the SimplePIR kernel, measured beside each
    // trial's bandwidth reference
    let mut peaks: Vec<pir_core::server::MacPeak> = Vec::new();
    let mut sp_bound_frac = Vec::new();
    let mut sp_bound_frac_wall = Vec::new();
    let mut bw_cpu = Vec::new();
    let mut cpu_share = Vec::new();
    for trial in 0..args.trials {
        let (wall_bw, cpu_bw) = read_bandwidth(server.database().as_bytes());
        bw.push(wall_bw);
        bw_cpu.push(cpu_bw);
        peaks.extend(pir_core::server::mac_peak());
        if args.threads > 1 {
            bw_all.push(read_bandwidth_all_threads(server.database().as_bytes()));
        }
        let mut qs = Vec::new();
        let mut keys = Vec::new();
        for _ in 0..args.batch {
            let bit = rng.next_u64() % bits;
            let t = Instant::now();
            let (q, key, b) = client.query_bit(bits, bit)?;
            let qb = q.to_bytes();
            qms.push(t.elapsed().as_secs_f64() * 1e3);
            query_bytes = qb.len();
            qs.push(Query::from_bytes(&qb)?);
            keys.push((key, b, expected(&server, bit)?));
        }
        // The references: the batch's first query alone (same pool) and the
        // whole batch on one thread; each answer is timed with its
        // serialisation, as the main one, and checked.
        let reference = |qs: &[Query], pool: Option<&rayon::ThreadPool>| -> Result<(f64, bool)> {
            let t = Instant::now();
            let resps = match pool {
                Some(p) => p.install(|| server.answer_batch(qs))?,
                None => server.answer_batch(qs)?,
            };
            let rbs: Vec<Vec<u8>> = resps.iter().map(|r| r.to_bytes()).collect();
            let ms = t.elapsed().as_secs_f64() * 1e3;
            let mut ok = true;
            for (rb, (key, b, want)) in rbs.iter().zip(&keys) {
                ok &= client.extract_bit(key, &Response::from_bytes(rb)?, *b)? == *want;
            }
            Ok((ms, ok))
        };
        let mut references = || -> Result<bool> {
            let mut ok = true;
            if args.batch > 1 {
                let (ms, good) = reference(&qs[..1], None)?;
                single_ms.push(ms);
                ok &= good;
            }
            if let Some(pool) = &one_thread {
                let (ms, good) = reference(&qs, Some(pool))?;
                one_thread_ms.push(ms);
                ok &= good;
            }
            Ok(ok)
        };
        let before = trial % 2 == 0;
        if before {
            all_correct &= references()?;
        }
        let c = pir_core::mem::thread_cpu_seconds();
        let t = Instant::now();
        let (resps, tm) = server.answer_batch_timed(&qs)?;
        let resp_bytes: Vec<Vec<u8>> = resps.iter().map(|r| r.to_bytes()).collect();
        let wall = t.elapsed().as_secs_f64();
        answer_ms.push(wall * 1e3);
        // the share of the answer's wall time this thread had a core (one
        // thread: the whole answer runs on it)
        let share = match args.threads {
            1 => cpu_since(c).map_or(1.0, |cpu| (cpu / wall).min(1.0)),
            _ => 1.0,
        };
        cpu_share.push(share);
        if !before {
            all_correct &= references()?;
        }
        sp.push(tm.simplepir * 1e3);
        // this trial's SimplePIR read rate ÷ this trial's bandwidth reference
        let (plain, pf) = bw[bw.len() - 1];
        sp_frac.push(args.batch as f64 * db_bytes as f64 / tm.simplepir / 1e9 / plain.max(pf));
        // the pass can take no less than one read of the database at this
        // trial's bandwidth, nor less than k·|DB| multiply-accumulates at
        // this trial's measured peak
        if let Some(pk) = peaks.last() {
            let mul = args.batch as f64 * db_bytes as f64 / pk.macs_per_second;
            let read = db_bytes as f64 / (plain.max(pf) * 1e9);
            sp_bound_frac_wall.push(read.max(mul) / tm.simplepir);
            // in CPU time: the peak and this bandwidth are timed in thread
            // CPU time, the pass is its wall time × the answer's CPU share
            let read = db_bytes as f64 / (bw_cpu[bw_cpu.len() - 1] * 1e9);
            sp_bound_frac.push(read.max(mul) / (tm.simplepir * share));
        }
        dp.push(tm.doublepir * 1e3);
        pk.push(tm.packing * 1e3);
        ov.push(tm.overlapped * 1e3);
        for (rb, (key, b, want)) in resp_bytes.iter().zip(&keys) {
            response_bytes = rb.len();
            let t = Instant::now();
            let r = Response::from_bytes(rb)?;
            let got = client.extract_bit(key, &r, *b)?;
            ems.push(t.elapsed().as_secs_f64() * 1e3);
            all_correct &= got == *want;
        }
    }
    // Incremental update (`Server::update`).
    let mut update = serde_json::Value::Null;
    if let Some(frac) = args.update_fraction {
        // What the update is compared with: DBSetup from scratch, timed
        // `trials` times like the update (the first setup, then rebuilds
        // of the same database and seed, each without the prefetch
        // measurement that the 1st, 2nd, 4th, … setup of a process makes;
        // the server is torn down before each, so memory peaks as in the
        // first). One setup is seconds long, but the host's noise moves it
        // by ±10 % from one to the next.
        let mut setups = vec![prep_seconds - prep.tune];
        for _ in 1..args.trials {
            let db = server.into_database();
            let t = Instant::now();
            server = Server::setup(params, db, seed)?;
            // without the prefetch re-measurement the 2nd and 4th setups make
            setups.push(t.elapsed().as_secs_f64() - server.setup_timings().tune);
        }
        let setup = median(&mut setups);
        // One update is a fraction of a second, short enough for one noisy
        // moment on a shared machine to decide it: apply `trials` updates,
        // each to fresh random records, and compare the median (and the
        // best) with the setup's.
        let n = ((shape.records() as f64) * frac).round() as usize;
        let mut rounds: Vec<(f64, pir_core::server::UpdateStats)> = Vec::new();
        let mut ok = true;
        for _ in 0..args.trials {
            let changes: Vec<RecordUpdate> = (0..n)
                .map(|_| RecordUpdate {
                    row: (rng.next_u64() % shape.ell1 as u64) as usize,
                    col: (rng.next_u64() % shape.ell2 as u64) as usize,
                    value: rng.next_u32() as u8,
                })
                .collect();
            let t = Instant::now();
            let stats = server.update(&changes)?;
            let secs = t.elapsed().as_secs_f64();
            // answers after the update must reflect the new records
            for c in changes.iter().take(args.trials) {
                let (q, key) = client.query(c.row, c.col)?;
                let r = Response::from_bytes(&server.answer_bytes(&q.to_bytes())?)?;
                ok &= client.extract(&key, &r)? == server.database().get(c.row, c.col)?;
            }
            rounds.push((secs, stats));
        }
        all_correct &= ok;
        rounds.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (secs, stats) = &rounds[rounds.len() / 2];
        let best = rounds[0].0;
        update = serde_json::json!({
            "fraction": frac,
            "records": n,
            "rounds": rounds.len(),
            "changed_records": stats.changed_records,
            "dirty_columns": stats.dirty_columns,
            "update_seconds": secs,
            "update_seconds_min": best,
            "update_seconds_all": rounds.iter().map(|r| r.0).collect::<Vec<_>>(),
            "update_hint_seconds": stats.timings.hint,
            "update_h2_seconds": stats.timings.h2,
            "update_packing_seconds": stats.timings.packing,
            "setup_seconds": setup,
            "setup_seconds_all": setups,
            "speedup_vs_setup": setup / secs,
            "speedup_vs_setup_best": setups[0] / best,
            "speedup_vs_first_setup": (prep_seconds - prep.tune) / secs,
            "answers_correct_after_update": ok,
        });
    }
    let bw_plain = bw.iter().map(|b| b.0).fold(0f64, f64::max);
    let bw_prefetch = bw.iter().map(|b| b.1).fold(0f64, f64::max);
    let mem_bw = bw_plain.max(bw_prefetch);
    let ans_min = answer_ms.iter().cloned().fold(f64::INFINITY, f64::min);
    let ans_med = median(&mut answer_ms.clone());
    let throughput = args.batch as f64 * db_bytes as f64 / (ans_min / 1e3) / 1e9;
    // bytes one answer streams, and that ÷ the best answer ÷ a bandwidth
    let stream = server.answer_stream_bytes();
    let stream_fraction = |bw: f64| stream as f64 / (ans_min / 1e3) / 1e9 / bw;
    // the best all-threads read of the run (--threads n)
    let bw_all_best = bw_all.iter().cloned().reduce(f64::max);
    let min_of = |v: &[f64]| v.iter().cloned().reduce(f64::min);
    let single_min = min_of(&single_ms);
    let one_thread_min = min_of(&one_thread_ms);
    let peak = peaks
        .iter()
        .max_by(|a, b| a.macs_per_second.total_cmp(&b.macs_per_second))
        .cloned();
    let clock = peaks.iter().map(|p| p.clock_hz).fold(0f64, f64::max);
    // The best this core reaches for the batch when memory and multiplies
    // overlap as well as they can (a synthetic pass over the database with
    // the batch's instruction count per line; docs/benchmarks.md), against
    // the same bound as the SimplePIR pass.
    // the best single-thread bandwidth of the run, CPU time
    let bw_cpu_best = bw_cpu.iter().cloned().fold(mem_bw, f64::max);
    let ceiling = pir_core::server::overlap_ceiling(server.database().as_bytes(), args.batch);
    let ceiling_json = ceiling.as_ref().map(|c| {
        let bytes = c.bytes as f64;
        let bound = peak.as_ref().map(|p| {
            (bytes / (bw_cpu_best * 1e9)).max(args.batch as f64 * bytes / p.macs_per_second)
        });
        serde_json::json!({
            "kernel": c.kernel,
            "batch": c.batch,
            "bytes": c.bytes,
            "stream_ms": c.stream_seconds * 1e3,
            "compute_ms": c.compute_seconds * 1e3,
            "both_ms": c.both_seconds * 1e3,
            // max(stream alone, multiplies alone) ÷ both
            "overlap_fraction": c.fraction(),
            // max(|DB| ÷ bandwidth, k·|DB| ÷ peak) ÷ both: what
            // simplepir_bound_fraction would be for a perfect kernel
            "bound_fraction": bound.map(|b| b / c.both_seconds),
        })
    });
    let cached = pir_core::server::cached_pass(args.batch);
    let cached_json = cached.as_ref().map(cached_pass_json);
    // getrusage's ru_maxrss: includes the random bitmap, which becomes
    // the database in place
    let peak_rss = pir_core::mem::peak_rss_bytes();
    // how many misses to DRAM this core keeps in flight (independent
    // chases over random lines of a 256 MiB buffer), against what the
    // batch's pass would read at its cache-resident rate: a pass from
    // memory whose lines all go through L1 misses (software prefetches
    // fill L1 on AMD cores) can read no faster than the best of these.
    // Measured last, after the run's peak RSS was read, so that its
    // buffer does not count in it.
    // (not on wasm32, where pir_core::mem has no pointer chases)
    #[cfg(not(target_arch = "wasm32"))]
    let mlp_json = {
        let mlp = pir_core::mem::miss_parallelism();
        serde_json::json!({
            "buffer_bytes": mlp.buffer_bytes,
            "huge_pages": format!("{:?}", mlp.huge_pages).to_lowercase(),
            "one_chain_ns": mlp.one_chain_ns,
            "chains_gb_s": mlp.chains_gb_s.iter().map(|(n, g)| serde_json::json!([n, g])).collect::<Vec<_>>(),
            "best_gb_s": mlp.best_gb_s(),
            "lines_in_flight": mlp.lines_in_flight(),
            // the cached pass's stream_gb_s ÷ best_gb_s
            "cached_pass_need_fraction": cached.as_ref().map(|c| c.bytes_per_second() / 1e9 / mlp.best_gb_s()),
        })
    };
    #[cfg(target_arch = "wasm32")]
    let mlp_json = serde_json::Value::Null;
    let out = serde_json::json!({
        "db_bits": args.db_bits,
        "rows": shape.ell1,
        "cols": shape.ell2,
        "db_bytes": db_bytes,
        "batch": args.batch,
        "threads": args.threads,
        "trials": args.trials,
        "kernel": pir_core::server::simplepir_impl(),
        "prep_seconds": prep_seconds,
        "prep_mb_per_s": db_bytes as f64 / prep_seconds / 1e6,
        "prep_hint_seconds": prep.hint,
        "prep_h2_seconds": prep.h2,
        "prep_packing_seconds": prep.packing,
        // the prefetch measurement of the first DBSetup (included in
        // prep_seconds) and what the answer trials ran with
        "prep_tune_seconds": prep.tune,
        "simplepir_prefetch_bytes": tuning.0,
        "simplepir_prefetch_tuning": tuning.1.map(|t| serde_json::json!({
            "forced": t.forced,
            "span_bytes": t.span_bytes,
            // measurements merged (each candidate's best rate over them)
            "measurements": t.measurements,
            // the kernel a single query uses (batches use `kernel`)
            "kernel": t.kernel,
            "candidates_gb_s": t.candidates.iter().map(|(k, d, g)| serde_json::json!([k, d, g])).collect::<Vec<_>>(),
        })),
        "update": update,
        "query_bytes": query_bytes,
        "response_bytes": response_bytes,
        "answer_ms_min": ans_min,
        "answer_ms_median": ans_med,
        "simplepir_ms": median(&mut sp.clone()),
        "simplepir_ms_min": sp.iter().cloned().fold(f64::INFINITY, f64::min),
        // best SimplePIR pass ÷ best bandwidth sample of the run (strict)
        "simplepir_bw_fraction": args.batch as f64 * db_bytes as f64
            / sp.iter().cloned().fold(f64::INFINITY, f64::min)
            / 1e6
            / mem_bw,
        // median over trials of (pass ÷ the reference measured just before it)
        "simplepir_bw_fraction_per_trial": median(&mut sp_frac),
        "doublepir_ms": median(&mut dp),
        "packing_ms": median(&mut pk),
        "overlapped_ms": median(&mut ov),
        "throughput_gb_s": throughput,
        // --batch k: best single-query answer of the same trials, and
        // k · that ÷ the best batch answer (effective throughput ratio)
        "single_answer_ms_min": single_min,
        "batch_speedup": single_min.map(|s| args.batch as f64 * s / ans_min),
        // --threads n: best one-thread answer of the same batch in the same
        // trials, and that ÷ the best n-thread answer
        "one_thread_answer_ms_min": one_thread_min,
        "thread_speedup": one_thread_min.map(|s| s / ans_min),
        "client_query_ms": median(&mut qms),
        "client_extract_ms": median(&mut ems),
        "mem_bw_gb_s": mem_bw,
        "mem_bw_plain_gb_s": bw_plain,
        "mem_bw_prefetch_gb_s": bw_prefetch,
        "mem_bw_all_threads_gb_s": bw_all_best,
        "bw_fraction": throughput / mem_bw,
        // bytes one answer streams (database, hint rows, packing digits),
        // and with --threads n that ÷ the best answer ÷ what the n threads
        // read together: how close the answer is to the machine's ceiling
        "answer_stream_bytes": stream,
        // the same on one core: the whole answer against reading all it
        // reads at the read loop's speed, and the `bw_fraction` an answer
        // would reach if it did (database bytes ÷ bytes read)
        "answer_stream_fraction": stream_fraction(mem_bw),
        "bw_fraction_ceiling": args.batch as f64 * db_bytes as f64 / stream as f64,
        "all_threads_bw_fraction": bw_all_best.map(stream_fraction),
        // the SimplePIR pass against its arithmetic ceiling (docs/benchmarks.md):
        // the kernel's multiply instruction timed from registers beside each
        // trial, the clock from a chain of dependent adds, and per trial
        // max(|DB| ÷ bandwidth, k·|DB| ÷ peak) ÷ the pass (median)
        "mac_instruction": peak.as_ref().map(|p| p.instruction),
        "mac_peak_g_per_s": peak.as_ref().map(|p| p.macs_per_second / 1e9),
        "clock_ghz": peak.as_ref().map(|_| clock / 1e9),
        "macs_per_cycle": peak.as_ref().map(|p| p.macs_per_second / clock),
        // the batch size from which the multiplies, not the memory, bound
        // the pass: peak ÷ bandwidth, both in thread CPU time
        "batch_where_compute_bound": peak.as_ref().map(|p| p.macs_per_second / 1e9 / bw_cpu_best),
        "simplepir_bound_fraction": (!sp_bound_frac.is_empty()).then(|| median(&mut sp_bound_frac)),
        // the same with the pass and the bandwidth in wall time (on a
        // machine shared with other work, waiting for a core counts)
        "simplepir_bound_fraction_wall": (!sp_bound_frac_wall.is_empty()).then(|| median(&mut sp_bound_frac_wall)),
        "mem_bw_cpu_time_gb_s": bw_cpu.iter().cloned().reduce(f64::max),
        "overlap_ceiling": ceiling_json,
        "cached_pass": cached_json,
        "miss_parallelism": mlp_json,
        "answer_cpu_share": (!cpu_share.is_empty()).then(|| median(&mut cpu_share)),
        "simplepir_macs_g_per_s": args.batch as f64 * db_bytes as f64
            / sp.iter().cloned().fold(f64::INFINITY, f64::min)
            / 1e6,
        "server_state_bytes": server.state_bytes(),
        "db_setup_peak_bytes": need,
        "peak_rss_bytes": peak_rss,
        "peak_rss_over_db": peak_rss.map(|r| r as f64 / db_bytes as f64),
        "log2_delta": correctness.log2_delta,
        "all_correct": all_correct,
    });
    print(&out, args.json)?;
    if !all_correct {
        bail!("an extracted bit was wrong");
    }
    Ok(())
}
