//! Which nodes leave, and whether they may: BYOH Windows Nodes (WMCO's
//! `byoh=true` label) that no listed instance accounts for are
//! deconfigured, unless the mass-removal guard (`prune.maxRemovalPercent`)
//! refuses. Pure.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::Arc;

use crate::cluster::ClusterFacts;
use crate::cluster::deconfigure::Leaving;
use crate::desired::model::{Desired, Instance};
use crate::lifecycle::LifecycleSpec;
use crate::node::NodeSpec;

/// WMCO's label on BYOH Nodes.
pub const BYOH_LABEL: &str = "windowsmachineconfig.openshift.io/byoh";

/// The nodes that leave this round, or why none can be told apart yet.
#[derive(Debug, Default)]
pub struct Departures {
    /// Nodes to deconfigure.
    pub leaving: Vec<Leaving>,
    /// Why no node is deconfigured this round although some may be
    /// leaving (a listed address that did not resolve).
    pub refused: Option<String>,
    /// Leaving nodes winfleet cannot reach (no InternalIP), with why; the
    /// others go on.
    pub unreachable: Vec<(crate::cluster::NodeObs, String)>,
}

/// The BYOH Nodes no listed instance accounts for: not associated with one,
/// and none of their addresses is a listed address or the IPv4 one
/// resolves to. `runtime` gives the lifecycle as this round runs it (the
/// payload's files: what a host WMCO configured has). When any listed address did not resolve, nobody leaves
/// (a DNS failure must not read as a removal).
pub fn departures(
    desired: &Desired,
    facts: &ClusterFacts,
    listed: &[&Instance],
    associated: &BTreeSet<String>,
    resolved: &BTreeMap<String, Result<Ipv4Addr, String>>,
    runtime: impl FnOnce(&LifecycleSpec) -> LifecycleSpec,
) -> Departures {
    let Some(spec) = desired.specs.get(&desired.fleet.default_shell) else { return Departures::default() };
    let Some(lifecycle) = spec.lifecycle.as_deref() else { return Departures::default() };
    let mut known: BTreeSet<String> = listed.iter().map(|i| i.address.to_lowercase()).collect();
    known.extend(desired.instances.keys().map(|a| a.to_lowercase()));
    known.extend(resolved.values().filter_map(|r| r.as_ref().ok()).map(ToString::to_string));
    let leaving_nodes: Vec<_> = facts
        .nodes
        .values()
        .filter(|n| n.labels.get(BYOH_LABEL).is_some_and(|v| v == "true"))
        .filter(|n| !associated.contains(&n.name))
        .filter(|n| !n.addresses.iter().any(|a| known.contains(&a.to_lowercase())))
        .collect();
    if leaving_nodes.is_empty() {
        return Departures::default();
    }
    let unresolved: Vec<&str> = listed
        .iter()
        .filter(|i| resolved.get(&i.address).is_some_and(Result::is_err))
        .map(|i| i.address.as_str())
        .collect();
    if !unresolved.is_empty() {
        let refused = format!(
            "no node is deconfigured while listed addresses do not resolve ({}): their Nodes cannot be told apart \
             from nodes that left",
            unresolved.join(", ")
        );
        return Departures { refused: Some(refused), ..Departures::default() };
    }
    let removal = Arc::new(NodeSpec {
        registries: BTreeMap::new(),
        environment: BTreeMap::new(),
        lifecycle: Some(Arc::new(runtime(lifecycle).for_deconfigure())),
        leaving: true,
        ..(**spec).clone()
    });
    let mut departures = Departures::default();
    for node in leaving_nodes {
        let Some(ip) = internal_ip(&node.object) else {
            departures.unreachable.push((node.clone(), "the Node has no InternalIP to reach it at".to_owned()));
            continue;
        };
        let origin = format!("Node {} (left the repository)", node.name);
        let instance = departing_instance(desired, ip.clone(), origin, Arc::clone(&removal));
        departures.leaving.push(Leaving { instance, node: node.clone() });
    }
    departures
}

fn internal_ip(node: &serde_json::Value) -> Option<String> {
    node.pointer("/status/addresses")?
        .as_array()?
        .iter()
        .find(|a| a["type"] == "InternalIP")
        .and_then(|a| a["address"].as_str())
        .map(str::to_owned)
}

/// The mass-removal guard: more than `max_percent` of the instances (those
/// listed and those leaving) leaving at once is refused as a whole. The
/// offline plan says the same ([`crate::plan::guard`]).
pub use crate::plan::guard::removal_guard as guard;

/// A host that left the repository as its deconfigure runs: the Fleet's
/// defaults (user, port, shell), no labels, annotations or taints, `spec`
/// (the removal spec), and `origin` saying where it was found.
pub(super) fn departing_instance(desired: &Desired, address: String, origin: String, spec: Arc<NodeSpec>) -> Instance {
    Instance {
        address,
        username: desired.fleet.default_username.clone().unwrap_or_else(|| "Administrator".to_owned()),
        port: desired.fleet.default_port,
        shell: desired.fleet.default_shell,
        labels: Default::default(),
        annotations: Default::default(),
        taints: Vec::new(),
        origin,
        spec,
    }
}

#[cfg(test)]
mod tests {
    use super::guard;

    #[test]
    fn the_guard_refuses_more_than_the_limit_and_an_empty_list() {
        assert_eq!(guard(10, 0, 0), None);
        assert_eq!(guard(2, 2, 50), None, "exactly the limit is allowed");
        assert!(guard(1, 2, 50).unwrap().contains("deconfigure 2 of 3 instances (66%)"));
        assert!(guard(0, 3, 50).is_some(), "an emptied instance list is a mass removal");
        assert_eq!(guard(0, 3, 100), None);
    }
}
