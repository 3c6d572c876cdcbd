//! Field ownership as the API server records it (`metadata.managedFields`),
//! read for the MachineSet plan. Pure.
//!
//! A field manager is a name, an operation (`Apply` or `Update`) and a
//! subresource, as the API server tells them apart: winfleet's own
//! `Update` entry, or a `kubectl scale` through the `scale` subresource,
//! is another manager than winfleet's `Apply`. A field winfleet would set
//! that another manager owns with another value live is a conflict: server-
//! side apply without force refuses it with 409, and winfleet reports it
//! instead of sending it.

use std::fmt;

use serde::Serialize;
use serde_json::Value;

use crate::cluster::FIELD_MANAGER;
use crate::diagnostic::child;
use crate::plan::fields::FieldChange;
use crate::plan::show_value;

/// A field manager as `managedFields` and the API server's conflicts name it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Manager {
    /// `kubectl-edit`, `cluster-autoscaler`, …
    pub name: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// `scale`, `status`, when written through a subresource.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subresource: Option<String>,
}

impl Manager {
    fn of(entry: &Value) -> Option<Manager> {
        let text = |k: &str| entry.get(k).and_then(Value::as_str).map(str::to_owned);
        Some(Manager {
            name: text("manager")?,
            operation: text("operation").unwrap_or_else(|| "Update".to_owned()),
            subresource: text("subresource").filter(|s| !s.is_empty()),
        })
    }

    /// Whether this is winfleet's own server-side apply.
    pub fn is_winfleet_apply(&self) -> bool {
        self.name == FIELD_MANAGER && self.operation == "Apply" && self.subresource.is_none()
    }

    /// From a `FieldManagerConflict` cause's message, as kube-apiserver
    /// writes it: `conflict with "kubectl" with subresource "scale" using
    /// machine.openshift.io/v1beta1` (`using` only for an Update).
    pub fn from_conflict_message(message: &str) -> Option<Manager> {
        let (name, rest) = quoted(message.split_once("conflict with ")?.1)?;
        let subresource = rest.split_once("with subresource ").and_then(|(_, s)| quoted(s)).map(|(s, _)| s);
        let operation = if rest.contains(" using ") { "Update" } else { "Apply" };
        Some(Manager { name, operation: operation.to_owned(), subresource })
    }
}

/// The Go-quoted string at the start of `text` and what follows it.
fn quoted(text: &str) -> Option<(String, &str)> {
    let body = text.strip_prefix('"')?;
    let mut escaped = false;
    let end = body.char_indices().find_map(|(i, c)| match (escaped, c) {
        (false, '"') => Some(i),
        (false, '\\') => {
            escaped = true;
            None
        }
        _ => {
            escaped = false;
            None
        }
    })?;
    let name = serde_json::from_str(&text[..end + 2]).unwrap_or_else(|_| body[..end].to_owned());
    Some((name, &body[end + 1..]))
}

impl fmt::Display for Manager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} ({}", self.name, self.operation)?;
        if let Some(sub) = &self.subresource {
            write!(f, ", subresource {sub}")?;
        }
        f.write_str(")")
    }
}

/// A field winfleet would set that another field manager owns with another
/// value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FieldConflict {
    /// JSON pointer of the field.
    pub pointer: String,
    /// Who owns it.
    pub manager: Manager,
    /// Its live value (absent when only the API server's 409 told).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live: Option<Value>,
    /// The repository's value.
    pub wanted: Option<Value>,
}

impl fmt::Display for FieldConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} owned by {}", self.pointer, self.manager)?;
        if let Some(live) = &self.live {
            write!(f, ", live {}", show_value(live))?;
        }
        if let Some(wanted) = &self.wanted {
            write!(f, ", repository {}", show_value(wanted))?;
        }
        Ok(())
    }
}

/// Every manager of the live object with the leaf pointers it owns.
fn owners(live: &Value) -> Vec<(Manager, Vec<String>)> {
    let Some(entries) = live.pointer("/metadata/managedFields").and_then(Value::as_array) else { return Vec::new() };
    entries
        .iter()
        .filter_map(|entry| {
            let mut owned = Vec::new();
            owned_leaves(entry.get("fieldsV1")?, String::new(), &mut owned);
            Some((Manager::of(entry)?, owned))
        })
        .collect()
}

/// The fields of `object` (what winfleet applies) that another manager
/// owns with another value live, sorted by pointer then manager.
pub fn conflicts(live: &Value, object: &Value) -> Vec<FieldConflict> {
    let mut found = Vec::new();
    for (manager, owned) in owners(live) {
        if manager.is_winfleet_apply() {
            continue;
        }
        for pointer in owned {
            let Some(wanted) = object.pointer(&pointer).filter(|_| !pointer.starts_with("/status")) else { continue };
            let now = live.pointer(&pointer);
            if now != Some(wanted) {
                let (live, wanted) = (now.cloned(), Some(wanted.clone()));
                found.push(FieldConflict { pointer, manager: manager.clone(), live, wanted });
            }
        }
    }
    found.sort_by(|a, b| (&a.pointer, &a.manager).cmp(&(&b.pointer, &b.manager)));
    found
}

/// The conflicts a 409 named (`FieldManagerConflict` causes: the field as
/// `.spec.replicas`, the manager in the message), each matched to the
/// pointer of the applied field it names.
pub fn from_causes<'c>(causes: impl IntoIterator<Item = (&'c str, &'c str)>, object: &Value) -> Vec<FieldConflict> {
    let applied: Vec<String> = crate::plan::fields::leaves(object).into_keys().collect();
    causes
        .into_iter()
        .filter_map(|(field, message)| {
            let manager = Manager::from_conflict_message(message)?;
            let pointer =
                applied.iter().find(|p| dotted(p) == field).cloned().unwrap_or_else(|| field.replace('.', "/"));
            let wanted = object.pointer(&pointer).cloned();
            Some(FieldConflict { pointer, manager, live: None, wanted })
        })
        .collect()
}

/// A JSON pointer as the API server writes a field path (`.spec.replicas`).
fn dotted(pointer: &str) -> String {
    pointer.split('/').skip(1).map(|s| format!(".{}", s.replace("~1", "/").replace("~0", "~"))).collect()
}

/// Leaf fields winfleet applied before (its Apply entry in managedFields)
/// that the repository no longer sets: server-side apply removes them.
pub fn dropped_fields(live: &Value, object: &Value) -> Vec<FieldChange> {
    owners(live)
        .into_iter()
        .filter(|(manager, _)| manager.is_winfleet_apply())
        .flat_map(|(_, owned)| owned)
        .filter(|pointer| object.pointer(pointer).is_none())
        .filter_map(|pointer| {
            let from = live.pointer(&pointer)?.clone();
            Some(FieldChange { pointer, from: Some(from), to: None })
        })
        .collect()
}

/// Leaf pointers of a `fieldsV1` set: `f:<name>` descends into a field; a
/// field whose set is empty or holds list-element keys (`k:`, `v:`, `i:`) is
/// a leaf (lists are compared whole).
fn owned_leaves(set: &Value, at: String, out: &mut Vec<String>) {
    let Some(map) = set.as_object() else { return };
    let fields: Vec<(&str, &Value)> = map.iter().filter_map(|(k, v)| Some((k.strip_prefix("f:")?, v))).collect();
    let elements = map.keys().any(|k| k.starts_with("k:") || k.starts_with("v:") || k.starts_with("i:"));
    if fields.is_empty() || elements {
        if !at.is_empty() {
            out.push(at);
        }
        return;
    }
    for (name, sub) in fields {
        owned_leaves(sub, child(&at, name), out);
    }
}
