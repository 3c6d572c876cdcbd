//! Issue 27, item 4: the repository against the cluster. The Fleet's
//! `spec.sources` says, for the proxy and the mirror sets separately, where
//! the truth is. With `repository` (the default) every difference from the
//! cluster's own Proxy `cluster` and mirror sets is shown in `plan --live`,
//! in status (the summary's `ClusterDisagrees` condition) and as one Warning
//! Event per change, never blocking, and cleared once fixed. With `cluster`
//! the nodes' hosts.toml files and proxy variables follow the cluster's
//! objects, read every round; a repository that also holds them is invalid.
//! Real sshd nodes, either API server ([`Backend`]).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;

use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::controlplane::{Backend, TestApi};
use support::daemon::pool;
use support::fleet::TestFleet;
use winfleet::cluster::connect::Cluster;
use winfleet::cluster::disagree;
use winfleet::cluster::observe::proxy_resource;
use winfleet::cluster::sources::digest_mirror_set_resource;
use winfleet::desired::model::{Desired, Instance};
use winfleet::engine::host::SshHost;
use winfleet::reconcile::{self, Options, report::RoundReport};
use winfleet::ssh::Pool;
use winfleet::status::Status;
use winfleet::status::model::ConditionType;

const SOURCES: &str = "  sources:\n    proxy: cluster\n    mirrors: cluster\n";

fn proxy_yaml(http: &str) -> String {
    format!("apiVersion: config.openshift.io/v1\nkind: Proxy\nmetadata:\n  name: cluster\nspec:\n  httpProxy: {http}\n")
}

fn files(fleet: &TestFleet, extra_fleet: &str, more: &[(&str, String)]) -> BTreeMap<String, String> {
    let mut files = BTreeMap::from([
        ("fleet.yaml".to_owned(), format!("{}{extra_fleet}", fleet.fleet_yaml())),
        ("instances.yaml".to_owned(), support::daemon::instances(fleet)),
    ]);
    files.extend(more.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
    files
}

fn load(files: &BTreeMap<String, String>) -> winfleet::desired::Loaded {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    winfleet::desired::load(&winfleet::source::read_worktree(dir.path()).unwrap(), Default::default())
}

fn desired(files: &BTreeMap<String, String>) -> Desired {
    let loaded = load(files);
    loaded.desired.unwrap_or_else(|| panic!("{:#?}", loaded.diagnostics))
}

async fn round(cluster: Option<&Cluster>, pool: &Pool, desired: &Desired, dry_run: bool) -> RoundReport {
    let instances: Vec<&Instance> = desired.instances.values().collect();
    let options = Options { dry_run, max_parallel: 2, whole_fleet: true, ..Options::default() };
    reconcile::round(cluster, pool, &SshHost { pool }, desired, &instances, &options, |_| {}).await
}

/// Creates `obj` on either server, or merges its `spec` into the existing one.
async fn put(api: &TestApi, resource: &kube::api::ApiResource, obj: Value) {
    let objects: Api<DynamicObject> = Api::all_with(api.client(), resource);
    let name = obj["metadata"]["name"].as_str().unwrap().to_owned();
    if objects.get_opt(&name).await.unwrap().is_some() {
        let patch = json!({"spec": obj["spec"].clone()});
        objects.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    } else {
        let object: DynamicObject = serde_json::from_value(obj).unwrap();
        objects.create(&PostParams::default(), &object).await.unwrap();
    }
}

async fn cluster_proxy(api: &TestApi, spec: Value) {
    let obj =
        json!({"apiVersion": "config.openshift.io/v1", "kind": "Proxy", "metadata": {"name": "cluster"}, "spec": spec});
    put(api, &proxy_resource(), obj).await;
}

async fn cluster_idms(api: &TestApi, name: &str, mirror: &str) {
    let spec = json!({"imageDigestMirrors": [{"source": "quay.io", "mirrors": [mirror]}]});
    let obj = json!({"apiVersion": "config.openshift.io/v1", "kind": "ImageDigestMirrorSet", "metadata": {"name": name}, "spec": spec});
    put(api, &digest_mirror_set_resource(), obj).await;
}

/// winfleet's Namespace, where what was reported is remembered.
async fn namespace(api: &TestApi) {
    if api.get("v1", "Namespace", None, "winfleet").await.is_none() {
        api.seed(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "winfleet"}})).await;
    }
}

/// The Events of `reason` about `kind/name`.
async fn events(api: &TestApi, reason: &str, kind: &str, name: &str) -> usize {
    let all: Api<Event> = Api::all(api.client());
    let list = all.list(&ListParams::default()).await.unwrap();
    list.items
        .iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter(|e| {
            e.regarding.as_ref().is_some_and(|r| r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name))
        })
        .count()
}

/// The status a round with `report` renders over `previous`.
fn summary_condition(previous: &Status, report: &RoundReport, desired: &Desired) -> Status {
    let instances: Vec<&str> = desired.instances.keys().map(String::as_str).collect();
    support::status::Round::new(0, support::status::REV1, &instances).report(report.clone()).render(previous)
}

async fn each_disagreement_is_reported_once_and_cleared_when_fixed(api: TestApi) {
    let fleet = TestFleet::start(1);
    namespace(&api).await;
    cluster_proxy(&api, json!({"httpProxy": "http://proxy.linux.example:3128"})).await;
    cluster_idms(&api, "mirrors", "mirror.linux.example:5000/quay").await;
    let cluster = Cluster { client: api.client(), url: api.url().to_owned() };
    let pool = pool(&fleet);
    let ours = [
        ("proxy.yaml", proxy_yaml("http://proxy.windows.example:3128")),
        ("mirrors.yaml", support::daemon::mirrors("mirror.windows.example:5000/quay")),
    ];
    let desired = desired(&files(&fleet, "", &ours));

    // plan --live shows each difference and writes nothing to the cluster.
    let plan = round(Some(&cluster), &pool, &desired, true).await;
    let text = plan.render_text();
    assert!(text.contains("the repository disagrees with the cluster"), "{text}");
    assert!(
        text.contains(
            "Proxy/cluster spec.httpProxy: repository \"http://proxy.windows.example:3128\", cluster \"http://proxy.linux.example:3128\""
        ),
        "{text}"
    );
    assert!(text.contains("ImageDigestMirrorSet/mirrors spec.imageDigestMirrors[source=quay.io]"), "{text}");
    assert!(plan.render_json().contains("\"disagreements\""));
    assert_eq!(events(&api, "ClusterDisagrees", "Proxy", "cluster").await, 0, "a dry run publishes nothing");

    // Two rounds: one Event per object, the repository's values applied.
    let mut status = Status::default();
    for _ in 0..2 {
        let report = round(Some(&cluster), &pool, &desired, false).await;
        assert_eq!(report.cluster.as_ref().unwrap().disagreements.len(), 2, "{}", report.render_text());
        status = summary_condition(&status, &report, &desired);
    }
    assert_eq!(events(&api, "ClusterDisagrees", "Proxy", "cluster").await, 1);
    assert_eq!(events(&api, "ClusterDisagrees", "ImageDigestMirrorSet", "mirrors").await, 1);
    let hosts_toml = fleet.nodes[0].read("certs.d/quay.io/hosts.toml").unwrap();
    assert!(hosts_toml.contains("mirror.windows.example"), "the repository's mirrors stand: {hosts_toml}");
    let condition = status.summary.conditions.iter().find(|c| c.kind == ConditionType::ClusterDisagrees).unwrap();
    assert!(condition.status, "{condition:?}");
    assert!(
        condition
            .message
            .contains("Proxy/cluster spec.httpProxy; ImageDigestMirrorSet/mirrors spec.imageDigestMirrors"),
        "{condition:?}"
    );
    let files_text: String =
        winfleet::status::to_files(&status).into_values().map(|b| String::from_utf8(b).unwrap()).collect();
    assert!(files_text.contains("type: ClusterDisagrees"), "{files_text}");
    let ns = api.get("v1", "Namespace", None, "winfleet").await.unwrap();
    assert!(
        ns["metadata"]["annotations"]["winfleet.io/cluster-disagrees"].as_str().unwrap().contains("Proxy/cluster=")
    );

    // The cluster changes again: that object is reported once more.
    cluster_proxy(&api, json!({"httpProxy": "http://proxy.linux.example:3128", "noProxy": ".corp"})).await;
    round(Some(&cluster), &pool, &desired, false).await;
    assert_eq!(events(&api, "ClusterDisagrees", "Proxy", "cluster").await, 2);
    assert_eq!(events(&api, "ClusterDisagrees", "ImageDigestMirrorSet", "mirrors").await, 1);

    // The repository is fixed: the condition turns False, one ClusterAgrees each.
    let fixed = [
        ("proxy.yaml", format!("{}  noProxy: .corp\n", proxy_yaml("http://proxy.linux.example:3128"))),
        ("mirrors.yaml", support::daemon::mirrors("mirror.linux.example:5000/quay")),
    ];
    let fixed = desired_fixed(&fleet, &fixed);
    for _ in 0..2 {
        let report = round(Some(&cluster), &pool, &fixed, false).await;
        assert!(report.cluster.as_ref().unwrap().disagreements.is_empty(), "{}", report.render_text());
        status = summary_condition(&status, &report, &fixed);
    }
    let condition = status.summary.conditions.iter().find(|c| c.kind == ConditionType::ClusterDisagrees).unwrap();
    assert!(!condition.status && condition.reason == "AsExpected", "{condition:?}");
    assert_eq!(events(&api, "ClusterAgrees", "Proxy", "cluster").await, 1);
    assert_eq!(events(&api, "ClusterAgrees", "ImageDigestMirrorSet", "mirrors").await, 1);
    assert_eq!(events(&api, "ClusterDisagrees", "Proxy", "cluster").await, 2);
    let ns = api.get("v1", "Namespace", None, "winfleet").await.unwrap();
    assert!(ns["metadata"]["annotations"].get("winfleet.io/cluster-disagrees").is_none(), "{ns}");
}

fn desired_fixed(fleet: &TestFleet, more: &[(&str, String)]) -> Desired {
    desired(&files(fleet, "", more))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_disagreement_is_reported_once_and_cleared_when_fixed_on_the_in_memory_server() {
    each_disagreement_is_reported_once_and_cleared_when_fixed(TestApi::start(Backend::InMemory).await).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_disagreement_is_reported_once_and_cleared_when_fixed_on_the_real_control_plane() {
    let api = TestApi::start(Backend::Real).await;
    each_disagreement_is_reported_once_and_cleared_when_fixed(api).await;
}

async fn the_nodes_follow_the_clusters_mirror_sets_and_proxy(api: TestApi) {
    let fleet = TestFleet::start(1);
    cluster_proxy(&api, json!({"httpProxy": "http://proxy.corp.example:3128"})).await;
    cluster_idms(&api, "corp", "mirror.corp.example:5000/quay").await;
    let cluster = Cluster { client: api.client(), url: api.url().to_owned() };
    let pool = pool(&fleet);
    let desired = desired(&files(&fleet, SOURCES, &[]));
    let node = &fleet.nodes[0];
    let hosts_toml = "certs.d/quay.io/hosts.toml";

    let report = round(Some(&cluster), &pool, &desired, false).await;
    assert!(report.cluster.as_ref().unwrap().disagreements.is_empty(), "{}", report.render_text());
    let first = node.read(hosts_toml).unwrap_or_else(|| panic!("hosts.toml written: {}", report.render_text()));
    assert!(first.contains("mirror.corp.example:5000"), "{first}");
    let environment = node.read("systemd/90-winfleet-environment.conf").unwrap();
    assert!(environment.contains("HTTP_PROXY=http://proxy.corp.example:3128"), "{environment}");

    // The cluster's set changes: plan --live shows it, the next round writes it.
    cluster_idms(&api, "corp", "mirror2.corp.example:5000/quay").await;
    let plan = round(Some(&cluster), &pool, &desired, true).await;
    assert!(plan.has_changes() && plan.render_text().contains("hosts.toml"), "{}", plan.render_text());
    assert_eq!(node.read(hosts_toml).unwrap(), first, "a dry run writes nothing");
    round(Some(&cluster), &pool, &desired, false).await;
    assert!(node.read(hosts_toml).unwrap().contains("mirror2.corp.example:5000"));
    let quiet = round(Some(&cluster), &pool, &desired, false).await;
    // (The proxy's reboot stays owed: these nodes have no Node to drain.)
    assert!(quiet.render_text().contains("0 changed, 0 failed"), "{}", quiet.render_text());

    // The set is deleted from the cluster: the registry directory goes.
    let sets: Api<DynamicObject> = Api::all_with(api.client(), &digest_mirror_set_resource());
    sets.delete("corp", &DeleteParams::default()).await.unwrap();
    round(Some(&cluster), &pool, &desired, false).await;
    assert!(node.read(hosts_toml).is_none(), "{:?}", node.files());

    // Offline, the plan says these come from the cluster.
    let plan = winfleet::plan::offline::plan(None, &desired);
    assert!(plan.warnings.iter().any(|w| w.message.contains("cannot be shown offline")), "{:?}", plan.warnings);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nodes_follow_the_clusters_mirror_sets_and_proxy_on_the_in_memory_server() {
    the_nodes_follow_the_clusters_mirror_sets_and_proxy(TestApi::start(Backend::InMemory).await).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nodes_follow_the_clusters_mirror_sets_and_proxy_on_the_real_control_plane() {
    let api = TestApi::start(Backend::Real).await;
    the_nodes_follow_the_clusters_mirror_sets_and_proxy(api).await;
}

#[test]
fn a_repository_proxy_or_mirror_set_with_sources_cluster_is_invalid_at_its_file_line_and_field() {
    let fleet = TestFleet::start(1);
    let ours = [
        ("proxy.yaml", format!("# the cluster's\n{}", proxy_yaml("http://p.example:3128"))),
        ("mirrors.yaml", support::daemon::mirrors("m.example:5000/quay")),
    ];
    let loaded = load(&files(&fleet, SOURCES, &ours));
    assert!(loaded.desired.is_none());
    let errors: Vec<String> = loaded
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| format!("{}:{}: {}: {}", d.path, d.line, d.pointer, d.message))
        .collect();
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert!(
        errors[0].starts_with("mirrors.yaml:2: /kind: fleet.yaml sets spec.sources.mirrors to cluster"),
        "{errors:#?}"
    );
    assert!(errors[1].starts_with("proxy.yaml:3: /kind: fleet.yaml sets spec.sources.proxy to cluster"), "{errors:#?}");
    assert!(errors[1].contains("remove this Proxy, or set spec.sources.proxy to repository"), "{errors:#?}");
    // Only the named source: mirrors from the repository, the proxy from the cluster.
    let mixed = files(&fleet, "  sources:\n    proxy: cluster\n", &ours[1..]);
    assert!(load(&mixed).desired.is_some());
    let bad = files(&fleet, "  sources:\n    proxy: Cluster\n", &[]);
    assert!(load(&bad).diagnostics.iter().any(|d| d.is_error() && d.pointer == "/spec/sources/proxy"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn following_the_cluster_without_a_cluster_changes_no_node() {
    let fleet = TestFleet::start(1);
    let pool = pool(&fleet);
    let desired = desired(&files(&fleet, SOURCES, &[]));
    let report = round(None, &pool, &desired, false).await;
    assert!(report.failed(), "{}", report.render_text());
    assert!(report.render_text().contains("no cluster is configured: no node is changed"), "{}", report.render_text());
    assert!(report.nodes.iter().all(|n| n.hostname.is_none()), "no node was even observed: {report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn differences_remembered_in_winfleets_namespace_are_not_reported_again_after_a_restart() {
    let api = TestApi::start(Backend::InMemory).await;
    let fleet = TestFleet::start(1);
    cluster_proxy(&api, json!({"httpProxy": "http://proxy.linux.example:3128"})).await;
    let cluster = Cluster { client: api.client(), url: api.url().to_owned() };
    let pool = pool(&fleet);
    let desired = desired(&files(&fleet, "", &[("proxy.yaml", proxy_yaml("http://proxy.restarted.example:3128"))]));
    // What an earlier winfleet process reported and wrote down.
    let plan = round(Some(&cluster), &pool, &desired, true).await;
    let hashes = disagree::hashes(&plan.cluster.as_ref().unwrap().disagreements);
    let annotations = json!({disagree::REPORTED_ANNOTATION: disagree::memory_text(&hashes)});
    api.seed(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "winfleet", "annotations": annotations}}),
    )
    .await;
    let report = round(Some(&cluster), &pool, &desired, false).await;
    assert_eq!(report.cluster.as_ref().unwrap().disagreements.len(), 1, "{}", report.render_text());
    assert_eq!(events(&api, "ClusterDisagrees", "Proxy", "cluster").await, 0, "already reported before the restart");
}
