//! WMCO's `windows-instances` ConfigMap (WMCO-SPEC 3.1): key = address,
//! value = `username=<name>`.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::meta::ObjectMeta;

/// The `windows-instances` ConfigMap.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InstancesConfigMap {
    /// `v1`.
    pub api_version: String,
    /// `ConfigMap`.
    pub kind: String,
    /// Name (`windows-instances`) and namespace.
    pub metadata: ObjectMeta,
    /// Address → `username=<name>`.
    #[serde(default)]
    pub data: BTreeMap<String, String>,
    /// Accepted for objects copied from a cluster; has no effect here.
    #[serde(default)]
    pub immutable: Option<bool>,
}
