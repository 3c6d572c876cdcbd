//! What provides each file a services manifest may name on a node besides
//! the payload (issue 36): the files winfleet generates on every platform,
//! those only some platforms get (WMCO's per-platform material,
//! docs/platforms-research.md §2), and the files the kubelet or a service
//! writes itself at run time. Pure: a catalogue, read by [`super::named_paths`].
//!
//! Each per-platform name is one `pub const` here (a file name under the
//! kube directory), so the modules that render those files can use it.
//! docs/lifecycle.md "Files a services manifest names" is the table.

use super::{LifecycleSpec, exporter_tls, material, network, trusted_ca};
use crate::payload::layout::{WINDOWS_TEMP_DIR, payload_node_path};
use crate::vocab::Shell;
use crate::vocab::file::node_path;
use crate::vocab::platform::Platform;

/// AWS: the ECR credential provider's configuration (WMCO's, from the
/// rendered worker MachineConfig's `ecr-credential-provider.yaml`).
pub const CREDENTIAL_PROVIDER_CONFIG: &str = "credential-provider-config.yaml";
/// The legacy cloud provider configuration, when the rendered worker
/// MachineConfig's kubelet has `--cloud-config` (clusters up to 4.15).
pub const CLOUD_CONF: &str = "cloud.conf";
/// Azure: cloud-node-manager's kubeconfig (WMCO's WICD kubeconfig path).
pub const WICD_KUBECONFIG: &str = "wicd-kubeconfig";
/// AWS: the ECR credential provider binary (WMCO's payload
/// `ecr-credential-provider.exe.tar.gz`, copied on AWS only).
pub const ECR_CREDENTIAL_PROVIDER: &str = "ecr-credential-provider.exe";
/// Azure: cloud-node-manager (WMCO's payload
/// `azure-cloud-node-manager.exe.tar.gz`, copied on Azure only).
pub const AZURE_CLOUD_NODE_MANAGER: &str = "azure-cloud-node-manager.exe";
/// GCP: the host-name pre-script, in `C:\Temp` (WMCO's payload
/// `gcp-get-hostname.ps1.tar.gz`); its payload path is [`GCP_GET_HOSTNAME_REL`].
pub const GCP_GET_HOSTNAME: &str = "gcp-get-hostname.ps1";
/// [`GCP_GET_HOSTNAME`]'s path in the payload tree (so `C:\Temp\…`).
pub const GCP_GET_HOSTNAME_REL: &str = "powershell/gcp-get-hostname.ps1";
/// The kubelet's kubeconfig, written by the kubelet after its bootstrap.
pub const KUBELET_KUBECONFIG: &str = "kubeconfig";
/// kube-proxy's configuration, written by `network-conf.ps1` (kube-proxy's
/// pre-script) on the node.
pub const KUBE_PROXY_CONF: &str = "kube-proxy.conf";

/// The platforms whose rendered worker MachineConfig may carry a legacy
/// `--cloud-config` (the in-tree cloud providers WMCO serves).
pub const CLOUD_CONF_PLATFORMS: &[Platform] = &[Platform::Aws, Platform::Azure, Platform::Gcp, Platform::VSphere];

/// Who provides a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// winfleet generates it from the cluster on every platform.
    Generated,
    /// winfleet generates it on these platforms only.
    Platform(&'static [Platform]),
    /// The payload holds it, and WMCO copies it to these platforms' nodes
    /// only: present when the payload has it.
    PlatformPayload(&'static [Platform]),
    /// The kubelet or a service writes it itself at run time.
    Runtime,
}

/// One file of the catalogue at its node path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provided {
    /// The node path.
    pub path: String,
    /// Who provides it.
    pub source: Source,
    /// What it is, for messages.
    pub what: &'static str,
}

/// Every file of the catalogue at its node path in `spec`'s dialect.
pub fn catalogue(spec: &LifecycleSpec) -> Vec<Provided> {
    let kube = |name: &str| spec.kube_path(name);
    let temp = |name: &str| match spec.shell {
        Shell::Powershell => node_path(spec.shell, WINDOWS_TEMP_DIR, &[name]),
        Shell::Posix => payload_node_path(spec.shell, &format!("powershell/{name}"), &spec.kube_dir),
    };
    let record = trusted_ca::record_path(spec);
    let entry = |path: String, source: Source, what: &'static str| Provided { path, source, what };
    let generated = |path: String, what| entry(path, Source::Generated, what);
    vec![
        generated(kube(material::BOOTSTRAP_KUBECONFIG), "the kubelet's bootstrap kubeconfig"),
        generated(kube(material::BOOTSTRAP_CA), "the bootstrap CA"),
        generated(kube(material::KUBELET_CA), "the kubelet's client CA"),
        generated(kube(material::KUBELET_CONF), "the kubelet's configuration"),
        generated(kube(trusted_ca::BUNDLE), "the proxy's trusted CA bundle"),
        generated(trusted_ca::added_path(&record), "the trusted CA import's list"),
        generated(record, "the trusted CA import record"),
        generated(
            payload_node_path(spec.shell, network::NETWORK_CONF, &spec.kube_dir),
            "the network configuration script",
        ),
        // Written with the service CA's certificate; until that Secret exists
        // the exporter waits, nothing else does (issue 41).
        generated(exporter_tls::web_config_path(spec), "windows_exporter's web config"),
        entry(
            kube(CREDENTIAL_PROVIDER_CONFIG),
            Source::Platform(&[Platform::Aws]),
            "the ECR credential provider's configuration, from the rendered worker MachineConfig's ecr-credential-provider.yaml",
        ),
        entry(
            kube(CLOUD_CONF),
            Source::Platform(CLOUD_CONF_PLATFORMS),
            "the cloud provider configuration, when the rendered worker MachineConfig's kubelet has --cloud-config (clusters up to 4.15)",
        ),
        entry(kube(WICD_KUBECONFIG), Source::Platform(&[Platform::Azure]), "cloud-node-manager's kubeconfig"),
        entry(
            kube(ECR_CREDENTIAL_PROVIDER),
            Source::PlatformPayload(&[Platform::Aws]),
            "the ECR credential provider, which WMCO's payload ships as ecr-credential-provider.exe.tar.gz",
        ),
        entry(
            kube(AZURE_CLOUD_NODE_MANAGER),
            Source::PlatformPayload(&[Platform::Azure]),
            "cloud-node-manager, which WMCO's payload ships as azure-cloud-node-manager.exe.tar.gz",
        ),
        entry(
            temp(GCP_GET_HOSTNAME),
            Source::PlatformPayload(&[Platform::Gcp]),
            "GCP's host-name pre-script, which WMCO's payload ships as gcp-get-hostname.ps1.tar.gz",
        ),
        entry(kube(KUBELET_KUBECONFIG), Source::Runtime, "the kubelet's kubeconfig, written after its bootstrap"),
        entry(kube(KUBE_PROXY_CONF), Source::Runtime, "kube-proxy's configuration, written by network-conf.ps1"),
        entry(
            match spec.shell {
                Shell::Powershell => network::CNI_CONFIG.to_owned(),
                Shell::Posix => node_path(spec.shell, &spec.kube_dir, &["cni", "config", "cni.conf"]),
            },
            Source::Runtime,
            "the CNI configuration, written by network-conf.ps1",
        ),
    ]
}

/// The platforms, as a message says them: `AWS`, `AWS or Azure`.
pub fn platforms_text(platforms: &[Platform]) -> String {
    let names: Vec<&str> = platforms.iter().map(|p| p.as_str()).collect();
    match names.split_last() {
        None => String::new(),
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::tests_support::{posix_spec, windows_spec};

    fn find<'a>(all: &'a [Provided], path: &str) -> &'a Provided {
        all.iter().find(|p| p.path == path).unwrap_or_else(|| panic!("{path} is not in the catalogue"))
    }

    #[test]
    fn wmcos_per_platform_files_are_provided_by_their_platform_only() {
        let all = catalogue(&windows_spec());
        let source = |path| find(&all, path).source;
        assert_eq!(source(r"C:\k\credential-provider-config.yaml"), Source::Platform(&[Platform::Aws]));
        assert_eq!(source(r"C:\k\wicd-kubeconfig"), Source::Platform(&[Platform::Azure]));
        assert_eq!(source(r"C:\k\cloud.conf"), Source::Platform(CLOUD_CONF_PLATFORMS));
        assert_eq!(source(r"C:\k\ecr-credential-provider.exe"), Source::PlatformPayload(&[Platform::Aws]));
        assert_eq!(source(r"C:\k\azure-cloud-node-manager.exe"), Source::PlatformPayload(&[Platform::Azure]));
        assert_eq!(source(r"C:\Temp\gcp-get-hostname.ps1"), Source::PlatformPayload(&[Platform::Gcp]));
        assert!(!CLOUD_CONF_PLATFORMS.contains(&Platform::Nutanix) && !CLOUD_CONF_PLATFORMS.contains(&Platform::None));
    }

    #[test]
    fn the_files_winfleet_generates_everywhere_and_the_runtime_files_are_listed() {
        let all = catalogue(&windows_spec());
        for generated in [
            r"C:\k\bootstrap-kubeconfig",
            r"C:\k\bootstrap-ca.crt",
            r"C:\k\kubelet-ca.crt",
            r"C:\k\kubelet.conf",
            r"C:\k\ca-bundle.crt",
            r"C:\k\imported-certs.pem",
            r"C:\Temp\network-conf.ps1",
            r"C:\k\tls\windows-exporter-webconfig.yaml",
        ] {
            assert_eq!(find(&all, generated).source, Source::Generated, "{generated}");
        }
        for runtime in [r"C:\k\kubeconfig", r"C:\k\kube-proxy.conf", r"C:\k\cni\config\cni.conf"] {
            assert_eq!(find(&all, runtime).source, Source::Runtime, "{runtime}");
        }
    }

    #[test]
    fn posix_nodes_find_the_same_files_under_the_payload_directory() {
        let all = catalogue(&posix_spec());
        assert_eq!(find(&all, "payload/kubelet.conf").source, Source::Generated);
        assert_eq!(find(&all, "payload/generated/network-conf.ps1").source, Source::Generated);
        assert_eq!(find(&all, "payload/ca-certificates/imported-certs.pem").source, Source::Generated);
        assert_eq!(find(&all, "payload/kubeconfig").source, Source::Runtime);
        assert_eq!(find(&all, "payload/credential-provider-config.yaml").source, Source::Platform(&[Platform::Aws]));
        assert_eq!(
            find(&all, "payload/powershell/gcp-get-hostname.ps1").source,
            Source::PlatformPayload(&[Platform::Gcp])
        );
    }

    #[test]
    fn platforms_read_as_a_list() {
        assert_eq!(platforms_text(&[Platform::Aws]), "AWS");
        assert_eq!(platforms_text(CLOUD_CONF_PLATFORMS), "AWS, Azure, GCP or VSphere");
    }
}
