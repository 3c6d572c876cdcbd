//! Specs for the lifecycle's unit tests.

use super::*;
use crate::lifecycle::manifest::{ManifestAt, NodeJsonPath, NodeVariable, PreScript, ServiceDef};

/// A posix spec with a bootstrap kubelet (a NODE_IP pre-script) and a
/// hybrid-overlay-node that needs the Node.
pub fn posix_spec() -> LifecycleSpec {
    let manifest = ServicesManifest {
        name: "windows-services-test".into(),
        origin: "services.yaml".into(),
        services: vec![
            ServiceDef {
                name: "kubelet".into(),
                command: "payload/kube-node/kubelet --node-ip=NODE_IP --config=payload/kubelet.conf".into(),
                node_variables: vec![],
                pre_scripts: vec![PreScript {
                    variable: Some("NODE_IP".into()),
                    path: "hostname -i".into(),
                    node_args: vec![],
                }],
                dependencies: vec![],
                bootstrap: true,
                priority: 1,
            },
            ServiceDef {
                name: "hybrid-overlay-node".into(),
                command: "payload/hon --node NODE_NAME".into(),
                node_variables: vec![NodeVariable {
                    name: "NODE_NAME".into(),
                    path: NodeJsonPath::parse("{.metadata.name}").unwrap_or_else(|e| panic!("{e}")),
                }],
                pre_scripts: vec![],
                dependencies: vec!["kubelet".into()],
                bootstrap: false,
                priority: 2,
            },
        ],
        digest: "ab".repeat(32),
        canonical: String::new(),
        services_at: ManifestAt { path: "services.yaml".into(), document: 0, line: 8, column: 3 },
    };
    let dirs = LifecycleDirs { posix_payload: "payload", posix_units: "units", registries: "certs.d" };
    LifecycleSpec::new(Shell::Posix, &format!("sha256:{}", "cd".repeat(32)), &manifest, dirs)
}

/// A Windows spec of WMCO's layout, with the posix spec's services.
pub fn windows_spec() -> LifecycleSpec {
    let posix = posix_spec();
    LifecycleSpec {
        shell: Shell::Powershell,
        kube_dir: crate::payload::layout::WINDOWS_K_DIR.to_owned(),
        units_dir: None,
        ..posix
    }
    .with_generated(Vec::new())
}
