//! The plan's counts, computed once and rendered by every format: the text
//! plan's and the comment's summary line, the JSON's `summary`, and whether
//! a group of nodes says "safe reboot required" (issue 39: the formats
//! disagreed). Pure.

use serde::Serialize;

use super::{MachineSetAction, Plan};

/// What a plan changes, counted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Instances that join ([`super::InstanceChanges::configure`]).
    pub configure: usize,
    /// Instances that stay and change: their settings, or the files and
    /// services on their nodes ([`Plan::updated`]).
    pub update: usize,
    /// Instances that leave ([`super::InstanceChanges::deconfigure`]).
    pub deconfigure: usize,
    /// The mass-removal guard will refuse every deconfigure: none of the
    /// leaving instances is deconfigured.
    pub deconfigure_refused: bool,
    /// Nodes with at least one operation that runs ([`Plan::changed_nodes`]).
    pub nodes_changed: usize,
    /// Safe reboots on nodes that stay ([`Plan::reboots`]).
    pub safe_reboots: usize,
    /// MachineSets by action.
    pub machine_sets: MachineSetCounts,
    /// The safe reboots of each group of [`Plan::nodes`], in order.
    #[serde(skip)]
    pub group_reboots: Vec<usize>,
}

/// MachineSets to create, update and delete.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MachineSetCounts {
    /// Created.
    pub create: usize,
    /// Updated.
    pub update: usize,
    /// Deleted.
    pub delete: usize,
}

impl Summary {
    /// Counts `plan`.
    pub fn of(plan: &Plan) -> Self {
        let count = |a: MachineSetAction| plan.machine_sets.iter().filter(|m| m.action == a).count();
        Self {
            configure: plan.instances.configure.len(),
            update: plan.updated(),
            deconfigure: plan.instances.deconfigure.len(),
            deconfigure_refused: plan.deconfigure_refused.is_some(),
            nodes_changed: plan.changed_nodes(),
            safe_reboots: plan.reboots(),
            machine_sets: MachineSetCounts {
                create: count(MachineSetAction::Create),
                update: count(MachineSetAction::Update),
                delete: count(MachineSetAction::Delete),
            },
            group_reboots: plan.nodes.iter().map(|g| plan.group_reboots(g)).collect(),
        }
    }

    /// `Plan: 2 to configure, …`: the line every format shows.
    pub fn line(&self) -> String {
        let leaving = match self.deconfigure_refused {
            true => format!("0 of {} deconfigured: refused by prune.maxRemovalPercent", self.deconfigure),
            false => format!("{} to deconfigure", self.deconfigure),
        };
        let m = &self.machine_sets;
        format!(
            "Plan: {} to configure, {} to update, {leaving}; {} node(s) changed, {} safe reboot(s); MachineSets: {} to create, {} to update, {} to delete.",
            self.configure, self.update, self.nodes_changed, self.safe_reboots, m.create, m.update, m.delete,
        )
    }

    /// Whether the `index`th group of nodes takes a safe reboot.
    pub fn group_reboots(&self, index: usize) -> bool {
        self.group_reboots.get(index).is_some_and(|r| *r > 0)
    }
}
