//! The round's lifecycle part: each dialect's spec as this round runs it
//! (the payload, the cluster material, the cluster's no-proxy entries),
//! each node's context from the cluster (its mode and Node), and after the
//! node round, the joins of the nodes that are being configured.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::Arc;

use crate::cluster::associate::Association;
use crate::cluster::join::{Candidate, JoinReport, JoinResult};
use crate::cluster::keys::{KeyReport, KeyResult};
use crate::cluster::upgrade;
use crate::cluster::{CORDONED_ANNOTATION, ClusterFacts};
use crate::desired::model::{Instance, with_rebuilt_specs};
use crate::engine::NodeContext;
use crate::engine::report::{NodeReport, NodeResult};
use crate::lifecycle::material::ClusterMaterial;
use crate::lifecycle::{Mode, PayloadState, VERSION_ANNOTATION, mode};

/// The instances with their specs as this round runs them. Specs are
/// shared by dialect, so each distinct spec is rebuilt once.
pub fn runtime_instances(
    instances: &[&Instance],
    payload: &PayloadState,
    material: Option<&Result<ClusterMaterial, String>>,
    cluster_no_proxy: Option<&str>,
) -> Vec<Instance> {
    with_rebuilt_specs(instances, |shared| {
        let mut spec =
            cluster_no_proxy.and_then(|np| shared.with_cluster_no_proxy(np)).unwrap_or_else(|| (**shared).clone());
        if let Some(lifecycle) = &spec.lifecycle {
            spec.lifecycle = Some(Arc::new(lifecycle.at_runtime(payload, material)));
        }
        Arc::new(spec)
    })
}

/// Each instance's lifecycle context from the cluster: its Node (by
/// association), its mode from the Node's version annotation, and whether
/// running services may be stopped (winfleet cordoned it for a join).
pub fn contexts(
    instances: &[&Instance],
    facts: &ClusterFacts,
    associations: &BTreeMap<String, Association>,
) -> BTreeMap<String, NodeContext> {
    instances
        .iter()
        .filter_map(|instance| {
            let lifecycle = instance.spec.lifecycle.as_ref()?;
            let node = associations.get(&instance.address).and_then(Association::node).and_then(|n| facts.nodes.get(n));
            let version = node.map(|n| n.annotations.get(VERSION_ANNOTATION).map(String::as_str));
            let mode = mode(lifecycle, true, version);
            let disrupt = mode == Mode::Join && node.is_some_and(|n| n.annotations.contains_key(CORDONED_ANNOTATION));
            let context = NodeContext { mode: Some(mode), node: node.map(|n| n.object.clone()), disrupt };
            Some((instance.address.clone(), context))
        })
        .collect()
}

/// The nodes to join after the node round: in Join mode, their lifecycle
/// not blocked, and their node round done without failures.
pub fn candidates<'a>(
    instances: &[&'a Instance],
    contexts: &BTreeMap<String, NodeContext>,
    reports: &[NodeReport],
    resolved: &BTreeMap<String, Result<Ipv4Addr, String>>,
    byoh: usize,
) -> (Vec<Candidate<'a>>, Vec<JoinReport>) {
    let mut joining = Vec::new();
    let mut held = Vec::new();
    for (i, instance) in instances.iter().enumerate() {
        if contexts.get(&instance.address).and_then(|c| c.mode) != Some(Mode::Join) {
            continue;
        }
        let Some(report) = reports.iter().find(|r| r.address == instance.address) else { continue };
        if report.lifecycle.as_ref().is_some_and(|l| l.error.is_some()) {
            continue;
        }
        if report.failed() || !matches!(report.result, NodeResult::Done { .. }) {
            held.push(JoinReport {
                address: instance.address.clone(),
                node: None,
                result: JoinResult::NotStarted { reason: "its configure did not finish in this round".into() },
                services: None,
            });
            continue;
        }
        if report.lifecycle.as_ref().is_some_and(|l| l.reboot_first) {
            held.push(JoinReport {
                address: instance.address.clone(),
                node: None,
                result: JoinResult::NotStarted {
                    reason: "its host reboots first, for the Containers feature; it is configured and joined after"
                        .into(),
                },
                services: None,
            });
            continue;
        }
        let ipv4 = resolved.get(&instance.address).and_then(|r| r.as_ref().ok()).copied();
        joining.push(Candidate { instance, ipv4, byoh: i < byoh });
    }
    (joining, held)
}

/// Instances (listed and Machine-backed) → the host names observed this round.
pub fn host_names(instances: &[&Instance], reports: &[NodeReport]) -> BTreeMap<String, String> {
    instances
        .iter()
        .filter_map(|i| {
            let report = reports.iter().find(|r| r.address == i.address)?;
            // The kubelet's --hostname-override, when it gives another name
            // (AWS, GCP, vSphere), is the name its CSRs carry.
            let host = report.node_name.clone().or_else(|| report.hostname.clone())?;
            Some((i.address.clone(), host))
        })
        .collect()
}

/// What a dry run says a join still needs.
pub fn preview(
    candidate: &Candidate<'_>,
    contexts: &BTreeMap<String, NodeContext>,
    hosts: &BTreeMap<String, String>,
) -> JoinReport {
    let node = contexts.get(&candidate.instance.address).and_then(|c| c.node.as_ref());
    let mut steps = Vec::new();
    let name = node.and_then(|n| n.pointer("/metadata/name")).and_then(serde_json::Value::as_str).map(str::to_owned);
    if node.is_none() {
        steps.push(match hosts.get(&candidate.instance.address) {
            Some(name) => format!("approve the kubelet's client CSR for node {name}; wait for its Node"),
            None => "approve the kubelet's client CSR; wait for its Node".to_owned(),
        });
    }
    let unschedulable = node.and_then(|n| n.pointer("/spec/unschedulable")).and_then(serde_json::Value::as_bool);
    if unschedulable != Some(true) {
        steps.push("cordon".to_owned());
    }
    steps.push("WMCO's labels and annotations".to_owned());
    steps.push("the services that need the Node".to_owned());
    let ready = node
        .and_then(|n| n.pointer("/status/conditions"))
        .and_then(serde_json::Value::as_array)
        .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
    steps.push(if ready { "a fresh Ready heartbeat".to_owned() } else { "wait for Ready (not Ready now)".to_owned() });
    steps.push("version annotation and uncordon".to_owned());
    JoinReport {
        address: candidate.instance.address.clone(),
        node: name,
        result: JoinResult::Planned { steps },
        services: None,
    }
}

/// The nodes to upgrade: an older winfleet version on their Node, their
/// lifecycle not blocked, their node round done without failures. Every
/// node is upgraded in place, a Machine-backed one too, except a node whose
/// Machine this round's key rotation replaces (`keys`): its replacement
/// joins at the desired version.
pub fn upgrade_candidates<'a>(
    instances: &[&'a Instance],
    contexts: &BTreeMap<String, NodeContext>,
    reports: &[NodeReport],
    (facts, associations): (&ClusterFacts, &BTreeMap<String, Association>),
    keys: &[KeyReport],
) -> Vec<upgrade::Candidate<'a>> {
    let replaced: BTreeSet<&str> = keys
        .iter()
        .filter(|k| matches!(k.result, KeyResult::MachineReplaced { .. }))
        .map(|k| k.node.as_str())
        .collect();
    instances
        .iter()
        .filter(|i| contexts.get(&i.address).and_then(|c| c.mode) == Some(Mode::UpgradePending))
        .filter(|i| {
            reports
                .iter()
                .find(|r| r.address == i.address)
                .is_some_and(|r| !r.failed() && matches!(r.result, NodeResult::Done { .. }))
        })
        .filter_map(|i| {
            let node = facts.nodes.get(associations.get(&i.address)?.node()?)?;
            Some(upgrade::Candidate { instance: i, node: node.clone() })
        })
        .filter(|c| !replaced.contains(c.node.name.as_str()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{MachineObs, NodeObs};
    use crate::source::{Snapshot, SourceFile};

    /// Two Running Machines with Ready Nodes `win-a` and `win-b`, each
    /// Node at an older version and its node round done.
    fn fleet() -> (Vec<Instance>, ClusterFacts) {
        let fleet =
            "apiVersion: winfleet.io/v1alpha1\nkind: Fleet\nmetadata:\n  name: f\nspec:\n  defaults:\n    port: 22\n";
        let snapshot = Snapshot {
            revision: None,
            files: vec![SourceFile { path: "fleet.yaml".into(), bytes: fleet.as_bytes().to_vec() }],
            links: Vec::new(),
        };
        let desired = crate::desired::load(&snapshot, Default::default()).desired.unwrap_or_else(|| unreachable!());
        let machine = |name: &str, ip: &str, node: &str| MachineObs {
            name: name.into(),
            phase: Some("Running".into()),
            internal_ip: Some(ip.into()),
            addresses: vec![ip.into()],
            machine_set: Some("win".into()),
            node: Some(node.into()),
            ..MachineObs::default()
        };
        let machines = [machine("win-1", "10.0.0.5", "win-a"), machine("win-2", "10.0.0.6", "win-b")];
        let facts = ClusterFacts {
            machines: machines.into_iter().map(|m| (m.name.clone(), m)).collect(),
            nodes: ["win-a", "win-b"].map(|n| (n.to_owned(), NodeObs { name: n.into(), ..NodeObs::default() })).into(),
            ..ClusterFacts::default()
        };
        (super::super::machines::machine_instances(&desired, &facts, &[]), facts)
    }

    #[test]
    fn machine_backed_nodes_upgrade_in_place_unless_a_key_rotation_replaces_their_machine() {
        let (instances, facts) = fleet();
        let all: Vec<&Instance> = instances.iter().collect();
        let pending = NodeContext { mode: Some(Mode::UpgradePending), node: None, disrupt: false };
        let contexts = all.iter().map(|i| (i.address.clone(), pending.clone())).collect();
        let done = NodeResult::Done { operations: Vec::new(), in_sync: 0, reboot_required: false };
        let reports: Vec<NodeReport> = all
            .iter()
            .map(|i| NodeReport {
                address: i.address.clone(),
                hostname: None,
                node_name: None,
                os: None,
                services: BTreeMap::new(),
                lifecycle: None,
                result: done.clone(),
            })
            .collect();
        let associations = [("10.0.0.5", "win-a"), ("10.0.0.6", "win-b")]
            .map(|(a, n)| (a.to_owned(), Association::Node(n.to_owned())))
            .into();
        let names = |keys: &[KeyReport]| -> Vec<String> {
            upgrade_candidates(&all, &contexts, &reports, (&facts, &associations), keys)
                .into_iter()
                .map(|c| c.node.name)
                .collect()
        };
        assert_eq!(names(&[]), ["win-a", "win-b"], "in place, both");
        let replaced = KeyReport {
            node: "win-b".into(),
            address: "win-2".into(),
            result: KeyResult::MachineReplaced { machine: "win-2".into(), done: false },
        };
        assert_eq!(names(&[replaced]), ["win-a"], "win-b's Machine is replaced: its replacement joins instead");
    }
}
