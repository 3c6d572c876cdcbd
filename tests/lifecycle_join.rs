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

fn pending(server: &ApiServer) -> Vec<String> {
    server
        .list("certificates.k8s.io/v1", "CertificateSigningRequest")
        .iter()
        .filter(|c| c["status"]["conditions"].as_array().is_none_or(|c| c.is_empty()))
        .map(|c| c["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

fn foreign_csr(server: &ApiServer, name: &str, node: &str) {
    let (pem, _) = support::kubelet::certificate_request(node, &[]);
    use base64::Engine;
    server.seed(serde_json::json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": { "name": name },
        "spec": {
            "request": base64::engine::general_purpose::STANDARD.encode(pem),
            "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
            "usages": ["digital signature", "client auth"],
            "username": "system:bootstrap:abcdef",
            "groups": ["system:bootstrappers", "system:authenticated"],
        },
    }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csrs_for_near_or_unlisted_names_stay_pending_and_near_matches_are_reported() {
    let setup = setup(&["win-node-1"]).await;
    foreign_csr(&setup.server, "csr-substring", "win-node");
    foreign_csr(&setup.server, "csr-superstring", "win-node-1-evil");
    foreign_csr(&setup.server, "csr-unlisted", "db-server-7");
    let report = round(&setup).await;
    let cluster = report.cluster.as_ref().unwrap();
    assert_eq!(cluster.joins[0].result, JoinResult::Joined, "{}", report.render_text());
    let mut still = pending(&setup.server);
    still.sort();
    assert_eq!(
        still,
        ["csr-substring", "csr-superstring", "csr-unlisted"],
        "only the kubelet's own CSRs were approved"
    );
    let near: Vec<&str> = cluster
        .csrs
        .iter()
        .filter(|c| matches!(c.outcome, winfleet::cluster::approve::CsrOutcome::NearMatch { .. }))
        .map(|c| c.csr.as_str())
        .collect();
    assert_eq!(near, ["csr-substring", "csr-superstring"], "{}", report.render_text());
    assert!(!cluster.csrs.iter().any(|c| c.csr == "csr-unlisted"), "an unlisted name is left alone, unreported");
    let text = report.render_text();
    assert!(text.contains("CSR csr-superstring (node win-node-1-evil): NOT approved"), "{text}");
    let events = setup.server.list("events.k8s.io/v1", "Event");
    let reported: Vec<&str> = events
        .iter()
        .filter(|e| e["reason"] == "CsrNearMatch")
        .filter_map(|e| e["regarding"]["name"].as_str())
        .collect();
    assert!(reported.contains(&"csr-substring") && reported.contains(&"csr-superstring"), "{reported:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupted_binary_is_uploaded_again_and_its_services_restarted() {
    let setup = setup(&["win-node-1"]).await;
    let first = round(&setup).await;
    assert_eq!(first.cluster.as_ref().unwrap().joins[0].result, JoinResult::Joined, "{}", first.render_text());
    let node = &setup.fleet.nodes[0];
    let before = node.service_pids();
    fs::write(node.path("payload/kube-node/kubelet"), "#!/bin/sh\nexit 1\n").unwrap();
    let second = round(&setup).await;
    assert!(!second.failed(), "{}", second.render_text());
    let text = second.render_text();
    assert!(text.contains("~ payload/kube-node/kubelet (upload kube-node/kubelet"), "{text}");
    for service in ["kubelet", "hybrid-overlay-node"] {
        assert!(text.contains(&format!("▶ start service {service}")), "{service} restarts: {text}");
    }
    assert!(!text.contains("start service containerd"), "containerd does not depend on the kubelet: {text}");
    let after = node.service_pids();
    assert_ne!(before["kubelet"], after["kubelet"], "the kubelet runs the good binary again");
    assert_eq!(before["containerd"], after["containerd"]);
    assert_eq!(
        fs::read(node.path("payload/kube-node/kubelet")).unwrap(),
        support::kubelet::wrapper_script().into_bytes()
    );
    let csrs = setup.server.list("certificates.k8s.io/v1", "CertificateSigningRequest");
    let clients =
        csrs.iter().filter(|c| c["spec"]["signerName"] == "kubernetes.io/kube-apiserver-client-kubelet").count();
    assert_eq!(clients, 1, "a restarted kubelet keeps its certificate");
    let third = round(&setup).await;
    assert!(third.nodes.iter().all(|n| !n.has_changes()), "{}", third.render_text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn winfleet_killed_mid_configure_is_finished_by_the_next_round_without_repeating_steps() {
    let setup = setup(&["win-node-1"]).await;
    let node = &setup.fleet.nodes[0];
    let repo = setup._repo.path();
    let mut apply = std::process::Command::new(env!("CARGO_BIN_EXE_winfleet"))
        .args(["apply", "--once", "--repo"])
        .arg(repo)
        .arg("--ssh-key")
        .arg(&setup.fleet.key)
        .arg("--known-hosts")
        .arg(&setup.fleet.known_hosts)
        .arg("--kubeconfig")
        .arg(&setup._served.kubeconfig)
        .arg("--payload-dir")
        .arg(&setup.payload.dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed as soon as the kubelet asks for its certificate: files and
    // bootstrap services are in place, the join has begun.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while setup.server.list("certificates.k8s.io/v1", "CertificateSigningRequest").is_empty() {
        assert!(std::time::Instant::now() < deadline, "the kubelet never asked for a certificate");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    apply.kill().unwrap();
    let _ = apply.wait();
    let starts = |name: &str| {
        let log = fs::read_to_string(node.dir.join("services/systemctl.log")).unwrap_or_default();
        log.lines().filter(|l| *l == format!("start -- {name}.service")).count()
    };
    assert_eq!(starts("kubelet"), 1);
    let report = round(&setup).await;
    assert_eq!(report.cluster.as_ref().unwrap().joins[0].result, JoinResult::Joined, "{}", report.render_text());
    let text = report.render_text();
    assert!(!text.contains("(upload "), "nothing uploaded twice: {text}");
    assert_eq!(starts("kubelet"), 1, "the kubelet is not started twice: {text}");
    let clients = setup
        .server
        .list("certificates.k8s.io/v1", "CertificateSigningRequest")
        .iter()
        .filter(|c| c["spec"]["signerName"] == "kubernetes.io/kube-apiserver-client-kubelet")
        .count();
    assert_eq!(clients, 1, "the CSR of the first attempt is the one approved");
    assert!(pending(&setup.server).is_empty());
}
