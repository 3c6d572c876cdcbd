//! Tests of the schedule and of the one error classification.

use super::*;

const POLL: Duration = Duration::from_secs(60);
const DRIFT: Duration = Duration::from_secs(600);

fn schedule(now: Instant) -> Schedule {
    Schedule::new(now, POLL, DRIFT, 7)
}

#[test]
fn the_first_round_checks_the_source_at_once() {
    let now = Instant::now();
    let mut s = schedule(now);
    assert_eq!(s.next_wake(now), now);
    let work = s.take(now);
    assert_eq!(work, Some(Work { check_source: true, ..Work::default() }));
    assert_eq!(s.take(now), None);
}

#[test]
fn a_burst_of_triggers_becomes_one_round() {
    let now = Instant::now();
    let mut s = schedule(now);
    s.take(now);
    let later = now + Duration::from_secs(1);
    for i in 0..10u64 {
        s.trigger(Trigger::Webhook { received: later + Duration::from_millis(i) });
        s.trigger(Trigger::FsChange);
    }
    s.trigger(Trigger::ClusterChange { addresses: vec!["10.0.0.1".into()] });
    let work = s.take(later).unwrap_or_default();
    assert!(work.check_source);
    assert_eq!(work.webhook_received, Some(later), "the earliest delivery is kept");
    assert_eq!(work.cluster, BTreeSet::from([vec!["10.0.0.1".to_owned()]]));
    assert_eq!(s.take(later), None, "exactly one round");
}

#[test]
fn poll_fires_within_five_percent_of_its_interval() {
    let now = Instant::now();
    let mut s = schedule(now);
    s.take(now);
    let wake = s.next_wake(now);
    assert!(wake >= now + POLL.mul_f64(0.95) && wake <= now + POLL.mul_f64(1.05), "{:?}", wake - now);
    assert_eq!(s.take(wake - Duration::from_millis(1)), None);
    assert_eq!(s.take(wake).map(|w| w.check_source), Some(true));
}

#[test]
fn drift_fires_after_its_interval_and_restarts_after_a_full_round() {
    let now = Instant::now();
    let mut s = Schedule::new(now, Duration::from_secs(3600), DRIFT, 1);
    s.take(now);
    let full_round_end = now + Duration::from_secs(100);
    s.observed_all(full_round_end);
    assert_eq!(s.take(now + DRIFT), None, "a full round restarted the drift timer");
    let work = s.take(full_round_end + DRIFT).unwrap_or_default();
    assert!(work.drift && !work.check_source);
}

#[test]
fn transient_failures_back_off_exponentially_up_to_the_cap() {
    let now = Instant::now();
    let mut s = schedule(now);
    let delays: Vec<Duration> = (0..10).filter_map(|_| s.node_done("10.0.0.1", NodeOutcome::Transient, now)).collect();
    for (i, d) in delays.iter().enumerate() {
        let nominal = BACKOFF_BASE.saturating_mul(1 << i.min(16)).min(BACKOFF_CAP);
        assert!(*d >= nominal.mul_f64(0.8) && *d <= nominal.mul_f64(1.2), "retry {i}: {d:?} vs {nominal:?}");
    }
    assert!(s.backing_off("10.0.0.1", now));
    s.node_done("10.0.0.1", NodeOutcome::Succeeded, now);
    assert!(!s.backing_off("10.0.0.1", now));
}

#[test]
fn an_expired_backoff_retries_that_node_only() {
    let now = Instant::now();
    let mut s = Schedule::new(now, Duration::from_secs(3600), Duration::from_secs(3600), 3);
    s.take(now);
    let delay = s.node_done("10.0.0.2", NodeOutcome::Transient, now).unwrap_or_default();
    assert_eq!(s.next_wake(now), now + delay);
    let work = s.take(now + delay).unwrap_or_default();
    assert_eq!(work.retry, BTreeSet::from(["10.0.0.2".to_owned()]));
    assert!(!work.check_source && !work.drift);
    assert_eq!(s.take(now + delay), None, "not retried twice before its outcome is known");
    assert!(s.backing_off("10.0.0.2", now + delay), "left out of drift rounds meanwhile");
    // The round ended without a word on it (say the new head was invalid): due again soon.
    s.settle(now + delay);
    let again = s.take(now + delay + BACKOFF_BASE).unwrap_or_default();
    assert_eq!(again.retry, BTreeSet::from(["10.0.0.2".to_owned()]));
}

#[test]
fn an_absurd_interval_saturates_instead_of_panicking() {
    let now = Instant::now();
    let mut s = Schedule::new(now, Duration::MAX, Duration::MAX, 5);
    s.set_drift_every(Duration::from_secs(u64::MAX / 2), now);
    assert_eq!(s.take(now).map(|w| w.check_source), Some(true));
    assert!(s.next_wake(now) > now);
}

/// Every outcome kind: what status says (reason, class) and what the
/// schedule does agree, including the three cases where they once
/// disagreed (a failed Node-metadata write, an unreadable cluster with
/// a reboot owed, a reboot not started).
#[test]
fn status_and_schedule_agree_on_every_outcome_kind() {
    use crate::cluster::join::{JoinReport, JoinResult, JoinStep};
    use crate::cluster::rollout::{RebootReport, RebootResult, RebootStage};
    use crate::cluster::upgrade::{UpgradeReport, UpgradeResult, UpgradeStage};
    use crate::engine::report::{NodeReport, NodeResult, Stage};
    use crate::lifecycle::Mode;
    use crate::node::outcome::Outcome;
    use crate::reconcile::report::{ClusterReport, NodeMetadataReport};
    use NodeOutcome::{Succeeded, Transient, Waiting};
    const A: &str = "10.0.0.1";
    let done = |reboot_required| NodeReport {
        result: NodeResult::Done { operations: Vec::new(), in_sync: 1, reboot_required },
        ..NodeReport::new(A)
    };
    let failed = |stage| NodeReport { result: NodeResult::Failed { stage, reason: "x".into() }, ..NodeReport::new(A) };
    let lifecycle = |mode| {
        let mut n = done(false);
        n.lifecycle = Some(crate::engine::report::LifecycleReport {
            mode,
            version: "b".into(),
            waiting: Vec::new(),
            error: None,
            uploaded_bytes: 0,
            reboot_first: false,
        });
        n
    };
    let reboot = |result| ClusterReport {
        reboots: vec![RebootReport { node: "win-1".into(), address: A.into(), result }],
        ..ClusterReport::default()
    };
    let upgrade = |result| ClusterReport {
        upgrades: vec![UpgradeReport {
            node: "win-1".into(),
            address: A.into(),
            from: "a".into(),
            to: "b".into(),
            result,
        }],
        ..ClusterReport::default()
    };
    let join = |result| ClusterReport {
        joins: vec![JoinReport { address: A.into(), node: None, result, services: None }],
        ..ClusterReport::default()
    };
    let metadata_failed = ClusterReport {
        associated: BTreeMap::from([(A.to_owned(), "win-1".to_owned())]),
        nodes: vec![NodeMetadataReport {
            node: "win-1".into(),
            instance: A.into(),
            changes: Vec::new(),
            outcome: Some(Outcome::Failed("conflict".into())),
        }],
        ..ClusterReport::default()
    };
    let unreadable = ClusterReport { error: Some("503".into()), ..ClusterReport::default() };
    let drain = |reason: &str| RebootResult::Failed { stage: RebootStage::Drain, reason: reason.into() };
    type Status<'a> = Option<(&'a str, Option<ErrorClass>)>;
    type Row<'a> = (&'a str, NodeReport, Option<ClusterReport>, Status<'a>, Option<NodeOutcome>);
    let rows: Vec<Row<'_>> = vec![
        ("pending", NodeReport::new(A), None, None, None),
        ("in sync", done(false), Some(ClusterReport::default()), Some(("InSync", None)), Some(Succeeded)),
        (
            "observe failed",
            failed(Stage::Observe),
            None,
            Some(("ObserveFailed", Some(ErrorClass::Transient))),
            Some(Transient),
        ),
        (
            "upload failed",
            failed(Stage::Upload),
            None,
            Some(("UploadFailed", Some(ErrorClass::Transient))),
            Some(Transient),
        ),
        (
            "metadata write failed",
            done(false),
            Some(metadata_failed),
            Some(("NodeUpdateFailed", Some(ErrorClass::Transient))),
            Some(Transient),
        ),
        (
            "cluster unreadable, reboot owed",
            done(true),
            Some(unreadable),
            Some(("ClusterUnavailable", Some(ErrorClass::Transient))),
            Some(Transient),
        ),
        (
            "reboot not started",
            done(true),
            Some(reboot(RebootResult::NotStarted { reason: String::new() })),
            Some(("WaitingForRolloutSlot", Some(ErrorClass::Waiting))),
            Some(Waiting),
        ),
        (
            "drain blocked",
            done(true),
            Some(reboot(drain("pdb"))),
            Some(("DrainBlocked", Some(ErrorClass::Waiting))),
            Some(Waiting),
        ),
        (
            "not back",
            done(true),
            Some(reboot(RebootResult::Failed { stage: RebootStage::WaitBack, reason: "gone".into() })),
            Some(("NodeNotBack", Some(ErrorClass::Transient))),
            Some(Transient),
        ),
        (
            "rebooted",
            done(true),
            Some(reboot(RebootResult::Rebooted { evicted: 0, resumed: false })),
            Some(("InSync", None)),
            Some(Succeeded),
        ),
        (
            "join failed",
            lifecycle(Mode::Join),
            Some(join(JoinResult::Failed { step: JoinStep::Register, reason: "x".into() })),
            Some(("JoinFailed", Some(ErrorClass::Transient))),
            Some(Transient),
        ),
        (
            "join not started",
            lifecycle(Mode::Join),
            Some(join(JoinResult::NotStarted { reason: "x".into() })),
            Some(("Configuring", Some(ErrorClass::Waiting))),
            Some(Waiting),
        ),
        ("joined", lifecycle(Mode::Join), Some(join(JoinResult::Joined)), Some(("Joined", None)), Some(Succeeded)),
        (
            "upgrade not started",
            lifecycle(Mode::UpgradePending),
            Some(upgrade(UpgradeResult::NotStarted { reason: "x".into() })),
            Some(("WaitingForRolloutSlot", Some(ErrorClass::Waiting))),
            Some(Waiting),
        ),
        (
            "upgrade drain failed",
            lifecycle(Mode::UpgradePending),
            Some(upgrade(UpgradeResult::Failed { stage: UpgradeStage::Drain, reason: "pdb".into() })),
            Some(("DrainBlocked", Some(ErrorClass::Waiting))),
            Some(Waiting),
        ),
        (
            "upgrade failed",
            lifecycle(Mode::UpgradePending),
            Some(upgrade(UpgradeResult::Failed { stage: UpgradeStage::Ready, reason: "x".into() })),
            Some(("UpgradeFailed", Some(ErrorClass::Transient))),
            Some(Transient),
        ),
    ];
    for (name, node, cluster, status, schedule) in rows {
        let report = RoundReport { dry_run: false, nodes: vec![node], cluster };
        let ctx = Context { round: &report, drift_check: false, warn: false, at_revision: true, suspended: false };
        let verdict = verdict::instance(&report.nodes[0], ctx);
        assert_eq!(verdict.as_ref().map(|v| (v.reason, v.class)), status, "{name}: status");
        assert_eq!(node_outcomes(&report, false, false).get(A).copied(), schedule, "{name}: schedule");
    }
}

#[test]
fn waiting_nodes_retry_at_a_fixed_interval() {
    let now = Instant::now();
    let mut s = schedule(now);
    for _ in 0..5 {
        let d = s.node_done("10.0.0.3", NodeOutcome::Waiting, now).unwrap_or_default();
        assert!(d >= WAITING_RETRY.mul_f64(0.9) && d <= WAITING_RETRY.mul_f64(1.1));
    }
}

/// The loop's way of waiting (sleep until the next wake, then take),
/// on tokio's paused clock: an hour of polls and drift checks.
#[tokio::test(start_paused = true)]
async fn an_hour_on_the_paused_clock_gives_polls_and_drift_checks_on_time() {
    let start = Instant::now();
    let mut s = schedule(start);
    s.take(start);
    let (mut polls, mut drifts) = (0, Vec::new());
    while Instant::now() < start + Duration::from_secs(3600) {
        tokio::time::sleep_until(s.next_wake(Instant::now())).await;
        let now = Instant::now();
        let Some(work) = s.take(now) else { continue };
        polls += usize::from(work.check_source);
        if work.drift {
            drifts.push(now - start);
            s.observed_all(now);
        }
    }
    assert!((58..=63).contains(&polls), "one poll a minute ±5%: {polls}");
    let expected: Vec<Duration> = (1..=6).map(|i| DRIFT * i).collect();
    assert_eq!(drifts, expected, "a drift check every 10 minutes");
}
