//! Key rotation over Machine-backed nodes (issue 26, point 4), end to end
//! on real sshd nodes: the test Machine provider of
//! tests/support/machine_provider.rs plays the Machine API and the cloud
//! (a VM authorizes only the key the `windows-user-data` Secret carried
//! when it booted), and two BYOH hosts are listed beside the MachineSet.
//!
//! The order is observed from the API: a watcher reads the Secret, the
//! Machines and their Nodes every few milliseconds, and each round is
//! framed by a read just before and just after it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::fs;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{Api, DynamicObject, ListParams};
use kube::{Client, ResourceExt};
use serde_json::Value;
use support::controlplane::{Backend, resource};
use support::machine_bench::{MAPI, MachineApi, MachineBench, SET, machine_set_ready};
use winfleet::cluster::keys::KeyResult;
use winfleet::reconcile::report::RoundReport;
use winfleet::ssh::{KnownHosts, Pool, Settings, load_key};
use winfleet::status::model::MachineSetPhase;
use winfleet::status::verdict::Context;

#[test]
#[ignore = "entry point of the fake kubelet process that node tests start; not a test"]
fn fake_kubelet_process() {
    support::kubelet::main_from_env();
}

const HASH: &str = "windowsmachineconfig.openshift.io/pub-key-hash";
const VERSION: &str = "windowsmachineconfig.openshift.io/version";

/// One Machine as read from the API.
#[derive(Clone, Debug, PartialEq)]
struct MachineView {
    deleting: bool,
    /// The key hash of its Node when it is `Running` with a Ready Node at
    /// the desired version (`None` otherwise).
    ready_with: Option<String>,
}

/// The API at one instant: the Secret's fingerprint and the Machines.
#[derive(Clone, Debug, PartialEq)]
struct Snapshot {
    secret: Option<String>,
    machines: BTreeMap<String, MachineView>,
}

async fn snapshot(client: &Client, version: &str) -> Snapshot {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), MAPI);
    let secret = secrets.get_opt("windows-user-data").await.unwrap();
    let secret = secret.and_then(|s| s.annotations().get("winfleet.io/authorized-key-fingerprint").cloned());
    let machines: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), MAPI, &resource("machine.openshift.io", "v1beta1", "Machine", "machines"));
    let nodes: Api<Node> = Api::all(client.clone());
    let nodes = nodes.list(&ListParams::default()).await.unwrap().items;
    let mut out = BTreeMap::new();
    for m in machines.list(&ListParams::default()).await.unwrap().items {
        let running = m.data.pointer("/status/phase").and_then(Value::as_str) == Some("Running");
        let node_name = m.data.pointer("/status/nodeRef/name").and_then(Value::as_str);
        let node = node_name.and_then(|n| nodes.iter().find(|x| x.name_any() == n));
        let ready_with =
            node.filter(|n| running && ready(n) && n.annotations().get(VERSION).map(String::as_str) == Some(version));
        out.insert(
            m.name_any(),
            MachineView {
                deleting: m.metadata.deletion_timestamp.is_some(),
                ready_with: ready_with.and_then(|n| n.annotations().get(HASH).cloned()),
            },
        );
    }
    Snapshot { secret, machines: out }
}

fn ready(node: &Node) -> bool {
    let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Reads the API every 20 ms until dropped.
struct Watcher {
    seen: Arc<Mutex<Vec<Snapshot>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Watcher {
    fn start(client: Client, version: String) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            loop {
                let now = snapshot(&client, &version).await;
                {
                    let mut log = log.lock().unwrap();
                    if log.last() != Some(&now) {
                        log.push(now);
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        Watcher { seen, task }
    }

    fn seen(&self) -> Vec<Snapshot> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Replaces the fleet's key: a new key pair, authorized on the BYOH hosts
/// beside the old one (the VMs keep what they booted with). Returns the new
/// key's authorized_keys line.
fn rotate(bench: &mut MachineBench) -> String {
    let (new_key, new_public) = {
        let fleet = bench.cloud.fleet();
        let (key, public) = support::join::new_key(&fleet);
        let authorized = fleet.dir().join("authorized_keys");
        let mut text = fs::read_to_string(&authorized).unwrap();
        text.push_str(&public);
        fs::write(&authorized, text).unwrap();
        (key, public)
    };
    bench.pool = Pool::new(
        load_key(&new_key).unwrap(),
        KnownHosts::load(&bench.cloud.known_hosts, false).unwrap(),
        Settings { connect_timeout: Duration::from_secs(2), ..Settings::default() },
    );
    new_public.split_whitespace().take(2).collect::<Vec<_>>().join(" ")
}

/// The MachineSet's status verdict after `report`: phase, reason, message.
fn status(report: &RoundReport) -> (MachineSetPhase, &'static str, String) {
    let ctx = Context { round: report, drift_check: false, warn: false, at_revision: false, suspended: false };
    let verdict = winfleet::status::machineset::machine_set(SET, ctx).unwrap();
    (verdict.phase, verdict.reason, verdict.message)
}

fn count_events(events: &[k8s_openapi::api::events::v1::Event], reason: &str) -> usize {
    events.iter().filter(|e| e.reason.as_deref() == Some(reason)).count()
}

async fn events(bench: &MachineBench) -> Vec<k8s_openapi::api::events::v1::Event> {
    let mut all = Vec::new();
    for namespace in [MAPI, "default"] {
        let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(bench.api.client(), namespace);
        all.extend(api.list(&ListParams::default()).await.unwrap().items);
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_rotation_replaces_each_machine_only_once_the_last_replacement_is_a_ready_node_with_the_new_key() {
    rotation_over_two_machines_and_two_hosts(Backend::InMemory, MachineApi::Model).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_rotation_replaces_each_machine_one_at_a_time_on_the_real_control_plane() {
    rotation_over_two_machines_and_two_hosts(Backend::Real, MachineApi::Model).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_rotation_replaces_each_machine_one_at_a_time_under_machine_api_operators_controllers() {
    rotation_over_two_machines_and_two_hosts(Backend::Real, MachineApi::Real).await;
}

async fn rotation_over_two_machines_and_two_hosts(backend: Backend, machine_api: MachineApi) {
    let mut bench = MachineBench::start_on(backend, machine_api, 4, 2, Some(2)).await;
    let byoh_joined = |r: &RoundReport| r.cluster.as_ref().is_some_and(|c| c.associated.len() == 4);
    bench.rounds_until(60, |r| machine_set_ready(r) && byoh_joined(r)).await;
    let client = bench.api.client();
    let version = bench.version();
    let before = snapshot(&client, &version).await;
    let originals: Vec<String> = before.machines.keys().cloned().collect();
    assert_eq!(originals.len(), 2);
    let old_hash = bench.pool.public_key_hash();

    let line = rotate(&mut bench);
    let (new_hash, new_fingerprint) = (bench.pool.public_key_hash(), bench.pool.public_key_fingerprint());
    assert_ne!(old_hash, new_hash);
    let watcher = Watcher::start(client.clone(), version.clone());
    let done = |s: &Snapshot| {
        s.machines.len() == 2
            && s.machines.iter().all(|(n, m)| !originals.contains(n) && m.ready_with.as_deref() == Some(&*new_hash))
    };
    let mut last = snapshot(&client, &version).await;
    let mut deletions = Vec::new();
    for round in 0.. {
        assert!(round < 40, "the rotation did not finish: {last:#?}");
        let report = bench.round().await;
        // A Machine that keeps the old key waits for its replacement: no failure.
        assert!(!report.failed(), "{}", report.render_text());
        let now = snapshot(&client, &version).await;
        let gone: Vec<&String> = last
            .machines
            .iter()
            .filter(|(n, m)| !m.deleting && now.machines.get(*n).is_none_or(|x| x.deleting))
            .map(|(n, _)| n)
            .collect();
        assert!(gone.len() <= 1, "one Machine at a time: {gone:?}\n{}", report.render_text());
        if let Some(machine) = gone.first() {
            // Every other Machine was a Ready node when the round began: an
            // original with the old key, or a replacement with the new one.
            for (name, other) in last.machines.iter().filter(|(n, _)| n != machine) {
                let want = if originals.contains(name) { &old_hash } else { &new_hash };
                assert_eq!(other.ready_with.as_ref(), Some(want), "{name} when {machine} went: {last:#?}");
            }
            assert_eq!(now.secret.as_deref(), Some(&*new_fingerprint), "the Secret first");
            deletions.push((*machine).clone());
        }
        last = now;
        if done(&last) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(deletions, originals, "each original replaced once, in name order");
    // The watcher saw no Machine deleted before the Secret authorized the
    // new key, and never two of the set down at once.
    let seen = watcher.seen();
    for s in &seen {
        let up = s.machines.values().filter(|m| !m.deleting && m.ready_with.is_some()).count();
        assert!(up >= 1, "both Machines down at once: {s:#?}");
        if originals.iter().any(|o| s.machines.get(o).is_none_or(|m| m.deleting)) {
            assert_eq!(s.secret.as_deref(), Some(&*new_fingerprint), "a Machine deleted before the Secret: {s:#?}");
        }
    }
    let booted = bench.cloud.log().booted;
    assert_eq!(booted.len(), 4);
    for (machine, key) in &booted[2..] {
        assert_eq!(key.as_deref(), Some(line.as_str()), "{machine} booted with the new key");
    }
    // The BYOH hosts trust the new key (their pub-key-hash updated).
    for address in bench.cloud.hosts() {
        let nodes: Api<Node> = Api::all(client.clone());
        let node = nodes.list(&ListParams::default()).await.unwrap().items.into_iter().find(|n| {
            n.status.as_ref().and_then(|s| s.addresses.as_ref()).is_some_and(|a| a.iter().any(|a| a.address == address))
        });
        let node = node.unwrap_or_else(|| panic!("no Node for {address}"));
        assert_eq!(node.annotations().get(HASH), Some(&new_hash), "{address}");
    }
    let events = events(&bench).await;
    assert_eq!(count_events(&events, "MachineReplaced"), 2);
    assert_eq!(count_events(&events, "MachineConfigureFailed"), 0, "a Machine awaiting replacement is no failure");

    let next = bench.round().await;
    let text = next.render_text();
    assert!(!next.failed(), "{text}");
    assert!(!next.has_changes(), "the next round writes nothing: {text}");
    let cluster = next.cluster.as_ref().unwrap();
    assert!(cluster.keys.is_empty() && cluster.joins.is_empty(), "{text}");
    assert_eq!(status(&next).1, "InSync", "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_that_cannot_become_ready_stops_the_rotation_and_says_why() {
    replacement_never_ready(Backend::InMemory, MachineApi::Model).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_that_cannot_become_ready_stops_the_rotation_under_machine_api_operators_controllers() {
    replacement_never_ready(Backend::Real, MachineApi::Real).await;
}

async fn replacement_never_ready(backend: Backend, machine_api: MachineApi) {
    let mut bench = MachineBench::start_on(backend, machine_api, 3, 0, Some(2)).await;
    bench.rounds_until(30, machine_set_ready).await;
    let originals: Vec<String> =
        bench.machines().await.iter().map(|m| m["metadata"]["name"].as_str().unwrap().to_owned()).collect();
    // The replacement's VM boots from an image that ignores the user data:
    // winfleet cannot log in to it.
    bench.cloud.ignore_user_data();
    rotate(&mut bench);
    let stopped = |r: &RoundReport| {
        r.cluster.as_ref().is_some_and(|c| c.keys.iter().any(|k| matches!(k.result, KeyResult::RotationStopped { .. })))
    };
    let reports = bench.rounds_until(20, stopped).await;
    let last = reports.last().unwrap();
    let text = last.render_text();
    let replacement = bench
        .machines()
        .await
        .iter()
        .map(|m| m["metadata"]["name"].as_str().unwrap().to_owned())
        .find(|n| !originals.contains(n))
        .unwrap();
    let line = text.lines().find(|l| l.contains("key rotation STOPPED")).unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains(&format!("{} is not replaced", originals[1])), "{line}");
    assert!(line.contains(&format!("replacement Machine {replacement} did not become a Ready node")), "{line}");
    assert!(line.contains("refused public key authentication"), "{line}");
    let (phase, reason, message) = status(last);
    assert_eq!((phase, reason), (MachineSetPhase::Progressing, "KeyRotationStopped"), "{message}");
    assert!(message.contains(&replacement) && message.contains("key rotation stopped"), "{message}");

    // It stays stopped: more rounds delete nothing, and one Event said why.
    for _ in 0..2 {
        let more = bench.round().await;
        assert!(stopped(&more), "{}", more.render_text());
    }
    let machines: Vec<String> =
        bench.machines().await.iter().map(|m| m["metadata"]["name"].as_str().unwrap().to_owned()).collect();
    assert!(machines.contains(&originals[1]), "the other Machine is not deleted: {machines:?}");
    assert!(!machines.contains(&originals[0]));
    assert_eq!(bench.cloud.log().deleted, [originals[0].clone()]);
    let events = events(&bench).await;
    let about: Vec<_> = events.iter().filter(|e| e.reason.as_deref() == Some("KeyRotationStopped")).collect();
    assert_eq!(about.len(), 1, "{about:#?}");
    let regarding = about[0].regarding.as_ref().unwrap();
    assert_eq!((regarding.kind.as_deref(), regarding.name.as_deref()), (Some("MachineSet"), Some(SET)));
    let note = about[0].note.as_deref().unwrap_or_default();
    assert!(note.contains(&replacement) && note.contains("refused public key authentication"), "{note}");
}
