//! `metadata` as the kinds here accept it: the fields a person writes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Object metadata. Server-populated fields (uid, resourceVersion,
/// managedFields, …) are rejected: the repository holds desired objects, not
/// copies of live ones.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ObjectMeta {
    /// Object name.
    pub name: String,
    /// Namespace, where the kind has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}
