//! A Windows MachineSet scaled from 0 to N (20) in Git until every Machine
//! has a Ready Node at the desired version, time per phase: winfleet's
//! rounds against "WMCO's strategy" on the same transport, side by side in
//! one run, under each Machine API: the project's model of it on the
//! in-memory API (tests/support/machine_model.rs) and machine-api-operator's
//! real MachineSet, Machine and nodelink controllers on the real control
//! plane (tests/support/machine_api_real.rs). Either way the Machines' VMs
//! are real sshd nodes of the tests' cloud (tests/support/machine_provider.rs,
//! machine_bench.rs).
//!
//! - winfleet: rounds back to back (200 ms apart, as the cluster watch
//!   starts one when a Machine appears or changes phase) until the round
//!   reports the MachineSet Ready; the product's defaults (32 nodes at
//!   once, a VM that does not answer SSH yet is Waiting till a next round).
//!   Each round is printed (when it started and ended, what it did).
//! - WMCO's strategy: one Machine at a time, as WMCO's machine controller
//!   configures them. The cloud provisions every Machine at once (that is
//!   the Machine API's, not WMCO's); the bench holds them all out of
//!   winfleet's rounds (the `windowsmachineconfig.openshift.io/ignore`
//!   label) and releases them one by one: for each, wait for SSH, then
//!   WMCO's per-file transfer of the payload into the payload directory (a
//!   new connection, one SSH session per command, a `.tar.gz` per file over
//!   a new SFTP session: tests/support/wmco_transfer.rs, as in the
//!   lifecycle bench), then winfleet's rounds for that Machine alone (its
//!   payload already in place: services, CSR approval, Node metadata, the
//!   Ready wait) until it is Ready; then the next Machine.
//!
//! A phase ends when the last Machine is through it, measured from outside
//! winfleet (a watch on Machines, Nodes and CSRs; an SSH banner probe of
//! each VM; the round's per-node callback), in seconds from the commit
//! that scales the MachineSet.
//!
//! `cargo bench --bench machines` (MACHINES=20; FILES=20 and MIB=20 pad the
//! payload with files about as compressible as Windows binaries;
//! MACHINE_API=model|real|both, both by default: the real controllers'
//! case is skipped, saying why, when Go cannot build them or the control
//! plane). `NET=lan|dc|wan|edge` (or `RTT_MS=`, `BANDWIDTH_MBIT=`) puts
//! the modelled network of tests/support/netem.rs between winfleet (and
//! WMCO's transfer) and every VM's sshd; the API server stays local. Needs
//! root (each VM has its own host name).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr, missing_docs)]

#[path = "../tests/support/netem.rs"]
mod netem;
#[path = "../tests/support/mod.rs"]
mod support;
#[path = "machines/watch.rs"]
mod watch;
#[path = "../tests/support/wmco_transfer.rs"]
mod wmco_transfer;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::{DynamicObject, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use support::controlplane::Backend;
use support::machine_bench::{MAPI, MachineApi, MachineBench, machine_set_ready};
use watch::{Seen, Shared, machine_api, watch};
use winfleet::desired::model::Instance;
use winfleet::engine::host::SshHost;
use winfleet::engine::report::NodeResult;
use winfleet::reconcile::machines::{MachineStep, machine_instances};
use winfleet::reconcile::report::RoundReport;
use winfleet::ssh::{KnownHosts, Session, load_key};

const IGNORE: &str = "windowsmachineconfig.openshift.io/ignore";

const PHASES: [&str; 7] = [
    "Machines created (MachineSet controller)",
    "all Provisioned with an address (provider)",
    "SSH answering (every VM's banner)",
    "configured (payload, services: node round done)",
    "CSRs approved (client certificates issued)",
    "Node Ready (at the version, uncordoned)",
    "total (a round reports the MachineSet Ready)",
];

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn api_name(api: MachineApi) -> &'static str {
    match api {
        MachineApi::Model => "the project's Machine API model (in-memory API)",
        MachineApi::Real => "machine-api-operator's controllers (real control plane)",
    }
}

/// The bench under `api` with the payload padded by FILES files of MIB
/// MiB in all, its VMs behind `net`'s relays when a network is modelled
/// (the relays are returned: dropped, they stop).
async fn start(api: MachineApi, net: Option<&netem::Model>, n: usize) -> (MachineBench, Option<netem::Netem>) {
    let backend = if api == MachineApi::Real { Backend::Real } else { Backend::InMemory };
    let mut bench = MachineBench::start_on(backend, api, n, 0, Some(0)).await;
    let relays = net.map(|model| {
        let (upstreams, port): (Vec<SocketAddr>, u16) = {
            let fleet = bench.cloud.fleet();
            let vms = fleet.nodes.iter().take(n);
            (vms.map(|v| format!("{}:{}", v.address, v.port).parse().unwrap()).collect(), fleet.port)
        };
        // The relays run their own runtime: started off this one.
        let model = model.clone();
        let relays = std::thread::spawn(move || netem::Netem::start(&model, &upstreams)).join().unwrap();
        let known = bench.cloud.dir.join("known_hosts.relayed");
        relays.known_hosts(&bench.cloud.known_hosts, port, &known);
        bench.route(relays.port, known);
        relays
    });
    bench.repin(|source| wmco_transfer::binaries(&source.join("extra"), env("FILES", 20), env("MIB", 20)));
    bench.options.max_parallel = bench.desired.fleet.max_parallel as usize;
    bench.options.join.register_timeout = Duration::from_secs(300);
    bench.options.join.ready_timeout = Duration::from_secs(300);
    let first = bench.round().await;
    assert!(!first.failed(), "{}", first.render_text());
    (bench, relays)
}

/// One whole-fleet round, noting each node round done; and the bytes sent.
async fn round(bench: &MachineBench, seen: &Shared) -> (RoundReport, u64) {
    let instances: Vec<&Instance> = bench.desired.instances.values().collect();
    let host = SshHost { pool: &bench.pool };
    let on_node = |r: &winfleet::engine::report::NodeReport| {
        if matches!(r.result, NodeResult::Done { .. }) {
            seen.lock().unwrap().configured.entry(r.address.clone()).or_insert_with(Instant::now);
        }
    };
    let options = &bench.options;
    let report = winfleet::reconcile::round(
        Some(&bench.cluster),
        &bench.pool,
        &host,
        &bench.desired,
        &instances,
        options,
        on_node,
    )
    .await;
    let sent = report.nodes.iter().filter_map(|n| n.lifecycle.as_ref()).map(|l| l.uploaded_bytes).sum();
    (report, sent)
}

/// What a round did, in one line: its Machines per step, the node rounds
/// that changed something, the joins.
fn round_line(report: &RoundReport) -> String {
    let Some(cluster) = &report.cluster else { return "no cluster part".into() };
    let mut steps: BTreeMap<&str, usize> = BTreeMap::new();
    for m in &cluster.machines.machines {
        *steps.entry(m.step.name()).or_default() += 1;
    }
    let steps: Vec<String> = steps.iter().map(|(s, n)| format!("{n} {s}")).collect();
    let changed = report.nodes.iter().filter(|n| n.has_changes()).count();
    let joined = cluster.joins.iter().filter(|j| j.result == winfleet::cluster::join::JoinResult::Joined).count();
    format!(
        "Machines [{}]; {changed} node rounds changed files; {} joins ({joined} joined)",
        steps.join(", "),
        cluster.joins.len()
    )
}

/// Rounds 200 ms apart until `done`; returns the bytes sent. `trace`:
/// each round printed, from `since`.
async fn rounds_until(
    bench: &MachineBench,
    seen: &Shared,
    trace: Option<Instant>,
    done: impl Fn(&RoundReport) -> bool,
) -> u64 {
    let (deadline, mut sent) = (Instant::now() + Duration::from_secs(1800), 0);
    loop {
        let began = Instant::now();
        let (report, bytes) = round(bench, seen).await;
        if let Some(since) = trace {
            let at = |t: Instant| t.duration_since(since).as_secs_f64();
            println!("    round {:6.2} → {:6.2} s: {}", at(began), at(Instant::now()), round_line(&report));
        }
        sent += bytes;
        if done(&report) {
            return sent;
        }
        assert!(Instant::now() < deadline, "not done in 30 min; the last round said:\n{}", report.render_text());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The Machines' names, once there are `n`.
async fn machines(bench: &MachineBench, n: usize) -> Vec<DynamicObject> {
    let api = Api::<DynamicObject>::namespaced_with(bench.api.client(), MAPI, &machine_api());
    loop {
        let mut list = api.list(&Default::default()).await.unwrap().items;
        if list.len() >= n {
            list.sort_by_key(ResourceExt::name_any);
            return list;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn label(bench: &MachineBench, machine: &str, ignore: bool) {
    let api = Api::<DynamicObject>::namespaced_with(bench.api.client(), MAPI, &machine_api());
    let value = if ignore { json!("true") } else { Value::Null };
    let patch = json!({ "metadata": { "labels": { IGNORE: value } } });
    api.patch(machine, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

/// The instance winfleet makes of Machine `name` (once it has an address).
async fn instance(bench: &MachineBench, name: &str) -> Instance {
    loop {
        let facts = winfleet::cluster::observe::observe(&bench.cluster.client).await.unwrap();
        let ip = facts.machines.get(name).and_then(|m| m.internal_ip.clone());
        let found =
            ip.and_then(|ip| machine_instances(&bench.desired, &facts, &[]).into_iter().find(|i| i.address == ip));
        if let Some(instance) = found {
            return instance;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// WMCO's strategy: one Machine at a time (see the module's doc); returns
/// the bytes WMCO's transfer sent and those winfleet's rounds sent.
async fn wmco(bench: &MachineBench, seen: &Shared, n: usize, archives: &BTreeMap<String, PathBuf>) -> (u64, u64) {
    let key = Arc::new(load_key(&bench.cloud.key).unwrap());
    let known = Arc::new(KnownHosts::load(&bench.cloud.known_hosts, false).unwrap());
    // The round that applies the scale-up observed the cluster before its
    // write: no Machine is in it. Every Machine is held out at once.
    let (first, _) = round(bench, seen).await;
    assert!(first.cluster.as_ref().unwrap().machines.machines.is_empty(), "{}", first.render_text());
    let all = machines(bench, n).await;
    for machine in &all {
        label(bench, &machine.name_any(), true).await;
    }
    let (mut wmco_sent, mut winfleet_sent) = (0, 0);
    let (mut transfers, mut joins) = (Duration::ZERO, Duration::ZERO);
    for machine in &all {
        let name = machine.name_any();
        let began = Instant::now();
        label(bench, &name, false).await;
        let instance = instance(bench, &name).await;
        // WMCO waits for SSH, then transfers file by file.
        loop {
            match Session::connect(&winfleet::engine::target(&instance), &key, &known, &wmco_transfer::settings()).await
            {
                Ok(session) => break session.close().await,
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
        wmco_sent += wmco_transfer::node(&instance, archives, "payload", &key, &known).await;
        let transferred = Instant::now();
        transfers += transferred - began;
        let ready = |r: &RoundReport| {
            let c = r.cluster.as_ref();
            c.is_some_and(|c| c.machines.machines.iter().any(|m| m.machine == name && m.step == MachineStep::Ready))
        };
        winfleet_sent += rounds_until(bench, seen, None, ready).await;
        joins += transferred.elapsed();
    }
    let per = |d: Duration| d.as_secs_f64() / all.len().max(1) as f64;
    println!(
        "  per Machine: released, SSH answering and WMCO's transfer {:.2} s; winfleet's rounds to Ready {:.2} s",
        per(transfers),
        per(joins)
    );
    winfleet_sent += rounds_until(bench, seen, None, machine_set_ready).await;
    (wmco_sent, winfleet_sent)
}

/// Each phase's end, seconds from the scale-up.
type Ends = [f64; 7];

fn last(times: &BTreeMap<String, Instant>, start: Instant, want: usize, what: &str) -> f64 {
    if times.len() != want {
        println!("  note: {what}: {} seen, {want} expected", times.len());
    }
    times.values().map(|t| t.duration_since(start).as_secs_f64()).fold(0.0, f64::max)
}

/// Scales the MachineSet from 0 to `n` under `api` and measures;
/// `one_at_a_time`: WMCO's strategy. Returns the phase ends and the bytes sent.
async fn measure(api: MachineApi, net: Option<&netem::Model>, n: usize, one_at_a_time: bool) -> (Ends, u64) {
    let (mut bench, _relays) = start(api, net, n).await;
    let seen = Arc::new(Mutex::new(Seen {
        version: bench.version(),
        port: bench.desired.fleet.default_port,
        ..Seen::default()
    }));
    let scratch = tempfile::tempdir().unwrap();
    let archives =
        if one_at_a_time { wmco_transfer::archives(&bench.payload, scratch.path()) } else { BTreeMap::new() };
    let watcher = watch(bench.api.client(), Arc::clone(&seen));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let start = Instant::now();
    bench.scale_in_git(Some(u32::try_from(n).unwrap()));
    let sent = if one_at_a_time {
        let (wmco, winfleet) = wmco(&bench, &seen, n, &archives).await;
        println!("  WMCO's transfer sent {}, winfleet's rounds {}", mib(wmco), mib(winfleet));
        wmco + winfleet
    } else {
        rounds_until(&bench, &seen, Some(start), machine_set_ready).await
    };
    let total = start.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_millis(500)).await;
    watcher.abort();
    let s = seen.lock().unwrap();
    let addresses: BTreeSet<String> = bench.cloud.addresses().into_values().collect();
    let configured: BTreeMap<String, Instant> =
        s.configured.iter().filter(|(a, _)| addresses.contains(*a)).map(|(a, t)| (a.clone(), *t)).collect();
    let ends = [
        last(&s.created, start, n, "Machines created"),
        last(&s.provisioned, start, n, "Machines provisioned"),
        last(&s.answering, start, n, "VMs answering SSH"),
        last(&configured, start, n, "Machines configured"),
        last(&s.issued, start, n, "client CSRs issued"),
        last(&s.ready, start, n, "Nodes Ready"),
        total,
    ];
    (ends, sent)
}

fn mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / f64::from(1u32 << 20))
}

fn table(n: usize, api: MachineApi, ours: &Ends, theirs: &Ends) {
    println!(
        "\nMachineSet 0 → {n} under {}, every Machine a Ready Node (seconds from the scale-up; a phase ends when its \
         last Machine is through it)\n",
        api_name(api)
    );
    println!("| phase | winfleet | WMCO's strategy | WMCO / winfleet |");
    println!("|---|---|---|---|");
    let mut previous = (0.0, 0.0);
    for (i, phase) in PHASES.iter().enumerate() {
        let (a, b) = (ours[i], theirs[i]);
        let (da, db) = if i + 1 == PHASES.len() { (a, b) } else { (a - previous.0, b - previous.1) };
        let ratio = if da > 0.005 { format!("{:.1}×", db / da) } else { "-".into() };
        println!("| {phase} | {da:.2} (at {a:.2}) | {db:.2} (at {b:.2}) | {ratio} |");
        previous = (a, b);
    }
}

/// The Machine APIs asked for (MACHINE_API), the real one only when Go
/// can build its controllers and the control plane (else a line says why).
fn machine_apis() -> Vec<MachineApi> {
    let asked = std::env::var("MACHINE_API").unwrap_or_else(|_| "both".into());
    let mut apis = match asked.as_str() {
        "model" => vec![MachineApi::Model],
        "real" => vec![MachineApi::Real],
        "both" => vec![MachineApi::Model, MachineApi::Real],
        other => panic!("MACHINE_API={other}: model, real or both"),
    };
    if apis.contains(&MachineApi::Real) {
        let built = support::controlplane::ensure_built().and_then(|_| support::machine_api_real::ensure_built());
        if let Err(why) = built {
            println!("skipped: the case under machine-api-operator's controllers (they cannot be built here: {why})");
            apis.retain(|a| *a == MachineApi::Model);
        }
    }
    apis
}

fn main() {
    if std::env::var_os(support::kubelet::ARGS_VAR).is_some() {
        // A Machine's kubelet: the payload's wrapper runs this binary.
        support::kubelet::main_from_env();
        return;
    }
    let n = env("MACHINES", 20);
    let net = netem::Model::from_env();
    let apis = machine_apis();
    match &net {
        Some(model) => {
            let relays = netem::Netem::start(model, &["127.0.0.1:9".parse().unwrap()]);
            let probe = relays.probe(((model.mbit * 2.0 / 8.0) as usize).clamp(2, 64));
            println!("network model {} between winfleet and the VMs; {}", model.describe(), probe.describe());
        }
        None => println!("loopback: no network model between winfleet and the VMs"),
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let mut tables = Vec::new();
        for api in apis {
            println!("\nunder {}:\nwinfleet: MachineSet 0 → {n}", api_name(api));
            let (ours, ours_sent) = measure(api, net.as_ref(), n, false).await;
            println!("  winfleet sent {}", mib(ours_sent));
            println!("WMCO's strategy: MachineSet 0 → {n}, one Machine at a time");
            let (theirs, _) = measure(api, net.as_ref(), n, true).await;
            tables.push((api, ours, theirs));
        }
        for (api, ours, theirs) in &tables {
            table(n, *api, ours, theirs);
        }
    });
}
