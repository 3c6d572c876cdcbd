//! Reads the hybrid overlay's network from the cluster, rendered into the
//! node's network files by [`crate::lifecycle::network`] (WMCO's
//! `pkg/cluster` `networkConfigurationFactory`): the service network of
//! config.openshift.io Network `cluster` (read with the other material) and
//! the VXLAN port of operator.openshift.io Network `cluster`
//! (`spec.defaultNetwork.ovnKubernetesConfig.hybridOverlayConfig.hybridOverlayVXLANPort`).
//!
//! A cluster without the operator's Network (not OpenShift: the resource
//! or the object is missing) gets no network file; the reason is returned
//! for the round report. Any other read error fails the material: a
//! transient error must not read as "no custom VXLAN port".

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use serde_json::Value;

use super::apply::api_error;
use crate::lifecycle::network::HybridNetwork;

/// What a round says when the cluster has no operator Network.
pub const ABSENT: &str = "the cluster has no Network.operator.openshift.io `cluster` (not OpenShift): no \
                          network-conf.ps1 is generated and hybrid-overlay-node keeps the manifest's command";

/// The hybrid overlay's network from the operator's Network object: `Err`
/// (the reason) when it has no hybrid overlay configuration.
pub fn parse(service_cidr: &str, operator: &Value) -> Result<HybridNetwork, String> {
    let hybrid = operator.pointer("/spec/defaultNetwork/ovnKubernetesConfig/hybridOverlayConfig").ok_or_else(|| {
        "Network.operator.openshift.io `cluster` has no spec.defaultNetwork.ovnKubernetesConfig.hybridOverlayConfig \
         (no hybrid overlay): no network-conf.ps1 is generated"
            .to_owned()
    })?;
    let vxlan_port = hybrid
        .get("hybridOverlayVXLANPort")
        .and_then(Value::as_u64)
        .and_then(|p| u32::try_from(p).ok())
        .filter(|p| *p > 0);
    Ok(HybridNetwork { service_cidr: service_cidr.to_owned(), vxlan_port })
}

/// Reads operator.openshift.io Network `cluster`: `Ok(Err(reason))` when
/// the cluster has none or it has no hybrid overlay, `Err` when it cannot
/// be read.
pub async fn read(client: &Client, service_cidr: &str) -> Result<Result<HybridNetwork, String>, String> {
    Ok(match operator(client).await? {
        Some(network) => parse(service_cidr, &network),
        None => Err(ABSENT.to_owned()),
    })
}

/// The operator.openshift.io Network `cluster` as the cluster has it,
/// `None` when it has none (the object or the resource is missing: no
/// OpenShift cluster). The one reader of it: the network files (above) and
/// the prerequisites before a join ([`super::prerequisites`]).
pub async fn operator(client: &Client) -> Result<Option<Value>, String> {
    let gvk = GroupVersionKind::gvk("operator.openshift.io", "v1", "Network");
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ApiResource::from_gvk_with_plural(&gvk, "networks"));
    match api.get_opt("cluster").await {
        Ok(object) => Ok(object.map(|o| o.data)),
        // 404 on the resource itself: the API server does not serve it.
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(e) => Err(format!("cannot read Network.operator.openshift.io cluster: {}", api_error(&e))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_vxlan_port_is_read_only_when_the_cluster_sets_one() {
        let with = json!({"spec": {"defaultNetwork": {"type": "OVNKubernetes", "ovnKubernetesConfig": {
            "hybridOverlayConfig": {"hybridClusterNetwork": [{"cidr": "10.132.0.0/14", "hostPrefix": 23}],
                                    "hybridOverlayVXLANPort": 9898}}}}});
        assert_eq!(
            parse("172.30.0.0/16", &with),
            Ok(HybridNetwork { service_cidr: "172.30.0.0/16".into(), vxlan_port: Some(9898) })
        );
        let mut without = with.clone();
        without["spec"]["defaultNetwork"]["ovnKubernetesConfig"]["hybridOverlayConfig"]
            .as_object_mut()
            .unwrap()
            .remove("hybridOverlayVXLANPort");
        assert_eq!(parse("172.30.0.0/16", &without).unwrap().vxlan_port, None);
        let no_hybrid = json!({"spec": {"defaultNetwork": {"type": "OVNKubernetes", "ovnKubernetesConfig": {}}}});
        assert!(parse("172.30.0.0/16", &no_hybrid).unwrap_err().contains("no hybrid overlay"));
    }
}
