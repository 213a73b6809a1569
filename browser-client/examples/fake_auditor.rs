//! A fake auditor for the extension's Node tests (browser-client/extension/
//! test/background.mjs): states a fill ratio and serves databases filled
//! otherwise, answering real YPIR queries; the next queries can be made to
//! fail. Prints `AUDITOR_URL=<url>` and runs until its standard input
//! closes.
//!
//! ```sh
//! cargo run -p browser-client --example fake_auditor -- --fill ones --claimed 0.117
//! ```
//! `--fill` is `ones`, `zeros` or a density in [0, 1]. `POST /fake/fail`
//! with `{"status": 503, "retry_after": 120, "count": 1}` makes the next
//! `count` queries answer that status.

#[path = "../tests/support/fake_auditor.rs"]
mod fake_auditor;

use std::io::Read as _;

use axum::http::{Method, StatusCode, Uri};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let fill: fake_auditor::Fill = match arg("--fill").unwrap_or_else(|| "0.117".into()).parse() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("fake_auditor: {e}");
            std::process::exit(2);
        }
    };
    let claimed: f64 = arg("--claimed")
        .and_then(|c| c.parse().ok())
        .filter(|c| (0.0..=0.125).contains(c))
        .unwrap_or(0.117);
    let fake = fake_auditor::start("127.0.0.1:0", claimed, fill).await;
    // The control port: scripted failures.
    let f = fake.clone();
    let control = axum::Router::new().fallback(move |method: Method, uri: Uri, body: String| {
        let f = f.clone();
        async move {
            if method != Method::POST || uri.path() != "/fake/fail" {
                return StatusCode::NOT_FOUND;
            }
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&body) else {
                return StatusCode::BAD_REQUEST;
            };
            let failure = fake_auditor::Failure {
                status: v["status"].as_u64().unwrap_or(503) as u16,
                retry_after: v["retry_after"].as_u64(),
            };
            let count = v["count"].as_u64().unwrap_or(1).min(1000) as usize;
            f.fail_next(&vec![failure; count]);
            StatusCode::NO_CONTENT
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let control_url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, control).await });
    println!("AUDITOR_URL={}", fake.url);
    println!("CONTROL_URL={control_url}");
    // Runs until standard input closes (the test ends).
    tokio::task::spawn_blocking(|| {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
    })
    .await
    .unwrap();
}
