//! A network model for the benches (issue 30): a TCP relay between winfleet
//! and each node's sshd that adds a fixed one-way delay per direction (half
//! the round trip each way; bytes held in order, no loss) and caps the rate
//! with token buckets shared by every node, as the machine that runs
//! winfleet has one uplink. The link is full duplex: one bucket for what
//! winfleet sends (upload) and one for what the nodes send back, each at the
//! model's rate.
//!
//! A chunk read from one side first waits for its bytes in the direction's
//! bucket (serialisation at the link's rate), then is held for the one-way
//! delay and written to the other side in order. Reading waits while the
//! bucket is empty, so TCP's own flow control pushes back on the sender.
//! The relay runs on its own tokio runtime (one worker thread), apart from
//! the engine it measures; tokio's timers have 1 ms granularity, which is
//! why the model is measured (`probe`) rather than assumed.
//!
//! Each node's relay listens on the node's own loopback address on one
//! port shared by all relays (`Netem::port`); `known_hosts` rewrites the
//! fleet's known_hosts for that port, so the host keys stay the nodes'.

#![allow(dead_code)]

use std::io::{Read as _, Write as _};
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// A network: round trip and the uplink's rate.
#[derive(Clone, Debug)]
pub struct Model {
    /// The preset's name, or `custom`.
    pub name: String,
    /// Round trip time (half of it each way).
    pub rtt: Duration,
    /// The rate in Mbit/s (each direction, shared by every node).
    pub mbit: f64,
}

impl Model {
    /// `lan` (1 ms, 1000 Mbit/s), `dc` (5 ms, 1000), `wan` (40 ms, 100),
    /// `edge` (80 ms, 20).
    pub fn preset(name: &str) -> Option<Model> {
        let (rtt, mbit) = match name {
            "lan" => (1, 1000.0),
            "dc" => (5, 1000.0),
            "wan" => (40, 100.0),
            "edge" => (80, 20.0),
            _ => return None,
        };
        Some(Model { name: name.to_owned(), rtt: Duration::from_millis(rtt), mbit })
    }

    /// From the environment: `NET=lan|dc|wan|edge`, and `RTT_MS` /
    /// `BANDWIDTH_MBIT` (each overrides the preset's; either alone models a
    /// `custom` network, the other taken from `lan`). None: loopback.
    pub fn from_env() -> Option<Model> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let (rtt, mbit) = (var("RTT_MS"), var("BANDWIDTH_MBIT"));
        let mut model = match var("NET") {
            Some(name) if name == "loopback" => return None,
            Some(name) => Model::preset(&name).unwrap_or_else(|| panic!("NET={name}: lan, dc, wan, edge or loopback")),
            None if rtt.is_some() || mbit.is_some() => Model { name: "custom".into(), ..Model::preset("lan")? },
            None => return None,
        };
        if let Some(rtt) = &rtt {
            let ms: f64 = rtt.parse().unwrap_or_else(|_| panic!("RTT_MS={rtt}: milliseconds"));
            model.rtt = Duration::from_secs_f64(ms / 1000.0);
        }
        if let Some(mbit) = &mbit {
            model.mbit = mbit.parse().unwrap_or_else(|_| panic!("BANDWIDTH_MBIT={mbit}: Mbit/s"));
        }
        if rtt.is_some() || mbit.is_some() {
            model.name = "custom".into();
        }
        Some(model)
    }

    /// "wan: 40 ms round trip, 100 Mbit/s".
    pub fn describe(&self) -> String {
        format!("{}: {:.1} ms round trip, {} Mbit/s", self.name, self.rtt.as_secs_f64() * 1000.0, self.mbit)
    }
}

/// A token bucket as a virtual clock: `next` is when the link is free; it
/// may lag `now` by up to `burst` (the bucket's depth, 2 ms: more than
/// tokio's timer granularity, so a late wake-up costs no rate).
struct Bucket {
    bytes_per_sec: f64,
    burst: Duration,
    next: Mutex<Instant>,
}

impl Bucket {
    fn new(mbit: f64) -> Self {
        Bucket { bytes_per_sec: mbit * 1e6 / 8.0, burst: Duration::from_millis(2), next: Mutex::new(Instant::now()) }
    }

    /// Reserves `n` bytes; returns when they have crossed the link.
    fn reserve(&self, n: usize) -> Instant {
        let now = Instant::now();
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        let start = (*next).max(now.checked_sub(self.burst).unwrap_or(now));
        *next = start + Duration::from_secs_f64(n as f64 / self.bytes_per_sec);
        *next
    }
}

struct Link {
    one_way: Duration,
    up: Bucket,
    down: Bucket,
}

/// The running relays.
pub struct Netem {
    runtime: Option<tokio::runtime::Runtime>,
    link: Arc<Link>,
    /// The port every relay listens on (on its node's address).
    pub port: u16,
    /// The model.
    pub model: Model,
}

const CHUNK: usize = 16 * 1024;

impl Netem {
    /// One relay per upstream (all on one port, each on its upstream's
    /// address), all sharing the model's buckets.
    pub fn start(model: &Model, upstreams: &[SocketAddr]) -> Netem {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("netem")
            .enable_all()
            .build()
            .expect("netem runtime");
        let link =
            Arc::new(Link { one_way: model.rtt / 2, up: Bucket::new(model.mbit), down: Bucket::new(model.mbit) });
        let port = runtime.block_on(async {
            'port: for _ in 0..20 {
                let first = TcpListener::bind((upstreams[0].ip(), 0)).await.expect("bind relay");
                let port = first.local_addr().expect("relay address").port();
                let mut listeners = vec![first];
                for upstream in &upstreams[1..] {
                    match TcpListener::bind((upstream.ip(), port)).await {
                        Ok(l) => listeners.push(l),
                        Err(_) => continue 'port,
                    }
                }
                for (listener, upstream) in listeners.into_iter().zip(upstreams) {
                    tokio::spawn(serve(listener, *upstream, link.clone()));
                }
                return port;
            }
            panic!("no port free on every node's address");
        });
        Netem { runtime: Some(runtime), link, port, model: model.clone() }
    }

    /// Writes `to`: the fleet's known_hosts with `[address]:port` moved to
    /// the relays' port.
    pub fn known_hosts(&self, fleet_known_hosts: &Path, fleet_port: u16, to: &Path) {
        let text = std::fs::read_to_string(fleet_known_hosts).expect("read known_hosts");
        let moved = text.replace(&format!("]:{fleet_port} "), &format!("]:{} ", self.port));
        std::fs::write(to, moved).expect("write known_hosts");
    }

    /// A relay in front of `upstream` on `ip` (a free port), with the same
    /// buckets as the fleet's relays.
    pub fn relay(&self, ip: IpAddr, upstream: SocketAddr) -> SocketAddr {
        let runtime = self.runtime.as_ref().expect("running");
        let listener = runtime.block_on(TcpListener::bind((ip, 0))).expect("bind relay");
        let address = listener.local_addr().expect("relay address");
        runtime.spawn(serve(listener, upstream, self.link.clone()));
        address
    }

    /// Measures the model: a 1-byte echo's round trip (median of 20) and
    /// the rate of `mib` MiB pushed through to a sink (timed until the sink's
    /// one-byte answer, less one measured round trip).
    pub fn probe(&self, mib: usize) -> Probe {
        let ip: IpAddr = [127, 0, 0, 1].into();
        let echo = std::net::TcpListener::bind((ip, 0)).expect("echo");
        let sink = std::net::TcpListener::bind((ip, 0)).expect("sink");
        let (echo_at, sink_at) = (echo.local_addr().expect("echo"), sink.local_addr().expect("sink"));
        std::thread::spawn(move || {
            if let Ok((mut s, _)) = echo.accept() {
                let _ = s.set_nodelay(true);
                let mut b = [0u8; 1];
                while s.read_exact(&mut b).is_ok() && s.write_all(&b).is_ok() {}
            }
        });
        std::thread::spawn(move || {
            if let Ok((mut s, _)) = sink.accept() {
                let _ = std::io::copy(&mut s, &mut std::io::sink());
                let _ = s.write_all(b"k");
            }
        });
        let mut s = std::net::TcpStream::connect(self.relay(ip, echo_at)).expect("echo relay");
        s.set_nodelay(true).expect("nodelay");
        let mut samples: Vec<Duration> = (0..20)
            .map(|_| {
                let start = Instant::now();
                let mut b = [7u8; 1];
                s.write_all(&b).expect("echo write");
                s.read_exact(&mut b).expect("echo read");
                start.elapsed()
            })
            .collect();
        samples.sort();
        let rtt = samples[samples.len() / 2];
        let mut s = std::net::TcpStream::connect(self.relay(ip, sink_at)).expect("sink relay");
        let block = vec![0x5a_u8; 1 << 20];
        let start = Instant::now();
        for _ in 0..mib {
            s.write_all(&block).expect("sink write");
        }
        s.shutdown(std::net::Shutdown::Write).expect("shutdown");
        let mut k = [0u8; 1];
        s.read_exact(&mut k).expect("sink answer");
        let elapsed = start.elapsed();
        let mbit = (mib << 20) as f64 * 8.0 / 1e6 / elapsed.saturating_sub(rtt).as_secs_f64().max(1e-9);
        Probe { rtt, mbit, mib, elapsed }
    }
}

/// What `probe` measured.
#[derive(Clone, Copy, Debug)]
pub struct Probe {
    /// The 1-byte echo's round trip through the relay.
    pub rtt: Duration,
    /// Upload rate through the relay, Mbit/s.
    pub mbit: f64,
    /// MiB pushed.
    pub mib: usize,
    /// Time from the first byte to the sink's answer.
    pub elapsed: Duration,
}

impl Probe {
    /// "measured: round trip 41.2 ms (...); upload 98 Mbit/s (...)".
    pub fn describe(&self) -> String {
        format!(
            "measured through the relay: round trip {:.1} ms (1-byte echo, median of 20); upload {:.1} Mbit/s ({} MiB to a sink in {:.0} ms, less one round trip)",
            self.rtt.as_secs_f64() * 1000.0,
            self.mbit,
            self.mib,
            self.elapsed.as_secs_f64() * 1000.0
        )
    }
}

impl Drop for Netem {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

async fn serve(listener: TcpListener, upstream: SocketAddr, link: Arc<Link>) {
    while let Ok((client, _)) = listener.accept().await {
        let link = link.clone();
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(upstream).await else { return };
            let _ = (client.set_nodelay(true), server.set_nodelay(true));
            let (client_read, client_write) = client.into_split();
            let (server_read, server_write) = server.into_split();
            let up = pump(client_read, server_write, link.clone(), true);
            let down = pump(server_read, client_write, link, false);
            tokio::join!(up, down);
        });
    }
}

/// One direction: read, wait for the bucket, hold for the one-way delay,
/// write, in order; end of stream is passed on as a shutdown.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    link: Arc<Link>,
    upload: bool,
) {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(Instant, Vec<u8>)>(4096);
    let one_way = link.one_way;
    let reader = async move {
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let bucket = if upload { &link.up } else { &link.down };
            let crossed = bucket.reserve(n);
            if crossed > Instant::now() {
                tokio::time::sleep_until(crossed.into()).await;
            }
            let at = crossed.max(Instant::now()) + one_way;
            if tx.send((at, buf[..n].to_vec())).await.is_err() {
                break;
            }
        }
    };
    let writer = async move {
        while let Some((at, bytes)) = rx.recv().await {
            if at > Instant::now() {
                tokio::time::sleep_until(at.into()).await;
            }
            if to.write_all(&bytes).await.is_err() {
                break;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(reader, writer);
}
