//! Rendering: the pure functions that turn validated documents into the
//! bytes and values a node should have. No IO, no clock.
//!
//! - [`reference`]: image locations (registry host, org path, suffix rule).
//! - [`mirrors`]: IDMS/ITMS entries merged per source registry.
//! - [`hosts_toml`]: containerd hosts.toml, byte-exact.
//! - [`pull_secret`]: registry credentials, redacted wherever shown.
//! - [`user_data`]: the `windows-user-data` script new Windows Machines
//!   boot with (OpenSSH and the fleet's public key).

pub mod hosts_toml;
pub mod mirrors;
pub mod pull_secret;
pub mod reference;
pub mod user_data;

use std::collections::BTreeMap;

use crate::node::{NodeSpec, OBSERVED_SERVICES, registry_dir_name};
use crate::vocab::Shell;
use mirrors::RegistryMirrors;
use pull_secret::PullSecret;

/// The directories a dialect's nodes keep winfleet's files in.
#[derive(Clone, Copy, Debug)]
pub struct NodeDirs<'a> {
    /// containerd's `config_path`.
    pub registries: &'a str,
    /// The environment drop-in directory (posix only).
    pub environment: Option<&'a str>,
    /// The Fleet's `prune.maxRemovalPercent`.
    pub max_removal_percent: u32,
}

/// The node spec for every node of one shell dialect.
pub fn node_spec(
    shell: Shell,
    dirs: NodeDirs<'_>,
    registries: &[RegistryMirrors],
    environment: &BTreeMap<String, String>,
    secret: Option<&PullSecret>,
) -> NodeSpec {
    let registries = registries
        .iter()
        .map(|set| (registry_dir_name(&set.registry, shell), hosts_toml::render(set, secret)))
        .collect();
    NodeSpec {
        shell,
        registries_dir: dirs.registries.to_owned(),
        registries,
        environment: environment.clone(),
        environment_dir: dirs.environment.map(str::to_owned),
        services: OBSERVED_SERVICES.map(str::to_owned).to_vec(),
        lifecycle: None,
        leaving: false,
        max_removal_percent: dirs.max_removal_percent,
    }
}
