//! The node's network configuration as WMCO renders it from the cluster
//! (issue 27, item 1; docs/wmco-spec.md, "Network configuration"). Pure:
//! the cluster's Networks are read by [`crate::cluster::network`].
//!
//! - `network-conf.ps1` (`C:\Temp\network-conf.ps1`; posix nodes: the
//!   payload tree's `generated/network-conf.ps1`): WMCO's
//!   `networkConfTemplate` (`pkg/nodeconfig/payload`) filled by
//!   `generateNetworkConfigScript` with the service network
//!   (config.openshift.io Network `cluster` `spec.serviceNetwork[0]`), the
//!   HNS network `OVNKubernetesHybridOverlayNetwork`, the HNS module
//!   `C:\Temp\hns.psm1` and the CNI configuration `C:\k\cni\config\cni.conf`.
//!   kube-proxy's pre-script runs it; it writes `cni.conf` and
//!   `kube-proxy.conf` on the node from the HNS network the hybrid overlay
//!   created (the host subnet and provider address exist only there).
//! - `hybrid-overlay-node`'s `--hybrid-overlay-vxlan-port <port>`: the
//!   operator.openshift.io Network `cluster`'s
//!   `spec.defaultNetwork.ovnKubernetesConfig.hybridOverlayConfig.hybridOverlayVXLANPort`,
//!   put in the service's command where WMCO's `hybridOverlayConfiguration`
//!   puts it (before `--loglevel`), and removed when the cluster sets none.

use super::{GeneratedFile, LifecycleSpec};
use crate::payload::layout::payload_node_path;
use crate::vocab::file::ManagedFile;

/// The script's path in the payload tree (WMCO's
/// `/payload/generated/network-conf.ps1`), which gives its node path.
pub const NETWORK_CONF: &str = "generated/network-conf.ps1";
/// The HNS network the hybrid overlay creates (WMCO's `OVNKubeOverlayNetwork`).
pub const HNS_NETWORK: &str = "OVNKubernetesHybridOverlayNetwork";
/// Where the HNS PowerShell module is on a node (WMCO's `HNSPSModule`).
pub const HNS_MODULE: &str = r"C:\Temp\hns.psm1";
/// The CNI configuration the script writes (WMCO's `CniConfDir + "\cni.conf"`).
pub const CNI_CONFIG: &str = r"C:\k\cni\config\cni.conf";
/// The hybrid overlay's service (WMCO's `HybridOverlayServiceName`).
pub const HYBRID_OVERLAY_SERVICE: &str = "hybrid-overlay-node";
/// The hybrid overlay's VXLAN port flag.
pub const VXLAN_FLAG: &str = "--hybrid-overlay-vxlan-port";

/// WMCO's template, placeholders included (`HNS_NETWORK`,
/// `SERVICE_NETWORK_CIDR`, `HNS_MODULE_PATH`, `CNI_CONFIG_PATH`).
const TEMPLATE: &str = include_str!("network_conf.ps1.in");

/// What the cluster says about the node network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HybridNetwork {
    /// The service network (config.openshift.io Network `spec.serviceNetwork[0]`).
    pub service_cidr: String,
    /// The hybrid overlay's custom VXLAN port; `None` = the default (4789).
    pub vxlan_port: Option<u32>,
}

/// `network-conf.ps1` for `service_cidr`, byte for byte as WMCO writes it.
pub fn network_conf_script(service_cidr: &str) -> String {
    [
        ("HNS_NETWORK", HNS_NETWORK),
        ("SERVICE_NETWORK_CIDR", service_cidr),
        ("HNS_MODULE_PATH", HNS_MODULE),
        ("CNI_CONFIG_PATH", CNI_CONFIG),
    ]
    .into_iter()
    .fold(TEMPLATE.to_owned(), |text, (key, value)| text.replace(key, value))
}

/// The generated network files of `spec`'s dialect.
pub fn render(spec: &LifecycleSpec, network: &HybridNetwork) -> Vec<GeneratedFile> {
    vec![GeneratedFile::new(
        payload_node_path(spec.shell, NETWORK_CONF, &spec.kube_dir),
        ManagedFile::plain(network_conf_script(&network.service_cidr)),
    )]
}

/// `command` with the VXLAN port the cluster sets (`None`: none), or
/// `None` when it already says exactly that.
pub fn hybrid_overlay_command(command: &str, port: Option<u32>) -> Option<String> {
    let words: Vec<&str> = command.split(' ').collect();
    let mut kept: Vec<String> = Vec::new();
    let mut found: Vec<String> = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let word = words[i];
        if word == VXLAN_FLAG {
            found.push(words.get(i + 1).copied().unwrap_or_default().to_owned());
            i += 2;
            continue;
        }
        if let Some(value) = word.strip_prefix(VXLAN_FLAG).and_then(|v| v.strip_prefix('=')) {
            found.push(value.to_owned());
        } else {
            kept.push(word.to_owned());
        }
        i += 1;
    }
    let wanted: Vec<String> = port.map(|p| p.to_string()).into_iter().collect();
    if found == wanted {
        return None;
    }
    if let Some(port) = port {
        let at = kept.iter().position(|w| w == "--loglevel").unwrap_or(kept.len());
        kept.splice(at..at, [VXLAN_FLAG.to_owned(), port.to_string()]);
    }
    Some(kept.join(" "))
}

/// `spec` with the `generated` files, the network files and the hybrid
/// overlay's VXLAN port ([`LifecycleSpec::with_generated`]: a payload file
/// at the same path, such as a `generated/network-conf.ps1` copied from
/// WMCO, gives way to them). Without the operator.openshift.io Network
/// (`None`), no network file and the manifest's command as written.
pub fn with_network(
    spec: &LifecycleSpec,
    network: Option<&HybridNetwork>,
    mut generated: Vec<GeneratedFile>,
) -> LifecycleSpec {
    let mut spec = spec.clone();
    if let Some(network) = network {
        generated.extend(render(&spec, network));
        for service in spec.services.iter_mut().filter(|s| s.name == HYBRID_OVERLAY_SERVICE) {
            if let Some(command) = hybrid_overlay_command(&service.command, network.vxlan_port) {
                service.command = command;
            }
        }
    }
    spec.with_generated(generated)
}

#[cfg(test)]
mod tests {
    use super::*;

    const WMCO: &str = r"C:\k\hybrid-overlay-node.exe --node NODE_NAME --bootstrap-kubeconfig=C:\k\kubeconfig --cert-dir=C:\k\cni\config --cert-duration=24h --windows-service --logfile C:\var\log\hybrid-overlay\hybrid-overlay.log --k8s-apiserver=https://api-int.x:6443 --k8s-cacert C:\k\bootstrap-ca.crt";

    #[test]
    fn the_script_is_wmcos_template_with_every_placeholder_filled() {
        let script = network_conf_script("172.30.0.0/16");
        for placeholder in ["HNS_NETWORK", "SERVICE_NETWORK_CIDR", "HNS_MODULE_PATH", "CNI_CONFIG_PATH"] {
            assert!(!script.contains(placeholder), "{placeholder} left in the script");
        }
        assert!(script.contains(r#""destinationPrefix": "172.30.0.0/16","#));
        assert!(script.contains(r"Import-Module -DisableNameChecking C:\Temp\hns.psm1"));
        assert!(script.contains(r"Compare-And-Replace-Config -ConfigPath C:\k\cni\config\cni.conf -NewConfigContent"));
        assert!(script.contains("$_.Name -eq 'OVNKubernetesHybridOverlayNetwork'"));
        assert!(script.contains("        $existing_config=$config_file_content.Replace(\"`r\",\"\")\n"));
        assert!(script.ends_with("-NewConfigContent $kube_proxy_config\n"));
    }

    #[test]
    fn a_payload_file_at_a_generated_files_path_gives_way_with_or_without_a_network() {
        let mut spec = crate::lifecycle::tests_support::posix_spec();
        let at = |path: &str| super::super::NodeFile {
            path: path.into(),
            rel: String::new(),
            sha256: "e".repeat(64),
            size: 1,
            mode: 0o644,
            source: "/unused".into(),
        };
        spec.files = vec![at("payload/kubeconfig"), at("payload/kubelet.exe")];
        let generated = vec![GeneratedFile::new("payload/kubeconfig".into(), ManagedFile::plain("x".into()))];
        let kept = with_network(&spec, None, generated);
        assert_eq!(kept.files.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(), ["payload/kubelet.exe"]);
        assert_eq!(kept.generated.len(), 1);
    }

    #[test]
    fn a_custom_vxlan_port_goes_where_wmco_puts_it() {
        let with = hybrid_overlay_command(WMCO, Some(9898)).unwrap();
        assert_eq!(with, format!("{WMCO} --hybrid-overlay-vxlan-port 9898"));
        assert_eq!(hybrid_overlay_command(&with, Some(9898)), None, "already there: unchanged");
        let debug = format!("{WMCO} --loglevel 5");
        assert_eq!(
            hybrid_overlay_command(&debug, Some(4800)).unwrap(),
            format!("{WMCO} --hybrid-overlay-vxlan-port 4800 --loglevel 5")
        );
    }

    #[test]
    fn the_clusters_port_replaces_the_manifests_and_none_removes_it() {
        let old = format!("{WMCO} --hybrid-overlay-vxlan-port 4800 --loglevel 5");
        assert_eq!(
            hybrid_overlay_command(&old, Some(9000)).unwrap(),
            format!("{WMCO} --hybrid-overlay-vxlan-port 9000 --loglevel 5")
        );
        assert_eq!(hybrid_overlay_command(&old, None).unwrap(), format!("{WMCO} --loglevel 5"));
        assert_eq!(hybrid_overlay_command(WMCO, None), None);
        let equals = format!("{WMCO} --hybrid-overlay-vxlan-port=4800");
        assert_eq!(hybrid_overlay_command(&equals, Some(4800)), None, "the same port in the flag's other form");
        assert_eq!(hybrid_overlay_command(&equals, Some(1)).unwrap(), format!("{WMCO} --hybrid-overlay-vxlan-port 1"));
        let trailing = format!("{WMCO} --hybrid-overlay-vxlan-port");
        assert_eq!(hybrid_overlay_command(&trailing, None).unwrap(), WMCO);
    }
}
