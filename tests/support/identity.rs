//! winfleet with the identity deploy/ gives it, against the real control
//! plane: deploy/'s namespace, ServiceAccount and RBAC applied, a token
//! from the TokenRequest API, a repository to run with
//! (tests/real_cluster_rbac*.rs).

use std::path::Path;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use serde_json::Value;

use super::controlplane::ControlPlane;

/// deploy/base files applied for real: the namespace, the ServiceAccount,
/// the RBAC and the admission policies that hold winfleet's writes.
/// `without` removes the rule for that resource from ClusterRole `winfleet` first.
pub async fn install_identity(plane: &ControlPlane, without: Option<&str>) {
    for file in ["namespace.yaml", "serviceaccount.yaml", "rbac.yaml", "admission.yaml"] {
        let text = std::fs::read_to_string(super::root().join("deploy/base").join(file)).unwrap();
        for mut obj in serde_saphyr::from_multiple::<Value>(&text).unwrap().into_iter().filter(|d| !d.is_null()) {
            // winfleet's own ClusterRole (deploy/ also binds cloud-node-manager's).
            if let (Some(without), "ClusterRole", "winfleet") =
                (without, obj["kind"].as_str().unwrap_or(""), obj["metadata"]["name"].as_str().unwrap_or(""))
            {
                let rules = obj["rules"].as_array_mut().unwrap();
                let before = rules.len();
                rules.retain(|r| r["resources"] != serde_json::json!([without]));
                assert_eq!(rules.len(), before - 1, "one rule removed");
            }
            plane.apply(&obj, "winfleet-test").await;
        }
    }
    let token = service_account_token(plane).await;
    let sa = plane.client_with_token(&token).await;
    let mut pending = Vec::new();
    for _ in 0..600 {
        pending = admission_pending(&sa).await;
        if pending.is_empty() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("deploy/'s admission policies are not enforced: {pending:?}");
}

/// The policies of deploy/'s admission.yaml that winfleet's writes in these
/// tests meet (its Secret, its monitoring objects, its Namespace) and that
/// do not refuse yet a dry-run write they exist to refuse: the API server
/// loads policies asynchronously, and a test that runs winfleet before
/// they are enforced would not prove that winfleet's writes pass them.
async fn admission_pending(sa: &kube::Client) -> Vec<&'static str> {
    use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
    use kube::api::{Patch, PatchParams, PostParams};

    fn refused<T>(result: Result<T, kube::Error>) -> bool {
        matches!(result, Err(kube::Error::Api(e)) if e.code == 403)
    }

    let dry_create = PostParams { dry_run: true, ..PostParams::default() };
    let secret: Secret = serde_json::from_value(serde_json::json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "winfleet-canary", "namespace": "openshift-machine-api"}}))
    .unwrap();
    let service: Service = serde_json::from_value(serde_json::json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "winfleet-canary", "namespace": "winfleet"}, "spec": {"ports": [{"port": 9182}]}}))
    .unwrap();
    let strip = serde_json::json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": null}}});
    let dry_patch = PatchParams { dry_run: true, ..PatchParams::default() };
    let mut pending = Vec::new();
    if !refused(Api::<Secret>::namespaced(sa.clone(), "openshift-machine-api").create(&dry_create, &secret).await) {
        pending.push("winfleet-secrets");
    }
    if !refused(Api::<Service>::namespaced(sa.clone(), "winfleet").create(&dry_create, &service).await) {
        pending.push("winfleet-own-objects");
    }
    if !refused(Api::<Namespace>::all(sa.clone()).patch("winfleet", &dry_patch, &Patch::Merge(&strip)).await) {
        pending.push("winfleet-namespace");
    }
    pending
}

/// A token of deploy/'s ServiceAccount from the TokenRequest API.
pub async fn service_account_token(plane: &ControlPlane) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(plane.client(), "winfleet");
    let request = TokenRequest {
        spec: TokenRequestSpec { audiences: vec![], expiration_seconds: Some(3600), ..Default::default() },
        ..Default::default()
    };
    let answer = accounts.create_token_request("winfleet", &PostParams::default(), &request).await.unwrap();
    answer.status.expect("TokenRequest status").token
}

/// A committed repository with one MachineSet and no reachable instance.
pub fn repo(dir: &Path) {
    let fleet = "apiVersion: winfleet.io/v1alpha1\nkind: Fleet\nmetadata:\n  name: t\nspec:\n  lab:\n    allowLoopbackAddresses: true\n  defaults:\n    username: u\n    port: 1\n    shell: posix\n";
    std::fs::write(dir.join("fleet.yaml"), fleet).unwrap();
    let template = std::fs::read_to_string(super::root().join("examples-repo/machinesets/winworker-aws.yaml")).unwrap();
    std::fs::create_dir_all(dir.join("machinesets")).unwrap();
    std::fs::write(dir.join("machinesets/winb.yaml"), template.replace("prod-7xk2p-windows-us-east-1a", "winb"))
        .unwrap();
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git").current_dir(dir).args(args).output().unwrap().status.success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "fleet"]);
}

/// The winfleet binary, off the async runtime.
pub async fn winfleet(args: Vec<String>) -> (i32, String, String) {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        super::winfleet(&args)
    })
    .await
    .unwrap()
}

/// Publishes, as deploy/'s ServiceAccount, the `RevisionUntrusted` Event the
/// daemon puts on its own Pod (daemon/round/verify.rs, through
/// cluster/events.rs), and returns whether the API server stored it (read
/// back as the admin: a refused Event is logged by winfleet, never returned).
pub async fn pod_event_allowed(plane: &ControlPlane, token: &str, pod: &str) -> bool {
    use k8s_openapi::api::events::v1::Event;
    use winfleet::cluster::events::{Events, Reason, Regarding};

    let client = plane.client_with_token(token).await;
    let note = format!("revision 0123456 is not applied: unsigned ({pod})");
    Events::new(client).publish(Regarding::Pod("winfleet", pod), Reason::RevisionUntrusted, note).await;
    let events: Api<Event> = Api::namespaced(plane.client(), "winfleet");
    let listed = events.list(&Default::default()).await.unwrap();
    listed.items.iter().any(|e| {
        let regarding = e.regarding.as_ref();
        e.reason.as_deref() == Some("RevisionUntrusted")
            && regarding.and_then(|r| r.kind.as_deref()) == Some("Pod")
            && regarding.and_then(|r| r.name.as_deref()) == Some(pod)
    })
}
