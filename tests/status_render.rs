//! One round's status files rendered from a hand-built round report:
//! goldens of the three kinds of file, the phase of every instance and
//! MachineSet, determinism (identical rounds give identical bytes), invalid
//! revisions, redaction, and the commit message. What carries over from one
//! round to the next is tests/status_history.rs'.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::{BTreeMap, BTreeSet};

use support::status::{REV1, REV2, Round, cluster, done, failed, in_sync, reboot, round, set_env, write_file};
use winfleet::cluster::apply::WriteReport;
use winfleet::cluster::rollout::{RebootResult, RebootStage};
use winfleet::engine::report::NodeResult;
use winfleet::node::outcome::Outcome;
use winfleet::plan::{MachineSetAction, MachineSetChange};
use winfleet::reconcile::report::{Conflict, MachineSetReport, Unassociated};
use winfleet::status::model::{ConditionType, ErrorClass, InstancePhase, MachineSetPhase, RoundResult, Status};
use winfleet::status::{commit_message, from_files, summary_line, to_files};

fn all_text(status: &Status) -> String {
    to_files(status).values().map(|b| String::from_utf8_lossy(b).into_owned()).collect::<Vec<_>>().join("\n")
}

/// Compares every file with tests/fixtures/status/<case>/, and the file
/// lists too (a golden nobody writes any more is stale).
fn check_goldens(case: &str, status: &Status) {
    let dir = support::fixture("status").join(case);
    let files = to_files(status);
    let mut failures = Vec::new();
    for (path, bytes) in &files {
        if let Err(e) = support::check_golden(&dir.join(path), &String::from_utf8_lossy(bytes)) {
            failures.push(e);
        }
    }
    let on_disk: BTreeSet<String> = support::tree(&dir).into_iter().map(|(p, _)| p).collect();
    let written: BTreeSet<String> = files.keys().cloned().collect();
    if on_disk != written {
        failures.push(format!("{case}: golden files {on_disk:?} but rendered {written:?}"));
    }
    support::report(failures);
}

/// A round with one instance in every interesting state and three
/// MachineSets: in sync, conflicting, failed.
fn mixed_round() -> Round {
    let mut c = cluster();
    c.associated = BTreeMap::from([
        ("10.0.0.1".into(), "win-1".into()),
        ("10.0.0.3".into(), "win-3".into()),
        ("10.0.0.4".into(), "win-4".into()),
        ("10.0.0.5".into(), "win-5".into()),
    ]);
    c.unassociated = vec![Unassociated { address: "10.0.0.6".into(), reason: "no Node has its address".into() }];
    let reason = "exists and is not managed by winfleet".into();
    c.conflicts = vec![Conflict { name: "win-b".into(), reason, fields: Vec::new() }];
    c.machine_sets = vec![MachineSetReport {
        change: MachineSetChange {
            name: "win-c".into(),
            action: MachineSetAction::Update,
            replicas: Some((Some(2), Some(3))),
            fields: Vec::new(),
        },
        outcome: Some(Outcome::Failed("admission webhook denied the request".into())),
        taken_over: Vec::new(),
        defaulted: Vec::new(),
    }];
    c.reboots = vec![
        reboot(
            "10.0.0.3",
            "win-3",
            RebootResult::Failed { stage: RebootStage::WaitBack, reason: "node did not come back within 900s".into() },
        ),
        reboot(
            "10.0.0.4",
            "win-4",
            RebootResult::Failed {
                stage: RebootStage::Drain,
                reason: "drain timed out after 600s with 1 pod(s) left: shop/web-0".into(),
            },
        ),
        reboot("10.0.0.5", "win-5", RebootResult::NotStarted { reason: String::new() }),
    ];
    let env = |a| done(a, vec![set_env("HTTP_PROXY", "http://proxy:3128", Some(Outcome::Applied))], true);
    let report = round(
        false,
        vec![
            in_sync("10.0.0.1"),
            done(
                "10.0.0.2",
                vec![write_file("C:/k/hosts.toml", Some(Outcome::Failed("Access is denied".into())))],
                false,
            ),
            env("10.0.0.3"),
            env("10.0.0.4"),
            env("10.0.0.5"),
            env("10.0.0.6"),
            failed("10.0.0.7", "ssh: connection refused"),
        ],
        Some(c),
    );
    let mut r = Round::new(
        1_700_000_000,
        REV1,
        &["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6", "10.0.0.7", "10.0.0.8"],
    )
    .report(report);
    r.machine_sets = vec!["win-a".into(), "win-b".into(), "win-c".into()];
    r
}

#[test]
fn a_mixed_round_renders_the_golden_files() {
    let status = mixed_round().render(&Status::default());
    check_goldens("mixed-round", &status);
}

#[test]
fn every_phase_follows_the_documented_mapping() {
    let status = mixed_round().render(&Status::default());
    let phase = |a: &str| (status.instances[a].phase, status.instances[a].error_class);
    assert_eq!(phase("10.0.0.1"), (InstancePhase::Ready, None));
    assert_eq!(phase("10.0.0.2"), (InstancePhase::Failed, Some(ErrorClass::Transient)));
    assert_eq!(phase("10.0.0.3"), (InstancePhase::Failed, Some(ErrorClass::Transient)));
    assert_eq!(phase("10.0.0.4"), (InstancePhase::Waiting, Some(ErrorClass::Waiting)));
    // A reboot that waits for a slot progresses, and is requeued at the set delay.
    assert_eq!(phase("10.0.0.5"), (InstancePhase::Progressing, Some(ErrorClass::Waiting)));
    assert_eq!(phase("10.0.0.6"), (InstancePhase::Waiting, Some(ErrorClass::Waiting)));
    assert_eq!(phase("10.0.0.7"), (InstancePhase::Failed, Some(ErrorClass::Transient)));
    assert_eq!(phase("10.0.0.8"), (InstancePhase::Unknown, None));
    let stalled = |a: &str| status.instances[a].condition(ConditionType::Stalled).unwrap().status;
    assert!(stalled("10.0.0.3"), "a node that did not come back is stalled");
    assert!(!stalled("10.0.0.4"));
    let ms = |n: &str| status.machine_sets[n].phase;
    assert_eq!(
        [ms("win-a"), ms("win-b"), ms("win-c")],
        [MachineSetPhase::Ready, MachineSetPhase::Conflict, MachineSetPhase::Failed]
    );
    assert_eq!(status.summary.last_round, RoundResult::PartiallyFailed);
    assert_eq!(
        summary_line(&status),
        "1 ready, 1 progressing, 2 waiting, 3 failed, 1 unknown; MachineSets: 1 ready, 1 conflict, 1 failed"
    );
}

#[test]
fn the_node_name_and_applied_revision_are_recorded_for_successful_nodes_only() {
    let status = mixed_round().render(&Status::default());
    let ready = &status.instances["10.0.0.1"];
    assert_eq!((ready.node.as_deref(), ready.applied_revision.as_deref()), (Some("win-1"), Some(REV1)));
    // Its changes went through; the owed reboot does not undo that.
    assert_eq!(status.instances["10.0.0.5"].applied_revision.as_deref(), Some(REV1));
    assert_eq!(status.instances["10.0.0.2"].applied_revision, None);
    assert_eq!(status.instances["10.0.0.7"].applied_revision, None);
    assert_eq!(status.machine_sets["win-a"].applied_revision.as_deref(), Some(REV1));
    assert_eq!(status.machine_sets["win-c"].applied_revision, None);
}

#[test]
fn an_invalid_commit_renders_the_golden_summary() {
    let first = mixed_round().render(&Status::default());
    let mut r = Round::new(1_700_000_600, REV2, &["10.0.0.1"]);
    r.applied = Some(REV1.into());
    r.invalid = vec![
        "fleet.yaml:4: /spec/rollout/maxParallel: must be at least 1".into(),
        "instances.yaml:9: /spec/instances/0/address: duplicate address 10.0.0.1".into(),
    ];
    let status = r.render(&first);
    check_goldens("invalid-commit", &status);
}

#[test]
fn two_identical_rounds_give_identical_bytes() {
    let first = mixed_round().render(&Status::default());
    let mut again = mixed_round();
    again.now += 3600;
    // What the first round applied is in place: the same round finds it so
    // (applying it again would be drift on nodes at the revision).
    for node in &mut again.report.as_mut().unwrap().nodes {
        if let (Some(_), NodeResult::Done { operations, .. }) =
            (&first.instances[&node.address].applied_revision, &mut node.result)
        {
            operations.clear();
        }
    }
    // Through the files, as the daemon reads its previous status back.
    let second = again.render(&from_files(&to_files(&first)));
    assert_eq!(to_files(&second), to_files(&first));
    assert_eq!(second, first, "transition times are unchanged too");
}

#[test]
fn secrets_never_reach_a_file() {
    const TOKEN: &str = "dXNlcjpodW50ZXIy"; // a pull-secret auth
    let mut c = cluster();
    c.rejected = vec![WriteReport {
        target: "MachineSet/win-a".into(),
        outcome: Outcome::Failed(format!("webhook said: Authorization: Basic {TOKEN}")),
    }];
    let report = round(
        false,
        vec![
            failed("a", &format!("login failed with token {TOKEN}")),
            done(
                "b",
                vec![set_env("HTTPS_PROXY", "http://bob:hunter2@proxy:3128", Some(Outcome::Failed("x".into())))],
                true,
            ),
        ],
        Some(c),
    );
    let mut r = Round::new(1_700_000_000, REV2, &["a", "b"]).report(report);
    r.applied = Some(REV1.into());
    r.machine_sets = vec!["win-a".into()];
    r.secrets = vec![TOKEN.into(), "abc".into()];
    r.invalid = vec![format!("fleet.yaml:3: /spec/pullSecret: must not be inline ({TOKEN})")];
    // A secret in a carried-over message (an older round's) goes too.
    let mut previous = Status::default();
    previous.instances.insert("c".into(), from_files(&BTreeMap::from([(
        "instances/c.yaml".to_owned(),
        format!("address: c\nphase: Failed\nconditions: []\nlastError: key -----BEGIN OPENSSH PRIVATE KEY-----\\nAAAA {TOKEN}\n").into_bytes(),
    )])).instances["c"].clone());
    r.instances.push("c".into());
    let status = r.render(&previous);
    let text = all_text(&status);
    for leak in [TOKEN, "hunter2", "BEGIN OPENSSH"] {
        assert!(!text.contains(leak), "{leak} leaked:\n{text}");
    }
    assert!(text.contains("[redacted]"), "{text}");
    assert!(text.contains("http://bob:[redacted]@proxy:3128"), "{text}");
}

#[test]
fn machine_sets_are_unknown_without_a_cluster_report() {
    let mut r = Round::new(1_700_000_000, REV1, &["a"]).report(round(false, vec![in_sync("a")], None));
    r.machine_sets = vec!["win-a".into()];
    let status = r.render(&Status::default());
    assert_eq!(status.machine_sets["win-a"].phase, MachineSetPhase::Unknown);
    assert_eq!(status.summary.machine_sets.unknown, 1);
}

#[test]
fn the_summary_names_the_platform_and_keeps_it_through_a_round_without_a_cluster() {
    let mut c = cluster();
    c.platform = Some(winfleet::vocab::platform::Platform::Aws);
    let first = Round::new(1_700_000_000, REV1, &["a"])
        .report(round(false, vec![in_sync("a")], Some(c)))
        .render(&Status::default());
    assert_eq!(first.summary.platform.as_deref(), Some("AWS"));
    let ssh_only =
        Round::new(1_700_000_100, REV1, &["a"]).report(round(false, vec![in_sync("a")], None)).render(&first);
    assert_eq!(ssh_only.summary.platform.as_deref(), Some("AWS"));
}

#[test]
fn an_owed_reboot_without_a_cluster_waits() {
    let status = Round::new(1_700_000_000, REV1, &["a"])
        .report(round(
            false,
            vec![done("a", vec![set_env("HTTP_PROXY", "http://p:1", Some(Outcome::Applied))], true)],
            None,
        ))
        .render(&Status::default());
    let a = &status.instances["a"];
    assert_eq!((a.phase, a.error_class), (InstancePhase::Waiting, Some(ErrorClass::Waiting)));
    assert_eq!(a.condition(ConditionType::Ready).unwrap().reason, "NoCluster");
    assert_eq!(a.applied_revision.as_deref(), Some(REV1));
}

#[test]
fn the_commit_message_names_the_revision_and_the_summary() {
    let status = Round::new(1_700_000_000, REV1, &["a", "b"])
        .report(round(false, vec![in_sync("a"), failed("b", "x")], None))
        .render(&Status::default());
    assert_eq!(
        commit_message(REV1, &status),
        format!("status: 1111111 1 ready, 1 failed\n\nWinfleet-Revision: {REV1}\n")
    );
}

#[test]
fn the_round_input_debug_leaves_the_secrets_out() {
    let mut r = Round::new(1_700_000_000, REV1, &["a"]);
    r.secrets = vec!["s3cr3t-pull-auth".into()];
    let input = r.input();
    let debug = format!("{input:?}");
    assert!(!debug.contains("s3cr3t"), "{debug}");
    assert!(debug.contains("[1 redacted]"), "{debug}");
}
