//! Where each payload file goes on a node. Pure.
//!
//! PowerShell nodes follow WMCO's layout (`getFilesToTransfer` in
//! `pkg/windows/windows.go`): binaries in `C:\k`, containerd's files in
//! `C:\k\containerd`, CNI plugins in `C:\k\cni`, the exporter's TLS
//! configuration in `C:\k\tls`, PowerShell helpers and generated scripts in
//! `C:\Temp`; a file WMCO does not know keeps its relative path under
//! `C:\k`. So a host WMCO configured has its files where winfleet expects
//! them, and the services manifest WMCO generated finds its binaries.
//!
//! posix nodes keep the payload's own tree under the Fleet's
//! `spec.payload.posixDir`.

use crate::vocab::Shell;
use crate::vocab::file::node_path;

/// WMCO's Kubernetes directory on Windows nodes.
pub const WINDOWS_K_DIR: &str = r"C:\k";
/// WMCO's script directory on Windows nodes (shared: never removed whole).
pub const WINDOWS_TEMP_DIR: &str = r"C:\Temp";

/// The node path of the payload file at `rel` (`/`-separated).
/// `posix_dir` is the Fleet's payload directory for posix nodes.
pub fn payload_node_path(shell: Shell, rel: &str, posix_dir: &str) -> String {
    match shell {
        Shell::Posix => node_path(shell, posix_dir, &rel.split('/').collect::<Vec<_>>()),
        Shell::Powershell => windows_path(rel),
    }
}

fn windows_path(rel: &str) -> String {
    let parts: Vec<&str> = rel.split('/').collect();
    let k = |sub: &[&str]| node_path(Shell::Powershell, WINDOWS_K_DIR, sub);
    match parts.as_slice() {
        ["kube-node" | "csi-proxy", name] => k(&[name]),
        ["containerd", name] => k(&["containerd", name]),
        ["cni", name] => k(&["cni", name]),
        ["windows-exporter", "windows_exporter.exe"] => k(&["windows_exporter.exe"]),
        ["windows-exporter", name] => k(&["tls", name]),
        ["powershell" | "generated", name] => node_path(Shell::Powershell, WINDOWS_TEMP_DIR, &[name]),
        other => k(other),
    }
}

/// The directories that hold `path` (a node path), outermost first, up to
/// but excluding the root (`C:\` or `/`) and, for a relative path, from its
/// first component.
pub fn parents(shell: Shell, path: &str) -> Vec<String> {
    let sep = match shell {
        Shell::Powershell => '\\',
        Shell::Posix => '/',
    };
    let mut out = Vec::new();
    let mut end = 0;
    while let Some(i) = path[end..].find(sep).map(|i| i + end) {
        let dir = &path[..i];
        end = i + 1;
        let is_root = dir.is_empty() || (shell == Shell::Powershell && dir.len() == 2 && dir.ends_with(':'));
        if !is_root {
            out.push(dir.to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_nodes_get_wmcos_layout() {
        let p = |rel| payload_node_path(Shell::Powershell, rel, "unused");
        assert_eq!(p("kube-node/kubelet.exe"), r"C:\k\kubelet.exe");
        assert_eq!(p("kube-node/kube-log-runner.exe"), r"C:\k\kube-log-runner.exe");
        assert_eq!(p("containerd/containerd_conf.toml"), r"C:\k\containerd\containerd_conf.toml");
        assert_eq!(p("cni/win-overlay.exe"), r"C:\k\cni\win-overlay.exe");
        assert_eq!(p("csi-proxy/csi-proxy.exe"), r"C:\k\csi-proxy.exe");
        assert_eq!(p("hybrid-overlay-node.exe"), r"C:\k\hybrid-overlay-node.exe");
        assert_eq!(p("windows-exporter/windows_exporter.exe"), r"C:\k\windows_exporter.exe");
        assert_eq!(p("windows-exporter/windows-exporter-webconfig.yaml"), r"C:\k\tls\windows-exporter-webconfig.yaml");
        assert_eq!(p("powershell/hns.psm1"), r"C:\Temp\hns.psm1");
        assert_eq!(p("generated/network-conf.ps1"), r"C:\Temp\network-conf.ps1");
        assert_eq!(p("extra/tools/x.exe"), r"C:\k\extra\tools\x.exe");
    }

    #[test]
    fn posix_nodes_keep_the_payload_tree() {
        assert_eq!(
            payload_node_path(Shell::Posix, "kube-node/kubelet", "/var/lib/winfleet"),
            "/var/lib/winfleet/kube-node/kubelet"
        );
        assert_eq!(payload_node_path(Shell::Posix, "a", "payload"), "payload/a");
    }

    #[test]
    fn parents_run_outermost_first_without_the_root() {
        assert_eq!(parents(Shell::Powershell, r"C:\k\cni\x.exe"), vec![r"C:\k".to_owned(), r"C:\k\cni".to_owned()]);
        assert_eq!(parents(Shell::Posix, "/var/lib/w/a"), vec!["/var", "/var/lib", "/var/lib/w"]);
        assert_eq!(parents(Shell::Posix, "payload/kube-node/kubelet"), vec!["payload", "payload/kube-node"]);
    }
}
