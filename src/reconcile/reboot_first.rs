//! Hosts that reboot before their configuration goes on (the Containers
//! feature was enabled: [`crate::lifecycle::containers`]) and have no Node:
//! nothing runs there to cordon or drain, so the round reboots them right
//! away, as WMCO does when it configures a host, waits until each answers
//! over SSH with a new boot, and runs its node step again, so its
//! configuration (and its join) goes on in the same round. A host with a
//! Node keeps its reboot for the safe reboot rollout.
//!
//! A failure (the reboot refused, the host not back in time) fails that
//! host's node step with the reason; the next round finds the feature
//! pending or enabled and goes on from there.

use std::collections::BTreeMap;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::time::{Instant, sleep};

use super::Options;
use crate::desired::model::Instance;
use crate::engine::host::Host;
use crate::engine::report::{NodeReport, NodeResult, Stage};
use crate::engine::{self, NodeContext};
use crate::progress::{self, Phase};
use crate::ssh::Pool;

/// Reboots the hosts of `nodes` that must reboot first and have no Node,
/// and replaces their reports with their node step after the reboot
/// (`on_node` sees each new report).
pub async fn reboot_unjoined<H: Host>(
    (pool, host): (&Pool, &H),
    instances: &[&Instance],
    options: &Options,
    contexts: &BTreeMap<String, NodeContext>,
    mut nodes: Vec<NodeReport>,
    mut on_node: impl FnMut(&NodeReport),
) -> Vec<NodeReport> {
    if options.dry_run {
        return nodes;
    }
    let none = NodeContext::default();
    let due: Vec<&Instance> = instances
        .iter()
        .copied()
        .filter(|i| contexts.get(&i.address).is_none_or(|c| c.node.is_none()))
        .filter(|i| nodes.iter().any(|r| r.address == i.address && owes_reboot_first(r)))
        .collect();
    let mut due = due.into_iter();
    let mut running = FuturesUnordered::new();
    loop {
        while running.len() < options.max_parallel.max(1) && !options.stop.is_cancelled() {
            let Some(instance) = due.next() else { break };
            let context = contexts.get(&instance.address).unwrap_or(&none);
            running.push(reboot_and_continue(pool, host, instance, options, context));
        }
        let Some((address, after)) = running.next().await else { break };
        if let Some(report) = nodes.iter_mut().find(|r| r.address == address) {
            *report = merged(std::mem::replace(report, NodeReport::new(&address)), after);
            on_node(report);
        }
    }
    nodes
}

/// Whether a node step ended with its host to reboot before anything else.
fn owes_reboot_first(report: &NodeReport) -> bool {
    report.lifecycle.as_ref().is_some_and(|l| l.reboot_first) && !report.failed()
}

async fn reboot_and_continue<H: Host>(
    pool: &Pool,
    host: &H,
    instance: &Instance,
    options: &Options,
    context: &NodeContext,
) -> (String, Result<NodeReport, String>) {
    let address = instance.address.clone();
    let result = match reboot(host, instance, options).await {
        Ok(()) => Ok(engine::node(pool, instance, false, context).await),
        Err(e) => Err(e),
    };
    (address, result)
}

async fn reboot<H: Host>(host: &H, instance: &Instance, options: &Options) -> Result<(), String> {
    let name = &instance.address;
    let before = host.boot_id(instance).await.map_err(|e| format!("cannot read the boot id before rebooting: {e}"))?;
    host.reboot(instance).await.map_err(|e| format!("the reboot command failed: {e}"))?;
    progress::step(name, Phase::Reboot, "rebooting to enable the Containers feature (no Node yet: nothing to drain)");
    let deadline = Instant::now() + options.rollout.reboot_timeout;
    loop {
        let last = match host.boot_id(instance).await {
            Ok(now) if now != before => {
                progress::step(name, Phase::Node, "back with a new boot; configuring");
                return Ok(());
            }
            Ok(_) => "it answers over SSH but has not rebooted".to_owned(),
            Err(e) => format!("it does not answer over SSH ({e})"),
        };
        if Instant::now() >= deadline {
            return Err(format!("not back from the reboot within {:?}: {last}", options.rollout.reboot_timeout));
        }
        sleep(options.rollout.poll).await;
    }
}

/// The report after the reboot: the first step's operations (the feature
/// enabled), then the second's; a failed reboot fails the node.
fn merged(first: NodeReport, after: Result<NodeReport, String>) -> NodeReport {
    let mut after = match after {
        Ok(after) => after,
        Err(reason) => {
            let mut failed = first;
            failed.result = NodeResult::Failed {
                stage: Stage::Apply,
                reason: format!("rebooting to enable the Containers feature: {reason}"),
            };
            return failed;
        }
    };
    if let (NodeResult::Done { operations: before, .. }, NodeResult::Done { operations, .. }) =
        (first.result, &mut after.result)
    {
        operations.splice(0..0, before);
    }
    after
}
