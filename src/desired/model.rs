//! The rendered desired state of a valid revision.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::kinds::fleet::{ConfigSource, DriftMode};
use super::kinds::instances::Taint;
use super::string_map::StringMap;
use crate::lifecycle::manifest::ServicesManifest;
use crate::node::NodeSpec;
use crate::render::mirrors::RegistryMirrors;
use crate::vocab::Shell;

/// Everything a valid revision says the fleet should be.
#[derive(Clone, Debug)]
pub struct Desired {
    /// Fleet settings with defaults filled in.
    pub fleet: FleetSettings,
    /// BYOH instances by canonical address (lower-case, no trailing dot).
    pub instances: BTreeMap<String, Instance>,
    /// MachineSets by name.
    pub machine_sets: BTreeMap<String, MachineSetDesired>,
    /// Registry mirror sets, sorted by source registry.
    pub registries: Vec<RegistryMirrors>,
    /// Every IDMS/ITMS `spec` by `Kind/name` (for review warnings: the
    /// Machine Config Operator reacts to these objects, not to hosts.toml).
    pub mirror_sets: BTreeMap<String, Value>,
    /// The node spec per shell dialect; every instance shares one of these.
    pub specs: BTreeMap<Shell, Arc<NodeSpec>>,
    /// The services manifest in force (the node lifecycle), if any.
    pub services: Option<Arc<ServicesManifest>>,
    /// The repository's Proxy `spec`, if it holds one (compared with the
    /// cluster's Proxy).
    pub proxy: Option<Value>,
}

/// One BYOH instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    /// Canonical address (lower-case DNS name without trailing dot, or IPv4).
    pub address: String,
    /// SSH user.
    pub username: String,
    /// SSH port.
    pub port: u16,
    /// Shell dialect.
    pub shell: Shell,
    /// Node labels winfleet manages.
    pub labels: StringMap,
    /// Node annotations winfleet manages.
    pub annotations: StringMap,
    /// Node taints winfleet manages.
    pub taints: Vec<Taint>,
    /// The file that lists it.
    pub origin: String,
    /// What the node should look like.
    pub spec: Arc<NodeSpec>,
}

/// `instances` with their specs rebuilt by `rebuild`. Specs are shared by
/// dialect, so each distinct spec is rebuilt once and the instances that
/// shared it share the rebuilt one.
pub fn with_rebuilt_specs(
    instances: &[&Instance],
    mut rebuild: impl FnMut(&Arc<NodeSpec>) -> Arc<NodeSpec>,
) -> Vec<Instance> {
    let mut rebuilt: HashMap<*const NodeSpec, Arc<NodeSpec>> = HashMap::new();
    instances
        .iter()
        .map(|instance| {
            let spec = rebuilt.entry(Arc::as_ptr(&instance.spec)).or_insert_with(|| rebuild(&instance.spec)).clone();
            Instance { spec, ..(*instance).clone() }
        })
        .collect()
}

/// One MachineSet as the repository says it.
#[derive(Clone, Debug, PartialEq)]
pub struct MachineSetDesired {
    /// Name.
    pub name: String,
    /// Namespace (`openshift-machine-api`).
    pub namespace: String,
    /// Replicas, when set.
    pub replicas: Option<i64>,
    /// Whether an existing MachineSet of that name that winfleet does not
    /// manage may be taken over (`winfleet.io/adopt: "true"`).
    pub adopt: bool,
    /// Whether fields another field manager owns are taken over (a forced
    /// apply) instead of reported as conflicts
    /// (`winfleet.io/force-fields: "true"`).
    pub force_fields: bool,
    /// The whole object, namespace filled in, as it will be applied.
    pub object: Value,
    /// The file that holds it.
    pub origin: String,
}

/// Fleet settings with every default filled in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetSettings {
    /// Default SSH user, if any.
    pub default_username: Option<String>,
    /// Default SSH port.
    pub default_port: u16,
    /// Default shell.
    pub default_shell: Shell,
    /// Registries directory on PowerShell nodes.
    pub powershell_registries_dir: String,
    /// Registries directory on posix nodes.
    pub posix_registries_dir: String,
    /// systemd manager drop-in directory for the proxy variables on posix nodes.
    pub posix_environment_dir: String,
    /// Nodes processed at once.
    pub max_parallel: u32,
    /// Nodes disrupted at once.
    pub max_unavailable: u32,
    /// Largest share of instances one commit may deconfigure.
    pub max_removal_percent: u32,
    /// Drift re-observation interval.
    pub drift_interval: Duration,
    /// Correct or only report drift.
    pub drift_mode: DriftMode,
    /// Branch for status commits.
    pub status_branch: String,
    /// Directory for status files.
    pub status_path: String,
    /// The pinned payload digest (`sha256:<hex>`), if any.
    pub payload_digest: Option<String>,
    /// Where payload and generated files go on posix nodes.
    pub payload_posix_dir: String,
    /// `spec.payload.kubeletVersion`: the payload's kubelet version, checked
    /// against the API server's before a join (issue 27, item 6).
    pub payload_kubelet_version: Option<String>,
    /// The services ConfigMap in force, when the Fleet names one.
    pub services_config_map: Option<String>,
    /// systemd unit directory on posix nodes.
    pub services_posix_dir: String,
    /// `spec.suspend`: change nothing, observe and report.
    pub suspend: bool,
    /// `spec.lab.allowLoopbackAddresses`: loopback instance addresses are
    /// accepted (a lab whose nodes run on this machine).
    pub allow_loopback: bool,
    /// `spec.sources.proxy`: where the Proxy's truth is.
    pub proxy_source: ConfigSource,
    /// `spec.sources.mirrors`: where the mirror sets' truth is.
    pub mirrors_source: ConfigSource,
}

impl Default for FleetSettings {
    fn default() -> Self {
        Self {
            default_username: None,
            default_port: 22,
            default_shell: Shell::Powershell,
            powershell_registries_dir: r"C:\k\containerd\registries".into(),
            posix_registries_dir: "/etc/containerd/certs.d".into(),
            posix_environment_dir: "/etc/systemd/system.conf.d".into(),
            max_parallel: 32,
            max_unavailable: 1,
            max_removal_percent: 50,
            drift_interval: Duration::from_secs(600),
            drift_mode: DriftMode::Correct,
            status_branch: "winfleet/status".into(),
            status_path: "status".into(),
            payload_digest: None,
            payload_posix_dir: "/var/lib/winfleet".into(),
            payload_kubelet_version: None,
            suspend: false,
            services_config_map: None,
            services_posix_dir: "/etc/systemd/system".into(),
            allow_loopback: false,
            proxy_source: ConfigSource::Repository,
            mirrors_source: ConfigSource::Repository,
        }
    }
}

impl FleetSettings {
    /// The registries directory for a dialect.
    pub fn registries_dir(&self, shell: Shell) -> &str {
        match shell {
            Shell::Powershell => &self.powershell_registries_dir,
            Shell::Posix => &self.posix_registries_dir,
        }
    }

    /// The directory of the environment drop-in, for dialects that have one.
    pub fn environment_dir(&self, shell: Shell) -> Option<&str> {
        match shell {
            Shell::Powershell => None,
            Shell::Posix => Some(&self.posix_environment_dir),
        }
    }
}
