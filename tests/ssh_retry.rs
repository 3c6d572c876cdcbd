//! The SSH pool retries a transient connect failure (with jittered
//! backoff) and gives up at once when told not to retry: a real sshd
//! behind a loopback relay that drops the first connection unanswered.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use support::fleet::TestFleet;
use tokio::net::{TcpListener, TcpStream};
use winfleet::dialect::Script;
use winfleet::ssh::{KnownHosts, Pool, Settings, Target, load_key};

/// A relay to `upstream` that closes its first connection at once; returns
/// its port and the number of connections it accepted.
async fn flaky_relay(upstream: (String, u16)) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            if count.fetch_add(1, Ordering::SeqCst) == 0 {
                drop(client);
                continue;
            }
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let mut server = TcpStream::connect(upstream).await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            });
        }
    });
    (port, accepted)
}

async fn echo(fleet: &TestFleet, retries: u32) -> (Result<Vec<u8>, String>, usize) {
    let node = &fleet.nodes[0];
    let (port, accepted) = flaky_relay((node.address.clone(), node.port)).await;
    // The relay's address must pin the node's host key.
    let host_key = std::fs::read_to_string(node.dir.join("host_ed25519.pub")).unwrap();
    let known_hosts = fleet.dir().join(format!("known_hosts_relay_{retries}"));
    std::fs::write(&known_hosts, format!("[127.0.0.1]:{port} {}\n", host_key.trim())).unwrap();
    let settings = Settings { retries, backoff: Duration::from_millis(10), ..Settings::default() };
    let pool = Pool::new(load_key(&fleet.key).unwrap(), KnownHosts::load(&known_hosts, false).unwrap(), settings);
    let target = Target { address: "127.0.0.1".into(), port, username: fleet.user.clone() };
    let script = Script { command: "sh", input: "echo retried\n".into() };
    let result = pool.run(&target, &script, true).await.map(|o| o.stdout).map_err(|e| e.to_string());
    pool.close().await;
    (result, accepted.load(Ordering::SeqCst))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_is_retried_and_without_retries_it_fails() {
    let fleet = TestFleet::start(1);
    let (result, accepted) = echo(&fleet, 2).await;
    assert_eq!(result.unwrap(), b"retried\n");
    assert_eq!(accepted, 2, "one drop, one retry that worked");
    let (result, accepted) = echo(&fleet, 0).await;
    assert!(result.is_err(), "{result:?}");
    assert_eq!(accepted, 1);
}
