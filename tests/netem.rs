//! The benches' network model (tests/support/netem.rs): bytes cross the
//! relay intact and in order, both ways, and the presets parse. The delay
//! and the rate are printed, not asserted (no timed assertions).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, missing_docs)]

#[path = "support/netem.rs"]
mod netem;

use std::io::{Read as _, Write as _};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

#[test]
fn bytes_cross_intact_and_in_order_both_ways() {
    let model = netem::Model { name: "test".into(), rtt: Duration::from_millis(20), mbit: 8.0 };
    let ip: IpAddr = [127, 0, 0, 1].into();
    let echo = TcpListener::bind((ip, 0)).unwrap();
    let upstream = echo.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = echo.accept().unwrap();
        let mut all = Vec::new();
        s.read_to_end(&mut all).unwrap();
        s.write_all(&all).unwrap();
    });
    let net = netem::Netem::start(&model, &[upstream]);
    let payload: Vec<u8> = (0..256 * 1024u32).map(|i| (i % 251) as u8).collect();
    let mut s = TcpStream::connect((ip, net.port)).unwrap();
    let start = Instant::now();
    s.write_all(&payload).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut back = Vec::new();
    s.read_to_end(&mut back).unwrap();
    let elapsed = start.elapsed();
    server.join().unwrap();
    assert_eq!(back.len(), payload.len(), "bytes lost or added");
    assert!(back == payload, "bytes changed or reordered");
    // 256 KiB each way at 8 Mbit/s is about 262 ms per direction, plus 20 ms.
    println!("{}: 256 KiB there and back in {:.0} ms", model.describe(), elapsed.as_secs_f64() * 1000.0);
    let probe = net.probe(1);
    println!("{}", probe.describe());
}

#[test]
fn presets_and_known_hosts() {
    let wan = netem::Model::preset("wan").unwrap();
    assert_eq!((wan.rtt, wan.mbit), (Duration::from_millis(40), 100.0));
    assert!(netem::Model::preset("moon").is_none());
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let net = netem::Netem::start(&wan, &[listener.local_addr().unwrap()]);
    let (from, to) = (dir.path().join("from"), dir.path().join("to"));
    std::fs::write(&from, "[127.0.0.1]:2222 ssh-ed25519 AAAA\n").unwrap();
    net.known_hosts(&from, 2222, &to);
    assert_eq!(std::fs::read_to_string(&to).unwrap(), format!("[127.0.0.1]:{} ssh-ed25519 AAAA\n", net.port));
}
