//! Faults end to end: each one converges on the next round with nothing
//! half-written and no status lost. The daemon killed mid-round (the
//! binary, SIGKILL), the Git remote unreachable and back, the status branch
//! moved by someone else between winfleet's fetch and its push, an sshd that
//! accepts the connection and then never answers, a node's kept shell
//! killed between rounds, and a storm of webhooks.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use support::daemon::*;
use support::fleet::TestFleet;
use support::port::free_port;
use support::remote::{Remote, git};
use winfleet::daemon::round::{RoundKind, RoundRecord};
use winfleet::daemon::{self, Config, Handle};
use winfleet::ssh::Settings;

/// The next round that is not a no-op.
async fn next_change(handle: &mut Handle) -> RoundRecord {
    loop {
        let record = next(&mut handle.records).await;
        if record.kind == RoundKind::Commit || record.changed > 0 || record.failed > 0 {
            return record;
        }
    }
}

/// The node's files that are not staging leftovers.
fn settled_files(fleet: &TestFleet, i: usize) -> BTreeMap<String, String> {
    fleet.nodes[i].files().into_iter().filter(|(path, _)| !path.contains(".winfleet")).collect()
}

fn summary(remote: &Remote) -> String {
    remote.show("winfleet/status", "status/summary.yaml").unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_round_leaves_no_file_half_written_and_the_next_start_converges() {
    let fleet = TestFleet::start(4);
    // Every file write is slow, so the kill lands inside one.
    slow_writes(&fleet);
    let remote = remote(&fleet, "");
    let head = remote.tip("main").unwrap();
    let cache = remote.scratch("cache");
    let mut child = daemon_command(&remote, &fleet, &cache, free_port()).spawn().unwrap();
    let log = stderr_lines(&mut child);
    // One node at a time: the first is done, the second is being written.
    until_a_node_is_applied(&log, &fleet);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(std::process::Command::new("kill").args(["-KILL", &child.id().to_string()]).status().unwrap().success());
    let _ = tokio::task::spawn_blocking(move || child.wait().unwrap()).await.unwrap();
    let killed: Vec<BTreeMap<String, String>> = (0..4).map(|i| settled_files(&fleet, i)).collect();
    assert!(killed.iter().any(BTreeMap::is_empty), "the kill came before every node was configured");

    // The next start converges.
    let started = Instant::now();
    let mut child = daemon_command(&remote, &fleet, &cache, free_port()).spawn().unwrap();
    let converged = tokio::time::timeout(Duration::from_secs(120), async {
        while !summary(&remote).contains(&format!("lastAppliedRevision: {head}")) {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    let _ = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap()).await.unwrap();
    assert!(converged.is_ok(), "the restart applied the revision and committed its status:\n{}", summary(&remote));
    assert!(status.success());
    eprintln!("figure: SIGKILL mid-round, restart to status committed: {:.1} s", started.elapsed().as_secs_f64());
    let full = settled_files(&fleet, 0);
    for (i, files) in killed.iter().enumerate() {
        // What the kill left at a final path is complete: a file is either
        // absent or exactly what the converged node holds.
        for (path, content) in files {
            assert_eq!(full.get(path), Some(content), "node {i}: {path} was left half-written");
        }
        assert_eq!(settled_files(&fleet, i), full, "node {i} converged");
        for node in &fleet.nodes {
            let status = remote.show("winfleet/status", &format!("status/instances/{}.yaml", node.address));
            assert!(status.is_some_and(|s| s.contains(&head)), "{} has its status", node.address);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_git_remote_unreachable_then_back_keeps_the_revision_in_force_and_loses_no_status() {
    let fleet = TestFleet::start(1);
    let remote = remote(&fleet, "  drift:\n    interval: 2s\n");
    let mut handle = start(&fleet, Config { poll_interval: Duration::from_secs(1), ..config(&remote) }).await;
    assert_eq!(next(&mut handle.records).await.kind, RoundKind::Commit);

    // The remote goes away; a node drifts meanwhile: it is corrected (the
    // revision in force still applies), its status cannot be pushed.
    let away = remote.bare.with_extension("away");
    std::fs::rename(&remote.bare, &away).unwrap();
    std::fs::remove_file(fleet.nodes[0].path("certs.d/quay.io/hosts.toml")).unwrap();
    let record = next_change(&mut handle).await;
    assert_eq!((record.kind, record.changed, record.status_commit.as_deref()), (RoundKind::Drift, 1, None));
    assert!(hosts_toml(&fleet, 0).is_some(), "corrected while Git is unreachable");
    let metrics = handle.metrics.encode();
    assert!(metrics.contains(r#"winfleet_git_fetch_duration_seconds_count{result="error"}"#), "{metrics}");

    // It comes back: the status of the correction made while it was away
    // reaches the branch with the next round, and a new commit applies.
    std::fs::rename(&away, &remote.bare).unwrap();
    let mut pushed = None;
    for _ in 0..10 {
        let record = next(&mut handle.records).await;
        if record.status_commit.is_some() {
            pushed = Some(record);
            break;
        }
    }
    let pushed = pushed.expect("a status commit within ten rounds of the remote's return");
    assert_eq!(pushed.kind, RoundKind::Drift);
    let instance = format!("status/instances/{}.yaml", fleet.nodes[0].address);
    let status = remote.show("winfleet/status", &instance).unwrap();
    assert!(status.contains("hosts.toml"), "the correction made while away is recorded:\n{status}");
    let change = remote.push(&[("mirrors.yaml", &mirrors("mirror2.corp.example/quay"))], &[], "new mirror");
    let record = next_change(&mut handle).await;
    assert_eq!((record.kind, record.revision.as_str()), (RoundKind::Commit, change.as_str()));
    assert!(summary(&remote).contains(&format!("lastAppliedRevision: {change}")), "{}", summary(&remote));
    stop(handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_branch_moved_between_fetch_and_push_keeps_both_commits() {
    let fleet = TestFleet::start(1);
    let remote = remote(&fleet, "");
    let served = support::remote::GitDaemon::serve(&remote);
    let source = winfleet::daemon::source::SourceConfig::Remote { url: served.url.clone(), branch: "main".into() };
    let mut handle = start(&fleet, Config { source, ..config(&remote) }).await;
    assert_eq!(next(&mut handle.records).await.kind, RoundKind::Commit);

    // Someone else's commit on the status branch, pushed by the remote's
    // update hook when winfleet's next status push arrives: after winfleet
    // fetched and built on the old tip, before its push lands.
    let other = remote.scratch("other");
    git(&other, &["clone", "-q", "-b", "winfleet/status", remote.bare.to_str().unwrap(), "c"]);
    let clone = other.join("c");
    std::fs::write(clone.join("NOTES.md"), "kept\n").unwrap();
    git(&clone, &["add", "-A"]);
    git(&clone, &["commit", "-q", "-m", "notes"]);
    let hook = remote.bare.join("hooks/update");
    let once = other.join("pushed");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\n[ \"$1\" = refs/heads/winfleet/status ] || exit 0\n[ -e '{once}' ] && exit 0\ntouch '{once}'\n\
             env -i PATH=\"$PATH\" HOME='{other}' git -C '{clone}' push -q origin winfleet/status >&2\nexit 0\n",
            once = once.display(),
            other = other.display(),
            clone = clone.display(),
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();

    let change = remote.push(&[("mirrors.yaml", &mirrors("mirror2.corp.example/quay"))], &[], "new mirror");
    assert_eq!(push_hook(&handle).await, 202);
    let record = next_change(&mut handle).await;
    assert_eq!((record.kind, record.revision.as_str()), (RoundKind::Commit, change.as_str()));
    assert!(once.exists(), "the other push raced winfleet's");
    let commit = record.status_commit.expect("status landed after the race");
    assert_eq!(remote.tip("winfleet/status").as_deref(), Some(commit.as_str()));
    assert_eq!(remote.show("winfleet/status", "NOTES.md").as_deref(), Some("kept\n"), "the other commit is kept");
    assert!(summary(&remote).contains(&format!("lastAppliedRevision: {change}")));
    stop(handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sshd_that_stops_answering_times_out_without_holding_up_the_others() {
    let fleet = TestFleet::start(2);
    let remote = remote(&fleet, "");
    let settings = Settings { command_timeout: Duration::from_secs(3), ..Settings::default() };
    let pool = pool_with(&fleet, settings);
    let mut handle = daemon::start(config(&remote), None, pool).await.unwrap();
    assert_eq!(next(&mut handle.records).await.kind, RoundKind::Commit);

    // Node 0's sshd keeps the warm connection open and answers nothing.
    let frozen = fleet.nodes[0].freeze_session();
    let change = remote.push(&[("mirrors.yaml", &mirrors("mirror2.corp.example/quay"))], &[], "new mirror");
    let sent = Instant::now();
    assert_eq!(push_hook(&handle).await, 202);
    let record = next_change(&mut handle).await;
    let took = sent.elapsed();
    assert_eq!((record.kind, record.revision.as_str(), record.failed), (RoundKind::Commit, change.as_str(), 1));
    assert!(hosts_toml(&fleet, 1).unwrap().contains("mirror2.corp.example/v2/quay"), "node 1 went on");
    let status = remote.show("winfleet/status", &format!("status/instances/{}.yaml", fleet.nodes[0].address));
    assert!(status.as_deref().is_some_and(|s| s.contains("transient")), "{status:?}");
    eprintln!("figure: round with one silent sshd (command timeout 3 s): {:.1} s", took.as_secs_f64());

    // It answers again: the retry after back-off converges.
    frozen.thaw();
    let record = next_change(&mut handle).await;
    assert_eq!((record.failed, record.changed), (0, 1), "{record:?}");
    assert!(hosts_toml(&fleet, 0).unwrap().contains("mirror2.corp.example/v2/quay"));
    stop(handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_signed_webhooks_in_ten_seconds_make_at_most_three_rounds() {
    let fleet = TestFleet::start(2);
    let remote = remote(&fleet, "");
    let mut handle = start(&fleet, config(&remote)).await;
    assert_eq!(next(&mut handle.records).await.kind, RoundKind::Commit);
    let status_commits = remote.count("winfleet/status");

    let change = remote.push(&[("mirrors.yaml", &mirrors("mirror2.corp.example/quay"))], &[], "new mirror");
    let started = Instant::now();
    for i in 0..100 {
        assert_eq!(push_hook(&handle).await, 202);
        let due = started + Duration::from_millis(100 * (i + 1));
        tokio::time::sleep(due.saturating_duration_since(Instant::now())).await;
    }
    // Whatever the storm caused has finished a second after it.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut rounds = Vec::new();
    while let Ok(record) = handle.records.try_recv() {
        rounds.push(record);
    }
    assert!((1..=3).contains(&rounds.len()), "{} rounds: {rounds:?}", rounds.len());
    assert_eq!(rounds[0].revision, change);
    assert!(remote.count("winfleet/status") - status_commits <= 3);
    assert!(hosts_toml(&fleet, 0).unwrap().contains("mirror2.corp.example/v2/quay"));
    let metrics = handle.metrics.encode();
    assert!(metrics.contains(r#"winfleet_webhook_requests_total{result="accepted"} 100"#), "{metrics}");
    eprintln!("figure: 100 signed webhooks in 10 s: {} round(s)", rounds.len());
    stop(handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodes_shell_is_kept_between_rounds_and_replaced_when_it_was_killed() {
    let fleet = TestFleet::start(1);
    let node = &fleet.nodes[0];
    let remote = remote(&fleet, "  drift:\n    interval: 2s\n");
    let mut handle = start(&fleet, config(&remote)).await;
    assert_eq!(next(&mut handle.records).await.kind, RoundKind::Commit);
    let shell = node.last_session();
    // The drift rounds run in the same shell: sshd starts no command.
    for _ in 0..2 {
        let record = next(&mut handle.records).await;
        assert_eq!((record.kind, record.changed, record.failed), (RoundKind::Drift, 0, 0));
    }
    assert_eq!(node.last_session(), shell, "the drift rounds reused the shell");
    // And the pool counted it: one connection, one channel (the kept
    // shell) for the commit round and both drift rounds.
    let metrics = handle.metrics.encode();
    assert!(metrics.contains(r#"winfleet_ssh_traffic_total{kind="connections"} 1"#), "{metrics}");
    assert!(metrics.contains(r#"winfleet_ssh_traffic_total{kind="channels"} 1"#), "{metrics}");

    // The shell dies between rounds (the connection stays) and the node drifts.
    node.kill_session_processes();
    std::fs::remove_file(node.path("certs.d/quay.io/hosts.toml")).unwrap();
    let record = next_change(&mut handle).await;
    assert_eq!((record.kind, record.changed, record.failed), (RoundKind::Drift, 1, 0), "{record:?}");
    assert!(hosts_toml(&fleet, 0).is_some(), "the drift was corrected");
    assert_ne!(node.last_session(), shell, "in a new shell");
    stop(handle).await;
}
