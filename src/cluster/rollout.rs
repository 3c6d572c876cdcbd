//! The safe reboot, the only disruptive path: cordon, drain, reboot over
//! SSH, wait until the node answers with a new boot and its Node is Ready,
//! uncordon. WMCO's `reboot-required` annotation is set on the way in and
//! cleared on the way out, so a WMCO-managed cluster sees the same signal.
//!
//! At most `max_unavailable` nodes are disrupted at once (BYOH and Machine
//! nodes together), and none starts while another node winfleet disrupted is
//! not back: the disruption is recorded on the Node ([`REBOOTING_ANNOTATION`],
//! with the boot id before the reboot), so a crash in the middle is resumed
//! by the next round. A node that does not come back stops the rollout.

use std::collections::VecDeque;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::Api;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::apply::api_error;
use super::cordon;
use super::drain::{DrainOptions, drain};
use super::events::{Events, Reason, Regarding};
use super::observe::node_obs;
use super::{CORDONED_ANNOTATION, NodeObs, REBOOT_REQUIRED_ANNOTATION, REBOOTING_ANNOTATION};
use crate::desired::model::Instance;
use crate::engine::host::Host;
use crate::progress::{self, Phase};

/// How the rollout runs.
#[derive(Clone, Copy, Debug)]
pub struct RolloutOptions {
    /// Nodes disrupted at once (at least 1).
    pub max_unavailable: usize,
    /// Draining one node gives up after this long.
    pub drain_timeout: Duration,
    /// A rebooting node must be back (SSH answers with a new boot, Node
    /// Ready) within this long.
    pub reboot_timeout: Duration,
    /// Interval between checks while waiting.
    pub poll: Duration,
}

impl Default for RolloutOptions {
    fn default() -> Self {
        Self {
            max_unavailable: 1,
            drain_timeout: Duration::from_secs(600),
            reboot_timeout: Duration::from_secs(900),
            poll: Duration::from_secs(5),
        }
    }
}

/// A node to reboot, or to finish rebooting.
#[derive(Clone, Debug)]
pub struct Candidate<'a> {
    /// Its instance.
    pub instance: &'a Instance,
    /// Its Node as observed.
    pub node: NodeObs,
}

/// Where a safe reboot stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum RebootStage {
    /// Reading the boot id or cordoning.
    Cordon,
    /// Evicting pods.
    Drain,
    /// Sending the reboot command.
    Reboot,
    /// Waiting for the node to come back.
    WaitBack,
    /// Uncordoning.
    Uncordon,
}

impl RebootStage {
    /// The stage in words (`cordon`, `drain`, `reboot`, `wait for the node`, `uncordon`).
    pub fn name(self) -> &'static str {
        match self {
            RebootStage::Cordon => "cordon",
            RebootStage::Drain => "drain",
            RebootStage::Reboot => "reboot",
            RebootStage::WaitBack => "wait for the node",
            RebootStage::Uncordon => "uncordon",
        }
    }
}

/// How one node's safe reboot ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum RebootResult {
    /// Rebooted and back in service.
    Rebooted {
        /// Pods evicted.
        evicted: usize,
        /// Whether this finished a reboot an earlier round started.
        resumed: bool,
    },
    /// Failed; `stage` tells where. A node that failed to come back stays
    /// cordoned; one whose drain failed is uncordoned (nothing was disrupted).
    Failed {
        /// Where.
        stage: RebootStage,
        /// Why.
        reason: String,
    },
    /// Not started: the rollout stopped, or other nodes are still disrupted.
    NotStarted {
        /// Why.
        reason: String,
    },
}

/// One node's safe reboot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RebootReport {
    /// Node name.
    pub node: String,
    /// Instance address.
    pub address: String,
    /// The outcome.
    #[serde(flatten)]
    pub result: RebootResult,
}

/// Reboots `candidates` (nodes that are disrupted already come first) at
/// most `max_unavailable` at a time; `others_disrupted` names nodes outside
/// this rollout that winfleet is still rebooting (they hold slots).
pub async fn rollout<H: Host>(
    client: &Client,
    events: &Events,
    host: &H,
    mut candidates: Vec<Candidate<'_>>,
    others_disrupted: &[String],
    options: RolloutOptions,
    stop: &CancellationToken,
) -> Vec<RebootReport> {
    candidates.sort_by(|a, b| (!a.node.in_reboot(), &a.node.name).cmp(&(!b.node.in_reboot(), &b.node.name)));
    let mut queue: VecDeque<Candidate<'_>> = candidates.into();
    let slots = options.max_unavailable.max(1).saturating_sub(others_disrupted.len());
    let mut reports = Vec::new();
    let mut stopped: Option<String> = (slots == 0).then(|| {
        format!(
            "node(s) {} are still being rebooted by winfleet; no other node starts until they are back",
            others_disrupted.join(", ")
        )
    });
    let mut running = FuturesUnordered::new();
    let mut resuming = 0;
    loop {
        // Nodes an earlier round left disrupted are finished first, and no
        // new reboot starts while one of them is not back.
        while running.len() < slots && stopped.is_none() {
            if stop.is_cancelled() {
                stopped = Some("winfleet is stopping; the next round continues the rollout".to_owned());
                break;
            }
            let Some(next) = queue.front() else { break };
            let resumes = next.node.in_reboot();
            if !resumes && resuming > 0 {
                break;
            }
            let Some(candidate) = queue.pop_front() else { break };
            resuming += usize::from(resumes);
            running.push(async move { (resumes, reboot_one(client, events, host, candidate, options).await) });
        }
        let Some((resumed, report)) = running.next().await else { break };
        resuming -= usize::from(resumed);
        if let RebootResult::Failed { stage: RebootStage::WaitBack | RebootStage::Uncordon, .. } = &report.result {
            stopped.get_or_insert_with(|| format!("the rollout stopped: node {} is not back", report.node));
        }
        reports.push(report);
    }
    let reason = stopped.unwrap_or_default();
    reports.extend(queue.into_iter().map(|c| RebootReport {
        node: c.node.name.clone(),
        address: c.instance.address.clone(),
        result: RebootResult::NotStarted { reason: reason.clone() },
    }));
    reports
}

async fn reboot_one<H: Host>(
    client: &Client,
    events: &Events,
    host: &H,
    candidate: Candidate<'_>,
    options: RolloutOptions,
) -> RebootReport {
    let node = &candidate.node;
    let result = run_reboot(client, events, host, &candidate, options).await;
    match &result {
        RebootResult::Failed { stage, reason } => {
            progress::step(&node.name, Phase::Failed, &format!("safe reboot failed at {}: {reason}", stage.name()));
        }
        RebootResult::Rebooted { .. } => {
            progress::step(&node.name, Phase::Done, "back with a new boot and Ready; uncordoned");
        }
        RebootResult::NotStarted { .. } => {}
    }
    RebootReport { node: node.name.clone(), address: candidate.instance.address.clone(), result }
}

async fn run_reboot<H: Host>(
    client: &Client,
    events: &Events,
    host: &H,
    candidate: &Candidate<'_>,
    options: RolloutOptions,
) -> RebootResult {
    let (node, instance) = (&candidate.node, candidate.instance);
    let nodes: Api<Node> = Api::all(client.clone());
    let regarding = || Regarding::Node(&node.name, &node.uid);
    let fail = |stage, reason: String| RebootResult::Failed { stage, reason };
    let resumed = node.annotations.get(REBOOTING_ANNOTATION).cloned();
    let before = match &resumed {
        Some(recorded) => recorded.clone(),
        None => match host.boot_id(instance).await {
            Ok(id) => id,
            Err(e) => return fail(RebootStage::Cordon, format!("cannot read the boot id before rebooting: {e}")),
        },
    };
    // A resumed reboot whose node has booted since, or does not answer (it
    // may be going down), only needs to be waited for and finished: never
    // drain and reboot twice.
    let only_finish = resumed.is_some() && host.boot_id(instance).await.ok().is_none_or(|now| now != before);
    let mut evicted = 0;
    // When the reboot command went out (unknown when an earlier round sent
    // it: the moment the new boot is first seen stands in).
    let mut sent = None;
    if !only_finish {
        // Read the Node fresh: the cordon is conditional on what it says now,
        // so an administrator's cordon made meanwhile is seen (and kept).
        let fresh = match nodes.get(&node.name).await {
            Ok(n) => node_obs(&n),
            Err(e) => return fail(RebootStage::Cordon, format!("cannot read the Node: {}", api_error(&e))),
        };
        if let Err(e) = cordon::patch(&nodes, &node.name, &cordon_patch(&fresh, &before)).await {
            return fail(RebootStage::Cordon, format!("cannot cordon: {e}"));
        }
        progress::step(&node.name, Phase::Cordon, "cordoned for a safe reboot");
        if resumed.is_none() {
            events.publish(regarding(), Reason::Cordoned, "cordoned for a safe reboot").await;
        }
        let drain_options = DrainOptions { timeout: options.drain_timeout, retry: options.poll };
        evicted = match drain(client, events, (&node.name, &node.uid), drain_options).await {
            Ok(n) => n,
            Err(reason) => {
                let note = match uncordon(&nodes, node, false).await {
                    Ok(()) => format!("{reason}; uncordoned, the reboot is still owed"),
                    Err(e) => format!("{reason}; uncordoning failed too ({e})"),
                };
                events.publish(regarding(), Reason::DrainFailed, note).await;
                return fail(RebootStage::Drain, reason);
            }
        };
        sent = Some(jiff::Timestamp::now());
        if let Err(reason) = host.reboot(instance).await {
            let note = match uncordon(&nodes, node, false).await {
                Ok(()) => format!("reboot command refused: {reason}; uncordoned"),
                Err(e) => format!("reboot command refused: {reason}; uncordoning failed too ({e})"),
            };
            events.publish(regarding(), Reason::RebootFailed, note).await;
            return fail(RebootStage::Reboot, reason);
        }
        progress::step(&node.name, Phase::Reboot, &format!("rebooting after evicting {evicted} pod(s)"));
        events.publish(regarding(), Reason::Rebooting, format!("rebooting after evicting {evicted} pod(s)")).await;
    }
    if let Err(reason) = wait_back(&nodes, host, instance, (&node.name, &before, sent), options).await {
        events
            .publish(
                regarding(),
                Reason::RebootFailed,
                format!("{reason}; the node stays cordoned and the rollout stops"),
            )
            .await;
        return fail(RebootStage::WaitBack, reason);
    }
    if let Err(e) = uncordon(&nodes, node, true).await {
        return fail(RebootStage::Uncordon, format!("cannot uncordon: {e}"));
    }
    events.publish(regarding(), Reason::Rebooted, "back with a new boot and Ready; uncordoned").await;
    RebootResult::Rebooted { evicted, resumed: resumed.is_some() }
}

/// Waits until the node answers with a boot id other than `before` and its
/// Node is Ready with a heartbeat newer than `sent` (the reboot command),
/// posted by the kubelet of the new boot: a Ready condition left from
/// before the reboot (the node came back before the node lifecycle
/// controller marked it NotReady), or a heartbeat the old kubelet posted
/// while the node was shutting down, does not count. The kubelet's boot is
/// its Node's `status.nodeInfo.bootID` (the same id the observation reads:
/// `/proc/sys/kernel/random/boot_id`, or Windows' `BootId` counter); a
/// kubelet that reports none is judged by the heartbeat alone. Without
/// `sent` (a reboot an earlier round sent), the moment the new boot is
/// first seen stands in.
async fn wait_back<H: Host>(
    nodes: &Api<Node>,
    host: &H,
    instance: &Instance,
    (name, before, sent): (&str, &str, Option<jiff::Timestamp>),
    options: RolloutOptions,
) -> Result<(), String> {
    let deadline = Instant::now() + options.reboot_timeout;
    let mut since = sent;
    progress::step(name, Phase::WaitReady, "waiting for a new boot and a Ready Node");
    let mut reported = String::new();
    loop {
        let last = match host.boot_id(instance).await {
            Ok(now) if now != before => match nodes.get_opt(name).await {
                Ok(Some(n)) => match back_in(&n, &now, *since.get_or_insert_with(jiff::Timestamp::now)) {
                    Ok(()) => return Ok(()),
                    Err(why) => why.to_owned(),
                },
                Ok(None) => format!("its Node {name} is gone"),
                Err(e) => format!("cannot read its Node: {}", api_error(&e)),
            },
            Ok(_) => "it answers over SSH but has not rebooted".to_owned(),
            Err(e) => format!("it does not answer over SSH ({e})"),
        };
        if Instant::now() >= deadline {
            return Err(format!("node did not come back within {}s: {last}", options.reboot_timeout.as_secs()));
        }
        if last != reported {
            progress::step(name, Phase::WaitReady, &format!("waiting for a new boot and a Ready Node: {last}"));
            reported = last;
        }
        tokio::time::sleep(options.poll).await;
    }
}

/// Whether `node` says its kubelet is back in boot `boot`: Ready, with a
/// heartbeat newer than `since`, and (when the kubelet reports one) the
/// boot id `boot`. The reason it is not, otherwise. Pure.
fn back_in(node: &Node, boot: &str, since: jiff::Timestamp) -> Result<(), &'static str> {
    let reported = node.status.as_ref().and_then(|s| s.node_info.as_ref()).map(|i| i.boot_id.as_str());
    if reported.is_some_and(|b| !b.is_empty() && b != boot) {
        return Err("its kubelet has not started in the new boot yet");
    }
    match super::ready::ready_heartbeat(node) {
        Some((true, Some(beat))) if beat > since => Ok(()),
        Some((true, _)) => Err("its Node's Ready condition is from before the reboot"),
        _ => Err("it answers over SSH but its Node is not Ready"),
    }
}

/// Lifts winfleet's cordon and its markers. `rebooted`: the reboot happened,
/// so WMCO's reboot-required annotation goes too.
async fn uncordon(nodes: &Api<Node>, node: &NodeObs, rebooted: bool) -> Result<(), String> {
    // Read fresh: a resumed node's observation is from before the crash.
    let fresh = match nodes.get_opt(&node.name).await {
        Ok(Some(n)) => node_obs(&n),
        Ok(None) => return Err(format!("Node {} is gone", node.name)),
        Err(e) => return Err(api_error(&e)),
    };
    cordon::patch(nodes, &node.name, &uncordon_patch(&fresh, rebooted)).await.map(drop)
}

/// The cordon: unschedulable, the disruption marker with the boot id
/// before, WMCO's reboot-required signal, and winfleet's own-cordon marker
/// only when the node was schedulable. Conditional on `node`'s
/// resourceVersion, so a cordon made since it was read is seen. Pure.
fn cordon_patch(node: &NodeObs, boot_id_before: &str) -> Value {
    let mut annotations = json!({ REBOOTING_ANNOTATION: boot_id_before, REBOOT_REQUIRED_ANNOTATION: "" });
    if !node.unschedulable {
        annotations[CORDONED_ANNOTATION] = json!("true");
    }
    json!({
        "metadata": { "resourceVersion": node.resource_version, "annotations": annotations },
        "spec": { "unschedulable": true },
    })
}

/// Lifting winfleet's markers, and its cordon only if it made it; WMCO's
/// reboot-required goes only once the node has `rebooted`. Pure.
fn uncordon_patch(node: &NodeObs, rebooted: bool) -> Value {
    let mut annotations = json!({ REBOOTING_ANNOTATION: null, CORDONED_ANNOTATION: null });
    if rebooted {
        annotations[REBOOT_REQUIRED_ANNOTATION] = Value::Null;
    }
    let mut patch = json!({ "metadata": { "annotations": annotations } });
    if node.annotations.contains_key(CORDONED_ANNOTATION) {
        patch["spec"] = json!({ "unschedulable": false });
    }
    patch
}
