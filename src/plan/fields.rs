//! Field-level diffs of Kubernetes objects: every leaf by JSON pointer.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::diagnostic::child;

/// One leaf field before and after (`None` = absent).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FieldChange {
    /// JSON pointer of the field.
    pub pointer: String,
    /// Value in the base.
    pub from: Option<Value>,
    /// Value in the head.
    pub to: Option<Value>,
}

/// Every leaf of an object by pointer (empty objects and arrays are leaves).
pub fn leaves(value: &Value) -> BTreeMap<String, &Value> {
    let mut out = BTreeMap::new();
    walk(value, String::new(), &mut out);
    out
}

fn walk<'v>(value: &'v Value, at: String, out: &mut BTreeMap<String, &'v Value>) {
    match value {
        Value::Object(map) if !map.is_empty() => map.iter().for_each(|(k, v)| walk(v, child(&at, k), out)),
        Value::Array(items) if !items.is_empty() => {
            items.iter().enumerate().for_each(|(i, v)| walk(v, child(&at, i), out))
        }
        leaf => {
            out.insert(at, leaf);
        }
    }
}

/// The leaf fields that differ, sorted by pointer.
pub fn diff(base: Option<&Value>, head: Option<&Value>) -> Vec<FieldChange> {
    let (b, h) = (base.map(leaves).unwrap_or_default(), head.map(leaves).unwrap_or_default());
    let mut pointers: Vec<&String> = b.keys().chain(h.keys()).collect();
    pointers.sort();
    pointers.dedup();
    pointers
        .into_iter()
        .filter_map(|p| {
            let (from, to) = (b.get(p).copied(), h.get(p).copied());
            (from != to).then(|| FieldChange { pointer: p.clone(), from: from.cloned(), to: to.cloned() })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_differing_leaves_are_listed() {
        let a = json!({"spec": {"replicas": 1, "t": {"x": [1, 2]}, "gone": "y"}});
        let b = json!({"spec": {"replicas": 2, "t": {"x": [1, 3]}, "new": {}}});
        let d = diff(Some(&a), Some(&b));
        let got: Vec<_> = d.iter().map(|c| c.pointer.as_str()).collect();
        assert_eq!(got, ["/spec/gone", "/spec/new", "/spec/replicas", "/spec/t/x/1"]);
    }
}
