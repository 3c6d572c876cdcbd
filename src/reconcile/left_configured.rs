//! Removals with no Node to drain (SSH-only mode, issue 27 item 7): an
//! instance that leaves the repository while no cluster is configured (or
//! before its host ever joined) is not deconfigured, and winfleet's files
//! stay on the host. Status keeps such a host as left configured until it
//! is listed again or nothing winfleet installed is left on it: this module
//! checks that with the deconfigure's own observation, a dry run over SSH
//! (the install record, and the registry directories winfleet marked),
//! writing nothing.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde::Serialize;

use crate::desired::model::{Desired, Instance};
use crate::engine::report::{NodeResult, node_line};
use crate::engine::{self, NodeContext};
use crate::lifecycle::Mode;
use crate::node::NodeSpec;
use crate::ssh::Pool;

/// The reason status gives a host left configured.
pub const REASON: &str = "left configured: no cluster to drain it; deconfigure it with a cluster, or remove it by hand";

/// What is left of winfleet on a host that left the repository.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Remains {
    /// winfleet's files are there: what a deconfigure would remove.
    Configured {
        /// The deconfigure's operations, as headlines.
        operations: Vec<String>,
    },
    /// Nothing winfleet installed is left (the install record is gone).
    Gone,
    /// The host could not be checked this round.
    Unknown {
        /// Why.
        reason: String,
    },
}

/// One host checked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeftHost {
    /// Its address, as it was listed.
    pub address: String,
    /// What is left there.
    pub remains: Remains,
}

/// The hosts checked this round, and what the mass-removal guard counts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeftProbe {
    /// The hosts, by address.
    pub hosts: Vec<LeftHost>,
    /// Instances listed in the revision in force.
    pub listed: usize,
    /// `prune.maxRemovalPercent`.
    pub max_removal_percent: u32,
}

/// How the guard's refusal ends, which tells it from a deconfigure's.
pub const GUARD_TAIL: &str = "left the repository with no cluster to deconfigure them";

impl LeftProbe {
    /// The mass-removal guard over the listed instances and the hosts left
    /// configured (still configured, or not checked): more than
    /// `prune.maxRemovalPercent` of them gone from the repository at once is
    /// said as a deconfigure refusal is.
    pub fn guard(&self) -> Option<String> {
        let left = self.hosts.iter().filter(|h| h.remains != Remains::Gone).count();
        let total = self.listed + left;
        if left == 0 || left * 100 <= self.max_removal_percent as usize * total {
            return None;
        }
        Some(format!(
            "{left} of {total} instances ({}%), more than prune.maxRemovalPercent ({}%), {GUARD_TAIL}: they stay \
             configured; restore them in the repository or deconfigure them with a cluster",
            left * 100 / total,
            self.max_removal_percent
        ))
    }
}

/// The instance a deconfigure of `address` would run as: the Fleet's
/// defaults (user, port, shell), no registries or variables wanted, the
/// lifecycle (when the repository has one) in deconfigure form, which
/// removes exactly what the install record holds.
pub fn removal_instance(desired: &Desired, address: &str) -> Option<Instance> {
    let spec = desired.specs.get(&desired.fleet.default_shell)?;
    let removal = Arc::new(NodeSpec {
        registries: BTreeMap::new(),
        environment: BTreeMap::new(),
        lifecycle: spec.lifecycle.as_deref().map(|l| Arc::new(l.for_deconfigure())),
        leaving: true,
        ..(**spec).clone()
    });
    let origin = format!("{address} (left the repository)");
    Some(super::leaving::departing_instance(desired, address.to_owned(), origin, removal))
}

/// Checks each of `addresses` (hosts that left the repository with no Node
/// to drain them), up to `parallel` at once; nothing is written.
pub async fn probe(pool: &Pool, desired: &Desired, addresses: &[String], parallel: usize) -> LeftProbe {
    let context = NodeContext { mode: Some(Mode::Deconfigure), node: None, disrupt: true };
    let mut hosts = Vec::new();
    let mut waiting = addresses.iter();
    let mut running = FuturesUnordered::new();
    loop {
        while running.len() < parallel.max(1) {
            let Some(address) = waiting.next() else { break };
            running.push(check(pool, desired, address, &context));
        }
        let Some(host) = running.next().await else { break };
        hosts.push(host);
    }
    hosts.sort_by(|a: &LeftHost, b| a.address.cmp(&b.address));
    LeftProbe { hosts, listed: desired.instances.len(), max_removal_percent: desired.fleet.max_removal_percent }
}

async fn check(pool: &Pool, desired: &Desired, address: &str, context: &NodeContext) -> LeftHost {
    let Some(instance) = removal_instance(desired, address) else {
        let reason = "the repository has no node settings for the Fleet's default shell".to_owned();
        return LeftHost { address: address.to_owned(), remains: Remains::Unknown { reason } };
    };
    let report = engine::node(pool, &instance, true, context).await;
    let remains = match &report.result {
        NodeResult::Done { operations, .. } if operations.is_empty() => Remains::Gone,
        NodeResult::Done { operations, .. } => {
            Remains::Configured { operations: operations.iter().map(|o| o.operation.headline()).collect() }
        }
        NodeResult::Failed { .. } | NodeResult::Pending => Remains::Unknown { reason: node_line(&report) },
    };
    LeftHost { address: address.to_owned(), remains }
}
