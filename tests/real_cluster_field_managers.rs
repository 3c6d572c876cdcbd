//! Issue 35, item 13: every write of winfleet's names its field manager,
//! `winfleet`, and its client sends `User-Agent: winfleet/<version>`. On a
//! real kube-apiserver v1.37.2, with deploy/'s identity: `winfleet apply
//! --once` writes a MachineSet, the windows-user-data Secret, the Windows
//! node monitoring objects, its namespace's monitoring label and the
//! cluster-disagrees annotation, and Events; the leader election writes its
//! Lease. Then every object of the
//! kinds winfleet writes is listed and none has a manager `unknown` (what
//! the API server records for a write that names no manager and sends no
//! User-Agent). The tests' own clients send `winfleet-test/0`
//! (tests/support/controlplane.rs), so any `unknown` is winfleet's.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use support::controlplane::ControlPlane;
use support::identity::{install_identity, repo, service_account_token, winfleet};
use winfleet::cluster::connect::{ClusterConfig, connect};
use winfleet::daemon::leadership::lease::{LeaseConfig, spawn};

/// The kinds winfleet writes (deploy/base/rbac.yaml), as (apiVersion, kind, plural).
const WRITTEN: [(&str, &str, &str); 11] = [
    ("v1", "Namespace", "namespaces"),
    ("v1", "Node", "nodes"),
    ("v1", "Secret", "secrets"),
    ("v1", "Service", "services"),
    ("v1", "Endpoints", "endpoints"),
    ("events.k8s.io/v1", "Event", "events"),
    ("coordination.k8s.io/v1", "Lease", "leases"),
    ("machine.openshift.io/v1beta1", "MachineSet", "machinesets"),
    ("machine.openshift.io/v1beta1", "Machine", "machines"),
    ("monitoring.coreos.com/v1", "ServiceMonitor", "servicemonitors"),
    ("certificates.k8s.io/v1", "CertificateSigningRequest", "certificatesigningrequests"),
];

/// Every (object, manager) of the kinds winfleet writes, read as the admin.
async fn managers(plane: &ControlPlane) -> Vec<(String, String)> {
    let mut all = Vec::new();
    for (api_version, kind, plural) in WRITTEN {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        let api: Api<DynamicObject> = Api::all_with(plane.client(), &resource);
        for object in api.list(&ListParams::default()).await.unwrap().items {
            let at = format!(
                "{kind} {}/{}",
                object.metadata.namespace.as_deref().unwrap_or(""),
                object.metadata.name.as_deref().unwrap_or("")
            );
            for entry in object.metadata.managed_fields.unwrap_or_default() {
                all.push((at.clone(), entry.manager.unwrap_or_default()));
            }
        }
    }
    all
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_object_winfleet_writes_names_winfleet_as_its_field_manager() {
    let plane = ControlPlane::start().await;
    install_identity(&plane, None).await;
    let token = service_account_token(&plane).await;
    let kubeconfig = plane.token_kubeconfig("winfleet-sa", &token);

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("repo");
    std::fs::create_dir_all(&dir).unwrap();
    repo(&dir);
    // A Proxy that differs from the cluster's: the disagreement's Event and
    // the Namespace annotation that remembers it.
    let proxy = "apiVersion: config.openshift.io/v1\nkind: Proxy\nmetadata:\n  name: cluster\nspec:\n  httpProxy: http://proxy.windows.example:3128\n";
    std::fs::write(dir.join("proxy.yaml"), proxy).unwrap();
    let git = |args: &[&str]| {
        assert!(std::process::Command::new("git").current_dir(&dir).args(args).status().unwrap().success())
    };
    git(&["add", "."]);
    git(&["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "proxy"]);
    let key = tmp.path().join("id");
    let mut keygen = std::process::Command::new("ssh-keygen");
    assert!(keygen.args(["-q", "-N", "", "-t", "ed25519", "-f"]).arg(&key).status().unwrap().success());
    std::fs::write(tmp.path().join("known_hosts"), "").unwrap();
    let mut args: Vec<String> = vec!["apply".into(), "--once".into()];
    for (flag, value) in [
        ("--repo", dir.as_path()),
        ("--ssh-key", key.as_path()),
        ("--known-hosts", &tmp.path().join("known_hosts")),
        ("--kubeconfig", kubeconfig.as_path()),
    ] {
        args.push(flag.into());
        args.push(value.to_str().unwrap().into());
    }
    let (code, out, err) = winfleet(args).await;
    assert_eq!(code, 0, "apply --once as the ServiceAccount\nstdout:\n{out}\nstderr:\n{err}");

    // The Lease, through the daemon's own election code and client.
    let config = ClusterConfig { kubeconfig: Some(kubeconfig.clone()), context: None };
    let cluster = connect(&config).await.unwrap().unwrap();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let mut elected = spawn(cluster.client, LeaseConfig::new("winfleet", "field-managers-0"), shutdown.clone());
    while !*elected.leading.borrow_and_update() {
        elected.leading.changed().await.expect("the election runs until it leads");
    }
    shutdown.cancel();
    elected.task.await.unwrap();

    let all = managers(&plane).await;
    let unnamed: Vec<&(String, String)> = all.iter().filter(|(_, m)| m == "unknown" || m.is_empty()).collect();
    assert!(unnamed.is_empty(), "writes recorded under no manager's name: {unnamed:#?}");
    let by_winfleet = |prefix: &str| all.iter().any(|(at, m)| at.starts_with(prefix) && m == "winfleet");
    for written in [
        "Namespace /winfleet",
        "Lease winfleet/winfleet-leader",
        "MachineSet openshift-machine-api/winb",
        "Service winfleet/windows-exporter",
        "Secret openshift-machine-api/windows-user-data",
        "Event openshift-machine-api/winb.",
        "Event default/cluster.",
    ] {
        assert!(by_winfleet(written), "{written}... written by manager winfleet: {all:#?}");
    }
    let namespace = plane.get("v1", "Namespace", None, "winfleet").await.unwrap();
    let annotations = &namespace["metadata"]["annotations"];
    assert!(annotations["winfleet.io/cluster-disagrees"].is_string(), "the disagreement is remembered: {namespace}");
    assert_eq!(namespace["metadata"]["labels"]["openshift.io/cluster-monitoring"], "true");
}
