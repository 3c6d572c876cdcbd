//! Which Machines a round configures, which wait, and where each Machine
//! and MachineSet stands (issue 26): pure, from facts fixtures.

use std::collections::{BTreeMap, BTreeSet};

use super::machines::*;
use crate::cluster::join::{JoinReport, JoinResult};
use crate::cluster::{ClusterFacts, MachineObs, NodeObs};
use crate::desired::model::Desired;
use crate::engine::report::{NodeReport, NodeResult, Stage};
use crate::lifecycle::VERSION_ANNOTATION;
use crate::source::{Snapshot, SourceFile};

/// A Fleet with defaults only.
pub(super) const FLEET: &str =
    "apiVersion: winfleet.io/v1alpha1\nkind: Fleet\nmetadata:\n  name: f\nspec:\n  defaults:\n    port: 22\n";

fn desired() -> Desired {
    desired_of(&[("fleet.yaml", FLEET)])
}

/// The revision of `files` (path, content), valid.
pub(super) fn desired_of(files: &[(&str, &str)]) -> Desired {
    let files = files.iter().map(|(p, b)| SourceFile { path: (*p).into(), bytes: b.as_bytes().to_vec() }).collect();
    let loaded = crate::desired::load(&Snapshot { revision: None, files, links: Vec::new() }, Default::default());
    loaded.desired.unwrap_or_else(|| panic!("{:?}", loaded.diagnostics))
}

/// A Machine of MachineSet `win`.
pub(super) fn machine(name: &str, phase: &str, ip: Option<&str>) -> MachineObs {
    MachineObs {
        name: name.into(),
        phase: Some(phase.into()),
        internal_ip: ip.map(str::to_owned),
        addresses: ip.into_iter().map(str::to_owned).collect(),
        machine_set: Some("win".into()),
        ..MachineObs::default()
    }
}

fn facts(machines: Vec<MachineObs>) -> ClusterFacts {
    let set = serde_json::json!({
        "spec": { "replicas": 3, "template": { "metadata": { "labels": { "machine.openshift.io/os-id": "Windows" } } } },
        "status": { "readyReplicas": 3 },
    });
    ClusterFacts {
        machines: machines.into_iter().map(|m| (m.name.clone(), m)).collect(),
        machine_sets: BTreeMap::from([("win".to_owned(), set)]),
        ..ClusterFacts::default()
    }
}

fn failed(address: &str, reason: &str) -> NodeReport {
    NodeReport {
        address: address.into(),
        hostname: None,
        node_name: None,
        os: None,
        services: BTreeMap::new(),
        lifecycle: None,
        result: NodeResult::Failed { stage: Stage::Observe, reason: reason.into() },
    }
}

#[test]
fn provisioned_and_running_machines_are_configured_deleting_ignored_and_addressless_ones_are_not() {
    let mut deleting = machine("d", "Running", Some("10.0.0.4"));
    deleting.deleting = true;
    let mut ignored = machine("i", "Provisioned", Some("10.0.0.5"));
    ignored.ignored = true;
    let mut azure = machine("z", "Provisioned", Some("10.0.0.6"));
    azure.azure = true;
    let facts = facts(vec![
        machine("p", "Provisioned", Some("10.0.0.1")),
        machine("r", "Running", Some("10.0.0.2")),
        machine("n", "Provisioning", None),
        machine("f", "Failed", Some("10.0.0.3")),
        deleting,
        ignored,
        azure,
    ]);
    let instances = machine_instances(&desired(), &facts, &[]);
    let got: Vec<(&str, &str)> = instances.iter().map(|i| (i.address.as_str(), i.username.as_str())).collect();
    assert_eq!(got, [("10.0.0.1", "Administrator"), ("10.0.0.2", "Administrator"), ("10.0.0.6", "capi")]);
    assert_eq!(instances[0].origin, "Machine p");
}

#[test]
fn a_booting_machine_waits_but_one_that_refuses_the_key_fails() {
    let facts =
        facts(vec![machine("a", "Provisioned", Some("10.0.0.1")), machine("b", "Provisioned", Some("10.0.0.2"))]);
    let machines: BTreeSet<String> = ["10.0.0.1".to_owned(), "10.0.0.2".to_owned()].into();
    let nodes = vec![
        failed("10.0.0.1", "cannot connect to Administrator@10.0.0.1:22: Connection refused"),
        failed("10.0.0.2", "Administrator@10.0.0.2:22 refused public key authentication for user \"Administrator\""),
        failed("10.9.9.9", "cannot connect: Connection refused"),
    ];
    let (kept, waiting) = split_waiting(nodes, &machines, &facts, "fleet-hash");
    assert_eq!(waiting.keys().collect::<Vec<_>>(), ["10.0.0.1"]);
    let kept: Vec<&str> = kept.iter().map(|r| r.address.as_str()).collect();
    assert_eq!(kept, ["10.0.0.2", "10.9.9.9"], "a key refusal and a BYOH host stay failures");
}

#[test]
fn a_machine_whose_node_trusts_an_older_key_waits_for_key_rotation_when_it_refuses_the_fleet_key() {
    let mut facts = facts(vec![machine("a", "Running", Some("10.0.0.1")), machine("b", "Running", Some("10.0.0.2"))]);
    for (m, hash) in [("a", "old-hash"), ("b", "fleet-hash")] {
        let name = format!("node-{m}");
        facts.machines.get_mut(m).unwrap().node = Some(name.clone());
        let annotations = BTreeMap::from([(crate::cluster::join::PUB_KEY_HASH_ANNOTATION.to_owned(), hash.to_owned())]);
        facts.nodes.insert(name.clone(), NodeObs { name, ready: true, annotations, ..NodeObs::default() });
    }
    let machines: BTreeSet<String> = ["10.0.0.1".to_owned(), "10.0.0.2".to_owned()].into();
    let refused = "Administrator@{}:22 refused public key authentication for user \"Administrator\"";
    let nodes = vec![failed("10.0.0.1", refused), failed("10.0.0.2", refused)];
    let (kept, waiting) = split_waiting(nodes, &machines, &facts, "fleet-hash");
    assert!(waiting["10.0.0.1"].contains("key rotation replaces the Machine"), "{waiting:?}");
    let kept: Vec<&str> = kept.iter().map(|r| r.address.as_str()).collect();
    assert_eq!(kept, ["10.0.0.2"], "a Machine trusted with the fleet's key that refuses it fails");
}

#[test]
fn a_machine_set_is_ready_only_when_every_machine_has_a_ready_node_at_the_desired_version() {
    let mut facts = facts(vec![
        machine("a", "Running", Some("10.0.0.1")),
        machine("b", "Provisioned", Some("10.0.0.2")),
        machine("c", "Provisioned", Some("10.0.0.3")),
    ]);
    facts.machines.get_mut("a").unwrap().node = Some("node-a".into());
    let node = NodeObs {
        name: "node-a".into(),
        ready: true,
        annotations: BTreeMap::from([(VERSION_ANNOTATION.to_owned(), "v2".to_owned())]),
        ..NodeObs::default()
    };
    facts.nodes.insert("node-a".into(), node);
    let waiting = BTreeMap::from([("10.0.0.3".to_owned(), "its VM does not answer SSH yet".to_owned())]);
    let joins = vec![JoinReport {
        address: "10.0.0.2".into(),
        node: Some("node-b".into()),
        result: JoinResult::Joined,
        services: None,
    }];
    let outcomes = Outcomes {
        nodes: &[],
        waiting: &waiting,
        joins: &joins,
        upgrades: &[],
        version: Some("v2"),
        replicas: BTreeMap::from([("win".to_owned(), Some(3))]),
    };
    let (machines, sets) = report(&facts, &outcomes);
    let steps: Vec<&str> = machines.iter().map(|m| m.step.name()).collect();
    assert_eq!(steps, ["ready", "ready", "waiting"]);
    assert!(!sets[0].ready());
    assert_eq!(sets[0].counts(), "3 desired, 2 ready, 1 waiting (readyReplicas 3)");

    let at_v1 = Outcomes { version: Some("v1"), waiting: &BTreeMap::new(), ..outcomes };
    let (machines, _) = report(&facts, &at_v1);
    assert!(matches!(&machines[0].step, MachineStep::Configuring { reason } if reason.contains("not v1")));

    let all = Outcomes { waiting: &BTreeMap::new(), joins: &[], ..at_v1 };
    let mut ready = facts.clone();
    for (m, n) in [("b", "node-b"), ("c", "node-c")] {
        ready.machines.get_mut(m).unwrap().node = Some(n.into());
        let node = NodeObs { name: n.into(), ..ready.nodes["node-a"].clone() };
        ready.nodes.insert(n.into(), node);
    }
    let (_, sets) = report(&ready, &Outcomes { version: Some("v2"), ..all });
    assert!(sets[0].ready(), "{}", sets[0].counts());
}

#[test]
fn git_replicas_win_over_the_observed_count_and_a_set_without_them_follows_the_cluster() {
    let facts = facts(Vec::new());
    let none = BTreeMap::new();
    let outcomes =
        |replicas| Outcomes { nodes: &[], waiting: &none, joins: &[], upgrades: &[], version: None, replicas };
    let (_, sets) = report(&facts, &outcomes(BTreeMap::from([("win".to_owned(), Some(0))])));
    assert_eq!(sets[0].desired, 0);
    let (_, sets) = report(&facts, &outcomes(BTreeMap::from([("win".to_owned(), None)])));
    assert_eq!(sets[0].desired, 3, "the autoscaler's count");
}
