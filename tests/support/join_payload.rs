//! What a join needs on the node side, for the lifecycle tests and the
//! demo: the bootstrap token, a posix services manifest, and a payload
//! whose kubelet is the fake kubelet of tests/support/kubelet.rs.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

pub const TOKEN: &str = "abcdef.0123456789abcdef";

/// The posix services manifest: containerd and the (fake) kubelet start
/// before the Node exists; hybrid-overlay-node needs the Node's name.
pub fn services_manifest() -> String {
    services_manifest_with("", Vec::new(), Vec::new())
}

/// The same manifest with a stand-in for WMCO's Azure `cloud-node-manager`
/// service: `payload/cloud-node-manager` (a payload file the test adds)
/// started with `--kubeconfig=payload/wicd-kubeconfig`, the posix
/// counterpart of `C:\k\wicd-kubeconfig`, and the Node's name.
pub fn services_manifest_with_cloud_node_manager() -> String {
    services_manifest_with("", Vec::new(), vec![cloud_node_manager_service()])
}

/// WMCO's Azure `cloud-node-manager` service with posix paths.
pub fn cloud_node_manager_service() -> serde_json::Value {
    serde_json::json!({ "name": "cloud-node-manager",
        "path": "payload/cloud-node-manager --windows-service --node-name=NODE_NAME --wait-routes=false --kubeconfig=payload/wicd-kubeconfig",
        "nodeVariablesInCommand": [{ "name": "NODE_NAME", "nodeObjectJsonPath": "{.metadata.name}" }],
        "dependencies": ["kubelet"], "bootstrap": false, "priority": 2 })
}

/// The same manifest with the kubelet's host name overridden as WMCO's
/// AWS, GCP and vSphere manifests do: `--hostname-override=HOSTNAME_OVERRIDE`,
/// the variable given by `script` (a posix stand-in for the platform's
/// pre-script, run on the node).
pub fn services_manifest_overriding_the_host_name(script: &str) -> String {
    services_manifest_with(
        " --hostname-override=HOSTNAME_OVERRIDE",
        vec![serde_json::json!({ "variableName": "HOSTNAME_OVERRIDE", "path": script, "NodeArgs": null })],
        Vec::new(),
    )
}

/// The same manifest with `args` appended to the kubelet's command (WMCO's
/// AWS manifest's `--image-credential-provider-config=...`, for one).
pub fn services_manifest_with_kubelet_args(args: &str) -> String {
    services_manifest_with(&format!(" {}", args.trim_start()), Vec::new(), Vec::new())
}

/// The posix services manifest with `kubelet_args` appended to the kubelet's
/// command, `pre_scripts` before its `NODE_IP` one, and `extra` services.
pub fn services_manifest_with(
    kubelet_args: &str,
    mut pre_scripts: Vec<serde_json::Value>,
    extra: Vec<serde_json::Value>,
) -> String {
    pre_scripts.push(
        serde_json::json!({ "variableName": "NODE_IP", "path": "set -- $SSH_CONNECTION; echo $3", "NodeArgs": null }),
    );
    let kubelet = format!(
        "payload/kube-node/kubelet --config=payload/kubelet.conf --bootstrap-kubeconfig=payload/bootstrap-kubeconfig --kubeconfig=payload/kubeconfig --node-labels=node.openshift.io/os_id=Windows{kubelet_args} --node-ip=NODE_IP"
    );
    let mut services = serde_json::json!([
        { "name": "containerd", "path": "payload/containerd/containerd --config payload/containerd/containerd.toml",
          "bootstrap": true, "priority": 0 },
        { "name": "kubelet",
          "path": kubelet,
          "powershellPreScripts": pre_scripts,
          "dependencies": ["containerd"], "bootstrap": true, "priority": 1 },
        { "name": "hybrid-overlay-node", "path": "payload/hybrid-overlay-node --node NODE_NAME",
          "nodeVariablesInCommand": [{ "name": "NODE_NAME", "nodeObjectJsonPath": "{.metadata.name}" }],
          "dependencies": ["kubelet"], "bootstrap": false, "priority": 2 },
    ]);
    services.as_array_mut().unwrap().extend(extra);
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: windows-services-test\n  namespace: openshift-windows-machine-config-operator\ndata:\n  files: '[]'\n  services: '{}'\n",
        services.to_string().replace('\'', "''")
    )
}

pub fn executable(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

pub fn payload(root: &Path) -> PathBuf {
    let dir = root.join("payload-src");
    executable(&dir.join("kube-node/kubelet"), &super::kubelet::wrapper_script());
    executable(&dir.join("containerd/containerd"), "#!/bin/sh\nexec sleep 3600\n");
    fs::write(dir.join("containerd/containerd.toml"), "version = 2\n").unwrap();
    executable(&dir.join("hybrid-overlay-node"), "#!/bin/sh\necho \"hybrid overlay for $2\"\nexec sleep 3600\n");
    dir
}
