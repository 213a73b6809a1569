//! No output of the `auditor-server` binary shows a database password,
//! whatever the URL looks like and wherever it comes from: a malformed
//! scheme (`postgres//…`), a password with an unencoded `#` or `/` (which
//! the URL parser reads as the end of the authority), and `?password=…` in
//! an otherwise valid URL (logged at start-up by `serve`, refused by the
//! unreachable server), each from the configuration file, the environment
//! and the `--database-url` flag.
#![cfg(unix)]

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{auditor, wait_with_timeout, BoxErr, Served, TestResult};

/// The password in every URL, in pieces so that a partial leak shows too.
const PW: &str = "Zq9kX";

/// The URLs under test, each with `PW` in its password, and whether it
/// parses (then a build fails on the connection, not the URL).
fn urls() -> Vec<(String, bool)> {
    vec![
        (format!("postgres//ct:{PW}@127.0.0.1:1/ct"), false),
        (format!("postgres://ct:{PW}#1@127.0.0.1:1/ct"), false),
        (format!("postgres://ct:{PW}/1@127.0.0.1:1/ct"), false),
        (format!("postgres://ct@127.0.0.1:1/ct?password={PW}"), true),
    ]
}

/// How the URL reaches the binary.
#[derive(Clone, Copy, Debug)]
enum Source {
    File,
    Env,
    Flag,
}

fn command(
    dir: &std::path::Path,
    args: &[&str],
    url: &str,
    source: Source,
) -> Result<std::process::Command, BoxErr> {
    let config = dir.join("auditor.toml");
    let mut toml = String::from("[schedule]\nbuild_if_missing = false\n");
    if let Source::File = source {
        toml = format!("database_url = {url:?}\n{toml}");
    }
    std::fs::write(&config, toml)?;
    let mut cmd = auditor();
    cmd.args(args)
        .arg("--config")
        .arg(&config)
        .arg("--epoch-dir")
        .arg(dir.join("epochs"));
    match source {
        Source::File => {}
        Source::Env => {
            cmd.env("AUDITOR_DATABASE_URL", url);
        }
        Source::Flag => {
            cmd.args(["--database-url", url]);
        }
    }
    Ok(cmd)
}

/// `build-epoch` fails (malformed URL, or nothing listening) and says so
/// without the password.
#[test]
fn build_epoch_errors_are_redacted() -> TestResult {
    let dir = tempfile::tempdir()?;
    for (url, parses) in urls() {
        for source in [Source::File, Source::Env, Source::Flag] {
            let mut child = command(dir.path(), &["build-epoch"], &url, source)?
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()?;
            let status = wait_with_timeout(&mut child, Duration::from_secs(60))?;
            let mut out = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().ok_or("stderr")?, &mut out)?;
            std::io::Read::read_to_string(&mut child.stdout.take().ok_or("stdout")?, &mut out)?;
            let what = format!("{url} from {source:?}");
            assert_eq!(status.code(), Some(1), "{what}: {status}\n{out}");
            assert!(!out.contains(PW), "{what}: password shown:\n{out}");
            assert!(
                out.contains("***"),
                "{what}: the URL is not shown redacted:\n{out}"
            );
            if parses {
                assert!(out.to_lowercase().contains("refused"), "{what}:\n{out}");
            } else {
                assert!(out.contains("database_url"), "{what}:\n{out}");
            }
            assert!(!out.contains("panicked"), "{what}:\n{out}");
        }
    }
    Ok(())
}

/// `serve` logs the database URL at start-up: redacted, from each source.
/// A malformed one is refused before listening, redacted.
#[test]
fn serve_logs_are_redacted() -> TestResult {
    let dir = tempfile::tempdir()?;
    for (url, parses) in urls() {
        for source in [Source::File, Source::Env, Source::Flag] {
            let what = format!("{url} from {source:?}");
            let cmd = command(
                dir.path(),
                &["serve", "--bind", "127.0.0.1:0"],
                &url,
                source,
            )?;
            let mut served = Served::spawn(cmd)?;
            if parses {
                let line = served.wait_for("auditor-server starting", Duration::from_secs(60))?;
                assert!(line.contains("password=***"), "{what}: {line}");
                served.wait_for("listening", Duration::from_secs(60))?;
                served.kill()?;
            }
            let log = served.rest();
            assert!(!log.contains(PW), "{what}: password shown:\n{log}");
            if !parses {
                assert!(!log.contains("listening"), "{what}:\n{log}");
                assert!(log.contains("***"), "{what}:\n{log}");
            }
        }
    }
    Ok(())
}
