//! The limits of the daemon's HTTP servers (issue 23, defect 7): 1,100
//! half-open connections used to stay open for good. Real servers on
//! loopback sockets, read with a minimal HTTP/1.1 client; every wait is
//! bounded, and only a generous bound is ever asserted on time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use axum::Router;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use winfleet::daemon::http::health::Liveness;
use winfleet::daemon::http::metrics::Metrics;
use winfleet::daemon::http::{HttpState, Limits, ops_router, serve_with, webhook_router};
use winfleet::daemon::triggers::Trigger;
use winfleet::daemon::triggers::webhook::WebhookConfig;

const SECRET: &[u8] = b"fleet-webhook-secret";
const MAIN_PUSH: &[u8] = br#"{"ref":"refs/heads/main","after":"4b825dc6"}"#;
/// The bound on anything that should happen at once, or after a short timeout.
const GENEROUS: Duration = Duration::from_secs(15);

fn state() -> (HttpState, UnboundedReceiver<Trigger>) {
    let (triggers, received) = unbounded_channel();
    let state = HttpState {
        metrics: Arc::new(Metrics::new()),
        ready: Arc::new(AtomicBool::new(true)),
        liveness: Arc::new(Liveness::new(Duration::from_secs(60), Default::default())),
        webhook: Some(Arc::new(WebhookConfig::new(SECRET.to_vec(), "main"))),
        triggers,
        forward: None,
        suspension: Default::default(),
        control: None,
        git_sync: None,
    };
    (state, received)
}

fn signature(body: &[u8]) -> String {
    let tag = <Hmac<Sha256> as KeyInit>::new_from_slice(SECRET).unwrap().chain_update(body).finalize().into_bytes();
    format!("sha256={}", tag.iter().map(|byte| format!("{byte:02x}")).collect::<String>())
}

struct Server {
    addr: SocketAddr,
    shutdown: CancellationToken,
    task: JoinHandle<std::io::Result<()>>,
}

impl Server {
    async fn start(router: Router, limits: Limits) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(serve_with(listener, router, limits, shutdown.clone()));
        Self { addr, shutdown, task }
    }

    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(GENEROUS, self.task).await.expect("serve ends").unwrap().unwrap();
    }

    /// A connection that sent part of a request head and nothing more.
    async fn slow(&self) -> TcpStream {
        let mut stream = TcpStream::connect(self.addr).await.unwrap();
        stream.write_all(b"POST /webhook HTTP/1.1\r\nhost: winfleet\r\nx-github-event: pu").await.unwrap();
        stream
    }
}

/// Sends `request` on a new connection; the status and body of the answer
/// (the server closes: every request says `connection: close`).
async fn exchange(addr: SocketAddr, request: Vec<u8>) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(&request).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|code| code.parse().ok()).unwrap_or(0);
    (status, text.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()).unwrap_or_default())
}

fn healthz() -> Vec<u8> {
    b"GET /healthz HTTP/1.1\r\nhost: winfleet\r\nconnection: close\r\n\r\n".to_vec()
}

fn good_webhook() -> Vec<u8> {
    let head = format!(
        "POST /webhook HTTP/1.1\r\nhost: winfleet\r\nconnection: close\r\ncontent-type: application/json\r\n\
         x-github-event: push\r\nx-hub-signature-256: {}\r\ncontent-length: {}\r\n\r\n",
        signature(MAIN_PUSH),
        MAIN_PUSH.len()
    );
    [head.as_bytes(), MAIN_PUSH].concat()
}

/// Whether the server closed `stream` (end of file or reset) within the bound.
async fn closed_by_the_server(stream: &mut TcpStream, bound: Duration) -> bool {
    let mut rest = Vec::new();
    match tokio::time::timeout(bound, stream.read_to_end(&mut rest)).await {
        Ok(Ok(_)) | Ok(Err(_)) => true,
        Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_23_a_good_webhook_and_healthz_are_answered_while_1000_slow_connections_are_held() {
    let (state, mut triggers) = state();
    // The default connection limit; a short header-read timeout, so the
    // slow connections are seen closed without waiting the default 10 s.
    let limits = Limits { header_read_timeout: Duration::from_secs(3), ..Limits::default() };
    let ops = Server::start(ops_router(state.clone()), limits).await;
    let hooks = Server::start(webhook_router(state), limits).await;
    let mut slow = Vec::new();
    for _ in 0..1000 {
        slow.push(ops.slow().await);
        slow.push(hooks.slow().await);
    }

    let (status, body) = tokio::time::timeout(GENEROUS, exchange(ops.addr, healthz())).await.expect("healthz");
    assert_eq!((status, body.as_str()), (200, "ok"));
    let (status, body) = tokio::time::timeout(GENEROUS, exchange(hooks.addr, good_webhook())).await.expect("webhook");
    assert_eq!((status, body.as_str()), (202, "accepted"));
    assert!(matches!(triggers.try_recv(), Ok(Trigger::Webhook { .. })));

    // The header-read timeout closes every one of them.
    let all_closed = async {
        for stream in &mut slow {
            assert!(closed_by_the_server(stream, GENEROUS).await, "a slow connection is still open");
        }
    };
    tokio::time::timeout(GENEROUS * 2, all_closed).await.expect("the slow connections are closed");
    ops.stop().await;
    hooks.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_23_a_connection_over_the_limit_waits_until_one_is_free() {
    let (state, _triggers) = state();
    let limits = Limits { max_connections: 4, header_read_timeout: Duration::from_secs(60), ..Limits::default() };
    let ops = Server::start(ops_router(state), limits).await;
    let mut slow = Vec::new();
    for _ in 0..4 {
        slow.push(ops.slow().await);
    }
    let mut waiting = tokio::spawn(exchange(ops.addr, healthz()));
    // Not served while the four are held (it waits in the listen backlog).
    assert!(tokio::time::timeout(Duration::from_millis(500), &mut waiting).await.is_err(), "served over the limit");
    drop(slow.pop());
    let (status, _) = tokio::time::timeout(GENEROUS, waiting).await.expect("served once one is free").unwrap();
    assert_eq!(status, 200);
    drop(slow);
    ops.stop().await;
}

#[tokio::test]
async fn issue_23_a_request_whose_body_never_arrives_is_answered_408_after_the_request_timeout() {
    let (state, mut triggers) = state();
    let limits = Limits { request_timeout: Duration::from_millis(500), ..Limits::default() };
    let hooks = Server::start(webhook_router(state), limits).await;
    let mut request = good_webhook();
    request.truncate(request.len() - 10);
    let mut stream = TcpStream::connect(hooks.addr).await.unwrap();
    stream.write_all(&request).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(GENEROUS, stream.read_to_end(&mut answer)).await.expect("answered").unwrap();
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(triggers.try_recv().is_err(), "no round");
    hooks.stop().await;
}

#[tokio::test]
async fn issue_23_an_idle_kept_alive_connection_is_closed() {
    let (state, _triggers) = state();
    let limits = Limits { header_read_timeout: Duration::from_millis(500), ..Limits::default() };
    let ops = Server::start(ops_router(state), limits).await;
    let mut stream = TcpStream::connect(ops.addr).await.unwrap();
    stream.write_all(b"GET /healthz HTTP/1.1\r\nhost: winfleet\r\n\r\n").await.unwrap();
    let mut answer = vec![0; 4096];
    let read = tokio::time::timeout(GENEROUS, stream.read(&mut answer)).await.expect("answered").unwrap();
    assert!(String::from_utf8_lossy(&answer[..read]).starts_with("HTTP/1.1 200"));
    assert!(closed_by_the_server(&mut stream, GENEROUS).await, "the idle connection is closed");
    ops.stop().await;
}
