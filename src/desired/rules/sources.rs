//! `spec.sources` (issue 27, item 4): with `cluster`, winfleet follows the
//! cluster's own Proxy or mirror sets, so a repository that also holds them
//! would say two things at once: each such document is an error.

use crate::desired::kinds::fleet::{ConfigSource, Fleet};
use crate::desired::model::FleetSettings;
use crate::desired::{Doc, Documents};
use crate::diagnostic::Diagnostic;

/// Reports every Proxy and mirror set the repository holds for a source
/// the Fleet says is the cluster's.
pub fn check(docs: &Documents, fleet: &FleetSettings, fleet_doc: Option<&Doc<Fleet>>, out: &mut Vec<Diagnostic>) {
    let fleet_file = fleet_doc.map_or("the Fleet", |d| d.path.as_str());
    let message = |kind: &str, field: &str| {
        format!(
            "{fleet_file} sets spec.sources.{field} to cluster: winfleet follows the cluster's own {kind} objects, \
             so the repository must hold none; remove this {kind}, or set spec.sources.{field} to repository"
        )
    };
    if fleet.proxy_source == ConfigSource::Cluster {
        out.extend(docs.proxies.iter().map(|d| d.error("/kind", message("Proxy", "proxy"))));
    }
    if fleet.mirrors_source == ConfigSource::Cluster {
        out.extend(docs.digest_mirrors.iter().map(|d| d.error("/kind", message("ImageDigestMirrorSet", "mirrors"))));
        out.extend(docs.tag_mirrors.iter().map(|d| d.error("/kind", message("ImageTagMirrorSet", "mirrors"))));
    }
}
