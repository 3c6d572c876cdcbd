//! The cluster's prerequisites in a round (issue 27, item 6): checked once
//! the cluster is observed, before the node round. When they refuse
//! ([`crate::cluster::prerequisites`]), no node joins or is configured for
//! a join and no node is upgraded this round:
//!
//! - a node in Join mode is observed only (a dry run of its node round:
//!   nothing is written to it, not even its registry files), and its report
//!   says why its lifecycle is blocked; it gets a join report that was not
//!   started;
//! - a node whose Node runs an older version keeps running it: its upgrade
//!   is not started;
//! - nodes at the desired version are maintained as usual;
//! - a Warning Event `PrerequisitesNotMet` on each held node's Node (by the
//!   host name it registers with, before it exists), once per distinct
//!   reason: the Events in namespace `default` are the memory.
//!
//! A refusal is decided again every round: the round after the cluster (or
//! the payload's declared kubelet) is fixed joins the held nodes.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::{Api, ListParams};

use crate::cluster::events::{Events, Reason, Regarding};
use crate::cluster::join::{JoinReport, JoinResult};
use crate::cluster::prerequisites::Prerequisites;
use crate::cluster::upgrade::{self, UpgradeReport, UpgradeResult};
use crate::cluster::{ClusterFacts, NodeObs};
use crate::desired::model::Instance;
use crate::engine::NodeContext;
use crate::engine::report::{LifecycleReport, NodeReport, NodeResult};
use crate::lifecycle::Mode;
use crate::ssh::Pool;

use super::Options;

/// The Event namespace of cluster-scoped objects (Nodes).
const EVENT_NAMESPACE: &str = "default";

/// Why a held node's lifecycle is blocked.
pub fn blocked_reason(refused: &str) -> String {
    format!("the cluster's prerequisites are not met, nothing written: {refused}")
}

/// The joins held this round, and the Nodes their Events are about.
#[derive(Default)]
pub(super) struct Held {
    /// Not started, with the reason.
    pub(super) joins: Vec<JoinReport>,
    /// The held nodes' host names (lowercased: their Node names).
    names: Vec<String>,
}

impl Held {
    /// Adds what another batch of the same round held.
    pub(super) fn merge(&mut self, other: Held) {
        self.joins.extend(other.joins);
        self.names.extend(other.names);
    }
}

/// The node round with the prerequisites in force: held nodes are observed
/// in a dry run, the others run as the round says.
pub(super) async fn node_round(
    pool: &Pool,
    instances: &[&Instance],
    options: &Options,
    contexts: &BTreeMap<String, NodeContext>,
    prerequisites: &Prerequisites,
    mut on_node: impl FnMut(&NodeReport),
) -> (Vec<NodeReport>, Held) {
    let (run, held) = split(instances, contexts, prerequisites);
    let mut nodes = super::node_round(pool, &run, options, contexts, &mut on_node).await;
    let Some(refused) = prerequisites.refused.as_deref().filter(|_| !held.is_empty()) else {
        return (nodes, Held::default());
    };
    let observe = Options { dry_run: true, ..options.clone() };
    let observed = super::node_round(pool, &held, &observe, contexts, |_| {}).await;
    let held_reports: Vec<NodeReport> = observed
        .into_iter()
        .filter_map(|report| {
            let instance = held.iter().find(|i| i.address == report.address)?;
            Some(hold(report, instance, refused))
        })
        .inspect(|r| on_node(r))
        .collect();
    let names = held_reports.iter().filter_map(|r| r.hostname.as_ref().map(|h| h.to_lowercase())).collect();
    let joins = joins(&held_reports, refused);
    nodes.extend(held_reports);
    nodes.sort_by(|a, b| a.address.cmp(&b.address));
    (nodes, Held { joins, names })
}

/// The instances of the node round and those held (in Join mode while the
/// prerequisites refuse), in their order.
pub fn split<'a>(
    instances: &[&'a Instance],
    contexts: &BTreeMap<String, NodeContext>,
    prerequisites: &Prerequisites,
) -> (Vec<&'a Instance>, Vec<&'a Instance>) {
    instances.iter().partition(|i| {
        prerequisites.refused.is_none() || contexts.get(&i.address).and_then(|c| c.mode) != Some(Mode::Join)
    })
}

/// A held node's report (observed in a dry run): no operation, its
/// lifecycle blocked with the reason. A node the observation failed on, or
/// refused itself (host name, Windows build), keeps that report.
pub fn hold(mut report: NodeReport, instance: &Instance, refused: &str) -> NodeReport {
    if let NodeResult::Done { in_sync, .. } = report.result {
        report.result = NodeResult::Done { operations: Vec::new(), in_sync, reboot_required: false };
    }
    let version = instance.spec.lifecycle.as_ref().map(|l| l.version.clone()).unwrap_or_default();
    report.lifecycle = Some(LifecycleReport {
        mode: Mode::Join,
        version,
        waiting: Vec::new(),
        error: Some(blocked_reason(refused)),
        uploaded_bytes: 0,
        reboot_first: false,
    });
    report
}

/// The joins of the held nodes: not started, with the reason.
pub fn joins(held: &[NodeReport], refused: &str) -> Vec<JoinReport> {
    held.iter()
        .map(|r| JoinReport {
            address: r.address.clone(),
            node: None,
            result: JoinResult::NotStarted { reason: blocked_reason(refused) },
            services: None,
        })
        .collect()
}

/// The upgrades that may start, and the reports of those held.
pub fn upgrades<'a>(
    candidates: Vec<upgrade::Candidate<'a>>,
    prerequisites: &Prerequisites,
) -> (Vec<upgrade::Candidate<'a>>, Vec<UpgradeReport>) {
    let Some(refused) = &prerequisites.refused else { return (candidates, Vec::new()) };
    let held = candidates
        .iter()
        .map(|c| {
            let reason = format!("the cluster's prerequisites are not met; the node keeps its version: {refused}");
            upgrade::report(c, UpgradeResult::NotStarted { reason })
        })
        .collect();
    (Vec::new(), held)
}

/// A Warning Event on the Node of each held node (its observed host name)
/// and each Node whose upgrade is held, unless one with the same note is
/// there already.
pub(super) async fn publish(
    client: &Client,
    events: &Events,
    facts: &ClusterFacts,
    (held, upgrades, prerequisites): (&Held, &[UpgradeReport], &Prerequisites),
) {
    let Some(refused) = &prerequisites.refused else { return };
    let note = format!("no node joins or upgrades: {refused}");
    let names: BTreeSet<&String> = held.names.iter().chain(upgrades.iter().map(|u| &u.node)).collect();
    if names.is_empty() {
        return;
    }
    let said = said(client, &note).await;
    for name in names.into_iter().filter(|n| !said.contains(n)) {
        let uid = facts.nodes.get(name).map(|n: &NodeObs| n.uid.as_str()).unwrap_or_default();
        events.publish(Regarding::Node(name, uid), Reason::PrerequisitesNotMet, note.clone()).await;
    }
}

/// The Nodes that already have a `PrerequisitesNotMet` Event with `note`
/// (none when the Events cannot be listed: an Event too many, never one
/// too few).
async fn said(client: &Client, note: &str) -> Vec<String> {
    let api: Api<Event> = Api::namespaced(client.clone(), EVENT_NAMESPACE);
    match api.list(&ListParams::default()).await {
        Ok(list) => list
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(Reason::PrerequisitesNotMet.as_str()))
            .filter(|e| e.note.as_deref() == Some(note))
            .filter_map(|e| e.regarding?.name)
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot list the Events in {EVENT_NAMESPACE}");
            Vec::new()
        }
    }
}
