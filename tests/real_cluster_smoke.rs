//! The real control plane (tests/support/controlplane.rs, Kubernetes
//! v1.37.2) starts, serves Nodes and the OpenShift CRDs, and winfleet's own
//! code paths work against it: the cluster material a join reads, and
//! MachineSets by server-side apply through a whole round. The MachineSet
//! scenario runs against both API servers, switched by [`Backend`].

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use support::apiserver::fixtures;
use support::cluster::pool;
use support::controlplane::{Backend, ControlPlane, TestApi};
use winfleet::desired::model::{Desired, Instance};
use winfleet::reconcile::{self, Options, report::RoundReport};

const MS: &str = "machine.openshift.io/v1beta1";
const MAPI: &str = "openshift-machine-api";

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_is_created_and_listed_and_the_join_material_is_read() {
    let plane = ControlPlane::start().await;
    let nodes: Api<Node> = Api::all(plane.client());
    let node: Node = serde_json::from_value(fixtures::node("win-a", &[("InternalIP", "10.0.0.5")], true, &[])).unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let listed = nodes.list(&ListParams::default().labels("kubernetes.io/os=windows")).await.unwrap();
    let names: Vec<String> = listed.items.iter().map(|n| n.metadata.name.clone().unwrap()).collect();
    assert_eq!(names, ["win-a"]);

    // What a join reads, from the seeded objects as an OpenShift cluster has them.
    let material = winfleet::cluster::material::read(&plane.client(), true).await.unwrap();
    assert_eq!(material.api_server_url, plane.url, "Infrastructure status.apiServerInternalURI");
    assert_eq!(material.bootstrap_token, plane.node_bootstrapper_token().await);
    assert_eq!(material.bootstrap_ca, plane.ca_pem(), "the token controller's ca.crt");
    assert_eq!(material.kubelet_ca, plane.ca_pem());
    assert_eq!(material.cluster_dns, "172.30.0.10");
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_server_prunes_a_field_the_crd_does_not_declare() {
    // Why winfleet reads status.apiServerInternalURI: the real server drops
    // unknown fields of a structural schema, so the old spelling is gone.
    let plane = ControlPlane::start_bare().await;
    let mut infra = fixtures::infrastructure("https://api-int.x:6443");
    infra["status"]["apiServerInternalURL"] = json!("https://wrong:6443");
    let stored = plane.seed(infra).await;
    assert_eq!(stored["status"]["apiServerInternalURI"], "https://api-int.x:6443");
    assert!(stored["status"].get("apiServerInternalURL").is_none(), "{stored}");
}

/// A config repository with one MachineSet and no instances.
fn repo(dir: &Path, replicas: i64) -> Desired {
    let fleet = "apiVersion: winfleet.io/v1alpha1\nkind: Fleet\nmetadata:\n  name: t\nspec:\n  lab:\n    allowLoopbackAddresses: true\n  defaults:\n    username: u\n    port: 1\n    shell: posix\n";
    std::fs::write(dir.join("fleet.yaml"), fleet).unwrap();
    let template =
        std::fs::read_to_string(support::root().join("examples-repo/machinesets/winworker-aws.yaml")).unwrap();
    std::fs::create_dir_all(dir.join("machinesets")).unwrap();
    std::fs::write(
        dir.join("machinesets/winb.yaml"),
        template
            .replace("prod-7xk2p-windows-us-east-1a", "winb")
            .replace("replicas: 1", &format!("replicas: {replicas}")),
    )
    .unwrap();
    let loaded = winfleet::desired::load(&winfleet::source::read_worktree(dir).unwrap(), Default::default());
    loaded.desired.unwrap_or_else(|| panic!("invalid repo: {:#?}", loaded.diagnostics))
}

async fn round(api: &TestApi, desired: &Desired, dry_run: bool) -> RoundReport {
    let tmp = tempfile::tempdir().unwrap();
    let pool = pool(tmp.path());
    let instances: Vec<&Instance> = desired.instances.values().collect();
    let cluster = winfleet::cluster::connect::Cluster { client: api.client(), url: api.url().to_owned() };
    let host = winfleet::engine::host::SshHost { pool: &pool };
    let options = Options { dry_run, max_parallel: 4, whole_fleet: true, ..Options::default() };
    reconcile::round(Some(&cluster), &pool, &host, desired, &instances, &options, |_| {}).await
}

async fn a_machine_set_is_applied_server_side_and_read_back(api: &TestApi) {
    let dir = tempfile::tempdir().unwrap();
    let desired = repo(dir.path(), 1);
    let plan = round(api, &desired, true).await;
    let cluster = plan.cluster.as_ref().unwrap();
    assert!(cluster.error.is_none() && cluster.rejected.is_empty(), "{cluster:#?}");
    let actions: Vec<String> =
        cluster.machine_sets.iter().map(|m| format!("{} {:?}", m.change.name, m.change.action)).collect();
    assert_eq!(actions, ["winb Create"]);
    assert!(api.get(MS, "MachineSet", Some(MAPI), "winb").await.is_none(), "a dry run writes nothing");

    let applied = round(api, &desired, false).await;
    let cluster = applied.cluster.as_ref().unwrap();
    assert!(cluster.error.is_none() && cluster.rejected.is_empty(), "{cluster:#?}");
    let created = api.get(MS, "MachineSet", Some(MAPI), "winb").await.expect("created");
    assert_eq!(created["metadata"]["labels"]["app.kubernetes.io/managed-by"], "winfleet");
    assert_eq!(created["spec"]["replicas"], 1);
    assert_eq!(created["spec"]["template"]["spec"]["providerSpec"]["value"]["instanceType"], "m5a.large");
    let managers: Vec<(&str, &str)> = created["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["manager"].as_str().unwrap(), m["operation"].as_str().unwrap()))
        .collect();
    assert_eq!(managers, [("winfleet", "Apply")]);

    // In sync: the next round plans nothing.
    let again = round(api, &desired, true).await;
    let cluster = again.cluster.as_ref().unwrap();
    assert!(cluster.machine_sets.is_empty(), "{:#?}", cluster.machine_sets);

    // A replica change is an update, applied.
    let desired = repo(dir.path(), 3);
    let updated = round(api, &desired, false).await;
    let cluster = updated.cluster.as_ref().unwrap();
    let actions: Vec<String> =
        cluster.machine_sets.iter().map(|m| format!("{} {:?}", m.change.name, m.change.action)).collect();
    assert_eq!(actions, ["winb Update"]);
    assert_eq!(api.get(MS, "MachineSet", Some(MAPI), "winb").await.unwrap()["spec"]["replicas"], 3);
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn machine_sets_by_server_side_apply_against_the_real_server() {
    let api = TestApi::start(Backend::Real).await;
    a_machine_set_is_applied_server_side_and_read_back(&api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn machine_sets_by_server_side_apply_against_the_in_memory_server() {
    let api = TestApi::start(Backend::InMemory).await;
    a_machine_set_is_applied_server_side_and_read_back(&api).await;
}
