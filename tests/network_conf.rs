//! Issue 27, item 1: the node's network configuration, generated from the
//! cluster's Networks as WMCO renders it. The files from a Network with a
//! custom VXLAN port match their golden files (`network-conf.ps1`, parsed
//! by the PowerShell grammar, and hybrid-overlay-node's command line). On
//! real sshd nodes against either API server ([`Backend`]): a join writes
//! them, a new VXLAN port reaches every node's hybrid-overlay-node in the
//! next round, a new service network every node's `network-conf.ps1` (a dry
//! run, as `plan --live`, shows each on every node first and writes
//! nothing), and the round after writes nothing. On a PowerShell node's
//! plan: a new service network restarts kube-proxy (whose pre-script runs
//! the script), a new VXLAN port redefines hybrid-overlay-node and restarts
//! it with kube-proxy, in place. A cluster without the operator's
//! Network gets no file and the round report says why.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::bench_checks::{assert_all_joined, assert_quiet};
use support::controlplane::{Backend, SERVICE_NETWORK, resource};
use support::join::{Bench, bench, logs};
use winfleet::engine::report::NodeResult;
use winfleet::lifecycle::change::LifecycleChange;
use winfleet::lifecycle::facts::{FileFact, LifecycleFacts, ServiceFact};
use winfleet::lifecycle::manifest::{NodeJsonPath, NodeVariable, PreScript, ServiceDef, ServicesManifest};
use winfleet::lifecycle::network::{
    HYBRID_OVERLAY_SERVICE, HybridNetwork, NETWORK_CONF, network_conf_script, with_network,
};
use winfleet::lifecycle::plan::{Context, plan_lifecycle};
use winfleet::lifecycle::resolve;
use winfleet::lifecycle::{LifecycleDirs, LifecycleSpec, Mode, NodeFile};
use winfleet::vocab::Shell;
use winfleet::vocab::report::ServiceState;

#[test]
#[ignore = "entry point of the fake kubelet process that node tests start; not a test"]
fn fake_kubelet_process() {
    support::kubelet::main_from_env();
}

/// WMCO's hybrid-overlay-node and kube-proxy services as its
/// `windows-services` ConfigMap holds them (no custom port).
fn wmco_manifest() -> ServicesManifest {
    let node_name =
        || NodeVariable { name: "NODE_NAME".into(), path: NodeJsonPath::parse("{.metadata.name}").unwrap() };
    let service = |name: &str, command: &str, pre_scripts, dependencies: &[&str], priority| ServiceDef {
        name: name.into(),
        command: command.into(),
        node_variables: vec![node_name()],
        pre_scripts,
        dependencies: dependencies.iter().map(|d| (*d).to_owned()).collect(),
        bootstrap: false,
        priority,
    };
    let hybrid = r"C:\k\hybrid-overlay-node.exe --node NODE_NAME --bootstrap-kubeconfig=C:\k\kubeconfig --cert-dir=C:\k\cni\config --cert-duration=24h --windows-service --logfile C:\var\log\hybrid-overlay\hybrid-overlay.log --k8s-apiserver=https://api-int.example.corp:6443 --k8s-cacert C:\k\bootstrap-ca.crt";
    let proxy = r"C:\k\kube-log-runner.exe -log-file=C:\var\log\kube-proxy\kube-proxy.log C:\k\kube-proxy.exe --config C:\k\kube-proxy.conf --windows-service";
    let conf = PreScript {
        variable: None,
        path: r"C:\Temp\network-conf.ps1 -hostnameOverride NODE_NAME -clusterCIDR NODE_SUBNET -kubeConfigPath C:\k\kubeconfig -kubeProxyConfigPath C:\k\kube-proxy.conf -verbosity 0".into(),
        node_args: vec![
            node_name(),
            NodeVariable {
                name: "NODE_SUBNET".into(),
                path: NodeJsonPath::parse(r"{.metadata.annotations.k8s\.ovn\.org/hybrid-overlay-node-subnet}").unwrap(),
            },
        ],
    };
    ServicesManifest {
        name: "windows-services-network".into(),
        origin: "services.yaml".into(),
        services: vec![
            service(HYBRID_OVERLAY_SERVICE, hybrid, vec![], &[], 2),
            service("kube-proxy", proxy, vec![conf], &[HYBRID_OVERLAY_SERVICE], 3),
        ],
        digest: "ab".repeat(32),
        canonical: String::new(),
        services_at: Default::default(),
    }
}

fn powershell_spec() -> LifecycleSpec {
    let dirs = LifecycleDirs { posix_payload: "payload", posix_units: "units", registries: "certs.d" };
    LifecycleSpec::new(Shell::Powershell, &format!("sha256:{}", "cd".repeat(32)), &wmco_manifest(), dirs)
}

#[test]
fn the_files_rendered_from_a_network_with_a_custom_vxlan_port_match_their_golden_files() {
    let network = HybridNetwork { service_cidr: "172.30.0.0/16".into(), vxlan_port: Some(9898) };
    let spec = with_network(&powershell_spec(), Some(&network), Vec::new());
    let mut failures = Vec::new();
    let script = spec.generated.iter().find(|g| g.path == r"C:\Temp\network-conf.ps1").expect("network-conf.ps1");
    assert_eq!(script.file.display(), script.file.content(), "no secret in it: plans show it whole");
    if let Err(e) = support::check_golden(&support::fixture("network/network-conf.ps1"), script.file.content()) {
        failures.push(e);
    }
    if let Err(e) = support::powershell::check(script.file.content()) {
        failures.push(format!("network-conf.ps1: {e}"));
    }
    let hybrid = spec.services.iter().find(|s| s.name == HYBRID_OVERLAY_SERVICE).unwrap();
    let command = format!("{}\n", hybrid.command);
    if let Err(e) = support::check_golden(&support::fixture("network/hybrid-overlay-node.txt"), &command) {
        failures.push(e);
    }
    support::report(failures);
    assert!(command.ends_with(" --hybrid-overlay-vxlan-port 9898\n"), "{command}");
}

#[test]
fn without_the_operators_network_nothing_is_generated_and_the_manifests_command_stays() {
    let spec = with_network(&powershell_spec(), None, Vec::new());
    assert!(spec.generated.is_empty());
    assert_eq!(spec.services, powershell_spec().services);
}

#[test]
fn a_payload_file_at_the_scripts_path_gives_way_to_the_generated_one() {
    let mut spec = powershell_spec();
    spec.files.push(NodeFile {
        path: r"C:\Temp\network-conf.ps1".into(),
        rel: NETWORK_CONF.into(),
        sha256: "e".repeat(64),
        size: 10,
        mode: 0o644,
        source: "/unused".into(),
    });
    let network = HybridNetwork { service_cidr: "172.30.0.0/16".into(), vxlan_port: None };
    let spec = with_network(&spec, Some(&network), Vec::new());
    assert!(spec.files.is_empty(), "{:?}", spec.files);
    assert_eq!(spec.generated.len(), 1);
}

/// What a PowerShell node configured by `spec` reports: its directories,
/// generated files and services as the spec has them, running.
fn configured(spec: &LifecycleSpec, node: &Value) -> LifecycleFacts {
    let mut facts = LifecycleFacts { home: Some(String::new()), ..LifecycleFacts::default() };
    facts.dirs = spec.directories.iter().cloned().collect();
    for g in &spec.generated {
        let sha256 = Some(g.file.sha256().to_owned());
        facts.files.insert(g.path.clone(), FileFact::Present { key: "1:2:3".into(), sha256 });
    }
    for service in &spec.services {
        let command = resolve::command(service, Some(node), &facts).unwrap();
        let (definition, _) = resolve::definition(Shell::Powershell, service, &command, "").unwrap();
        let fact = ServiceFact { state: ServiceState::Running, definition: Some(definition) };
        facts.services.insert(service.name.clone(), fact);
    }
    facts
}

/// The lifecycle plan of a PowerShell node at the desired version whose
/// cluster network changes from `from` to `to`, in words.
fn maintain(from: HybridNetwork, to: HybridNetwork) -> Vec<String> {
    let subnet = "k8s.ovn.org/hybrid-overlay-node-subnet";
    let node = json!({"metadata": {"name": "win-1", "annotations": {subnet: "10.132.0.0/24"}}});
    let old = with_network(&powershell_spec(), Some(&from), Vec::new());
    let new = with_network(&powershell_spec(), Some(&to), Vec::new());
    let facts = configured(&old, &node);
    let plan = plan_lifecycle(&new, &facts, Context { mode: Mode::Maintain, node: Some(&node), disrupt: true });
    assert!(plan.error.is_none() && plan.waiting.is_empty(), "{:?} {:?}", plan.error, plan.waiting);
    plan.changes
        .iter()
        .map(|c| match c {
            LifecycleChange::Stop { service } => format!("stop {}", service.name),
            LifecycleChange::WriteGenerated { file, .. } => format!("write {}", file.path),
            LifecycleChange::Define { service, .. } => format!("define {}", service.name),
            LifecycleChange::Start { service, why, .. } => format!("start {}: {why}", service.name),
            other => format!("{:?}", other.operation()),
        })
        .collect()
}

#[test]
fn a_new_service_network_rewrites_the_script_and_restarts_kube_proxy_in_place() {
    let network = |cidr: &str| HybridNetwork { service_cidr: cidr.into(), vxlan_port: Some(9898) };
    assert_eq!(
        maintain(network("172.30.0.0/16"), network("172.31.0.0/16")),
        [
            "stop kube-proxy",
            r"write C:\Temp\network-conf.ps1",
            r"start kube-proxy: restart: C:\Temp\network-conf.ps1 changed",
        ]
    );
    assert!(maintain(network("172.30.0.0/16"), network("172.30.0.0/16")).is_empty());
}

#[test]
fn a_new_vxlan_port_redefines_hybrid_overlay_node_and_restarts_it_with_kube_proxy() {
    let network = |port| HybridNetwork { service_cidr: "172.30.0.0/16".into(), vxlan_port: port };
    let restart = [
        "stop kube-proxy",
        "stop hybrid-overlay-node",
        "define hybrid-overlay-node",
        "start hybrid-overlay-node: restart: its definition changed",
        "start kube-proxy: restart: a service it depends on restarts",
    ];
    assert_eq!(maintain(network(Some(9898)), network(Some(4800))), restart);
    assert_eq!(maintain(network(None), network(Some(4800))), restart);
    assert_eq!(maintain(network(Some(4800)), network(None)), restart);
}

const NAMES: [&str; 2] = ["win-net1", "win-net2"];
const NEW_SERVICE_NETWORK: &str = "172.31.0.0/16";

fn operator_network(port: u32) -> Value {
    json!({
        "apiVersion": "operator.openshift.io/v1",
        "kind": "Network",
        "metadata": { "name": "cluster" },
        "spec": {
            "clusterNetwork": [{ "cidr": "10.128.0.0/14", "hostPrefix": 23 }],
            "serviceNetwork": [SERVICE_NETWORK],
            "defaultNetwork": { "type": "OVNKubernetes", "ovnKubernetesConfig": { "hybridOverlayConfig": {
                "hybridClusterNetwork": [{ "cidr": "10.132.0.0/14", "hostPrefix": 23 }],
                "hybridOverlayVXLANPort": port,
            }}},
        },
    })
}

/// Each node's network-conf.ps1 (the path is the lifecycle spec's).
fn scripts(bench: &Bench) -> Vec<String> {
    let spec = bench.desired.specs[&Shell::Posix].lifecycle.clone().unwrap();
    let path = winfleet::payload::layout::payload_node_path(Shell::Posix, NETWORK_CONF, &spec.kube_dir);
    bench.fleet.nodes.iter().map(|n| n.read(&path).unwrap_or_else(|| panic!("{}: no {path}", n.address))).collect()
}

/// Each node's hybrid-overlay-node unit.
fn units(bench: &Bench) -> Vec<String> {
    bench.fleet.nodes.iter().map(|n| n.read("units/hybrid-overlay-node.service").unwrap_or_default()).collect()
}

/// A dry run (what `plan --live` runs): every node's operations name `what`.
async fn planned_on_every_node(bench: &Bench, what: &str) {
    let planned = bench.plan().await;
    assert_eq!(planned.nodes.len(), NAMES.len());
    for node in &planned.nodes {
        let NodeResult::Done { operations, .. } = &node.result else { panic!("{node:?}") };
        assert!(format!("{operations:?}").contains(what), "{} plans {what}: {}", node.address, planned.render_text());
    }
}

async fn a_network_change_reaches_every_node_in_the_next_round(bench: Bench) {
    let networks: Api<DynamicObject> =
        Api::all_with(bench.api.client(), &resource("operator.openshift.io", "v1", "Network", "networks"));
    let object: DynamicObject = serde_json::from_value(operator_network(9898)).unwrap();
    networks.create(&PostParams::default(), &object).await.unwrap();

    let report = bench.round().await;
    assert_all_joined(&bench.fleet, &report);
    assert_eq!(scripts(&bench), vec![network_conf_script(SERVICE_NETWORK); 2]);
    assert!(units(&bench).iter().all(|u| u.contains("--hybrid-overlay-vxlan-port 9898")), "{:?}", units(&bench));

    // A new VXLAN port: hybrid-overlay-node's definition changes (and it
    // restarts) on every node; network-conf.ps1 stays.
    let patch = json!({"spec": {"defaultNetwork": {"ovnKubernetesConfig": {"hybridOverlayConfig": {"hybridOverlayVXLANPort": 4800}}}}});
    networks.patch("cluster", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    planned_on_every_node(&bench, HYBRID_OVERLAY_SERVICE).await;
    assert!(units(&bench).iter().all(|u| u.contains("--hybrid-overlay-vxlan-port 9898")), "the dry run wrote nothing");
    let before: Vec<_> = bench.fleet.nodes.iter().map(|n| n.service_pids()).collect();
    let report = bench.round().await;
    assert!(!report.failed(), "{}\n{}", report.render_text(), logs(&bench.fleet));
    let units = units(&bench);
    assert!(
        units.iter().all(|u| u.contains("--hybrid-overlay-vxlan-port 4800") && !u.contains("9898")),
        "{units:?}\n{}",
        report.render_text()
    );
    for (node, pids) in bench.fleet.nodes.iter().zip(&before) {
        let now = node.service_pids();
        assert_ne!(now.get(HYBRID_OVERLAY_SERVICE), pids.get(HYBRID_OVERLAY_SERVICE), "restarted on {}", node.address);
        assert_eq!(now.get("kubelet"), pids.get("kubelet"), "the kubelet is not restarted on {}", node.address);
    }
    assert_quiet(&bench.round().await);

    // A new service network: every node's network-conf.ps1 is rewritten.
    let configs: Api<DynamicObject> =
        Api::all_with(bench.api.client(), &resource("config.openshift.io", "v1", "Network", "networks"));
    let patch = json!({"spec": {"serviceNetwork": [NEW_SERVICE_NETWORK]}});
    configs.patch("cluster", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    planned_on_every_node(&bench, "network-conf.ps1").await;
    assert_eq!(scripts(&bench), vec![network_conf_script(SERVICE_NETWORK); 2], "the dry run wrote nothing");
    let report = bench.round().await;
    assert!(!report.failed(), "{}\n{}", report.render_text(), logs(&bench.fleet));
    assert_eq!(scripts(&bench), vec![network_conf_script(NEW_SERVICE_NETWORK); 2], "{}", report.render_text());
    assert!(report.render_text().contains("network-conf.ps1"), "shown as a file change: {}", report.render_text());
    assert_quiet(&bench.round().await);

    // The operator's Network gone (as on a cluster that is not OpenShift):
    // the report says why nothing is generated.
    networks.delete("cluster", &Default::default()).await.unwrap();
    let report = bench.round().await;
    let note = report.cluster.as_ref().unwrap().network_note.clone().unwrap_or_default();
    assert!(note.contains("no network-conf.ps1"), "{}", report.render_text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_change_reaches_every_node_in_the_next_round_on_the_in_memory_server() {
    a_network_change_reaches_every_node_in_the_next_round(bench(Backend::InMemory, &NAMES).await).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_change_reaches_every_node_in_the_next_round_on_the_real_control_plane() {
    let bench = bench(Backend::Real, &NAMES).await;
    a_network_change_reaches_every_node_in_the_next_round(bench).await;
}
