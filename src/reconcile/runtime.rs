//! The instances as a round runs them, from the instances listed (and the
//! Machines taken): the cluster's Proxy and mirror sets followed where the
//! Fleet says so, the pull secret's credentials in the mirrors' files, and
//! each dialect's lifecycle at runtime (payload, cluster material, the
//! cluster's no-proxy entries). One recipe per round, so the Machines that
//! join the round late (`late_machines`) are rendered as the others were.
//! Pure.

use crate::cluster::pull_secret;
use crate::cluster::sources::{self, ClusterConfig, follows_cluster};
use crate::desired::model::{Desired, Instance};
use crate::lifecycle::PayloadState;
use crate::lifecycle::material::ClusterMaterial;
use crate::render::pull_secret::PullSecret;

use super::lifecycle;

/// What a round renders its instances from.
pub(super) struct Runtime<'a> {
    /// The repository's revision.
    pub(super) desired: &'a Desired,
    /// The cluster's Proxy and mirror sets (read this round, or last read),
    /// when the Fleet follows them.
    pub(super) config: Option<ClusterConfig>,
    /// The cluster's pull secret, when it was read.
    pub(super) secret: Option<PullSecret>,
    /// `--payload-dir`.
    pub(super) payload: &'a PayloadState,
    /// The cluster material, when the lifecycle is managed.
    pub(super) material: Option<&'a Result<ClusterMaterial, String>>,
    /// The cluster Proxy's `status.noProxy`.
    pub(super) no_proxy: Option<String>,
}

impl Runtime<'_> {
    /// `listed` as this round runs them; `Err` says why no node can be
    /// rendered (a Fleet that follows the cluster, whose objects are unread
    /// or unusable).
    pub(super) fn instances(&self, listed: &[&Instance]) -> Result<Vec<Instance>, String> {
        let followed = match follows_cluster(self.desired) {
            true => Some(sources::follow(self.desired, listed, self.config.as_ref())?),
            false => None,
        };
        let listed: Vec<&Instance> =
            followed.as_ref().map_or_else(|| listed.to_vec(), |f| f.instances.iter().collect());
        let registries = followed.as_ref().map_or(&self.desired.registries, |f| &f.registries);
        let rendered = self.secret.as_ref().map(|s| pull_secret::rendered(&listed, registries, s));
        let listed: Vec<&Instance> = rendered.as_ref().map_or(listed, |r| r.iter().collect());
        Ok(lifecycle::runtime_instances(&listed, self.payload, self.material, self.no_proxy.as_deref()))
    }
}
