//! Set-up shared by the integration tests: a local CT test log ingested
//! into a fresh SQLite store by ct-ingest (as in production), the real
//! `auditor-server` binary as a child process, and bit-for-bit checks of
//! audits against the filters built in the clear.
#![allow(dead_code)] // each test file uses a part

use std::error::Error as StdError;
use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use browser_client::net::Auditor;
use browser_client::probe::Prober;
use ct_ingest::ingest::{run_once, IngestOptions};
use ct_testlog::{IssuedEntry, TestLog, TestLogConfig};

pub(crate) type BoxErr = Box<dyn StdError + Send + Sync>;
pub(crate) type TestResult = Result<(), BoxErr>;

/// The binary under test.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_auditor-server");

/// A local log with `n` entries ingested into a fresh SQLite store.
pub(crate) struct Pipeline {
    pub dir: tempfile::TempDir,
    pub log: TestLog,
    pub issued: Vec<IssuedEntry>,
    pub db_url: String,
}

impl Pipeline {
    pub(crate) async fn new(n: usize) -> Result<Pipeline, BoxErr> {
        let dir = tempfile::tempdir()?;
        let log = TestLog::start(TestLogConfig {
            mmd_seconds: 3600,
            ..TestLogConfig::default()
        })
        .await?;
        let issued = log.add_entries(n, 0.5).await?;
        let db_url = format!("sqlite://{}?mode=rwc", dir.path().join("ct.db").display());
        let p = Pipeline {
            dir,
            log,
            issued,
            db_url,
        };
        p.ingest().await?;
        Ok(p)
    }

    /// Runs ct-ingest once against the log.
    pub(crate) async fn ingest(&self) -> TestResult {
        let list = self.dir.path().join("log_list.json");
        std::fs::write(&list, self.log.log_list_json())?;
        let toml = format!(
            "log_list = {:?}\ndatabase_url = {:?}\n",
            list.display().to_string(),
            self.db_url
        );
        let config = ct_ingest::config::Config::from_toml(&toml)?;
        let summary = run_once(&config, &IngestOptions::default()).await?;
        for (_, r) in &summary.logs {
            r.as_ref().map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// The leaf hashes of every issued entry.
    pub(crate) fn hashes(&self) -> Vec<[u8; 32]> {
        self.issued.iter().map(|e| e.leaf_hash.to_bytes()).collect()
    }
}

/// For every filter of `filters`: the bits of some issued entries (ones)
/// and some other positions, read through `a` (and through `b`, if
/// given); they must agree with each other and with the filter built in
/// the clear from `hashes`. Returns the number of bits read.
pub(crate) async fn same_bits(
    hashes: &[[u8; 32]],
    filters: impl Iterator<Item = u32>,
    (pa, a): (&Prober, &Auditor),
    b: Option<(&Prober, &Auditor)>,
) -> Result<usize, BoxErr> {
    let m = pa.manifest();
    let mut read = 0;
    for f in filters {
        let mut clear = vec![false; m.filter.bits as usize];
        for h in hashes {
            clear[m.filter.bit(f, &(*h).into())? as usize] = true;
        }
        let mut bits: Vec<u64> = hashes
            .iter()
            .take(8)
            .map(|h| m.filter.bit(f, &(*h).into()))
            .collect::<Result<_, _>>()?;
        bits.extend((0..6).map(|i| (i * 53 + u64::from(f)) % m.filter.bits));
        for bit in bits {
            let (x, _) = a.query(&pa.prepare_bit(f, bit)?).await?;
            assert_eq!(x, clear[bit as usize], "filter {f} bit {bit}");
            if let Some((pb, b)) = b {
                let (y, _) = b.query(&pb.prepare_bit(f, bit)?).await?;
                assert_eq!(x, y, "filter {f} bit {bit}: sharded {x}, single server {y}");
            }
            read += 1;
        }
    }
    Ok(read)
}

/// A command for the binary with a clean environment for its
/// configuration (no `AUDITOR_*`, `AWS_*` or `DATABASE_URL` from the
/// caller) and plain logs.
pub(crate) fn auditor() -> Command {
    let mut cmd = Command::new(BIN);
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().into_owned();
        if k.starts_with("AUDITOR_")
            || k.starts_with("AWS_")
            || k == "DATABASE_URL"
            || k == "RUST_LOG"
        {
            cmd.env_remove(&k);
        }
    }
    cmd.env("RUST_LOG", "info").stdin(Stdio::null());
    cmd
}

/// A running child process whose stderr lines are collected by a thread;
/// killed (SIGKILL) on drop if still running.
pub(crate) struct Served {
    pub child: Child,
    lines: mpsc::Receiver<String>,
    pub log: Vec<String>,
}

impl Served {
    pub(crate) fn spawn(mut cmd: Command) -> Result<Served, BoxErr> {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let stderr = child.stderr.take().ok_or("no stderr pipe")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Served {
            child,
            lines,
            log: Vec::new(),
        })
    }

    /// Reads log lines until one contains `needle` (returned), or fails
    /// after `limit` or when stderr closes.
    pub(crate) fn wait_for(&mut self, needle: &str, limit: Duration) -> Result<String, BoxErr> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.log.push(line.clone());
                    if line.contains(needle) {
                        return Ok(line);
                    }
                }
                Err(e) => {
                    return Err(format!(
                        "no log line with {needle:?} ({e}); stderr so far:\n{}",
                        self.log.join("\n")
                    )
                    .into())
                }
            }
        }
    }

    /// The first line logged that contains `needle`, waiting for it if it
    /// has not been read yet.
    pub(crate) fn find(&mut self, needle: &str, limit: Duration) -> Result<String, BoxErr> {
        if let Some(l) = self.log.iter().find(|l| l.contains(needle)) {
            return Ok(l.clone());
        }
        self.wait_for(needle, limit)
    }

    /// The lines logged so far, without waiting.
    pub(crate) fn drain(&mut self) -> String {
        while let Ok(line) = self.lines.try_recv() {
            self.log.push(line);
        }
        self.log.join("\n")
    }

    /// Every line logged until stderr closed (the process has exited).
    pub(crate) fn rest(&mut self) -> String {
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.log.push(line);
        }
        self.log.join("\n")
    }

    /// SIGKILL, and reap.
    pub(crate) fn kill(&mut self) -> TestResult {
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Waits for `child` to exit, killing it after `limit`.
pub(crate) fn wait_with_timeout(child: &mut Child, limit: Duration) -> Result<ExitStatus, BoxErr> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("process did not exit within {limit:?}").into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `auditor-server listening addr=127.0.0.1:PORT` → `127.0.0.1:PORT`.
pub(crate) fn listening_addr(line: &str) -> Result<std::net::SocketAddr, BoxErr> {
    let addr = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("addr="))
        .ok_or_else(|| format!("no addr= in {line:?}"))?;
    Ok(addr.parse()?)
}

/// A free port on 127.0.0.1 (bound, then released for a child to bind).
pub(crate) fn free_port() -> Result<u16, BoxErr> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Writes `auditor.toml` into `dir` for a toy sharded fleet over
/// `entries` entries: the insecure toy parameter set, `filters` filters
/// two to a database, a 600 s grace, and a look at the object store every
/// second. Returns its path.
pub(crate) fn toy_fleet_config(
    dir: &std::path::Path,
    entries: usize,
    filters: u32,
) -> Result<std::path::PathBuf, BoxErr> {
    let filter_bits = audit_proto::filter::FilterSpec::capacity_for(entries as u64) * 8;
    let config = dir.join("auditor.toml");
    std::fs::write(
        &config,
        format!(
            "[epoch]\nparam_set = \"toy-insecure-d64\"\nallow_insecure_params = true\n\
             filters = {filters}\ndb_bits_target = {}\ngrace_seconds = 600\n\
             [schedule]\nreload_seconds = 1\n",
            2 * filter_bits
        ),
    )?;
    Ok(config)
}
