//! TEMPORARY stub of the services manifest model (replaced by the real
//! module from branch helper/services at merge).

use serde_json::Value;

/// The services manifest in force.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServicesManifest {
    /// ConfigMap name.
    pub name: String,
    /// File.
    pub origin: String,
    /// Services by priority.
    pub services: Vec<ServiceDef>,
    /// sha256 of canonical.
    pub digest: String,
    /// Canonical JSON.
    pub canonical: String,
}

/// One service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceDef {
    /// Name.
    pub name: String,
    /// Command.
    pub command: String,
    /// Node variables.
    pub node_variables: Vec<NodeVariable>,
    /// Pre-scripts.
    pub pre_scripts: Vec<PreScript>,
    /// Dependencies.
    pub dependencies: Vec<String>,
    /// Bootstrap.
    pub bootstrap: bool,
    /// Priority.
    pub priority: u32,
}

/// A node variable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeVariable {
    /// Name.
    pub name: String,
    /// Path.
    pub path: NodeJsonPath,
}

/// A pre-script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreScript {
    /// Variable.
    pub variable: Option<String>,
    /// Script.
    pub path: String,
    /// Node args.
    pub node_args: Vec<NodeVariable>,
}

/// A JSONPath template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeJsonPath {
    text: String,
}

impl NodeJsonPath {
    /// Parses.
    pub fn parse(text: &str) -> Result<Self, String> {
        Ok(Self { text: text.to_owned() })
    }

    /// Evaluates (stub: `{.metadata.name}` or a literal).
    pub fn evaluate(&self, node: &Value) -> Result<String, String> {
        if self.text == "{.metadata.name}" {
            return node
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| "missing".to_owned());
        }
        Ok(self.text.clone())
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}
