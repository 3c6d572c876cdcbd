//! Serving a router on a TCP listener within the limits a port reachable
//! from outside needs (issue 23, defect 7). `axum::serve` has no timeout and
//! no connection limit ("intentionally simple"), so 1,100 half-open
//! connections stayed open for good. Here:
//!
//! - at most [`Limits::max_connections`] connections are served at once: a
//!   permit is taken before `accept`, so at the limit new connections wait
//!   in the kernel's listen backlog, not in memory;
//! - a request's head must arrive within [`Limits::header_read_timeout`]
//!   (hyper's timer), counted from the moment the connection waits for it:
//!   on a new connection, and on a kept-alive one between requests, so it is
//!   also how long an idle kept-alive connection stays open;
//! - the body, and the answer, must be done within
//!   [`Limits::request_timeout`] (408 otherwise);
//! - a connection that makes no progress for [`Limits::idle_timeout`] while
//!   the server waits on its peer is closed (a client that stops reading
//!   its answer): [`IdleIo`].
//!
//! HTTP/1.1 only: an HTTP/2 connection would bring its own flow of streams
//! past these limits. It decides nothing about requests: that is the
//! router's.

use std::io;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;

/// What one HTTP server allows its peers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once; more wait to be accepted.
    pub max_connections: u32,
    /// Time to send a request's head, from when the connection waits for
    /// one (a kept-alive connection is closed after this long idle).
    pub header_read_timeout: Duration,
    /// Time to send the body and be answered.
    pub request_timeout: Duration,
    /// Time a connection may make no progress while the server waits on
    /// it; longer than the request timeout, which covers a slow handler.
    pub idle_timeout: Duration,
}

impl Default for Limits {
    /// 1,024 connections (1,000 slow ones leave room for a webhook and the
    /// probes); a head within 10 s; a request within 30 s (a forwarded
    /// webhook waits up to 5 s for the leader); 60 s without progress.
    fn default() -> Self {
        Self {
            max_connections: 1024,
            header_read_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

/// How often "at the connection limit" is logged at most, under a flood.
const LIMIT_WARNING_EVERY: Duration = Duration::from_secs(60);

/// Serves `router` until `shutdown` is cancelled; then stops accepting,
/// lets requests in flight finish (each within the limits) and returns.
pub(super) async fn run(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: CancellationToken,
) -> io::Result<()> {
    let router = router.layer(middleware::from_fn_with_state(limits.request_timeout, within_request_timeout));
    let permits = Arc::new(Semaphore::new(limits.max_connections as usize));
    let mut warned: Option<Instant> = None;
    loop {
        let permit = match Arc::clone(&permits).try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                if warned.is_none_or(|at| at.elapsed() >= LIMIT_WARNING_EVERY) {
                    warned = Some(Instant::now());
                    tracing::warn!(limit = limits.max_connections, "at the connection limit: new connections wait");
                }
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    permit = Arc::clone(&permits).acquire_owned() => match permit {
                        Ok(permit) => permit,
                        Err(_) => break,
                    },
                }
            }
        };
        let stream = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(e) => {
                    accept_failed(&e).await;
                    continue;
                }
            },
        };
        tokio::spawn(connection(stream, router.clone(), limits, shutdown.clone(), permit));
    }
    drop(listener);
    // Every connection holds a permit until it ends: all of them back is
    // every connection done.
    let _all = permits.acquire_many(limits.max_connections).await;
    Ok(())
}

/// One connection, until it ends or, after `shutdown`, its request in
/// flight is answered.
async fn connection(
    stream: TcpStream,
    router: Router,
    limits: Limits,
    shutdown: CancellationToken,
    _permit: OwnedSemaphorePermit,
) {
    let io = TokioIo::new(IdleIo::new(stream, limits.idle_timeout));
    let mut builder = Builder::new(TokioExecutor::new()).http1_only();
    builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
    let mut conn = pin!(builder.serve_connection(io, TowerToHyperService::new(router)));
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        // A timeout, a reset, a malformed request: the peer's affair.
        tracing::debug!(error = %e, "HTTP connection ended");
    }
}

/// Waits a little after an `accept` that failed: a full file table
/// (EMFILE) would otherwise spin.
async fn accept_failed(e: &io::Error) {
    let peer_gone = matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionRefused
    );
    if peer_gone {
        tracing::debug!(error = %e, "a connection was gone before it was accepted");
    } else {
        tracing::warn!(error = %e, "accepting a connection failed; retrying in 1s");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Answers 408 when the body and the handler take longer than `timeout`.
async fn within_request_timeout(State(timeout): State<Duration>, request: Request, next: Next) -> Response {
    match tokio::time::timeout(timeout, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            tracing::info!(timeout_secs = timeout.as_secs_f64(), "request not complete within the request timeout");
            (StatusCode::REQUEST_TIMEOUT, [(header::CONNECTION, "close")], "request timeout").into_response()
        }
    }
}

/// A connection's socket that fails with `TimedOut` once it has made no
/// progress (no byte read or written) for `idle` while the server waits on
/// it. Its timer is only polled when a read or write is pending, so a
/// connection the server is not waiting on is not timed here.
struct IdleIo<T> {
    io: T,
    idle: Duration,
    progress: Instant,
    timer: Pin<Box<Sleep>>,
}

impl<T> IdleIo<T> {
    fn new(io: T, idle: Duration) -> Self {
        let progress = Instant::now();
        Self { io, idle, progress, timer: Box::pin(tokio::time::sleep_until(progress + idle)) }
    }

    /// Pending until `idle` has passed since the last progress; then the
    /// error that ends the connection.
    fn poll_idle(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let deadline = self.progress + self.idle;
        if self.timer.deadline() != deadline {
            self.timer.as_mut().reset(deadline);
        }
        self.timer
            .as_mut()
            .poll(cx)
            .map(|()| io::Error::new(io::ErrorKind::TimedOut, "no progress within the idle timeout"))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for IdleIo<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Pending => this.poll_idle(cx).map(Err),
            ready => {
                if buf.filled().len() > before {
                    this.progress = Instant::now();
                }
                ready
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for IdleIo<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let written = Pin::new(&mut this.io).poll_write(cx, data);
        this.after_write(cx, written)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let written = Pin::new(&mut this.io).poll_write_vectored(cx, data);
        this.after_write(cx, written)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

impl<T> IdleIo<T> {
    fn after_write(&mut self, cx: &mut Context<'_>, written: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        match written {
            Poll::Pending => self.poll_idle(cx).map(Err),
            Poll::Ready(Ok(n)) if n > 0 => {
                self.progress = Instant::now();
                Poll::Ready(Ok(n))
            }
            ready => ready,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn a_peer_that_stops_reading_fails_the_write_after_the_idle_timeout() {
        let (ours, mut theirs) = tokio::io::duplex(16);
        let mut io = IdleIo::new(ours, Duration::from_secs(60));
        tokio::time::sleep(Duration::from_secs(59)).await;
        io.write_all(&[b'x'; 16]).await.unwrap();
        // The peer reads, so that write was progress: the clock restarts.
        let mut sixteen = [0; 16];
        theirs.read_exact(&mut sixteen).await.unwrap();
        let started = Instant::now();
        let error = io.write_all(&[b'x'; 64]).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(60), "counted from the last progress");
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_peer_fails_the_read_after_the_idle_timeout_and_a_talking_one_does_not() {
        let (ours, mut theirs) = tokio::io::duplex(64);
        let mut io = IdleIo::new(ours, Duration::from_secs(10));
        let mut byte = [0; 1];
        for _ in 0..3 {
            tokio::time::sleep(Duration::from_secs(9)).await;
            theirs.write_all(b"y").await.unwrap();
            io.read_exact(&mut byte).await.unwrap();
        }
        let error = io.read_exact(&mut byte).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    }
}
