//! One batch of a round's nodes configured and joined: the node round (the
//! cluster's prerequisites holding joins), the first reboot of the hosts
//! that enable the Containers feature, the Machines that wait rather than
//! fail, then the joins (previewed in a dry run). A round runs one batch of
//! everything it observed, and one more per group of Machines that got
//! their address while it ran (`late_machines`).

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::{Mutex, PoisonError};

use crate::cluster::ClusterFacts;
use crate::cluster::approve::CsrReport;
use crate::cluster::connect::Cluster;
use crate::cluster::events::Events;
use crate::cluster::join::{self, JoinOptions, JoinReport};
use crate::cluster::prerequisites::Prerequisites;
use crate::desired::model::Instance;
use crate::engine::NodeContext;
use crate::engine::host::Host;
use crate::engine::report::NodeReport;
use crate::ssh::Pool;

use super::prerequisites::{self, Held};
use super::{Options, lifecycle, machines, reboot_first};

/// What every batch of a round shares.
pub(super) struct Stage<'a, H> {
    pub(super) cluster: &'a Cluster,
    pub(super) events: &'a Events,
    pub(super) pool: &'a Pool,
    pub(super) host: &'a H,
    pub(super) options: &'a Options,
    /// Checked once a round, before its first batch.
    pub(super) prerequisites: &'a Prerequisites,
    /// A services manifest is in force: nodes in Join mode are joined.
    pub(super) lifecycle_on: bool,
    /// Every batch's instances → their observed host names: one map for
    /// the round's CSR approval (`join::Shared::hosts`).
    pub(super) hosts: Mutex<BTreeMap<String, String>>,
    /// The CSRs whose near match or refusal the round's passes already
    /// said, for all its batches (`join::Shared::reported`).
    pub(super) reported: tokio::sync::Mutex<BTreeSet<String>>,
}

/// One batch's nodes and what the round knows of them.
pub(super) struct Nodes<'a, 'b> {
    pub(super) instances: &'b [&'a Instance],
    /// The first `byoh` instances are listed hosts, the rest Machines.
    pub(super) byoh: usize,
    pub(super) contexts: &'b BTreeMap<String, NodeContext>,
    pub(super) resolved: &'b BTreeMap<String, Result<Ipv4Addr, String>>,
    pub(super) facts: &'b ClusterFacts,
    /// The addresses of the Machines among `instances`.
    pub(super) machine_addresses: &'b BTreeSet<String>,
}

/// What a batch did.
#[derive(Default)]
pub(super) struct Batch {
    pub(super) nodes: Vec<NodeReport>,
    /// Machines that wait rather than fail, with the reason.
    pub(super) waiting: BTreeMap<String, String>,
    pub(super) joins: Vec<JoinReport>,
    pub(super) csrs: Vec<CsrReport>,
    /// The nodes the prerequisites held (their joins are in `joins`).
    pub(super) held: Held,
}

impl Batch {
    /// Adds another batch of the same round.
    pub(super) fn merge(&mut self, other: Batch) {
        self.nodes.extend(other.nodes);
        self.waiting.extend(other.waiting);
        self.joins.extend(other.joins);
        // A CSR two batches' passes both saw (a near match, a refusal) is
        // said once.
        let seen: BTreeSet<String> = self.csrs.iter().map(|c| c.csr.clone()).collect();
        self.csrs.extend(other.csrs.into_iter().filter(|c| !seen.contains(&c.csr)));
        self.held.merge(other.held);
    }
}

/// Configures and joins one batch (`on_node` sees each node's report).
pub(super) async fn run<H: Host>(
    stage: &Stage<'_, H>,
    batch: &Nodes<'_, '_>,
    mut on_node: impl FnMut(&NodeReport),
) -> Batch {
    let (pool, options) = (stage.pool, stage.options);
    let (nodes, mut held) =
        prerequisites::node_round(pool, batch.instances, options, batch.contexts, stage.prerequisites, &mut on_node)
            .await;
    // Hosts with no Node that enabled the Containers feature reboot now and
    // go on with their configuration (reboot_first.rs).
    let nodes =
        reboot_first::reboot_unjoined((pool, stage.host), batch.instances, options, batch.contexts, nodes, on_node)
            .await;
    let (nodes, waiting) =
        machines::split_waiting(nodes, batch.machine_addresses, batch.facts, &pool.public_key_hash());
    let mut done = Batch { nodes, waiting, ..Batch::default() };
    if stage.lifecycle_on {
        // Machines' host names too: their kubelets' CSRs are approved by
        // exact host name, as a BYOH host's are.
        let hosts = lifecycle::host_names(batch.instances, &done.nodes);
        stage.hosts.lock().unwrap_or_else(PoisonError::into_inner).extend(hosts.clone());
        let (candidates, not_started) =
            lifecycle::candidates(batch.instances, batch.contexts, &done.nodes, batch.resolved, batch.byoh);
        let held_joins = std::mem::take(&mut held.joins);
        let joins = if options.dry_run {
            candidates.iter().map(|c| lifecycle::preview(c, batch.contexts, &hosts)).collect()
        } else {
            let shared = join::Shared {
                client: &stage.cluster.client,
                events: stage.events,
                pool,
                hosts: &stage.hosts,
                reported: &stage.reported,
                key_hash: &pool.public_key_hash(),
                options: JoinOptions { max_parallel: options.max_parallel, ..options.join },
                stop: &options.stop,
            };
            let (joins, csrs) = join::join_all(&shared, candidates).await;
            done.csrs = csrs;
            joins
        };
        done.joins = joins.into_iter().chain(not_started).chain(held_joins).collect();
    }
    done.held = held;
    done
}
