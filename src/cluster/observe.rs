//! Read-only snapshot of the cluster: Windows Nodes, MachineSets, Windows
//! Machines, MachineHealthChecks, the cluster Proxy's `status.noProxy` and
//! the platform.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::{Client, ResourceExt};
use serde_json::Value;

use super::health_checks::machine_health_check_resource;
use super::{ClusterFacts, MACHINE_API_NAMESPACE, MachineObs, NodeObs};
use crate::vocab::platform::Platform;

/// `machine.openshift.io/v1beta1` MachineSet.
pub fn machine_set_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("machine.openshift.io", "v1beta1", "MachineSet"),
        "machinesets",
    )
}

/// `machine.openshift.io/v1beta1` Machine.
pub fn machine_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("machine.openshift.io", "v1beta1", "Machine"), "machines")
}

/// `config.openshift.io/v1` Proxy.
pub fn proxy_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("config.openshift.io", "v1", "Proxy"), "proxies")
}

/// `config.openshift.io/v1` Infrastructure (the cloud platform).
pub fn infrastructure_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("config.openshift.io", "v1", "Infrastructure"),
        "infrastructures",
    )
}

/// The label selecting Windows Nodes.
pub const WINDOWS_NODES: &str = "kubernetes.io/os=windows";
/// The label selecting Windows Machines (WMCO-SPEC 6).
pub const WINDOWS_MACHINES: &str = "machine.openshift.io/os-id=Windows";

/// Reads everything the cluster plan needs. Any failing read fails the
/// snapshot: a plan made from half a cluster could prune what it did not see.
pub async fn observe(client: &Client) -> Result<ClusterFacts, kube::Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    let sets: Api<DynamicObject> = Api::namespaced_with(client.clone(), MACHINE_API_NAMESPACE, &machine_set_resource());
    let checks: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), MACHINE_API_NAMESPACE, &machine_health_check_resource());
    let (windows_nodes, all) = (ListParams::default().labels(WINDOWS_NODES), ListParams::default());
    let (nodes, sets, machines, checks, no_proxy, platform) = futures::try_join!(
        nodes.list(&windows_nodes),
        list_or_absent(&sets, &all),
        machines(client),
        list_or_absent(&checks, &all),
        cluster_no_proxy(client),
        platform(client),
    )?;
    Ok(ClusterFacts {
        nodes: nodes.items.iter().map(|n| (n.name_any(), node_obs(n))).collect(),
        machine_sets: sets
            .into_iter()
            .filter_map(|s| Some((s.metadata.name.clone()?, serde_json::to_value(&s).ok()?)))
            .collect(),
        machines,
        cluster_no_proxy: no_proxy,
        platform,
        health_checks: checks.iter().filter_map(|c| serde_json::to_value(c).ok()).collect(),
    })
}

/// The Windows Machines by name (none when the cluster serves no Machine
/// API). Also read alone while a round runs, for the Machines that get an
/// address during it (`reconcile::late_machines`).
pub async fn machines(client: &Client) -> Result<BTreeMap<String, MachineObs>, kube::Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), MACHINE_API_NAMESPACE, &machine_resource());
    let listed = list_or_absent(&api, &ListParams::default().labels(WINDOWS_MACHINES)).await?;
    Ok(listed.iter().map(|m| (m.name_any(), machine_obs(m))).collect())
}

/// The platform Infrastructure `cluster` names; `None` without one (a
/// plain Kubernetes cluster), as WMCO takes it.
pub async fn platform(client: &Client) -> Result<Platform, kube::Error> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &infrastructure_resource());
    match api.get_opt("cluster").await {
        Ok(found) => Ok(found.map_or(Platform::None, |i| Platform::of_infrastructure(&i.data))),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(Platform::None),
        Err(e) => Err(e),
    }
}

/// A list, or nothing when the API itself is absent (a cluster without the
/// Machine API answers 404 for the resource).
async fn list_or_absent(api: &Api<DynamicObject>, params: &ListParams) -> Result<Vec<DynamicObject>, kube::Error> {
    match api.list(params).await {
        Ok(list) => Ok(list.items),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

async fn cluster_no_proxy(client: &Client) -> Result<Option<String>, kube::Error> {
    let proxies: Api<DynamicObject> = Api::all_with(client.clone(), &proxy_resource());
    let proxy = match proxies.get_opt("cluster").await {
        Ok(proxy) => proxy,
        Err(kube::Error::Api(e)) if e.code == 404 => None,
        Err(e) => return Err(e),
    };
    Ok(proxy.and_then(|p| {
        let no_proxy = p.data.pointer("/status/noProxy")?.as_str()?.trim().to_owned();
        (!no_proxy.is_empty()).then_some(no_proxy)
    }))
}

/// The facts of one Node.
pub fn node_obs(node: &Node) -> NodeObs {
    let status = node.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let spec = node.spec.as_ref();
    NodeObs {
        name: node.name_any(),
        uid: node.metadata.uid.clone().unwrap_or_default(),
        resource_version: node.metadata.resource_version.clone().unwrap_or_default(),
        addresses: status
            .and_then(|s| s.addresses.as_ref())
            .map(|a| a.iter().map(|a| a.address.clone()).collect())
            .unwrap_or_default(),
        ready,
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
        labels: node.labels().clone(),
        annotations: node.annotations().clone(),
        taints: spec.and_then(|s| s.taints.clone()).unwrap_or_default(),
        object: serde_json::to_value(node).unwrap_or_default(),
    }
}

fn machine_obs(machine: &DynamicObject) -> MachineObs {
    let data = &machine.data;
    let str_at = |p: &str| data.pointer(p).and_then(Value::as_str).map(str::to_owned);
    MachineObs {
        name: machine.name_any(),
        phase: str_at("/status/phase"),
        addresses: data
            .pointer("/status/addresses")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|a| a.get("address")?.as_str().map(str::to_owned)).collect())
            .unwrap_or_default(),
        node: str_at("/status/nodeRef/name"),
        machine_set: machine.labels().get("machine.openshift.io/cluster-api-machineset").cloned(),
        internal_ip: data
            .pointer("/status/addresses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|a| a.get("type").and_then(Value::as_str) == Some("InternalIP"))
            .filter_map(|a| a.get("address")?.as_str())
            .find(|a| a.parse::<std::net::Ipv4Addr>().is_ok())
            .map(str::to_owned),
        ignored: machine.labels().get("windowsmachineconfig.openshift.io/ignore").is_some_and(|v| v == "true"),
        azure: str_at("/spec/providerSpec/value/kind").is_some_and(|k| k.starts_with("Azure")),
        deleting: machine.metadata.deletion_timestamp.is_some()
            || str_at("/status/phase").as_deref() == Some("Deleting"),
        uid: machine.metadata.uid.clone().unwrap_or_default(),
        configure_failures: machine
            .annotations()
            .get(super::FAILURES_ANNOTATION)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
    }
}
