//! The node engine: one round over a set of instances, each node observed
//! with one script, planned purely, and changed with one script, up to
//! `max_parallel` nodes at a time. A failing or unreachable node never stops
//! the others; it is reported with its reason.
//!
//! - [`report`]: what a round found and did, per node, as data.

pub mod host;
pub mod report;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio_util::sync::CancellationToken;

use crate::desired::model::Instance;
use crate::dialect;
use crate::node::NodeSpec;
use crate::node::facts::{NodeFacts, parse_facts};
use crate::node::outcome::parse_outcomes;
use crate::node::plan::{self, plan_node};
use crate::ssh::{Output, Pool, Target};
use report::{NodeReport, NodeResult, OpReport, Stage};

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
    mut on_node: impl FnMut(&NodeReport),
) -> Vec<NodeReport> {
    let mut reports = Vec::new();
    let mut waiting = instances.iter();
    // A plain loop over FuturesUnordered (not a stream adaptor with a
    // closure): the daemon spawns rounds, and this keeps the future `Send`
    // without rustc's higher-ranked lifetime trouble.
    let mut running = FuturesUnordered::new();
    loop {
        while running.len() < options.max_parallel.max(1) {
            let Some(instance) = waiting.next() else { break };
            running.push(node_unless_stopped(pool, instance, options.dry_run, stop));
        }
        let Some(report) = running.next().await else { break };
        on_node(&report);
        reports.push(report);
    }
    reports.sort_by(|a, b| a.address.cmp(&b.address));
    reports
}

/// [`node`], unless `stop` was cancelled before its turn came.
async fn node_unless_stopped(pool: &Pool, instance: &Instance, dry_run: bool, stop: &CancellationToken) -> NodeReport {
    if stop.is_cancelled() {
        return NodeReport::new(&instance.address);
    }
    node(pool, instance, dry_run).await
}

/// The SSH target of an instance.
pub fn target(instance: &Instance) -> Target {
    Target { address: instance.address.clone(), port: instance.port, username: instance.username.clone() }
}

/// Observe, plan and (unless `dry_run`) apply on one node.
pub async fn node(pool: &Pool, instance: &Instance, dry_run: bool) -> NodeReport {
    let target = target(instance);
    let spec: &NodeSpec = &instance.spec;
    let mut report = NodeReport::new(&instance.address);
    let facts = match observe(pool, &target, spec).await {
        Ok(facts) => facts,
        Err(reason) => {
            report.result = NodeResult::Failed { stage: Stage::Observe, reason };
            return report;
        }
    };
    report.hostname = Some(facts.hostname.clone());
    report.os = Some(facts.os.clone());
    report.services = facts.services.iter().map(|(name, state)| (name.clone(), state.to_string())).collect();
    let changes = plan_node(spec, &facts);
    let reboot_required = plan::reboot_required(&facts, &changes);
    let in_sync = plan::in_sync(spec, &changes);
    let mut operations: Vec<OpReport> =
        changes.iter().map(|c| OpReport { operation: c.operation(spec), outcome: None }).collect();
    if !dry_run && !changes.is_empty() {
        let script = dialect::apply(spec, &facts, &changes);
        match pool.run(&target, &script, false).await {
            Ok(output) => match parse_outcomes(&output.stdout, changes.len()) {
                Ok(outcomes) => {
                    for (op, outcome) in operations.iter_mut().zip(outcomes) {
                        op.outcome = Some(outcome);
                    }
                }
                Err(e) => {
                    report.result =
                        NodeResult::Failed { stage: Stage::Apply, reason: explain(&e.to_string(), &output) };
                    return report;
                }
            },
            Err(e) => {
                let reason = format!("{e}; the next round re-observes and converges");
                report.result = NodeResult::Failed { stage: Stage::Apply, reason };
                return report;
            }
        }
    }
    report.result = NodeResult::Done { operations, in_sync, reboot_required };
    report
}

async fn observe(pool: &Pool, target: &Target, spec: &NodeSpec) -> Result<NodeFacts, String> {
    let output = pool.run(target, &dialect::observe(spec), true).await.map_err(|e| e.to_string())?;
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
