//! Issue 24, item 2's missing-rule case: deploy/'s ClusterRole with one
//! rule removed (the cluster Proxy's `get`), and `winfleet apply --once`
//! with the ServiceAccount's token against a real kube-apiserver v1.37.2
//! says plainly what it cannot do ("forbidden: cannot get proxies"), with
//! no crash and no silent skip. And the Role winfleet-pod-events is what
//! lets the daemon put its `RevisionUntrusted` Event on its own Pod: with
//! it the Event is stored, without it the API server refuses it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use support::controlplane::ControlPlane;
use support::identity::{install_identity, pod_event_allowed, repo, service_account_token, winfleet};

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_rule_is_reported_as_forbidden_with_its_verb_and_resource() {
    let plane = ControlPlane::start().await;
    install_identity(&plane, Some("proxies")).await;
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

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_on_the_daemons_pod_needs_the_pod_events_role() {
    use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
    use k8s_openapi::api::rbac::v1::Role;
    use kube::api::{Api, DeleteParams, PostParams};

    let plane = ControlPlane::start().await;
    install_identity(&plane, None).await;
    let token = service_account_token(&plane).await;
    assert!(pod_event_allowed(&plane, &token, "winfleet-a").await, "allowed with deploy/'s rules");

    let roles: Api<Role> = Api::namespaced(plane.client(), "winfleet");
    roles.delete("winfleet-pod-events", &DeleteParams::default()).await.unwrap();
    // The authorizer reads RBAC from a watch cache: wait until it has seen
    // the deletion (what kubectl auth can-i would answer), then publish.
    let reviews: Api<SubjectAccessReview> = Api::all(plane.client());
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some("system:serviceaccount:winfleet:winfleet".into()),
            resource_attributes: Some(ResourceAttributes {
                group: Some("events.k8s.io".into()),
                resource: Some("events".into()),
                verb: Some("create".into()),
                namespace: Some("winfleet".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    for _ in 0..300 {
        let answer = reviews.create(&PostParams::default(), &review).await.unwrap();
        if !answer.status.is_some_and(|s| s.allowed) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(!pod_event_allowed(&plane, &token, "winfleet-b").await, "refused without Role winfleet-pod-events");
}
