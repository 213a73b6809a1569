//! HTTP/1.1 connections: the accept loop, per-connection timeouts and the
//! connection cap (what `axum::serve` does not bound).
//!
//! * **Connection cap.** At most [`ConnLimits::max_connections`] connections
//!   are open at once. At the cap the server stops accepting until one
//!   closes: further connections wait in the kernel's listen backlog (they
//!   cost no file descriptor of the process) and are served in turn, as
//!   the timeouts below free slots.
//! * **Header timeout.** A request head must be complete within
//!   [`ConnLimits::header_timeout`] of its first byte — and, on a new
//!   connection, of the connection's opening. A connection that sends its
//!   head too slowly (or nothing at all) is closed.
//! * **Idle timeout.** After a response, a keep-alive connection is closed
//!   unless the next request starts within [`ConnLimits::idle_timeout`].
//!
//! While a request is being handled the connection has no deadline here:
//! the handler's own limits bound it (the query route's body and answer
//! timeouts, `crate::routes`). Closing a connection drops it; nothing
//! is in flight on it at that point.
//!
//! A connection the server closes after a response (`Connection: close`,
//! e.g. a 413 sent before a large body was read) is closed "lingering":
//! the server stops writing and discards what the client still sends, for
//! a second at most, so the client reads the response instead of a reset.
//!
//! Graceful shutdown stops accepting, lets requests in flight finish,
//! closes idle connections at once and waits until every connection is
//! closed (the timeouts bound the wait).

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, Semaphore};

/// Connection limits.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConnLimits {
    /// Open connections at most; at the cap no more are accepted until one
    /// closes.
    pub max_connections: usize,
    /// A request head must be complete this long after its first byte (on
    /// a new connection: after the connection opened).
    pub header_timeout: Duration,
    /// A keep-alive connection is closed this long after its last response
    /// unless a new request has started.
    pub idle_timeout: Duration,
}

/// "Not set" for the millisecond timestamps of [`Activity`].
const NONE: u64 = u64::MAX;

/// What one connection is doing, shared by its I/O wrapper, its service
/// and its watchdog. Times are milliseconds since `origin`.
#[derive(Debug)]
struct Activity {
    origin: Instant,
    /// Requests being handled.
    inflight: AtomicUsize,
    /// When the connection last became idle (opened, or a handler finished).
    idle_since: AtomicU64,
    /// First byte received while idle (the start of the next head).
    head_since: AtomicU64,
    /// Whether the connection has answered a request yet.
    served: AtomicBool,
    changed: Notify,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            origin: Instant::now(),
            inflight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(0),
            head_since: AtomicU64::new(NONE),
            served: AtomicBool::new(false),
            changed: Notify::new(),
        }
    }

    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    fn bytes_read(&self) {
        if self.inflight.load(Ordering::Acquire) == 0
            && self.head_since.load(Ordering::Acquire) == NONE
        {
            self.head_since.store(self.now_ms(), Ordering::Release);
            self.changed.notify_one();
        }
    }

    fn request_started(&self) {
        self.inflight.fetch_add(1, Ordering::AcqRel);
        self.head_since.store(NONE, Ordering::Release);
        self.changed.notify_one();
    }

    fn request_finished(&self) {
        self.idle_since.store(self.now_ms(), Ordering::Release);
        self.served.store(true, Ordering::Release);
        self.head_since.store(NONE, Ordering::Release);
        self.inflight.fetch_sub(1, Ordering::AcqRel);
        self.changed.notify_one();
    }

    /// When the connection must be closed unless something happens first
    /// (`None` while a request is handled).
    fn deadline(&self, limits: &ConnLimits) -> Option<Instant> {
        if self.inflight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let head = self.head_since.load(Ordering::Acquire);
        let at = if head != NONE {
            Duration::from_millis(head) + limits.header_timeout
        } else if !self.served.load(Ordering::Acquire) {
            limits.header_timeout
        } else {
            Duration::from_millis(self.idle_since.load(Ordering::Acquire)) + limits.idle_timeout
        };
        Some(self.origin + at)
    }
}

/// A TCP stream that reports received bytes to its [`Activity`].
struct Watched {
    stream: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.bytes_read();
        }
        r
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// The router as a hyper service that marks requests in flight.
#[derive(Clone)]
struct Tracked {
    router: axum::Router,
    activity: Arc<Activity>,
    /// The client's address (handlers read it as `ConnectInfo`).
    peer: Option<std::net::SocketAddr>,
}

/// Marks a request finished when dropped (also if the handler is
/// cancelled).
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.request_finished();
    }
}

impl hyper::service::Service<Request<Incoming>> for Tracked {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn call(&self, mut req: Request<Incoming>) -> Self::Future {
        if let Some(peer) = self.peer {
            req.extensions_mut()
                .insert(axum::extract::ConnectInfo(peer));
        }
        self.activity.request_started();
        let guard = InFlight(self.activity.clone());
        let mut router = self.router.clone();
        let fut = tower::Service::call(&mut router, req);
        Box::pin(async move {
            let resp = fut.await;
            drop(guard);
            resp
        })
    }
}

/// Serves `router` on `listener` under `limits` until `shutdown` resolves,
/// then drains (see the module docs). `open` tracks open connections.
pub(crate) async fn serve<F>(
    listener: TcpListener,
    router: axum::Router,
    limits: ConnLimits,
    open: prometheus::IntGauge,
    shutdown: F,
) where
    F: Future<Output = ()> + Send + 'static,
{
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut stop = stop_rx.clone();
    loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = stopped_signal(&mut stop) => break,
        };
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = stopped_signal(&mut stop) => break,
        };
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                // Out of file descriptors or similar: back off instead of
                // spinning; connections waiting stay in the backlog.
                tracing::error!(error = %e, "accepting a connection failed");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                    _ = stopped_signal(&mut stop) => break,
                }
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let stop = stop_rx.clone();
        let open = open.clone();
        tokio::spawn(async move {
            open.inc();
            serve_connection(stream, router, limits, stop).await;
            open.dec();
            drop(permit);
        });
    }
    drop(listener);
    // Every connection returns its permit when it closes.
    let _ = slots.acquire_many(limits.max_connections as u32).await;
}

/// Errors of one incoming connection that say nothing about the listener.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

async fn serve_connection(
    stream: TcpStream,
    router: axum::Router,
    limits: ConnLimits,
    mut stop: watch::Receiver<bool>,
) {
    let activity = Arc::new(Activity::new());
    let peer = stream.peer_addr().ok();
    let io = TokioIo::new(Watched {
        stream,
        activity: activity.clone(),
    });
    let service = Tracked {
        router,
        activity: activity.clone(),
        peer,
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    // hyper's own head timer (started when it begins waiting for a head) as
    // a backstop: it can only fire after the watchdog below would have.
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout + limits.idle_timeout)
        .keep_alive(true);
    let mut conn = builder.serve_connection(io, service);
    let (mut stopping, mut stopped) = (false, false);
    loop {
        if stopping && !stopped {
            stopped = true;
            Pin::new(&mut conn).graceful_shutdown();
        }
        let deadline = activity.deadline(&limits);
        tokio::select! {
            r = std::future::poll_fn(|cx| conn.poll_without_shutdown(cx)) => {
                match r {
                    Ok(()) => linger(conn.into_parts().io.into_inner().stream).await,
                    Err(e) => tracing::debug!(error = %e, "connection ended with an error"),
                }
                return;
            }
            _ = activity.changed.notified() => {}
            _ = sleep_until(deadline) => {
                if activity.deadline(&limits).is_some_and(|d| d <= Instant::now()) {
                    tracing::debug!("closing a connection: header or idle timeout");
                    return;
                }
            }
            _ = stopped_signal(&mut stop), if !stopping => stopping = true,
        }
    }
}

/// How long a closing connection keeps reading (and discarding) what the
/// client still sends, at most.
const LINGER: Duration = Duration::from_secs(1);
/// How much it reads so, at most.
const LINGER_BYTES: usize = 4 << 20;

/// Closes a connection the server is done with "lingering": sends FIN,
/// then reads and discards input until the client closes too (or
/// [`LINGER`] / [`LINGER_BYTES`] run out). Closing a socket with unread
/// input makes the kernel send RST, which can destroy the response the
/// client has not read yet — e.g. a 413 sent before a large body.
async fn linger(mut stream: TcpStream) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    if stream.shutdown().await.is_err() {
        return;
    }
    let mut buf = vec![0u8; 64 << 10];
    let mut left = LINGER_BYTES;
    let drain = async {
        while left > 0 {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = tokio::time::timeout(LINGER, drain).await;
}

/// Resolves once shutdown was requested (or the signal is gone).
async fn stopped_signal(stop: &mut watch::Receiver<bool>) {
    // The guard `wait_for` returns is dropped here, not held by callers.
    let _ = stop.wait_for(|s| *s).await;
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}
