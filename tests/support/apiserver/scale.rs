//! The `scale` subresource of MachineSets (autoscaling/v1 `Scale`), as
//! kube-apiserver serves it for a CRD declaring `specReplicasPath:
//! .spec.replicas`, `statusReplicasPath: .status.replicas` and
//! `labelSelectorPath: .status.labelSelector`: a write changes only
//! `spec.replicas`, and `managedFields` records it as an `Update` of the
//! writer with `subresource: scale` (`kubectl scale`, an autoscaler). The
//! real server writes that entry without a `time`; this one keeps one.

use serde_json::{Value, json};

use super::ops::{self, Opts};
use super::resources::Resource;
use super::status::{ApiError, invalid};
use super::store::State;

/// Whether `res` serves `scale`.
pub(crate) fn served(res: &Resource) -> bool {
    res.kind == "MachineSet"
}

/// The `Scale` of a stored object.
pub(crate) fn of(obj: &Value) -> Value {
    let mut metadata = json!({});
    for k in ["name", "namespace", "uid", "resourceVersion", "creationTimestamp"] {
        if let Some(v) = obj.pointer(&format!("/metadata/{k}")) {
            metadata[k] = v.clone();
        }
    }
    let mut status = json!({ "replicas": obj.pointer("/status/replicas").cloned().unwrap_or(json!(0)) });
    if let Some(selector) = obj.pointer("/status/labelSelector") {
        status["selector"] = selector.clone();
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": { "replicas": obj.pointer("/spec/replicas").cloned().unwrap_or(json!(0)) },
        "status": status,
    })
}

/// Writes `scale` (the whole new `Scale`) to object `name`: its
/// `spec.replicas`, conditional on its `resourceVersion` when it has one.
pub(crate) fn write(st: &mut State, o: &Opts, name: &str, scale: &Value) -> Result<Value, ApiError> {
    let replicas = scale.pointer("/spec/replicas").and_then(Value::as_i64).filter(|r| *r >= 0).ok_or_else(|| {
        invalid(format!("Scale.autoscaling {name:?} is invalid: spec.replicas: Invalid value: must be a number >= 0"))
    })?;
    let precondition = scale.pointer("/metadata/resourceVersion").cloned();
    let o = Opts { subresource: Some("scale".into()), ..o.clone() };
    let written = ops::mutate(st, &o, name, |v| {
        v["spec"]["replicas"] = json!(replicas);
        if let Some(rv) = precondition {
            v["metadata"]["resourceVersion"] = rv;
        }
    })?;
    Ok(of(&written))
}
