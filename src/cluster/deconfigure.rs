//! Deconfigure: a BYOH node whose instance left the repository is drained
//! and returned to how winfleet found it, then its Node object is deleted.
//!
//! Per node: marked ([`DECONFIGURING_ANNOTATION`]) and cordoned; drained
//! through the Eviction API; the node step in [`Mode::Deconfigure`] (its
//! services stopped and deleted, exactly the files, kubelet credentials
//! and empty directories the install record holds removed, registry
//! entries and proxy variables removed, the record last); a reboot when
//! proxy variables were removed (owed on the Node as WMCO's
//! `reboot-required` annotation before the step, so a crash does not lose
//! it); the Node deleted. Each step is observed first, so a crash at any
//! point is finished by the next round without repeating work. Several
//! nodes leave at once up to `rollout.maxUnavailable`; one that fails does
//! not stop the others and stays cordoned and marked, reported.

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, DeleteParams};
use serde::Serialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::apply::api_error;
use super::cordon::{cordon, patch};
use super::drain::{DrainOptions, drain};
use super::events::{Events, Reason, Regarding};
use super::observe::node_obs;
use super::slots;
use super::{DECONFIGURING_ANNOTATION, NodeObs, REBOOT_REQUIRED_ANNOTATION};
use crate::desired::model::Instance;
use crate::engine::host::Host;
use crate::engine::report::{NodeReport, NodeResult, node_line};
use crate::engine::{self, NodeContext};
use crate::lifecycle::Mode;
use crate::progress::{self, Phase};
use crate::ssh::Pool;

/// Where a deconfigure stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum DeconfigureStage {
    /// Marking and cordoning.
    Cordon,
    /// Evicting pods.
    Drain,
    /// Removing what winfleet installed on the node.
    Node,
    /// Rebooting after proxy variables were removed.
    Reboot,
    /// Deleting the Node object.
    Delete,
}

impl DeconfigureStage {
    /// The stage in words.
    pub fn name(self) -> &'static str {
        match self {
            DeconfigureStage::Cordon => "cordon",
            DeconfigureStage::Drain => "drain",
            DeconfigureStage::Node => "removing what winfleet installed",
            DeconfigureStage::Reboot => "reboot",
            DeconfigureStage::Delete => "deleting the Node",
        }
    }
}

/// How one node's deconfigure ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum DeconfigureResult {
    /// Deconfigured and its Node deleted.
    Deconfigured {
        /// Pods evicted.
        evicted: usize,
        /// Operations applied on the node.
        operations: usize,
        /// A reboot was sent (proxy variables were removed).
        rebooted: bool,
    },
    /// Stopped; the node stays cordoned and marked, the next round goes on.
    Failed {
        /// Where.
        stage: DeconfigureStage,
        /// Why.
        reason: String,
    },
    /// Not started (the mass-removal guard, no address, a stopping winfleet).
    NotStarted {
        /// Why.
        reason: String,
    },
    /// A dry run: what the deconfigure would do on the node.
    Planned {
        /// The node's operations (display form).
        operations: Vec<String>,
    },
}

/// One node's deconfigure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeconfigureReport {
    /// Node name.
    pub node: String,
    /// The address winfleet reaches it at (its InternalIP).
    pub address: String,
    /// How it ended.
    #[serde(flatten)]
    pub result: DeconfigureResult,
}

/// A node to deconfigure.
#[derive(Clone, Debug)]
pub struct Leaving {
    /// The instance winfleet reaches it as (the Fleet's defaults, its
    /// InternalIP, a spec with no registries, no proxy, the lifecycle in
    /// deconfigure form).
    pub instance: Instance,
    /// Its Node as observed.
    pub node: NodeObs,
}

/// What deconfigure needs.
pub struct Teardown<'a, H: Host> {
    /// The cluster.
    pub client: &'a Client,
    /// Events.
    pub events: &'a Events,
    /// SSH.
    pub pool: &'a Pool,
    /// The reboot.
    pub host: &'a H,
    /// Nodes deconfigured at once.
    pub parallel: usize,
    /// Drain settings.
    pub drain: DrainOptions,
    /// Stop starting new deconfigures.
    pub stop: &'a CancellationToken,
}

/// Deconfigures `leaving`, up to `parallel` at once.
pub async fn deconfigure_all<H: Host>(t: &Teardown<'_, H>, leaving: &[Leaving]) -> Vec<DeconfigureReport> {
    let stopping = "winfleet is stopping; the next round continues the deconfigure";
    let run = slots::run(
        t.parallel.max(1),
        leaving.iter().collect(),
        None,
        (t.stop, stopping),
        |l| deconfigure_one(t, l),
        |_| None,
    )
    .await;
    let mut reports = run.done;
    let reason = run.reason;
    reports
        .extend(run.waiting.into_iter().map(|l| report(l, DeconfigureResult::NotStarted { reason: reason.clone() })));
    reports.sort_by(|a, b| a.node.cmp(&b.node));
    reports
}

/// What a deconfigure would do on each node (a dry run, nothing written).
pub async fn preview(pool: &Pool, leaving: &[Leaving]) -> Vec<DeconfigureReport> {
    let mut out = Vec::new();
    for l in leaving {
        let step = engine::node(pool, &l.instance, true, &context(&l.node)).await;
        let result = match &step.result {
            NodeResult::Done { operations, .. } => {
                DeconfigureResult::Planned { operations: operations.iter().map(|o| o.operation.headline()).collect() }
            }
            _ => DeconfigureResult::Failed { stage: DeconfigureStage::Node, reason: node_line(&step) },
        };
        out.push(report(l, result));
    }
    out
}

fn context(node: &NodeObs) -> NodeContext {
    NodeContext { mode: Some(Mode::Deconfigure), node: Some(node.object.clone()), disrupt: true }
}

fn report(l: &Leaving, result: DeconfigureResult) -> DeconfigureReport {
    DeconfigureReport { node: l.node.name.clone(), address: l.instance.address.clone(), result }
}

async fn deconfigure_one<H: Host>(t: &Teardown<'_, H>, l: &Leaving) -> DeconfigureReport {
    let result = run(t, l).await;
    let regarding = Regarding::Node(&l.node.name, &l.node.uid);
    if let DeconfigureResult::Deconfigured { .. } = &result {
        progress::step(&l.node.name, Phase::Done, "deconfigured; its Node is deleted");
    }
    if let DeconfigureResult::Failed { stage, reason } = &result {
        let note = format!("deconfigure stopped at {}: {reason}; the next round goes on", stage.name());
        progress::step(&l.node.name, Phase::Failed, &note);
        t.events.publish(regarding, Reason::DeconfigureFailed, note).await;
    }
    report(l, result)
}

async fn run<H: Host>(t: &Teardown<'_, H>, l: &Leaving) -> DeconfigureResult {
    let nodes: Api<Node> = Api::all(t.client.clone());
    let fail = |stage, reason: String| DeconfigureResult::Failed { stage, reason };
    let name = &l.node.name;
    let regarding = || Regarding::Node(name, &l.node.uid);
    let fresh = match nodes.get_opt(name).await {
        Ok(Some(n)) => node_obs(&n),
        Ok(None) => return fail(DeconfigureStage::Cordon, format!("Node {name} is gone")),
        Err(e) => return fail(DeconfigureStage::Cordon, format!("cannot read the Node: {}", api_error(&e))),
    };
    match cordon(&nodes, name, Some((DECONFIGURING_ANNOTATION, "true"))).await {
        Ok(true) => {
            let note = format!("cordoned to deconfigure: {} left the repository", l.instance.address);
            t.events.publish(regarding(), Reason::Deconfiguring, note).await;
        }
        Ok(false) => {}
        Err(e) => return fail(DeconfigureStage::Cordon, format!("cannot cordon: {e}")),
    }
    let evicted = match drain(t.client, t.events, (name, &l.node.uid), t.drain).await {
        Ok(n) => n,
        Err(reason) => return fail(DeconfigureStage::Drain, format!("{reason}; the node stays cordoned")),
    };
    // A reboot is owed as soon as proxy variables are to be removed: the
    // annotation is written before the step, so a crash cannot lose it.
    progress::step(name, Phase::Node, "removing winfleet's services and files");
    let planned = engine::node(t.pool, &l.instance, true, &context(&fresh)).await;
    let mut reboot_owed = fresh.annotations.contains_key(REBOOT_REQUIRED_ANNOTATION);
    if !reboot_owed && removes_environment(&planned) {
        let body = json!({ "metadata": { "annotations": { REBOOT_REQUIRED_ANNOTATION: "" } } });
        if let Err(e) = patch(&nodes, name, &body).await {
            return fail(DeconfigureStage::Node, format!("cannot record the reboot it will need: {e}"));
        }
        reboot_owed = true;
    }
    let step = engine::node(t.pool, &l.instance, false, &context(&fresh)).await;
    if step.failed() {
        return fail(DeconfigureStage::Node, format!("{}; the node stays cordoned", node_line(&step)));
    }
    let operations = step.counts().applied;
    if reboot_owed && let Err(e) = t.host.reboot(&l.instance).await {
        return fail(DeconfigureStage::Reboot, e);
    }
    let note = format!(
        "deconfigured: {operations} operation(s) on the node{}; deleting the Node",
        if reboot_owed { ", rebooted to drop the proxy variables" } else { "" }
    );
    t.events.publish(regarding(), Reason::Deconfigured, note).await;
    match nodes.delete(name, &DeleteParams::default()).await {
        Ok(_) => DeconfigureResult::Deconfigured { evicted, operations, rebooted: reboot_owed },
        Err(kube::Error::Api(e)) if e.code == 404 => {
            DeconfigureResult::Deconfigured { evicted, operations, rebooted: reboot_owed }
        }
        Err(e) => fail(DeconfigureStage::Delete, api_error(&e)),
    }
}

fn removes_environment(report: &NodeReport) -> bool {
    match &report.result {
        NodeResult::Done { operations, .. } => operations.iter().any(|o| o.operation.is_disruptive()),
        _ => false,
    }
}
