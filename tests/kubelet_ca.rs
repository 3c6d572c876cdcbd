//! Issue 27, item 2 (first half): a rotated kubelet CA reaches every node
//! in the next round. Two posix sshd nodes join (fake kubelets), on either
//! API server ([`Backend`]); then the ControllerConfig
//! `machine-config-controller`'s `spec.kubeAPIServerServingCAData` is
//! rotated and one more round runs with the same loaded revision: every
//! node's `kubelet-ca.crt` holds the new bundle, and, as WMCO's
//! `UpdateKubeletClientCA` ("no service restart or reboot required"), no
//! service is restarted. The round after writes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::json;
use support::bench_checks::{assert_all_joined, assert_quiet, on_node};
use support::controlplane::{Backend, resource};
use support::join::{Bench, bench, logs};
use winfleet::lifecycle::material::KUBELET_CA;
use winfleet::vocab::Shell;

#[test]
#[ignore = "entry point of the fake kubelet process that node tests start; not a test"]
fn fake_kubelet_process() {
    support::kubelet::main_from_env();
}

const NAMES: [&str; 2] = ["win-ca1", "win-ca2"];

/// A new CA certificate, as a rotation brings (PEM).
fn new_ca() -> String {
    rcgen::generate_simple_self_signed(vec!["rotated-kube-apiserver-ca".to_owned()]).unwrap().cert.pem()
}

/// Each node's kubelet-ca.crt (the path is the lifecycle spec's).
fn kubelet_cas(bench: &Bench) -> Vec<String> {
    let spec = bench.desired.specs[&Shell::Posix].lifecycle.clone().unwrap();
    let path = spec.kube_path(KUBELET_CA);
    bench
        .fleet
        .nodes
        .iter()
        .map(|n| {
            let file = on_node(n, &path);
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
        })
        .collect()
}

async fn a_rotated_kubelet_ca_reaches_every_node(bench: Bench) {
    let report = bench.round().await;
    assert_all_joined(&bench.fleet, &report);
    let before = kubelet_cas(&bench);
    let pids: Vec<_> = bench.fleet.nodes.iter().map(|n| n.service_pids()).collect();

    let ca = new_ca();
    assert!(before.iter().all(|c| c != &ca));
    let configs: Api<DynamicObject> = Api::all_with(
        bench.api.client(),
        &resource("machineconfiguration.openshift.io", "v1", "ControllerConfig", "controllerconfigs"),
    );
    let patch = json!({"spec": {"kubeAPIServerServingCAData": STANDARD.encode(&ca)}});
    configs.patch("machine-config-controller", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();

    let report = bench.round().await;
    assert!(!report.failed(), "{}\n{}", report.render_text(), logs(&bench.fleet));
    assert_eq!(kubelet_cas(&bench), vec![ca.clone(); NAMES.len()], "{}", report.render_text());
    let text = report.render_text();
    assert!(text.contains(KUBELET_CA), "the rotation is shown as a file change: {text}");
    assert!(!text.contains(ca.lines().nth(1).unwrap()), "the CA's content is not shown: {text}");
    let now: Vec<_> = bench.fleet.nodes.iter().map(|n| n.service_pids()).collect();
    assert_eq!(now, pids, "no service restarted for a new client CA");

    assert_quiet(&bench.round().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_kubelet_ca_reaches_every_node_in_the_next_round_on_the_in_memory_server() {
    a_rotated_kubelet_ca_reaches_every_node(bench(Backend::InMemory, &NAMES).await).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_kubelet_ca_reaches_every_node_in_the_next_round_on_the_real_control_plane() {
    let bench = bench(Backend::Real, &NAMES).await;
    a_rotated_kubelet_ca_reaches_every_node(bench).await;
}
