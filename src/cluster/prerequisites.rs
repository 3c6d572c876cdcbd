//! What the cluster must be before any node joins (issue 27, item 6, the
//! cluster side): a kubelet within Kubernetes' supported version skew of
//! the API server, and OVN-Kubernetes with a hybrid overlay. The checks are
//! pure ([`version_skew`], [`network`], [`decide`]): they read the API
//! server's `/version` and the cluster's Network (`operator.openshift.io/v1`,
//! `cluster`) and say why a join is refused; [`check`] is the thin shell
//! that reads both. docs/lifecycle.md ("Prerequisites") says what a
//! refusal holds.

use kube::Client;
use serde::Serialize;
use serde_json::Value;

use super::apply::api_error;
use crate::vocab::kube_version::{agrees, major_minor};

/// The cluster's prerequisites as one round found them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Prerequisites {
    /// Why no node joins or upgrades this round (every failed check, in one
    /// sentence); `None` when none failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// What was not checked, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Prerequisites {
    /// Nothing to say.
    pub fn is_empty(&self) -> bool {
        self.refused.is_none() && self.notes.is_empty()
    }
}

/// What is said when the payload's kubelet version is not known.
pub const KUBELET_UNKNOWN: &str = "the payload's kubelet version is not known (its kubelet carries no \
    k8s.io/component-base/version.gitVersion in its build information, and the Fleet declares no \
    spec.payload.kubeletVersion): the version skew with the API server is not checked";
/// What is said when the cluster has no operator.openshift.io Network.
pub const NOT_OPENSHIFT: &str = "no operator.openshift.io/v1 Network cluster (not an OpenShift cluster): \
    the cluster network is not checked";

/// The payload's kubelet version, as the repository declares it and as
/// the payload's kubelet says it ([`crate::payload::kubelet_version`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Kubelet<'a> {
    /// The Fleet's `spec.payload.kubeletVersion`.
    pub declared: Option<&'a str>,
    /// Read from the payload's kubelet.
    pub payload: Option<&'a str>,
}

impl<'a> Kubelet<'a> {
    /// The version the skew is judged by: the payload's own, else the
    /// declared one (`Ok(None)`: neither is known). A declared version
    /// the payload's kubelet contradicts is refused: the declaration is
    /// wrong, or the payload is not the one meant.
    pub fn version(self) -> Result<Option<&'a str>, String> {
        match (self.declared, self.payload) {
            (Some(declared), Some(found)) if !agrees(declared, found) => Err(format!(
                "the Fleet declares the payload's kubelet {declared} (spec.payload.kubeletVersion), but the \
                 payload's kubelet is {found}: correct the declaration or pin the payload meant"
            )),
            (_, Some(found)) => Ok(Some(found)),
            (declared, None) => Ok(declared),
        }
    }
}

/// The prerequisites from what was read: the payload's kubelet version,
/// the API server's `gitVersion` and the operator.openshift.io Network
/// `cluster` (`Ok(None)`: the cluster has none, so it is no OpenShift
/// cluster). A read that failed refuses: what cannot be checked is not
/// assumed.
pub fn decide(
    kubelet: Kubelet<'_>,
    api_server: Result<&str, &str>,
    network_cr: Result<Option<&Value>, &str>,
) -> Prerequisites {
    let mut reasons = Vec::new();
    let mut notes = Vec::new();
    match (kubelet.version(), api_server) {
        (Err(e), _) => reasons.push(e),
        (Ok(None), _) => notes.push(KUBELET_UNKNOWN.to_owned()),
        (Ok(Some(kubelet)), Ok(api)) => reasons.extend(version_skew(kubelet, api).err()),
        (Ok(Some(_)), Err(e)) => reasons.push(format!("cannot read the API server's /version: {e}")),
    }
    match network_cr {
        Ok(Some(cr)) => reasons.extend(network(cr).err()),
        Ok(None) => notes.push(NOT_OPENSHIFT.to_owned()),
        Err(e) => reasons.push(e.to_owned()),
    }
    let refused = (!reasons.is_empty()).then(|| reasons.join("; "));
    Prerequisites { refused, notes }
}

/// Reads `/version` (only when the kubelet's version is known) and the
/// operator.openshift.io Network `cluster`, and decides.
pub async fn check(client: &Client, kubelet: Kubelet<'_>) -> Prerequisites {
    let version = match kubelet.version() {
        Ok(Some(_)) => client.apiserver_version().await.map(|info| info.git_version).map_err(|e| api_error(&e)),
        _ => Ok(String::new()),
    };
    let network_cr = super::network::operator(client).await;
    decide(
        kubelet,
        version.as_deref().map_err(String::as_str),
        network_cr.as_ref().map(Option::as_ref).map_err(String::as_str),
    )
}

/// How many minor versions a kubelet may be older than the API server
/// (Kubernetes' version skew policy since 1.28); never newer.
pub const KUBELET_SKEW: u32 = 3;

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
    let cidrs = |list: &Value| -> Vec<String> {
        list.as_array().into_iter().flatten().filter_map(|n| n["cidr"].as_str().map(str::to_owned)).collect()
    };
    let class_e: Vec<String> = [
        ("spec.clusterNetwork", cidrs(&network["spec"]["clusterNetwork"])),
        ("hybridClusterNetwork", cidrs(&hybrid["hybridClusterNetwork"])),
    ]
    .into_iter()
    .flat_map(|(field, list)| list.into_iter().filter(|c| is_class_e(c)).map(move |c| format!("{c} ({field})")))
    .collect();
    if !class_e.is_empty() {
        return Err(format!("{} {CLASS_E}", class_e.join(", ")));
    }
    Ok(())
}

/// Why a class E cluster network is refused: the words of OpenShift's
/// "Enabling Windows container workloads" (Installing the WMCO, note).
pub const CLASS_E: &str = "is in class E (240.0.0.0/4): due to a limitation within the Windows operating system, \
    clusterNetwork CIDR addresses of class E, such as 240.0.0.0, are not compatible with Windows nodes";

/// Whether an IPv4 CIDR (`a.b.c.d/n`) reaches into class E (240.0.0.0/4):
/// its last address is 240.0.0.0 or above. An IPv6 or malformed CIDR is
/// not (the Network's own validation judges its shape).
pub fn is_class_e(cidr: &str) -> bool {
    let Some((address, prefix)) = cidr.trim().split_once('/') else { return false };
    let (Ok(address), Ok(prefix)) = (address.parse::<std::net::Ipv4Addr>(), prefix.parse::<u32>()) else {
        return false;
    };
    let Some(host_bits) = 32u32.checked_sub(prefix) else { return false };
    let last = u32::from(address) | u32::MAX.checked_shr(prefix).filter(|_| host_bits > 0).unwrap_or(0);
    last >= u32::from(std::net::Ipv4Addr::new(240, 0, 0, 0))
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
    fn the_payloads_own_kubelet_is_judged_and_a_declaration_it_contradicts_is_refused() {
        let hybrid = json!({"spec": {"defaultNetwork": {"type": "OVNKubernetes", "ovnKubernetesConfig": {
            "hybridOverlayConfig": {"hybridClusterNetwork": [{"cidr": "10.132.0.0/14", "hostPrefix": 23}]}}}}});
        let found = |v| Kubelet { declared: None, payload: Some(v) };
        let old = decide(found("v1.33.2+a80dac2"), Ok("v1.37.2"), Ok(Some(&hybrid)));
        assert!(old.refused.unwrap().contains("kubelet v1.33.2+a80dac2 is 4 minor versions older"));
        assert_eq!(decide(found("v1.36.2+a80dac2"), Ok("v1.37.2"), Ok(Some(&hybrid))), Prerequisites::default());
        let agreeing = Kubelet { declared: Some("v1.36.2"), payload: Some("v1.36.2+a80dac2") };
        assert_eq!(agreeing.version(), Ok(Some("v1.36.2+a80dac2")));
        let contradicted = Kubelet { declared: Some("v1.37.0"), payload: Some("v1.33.2") };
        let refused = decide(contradicted, Ok("v1.37.2"), Ok(Some(&hybrid))).refused.unwrap();
        assert_eq!(
            refused,
            "the Fleet declares the payload's kubelet v1.37.0 (spec.payload.kubeletVersion), but the payload's \
             kubelet is v1.33.2: correct the declaration or pin the payload meant"
        );
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

    #[test]
    fn a_class_e_cluster_network_is_refused_with_the_documented_reason() {
        let with = |cluster: &str, hybrid: &str| {
            json!({"spec": {"clusterNetwork": [{"cidr": "10.128.0.0/14", "hostPrefix": 23}, {"cidr": cluster}],
                "serviceNetwork": ["172.30.0.0/16"], "defaultNetwork": {"type": "OVNKubernetes", "ovnKubernetesConfig":
                {"hybridOverlayConfig": {"hybridClusterNetwork": [{"cidr": hybrid, "hostPrefix": 23}]}}}}})
        };
        assert_eq!(network(&with("10.0.0.0/16", "10.132.0.0/14")), Ok(()));
        let refused = network(&with("240.0.0.0/14", "10.132.0.0/14")).unwrap_err();
        assert_eq!(refused, format!("240.0.0.0/14 (spec.clusterNetwork) {CLASS_E}"));
        assert!(refused.contains("are not compatible with Windows nodes"), "{refused}");
        let hybrid = network(&with("10.0.0.0/16", "250.4.0.0/16")).unwrap_err();
        assert!(hybrid.starts_with("250.4.0.0/16 (hybridClusterNetwork) is in class E"), "{hybrid}");
    }

    #[test]
    fn a_cidr_is_class_e_when_any_of_its_addresses_is() {
        for e in ["240.0.0.0/4", "240.0.0.0/14", "255.255.255.255/32", "224.0.0.0/3", "0.0.0.0/0", "128.0.0.0/1"] {
            assert!(is_class_e(e), "{e}");
        }
        for not in ["10.128.0.0/14", "239.255.255.255/32", "224.0.0.0/4", "fd01::/48", "nonsense", "240.0.0.0/33", ""] {
            assert!(!is_class_e(not), "{not}");
        }
    }

    #[test]
    fn every_failed_check_refuses_and_what_cannot_be_checked_is_said() {
        let hybrid = json!({"spec": {"defaultNetwork": {"type": "OVNKubernetes", "ovnKubernetesConfig": {
            "hybridOverlayConfig": {"hybridClusterNetwork": [{"cidr": "10.132.0.0/14", "hostPrefix": 23}]}}}}});
        let sdn = json!({"spec": {"defaultNetwork": {"type": "OpenShiftSDN"}}});
        let declared = |v| Kubelet { declared: Some(v), payload: None };
        assert_eq!(decide(declared("v1.37.0"), Ok("v1.37.2"), Ok(Some(&hybrid))), Prerequisites::default());
        let both = decide(declared("v1.38.0"), Ok("v1.37.2"), Ok(Some(&sdn)));
        let refused = both.refused.unwrap();
        assert!(refused.contains("never be newer") && refused.contains("OpenShiftSDN"), "{refused}");
        let plain = decide(Kubelet::default(), Err("unused"), Ok(None));
        assert_eq!(plain.refused, None);
        assert_eq!(plain.notes, [KUBELET_UNKNOWN, NOT_OPENSHIFT]);
        let unreadable = decide(declared("v1.37.0"), Err("503"), Err("cannot read the Network: 403"));
        assert_eq!(
            unreadable.refused.as_deref(),
            Some("cannot read the API server's /version: 503; cannot read the Network: 403")
        );
    }
}
