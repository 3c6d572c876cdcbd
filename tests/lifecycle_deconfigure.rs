//! An instance that leaves the repository is deconfigured, end to end, and
//! checked as an administrator would check it: the node's filesystem area
//! listed (paths, modes, SHA-256) before it was configured and after it was
//! deconfigured is the same, except for what someone else put there.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use support::join::{Setup, logs, round, setup};
use winfleet::cluster::deconfigure::DeconfigureResult;
use winfleet::cluster::join::JoinResult;

#[test]
#[ignore = "entry point of the fake kubelet process that node tests start; not a test"]
fn fake_kubelet_process() {
    support::kubelet::main_from_env();
}

const MIRRORS: &str = "apiVersion: config.openshift.io/v1\nkind: ImageDigestMirrorSet\nmetadata:\n  name: mirrors\nspec:\n  imageDigestMirrors:\n  - source: registry.redhat.io/ubi9\n    mirrors:\n    - mirror.corp.example/ubi9\n";

/// Every path under `root` with its mode and, for files, its SHA-256.
fn listing(root: &Path) -> BTreeMap<String, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        let Ok(entries) = fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            let meta = fs::symlink_metadata(&path).unwrap();
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            let mode = format!("{:o}", meta.permissions().mode());
            if meta.is_dir() {
                out.insert(format!("{rel}/"), mode);
                walk(root, &path, out);
            } else {
                let sum = winfleet::vocab::file::sha256_hex(&fs::read(&path).unwrap_or_default());
                out.insert(rel, format!("{mode} {sum}"));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// Nodes with the host directories a real node has (containerd's
/// registries directory, systemd's manager drop-in and unit directories),
/// joined.
async fn joined(names: &[&str]) -> (Setup, Vec<BTreeMap<String, String>>) {
    let mut setup = setup(names).await;
    fs::write(setup.repo.path().join("mirrors.yaml"), MIRRORS).unwrap();
    setup.reload();
    let mut before = Vec::new();
    for node in &setup.fleet.nodes {
        for dir in ["certs.d", "systemd", "units"] {
            fs::create_dir_all(node.path(dir)).unwrap();
            let owned = std::process::Command::new("chown")
                .arg("--reference")
                .arg(node.path(""))
                .arg(node.path(dir))
                .status()
                .unwrap();
            assert!(owned.success());
        }
        before.push(listing(&node.path("")));
    }
    let report = round(&setup).await;
    let joins = &report.cluster.as_ref().unwrap().joins;
    assert!(
        joins.len() == names.len() && joins.iter().all(|j| j.result == JoinResult::Joined),
        "{}\n{}",
        report.render_text(),
        logs(&setup.fleet)
    );
    (setup, before)
}

fn unlist(setup: &mut Setup, keep: &[usize]) {
    let path = setup.repo.path().join("instances.yaml");
    let text = fs::read_to_string(&path).unwrap();
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if let Some(address) = line.strip_prefix("  - address: ") {
            let index = setup.fleet.nodes.iter().position(|n| n.address == address).unwrap();
            let labels = lines.next().unwrap();
            if keep.contains(&index) {
                out.push_str(&format!("{line}\n{labels}\n"));
            }
        } else {
            out.push_str(&format!("{line}\n"));
        }
    }
    if keep.is_empty() {
        fs::remove_file(&path).unwrap();
    } else {
        fs::write(&path, out).unwrap();
    }
    setup.reload();
}

/// A round in which exactly one node is deconfigured.
async fn round_deconfiguring_one(setup: &Setup) {
    let report = round(setup).await;
    let deconfigures = &report.cluster.as_ref().unwrap().deconfigures;
    assert!(
        matches!(deconfigures[..], [ref d] if matches!(d.result, DeconfigureResult::Deconfigured { .. })),
        "{}\n{}",
        report.render_text(),
        logs(&setup.fleet)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_instance_is_deconfigured_back_to_the_listing_it_had_before() {
    let (mut setup, before) = joined(&["win-a", "win-b"]).await;
    let a = &setup.fleet.nodes[0];
    assert!(a.path("certs.d/registry.redhat.io/hosts.toml").exists(), "the mirror was written");
    // What someone else put in a directory winfleet created stays.
    fs::write(a.path("payload/admin-notes.txt"), "ours, not winfleet's\n").unwrap();
    let drop_in = a.path(&format!("systemd/{}", winfleet::node::ENVIRONMENT_DROP_IN));
    // The proxy an earlier commit set (its reboot long done).
    let proxy: BTreeMap<String, String> = [("HTTP_PROXY".to_owned(), "http://proxy.corp:3128".to_owned())].into();
    fs::write(&drop_in, winfleet::vocab::systemd::render_drop_in(&proxy, None)).unwrap();
    std::process::Command::new("chown").arg("--reference").arg(a.path("")).arg(&drop_in).status().unwrap();
    let pids = a.service_pids();
    let b_before = support::join::node(&setup.server, "win-b");

    unlist(&mut setup, &[1]);
    setup.options.dry_run = true;
    let plan = round(&setup).await;
    setup.options.dry_run = false;
    let text = plan.render_text();
    assert!(text.contains("Deconfigure win-a (127."), "{text}");
    assert!(text.contains("- service kubelet (installed for the node)"), "{text}");
    assert!(text.contains("- environment HTTP_PROXY"), "{text}");
    assert!(support::join::node(&setup.server, "win-a")["spec"]["unschedulable"] != true, "the plan writes nothing");

    let report = round(&setup).await;
    let text = report.render_text();
    let deconfigures = &report.cluster.as_ref().unwrap().deconfigures;
    assert_eq!(deconfigures.len(), 1, "{text}");
    assert!(
        matches!(deconfigures[0].result, DeconfigureResult::Deconfigured { rebooted: true, .. }),
        "{text}\n{}",
        logs(&setup.fleet)
    );
    let a = &setup.fleet.nodes[0];
    assert!(setup.server.get("v1", "Node", None, "win-a").is_none(), "the Node is deleted");
    assert_eq!(fs::read_to_string(a.dir.join("services/reboots")).unwrap(), "reboot\n", "rebooted once");
    for (name, pid) in &pids {
        let alive = std::process::Command::new("kill").args(["-0", &pid.to_string()]).status().unwrap().success();
        assert!(!alive, "{name} was stopped");
    }
    let after = listing(&a.path(""));
    let mut expected = before[0].clone();
    expected.insert("payload/".into(), after.get("payload/").cloned().unwrap_or_default());
    expected
        .insert("payload/admin-notes.txt".into(), after.get("payload/admin-notes.txt").cloned().unwrap_or_default());
    assert_eq!(after, expected, "the node is as before, but for the administrator's file and its directory");
    assert_eq!(a.read("payload/admin-notes.txt").unwrap(), "ours, not winfleet's\n");
    let b_after = support::join::node(&setup.server, "win-b");
    assert_eq!(b_after["metadata"]["annotations"], b_before["metadata"]["annotations"], "win-b untouched");
    assert_ne!(b_after["spec"]["unschedulable"], true);
    let events = setup.server.list("events.k8s.io/v1", "Event");
    for reason in ["Deconfiguring", "Deconfigured"] {
        assert!(events.iter().any(|e| e["reason"] == reason && e["regarding"]["name"] == "win-a"), "{reason}");
    }

    let next = round(&setup).await;
    assert!(next.cluster.as_ref().unwrap().deconfigures.is_empty(), "{}", next.render_text());
    assert!(next.nodes.iter().all(|n| !n.has_changes()), "{}", next.render_text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emptying_the_instance_list_deconfigures_nobody_until_the_limit_is_raised() {
    let (mut setup, _) = joined(&["win-a", "win-b"]).await;
    unlist(&mut setup, &[]);
    let report = round(&setup).await;
    let text = report.render_text();
    let cluster = report.cluster.as_ref().unwrap();
    let refused = cluster.deconfigure_refused.as_deref().unwrap_or_default();
    assert!(refused.contains("deconfigure 2 of 2 instances (100%), more than prune.maxRemovalPercent (50%)"), "{text}");
    assert!(text.contains("Deconfigure REFUSED"), "{text}");
    assert!(cluster.deconfigures.iter().all(|d| matches!(d.result, DeconfigureResult::NotStarted { .. })), "{text}");
    for name in ["win-a", "win-b"] {
        let node = support::join::node(&setup.server, name);
        assert_ne!(node["spec"]["unschedulable"], true, "{name} is neither cordoned nor drained");
    }
    assert!(setup.fleet.nodes.iter().all(|n| n.service_pids().len() == 3), "services untouched");
    let events = setup.server.list("events.k8s.io/v1", "Event");
    assert_eq!(events.iter().filter(|e| e["reason"] == "DeconfigureRefused").count(), 2, "one per node");

    // A later commit raises the limit: now they go.
    let fleet = setup.repo.path().join("fleet.yaml");
    let text = fs::read_to_string(&fleet).unwrap();
    fs::write(&fleet, format!("{text}  prune:\n    maxRemovalPercent: 100\n")).unwrap();
    setup.reload();
    let report = round(&setup).await;
    let deconfigures = &report.cluster.as_ref().unwrap().deconfigures;
    assert_eq!(deconfigures.len(), 2, "{}", report.render_text());
    assert!(
        deconfigures.iter().all(|d| matches!(d.result, DeconfigureResult::Deconfigured { rebooted: false, .. })),
        "{}\n{}",
        report.render_text(),
        logs(&setup.fleet)
    );
    assert!(setup.server.list("v1", "Node").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn winfleet_killed_mid_deconfigure_is_finished_by_the_next_round_without_repeating_steps() {
    let (mut setup, before) = joined(&["win-a", "win-b"]).await;
    unlist(&mut setup, &[1]);
    let mut apply = support::join::spawn_apply(&setup);
    // Killed once the node step has begun: the kubelet is stopped.
    let a = &setup.fleet.nodes[0];
    support::join::wait_for("the kubelet's stop on win-a", || {
        fs::read_to_string(a.dir.join("services/systemctl.log")).unwrap_or_default().contains("stop -- kubelet.service")
    })
    .await;
    apply.kill().unwrap();
    let _ = apply.wait();
    let node = support::join::node(&setup.server, "win-a");
    assert_eq!(node["spec"]["unschedulable"], true, "killed while win-a is cordoned");

    round_deconfiguring_one(&setup).await;
    assert!(setup.server.get("v1", "Node", None, "win-a").is_none());
    assert_eq!(listing(&a.path("")), before[0], "the node is as before");
    let events = setup.server.list("events.k8s.io/v1", "Event");
    let cordons = events.iter().filter(|e| e["reason"] == "Deconfiguring").count();
    assert_eq!(cordons, 1, "cordoned once, across the crash");
    assert_ne!(support::join::node(&setup.server, "win-b")["spec"]["unschedulable"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_wmco_configured_is_adopted_without_a_reinstall_and_deconfigured_by_its_manifest() {
    let (mut setup, before) = joined(&["win-a", "win-b"]).await;
    // win-a as WMCO leaves a host: the same files and services, WMCO's
    // version on the Node, and no install record of winfleet's.
    let a = &setup.fleet.nodes[0];
    fs::remove_dir_all(a.path(".winfleet")).unwrap();
    setup.server.update("v1", "Node", None, "win-a", |n| {
        n["metadata"]["annotations"]["windowsmachineconfig.openshift.io/version"] = "10.19.0-4f1e0f9".into();
    });
    let pids = a.service_pids();
    let report = round(&setup).await;
    let text = report.render_text();
    let joins = &report.cluster.as_ref().unwrap().joins;
    assert!(joins.len() == 1 && joins[0].result == JoinResult::Joined, "adopted: {text}\n{}", logs(&setup.fleet));
    assert!(!text.contains("(upload "), "nothing sent again: {text}");
    assert_eq!(a.service_pids(), pids, "nothing restarted");
    let node = support::join::node(&setup.server, "win-a");
    assert_eq!(node["metadata"]["annotations"]["windowsmachineconfig.openshift.io/version"], setup.version().as_str());

    unlist(&mut setup, &[1]);
    round_deconfiguring_one(&setup).await;
    let a = &setup.fleet.nodes[0];
    assert_eq!(listing(&a.path("")), before[0], "removed by its manifest and payload, no record needed");
}
