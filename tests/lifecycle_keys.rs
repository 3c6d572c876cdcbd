//! Key rotation, end to end: four joined BYOH hosts, the fleet's SSH key
//! replaced, three hosts already trusting the new key and one not; two
//! Machine-backed Windows nodes of one MachineSet whose Nodes carry the old
//! key's hash.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::fs;

use support::apiserver::fixtures;
use support::join::{Setup, logs, new_key, node, round, setup};
use winfleet::cluster::join::JoinResult;
use winfleet::cluster::keys::KeyResult;
use winfleet::ssh::{KnownHosts, Pool, Settings, load_key};

#[test]
#[ignore = "entry point of the fake kubelet process that node tests start; not a test"]
fn fake_kubelet_process() {
    support::kubelet::main_from_env();
}

const HASH: &str = "windowsmachineconfig.openshift.io/pub-key-hash";
const NAMES: [&str; 4] = ["win-k1", "win-k2", "win-k3", "win-k4"];

/// Two Running Machines of MachineSet `winworker` with Windows Nodes that
/// trust `old_hash` and are at the desired version.
fn seed_machines(setup: &Setup, old_hash: &str) {
    setup.server.seed(fixtures::machine_set("winworker", 2, &[("app.kubernetes.io/managed-by", "winfleet")]));
    // A MachineSet winfleet does not manage: its Machine is never deleted.
    setup.server.seed(fixtures::machine_set("theirs", 1, &[]));
    let mut theirs = fixtures::machine("theirs-1", "Running", "127.0.0.251", "win-machine-9");
    theirs["metadata"]["labels"]["machine.openshift.io/cluster-api-machineset"] = "theirs".into();
    setup.server.seed(theirs);
    let mut node = fixtures::node("win-machine-9", &[("InternalIP", "127.0.0.251")], true, &[]);
    node["metadata"]["annotations"] =
        serde_json::json!({ HASH: old_hash, "windowsmachineconfig.openshift.io/version": setup.version() });
    setup.server.seed(node);
    for (i, ip) in [(1, "127.0.0.254"), (2, "127.0.0.253")] {
        let name = format!("win-machine-{i}");
        let mut machine = fixtures::machine(&format!("winworker-{i}"), "Running", ip, &name);
        machine["metadata"]["labels"]["machine.openshift.io/cluster-api-machineset"] = "winworker".into();
        setup.server.seed(machine);
        let mut node = fixtures::node(&name, &[("InternalIP", ip)], true, &[]);
        node["metadata"]["annotations"] = serde_json::json!({
            HASH: old_hash,
            "windowsmachineconfig.openshift.io/version": setup.version(),
        });
        setup.server.seed(node);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_fleet_key_updates_hosts_that_accept_it_reports_the_one_that_does_not_and_replaces_machines() {
    let mut setup = setup(&NAMES).await;
    let first = round(&setup).await;
    let joins = &first.cluster.as_ref().unwrap().joins;
    assert!(joins.iter().all(|j| j.result == JoinResult::Joined), "{}\n{}", first.render_text(), logs(&setup.fleet));
    let old_hash = setup.pool.public_key_hash();
    seed_machines(&setup, &old_hash);

    // win-k4 keeps trusting only the old key; the others trust both.
    let root = setup.fleet.dir().to_owned();
    let only_old = root.join("authorized_keys.old");
    fs::copy(root.join("authorized_keys"), &only_old).unwrap();
    setup.fleet.nodes[3].use_authorized_keys(&only_old);
    let (new_key, new_public) = new_key(&setup.fleet);
    let mut authorized = fs::read_to_string(root.join("authorized_keys")).unwrap();
    authorized.push_str(&new_public);
    fs::write(root.join("authorized_keys"), authorized).unwrap();
    let pids = setup.fleet.nodes[3].service_pids();
    setup.pool = Pool::new(
        load_key(&new_key).unwrap(),
        KnownHosts::load(&setup.fleet.known_hosts, false).unwrap(),
        Settings::default(),
    );
    let new_hash = setup.pool.public_key_hash();
    assert_ne!(old_hash, new_hash);
    let line: String = new_public.split_whitespace().take(2).collect::<Vec<_>>().join(" ");

    // The plan: Machines first, one at a time; the refusing host named
    // with the line to add; nothing written.
    setup.options.dry_run = true;
    let plan = round(&setup).await;
    setup.options.dry_run = false;
    let text = plan.render_text();
    let cluster_part = text.split_once("Cluster http").map(|(_, c)| c).unwrap_or_default();
    let first_line = cluster_part.lines().nth(1).unwrap_or_default();
    assert!(first_line.contains("to do: replace Machine winworker-1"), "Machines first: {text}");
    assert!(text.contains("Machine winworker-2 waits"), "{text}");
    assert!(text.contains(&format!("add this public key to its authorized_keys: {line}")), "{text}");
    assert!(!text.contains("PRIVATE KEY"), "{text}");
    assert_eq!(node(&setup.server, "win-k1")["metadata"]["annotations"][HASH], old_hash.as_str(), "a plan");

    let report = round(&setup).await;
    let text = report.render_text();
    let keys = &report.cluster.as_ref().unwrap().keys;
    for name in &NAMES[..3] {
        assert_eq!(node(&setup.server, name)["metadata"]["annotations"][HASH], new_hash.as_str(), "{name}: {text}");
    }
    let k4 = keys.iter().find(|k| k.node == "win-k4").unwrap();
    assert!(
        matches!(&k4.result, KeyResult::KeyRejected { authorized_key, fingerprint }
            if *authorized_key == line && fingerprint.starts_with("SHA256:")),
        "{text}"
    );
    let k4_node = node(&setup.server, "win-k4");
    assert_eq!(k4_node["metadata"]["annotations"][HASH], old_hash.as_str(), "unchanged");
    assert_ne!(k4_node["spec"]["unschedulable"], true, "left running, not cordoned");
    assert_eq!(setup.fleet.nodes[3].service_pids(), pids, "its services keep running");
    let machines: Vec<String> = setup
        .server
        .list("machine.openshift.io/v1beta1", "Machine")
        .iter()
        .map(|m| m["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(machines, ["theirs-1", "winworker-2"], "one Machine replaced at a time, only winfleet's: {text}");
    assert!(text.contains("Machine theirs-1 waits: its MachineSet theirs is not managed by winfleet"), "{text}");
    let events = setup.server.list("events.k8s.io/v1", "Event");
    let count = |reason: &str| events.iter().filter(|e| e["reason"] == reason).count();
    assert_eq!(count("PublicKeyUpdated"), 3);
    assert_eq!(count("PublicKeyRejected"), 1);
    assert_eq!(count("MachineReplaced"), 1);
    let rejected = events.iter().find(|e| e["reason"] == "PublicKeyRejected").unwrap();
    assert!(rejected["note"].as_str().unwrap().contains(&line), "{rejected:#}");

    // The replacement is not Running yet: the second Machine waits.
    setup.server.seed({
        let mut m = fixtures::machine("winworker-3", "Provisioning", "127.0.0.252", "");
        m["metadata"]["labels"]["machine.openshift.io/cluster-api-machineset"] = "winworker".into();
        m
    });
    let next = round(&setup).await;
    let waiting = next.cluster.as_ref().unwrap().keys.iter().find(|k| k.address == "winworker-2").cloned();
    assert!(
        matches!(waiting.map(|k| k.result), Some(KeyResult::MachineWaiting { reason, .. }) if reason.contains("winworker")),
        "{}",
        next.render_text()
    );
    assert_eq!(setup.server.list("machine.openshift.io/v1beta1", "Machine").len(), 3, "winworker-2 stays");
}
