//! deploy/, rendered with `kubectl kustomize` (every layout), is accepted
//! by a real kube-apiserver v1.37.2 in a server-side dry run: schema
//! validation, defaulting, admission and the RBAC escalation check (a
//! ClusterRole may only be granted by someone holding its rules) all run,
//! nothing persists. The Route and ServiceMonitor CRDs are part of the
//! control plane's CRD set, as OpenShift has them.
//!
//! Only the Namespace `winfleet` is created for real first: a dry run of a
//! namespaced object in a namespace that does not exist is refused, as
//! `kubectl apply --dry-run=server` is on a fresh cluster.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use std::process::Command;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::Value;
use support::controlplane::ControlPlane;

/// The objects of one rendered kustomization, or `None` when kubectl is
/// absent here (and not required: .ci/run requires it).
fn render(dir: &str) -> Option<Vec<Value>> {
    let path = support::root().join(dir);
    let output = match Command::new("kubectl").arg("kustomize").arg(&path).output() {
        Ok(output) => output,
        // Its tests are #[ignore]d: one that runs was asked for.
        Err(error) => panic!("kubectl kustomize {dir}: {error} (scripts/test.sh installs kubectl)"),
    };
    assert!(output.status.success(), "kubectl kustomize {dir}: {}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout).unwrap();
    Some(serde_saphyr::from_multiple::<Value>(&text).unwrap().into_iter().filter(|doc| !doc.is_null()).collect())
}

async fn api_for(client: &kube::Client, obj: &Value) -> Api<DynamicObject> {
    let api_version = obj["apiVersion"].as_str().unwrap();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, obj["kind"].as_str().unwrap());
    let (resource, caps): (ApiResource, _) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .unwrap_or_else(|e| panic!("the server does not serve {api_version} {}: {e}", obj["kind"]));
    match (caps.scope, obj.pointer("/metadata/namespace").and_then(Value::as_str)) {
        (kube::discovery::Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resource),
        _ => Api::all_with(client.clone(), &resource),
    }
}

fn name(obj: &Value) -> String {
    format!("{} {}", obj["kind"].as_str().unwrap(), obj["metadata"]["name"].as_str().unwrap())
}

/// Every object of each layout, dry-run applied server-side; the failures
/// are collected and reported at once.
#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_deploy_manifest_is_accepted_by_a_server_side_dry_run() {
    let layouts = ["deploy", "deploy/variants/self-pull"];
    let Some(rendered) = layouts.iter().map(|d| render(d).map(|o| (*d, o))).collect::<Option<Vec<_>>>() else {
        return;
    };
    let plane = ControlPlane::start().await;
    let client = plane.client();
    let namespace = rendered[0].1.iter().find(|o| o["kind"] == "Namespace").expect("deploy/ has its Namespace");
    let ns = namespace["metadata"]["name"].as_str().unwrap().to_owned();
    plane.seed(serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})).await;

    let mut failures = Vec::new();
    let mut checked = 0;
    for (layout, objects) in &rendered {
        for obj in objects {
            let api = api_for(&client, obj).await;
            let params = PatchParams::apply("winfleet-deploy-test").dry_run();
            let name_of = obj["metadata"]["name"].as_str().unwrap();
            match api.patch(name_of, &params, &Patch::Apply(obj)).await {
                Ok(_) => checked += 1,
                Err(e) => failures.push(format!("{layout}: {}: {e}", name(obj))),
            }
        }
    }
    assert!(failures.is_empty(), "refused by kube-apiserver:\n{}", failures.join("\n"));
    assert!(checked >= 20, "only {checked} objects checked");
    // Nothing but the Namespace was created.
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), &ns);
    assert!(deployments.list(&Default::default()).await.unwrap().items.is_empty(), "a dry run persists nothing");
}
