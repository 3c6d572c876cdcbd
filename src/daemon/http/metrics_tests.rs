//! Tests of the metrics registry (`metrics.rs`).

use super::*;

fn phases(entries: &[(&str, u64)]) -> BTreeMap<String, u64> {
    entries.iter().map(|(phase, count)| (phase.to_string(), *count)).collect()
}

#[test]
fn encode_shows_every_family_with_its_labels() {
    let metrics = Metrics::new();
    metrics.round_finished("succeeded", Duration::from_millis(300));
    metrics.revision_applied(42.0);
    metrics.set_nodes_by_phase(&phases(&[("Ready", 3)]));
    metrics.drift_detected(2);
    metrics.ssh_error("apply");
    metrics.ssh_traffic(crate::ssh::Traffic { connections: 2, channels: 3, scripts: 5 });
    metrics.ssh_traffic(crate::ssh::Traffic { connections: 0, channels: 0, scripts: 2 });
    metrics.git_fetch(Duration::from_millis(20), true);
    metrics.git_fetch(Duration::from_secs(3), false);
    metrics.webhook_request("accepted");
    metrics.set_applied_revision("0123abcd");
    metrics.set_leader(true);
    metrics.set_deconfigure_refused(true);
    metrics.set_suspended(true);
    let text = metrics.encode();
    let stamp = text
        .lines()
        .find_map(|l| l.strip_prefix("winfleet_last_successful_round_timestamp_seconds "))
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or_default();
    assert!(stamp > 1_700_000_000, "the last success is stamped: {text}");

    for line in [
        "# TYPE winfleet_reconcile_duration_seconds histogram",
        "# UNIT winfleet_reconcile_duration_seconds seconds",
        "winfleet_reconcile_duration_seconds_count 1",
        "winfleet_reconcile_duration_seconds_bucket{le=\"0.05\"} 0",
        "winfleet_reconcile_duration_seconds_bucket{le=\"0.4\"} 1",
        "winfleet_reconcile_duration_seconds_bucket{le=\"1638.4\"} 1",
        "winfleet_commit_to_applied_seconds_count 1",
        "winfleet_commit_to_applied_seconds_bucket{le=\"32.0\"} 0",
        "winfleet_commit_to_applied_seconds_bucket{le=\"64.0\"} 1",
        "winfleet_rounds_total{result=\"succeeded\"} 1",
        "winfleet_rounds_total{result=\"failed\"} 0",
        "winfleet_rounds_total{result=\"invalid\"} 0",
        "# TYPE winfleet_nodes gauge",
        "winfleet_nodes{phase=\"Ready\"} 3",
        "winfleet_drift_detected_total 2",
        "winfleet_leader 1",
        "winfleet_deconfigure_refused 1",
        "# TYPE winfleet_suspended gauge",
        "winfleet_suspended 1",
        "winfleet_ssh_errors_total{stage=\"apply\"} 1",
        "winfleet_ssh_errors_total{stage=\"observe\"} 0",
        "winfleet_ssh_errors_total{stage=\"reboot\"} 0",
        "winfleet_ssh_traffic_total{kind=\"connections\"} 2",
        "winfleet_ssh_traffic_total{kind=\"channels\"} 3",
        "winfleet_ssh_traffic_total{kind=\"scripts\"} 7",
        "winfleet_git_fetch_duration_seconds_count{result=\"ok\"} 1",
        "winfleet_git_fetch_duration_seconds_count{result=\"error\"} 1",
        "winfleet_git_fetch_duration_seconds_bucket{le=\"0.02\",result=\"ok\"} 1",
        "winfleet_webhook_requests_total{result=\"accepted\"} 1",
        "winfleet_webhook_requests_total{result=\"too_large\"} 0",
        "# TYPE winfleet_applied_revision info",
        "winfleet_applied_revision_info{revision=\"0123abcd\"} 1",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in:\n{text}");
    }
    assert!(text.ends_with("# EOF\n"), "{text}");
    assert!(!text.contains("_total_total"), "{text}");
}

#[test]
fn a_new_applied_revision_replaces_the_old_one() {
    let metrics = Metrics::new();
    assert!(!metrics.encode().contains("applied_revision"));
    metrics.set_applied_revision("aaaa");
    metrics.set_applied_revision("bbbb");
    let text = metrics.encode();
    assert!(text.contains("winfleet_applied_revision_info{revision=\"bbbb\"} 1"), "{text}");
    assert!(!text.contains("aaaa"), "{text}");
}

#[test]
fn phases_missing_from_a_later_count_drop_to_zero() {
    let metrics = Metrics::new();
    metrics.set_nodes_by_phase(&phases(&[("Ready", 2), ("Rebooting", 1)]));
    metrics.set_nodes_by_phase(&phases(&[("Ready", 3)]));
    let text = metrics.encode();
    assert!(text.contains("winfleet_nodes{phase=\"Ready\"} 3"), "{text}");
    assert!(text.contains("winfleet_nodes{phase=\"Rebooting\"} 0"), "{text}");
    metrics.set_nodes_by_phase(&phases(&[]));
    let text = metrics.encode();
    assert!(text.contains("winfleet_nodes{phase=\"Ready\"} 0"), "{text}");
}
