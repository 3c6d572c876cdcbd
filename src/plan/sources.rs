//! The offline plan's word on `spec.sources` (issue 27, item 4): what the
//! Fleet takes from the cluster cannot be shown without it.

use crate::desired::kinds::fleet::ConfigSource;
use crate::desired::model::Desired;

/// A plan warning when the head follows the cluster's Proxy or mirror sets.
pub fn note(head: &Desired) -> Option<String> {
    let fleet = &head.fleet;
    let what = match (fleet.proxy_source, fleet.mirrors_source) {
        (ConfigSource::Cluster, ConfigSource::Cluster) => {
            "the proxy variables and the registries' hosts.toml files come from the cluster's Proxy cluster and \
             ImageDigestMirrorSets/ImageTagMirrorSets"
        }
        (ConfigSource::Cluster, _) => "the proxy variables come from the cluster's Proxy cluster",
        (_, ConfigSource::Cluster) => {
            "the registries' hosts.toml files come from the cluster's ImageDigestMirrorSets/ImageTagMirrorSets"
        }
        _ => return None,
    };
    Some(format!(
        "{what} (the Fleet's spec.sources), read each round: they cannot be shown offline (a change of these \
         files in this plan is the repository's side only); winfleet plan --live shows them"
    ))
}
