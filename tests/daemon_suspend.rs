//! Suspend and resume: through Git (the Fleet's `spec.suspend`) and out of
//! band (`winfleet suspend` / `winfleet resume`, the binary, against the
//! running daemon's webhook port with the control token).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use support::daemon::*;
use support::fleet::TestFleet;
use support::remote::Remote;
use winfleet::daemon::leadership::suspend::ControlToken;
use winfleet::daemon::round::{RoundKind, RoundRecord};
use winfleet::daemon::{Config, Handle};

const TOKEN: &str = "control-token-for-tests";

fn summary(remote: &Remote) -> String {
    remote.show("winfleet/status", "status/summary.yaml").unwrap_or_default()
}

/// The next commit round.
async fn next_commit(handle: &mut Handle) -> RoundRecord {
    loop {
        let record = next(&mut handle.records).await;
        if record.kind == RoundKind::Commit {
            return record;
        }
    }
}

/// `winfleet suspend|resume` against `handle`; (exit success, stdout + stderr).
fn control(handle: &Handle, remote: &Remote, verb: &str, token: &str, reason: &str) -> (bool, String) {
    let token_file = remote.scratch("control").join(format!("token-{}", fastrand::u32(..)));
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let url = format!("http://{}", handle.webhook_addr.unwrap());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_winfleet"))
        .args([verb, "--url", &url, "--token-file", token_file.to_str().unwrap()])
        .args(if verb == "suspend" { vec!["--reason", reason] } else { vec![] })
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_with_spec_suspend_changes_nothing_and_reports_drift_until_a_later_commit_resumes() {
    let fleet = TestFleet::start(1);
    let remote = remote(&fleet, "  drift:\n    interval: 1s\n");
    let first = remote.tip("main").unwrap();
    let mut handle = start(&fleet, config(&remote)).await;
    assert_eq!(next(&mut handle.records).await.kind, RoundKind::Commit);

    let suspended_fleet = format!("{}  drift:\n    interval: 1s\n  suspend: true\n", fleet.fleet_yaml());
    let suspending = remote.push(
        &[("fleet.yaml", &suspended_fleet), ("mirrors.yaml", &mirrors("mirror2.corp.example/quay"))],
        &[],
        "suspend, and a new mirror",
    );
    assert_eq!(push_hook(&handle).await, 202);
    let record = next_commit(&mut handle).await;
    assert_eq!(record.revision, suspending);
    assert!(hosts_toml(&fleet, 0).unwrap().contains("mirror.corp.example/v2/quay"), "nothing applied");
    let text = summary(&remote);
    assert!(text.contains(&format!("lastAppliedRevision: {first}")), "{text}");
    assert!(text.contains(&format!("sinceRevision: {suspending}")) && text.contains("by: spec.suspend in the Fleet"));
    let suspended = |handle: &Handle| handle.metrics.encode().lines().any(|l| l == "winfleet_suspended 1");
    assert!(suspended(&handle), "the gauge shows the suspension:\n{}", handle.metrics.encode());

    // Drift is reported, not corrected.
    std::fs::remove_file(fleet.nodes[0].path("certs.d/quay.io/hosts.toml")).unwrap();
    let record = loop {
        let record = next(&mut handle.records).await;
        if record.kind == RoundKind::Drift && record.changed > 0 {
            break record;
        }
    };
    assert_eq!(record.failed, 0);
    assert!(hosts_toml(&fleet, 0).is_none(), "the drift stays while suspended");
    let instance = format!("status/instances/{}.yaml", fleet.nodes[0].address);
    let status = remote.show("winfleet/status", &instance).unwrap();
    assert!(status.contains("phase: Drifted"), "{status}");

    // A commit without spec.suspend resumes: everything is applied.
    let resumed_fleet = format!("{}  drift:\n    interval: 1s\n", fleet.fleet_yaml());
    let resuming = remote.push(&[("fleet.yaml", &resumed_fleet)], &[], "resume");
    assert_eq!(push_hook(&handle).await, 202);
    let record = next_commit(&mut handle).await;
    assert_eq!((record.revision.as_str(), record.failed), (resuming.as_str(), 0));
    assert!(hosts_toml(&fleet, 0).unwrap().contains("mirror2.corp.example/v2/quay"));
    let text = summary(&remote);
    assert!(text.contains(&format!("lastAppliedRevision: {resuming}")) && !text.contains("suspended"), "{text}");
    assert!(handle.metrics.encode().lines().any(|l| l == "winfleet_suspended 0"), "the gauge shows the resumption");
    stop(handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn winfleet_suspend_stops_before_the_next_node_and_resume_applies_what_arrived_meanwhile_once() {
    let fleet = TestFleet::start(3);
    for node in &fleet.nodes {
        // Each node takes a while, so the suspension lands mid-round.
        node.shim("base64", "#!/bin/sh\nsleep 1\nexec /usr/bin/base64 \"$@\"\n");
    }
    let remote = remote(&fleet, "");
    let config =
        Config { max_parallel: Some(1), control_token: Some(ControlToken::new(TOKEN.as_bytes())), ..config(&remote) };
    let mut handle = start(&fleet, config).await;
    assert_eq!(next(&mut handle.records).await.kind, RoundKind::Commit);
    let (ok, text) = control(&handle, &remote, "suspend", "wrong-token", "");
    assert!(!ok && text.contains("401"), "{text}");

    // A change; once the first node has it, suspend.
    remote.push(&[("mirrors.yaml", &mirrors("mirror2.corp.example/quay"))], &[], "second mirror");
    assert_eq!(push_hook(&handle).await, 202);
    let changed = |i: usize| hosts_toml(&fleet, i).unwrap().contains("mirror2.corp.example");
    tokio::time::timeout(Duration::from_secs(60), async {
        while !(0..3).any(changed) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the round starts");
    let (ok, text) = control(&handle, &remote, "suspend", TOKEN, "bad mirror merged");
    assert!(ok && text.contains("suspended: bad mirror merged"), "{text}");
    let record = next_commit(&mut handle).await;
    assert!(record.changed < 3, "no node was started after the suspension: {record:?}");
    let untouched: Vec<usize> = (0..3).filter(|&i| !changed(i)).collect();
    assert!(!untouched.is_empty());

    // A commit arrives while suspended: checked, not applied.
    let third = remote.push(&[("mirrors.yaml", &mirrors("mirror3.corp.example/quay"))], &[], "third mirror");
    assert_eq!(push_hook(&handle).await, 202);
    let record = next_commit(&mut handle).await;
    assert_eq!(record.revision, third);
    assert!((0..3).all(|i| !hosts_toml(&fleet, i).unwrap().contains("mirror3")), "nothing applied while suspended");
    let text = summary(&remote);
    assert!(
        text.contains("by: 'winfleet suspend: bad mirror merged'") || text.contains("by: \"winfleet suspend"),
        "{text}"
    );

    // Resume: one round applies the revision in force to every node.
    let (ok, text) = control(&handle, &remote, "resume", TOKEN, "");
    assert!(ok && text.contains("resumed"), "{text}");
    let record = next_commit(&mut handle).await;
    assert_eq!((record.revision.as_str(), record.changed, record.failed), (third.as_str(), 3, 0));
    assert!((0..3).all(|i| hosts_toml(&fleet, i).unwrap().contains("mirror3.corp.example/v2/quay")));
    assert!(!summary(&remote).contains("suspended"));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(handle.records.try_recv().is_err(), "applied once");
    stop(handle).await;
}

#[test]
fn apply_once_on_a_suspended_repository_only_observes_and_reports() {
    let fleet = TestFleet::start(1);
    let repo = tempfile::tempdir().unwrap();
    let write = |rel: &str, text: &str| std::fs::write(repo.path().join(rel), text).unwrap();
    write("fleet.yaml", &format!("{}  suspend: true\n", fleet.fleet_yaml()));
    write("instances.yaml", &instances(&fleet));
    write("mirrors.yaml", &mirrors("mirror.corp.example/quay"));
    let dir = repo.path().to_str().unwrap();
    let (key, known_hosts) = (fleet.key.to_str().unwrap(), fleet.known_hosts.to_str().unwrap());
    let (code, out, err) =
        support::winfleet(&["apply", "--once", "--repo", dir, "--ssh-key", key, "--known-hosts", known_hosts]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("spec.suspend: true: nothing is changed"), "{err}");
    assert!(hosts_toml(&fleet, 0).is_none(), "nothing written:\n{out}");
}
