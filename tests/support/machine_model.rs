//! The project's own model of the Machine API, driving the cloud of
//! [`super::machine_provider`]: Machines created at once for a Windows
//! MachineSet's replicas (named `<set>-001`, …), the newest deleted first on
//! a scale-down, `Provisioned` with the VM's addresses the moment it is
//! created, `nodeRef` and `Running` the moment a Node with its address
//! exists, and the VM and that Node deleted with the Machine. OpenShift's
//! real controllers differ (docs/testing.md lists how):
//! tests/support/machine_api_real.rs runs them instead.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::controlplane::resource;
use super::machine_provider::{Cloud, Refusal, Vms};

const NS: &str = "openshift-machine-api";
const SET_LABEL: &str = "machine.openshift.io/cluster-api-machineset";

impl Cloud {
    /// A pool of `vms` VMs, the model's Machine API running against `client`.
    pub fn start(client: Client, vms: usize) -> Self {
        Self::start_with_hosts(client, vms, 0)
    }

    /// The same with `hosts` BYOH hosts beside the VMs ([`Cloud::pool`]).
    pub fn start_with_hosts(client: Client, vms: usize, hosts: usize) -> Self {
        Self::run_model(client, Cloud::pool(vms, hosts))
    }

    /// The same with one BYOH host per name in `hosts` (the demo names its
    /// own: [`Cloud::pool_named`]).
    pub fn start_with_named_hosts(client: Client, vms: usize, hosts: &[String]) -> Self {
        Self::run_model(client, Cloud::pool_named(vms, hosts))
    }

    /// VMs with these host names, in the order they are handed out, under
    /// the model's Machine API.
    pub fn start_with_vm_names(client: Client, names: &[&str]) -> Self {
        Self::run_model(client, Cloud::pool_of(names.iter().map(|n| (*n).to_owned()).collect(), &[]))
    }

    /// Runs the model's Machine API over `cloud`'s VMs.
    fn run_model(client: Client, cloud: Cloud) -> Self {
        let (pool, stop) = (cloud.vms.clone(), cloud.stop.clone());
        let mut next_name = 0;
        tokio::spawn(async move {
            while !stop.is_cancelled() {
                if let Err(e) = pass(&client, &pool, &mut next_name).await {
                    pool.record_error(e);
                }
                tokio::select! {
                    () = stop.cancelled() => {}
                    () = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
            }
        });
        cloud
    }
}

/// One pass of the Machine API and the cloud.
async fn pass(client: &Client, vms: &Vms, next_name: &mut u64) -> Result<(), String> {
    let sets: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &machine_sets());
    let machines: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &machine_api());
    let nodes: Api<Node> = Api::all(client.clone());
    fn err(what: &'static str) -> impl Fn(kube::Error) -> String {
        move |e| format!("{what}: {e}")
    }
    let sets = sets.list(&ListParams::default()).await.map_err(err("list MachineSets"))?.items;
    let mut all = machines.list(&ListParams::default()).await.map_err(err("list Machines"))?.items;
    let node_list = nodes.list(&ListParams::default()).await.map_err(err("list Nodes"))?.items;
    // The MachineSet controller: as many Machines as replicas, the newest
    // deleted first on a scale-down.
    for set in &sets {
        let name = set.name_any();
        let template = &set.data["spec"]["template"];
        if template.pointer("/metadata/labels/machine.openshift.io~1os-id").and_then(Value::as_str) != Some("Windows") {
            continue;
        }
        let want = set.data.pointer("/spec/replicas").and_then(Value::as_u64).unwrap_or(1) as usize;
        let mut mine: Vec<&DynamicObject> = all.iter().filter(|m| m.labels().get(SET_LABEL) == Some(&name)).collect();
        mine.sort_by_key(|m| m.name_any());
        for _ in mine.len()..want {
            *next_name += 1;
            let machine = json!({
                "apiVersion": "machine.openshift.io/v1beta1",
                "kind": "Machine",
                "metadata": { "name": format!("{name}-{:03}", *next_name), "namespace": NS, "labels": template["metadata"]["labels"] },
                "spec": template["spec"],
            });
            let object: DynamicObject = serde_json::from_value(machine).map_err(|e| e.to_string())?;
            machines.create(&PostParams::default(), &object).await.map_err(err("create Machine"))?;
        }
        for extra in mine.iter().rev().take(mine.len().saturating_sub(want)) {
            let _ = machines.delete(&extra.name_any(), &DeleteParams::default()).await;
        }
        let ready = mine
            .iter()
            .take(want)
            .filter(|m| {
                let node = m.data.pointer("/status/nodeRef/name").and_then(Value::as_str);
                node.and_then(|n| node_list.iter().find(|x| x.name_any() == n)).is_some_and(node_ready)
            })
            .count();
        let status = json!({ "status": { "replicas": mine.len().min(want), "readyReplicas": ready, "availableReplicas": ready } });
        let sets_api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &machine_sets());
        sets_api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .map_err(err("MachineSet status"))?;
    }
    all = machines.list(&ListParams::default()).await.map_err(err("list Machines"))?.items;
    // The cloud: a VM per new Machine, its key from the user data.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    for machine in &all {
        let name = machine.name_any();
        let phase = machine.data.pointer("/status/phase").and_then(Value::as_str).unwrap_or_default().to_owned();
        if vms.get(&name).is_none() {
            // A real Machine controller waits for the user data Secret.
            let Some(secret) = secrets.get_opt("windows-user-data").await.map_err(err("get user data"))? else {
                continue;
            };
            let script = secret
                .data
                .as_ref()
                .and_then(|d| d.get("userData"))
                .map(|b| String::from_utf8_lossy(&b.0).into_owned());
            // A refused create leaves this Machine unprovisioned; the others
            // go on (the real Machine controller reconciles each alone).
            let vm = match vms.create(&name, script.as_deref()) {
                Ok(vm) => vm,
                Err(Refusal::Transient(m) | Refusal::Permanent(m)) => {
                    vms.record_error(m);
                    continue;
                }
            };
            let status = json!({ "status": {
                "phase": "Provisioned",
                "addresses": [{ "type": "InternalIP", "address": vm.address }, { "type": "Hostname", "address": vm.hostname }],
            }});
            machines
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await
                .map_err(err("Machine status"))?;
            continue;
        }
        if phase == "Provisioned" {
            let address =
                machine.data.pointer("/status/addresses/0/address").and_then(Value::as_str).unwrap_or_default();
            let registered = node_list.iter().find(|n| node_addresses(n).iter().any(|a| a == address));
            if let Some(node) = registered {
                let status =
                    json!({ "status": { "phase": "Running", "nodeRef": { "kind": "Node", "name": node.name_any() } } });
                machines
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                    .await
                    .map_err(err("Machine status"))?;
            }
        }
    }
    // Machines gone: their VM deleted, their Node removed (the Machine API's job).
    for machine in vms.machines().into_iter().filter(|m| !all.iter().any(|x| &x.name_any() == m)) {
        let pool = vms.clone();
        let gone = machine.clone();
        let address = tokio::task::spawn_blocking(move || pool.delete(&gone)).await.map_err(|e| e.to_string())?;
        for node in node_list.iter().filter(|n| address.as_ref().is_some_and(|a| node_addresses(n).contains(a))) {
            let _ = nodes.delete(&node.name_any(), &DeleteParams::default()).await;
        }
        vms.deleted(&machine);
    }
    Ok(())
}

fn node_ready(node: &Node) -> bool {
    let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn node_addresses(node: &Node) -> Vec<String> {
    let addresses = node.status.as_ref().and_then(|s| s.addresses.as_ref());
    addresses.into_iter().flatten().map(|a| a.address.clone()).collect()
}

fn machine_sets() -> kube::api::ApiResource {
    resource("machine.openshift.io", "v1beta1", "MachineSet", "machinesets")
}

fn machine_api() -> kube::api::ApiResource {
    resource("machine.openshift.io", "v1beta1", "Machine", "machines")
}
