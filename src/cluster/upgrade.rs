//! The upgrade rollout: nodes whose version annotation is an older
//! winfleet version (the repository changed the payload pin or the services
//! manifest) are brought to the desired version one disruption slot at a
//! time (`rollout.maxUnavailable`, shared with safe reboots, BYOH and
//! Machine nodes together).
//!
//! Per node: cordon (recorded as winfleet's) with the disruption marker
//! [`UPGRADING_ANNOTATION`]; drain through the Eviction API; the node step
//! in [`Mode::Upgrade`] (the services whose files or definition change are
//! stopped, dependents first; only files whose SHA-256 differs are
//! uploaded; changed definitions updated; what the older version installed
//! and this one does not removed, by the install record; started again);
//! Ready with a heartbeat newer than the restart; the version annotation,
//! the marker removed and the uncordon in one write. A node that does not
//! come back stops the rollout and stays cordoned. A node left marked by a
//! crash is finished first (each step is observed, so nothing is done twice).

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::Api;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::apply::api_error;
use super::cordon::{cordon, uncordon};
use super::drain::{DrainOptions, drain};
use super::events::{Events, Reason, Regarding};
use super::join::JoinOptions;
use super::observe::node_obs;
use super::ready::ready;
use super::slots;
use super::{NodeObs, UPGRADING_ANNOTATION};
use crate::desired::model::Instance;
use crate::engine::{self, NodeContext};
use crate::lifecycle::{Mode, VERSION_ANNOTATION};
use crate::progress::{self, Phase};
use crate::ssh::Pool;

/// Where an upgrade stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum UpgradeStage {
    /// Cordoning and marking.
    Cordon,
    /// Evicting pods.
    Drain,
    /// Stopping, replacing, updating and starting on the node.
    Node,
    /// Waiting for Ready.
    Ready,
    /// The version annotation and the uncordon.
    Finish,
}

impl UpgradeStage {
    /// Whether a failure here leaves the node cordoned (holding its slot):
    /// a failed cordon changed nothing, a failed drain is undone.
    pub fn leaves_node_out(self) -> bool {
        !matches!(self, UpgradeStage::Cordon | UpgradeStage::Drain)
    }

    /// The stage in words.
    pub fn name(self) -> &'static str {
        match self {
            UpgradeStage::Cordon => "cordon",
            UpgradeStage::Drain => "drain",
            UpgradeStage::Node => "the node's files and services",
            UpgradeStage::Ready => "wait for Ready",
            UpgradeStage::Finish => "version annotation and uncordon",
        }
    }
}

/// How one node's upgrade ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum UpgradeResult {
    /// At the desired version, Ready and uncordoned.
    Upgraded {
        /// Pods evicted.
        evicted: usize,
        /// Operations applied on the node.
        operations: usize,
    },
    /// Stopped; a drain that could not finish is undone (uncordoned), a
    /// node that failed later stays cordoned and stops the rollout.
    Failed {
        /// Where.
        stage: UpgradeStage,
        /// Why.
        reason: String,
    },
    /// Waiting for a slot, or the rollout stopped.
    NotStarted {
        /// Why.
        reason: String,
    },
    /// A dry run: what the upgrade would change.
    Planned {
        /// The node's operations (display form).
        operations: Vec<String>,
    },
}

/// One node's upgrade.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeReport {
    /// Node name.
    pub node: String,
    /// Instance address.
    pub address: String,
    /// From and to.
    pub from: String,
    /// The desired version.
    pub to: String,
    /// How it ended.
    #[serde(flatten)]
    pub result: UpgradeResult,
}

/// A node to upgrade.
#[derive(Clone, Debug)]
pub struct Candidate<'a> {
    /// Its instance (the runtime spec).
    pub instance: &'a Instance,
    /// Its Node as observed.
    pub node: NodeObs,
}

/// What the rollout needs.
pub struct Rollout<'a> {
    /// The cluster.
    pub client: &'a Client,
    /// Events.
    pub events: &'a Events,
    /// SSH.
    pub pool: &'a Pool,
    /// Nodes disrupted at once (with `held` counted).
    pub max_unavailable: usize,
    /// Nodes outside this rollout that hold a slot.
    pub held: usize,
    /// Drain settings.
    pub drain: DrainOptions,
    /// The Ready wait.
    pub join: JoinOptions,
    /// Stop starting new upgrades.
    pub stop: &'a CancellationToken,
}

/// Upgrades `candidates`, nodes left marked first, one slot each.
pub async fn rollout(r: &Rollout<'_>, mut candidates: Vec<Candidate<'_>>) -> Vec<UpgradeReport> {
    order(&mut candidates);
    let slots = r.max_unavailable.max(1).saturating_sub(r.held);
    let held = (slots == 0).then(|| "other nodes winfleet disrupted are not back yet".to_owned());
    let stopping = "winfleet is stopping; the next round continues the upgrade";
    let halts = |report: &UpgradeReport| match &report.result {
        UpgradeResult::Failed { stage, .. } if stage.leaves_node_out() => {
            Some(format!("the upgrade rollout stopped: node {} is not back", report.node))
        }
        _ => None,
    };
    let run = slots::run(slots, candidates, held, (r.stop, stopping), |c| upgrade_one(r, c), halts).await;
    let mut reports = run.done;
    let reason = run.reason;
    reports.extend(run.waiting.iter().map(|c| report(c, UpgradeResult::NotStarted { reason: reason.clone() })));
    reports
}

/// The rollout's order: nodes a crash left marked, then by name.
fn order(candidates: &mut [Candidate<'_>]) {
    candidates.sort_by(|a, b| (!marked(&a.node), &a.node.name).cmp(&(!marked(&b.node), &b.node.name)));
}

fn marked(node: &NodeObs) -> bool {
    node.annotations.contains_key(UPGRADING_ANNOTATION)
}

fn version(candidate: &Candidate<'_>) -> String {
    candidate.instance.spec.lifecycle.as_ref().map(|l| l.version.clone()).unwrap_or_default()
}

/// The report of `c`'s upgrade: its Node's version to the desired one.
pub fn report(c: &Candidate<'_>, result: UpgradeResult) -> UpgradeReport {
    UpgradeReport {
        node: c.node.name.clone(),
        address: c.instance.address.clone(),
        from: c.node.annotations.get(VERSION_ANNOTATION).cloned().unwrap_or_default(),
        to: version(c),
        result,
    }
}

/// What an upgrade would change on each node, in the rollout's order (a
/// dry run, nothing written).
pub async fn preview(pool: &Pool, mut candidates: Vec<Candidate<'_>>) -> Vec<UpgradeReport> {
    order(&mut candidates);
    let mut out = Vec::new();
    for c in &candidates {
        let context = NodeContext { mode: Some(Mode::Upgrade), node: Some(c.node.object.clone()), disrupt: true };
        let node = engine::node(pool, c.instance, true, &context).await;
        let result = match &node.result {
            engine::report::NodeResult::Done { operations, .. } => {
                UpgradeResult::Planned { operations: operations.iter().map(|o| o.operation.headline()).collect() }
            }
            _ => UpgradeResult::Failed { stage: UpgradeStage::Node, reason: engine::report::node_line(&node) },
        };
        out.push(report(c, result));
    }
    out
}

async fn upgrade_one(r: &Rollout<'_>, c: Candidate<'_>) -> UpgradeReport {
    let result = run(r, &c).await;
    let regarding = Regarding::Node(&c.node.name, &c.node.uid);
    match &result {
        UpgradeResult::Upgraded { .. } => {
            progress::step(&c.node.name, Phase::Done, &format!("upgraded to {}; uncordoned", version(&c)));
            r.events.publish(regarding, Reason::Upgraded, format!("upgraded to {}; uncordoned", version(&c))).await;
        }
        UpgradeResult::Failed { stage, reason } => {
            let note = format!("upgrade to {} stopped at {}: {reason}", version(&c), stage.name());
            progress::step(&c.node.name, Phase::Failed, &note);
            r.events.publish(regarding, Reason::UpgradeFailed, note).await;
        }
        _ => {}
    }
    report(&c, result)
}

async fn run(r: &Rollout<'_>, c: &Candidate<'_>) -> UpgradeResult {
    let nodes: Api<Node> = Api::all(r.client.clone());
    let fail = |stage, reason: String| UpgradeResult::Failed { stage, reason };
    let name = &c.node.name;
    let fresh = match nodes.get(name).await {
        Ok(n) => node_obs(&n),
        Err(e) => return fail(UpgradeStage::Cordon, format!("cannot read the Node: {}", api_error(&e))),
    };
    match cordon(&nodes, name, Some((UPGRADING_ANNOTATION, &version(c)))).await {
        Ok(true) => {
            let note = format!("cordoned to upgrade to {}", version(c));
            r.events.publish(Regarding::Node(name, &c.node.uid), Reason::Upgrading, note).await;
        }
        Ok(false) => {}
        Err(e) => return fail(UpgradeStage::Cordon, format!("cannot cordon: {e}")),
    }
    let evicted = match drain(r.client, r.events, (name, &c.node.uid), r.drain).await {
        Ok(n) => n,
        Err(reason) => {
            // Nothing was changed on the node: undo the cordon, keep the
            // version; the next round tries again.
            let note = match uncordon(&nodes, name, None).await {
                Ok(()) => format!("{reason}; uncordoned, the upgrade is still to come"),
                Err(e) => format!("{reason}; uncordoning failed too ({e})"),
            };
            return fail(UpgradeStage::Drain, note);
        }
    };
    progress::step(name, Phase::Node, &format!("upgrading to {}", version(c)));
    let context = NodeContext { mode: Some(Mode::Upgrade), node: Some(fresh.object.clone()), disrupt: true };
    let step = engine::node(r.pool, c.instance, false, &context).await;
    if step.failed() {
        return fail(UpgradeStage::Node, format!("{}; the node stays cordoned", engine::report::node_line(&step)));
    }
    let operations = step.counts().applied;
    // A heartbeat from after the step: a kubelet the step stopped and
    // could not start again cannot pass for one that came back.
    let started = jiff::Timestamp::now();
    if let Err(e) = ready(&nodes, name, started, (r.join.ready_timeout, r.join.poll)).await {
        return fail(UpgradeStage::Ready, format!("{e}; the node stays cordoned"));
    }
    if let Err(e) = uncordon(&nodes, name, Some(&version(c))).await {
        return fail(UpgradeStage::Finish, e);
    }
    UpgradeResult::Upgraded { evicted, operations }
}
