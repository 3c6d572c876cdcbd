//! One service of WMCO's manifest as a node runs it: its command with
//! variable names, its pre-scripts, dependencies and start order, and what
//! it writes itself that a deconfigure removes. Pure.

use super::DESCRIPTION_PREFIX;
use crate::lifecycle::manifest::{NodeVariable, PreScript, ServiceDef};

/// One service of the manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceSpec {
    /// Service name.
    pub name: String,
    /// Command line with its variable names.
    pub command: String,
    /// Variables taken from the Node object.
    pub node_variables: Vec<NodeVariable>,
    /// Scripts run before the service starts; those with a variable give
    /// its value (run during observation: they must not change the node).
    pub pre_scripts: Vec<PreScript>,
    /// Services it depends on.
    pub dependencies: Vec<String>,
    /// Started before the Node exists.
    pub bootstrap: bool,
    /// Start order.
    pub priority: u32,
}

impl ServiceSpec {
    /// Whether the service needs the Node (node variables, or pre-scripts
    /// with node arguments).
    pub fn needs_node(&self) -> bool {
        !self.node_variables.is_empty() || self.pre_scripts.iter().any(|p| !p.node_args.is_empty())
    }

    /// What the service writes itself that winfleet removes when the node
    /// leaves: the files named by `--kubeconfig` (the kubelet's client
    /// credentials) and the directories named by `--cert-dir` (the
    /// kubelet's certificates: only its `kubelet-*.pem` files go). Recorded
    /// with the service, so a later manifest cannot forget them.
    pub fn state(&self) -> (Vec<&str>, Vec<&str>) {
        let (mut files, mut cert_dirs) = (Vec::new(), Vec::new());
        let mut words = self.command.split_whitespace();
        while let Some(word) = words.next() {
            let (flag, value) = match word.split_once('=') {
                Some((f, v)) => (f, Some(v)),
                None => (word, None),
            };
            let out = match flag {
                "--kubeconfig" => &mut files,
                "--cert-dir" => &mut cert_dirs,
                _ => continue,
            };
            let value = value.or_else(|| words.next()).unwrap_or_default();
            let value = value.trim_matches(['"', '\'']).trim_end_matches(['\\', '/']);
            if !value.is_empty() && !out.contains(&value) {
                out.push(value);
            }
        }
        (files, cert_dirs)
    }

    /// The description it carries on nodes.
    pub fn description(&self) -> String {
        format!("{DESCRIPTION_PREFIX} {}", self.name)
    }
}

impl From<&ServiceDef> for ServiceSpec {
    fn from(def: &ServiceDef) -> Self {
        Self {
            name: def.name.clone(),
            command: def.command.clone(),
            node_variables: def.node_variables.clone(),
            pre_scripts: def.pre_scripts.clone(),
            dependencies: def.dependencies.clone(),
            bootstrap: def.bootstrap,
            priority: def.priority,
        }
    }
}
