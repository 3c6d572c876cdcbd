//! winfleet's `WindowsInstanceList`: BYOH instances with per-instance
//! settings (docs/config-repository.md; field names are a contract).

use crate::desired::string_map::StringMap;
use crate::vocab::Shell;
use serde::{Deserialize, Serialize};

use super::meta::ObjectMeta;

/// A list of Bring-Your-Own-Host instances.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WindowsInstanceList {
    /// `winfleet.io/v1alpha1`.
    pub api_version: String,
    /// `WindowsInstanceList`.
    pub kind: String,
    /// Name of the list.
    pub metadata: ObjectMeta,
    /// The instances.
    pub spec: WindowsInstanceListSpec,
}

/// `spec` of a [`WindowsInstanceList`].
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WindowsInstanceListSpec {
    /// The instances, in the order written.
    #[serde(default)]
    pub instances: Vec<InstanceEntry>,
}

/// One instance as written in a [`WindowsInstanceList`].
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InstanceEntry {
    /// DNS name or IPv4 literal.
    pub address: String,
    /// SSH user; defaults to the Fleet's.
    #[serde(default)]
    pub username: Option<String>,
    /// SSH port; defaults to the Fleet's.
    #[serde(default)]
    pub port: Option<u16>,
    /// Shell dialect; defaults to the Fleet's.
    #[serde(default)]
    pub shell: Option<Shell>,
    /// Node labels winfleet manages.
    #[serde(default)]
    pub labels: StringMap,
    /// Node annotations winfleet manages.
    #[serde(default)]
    pub annotations: StringMap,
    /// Node taints winfleet manages.
    #[serde(default)]
    pub taints: Vec<Taint>,
}

/// A node taint.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Taint {
    /// Taint key.
    pub key: String,
    /// Taint value (may be empty).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: TaintEffect,
}

/// The effect of a [`Taint`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
pub enum TaintEffect {
    /// Do not schedule new pods.
    NoSchedule,
    /// Avoid scheduling new pods.
    PreferNoSchedule,
    /// Evict running pods too.
    NoExecute,
}
