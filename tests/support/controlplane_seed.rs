//! What an OpenShift cluster has and winfleet reads, seeded into a fresh
//! [`ControlPlane`]: namespaces, the config.openshift.io objects, the kubelet
//! CA, the node-bootstrapper ServiceAccount and a real bootstrap token.
//! Part of tests/support/controlplane.rs.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use serde_json::{Value, json};

use super::super::apiserver::fixtures;
use super::{BOOTSTRAP_TOKEN, ControlPlane, SERVICE_NETWORK};

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

/// The namespaces of an OpenShift cluster winfleet works in.
pub const OPENSHIFT_NAMESPACES: [&str; 5] = [
    "openshift-machine-api",
    "openshift-config",
    "openshift-windows-machine-config-operator",
    "openshift-machine-config-operator",
    // Where the console reads dashboards (deploy/'s winfleet-dashboard).
    "openshift-config-managed",
];

/// Seeds what an OpenShift cluster has and winfleet reads: its namespaces;
/// Infrastructure, Network, Proxy and DNS `cluster`; ControllerConfig
/// `machine-config-controller` (the kubelet CA: this cluster's CA); the
/// Machine Config Operator's ServiceAccount node-bootstrapper (ClusterRole
/// system:node-bootstrapper) with its token Secret
/// openshift-machine-config-operator/node-bootstrapper-token, filled by the
/// token controller; and a real bootstrap token
/// (kube-system/bootstrap-token-abcdef, group system:bootstrappers).
pub async fn seed_openshift(plane: &ControlPlane) {
    for ns in OPENSHIFT_NAMESPACES {
        plane.seed(namespace(ns)).await;
    }
    let ca = plane.ca_pem();
    for obj in [
        fixtures::infrastructure(&plane.url),
        fixtures::network(SERVICE_NETWORK),
        fixtures::proxy_cluster(""),
        // What machine-api-operator's webhooks read besides the
        // Infrastructure: no public zone.
        json!({"apiVersion": "config.openshift.io/v1", "kind": "DNS", "metadata": {"name": "cluster"},
               "spec": {"baseDomain": "test.example"}}),
        controller_config(&ca),
        bootstrap_token_secret(BOOTSTRAP_TOKEN),
        binding("winfleet-test:bootstrappers", "Group", "system:bootstrappers", None),
        // The Machine Config Operator's node-bootstrapper: a ServiceAccount
        // allowed to create node CSRs, and its legacy token Secret, which
        // kube-controller-manager's token controller fills (token, ca.crt).
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": "node-bootstrapper", "namespace": "openshift-machine-config-operator"}}),
        binding(
            "system:node-bootstrapper",
            "ServiceAccount",
            "node-bootstrapper",
            Some("openshift-machine-config-operator"),
        ),
        json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
               "metadata": {"name": "node-bootstrapper-token", "namespace": "openshift-machine-config-operator",
                            "annotations": {"kubernetes.io/service-account.name": "node-bootstrapper"}}}),
    ] {
        plane.seed(obj).await;
    }
    plane.node_bootstrapper_token().await;
}

fn binding(name: &str, kind: &str, subject: &str, namespace: Option<&str>) -> Value {
    let mut who = json!({"kind": kind, "name": subject});
    match namespace {
        Some(ns) => who["namespace"] = json!(ns),
        None => who["apiGroup"] = json!("rbac.authorization.k8s.io"),
    }
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node-bootstrapper"},
        "subjects": [who],
    })
}

impl ControlPlane {
    /// The node-bootstrapper ServiceAccount's token, once the token
    /// controller has written it into node-bootstrapper-token (what WMCO
    /// and winfleet hand a joining kubelet).
    pub async fn node_bootstrapper_token(&self) -> String {
        let secrets: Api<Secret> = Api::namespaced(self.client(), "openshift-machine-config-operator");
        for _ in 0..300 {
            let secret = secrets.get("node-bootstrapper-token").await.unwrap();
            if let Some(token) = secret.data.as_ref().and_then(|d| d.get("token")) {
                return String::from_utf8(token.0.clone()).unwrap();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("kube-controller-manager did not fill Secret node-bootstrapper-token within 30s");
    }
}

/// ControllerConfig `machine-config-controller` with every field the real
/// CRD requires (the in-memory fixture has only the kubelet CA).
pub fn controller_config(ca_pem: &str) -> Value {
    let mut obj = fixtures::controller_config(ca_pem);
    let spec = obj["spec"].as_object_mut().unwrap();
    let ca = spec["kubeAPIServerServingCAData"].clone();
    for (k, v) in [
        ("rootCAData", ca),
        ("additionalTrustBundle", Value::Null),
        ("cloudProviderCAData", Value::Null),
        ("cloudProviderConfig", json!("")),
        ("clusterDNSIP", json!("172.30.0.10")),
        ("baseOSContainerImage", json!("quay.io/openshift/rhel-coreos:test")),
        ("releaseImage", json!("quay.io/openshift/release:test")),
        ("images", json!({})),
        ("ipFamilies", json!("IPv4")),
        (
            "infra",
            json!({"apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"}, "spec": {}}),
        ),
        (
            "dns",
            json!({"apiVersion": "config.openshift.io/v1", "kind": "DNS", "metadata": {"name": "cluster"}, "spec": {}}),
        ),
        ("network", Value::Null),
        ("proxy", Value::Null),
    ] {
        spec.insert(k.to_owned(), v);
    }
    obj
}

/// A real bootstrap token Secret (kube-system/bootstrap-token-<id>).
pub fn bootstrap_token_secret(token: &str) -> Value {
    let (id, secret) = token.split_once('.').expect("a bootstrap token is <id>.<secret>");
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": format!("bootstrap-token-{id}"), "namespace": "kube-system"},
        "type": "bootstrap.kubernetes.io/token",
        "stringData": {
            "token-id": id,
            "token-secret": secret,
            "usage-bootstrap-authentication": "true",
            "auth-extra-groups": "system:bootstrappers:worker",
        },
    })
}
