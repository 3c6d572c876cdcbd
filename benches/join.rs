//! Joining fresh nodes, end to end, on both API servers side by side in
//! one run: N posix sshd nodes (tests/support/fleet.rs, each with its own
//! host name) from an empty cluster to Ready, labelled and uncordoned by
//! one winfleet round — payload, services, CSRs, Node metadata — first
//! against the in-memory API (tests/support/apiserver), then against the
//! real control plane (kube-apiserver and kube-controller-manager v1.37.2,
//! tests/support/controlplane.rs), where the fake kubelet of each node does
//! a real TLS bootstrap with the token winfleet wrote, kube-controller-manager
//! signs the client CSR winfleet approved, and the kubelet registers its
//! own Node with that certificate (tests/support/join.rs, the harness of
//! tests/real_cluster_join.rs).
//!
//! The phases are the fleet's: each ends when the last node has passed it,
//! measured from outside winfleet (file times on the nodes, a watch on
//! Nodes and CSRs, the round's per-node callback):
//! 1. cluster read, SSH facts and payload: the cluster observed, every
//!    node observed and its payload written;
//! 2. services: every node's round done (bootstrap services started);
//! 3. CSR approve+sign: every kubelet client CSR approved and issued;
//! 4. Node registered+metadata: every Node with winfleet's labels;
//! 5. Ready+uncordoned: every Node Ready, uncordoned, at the version;
//! 6. total: the round returned (the last CSR pass included).
//!
//! `cargo bench --bench join` (50 nodes; `-- --nodes N` or `NODES=N`).
//! Needs root (host names) and Go (the control plane; without it only the
//! in-memory column is measured). The joins poll every 200 ms, as the
//! tests do (the product's default is 5 s).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr, missing_docs)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::runtime::watcher;
use support::controlplane::Backend;
use support::join::{Bench, bench, logs};
use winfleet::cluster::join::{BYOH_LABEL, JoinResult, WORKER_LABEL};
use winfleet::desired::model::Instance;
use winfleet::engine::host::SshHost;
use winfleet::lifecycle::VERSION_ANNOTATION;

const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";

/// The phases, in order, as the table names them.
const PHASES: [&str; 6] = [
    "cluster read, SSH facts and payload",
    "services (bootstrap, node round done)",
    "CSR approve+sign (client CSRs issued)",
    "Node registered+metadata",
    "Ready+uncordoned",
    "total",
];

/// When each object first reached each milestone, from the watch.
#[derive(Default)]
struct Seen {
    /// Client CSRs: name → issued.
    issued: BTreeMap<String, Instant>,
    /// Nodes: name → with winfleet's labels.
    labelled: BTreeMap<String, Instant>,
    /// Nodes: name → Ready, uncordoned, at the version.
    joined: BTreeMap<String, Instant>,
}

fn note_csr(seen: &Mutex<Seen>, csr: &CertificateSigningRequest) {
    let name = csr.metadata.name.clone().unwrap_or_default();
    if csr.spec.signer_name != CLIENT_SIGNER {
        return;
    }
    if csr.status.as_ref().is_some_and(|s| s.certificate.is_some()) {
        seen.lock().unwrap().issued.entry(name).or_insert_with(Instant::now);
    }
}

fn note_node(seen: &Mutex<Seen>, node: &Node) {
    let name = node.metadata.name.clone().unwrap_or_default();
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let now = Instant::now();
    let mut seen = seen.lock().unwrap();
    if labels.contains_key(WORKER_LABEL) && labels.contains_key(BYOH_LABEL) {
        seen.labelled.entry(name.clone()).or_insert(now);
    }
    let annotated = node.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(VERSION_ANNOTATION));
    let schedulable = node.spec.as_ref().and_then(|s| s.unschedulable) != Some(true);
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    if annotated && schedulable && ready {
        seen.joined.entry(name).or_insert(now);
    }
}

/// Watches CSRs and Nodes until dropped.
fn watch(client: kube::Client, seen: Arc<Mutex<Seen>>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let csrs = watcher(Api::<CertificateSigningRequest>::all(client.clone()), Default::default());
        let nodes = watcher(Api::<Node>::all(client), Default::default());
        let csrs = csrs.for_each(|e| {
            if let Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) = e {
                note_csr(&seen, &o);
            }
            async {}
        });
        let nodes = nodes.for_each(|e| {
            if let Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) = e {
                note_node(&seen, &o);
            }
            async {}
        });
        futures::join!(csrs, nodes);
    })
}

/// The newest modification time of the files under `dir` that winfleet
/// wrote: not the kubeconfig the kubelet writes there after its bootstrap.
fn newest(dir: &Path) -> Option<SystemTime> {
    let mut out = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let meta = entry.metadata().ok()?;
        let t = if meta.is_dir() {
            newest(&entry.path())
        } else if entry.file_name() == "kubeconfig" {
            None
        } else {
            meta.modified().ok()
        };
        out = out.max(t);
    }
    out
}

/// One backend's phase ends, seconds from the round's start.
type Ends = [f64; 6];

fn last(times: impl Iterator<Item = Instant>, start: Instant, want: usize, what: &str) -> f64 {
    let times: Vec<Instant> = times.collect();
    assert_eq!(times.len(), want, "{what}: {} of {want}", times.len());
    times.iter().map(|t| t.duration_since(start).as_secs_f64()).fold(0.0, f64::max)
}

async fn measure(backend: Backend, names: &[String]) -> Ends {
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut bench: Bench = bench(backend, &refs).await;
    bench.options.max_parallel = 32;
    bench.options.join.register_timeout = Duration::from_secs(600);
    bench.options.join.ready_timeout = Duration::from_secs(600);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let watcher = watch(bench.api.client(), Arc::clone(&seen));
    tokio::time::sleep(Duration::from_millis(500)).await;

    let instances: Vec<&Instance> = bench.desired.instances.values().collect();
    let host = SshHost { pool: &bench.pool };
    let mut rounds: Vec<Instant> = Vec::new();
    let (start, wall) = (Instant::now(), SystemTime::now());
    let report = winfleet::reconcile::round(
        Some(&bench.cluster),
        &bench.pool,
        &host,
        &bench.desired,
        &instances,
        &bench.options,
        |_| rounds.push(Instant::now()),
    )
    .await;
    let total = start.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_millis(500)).await;
    watcher.abort();

    let joins = &report.cluster.as_ref().unwrap().joins;
    let failed: Vec<String> = joins
        .iter()
        .filter(|j| j.result != JoinResult::Joined)
        .map(|j| format!("{}: {:?}", j.address, j.result))
        .collect();
    if !failed.is_empty() || joins.len() != names.len() {
        panic!(
            "{backend:?}: {} of {} joined:\n{}\n{}",
            joins.len() - failed.len(),
            names.len(),
            failed.join("\n"),
            logs(&bench.fleet)
        );
    }
    let payload = bench.fleet.nodes.iter().map(|n| {
        let t = newest(&n.path("payload")).expect("the payload on the node");
        start + t.duration_since(wall).unwrap_or_default()
    });
    let n = names.len();
    let seen = seen.lock().unwrap();
    [
        last(payload, start, n, "payloads written"),
        last(rounds.iter().copied(), start, n, "node rounds"),
        last(seen.issued.values().copied(), start, n, "client CSRs issued"),
        last(seen.labelled.values().copied(), start, n, "Nodes labelled"),
        last(seen.joined.values().copied(), start, n, "Nodes Ready and uncordoned"),
        total,
    ]
}

fn nodes() -> usize {
    let args: Vec<String> = std::env::args().collect();
    let flag = args.iter().position(|a| a == "--nodes").and_then(|i| args.get(i + 1)).cloned();
    flag.or_else(|| std::env::var("NODES").ok()).and_then(|v| v.parse().ok()).unwrap_or(50)
}

fn table(n: usize, memory: &Ends, real: Option<&Ends>) {
    println!(
        "\n{n} posix nodes, empty cluster → Ready and uncordoned, one round (seconds; a phase ends when its last node is through)\n"
    );
    println!("| phase | in-memory API | real control plane | real / in-memory |");
    println!("|---|---|---|---|");
    let mut previous = (0.0, 0.0);
    for (i, phase) in PHASES.iter().enumerate() {
        let (m, r) = (memory[i], real.map_or(f64::NAN, |r| r[i]));
        let (dm, dr) = if i + 1 == PHASES.len() { (m, r) } else { (m - previous.0, r - previous.1) };
        let ratio = if dm > 0.0 && !dr.is_nan() { format!("{:.1}×", dr / dm) } else { "-".into() };
        let cell = |d: f64, at: f64| if d.is_nan() { "-".to_owned() } else { format!("{d:.2} (at {at:.2})") };
        println!("| {phase} | {} | {} | {ratio} |", cell(dm, m), cell(dr, r));
        previous = (m, r);
    }
}

fn main() {
    if std::env::var_os(support::kubelet::ARGS_VAR).is_some() {
        // A node's kubelet: the payload's wrapper runs this binary.
        support::kubelet::main_from_env();
        return;
    }
    let n = nodes();
    let names: Vec<String> = (1..=n).map(|i| format!("win-join-{i:02}")).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        println!("joining {n} nodes on the in-memory API");
        let memory = measure(Backend::InMemory, &names).await;
        table(n, &memory, None);
        println!(
            "\njoining {n} nodes on the real control plane (kube-apiserver {})",
            support::controlplane::KUBERNETES_VERSION
        );
        let real = measure(Backend::Real, &names).await;
        table(n, &memory, Some(&real));
    });
}
