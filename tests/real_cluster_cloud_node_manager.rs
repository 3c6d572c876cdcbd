//! Issue 36: on Azure, WMCO's services manifest starts `cloud-node-manager`
//! with `--kubeconfig=C:\k\wicd-kubeconfig`. winfleet writes that file (on
//! posix nodes `<kube>/wicd-kubeconfig`) with a token of the ServiceAccount
//! deploy/ binds to upstream's cloud-node-manager rules alone, keeps the
//! token across rounds (the file and the service stay unchanged) and
//! re-mints it once less than a third of its lifetime remains (the file
//! changes and only the service naming it restarts); deconfigure removes
//! it. deploy/'s identity
//! mints that account's tokens and no other's. On the real control plane
//! (kube-apiserver's TokenRequest, RBAC and admission), with real sshd
//! nodes and the fake kubelet; the round's behaviour also on the in-memory
//! server (its TokenRequest: tests/support/apiserver/token_request.rs).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
use k8s_openapi::api::core::v1::{Node, Pod, Secret, ServiceAccount};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::{Value, json};
use support::apiserver::fixtures;
use support::bench_checks::{assert_all_joined, assert_quiet, on_node};
use support::controlplane::{Backend, ControlPlane, TestApi, resource};
use support::identity::{install_identity, service_account_token};
use support::join::{Bench, bench, logs};
use support::join_payload::{executable, services_manifest_with_cloud_node_manager};
use winfleet::cluster::node_manager::{self, LIFETIME_SECONDS, PLACEHOLDER, RECORD_SECRET, SERVICE_ACCOUNT};
use winfleet::lifecycle::node_manager::KUBECONFIG;
use winfleet::vocab::Shell;
use winfleet::vocab::platform::Platform;

#[test]
#[ignore = "entry point of the fake kubelet process that node tests start; not a test"]
fn fake_kubelet_process() {
    support::kubelet::main_from_env();
}

/// The real control plane, when the bench runs on it.
fn plane(bench: &Bench) -> Option<&ControlPlane> {
    match &bench.api {
        TestApi::Real(plane) => Some(plane),
        TestApi::InMemory { .. } => None,
    }
}

/// The cluster says Azure, as an installer leaves Infrastructure `cluster`.
async fn azure(client: kube::Client) {
    let api: Api<kube::api::DynamicObject> =
        Api::all_with(client, &resource("config.openshift.io", "v1", "Infrastructure", "infrastructures"));
    let status = json!({"status": {"platformStatus": {"type": "Azure", "azure": {}}}});
    api.patch_status("cluster", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
}

/// Where the kubeconfig lies on `bench`'s node `n`.
fn kubeconfig_path(bench: &Bench, n: usize) -> std::path::PathBuf {
    let spec = bench.desired.specs[&Shell::Posix].lifecycle.clone().unwrap();
    on_node(&bench.fleet.nodes[n], &spec.kube_path(KUBECONFIG))
}

/// The kubeconfig on `bench`'s first node, as text; the second node's is the same.
fn kubeconfig_on_node(bench: &Bench) -> String {
    let text = std::fs::read_to_string(kubeconfig_path(bench, 0)).unwrap();
    assert_eq!(std::fs::read_to_string(kubeconfig_path(bench, 1)).unwrap(), text, "one token for every node");
    text
}

fn token_of(kubeconfig: &str) -> String {
    let config: Value = serde_json::from_str(kubeconfig).unwrap();
    config["users"][0]["user"]["token"].as_str().unwrap().to_owned()
}

/// A client built from the kubeconfig alone, as cloud-node-manager builds its own.
async fn client_of(kubeconfig: &str) -> kube::Client {
    let config = Kubeconfig::from_yaml(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(config, &KubeConfigOptions::default()).await.unwrap();
    kube::Client::try_from(config).unwrap()
}

fn refused<T: std::fmt::Debug>(what: &str, result: Result<T, kube::Error>) {
    match result {
        Err(kube::Error::Api(e)) if e.code == 403 => {}
        other => panic!("{what}: expected 403 Forbidden, got {other:?}"),
    }
}

async fn allowed(client: &kube::Client, verb: &str, resource: &str, subresource: Option<&str>) -> bool {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                resource: Some(resource.into()),
                subresource: subresource.map(str::to_owned),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let answer = Api::<SelfSubjectAccessReview>::all(client.clone()).create(&PostParams::default(), &review).await;
    answer.unwrap().status.unwrap().allowed
}

/// What cloud-node-manager's kubeconfig may do: upstream's rules on Nodes,
/// on Windows Nodes only; nothing else.
async fn only_cloud_node_managers_rules(client: &kube::Client, node: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    nodes.get(node).await.unwrap();
    assert!(!nodes.list(&ListParams::default()).await.unwrap().items.is_empty());
    let label = json!({"metadata": {"labels": {"node.kubernetes.io/instance-type": "Standard_D2s_v3"}}});
    nodes.patch(node, &PatchParams::default(), &Patch::Merge(&label)).await.unwrap();
    let condition = json!({"status": {"conditions": [{"type": "NetworkUnavailable", "status": "False",
        "reason": "RouteCreated", "message": "cloud-node-manager stand-in"}]}});
    nodes.patch_status(node, &PatchParams::default(), &Patch::Strategic(&condition)).await.unwrap();
    for (verb, resource, sub) in
        [("watch", "nodes", None), ("update", "nodes", None), ("patch", "nodes", Some("status"))]
    {
        assert!(allowed(client, verb, resource, sub).await, "{verb} {resource} {sub:?}");
    }
    for (verb, resource, sub) in [
        ("create", "nodes", None),
        ("delete", "nodes", None),
        ("update", "nodes", Some("status")),
        ("list", "secrets", None),
        ("list", "pods", None),
        ("create", "serviceaccounts", Some("token")),
        ("create", "certificatesigningrequests", None),
    ] {
        assert!(!allowed(client, verb, resource, sub).await, "{verb} {resource} {sub:?} is not cloud-node-manager's");
    }
    refused("list Secrets", Api::<Secret>::namespaced(client.clone(), "winfleet").list(&ListParams::default()).await);
    refused("list Pods", Api::<Pod>::all(client.clone()).list(&ListParams::default()).await);
    refused("delete the Node", nodes.delete(node, &DeleteParams::default()).await);
    let other: Node = serde_json::from_value(fixtures::node("win-other", &[], true, &[])).unwrap();
    refused("create a Node", nodes.create(&PostParams::default(), &other).await);
    let request = TokenRequest::default();
    refused(
        "mint a token",
        Api::<ServiceAccount>::namespaced(client.clone(), "winfleet")
            .create_token_request(SERVICE_ACCOUNT, &PostParams::default(), &request)
            .await,
    );
    // A Linux Node: RBAC allows the patch, deploy/'s admission policy does
    // not (polled: the API server loads policies asynchronously).
    let mut last = None;
    for _ in 0..600 {
        match nodes.patch("master-0", &PatchParams::default(), &Patch::Merge(&label)).await {
            Err(kube::Error::Api(e)) if e.code == 403 => {
                assert!(e.message.contains("winfleet-cloud-node-manager-nodes"), "{e:?}");
                return;
            }
            other => last = Some(format!("{other:?}")),
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("a Linux Node patched with cloud-node-manager's token: {last:?}");
}

async fn record(client: kube::Client) -> BTreeMap<String, String> {
    let secret = Api::<Secret>::namespaced(client, "winfleet").get(RECORD_SECRET).await.unwrap();
    assert_eq!(secret.type_.as_deref(), Some("Opaque"));
    let data = secret.data.unwrap();
    data.into_iter().map(|(k, v)| (k, String::from_utf8(v.0).unwrap())).collect()
}

/// On the real control plane deploy/'s objects are applied as they are and
/// the kubeconfig's rights are checked; the in-memory server (which
/// authorizes nothing) gets the ServiceAccount alone.
async fn kept_rotated_and_removed(backend: Backend) {
    let mut bench = bench(backend, &["win-0", "win-1"]).await;
    if let Some(plane) = plane(&bench) {
        install_identity(plane, None).await;
        let mut master = fixtures::node("master-0", &[], true, &[]);
        master["metadata"]["labels"]["kubernetes.io/os"] = json!("linux");
        plane.seed(master).await;
    } else {
        bench
            .api
            .seed(json!({"apiVersion": "v1", "kind": "ServiceAccount",
                         "metadata": {"name": SERVICE_ACCOUNT, "namespace": "winfleet"}}))
            .await;
    }
    let admin = bench.api.client();
    azure(admin.clone()).await;
    bench.repin(|dir| executable(&dir.join("cloud-node-manager"), "#!/bin/sh\nexec sleep 3600\n"));
    std::fs::write(bench.repo.path().join("services.yaml"), services_manifest_with_cloud_node_manager()).unwrap();
    bench.reload();

    // A plan mints nothing: it shows the file, redacted.
    let plan = bench.plan().await.render_text();
    assert!(plan.contains("payload/wicd-kubeconfig"), "{plan}");
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), "winfleet");
    assert!(secrets.get_opt(RECORD_SECRET).await.unwrap().is_none(), "a plan keeps no token");

    let report = bench.round().await;
    let text = report.render_text();
    assert!(!report.failed(), "{text}\n{}", logs(&bench.fleet));
    assert_all_joined(&bench.fleet, &report);
    let first = kubeconfig_on_node(&bench);
    let token = token_of(&first);
    assert!(token.len() > 30 && token != PLACEHOLDER, "a minted token");
    assert!(!text.contains(&token), "no token in a report");
    assert_eq!(record(admin.clone()).await["token"], token, "the token is kept");
    let config: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(config["clusters"][0]["cluster"]["server"], bench.api.url());
    if plane(&bench).is_some() {
        only_cloud_node_managers_rules(&client_of(&first).await, "win-0").await;
    }

    // The next round keeps the token: nothing written, nothing restarted.
    let pids = bench.fleet.nodes[0].service_pids();
    assert!(pids.contains_key("cloud-node-manager") && pids.contains_key("kubelet"), "{pids:?}");
    assert_quiet(&bench.round().await);
    assert_eq!(kubeconfig_on_node(&bench), first);

    // Less than a third of its lifetime left: the plan still shows the kept
    // token (it mints nothing), the round mints a new one, keeps it, writes
    // the file and restarts cloud-node-manager alone.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let aged = json!({"data": {
        "issued": base64(&(now - LIFETIME_SECONDS).to_string()),
        "expires": base64(&(now + 600).to_string()),
    }});
    secrets.patch(RECORD_SECRET, &PatchParams::default(), &Patch::Merge(&aged)).await.unwrap();
    let plan = bench.plan().await.render_text();
    assert!(plan.contains("payload/wicd-kubeconfig"), "the plan shows the rotation: {plan}");
    assert_eq!(record(admin.clone()).await["token"], token, "a plan mints nothing");
    let report = bench.round().await;
    assert!(!report.failed(), "{}\n{}", report.render_text(), logs(&bench.fleet));
    let second = kubeconfig_on_node(&bench);
    let rotated = token_of(&second);
    assert_ne!(rotated, token, "a new token");
    assert!(!report.render_text().contains(&rotated), "no token in a report");
    let kept = record(admin.clone()).await;
    assert_eq!(kept["token"], rotated);
    let (issued, expires): (i64, i64) = (kept["issued"].parse().unwrap(), kept["expires"].parse().unwrap());
    assert!(expires - issued > LIFETIME_SECONDS / 2, "a full lifetime again: {issued}..{expires}");
    let after = bench.fleet.nodes[0].service_pids();
    for (service, pid) in &pids {
        let restarted = after.get(service) != Some(pid);
        assert_eq!(
            restarted,
            service == "cloud-node-manager",
            "{service} restarted: {restarted}; {pids:?} -> {after:?}"
        );
    }
    if plane(&bench).is_some() {
        only_cloud_node_managers_rules(&client_of(&second).await, "win-0").await;
    }
    assert_quiet(&bench.round().await);

    // Deconfigure removes it with the other generated files; the node that
    // stays keeps its own.
    bench.remove_first().await;
    assert!(!kubeconfig_path(&bench, 0).exists(), "wicd-kubeconfig removed at deconfigure");
    assert_eq!(std::fs::read_to_string(kubeconfig_path(&bench, 1)).unwrap(), second);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_azure_node_gets_cloud_node_managers_kubeconfig_kept_and_rotated_before_expiry_on_the_in_memory_server() {
    kept_rotated_and_removed(Backend::InMemory).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_azure_node_gets_cloud_node_managers_kubeconfig_kept_and_rotated_before_expiry_on_the_real_control_plane() {
    kept_rotated_and_removed(Backend::Real).await;
}

fn base64(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploys_identity_mints_cloud_node_managers_token_and_no_other_on_the_real_control_plane() {
    let plane = ControlPlane::start().await;
    install_identity(&plane, None).await;
    let sa = plane.client_with_token(&service_account_token(&plane).await).await;

    // winfleet's own code, with deploy/'s identity: minted, kept, reused.
    assert_eq!(node_manager::token(&sa, Platform::None, true).await.unwrap(), None, "off Azure: nothing");
    let first = node_manager::token(&sa, Platform::Azure, true).await.unwrap().unwrap();
    assert!(first.len() > 100 && first != PLACEHOLDER);
    assert_eq!(node_manager::token(&sa, Platform::Azure, true).await.unwrap(), Some(first.clone()), "kept");
    assert_eq!(record(plane.client()).await["token"], first);

    // Any other ServiceAccount's token is refused.
    let accounts: Api<ServiceAccount> = Api::namespaced(sa.clone(), "winfleet");
    let request = TokenRequest::default();
    refused("winfleet's own token", accounts.create_token_request("winfleet", &PostParams::default(), &request).await);
    refused(
        "the default account's token",
        accounts.create_token_request("default", &PostParams::default(), &request).await,
    );
    let elsewhere: Api<ServiceAccount> = Api::namespaced(sa.clone(), "openshift-machine-config-operator");
    refused(
        "node-bootstrapper's token",
        elsewhere.create_token_request("node-bootstrapper", &PostParams::default(), &request).await,
    );
    // Another Secret of its namespace: neither read nor created.
    let secrets: Api<Secret> = Api::namespaced(sa.clone(), "winfleet");
    refused("another Secret", secrets.get("winfleet-git").await);
    let other: Secret = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "winfleet-other", "namespace": "winfleet"}}))
    .unwrap();
    refused("create another Secret", secrets.create(&PostParams::default(), &other).await);
}
