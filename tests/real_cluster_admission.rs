//! Issue 35, items 9 and 10: the admission policies of
//! deploy/base/admission.yaml hold what deploy/'s RBAC grants winfleet but
//! cannot narrow, on a real kube-apiserver v1.37.2 (ValidatingAdmissionPolicy
//! on by default) with the ServiceAccount's own token. Each refused write
//! is one RBAC alone allows; each allowed write is one winfleet makes.
//!
//! Policies are loaded by the API server asynchronously after they are
//! created: [`enforced`] waits, with dry-run writes, until every one of
//! them refuses, then each write is made once for real.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::apiserver::fixtures;
use support::controlplane::ControlPlane;
use support::identity::{install_identity, service_account_token};

fn resource(api_version: &str, kind: &str, plural: &str) -> ApiResource {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

fn nodes(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &resource("v1", "Node", "nodes"))
}

fn machines(client: &kube::Client) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        "openshift-machine-api",
        &resource("machine.openshift.io/v1beta1", "Machine", "machines"),
    )
}

fn secrets(client: &kube::Client) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), "openshift-machine-api", &resource("v1", "Secret", "secrets"))
}

fn namespaces(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &resource("v1", "Namespace", "namespaces"))
}

fn object(value: Value) -> DynamicObject {
    serde_json::from_value(value).unwrap()
}

fn merge(dry_run: bool) -> PatchParams {
    PatchParams { dry_run, field_manager: Some("winfleet".into()), ..PatchParams::default() }
}

/// The policy's refusal: 403 from the ValidatingAdmissionPolicy `policy`.
fn refused_by<T: std::fmt::Debug>(policy: &str, result: Result<T, kube::Error>) -> Result<(), String> {
    match result {
        Err(kube::Error::Api(e)) if e.code == 403 && e.message.contains(&format!("'{policy}'")) => Ok(()),
        other => Err(format!("not refused by {policy}: {other:?}")),
    }
}

/// A Linux control-plane Node and Machine, a Windows Node and Machine, and
/// the ServiceAccount the escalation of item 9 would borrow, as an
/// OpenShift cluster has them.
async fn seed(plane: &ControlPlane) {
    plane.seed(fixtures::node("win-a", &[], true, &[])).await;
    let mut master = fixtures::node("master-0", &[], true, &[("node-role.kubernetes.io/control-plane", "")]);
    master["metadata"]["labels"]["kubernetes.io/os"] = json!("linux");
    plane.seed(master).await;
    plane.seed(fixtures::machine("win-machine-a", "Running", "10.0.1.10", "win-a")).await;
    let mut master_machine = fixtures::machine("master-machine-0", "Running", "10.0.0.10", "master-0");
    master_machine["metadata"]["labels"] = json!({"machine.openshift.io/cluster-api-machine-role": "master"});
    plane.seed(master_machine).await;
    plane
        .seed(json!({"apiVersion": "v1", "kind": "ServiceAccount",
                     "metadata": {"name": "machine-api-controllers", "namespace": "openshift-machine-api"}}))
        .await;
}

/// Waits until the API server enforces every policy of deploy/'s
/// admission.yaml (each refuses a dry-run write of winfleet's), or fails.
async fn enforced(sa: &kube::Client) {
    let dry_create = PostParams { dry_run: true, ..PostParams::default() };
    let canary_secret = object(json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "winfleet-canary", "namespace": "openshift-machine-api"}}));
    let services = Api::namespaced_with(sa.clone(), "winfleet", &resource("v1", "Service", "services"));
    let canary_service = object(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "winfleet-canary", "namespace": "winfleet"},
        "spec": {"ports": [{"port": 9182}]}}));
    let label = json!({"metadata": {"labels": {"canary": "x"}}});
    let strip = json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": null}}});
    let mut last = Vec::new();
    for _ in 0..600 {
        last = [
            refused_by("winfleet-secrets", secrets(sa).create(&dry_create, &canary_secret).await),
            refused_by(
                "winfleet-windows-nodes",
                nodes(sa).patch("master-0", &merge(true), &Patch::Merge(&label)).await,
            ),
            refused_by(
                "winfleet-windows-machines",
                machines(sa).patch("master-machine-0", &merge(true), &Patch::Merge(&label)).await,
            ),
            refused_by("winfleet-own-objects", services.create(&dry_create, &canary_service).await),
            refused_by(
                "winfleet-namespace",
                namespaces(sa).patch("winfleet", &merge(true), &Patch::Merge(&strip)).await,
            ),
        ]
        .into_iter()
        .filter_map(Result::err)
        .collect();
        if last.is_empty() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("deploy/'s admission policies are not enforced:\n{}", last.join("\n"));
}

async fn setup() -> (ControlPlane, kube::Client) {
    let plane = ControlPlane::start().await;
    seed(&plane).await;
    install_identity(&plane, None).await;
    let token = service_account_token(&plane).await;
    let sa = plane.client_with_token(&token).await;
    enforced(&sa).await;
    (plane, sa)
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_account_token_secret_named_windows_user_data_is_refused_to_winfleet() {
    let (plane, sa) = setup().await;
    // Item 9's escalation, replayed: a token Secret for machine-api-controllers
    // under the one name winfleet may read. RBAC allows the create; the
    // policy refuses it, so kube-controller-manager never fills it in.
    let escalation = object(json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
        "metadata": {"name": "windows-user-data", "namespace": "openshift-machine-api",
                     "annotations": {"kubernetes.io/service-account.name": "machine-api-controllers"}},
    }));
    refused_by("winfleet-secrets", secrets(&sa).create(&PostParams::default(), &escalation).await).unwrap();
    // The same through server-side apply, as cluster/user_data.rs writes.
    let apply = PatchParams::apply("winfleet").force();
    refused_by("winfleet-secrets", secrets(&sa).patch("windows-user-data", &apply, &Patch::Apply(&escalation)).await)
        .unwrap();
    assert!(secrets(&plane.client()).get_opt("windows-user-data").await.unwrap().is_none(), "nothing stored");
    // Any other name, Opaque or not.
    let other = object(json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "machine-api-tokens", "namespace": "openshift-machine-api"}}));
    refused_by("winfleet-secrets", secrets(&sa).create(&PostParams::default(), &other).await).unwrap();

    // What winfleet writes is allowed: windows-user-data, Opaque.
    let user_data = object(json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "windows-user-data", "namespace": "openshift-machine-api"},
        "data": {"userData": "PHBvd2Vyc2hlbGw+PC9wb3dlcnNoZWxsPg=="},
    }));
    secrets(&sa).patch("windows-user-data", &apply, &Patch::Apply(&user_data)).await.unwrap();
    let stored = secrets(&plane.client()).get("windows-user-data").await.unwrap();
    assert_eq!(stored.data["type"], "Opaque");
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn winfleets_writes_reach_windows_nodes_and_machines_and_its_own_objects_only() {
    let (plane, sa) = setup().await;
    let label = json!({"metadata": {"labels": {"winfleet.io/test": "x"}}});
    let write = merge(false);

    // Nodes: a Linux Node is neither patched nor deleted, nor relabelled
    // Windows to be patched next; a Windows Node keeps its label.
    refused_by("winfleet-windows-nodes", nodes(&sa).patch("master-0", &write, &Patch::Merge(&label)).await).unwrap();
    let relabel = json!({"metadata": {"labels": {"kubernetes.io/os": "windows"}}});
    refused_by("winfleet-windows-nodes", nodes(&sa).patch("master-0", &write, &Patch::Merge(&relabel)).await).unwrap();
    refused_by("winfleet-windows-nodes", nodes(&sa).delete("master-0", &DeleteParams::default()).await).unwrap();
    let unlabel = json!({"metadata": {"labels": {"kubernetes.io/os": "linux"}}});
    refused_by("winfleet-windows-nodes", nodes(&sa).patch("win-a", &write, &Patch::Merge(&unlabel)).await).unwrap();
    let master = nodes(&plane.client()).get("master-0").await.unwrap();
    assert_eq!(master.metadata.labels.unwrap()["kubernetes.io/os"], "linux");
    nodes(&sa).patch("win-a", &write, &Patch::Merge(&label)).await.unwrap();

    // Machines: a control-plane Machine is neither patched nor deleted.
    let machine = "master-machine-0";
    refused_by("winfleet-windows-machines", machines(&sa).patch(machine, &write, &Patch::Merge(&label)).await).unwrap();
    let windows = json!({"metadata": {"labels": {"machine.openshift.io/os-id": "Windows"}}});
    refused_by("winfleet-windows-machines", machines(&sa).patch(machine, &write, &Patch::Merge(&windows)).await)
        .unwrap();
    refused_by("winfleet-windows-machines", machines(&sa).delete(machine, &DeleteParams::default()).await).unwrap();
    assert!(machines(&plane.client()).get_opt(machine).await.unwrap().is_some());
    machines(&sa).patch("win-machine-a", &write, &Patch::Merge(&label)).await.unwrap();
    machines(&sa).delete("win-machine-a", &DeleteParams::default()).await.unwrap();

    // Its own objects by name: a Service, Endpoints, ServiceMonitor or
    // Lease of another name is refused; windows-exporter is not.
    let create = PostParams::default();
    for (api_version, kind, plural, name) in [
        ("v1", "Service", "services", "api"),
        ("v1", "Endpoints", "endpoints", "api"),
        ("monitoring.coreos.com/v1", "ServiceMonitor", "servicemonitors", "api"),
        ("coordination.k8s.io/v1", "Lease", "leases", "other-leader"),
        ("v1", "Service", "services", "windows-exporter"),
    ] {
        let api = Api::namespaced_with(sa.clone(), "winfleet", &resource(api_version, kind, plural));
        let mut body = json!({"apiVersion": api_version, "kind": kind,
                              "metadata": {"name": name, "namespace": "winfleet"}, "spec": {}});
        if kind == "Service" {
            body["spec"] = json!({"ports": [{"port": 9182}]});
        }
        if kind == "ServiceMonitor" {
            body["spec"] = json!({"selector": {}, "endpoints": []});
        }
        if kind == "Endpoints" {
            body.as_object_mut().unwrap().remove("spec");
        }
        let result = api.create(&create, &object(body)).await;
        if name == "windows-exporter" {
            result.unwrap();
        } else {
            refused_by("winfleet-own-objects", result).unwrap();
        }
    }

    // Its namespace: the Pod Security labels stay; the monitoring label is
    // only added as "true", never changed afterwards; the disagreement
    // annotation is kept; no other annotation is written.
    let ns = namespaces(&sa);
    for (patch, allowed) in [
        (json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": null}}}), false),
        (json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "privileged"}}}), false),
        (json!({"metadata": {"labels": {"openshift.io/cluster-monitoring": "false"}}}), false),
        (json!({"metadata": {"annotations": {"openshift.io/node-selector": ""}}}), false),
        (json!({"metadata": {"labels": {"openshift.io/cluster-monitoring": "true"}}}), true),
        (json!({"metadata": {"labels": {"openshift.io/cluster-monitoring": null}}}), false),
        (json!({"metadata": {"annotations": {"winfleet.io/cluster-disagrees": "{}"}}}), true),
    ] {
        let result = ns.patch("winfleet", &write, &Patch::Merge(&patch)).await;
        if allowed {
            result.unwrap_or_else(|e| panic!("{patch}: {e}"));
        } else {
            refused_by("winfleet-namespace", result).unwrap_or_else(|e| panic!("{patch}: {e}"));
        }
    }
    let stored = namespaces(&plane.client()).get("winfleet").await.unwrap();
    assert_eq!(stored.metadata.labels.unwrap()["pod-security.kubernetes.io/enforce"], "restricted");
}
