//! winfleet with the identity deploy/ gives it, against a real
//! kube-apiserver v1.37.2 (Node,RBAC authorization): the ServiceAccount
//! `winfleet`, its ClusterRole and Roles from deploy/base/rbac.yaml applied
//! as they are, a token from the TokenRequest API, never cluster-admin.
//! `winfleet plan --live` and `apply --once` create a MachineSet with it,
//! and the `RevisionUntrusted` Event on the daemon's own Pod is stored
//! (Role winfleet-pod-events; tests/real_cluster_rbac_missing_rule.rs
//! shows it refused without that Role).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use support::controlplane::ControlPlane;
use support::identity::{install_identity, pod_event_allowed, repo, service_account_token, winfleet};

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_live_and_apply_once_work_with_the_deploy_service_account_alone() {
    let plane = ControlPlane::start().await;
    install_identity(&plane, None).await;
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
    // Windows node monitoring, kept with the Role winfleet-monitoring alone.
    for (api_version, kind) in [("v1", "Service"), ("v1", "Endpoints"), ("monitoring.coreos.com/v1", "ServiceMonitor")]
    {
        let kept = plane.get(api_version, kind, Some("winfleet"), "windows-exporter").await;
        assert!(kept.is_some(), "{kind} windows-exporter kept by the ServiceAccount\nstderr:\n{err}");
    }
    let namespace = plane.get("v1", "Namespace", None, "winfleet").await.unwrap();
    assert_eq!(namespace["metadata"]["labels"]["openshift.io/cluster-monitoring"], "true");

    let (code, out, err) = winfleet(args(&["plan", "--live"])).await;
    assert_eq!(code, 0, "in sync after apply\nstdout:\n{out}\nstderr:\n{err}");

    assert!(
        pod_event_allowed(&plane, &token, "winfleet-7d9f-abcde").await,
        "the RevisionUntrusted Event on winfleet's Pod, with deploy/'s rules alone"
    );
}
