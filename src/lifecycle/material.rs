//! The cluster material a node needs to join, rendered into its files
//! (WMCO-SPEC 4.3 step 3; WMCO's `createBootstrapFiles`). Pure: the cluster
//! objects are read elsewhere ([`crate::cluster::material`]).
//!
//! - `bootstrap-kubeconfig`: the API server's internal URL, the bootstrap
//!   CA and the bootstrap token of the Secret
//!   `openshift-machine-config-operator/node-bootstrapper-token`;
//! - `bootstrap-ca.crt`: that CA;
//! - `kubelet-ca.crt`: the CA the kubelet trusts for client certificates
//!   (ControllerConfig `machine-config-controller`,
//!   `spec.kubeAPIServerServingCAData`);
//! - `kubelet.conf`: WMCO's KubeletConfiguration, with the cluster DNS (the
//!   10th address of the service network) and the dialect's paths.
//!
//! All four are treated as secrets: plans, logs, status and Events show
//! `<redacted>` and a SHA-256 prefix only.

use std::fmt;
use std::net::Ipv4Addr;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::json;

use super::{GeneratedFile, LifecycleSpec};
use crate::vocab::Shell;
use crate::vocab::file::ManagedFile;
use crate::vocab::platform::Platform;

/// The file names, under the kube directory.
pub const BOOTSTRAP_KUBECONFIG: &str = "bootstrap-kubeconfig";
/// The bootstrap CA.
pub const BOOTSTRAP_CA: &str = "bootstrap-ca.crt";
/// The kubelet's client CA.
pub const KUBELET_CA: &str = "kubelet-ca.crt";
/// The kubelet configuration.
pub const KUBELET_CONF: &str = "kubelet.conf";

/// What the cluster gives every joining node.
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterMaterial {
    /// `Infrastructure/cluster` `.status.apiServerInternalURI`.
    pub api_server_url: String,
    /// The bootstrap token (secret).
    pub bootstrap_token: String,
    /// The bootstrap CA (PEM).
    pub bootstrap_ca: String,
    /// The kubelet's client CA (PEM).
    pub kubelet_ca: String,
    /// The cluster DNS address.
    pub cluster_dns: String,
    /// The hybrid overlay's network ([`super::network`]); `Err` says why
    /// none is rendered (no operator.openshift.io Network `cluster`).
    pub network: Result<super::network::HybridNetwork, String>,
    /// The proxy's trusted CA bundle ([`super::trusted_ca`]).
    pub trusted_ca: super::trusted_ca::TrustedCa,
    /// The cluster's platform (Infrastructure `cluster`).
    pub platform: Platform,
    /// The worker pool's rendered MachineConfig ([`super::ignition`]);
    /// `None` when the cluster has none (a cluster without the MCO).
    pub rendered_worker: Option<super::ignition::RenderedWorker>,
    /// On Azure, cloud-node-manager's token ([`super::node_manager`]).
    pub node_manager_token: Option<String>,
    /// windows_exporter's serving certificate ([`super::exporter_tls`]);
    /// `Err` says why none is written (no Secret yet: never blocking).
    pub exporter_tls: Result<super::exporter_tls::ExporterTls, String>,
}

impl fmt::Debug for ClusterMaterial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterMaterial")
            .field("api_server_url", &self.api_server_url)
            .field("bootstrap_token", &"<redacted>")
            .field("cluster_dns", &self.cluster_dns)
            .field("platform", &self.platform)
            .field("rendered_worker", &self.rendered_worker.as_ref().map(|w| &w.name))
            .finish_non_exhaustive()
    }
}

/// The cluster DNS: the 10th address of the service network (WMCO's
/// `GetDNS`, the upstream convention).
pub fn cluster_dns(service_cidr: &str) -> Result<String, String> {
    let (ip, prefix) = service_cidr.split_once('/').ok_or_else(|| format!("{service_cidr:?} is not a CIDR"))?;
    let ip: Ipv4Addr = ip.parse().map_err(|_| format!("{service_cidr:?} is not an IPv4 CIDR"))?;
    let prefix: u32 =
        prefix.parse().ok().filter(|p| *p <= 30).ok_or_else(|| format!("{service_cidr:?}: bad prefix"))?;
    let base = u32::from(ip) & (u32::MAX.checked_shl(32 - prefix).unwrap_or(0));
    Ok(Ipv4Addr::from(base + 10).to_string())
}

pub use crate::vocab::file::redacted;

/// The generated files of `spec`'s dialect.
pub fn render(spec: &LifecycleSpec, material: &ClusterMaterial) -> Vec<GeneratedFile> {
    let kubeconfig = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "local", "cluster": {
            "server": material.api_server_url,
            "certificate-authority-data": STANDARD.encode(material.bootstrap_ca.as_bytes()),
        }}],
        "users": [{ "name": "kubelet", "user": { "token": material.bootstrap_token } }],
        "contexts": [{ "name": "kubelet", "context": { "cluster": "local", "user": "kubelet" } }],
        "current-context": "kubelet",
    });
    let files = [
        (BOOTSTRAP_KUBECONFIG, kubeconfig.to_string()),
        (BOOTSTRAP_CA, material.bootstrap_ca.clone()),
        (KUBELET_CA, material.kubelet_ca.clone()),
        (KUBELET_CONF, kubelet_configuration(spec, &material.cluster_dns)),
    ];
    let files =
        files.into_iter().map(|(name, content)| GeneratedFile::new(spec.kube_path(name), ManagedFile::secret(content)));
    let worker = material.rendered_worker.iter().flat_map(|w| super::platform_files::render(spec, w));
    files
        .chain(super::trusted_ca::render(spec, &material.trusted_ca))
        .chain(super::node_manager::render(
            spec,
            &material.api_server_url,
            &material.bootstrap_ca,
            material.node_manager_token.as_deref(),
        ))
        .chain(worker)
        .chain(super::exporter_tls::render(spec, material.exporter_tls.as_ref().ok()))
        .collect()
}

/// WMCO's KubeletConfiguration (`generateKubeletConfiguration`) for the
/// dialect: the client CA under the kube directory, containerd's endpoint,
/// the `os=Windows:NoSchedule` taint registered by the kubelet itself.
fn kubelet_configuration(spec: &LifecycleSpec, cluster_dns: &str) -> String {
    let runtime = match spec.shell {
        Shell::Powershell => "npipe://./pipe/containerd-containerd",
        Shell::Posix => "unix:///run/containerd/containerd.sock",
    };
    json!({
        "kind": "KubeletConfiguration",
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "rotateCertificates": true,
        "serverTLSBootstrap": true,
        "authentication": {
            "x509": { "clientCAFile": spec.kube_path(KUBELET_CA) },
            "anonymous": { "enabled": false },
        },
        "clusterDomain": "cluster.local",
        "clusterDNS": [cluster_dns],
        "cgroupsPerQOS": false,
        "runtimeRequestTimeout": "10m0s",
        "maxPods": 250,
        "kubeAPIQPS": 50,
        "kubeAPIBurst": 100,
        "serializeImagePulls": false,
        "logging": { "flushFrequency": "5s" },
        "enableSystemLogHandler": true,
        "enableSystemLogQuery": true,
        "featureGates": { "NodeLogQuery": true, "RotateKubeletServerCertificate": true },
        "containerLogMaxSize": "50Mi",
        "enforceNodeAllocatable": ["none"],
        "evictionHard": { "imagefs.available": "15%", "nodefs.available": "10%" },
        "systemReserved": { "cpu": "500m", "ephemeral-storage": "1Gi", "memory": "2Gi" },
        "containerRuntimeEndpoint": runtime,
        "registerNode": true,
        "registerWithTaints": [{ "key": "os", "value": "Windows", "effect": "NoSchedule" }],
        "resolverConfig": "",
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cluster_dns_is_the_tenth_address_of_the_service_network() {
        assert_eq!(cluster_dns("172.30.0.0/16").unwrap(), "172.30.0.10");
        assert_eq!(cluster_dns("10.96.5.7/12").unwrap(), "10.96.0.10");
        assert!(cluster_dns("fd00::/64").is_err());
        assert!(cluster_dns("10.0.0.0").is_err());
    }

    #[test]
    fn material_never_shows_its_secrets() {
        let material = ClusterMaterial {
            api_server_url: "https://api-int.x:6443".into(),
            bootstrap_token: "TOKEN-SENTINEL".into(),
            bootstrap_ca: "CA".into(),
            kubelet_ca: "KCA".into(),
            cluster_dns: "172.30.0.10".into(),
            network: Err("none".into()),
            trusted_ca: Default::default(),
            platform: Platform::None,
            rendered_worker: None,
            node_manager_token: None,
            exporter_tls: Err("no Secret".into()),
        };
        assert!(!format!("{material:?}").contains("TOKEN-SENTINEL"));
        let spec = crate::lifecycle::tests_support::posix_spec();
        let files = render(&spec, &material);
        assert_eq!(files.len(), 6);
        let kubeconfig = &files[0];
        assert!(kubeconfig.file.content().contains("TOKEN-SENTINEL"));
        assert!(!kubeconfig.file.display().contains("TOKEN-SENTINEL"));
        assert!(!format!("{:?}", kubeconfig.file).contains("TOKEN-SENTINEL"));
        assert!(kubeconfig.file.display().starts_with("<redacted> sha256:"));
        assert_eq!(kubeconfig.path, "payload/bootstrap-kubeconfig");
    }
}
