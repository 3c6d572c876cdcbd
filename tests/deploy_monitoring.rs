//! deploy/'s alerts and dashboard, read by Prometheus' own `promtool`:
//! the PrometheusRule's groups pass `promtool check rules`, every alert
//! has unit tests that pass `promtool test rules`
//! (tests/monitoring/alerts.test.yaml), every dashboard query parses as
//! PromQL (checked as a recording rule), and every `winfleet_*` series
//! the alerts and the dashboard name is one the daemon exposes.
//!
//! promtool comes from Debian's `prometheus` package, which
//! scripts/test.sh installs; the tests that run it are #[ignore]d (a plain
//! `cargo test` lists them as ignored) and fail without it when run.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use winfleet::daemon::http::metrics::Metrics;

const RULE: &str = "deploy/base/monitoring/prometheusrule.yaml";
const DASHBOARD: &str = "deploy/base/monitoring/winfleet-dashboard.json";
const ALERT_TESTS: &str = "tests/monitoring/alerts.test.yaml";

fn read(path: &str) -> String {
    std::fs::read_to_string(support::root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn rule_groups() -> Value {
    let rule: Value = serde_saphyr::from_str(&read(RULE)).unwrap();
    assert_eq!(rule["kind"], "PrometheusRule", "{RULE}");
    rule["spec"].clone()
}

/// Every query of the dashboard's panels, with Grafana's `$__rate_interval`
/// as Prometheus would get it.
fn dashboard_queries() -> Vec<(String, String)> {
    let dashboard: Value = serde_json::from_str(&read(DASHBOARD)).unwrap();
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap().replace("$__rate_interval", "5m");
            queries.push((panel["title"].as_str().unwrap().to_owned(), expr));
        }
    }
    queries
}

/// Runs promtool with `args` in `dir`; `None` when it is not installed
/// (and not required).
fn promtool(dir: &Path, args: &[&str]) -> Option<String> {
    let output = match Command::new("promtool").args(args).current_dir(dir).output() {
        Ok(output) => output,
        // Its tests are #[ignore]d: one that runs was asked for.
        Err(error) => panic!("promtool: {error} (Debian's prometheus package has it; scripts/test.sh installs it)"),
    };
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "promtool {}:\n{text}", args.join(" "));
    Some(text)
}

#[ignore = "needs promtool: scripts/test.sh runs it"]
#[test]
fn the_alerts_pass_promtools_check_and_their_unit_tests() {
    let dir = tempfile::tempdir().unwrap();
    // JSON is YAML: the PrometheusRule's spec is a Prometheus rule file.
    std::fs::write(dir.path().join("rules.yaml"), rule_groups().to_string()).unwrap();
    std::fs::write(dir.path().join("alerts.test.yaml"), read(ALERT_TESTS)).unwrap();
    let Some(checked) = promtool(dir.path(), &["check", "rules", "rules.yaml"]) else { return };
    assert!(checked.contains("SUCCESS: 7 rules found"), "{checked}");
    let tested = promtool(dir.path(), &["test", "rules", "alerts.test.yaml"]).unwrap();
    assert!(tested.contains("SUCCESS"), "{tested}");
}

#[test]
fn every_alert_has_unit_tests_that_see_it_fire_and_stay_quiet() {
    let tests: Value = serde_saphyr::from_str(&read(ALERT_TESTS)).unwrap();
    let cases: Vec<&Value> =
        tests["tests"].as_array().unwrap().iter().flat_map(|t| t["alert_rule_test"].as_array().unwrap()).collect();
    for group in rule_groups()["groups"].as_array().unwrap() {
        for rule in group["rules"].as_array().unwrap() {
            let alert = rule["alert"].as_str().unwrap();
            let of_it: Vec<_> = cases.iter().filter(|c| c["alertname"] == alert).collect();
            let fires = of_it.iter().any(|c| c["exp_alerts"].as_array().is_some_and(|a| !a.is_empty()));
            let quiet = of_it.iter().any(|c| c["exp_alerts"].as_array().is_some_and(Vec::is_empty));
            assert!(fires && quiet, "{alert}: {ALERT_TESTS} must see it fire and stay quiet");
            assert!(rule["labels"]["severity"].is_string(), "{alert} has a severity");
        }
    }
}

#[ignore = "needs promtool: scripts/test.sh runs it"]
#[test]
fn every_dashboard_query_parses_as_promql() {
    let queries = dashboard_queries();
    assert!(queries.len() >= 10, "{queries:?}");
    let rules: Vec<Value> = queries
        .iter()
        .enumerate()
        .map(|(i, (_, expr))| json!({"record": format!("winfleet:dashboard_query_{i}"), "expr": expr}))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let file = json!({"groups": [{"name": "winfleet-dashboard", "rules": rules}]});
    std::fs::write(dir.path().join("dashboard.yaml"), file.to_string()).unwrap();
    let Some(checked) = promtool(dir.path(), &["check", "rules", "dashboard.yaml"]) else { return };
    assert!(checked.contains(&format!("SUCCESS: {} rules found", queries.len())), "{checked}");
}

/// The base names of the series the daemon's `/metrics` shows, with every
/// family observed once.
fn exposed() -> BTreeSet<String> {
    let metrics = Metrics::new();
    metrics.round_finished("succeeded", Duration::from_secs(1));
    metrics.revision_applied(10.0);
    metrics.git_fetch(Duration::from_millis(10), true);
    metrics.set_applied_revision("0123abcd");
    metrics.set_nodes_by_phase(&[("Ready".to_owned(), 1)].into_iter().collect());
    metrics.set_suspended(false);
    let text = metrics.encode();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(|name| {
            let base = ["_bucket", "_count", "_sum"].iter().find_map(|s| name.strip_suffix(s)).unwrap_or(name);
            base.to_owned()
        })
        .collect()
}

fn named_series(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("winfleet_") {
        let tail = &rest[at..];
        let end = tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(tail.len());
        let name = &tail[..end];
        let base = ["_bucket", "_count", "_sum"].iter().find_map(|s| name.strip_suffix(s)).unwrap_or(name);
        names.push(base.to_owned());
        rest = &tail[end..];
    }
    names
}

#[test]
fn the_alerts_and_the_dashboard_name_only_series_the_daemon_exposes() {
    let exposed = exposed();
    let mut exprs: Vec<(String, String)> = dashboard_queries();
    for group in rule_groups()["groups"].as_array().unwrap() {
        for rule in group["rules"].as_array().unwrap() {
            exprs.push((rule["alert"].as_str().unwrap().to_owned(), rule["expr"].as_str().unwrap().to_owned()));
        }
    }
    let mut unknown = Vec::new();
    for (what, expr) in &exprs {
        for name in named_series(expr) {
            if !exposed.contains(&name) {
                unknown.push(format!("{what}: {name}"));
            }
        }
    }
    assert!(unknown.is_empty(), "not exposed by the daemon ({exposed:?}):\n{}", unknown.join("\n"));
    // The dashboard shows what the issue asks for.
    let all: String = exprs.iter().map(|(_, e)| e.as_str()).collect();
    for series in [
        "winfleet_nodes",
        "winfleet_rounds_total",
        "winfleet_commit_to_applied_seconds",
        "winfleet_drift_detected_total",
        "winfleet_suspended",
    ] {
        assert!(all.contains(series), "{series} is used");
    }
}
