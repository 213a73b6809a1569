//! Shared pieces of the fuzz targets and of the seed generator: the real
//! fixtures they start from, a tiny YPIR database, a tiny served epoch,
//! reference RFC 9162 proof generators for the differential Merkle target,
//! and the input encodings of targets that take more than one byte string.
//!
//! Every target is a `fuzz_targets/<name>.rs`; `docs/reliability.md` lists
//! them, says how to run them and records the figures.

use std::sync::OnceLock;

use pir_core::client::{Client, QueryKey};
use pir_core::db::BitDatabase;
use pir_core::params::{DbShape, TOY};
use pir_core::sampler::PublicSeed;
use pir_core::server::Server;

/// Files of the repository the targets use as fixed context (keys, log
/// lists). Paths are relative to this file, inside the repository.
pub mod fixtures {
    /// Google's retired RFC 6962 log Icarus: public key (base64 SPKI) and
    /// real `get-sth`, consistency and `get-entry-and-proof` responses.
    pub const ICARUS_JSON: &[u8] = include_bytes!("../../ct-core/tests/data/icarus-2017-10.json");
    /// A real static-ct-api checkpoint of rome.ct.filippo.io/2024h1.
    pub const ROME_CHECKPOINT: &[u8] =
        include_bytes!("../../ct-core/tests/data/rome2024h1.checkpoint");
    /// That log's key, base64 SPKI.
    pub const ROME_KEY_B64: &str = include_str!("../../ct-core/tests/data/rome2024h1.key.b64");
    /// That log's checkpoint origin.
    pub const ROME_ORIGIN: &str = "rome.ct.filippo.io/2024h1";
    /// Hand-written log list v3 with real and test keys.
    pub const CT_CORE_LOG_LIST: &[u8] = include_bytes!("../../ct-core/tests/data/log_list.json");
    /// The log list of the local test log that issued the browser-client
    /// fixtures below.
    pub const TESTLOG_LOG_LIST: &[u8] =
        include_bytes!("../../browser-client/tests/data/log_list.json");
    /// A test-log certificate with embedded SCTs (PEM).
    pub const TESTLOG_LEAF_PEM: &[u8] = include_bytes!("../../browser-client/tests/data/leaf.pem");
    /// Its issuer (PEM).
    pub const TESTLOG_ISSUER_PEM: &[u8] =
        include_bytes!("../../browser-client/tests/data/issuer.pem");
    /// A test-log certificate whose SCT is delivered by TLS (PEM).
    pub const TESTLOG_TLS_LEAF_PEM: &[u8] =
        include_bytes!("../../browser-client/tests/data/tls-leaf.pem");
    /// That SCT (TLS encoding).
    pub const TESTLOG_TLS_SCT: &[u8] = include_bytes!("../../browser-client/tests/data/tls.sct");
    /// Test keys (`ct-core/tests/data/README.md`).
    pub const TEST_P256_SPKI: &[u8] = include_bytes!("../../ct-core/tests/data/test-p256.spki.der");
    /// Private half of [`TEST_P256_SPKI`] (PKCS#8), a throwaway test key.
    pub const TEST_P256_PK8: &[u8] = include_bytes!("../../ct-core/tests/data/test-p256.pk8.der");
    /// RSA-2048 test key.
    pub const TEST_RSA2048_SPKI: &[u8] =
        include_bytes!("../../ct-core/tests/data/test-rsa2048.spki.der");
    /// Keys `LogKey` must reject.
    pub const REJECTED_SPKIS: [&[u8]; 3] = [
        include_bytes!("../../ct-core/tests/data/test-rsa1024.spki.der"),
        include_bytes!("../../ct-core/tests/data/test-p384.spki.der"),
        include_bytes!("../../ct-core/tests/data/test-ed25519.spki.der"),
    ];

    /// The Icarus key (from [`ICARUS_JSON`]).
    pub fn icarus_key() -> ct_core::LogKey {
        let j: serde_json::Value =
            serde_json::from_slice(ICARUS_JSON).expect("fixture is valid JSON");
        let b64 = j["key"].as_str().expect("fixture has a key");
        ct_core::LogKey::from_base64(b64).expect("fixture key parses")
    }

    /// The rome2024h1 key.
    pub fn rome_key() -> ct_core::LogKey {
        ct_core::LogKey::from_base64(ROME_KEY_B64.trim()).expect("fixture key parses")
    }

    /// DER certificates of a PEM fixture.
    pub fn pem_certs(pem: &[u8]) -> Vec<Vec<u8>> {
        browser_client::sct::parse_certificates(pem).expect("fixture PEM parses")
    }
}

/// Splits `data` into two byte strings: a 2-byte big-endian length `n`,
/// then `n` bytes (clamped to what is there), then the rest. The inverse
/// of [`join2`].
pub fn split2(data: &[u8]) -> (&[u8], &[u8]) {
    if data.len() < 2 {
        return (data, &[]);
    }
    let n = usize::from(u16::from_be_bytes([data[0], data[1]])).min(data.len() - 2);
    (&data[2..2 + n], &data[2 + n..])
}

/// Encodes two byte strings for [`split2`] (`a` is at most 65535 bytes).
pub fn join2(a: &[u8], b: &[u8]) -> Vec<u8> {
    let n = u16::try_from(a.len()).expect("first part fits in 16 bits");
    let mut out = n.to_be_bytes().to_vec();
    out.extend_from_slice(a);
    out.extend_from_slice(b);
    out
}

/// Splits `data` into byte strings with [`split2`] repeatedly (the last
/// one takes the rest).
pub fn split_n(mut data: &[u8], n: usize) -> Vec<&[u8]> {
    let mut out = Vec::with_capacity(n);
    for _ in 1..n {
        let (a, rest) = split2(data);
        out.push(a);
        data = rest;
    }
    out.push(data);
    out
}

/// Encodes byte strings for [`split_n`].
pub fn join_n(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            out.extend_from_slice(p);
        } else {
            out.extend(join2(p, &[]));
        }
    }
    out
}

/// A tiny YPIR database (insecure TOY parameters, 4096 bits with a few set)
/// with its server and a client bound to it, built once per process.
pub struct TinyPir {
    /// The server.
    pub server: Server,
    /// A client of it.
    pub client: Client,
    /// Its shape.
    pub shape: DbShape,
    /// Its public seed.
    pub seed: PublicSeed,
    /// A query key whose response the fuzzer may forge.
    pub key: QueryKey,
}

/// Bits of [`TinyPir`]'s database.
pub const TINY_PIR_BITS: u64 = 4096;
/// The fixed public seed of [`TinyPir`] (public by definition).
pub const TINY_PIR_SEED: [u8; 32] = [7; 32];

/// The process-wide [`TinyPir`].
pub fn tiny_pir() -> &'static TinyPir {
    static PIR: OnceLock<TinyPir> = OnceLock::new();
    PIR.get_or_init(|| {
        let mut bits = BitDatabase::zeros(TINY_PIR_BITS);
        for b in [0, 1, 77, 1000, 4095] {
            bits.set(b, true).expect("bit in range");
        }
        let shape = bits.database().shape();
        let seed = PublicSeed(TINY_PIR_SEED);
        let server = Server::setup(TOY, bits.into_database(), seed).expect("TOY setup");
        let client = Client::new(TOY, shape, seed).expect("TOY client");
        let (_, key, _) = client.query_bit(TINY_PIR_BITS, 77).expect("query");
        TinyPir {
            server,
            client,
            shape,
            seed,
            key,
        }
    })
}

/// Reference implementations of RFC 9162 §2.1.1 (MTH), §2.1.3.1 (PATH) and
/// §2.1.4.1 (PROOF / SUBPROOF), written from the RFC's recursive definitions
/// and deliberately unoptimised: the other side of the Merkle differential
/// target.
pub mod reference_merkle {
    use ct_core::merkle::{empty_root, node_hash, Hash};

    /// Largest power of two smaller than `n` (n > 1).
    fn k_of(n: usize) -> usize {
        let mut k = 1;
        while k << 1 < n {
            k <<= 1;
        }
        k
    }

    /// MTH(D[n]) from leaf hashes.
    pub fn mth(leaves: &[Hash]) -> Hash {
        match leaves.len() {
            0 => empty_root(),
            1 => leaves[0],
            n => {
                let k = k_of(n);
                node_hash(&mth(&leaves[..k]), &mth(&leaves[k..]))
            }
        }
    }

    /// PATH(m, D[n]).
    pub fn path(m: usize, leaves: &[Hash]) -> Vec<Hash> {
        let n = leaves.len();
        if n <= 1 {
            return Vec::new();
        }
        let k = k_of(n);
        if m < k {
            let mut p = path(m, &leaves[..k]);
            p.push(mth(&leaves[k..]));
            p
        } else {
            let mut p = path(m - k, &leaves[k..]);
            p.push(mth(&leaves[..k]));
            p
        }
    }

    /// PROOF(m, D[n]).
    pub fn proof(m: usize, leaves: &[Hash]) -> Vec<Hash> {
        if m == 0 || m == leaves.len() {
            return Vec::new();
        }
        subproof(m, leaves, true)
    }

    fn subproof(m: usize, leaves: &[Hash], b: bool) -> Vec<Hash> {
        let n = leaves.len();
        if m == n {
            return if b { Vec::new() } else { vec![mth(leaves)] };
        }
        let k = k_of(n);
        if m <= k {
            let mut p = subproof(m, &leaves[..k], b);
            p.push(mth(&leaves[k..]));
            p
        } else {
            let mut p = subproof(m - k, &leaves[k..], false);
            p.push(mth(&leaves[..k]));
            p
        }
    }
}

/// The request encoding of the `auditor_http` target: an HTTP/1.1-like
/// head and a body.
///
/// ```text
/// METHOD SP PATH LF
/// (NAME ":" SP? VALUE LF)*
/// LF
/// BODY
/// ```
///
/// A body whose bytes 6..14 (a query's seed id) are all zero gets the
/// served database's seed id patched in by the target, so committed seeds
/// keep reaching the answering path although every process builds its
/// epoch with a fresh public seed.
pub mod http_input {
    /// One decoded request.
    pub struct RawRequest<'a> {
        /// Method token.
        pub method: &'a [u8],
        /// Request target.
        pub path: &'a [u8],
        /// Header lines.
        pub headers: Vec<(&'a [u8], &'a [u8])>,
        /// Body.
        pub body: &'a [u8],
    }

    /// Decodes `data`; `None` if there is no request line.
    pub fn parse(data: &[u8]) -> Option<RawRequest<'_>> {
        let (head, body) = match find(data, b"\n\n") {
            Some(i) => (&data[..i], &data[i + 2..]),
            None => (data, &data[data.len()..]),
        };
        let mut lines = head.split(|&b| b == b'\n');
        let first = lines.next()?;
        let sp = first.iter().position(|&b| b == b' ')?;
        let (method, path) = (&first[..sp], &first[sp + 1..]);
        let mut headers = Vec::new();
        for l in lines {
            let c = l.iter().position(|&b| b == b':')?;
            let v = &l[c + 1..];
            headers.push((&l[..c], v.strip_prefix(b" ").unwrap_or(v)));
        }
        Some(RawRequest {
            method,
            path,
            headers,
            body,
        })
    }

    /// Encodes a request for [`parse`].
    pub fn encode(method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
        let mut out = format!("{method} {path}\n");
        for (n, v) in headers {
            out.push_str(&format!("{n}: {v}\n"));
        }
        out.push('\n');
        let mut out = out.into_bytes();
        out.extend_from_slice(body);
        out
    }

    fn find(h: &[u8], n: &[u8]) -> Option<usize> {
        h.windows(n.len()).position(|w| w == n)
    }
}

/// The tiny epoch the `auditor_http` target serves (TOY YPIR, four
/// filters over 20 leaf hashes, two databases), built once per process.
pub mod tiny_epoch {
    use std::sync::OnceLock;

    use audit_proto::Manifest;
    use auditor_server::epoch::{build_epoch, BuildParams, Epoch, Snapshot};
    use auditor_server::service::Service;
    use auditor_server::Config;

    /// Epoch id.
    pub const EPOCH: u64 = 1;

    /// Builds the epoch (fresh salts and public seed, as every build).
    pub fn build() -> Epoch {
        let snap = Snapshot {
            now_s: 1_700_000_000,
            hashes: (0..20u8).map(|i| [i; 32]).collect(),
            coverage: Vec::new(),
        };
        let filter_bits = audit_proto::filter::FilterSpec::capacity_for(20) * 8;
        let bp = BuildParams {
            filters: 4,
            k: 8,
            db_bits_target: 2 * filter_bits,
            params: pir_core::params::TOY,
            progress: false,
            shards: None,
            budget: auditor_server::memory::Budget {
                max_bytes: None,
                held: 0,
            },
        };
        let dir =
            std::env::temp_dir().join(format!("ct-auditor-fuzz-epoch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temporary epoch directory");
        let epoch = build_epoch(&snap, EPOCH, &bp, &dir).expect("tiny epoch builds");
        let _ = std::fs::remove_dir_all(&dir);
        epoch
    }

    /// The served router and manifest, with the tokio runtime that runs it.
    pub struct Served {
        /// Runtime of the service's tasks (batchers).
        pub rt: tokio::runtime::Runtime,
        /// The router (auditor-server's own).
        pub router: axum::Router,
        /// The served manifest.
        pub manifest: Manifest,
        /// The service (owns the answer pool).
        pub service: Service,
    }

    /// The process-wide served epoch.
    pub fn served() -> &'static Served {
        static S: OnceLock<Served> = OnceLock::new();
        S.get_or_init(|| {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("tokio runtime");
            let mut config = Config {
                epoch_dir: std::env::temp_dir()
                    .join(format!("ct-auditor-fuzz-serve-{}", std::process::id())),
                ..Config::default()
            };
            config.epoch.param_set = pir_core::params::TOY.name.to_owned();
            config.epoch.allow_insecure_params = true;
            config.limits.batch_window_ms = 0;
            config.limits.threads = 1;
            let dir = config.epoch_dir.clone();
            let svc = Service::new(config).expect("service");
            // Nothing is persisted: the epoch is published from memory.
            let _ = std::fs::remove_dir(&dir);
            let epoch = build();
            let manifest = epoch.manifest.clone();
            let router = rt.block_on(async {
                svc.publish(epoch).expect("publish");
                svc.router()
            });
            Served {
                rt,
                router,
                manifest,
                service: svc,
            }
        })
    }
}
