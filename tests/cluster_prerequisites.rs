//! The cluster's prerequisites refused plainly (issue 27, item 6, the
//! cluster side), against either API server ([`Backend`]): a payload whose
//! declared kubelet (Fleet `spec.payload.kubeletVersion`) is too old or too
//! new for the API server's `/version`, or a Network (operator.openshift.io)
//! without a hybrid overlay, holds every join: the node is observed only
//! (its files are byte for byte what they were), its status is Waiting with
//! the reason, `plan --live` says it, one Warning Event per change. The
//! round after the fix joins it; a joined node's upgrade to a refused
//! payload does not start (the node keeps its version) until fixed. Real
//! sshd nodes and the fake kubelet of tests/support/kubelet.rs; the real
//! control plane (v1.37.2) serves the Network's CRD
//! (tests/controlplane/crds/operator.openshift.io_networks.yaml).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::fs;

use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use support::controlplane::{Backend, KUBERNETES_VERSION, TestApi, resource};
use support::join::{Bench, bench, logs};
use winfleet::cluster::join::JoinResult;
use winfleet::reconcile::report::RoundReport;
use winfleet::status::model::InstancePhase;
use winfleet::status::verdict::{self, Context};

const NAME: &str = "win-pre-1";

#[test]
#[ignore = "entry point of the fake kubelet process that node tests start; not a test"]
fn fake_kubelet_process() {
    support::kubelet::main_from_env();
}

/// Declares (or, with `None`, removes) the payload's kubelet version in
/// the bench's Fleet and loads the repository again.
fn declare_kubelet(bench: &mut Bench, version: Option<&str>) {
    let path = bench.repo.path().join("fleet.yaml");
    let text = fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().filter(|l| !l.contains("kubeletVersion")).map(str::to_owned).collect();
    if let Some(version) = version {
        let at = lines.iter().position(|l| l.trim_start().starts_with("digest: sha256:")).unwrap();
        lines.insert(at + 1, format!("    kubeletVersion: {version}"));
    }
    fs::write(&path, lines.join("\n") + "\n").unwrap();
    bench.reload();
}

/// Creates or changes the operator.openshift.io Network `cluster`:
/// OVN-Kubernetes, with a hybrid overlay when `hybrid`.
async fn network(api: &TestApi, hybrid: bool) {
    let ovn = if hybrid {
        json!({"hybridOverlayConfig": {"hybridClusterNetwork": [{"cidr": "10.132.0.0/14", "hostPrefix": 23}]}})
    } else {
        json!({})
    };
    let object = json!({"apiVersion": "operator.openshift.io/v1", "kind": "Network", "metadata": {"name": "cluster"},
                        "spec": {"defaultNetwork": {"type": "OVNKubernetes", "ovnKubernetesConfig": ovn}}});
    let networks: Api<DynamicObject> =
        Api::all_with(api.client(), &resource("operator.openshift.io", "v1", "Network", "networks"));
    let params = PatchParams::apply("cluster-network-operator").force();
    networks.patch("cluster", &params, &Patch::Apply(&object)).await.unwrap();
}

/// The `PrerequisitesNotMet` Events' notes about the Node `NAME`.
async fn events(bench: &Bench) -> Vec<String> {
    let api: Api<Event> = Api::namespaced(bench.api.client(), "default");
    let list = api.list(&ListParams::default()).await.unwrap().items;
    list.into_iter()
        .filter(|e| e.reason.as_deref() == Some("PrerequisitesNotMet"))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(NAME))
        .inspect(|e| assert_eq!(e.type_.as_deref(), Some("Warning")))
        .filter_map(|e| e.note)
        .collect()
}

/// One round that must hold the join with exactly `reason`; nothing is
/// written to the node.
async fn held(bench: &Bench, reason: &str) -> RoundReport {
    let files = bench.fleet.nodes[0].files();
    let plan = bench.plan().await;
    let text = plan.render_text();
    assert!(text.contains(&format!("Prerequisites REFUSED: no node joins or upgrades this round: {reason}")), "{text}");
    let report = bench.round().await;
    let text = report.render_text();
    let cluster = report.cluster.as_ref().unwrap();
    assert_eq!(cluster.prerequisites.refused.as_deref(), Some(reason), "{text}");
    assert_eq!(cluster.joins.len(), 1, "{text}");
    let JoinResult::NotStarted { reason: why } = &cluster.joins[0].result else { panic!("{text}") };
    assert!(why.ends_with(reason), "{why}");
    assert!(text.contains("BLOCKED (lifecycle): the cluster's prerequisites are not met, nothing written"), "{text}");
    let ctx = Context { round: &report, drift_check: false, warn: false, at_revision: false, suspended: false };
    let verdict = verdict::instance(&report.nodes[0], ctx).unwrap();
    assert_eq!((verdict.phase, verdict.reason), (InstancePhase::Waiting, "PrerequisitesNotMet"), "{verdict:?}");
    assert!(verdict.message.ends_with(reason), "{}", verdict.message);
    assert_eq!(bench.fleet.nodes[0].files(), files, "nothing was written to the node");
    assert!(bench.api.get("v1", "Node", None, NAME).await.is_none(), "no Node registered");
    report
}

async fn refused_then_joined(backend: Backend) {
    let mut bench = bench(backend, &[NAME]).await;
    if let TestApi::InMemory { server, .. } = &bench.api {
        server.set_version(KUBERNETES_VERSION);
    }
    let api_server = KUBERNETES_VERSION;

    // Too old: 4 minor versions behind the API server.
    declare_kubelet(&mut bench, Some("v1.33.0"));
    let too_old = format!(
        "the payload's kubelet v1.33.0 is 4 minor versions older than the API server {api_server}; at most 3 are supported"
    );
    held(&bench, &too_old).await;
    held(&bench, &too_old).await;
    let note = format!("no node joins or upgrades: {too_old}");
    assert_eq!(events(&bench).await, [note], "one Warning Event, not one per round");

    // Too new.
    declare_kubelet(&mut bench, Some("v1.38.1"));
    let too_new = format!(
        "the payload's kubelet v1.38.1 is newer than the API server {api_server}: a kubelet may never be newer"
    );
    held(&bench, &too_new).await;
    assert_eq!(events(&bench).await.len(), 2, "a changed reason is a new Event");

    // Within the skew, but the cluster network has no hybrid overlay.
    declare_kubelet(&mut bench, Some("v1.35.4"));
    network(&bench.api, false).await;
    let no_hybrid = "OVN-Kubernetes has no hybrid overlay (spec.defaultNetwork.ovnKubernetesConfig.\
                     hybridOverlayConfig.hybridClusterNetwork is empty): configure hybrid networking first";
    held(&bench, no_hybrid).await;

    // Fixed: the next round joins.
    network(&bench.api, true).await;
    let report = bench.round().await;
    let cluster = report.cluster.as_ref().unwrap();
    assert_eq!(cluster.prerequisites.refused, None, "{}", report.render_text());
    assert_eq!(cluster.joins[0].result, JoinResult::Joined, "{}\n{}", report.render_text(), logs(&bench.fleet));
    let node: Value = bench.node(NAME).await;
    assert_eq!(node["metadata"]["annotations"][winfleet::lifecycle::VERSION_ANNOTATION], bench.version());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubelet_out_of_skew_or_no_hybrid_overlay_holds_the_join_until_fixed_in_memory() {
    refused_then_joined(Backend::InMemory).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubelet_out_of_skew_or_no_hybrid_overlay_holds_the_join_until_fixed_on_the_real_control_plane() {
    refused_then_joined(Backend::Real).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_with_no_operator_network_and_no_declared_kubelet_is_not_checked_and_joins() {
    let bench = bench(Backend::InMemory, &[NAME]).await;
    let report = bench.round().await;
    let cluster = report.cluster.as_ref().unwrap();
    assert_eq!(cluster.prerequisites.refused, None);
    assert_eq!(
        cluster.prerequisites.notes,
        [winfleet::cluster::prerequisites::KUBELET_UNKNOWN, winfleet::cluster::prerequisites::NOT_OPENSHIFT]
    );
    assert!(report.render_text().contains("- prerequisites: no operator.openshift.io/v1 Network cluster"));
    assert_eq!(cluster.joins[0].result, JoinResult::Joined, "{}\n{}", report.render_text(), logs(&bench.fleet));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_holds_the_upgrade_of_a_joined_node_which_keeps_its_version_until_fixed() {
    use winfleet::cluster::upgrade::UpgradeResult;
    let mut bench = bench(Backend::InMemory, &[NAME]).await;
    let TestApi::InMemory { server, .. } = &bench.api else { unreachable!() };
    server.set_version(KUBERNETES_VERSION);
    declare_kubelet(&mut bench, Some("v1.37.0"));
    let joined = bench.round().await;
    assert_eq!(joined.cluster.as_ref().unwrap().joins[0].result, JoinResult::Joined, "{}", joined.render_text());
    let old = bench.version();

    // A new payload whose kubelet is declared newer than the API server.
    bench.repin(|dir| fs::write(dir.join("release-notes.txt"), "build 2\n").unwrap());
    declare_kubelet(&mut bench, Some("v1.38.0"));
    let report = bench.round().await;
    let text = report.render_text();
    let cluster = report.cluster.as_ref().unwrap();
    assert_eq!(cluster.upgrades.len(), 1, "{text}");
    let UpgradeResult::NotStarted { reason } = &cluster.upgrades[0].result else { panic!("{text}") };
    assert!(reason.contains("the node keeps its version") && reason.contains("never be newer"), "{reason}");
    let node = bench.node(NAME).await;
    assert_eq!(node["metadata"]["annotations"][winfleet::lifecycle::VERSION_ANNOTATION], old.as_str());
    assert_ne!(node["spec"]["unschedulable"], true, "never cordoned for an upgrade that does not start");
    let ctx = Context { round: &report, drift_check: false, warn: false, at_revision: false, suspended: false };
    let verdict = verdict::instance(&report.nodes[0], ctx).unwrap();
    assert_eq!((verdict.phase, verdict.reason), (InstancePhase::Waiting, "PrerequisitesNotMet"), "{verdict:?}");
    assert_eq!(events(&bench).await.len(), 1, "one Warning Event on the Node");

    // Fixed: the next round upgrades it.
    declare_kubelet(&mut bench, Some("v1.37.2"));
    let report = bench.round().await;
    let text = report.render_text();
    let upgrade = &report.cluster.as_ref().unwrap().upgrades[0];
    assert!(matches!(upgrade.result, UpgradeResult::Upgraded { .. }), "{text}\n{}", logs(&bench.fleet));
    let node = bench.node(NAME).await;
    assert_eq!(node["metadata"]["annotations"][winfleet::lifecycle::VERSION_ANNOTATION], bench.version());
}

/// Stamps the bench payload's (fake) kubelet with `version` as the
/// Kubernetes build stamps a real one: the text Go's build information
/// holds (`k8s.io/component-base/version.gitVersion=…`), here a comment
/// line of the wrapper script, and pins the new payload.
fn stamp_kubelet(bench: &mut Bench, version: &str) {
    bench.repin(|dir| {
        let kubelet = dir.join("kube-node/kubelet");
        let script = fs::read_to_string(&kubelet).unwrap();
        let script: String = script.lines().filter(|l| !l.contains("gitVersion")).map(|l| format!("{l}\n")).collect();
        fs::write(&kubelet, format!("{script}# -X k8s.io/component-base/version.gitVersion={version}\n")).unwrap();
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_payloads_own_kubelet_version_is_judged_when_the_fleet_declares_none() {
    let mut bench = bench(Backend::InMemory, &[NAME]).await;
    let TestApi::InMemory { server, .. } = &bench.api else { unreachable!() };
    server.set_version(KUBERNETES_VERSION);
    declare_kubelet(&mut bench, None);
    stamp_kubelet(&mut bench, "v1.33.2+a80dac2");
    assert_eq!(bench.payload.kubelet_version.as_deref(), Some("v1.33.2+a80dac2"));
    let too_old = format!(
        "the payload's kubelet v1.33.2+a80dac2 is 4 minor versions older than the API server {KUBERNETES_VERSION}; \
         at most 3 are supported"
    );
    held(&bench, &too_old).await;

    // A declaration the payload contradicts is refused, even within the skew.
    declare_kubelet(&mut bench, Some("v1.37.0"));
    let contradicted = "the Fleet declares the payload's kubelet v1.37.0 (spec.payload.kubeletVersion), but the \
                        payload's kubelet is v1.33.2+a80dac2: correct the declaration or pin the payload meant";
    held(&bench, contradicted).await;

    // A payload within the skew joins, with or without a declaration.
    declare_kubelet(&mut bench, None);
    stamp_kubelet(&mut bench, "v1.36.2+a80dac2");
    let report = bench.round().await;
    let cluster = report.cluster.as_ref().unwrap();
    assert_eq!(cluster.prerequisites.refused, None, "{}", report.render_text());
    assert!(!cluster.prerequisites.notes.iter().any(|n| n.contains("kubelet")), "{:?}", cluster.prerequisites);
    assert_eq!(cluster.joins[0].result, JoinResult::Joined, "{}\n{}", report.render_text(), logs(&bench.fleet));
}

/// The real control plane's binary is a Go program built with Kubernetes'
/// own linker flags (tests/controlplane/ldflags), as WMCO builds
/// kubelet.exe: its build information says its version.
#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[test]
fn a_go_binary_built_with_kubernetes_linker_flags_says_its_version() {
    let binary = support::controlplane::ensure_built().unwrap();
    let found = winfleet::payload::kubelet_version::scan(&binary).unwrap();
    assert_eq!(found.as_deref(), Some(KUBERNETES_VERSION));
}
