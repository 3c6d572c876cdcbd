//! One service of WMCO's manifest ([`ServiceDef`]) as a node runs it:
//! whether it needs the Node, what it writes itself that a deconfigure
//! removes, the description it carries. Pure.

use super::DESCRIPTION_PREFIX;
use crate::lifecycle::manifest::ServiceDef;

/// What a node does with a service of the manifest.
impl ServiceDef {
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
