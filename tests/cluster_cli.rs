//! `winfleet plan --live` and `winfleet apply --once` end to end: the
//! binary, real sshd nodes (tests/support/fleet.rs) and the in-memory
//! Kubernetes API served over loopback HTTP, reached through --kubeconfig.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;

use serde_json::Value;
use support::apiserver::{ApiServer, fixtures};
use support::fleet::TestFleet;

fn write(dir: &Path, rel: &str, content: &str) {
    std::fs::write(dir.join(rel), content).unwrap();
}

/// A repository for the fleet: posix nodes, a label per instance, a proxy.
fn repo(fleet: &TestFleet, proxy: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "fleet.yaml", &fleet.fleet_yaml());
    let mut list = String::from(
        "apiVersion: winfleet.io/v1alpha1\nkind: WindowsInstanceList\nmetadata:\n  name: t\nspec:\n  instances:\n",
    );
    for node in &fleet.nodes {
        list.push_str(&format!("  - address: {}\n    labels:\n      example.com/team: payments\n", node.address));
    }
    write(dir.path(), "instances.yaml", &list);
    write(
        dir.path(),
        "proxy.yaml",
        &format!(
            "apiVersion: config.openshift.io/v1\nkind: Proxy\nmetadata:\n  name: cluster\nspec:\n  httpProxy: {proxy}\n"
        ),
    );
    dir
}

async fn winfleet(args: Vec<String>) -> (i32, String, String) {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        support::winfleet(&args)
    })
    .await
    .unwrap()
}

fn args(command: &[&str], repo: &Path, fleet: &TestFleet, kubeconfig: &Path, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = command.iter().map(|s| (*s).to_owned()).collect();
    for (flag, value) in [
        ("--repo", repo),
        ("--ssh-key", fleet.key.as_path()),
        ("--known-hosts", fleet.known_hosts.as_path()),
        ("--kubeconfig", kubeconfig),
    ] {
        args.push(flag.into());
        args.push(value.to_str().unwrap().into());
    }
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    args
}

fn node(api: &ApiServer, name: &str) -> Value {
    api.get("v1", "Node", None, name).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_plan_then_apply_labels_nodes_and_stops_when_a_rebooted_node_does_not_come_back() {
    let fleet = TestFleet::start(2);
    let api = ApiServer::new();
    for (i, n) in fleet.nodes.iter().enumerate() {
        api.seed(fixtures::node(&format!("win-{i}"), &[("InternalIP", &n.address)], true, &[]));
        // `systemctl reboot` on these nodes only records that it was asked.
        let log = n.dir.join("systemctl.log");
        n.shim("systemctl", &format!("#!/bin/sh\necho \"$@\" >> '{}'\n", log.display()));
    }
    api.seed(fixtures::proxy_cluster(".cluster.local,10.128.0.0/14"));
    let served = api.serve().await;
    let repo = repo(&fleet, "http://proxy.corp:3128");
    let git = |args: &[&str]| {
        let ok =
            std::process::Command::new("git").current_dir(repo.path()).args(args).output().unwrap().status.success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "fleet"]);

    let (code, out, err) = winfleet(args(&["plan", "--live"], repo.path(), &fleet, &served.kubeconfig, &[])).await;
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(err.contains(&format!("Cluster: {}", served.url)), "{err}");
    assert!(!err.contains("SSH-only"), "{err}");
    assert!(
        out.contains(&format!(
            "Node win-0 ({}): ~ labels/example.com/team: (absent) -> \"payments\"",
            fleet.nodes[0].address
        )),
        "{out}"
    );
    assert!(out.contains("~ environment HTTP_PROXY: (unset) -> \"http://proxy.corp:3128\""), "{out}");
    // The cluster Proxy's own no-proxy entries are added (WMCO-SPEC decision 8).
    assert!(out.contains("~ environment NO_PROXY: (unset) -> \".cluster.local,10.128.0.0/14\""), "{out}");
    assert!(out.contains("Cluster plan: 0 MachineSet change(s), 0 conflict(s), 2 Node metadata change(s)"), "{out}");
    // The platform comes from the Infrastructure `cluster` (issue 36).
    assert!(out.contains(" (platform None):"), "{out}");
    assert!(api.history().iter().all(|w| w.resource != "nodes"), "plan --live writes nothing");

    let (code, out, err) = winfleet(args(
        &["apply", "--once", "--reboot-timeout", "2"],
        repo.path(),
        &fleet,
        &served.kubeconfig,
        &["--output", "json"],
    ))
    .await;
    assert_eq!(code, 1, "{out}\n{err}");
    // stderr is not a terminal: every phase is a plain line with the elapsed time.
    let progress = |text: &str| err.lines().any(|l| l.starts_with("winfleet: [") && l.contains(text));
    for phase in [
        "] win-0: cordoned for a safe reboot",
        "] win-0: draining",
        "] win-0: drained: 0 pod(s) evicted",
        "] win-0: rebooting after evicting 0 pod(s)",
        "] win-0: waiting for a new boot and a Ready Node",
        "] win-0: waiting for a new boot and a Ready Node: it answers over SSH but has not rebooted",
        "] win-0: safe reboot failed at ",
    ] {
        assert!(progress(phase), "no progress line with {phase:?}:\n{err}");
    }
    let report: Value = serde_json::from_str(&out).unwrap();
    let cluster = &report["cluster"];
    assert_eq!(cluster["nodes"][0]["outcome"], "applied", "{cluster:#}");
    for name in ["win-0", "win-1"] {
        assert_eq!(node(&api, name)["metadata"]["labels"]["example.com/team"], "payments");
    }
    // The proxy changed: win-0 is cordoned, drained and told to reboot; it
    // answers again but with the same boot, so the rollout stops there.
    let reboots = cluster["reboots"].as_array().unwrap();
    assert_eq!(reboots[0]["node"], "win-0", "{cluster:#}");
    assert_eq!(reboots[0]["state"], "failed");
    assert_eq!(reboots[0]["stage"], "waitBack");
    assert!(reboots[0]["reason"].as_str().unwrap().contains("has not rebooted"), "{cluster:#}");
    assert_eq!(reboots[1]["state"], "notStarted");
    let log = std::fs::read_to_string(fleet.nodes[0].dir.join("systemctl.log")).unwrap();
    assert_eq!(log, "reboot\n");
    assert!(!fleet.nodes[1].dir.join("systemctl.log").exists(), "win-1 never started");
    let win0 = node(&api, "win-0");
    assert_eq!(win0["spec"]["unschedulable"], true);
    assert!(win0["metadata"]["annotations"]["windowsmachineconfig.openshift.io/reboot-required"].is_string());
    let win1 = node(&api, "win-1");
    assert!(win1["spec"]["unschedulable"].as_bool() != Some(true), "win-1 waits, not cordoned");
    assert!(
        win1["metadata"]["annotations"].get("windowsmachineconfig.openshift.io/reboot-required").is_none(),
        "set only when its turn comes: WMCO would reboot it outside winfleet's budget"
    );
}

#[test]
fn without_a_cluster_it_says_ssh_only_and_require_cluster_makes_it_an_error() {
    let fleet = TestFleet::start(1);
    let repo = repo(&fleet, "http://proxy.corp:3128");
    let home = tempfile::tempdir().unwrap();
    let run = |extra: &'static [&'static str]| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_winfleet"));
        cmd.args(["apply", "--once", "--dry-run", "--repo"]).arg(repo.path());
        cmd.arg("--ssh-key").arg(&fleet.key).arg("--known-hosts").arg(&fleet.known_hosts).args(extra);
        cmd.env("HOME", home.path()).env_remove("KUBECONFIG").env_remove("KUBERNETES_SERVICE_HOST");
        let out = cmd.output().unwrap();
        (out.status.code().unwrap(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, err) = run(&[]);
    let (required_code, required_err) = run(&["--require-cluster"]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.lines().filter(|l| l.contains("SSH-only mode")).count(), 1, "{err}");
    assert_eq!(required_code, 1, "{required_err}");
    // With --log-format json every stderr line is JSON, the notice a WARN.
    let (json_code, json_err) = run(&["--log-format", "json"]);
    assert_eq!(json_code, 2, "{json_err}");
    let lines: Vec<Value> =
        json_err.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect();
    let notice = lines.iter().find(|l| l["fields"]["message"].as_str().unwrap().contains("SSH-only mode")).unwrap();
    assert_eq!(notice["level"], "WARN", "{json_err}");
    let node = lines.iter().find(|l| l["target"] == "winfleet::progress").unwrap();
    assert_eq!(node["fields"]["phase"], "done", "{json_err}");
    assert!(
        required_err.contains("no cluster is configured") && required_err.contains("--require-cluster"),
        "{required_err}"
    );
}
