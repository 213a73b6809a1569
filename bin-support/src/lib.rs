//! What the workspace's binaries (`auditor-server`, `ct-ingest`,
//! `audit-sim`, the demo) share, so that each is written once: where
//! their log lines go and how they are filtered, and the stop signal of a
//! long-running command. Only binaries depend on this crate; the
//! libraries, and everything that builds for the browser, do not (it
//! brings tokio's signal handling and tracing-subscriber).

/// Sends `tracing` events to stderr, filtered by `RUST_LOG` (the
/// `tracing_subscriber::EnvFilter` syntax, e.g. `info,ct_ingest=debug`),
/// else at `default` and above (`"info"`, `"warn"`). Colours only when
/// stderr is a terminal. Call once, first thing in `main`.
pub fn init_tracing(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

/// Resolves on the first Ctrl-C or (on Unix) SIGTERM, what `docker stop`,
/// Kubernetes and systemd send, with the signal's name for a log line.
pub async fn stop_requested() -> &'static str {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => "SIGINT",
        _ = term => "SIGTERM",
    }
}

#[cfg(test)]
mod tests {
    /// A SIGTERM sent to this process ends the wait.
    #[cfg(unix)]
    #[tokio::test]
    async fn sigterm_ends_the_wait() {
        // A listener of the test's own first: from here on SIGTERM no longer
        // ends the process, whenever the one under test is installed.
        let _guard =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).unwrap();
        let wait = tokio::spawn(super::stop_requested());
        let mut sent = false;
        for _ in 0..200 {
            if wait.is_finished() {
                break;
            }
            let pid = std::process::id().to_string();
            sent |= std::process::Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .is_ok_and(|s| s.success());
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(sent, "kill -TERM could not be run");
        assert_eq!(wait.await.unwrap(), "SIGTERM");
    }
}
