//! The node lifecycle's cluster steps after the node round: key rotation,
//! departures (deconfigure, or the mass-removal guard's refusal) and the
//! upgrade rollout. The decisions are made by pure functions
//! ([`keys::plan`], [`leaving::departures`], [`leaving::guard`]); this
//! module runs them or, in a dry run, previews them.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use super::leaving;
use super::{ClusterContext, Options};
use crate::cluster::deconfigure::{self, DeconfigureReport, DeconfigureResult, Leaving};
use crate::cluster::drain::DrainOptions;
use crate::cluster::events::{Events, Reason, Regarding};
use crate::cluster::keys::{self, KeyReport, KeyResult};
use crate::cluster::upgrade::{self, Candidate, UpgradeReport};
use crate::desired::model::{Desired, Instance};
use crate::engine::host::Host;
use crate::engine::report::NodeReport;
use crate::lifecycle::LifecycleSpec;
use crate::ssh::Pool;

/// Key rotation: planned from this round's node reports; written unless a
/// dry run or the round's cluster plan was rejected.
pub(super) async fn rotate_keys(
    ctx: &ClusterContext<'_>,
    pool: &Pool,
    byoh: &[&Instance],
    nodes: &[NodeReport],
    options: &Options,
    writable: bool,
) -> Vec<KeyReport> {
    let key = keys::FleetKey {
        hash: pool.public_key_hash(),
        authorized_key: pool.public_key_line(),
        fingerprint: pool.public_key_fingerprint(),
    };
    let mut inputs = keys::Inputs {
        byoh,
        reports: nodes,
        facts: ctx.facts,
        associations: ctx.associations,
        user_data_error: None,
        max_unavailable: options.rollout.max_unavailable,
    };
    let mut plan = keys::plan(inputs, &key);
    if !options.whole_fleet {
        // Machines are replaced only by rounds that see the whole fleet.
        plan.retain(|k| !matches!(k.result, KeyResult::MachineReplaced { .. }));
    }
    if options.dry_run || !writable {
        return plan;
    }
    // The Secret first: a replacement boots with what it authorizes.
    let gap = if plan.iter().any(|k| matches!(k.result, KeyResult::MachineReplaced { .. })) {
        keys::user_data_gap(&ctx.cluster.client, &key.fingerprint).await
    } else {
        None
    };
    if let Some(gap) = &gap {
        inputs.user_data_error = Some(gap);
        plan = keys::plan(inputs, &key);
    }
    keys::apply(&ctx.cluster.client, ctx.events, ctx.facts, &key, plan).await
}

/// The BYOH Nodes no listed instance accounts for: deconfigured (previewed
/// in a dry run), or all held back with the reason (the guard, an address
/// that did not resolve).
pub(super) async fn departures<H: Host>(
    ctx: &ClusterContext<'_>,
    (pool, host): (&Pool, &H),
    desired: &Desired,
    (byoh, resolved): (&[&Instance], &BTreeMap<String, Result<Ipv4Addr, String>>),
    options: &Options,
    runtime: impl FnOnce(&LifecycleSpec) -> LifecycleSpec,
) -> (Vec<DeconfigureReport>, Option<String>) {
    let associated: BTreeSet<String> = ctx.associations.values().filter_map(|a| a.node().map(str::to_owned)).collect();
    let departures = leaving::departures(desired, ctx.facts, byoh, &associated, resolved, runtime);
    let guard = leaving::guard(byoh.len(), departures.leaving.len(), desired.fleet.max_removal_percent);
    let refused = guard.or(departures.refused);
    let mut reports = match (&refused, options.dry_run) {
        (Some(reason), _) if !departures.leaving.is_empty() => {
            refuse(ctx.events, &departures.leaving, reason, options.dry_run).await
        }
        (_, true) => deconfigure::preview(pool, &departures.leaving).await,
        (_, false) => {
            let teardown = deconfigure::Teardown {
                client: &ctx.cluster.client,
                events: ctx.events,
                pool,
                host,
                parallel: options.rollout.max_unavailable,
                drain: DrainOptions { timeout: options.rollout.drain_timeout, retry: options.rollout.poll },
                stop: &options.stop,
            };
            deconfigure::deconfigure_all(&teardown, &departures.leaving).await
        }
    };
    reports.extend(departures.unreachable.into_iter().map(|(node, reason)| DeconfigureReport {
        node: node.name,
        address: String::new(),
        result: DeconfigureResult::NotStarted { reason },
    }));
    (reports, refused)
}

/// The guard (or an unresolved address) holds every departure back: each
/// leaving node is reported and, outside a dry run, gets an Event.
async fn refuse(events: &Events, leaving: &[Leaving], reason: &str, dry_run: bool) -> Vec<DeconfigureReport> {
    let mut out = Vec::new();
    for l in leaving {
        if !dry_run {
            let regarding = Regarding::Node(&l.node.name, &l.node.uid);
            events.publish(regarding, Reason::DeconfigureRefused, reason.to_owned()).await;
        }
        out.push(DeconfigureReport {
            node: l.node.name.clone(),
            address: l.instance.address.clone(),
            result: DeconfigureResult::NotStarted { reason: reason.to_owned() },
        });
    }
    out
}

/// The upgrade rollout (previewed in a dry run) and the slots it had.
pub(super) async fn upgrades(
    ctx: &ClusterContext<'_>,
    pool: &Pool,
    candidates: Vec<Candidate<'_>>,
    options: &Options,
) -> (Vec<UpgradeReport>, Option<usize>) {
    if candidates.is_empty() {
        return (Vec::new(), None);
    }
    let chosen: BTreeSet<&str> = candidates.iter().map(|c| c.node.name.as_str()).collect();
    let held = ctx.facts.nodes.values().filter(|n| n.in_disruption() && !chosen.contains(n.name.as_str())).count();
    let slots = options.rollout.max_unavailable.max(1).saturating_sub(held);
    if options.dry_run {
        return (upgrade::preview(pool, candidates).await, Some(slots));
    }
    let rollout = upgrade::Rollout {
        client: &ctx.cluster.client,
        events: ctx.events,
        pool,
        max_unavailable: options.rollout.max_unavailable,
        held,
        drain: DrainOptions { timeout: options.rollout.drain_timeout, retry: options.rollout.poll },
        join: options.join,
        stop: &options.stop,
    };
    (upgrade::rollout(&rollout, candidates).await, Some(slots))
}
