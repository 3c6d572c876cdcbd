//! The API client under faults, over real HTTP to the in-memory API server
//! with injected errors: reads and watches are retried (bounded, with
//! jitter, Retry-After honoured); writes and evictions are not (winfleet
//! retries them on its own terms); every entry of KUBECONFIG is merged.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use support::apiserver::{ApiServer, fixtures};
use winfleet::cluster::connect::{ClusterConfig, connect};
use winfleet::cluster::observe::observe;

async fn served() -> (ApiServer, support::apiserver::Served, kube::Client) {
    let api = ApiServer::new();
    api.seed(fixtures::node("win-1", &[("InternalIP", "10.0.0.1")], true, &[]));
    let served = api.serve().await;
    let config = ClusterConfig { kubeconfig: Some(served.kubeconfig.clone()), context: None };
    let client = connect(&config).await.unwrap().unwrap().client;
    (api, served, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_are_retried_through_503_and_429_with_retry_after() {
    let (api, _served, client) = served().await;
    api.fail("GET", "/api/v1/nodes", 503, None, 2);
    api.fail("GET", "/api/v1/nodes", 429, Some(1), 1);
    let facts = observe(&client).await.expect("the observation succeeds after the faults");
    assert!(facts.nodes.contains_key("win-1"));
    let served: Vec<u16> = api.faults_served().iter().map(|f| f.2).collect();
    assert_eq!(served, [503, 503, 429], "each fault was met and retried past");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_give_up_after_a_bounded_number_of_retries() {
    let (api, _served, client) = served().await;
    api.fail("GET", "/api/v1/nodes", 503, None, 100);
    let error = observe(&client).await.expect_err("an API server that stays unavailable is an error");
    assert!(error.to_string().contains("503"), "{error}");
    assert_eq!(api.faults_served().len(), 6, "one try and five retries");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_and_evictions_are_not_retried_by_the_client() {
    let (api, _served, client) = served().await;
    let nodes: Api<Node> = Api::all(client.clone());
    let params = PatchParams { field_manager: Some("winfleet".into()), ..PatchParams::default() };
    let body = serde_json::json!({ "spec": { "unschedulable": true } });
    for status in [409, 503, 429] {
        api.fail("PATCH", "/api/v1/nodes/win-1", status, Some(1), 1);
        let error = nodes.patch("win-1", &params, &Patch::Merge(&body)).await.expect_err("the fault is returned");
        assert!(matches!(&error, kube::Error::Api(e) if e.code == status), "{error}");
    }
    api.fail("POST", "/eviction", 429, Some(1), 1);
    api.seed(fixtures::pod("shop", "web-1", "win-1", &[], Some("ReplicaSet")));
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client, "shop");
    let error = pods.evict("web-1", &Default::default()).await.expect_err("a PDB's 429 reaches the drain");
    assert!(matches!(&error, kube::Error::Api(e) if e.code == 429), "{error}");
    assert_eq!(api.faults_served().len(), 4, "each write met its fault once, never again");
    assert!(
        api.get("v1", "Node", None, "win-1").unwrap()["spec"]["unschedulable"] != true,
        "no write went through behind the caller's back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kubeconfig_entry_is_merged_as_kubectl_does() {
    let api = ApiServer::new();
    let served = api.serve().await;
    let dir = tempfile::tempdir().unwrap();
    let full: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&served.kubeconfig).unwrap()).unwrap();
    // The cluster and user in one file, the context in another.
    let first = serde_json::json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": full["clusters"], "users": full["users"],
    });
    let second = serde_json::json!({
        "apiVersion": "v1", "kind": "Config",
        "contexts": full["contexts"], "current-context": full["current-context"],
    });
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::write(&a, first.to_string()).unwrap();
    std::fs::write(&b, second.to_string()).unwrap();
    let joined = std::env::join_paths([&a, &b]).unwrap();
    let repo = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git").current_dir(repo.path()).args(args).output().unwrap();
        assert!(ok.status.success(), "git {args:?}");
    };
    std::fs::write(
        repo.path().join("fleet.yaml"),
        "apiVersion: winfleet.io/v1alpha1\nkind: Fleet\nmetadata:\n  name: f\nspec:\n  lab: {allowLoopbackAddresses: true}\n",
    )
    .unwrap();
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "fleet"]);
    let key = dir.path().join("key");
    let made = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&key)
        .status()
        .unwrap();
    assert!(made.success());
    std::fs::write(dir.path().join("known_hosts"), "").unwrap();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_winfleet"))
        .args(["plan", "--live", "--repo"])
        .arg(repo.path())
        .arg("--ssh-key")
        .arg(&key)
        .arg("--known-hosts")
        .arg(dir.path().join("known_hosts"))
        .env("KUBECONFIG", joined)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(err.contains(&format!("Cluster: {}", served.url)) || out.contains(&served.url), "{out}\n{err}");
    assert!(!err.contains("SSH-only"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_watch_reconnects_through_faults_and_a_node_added_meanwhile_still_triggers() {
    use winfleet::daemon::triggers::Trigger;
    use winfleet::daemon::triggers::cluster_watch;
    let (api, _served, client) = served().await;
    let (triggers, mut received) = tokio::sync::mpsc::unbounded_channel();
    let stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn(cluster_watch::run(client, triggers, stop.clone()));
    let windows = [("kubernetes.io/os", "windows")];
    let next_change = async |received: &mut tokio::sync::mpsc::UnboundedReceiver<Trigger>| loop {
        let trigger = tokio::time::timeout(std::time::Duration::from_secs(60), received.recv()).await;
        match trigger.expect("a trigger within 60 s").expect("the watch runs") {
            Trigger::ClusterChange { addresses } if !addresses.is_empty() => return addresses,
            _ => {}
        }
    };
    // The watch is open once a new Node is seen (one seeded before it
    // opened is part of the initial listing, which triggers nothing).
    let mut opened = false;
    for i in 0..100 {
        let address = format!("10.0.1.{i}");
        api.seed(fixtures::node(&format!("win-early-{i}"), &[("InternalIP", &address)], true, &windows));
        if tokio::time::timeout(std::time::Duration::from_millis(300), received.recv()).await.is_ok() {
            opened = true;
            break;
        }
    }
    assert!(opened, "the watch never opened");

    // Every watch ends (an API server restart); the reconnection meets two 503s.
    api.fail("GET", "/api/v1/nodes", 503, None, 2);
    api.drop_watches();
    api.seed(fixtures::node("win-3", &[("InternalIP", "10.0.0.3")], true, &windows));
    assert!(
        next_change(&mut received).await.contains(&"10.0.0.3".to_owned()),
        "the Node added while the watch was down is seen"
    );
    assert_eq!(api.faults_served().len(), 2, "the reconnection went through both faults");
    stop.cancel();
}
