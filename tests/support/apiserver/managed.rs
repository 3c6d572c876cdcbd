//! Field ownership (`metadata.managedFields`) and server-side apply.
//!
//! Field sets are sets of leaf paths. Maps are granular (every key is its
//! own field, including metadata.labels/annotations); lists and scalars are
//! leaves (lists are atomic, as if every list were `x-kubernetes-list-type:
//! atomic`); an empty map is a leaf. They are stored in the real `FieldsV1`
//! format (`{"f:spec":{"f:replicas":{}}}`, `".": {}` when a map is owned as
//! well as some of its keys).

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::status::ApiError;

pub(crate) type Path = Vec<String>;
pub(crate) type FieldSet = BTreeSet<Path>;

/// Metadata keys the server owns; never part of a field set.
const SERVER_META: &[&str] = &[
    "name",
    "namespace",
    "generateName",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// Whether a path can be owned. `skip_status`: the status of a resource
/// with a status subresource is not owned through the main resource.
fn tracked(path: &[String], skip_status: bool) -> bool {
    match path {
        [] => false,
        [first, ..] if first == "apiVersion" || first == "kind" => false,
        [first] if first == "metadata" => false,
        [first, second, ..] if first == "metadata" => !SERVER_META.contains(&second.as_str()),
        [first, ..] if first == "status" => !skip_status,
        _ => true,
    }
}

fn is_map(v: &Value) -> bool {
    v.as_object().is_some_and(|m| !m.is_empty())
}

fn collect(v: &Value, path: &mut Path, skip_status: bool, out: &mut FieldSet) {
    if path.is_empty() || (is_map(v) && !(path.len() == 1 && path[0] == "status" && skip_status)) {
        if let Some(m) = v.as_object() {
            for (k, c) in m {
                path.push(k.clone());
                if !(path.len() == 1 && (k == "apiVersion" || k == "kind"))
                    && !(path.len() == 2 && path[0] == "metadata" && SERVER_META.contains(&k.as_str()))
                {
                    collect(c, path, skip_status, out);
                }
                path.pop();
            }
        }
    } else if tracked(path, skip_status) {
        out.insert(path.clone());
    }
}

/// Every owned-able leaf path of an object.
pub(crate) fn leaves(v: &Value, skip_status: bool) -> FieldSet {
    let mut out = FieldSet::new();
    collect(v, &mut Vec::new(), skip_status, &mut out);
    out
}

fn leaves_under(v: &Value, prefix: &Path, skip_status: bool, out: &mut FieldSet) {
    let mut p = prefix.clone();
    if is_map(v) {
        collect(v, &mut p, skip_status, out);
    } else if tracked(&p, skip_status) {
        out.insert(p);
    }
}

/// Fields a non-apply write changed (set or modified) and removed.
pub(crate) fn diff(old: &Value, new: &Value, skip_status: bool) -> (FieldSet, FieldSet) {
    let (mut changed, mut removed) = (FieldSet::new(), FieldSet::new());
    diff_at(Some(old), Some(new), &mut Vec::new(), skip_status, &mut changed, &mut removed);
    (changed, removed)
}

fn diff_at(
    old: Option<&Value>,
    new: Option<&Value>,
    path: &mut Path,
    skip_status: bool,
    changed: &mut FieldSet,
    removed: &mut FieldSet,
) {
    if !path.is_empty() && !tracked_prefix(path, skip_status) {
        return;
    }
    match (old, new) {
        (Some(o), Some(n)) if (is_map(o) && is_map(n)) || path.is_empty() => {
            let (om, nm) = (o.as_object(), n.as_object());
            let mut keys: BTreeSet<&String> = BTreeSet::new();
            keys.extend(om.into_iter().flat_map(|m| m.keys()));
            keys.extend(nm.into_iter().flat_map(|m| m.keys()));
            for k in keys {
                path.push(k.clone());
                diff_at(om.and_then(|m| m.get(k)), nm.and_then(|m| m.get(k)), path, skip_status, changed, removed);
                path.pop();
            }
        }
        (Some(o), Some(n)) => {
            if o != n {
                if is_map(o) || is_map(n) {
                    removed.insert(path.clone());
                    leaves_under(n, path, skip_status, changed);
                } else if tracked(path, skip_status) {
                    changed.insert(path.clone());
                }
            }
        }
        (None, Some(n)) => leaves_under(n, path, skip_status, changed),
        (Some(o), None) => {
            removed.insert(path.clone());
            leaves_under(o, path, skip_status, removed);
        }
        (None, None) => {}
    }
}

/// Whether anything under this path can be owned.
fn tracked_prefix(path: &[String], skip_status: bool) -> bool {
    match path {
        [first] if first == "metadata" => true,
        _ => tracked(path, skip_status),
    }
}

fn overlaps(a: &[String], b: &[String]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

fn remove_overlapping(set: &mut FieldSet, paths: &FieldSet) {
    set.retain(|p| !paths.iter().any(|q| overlaps(p, q)));
}

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    pub manager: String,
    pub operation: String,
    pub api_version: String,
    pub time: Option<String>,
    pub subresource: Option<String>,
    pub fields: FieldSet,
}

impl Entry {
    fn to_json(&self) -> Value {
        let mut v = json!({
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "fieldsType": "FieldsV1",
            "fieldsV1": to_fields_v1(&self.fields),
        });
        if let Some(t) = &self.time {
            v["time"] = json!(t);
        }
        if let Some(s) = &self.subresource {
            v["subresource"] = json!(s);
        }
        v
    }

    /// How real conflict messages name a manager. The real server names
    /// it by its identifier, which leaves the time out, so its messages
    /// never carry one (kube-apiserver v1.37.2).
    fn describe(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if let Some(sub) = &self.subresource {
            s.push_str(&format!(" with subresource {sub:?}"));
        }
        if self.operation == "Update" {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }

    /// Whether this is the applier's own entry. A manager is its name,
    /// operation and subresource: the applier's own `Update` entry is
    /// another manager, and conflicts like any other (as on the real server).
    fn is_applier(&self, w: &Writer<'_>) -> bool {
        self.manager == w.manager && self.operation == "Apply" && self.subresource.as_deref() == w.subresource
    }
}

/// Builds the `FieldsV1` tree of a field set.
pub(crate) fn to_fields_v1(set: &FieldSet) -> Value {
    fn build(set: &FieldSet, prefix: &[String]) -> Map<String, Value> {
        let children: BTreeSet<&String> =
            set.iter().filter(|p| p.len() > prefix.len() && p.starts_with(prefix)).map(|p| &p[prefix.len()]).collect();
        let mut m = Map::new();
        for c in children {
            let mut next = prefix.to_vec();
            next.push(c.clone());
            m.insert(format!("f:{c}"), Value::Object(build(set, &next)));
        }
        // A path that is owned itself and has owned children is marked with ".".
        if !prefix.is_empty() && !m.is_empty() && set.contains(prefix) {
            m.insert(".".into(), json!({}));
        }
        m
    }
    Value::Object(build(set, &[]))
}

/// Parses a `FieldsV1` tree. List-item keys (`k:`, `v:`, `i:`) written by a
/// real server are folded into their list, which is a leaf here.
pub(crate) fn from_fields_v1(v: &Value) -> FieldSet {
    fn walk(v: &Value, path: &mut Path, out: &mut FieldSet) {
        let Some(m) = v.as_object() else { return };
        if m.is_empty() && !path.is_empty() {
            out.insert(path.clone());
            return;
        }
        for (k, c) in m {
            if k == "." {
                if !path.is_empty() {
                    out.insert(path.clone());
                }
            } else if let Some(seg) = k.strip_prefix("f:") {
                path.push(seg.to_string());
                walk(c, path, out);
                path.pop();
            } else if !path.is_empty() {
                out.insert(path.clone());
            }
        }
    }
    let mut out = FieldSet::new();
    walk(v, &mut Vec::new(), &mut out);
    out
}

/// The entries of an object's `metadata.managedFields`.
pub(crate) fn entries(obj: &Value) -> Vec<Entry> {
    let Some(list) = obj.pointer("/metadata/managedFields").and_then(Value::as_array) else { return Vec::new() };
    list.iter()
        .filter_map(|e| {
            let s = |k: &str| e.get(k).and_then(Value::as_str).map(str::to_string);
            Some(Entry {
                manager: s("manager")?,
                operation: s("operation").unwrap_or_else(|| "Update".into()),
                api_version: s("apiVersion").unwrap_or_default(),
                time: s("time"),
                subresource: s("subresource"),
                fields: e.get("fieldsV1").map(from_fields_v1).unwrap_or_default(),
            })
        })
        .collect()
}

/// Writes entries back into `metadata.managedFields` (dropping empty ones).
pub(crate) fn store_entries(obj: &mut Value, entries: &[Entry]) {
    let list: Vec<Value> = entries.iter().filter(|e| !e.fields.is_empty()).map(Entry::to_json).collect();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// Who wrote, and how.
pub(crate) struct Writer<'a> {
    pub manager: &'a str,
    pub api_version: &'a str,
    pub subresource: Option<&'a str>,
    pub now: &'a str,
}

fn own_entry<'e>(entries: &'e mut Vec<Entry>, w: &Writer<'_>, operation: &str) -> &'e mut Entry {
    let pos = entries
        .iter()
        .position(|e| e.manager == w.manager && e.operation == operation && e.subresource.as_deref() == w.subresource);
    match pos {
        Some(i) => &mut entries[i],
        None => {
            entries.push(Entry {
                manager: w.manager.to_string(),
                operation: operation.to_string(),
                api_version: w.api_version.to_string(),
                time: None,
                subresource: w.subresource.map(str::to_string),
                fields: FieldSet::new(),
            });
            let last = entries.len() - 1;
            &mut entries[last]
        }
    }
}

/// Ownership after a non-apply write (create, PUT, merge/JSON/strategic
/// patch): the writer's Update entry takes the changed fields from everyone.
pub(crate) fn record_update(entries: &mut Vec<Entry>, w: &Writer<'_>, changed: &FieldSet, removed: &FieldSet) {
    let mut touched = changed.clone();
    touched.extend(removed.iter().cloned());
    for e in entries.iter_mut() {
        if !(e.manager == w.manager && e.operation == "Update" && e.subresource.as_deref() == w.subresource) {
            remove_overlapping(&mut e.fields, &touched);
        }
    }
    let own = own_entry(entries, w, "Update");
    let before = own.fields.clone();
    remove_overlapping(&mut own.fields, removed);
    own.fields.extend(changed.iter().cloned());
    if own.fields != before || own.time.is_none() {
        own.time = Some(w.now.to_string());
        own.api_version = w.api_version.to_string();
    }
    entries.retain(|e| !e.fields.is_empty());
}

fn get<'v>(v: &'v Value, path: &[String]) -> Option<&'v Value> {
    path.iter().try_fold(v, |cur, seg| cur.get(seg))
}

fn remove_path(v: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut cur = v;
    for seg in parents {
        match cur.get_mut(seg) {
            Some(c) => cur = c,
            None => return,
        }
    }
    if let Some(m) = cur.as_object_mut() {
        m.remove(last);
    }
}

/// Recursive merge: maps merge key by key, everything else is replaced.
pub(crate) fn merge_into(target: &mut Value, src: &Value) {
    match (target.as_object_mut(), src.as_object()) {
        (Some(t), Some(s)) => {
            for (k, v) in s {
                match t.get_mut(k) {
                    Some(tv) if tv.is_object() && v.is_object() => merge_into(tv, v),
                    _ => {
                        t.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        _ => *target = src.clone(),
    }
}

/// Server-side apply of `applied` onto `live` by `w.manager`. Returns the
/// merged object with updated managedFields, or the 409 conflict error.
pub(crate) fn apply(
    live: &Value,
    applied: &Value,
    w: &Writer<'_>,
    force: bool,
    skip_status: bool,
) -> Result<Value, ApiError> {
    let mut entries = entries(live);
    let fields = leaves(applied, skip_status);

    // Conflicts: another manager owns a field this config sets to a different value.
    let mut conflicts: Vec<(usize, Path)> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if e.is_applier(w) {
            continue;
        }
        for q in &fields {
            if e.fields.iter().any(|p| overlaps(p, q)) && get(live, q) != get(applied, q) {
                conflicts.push((i, q.clone()));
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflict_error(&entries, &conflicts));
    }
    for (i, q) in &conflicts {
        let one: FieldSet = [q.clone()].into();
        remove_overlapping(&mut entries[*i].fields, &one);
    }

    let mut merged = live.clone();
    let mut body = applied.clone();
    if let Some(m) = body.as_object_mut() {
        m.remove("metadata");
        if skip_status {
            m.remove("status");
        }
    }
    merge_into(&mut merged, &body);
    if let (Some(meta), Some(target)) = (applied.get("metadata").and_then(Value::as_object), merged.get_mut("metadata"))
    {
        for (k, v) in meta {
            if !SERVER_META.contains(&k.as_str()) {
                match target.get_mut(k) {
                    Some(t) if t.is_object() && v.is_object() => merge_into(t, v),
                    _ => {
                        if let Some(t) = target.as_object_mut() {
                            t.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
        }
    }

    let own = own_entry(&mut entries, w, "Apply");
    let previous = std::mem::replace(&mut own.fields, fields.clone());
    if own.fields != previous || own.time.is_none() {
        own.time = Some(w.now.to_string());
        own.api_version = w.api_version.to_string();
    }
    // Fields this manager applied before and omits now are removed unless
    // someone else still owns them.
    for gone in previous.difference(&fields) {
        if fields.iter().any(|f| overlaps(f, gone)) {
            continue;
        }
        let owned_elsewhere = entries
            .iter()
            .any(|e| !(e.manager == w.manager && e.operation == "Apply") && e.fields.iter().any(|p| overlaps(p, gone)));
        if !owned_elsewhere {
            remove_path(&mut merged, gone);
            prune_empty_parents(&mut merged, gone, &entries);
        }
    }
    entries.retain(|e| !e.fields.is_empty());
    store_entries(&mut merged, &entries);
    Ok(merged)
}

fn prune_empty_parents(v: &mut Value, path: &[String], entries: &[Entry]) {
    let mut parent = path.to_vec();
    while parent.len() > 1 {
        parent.pop();
        let empty = get(v, &parent).and_then(Value::as_object).is_some_and(Map::is_empty);
        let owned = entries.iter().any(|e| e.fields.contains(&parent));
        if empty && !owned && !(parent.len() == 1 && parent[0] == "metadata") {
            remove_path(v, &parent);
        } else {
            break;
        }
    }
}

fn path_string(p: &Path) -> String {
    p.iter().map(|s| format!(".{s}")).collect()
}

fn conflict_error(entries: &[Entry], conflicts: &[(usize, Path)]) -> ApiError {
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(i, p)| {
            json!({
                "reason": "FieldManagerConflict",
                "message": format!("conflict with {}", entries[*i].describe()),
                "field": path_string(p),
            })
        })
        .collect();
    let message = if let [(i, p)] = conflicts {
        format!("Apply failed with 1 conflict: conflict with {}: {}", entries[*i].describe(), path_string(p))
    } else {
        let mut managers: Vec<usize> = conflicts.iter().map(|(i, _)| *i).collect();
        managers.sort_by_key(|i| entries[*i].describe());
        managers.dedup();
        let mut lines = Vec::new();
        for m in managers {
            lines.push(format!("conflicts with {}:", entries[m].describe()));
            for (_, p) in conflicts.iter().filter(|(i, _)| *i == m) {
                lines.push(format!("- {}", path_string(p)));
            }
        }
        format!("Apply failed with {} conflicts: {}", conflicts.len(), lines.join("\n"))
    };
    ApiError::new(409, "Conflict", message).with_details(json!({ "causes": causes }))
}
