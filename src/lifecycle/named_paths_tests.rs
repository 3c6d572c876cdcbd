use super::*;
use crate::lifecycle::NodeFile;
use crate::lifecycle::manifest::{NodeJsonPath, NodeVariable, PreScript, ServiceDef};
use crate::lifecycle::tests_support::{posix_spec, windows_spec};

/// WMCO's AWS kubelet (docs/platforms-research.md §2, `generateKubeletArgs`).
const WMCO_AWS_KUBELET: &str = r"C:\k\kube-log-runner.exe -log-file=C:\var\log\kubelet\kubelet.log C:\k\kubelet.exe --config=C:\k\kubelet.conf --bootstrap-kubeconfig=C:\k\bootstrap-kubeconfig --kubeconfig=C:\k\kubeconfig --cert-dir=c:\var\lib\kubelet\pki\ --windows-service --node-labels=node.openshift.io/os_id=Windows --windows-priorityclass=ABOVE_NORMAL_PRIORITY_CLASS --v=2 --cloud-provider=external --hostname-override=HOSTNAME_OVERRIDE --node-ip=NODE_IP --image-credential-provider-bin-dir=C:\k --image-credential-provider-config=C:\k\credential-provider-config.yaml";

fn service(name: &str, command: &str) -> ServiceDef {
    ServiceDef {
        name: name.into(),
        command: command.into(),
        node_variables: vec![],
        pre_scripts: vec![],
        dependencies: vec![],
        bootstrap: true,
        priority: 0,
    }
}

/// `spec` running `services`, with payload files at `files`.
fn with(spec: LifecycleSpec, services: Vec<ServiceDef>, files: &[&str]) -> LifecycleSpec {
    let files = files
        .iter()
        .map(|path| NodeFile {
            path: (*path).to_owned(),
            rel: String::new(),
            sha256: String::new(),
            size: 0,
            mode: 0o644,
            source: std::path::PathBuf::new(),
        })
        .collect();
    LifecycleSpec { services, files, ..spec }.with_generated(Vec::new())
}

fn paths(spec: &LifecycleSpec) -> Vec<String> {
    named_paths(spec).into_iter().map(|n| n.path).collect()
}

#[test]
fn paths_are_read_from_flags_words_pre_scripts_and_plain_node_arguments() {
    let mut kube_proxy = service(
        "kube-proxy",
        r#"C:\k\kube-log-runner.exe -log-file=C:\var\log\kube-proxy\kube-proxy.log C:\k\kube-proxy.exe --config "C:\k\kube-proxy.conf""#,
    );
    let arg = |name: &str, template: &str| NodeVariable {
        name: name.into(),
        path: NodeJsonPath::parse(template).unwrap_or_else(|e| panic!("{e}")),
    };
    kube_proxy.pre_scripts.push(PreScript {
        variable: None,
        path: r"c:\temp\network-conf.ps1 -hostnameOverride NODE_NAME -kubeConfigPath KUBE_CONFIG_PATH".into(),
        node_args: vec![arg("NODE_NAME", "{.metadata.name}"), arg("KUBE_CONFIG_PATH", r"C:\k\kubeconfig")],
    });
    let spec = with(windows_spec(), vec![service("kubelet", WMCO_AWS_KUBELET), kube_proxy], &[]);
    assert_eq!(
        paths(&spec),
        [
            r"C:\k\kube-log-runner.exe",
            r"C:\k\kubelet.exe",
            r"C:\k\kubelet.conf",
            r"C:\k\bootstrap-kubeconfig",
            r"C:\k\kubeconfig",
            r"C:\k",
            r"C:\k\credential-provider-config.yaml",
            r"C:\k\kube-log-runner.exe",
            r"C:\k\kube-proxy.exe",
            r"C:\k\kube-proxy.conf",
            r"c:\temp\network-conf.ps1",
            r"C:\k\kubeconfig",
        ],
        "the log and cert directories under C:\\var, variables and {{.field}} templates are not paths"
    );
}

#[test]
fn posix_paths_are_those_under_the_payload_directory() {
    let spec = posix_spec();
    assert_eq!(paths(&spec), ["payload/kube-node/kubelet", "payload/kubelet.conf", "payload/hon"]);
}

#[test]
fn a_path_nothing_provides_is_an_error_at_the_manifest_naming_the_service_and_the_path() {
    let spec = with(
        windows_spec(),
        vec![service("kubelet", r"C:\k\kubelet.exe --config=C:\k\nothing.yaml")],
        &[r"C:\k\kubelet.exe"],
    );
    let found = unprovided(&spec, None);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        found[0].to_string(),
        r#"services.yaml:8:3: /data/services: service kubelet names "C:\k\nothing.yaml", which is not in the payload, not a file winfleet generates, and not one the node's services write themselves (docs/lifecycle.md, "Files a services manifest names")"#
    );
}

#[test]
fn payload_files_directories_generated_and_runtime_files_are_provided_whatever_their_case() {
    let spec = with(
        windows_spec(),
        vec![service(
            "kubelet",
            r"c:\K\KUBELET.EXE --config=C:\k\kubelet.conf --kubeconfig=C:\k\kubeconfig --cert-dir=C:\k\cni\config\ --bin-dir C:/k/ --x=C:\Temp\network-conf.ps1 --d=C:\k\containerd",
        )],
        &[r"C:\k\kubelet.exe", r"C:\k\containerd\containerd.exe"],
    );
    assert_eq!(unprovided(&spec, Some(Platform::None)), []);
}

#[test]
fn wmcos_aws_kubelet_passes_offline_and_on_aws_and_fails_elsewhere_naming_the_platform_that_provides_it() {
    let spec = with(
        windows_spec(),
        vec![service("kubelet", WMCO_AWS_KUBELET)],
        &[r"C:\k\kubelet.exe", r"C:\k\kube-log-runner.exe"],
    );
    assert_eq!(unprovided(&spec, None), [], "without a cluster the platform is not known");
    assert_eq!(unprovided(&spec, Some(Platform::Aws)), []);
    for platform in [Platform::None, Platform::Azure, Platform::Gcp, Platform::VSphere, Platform::Nutanix] {
        let found = unprovided(&spec, Some(platform));
        assert_eq!(found.len(), 1, "{platform}: {found:?}");
        let text = found[0].to_string();
        assert!(
            text.contains(r#"service kubelet names "C:\k\credential-provider-config.yaml", which winfleet writes only on AWS clusters (the ECR credential provider's configuration"#)
                && text.ends_with(&format!("this cluster's platform is {platform}")),
            "{text}"
        );
    }
}

#[test]
fn azures_kubeconfig_is_wrong_on_aws_and_a_per_platform_binary_must_be_in_the_payload() {
    let cnm = r"C:\k\azure-cloud-node-manager.exe --windows-service --node-name=NODE_NAME --wait-routes=false --kubeconfig=C:\k\wicd-kubeconfig";
    let spec = with(windows_spec(), vec![service("cloud-node-manager", cnm)], &[]);
    let found: Vec<String> = unprovided(&spec, Some(Platform::Aws)).iter().map(ToString::to_string).collect();
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[0].contains("is not in the payload: it is cloud-node-manager")
            && found[0].contains("to Azure nodes only")
    );
    assert!(found[1].contains(r#""C:\k\wicd-kubeconfig", which winfleet writes only on Azure clusters"#));
    let spec = with(windows_spec(), vec![service("cloud-node-manager", cnm)], &[r"C:\k\azure-cloud-node-manager.exe"]);
    assert_eq!(unprovided(&spec, Some(Platform::Azure)), []);
}

#[test]
fn posix_nodes_check_their_payload_directory_case_sensitively() {
    let spec = with(posix_spec(), posix_spec().services, &["payload/kube-node/kubelet"]);
    let found: Vec<String> = unprovided(&spec, None).iter().map(ToString::to_string).collect();
    assert_eq!(found.len(), 1, "payload/kubelet.conf is generated; payload/hon is missing: {found:?}");
    assert!(found[0].contains(r#"service hybrid-overlay-node names "payload/hon""#), "{found:?}");
    let spec = with(posix_spec(), posix_spec().services, &["payload/kube-node/kubelet", "payload/hon"]);
    assert_eq!(unprovided(&spec, None), []);
    let spec = with(posix_spec(), posix_spec().services, &["payload/kube-node/kubelet", "payload/HON"]);
    assert_eq!(unprovided(&spec, None).len(), 1);
}
