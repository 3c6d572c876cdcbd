//! The CustomResourceDefinitions the real control plane installs
//! (tests/controlplane/crds, read once), so the in-memory server serves
//! the OpenShift custom resources as kube-apiserver v1.37.2 does with them:
//! - the status subresource is declared by the CRD (`subresources.status`):
//!   with it, create drops `status` and main-resource writes keep the
//!   stored one; without it (Network), status is written with the object;
//! - the structural schema prunes what it does not declare (unless
//!   `x-kubernetes-preserve-unknown-fields`, or under `additionalProperties`)
//!   and applies `default`s (a null where the schema is not `nullable` is
//!   dropped, or defaulted) — as the real server's decoder does on every
//!   write (apiextensions-apiserver's pruning and defaulting);
//! - server-side apply refuses a field the schema does not declare (the
//!   typed patch cannot be built: 500, see [`Crd::undeclared`]).
//!
//! Not done: validation (types, enums, `required`, formats), conversion,
//! the scale subresource, metadata pruning.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use serde_json::{Map, Value};

use super::resources::Resource;
use super::status::ApiError;

/// One CRD's served version: what the in-memory server reads of it.
#[derive(Debug)]
pub(crate) struct Crd {
    /// Has a status subresource.
    pub status: bool,
    /// `openAPIV3Schema`.
    schema: Value,
}

/// Where the CRDs are: the real control plane's own files.
fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/controlplane/crds")
}

/// Every CRD by (group, plural). A file that cannot be read is a broken
/// checkout: the test panics with the file's name.
fn all() -> &'static BTreeMap<(String, String), Crd> {
    static CRDS: OnceLock<BTreeMap<(String, String), Crd>> = OnceLock::new();
    CRDS.get_or_init(|| {
        let mut out = BTreeMap::new();
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir())
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir().display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect();
        files.sort();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
            let crd: Value =
                serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", file.display()));
            let group = crd.pointer("/spec/group").and_then(Value::as_str).unwrap_or_default();
            let plural = crd.pointer("/spec/names/plural").and_then(Value::as_str).unwrap_or_default();
            let versions = crd.pointer("/spec/versions").and_then(Value::as_array).cloned().unwrap_or_default();
            let Some(version) = versions.iter().find(|v| v["storage"] == true).or(versions.first()) else {
                panic!("{}: no version", file.display())
            };
            let status = version.pointer("/subresources/status").is_some();
            let schema = version.pointer("/schema/openAPIV3Schema").cloned().unwrap_or(Value::Null);
            out.insert((group.to_owned(), plural.to_owned()), Crd { status, schema });
        }
        out
    })
}

/// The CRD of `group`/`plural`, if the control plane installs one.
pub(crate) fn find(group: &str, plural: &str) -> Option<&'static Crd> {
    if group.is_empty() {
        return None;
    }
    all().get(&(group.to_owned(), plural.to_owned()))
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool).unwrap_or(false)
}

impl Crd {
    /// Prunes and defaults `obj` as the real server decodes a write.
    pub fn structural(&self, obj: &mut Value) {
        walk(obj, &self.schema, true);
    }

    /// The first field of an applied configuration that the schema does
    /// not declare, as kube-apiserver names it (`.spec.x`).
    pub fn undeclared(&self, obj: &Value) -> Option<String> {
        first_undeclared(obj, &self.schema, true, "")
    }
}

/// A custom resource's write as the real server decodes it: pruned and
/// defaulted by its CRD's schema; when `creating` the main resource of a
/// type with a status subresource, its `status` dropped. Built-in types
/// are left as they are.
pub(crate) fn decode(res: &Resource, subresource: Option<&str>, v: &mut Value, creating: bool) {
    let Some(crd) = res.crd() else { return };
    crd.structural(v);
    if creating
        && crd.status
        && subresource.is_none()
        && let Some(m) = v.as_object_mut()
    {
        m.remove("status");
    }
}

/// kube-apiserver's answer to an applied field a custom resource's schema
/// does not declare: the typed patch cannot be built, a 500 without reason.
pub(crate) fn undeclared(res: &Resource, namespace: Option<&str>, name: &str, field: &str) -> ApiError {
    let object = match namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_owned(),
    };
    let (api_version, kind) = (res.api_version(), res.kind);
    ApiError::new(
        500,
        "",
        format!(
            "failed to create typed patch object ({object}; {api_version}, Kind={kind}): {field}: field not declared in schema"
        ),
    )
}

/// Keys kept at the root and in embedded resources whatever the schema says.
fn object_keys(key: &str) -> bool {
    matches!(key, "apiVersion" | "kind" | "metadata")
}

fn walk(v: &mut Value, schema: &Value, root: bool) {
    match v {
        Value::Object(map) => walk_object(map, schema, root),
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                items.iter_mut().for_each(|i| walk(i, item, false));
            }
        }
        _ => {}
    }
}

fn walk_object(map: &mut Map<String, Value>, schema: &Value, root: bool) {
    let embedded = root || flag(schema, "x-kubernetes-embedded-resource");
    let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
    let properties = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        if root && key == "metadata" {
            continue;
        }
        let child = properties.and_then(|p| p.get(&key)).or(additional);
        match child {
            Some(child) => {
                let null = map.get(&key).is_some_and(Value::is_null);
                if null && !flag(child, "nullable") {
                    map.remove(&key);
                } else if let Some(value) = map.get_mut(&key) {
                    walk(value, child, false);
                }
            }
            None if preserve || (embedded && object_keys(&key)) => {}
            None => {
                map.remove(&key);
            }
        }
    }
    for (key, child) in properties.into_iter().flatten() {
        if let Some(default) = child.get("default")
            && !map.contains_key(key)
        {
            let mut value = default.clone();
            walk(&mut value, child, false);
            map.insert(key.clone(), value);
        }
    }
}

fn first_undeclared(v: &Value, schema: &Value, root: bool, path: &str) -> Option<String> {
    match v {
        Value::Object(map) => {
            if flag(schema, "x-kubernetes-preserve-unknown-fields") {
                return None;
            }
            let embedded = root || flag(schema, "x-kubernetes-embedded-resource");
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (key, value) in map {
                let here = format!("{path}.{key}");
                match properties.and_then(|p| p.get(key)).or(additional) {
                    _ if embedded && object_keys(key) => {}
                    Some(child) => {
                        if let Some(found) = first_undeclared(value, child, false, &here) {
                            return Some(found);
                        }
                    }
                    None => return Some(here),
                }
            }
            None
        }
        Value::Array(items) => {
            let item = schema.get("items")?;
            items.iter().enumerate().find_map(|(i, v)| first_undeclared(v, item, false, &format!("{path}[{i}]")))
        }
        _ => None,
    }
}
