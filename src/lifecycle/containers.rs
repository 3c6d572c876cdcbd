//! The Windows Containers feature (issue 27, item 6): a host winfleet
//! configures must have it, as WMCO's `ensureHostNameAndContainersFeature`
//! requires. When the observation says it is missing, the feature is
//! enabled and the host rebooted before anything else is configured: a
//! host with no Node yet is rebooted by the round right away (nothing runs
//! there to drain) and configured after it is back; a host with a Node goes
//! through the safe reboot (cordon, drain, reboot, Ready, uncordon).
//!
//! - Windows: `Get-WindowsOptionalFeature -FeatureName Containers -Online`
//!   says `Enabled`, `EnablePending` (installed, the reboot owed) or
//!   another state; `Install-WindowsFeature -Name Containers` enables it.
//! - posix (Linux nodes, and the test fleet standing in for Windows): the
//!   kernel modules a container runtime needs, loaded at boot from a
//!   modules-load.d file: `Enabled` when every one is loaded,
//!   `EnablePending` when winfleet's modules-load.d file is there and they
//!   are not (the reboot owed), `Disabled` otherwise. Enabling writes the
//!   file; the reboot loads them.
//!
//! Only hosts winfleet is configuring are asked (modes Prepare and Join):
//! WMCO checks the feature when it configures a host, never afterwards.
//! Deconfigure leaves the feature on, as WMCO does. This module is the
//! feature's vocabulary; the plan's step is in [`super::plan`].

/// The Windows feature's name.
pub const FEATURE: &str = "Containers";

/// posix: the kernel modules that stand for the feature.
pub const POSIX_MODULES: [&str; 2] = ["overlay", "br_netfilter"];

/// posix: the modules-load.d file winfleet writes to enable them.
pub const POSIX_MODULES_FILE: &str = "/etc/modules-load.d/90-winfleet-containers.conf";

/// The feature as observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FeatureState {
    /// On: configuration goes on.
    Enabled,
    /// Installed; it is on after the host reboots.
    EnablePending,
    /// Off, in the node's words (`Disabled`, `DisabledWithPayloadRemoved`).
    Disabled(String),
}

impl FeatureState {
    /// Reads the observation's state token.
    pub fn parse(state: &str) -> Self {
        match state.trim() {
            "Enabled" => FeatureState::Enabled,
            "EnablePending" => FeatureState::EnablePending,
            other => FeatureState::Disabled(if other.is_empty() { "unknown".to_owned() } else { other.to_owned() }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_are_read_as_windows_names_them() {
        assert_eq!(FeatureState::parse("Enabled"), FeatureState::Enabled);
        assert_eq!(FeatureState::parse("EnablePending\r\n"), FeatureState::EnablePending);
        assert_eq!(
            FeatureState::parse("DisabledWithPayloadRemoved"),
            FeatureState::Disabled("DisabledWithPayloadRemoved".into())
        );
        assert_eq!(FeatureState::parse(""), FeatureState::Disabled("unknown".into()));
    }
}
