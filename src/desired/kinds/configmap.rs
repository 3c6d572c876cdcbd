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
    /// The keys of `data` in the order the file lists them (filled in by
    /// the loader; `data` itself is sorted), so a duplicate is reported at
    /// its second appearance, not its second in sort order.
    #[serde(skip)]
    pub order: Vec<String>,
}

impl InstancesConfigMap {
    /// The entries of `data` in file order (sorted when the order is unknown).
    pub fn entries(&self) -> impl Iterator<Item = (&String, &String)> {
        let known = self.order.len() == self.data.len();
        let ordered = known.then(|| self.order.iter().filter_map(|k| self.data.get_key_value(k)));
        let sorted = (!known).then(|| self.data.iter());
        ordered.into_iter().flatten().chain(sorted.into_iter().flatten())
    }
}
