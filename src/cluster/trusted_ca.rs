//! Reads the cluster-wide proxy's trusted CA bundle, rendered into node
//! files by [`crate::lifecycle::trusted_ca`]: the Proxy `cluster`
//! (`config.openshift.io/v1`) `spec.trustedCA.name` names a ConfigMap in
//! `openshift-config` whose `ca-bundle.crt` is the bundle (the
//! administrator's `user-ca-bundle`, "custom PKI"). No Proxy, a cluster
//! that does not serve the kind, or no name: no bundle.
//!
//! WMCO reads instead its own `trusted-ca` ConfigMap, into which the
//! Cluster Network Operator injects the system trust bundle merged with
//! that one; winfleet reads the administrator's own, so that a Windows
//! node's trust store gains the proxy's CAs and not RHCOS's whole public
//! root list (which a later removal would take out of Windows' own store).

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, DynamicObject};
use serde_json::Value;

use super::apply::api_error;
use super::observe::proxy_resource;
use crate::lifecycle::trusted_ca::{BUNDLE_KEY, TrustedCa, certificates};

/// The namespace of the ConfigMap the Proxy names.
pub const CONFIG_NAMESPACE: &str = "openshift-config";

/// Reads the bundle; the error names the object and field that failed.
pub async fn read(client: &Client) -> Result<TrustedCa, String> {
    let proxies: Api<DynamicObject> = Api::all_with(client.clone(), &proxy_resource());
    let proxy = match proxies.get_opt("cluster").await {
        Ok(Some(proxy)) => proxy,
        Ok(None) => return Ok(TrustedCa::default()),
        // A cluster that does not serve config.openshift.io has no proxy.
        Err(kube::Error::Api(e)) if e.code == 404 => return Ok(TrustedCa::default()),
        Err(e) => return Err(format!("cannot read Proxy cluster: {}", api_error(&e))),
    };
    let name = proxy.data.pointer("/spec/trustedCA/name").and_then(Value::as_str).unwrap_or_default();
    if name.is_empty() {
        return Ok(TrustedCa::default());
    }
    let source = format!("{CONFIG_NAMESPACE}/{name}");
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), CONFIG_NAMESPACE);
    let map = match maps.get_opt(name).await {
        Ok(Some(map)) => map,
        Ok(None) => return Err(format!("Proxy cluster names the trusted CA ConfigMap {source}, which is not found")),
        Err(e) => return Err(format!("cannot read ConfigMap {source}: {}", api_error(&e))),
    };
    let bundle = map
        .data
        .and_then(|mut d| d.remove(BUNDLE_KEY))
        .ok_or_else(|| format!("ConfigMap {source} (Proxy cluster's trustedCA) has no {BUNDLE_KEY}"))?;
    let certs = certificates(&bundle).map_err(|e| format!("ConfigMap {source} {BUNDLE_KEY}: {e}"))?;
    if certs.is_empty() {
        return Err(format!("ConfigMap {source} {BUNDLE_KEY} holds no certificate"));
    }
    Ok(TrustedCa { source: Some(source), bundle })
}
