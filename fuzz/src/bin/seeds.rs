//! Writes the committed seed corpora, `fuzz/seeds/<target>/`, from real
//! data in the repository (Icarus and rome2024h1 responses, navigli2025h2
//! tiles, the test log's certificates and SCTs, the log lists) and from
//! values built by the product's own code (YPIR queries and responses, a
//! tiny epoch's manifest, queue files).
//!
//! `cargo run --release --bin seeds` from `fuzz/`; writes nothing else.
//! Queries carry fresh randomness, so re-running changes some files.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use audit_proto::api::{ErrorBody, ErrorCode};
use audit_proto::filter::FilterSpec;
use audit_proto::manifest::{encode_log_id, DbLayout, LogCoverage, ManifestParts, PirSpec};
use audit_proto::Manifest;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use browser_client::policy::PendingQueue;
use ct_auditor_fuzz::{fixtures, http_input, join_n, tiny_epoch, tiny_pir, TINY_PIR_BITS};
use ct_core::leaf::{MerkleTreeLeaf, SignedEntry};
use ct_core::precert::{embedded_scts, encode_sct_list, sct_list_extension_value};
use ct_core::tls::Writer;
use ct_core::{parse_data_tile, Checkpoint, SignedNote};
use pir_core::client::Client;
use pir_core::params::{DbShape, TABLE1, TOY};
use pir_core::sampler::PublicSeed;
use pir_core::wire::{query_len, response_len};
use sha2::Digest as _;

type Seeds = BTreeMap<&'static str, Vec<(String, Vec<u8>)>>;

fn add(s: &mut Seeds, target: &'static str, name: impl Into<String>, bytes: impl Into<Vec<u8>>) {
    s.entry(target)
        .or_default()
        .push((name.into(), bytes.into()));
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("fuzz/ is inside the repository")
        .to_owned()
}

fn read(rel: &str) -> Vec<u8> {
    std::fs::read(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn gzip(b: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(b).expect("in memory");
    enc.finish().expect("in memory")
}

fn b64(b: &[u8]) -> String {
    BASE64.encode(b)
}

fn main() {
    let mut s = Seeds::new();
    let icarus: serde_json::Value = serde_json::from_slice(fixtures::ICARUS_JSON).expect("fixture");
    let navigli = "ct-core/tests/data/navigli2025h2/tile";
    let tile0 = parse_data_tile(&read(&format!("{navigli}/data/000"))).expect("fixture");
    let partial = read(&format!("{navigli}/data/003.p/10"));
    let leaf = fixtures::pem_certs(fixtures::TESTLOG_LEAF_PEM).remove(0);
    let issuer = fixtures::pem_certs(fixtures::TESTLOG_ISSUER_PEM).remove(0);
    let tls_leaf = fixtures::pem_certs(fixtures::TESTLOG_TLS_LEAF_PEM).remove(0);
    let icarus_leaf = BASE64
        .decode(icarus["inclusion"]["leaf_input"].as_str().expect("fixture"))
        .expect("fixture");

    // YPIR wire format: queries and answers of the tiny TOY database.
    let pir = tiny_pir();
    for (i, bit) in [0u64, 77, TINY_PIR_BITS - 1].into_iter().enumerate() {
        let (q, _, _) = pir.client.query_bit(TINY_PIR_BITS, bit).expect("query");
        let q = q.to_bytes();
        let r = pir.server.answer_bytes(&q).expect("answer");
        add(&mut s, "pir_query", format!("toy-{i}"), q.clone());
        add(&mut s, "pir_answer", format!("toy-{i}"), q);
        add(&mut s, "pir_response", format!("toy-{i}"), r);
    }
    let other = DbShape { ell1: 3, ell2: 5 };
    let c = Client::new(TOY, other, PublicSeed([9; 32])).expect("client");
    let (q, _) = c.query(1, 2).expect("query");
    add(&mut s, "pir_query", "toy-3x5", q.to_bytes());

    // Epoch snapshots of the object store: the index, then the parts,
    // each behind a 2-byte length.
    let mut hashes: Vec<[u8; 32]> = (0u32..40)
        .map(|i| sha2::Sha256::digest(i.to_be_bytes()).into())
        .collect();
    hashes.sort_unstable();
    for (name, epoch, n, per) in [
        ("empty", 1u64, 0usize, 4u32),
        ("three-one-part", 2, 3, 7),
        ("forty-parts-of-7", 9, 40, 7),
        ("forty-one-part", 9, 40, 64),
    ] {
        let (index, parts) =
            auditor_server::snapshot::SnapshotIndex::of(epoch, &hashes[..n], per);
        let mut b = ct_auditor_fuzz::join2(&index.encode(), &[]);
        for p in &parts {
            b.extend(ct_auditor_fuzz::join2(p, &[]));
        }
        add(&mut s, "epoch_snapshot", name, b);
    }

    // Manifests: the tiny epoch's (TOY) and a Table 1 layout of 768 filters.
    let epoch = tiny_epoch::build();
    let m = &epoch.manifest;
    add(&mut s, "manifest", "tiny-epoch", m.to_json());
    add(
        &mut s,
        "manifest",
        "tiny-epoch-pretty",
        serde_json::to_vec_pretty(m).expect("serializes"),
    );
    let log_id: [u8; 32] =
        audit_proto::manifest::decode_log_id("xpiyBw5JgcINhzd7Ii6X0tgs0j5YpwSQei6bXa4WIs0=")
            .expect("fixture");
    let logs = vec![LogCoverage {
        log_id: encode_log_id(&log_id),
        verified_tree_size: 2000,
        verified_position: 2000,
        ingested_until_ms: 1_795_319_100_000,
        mmd_s: 86_400,
    }];
    let n = FilterSpec::capacity_for(1_000_000);
    let filter = FilterSpec::new(768, 8, n, [3; 32]).expect("filter");
    let plan = auditor_server::layout::plan_dbs(768, filter.bits, 1 << 30);
    let layout: Vec<_> = plan
        .iter()
        .map(|&(_, count)| {
            let shape = DbShape::for_bits(u64::from(count) * filter.bits, TABLE1.record_bits);
            DbLayout {
                filters: count,
                rows: shape.ell1 as u64,
                cols: shape.ell2 as u64,
                query_bytes: query_len(&TABLE1, shape) as u64,
                response_bytes: response_len(&TABLE1) as u64,
            }
        })
        .collect();
    let pir_spec = PirSpec {
        scheme: "ypir".into(),
        param_set: TABLE1.id,
        param_name: TABLE1.name.into(),
        wire_version: pir_core::wire::VERSION,
        seed: [4; 32],
    };
    let big = Manifest::new(ManifestParts {
        epoch: 9,
        created_at: 1_795_319_200,
        snapshot_at: 1_795_319_200,
        entries: 1_000_000,
        logs,
        filter,
        pir: pir_spec,
        layout: &layout,
        shards: None,
    })
    .expect("manifest");
    add(&mut s, "manifest", "table1-768", big.to_json());

    // API error bodies.
    for (i, c) in ErrorCode::ALL.into_iter().enumerate() {
        let e = ErrorBody {
            error: c.as_str().into(),
            message: format!("{c} happened"),
            current_epoch: (i % 2 == 0).then_some(7),
            shard_url: None,
        };
        add(
            &mut s,
            "api_error",
            c.as_str(),
            serde_json::to_vec(&e).expect("serializes"),
        );
    }
    add(
        &mut s,
        "api_error",
        "unknown",
        &br#"{"error":"teapot","message":"\u00e9"}"#[..],
    );

    // SCTs and SCT lists: the test log's, embedded and delivered.
    let scts = embedded_scts(&leaf).expect("fixture");
    add(&mut s, "sct", "tls", fixtures::TESTLOG_TLS_SCT);
    for (i, sct) in scts.iter().enumerate() {
        add(
            &mut s,
            "sct",
            format!("embedded-{i}"),
            sct.encode().expect("encodes"),
        );
    }
    add(
        &mut s,
        "sct_list",
        "embedded",
        encode_sct_list(&scts).expect("encodes"),
    );
    add(
        &mut s,
        "sct_list",
        "extension-value",
        sct_list_extension_value(&scts).expect("encodes"),
    );

    // MerkleTreeLeaf, TimestampedEntry and TileLeaf: Icarus's x509 entry
    // and navigli2025h2's precert entries.
    add(
        &mut s,
        "merkle_tree_leaf",
        "icarus-x509",
        icarus_leaf.clone(),
    );
    for (i, e) in tile0.iter().take(4).enumerate() {
        let mtl = e.merkle_tree_leaf();
        add(
            &mut s,
            "merkle_tree_leaf",
            format!("navigli-{i}"),
            mtl.encode().expect("encodes"),
        );
        add(
            &mut s,
            "timestamped_entry",
            format!("navigli-entry-{i}"),
            e.timestamped_entry().encode().expect("encodes"),
        );
        add(
            &mut s,
            "timestamped_entry",
            format!("navigli-tileleaf-{i}"),
            e.encode().expect("encodes"),
        );
    }
    let icarus_mtl = MerkleTreeLeaf::decode(&icarus_leaf).expect("fixture");
    add(
        &mut s,
        "timestamped_entry",
        "icarus-x509",
        icarus_mtl.timestamped_entry.encode().expect("encodes"),
    );

    // Data tiles: the real partial tile, raw and gzip, and the first
    // three entries of tile 0 as a partial tile.
    add(&mut s, "data_tile", "navigli-003.p-10", partial.clone());
    add(&mut s, "data_tile", "navigli-003.p-10.gz", gzip(&partial));
    let mut head = Vec::new();
    for e in tile0.iter().take(3) {
        head.extend(e.encode().expect("encodes"));
    }
    add(&mut s, "data_tile", "navigli-000.p-3", head.clone());
    add(&mut s, "data_tile", "navigli-000.p-3.gz", gzip(&head));

    // Hash tiles: width byte (0 = 256), then the body.
    let mut t = vec![10u8];
    t.extend(read(&format!("{navigli}/0/003.p/10")));
    add(&mut s, "hash_tile", "navigli-0-003.p-10", t);
    let mut t = vec![0u8];
    t.extend(read(&format!("{navigli}/0/000")));
    add(&mut s, "hash_tile", "navigli-0-000", t);

    for (i, p) in [
        "tile/0/000",
        "/tile/1/x001/234.p/7",
        "tile/data/x123/x456/789",
        "tile/data/003.p/10",
        "tile/63/x018/x446/x744/x073/x709/x551/615",
    ]
    .iter()
    .enumerate()
    {
        add(&mut s, "tile_path", format!("path-{i}"), p.as_bytes());
    }

    // Checkpoints: rome2024h1's real one, and its note with an extension
    // line and a second signature line.
    add(
        &mut s,
        "checkpoint",
        "rome2024h1",
        fixtures::ROME_CHECKPOINT,
    );
    let note = SignedNote::parse(fixtures::ROME_CHECKPOINT).expect("fixture");
    let mut cp = Checkpoint::parse(&note.text).expect("fixture");
    cp.extensions.push("ext line".into());
    let mut n2 = note.clone();
    n2.text = cp.to_text();
    let mut sig = note.signatures[0].clone();
    sig.name = "other.example/log".into();
    n2.signatures.push(sig);
    add(&mut s, "checkpoint", "rome2024h1-extended", n2.to_text());

    // get-sth, get-entries and consistency bodies.
    for k in ["sth1", "sth2"] {
        add(
            &mut s,
            "get_sth",
            format!("icarus-{k}"),
            icarus[k].to_string(),
        );
    }
    let mut entries = vec![serde_json::json!({
        "leaf_input": b64(&icarus_leaf),
        "extra_data": b64(&[0, 0, 0]),
    })];
    for e in tile0.iter().take(2) {
        let mut w = Writer::new();
        w.put_opaque24(e.pre_certificate().expect("precert entry"), "pre")
            .expect("fits");
        w.put_opaque24(&e.certificate_chain().concat(), "chain")
            .expect("fits");
        entries.push(serde_json::json!({
            "leaf_input": b64(&e.merkle_tree_leaf().encode().expect("encodes")),
            "extra_data": b64(w.as_bytes()),
        }));
    }
    for (name, es) in [("icarus-1", &entries[..1]), ("mixed-3", &entries[..])] {
        let mut body = vec![3u8];
        body.extend(
            serde_json::json!({ "entries": es })
                .to_string()
                .into_bytes(),
        );
        add(&mut s, "get_entries", name, body);
    }
    let mut body = vec![0u8];
    body.extend(
        serde_json::json!({ "consistency": icarus["consistency"] })
            .to_string()
            .into_bytes(),
    );
    add(&mut s, "get_entries", "icarus-consistency", body);

    // Proofs: Icarus's consistency proof and inclusion proof.
    let hash = |v: &serde_json::Value| -> Vec<u8> {
        BASE64
            .decode(v.as_str().expect("fixture"))
            .expect("fixture")
    };
    let mut p = Vec::new();
    p.extend(
        icarus["sth1"]["tree_size"]
            .as_u64()
            .expect("fixture")
            .to_be_bytes(),
    );
    p.extend(
        icarus["sth2"]["tree_size"]
            .as_u64()
            .expect("fixture")
            .to_be_bytes(),
    );
    p.extend(hash(&icarus["sth1"]["sha256_root_hash"]));
    p.extend(hash(&icarus["sth2"]["sha256_root_hash"]));
    for h in icarus["consistency"].as_array().expect("fixture") {
        p.extend(hash(h));
    }
    add(&mut s, "consistency_proof", "icarus-consistency", p);
    let mut p = Vec::new();
    p.extend(
        icarus["inclusion"]["leaf_index"]
            .as_u64()
            .expect("fixture")
            .to_be_bytes(),
    );
    p.extend(
        icarus["inclusion"]["tree_size"]
            .as_u64()
            .expect("fixture")
            .to_be_bytes(),
    );
    p.extend(ct_core::leaf_hash(&icarus_leaf));
    p.extend(hash(&icarus["sth2"]["sha256_root_hash"]));
    for h in icarus["inclusion"]["audit_path"]
        .as_array()
        .expect("fixture")
    {
        p.extend(hash(h));
    }
    add(&mut s, "consistency_proof", "icarus-inclusion", p);

    for n in [0u16, 1, 7, 256, 300, 1025, 2047] {
        let mut b = n.to_be_bytes().to_vec();
        b.extend((n / 3).to_be_bytes());
        b.extend(n.wrapping_mul(7).to_be_bytes());
        b.extend([0, 5, b'x']);
        add(&mut s, "merkle", format!("n-{n}"), b);
    }

    // Log lists and keys.
    add(&mut s, "loglist", "ct-core", fixtures::CT_CORE_LOG_LIST);
    add(&mut s, "loglist", "testlog", fixtures::TESTLOG_LOG_LIST);
    add(
        &mut s,
        "loglist",
        "rfc3339",
        &b"2024-02-29T23:59:60.123+05:30"[..],
    );
    add(&mut s, "log_key", "p256", fixtures::TEST_P256_SPKI);
    add(&mut s, "log_key", "rsa2048", fixtures::TEST_RSA2048_SPKI);
    for (i, k) in fixtures::REJECTED_SPKIS.iter().enumerate() {
        add(&mut s, "log_key", format!("rejected-{i}"), *k);
    }
    add(
        &mut s,
        "log_key",
        "icarus",
        fixtures::icarus_key().spki_der(),
    );
    let sth_sig = hash(&icarus["sth1"]["tree_head_signature"]);
    add(&mut s, "log_key", "ecdsa-signature", sth_sig[4..].to_vec());

    // Certificates.
    add(&mut s, "x509", "testlog-leaf", leaf.clone());
    add(&mut s, "x509", "testlog-issuer", issuer.clone());
    add(&mut s, "x509", "testlog-tls-leaf", tls_leaf.clone());
    add(
        &mut s,
        "x509",
        "testlog-leaf-pem",
        fixtures::TESTLOG_LEAF_PEM,
    );
    if let SignedEntry::X509(c) = &icarus_mtl.timestamped_entry.signed_entry {
        add(&mut s, "x509", "icarus-cert", c.clone());
    }
    for (i, e) in tile0.iter().take(2).enumerate() {
        add(
            &mut s,
            "x509",
            format!("navigli-precert-{i}"),
            e.pre_certificate().expect("precert entry"),
        );
    }
    add(
        &mut s,
        "leaf_rebuild",
        "embedded",
        join_n(&[&leaf, &issuer, fixtures::TESTLOG_TLS_SCT]),
    );
    add(
        &mut s,
        "leaf_rebuild",
        "delivered",
        join_n(&[&tls_leaf, &issuer, fixtures::TESTLOG_TLS_SCT]),
    );

    // Pending queues: the test log's SCTs as the client queues them.
    let list = browser_client::sct::parse_log_list(fixtures::TESTLOG_LOG_LIST).expect("fixture");
    let mut q = PendingQueue::new();
    for c in browser_client::sct::embedded_scts(&leaf, &issuer, &list).expect("fixture") {
        q.push(
            c.to_pending(&[leaf.clone(), issuer.clone()], 1_795_319_030_000)
                .expect("valid"),
        );
    }
    let c = browser_client::sct::delivered_sct(&tls_leaf, fixtures::TESTLOG_TLS_SCT, &list)
        .expect("fixture");
    q.push(
        c.to_pending(&[tls_leaf.clone()], 1_795_319_030_000)
            .expect("valid"),
    );
    add(&mut s, "pending_queue", "testlog", q.to_json());
    q.items[0].not_found_in = Some(5);
    add(&mut s, "pending_queue", "testlog-recheck", q.to_json());
    add(&mut s, "pending_queue", "empty", &br#"{"items":[]}"#[..]);

    // HTTP requests to the tiny epoch (query seed ids zeroed: the target
    // patches in the served one).
    let e = tiny_epoch::EPOCH;
    let oct = [("content-type", "application/octet-stream")];
    for (name, method, path) in [
        ("manifest", "GET", "/v1/manifest"),
        ("healthz", "GET", "/healthz"),
        ("metrics", "GET", "/metrics"),
        ("head-manifest", "HEAD", "/v1/manifest"),
        ("delete-manifest", "DELETE", "/v1/manifest"),
        ("unknown", "GET", "/v2/nothing?x=1"),
    ] {
        add(
            &mut s,
            "auditor_http",
            name,
            http_input::encode(method, path, &[], &[]),
        );
    }
    for (d, db) in m.dbs.iter().enumerate() {
        let shape = DbShape {
            ell1: db.rows as usize,
            ell2: db.cols as usize,
        };
        let client = Client::new(TOY, shape, PublicSeed(db.seed)).expect("client");
        let (q, _, _) = client.query_bit(db.bits, 5).expect("query");
        let mut body = q.to_bytes();
        body[6..14].fill(0);
        let path = format!("/v1/epochs/{e}/dbs/{d}/query");
        add(
            &mut s,
            "auditor_http",
            format!("query-db{d}"),
            http_input::encode("POST", &path, &oct, &body),
        );
        if d == 0 {
            add(
                &mut s,
                "auditor_http",
                "query-no-content-type",
                http_input::encode("POST", &path, &[], &body),
            );
            add(
                &mut s,
                "auditor_http",
                "query-wrong-content-type",
                http_input::encode("POST", &path, &[("content-type", "text/plain")], &body),
            );
            add(
                &mut s,
                "auditor_http",
                "query-short",
                http_input::encode("POST", &path, &oct, &body[..100]),
            );
            add(
                &mut s,
                "auditor_http",
                "query-old-epoch",
                http_input::encode(
                    "POST",
                    &format!("/v1/epochs/{}/dbs/0/query", e + 7),
                    &oct,
                    &body,
                ),
            );
            add(
                &mut s,
                "auditor_http",
                "query-bad-epoch",
                http_input::encode("POST", "/v1/epochs/one/dbs/0/query", &oct, &body),
            );
            add(
                &mut s,
                "auditor_http",
                "query-get",
                http_input::encode("GET", &path, &[], &[]),
            );
        }
    }

    // Write.
    let root = repo().join("fuzz/seeds");
    let mut total = 0;
    for (target, files) in &s {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).expect("seed directory");
        for (name, bytes) in files {
            std::fs::write(dir.join(name), bytes).expect("seed file");
            total += bytes.len();
        }
        println!("{target}: {} seeds", files.len());
    }
    println!("{total} bytes in {}", root.display());
}
