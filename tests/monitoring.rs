//! Issue 27, item 5: Windows node monitoring, against either API server
//! ([`Backend`]). A posix sshd node joins (fake kubelet); at the end of the
//! round winfleet keeps, in its namespace, the `windows-exporter` Service,
//! the Endpoints holding each Windows Node's InternalIP on port 9182 and
//! the ServiceMonitor, and labels the namespace
//! `openshift.io/cluster-monitoring=true`. Windows Nodes with routable
//! addresses (no kubelet) come and go between rounds, and the Endpoints
//! follow; the sshd node's own address is loopback, which the real API
//! server refuses in Endpoints, so it is left out and named. A round with
//! nothing new writes none of them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams};
use serde_json::{Value, json};
use support::controlplane::Backend;
use support::join::{Bench, bench, logs};
use winfleet::cluster::join::JoinResult;
use winfleet::cluster::monitoring::{DEFAULT_NAMESPACE, endpoint_addresses, plan};

#[test]
#[ignore = "entry point of the fake kubelet process that node tests start; not a test"]
fn fake_kubelet_process() {
    support::kubelet::main_from_env();
}

const NAMES: [&str; 1] = ["win-m1"];
const NS: &str = DEFAULT_NAMESPACE;

async fn get(bench: &Bench, api_version: &str, kind: &str) -> Option<Value> {
    bench.api.get(api_version, kind, Some(NS), plan::NAME).await
}

/// The resourceVersion of each kept object (and the namespace's): equal
/// before and after a round that wrote none of them.
async fn versions(bench: &Bench) -> Vec<String> {
    let mut out = Vec::new();
    let namespace = bench.api.get("v1", "Namespace", None, NS).await;
    let objects = [
        namespace,
        get(bench, "v1", "Service").await,
        get(bench, "v1", "Endpoints").await,
        get(bench, "monitoring.coreos.com/v1", "ServiceMonitor").await,
    ];
    for object in objects {
        let object = object.expect("kept");
        out.push(object["metadata"]["resourceVersion"].as_str().unwrap().to_owned());
    }
    out
}

/// A Windows Node with a routable InternalIP and no kubelet (the sshd
/// nodes' addresses are loopback, which Endpoints may not hold).
fn windows_node(name: &str, ip: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/os": "windows"}},
        "status": {"addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}]},
    })
}

fn addresses(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(n, ip)| ((*n).to_owned(), (*ip).to_owned())).collect()
}

async fn the_endpoints_follow_windows_nodes(bench: Bench) {
    bench.api.seed(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})).await;
    bench.api.seed(windows_node("win-a", "10.20.0.11")).await;

    // win-m1 joins (its Node's address is loopback: left out); win-a is in.
    let report = bench.round().await;
    let joins = &report.cluster.as_ref().unwrap().joins;
    assert!(
        joins.len() == 1 && joins.iter().all(|j| j.result == JoinResult::Joined),
        "{}\n{}",
        report.render_text(),
        logs(&bench.fleet)
    );
    let namespace = bench.api.get("v1", "Namespace", None, NS).await.unwrap();
    assert_eq!(namespace["metadata"]["labels"][plan::MONITORING_LABEL], "true", "{namespace:#}");
    let endpoints = get(&bench, "v1", "Endpoints").await.expect("Endpoints windows-exporter");
    assert_eq!(endpoint_addresses(&endpoints), addresses(&[("win-a", "10.20.0.11")]), "{endpoints:#}");
    assert_eq!(endpoints["subsets"][0]["ports"], json!([{"name": "metrics", "port": 9182, "protocol": "TCP"}]));
    let joined = bench.node("win-m1").await;
    assert_eq!(plan::left_out(&[joined]).len(), 1, "the joined node's loopback address is named as left out");
    let service = get(&bench, "v1", "Service").await.expect("Service windows-exporter");
    assert_eq!(service["spec"]["ports"][0]["port"], 9182, "{service:#}");
    assert!(service["spec"].get("selector").is_none_or(Value::is_null), "its Endpoints are winfleet's: {service:#}");
    let monitor = get(&bench, "monitoring.coreos.com/v1", "ServiceMonitor").await.expect("ServiceMonitor");
    assert_eq!(monitor["spec"]["selector"], json!({"matchLabels": {"name": "windows-exporter"}}));
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "metrics");
    assert_eq!(monitor["spec"]["endpoints"][0]["tlsConfig"]["serverName"], "windows-exporter.winfleet.svc");

    // Nothing new: nothing written.
    let before = versions(&bench).await;
    let quiet = bench.round().await;
    assert!(!quiet.failed(), "{}", quiet.render_text());
    assert_eq!(versions(&bench).await, before, "the next round writes nothing");

    // A Windows Node joins: its address is added.
    bench.api.seed(windows_node("win-b", "10.20.0.12")).await;
    bench.round().await;
    let endpoints = get(&bench, "v1", "Endpoints").await.unwrap();
    let both = addresses(&[("win-a", "10.20.0.11"), ("win-b", "10.20.0.12")]);
    assert_eq!(endpoint_addresses(&endpoints), both, "{endpoints:#}");

    // One leaves: its address goes.
    let nodes: Api<Node> = Api::all(bench.api.client());
    nodes.delete("win-a", &DeleteParams::default()).await.unwrap();
    bench.round().await;
    let endpoints = get(&bench, "v1", "Endpoints").await.unwrap();
    assert_eq!(endpoint_addresses(&endpoints), addresses(&[("win-b", "10.20.0.12")]), "{endpoints:#}");

    let before = versions(&bench).await;
    let quiet = bench.round().await;
    assert!(!quiet.failed(), "{}", quiet.render_text());
    assert_eq!(versions(&bench).await, before, "the next round writes nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_windows_exporter_endpoints_follow_windows_nodes_joining_and_leaving_on_the_in_memory_server() {
    let bench = bench(Backend::InMemory, &NAMES).await;
    the_endpoints_follow_windows_nodes(bench).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_windows_exporter_endpoints_follow_windows_nodes_joining_and_leaving_on_the_real_control_plane() {
    let bench = bench(Backend::Real, &NAMES).await;
    the_endpoints_follow_windows_nodes(bench).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_namespace_nothing_is_kept_and_the_round_goes_on() {
    let bench = bench(Backend::InMemory, &NAMES).await;
    let report = bench.round().await;
    assert!(!report.failed(), "{}", report.render_text());
    assert!(get(&bench, "v1", "Endpoints").await.is_none());
    assert!(bench.api.get("v1", "Namespace", None, NS).await.is_none());
}
