//! MachineHealthChecks on Windows MachineSets (issue 37, point 3). Pure.
//!
//! machine-api-operator's MachineHealthCheck controller deletes a Machine
//! it selects that has no Node `nodeStartupTimeout` (default 10m) after the
//! Machine's `status.lastUpdated`, the Machine controller's last status
//! change (Provisioned, for a VM that booted). A Windows Machine has no
//! Node until winfleet has configured it: the Containers feature's reboot
//! first, then the kubelet, whose registration makes the Node. Nothing
//! holds that clock that winfleet could honestly set: `status.lastUpdated`
//! is the Machine controller's, the only annotation the controller honours
//! (`cluster.x-k8s.io/paused`) pauses the administrator's whole
//! MachineHealthCheck, and a Node is the kubelet's to register. So a
//! MachineHealthCheck whose `nodeStartupTimeout` is shorter than a join
//! can take deletes Machines mid-configure, and their replacements after
//! them: winfleet says so ([`findings`]), naming the MachineHealthCheck
//! and the value it needs; docs/lifecycle.md ("MachineHealthCheck") says
//! how to set it.
//!
//! The join winfleet expects ([`JoinBudget`]) is what its round waits for
//! a Machine with no Node: the reboot (`--reboot-timeout`, 15m by default)
//! and the kubelet's registration (`--join-timeout`, 10m). A paused
//! MachineHealthCheck, or one with `nodeStartupTimeout: "0"` (the startup
//! check disabled), deletes no Machine for having no Node.

use std::fmt::Write as _;
use std::time::Duration;

use kube::api::{ApiResource, GroupVersionKind};
use serde::Serialize;
use serde_json::Value;

/// `machine.openshift.io/v1beta1` MachineHealthCheck.
pub fn machine_health_check_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("machine.openshift.io", "v1beta1", "MachineHealthCheck"),
        "machinehealthchecks",
    )
}

/// The annotation that pauses a MachineHealthCheck (the only one its
/// controller honours).
pub const PAUSED_ANNOTATION: &str = "cluster.x-k8s.io/paused";

/// The controller's `nodeStartupTimeout` when the object has none.
pub const DEFAULT_NODE_STARTUP_TIMEOUT: Duration = Duration::from_secs(600);

/// How long winfleet's round may take from configuring a Machine's VM to
/// its Node's registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JoinBudget {
    /// The wait for the host back from the Containers feature's reboot.
    pub reboot: Duration,
    /// The wait for the kubelet's CSRs and its Node's registration.
    pub register: Duration,
}

impl JoinBudget {
    /// The `nodeStartupTimeout` a MachineHealthCheck on Windows Machines
    /// needs at least (the cloud's boot time comes on top).
    pub fn needed(self) -> Duration {
        self.reboot + self.register
    }
}

/// A MachineHealthCheck that can delete a Windows Machine winfleet is still
/// configuring.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthCheckFinding {
    /// The MachineHealthCheck (in openshift-machine-api).
    pub health_check: String,
    /// The Windows MachineSet whose Machines it selects.
    pub machine_set: String,
    /// Its `nodeStartupTimeout` (`10m (the default)` when unset).
    pub node_startup_timeout: String,
    /// The `nodeStartupTimeout` it needs at least, as it would be written.
    pub needed: String,
}

impl HealthCheckFinding {
    /// The finding in one sentence.
    pub fn message(&self) -> String {
        format!(
            "MachineHealthCheck {} selects the Machines of MachineSet {} with nodeStartupTimeout {}, shorter than a \
             Windows join can take here: it can delete a Machine winfleet is still configuring (the Containers \
             feature's reboot and the kubelet's registration come before its Node), and each replacement after it; \
             set its spec.nodeStartupTimeout to at least {} plus the VM's boot time (docs/lifecycle.md, \
             MachineHealthCheck)",
            self.health_check, self.machine_set, self.node_startup_timeout, self.needed
        )
    }
}

/// The findings: each (MachineHealthCheck, Windows MachineSet) pair where
/// the MachineHealthCheck selects the MachineSet's Machines (its template's
/// labels) and would delete one with no Node sooner than `budget` allows.
/// `machine_sets` are (name, object); only those whose template carries
/// `machine.openshift.io/os-id: Windows` count.
pub fn findings<'a>(
    health_checks: &[Value],
    machine_sets: impl IntoIterator<Item = (&'a str, &'a Value)>,
    budget: JoinBudget,
) -> Vec<HealthCheckFinding> {
    let windows: Vec<(&str, &Value)> = machine_sets
        .into_iter()
        .filter(|(_, s)| {
            s.pointer("/spec/template/metadata/labels/machine.openshift.io~1os-id").and_then(Value::as_str)
                == Some("Windows")
        })
        .collect();
    let needed = budget.needed();
    let mut out = Vec::new();
    for check in health_checks {
        let Some(name) = check.pointer("/metadata/name").and_then(Value::as_str) else { continue };
        if check.pointer("/metadata/annotations").and_then(|a| a.get(PAUSED_ANNOTATION)).is_some() {
            continue;
        }
        let set_timeout = check.pointer("/spec/nodeStartupTimeout").and_then(Value::as_str);
        let timeout = match set_timeout {
            None => DEFAULT_NODE_STARTUP_TIMEOUT,
            Some(text) => match startup_timeout(text) {
                Some(t) if !t.is_zero() => t,
                // Disabled ("0"), or a value the controller could not
                // have been given (the CRD's pattern refuses it).
                _ => continue,
            },
        };
        if timeout >= needed {
            continue;
        }
        let selector = check.pointer("/spec/selector").cloned().unwrap_or(Value::Null);
        for (set, object) in &windows {
            let labels = object.pointer("/spec/template/metadata/labels").unwrap_or(&Value::Null);
            if selects(&selector, labels) {
                out.push(HealthCheckFinding {
                    health_check: name.to_owned(),
                    machine_set: (*set).to_owned(),
                    node_startup_timeout: set_timeout
                        .map_or_else(|| format!("{} (the default)", go_duration(timeout)), str::to_owned),
                    needed: go_duration(needed),
                });
            }
        }
    }
    out.sort_by(|a, b| (&a.health_check, &a.machine_set).cmp(&(&b.health_check, &b.machine_set)));
    out
}

/// A `nodeStartupTimeout` (a Go duration such as `10m`, `1h30m`, `300ms`,
/// or `0`: disabled).
fn startup_timeout(text: &str) -> Option<Duration> {
    if text.trim() == "0" {
        return Some(Duration::ZERO);
    }
    crate::duration::parse(text)
}

/// Whether the label selector `selector` (`matchLabels`,
/// `matchExpressions`) selects `labels`; an empty one selects everything,
/// as the MachineHealthCheck controller has it.
pub fn selects(selector: &Value, labels: &Value) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let match_labels = selector.get("matchLabels").and_then(Value::as_object);
    let labels_hold = match_labels.into_iter().flatten().all(|(k, v)| label(k) == v.as_str());
    let expressions = selector.get("matchExpressions").and_then(Value::as_array);
    let expressions_hold = expressions.into_iter().flatten().all(|e| {
        let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
        let values: Vec<&str> =
            e.get("values").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        match e.get("operator").and_then(Value::as_str) {
            Some("In") => label(key).is_some_and(|v| values.contains(&v)),
            Some("NotIn") => label(key).is_none_or(|v| !values.contains(&v)),
            Some("Exists") => label(key).is_some(),
            Some("DoesNotExist") => label(key).is_none(),
            // The controller cannot build such a selector: it selects nothing.
            _ => false,
        }
    });
    labels_hold && expressions_hold
}

/// `d` as a Go duration, whole seconds rounded up: `16s`, `25m`, `1h2m3s`.
pub fn go_duration(d: Duration) -> String {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut out = String::new();
    for (n, unit) in [(h, "h"), (m, "m"), (s, "s")] {
        if n > 0 {
            let _ = write!(out, "{n}{unit}");
        }
    }
    if out.is_empty() { "0s".to_owned() } else { out }
}

#[cfg(test)]
#[path = "health_checks_tests.rs"]
mod tests;
