//! Wire-format robustness, batching, measured noise and message sizes.
use pir_core::client::Client;
use pir_core::db::{BitDatabase, Database};
use pir_core::params::{DbShape, TABLE1, TOY};
use pir_core::sampler::PublicSeed;
use pir_core::server::Server;
use pir_core::wire::{query_len, Query, Response};
use pir_core::Error;

fn lcg(s: &mut u64) -> u64 {
    *s = s
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *s >> 24
}

fn toy_setup(shape: DbShape) -> (Database, Server, Client) {
    let mut s = 77;
    let db = Database::from_fn(shape, 8, |_, _| lcg(&mut s) as u8).unwrap();
    let seed = PublicSeed::random().unwrap();
    let server = Server::setup(TOY, db.clone(), seed).unwrap();
    let client = Client::new(TOY, shape, seed).unwrap();
    (db, server, client)
}

#[test]
fn malformed_queries_are_rejected_with_typed_errors() {
    let shape = DbShape { ell1: 20, ell2: 1 }; // ℓ2 = 1: c2 sections carry padding bits
    let (_, server, client) = toy_setup(shape);
    let (q, _) = client.query(3, 0).unwrap();
    let good = q.to_bytes();
    assert_eq!(good.len(), query_len(&TOY, shape));
    assert!(server.answer_bytes(&good).is_ok());

    let err = |b: &[u8]| server.answer_bytes(b).unwrap_err();
    assert!(matches!(
        err(&good[..good.len() - 1]),
        Error::Truncated { .. }
    ));
    assert!(matches!(err(&[]), Error::Truncated { .. }));
    let mut long = good.clone();
    long.push(0);
    assert_eq!(err(&long), Error::TrailingBytes(1));
    let mut m = good.clone();
    m[0] = b'X';
    assert_eq!(err(&m), Error::BadMagic("query"));
    let mut m = good.clone();
    m[3] = 9;
    assert_eq!(err(&m), Error::UnsupportedVersion(9));
    let mut m = good.clone();
    m[4] = 0x77;
    assert!(matches!(err(&m), Error::UnknownParamSet(_)));
    let mut m = good.clone();
    m[4..6].copy_from_slice(&TABLE1.id.to_le_bytes());
    assert!(matches!(
        err(&m),
        Error::Truncated { .. } | Error::TrailingBytes(_)
    ));
    let mut m = good.clone();
    m[14..18].copy_from_slice(&(1u32 << 19).to_le_bytes());
    assert!(matches!(err(&m), Error::ShapeTooLarge { .. }));
    let mut m = good.clone();
    m[6] ^= 1;
    assert!(matches!(err(&m), Error::WrongSeed { .. }));
    // first pk residue set to P0 (not reduced)
    let mut m = good.clone();
    let p0 = pir_core::arith::P0;
    m[22] = p0 as u8;
    m[23] = (p0 >> 8) as u8;
    m[24] = (p0 >> 16) as u8;
    m[25] = (m[25] & 0xf0) | ((p0 >> 24) as u8 & 0x0f);
    assert_eq!(
        err(&m),
        Error::OutOfRange {
            field: "pk",
            index: 0
        }
    );
    // a set padding bit in the last c2 section (28 bits + 4 padding bits)
    let mut m = good.clone();
    let last = m.len() - 1;
    m[last] |= 0x80;
    assert_eq!(err(&m), Error::NonZeroPadding("c2"));
    // a query for another shape
    let other = Client::new(TOY, DbShape { ell1: 21, ell2: 1 }, server.seed()).unwrap();
    let (q2, _) = other.query(0, 0).unwrap();
    assert!(matches!(err(&q2.to_bytes()), Error::WrongShape { .. }));

    // Arbitrary garbage and every truncation never panic.
    let mut s = 5;
    for len in 0..200 {
        let junk: Vec<u8> = (0..len).map(|_| lcg(&mut s) as u8).collect();
        assert!(Query::from_bytes(&junk).is_err());
        assert!(Response::from_bytes(&junk).is_err());
    }
    for cut in (0..good.len()).step_by(97) {
        assert!(Query::from_bytes(&good[..cut]).is_err());
    }
    for _ in 0..300 {
        let mut m = good.clone();
        let i = lcg(&mut s) as usize % m.len();
        m[i] ^= 1 << (lcg(&mut s) % 8);
        let _ = server.answer_bytes(&m); // Ok or Err, never a panic
    }
}

#[test]
fn malformed_responses_are_rejected() {
    let shape = DbShape { ell1: 20, ell2: 9 };
    let (_, server, client) = toy_setup(shape);
    let (q, key) = client.query(1, 2).unwrap();
    let rb = server.answer(&q).unwrap().to_bytes();
    assert!(Response::from_bytes(&rb).is_ok());
    assert!(matches!(
        Response::from_bytes(&rb[..rb.len() - 1]),
        Err(Error::Truncated { .. })
    ));
    let mut long = rb.clone();
    long.extend_from_slice(&[0, 0]);
    assert_eq!(Response::from_bytes(&long), Err(Error::TrailingBytes(2)));
    let mut m = rb.clone();
    m[1] = 0;
    assert_eq!(Response::from_bytes(&m), Err(Error::BadMagic("response")));
    // a response from another database version is refused by the client
    let mut r = Response::from_bytes(&rb).unwrap();
    r.seed_id[0] ^= 1;
    assert!(matches!(
        client.extract(&key, &r),
        Err(Error::WrongSeed { .. })
    ));
}

/// Bytes that are not an answer to this query decode to an error, never to
/// a random record: a random response of the right format, and the answer
/// to another client's query (same database, other secret key).
#[test]
fn responses_that_are_not_answers_are_refused_by_their_noise() {
    for params in [TOY, TABLE1] {
        let shape = DbShape { ell1: 64, ell2: 32 };
        let mut s = 5;
        let db = Database::from_fn(shape, 8, |_, _| lcg(&mut s) as u8).unwrap();
        let seed = PublicSeed::random().unwrap();
        let server = Server::setup(params, db.clone(), seed).unwrap();
        let client = Client::new(params, shape, seed).unwrap();
        let (q, key) = client.query(7, 3).unwrap();
        let honest = server.answer(&q).unwrap();
        assert_eq!(
            client.extract(&key, &honest).unwrap(),
            db.get(7, 3).unwrap()
        );

        let (q_other, _) = client.query(7, 3).unwrap();
        let other = server.answer(&q_other).unwrap();
        assert!(
            matches!(
                client.extract(&key, &other),
                Err(Error::NoisyResponse { .. })
            ),
            "{}: another key's answer was accepted",
            params.name
        );

        let mut garbage = honest.clone();
        let mut g = 99;
        let q21 = 1u64 << params.q2_1_tilde_bits;
        let q22 = 1u64 << params.q2_2_tilde_bits;
        for v in &mut garbage.c0 {
            *v = (lcg(&mut g) % q21) as u32;
        }
        for v in &mut garbage.c1 {
            *v = (lcg(&mut g) % q22) as u32;
        }
        let garbage = Response::from_bytes(&garbage.to_bytes()).unwrap();
        assert!(
            matches!(
                client.extract(&key, &garbage),
                Err(Error::NoisyResponse { .. })
            ),
            "{}: a random response was accepted",
            params.name
        );
    }
}

#[test]
fn batched_answers_equal_single_answers() {
    let shape = DbShape {
        ell1: 300,
        ell2: 150,
    };
    let (db, server, client) = toy_setup(shape);
    let positions = [(0, 0), (299, 149), (17, 3), (17, 3), (150, 77)];
    let mut qs = Vec::new();
    let mut keys = Vec::new();
    for &(r, c) in &positions {
        let (q, k) = client.query(r, c).unwrap();
        qs.push(q);
        keys.push(k);
    }
    let batch = server.answer_batch(&qs).unwrap();
    for ((q, b), (k, &(r, c))) in qs.iter().zip(&batch).zip(keys.iter().zip(&positions)) {
        assert_eq!(&server.answer(q).unwrap(), b);
        assert_eq!(client.extract(k, b).unwrap(), db.get(r, c).unwrap());
    }
    assert!(matches!(
        server.answer_batch(&[]),
        Err(Error::InvalidBatch(_))
    ));
}

/// With more than one thread the query-only work (hint rows' DoublePIR
/// pass, the packing tree's static subtrees) runs beside the SimplePIR
/// scan; the responses must be the same bytes as on one thread, where the
/// steps run in order. Real Table 1 parameters (d2 = 2048), so the static
/// subtrees are deep enough to fork.
#[cfg(feature = "parallel")]
#[test]
fn overlapped_answers_equal_in_order_answers() {
    let shape = DbShape {
        ell1: 1100,
        ell2: 2100,
    };
    let mut s = 5;
    let db = Database::from_fn(shape, 8, |_, _| lcg(&mut s) as u8).unwrap();
    let seed = PublicSeed::random().unwrap();
    let server = Server::setup(TABLE1, db.clone(), seed).unwrap();
    let client = Client::new(TABLE1, shape, seed).unwrap();
    let positions = [(0, 0), (1099, 2099), (517, 1024)];
    let (qs, keys): (Vec<Query>, Vec<_>) = positions
        .iter()
        .map(|&(r, c)| client.query(r, c).unwrap())
        .unzip();
    let pool = |n| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .unwrap()
    };
    let (in_order, tm1) = pool(1).install(|| server.answer_batch_timed(&qs).unwrap());
    assert_eq!(tm1.overlapped, 0.0);
    let (overlapped, tm3) = pool(3).install(|| server.answer_batch_timed(&qs).unwrap());
    assert!(tm3.overlapped > 0.0);
    assert_eq!(in_order, overlapped);
    let single = pool(3).install(|| server.answer(&qs[2]).unwrap());
    assert_eq!(single, in_order[2]);
    for ((k, r), &(i, j)) in keys.iter().zip(&overlapped).zip(&positions) {
        assert_eq!(client.extract(k, r).unwrap(), db.get(i, j).unwrap());
    }
}

#[test]
fn measured_noise_is_below_the_bound_we_enforce() {
    // Real Table 1 parameters; the packing noise does not depend on ℓ.
    let shape = DbShape {
        ell1: 1024,
        ell2: 2048,
    };
    let mut s = 1;
    let db = Database::from_fn(shape, 8, |_, _| lcg(&mut s) as u8).unwrap();
    let seed = PublicSeed::random().unwrap();
    let server = Server::setup(TABLE1, db, seed).unwrap();
    let client = Client::new(TABLE1, shape, seed).unwrap();
    // σ_double² is a subgaussian width²: variance σ²/(2π). The two final
    // roundings (Lemma 2.4's bounded e'_1, outside σ_double) add ≈ 2/12.
    let predicted =
        TABLE1.correctness(shape).sigma_double_sq / (2.0 * std::f64::consts::PI) + 2.0 / 12.0;
    let literal = TABLE1.correctness(shape).log2_delta_literal;
    let mut sum = 0f64;
    let trials = 4;
    for i in 0..trials {
        let (q, key) = client.query(i * 100, i * 500).unwrap();
        let resp = server.answer(&q).unwrap();
        sum += client.noise_variance(&key, &resp).unwrap();
    }
    let measured = sum / trials as f64;
    eprintln!("measured noise variance {measured:.3}, model {predicted:.3} (units of q~22^2); literal Thm 3.4 log2 delta {literal:.1}");
    // 4 x 1914 samples: the sample variance is within a few percent of the truth.
    assert!(
        measured <= 1.1 * predicted,
        "measured {measured} > model {predicted}"
    );
    // ... and the model is not vacuous either.
    assert!(
        measured >= 0.7 * predicted,
        "measured {measured} << model {predicted}"
    );
}

#[test]
fn one_gigabyte_database_message_sizes() {
    // 2^33 bits: sizes of serialized messages, measured on real bytes.
    let bits = 1u64 << 33;
    let shape = DbShape::for_bits(bits, 8);
    assert_eq!(
        shape,
        DbShape {
            ell1: 1 << 15,
            ell2: 1 << 15
        }
    );
    let client = Client::new(TABLE1, shape, PublicSeed::random().unwrap()).unwrap();
    let (q, _, _) = client.query_bit(bits, bits - 1).unwrap();
    let qb = q.to_bytes();
    assert!(qb.len() <= 846 * 1024, "query {} bytes", qb.len());
    // The response size does not depend on the database: measure one.
    let small = DbShape { ell1: 64, ell2: 64 };
    let bitdb = BitDatabase::zeros(64 * 64 * 8);
    assert_eq!(bitdb.database().shape(), small);
    let seed = PublicSeed::random().unwrap();
    let server = Server::setup(TABLE1, bitdb.into_database(), seed).unwrap();
    let c = Client::new(TABLE1, small, seed).unwrap();
    let (q, k) = c.query(1, 1).unwrap();
    let rb = server.answer_bytes(&q.to_bytes()).unwrap();
    assert!(rb.len() <= 12 * 1024, "response {} bytes", rb.len());
    assert_eq!(
        c.extract(&k, &Response::from_bytes(&rb).unwrap()).unwrap(),
        0
    );
    eprintln!("query {} bytes, response {} bytes", qb.len(), rb.len());
}

#[test]
fn update_answers_like_a_fresh_setup() {
    use pir_core::server::RecordUpdate;
    for (params, shape) in [
        (
            TOY,
            DbShape {
                ell1: 300,
                ell2: 150,
            },
        ), // ragged, column-major storage
        (
            TOY,
            DbShape {
                ell1: 256,
                ell2: 64,
            },
        ), // tiled storage
        (
            TABLE1,
            DbShape {
                ell1: 2048,
                ell2: 2100,
            },
        ), // real parameters, m2 = 2
    ] {
        let mut s = 11;
        let db = Database::from_fn(shape, 8, |_, _| lcg(&mut s) as u8).unwrap();
        let seed = PublicSeed::random().unwrap();
        let mut server = Server::setup(params, db.clone(), seed).unwrap();
        let mut changes = Vec::new();
        for _ in 0..200 {
            changes.push(RecordUpdate {
                row: lcg(&mut s) as usize % shape.ell1,
                col: lcg(&mut s) as usize % shape.ell2,
                value: lcg(&mut s) as u8,
            });
        }
        // a no-op change and a record changed twice (last write wins)
        changes.push(RecordUpdate {
            row: 0,
            col: 0,
            value: db.get(0, 0).unwrap(),
        });
        changes.push(RecordUpdate {
            row: 5,
            col: 7,
            value: 1,
        });
        changes.push(RecordUpdate {
            row: 5,
            col: 7,
            value: 200,
        });
        // invalid updates are refused and change nothing
        let bad = [RecordUpdate {
            row: shape.ell1,
            col: 0,
            value: 1,
        }];
        assert!(matches!(
            server.update(&bad),
            Err(Error::IndexOutOfRange { .. })
        ));
        let stats = server.update(&changes).unwrap();
        assert!(stats.changed_records > 100 && stats.dirty_columns > 10);

        let mut new_db = db.clone();
        for c in &changes {
            new_db.set(c.row, c.col, c.value).unwrap();
        }
        assert_eq!(server.database(), &new_db);
        // a second round touching all of the first 32-column chunk of the
        // hint (packed in place at once), all of columns 40..48 (one run
        // of eight in place) and a few single columns
        let cols = (0..32).chain(40..48).chain([50, 61, shape.ell2 - 1]);
        let second: Vec<RecordUpdate> = cols
            .map(|col| RecordUpdate {
                row: lcg(&mut s) as usize % shape.ell1,
                col,
                value: lcg(&mut s) as u8 | 1,
            })
            .collect();
        server.update(&second).unwrap();
        for c in &second {
            new_db.set(c.row, c.col, c.value).unwrap();
        }
        assert_eq!(server.database(), &new_db);
        let fresh = Server::setup(params, new_db.clone(), seed).unwrap();
        // the same hint rows, byte for byte
        let (mut mine, mut theirs) = (Vec::new(), Vec::new());
        server.write_hint(&mut mine).unwrap();
        fresh.write_hint(&mut theirs).unwrap();
        assert!(mine == theirs, "hint after updates {shape:?}");
        let client = Client::new(params, shape, seed).unwrap();
        for &(r, c) in &[
            (5usize, 7usize),
            (0, 0),
            (shape.ell1 - 1, shape.ell2 - 1),
            (17, 3),
        ] {
            let (q, key) = client.query(r, c).unwrap();
            let a = server.answer(&q).unwrap();
            assert_eq!(a, fresh.answer(&q).unwrap(), "{} {shape:?}", params.name);
            assert_eq!(client.extract(&key, &a).unwrap(), new_db.get(r, c).unwrap());
        }
    }
}
