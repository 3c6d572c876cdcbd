//! Issue 35, item 11: the daemon's verdict on a round is `apply`'s exit
//! status (`RoundReport::failed`), the cluster part included: a round whose
//! joins all fail, that cannot read the cluster, or whose writes the API
//! refuses (RBAC short: 403) is logged with its failures (the record's
//! `failed`, the `failed=` of the "round finished with failures" line) and
//! counted `winfleet_rounds_total{result="failed"}`, which the shipped
//! alert watches. An Event the API server could not take while it was down
//! is published once it is back, once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use support::apiserver::{ApiServer, fixtures};
use support::cluster::{event_reasons, written};
use support::daemon::*;
use support::fleet::TestFleet;
use support::remote::Remote;
use winfleet::cluster::connect::Cluster;
use winfleet::cluster::join::JoinOptions;
use winfleet::daemon::round::RoundKind;
use winfleet::daemon::{self, Config, Handle};

/// `winfleet_rounds_total{result}` as the daemon exposes it.
fn rounds(handle: &Handle, result: &str) -> u64 {
    let metrics = handle.metrics.encode();
    let line = format!("winfleet_rounds_total{{result=\"{result}\"}} ");
    metrics.lines().find_map(|l| l.strip_prefix(&line)).map_or(0, |n| n.trim().parse().unwrap())
}

/// A remote whose instances (every node of `fleet`) set a label, drift
/// checked every 2 s, and an API server with a Windows Node per instance
/// (`win-0`, `win-1`, …).
fn labelled(fleet: &TestFleet) -> (ApiServer, Remote) {
    let remote = remote(fleet, "  drift:\n    interval: 2s\n");
    let mut list = String::from(
        "apiVersion: winfleet.io/v1alpha1\nkind: WindowsInstanceList\nmetadata:\n  name: t\nspec:\n  instances:\n",
    );
    let api = ApiServer::new();
    for (i, node) in fleet.nodes.iter().enumerate() {
        list.push_str(&format!("  - address: {}\n    labels:\n      example.com/team: payments\n", node.address));
        api.seed(fixtures::node(&format!("win-{i}"), &[("InternalIP", &node.address)], true, &[]));
    }
    remote.push(&[("instances.yaml", &list)], &[], "label the instances");
    (api, remote)
}

async fn start_on(api: &ApiServer, fleet: &TestFleet, config: Config) -> Handle {
    let cluster = Some(Cluster { client: api.client(), url: "in-memory".into() });
    daemon::start(config, cluster, pool(fleet)).await.unwrap()
}

fn team(api: &ApiServer, node: &str) -> Option<String> {
    let node = api.get("v1", "Node", None, node).unwrap();
    node["metadata"]["labels"]["example.com/team"].as_str().map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_35_a_round_that_cannot_read_the_cluster_is_counted_failed() {
    let fleet = TestFleet::start(1);
    let (api, remote) = labelled(&fleet);
    api.set_down(true);
    let mut handle = start_on(&api, &fleet, config(&remote)).await;
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.changed), (RoundKind::Commit, 1), "the node's files converge: {record:?}");
    assert_eq!(record.failed, 1, "the cluster that could not be read is the round's failure: {record:?}");
    assert_eq!((rounds(&handle, "failed"), rounds(&handle, "succeeded")), (1, 0));
    assert!(hosts_toml(&fleet, 0).is_some());

    // Back: the next drift round writes the Node's label and succeeds.
    api.set_down(false);
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.failed), (RoundKind::Drift, 0), "{record:?}");
    assert_eq!((rounds(&handle, "failed"), rounds(&handle, "succeeded")), (1, 1));
    assert_eq!(team(&api, "win-0").as_deref(), Some("payments"));
    stop(handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_35_a_round_whose_node_write_is_forbidden_is_counted_failed() {
    let fleet = TestFleet::start(1);
    let (api, remote) = labelled(&fleet);
    // winfleet's ClusterRole without `patch nodes`: the dry run of its patch is refused.
    api.fail("PATCH", "/api/v1/nodes/win-0", 403, None, 1);
    let mut handle = start_on(&api, &fleet, config(&remote)).await;
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.changed, record.failed), (RoundKind::Commit, 1, 1), "{record:?}");
    assert_eq!((rounds(&handle, "failed"), rounds(&handle, "succeeded")), (1, 0));
    assert_eq!(api.faults_served().len(), 1);
    assert_eq!(team(&api, "win-0"), None);

    // The rule is back: the next round writes the label and succeeds.
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.failed), (RoundKind::Drift, 0), "{record:?}");
    assert_eq!(rounds(&handle, "succeeded"), 1);
    assert_eq!(team(&api, "win-0").as_deref(), Some("payments"));
    stop(handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_35_a_round_whose_joins_all_fail_is_counted_failed() {
    let setup = support::join::setup(&["winverdict1"]).await;
    // No kubelet may submit a CSR: none bootstraps, no Node registers.
    setup.server.reject(|a| {
        (a.resource == "certificatesigningrequests" && a.verb == "create").then(|| "policy: no CSRs today".to_owned())
    });
    let files: Vec<(String, String)> = ["fleet.yaml", "services.yaml", "instances.yaml"]
        .iter()
        .map(|f| ((*f).to_owned(), std::fs::read_to_string(setup.repo.path().join(f)).unwrap()))
        .collect();
    let files: Vec<(&str, &str)> = files.iter().map(|(f, c)| (f.as_str(), c.as_str())).collect();
    let remote = Remote::new(&files);
    let join = JoinOptions {
        max_parallel: 8,
        register_timeout: Duration::from_secs(3),
        ready_timeout: Duration::from_secs(3),
        poll: Duration::from_millis(200),
    };
    let config = Config { payload_dir: Some(setup.fleet.dir().join("payload-src")), join, ..config(&remote) };
    let mut handle = daemon::start(config, Some(setup.cluster.clone()), pool(&setup.fleet)).await.unwrap();
    let record = next(&mut handle.records).await;
    assert_eq!(record.kind, RoundKind::Commit);
    assert_eq!(record.changed, 1, "the node itself was configured: {record:?}");
    assert_eq!(record.failed, 1, "its join failed: {record:?}");
    assert_eq!((rounds(&handle, "failed"), rounds(&handle, "succeeded")), (1, 0));
    assert!(setup.server.list("v1", "Node").is_empty(), "no Node registered");
    stop(handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_35_an_event_the_api_could_not_take_while_down_is_published_once_it_is_back() {
    let fleet = TestFleet::start(2);
    let (api, remote) = labelled(&fleet);
    // The API server dies right after it took winfleet's patch of win-0:
    // that patch's Event and win-1's patch meet a dead server.
    let down = api.down_switch();
    api.reject(move |a| {
        if a.resource == "nodes" && a.name == "win-0" && a.verb == "patch" && !a.dry_run {
            down.store(true, Ordering::SeqCst);
        }
        None
    });
    let mut handle = start_on(&api, &fleet, config(&remote)).await;
    let record = next(&mut handle.records).await;
    assert_eq!(record.kind, RoundKind::Commit);
    assert!(record.failed >= 1, "win-1's patch failed (and whatever else met the dead server): {record:?}");
    assert_eq!(rounds(&handle, "failed"), 1);
    assert_eq!((team(&api, "win-0").as_deref(), team(&api, "win-1")), (Some("payments"), None));
    assert!(event_reasons(&api, "win-0").is_empty(), "nothing could be published while it was down");

    // Back: the next round publishes what waited first; the first round
    // that covers win-1 (drift checks are spread over the nodes) writes it.
    api.set_down(false);
    for _ in 0..10 {
        let record = next(&mut handle.records).await;
        assert_eq!(record.failed, 0, "{record:?}");
        if team(&api, "win-1").is_some() {
            break;
        }
    }
    assert_eq!(team(&api, "win-1").as_deref(), Some("payments"));
    assert!(rounds(&handle, "succeeded") >= 1);
    assert_eq!(event_reasons(&api, "win-0"), ["NodeMetadataUpdated"], "published once, when the API was back");
    assert_eq!(event_reasons(&api, "win-1"), ["NodeMetadataFailed", "NodeMetadataUpdated"]);
    assert_eq!(written(&api, "nodes", "win-0"), 1, "win-0 was not written twice");
    // And nothing waits any more: a third round publishes nothing new.
    let _ = next(&mut handle.records).await;
    assert_eq!(event_reasons(&api, "win-0"), ["NodeMetadataUpdated"]);
    stop(handle).await;
}
