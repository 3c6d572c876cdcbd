//! Machine-backed nodes (issue 26): which Windows Machines the round
//! configures, which wait for their VM to answer, and where each Machine
//! and each MachineSet stands after the round. Pure; the
//! report's text is in [`super::machines_text`].
//!
//! A Windows Machine (`machine.openshift.io/os-id=Windows`) is configured
//! like a BYOH instance once it is `Provisioned` (or `Running`) with an
//! InternalIP, of any MachineSet, unless labelled
//! `windowsmachineconfig.openshift.io/ignore=true` or being deleted (the VM
//! is going away: nothing is done over SSH, its Node's removal is the
//! Machine API's, and the report stops tracking it).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;

use crate::cluster::health_checks::{HealthCheckFinding, JoinBudget};
use crate::cluster::join::{JoinReport, JoinResult};
use crate::cluster::keys::trusts_older_key;
use crate::cluster::upgrade::{UpgradeReport, UpgradeResult};
use crate::cluster::user_data::{UserDataAction, UserDataReport};
use crate::cluster::{ClusterFacts, MachineObs};
use crate::desired::model::{Desired, Instance};
use crate::engine::report::{NodeReport, NodeResult, Stage};
use crate::lifecycle::VERSION_ANNOTATION;
use crate::ssh::is_auth_refusal;

use super::Options;

/// The Machine side of a round.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MachinesReport {
    /// The `windows-user-data` Secret.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_data: Option<UserDataReport>,
    /// Each Windows Machine winfleet tracks (not ignored, not being deleted).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub machines: Vec<MachineReport>,
    /// Each MachineSet with Windows Machines or a desired replica count.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub machine_sets: Vec<MachineSetMachines>,
    /// MachineHealthChecks that can delete a Windows Machine winfleet is
    /// still configuring ([`crate::cluster::health_checks`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub health_checks: Vec<HealthCheckFinding>,
    /// The Machines that got their address while the round ran and were
    /// taken into it (`late_machines`), by name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub taken_late: Vec<String>,
}

/// Where one Machine stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineReport {
    /// The Machine.
    pub machine: String,
    /// Its MachineSet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine_set: Option<String>,
    /// Its InternalIP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Its step.
    #[serde(flatten)]
    pub step: MachineStep,
    /// Rounds in a row its configure failed (this one included).
    #[serde(skip_serializing_if = "is_zero")]
    pub failed_rounds: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A Machine's step on its way to a Ready node.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(tag = "step", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum MachineStep {
    /// The cloud has not given it an InternalIP yet.
    Provisioning {
        /// Its `status.phase`.
        phase: String,
    },
    /// Its VM does not answer SSH yet (it may still be booting).
    Waiting {
        /// Why.
        reason: String,
    },
    /// Being configured or joined (not Ready at the desired version yet).
    Configuring {
        /// What is left.
        reason: String,
    },
    /// Configuring it failed this round.
    Failed {
        /// Why.
        reason: String,
    },
    /// A Ready Node at the desired version.
    Ready,
}

impl MachineStep {
    /// The step's name (for counts).
    pub fn name(&self) -> &'static str {
        match self {
            MachineStep::Provisioning { .. } => "provisioning",
            MachineStep::Waiting { .. } => "waiting",
            MachineStep::Configuring { .. } => "configuring",
            MachineStep::Failed { .. } => "failed",
            MachineStep::Ready => "ready",
        }
    }
}

/// One MachineSet's Machines, counted per step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineSetMachines {
    /// The MachineSet.
    pub name: String,
    /// Its desired replicas (the cluster's `spec.replicas`).
    pub desired: u64,
    /// Its `status.readyReplicas` as observed.
    pub ready_replicas: u64,
    /// Machines per step (`ready`, `configuring`, …).
    pub steps: BTreeMap<String, usize>,
}

impl MachineSetMachines {
    /// Ready: `readyReplicas` is the desired count and so many Machines
    /// have a Ready Node at the desired version.
    pub fn ready(&self) -> bool {
        let ready = self.steps.get("ready").copied().unwrap_or(0) as u64;
        let tracked: usize = self.steps.values().sum();
        self.ready_replicas == self.desired && ready == self.desired && tracked as u64 == self.desired
    }

    /// The counts in words: `3 desired, 1 ready, 2 waiting (readyReplicas 1)`.
    pub fn counts(&self) -> String {
        let mut parts = vec![format!("{} desired", self.desired)];
        parts.extend(self.steps.iter().map(|(step, n)| format!("{n} {step}")));
        format!("{} (readyReplicas {})", parts.join(", "), self.ready_replicas)
    }
}

impl MachinesReport {
    /// Nothing to say (no Secret kept, no Machine, no Windows MachineSet,
    /// no MachineHealthCheck finding).
    pub fn is_empty(&self) -> bool {
        self.user_data.is_none()
            && self.machines.is_empty()
            && self.machine_sets.is_empty()
            && self.health_checks.is_empty()
    }

    /// Whether anything failed (a Machine's configure, the Secret).
    pub fn failed(&self) -> bool {
        !self.failures().is_empty()
    }

    /// Each failure, one sentence each.
    pub fn failures(&self) -> Vec<String> {
        let secret = self.user_data.iter().filter_map(|u| Some(format!("user-data Secret: {}", u.error.as_ref()?)));
        let machines = self.machines.iter().filter_map(|m| match &m.step {
            MachineStep::Failed { reason } => Some(format!("Machine {}: {reason}", m.machine)),
            _ => None,
        });
        secret.chain(machines).collect()
    }

    /// Whether the Secret changes.
    pub fn has_changes(&self) -> bool {
        self.user_data.as_ref().is_some_and(|u| u.action != UserDataAction::InSync)
    }

    /// The MachineSet `name`'s counts.
    pub fn machine_set(&self, name: &str) -> Option<&MachineSetMachines> {
        self.machine_sets.iter().find(|m| m.name == name)
    }
}

/// The Machines winfleet tracks: Windows, not ignored, not being deleted.
pub fn tracked(facts: &ClusterFacts) -> impl Iterator<Item = &MachineObs> {
    facts.machines.values().filter(|m| !m.ignored && !m.deleting)
}

/// Windows Machines `Provisioned` or `Running` with an InternalIP, as
/// instances (WMCO-SPEC 6: user `Administrator`, `capi` on Azure; the
/// Fleet's default port and shell), unless already listed as a BYOH instance.
pub fn machine_instances(desired: &Desired, facts: &ClusterFacts, listed: &[&Instance]) -> Vec<Instance> {
    let listed: BTreeSet<&str> = listed.iter().map(|i| i.address.as_str()).collect();
    let shell = desired.fleet.default_shell;
    let Some(spec) = desired.specs.get(&shell) else { return Vec::new() };
    tracked(facts)
        .filter(|m| matches!(m.phase.as_deref(), Some("Provisioned" | "Running")))
        .filter_map(|m| {
            let ip = m.internal_ip.clone()?;
            (!listed.contains(ip.as_str()) && !desired.instances.contains_key(&ip)).then(|| Instance {
                address: ip,
                username: if m.azure { "capi" } else { "Administrator" }.to_owned(),
                port: desired.fleet.default_port,
                shell,
                labels: Default::default(),
                annotations: Default::default(),
                taints: Vec::new(),
                origin: format!("Machine {}", m.name),
                spec: Arc::clone(spec),
            })
        })
        .collect()
}

/// Takes out of the node reports the Machines that wait rather than fail:
/// a VM that does not answer SSH yet (connecting failed after the pool's
/// bounded retries with backoff, and it has no Node), and a VM that
/// refuses the fleet's key while its Node trusts an older one (`key_hash`
/// is the fleet's: key rotation replaces the Machine, its configure has not
/// failed). Any other VM that refuses the fleet's key did answer: it stays
/// a failure.
pub fn split_waiting(
    nodes: Vec<NodeReport>,
    machine_addresses: &BTreeSet<String>,
    facts: &ClusterFacts,
    key_hash: &str,
) -> (Vec<NodeReport>, BTreeMap<String, String>) {
    let without_node: BTreeSet<&str> =
        tracked(facts).filter(|m| m.node.is_none()).filter_map(|m| m.internal_ip.as_deref()).collect();
    let old_key: BTreeSet<&str> = tracked(facts)
        .filter(|m| {
            let node = m.node.as_deref().and_then(|n| facts.nodes.get(n));
            node.is_some_and(|n| trusts_older_key(n, key_hash))
        })
        .filter_map(|m| m.internal_ip.as_deref())
        .collect();
    let mut waiting = BTreeMap::new();
    let kept = nodes
        .into_iter()
        .filter(|r| {
            let NodeResult::Failed { stage: Stage::Observe, reason } = &r.result else { return true };
            if !machine_addresses.contains(&r.address) {
                return true;
            }
            let why = if is_auth_refusal(reason) {
                old_key.contains(r.address.as_str()).then(|| {
                    "its VM trusts an older fleet SSH key (its Node's pub-key-hash): key rotation replaces the \
                     Machine"
                        .to_owned()
                })
            } else {
                without_node.contains(r.address.as_str()).then(|| format!("its VM does not answer SSH yet: {reason}"))
            };
            let Some(why) = why else { return true };
            waiting.insert(r.address.clone(), why);
            false
        })
        .collect();
    (kept, waiting)
}

/// What the round did, per Machine.
pub struct Outcomes<'a> {
    /// The node round's reports (waiting Machines taken out).
    pub nodes: &'a [NodeReport],
    /// Machines whose VM does not answer yet, by address.
    pub waiting: &'a BTreeMap<String, String>,
    /// The joins.
    pub joins: &'a [JoinReport],
    /// The upgrades.
    pub upgrades: &'a [UpgradeReport],
    /// The desired version (`None`: no lifecycle).
    pub version: Option<&'a str>,
    /// The replicas the repository sets, per MachineSet (a MachineSet
    /// without `replicas` in Git follows the cluster's: an autoscaler's).
    pub replicas: BTreeMap<String, Option<u64>>,
}

/// Each tracked Machine's step, and each MachineSet's counts.
pub fn report(facts: &ClusterFacts, outcomes: &Outcomes<'_>) -> (Vec<MachineReport>, Vec<MachineSetMachines>) {
    let machines: Vec<MachineReport> = tracked(facts)
        .map(|m| MachineReport {
            machine: m.name.clone(),
            machine_set: m.machine_set.clone(),
            address: m.internal_ip.clone(),
            step: step(m, facts, outcomes),
            failed_rounds: 0,
        })
        .collect();
    let mut sets: BTreeMap<String, MachineSetMachines> = BTreeMap::new();
    let names: BTreeSet<&String> = facts.machine_sets.keys().chain(outcomes.replicas.keys()).collect();
    for name in names {
        let object = facts.machine_sets.get(name);
        let at = |p: &str| object.and_then(|o| o.pointer(p));
        let windows = outcomes.replicas.contains_key(name)
            || machines.iter().any(|m| m.machine_set.as_deref() == Some(name.as_str()))
            || at("/spec/template/metadata/labels/machine.openshift.io~1os-id").and_then(|v| v.as_str())
                == Some("Windows");
        if windows {
            let cluster = at("/spec/replicas").and_then(serde_json::Value::as_u64);
            let desired = outcomes.replicas.get(name).copied().flatten().or(cluster).unwrap_or(1);
            sets.insert(
                name.clone(),
                MachineSetMachines {
                    name: name.clone(),
                    desired,
                    ready_replicas: at("/status/readyReplicas").and_then(serde_json::Value::as_u64).unwrap_or(0),
                    steps: BTreeMap::new(),
                },
            );
        }
    }
    for m in &machines {
        if let Some(set) = m.machine_set.as_ref().and_then(|s| sets.get_mut(s)) {
            *set.steps.entry(m.step.name().to_owned()).or_default() += 1;
        }
    }
    (machines, sets.into_values().collect())
}

fn step(m: &MachineObs, facts: &ClusterFacts, outcomes: &Outcomes<'_>) -> MachineStep {
    let Some(ip) = &m.internal_ip else {
        return MachineStep::Provisioning { phase: m.phase.clone().unwrap_or_else(|| "Provisioning".into()) };
    };
    if let Some(reason) = outcomes.waiting.get(ip) {
        return MachineStep::Waiting { reason: reason.clone() };
    }
    if !matches!(m.phase.as_deref(), Some("Provisioned" | "Running")) {
        let phase = m.phase.clone().unwrap_or_default();
        return MachineStep::Provisioning { phase };
    }
    if let Some(NodeResult::Failed { reason, .. }) = outcomes.nodes.iter().find(|r| &r.address == ip).map(|r| &r.result)
    {
        return MachineStep::Failed { reason: reason.clone() };
    }
    if let Some(join) = outcomes.joins.iter().find(|j| &j.address == ip) {
        return match &join.result {
            JoinResult::Joined => MachineStep::Ready,
            JoinResult::Failed { step, reason } => MachineStep::Failed { reason: format!("{}: {reason}", step.name()) },
            JoinResult::NotStarted { reason } => MachineStep::Configuring { reason: reason.clone() },
            JoinResult::Planned { steps } => {
                MachineStep::Configuring { reason: format!("to do: {}", steps.join("; ")) }
            }
        };
    }
    let node = m.node.as_ref().and_then(|n| facts.nodes.get(n));
    if let Some(upgrade) = node.and_then(|n| outcomes.upgrades.iter().find(|u| u.node == n.name)) {
        return match &upgrade.result {
            UpgradeResult::Upgraded { .. } => MachineStep::Ready,
            UpgradeResult::Failed { reason, .. } => MachineStep::Failed { reason: reason.clone() },
            _ => MachineStep::Configuring { reason: format!("upgrade {} -> {}", upgrade.from, upgrade.to) },
        };
    }
    match node {
        None => MachineStep::Configuring { reason: "no Node yet".into() },
        Some(n) if !n.ready => MachineStep::Configuring { reason: format!("Node {} is not Ready", n.name) },
        Some(n) => match (outcomes.version, n.annotations.get(VERSION_ANNOTATION)) {
            (Some(want), Some(has)) if want == has => MachineStep::Ready,
            (None, _) => MachineStep::Ready,
            (Some(want), has) => MachineStep::Configuring {
                reason: format!("Node {} is at version {}, not {want}", n.name, has.map_or("(none)", |h| h.as_str())),
            },
        },
    }
}

/// The MachineHealthChecks that can delete a Windows Machine while this
/// round's waits still allow it to join: the cluster's Windows MachineSets
/// and the repository's (one this round creates is judged before its first
/// Machine), against the round's reboot and registration waits.
pub fn health_checks(desired: &Desired, facts: &ClusterFacts, options: &Options) -> Vec<HealthCheckFinding> {
    let mut sets: BTreeMap<&str, &serde_json::Value> =
        facts.machine_sets.iter().map(|(name, object)| (name.as_str(), object)).collect();
    sets.extend(desired.machine_sets.iter().map(|(name, set)| (name.as_str(), &set.object)));
    let budget = JoinBudget { reboot: options.rollout.reboot_timeout, register: options.join.register_timeout };
    crate::cluster::health_checks::findings(&facts.health_checks, sets, budget)
}
