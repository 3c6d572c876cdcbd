//! What a node should look like: [`NodeSpec`] and the files in it.
//!
//! A NodeSpec is the same for every node that shares a shell dialect, so
//! nodes hold it behind an `Arc`: ten thousand instances cost one spec each
//! way, and plans can compare specs once per pair instead of once per node.
//!
//! - [`facts`]: what a node was observed to have ([`facts::NodeFacts`]).
//! - [`plan`]: the pure diff of a spec against facts ([`plan::plan_node`]).
//! - [`outcome`]: what an apply script reports per change.
//! - [`prerequisites`]: the Windows build, edition and host name a host needs.

pub mod facts;
pub mod outcome;
pub mod plan;
pub mod prerequisites;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::lifecycle::LifecycleSpec;
use crate::vocab::Shell;
use crate::vocab::file::ManagedFile;

/// The environment variables winfleet manages on every node (WMCO's watched
/// variables, WMCO-SPEC 2.3): present when desired, removed otherwise.
pub const MANAGED_ENVIRONMENT: [&str; 3] = ["HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"];

/// The desired configuration of one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeSpec {
    /// The dialect the node is driven with.
    pub shell: Shell,
    /// containerd's `config_path` (relative = from the SSH user's home).
    pub registries_dir: String,
    /// `hosts.toml` per registry directory name; every other directory in
    /// `registries_dir` must not exist (decision 5).
    pub registries: BTreeMap<String, ManagedFile>,
    /// Desired values of the [`MANAGED_ENVIRONMENT`] variables; a managed
    /// name that is absent here must be unset.
    pub environment: BTreeMap<String, String>,
    /// posix nodes: the systemd manager drop-in directory holding
    /// [`ENVIRONMENT_DROP_IN`] (relative = from the SSH user's home).
    /// PowerShell nodes keep the variables at Machine scope and have none.
    pub environment_dir: Option<String>,
    /// Services whose state is observed (and, later, restarted).
    pub services: Vec<String>,
    /// The node lifecycle (payload, cluster material, services) when the
    /// repository has a services manifest; `None` otherwise.
    pub lifecycle: Option<Arc<LifecycleSpec>>,
    /// The node is being deconfigured: nothing of winfleet's may stay, so
    /// an emptied environment drop-in is removed rather than rewritten
    /// (the reboot it owes is recorded on the Node instead).
    pub leaving: bool,
    /// The Fleet's `prune.maxRemovalPercent`: the largest share of the
    /// node's registry directories one round may remove (unless leaving).
    pub max_removal_percent: u32,
}

impl NodeSpec {
    /// A spec with nothing to manage (tests start from it).
    pub fn empty(shell: Shell) -> NodeSpec {
        NodeSpec {
            shell,
            registries_dir: String::new(),
            registries: BTreeMap::new(),
            environment: BTreeMap::new(),
            environment_dir: None,
            services: Vec::new(),
            lifecycle: None,
            leaving: false,
            max_removal_percent: 50,
        }
    }

    /// This spec with the cluster's own no-proxy entries (the cluster
    /// Proxy's `status.noProxy`) appended to `NO_PROXY` where the
    /// repository's list lacks them (WMCO-SPEC decision 8), so that
    /// cluster-internal traffic never goes through the proxy. `None` when
    /// nothing changes, or when the repository sets no proxy at all.
    pub fn with_cluster_no_proxy(&self, cluster: &str) -> Option<NodeSpec> {
        if !self.environment.contains_key("HTTP_PROXY") && !self.environment.contains_key("HTTPS_PROXY") {
            return None;
        }
        let current = self.environment.get("NO_PROXY").map_or("", String::as_str);
        let have: Vec<String> = current.split(',').map(|e| e.trim().to_ascii_lowercase()).collect();
        let mut entries: Vec<&str> = current.split(',').map(str::trim).filter(|e| !e.is_empty()).collect();
        let before = entries.len();
        for entry in cluster.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            if !have.contains(&entry.to_ascii_lowercase()) && !entries.contains(&entry) {
                entries.push(entry);
            }
        }
        if entries.len() == before {
            return None;
        }
        let mut spec = self.clone();
        let merged = if current.trim().is_empty() {
            entries.join(",")
        } else {
            format!("{},{}", current.trim_end_matches(','), entries[before..].join(","))
        };
        spec.environment.insert("NO_PROXY".into(), merged);
        Some(spec)
    }
}

/// The systemd drop-in that carries the proxy variables on posix nodes.
pub const ENVIRONMENT_DROP_IN: &str = "90-winfleet-environment.conf";

/// The services observed on every node.
pub const OBSERVED_SERVICES: [&str; 2] = ["containerd", "kubelet"];

/// The file inside each registry directory.
pub const HOSTS_TOML: &str = "hosts.toml";

/// The marker winfleet writes in each registry directory it creates
/// (before its hosts.toml): only a marked directory is ever removed, so a
/// registries directory shared with anything else loses nothing of theirs.
pub const REGISTRY_MARKER: &str = ".winfleet-managed";

/// The marker's content, for whoever finds it.
pub const REGISTRY_MARKER_TEXT: &str =
    "winfleet created this registry directory; it removes it when the repository no longer mirrors this registry\n";

/// The directory name of a registry under the registries directory
/// (decision 4): `host_port_` on Windows, where `:` is not a valid file name
/// character and containerd looks there first; `host:port` on posix.
pub fn registry_dir_name(registry: &str, shell: Shell) -> String {
    match (shell, registry.rsplit_once(':')) {
        (Shell::Powershell, Some((host, port))) => format!("{host}_{port}_"),
        _ => registry.to_owned(),
    }
}

/// An environment value as it may be displayed: a password in a proxy URL
/// (`http://user:password@proxy:3128`) is replaced by `<redacted>`.
pub fn display_env_value(value: &str) -> String {
    // Not only clean URLs: a value read from a node may lack the scheme or
    // hold a `/` in the password; everything up to the last `@` is userinfo.
    let start = value.find("://").map_or(0, |i| i + 3);
    let Some(at) = value.rfind('@').filter(|&at| at >= start) else { return value.to_owned() };
    let userinfo = &value[start..at];
    let Some(colon) = userinfo.find(':') else { return value.to_owned() };
    format!("{}{}<redacted>{}", &value[..start], &userinfo[..=colon], &value[at..])
}

#[cfg(test)]
mod tests {
    #[test]
    fn proxy_passwords_are_redacted_for_display() {
        assert_eq!(display_env_value("http://u:s3cret@proxy:3128"), "http://u:<redacted>@proxy:3128");
        assert_eq!(display_env_value("http://u@proxy:3128"), "http://u@proxy:3128");
        assert_eq!(display_env_value("http://proxy:3128"), "http://proxy:3128");
        assert_eq!(display_env_value(".svc,10.0.0.0/16"), ".svc,10.0.0.0/16");
        assert_eq!(display_env_value("u:pw@proxy:3128"), "u:<redacted>@proxy:3128");
        assert_eq!(display_env_value("http://u:p/w@proxy"), "http://u:<redacted>@proxy");
    }

    #[test]
    fn cluster_no_proxy_entries_are_appended_once_and_only_with_a_proxy() {
        let mut spec = NodeSpec::empty(Shell::Posix);
        assert_eq!(spec.with_cluster_no_proxy(".cluster.local,10.0.0.0/16"), None, "no proxy, nothing to add");
        spec.environment.insert("HTTP_PROXY".into(), "http://proxy:3128".into());
        spec.environment.insert("NO_PROXY".into(), "example.com,.CLUSTER.local".into());
        let merged = spec.with_cluster_no_proxy(".cluster.local, 10.0.0.0/16,,example.com,api-int.x").unwrap();
        assert_eq!(merged.environment["NO_PROXY"], "example.com,.CLUSTER.local,10.0.0.0/16,api-int.x");
        assert_eq!(merged.with_cluster_no_proxy(".cluster.local,10.0.0.0/16"), None);
        spec.environment.remove("NO_PROXY");
        assert_eq!(spec.with_cluster_no_proxy("a,b").unwrap().environment["NO_PROXY"], "a,b");
    }

    #[test]
    fn node_paths_use_the_dialect_separator() {
        assert_eq!(node_path(Shell::Powershell, r"C:\k\reg\", &["a.io", "hosts.toml"]), r"C:\k\reg\a.io\hosts.toml");
        assert_eq!(node_path(Shell::Posix, "/etc/c/", &["a.io"]), "/etc/c/a.io");
    }

    use super::*;
    use crate::vocab::file::node_path;

    #[test]
    fn registry_directories_with_ports_follow_the_dialect() {
        assert_eq!(registry_dir_name("r.io:5000", Shell::Powershell), "r.io_5000_");
        assert_eq!(registry_dir_name("r.io:5000", Shell::Posix), "r.io:5000");
        assert_eq!(registry_dir_name("r.io", Shell::Powershell), "r.io");
    }
}
