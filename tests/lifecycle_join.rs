//! A pushed instance becomes a Node, end to end: real sshd nodes with their
//! own host names, a payload whose kubelet is the fake kubelet of
//! tests/support/kubelet.rs (a real process started by the systemctl shim
//! from the unit winfleet wrote), and the in-memory API server served over
//! loopback, which issues the kubelet's certificates once winfleet approves
//! its CSRs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use support::apiserver::{ApiServer, Served, fixtures};
use support::fleet::TestFleet;
use winfleet::cluster::connect::Cluster;
use winfleet::cluster::join::{JoinOptions, JoinResult};
use winfleet::desired::model::{Desired, Instance};
use winfleet::engine::host::SshHost;
use winfleet::lifecycle::PayloadState;
use winfleet::payload::Payload;
use winfleet::reconcile::{self, Options, report::RoundReport};
use winfleet::ssh::{KnownHosts, Pool, Settings, load_key};

#[test]
#[ignore = "entry point of the fake kubelet process that node tests start; not a test"]
fn fake_kubelet_process() {
    support::kubelet::main_from_env();
}

const TOKEN: &str = "abcdef.0123456789abcdef";

/// The posix services manifest: containerd and the (fake) kubelet start
/// before the Node exists; hybrid-overlay-node needs the Node's name.
fn services_manifest() -> String {
    let services = serde_json::json!([
        { "name": "containerd", "path": "payload/containerd/containerd --config payload/containerd/containerd.toml",
          "bootstrap": true, "priority": 0 },
        { "name": "kubelet",
          "path": "payload/kube-node/kubelet --config=payload/kubelet.conf --bootstrap-kubeconfig=payload/bootstrap-kubeconfig --kubeconfig=payload/kubeconfig --node-labels=node.openshift.io/os_id=Windows --node-ip=NODE_IP",
          "powershellPreScripts": [{ "variableName": "NODE_IP", "path": "set -- $SSH_CONNECTION; echo $3", "NodeArgs": null }],
          "dependencies": ["containerd"], "bootstrap": true, "priority": 1 },
        { "name": "hybrid-overlay-node", "path": "payload/hybrid-overlay-node --node NODE_NAME",
          "nodeVariablesInCommand": [{ "name": "NODE_NAME", "nodeObjectJsonPath": "{.metadata.name}" }],
          "dependencies": ["kubelet"], "bootstrap": false, "priority": 2 },
    ]);
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: windows-services-test\n  namespace: openshift-windows-machine-config-operator\ndata:\n  files: '[]'\n  services: '{}'\n",
        services.to_string().replace('\'', "''")
    )
}

fn executable(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

fn payload(root: &Path) -> PathBuf {
    let dir = root.join("payload-src");
    executable(&dir.join("kube-node/kubelet"), &support::kubelet::wrapper_script());
    executable(&dir.join("containerd/containerd"), "#!/bin/sh\nexec sleep 3600\n");
    fs::write(dir.join("containerd/containerd.toml"), "version = 2\n").unwrap();
    executable(&dir.join("hybrid-overlay-node"), "#!/bin/sh\necho \"hybrid overlay for $2\"\nexec sleep 3600\n");
    dir
}

struct Setup {
    fleet: TestFleet,
    server: ApiServer,
    _served: Served,
    cluster: Cluster,
    desired: Desired,
    payload: Arc<Payload>,
    pool: Pool,
    _repo: tempfile::TempDir,
}

async fn setup(names: &[&str]) -> Setup {
    let fleet = TestFleet::start_named(names);
    for node in &fleet.nodes {
        node.install_systemctl("units");
    }
    let server = ApiServer::new();
    let served = server.serve().await;
    let ca = server.ca_pem();
    server.seed(fixtures::bootstrap_secret(TOKEN, &ca));
    server.seed(fixtures::infrastructure(&served.url));
    server.seed(fixtures::network("172.30.0.0/16"));
    server.seed(fixtures::controller_config(&ca));
    server.add_token(TOKEN, "system:bootstrap:abcdef", &["system:bootstrappers", "system:bootstrappers:worker"]);
    let payload = Arc::new(Payload::load(&payload(fleet.dir())).unwrap());
    let repo = tempfile::tempdir().unwrap();
    let fleet_yaml = format!(
        "{}  payload:\n    digest: {}\n    posixDir: payload\n  services:\n    posixDir: units\n",
        fleet.fleet_yaml(),
        payload.digest
    );
    fs::write(repo.path().join("fleet.yaml"), fleet_yaml).unwrap();
    fs::write(repo.path().join("services.yaml"), services_manifest()).unwrap();
    let mut list = String::from(
        "apiVersion: winfleet.io/v1alpha1\nkind: WindowsInstanceList\nmetadata:\n  name: join\nspec:\n  instances:\n",
    );
    for node in &fleet.nodes {
        let _ = writeln!(list, "  - address: {}\n    labels: {{example.com/team: payments}}", node.address);
    }
    fs::write(repo.path().join("instances.yaml"), list).unwrap();
    let loaded = winfleet::desired::load(&winfleet::source::read_worktree(repo.path()).unwrap(), Default::default());
    let desired = loaded.desired.unwrap_or_else(|| panic!("{:#?}", loaded.diagnostics));
    let pool = Pool::new(
        load_key(&fleet.key).unwrap(),
        KnownHosts::load(&fleet.known_hosts, false).unwrap(),
        Settings::default(),
    );
    let cluster = Cluster { client: server.client(), url: served.url.clone() };
    Setup { fleet, server, _served: served, cluster, desired, payload, pool, _repo: repo }
}

fn options(setup: &Setup) -> Options {
    Options {
        max_parallel: 8,
        whole_fleet: true,
        payload: PayloadState::Loaded(Arc::clone(&setup.payload)),
        join: JoinOptions {
            max_parallel: 8,
            register_timeout: Duration::from_secs(60),
            ready_timeout: Duration::from_secs(60),
            poll: Duration::from_millis(200),
        },
        ..Options::default()
    }
}

async fn round(setup: &Setup) -> RoundReport {
    let instances: Vec<&Instance> = setup.desired.instances.values().collect();
    let host = SshHost { pool: &setup.pool };
    reconcile::round(Some(&setup.cluster), &setup.pool, &host, &setup.desired, &instances, &options(setup), |_| {})
        .await
}

/// The services' logs and the systemctl calls of every node (for failures).
fn logs(fleet: &TestFleet) -> String {
    let mut out = String::new();
    for node in &fleet.nodes {
        let listing = std::process::Command::new("ls").arg("-la").arg(node.dir.join("services")).output().unwrap();
        let _ = writeln!(out, "--- {} services/\n{}", node.address, String::from_utf8_lossy(&listing.stdout));
        for name in ["systemctl", "kubelet", "containerd", "hybrid-overlay-node"] {
            let text = fs::read_to_string(node.dir.join("services").join(format!("{name}.log"))).unwrap_or_default();
            let _ = writeln!(out, "--- {} {name}.log\n{text}", node.address);
        }
    }
    out
}

fn node(server: &ApiServer, name: &str) -> Value {
    server.get("v1", "Node", None, name).unwrap_or_else(|| panic!("Node {name} is not registered"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pushed_instance_becomes_a_ready_labelled_uncordoned_node_and_the_next_round_writes_nothing() {
    let setup = setup(&["win-node-1", "WIN-NODE-2"]).await;
    let report = round(&setup).await;
    let cluster = report.cluster.as_ref().unwrap();
    for join in &cluster.joins {
        assert_eq!(
            join.result,
            JoinResult::Joined,
            "{}: {:?}\n{}\n{}",
            join.address,
            join.result,
            report.render_text(),
            logs(&setup.fleet)
        );
    }
    assert_eq!(cluster.joins.len(), 2, "{}", report.render_text());
    let version = setup.desired.specs.values().next().unwrap().lifecycle.as_ref().unwrap().version.clone();
    for name in ["win-node-1", "win-node-2"] {
        let node = node(&setup.server, name);
        let labels = &node["metadata"]["labels"];
        assert_eq!(labels["windowsmachineconfig.openshift.io/byoh"], "true", "{name}");
        assert_eq!(labels["node-role.kubernetes.io/worker"], "", "{name}");
        assert_eq!(labels["node.openshift.io/os_id"], "Windows", "from the kubelet's --node-labels");
        assert_eq!(labels["example.com/team"], "payments", "the instance's own label");
        let annotations = &node["metadata"]["annotations"];
        assert_eq!(annotations["windowsmachineconfig.openshift.io/version"], version.as_str());
        assert_eq!(
            annotations["windowsmachineconfig.openshift.io/pub-key-hash"],
            setup.pool.public_key_hash().as_str()
        );
        assert!(annotations.get("winfleet.io/cordoned").is_none(), "{name}: winfleet's cordon is lifted");
        assert_ne!(node["spec"]["unschedulable"], true, "{name} is schedulable");
        assert_eq!(node["spec"]["taints"][0]["key"], "os", "the kubelet registered with kubelet.conf's taint");
    }
    let csrs = setup.server.list("certificates.k8s.io/v1", "CertificateSigningRequest");
    assert_eq!(csrs.len(), 4, "a client and a serving CSR per node");
    for csr in &csrs {
        let approved = csr["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Approved" && c["reason"] == "WinfleetApprove");
        assert!(approved, "{csr:#}");
        assert!(csr["status"]["certificate"].is_string(), "issued: {csr:#}");
    }
    for node in &setup.fleet.nodes {
        let log = node.read("../services/hybrid-overlay-node.log").unwrap_or_default();
        assert!(
            log.contains(&format!("hybrid overlay for {}", node.hostname.to_lowercase())),
            "NODE_NAME resolved from the Node: {log}"
        );
    }

    let writes_before =
        setup.server.history().iter().filter(|w| w.field_manager.as_deref() == Some("winfleet")).count();
    let second = round(&setup).await;
    assert!(!second.failed(), "{}", second.render_text());
    for node in &second.nodes {
        let winfleet::engine::report::NodeResult::Done { operations, .. } = &node.result else { panic!("{node:?}") };
        assert!(operations.is_empty(), "the next round writes nothing on {}: {operations:#?}", node.address);
    }
    let writes_after = setup.server.history().iter().filter(|w| w.field_manager.as_deref() == Some("winfleet")).count();
    assert_eq!(writes_before, writes_after, "the next round writes nothing to the cluster");
    assert!(second.cluster.as_ref().unwrap().joins.is_empty(), "nothing left to join");
}
