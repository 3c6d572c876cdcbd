//! The daemon end to end, in process: a real bare Git remote over file://,
//! real sshd nodes (tests/support/fleet.rs), the webhook over real loopback
//! HTTP, status committed back to the remote. The SIGTERM test runs the
//! binary; leader election is in daemon_leader.rs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use support::daemon::*;
use support::fleet::TestFleet;
use support::port::free_port;
use winfleet::daemon::round::RoundKind;
use winfleet::daemon::source::SourceConfig;
use winfleet::daemon::{self, Config};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_is_applied_and_status_is_committed_to_the_status_branch() {
    let fleet = TestFleet::start(2);
    let remote = remote(&fleet, "");
    let first = remote.tip("main").unwrap();
    let mut handle = start(&fleet, config(&remote)).await;

    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.revision.as_str(), record.failed), (RoundKind::Commit, first.as_str(), 0));
    for i in 0..2 {
        assert!(hosts_toml(&fleet, i).unwrap().contains("mirror.corp.example/v2/quay"));
    }
    let status_commit = record.status_commit.clone().expect("the first round writes status");
    assert_eq!(remote.tip("winfleet/status").as_deref(), Some(status_commit.as_str()));
    let message = remote.message(&status_commit);
    assert!(message.starts_with(&format!("status: {} ", &first[..7])), "{message}");
    assert!(message.contains(&format!("Winfleet-Revision: {first}")), "{message}");
    let summary = remote.show("winfleet/status", "status/summary.yaml").unwrap();
    assert!(summary.contains(&first), "{summary}");
    for node in &fleet.nodes {
        let file = remote.show("winfleet/status", &format!("status/instances/{}.yaml", node.address)).unwrap();
        assert!(file.contains("Ready"), "{file}");
    }
    assert_eq!(remote.count("main"), 1, "status never lands on the tracked branch by default");

    // A merged change, announced by the webhook.
    let second = remote.push(&[("mirrors.yaml", &mirrors("mirror2.corp.example/quay"))], &[], "new mirror");
    assert_eq!(push_hook(&handle).await, 202);
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.revision.as_str()), (RoundKind::Commit, second.as_str()));
    assert!(record.webhook_received.is_some());
    assert_eq!(record.changed, 2);
    for i in 0..2 {
        assert!(hosts_toml(&fleet, i).unwrap().contains("mirror2.corp.example/v2/quay"));
    }
    let summary = remote.show("winfleet/status", "status/summary.yaml").unwrap();
    assert!(summary.contains(&second), "{summary}");
    assert_eq!(remote.count("winfleet/status"), 2);
    stop(handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_op_drift_round_makes_no_commit_and_a_concurrent_status_push_is_kept() {
    let fleet = TestFleet::start(2);
    let remote = remote(&fleet, "  drift:\n    interval: 1s\n");
    let mut handle = start(&fleet, config(&remote)).await;
    let record = next(&mut handle.records).await;
    assert_eq!(record.kind, RoundKind::Commit);
    let tip = remote.tip("winfleet/status").unwrap();

    // Nothing changed: the drift round re-observes every node and commits nothing.
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.changed, record.status_commit.as_deref()), (RoundKind::Drift, 0, None));
    assert_eq!(remote.tip("winfleet/status").as_deref(), Some(tip.as_str()));

    // Someone else pushes to the status branch; then a node drifts.
    let other = remote.scratch("other");
    support::remote::git(&other, &["clone", "-q", "-b", "winfleet/status", remote.bare.to_str().unwrap(), "c"]);
    let clone = other.join("c");
    std::fs::write(clone.join("NOTES.md"), "kept\n").unwrap();
    support::remote::git(&clone, &["add", "-A"]);
    support::remote::git(&clone, &["commit", "-q", "-m", "notes"]);
    support::remote::git(&clone, &["push", "-q", "origin", "winfleet/status"]);
    std::fs::remove_file(fleet.nodes[1].path("certs.d/quay.io/hosts.toml")).unwrap();
    let record = loop {
        let record = next(&mut handle.records).await;
        if record.changed > 0 {
            break record;
        }
    };
    assert_eq!(record.kind, RoundKind::Drift);
    assert!(hosts_toml(&fleet, 1).is_some(), "drift corrected (mode correct)");
    let commit = record.status_commit.expect("drift is reported in status");
    assert_eq!(remote.tip("winfleet/status").as_deref(), Some(commit.as_str()), "status landed");
    assert_eq!(remote.show("winfleet/status", "NOTES.md").as_deref(), Some("kept\n"), "the other push is kept");
    let node = remote.show("winfleet/status", &format!("status/instances/{}.yaml", fleet.nodes[1].address)).unwrap();
    assert!(node.contains("hosts.toml"), "the drift names what was corrected: {node}");
    stop(handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_commit_is_not_applied_and_its_diagnostics_go_into_status() {
    let fleet = TestFleet::start(1);
    let remote = remote(&fleet, "");
    let good = remote.tip("main").unwrap();
    let mut handle = start(&fleet, config(&remote)).await;
    assert_eq!(next(&mut handle.records).await.kind, RoundKind::Commit);
    let before = fleet.nodes[0].files();

    // A new mirror and a broken document in the same commit: nothing of it applies.
    let bad = remote.push(
        &[("mirrors.yaml", &mirrors("mirror2.corp.example/quay")), ("broken.yaml", "apiVersion: v1\nkind: Nope\n")],
        &[],
        "broken",
    );
    assert_eq!(push_hook(&handle).await, 202);
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.revision.as_str()), (RoundKind::Invalid, bad.as_str()));
    assert_eq!(fleet.nodes[0].files(), before, "nothing of the invalid commit reached the node");
    let summary = remote.show("winfleet/status", "status/summary.yaml").unwrap();
    assert!(summary.contains(&good) && summary.contains(&bad), "{summary}");
    assert!(summary.contains("broken.yaml"), "the diagnostics name the file: {summary}");
    let message = remote.message(&record.status_commit.unwrap());
    assert!(message.contains(&format!("Winfleet-Revision: {bad}")), "{message}");

    // The fix applies.
    let fixed = remote.push(&[], &["broken.yaml"], "fix");
    assert_eq!(push_hook(&handle).await, 202);
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.revision.as_str()), (RoundKind::Commit, fixed.as_str()));
    assert!(hosts_toml(&fleet, 0).unwrap().contains("mirror2.corp.example/v2/quay"));
    // Commit to applied is measured for the two revisions applied, not the invalid one.
    let metrics = handle.metrics.encode();
    assert!(metrics.contains("winfleet_commit_to_applied_seconds_count 2\n"), "{metrics}");
    stop(handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_with_a_bad_signature_is_refused_and_starts_no_round() {
    let fleet = TestFleet::start(1);
    let remote = remote(&fleet, "");
    let mut handle = start(&fleet, config(&remote)).await;
    assert_eq!(next(&mut handle.records).await.kind, RoundKind::Commit);
    let change = remote.push(&[("mirrors.yaml", &mirrors("mirror2.corp.example/quay"))], &[], "new mirror");

    let body = br#"{"ref":"refs/heads/main"}"#;
    let forged = [("X-GitHub-Event", "push".to_owned()), ("X-Hub-Signature-256", github_signature(b"guess", body))];
    assert_eq!(post(handle.webhook_addr.unwrap(), &forged, body).await, 401);
    let unsigned = [("X-GitHub-Event", "push".to_owned())];
    assert_eq!(post(handle.webhook_addr.unwrap(), &unsigned, body).await, 401);
    let gitlab = [("X-Gitlab-Event", "Push Hook".to_owned()), ("X-Gitlab-Token", "wrong".to_owned())];
    assert_eq!(post(handle.webhook_addr.unwrap(), &gitlab, body).await, 401);
    // The poll interval is an hour: only a valid notification applies the change,
    // and the round that applies it is the valid notification's.
    let valid_sent = tokio::time::Instant::now();
    assert_eq!(push_hook(&handle).await, 202);
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.revision.as_str()), (RoundKind::Commit, change.as_str()));
    assert!(record.webhook_received.is_some_and(|r| r >= valid_sent), "no refused request started a round");
    let metrics = handle.metrics.encode();
    assert!(metrics.contains(r#"winfleet_webhook_requests_total{result="unauthorized"} 3"#), "{metrics}");
    assert!(metrics.contains(r#"winfleet_webhook_requests_total{result="accepted"} 1"#), "{metrics}");
    stop(handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_no_round_used_for_the_idle_timeout_are_closed_and_the_next_round_connects_again() {
    let fleet = TestFleet::start(2);
    let remote = remote(&fleet, "");
    let settings = winfleet::ssh::Settings { idle_timeout: Some(Duration::from_secs(2)), ..Default::default() };
    let pool = pool_with(&fleet, settings);
    let mut handle = daemon::start(config(&remote), None, pool).await.unwrap();
    assert_eq!(next(&mut handle.records).await.kind, RoundKind::Commit);
    assert!(fleet.nodes.iter().all(|n| n.connections() == 1), "kept after the round");

    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while fleet.nodes.iter().any(|n| n.connections() > 0) {
        assert!(std::time::Instant::now() < deadline, "the idle connections were never closed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let change = remote.push(&[("mirrors.yaml", &mirrors("mirror2.corp.example/quay"))], &[], "new mirror");
    assert_eq!(push_hook(&handle).await, 202);
    let record = next(&mut handle.records).await;
    assert_eq!((record.revision.as_str(), record.failed, record.changed), (change.as_str(), 0, 2), "{record:?}");
    assert!(hosts_toml(&fleet, 0).unwrap().contains("mirror2.corp.example/v2/quay"));
    stop(handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_pushes_during_a_round_makes_exactly_one_follow_up_round() {
    let fleet = TestFleet::start(2);
    for node in &fleet.nodes {
        // Every script on these nodes takes a second longer.
        node.shim("base64", "#!/bin/sh\nsleep 1\nexec /usr/bin/base64 \"$@\"\n");
    }
    let remote = remote(&fleet, "");
    let first = remote.tip("main").unwrap();
    let mut handle = start(&fleet, config(&remote)).await;
    // Ready means the first fetch is done: the first round is running now
    // (its scripts take seconds). Push three times meanwhile.
    wait_ready(&handle).await;
    let mut last = String::new();
    for i in 0..3 {
        last = remote.push(&[("mirrors.yaml", &mirrors(&format!("m{i}.corp.example/quay")))], &[], "burst");
        assert_eq!(push_hook(&handle).await, 202);
    }
    let one = next(&mut handle.records).await;
    let two = next(&mut handle.records).await;
    // The round after the follow-up must be this sentinel's: no third
    // round for the burst came in between.
    let sentinel = remote.push(&[("mirrors.yaml", &mirrors("sentinel.corp.example/quay"))], &[], "sentinel");
    assert_eq!(push_hook(&handle).await, 202);
    let three = next(&mut handle.records).await;
    let revisions: Vec<&str> = [&one, &two, &three].iter().map(|r| r.revision.as_str()).collect();
    assert_eq!(revisions, [first.as_str(), last.as_str(), sentinel.as_str()]);
    assert!(hosts_toml(&fleet, 0).unwrap().contains("sentinel.corp.example/v2/quay"));
    stop(handle).await;
}

/// The binary, with its flags.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_round_stops_cleanly_and_the_next_start_converges() {
    let fleet = TestFleet::start(4);
    slow_writes(&fleet);
    let remote = remote(&fleet, "");
    let cache = remote.scratch("cache");
    let mut child = daemon_command(&remote, &fleet, &cache, free_port()).spawn().unwrap();
    // One node at a time: wait until the first node is done, then SIGTERM.
    let log = stderr_lines(&mut child);
    let mut seen = until_a_node_is_applied(&log, &fleet);
    let pid = child.id().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap()).await.unwrap();
    while let Ok(line) = log.recv_timeout(Duration::from_millis(200)) {
        seen.push(line);
    }
    let text = seen.join("\n");
    assert!(status.success(), "exit {status:?}\n{text}");
    assert!(text.contains("stopped"), "{text}");
    let configured = (0..4).filter(|&i| hosts_toml(&fleet, i).is_some()).count();
    assert!(configured < 4, "SIGTERM stopped the round before every node was started:\n{text}");

    // The next start converges.
    let mut child = daemon_command(&remote, &fleet, &cache, free_port()).spawn().unwrap();
    let converged = tokio::time::timeout(Duration::from_secs(120), async {
        while (0..4).any(|i| hosts_toml(&fleet, i).is_none()) {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    let _ = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap()).await.unwrap();
    assert!(converged.is_ok(), "every node configured after the restart");
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_on_an_invalid_head_keeps_the_last_applied_revision_in_force() {
    let fleet = TestFleet::start(1);
    let remote = remote(&fleet, "  drift:\n    interval: 1s\n");
    let good = remote.tip("main").unwrap();
    let mut handle = start(&fleet, config(&remote)).await;
    assert_eq!(next(&mut handle.records).await.kind, RoundKind::Commit);
    stop(handle).await;
    let instance = format!("status/instances/{}.yaml", fleet.nodes[0].address);
    assert!(remote.show("winfleet/status", &instance).is_some());

    let bad = remote.push(&[("broken.yaml", "apiVersion: v1\nkind: Nope\n")], &[], "broken");
    let mut handle = start(&fleet, config(&remote)).await;
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.revision.as_str()), (RoundKind::Invalid, bad.as_str()));
    let summary = remote.show("winfleet/status", "status/summary.yaml").unwrap();
    let applied = summary.lines().find(|l| l.starts_with("lastAppliedRevision:")).unwrap_or_default();
    assert!(applied.contains(&good), "{summary}");
    assert!(remote.show("winfleet/status", &instance).is_some(), "the instance's status is kept");
    // Drift checks go on with the revision in force: a deleted file comes back.
    std::fs::remove_file(fleet.nodes[0].path("certs.d/quay.io/hosts.toml")).unwrap();
    let record = loop {
        let record = next(&mut handle.records).await;
        if record.kind == RoundKind::Drift && record.changed > 0 {
            break record;
        }
    };
    assert_eq!(record.revision, good);
    assert!(hosts_toml(&fleet, 0).is_some());
    stop(handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_on_the_tracked_branch_never_triggers_a_round_nor_a_commit_per_round() {
    let fleet = TestFleet::start(1);
    let remote = remote(&fleet, "  drift:\n    interval: 1s\n  status:\n    branch: main\n");
    let config_commit = remote.tip("main").unwrap();
    let mut handle = start(&fleet, config(&remote)).await;
    let record = next(&mut handle.records).await;
    assert_eq!(record.kind, RoundKind::Commit);
    let status_commit = record.status_commit.expect("status lands on main");
    assert_eq!(remote.tip("main").as_deref(), Some(status_commit.as_str()));
    assert!(remote.message(&status_commit).contains(&format!("Winfleet-Revision: {config_commit}")));
    // The webhook makes the daemon see its own status commit: no round for it.
    assert_eq!(push_hook(&handle).await, 202);
    for _ in 0..3 {
        let record = next(&mut handle.records).await;
        assert_eq!(record.kind, RoundKind::Drift, "never a Commit round for a status-only commit");
        assert_eq!(record.revision, config_commit);
        assert_eq!(record.status_commit, None, "an unchanged fleet makes no commit");
    }
    assert_eq!(remote.tip("main").as_deref(), Some(status_commit.as_str()));
    assert!(remote.tip("winfleet/status").is_none());
    stop(handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_any_endpoint_the_timers_still_run() {
    let fleet = TestFleet::start(1);
    let remote = remote(&fleet, "  drift:\n    interval: 1s\n");
    let config = Config { webhook: None, metrics_addr: None, ..config(&remote) };
    let mut handle = start(&fleet, config).await;
    assert_eq!(next(&mut handle.records).await.kind, RoundKind::Commit);
    assert_eq!(next(&mut handle.records).await.kind, RoundKind::Drift);
    stop(handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_git_sync_link_flip_is_seen_by_the_file_watch_and_applied() {
    use support::remote::GitSync;
    let fleet = TestFleet::start(1);
    let dir = tempfile::tempdir().unwrap();
    let fleet_yaml = fleet.fleet_yaml();
    let files = |mirror: &str| {
        vec![
            ("fleet.yaml", fleet_yaml.clone()),
            ("instances.yaml", instances(&fleet)),
            ("mirrors.yaml", mirrors(mirror)),
        ]
    };
    let sync = GitSync::new(dir.path(), &files("mirror.corp.example/quay"));
    let config = Config {
        source: SourceConfig::Checkout { path: sync.link() },
        cache_dir: dir.path().join("cache"),
        webhook: None,
        ..config(&remote(&fleet, ""))
    };
    let mut handle = start(&fleet, config).await;
    assert_eq!(next(&mut handle.records).await.kind, RoundKind::Commit);
    assert!(hosts_toml(&fleet, 0).unwrap().contains("mirror.corp.example/v2/quay"));

    // git-sync fetches, adds a worktree and flips the link; the poll is an hour away.
    let flipped = sync.publish(&files("mirror2.corp.example/quay"));
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.revision.as_str()), (RoundKind::Commit, flipped.as_str()));
    assert!(hosts_toml(&fleet, 0).unwrap().contains("mirror2.corp.example/v2/quay"));
    stop(handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_windows_node_in_the_cluster_is_reconciled_at_once() {
    use support::apiserver::{ApiServer, fixtures};
    use winfleet::cluster::connect::Cluster;
    let fleet = TestFleet::start(1);
    let address = fleet.nodes[0].address.clone();
    let list = format!(
        "apiVersion: winfleet.io/v1alpha1\nkind: WindowsInstanceList\nmetadata:\n  name: t\nspec:\n  instances:\n  - address: {address}\n    labels:\n      example.com/team: payments\n"
    );
    let remote = remote(&fleet, "");
    remote.push(&[("instances.yaml", &list)], &[], "label the instance");
    let api = ApiServer::new();
    let cluster = Some(Cluster { client: api.client(), url: "in-memory".into() });
    let config = Config { watch_cluster: true, ..config(&remote) };
    let mut handle = daemon::start(config, cluster, pool(&fleet)).await.unwrap();
    let record = next(&mut handle.records).await;
    assert_eq!(record.kind, RoundKind::Commit, "the instance has no Node yet");

    // The instance joins the cluster: its Node appears and gets its labels without a commit.
    api.seed(fixtures::node("win-new", &[("InternalIP", &address)], true, &[]));
    let record = next(&mut handle.records).await;
    assert_eq!(record.kind, RoundKind::Nodes);
    let node = api.get("v1", "Node", None, "win-new").unwrap();
    assert_eq!(node["metadata"]["labels"]["example.com/team"], "payments", "{node:#}");
    stop(handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_warn_mode_drift_is_reported_and_never_corrected_even_on_a_retry() {
    let fleet = TestFleet::start(1);
    let remote = remote(&fleet, "  drift:\n    interval: 2s\n    mode: warn\n");
    let mut handle = start(&fleet, config(&remote)).await;
    assert_eq!(next(&mut handle.records).await.kind, RoundKind::Commit);
    // The node goes away and drifts meanwhile; the next drift check fails on it.
    let mut fleet = fleet;
    fleet.nodes[0].stop();
    fleet.nodes[0].cut_session();
    std::fs::remove_file(fleet.nodes[0].path("certs.d/quay.io/hosts.toml")).unwrap();
    let mut failed = false;
    for _ in 0..30 {
        if next(&mut handle.records).await.failed > 0 {
            failed = true;
            break;
        }
    }
    assert!(failed, "a drift check failed on the unreachable node");
    fleet.nodes[0].start();
    // Its retry (after the back-off) re-checks it: drift found, reported, not corrected.
    let mut found = None;
    for _ in 0..60 {
        let record = next(&mut handle.records).await;
        if record.nodes > 0 && record.failed == 0 {
            found = Some(record);
            break;
        }
    }
    let record = found.expect("the node is re-checked after its back-off");
    assert_eq!((record.kind, record.changed), (RoundKind::Drift, 1));
    assert!(hosts_toml(&fleet, 0).is_none(), "warn mode changes nothing");
    let file = remote.show("winfleet/status", &format!("status/instances/{}.yaml", fleet.nodes[0].address)).unwrap();
    assert!(file.contains("phase: Drifted") && file.contains("hosts.toml"), "{file}");
    stop(handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_path_the_daemon_reads_only_the_fleet_directory_of_a_shared_repository() {
    let fleet = TestFleet::start(1);
    let remote = support::remote::Remote::new(&[
        ("README.md", "# platform\n"),
        ("apps/web.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n"),
        ("windows/fleet.yaml", &fleet.fleet_yaml()),
        ("windows/instances.yaml", &instances(&fleet)),
        ("windows/mirrors.yaml", &mirrors("mirror.corp.example/quay")),
    ]);
    let mut handle = start(&fleet, Config { path: Some("windows".into()), ..config(&remote) }).await;
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.changed), (RoundKind::Commit, 1));
    assert!(hosts_toml(&fleet, 0).unwrap().contains("mirror.corp.example/v2/quay"));
    stop(handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_23_drift_a_waiting_nodes_retry_corrects_is_reported_in_status_and_metrics() {
    // SSH-only with a proxy: the reboot the proxy needs is owed and no
    // cluster can drain the node, so it stays Waiting and out of drift
    // rounds; its retry (once a minute) is what meets its drift.
    let fleet = TestFleet::start(1);
    let proxy = "apiVersion: config.openshift.io/v1\nkind: Proxy\nmetadata:\n  name: cluster\nspec:\n  httpProxy: http://proxy.corp:3128\n";
    let remote = support::remote::Remote::new(&[
        ("fleet.yaml", &fleet.fleet_yaml()),
        ("instances.yaml", &instances(&fleet)),
        ("mirrors.yaml", &mirrors("mirror.corp.example/quay")),
        ("proxy.yaml", proxy),
    ]);
    let mut handle = start(&fleet, config(&remote)).await;
    assert_eq!(next(&mut handle.records).await.kind, RoundKind::Commit);
    let file = format!("status/instances/{}.yaml", fleet.nodes[0].address);
    let status = remote.show("winfleet/status", &file).unwrap();
    assert!(status.contains("phase: Waiting") && status.contains("NoCluster"), "{status}");

    std::fs::remove_file(fleet.nodes[0].path("certs.d/quay.io/hosts.toml")).unwrap();
    let record = next(&mut handle.records).await;
    assert_eq!(record.nodes, 1, "the node's retry");
    assert!(hosts_toml(&fleet, 0).is_some(), "the retry corrected the drift");
    let commit = record.status_commit.expect("the corrected drift is committed to status");
    assert_eq!(remote.tip("winfleet/status").as_deref(), Some(commit.as_str()));
    let status = remote.show("winfleet/status", &file).unwrap();
    assert!(status.contains("drift:") && status.contains("hosts.toml"), "the drift names what was corrected: {status}");
    let metrics = handle.metrics.encode();
    assert!(metrics.contains("winfleet_drift_detected_total 1"), "{metrics}");
    stop(handle).await;
}
