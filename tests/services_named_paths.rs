//! Issue 36: every file a services manifest's commands name under the
//! kube directory, `C:\Temp` or the posix payload directory is a payload
//! file, a file winfleet generates, or a runtime file the node's services
//! write; otherwise `validate --payload-dir` fails at the manifest's
//! file:line naming the file, and a round against a cluster whose
//! platform does not provide a per-platform file blocks the lifecycle
//! with the reason (WMCO's AWS kubelet on a platform None cluster).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use support::controlplane::Backend;
use support::join::bench;
use support::join_payload::services_manifest_with_kubelet_args;
use winfleet::desired::{LoadOptions, load};
use winfleet::lifecycle::named_paths::unprovided;
use winfleet::payload::Payload;
use winfleet::source::read_worktree;
use winfleet::vocab::Shell;
use winfleet::vocab::platform::Platform;

#[test]
#[ignore = "entry point of the fake kubelet process that node tests start; not a test"]
fn fake_kubelet_process() {
    support::kubelet::main_from_env();
}

/// The payload files WMCO's image ships under /payload that its services
/// manifest names, at winfleet's payload paths (docs/platforms-research.md §2).
const WMCO_PAYLOAD: [&str; 11] = [
    "kube-node/kubelet.exe",
    "kube-node/kube-proxy.exe",
    "kube-node/kube-log-runner.exe",
    "containerd/containerd.exe",
    "containerd/containerd_conf.toml",
    "hybrid-overlay-node.exe",
    "windows-exporter/windows_exporter.exe",
    "windows-exporter/windows-exporter-webconfig.yaml",
    "csi-proxy/csi-proxy.exe",
    "powershell/windows-defender-exclusion.ps1",
    "powershell/hns.psm1",
];

/// A payload directory holding `files` (payload paths).
fn payload(root: &Path, files: &[&str]) -> std::path::PathBuf {
    let dir = root.join("payload");
    for rel in files {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, format!("{rel}\n")).unwrap();
    }
    dir
}

/// A repository with `services.yaml` and a Fleet pinning the payload at `dir`.
fn repo(root: &Path, services: &str, dir: &Path) -> std::path::PathBuf {
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let digest = Payload::load(dir).unwrap().digest;
    let fleet = format!(
        "apiVersion: winfleet.io/v1alpha1\nkind: Fleet\nmetadata:\n  name: test\nspec:\n  payload:\n    digest: {digest}\n"
    );
    std::fs::write(repo.join("fleet.yaml"), fleet).unwrap();
    std::fs::write(repo.join("services.yaml"), services).unwrap();
    repo
}

fn validate(repo: &Path, payload: Option<&Path>) -> (i32, String, String) {
    let mut args = vec!["validate", "--repo", repo.to_str().unwrap()];
    if let Some(dir) = payload {
        args.extend(["--payload-dir", dir.to_str().unwrap()]);
    }
    support::winfleet(&args)
}

const NOTHING: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: windows-services-test
data:
  files: '[]'
  services: '[{"name":"kubelet","path":"C:\\k\\kubelet.exe --config=C:\\k\\kubelet.conf --kubeconfig=C:\\k\\kubeconfig --extra-config=C:\\k\\nothing.yaml","bootstrap":true,"priority":0}]'
"#;

#[test]
fn a_manifest_naming_a_file_nothing_provides_fails_validate_with_the_payload_at_its_file_and_line() {
    let root = tempfile::tempdir().unwrap();
    let dir = payload(root.path(), &["kube-node/kubelet.exe"]);
    let repo = repo(root.path(), NOTHING, &dir);

    let (code, out, err) = validate(&repo, Some(&dir));
    assert_eq!(code, 1, "{out}\n{err}");
    let expected = r#"services.yaml:7:3: /data/services: service kubelet names "C:\k\nothing.yaml", which is not in the payload, not a file winfleet generates, and not one the node's services write themselves (docs/lifecycle.md, "Files a services manifest names")"#;
    assert!(err.lines().any(|l| l == expected), "{err}");
    assert!(err.contains("invalid: 1 error(s)"), "{err}");

    // Offline the payload's files are not known: the manifest is valid.
    let (code, out, err) = validate(&repo, None);
    assert_eq!(code, 0, "{out}\n{err}");

    // A payload that holds the file provides it.
    let other = tempfile::tempdir().unwrap();
    let dir = payload(other.path(), &["kube-node/kubelet.exe", "nothing.yaml"]);
    let repo = self::repo(other.path(), NOTHING, &dir);
    let (code, out, err) = validate(&repo, Some(&dir));
    assert_eq!(code, 0, "{out}\n{err}");
}

#[test]
fn validate_refuses_a_payload_that_is_not_the_pinned_one() {
    let root = tempfile::tempdir().unwrap();
    let dir = payload(root.path(), &["kube-node/kubelet.exe"]);
    let repo = repo(root.path(), NOTHING, &dir);
    std::fs::write(dir.join("extra.txt"), "changed\n").unwrap();
    let (code, out, err) = validate(&repo, Some(&dir));
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(err.contains("pin"), "{err}");
}

#[test]
fn wmcos_aws_manifest_validates_offline_and_with_wmcos_payload() {
    let services = std::fs::read_to_string(support::fixture("valid/services-manifest-wmco-aws/services.yaml")).unwrap();
    let root = tempfile::tempdir().unwrap();
    let mut files = WMCO_PAYLOAD.to_vec();
    files.push("kube-node/ecr-credential-provider.exe");
    let dir = payload(root.path(), &files);
    let repo = repo(root.path(), &services, &dir);
    let (code, out, err) = validate(&repo, None);
    assert_eq!(code, 0, "offline: {out}\n{err}");
    let (code, out, err) = validate(&repo, Some(&dir));
    assert_eq!(code, 0, "credential-provider-config.yaml is AWS's, accepted without a cluster: {out}\n{err}");
}

/// WMCO's Azure cloud-node-manager service (docs/platforms-research.md §2).
const CLOUD_NODE_MANAGER: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: windows-services-test
data:
  files: '[]'
  services: '[{"name":"cloud-node-manager","path":"C:\\k\\azure-cloud-node-manager.exe --windows-service --node-name=NODE_NAME --wait-routes=false --kubeconfig=C:\\k\\wicd-kubeconfig","nodeVariablesInCommand":[{"name":"NODE_NAME","nodeObjectJsonPath":"{.metadata.name}"}],"bootstrap":false,"priority":3}]'
"#;

#[test]
fn azures_cloud_node_manager_must_be_in_the_payload_and_the_message_says_whose_binary_it_is() {
    let root = tempfile::tempdir().unwrap();
    let dir = payload(root.path(), &WMCO_PAYLOAD);
    let repo = repo(root.path(), CLOUD_NODE_MANAGER, &dir);
    let (code, out, err) = validate(&repo, Some(&dir));
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        err.contains(r#"service cloud-node-manager names "C:\k\azure-cloud-node-manager.exe", which is not in the payload: it is cloud-node-manager, which WMCO's payload ships as azure-cloud-node-manager.exe.tar.gz, which WMCO copies to Azure nodes only"#),
        "{err}"
    );
    assert!(!err.contains("wicd-kubeconfig"), "Azure's kubeconfig is accepted without a cluster: {err}");

    let root = tempfile::tempdir().unwrap();
    let mut files = WMCO_PAYLOAD.to_vec();
    files.push("azure-cloud-node-manager.exe");
    let dir = payload(root.path(), &files);
    let repo = self::repo(root.path(), CLOUD_NODE_MANAGER, &dir);
    let (code, out, err) = validate(&repo, Some(&dir));
    assert_eq!(code, 0, "{out}\n{err}");
}

#[test]
fn the_examples_repos_manifest_needs_only_wmcos_payload_on_any_platform() {
    let desired =
        load(&read_worktree(&support::root().join("examples-repo")).unwrap(), LoadOptions::default()).desired.unwrap();
    let root = tempfile::tempdir().unwrap();
    let mut files = WMCO_PAYLOAD.to_vec();
    files.push("generated/network-conf.ps1");
    let payload = Payload::load(&payload(root.path(), &files)).unwrap();
    let spec = desired.specs[&Shell::Powershell].lifecycle.as_ref().unwrap().with_payload(&payload);
    for platform in [None, Some(Platform::None), Some(Platform::Aws), Some(Platform::Nutanix)] {
        assert_eq!(unprovided(&spec, platform), [], "{platform:?}");
    }
    let without_exporter: Vec<&str> = files.iter().copied().filter(|f| !f.ends_with("windows_exporter.exe")).collect();
    let root = tempfile::tempdir().unwrap();
    let payload = Payload::load(&self::payload(root.path(), &without_exporter)).unwrap();
    let spec = desired.specs[&Shell::Powershell].lifecycle.as_ref().unwrap().with_payload(&payload);
    let found = unprovided(&spec, None);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].to_string().starts_with("services/windows-services.yaml:"), "{}", found[0]);
}

/// WMCO's AWS kubelet flags with the posix nodes' paths.
const AWS_FLAGS: &str = " --image-credential-provider-bin-dir=payload --image-credential-provider-config=payload/credential-provider-config.yaml";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wmcos_aws_kubelet_on_a_platform_none_cluster_fails_the_plan_with_the_reason_and_passes_on_aws() {
    let mut bench = bench(Backend::InMemory, &["win-0"]).await;
    std::fs::write(bench.repo.path().join("services.yaml"), services_manifest_with_kubelet_args(AWS_FLAGS)).unwrap();
    bench.reload();

    let report = bench.plan().await;
    let text = report.render_text();
    assert!(report.failed(), "{text}");
    assert!(
        text.contains(r#"service kubelet names "payload/credential-provider-config.yaml", which winfleet writes only on AWS clusters (the ECR credential provider's configuration"#)
            && text.contains("this cluster's platform is None"),
        "{text}"
    );
    assert!(text.contains("services.yaml:"), "the reason points at the manifest: {text}");

    let resource = support::controlplane::resource("config.openshift.io", "v1", "Infrastructure", "infrastructures");
    let api: Api<DynamicObject> = Api::all_with(bench.api.client(), &resource);
    let aws = serde_json::json!({ "status": { "platformStatus": { "type": "AWS" } } });
    api.patch_status("cluster", &PatchParams::default(), &Patch::Merge(&aws)).await.unwrap();
    let report = bench.plan().await;
    let text = report.render_text();
    assert!(!report.failed() && !text.contains("nothing provides"), "AWS provides it: {text}");
    assert!(text.contains("platform AWS"), "{text}");
}
