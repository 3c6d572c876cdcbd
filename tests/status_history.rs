//! What the status files carry from one round to the next, rendered from
//! hand-built round reports: the applied revision across an invalid one,
//! condition transition times, partial rounds and pending nodes, instances
//! and MachineSets leaving the revision, and drift in both modes (listed,
//! and gone once fixed).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::status::{REV1, REV2, Round, cluster, done, failed, file, in_sync, round, set_env, write_file};
use winfleet::desired::kinds::fleet::DriftMode;
use winfleet::engine::report::NodeReport;
use winfleet::node::outcome::Outcome;
use winfleet::status::model::{ConditionType, InstancePhase, RoundResult, Status};
use winfleet::status::{commit_message, summary_line, to_files};

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
