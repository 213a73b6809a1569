//! Query → Answer → Extract on random databases.
use pir_core::client::Client;
use pir_core::db::Database;
use pir_core::params::{DbShape, Params, SMALL, TABLE1, TOY};
use pir_core::sampler::PublicSeed;
use pir_core::server::Server;
use pir_core::wire::{Query, Response};

fn lcg(s: &mut u64) -> u64 {
    *s = s
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *s >> 24
}

fn run(params: Params, shape: DbShape, queries: usize, seed: u64) {
    let mut s = seed;
    let db = Database::from_fn(shape, params.record_bits, |_, _| lcg(&mut s) as u8).unwrap();
    let pub_seed = PublicSeed::random().unwrap();
    let server = Server::setup(params, db.clone(), pub_seed).unwrap();
    let client = Client::new(params, shape, pub_seed).unwrap();
    for _ in 0..queries {
        let row = (lcg(&mut s) as usize) % shape.ell1;
        let col = (lcg(&mut s) as usize) % shape.ell2;
        let (q, key) = client.query(row, col).unwrap();
        let qb = q.to_bytes();
        assert_eq!(Query::from_bytes(&qb).unwrap(), q);
        let rb = server.answer_bytes(&qb).unwrap();
        let resp = Response::from_bytes(&rb).unwrap();
        let got = client.extract(&key, &resp).unwrap();
        assert_eq!(
            got,
            db.get(row, col).unwrap(),
            "{} {shape:?} ({row},{col})",
            params.name
        );
    }
}

#[test]
fn toy_params_various_shapes() {
    for (i, shape) in [
        (1, 1),
        (16, 8),
        (64, 128),
        (100, 37),
        (333, 513),
        (2048, 64),
    ]
    .iter()
    .enumerate()
    {
        run(
            TOY,
            DbShape {
                ell1: shape.0,
                ell2: shape.1,
            },
            4,
            i as u64,
        );
    }
}

#[test]
fn small_params() {
    run(
        SMALL,
        DbShape {
            ell1: 700,
            ell2: 1100,
        },
        3,
        7,
    );
}

#[test]
fn table1_params_square_rectangular_and_ragged() {
    for (i, shape) in [(1024, 2048), (2048, 1024), (1500, 700), (5000, 3000)]
        .iter()
        .enumerate()
    {
        run(
            TABLE1,
            DbShape {
                ell1: shape.0,
                ell2: shape.1,
            },
            3,
            100 + i as u64,
        );
    }
}
