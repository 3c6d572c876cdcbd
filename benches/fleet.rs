//! The node engine against 200 real sshd nodes (tests/support/fleet.rs):
//! winfleet's default strategy and "WMCO's strategy" side by side, in one
//! run, on the same transport.
//!
//! - default: up to 32 nodes at once, one observation script and at most
//!   one apply script per node, only files whose SHA-256 differs, pooled
//!   connections kept between rounds (as the daemon keeps them).
//! - WMCO: one node at a time; per node a new connection, then delete and
//!   re-create the registries directory and upload every file, one SSH
//!   session (channel) per command (WMCO-SPEC 1.9, 8.1). WMCO has no drift
//!   check: every reconcile rewrites everything, so its figure for (c) is
//!   that rewrite.
//!
//! - Ansible (when ansible-core installs; `ANSIBLE=0` skips it): the same
//!   job as a playbook with `forks = 32`, pipelining and ControlPersist
//!   (benches/fleet/ansible.rs).
//!
//! Figures: (a) initial rollout, (b) one mirror changed, (c) no-op drift
//! check with warm connections (and, on posix nodes, the shell the pool
//! keeps from the round before); and the floor: one SSH handshake and one
//! empty command round trip.
//!
//! `cargo bench --bench fleet` (NODES=200 by default). Over a modelled
//! network (`NET=lan|dc|wan|edge`, `RTT_MS`, `BANDWIDTH_MBIT`;
//! tests/support/netem.rs): (b), (c) and the floor, on 50 nodes by default
//! (benches/fleet/network.rs).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, missing_docs)]

#[path = "fleet/ansible.rs"]
mod ansible;
#[path = "../tests/support/fleet.rs"]
mod fleet;
#[path = "../tests/support/netem.rs"]
mod netem;
#[path = "fleet/network.rs"]
mod network;
#[path = "../tests/support/port.rs"]
mod port;
#[path = "fleet/powershell.rs"]
mod powershell;
#[path = "../tests/support/powershell_standin.rs"]
mod powershell_standin;

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

use fleet::TestFleet;
use winfleet::desired::model::{Desired, Instance};
use winfleet::dialect::Script;
use winfleet::engine::{self, RoundOptions, report};
use winfleet::node::{HOSTS_TOML, NodeSpec};
use winfleet::ssh::{KnownHosts, Pool, Session, Settings, load_key};

const REGISTRIES: usize = 8;

fn repo(fleet: &TestFleet, dir: &std::path::Path, changed_mirror: &str, port: u16) -> Desired {
    let w = |rel: &str, text: String| std::fs::write(dir.join(rel), text).unwrap();
    w(
        "fleet.yaml",
        format!(
            "apiVersion: winfleet.io/v1alpha1\nkind: Fleet\nmetadata: {{name: bench}}\nspec:\n  lab: {{allowLoopbackAddresses: true}}\n  defaults: {{username: {}, port: {}, shell: posix}}\n  registries: {{posixDir: certs.d}}\n  environment: {{posixDir: systemd}}\n",
            fleet.user, port
        ),
    );
    let mut list = String::from(
        "apiVersion: winfleet.io/v1alpha1\nkind: WindowsInstanceList\nmetadata: {name: bench}\nspec:\n  instances:\n",
    );
    for node in &fleet.nodes {
        let _ = writeln!(list, "  - address: {}", node.address);
    }
    w("instances.yaml", list);
    let mut idms = String::from(
        "apiVersion: config.openshift.io/v1\nkind: ImageDigestMirrorSet\nmetadata: {name: bench}\nspec:\n  imageDigestMirrors:\n",
    );
    for i in 0..REGISTRIES {
        let mirror = if i == 0 { changed_mirror.to_owned() } else { format!("mirror{i}.example.com") };
        let _ = writeln!(idms, "  - source: registry{i}.example.com\n    mirrors: [{mirror}, backup.example.com]");
    }
    w("idms.yaml", idms);
    w(
        "proxy.yaml",
        "apiVersion: config.openshift.io/v1\nkind: Proxy\nmetadata: {name: cluster}\nspec: {httpProxy: 'http://proxy.example.com:3128', noProxy: '.svc,10.0.0.0/16'}\n".into(),
    );
    let snapshot = winfleet::source::read_worktree(dir).unwrap();
    winfleet::desired::load(&snapshot, Default::default()).desired.expect("valid bench repository")
}

fn pool(fleet: &TestFleet) -> Pool {
    pool_via(fleet, &fleet.known_hosts)
}

/// A pool that trusts `known_hosts` (the fleet's, or the relays' copy).
fn pool_via(fleet: &TestFleet, known_hosts: &std::path::Path) -> Pool {
    Pool::new(load_key(&fleet.key).unwrap(), KnownHosts::load(known_hosts, false).unwrap(), bench_settings())
}

fn bench_settings() -> Settings {
    Settings {
        connect_timeout: Duration::from_secs(120),
        command_timeout: Duration::from_secs(300),
        ..Settings::default()
    }
}

async fn winfleet_round(pool: &Pool, desired: &Desired) -> (Duration, report::Counts, usize) {
    let start = Instant::now();
    let options = RoundOptions { dry_run: false, max_parallel: desired.fleet.max_parallel as usize };
    let reports = engine::round(
        pool,
        &desired.instances.values().collect::<Vec<_>>(),
        options,
        &CancellationToken::new(),
        &Default::default(),
        |_| {},
    )
    .await;
    let failed = reports.iter().filter(|r| r.failed()).count();
    (start.elapsed(), report::totals(&reports), failed)
}

fn command(text: &str, input: String) -> Script {
    // Bench-only commands: fixed text, contents on stdin.
    Script { command: Box::leak(text.to_owned().into_boxed_str()), input }
}

/// WMCO's way for one node: new connection, delete and re-create the
/// directory, upload every file, one session per command.
async fn wmco_node(instance: &Instance, key: &Arc<russh::keys::PrivateKey>, known: &Arc<KnownHosts>) -> usize {
    let target = engine::target(instance);
    let session = Session::connect(&target, key, known, &bench_settings()).await.unwrap();
    let spec: &NodeSpec = &instance.spec;
    let timeout = Duration::from_secs(60);
    let dir = &spec.registries_dir;
    session.run(&command(&format!("rm -rf {dir}"), String::new()), timeout).await.unwrap();
    session.run(&command(&format!("mkdir -p {dir}"), String::new()), timeout).await.unwrap();
    let mut writes = 0;
    for (registry, file) in &spec.registries {
        let path = format!("{dir}/{registry}");
        session.run(&command(&format!("mkdir -p {path}"), String::new()), timeout).await.unwrap();
        let write = command(&format!("cat > {path}/{HOSTS_TOML}"), file.content().to_owned());
        session.run(&write, timeout).await.unwrap();
        writes += 1;
    }
    session.close().await;
    writes
}

/// WMCO's round on the first `nodes` nodes, one after another.
async fn wmco_round(
    desired: &Desired,
    fleet: &TestFleet,
    known_hosts: &std::path::Path,
    nodes: usize,
) -> (Duration, usize) {
    let key = Arc::new(load_key(&fleet.key).unwrap());
    let known = Arc::new(KnownHosts::load(known_hosts, false).unwrap());
    let start = Instant::now();
    let mut writes = 0;
    for instance in desired.instances.values().take(nodes) {
        writes += wmco_node(instance, &key, &known).await;
    }
    (start.elapsed(), writes)
}

async fn floor(fleet: &TestFleet, port: u16, known_hosts: &std::path::Path) -> (Duration, Duration) {
    let key = Arc::new(load_key(&fleet.key).unwrap());
    let known = Arc::new(KnownHosts::load(known_hosts, false).unwrap());
    let node = &fleet.nodes[0];
    let target = winfleet::ssh::Target { address: node.address.clone(), port, username: fleet.user.clone() };
    let mut handshakes = Vec::new();
    for _ in 0..20 {
        let start = Instant::now();
        let session = Session::connect(&target, &key, &known, &bench_settings()).await.unwrap();
        handshakes.push(start.elapsed());
        session.close().await;
    }
    let session = Session::connect(&target, &key, &known, &bench_settings()).await.unwrap();
    let mut round_trips = Vec::new();
    for _ in 0..50 {
        let start = Instant::now();
        session.run(&command("true", String::new()), Duration::from_secs(10)).await.unwrap();
        round_trips.push(start.elapsed());
    }
    (median(handshakes), median(round_trips))
}

/// The floor of a round on warm connections: one empty command on every
/// node through the same pool, with the round's parallelism. Median of 5.
async fn parallel_floor(pool: &Pool, desired: &Desired) -> Duration {
    use futures::StreamExt as _;
    let targets: Vec<_> = desired.instances.values().map(engine::target).collect();
    let empty = command("true", String::new());
    let mut samples = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        let failed = futures::stream::iter(&targets)
            .map(|t| pool.run(t, &empty, true))
            .buffer_unordered(desired.fleet.max_parallel as usize)
            .filter(|r| std::future::ready(r.is_err()))
            .count()
            .await;
        assert_eq!(failed, 0, "an empty command failed");
        samples.push(start.elapsed());
    }
    median(samples)
}

/// Where a no-op observation spends its time beyond the floor: the same
/// 200 scripts through the pool with the round's parallelism, each with
/// one part taken out (bench-only variants of the real script). Medians of 5.
async fn breakdown(pool: &Pool, desired: &Desired) -> Vec<(&'static str, Duration)> {
    use futures::StreamExt as _;
    let targets: Vec<_> = desired.instances.values().map(engine::target).collect();
    let observe: Vec<Script> = desired.instances.values().map(|i| winfleet::dialect::observe(&i.spec, None)).collect();
    let without_sums = observe
        .iter()
        .map(|o| command(o.command, o.input.replace("sha256sum -z -- \"$@\" 2>/dev/null", ":")))
        .collect();
    let without_decode = observe
        .iter()
        .map(|o| {
            let (start, end) = (o.input.find("inp=$(base64").unwrap(), o.input.find("); inp=${inp%x}").unwrap());
            let inputs = format!("inp=$(printf '%s\\n\\nx' '{}')", desired.fleet.posix_registries_dir);
            command(o.command, format!("{}{inputs}{}", &o.input[..start], &o.input[end + 1..]))
        })
        .collect();
    let variants: Vec<(&'static str, Vec<Script>)> = vec![
        ("empty command (the floor)", vec![command("true", String::new()); targets.len()]),
        ("`/bin/sh -s` running `true`", vec![command("/bin/sh -s", "true\n".into()); targets.len()]),
        ("observation without its sha256sum", without_sums),
        ("observation without its base64 decode", without_decode),
        ("observation", observe),
    ];
    let mut rows = Vec::new();
    for (name, scripts) in variants {
        let mut samples = Vec::new();
        for _ in 0..5 {
            let start = Instant::now();
            let runs = futures::stream::iter(targets.iter().zip(&scripts)).map(|(t, s)| pool.run(t, s, true));
            let failed = runs
                .buffer_unordered(desired.fleet.max_parallel as usize)
                .filter(|r| std::future::ready(r.is_err()))
                .count()
                .await;
            assert_eq!(failed, 0, "{name} failed");
            samples.push(start.elapsed());
        }
        rows.push((name, median(samples)));
    }
    rows
}

/// CPU time (user + system) this process has used: winfleet's own share of
/// a round, apart from the 200 sshd servers it shares the cores with.
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or_default().split_whitespace().collect();
    let ticks: u64 = fields.get(11..13).map_or(0, |f| f.iter().filter_map(|t| t.parse::<u64>().ok()).sum());
    Duration::from_millis(ticks * 10)
}

/// CPU time of every process on the machine (from /proc/stat), to tell
/// how busy the cores were during a measurement.
fn machine_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let line = stat.lines().next().unwrap_or_default();
    let ticks: u64 = line.split_whitespace().skip(1).take(3).filter_map(|t| t.parse::<u64>().ok()).sum();
    Duration::from_millis(ticks * 10)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

fn row(name: &str, ours: Duration, wmco: Duration, ansible: Option<Duration>, note: &str) {
    let ratio = |theirs: Duration| format!("{:.1}x", theirs.as_secs_f64() / ours.as_secs_f64().max(1e-9));
    let (ansible, ansible_ratio) = ansible.map_or(("-".into(), "-".into()), |t| (ms(t), ratio(t)));
    println!(
        "{name:<32} {:>10} {:>11} {:>9} {ansible:>11} {ansible_ratio:>9}  {note}",
        ms(ours),
        ms(wmco),
        ratio(wmco)
    );
}

/// Removes what a rollout wrote on every node.
fn clean(fleet: &TestFleet) {
    for node in &fleet.nodes {
        let _ = std::fs::remove_dir_all(node.path("certs.d"));
        let _ = std::fs::remove_dir_all(node.path("systemd"));
    }
}

/// The product's allocator (src/main.rs): the engine runs in this process.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    if let Some(model) = netem::Model::from_env() {
        network::run(&model);
        return;
    }
    let nodes: usize = std::env::var("NODES").ok().and_then(|n| n.parse().ok()).unwrap_or(200);
    let start = Instant::now();
    let fleet = TestFleet::start(nodes);
    println!("fleet: {nodes} sshd nodes up in {}", ms(start.elapsed()));
    let dir = tempfile::tempdir().unwrap();
    let base = repo(&fleet, dir.path(), "mirror0.example.com", fleet.port);
    let changed = repo(&fleet, dir.path(), "elsewhere.example.com", fleet.port);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let (handshake, round_trip) = floor(&fleet, fleet.port, &fleet.known_hosts).await;
        println!("floor: one SSH handshake (connect + key exchange + auth) {:.1} ms; one empty command round trip on a warm connection {:.1} ms",
            handshake.as_secs_f64() * 1000.0, round_trip.as_secs_f64() * 1000.0);

        // WMCO first on a clean fleet, then clean again for winfleet's rollout.
        let (wmco_a, wmco_writes) = wmco_round(&base, &fleet, &fleet.known_hosts, usize::MAX).await;
        let (wmco_b, _) = wmco_round(&changed, &fleet, &fleet.known_hosts, usize::MAX).await;
        let (wmco_c, _) = wmco_round(&changed, &fleet, &fleet.known_hosts, usize::MAX).await;
        clean(&fleet);

        let pool = pool(&fleet);
        let (a, a_counts, a_failed) = winfleet_round(&pool, &base).await;
        let (b, b_counts, b_failed) = winfleet_round(&pool, &changed).await;
        let (c, c_counts, c_failed) = winfleet_round(&pool, &changed).await;
        let floor = parallel_floor(&pool, &changed).await;
        let (own, all) = (cpu(), machine_cpu());
        let (c2, _, _) = winfleet_round(&pool, &changed).await;
        let (own, all) = (cpu() - own, machine_cpu() - all);
        pool.close().await;
        // Ansible last: its CPU-bound runs leave the machine busy for a while.
        let ansible = ansible::column(&fleet, &base, &changed, None).await;
        assert_eq!(a_failed + b_failed + c_failed, 0, "a node failed");
        assert_eq!(c_counts.applied, 0, "the drift check wrote");
        println!();
        println!(
            "{:<32} {:>10} {:>11} {:>9} {:>11} {:>9}",
            format!("figure ({nodes} nodes)"), "winfleet", "WMCO-like", "ratio", "Ansible", "ratio"
        );
        let column = |i: usize| ansible.as_ref().ok().map(|runs| runs[i].time);
        row("(a) initial rollout", a, wmco_a, column(0), &format!("winfleet {} ops applied (cold connections); WMCO {wmco_writes} files", a_counts.applied));
        row("(b) one mirror changed", b, wmco_b, column(1), &format!("winfleet {} writes (warm connections, kept shells)", b_counts.applied));
        row("(c) no-op drift check", c, wmco_c, column(2), &format!("winfleet {} writes, warm connections, kept shells; WMCO rewrites all", c_counts.applied));
        match &ansible {
            Ok(runs) => println!(
                "Ansible: tasks changed per run {}, {}, {}",
                runs[0].changed, runs[1].changed, runs[2].changed
            ),
            Err(why) => println!("Ansible: skipped ({why})"),
        }
        let parallelism = changed.fleet.max_parallel;
        println!(
            "floor: one empty command on each of the {nodes} nodes, warm, {parallelism} at once: {}; \
             (c) again right after it: {} = {:.2}x the floor (first (c): {:.2}x)",
            ms(floor), ms(c2), c2.as_secs_f64() / floor.as_secs_f64(), c.as_secs_f64() / floor.as_secs_f64()
        );
        println!("CPU during that (c): winfleet {}, the machine {} (user+system, of {} available on 2 cores)", ms(own), ms(all), ms(c2 * 2));
        let pool = self::pool(&fleet);
        println!(
            "\nwhat a no-op observation costs on a new channel each time, as before the pool kept shells \
             ({nodes} nodes, warm, {parallelism} at once):"
        );
        let _ = winfleet_round(&pool, &changed).await;
        for (name, time) in breakdown(&pool, &changed).await {
            println!("  {name:<40} {:>8}", ms(time));
        }
        pool.close().await;
    });
}
