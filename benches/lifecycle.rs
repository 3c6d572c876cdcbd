//! Configuring fresh nodes: winfleet's lifecycle against "WMCO's strategy"
//! and scp, side by side in one run, on the same real sshd nodes
//! (tests/support/fleet.rs).
//!
//! - winfleet: up to 32 nodes at once; per node one observation, one
//!   preparation script, one SFTP channel with every file of the payload
//!   (many writes in flight), one apply script (SHA-256 checked, renamed,
//!   units defined). SSH-only mode: files and service definitions, which is
//!   what a configure transfers; the join is cluster work.
//! - WMCO: one node at a time, a new connection per node and one SSH
//!   session per command; per file: create its directory, check it
//!   (`sha256sum`), upload its `.tar.gz` over a new SFTP session, extract
//!   it with `tar -xzf`, remove the archive (WMCO-SPEC 8.1, 8.4;
//!   tests/support/wmco_transfer.rs, shared with benches/machines.rs).
//! - scp: OpenSSH's `scp -r` of the same files to the same nodes, as many
//!   at once as winfleet: the transfer floor.
//!
//! Then winfleet's following no-op round (warm connections, nothing sent).
//!
//! Then an upgrade after CHANGED (10) of the files changed: winfleet's node
//! step in upgrade mode (services stopped, only the changed files sent,
//! started again) one node at a time and five at a time, beside WMCO's
//! strategy (deconfigure, then a full configure, one node at a time) on
//! WMCO_NODES (10) of the nodes. The cluster side of an upgrade (cordon,
//! drain, the Ready wait) is the same for both and not measured here.
//!
//! `cargo bench --bench lifecycle` (NODES=50, FILES=200, MIB=50 by default).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, missing_docs)]

#[path = "../tests/support/fleet.rs"]
mod fleet;
#[path = "../tests/support/netem.rs"]
mod netem;
#[path = "lifecycle/network.rs"]
mod network;
#[path = "../tests/support/port.rs"]
mod port;
#[path = "../tests/support/wmco_transfer.rs"]
mod wmco_transfer;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fleet::TestFleet;
use tokio_util::sync::CancellationToken;
use winfleet::desired::model::Instance;
use winfleet::engine::report::NodeReport;
use winfleet::engine::{self, NodeContext, RoundOptions};
use winfleet::lifecycle::manifest::{PreScript, ServiceDef, ServicesManifest};
use winfleet::lifecycle::{LifecycleDirs, LifecycleSpec, Mode, PayloadState};
use winfleet::node::NodeSpec;
use winfleet::payload::Payload;
use winfleet::ssh::{KnownHosts, Pool, Session, load_key};
use winfleet::vocab::Shell;
use wmco_transfer::{archives, binaries, command, settings};

const SYSTEMCTL: &str = "#!/bin/sh\n[ \"$1\" = is-active ] && { shift; for u in \"$@\"; do [ \"$u\" = -- ] || echo inactive; done; exit 3; }\nexit 0\n";

fn manifest() -> ServicesManifest {
    let service = |name: &str, command: &str, priority| ServiceDef {
        name: name.into(),
        command: command.into(),
        node_variables: vec![],
        pre_scripts: vec![PreScript {
            variable: Some("NODE_IP".into()),
            path: "echo 127.0.0.1".into(),
            node_args: vec![],
        }],
        dependencies: vec![],
        bootstrap: true,
        priority,
    };
    ServicesManifest {
        name: "windows-services-bench".into(),
        origin: "bench".into(),
        services: vec![
            service("containerd", "payload/dir0/file0.exe --node-ip=NODE_IP", 0),
            service("kubelet", "payload/dir1/file1.exe --node-ip=NODE_IP", 1),
        ],
        digest: "ab".repeat(32),
        canonical: String::new(),
        services_at: Default::default(),
    }
}

/// How the bench reaches the nodes: their own ports and the fleet's
/// known_hosts (loopback), or a modelled network's relays.
#[derive(Clone, Copy)]
struct Route<'a> {
    /// The relays' port; `None`: each node's own.
    port: Option<u16>,
    known_hosts: &'a Path,
}

fn instances_for(fleet: &TestFleet, payload: &Arc<Payload>) -> Vec<Instance> {
    instances_via(fleet, payload, None)
}

fn instances_via(fleet: &TestFleet, payload: &Arc<Payload>, port: Option<u16>) -> Vec<Instance> {
    let dirs = LifecycleDirs { posix_payload: "payload", posix_units: "units", registries: "certs.d" };
    let lifecycle = LifecycleSpec::new(Shell::Posix, &payload.digest, &manifest(), dirs)
        .at_runtime(&PayloadState::Loaded(Arc::clone(payload)), None);
    let mut spec = NodeSpec::empty(Shell::Posix);
    spec.registries_dir = "certs.d".into();
    spec.lifecycle = Some(Arc::new(lifecycle));
    let spec = Arc::new(spec);
    fleet
        .nodes
        .iter()
        .map(|n| Instance {
            address: n.address.clone(),
            username: fleet.user.clone(),
            port: port.unwrap_or(n.port),
            shell: Shell::Posix,
            labels: Default::default(),
            annotations: Default::default(),
            taints: Vec::new(),
            origin: "bench".into(),
            spec: Arc::clone(&spec),
        })
        .collect()
}

async fn winfleet_round(pool: &Pool, instances: &[Instance]) -> (Duration, u64, Vec<NodeReport>) {
    let refs: Vec<&Instance> = instances.iter().collect();
    let contexts: BTreeMap<String, NodeContext> = instances
        .iter()
        .map(|i| (i.address.clone(), NodeContext { mode: Some(Mode::Prepare), ..NodeContext::default() }))
        .collect();
    let start = Instant::now();
    let options = RoundOptions { dry_run: false, max_parallel: 32 };
    let reports = engine::round(pool, &refs, options, &CancellationToken::new(), &contexts, |_| {}).await;
    let elapsed = start.elapsed();
    let bytes = reports.iter().filter_map(|r| r.lifecycle.as_ref()).map(|l| l.uploaded_bytes).sum();
    let failed: Vec<String> = reports.iter().filter(|r| r.failed()).map(engine::report::node_line).collect();
    assert!(failed.is_empty(), "nodes failed: {failed:#?}");
    (elapsed, bytes, reports)
}

/// WMCO's way, one node at a time; `upgrade`: each node deconfigured (its
/// files removed) before its full configure, as WMCO upgrades.
async fn wmco_round(
    instances: &[Instance],
    archives: &BTreeMap<String, PathBuf>,
    fleet: &TestFleet,
    upgrade: bool,
) -> (Duration, u64) {
    wmco_round_via(instances, archives, fleet, upgrade, &fleet.known_hosts).await
}

async fn wmco_round_via(
    instances: &[Instance],
    archives: &BTreeMap<String, PathBuf>,
    fleet: &TestFleet,
    upgrade: bool,
    known_hosts: &Path,
) -> (Duration, u64) {
    let key = Arc::new(load_key(&fleet.key).unwrap());
    let known = Arc::new(KnownHosts::load(known_hosts, false).unwrap());
    let start = Instant::now();
    let mut sent = 0;
    for instance in instances {
        if upgrade {
            let session = Session::connect(&engine::target(instance), &key, &known, &settings()).await.unwrap();
            session.run(&command("rm -rf wmco".into()), Duration::from_secs(120)).await.unwrap();
            session.close().await;
        }
        sent += wmco_transfer::node(instance, archives, "wmco", &key, &known).await;
    }
    (start.elapsed(), sent)
}

/// OpenSSH's scp of the payload to every node, 32 at a time.
fn scp_round(fleet: &TestFleet, payload: &Path) -> Duration {
    scp_via(fleet, payload, Route { port: None, known_hosts: &fleet.known_hosts }, false)
}

/// scp through `route`, with SSH's compression when `compress`.
fn scp_via(fleet: &TestFleet, payload: &Path, route: Route<'_>, compress: bool) -> Duration {
    let start = Instant::now();
    for chunk in fleet.nodes.chunks(32) {
        let children: Vec<_> = chunk
            .iter()
            .map(|node| {
                std::process::Command::new("scp")
                    .args(["-q", "-r", "-B", "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes"])
                    .arg("-o")
                    .arg(format!("UserKnownHostsFile={}", route.known_hosts.display()))
                    .args(["-o", if compress { "Compression=yes" } else { "Compression=no" }])
                    .arg("-i")
                    .arg(&fleet.key)
                    .args(["-P", &route.port.unwrap_or(node.port).to_string()])
                    .arg(payload)
                    .arg(format!("{}@{}:scp-copy", fleet.user, node.address))
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut child in children {
            assert!(child.wait().unwrap().success(), "scp failed");
        }
    }
    start.elapsed()
}

/// Rewrites `changed` of the payload's files (spread over it) with new
/// content of the same size; returns the payload as it is now.
fn change_files(dir: &Path, changed: usize, seed: u64) -> Arc<Payload> {
    let before = Payload::load(dir).unwrap();
    let step = (before.files.len() / changed.max(1)).max(1);
    let mut rng = fastrand::Rng::with_seed(seed);
    for file in before.files.iter().step_by(step).take(changed) {
        let path = dir.join(&file.rel);
        let mut bytes = std::fs::read(&path).unwrap();
        for chunk in bytes.chunks_mut(4096).step_by(2) {
            rng.fill(chunk);
        }
        std::fs::write(&path, bytes).unwrap();
    }
    Arc::new(Payload::load(dir).unwrap())
}

/// winfleet's upgrade node step on every node, `at_once` nodes at a time.
async fn winfleet_upgrade(pool: &Pool, instances: &[Instance], at_once: usize) -> (Duration, u64) {
    use futures::StreamExt;
    let start = Instant::now();
    let reports: Vec<NodeReport> = futures::stream::iter(instances)
        .map(|i| async move {
            let node = serde_json::json!({ "metadata": { "name": i.address } });
            let context = NodeContext { mode: Some(Mode::Upgrade), node: Some(node), disrupt: true };
            engine::node(pool, i, false, &context).await
        })
        .buffer_unordered(at_once)
        .collect()
        .await;
    let elapsed = start.elapsed();
    let failed: Vec<String> = reports.iter().filter(|r| r.failed()).map(engine::report::node_line).collect();
    assert!(failed.is_empty(), "nodes failed: {failed:#?}");
    (elapsed, reports.iter().filter_map(|r| r.lifecycle.as_ref()).map(|l| l.uploaded_bytes).sum())
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / f64::from(1u32 << 20))
}

/// `nodes` sshd nodes, each with the systemctl shim.
fn start_fleet(nodes: usize) -> TestFleet {
    let started = Instant::now();
    let fleet = TestFleet::start(nodes);
    for node in &fleet.nodes {
        node.shim("systemctl", SYSTEMCTL);
    }
    println!("fleet: {nodes} sshd nodes up in {}", secs(started.elapsed()));
    fleet
}

/// The bench's payload and WMCO's archives of it.
struct Bundle {
    /// The payload directory (under the scratch directory).
    dir: PathBuf,
    payload: Arc<Payload>,
    /// WMCO's `.tar.gz` per file, and their total size.
    archives: BTreeMap<String, PathBuf>,
    archived: u64,
}

/// Writes `files` files of `size` MiB in all under `scratch`, and WMCO's
/// archives of them; prints what it made.
fn bundle(scratch: &Path, files: usize, size: usize) -> Bundle {
    let dir = scratch.join("payload");
    binaries(&dir, files, size);
    let payload = Arc::new(Payload::load(&dir).unwrap());
    let archives = archives(&payload, scratch);
    let archived: u64 = archives.values().map(|p| std::fs::metadata(p).unwrap().len()).sum();
    println!(
        "payload: {} files, {} ({} as WMCO's .tar.gz archives)",
        payload.files.len(),
        mib(payload.size()),
        mib(archived)
    );
    Bundle { dir, payload, archives, archived }
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    if let Some(model) = netem::Model::from_env() {
        network::run(&model);
        return;
    }
    let (nodes, files, size) = (env("NODES", 50), env("FILES", 200), env("MIB", 50));
    let fleet = start_fleet(nodes);
    let scratch = tempfile::tempdir().unwrap();
    let Bundle { dir, payload, archives: wmco_archives, archived } = bundle(scratch.path(), files, size);
    let instances = instances_for(&fleet, &payload);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let pool =
            Pool::new(load_key(&fleet.key).unwrap(), KnownHosts::load(&fleet.known_hosts, false).unwrap(), settings());
        let (configure, sent, _) = winfleet_round(&pool, &instances).await;
        let (noop, noop_sent, _) = winfleet_round(&pool, &instances).await;
        let scp = scp_round(&fleet, &dir);
        let (wmco, wmco_sent) = wmco_round(&instances, &wmco_archives, &fleet, false).await;
        let total = payload.size() * nodes as u64;
        let rate =
            |bytes: u64, d: Duration| format!("{:.0} MiB/s", bytes as f64 / f64::from(1u32 << 20) / d.as_secs_f64());
        println!();
        println!("configure {nodes} fresh nodes ({} each):", mib(payload.size()));
        println!("  winfleet         {:>10}  sent {:>9}  {:>10}", secs(configure), mib(sent), rate(total, configure));
        println!(
            "  WMCO's strategy  {:>10}  sent {:>9}  {:>10}   winfleet is {:.1}x faster",
            secs(wmco),
            mib(wmco_sent),
            rate(total, wmco),
            wmco.as_secs_f64() / configure.as_secs_f64()
        );
        println!(
            "  scp (floor)      {:>10}  sent {:>9}  {:>10}   winfleet's throughput is {:.0}% of scp's",
            secs(scp),
            mib(total),
            rate(total, scp),
            100.0 * scp.as_secs_f64() / configure.as_secs_f64()
        );
        println!("  winfleet's following no-op round: {} ({} sent)", secs(noop), mib(noop_sent));
        let per_node = |bytes: u64| format!("{:.2} MiB", bytes as f64 / f64::from(1u32 << 20));
        println!(
            "  bytes on the wire per node: winfleet {} (gzip where it pays), WMCO's .tar.gz {} ({:+.1}%), the files {}",
            per_node(sent / nodes as u64),
            per_node(archived),
            100.0 * ((sent / nodes as u64) as f64 / archived as f64 - 1.0),
            per_node(payload.size())
        );

        let changed = env("CHANGED", 10);
        let wmco_nodes = env("WMCO_NODES", 10).min(nodes);
        println!();
        println!("upgrade after {changed} of {files} files changed:");
        for (at_once, seed) in [(1, 11), (5, 12)] {
            let before = Payload::load(&dir).unwrap();
            let after = change_files(&dir, changed, seed);
            let delta: u64 = after
                .files
                .iter()
                .filter(|f| before.files.iter().any(|b| b.rel == f.rel && b.sha256 != f.sha256))
                .map(|f| f.size)
                .sum();
            let upgraded = instances_for(&fleet, &after);
            let (took, sent) = winfleet_upgrade(&pool, &upgraded, at_once).await;
            println!(
                "  winfleet, {at_once} at a time   {:>10}  {:>8} per node  sent {:>8} ({:.1}% over the {} changed per node)",
                secs(took),
                secs(took / nodes as u32),
                mib(sent),
                100.0 * (sent as f64 / (delta * nodes as u64) as f64 - 1.0),
                winfleet::vocab::operation::bytes(delta)
            );
            if at_once == 1 {
                let new_archives = archives(&after, &scratch.path().join(format!("upgrade-{seed}")));
                let (wmco, wmco_sent) = wmco_round(&upgraded[..wmco_nodes], &new_archives, &fleet, true).await;
                let per_wmco = wmco / wmco_nodes as u32;
                println!(
                    "  WMCO's strategy, 1 at a time ({wmco_nodes} nodes) {:>8} per node  sent {:>8} per node   winfleet is {:.1}x faster per node",
                    secs(per_wmco),
                    mib(wmco_sent / wmco_nodes as u64),
                    per_wmco.as_secs_f64() / (took.as_secs_f64() / nodes as f64)
                );
            }
        }
        pool.close().await;
    });
}
