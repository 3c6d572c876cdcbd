//! One whole round: the cluster observed, the node engine run, the cluster
//! plan written (after a clean dry run), then the safe reboots. Used by
//! `winfleet apply --once` and `winfleet plan --live` (a dry run), and by
//! the daemon later.
//!
//! Order, and why:
//! 1. Observe the cluster (read only). A failure skips the cluster part,
//!    reboots included; node files still converge over SSH.
//! 2. Append the cluster Proxy's `status.noProxy` to NO_PROXY (decision 8).
//! 3. Associate instances with Nodes by IPv4; plan MachineSets and Node
//!    metadata (pure).
//! 4. Dry-run every cluster write; any rejection aborts the cluster part
//!    before anything is written.
//! 5. The node engine (SSH, up to maxParallel at once); then the hosts with
//!    no Node that must reboot before they are configured (the Containers
//!    feature) are rebooted and run again ([`reboot_first`]), then the joins
//!    (one batch: [`configure`]). Machines that get their address
//!    meanwhile are configured and joined beside them ([`late_machines`]).
//! 6. The cluster writes, then the rollout of the nodes that owe a reboot,
//!    at most maxUnavailable at a time.
//!
//! - [`report`]: the round's report and its text and JSON forms.

mod changes;
mod cluster_text;
mod configure;
mod late_machines;
mod leaving;
pub mod left_configured;
mod lifecycle;
pub mod machines;
#[cfg(test)]
mod machines_tests;
mod machines_text;
mod markdown;
mod prerequisites;
mod reboot_first;
mod reboots;
pub mod report;
mod runtime;
mod sources;
mod sources_text;
mod upgrades_text;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use crate::cluster::apply as cluster_apply;
use crate::cluster::associate::{Association, associate, resolve_all};
use crate::cluster::connect::Cluster;
use crate::cluster::events::{Backlog, Events, Reason, Regarding};
use crate::cluster::join::JoinOptions;
use crate::cluster::machine_failures;
use crate::cluster::material;
use crate::cluster::prerequisites::Kubelet;
use crate::cluster::upgrade::UpgradeResult;
use crate::cluster::user_data;
use crate::lifecycle::{LifecycleSpec, PayloadState};
use tokio_util::sync::CancellationToken;

use crate::cluster::rollout::RolloutOptions;
use crate::cluster::{ClusterFacts, observe};
use crate::desired::model::{Desired, Instance};
use crate::engine::host::Host;
use crate::engine::report::NodeReport;
use crate::engine::{self, NodeContext, RoundOptions};
use crate::ssh::Pool;
use configure::{Nodes, Stage};
use late_machines::Pull;
use machines::Outcomes;
use report::{ClusterReport, RoundReport, Unassociated};
use runtime::Runtime;

/// How a round runs.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Observe and plan only.
    pub dry_run: bool,
    /// Nodes processed at once over SSH.
    pub max_parallel: usize,
    /// The whole fleet (MachineSets included), not a `--nodes` selection.
    pub whole_fleet: bool,
    /// The safe-reboot settings.
    pub rollout: RolloutOptions,
    /// Cancelled when winfleet stops taking work (shutdown, lost
    /// leadership): no further node or reboot starts, running ones finish.
    pub stop: CancellationToken,
    /// The payload (`--payload-dir`) for the node lifecycle.
    pub payload: PayloadState,
    /// How joins run.
    pub join: JoinOptions,
    /// Events the API server could not take yet (the daemon keeps one for
    /// its life; they are published once a round reads the cluster again).
    pub events: Backlog,
}

/// Runs one round over `instances` of `desired`.
pub async fn round<H: Host>(
    cluster: Option<&Cluster>,
    pool: &Pool,
    host: &H,
    desired: &Desired,
    instances: &[&Instance],
    options: &Options,
    mut on_node: impl FnMut(&NodeReport),
) -> RoundReport {
    let Some(cluster) = cluster else {
        if crate::cluster::sources::follows_cluster(desired) {
            return sources::refused(instances, sources::NO_CLUSTER, options.dry_run, None);
        }
        let owned = lifecycle::runtime_instances(instances, &options.payload, None, None);
        let all: Vec<&Instance> = owned.iter().collect();
        let nodes = node_round(pool, &all, options, &BTreeMap::new(), &mut on_node).await;
        let nodes = reboot_first::reboot_unjoined((pool, host), &all, options, &BTreeMap::new(), nodes, on_node).await;
        return RoundReport { dry_run: options.dry_run, nodes, cluster: None };
    };
    let mut report = ClusterReport { api: cluster.url.clone(), ..ClusterReport::default() };
    let events = Events::with_backlog(cluster.client.clone(), options.events.clone());
    let facts = match observe::observe(&cluster.client).await {
        Ok(facts) => {
            report.platform = Some(facts.platform);
            // The API answers again: what it could not take before goes first.
            events.flush().await;
            Some(facts)
        }
        Err(e) => {
            report.error = Some(format!(
                "cannot read the cluster ({}); the cluster part of this round is skipped, node files still converge",
                cluster_apply::api_error(&e)
            ));
            None
        }
    };
    // Machine-backed Windows nodes are part of the fleet too (WMCO
    // configures them alike): their files and proxy converge, and their
    // reboots share the maxUnavailable budget with BYOH nodes.
    let machines = match (&facts, options.whole_fleet) {
        (Some(f), true) => machines::machine_instances(desired, f, instances),
        _ => Vec::new(),
    };
    // A repository with a services manifest manages the lifecycle even with
    // no instance listed (they may all have left).
    let lifecycle_on = desired.specs.values().any(|s| s.lifecycle.is_some())
        || instances.iter().chain(machines.iter().collect::<Vec<_>>().iter()).any(|i| i.spec.lifecycle.is_some());
    let material = match (&facts, lifecycle_on) {
        (Some(_), true) => Some(material::read(&cluster.client, !options.dry_run).await),
        _ => None,
    };
    if let Some(Err(e)) = &material {
        report.material_error = Some(e.clone());
    }
    report.network_note = material.as_ref().and_then(|m| m.as_ref().ok()?.network.as_ref().err().cloned());
    report.exporter_tls_note = material.as_ref().and_then(|m| m.as_ref().ok()?.exporter_tls.as_ref().err().cloned());
    report.worker_ignition = material
        .as_ref()
        .and_then(|m| m.as_ref().ok()?.rendered_worker.as_ref().map(crate::lifecycle::platform_files::describe));
    let no_proxy = facts.as_ref().and_then(|f| f.cluster_no_proxy.as_deref());
    let listed: Vec<&Instance> = instances.iter().copied().chain(&machines).collect();
    // The cluster's Proxy and mirror sets: followed or compared (sources.rs),
    // and its pull secret (read each round, for the mirrors' credentials).
    let config = sources::round((cluster, &events), desired, facts.is_some(), options.dry_run, &mut report).await;
    let secret = crate::cluster::pull_secret::for_round(&cluster.client, facts.is_some()).await;
    let no_proxy = no_proxy.map(str::to_owned);
    let runtime = Runtime { desired, config, secret, payload: &options.payload, material: material.as_ref(), no_proxy };
    let owned = match runtime.instances(&listed) {
        Ok(owned) => owned,
        Err(reason) => return sources::refused(&listed, &reason, options.dry_run, Some(report)),
    };
    let all: Vec<&Instance> = owned.iter().collect();
    let byoh = &all[..instances.len()];
    let Some(facts) = facts else {
        let nodes = node_round(pool, &all, options, &BTreeMap::new(), on_node).await;
        return RoundReport { dry_run: options.dry_run, nodes, cluster: Some(report) };
    };
    let resolved = resolve_all(all.iter().map(|i| i.address.as_str())).await;
    let associations = associate(&resolved, &facts.nodes);
    report.associated =
        associations.iter().filter_map(|(address, a)| Some((address.clone(), a.node()?.to_owned()))).collect();
    report.unassociated = associations
        .iter()
        .filter_map(|(address, a)| match a {
            Association::Unassociated(reason) => {
                Some(Unassociated { address: address.clone(), reason: reason.clone() })
            }
            Association::Node(_) => None,
        })
        .collect();
    let machine_sets = options.whole_fleet.then_some(&desired.machine_sets);
    let mut plan = cluster_apply::plan(byoh.iter().copied(), machine_sets, &facts, &associations);
    // The dry run is sent in a plan too: a plan shows what the API would
    // refuse, and a MachineSet field conflict it finds joins the plan.
    if plan.has_writes() {
        report.rejected = cluster_apply::dry_run(&cluster.client, &mut plan, byoh, &facts.machine_sets).await;
    }
    report.set_plan(&plan);
    let writable = !options.dry_run && report.rejected.is_empty();
    if !options.dry_run && !report.rejected.is_empty() {
        publish_rejections(&events, &report, &facts).await;
    }
    // Cluster writes come right after their dry run, before the SSH round:
    // the Node patches are conditional on the resourceVersion just observed.
    if writable {
        let outcomes = cluster_apply::write(&cluster.client, &events, &plan, &facts, byoh).await;
        report.set_outcomes(outcomes);
    }
    if options.whole_fleet {
        let (key, fingerprint) = (pool.public_key_line(), pool.public_key_fingerprint());
        report.machines.user_data = user_data::reconcile(&cluster.client, &key, &fingerprint, !writable).await;
    }
    let contexts = lifecycle::contexts(&all, &facts, &associations);
    // The cluster's prerequisites (kubelet skew, network): a refusal holds
    // every join and upgrade of this round (reconcile/prerequisites.rs).
    if lifecycle_on {
        let payload = match &options.payload {
            PayloadState::Loaded(payload) => payload.kubelet_version.as_deref(),
            PayloadState::Missing | PayloadState::Failed(_) => None,
        };
        let kubelet = Kubelet { declared: desired.fleet.payload_kubelet_version.as_deref(), payload };
        report.prerequisites = crate::cluster::prerequisites::check(&cluster.client, kubelet).await;
    }
    let machine_addresses: BTreeSet<String> = machines.iter().map(|m| m.address.clone()).collect();
    let stage = Stage {
        cluster,
        events: &events,
        pool,
        host,
        options,
        prerequisites: &report.prerequisites,
        lifecycle_on,
        hosts: Mutex::default(),
        reported: tokio::sync::Mutex::default(),
    };
    let batch = Nodes {
        instances: &all,
        byoh: byoh.len(),
        contexts: &contexts,
        resolved: &resolved,
        facts: &facts,
        machine_addresses: &machine_addresses,
    };
    let on_node = Mutex::new(on_node);
    let first = configure::run(&stage, &batch, |r| late_machines::report_node(&on_node, r));
    let pull = Pull {
        desired,
        listed: instances,
        runtime: &runtime,
        facts: &facts,
        taken: all.iter().map(|i| i.address.clone()).collect(),
        enabled: !options.dry_run && options.whole_fleet && lifecycle_on,
    };
    let (mut done, late) = late_machines::alongside(first, &stage, pull, &on_node).await;
    // The Machines taken late join the rest of the round: their reports,
    // their contexts, and their Machines as read when they were taken.
    let mut facts = facts;
    let mut contexts = contexts;
    let mut late_instances = Vec::new();
    for l in late {
        report.machines.taken_late.extend(l.machines.keys().cloned());
        facts.machines.extend(l.machines);
        contexts.extend(l.contexts);
        late_instances.extend(l.instances);
        done.merge(l.batch);
    }
    let all: Vec<&Instance> = all.iter().copied().chain(&late_instances).collect();
    let (nodes, waiting, held_by_prerequisites) = (done.nodes, done.waiting, done.held);
    if lifecycle_on {
        report.joins = done.joins;
        report.csrs = done.csrs;
    }
    let context = ClusterContext { cluster, events: &events, facts: &facts, associations: &associations };
    report.keys = changes::rotate_keys(&context, pool, byoh, &nodes, options, writable).await;
    if lifecycle_on && options.whole_fleet {
        let runtime = |l: &LifecycleSpec| l.at_runtime(&options.payload, material.as_ref());
        let (deconfigures, refused) =
            changes::departures(&context, (pool, host), desired, (byoh, &resolved), options, runtime).await;
        report.deconfigures = deconfigures;
        report.deconfigure_refused = refused;
    }
    let upgrades = lifecycle::upgrade_candidates(&all, &contexts, &nodes, (&facts, &associations), &report.keys);
    let (upgrades, held_upgrades) = prerequisites::upgrades(upgrades, &report.prerequisites);
    if !options.dry_run {
        let p = (&held_by_prerequisites, held_upgrades.as_slice(), &report.prerequisites);
        prerequisites::publish(&cluster.client, &events, &facts, p).await;
    }
    let (upgrades, slots) = changes::upgrades(&context, pool, upgrades, options).await;
    report.upgrades = upgrades.into_iter().chain(held_upgrades).collect();
    report.upgrade_slots = slots;
    if options.whole_fleet {
        let spec = desired.specs.get(&desired.fleet.default_shell).and_then(|s| s.lifecycle.as_deref());
        let version = spec.map(|l| l.at_runtime(&options.payload, material.as_ref()).version);
        let outcomes = Outcomes {
            nodes: &nodes,
            waiting: &waiting,
            joins: &report.joins,
            upgrades: &report.upgrades,
            version: version.as_deref(),
            replicas: desired
                .machine_sets
                .iter()
                .map(|(name, set)| (name.clone(), set.replicas.and_then(|r| u64::try_from(r).ok())))
                .collect(),
        };
        (report.machines.machines, report.machines.machine_sets) = machines::report(&facts, &outcomes);
        report.machines.health_checks = machines::health_checks(desired, &facts, options);
        if writable {
            for m in &mut report.machines.machines {
                let Some(observed) = facts.machines.get(&m.machine) else { continue };
                let failure = match &m.step {
                    machines::MachineStep::Failed { reason } => Some(reason.as_str()),
                    _ => None,
                };
                m.failed_rounds = machine_failures::record(&cluster.client, &events, observed, failure).await;
            }
        }
    }
    // Nodes an upgrade left out (cordoned, not back) hold reboot slots too.
    let still_disrupted: Vec<String> = report
        .upgrades
        .iter()
        .filter(|u| matches!(&u.result, UpgradeResult::Failed { stage, .. } if stage.leaves_node_out()))
        .map(|u| u.node.clone())
        .collect();
    if !options.dry_run {
        // A rejected plan starts no new reboot, but reboots an earlier round
        // left unfinished are always finished.
        report.reboots = reboots::reboots(&context, host, &all, &nodes, writable, options, &still_disrupted).await;
    }
    // Windows node monitoring follows the Nodes as this round left them.
    crate::cluster::monitoring::keep(&cluster.client, options.dry_run).await;
    RoundReport { dry_run: options.dry_run, nodes, cluster: Some(report) }
}

async fn node_round(
    pool: &Pool,
    instances: &[&Instance],
    options: &Options,
    contexts: &BTreeMap<String, NodeContext>,
    on_node: impl FnMut(&NodeReport),
) -> Vec<NodeReport> {
    let node_options = RoundOptions { dry_run: options.dry_run, max_parallel: options.max_parallel };
    engine::round(pool, instances, node_options, &options.stop, contexts, on_node).await
}

async fn publish_rejections(events: &Events, report: &ClusterReport, facts: &ClusterFacts) {
    for rejection in &report.rejected {
        let note = format!(
            "the round's cluster plan was rejected in its dry run: none of its MachineSet and Node metadata writes \
             was made: {}",
            rejection.outcome
        );
        if let Some(name) = rejection.target.strip_prefix("Node/") {
            let uid = facts.nodes.get(name).map(|n| n.uid.as_str()).unwrap_or_default();
            events.publish(Regarding::Node(name, uid), Reason::DryRunRejected, note).await;
        } else if let Some(name) = rejection.target.strip_prefix("MachineSet/") {
            let uid = facts.machine_sets.get(name).and_then(|o| o.pointer("/metadata/uid")).and_then(|v| v.as_str());
            events.publish(Regarding::MachineSet(name, uid.unwrap_or_default()), Reason::DryRunRejected, note).await;
        }
    }
}

/// What the cluster steps after the node round read of the round.
pub(super) struct ClusterContext<'a> {
    pub(super) cluster: &'a Cluster,
    pub(super) events: &'a Events,
    pub(super) facts: &'a ClusterFacts,
    pub(super) associations: &'a BTreeMap<String, Association>,
}
