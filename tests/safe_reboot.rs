//! The safe-reboot rollout against the in-memory Kubernetes API: drain,
//! one node at a time, the node's return judged by its new boot. Timing runs
//! on tokio's paused clock with simulated hosts (their boot and readiness
//! driven through the API server); the SSH side of the reboot runs against
//! real sshd in tests/cluster_cli.rs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

use serde_json::json;
use support::apiserver::{ApiServer, fixtures};
use support::cluster::*;
use winfleet::cluster::events::Events;
use winfleet::cluster::observe::observe;
use winfleet::cluster::rollout::{self, Candidate, RebootResult, RebootStage, RolloutOptions};
use winfleet::cluster::{CORDONED_ANNOTATION, REBOOT_REQUIRED_ANNOTATION, REBOOTING_ANNOTATION};
use winfleet::desired::model::Instance;
use winfleet::engine::host::Host;

#[derive(Clone)]
struct SimHost {
    api: ApiServer,
    boot_time: Duration,
    /// After the boot, before the kubelet's first heartbeat.
    heartbeat_after: Duration,
    /// The node lifecycle controller is slower than the reboot: the Node
    /// stays Ready (with its old heartbeat) while the node is down.
    stale_ready: bool,
    never_back: BTreeSet<String>,
    /// The old kubelet posts one more heartbeat while the node shuts down.
    late_heartbeat: bool,
    state: Arc<Mutex<HashMap<String, (u32, bool)>>>, // address -> (boot number, down)
    /// Nodes whose kubelet has not posted since their reboot.
    kubelet_down: Arc<Mutex<BTreeSet<String>>>,
    nodes: BTreeMap<String, String>, // address -> node name
}

impl SimHost {
    fn new(api: &ApiServer, nodes: BTreeMap<String, String>, boot_time: Duration) -> Self {
        let host = SimHost {
            api: api.clone(),
            boot_time,
            heartbeat_after: Duration::ZERO,
            stale_ready: false,
            never_back: BTreeSet::new(),
            late_heartbeat: false,
            state: Arc::default(),
            kubelet_down: Arc::default(),
            nodes,
        };
        let kubelet = host.clone();
        tokio::spawn(async move {
            loop {
                for (address, node) in &kubelet.nodes {
                    let (boot, down) = kubelet.state.lock().unwrap().get(address).copied().unwrap_or((0, false));
                    if !down && !kubelet.kubelet_down.lock().unwrap().contains(address) {
                        heartbeat(&kubelet.api, node, boot, boot > 0);
                    }
                }
                tokio::time::sleep(Duration::from_secs(10)).await;
            }
        });
        host
    }
}

fn set_ready(api: &ApiServer, node: &str, ready: bool) {
    api.update("v1", "Node", None, node, |n| {
        n["status"]["conditions"][0]["status"] = json!(if ready { "True" } else { "False" });
    });
}

/// The heartbeat of the kubelet running in `boot`, which reports that boot
/// as its Node's bootID; stamped as [`SimHost`] says, by whether it comes
/// `after_a_reboot` command.
fn heartbeat(api: &ApiServer, node: &str, boot: u32, after_a_reboot: bool) {
    let skew = jiff::SignedDuration::from_secs(if after_a_reboot { 2 } else { -2 });
    let stamp = jiff::Timestamp::now().checked_add(skew).unwrap().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    api.update("v1", "Node", None, node, |n| {
        n["status"]["conditions"][0]["lastHeartbeatTime"] = json!(stamp);
        n["status"]["nodeInfo"] = json!({
            "machineID": node, "systemUUID": "", "bootID": format!("boot-{boot}"), "kernelVersion": "10.0.20348",
            "osImage": "sim", "containerRuntimeVersion": "containerd://1.7.0", "kubeletVersion": "v1.33.2",
            "kubeProxyVersion": "", "operatingSystem": "windows", "architecture": "amd64",
        });
    });
}

impl Host for SimHost {
    async fn boot_id(&self, instance: &Instance) -> Result<String, String> {
        let state = self.state.lock().unwrap();
        match state.get(&instance.address).copied().unwrap_or((0, false)) {
            (_, true) => Err("Connection refused".into()),
            (boot, false) => Ok(format!("boot-{boot}")),
        }
    }

    async fn reboot(&self, instance: &Instance) -> Result<(), String> {
        let address = instance.address.clone();
        let node = self.nodes[&address].clone();
        let boot = {
            let mut state = self.state.lock().unwrap();
            let entry = state.entry(address.clone()).or_default();
            entry.1 = true;
            entry.0
        };
        if self.late_heartbeat {
            // After the reboot command, from the boot that is ending.
            heartbeat(&self.api, &node, boot, true);
        }
        self.kubelet_down.lock().unwrap().insert(address.clone());
        if !self.stale_ready {
            set_ready(&self.api, &node, false);
        }
        if self.never_back.contains(&address) {
            return Ok(());
        }
        let (api, state, boot_time, heartbeat_after) =
            (self.api.clone(), Arc::clone(&self.state), self.boot_time, self.heartbeat_after);
        let kubelet_down = Arc::clone(&self.kubelet_down);
        tokio::spawn(async move {
            tokio::time::sleep(boot_time).await;
            {
                let mut state = state.lock().unwrap();
                let entry = state.entry(address.clone()).or_default();
                *entry = (entry.0 + 1, false);
            }
            tokio::time::sleep(heartbeat_after).await;
            kubelet_down.lock().unwrap().remove(&address);
            let boot = state.lock().unwrap().get(&address).map_or(1, |s| s.0);
            heartbeat(&api, &node, boot, true);
            set_ready(&api, &node, true);
        });
        Ok(())
    }
}

/// Instances (posix, unreachable: the simulated host stands in), seeded
/// Windows Nodes win-1..n at 10.2.0.1..n, and their simulated host.
fn fleet(api: &ApiServer, n: usize, boot_time: Duration) -> (Vec<Instance>, SimHost) {
    let repo = Repo::new();
    let entries: String = (1..=n).map(|i| format!("  - address: 10.2.0.{i}\n")).collect();
    repo.instances(&entries);
    let desired = repo.desired();
    let mut nodes = BTreeMap::new();
    for i in 1..=n {
        api.seed(fixtures::node(&format!("win-{i}"), &[("InternalIP", &format!("10.2.0.{i}"))], true, &[]));
        nodes.insert(format!("10.2.0.{i}"), format!("win-{i}"));
    }
    (desired.instances.into_values().collect(), SimHost::new(api, nodes, boot_time))
}

/// One rollout over every instance, with the test settings.
async fn roll_all(api: &ApiServer, host: &SimHost, instances: &[Instance]) -> Vec<rollout::RebootReport> {
    let events = Events::new(api.client());
    let candidates = candidates(api, instances).await;
    rollout::rollout(&api.client(), &events, host, candidates, &[], rollout_options(), &CancellationToken::new()).await
}

async fn candidates<'a>(api: &ApiServer, instances: &'a [Instance]) -> Vec<Candidate<'a>> {
    let facts = observe(&api.client()).await.unwrap();
    instances
        .iter()
        .map(|i| {
            let name = format!("win-{}", i.address.rsplit('.').next().unwrap());
            Candidate { instance: i, node: facts.nodes[&name].clone() }
        })
        .collect()
}

fn rollout_options() -> RolloutOptions {
    RolloutOptions {
        max_unavailable: 1,
        drain_timeout: Duration::from_secs(300),
        reboot_timeout: Duration::from_secs(600),
        poll: Duration::from_secs(5),
    }
}

/// (time since start, node, unschedulable) for every Node write by winfleet
/// that changed `spec.unschedulable`.
fn cordon_timeline(api: &ApiServer, start: tokio::time::Instant) -> Vec<(Duration, String, bool)> {
    let mut last: HashMap<String, bool> = HashMap::new();
    let mut out = Vec::new();
    for w in api.history().iter().filter(|w| w.resource == "nodes") {
        let now = w.object["spec"]["unschedulable"].as_bool().unwrap_or(false);
        let by_winfleet = w.field_manager.as_deref() == Some("winfleet");
        if last.insert(w.name.clone(), now).unwrap_or(false) != now && by_winfleet {
            out.push((w.at.duration_since(start), w.name.clone(), now));
        }
    }
    out
}

#[tokio::test(start_paused = true)]
async fn three_nodes_reboot_strictly_one_at_a_time() {
    let api = ApiServer::new();
    let (instances, host) = fleet(&api, 3, Duration::from_secs(90));
    for i in 1..=3 {
        api.seed(fixtures::pod(
            "apps",
            &format!("web-{i}"),
            &format!("win-{i}"),
            &[("app", "web")],
            Some("ReplicaSet"),
        ));
        api.seed(fixtures::pod("kube-system", &format!("ds-{i}"), &format!("win-{i}"), &[], Some("DaemonSet")));
    }
    let start = tokio::time::Instant::now();
    let reports = roll_all(&api, &host, &instances).await;
    let results: Vec<(String, RebootResult)> = reports.into_iter().map(|r| (r.node, r.result)).collect();
    let rebooted = |evicted| RebootResult::Rebooted { evicted, resumed: false };
    assert_eq!(
        results,
        [("win-1".to_owned(), rebooted(1)), ("win-2".to_owned(), rebooted(1)), ("win-3".to_owned(), rebooted(1))]
    );
    let timeline = cordon_timeline(&api, start);
    let order: Vec<String> =
        timeline.iter().map(|(_, n, c)| format!("{} {n}", if *c { "cordon" } else { "uncordon" })).collect();
    assert_eq!(
        order,
        ["cordon win-1", "uncordon win-1", "cordon win-2", "uncordon win-2", "cordon win-3", "uncordon win-3"]
    );
    for pair in timeline.chunks(2) {
        let held = pair[1].0 - pair[0].0;
        assert!(held >= Duration::from_secs(90), "{} was back before its boot time: {held:?}", pair[0].1);
        assert!(held <= Duration::from_secs(90) + Duration::from_secs(15), "{} held too long: {held:?}", pair[0].1);
    }
    for w in timeline.windows(2) {
        assert!(w[0].0 <= w[1].0);
    }
    // DaemonSet pods stay; the others were evicted through the Eviction API.
    assert_eq!(
        api.list("v1", "Pod").iter().map(|p| p["metadata"]["name"].as_str().unwrap().to_owned()).collect::<Vec<_>>(),
        ["ds-1", "ds-2", "ds-3"]
    );
    assert_eq!(api.history().iter().filter(|w| w.verb == "evict").count(), 3);
    for i in 1..=3 {
        let node = api.get("v1", "Node", None, &format!("win-{i}")).unwrap();
        let annotations = node["metadata"]["annotations"].as_object().cloned().unwrap_or_default();
        for key in [REBOOTING_ANNOTATION, CORDONED_ANNOTATION, REBOOT_REQUIRED_ANNOTATION] {
            assert!(!annotations.contains_key(key), "win-{i} still has {key}");
        }
        assert!(!node["spec"]["unschedulable"].as_bool().unwrap_or(false));
        assert_eq!(event_reasons(&api, &format!("win-{i}")), ["Cordoned", "Rebooting", "Rebooted"]);
    }
    // WMCO's signal went up with each node's cordon (and is gone, above).
    for i in 1..=3 {
        let name = format!("win-{i}");
        let history = api.history();
        let cordon = history
            .iter()
            .find(|w| {
                w.name == name
                    && w.field_manager.as_deref() == Some("winfleet")
                    && w.object["spec"]["unschedulable"] == true
            })
            .unwrap();
        assert!(cordon.object["metadata"]["annotations"].get(REBOOT_REQUIRED_ANNOTATION).is_some(), "{name}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_ready_condition_from_before_the_reboot_does_not_count() {
    let api = ApiServer::new();
    let (instances, mut host) = fleet(&api, 1, Duration::from_secs(20));
    // The node is back (new boot id) after 20 s, before anything marked it
    // NotReady; its kubelet posts its first heartbeat 40 s later.
    host.stale_ready = true;
    host.heartbeat_after = Duration::from_secs(40);
    let start = tokio::time::Instant::now();
    let reports = roll_all(&api, &host, &instances).await;
    assert_eq!(reports[0].result, RebootResult::Rebooted { evicted: 0, resumed: false }, "{reports:?}");
    let timeline = cordon_timeline(&api, start);
    let (at, _, cordoned) = timeline.last().unwrap();
    assert!(!cordoned);
    assert!(*at >= Duration::from_secs(60), "uncordoned only after a fresh heartbeat, at {at:?}");
}

#[tokio::test(start_paused = true)]
async fn a_heartbeat_the_old_kubelet_posts_while_shutting_down_does_not_count() {
    let api = ApiServer::new();
    let (instances, mut host) = fleet(&api, 1, Duration::from_secs(20));
    // The old kubelet heartbeats after the reboot command, the Node stays
    // Ready, the node is back after 20 s and its new kubelet first posts
    // 40 s after that: only the Node's bootID tells the two apart.
    host.stale_ready = true;
    host.late_heartbeat = true;
    host.heartbeat_after = Duration::from_secs(40);
    let start = tokio::time::Instant::now();
    let reports = roll_all(&api, &host, &instances).await;
    assert_eq!(reports[0].result, RebootResult::Rebooted { evicted: 0, resumed: false }, "{reports:?}");
    let (at, _, cordoned) = *cordon_timeline(&api, start).last().unwrap();
    assert!(!cordoned);
    assert!(at >= Duration::from_secs(60), "uncordoned only once the new boot's kubelet posted, at {at:?}");
}

#[tokio::test(start_paused = true)]
async fn a_node_that_never_comes_back_stops_the_rollout() {
    let api = ApiServer::new();
    let (instances, mut host) = fleet(&api, 3, Duration::from_secs(60));
    host.never_back.insert("10.2.0.1".into());
    let events = Events::new(api.client());
    let start = tokio::time::Instant::now();
    let reports = roll_all(&api, &host, &instances).await;
    assert!(
        matches!(&reports[0].result, RebootResult::Failed { stage: RebootStage::WaitBack, reason } if reason.contains("did not come back within 600s") && reason.contains("does not answer over SSH")),
        "{reports:?}"
    );
    for r in &reports[1..] {
        assert!(
            matches!(&r.result, RebootResult::NotStarted { reason } if reason.contains("node win-1 is not back")),
            "{r:?}"
        );
    }
    assert!(tokio::time::Instant::now().duration_since(start) >= Duration::from_secs(600));
    let win1 = api.get("v1", "Node", None, "win-1").unwrap();
    assert_eq!(win1["spec"]["unschedulable"], true, "a node that is not back stays cordoned");
    assert!(win1["metadata"]["annotations"].get(REBOOTING_ANNOTATION).is_some());
    assert_eq!(written(&api, "nodes", "win-2"), 0);
    assert_eq!(event_reasons(&api, "win-1"), ["Cordoned", "Rebooting", "RebootFailed"]);

    // The next round: win-1 still holds the only slot, so nothing else starts.
    let facts = observe(&api.client()).await.unwrap();
    let rest: Vec<Candidate<'_>> = candidates(&api, &instances).await.into_iter().skip(1).collect();
    let others: Vec<String> = facts.nodes.values().filter(|n| n.in_disruption()).map(|n| n.name.clone()).collect();
    assert_eq!(others, ["win-1"]);
    let reports =
        rollout::rollout(&api.client(), &events, &host, rest, &others, rollout_options(), &CancellationToken::new())
            .await;
    assert!(
        reports.iter().all(|r| matches!(&r.result, RebootResult::NotStarted { reason } if reason.contains("win-1"))),
        "{reports:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_drain_blocked_by_a_disruption_budget_waits_until_released() {
    let api = ApiServer::new();
    let (instances, host) = fleet(&api, 2, Duration::from_secs(30));
    api.seed(fixtures::pod("apps", "db-0", "win-1", &[("app", "db")], Some("StatefulSet")));
    api.seed(fixtures::pod("apps", "db-1", "win-2", &[("app", "db")], Some("StatefulSet")));
    api.seed(fixtures::pdb("apps", "db", &[("app", "db")], Some(json!(2)), None));
    let only_first: Vec<Instance> = instances.into_iter().take(1).collect();
    let candidates = candidates(&api, &only_first).await;
    let events = Events::new(api.client());
    let client = api.client();
    let stop = CancellationToken::new();
    let rollout = rollout::rollout(&client, &events, &host, candidates, &[], rollout_options(), &stop);
    let meanwhile = async {
        tokio::time::sleep(Duration::from_secs(120)).await;
        assert!(api.get("v1", "Pod", Some("apps"), "db-0").is_some(), "the budget holds the pod");
        assert_eq!(event_reasons(&api, "win-1"), ["Cordoned", "DrainBlocked"], "reported once, retried");
        assert_eq!(api.get("v1", "Node", None, "win-1").unwrap()["spec"]["unschedulable"], true);
        // A third replica becomes healthy elsewhere: the budget allows the eviction.
        api.seed(fixtures::pod("apps", "db-2", "win-2", &[("app", "db")], Some("StatefulSet")));
    };
    let (reports, ()) = tokio::join!(rollout, meanwhile);
    assert_eq!(reports[0].result, RebootResult::Rebooted { evicted: 1, resumed: false });
    assert!(api.get("v1", "Pod", Some("apps"), "db-0").is_none());
    assert_eq!(event_reasons(&api, "win-1"), ["Cordoned", "DrainBlocked", "Rebooting", "Rebooted"]);
}

#[tokio::test(start_paused = true)]
async fn a_drain_that_times_out_uncordons_and_the_rollout_goes_on() {
    let api = ApiServer::new();
    let (instances, host) = fleet(&api, 2, Duration::from_secs(30));
    api.seed(fixtures::pod("apps", "db-0", "win-1", &[("app", "db")], Some("StatefulSet")));
    api.seed(fixtures::pdb("apps", "db", &[("app", "db")], None, Some(json!(0))));
    let reports = roll_all(&api, &host, &instances).await;
    assert!(
        matches!(&reports[0].result, RebootResult::Failed { stage: RebootStage::Drain, reason } if reason.contains("drain timed out after 300s") && reason.contains("apps/db-0") && reason.contains("disruption budget")),
        "{reports:?}"
    );
    assert_eq!(reports[1].result, RebootResult::Rebooted { evicted: 0, resumed: false });
    let win1 = api.get("v1", "Node", None, "win-1").unwrap();
    assert_ne!(win1["spec"]["unschedulable"], true, "nothing was disrupted: uncordoned");
    assert!(win1["metadata"]["annotations"].get(REBOOTING_ANNOTATION).is_none());
    assert!(win1["metadata"]["annotations"].get(REBOOT_REQUIRED_ANNOTATION).is_some(), "the reboot is still owed");
}

#[tokio::test(start_paused = true)]
async fn a_reboot_interrupted_by_a_crash_is_finished_by_the_next_round() {
    let api = ApiServer::new();
    let (instances, host) = fleet(&api, 2, Duration::from_secs(30));
    // An earlier winfleet cordoned win-2 and rebooted it (boot-0 -> boot-1), then died.
    host.state.lock().unwrap().insert("10.2.0.2".into(), (1, false));
    api.update("v1", "Node", None, "win-2", |n| {
        n["spec"]["unschedulable"] = json!(true);
        n["metadata"]["annotations"] =
            json!({REBOOTING_ANNOTATION: "boot-0", CORDONED_ANNOTATION: "true", REBOOT_REQUIRED_ANNOTATION: ""});
    });
    let start = tokio::time::Instant::now();
    let reports = roll_all(&api, &host, &instances).await;
    assert_eq!(reports[0].node, "win-2", "the disrupted node is finished first");
    assert_eq!(reports[0].result, RebootResult::Rebooted { evicted: 0, resumed: true });
    assert_eq!(reports[1].result, RebootResult::Rebooted { evicted: 0, resumed: false });
    let order: Vec<String> = cordon_timeline(&api, start)
        .iter()
        .map(|(_, n, c)| format!("{} {n}", if *c { "cordon" } else { "uncordon" }))
        .collect();
    assert_eq!(order, ["uncordon win-2", "cordon win-1", "uncordon win-1"]);
    assert_eq!(host.state.lock().unwrap()["10.2.0.2"].0, 1, "win-2 had rebooted already: not rebooted again");
}

#[tokio::test(start_paused = true)]
async fn an_administrators_cordon_is_kept_after_a_safe_reboot() {
    let api = ApiServer::new();
    let (instances, host) = fleet(&api, 1, Duration::from_secs(30));
    let candidates = candidates(&api, &instances).await;
    // The administrator cordons the node after winfleet observed it.
    api.update("v1", "Node", None, "win-1", |n| n["spec"]["unschedulable"] = json!(true));
    let events = Events::new(api.client());
    let reports =
        rollout::rollout(&api.client(), &events, &host, candidates, &[], rollout_options(), &CancellationToken::new())
            .await;
    assert_eq!(reports[0].result, RebootResult::Rebooted { evicted: 0, resumed: false });
    let node = api.get("v1", "Node", None, "win-1").unwrap();
    assert_eq!(node["spec"]["unschedulable"], true, "not winfleet's cordon: kept");
    assert!(node["metadata"]["annotations"].get(CORDONED_ANNOTATION).is_none());
    assert!(node["metadata"]["annotations"].get(REBOOTING_ANNOTATION).is_none());
}
