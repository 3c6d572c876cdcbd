//! What the cluster must be before any node joins (issue 27, item 6, the
//! cluster side): a kubelet within Kubernetes' supported version skew of
//! the API server, and OVN-Kubernetes with a hybrid overlay. Pure: the
//! checks read the API server's `/version` and the cluster's Network
//! (`operator.openshift.io/v1`, `cluster`) and say why a join is refused.

use serde_json::Value;

/// How many minor versions a kubelet may be older than the API server
/// (Kubernetes' version skew policy since 1.28); never newer.
pub const KUBELET_SKEW: u32 = 3;

/// `(major, minor)` of a Kubernetes version (`v1.37.2`, `1.37.2+rhel`,
/// `v1.30.0-rc.1`).
pub fn major_minor(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.trim().trim_start_matches('v').split('.');
    let major = parts.next()?.parse().ok()?;
    let minor: String = parts.next()?.chars().take_while(char::is_ascii_digit).collect();
    Some((major, minor.parse().ok()?))
}

/// The kubelet's version against the API server's (`gitVersion` of
/// `/version`): refused when it is newer, or more than [`KUBELET_SKEW`]
/// minor versions older.
pub fn version_skew(kubelet: &str, api_server: &str) -> Result<(), String> {
    let (Some((km, kn)), Some((am, an))) = (major_minor(kubelet), major_minor(api_server)) else {
        return Err(format!("cannot compare the kubelet version {kubelet:?} with the API server's {api_server:?}"));
    };
    if km != am || kn > an {
        return Err(format!(
            "the payload's kubelet {kubelet} is newer than the API server {api_server}: a kubelet may never be newer"
        ));
    }
    if an - kn > KUBELET_SKEW {
        return Err(format!(
            "the payload's kubelet {kubelet} is {} minor versions older than the API server {api_server}; at most \
             {KUBELET_SKEW} are supported",
            an - kn
        ));
    }
    Ok(())
}

/// The cluster's Network (`operator.openshift.io/v1` `Network` `cluster`):
/// OVN-Kubernetes with a hybrid overlay that names at least one hybrid
/// cluster network, as WMCO requires.
pub fn network(network: &Value) -> Result<(), String> {
    let default = &network["spec"]["defaultNetwork"];
    let kind = default["type"].as_str().unwrap_or("");
    if kind != "OVNKubernetes" {
        return Err(format!(
            "the cluster network is {}, not OVNKubernetes: Windows nodes need OVN-Kubernetes with a hybrid overlay",
            if kind.is_empty() { "not set" } else { kind }
        ));
    }
    let hybrid = &default["ovnKubernetesConfig"]["hybridOverlayConfig"];
    let networks = hybrid["hybridClusterNetwork"].as_array().map_or(0, Vec::len);
    if networks == 0 {
        return Err("OVN-Kubernetes has no hybrid overlay (spec.defaultNetwork.ovnKubernetesConfig.\
                    hybridOverlayConfig.hybridClusterNetwork is empty): configure hybrid networking first"
            .to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_kubelet_up_to_three_minors_older_joins_and_never_a_newer_one() {
        assert_eq!(version_skew("v1.37.2", "v1.37.2"), Ok(()));
        assert_eq!(version_skew("v1.34.0", "v1.37.2"), Ok(()));
        assert_eq!(version_skew("v1.34.0+rhel", "1.37.2"), Ok(()));
        assert!(version_skew("v1.33.9", "v1.37.2").unwrap_err().contains("4 minor versions older"));
        assert!(version_skew("v1.38.0", "v1.37.2").unwrap_err().contains("never be newer"));
        assert!(version_skew("v2.0.0", "v1.37.2").is_err());
        assert!(version_skew("nonsense", "v1.37.2").unwrap_err().contains("cannot compare"));
    }

    #[test]
    fn only_ovn_kubernetes_with_a_hybrid_overlay_passes() {
        let hybrid = json!({"spec": {"defaultNetwork": {"type": "OVNKubernetes", "ovnKubernetesConfig": {
            "hybridOverlayConfig": {"hybridClusterNetwork": [{"cidr": "10.132.0.0/14", "hostPrefix": 23}],
            "hybridOverlayVXLANPort": 9898}}}}});
        assert_eq!(network(&hybrid), Ok(()));
        let plain = json!({"spec": {"defaultNetwork": {"type": "OVNKubernetes"}}});
        assert!(network(&plain).unwrap_err().contains("no hybrid overlay"));
        let sdn = json!({"spec": {"defaultNetwork": {"type": "OpenShiftSDN"}}});
        assert!(network(&sdn).unwrap_err().contains("OpenShiftSDN, not OVNKubernetes"));
        assert!(network(&json!({})).unwrap_err().contains("not set"));
    }
}
