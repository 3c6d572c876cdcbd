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

use super::{GeneratedFile, LifecycleSpec};
use crate::vocab::file::ManagedFile;

/// The file name, in the kube directory (WMCO's `C:\k\wicd-kubeconfig`).
pub const KUBECONFIG: &str = "wicd-kubeconfig";

/// The kubeconfig for the API server at `server`, trusting `ca` (PEM),
/// when the cluster material carries cloud-node-manager's `token`.
pub fn render(spec: &LifecycleSpec, server: &str, ca: &str, token: Option<&str>) -> Option<GeneratedFile> {
    let token = token?;
    let content = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "local", "cluster": {
            "server": server,
            "certificate-authority-data": STANDARD.encode(ca.as_bytes()),
        }}],
        "users": [{ "name": "cloud-node-manager", "user": { "token": token } }],
        "contexts": [{ "name": "cloud-node-manager", "context": { "cluster": "local", "user": "cloud-node-manager" } }],
        "current-context": "cloud-node-manager",
    })
    .to_string();
    Some(GeneratedFile::new(spec.kube_path(KUBECONFIG), ManagedFile::secret(content)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubeconfig_is_written_only_with_a_token_and_never_shows_it() {
        let spec = crate::lifecycle::tests_support::posix_spec();
        let server = "https://api-int.x:6443";
        assert!(render(&spec, server, "CA", None).is_none());
        let file = render(&spec, server, "CA", Some("TOKEN-SENTINEL")).unwrap();
        assert_eq!(file.path, "payload/wicd-kubeconfig");
        let config: serde_json::Value = serde_json::from_str(file.file.content()).unwrap();
        assert_eq!(config["users"][0]["user"]["token"], "TOKEN-SENTINEL");
        assert_eq!(config["clusters"][0]["cluster"]["server"], server);
        assert_eq!(config["clusters"][0]["cluster"]["certificate-authority-data"], STANDARD.encode("CA"));
        assert_eq!(file.file.display(), crate::lifecycle::material::redacted(file.file.content()));
        assert!(!format!("{:?}", file.file).contains("TOKEN-SENTINEL"));
    }
}
