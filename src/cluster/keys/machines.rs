//! Key rotation of Machine-backed nodes (issue 26, point 4): which Machine
//! is deleted for its MachineSet to replace, which waits, and when the
//! rotation stops. Pure.
//!
//! A Machine whose Node trusts an older key is replaced only when:
//! - the `windows-user-data` Secret authorizes the fleet's key (written
//!   first, so the replacement boots with the new key);
//! - its MachineSet is winfleet's;
//! - every other Machine of its MachineSet is a Ready node: not being
//!   deleted, `Running`, its Node Ready at the desired version, and, for a
//!   Machine that does not carry the old key (a replacement), configured
//!   without a failure this round or the rounds before; and the MachineSet
//!   has as many Machines as its replicas (a replacement not created yet
//!   holds the rotation too);
//! - a disruption slot is free (`rollout.maxUnavailable`, counting every
//!   Machine that is not a Ready node).
//!
//! A replacement that failed stops the rotation of its MachineSet
//! ([`KeyResult::RotationStopped`], naming it and why); one still on its
//! way makes the others wait ([`KeyResult::MachineWaiting`], naming it and
//! its step).

use std::collections::BTreeMap;

use super::{Inputs, KeyReport, KeyResult};
use crate::cluster::{MachineObs, NodeObs, is_managed};
use crate::engine::report::NodeResult;
use crate::lifecycle::VERSION_ANNOTATION;

/// Where a Machine stands for the rotation.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Standing {
    /// A Ready node (at the desired version).
    Ready,
    /// On its way (being deleted, provisioning, joining).
    Coming(String),
    /// A replacement that failed: the rotation stops.
    Failed {
        /// Why.
        reason: String,
        /// Its first failed round (the stop is announced once).
        first: bool,
    },
}

/// The Machine replacements of the rotation, in Machine name order.
pub fn plan(inputs: Inputs<'_>, stale: &dyn Fn(&NodeObs) -> bool) -> Vec<KeyReport> {
    let facts = inputs.facts;
    let usable = || facts.machines.values().filter(|m| !m.ignored);
    let standings: BTreeMap<&str, Standing> = usable().map(|m| (m.name.as_str(), standing(m, inputs, stale))).collect();
    let busy = standings.values().filter(|s| **s != Standing::Ready).count();
    let max = inputs.max_unavailable.max(1);
    let mut slots = max.saturating_sub(busy);
    let mut out = Vec::new();
    for machine in usable().filter(|m| !m.deleting) {
        let Some(node) = machine.node.as_deref().and_then(|n| facts.nodes.get(n)) else { continue };
        if !stale(node) {
            continue;
        }
        let waiting = |reason: String| KeyResult::MachineWaiting { machine: machine.name.clone(), reason };
        let set = machine.machine_set.as_deref();
        let set_object = set.and_then(|s| facts.machine_sets.get(s));
        let managed = set_object.is_some_and(|ms| is_managed(ms.pointer("/metadata/labels")));
        let result = if let Standing::Coming(why) | Standing::Failed { reason: why, .. } = &standings[&*machine.name] {
            waiting(format!("it is not a Ready node itself ({why}); it is replaced once it is"))
        } else if !managed {
            waiting(format!(
                "its MachineSet {} is not managed by winfleet: replace the Machine yourself (delete it), or put the \
                 MachineSet in the repository",
                set.unwrap_or("(none)")
            ))
        } else if let Some(error) = inputs.user_data_error {
            waiting(format!("the windows-user-data Secret does not authorize the fleet's new key yet: {error}"))
        } else if let Some(result) = held(machine, set.unwrap_or_default(), set_object, inputs, &standings) {
            result
        } else if slots == 0 {
            waiting(format!("rollout.maxUnavailable ({max}) Machine(s) are already being replaced or not Ready nodes"))
        } else {
            slots -= 1;
            KeyResult::MachineReplaced { machine: machine.name.clone(), done: false }
        };
        out.push(KeyReport { node: node.name.clone(), address: machine.name.clone(), result });
    }
    out
}

/// Why `machine` of MachineSet `set` may not go now: another Machine of its
/// MachineSet is not a Ready node (a failed replacement first), or a
/// replacement is not created yet.
fn held(
    machine: &MachineObs,
    set: &str,
    set_object: Option<&serde_json::Value>,
    inputs: Inputs<'_>,
    standings: &BTreeMap<&str, Standing>,
) -> Option<KeyResult> {
    let siblings: Vec<&MachineObs> = inputs
        .facts
        .machines
        .values()
        .filter(|m| !m.ignored && m.name != machine.name && m.machine_set.as_deref() == Some(set))
        .collect();
    let failed = siblings.iter().find_map(|m| match &standings[&*m.name] {
        Standing::Failed { reason, first } => Some((m, reason, *first)),
        _ => None,
    });
    if let Some((blocker, reason, announce)) = failed {
        return Some(KeyResult::RotationStopped {
            machine: machine.name.clone(),
            machine_set: set.to_owned(),
            blocker: blocker.name.clone(),
            reason: reason.clone(),
            announce,
        });
    }
    if let Some((blocker, why)) = siblings.iter().find_map(|m| match &standings[&*m.name] {
        Standing::Coming(why) => Some((m, why)),
        _ => None,
    }) {
        let reason = format!("Machine {} of MachineSet {set} is not a Ready node yet ({why})", blocker.name);
        return Some(KeyResult::MachineWaiting { machine: machine.name.clone(), reason });
    }
    let replicas = set_object.and_then(|o| o.pointer("/spec/replicas")).and_then(serde_json::Value::as_u64);
    let present = siblings.iter().filter(|m| !m.deleting).count() as u64 + 1;
    match replicas {
        Some(want) if present < want => Some(KeyResult::MachineWaiting {
            machine: machine.name.clone(),
            reason: format!("MachineSet {set} has {present} of its {want} Machines: a replacement is not created yet"),
        }),
        _ => None,
    }
}

/// Where `m` stands: a replacement (a Machine whose Node does not carry
/// the old key, or has no Node yet) must be a Ready node at the desired
/// version with no failed configure; a Machine that still carries the old
/// key (winfleet cannot reach it with the new one) only needs to be
/// Running with a Ready Node.
fn standing(m: &MachineObs, inputs: Inputs<'_>, stale: &dyn Fn(&NodeObs) -> bool) -> Standing {
    if m.deleting {
        return Standing::Coming("it is being deleted".into());
    }
    let node = m.node.as_deref().and_then(|n| inputs.facts.nodes.get(n));
    let old_key = node.is_some_and(stale);
    if !old_key {
        if let Some(reason) = failed_now(m, inputs) {
            return Standing::Failed { reason, first: m.configure_failures == 0 };
        }
        if m.configure_failures > 0 {
            let reason = format!("its configure failed {} round(s) in a row", m.configure_failures);
            // A join failure is first seen here, a round later.
            return Standing::Failed { reason, first: m.configure_failures == 1 };
        }
    }
    let phase = m.phase.as_deref().unwrap_or("Provisioning");
    if phase != "Running" {
        return Standing::Coming(format!("phase {phase}"));
    }
    let Some(node) = node else { return Standing::Coming("no Node yet".into()) };
    if !node.ready {
        return Standing::Coming(format!("Node {} is not Ready", node.name));
    }
    match (desired_version(m, inputs), node.annotations.get(VERSION_ANNOTATION)) {
        (Some(want), has) if !old_key && has.map(String::as_str) != Some(want) => Standing::Coming(format!(
            "Node {} is at version {}, not {want}",
            node.name,
            has.map_or("(none)", String::as_str)
        )),
        _ => Standing::Ready,
    }
}

/// This round's failure configuring `m`, if any (a join failure is
/// counted on the Machine and seen by the next round).
fn failed_now(m: &MachineObs, inputs: Inputs<'_>) -> Option<String> {
    let ip = m.internal_ip.as_deref()?;
    inputs.reports.iter().find(|r| r.address == ip).and_then(|r| match &r.result {
        NodeResult::Failed { stage, reason } => Some(format!("{} failed: {reason}", stage.name())),
        _ => None,
    })
}

/// The version `m`'s node should carry: its own report's desired version
/// this round (`None`: no lifecycle, or not in the round).
fn desired_version<'a>(m: &MachineObs, inputs: Inputs<'a>) -> Option<&'a str> {
    let ip = m.internal_ip.as_deref()?;
    let report = inputs.reports.iter().find(|r| r.address == ip)?;
    report.lifecycle.as_ref().map(|l| l.version.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClusterFacts;
    use crate::engine::report::{LifecycleReport, NodeReport, Stage};
    use crate::lifecycle::Mode;
    use serde_json::json;

    const OLD: &str = "old-hash";

    /// MachineSet `ms` (winfleet's, 2 replicas) with `a` and `b`, both
    /// Running with Ready Nodes at version `v1` that trust the old key.
    fn facts() -> ClusterFacts {
        let mut facts = ClusterFacts::default();
        let labels = json!({ "app.kubernetes.io/managed-by": "winfleet" });
        facts.machine_sets.insert("ms".into(), json!({ "metadata": { "labels": labels }, "spec": { "replicas": 2 } }));
        for (name, ip) in [("a", "10.0.0.1"), ("b", "10.0.0.2")] {
            add(&mut facts, name, ip, Some(OLD));
        }
        facts
    }

    fn add(facts: &mut ClusterFacts, name: &str, ip: &str, hash: Option<&str>) {
        let node = format!("node-{name}");
        let mut annotations = BTreeMap::from([(VERSION_ANNOTATION.to_owned(), "v1".to_owned())]);
        if let Some(h) = hash {
            annotations.insert(crate::cluster::join::PUB_KEY_HASH_ANNOTATION.into(), h.into());
        }
        facts
            .nodes
            .insert(node.clone(), NodeObs { name: node.clone(), ready: true, annotations, ..NodeObs::default() });
        facts.machines.insert(
            name.into(),
            MachineObs {
                name: name.into(),
                phase: Some("Running".into()),
                node: Some(node),
                machine_set: Some("ms".into()),
                internal_ip: Some(ip.into()),
                ..MachineObs::default()
            },
        );
    }

    fn report(ip: &str, failed: Option<&str>) -> NodeReport {
        let mut r = NodeReport::new(ip);
        r.lifecycle = Some(LifecycleReport {
            mode: Mode::Maintain,
            version: "v1".into(),
            waiting: Vec::new(),
            error: None,
            uploaded_bytes: 0,
            reboot_first: false,
        });
        if let Some(reason) = failed {
            r.result = NodeResult::Failed { stage: Stage::Observe, reason: reason.into() };
        }
        r
    }

    fn run(facts: &ClusterFacts, reports: &[NodeReport], user_data_error: Option<&str>) -> Vec<KeyResult> {
        let associations = BTreeMap::new();
        let inputs =
            Inputs { byoh: &[], reports, facts, associations: &associations, user_data_error, max_unavailable: 1 };
        let stale =
            |n: &NodeObs| n.annotations.get(crate::cluster::join::PUB_KEY_HASH_ANNOTATION).is_some_and(|h| h == OLD);
        plan(inputs, &stale).into_iter().map(|k| k.result).collect()
    }

    fn waits(result: &KeyResult, words: &str) -> bool {
        matches!(result, KeyResult::MachineWaiting { reason, .. } if reason.contains(words))
    }

    #[test]
    fn one_machine_goes_at_a_time_and_only_once_the_secret_carries_the_key() {
        let facts = facts();
        let results = run(&facts, &[], None);
        assert!(matches!(&results[0], KeyResult::MachineReplaced { machine, .. } if machine == "a"), "{results:?}");
        assert!(waits(&results[1], "maxUnavailable"), "{results:?}");
        let results = run(&facts, &[], Some("it authorizes SHA256:old"));
        assert!(results.iter().all(|r| waits(r, "windows-user-data Secret")), "{results:?}");
    }

    #[test]
    fn a_replacement_holds_the_next_until_it_is_a_ready_node_at_the_desired_version() {
        let mut facts = facts();
        facts.machines.remove("a");
        // Not created yet: one Machine of two.
        assert!(waits(&run(&facts, &[], None)[0], "1 of its 2 Machines"));
        add(&mut facts, "c", "10.0.0.3", Some("new-hash"));
        let c = facts.machines.get_mut("c").unwrap();
        c.phase = Some("Provisioned".into());
        assert!(waits(
            &run(&facts, &[], None)[0],
            "Machine c of MachineSet ms is not a Ready node yet (phase Provisioned)"
        ));
        facts.machines.get_mut("c").unwrap().phase = Some("Running".into());
        facts.nodes.get_mut("node-c").unwrap().ready = false;
        assert!(waits(&run(&facts, &[], None)[0], "Node node-c is not Ready"));
        facts.nodes.get_mut("node-c").unwrap().ready = true;
        facts.nodes.get_mut("node-c").unwrap().annotations.insert(VERSION_ANNOTATION.into(), "v0".into());
        let reports = [report("10.0.0.3", None)];
        assert!(waits(&run(&facts, &reports, None)[0], "Node node-c is at version v0, not v1"));
        facts.nodes.get_mut("node-c").unwrap().annotations.insert(VERSION_ANNOTATION.into(), "v1".into());
        // b's own refusal of the new key does not matter: it is the one to go.
        let reports = [report("10.0.0.3", None), report("10.0.0.2", Some("refused public key authentication"))];
        assert!(
            matches!(&run(&facts, &reports, None)[0], KeyResult::MachineReplaced { machine, .. } if machine == "b")
        );
    }

    #[test]
    fn a_failed_replacement_stops_the_rotation_and_the_stop_is_announced_once() {
        let mut facts = facts();
        facts.machines.remove("a");
        add(&mut facts, "c", "10.0.0.3", None);
        facts.machines.get_mut("c").unwrap().node = None;
        facts.machines.get_mut("c").unwrap().phase = Some("Provisioned".into());
        let reports = [report("10.0.0.3", Some("refused public key authentication"))];
        let stopped = |results: Vec<KeyResult>| match &results[0] {
            KeyResult::RotationStopped { machine, machine_set, blocker, reason, announce } => {
                assert_eq!((machine.as_str(), machine_set.as_str(), blocker.as_str()), ("b", "ms", "c"));
                assert!(reason.contains("refused public key authentication") || reason.contains("round(s) in a row"));
                *announce
            }
            other => panic!("{other:?}"),
        };
        assert!(stopped(run(&facts, &reports, None)), "announced at its first failed round");
        facts.machines.get_mut("c").unwrap().configure_failures = 1;
        assert!(!stopped(run(&facts, &reports, None)), "said once");
        // A join failure is seen a round later, on the Machine's count.
        assert!(stopped(run(&facts, &[], None)));
        facts.machines.get_mut("c").unwrap().configure_failures = 2;
        assert!(!stopped(run(&facts, &[], None)));
    }
}
