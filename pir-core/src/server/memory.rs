//! The memory model: what a server of a given shape holds and needs while
//! it is set up, from the parameters alone ([`Server::memory`]), checked
//! against what setup allocates.

use super::setup::pack_leaves;
use super::{a2_stride, Server};
use crate::digits::DigitMatrix;
use crate::packing::PackPrecomp;
use crate::params::{DbShape, Params};

/// Memory of one database's server, by part, in bytes
/// ([`Server::memory`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerMemory {
    /// The records: ℓ1·ℓ2 bytes.
    pub records: usize,
    /// Dense hint rows: K_H × ℓ2 i16 chunks (rows padded to 4, columns to
    /// 32).
    pub hint: usize,
    /// Unrounded A1·D, d1 × ℓ2 u32, kept after [`Server::setup`] for
    /// [`Server::update`] (a server restarted with [`Server::from_hint`]
    /// has none until its first update).
    pub unrounded: usize,
    /// Expanded public randomness: a1 (8·d1 bytes per block of d1 rows),
    /// a2 (4·(2·d2 + 64) bytes per block of d2 columns) and the packing
    /// key's public rows (4·log d2·t·2·d2 bytes).
    pub public: usize,
    /// The §4.2 packing precomputation ([`PackPrecomp::size_for`]): the
    /// cached digits of every static node of the packing tree, t·2·d2
    /// words each. Independent of the database size: the fixed cost of a
    /// database (100,237,312 bytes, ≈ 96 MiB, under YPIR Table 1).
    pub packing: usize,
    /// Transient allocations of DBSetup on top of the above: a1 in NTT
    /// form (8·d1 bytes per block of d1 rows) and the hint rows' packing
    /// inputs (K_H·2·d2 words), freed once the server is built.
    pub setup_transient: usize,
}

impl ServerMemory {
    /// Held by a server built with [`Server::setup`].
    pub fn after_setup(&self) -> usize {
        self.records + self.hint + self.unrounded + self.public + self.packing
    }

    /// Held by a server restarted with [`Server::from_hint`].
    pub fn after_load(&self) -> usize {
        self.after_setup() - self.unrounded
    }

    /// The most DBSetup holds at once.
    pub fn setup_peak(&self) -> usize {
        self.after_setup() + self.setup_transient
    }
}

impl Server {
    /// The memory a server of a `shape` database under `params` holds
    /// (and needs while it is set up), computed from the parameters and
    /// the shape alone, exactly as [`Server::setup`] allocates it (checked
    /// against [`Server::state_bytes`] in the tests).
    pub fn memory(params: &Params, shape: DbShape) -> ServerMemory {
        let (d1, d2) = (params.d1, params.d2);
        let (m1, m2) = (params.m1(shape), params.m2(shape));
        let kh = params.hint_rows();
        let t = params.gadget_len();
        ServerMemory {
            records: shape.records(),
            hint: 2 * DigitMatrix::padded_rows(kh) * DigitMatrix::padded_cols(shape.ell2),
            unrounded: 4 * d1 * shape.ell2,
            public: 4 * (m1 * 2 * d1 + m2 * a2_stride(d2) + params.log_d2() * t * 2 * d2),
            packing: PackPrecomp::size_for(&pack_leaves(params, &params.layout()), t),
            setup_transient: 4 * (m1 * 2 * d1 + kh * 2 * d2),
        }
    }

    /// Frees the unrounded A1·D that [`Server::setup`] keeps for
    /// [`Server::update`] (d1·4 bytes per column, [`ServerMemory::unrounded`]),
    /// for a server that will not be updated: the server then holds what
    /// one restarted with [`Server::from_hint`] holds, and answers the
    /// same. A later update recomputes it first (a full DBSetup).
    pub fn release_update_state(&mut self) {
        self.ad = Vec::new();
    }

    /// Bytes of server state beyond the database (hint rows, packing
    /// precomputation, expanded public randomness).
    pub fn state_bytes(&self) -> usize {
        self.hint.storage_bytes()
            + self.ad.len() * 4
            + self.a1_ext.len() * 4
            + self.a2.len() * 4
            + self.pack_a.len() * 4
            + self.pack.size_bytes()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    use crate::db::Database;
    use crate::params::{SMALL, TOY};
    use crate::rns::Context;
    use crate::sampler::PublicSeed;

    /// `Server::memory` predicts what a built server holds, part by part,
    /// for ragged and tiled shapes, after setup and after a restart from
    /// the hint file.
    #[test]
    fn memory_estimate_equals_what_setup_allocates() {
        for (params, shape) in [
            (
                TOY,
                DbShape {
                    ell1: 150,
                    ell2: 300,
                },
            ),
            (
                TOY,
                DbShape {
                    ell1: 4096,
                    ell2: 64,
                },
            ),
            (
                SMALL,
                DbShape {
                    ell1: 700,
                    ell2: 1500,
                },
            ),
            (
                crate::params::TABLE1,
                DbShape {
                    ell1: 2048,
                    ell2: 2100,
                },
            ),
        ] {
            let db = Database::from_fn(shape, 8, |i, j| (i * 7 + j) as u8).unwrap();
            let seed = PublicSeed([9u8; 32]);
            let server = Server::setup(params, db.clone(), seed).unwrap();
            let mem = Server::memory(&params, shape);
            assert_eq!(mem.records, server.database().as_bytes().len());
            assert_eq!(mem.packing, server.pack.size_bytes(), "{}", params.name);
            assert_eq!(
                mem.after_setup(),
                mem.records + server.state_bytes(),
                "{} {shape:?}: {mem:?}",
                params.name
            );
            let mut hint = Vec::new();
            server.write_hint(&mut hint).unwrap();
            let ctx = Arc::new(Context::new(params));
            let restarted = Server::from_hint(ctx, db, seed, &hint).unwrap();
            assert_eq!(mem.after_load(), mem.records + restarted.state_bytes());
            assert!(mem.setup_peak() > mem.after_setup());
            let mut released = server;
            released.release_update_state();
            assert_eq!(mem.after_load(), mem.records + released.state_bytes());
            let (q, _, _) = crate::client::Client::new(params, shape, seed)
                .unwrap()
                .query_bit(8 * shape.records() as u64, 77)
                .unwrap();
            assert_eq!(
                released.answer(&q).unwrap().to_bytes(),
                restarted.answer(&q).unwrap().to_bytes()
            );
        }
        // The fixed part under Table 1: the packing digits dominate.
        let t1 = Server::memory(&crate::params::TABLE1, DbShape { ell1: 1, ell2: 1 });
        assert_eq!(t1.packing, 100_237_312, "{t1:?}");
    }
}
