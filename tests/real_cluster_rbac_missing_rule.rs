//! Issue 24, item 2's missing-rule case: deploy/'s ClusterRole with one
//! rule removed (the cluster Proxy's `get`), and `winfleet apply --once`
//! with the ServiceAccount's token against a real kube-apiserver v1.37.2
//! says plainly what it cannot do ("forbidden: cannot get proxies"), with
//! no crash and no silent skip.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use std::path::Path;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use serde_json::Value;
use support::controlplane::ControlPlane;

/// deploy/base files applied for real: the namespace, the ServiceAccount, the RBAC.
/// `without` removes the ClusterRole rule for that resource first.
async fn install_identity(plane: &ControlPlane, without: &str) {
    for file in ["namespace.yaml", "serviceaccount.yaml", "rbac.yaml"] {
        let text = std::fs::read_to_string(support::root().join("deploy/base").join(file)).unwrap();
        for mut obj in serde_saphyr::from_multiple::<Value>(&text).unwrap().into_iter().filter(|d| !d.is_null()) {
            if obj["kind"] == "ClusterRole" {
                let rules = obj["rules"].as_array_mut().unwrap();
                let before = rules.len();
                rules.retain(|r| r["resources"] != serde_json::json!([without]));
                assert_eq!(rules.len(), before - 1, "one rule removed");
            }
            plane.apply(&obj, "winfleet-test").await;
        }
    }
}

async fn service_account_token(plane: &ControlPlane) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(plane.client(), "winfleet");
    let request = TokenRequest {
        spec: TokenRequestSpec { audiences: vec![], expiration_seconds: Some(3600), ..Default::default() },
        ..Default::default()
    };
    let answer = accounts.create_token_request("winfleet", &PostParams::default(), &request).await.unwrap();
    answer.status.expect("TokenRequest status").token
}

fn repo(dir: &Path) {
    let fleet = "apiVersion: winfleet.io/v1alpha1\nkind: Fleet\nmetadata:\n  name: t\nspec:\n  lab:\n    allowLoopbackAddresses: true\n  defaults:\n    username: u\n    port: 1\n    shell: posix\n";
    std::fs::write(dir.join("fleet.yaml"), fleet).unwrap();
    let template =
        std::fs::read_to_string(support::root().join("examples-repo/machinesets/winworker-aws.yaml")).unwrap();
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

async fn winfleet(args: Vec<String>) -> (i32, String, String) {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        support::winfleet(&args)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_rule_is_reported_as_forbidden_with_its_verb_and_resource() {
    let Some(plane) = ControlPlane::start().await else { return };
    install_identity(&plane, "proxies").await;
    let token = service_account_token(&plane).await;
    let kubeconfig = plane.token_kubeconfig("winfleet-sa", &token);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("repo");
    std::fs::create_dir_all(&dir).unwrap();
    repo(&dir);
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
    let all = format!("{out}{err}");
    assert!(code != 101 && !all.contains("panicked"), "no crash: {code}\nstdout:\n{out}\nstderr:\n{err}");
    assert!(all.contains("forbidden: cannot get proxies cluster"), "stdout:\n{out}\nstderr:\n{err}");
    assert_ne!(code, 0, "a round that could not read the cluster is not a success\nstdout:\n{out}\nstderr:\n{err}");
    let made = plane.get("machine.openshift.io/v1beta1", "MachineSet", Some("openshift-machine-api"), "winb").await;
    assert!(made.is_none(), "nothing written from a round that could not read the cluster");
}
