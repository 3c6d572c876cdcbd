//! The daemon's HTTP side through its real routers: the probes, `/metrics`
//! and the webhook receiver, served by `serve` on loopback sockets and read
//! with a minimal HTTP/1.1 client. The body limit is driven in-process
//! (tower's `oneshot`), because a server that answers 413 without reading a
//! 2 MiB upload resets the socket, which can swallow the answer on loopback.
//!
//! What proves a round was (not) requested is the trigger channel itself:
//! `try_recv` after the response is in hand, since the handler sends before
//! it answers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;
use winfleet::daemon::http::health::Liveness;
use winfleet::daemon::http::metrics::Metrics;
use winfleet::daemon::http::{HttpState, OPENMETRICS_CONTENT_TYPE, ops_router, serve, webhook_router};
use winfleet::daemon::triggers::Trigger;
use winfleet::daemon::triggers::webhook::{MAX_BODY_BYTES, WebhookConfig};

const SECRET: &[u8] = b"fleet-webhook-secret";
const MAIN_PUSH: &[u8] = br#"{"ref":"refs/heads/main","after":"4b825dc6"}"#;

fn state(webhook: Option<WebhookConfig>) -> (HttpState, UnboundedReceiver<Trigger>) {
    let (triggers, received) = unbounded_channel();
    let state = HttpState {
        metrics: Arc::new(Metrics::new()),
        ready: Arc::new(AtomicBool::new(false)),
        liveness: Arc::new(Liveness::new(Duration::from_secs(60), Default::default())),
        webhook: webhook.map(Arc::new),
        triggers,
        forward: None,
        suspension: Default::default(),
        control: None,
        git_sync: None,
    };
    (state, received)
}

fn configured() -> (HttpState, UnboundedReceiver<Trigger>) {
    state(Some(WebhookConfig::new(SECRET.to_vec(), "main")))
}

fn sign(secret: &[u8], body: &[u8]) -> String {
    let tag = <Hmac<Sha256> as KeyInit>::new_from_slice(secret).unwrap().chain_update(body).finalize().into_bytes();
    format!("sha256={}", tag.iter().map(|byte| format!("{byte:02x}")).collect::<String>())
}

/// A router served on an ephemeral loopback port until `shutdown`.
struct Server {
    addr: SocketAddr,
    shutdown: CancellationToken,
    task: JoinHandle<std::io::Result<()>>,
}

impl Server {
    async fn start(router: Router) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(serve(listener, router, shutdown.clone()));
        Self { addr, shutdown, task }
    }

    async fn get(&self, path: &str) -> Response {
        let mut stream = TcpStream::connect(self.addr).await.unwrap();
        send(&mut stream, "GET", path, &[("connection", "close")], b"").await;
        read_response(&mut BufReader::new(stream)).await
    }

    async fn post(&self, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Response {
        let mut stream = TcpStream::connect(self.addr).await.unwrap();
        let mut all = vec![("connection", "close"), ("content-type", "application/json")];
        all.extend_from_slice(headers);
        send(&mut stream, "POST", path, &all, body).await;
        read_response(&mut BufReader::new(stream)).await
    }

    async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.unwrap().unwrap();
    }
}

#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }
}

async fn send(stream: &mut TcpStream, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) {
    let mut head = format!("{method} {path} HTTP/1.1\r\nhost: winfleet\r\ncontent-length: {}\r\n", body.len());
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
}

/// One response, read by its content-length (so keep-alive connections work).
async fn read_response(reader: &mut BufReader<TcpStream>) -> Response {
    let mut line = String::new();
    reader.read_line(&mut line).await.unwrap();
    let status = line.split_whitespace().nth(1).and_then(|code| code.parse().ok()).expect(&line);
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line).await.unwrap();
        let Some((name, value)) = line.trim_end().split_once(':') else { break };
        headers.push((name.trim().to_owned(), value.trim().to_owned()));
    }
    let mut response = Response { status, headers, body: String::new() };
    let length: usize = response.header("content-length").expect("content-length").parse().unwrap();
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await.unwrap();
    response.body = String::from_utf8(body).unwrap();
    response
}

fn github_push(signature: &str) -> [(&'static str, &str); 2] {
    [("x-hub-signature-256", signature), ("x-github-event", "push")]
}

#[tokio::test]
async fn a_bad_signature_is_refused_and_starts_no_round() {
    let (state, mut triggers) = configured();
    let server = Server::start(webhook_router(state)).await;

    let wrong = sign(b"guessed-secret", MAIN_PUSH);
    let response = server.post("/webhook", &github_push(&wrong), MAIN_PUSH).await;
    assert_eq!((response.status, response.body.as_str()), (401, "unauthorized"));
    let hex = wrong.trim_start_matches("sha256=");
    assert!(!response.body.contains(hex) && !response.headers.iter().any(|(_, value)| value.contains(hex)));

    let unsigned = server.post("/webhook", &[("x-github-event", "push")], MAIN_PUSH).await;
    assert_eq!(unsigned.status, 401);
    let wrong_token =
        server.post("/", &[("x-gitlab-token", "fleet"), ("x-gitlab-event", "Push Hook")], MAIN_PUSH).await;
    assert_eq!(wrong_token.status, 401);

    assert_eq!(triggers.try_recv(), Err(TryRecvError::Empty));
    server.stop().await;
}

#[tokio::test]
async fn a_signed_push_to_the_tracked_branch_sends_exactly_one_webhook_trigger() {
    let (state, mut triggers) = configured();
    let server = Server::start(webhook_router(state)).await;

    let response = server.post("/webhook", &github_push(&sign(SECRET, MAIN_PUSH)), MAIN_PUSH).await;
    assert_eq!((response.status, response.body.as_str()), (202, "accepted"));
    assert!(matches!(triggers.try_recv(), Ok(Trigger::Webhook { .. })));
    assert_eq!(triggers.try_recv(), Err(TryRecvError::Empty));

    // The generic signer on `POST /`, with an empty body.
    let response = server.post("/", &[("x-winfleet-signature", &sign(SECRET, b""))], b"").await;
    assert_eq!(response.status, 202);
    assert!(matches!(triggers.try_recv(), Ok(Trigger::Webhook { .. })));
    assert_eq!(triggers.try_recv(), Err(TryRecvError::Empty));
    server.stop().await;
}

#[tokio::test]
async fn pings_other_branches_and_malformed_bodies_start_no_round() {
    let (state, mut triggers) = configured();
    let server = Server::start(webhook_router(state)).await;

    let ping = br#"{"zen":"Design for failure.","hook_id":1}"#;
    let headers = [("x-hub-signature-256", sign(SECRET, ping)), ("x-github-event", "ping".to_owned())];
    let headers: Vec<_> = headers.iter().map(|(name, value)| (*name, value.as_str())).collect();
    let response = server.post("/webhook", &headers, ping).await;
    assert_eq!((response.status, response.body.as_str()), (200, "pong"));

    let dev = br#"{"ref":"refs/heads/dev"}"#;
    let response = server.post("/webhook", &github_push(&sign(SECRET, dev)), dev).await;
    assert_eq!(response.status, 202);
    assert!(response.body.contains("refs/heads/dev") && response.body.contains("main"), "{}", response.body);

    let broken = b"{\"ref\": ";
    let response = server.post("/webhook", &github_push(&sign(SECRET, broken)), broken).await;
    assert_eq!(response.status, 400, "{}", response.body);

    assert_eq!(triggers.try_recv(), Err(TryRecvError::Empty));
    server.stop().await;
}

#[tokio::test]
async fn a_huge_signed_ref_is_answered_cut_with_its_size_issue_35() {
    let (state, mut triggers) = configured();
    let server = Server::start(webhook_router(state)).await;

    let body = format!("{{\"ref\":\"refs/heads/\\u0007{}\"}}", "x".repeat(900_000)).into_bytes();
    let response = server.post("/webhook", &github_push(&sign(SECRET, &body)), &body).await;
    assert_eq!(response.status, 202);
    assert!(response.body.len() < 1_000, "{} bytes answered", response.body.len());
    assert!(response.body.contains("refs/heads/<U+0007>xxx"), "{}", response.body);
    assert!(response.body.contains("(900012 characters)"), "{}", response.body);
    assert_eq!(triggers.try_recv(), Err(TryRecvError::Empty));
    server.stop().await;
}

#[tokio::test]
async fn without_a_webhook_secret_every_webhook_is_refused() {
    let (state, mut triggers) = state(None);
    let server = Server::start(webhook_router(state)).await;
    let response = server.post("/webhook", &[("x-winfleet-signature", &sign(b"", b""))], b"").await;
    assert_eq!(response.status, 401);
    assert_eq!(triggers.try_recv(), Err(TryRecvError::Empty));
    server.stop().await;
}

async fn post_in_process(router: Router, headers: &[(&str, &str)], body: Body) -> (u16, String) {
    let mut request = axum::http::Request::post("/webhook");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = router.oneshot(request.body(body).unwrap()).await.unwrap();
    let status = response.status().as_u16();
    let body = axum::body::to_bytes(response.into_body(), 4096).await.unwrap();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

#[tokio::test]
async fn a_body_over_one_mebibyte_is_refused_with_413_and_starts_no_round() {
    let (state, mut triggers) = configured();
    let router = webhook_router(state.clone());
    // Correctly signed, so only the size can be what is refused.
    let big = vec![b' '; 2 * 1024 * 1024];
    let signature = sign(SECRET, &big);
    let headers = [("x-winfleet-signature", signature.as_str())];

    let (status, body) = post_in_process(router.clone(), &headers, Body::from(big.clone())).await;
    assert_eq!((status, body.as_str()), (413, "body larger than 1 MiB"));

    // Streamed without a content-length: the limit stops the read itself.
    let chunks: Vec<Result<Bytes, std::io::Error>> =
        big.chunks(64 * 1024).map(|chunk| Ok(Bytes::copy_from_slice(chunk))).collect();
    let (status, _) = post_in_process(router.clone(), &headers, Body::from_stream(futures::stream::iter(chunks))).await;
    assert_eq!(status, 413);
    assert_eq!(triggers.try_recv(), Err(TryRecvError::Empty));

    // One byte over the limit is refused, exactly 1 MiB is still accepted.
    let over = vec![b' '; MAX_BODY_BYTES + 1];
    let signature = sign(SECRET, &over);
    let (status, _) = post_in_process(router.clone(), &[("x-winfleet-signature", &signature)], Body::from(over)).await;
    assert_eq!(status, 413);
    assert_eq!(triggers.try_recv(), Err(TryRecvError::Empty));

    let limit = vec![b' '; MAX_BODY_BYTES];
    let signature = sign(SECRET, &limit);
    let (status, _) = post_in_process(router, &[("x-winfleet-signature", &signature)], Body::from(limit)).await;
    assert_eq!(status, 202);
    assert!(matches!(triggers.try_recv(), Ok(Trigger::Webhook { .. })));

    let metrics = state.metrics.encode();
    assert!(metrics.contains("winfleet_webhook_requests_total{result=\"too_large\"} 3"), "{metrics}");
}

#[tokio::test]
async fn readyz_turns_ready_when_the_daemon_sets_the_flag() {
    let (state, _triggers) = configured();
    let ready = Arc::clone(&state.ready);
    let server = Server::start(ops_router(state)).await;

    let health = server.get("/healthz").await;
    assert_eq!((health.status, health.body.as_str()), (200, "ok"));
    let not_ready = server.get("/readyz").await;
    assert_eq!((not_ready.status, not_ready.body.as_str()), (503, "not ready: waiting for the first successful fetch"));
    ready.store(true, Ordering::Release);
    let response = server.get("/readyz").await;
    assert_eq!((response.status, response.body.as_str()), (200, "ready"));
    server.stop().await;
}

#[tokio::test]
async fn metrics_count_the_webhook_requests_by_result() {
    let (state, _triggers) = configured();
    let ops = Server::start(ops_router(state.clone())).await;
    let hooks = Server::start(webhook_router(state)).await;

    hooks.post("/webhook", &github_push(&sign(SECRET, MAIN_PUSH)), MAIN_PUSH).await;
    hooks.post("/webhook", &github_push(&sign(b"wrong", MAIN_PUSH)), MAIN_PUSH).await;
    hooks.post("/webhook", &[], MAIN_PUSH).await;
    let other = br#"{"ref":"refs/heads/dev"}"#;
    hooks.post("/webhook", &github_push(&sign(SECRET, other)), other).await;
    hooks.post("/webhook", &github_push(&sign(SECRET, b"[")), b"[").await;

    let response = ops.get("/metrics").await;
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some(OPENMETRICS_CONTENT_TYPE));
    for line in [
        "winfleet_webhook_requests_total{result=\"accepted\"} 1",
        "winfleet_webhook_requests_total{result=\"unauthorized\"} 2",
        "winfleet_webhook_requests_total{result=\"ignored\"} 1",
        "winfleet_webhook_requests_total{result=\"bad_request\"} 1",
        "winfleet_webhook_requests_total{result=\"too_large\"} 0",
    ] {
        assert!(response.body.lines().any(|l| l == line), "missing {line:?} in:\n{}", response.body);
    }
    assert!(!response.body.contains("fleet-webhook-secret"));
    assert!(response.body.ends_with("# EOF\n"));
    hooks.stop().await;
    ops.stop().await;
}

#[tokio::test]
async fn cancelling_the_token_ends_serve_even_with_an_idle_keep_alive_connection() {
    let (state, _triggers) = configured();
    let server = Server::start(ops_router(state)).await;

    let mut reader = BufReader::new(TcpStream::connect(server.addr).await.unwrap());
    send(reader.get_mut(), "GET", "/healthz", &[], b"").await;
    assert_eq!(read_response(&mut reader).await.status, 200);

    // The connection stays open and idle; graceful shutdown must close it.
    server.stop().await;
    let mut rest = Vec::new();
    assert_eq!(reader.read_to_end(&mut rest).await.unwrap(), 0);
}
