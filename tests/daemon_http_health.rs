//! `/healthz` tells a wedged loop from a working one, on the real daemon
//! with real sshd nodes. Wedged: the node's scripts never answer (a shim
//! that sleeps in front of every script, so the round waits on its SSH
//! command, whose own timeout is two minutes) and no SSH operation finishes
//! for longer than the allowance, here one second: 503 with the reason.
//! Healthy, with the default allowance: 200 during and after its rounds.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use support::daemon::*;
use support::fleet::TestFleet;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use winfleet::daemon::{self, Config};

/// GET `path`: the status and the body.
async fn fetch(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let text = String::from_utf8_lossy(&response).into_owned();
    let code = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, text.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_stuck_on_a_node_that_never_answers_makes_healthz_503() {
    let fleet = TestFleet::start(1);
    // Every script on the node hangs (far past the allowance; the SSH
    // command timeout, 120 s, is what would end it).
    fleet.nodes[0].shim("base64", "#!/bin/sh\nsleep 30\nexec /usr/bin/base64 \"$@\"\n");
    let remote = remote(&fleet, "");
    let config = Config { shutdown_timeout: Duration::from_secs(1), ..config(&remote) };
    let handle = daemon::start_with(config, None, pool(&fleet), Some(Duration::from_secs(1))).await.unwrap();
    let addr = handle.metrics_addr.unwrap();
    let mut answer = fetch(addr, "/healthz").await;
    for _ in 0..600 {
        if answer.0 == 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        answer = fetch(addr, "/healthz").await;
    }
    let (code, body) = answer;
    assert_eq!(code, 503, "a wedged round is not healthy: {body}");
    assert!(body.contains("wedged: the round has made no progress for"), "{body}");
    assert!(body.contains("allowance 1s"), "{body}");
    assert_eq!(fleet.nodes[0].connections(), 1, "the round is on the node, waiting for its script");
    stop(handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_whose_rounds_progress_is_healthy_during_and_after_them() {
    let fleet = TestFleet::start(2);
    let remote = remote(&fleet, "");
    let mut handle = start(&fleet, config(&remote)).await;
    let addr = handle.metrics_addr.unwrap();
    let during = fetch(addr, "/healthz").await;
    assert_eq!(during, (200, "ok".to_owned()), "while the first round runs");
    let record = next(&mut handle.records).await;
    assert_eq!(record.failed, 0, "{record:?}");
    assert_eq!(fetch(addr, "/healthz").await, (200, "ok".to_owned()), "waiting for the next poll");
    stop(handle).await;
}
