//! Azure's `cloud-node-manager` kubeconfig on a node (issue 36): WMCO's
//! Azure services manifest starts the service with
//! `--kubeconfig=C:\k\wicd-kubeconfig`, so winfleet writes that file (on
//! posix nodes `<kube>/wicd-kubeconfig`) when the cluster material carries
//! a token for it ([`crate::cluster::node_manager`], Azure only). Pure.
//!
//! The kubeconfig names the API server winfleet gives the kubelet's
//! bootstrap kubeconfig (`Infrastructure.status.apiServerInternalURI`) and
//! trusts the same CA (the bootstrap Secret's `ca.crt`, a service-account
//! token Secret's CA as WMCO's own `wicd-kubeconfig` uses); its user is
//! the token. Like every generated file it is secret (shown as a hash
//! prefix), written only when it differs, and its change restarts only the
//! services whose command names it: cloud-node-manager.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::json;

use super::material::{ClusterMaterial, redacted};
use super::{GeneratedFile, LifecycleSpec};
use crate::vocab::file::ManagedFile;

/// The file name, in the kube directory (WMCO's `C:\k\wicd-kubeconfig`).
pub const KUBECONFIG: &str = "wicd-kubeconfig";

/// The kubeconfig, when the material carries cloud-node-manager's token.
pub fn render(spec: &LifecycleSpec, material: &ClusterMaterial) -> Option<GeneratedFile> {
    let token = material.node_manager_token.as_deref()?;
    let content = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "local", "cluster": {
            "server": material.api_server_url,
            "certificate-authority-data": STANDARD.encode(material.bootstrap_ca.as_bytes()),
        }}],
        "users": [{ "name": "cloud-node-manager", "user": { "token": token } }],
        "contexts": [{ "name": "cloud-node-manager", "context": { "cluster": "local", "user": "cloud-node-manager" } }],
        "current-context": "cloud-node-manager",
    })
    .to_string();
    let display = redacted(&content);
    Some(GeneratedFile { path: spec.kube_path(KUBECONFIG), file: ManagedFile::with_secret(content, display) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::platform::Platform;

    fn material(token: Option<&str>) -> ClusterMaterial {
        ClusterMaterial {
            api_server_url: "https://api-int.x:6443".into(),
            bootstrap_token: "t".into(),
            bootstrap_ca: "CA".into(),
            kubelet_ca: "KCA".into(),
            cluster_dns: "172.30.0.10".into(),
            network: Err("none".into()),
            trusted_ca: Default::default(),
            platform: Platform::Azure,
            node_manager_token: token.map(str::to_owned),
        }
    }

    #[test]
    fn the_kubeconfig_is_written_only_with_a_token_and_never_shows_it() {
        let spec = crate::lifecycle::tests_support::posix_spec();
        assert!(render(&spec, &material(None)).is_none());
        let file = render(&spec, &material(Some("TOKEN-SENTINEL"))).unwrap();
        assert_eq!(file.path, "payload/wicd-kubeconfig");
        let config: serde_json::Value = serde_json::from_str(file.file.content()).unwrap();
        assert_eq!(config["users"][0]["user"]["token"], "TOKEN-SENTINEL");
        assert_eq!(config["clusters"][0]["cluster"]["server"], "https://api-int.x:6443");
        assert_eq!(config["clusters"][0]["cluster"]["certificate-authority-data"], STANDARD.encode("CA"));
        assert!(file.file.display().starts_with("<redacted> sha256:"));
        assert!(!format!("{:?}", file.file).contains("TOKEN-SENTINEL"));
    }
}
