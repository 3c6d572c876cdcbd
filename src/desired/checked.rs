//! Stages two and three (kind, JSON Schema, typed parse) of one file's
//! documents. They are pure in the file (its path and bytes), so a file
//! that is the same in several revisions (every file a pull request leaves
//! alone) is checked once, on the parser threads, and each revision takes
//! the result: the plan's cost follows the change.

use std::sync::{Arc, Mutex};

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::kinds::{self, Kind};
use super::typed::typed_parse;
use super::{Doc, Documents, schema, yaml};
use crate::diagnostic::Diagnostic;

/// One document after stages two and three: typed, or its errors.
#[derive(Clone, Debug)]
pub enum Checked {
    /// A `windows-instances` ConfigMap.
    ConfigMap(Doc<kinds::configmap::InstancesConfigMap>),
    /// A `windows-services-*` ConfigMap.
    Services(Doc<kinds::services::ServicesConfigMap>),
    /// A WindowsInstanceList.
    InstanceList(Doc<kinds::instances::WindowsInstanceList>),
    /// A MachineSet.
    MachineSet(Doc<kinds::machineset::MachineSet>),
    /// An ImageDigestMirrorSet.
    DigestMirrors(Doc<kinds::mirrors::ImageDigestMirrorSet>),
    /// An ImageTagMirrorSet.
    TagMirrors(Doc<kinds::mirrors::ImageTagMirrorSet>),
    /// A Proxy.
    Proxy(Doc<kinds::proxy::Proxy>),
    /// A Fleet.
    Fleet(Doc<kinds::fleet::Fleet>),
    /// Not a document winfleet reads: the errors that say why.
    Refused(Vec<Diagnostic>),
}

impl Checked {
    /// The document as written, as the typed document keeps it (`None`
    /// when refused).
    pub fn raw(&self) -> Option<&Arc<Value>> {
        match self {
            Checked::ConfigMap(d) => Some(&d.raw),
            Checked::Services(d) => Some(&d.raw),
            Checked::InstanceList(d) => Some(&d.raw),
            Checked::MachineSet(d) => Some(&d.raw),
            Checked::DigestMirrors(d) => Some(&d.raw),
            Checked::TagMirrors(d) => Some(&d.raw),
            Checked::Proxy(d) => Some(&d.raw),
            Checked::Fleet(d) => Some(&d.raw),
            Checked::Refused(_) => None,
        }
    }

    /// Files the document with its kind, or reports its errors.
    pub fn add(self, out: &mut Documents, diagnostics: &mut Vec<Diagnostic>) {
        match self {
            Checked::ConfigMap(d) => out.configmaps.push(d),
            Checked::Services(d) => out.services.push(d),
            Checked::InstanceList(d) => out.instance_lists.push(d),
            Checked::MachineSet(d) => out.machine_sets.push(d),
            Checked::DigestMirrors(d) => out.digest_mirrors.push(d),
            Checked::TagMirrors(d) => out.tag_mirrors.push(d),
            Checked::Proxy(d) => out.proxies.push(d),
            Checked::Fleet(d) => out.fleets.push(d),
            Checked::Refused(errors) => diagnostics.extend(errors),
        }
    }
}

/// Checks every document of the file at `path` (`text` is its contents,
/// `None` when they are not UTF-8).
pub fn check_file(path: &str, text: Option<&str>, docs: &[Arc<Value>]) -> Vec<Checked> {
    docs.iter().enumerate().map(|(index, doc)| check(path, text, index, Arc::clone(doc))).collect()
}

fn check(path: &str, text: Option<&str>, index: usize, doc: Arc<Value>) -> Checked {
    let kind = match kinds::identify(&doc) {
        Ok(kind) => kind,
        Err(kinds::Unrecognised::NotAnObject(pointer, message) | kinds::Unrecognised::Unknown(pointer, message)) => {
            return Checked::Refused(vec![Diagnostic::error(path, index, pointer, message)]);
        }
    };
    let problems = schema::validate(kind, &doc);
    if !problems.is_empty() {
        return Checked::Refused(problems.into_iter().map(|(p, m)| Diagnostic::error(path, index, p, m)).collect());
    }
    // The third stage: the typed parse. The schema already accepted the
    // document; what remains are the limits JSON Schema cannot state, such
    // as `22.0` where an integer is expected.
    fn typed<T: DeserializeOwned>(path: &str, index: usize, doc: Arc<Value>) -> Result<Doc<T>, (String, String)> {
        typed_parse::<T>(&doc).map(|value| Doc { path: path.to_owned(), index, value, raw: doc })
    }
    let checked = match kind {
        Kind::InstancesConfigMap => typed(path, index, doc).map(|mut d: Doc<kinds::configmap::InstancesConfigMap>| {
            d.value.order = data_order(text, &d);
            d.raw = slim(&d.raw);
            Checked::ConfigMap(d)
        }),
        Kind::ServicesConfigMap => typed(path, index, doc).map(|mut d: Doc<kinds::services::ServicesConfigMap>| {
            d.value.services_at = position(text, index, "/data/services");
            Checked::Services(d)
        }),
        Kind::WindowsInstanceList => typed(path, index, doc).map(|mut d| {
            d.raw = slim(&d.raw);
            Checked::InstanceList(d)
        }),
        Kind::MachineSet => typed(path, index, doc).map(Checked::MachineSet),
        Kind::ImageDigestMirrorSet => typed(path, index, doc).map(Checked::DigestMirrors),
        Kind::ImageTagMirrorSet => typed(path, index, doc).map(Checked::TagMirrors),
        Kind::Proxy => typed(path, index, doc).map(Checked::Proxy),
        Kind::Fleet => typed(path, index, doc).map(Checked::Fleet),
    };
    checked
        .unwrap_or_else(|(pointer, message)| Checked::Refused(vec![Diagnostic::error(path, index, pointer, message)]))
}

/// What an instance document keeps as written once typed: only what says
/// which document it is (apiVersion, kind, metadata). Its typed value holds
/// the rest, and nothing reads an instance list's raw form, so the parsed
/// tree (most of a large fleet's memory) is freed on the parser thread
/// instead of living until both revisions' rules are done.
fn slim(doc: &Value) -> Arc<Value> {
    let keep = ["apiVersion", "kind", "metadata"];
    let object = doc.as_object().map(|o| o.iter().filter(|(k, _)| keep.contains(&k.as_str())));
    Arc::new(Value::Object(object.into_iter().flatten().map(|(k, v)| (k.clone(), v.clone())).collect()))
}

/// The keys of a ConfigMap's `data` in the order its file lists them
/// (empty when the file cannot be read as text).
fn data_order(text: Option<&str>, doc: &Doc<kinds::configmap::InstancesConfigMap>) -> Vec<String> {
    let Some(positions) =
        text.map(yaml::positions).and_then(|mut p| (doc.index < p.len()).then(|| p.swap_remove(doc.index)))
    else {
        return Vec::new();
    };
    let mut keys: Vec<(&(usize, usize), &String)> = doc
        .value
        .data
        .keys()
        .filter_map(|key| positions.get(&crate::diagnostic::child("/data", key)).map(|at| (at, key)))
        .collect();
    keys.sort();
    keys.into_iter().map(|(_, key)| key.clone()).collect()
}

/// Where `pointer` is written in document `index` of `text`; (0, 0) when not found.
fn position(text: Option<&str>, index: usize, pointer: &str) -> (usize, usize) {
    text.map(yaml::positions).and_then(|p| p.get(index).and_then(|doc| doc.get(pointer).copied())).unwrap_or((0, 0))
}

/// A file's checked documents, shared by the revisions that hold the same
/// file: each takes them once; the last one takes them, the others get a
/// copy, so no copy outlives the revisions that need one.
#[derive(Debug, Default)]
pub struct Shared {
    inner: Mutex<(usize, Option<Vec<Checked>>)>,
}

impl Shared {
    /// Checked documents for `users` revisions (`None`: each checks the file itself).
    pub fn new(users: usize, checked: Option<Vec<Checked>>) -> Self {
        Shared { inner: Mutex::new((users, checked)) }
    }

    /// This revision's checked documents, `None` when they were not checked
    /// ahead (the revision then checks the file itself).
    pub fn take(&self) -> Option<Vec<Checked>> {
        let Ok(mut inner) = self.inner.lock() else { return None };
        inner.0 = inner.0.saturating_sub(1);
        if inner.0 == 0 { inner.1.take() } else { inner.1.clone() }
    }
}
