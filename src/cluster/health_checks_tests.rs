use serde_json::json;

use super::*;

const BUDGET: JoinBudget = JoinBudget { reboot: Duration::from_secs(900), register: Duration::from_secs(600) };

fn windows_set() -> Value {
    json!({ "spec": { "template": { "metadata": { "labels": {
        "machine.openshift.io/cluster-api-machineset": "win",
        "machine.openshift.io/cluster-api-machine-role": "worker",
        "machine.openshift.io/os-id": "Windows",
    } } } } })
}

fn linux_set() -> Value {
    json!({ "spec": { "template": { "metadata": { "labels": {
        "machine.openshift.io/cluster-api-machineset": "linux",
        "machine.openshift.io/cluster-api-machine-role": "worker",
    } } } } })
}

fn check(name: &str, spec: Value) -> Value {
    json!({ "metadata": { "name": name, "namespace": "openshift-machine-api" }, "spec": spec })
}

fn run(checks: &[Value]) -> Vec<HealthCheckFinding> {
    let (win, linux) = (windows_set(), linux_set());
    findings(checks, [("win", &win), ("linux", &linux)], BUDGET)
}

#[test]
fn a_check_on_the_windows_machines_shorter_than_the_join_is_named_with_the_value_it_needs() {
    let workers = json!({ "matchLabels": { "machine.openshift.io/cluster-api-machine-role": "worker" } });
    let found = run(&[check("workers", json!({ "selector": workers, "nodeStartupTimeout": "10m" }))]);
    assert_eq!(
        found,
        [HealthCheckFinding {
            health_check: "workers".into(),
            machine_set: "win".into(),
            node_startup_timeout: "10m".into(),
            needed: "25m".into(),
        }]
    );
    let message = found[0].message();
    assert!(message.contains("MachineHealthCheck workers selects the Machines of MachineSet win"), "{message}");
    assert!(message.contains("set its spec.nodeStartupTimeout to at least 25m"), "{message}");
}

#[test]
fn a_check_without_a_timeout_is_judged_by_the_controllers_default_of_ten_minutes() {
    let found = run(&[check("all", json!({ "selector": {} }))]);
    assert_eq!(found.len(), 1, "an empty selector selects every Machine: {found:?}");
    assert_eq!(found[0].node_startup_timeout, "10m (the default)");
}

#[test]
fn a_long_enough_disabled_paused_or_non_windows_check_is_no_finding() {
    let win = json!({ "matchLabels": { "machine.openshift.io/os-id": "Windows" } });
    let mut paused = check("paused", json!({ "selector": win, "nodeStartupTimeout": "1m" }));
    paused["metadata"]["annotations"] = json!({ PAUSED_ANNOTATION: "" });
    let linux = json!({ "matchExpressions": [{ "key": "machine.openshift.io/os-id", "operator": "DoesNotExist" }] });
    let checks = [
        check("long", json!({ "selector": win, "nodeStartupTimeout": "25m" })),
        check("longer", json!({ "selector": win, "nodeStartupTimeout": "1h30m" })),
        check("disabled", json!({ "selector": win, "nodeStartupTimeout": "0" })),
        paused,
        check("linux", json!({ "selector": linux, "nodeStartupTimeout": "1m" })),
    ];
    assert_eq!(run(&checks), []);
}

#[test]
fn selectors_read_match_labels_and_expressions_as_kubernetes_does() {
    let labels = json!({ "a": "1", "b": "2" });
    let yes = [
        json!({}),
        json!({ "matchLabels": { "a": "1" } }),
        json!({ "matchExpressions": [{ "key": "a", "operator": "In", "values": ["0", "1"] }] }),
        json!({ "matchExpressions": [{ "key": "a", "operator": "NotIn", "values": ["0"] }] }),
        json!({ "matchExpressions": [{ "key": "c", "operator": "NotIn", "values": ["0"] }] }),
        json!({ "matchExpressions": [{ "key": "b", "operator": "Exists" }] }),
        json!({ "matchExpressions": [{ "key": "c", "operator": "DoesNotExist" }] }),
    ];
    let no = [
        json!({ "matchLabels": { "a": "2" } }),
        json!({ "matchLabels": { "a": "1", "c": "3" } }),
        json!({ "matchExpressions": [{ "key": "a", "operator": "In", "values": ["2"] }] }),
        json!({ "matchExpressions": [{ "key": "a", "operator": "NotIn", "values": ["1"] }] }),
        json!({ "matchExpressions": [{ "key": "a", "operator": "DoesNotExist" }] }),
        json!({ "matchExpressions": [{ "key": "a", "operator": "Gt", "values": ["0"] }] }),
    ];
    for s in &yes {
        assert!(selects(s, &labels), "{s}");
    }
    for s in &no {
        assert!(!selects(s, &labels), "{s}");
    }
}

#[test]
fn the_needed_value_is_written_as_a_go_duration_the_crd_accepts() {
    assert_eq!(go_duration(Duration::from_secs(16)), "16s");
    assert_eq!(go_duration(Duration::from_secs(1500)), "25m");
    assert_eq!(go_duration(Duration::from_secs(3723)), "1h2m3s");
    assert_eq!(go_duration(Duration::from_millis(1500)), "2s");
    assert_eq!(go_duration(Duration::ZERO), "0s");
    assert_eq!(startup_timeout("300ms"), Some(Duration::from_millis(300)));
    assert_eq!(startup_timeout("0"), Some(Duration::ZERO));
}
