//! Which instances a round without a new commit covers: pure decisions on
//! the pending work and the revision in force (the round itself is in
//! [`crate::daemon::round`]).

use std::collections::BTreeSet;

use crate::daemon::triggers::schedule::Work;
use crate::desired::kinds::fleet::DriftMode;
use crate::desired::model::{Desired, Instance};

/// What a round of retries and cluster changes covers.
#[derive(Debug, PartialEq)]
pub enum NodesScope<'a> {
    /// The whole fleet: an address is no listed instance (a Machine-backed
    /// node, or a new Node whose instance is a DNS name), and the whole
    /// fleet round finds and associates it.
    Fleet,
    /// These instances.
    Nodes {
        /// Only re-checked (a dry run): in warn mode, nodes already at the
        /// applied revision, whose retry must not correct their drift.
        checks: Vec<&'a Instance>,
        /// Brought to the applied revision.
        catch_up: Vec<&'a Instance>,
    },
}

/// The scope of a round of `work.retry` and `work.cluster`;
/// `at_revision(address)` says whether an instance is already at the
/// applied revision.
pub fn nodes<'a>(work: &Work, desired: &'a Desired, at_revision: impl Fn(&str) -> bool) -> NodesScope<'a> {
    let listed = |a: &String| desired.instances.contains_key(a);
    let unknown_retry = !work.retry.iter().all(listed);
    let unmatched_cluster = work.cluster.iter().any(|addresses| !addresses.iter().any(listed));
    if unknown_retry || unmatched_cluster {
        return NodesScope::Fleet;
    }
    let wanted: BTreeSet<&str> = work.retry.iter().chain(work.cluster.iter().flatten()).map(String::as_str).collect();
    let (checks, catch_up) = desired
        .instances
        .values()
        .filter(|i| wanted.contains(i.address.as_str()))
        .partition(|i| desired.fleet.drift_mode == DriftMode::Warn && at_revision(&i.address));
    NodesScope::Nodes { checks, catch_up }
}

/// The instances of a whole-fleet round: a drift check leaves out nodes
/// waiting out their back-off, unless their retry is part of this work; a
/// new commit covers every node.
pub fn fleet<'a>(
    desired: &'a Desired,
    new_commit: bool,
    work: &Work,
    backing_off: impl Fn(&str) -> bool,
) -> Vec<&'a Instance> {
    let included = |i: &&Instance| new_commit || work.retry.contains(&i.address) || !backing_off(&i.address);
    desired.instances.values().filter(included).collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use super::*;
    use crate::desired::model::FleetSettings;
    use crate::node::NodeSpec;
    use crate::vocab::Shell;

    fn desired(addresses: &[&str], drift_mode: DriftMode) -> Desired {
        let spec = Arc::new(NodeSpec::empty(Shell::Posix));
        let instance = |a: &str| Instance {
            address: a.into(),
            username: "u".into(),
            port: 22,
            shell: Shell::Posix,
            labels: Default::default(),
            annotations: Default::default(),
            taints: Vec::new(),
            origin: "instances.yaml".into(),
            spec: Arc::clone(&spec),
        };
        Desired {
            fleet: FleetSettings { drift_mode, ..FleetSettings::default() },
            instances: addresses.iter().map(|a| ((*a).to_owned(), instance(a))).collect(),
            machine_sets: BTreeMap::new(),
            registries: Vec::new(),
            mirror_sets: BTreeMap::new(),
            specs: BTreeMap::new(),
            services: None,
            proxy: None,
        }
    }

    fn addresses(instances: &[&Instance]) -> Vec<String> {
        instances.iter().map(|i| i.address.clone()).collect()
    }

    fn work(retry: &[&str], cluster: &[&[&str]]) -> Work {
        Work {
            retry: retry.iter().map(|a| (*a).to_owned()).collect(),
            cluster: cluster.iter().map(|c| c.iter().map(|a| (*a).to_owned()).collect()).collect(),
            ..Work::default()
        }
    }

    #[test]
    fn retries_and_new_nodes_of_listed_instances_are_run_alone() {
        let d = desired(&["10.0.0.1", "10.0.0.2", "10.0.0.3"], DriftMode::Correct);
        let w = work(&["10.0.0.1"], &[&["win-3", "10.0.0.3"]]);
        let NodesScope::Nodes { checks, catch_up } = nodes(&w, &d, |_| true) else { panic!("a node round") };
        assert!(checks.is_empty(), "correct mode never only re-checks");
        assert_eq!(addresses(&catch_up), ["10.0.0.1", "10.0.0.3"]);
    }

    #[test]
    fn an_address_no_instance_lists_needs_the_whole_fleet() {
        let d = desired(&["10.0.0.1"], DriftMode::Correct);
        assert_eq!(nodes(&work(&["10.9.9.9"], &[]), &d, |_| false), NodesScope::Fleet, "a Machine node's retry");
        let both = work(&[], &[&["10.0.0.1"], &["machine-1", "10.9.9.9"]]);
        assert_eq!(nodes(&both, &d, |_| false), NodesScope::Fleet, "one unmatched object is enough");
    }

    #[test]
    fn in_warn_mode_nodes_at_the_revision_are_only_re_checked() {
        let d = desired(&["10.0.0.1", "10.0.0.2"], DriftMode::Warn);
        let w = work(&["10.0.0.1", "10.0.0.2"], &[]);
        let NodesScope::Nodes { checks, catch_up } = nodes(&w, &d, |a| a == "10.0.0.1") else { panic!() };
        assert_eq!((addresses(&checks), addresses(&catch_up)), (vec!["10.0.0.1".into()], vec!["10.0.0.2".into()]));
    }

    #[test]
    fn a_drift_check_leaves_out_nodes_backing_off_unless_retried_and_a_commit_covers_all() {
        let d = desired(&["10.0.0.1", "10.0.0.2", "10.0.0.3"], DriftMode::Correct);
        let w = work(&["10.0.0.2"], &[]);
        let off = |a: &str| a != "10.0.0.1";
        assert_eq!(addresses(&fleet(&d, false, &w, off)), ["10.0.0.1", "10.0.0.2"]);
        assert_eq!(addresses(&fleet(&d, true, &w, off)), ["10.0.0.1", "10.0.0.2", "10.0.0.3"]);
    }
}
