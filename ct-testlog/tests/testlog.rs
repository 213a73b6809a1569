//! The local test log over real HTTP on 127.0.0.1: everything it serves
//! verifies with ct-core's parsers and verifiers, and every
//! misbehaviour is observable.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde::Deserialize;

use ct_core::leaf::leaf_hash_of_encoded_entry;
use ct_core::merkle::root_from_inclusion_proof;
use ct_core::precert::{
    embedded_scts, precert_entry_from_final_cert, precert_tbs, tbs_certificate,
};
use ct_core::tls::Reader;
use ct_core::{
    data_tiles_for_range, parse_data_tile_checked, parse_hash_tile, root_from_leaf_hashes,
    root_from_tiles, verify_checkpoint, verify_consistency, verify_inclusion, Hash, LogApi,
    LogList, MerkleTreeLeaf, SignedEntry, SignedTreeHead, TileId,
};
use ct_testlog::{IssuedEntry, Misbehaviour, TestLog, TestLogConfig};

struct Http {
    client: reqwest::Client,
    base: String,
}

struct Resp {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Vec<u8>,
}

impl Http {
    fn new(log: &TestLog) -> Self {
        Http {
            client: reqwest::Client::new(),
            base: log.base_url(),
        }
    }

    async fn get(&self, path: &str) -> Resp {
        let r = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .expect("request");
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let body = r.bytes().await.expect("body").to_vec();
        Resp {
            status,
            headers,
            body,
        }
    }

    async fn ok(&self, path: &str) -> Vec<u8> {
        let r = self.get(path).await;
        assert_eq!(
            r.status,
            200,
            "{path}: {}",
            String::from_utf8_lossy(&r.body)
        );
        r.body
    }

    async fn sth(&self) -> SignedTreeHead {
        SignedTreeHead::from_json(&self.ok("ct/v1/get-sth").await).expect("get-sth parses")
    }

    /// All entries `[0, size)` through get-entries, following short batches.
    async fn entries(&self, size: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        while (out.len() as u64) < size {
            let start = out.len() as u64;
            let body = self
                .ok(&format!("ct/v1/get-entries?start={start}&end={}", size - 1))
                .await;
            let e: GetEntries = serde_json::from_slice(&body).expect("get-entries JSON");
            assert!(!e.entries.is_empty());
            for x in e.entries {
                out.push((b64(&x.leaf_input), b64(&x.extra_data)));
            }
        }
        out
    }

    async fn consistency(&self, first: u64, second: u64) -> Vec<Hash> {
        let body = self
            .ok(&format!(
                "ct/v1/get-sth-consistency?first={first}&second={second}"
            ))
            .await;
        let c: Consistency = serde_json::from_slice(&body).expect("consistency JSON");
        c.consistency.iter().map(|h| hash(h)).collect()
    }
}

#[derive(Deserialize)]
struct GetEntries {
    entries: Vec<Entry>,
}

#[derive(Deserialize)]
struct Entry {
    leaf_input: String,
    extra_data: String,
}

#[derive(Deserialize)]
struct Consistency {
    consistency: Vec<String>,
}

#[derive(Deserialize)]
struct ProofByHash {
    leaf_index: u64,
    audit_path: Vec<String>,
}

fn b64(s: &str) -> Vec<u8> {
    BASE64.decode(s).expect("base64")
}

fn hash(s: &str) -> Hash {
    b64(s).try_into().expect("32 bytes")
}

fn url_b64(h: &Hash) -> String {
    BASE64
        .encode(h)
        .replace('+', "%2B")
        .replace('/', "%2F")
        .replace('=', "%3D")
}

fn leaf_hash_of(leaf_input: &[u8]) -> Hash {
    let leaf = MerkleTreeLeaf::decode(leaf_input).expect("leaf_input parses");
    let h = leaf.leaf_hash().unwrap();
    assert_eq!(h, ct_core::merkle::leaf_hash(leaf_input));
    h.to_bytes()
}

/// Parses `ASN.1Cert chain<0..2^24-1>` into certificates.
fn read_chain(r: &mut Reader<'_>) -> Vec<Vec<u8>> {
    let chain = r.read_opaque24("chain").unwrap();
    let mut cr = Reader::new(chain);
    let mut out = Vec::new();
    while !cr.is_empty() {
        out.push(cr.read_opaque24("cert").unwrap().to_vec());
    }
    out
}

async fn started(n: usize, precert_fraction: f64) -> (TestLog, Vec<IssuedEntry>) {
    let log = TestLog::start(TestLogConfig::default())
        .await
        .expect("start");
    let issued = log.add_entries(n, precert_fraction).await.expect("issue");
    (log, issued)
}

#[tokio::test]
async fn rfc6962_api_verifies() {
    let (log, issued) = started(300, 0.5).await;
    let http = Http::new(&log);
    let key = log.log_key();
    assert_eq!(key.spki_der(), log.log_key_spki_der().as_slice());
    assert_eq!(key.log_id(), log.log_id());

    let sth = http.sth().await;
    sth.verify(&key).expect("STH signature");
    assert_eq!(sth.tree_size, 300);

    // get-entries is capped at 256 per request; recompute the root.
    let first =
        serde_json::from_slice::<GetEntries>(&http.ok("ct/v1/get-entries?start=0&end=299").await)
            .unwrap();
    assert_eq!(first.entries.len(), 256);
    let entries = http.entries(300).await;
    let hashes: Vec<Hash> = entries.iter().map(|(l, _)| leaf_hash_of(l)).collect();
    assert_eq!(root_from_leaf_hashes(&hashes), sth.root_hash);

    let roots: serde_json::Value =
        serde_json::from_slice(&http.ok("ct/v1/get-roots").await).unwrap();
    assert_eq!(
        roots["certificates"][0].as_str().map(b64),
        Some(log.issuer_der())
    );

    let (mut n_pre, mut n_x509) = (0, 0);
    for (i, ((leaf_input, extra), e)) in entries.iter().zip(&issued).enumerate() {
        assert_eq!(e.leaf_index, Some(i as u64));
        assert_eq!(hashes[i], e.leaf_hash);
        let te = MerkleTreeLeaf::decode(leaf_input)
            .unwrap()
            .timestamped_entry;
        assert_eq!(te.leaf_index().unwrap(), i as u64);
        assert_eq!(te.timestamp, e.timestamp_ms);
        assert_eq!(te.extensions, e.sct.extensions);
        // The SCT verifies over the logged entry.
        e.sct.verify(&key, &te.signed_entry).expect("SCT");
        assert_eq!(e.signed_entry(), te.signed_entry);
        // extra_data per RFC 6962 §4.6.
        let mut r = Reader::new(extra);
        match &te.signed_entry {
            SignedEntry::Precert(p) => {
                n_pre += 1;
                let pre = r.read_opaque24("pre_certificate").unwrap().to_vec();
                assert_eq!(Some(&pre), e.precert_der.as_ref());
                assert_eq!(precert_tbs(&pre).unwrap(), p.tbs_certificate);
                assert!(e.embedded);
            }
            SignedEntry::X509(cert) => {
                n_x509 += 1;
                assert_eq!(cert, &e.cert_der);
                assert!(!e.embedded);
                assert!(embedded_scts(cert).unwrap().is_empty());
            }
        }
        assert_eq!(read_chain(&mut r), vec![log.issuer_der()]);
        assert!(r.is_empty());
        let validity = ct_core::entry_validity(&te.signed_entry).unwrap();
        assert_eq!(validity.not_after, e.not_after);
        assert!(validity.contains(e.timestamp_ms as i64 / 1000));
    }
    assert_eq!((n_pre, n_x509), (150, 150));

    // get-proof-by-hash and get-entry-and-proof.
    for i in [0u64, 1, 255, 256, 299] {
        let body = http
            .ok(&format!(
                "ct/v1/get-proof-by-hash?hash={}&tree_size=300",
                url_b64(&hashes[i as usize])
            ))
            .await;
        let p: ProofByHash = serde_json::from_slice(&body).unwrap();
        assert_eq!(p.leaf_index, i);
        let path: Vec<Hash> = p.audit_path.iter().map(|h| hash(h)).collect();
        verify_inclusion(&hashes[i as usize].into(), i, 300, &path, &sth.root_hash).unwrap();
        let v: serde_json::Value = serde_json::from_slice(
            &http
                .ok(&format!(
                    "ct/v1/get-entry-and-proof?leaf_index={i}&tree_size=300"
                ))
                .await,
        )
        .unwrap();
        let leaf_input = b64(v["leaf_input"].as_str().unwrap());
        assert_eq!(leaf_hash_of(&leaf_input), hashes[i as usize]);
        let path: Vec<Hash> = v["audit_path"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| hash(h.as_str().unwrap()))
            .collect();
        verify_inclusion(&hashes[i as usize].into(), i, 300, &path, &sth.root_hash).unwrap();
    }

    // Growth: a consistency proof between the two heads verifies.
    log.add_entries(45, 0.2).await.unwrap();
    let sth2 = http.sth().await;
    sth2.verify(&key).unwrap();
    assert_eq!(sth2.tree_size, 345);
    assert!(sth2.timestamp > sth.timestamp);
    for first in [0u64, 1, 7, 256, 299, 300, 345] {
        let proof = http.consistency(first, 345).await;
        let old_root = if first == 300 {
            sth.root_hash
        } else {
            root_from_leaf_hashes(&hashes[..first.min(300) as usize])
        };
        if first <= 300 {
            verify_consistency(first, 345, &proof, &old_root, &sth2.root_hash)
                .unwrap_or_else(|e| panic!("consistency {first}: {e}"));
        }
    }
    log.shutdown().await;
}

#[tokio::test]
async fn static_ct_api_verifies() {
    let (log, issued) = started(600, 0.7).await;
    let http = Http::new(&log);
    let key = log.log_key();

    let note = http.ok("checkpoint").await;
    let cp = verify_checkpoint(&note, log.origin(), &key).expect("checkpoint verifies");
    let sth = http.sth().await;
    assert_eq!(cp.to_signed_tree_head(), sth);
    assert_eq!(cp.checkpoint.tree_size, 600);

    // Data tiles (gzip) parse with the checked parser; level-0 hash tiles
    // hold exactly their leaf hashes.
    let mut leaf_hashes = Vec::new();
    for tile in data_tiles_for_range(0, 600) {
        let r = http.get(&tile.data_path()).await;
        assert_eq!(r.status, 200);
        assert_eq!(
            r.headers.get("content-encoding").map(|v| v.as_bytes()),
            Some(&b"gzip"[..])
        );
        let leaves = parse_data_tile_checked(tile, &r.body).expect("data tile");
        let level0 = parse_hash_tile(&http.ok(&tile.path()).await, tile.width()).unwrap();
        let hashes: Vec<Hash> = leaves.iter().map(|l| l.leaf_hash().to_bytes()).collect();
        assert_eq!(hashes, level0);
        for l in &leaves {
            assert_eq!(l.certificate_chain(), &[log.issuer_fingerprint()]);
            assert_eq!(
                l.pre_certificate().is_some(),
                matches!(l.timestamped_entry().signed_entry, SignedEntry::Precert(_))
            );
        }
        leaf_hashes.extend(hashes);
    }
    assert_eq!(leaf_hashes.len(), 600);
    for (h, e) in leaf_hashes.iter().zip(&issued) {
        assert_eq!(*h, e.leaf_hash);
    }
    assert_eq!(root_from_leaf_hashes(&leaf_hashes), cp.checkpoint.root_hash);

    // Every level of hash tiles, fetched over HTTP, gives the root.
    let mut tiles = std::collections::HashMap::new();
    for level in 0..3u8 {
        for id in ct_core::tiles_for_size(level, 600) {
            let body = http.ok(&id.path()).await;
            tiles.insert(id, parse_hash_tile(&body, id.width()).unwrap());
        }
    }
    assert_eq!(tiles.len(), 3 + 1); // 2 full + 1 partial at level 0, 1 partial at level 1
    let root = root_from_tiles(600, |id| Ok(tiles.get(&id).cloned())).unwrap();
    assert_eq!(root, cp.checkpoint.root_hash);
    // A full tile that does not exist yet is a 404; so is a partial one
    // wider than the tree.
    assert_eq!(http.get("tile/0/002").await.status, 404);
    assert_eq!(http.get("tile/0/002.p/89").await.status, 404);
    assert_eq!(http.get("tile/data/002.p/89").await.status, 404);
    assert_eq!(http.get("tile/1/000").await.status, 404);
    // Partial tiles of older sizes remain available (prefixes).
    let old = TileId::new(0, 2, 10).unwrap();
    let body = http.ok(&old.path()).await;
    assert_eq!(parse_hash_tile(&body, 10).unwrap(), leaf_hashes[512..522]);
    let r = http.get(&old.data_path()).await;
    assert_eq!(parse_data_tile_checked(old, &r.body).unwrap().len(), 10);

    // The issuer endpoint serves the chain's fingerprint.
    let fp = ct_core::hex::encode(&log.issuer_fingerprint());
    assert_eq!(http.ok(&format!("issuer/{fp}")).await, log.issuer_der());
    assert_eq!(
        http.get(&format!("issuer/{}", "0".repeat(64))).await.status,
        404
    );

    // The log list: both APIs, origin derivable from the tiled entry.
    let list = LogList::from_json(log.log_list_json().as_bytes()).expect("log list");
    let logs: Vec<_> = list.logs().map(|(_, l)| l.clone()).collect();
    assert_eq!(logs.len(), 2);
    for l in &logs {
        assert_eq!(l.key, key);
        assert_eq!(l.mmd, 86_400);
        assert_eq!(l.state.map(|s| s.kind), Some(ct_core::LogStateKind::Usable));
        match &l.api {
            LogApi::Rfc6962 { url } => assert_eq!(url, &log.base_url()),
            LogApi::StaticCt { monitoring_url, .. } => {
                assert_eq!(monitoring_url, &log.base_url());
                assert_eq!(l.checkpoint_origin().as_deref(), Some(log.origin()));
            }
        }
    }
    log.shutdown().await;
}

#[tokio::test]
async fn derived_origin_matches_the_address() {
    let cfg = TestLogConfig {
        origin: String::new(),
        ..TestLogConfig::default()
    };
    let log = TestLog::start(cfg).await.unwrap();
    assert_eq!(log.origin(), log.local_addr().to_string());
    assert_eq!(log.base_url(), format!("http://{}/", log.origin()));
    log.add_entries(3, 0.0).await.unwrap();
    let http = Http::new(&log);
    let cp = verify_checkpoint(&http.ok("checkpoint").await, log.origin(), &log.log_key()).unwrap();
    assert_eq!(cp.checkpoint.tree_size, 3);
    let list = LogList::from_json(log.log_list_json().as_bytes()).unwrap();
    let tiled = list
        .logs()
        .find(|(_, l)| matches!(l.api, LogApi::StaticCt { .. }))
        .unwrap()
        .1;
    assert_eq!(tiled.checkpoint_origin().as_deref(), Some(log.origin()));
    log.shutdown().await;
}

/// The browser client's path: only the final certificate and its issuer.
#[tokio::test]
async fn leaf_rebuilt_from_final_certificate() {
    let (log, issued) = started(8, 1.0).await;
    let http = Http::new(&log);
    let key = log.log_key();
    let sth = http.sth().await;
    for e in &issued {
        assert!(e.embedded);
        let (entry, scts) = precert_entry_from_final_cert(&e.cert_der, &e.issuer_der).unwrap();
        assert_eq!(scts, vec![e.sct.clone()]);
        let SignedEntry::Precert(p) = &entry else {
            panic!("precert entry expected")
        };
        // The final TBS without the SCT list is the precert TBS without
        // the poison.
        assert_eq!(Some(&p.tbs_certificate), e.precert_tbs_der.as_ref());
        assert_eq!(
            p.tbs_certificate,
            precert_tbs(e.precert_der.as_ref().unwrap()).unwrap()
        );
        assert_ne!(
            tbs_certificate(&e.cert_der).unwrap(),
            p.tbs_certificate.as_slice()
        );
        let sct = &scts[0];
        sct.verify(&key, &entry).expect("embedded SCT verifies");
        // Its leaf hash is in the tree at the SCT's leaf_index.
        let te = sct.timestamped_entry(entry);
        let index = te.leaf_index().unwrap();
        let leaf_hash = leaf_hash_of_encoded_entry(&te.encode().unwrap());
        assert_eq!(leaf_hash, e.leaf_hash);
        let v: serde_json::Value = serde_json::from_slice(
            &http
                .ok(&format!(
                    "ct/v1/get-entry-and-proof?leaf_index={index}&tree_size={}",
                    sth.tree_size
                ))
                .await,
        )
        .unwrap();
        let path: Vec<Hash> = v["audit_path"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| hash(h.as_str().unwrap()))
            .collect();
        verify_inclusion(&leaf_hash, index, sth.tree_size, &path, &sth.root_hash).unwrap();
        // A certificate with a changed subject no longer matches its SCT.
        let mut bad = e.cert_der.clone();
        let at = bad
            .windows(15)
            .position(|w| w == b"testlog.example")
            .expect("subject name");
        bad[at] = b'u';
        let (entry, scts) = precert_entry_from_final_cert(&bad, &e.issuer_der).unwrap();
        assert!(scts[0].verify(&key, &entry).is_err());
    }
    log.shutdown().await;
}

#[tokio::test]
async fn misbehaviour_rate_limit_and_truncation() {
    let (log, _) = started(40, 0.5).await;
    let http = Http::new(&log);

    log.set_misbehaviour(Misbehaviour::RateLimit {
        every_nth: 3,
        retry_after_s: 7,
    });
    let mut limited = Vec::new();
    for path in [
        "ct/v1/get-sth",
        "checkpoint",
        "tile/0/000.p/40",
        "ct/v1/get-sth",
        "ct/v1/get-entries?start=0&end=1",
        "tile/data/000.p/40",
    ] {
        let r = http.get(path).await;
        if r.status == 429 {
            assert_eq!(
                r.headers.get("retry-after").map(|v| v.as_bytes()),
                Some(&b"7"[..])
            );
            limited.push(path);
        } else {
            assert_eq!(r.status, 200, "{path}");
        }
    }
    assert_eq!(limited, ["tile/0/000.p/40", "tile/data/000.p/40"]);

    log.set_misbehaviour(Misbehaviour::TruncateBatches { max: 5 });
    let e: GetEntries =
        serde_json::from_slice(&http.ok("ct/v1/get-entries?start=3&end=39").await).unwrap();
    assert_eq!(e.entries.len(), 5);
    // Still valid: a client that follows short batches gets the right root.
    let sth = http.sth().await;
    let entries = http.entries(40).await;
    let hashes: Vec<Hash> = entries.iter().map(|(l, _)| leaf_hash_of(l)).collect();
    assert_eq!(root_from_leaf_hashes(&hashes), sth.root_hash);

    log.set_misbehaviour(Misbehaviour::None);
    let e: GetEntries =
        serde_json::from_slice(&http.ok("ct/v1/get-entries?start=3&end=39").await).unwrap();
    assert_eq!(e.entries.len(), 37);
    log.shutdown().await;
}

#[tokio::test]
async fn misbehaviour_wrong_root_and_fork() {
    let (log, _) = started(20, 0.5).await;
    let http = Http::new(&log);
    let key = log.log_key();
    let good = http.sth().await;

    log.set_misbehaviour(Misbehaviour::WrongRoot);
    let sth = http.sth().await;
    sth.verify(&key).expect("validly signed");
    assert_eq!(sth.tree_size, 20);
    let hashes: Vec<Hash> = http
        .entries(20)
        .await
        .iter()
        .map(|(l, _)| leaf_hash_of(l))
        .collect();
    assert_ne!(
        root_from_leaf_hashes(&hashes),
        sth.root_hash,
        "mismatch detected"
    );
    assert_eq!(root_from_leaf_hashes(&hashes), good.root_hash);
    let cp = verify_checkpoint(&http.ok("checkpoint").await, log.origin(), &key).unwrap();
    assert_eq!(cp.checkpoint.root_hash, sth.root_hash);
    let tile = parse_hash_tile(&http.ok("tile/0/000.p/20").await, 20).unwrap();
    assert_ne!(root_from_leaf_hashes(&tile), cp.checkpoint.root_hash);

    log.set_misbehaviour(Misbehaviour::ForkedTree);
    let fork = http.sth().await;
    fork.verify(&key).expect("validly signed");
    assert_eq!(fork.tree_size, 22);
    assert!(fork.timestamp > good.timestamp);
    let proof = http.consistency(20, 22).await;
    assert!(
        verify_consistency(20, 22, &proof, &good.root_hash, &fork.root_hash).is_err(),
        "the fork is detected"
    );
    for old in [1u64, 5, 16, 19] {
        let proof = http.consistency(old, 22).await;
        let old_root = root_from_leaf_hashes(&hashes[..old as usize]);
        assert!(verify_consistency(old, 22, &proof, &old_root, &fork.root_hash).is_err());
    }
    // The entries and tiles served with it are the real ones plus the
    // fork's two new entries: a client without history detects the fork by
    // recomputing the root.
    let served: Vec<Hash> = http
        .entries(22)
        .await
        .iter()
        .map(|(l, _)| leaf_hash_of(l))
        .collect();
    assert_eq!(served[..20], hashes[..]);
    assert_ne!(root_from_leaf_hashes(&served), fork.root_hash);
    let cp = verify_checkpoint(&http.ok("checkpoint").await, log.origin(), &key).unwrap();
    assert_eq!(cp.to_signed_tree_head(), fork);
    let t = TileId::new(0, 0, 22).unwrap();
    let leaves = parse_data_tile_checked(t, &http.get(&t.data_path()).await.body).unwrap();
    assert_eq!(
        leaves.iter().map(|l| l.leaf_hash()).collect::<Vec<_>>(),
        served
    );
    let tile = parse_hash_tile(&http.ok(&t.path()).await, 22).unwrap();
    assert_eq!(tile, served);
    assert_ne!(root_from_leaf_hashes(&tile), cp.checkpoint.root_hash);
    // Audit paths are over the forked tree: the real leaves are not in it.
    let r = http
        .get(&format!(
            "ct/v1/get-proof-by-hash?hash={}&tree_size=22",
            url_b64(&hashes[3])
        ))
        .await;
    assert_eq!(r.status, 404);

    // Back to honest: the real tree was never touched and keeps growing.
    log.set_misbehaviour(Misbehaviour::None);
    assert_eq!(http.sth().await, good);
    log.add_entries(1, 0.0).await.unwrap();
    let next = http.sth().await;
    verify_consistency(
        20,
        21,
        &http.consistency(20, 21).await,
        &good.root_hash,
        &next.root_hash,
    )
    .unwrap();
    log.shutdown().await;
}

#[tokio::test]
async fn misbehaviour_garbage_is_a_parse_error() {
    let (log, _) = started(10, 0.5).await;
    let http = Http::new(&log);
    let key = log.log_key();
    log.set_misbehaviour(Misbehaviour::Garbage);

    assert!(SignedTreeHead::from_json(&http.get("ct/v1/get-sth").await.body).is_err());
    assert!(verify_checkpoint(&http.get("checkpoint").await.body, log.origin(), &key).is_err());
    let body = http.get("ct/v1/get-entries?start=0&end=9").await.body;
    assert!(serde_json::from_slice::<GetEntries>(&body).is_err());
    let body = http
        .get("ct/v1/get-sth-consistency?first=1&second=10")
        .await
        .body;
    let c: Consistency = serde_json::from_slice(&body).unwrap();
    assert!(BASE64.decode(&c.consistency[0]).is_err());
    let body = http
        .get("ct/v1/get-proof-by-hash?hash=AA%3D%3D&tree_size=1")
        .await
        .body;
    assert!(serde_json::from_slice::<ProofByHash>(&body).is_err());
    let t = TileId::new(0, 0, 10).unwrap();
    assert!(parse_data_tile_checked(t, &http.get(&t.data_path()).await.body).is_err());
    assert!(ct_core::parse_data_tile(&http.get(&t.data_path()).await.body).is_err());
    let body = http.get(&t.path()).await.body;
    for w in 1..=256u16 {
        assert!(parse_hash_tile(&body, w).is_err());
    }
    let roots: serde_json::Value =
        serde_json::from_slice(&http.get("ct/v1/get-roots").await.body).unwrap();
    assert!(roots["certificates"][0].as_str().is_none());

    log.set_misbehaviour(Misbehaviour::None);
    http.sth().await.verify(&key).unwrap();
    log.shutdown().await;
}

#[tokio::test]
async fn unlogged_sct_is_not_in_the_tree() {
    let (log, _) = started(5, 0.5).await;
    let http = Http::new(&log);
    let key = log.log_key();
    let e = log.issue_unlogged().await.unwrap();
    assert_eq!(e.leaf_index, None);
    assert!(e.embedded);
    // The SCT is genuine...
    let (entry, scts) = precert_entry_from_final_cert(&e.cert_der, &e.issuer_der).unwrap();
    scts[0].verify(&key, &entry).expect("validly signed SCT");
    let promised = scts[0].timestamped_entry(entry).leaf_index().unwrap();
    assert_eq!(promised, 5);
    // ...but the log never incorporates it, even after growing past the
    // promised index.
    log.add_entries(3, 0.5).await.unwrap();
    let sth = http.sth().await;
    assert_eq!(sth.tree_size, 8);
    let r = http
        .get(&format!(
            "ct/v1/get-proof-by-hash?hash={}&tree_size=8",
            url_b64(e.leaf_hash.as_bytes())
        ))
        .await;
    assert_eq!(r.status, 404);
    let hashes: Vec<Hash> = http
        .entries(8)
        .await
        .iter()
        .map(|(l, _)| leaf_hash_of(l))
        .collect();
    assert!(!hashes.contains(e.leaf_hash.as_bytes()));
    // An auditor checking the promised index finds a different leaf.
    let v: serde_json::Value = serde_json::from_slice(
        &http
            .ok(&format!(
                "ct/v1/get-entry-and-proof?leaf_index={promised}&tree_size=8"
            ))
            .await,
    )
    .unwrap();
    let at_index = leaf_hash_of(&b64(v["leaf_input"].as_str().unwrap()));
    assert_ne!(at_index, e.leaf_hash);
    let path: Vec<Hash> = v["audit_path"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| hash(h.as_str().unwrap()))
        .collect();
    assert_ne!(
        root_from_inclusion_proof(&e.leaf_hash, promised, 8, &path).unwrap(),
        sth.root_hash
    );
    log.shutdown().await;
}

#[tokio::test]
async fn bad_requests_are_json_errors() {
    let (log, issued) = started(3, 0.5).await;
    let http = Http::new(&log);
    let h = url_b64(issued[0].leaf_hash.as_bytes());
    let cases: Vec<(String, u16)> = vec![
        ("ct/v1/get-entries".into(), 400),
        ("ct/v1/get-entries?start=0".into(), 400),
        ("ct/v1/get-entries?start=a&end=1".into(), 400),
        ("ct/v1/get-entries?start=-1&end=1".into(), 400),
        ("ct/v1/get-entries?start=+1&end=1".into(), 400),
        ("ct/v1/get-entries?start=2&end=1".into(), 400),
        ("ct/v1/get-entries?start=3&end=5".into(), 400),
        ("ct/v1/get-entries?start=0&start=0&end=1".into(), 400),
        (
            "ct/v1/get-entries?start=99999999999999999999&end=1".into(),
            400,
        ),
        (format!("ct/v1/get-entries?start=0&end={}", u64::MAX), 200),
        ("ct/v1/get-entries?start=%FF&end=1".into(), 400),
        ("ct/v1/get-sth-consistency?first=1".into(), 400),
        ("ct/v1/get-sth-consistency?first=2&second=1".into(), 400),
        ("ct/v1/get-sth-consistency?first=1&second=4".into(), 400),
        ("ct/v1/get-sth-consistency?first=0&second=3".into(), 200),
        ("ct/v1/get-proof-by-hash?hash=AAAA&tree_size=3".into(), 400),
        ("ct/v1/get-proof-by-hash?hash=%%%&tree_size=3".into(), 400),
        (format!("ct/v1/get-proof-by-hash?hash={h}&tree_size=0"), 400),
        (format!("ct/v1/get-proof-by-hash?hash={h}&tree_size=4"), 400),
        (format!("ct/v1/get-proof-by-hash?hash={h}&tree_size=3"), 200),
        (
            format!(
                "ct/v1/get-proof-by-hash?hash={}&tree_size=3",
                url_b64(&[0; 32])
            ),
            404,
        ),
        (
            "ct/v1/get-entry-and-proof?leaf_index=3&tree_size=3".into(),
            400,
        ),
        (
            "ct/v1/get-entry-and-proof?leaf_index=0&tree_size=9".into(),
            400,
        ),
        ("tile/0/1".into(), 400),
        ("tile/0/x000/001".into(), 400),
        ("tile/0/000.p/0".into(), 400),
        ("tile/0/000.p/256".into(), 400),
        ("tile/64/000".into(), 400),
        ("tile/data/000.p/3".into(), 200),
        ("tile/data/000.p/4".into(), 404),
        ("tile/5/x999/x999/x999/x999/x999/999".into(), 404),
        ("tile/5/x999/x999/x999/x999/x999/x999/999".into(), 400),
        ("tile/".into(), 404),
        ("issuer/xyz".into(), 400),
        ("ct/v1/get-something".into(), 404),
        ("nothing/here".into(), 404),
        ("ct/v1/add-chain".into(), 405),
    ];
    for (path, want) in &cases {
        let r = http.get(path).await;
        assert_eq!(
            r.status,
            *want,
            "{path}: {}",
            String::from_utf8_lossy(&r.body)
        );
        if r.status >= 400 && r.status != 405 {
            let v: serde_json::Value = serde_json::from_slice(&r.body)
                .unwrap_or_else(|_| panic!("{path}: JSON error body"));
            assert!(v["error"].is_string(), "{path}");
        }
    }
    let r = http
        .client
        .post(format!("{}ct/v1/add-chain", log.base_url()))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 501);
    // A bounded sweep of odd inputs: always a 2xx/4xx answer, never a
    // crash or a 5xx.
    let paths = [
        "ct/v1/get-entries",
        "ct/v1/get-sth-consistency",
        "ct/v1/get-proof-by-hash",
        "ct/v1/get-entry-and-proof",
        "tile/0/",
        "tile/data/",
        "issuer/",
        "checkpoint",
    ];
    let values = [
        "0",
        "1",
        "2",
        "3",
        "18446744073709551615",
        "18446744073709551616",
        "-0",
        "%00",
        "%F0%9F%92%A9",
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA%3D",
        "000",
        "x000/000",
        "000.p/3",
        "000.p/",
        "",
    ];
    let names = [
        "start",
        "end",
        "first",
        "second",
        "hash",
        "tree_size",
        "leaf_index",
    ];
    let mut rng = ct_core::splitmix::SplitMix64(7);
    let mut next = |n: usize| rng.below(n as u64) as usize;
    for _ in 0..400 {
        let mut url = paths[next(paths.len())].to_string();
        if url.ends_with('/') {
            url.push_str(values[next(values.len())]);
        }
        for i in 0..next(4) {
            url.push(if i == 0 { '?' } else { '&' });
            url.push_str(names[next(names.len())]);
            url.push('=');
            url.push_str(values[next(values.len())]);
        }
        let r = http.get(&url).await;
        assert!(r.status < 500, "{url}: {}", r.status);
    }
    // The server survived all of it.
    http.sth().await.verify(&log.log_key()).unwrap();
    log.shutdown().await;
}

#[tokio::test]
async fn empty_log_and_shutdown() {
    let log = TestLog::start(TestLogConfig::default()).await.unwrap();
    let http = Http::new(&log);
    let sth = http.sth().await;
    sth.verify(&log.log_key()).unwrap();
    assert_eq!(sth.tree_size, 0);
    assert_eq!(sth.root_hash, ct_core::empty_root());
    assert_eq!(
        http.get("ct/v1/get-entries?start=0&end=0").await.status,
        400
    );
    assert_eq!(http.get("tile/0/000.p/1").await.status, 404);
    // A fork needs an entry to fork from: the empty log stays honest.
    log.set_misbehaviour(Misbehaviour::ForkedTree);
    assert_eq!(http.sth().await, sth);
    assert!(TestLog::start(TestLogConfig {
        max_get_entries: 0,
        ..TestLogConfig::default()
    })
    .await
    .is_err());
    let url = log.base_url();
    log.shutdown().await;
    assert!(reqwest::get(format!("{url}ct/v1/get-sth")).await.is_err());
}
