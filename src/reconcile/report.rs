//! What a whole round found and did: the node reports (engine) and the
//! cluster report, as data, text and versioned JSON (docs/apply-format.md).

use std::collections::BTreeMap;

use serde::Serialize;

use super::machines::MachinesReport;
use crate::cluster::apply::{ClusterPlan, WriteReport};
use crate::cluster::approve::CsrReport;
use crate::cluster::deconfigure::DeconfigureReport;
use crate::cluster::join::{JoinReport, JoinResult};
use crate::cluster::keys::KeyReport;
pub use crate::cluster::machinesets::Conflict;
use crate::cluster::machinesets::{MachineSetStep, ownership::FieldConflict};
use crate::cluster::metadata::NodeMetadataPlan;
use crate::cluster::prerequisites::Prerequisites;
use crate::cluster::rollout::{RebootReport, RebootResult};
use crate::cluster::upgrade::{UpgradeReport, UpgradeResult};
use crate::engine::report::FORMAT_VERSION;
use crate::engine::report::{self as node_report, NodeReport};
use crate::node::outcome::Outcome;
use crate::plan::fields::FieldChange;
use crate::plan::{MachineSetChange, SettingChange};
use crate::vocab::platform::Platform;

/// One round.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RoundReport {
    /// Observe and plan only.
    pub dry_run: bool,
    /// Per node, sorted by address.
    pub nodes: Vec<NodeReport>,
    /// The cluster part; `None` in SSH-only mode.
    pub cluster: Option<ClusterReport>,
}

/// The cluster part of a round.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterReport {
    /// The API server.
    pub api: String,
    /// The platform its Infrastructure names, once the cluster was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
    /// Why the cluster could not be read (the cluster part was skipped).
    pub error: Option<String>,
    /// The Node of each associated instance (address → Node name).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub associated: BTreeMap<String, String>,
    /// Instances no Node could be associated with.
    pub unassociated: Vec<Unassociated>,
    /// MachineSet changes and their outcomes.
    pub machine_sets: Vec<MachineSetReport>,
    /// MachineSets of the repository's names that winfleet does not manage.
    pub conflicts: Vec<Conflict>,
    /// Node metadata changes and their outcomes.
    pub nodes: Vec<NodeMetadataReport>,
    /// Writes the API rejected in the dry run (then none of the plan's
    /// MachineSet and Node metadata writes is made).
    pub rejected: Vec<WriteReport>,
    /// Safe reboots.
    pub reboots: Vec<RebootReport>,
    /// Why the cluster material for joining nodes could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub material_error: Option<String>,
    /// Where the repository's Proxy and mirror sets differ from the
    /// cluster's own objects (`spec.sources` `repository`; never blocking).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub disagreements: Vec<crate::cluster::disagree::Disagreement>,
    /// Why the cluster's Proxy and mirror sets could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sources_error: Option<String>,
    /// Why no network configuration is generated (no operator Network).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_note: Option<String>,
    /// Why windows_exporter's certificate is not written (its Secret is
    /// missing or unreadable; never blocking).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exporter_tls_note: Option<String>,
    /// The rendered worker MachineConfig the nodes' ignition files come
    /// from, and why that one (issue 36).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_ignition: Option<String>,
    /// The cluster's prerequisites: why no node joins or upgrades this
    /// round, and what was not checked.
    #[serde(skip_serializing_if = "Prerequisites::is_empty")]
    pub prerequisites: Prerequisites,
    /// Joins of instances being configured (in a dry run, their steps).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub joins: Vec<JoinReport>,
    /// CSRs of listed hosts: approved, refused, or near matches.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub csrs: Vec<CsrReport>,
    /// Upgrades to the desired version (in a dry run, what they would change).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub upgrades: Vec<UpgradeReport>,
    /// Nodes upgraded at once (rollout.maxUnavailable less the nodes other
    /// disruptions hold).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upgrade_slots: Option<usize>,
    /// Nodes whose instance left the repository (in a dry run, what their
    /// deconfigure would do).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deconfigures: Vec<DeconfigureReport>,
    /// Why no node is deconfigured this round (the mass-removal guard, an
    /// address that did not resolve).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deconfigure_refused: Option<String>,
    /// Key rotation: annotations updated, hosts that refuse the new key,
    /// Machines replaced (listed first).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<KeyReport>,
    /// The Machine side: the user-data Secret, each Machine, each MachineSet's counts.
    #[serde(skip_serializing_if = "MachinesReport::is_empty")]
    pub machines: MachinesReport,
}

/// An instance without a Node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Unassociated {
    /// Instance address.
    pub address: String,
    /// Why.
    pub reason: String,
}

/// A MachineSet change.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineSetReport {
    /// What changes.
    #[serde(flatten)]
    pub change: MachineSetChange,
    /// `None` in a dry run or when nothing was written.
    #[serde(flatten)]
    pub outcome: Option<Outcome>,
    /// Fields of another manager a forced apply takes over (adoption, `winfleet.io/force-fields`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub taken_over: Vec<FieldConflict>,
    /// Fields the API server sets differently from what winfleet applies
    /// (its admission webhooks, the CRD's defaults), as the apply's dry
    /// run answered: `from` the repository's value, `to` the server's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub defaulted: Vec<FieldChange>,
}

/// A Node metadata change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeMetadataReport {
    /// Node name.
    pub node: String,
    /// Instance address.
    pub instance: String,
    /// Keys before and after.
    pub changes: Vec<SettingChange>,
    /// `None` in a dry run or when nothing was written.
    #[serde(flatten)]
    pub outcome: Option<Outcome>,
}

impl ClusterReport {
    /// Records the plan (outcomes come later).
    pub fn set_plan(&mut self, plan: &ClusterPlan) {
        for step in &plan.machine_sets {
            match step {
                MachineSetStep::Apply { change, .. } | MachineSetStep::Delete { change, .. } => {
                    let (change, taken_over) = (change.clone(), step.taken_over().to_vec());
                    let defaulted = plan.defaulted.get(&change.name).cloned().unwrap_or_default();
                    self.machine_sets.push(MachineSetReport { change, outcome: None, taken_over, defaulted });
                }
                MachineSetStep::Conflict(conflict) => self.conflicts.push(conflict.clone()),
            }
        }
        let report = |n: &NodeMetadataPlan, outcome: Option<Outcome>| NodeMetadataReport {
            node: n.node.clone(),
            instance: n.instance.clone(),
            changes: n.changes.clone(),
            outcome,
        };
        self.nodes = plan.nodes.iter().map(|n| report(n, None)).collect();
        // A Node that kept changing while it was planned again: not written.
        self.nodes.extend(plan.left.iter().map(|(n, why)| report(n, Some(Outcome::Failed(why.clone())))));
        self.nodes.sort_by(|a, b| a.node.cmp(&b.node));
    }

    /// Records the outcome of each write.
    pub fn set_outcomes(&mut self, outcomes: Vec<WriteReport>) {
        let mut by_target: BTreeMap<String, Outcome> = outcomes.into_iter().map(|w| (w.target, w.outcome)).collect();
        for ms in &mut self.machine_sets {
            ms.outcome = by_target.remove(&format!("MachineSet/{}", ms.change.name));
        }
        for node in &mut self.nodes {
            // A Node left for the next round keeps why.
            if let Some(outcome) = by_target.remove(&format!("Node/{}", node.node)) {
                node.outcome = Some(outcome);
            }
        }
    }

    /// Whether anything failed or was refused.
    pub fn failed(&self) -> bool {
        !self.failures().is_empty()
    }

    /// Each failure or refusal of the cluster part, one sentence each (what
    /// [`Self::failed`] counts; the daemon logs and counts them).
    pub fn failures(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(error) = &self.error {
            out.push(error.clone());
        }
        out.extend(self.rejected.iter().map(|r| format!("dry run rejected {}: {}", r.target, r.outcome)));
        for ms in &self.machine_sets {
            if let Some(Outcome::Failed(reason)) = &ms.outcome {
                out.push(format!("MachineSet {}: {reason}", ms.change.name));
            }
        }
        for node in &self.nodes {
            if let Some(Outcome::Failed(reason)) = &node.outcome {
                out.push(format!("Node {} metadata: {reason}", node.node));
            }
        }
        for r in &self.reboots {
            if let RebootResult::Failed { stage, reason } = &r.result {
                out.push(format!("reboot of {} failed at {}: {reason}", who(&r.node, &r.address), stage.name()));
            }
        }
        if let Some(e) = &self.material_error {
            out.push(format!("cluster material for joining nodes: {e}"));
        }
        for j in &self.joins {
            if let JoinResult::Failed { step, reason } = &j.result {
                out.push(format!("join of {} failed at {}: {reason}", j.address, step.name()));
            }
        }
        for u in &self.upgrades {
            if let UpgradeResult::Failed { stage, reason } = &u.result {
                out.push(format!("upgrade of {} failed at {}: {reason}", u.node, stage.name()));
            }
        }
        out.extend(self.machines.failures());
        out
    }

    /// Whether the plan changes anything.
    pub fn has_changes(&self) -> bool {
        !self.machine_sets.is_empty()
            || !self.nodes.is_empty()
            || !self.joins.is_empty()
            || !self.upgrades.is_empty()
            || self.machines.has_changes()
    }
}

impl RoundReport {
    /// Whether a node, a write or a reboot failed.
    pub fn failed(&self) -> bool {
        self.nodes.iter().any(NodeReport::failed) || self.cluster.as_ref().is_some_and(ClusterReport::failed)
    }

    /// Whether anything differs (for a dry run's exit code).
    pub fn has_changes(&self) -> bool {
        self.nodes.iter().any(NodeReport::has_changes) || self.cluster.as_ref().is_some_and(ClusterReport::has_changes)
    }

    /// The round as versioned JSON.
    pub fn render_json(&self) -> String {
        let value = serde_json::json!({
            "formatVersion": FORMAT_VERSION,
            "dryRun": self.dry_run,
            "nodes": self.nodes,
            "totals": node_report::totals(&self.nodes),
            "cluster": self.cluster,
        });
        let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
        text.push('\n');
        text
    }
}

/// A node by name, or by address when it has no Node.
pub(super) fn who<'a>(node: &'a str, address: &'a str) -> &'a str {
    if node.is_empty() { address } else { node }
}
