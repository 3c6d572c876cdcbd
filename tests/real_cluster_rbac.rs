//! winfleet with the identity deploy/ gives it, against a real
//! kube-apiserver v1.37.2 (Node,RBAC authorization): the ServiceAccount
//! `winfleet`, its ClusterRole and Roles from deploy/base/rbac.yaml applied
//! as they are, a token from the TokenRequest API, never cluster-admin.
//! `winfleet plan --live` and `apply --once` create a MachineSet with it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use std::path::Path;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use serde_json::Value;
use support::controlplane::ControlPlane;

/// deploy/base files applied for real: the namespace, the ServiceAccount, the RBAC.
async fn install_identity(plane: &ControlPlane) {
    for file in ["namespace.yaml", "serviceaccount.yaml", "rbac.yaml"] {
        let text = std::fs::read_to_string(support::root().join("deploy/base").join(file)).unwrap();
        for obj in serde_saphyr::from_multiple::<Value>(&text).unwrap().into_iter().filter(|d| !d.is_null()) {
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
async fn plan_live_and_apply_once_work_with_the_deploy_service_account_alone() {
    let Some(plane) = ControlPlane::start().await else { return };
    install_identity(&plane).await;
    let token = service_account_token(&plane).await;
    let kubeconfig = plane.token_kubeconfig("winfleet-sa", &token);

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("repo");
    std::fs::create_dir_all(&dir).unwrap();
    repo(&dir);
    let key = tmp.path().join("id");
    assert!(
        std::process::Command::new("ssh-keygen")
            .args(["-q", "-N", "", "-t", "ed25519", "-f"])
            .arg(&key)
            .status()
            .unwrap()
            .success()
    );
    std::fs::write(tmp.path().join("known_hosts"), "").unwrap();
    let args = |command: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = command.iter().map(|s| (*s).to_owned()).collect();
        for (flag, value) in [
            ("--repo", dir.as_path()),
            ("--ssh-key", key.as_path()),
            ("--known-hosts", &tmp.path().join("known_hosts")),
            ("--kubeconfig", kubeconfig.as_path()),
        ] {
            a.push(flag.into());
            a.push(value.to_str().unwrap().into());
        }
        a
    };

    let (code, out, err) = winfleet(args(&["plan", "--live"])).await;
    assert_eq!(code, 2, "plan --live as the ServiceAccount: changes expected\nstdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("winb"), "{out}");
    assert!(!format!("{out}{err}").contains("forbidden"), "stdout:\n{out}\nstderr:\n{err}");

    let (code, out, err) = winfleet(args(&["apply", "--once"])).await;
    assert!(!format!("{out}{err}").contains("forbidden"), "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(code, 0, "apply --once as the ServiceAccount\nstdout:\n{out}\nstderr:\n{err}");
    let created = plane.get("machine.openshift.io/v1beta1", "MachineSet", Some("openshift-machine-api"), "winb").await;
    let created = created.expect("the MachineSet was created by the ServiceAccount");
    let managers: Vec<&str> = created["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["manager"].as_str().unwrap())
        .collect();
    assert_eq!(managers, ["winfleet"]);

    let (code, out, err) = winfleet(args(&["plan", "--live"])).await;
    assert_eq!(code, 0, "in sync after apply\nstdout:\n{out}\nstderr:\n{err}");
}
