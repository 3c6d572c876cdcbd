//! The cluster's platform, as OpenShift names it: the Infrastructure
//! `cluster`'s `status.platformStatus.type` (issue 36). One enum for every
//! stage that depends on it: the Windows builds a host may run, the user
//! data's wrapping and blocks, a MachineSet's providerSpec rules. Pure.

use std::fmt;

use serde::Serialize;
use serde_json::Value;

/// A cluster platform (openshift/api `config/v1` `PlatformType`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Platform {
    /// Amazon Web Services (`AWS`).
    #[serde(rename = "AWS")]
    Aws,
    /// Microsoft Azure (`Azure`).
    Azure,
    /// Google Cloud (`GCP`).
    #[serde(rename = "GCP")]
    Gcp,
    /// VMware vSphere (`VSphere`).
    #[serde(rename = "VSphere")]
    VSphere,
    /// Nutanix (`Nutanix`).
    Nutanix,
    /// No platform integration (`None`): bare metal and BYOH hosts. Also
    /// what winfleet assumes without a cluster, or when the cluster has no
    /// Infrastructure (as WMCO does).
    #[default]
    None,
    /// A platform WMCO does not serve (BareMetal, OpenStack, IBMCloud, …).
    Other,
}

impl Platform {
    /// The platform a `PlatformType` string names.
    pub fn from_type(name: &str) -> Platform {
        match name {
            "AWS" => Platform::Aws,
            "Azure" => Platform::Azure,
            "GCP" => Platform::Gcp,
            "VSphere" => Platform::VSphere,
            "Nutanix" => Platform::Nutanix,
            "" | "None" => Platform::None,
            _ => Platform::Other,
        }
    }

    /// The platform an Infrastructure object names: `status.platformStatus.type`,
    /// else the deprecated `status.platform` (clusters installed before 4.2
    /// may lack the former), else [`Platform::None`].
    pub fn of_infrastructure(infrastructure: &Value) -> Platform {
        ["/status/platformStatus/type", "/status/platform"]
            .iter()
            .find_map(|p| infrastructure.pointer(p).and_then(Value::as_str))
            .map_or(Platform::None, Platform::from_type)
    }

    /// The `PlatformType` string.
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Aws => "AWS",
            Platform::Azure => "Azure",
            Platform::Gcp => "GCP",
            Platform::VSphere => "VSphere",
            Platform::Nutanix => "Nutanix",
            Platform::None => "None",
            Platform::Other => "another platform",
        }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_platform_status_type_names_the_platform() {
        let infra = json!({"status": {"platformStatus": {"type": "AWS"}, "platform": "AWS"}});
        assert_eq!(Platform::of_infrastructure(&infra), Platform::Aws);
        for (name, platform) in [
            ("Azure", Platform::Azure),
            ("GCP", Platform::Gcp),
            ("VSphere", Platform::VSphere),
            ("Nutanix", Platform::Nutanix),
            ("None", Platform::None),
            ("OpenStack", Platform::Other),
        ] {
            assert_eq!(Platform::from_type(name), platform);
            if platform != Platform::Other {
                assert_eq!(platform.as_str(), name);
            }
        }
    }

    #[test]
    fn an_old_cluster_names_it_in_status_platform_and_none_is_the_default() {
        assert_eq!(Platform::of_infrastructure(&json!({"status": {"platform": "VSphere"}})), Platform::VSphere);
        assert_eq!(Platform::of_infrastructure(&json!({"status": {}})), Platform::None);
        assert_eq!(Platform::default(), Platform::None);
    }
}
