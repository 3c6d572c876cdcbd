//! Object builders for seeding the test API server.

use serde_json::{Map, Value, json};

fn labels_map(labels: &[(&str, &str)]) -> Map<String, Value> {
    labels.iter().map(|(k, v)| ((*k).to_string(), json!(v))).collect()
}

fn condition(kind: &str, ok: bool) -> Value {
    json!({
        "type": kind,
        "status": if ok { "True" } else { "False" },
        "lastTransitionTime": "2025-01-01T00:00:00Z",
    })
}

/// A Windows node: labels `kubernetes.io/os=windows` (unless given), plus
/// `labels`; status.addresses as given; Ready condition; minimal nodeInfo.
pub fn node(name: &str, addresses: &[(&str, &str)], ready: bool, labels: &[(&str, &str)]) -> Value {
    let mut l = labels_map(&[("kubernetes.io/os", "windows"), ("kubernetes.io/hostname", name)]);
    l.extend(labels_map(labels));
    let addresses: Vec<Value> = addresses.iter().map(|(t, a)| json!({ "type": t, "address": a })).collect();
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": { "name": name, "labels": l },
        "spec": {},
        "status": {
            "addresses": addresses,
            "conditions": [condition("Ready", ready)],
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": "",
                "containerRuntimeVersion": "containerd://1.7.0",
                "kernelVersion": "10.0.20348.2700",
                "kubeProxyVersion": "v1.33.2",
                "kubeletVersion": "v1.33.2",
                "machineID": name,
                "operatingSystem": "windows",
                "osImage": "Windows Server 2022 Datacenter",
                "systemUUID": "",
            },
        },
    })
}

/// A Running, Ready pod on `node_name`, with `terminationGracePeriodSeconds:
/// 0`: evicted, it is gone at once, as on a real server (a pod with a grace
/// period stays terminating until its kubelet confirms: tests/support/pods.rs).
/// `owner_kind` (e.g. "DaemonSet", "ReplicaSet") adds a controller
/// ownerReference named `<name>-owner`.
pub fn pod(namespace: &str, name: &str, node_name: &str, labels: &[(&str, &str)], owner_kind: Option<&str>) -> Value {
    let mut p = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "namespace": namespace, "labels": labels_map(labels) },
        "spec": {
            "nodeName": node_name,
            "terminationGracePeriodSeconds": 0,
            "containers": [{ "name": "main", "image": "mcr.microsoft.com/windows/nanoserver:ltsc2022" }],
        },
        "status": { "phase": "Running", "conditions": [condition("Ready", true)] },
    });
    if let Some(kind) = owner_kind {
        let api_version = match kind {
            "DaemonSet" | "ReplicaSet" | "StatefulSet" | "Deployment" => "apps/v1",
            "Job" => "batch/v1",
            _ => "v1",
        };
        p["metadata"]["ownerReferences"] = json!([{
            "apiVersion": api_version,
            "kind": kind,
            "name": format!("{name}-owner"),
            "uid": format!("00000000-0000-4000-8000-{:012x}", name.len()),
            "controller": true,
            "blockOwnerDeletion": true,
        }]);
    }
    p
}

/// A policy/v1 PodDisruptionBudget selecting `match_labels`; the budgets
/// are IntOrString values (`json!(1)` or `json!("50%")`).
pub fn pdb(
    namespace: &str,
    name: &str,
    match_labels: &[(&str, &str)],
    min_available: Option<Value>,
    max_unavailable: Option<Value>,
) -> Value {
    let mut spec = json!({ "selector": { "matchLabels": labels_map(match_labels) } });
    if let Some(m) = min_available {
        spec["minAvailable"] = m;
    }
    if let Some(m) = max_unavailable {
        spec["maxUnavailable"] = m;
    }
    json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": { "name": name, "namespace": namespace },
        "spec": spec,
    })
}

/// A MachineSet in openshift-machine-api.
pub fn machine_set(name: &str, replicas: i64, labels: &[(&str, &str)]) -> Value {
    json!({
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "MachineSet",
        "metadata": { "name": name, "namespace": "openshift-machine-api", "labels": labels_map(labels) },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "machine.openshift.io/cluster-api-machineset": name } },
            "template": {
                "metadata": { "labels": { "machine.openshift.io/cluster-api-machineset": name, "machine.openshift.io/os-id": "Windows" } },
                "spec": { "providerSpec": {} },
            },
        },
        "status": { "replicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas },
    })
}

/// A Machine in openshift-machine-api with `status.phase`, an InternalIP
/// address and (when not empty) `status.nodeRef`.
pub fn machine(name: &str, phase: &str, internal_ip: &str, node_name: &str) -> Value {
    let mut status = json!({
        "phase": phase,
        "addresses": [{ "type": "InternalIP", "address": internal_ip }],
    });
    if !node_name.is_empty() {
        status["nodeRef"] = json!({ "kind": "Node", "name": node_name });
    }
    json!({
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "Machine",
        "metadata": {
            "name": name,
            "namespace": "openshift-machine-api",
            "labels": { "machine.openshift.io/os-id": "Windows" },
        },
        "spec": { "providerSpec": {} },
        "status": status,
    })
}

/// The cluster Proxy (`cluster`) with `status.noProxy`.
pub fn proxy_cluster(no_proxy_status: &str) -> Value {
    json!({
        "apiVersion": "config.openshift.io/v1",
        "kind": "Proxy",
        "metadata": { "name": "cluster" },
        "spec": { "trustedCA": { "name": "" } },
        "status": { "noProxy": no_proxy_status },
    })
}

fn b64(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text.as_bytes())
}

/// The Machine Config Operator's bootstrap Secret (what WMCO reads for a
/// joining node's bootstrap kubeconfig).
pub fn bootstrap_secret(token: &str, ca_pem: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "node-bootstrapper-token",
            "namespace": "openshift-machine-config-operator",
            // A real API server refuses a service-account-token Secret without it.
            "annotations": { "kubernetes.io/service-account.name": "node-bootstrapper" },
        },
        "type": "kubernetes.io/service-account-token",
        "data": { "token": b64(token), "ca.crt": b64(ca_pem) },
    })
}

/// Infrastructure `cluster` with the API server's internal URL, in
/// `status.apiServerInternalURI` (openshift/api's JSON name; not `...URL`).
pub fn infrastructure(api_internal_url: &str) -> Value {
    json!({
        "apiVersion": "config.openshift.io/v1",
        "kind": "Infrastructure",
        "metadata": { "name": "cluster" },
        "spec": { "platformSpec": { "type": "None" } },
        "status": {
            "apiServerInternalURI": api_internal_url,
            "apiServerURL": api_internal_url,
            "platformStatus": { "type": "None" },
            "infrastructureName": "test-x7k2p",
        },
    })
}

/// Network `cluster` with its service network.
pub fn network(service_cidr: &str) -> Value {
    json!({
        "apiVersion": "config.openshift.io/v1",
        "kind": "Network",
        "metadata": { "name": "cluster" },
        "spec": { "serviceNetwork": [service_cidr], "networkType": "OVNKubernetes" },
        "status": { "serviceNetwork": [service_cidr] },
    })
}

/// ControllerConfig `machine-config-controller` with the kubelet's client CA.
pub fn controller_config(kube_api_ca_pem: &str) -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "ControllerConfig",
        "metadata": { "name": "machine-config-controller" },
        "spec": { "kubeAPIServerServingCAData": b64(kube_api_ca_pem) },
    })
}
