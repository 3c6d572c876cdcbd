//! Ports for the servers the tests start as child processes.
//!
//! Binding port 0 and releasing it hands out a port from the kernel's
//! ephemeral range, the same range every outgoing connection (curl, ssh,
//! containerd, the API clients) takes its local port from. Between the
//! release and the child's own bind, any such connection may take it, and
//! the child dies with "address already in use" (CI saw it once, for a
//! registry). These ports come from below the ephemeral range instead, where
//! no outgoing connection lands, and a counter shared by the process keeps
//! two tests of one binary from being handed the same one.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};

/// Below Linux's default ephemeral range (32768–60999) and above the
/// registered services most machines run.
const FIRST: u32 = 20_000;
const LAST: u32 = 32_000;

/// A port on 127.0.0.1 that was free a moment ago and that no outgoing
/// connection will take meanwhile.
pub fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let span = LAST - FIRST;
    // Each process starts at its own offset, so two test binaries running
    // at once (a bench beside the suite) rarely walk the same ports.
    let start = std::process::id().wrapping_mul(7919) % span;
    for _ in 0..span {
        let step = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (FIRST + (start + step) % span) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port on 127.0.0.1 between {FIRST} and {LAST}")
}
