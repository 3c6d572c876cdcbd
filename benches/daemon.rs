//! The daemon's figures (issue 5), measured side by side in one run:
//!
//! 1. Merge → applied latency on 50 real sshd nodes, over PUSHES pushes
//!    each: via the webhook (a push to a bare file:// remote, then a signed
//!    GitHub notification) and via the file watch (a git-sync style link
//!    flipped atomically onto a new worktree). Latency = from the moment
//!    the new revision is in place (push done / link flipped) to the moment
//!    the last node's apply script returned. p50 and p95.
//! 2. Idle cost with 200 and with 1,000 nodes tracked and nothing changing:
//!    CPU share of the daemon process and its RSS, pure idle (default
//!    timers, nothing due) and the cost of one drift round (every node
//!    re-observed), amortized over the default 10-minute drift interval.
//!    Each size runs in a fresh process (this binary with `--idle N`), so
//!    the RSS is the daemon's and not what the latency part left behind;
//!    the harness's own memory (the sshd processes standing in for the
//!    nodes) is reported apart, and the memory one tracked node costs is
//!    the difference between the sizes.
//!
//! `cargo bench --bench daemon` (LATENCY_NODES=50, IDLE_NODES=200,1000,
//! PUSHES=25; LATENCY_NODES=0 skips the latency part). With a network
//! model (`NET=lan|dc|wan|edge`, tests/support/netem.rs), the daemon
//! reaches its nodes through the model's relays (the Git remote stays
//! local: the link modelled is the one to the nodes), and the model as
//! measured is printed first.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, missing_docs)]

#[path = "../tests/support/fleet.rs"]
mod fleet;
#[path = "../tests/support/netem.rs"]
mod netem;
#[path = "../tests/support/port.rs"]
mod port;
#[path = "daemon/reach.rs"]
mod reach;
#[path = "../tests/support/remote.rs"]
mod remote;

use std::path::Path;
use std::time::Duration;

use fleet::TestFleet;
use hmac::{KeyInit, Mac};
use reach::Reach;
use remote::{GitSync, Remote, git};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::broadcast;
use tokio::time::Instant;
use winfleet::daemon::round::{RoundKind, RoundRecord};
use winfleet::daemon::source::SourceConfig;
use winfleet::daemon::triggers::webhook::WebhookConfig;
use winfleet::daemon::{self, Config, Handle};
use winfleet::source::transport::GitAuth;
use winfleet::ssh::{KnownHosts, Pool, Settings, load_key};

const SECRET: &[u8] = b"bench-secret";

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn files(fleet: &TestFleet, reach: &Reach, mirror: &str, drift: &str) -> Vec<(&'static str, String)> {
    let mut list = String::from(
        "apiVersion: winfleet.io/v1alpha1\nkind: WindowsInstanceList\nmetadata:\n  name: t\nspec:\n  instances:\n",
    );
    for node in &fleet.nodes {
        list.push_str(&format!("  - address: {}\n", node.address));
    }
    vec![
        (
            "fleet.yaml",
            format!(
                "{}  rollout:\n    maxParallel: 64\n  drift:\n    interval: {drift}\n",
                fleet.fleet_yaml().replace(&format!("port: {}\n", fleet.port), &format!("port: {}\n", reach.port))
            ),
        ),
        ("instances.yaml", list),
        ("mirrors.yaml", mirrors(mirror)),
    ]
}

fn mirrors(mirror: &str) -> String {
    format!(
        "apiVersion: config.openshift.io/v1\nkind: ImageDigestMirrorSet\nmetadata:\n  name: m\nspec:\n  imageDigestMirrors:\n  - source: quay.io\n    mirrors:\n    - {mirror}\n"
    )
}

fn config(source: SourceConfig, cache: &Path, webhook: bool) -> Config {
    Config {
        source,
        auth: GitAuth::default(),
        cache_dir: cache.to_owned(),
        status_url: None,
        author_name: "winfleet".into(),
        author_email: "winfleet@bench.invalid".into(),
        poll_interval: Duration::from_secs(60),
        shutdown_timeout: Duration::from_secs(30),
        max_parallel: None,
        drain_timeout: Duration::from_secs(60),
        reboot_timeout: Duration::from_secs(60),
        pull_secret: None,
        metrics_addr: None,
        webhook: webhook.then(|| ("127.0.0.1:0".parse().unwrap(), WebhookConfig::new(SECRET.to_vec(), "main"))),
        leader_election: None,
        watch_cluster: false,
        seed: 1,
        payload_dir: None,
        join: Default::default(),
        control_token: None,
        verify: None,
        path: None,
        pod: None,
        git_sync: None,
    }
}

fn pool(fleet: &TestFleet, reach: &Reach, settings: Settings) -> Pool {
    Pool::new(load_key(&fleet.key).unwrap(), KnownHosts::load(&reach.known_hosts, false).unwrap(), settings)
}

async fn next(records: &mut broadcast::Receiver<RoundRecord>, revision: &str) -> RoundRecord {
    loop {
        let record = tokio::time::timeout(Duration::from_secs(300), records.recv()).await.unwrap().unwrap();
        if record.revision == revision && record.kind == RoundKind::Commit {
            return record;
        }
    }
}

async fn notify(handle: &Handle) {
    let body = br#"{"ref":"refs/heads/main"}"#;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(SECRET).unwrap();
    mac.update(body);
    let sig: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
    let addr = handle.webhook_addr.unwrap();
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /webhook HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nX-GitHub-Event: push\r\nX-Hub-Signature-256: sha256={sig}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    assert!(response.starts_with(b"HTTP/1.1 202"), "{}", String::from_utf8_lossy(&response));
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn summary(name: &str, mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let (p50, p95) = (percentile(&samples, 0.5), percentile(&samples, 0.95));
    println!(
        "{name:<10} n={:<3} p50 {:>7.1} ms  p95 {:>7.1} ms  min {:>7.1} ms  max {:>7.1} ms",
        samples.len(),
        p50.as_secs_f64() * 1e3,
        p95.as_secs_f64() * 1e3,
        samples[0].as_secs_f64() * 1e3,
        samples[samples.len() - 1].as_secs_f64() * 1e3
    );
    (p50, p95)
}

/// Webhook mode: push to the bare remote, notify, wait for the apply.
async fn webhook_latency(fleet: &TestFleet, reach: &Reach, pushes: usize) -> Vec<Duration> {
    let initial = files(fleet, reach, "m0.corp.example/quay", "1h");
    let refs: Vec<(&str, &str)> = initial.iter().map(|(p, c)| (*p, c.as_str())).collect();
    let remote = Remote::new(&refs);
    let source = SourceConfig::Remote { url: remote.url(), branch: "main".into() };
    let mut handle =
        daemon::start(config(source, &remote.scratch("cache"), true), None, pool(fleet, reach, Settings::default()))
            .await
            .unwrap();
    next(&mut handle.records, &remote.tip("main").unwrap()).await;
    let mut samples = Vec::new();
    for i in 1..=pushes {
        let revision = remote.push(&[("mirrors.yaml", &mirrors(&format!("m{i}.corp.example/quay")))], &[], "m");
        let merged = Instant::now();
        notify(&handle).await;
        let record = next(&mut handle.records, &revision).await;
        assert_eq!(record.failed, 0);
        samples.push(record.applied_at - merged);
    }
    handle.shutdown.cancel();
    handle.task.await.unwrap().unwrap();
    samples
}

/// File-watch mode: flip the git-sync link, wait for the apply.
async fn fs_watch_latency(fleet: &TestFleet, reach: &Reach, pushes: usize) -> Vec<Duration> {
    let dir = tempfile::tempdir().unwrap();
    let sync = GitSync::new(dir.path(), &files(fleet, reach, "m0.corp.example/quay", "1h"));
    let source = SourceConfig::Checkout { path: sync.link() };
    let cache = dir.path().join("cache");
    let mut handle =
        daemon::start(config(source, &cache, false), None, pool(fleet, reach, Settings::default())).await.unwrap();
    let head = git(&sync.link(), &["rev-parse", "HEAD"]);
    next(&mut handle.records, &head).await;
    let mut samples = Vec::new();
    for i in 1..=pushes {
        let revision = sync.publish(&[("mirrors.yaml", mirrors(&format!("f{i}.corp.example/quay")))]);
        let merged = Instant::now();
        let record = next(&mut handle.records, &revision).await;
        assert_eq!(record.failed, 0);
        samples.push(record.applied_at - merged);
    }
    handle.shutdown.cancel();
    handle.task.await.unwrap().unwrap();
    samples
}

/// CPU seconds this process has used (user + system).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<f64>().unwrap() / 1024.0
}

/// The harness's memory: every sshd process on the machine (the nodes'
/// listeners and their per-connection processes), as (count, PSS MiB).
fn sshd_memory() -> (usize, f64) {
    let mut count = 0;
    let mut kib = 0.0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let dir = entry.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if !comm.starts_with("sshd") {
            continue;
        }
        let rollup = std::fs::read_to_string(dir.join("smaps_rollup")).unwrap_or_default();
        if let Some(pss) = rollup.lines().find_map(|l| l.strip_prefix("Pss:")) {
            count += 1;
            kib += pss.trim().trim_end_matches("kB").trim().parse::<f64>().unwrap_or(0.0);
        }
    }
    (count, kib / 1024.0)
}

/// Idle cost: default timers (nothing due) for `window`, then drift rounds.
async fn idle(fleet: &TestFleet, window: Duration) {
    let direct = Reach::direct(fleet);
    let initial = files(fleet, &direct, "m0.corp.example/quay", "10m");
    let refs: Vec<(&str, &str)> = initial.iter().map(|(p, c)| (*p, c.as_str())).collect();
    let remote = Remote::new(&refs);
    let source = SourceConfig::Remote { url: remote.url(), branch: "main".into() };
    let idle_close = Duration::from_secs(20);
    let warm = pool(fleet, &direct, Settings { idle_timeout: Some(idle_close), ..Settings::default() });
    let mut handle = daemon::start(config(source, &remote.scratch("cache"), false), None, warm).await.unwrap();
    next(&mut handle.records, &remote.tip("main").unwrap()).await;
    // Right after a round: every connection pooled (keepalives running).
    let (cpu, wall) = (cpu_seconds(), Instant::now());
    tokio::time::sleep(idle_close - Duration::from_secs(5)).await;
    let warm_share = (cpu_seconds() - cpu) / wall.elapsed().as_secs_f64();
    let warm_rss = rss_mib();
    let (sshd, sshd_mib) = sshd_memory();
    println!(
        "warm       {} nodes, connections kept after a round: CPU share {:.3}% over {}s, RSS {warm_rss:.1} MiB",
        fleet.nodes.len(),
        warm_share * 100.0,
        wall.elapsed().as_secs()
    );
    // Idle: the connections closed after the idle timeout (the default is
    // 2m; 20s here), default poll (1m) and drift (10m).
    tokio::time::sleep(Duration::from_secs(10)).await;
    let (cpu, wall) = (cpu_seconds(), Instant::now());
    tokio::time::sleep(window).await;
    let idle_share = (cpu_seconds() - cpu) / wall.elapsed().as_secs_f64();
    let rss = rss_mib();
    handle.shutdown.cancel();
    handle.task.await.unwrap().unwrap();

    // One drift round every few seconds: its CPU cost, amortized over 10m.
    let drift = files(fleet, &direct, "m0.corp.example/quay", "2s");
    let refs: Vec<(&str, &str)> = drift.iter().map(|(p, c)| (*p, c.as_str())).collect();
    let head = remote.push(&refs, &[], "drift every 2s");
    let source = SourceConfig::Remote { url: remote.url(), branch: "main".into() };
    // At the default timers a drift round (every 10m) finds the
    // connections closed (after 2m): each round here connects anew too.
    let cold = pool(fleet, &direct, Settings { idle_timeout: Some(Duration::from_millis(500)), ..Settings::default() });
    let mut handle = daemon::start(config(source, &remote.scratch("cache2"), false), None, cold).await.unwrap();
    next(&mut handle.records, &head).await;
    let mut per_round = Vec::new();
    let mut durations = Vec::new();
    for _ in 0..5 {
        let cpu = cpu_seconds();
        let started = Instant::now();
        let record = loop {
            let r = handle.records.recv().await.unwrap();
            if r.kind == RoundKind::Drift {
                break r;
            }
        };
        assert_eq!(record.changed, 0);
        per_round.push(cpu_seconds() - cpu);
        durations.push(started.elapsed());
    }
    let rss_drift = rss_mib();
    handle.shutdown.cancel();
    handle.task.await.unwrap().unwrap();
    per_round.sort_by(f64::total_cmp);
    let drift_cpu = per_round[per_round.len() / 2];
    println!(
        "idle       {} nodes, connections closed after the idle timeout: CPU share {:.3}% over {}s (nothing due), RSS {:.1} MiB",
        fleet.nodes.len(),
        idle_share * 100.0,
        window.as_secs(),
        rss
    );
    println!(
        "harness    {sshd} sshd processes while connected (the nodes and winfleet's connections): {sshd_mib:.0} MiB PSS"
    );
    println!(
        "drift      one no-op drift round of {} nodes, connecting to each: {:.0} ms CPU (median of 5, incl. ~2 s of idle each), RSS after them {:.1} MiB",
        fleet.nodes.len(),
        drift_cpu * 1e3,
        rss_drift
    );
    println!(
        "amortized  default timers (drift every 10m): CPU share {:.3}% of one core",
        (idle_share + drift_cpu / 600.0) * 100.0
    );
    println!("rss-mib {rss}");
}

/// The idle part in a fresh process per size; returns each size's RSS.
fn idle_children(sizes: &[usize]) -> Vec<(usize, f64)> {
    let exe = std::env::current_exe().unwrap();
    let mut rss = Vec::new();
    for &n in sizes {
        let out = std::process::Command::new(&exe).arg("--idle").arg(n.to_string()).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
        for line in text.lines() {
            match line.strip_prefix("rss-mib ") {
                Some(v) => rss.push((n, v.parse().unwrap())),
                None => println!("{line}"),
            }
        }
    }
    rss
}

/// The product's allocator (src/main.rs): the daemon runs in this process.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--idle") {
        let fleet = TestFleet::start(args[i + 1].parse().unwrap());
        println!(
            "baseline   RSS before the daemon starts (this process and the harness of {} nodes): {:.1} MiB",
            fleet.nodes.len(),
            rss_mib()
        );
        runtime.block_on(idle(&fleet, Duration::from_secs(60)));
        return;
    }
    let latency_nodes = env("LATENCY_NODES", 50);
    let sizes: Vec<usize> = std::env::var("IDLE_NODES")
        .unwrap_or_else(|_| "200,1000".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    let pushes = env("PUSHES", 25);
    println!(
        "winfleet daemon bench: {latency_nodes} nodes for latency ({pushes} pushes per trigger), {sizes:?} for idle"
    );
    if latency_nodes > 0 {
        latency(&runtime, latency_nodes, pushes);
    }
    let rss = idle_children(&sizes);
    if let [(small, a), .., (large, b)] = rss[..] {
        println!(
            "per node   {:.1} KiB of daemon RSS per tracked node ({small} -> {large} nodes)",
            (b - a) * 1024.0 / (large - small) as f64
        );
    }
}

fn latency(runtime: &tokio::runtime::Runtime, latency_nodes: usize, pushes: usize) {
    let fleet = TestFleet::start(latency_nodes);
    let trust = tempfile::tempdir().unwrap();
    // The relays (if any) live until the end: `_net` is dropped last.
    let (model, _net, reach) = reach::from_env(&fleet, trust.path());
    let reach = &reach;
    runtime.block_on(async {
        // Alternate the modes in chunks, so noise hits both alike.
        let mut webhook = Vec::new();
        let mut fs = Vec::new();
        for chunk in [pushes / 2, pushes - pushes / 2] {
            webhook.extend(webhook_latency(&fleet, reach, chunk).await);
            fs.extend(fs_watch_latency(&fleet, reach, chunk).await);
        }
        let over = model.as_ref().map(|m| format!(", over {}", m.name)).unwrap_or_default();
        println!("merge -> applied on {latency_nodes} nodes{over} (goal p50 <= 1 s):");
        let (w50, _) = summary("webhook", webhook);
        let (f50, _) = summary("fs-watch", fs);
        println!("ratio      fs-watch/webhook p50 {:.2}", f50.as_secs_f64() / w50.as_secs_f64());
    });
}
