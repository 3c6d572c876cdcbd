//! WMCO's services ConfigMap (`windows-services-<version>`, WMCO-SPEC 7.3),
//! accepted verbatim as `oc get configmap windows-services-<v> -o yaml`
//! prints it, server-populated metadata included; and the JSON documents
//! its `data` carries, with WMCO's exact field names (Go's `encoding/json`
//! writes the pre-script arguments as `NodeArgs`, without omitempty, so
//! WMCO's ConfigMaps hold `"NodeArgs":null`).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// The name prefix of every services ConfigMap.
pub const SERVICES_CONFIGMAP_PREFIX: &str = "windows-services-";

/// A services ConfigMap.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ServicesConfigMap {
    /// `v1`.
    pub api_version: String,
    /// `ConfigMap`.
    pub kind: String,
    /// Name `windows-services-<version>`; what a cluster adds is accepted.
    pub metadata: CopiedMeta,
    /// `services`, `files`, and optionally `environmentVars` and
    /// `watchedEnvironmentVars`, each a JSON document in a string.
    #[serde(default)]
    pub data: BTreeMap<String, String>,
    /// WMCO creates it immutable.
    #[serde(default)]
    pub immutable: Option<bool>,
    /// Where `data.services` is written (line, column): set by the loader
    /// from the file's text, as the messages about its services point there.
    #[serde(skip)]
    pub services_at: (usize, usize),
}

/// Metadata of an object copied from a cluster: the fields a person writes,
/// and the ones the API server adds (ignored).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CopiedMeta {
    /// Name.
    pub name: String,
    /// Namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Server-populated; ignored.
    #[serde(default)]
    pub uid: Option<Value>,
    /// Server-populated; ignored.
    #[serde(default)]
    pub resource_version: Option<Value>,
    /// Server-populated; ignored.
    #[serde(default)]
    pub creation_timestamp: Option<Value>,
    /// Server-populated; ignored.
    #[serde(default)]
    pub generation: Option<Value>,
    /// Server-populated; ignored.
    #[serde(default)]
    pub managed_fields: Option<Value>,
    /// Server-populated; ignored.
    #[serde(default)]
    pub owner_references: Option<Value>,
    /// Server-populated; ignored.
    #[serde(default)]
    pub self_link: Option<Value>,
}

/// One service as WMCO writes it (`servicescm.Service`).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ServiceJson {
    /// Service name.
    pub name: String,
    /// The command line (WMCO's JSON name `path`).
    pub path: String,
    /// Variables from the Node object.
    #[serde(default)]
    pub node_variables_in_command: Option<Vec<NodeArgJson>>,
    /// Scripts run before the service starts.
    #[serde(default)]
    pub powershell_pre_scripts: Option<Vec<PreScriptJson>>,
    /// Services it depends on.
    #[serde(default)]
    pub dependencies: Option<Vec<String>>,
    /// Started during bootstrap (before the Node exists).
    pub bootstrap: bool,
    /// Creation order, 0 first.
    pub priority: u32,
}

/// A variable and the JSONPath of its value in the Node object.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeArgJson {
    /// The name as it appears in the command.
    pub name: String,
    /// A JSONPath template over the Node object.
    pub node_object_json_path: String,
}

/// A pre-script.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PreScriptJson {
    /// The variable its output replaces, if any.
    #[serde(default, rename = "variableName")]
    pub variable_name: Option<String>,
    /// The script (a PowerShell command; a shell command on posix nodes).
    pub path: String,
    /// Its node arguments (`null` in WMCO's ConfigMaps when none).
    #[serde(default, rename = "NodeArgs")]
    pub node_args: Option<Vec<NodeArgJson>>,
}

/// A file entry (`servicescm.FileInfo`; WMCO writes none).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FileJson {
    /// Path on the node.
    pub path: String,
    /// Its checksum.
    pub checksum: String,
}
