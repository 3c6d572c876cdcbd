//! `POST pods/{name}/eviction`, honouring PodDisruptionBudgets.
//!
//! The disruption controller is simulated synchronously: instead of reading
//! the PDB's status (filled asynchronously by kube-controller-manager), the
//! budget is computed from the live pods at eviction time:
//! - expected = number of pods in the namespace matched by the PDB selector
//!   (the real controller asks the pods' controller for its scale when the
//!   budget is a percentage or maxUnavailable; here pod count stands in);
//! - currentHealthy = matched pods with condition Ready=True and no
//!   deletionTimestamp;
//! - desiredHealthy = minAvailable (int, or percent of expected rounded up),
//!   or expected − maxUnavailable (percent rounded up), or 0 with neither.
//!
//! A pod that is Pending/Succeeded/Failed or already terminating ignores
//! PDBs (as `canIgnorePDB`). A not-ready pod is evictable when the budget is
//! currently met (`unhealthyPodEvictionPolicy` IfHealthyBudget, the
//! default) or always with AlwaysAllow. A ready pod is evictable when
//! currentHealthy − 1 ≥ desiredHealthy. PDB status is not written.

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
    st.commit(change, Some(&pod), None)?;
    Ok(super::status::success(201))
}

fn check_budget(st: &State, ns: &str, pod: &Value) -> Result<(), ApiError> {
    let (Some(pdb_res), Some(pod_res)) =
        (resources::by_kind("policy/v1", "PodDisruptionBudget"), resources::by_kind("v1", "Pod"))
    else {
        return Err(internal("resource table is missing pods or poddisruptionbudgets"));
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
