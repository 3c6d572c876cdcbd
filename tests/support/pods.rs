//! The fake kubelet's pod duties (tests/support/kubelet.rs), as a kubelet
//! does them for the pods bound to its node (`spec.nodeName`; there is no
//! scheduler in the tests):
//! - a pod that is not terminating and not finished is "run": its status
//!   says Running, with the conditions PodScheduled, Initialized,
//!   ContainersReady and Ready True (the disruption controller counts a pod
//!   as healthy only when it is Ready);
//! - a pod the API server marked for deletion (an eviction or a DELETE of a
//!   pod bound to a node sets `deletionTimestamp` and waits for the
//!   kubelet) is "stopped" and its deletion confirmed: a DELETE with grace
//!   period 0 and the pod's uid as precondition, as the kubelet's status
//!   manager does once the containers are gone.
//!
//! The kubelet does this as the node (its client certificate, or the
//! in-memory API's impersonation): the Node authorizer lets a node list the
//! pods bound to it, and NodeRestriction lets it write their status and
//! delete them.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use serde_json::{Value, json};

/// How often the pods are looked at (`WINFLEET_FAKE_KUBELET_PODS_MS`).
fn every() -> Duration {
    let ms = std::env::var("WINFLEET_FAKE_KUBELET_PODS_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    Duration::from_millis(ms)
}

/// Runs the pods bound to `node` until the process ends; an error is
/// printed (once until it changes) and the next pass tries again.
pub async fn run(client: Client, node: String) {
    let mut last_error = String::new();
    loop {
        match sync(&client, &node).await {
            Ok(()) => last_error.clear(),
            Err(e) if e != last_error => {
                println!("fake kubelet: pods: {e}");
                last_error = e;
            }
            Err(_) => {}
        }
        tokio::time::sleep(every()).await;
    }
}

/// One pass over the pods bound to `node`.
pub async fn sync(client: &Client, node: &str) -> Result<(), String> {
    let all: Api<Pod> = Api::all(client.clone());
    let bound = ListParams::default().fields(&format!("spec.nodeName={node}"));
    let pods = all.list(&bound).await.map_err(|e| format!("listing the pods bound to {node}: {e}"))?;
    for pod in pods.items {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
        if pod.metadata.deletion_timestamp.is_some() {
            let params = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions { uid: pod.metadata.uid.clone(), resource_version: None }),
                ..DeleteParams::default()
            };
            match api.delete(&name, &params).await {
                Ok(_) => println!("fake kubelet: pod {namespace}/{name} stopped; deletion confirmed"),
                // Gone already, or a pod of the same name that is not this one.
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
                Err(e) => return Err(format!("confirming the deletion of pod {namespace}/{name}: {e}")),
            }
        } else if !finished(&pod) && !running_and_ready(&pod) {
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(running_status()))
                .await
                .map_err(|e| format!("reporting pod {namespace}/{name} Running: {e}"))?;
            println!("fake kubelet: pod {namespace}/{name} Running and Ready");
        }
    }
    Ok(())
}

fn finished(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()).is_some_and(|p| p == "Succeeded" || p == "Failed")
}

fn running_and_ready(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    let running = status.and_then(|s| s.phase.as_deref()) == Some("Running");
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    running && ready
}

/// The status of a pod whose containers all run and pass their checks.
pub fn running_status() -> Value {
    let now = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let conditions: Vec<Value> = ["PodScheduled", "Initialized", "ContainersReady", "Ready"]
        .map(|kind| json!({ "type": kind, "status": "True", "lastTransitionTime": now }))
        .into();
    json!({ "status": { "phase": "Running", "startTime": now, "conditions": conditions } })
}
