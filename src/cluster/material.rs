//! Reads the cluster material a joining node needs (WMCO-SPEC 4.3 step 3),
//! rendered into files by [`crate::lifecycle::material`]:
//!
//! - Secret `openshift-machine-config-operator/node-bootstrapper-token`:
//!   `token` and `ca.crt` (the Machine Config Operator's bootstrap
//!   identity, as WMCO uses it);
//! - Infrastructure `cluster`: `status.apiServerInternalURI` (the JSON name
//!   of openshift/api's `APIServerInternalURL` field: URI, not URL) and the
//!   platform (`status.platformStatus.type`);
//! - Network `cluster`: `spec.serviceNetwork[0]` (the cluster DNS, and
//!   the service network of `network-conf.ps1`, [`super::network`]);
//! - ControllerConfig `machine-config-controller`:
//!   `spec.kubeAPIServerServingCAData` (the kubelet's client CA);
//! - Proxy `cluster`'s trusted CA bundle ([`super::trusted_ca`]);
//! - the worker pool's rendered MachineConfig ([`super::machine_config`]).
//! - on Azure, cloud-node-manager's token ([`super::node_manager`]);
//! - Secret `windows-machine-config-operator-tls` in winfleet's namespace:
//!   `tls.crt` and `tls.key`, the serving certificate the service CA
//!   operator issues for the windows-exporter Service (its annotation,
//!   [`super::monitoring::plan::SERVING_CERT`]); missing, it is a note,
//!   never an error: the exporter waits for it as WMCO does
//!   ([`crate::lifecycle::exporter_tls`]).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use serde_json::Value;

use super::apply::api_error;
use crate::lifecycle::exporter_tls::{CERT, ExporterTls, KEY};
use crate::lifecycle::material::{ClusterMaterial, cluster_dns};
use crate::vocab::platform::Platform;

/// The bootstrap Secret's namespace and name.
pub const BOOTSTRAP_SECRET: (&str, &str) = ("openshift-machine-config-operator", "node-bootstrapper-token");
/// The ControllerConfig WMCO reads the kubelet CA from.
pub const CONTROLLER_CONFIG: &str = "machine-config-controller";

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

async fn get(client: &Client, res: &ApiResource, name: &str, what: &str) -> Result<Value, String> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), res);
    match api.get_opt(name).await {
        Ok(Some(object)) => Ok(object.data),
        Ok(None) => Err(format!("{what} not found")),
        Err(e) => Err(format!("cannot read {what}: {}", api_error(&e))),
    }
}

fn text<'v>(value: &'v Value, pointer: &str, what: &str) -> Result<&'v str, String> {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| format!("{what} has no {pointer}"))
}

/// Reads the material; the error names the object and field that failed.
/// `mint`: whether a token may be minted ([`super::node_manager::token`];
/// false in a dry run).
pub async fn read(client: &Client, mint: bool) -> Result<ClusterMaterial, String> {
    let (namespace, name) = BOOTSTRAP_SECRET;
    let [bootstrap_token, bootstrap_ca] =
        secret_fields(client, namespace, name, ["token", "ca.crt"], String::new()).await?;
    let infrastructure = get(
        client,
        &resource("config.openshift.io", "v1", "Infrastructure", "infrastructures"),
        "cluster",
        "Infrastructure cluster",
    )
    .await?;
    let api_server_url = text(&infrastructure, "/status/apiServerInternalURI", "Infrastructure cluster")?.to_owned();
    let platform = Platform::of_infrastructure(&infrastructure);
    let network =
        get(client, &resource("config.openshift.io", "v1", "Network", "networks"), "cluster", "Network cluster")
            .await?;
    let cidr = ["/spec/serviceNetwork/0", "/status/serviceNetwork/0"]
        .iter()
        .find_map(|p| network.pointer(p).and_then(Value::as_str))
        .ok_or_else(|| "Network cluster has no spec.serviceNetwork".to_owned())?;
    let cluster_dns = cluster_dns(cidr).map_err(|e| format!("Network cluster: {e}"))?;
    let network = super::network::read(client, cidr).await?;
    let controller = get(
        client,
        &resource("machineconfiguration.openshift.io", "v1", "ControllerConfig", "controllerconfigs"),
        CONTROLLER_CONFIG,
        &format!("ControllerConfig {CONTROLLER_CONFIG}"),
    )
    .await?;
    let ca = text(&controller, "/spec/kubeAPIServerServingCAData", &format!("ControllerConfig {CONTROLLER_CONFIG}"))?;
    let kubelet_ca = STANDARD.decode(ca).ok().and_then(|b| String::from_utf8(b).ok()).ok_or_else(|| {
        format!("ControllerConfig {CONTROLLER_CONFIG}: spec.kubeAPIServerServingCAData is not base64 PEM")
    })?;
    let trusted_ca = super::trusted_ca::read(client).await?;
    let rendered_worker = super::machine_config::read(client).await?;
    let node_manager_token = super::node_manager::token(client, platform, mint).await?;
    let exporter_tls = exporter_tls(client).await;
    Ok(ClusterMaterial {
        api_server_url,
        bootstrap_token,
        bootstrap_ca,
        kubelet_ca,
        cluster_dns,
        network,
        trusted_ca,
        platform,
        rendered_worker,
        node_manager_token,
        exporter_tls,
    })
}

/// The exporter's serving certificate and key, or why there is none.
async fn exporter_tls(client: &Client) -> Result<ExporterTls, String> {
    let namespace = super::monitoring::namespace();
    let name = super::monitoring::plan::SERVING_CERT.1;
    let why = format!(
        " (the service CA issues it for Service {namespace}/{}): windows_exporter gets no certificate yet",
        super::monitoring::plan::NAME
    );
    let [cert, key] = secret_fields(client, &namespace, name, [CERT, KEY], why).await?;
    Ok(ExporterTls { cert, key })
}

/// The non-empty `keys` of Secret `namespace`/`name`, as text; the error
/// names the Secret and the key (`not_found` follows "not found").
async fn secret_fields<const N: usize>(
    client: &Client,
    namespace: &str,
    name: &str,
    keys: [&str; N],
    not_found: String,
) -> Result<[String; N], String> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = match secrets.get_opt(name).await {
        Ok(Some(secret)) => secret,
        Ok(None) => return Err(format!("Secret {namespace}/{name} not found{not_found}")),
        Err(e) => return Err(format!("cannot read Secret {namespace}/{name}: {}", api_error(&e))),
    };
    let data = secret.data.unwrap_or_default();
    let mut out: [String; N] = std::array::from_fn(|_| String::new());
    for (slot, key) in out.iter_mut().zip(keys) {
        let value = data.get(key).map(|b| String::from_utf8_lossy(&b.0).into_owned()).filter(|v| !v.is_empty());
        *slot = value.ok_or_else(|| format!("Secret {namespace}/{name} has no {key}"))?;
    }
    Ok(out)
}
