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

/// deploy/base files applied for real: the namespace, the ServiceAccount, the RBAC.
/// `without` removes the ClusterRole rule for that resource first.
pub async fn install_identity(plane: &ControlPlane, without: Option<&str>) {
    for file in ["namespace.yaml", "serviceaccount.yaml", "rbac.yaml"] {
        let text = std::fs::read_to_string(super::root().join("deploy/base").join(file)).unwrap();
        for mut obj in serde_saphyr::from_multiple::<Value>(&text).unwrap().into_iter().filter(|d| !d.is_null()) {
            if let (Some(without), "ClusterRole") = (without, obj["kind"].as_str().unwrap_or("")) {
                let rules = obj["rules"].as_array_mut().unwrap();
                let before = rules.len();
                rules.retain(|r| r["resources"] != serde_json::json!([without]));
                assert_eq!(rules.len(), before - 1, "one rule removed");
            }
            plane.apply(&obj, "winfleet-test").await;
        }
    }
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
