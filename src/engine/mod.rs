//! The node engine: one round over a set of instances, each node observed
//! with one script, planned purely, and changed with one script, up to
//! `max_parallel` nodes at a time. A failing or unreachable node never stops
//! the others; it is reported with its reason.
//!
//! - [`report`]: what a round found and did, per node, as data.

pub mod host;
pub mod report;
pub mod steps;

use std::collections::BTreeMap;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio_util::sync::CancellationToken;

use crate::desired::model::Instance;
use crate::dialect;
use crate::dialect::ObserveList;
use crate::lifecycle::Mode;
use crate::lifecycle::facts::resolve_cached;
use crate::lifecycle::node_name;
use crate::lifecycle::plan::{self as lifecycle_plan, plan_lifecycle};
use crate::node::NodeSpec;
use crate::node::facts::{NodeFacts, parse_facts};
use crate::node::plan::{self, plan_node};
use crate::node::prerequisites;
use crate::ssh::{Conversation, Output, Pool, Target};
use crate::vocab::platform::Platform;
use report::{LifecycleReport, NodeReport, NodeResult, OpReport, Stage};
use tokio::sync::Mutex;

/// What the cluster knows of a node, for its lifecycle.
#[derive(Clone, Debug, Default)]
pub struct NodeContext {
    /// The lifecycle mode (default: [`Mode::Prepare`], no cluster).
    pub mode: Option<Mode>,
    /// The Node object, when one is associated.
    pub node: Option<serde_json::Value>,
    /// Whether running services may be stopped (winfleet cordoned it).
    pub disrupt: bool,
}

impl NodeContext {
    /// The mode in force.
    pub fn mode(&self) -> Mode {
        self.mode.unwrap_or(Mode::Prepare)
    }

    fn plan_context(&self) -> lifecycle_plan::Context<'_> {
        let mode = self.mode();
        lifecycle_plan::Context { mode, node: self.node.as_ref(), disrupt: self.disrupt || mode == Mode::Maintain }
    }
}

/// How a round runs.
#[derive(Clone, Copy, Debug)]
pub struct RoundOptions {
    /// Observe and plan only.
    pub dry_run: bool,
    /// Nodes processed at once (at least 1).
    pub max_parallel: usize,
}

/// Runs one round over `instances`; `on_node` sees each report as it
/// completes. Reports come back sorted by address. Once `stop` is
/// cancelled no further node is started (those stay
/// [`NodeResult::Pending`]); nodes already running finish their script.
pub async fn round(
    pool: &Pool,
    instances: &[&Instance],
    options: RoundOptions,
    stop: &CancellationToken,
    contexts: &BTreeMap<String, NodeContext>,
    mut on_node: impl FnMut(&NodeReport),
) -> Vec<NodeReport> {
    let none = NodeContext::default();
    let traffic = pool.activity.traffic();
    let mut reports = Vec::new();
    let mut waiting = instances.iter();
    // A plain loop over FuturesUnordered (not a stream adaptor with a
    // closure): the daemon spawns rounds, and this keeps the future `Send`
    // without rustc's higher-ranked lifetime trouble.
    let mut running = FuturesUnordered::new();
    loop {
        while running.len() < options.max_parallel.max(1) {
            let Some(instance) = waiting.next() else { break };
            let context = contexts.get(&instance.address).unwrap_or(&none);
            running.push(node_unless_stopped(pool, instance, options.dry_run, stop, context));
        }
        let Some(report) = running.next().await else { break };
        on_node(&report);
        reports.push(report);
    }
    reports.sort_by(|a, b| a.address.cmp(&b.address));
    let traffic = pool.activity.traffic() - traffic;
    tracing::debug!(
        nodes = reports.len(),
        connections = traffic.connections,
        channels = traffic.channels,
        scripts = traffic.scripts,
        "the round's SSH traffic"
    );
    reports
}

/// [`node`], unless `stop` was cancelled before its turn came.
async fn node_unless_stopped(
    pool: &Pool,
    instance: &Instance,
    dry_run: bool,
    stop: &CancellationToken,
    context: &NodeContext,
) -> NodeReport {
    if stop.is_cancelled() {
        return NodeReport::new(&instance.address);
    }
    node(pool, instance, dry_run, context).await
}

/// The SSH target of an instance.
pub fn target(instance: &Instance) -> Target {
    Target { address: instance.address.clone(), port: instance.port, username: instance.username.clone() }
}

/// Observe, plan and (unless `dry_run`) apply on one node; `context` says
/// what the cluster knows of it (its lifecycle mode and Node).
pub async fn node(pool: &Pool, instance: &Instance, dry_run: bool, context: &NodeContext) -> NodeReport {
    let target = target(instance);
    // One shell for every script of this node, kept for its next round
    // (the channel, and on Windows starting powershell.exe, cost more than
    // the scripts).
    let conversation = match pool.converse(&target, dialect::interpreter(instance.spec.shell)).await {
        Ok(conversation) => Mutex::new(conversation),
        Err(e) => {
            let mut report = NodeReport::new(&instance.address);
            report.result = NodeResult::Failed { stage: Stage::Observe, reason: e.to_string() };
            return report;
        }
    };
    let report = observe_and_apply(pool, &target, instance, dry_run, context, &conversation).await;
    pool.keep(conversation.into_inner()).await;
    report
}

async fn observe_and_apply(
    pool: &Pool,
    target: &Target,
    instance: &Instance,
    dry_run: bool,
    context: &NodeContext,
    conversation: &Mutex<Conversation>,
) -> NodeReport {
    let spec: &NodeSpec = &instance.spec;
    let mut report = NodeReport::new(&instance.address);
    let list = spec.lifecycle.as_deref().map(|l| steps::observe_list(l, &pool.known_hashes(target), context));
    let mut facts = match observe(pool, Some(conversation), target, spec, list.as_ref()).await {
        Ok(facts) => facts,
        Err(reason) => {
            report.result = NodeResult::Failed { stage: Stage::Observe, reason };
            return report;
        }
    };
    if spec.lifecycle.is_some() {
        let mut cache = pool.known_hashes(target);
        resolve_cached(&mut facts.lifecycle, &mut cache);
        pool.remember_hashes(target, cache);
    }
    report.hostname = Some(facts.hostname.clone());
    // The name the kubelet registers under (its --hostname-override), so
    // that its CSRs are approved by exactly that name.
    report.node_name = spec
        .lifecycle
        .as_deref()
        .and_then(|l| node_name::kubelet_override(l, &facts.lifecycle))
        .and_then(Result::ok)
        .filter(|name| !name.eq_ignore_ascii_case(&facts.hostname));
    report.os = Some(facts.os.clone());
    report.services = facts.services.iter().map(|(name, state)| (name.clone(), state.to_string())).collect();
    // Before the first write, in configure modes only; the Windows builds
    // a host may run depend on the cluster's platform.
    let platform = spec.lifecycle.as_ref().map_or(Platform::None, |l| l.platform);
    let configuring = matches!(context.mode(), Mode::Prepare | Mode::Join);
    if let Some(reason) = configuring.then(|| prerequisites::refused(spec.shell, &facts, platform)).flatten() {
        report.result = NodeResult::Failed { stage: Stage::Observe, reason };
        return report;
    }
    let changes = plan_node(spec, &facts);
    let lifecycle = spec.lifecycle.as_deref().map(|l| (l, plan_lifecycle(l, &facts.lifecycle, context.plan_context())));
    let reboot_required = plan::reboot_required(&facts, &changes) || lifecycle.as_ref().is_some_and(|(_, p)| p.reboot);
    let mut in_sync = plan::in_sync(spec, &changes);
    let mut operations: Vec<OpReport> =
        changes.iter().map(|c| OpReport { operation: c.operation(spec), outcome: None }).collect();
    let no_changes = Vec::new();
    let lifecycle_changes = lifecycle.as_ref().map_or(&no_changes, |(_, p)| &p.changes);
    operations.extend(lifecycle_changes.iter().map(|c| OpReport { operation: c.operation(), outcome: None }));
    if let Some((l, plan)) = &lifecycle {
        in_sync += plan.in_sync;
        report.lifecycle = Some(LifecycleReport {
            mode: context.mode(),
            version: l.version.clone(),
            waiting: plan.waiting.clone(),
            error: plan.error.clone(),
            uploaded_bytes: 0,
            reboot_first: plan.reboot,
        });
    }
    if !dry_run && !operations.is_empty() {
        let work = steps::Work {
            pool,
            conversation,
            target,
            spec,
            facts: &facts,
            changes: &changes,
            lifecycle: lifecycle_changes,
        };
        match steps::apply(&work).await {
            Ok(applied) => {
                for (op, outcome) in operations.iter_mut().zip(applied.outcomes) {
                    op.outcome = Some(outcome);
                }
                if let Some(l) = report.lifecycle.as_mut() {
                    l.uploaded_bytes = applied.uploaded;
                }
            }
            Err((stage, reason)) => {
                report.result = NodeResult::Failed { stage, reason };
                return report;
            }
        }
    }
    report.result = NodeResult::Done { operations, in_sync, reboot_required };
    report
}

/// The node's facts, through its kept shell, or (`None`: the safe
/// reboot's boot-id check) on a channel of its own.
async fn observe(
    pool: &Pool,
    conversation: Option<&Mutex<Conversation>>,
    target: &Target,
    spec: &NodeSpec,
    list: Option<&ObserveList>,
) -> Result<NodeFacts, String> {
    let script = dialect::observe(spec, list);
    let output = match conversation {
        Some(conversation) => pool.exchange(&mut *conversation.lock().await, &script, true).await,
        None => pool.run(target, &script, true).await,
    }
    .map_err(|e| e.to_string())?;
    parse_facts(&output.stdout).map_err(|e| explain(&e.to_string(), &output))
}

/// A report error with what the node said on stderr and its exit status.
fn explain(error: &str, output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stderr = stderr.trim();
    let mut reason = error.to_owned();
    if let Some(code) = output.exit_status.filter(|&c| c != 0) {
        reason.push_str(&format!(" (exit status {code})"));
    }
    if !stderr.is_empty() {
        let excerpt: String = stderr.chars().take(500).collect();
        reason.push_str(&format!("; stderr: {excerpt}"));
    }
    reason
}
