//! The `ct-testlog` binary on 127.0.0.1:0: the files it writes describe the
//! log it serves. The log list names its key; every corpus certificate's
//! SCT verifies (or, for the forged ones, does not) and is logged exactly
//! when its truth says so; with `--wait-mmd` the served head covers every
//! corpus SCT.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde::Deserialize;

use ct_core::precert::precert_entry_from_final_cert;
use ct_core::{LogApi, LogList, MerkleTreeLeaf, SignedCertificateTimestamp, SignedEntry};
use ct_core::{SignedTreeHead, TimestampedEntry};
use ct_testlog::{CorpusRecord, Truth};

/// Kills the child when the test ends, however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the binary and reads its `key: value` report up to the
/// `misbehaviour:` line.
fn start(args: &[&str]) -> (Running, HashMap<String, String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ct-testlog"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("ct-testlog starts");
    let stdout = child.stdout.take().expect("stdout");
    let running = Running(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut report = HashMap::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some((k, v)) = line.split_once(": ") {
                report.insert(k.to_owned(), v.to_owned());
                if k == "misbehaviour" {
                    let _ = tx.send(report);
                    return;
                }
            }
        }
    });
    let report = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("ct-testlog reports within 120 s");
    (running, report)
}

#[derive(Deserialize)]
struct GetEntries {
    entries: Vec<Entry>,
}

#[derive(Deserialize)]
struct Entry {
    leaf_input: String,
}

fn b64(s: &str) -> Vec<u8> {
    BASE64.decode(s).expect("base64")
}

/// The signed entry and SCT a corpus record presents: the separately
/// delivered SCT over the certificate, or the embedded one over the
/// precertificate entry rebuilt from the final certificate.
fn presented(r: &CorpusRecord) -> (SignedEntry, SignedCertificateTimestamp) {
    let cert = b64(&r.cert);
    match &r.tls_sct {
        Some(sct) => (
            SignedEntry::X509(cert),
            SignedCertificateTimestamp::decode(&b64(sct)).expect("TLS SCT decodes"),
        ),
        None => {
            let (entry, mut scts) =
                precert_entry_from_final_cert(&cert, &b64(&r.issuer)).expect("embedded SCT");
            assert_eq!(scts.len(), 1);
            (entry, scts.remove(0))
        }
    }
}

#[tokio::test]
async fn writes_a_corpus_that_matches_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let out: PathBuf = dir.path().join("out");
    let (_log, report) = start(&[
        "--addr",
        "127.0.0.1:0",
        "--out-dir",
        out.to_str().unwrap(),
        "--entries",
        "10",
        "--omitted",
        "3",
        "--forged",
        "2",
        "--precert-fraction",
        "0.5",
        "--mmd",
        "1",
        "--wait-mmd",
    ]);
    assert_eq!(
        report["corpus"],
        out.join("corpus.jsonl").display().to_string()
    );
    assert_eq!(report["corpus_entries"], "logged=10 omitted=3 forged=2");
    assert_eq!(report["entries"], "10");
    let url = report["url"].clone();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    assert!(!url.ends_with(":0/"), "{url}");

    // The log list names the log's key and URL, with the MMD given.
    let list = LogList::from_json(&std::fs::read(out.join("log_list.json")).unwrap()).unwrap();
    let (_, info) = list
        .logs()
        .find(|(_, l)| matches!(&l.api, LogApi::Rfc6962 { url: u } if *u == url))
        .expect("the RFC 6962 log at the reported URL");
    assert_eq!(info.mmd, 1);
    assert_eq!(BASE64.encode(info.key.spki_der()), report["key"]);
    let key = info.key.clone();

    // The issuer files hold the CA of every corpus record.
    let issuer_der = std::fs::read(out.join("issuer.der")).unwrap();
    let issuer_pem = std::fs::read_to_string(out.join("issuer.pem")).unwrap();
    assert!(issuer_pem.starts_with("-----BEGIN CERTIFICATE-----\n"));

    // The corpus: one JSON record per line, in ct-testlog's format.
    let text = std::fs::read_to_string(out.join("corpus.jsonl")).unwrap();
    let records: Vec<CorpusRecord> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a corpus record"))
        .collect();
    let count = |t: Truth| records.iter().filter(|r| r.truth == t).count();
    assert_eq!(
        (
            count(Truth::Logged),
            count(Truth::Omitted),
            count(Truth::Forged)
        ),
        (10, 3, 2)
    );

    // What the log serves: its head, and every logged leaf.
    let client = reqwest::Client::new();
    let get = |path: String| {
        let client = client.clone();
        async move {
            let r = client.get(path).send().await.expect("request");
            assert_eq!(r.status().as_u16(), 200);
            r.bytes().await.expect("body").to_vec()
        }
    };
    let sth = SignedTreeHead::from_json(&get(format!("{url}ct/v1/get-sth")).await).unwrap();
    sth.verify(&key).unwrap();
    assert_eq!(sth.tree_size, 10);
    let entries: GetEntries =
        serde_json::from_slice(&get(format!("{url}ct/v1/get-entries?start=0&end=9")).await)
            .unwrap();
    let logged: HashSet<ct_core::LeafHash> = entries
        .entries
        .iter()
        .map(|e| ct_core::merkle::leaf_hash(&b64(&e.leaf_input)))
        .collect();
    assert_eq!(logged.len(), 10);

    for r in &records {
        assert_eq!(b64(&r.issuer), issuer_der);
        let (entry, sct) = presented(r);
        assert_eq!(sct.log_id, key.log_id());
        assert_eq!(
            sct.verify(&key, &entry).is_ok(),
            r.truth != Truth::Forged,
            "{:?}",
            r.truth
        );
        // --wait-mmd: the head is at least one MMD newer than every SCT.
        assert!(sth.timestamp >= sct.timestamp + 1000, "{:?}", r.truth);
        let te: TimestampedEntry = sct.timestamped_entry(entry);
        let hash = MerkleTreeLeaf::new(te).leaf_hash().unwrap();
        assert_eq!(
            logged.contains(&hash),
            r.truth != Truth::Omitted,
            "{:?}",
            r.truth
        );
        // Omitted SCTs are embedded (precertificate-based); forged ones are
        // separately delivered.
        match r.truth {
            Truth::Omitted => assert!(r.tls_sct.is_none()),
            Truth::Forged => assert!(r.tls_sct.is_some()),
            Truth::Logged => {}
        }
    }
}

#[test]
fn refuses_an_unknown_misbehaviour() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ct-testlog"))
        .args(["--entries", "1", "--misbehave", "sideways", "--out-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown misbehaviour"), "{err}");
    assert!(!dir.path().join("log_list.json").exists());
}
