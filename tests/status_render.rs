//! The status files rendered from hand-built round reports: goldens of the
//! three kinds of file, determinism (identical rounds give identical bytes),
//! condition transition times, partial rounds, invalid revisions, drift in
//! both modes, redaction, and instances leaving the revision.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::{BTreeMap, BTreeSet};

use winfleet::cluster::apply::WriteReport;
use winfleet::cluster::rollout::{RebootReport, RebootResult, RebootStage};
use winfleet::desired::kinds::fleet::DriftMode;
use winfleet::engine::report::{NodeReport, NodeResult, OpReport, Stage};
use winfleet::node::outcome::Outcome;
use winfleet::plan::{MachineSetAction, MachineSetChange};
use winfleet::reconcile::report::{ClusterReport, Conflict, MachineSetReport, RoundReport, Unassociated};
use winfleet::status::model::{ConditionType, ErrorClass, InstancePhase, MachineSetPhase, RoundResult, Status};
use winfleet::status::{RoundInput, commit_message, from_files, render, summary_line, to_files};
use winfleet::vocab::operation::Operation;

const REV1: &str = "1111111111111111111111111111111111111111";
const REV2: &str = "2222222222222222222222222222222222222222";

/// One round's input, owned.
struct Round {
    now: i64,
    attempted: String,
    applied: Option<String>,
    invalid: Vec<String>,
    instances: Vec<String>,
    machine_sets: Vec<String>,
    report: Option<RoundReport>,
    drift_check: bool,
    drift_mode: DriftMode,
    secrets: Vec<String>,
}

impl Round {
    /// A round at `now` (seconds) over `instances`, with `rev` applied.
    fn new(now: i64, rev: &str, instances: &[&str]) -> Self {
        Self {
            now,
            attempted: rev.to_owned(),
            applied: Some(rev.to_owned()),
            invalid: Vec::new(),
            instances: instances.iter().map(|s| s.to_string()).collect(),
            machine_sets: Vec::new(),
            report: None,
            drift_check: false,
            drift_mode: DriftMode::Correct,
            secrets: Vec::new(),
        }
    }

    fn report(mut self, report: RoundReport) -> Self {
        self.report = Some(report);
        self
    }

    fn render(&self, previous: &Status) -> Status {
        let input = RoundInput {
            now: jiff::Timestamp::from_second(self.now).unwrap(),
            attempted: &self.attempted,
            applied: self.applied.as_deref(),
            invalid: &self.invalid,
            instances: &self.instances,
            machine_sets: &self.machine_sets,
            report: self.report.as_ref(),
            drift_check: self.drift_check,
            drift_mode: self.drift_mode,
            secrets: &self.secrets,
            suspended_by: None,
        };
        render(previous, &input)
    }
}

fn round(dry_run: bool, nodes: Vec<NodeReport>, cluster: Option<ClusterReport>) -> RoundReport {
    RoundReport { dry_run, nodes, cluster }
}

fn node(address: &str, result: NodeResult) -> NodeReport {
    NodeReport { result, ..NodeReport::new(address) }
}

fn done(address: &str, operations: Vec<OpReport>, reboot_required: bool) -> NodeReport {
    node(address, NodeResult::Done { operations, in_sync: 3, reboot_required })
}

fn in_sync(address: &str) -> NodeReport {
    done(address, Vec::new(), false)
}

fn failed(address: &str, reason: &str) -> NodeReport {
    node(address, NodeResult::Failed { stage: Stage::Observe, reason: reason.to_owned() })
}

fn set_env(name: &str, to: &str, outcome: Option<Outcome>) -> OpReport {
    OpReport { operation: Operation::SetEnv { name: name.to_owned(), from: None, to: to.to_owned() }, outcome }
}

fn write_file(path: &str, outcome: Option<Outcome>) -> OpReport {
    OpReport { operation: Operation::WriteFile { path: path.to_owned(), created: false, diff: String::new() }, outcome }
}

fn cluster() -> ClusterReport {
    ClusterReport { api: "https://api.test:6443".into(), ..ClusterReport::default() }
}

fn reboot(address: &str, node: &str, result: RebootResult) -> RebootReport {
    RebootReport { node: node.to_owned(), address: address.to_owned(), result }
}

fn all_text(status: &Status) -> String {
    to_files(status).values().map(|b| String::from_utf8_lossy(b).into_owned()).collect::<Vec<_>>().join("\n")
}

fn file(status: &Status, path: &str) -> String {
    String::from_utf8(to_files(status).remove(path).unwrap_or_else(|| panic!("no file {path}"))).unwrap()
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
fn an_invalid_commit_keeps_the_applied_revision_and_the_instances() {
    let first = Round::new(1_700_000_000, REV1, &["10.0.0.1"]).report(round(false, vec![in_sync("10.0.0.1")], None));
    let before = first.render(&Status::default());
    let mut r = Round::new(1_700_000_600, REV2, &["10.0.0.1"]);
    r.applied = Some(REV1.into());
    r.invalid = vec!["a.yaml:1: /kind: unknown kind".into(), "b.yaml:2: /spec: required".into()];
    let status = r.render(&before);
    assert_eq!(status.summary.last_round, RoundResult::Invalid);
    assert_eq!(status.summary.last_applied_revision.as_deref(), Some(REV1));
    assert_eq!(status.summary.last_attempted_revision.as_deref(), Some(REV2));
    let invalid = status.summary.invalid.as_ref().unwrap();
    assert_eq!((invalid.revision.as_str(), invalid.errors.len()), (REV2, 2));
    assert_eq!(file(&status, "instances/10.0.0.1.yaml"), file(&before, "instances/10.0.0.1.yaml"));
    assert_eq!(summary_line(&status), "invalid: 2 error(s)");
    assert_eq!(
        commit_message(REV2, &status),
        format!("status: 2222222 invalid: 2 error(s)\n\nWinfleet-Revision: {REV2}\n")
    );

    // The next valid revision clears it.
    let fixed = Round::new(1_700_001_200, REV2, &["10.0.0.1"]).report(round(false, vec![in_sync("10.0.0.1")], None));
    let status = fixed.render(&status);
    assert_eq!(status.summary.invalid, None);
    assert_eq!(status.summary.last_round, RoundResult::Succeeded);
    assert_eq!(status.instances["10.0.0.1"].applied_revision.as_deref(), Some(REV2));
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
fn a_condition_flip_moves_only_its_own_transition_time() {
    let t1 = 1_700_000_000;
    let t2 = t1 + 600;
    let before = Round::new(t1, REV1, &["a"]).report(round(false, vec![in_sync("a")], None)).render(&Status::default());
    // Ready -> Drifted: only Ready flips (Reconciling and Stalled stay False).
    let mut check = Round::new(t2, REV1, &["a"]).report(round(
        true,
        vec![done("a", vec![write_file("/etc/x", None)], false)],
        None,
    ));
    check.drift_check = true;
    check.drift_mode = DriftMode::Warn;
    let after = check.render(&before);
    let time = |s: &Status, kind| s.instances["a"].condition(kind).unwrap().last_transition_time.as_second();
    assert_eq!(time(&after, ConditionType::Ready), t2);
    assert_eq!(time(&after, ConditionType::Reconciling), t1);
    assert_eq!(time(&after, ConditionType::Stalled), t1);

    // Failed -> Failed for another reason: no condition flips, no time moves.
    let fail = |now, reason: &str| Round::new(now, REV1, &["a"]).report(round(false, vec![failed("a", reason)], None));
    let failing = fail(t1, "ssh: timeout").render(&Status::default());
    let still = fail(t2, "ssh: connection refused").render(&failing);
    assert_eq!(failing.instances["a"].conditions.len(), 3);
    for (a, b) in failing.instances["a"].conditions.iter().zip(&still.instances["a"].conditions) {
        assert_eq!(a.last_transition_time, b.last_transition_time, "{:?}", a.kind);
    }
    assert_eq!(still.instances["a"].last_error.as_deref(), Some("observe failed: ssh: connection refused"));
}

#[test]
fn a_partial_round_keeps_the_others() {
    let both = Round::new(1_700_000_000, REV1, &["a", "b"])
        .report(round(false, vec![in_sync("a"), failed("b", "ssh: timeout")], None))
        .render(&Status::default());
    let retry = Round::new(1_700_000_600, REV1, &["a", "b"])
        .report(round(false, vec![done("b", Vec::new(), false)], None))
        .render(&both);
    assert_eq!(file(&retry, "instances/a.yaml"), file(&both, "instances/a.yaml"));
    assert_eq!(retry.instances["b"].phase, InstancePhase::Ready);
    assert_eq!(retry.instances["b"].last_error, None, "the error is cleared once it succeeds");
}

#[test]
fn pending_nodes_keep_their_previous_status() {
    let before = Round::new(1_700_000_000, REV1, &["a"])
        .report(round(false, vec![failed("a", "ssh: timeout")], None))
        .render(&Status::default());
    let shutdown =
        Round::new(1_700_000_600, REV1, &["a"]).report(round(false, vec![NodeReport::new("a")], None)).render(&before);
    assert_eq!(file(&shutdown, "instances/a.yaml"), file(&before, "instances/a.yaml"));
    assert_eq!(shutdown.summary.last_round, RoundResult::Failed, "a round that processed nothing changes nothing");
}

#[test]
fn a_removed_instance_and_machine_set_disappear() {
    let mut first = Round::new(1_700_000_000, REV1, &["a", "b"]).report(round(
        false,
        vec![in_sync("a"), in_sync("b")],
        Some(cluster()),
    ));
    first.machine_sets = vec!["win-a".into(), "win-b".into()];
    let before = first.render(&Status::default());
    assert!(to_files(&before).contains_key("instances/b.yaml"));
    let mut second = Round::new(1_700_000_600, REV2, &["a"]).report(round(false, vec![in_sync("a")], Some(cluster())));
    second.machine_sets = vec!["win-a".into()];
    let after = second.render(&before);
    let paths: Vec<String> = to_files(&after).into_keys().collect();
    assert_eq!(paths, ["instances/a.yaml", "machinesets/win-a.yaml", "summary.yaml"]);
}

#[test]
fn warn_mode_drift_is_listed_and_nothing_is_recorded_as_applied() {
    let before = Round::new(1_700_000_000, REV1, &["a", "b"])
        .report(round(false, vec![in_sync("a"), failed("b", "ssh: timeout")], None))
        .render(&Status::default());
    let ops = |a| {
        done(
            a,
            vec![write_file("/etc/containerd/certs.d/quay.io/hosts.toml", None), set_env("NO_PROXY", ".local", None)],
            true,
        )
    };
    let mut check = Round::new(1_700_000_600, REV1, &["a", "b"]).report(round(true, vec![ops("a"), ops("b")], None));
    check.drift_check = true;
    check.drift_mode = DriftMode::Warn;
    let after = check.render(&before);
    let a = &after.instances["a"];
    assert_eq!(a.phase, InstancePhase::Drifted);
    assert_eq!(
        a.drift,
        ["~ /etc/containerd/certs.d/quay.io/hosts.toml", "~ environment NO_PROXY: (unset) -> \".local\""]
    );
    assert_eq!(a.applied_revision.as_deref(), Some(REV1));
    assert_eq!(a.condition(ConditionType::Ready).unwrap().reason, "DriftDetected");
    // b never reached the revision: what it lacks is no drift.
    assert_eq!(file(&after, "instances/b.yaml"), file(&before, "instances/b.yaml"));

    // Fixed by hand: the next check finds nothing and the drift goes.
    let mut clean = Round::new(1_700_001_200, REV1, &["a", "b"]).report(round(true, vec![in_sync("a")], None));
    clean.drift_check = true;
    clean.drift_mode = DriftMode::Warn;
    let fixed = clean.render(&after);
    assert_eq!((fixed.instances["a"].phase, fixed.instances["a"].drift.len()), (InstancePhase::Ready, 0));
}

#[test]
fn correct_mode_drift_is_listed_as_corrected() {
    let before = Round::new(1_700_000_000, REV1, &["a"])
        .report(round(false, vec![in_sync("a")], None))
        .render(&Status::default());
    let mut check = Round::new(1_700_000_600, REV1, &["a"]).report(round(
        false,
        vec![done("a", vec![write_file("/etc/x", Some(Outcome::Applied))], false)],
        None,
    ));
    check.drift_check = true;
    let after = check.render(&before);
    let a = &after.instances["a"];
    assert_eq!((a.phase, a.drift.as_slice()), (InstancePhase::Ready, &["~ /etc/x".to_owned()][..]));
    assert_eq!(a.condition(ConditionType::Ready).unwrap().reason, "DriftCorrected");
    assert_eq!(
        a.condition(ConditionType::Ready).unwrap().last_transition_time.as_second(),
        1_700_000_000,
        "still Ready: no transition"
    );
}

#[test]
fn issue_23_drift_a_retry_corrects_on_a_waiting_node_is_listed_like_a_drift_checks() {
    // SSH-only with a proxy: the node is at the revision and waits for a
    // reboot no cluster can make; only its retries (no drift checks) meet it.
    let before = Round::new(1_700_000_000, REV1, &["a", "b"])
        .report(round(false, vec![done("a", vec![], true), in_sync("b")], None))
        .render(&Status::default());
    assert_eq!(before.instances["a"].phase, InstancePhase::Waiting);
    let retry = Round::new(1_700_000_060, REV1, &["a", "b"]).report(round(
        false,
        vec![done("a", vec![write_file("/etc/x", Some(Outcome::Applied))], true)],
        None,
    ));
    assert!(!retry.drift_check, "a retry, not a drift check");
    let after = retry.render(&before);
    let a = &after.instances["a"];
    assert_eq!((a.phase, a.drift.as_slice()), (InstancePhase::Waiting, &["~ /etc/x".to_owned()][..]));
    assert_ne!(after, before, "a status commit records it");
    // A node still catching up to the revision has no drift, whoever runs it.
    let behind = Round::new(1_700_000_120, REV2, &["a", "b"]).report(round(
        false,
        vec![done("b", vec![write_file("/etc/x", Some(Outcome::Applied))], false)],
        None,
    ));
    assert!(behind.render(&after).instances["b"].drift.is_empty());
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
    let input = RoundInput {
        now: jiff::Timestamp::from_second(r.now).unwrap(),
        attempted: &r.attempted,
        applied: r.applied.as_deref(),
        invalid: &r.invalid,
        instances: &r.instances,
        machine_sets: &r.machine_sets,
        report: None,
        drift_check: false,
        drift_mode: DriftMode::Correct,
        secrets: &r.secrets,
        suspended_by: None,
    };
    let debug = format!("{input:?}");
    assert!(!debug.contains("s3cr3t"), "{debug}");
    assert!(debug.contains("[1 redacted]"), "{debug}");
}
