//! Fixtures shared by the server's submodule tests.

use super::Server;
use crate::db::Database;
use crate::params::DbShape;
use crate::wire::Response;

pub(super) fn lcg_db(shape: DbShape, mut s: u64) -> Database {
    Database::from_fn(shape, 8, |_, _| {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 33) as u8
    })
    .unwrap()
}

/// Ragged TOY shape (ℓ1 not a multiple of d1, ℓ2 not of d2, m2 = 3).
pub(super) const HINT_SHAPE: DbShape = DbShape {
    ell1: 150,
    ell2: 300,
};

pub(super) fn hint_bytes(server: &Server) -> Vec<u8> {
    let mut f = Vec::new();
    server.write_hint(&mut f).unwrap();
    f
}

/// Same answers (byte for byte) and same extracted records.
pub(super) fn assert_same_answers(
    a: &Server,
    b: &Server,
    want: &Database,
    cells: &[(usize, usize)],
) {
    let shape = want.shape();
    let client = crate::client::Client::new(a.ctx.params, shape, a.seed()).unwrap();
    for &(r, c) in cells {
        let (q, key) = client.query(r, c).unwrap();
        let qb = q.to_bytes();
        let ra = a.answer_bytes(&qb).unwrap();
        assert_eq!(ra, b.answer_bytes(&qb).unwrap(), "cell ({r}, {c})");
        let resp = Response::from_bytes(&ra).unwrap();
        assert_eq!(
            client.extract(&key, &resp).unwrap(),
            want.get(r, c).unwrap()
        );
    }
}

pub(super) const CELLS: [(usize, usize); 5] = [(0, 0), (149, 299), (64, 128), (17, 3), (100, 257)];
