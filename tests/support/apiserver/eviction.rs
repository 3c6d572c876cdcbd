//! `POST pods/{name}/eviction`, honouring PodDisruptionBudgets, and the
//! disruption controller's PodDisruptionBudget status.
//!
//! The disruption controller runs synchronously: every write of a pod, or
//! of a PDB's spec, recomputes the status of the PDBs of its namespace
//! ([`refresh_budgets`], called by the store's commit; kube-controller-
//! manager does it a moment later). From the live pods:
//! - expectedPods = number of pods in the namespace matched by the PDB
//!   selector (the real controller asks the pods' controller for its scale
//!   when the budget is a percentage or maxUnavailable, and fails a budget
//!   over pods without one; here pod count stands in);
//! - currentHealthy = matched pods with condition Ready=True and no
//!   deletionTimestamp;
//! - desiredHealthy = minAvailable (int, or percent of expected rounded up),
//!   or expected − maxUnavailable (percent rounded up), or 0 with neither;
//! - disruptionsAllowed = currentHealthy − desiredHealthy (at least 0),
//!   observedGeneration, and the DisruptionAllowed condition
//!   (SufficientPods / InsufficientPods). `disruptedPods` is not kept (the
//!   real eviction records a pod there until it is terminating, a moment).
//!
//! An eviction: a pod that is Pending/Succeeded/Failed or already
//! terminating ignores PDBs (as `canIgnorePDB`). A not-ready pod is
//! evictable when the budget is currently met (`unhealthyPodEvictionPolicy`
//! IfHealthyBudget, the default) or always with AlwaysAllow. A ready pod is
//! evictable when the budget allows a disruption; otherwise 429 with the
//! `DisruptionBudget` cause, as the real server words it. The evicted pod is
//! deleted as a DELETE would: a pod bound to a node (`spec.nodeName`), not
//! finished, with a grace period (the Eviction's `deleteOptions`, else
//! `spec.terminationGracePeriodSeconds`, else 30 as the real server's
//! defaulting) is only marked (`deletionTimestamp` = now + grace,
//! `deletionGracePeriodSeconds`) and stays until its kubelet confirms with a
//! DELETE of grace 0 (tests/support/pods.rs); any other pod goes at once.

use serde_json::{Value, json};

use super::ops::Opts;
use super::resources;
use super::selectors::label_selector_object_matches;
use super::status::{ApiError, bad_request, internal, not_found};
use super::store::{Change, State};

fn is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions").and_then(Value::as_array).is_some_and(|cs| {
        cs.iter().any(|c| c.get("type") == Some(&json!("Ready")) && c.get("status") == Some(&json!("True")))
    })
}

fn terminating(pod: &Value) -> bool {
    pod.pointer("/metadata/deletionTimestamp").is_some_and(|v| !v.is_null())
}

/// `intstr.GetScaledValueFromIntOrPercent` with round-up.
fn scaled(v: &Value, total: i64) -> Result<i64, ApiError> {
    match v {
        Value::Number(n) => n.as_i64().ok_or_else(|| internal(format!("invalid value {n} in PodDisruptionBudget"))),
        Value::String(s) => match s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) {
            Some(p) => Ok((p * total + 99) / 100),
            None => s.parse().map_err(|_| internal(format!("invalid value for IntOrString: invalid value {s:?}"))),
        },
        _ => Err(internal("invalid IntOrString in PodDisruptionBudget")),
    }
}

pub(crate) fn evict(st: &mut State, o: &Opts, name: &str, body: &Value) -> Result<Value, ApiError> {
    if let Some(n) = body.pointer("/metadata/name").and_then(Value::as_str)
        && !n.is_empty()
        && n != name
    {
        return Err(bad_request("name in URL does not match name in Eviction object"));
    }
    let ns = o.namespace.clone().unwrap_or_default();
    let pod = st.get(o.res, Some(&ns), name).cloned().ok_or_else(|| not_found(o.res, name))?;
    let phase = pod.pointer("/status/phase").and_then(Value::as_str).unwrap_or_default();
    let ignore_pdb = matches!(phase, "Pending" | "Succeeded" | "Failed") || terminating(&pod);
    if !ignore_pdb {
        check_budget(st, &ns, &pod)?;
    }
    let change = Change {
        verb: "evict",
        res: o.res,
        namespace: Some(ns),
        name: name.to_string(),
        subresource: Some("eviction".into()),
        manager: None,
        dry_run: o.dry_run,
        admit: o.admit,
        record: o.record,
    };
    match grace_period(&pod, body) {
        0 => st.commit(change, Some(&pod), None)?,
        _ if terminating(&pod) => pod.clone(),
        grace => {
            let mut marked = pod.clone();
            let at = k8s_openapi::jiff::Timestamp::now()
                .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(grace))
                .map_err(|e| internal(e.to_string()))?;
            marked["metadata"]["deletionTimestamp"] = json!(at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
            marked["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
            st.commit(change, Some(&pod), Some(marked))?
        }
    };
    Ok(super::status::success(201))
}

/// The grace period a deletion of `pod` gets (`CheckGracefulDelete` of the
/// pod strategy): the Eviction's `deleteOptions.gracePeriodSeconds`, else
/// the pod's `terminationGracePeriodSeconds`, defaulted to 30; 0 for a pod
/// bound to no node or finished.
fn grace_period(pod: &Value, eviction: &Value) -> i64 {
    let asked = eviction.pointer("/deleteOptions/gracePeriodSeconds").and_then(Value::as_i64);
    let own = pod.pointer("/spec/terminationGracePeriodSeconds").and_then(Value::as_i64);
    let unbound = pod.pointer("/spec/nodeName").and_then(Value::as_str).is_none_or(str::is_empty);
    let phase = pod.pointer("/status/phase").and_then(Value::as_str).unwrap_or_default();
    if unbound || matches!(phase, "Succeeded" | "Failed") { 0 } else { asked.or(own).unwrap_or(30).max(0) }
}
/// The budget of `pdb` over the live pods of `ns`.
struct Budget {
    expected: i64,
    healthy: i64,
    desired: i64,
}

fn budget(st: &State, ns: &str, pdb: &Value) -> Result<Budget, ApiError> {
    let pod_res = resources::by_kind("v1", "Pod").ok_or_else(|| internal("resource table is missing pods"))?;
    let selector = pdb.pointer("/spec/selector");
    let matched: Vec<&Value> =
        st.iter(pod_res, Some(ns)).filter(|p| label_selector_object_matches(selector, p)).collect();
    let expected = matched.len() as i64;
    let healthy = matched.iter().filter(|p| is_ready(p) && !terminating(p)).count() as i64;
    let desired = match (pdb.pointer("/spec/minAvailable"), pdb.pointer("/spec/maxUnavailable")) {
        (Some(min), _) if !min.is_null() => scaled(min, expected)?,
        (_, Some(max)) if !max.is_null() => (expected - scaled(max, expected)?).max(0),
        _ => 0,
    };
    Ok(Budget { expected, healthy, desired })
}

/// The disruption controller's pass over the PDBs of `ns`: each one's
/// status from the live pods, written (as kube-controller-manager, on the
/// status subresource, not in history) when it changed.
pub(crate) fn refresh_budgets(st: &mut State, ns: &str) {
    let Some(pdb_res) = resources::by_kind("policy/v1", "PodDisruptionBudget") else { return };
    let pdbs: Vec<Value> = st.iter(pdb_res, Some(ns)).cloned().collect();
    for pdb in pdbs {
        let Ok(b) = budget(st, ns, &pdb) else { continue };
        let generation = pdb.pointer("/metadata/generation").cloned().unwrap_or(json!(1));
        let allowed = (b.healthy - b.desired).max(0);
        let (state, reason) = if allowed > 0 { ("True", "SufficientPods") } else { ("False", "InsufficientPods") };
        let since = match pdb.pointer("/status/conditions/0") {
            Some(c) if c.get("status") == Some(&json!(state)) => c.get("lastTransitionTime").cloned(),
            _ => None,
        };
        let status = json!({
            "observedGeneration": generation,
            "disruptionsAllowed": allowed,
            "currentHealthy": b.healthy,
            "desiredHealthy": b.desired,
            "expectedPods": b.expected,
            "conditions": [{
                "type": "DisruptionAllowed", "status": state, "reason": reason, "message": "",
                "observedGeneration": generation,
                "lastTransitionTime": since.unwrap_or_else(|| json!(super::store::now())),
            }],
        });
        if pdb.get("status") == Some(&status) {
            continue;
        }
        let mut new = pdb.clone();
        new["status"] = status;
        let change = Change {
            verb: "update",
            res: pdb_res,
            namespace: Some(ns.to_owned()),
            name: pdb.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned(),
            subresource: Some("status".into()),
            manager: Some("kube-controller-manager".into()),
            dry_run: false,
            admit: false,
            record: false,
        };
        // A status the store refuses stays as it was, as after a failed sync.
        let _ = st.commit(change, Some(&pdb), Some(new));
    }
}

fn check_budget(st: &State, ns: &str, pod: &Value) -> Result<(), ApiError> {
    let Some(pdb_res) = resources::by_kind("policy/v1", "PodDisruptionBudget") else {
        return Err(internal("resource table is missing poddisruptionbudgets"));
    };
    let pdbs: Vec<&Value> = st
        .iter(pdb_res, Some(ns))
        .filter(|p| label_selector_object_matches(p.pointer("/spec/selector"), pod))
        .collect();
    let pdb = match pdbs.as_slice() {
        [] => return Ok(()),
        [one] => *one,
        _ => {
            return Err(internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
    };
    let Budget { healthy, desired, .. } = budget(st, ns, pdb)?;
    let allowed = if is_ready(pod) {
        healthy > desired
    } else {
        pdb.pointer("/spec/unhealthyPodEvictionPolicy").and_then(Value::as_str) == Some("AlwaysAllow")
            || healthy >= desired
    };
    if allowed {
        return Ok(());
    }
    let pdb_name = pdb.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    Err(ApiError::new(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.")
        .with_details(json!({
            "causes": [{
                "reason": "DisruptionBudget",
                "message": format!("The disruption budget {pdb_name} needs {desired} healthy pods and has {healthy} currently"),
            }]
        })))
}
