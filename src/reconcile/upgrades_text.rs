//! The upgrade rollout as text: how many nodes at a time, then one line per
//! node saying which way it goes. Every node is upgraded in place; a
//! Machine-backed node's line says so and names its Machine, which is kept
//! (WMCO replaces the Machine instead; docs/lifecycle.md, Machines). Pure.

use std::fmt::Write as _;

use crate::cluster::upgrade::{UpgradeReport, UpgradeResult};

use super::machines::MachineReport;

/// The rollout's header (`slots` nodes at a time) and its lines; a node's
/// Machine is found by its address among the round's `machines`.
pub fn render_upgrades(out: &mut String, upgrades: &[UpgradeReport], slots: Option<usize>, machines: &[MachineReport]) {
    if let Some(slots) = slots.filter(|_| !upgrades.is_empty()) {
        let _ = writeln!(
            out,
            "  Upgrades: {} node(s), {slots} at a time (rollout.maxUnavailable), in this order:",
            upgrades.len()
        );
    }
    for u in upgrades {
        let machine = machines.iter().find(|m| m.address.as_deref() == Some(u.address.as_str()));
        let _ = writeln!(out, "{}", upgrade_line(u, machine.map(|m| m.machine.as_str())));
    }
}

/// One node's upgrade line; `machine` is the Machine behind the node.
pub fn upgrade_line(u: &UpgradeReport, machine: Option<&str>) -> String {
    let way = machine.map(|m| format!("upgrade in place (Machine-backed: {m}; not replaced): ")).unwrap_or_default();
    let what = match &u.result {
        UpgradeResult::Upgraded { evicted, operations } => {
            format!("upgraded, {evicted} pod(s) evicted, {operations} operation(s) on the node")
        }
        UpgradeResult::Failed { stage, reason } => format!("FAILED at {}: {reason}", stage.name()),
        UpgradeResult::NotStarted { reason } => format!("not started: {reason}"),
        UpgradeResult::Planned { operations } => {
            format!("to do: cordon, drain; {}; Ready; uncordon", operations.join("; "))
        }
    };
    format!("  Upgrade {} ({}) {} -> {}: {way}{what}", u.node, u.address, u.from, u.to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::keys::{KeyReport, KeyResult};
    use crate::reconcile::machines::MachineStep;

    fn upgrade(node: &str, address: &str, result: UpgradeResult) -> UpgradeReport {
        UpgradeReport { node: node.into(), address: address.into(), from: "v1".into(), to: "v2".into(), result }
    }

    fn planned() -> UpgradeResult {
        UpgradeResult::Planned { operations: vec!["kubelet (upload kubelet)".into()] }
    }

    #[test]
    fn a_machine_backed_node_is_upgraded_in_place_and_its_machine_named() {
        assert_eq!(
            upgrade_line(&upgrade("win-a", "10.0.0.5", planned()), Some("winworker-x7k2p")),
            "  Upgrade win-a (10.0.0.5) v1 -> v2: upgrade in place (Machine-backed: winworker-x7k2p; not replaced): \
             to do: cordon, drain; kubelet (upload kubelet); Ready; uncordon"
        );
        let done = UpgradeResult::Upgraded { evicted: 2, operations: 3 };
        assert_eq!(
            upgrade_line(&upgrade("win-a", "10.0.0.5", done), Some("winworker-x7k2p")),
            "  Upgrade win-a (10.0.0.5) v1 -> v2: upgrade in place (Machine-backed: winworker-x7k2p; not replaced): \
             upgraded, 2 pod(s) evicted, 3 operation(s) on the node"
        );
    }

    #[test]
    fn a_byoh_node_line_is_unchanged() {
        assert_eq!(
            upgrade_line(&upgrade("win-b", "10.0.0.6", planned()), None),
            "  Upgrade win-b (10.0.0.6) v1 -> v2: to do: cordon, drain; kubelet (upload kubelet); Ready; uncordon"
        );
    }

    #[test]
    fn the_plan_says_which_way_each_node_goes() {
        let upgrades = [upgrade("win-a", "10.0.0.5", planned()), upgrade("win-b", "10.0.0.6", planned())];
        let machines = [MachineReport {
            machine: "winworker-x7k2p".into(),
            machine_set: Some("winworker".into()),
            address: Some("10.0.0.5".into()),
            step: MachineStep::Configuring { reason: "upgrade v1 -> v2".into() },
            failed_rounds: 0,
        }];
        // A Machine a key rotation replaces goes the other way.
        let keys = [KeyReport {
            node: "win-c".into(),
            address: "winworker-q9r4s".into(),
            result: KeyResult::MachineReplaced { machine: "winworker-q9r4s".into(), done: false },
        }];
        let mut out = String::new();
        render_upgrades(&mut out, &upgrades, Some(1), &machines);
        assert_eq!(
            out,
            "  Upgrades: 2 node(s), 1 at a time (rollout.maxUnavailable), in this order:\n  \
             Upgrade win-a (10.0.0.5) v1 -> v2: upgrade in place (Machine-backed: winworker-x7k2p; not replaced): \
             to do: cordon, drain; kubelet (upload kubelet); Ready; uncordon\n  \
             Upgrade win-b (10.0.0.6) v1 -> v2: to do: cordon, drain; kubelet (upload kubelet); Ready; uncordon\n"
        );
        let mut text = String::new();
        super::super::machines_text::render_keys(&mut text, &keys, true);
        assert!(text.contains("replace Machine winworker-q9r4s"), "{text}");
    }
}
