//! Benchmark building blocks (feature `bench`): the timing loops that
//! `pir-bench` and the operator tools which time PIR (audit-sim's cost
//! report) share, so that every PIR timing of the workspace is taken the
//! same way.
//!
//! * [`BenchDb`]: a random bit database (records of one byte, bit b in
//!   record b / 8 as [`crate::db::locate_bit`] maps it) set up with YPIR
//!   Table 1, its DBSetup time, and the client that queries it;
//! * [`BenchDb::time_batch`] (and [`BenchDb::time_answer`] for one
//!   query): k fresh queries for random bits answered with one pass, timed
//!   from the parsed queries to the encoded responses, then every response
//!   checked against the database;
//! * [`paired_batch_rounds`]: a batch curve whose every batch is priced
//!   against single queries timed just before and just after it;
//! * [`median`] and [`mem_available`].
//!
//! The timed work runs on the calling thread's rayon pool: a one-thread
//! pool times core-seconds.

use std::time::Instant;

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

use crate::client::{Client, QueryKey};
use crate::db::{locate_bit, BitDatabase, Database};
use crate::error::{Error, Result};
use crate::params::{DbShape, TABLE1};
use crate::sampler::PublicSeed;
use crate::server::Server;
use crate::wire::{Query, Response};

/// A random bit database set up with YPIR Table 1 and a fresh public seed,
/// with the client that queries it.
pub struct BenchDb {
    /// Bits ℓ of the database.
    pub bits: u64,
    /// Its shape (ℓ1 × ℓ2 records of one byte).
    pub shape: DbShape,
    /// The server after DBSetup.
    pub server: Server,
    /// A client of that server.
    pub client: Client,
    /// The generator that filled the bitmap; it goes on to pick the bits
    /// queried.
    pub rng: ChaCha8Rng,
    /// Seconds DBSetup took (on the calling thread's rayon pool), the
    /// prefetch measurement of the 1st, 2nd, 4th, … large setup of the
    /// process included ([`crate::server::SetupTimings::tune`]).
    pub setup_seconds: f64,
}

/// One timed answer or batch of [`BenchDb::time_batch`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timed {
    /// Seconds from the parsed queries to the encoded responses.
    pub seconds: f64,
    /// Whether every response decoded to the bit the database holds.
    pub correct: bool,
}

/// What checking the answer to one query of [`BenchDb::random_queries`]
/// needs.
pub struct Expected {
    /// The query's secret key.
    pub key: QueryKey,
    /// Position of the bit in its record ([`Client::extract_bit`]).
    pub bit_in_record: u32,
    /// The bit the database holds there.
    pub value: bool,
}

impl BenchDb {
    /// A database of 2^`log2_bits` bits in [`DbShape::for_bits`]'s shape,
    /// filled from fresh OS randomness.
    pub fn random(log2_bits: u32) -> Result<BenchDb> {
        let bits = 1u64
            .checked_shl(log2_bits)
            .filter(|&b| b >= 8)
            .ok_or(Error::InvalidParams("a database of 2^3 to 2^63 bits"))?;
        let shape = DbShape::for_bits(bits, BitDatabase::RECORD_BITS);
        let rng = ChaCha8Rng::from_seed(PublicSeed::random()?.0);
        Self::new(bits, shape, rng)
    }

    /// A database of `bits` bits in `shape` (at least ⌈bits / 8⌉ records;
    /// the bitmap's bytes read column-major, the records past it zero),
    /// filled from `rng`, then DBSetup timed.
    pub fn new(bits: u64, shape: DbShape, mut rng: ChaCha8Rng) -> Result<BenchDb> {
        TABLE1.check_shape(shape)?;
        let bytes = usize::try_from(bits.div_ceil(8))
            .ok()
            .filter(|&b| b > 0 && b <= shape.records())
            .ok_or(Error::InvalidParams("the bits do not fit the shape"))?;
        let mut bitmap = crate::mem::zeroed_huge::<u8>(shape.records());
        rng.fill_bytes(&mut bitmap[..bytes]);
        if !bits.is_multiple_of(8) {
            bitmap[bytes - 1] &= (1u8 << (bits % 8)) - 1;
        }
        let db = Database::from_column_major(shape, BitDatabase::RECORD_BITS, bitmap)?;
        let seed = PublicSeed::random()?;
        let t = Instant::now();
        let server = Server::setup(TABLE1, db, seed)?;
        let setup_seconds = t.elapsed().as_secs_f64();
        let client = Client::new(TABLE1, shape, seed)?;
        Ok(BenchDb {
            bits,
            shape,
            server,
            client,
            rng,
            setup_seconds,
        })
    }

    /// Bit `bit` of the database, read from the server's copy.
    pub fn bit(&self, bit: u64) -> Result<bool> {
        let loc = locate_bit(self.shape, self.bits, bit)?;
        Ok(self.server.database().get(loc.row, loc.col)? >> loc.bit & 1 == 1)
    }

    /// `k` queries for random bits, each parsed back from its bytes as the
    /// server receives it, and what checking each answer needs.
    pub fn random_queries(&mut self, k: usize) -> Result<(Vec<Query>, Vec<Expected>)> {
        let mut queries = Vec::with_capacity(k);
        let mut expected = Vec::with_capacity(k);
        for _ in 0..k {
            let bit = self.rng.next_u64() % self.bits;
            let (query, key, bit_in_record) = self.client.query_bit(self.bits, bit)?;
            queries.push(Query::from_bytes(&query.to_bytes())?);
            expected.push(Expected {
                key,
                bit_in_record,
                value: self.bit(bit)?,
            });
        }
        Ok((queries, expected))
    }

    /// Whether `response` (wire bytes) decodes to the bit `expected`
    /// names.
    pub fn check(&self, expected: &Expected, response: &[u8]) -> Result<bool> {
        let r = Response::from_bytes(response)?;
        Ok(self
            .client
            .extract_bit(&expected.key, &r, expected.bit_in_record)?
            == expected.value)
    }

    /// [`BenchDb::time_batch`] of one query.
    pub fn time_answer(&mut self) -> Result<Timed> {
        self.time_batch(1)
    }

    /// Answers `k` fresh queries for random bits with one pass over the
    /// database (§4.3), timed from the parsed queries to the encoded
    /// responses, as `pir-bench` times its answers; then checks every
    /// response.
    pub fn time_batch(&mut self, k: usize) -> Result<Timed> {
        let (queries, expected) = self.random_queries(k)?;
        let t = Instant::now();
        let responses: Vec<Vec<u8>> = self
            .server
            .answer_batch(&queries)?
            .iter()
            .map(Response::to_bytes)
            .collect();
        let seconds = t.elapsed().as_secs_f64();
        let mut correct = true;
        for (e, r) in expected.iter().zip(&responses) {
            correct &= self.check(e, r)?;
        }
        Ok(Timed { seconds, correct })
    }
}

/// The median of `v` (sorted in place): the middle value, the mean of the
/// two middle ones for an even count, 0 for none.
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Bytes of memory available to new work (`MemAvailable` of
/// `/proc/meminfo`), if the OS says.
pub fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Most times [`paired_batch_rounds`] repeats one round whose two single
/// queries disagree. A round costs k + 2 passes: at 4 GiB on the Zen 4 the
/// 12 rounds of the default curve take about 12 s, so even two repeats of
/// every round would add no more than about 24 s.
pub const ROUND_REPEATS: usize = 2;

/// Largest relative difference between a round's two single queries that
/// [`paired_batch_rounds`] accepts. Over the 12 rounds of one curve at
/// 2^35 bits on a quiet core (AMD EPYC Zen 4) the two differed by
/// 0.3–14 %, median 3 %; a transient of the host once timed one at 230 ms
/// against 160 ms, which priced a batch of 4 at 0.43 of a single query
/// instead of 0.57.
pub const SINGLES_AGREE: f64 = 0.15;

/// How [`paired_batch_rounds`] went: of its `total` rounds, how many it
/// timed again (`rounds`, with `repeats` extra timings in all) and how many
/// still disagreed after [`ROUND_REPEATS`] repeats (`unsettled`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Repeated {
    /// Rounds: trials × the batch sizes above 1.
    pub total: usize,
    /// Rounds timed more than once.
    pub rounds: usize,
    /// Extra timings of rounds, in all.
    pub repeats: usize,
    /// Rounds whose single queries still disagreed after the repeats.
    pub unsettled: usize,
}

impl Repeated {
    /// One clause for a curve's source line.
    pub fn describe(self) -> String {
        let pct = format!("{:.0} %", SINGLES_AGREE * 100.0);
        let Repeated {
            total,
            rounds,
            repeats,
            unsettled,
        } = self;
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        if rounds == 0 {
            return format!(
                "no round timed again (the two single queries of each agreed within {pct})"
            );
        }
        let mut s = format!(
            "{rounds} of {total} round{} timed again, {repeats} time{} in all, because the two single queries differed by more than {pct}",
            plural(total),
            plural(repeats)
        );
        if unsettled > 0 {
            s += &format!(
                "; {unsettled} still differing after {ROUND_REPEATS} repeats, priced against the faster single query"
            );
        }
        s
    }
}

/// One batch size of [`paired_batch_rounds`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PairedPoint {
    /// Queries answered in one pass.
    pub k: usize,
    /// Median seconds of the whole batch.
    pub batch_seconds: f64,
    /// Median over the rounds of (batch seconds ÷ k) ÷ the single query's
    /// seconds: the per-query cost relative to one query alone.
    pub per_query_ratio: f64,
}

/// What [`paired_batch_rounds`] measured.
#[derive(Clone, Debug, PartialEq)]
pub struct PairedRounds {
    /// By increasing k; the first is k = 1 (ratio 1, the median single
    /// query).
    pub points: Vec<PairedPoint>,
    /// How many rounds were timed again.
    pub repeated: Repeated,
}

/// A batch curve over the batch sizes `ks` (1 is always included) with
/// `pass(k)` timing one pass of k queries, in `trials` rounds: a warm-up
/// single query (not counted), then per round and per k > 1 a single
/// query, the batch and another single query. The batch is priced against
/// the mean of the two, which cancels a drift of the host that is steady
/// over the round (on a shared host the core's share moves from one minute
/// to the next, and a curve timed k by k takes that drift for a batching
/// effect). When they differ by more than [`SINGLES_AGREE`], a transient
/// slowed one of the three passes, and the round is timed again, up to
/// [`ROUND_REPEATS`] times; a round that never settles is priced against
/// the faster single query, which can only overstate the batch's cost.
/// Each point is the median batch time and the median of its rounds'
/// ratios. (Eight curves each way at 2^33 bits, 3 rounds, alternating, on
/// a shared AVX2 Zen 3: the ratios at k = 2, 4, 8 and 16 spread with a
/// standard deviation of 0.047, 0.054, 0.038 and 0.022 paired this way,
/// and 0.051, 0.076, 0.048 and 0.046 timed k by k.)
pub fn paired_batch_rounds<E>(
    ks: &[usize],
    trials: usize,
    mut pass: impl FnMut(usize) -> std::result::Result<f64, E>,
) -> std::result::Result<PairedRounds, E> {
    let mut ks: Vec<usize> = ks.iter().copied().filter(|&k| k > 1).collect();
    ks.sort_unstable();
    ks.dedup();
    pass(1)?;
    let mut singles = Vec::new();
    let mut repeated = Repeated {
        total: trials * ks.len(),
        ..Repeated::default()
    };
    // per k > 1: its batch times and its rounds' ratios
    let mut rounds: Vec<(Vec<f64>, Vec<f64>)> = vec![Default::default(); ks.len()];
    for _ in 0..trials {
        if ks.is_empty() {
            singles.push(pass(1)?);
        }
        for (&k, (times, ratios)) in ks.iter().zip(rounds.iter_mut()) {
            let mut repeats = 0;
            let (before, batch, after, agree) = loop {
                let before = pass(1)?;
                let batch = pass(k)?;
                let after = pass(1)?;
                let agree = before.max(after) <= before.min(after) * (1.0 + SINGLES_AGREE);
                if agree || repeats == ROUND_REPEATS {
                    repeated.unsettled += usize::from(!agree);
                    repeated.rounds += usize::from(repeats > 0);
                    break (before, batch, after, agree);
                }
                repeats += 1;
                repeated.repeats += 1;
            };
            let single = if agree {
                (before + after) / 2.0
            } else {
                before.min(after)
            };
            singles.extend([before, after]);
            times.push(batch);
            ratios.push(batch / k as f64 / single);
        }
    }
    let mut points = vec![PairedPoint {
        k: 1,
        batch_seconds: median(&mut singles),
        per_query_ratio: 1.0,
    }];
    for (&k, (mut times, mut ratios)) in ks.iter().zip(rounds) {
        points.push(PairedPoint {
            k,
            batch_seconds: median(&mut times),
            per_query_ratio: median(&mut ratios),
        });
    }
    Ok(PairedRounds { points, repeated })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bench_db_answers_are_checked_against_the_database() {
        let mut db = BenchDb::random(16).unwrap();
        assert_eq!((db.bits, db.shape.records()), (1 << 16, 1 << 13));
        assert!(db.setup_seconds > 0.0);
        for k in [1, 3] {
            let t = db.time_batch(k).unwrap();
            assert!(t.correct && t.seconds > 0.0, "{t:?}");
        }
        // a response for another bit of another value is caught
        let (queries, mut expected) = db.random_queries(1).unwrap();
        let response = db.server.answer(&queries[0]).unwrap().to_bytes();
        assert!(db.check(&expected[0], &response).unwrap());
        expected[0].value = !expected[0].value;
        assert!(!db.check(&expected[0], &response).unwrap());
        assert!(BenchDb::random(70).is_err());
    }

    #[test]
    fn bench_db_keeps_the_bits_of_its_shape() {
        // 2^14 bits as a taller database: 2^11 records as 2^8 × 2^3
        let shape = DbShape { ell1: 256, ell2: 8 };
        let rng = ChaCha8Rng::seed_from_u64(7);
        let db = BenchDb::new(1 << 14, shape, rng).unwrap();
        let mut again = ChaCha8Rng::seed_from_u64(7);
        let mut bitmap = vec![0u8; 1 << 11];
        again.fill_bytes(&mut bitmap);
        for bit in [0u64, 1, 9, 4095, 16383] {
            let want = bitmap[(bit / 8) as usize] >> (bit % 8) & 1 == 1;
            assert_eq!(db.bit(bit).unwrap(), want, "bit {bit}");
        }
        // the generator goes on where the bitmap ended
        assert_eq!(db.rng.clone().next_u64(), again.next_u64());
        let too_many = BenchDb::new(1 << 15, shape, ChaCha8Rng::seed_from_u64(1));
        assert!(matches!(too_many, Err(Error::InvalidParams(_))));
    }

    #[test]
    fn median_of_odd_even_and_no_values() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&mut []), 0.0);
    }

    /// Each ratio compares a batch with the single queries timed just
    /// before and after it: under a host that slows by 1 % per pass (and
    /// a cold first pass ten times slower) the ratios stay within a
    /// fraction of one pass's drift, where a curve timed k by k would
    /// drift by tens of passes.
    #[test]
    fn batch_ratios_pair_each_batch_with_single_queries() {
        let mut calls = 0u32;
        let pass = |k: usize| -> Result<f64> {
            let drift = 1.01f64.powi(calls as i32);
            let cold = if calls == 0 { 10.0 } else { 1.0 };
            calls += 1;
            Ok((1.0 + 0.5 * k as f64) * drift * cold)
        };
        let ks = [1, 2, 4, 8, 16];
        let PairedRounds { points, repeated } = paired_batch_rounds(&ks, 3, pass).unwrap();
        assert_eq!(
            repeated,
            Repeated {
                total: 12,
                ..Repeated::default()
            }
        );
        assert_eq!(points.iter().map(|p| p.k).collect::<Vec<_>>(), ks);
        assert_eq!(points[0].per_query_ratio, 1.0);
        for p in &points[1..] {
            let truth = (1.0 + 0.5 * p.k as f64) / p.k as f64 / 1.5;
            let err = p.per_query_ratio / truth - 1.0;
            assert!(err.abs() < 1e-4, "k = {}: {err}", p.k);
        }
        // the warm-up pass is not among the single queries' times
        assert!(points[0].batch_seconds < 2.0);
        assert_eq!(calls, 1 + 3 * 3 * 4);
        // a curve of k = 1 alone still times `trials` single queries
        let mut n = 0;
        let one = paired_batch_rounds(&[1], 2, |_| -> Result<f64> {
            n += 1;
            Ok(1.0)
        })
        .unwrap();
        assert_eq!((one.points.len(), n), (1, 3));
        // unsorted sizes, repeated ones and no 1 come out sorted, once each, after k = 1
        let sizes = paired_batch_rounds(&[4, 2, 4], 1, |k| -> Result<f64> { Ok(k as f64) })
            .unwrap()
            .points
            .iter()
            .map(|p| p.k)
            .collect::<Vec<_>>();
        assert_eq!(sizes, [1, 2, 4]);
    }

    /// A transient that slows one single query (1.5×) would price the
    /// batch 40 % too cheap; the round is timed again instead, and the
    /// ratio comes out exact. Where every attempt disagrees, the repeats
    /// stop at [`ROUND_REPEATS`] and the faster single query prices the
    /// batch.
    #[test]
    fn a_round_whose_single_queries_disagree_is_repeated() {
        // passes: warm-up, then (single, batch, single) per attempt
        let mut calls = 0u32;
        let slow_once = |k: usize| -> Result<f64> {
            calls += 1;
            let t = 1.0 + 0.5 * k as f64;
            Ok(if calls == 2 { 1.5 * t } else { t })
        };
        let PairedRounds { points, repeated } = paired_batch_rounds(&[1, 4], 1, slow_once).unwrap();
        assert_eq!(
            repeated,
            Repeated {
                total: 1,
                rounds: 1,
                repeats: 1,
                unsettled: 0
            }
        );
        assert_eq!(calls, 1 + 2 * 3);
        assert!((points[1].per_query_ratio - 3.0 / 4.0 / 1.5).abs() < 1e-12);
        assert!(repeated
            .describe()
            .starts_with("1 of 1 round timed again, 1 time in all"));

        let mut calls = 0u32;
        let always = |k: usize| -> Result<f64> {
            calls += 1;
            // the single query after each batch is twice as slow
            Ok(if k == 1 && calls % 3 == 1 {
                3.0
            } else {
                1.0 + 0.5 * k as f64
            })
        };
        let PairedRounds { points, repeated } = paired_batch_rounds(&[1, 4], 2, always).unwrap();
        assert_eq!(
            repeated,
            Repeated {
                total: 2,
                rounds: 2,
                repeats: 2 * ROUND_REPEATS,
                unsettled: 2
            }
        );
        assert_eq!(calls, 1 + 2 * (ROUND_REPEATS as u32 + 1) * 3);
        assert!((points[1].per_query_ratio - 3.0 / 4.0 / 1.5).abs() < 1e-12);
        assert!(repeated.describe().contains("faster single query"));
        assert!(Repeated::default().describe().starts_with("no round"));
        assert!(!Repeated::default().describe().contains("faster"));
    }

    #[test]
    fn an_error_of_a_pass_ends_the_rounds() {
        let mut calls = 0;
        let r = paired_batch_rounds(&[2], 3, |_| {
            calls += 1;
            if calls == 3 {
                Err("wrong answer")
            } else {
                Ok(1.0)
            }
        });
        assert_eq!(r.unwrap_err(), "wrong answer");
        assert_eq!(calls, 3);
    }
}
