//! Hosts left configured (issue 27 item 7): an instance that left the
//! repository with no Node to drain it keeps its `instances/<address>.yaml`,
//! Waiting and stalled with reason `LeftConfigured`, until it is listed
//! again or nothing winfleet installed is left on the host. The status
//! branch is the memory: the previous status names the hosts, the round's
//! [`LeftProbe`] says what is left on each. Pure.

use crate::reconcile::left_configured::{GUARD_TAIL, LeftProbe, REASON, Remains};

use super::model::{ConditionType, ErrorClass, InstancePhase, Status};
use super::redact::redact;
use super::render::{instance_from, whole_seconds};
use super::summary::instance_counts;
use super::verdict::Verdict;

/// The `Ready` reason of a host left configured.
pub const LEFT_CONFIGURED: &str = "LeftConfigured";

/// The hosts to check this round: instances of the previous status no
/// longer `listed`, with no Node (a Node's deconfigure is the cluster's
/// part), that winfleet processed at least once.
pub fn candidates(previous: &Status, listed: &[String]) -> Vec<String> {
    previous
        .instances
        .values()
        .filter(|i| !listed.contains(&i.address) && i.node.is_none())
        .filter(|i| i.phase != InstancePhase::Unknown || i.applied_revision.is_some())
        .map(|i| i.address.clone())
        .collect()
}

/// Whether `status` records the instance as left configured.
pub fn is_left(status: &super::model::InstanceStatus) -> bool {
    status.condition(ConditionType::Ready).is_some_and(|c| c.reason == LEFT_CONFIGURED)
}

/// Adds the hosts left configured to `status` (just rendered from
/// `previous`): those `probe` found configured or could not check; with no
/// probe this round, those `previous` had. The counts follow, and the
/// mass-removal guard counts them when the round's cluster part said
/// nothing.
pub fn keep(
    previous: &Status,
    status: &mut Status,
    probe: Option<&LeftProbe>,
    listed: &[String],
    now: jiff::Timestamp,
    secrets: &[String],
) {
    let now = whole_seconds(now);
    let mut left = Vec::new();
    match probe {
        Some(probe) => {
            for host in probe.hosts.iter().filter(|h| !listed.contains(&h.address)) {
                let message = match &host.remains {
                    Remains::Gone => continue,
                    Remains::Configured { operations } => {
                        format!("{REASON} (what a deconfigure removes: {})", operations.join("; "))
                    }
                    Remains::Unknown { reason } => {
                        format!("{REASON} (not checked this round: {})", redact(reason, secrets))
                    }
                };
                left.push((host.address.clone(), message));
            }
        }
        None => {
            let kept = previous.instances.values().filter(|i| is_left(i) && !listed.contains(&i.address));
            for instance in kept {
                status.instances.insert(instance.address.clone(), instance.clone());
            }
        }
    }
    for (address, message) in left {
        let before = previous.instances.get(&address);
        let verdict = Verdict::error(InstancePhase::Waiting, LEFT_CONFIGURED, message, ErrorClass::Waiting).stalled();
        let instance = instance_from(before, &address, verdict, None, now);
        status.instances.insert(address, instance);
    }
    status.summary.instances = instance_counts(&status.instances);
    let Some(probe) = probe else { return };
    // A refusal of the cluster's deconfigure stands; this one is redone.
    if status.summary.deconfigure_refused.as_deref().is_some_and(|r| r.contains(GUARD_TAIL)) {
        status.summary.deconfigure_refused = None;
    }
    if status.summary.deconfigure_refused.is_none() {
        status.summary.deconfigure_refused = probe.guard();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::left_configured::LeftHost;
    use crate::status::model::InstanceStatus;

    fn status(entries: &[(&str, InstancePhase, Option<&str>)]) -> Status {
        let mut status = Status::default();
        for (address, phase, node) in entries {
            let instance = InstanceStatus {
                address: (*address).to_owned(),
                phase: *phase,
                node: node.map(str::to_owned),
                ..InstanceStatus::default()
            };
            status.instances.insert((*address).to_owned(), instance);
        }
        status
    }

    fn probe(hosts: &[(&str, Remains)], listed: usize) -> LeftProbe {
        let hosts = hosts.iter().map(|(a, r)| LeftHost { address: (*a).to_owned(), remains: r.clone() }).collect();
        LeftProbe { hosts, listed, max_removal_percent: 50 }
    }

    #[test]
    fn candidates_are_unlisted_processed_instances_with_no_node() {
        let previous = status(&[
            ("a", InstancePhase::Ready, None),
            ("b", InstancePhase::Ready, Some("node-b")),
            ("c", InstancePhase::Unknown, None),
            ("d", InstancePhase::Ready, None),
        ]);
        assert_eq!(candidates(&previous, &["d".to_owned()]), vec!["a".to_owned()]);
    }

    #[test]
    fn configured_hosts_are_kept_gone_ones_dropped_and_kept_again_with_no_probe() {
        let previous = status(&[("a", InstancePhase::Ready, None), ("b", InstancePhase::Ready, None)]);
        let configured = Remains::Configured { operations: vec!["- certs.d/quay.io".to_owned()] };
        let now = jiff::Timestamp::UNIX_EPOCH;
        let mut next = Status::default();
        keep(&previous, &mut next, Some(&probe(&[("a", configured), ("b", Remains::Gone)], 0)), &[], now, &[]);
        assert_eq!(next.instances.keys().collect::<Vec<_>>(), ["a"]);
        assert!(is_left(&next.instances["a"]) && next.instances["a"].phase == InstancePhase::Waiting);
        assert_eq!(next.summary.instances.waiting, 1);
        assert!(next.summary.deconfigure_refused.as_deref().is_some_and(|r| r.contains(GUARD_TAIL)));

        let mut after = Status::default();
        keep(&next, &mut after, None, &[], now, &[]);
        assert_eq!(after.instances, next.instances, "no probe this round: kept as it was");
        let mut listed = Status::default();
        keep(&next, &mut listed, None, &["a".to_owned()], now, &[]);
        assert!(listed.instances.is_empty(), "listed again: the render's own entry stands");
    }
}
