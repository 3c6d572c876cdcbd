//! winfleet's `Fleet`: settings of the repository (docs/config-repository.md; field names are
//! a contract).

use serde::Deserialize;

use super::meta::ObjectMeta;
use crate::vocab::Shell;

/// The Fleet object (at most one per repository; every field optional).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Fleet {
    /// `winfleet.io/v1alpha1`.
    pub api_version: String,
    /// `Fleet`.
    pub kind: String,
    /// Name.
    pub metadata: ObjectMeta,
    /// Settings.
    #[serde(default)]
    pub spec: FleetSpec,
}

/// `spec` of a [`Fleet`].
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FleetSpec {
    /// Change nothing while this commit is in force.
    #[serde(default)]
    pub suspend: bool,
    /// Defaults for instances.
    #[serde(default)]
    pub defaults: Defaults,
    /// containerd `config_path` per shell.
    #[serde(default)]
    pub registries: Registries,
    /// Where the proxy variables live on posix nodes.
    #[serde(default)]
    pub environment: Environment,
    /// Rollout limits.
    #[serde(default)]
    pub rollout: Rollout,
    /// Prune guard.
    #[serde(default)]
    pub prune: Prune,
    /// Drift detection.
    #[serde(default)]
    pub drift: Drift,
    /// Where status is written.
    #[serde(default)]
    pub status: Status,
    /// The pinned node payload.
    #[serde(default)]
    pub payload: PayloadPin,
    /// The services manifest in force and the posix unit directory.
    #[serde(default)]
    pub services: Services,
    /// When set, every node directory above must be one of these or inside
    /// one of them.
    #[serde(default)]
    pub allowed_directories: Vec<String>,
    /// Settings for test labs, never for production.
    #[serde(default)]
    pub lab: Lab,
    /// Where the truth of the proxy and of the mirror sets is.
    #[serde(default)]
    pub sources: Sources,
}

/// `spec.sources`: for the proxy and for the mirror sets separately, where
/// the truth is (issue 27, item 4).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Sources {
    /// The Proxy `cluster`: the repository's (the default) or the cluster's.
    pub proxy: Option<ConfigSource>,
    /// The ImageDigestMirrorSets and ImageTagMirrorSets: the repository's
    /// (the default) or the cluster's.
    pub mirrors: Option<ConfigSource>,
}

/// Where a piece of cluster-wide configuration is read from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ConfigSource {
    /// The repository's objects; differences from the cluster's own objects
    /// are reported (`ClusterDisagrees`), never enforced.
    #[default]
    Repository,
    /// The cluster's own `config.openshift.io/v1` objects, read every round
    /// (as WMCO does); the repository holds none.
    Cluster,
}

/// `spec.lab`: what only a lab needs.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Lab {
    /// Accept loopback instance addresses (127.0.0.0/8, `localhost`): nodes
    /// simulated on the machine that runs winfleet.
    #[serde(default)]
    pub allow_loopback_addresses: bool,
}

/// `spec.payload`: a relative path is relative to the SSH user's home.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PayloadPin {
    /// `sha256:<hex>` of the payload's canonical manifest.
    pub digest: Option<String>,
    /// Where payload files go on posix nodes.
    pub posix_dir: Option<String>,
    /// The Kubernetes version of the payload's kubelet (`v1.37.2`).
    pub kubelet_version: Option<String>,
}

/// `spec.services`: a relative path is relative to the SSH user's home.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Services {
    /// The `windows-services-*` ConfigMap in force (needed when several).
    pub config_map_name: Option<String>,
    /// systemd unit directory on posix nodes.
    pub posix_dir: Option<String>,
}

/// `spec.defaults`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Defaults {
    /// Default SSH user.
    pub username: Option<String>,
    /// Default SSH port.
    pub port: Option<u16>,
    /// Default shell dialect.
    pub shell: Option<Shell>,
}

/// `spec.registries`: a relative path is relative to the SSH user's home.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Registries {
    /// Registries directory on PowerShell nodes.
    pub powershell_dir: Option<String>,
    /// Registries directory on posix nodes.
    pub posix_dir: Option<String>,
}

/// `spec.environment`: a relative path is relative to the SSH user's home.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Environment {
    /// systemd manager drop-in directory on posix nodes.
    pub posix_dir: Option<String>,
}

/// `spec.rollout`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Rollout {
    /// Nodes processed at once.
    pub max_parallel: Option<u32>,
    /// Nodes disrupted (cordoned, rebooting) at once.
    pub max_unavailable: Option<u32>,
}

/// `spec.prune`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Prune {
    /// Refuse to deconfigure more than this share of instances in one commit.
    pub max_removal_percent: Option<u32>,
}

/// `spec.drift`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Drift {
    /// How often nodes are re-observed without a new commit (`10m`, `1h30m`).
    pub interval: Option<String>,
    /// `correct` or `warn`.
    pub mode: Option<DriftMode>,
}

/// What the daemon does about drift.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DriftMode {
    /// Re-apply the desired state.
    Correct,
    /// Report drift, change nothing.
    Warn,
}

/// `spec.status`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Status {
    /// Branch status commits go to.
    pub branch: Option<String>,
    /// Directory of status files (skipped when loading).
    pub path: Option<String>,
}
